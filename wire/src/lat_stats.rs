//! The statistics of a latency test's round trips, apart from the latency documents (`lat`,
//! which re-exports them) so that a size's result (`params::SizeResult`) can carry them without
//! the parameters and those documents importing each other.
//!
//! A sample is one round trip of the ping-pong (this side's write to the peer, the peer's
//! write back) measured between two of this side's posts; like ib_write_lat, the reported
//! latency is half of it. `n` iterations give `n - 1` samples. A side keeps at most
//! [`MAX_KEPT_SAMPLES`] samples of one size one by one ([`RoundTrips`]); the rest count in the
//! histogram and the running sums only.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The statistics of one message size on one side, in microseconds of one-way latency (half a
/// round trip). The `t_*` fields are ib_write_lat's table, computed as it does from the sorted
/// samples (beyond [`MAX_KEPT_SAMPLES`] of one size, the median and percentiles from the
/// histogram: see [`RoundTrips::stats`]); `p50_us`/`p99_us`/`p99_9_us`/`max_us` come from an
/// HDR histogram (3 significant digits).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Round trips measured (iterations - 1: the time of one is between two posts), every one
    /// counted, beyond [`MAX_KEPT_SAMPLES`] too.
    pub samples: u64,
    /// Smallest sample.
    pub t_min_us: f64,
    /// Largest sample.
    pub t_max_us: f64,
    /// The median (ib_write_lat's t_typical).
    pub t_typical_us: f64,
    /// The mean.
    pub t_avg_us: f64,
    /// The standard deviation (of the population, as ib_write_lat).
    pub t_stdev_us: f64,
    /// ib_write_lat's 99% percentile: the sorted sample at index ceil(0.99 n).
    pub t_p99_us: f64,
    /// ib_write_lat's 99.9% percentile: the sorted sample at index ceil(0.999 n).
    pub t_p99_9_us: f64,
    /// Median from the histogram.
    pub p50_us: f64,
    /// 99th percentile from the histogram.
    pub p99_us: f64,
    /// 99.9th percentile from the histogram.
    pub p99_9_us: f64,
    /// Largest value from the histogram.
    pub max_us: f64,
    /// The samples in the order measured, one-way microseconds, at most [`MAX_KEPT_SAMPLES`]
    /// (the first ones); kept by the side that measured them (for `-U`/`-H`), never sent or
    /// printed in JSON.
    #[serde(skip)]
    pub samples_us: Vec<f64>,
}

/// The most round trips of one message size a side keeps one by one (8 MB of them): the
/// samples `-U`/`-H` print and ib_write_lat's sorted-sample columns are computed from. Beyond
/// it a test (`-n 2^64-1`, a long `-D`) goes on, each further round trip counted in the
/// histogram, the minimum, maximum, mean and deviation only, so that a side's memory stays
/// bounded whatever the peer asks.
pub const MAX_KEPT_SAMPLES: usize = 1_000_000;

/// The round trips of one message size, recorded as they are measured: every one in an HDR
/// histogram (of half round trips, in ns) and running sums, the first [`MAX_KEPT_SAMPLES`]
/// also one by one. Memory: at most 8 MB of samples plus the histogram, whatever the count.
#[derive(Debug, Clone)]
pub struct RoundTrips {
    kept: Vec<u64>,
    count: u64,
    min_ns: u64,
    max_ns: u64,
    /// Running mean and sum of squared deviations of the one-way latency in us (Welford).
    mean_us: f64,
    m2_us: f64,
    hist: Option<Histogram<u64>>,
}

impl RoundTrips {
    /// An empty record with room for `expected` samples (at most [`MAX_KEPT_SAMPLES`]).
    pub fn with_capacity(expected: u64) -> RoundTrips {
        let room = usize::try_from(expected)
            .unwrap_or(MAX_KEPT_SAMPLES)
            .min(MAX_KEPT_SAMPLES);
        RoundTrips {
            kept: Vec::with_capacity(room),
            count: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            mean_us: 0.0,
            m2_us: 0.0,
            hist: Histogram::<u64>::new(3).ok(),
        }
    }

