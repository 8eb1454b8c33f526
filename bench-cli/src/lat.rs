//! `rdmabw lat`: RDMA WRITE latency, a drop-in for perftest's `ib_write_lat` (also what
//! rdmabw does when called through a link named `ib_write_lat`).
//!
//! The flags are rdmabw's test flags with ib_write_lat's defaults (`-s 2`, `-n 1000`, inline up
//! to 220 bytes) plus `-U`, `-H`, `-C` and `--max-p99-us`; the flags of ib_write_lat that make
//! no sense for a ping-pong of one QP (`-b`, `-q`, rate limits, CUDA memory, ...) are refused
//! by name, here or in `config`. The test itself is `bench_core::session` with
//! `TestParams::latency` set; this file prints ib_write_lat's table and the typed
//! [`LatReport`].

use std::io::Write;

use anyhow::{Context, Result};
use bench_core::session::{Outcome, Pinned};
use clap::Args;
use results::rdmabw::flags::LAT_DEFAULT_ITERS as DEFAULT_ITERS;
use results::rdmabw::lat::{LatContext, LatReport, LatRow};
use results::rdmabw::params::{Sizes, TestLength, TestParams};
use results::rdmabw::report::{Role, TestStatus};

use crate::cli::TestArgs;
use crate::config::{Format, Output};
use crate::exit::Exit;
use crate::exit::Usage;

/// ib_write_lat's default message size.
pub const DEFAULT_SIZE: u64 = 2;
/// ib_write_lat's default inline size for RDMA WRITE.
pub const DEFAULT_INLINE: u32 = 220;

/// `rdmabw lat [flags] [HOST]`. Its help leaves out the test flags it refuses
/// ([`refuse_test_flags`]; a test checks that every flag refused is hidden here and every flag
/// hidden here is refused), and says what `--json` and `--report-both` do in a latency test.
#[derive(Debug, Args)]
#[command(version)]
#[command(mut_arg("qp", |a| a.hide(true)))]
#[command(mut_arg("bidirectional", |a| a.hide(true)))]
#[command(mut_arg("run_infinitely", |a| a.hide(true)))]
#[command(mut_arg("data_validation", |a| a.hide(true)))]
#[command(mut_arg("rate_limit", |a| a.hide(true)))]
#[command(mut_arg("rate_units", |a| a.hide(true)))]
#[command(mut_arg("burst_size", |a| a.hide(true)))]
#[command(mut_arg("rate_limit_type", |a| a.hide(true)))]
#[command(mut_arg("use_cuda", |a| a.hide(true)))]
#[command(mut_arg("cuda_bus_id", |a| a.hide(true)))]
#[command(mut_arg("cuda_mem", |a| a.hide(true)))]
#[command(mut_arg("use_cuda_dmabuf", |a| a.hide(true)))]
#[command(mut_arg("min_gbps", |a| a.hide(true)))]
#[command(mut_arg("min_line_rate_pct", |a| a.hide(true)))]
#[command(mut_arg("limit_bw", |a| a.hide(true)))]
#[command(mut_arg("limit_msgrate", |a| a.hide(true)))]
#[command(mut_arg("output_figure", |a| a.hide(true)))]
#[command(mut_arg("cpu_util", |a| a.hide(true)))]
#[command(mut_arg("report_counters", |a| a.hide(true)))]
#[command(mut_arg("json", |a| a.help("One JSON document (a LatReport) on stdout")))]
#[command(mut_arg("report_both", |a| a.help("Also the table the peer measured")))]
#[command(mut_arg("iters", |a| a
    .help("Exchanges (ib_write_lat -n)")
    .long_help("Ping-pong exchanges (ib_write_lat -n).\n\nDefault 1000, at least 5.")))]
pub struct LatCmd {
    /// The server to measure against (client); without it, serve one test (as ib_write_lat).
    #[arg(value_name = "HOST")]
    pub host: Option<String>,

