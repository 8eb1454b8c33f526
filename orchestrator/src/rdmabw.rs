//! Everything railsweep knows about rdmabw's command line: the argument vectors it runs and how
//! it reads what comes back. When rdmabw's flags change, this module is the one to change.
//!
//! The documents themselves ([`RailsReport`], [`BwReport`]) are bench-core's types, the same
//! ones rdmabw prints with.

use anyhow::{bail, Context, Result};
use results::rdmabw::flags::{
    fmt_num, LatTest, LatencyFlags, RailFlags, ServerRailFlags, TestFlags,
};
use results::rdmabw::gpu::GpuSelect;
use results::rdmabw::lat::LatReport;
use results::rdmabw::rails::Capability;
use results::rdmabw::rails::RailsReport;
use results::rdmabw::report::{BwReport, TestStatus};
use results::rdmabw::REPORT_SCHEMA_VERSION;
use results::Cause;

use crate::runner::{Exit, Output};

/// The rdmabw release this railsweep was built with (one workspace, one version).
pub const OWN_VERSION: &str = results::VERSION;

/// `rdmabw --version`.
pub fn version_argv(bin: &str) -> Vec<String> {
    vec![bin.to_string(), "--version".to_string()]
}

/// The version in `rdmabw X.Y.Z` (the first line of `--version`).
pub fn parse_version(stdout: &[u8]) -> Result<String> {
    let text = String::from_utf8_lossy(stdout);
    let line = text.lines().next().unwrap_or("").trim();
    match line.strip_prefix("rdmabw ") {
        Some(v) if !v.trim().is_empty() => Ok(v.trim().to_string()),
        _ => bail!("`--version` printed {line:?}, not `rdmabw X.Y.Z`: is this rdmabw?"),
    }
}

/// Whether an rdmabw of version `theirs` speaks the same documents and protocol as ours: the
/// same major version, and for 0.x the same minor version too (semver's rule for 0.x).
pub fn compatible(theirs: &str, ours: &str) -> bool {
    let parts = |v: &str| -> Option<(u64, u64)> {
        let core = v.split(['-', '+']).next()?;
        let mut it = core.split('.');
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    };
    match (parts(theirs), parts(ours)) {
        (Some((ta, tb)), Some((oa, ob))) => ta == oa && (oa > 0 || tb == ob),
        _ => false,
    }
}

/// `rdmabw rails --json`.
pub fn rails_argv(bin: &str) -> Vec<String> {
    vec![bin.to_string(), "rails".to_string(), "--json".to_string()]
}

/// Read what `rdmabw rails --json` printed.
pub fn parse_rails(out: &Output) -> Result<RailsReport> {
    if !out.exit.success() {
        bail!(
            "`rdmabw rails --json` failed: {}{}",
            out.exit,
            match out.stderr_tail(3) {
                t if t.is_empty() => String::new(),
                t => format!(" ({t})"),
            }
        );
    }
    if let Some(line) = &out.overlong {
        bail!("`rdmabw rails --json` printed {line}");
    }
    let report: RailsReport = serde_json::from_slice(&out.stdout)
        .context("`rdmabw rails --json` printed something that is not a rails report")?;
    if report.schema_version > REPORT_SCHEMA_VERSION {
        bail!(
            "`rdmabw rails --json` speaks schema {}, this railsweep knows up to {REPORT_SCHEMA_VERSION}",
            report.schema_version
        );
    }
    Ok(report)
}

/// `rdmabw gpus --json`.
pub fn gpus_argv(bin: &str) -> Vec<String> {
    vec![bin.to_string(), "gpus".to_string(), "--json".to_string()]
}

/// Read what `rdmabw gpus --json` printed: the number of GPUs CUDA can use in the pod, or why
/// there are none (the CUDA error rdmabw gave, else the end of its stderr).
pub fn parse_gpus(out: &Output) -> Result<usize> {
    if let Some(line) = &out.overlong {
        bail!("`rdmabw gpus --json` printed {line}");
    }
    let report = serde_json::from_slice::<results::rdmabw::gpu::GpusReport>(&out.stdout).ok();
    if let Some(e) = report.as_ref().and_then(|r| r.cuda_error.clone()) {
        bail!("{e}");
    }
    if !out.exit.success() {
        bail!(
            "`rdmabw gpus --json` failed: {} {}",
            out.exit,
            out.stderr_tail(3)
        );
    }
    let n = report
        .context("`rdmabw gpus --json` printed something that is not a GPU report")?
        .gpus
        .len();
    if n == 0 {
        bail!("CUDA works but sees no GPU (does the pod ask for nvidia.com/gpu?)");
    }
    Ok(n)
}

