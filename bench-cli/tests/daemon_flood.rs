//! Issue 31's acceptance figures for `rdmabw server --daemon` with a secret: under 200 silent
//! connections and a stream of refused hellos (another run's secret, a 100 kB host name with
//! a newline that would forge a line), a client that holds the secret is admitted within a
//! second, the daemon's log gets nothing of the flood, and its RSS stays bounded. No RDMA
//! device is needed: the admitted test stops at device opening, which the client hears as a
//! server set-up failure. The figures are printed (`--nocapture`).

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::control::{ControlChannel, Hello, PhaseTimeouts, RunSecret};
use results::rdmabw::params::{Sizes, TestLength, TestParams};

mod support;
use support::{daemon_on, free_port, lines, SECRET};

fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A `KEY: N kB` line of /proc/PID/status, in KiB (0 if none).
fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn params() -> TestParams {
    TestParams::write_bw(
        Sizes::One {
            msg_size_bytes: 65536,
        },
        TestLength::Iterations { iterations: 100 },
        1,
    )
}

struct Ended(Child);

impl Drop for Ended {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_flood_neither_locks_out_the_run_nor_fills_the_log_or_memory() {
    let (child, rx, port) = daemon_on("127.0.0.1", &["--max-tests", "2"]);
    let pid = child.id();
    let _child = Ended(child);
    let first = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a first line");
    assert!(first.contains("listening on"), "{first}");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let rss_before = rss_kib(pid);

