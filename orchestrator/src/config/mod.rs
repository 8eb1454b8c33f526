//! The flags every sweeping command shares, and the validated configuration they resolve to
//! once, before any work (ripgrep's low and high arguments): where the pods are
//! ([`ClusterArgs`]) and the test parameters ([`SweepArgs`] -> [`SweepConfig`]).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{ArgGroup, Args};
use results::rdmabw::flags::{secs, LatencyFlags, LengthFlags, TestFlags};
use results::rdmabw::gpu::GpuSelect;
use results::NetworkMode;

use crate::plan::parse_rail_list;
use crate::sweep::{LatencyTest, Rdmabw, SweepConfig, Tool};

/// The program name and version recorded in JSON output (`railsweep 0.1.0+cd06ab8`).
pub fn generated_by() -> String {
    format!("railsweep {}", results::VERSION)
}

/// The groups the options of `railsweep run`, `compare` and `fleet` are listed in by `--help`,
/// named once so that the commands group alike.
pub mod heading {
    /// The test: rails, duration, sizes, transport, thresholds, latency.
    pub const MEASURE: &str = "What to measure";
    /// The pods (or network namespaces) to measure between.
    pub const PODS: &str = "Which pods";
    /// Where the pods are and how commands reach them.
    pub const KUBERNETES: &str = "Kubernetes";
    /// Which rdmabw runs in the pods, and its daemon's port.
    pub const RDMABW: &str = "rdmabw in the pods";
    /// Files, stdout, stderr, and what the rows record.
    pub const OUTPUT: &str = "Output";
    /// `railsweep fleet`: which pairs of pods are measured in which round.
    pub const PAIRS: &str = "Which pairs";
    /// `railsweep fleet`: which pairs and nodes are bad, and what railsweep writes onto them.
    pub const VERDICTS: &str = "Verdicts";
    /// The pods railsweep creates itself (`--nodes`).
    pub const CREATED: &str = "Pods railsweep creates (--nodes)";
}

mod cluster;
mod output;
pub mod renamed;

pub use cluster::{ClusterArgs, RequestTimeout, RunnerKind};
pub use output::{ChartArgs, FormatFlags, OutFormat};

/// A `--rails` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RailList(pub Vec<u32>);

fn rail_list(s: &str) -> Result<RailList, String> {
    parse_rail_list(s).map(RailList)
}

/// A TCP port to listen on and connect to, 1 to 65535: port 0 would have the daemon listen
/// on a port the kernel picks, which no client is told.
fn tcp_port(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!(
            "expected a TCP port from 1 to 65535 (the server daemon listens on it and the \
             clients connect to it), got `{s}`"
        )),
    }
}

/// A flag value that must be a finite number above 0.
pub(crate) fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("expected a positive number, got `{s}`")),
    }
}

/// A flag value in seconds above 0, at most a week (`MAX_SECONDS`), that a `Duration` holds:
/// NaN, infinities and 1e300 are refused here, with the range, instead of panicking where the
/// value becomes a `Duration` (after pods were created).
pub(crate) fn seconds_positive(s: &str) -> Result<f64, String> {
    seconds_in(s, false)
}

/// As [`seconds_positive`], 0 allowed.
pub(crate) fn seconds_non_negative(s: &str) -> Result<f64, String> {
    seconds_in(s, true)
}

fn seconds_in(s: &str, zero: bool) -> Result<f64, String> {
    use results::rdmabw::params::MAX_SECONDS;
    let v = s.trim().parse::<f64>().ok();
    let ok = v.filter(|v| {
        (if zero { *v >= 0.0 } else { *v > 0.0 })
            && *v <= MAX_SECONDS
            && Duration::try_from_secs_f64(*v).is_ok()
    });
    ok.ok_or_else(|| {
        format!(
            "expected seconds, {} to {MAX_SECONDS} (a week), got `{s}`",
            if zero { "0" } else { "above 0" }
        )
    })
}

/// railsweep's measured seconds per rail when neither `-D` nor `--window` is given.
pub const DEFAULT_WINDOW_S: f64 = 5.0;

