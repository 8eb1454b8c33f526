//! One test from start to end on either side: the control channel and the engine tied together,
//! so that `rdmabw` stays a thin command line and `railsweep` can run the same drivers.
//!
//! - [`run_client`]: resolve the local rail, prepare the QPs (local mistakes surface before any
//!   connection), connect, `Hello` -> `Accept`, exchange endpoints, connect the QPs, `Ready`,
//!   run the writes under a [`PeerWatch`], exchange `Done`.
//! - [`Listener`] + [`serve_one`]: the server's side of one test, from an accepted connection.
//!   [`Daemon`] serves test after test on one port, several at once on different devices, and
//!   answers `Busy` for a device in use.
//!
//! Every wait has a deadline (the channel's phase timeouts, the watch's silence limit), and the
//! caller's `stop` flag (SIGINT/SIGTERM) ends a test within the engine's stop-check interval,
//! telling the peer why. Errors are typed ([`SessionError`]) so that a command line can map them
//! to exit codes: [`SessionError::is_setup`] is true for mistakes in what was asked (wrong device,
//! GID, parameters that differ from the server's, a peer that is not rdmabw).

// A session's result is returned once per test: the size of its error does not matter, and
// keeping the engine's and the channel's errors unboxed keeps them matchable.
#![allow(clippy::result_large_err)]

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use results::rdmabw::params::{LocalTuning, SizeResult, TestParams};
use results::rdmabw::report::{EndpointReport, Role};

use crate::control::{
    format_gid, Accept, ControlChannel, ControlError, DeviceClaim, DeviceClaims, Endpoints, Hello,
    Msg, PeerWatch, Phase, PhaseTimeouts, RejectReason, WatchConfig, PROTOCOL_VERSION,
    RDMABW_VERSION,
};
use crate::engine::{Connected, Prepared, SideInfo, StopFlags};
use crate::error::Error;
use crate::gid::{resolve_rail, Gid, Rail, RailRequest};
use crate::gpu::MemoryUse;
use crate::sysfs::{self, Inventory, SysRoots};
use crate::verbs::{Device, PathMtu, PathParams};

/// How long a failed RDMA run waits for the control channel to explain it (a dead peer's TCP
/// reset usually arrives within a millisecond of its QPs vanishing).
const EXPLAIN_WAIT: Duration = Duration::from_millis(400);
/// Poll interval of the listeners (a new test waits for it) and of the daemon's shutdown.
const POLL: Duration = Duration::from_millis(10);
/// How often a passive server looks at its stop flags (SIGINT, the rail guard) while it waits
/// for the client's `Done` (the peer's `Done` or failure wakes it at once).
const PASSIVE_POLL: Duration = Duration::from_millis(500);
/// How long a server reuses one discovery for the next hellos (a daemon receiving one hello per
/// rail at once discovers once; sysfs discovery reads every GID table).
const INVENTORY_TTL: Duration = Duration::from_secs(5);

/// The inventory `req` needs: with a device named and no netdev, only that device is read
/// (what ib_write_bw -d reads); otherwise every device, since a netdev or the default choice
/// may be on any of them.
pub fn inventory_for(roots: &SysRoots, req: &RailRequest) -> Result<Inventory, Error> {
    match (&req.device, &req.netdev) {
        (Some(dev), None) => Ok(Inventory {
            devices: vec![sysfs::read_device(roots, dev)?],
            netdevs: Vec::new(),
        }),
        _ => sysfs::discover(roots),
    }
}

/// Resolves `req` into a rail, with the inventory it was resolved from. With a device and a GID
/// index named (what railsweep and most scripts pass), only that GID entry is read; the whole
/// table is read only when that entry is refused, so that the error can list the usable ones.
pub fn resolve_request(roots: &SysRoots, req: &RailRequest) -> Result<(Rail, Inventory), Error> {
    if let (Some(dev), None, Some(index)) = (&req.device, &req.netdev, req.gid_index) {
        let inv = Inventory {
            devices: vec![sysfs::read_device_scoped(
                roots,
                dev,
                sysfs::GidScope::One(index),
            )?],
            netdevs: Vec::new(),
        };
        if let Ok(rail) = resolve_rail(&inv, roots, req) {
            return Ok((with_netdev_mtu(roots, rail), inv));
        }
    }
    let inv = inventory_for(roots, req)?;
    let rail = resolve_rail(&inv, roots, req)?;
    Ok((with_netdev_mtu(roots, rail), inv))
}

/// A device-only inventory knows no netdev bindings: read the rail's interface MTU directly.
fn with_netdev_mtu(roots: &SysRoots, mut rail: Rail) -> Rail {
    if rail.netdev_mtu.is_none() {
        rail.netdev_mtu = rail
            .netdev
            .as_deref()
            .and_then(|n| sysfs::interface_mtu(roots, n));
    }
    rail
}

/// A discovery and when it was made.
type CachedInventory = Arc<Mutex<Option<(Instant, Arc<Inventory>)>>>;

/// What the tests of one server share: which devices are busy, and a short-lived inventory.
#[derive(Debug, Clone, Default)]
pub struct ServerShared {
    /// Devices running a test.
    pub claims: DeviceClaims,
    inventory: CachedInventory,
}

impl ServerShared {
    /// Fresh claims, no inventory yet.
    pub fn new() -> ServerShared {
        ServerShared::default()
    }

    /// Sharing `claims` (tests pre-claim devices through it).
    pub fn with_claims(claims: DeviceClaims) -> ServerShared {
        ServerShared {
            claims,
            ..ServerShared::default()
        }
    }

