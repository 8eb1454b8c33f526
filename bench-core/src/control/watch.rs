//! Peer liveness during the measured window.
//!
//! The RDMA loop must not touch the control socket, yet must stop within seconds when the peer
//! dies. [`PeerWatch`] takes the channel for the window and runs one thread that sends a
//! heartbeat every `heartbeat_every`, reads the peer's messages as they arrive, and
//! publishes the peer's state in atomics the data path can read for the price of a load: the
//! engine's stop flag ([`PeerWatch::stop_flag`], set when the peer fails; pass `&*flag` to
//! `Connected::run_writes`) and [`PeerAlive::is_ok`].
//!
//! The peer counts as failed when its connection closes or resets (seen at once), when
//! it sends `Error`, when it sends something other than `Heartbeat`/`Done`/`Error`, or when
//! nothing arrives for `silence_limit` (a frozen process, a lost host or link) and the test
//! shows no progress either. A peer whose heartbeats are late while its queue pairs complete
//! work is busy, not dead (a loaded machine starves a heartbeat thread long before it stops the
//! data): with a progress probe ([`PeerWatch::start_watching`], the rail's traffic counters),
//! silence past the limit is a failure only once the probe stops moving, or after
//! `busy_limit` whatever it says.

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::channel::ControlChannel;
use super::error::ControlError;
use super::msg::Msg;
use super::phase::Phase;

/// The least time between two readings of the progress probe that are compared.
const PROGRESS_SPACING: Duration = Duration::from_millis(500);

const ALIVE: u8 = 0;
const FINISHED: u8 = 1;
const FAILED: u8 = 2;

/// A progress probe: a reading that grows while the test moves data, `None` when unreadable.
pub type Progress = Box<dyn FnMut() -> Option<u64> + Send>;

/// Timing of a [`PeerWatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchConfig {
    /// Time between this side's heartbeats (default 1 s: every wake-up of a helper costs the
    /// data path, most of all on Soft-RoCE, where the kernel moves the data on the same CPUs).
    pub heartbeat_every: Duration,
    /// The peer fails after this long without any message from it (default 3 s), unless the
    /// progress probe shows the test moving.
    pub silence_limit: Duration,
    /// The peer fails after this long without any message from it, whatever the progress
    /// probe says (default 8 s: a peer process that froze while its NIC still acknowledges).
    pub busy_limit: Duration,
    /// The longest single wait of the thread (default 1 s). A message, a closed
    /// connection and a stop end the wait at once; this only bounds how late the silence
    /// limit can be noticed.
    pub poll_every: Duration,
    /// Write timeout of one heartbeat (default 2 s).
    pub write_timeout: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            heartbeat_every: Duration::from_secs(1),
            silence_limit: Duration::from_secs(3),
            busy_limit: Duration::from_secs(8),
            poll_every: Duration::from_secs(1),
            write_timeout: Duration::from_secs(2),
        }
    }
}

/// What the watcher knows about the peer.
#[derive(Debug, Clone)]
pub enum PeerStatus {
    /// The peer is sending heartbeats.
    Alive {
        /// When the last message arrived (the watch's start until the first one).
        last_heard: Instant,
        /// The peer's `elapsed_ms` in its last heartbeat.
        peer_elapsed_ms: Option<u64>,
    },
    /// The peer sent `Done`: its window is over; its results wait in the channel for
    /// [`ControlChannel::expect_done`] after [`PeerWatch::finish`].
    Finished {
        /// When `Done` arrived.
        at: Instant,
    },
    /// The peer is gone or reported an error.
    Failed {
        /// When the failure was seen.
        since: Instant,
        /// What happened: `PeerClosed`, `PeerSilent`, `PeerError`, ...
        error: ControlError,
    },
}

/// A cheap, cloneable view of the peer's state for the RDMA loop: one relaxed atomic load.
#[derive(Debug, Clone)]
pub struct PeerAlive(Arc<AtomicU8>);

