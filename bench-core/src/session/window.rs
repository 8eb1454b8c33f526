//! The measured window of one test under a [`PeerWatch`] and the rail [`Guard`]: the writes (or
//! the passive wait), and the explanation of a window that failed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::error::{peer_failed, SessionError};
use super::guard::{port_note, Guard};
use crate::control::{ControlChannel, ControlError, PeerWatch, Phase, WatchConfig};
use crate::counters::{CounterTarget, Snapshot};
use crate::engine::{Connected, StopFlags};
use crate::error::Error;
use crate::rails::Rail;
use crate::sysfs::SysRoots;
use wire::counters::CounterReport;
use wire::params::{LocalTuning, SizeResult, TestParams};
use wire::report::Role;

/// How long a failed RDMA run waits for the control channel to explain it (a dead peer's TCP
/// reset usually arrives within a millisecond of its QPs vanishing).
const EXPLAIN_WAIT: Duration = Duration::from_millis(400);
/// How often a passive server looks at its stop flags (SIGINT, the rail guard) while it waits
/// for the client's `Done` (the peer's `Done` or failure wakes it at once).
const PASSIVE_POLL: Duration = Duration::from_millis(500);
/// Past the measure timeout, a passive server waits on while its rail carried data within
/// this long: the client is late, not gone.
const LATE_GRACE: Duration = Duration::from_secs(10);

/// When a passive server stops waiting for the client's `Done`: at the measure timeout, unless
/// the rail is still carrying the test's data; then while it carried some within
/// [`LATE_GRACE`], up to twice the timeout.
///
/// On Soft-RoCE the kernel moves the data on the host's CPUs, and a deep queue of large writes
/// (8 QPs x 128 x 1 MiB is 1 GiB, half a minute of a loaded 2-CPU guest's work) keeps every
/// process off its CPU until it has gone out: the client's window ended on time, but it cannot
/// run to say so. Its heartbeats show it alive; the rail's counters show its data moving.
pub(super) struct LateWait {
    deadline: Instant,
    cap: Instant,
    probe: crate::control::Progress,
    last: Option<u64>,
    last_growth: Instant,
}

impl LateWait {
    pub(super) fn new(measure_timeout: Duration, probe: crate::control::Progress) -> LateWait {
        let now = Instant::now();
        LateWait {
            deadline: now + measure_timeout,
            cap: now + measure_timeout * 2,
            probe,
            last: None,
            last_growth: now,
        }
    }

    /// Whether to wait on at `now`.
    pub(super) fn waits_on(&mut self, now: Instant) -> bool {
        // The counters matter only from LATE_GRACE before the deadline on.
        let near = now + LATE_GRACE >= self.deadline;
        if let Some(v) = near.then(|| (self.probe)()).flatten() {
            if self.last.is_some_and(|l| v > l) {
                self.last_growth = now;
            }
            self.last = Some(v);
        }
        now < self.deadline || (now < self.cap && now.duration_since(self.last_growth) < LATE_GRACE)
    }

    /// When a wait that blocks without waking should next ask [`LateWait::waits_on`]: not
    /// before the counters matter ([`LATE_GRACE`] before the deadline), then every
    /// [`PASSIVE_POLL`].
    pub(super) fn next_look(&self, now: Instant) -> Instant {
        let near = self.deadline.checked_sub(LATE_GRACE).unwrap_or(now);
        near.max(now + PASSIVE_POLL)
    }

    /// Why the wait ended at `now` (once [`LateWait::waits_on`] said no).
    fn why_given_up(&self, now: Instant) -> String {
        if now >= self.cap {
            "twice the test's bound, though its rail still carried data".into()
        } else {
            format!("the rail had carried nothing for {LATE_GRACE:?}")
        }
    }
}

/// What [`window`] runs.
pub(super) struct WindowSpec<'a> {
    pub(super) roots: &'a SysRoots,
    pub(super) rail: &'a Rail,
    pub(super) watch: WatchConfig,
    pub(super) params: &'a TestParams,
    pub(super) tuning: &'a LocalTuning,
    /// Whether this side writes (the client; both sides when bidirectional).
    pub(super) writer: bool,
    pub(super) measure_timeout: Duration,
    /// Which side this is (named in its counter report).
    pub(super) role: Role,
}