pub use results::rdmabw::secret::{RunSecret, SECRET_STDIN};

/// A sweep's secret: 128 random bits from the kernel, as 32 hex digits.
pub fn new_secret() -> Result<RunSecret> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("cannot read /dev/urandom for the sweep's secret")?;
    RunSecret::from_bytes(&b).context("a secret of 16 bytes is valid")
}

/// `argv` (an `rdmabw SUBCOMMAND ...` vector) reading the run's secret from its standard input.
pub fn with_secret_stdin(argv: &[String]) -> Vec<String> {
    let mut v = argv.to_vec();
    v.insert(2.min(v.len()), SECRET_STDIN.to_string());
    v
}

/// The daemon flag that makes it stop at the end of its standard input: railsweep holds the
/// input open after the secret and closes it to end the daemon (no `kill` exec); a railsweep
/// that dies takes its daemons with it.
pub const EXIT_ON_STDIN_EOF: &str = "--exit-on-stdin-eof";

/// The server daemon of one sweep, as [`server_argv`] writes its command line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DaemonSpec {
    /// The control port.
    pub port: u16,
    /// Every test's server buffer in CUDA memory: of that GPU, or `auto`, the GPU nearest each
    /// test's RDMA device (resolved per test by the daemon).
    pub gpu: Option<GpuSelect>,
    /// The addresses to listen on (the server's rail addresses); empty: every address.
    pub bind: Vec<String>,
    /// Whether it stops at the end of its input ([`EXIT_ON_STDIN_EOF`]); without, it is
    /// stopped by signal.
    pub exit_on_stdin_eof: bool,
}

impl DaemonSpec {
    /// The daemon the pod's rdmabw can run, from what it announced: listening on `rail_addrs`
    /// where it can bind a list of addresses (else on every address, as it always did), and
    /// ending with its input where it can.
    pub fn for_pod(
        port: u16,
        gpu: Option<GpuSelect>,
        rail_addrs: Vec<String>,
        caps: &[Capability],
    ) -> DaemonSpec {
        DaemonSpec {
            port,
            gpu,
            bind: if caps.contains(&Capability::BindAddresses) {
                rail_addrs
            } else {
                Vec::new()
            },
            exit_on_stdin_eof: caps.contains(&Capability::ExitOnStdinEof),
        }
    }
}

/// `rdmabw server --daemon -p PORT --secret-stdin --exit-on-stdin-eof --bind ADDR,...`: one
/// server for every rail, test after test, several at once on different devices, serving only
/// this sweep's clients (see [`RunSecret`]), until its input ends, reachable on the rails'
/// addresses only.
pub fn server_argv(bin: &str, d: &DaemonSpec) -> Vec<String> {
    let mut v = vec![
        bin.to_string(),
        "server".to_string(),
        "--daemon".to_string(),
        "-p".to_string(),
        d.port.to_string(),
        SECRET_STDIN.to_string(),
    ];
    if d.exit_on_stdin_eof {
        v.push(EXIT_ON_STDIN_EOF.to_string());
    }
    if !d.bind.is_empty() {
        v.extend(["--bind".to_string(), d.bind.join(",")]);
    }
    if let Some(g) = &d.gpu {
        v.extend(["--use_cuda".to_string(), g.to_string()]);
    }
    v
}

/// The test one client runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientTest {
    /// Server address (the server pod's address on the rail).
    pub server_addr: String,
    /// The daemon's port.
    pub port: u16,
    /// Client-side rail interface.
    pub netdev: String,
    /// Client-side RDMA device, port and GID index, as the client pod's rail report gave them.
    pub device: Option<(String, Option<u8>, u32)>,
    /// Server-side rail interface.
    pub server_netdev: String,
    /// Server-side RDMA device and GID index, as the server pod's rail report gave them.
    pub server_device: Option<(String, u32)>,
    /// Measured seconds.
    pub duration_s: f64,
    /// The test flags, passed through (railsweep's size and queue pairs always given).
    pub test: TestFlags,
    /// The client's buffer in the GPU nearest its RDMA device (`--use_cuda auto`).
    pub gpu: Option<GpuSelect>,
}

