//! One `rdmabw batch` in the client pod for a whole sequential sweep: the rails' tests are sent
//! to it one after another as argument vectors, so a sweep starts one client process (and, on
//! Kubernetes, makes one exec) instead of one per rail. Each test's output comes back as the
//! [`Output`] a client process of its own would have left, so it is read the same way.

use std::pin::Pin;

use anyhow::{Context, Result};
use results::rdmabw::report::BatchEnd;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::rdmabw::RunSecret;
use crate::runner::bounded::{self, BoundedLines, Line, Tail};
use crate::runner::{Exit, Output, Runner};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Out,
    Err,
}

/// How one test sent to the batch ended.
#[derive(Debug)]
pub enum TestEnd {
    /// It ran to its end line: its output and exit code.
    Ended(Output),
    /// The batch process ended first: the test's output so far, and how the process ended.
    Gone(Output),
}

/// A running `rdmabw batch`.
pub struct BatchClient {
    pid: u32,
    /// `None` once closed.
    stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    lines: mpsc::Receiver<(Stream, Line)>,
    done: JoinHandle<Result<Exit>>,
    /// Tests sent so far (the next end line to wait for).
    sent: u64,
    /// The output of the test in progress (the tails of its streams), kept here so that it
    /// outlives a cancelled [`BatchClient::run`] (its last words after a deadline).
    out: Tail,
    err: Tail,
}

/// An empty tail of a test's stream.
fn new_tail() -> Tail {
    Tail::new(bounded::STREAM_TAIL, bounded::MAX_LINE)
}

impl std::fmt::Debug for BatchClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchClient")
            .field("pid", &self.pid)
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

/// Lines read ahead of the test that takes them: with lines of up to [`bounded::MAX_LINE`],
/// what a batch printing between tests makes railsweep hold (the batch then waits).
const LINES_AHEAD: usize = 16;

/// Send the lines of `stream` to `tx` as they come, none longer than [`bounded::MAX_LINE`]
/// (a longer one goes as [`Line::Overlong`]; one without a newline took railsweep to 2.2 GB).
fn forward(
    stream: Pin<Box<dyn AsyncRead + Send>>,
    which: Stream,
    tx: mpsc::Sender<(Stream, Line)>,
) {
    tokio::spawn(async move {
        let mut lines = BoundedLines::new(stream, bounded::MAX_LINE);
        while let Some(l) = lines.next_line().await {
            if tx.send((which, l)).await.is_err() {
                break;
            }
        }
    });
}

/// How long a gone batch's streams may still carry its last lines after its exit (a process it
/// started could hold them open: then what came so far is its last words).
const STREAMS_AFTER_EXIT: std::time::Duration = std::time::Duration::from_secs(2);

/// `rdmabw batch --secret-stdin`: the run's secret is the first line of its input.
pub fn batch_argv(bin: &str) -> Vec<String> {
    vec![
        bin.to_string(),
        "batch".to_string(),
        crate::rdmabw::SECRET_STDIN.to_string(),
    ]
}

impl BatchClient {
    /// Starts `bin batch` in `pod`, its tests presenting `secret`.
    pub async fn start<R: Runner>(
        runner: &R,
        pod: &str,
        bin: &str,
        secret: &RunSecret,
    ) -> Result<BatchClient> {
        let mut p = runner
            .start(pod, &batch_argv(bin))
            .await
            .with_context(|| format!("cannot start `{bin} batch` in pod {pod}"))?;
        // A batch that ends at once (an older rdmabw) may have closed its input already: its
        // own words then come with the first test.
        let _ = p.stdin.write_all(&secret.stdin_line()).await;
        let (tx, lines) = mpsc::channel(LINES_AHEAD);
        forward(p.stdout, Stream::Out, tx.clone());
        forward(p.stderr, Stream::Err, tx);
        Ok(BatchClient {
            pid: p.pid,
            stdin: Some(p.stdin),
            lines,
            done: p.done,
            sent: 0,
            out: new_tail(),
            err: new_tail(),
        })
    }

    /// The batch process's PID in its pod.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Tests sent to it so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Its end, for [`crate::sweep`]'s stopping.
    pub fn done_mut(&mut self) -> &mut JoinHandle<Result<Exit>> {
        &mut self.done
    }

