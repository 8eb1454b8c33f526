//! The session drivers' server side over loopback TCP, on the sysfs fixture trees: admission
//! (parameters, devices, busy), perftest and silent peers, and a daemon that keeps serving.
//! No RDMA device is needed: every admitted test here ends at device opening, which fails on a
//! machine without RDMA (and is answered to the client as a server set-up failure).
#![allow(clippy::unwrap_used, clippy::result_large_err)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bench_core::control::{
    ControlChannel, ControlError, DeviceClaims, Hello, PhaseTimeouts, RejectReason, RunSecret,
    WatchConfig,
};
use bench_core::rails::RailRequest;
use bench_core::session::{
    inventory_for, quiet, serve_one, Daemon, Listener, OnTest, Pinned, ServerConfig, ServerLimits,
    ServerShared, SessionError,
};
use bench_core::sysfs::SysRoots;
use wire::params::{LocalTuning, Sizes, TestLength, TestParams};

fn fixture(tree: &str) -> SysRoots {
    SysRoots::under(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(tree),
    )
}

fn params(qps: u32) -> TestParams {
    TestParams::write_bw(
        Sizes::One {
            msg_size_bytes: 65536,
        },
        TestLength::Iterations { iterations: 100 },
        qps,
    )
}

fn server_cfg(daemon: bool, pinned: Pinned, rail: RailRequest) -> ServerConfig {
    ServerConfig {
        rail,
        params: params(2),
        pinned,
        tuning: LocalTuning::default(),
        timeouts: PhaseTimeouts::uniform(Duration::from_secs(3)),
        watch: WatchConfig::default(),
        host: "server-pod".into(),
        roots: fixture("rxe-pods/podB"),
        daemon,
        secret: None,
        limits: ServerLimits::default(),
        peer: bench_core::session::PeerChoice::Auto,
        unit: bench_core::perftest::ReportUnit::MibPerS,
    }
}

/// Serves one connection on a thread; returns the address and the result's handle.
fn serve(
    cfg: ServerConfig,
    shared: ServerShared,
) -> (
    SocketAddr,
    thread::JoinHandle<Result<bench_core::session::Outcome, SessionError>>,
) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        serve_one(
            &cfg,
            s,
            &shared,
            &Arc::new(AtomicBool::new(false)),
            &quiet(),
        )
    });
    (addr, h)
}

/// [`serve`] with [`server_cfg`] of any rail, on a server state of its own.
fn serve_any_rail(
    daemon: bool,
    pinned: Pinned,
) -> (
    SocketAddr,
    thread::JoinHandle<Result<bench_core::session::Outcome, SessionError>>,
) {
    serve(
        server_cfg(daemon, pinned, RailRequest::default()),
        ServerShared::new(),
    )
}

fn client(addr: SocketAddr) -> ControlChannel {
    ControlChannel::connect(addr, PhaseTimeouts::uniform(Duration::from_secs(5))).unwrap()
}

/// `base` as `f` changes it.
fn changed(mut base: TestParams, f: &dyn Fn(&mut TestParams)) -> TestParams {
    f(&mut base);
    base
}

/// A timed test: `duration_s` measured after `warmup_s`, no cool-down.
fn timed(duration_s: f64, warmup_s: f64) -> TestLength {
    TestLength::Duration {
        duration_s,
        warmup_s,
        cooldown_s: 0.0,
    }
}

/// The daemon at `addr` refuses each hello of `cases` as invalid, naming what it names, and
/// goes on serving the next.
fn assert_refused(addr: SocketAddr, cases: Vec<(TestParams, &str)>) {
    for (p, what) in cases {
        let e = client(addr)
            .client_handshake(&Hello::new(p, None, "pod-a"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("invalid hello") && e.contains(what),
            "{what}: {e}"
        );
    }
}

#[test]
fn a_pinned_parameter_that_differs_is_named_with_both_values() {
    let pinned = Pinned {
        qps: true,
        ..Pinned::default()
    };
    let (addr, h) = serve_any_rail(false, pinned);
    let mut ch = client(addr);
    let e = ch
        .client_handshake(&Hello::new(params(1), None, "pod-a"))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "server at {addr} rejected the test: parameter --qp/-q differs: the server has 2, \
             the client has 1"
        )
    );
    let server = h.join().unwrap().unwrap_err();
    assert!(server.is_setup(), "{server}");
}

