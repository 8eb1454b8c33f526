//! One test with perftest's `ib_write_bw` or `ib_write_lat` on the other end, in either role:
//! perftest's exchange ([`crate::perftest`]) around this side's engine, with a deadline at
//! every step and a watch on the connection during the run.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::config::Pinned;
use super::error::SessionError;
use super::guard::{Guard, Wake};
use super::outcome::{Outcome, Remote};
use super::side::{connect_qps, Link, Side};
use super::window::LateWait;
use super::Log;
use crate::control::measure_timeout;
use crate::counters::{CounterTarget, Snapshot};
use crate::engine::{Endpoints, StopFlags};
use crate::perftest::wire::{self, BwReportMsg, KeyMsg, Negotiation, PeerVersion, ReportUnit};
use crate::perftest::{End, PerftestConn, PerftestError, Step};
use crate::rails::Rail;
use crate::sysfs::SysRoots;
use crate::verbs::{MrInfo, QpEndpoint};
use ::wire::counters::CounterReport;
use ::wire::params::{LocalTuning, SizeResult, TestLength, TestParams};
use ::wire::report::Role;

/// The page size rdmabw tells perftest (perftest keeps the larger of both sides' and writes
/// over that much of the peer's buffer at small sizes).
const PAGE_SIZE: u32 = 4096;
/// The cache line size rdmabw tells perftest.
const CACHE_LINE: u32 = 64;
/// The `max_qp_rd_atom` rdmabw's negotiation block tells perftest 6.28+ (the device attribute
/// perftest reads there; a WRITE test reads nothing).
const MAX_QP_RD_ATOM: u32 = 16;
/// The outstanding reads of rdmabw's key messages: perftest's own for a WRITE test (a 6.24
/// client sets its QP's `max_rd_atomic` to the server's value as given, so with this its QP is
/// the one it has against ib_write_bw's server).
const OUT_READS: u32 = 1;
/// How long each set-up step may wait for the peer.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the watch looks at the connection during the run.
const WATCH_SLICE: Duration = Duration::from_millis(200);

/// What a test with a perftest peer needs besides the prepared side.
pub(super) struct PerftestTest<'a> {
    pub(super) roots: &'a SysRoots,
    pub(super) params: &'a TestParams,
    pub(super) tuning: &'a LocalTuning,
    /// The units of this side's table: the figures it sends, and how it reads the peer's.
    pub(super) unit: ReportUnit,
    /// The peer's host as this side knows it (the name dialled, or the address).
    pub(super) host: String,
}

/// Flags whose test perftest's exchange cannot carry, refused before any connection.
pub fn check_supported(params: &TestParams, tuning: &LocalTuning) -> Result<(), PerftestError> {
    let no = |flag: &'static str, why: &str| {
        Err(PerftestError::Unsupported {
            flag,
            why: why.to_string(),
        })
    };
    if params.run_infinitely {
        return no(
            "--run_infinitely",
            "perftest's server prints nothing of an endless test, and rdmabw needs the exchange's \
             end to report: run timed tests (-D) in a loop",
        );
    }
    if params.data_validation {
        return no(
            "--data_validation",
            "rdmabw writes its own pattern and checks its own; perftest's validation is \
             another layout: leave it out",
        );
    }
    if params.bidirectional && matches!(params.sizes, ::wire::params::Sizes::Sweep { .. }) {
        return no(
            "-a with -b",
            "perftest syncs a bidirectional sweep size by size; run one size (-s) per test",
        );
    }
    if params.latency && !tuning.memory.is_host() {
        return no(
            "--use_cuda",
            "a latency test polls host memory, and perftest's exchange says nothing of the \
             peer's memory: run GPU tests rdmabw to rdmabw",
        );
    }
    Ok(())
}

