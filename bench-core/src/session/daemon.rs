//! A `--daemon` server: test after test on one port, one thread per test.
//!
//! A connection goes through two stages. Before admission (its hello read, its version,
//! secret and values checked: [`admit`]) it has a small budget of its own: a hello deadline
//! ([`Admission::hello_wait`], 2 s), and a cap on connections waiting for admission from one
//! address and in all; beyond the cap a connection is closed at once, unanswered. Nothing it
//! sends is logged. Only an admitted client takes one of the `--max-tests` slots, so silent or
//! refused connections cannot lock out a client that holds the run's secret.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::error::SessionError;
use super::outcome::Outcome;
use super::resolve::ServerShared;
use super::server::{admit, serve_admitted, Listener, ServerConfig};
use super::{Log, POLL};
use crate::control::DeviceClaims;

/// What a daemon reports after each connection: an admitted test's outcome, or
/// [`SessionError::NotAdmitted`] for a connection that never became a test.
pub type OnTest = Arc<dyn Fn(&SocketAddr, &Result<Outcome, SessionError>) + Send + Sync>;

/// A daemon's budget for connections that are not admitted yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// How long a connection may take to send its hello (at most the handshake timeout).
    pub hello_wait: Duration,
    /// Connections from one address waiting for admission at once.
    pub per_address: usize,
    /// Connections waiting for admission at once, from every address.
    pub total: usize,
}

impl Admission {
    /// 2 s for the hello (a client sends it as soon as it connects), 8 connections per address
    /// and 64 in all waiting for admission.
    pub const DEFAULT: Admission = Admission {
        hello_wait: Duration::from_secs(2),
        per_address: 8,
        total: 64,
    };
}

impl Default for Admission {
    fn default() -> Self {
        Admission::DEFAULT
    }
}

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

/// Connections waiting for admission, per client address.
#[derive(Debug, Clone, Default)]
struct PerAddress(Arc<Mutex<HashMap<IpAddr, usize>>>);

/// One connection counted against its address, given back on drop.
#[derive(Debug)]
struct AddressSlot(PerAddress, IpAddr);

impl PerAddress {
    fn try_take(&self, ip: IpAddr, max: usize) -> Option<AddressSlot> {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(AddressSlot(self.clone(), ip))
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut m = (self.0).0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.1) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.1);
            }
        }
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
        let waiting = Slots::default();
        let per_address = PerAddress::default();
        let flags: Arc<Mutex<Vec<Weak<AtomicBool>>>> = Arc::new(Mutex::new(Vec::new()));
        let mut backoff = ACCEPT_BACKOFF.0;
        loop {
            let stream = match listener.accept(stop) {
                Ok(Some(s)) => {
                    backoff = ACCEPT_BACKOFF.0;
                    s
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
            let peer = stream
                .peer_addr()
                .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
            // Over the budget before admission: closed at once, unanswered and unlogged.
            let Some(wait_slot) = waiting.try_take(self.admission.total) else {
                continue;
            };
            let Some(addr_slot) = per_address.try_take(peer.ip(), self.admission.per_address)
            else {
                continue;
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
            let (running2, hello_wait) = (running.clone(), self.admission.hello_wait);
            let spawned = thread::Builder::new()
                .name(format!("rdmabw-test-{peer}"))
                .spawn(move || {
                    let admitted = admit(&cfg, stream, hello_wait);
                    drop((wait_slot, addr_slot));
                    let admitted = match admitted {
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
        let deadline = Instant::now() + Duration::from_secs(5);
        while (running.held() > 0 || waiting.held() > 0) && Instant::now() < deadline {
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

    #[test]
    fn connections_are_counted_per_address_until_dropped() {
        let per = PerAddress::default();
        let a: IpAddr = Ipv4Addr::new(10, 0, 0, 1).into();
        let b: IpAddr = Ipv4Addr::new(10, 0, 0, 2).into();
        let first = per.try_take(a, 2);
        let second = per.try_take(a, 2);
        assert!(first.is_some() && second.is_some());
        assert!(per.try_take(a, 2).is_none(), "a third from one address");
        assert!(
            per.try_take(b, 2).is_some(),
            "another address is not held up"
        );
        drop(first);
        assert!(per.try_take(a, 2).is_some());
        drop(second);
        assert!(per.0.lock().map(|m| m.is_empty()).unwrap_or(false));
    }
}