#[test]
fn unpinned_parameters_follow_the_client() {
    // Nothing pinned: the client's -q 1 passes admission; the test then stops at device
    // opening (no RDMA here), which the client hears as a server set-up failure.
    let (addr, h) = serve_any_rail(false, Pinned::default());
    let mut ch = client(addr);
    let e = ch
        .client_handshake(&Hello::new(params(1), None, "pod-a"))
        .unwrap_err();
    match &e {
        ControlError::Rejected {
            reason: RejectReason::Other { message },
            ..
        } => assert!(message.starts_with("server set-up: "), "{message}"),
        other => panic!("{other}"),
    }
    let _ = h.join().unwrap().unwrap_err();
}

#[test]
fn the_client_names_the_server_rail_by_netdev() {
    // podB's net2 is rxe_b1; an unknown interface is refused with the server's own words.
    let (addr, h) = serve_any_rail(true, Pinned::default());
    let mut ch = client(addr);
    let hello = Hello::new(params(1), None, "pod-a").with_server_rail(Some("net9".into()), None);
    let e = ch.client_handshake(&hello).unwrap_err().to_string();
    assert!(
        e.contains("net9") && e.contains("maps to no RDMA device"),
        "{e}"
    );
    let _ = h.join().unwrap();

    // A known one gets past the rail choice and the claim (to device opening).
    let shared = ServerShared::new();
    let (addr, h) = serve(
        server_cfg(true, Pinned::default(), RailRequest::default()),
        shared.clone(),
    );
    let mut ch = client(addr);
    let hello = Hello::new(params(1), None, "pod-a").with_server_rail(Some("net2".into()), None);
    let e = ch.client_handshake(&hello).unwrap_err().to_string();
    assert!(e.contains("server set-up"), "{e}");
    let _ = h.join().unwrap();
    assert!(
        shared.claims.is_empty(),
        "the claim is released after the test"
    );
}

#[test]
fn a_server_pinned_to_a_device_refuses_another() {
    let rail = RailRequest {
        device: Some("rxe_b0".into()),
        ..RailRequest::default()
    };
    let (addr, h) = serve(
        server_cfg(false, Pinned::default(), rail),
        ServerShared::new(),
    );
    let mut ch = client(addr);
    let hello = Hello::new(params(1), Some("rxe_b1".into()), "pod-a");
    let e = ch.client_handshake(&hello).unwrap_err();
    assert!(
        e.to_string()
            .contains("the server has no device rxe_b1 (it serves: rxe_b0)"),
        "{e}"
    );
    match e {
        ControlError::Rejected {
            reason: RejectReason::UnknownDevice { device, available },
            ..
        } => {
            assert_eq!(device, "rxe_b1");
            assert_eq!(available, vec!["rxe_b0".to_string()]);
        }
        other => panic!("{other}"),
    }
    let _ = h.join().unwrap();
}

#[test]
fn a_busy_device_is_answered_busy_with_its_holder() {
    let claims = DeviceClaims::new();
    let _held = claims.try_claim("rxe_b0", "pod-x (10.0.0.9:4000)").unwrap();
    let (addr, h) = serve(
        server_cfg(true, Pinned::default(), RailRequest::default()),
        ServerShared::with_claims(claims),
    );
    let mut ch = client(addr);
    let hello = Hello::new(params(1), None, "pod-a").with_server_rail(Some("net1".into()), None);
    match ch.client_handshake(&hello).unwrap_err() {
        ControlError::Busy { device, by, .. } => {
            assert_eq!(device, "rxe_b0");
            assert_eq!(by, "pod-x (10.0.0.9:4000)");
        }
        other => panic!("{other}"),
    }
    let e = h.join().unwrap().unwrap_err();
    assert!(
        !e.is_setup(),
        "busy is a failed run, not a usage error: {e}"
    );
}

#[test]
fn a_perftest_client_older_than_perftest_talks_to_is_refused_by_version() {
    let (addr, h) = serve_any_rail(false, Pinned::default());
    let mut s = TcpStream::connect(addr).unwrap();
    // What ib_write_bw sends first: its version string, then its QP data as text.
    s.write_all(b"5.60\0\0\0\0\0\0").unwrap();
    s.write_all(
        b"0000:000011:001a2b:00000000:0000000000000000:0000:0000:0000:0000:0000:ffff:0ae0:0001",
    )
    .unwrap();
    let e = h.join().unwrap().unwrap_err();
    assert!(e.is_setup());
    assert!(
        e.to_string().contains("is perftest 5.60, older than 5.70"),
        "{e}"
    );
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
}

