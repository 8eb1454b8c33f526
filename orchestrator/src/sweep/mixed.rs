//! Attempts with perftest at one end of a rail: rdmabw's client against `ib_write_bw`'s server
//! (`--server-tool ib_write_bw`), and `ib_write_bw`'s client against a one-test rdmabw server
//! (`--client-tool ib_write_bw`).

use std::time::{Duration, Instant};

use results::rdmabw::report::BwReport;
use tokio_util::sync::CancellationToken;

use super::daemon::{describe_end, start_piped, stop_process};
use super::perftest;
use super::rail::{Attempt, Ran, Sweep, PERFTEST_SERVER_END};
use crate::plan::RailPair;
use crate::rdmabw::{self, ClientOutcome};
use crate::runner::bounded::STREAM_TAIL;
use crate::runner::{Output, Runner};

/// How a one-test rdmabw server came up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Up {
    /// It said it listens ([`results::rdmabw::SERVER_LISTENING`]).
    Listening,
    /// It ended first.
    Ended,
    /// Neither within the time allowed.
    TimedOut,
    /// Ctrl-C.
    Interrupted,
}

/// How often [`listening`] looks at the server's stderr.
const LISTENING_POLL: Duration = Duration::from_millis(20);

/// Wait up to `within` for a server started with [`start_piped`] to say that it listens on
/// its `stderr`, or to end.
async fn listening<T>(
    stderr: &std::sync::Mutex<Vec<u8>>,
    done: &tokio::task::JoinHandle<T>,
    within: Duration,
    cancel: &CancellationToken,
) -> Up {
    let t0 = Instant::now();
    let said = results::rdmabw::SERVER_LISTENING.as_bytes();
    loop {
        let seen = stderr
            .lock()
            .is_ok_and(|b| b.windows(said.len()).any(|w| w == said));
        if seen {
            return Up::Listening;
        }
        if done.is_finished() {
            return Up::Ended;
        }
        if t0.elapsed() >= within {
            return Up::TimedOut;
        }
        tokio::select! {
            () = tokio::time::sleep(LISTENING_POLL) => {}
            () = cancel.cancelled() => return Up::Interrupted,
        }
    }
}

/// Why a one-test rdmabw server that measured nothing failed, from its output (`None`: it was
/// stopped, or its output was lost), and its report where it printed one.
fn server_failure(out: Option<&Output>) -> (String, Option<Box<BwReport>>) {
    match out.map(rdmabw::parse_server) {
        Some(ClientOutcome::Failed(why, rep)) => (why, rep),
        // Its client failed after sending its figures: the row is failed, the report kept.
        Some(ClientOutcome::Measured(rep)) => ("it measured the test".into(), Some(rep)),
        None => ("railsweep stopped it, or its output was lost".into(), None),
    }
}