    /// Records one round trip of `rtt_ns` nanoseconds.
    pub fn record(&mut self, rtt_ns: u64) {
        if self.kept.len() < MAX_KEPT_SAMPLES {
            self.kept.push(rtt_ns);
        }
        self.count += 1;
        self.min_ns = self.min_ns.min(rtt_ns);
        self.max_ns = self.max_ns.max(rtt_ns);
        let us = rtt_ns as f64 / 2000.0;
        let d = us - self.mean_us;
        self.mean_us += d / self.count as f64;
        self.m2_us += d * (us - self.mean_us);
        if let Some(h) = self.hist.as_mut() {
            // Half a round trip in ns, at least 1 (the histogram's lowest trackable value).
            if h.record((rtt_ns / 2).max(1)).is_err() {
                self.hist = None;
            }
        }
    }

    /// Round trips recorded.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether none was recorded.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The round trips kept one by one: the first [`MAX_KEPT_SAMPLES`], in the order measured.
    pub fn kept(&self) -> &[u64] {
        &self.kept
    }

    /// The statistics of every round trip recorded; `None` without any. Up to
    /// [`MAX_KEPT_SAMPLES`] samples ib_write_lat's columns are computed from the sorted
    /// samples as it does; beyond, `t_typical_us`, `t_p99_us` and `t_p99_9_us` are the
    /// histogram's (3 significant digits) and `samples_us` holds the first ones only.
    pub fn stats(&self) -> Option<LatencyStats> {
        if self.count == 0 {
            return None;
        }
        let h = self.hist.as_ref()?;
        let us = |ns: u64| ns as f64 / 1000.0;
        let one_way: Vec<f64> = self.kept.iter().map(|&t| t as f64 / 2000.0).collect();
        let (t_typical_us, t_avg_us, t_stdev_us, t_p99_us, t_p99_9_us) =
            if self.count as usize == self.kept.len() {
                let mut sorted = one_way.clone();
                sorted.sort_by(f64::total_cmp);
                let n = sorted.len();
                let at = |i: usize| sorted[i.min(n - 1)];
                let median = if n % 2 == 0 {
                    (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
                } else {
                    sorted[n / 2]
                };
                let avg = sorted.iter().sum::<f64>() / n as f64;
                let var = sorted.iter().map(|v| (v - avg) * (v - avg)).sum::<f64>() / n as f64;
                // ib_write_lat: iters_99 = ceil(measure_cnt * 0.99), an index into the sorted
                // deltas.
                let idx = |q: f64| (n as f64 * q).ceil() as usize;
                (median, avg, var.sqrt(), at(idx(0.99)), at(idx(0.999)))
            } else {
                let q = |x: f64| us(h.value_at_quantile(x));
                (
                    q(0.5),
                    self.mean_us,
                    (self.m2_us / self.count as f64).max(0.0).sqrt(),
                    q(0.99),
                    q(0.999),
                )
            };
        Some(LatencyStats {
            samples: self.count,
            t_min_us: self.min_ns as f64 / 2000.0,
            t_max_us: self.max_ns as f64 / 2000.0,
            t_typical_us,
            t_avg_us,
            t_stdev_us,
            t_p99_us,
            t_p99_9_us,
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p99_9_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
            samples_us: one_way,
        })
    }
}

impl LatencyStats {
    /// The statistics of round trips of `rtt_ns` nanoseconds each, in the order measured, as
    /// [`RoundTrips::stats`] gives them; `None` without any.
    pub fn from_round_trips_ns(rtt_ns: &[u64]) -> Option<LatencyStats> {
        let mut r = RoundTrips::with_capacity(rtt_ns.len() as u64);
        for &t in rtt_ns {
            r.record(t);
        }
        r.stats()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn statistics_follow_ib_write_lat_on_half_round_trips() {
        // Round trips 2..=2000 us in a scrambled order: one-way 1..=1000 us, 1000 samples.
        let mut rtt: Vec<u64> = (1..=1000u64).map(|i| i * 2000).collect();
        rtt.reverse();
        rtt.swap(3, 700);
        let s = LatencyStats::from_round_trips_ns(&rtt).unwrap();
        assert_eq!(s.samples, 1000);
        assert!(close(s.t_min_us, 1.0) && close(s.t_max_us, 1000.0));
        // Even count: the mean of the two middle values (500 and 501).
        assert!(close(s.t_typical_us, 500.5), "{}", s.t_typical_us);
        assert!(close(s.t_avg_us, 500.5));
        // Population stdev of 1..=1000: sqrt((1000^2 - 1) / 12).
        assert!(close(s.t_stdev_us, ((1_000_000.0f64 - 1.0) / 12.0).sqrt()));
        // index ceil(990) = 990 -> value 991; ceil(999) = 999 -> value 1000.
        assert!(close(s.t_p99_us, 991.0), "{}", s.t_p99_us);
        assert!(close(s.t_p99_9_us, 1000.0));
        // The histogram keeps 3 significant digits.
        assert!((s.p50_us - 500.0).abs() <= 1.0, "{}", s.p50_us);
        assert!((s.p99_us - 990.0).abs() <= 1.0, "{}", s.p99_us);
        assert!((s.max_us - 1000.0).abs() <= 1.0, "{}", s.max_us);
        // The samples stay in the order measured.
        assert!(close(s.samples_us[0], 1000.0) && close(s.samples_us[3], 300.0));
    }

    #[test]
    fn an_odd_count_has_its_middle_value_typical_and_indexes_stay_inside() {
        let s = LatencyStats::from_round_trips_ns(&[6000, 2000, 4000]).unwrap();
        assert!(close(s.t_typical_us, 2.0));
        // ceil(3 * 0.99) = 3 is past the end: the largest sample, not a panic.
        assert!(close(s.t_p99_us, 3.0) && close(s.t_p99_9_us, 3.0));
        let one = LatencyStats::from_round_trips_ns(&[10]).unwrap();
        assert!(close(one.t_min_us, 0.005) && one.max_us > 0.0);
        assert!(LatencyStats::from_round_trips_ns(&[]).is_none());
    }

    #[test]
    fn samples_beyond_the_bound_are_kept_in_the_histogram_only() {
        // 1.2 million round trips of 2..=2000 us, one-way 1..=1000 us, cycling: the first
        // 1,000,000 are kept one by one, every one counts in the statistics.
        let n = 1_200_000u64;
        let rtt: Vec<u64> = (0..n).map(|i| (i % 1000 + 1) * 2000).collect();
        let s = LatencyStats::from_round_trips_ns(&rtt).unwrap();
        assert_eq!(s.samples, n);
        assert_eq!(s.samples_us.len(), 1_000_000, "kept one by one");
        assert!(close(s.samples_us[999_999], 1000.0));
        assert!(close(s.t_min_us, 1.0) && close(s.t_max_us, 1000.0));
        assert!(close(s.t_avg_us, 500.5), "{}", s.t_avg_us);
        assert!(
            (s.t_stdev_us - ((1_000_000.0f64 - 1.0) / 12.0).sqrt()).abs() < 1e-6,
            "{}",
            s.t_stdev_us
        );
        // The sorted-sample columns come from the histogram beyond the bound (3 digits).
        assert!((s.t_typical_us - 500.0).abs() <= 1.0, "{}", s.t_typical_us);
        assert!((s.t_p99_us - 990.0).abs() <= 1.0, "{}", s.t_p99_us);
        assert!((s.t_p99_9_us - 999.0).abs() <= 1.0, "{}", s.t_p99_9_us);
        assert!((s.p99_us - 990.0).abs() <= 1.0, "{}", s.p99_us);
    }
}