/// A seconds value of `flag` read raw (the shared [`LengthFlags`]), checked as
/// [`seconds_positive`] (or [`seconds_non_negative`] with `zero`) checks a typed one.
fn seconds_value(flag: &str, v: f64, zero: bool) -> Result<f64> {
    seconds_in(&v.to_string(), zero).map_err(|e| anyhow::anyhow!("{flag}: {e}"))
}

fn use_cuda(s: &str) -> Result<GpuSelect, String> {
    GpuSelect::parse(s).ok_or_else(|| format!("expected a CUDA GPU index or auto, got `{s}`"))
}

/// `--test`: what railsweep measures on each rail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tests {
    /// The bandwidth (`bw`): always, for now; a row is a bandwidth measurement.
    pub bw: bool,
    /// The latency (`lat`): `rdmabw lat` after the bandwidth, through the same daemon.
    pub lat: bool,
}

impl Default for Tests {
    fn default() -> Self {
        Tests {
            bw: true,
            lat: false,
        }
    }
}

/// `--test`'s value parser: a comma-separated list of `bw` and `lat`.
fn tests_arg(s: &str) -> Result<Tests, String> {
    let mut t = Tests {
        bw: false,
        lat: false,
    };
    for word in s.split(',').map(str::trim) {
        match word {
            "bw" => t.bw = true,
            "lat" => t.lat = true,
            _ => {
                return Err(format!(
                    "expected a list of bw and lat (bw,lat), got `{word}`"
                ))
            }
        }
    }
    Ok(t)
}

/// `--lat-iters`'s value parser: a count of exchanges, at least ib_write_lat's least.
fn lat_iters_arg(s: &str) -> Result<u64, String> {
    use results::rdmabw::flags::LAT_MIN_ITERS;
    match s.trim().parse::<u64>() {
        Ok(n) if n >= LAT_MIN_ITERS => Ok(n),
        _ => Err(format!(
            "expected a number of exchanges, at least {LAT_MIN_ITERS} (as ib_write_lat -n), got `{s}`"
        )),
    }
}

/// `--gpu` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GpuArg {
    /// Each rail's buffers in the GPU nearest that rail's NIC, on both sides.
    Auto,
}