    /// Hands over a discovery just made (the server's start-up check), to be reused while fresh.
    pub fn seed(&self, inv: Inventory) {
        *self.inventory.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), Arc::new(inv)));
    }

    /// [`resolve_request`], with full discoveries shared while fresh.
    pub fn resolve(&self, roots: &SysRoots, req: &RailRequest) -> Result<Rail, Error> {
        match (&req.device, &req.netdev) {
            (Some(_), None) => resolve_request(roots, req).map(|(rail, _)| rail),
            _ => resolve_rail(&*self.inventory(roots)?, roots, req),
        }
    }

    /// The inventory: the last one while younger than a few seconds, else a new discovery.
    /// Concurrent callers wait for the discovery in flight instead of repeating it.
    pub fn inventory(&self, roots: &SysRoots) -> Result<Arc<Inventory>, Error> {
        let mut slot = self.inventory.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, inv)) = slot.as_ref() {
            if at.elapsed() < INVENTORY_TTL {
                return Ok(Arc::clone(inv));
            }
        }
        let inv = Arc::new(sysfs::discover(roots)?);
        *slot = Some((Instant::now(), Arc::clone(&inv)));
        Ok(inv)
    }
}

/// A progress logger: one line per call, for stderr.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// A logger that drops everything.
pub fn quiet() -> Log {
    Arc::new(|_| {})
}

/// Which of a server's parameters were given on its command line: only those must match the
/// client's; the rest follow the client (as a `--daemon` server follows it in everything).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pinned {
    /// `-s`/`-a`.
    pub sizes: bool,
    /// `-n`/`-D` (and the margins).
    pub length: bool,
    /// `-q`.
    pub qps: bool,
    /// `-b`.
    pub bidirectional: bool,
    /// `--tclass`.
    pub traffic_class: bool,
    /// `--sl`.
    pub service_level: bool,
    /// `--hop-limit`.
    pub hop_limit: bool,
    /// `-m`.
    pub mtu: bool,
}

/// What the client runs.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The server's control address (host or IP).
    pub server: String,
    /// The server's control port.
    pub port: u16,
    /// This side's rail (`-d`, `--netdev`, `-i`, `-x`).
    pub rail: RailRequest,
    /// The rail asked of the server (`--server-dev`, `--server-netdev`, `--server-gid-index`);
    /// its `port` is not sent.
    pub server_rail: RailRequest,
    /// The test.
    pub params: TestParams,
    /// This side's tuning (also sent to the server, which uses what it was not given itself).
    pub tuning: LocalTuning,
    /// Phase timeouts; the measure timeout is derived from `params`.
    pub timeouts: PhaseTimeouts,
    /// Heartbeats and silence limit during the window.
    pub watch: WatchConfig,
    /// This host's name, for the server's log.
    pub host: String,
    /// Where sysfs is.
    pub roots: SysRoots,
}

/// What a server runs when a client asks.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The server's own rail flags; with any of device/netdev given, the only device served.
    pub rail: RailRequest,
    /// The server's parameters (command-line values or defaults).
    pub params: TestParams,
    /// Which of `params` (and of the tuning's path attributes) were given explicitly.
    pub pinned: Pinned,
    /// The server's tuning.
    pub tuning: LocalTuning,
    /// Phase timeouts (the measure timeout is derived per test).
    pub timeouts: PhaseTimeouts,
    /// Heartbeats and silence limit during the window.
    pub watch: WatchConfig,
    /// This host's name.
    pub host: String,
    /// Where sysfs is.
    pub roots: SysRoots,
    /// `--daemon`: follow the client in every parameter (nothing is pinned).
    pub daemon: bool,
}

/// The other end of a test as this side learned it.
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    /// Its host name (the client's `Hello`) or the address this side dialled.
    pub host: String,
    /// Its control address.
    pub addr: SocketAddr,
    /// RDMA device.
    pub device: String,
    /// Port number.
    pub port: u8,
    /// GID index, when the peer said (the server does in `Accept`).
    pub gid_index: Option<u32>,
    /// The GID of its first QP.
    pub gid: [u8; 16],
    /// The interface it was asked for, when known.
    pub netdev: Option<String>,
    /// Active MTU of its port.
    pub active_mtu_bytes: u32,
    /// Line rate of its port, when it said.
    pub line_rate_gbps: Option<f64>,
    /// Its rdmabw release, when it said.
    pub rdmabw_version: Option<String>,
}

impl Remote {
    /// The report form.
    pub fn report(&self) -> EndpointReport {
        let gid = Gid(self.gid);
        EndpointReport {
            host: self.host.clone(),
            device: self.device.clone(),
            port: self.port,
            gid_index: self.gid_index.unwrap_or(u32::MAX),
            gid: format_gid(&self.gid),
            netdev: self.netdev.clone(),
            ipv4: gid.ipv4_mapped().map(|a| a.to_string()),
            active_mtu_bytes: self.active_mtu_bytes,
            line_rate_gbps: self.line_rate_gbps,
        }
    }
}

/// The report form of this side's rail.
pub fn local_report(host: &str, rail: &Rail, active_mtu_bytes: u32) -> EndpointReport {
    EndpointReport {
        host: host.to_string(),
        device: rail.device.clone(),
        port: rail.port,
        gid_index: rail.gid_index,
        gid: rail.gid.to_string(),
        netdev: rail.netdev.clone(),
        ipv4: rail.gid.ipv4_mapped().map(|a| a.to_string()),
        active_mtu_bytes,
        line_rate_gbps: rail.line_rate_gbps,
    }
}

