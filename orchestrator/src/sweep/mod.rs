//! The sweep itself, the same for every [`Runner`]: set-up in both pods, one rdmabw server
//! daemon, then the rails one by one (or all at once), each row written as soon as it is known.
//!
//! One concern a file: `setup` (each pod's rdmabw and rails), `daemon` (the server daemon's
//! life), `rail` (a rail's attempts and its row), and here the sweep's loop.

mod daemon;
mod mixed;
pub mod perftest;
mod rail;
mod setup;

pub use perftest::Tool;

pub use setup::{infer_mode, inject, injected_path, prepare, prepare_pod, PodSetUp};

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use futures::stream::{FuturesUnordered, StreamExt};
use results::rdmabw::gpu::GpuSelect;
use results::rdmabw::rails::{Capability, RailsReport};
use results::{escape, rfc3339_utc, NetworkMode, RailResult, RailStatus, RowSink};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::plan::{pair_rails, RailPair};
use crate::progress::Progress;
use crate::rdmabw;
use crate::runner::{PodInfo, Runner};
use daemon::Server;
use rail::{pod_field, Batch, RailEnd, RowContext, Sweep};

/// The two pods of a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pods {
    /// Pod running the clients.
    pub client: String,
    /// Pod running the server daemon.
    pub server: String,
    /// Mode `dra --gpu-align`: the GPU allocated with each rail of each pod, for the rows
    /// (known once the pods are allocated; empty otherwise).
    pub rail_gpus: crate::modes::dra::PairGpus,
}

/// Which rdmabw the pods run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rdmabw {
    /// This path (or name in `PATH`) inside the pods.
    InPods(String),
    /// Copy this local rdmabw into each pod first (`--inject`).
    Inject(PathBuf),
    /// Already copied into each pod, at [`injected_path`] (a fleet injects once per pod).
    Injected,
}

/// Everything a sweep is asked to do, validated (see [`crate::config::SweepArgs`]).
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// The pods' rdmabw.
    pub rdmabw: Rdmabw,
    /// Only these rails (`--rails`).
    pub rails: Option<Vec<u32>>,
    /// The daemon's TCP port.
    pub port: u16,
    /// Measured seconds per rail.
    pub duration_s: f64,
    /// The test flags every rdmabw client gets, checked, with the size and the queue pairs
    /// always given (`SweepArgs::resolve`).
    pub test: results::rdmabw::flags::TestFlags,
    /// With `--test bw,lat`: each rail's latency test, run after its bandwidth.
    pub latency: Option<LatencyTest>,
    /// All rails at once.
    pub parallel: bool,
    /// Extra attempts for a failed rail.
    pub retries: u32,
    /// Time allowed beyond the duration before railsweep stops a rail itself.
    pub margin: Duration,
    /// Network mode for the rows; `None` infers it.
    pub mode: Option<NetworkMode>,
    /// Cluster name for the rows; `None` takes the runner's.
    pub cluster: Option<String>,
    /// GPUDirect: each rail's buffers, on both sides, in the GPU nearest that rail's NIC.
    pub gpu: Option<GpuSelect>,
    /// Print each rdmabw client command on stderr before it runs.
    pub show_commands: bool,
    /// What serves the rails in the server pod (`--server-tool`): rdmabw's one daemon, or
    /// perftest's `ib_write_bw`, one per rail (see [`perftest`]).
    pub server_tool: Tool,
    /// What runs each rail's client in the client pod (`--client-tool`): rdmabw's client, or
    /// perftest's `ib_write_bw` against a one-test rdmabw server per rail (see [`perftest`]).
    pub client_tool: Tool,
    /// perftest's `ib_write_bw` in the pod that runs it (`--ib-write-bw`).
    pub ib_write_bw: String,
}

impl SweepConfig {
    /// RDMA WRITE size.
    pub fn size_bytes(&self) -> u64 {
        self.test.size_bytes()
    }

    /// Queue pairs per rail.
    pub fn qps(&self) -> u32 {
        self.test.qps()
    }

    /// The traffic class, if given.
    pub fn tclass(&self) -> Option<u8> {
        self.test.path.tclass
    }