#[test]
fn a_silent_client_times_out_in_the_handshake() {
    let mut cfg = server_cfg(false, Pinned::default(), RailRequest::default());
    cfg.timeouts = PhaseTimeouts::uniform(Duration::from_millis(400));
    let (addr, h) = serve(cfg, ServerShared::new());
    let _s = TcpStream::connect(addr).unwrap();
    let t0 = Instant::now();
    let e = h.join().unwrap().unwrap_err();
    assert!(
        matches!(e, SessionError::Control(ControlError::Timeout { .. })),
        "{e:?}"
    );
    assert!(t0.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_daemon_serves_test_after_test_and_stops_on_request() {
    let d = daemon(server_cfg(true, Pinned::default(), RailRequest::default()));
    // A client that dies before its hello does not stop the daemon.
    drop(TcpStream::connect(d.addr).unwrap());
    for nd in ["net1", "net2", "net1"] {
        let mut ch = client(d.addr);
        let hello = Hello::new(params(1), None, "pod-a").with_server_rail(Some(nd.into()), None);
        let e = ch.client_handshake(&hello).unwrap_err().to_string();
        assert!(e.contains("server set-up"), "{nd}: {e}");
    }
    assert_eq!(d.stop_after(4).len(), 4);
}

/// A daemon serving on a thread: its address, its stop flag, whether each test it saw end was
/// ok, and its thread.
struct Running {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<bool>>>,
    thread: thread::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// Waits up to 10 s for `tests` tests to end, stops the daemon; whether each that ended
    /// was ok.
    fn stop_after(self, tests: usize) -> Vec<bool> {
        let t0 = Instant::now();
        while self.seen.lock().unwrap().len() < tests && t0.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(20));
        }
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap().unwrap();
        let seen = self.seen.lock().unwrap().clone();
        seen
    }
}

/// A daemon with `cfg` on a free port.
fn daemon(cfg: ServerConfig) -> Running {
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<Mutex<Vec<bool>>> = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let on_test: OnTest = Arc::new(move |_, r| seen2.lock().unwrap().push(r.is_ok()));
    let stop2 = Arc::clone(&stop);
    let thread = thread::spawn(move || Daemon::new(cfg).run(&listener, &stop2, &quiet(), &on_test));
    Running {
        addr,
        stop,
        seen,
        thread,
    }
}

#[test]
fn a_daemon_with_a_secret_refuses_other_runs_by_name_and_goes_on_serving() {
    let mut cfg = server_cfg(true, Pinned::default(), RailRequest::default());
    cfg.secret = RunSecret::new("run-4f2a");
    let d = daemon(cfg);
    let addr = d.addr;
    let hello = || Hello::new(params(1), None, "pod-x").with_server_rail(Some("net1".into()), None);
    for (presented, secret) in [(false, None), (true, RunSecret::new("run-0000"))] {
        let e = client(addr)
            .client_handshake(&hello().with_secret(secret))
            .unwrap_err();
        assert!(
            matches!(&e, ControlError::Rejected { reason: RejectReason::NotThisRun { presented: p }, .. } if *p == presented),
            "{e}"
        );
        let text = e.to_string();
        assert!(
            text.contains("serves only the run that started it"),
            "{text}"
        );
        assert!(!text.contains("run-4f2a"), "the secret leaked: {text}");
    }
    // The run's own client passes admission (and stops at device opening: no RDMA here).
    let e = client(addr)
        .client_handshake(&hello().with_secret(RunSecret::new("run-4f2a")))
        .unwrap_err()
        .to_string();
    assert!(e.contains("server set-up"), "{e}");
    assert_eq!(d.stop_after(3), vec![false, false, false]);
}