    let flood_start = Instant::now();
    // 200 silent connections, held.
    let silent: Vec<TcpStream> = (0..200)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    // Refused hellos on two threads, until told to stop.
    let flooding = Arc::new(AtomicBool::new(true));
    let refused = Arc::new(AtomicU64::new(0));
    let floods: Vec<_> = (0..2)
        .map(|i| {
            let (flooding, refused) = (Arc::clone(&flooding), Arc::clone(&refused));
            std::thread::spawn(move || {
                let forged = format!(
                    "{}\nrdmabw server: [10.0.0.9:4000] done: mlx5_0 on net1 <- x (mlx5_0): 65536 B average 399.999 Gb/s",
                    "h".repeat(100_000)
                );
                while flooding.load(Ordering::Relaxed) {
                    let secret = if i == 0 { RunSecret::new("another-run") } else { None };
                    let hello = Hello::new(params(), Some("mlx5_0".into()), forged.clone())
                        .with_secret(secret);
                    if let Ok(mut ch) =
                        ControlChannel::connect(addr, PhaseTimeouts::uniform(Duration::from_secs(3)))
                    {
                        if ch.client_handshake(&hello).is_err() {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));

    // The run's client, from another loopback address.
    let t0 = Instant::now();
    let sock =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    sock.bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into())
        .expect("binds 127.0.0.2");
    sock.connect(&addr.into()).expect("connects");
    let mut ch = ControlChannel::from_stream(sock.into())
        .expect("a channel")
        .with_timeouts(PhaseTimeouts::uniform(Duration::from_secs(5)));
    let hello = Hello::new(params(), None, "pod-run").with_secret(RunSecret::new(SECRET));
    let answer = ch
        .client_handshake(&hello)
        .map(|_| ())
        .map_err(|e| e.to_string());
    let took = t0.elapsed();
    // The flood goes on for 1.5 s more, or FLOOD_SECS in all (scripts/bench-flood: 10).
    let flood = std::env::var("FLOOD_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Duration::from_millis(1500), |s| {
            Duration::from_secs_f64(s).saturating_sub(flood_start.elapsed())
        });
    std::thread::sleep(flood);
    let flood_s = flood_start.elapsed().as_secs_f64();
    let rss_peak = rss_kib(pid);
    flooding.store(false, Ordering::Relaxed);
    for f in floods {
        let _ = f.join();
    }
    drop(silent);
    std::thread::sleep(Duration::from_millis(300));
    let lines: Vec<String> = rx.try_iter().collect();
    let log_bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    let n_refused = refused.load(Ordering::Relaxed);
    eprintln!(
        "admitted in {took:?} under 200 silent connections and {n_refused} refused hellos \
         ({flood_s:.1} s of flood); RSS {rss_before} KiB before, {rss_peak} KiB under the \
         flood (VmHWM {} KiB); log during the flood: \
         {} lines, {log_bytes} bytes: {lines:?}",
        status_kib(pid, "VmHWM:"),
        lines.len()
    );
    let e = answer.expect_err("no RDMA here: the admitted test stops at device opening");
    assert!(e.contains("set-up") || e.contains("device"), "{e}");
    assert!(took < Duration::from_secs(1), "admitted after {took:?}");
    assert!(n_refused >= 10, "{n_refused} refused hellos");
    assert!(
        lines
            .iter()
            .all(|l| !l.contains("399.999") && !l.contains("hhhh")),
        "the flood reached the log: {lines:?}"
    );
    assert!(log_bytes < 4096, "{log_bytes} bytes of log: {lines:?}");
    assert!(
        rss_peak < rss_before + 64 * 1024,
        "RSS grew from {rss_before} to {rss_peak} KiB"
    );
}

/// A connection from `src` (a loopback address) to `addr`.
fn connect_from(src: [u8; 4], addr: SocketAddr) -> Option<TcpStream> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    sock.bind(&SocketAddr::from((src, 0)).into()).ok()?;
    sock.connect(&addr.into()).ok()?;
    Some(sock.into())
}

/// Issue 31, finding 7: the daemon ended when `accept()` failed (no file descriptors left).
/// Under `ulimit -n 24`, connections from many addresses exhaust them; once those time out,
/// the daemon serves again.
#[test]
fn a_daemon_out_of_file_descriptors_backs_off_and_goes_on() {
    let port = free_port();
    let mut child = Command::new("sh")
        .args([
            "-c",
            "ulimit -n 24 && exec \"$0\" server --daemon --bind 127.0.0.1 -p \"$1\"",
            env!("CARGO_BIN_EXE_rdmabw"),
            &port.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts rdmabw server --daemon");
    let rx = lines(child.stderr.take().expect("stderr"));
    let first = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a first line");
    assert!(first.contains("listening on"), "{first}");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    // 6 addresses x 6 connections: more than the daemon has descriptors for, fewer than its
    // caps per address and in all.
    let held: Vec<TcpStream> = (10..16u8)
        .flat_map(|a| (0..6).filter_map(move |_| connect_from([127, 0, 0, a], addr)))
        .collect();
    assert!(held.len() >= 30, "{} connections", held.len());
    std::thread::sleep(Duration::from_millis(500));
    let still = child.try_wait().ok().flatten();
    let mut ended = Ended(child);
    assert!(
        still.is_none(),
        "the daemon ended: {still:?}: {:?}",
        rx.try_iter().collect::<Vec<_>>()
    );
    drop(held);
    // The held ones time out (2 s) or close; then the daemon accepts again.
    let t0 = Instant::now();
    let mut answer = Err("never answered".to_string());
    while t0.elapsed() < Duration::from_secs(10) {
        if let Some(s) = connect_from([127, 0, 0, 2], addr) {
            if let Ok(ch) = ControlChannel::from_stream(s) {
                let mut ch = ch.with_timeouts(PhaseTimeouts::uniform(Duration::from_secs(5)));
                answer = ch
                    .client_handshake(&Hello::new(params(), None, "pod-run"))
                    .map(|_| ())
                    .map_err(|e| e.to_string());
                if answer.as_ref().is_err_and(|e| e.contains("set-up")) {
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let lines: Vec<String> = rx.try_iter().collect();
    assert!(
        answer.as_ref().is_err_and(|e| e.contains("set-up")),
        "{answer:?}; log: {lines:?}"
    );
    assert!(ended.0.try_wait().ok().flatten().is_none(), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("cannot accept connections")),
        "{lines:?}"
    );
}