    /// The deadline of one attempt on one rail: the measured duration, the warm-up and
    /// cool-down asked for (`--warmup`, `--cooldown`), and the margin (which covers start-up, QP
    /// bring-up, rdmabw's default warm-up and cool-down, and the report).
    pub fn deadline(&self) -> Duration {
        results::rdmabw::flags::secs(traffic_s(self.duration_s, &self.test)) + self.margin
    }

    /// Whether one rdmabw daemon serves the rails, with rdmabw's clients presenting the
    /// sweep's secret: not where perftest is at either end (one-test servers per rail).
    pub fn daemon(&self) -> bool {
        self.server_tool == Tool::Rdmabw && self.client_tool == Tool::Rdmabw
    }

    /// The deadline of one attempt with perftest's client (`--client-tool ib_write_bw`):
    /// perftest's whole test (the window and its margins, [`perftest::client_timing`]) and the
    /// margin.
    pub fn perftest_client_deadline(&self) -> Duration {
        let (_, whole) = perftest::client_timing(self.duration_s, &self.test);
        Duration::from_secs(u64::from(whole)) + self.margin
    }

    /// The deadline of one latency test (`--test bw,lat`): the margin, which covers start-up,
    /// QP bring-up and rdmabw lat's exchanges of 2 B (1000 by default: milliseconds on any
    /// link).
    pub fn lat_deadline(&self) -> Duration {
        self.margin
    }
}

/// Each rail's latency test (`--test bw,lat`): how many exchanges, and what judges them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyTest {
    /// Ping-pong exchanges (`--lat-iters`, rdmabw lat's `-n`); `None`: rdmabw lat's default,
    /// [`results::rdmabw::flags::LAT_DEFAULT_ITERS`].
    pub iters: Option<u64>,
    /// `--max-p99-us`.
    pub limits: results::rdmabw::flags::LatencyFlags,
}

/// Seconds of traffic in one rail's bandwidth test: the measured `duration_s` and the warm-up
/// and cool-down `test` asks for (rdmabw's defaults, fractions of a second, are the margin's).
pub fn traffic_s(duration_s: f64, test: &results::rdmabw::flags::TestFlags) -> f64 {
    duration_s.max(0.0) + test.margins.warmup.unwrap_or(0.0) + test.margins.cooldown.unwrap_or(0.0)
}

/// Both pods, ready for a sweep.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The pods' names, as given.
    pub pods: Pods,
    /// The client pod.
    pub client: PodInfo,
    /// The server pod.
    pub server: PodInfo,
    /// rdmabw's path in the client pod.
    pub client_bin: String,
    /// rdmabw's path in the server pod.
    pub server_bin: String,
    /// The client pod's rails.
    pub client_rails: RailsReport,
    /// The server pod's rails.
    pub server_rails: RailsReport,
    /// Seconds the set-up took.
    pub setup_s: f64,
}

/// A run id: the UTC start time, `20260601T120000Z`.
pub fn new_run_id() -> String {
    rfc3339_utc(SystemTime::now()).replace(['-', ':'], "")
}

/// How the rails of a sweep ended (see [`crate::pair::SweepOutcome`] for the whole sweep).
#[derive(Debug, Clone)]
pub struct RailsOutcome {
    /// Rows written by this invocation, in the order they were measured.
    pub rows: Vec<RailResult>,
    /// Rails that were not measured because of Ctrl-C (not written: `--resume` picks them up).
    pub interrupted: Vec<u32>,
    /// Wall time of the rails (set-up excluded), seconds.
    pub rails_wall_s: f64,
    /// Seconds the rdmabw client processes ran, summed over rails and attempts.
    pub clients_s: f64,
}

/// Everything a sweep needs besides the runner and the configuration.
#[derive(Debug)]
pub struct SweepRun<'a> {
    /// Where rows go, one at a time.
    pub sink: &'a mut RowSink,
    /// Rails already in the results file (`--resume`): not measured again.
    pub skip: BTreeSet<u32>,
    /// The run id of the rows.
    pub run_id: String,
    /// The network mode of the rows.
    pub mode: NetworkMode,
    /// Raised by Ctrl-C.
    pub cancel: CancellationToken,
    /// Hide the progress bars.
    pub quiet: bool,
}

