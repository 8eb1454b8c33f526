//! One rail of a sweep: its attempts (through the batch client, or one client process each),
//! its deadline, and its row.

use std::time::{Duration, Instant, SystemTime};

use results::rdmabw::lat::LatReport;
use results::rdmabw::rails::{Attachment, RailRow};
use results::rdmabw::report::BwReport;
use results::rdmabw::{AskedTest, EndFacts, RdmabwRun};
use results::{rfc3339_utc, Cause, MemoryKind, NetworkMode, RailResult};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::daemon::{stop_process, Server};
use super::perftest::Tool;
use super::{Prepared, SweepConfig};
use crate::batch::{BatchClient, TestEnd};
use crate::modes::dra::GpusByInterface;
use crate::plan::RailPair;
use crate::progress::Progress;
use crate::rdmabw::{self, ClientOutcome, ClientTest};
use crate::runner::{Output, Runner, StartTurn};

/// How long a failed rail waits to see whether the server daemon has ended too (to say so in
/// the rail's error and start a new one for the next rail).
pub(super) const DAEMON_END_GRACE: Duration = Duration::from_millis(500);

/// How long perftest's server may take to end by itself after its rail's client ended (it
/// prints the client's figures and exits) before railsweep stops it.
pub(super) const PERFTEST_SERVER_END: Duration = Duration::from_secs(3);

/// Adds the time since its start to a total when dropped (however the attempt ends).
pub(super) struct CountTime<'a>(&'a std::sync::Mutex<f64>, Instant);

impl Drop for CountTime<'_> {
    fn drop(&mut self) {
        if let Ok(mut t) = self.0.lock() {
            *t += self.1.elapsed().as_secs_f64();
        }
    }
}

pub(super) enum Attempt {
    Measured(Box<BwReport>),
    /// Failed, in words, with the report where one came (its `error_kind` the cause).
    Failed(String, Option<Box<BwReport>>),
    /// Failed with no report, for a cause railsweep saw itself.
    Broke(String, Cause),
    Interrupted,
}

/// How one client test run ended, before its output is read.
#[derive(Debug)]
pub(super) enum Ran {
    /// It ended (whatever its exit code): its output.
    Done(Output),
    /// It could not run, or railsweep stopped it: why.
    Failed(String, Cause),
    /// Ctrl-C.
    Interrupted,
}

pub(super) enum RailEnd {
    Row(Box<RailResult>),
    Interrupted(u32),
}

/// What every row of a sweep shares.
#[derive(Debug, Clone)]
pub(super) struct RowContext {
    pub(super) run_id: String,
    pub(super) mode: NetworkMode,
    pub(super) cluster: String,
    pub(super) client_pod: Option<String>,
    pub(super) client_node: String,
    pub(super) server_pod: Option<String>,
    pub(super) server_node: String,
}

pub(super) struct Sweep<'a, R: Runner> {
    pub(super) runner: &'a R,
    pub(super) cfg: &'a SweepConfig,
    pub(super) prep: &'a Prepared,
    pub(super) ctx: RowContext,
    pub(super) server: Server<'a, R>,
    pub(super) cancel: CancellationToken,
    pub(super) progress: Progress,
    pub(super) clients_s: std::sync::Mutex<f64>,
    /// The client pod's `rdmabw batch`, for rails measured one at a time.
    pub(super) batch: Mutex<Batch>,
    /// The secret the daemon and every client of this sweep share.
    pub(super) secret: rdmabw::RunSecret,
}

/// Where the sequential sweep's client runs.
#[derive(Debug)]
pub(super) enum Batch {
    /// No batch running: the next rail starts one.
    Idle,
    /// This one takes the next rail.
    Running(BatchClient),
    /// The pod's rdmabw has no `batch`: one client process per rail.
    Unsupported,
    /// The start before the first rail failed: that rail's end, without a second start.
    StartFailed(Ran),
}

pub(super) fn pod_field(name: &str) -> Option<String> {
    (name != crate::runner::local::HOST).then(|| name.to_string())
}