    #[command(flatten)]
    pub test: TestArgs,

    #[command(flatten)]
    pub lat: LatArgs,
}

/// The flags of `rdmabw lat` beyond the test flags.
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Latency (ib_write_lat flags)")]
pub struct LatArgs {
    /// Print every sample, unsorted (ib_write_lat -U).
    ///
    /// In the order measured, before the table, one-way usec.
    #[arg(short = 'U', long = "report-unsorted")]
    pub unsorted: bool,
    /// Print every sample, sorted, before the table (ib_write_lat -H).
    #[arg(short = 'H', long = "report-histogram")]
    pub histogram: bool,
    /// Report in CPU cycles (ib_write_lat -C).
    ///
    /// Microseconds times the CPU's MHz from /proc/cpuinfo (rdmabw measures with the monotonic
    /// clock).
    #[arg(short = 'C', long = "report-cycles")]
    pub cycles: bool,
    /// `--max-p99-us`, defined once for rdmabw lat and railsweep.
    #[command(flatten)]
    pub limits: results::rdmabw::flags::LatencyFlags,
}

/// ib_write_lat's flags that `rdmabw lat` refuses by name, beyond ib_write_bw's (those are
/// refused by `crate::perftest` for every mode), with why.
const REFUSED: &[(&[&str], &str)] = &[(
    &["latency_gap"],
    "delays each post in ib_write_lat; rdmabw lat runs the ping-pong back to back",
)];

/// The first argument that is a flag `rdmabw lat` refuses (ib_write_lat's that it lacks), as a
/// usage error naming it; then ib_write_bw's refusals.
pub fn refuse_unsupported<S: AsRef<str>>(args: &[S]) -> Result<(), Usage> {
    for arg in args.iter().map(AsRef::as_ref) {
        if arg == "--" {
            break;
        }
        let name = arg
            .strip_prefix("--")
            .map(|l| l.split('=').next().unwrap_or(l));
        if let Some((_, why)) = name.and_then(|n| REFUSED.iter().find(|(ns, _)| ns.contains(&n))) {
            return Err(Usage(format!(
                "--{}: not supported by rdmabw lat: it {why}",
                name.unwrap_or_default()
            )));
        }
    }
    crate::perftest::refuse_unsupported(args)
}

/// Whether `rdmabw lat` refuses flag `name` (no dashes) by name.
#[cfg(test)]
fn is_refused(name: &str) -> bool {
    REFUSED.iter().any(|(ns, _)| ns.contains(&name)) || crate::perftest::is_refused(name)
}

fn usage<T>(msg: impl Into<String>) -> Result<T, Usage> {
    Err(Usage(msg.into()))
}

/// The test flags that do not fit a ping-pong of one QP, refused by name when given (before
/// any other check of the test flags, so that the refusal is what a user reads); `LatCmd`
/// leaves each out of `rdmabw lat`'s help.
pub fn refuse_test_flags(a: &TestArgs) -> Result<(), Usage> {
    // The test's shape: the rule a server applies to a latency hello too.
    results::rdmabw::params::check_latency_shape(
        a.flags.qp.unwrap_or(1),
        a.flags.transport.bidirectional,
        a.run_infinitely,
        a.flags.transport.data_validation,
    )
    .map_err(|e| Usage(e.to_string()))?;
    let not_for_lat: &[(bool, &str)] = &[
        (
            a.rate_limit.is_some()
                || a.rate_units.is_some()
                || a.burst_size.is_some()
                || a.rate_limit_type.is_some(),
            "--rate_limit (and --rate_units, --burst_size, --rate_limit_type): the ping-pong \
             sends one write per round trip",
        ),
        (
            a.use_cuda.is_some()
                || a.cuda_bus_id.is_some()
                || a.cuda_mem.is_some()
                || a.use_cuda_dmabuf,
            "--use_cuda (and --cuda-bus-id, --cuda-mem, --use_cuda_dmabuf): the ping-pong polls \
             host memory for the peer's write",
        ),
        (
            a.flags.min_gbps.is_some()
                || a.flags.min_line_rate_pct.is_some()
                || a.limit_bw.is_some(),
            "--min-gbps/--min-line-rate-pct/-w: give --max-p99-us",
        ),
        (
            a.limit_msgrate.is_some(),
            "-y/--limit_msgrate: give --max-p99-us",
        ),
        (a.output_figure.is_some(), "--output: the table or --json"),
        (
            a.cpu_util,
            "--cpu_util: ib_write_lat takes it for duration tests; rdmabw lat does not measure CPU",
        ),
        (
            a.report_counters.is_some(),
            "-W/--report-counters: a latency test reports no counter deltas; read `rdmabw \
             counters` before and after it",
        ),
    ];
    match not_for_lat.iter().find(|(set, _)| *set) {
        Some((_, why)) => usage(format!("not a flag of rdmabw lat: {why}")),
        None => Ok(()),
    }
}

