//! The one rdmabw server daemon of a sweep: started with its secret on its input, held while
//! the rails run, restarted when found gone, ended by closing its input (or by signal).

use std::pin::Pin;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use crate::rdmabw::{self};
use crate::runner::bounded::keep_tail;
use crate::runner::{Exit, Output, Runner, Signal, StreamStalled};

pub(super) struct Daemon {
    pub(super) pid: u32,
    /// Its standard input, held open after the secret: a daemon started with
    /// `--exit-on-stdin-eof` stops when it is closed (`None` for one started without).
    pub(super) stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    pub(super) done: JoinHandle<Result<Output>>,
}

/// Read a stream to its end into `buf` (shared, so that what came is kept if the reading is
/// given up).
pub(super) async fn read_into(
    mut r: Pin<Box<dyn AsyncRead + Send>>,
    buf: Arc<StdMutex<Vec<u8>>>,
    cap: Option<usize>,
) {
    let mut chunk = [0u8; 4096];
    while let Ok(n) = r.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        if let Ok(mut b) = buf.lock() {
            match cap {
                Some(cap) => keep_tail(&mut b, &chunk[..n], cap),
                None => b.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// How much of each of a daemon's streams railsweep keeps: its last 64 KiB. A daemon lives as
/// long as the sweep, and what a peer makes it print must not grow railsweep's memory without
/// bound (its stdout was kept whole: a flooding daemon took railsweep to 498 MB in 4 s); the
/// last lines are what error messages quote.
pub(crate) const DAEMON_STDERR_TAIL: usize = 64 * 1024;

/// How long a process's streams may stay open after its exit (a child it left holds them)
/// before what came so far is taken as all of its output.
pub(super) const STREAMS_AFTER_EXIT: Duration = Duration::from_secs(2);

/// Start `argv` with its streams connected, write `stdin_line` and keep its input open; its
/// output is collected until it ends.
pub(super) async fn start_held<R: Runner>(
    runner: &R,
    pod: &str,
    argv: &[String],
    stdin_line: &[u8],
) -> Result<Daemon> {
    let (d, _) = start_piped(runner, pod, argv, Some(stdin_line), DAEMON_STDERR_TAIL).await?;
    Ok(d)
}

/// Start `argv` with its streams connected; with `stdin_line`, write it and keep the input
/// open, else close the input at once. Its output is collected until it ends, the last `cap`
/// bytes of each stream; its stderr is shared as it comes (to see a line it prints while it
/// runs).
pub(super) async fn start_piped<R: Runner>(
    runner: &R,
    pod: &str,
    argv: &[String],
    stdin_line: Option<&[u8]>,
    cap: usize,
) -> Result<(Daemon, Arc<StdMutex<Vec<u8>>>)> {
    let mut p = runner.start(pod, argv).await?;
    let stdin = match stdin_line {
        Some(line) => {
            // A daemon that ends at once (its port in use) may have closed its input already:
            // its own words say why.
            let _ = p.stdin.write_all(line).await;
            let _ = p.stdin.flush().await;
            Some(p.stdin)
        }
        None => {
            let _ = p.stdin.shutdown().await;
            None
        }
    };
    let (out, err) = (Arc::default(), Arc::default());
    let mut readers = [
        tokio::spawn(read_into(p.stdout, Arc::clone(&out), Some(cap))),
        tokio::spawn(read_into(p.stderr, Arc::clone(&err), Some(cap))),
    ];
    let exit = p.done;
    let shared_err = Arc::clone(&err);
    let done = tokio::spawn(async move {
        let exit = match exit.await {
            Ok(Ok(e)) => e,
            Ok(Err(e)) => Exit::Error(crate::exit::words(&e)),
            Err(e) => Exit::Error(e.to_string()),
        };
        let all = futures::future::join_all(readers.iter_mut());
        let _ = tokio::time::timeout(STREAMS_AFTER_EXIT, all).await;
        for r in &readers {
            r.abort();
        }
        let take = |b: &StdMutex<Vec<u8>>| {
            b.lock()
                .map(|mut v| std::mem::take(&mut *v))
                .unwrap_or_default()
        };
        Ok(Output::new(exit, take(&out), take(&err)))
    });
    Ok((
        Daemon {
            pid: p.pid,
            stdin,
            done,
        },
        shared_err,
    ))
}

/// How long a daemon may take to stop after its input was closed before it is stopped by
/// signal (it stops within a poll interval; a round trip through the API server adds to that).
pub(super) const DAEMON_STDIN_EOF_WAIT: Duration = Duration::from_secs(3);

/// The one rdmabw server daemon in the server pod, restarted when it is found gone.
pub(super) struct Server<'a, R: Runner> {
    pub(super) runner: &'a R,
    pub(super) pod: String,
    pub(super) argv: Vec<String>,
    /// Whether it stops at the end of its input (its rdmabw announced it can); else it is
    /// started with its input closed after the secret and stopped by signal.
    pub(super) held: bool,
    pub(super) secret: rdmabw::RunSecret,
    pub(super) state: Mutex<Option<Daemon>>,
}

pub(super) fn describe_end(
    r: std::result::Result<Result<Output>, tokio::task::JoinError>,
) -> String {
    match r {
        Ok(Ok(out)) => {
            let tail = out.stderr_tail(2);
            if tail.is_empty() {
                out.exit.to_string()
            } else {
                format!("{}: {tail}", out.exit)
            }
        }
        Ok(Err(e)) => crate::exit::words(&e),
        Err(e) => e.to_string(),
    }
}

impl<'a, R: Runner> Server<'a, R> {
    /// Start the daemon if none runs; an error says why it cannot.
    pub(super) async fn ensure(&self) -> std::result::Result<(), String> {
        let mut st = self.state.lock().await;
        if let Some(d) = st.as_ref() {
            if !d.done.is_finished() {
                return Ok(());
            }
        }
        if let Some(old) = st.take() {
            let why = describe_end(old.done.await);
            results::say!(
                "railsweep: the server daemon in pod {} had ended ({why}); starting it again",
                self.pod
            );
        }
        // A daemon that cannot start (port in use) ends at once; the first rail's client then
        // fails to connect and `ended` adds the daemon's own words to that rail's error.
        let secret = self.secret.stdin_line();
        let turn = self.runner.start_turn().await;
        let daemon = if self.held {
            start_held(self.runner, &self.pod, &self.argv, &secret).await
        } else {
            // An older rdmabw: its input closed after the secret, stopped by signal.
            self.runner
                .spawn(&self.pod, &self.argv, Some(secret))
                .await
                .map(|s| Daemon {
                    pid: s.pid,
                    stdin: None,
                    done: s.done,
                })
        }
        .map_err(|e| {
            format!(
                "cannot start the rdmabw server daemon in pod {}: {}",
                self.pod,
                crate::exit::words(&e)
            )
        })?;
        drop(turn);
        *st = Some(daemon);
        Ok(())
    }

    /// If the daemon has ended, how (and forget it, so that `ensure` starts a new one). Called
    /// after a rail failed: a client in a batch reports a dead peer within milliseconds, before
    /// the daemon's own end may have been seen, so this waits up to `grace` for it.
    pub(super) async fn ended(&self, grace: Duration) -> Option<String> {
        let t0 = Instant::now();
        loop {
            {
                let mut st = self.state.lock().await;
                match st.as_ref() {
                    Some(d) if d.done.is_finished() => {
                        let d = st.take()?;
                        return Some(describe_end(d.done.await));
                    }
                    Some(_) => {}
                    None => return None,
                }
            }
            if t0.elapsed() >= grace {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// End the daemon: close its input (`--exit-on-stdin-eof`: it stops as on SIGTERM, with no
    /// second exec); if it has not ended within 3 s, SIGTERM through the runner, then SIGKILL.
    pub(super) async fn stop(&self) {
        let Some(mut d) = self.state.lock().await.take() else {
            return;
        };
        if let Some(mut w) = d.stdin.take() {
            // Shutting the writer down closes the pipe (on Kubernetes, the exec's stdin stream).
            let _ = w.shutdown().await;
            drop(w);
            if d.done.is_finished()
                || tokio::time::timeout(DAEMON_STDIN_EOF_WAIT, &mut d.done)
                    .await
                    .is_ok()
            {
                return;
            }
            results::say!(
                "railsweep: warning: the server daemon (pid {}) in pod {} did not stop within {} s of the end of its input; stopping it by signal",
                d.pid,
                self.pod,
                DAEMON_STDIN_EOF_WAIT.as_secs()
            );
        }
        let _ = stop_process(self.runner, &self.pod, d.pid, &mut d.done, "server daemon").await;
    }
}

/// Stop a spawned process: TERM, wait 3 s, KILL, wait 2 s; its output if it ended. Only while
/// it is known to run (its exec session has not reported an end), so a recycled PID is never
/// signalled.
pub(super) async fn stop_process<R: Runner, T>(
    runner: &R,
    pod: &str,
    pid: u32,
    done: &mut JoinHandle<Result<T>>,
    what: &str,
) -> Option<T> {
    let mut sent = Signal::Term;
    for (signal, wait) in [(Signal::Term, 3.0), (Signal::Kill, 2.0)] {
        if done.is_finished() {
            break;
        }
        sent = signal;
        let mut stalled = false;
        if let Err(e) = runner.kill(pod, pid, signal).await {
            stalled = e.downcast_ref::<StreamStalled>().is_some();
            if !done.is_finished() {
                results::say!(
                    "railsweep: warning: stopping the {what} (pid {pid}) in pod {pod}: {}",
                    crate::exit::words(&e)
                );
            }
        }
        if let Ok(r) = tokio::time::timeout(Duration::from_secs_f64(wait), &mut *done).await {
            return r.ok().and_then(Result::ok);
        }
        if stalled {
            // The pod's node does not answer: a second signal would wait as long again.
            break;
        }
    }
    if done.is_finished() {
        return done.await.ok().and_then(Result::ok);
    }
    results::say!(
        "railsweep: warning: the {what} (pid {pid}) in pod {pod} did not end after SIG{}",
        sent.name()
    );
    done.abort();
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn a_tail_keeps_the_last_bytes_from_a_line_start() {
        let mut b = Vec::new();
        keep_tail(&mut b, b"one\ntwo\n", 16);
        assert_eq!(b, b"one\ntwo\n");
        keep_tail(&mut b, b"three\nfour\n", 16);
        assert_eq!(b, b"two\nthree\nfour\n");
        // One line longer than the cap: its last bytes.
        let mut b = Vec::new();
        keep_tail(&mut b, &[b'x'; 100], 16);
        assert_eq!(b.len(), 16);
    }

    /// Issue 53, finding 2: a daemon's stdout was kept whole (a flooding daemon took
    /// railsweep to 498 MB in 4 s). Both its streams are kept to their tails.
    #[tokio::test]
    async fn a_flooding_daemons_output_is_kept_to_a_bounded_tail() {
        let runner = crate::runner::LocalRunner::new();
        let argv: Vec<String> = [
            "sh",
            "-c",
            "head -c 40000000 /dev/zero; echo; echo bye; head -c 40000000 /dev/zero >&2",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let d = start_held(&runner, crate::runner::local::HOST, &argv, b"secret\n")
            .await
            .unwrap();
        drop(d.stdin);
        let out = d.done.await.unwrap().unwrap();
        assert!(
            out.stdout.len() <= DAEMON_STDERR_TAIL,
            "{}",
            out.stdout.len()
        );
        assert!(
            out.stdout.ends_with(b"bye\n"),
            "{:?}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            out.stderr.len() <= DAEMON_STDERR_TAIL,
            "{}",
            out.stderr.len()
        );
    }

    #[tokio::test]
    pub(super) async fn a_daemons_stderr_is_kept_to_a_bounded_tail() {
        // 20 MB of forged lines (issue 31: 20 refused hellos with a 1 MB name), then the line
        // that says why the daemon ended.
        let mut text = Vec::new();
        for _ in 0..20 {
            text.extend_from_slice(&vec![b'a'; 1 << 20]);
            text.push(b'\n');
        }
        text.extend_from_slice(b"rdmabw server: stopped\n");
        let buf = Arc::new(StdMutex::new(Vec::new()));
        let r: Pin<Box<dyn AsyncRead + Send>> = Box::pin(std::io::Cursor::new(text));
        read_into(r, Arc::clone(&buf), Some(DAEMON_STDERR_TAIL)).await;
        let kept = buf.lock().unwrap().clone();
        assert!(kept.len() <= DAEMON_STDERR_TAIL, "{}", kept.len());
        assert!(kept.ends_with(b"rdmabw server: stopped\n"));
    }
}