/// `rdmabw client --json ...` for one rail.
///
/// Each side's device and GID index go explicitly (`-d -x`, `--server-dev --server-gid-index`)
/// when the rail reports have them: rdmabw then skips its own rail discovery, which in the lab
/// costs a second or two per side and per rail (measured: a 20-iteration client took 1.6-2.0 s
/// this way, 3.7-4.3 s with `--netdev`). The interfaces are the fallback.
pub fn client_argv(bin: &str, t: &ClientTest) -> Vec<String> {
    let mut v: Vec<String> = vec![
        bin.into(),
        "client".into(),
        "--json".into(),
        // The measured seconds: rdmabw's -D is ib_write_bw's whole test, margins inside.
        "--window".into(),
        fmt_num(t.duration_s),
    ];
    v.extend(t.test.shape_argv());
    v.extend(rail_argv(t));
    v.extend(t.test.tuning_argv());
    if let Some(g) = &t.gpu {
        v.extend(["--use_cuda".into(), g.to_string()]);
    }
    v.push(t.server_addr.clone());
    v
}

/// `rdmabw lat --json ...` for the rail of `t` (railsweep `--test bw,lat`): ib_write_lat's test
/// (2 B, in host memory, `-n` exchanges where `--lat-iters` says) with the rail's path settings
/// (`--tclass`, `--sl`, `-m`) and `--max-p99-us`; the bandwidth flags (size, queue pairs,
/// thresholds, transport tuning, GPU) are not a ping-pong's.
pub fn lat_argv(
    bin: &str,
    t: &ClientTest,
    iters: Option<u64>,
    limits: &LatencyFlags,
) -> Vec<String> {
    let mut v: Vec<String> = vec![bin.into(), "lat".into(), "--json".into()];
    v.extend(rail_argv(t));
    v.extend(
        LatTest {
            path: t.test.path.clone(),
            iters,
            limits: limits.clone(),
        }
        .to_argv(),
    );
    v.push(t.server_addr.clone());
    v
}

/// The rail's ends as rdmabw's rail flags name them: each side's device and GID index where
/// its rail report has them (port 1 is rdmabw's default), else its interface.
fn rail_flags(t: &ClientTest) -> (RailFlags, ServerRailFlags) {
    let rail = match &t.device {
        Some((dev, port, gid)) => RailFlags {
            ib_dev: Some(dev.clone()),
            ib_port: port.filter(|p| *p != 1),
            gid_index: Some(*gid),
            netdev: None,
        },
        None => RailFlags {
            netdev: Some(t.netdev.clone()),
            ..RailFlags::default()
        },
    };
    let server = match &t.server_device {
        Some((dev, gid)) => ServerRailFlags {
            server_dev: Some(dev.clone()),
            server_gid_index: Some(*gid),
            server_netdev: None,
        },
        None => ServerRailFlags {
            server_netdev: Some(t.server_netdev.clone()),
            ..ServerRailFlags::default()
        },
    };
    (rail, server)
}

/// The rail's ends and the daemon's port, as every client command names them.
fn rail_argv(t: &ClientTest) -> Vec<String> {
    let (rail, server) = rail_flags(t);
    let mut v = rail.to_argv();
    v.extend(server.to_argv());
    v.extend(["-p".into(), t.port.to_string()]);
    v
}