/// The test flags of a latency test: ib_write_lat's defaults where none was given. The flags
/// that do not apply to a ping-pong of one QP were refused by [`refuse_test_flags`].
pub fn params(mut params: TestParams, mut pinned: Pinned) -> Result<(TestParams, Pinned), Usage> {
    params.qps = 1;
    pinned.qps = true;
    if !pinned.sizes {
        params.sizes = Sizes::One {
            msg_size_bytes: DEFAULT_SIZE,
        };
    }
    if !pinned.length {
        params.length = TestLength::Iterations {
            iterations: DEFAULT_ITERS,
        }
    }
    params.latency = true;
    // The one rule of a latency test, which a server applies to a latency hello too.
    params.check_latency().map_err(|e| Usage(e.to_string()))?;
    // What was not given is the client's to choose, as for bandwidth: a server started with
    // the defaults runs the client's -s and -n.
    Ok((params, pinned))
}

/// Reads the CPU's clock in MHz from /proc/cpuinfo (for -C), as ib_write_lat estimates it.
fn cpu_mhz() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .find_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .filter(|m| *m > 0.0)
}

/// The context of one side's rows.
fn context(o: &Outcome, role: Role) -> LatContext {
    if role == o.role {
        LatContext {
            role,
            device: o.rail.device.clone(),
            port: o.rail.port,
            gid_index: o.rail.gid_index,
            netdev: o.rail.netdev.clone(),
            remote_host: o.remote.host.clone(),
            remote_device: o.remote.device.clone(),
        }
    } else {
        LatContext {
            role,
            device: o.remote.device.clone(),
            port: o.remote.port,
            gid_index: o.remote.gid_index.unwrap_or(0),
            netdev: o.remote.netdev.clone(),
            remote_host: crate::config::host_name(),
            remote_device: o.rail.device.clone(),
        }
    }
}

/// The typed report of a finished latency test, from this side's point of view.
pub fn report(o: &Outcome, max_p99_us: Option<f64>) -> LatReport {
    let (ours, theirs, peer) = match o.role {
        Role::Client => (&o.client_results, &o.server_results, Role::Server),
        Role::Server => (&o.server_results, &o.client_results, Role::Client),
    };
    let rows = |role: Role, results: &[results::rdmabw::params::SizeResult]| -> Vec<LatRow> {
        let ctx = context(o, role);
        results
            .iter()
            .filter_map(|r| {
                r.latency
                    .as_ref()
                    .map(|s| LatRow::new(&ctx, r.msg_size_bytes, r.iterations, s, max_p99_us))
            })
            .collect()
    };
    LatReport {
        peer: o.remote.tool(),
        ..LatReport::new(
            o.role,
            o.params.clone(),
            o.path_mtu_bytes,
            max_p99_us,
            rows(o.role, ours),
            rows(peer, theirs),
        )
    }
}

