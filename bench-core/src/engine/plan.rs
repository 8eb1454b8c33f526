//! Post planning: how many writes go out on a QP now and which are signaled, how long an
//! adaptive poller may sleep, and how long the loop waits for a completion before calling it
//! a stall.

use std::time::Duration;

use crate::error::Error;
use wire::params::{LocalTuning, PollMode};

/// Adaptive polling: how long the CQ must have been empty before the poller may sleep.
const BACKOFF_AFTER: Duration = Duration::from_millis(1);
/// Adaptive polling: the longest single sleep.
const BACKOFF_MAX: Duration = Duration::from_millis(1);
/// Adaptive polling: sleeps shorter than this are not worth a system call; spin instead.
const BACKOFF_MIN: Duration = Duration::from_micros(50);

/// How long an adaptive poller may sleep after a poll found nothing and nothing could be
/// posted. `idle` is the time since the last completion; `drain` how long the writes in flight
/// last at the rate seen so far (unknown before the first completion); `spare` the part of the
/// send queue still in flight right after a signaled completion ((depth - cq_mod) / depth),
/// i.e. what keeps the link busy while the poller is late. A sleep never exceeds half of that
/// margin, so the queue never runs dry because of it; `None` means spin.
pub(super) fn backoff(idle: Duration, drain: Option<Duration>, spare: f64) -> Option<Duration> {
    if idle < BACKOFF_AFTER {
        return None;
    }
    let mut q = (idle / 8).min(BACKOFF_MAX);
    if let Some(d) = drain {
        q = q.min(d.mul_f64((spare / 2.0).clamp(0.0, 0.5)));
    }
    (q >= BACKOFF_MIN).then_some(q)
}

/// The effective loop knobs after clamping, shared by sizing and the loop.
#[derive(Debug, Clone, Copy)]
pub(super) struct Knobs {
    pub(super) depth: u64,
    pub(super) cq_mod: u64,
    pub(super) post_list: u64,
    pub(super) poll: PollMode,
}