/// A finished test.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Which side this is.
    pub role: Role,
    /// This side's rail.
    pub rail: Rail,
    /// This side's active MTU.
    pub active_mtu_bytes: u32,
    /// The other side.
    pub remote: Remote,
    /// The agreed parameters (the client's).
    pub params: TestParams,
    /// This side's tuning as used.
    pub tuning: LocalTuning,
    /// The path MTU of the QPs.
    pub path_mtu_bytes: u32,
    /// What the client measured writing (client -> server).
    pub client_results: Vec<SizeResult>,
    /// What the server measured writing (server -> client; empty unless bidirectional).
    pub server_results: Vec<SizeResult>,
    /// The memory this side's buffer was in (host, or which GPU and path).
    pub memory: MemoryUse,
}

impl Outcome {
    /// The smaller known line rate of both ends.
    pub fn line_rate_gbps(&self) -> Option<f64> {
        match (self.rail.line_rate_gbps, self.remote.line_rate_gbps) {
            (Some(a), Some(b)) if b > 0.0 => Some(a.min(b)),
            (Some(a), _) => Some(a),
            (None, b) => b.filter(|b| *b > 0.0),
        }
    }

    /// The rows perftest would print: the client's direction, plus the server's added size by
    /// size when bidirectional (ib_write_bw -b reports the sum of both directions).
    pub fn combined(&self) -> Vec<SizeResult> {
        combine(&self.client_results, &self.server_results)
    }
}

/// Both directions of a bidirectional test, size by size, summed (peaks and percentiles too,
/// which is an upper bound: the two directions' best intervals need not coincide).
pub fn combine(a: &[SizeResult], b: &[SizeResult]) -> Vec<SizeResult> {
    a.iter()
        .map(
            |x| match b.iter().find(|y| y.msg_size_bytes == x.msg_size_bytes) {
                None => x.clone(),
                Some(y) => SizeResult {
                    msg_size_bytes: x.msg_size_bytes,
                    iterations: x.iterations + y.iterations,
                    bw_peak_gbps: x.bw_peak_gbps + y.bw_peak_gbps,
                    bw_avg_gbps: x.bw_avg_gbps + y.bw_avg_gbps,
                    msg_rate_mpps: x.msg_rate_mpps + y.msg_rate_mpps,
                    bw_p1_gbps: x.bw_p1_gbps + y.bw_p1_gbps,
                    bw_p50_gbps: x.bw_p50_gbps + y.bw_p50_gbps,
                    bw_p99_gbps: x.bw_p99_gbps + y.bw_p99_gbps,
                    interval_ms: x.interval_ms,
                    measured_s: x.measured_s.max(y.measured_s),
                    cpu_s: x.cpu_s + y.cpu_s,
                },
            },
        )
        .collect()
}

