//! The interval sampler: per-QP cumulative completed-bytes curves cut into fixed intervals,
//! whose rates give the p1/p50/p99 and the peak of a run.

use std::collections::VecDeque;
use std::time::Duration;

use hdrhistogram::Histogram;

/// One QP's cumulative completed bytes over time: `(t, bytes)` events starting at `(0, 0)`.
#[derive(Debug)]
struct Curve {
    events: VecDeque<(f64, f64)>,
    done: bool,
}

impl Curve {
    fn new() -> Curve {
        Curve {
            events: VecDeque::from([(0.0, 0.0)]),
            done: false,
        }
    }

    fn push(&mut self, t: f64, b: f64) {
        match self.events.back_mut() {
            Some(last) if last.0 >= t => last.1 = b,
            _ => self.events.push_back((t, b)),
        }
    }

    /// The curve at `t`, linearly interpolated; `None` while no event at or after `t` has
    /// arrived and the QP is still running.
    fn at(&self, t: f64) -> Option<f64> {
        let mut prev: Option<(f64, f64)> = None;
        for &(et, eb) in &self.events {
            if et >= t {
                return Some(match prev {
                    Some((pt, pb)) if et > pt => pb + (eb - pb) * (t - pt) / (et - pt),
                    _ => eb,
                });
            }
            prev = Some((et, eb));
        }
        if self.done {
            prev.map(|p| p.1)
        } else {
            None
        }
    }

    /// Forgets events no longer needed once everything up to `t` is accounted for.
    fn prune(&mut self, t: f64) {
        while self.events.len() >= 2 && self.events.get(1).is_some_and(|e| e.0 <= t) {
            self.events.pop_front();
        }
    }
}

/// Bandwidth samples over fixed intervals.
///
/// Each QP has its own cumulative completed-bytes curve, interpolated between that QP's
/// completions (a completion accounts for the bytes written since the same QP's previous
/// one). An interval is closed once every running QP has reported a completion at or after
/// its end; its bytes are the sum of the QPs' curves. Interpolating one curve across QPs
/// instead would credit a QP's bytes to the gap since *another* QP's completion and show
/// spikes that never happened.
#[derive(Debug)]
pub(crate) struct Sampler {
    interval: f64,
    end: Option<f64>,
    next: f64,
    started: bool,
    finished: bool,
    boundary_b: f64,
    boundary_t: f64,
    curves: Vec<Curve>,
    hist: Option<Histogram<u64>>,
    peak_gbps: f64,
    samples: u64,
}

impl Sampler {
    /// Intervals of `interval` from `start` up to `end` (seconds on the caller's clock, which
    /// starts at 0 where every curve is 0), for `qps` curves.
    pub(crate) fn new(interval: Duration, start: f64, end: Option<f64>, qps: usize) -> Sampler {
        Sampler {
            interval: interval.as_secs_f64(),
            end,
            next: start,
            started: false,
            finished: false,
            boundary_b: 0.0,
            boundary_t: start,
            curves: (0..qps.max(1)).map(|_| Curve::new()).collect(),
            // kb/s (Gb/s * 1e6) up to 10 Tb/s with 3 significant digits. (Creation cannot
            // fail for these bounds; without a histogram the summary falls back to the average.)
            hist: Histogram::new_with_bounds(1, 10_000_000_000, 3).ok(),
            peak_gbps: 0.0,
            samples: 0,
        }
    }

    fn record(&mut self, bytes: f64, secs: f64) {
        if secs <= 0.0 {
            return;
        }
        let gbps = bytes.max(0.0) * 8.0 / secs / 1e9;
        if let Some(h) = &mut self.hist {
            h.saturating_record((gbps * 1e6).round() as u64);
        }
        self.peak_gbps = self.peak_gbps.max(gbps);
        self.samples += 1;
    }

    /// A completion on QP `qp` at time `t`: `cum` bytes of that QP have completed in total.
    #[cfg(test)]
    pub(crate) fn event(&mut self, qp: usize, t: f64, cum: u64) {
        self.polled(t, [(qp, cum, false)]);
    }

    /// QP `qp` will complete nothing more (its curve stays flat).
    #[cfg(test)]
    pub(crate) fn finish_qp(&mut self, qp: usize) {
        if let Some(c) = self.curves.get_mut(qp) {
            c.done = true;
        }
        self.advance();
    }

    /// What one poll of the CQ returned at time `t`: for each completion, `(qp, cum, done)`
    /// with `cum` the bytes that QP has completed in total up to that completion (a QP's last
    /// entry counts) and `done` whether it will complete nothing more. Intervals are closed
    /// only once the whole poll is in: closed after its first completion, they would get only
    /// that one's bytes and the next interval the rest, a dip and a spike where the link ran
    /// evenly (a poll that found a backlog of 73 completions after a 150 ms gap showed p1 0.003,
    /// p99 2.3 and a 4.8 Gb/s peak on a lab rail that averaged 0.33 Gb/s).
    pub(crate) fn polled(&mut self, t: f64, batch: impl IntoIterator<Item = (usize, u64, bool)>) {
        let mut finished = false;
        for (qp, cum, done) in batch {
            if let Some(c) = self.curves.get_mut(qp) {
                c.push(t, cum as f64);
                if done && !c.done {
                    c.done = true;
                    finished = true;
                }
            }
        }
        if finished || t >= self.next || self.end.is_some_and(|e| t >= e) {
            self.advance();
        }
    }