impl PeerAlive {
    /// False once the peer has failed; poll it in the data path and stop when it flips.
    #[inline]
    pub fn is_ok(&self) -> bool {
        self.0.load(Ordering::Relaxed) != FAILED
    }

    /// True once the peer has sent `Done`.
    #[inline]
    pub fn peer_finished(&self) -> bool {
        self.0.load(Ordering::Relaxed) == FINISHED
    }
}

#[derive(Debug)]
struct Shared {
    state: Arc<AtomicU8>,
    /// Set when the peer fails: the engine's stop flag.
    stop_flag: Arc<AtomicBool>,
    /// Asks the heartbeat thread to end.
    quit: AtomicBool,
    status: Mutex<PeerStatus>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, PeerStatus> {
        // The status is replaced whole under the lock, so a poisoned lock still holds a
        // consistent value.
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, code: u8, status: PeerStatus) {
        let mut st = self.lock();
        // A failure is final.
        if matches!(*st, PeerStatus::Failed { .. }) {
            return;
        }
        *st = status;
        let before = self.state.swap(code, Ordering::AcqRel);
        drop(st);
        // Waiters wait for the peer to finish or fail; a heartbeat (alive, still alive) wakes
        // nobody.
        if before != code {
            self.changed.notify_all();
        }
    }

    fn fail(&self, error: ControlError) {
        self.stop_flag.store(true, Ordering::Release);
        self.set(
            FAILED,
            PeerStatus::Failed {
                since: Instant::now(),
                error,
            },
        );
    }
}

/// Owns the control channel during the measured window and watches the peer.
///
/// Dropping it stops the heartbeats and closes the connection, so the peer notices at once.
#[derive(Debug)]
pub struct PeerWatch {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<ControlChannel>>,
    peer: std::net::SocketAddr,
    /// Written to on stop: the thread's wait ends at once, not at its next timeout (which
    /// every test's end would otherwise wait for, on both sides).
    wake: UnixStream,
}

impl PeerWatch {
    /// Starts the heartbeat thread on `channel`, with a fresh stop flag. Start it right after
    /// [`ControlChannel::sync_ready`], on both sides.
    pub fn start(channel: ControlChannel, config: WatchConfig) -> Result<PeerWatch, ControlError> {
        PeerWatch::start_with_stop(channel, config, Arc::new(AtomicBool::new(false)))
    }

    /// Like [`PeerWatch::start`], but sets the caller's `stop` flag when the peer fails, so one
    /// flag can also carry other reasons to stop (Ctrl-C, a local deadline).
    pub fn start_with_stop(
        channel: ControlChannel,
        config: WatchConfig,
        stop: Arc<AtomicBool>,
    ) -> Result<PeerWatch, ControlError> {
        PeerWatch::start_watching(channel, config, stop, None)
    }

    /// Like [`PeerWatch::start_with_stop`], with a progress probe: a reading that grows while
    /// the test moves data (the rail's byte and packet counters). It is read only once the
    /// peer has been silent for `silence_limit`, then at every poll: while it grows, the peer
    /// is busy, not dead, up to `busy_limit`.
    pub fn start_watching(
        channel: ControlChannel,
        config: WatchConfig,
        stop: Arc<AtomicBool>,
        progress: Option<Progress>,
    ) -> Result<PeerWatch, ControlError> {
        let peer = channel.peer_addr();
        let now = Instant::now();
        let shared = Arc::new(Shared {
            state: Arc::new(AtomicU8::new(ALIVE)),
            stop_flag: stop,
            quit: AtomicBool::new(false),
            status: Mutex::new(PeerStatus::Alive {
                last_heard: now,
                peer_elapsed_ms: None,
            }),
            changed: Condvar::new(),
        });
        let for_thread = Arc::clone(&shared);
        let io_err = |e: std::io::Error| ControlError::from_io(Arc::new(e), peer, Phase::Measure);
        let (wake, woken) = UnixStream::pair().map_err(io_err)?;
        let thread = thread::Builder::new()
            .name("rdmabw-heartbeat".into())
            .spawn(move || run(channel, &for_thread, config, &woken, progress))
            .map_err(io_err)?;
        Ok(PeerWatch {
            shared,
            thread: Some(thread),
            peer,
            wake,
        })
    }