/// Why a test did not complete.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// This side cannot run the test as asked: device, port, GID, parameters, memory, verbs.
    #[error("{0}")]
    Local(#[from] Error),
    /// The control channel failed before the measured window, or the server refused.
    #[error("{0}")]
    Control(#[from] ControlError),
    /// The peer turned out not to speak rdmabw (perftest's ib_write_bw, most likely).
    #[error("{0}")]
    NotRdmabw(ControlError),
    /// The server could not set up its side.
    #[error("the server could not run the test: {0}")]
    ServerSetup(String),
    /// The peer failed during the test: it died, went silent, or reported an error.
    #[error("{}{}", peer_failure_text(.cause), match .local { Some(e) => format!(" (this side saw: {e})"), None => String::new() })]
    PeerFailed {
        /// What the control channel saw.
        cause: ControlError,
        /// What the RDMA side saw, if it failed too.
        local: Option<Error>,
    },
    /// The RDMA run failed on this side while the peer was alive.
    #[error("{error}{}", .port_note.as_deref().map(|n| format!("; {n}")).unwrap_or_default())]
    Run {
        /// The engine's error.
        error: Error,
        /// The port's state now, when it is not ACTIVE (the rail went down).
        port_note: Option<String>,
    },
    /// This side's port went down during the window.
    #[error("{note}")]
    RailDown {
        /// Which port, and its state.
        note: String,
    },
    /// SIGINT/SIGTERM (the caller's stop flag) ended the test.
    #[error("interrupted: the test was stopped on this side{}", if *.told_peer { " (the peer was told)" } else { "" })]
    Interrupted {
        /// Whether the peer was still there to be told.
        told_peer: bool,
    },
}

fn peer_failure_text(e: &ControlError) -> String {
    match e {
        ControlError::PeerClosed { peer, phase } => format!(
            "the peer at {peer} closed the control connection during the {phase} phase: \
             its rdmabw process died, was killed, or its host went away"
        ),
        ControlError::PeerSilent {
            peer, silent_for, ..
        } => format!(
            "the peer at {peer} went silent for {silent_for:.1?}: its process is frozen or the \
             control network to it is down"
        ),
        ControlError::PeerError { peer, message, .. } => {
            format!("the peer at {peer} stopped the test: {message}")
        }
        other => other.to_string(),
    }
}

impl SessionError {
    /// True for mistakes in what was asked (exit 2): a bad device, port or GID, parameters the
    /// engine refuses or that differ from the server's, a peer that is not rdmabw, a server
    /// that cannot set up what was asked. False for failures of a test that could have run
    /// (exit 1): an unreachable or busy server, a peer or rail that died, an RDMA error.
    pub fn is_setup(&self) -> bool {
        match self {
            SessionError::Local(e) => !matches!(
                e,
                Error::WorkCompletion { .. }
                    | Error::Stalled { .. }
                    | Error::Stopped { .. }
                    | Error::PostSend { .. }
                    | Error::PollCq { .. }
            ),
            SessionError::Control(c) => matches!(
                c,
                ControlError::Rejected { .. }
                    | ControlError::NotRdmabw { .. }
                    | ControlError::VersionMismatch { .. }
            ),
            SessionError::NotRdmabw(_) | SessionError::ServerSetup(_) => true,
            SessionError::PeerFailed { .. }
            | SessionError::RailDown { .. }
            | SessionError::Run { .. }
            | SessionError::Interrupted { .. } => false,
        }
    }
}

fn control(e: ControlError) -> SessionError {
    match e {
        e @ ControlError::NotRdmabw { .. } => SessionError::NotRdmabw(e),
        // A server that could not open what was asked says so in a Reject.
        ControlError::Rejected {
            reason: RejectReason::Other { message },
            ..
        } if message.starts_with(SERVER_SETUP) => {
            SessionError::ServerSetup(message[SERVER_SETUP.len()..].to_string())
        }
        e => SessionError::Control(e),
    }
}

/// The prefix of a `Reject` for a server-side set-up failure.
const SERVER_SETUP: &str = "server set-up: ";

/// The RDMA part of one side once the rail is known.
struct Side {
    rail: Rail,
    prepared: Prepared,
    info: SideInfo,
}

fn prepare(
    roots: &SysRoots,
    rail: Rail,
    params: &TestParams,
    tuning: &LocalTuning,
) -> Result<Side, Error> {
    let device = Device::open_with(roots, &rail.device)?;
    let prepared = Prepared::for_rail(&device, &rail, params, tuning)?;
    let info = prepared.info()?;
    Ok(Side {
        rail,
        prepared,
        info,
    })
}

/// What this side tells the peer in the exchange: its QPs and memory, its GID index and
/// interface.
fn endpoints_of(side: &Side) -> Endpoints {
    Endpoints {
        gid_index: Some(side.rail.gid_index),
        netdev: side.rail.netdev.clone(),
        ..Endpoints::from(&side.info)
    }
}

fn connect_qps(
    roots: &SysRoots,
    side: Side,
    theirs: &Endpoints,
    tuning: &LocalTuning,
) -> Result<(Connected, Rail, PathMtu, u32), Error> {
    if let Some(peer) = theirs
        .qps
        .first()
        .and_then(|q| Gid::from(q.gid).ipv4_mapped())
    {
        crate::neigh::resolve(roots, peer, crate::neigh::WAIT);
    }
    let remote_mtu = PathMtu::from_bytes(theirs.mtu_bytes).ok_or_else(|| {
        Error::PeerMismatch(format!(
            "the peer's active MTU {} is not an InfiniBand MTU",
            theirs.mtu_bytes
        ))
    })?;
    let local_mtu = side.prepared.active_mtu();
    let mtu = PathMtu::negotiate(local_mtu, remote_mtu, tuning.mtu_bytes)?;
    let path = PathParams::new(side.rail.port, side.rail.gid_index, tuning, mtu)?;
    let remote = SideInfo::from(theirs);
    let conn = side.prepared.connect(&remote, &path)?;
    Ok((conn, side.rail, mtu, local_mtu.bytes()))
}

/// A note on the port's state when it is no longer ACTIVE (after a failed run).
fn port_note(roots: &SysRoots, rail: &Rail) -> Option<String> {
    let dev = sysfs::read_device_scoped(roots, &rail.device, sysfs::GidScope::Skip).ok()?;
    let port = dev.port(rail.port)?;
    let state = port.state.as_ref()?;
    if port.is_active() {
        return None;
    }
    Some(format!(
        "port {} of {} is now {} ({}): the rail{} went down",
        rail.port,
        rail.device,
        state.name(),
        port.phys_state
            .as_deref()
            .unwrap_or("physical state unknown"),
        rail.netdev
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    ))
}

/// What [`window`] runs.
struct WindowSpec<'a> {
    roots: &'a SysRoots,
    rail: &'a Rail,
    watch: WatchConfig,
    params: &'a TestParams,
    tuning: &'a LocalTuning,
    /// Whether this side writes (the client; both sides when bidirectional).
    writer: bool,
    measure_timeout: Duration,
}

/// The measured window under a watch: runs the writes (or, as the passive side, waits for the
/// client's `Done`), then returns the channel, or the reason the window failed.
fn window(
    spec: &WindowSpec<'_>,
    conn: &mut Connected,
    ch: ControlChannel,
    stop: &Arc<AtomicBool>,
) -> Result<(ControlChannel, Vec<SizeResult>), SessionError> {
    let WindowSpec {
        roots,
        rail,
        watch: watch_cfg,
        params,
        tuning,
        writer,
        measure_timeout,
    } = *spec;
    // A fresh flag, raised by the watch (peer failed) and by the guard (this side's rail went
    // down); the engine and the passive wait also look at the caller's `stop` (SIGINT).
    let engine_stop = Arc::new(AtomicBool::new(stop.load(Ordering::Relaxed)));
    let watch = PeerWatch::start_with_stop(ch, watch_cfg, Arc::clone(&engine_stop))?;
    let guard = Guard::start(Arc::clone(&engine_stop), roots, rail);
    let run = if writer {
        conn.run_writes(params, tuning, StopFlags::either(stop, &engine_stop))
            .map_err(Some)
    } else {
        let deadline = Instant::now() + measure_timeout;
        loop {
            match watch.wait_peer_done(PASSIVE_POLL) {
                Ok(()) => break Ok(Vec::new()),
                Err(ControlError::Timeout { .. }) if Instant::now() < deadline => {
                    if engine_stop.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed) {
                        break Err(None);
                    }
                }
                Err(_) => break Err(None),
            }
        }
    };
    let rail_down = guard.stop();
    match run {
        Ok(results) => match watch.finish() {
            Ok(ch) => Ok((ch, results)),
            Err(cause) => Err(SessionError::PeerFailed { cause, local: None }),
        },
        Err(local) => {
            // Prefer the control channel's explanation: a dead peer shows there first.
            let deadline = Instant::now() + EXPLAIN_WAIT;
            loop {
                if let Err(cause) = watch.check() {
                    drop(watch);
                    let local = local.filter(|e| !matches!(e, Error::Stopped { .. }));
                    return Err(SessionError::PeerFailed { cause, local });
                }
                if local.is_none()
                    || rail_down.is_some()
                    || stop.load(Ordering::Relaxed)
                    || Instant::now() >= deadline
                {
                    break;
                }
                thread::sleep(Duration::from_millis(10));
            }
            if let Some(note) = rail_down {
                watch.abort(&format!("its rail went down: {note}"));
                return Err(SessionError::RailDown { note });
            }
            if stop.load(Ordering::Relaxed) {
                watch.abort("the test was interrupted on the other side (SIGINT/SIGTERM)");
                return Err(SessionError::Interrupted { told_peer: true });
            }
            match local {
                Some(error) => {
                    let note = port_note(roots, rail);
                    let text = match &note {
                        Some(n) => format!("{error}; {n}"),
                        None => error.to_string(),
                    };
                    watch.abort(&format!("the peer's RDMA run failed: {text}"));
                    Err(SessionError::Run {
                        error,
                        port_note: note,
                    })
                }
                None => {
                    let cause = ControlError::Timeout {
                        peer: watch_peer(&watch),
                        phase: Phase::Measure,
                        after: measure_timeout,
                    };
                    watch.abort("the server gave up waiting for the client's results");
                    Err(SessionError::PeerFailed { cause, local: None })
                }
            }
        }
    }
}