    /// Ends every curve; the last interval ends at `t` (iteration mode) or at the end given at
    /// creation, whichever is earlier.
    pub(crate) fn close(&mut self, t: f64) {
        self.end = Some(self.end.map_or(t, |e| e.min(t)));
        for c in &mut self.curves {
            c.done = true;
        }
        self.advance();
    }

    fn advance(&mut self) {
        while !self.finished {
            let (tb, is_end) = match self.end {
                Some(e) if e < self.next => (e, true),
                None if self.curves.iter().all(|c| c.done) => return,
                _ => (self.next, false),
            };
            let mut total = 0.0;
            for c in &self.curves {
                match c.at(tb) {
                    Some(v) => total += v,
                    None => return,
                }
            }
            if is_end {
                let partial = tb - self.boundary_t;
                if self.started && partial >= self.interval / 2.0 {
                    self.record(total - self.boundary_b, partial);
                }
                self.finished = true;
                return;
            }
            if self.started {
                self.record(total - self.boundary_b, self.interval);
            }
            self.started = true;
            self.boundary_b = total;
            self.boundary_t = tb;
            self.next += self.interval;
            for c in &mut self.curves {
                c.prune(tb);
            }
        }
    }

    /// (p1, p50, p99, peak) in Gb/s; `fallback` for each when there was no full sample.
    pub(crate) fn summary(&self, fallback: f64) -> (f64, f64, f64, f64) {
        let Some(h) = self.hist.as_ref().filter(|_| self.samples > 0) else {
            return (fallback, fallback, fallback, fallback);
        };
        let q = |x: f64| h.value_at_quantile(x) as f64 / 1e6;
        (q(0.01), q(0.50), q(0.99), self.peak_gbps)
    }