/// The test parameters of every sweep: `railsweep run`, `compare` and `fleet` flatten these.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("threshold").args(["min_gbps", "min_line_rate_pct"])))]
// `-l` is kubectl's label selector in railsweep (`fleet -l`); perftest's post list is
// `--post_list N`.
#[command(mut_arg("post_list", |a| a.short(None)))]
// -D and -f as rdmabw's and ib_write_bw's, per rail; railsweep's old -D is --window.
#[command(mut_arg("duration", |a| a.help(
    "Each rail's test in all, as ib_write_bw -D: the first and last -f seconds are warm-up and \
     cool-down. For one release, only with -f beside it (railsweep's -D was --window)"
)))]
#[command(mut_arg("window", |a| a.help(
    "Measure exactly this many seconds per rail, --warmup before and --cooldown after [default: 5]"
)))]
#[command(mut_arg("margin", |a| a.help(
    "Warm-up and cool-down inside -D, as ib_write_bw -f (default a quarter of -D); with \
     --window, around it. Spelled -f for one release (--margin was --deadline-slack)"
)))]
pub struct SweepArgs {
    /// Rails to measure, by rail number: `0,3,5-7` [default: every rail of either pod].
    #[arg(help_heading = heading::MEASURE, long, value_name = "LIST", value_parser = rail_list)]
    pub rails: Option<RailList>,
    /// Measure all rails at once (the node's aggregate), with the per-rail numbers and the sum.
    #[arg(help_heading = heading::MEASURE, long)]
    pub parallel: bool,
    /// GPUDirect: `auto` puts each rail's buffers, on both sides, in CUDA memory of the GPU
    /// nearest that rail's NIC (rdmabw --use_cuda auto: same PCIe switch, else root port, else
    /// NUMA node). With --mode the pods ask for nvidia.com/gpu (8 unless --resource says).
    #[arg(help_heading = heading::MEASURE, long, value_enum, value_name = "auto")]
    pub gpu: Option<GpuArg>,
    /// rdmabw's (and ib_write_bw's) spelling: `auto` is --gpu auto; a CUDA index N puts each
    /// rail's buffers, on both sides, in GPU N.
    #[arg(
        help_heading = heading::MEASURE,
        long = "use_cuda",
        alias = "use-cuda",
        value_name = "GPU",
        value_parser = use_cuda,
        conflicts_with = "gpu"
    )]
    pub use_cuda: Option<GpuSelect>,
    /// How long each rail's bandwidth test runs: `--window S` measures S seconds (the default,
    /// 5), `-D S -f F` is ib_write_bw's and rdmabw's whole test of S seconds with F of warm-up
    /// and F of cool-down inside it.
    #[command(flatten, next_help_heading = heading::MEASURE)]
    pub length: LengthFlags,
    /// The test flags rdmabw takes too (-s, -q, --tclass, transport, -m, thresholds, warm-up
    /// and cool-down), passed to every rdmabw client.
    #[command(flatten, next_help_heading = heading::MEASURE)]
    pub test: TestFlags,
    /// What to measure on each rail: `bw` (bandwidth), or `bw,lat`: then each rail's RDMA
    /// WRITE latency too, right after its bandwidth, through the same daemon (`rdmabw lat`,
    /// 2 B, 1000 exchanges, with the rail's --tclass, --sl and -m); rows gain lat_p50_us,
    /// lat_p99_us and lat_max_us.
    #[arg(help_heading = heading::MEASURE, long = "test", value_name = "LIST", default_value = "bw", value_parser = tests_arg)]
    pub tests: Tests,
    /// With --test bw,lat: ping-pong exchanges in each rail's latency test (rdmabw lat -n,
    /// ib_write_lat -n), at least 5 [default: 1000]. Fewer end sooner on a slow or delayed link;
    /// the p99 is then the exchange at 99% of fewer samples.
    #[arg(help_heading = heading::MEASURE, long = "lat-iters", value_name = "N", value_parser = lat_iters_arg)]
    pub lat_iters: Option<u64>,
    /// The latency flags `rdmabw lat` takes too (--max-p99-us), for --test bw,lat.
    #[command(flatten, next_help_heading = heading::MEASURE)]
    pub lat: LatencyFlags,
    /// rdmabw's -a (every size from 2 B to 8 MiB) is not a railsweep flag: a row is one rail at
    /// one size. Refused with that advice.
    #[arg(short = 'a', long = "all", hide = true)]
    pub all_sizes: bool,
    /// ib_write_bw's -F and --report_gbits, taken so that a perftest command line pastes as it
    /// is: railsweep reads no CPU frequency and always reports Gb/s.
    #[arg(short = 'F', long = "CPU-freq", hide = true)]
    pub cpu_freq: bool,
    #[arg(long = "report_gbits", alias = "report-gbits", hide = true)]
    pub report_gbits: bool,
    /// ib_write_bw's rail flags (-d device, -i port, -x GID index) are not railsweep's: it
    /// finds every rail's in the pods. Refused with what to use instead.
    #[arg(short = 'd', long = "ib-dev", hide = true, value_name = "DEV")]
    pub ib_dev: Option<String>,
    #[arg(short = 'i', long = "ib-port", hide = true, value_name = "PORT")]
    pub ib_port: Option<String>,
    #[arg(short = 'x', long = "gid-index", hide = true, value_name = "INDEX")]
    pub gid_index: Option<String>,
    /// Run a failed rail again up to N more times.
    #[arg(help_heading = heading::MEASURE, long, value_name = "N", default_value_t = 0)]
    pub retries: u32,
    /// Seconds a rail may take beyond its test before railsweep stops it and records it as
    /// failed (covers start-up, QP bring-up and rdmabw's warm-up).
    #[arg(help_heading = heading::MEASURE, long = "deadline-slack", value_name = "S", default_value_t = 15.0, value_parser = seconds_non_negative)]
    pub deadline_slack: f64,
    /// rdmabw inside the pods: a path, or a name looked up in PATH
    /// [default: `rdmabw`; for --runner local, the rdmabw next to railsweep if there is one].
    #[arg(help_heading = heading::RDMABW, long, value_name = "PATH")]
    pub rdmabw: Option<String>,
    /// Copy this railsweep's own rdmabw into both pods (to /tmp) through exec, for images that
    /// have libibverbs but no rdmabw. Needs `sh` and `head` in the image.
    #[arg(help_heading = heading::RDMABW, long)]
    pub inject: bool,
    /// The local rdmabw binary --inject copies [default: the old-glibc build of
    /// scripts/build-inject (../inject/rdmabw from railsweep, or rdmabw-inject beside it), else
    /// the rdmabw next to railsweep].
    #[arg(help_heading = heading::RDMABW, long, value_name = "FILE", requires = "inject")]
    pub inject_binary: Option<PathBuf>,
    /// Print each rdmabw client command on stderr before it runs (what a rail ran, to rerun
    /// it by hand).
    #[arg(help_heading = heading::OUTPUT, long)]
    pub show_commands: bool,
    /// TCP port of the server daemon (with --server-tool or --client-tool ib_write_bw: rail N's
    /// one-test server listens on PORT + N).
    #[arg(help_heading = heading::RDMABW, short = 'p', long, value_name = "PORT", default_value_t = 18515, value_parser = tcp_port)]
    pub port: u16,
    /// What serves the rails in the server pod: `rdmabw` (one daemon for every rail) or
    /// `ib_write_bw` (perftest's server, one per rail on port -p + rail number, for an image
    /// with perftest and no rdmabw: rdmabw's client speaks perftest's exchange to it; the pod
    /// still needs rdmabw, or --inject, to list its rails). Rows say it in server_tool.
    #[arg(help_heading = heading::RDMABW, long, value_enum, value_name = "TOOL", default_value_t = Tool::Rdmabw)]
    pub server_tool: Tool,
    /// What runs each rail's client in the client pod: `rdmabw` or `ib_write_bw` (perftest's
    /// client, for an image with perftest and no rdmabw: the server pod then serves each rail
    /// with a one-test rdmabw server on port -p + rail number, whose report gives the figures
    /// the client sent it; the pod still needs rdmabw, or --inject, to list its rails). Rows say
    /// it in client_tool.
    #[arg(help_heading = heading::RDMABW, long, value_enum, value_name = "TOOL", default_value_t = Tool::Rdmabw)]
    pub client_tool: Tool,
    /// perftest's ib_write_bw inside the pod that runs it (--server-tool ib_write_bw: the
    /// server pod; --client-tool ib_write_bw: the client pod): a path, or a name looked up in
    /// PATH.
    #[arg(help_heading = heading::RDMABW, long = "ib-write-bw", value_name = "PATH", default_value = "ib_write_bw")]
    pub ib_write_bw: String,
}

