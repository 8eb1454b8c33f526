//! The control channel over loopback TCP: the message ladder, every framing failure, phase
//! timeouts, peer death during the measured window. (The daemon's admission rules are tested
//! through `serve_one` in tests/session.rs.)
//!
//! Timing assertions only bound how late a failure is noticed, relative to the configured
//! timeout (at most 5x): they hold on a loaded 2-core machine.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use bench_core::control::samples::{accept as accept_msg, every_variant, params, result};
use bench_core::control::*;

const SHORT: Duration = Duration::from_millis(300);

fn endpoints(n: usize, seed: u32) -> Endpoints {
    Endpoints {
        gid_index: None,
        netdev: None,
        device: format!("mlx5_{seed}"),
        port: 1,
        max_msg_bytes: 65536,
        qps: (0..n as u32)
            .map(|i| QpEndpoint {
                qpn: seed + i,
                psn: (seed * 7 + i) & 0xff_ffff,
                gid: parse_gid("::ffff:10.0.0.1").unwrap(),
                lid: 0,
            })
            .collect(),
        mr: MrInfo {
            addr: 0x7f00_0000_0000 + u64::from(seed),
            len: 1 << 20,
            rkey: seed ^ 0xabcd,
        },
        mtu_bytes: 4096,
    }
}

fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// A connected pair of control channels (client, server).
fn pair(timeouts: PhaseTimeouts) -> (ControlChannel, ControlChannel) {
    let (l, addr) = listener();
    let client = thread::spawn(move || ControlChannel::connect(addr, timeouts).unwrap());
    let (s, _) = l.accept().unwrap();
    let server = ControlChannel::from_stream(s)
        .unwrap()
        .with_timeouts(timeouts);
    (client.join().unwrap(), server)
}

/// A channel whose peer is a raw socket the test drives byte by byte.
fn raw_peer(timeouts: PhaseTimeouts) -> (ControlChannel, TcpStream) {
    let (l, addr) = listener();
    let raw = TcpStream::connect(addr).unwrap();
    let (s, _) = l.accept().unwrap();
    (
        ControlChannel::from_stream(s)
            .unwrap()
            .with_timeouts(timeouts),
        raw,
    )
}

fn header(version: u16, len: u32) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend_from_slice(&version.to_be_bytes());
    h.extend_from_slice(&len.to_be_bytes());
    h
}

fn fast_watch() -> WatchConfig {
    WatchConfig {
        heartbeat_every: Duration::from_millis(100),
        silence_limit: Duration::from_millis(800),
        busy_limit: Duration::from_millis(2400),
        poll_every: Duration::from_millis(20),
        write_timeout: Duration::from_secs(1),
    }
}

/// Polls like the engine's write loop would, until the flag flips; returns how long after
/// `start` it flipped. A test that bounds the time from below takes `start` before it starts
/// the watch, whose clock starts in its own thread: never earlier than `start`.
fn spin_until_peer_fails(alive: &PeerAlive, start: Instant, limit: Duration) -> Duration {
    while alive.is_ok() {
        assert!(
            start.elapsed() < limit,
            "peer failure not noticed within {limit:?}"
        );
        thread::sleep(Duration::from_millis(1));
    }
    start.elapsed()
}

#[test]
fn every_message_variant_crosses_a_real_socket() {
    let (mut client, mut server) = pair(PhaseTimeouts::uniform(Duration::from_secs(10)));
    let all = every_variant();
    for m in &all {
        client.send(m).unwrap();
    }
    for m in &all {
        assert_eq!(&server.recv(Phase::Handshake).unwrap(), m);
    }
    // And back, interleaved.
    for m in &all {
        server.send(m).unwrap();
        assert_eq!(&client.recv(Phase::Results).unwrap(), m);
    }
}

