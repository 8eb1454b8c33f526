//! The server's side of one test: the bound port, the rail and parameters an admitted client's
//! hello gets, and [`serve_one`].

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use super::admit::{admit, Admitted, Client};
use super::config::{Pinned, ServerConfig};
use super::error::{control, peer_failed, SessionError, SERVER_SETUP};
use super::gate::{Admission, Gate};
use super::outcome::{Outcome, Remote};
use super::perftest::{self, PerftestTest};
use super::resolve::ServerShared;
use super::side::{link, prepare};
use super::window::{window, WindowSpec, Windowed};
use super::{Log, POLL};
use crate::control::{
    Accept, ControlChannel, ControlError, DeviceClaim, Hello, Msg, Phase, RejectReason,
    RDMABW_VERSION,
};
use crate::error::Error;
use crate::perftest::PeerVersion;
use crate::rails::{Rail, RailRequest};
use wire::params::{LocalTuning, TestParams};
use wire::report::Role;

/// The bound control port, on one address or several. Binding is separate from serving so
/// that a port in use is reported before anything else happens.
#[derive(Debug)]
pub struct Listener {
    inner: Vec<TcpListener>,
}

impl Listener {
    /// Binds `addr` (e.g. `0.0.0.0:18515`).
    pub fn bind(addr: SocketAddr) -> io::Result<Listener> {
        Listener::bind_each(&[addr]).map_err(|(_, e)| e)
    }

    /// Binds each of `addrs` (a daemon that listens on its rails' addresses only); the error
    /// names the address that could not be bound. No address is an `InvalidInput` error.
    pub fn bind_each(addrs: &[SocketAddr]) -> Result<Listener, (Option<SocketAddr>, io::Error)> {
        if addrs.is_empty() {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "no address to listen on");
            return Err((None, e));
        }
        let mut inner = Vec::with_capacity(addrs.len());
        for &a in addrs {
            let l = TcpListener::bind(a)
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(|e| (Some(a), e))?;
            inner.push(l);
        }
        Ok(Listener { inner })
    }

    /// The bound address (the first one's, with several).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner
            .first()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?
            .local_addr()
    }

    /// Every bound address, in the order given.
    pub fn local_addrs(&self) -> io::Result<Vec<SocketAddr>> {
        self.inner.iter().map(TcpListener::local_addr).collect()
    }

    /// Waits for a connection on any of the addresses; `None` once `stop` is raised.
    pub fn accept(&self, stop: &AtomicBool) -> io::Result<Option<TcpStream>> {
        self.accept_unless(|| stop.load(Ordering::Relaxed))
    }

    /// Waits for a connection on any of the addresses; `None` once `done()` says so (looked
    /// at every few milliseconds).
    pub fn accept_unless(&self, done: impl Fn() -> bool) -> io::Result<Option<TcpStream>> {
        loop {
            if done() {
                return Ok(None);
            }
            for l in &self.inner {
                match l.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false)?;
                        return Ok(Some(s));
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock
                                | io::ErrorKind::Interrupted
                                | io::ErrorKind::ConnectionAborted
                        ) => {}
                    Err(e) => return Err(e),
                }
            }
            thread::sleep(POLL);
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
    if pin.run_infinitely {
        p.run_infinitely = cfg.params.run_infinitely;
    }
    if pin.data_validation {
        p.data_validation = cfg.params.data_validation;
    }
    p.connection = cfg.params.connection;
    // A one-test server runs the test it was started for: `rdmabw lat` or bandwidth.
    p.latency = cfg.params.latency;
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

/// How many connections that were not admitted a one-test server notes in its log.
const NOTED_NOT_ADMITTED: u32 = 3;

/// What a one-test server logs about a connection that was not admitted, in this side's words:
/// never what the peer sent.
fn not_admitted_words(e: &SessionError) -> String {
    match e {
        SessionError::NotRdmabw(ControlError::Protocol { detail, .. }) => detail.clone(),
        SessionError::NotRdmabw(_) => {
            "speaks neither rdmabw's control protocol nor perftest's".to_string()
        }
        _ => "sent no admissible hello".to_string(),
    }
}

