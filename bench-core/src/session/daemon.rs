//! A `--daemon` server: test after test on one port, one thread per test.
//!
//! A connection goes through two stages. Before admission (its hello read, its version,
//! secret and values checked: [`super::admit`]) it waits in the gate: a first byte within 1 s, a
//! hello within 2 s, and caps on connections waiting per source and in all, where a new
//! connection evicts an older one that stays silent instead of being refused itself (see
//! [`super::gate`]). Nothing it sends is logged. Only an admitted client takes one of the
//! `--max-tests` slots, so silent or refused connections cannot lock out a client that holds
//! the run's secret.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::config::ServerConfig;
use super::error::SessionError;
use super::gate::{Admission, Gate};
use super::outcome::Outcome;
use super::resolve::ServerShared;
use super::server::{serve_admitted, Listener};
use super::{Log, POLL};
use crate::control::DeviceClaims;

/// What a daemon reports after each connection: an admitted test's outcome, or
/// [`SessionError::NotAdmitted`] for a connection that never became a test.
pub type OnTest = Arc<dyn Fn(&SocketAddr, &Result<Outcome, SessionError>) + Send + Sync>;

/// The first pause after `accept` fails (file descriptors exhausted, say), and the longest:
/// the pause doubles while it keeps failing.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

/// A count of things held at once, each held through a [`Slot`] that gives it back when
/// dropped: when its test ends, fails, or its thread panics.
#[derive(Debug, Clone, Default)]
pub(crate) struct Slots(Arc<AtomicUsize>);

/// One of [`Slots`], given back on drop.
#[derive(Debug)]
pub(crate) struct Slot(Arc<AtomicUsize>);

impl Slots {
    /// A slot, if fewer than `max` are held.
    pub(crate) fn try_take(&self, max: usize) -> Option<Slot> {
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(&self.0)))
    }

    /// How many are held now.
    pub(crate) fn held(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A `--daemon` server: test after test on one port, each on its own thread, one test per
/// device at a time, at most `cfg.limits.max_tests` admitted tests at once.
pub struct Daemon {
    cfg: Arc<ServerConfig>,
    shared: ServerShared,
    admission: Admission,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("shared", &self.shared)
            .field("limits", &self.cfg.limits)
            .field("admission", &self.admission)
            .finish()
    }
}

impl Daemon {
    /// A daemon with `cfg` and a fresh device registry.
    pub fn new(cfg: ServerConfig) -> Daemon {
        Daemon::with_claims(cfg, DeviceClaims::new())
    }

    /// A daemon sharing `claims` (tests pre-claim devices through it).
    pub fn with_claims(cfg: ServerConfig, claims: DeviceClaims) -> Daemon {
        Daemon {
            cfg: Arc::new(cfg),
            shared: ServerShared::with_claims(claims),
            admission: Admission::DEFAULT,
        }
    }

    /// The same daemon with another budget for connections before admission.
    pub fn with_admission(mut self, admission: Admission) -> Daemon {
        self.admission = admission;
        self
    }

    /// Serves until `stop` is raised; then stops the running tests (their peers are told) and
    /// waits up to 5 s for them. A failing `accept` (no file descriptors left) is retried
    /// after a pause, not the end of the daemon.
    pub fn run(
        &self,
        listener: &Listener,
        stop: &Arc<AtomicBool>,
        log: &Log,
        on_test: &OnTest,
    ) -> io::Result<()> {
        let running = Slots::default();
        let gate = Gate::new(self.admission);
        let flags: Arc<Mutex<Vec<Weak<AtomicBool>>>> = Arc::new(Mutex::new(Vec::new()));
        let mut backoff = ACCEPT_BACKOFF.0;
        loop {
            // A connection, and its place among those waiting for admission (an older silent
            // one making room if need be). Both fail only when file descriptors run out: the
            // daemon then pauses and goes on.
            let entered = listener.accept(stop).and_then(|s| {
                let Some(s) = s else { return Ok(None) };
                let peer = s
                    .peer_addr()
                    .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
                let ticket = gate.enter(&s, peer)?;
                Ok(Some((s, peer, ticket)))
            });
            let (stream, peer, ticket) = match entered {
                Ok(Some(e)) => {
                    backoff = ACCEPT_BACKOFF.0;
                    e
                }
                Ok(None) => break,
                Err(e) => {
                    if backoff == ACCEPT_BACKOFF.0 {
                        log(&format!("cannot accept connections ({e}); retrying"));
                    }
                    let until = Instant::now() + backoff;
                    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                        thread::sleep(POLL);
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF.1);
                    continue;
                }
            };
            let test_stop = Arc::new(AtomicBool::new(false));
            {
                let mut f = flags.lock().unwrap_or_else(|e| e.into_inner());
                f.retain(|w| w.strong_count() > 0);
                f.push(Arc::downgrade(&test_stop));
            }
            let (cfg, shared, log2, on_test) = (
                Arc::clone(&self.cfg),
                self.shared.clone(),
                Arc::clone(log),
                Arc::clone(on_test),
            );
            let (running2, gate2) = (running.clone(), gate.clone());
            let spawned = thread::Builder::new()
                .name(format!("rdmabw-test-{peer}"))
                .spawn(move || {
                    let admitted = match gate2.admit(&cfg, stream, ticket) {
                        Ok(a) => a,
                        Err(e) => {
                            on_test(&peer, &Err(SessionError::NotAdmitted(Box::new(e))));
                            return;
                        }
                    };
                    let max = cfg.limits.max_tests as usize;
                    let Some(_slot) = running2.try_take(max) else {
                        if let Some(reason) = cfg.limits.check_running(running2.held().max(max)) {
                            log2(&format!("{peer}: refused: {reason}"));
                            let e = admitted.refuse(reason);
                            on_test(&peer, &Err(e));
                        }
                        return;
                    };
                    let tagged: Log = {
                        let log2 = Arc::clone(&log2);
                        Arc::new(move |m: &str| log2(&format!("[{peer}] {m}")))
                    };
                    let r = serve_admitted(&cfg, admitted, &shared, &test_stop, &tagged);
                    on_test(&peer, &r);
                });
            if let Err(e) = spawned {
                log(&format!(
                    "{peer}: cannot start a thread for the connection: {e}"
                ));
            }
        }
        // Stopping: tell every running test.
        for w in flags.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            if let Some(f) = w.upgrade() {
                f.store(true, Ordering::Relaxed);
            }
        }
        gate.evict_all();
        let deadline = Instant::now() + Duration::from_secs(5);
        while (running.held() > 0 || gate.len() > 0) && Instant::now() < deadline {
            thread::sleep(POLL);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_slot_comes_back_when_its_test_panics() {
        let slots = Slots::default();
        let held = slots.try_take(1);
        assert!(held.is_some());
        assert!(slots.try_take(1).is_none(), "one slot, taken");
        drop(held);
        let s2 = slots.clone();
        let panicked = thread::spawn(move || {
            let _slot = s2.try_take(1);
            panic!("a test that panics");
        })
        .join();
        assert!(panicked.is_err());
        assert_eq!(slots.held(), 0);
        assert!(slots.try_take(1).is_some());
    }
}