fn watch_peer(w: &PeerWatch) -> SocketAddr {
    match w.status() {
        crate::control::PeerStatus::Failed { error, .. } => error
            .peer()
            .unwrap_or_else(|| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))),
        _ => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
    }
}

/// How often the guard reads the rail's port state during the window (on rxe the read takes
/// the RTNL lock to ask the netdev its speed: not something to do in a tight loop). The guard
/// wakes for nothing else: every wake-up of a helper thread costs the data path, most of all on
/// Soft-RoCE, where the kernel moves the data on the same CPUs (the guard, the heartbeats and
/// the signal thread waking 4-5 times a second each cost rdmabw 2-3% of its bandwidth in the
/// lab). The end of the window wakes it at once.
const RAIL_CHECK: Duration = Duration::from_secs(1);

/// During the window: watches this side's port: a rail that goes down stops the run at once
/// (rxe, for one, retries forever and would only show a stall much later). The caller's stop
/// flag needs no thread: the engine looks at it directly ([`StopFlags::either`]).
struct Guard {
    quit: Arc<AtomicBool>,
    rail_down: Arc<Mutex<Option<String>>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Guard {
    fn start(to: Arc<AtomicBool>, roots: &SysRoots, rail: &Rail) -> Guard {
        let quit = Arc::new(AtomicBool::new(false));
        let rail_down = Arc::new(Mutex::new(None));
        let port_dir = roots
            .sys
            .join("class/infiniband")
            .join(&rail.device)
            .join("ports")
            .join(rail.port.to_string());
        let what = format!(
            "port {} of {}{}",
            rail.port,
            rail.device,
            rail.netdev
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        );
        let (q, down) = (Arc::clone(&quit), Arc::clone(&rail_down));
        let thread = thread::Builder::new()
            .name("rdmabw-guard".into())
            .spawn(move || loop {
                let next = Instant::now() + RAIL_CHECK;
                loop {
                    if q.load(Ordering::Acquire) {
                        return;
                    }
                    let left = next.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    thread::park_timeout(left);
                }
                if let Some(state) = sysfs::read_attr(&port_dir.join("state")) {
                    if sysfs::PortState::parse(&state) != sysfs::PortState::Active {
                        let phys = sysfs::read_attr(&port_dir.join("phys_state"))
                            .unwrap_or_else(|| "unknown".into());
                        *down.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                            "{what} went {} (physical state {phys}) during the test: the rail is \
                             down",
                            sysfs::PortState::parse(&state).name()
                        ));
                        to.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            })
            .ok();
        Guard {
            quit,
            rail_down,
            thread,
        }
    }

    /// Stops the thread; what it saw of the rail.
    fn stop(mut self) -> Option<String> {
        self.quit.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        self.rail_down
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Guard")
    }
}

/// Runs one test as the client. `stop` (SIGINT/SIGTERM) ends it early with
/// [`SessionError::Interrupted`].
pub fn run_client(
    cfg: &ClientConfig,
    stop: &Arc<AtomicBool>,
    log: &Log,
) -> Result<Outcome, SessionError> {
    let (rail, _) = resolve_request(&cfg.roots, &cfg.rail)?;
    log(&format!(
        "local rail: {} port {} GID index {} ({}){}",
        rail.device,
        rail.port,
        rail.gid_index,
        rail.gid,
        match (&rail.netdev, &rail.ip) {
            (Some(n), Some(ip)) => format!(" on {n} {ip}"),
            _ => String::new(),
        }
    ));
    let side = prepare(&cfg.roots, rail, &cfg.params, &cfg.tuning)?;

    let mut timeouts = cfg.timeouts.with_measure_for(&cfg.params);
    if cfg.params.bidirectional {
        timeouts.results = timeouts.results.max(timeouts.measure);
    }
    let addr = format!("{}:{}", cfg.server, cfg.port);
    let mut ch = ControlChannel::connect(addr.as_str(), timeouts).map_err(control)?;
    let peer = ch.peer_addr();
    log(&format!("connected to {peer}"));
    let hello = Hello::new(
        cfg.params.clone(),
        cfg.server_rail.device.clone(),
        &cfg.host,
    )
    .with_server_rail(cfg.server_rail.netdev.clone(), cfg.server_rail.gid_index)
    .with_tuning(cfg.tuning.clone());
    let accept: Accept = ch.client_handshake(&hello).map_err(control)?;
    log(&format!(
        "server accepted: {} port {} GID index {}, rdmabw {}",
        accept.device, accept.port, accept.gid_index, accept.rdmabw_version
    ));
    let ours = endpoints_of(&side);
    let theirs = ch.exchange_endpoints(&ours).map_err(control)?;
    let memory = side.prepared.memory().clone();
    let (mut conn, rail, mtu, local_mtu) = match connect_qps(&cfg.roots, side, &theirs, &cfg.tuning)
    {
        Ok(c) => c,
        Err(e) => {
            ch.fail(&format!("the client could not connect its QPs: {e}"));
            return Err(e.into());
        }
    };
    ch.sync_ready().map_err(control)?;
    log(&format!(
        "QPs connected, path MTU {}; measuring{}",
        mtu.bytes(),
        if conn.polls_at_idle_priority(&cfg.tuning) {
            " (polling at idle CPU priority: on Soft-RoCE the kernel moves the data on these CPUs)"
        } else {
            ""
        }
    ));
    let spec = WindowSpec {
        roots: &cfg.roots,
        rail: &rail,
        watch: cfg.watch,
        params: &cfg.params,
        tuning: &cfg.tuning,
        writer: true,
        measure_timeout: timeouts.measure,
    };
    let (mut ch, client_results) = window(&spec, &mut conn, ch, stop)?;
    ch.send(&Msg::Done {
        results: client_results.clone(),
    })
    .map_err(|cause| SessionError::PeerFailed { cause, local: None })?;
    let server_results = ch
        .expect_done(Phase::Results)
        .map_err(|cause| SessionError::PeerFailed { cause, local: None })?;
    ch.close();
    drop(conn);
    Ok(Outcome {
        role: Role::Client,
        rail,
        active_mtu_bytes: local_mtu,
        remote: Remote {
            host: cfg.server.clone(),
            addr: peer,
            device: accept.device,
            port: accept.port,
            gid_index: Some(u32::from(accept.gid_index)),
            gid: theirs.qps.first().map(|q| q.gid).unwrap_or_default(),
            netdev: cfg.server_rail.netdev.clone(),
            active_mtu_bytes: accept.active_mtu_bytes,
            line_rate_gbps: Some(accept.line_rate_gbps).filter(|r| *r > 0.0),
            rdmabw_version: Some(accept.rdmabw_version),
        },
        params: cfg.params.clone(),
        tuning: cfg.tuning.clone(),
        path_mtu_bytes: mtu.bytes(),
        client_results,
        server_results,
        memory,
    })
}

/// A bound control port. Binding is separate from serving so that a port in use is reported
/// before anything else happens.
#[derive(Debug)]
pub struct Listener {
    inner: TcpListener,
}

impl Listener {
    /// Binds `addr` (e.g. `0.0.0.0:18515`).
    pub fn bind(addr: SocketAddr) -> io::Result<Listener> {
        let inner = TcpListener::bind(addr)?;
        inner.set_nonblocking(true)?;
        Ok(Listener { inner })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Waits for a connection; `None` once `stop` is raised.
    pub fn accept(&self, stop: &AtomicBool) -> io::Result<Option<TcpStream>> {
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            match self.inner.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)?;
                    return Ok(Some(s));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => thread::sleep(POLL),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The rail the server uses for `hello`: the client's request where it made one, the server's
/// own flags otherwise. A server started with a device (or netdev) serves only that device.
fn server_rail(
    cfg: &ServerConfig,
    shared: &ServerShared,
    hello: &Hello,
) -> Result<Rail, RejectReason> {
    let asked = hello.device.is_some() || hello.netdev.is_some() || hello.gid_index.is_some();
    let own_pinned = cfg.rail.device.is_some() || cfg.rail.netdev.is_some();
    let req = if asked {
        RailRequest {
            device: hello.device.clone(),
            netdev: hello.netdev.clone(),
            port: cfg.rail.port,
            gid_index: hello.gid_index,
        }
    } else {
        cfg.rail.clone()
    };
    let req = if asked && hello.device.is_none() && hello.netdev.is_none() && own_pinned {
        // Only a GID index was asked: on the server's own device.
        RailRequest {
            gid_index: hello.gid_index,
            ..cfg.rail.clone()
        }
    } else {
        req
    };
    let setup = |e: Error| RejectReason::Other {
        message: format!("{SERVER_SETUP}{e}"),
    };
    let rail = shared.resolve(&cfg.roots, &req).map_err(|e| match e {
        Error::UnknownDevice { name, available } => RejectReason::UnknownDevice {
            device: name,
            available,
        },
        e => setup(e),
    })?;
    if asked && own_pinned {
        let own = shared.resolve(&cfg.roots, &cfg.rail).map_err(setup)?;
        if own.device != rail.device {
            return Err(RejectReason::UnknownDevice {
                device: rail.device,
                available: vec![own.device],
            });
        }
    }
    Ok(rail)
}

/// The client's parameters with the server's pinned ones put back, so that
/// `merged.check_matches(&client)` names the first pinned parameter that differs.
fn pinned_params(cfg: &ServerConfig, client: &TestParams) -> TestParams {
    let mut p = client.clone();
    if cfg.daemon {
        return p;
    }
    let pin = cfg.pinned;
    if pin.sizes {
        p.sizes = cfg.params.sizes.clone();
    }
    if pin.length {
        p.length = cfg.params.length;
    }
    if pin.qps {
        p.qps = cfg.params.qps;
    }
    if pin.bidirectional {
        p.bidirectional = cfg.params.bidirectional;
    }
    p.connection = cfg.params.connection;
    p
}

/// The server's tuning for one test: its own, with the client's path attributes where the
/// server was not given its own (always, for a daemon).
fn server_tuning(cfg: &ServerConfig, hello: &Hello) -> LocalTuning {
    let mut t = cfg.tuning.clone();
    if let Some(c) = &hello.tuning {
        let pin = if cfg.daemon {
            Pinned::default()
        } else {
            cfg.pinned
        };
        if !pin.traffic_class {
            t.traffic_class = c.traffic_class;
        }
        if !pin.service_level {
            t.service_level = c.service_level;
        }
        if !pin.hop_limit {
            t.hop_limit = c.hop_limit;
        }
        if !pin.mtu {
            t.mtu_bytes = c.mtu_bytes;
        }
    }
    t
}

/// Serves one test on an accepted connection. `shared` is shared by every test of a daemon;
/// `stop` ends the test early (SIGINT/SIGTERM).
pub fn serve_one(
    cfg: &ServerConfig,
    stream: TcpStream,
    shared: &ServerShared,
    stop: &Arc<AtomicBool>,
    log: &Log,
) -> Result<Outcome, SessionError> {
    let ch = ControlChannel::from_stream(stream)
        .map_err(|e| SessionError::Local(Error::InvalidParams(format!("control socket: {e}"))))?;
    let mut ch = ch.with_timeouts(cfg.timeouts);
    let peer = ch.peer_addr();
    let hello = ch.expect_hello().map_err(control)?;
    log(&format!(
        "test from {} ({peer}), rdmabw {}",
        hello.client_host, hello.rdmabw_version
    ));
    let reject = |ch: ControlChannel, reason: RejectReason| -> SessionError {
        let mut ch = ch;
        // The client may be gone already; the reason is logged here anyway.
        let _ = ch.send(&Msg::Reject {
            reason: reason.clone(),
        });
        ch.close();
        SessionError::Control(ControlError::Rejected { peer, reason })
    };
    if hello.protocol_version != PROTOCOL_VERSION {
        let reason = RejectReason::ProtocolVersion {
            server: PROTOCOL_VERSION,
            client: hello.protocol_version,
        };
        return Err(reject(ch, reason));
    }
    let merged = pinned_params(cfg, &hello.params);
    if let Err(m) = merged.check_matches(&hello.params) {
        return Err(reject(ch, RejectReason::from_server_mismatch(&m)));
    }
    let params = hello.params.clone();
    let rail = match server_rail(cfg, shared, &hello) {
        Ok(r) => r,
        Err(reason) => return Err(reject(ch, reason)),
    };
    let by = format!("{} ({peer})", hello.client_host);
    let _claim: DeviceClaim = match shared.claims.try_claim(&rail.device, &by) {
        Ok(c) => c,
        Err(busy) => {
            log(&format!("busy: {busy}; answered busy to {by}"));
            let msg = busy.to_msg();
            let _ = ch.send(&msg);
            ch.close();
            return Err(SessionError::Control(ControlError::Busy {
                peer,
                device: busy.device,
                by: busy.by,
            }));
        }
    };
    let tuning = server_tuning(cfg, &hello);
    let side = match prepare(&cfg.roots, rail, &params, &tuning) {
        Ok(s) => s,
        Err(e) => {
            let reason = RejectReason::Other {
                message: format!("{SERVER_SETUP}{e}"),
            };
            reject(ch, reason);
            return Err(SessionError::Local(e));
        }
    };
    let mut timeouts = cfg.timeouts.with_measure_for(&params);
    timeouts.results = timeouts.results.max(Duration::from_secs(30));
    ch.set_timeouts(timeouts);
    log(&format!(
        "rail: {} port {} GID index {} ({}){}",
        side.rail.device,
        side.rail.port,
        side.rail.gid_index,
        side.rail.gid,
        side.rail
            .netdev
            .as_deref()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default()
    ));
    let accept = Accept {
        device: side.rail.device.clone(),
        port: side.rail.port,
        gid_index: u8::try_from(side.rail.gid_index).unwrap_or(u8::MAX),
        active_mtu_bytes: side.info.active_mtu_bytes,
        line_rate_gbps: side.rail.line_rate_gbps.unwrap_or(0.0),
        rdmabw_version: RDMABW_VERSION.to_string(),
    };
    ch.send(&Msg::Accept(accept)).map_err(control)?;
    let ours = endpoints_of(&side);
    let theirs = ch.exchange_endpoints(&ours).map_err(control)?;
    let memory = side.prepared.memory().clone();
    let (mut conn, rail, mtu, local_mtu) = match connect_qps(&cfg.roots, side, &theirs, &tuning) {
        Ok(c) => c,
        Err(e) => {
            ch.fail(&format!("the server could not connect its QPs: {e}"));
            return Err(e.into());
        }
    };
    ch.sync_ready().map_err(control)?;
    log(&format!(
        "QPs connected, path MTU {}; measuring",
        mtu.bytes()
    ));
    let spec = WindowSpec {
        roots: &cfg.roots,
        rail: &rail,
        watch: cfg.watch,
        params: &params,
        tuning: &tuning,
        writer: params.bidirectional,
        measure_timeout: timeouts.measure,
    };
    let (mut ch, server_results) = window(&spec, &mut conn, ch, stop)?;
    let client_results = ch
        .expect_done(Phase::Results)
        .map_err(|cause| SessionError::PeerFailed { cause, local: None })?;
    ch.send(&Msg::Done {
        results: server_results.clone(),
    })
    .map_err(|cause| SessionError::PeerFailed { cause, local: None })?;
    ch.close();
    drop(conn);
    Ok(Outcome {
        role: Role::Server,
        rail,
        active_mtu_bytes: local_mtu,
        remote: Remote {
            host: hello.client_host,
            addr: peer,
            device: theirs.device.clone(),
            port: theirs.port,
            gid_index: theirs.gid_index,
            gid: theirs.qps.first().map(|q| q.gid).unwrap_or_default(),
            netdev: theirs.netdev.clone(),
            active_mtu_bytes: theirs.mtu_bytes,
            line_rate_gbps: None,
            rdmabw_version: Some(hello.rdmabw_version),
        },
        params,
        tuning,
        path_mtu_bytes: mtu.bytes(),
        client_results,
        server_results,
        memory,
    })
}

/// What a daemon reports after each test.
pub type OnTest = Arc<dyn Fn(&SocketAddr, &Result<Outcome, SessionError>) + Send + Sync>;

/// A `--daemon` server: test after test on one port, each on its own thread, one test per
/// device at a time.
pub struct Daemon {
    cfg: Arc<ServerConfig>,
    shared: ServerShared,
    max_tests: usize,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("shared", &self.shared)
            .field("max_tests", &self.max_tests)
            .finish()
    }
}

impl Daemon {
    /// A daemon with `cfg` and a fresh device registry.
    pub fn new(cfg: ServerConfig) -> Daemon {
        Daemon::with_claims(cfg, DeviceClaims::new())
    }