/// A one-test server: waits on `listener` for the first client that passes admission and
/// serves its test. Connections wait for admission side by side in a gate (the daemon's:
/// [`super::Admission`], with the handshake timeout for the hello), so that connections that
/// never become a test (silent, garbage, another run's secret, values out of bounds) neither
/// end the server nor hold up its client: the first few are noted in the log by address only,
/// nothing they sent, and the wait goes on. One that did not speak rdmabw's control protocol
/// at all is said to be so, in this side's words (perftest's ib_write_bw pointed at rdmabw,
/// most likely). A client admitted just after the first is told that the server runs one test.
/// `Ok(None)` once `stop` is raised while waiting.
pub fn serve_first(
    cfg: &ServerConfig,
    listener: &Listener,
    shared: &ServerShared,
    stop: &Arc<AtomicBool>,
    log: &Log,
) -> io::Result<Option<Result<Outcome, SessionError>>> {
    let gate = Gate::new(Admission {
        hello_wait: cfg.timeouts.handshake,
        ..Admission::DEFAULT
    });
    let not_admitted = AtomicU32::new(0);
    let found = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<Admitted>();
    let note = |peer: Option<SocketAddr>, e: &SessionError| {
        let n = not_admitted.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= NOTED_NOT_ADMITTED {
            log(&format!(
                "{} {}; still waiting{}",
                peer.map_or_else(|| "a client".to_string(), |p| p.to_string()),
                not_admitted_words(e),
                if n == NOTED_NOT_ADMITTED {
                    " (further such connections are not noted)"
                } else {
                    ""
                }
            ));
        }
    };
    let waited = thread::scope(|s| -> io::Result<Option<Admitted>> {
        let done = || found.load(Ordering::SeqCst) || stop.load(Ordering::Relaxed);
        let accepted = loop {
            let stream = match listener.accept_unless(done) {
                Ok(Some(stream)) => stream,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            let peer = stream.peer_addr().ok();
            let Ok(ticket) = gate.enter(&stream, peer.unwrap_or(UNKNOWN_PEER)) else {
                continue;
            };
            let (gate, tx, found, note) = (&gate, tx.clone(), &found, &note);
            let spawned = thread::Builder::new()
                .name("rdmabw-admission".into())
                .spawn_scoped(s, move || match gate.admit(cfg, stream, ticket) {
                    Ok(a) => {
                        let _ = tx.send(a);
                        found.store(true, Ordering::SeqCst);
                    }
                    Err(e) => note(peer, &e),
                });
            if let Err(e) = spawned {
                log(&format!("cannot start a thread for a connection: {e}"));
            }
        };
        // A client is in, or the server stops: every other wait ends now.
        gate.evict_all();
        accepted?;
        Ok(rx.try_recv().ok())
    })?;
    // Clients admitted while the first one was picked: this server has its test.
    for late in rx.try_iter() {
        let _ = late.refuse(RejectReason::Other {
            message: "this server runs one test, and another client's came first".into(),
        });
    }
    match waited {
        Some(a) if !stop.load(Ordering::Relaxed) => {
            Ok(Some(serve_admitted(cfg, a, shared, stop, log)))
        }
        _ => Ok(None),
    }
}

/// The address of a peer whose address could not be read (it is gone already).
const UNKNOWN_PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// Serves one test on an accepted connection. `shared` is shared by every test of a daemon;
/// `stop` ends the test early (SIGINT/SIGTERM).
pub fn serve_one(
    cfg: &ServerConfig,
    stream: TcpStream,
    shared: &ServerShared,
    stop: &Arc<AtomicBool>,
    log: &Log,
) -> Result<Outcome, SessionError> {
    let admitted = admit(cfg, stream, cfg.timeouts.handshake)?;
    serve_admitted(cfg, admitted, shared, stop, log)
}

/// Serves a perftest client: the test is this server's own flags, the rail its own, as with
/// perftest's own server.
fn serve_perftest(
    cfg: &ServerConfig,
    stream: TcpStream,
    version: &PeerVersion,
    shared: &ServerShared,
    stop: &Arc<AtomicBool>,
    log: &Log,
) -> Result<Outcome, SessionError> {
    let peer = stream
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let tool = if cfg.params.latency {
        "ib_write_lat"
    } else {
        "ib_write_bw"
    };
    log(&format!(
        "test from perftest {} ({tool}) at {peer}: perftest's exchange, this server's flags",
        version.text
    ));
    perftest::check_version(version, peer)?;
    let params = cfg.params.clone();
    perftest::check_supported(&params, &cfg.tuning)?;
    if let Some(reason) = cfg.limits.check(&params) {
        return Err(SessionError::Control(ControlError::Rejected {
            peer,
            reason,
        }));
    }
    let rail = shared
        .resolve(&cfg.roots, &cfg.rail)
        .map_err(SessionError::Local)?;
    let by = format!("perftest at {peer}");
    let _claim: DeviceClaim = match shared.claims.try_claim(&rail.device, &by) {
        Ok(c) => c,
        Err(busy) => {
            log(&format!("busy: {busy}; closed the connection of {by}"));
            return Err(SessionError::Control(ControlError::Busy {
                peer,
                device: busy.device,
                by: busy.by,
            }));
        }
    };
    let side = prepare(&cfg.roots, rail, &params, &cfg.tuning)?;
    log(&format!(
        "rail: {} port {} GID index {} ({})",
        side.rail.device, side.rail.port, side.rail.gid_index, side.rail.gid
    ));
    let t = PerftestTest {
        roots: &cfg.roots,
        params: &params,
        tuning: &cfg.tuning,
        unit: cfg.unit,
        host: peer.ip().to_string(),
    };
    perftest::server(
        &t,
        side,
        stream,
        version,
        cfg.rail.gid_index.is_some(),
        &cfg.pinned,
        stop,
        log,
    )
}

/// Serves the test of an admitted client (see [`admit`]): the server's limits and pinned
/// parameters, the rail, the device's claim, then the test itself.
pub fn serve_admitted(
    cfg: &ServerConfig,
    admitted: Admitted,
    shared: &ServerShared,
    stop: &Arc<AtomicBool>,
    log: &Log,
) -> Result<Outcome, SessionError> {
    let Admitted {
        mut ch,
        client,
        peer,
    } = admitted;
    let hello = match client {
        Client::Rdmabw(h) => *h,
        Client::Perftest(version) => {
            return serve_perftest(cfg, ch.into_stream(), &version, shared, stop, log)
        }
    };
    let host = crate::control::for_log(&hello.client_host, crate::control::PEER_TEXT_CHARS);
    log(&format!(
        "test from {host} ({peer}), rdmabw {}",
        crate::control::for_log(&hello.rdmabw_version, crate::control::PEER_TEXT_CHARS)
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
    if let Some(reason) = cfg.limits.check(&hello.params) {
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
    let by = format!("{host} ({peer})");
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
        active_mtu_bytes: side.info.mtu_bytes,
        line_rate_gbps: side.rail.line_rate_gbps.unwrap_or(0.0),
        rdmabw_version: RDMABW_VERSION.to_string(),
        latency: true,
    };
    ch.send(&Msg::Accept(accept)).map_err(control)?;
    let (ch, mut l) = link(ch, &cfg.roots, side, &tuning, "server")?;
    log(&format!(
        "QPs connected, path MTU {}; measuring",
        l.mtu.bytes()
    ));
    let spec = WindowSpec {
        roots: &cfg.roots,
        rail: &l.rail,
        watch: cfg.watch,
        params: &params,
        tuning: &tuning,
        writer: params.bidirectional,
        measure_timeout: timeouts.measure,
        role: Role::Server,
    };
    let Windowed {
        mut ch,
        results: server_results,
        counters,
    } = window(&spec, &mut l.conn, ch, stop, None)?;
    let (client_results, client_counters) = ch.expect_done(Phase::Results).map_err(peer_failed)?;
    // --data_validation: the client's writes are complete (its Done came after its last
    // completion): check what landed, and tell the client instead of answering Done.
    if let Some(m) = l.conn.check_landing().map_err(SessionError::Local)? {
        ch.fail(&m.to_string());
        return Err(SessionError::DataValidation(m));
    }
    if params.data_validation {
        log("data validation: every byte the client wrote is what it sent");
    }
    ch.send(&Msg::Done {
        results: server_results.clone(),
        counters: counters.clone(),
    })
    .map_err(peer_failed)?;
    ch.close();
    drop(l.conn);
    Ok(Outcome {
        role: Role::Server,
        rail: l.rail,
        active_mtu_bytes: l.local_mtu,
        remote: Remote {
            host: hello.client_host,
            addr: peer,
            device: l.theirs.device.clone(),
            port: l.theirs.port,
            gid_index: l.theirs.gid_index,
            gid: l.theirs.qps.first().map(|q| q.gid).unwrap_or_default(),
            netdev: l.theirs.netdev.clone(),
            active_mtu_bytes: l.theirs.mtu_bytes,
            line_rate_gbps: None,
            rdmabw_version: Some(hello.rdmabw_version),
            perftest_version: None,
        },
        params,
        tuning,
        path_mtu_bytes: l.mtu.bytes(),
        client_results,
        server_results,
        memory: l.memory,
        counters: counters.into_iter().chain(client_counters).collect(),
    })
}
