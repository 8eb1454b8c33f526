//! Where commands run: one trait, two ways of reaching a pod.
//!
//! The sweep only ever asks a [`Runner`] to run an argument vector in a named pod, to start one
//! that it can stop later, and to describe a pod. [`KubeRunner`] does that through the
//! Kubernetes API (pod exec over WebSocket); [`LocalRunner`] through `ip netns exec` on this
//! machine (the lab's pods, or bare-metal hosts). Neither passes an argument vector through a
//! shell, with one exception that is spelled out at [`spawn_trampoline`].

pub mod bounded;
mod exec;
mod kube;
pub mod local;
pub mod retry;
pub mod timeout;

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use anyhow::Result;
use tokio::io::{AsyncRead, AsyncWrite};

pub use self::kube::{KubeRunner, KubeTarget, StreamStalled};
pub use local::LocalRunner;

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It ran and exited with this code (a signal `N` is reported as `128 + N`, as shells and
    /// container runtimes do).
    Code(i32),
    /// It could not be run or its end could not be observed; the reason, in words (for
    /// Kubernetes, the `message` of the exec's failure `Status`).
    Error(String),
}

impl Exit {
    /// True for exit code 0.
    pub fn success(&self) -> bool {
        *self == Exit::Code(0)
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit code {c}"),
            Exit::Error(e) => f.write_str(e),
        }
    }
}

/// Everything a finished command left behind: of its streams, their ends
/// ([`bounded::STREAM_TAIL`]) without lines longer than [`bounded::MAX_LINE`].
#[derive(Debug, Clone)]
pub struct Output {
    /// How it ended.
    pub exit: Exit,
    /// Its standard output (the end of it).
    pub stdout: Vec<u8>,
    /// Its standard error (the end of it).
    pub stderr: Vec<u8>,
    /// A line longer than [`bounded::MAX_LINE`] it printed (left out of `stdout` or
    /// `stderr`): the reader of its output fails it, naming this.
    pub overlong: Option<bounded::OverlongLine>,
}

impl Output {
    /// The output of a command that ended with `exit`, its streams what was read of them.
    pub fn new(exit: Exit, stdout: Vec<u8>, stderr: Vec<u8>) -> Output {
        Output {
            exit,
            stdout,
            stderr,
            overlong: None,
        }
    }

    /// The output of a command that ended with `exit`, from the tails of its streams.
    pub fn from_tails(exit: Exit, stdout: bounded::Tail, stderr: bounded::Tail) -> Output {
        let overlong = [("stdout", &stdout), ("stderr", &stderr)]
            .into_iter()
            .find(|(_, t)| t.overlong())
            .map(|(stream, _)| bounded::OverlongLine {
                stream,
                limit: bounded::MAX_LINE,
            });
        Output {
            exit,
            stdout: stdout.into_bytes(),
            stderr: stderr.into_bytes(),
            overlong,
        }
    }

    /// The last non-empty lines of stderr, joined with `; `, for error messages: one line of
    /// bounded length whatever the pod wrote ([`results::escape::log_line`]).
    pub fn stderr_tail(&self, lines: usize) -> String {
        let text = String::from_utf8_lossy(&self.stderr);
        let tail: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let start = tail.len().saturating_sub(lines);
        results::escape::log_line(&tail[start..].join("; "))
    }
}

/// What the sweep needs to know about a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    /// Pod name (Kubernetes) or network namespace (local).
    pub name: String,
    /// Node the pod runs on.
    pub node: String,
    /// Whether the pod shares its node's network (`hostNetwork: true`), when known.
    pub host_network: Option<bool>,
    /// The container commands run in, when there is a choice.
    pub container: Option<String>,
}

/// A command started with [`Runner::spawn`]: its process id in the pod, and its end.
#[derive(Debug)]
pub struct Spawned {
    /// The process id, as the pod's PID namespace sees it.
    pub pid: u32,
    /// Resolves once the process has ended, with its output.
    pub done: tokio::task::JoinHandle<Result<Output>>,
}

/// A command started with [`Runner::start`]: its process id in the pod, its three streams, and
/// its end. Dropping `stdin` closes the command's standard input.
pub struct Piped {
    /// The process id, as the pod's PID namespace sees it.
    pub pid: u32,
    /// The command's standard input.
    pub stdin: Pin<Box<dyn AsyncWrite + Send>>,
    /// Its standard output, as it comes.
    pub stdout: Pin<Box<dyn AsyncRead + Send>>,
    /// Its standard error, as it comes.
    pub stderr: Pin<Box<dyn AsyncRead + Send>>,
    /// Resolves once the process has ended, with how.
    pub done: tokio::task::JoinHandle<Result<Exit>>,
}

impl fmt::Debug for Piped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Piped")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// Signals the sweep sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Ask to end (rdmabw ends its test and exits).
    Term,
    /// Force the end.
    Kill,
}

impl Signal {
    /// The name `kill -s` takes.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Term => "TERM",
            Signal::Kill => "KILL",
        }
    }
}