    /// [`Sampler::summary`] of the intervals so far, then forgets them (the curves go on):
    /// `--run_infinitely` reports each window's intervals and starts the next from nothing,
    /// with the memory it already has.
    pub(crate) fn take_summary(&mut self, fallback: f64) -> (f64, f64, f64, f64) {
        let s = self.summary(fallback);
        if let Some(h) = &mut self.hist {
            h.reset();
        }
        self.peak_gbps = 0.0;
        self.samples = 0;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `s` one completion on QP 0 every `step` seconds until `until`, each adding
    /// `bytes(t)` to the QP's total; the time of the last one.
    fn steady(s: &mut Sampler, step: f64, until: f64, bytes: impl Fn(f64) -> u64) -> f64 {
        let mut cum = 0u64;
        let mut t = 0.0;
        while t < until {
            t += step;
            cum += bytes(t);
            s.event(0, t, cum);
        }
        t
    }

    #[test]
    fn take_summary_starts_the_next_window_from_nothing() {
        // One window at 1 Gb/s (12.5 MB per 100 ms in 10 ms intervals), then one at 2 Gb/s.
        let mut s = Sampler::new(Duration::from_millis(10), 0.0, None, 1);
        let mut cum = 0u64;
        for i in 1..=100 {
            cum += 125_000;
            s.event(0, f64::from(i) * 0.001, cum);
        }
        let (p1, p50, _, peak) = s.take_summary(0.0);
        assert!(
            (p50 - 1.0).abs() < 0.01 && (p1 - 1.0).abs() < 0.01,
            "{p50} {p1}"
        );
        assert!((peak - 1.0).abs() < 0.01, "{peak}");
        for i in 101..=200 {
            cum += 250_000;
            s.event(0, f64::from(i) * 0.001, cum);
        }
        let (p1, p50, _, _) = s.take_summary(0.0);
        // The first interval of the new window may straddle the change: p1 is at least 1.
        assert!((p50 - 2.0).abs() < 0.02, "{p50}");
        assert!(p1 >= 0.99, "{p1}");
        // Nothing since: the fallback.
        assert_eq!(s.take_summary(7.0), (7.0, 7.0, 7.0, 7.0));
    }

    #[test]
    fn sampler_even_rate() {
        // 1 GB/s = 8 Gb/s, completions every 0.25 ms, 10 ms intervals over a 1 s window.
        let mut s = Sampler::new(Duration::from_millis(10), 0.5, Some(1.5), 1);
        let t = steady(&mut s, 0.00025, 2.0, |_| 250_000);
        s.close(t);
        let (p1, p50, p99, peak) = s.summary(0.0);
        for v in [p1, p50, p99, peak] {
            assert!((v - 8.0).abs() < 0.02, "{v}");
        }
        assert_eq!(s.samples, 100);
    }

    #[test]
    fn sampler_sparse_completions_are_smoothed() {
        // A completion only every 35 ms (coarse cq_mod) still gives steady 1 ms samples.
        let mut s = Sampler::new(Duration::from_millis(1), 0.0, None, 1);
        let mut cum = 0u64;
        let mut t = 0.0;
        for _ in 0..20 {
            t += 0.035;
            cum += 35_000_000; // 1 GB/s
            s.event(0, t, cum);
        }
        s.finish_qp(0);
        s.close(t);
        let (p1, _, p99, peak) = s.summary(0.0);
        assert!((p1 - 8.0).abs() < 0.05 && (p99 - 8.0).abs() < 0.05 && (peak - 8.0).abs() < 0.05);
        assert_eq!(s.samples, 700);
    }

    #[test]
    fn sampler_interleaved_qps_show_no_spikes() {
        // 4 QPs at 2 Gb/s each (8 Gb/s in all), each completing every 40 ms, staggered by
        // 10 ms: a single interpolated curve would swing; per-QP curves stay flat.
        let mut s = Sampler::new(Duration::from_millis(1), 0.0, None, 4);
        let per = 0.25e9 * 0.040; // bytes per completion per QP
        let mut events = Vec::new();
        for q in 0..4usize {
            for k in 1..=25u32 {
                events.push((
                    0.010 * q as f64 + 0.040 * f64::from(k),
                    q,
                    (per * f64::from(k)) as u64,
                ));
            }
        }
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        let t_end = events.last().map_or(0.0, |e| e.0);
        for (t, q, cum) in events {
            s.event(q, t, cum);
        }
        s.close(t_end);
        let (p1, p50, p99, peak) = s.summary(0.0);
        // Between 40 ms and 1.0 s all four run; the ramp at the start and the tail differ.
        assert!((p50 - 8.0).abs() < 0.05, "p50 {p50}");
        assert!(peak < 8.05, "peak {peak}");
        assert!(p99 < 8.05, "p99 {p99}");
        assert!(p1 > 1.9, "p1 {p1}");
    }

    #[test]
    fn sampler_spreads_a_backlog_over_the_gap_before_it() {
        // 8 Gb/s throughout, polled every 1 ms, except one poll that comes 150 ms late and
        // finds 150 completions: every 10 ms interval, the gap's included, reads 8 Gb/s.
        let mut s = Sampler::new(Duration::from_millis(10), 0.0, Some(1.0), 1);
        let per = 1_000_000u64; // bytes per 1 ms at 8 Gb/s
        let mut cum = 0u64;
        let mut ms = 0u64;
        while ms < 1100 {
            let step = if ms == 400 { 150 } else { 1 };
            ms += step;
            // One entry per completion, with the QP's running total, as the CQ hands them out.
            let base = cum;
            let batch = (1..=step).map(move |k| (0usize, base + per * k, false));
            cum += per * step;
            s.polled(ms as f64 / 1e3, batch);
        }
        s.close(1.1);
        let (p1, p50, p99, peak) = s.summary(0.0);
        for v in [p1, p50, p99, peak] {
            assert!(
                (v - 8.0).abs() < 0.02,
                "p1 {p1} p50 {p50} p99 {p99} peak {peak}"
            );
        }
    }

    #[test]
    fn sampler_short_run_falls_back() {
        let mut s = Sampler::new(Duration::from_millis(10), 0.0, None, 1);
        s.event(0, 0.001, 1000);
        s.event(0, 0.002, 2000);
        s.close(0.002);
        assert_eq!(s.summary(3.5), (3.5, 3.5, 3.5, 3.5));
    }

    #[test]
    fn sampler_waits_for_every_qp() {
        // QP 1 reports late: the interval stays open until it does, then is exact.
        let mut s = Sampler::new(Duration::from_millis(10), 0.0, None, 2);
        s.event(0, 0.010, 1_250_000); // 1 Gb/s
        s.event(0, 0.020, 2_500_000);
        assert_eq!(s.samples, 0);
        s.event(1, 0.020, 2_500_000);
        // [0, 10 ms] and [10, 20 ms], both 2 Gb/s.
        assert_eq!(s.samples, 2);
        s.close(0.020);
        let (_, p50, _, peak) = s.summary(0.0);
        assert!(
            (p50 - 2.0).abs() < 0.01 && (peak - 2.0).abs() < 0.01,
            "{p50} {peak}"
        );
    }

    #[test]
    fn sampler_sees_a_dip() {
        // 10 Gb/s with a 50 ms stall in the middle of a 1 s window.
        let mut s = Sampler::new(Duration::from_millis(10), 0.0, Some(1.0), 1);
        let t = steady(&mut s, 0.0001, 1.2, |t| {
            if (0.5..0.55).contains(&t) {
                0
            } else {
                125_000 // 1.25 GB/s per 0.1 ms -> 10 Gb/s
            }
        });
        s.close(t);
        let (p1, p50, _, peak) = s.summary(0.0);
        assert!(p1 < 1.0, "p1 {p1}");
        assert!((p50 - 10.0).abs() < 0.05, "p50 {p50}");
        assert!(peak < 10.5, "peak {peak}");
    }
}
