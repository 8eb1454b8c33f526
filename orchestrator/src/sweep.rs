//! The sweep itself, the same for every [`Runner`]: set-up in both pods, one rdmabw server
//! daemon, then the rails one by one (or all at once), each row written as soon as it is known.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use futures::stream::{FuturesUnordered, StreamExt};
use results::rdmabw::gpu::GpuSelect;
use results::rdmabw::rails::{Attachment, Capability, RailRow, RailsReport};
use results::rdmabw::report::BwReport;
use results::rdmabw::{AskedTest, EndFacts, RdmabwRun};
use results::{rfc3339_utc, MemoryKind, NetworkMode, RailResult, RailStatus, RowSink};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::batch::{BatchClient, TestEnd};
use crate::modes::dra::GpusByInterface;
use crate::plan::{pair_rails, RailPair};
use crate::progress::Progress;
use crate::rdmabw::{self, ClientOutcome, ClientTest};
use crate::runner::{Exit, Output, PodInfo, Runner, Signal};

/// The two pods of a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pods {
    /// Pod running the clients.
    pub client: String,
    /// Pod running the server daemon.
    pub server: String,
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
    /// RDMA WRITE size.
    pub size_bytes: u64,
    /// Traffic class.
    pub tclass: Option<u8>,
    /// Queue pairs per rail.
    pub qps: u32,
    /// Forced path MTU.
    pub mtu: Option<u32>,
    /// Threshold in Gb/s.
    pub min_gbps: Option<f64>,
    /// Threshold in percent of line rate.
    pub min_line_rate_pct: Option<f64>,
    /// rdmabw's warm-up before the measured window, if not its default.
    pub warmup_s: Option<f64>,
    /// rdmabw's cool-down after the measured window, if not its default.
    pub cooldown_s: Option<f64>,
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
    /// rdmabw's transport flags, passed through as given (-b, --sl, -t, -Q, -l, -I, -e,
    /// --data_validation).
    pub transport: results::rdmabw::flags::TransportFlags,
    /// Print each rdmabw client command on stderr before it runs.
    pub show_commands: bool,
    /// Mode `dra --gpu-align`: the GPU allocated with each rail of each pod, for the rows.
    pub rail_gpus: crate::modes::dra::PairGpus,
}

impl SweepConfig {
    /// The deadline of one attempt on one rail: the measured duration plus the margin (which
    /// covers start-up, QP bring-up, rdmabw's warm-up and cool-down, and the report).
    pub fn deadline(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s.max(0.0)) + self.margin
    }
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

/// Where an injected rdmabw goes in a pod.
pub fn injected_path() -> String {
    format!("/tmp/railsweep-rdmabw-{}", rdmabw::OWN_VERSION)
}

/// Copy the local rdmabw `local` into `pod`, at [`injected_path`]: its path there.
pub async fn inject<R: Runner>(runner: &R, pod: &str, local: &std::path::Path) -> Result<String> {
    let bytes = tokio::fs::read(local)
        .await
        .with_context(|| format!("cannot read {} to inject it", local.display()))?;
    let dest = injected_path();
    // `head -c N` stops after exactly N bytes, so the copy does not depend on the exec
    // protocol's way of closing stdin (v4 has none). The script is fixed; the size and path are
    // its positional parameters. The copy lands under a name of its own (the shell's PID) and is
    // renamed into place, so two pods sharing a /tmp (the lab) never see a half-written binary.
    let argv: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        "head -c \"$1\" >\"$2.$$\" && chmod 755 \"$2.$$\" && mv -f \"$2.$$\" \"$2\"".into(),
        "railsweep".into(),
        bytes.len().to_string(),
        dest.clone(),
    ];
    let n = bytes.len();
    let out = runner.exec(pod, &argv, Some(bytes)).await?;
    if !out.exit.success() {
        bail!(
            "copying rdmabw ({n} bytes) into pod {pod} failed: {} {}",
            out.exit,
            out.stderr_tail(3)
        );
    }
    Ok(dest)
}

fn install_hint(injected: bool) -> &'static str {
    if injected {
        ""
    } else {
        " Install rdmabw in the image, give its path with --rdmabw, or let railsweep copy its own with --inject."
    }
}