    /// A daemon sharing `claims` (tests pre-claim devices through it).
    pub fn with_claims(cfg: ServerConfig, claims: DeviceClaims) -> Daemon {
        Daemon {
            cfg: Arc::new(cfg),
            shared: ServerShared::with_claims(claims),
            max_tests: 64,
        }
    }

    /// Serves until `stop` is raised; then stops the running tests (their peers are told) and
    /// waits up to 5 s for them.
    pub fn run(
        &self,
        listener: &Listener,
        stop: &Arc<AtomicBool>,
        log: &Log,
        on_test: &OnTest,
    ) -> io::Result<()> {
        let running = Arc::new(AtomicUsize::new(0));
        let flags: Arc<Mutex<Vec<Weak<AtomicBool>>>> = Arc::new(Mutex::new(Vec::new()));
        while let Some(stream) = listener.accept(stop)? {
            let peer = stream
                .peer_addr()
                .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
            if running.load(Ordering::SeqCst) >= self.max_tests {
                log(&format!(
                    "{peer}: refused, {} tests already running",
                    self.max_tests
                ));
                drop(stream);
                continue;
            }
            let test_stop = Arc::new(AtomicBool::new(false));
            {
                let mut f = flags.lock().unwrap_or_else(|e| e.into_inner());
                f.retain(|w| w.strong_count() > 0);
                f.push(Arc::downgrade(&test_stop));
            }
            running.fetch_add(1, Ordering::SeqCst);
            let (cfg, shared, log2, on_test) = (
                Arc::clone(&self.cfg),
                self.shared.clone(),
                Arc::clone(log),
                Arc::clone(on_test),
            );
            let running2 = Arc::clone(&running);
            let spawned = thread::Builder::new()
                .name(format!("rdmabw-test-{peer}"))
                .spawn(move || {
                    let tagged: Log = {
                        let log2 = Arc::clone(&log2);
                        Arc::new(move |m: &str| log2(&format!("[{peer}] {m}")))
                    };
                    let r = serve_one(&cfg, stream, &shared, &test_stop, &tagged);
                    on_test(&peer, &r);
                    running2.fetch_sub(1, Ordering::SeqCst);
                });
            if let Err(e) = spawned {
                running.fetch_sub(1, Ordering::SeqCst);
                log(&format!("{peer}: cannot start a thread for the test: {e}"));
            }
        }
        // Stopping: tell every running test.
        for w in flags.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            if let Some(f) = w.upgrade() {
                f.store(true, Ordering::Relaxed);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while running.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            thread::sleep(POLL);
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn r(size: u64, avg: f64) -> SizeResult {
        SizeResult {
            msg_size_bytes: size,
            iterations: 10,
            bw_peak_gbps: avg + 1.0,
            bw_avg_gbps: avg,
            msg_rate_mpps: 0.5,
            bw_p1_gbps: avg - 1.0,
            bw_p50_gbps: avg,
            bw_p99_gbps: avg + 0.5,
            interval_ms: 10,
            measured_s: 2.0,
            cpu_s: 1.0,
        }
    }

    #[test]
    fn bidirectional_rows_are_summed_like_perftest() {
        let c = combine(&[r(2, 1.0), r(4, 2.0)], &[r(4, 3.0)]);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0], r(2, 1.0));
        assert_eq!(c[1].bw_avg_gbps, 5.0);
        assert_eq!(c[1].iterations, 20);
        assert_eq!(c[1].msg_rate_mpps, 1.0);
        assert!(combine(&[r(2, 1.0)], &[]) == vec![r(2, 1.0)]);
    }

    #[test]
    fn setup_errors_are_told_apart_from_failed_runs() {
        let peer: SocketAddr = "10.0.0.1:18515".parse().unwrap();
        assert!(SessionError::Local(Error::InvalidParams("x".into())).is_setup());
        assert!(SessionError::Control(ControlError::Rejected {
            peer,
            reason: RejectReason::Other {
                message: "m".into()
            }
        })
        .is_setup());
        assert!(!SessionError::Control(ControlError::Busy {
            peer,
            device: "d".into(),
            by: "b".into()
        })
        .is_setup());
        let dead = SessionError::PeerFailed {
            cause: ControlError::PeerClosed {
                peer,
                phase: Phase::Measure,
            },
            local: None,
        };
        assert!(!dead.is_setup());
        assert!(dead.to_string().contains("died"), "{dead}");
        assert!(!SessionError::Interrupted { told_peer: true }.is_setup());
    }
}