impl<'a, R: Runner> Sweep<'a, R> {
    /// The client test of `pair`'s rail; `None` when one side lacks it.
    pub(super) fn client_test(&self, pair: &RailPair) -> Option<ClientTest> {
        let (c, s) = (pair.client.as_ref()?, pair.server.as_ref()?);
        Some(ClientTest {
            server_addr: s.ipv4.clone().unwrap_or_default(),
            port: self.cfg.port,
            netdev: c.iface.clone(),
            device: c
                .device
                .clone()
                .zip(c.gid_index)
                .map(|(d, g)| (d, c.port, g)),
            server_netdev: s.iface.clone(),
            server_device: s.device.clone().zip(s.gid_index),
            duration_s: self.cfg.duration_s,
            test: self.cfg.test.clone(),
            gpu: self.cfg.gpu.clone(),
        })
    }

    /// One bandwidth attempt on `pair`'s rail.
    pub(super) async fn attempt(&self, pair: &RailPair) -> Attempt {
        if self.cfg.server_tool == Tool::IbWriteBw {
            return self.perftest_attempt(pair).await;
        }
        if self.cfg.client_tool == Tool::IbWriteBw {
            return self.perftest_client_attempt(pair).await;
        }
        let Some(test) = self.client_test(pair) else {
            return Attempt::Failed("rail missing on one side".into(), None);
        };
        let argv = rdmabw::client_argv(&self.prep.client_bin, &test);
        match self
            .run_client(pair.rail, &argv, self.cfg.deadline(), true)
            .await
        {
            Ran::Done(out) => match rdmabw::parse_client(&out) {
                ClientOutcome::Measured(rep) => Attempt::Measured(rep),
                ClientOutcome::Failed(why, None) => Attempt::Broke(why, Cause::NoReport),
                ClientOutcome::Failed(why, rep) => Attempt::Failed(why, rep),
            },
            Ran::Failed(why, cause) => Attempt::Broke(why, cause),
            Ran::Interrupted => Attempt::Interrupted,
        }
    }

    /// One latency attempt on `pair`'s rail (`--test bw,lat`): the client's report, or why
    /// there is none; `None` when interrupted.
    pub(super) async fn lat_attempt(
        &self,
        pair: &RailPair,
        lat: &super::LatencyTest,
    ) -> Option<Result<LatReport, (String, Option<Cause>)>> {
        let Some(test) = self.client_test(pair) else {
            return Some(Err(("rail missing on one side".into(), None)));
        };
        let argv = rdmabw::lat_argv(&self.prep.client_bin, &test, lat.iters, &lat.limits);
        match self
            .run_client(pair.rail, &argv, self.cfg.lat_deadline(), true)
            .await
        {
            // A failed latency test's document is rdmabw's failed report: its kind is the cause.
            Ran::Done(out) => Some(rdmabw::parse_lat(&out)),
            Ran::Failed(why, cause) => Some(Err((why, Some(cause)))),
            Ran::Interrupted => None,
        }
    }