/// The whole ladder, server and client as separate threads.
#[test]
fn full_test_ladder_with_heartbeats_and_results_both_ways() {
    let (l, addr) = listener();
    let claims = DeviceClaims::new();
    let server_claims = claims.clone();
    let server = thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut ch = ControlChannel::from_stream(s).unwrap();
        // Admission as a daemon does it (its refusals: tests/session.rs): the hello, then the
        // claim of the device it names.
        let hello = ch.expect_hello().unwrap();
        let device = hello.device.clone().unwrap();
        let by = format!("{} ({})", hello.client_host, ch.peer_addr());
        let claim = server_claims.try_claim(&device, &by).unwrap();
        assert_eq!(device, "mlx5_1");
        assert_eq!(claim.device(), "mlx5_1");
        assert_eq!(hello.client_host, "pod-client-0");
        assert!(server_claims
            .holder("mlx5_1")
            .unwrap()
            .by
            .starts_with("pod-client-0 ("));
        ch.set_timeouts(PhaseTimeouts::default().with_measure_for(&hello.params));
        ch.send(&Msg::Accept(accept_msg(&device))).unwrap();
        let theirs = ch.exchange_endpoints(&endpoints(4, 900)).unwrap();
        assert_eq!(theirs, endpoints(4, 100));
        ch.sync_ready().unwrap();
        let watch = ch.watch(fast_watch()).unwrap();
        watch.wait_peer_done(Duration::from_secs(20)).unwrap();
        assert!(matches!(watch.status(), PeerStatus::Finished { .. }));
        let mut ch = watch.finish().unwrap();
        let client_results = ch.expect_done(Phase::Results).unwrap().0;
        ch.send(&Msg::Done {
            results: vec![],
            counters: None,
        })
        .unwrap();
        ch.close();
        drop(claim);
        client_results
    });

    let mut ch = ControlChannel::connect(addr, PhaseTimeouts::default()).unwrap();
    let accept = ch
        .client_handshake(&Hello::new(params(), Some("mlx5_1".into()), "pod-client-0"))
        .unwrap();
    assert_eq!(accept, accept_msg("mlx5_1"));
    let theirs = ch.exchange_endpoints(&endpoints(4, 100)).unwrap();
    assert_eq!(theirs, endpoints(4, 900));
    ch.sync_ready().unwrap();
    let watch = ch.watch(fast_watch()).unwrap();
    let alive = watch.alive();
    // The "measured window": longer than the silence limit, so heartbeats must be flowing.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1200) {
        assert!(alive.is_ok(), "{:?}", watch.status());
        thread::sleep(Duration::from_millis(5));
    }
    match watch.status() {
        PeerStatus::Alive {
            peer_elapsed_ms, ..
        } => assert!(peer_elapsed_ms.unwrap() > 0),
        other => panic!("{other:?}"),
    }
    let mut ch = watch.finish().unwrap();
    let ours = vec![result(65536)];
    ch.send(&Msg::Done {
        results: ours.clone(),
        counters: None,
    })
    .unwrap();
    assert_eq!(ch.expect_done(Phase::Results).unwrap().0, vec![]);
    ch.close();
    assert_eq!(server.join().unwrap(), ours);
    assert!(claims.is_empty(), "the device is free again");
}

#[test]
fn silent_peer_times_out_the_handshake_within_the_phase_timeout() {
    let t = PhaseTimeouts {
        handshake: SHORT,
        ..PhaseTimeouts::default()
    };
    let (mut server, _raw) = raw_peer(t);
    let start = Instant::now();
    let err = server.expect_hello().unwrap_err();
    let took = start.elapsed();
    match err {
        ControlError::Timeout { phase, after, .. } => {
            assert_eq!(phase, Phase::Handshake);
            assert_eq!(after, SHORT);
        }
        other => panic!("{other:?}"),
    }
    assert!(took >= SHORT, "{took:?}");
    assert!(took < SHORT * 5, "{took:?}");
}