    /// The engine's stop flag: `true` once the peer has failed. Pass `&*flag` to the write
    /// loop, which checks it every few hundred microseconds.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.shared.stop_flag)
    }

    /// The peer's state as a cheap flag for the data path.
    pub fn alive(&self) -> PeerAlive {
        PeerAlive(Arc::clone(&self.shared.state))
    }

    /// The peer's address.
    pub fn peer(&self) -> std::net::SocketAddr {
        self.peer
    }

    /// The peer's state now.
    pub fn status(&self) -> PeerStatus {
        self.shared.lock().clone()
    }

    /// `Ok` unless the peer has failed; then the reason (one atomic load when all is well).
    pub fn check(&self) -> Result<(), ControlError> {
        if self.shared.state.load(Ordering::Acquire) != FAILED {
            return Ok(());
        }
        match &*self.shared.lock() {
            PeerStatus::Failed { error, .. } => Err(error.clone()),
            _ => Ok(()),
        }
    }

    /// Blocks until the peer sends `Done` (`Ok`), fails (its error), or `timeout` passes
    /// ([`ControlError::Timeout`] in the measure phase). For a server that has nothing to do
    /// during the window; pass it the measure timeout.
    pub fn wait_peer_done(&self, timeout: Duration) -> Result<(), ControlError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            match &*st {
                PeerStatus::Finished { .. } => return Ok(()),
                PeerStatus::Failed { error, .. } => return Err(error.clone()),
                PeerStatus::Alive { .. } => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ControlError::Timeout {
                    peer: self.peer,
                    phase: Phase::Measure,
                    after: timeout,
                });
            }
            st = match self.shared.changed.wait_timeout(st, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    fn stop(&mut self) -> Option<ControlChannel> {
        self.shared.quit.store(true, Ordering::Release);
        // Best effort: without the byte the thread still ends at its next timeout.
        let _ = (&self.wake).write(&[1]);
        self.thread.take().and_then(|t| t.join().ok())
    }

    /// Stops the heartbeats and returns the channel for the results phase, or the peer's
    /// failure. A `Done` the peer already sent stays queued in the channel.
    pub fn finish(mut self) -> Result<ControlChannel, ControlError> {
        let ch = self.stop();
        self.check()?;
        ch.ok_or(ControlError::Protocol {
            peer: self.peer,
            phase: Phase::Measure,
            detail: "the heartbeat thread panicked".into(),
        })
    }

    /// Stops the heartbeats, sends `Error { message }` (best effort) and closes: for a local
    /// failure mid-window (a work completion error, a lost device).
    pub fn abort(mut self, message: &str) {
        if let Some(ch) = self.stop() {
            ch.fail(message);
        }
    }
}

