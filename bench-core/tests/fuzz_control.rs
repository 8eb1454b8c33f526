//! Bounded random-input tests of the control channel on the stable toolchain (the cargo-fuzz
//! target in `fuzz/` needs nightly): the frame decoder's entry points on random and mutated
//! frames, a server's admission on random hellos over loopback TCP, and the property that a
//! hello the server admits ([`check_hello`]) is safe for every computation the server then
//! makes from it (a latency hello: only what `rdmabw lat` would send). A few seconds by default; `RAILBENCH_FUZZ_SECS=600` runs each for ten
//! minutes. The seed is printed, and `RAILBENCH_FUZZ_SEED` replays one.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bench_core::control::{
    check_decoder_invariants, encode_frame, Hello, Msg, PhaseTimeouts, RunSecret, WatchConfig,
    HEADER_LEN, MAX_FRAME_BYTES,
};
use bench_core::rails::RailRequest;
use bench_core::session::{admit, check_hello, Pinned, ServerConfig, ServerLimits};
use bench_core::sysfs::SysRoots;
#[path = "../../results/tests/fuzzing/mod.rs"]
mod fuzzing;

use fuzzing::{budget, Rng};
use wire::params::{Connection, LocalTuning, Sizes, TestLength, TestParams};

fn random_params(r: &mut Rng) -> TestParams {
    let mut p = TestParams {
        sizes: if r.below(2) == 0 {
            Sizes::One {
                msg_size_bytes: r.edgy_u64(),
            }
        } else {
            Sizes::Sweep {
                max_bytes: r.edgy_u64(),
            }
        },
        length: if r.below(2) == 0 {
            TestLength::Iterations {
                iterations: r.edgy_u64(),
            }
        } else {
            TestLength::Duration {
                duration_s: r.edgy_f64(),
                warmup_s: r.edgy_f64(),
                cooldown_s: r.edgy_f64(),
            }
        },
        qps: r.edgy_u64() as u32,
        connection: Connection::RC,
        bidirectional: r.below(2) == 0,
        run_infinitely: r.below(4) == 0,
        data_validation: r.below(2) == 0,
        latency: r.below(2) == 0,
    };
    if p.latency && r.below(2) == 0 {
        // Near what `rdmabw lat` sends, one field at a time at an edge, so that latency
        // hellos reach admission's every rule and some pass it.
        p.qps = [1, 1, 0, 2, 64, u32::MAX][r.below(6) as usize];
        p.bidirectional = r.below(5) == 0;
        p.run_infinitely = r.below(5) == 0;
        p.data_validation = r.below(5) == 0;
        if r.below(2) == 0 {
            p.length = TestLength::Iterations {
                iterations: [0, 1, 4, 5, 1000, u64::MAX][r.below(6) as usize],
            };
        }
        if r.below(2) == 0 {
            p.sizes = Sizes::One {
                msg_size_bytes: [1, 2, 4096][r.below(3) as usize],
            };
        }
    }
    p
}

fn random_text(r: &mut Rng, max: u64) -> String {
    let pool = [
        "mlx5_0", "/", "..", ".", "", "\n", "\u{0}", "net1", "a", "\u{202e}", " ", "é",
    ];
    let n = r.below(max);
    (0..n)
        .map(|_| pool[r.below(pool.len() as u64) as usize])
        .collect()
}

fn random_hello(r: &mut Rng) -> Hello {
    let mut h = Hello::new(
        random_params(r),
        (r.below(2) == 0).then(|| random_text(r, 5)),
        random_text(r, 8),
    );
    h.netdev = (r.below(3) == 0).then(|| random_text(r, 4));
    h.gid_index = (r.below(3) == 0).then(|| r.edgy_u64() as u32);
    if r.below(2) == 0 {
        let service_level = r.byte();
        let mtu_bytes = (r.below(2) == 0).then(|| r.edgy_u64() as u32);
        let t = LocalTuning {
            service_level,
            mtu_bytes,
            ..LocalTuning::default()
        };
        h.tuning = Some(t);
    }
    h
}

/// Every message kind, encoded: the corpus the mutations start from.
fn corpus(r: &mut Rng) -> Vec<Vec<u8>> {
    let msgs = [
        Msg::Hello(random_hello(r)),
        Msg::Ready,
        Msg::Heartbeat { elapsed_ms: 5 },
        Msg::Error {
            message: "x".into(),
        },
        Msg::Busy {
            device: "mlx5_0".into(),
            by: "pod".into(),
        },
        Msg::Done {
            results: vec![],
            counters: None,
        },
    ];
    msgs.iter().filter_map(|m| encode_frame(m).ok()).collect()
}

fn mutate(r: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..=r.below(4) {
        match r.below(5) {
            0 if !v.is_empty() => {
                let i = r.below(v.len() as u64) as usize;
                v[i] = r.byte();
            }
            1 if !v.is_empty() => {
                let i = r.below(v.len() as u64) as usize;
                v.truncate(i);
            }
            2 => {
                let i = r.below(v.len() as u64 + 1) as usize;
                v.insert(i, r.byte());
            }
            3 if v.len() >= HEADER_LEN => {
                // A length field at an edge.
                let len =
                    [0u32, 1, MAX_FRAME_BYTES, MAX_FRAME_BYTES + 1, u32::MAX][r.below(5) as usize];
                v[6..10].copy_from_slice(&len.to_be_bytes());
            }
            _ => v.extend((0..r.below(16)).map(|_| r.byte())),
        }
    }
    v
}

