//! `rdmabw server --daemon` as a launcher holds it: its secret on the first line of standard
//! input, then the input left open. With `--exit-on-stdin-eof` the daemon stops when that input
//! ends (a launcher closing it, or dying); without the flag it keeps serving. No RDMA device is
//! needed: a daemon without a rail of its own only listens until a client comes.

use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod support;
use support::daemon_on;

/// The daemon, its secret written and its input still open; its stderr lines on the receiver.
fn daemon(extra: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let (child, rx, _) = daemon_on("127.0.0.1", extra);
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
    assert_eq!(
        code,
        Some(Some(0)),
        "the end of its input is the launcher saying it is done, no interruption: exit 0"
    );
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

#[test]
fn a_daemon_listens_on_the_addresses_it_is_given_and_on_no_other() {
    let (child, rx, port) = daemon_on("127.0.0.2,127.0.0.3", &[]);
    let said = format!("listening on 127.0.0.2:{port}, 127.0.0.3:{port}");
    if let Err(seen) = wait_line(&rx, &said, Duration::from_secs(10)) {
        panic!("no {said:?}: {seen:?}");
    }
    let connect = |ip: [u8; 4]| {
        let a = std::net::SocketAddr::from((ip, port));
        std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2))
    };
    assert!(connect([127, 0, 0, 2]).is_ok(), "listens on 127.0.0.2");
    assert!(connect([127, 0, 0, 3]).is_ok(), "listens on 127.0.0.3");
    let other = connect([127, 0, 0, 1]).expect_err("not on 127.0.0.1");
    assert_eq!(
        other.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{other}"
    );
    end(child);
}

#[test]
fn bind_lists_that_cannot_work_are_usage_errors() {
    for (bind, says) in [
        ("0.0.0.0,127.0.0.2", "give it alone"),
        ("127.0.0.2,eth0", "\"eth0\" is not an IP address"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_rdmabw"))
            .args(["server", "--daemon", "--bind", bind, "-p", "1"])
            .stdin(Stdio::null())
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--bind {bind}: {err}");
        assert!(err.contains(says), "--bind {bind}: {err}");
    }
}

/// Issue 53, finding 3: `rdmabw server --daemon` without a secret on an address that other
/// hosts reach says so on stderr, with how to give one; on loopback it does not. A secret
/// shorter than 128 bits is refused (exit 2), naming the rule.
#[test]
fn a_daemon_without_a_secret_on_a_reachable_address_warns_and_a_short_secret_is_refused() {
    for (bind, warned) in [("0.0.0.0", true), ("127.0.0.1", false)] {
        let port = support::free_port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_rdmabw"))
            .args(["server", "--daemon", "--bind", bind, "-p"])
            .arg(port.to_string())
            .env_remove("RDMABW_SECRET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts rdmabw server --daemon");
        let rx = support::lines(child.stderr.take().expect("stderr"));
        let mut seen = Vec::new();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10)
            && !seen.iter().any(|l: &String| l.contains("listening on"))
        {
            if let Ok(l) = rx.recv_timeout(Duration::from_millis(100)) {
                seen.push(l);
            }
        }
        std::thread::sleep(Duration::from_millis(300));
        seen.extend(rx.try_iter());
        end(child);
        assert!(
            seen.iter().any(|l| l.contains("listening on")),
            "--bind {bind}: the daemon did not start listening: {seen:?}"
        );
        let warning = seen.iter().find(|l| l.contains("without a secret"));
        assert_eq!(warning.is_some(), warned, "--bind {bind}: {seen:?}");
        if let Some(w) = warning {
            assert!(
                w.contains("--secret-stdin") && w.contains("RDMABW_SECRET"),
                "{w}"
            );
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_rdmabw"))
        .args(["server", "--daemon", "--bind", "127.0.0.1", "-p", "1"])
        .env("RDMABW_SECRET", "0123456789abcdef")
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("RDMABW_SECRET") && err.contains("fewer than 32") && err.contains("128 bits"),
        "{err}"
    );
}
