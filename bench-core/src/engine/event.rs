//! Event mode (`-e`, [`PollMode::Event`](wire::params::PollMode::Event)): how the
//! loop sleeps on the CQ's completion channel instead of spinning, without losing a wake-up.
//!
//! The race: a completion that reaches the CQ before it is armed raises no event. So after a
//! pass that neither posted nor completed anything, the loop first *arms* the CQ and goes round
//! once more (that pass polls the CQ again, and whatever came before the arm is found there);
//! only a pass that still finds nothing, with the CQ armed, *sleeps*, and anything that
//! completes after the arm wakes it. The event that ends a sleep is taken and acknowledged at
//! once, which disarms the CQ: the next idle pass arms it again.
//!
//! A sleep never outlasts [`EVENT_WAIT_MAX`] nor the next phase change of the size's schedule
//! (the window's start and end, the cool-down's end), so that a stop, the window's end (and
//! the CPU time read there) and the stall guard are seen as in the other modes.

use std::time::Duration;

use crate::error::Error;
use crate::verbs::Cq;

/// The longest single sleep on the completion channel: how late a stop or a stall is seen at
/// worst while no completion comes.
pub(super) const EVENT_WAIT_MAX: Duration = Duration::from_millis(20);

/// A completion queue that can be armed and waited on: the [`Cq`], or a model of one in tests.
pub(super) trait Notify {
    /// Arms the CQ: its next completion raises an event.
    fn arm(&self) -> Result<(), Error>;
    /// Waits at most `timeout` for the event, takes and acknowledges it: whether one came.
    fn wait_event(&self, timeout: Duration) -> Result<bool, Error>;
}

impl Notify for Cq {
    fn arm(&self) -> Result<(), Error> {
        Cq::arm(self)
    }

    fn wait_event(&self, timeout: Duration) -> Result<bool, Error> {
        Cq::wait_event(self, timeout)
    }
}

/// What an idle pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Idle {
    /// Armed the CQ; the caller polls once more before any sleep.
    Armed,
    /// Slept until the event came (`true`) or the timeout passed (`false`).
    Slept(bool),
}

/// Whether the CQ is armed: the one piece of state event mode keeps between passes.
#[derive(Debug, Default)]
pub(super) struct EventWait {
    armed: bool,
    /// Events taken (each acknowledged), for tests and reports.
    events: u64,
}

impl EventWait {
    /// After a pass whose poll found nothing and that posted nothing: arm the CQ if it is not,
    /// else sleep at most `timeout` on its channel. See the module doc.
    pub(super) fn idle<C: Notify>(&mut self, cq: &C, timeout: Duration) -> Result<Idle, Error> {
        if !self.armed {
            cq.arm()?;
            self.armed = true;
            return Ok(Idle::Armed);
        }
        let woke = cq.wait_event(timeout)?;
        if woke {
            self.armed = false;
            self.events += 1;
        }
        Ok(Idle::Slept(woke))
    }

    /// Events taken so far.
    #[cfg(test)]
    pub(super) fn events(&self) -> u64 {
        self.events
    }
}

