//! railsweep as a child process: run to its end, or interrupted like Ctrl-C and waited for.
#![allow(dead_code)]

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// railsweep with `args` run to its end: no stdin, output captured.
pub fn railsweep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("railsweep runs")
}

/// The stdout of railsweep with `args`, which must exit 0 (its stderr shown when not).
#[track_caller]
pub fn stdout_of(args: &[&str]) -> String {
    let out = railsweep(args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// Bytes as text, for messages.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts that `out` (a stream's bytes) says `what`, showing all of it when not.
#[track_caller]
pub fn assert_says(out: &[u8], what: &str) {
    let t = text(out);
    assert!(t.contains(what), "expected {what:?} in:\n{t}");
}

/// Starts railsweep with `args`: no stdin, stdout and stderr captured.
pub fn start<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("railsweep starts")
}

/// Its exit code once it ends, or `None` (and killed) if it is still running after `limit`.
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let t0 = Instant::now();
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return st.code();
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends SIGINT (what Ctrl-C sends), waits up to `limit`: the exit code and the output.
pub fn interrupt(mut child: Child, limit: Duration) -> (Option<i32>, Output) {
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "kill -INT {}", child.id());
    let code = wait_exit(&mut child, limit);
    (code, child.wait_with_output().expect("output"))
}

/// [`interrupt`] from async tests, off the runtime's threads.
pub async fn interrupt_async(child: Child, limit: Duration) -> (Option<i32>, Output) {
    tokio::task::spawn_blocking(move || interrupt(child, limit))
        .await
        .expect("joins")
}
