//! A `--daemon` server: test after test on one port, one thread per test.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::error::SessionError;
use super::outcome::Outcome;
use super::resolve::ServerShared;
use super::server::{refuse, serve_one, Listener, ServerConfig};
use super::{Log, POLL};
use crate::control::DeviceClaims;

/// What a daemon reports after each test.
pub type OnTest = Arc<dyn Fn(&SocketAddr, &Result<Outcome, SessionError>) + Send + Sync>;

/// Clients being refused at once, at most: beyond that a connection is closed unanswered, so
/// that a flood of connections cannot take a thread each.
const MAX_REFUSING: usize = 8;

/// A `--daemon` server: test after test on one port, each on its own thread, one test per
/// device at a time, at most `cfg.limits.max_tests` at once.
pub struct Daemon {
    cfg: Arc<ServerConfig>,
    shared: ServerShared,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("shared", &self.shared)
            .field("limits", &self.cfg.limits)
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
        }
    }

    /// Serves until `stop` is raised; then stops the running tests (their peers are told) and
    /// waits up to 5 s for them.
    pub fn run(
        &self,
        listener: &Listener,
        stop: &Arc<AtomicBool>,
        log: &Log,
        on_test: &OnTest,
    ) -> io::Result<()> {
        let running = Arc::new(AtomicUsize::new(0));
        let refusing = Arc::new(AtomicUsize::new(0));
        let flags: Arc<Mutex<Vec<Weak<AtomicBool>>>> = Arc::new(Mutex::new(Vec::new()));
        while let Some(stream) = listener.accept(stop)? {
            let peer = stream
                .peer_addr()
                .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
            if let Some(reason) = self
                .cfg
                .limits
                .check_running(running.load(Ordering::SeqCst))
            {
                log(&format!("{peer}: refused: {reason}"));
                if refusing.fetch_add(1, Ordering::SeqCst) < MAX_REFUSING {
                    let (cfg, refusing2) = (Arc::clone(&self.cfg), Arc::clone(&refusing));
                    let spawned = thread::Builder::new()
                        .name(format!("rdmabw-refuse-{peer}"))
                        .spawn(move || {
                            refuse(&cfg, stream, reason);
                            refusing2.fetch_sub(1, Ordering::SeqCst);
                        });
                    if spawned.is_err() {
                        refusing.fetch_sub(1, Ordering::SeqCst);
                    }
                } else {
                    refusing.fetch_sub(1, Ordering::SeqCst);
                }
                continue;
            }
            let test_stop = Arc::new(AtomicBool::new(false));
            {
                let mut f = flags.lock().unwrap_or_else(|e| e.into_inner());
                f.retain(|w| w.strong_count() > 0);
                f.push(Arc::downgrade(&test_stop));
            }
            running.fetch_add(1, Ordering::SeqCst);
            let (cfg, shared, log2, on_test) = (
                Arc::clone(&self.cfg),
                self.shared.clone(),
                Arc::clone(log),
                Arc::clone(on_test),
            );
            let running2 = Arc::clone(&running);
            let spawned = thread::Builder::new()
                .name(format!("rdmabw-test-{peer}"))
                .spawn(move || {
                    let tagged: Log = {
                        let log2 = Arc::clone(&log2);
                        Arc::new(move |m: &str| log2(&format!("[{peer}] {m}")))
                    };
                    let r = serve_one(&cfg, stream, &shared, &test_stop, &tagged);
                    on_test(&peer, &r);
                    running2.fetch_sub(1, Ordering::SeqCst);
                });
            if let Err(e) = spawned {
                running.fetch_sub(1, Ordering::SeqCst);
                log(&format!("{peer}: cannot start a thread for the test: {e}"));
            }
        }
        // Stopping: tell every running test.
        for w in flags.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            if let Some(f) = w.upgrade() {
                f.store(true, Ordering::Relaxed);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while running.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            thread::sleep(POLL);
        }
        Ok(())
    }
}