/// Refuse an rdmabw that does not speak our documents and protocol; note a different patch.
fn check_compatible(version: &str, pod: &str, injected: bool) -> Result<()> {
    if !rdmabw::compatible(version, rdmabw::OWN_VERSION) {
        bail!(
            "pod {pod} has rdmabw {version}, which does not speak this railsweep's protocol ({}).{}",
            rdmabw::OWN_VERSION,
            install_hint(injected)
        );
    }
    if version != rdmabw::OWN_VERSION {
        eprintln!(
            "railsweep: note: pod {pod} has rdmabw {version}, this railsweep was built with {}",
            rdmabw::OWN_VERSION
        );
    }
    Ok(())
}

/// `rdmabw --version` in the pod: is it there, and which version is it.
async fn check_version<R: Runner>(
    runner: &R,
    pod: &str,
    bin: &str,
    injected: bool,
) -> Result<String> {
    let out = runner.exec(pod, &rdmabw::version_argv(bin), None).await?;
    let hint = install_hint(injected);
    match &out.exit {
        Exit::Code(0) => {}
        Exit::Code(126 | 127 | 255) | Exit::Error(_) => bail!(
            "cannot run `{bin} --version` in pod {pod}: {}{}.{hint}",
            out.exit,
            match out.stderr_tail(2) {
                t if t.is_empty() => String::new(),
                t => format!(" ({t})"),
            }
        ),
        e => bail!(
            "`{bin} --version` in pod {pod} failed: {e} {}",
            out.stderr_tail(2)
        ),
    }
    let version = rdmabw::parse_version(&out.stdout).with_context(|| format!("in pod {pod}"))?;
    check_compatible(&version, pod, injected)?;
    Ok(version)
}

/// One pod, ready for sweeps: what [`prepare_pod`] learnt about it.
#[derive(Debug, Clone)]
pub struct PodSetUp {
    /// The pod.
    pub info: PodInfo,
    /// rdmabw's path in it.
    pub bin: String,
    /// Its rails.
    pub rails: RailsReport,
}

/// Set one pod up: look it up, check (or inject) rdmabw, read its rails (and with `--use_cuda`
/// check its GPUs). A fleet does this once per pod for all its pairs.
///
/// # Errors
///
/// The pod cannot be used: it is not running, or its rdmabw is missing, of another version,
/// or fails.
pub async fn prepare_pod<R: Runner>(runner: &R, cfg: &SweepConfig, pod: &str) -> Result<PodSetUp> {
    let info = runner.describe(pod).await?;
    let (bin, injected) = match &cfg.rdmabw {
        Rdmabw::InPods(path) => (path.clone(), false),
        Rdmabw::Inject(local) => (inject(runner, pod, local).await?, true),
        Rdmabw::Injected => (injected_path(), true),
    };
    // One exec when all is well: the rails report names the rdmabw version that printed it.
    // Only when it fails does `--version` run, to tell a missing or foreign rdmabw apart from
    // a failing `rails`.
    let out = runner.exec(pod, &rdmabw::rails_argv(&bin), None).await?;
    match rdmabw::parse_rails(&out) {
        Ok(rails) => {
            check_compatible(&rails.rdmabw_version, pod, injected)?;
            if let Some(gpu) = &cfg.gpu {
                // Every rail would fail the same way: say it once, before any test.
                let out = runner.exec(pod, &rdmabw::gpus_argv(&bin), None).await?;
                rdmabw::parse_gpus(&out).with_context(|| {
                    format!("--use_cuda {gpu}: no GPU rdmabw can use in pod {pod}")
                })?;
            }
            Ok(PodSetUp { info, bin, rails })
        }
        Err(e) => {
            check_version(runner, pod, &bin, injected).await?;
            Err(e.context(format!("in pod {pod}")))
        }
    }
}

/// Set-up: look both pods up, check (or inject) rdmabw, and read their rails, both pods at once.
/// Any error here is a set-up error (exit code 2).
pub async fn prepare<R: Runner>(runner: &R, cfg: &SweepConfig, pods: &Pods) -> Result<Prepared> {
    let t0 = Instant::now();
    if pods.client == pods.server {
        eprintln!(
            "railsweep: warning: client and server are the same pod ({})",
            pods.client
        );
    }
    let (c, s) = tokio::join!(
        prepare_pod(runner, cfg, &pods.client),
        prepare_pod(runner, cfg, &pods.server)
    );
    let client = c.context("client pod")?;
    let server = s.context("server pod")?;
    let mut prep = Prepared::of(pods, client, server);
    prep.setup_s = t0.elapsed().as_secs_f64();
    Ok(prep)
}