const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// ib_write_lat's result table of `rows`, in microseconds or (with `cycles`, cycles per
/// microsecond) cycles; a timed test has ib_write_lat's duration columns.
pub fn table(rows: &[LatRow], timed: bool, cycles: Option<f64>) -> String {
    let unit = if cycles.is_some() { "cycles" } else { "usec" };
    let k = cycles.unwrap_or(1.0);
    let mut s = String::new();
    s.push_str(RULE);
    s.push('\n');
    if timed {
        s.push_str(&format!(
            " #bytes        #iterations       t_avg[{unit}]    tps average\n"
        ));
        for r in rows {
            let tps = if r.t_avg_us > 0.0 {
                1e6 / (2.0 * r.t_avg_us)
            } else {
                0.0
            };
            s.push_str(&format!(
                " {:<13} {:<17} {:<14.2} {:.2}\n",
                r.msg_size_bytes,
                r.iterations,
                r.t_avg_us * k,
                tps
            ));
        }
    } else {
        s.push_str(&format!(
            " #bytes #iterations    t_min[{unit}]    t_max[{unit}]  t_typical[{unit}]    \
             t_avg[{unit}]    t_stdev[{unit}]   99% percentile[{unit}]   99.9% \
             percentile[{unit}] \n"
        ));
        for r in rows {
            s.push_str(&format!(
                " {:<7} {:<14} {:<14.2} {:<14.2} {:<16.2} {:<14.2} {:<15.2} {:<23.2} {:.2}\n",
                r.msg_size_bytes,
                r.iterations,
                r.t_min_us * k,
                r.t_max_us * k,
                r.t_typical_us * k,
                r.t_avg_us * k,
                r.t_stdev_us * k,
                r.t_p99_us * k,
                r.t_p99_9_us * k
            ));
        }
    }
    s.push_str(RULE);
    s.push('\n');
    s
}

/// `-U`/`-H`: every sample of each size (in the order measured, or sorted), as ib_write_lat
/// prints them: `#, usec` then `N, value` per line; beyond
/// `results::rdmabw::lat::MAX_KEPT_SAMPLES` of one size, the first ones (said on stderr).
fn samples(o: &Outcome, sorted: bool, cycles: Option<f64>) -> String {
    let ours = match o.role {
        Role::Client => &o.client_results,
        Role::Server => &o.server_results,
    };
    let unit = if cycles.is_some() { "cycles" } else { "usec" };
    let k = cycles.unwrap_or(1.0);
    let mut s = String::new();
    for r in ours {
        let Some(l) = &r.latency else { continue };
        if (l.samples_us.len() as u64) < l.samples {
            results::say!(
                "rdmabw lat: {} B: -U/-H print the first {} of {} samples (a side keeps at most \
                 {} of one size; every sample is in the table's statistics)",
                r.msg_size_bytes,
                l.samples_us.len(),
                l.samples,
                results::rdmabw::lat::MAX_KEPT_SAMPLES
            );
        }
        let mut v = l.samples_us.clone();
        if sorted {
            v.sort_by(f64::total_cmp);
        }
        s.push_str(&format!("#, {unit}\n"));
        for (i, x) in v.iter().enumerate() {
            s.push_str(&format!("{}, {}\n", i + 1, x * k));
        }
    }
    s
}