#[test]
fn a_daemon_refuses_a_test_beyond_its_limits_naming_the_flag() {
    let mut cfg = server_cfg(true, Pinned::default(), RailRequest::default());
    cfg.limits = ServerLimits {
        max_qps: 4,
        max_buffer_bytes: 1 << 20,
        max_tests: 1,
    };
    let d = daemon(cfg);
    let addr = d.addr;
    let e = client(addr)
        .client_handshake(&Hello::new(params(8), None, "pod-a"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("at most 4 queue pairs per test (-q) and this test needs 8")
            && e.contains("--max-qps 8"),
        "{e}"
    );
    let mut big = params(1);
    big.sizes = Sizes::One {
        msg_size_bytes: 1 << 20,
    };
    let e = client(addr)
        .client_handshake(&Hello::new(big, None, "pod-a"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("--max-buffer 2097152"), "{e}");
    // A connection that has not said anything is not a test: it does not hold the only
    // slot (issue 31, finding 2), and the next client goes on to the device (and stops at its
    // opening: no RDMA here).
    let holder = TcpStream::connect(addr).unwrap();
    thread::sleep(Duration::from_millis(300));
    let e = client(addr)
        .client_handshake(&Hello::new(params(1), None, "pod-b"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("server set-up"), "{e}");
    drop(holder);
    // The two refused by their parameters, the holder (never admitted) and the last client
    // all ended.
    assert_eq!(d.stop_after(4), vec![false; 4]);
}

/// A hello as `hello` is, sent raw after `edit` changed its JSON (values the typed API would
/// never build); the server's answer.
fn raw_hello(addr: SocketAddr, edit: impl FnOnce(&mut serde_json::Value)) -> ControlError {
    let mut v = serde_json::to_value(bench_core::control::Msg::Hello(Hello::new(
        params(1),
        None,
        "pod-raw",
    )))
    .unwrap();
    edit(&mut v);
    let json = serde_json::to_vec(&v).unwrap();
    let mut frame = bench_core::control::MAGIC.to_vec();
    frame.extend_from_slice(&bench_core::control::PROTOCOL_VERSION.to_be_bytes());
    frame.extend_from_slice(&(json.len() as u32).to_be_bytes());
    frame.extend_from_slice(&json);
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&frame).unwrap();
    let mut ch = ControlChannel::from_stream(s)
        .unwrap()
        .with_timeouts(PhaseTimeouts::uniform(Duration::from_secs(5)));
    ch.expect_accept().unwrap_err()
}

#[test]
fn a_daemon_refuses_values_out_of_bounds_before_using_them_and_goes_on_serving() {
    let d = daemon(server_cfg(true, Pinned::default(), RailRequest::default()));
    let addr = d.addr;
    let with = |f: &dyn Fn(&mut TestParams)| changed(params(1), f);
    // A sweep to 2^64-1 made the daemon's size list grow without end (it aborted), and
    // sizes near 2^63 wrapped the buffer's size below --max-buffer.
    let cases: Vec<(TestParams, &str)> = vec![
        (
            with(&|p| {
                p.sizes = Sizes::Sweep {
                    max_bytes: u64::MAX,
                }
            }),
            "--all/-a",
        ),
        (
            with(&|p| {
                p.sizes = Sizes::One {
                    msg_size_bytes: (1 << 63) + 1,
                }
            }),
            "--size/-s",
        ),
        (with(&|p| p.qps = 0), "--qp/-q 0"),
        (
            with(&|p| p.length = TestLength::Iterations { iterations: 0 }),
            "--iters/-n 0",
        ),
        (with(&|p| p.length = timed(-5.0, 0.0)), "--duration/-D -5"),
        (with(&|p| p.length = timed(1e300, 0.0)), "--duration/-D"),
    ];
    assert_refused(addr, cases);
    // A device name is one path component under sysfs, never a path.
    for name in ["/etc", "..", "", "mlx5_0/../../etc", "a\nb"] {
        let e = client(addr)
            .client_handshake(&Hello::new(params(1), Some(name.into()), "pod-a"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a device name"), "{name:?}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
    let e = client(addr)
        .client_handshake(
            &Hello::new(params(1), None, "pod-a").with_server_rail(Some("../net1".into()), None),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--server-netdev") && e.contains("not a device name"),
        "{e}"
    );
    // Values no typed client sends (a negative QP count, a duration that is a string) are a
    // malformed hello: refused, and the daemon goes on.
    let e = raw_hello(addr, |v| v["params"]["qps"] = serde_json::json!(-1));
    assert!(!matches!(e, ControlError::Timeout { .. }), "{e:?}");
    let e = raw_hello(addr, |v| {
        v["params"]["sizes"] = serde_json::json!({"sweep": {"max_bytes": "inf"}})
    });
    assert!(!matches!(e, ControlError::Timeout { .. }), "{e:?}");
    // After all that, a good client is still served (up to device opening: no RDMA here).
    let e = client(addr)
        .client_handshake(
            &Hello::new(params(1), None, "pod-a").with_server_rail(Some("net1".into()), None),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("server set-up"), "{e}");
}

#[test]
fn silent_connections_and_refused_hellos_do_not_lock_out_the_secret_holder() {
    let mut cfg = server_cfg(true, Pinned::default(), RailRequest::default());
    cfg.secret = RunSecret::new("run-4f2a");
    cfg.limits.max_tests = 1;
    let d = daemon(cfg);
    let addr = d.addr;
    // 200 silent connections from 127.0.0.1, and refused hellos from there on a loop.
    let silent: Vec<TcpStream> = (0..200)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    let flooding = Arc::new(AtomicBool::new(true));
    let flooding2 = Arc::clone(&flooding);
    let flood = thread::spawn(move || {
        let mut sent = 0u32;
        while flooding2.load(std::sync::atomic::Ordering::Relaxed) {
            let hello = Hello::new(params(1), None, "x".repeat(100_000))
                .with_secret(RunSecret::new("not-the-run"));
            if let Ok(mut ch) =
                ControlChannel::connect(addr, PhaseTimeouts::uniform(Duration::from_secs(2)))
            {
                let _ = ch.client_handshake(&hello);
                sent += 1;
            }
        }
        sent
    });
    thread::sleep(Duration::from_millis(300));
    // The run's client, from another address of the loopback network.
    let t0 = Instant::now();
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into())
        .unwrap();
    sock.connect(&addr.into()).unwrap();
    let mut ch = ControlChannel::from_stream(sock.into())
        .unwrap()
        .with_timeouts(PhaseTimeouts::uniform(Duration::from_secs(5)));
    let hello = Hello::new(params(1), None, "pod-run")
        .with_server_rail(Some("net1".into()), None)
        .with_secret(RunSecret::new("run-4f2a"));
    let e = ch.client_handshake(&hello).unwrap_err().to_string();
    let took = t0.elapsed();
    flooding.store(false, std::sync::atomic::Ordering::Relaxed);
    let sent = flood.join().unwrap();
    drop(silent);
    assert!(e.contains("server set-up"), "admitted, then no RDMA: {e}");
    assert!(took < Duration::from_secs(1), "admitted after {took:?}");
    assert!(sent > 0);
    eprintln!("admitted in {took:?} under 200 silent connections and {sent} refused hellos");
    d.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    d.thread.join().unwrap().unwrap();
}

/// What a one-test server's thread gives back.
type Served = std::io::Result<Option<Result<bench_core::session::Outcome, SessionError>>>;

/// A one-test server (`serve_first`) serving on a thread: its address, its stop flag, the
/// lines it logs, and its thread.
struct OneTestServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    lines: Arc<Mutex<Vec<String>>>,
    thread: thread::JoinHandle<Served>,
}

/// A one-test server with `cfg` on a free port.
fn one_test_server(cfg: ServerConfig) -> OneTestServer {
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let lines2 = Arc::clone(&lines);
    let log: bench_core::session::Log =
        Arc::new(move |l: &str| lines2.lock().unwrap().push(l.into()));
    let server = thread::spawn(move || {
        bench_core::session::serve_first(&cfg, &listener, &ServerShared::new(), &stop2, &log)
    });
    OneTestServer {
        addr,
        stop,
        lines,
        thread: server,
    }
}

#[test]
fn a_one_test_server_is_not_ended_by_garbage_or_another_runs_secret() {
    let mut cfg = server_cfg(false, Pinned::default(), RailRequest::default());
    cfg.secret = RunSecret::new("run-4f2a");
    cfg.rail = RailRequest {
        netdev: Some("net1".into()),
        ..RailRequest::default()
    };
    let server = one_test_server(cfg);
    // Garbage, a connection closed at once, and another run's secret.
    let mut g = TcpStream::connect(server.addr).unwrap();
    g.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut sink = Vec::new();
    let _ = g.read_to_end(&mut sink);
    drop(TcpStream::connect(server.addr).unwrap());
    let e = client(server.addr)
        .client_handshake(
            &Hello::new(params(2), None, "pod-x").with_secret(RunSecret::new("run-0000")),
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            ControlError::Rejected {
                reason: RejectReason::NotThisRun { .. },
                ..
            }
        ),
        "{e}"
    );
    thread::sleep(Duration::from_millis(200));
    assert!(
        !server.thread.is_finished(),
        "the server ended on a connection that was not its client"
    );
    // Noted by address and in this side's words: the one that spoke no rdmabw as perhaps
    // perftest, the others as sending no admissible hello; nothing they sent.
    let noted = server.lines.lock().unwrap().clone();
    assert_eq!(noted.len(), 3, "{noted:?}");
    assert!(
        noted[0].contains("speaks neither rdmabw's control protocol nor perftest's"),
        "{noted:?}"
    );
    assert!(
        noted[1..]
            .iter()
            .all(|l| l.contains("sent no admissible hello")),
        "{noted:?}"
    );
    assert!(
        !noted
            .iter()
            .any(|l| l.contains("GET") || l.contains("pod-x")),
        "{noted:?}"
    );
    // Its client is served (and stops at device opening: no RDMA here).
    let e = client(server.addr)
        .client_handshake(
            &Hello::new(params(2), None, "pod-run").with_secret(RunSecret::new("run-4f2a")),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("server set-up"), "{e}");
    let served = server.thread.join().unwrap().unwrap();
    assert!(matches!(served, Some(Err(_))), "{served:?}");
    server
        .stop
        .store(true, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn a_named_device_reads_only_that_device() {
    let roots = fixture("rxe-pods/podA");
    let req = RailRequest {
        device: Some("rxe_a1".into()),
        ..RailRequest::default()
    };
    let inv = inventory_for(&roots, &req).unwrap();
    assert_eq!(inv.device_names(), vec!["rxe_a1".to_string()]);
    let e = inventory_for(
        &roots,
        &RailRequest {
            device: Some("nosuch".into()),
            ..RailRequest::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("nosuch") && e.contains("rxe_a0"), "{e}");
    let all = inventory_for(&roots, &RailRequest::default()).unwrap();
    assert!(all.devices.len() >= 4);
}

/// A perftest client's opening: its plain version message, then silence (perftest waits for
/// the server's version).
fn perftest_client(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"6.24\0\0\0\0\0\0\0\0\0\0\0\0").unwrap();
    s
}

#[test]
fn a_server_with_a_secret_or_peer_rdmabw_refuses_perftest_in_words() {
    for (secret, peer, why) in [
        (
            RunSecret::new("run-0000"),
            bench_core::session::PeerChoice::Auto,
            "perftest cannot present its secret",
        ),
        (
            None,
            bench_core::session::PeerChoice::Rdmabw,
            "this server was started with --peer rdmabw",
        ),
    ] {
        let mut cfg = server_cfg(true, Pinned::default(), RailRequest::default());
        cfg.secret = secret;
        cfg.peer = peer;
        let (addr, h) = serve(cfg, ServerShared::new());
        let mut c = perftest_client(addr);
        let e = h.join().unwrap().unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("a perftest 6.24 client is refused") && text.contains(why),
            "{text}"
        );
        // perftest sees the connection close, at once.
        let mut b = [0u8; 16];
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(c.read(&mut b).unwrap_or(0), 0);
    }
}

#[test]
fn a_perftest_client_is_served_with_the_servers_own_flags() {
    // No RDMA here: the server takes the perftest client (it logs so) and stops at opening the
    // device, a set-up error, before answering perftest's version.
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let cfg = server_cfg(false, Pinned::default(), RailRequest::default());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let log_lines = Arc::clone(&lines);
    let h = thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let log: bench_core::session::Log =
            Arc::new(move |m: &str| log_lines.lock().unwrap().push(m.to_string()));
        serve_one(
            &cfg,
            s,
            &ServerShared::new(),
            &Arc::new(AtomicBool::new(false)),
            &log,
        )
    });
    let _c = perftest_client(addr);
    let e = h.join().unwrap().unwrap_err();
    assert!(e.is_setup(), "{e}");
    let noted = lines.lock().unwrap().clone();
    assert!(
        noted
            .iter()
            .any(|l| l.contains("test from perftest 6.24 (ib_write_bw)")),
        "{noted:?}"
    );
}

/// Silent connections held open from `sources` (round robin), `n` in all, each bound to its
/// source address (127.0.0.x works on Linux's loopback).
fn silent_from(addr: SocketAddr, sources: &[[u8; 4]], n: usize) -> Vec<TcpStream> {
    (0..n)
        .filter_map(|i| connect_from(addr, sources[i % sources.len()]).ok())
        .collect()
}

/// A TCP connection to `addr` from `from`.
fn connect_from(addr: SocketAddr, from: [u8; 4]) -> std::io::Result<TcpStream> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    sock.bind(&SocketAddr::from((from, 0)).into())?;
    sock.connect_timeout(&addr.into(), Duration::from_secs(2))?;
    Ok(sock.into())
}