#[test]
fn the_frame_decoder_takes_random_and_mutated_frames_without_panicking() {
    let (limit, mut r) = budget("frame decoder", 1.5);
    let t0 = Instant::now();
    let mut cases = 0u64;
    while t0.elapsed() < limit {
        let corpus = corpus(&mut r);
        for base in &corpus {
            check_decoder_invariants(&mutate(&mut r, base));
            cases += 1;
        }
        let noise: Vec<u8> = (0..r.below(64)).map(|_| r.byte()).collect();
        check_decoder_invariants(&noise);
        cases += 1;
    }
    eprintln!("frame decoder: {cases} inputs");
    assert!(cases > 100);
}

#[test]
fn an_admitted_hello_is_safe_for_every_computation_the_server_makes() {
    let (limit, mut r) = budget("hello bounds", 1.5);
    let t0 = Instant::now();
    let (mut cases, mut admitted, mut admitted_lat) = (0u64, 0u64, 0u64);
    let limits = ServerLimits::default();
    while t0.elapsed() < limit {
        let h = random_hello(&mut r);
        cases += 1;
        if check_hello(&h).is_err() {
            continue;
        }
        admitted += 1;
        // What the server computes from an admitted hello: none of it may panic, loop or
        // allocate without bound.
        let sizes = h.params.sizes.list();
        assert!(sizes.len() <= 63);
        let _ = limits.check(&h.params);
        let _ = bench_core::engine::buffer_bytes(&h.params);
        let _ = bench_core::control::measure_timeout(&h.params);
        let _ = PhaseTimeouts::default().with_measure_for(&h.params);
        if let Some(n) = &h.device {
            assert!(!n.contains('/') && n != ".." && !n.is_empty(), "{n:?}");
        }
        // A latency hello is admitted only as `rdmabw lat` would send it: one QP, one
        // direction, an end, no data validation, at least 5 exchanges, one size when timed
        // (any count above: what a side keeps of it is bounded, results' RoundTrips).
        let p = &h.params;
        if p.latency {
            admitted_lat += 1;
            assert_eq!(p.qps, 1, "{p:?}");
            assert!(
                !p.bidirectional && !p.run_infinitely && !p.data_validation,
                "{p:?}"
            );
            match p.length {
                TestLength::Iterations { iterations } => {
                    assert!(iterations >= wire::flags::LAT_MIN_ITERS, "{p:?}")
                }
                TestLength::Duration { .. } => {
                    assert!(matches!(p.sizes, Sizes::One { .. }), "{p:?}")
                }
            }
        }
    }
    eprintln!(
        "hello bounds: {cases} hellos, {admitted} admitted, {admitted_lat} of them latency tests"
    );
    assert!(cases > 100);
    assert!(
        admitted_lat > 0,
        "no latency hello was admitted: the rule was not reached"
    );
}

fn fixture() -> SysRoots {
    SysRoots::under(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rxe-pods/podB"))
}

#[test]
fn admission_answers_random_bytes_and_hellos_within_its_deadline() {
    let (limit, mut r) = budget("admission", 1.5);
    let cfg = ServerConfig {
        rail: RailRequest::default(),
        params: random_params(&mut r),
        pinned: Pinned::default(),
        tuning: LocalTuning::default(),
        timeouts: PhaseTimeouts::uniform(Duration::from_secs(2)),
        watch: WatchConfig::default(),
        host: "server".into(),
        roots: fixture(),
        daemon: true,
        secret: if r.below(2) == 0 {
            RunSecret::new("run-1")
        } else {
            None
        },
        limits: ServerLimits::default(),
        peer: bench_core::session::PeerChoice::Auto,
        unit: bench_core::perftest::ReportUnit::MibPerS,
    };
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let wait = Duration::from_millis(150);
    let t0 = Instant::now();
    let mut cases = 0u64;
    while t0.elapsed() < limit {
        let corpus = corpus(&mut r);
        let pick = r.below(corpus.len() as u64) as usize;
        let input = mutate(&mut r, &corpus[pick]);
        let mut c = TcpStream::connect(addr).unwrap();
        let _ = c.write_all(&input);
        if r.below(4) != 0 {
            // Mostly a client that has said all it will; sometimes one that stays silent.
            let _ = c.shutdown(std::net::Shutdown::Write);
        }
        let (s, _) = l.accept().unwrap();
        let started = Instant::now();
        let _ = admit(&cfg, s, wait);
        // The hello deadline, plus the 500 ms a refusal lingers for the client's close.
        assert!(
            started.elapsed() < wait + Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        cases += 1;
    }
    eprintln!("admission: {cases} connections");
    assert!(cases > 5);
}