/// Prints a finished latency test as `out` asks and gives its exit status: 1 when a size's
/// p99 is above `--max-p99-us`.
pub fn print_outcome(o: &Outcome, out: &Output) -> Result<Exit> {
    let lat = out.lat.clone().unwrap_or_default();
    let rep = report(o, lat.limits.max_p99_us);
    if let Some(path) = &out.json_file {
        let mut doc = serde_json::to_vec_pretty(&rep)?;
        doc.push(b'\n');
        std::fs::write(path, doc)
            .with_context(|| format!("--out_json_file {}: cannot write it", path.display()))?;
    }
    let text = match out.format {
        Format::Json => format!("{}\n", serde_json::to_string(&rep)?),
        Format::Csv => {
            let mut v = Vec::new();
            rep.write_csv(&mut v, out.report_both)?;
            String::from_utf8(v)?
        }
        Format::Table => {
            if !out.quiet {
                results::say_raw!("{}", crate::output::preamble(o));
            }
            let cycles = if lat.cycles {
                Some(cpu_mhz().context(
                    "-C/--report-cycles: /proc/cpuinfo gives no CPU clock to convert with",
                )?)
            } else {
                None
            };
            let timed = matches!(o.params.length, TestLength::Duration { .. });
            let mut t = String::new();
            if lat.unsorted || lat.histogram {
                t.push_str(&samples(o, !lat.unsorted, cycles));
            }
            t.push_str(&table(&rep.results, timed, cycles));
            if out.report_both && !rep.peer_results.is_empty() {
                t.push_str(&format!(
                    " measured by the {}:\n",
                    rep.peer_results[0].role.as_str()
                ));
                t.push_str(&table(&rep.peer_results, timed, cycles));
            }
            t
        }
    };
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    w.write_all(text.as_bytes())
        .and_then(|()| w.flush())
        .context("writing the results")?;
    match rep.status {
        TestStatus::Ok => Ok(Exit::Ok),
        _ => {
            results::say!(
                "rdmabw: above threshold: {}",
                rep.error
                    .as_deref()
                    .unwrap_or("p99 latency above --max-p99-us")
            );
            Ok(Exit::Failed)
        }
    }
}