/// The run's client as rdmabw's is, from `from`: its opening (perftest's version message,
/// marked as rdmabw's), then its hello with the run's secret. How long it took until the
/// server's answer, and the answer (admitted, then no RDMA here: a server set-up failure).
fn secret_holder(
    addr: SocketAddr,
    from: [u8; 4],
    secret: &str,
    netdev: &str,
) -> (Duration, String) {
    let t0 = Instant::now();
    let answer = (|| -> Result<(), String> {
        let s = connect_from(addr, from).map_err(|e| format!("connect: {e}"))?;
        let mut ch = ControlChannel::from_stream(s)
            .map_err(|e| e.to_string())?
            .with_timeouts(PhaseTimeouts::uniform(Duration::from_secs(5)));
        ch.client_opening(false).map_err(|e| e.to_string())?;
        let hello = Hello::new(params(2), None, "pod-run")
            .with_server_rail(Some(netdev.into()), None)
            .with_secret(RunSecret::new(secret));
        ch.client_handshake(&hello)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })();
    (
        t0.elapsed(),
        answer.err().unwrap_or_else(|| "accepted".into()),
    )
}

/// Keeps opening silent connections from `from` (the oldest dropped beyond `hold`), as an
/// attacker recycles the sockets the server closes, until `go` is lowered (at most 30 s).
fn recycler(
    addr: SocketAddr,
    from: [u8; 4],
    hold: usize,
    go: Arc<AtomicBool>,
) -> thread::JoinHandle<u32> {
    thread::spawn(move || {
        let mut held = std::collections::VecDeque::new();
        let mut opened = 0u32;
        let t0 = Instant::now();
        while go.load(std::sync::atomic::Ordering::Relaxed)
            && t0.elapsed() < Duration::from_secs(30)
        {
            if let Ok(s) = connect_from(addr, from) {
                held.push_back(s);
                opened += 1;
            }
            if held.len() > hold {
                held.pop_front();
            }
            thread::sleep(Duration::from_millis(2));
        }
        opened
    })
}