/// What a window that completed gives back: the channel, this side's results and its counter
/// deltas around the window.
pub(super) struct Windowed {
    pub(super) ch: ControlChannel,
    pub(super) results: Vec<SizeResult>,
    pub(super) counters: Option<CounterReport>,
}

/// The measured window under a watch: reads the rail's counters, runs the writes (or, as the
/// passive side, waits for the client's `Done`), reads them again, then returns the channel,
/// or the reason the window failed. Both reads happen outside the measured time. A writer of
/// a `--run_infinitely` test hands each window's result to `on_window` until it is stopped
/// (then the error is [`SessionError::Interrupted`], the peer told).
pub(super) fn window(
    spec: &WindowSpec<'_>,
    conn: &mut Connected,
    ch: ControlChannel,
    stop: &Arc<AtomicBool>,
    on_window: Option<&mut dyn FnMut(SizeResult)>,
) -> Result<Windowed, SessionError> {
    let WindowSpec {
        roots,
        rail,
        watch: watch_cfg,
        params,
        tuning,
        writer,
        measure_timeout,
        role,
    } = *spec;
    let target = CounterTarget::new(rail.device.clone(), rail.port, rail.netdev.clone());
    let before = Snapshot::read(roots, &target);
    // A fresh flag, raised by the watch (peer failed) and by the guard (this side's rail went
    // down); the engine and the passive wait also look at the caller's `stop` (SIGINT).
    let engine_stop = Arc::new(AtomicBool::new(stop.load(Ordering::Relaxed)));
    let progress = crate::counters::traffic_probe(roots, &target);
    let watch = PeerWatch::start_watching(ch, watch_cfg, Arc::clone(&engine_stop), Some(progress))?;
    let guard = Guard::start(Arc::clone(&engine_stop), roots, rail, None);
    let tuning = &LocalTuning {
        cpu: crate::numa::cpu_for(
            roots,
            rail.numa_node,
            tuning.cpu,
            &crate::ffi::allowed_cpus().unwrap_or_default(),
        ),
        ..tuning.clone()
    };
    let start = Instant::now();
    // Why a passive server stopped waiting for the client, when it did.
    let mut gave_up: Option<String> = None;
    let run = if params.latency {
        // Both sides write in a latency test; the client first. A responder of a timed test
        // answers until the client's Done.
        let flags = StopFlags::either(stop, &engine_stop);
        let alive = watch.alive();
        conn.run_pingpong(params, tuning, flags, role == Role::Client, &|| {
            alive.peer_finished()
        })
        .map_err(Some)
    } else if writer {
        let flags = StopFlags::either(stop, &engine_stop);
        match on_window {
            Some(emit) if params.run_infinitely => {
                Err(Some(conn.run_intervals(params, tuning, flags, emit)))
            }
            _ => conn.run_writes(params, tuning, flags).map_err(Some),
        }
    } else {
        let mut late = LateWait::new(
            measure_timeout,
            crate::counters::traffic_probe(roots, &target),
        );
        loop {
            match watch.wait_peer_done(PASSIVE_POLL) {
                Ok(()) => break Ok(Vec::new()),
                Err(ControlError::Timeout { .. }) => {
                    let now = Instant::now();
                    if !late.waits_on(now) {
                        gave_up = Some(late.why_given_up(now));
                        break Err(None);
                    }
                    if engine_stop.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed) {
                        break Err(None);
                    }
                }
                Err(_) => break Err(None),
            }
        }
    };
    let rail_down = guard.stop();
    match run {
        Ok(results) => {
            let after = Snapshot::read(roots, &target);
            let counters = (!before.is_empty()).then(|| {
                before
                    .delta(&after, role, &target)
                    .trimmed(crate::diagnosis::is_evidence)
            });
            match watch.finish() {
                Ok(ch) => Ok(Windowed {
                    ch,
                    results,
                    counters,
                }),
                Err(cause) => Err(peer_failed(cause)),
            }
        }
        Err(local) => {
            // Prefer the control channel's explanation: a dead peer shows there first.
            let deadline = Instant::now() + EXPLAIN_WAIT;
            loop {
                if let Err(cause) = watch.check() {
                    drop(watch);
                    let local = local.filter(|e| !matches!(e, Error::Stopped { .. }));
                    return Err(SessionError::PeerFailed { cause, local });
                }
                if local.is_none()
                    || rail_down.is_some()
                    || stop.load(Ordering::Relaxed)
                    || Instant::now() >= deadline
                {
                    break;
                }
                thread::sleep(Duration::from_millis(10));
            }
            if let Some(note) = rail_down {
                watch.abort(&format!("its rail went down: {note}"));
                return Err(SessionError::RailDown { note });
            }
            if stop.load(Ordering::Relaxed) {
                watch.abort("the test was interrupted on the other side (SIGINT/SIGTERM)");
                return Err(SessionError::Interrupted { told_peer: true });
            }
            match local {
                Some(error) => {
                    let note = port_note(roots, rail);
                    let text = match &note {
                        Some(n) => format!("{error}; {n}"),
                        None => error.to_string(),
                    };
                    watch.abort(&format!("the peer's RDMA run failed: {text}"));
                    Err(SessionError::Run {
                        error,
                        port_note: note,
                    })
                }
                None => {
                    let cause = ControlError::Timeout {
                        peer: watch.peer(),
                        phase: Phase::Measure,
                        after: start.elapsed(),
                    };
                    watch.abort(&format!(
                        "the server gave up waiting for the client's results after {:.0?} \
                         (the test's bound is {measure_timeout:.0?}; {})",
                        start.elapsed(),
                        gave_up.as_deref().unwrap_or("the wait ended")
                    ));
                    Err(peer_failed(cause))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// A late wait with a bound of 30 s whose probe reads the counter it returns, and the
    /// instant `s` seconds after its start.
    fn late_wait(bytes: u64) -> (LateWait, Arc<AtomicU64>, impl Fn(u64) -> Instant) {
        let v = Arc::new(AtomicU64::new(bytes));
        let read = Arc::clone(&v);
        let late = LateWait::new(
            Duration::from_secs(30),
            Box::new(move || Some(read.load(Ordering::Relaxed))),
        );
        let t0 = late.deadline - Duration::from_secs(30);
        (late, v, move |s| t0 + Duration::from_secs(s))
    }

    #[test]
    fn a_late_client_whose_data_still_moves_is_waited_for_up_to_twice_the_bound() {
        let (mut late, bytes, at) = late_wait(0);
        assert!(late.waits_on(at(25)));
        bytes.store(1 << 20, Ordering::Relaxed);
        assert!(late.waits_on(at(29)), "growth seen before the deadline");
        assert!(
            late.waits_on(at(35)),
            "moving 6 s ago: wait on past the deadline"
        );
        bytes.store(2 << 20, Ordering::Relaxed);
        assert!(late.waits_on(at(50)));
        assert!(late.waits_on(at(59)));
        bytes.store(3 << 20, Ordering::Relaxed);
        assert!(
            !late.waits_on(at(60)),
            "twice the bound is the end, moving or not"
        );
        assert!(late
            .why_given_up(at(60))
            .starts_with("twice the test's bound"));
    }

    #[test]
    fn a_client_whose_rail_is_quiet_at_the_bound_is_given_up_on() {
        let (mut late, _bytes, at) = late_wait(7);
        assert!(late.waits_on(at(21)));
        assert!(late.waits_on(at(29)));
        assert!(!late.waits_on(at(30)), "nothing moved: the bound holds");
        assert_eq!(
            late.why_given_up(at(30)),
            "the rail had carried nothing for 10s"
        );

        let (mut late, bytes, at) = late_wait(7);
        assert!(late.waits_on(at(21)));
        bytes.store(8, Ordering::Relaxed);
        assert!(late.waits_on(at(22)));
        assert!(late.waits_on(at(31)), "moved 9 s ago");
        assert!(!late.waits_on(at(33)), "quiet for 11 s: given up");
    }

    /// A wait that blocks without waking asks again only once the counters matter (10 s
    /// before the 30 s bound), then every half second.
    #[test]
    fn a_blocking_wait_looks_first_when_the_counters_matter() {
        let (late, _bytes, at) = late_wait(0);
        assert_eq!(late.next_look(at(0)), at(20));
        assert_eq!(late.next_look(at(19)), at(20));
        assert_eq!(late.next_look(at(20)), at(20) + PASSIVE_POLL);
        assert_eq!(late.next_look(at(45)), at(45) + PASSIVE_POLL);
    }
}