#[test]
fn a_trickling_peer_does_not_extend_the_deadline() {
    let t = PhaseTimeouts::uniform(SHORT);
    let (mut server, mut raw) = raw_peer(t);
    let frame = encode_frame(&Msg::Hello(Hello::new(params(), None, "slow"))).unwrap();
    let dripper = thread::spawn(move || {
        for b in frame {
            if raw.write_all(&[b]).is_err() {
                break;
            }
            thread::sleep(Duration::from_millis(30));
        }
    });
    let start = Instant::now();
    let err = server.expect_hello().unwrap_err();
    assert!(matches!(err, ControlError::Timeout { .. }), "{err:?}");
    assert!(start.elapsed() < SHORT * 5, "{:?}", start.elapsed());
    drop(server);
    dripper.join().unwrap();
}

#[test]
fn server_that_never_answers_times_out_the_client() {
    let (l, addr) = listener();
    let t = PhaseTimeouts {
        handshake: SHORT,
        ..PhaseTimeouts::default()
    };
    let mut client = ControlChannel::connect(addr, t).unwrap();
    let (_held, _) = l.accept().unwrap();
    let start = Instant::now();
    let err = client
        .client_handshake(&Hello::new(params(), None, "c"))
        .unwrap_err();
    assert!(
        matches!(
            err,
            ControlError::Timeout {
                phase: Phase::Handshake,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(start.elapsed() < SHORT * 5);
    assert!(err.to_string().contains("handshake"), "{err}");
}

#[test]
fn truncated_frame_then_close_is_named() {
    let (mut ch, mut raw) = raw_peer(PhaseTimeouts::uniform(Duration::from_secs(5)));
    let frame = encode_frame(&Msg::Ready).unwrap();
    raw.write_all(&frame[..frame.len() - 3]).unwrap();
    drop(raw);
    match ch.recv(Phase::Ready).unwrap_err() {
        ControlError::Truncated {
            got, needed, phase, ..
        } => {
            assert_eq!(got, frame.len() - 3);
            assert_eq!(needed, frame.len());
            assert_eq!(phase, Phase::Ready);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn oversized_frame_is_rejected_from_its_header_without_waiting_for_the_payload() {
    let (mut ch, mut raw) = raw_peer(PhaseTimeouts::uniform(Duration::from_secs(5)));
    // The peer stays connected and sends no payload: waiting for it would time out.
    raw.write_all(&header(PROTOCOL_VERSION, MAX_FRAME_BYTES + 1))
        .unwrap();
    let start = Instant::now();
    let err = ch.recv(Phase::Exchange).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(2));
    match &err {
        ControlError::Oversized { len, cap, .. } => {
            assert_eq!(*len, u64::from(MAX_FRAME_BYTES) + 1);
            assert_eq!(*cap, MAX_FRAME_BYTES);
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("1048577") && text.contains("1048576"),
        "{text}"
    );
}

#[test]
fn perftest_on_the_other_end_is_named() {
    let (mut client, mut raw) = raw_peer(PhaseTimeouts::uniform(Duration::from_secs(5)));
    let peer = client.peer_addr();
    // What perftest's ib_write_bw sends over its TCP exchange: ASCII hex fields.
    raw.write_all(b"0000:000a2b:6c3d5e:00000000:00000000:0000:0000:0000:0000:ffff:0a00:0001")
        .unwrap();
    let err = client.expect_accept().unwrap_err();
    assert!(matches!(err, ControlError::NotRdmabw { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "peer at {peer} speaks neither rdmabw's control protocol nor perftest's: it sent"
        )),
        "{text}"
    );
}

#[test]
fn newer_peer_gets_a_version_error_both_ways() {
    let (mut server, mut raw) = raw_peer(PhaseTimeouts::uniform(Duration::from_secs(5)));
    let payload = br#"{"type":"hello","from_the_future":true}"#;
    let mut f = header(PROTOCOL_VERSION + 1, payload.len() as u32);
    f.extend_from_slice(payload);
    raw.write_all(&f).unwrap();
    let err = server.expect_hello().unwrap_err();
    match &err {
        ControlError::VersionMismatch { ours, theirs, .. } => {
            assert_eq!(*ours, PROTOCOL_VERSION);
            assert_eq!(*theirs, PROTOCOL_VERSION + 1);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string().contains("upgrade rdmabw on this side"),
        "{err}"
    );
    // The (newer) peer got an answer in our version, so its own decoder names the mismatch.
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut h = [0u8; HEADER_LEN];
    raw.read_exact(&mut h).unwrap();
    assert_eq!(&h[..4], &MAGIC);
    assert_eq!(u16::from_be_bytes([h[4], h[5]]), PROTOCOL_VERSION);
}

#[test]
fn malformed_json_carries_the_serde_text() {
    let (mut ch, mut raw) = raw_peer(PhaseTimeouts::uniform(Duration::from_secs(5)));
    let payload = br#"{"type":"heartbeat","elapsed_ms":"soon"}"#;
    let mut f = header(PROTOCOL_VERSION, payload.len() as u32);
    f.extend_from_slice(payload);
    raw.write_all(&f).unwrap();
    match ch.recv(Phase::Measure).unwrap_err() {
        ControlError::Malformed { detail, phase, .. } => {
            assert_eq!(phase, Phase::Measure);
            assert!(detail.contains("invalid type"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn peer_closing_or_reporting_an_error_is_told_apart() {
    let (mut ch, raw) = raw_peer(PhaseTimeouts::uniform(Duration::from_secs(5)));
    drop(raw);
    assert!(matches!(
        ch.expect_hello().unwrap_err(),
        ControlError::PeerClosed {
            phase: Phase::Handshake,
            ..
        }
    ));

    let (mut client, server) = pair(PhaseTimeouts::uniform(Duration::from_secs(5)));
    server.fail("cannot open mlx5_3: No such device");
    let err = client
        .client_handshake(&Hello::new(params(), None, "c"))
        .unwrap_err();
    match &err {
        ControlError::PeerError { message, .. } => {
            assert_eq!(message, "cannot open mlx5_3: No such device")
        }
        other => panic!("{other:?}"),
    }
    assert!(err
        .to_string()
        .contains("reported an error during the handshake phase"));
}

#[test]
fn out_of_order_messages_are_named() {
    let (mut client, mut server) = pair(PhaseTimeouts::uniform(Duration::from_secs(5)));
    server.send(&Msg::Ready).unwrap();
    match client.expect_accept().unwrap_err() {
        ControlError::Unexpected { expected, got, .. } => {
            assert_eq!(expected, "accept, busy or reject");
            assert_eq!(got, "ready");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn qp_count_mismatch_fails_the_exchange() {
    let (mut client, mut server) = pair(PhaseTimeouts::uniform(Duration::from_secs(5)));
    server.send(&Msg::Endpoints(endpoints(1, 5))).unwrap();
    let err = client.exchange_endpoints(&endpoints(2, 9)).unwrap_err();
    assert!(
        matches!(&err, ControlError::Protocol { phase: Phase::Exchange, detail, .. }
            if detail == "the peer sent 1 queue pairs, this side has 2"),
        "{err:?}"
    );
}

#[test]
fn heartbeats_are_skipped_by_expect_but_not_by_the_deadline() {
    let t = PhaseTimeouts::uniform(Duration::from_secs(5));
    let (mut client, mut server) = pair(t);
    server.send(&Msg::Heartbeat { elapsed_ms: 1 }).unwrap();
    server.send(&Msg::Heartbeat { elapsed_ms: 2 }).unwrap();
    server
        .send(&Msg::Done {
            results: vec![],
            counters: None,
        })
        .unwrap();
    assert_eq!(client.expect_done(Phase::Results).unwrap().0, vec![]);

    // A peer that only ever sends heartbeats still times out the phase.
    let t = PhaseTimeouts::uniform(SHORT);
    let (mut client, server) = pair(t);
    let watch = server.watch(fast_watch()).unwrap();
    let start = Instant::now();
    let err = client.expect_done(Phase::Results).unwrap_err();
    assert!(matches!(err, ControlError::Timeout { .. }), "{err:?}");
    assert!(start.elapsed() < SHORT * 5);
    drop(watch);
}

#[test]
fn peer_socket_closing_mid_measure_is_noticed_well_within_the_silence_limit() {
    let (client, server) = pair(PhaseTimeouts::default());
    // The caller's own stop flag (as the engine's write loop takes it) is raised too.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cw = PeerWatch::start_with_stop(client, fast_watch(), stop.clone()).unwrap();
    let sw = server.watch(fast_watch()).unwrap();
    let alive = cw.alive();
    thread::sleep(Duration::from_millis(300));
    assert!(alive.is_ok());
    assert!(!stop.load(std::sync::atomic::Ordering::Relaxed));
    // The server process "dies": its socket closes.
    drop(sw);
    let took = spin_until_peer_fails(&alive, Instant::now(), fast_watch().silence_limit * 5);
    assert!(took < fast_watch().silence_limit, "{took:?}");
    assert!(stop.load(std::sync::atomic::Ordering::Relaxed));
    assert!(cw.stop_flag().load(std::sync::atomic::Ordering::Relaxed));
    match cw.status() {
        PeerStatus::Failed { error, .. } => {
            assert!(
                matches!(
                    error,
                    ControlError::PeerClosed {
                        phase: Phase::Measure,
                        ..
                    }
                ),
                "{error:?}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(cw.check().unwrap_err().is_peer_gone());
    assert!(matches!(
        cw.finish().unwrap_err(),
        ControlError::PeerClosed { .. }
    ));
}

#[test]
fn silent_peer_mid_measure_fails_after_the_silence_limit() {
    let cfg = fast_watch();
    // The peer keeps its socket open but stops sending (frozen process, lost link).
    let (client, mut raw) = raw_peer(PhaseTimeouts::default());
    // The watch's own clock starts in its thread, after this: the silence it measures is never
    // longer than the test's.
    let start = Instant::now();
    let cw = client.watch(cfg).unwrap();
    let alive = cw.alive();
    let stop = cw.stop_flag();
    // What the engine's write loop does: poll the stop flag.
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        assert!(start.elapsed() < cfg.silence_limit * 5, "not noticed");
        thread::sleep(Duration::from_millis(1));
    }
    let took = start.elapsed();
    assert!(!alive.is_ok());
    assert!(took >= cfg.silence_limit, "{took:?}");
    match cw.finish().unwrap_err() {
        ControlError::PeerSilent {
            silent_for, phase, ..
        } => {
            assert_eq!(phase, Phase::Measure);
            assert!(silent_for >= cfg.silence_limit);
        }
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() < cfg.silence_limit * 5);
    // The frozen peer, should it wake up, finds heartbeats and then our reason.
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut last = None;
    while let Ok(m) = read_frame(&mut raw) {
        last = Some(m);
    }
    match last {
        Some(Msg::Error { message }) => assert!(message.contains("heard nothing"), "{message}"),
        other => panic!("{other:?}"),
    }
}

/// Reads what a silent peer finally got from us: its last message.
fn last_message(raw: &mut std::net::TcpStream) -> Option<Msg> {
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut last = None;
    while let Ok(m) = read_frame(raw) {
        last = Some(m);
    }
    last
}

#[test]
fn a_silent_peer_whose_rail_moves_is_busy_until_the_busy_limit() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let cfg = fast_watch();
    // Heartbeats stop (a starved thread) while the rail carries the test's data.
    let (client, mut raw) = raw_peer(PhaseTimeouts::default());
    let bytes = std::sync::Arc::new(AtomicU64::new(0));
    let b = std::sync::Arc::clone(&bytes);
    let probe: Progress = Box::new(move || Some(b.fetch_add(4096, Ordering::Relaxed) + 4096));
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let cw = PeerWatch::start_watching(client, cfg, stop, Some(probe)).unwrap();
    let took = spin_until_peer_fails(&cw.alive(), start, cfg.busy_limit * 3);
    assert!(
        took >= cfg.busy_limit,
        "failed at {took:?}, before the busy limit"
    );
    assert!(took < cfg.busy_limit + Duration::from_secs(1), "{took:?}");
    assert!(
        bytes.load(Ordering::Relaxed) > 4096,
        "the probe was read more than once"
    );
    assert!(matches!(
        cw.finish().unwrap_err(),
        ControlError::PeerSilent { .. }
    ));
    match last_message(&mut raw) {
        Some(Msg::Error { message }) => {
            assert!(message.contains("still carried traffic"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_silent_peer_whose_rail_is_still_fails_soon_after_the_silence_limit() {
    use std::sync::atomic::AtomicBool;
    let cfg = fast_watch();
    let (client, mut raw) = raw_peer(PhaseTimeouts::default());
    let probe: Progress = Box::new(|| Some(7));
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let cw = PeerWatch::start_watching(client, cfg, stop, Some(probe)).unwrap();
    let took = spin_until_peer_fails(&cw.alive(), start, cfg.busy_limit * 3);
    // One look to take the reading, one at least 0.5 s later that finds it still.
    assert!(
        took >= cfg.silence_limit + Duration::from_millis(500),
        "{took:?}"
    );
    assert!(took < cfg.busy_limit, "{took:?}");
    match last_message(&mut raw) {
        Some(Msg::Error { message }) => {
            assert!(
                message.contains("the rail carried nothing either"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn peer_error_mid_measure_reaches_the_other_side_with_its_text() {
    let (client, server) = pair(PhaseTimeouts::default());
    let cw = client.watch(fast_watch()).unwrap();
    let sw = server.watch(fast_watch()).unwrap();
    let alive = cw.alive();
    thread::sleep(Duration::from_millis(200));
    sw.abort("mlx5_1: work completion error IBV_WC_RETRY_EXC_ERR on QP 0x1a2");
    spin_until_peer_fails(&alive, Instant::now(), Duration::from_secs(5));
    match cw.finish().unwrap_err() {
        ControlError::PeerError { message, phase, .. } => {
            assert_eq!(phase, Phase::Measure);
            assert!(message.contains("IBV_WC_RETRY_EXC_ERR"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn server_waiting_for_done_learns_of_a_dead_client() {
    let (client, server) = pair(PhaseTimeouts::default());
    let sw = server.watch(fast_watch()).unwrap();
    let cw = client.watch(fast_watch()).unwrap();
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(200));
        drop(cw);
    });
    let start = Instant::now();
    let err = sw.wait_peer_done(Duration::from_secs(30)).unwrap_err();
    assert!(err.is_peer_gone(), "{err:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn wait_peer_done_times_out_in_the_measure_phase() {
    let (client, server) = pair(PhaseTimeouts::default());
    let sw = server.watch(fast_watch()).unwrap();
    let _cw = client.watch(fast_watch()).unwrap();
    let err = sw.wait_peer_done(SHORT).unwrap_err();
    assert!(
        matches!(err, ControlError::Timeout { phase: Phase::Measure, after, .. } if after == SHORT),
        "{err:?}"
    );
}

#[test]
fn connect_retry_waits_for_a_late_server() {
    // Find a free port, then start listening on it only after the client began.
    let port = listener().1.port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let late = thread::spawn(move || {
        thread::sleep(Duration::from_millis(400));
        let l = TcpListener::bind(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        s
    });
    let start = Instant::now();
    let ch = ControlChannel::connect_retry(addr, Instant::now() + Duration::from_secs(10)).unwrap();
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert_eq!(ch.peer_addr(), addr);
    late.join().unwrap();
}

#[test]
fn connect_retry_gives_up_at_the_deadline() {
    let port = listener().1.port();
    let start = Instant::now();
    let err = ControlChannel::connect_retry(format!("127.0.0.1:{port}"), Instant::now() + SHORT)
        .unwrap_err();
    assert!(start.elapsed() < SHORT * 5);
    match &err {
        ControlError::ConnectFailed { addr, .. } => assert_eq!(addr, &format!("127.0.0.1:{port}")),
        other => panic!("{other:?}"),
    }
    assert_eq!(err.phase(), Phase::Connect);
    assert!(err.to_string().contains("could not reach"), "{err}");
}

#[test]
fn a_send_to_a_peer_that_hung_up_reports_the_peers_last_words() {
    let (mut client, mut raw) = raw_peer(PhaseTimeouts::uniform(Duration::from_secs(5)));
    write_frame(
        &mut raw,
        &Msg::Error {
            message: "server shutting down".into(),
        },
    )
    .unwrap();
    drop(raw);
    // The first write after the peer's close is accepted locally and answered by a reset;
    // the next one fails. Either way the peer's reason must surface, not a bare disconnect.
    let mut outcome = Ok(());
    for _ in 0..20 {
        thread::sleep(Duration::from_millis(50));
        outcome = client.send(&Msg::Ready);
        if outcome.is_err() {
            break;
        }
    }
    match outcome {
        Err(ControlError::PeerError { message, .. }) => assert_eq!(message, "server shutting down"),
        other => panic!("{other:?}"),
    }
}

/// Ending the window does not wait for the watch thread's next timeout: with heartbeats and
/// waits of 5 s, finish (and a peer's Done) still come back at once.
#[test]
fn finish_and_done_do_not_wait_for_the_watch_timeout() {
    let slow = WatchConfig {
        heartbeat_every: Duration::from_secs(5),
        silence_limit: Duration::from_secs(30),
        busy_limit: Duration::from_secs(60),
        poll_every: Duration::from_secs(5),
        write_timeout: Duration::from_secs(1),
    };
    let (a, b) = pair(PhaseTimeouts::uniform(Duration::from_secs(10)));
    let wa = PeerWatch::start(a, slow).unwrap();
    let wb = PeerWatch::start(b, slow).unwrap();
    // Both threads are now in their 5 s wait.
    thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let mut a = wa.finish().unwrap();
    a.send(&Msg::Done {
        results: vec![result(65536)],
        counters: None,
    })
    .unwrap();
    wb.wait_peer_done(Duration::from_secs(10)).unwrap();
    let mut b = wb.finish().unwrap();
    assert_eq!(
        b.expect_done(Phase::Results).unwrap().0,
        vec![result(65536)]
    );
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(1), "ending took {took:?}");
}

/// Both ends of a connection before any frame: a client channel and the server's channel.
fn opening_pair(timeouts: PhaseTimeouts) -> (ControlChannel, ControlChannel) {
    pair(timeouts)
}

#[test]
fn marked_versions_lead_two_rdmabws_into_their_frames() {
    let (mut c, mut s) = opening_pair(PhaseTimeouts::uniform(Duration::from_secs(5)));
    let server = thread::spawn(move || {
        let o = s.server_opening().unwrap();
        (o, s)
    });
    let theirs = c.client_opening(false).unwrap();
    assert_eq!(theirs.text, "6.24");
    assert_eq!(theirs.rdmabw, Some(PROTOCOL_VERSION));
    let (opening, mut s) = server.join().unwrap();
    assert_eq!(opening, Opening::Marked);
    // rdmabw's frames follow on the same connection.
    c.send(&Msg::Ready).unwrap();
    assert!(matches!(s.recv(Phase::Ready).unwrap(), Msg::Ready));
}

#[test]
fn a_plain_version_is_perftest_and_frames_from_the_first_byte_are_an_older_rdmabw() {
    let (c, mut s) = opening_pair(PhaseTimeouts::uniform(Duration::from_secs(5)));
    let server = thread::spawn(move || s.server_opening().unwrap());
    // --peer perftest: perftest's plain version message (the server answers it later, in
    // perftest's exchange; nothing was written back yet).
    let mut raw = c;
    let h = thread::spawn(move || {
        let _ = raw.client_opening(true);
    });
    match server.join().unwrap() {
        Opening::Perftest(v) => {
            assert_eq!(v.text, "6.24");
            assert_eq!(v.rdmabw, None);
        }
        other => panic!("{other:?}"),
    }
    drop(h);

    let (mut c, mut s) = opening_pair(PhaseTimeouts::uniform(Duration::from_secs(5)));
    let server = thread::spawn(move || {
        let o = s.server_opening().unwrap();
        (o, s.expect_hello().unwrap())
    });
    c.send(&Msg::Hello(Hello::new(params(), None, "old-rdmabw")))
        .unwrap();
    let (opening, hello) = server.join().unwrap();
    assert_eq!(opening, Opening::Frames);
    assert_eq!(hello.client_host, "old-rdmabw");
}

#[test]
fn an_opening_that_is_neither_is_named_and_a_silent_one_times_out() {
    let (mut s, mut raw) = raw_peer(PhaseTimeouts::uniform(SHORT));
    raw.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let e = s.server_opening().unwrap_err();
    assert!(matches!(e, ControlError::NotRdmabw { .. }), "{e:?}");
    assert!(e.to_string().contains("speaks neither"), "{e}");

    let (mut s, _raw) = raw_peer(PhaseTimeouts::uniform(SHORT));
    let t0 = Instant::now();
    let e = s.server_opening().unwrap_err();
    assert!(matches!(e, ControlError::Timeout { .. }), "{e:?}");
    assert!(t0.elapsed() < SHORT * 5);
}

#[test]
fn a_client_told_apart_from_an_older_rdmabw_server_says_how_to_reach_it() {
    // An rdmabw from before the opening answers the version message with an error frame.
    let (l, addr) = listener();
    let server = thread::spawn(move || {
        let (mut st, _) = l.accept().unwrap();
        let mut first = [0u8; 16];
        st.read_exact(&mut first).unwrap();
        write_frame(
            &mut st,
            &Msg::Error {
                message: "not an rdmabw control frame".into(),
            },
        )
        .unwrap();
    });
    let mut c =
        ControlChannel::connect(addr, PhaseTimeouts::uniform(Duration::from_secs(5))).unwrap();
    let e = c.client_opening(false).unwrap_err();
    assert!(e.to_string().contains("--peer rdmabw"), "{e}");
    server.join().unwrap();
}

#[test]
fn perftest_answering_rdmabws_frames_is_named_as_perftest() {
    // `--peer rdmabw` against ib_write_bw's server: it answers the hello with its version.
    let (mut client, mut raw) = raw_peer(PhaseTimeouts::uniform(Duration::from_secs(5)));
    raw.write_all(b"6.24\0\0\0\0\0\0\0\0\0\0\0\0").unwrap();
    let e = client.expect_accept().unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("is perftest") && text.contains("--peer rdmabw"),
        "{text}"
    );
}

#[test]
fn a_server_that_hangs_up_on_the_opening_is_taken_for_an_older_rdmabw() {
    let (l, addr) = listener();
    let server = thread::spawn(move || {
        let (mut st, _) = l.accept().unwrap();
        let mut first = [0u8; 4];
        st.read_exact(&mut first).unwrap();
    });
    let mut c =
        ControlChannel::connect(addr, PhaseTimeouts::uniform(Duration::from_secs(5))).unwrap();
    let e = c.client_opening(false).unwrap_err();
    server.join().unwrap();
    assert!(
        e.to_string().contains("older than this one") && e.to_string().contains("--peer rdmabw"),
        "{e}"
    );
}