/// 25 loopback addresses other than the client's (127.0.0.2 to 127.0.0.26).
fn other_sources() -> Vec<[u8; 4]> {
    (2..=26).map(|i| [127, 0, 0, i]).collect()
}

/// Issue 53, finding 1: the admission figures. Five clients in turn, each while 200 silent
/// connections from `sources` are held and an attacker on the client's own address recycles
/// 8 more; each must be admitted within a second. Returns the times.
fn admitted_under_silence(addr: SocketAddr, sources: &[[u8; 4]], what: &str) -> Vec<Duration> {
    let silent = silent_from(addr, sources, 200);
    assert!(silent.len() >= 190, "{} silent connections", silent.len());
    let go = Arc::new(AtomicBool::new(true));
    let recycling = recycler(addr, [127, 0, 0, 1], 8, Arc::clone(&go));
    thread::sleep(Duration::from_millis(300));
    let mut took = Vec::new();
    for i in 0..5 {
        // Admitted, the test stops at device opening (no RDMA here); or, when the previous
        // client's test still holds its device for a moment, busy: both are answered only
        // after admission.
        let netdev = ["net1", "net2"][i % 2];
        let (t, answer) = secret_holder(addr, [127, 0, 0, 1], "run-4f2a", netdev);
        assert!(
            answer.contains("server set-up") || answer.contains("is busy: device"),
            "{what}: not admitted after {t:?}: {answer}"
        );
        took.push(t);
    }
    go.store(false, std::sync::atomic::Ordering::Relaxed);
    let recycled = recycling.join().unwrap();
    drop(silent);
    eprintln!(
        "{what}: admitted in {took:?} (max {:?}) under 200 silent connections and {recycled} \
         recycled from the client's own address",
        took.iter().max().unwrap()
    );
    for t in &took {
        assert!(*t < Duration::from_secs(1), "{what}: admitted after {t:?}");
    }
    took
}