impl Prepared {
    /// Both pods of `pods` from their set-ups (made by [`prepare_pod`] earlier: `setup_s` 0).
    pub fn of(pods: &Pods, client: PodSetUp, server: PodSetUp) -> Prepared {
        Prepared {
            pods: pods.clone(),
            client: client.info,
            server: server.info,
            client_bin: client.bin,
            server_bin: server.bin,
            client_rails: client.rails,
            server_rails: server.rails,
            setup_s: 0.0,
        }
    }
}

/// The network mode rows are recorded under: `--mode`, else hostNetwork pods, else the rails'
/// common attachment (SR-IOV, IPvlan, host network), else `lab` for the local runner and `pods`
/// for Kubernetes.
pub fn infer_mode(
    explicit: Option<&NetworkMode>,
    runner_kind: &str,
    prep: &Prepared,
) -> NetworkMode {
    if let Some(m) = explicit {
        return m.clone();
    }
    if prep.client.host_network == Some(true) && prep.server.host_network == Some(true) {
        return NetworkMode::HostNetwork;
    }
    let atts: BTreeSet<String> = prep
        .client_rails
        .rails
        .iter()
        .chain(&prep.server_rails.rails)
        .map(|r| format!("{:?}", r.attachment))
        .collect();
    if atts.len() == 1 {
        let only = prep
            .client_rails
            .rails
            .first()
            .or(prep.server_rails.rails.first())
            .map(|r| r.attachment);
        match only {
            Some(Attachment::Sriov) => return NetworkMode::Sriov,
            Some(Attachment::Ipvlan) => return NetworkMode::Ipvlan,
            Some(Attachment::HostNetwork) => return NetworkMode::HostNetwork,
            _ => {}
        }
    }
    if runner_kind == "local" {
        NetworkMode::Lab
    } else {
        NetworkMode::Pods
    }
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

struct Daemon {
    pid: u32,
    /// Its standard input, held open after the secret: a daemon started with
    /// `--exit-on-stdin-eof` stops when it is closed (`None` for one started without).
    stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    done: JoinHandle<Result<Output>>,
}

/// Read a stream to its end into `buf` (shared, so that what came is kept if the reading is
/// given up).
async fn read_into(
    mut r: Pin<Box<dyn AsyncRead + Send>>,
    buf: Arc<StdMutex<Vec<u8>>>,
    cap: Option<usize>,
) {
    let mut chunk = [0u8; 4096];
    while let Ok(n) = r.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        if let Ok(mut b) = buf.lock() {
            match cap {
                Some(cap) => keep_tail(&mut b, &chunk[..n], cap),
                None => b.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// How much of a daemon's stderr railsweep keeps: its last 64 KiB. A daemon lives as long as
/// the sweep, and what a peer makes it log must not grow railsweep's memory without bound;
/// the last lines are what error messages quote.
pub(crate) const DAEMON_STDERR_TAIL: usize = 64 * 1024;

/// Appends `chunk` to `buf` and keeps only its last `cap` bytes, from the start of a line
/// where one starts within them.
fn keep_tail(buf: &mut Vec<u8>, chunk: &[u8], cap: usize) {
    buf.extend_from_slice(chunk);
    if buf.len() > cap {
        let mut cut = buf.len() - cap;
        if let Some(nl) = buf[cut..].iter().position(|&c| c == b'\n') {
            if nl + 1 < buf.len() - cut {
                cut += nl + 1;
            }
        }
        buf.drain(..cut);
    }
}

/// How long a process's streams may stay open after its exit (a child it left holds them)
/// before what came so far is taken as all of its output.
const STREAMS_AFTER_EXIT: Duration = Duration::from_secs(2);

/// Start `argv` with its streams connected, write `stdin_line` and keep its input open; its
/// output is collected until it ends.
async fn start_held<R: Runner>(
    runner: &R,
    pod: &str,
    argv: &[String],
    stdin_line: &[u8],
) -> Result<Daemon> {
    let mut p = runner.start(pod, argv).await?;
    // A daemon that ends at once (its port in use) may have closed its input already: its own
    // words say why.
    let _ = p.stdin.write_all(stdin_line).await;
    let _ = p.stdin.flush().await;
    let stdin = Some(p.stdin);
    let (out, err) = (Arc::default(), Arc::default());
    let mut readers = [
        tokio::spawn(read_into(p.stdout, Arc::clone(&out), None)),
        tokio::spawn(read_into(
            p.stderr,
            Arc::clone(&err),
            Some(DAEMON_STDERR_TAIL),
        )),
    ];
    let exit = p.done;
    let done = tokio::spawn(async move {
        let exit = match exit.await {
            Ok(Ok(e)) => e,
            Ok(Err(e)) => Exit::Error(format!("{e:#}")),
            Err(e) => Exit::Error(e.to_string()),
        };
        let all = futures::future::join_all(readers.iter_mut());
        let _ = tokio::time::timeout(STREAMS_AFTER_EXIT, all).await;
        for r in &readers {
            r.abort();
        }
        let take = |b: &StdMutex<Vec<u8>>| {
            b.lock()
                .map(|mut v| std::mem::take(&mut *v))
                .unwrap_or_default()
        };
        Ok(Output {
            exit,
            stdout: take(&out),
            stderr: take(&err),
        })
    });
    Ok(Daemon {
        pid: p.pid,
        stdin,
        done,
    })
}

/// How long a daemon may take to stop after its input was closed before it is stopped by
/// signal (it stops within a poll interval; a round trip through the API server adds to that).
const DAEMON_STDIN_EOF_WAIT: Duration = Duration::from_secs(3);

/// The one rdmabw server daemon in the server pod, restarted when it is found gone.
struct Server<'a, R: Runner> {
    runner: &'a R,
    pod: String,
    argv: Vec<String>,
    /// Whether it stops at the end of its input (its rdmabw announced it can); else it is
    /// started with its input closed after the secret and stopped by signal.
    held: bool,
    secret: rdmabw::RunSecret,
    state: Mutex<Option<Daemon>>,
}

fn describe_end(r: std::result::Result<Result<Output>, tokio::task::JoinError>) -> String {
    match r {
        Ok(Ok(out)) => {
            let tail = out.stderr_tail(2);
            if tail.is_empty() {
                out.exit.to_string()
            } else {
                format!("{}: {tail}", out.exit)
            }
        }
        Ok(Err(e)) => format!("{e:#}"),
        Err(e) => e.to_string(),
    }
}

impl<'a, R: Runner> Server<'a, R> {
    /// Start the daemon if none runs; an error says why it cannot.
    async fn ensure(&self) -> std::result::Result<(), String> {
        let mut st = self.state.lock().await;
        if let Some(d) = st.as_ref() {
            if !d.done.is_finished() {
                return Ok(());
            }
        }
        if let Some(old) = st.take() {
            let why = describe_end(old.done.await);
            eprintln!(
                "railsweep: the server daemon in pod {} had ended ({why}); starting it again",
                self.pod
            );
        }
        // A daemon that cannot start (port in use) ends at once; the first rail's client then
        // fails to connect and `ended` adds the daemon's own words to that rail's error.
        let secret = self.secret.stdin_line();
        let daemon = if self.held {
            start_held(self.runner, &self.pod, &self.argv, &secret).await
        } else {
            // An older rdmabw: its input closed after the secret, stopped by signal.
            self.runner
                .spawn(&self.pod, &self.argv, Some(secret))
                .await
                .map(|s| Daemon {
                    pid: s.pid,
                    stdin: None,
                    done: s.done,
                })
        }
        .map_err(|e| {
            format!(
                "cannot start the rdmabw server daemon in pod {}: {e:#}",
                self.pod
            )
        })?;
        *st = Some(daemon);
        Ok(())
    }

    /// If the daemon has ended, how (and forget it, so that `ensure` starts a new one). Called
    /// after a rail failed: a client in a batch reports a dead peer within milliseconds, before
    /// the daemon's own end may have been seen, so this waits up to `grace` for it.
    async fn ended(&self, grace: Duration) -> Option<String> {
        let t0 = Instant::now();
        loop {
            {
                let mut st = self.state.lock().await;
                match st.as_ref() {
                    Some(d) if d.done.is_finished() => {
                        let d = st.take()?;
                        return Some(describe_end(d.done.await));
                    }
                    Some(_) => {}
                    None => return None,
                }
            }
            if t0.elapsed() >= grace {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// End the daemon: close its input (`--exit-on-stdin-eof`: it stops as on SIGTERM, with no
    /// second exec); if it has not ended within 3 s, SIGTERM through the runner, then SIGKILL.
    async fn stop(&self) {
        let Some(mut d) = self.state.lock().await.take() else {
            return;
        };
        if let Some(mut w) = d.stdin.take() {
            // Shutting the writer down closes the pipe (on Kubernetes, the exec's stdin stream).
            let _ = w.shutdown().await;
            drop(w);
            if d.done.is_finished()
                || tokio::time::timeout(DAEMON_STDIN_EOF_WAIT, &mut d.done)
                    .await
                    .is_ok()
            {
                return;
            }
            eprintln!(
                "railsweep: warning: the server daemon (pid {}) in pod {} did not stop within {} s of the end of its input; stopping it by signal",
                d.pid,
                self.pod,
                DAEMON_STDIN_EOF_WAIT.as_secs()
            );
        }
        let _ = stop_process(self.runner, &self.pod, d.pid, &mut d.done, "server daemon").await;
    }
}

/// Stop a spawned process: TERM, wait 3 s, KILL, wait 2 s; its output if it ended. Only while
/// it is known to run (its exec session has not reported an end), so a recycled PID is never
/// signalled.
async fn stop_process<R: Runner, T>(
    runner: &R,
    pod: &str,
    pid: u32,
    done: &mut JoinHandle<Result<T>>,
    what: &str,
) -> Option<T> {
    for (signal, wait) in [(Signal::Term, 3.0), (Signal::Kill, 2.0)] {
        if done.is_finished() {
            break;
        }
        if let Err(e) = runner.kill(pod, pid, signal).await {
            if !done.is_finished() {
                eprintln!(
                    "railsweep: warning: stopping the {what} (pid {pid}) in pod {pod}: {e:#}"
                );
            }
        }
        if let Ok(r) = tokio::time::timeout(Duration::from_secs_f64(wait), &mut *done).await {
            return r.ok().and_then(Result::ok);
        }
    }
    if done.is_finished() {
        return done.await.ok().and_then(Result::ok);
    }
    eprintln!("railsweep: warning: the {what} (pid {pid}) in pod {pod} did not end after SIGKILL");
    done.abort();
    None
}

/// How long a failed rail waits to see whether the server daemon has ended too (to say so in
/// the rail's error and start a new one for the next rail).
const DAEMON_END_GRACE: Duration = Duration::from_millis(500);

/// Adds the time since its start to a total when dropped (however the attempt ends).
struct CountTime<'a>(&'a std::sync::Mutex<f64>, Instant);

impl Drop for CountTime<'_> {
    fn drop(&mut self) {
        if let Ok(mut t) = self.0.lock() {
            *t += self.1.elapsed().as_secs_f64();
        }
    }
}

enum Attempt {
    Measured(Box<BwReport>),
    Failed(String, Option<Box<BwReport>>),
    Interrupted,
}

enum RailEnd {
    Row(Box<RailResult>),
    Interrupted(u32),
}

/// What every row of a sweep shares.
#[derive(Debug, Clone)]
struct RowContext {
    run_id: String,
    mode: NetworkMode,
    cluster: String,
    client_pod: Option<String>,
    client_node: String,
    server_pod: Option<String>,
    server_node: String,
}

struct Sweep<'a, R: Runner> {
    runner: &'a R,
    cfg: &'a SweepConfig,
    prep: &'a Prepared,
    ctx: RowContext,
    server: Server<'a, R>,
    cancel: CancellationToken,
    progress: Progress,
    clients_s: std::sync::Mutex<f64>,
    /// The client pod's `rdmabw batch`, for rails measured one at a time.
    batch: Mutex<Batch>,
    /// The secret the daemon and every client of this sweep share.
    secret: rdmabw::RunSecret,
}

/// Where the sequential sweep's client runs.
#[derive(Debug)]
enum Batch {
    /// No batch running: the next rail starts one.
    Idle,
    /// This one takes the next rail.
    Running(BatchClient),
    /// The pod's rdmabw has no `batch`: one client process per rail.
    Unsupported,
}

fn pod_field(name: &str) -> Option<String> {
    (name != crate::runner::local::HOST).then(|| name.to_string())
}

impl<'a, R: Runner> Sweep<'a, R> {
    async fn attempt(&self, pair: &RailPair) -> Attempt {
        let (Some(c), Some(s)) = (&pair.client, &pair.server) else {
            return Attempt::Failed("rail missing on one side".into(), None);
        };
        let test = ClientTest {
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
            size_bytes: self.cfg.size_bytes,
            tclass: self.cfg.tclass,
            qps: self.cfg.qps,
            mtu: self.cfg.mtu,
            min_gbps: self.cfg.min_gbps,
            min_line_rate_pct: self.cfg.min_line_rate_pct,
            warmup_s: self.cfg.warmup_s,
            cooldown_s: self.cfg.cooldown_s,
            gpu: self.cfg.gpu.clone(),
            transport: self.cfg.transport.clone(),
        };
        let argv = rdmabw::client_argv(&self.prep.client_bin, &test);
        if self.cfg.show_commands {
            eprintln!("railsweep: rail {}: {}", pair.rail, argv.join(" "));
        }
        if !self.cfg.parallel {
            if let Some(a) = self.attempt_batched(&argv).await {
                return a;
            }
        }
        let deadline = self.cfg.deadline();
        let pod = &self.prep.pods.client;
        let t0 = Instant::now();
        let process_argv = rdmabw::with_secret_stdin(&argv);
        let spawned = tokio::select! {
            r = self.runner.spawn(pod, &process_argv, Some(self.secret.stdin_line())) => r,
            _ = tokio::time::sleep(deadline) => return self.start_failure(),
            _ = self.cancel.cancelled() => return Attempt::Interrupted,
        };
        let mut spawned = match spawned {
            Ok(s) => s,
            Err(e) => return Attempt::Failed(format!("{e:#}"), None),
        };
        let left = deadline.saturating_sub(t0.elapsed());
        let started = Instant::now();
        let _count = CountTime(&self.clients_s, started);
        tokio::select! {
            r = &mut spawned.done => match r {
                Ok(Ok(out)) => match rdmabw::parse_client(&out) {
                    ClientOutcome::Measured(rep) => Attempt::Measured(rep),
                    ClientOutcome::Failed(why, rep) => Attempt::Failed(why, rep),
                },
                Ok(Err(e)) => Attempt::Failed(format!("lost the client in pod {pod}: {e:#}"), None),
                Err(e) => Attempt::Failed(format!("lost the client in pod {pod}: {e}"), None),
            },
            _ = tokio::time::sleep(left) => {
                let words = stop_process(self.runner, pod, spawned.pid, &mut spawned.done, "client").await;
                self.deadline_failure(words)
            }
            _ = self.cancel.cancelled() => {
                let _ = stop_process(self.runner, pod, spawned.pid, &mut spawned.done, "client").await;
                Attempt::Interrupted
            }
        }
    }

    /// A client that could not even be started before the rail's deadline.
    fn start_failure(&self) -> Attempt {
        Attempt::Failed(
            format!(
                "could not start the client in pod {} within the rail's deadline of {:.0} s",
                self.prep.pods.client,
                self.cfg.deadline().as_secs_f64()
            ),
            None,
        )
    }

    /// The deadline message of a rail whose client railsweep stopped.
    fn deadline_failure(&self, last_words: Option<Output>) -> Attempt {
        let last = last_words
            .map(|o| o.stderr_tail(2))
            .filter(|t| !t.is_empty())
            .map(|t| format!("; its last words: {t}"))
            .unwrap_or_default();
        Attempt::Failed(
            format!(
                "no result within the rail's deadline of {:.0} s ({} s test + {} s margin); railsweep stopped the client{last}",
                self.cfg.deadline().as_secs_f64(),
                self.cfg.duration_s,
                self.cfg.margin.as_secs_f64()
            ),
            None,
        )
    }

    /// One attempt through the client pod's `rdmabw batch` (started on first use, and again
    /// after one was stopped or died). `None`: this rdmabw has no `batch`, use a process.
    async fn attempt_batched(&self, argv: &[String]) -> Option<Attempt> {
        let mut slot = self.batch.lock().await;
        let pod = &self.prep.pods.client;
        let deadline = self.cfg.deadline();
        let t0 = Instant::now();
        if matches!(*slot, Batch::Unsupported) {
            return None;
        }
        if !matches!(*slot, Batch::Running(_)) {
            let started = tokio::select! {
                r = BatchClient::start(self.runner, pod, &self.prep.client_bin, &self.secret) => r,
                _ = tokio::time::sleep(deadline) => return Some(self.start_failure()),
                _ = self.cancel.cancelled() => return Some(Attempt::Interrupted),
            };
            match started {
                Ok(b) => *slot = Batch::Running(b),
                Err(e) => return Some(Attempt::Failed(format!("{e:#}"), None)),
            }
        }
        let Batch::Running(b) = &mut *slot else {
            return None;
        };
        let left = deadline.saturating_sub(t0.elapsed());
        let _count = CountTime(&self.clients_s, Instant::now());
        let end = tokio::select! {
            end = b.run(&argv[1..]) => Some(end),
            _ = tokio::time::sleep(left) => None,
            _ = self.cancel.cancelled() => {
                let pid = b.pid();
                let _ = stop_process(self.runner, pod, pid, b.done_mut(), "client").await;
                *slot = Batch::Idle;
                return Some(Attempt::Interrupted);
            }
        };
        let out = match end {
            Some(TestEnd::Ended(out)) => out,
            Some(TestEnd::Gone(out)) => {
                *slot = Batch::Idle;
                out
            }
            None => {
                let pid = b.pid();
                let stopped = stop_process(self.runner, pod, pid, b.done_mut(), "client").await;
                let words = stopped.map(|_| b.last_words());
                *slot = Batch::Idle;
                return Some(self.deadline_failure(words));
            }
        };
        Some(match rdmabw::parse_client(&out) {
            ClientOutcome::Measured(rep) => Attempt::Measured(rep),
            ClientOutcome::Failed(why, rep) => Attempt::Failed(why, rep),
        })
    }

    /// End the batch at the end of the sweep: close its input, else stop it.
    async fn close_batch(&self) {
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

    async fn rail(&self, pair: RailPair) -> RailEnd {
        let rail = pair.rail;
        if let Some(problem) = pair.problem(&self.prep.pods.client, &self.prep.pods.server) {
            self.progress.finish(rail, "not measured");
            return RailEnd::Row(Box::new(self.failed_row(&pair, problem, None)));
        }
        let attempts = self.cfg.retries + 1;
        let mut last: (String, Option<Box<BwReport>>) = (String::new(), None);
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
            if let Err(e) = self.server.ensure().await {
                last = (e, None);
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
            match self.attempt(&pair).await {
                Attempt::Measured(rep) => {
                    let row = self.measured_row(&pair, &rep);
                    let msg = format!("{:.2} Gb/s {}", row.bw_avg_gbps.unwrap_or(0.0), row.status);
                    self.progress.finish(rail, &msg);
                    return RailEnd::Row(Box::new(row));
                }
                Attempt::Interrupted => {
                    self.progress.finish(rail, "interrupted");
                    return RailEnd::Interrupted(rail);
                }
                Attempt::Failed(mut why, rep) => {
                    if let Some(end) = self.server.ended(DAEMON_END_GRACE).await {
                        why.push_str(&format!(
                            "; the server daemon in pod {} had ended ({end})",
                            self.prep.pods.server
                        ));
                    }
                    last = (why, rep);
                }
            }
        }
        let (mut why, rep) = last;
        if attempts > 1 {
            why = format!("{why} (after {attempts} attempts)");
        }
        self.progress.finish(rail, "failed");
        RailEnd::Row(Box::new(self.failed_row(&pair, why, rep.as_deref())))
    }

    /// What a row of `pair` knows besides rdmabw's report: the run, the pods and nodes, the
    /// rails' discovery, the GPUs a DRA allocation put beside them, and the test asked for.
    fn row_facts(&self, pair: &RailPair) -> RdmabwRun {
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
                }
            };
        RdmabwRun {
            run_id: self.ctx.run_id.clone(),
            time_utc: rfc3339_utc(SystemTime::now()),
            network_mode: self.ctx.mode.clone(),
            cluster: self.ctx.cluster.clone(),
            rail: Some(pair.rail),
            client: end(
                &pair.client,
                &self.ctx.client_pod,
                &self.ctx.client_node,
                &cfg.rail_gpus.client,
            ),
            server: end(
                &pair.server,
                &self.ctx.server_pod,
                &self.ctx.server_node,
                &cfg.rail_gpus.server,
            ),
            asked: Some(AskedTest {
                size_bytes: cfg.size_bytes,
                qps: cfg.qps,
                bidirectional: cfg.transport.bidirectional,
                traffic_class: cfg.tclass,
                mtu_bytes: cfg.mtu,
                memory: if cfg.gpu.is_some() {
                    MemoryKind::Cuda
                } else {
                    MemoryKind::Host
                },
                min_gbps: cfg.min_gbps,
                min_line_rate_pct: cfg.min_line_rate_pct,
            }),
        }
    }

    /// The row of a measured rail: the report's (railsweep measures one size), with this
    /// sweep's facts.
    fn measured_row(&self, pair: &RailPair, rep: &BwReport) -> RailResult {
        let facts = self.row_facts(pair);
        let mut rows = rep.rail_results(&facts);
        rows.pop()
            .unwrap_or_else(|| facts.failed_row(Some(rep), "rdmabw reported no result rows"))
    }

    fn failed_row(&self, pair: &RailPair, error: String, rep: Option<&BwReport>) -> RailResult {
        self.row_facts(pair).failed_row(rep, &error)
    }
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
    let older = |pod: &str, lacks: &str, so: &str| {
        eprintln!("railsweep: note: the rdmabw in pod {pod} has no {lacks} (an older build); {so}");
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
    (daemon, batch)
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
    // Start the daemon before the first rail; if it cannot start, every rail says why.
    if !pairs.is_empty() {
        if let Err(e) = sweep.server.ensure().await {
            progress.println(&format!("railsweep: {e}"));
        }
    }
    let sink = run.sink;
    let mut record = |end: RailEnd, outcome: &mut RailsOutcome| -> Result<()> {
        match end {
            RailEnd::Row(row) => {
                if !progress.visible() {
                    eprintln!("railsweep: {}", one_line(&row));
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
    sweep.close_batch().await;
    sweep.server.stop().await;
    outcome.rails_wall_s = t0.elapsed().as_secs_f64();
    outcome.clients_s = sweep.clients_s.lock().map(|t| *t).unwrap_or(0.0);
    result?;
    Ok(outcome)
}

/// `rail 2 (net3 rxe_a2 -> net3 rxe_b2): 0.12 Gb/s ok`, or the error.
pub fn one_line(r: &RailResult) -> String {
    let what = match (r.status, r.bw_avg_gbps, &r.error) {
        (RailStatus::Failed, _, Some(e)) => format!("failed: {e}"),
        (s, Some(bw), _) => format!("{bw:.2} Gb/s {s}"),
        (s, None, _) => s.to_string(),
    };
    format!(
        "rail {} ({} {} -> {} {}): {what}",
        r.rail, r.client_interface, r.client_rdma_device, r.server_interface, r.server_rdma_device
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_the_last_bytes_from_a_line_start() {
        let mut b = Vec::new();
        keep_tail(&mut b, b"one\ntwo\n", 16);
        assert_eq!(b, b"one\ntwo\n");
        keep_tail(&mut b, b"three\nfour\n", 16);
        assert_eq!(b, b"two\nthree\nfour\n");
        // One line longer than the cap: its last bytes.
        let mut b = Vec::new();
        keep_tail(&mut b, &[b'x'; 100], 16);
        assert_eq!(b.len(), 16);
    }

    #[tokio::test]
    async fn a_daemons_stderr_is_kept_to_a_bounded_tail() {
        // 20 MB of forged lines (issue 31: 20 refused hellos with a 1 MB name), then the line
        // that says why the daemon ended.
        let mut text = Vec::new();
        for _ in 0..20 {
            text.extend_from_slice(&vec![b'a'; 1 << 20]);
            text.push(b'\n');
        }
        text.extend_from_slice(b"rdmabw server: stopped\n");
        let buf = Arc::new(StdMutex::new(Vec::new()));
        let r: Pin<Box<dyn AsyncRead + Send>> = Box::pin(std::io::Cursor::new(text));
        read_into(r, Arc::clone(&buf), Some(DAEMON_STDERR_TAIL)).await;
        let kept = buf.lock().unwrap().clone();
        assert!(kept.len() <= DAEMON_STDERR_TAIL, "{}", kept.len());
        assert!(kept.ends_with(b"rdmabw server: stopped\n"));
    }
}