pub(super) fn knobs(t: &LocalTuning) -> Result<Knobs, Error> {
    if t.tx_depth == 0 {
        return Err(Error::InvalidParams(
            "tx depth (-t) must be at least 1".into(),
        ));
    }
    let depth = u64::from(t.tx_depth);
    Ok(Knobs {
        depth,
        cq_mod: u64::from(t.cq_mod.max(1)).min(depth),
        post_list: u64::from(t.post_list.max(1)).min(depth),
        poll: t.poll,
    })
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct QpRun {
    pub(super) posted: u64,
    pub(super) completed: u64,
    pub(super) unsignaled: u64,
}

impl QpRun {
    pub(super) fn outstanding(&self) -> u64 {
        self.posted - self.completed
    }
}

/// Decides how many writes to post on one QP now and which are signaled; fills `wrs` with
/// `(wr_id, signaled)`. `wr_id` = QP index << 32 | writes the completion accounts for.
pub(super) fn plan_posts(
    qi: usize,
    st: &mut QpRun,
    k: Knobs,
    target: Option<u64>,
    force_signal_last: bool,
    wrs: &mut Vec<(u64, bool)>,
) {
    wrs.clear();
    let room = k.depth - st.outstanding();
    let remaining = target.map_or(u64::MAX, |t| t - st.posted);
    let n = k.post_list.min(room).min(remaining);
    if n == 0 {
        return;
    }
    // Wait for room for a whole list, unless this is the tail or nothing signaled is in
    // flight (then nothing would ever make room).
    let signaled_in_flight = st.outstanding() > st.unsignaled;
    let partial = n < k.post_list && n < remaining;
    if partial && signaled_in_flight {
        return;
    }
    for j in 0..n {
        st.unsignaled += 1;
        st.posted += 1;
        let last = target == Some(st.posted) || (j + 1 == n && (force_signal_last || partial));
        if st.unsignaled >= k.cq_mod || last {
            wrs.push((((qi as u64) << 32) | st.unsignaled, true));
            st.unsignaled = 0;
        } else {
            wrs.push(((qi as u64) << 32, false));
        }
    }
}

/// How long to wait without any completion before declaring a stall: at least `base`, and
/// four times the time one signaled completion's worth of data (`batch_bytes`: cq_mod writes
/// on every QP) takes at the rate seen so far. The rate is what this size moved up to its last
/// completion (`done_bytes` in `active`), else `rate_est` from the previous size, else a
/// pessimistic 1 MB/s. Measuring up to the last completion matters: a rate measured up to
/// *now* shrinks while the stall lasts, and the limit would grow with it and never be reached.
pub(super) fn stall_limit_for(
    base: Duration,
    batch_bytes: u64,
    done_bytes: u64,
    active: Duration,
    rate_est: Option<f64>,
) -> Duration {
    let active_s = active.as_secs_f64();
    let rate = (done_bytes > 0 && active_s > 0.0)
        .then(|| done_bytes as f64 / active_s)
        .or(rate_est)
        .filter(|r| *r > 0.0)
        .unwrap_or(1e6);
    base.max(Duration::from_secs_f64(
        (4.0 * batch_bytes as f64 / rate).min(3600.0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(depth: u64, cq_mod: u64, post_list: u64) -> Knobs {
        Knobs {
            depth,
            cq_mod,
            post_list,
            poll: PollMode::Adaptive,
        }
    }

    #[test]
    fn backoff_spins_while_completions_come_often() {
        let ms = Duration::from_millis;
        // A NIC at line rate completes a batch every ~100 us: the CQ is never idle for 1 ms.
        assert_eq!(backoff(Duration::from_micros(900), Some(ms(1)), 0.22), None);
        // Idle long enough, but the writes in flight drain in 200 us: sleeping could starve
        // the queue, so spin.
        assert_eq!(backoff(ms(5), Some(Duration::from_micros(200)), 0.22), None);
        // A queue that empties at every signaled completion (-Q equal to -t) has no margin.
        assert_eq!(backoff(ms(5), Some(ms(500)), 0.0), None);
    }

    #[test]
    fn backoff_sleeps_in_steps_that_end_before_the_queue_runs_dry() {
        let ms = Duration::from_millis;
        // Soft-RoCE: a batch of 64 KiB writes every ~0.4 s, the queue lasts ~0.5 s.
        assert_eq!(
            backoff(ms(2), Some(ms(500)), 0.22),
            Some(Duration::from_micros(250))
        );
        assert_eq!(backoff(ms(100), Some(ms(500)), 0.22), Some(BACKOFF_MAX));
        // Never more than half the margin left after a completion.
        let q = backoff(ms(100), Some(ms(4)), 0.22).expect("a back-off");
        assert!(q <= Duration::from_micros(440), "{q:?}");
        // Before the first completion the rate is unknown: grow with the idle time.
        assert_eq!(backoff(ms(4), None, 0.22), Some(Duration::from_micros(500)));
    }

    /// Simulates the post/complete protocol and checks it never deadlocks, never exceeds the
    /// depth, and that completions account for every write exactly once.
    fn simulate(kn: Knobs, target: u64) {
        let mut st = QpRun::default();
        let mut wrs = Vec::new();
        let mut inflight: std::collections::VecDeque<(u64, bool)> = Default::default();
        let mut accounted = 0;
        for _ in 0..1_000_000 {
            plan_posts(0, &mut st, kn, Some(target), false, &mut wrs);
            inflight.extend(wrs.iter().copied());
            assert!(st.outstanding() <= kn.depth);
            // Complete the oldest write; only signaled ones produce a completion.
            match inflight.pop_front() {
                Some((id, true)) => {
                    st.completed += id & 0xffff_ffff;
                    accounted += id & 0xffff_ffff;
                }
                Some((_, false)) => {}
                None => {}
            }
            if st.completed == target {
                break;
            }
        }
        assert_eq!(st.completed, target, "{kn:?} target {target}");
        assert_eq!(accounted, target);
        assert_eq!(st.unsignaled, 0);
    }

    #[test]
    fn post_plans_progress() {
        for (d, c, p) in [
            (128, 100, 1),
            (128, 100, 8),
            (128, 128, 100),
            (1, 1, 1),
            (16, 16, 16),
            (128, 1, 32),
            (10, 7, 4),
        ] {
            for target in [1, 5, 99, 100, 101, 1000] {
                simulate(k(d, c, p), target);
            }
        }
    }

    #[test]
    fn stall_limit_scales_with_batch_and_rate() {
        let ten = Duration::from_secs(10);
        // 100 x 1 MiB per completion at the lab's 0.09 Gb/s (~11 MB/s): about 37 s.
        let batch = 100 * (1 << 20);
        let l = stall_limit_for(ten, batch, 0, Duration::ZERO, Some(11.25e6));
        assert!((l.as_secs_f64() - 37.3).abs() < 0.5, "{l:?}");
        // Fast link, small batch: the base.
        assert_eq!(
            stall_limit_for(ten, 6_553_600, 1 << 30, Duration::from_secs(1), None),
            ten
        );
        // Unknown rate: 1 MB/s.
        let l = stall_limit_for(ten, 6_553_600, 0, Duration::ZERO, None);
        assert!((l.as_secs_f64() - 26.2).abs() < 0.1, "{l:?}");
        // The regression found in the lab: the rate comes from the time up to the last
        // completion (2 s here), whatever time it is now, so the limit stays put.
        let a = stall_limit_for(ten, 6_553_600, 13_107_200, Duration::from_secs(2), None);
        assert_eq!(a, ten);
    }
}