    /// Runs one test: `args` are `rdmabw client` arguments without the program name. Cancel
    /// safe in the sense that matters here: a dropped call leaves the output so far in
    /// [`BatchClient::last_words`], and the caller then stops the batch.
    pub async fn run(&mut self, args: &[String]) -> TestEnd {
        self.out = new_tail();
        self.err = new_tail();
        let mut line = serde_json::to_string(args).unwrap_or_default();
        line.push('\n');
        self.sent += 1;
        let n = self.sent;
        let Some(stdin) = self.stdin.as_mut() else {
            return TestEnd::Gone(self.ended().await);
        };
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            return TestEnd::Gone(self.ended().await);
        }
        let (mut out_end, mut err_end) = (None::<BatchEnd>, None::<BatchEnd>);
        while out_end.is_none() || err_end.is_none() {
            let Some((which, l)) = self.lines.recv().await else {
                return TestEnd::Gone(self.ended().await);
            };
            match self.keep(which, &l) {
                Some(e) if e.test == n => match which {
                    Stream::Out => out_end = Some(e),
                    Stream::Err => err_end = Some(e),
                },
                // A stale end line (from a test already given up on) is nobody's output.
                _ => {}
            }
        }
        let code = out_end.map_or(0, |e| e.exit_code);
        TestEnd::Ended(self.output(Exit::Code(code)))
    }

    /// The output of the test in progress so far, ending with `exit`.
    fn output(&self, exit: Exit) -> Output {
        Output::from_tails(exit, self.out.clone(), self.err.clone())
    }

    /// The output of the test in progress so far (after its process has been stopped: all of it).
    pub fn last_words(&mut self) -> Output {
        while let Ok((which, l)) = self.lines.try_recv() {
            self.keep(which, &l);
        }
        self.output(Exit::Error("stopped".into()))
    }

    /// Keeps a line of the test in progress, without its end marker (a line that was only the
    /// marker adds nothing); returns the marker. A line over the limit is kept as such: the
    /// test's output names it.
    fn keep(&mut self, which: Stream, line: &Line) -> Option<BatchEnd> {
        let tail = match which {
            Stream::Out => &mut self.out,
            Stream::Err => &mut self.err,
        };
        let line = match line {
            Line::Text(l) => l,
            Line::Overlong(end) => {
                // Left out, noted; the end line may follow it on the same line.
                tail.left_out_a_line();
                return BatchEnd::split(end).1;
            }
        };
        let (text, end) = BatchEnd::split(line);
        if end.is_none() || !text.is_empty() {
            tail.push(text.as_bytes());
            tail.push(b"\n");
        }
        end
    }

    /// The batch has gone (its input refused or its streams closed): wait for its exit and
    /// hand over all it wrote.
    async fn ended(&mut self) -> Output {
        let exit = match (&mut self.done).await {
            Ok(Ok(e)) => e,
            Ok(Err(e)) => Exit::Error(crate::exit::words(&e)),
            Err(e) => Exit::Error(e.to_string()),
        };
        // The process's end does not mean its streams have been read to their end: an rdmabw
        // without `batch` exits at once, and its "unrecognized subcommand" may still be in the
        // pipe. The channel closes when both streams have ended.
        let _ = tokio::time::timeout(STREAMS_AFTER_EXIT, async {
            while let Some((which, l)) = self.lines.recv().await {
                self.keep(which, &l);
            }
        })
        .await;
        let mut words = self.last_words();
        words.exit = exit;
        words
    }

    /// Ends the batch the polite way: close its input, so that it exits after the test in
    /// progress (there is none when this is called). `false` when it has not ended within
    /// `wait`: the caller then stops it by PID.
    pub async fn close(&mut self, wait: std::time::Duration) -> bool {
        // Dropping the writer closes the pipe (or, on Kubernetes, the exec's stdin channel).
        if let Some(mut w) = self.stdin.take() {
            let _ = w.shutdown().await;
        }
        if self.done.is_finished() {
            return true;
        }
        tokio::time::timeout(wait, &mut self.done).await.is_ok()
    }
}