    /// Run one client test, `argv`, under `deadline`: through the batch client when rails go
    /// one at a time (and the pod's rdmabw has one), else as a process of its own. Starting
    /// the client (an exec through the API server) has a deadline of its own, the same
    /// length; the test's deadline counts from the client's start, so that a busy
    /// API server (a round of a thousand nodes opens a thousand exec streams at once) does not
    /// eat into the test's time: at 1,024 nodes every rail stopped at its deadline was a
    /// pair's first, with the client's start in its time.
    /// `secret`: the client presents the sweep's secret (to rdmabw's daemon; perftest's server
    /// checks none).
    pub(super) async fn run_client(
        &self,
        rail: u32,
        argv: &[String],
        deadline: Duration,
        secret: bool,
    ) -> Ran {
        if self.cfg.show_commands {
            results::say!("railsweep: rail {rail}: {}", argv.join(" "));
        }
        if let Some(r) = self.run_batched(argv, deadline).await {
            return r;
        }
        let pod = &self.prep.pods.client;
        let (process_argv, stdin) = if secret {
            (
                rdmabw::with_secret_stdin(argv),
                Some(self.secret.stdin_line()),
            )
        } else {
            (argv.to_vec(), None)
        };
        let Some(turn) = self.start_turn().await else {
            return Ran::Interrupted;
        };
        let spawned = tokio::select! {
            r = self.runner.spawn(pod, &process_argv, stdin) => r,
            _ = tokio::time::sleep(deadline) => return self.start_failure(deadline),
            _ = self.cancel.cancelled() => return Ran::Interrupted,
        };
        drop(turn);
        let mut spawned = match spawned {
            Ok(s) => s,
            Err(e) => return Ran::Failed(crate::exit::words(&e), Cause::NoReport),
        };
        let _count = CountTime(&self.clients_s, Instant::now());
        tokio::select! {
            r = &mut spawned.done => match r {
                Ok(Ok(out)) => Ran::Done(out),
                Ok(Err(e)) => Ran::Failed(format!("lost the client in pod {pod}: {}", crate::exit::words(&e)), Cause::NoReport),
                Err(e) => Ran::Failed(format!("lost the client in pod {pod}: {e}"), Cause::NoReport),
            },
            _ = tokio::time::sleep(deadline) => {
                let words = stop_process(self.runner, pod, spawned.pid, &mut spawned.done, "client").await;
                self.deadline_failure(deadline, words)
            }
            _ = self.cancel.cancelled() => {
                let _ = stop_process(self.runner, pod, spawned.pid, &mut spawned.done, "client").await;
                Ran::Interrupted
            }
        }
    }

    /// A turn to start the client ([`Runner::start_turn`]: its start's deadline counts from
    /// there); `None` when interrupted while waiting.
    pub(super) async fn start_turn(&self) -> Option<StartTurn> {
        tokio::select! {
            t = self.runner.start_turn() => Some(t),
            () = self.cancel.cancelled() => None,
        }
    }

    /// A client that could not even be started within the rail's `deadline`.
    fn start_failure(&self, deadline: Duration) -> Ran {
        Ran::Failed(
            format!(
                "could not start the client in pod {} within the rail's deadline of {:.0} s",
                self.prep.pods.client,
                deadline.as_secs_f64()
            ),
            Cause::Timeout,
        )
    }

    /// The deadline message of a rail whose client railsweep stopped.
    fn deadline_failure(&self, deadline: Duration, last_words: Option<Output>) -> Ran {
        let last = last_words
            .map(|o| o.stderr_tail(2))
            .filter(|t| !t.is_empty())
            .map(|t| format!("; its last words: {t}"))
            .unwrap_or_default();
        let margin = self.cfg.margin.as_secs_f64();
        let test_s = deadline.as_secs_f64() - margin;
        Ran::Failed(
            format!(
            "no result within the rail's deadline of {:.0} s ({} s test + {} s margin); railsweep stopped the client{last}",
            deadline.as_secs_f64(),
            results::rdmabw::flags::fmt_num((test_s * 1000.0).round() / 1000.0),
            margin
            ),
            Cause::Timeout,
        )
    }