/// A peer older than perftest itself still talks to (5.70) is refused before anything else.
pub(super) fn check_version(version: &PeerVersion, peer: SocketAddr) -> Result<(), SessionError> {
    if version.value < wire::OLDEST {
        return Err(PerftestError::TooOld {
            peer,
            version: version.text.clone(),
        }
        .into());
    }
    Ok(())
}

/// The key messages' form: with a GID unless the rail is InfiniBand and no GID index was
/// asked for (perftest's `gid_index == -1`).
fn with_gid(rail: &Rail, gid_explicit: bool) -> bool {
    gid_explicit || !matches!(rail.link_layer, Some(crate::sysfs::LinkLayer::InfiniBand))
}

fn key_of(q: &QpEndpoint, mr: &MrInfo, gid: bool) -> KeyMsg {
    KeyMsg {
        lid: q.lid,
        out_reads: OUT_READS,
        qpn: q.qpn,
        psn: q.psn,
        rkey: mr.rkey,
        vaddr: mr.addr,
        gid: gid.then_some(q.gid),
        srqn: 0,
    }
}

/// Both sides connected: what the set-up steps give the run.
struct Linked {
    link: Link,
    /// This side's first key message, sent again at each later sync.
    key0: KeyMsg,
    key_len: usize,
}

/// The steps up to "after RTR" on either end: version (the server's answer), page and cache
/// line sizes, MTU, 6.28's negotiation, the key messages, the QPs to RTS, the keys again.
fn set_up(
    t: &PerftestTest<'_>,
    pc: &mut PerftestConn,
    side: Side,
    version: &PeerVersion,
    gid_explicit: bool,
    stop: &AtomicBool,
) -> Result<Linked, SessionError> {
    let peer = pc.peer();
    if pc.end() == End::Server {
        pc.write(Step::Version, &wire::encode_version(None))?;
    }
    check_version(version, peer)?;
    let mut their_sys = [0u32; 2];
    for (i, (mine, what)) in [(PAGE_SIZE, "page size"), (CACHE_LINE, "cache line size")]
        .into_iter()
        .enumerate()
    {
        let b = pc.exchange(
            Step::SysData,
            &wire::encode_sys(mine),
            wire::SYS_DATA_LEN,
            stop,
        )?;
        let mut m = [0u8; wire::SYS_DATA_LEN];
        m.copy_from_slice(&b);
        their_sys[i] = wire::decode_sys(&m, what).map_err(|e| pc.wire(Step::SysData, e))?;
    }
    let landing = side.info.mr.len;
    if u64::from(their_sys[0]) > landing {
        return Err(PerftestError::Unsupported {
            flag: "-s",
            why: format!(
                "the peer's page size is {} bytes and perftest writes over that much of this \
                 side's buffer, which holds {landing}: give this side -s {} or more",
                their_sys[0], their_sys[0]
            ),
        }
        .into());
    }
    let local_mtu = side.prepared.active_mtu().bytes();
    let our_mtu = t.tuning.mtu_bytes.unwrap_or(local_mtu);
    let m = wire::encode_mtu(our_mtu).map_err(|e| pc.wire(Step::Mtu, e))?;
    let b = pc.exchange(Step::Mtu, &m, wire::MTU_LEN, stop)?;
    let their_mtu = wire::decode_mtu(&[b[0], b[1]])
        .map_err(|e| pc.wire(Step::Mtu, e))?
        .unwrap_or(our_mtu);
    if version.negotiates_with_us() {
        let ours = crate::perftest::negotiation_for(t.params, t.unit, MAX_QP_RD_ATOM);
        let b = pc.exchange(
            Step::Negotiation,
            &ours.encode(),
            wire::NEGOTIATE_LEN_6_28,
            stop,
        )?;
        let theirs = Negotiation::decode(&b).map_err(|e| pc.wire(Step::Negotiation, e))?;
        let items = ours.mismatches(&theirs);
        if !items.is_empty() {
            return Err(PerftestError::Mismatch {
                peer,
                version: version.text.clone(),
                items: items
                    .into_iter()
                    .map(|(n, o, t)| (n.to_string(), o, t))
                    .collect(),
            }
            .into());
        }
    }
    let gid = with_gid(&side.rail, gid_explicit);
    let keys: Vec<KeyMsg> = side
        .info
        .qps
        .iter()
        .map(|q| key_of(q, &side.info.mr, gid))
        .collect();
    let key0 = keys[0];
    let key_len = key0.len();
    let keyx = |pc: &mut PerftestConn, step: Step, k: &KeyMsg| -> Result<KeyMsg, SessionError> {
        let b = pc.exchange(step, &k.encode(), key_len, stop)?;
        Ok(KeyMsg::decode(&b).map_err(|e| pc.wire(step, e))?)
    };
    if t.params.latency {
        // ib_write_lat shakes hands once before the per-QP exchange.
        keyx(pc, Step::Keys, &key0)?;
    }
    let mut first = Vec::with_capacity(keys.len());
    for k in &keys {
        first.push(keyx(pc, Step::Keys, k)?);
    }
    let q = keys.len();
    for (i, k) in first.iter().enumerate() {
        if first[..i].iter().any(|p| p.qpn == k.qpn) {
            return Err(qp_mismatch(peer, version, q, "fewer"));
        }
    }
    let theirs = Endpoints {
        device: String::new(),
        port: 1,
        qps: first
            .iter()
            .map(|k| QpEndpoint {
                qpn: k.qpn,
                psn: k.psn,
                gid: k.gid.unwrap_or([0; 16]),
                lid: k.lid,
            })
            .collect(),
        // perftest gives each QP its own address in one region with one key; rdmabw writes
        // every QP's messages at the first (they land inside the peer's buffer either way).
        // The region's length is not sent: perftest sizes it by its own -s.
        mr: MrInfo {
            addr: first[0].vaddr,
            len: u64::MAX,
            rkey: first[0].rkey,
        },
        mtu_bytes: their_mtu,
        max_msg_bytes: u64::MAX,
        gid_index: None,
        netdev: None,
    };
    let link = connect_qps(t.roots, side, theirs, t.tuning)?;
    for (k, was) in keys.iter().zip(&first) {
        let again = keyx(pc, Step::KeysAgain, k)?;
        if again.qpn != was.qpn {
            return Err(qp_mismatch(peer, version, q, "more"));
        }
    }
    keyx(pc, Step::AfterRtr, &key0)?;
    Ok(Linked {
        link,
        key0,
        key_len,
    })
}

