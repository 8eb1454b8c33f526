//! The local runner: pods are network namespaces on this machine (`ip netns exec POD argv...`),
//! as in the Soft-RoCE lab, or `-` for this machine's own namespace (a bare-metal host).

use std::path::Path;
use std::process::Stdio;

use anyhow::{bail, Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};

use super::{bounded, Exit, Output, Piped, PodInfo, Runner, Signal, Spawned};

/// The pod name that means "this machine's own network namespace".
pub const HOST: &str = "-";

/// Runs commands in network namespaces of this machine.
#[derive(Debug, Clone, Default)]
pub struct LocalRunner {
    /// Where named namespaces live (`ip netns` keeps them in /run/netns).
    netns_dir: Option<std::path::PathBuf>,
}

impl LocalRunner {
    /// A runner for the namespaces `ip netns` knows.
    pub fn new() -> Self {
        LocalRunner::default()
    }

    /// [`Self::command`] started, and its PID.
    fn started(&self, pod: &str, argv: &[String], stdin: bool) -> Result<(Child, u32)> {
        let child = self
            .command(pod, argv, stdin)?
            .spawn()
            .with_context(|| format!("cannot start {} in {pod}", argv[0]))?;
        let pid = child
            .id()
            .context("the process ended before its PID was read")?;
        Ok((child, pid))
    }

    /// `argv` in `pod`, its stdout and stderr piped, its stdin piped when `stdin` (else
    /// empty), killed if railsweep drops it (if railsweep itself goes away without cleaning
    /// up, the process goes with it).
    fn command(&self, pod: &str, argv: &[String], stdin: bool) -> Result<Command> {
        let Some((program, args)) = argv.split_first() else {
            bail!("empty command");
        };
        let mut cmd = if pod == HOST {
            let mut c = Command::new(program);
            c.args(args);
            c
        } else {
            // `ip netns exec` switches namespace and then execs argv itself (no fork, no shell),
            // so the child's PID is the command's PID.
            let mut c = Command::new("ip");
            c.args(["netns", "exec", pod]).arg(program).args(args);
            c
        };
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.stdin(if stdin { Stdio::piped() } else { Stdio::null() });
        cmd.kill_on_drop(true);
        Ok(cmd)
    }

    fn netns_path(&self, pod: &str) -> std::path::PathBuf {
        self.netns_dir
            .clone()
            .unwrap_or_else(|| "/run/netns".into())
            .join(pod)
    }
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Code(128 + s),
        (None, None) => Exit::Error("ended without an exit code".into()),
    }
}