    /// One test through the client pod's `rdmabw batch` (started on first use, and again
    /// after one was stopped or died). `None`: this rdmabw has no `batch`, use a process.
    async fn run_batched(&self, argv: &[String], deadline: Duration) -> Option<Ran> {
        let mut slot = self.batch.lock().await;
        let pod = &self.prep.pods.client;
        match std::mem::replace(&mut *slot, Batch::Idle) {
            Batch::Unsupported => {
                *slot = Batch::Unsupported;
                return None;
            }
            Batch::StartFailed(ran) => return Some(ran),
            other => *slot = other,
        }
        if let Err(ran) = self.start_batch(&mut slot, deadline).await {
            return Some(ran);
        }
        let Batch::Running(b) = &mut *slot else {
            return None;
        };
        let _count = CountTime(&self.clients_s, Instant::now());
        let end = tokio::select! {
            end = b.run(&argv[1..]) => Some(end),
            _ = tokio::time::sleep(deadline) => None,
            _ = self.cancel.cancelled() => {
                let pid = b.pid();
                let _ = stop_process(self.runner, pod, pid, b.done_mut(), "client").await;
                *slot = Batch::Idle;
                return Some(Ran::Interrupted);
            }
        };
        Some(match end {
            Some(TestEnd::Ended(out)) => Ran::Done(out),
            Some(TestEnd::Gone(out)) => {
                *slot = Batch::Idle;
                Ran::Done(out)
            }
            None => {
                let pid = b.pid();
                let stopped = stop_process(self.runner, pod, pid, b.done_mut(), "client").await;
                let words = stopped.map(|_| b.last_words());
                *slot = Batch::Idle;
                self.deadline_failure(deadline, words)
            }
        })
    }

    /// Start the client pod's `rdmabw batch` into `slot` unless one runs there (or the pod's
    /// rdmabw has none); `Err`: the rail's end when it cannot start within `deadline`.
    async fn start_batch(&self, slot: &mut Batch, deadline: Duration) -> Result<(), Ran> {
        if !matches!(slot, Batch::Idle) {
            return Ok(());
        }
        let pod = &self.prep.pods.client;
        let Some(turn) = self.start_turn().await else {
            return Err(Ran::Interrupted);
        };
        let started = tokio::select! {
            r = BatchClient::start(self.runner, pod, &self.prep.client_bin, &self.secret) => r,
            _ = tokio::time::sleep(deadline) => return Err(self.start_failure(deadline)),
            _ = self.cancel.cancelled() => return Err(Ran::Interrupted),
        };
        drop(turn);
        match started {
            Ok(b) => {
                *slot = Batch::Running(b);
                Ok(())
            }
            Err(e) => Err(Ran::Failed(crate::exit::words(&e), Cause::NoReport)),
        }
    }

    /// Before the first rail: start the server daemon and the client's batch at once (each
    /// start is an exec through the API server and the kubelet, about a second on the lab's
    /// emulated nodes; one after the other, they were the sweep's largest fixed cost). Why a
    /// batch could not start here is the first rail's end (the next rail starts one again);
    /// a daemon that cannot start is said once here, and each rail says it again.
    pub(super) async fn start_processes(&self) {
        let batch = async {
            let mut slot = self.batch.lock().await;
            if let Err(ran) = self.start_batch(&mut slot, self.cfg.deadline()).await {
                *slot = Batch::StartFailed(ran);
            }
        };
        let (server, ()) = tokio::join!(self.ensure_server(), batch);
        if let Err(e) = server {
            self.progress.println(&format!("railsweep: {e}"));
        }
    }

    /// End the batch at the end of the sweep: close its input, else stop it.
    pub(super) async fn close_batch(&self) {
        let mut slot = self.batch.lock().await;
        if let Batch::Running(b) = &mut *slot {
            if !b.close(Duration::from_secs(3)).await {
                let pid = b.pid();
                let _ = stop_process(
                    self.runner,
                    &self.prep.pods.client,
                    pid,
                    b.done_mut(),
                    "client",
                )
                .await;
            }
        }
        *slot = Batch::Idle;
    }

    /// Start rdmabw's server daemon if none runs; nothing to start where perftest is at either
    /// end (one-test servers, started by each attempt).
    async fn ensure_server(&self) -> std::result::Result<(), String> {
        if self.cfg.daemon() {
            self.server.ensure().await
        } else {
            Ok(())
        }
    }