/// The rails this sweep will measure, in order.
pub fn planned_rails(cfg: &SweepConfig, prep: &Prepared, skip: &BTreeSet<u32>) -> Vec<RailPair> {
    pair_rails(&prep.client_rails, &prep.server_rails, cfg.rails.as_deref())
        .into_iter()
        .filter(|p| !skip.contains(&p.rail))
        .collect()
}

/// The server daemon of a sweep over `pairs`, and whether the client pod runs its tests
/// through one `rdmabw batch`: as far as each pod's rdmabw announced it can (see
/// [`Capability`]), with a note for what an older build cannot do. The daemon listens on the
/// server rails' addresses, which the clients connect to, and on nothing else.
fn plan_processes(
    cfg: &SweepConfig,
    prep: &Prepared,
    pairs: &[RailPair],
) -> (rdmabw::DaemonSpec, bool) {
    let mut addrs: Vec<String> = Vec::new();
    for ip in pairs.iter().filter_map(|p| p.server.as_ref()?.ipv4.clone()) {
        if !addrs.contains(&ip) {
            addrs.push(ip);
        }
    }
    let (server, client) = (
        &prep.server_rails.capabilities,
        &prep.client_rails.capabilities,
    );
    let daemon = rdmabw::DaemonSpec::for_pod(cfg.port, cfg.gpu.clone(), addrs, server);
    if cfg.server_tool == Tool::IbWriteBw {
        if let (Some(first), Some(last)) = (pairs.first(), pairs.last()) {
            results::say!(
                "railsweep: pod {} serves each rail with perftest's ib_write_bw (rail N on port \
                 {} + N, ports {}-{}); the clients in pod {} speak perftest's exchange to it",
                prep.pods.server,
                cfg.port,
                perftest::rail_port(cfg.port, first.rail).unwrap_or(cfg.port),
                perftest::rail_port(cfg.port, last.rail).unwrap_or(u16::MAX),
                prep.pods.client
            );
        }
        // A client process per rail: the batch presents the sweep's secret, which perftest
        // does not check, and one process per test keeps each rail's client on its own.
        return (daemon, false);
    }
    if cfg.client_tool == Tool::IbWriteBw {
        if let (Some(first), Some(last)) = (pairs.first(), pairs.last()) {
            results::say!(
                "railsweep: pod {} runs perftest's ib_write_bw as each rail's client, against a \
                 one-test rdmabw server per rail in pod {} (rail N on port {} + N, ports {}-{})",
                prep.pods.client,
                prep.pods.server,
                cfg.port,
                perftest::rail_port(cfg.port, first.rail).unwrap_or(cfg.port),
                perftest::rail_port(cfg.port, last.rail).unwrap_or(u16::MAX),
            );
        }
        // perftest's client is a process of its own: no batch, no daemon, no secret.
        return (daemon, false);
    }
    let older = |pod: &str, lacks: &str, so: &str| {
        results::say!(
            "railsweep: note: the rdmabw in pod {pod} has no {lacks} (an older build); {so}"
        );
    };
    if !pairs.is_empty() {
        if !daemon.exit_on_stdin_eof {
            older(
                &prep.pods.server,
                rdmabw::EXIT_ON_STDIN_EOF,
                "starting its daemon without it, to be stopped by signal",
            );
        }
        if !server.contains(&Capability::BindAddresses) {
            older(
                &prep.pods.server,
                "--bind for several addresses",
                "its daemon listens on every address of the pod",
            );
        }
    }
    let batch = client.contains(&Capability::Batch);
    if !batch && !pairs.is_empty() {
        older(
            &prep.pods.client,
            "`batch` command",
            "starting one client per rail",
        );
    }
    // Rails at once (`--parallel`) are one client process each: a batch runs its tests in turn.
    (daemon, batch && !cfg.parallel)
}