/// The arguments as `rdmabw` should read them when it was called as `argv0`: through a link
/// named `ib_write_lat`, as `rdmabw lat ARGS`; otherwise (`ib_write_bw` included, which is
/// rdmabw's bare form) unchanged.
pub fn args_for_name(argv0: &str, args: Vec<String>) -> Vec<String> {
    let name = std::path::Path::new(argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name == "ib_write_lat" {
        std::iter::once("lat".to_string()).chain(args).collect()
    } else {
        args
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    fn resolve(args: &[&str]) -> Result<crate::config::Config, Usage> {
        let cli =
            crate::cli::Cli::try_parse_from(std::iter::once("rdmabw").chain(args.iter().copied()))
                .map_err(|e| Usage(e.to_string()))?;
        let mut no = || Err("no stdin".to_string());
        crate::config::resolve(
            cli,
            &mut crate::config::SecretInput {
                env: None,
                stdin_line: &mut no,
            },
        )
    }

    fn client_params(args: &[&str]) -> TestParams {
        match resolve(args).unwrap() {
            crate::config::Config::Client(c, _) => c.params,
            other => panic!("not a client: {other:?}"),
        }
    }

    #[test]
    fn lat_takes_ib_write_lats_defaults_and_is_a_latency_test() {
        let p = client_params(&["lat", "127.0.0.1"]);
        assert!(p.latency);
        assert_eq!(p.sizes, Sizes::One { msg_size_bytes: 2 });
        assert_eq!(p.length, TestLength::Iterations { iterations: 1000 });
        assert_eq!(p.qps, 1);
        let p = client_params(&["lat", "-s", "64K", "-n", "50", "127.0.0.1"]);
        assert_eq!(
            p.sizes,
            Sizes::One {
                msg_size_bytes: 65536
            }
        );
        assert_eq!(p.length, TestLength::Iterations { iterations: 50 });
        // Without a host it serves, as ib_write_lat does.
        match resolve(&["lat", "-D", "2"]).unwrap() {
            crate::config::Config::Server { cfg, out, .. } => {
                assert!(cfg.params.latency);
                assert!(cfg.pinned.length && !cfg.pinned.sizes);
                assert!(matches!(cfg.params.length, TestLength::Duration { .. }));
                assert!(out.lat.is_some());
            }
            other => panic!("not a server: {other:?}"),
        }
        // The bandwidth default stays as it was.
        assert!(!client_params(&["127.0.0.1"]).latency);
        // --report-both needs no -b here: it prints what the peer measured.
        match resolve(&["lat", "--report-both", "127.0.0.1"]).unwrap() {
            crate::config::Config::Client(_, out) => assert!(out.report_both),
            other => panic!("not a client: {other:?}"),
        }
        assert!(resolve(&["--report-both", "127.0.0.1"]).is_err());
    }

    #[test]
    fn flags_that_do_not_fit_a_ping_pong_are_refused_by_name() {
        for (args, words) in [
            (&["lat", "-q", "2", "h"][..], "-q 2"),
            (
                &["lat", "--run_infinitely", "h"][..],
                "not a flag of rdmabw lat: --run_infinitely",
            ),
            (&["lat", "--rate_units", "g", "h"][..], "--rate_limit"),
            (&["lat", "--cuda-mem", "dmabuf", "h"][..], "--use_cuda"),
            (&["lat", "-W", "all", "h"][..], "rdmabw counters"),
            (&["lat", "-b", "127.0.0.1"][..], "-b/--bidirectional"),
            (&["lat", "-n", "4", "127.0.0.1"][..], "at least 5"),
            (&["lat", "-a", "-D", "2", "127.0.0.1"][..], "-a with -D"),
            (&["lat", "--min-gbps", "5", "127.0.0.1"][..], "--max-p99-us"),
            (
                &["lat", "--rate_limit", "5", "127.0.0.1"][..],
                "--rate_limit",
            ),
        ] {
            let e = resolve(args).unwrap_err();
            assert!(e.0.contains(words), "{args:?}: {}", e.0);
        }
        let e = refuse_unsupported(&["lat", "--latency_gap=5", "h"]).unwrap_err();
        assert!(
            e.0.starts_with("--latency_gap: not supported by rdmabw lat"),
            "{}",
            e.0
        );
        // ib_write_bw's refusals hold here too.
        assert!(refuse_unsupported(&["lat", "-R", "h"]).is_err());
        assert!(refuse_unsupported(&["lat", "-U", "-H", "-C", "h"]).is_ok());
    }

    #[test]
    fn a_link_named_ib_write_lat_runs_lat_and_other_names_run_as_given() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            args_for_name("/usr/local/bin/ib_write_lat", a(&["-s", "8", "h"])),
            a(&["lat", "-s", "8", "h"])
        );
        assert_eq!(args_for_name("ib_write_bw", a(&["h"])), a(&["h"]));
        assert_eq!(args_for_name("rdmabw", a(&["lat", "h"])), a(&["lat", "h"]));
    }

    fn row(size: u64, rtt_ns: &[u64], max: Option<f64>) -> LatRow {
        let ctx = LatContext {
            role: Role::Client,
            device: "rxe0".into(),
            port: 1,
            gid_index: 1,
            netdev: None,
            remote_host: "h".into(),
            remote_device: "rxe1".into(),
        };
        let s = results::rdmabw::lat::LatencyStats::from_round_trips_ns(rtt_ns).unwrap();
        LatRow::new(&ctx, size, rtt_ns.len() as u64 + 1, &s, max)
    }

    #[test]
    fn the_table_has_ib_write_lats_columns_in_its_order() {
        let t = table(&[row(2, &[4000, 2000, 6000], None)], false, None);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[1].contains("#bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]")
        );
        assert!(lines[1].contains("99% percentile[usec]   99.9% percentile[usec]"));
        let f: Vec<&str> = lines[2].split_whitespace().collect();
        // bytes, iterations, min, max, typical, avg, stdev, 99%, 99.9%: awk '{print $5}' reads
        // the typical latency as it does for ib_write_lat.
        assert_eq!(
            f,
            ["2", "4", "1.00", "3.00", "2.00", "2.00", "0.82", "3.00", "3.00"]
        );
        let c = table(&[row(2, &[4000, 2000, 6000], None)], false, Some(1000.0));
        assert!(
            c.contains("t_min[cycles]") && c.contains(" 1000.00 "),
            "{c}"
        );
        let d = table(&[row(2, &[4000, 2000, 6000], None)], true, None);
        let f: Vec<&str> = d.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(f, ["2", "4", "2.00", "250000.00"]);
    }

    /// The flags a help text lists: the words of the options' own lines, not of their
    /// descriptions or the examples.
    fn listed(help: &str) -> Vec<String> {
        help.lines()
            .filter(|l| (2..=6).contains(&(l.len() - l.trim_start().len())))
            .filter(|l| l.trim_start().starts_with('-'))
            .flat_map(|l| l.split(|c: char| c.is_whitespace() || c == ','))
            .filter(|w| w.starts_with('-'))
            .map(str::to_string)
            .collect()
    }

    /// `-h` and `--help` of `cmd`.
    fn helps(cmd: &mut clap::Command) -> [String; 2] {
        [
            cmd.render_help().to_string(),
            cmd.render_long_help().to_string(),
        ]
    }

    /// Whether `e` is `rdmabw lat` refusing a test flag that does not fit a ping-pong.
    fn refused_by_lat(e: &Usage) -> bool {
        e.0.starts_with("not a flag of rdmabw lat: ") || e.0.contains("a latency test runs one QP")
    }

    /// Issue 33: `rdmabw lat -h` listed bandwidth flags that its tests refuse. Each test flag
    /// is tried on `rdmabw lat`: one it refuses is in neither `-h` nor `--help`, and one its
    /// help hides (and the bandwidth help does not) is refused; so a refused flag that comes
    /// back into the help, or a hidden one that is taken, fails here.
    #[test]
    fn lat_help_lists_no_flag_that_lat_refuses_and_hides_none_it_takes() {
        let mut cli = crate::cli::Cli::command();
        cli.build();
        let hidden_for_bw: Vec<String> = cli
            .get_arguments()
            .filter(|a| a.is_hide_set())
            .map(|a| a.get_id().to_string())
            .collect();
        let lat = cli.find_subcommand_mut("lat").expect("a lat subcommand");
        let helps = helps(lat);
        let mut refused = Vec::new();
        for arg in lat.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if ["help", "version"].contains(&long) {
                continue;
            }
            let flag = format!("--{long}");
            let mut args = vec!["lat", flag.as_str()];
            if arg.get_action().takes_values() {
                args.push(if long == "output" { "bandwidth" } else { "2" });
            }
            args.push("127.0.0.1");
            let is_refused = matches!(resolve(&args), Err(e) if refused_by_lat(&e));
            let hidden = arg.is_hide_set() && !hidden_for_bw.contains(&arg.get_id().to_string());
            assert_eq!(
                is_refused, hidden,
                "{args:?}: refused by rdmabw lat: {is_refused}; hidden in its help: {hidden}"
            );
            if is_refused {
                let names: Vec<String> = std::iter::once(flag.clone())
                    .chain(arg.get_short().map(|c| format!("-{c}")))
                    .collect();
                for h in &helps {
                    let l = listed(h);
                    for n in &names {
                        assert!(!l.contains(n), "rdmabw lat's help lists {n}:\n{h}");
                    }
                }
                refused.push(flag);
            }
        }
        // The probe found the refusals (the bandwidth-only flags), not nothing.
        for f in [
            "--qp",
            "--bidirectional",
            "--rate_limit",
            "--use_cuda",
            "--min-gbps",
        ] {
            assert!(
                refused.iter().any(|r| r == f),
                "{f} not refused: {refused:?}"
            );
        }
        assert!(refused.len() >= 19, "{refused:?}");
        for h in &helps {
            let l = listed(h);
            for taken in [
                "-s",
                "-n",
                "-D",
                "--tclass",
                "--netdev",
                "-U",
                "--max-p99-us",
            ] {
                assert!(l.iter().any(|f| f == taken), "lat help lacks {taken}:\n{h}");
            }
            // -n counts exchanges in a latency test, not a bandwidth test's RDMA WRITEs.
            assert!(
                h.contains("xchanges (ib_write_lat -n)") && !h.contains("WRITEs per QP"),
                "{h}"
            );
            // Headings whose flags are all hidden are gone, and --json names the latency report.
            assert!(!h.contains("Rate limiter:") && !h.contains("\nGPU:"), "{h}");
            assert!(h.contains("LatReport") && !h.contains("BwReport"), "{h}");
        }
    }

    /// The other way: the latency flags (`-U`, `-H`, `-C`, `--max-p99-us`) are `rdmabw lat`'s
    /// alone; no bandwidth command's help lists them and none takes them.
    #[test]
    fn bandwidth_help_lists_no_latency_flag() {
        use clap::Args;
        let only = LatArgs::augment_args(clap::Command::new("lat-only"));
        let lat_only: Vec<(String, bool)> = only
            .get_arguments()
            .flat_map(|a| {
                let v = a.get_action().takes_values();
                a.get_long()
                    .map(|l| format!("--{l}"))
                    .into_iter()
                    .chain(a.get_short().map(|c| format!("-{c}")))
                    .map(move |n| (n, v))
            })
            .collect();
        assert!(lat_only.len() >= 7, "{lat_only:?}");
        let mut cli = crate::cli::Cli::command();
        cli.build();
        let mut texts: Vec<(String, String)> = helps(&mut cli)
            .into_iter()
            .map(|h| ("rdmabw".to_string(), h))
            .collect();
        for role in ["server", "client"] {
            let sub = cli.find_subcommand_mut(role).expect("subcommand");
            texts.extend(helps(sub).into_iter().map(|h| (role.to_string(), h)));
        }
        for (cmd, h) in &texts {
            let l = listed(h);
            for (f, _) in &lat_only {
                assert!(!l.contains(f), "{cmd} help lists {f}:\n{h}");
            }
        }
        for (f, takes_value) in &lat_only {
            for pre in [&[][..], &["client"], &["server"]] {
                let mut args = vec!["rdmabw"];
                args.extend_from_slice(pre);
                args.push(f);
                if *takes_value {
                    args.push("5");
                }
                if pre != ["server"] {
                    args.push("127.0.0.1");
                }
                assert!(
                    crate::cli::Cli::try_parse_from(&args).is_err(),
                    "{args:?} is taken"
                );
            }
        }
    }

    /// Every long name, alias and short letter `rdmabw lat` takes.
    fn accepted() -> Vec<String> {
        let mut cmd = crate::cli::Cli::command();
        cmd.build();
        let lat = cmd
            .get_subcommands()
            .find(|c| c.get_name() == "lat")
            .expect("a lat subcommand")
            .clone();
        crate::perftest::arg_names(&lat)
    }

    /// Each flag of the reference ib_write_lat (perftest 25.x in the lab, read from its live
    /// `--help`) is taken by `rdmabw lat` or refused by name.
    #[test]
    fn every_flag_of_the_reference_ib_write_lat_is_taken_or_refused_by_name() {
        let taken = accepted();
        let flags = crate::perftest::check_reference_flags(
            "ib_write_lat",
            41,
            &taken,
            is_refused,
            |arg| refuse_unsupported(&["lat", arg, "10.0.0.2"]),
            |arg| format!("{arg}: not supported by rdmabw"),
        );
        for f in [
            "U",
            "H",
            "C",
            "report-unsorted",
            "report-histogram",
            "report-cycles",
        ] {
            assert!(
                flags.iter().any(|x| x == f),
                "{f} missing from the reference's help"
            );
            assert!(taken.iter().any(|x| x == f), "{f} not taken");
        }
    }
}