/// What one latency client (`rdmabw lat --json`) came to: its report (status ok, or below
/// threshold above `--max-p99-us`), or why there is none.
pub fn parse_lat(out: &Output) -> std::result::Result<LatReport, (String, Option<Cause>)> {
    if let Some(line) = &out.overlong {
        return Err((format!("rdmabw lat printed {line}"), None));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let report = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<LatReport>(l).ok());
    match report {
        // Checked where it arrives, as a bandwidth report.
        Some(r) if r.status != TestStatus::Failed && !r.results.is_empty() => match r.check() {
            Ok(()) => Ok(r),
            Err(problem) => Err((invalid_report("rdmabw lat", &problem), None)),
        },
        Some(r) => Err((
            r.error
                .as_deref()
                .filter(|e| !e.is_empty())
                .map_or_else(|| "rdmabw lat reported no result rows".into(), pod_text),
            None,
        )),
        // A failure is a bandwidth-shaped document (rdmabw's failed report, whose kind is the
        // cause) or nothing.
        None => match parse_client(out) {
            ClientOutcome::Failed(why, rep) => Err((
                why.replace("rdmabw client", "rdmabw lat"),
                rep.and_then(|rep| {
                    rep.error_kind.map(|kind| Cause::Rdmabw {
                        kind,
                        side: rep.role,
                    })
                }),
            )),
            ClientOutcome::Measured(_) => Err((
                "rdmabw lat printed a bandwidth report: is the pod's rdmabw older?".into(),
                None,
            )),
        },
    }
}

/// An error text from a pod (rdmabw's `error`), as a row and a log line carry it: one line of
/// bounded length.
fn pod_text(text: &str) -> String {
    results::escape::log_line(text)
}

/// The reason of a test whose report broke a rule of the rows made of it.
fn invalid_report(what: &str, problem: &results::InvalidRecord) -> String {
    pod_text(&format!(
        "{what} printed a report with an invalid value: `{}` {}",
        problem.field, problem.message
    ))
}

/// What one client run came to.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientOutcome {
    /// A measurement (status ok or below threshold).
    Measured(Box<BwReport>),
    /// No measurement; the reason, in words (and the report, if rdmabw printed one).
    Failed(String, Option<Box<BwReport>>),
}

/// Read a finished client: its JSON report on stdout, its exit code (0 ok, 1 below threshold,
/// 2 failed) and, when there is no report, the end of its stderr.
pub fn parse_client(out: &Output) -> ClientOutcome {
    parse_bw(out, "rdmabw client")
}

/// Read a finished one-test `rdmabw server --json` as [`parse_client`] reads a client: its
/// report is the same document (the client's figures, `role` server).
pub fn parse_server(out: &Output) -> ClientOutcome {
    parse_bw(out, "rdmabw server")
}

/// Read a finished rdmabw bandwidth test, `who` (`rdmabw client`) in the words of a failure.
fn parse_bw(out: &Output, who: &str) -> ClientOutcome {
    let report = serde_json::from_slice::<BwReport>(&out.stdout)
        .ok()
        .or_else(|| {
            // Tolerate log lines before the document: take the last line that parses.
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .rev()
                .find_map(|l| serde_json::from_str::<BwReport>(l).ok())
        });
    if let Some(line) = &out.overlong {
        return ClientOutcome::Failed(format!("{who} printed {line}"), None);
    }
    // Checked where it arrives: a measurement with a value out of range fails this test,
    // naming it, rather than every row that the sink would refuse after it; a failed test
    // keeps its reason. Either way no figure of the report is kept.
    match read_client(out, report, who) {
        ClientOutcome::Measured(r) => match r.check() {
            Ok(()) => ClientOutcome::Measured(r),
            Err(problem) => ClientOutcome::Failed(invalid_report(who, &problem), None),
        },
        ClientOutcome::Failed(why, Some(r)) if r.check().is_err() => {
            ClientOutcome::Failed(why, None)
        }
        outcome => outcome,
    }
}