/// Runs argument vectors in pods. Implementations must never pass `argv` through a shell.
pub trait Runner: Send + Sync + 'static {
    /// What kind of runner this is, for logs and rows (`kubernetes`, `local`).
    fn kind(&self) -> &'static str;

    /// The cluster (Kubernetes) or machine (local) name recorded in result rows.
    fn cluster(&self) -> String;

    /// Look a pod up: it must exist and be able to run commands.
    fn describe(&self, pod: &str) -> impl Future<Output = Result<PodInfo>> + Send;

    /// Run `argv` in `pod` to its end, feeding it `stdin` (then end of file) if given.
    fn exec(
        &self,
        pod: &str,
        argv: &[String],
        stdin: Option<Vec<u8>>,
    ) -> impl Future<Output = Result<Output>> + Send;

    /// Start `argv` in `pod` and return at once with its process id, so that it can be stopped
    /// with [`Runner::kill`] even when the connection to it is gone; it reads `stdin` (then end
    /// of file) if given, else nothing.
    fn spawn(
        &self,
        pod: &str,
        argv: &[String],
        stdin: Option<Vec<u8>>,
    ) -> impl Future<Output = Result<Spawned>> + Send;

    /// Start `argv` in `pod` with its standard streams connected, to talk to it while it runs
    /// (`rdmabw batch`); like [`Runner::spawn`], it can be stopped with [`Runner::kill`].
    fn start(&self, pod: &str, argv: &[String]) -> impl Future<Output = Result<Piped>> + Send;

    /// Send `signal` to process `pid` in `pod`.
    fn kill(&self, pod: &str, pid: u32, signal: Signal) -> impl Future<Output = Result<()>> + Send;

    /// Wait for a turn to start a process in a crowd of starts (a fleet's round starts a
    /// daemon and a client for every pair at once); the turn lasts while the [`StartTurn`]
    /// lives. A deadline on the start counts from the turn, not from the wait for it.
    fn start_turn(&self) -> impl Future<Output = StartTurn> + Send {
        std::future::ready(StartTurn(None))
    }
}

/// A turn to start a process ([`Runner::start_turn`]), first come first served; `None` where
/// starts are not limited.
#[derive(Debug)]
pub struct StartTurn(pub Option<tokio::sync::OwnedSemaphorePermit>);

/// The marker [`spawn_trampoline`] prints before the process id.
pub const PID_MARKER: &str = "railsweep-pid ";

/// The argument vector that starts `argv` so that its process id is known: `sh -c 'echo
/// "railsweep-pid $$"; exec "$@"' railsweep ARGV...`.
///
/// Closing a Kubernetes exec stream does not end the process behind it (the kubelet leaves it
/// running), so a process that railsweep may have to stop must be stoppable by a second exec:
/// that needs its PID. The shell here is a fixed two-command script; `argv` travels as its
/// positional parameters and is never parsed by the shell, and `exec` replaces the shell, so
/// the PID printed is the PID of `argv[0]` itself. It needs `sh` in the image (every image with
/// a libc has one; `--inject` needs it too).
pub fn spawn_trampoline(argv: &[String]) -> Vec<String> {
    let mut v = vec![
        "sh".to_string(),
        "-c".to_string(),
        format!("echo \"{PID_MARKER}$$\"; exec \"$@\""),
        "railsweep".to_string(),
    ];
    v.extend(argv.iter().cloned());
    v
}

/// The argument vector that sends `signal` to `pid`: `sh -c 'kill -s SIG "$1"' railsweep PID`
/// (the shell's built-in `kill`, because images without procps have no `kill` binary).
pub fn kill_argv(pid: u32, signal: Signal) -> Vec<String> {
    vec![
        "sh".to_string(),
        "-c".to_string(),
        format!("kill -s {} \"$1\"", signal.name()),
        "railsweep".to_string(),
        pid.to_string(),
    ]
}

/// Split the first line `railsweep-pid N` off the front of `buf`, once it is complete.
/// `Ok(None)`: not complete yet. `Err`: the first line is something else.
pub fn take_pid_line(buf: &mut Vec<u8>) -> Result<Option<u32>, String> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > 64 {
            return Err(format!(
                "expected `{PID_MARKER}N` first, got {:?}",
                String::from_utf8_lossy(&buf[..64])
            ));
        }
        return Ok(None);
    };
    let line: Vec<u8> = buf.drain(..=nl).collect();
    let text = String::from_utf8_lossy(&line);
    text.trim_end()
        .strip_prefix(PID_MARKER)
        .and_then(|n| n.parse::<u32>().ok())
        .map(Some)
        .ok_or_else(|| format!("expected `{PID_MARKER}N` first, got {:?}", text.trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trampoline_keeps_argv_out_of_the_script() {
        let argv: Vec<String> = ["rdmabw", "server", "--daemon", "a b; rm -rf /"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let t = spawn_trampoline(&argv);
        assert_eq!(&t[..2], &["sh", "-c"]);
        assert!(!t[2].contains("rdmabw"));
        assert_eq!(&t[4..], &argv[..]);
    }

    #[test]
    fn pid_line_is_split_off() {
        let mut buf = b"railsweep-pid 4242\n{\"x\":1}".to_vec();
        assert_eq!(take_pid_line(&mut buf), Ok(Some(4242)));
        assert_eq!(buf, b"{\"x\":1}");
        let mut partial = b"railsweep-p".to_vec();
        assert_eq!(take_pid_line(&mut partial), Ok(None));
        let mut wrong = b"sh: not found\n".to_vec();
        assert!(take_pid_line(&mut wrong).is_err());
    }

    #[test]
    fn stderr_tail_takes_last_lines() {
        let out = Output::new(Exit::Code(2), vec![], b"a\n\nb\nc\n".to_vec());
        assert_eq!(out.stderr_tail(2), "b; c");
        assert_eq!(Exit::Code(3).to_string(), "exit code 3");
    }
}