impl<R: Runner> Sweep<'_, R> {
    /// The port of `rail`'s one-test server (perftest's or rdmabw's): `-p` plus the rail, or
    /// the failed attempt that says it is past 65535.
    fn rail_port(&self, rail: u32) -> Result<u16, Attempt> {
        perftest::rail_port(self.cfg.port, rail).ok_or_else(|| {
            Attempt::Failed(
                format!(
                    "rail {rail}'s server port, -p {} + {rail}, is past 65535: give a lower -p",
                    self.cfg.port
                ),
                None,
            )
        })
    }

    /// One bandwidth attempt on `pair`'s rail against perftest's server (`--server-tool
    /// ib_write_bw`): start `ib_write_bw` for this rail in the server pod, run rdmabw's client
    /// against it with perftest's exchange (the client keeps trying to connect until its
    /// `--connect-timeout` while the server comes up), then see the server end by itself after
    /// its one test, or stop it. A failed attempt's reason ends with the server's last words.
    pub(super) async fn perftest_attempt(&self, pair: &RailPair) -> Attempt {
        let (Some(mut test), Some(server_row)) = (self.client_test(pair), pair.server.as_ref())
        else {
            return Attempt::Failed("rail missing on one side".into(), None);
        };
        let port = match self.rail_port(pair.rail) {
            Ok(port) => port,
            Err(refused) => return refused,
        };
        test.port = port;
        let server_argv = match perftest::server_argv(
            &self.cfg.ib_write_bw,
            server_row,
            port,
            self.cfg.duration_s,
            &self.cfg.test,
        ) {
            Ok(v) => v,
            Err(why) => return Attempt::Failed(why, None),
        };
        let pod = &self.prep.pods.server;
        if self.cfg.show_commands {
            results::say!(
                "railsweep: rail {}: in pod {pod}: {}",
                pair.rail,
                server_argv.join(" ")
            );
        }
        let deadline = self.cfg.deadline();
        let Some(turn) = self.start_turn().await else {
            return Attempt::Interrupted;
        };
        let spawned = tokio::select! {
            r = self.runner.spawn(pod, &server_argv, None) => r,
            _ = tokio::time::sleep(deadline) => return Attempt::Failed(format!(
                "could not start ib_write_bw in pod {pod} within the rail's deadline of {:.0} s",
                deadline.as_secs_f64()
            ), None),
            _ = self.cancel.cancelled() => return Attempt::Interrupted,
        };
        drop(turn);
        let mut server = match spawned {
            Ok(s) => s,
            Err(e) => {
                return Attempt::Failed(
                    format!(
                        "cannot start ib_write_bw in pod {pod}: {}",
                        crate::exit::words(&e)
                    ),
                    None,
                )
            }
        };
        let mut argv = rdmabw::client_argv(&self.prep.client_bin, &test);
        let addr = argv.pop().unwrap_or_default();
        argv.extend(perftest::CLIENT_FLAGS.iter().map(ToString::to_string));
        argv.push(addr);
        // perftest's server checks no secret: the client presents none.
        let ran = self.run_client(pair.rail, &argv, deadline, false).await;
        // Interrupted: the server is stopped at once, not waited for.
        let grace = if matches!(ran, Ran::Interrupted) {
            Duration::ZERO
        } else {
            PERFTEST_SERVER_END
        };
        let ended = match tokio::time::timeout(grace, &mut server.done).await {
            Ok(r) => Some(describe_end(r)),
            Err(_) => stop_process(
                self.runner,
                pod,
                server.pid,
                &mut server.done,
                "ib_write_bw server",
            )
            .await
            .map(|o| describe_end(Ok(Ok(o)))),
        };
        let words = |why: String| match &ended {
            Some(end) if !matches!(ran, Ran::Done(ref o) if o.exit.success()) => {
                format!("{why}; ib_write_bw in pod {pod}: {end}")
            }
            _ => why,
        };
        match &ran {
            Ran::Done(out) => match rdmabw::parse_client(out) {
                ClientOutcome::Measured(rep) => Attempt::Measured(rep),
                ClientOutcome::Failed(why, rep) => Attempt::Failed(words(why), rep),
            },
            Ran::Failed(why, cause) => Attempt::Broke(words(why.clone()), cause.clone()),
            Ran::Interrupted => Attempt::Interrupted,
        }
    }

    /// One bandwidth attempt on `pair`'s rail with perftest's client (`--client-tool
    /// ib_write_bw`): start a one-test `rdmabw server` for this rail in the server pod, wait
    /// until it listens (perftest's client connects once, without retrying), run `ib_write_bw`
    /// against it in the client pod, then see the server end by itself after its one test, or
    /// stop it. The figures are the server's report's: those the client sent it. A client that
    /// failed fails the attempt with its last words, and the server's where it said why.
    pub(super) async fn perftest_client_attempt(&self, pair: &RailPair) -> Attempt {
        let (Some(client_row), Some(server_row)) = (pair.client.as_ref(), pair.server.as_ref())
        else {
            return Attempt::Failed("rail missing on one side".into(), None);
        };
        let port = match self.rail_port(pair.rail) {
            Ok(port) => port,
            Err(refused) => return refused,
        };
        let (cfg, test) = (self.cfg, &self.cfg.test);
        let argvs = perftest::rdmabw_server_argv(
            &self.prep.server_bin,
            server_row,
            port,
            cfg.duration_s,
            test,
        )
        .and_then(|s| {
            perftest::client_argv(
                &cfg.ib_write_bw,
                client_row,
                server_row,
                port,
                cfg.duration_s,
                test,
            )
            .map(|c| (s, c))
        });
        let (server_argv, client_argv) = match argvs {
            Ok(v) => v,
            Err(why) => return Attempt::Failed(why, None),
        };
        let pod = &self.prep.pods.server;
        if cfg.show_commands {
            results::say!(
                "railsweep: rail {}: in pod {pod}: {}",
                pair.rail,
                server_argv.join(" ")
            );
        }
        let deadline = cfg.perftest_client_deadline();
        let Some(turn) = self.start_turn().await else {
            return Attempt::Interrupted;
        };
        let started = tokio::select! {
            r = start_piped(self.runner, pod, &server_argv, None, STREAM_TAIL) => r,
            _ = tokio::time::sleep(deadline) => return Attempt::Failed(format!(
                "could not start rdmabw's server in pod {pod} within the rail's deadline of {:.0} s",
                deadline.as_secs_f64()
            ), None),
            _ = self.cancel.cancelled() => return Attempt::Interrupted,
        };
        drop(turn);
        let (mut server, stderr) = match started {
            Ok(s) => s,
            Err(e) => {
                return Attempt::Failed(
                    format!(
                        "cannot start rdmabw's server in pod {pod}: {}",
                        crate::exit::words(&e)
                    ),
                    None,
                )
            }
        };
        let up = listening(&stderr, &server.done, deadline, &self.cancel).await;
        if up != Up::Listening {
            let ended = if up == Up::Ended {
                (&mut server.done).await.ok().and_then(Result::ok)
            } else {
                stop_process(
                    self.runner,
                    pod,
                    server.pid,
                    &mut server.done,
                    "rdmabw server",
                )
                .await
            };
            return match up {
                Up::Interrupted => Attempt::Interrupted,
                _ => {
                    let (why, rep) = server_failure(ended.as_ref());
                    let what = if up == Up::Ended {
                        "ended before it listened"
                    } else {
                        "did not listen within the rail's deadline"
                    };
                    Attempt::Failed(format!("rdmabw's server in pod {pod} {what}: {why}"), rep)
                }
            };
        }
        // perftest's client presents no secret; the server checks none.
        let ran = self
            .run_client(pair.rail, &client_argv, deadline, false)
            .await;
        // Interrupted: the server is stopped at once, not waited for.
        let grace = if matches!(ran, Ran::Interrupted) {
            Duration::ZERO
        } else {
            PERFTEST_SERVER_END
        };
        // `None`: railsweep stopped it (its test never came, or never ended).
        let served = match tokio::time::timeout(grace, &mut server.done).await {
            Ok(r) => Some(r.ok().and_then(Result::ok)),
            Err(_) => {
                let _ = stop_process(
                    self.runner,
                    pod,
                    server.pid,
                    &mut server.done,
                    "rdmabw server",
                )
                .await;
                None
            }
        };
        let client_pod = &self.prep.pods.client;
        let with_server = |why: String| match served.as_ref() {
            Some(out) => {
                let (server_why, rep) = server_failure(out.as_ref());
                Attempt::Failed(
                    format!("{why}; rdmabw's server in pod {pod}: {server_why}"),
                    rep,
                )
            }
            None => Attempt::Failed(
                format!("{why}; rdmabw's server in pod {pod}, still waiting, was stopped"),
                None,
            ),
        };
        match ran {
            Ran::Interrupted => Attempt::Interrupted,
            Ran::Failed(why, _) => with_server(why),
            Ran::Done(out) if !out.exit.success() => {
                let tail = out.stderr_tail(3);
                let said = if tail.is_empty() {
                    "and printed nothing on stderr".to_string()
                } else {
                    format!("and said: {tail}")
                };
                with_server(format!(
                    "ib_write_bw in pod {client_pod} ended with {} {said}",
                    out.exit
                ))
            }
            Ran::Done(_) => match served.as_ref() {
                Some(Some(out)) => match rdmabw::parse_server(out) {
                    ClientOutcome::Measured(rep) => Attempt::Measured(rep),
                    ClientOutcome::Failed(why, rep) => {
                        Attempt::Failed(format!("rdmabw's server in pod {pod}: {why}"), rep)
                    }
                },
                Some(None) => Attempt::Failed(
                    format!("rdmabw's server in pod {pod}: its output was lost"),
                    None,
                ),
                None => Attempt::Failed(
                    format!(
                        "ib_write_bw in pod {client_pod} ended, but rdmabw's server in pod {pod} \
                         did not end within {} s; railsweep stopped it",
                        PERFTEST_SERVER_END.as_secs()
                    ),
                    None,
                ),
            },
        }
    }
}