/// How long one sleep may last at `t` (seconds from the size's first post): up to the next of
/// `boundaries` (phase changes, in the same seconds) still ahead, and never over
/// [`EVENT_WAIT_MAX`].
pub(super) fn wait_timeout(t: f64, boundaries: &[f64]) -> Duration {
    boundaries
        .iter()
        .copied()
        .filter(|b| b.is_finite() && *b > t)
        .map(|b| Duration::from_secs_f64(b - t))
        .fold(EVENT_WAIT_MAX, Duration::min)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::collections::VecDeque;

    /// A CQ as the verbs define it: completions queue up; an armed CQ raises one event at its
    /// next completion and is disarmed by it; an event stays pending until taken. A wait that
    /// would block with completions queued and no event pending is the lost wake-up this
    /// module exists to prevent: the model fails the test there.
    #[derive(Default)]
    struct ModelCq {
        queued: Cell<u64>,
        armed: Cell<bool>,
        pending: Cell<bool>,
        /// Completions the "device" adds at the next wait, if the waiter sleeps.
        at_wait: RefCell<VecDeque<u64>>,
        waits: Cell<u64>,
    }

    impl ModelCq {
        fn complete(&self, n: u64) {
            self.queued.set(self.queued.get() + n);
            if n > 0 && self.armed.replace(false) {
                self.pending.set(true);
            }
        }

        fn poll(&self) -> u64 {
            self.queued.replace(0)
        }
    }

    impl Notify for ModelCq {
        fn arm(&self) -> Result<(), Error> {
            self.armed.set(true);
            Ok(())
        }

        fn wait_event(&self, _timeout: Duration) -> Result<bool, Error> {
            self.waits.set(self.waits.get() + 1);
            assert!(
                self.pending.get() || self.queued.get() == 0,
                "sleeping with {} completions queued and no event to wake the poller",
                self.queued.get()
            );
            if let Some(n) = self.at_wait.borrow_mut().pop_front() {
                self.complete(n);
            }
            Ok(self.pending.replace(false))
        }
    }

    /// The engine's loop reduced to what event mode touches: poll; when nothing was found,
    /// `idle`. `arrivals[i]` completions land just before pass `i`'s poll (`before_poll`) or
    /// just after it, before `idle` runs (`after_poll`: the race). Returns the completions
    /// polled.
    fn run(cq: &ModelCq, passes: usize, arrivals: &[(usize, u64, bool)]) -> (u64, EventWait) {
        let mut w = EventWait::default();
        let mut got = 0;
        for pass in 0..passes {
            for &(p, n, before_poll) in arrivals {
                if p == pass && before_poll {
                    cq.complete(n);
                }
            }
            let n = cq.poll();
            got += n;
            for &(p, n, before_poll) in arrivals {
                if p == pass && !before_poll {
                    cq.complete(n);
                }
            }
            if n == 0 {
                w.idle(cq, EVENT_WAIT_MAX).unwrap();
            }
        }
        (got, w)
    }

    #[test]
    fn a_completion_before_the_arm_is_polled_not_slept_on() {
        // Pass 0 finds nothing; a completion lands after its poll, before the arm: no event
        // will come for it. The loop must find it by polling after arming.
        let cq = ModelCq::default();
        let (got, _) = run(&cq, 4, &[(0, 5, false)]);
        assert_eq!(got, 5);
    }

    #[test]
    fn an_armed_idle_cq_sleeps_and_the_next_completion_wakes_it() {
        let cq = ModelCq::default();
        cq.at_wait.borrow_mut().extend([7, 0, 3]);
        let (got, w) = run(&cq, 10, &[]);
        assert_eq!(got, 10);
        // Two of the three waits were ended by an event (the middle one timed out), each
        // taken once.
        assert_eq!(w.events(), 2);
        assert!(cq.waits.get() >= 3);
        assert!(!cq.pending.get());
    }

    #[test]
    fn every_interleaving_of_arrivals_is_seen_without_a_lost_wake_up() {
        // Arrivals before or after any pass's poll, in any of the first 6 passes, with the
        // device also completing during sleeps: the model asserts at every wait.
        for mask in 0u32..(1 << 12) {
            let arrivals: Vec<(usize, u64, bool)> = (0..12)
                .filter(|b| mask & (1 << b) != 0)
                .map(|b| ((b / 2) as usize, 1 + b as u64, b % 2 == 0))
                .collect();
            let want: u64 = arrivals.iter().map(|a| a.1).sum::<u64>() + 4;
            let cq = ModelCq::default();
            cq.at_wait.borrow_mut().extend([1, 0, 2, 0, 1]);
            let (got, _) = run(&cq, 40, &arrivals);
            assert_eq!(got, want, "arrivals {arrivals:?}");
        }
    }

    #[test]
    fn a_sleep_ends_at_the_next_phase_change_and_never_after_the_cap() {
        let ms = Duration::from_millis;
        // Window 0.05 .. 3.05, cool-down to 3.3: 2 ms before the window ends, sleep 2 ms.
        let b = [0.05, 3.05, 3.3];
        let d = wait_timeout(3.048, &b);
        assert!(d <= ms(2) && d > Duration::from_micros(1990), "{d:?}");
        // Far from any boundary: the cap.
        assert_eq!(wait_timeout(1.0, &b), EVENT_WAIT_MAX);
        // Past every boundary (draining), or none (iteration mode): the cap.
        assert_eq!(wait_timeout(4.0, &b), EVENT_WAIT_MAX);
        assert_eq!(
            wait_timeout(0.0, &[0.0, f64::INFINITY, f64::INFINITY]),
            EVENT_WAIT_MAX
        );
    }
}
