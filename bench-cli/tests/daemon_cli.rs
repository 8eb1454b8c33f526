//! `rdmabw server --daemon` as a launcher holds it: its secret on the first line of standard
//! input, then the input left open. With `--exit-on-stdin-eof` the daemon stops when that input
//! ends (a launcher closing it, or dying); without the flag it keeps serving. No RDMA device is
//! needed: a daemon without a rail of its own only listens until a client comes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A free TCP port on the loopback address.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    l.local_addr().expect("address").port()
}

/// The daemon, its secret written and its input still open; its stderr lines on the receiver.
fn daemon(extra: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let port = free_port().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rdmabw"))
        .args([
            "server",
            "--daemon",
            "--bind",
            "127.0.0.1",
            "-p",
            &port,
            "--secret-stdin",
        ])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts rdmabw server --daemon");
    child
        .stdin
        .as_mut()
        .expect("stdin")
        .write_all(b"0123456789abcdef\n")
        .expect("writes the secret");
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Lines until one contains `what` (all of them, for the message), or `None` after `limit`.
fn wait_line(rx: &mpsc::Receiver<String>, what: &str, limit: Duration) -> Result<(), Vec<String>> {
    let t0 = Instant::now();
    let mut seen = Vec::new();
    while let Some(left) = limit.checked_sub(t0.elapsed()) {
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(what) => return Ok(()),
            Ok(l) => seen.push(l),
            Err(_) => break,
        }
    }
    Err(seen)
}

/// Its exit code if it ends within `limit`.
fn exit_within(child: &mut Child, limit: Duration) -> Option<Option<i32>> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st.code());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn end(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn with_exit_on_stdin_eof_the_daemon_stops_when_its_input_ends() {
    let (mut child, rx) = daemon(&["--exit-on-stdin-eof"]);
    if let Err(seen) = wait_line(&rx, "listening on", Duration::from_secs(10)) {
        end(child);
        panic!("the daemon did not start listening: {seen:?}");
    }
    // The input held open: it keeps serving.
    if let Some(code) = exit_within(&mut child, Duration::from_secs(1)) {
        panic!("the daemon ended with its input still open: {code:?}");
    }
    drop(child.stdin.take());
    let code = exit_within(&mut child, Duration::from_secs(5));
    if code.is_none() {
        end(child);
        panic!("the daemon did not end within 5 s of the end of its input");
    }
    assert_eq!(code, Some(Some(0)), "it stops as on SIGTERM, exit 0");
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(
        rest.iter().any(|l| l.contains("standard input closed")),
        "says why it stopped: {rest:?}"
    );
}

#[test]
fn without_the_flag_the_daemon_outlives_its_input() {
    let (mut child, rx) = daemon(&[]);
    if let Err(seen) = wait_line(&rx, "listening on", Duration::from_secs(10)) {
        end(child);
        panic!("the daemon did not start listening: {seen:?}");
    }
    drop(child.stdin.take());
    let code = exit_within(&mut child, Duration::from_secs(2));
    end(child);
    assert_eq!(
        code, None,
        "a daemon without the flag ignores its input's end"
    );
}