/// Run the rails: start the daemon, measure, write each row at once, stop the daemon.
pub async fn run<R: Runner>(
    runner: &R,
    cfg: &SweepConfig,
    prep: &Prepared,
    run: SweepRun<'_>,
) -> Result<RailsOutcome> {
    let t0 = Instant::now();
    let secret = rdmabw::new_secret()?;
    let pairs = planned_rails(cfg, prep, &run.skip);
    let rails: Vec<u32> = pairs.iter().map(|p| p.rail).collect();
    let (daemon, batch) = plan_processes(cfg, prep, &pairs);
    let progress = Progress::new(
        &rails,
        Duration::from_secs_f64(cfg.duration_s.max(0.1) + 0.5),
        run.quiet,
    );
    let sweep = Sweep {
        runner,
        cfg,
        prep,
        ctx: RowContext {
            run_id: run.run_id.clone(),
            mode: run.mode.clone(),
            cluster: cfg.cluster.clone().unwrap_or_else(|| runner.cluster()),
            client_pod: pod_field(&prep.client.name),
            client_node: prep.client.node.clone(),
            server_pod: pod_field(&prep.server.name),
            server_node: prep.server.node.clone(),
        },
        server: Server {
            runner,
            pod: prep.pods.server.clone(),
            argv: rdmabw::server_argv(&prep.server_bin, &daemon),
            held: daemon.exit_on_stdin_eof,
            secret: secret.clone(),
            state: Mutex::new(None),
        },
        cancel: run.cancel.clone(),
        progress: progress.clone(),
        clients_s: std::sync::Mutex::new(0.0),
        batch: Mutex::new(if batch {
            Batch::Idle
        } else {
            Batch::Unsupported
        }),
        secret,
    };
    let mut outcome = RailsOutcome {
        rows: Vec::new(),
        interrupted: Vec::new(),
        rails_wall_s: 0.0,
        clients_s: 0.0,
    };
    // Start the daemon and the client's batch before the first rail; if the daemon cannot
    // start, every rail says why.
    if !pairs.is_empty() {
        sweep.start_processes().await;
    }
    let sink = run.sink;
    let mut record = |end: RailEnd, outcome: &mut RailsOutcome| -> Result<()> {
        match end {
            RailEnd::Row(row) => {
                // A row that breaks a rule (a value from a pod out of range that no check
                // caught where it arrived) is written failed, naming it: one bad value must not
                // stop the writing of every other row, the counters and the metrics.
                let row = match row.validate() {
                    Ok(()) => row,
                    Err(problem) => Box::new((*row).failed_because(escape::log_line(&format!(
                        "invalid result: `{}` {}",
                        problem.field, problem.message
                    )))),
                };
                if !progress.visible() {
                    results::say!("railsweep: {}", one_line(&row));
                }
                sink.append((*row).clone()).with_context(|| {
                    format!(
                        "cannot write rail {} to {}",
                        row.rail,
                        sink.csv_path().display()
                    )
                })?;
                outcome.rows.push(*row);
            }
            RailEnd::Interrupted(r) => outcome.interrupted.push(r),
        }
        Ok(())
    };
    let result: Result<()> = async {
        if cfg.parallel {
            let mut running: FuturesUnordered<_> =
                pairs.into_iter().map(|p| sweep.rail(p)).collect();
            while let Some(end) = running.next().await {
                record(end, &mut outcome)?;
            }
        } else {
            for p in pairs {
                let end = sweep.rail(p).await;
                record(end, &mut outcome)?;
            }
        }
        Ok(())
    }
    .await;
    // Both ends at once: each waits on its own exec stream's end.
    tokio::join!(sweep.close_batch(), sweep.server.stop());
    outcome.rails_wall_s = t0.elapsed().as_secs_f64();
    outcome.clients_s = sweep.clients_s.lock().map(|t| *t).unwrap_or(0.0);
    result?;
    Ok(outcome)
}