fn qp_mismatch(peer: SocketAddr, version: &PeerVersion, q: usize, how: &str) -> SessionError {
    PerftestError::Mismatch {
        peer,
        version: version.text.clone(),
        items: vec![(
            "-q (queue pairs)".into(),
            q.to_string(),
            format!("{how} than {q}"),
        )],
    }
    .into()
}

/// Watches the connection during the run: a peer that hangs up (its process died) raises
/// `stop`. perftest sends nothing during a run, so any byte that comes ends the watch (the
/// exchange after the run reads it).
struct ConnWatch {
    quit: Arc<AtomicBool>,
    closed: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl ConnWatch {
    fn start(stream: io::Result<TcpStream>, stop: Arc<AtomicBool>) -> ConnWatch {
        let quit = Arc::new(AtomicBool::new(false));
        let closed = Arc::new(AtomicBool::new(false));
        let thread = stream.ok().map(|s| {
            let (quit, closed) = (Arc::clone(&quit), Arc::clone(&closed));
            thread::spawn(move || {
                let _ = s.set_read_timeout(Some(WATCH_SLICE));
                let mut b = [0u8; 1];
                while !quit.load(Ordering::Relaxed) {
                    match s.peek(&mut b) {
                        Ok(0) => {
                            closed.store(true, Ordering::Relaxed);
                            stop.store(true, Ordering::Relaxed);
                            return;
                        }
                        Ok(_) => return,
                        Err(e) if crate::control::is_wait(&e) => {}
                        Err(_) => {
                            closed.store(true, Ordering::Relaxed);
                            stop.store(true, Ordering::Relaxed);
                            return;
                        }
                    }
                }
            })
        });
        ConnWatch {
            quit,
            closed,
            thread,
        }
    }

    /// Ends the watch; whether the peer hung up meanwhile.
    fn finish(mut self) -> bool {
        self.quit.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.closed.load(Ordering::Relaxed)
    }
}

/// What the run gives back: this side's results (empty for a passive server) and its
/// counter deltas.
struct Ran {
    results: Vec<SizeResult>,
    counters: Option<CounterReport>,
}

/// The run under the rail guard and the connection watch: writes (or the ping-pong), or as the
/// passive server of a one-way test the wait for the client's "done" key message.
fn run(
    t: &PerftestTest<'_>,
    pc: &mut PerftestConn,
    l: &mut Linked,
    role: Role,
    stop: &Arc<AtomicBool>,
    log: &Log,
) -> Result<Ran, SessionError> {
    let peer = pc.peer();
    let target = CounterTarget::new(
        l.link.rail.device.clone(),
        l.link.rail.port,
        l.link.rail.netdev.clone(),
    );
    let before = Snapshot::read(t.roots, &target);
    let engine_stop = Arc::new(AtomicBool::new(stop.load(Ordering::Relaxed)));
    let writer = role == Role::Client || t.params.bidirectional || t.params.latency;
    // A passive server blocks in one read, as perftest's does; the guard wakes it.
    let wake = (!writer)
        .then(|| pc.try_clone_stream().ok())
        .flatten()
        .map(|stream| Wake {
            stop: Arc::clone(stop),
            stream,
        });
    let guard = Guard::start(Arc::clone(&engine_stop), t.roots, &l.link.rail, wake);
    let tuning = &LocalTuning {
        cpu: crate::numa::cpu_for(
            t.roots,
            l.link.rail.numa_node,
            t.tuning.cpu,
            &crate::ffi::allowed_cpus().unwrap_or_default(),
        ),
        ..t.tuning.clone()
    };
    let outcome: Result<Vec<SizeResult>, SessionError> = if writer {
        let watch = ConnWatch::start(pc.try_clone_stream(), Arc::clone(&engine_stop));
        let flags = StopFlags::either(stop, &engine_stop);
        let r = if t.params.latency {
            // ib_write_lat's server writes first; a timed responder answers until its own
            // test's time is up (perftest says nothing when its side ends).
            let end = Instant::now() + timed_span(t.params);
            l.link
                .conn
                .run_pingpong(t.params, tuning, flags, role == Role::Server, &|| {
                    Instant::now() >= end
                })
        } else {
            l.link.conn.run_writes(t.params, tuning, flags)
        };
        let closed = watch.finish();
        match r {
            Ok(v) => Ok(v),
            Err(e) if closed => Err(PerftestError::Closed {
                peer,
                step: Step::Measure,
                got: 0,
                needed: 0,
            }
            .with_local(e)),
            Err(e) => Err(SessionError::Run {
                error: e,
                port_note: super::guard::port_note(t.roots, &l.link.rail),
            }),
        }
    } else {
        // The passive server of a one-way test: the client's "done" key message ends the run.
        let mut late = LateWait::new(
            measure_timeout(t.params),
            crate::counters::traffic_probe(t.roots, &target),
        );
        loop {
            let until = late.next_look(Instant::now());
            // A signal or the guard may end the read early (the guard's wake looks like the
            // peer closing): the guard's rail note and the stop flag, read below before the
            // outcome, say why.
            match pc.read_until_woken(Step::Measure, l.key_len, until, stop) {
                Ok(b) => {
                    // The client's "done", answered as perftest's server does.
                    KeyMsg::decode(&b).map_err(|e| pc.wire(Step::Measure, e))?;
                    pc.write(Step::Measure, &l.key0.encode())?;
                    break Ok(Vec::new());
                }
                Err(PerftestError::Timeout { .. }) if late.waits_on(Instant::now()) => {}
                Err(PerftestError::Timeout { .. }) => {
                    break Err(PerftestError::Timeout {
                        peer,
                        step: Step::Measure,
                        after: measure_timeout(t.params),
                    }
                    .into())
                }
                Err(e) => break Err(e.into()),
            }
        }
    };
    let rail_down = guard.stop();
    if let Some(note) = rail_down {
        return Err(SessionError::RailDown { note });
    }
    if stop.load(Ordering::Relaxed) {
        return Err(SessionError::Interrupted { told_peer: false });
    }
    let results = outcome?;
    let after = Snapshot::read(t.roots, &target);
    let counters = (!before.is_empty()).then(|| {
        before
            .delta(&after, role, &target)
            .trimmed(crate::diagnosis::is_evidence)
    });
    log(&format!(
        "perftest {} run done",
        if role == Role::Client {
            "client"
        } else {
            "server"
        }
    ));
    Ok(Ran { results, counters })
}

/// The whole of a timed test on one side (warm-up, window, cool-down, every size), or a
/// day for a test of iterations.
fn timed_span(params: &TestParams) -> Duration {
    match params.length {
        TestLength::Duration {
            duration_s,
            warmup_s,
            cooldown_s,
        } => Duration::from_secs_f64(
            (duration_s + warmup_s + cooldown_s).max(0.0) * params.sizes.list().len() as f64,
        ),
        TestLength::Iterations { .. } => Duration::from_secs(86_400),
    }
}

/// The report exchange: five 8-byte fields, each written and read in turn. The peer's are
/// read only where they are figures (the client's, or the server's with `-b`): the server of a
/// one-way test sends whatever its memory held.
fn exchange_reports(
    pc: &mut PerftestConn,
    mine: &BwReportMsg,
    figures: bool,
    stop: &AtomicBool,
) -> Result<Option<BwReportMsg>, SessionError> {
    let mut theirs = [[0u8; wire::REPORT_FIELD_LEN]; wire::REPORT_FIELDS];
    for (i, f) in mine.fields().iter().enumerate() {
        let b = pc.exchange(Step::Results, f, wire::REPORT_FIELD_LEN, stop)?;
        theirs[i].copy_from_slice(&b);
    }
    if !figures {
        return Ok(None);
    }
    let msg = BwReportMsg::from_fields(&theirs).map_err(|e| pc.wire(Step::Results, e))?;
    if msg.clockless() {
        return Err(PerftestError::NoFigures {
            peer: pc.peer(),
            iters: msg.iters,
            size: msg.size,
        }
        .into());
    }
    Ok(Some(msg))
}

fn report_of(r: Option<&SizeResult>, unit: ReportUnit) -> BwReportMsg {
    let per = unit.gbps_per_unit();
    r.map_or(
        BwReportMsg {
            size: 0,
            iters: 0,
            bw_peak: 0.0,
            bw_avg: 0.0,
            msg_rate: 0.0,
        },
        |r| BwReportMsg {
            size: r.msg_size_bytes,
            iters: r.iterations,
            bw_peak: r.bw_peak_gbps / per,
            bw_avg: r.bw_avg_gbps / per,
            msg_rate: r.msg_rate_mpps,
        },
    )
}

fn result_of(m: &BwReportMsg, unit: ReportUnit) -> SizeResult {
    let per = unit.gbps_per_unit();
    SizeResult {
        msg_size_bytes: m.size,
        iterations: m.iters,
        bw_peak_gbps: m.bw_peak * per,
        bw_avg_gbps: m.bw_avg * per,
        msg_rate_mpps: m.msg_rate,
        bw_p1_gbps: 0.0,
        bw_p50_gbps: 0.0,
        bw_p99_gbps: 0.0,
        interval_ms: 0,
        measured_s: 0.0,
        cpu_s: 0.0,
        cpu_s_per_gb: None,
        polling_cpu: None,
        off_cpu_max_s: None,
        latency: None,
    }
}

/// After the run: the client's "done" (one way), the results (bandwidth), the closing
/// exchange. Returns the peer's results (bandwidth).
fn finish(
    t: &PerftestTest<'_>,
    pc: &mut PerftestConn,
    l: &Linked,
    role: Role,
    mine: &[SizeResult],
    stop: &AtomicBool,
) -> Result<Option<BwReportMsg>, SessionError> {
    if t.params.latency {
        return Ok(None);
    }
    if role == Role::Client && !t.params.bidirectional {
        // The server waits for this one: the client's writes are done.
        let b = pc.exchange(Step::Measure, &l.key0.encode(), l.key_len, stop)?;
        KeyMsg::decode(&b).map_err(|e| pc.wire(Step::Measure, e))?;
    }
    // The last size's figures: perftest exchanges one report per test (per size with -b).
    let figures = role == Role::Server || t.params.bidirectional;
    let theirs = exchange_reports(pc, &report_of(mine.last(), t.unit), figures, stop)?;
    let b = pc.exchange(Step::Close, &l.key0.encode(), l.key_len, stop)?;
    KeyMsg::decode(&b).map_err(|e| pc.wire(Step::Close, e))?;
    Ok(theirs)
}

fn remote_of(t: &PerftestTest<'_>, pc: &PerftestConn, l: &Linked, version: &PeerVersion) -> Remote {
    Remote {
        host: t.host.clone(),
        addr: pc.peer(),
        device: String::new(),
        port: 1,
        gid_index: None,
        gid: l.link.theirs.qps.first().map(|q| q.gid).unwrap_or_default(),
        netdev: None,
        active_mtu_bytes: l.link.theirs.mtu_bytes,
        line_rate_gbps: None,
        rdmabw_version: None,
        perftest_version: Some(version.text.clone()),
    }
}

/// One whole test with a perftest peer on `end`: the set-up steps, the sync of `-b`, the run,
/// the exchanges after it. Returns the closed-down pieces the outcome is made of.
#[allow(clippy::too_many_arguments)]
fn whole_test(
    t: &PerftestTest<'_>,
    side: Side,
    stream: TcpStream,
    end: End,
    version: &PeerVersion,
    gid_explicit: bool,
    stop: &Arc<AtomicBool>,
    log: &Log,
) -> Result<Done, SessionError> {
    let mut pc = PerftestConn::new(stream, end, STEP_TIMEOUT).map_err(|e| {
        SessionError::Local(crate::error::Error::InvalidParams(format!(
            "control socket: {e}"
        )))
    })?;
    let role = match end {
        End::Client => Role::Client,
        End::Server => Role::Server,
    };
    let mut l = set_up(t, &mut pc, side, version, gid_explicit, stop)?;
    log(&format!(
        "QPs connected, path MTU {}; measuring",
        l.link.mtu.bytes()
    ));
    if t.params.bidirectional {
        let b = pc.exchange(Step::Sync, &l.key0.encode(), l.key_len, stop)?;
        KeyMsg::decode(&b).map_err(|e| pc.wire(Step::Sync, e))?;
    }
    let ran = run(t, &mut pc, &mut l, role, stop, log)?;
    let theirs = finish(t, &mut pc, &l, role, &ran.results, stop)?;
    let remote = remote_of(t, &pc, &l, version);
    let peer = pc.peer();
    pc.close();
    Ok(Done {
        role,
        l,
        ran,
        theirs,
        remote,
        peer,
    })
}

/// A test with a perftest peer, run to its end.
struct Done {
    role: Role,
    l: Linked,
    ran: Ran,
    /// The peer's figures: the client's (on a server), the server's with `-b` (on a client).
    theirs: Option<BwReportMsg>,
    remote: Remote,
    peer: SocketAddr,
}

impl Done {
    fn outcome(self, t: &PerftestTest<'_>) -> Outcome {
        let theirs: Vec<SizeResult> = self.theirs.iter().map(|m| result_of(m, t.unit)).collect();
        let (client_results, server_results) = match self.role {
            Role::Client => (self.ran.results, theirs),
            Role::Server => (theirs, self.ran.results),
        };
        Outcome {
            role: self.role,
            rail: self.l.link.rail,
            active_mtu_bytes: self.l.link.local_mtu,
            remote: self.remote,
            params: t.params.clone(),
            tuning: t.tuning.clone(),
            path_mtu_bytes: self.l.link.mtu.bytes(),
            client_results,
            server_results,
            memory: self.l.link.memory,
            counters: self.ran.counters.into_iter().collect(),
        }
    }
}

/// The client's side of a test whose server turned out to be perftest (its version message
/// has been read).
pub(super) fn client(
    t: &PerftestTest<'_>,
    side: Side,
    stream: TcpStream,
    version: &PeerVersion,
    gid_explicit: bool,
    stop: &Arc<AtomicBool>,
    log: &Log,
) -> Result<Outcome, SessionError> {
    log(&format!(
        "the server is perftest {} ({}): perftest's exchange",
        version.text,
        if t.params.latency {
            "ib_write_lat"
        } else {
            "ib_write_bw"
        }
    ));
    let done = whole_test(
        t,
        side,
        stream,
        End::Client,
        version,
        gid_explicit,
        stop,
        log,
    )?;
    Ok(done.outcome(t))
}

/// The server's side of a test whose client is perftest (its version message has been read;
/// this side answers it). The test is this server's own flags, as perftest's server's is.
#[allow(clippy::too_many_arguments)]
pub(super) fn server(
    t: &PerftestTest<'_>,
    side: Side,
    stream: TcpStream,
    version: &PeerVersion,
    gid_explicit: bool,
    pinned: &Pinned,
    stop: &Arc<AtomicBool>,
    log: &Log,
) -> Result<Outcome, SessionError> {
    let done = whole_test(
        t,
        side,
        stream,
        End::Server,
        version,
        gid_explicit,
        stop,
        log,
    )?;
    // What perftest cannot say before the run, its report says after it: a size or a count
    // of writes other than this server was given.
    if let Some(m) = done.theirs {
        let mut items = Vec::new();
        let sizes = t.params.sizes.list();
        if pinned.sizes && !sizes.contains(&m.size) {
            items.push((
                "-s (message size)".to_string(),
                sizes.last().copied().unwrap_or(0).to_string(),
                m.size.to_string(),
            ));
        }
        if let (true, TestLength::Iterations { iterations }) = (pinned.length, t.params.length) {
            let per_test = iterations * u64::from(t.params.qps);
            if m.iters != iterations && m.iters != per_test {
                items.push((
                    "-n (iterations)".to_string(),
                    iterations.to_string(),
                    m.iters.to_string(),
                ));
            }
        }
        if !items.is_empty() {
            return Err(PerftestError::Mismatch {
                peer: done.peer,
                version: version.text.clone(),
                items,
            }
            .into());
        }
    }
    Ok(done.outcome(t))
}

impl PerftestError {
    /// The peer hung up during the run, and this side's engine saw its own error too.
    fn with_local(self, local: crate::error::Error) -> SessionError {
        SessionError::Perftest {
            error: self,
            local: Some(local),
        }
    }
}

impl From<PerftestError> for SessionError {
    fn from(error: PerftestError) -> Self {
        match error {
            PerftestError::Interrupted { .. } => SessionError::Interrupted { told_peer: false },
            error => SessionError::Perftest { error, local: None },
        }
    }
}