impl Drop for PeerWatch {
    fn drop(&mut self) {
        // Dropping the returned channel closes the socket.
        drop(self.stop());
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Waits up to `wait` for the peer's next message or a stop: the message, if one came.
fn next_message(
    ch: &mut ControlChannel,
    woken: &UnixStream,
    wait: Duration,
) -> Result<Option<Msg>, ControlError> {
    match crate::ffi::wait_readable(ch.socket_fd(), woken.as_fd(), wait) {
        // Data, or end of stream: read it (a short read timeout, the bytes are there).
        Ok((true, _)) => ch.poll(Phase::Measure, Duration::from_millis(1)),
        // Stopped, or nothing within `wait`: the loop looks at the quit flag and the time.
        Ok((false, _)) => Ok(None),
        // poll(2) itself failed: wait on the socket alone, as a plain read would.
        Err(_) => ch.poll(Phase::Measure, wait),
    }
}

fn run(
    mut ch: ControlChannel,
    shared: &Shared,
    cfg: WatchConfig,
    woken: &UnixStream,
    mut progress: Option<Progress>,
) -> ControlChannel {
    let peer = ch.peer_addr();
    let start = Instant::now();
    let mut last_heard = start;
    // The probe's reading when the silence passed the limit (or at its last growth).
    let mut progress_base: Option<(u64, Instant)> = None;
    let mut busy_seen = false;
    let mut next_beat = start;
    let mut finished = false;
    while !shared.quit.load(Ordering::Acquire) {
        let now = Instant::now();
        if now >= next_beat {
            let beat = Msg::Heartbeat {
                elapsed_ms: millis(now - start),
            };
            if let Err(e) = ch.send_within(&beat, Phase::Measure, cfg.write_timeout) {
                // After its Done the peer may close without waiting for ours; that is not a
                // failure of the window.
                if !finished {
                    shared.fail(e);
                }
                break;
            }
            next_beat += cfg.heartbeat_every;
            if next_beat < now {
                next_beat = now + cfg.heartbeat_every;
            }
        }
        let wait = next_beat
            .saturating_duration_since(Instant::now())
            .min(cfg.poll_every);
        match next_message(&mut ch, woken, wait) {
            Ok(None) => {}
            Ok(Some(Msg::Heartbeat { elapsed_ms })) => {
                last_heard = Instant::now();
                // A new silence, if one comes, is judged on its own readings.
                progress_base = None;
                busy_seen = false;
                if !finished {
                    shared.set(
                        ALIVE,
                        PeerStatus::Alive {
                            last_heard,
                            peer_elapsed_ms: Some(elapsed_ms),
                        },
                    );
                }
            }
            Ok(Some(msg @ Msg::Done { .. })) => {
                ch.pending.push_back(msg);
                finished = true;
                shared.set(FINISHED, PeerStatus::Finished { at: Instant::now() });
            }
            Ok(Some(Msg::Error { message })) => {
                shared.fail(ControlError::PeerError {
                    peer,
                    phase: Phase::Measure,
                    message,
                });
                break;
            }
            Ok(Some(other)) => {
                let err = ControlError::Unexpected {
                    peer,
                    phase: Phase::Measure,
                    expected: "heartbeat, done or error",
                    got: other.kind(),
                };
                ch.send_error(&err.to_string());
                shared.fail(err);
                break;
            }
            Err(e) => {
                if !finished {
                    shared.fail(e);
                }
                break;
            }
        }
        let quiet = last_heard.elapsed();
        if !finished && quiet > cfg.silence_limit {
            if quiet <= cfg.busy_limit {
                // The first look only takes the reading; each later one, at least
                // PROGRESS_SPACING after the reading it compares with, wants growth.
                if progress_base.is_some_and(|(_, at)| at.elapsed() < PROGRESS_SPACING) {
                    continue;
                }
                if let Some(now) = progress.as_mut().and_then(|p| p()) {
                    let moving = progress_base.is_none_or(|(base, _)| now > base);
                    busy_seen |= progress_base.is_some() && moving;
                    progress_base = Some((now, Instant::now()));
                    if moving {
                        continue;
                    }
                }
            }
            let me = ch
                .local_addr()
                .map_or_else(|_| "the other side".to_string(), |a| a.to_string());
            let why = if quiet > cfg.busy_limit && busy_seen {
                " (its rail still carried traffic: a process that stopped while its NIC goes on)"
            } else if progress_base.is_some() {
                " and the rail carried nothing either"
            } else {
                ""
            };
            ch.send_error(&format!(
                "rdmabw at {me} heard nothing from you for {quiet:.1?} during the measurement{why} \
                 and gave up"
            ));
            shared.fail(ControlError::PeerSilent {
                peer,
                phase: Phase::Measure,
                silent_for: quiet,
            });
            break;
        }
    }
    ch
}

impl ControlChannel {
    /// Hands the channel to a [`PeerWatch`] for the measured window.
    pub fn watch(self, config: WatchConfig) -> Result<PeerWatch, ControlError> {
        PeerWatch::start(self, config)
    }
}