/// The rdmabw next to this railsweep, if there is one: the local runner's default rdmabw.
pub(crate) fn sibling_rdmabw() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.join("rdmabw");
    p.is_file().then_some(p)
}

/// `--inject`'s default binary: the stripped old-glibc build of `scripts/build-inject`
/// (`target/inject/rdmabw` beside `target/release/railsweep`, or `rdmabw-inject` installed next
/// to railsweep), else the rdmabw next to railsweep.
pub(crate) fn inject_default() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let built = dir.parent().map(|t| t.join("inject").join("rdmabw"));
    built
        .into_iter()
        .chain([dir.join("rdmabw-inject")])
        .find(|p| p.is_file())
        .or_else(sibling_rdmabw)
}

impl SweepArgs {
    /// The test flags as railsweep takes them (rdmabw's rail flags refused by name), with its
    /// defaults made explicit: the size (65536) and the queue pairs (1) always go to rdmabw.
    pub(crate) fn test(&self) -> Result<TestFlags> {
        for (given, flag) in [
            (self.ib_dev.is_some(), "-d/--ib-dev"),
            (self.ib_port.is_some(), "-i/--ib-port"),
            (self.gid_index.is_some(), "-x/--gid-index"),
        ] {
            if given {
                bail!(
                    "{flag}: railsweep finds each rail's device, port and GID in both pods \
                     (what `rdmabw rails` lists there); pick rails with --rails 0,3, or measure \
                     one device by hand with `rdmabw client {flag} ...` in the pod"
                );
            }
        }
        // The values' ranges are their value parsers' (results::rdmabw::flags), rdmabw's too.
        let mut t = self.test.clone();
        t.message.size = Some(t.size_bytes());
        t.shape.qp = Some(t.qps());
        Ok(t)
    }