/// Wait for `child` to end, reading its stdout and stderr meanwhile into their tails
/// ([`bounded`]: what a process prints costs railsweep at most that, however much it is).
async fn output_of(mut child: Child) -> std::io::Result<Output> {
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (stdout, stderr, status) = tokio::join!(
        bounded::read_tail(stdout, b"", bounded::STREAM_TAIL),
        bounded::read_tail(stderr, b"", bounded::STREAM_TAIL),
        child.wait()
    );
    Ok(Output::from_tails(exit_of(status?), stdout, stderr))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

impl Runner for LocalRunner {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn cluster(&self) -> String {
        hostname()
    }

    async fn describe(&self, pod: &str) -> Result<PodInfo> {
        if pod != HOST && !Path::new(&self.netns_path(pod)).exists() {
            bail!(
                "no network namespace {pod} on this machine ({} does not exist; `ip netns list` shows those there are)",
                self.netns_path(pod).display()
            );
        }
        Ok(PodInfo {
            name: pod.to_string(),
            node: if pod == HOST {
                hostname()
            } else {
                pod.to_string()
            },
            host_network: None,
            container: None,
        })
    }

    async fn exec(&self, pod: &str, argv: &[String], stdin: Option<Vec<u8>>) -> Result<Output> {
        let mut cmd = self.command(pod, argv, stdin.is_some())?;
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return Ok(Output::new(
                    Exit::Error(format!("cannot run {}: {e}", argv[0])),
                    vec![],
                    vec![],
                ))
            }
        };
        if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
            // Write stdin while the output is read, so a large input cannot deadlock.
            tokio::spawn(async move {
                let _ = pipe.write_all(&data).await;
                let _ = pipe.shutdown().await;
            });
        }
        output_of(child)
            .await
            .with_context(|| format!("waiting for {}", argv[0]))
    }

    async fn spawn(&self, pod: &str, argv: &[String], stdin: Option<Vec<u8>>) -> Result<Spawned> {
        let (mut child, pid) = self.started(pod, argv, stdin.is_some())?;
        if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
            // Small (a secret's line): written, then closed, before anything waits on it.
            let _ = pipe.write_all(&data).await;
        }
        let done = tokio::spawn(async move { Ok(output_of(child).await?) });
        Ok(Spawned { pid, done })
    }

    async fn start(&self, pod: &str, argv: &[String]) -> Result<Piped> {
        let (mut child, pid) = self.started(pod, argv, true)?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            bail!("{} in {pod} has no pipes", argv[0]);
        };
        let done = tokio::spawn(async move { Ok(exit_of(child.wait().await?)) });
        Ok(Piped {
            pid,
            stdin: Box::pin(stdin),
            stdout: Box::pin(stdout),
            stderr: Box::pin(stderr),
            done,
        })
    }

    async fn kill(&self, _pod: &str, pid: u32, signal: Signal) -> Result<()> {
        // One PID namespace for every network namespace here: signal it from the host side.
        let sig = match signal {
            Signal::Term => rustix::process::Signal::TERM,
            Signal::Kill => rustix::process::Signal::KILL,
        };
        // One positive PID, never 0 or -1 (a process group or every process).
        let target = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput));
        let sent = target
            .and_then(|p| rustix::process::kill_process(p, sig).map_err(std::io::Error::from));
        sent.with_context(|| {
            format!(
                "kill -s {} {pid} failed (the process may be gone)",
                signal.name()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// `v` run to its end by a new local runner, with `stdin`.
    async fn exec(v: &[&str], stdin: Option<Vec<u8>>) -> Output {
        LocalRunner::new()
            .exec(HOST, &argv(v), stdin)
            .await
            .expect("runs")
    }

    #[tokio::test]
    async fn exec_reports_exit_code_and_streams() {
        let out = exec(&["sh", "-c", "echo out; echo err >&2; exit 3"], None).await;
        assert_eq!(out.exit, Exit::Code(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[tokio::test]
    async fn exec_feeds_stdin() {
        let data = vec![7u8; 300_000];
        let out = exec(&["wc", "-c"], Some(data)).await;
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "300000");
    }

    #[tokio::test]
    async fn missing_program_is_an_exit_error() {
        let out = exec(&["/nonexistent/rdmabw", "--version"], None).await;
        assert!(matches!(out.exit, Exit::Error(_)), "{:?}", out.exit);
    }

    #[tokio::test]
    async fn spawned_process_can_be_killed() {
        let r = LocalRunner::new();
        let s = r
            .spawn(HOST, &argv(&["sleep", "30"]), None)
            .await
            .expect("starts");
        r.kill(HOST, s.pid, Signal::Term).await.expect("kills");
        let out = s.done.await.expect("joins").expect("output");
        assert_eq!(out.exit, Exit::Code(128 + 15));
    }

    /// Issue 53, finding 2: a process's output was kept whole, so a flood took railsweep's
    /// memory with it. Of a flood of lines the end is kept; a line without a newline is left
    /// out and named.
    #[tokio::test]
    async fn a_flood_of_output_is_kept_to_its_tail() {
        let out = exec(
            &[
                "sh",
                "-c",
                "yes 'a line of output' | head -n 3000000; echo the end; \
                 head -c 20000000 /dev/zero >&2; echo >&2; echo last words >&2",
            ],
            None,
        )
        .await;
        assert!(
            out.stdout.len() <= bounded::STREAM_TAIL,
            "{} bytes",
            out.stdout.len()
        );
        assert!(out.stdout.ends_with(b"a line of output\nthe end\n"));
        assert!(out.stderr.len() <= bounded::STREAM_TAIL);
        assert_eq!(out.stderr, b"last words\n");
        assert_eq!(
            out.overlong.map(|o| o.stream),
            Some("stderr"),
            "the 20 MB line is named"
        );
        assert!(out.stderr_tail(1).contains("last words"));
        let spawned = LocalRunner::new()
            .spawn(
                HOST,
                &argv(&["sh", "-c", "head -c 30000000 /dev/zero"]),
                None,
            )
            .await
            .expect("starts");
        let out = spawned.done.await.expect("joins").expect("output");
        assert!(out.stdout.is_empty() && out.overlong.is_some());
    }

    #[tokio::test]
    async fn unknown_namespace_is_named() {
        let r = LocalRunner::new();
        let err = r.describe("no-such-pod-xyz").await.expect_err("fails");
        assert!(err.to_string().contains("no-such-pod-xyz"), "{err}");
    }
}