    pub(super) async fn rail(&self, pair: RailPair) -> RailEnd {
        let rail = pair.rail;
        if let Some((problem, cause)) = pair.problem(&self.prep.pods.client, &self.prep.pods.server)
        {
            self.progress.finish(rail, "not measured");
            return RailEnd::Row(Box::new(self.failed_row(
                &pair,
                problem,
                None,
                Some(&cause),
            )));
        }
        let attempts = self.cfg.retries + 1;
        let mut last: (String, Option<Box<BwReport>>, Option<Cause>) = (String::new(), None, None);
        let mut n = 0;
        while n < attempts {
            n += 1;
            if self.cancel.is_cancelled() {
                return RailEnd::Interrupted(rail);
            }
            if n > 1 {
                self.progress.println(&format!(
                    "railsweep: rail {rail}: attempt {} of {attempts} after: {}",
                    n, last.0
                ));
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = self.cancel.cancelled() => return RailEnd::Interrupted(rail),
                }
            }
            if let Err(e) = self.ensure_server().await {
                last = (e, None, Some(Cause::ServerEnded));
                continue;
            }
            self.progress.start(
                rail,
                &if n == 1 {
                    "measuring".to_string()
                } else {
                    format!("attempt {n}")
                },
            );
            let (mut why, rep, mut cause) = match self.attempt(&pair).await {
                Attempt::Measured(rep) => {
                    let mut row = self.measured_row(&pair, &rep);
                    if let Some(lat) = &self.cfg.latency {
                        if !self.latency(&pair, lat, &mut row).await {
                            self.progress.finish(rail, "interrupted");
                            return RailEnd::Interrupted(rail);
                        }
                    }
                    let mut msg =
                        format!("{:.2} Gb/s {}", row.bw_avg_gbps.unwrap_or(0.0), row.status);
                    if let Some(p99) = row.lat_p99_us {
                        msg = format!("{msg}, p99 {p99:.2} us");
                    }
                    self.progress.finish(rail, &msg);
                    return RailEnd::Row(Box::new(row));
                }
                Attempt::Interrupted => {
                    self.progress.finish(rail, "interrupted");
                    return RailEnd::Interrupted(rail);
                }
                Attempt::Broke(why, cause) => (why, None, Some(cause)),
                Attempt::Failed(why, rep) => (why, rep, None),
            };
            if let Some(end) = self.server.ended(DAEMON_END_GRACE).await {
                why.push_str(&format!(
                    "; the server daemon in pod {} had ended ({end})",
                    self.prep.pods.server
                ));
                cause = Some(Cause::ServerEnded);
            }
            last = (why, rep, cause);
        }
        let (mut why, rep, cause) = last;
        if attempts > 1 {
            why = format!("{why} (after {attempts} attempts)");
        }
        self.progress.finish(rail, "failed");
        RailEnd::Row(Box::new(self.failed_row(
            &pair,
            why,
            rep.as_deref(),
            cause.as_ref(),
        )))
    }

    /// Measure the latency of `pair`'s rail after its bandwidth (`--test bw,lat`) into `row`,
    /// with as many attempts as the bandwidth has; `false` when interrupted.
    pub(super) async fn latency(
        &self,
        pair: &RailPair,
        lat: &super::LatencyTest,
        row: &mut RailResult,
    ) -> bool {
        let attempts = self.cfg.retries + 1;
        let mut why = String::new();
        let mut cause = None;
        for n in 1..=attempts {
            if n > 1 {
                self.progress.println(&format!(
                    "railsweep: rail {}: latency attempt {n} of {attempts} after: {why}",
                    pair.rail
                ));
            }
            if let Err(e) = self.ensure_server().await {
                (why, cause) = (e, Some(Cause::ServerEnded));
                continue;
            }
            self.progress.start(pair.rail, "measuring latency");
            match self.lat_attempt(pair, lat).await {
                None => return false,
                Some(Ok(rep)) => {
                    row.add_latency(&rep, lat.limits.max_p99_us);
                    return true;
                }
                Some(Err((e, c))) => (why, cause) = (e, c),
            }
        }
        if attempts > 1 {
            why = format!("{why} (after {attempts} attempts)");
        }
        row.latency_failed(&why, cause.as_ref());
        true
    }

    /// What a row of `pair` knows besides rdmabw's report: the run, the pods and nodes, the
    /// rails' discovery, the GPUs a DRA allocation put beside them, and the test asked for.
    pub(super) fn row_facts(&self, pair: &RailPair) -> RdmabwRun {
        let cfg = self.cfg;
        let end =
            |row: &Option<RailRow>, pod: &Option<String>, node: &str, gpus: &GpusByInterface| {
                let gpu = row.as_ref().and_then(|r| gpus.get(&r.iface));
                EndFacts {
                    pod: pod.clone(),
                    node: Some(node.to_string()),
                    interface: row.as_ref().map(|r| r.iface.clone()),
                    rdma_device: row.as_ref().and_then(|r| r.device.clone()),
                    gid_index: row.as_ref().and_then(|r| r.gid_index),
                    rate_gbps: row.as_ref().and_then(|r| r.rate_gbps),
                    gpu: gpu.map(|g| g.device.clone()),
                    gpu_pcie_root: gpu.and_then(|g| g.pcie_root.clone()),
                    software: row.as_ref().map(|r| r.attachment == Attachment::Software),
                    tool: None,
                    gpus_without_rail: None,
                }
            };
        RdmabwRun {
            run_id: self.ctx.run_id.clone(),
            time_utc: rfc3339_utc(SystemTime::now()),
            network_mode: self.ctx.mode.clone(),
            cluster: self.ctx.cluster.clone(),
            rail: Some(pair.rail),
            client: EndFacts {
                tool: Some(cfg.client_tool.row_word().into()),
                gpus_without_rail: crate::plan::gpus_without_rail(&self.prep.client_rails),
                ..end(
                    &pair.client,
                    &self.ctx.client_pod,
                    &self.ctx.client_node,
                    &self.prep.pods.rail_gpus.client,
                )
            },
            server: EndFacts {
                tool: Some(cfg.server_tool.row_word().into()),
                gpus_without_rail: crate::plan::gpus_without_rail(&self.prep.server_rails),
                ..end(
                    &pair.server,
                    &self.ctx.server_pod,
                    &self.ctx.server_node,
                    &self.prep.pods.rail_gpus.server,
                )
            },
            asked: Some(AskedTest {
                size_bytes: cfg.size_bytes(),
                qps: cfg.qps(),
                bidirectional: cfg.test.shape.bidirectional,
                traffic_class: cfg.tclass(),
                mtu_bytes: cfg.test.path.mtu,
                memory: if cfg.gpu.is_some() {
                    MemoryKind::Cuda
                } else {
                    MemoryKind::Host
                },
                min_gbps: cfg.test.thresholds.min_gbps,
                min_line_rate_pct: cfg.test.thresholds.min_line_rate_pct,
            }),
        }
    }

    /// The row of a measured rail: the report's (railsweep measures one size), with this
    /// sweep's facts.
    pub(super) fn measured_row(&self, pair: &RailPair, rep: &BwReport) -> RailResult {
        let facts = self.row_facts(pair);
        let mut rows = facts.rail_results(rep);
        let mut row = rows
            .pop()
            .unwrap_or_else(|| facts.failed_row(Some(rep), "rdmabw reported no result rows"));
        // perftest's client sends no window with its figures: it measured the -D it was given
        // less its margins, railsweep's window (perftest::client_timing).
        if self.cfg.client_tool == Tool::IbWriteBw && row.bw_avg_gbps.is_some() {
            row.duration_s = Some(self.cfg.duration_s);
        }
        row
    }

    /// The row of a rail that failed, saying `error`; its verdict from `cause` where railsweep
    /// saw one itself, else from the report's `error_kind`.
    pub(super) fn failed_row(
        &self,
        pair: &RailPair,
        error: String,
        rep: Option<&BwReport>,
        cause: Option<&Cause>,
    ) -> RailResult {
        let mut row = self.row_facts(pair).failed_row(rep, &error);
        if cause.is_some() {
            row.judge(cause, None);
        }
        row
    }
}