    /// Each rail's measured seconds, and the test flags with the warm-up and cool-down that
    /// `-D`/`-f` set (rdmabw is handed `--window`, `--warmup`, `--cooldown`): `--window S` is S
    /// measured seconds, `-D S -f F` perftest's whole test, neither [`DEFAULT_WINDOW_S`].
    ///
    /// `-D` without `-f` is refused for this release: railsweep's `-D` was the measured
    /// seconds, and `-D 5` would now measure 3.
    pub(crate) fn timing(&self) -> Result<(f64, TestFlags)> {
        let mut test = self.test()?;
        let l = &self.length;
        let margin = l
            .margin
            .map(|m| seconds_value("-f/--margin", m, true))
            .transpose()?;
        let window = match (l.duration, l.window) {
            (Some(d), _) => {
                let d = seconds_value("-D/--duration", d, false)?;
                let short = results::rdmabw::flags::short_margins(test.shape.bidirectional);
                let Some(f) = margin else {
                    let now = results::rdmabw::flags::whole_test(d, None, &test.margins, short)
                        .map(|t| {
                            format!(
                                "-D {d} now measures {} s",
                                results::rdmabw::flags::fmt_num(t.measured_s)
                            )
                        })
                        .unwrap_or_else(|_| format!("-D {d} now leaves nothing to measure"));
                    bail!(
                        "-D {d}: railsweep's -D was the measured seconds per rail; it now means \
                         what it means in rdmabw and ib_write_bw, each rail's whole test with the \
                         first and last -f seconds (default a quarter of -D) warm-up and cool-down \
                         ({now}). So that no sweep measures less than it asks, this release takes \
                         -D only with -f beside it: give --window {d} to measure {d} s per rail \
                         as before, or -D {d} -f SECONDS for ib_write_bw's timing"
                    );
                };
                let t = results::rdmabw::flags::whole_test(d, Some(f), &test.margins, short)
                    .map_err(anyhow::Error::msg)?;
                test.margins.warmup = Some(t.warmup_s);
                test.margins.cooldown = Some(t.cooldown_s);
                t.measured_s
            }
            (None, w) => {
                if let Some(f) = margin {
                    test.margins.warmup.get_or_insert(f);
                    test.margins.cooldown.get_or_insert(f);
                }
                w.map(|w| seconds_value("--window", w, false))
                    .transpose()?
                    .unwrap_or(DEFAULT_WINDOW_S)
            }
        };
        Ok((window, test))
    }