/// [`admitted_under_silence`] against a daemon with a run secret, stopped after.
fn daemon_admits_under_silence(sources: &[[u8; 4]], what: &str) {
    let mut cfg = server_cfg(true, Pinned::default(), RailRequest::default());
    cfg.secret = RunSecret::new("run-4f2a");
    let d = daemon(cfg);
    admitted_under_silence(d.addr, sources, what);
    d.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    d.thread.join().unwrap().unwrap();
}

#[test]
fn a_daemon_admits_its_client_within_a_second_under_silent_connections_from_its_own_address() {
    daemon_admits_under_silence(&[[127, 0, 0, 1]], "daemon, 200 silent from 127.0.0.1");
}

#[test]
fn a_daemon_admits_its_client_within_a_second_under_silent_connections_from_25_addresses() {
    daemon_admits_under_silence(&other_sources(), "daemon, 200 silent from 25 addresses");
}

#[test]
fn a_one_test_server_admits_its_client_within_a_second_under_silent_connections() {
    for (sources, what) in [
        (
            vec![[127, 0, 0, 1]],
            "one-test server, 200 silent from 127.0.0.1",
        ),
        (
            other_sources(),
            "one-test server, 200 silent from 25 addresses",
        ),
    ] {
        let mut cfg = server_cfg(false, Pinned::default(), RailRequest::default());
        cfg.secret = RunSecret::new("run-4f2a");
        cfg.rail = RailRequest {
            netdev: Some("net1".into()),
            ..RailRequest::default()
        };
        // The default handshake timeout, as `rdmabw server` has it: 10 s for each hello.
        cfg.timeouts = PhaseTimeouts::default();
        let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let server = thread::spawn(move || {
            bench_core::session::serve_first(
                &cfg,
                &listener,
                &ServerShared::new(),
                &stop2,
                &quiet(),
            )
        });
        let silent = silent_from(addr, &sources, 200);
        thread::sleep(Duration::from_millis(300));
        let (took, answer) = secret_holder(addr, [127, 0, 0, 1], "run-4f2a", "net1");
        eprintln!("{what}: admitted in {took:?}");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        drop(silent);
        assert!(
            answer.contains("server set-up"),
            "{what}: after {took:?}: {answer}"
        );
        assert!(
            took < Duration::from_secs(1),
            "{what}: admitted after {took:?}"
        );
        // It served its one test (set-up failed: no RDMA here) and ended.
        let served = server.join().unwrap().unwrap();
        assert!(matches!(served, Some(Err(_))), "{served:?}");
    }
}