/// `rail 2 (net3 rxe_a2 -> net3 rxe_b2): 0.12 Gb/s ok`, or the error: one line, whatever the
/// pods' names and error texts hold ([`results::escape::log_line`]).
pub fn one_line(r: &RailResult) -> String {
    let what = match (r.status, r.bw_avg_gbps, &r.error) {
        (RailStatus::Failed, _, Some(e)) => format!("failed: {e}"),
        (s, Some(bw), _) => format!("{bw:.2} Gb/s {s}"),
        (s, None, _) => s.to_string(),
    };
    results::escape::log_line(&format!(
        "rail {} ({} {} -> {} {}): {what}",
        r.rail, r.client_interface, r.client_rdma_device, r.server_interface, r.server_rdma_device
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::plan::tests::{report, row};

    pub(crate) fn cfg(rails: Option<Vec<u32>>) -> SweepConfig {
        SweepConfig {
            rdmabw: Rdmabw::InPods("rdmabw".into()),
            rails,
            port: 18515,
            duration_s: 5.0,
            test: Default::default(),
            latency: None,
            parallel: false,
            retries: 0,
            margin: Duration::from_secs(30),
            mode: None,
            cluster: None,
            gpu: None,
            show_commands: false,
            server_tool: Tool::Rdmabw,
            client_tool: Tool::Rdmabw,
            ib_write_bw: "ib_write_bw".into(),
        }
    }

    fn pod(name: &str) -> PodInfo {
        PodInfo {
            name: name.into(),
            node: name.into(),
            host_network: None,
            container: None,
        }
    }

    /// Two pods with rails 0-2, their rdmabw announcing `server_caps` and `client_caps`.
    fn prepared(server_caps: &[Capability], client_caps: &[Capability]) -> Prepared {
        let rails = |host: &str, third: &str, caps: &[Capability]| {
            let mut r = report(
                host,
                (0..3)
                    .map(|i| {
                        row(
                            i,
                            &format!("net{i}"),
                            &format!("mlx5_{i}"),
                            &format!("10.0.{i}.{third}"),
                        )
                    })
                    .collect(),
            );
            r.capabilities = caps.to_vec();
            r
        };
        Prepared {
            pods: Pods {
                client: "a".into(),
                server: "b".into(),
                rail_gpus: Default::default(),
            },
            client: pod("a"),
            server: pod("b"),
            client_bin: "rdmabw".into(),
            server_bin: "rdmabw".into(),
            client_rails: rails("a", "1", client_caps),
            server_rails: rails("b", "2", server_caps),
            setup_s: 0.0,
        }
    }

    #[test]
    fn the_daemon_listens_on_the_planned_rails_addresses_only() {
        let prep = prepared(&Capability::OURS, &Capability::OURS);
        let pairs = planned_rails(&cfg(Some(vec![0, 2])), &prep, &BTreeSet::new());
        assert_eq!(pairs.iter().map(|p| p.rail).collect::<Vec<_>>(), [0, 2]);
        let (daemon, batch) = plan_processes(&cfg(None), &prep, &pairs);
        assert_eq!(daemon.bind, ["10.0.0.2", "10.0.2.2"]);
        assert!(daemon.exit_on_stdin_eof && batch);
    }

    #[test]
    fn an_older_rdmabw_is_asked_only_what_it_announced() {
        let prep = prepared(&[], &[]);
        let pairs = planned_rails(&cfg(None), &prep, &BTreeSet::from([1]));
        assert_eq!(pairs.iter().map(|p| p.rail).collect::<Vec<_>>(), [0, 2]);
        let (daemon, batch) = plan_processes(&cfg(None), &prep, &pairs);
        assert!(daemon.bind.is_empty(), "every address: {:?}", daemon.bind);
        assert!(!daemon.exit_on_stdin_eof && !batch);
    }

    #[test]
    fn the_deadline_is_the_window_and_the_margin() {
        assert_eq!(cfg(None).deadline(), Duration::from_secs(35));
    }

    #[test]
    fn the_deadline_allows_the_warmup_and_cooldown_asked_for() {
        let mut c = cfg(None);
        c.test.margins.warmup = Some(2.0);
        c.test.margins.cooldown = Some(20.0);
        assert_eq!(c.deadline(), Duration::from_secs(57));
    }
}