    /// Check the parameters and resolve them, for pods reached through `runner`, rows recorded
    /// under `mode` (`None`: inferred) and `cluster` (`None`: the runner's).
    pub fn resolve(
        &self,
        runner: RunnerKind,
        mode: Option<NetworkMode>,
        cluster: Option<String>,
    ) -> Result<SweepConfig> {
        let (duration_s, test) = self.timing()?;
        if !self.tests.bw {
            bail!(
                "--test {}: railsweep measures the bandwidth of every rail it measures (a row is a \
                 bandwidth measurement); give --test bw,lat for latency beside it, or `rdmabw lat` \
                 in a pod for latency alone",
                if self.tests.lat { "lat" } else { "" }
            );
        }
        if self.lat.max_p99_us.is_some() && !self.tests.lat {
            bail!("--max-p99-us judges the latency: give --test bw,lat with it");
        }
        if self.lat_iters.is_some() && !self.tests.lat {
            bail!("--lat-iters sets the latency test's exchanges: give --test bw,lat with it");
        }
        if self.all_sizes {
            bail!(
                "-a/--all: railsweep measures one message size per row (-s, default 64K); run it \
                 once per size (-s 4K, -s 64K, -s 1M ...) to compare sizes, or rdmabw -a in a pod \
                 for one rail's whole curve"
            );
        }
        if self.client_tool == Tool::IbWriteBw {
            crate::sweep::perftest::check_client_tool(
                &test,
                duration_s,
                self.gpu.is_some() || self.use_cuda.is_some(),
                self.tests.lat,
                self.server_tool,
            )?;
        }
        if self.server_tool == Tool::IbWriteBw {
            crate::sweep::perftest::check_server_tool(
                &test,
                duration_s,
                self.gpu.is_some() || self.use_cuda.is_some(),
                self.tests.lat,
            )?;
        }
        let rdmabw =
            if self.inject {
                Rdmabw::Inject(self.inject_binary.clone().or_else(inject_default).context(
                    "--inject: no rdmabw next to railsweep; give one with --inject-binary",
                )?)
            } else {
                Rdmabw::InPods(match (&self.rdmabw, runner) {
                    (Some(p), _) => p.clone(),
                    (None, RunnerKind::Local) => sibling_rdmabw()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "rdmabw".into()),
                    (None, RunnerKind::Kube) => "rdmabw".into(),
                })
            };
        Ok(SweepConfig {
            rdmabw,
            rails: self.rails.clone().map(|r| r.0),
            port: self.port,
            duration_s,
            test,
            latency: self.tests.lat.then(|| LatencyTest {
                iters: self.lat_iters,
                limits: self.lat.clone(),
            }),
            parallel: self.parallel,
            retries: self.retries,
            margin: secs(self.deadline_slack),
            mode,
            cluster,
            gpu: self
                .use_cuda
                .clone()
                .or_else(|| (self.gpu == Some(GpuArg::Auto)).then_some(GpuSelect::Auto)),
            show_commands: self.show_commands,
            server_tool: self.server_tool,
            client_tool: self.client_tool,
            ib_write_bw: self.ib_write_bw.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_refuse_what_no_duration_holds_naming_the_range() {
        for bad in [
            "1e300", "NaN", "nan", "inf", "-inf", "-1", "604801", "x", "",
        ] {
            let e = seconds_positive(bad).err().unwrap_or_default();
            assert!(e.contains("a week") && e.contains(bad), "{bad}: {e}");
            assert!(seconds_non_negative(bad).is_err(), "{bad}");
        }
        assert_eq!(seconds_positive("0.5"), Ok(0.5));
        assert_eq!(seconds_positive("604800"), Ok(604_800.0));
        assert!(seconds_positive("0").is_err());
        assert_eq!(seconds_non_negative("0"), Ok(0.0));
    }

    #[test]
    fn timing_is_ib_write_bws_with_f_and_the_window_without() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            s: SweepArgs,
        }
        let t = |a: &[&str]| {
            T::try_parse_from(std::iter::once("t").chain(a.iter().copied()))
                .expect("parses")
                .s
                .timing()
        };
        let (w, test) = t(&[]).expect("default");
        assert_eq!(w, DEFAULT_WINDOW_S);
        assert_eq!(test.margins.warmup, None);
        let (w, test) = t(&["-D", "5", "-f", "1"]).expect("-D -f");
        assert_eq!(
            (w, test.margins.warmup, test.margins.cooldown),
            (3.0, Some(1.0), Some(1.0))
        );
        let (w, test) = t(&["--window", "4", "-f", "0.5"]).expect("--window -f");
        assert_eq!(
            (w, test.margins.warmup, test.margins.cooldown),
            (4.0, Some(0.5), Some(0.5))
        );
        let (w, test) = t(&["-D", "6", "-f", "1", "--warmup", "2"]).expect("--warmup wins");
        assert_eq!((w, test.margins.warmup), (3.0, Some(2.0)));
        let e = t(&["-D", "5"]).expect_err("-D alone").to_string();
        assert!(
            e.contains("--window 5") && e.contains("measures 3 s"),
            "{e}"
        );
        let e = t(&["-D", "2", "-f", "1"])
            .expect_err("nothing left")
            .to_string();
        assert!(e.contains("leaves nothing to measure"), "{e}");
        assert!(t(&["-D", "0", "-f", "0"]).is_err());
        assert!(t(&["--window", "NaN"]).is_err());
    }
}