/// Issue 53, finding 2: a latency hello is admitted exactly as `rdmabw lat`'s command line
/// takes its flags; what the command line refuses, the daemon refuses before any use, naming
/// the flag, and goes on serving.
#[test]
fn a_daemon_refuses_the_latency_tests_that_rdmabw_lat_refuses() {
    let d = daemon(server_cfg(true, Pinned::default(), RailRequest::default()));
    let addr = d.addr;
    let lat = |f: &dyn Fn(&mut TestParams)| {
        changed(
            TestParams::write_lat(
                Sizes::One { msg_size_bytes: 2 },
                TestLength::Iterations { iterations: 1000 },
            ),
            f,
        )
    };
    let week = timed(wire::params::MAX_SECONDS, 0.0);
    let cases: Vec<(TestParams, &str)> = vec![
        (lat(&|p| p.qps = 64), "-q 64"),
        (lat(&|p| p.bidirectional = true), "-b/--bidirectional"),
        (
            lat(&|p| p.length = TestLength::Iterations { iterations: 1 }),
            "-n/--iters 1",
        ),
        (
            lat(&|p| {
                p.sizes = Sizes::Sweep { max_bytes: 1 << 23 };
                p.length = week;
            }),
            "-a with -D",
        ),
        (lat(&|p| p.data_validation = true), "--data_validation"),
        (
            lat(&|p| {
                p.run_infinitely = true;
                p.length = timed(5.0, 0.05);
            }),
            "--run_infinitely",
        ),
    ];
    assert_refused(addr, cases);
    // What `rdmabw lat` takes is admitted (and stops at device opening: no RDMA here),
    // -n 2^64-1 included: its samples are bounded, not refused.
    for p in [
        lat(&|_| {}),
        lat(&|p| {
            p.length = TestLength::Iterations {
                iterations: u64::MAX,
            }
        }),
        lat(&|p| p.sizes = Sizes::Sweep { max_bytes: 1 << 23 }),
    ] {
        let e = client(addr)
            .client_handshake(
                &Hello::new(p, None, "pod-a").with_server_rail(Some("net1".into()), None),
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("server set-up"), "{e}");
        thread::sleep(Duration::from_millis(100));
    }
}

/// perftest's client as it really opens: connected, then `ib_write_bw`'s one-second sleep (and
/// a busy host's lateness on top of it) before its version message.
fn perftest_client_after_its_pause(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    thread::sleep(bench_core::perftest::CONNECT_PAUSE + Duration::from_millis(800));
    s.write_all(b"6.24\0\0\0\0\0\0\0\0\0\0\0\0").unwrap();
    s
}

#[test]
fn a_perftest_client_that_pauses_after_connecting_is_admitted_by_both_servers() {
    // The one-test server: it takes the client (and stops at device opening: no RDMA here).
    // Dropped as silent, it would note the connection and go on waiting instead.
    let cfg = server_cfg(false, Pinned::default(), RailRequest::default());
    let server = one_test_server(cfg);
    let _c = perftest_client_after_its_pause(server.addr);
    let t0 = Instant::now();
    while !server.thread.is_finished() && t0.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(20));
    }
    server
        .stop
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let served = server.thread.join().unwrap().unwrap();
    let noted = server.lines.lock().unwrap().clone();
    assert!(
        matches!(&served, Some(Err(e)) if e.is_setup()),
        "{served:?} {noted:?}"
    );
    assert!(
        noted
            .iter()
            .any(|l| l.contains("test from perftest 6.24 (ib_write_bw)")),
        "{noted:?}"
    );
    // The daemon: the client's test is one it saw end (set-up failed: no RDMA here).
    let d = daemon(server_cfg(true, Pinned::default(), RailRequest::default()));
    let _c = perftest_client_after_its_pause(d.addr);
    assert_eq!(d.stop_after(1), [false]);
}