/// What a finished client's report (or its absence) says, before its values are checked.
fn read_client(out: &Output, report: Option<BwReport>, who: &str) -> ClientOutcome {
    let tail = out.stderr_tail(3);
    match report {
        Some(r) => match r.status {
            // A window in which not one RDMA WRITE completed is no measurement of the rail,
            // whatever the status says: record it as failed rather than as 0 Gb/s.
            TestStatus::Ok | TestStatus::BelowThreshold
                if r.results.last().is_some_and(|x| x.iterations == 0) =>
            {
                let secs = r.results.last().map_or(0.0, |x| x.measured_s);
                ClientOutcome::Failed(
                    format!(
                        "no RDMA WRITE completed in the {secs} s measured window (0 iterations)"
                    ),
                    Some(Box::new(r)),
                )
            }
            TestStatus::Ok | TestStatus::BelowThreshold if !r.results.is_empty() => {
                ClientOutcome::Measured(Box::new(r))
            }
            TestStatus::Ok | TestStatus::BelowThreshold => {
                ClientOutcome::Failed("rdmabw reported no result rows".into(), Some(Box::new(r)))
            }
            TestStatus::Failed => {
                let why = r
                    .error
                    .as_deref()
                    .filter(|e| !e.is_empty())
                    .map_or_else(|| format!("{who} failed ({})", out.exit), pod_text);
                ClientOutcome::Failed(why, Some(Box::new(r)))
            }
        },
        None => {
            let what = match &out.exit {
                Exit::Code(c) if *c > 128 => format!("{who} killed by signal {}", c - 128),
                e => format!("{who} failed ({e})"),
            };
            ClientOutcome::Failed(
                if tail.is_empty() {
                    format!("{what} and printed no report")
                } else {
                    format!("{what}: {tail}")
                },
                None,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::rdmabw::flags::{
        BwShapeFlags, MarginFlags, PathFlags, QueueFlags, SizeFlags, ThresholdFlags,
    };

    #[test]
    fn versions() {
        assert_eq!(parse_version(b"rdmabw 0.1.0\n").expect("parses"), "0.1.0");
        assert!(parse_version(b"ib_write_bw 6.28\n").is_err());
        assert!(compatible("0.1.0", "0.1.3"));
        assert!(!compatible("0.2.0", "0.1.0"));
        assert!(compatible("1.4.0", "1.0.0"));
        assert!(!compatible("2.0.0", "1.0.0"));
        assert!(!compatible("garbage", "0.1.0"));
    }

    #[test]
    fn client_argv_carries_every_parameter() {
        let t = ClientTest {
            server_addr: "10.224.0.2".into(),
            port: 18515,
            netdev: "net1".into(),
            device: Some(("mlx5_0".into(), Some(1), 3)),
            server_netdev: "net1".into(),
            server_device: Some(("mlx5_4".into(), 5)),
            duration_s: 3.0,
            test: TestFlags {
                message: SizeFlags { size: Some(65536) },
                shape: BwShapeFlags {
                    qp: Some(4),
                    bidirectional: true,
                    data_validation: false,
                },
                path: PathFlags {
                    tclass: Some(41),
                    sl: None,
                    mtu: Some(4096),
                },
                queue: QueueFlags {
                    cq_mod: Some(4),
                    ..QueueFlags::default()
                },
                thresholds: ThresholdFlags {
                    min_gbps: Some(90.5),
                    min_line_rate_pct: None,
                },
                margins: MarginFlags {
                    warmup: Some(0.2),
                    cooldown: None,
                },
            },
            gpu: None,
        };
        // The latency test of the same rail: its ends and path settings, no bandwidth flags.
        let limits = LatencyFlags {
            max_p99_us: Some(12.5),
        };
        assert_eq!(
            lat_argv("rdmabw", &t, None, &limits).join(" "),
            "rdmabw lat --json -d mlx5_0 -x 3 --server-dev mlx5_4 --server-gid-index 5 \
             -p 18515 --tclass 41 -m 4096 --max-p99-us 12.5 10.224.0.2"
        );
        assert!(lat_argv("rdmabw", &t, Some(200), &limits)
            .join(" ")
            .ends_with(" -m 4096 -n 200 --max-p99-us 12.5 10.224.0.2"));
        let v = client_argv("rdmabw", &t);
        let s = v.join(" ");
        assert_eq!(
            s,
            "rdmabw client --json --window 3 -s 65536 -q 4 -d mlx5_0 -x 3 --server-dev mlx5_4 --server-gid-index 5 \
             -p 18515 --tclass 41 -b -Q 4 -m 4096 --min-gbps 90.5 --warmup 0.2 10.224.0.2"
        );
        let t = ClientTest {
            device: Some(("mlx5_0".into(), Some(2), 3)),
            server_device: None,
            ..t
        };
        let s = client_argv("rdmabw", &t).join(" ");
        assert!(
            s.contains("-d mlx5_0 -x 3 -i 2 --server-netdev net1 -p"),
            "{s}"
        );
        let t = ClientTest { device: None, ..t };
        assert!(client_argv("rdmabw", &t)
            .join(" ")
            .contains("--netdev net1 --server-netdev net1"));
        // --gpu auto: the client's buffer in the GPU nearest its device, flag before the address.
        let t = ClientTest {
            gpu: Some(GpuSelect::Auto),
            ..t
        };
        assert!(client_argv("rdmabw", &t)
            .join(" ")
            .ends_with("--use_cuda auto 10.224.0.2"));
        // --use_cuda 2: GPU 2 on both sides.
        let t = ClientTest {
            gpu: Some(GpuSelect::Index(2)),
            ..t
        };
        assert!(client_argv("rdmabw", &t)
            .join(" ")
            .ends_with("--use_cuda 2 10.224.0.2"));
        let gpu2 = DaemonSpec::for_pod(1, Some(GpuSelect::Index(2)), vec![], &Capability::OURS);
        assert!(server_argv("rdmabw", &gpu2)
            .join(" ")
            .ends_with("--use_cuda 2"));
        // The secret's flag goes right after the subcommand; the secret itself never does.
        let v = with_secret_stdin(&client_argv("rdmabw", &t));
        assert_eq!(&v[..3], &["rdmabw", "client", "--secret-stdin"]);
    }

    #[test]
    fn server_daemon_takes_the_gpu_nearest_each_tests_device() {
        let spec = |port, gpu, bind: &[&str], caps: &[Capability]| {
            let bind = bind.iter().map(ToString::to_string).collect();
            DaemonSpec::for_pod(port, gpu, bind, caps)
        };
        assert_eq!(
            server_argv("rdmabw", &spec(18515, None, &[], &Capability::OURS)).join(" "),
            "rdmabw server --daemon -p 18515 --secret-stdin --exit-on-stdin-eof"
        );
        assert_eq!(
            server_argv(
                "/tmp/rdmabw",
                &spec(18600, Some(GpuSelect::Auto), &[], &Capability::OURS)
            )
            .join(" "),
            "/tmp/rdmabw server --daemon -p 18600 --secret-stdin --exit-on-stdin-eof --use_cuda auto"
        );
    }

    #[test]
    fn a_daemon_listens_on_the_rails_where_its_rdmabw_can() {
        let rails = vec!["10.224.0.2".to_string(), "10.224.1.2".to_string()];
        let ours = DaemonSpec::for_pod(18515, None, rails.clone(), &Capability::OURS);
        assert_eq!(
            server_argv("rdmabw", &ours).join(" "),
            "rdmabw server --daemon -p 18515 --secret-stdin --exit-on-stdin-eof \
             --bind 10.224.0.2,10.224.1.2"
        );
        // An rdmabw that announces nothing (built before the announcement): neither flag.
        let old = DaemonSpec::for_pod(18515, None, rails, &[]);
        assert_eq!(
            server_argv("rdmabw", &old).join(" "),
            "rdmabw server --daemon -p 18515 --secret-stdin"
        );
    }

    #[test]
    fn gpu_check_gives_cudas_reason_or_the_gpu_count() {
        let out = |code, json: &str| {
            Output::new(
                Exit::Code(code),
                json.as_bytes().to_vec(),
                b"rdmabw: error: see the report\n".to_vec(),
            )
        };
        let e = parse_gpus(&out(
            2,
            r#"{"cuda_driver":null,"cuda_error":"no CUDA driver library: libcuda.so","gpus":[]}"#,
        ))
        .expect_err("no CUDA");
        assert_eq!(e.to_string(), "no CUDA driver library: libcuda.so");
        let e = parse_gpus(&out(
            0,
            r#"{"cuda_driver":"13.0","cuda_error":null,"gpus":[]}"#,
        ))
        .expect_err("no GPU");
        assert!(e.to_string().contains("nvidia.com/gpu"), "{e}");
        let e = parse_gpus(&out(127, "")).expect_err("no rdmabw");
        assert!(e.to_string().contains("exit code 127"), "{e}");
    }

    /// A client's report as `rdmabw client --json` prints it, with these results.
    fn report_with(results: &str, status: &str, error: Option<&str>) -> Output {
        let doc = format!(
            r#"{{"schema_version":1,"rdmabw_version":"0.1.0","role":"client",
            "params":{{"sizes":{{"one":{{"msg_size_bytes":65536}}}},
            "length":{{"duration":{{"duration_s":1.0,"warmup_s":0.0,"cooldown_s":0.0}}}},
            "qps":1,"connection":"RC","bidirectional":false}},
            "tuning":{{"tx_depth":128,"cq_mod":100,"post_list":1,"inline_bytes":0,
            "traffic_class":41,"service_level":0,"hop_limit":64,"mtu_bytes":null,
            "ack_timeout":14,"retry_count":7}},
            "path_mtu_bytes":4096,"memory":"host","local":null,"remote":null,
            "results":[{results}],"line_rate_gbps":100.0,"line_rate_pct":null,
            "threshold_gbps":null,"status":"{status}","error":{}}}"#,
            serde_json::to_string(&error).expect("json")
        )
        .replace('\n', "");
        Output::new(Exit::Code(0), doc.into_bytes(), Vec::new())
    }

    fn size_result(peak: f64) -> String {
        format!(
            r#"{{"msg_size_bytes":65536,"iterations":1000,"bw_peak_gbps":{peak},
            "bw_avg_gbps":96.0,"msg_rate_mpps":0.18,"bw_p1_gbps":95.0,"bw_p50_gbps":96.0,
            "bw_p99_gbps":96.2,"interval_ms":100,"measured_s":1.0,"cpu_s":0.9}}"#
        )
    }

    /// Issue 53, finding 1: a report with a value out of range is checked where it arrives:
    /// the test failed, naming the field and the value, the report's figures not kept.
    #[test]
    fn a_report_with_a_value_out_of_range_is_a_failed_test_naming_it() {
        let out = report_with(&size_result(-1.0), "ok", None);
        match parse_client(&out) {
            ClientOutcome::Failed(why, None) => {
                assert!(
                    why.contains("bw_peak_gbps") && why.contains("got -1"),
                    "{why}"
                );
            }
            other => panic!("{other:?}"),
        }
        // However large the value, the reason is short.
        let out = report_with(&size_result(-1e300), "ok", None);
        match parse_client(&out) {
            ClientOutcome::Failed(why, None) => assert!(why.len() < 200, "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_client(&report_with(&size_result(97.0), "ok", None)),
            ClientOutcome::Measured(_)
        ));
    }

    /// rdmabw's own error text of a failed test is pod text: cut to a bounded length.
    #[test]
    fn a_failed_reports_error_text_is_bounded() {
        let long = "e".repeat(1 << 20);
        match parse_client(&report_with("", "failed", Some(&long))) {
            ClientOutcome::Failed(why, Some(_)) => assert!(why.len() <= 4096, "{}", why.len()),
            other => panic!("{other:?}"),
        }
    }

    /// A set-up document with a line over the limit (left out of the output) is refused
    /// naming that line, not as a document that does not parse.
    #[test]
    fn set_up_documents_name_a_line_over_the_limit() {
        use crate::runner::bounded::{Tail, MAX_LINE, STREAM_TAIL};
        let mut stdout = Tail::new(STREAM_TAIL, MAX_LINE);
        stdout.push(&vec![b'{'; MAX_LINE + 1]);
        stdout.push(b"\n");
        let out = Output::from_tails(Exit::Code(0), stdout, Tail::new(STREAM_TAIL, MAX_LINE));
        for e in [
            parse_rails(&out).expect_err("rails").to_string(),
            parse_gpus(&out).expect_err("gpus").to_string(),
        ] {
            assert!(
                e.contains("a line longer than 1024 KiB on its stdout"),
                "{e}"
            );
        }
    }

    #[test]
    fn client_without_report_names_stderr() {
        let out = Output::new(
            Exit::Code(2),
            vec![],
            b"rdmabw: error: cannot connect to 10.224.2.2:18515: no route to host\n".to_vec(),
        );
        match parse_client(&out) {
            ClientOutcome::Failed(why, None) => assert!(why.contains("no route to host"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
