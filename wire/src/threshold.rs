//! The judgements every tool makes of a measured bandwidth, computed here only: its share
//! of the line rate, and whether it falls below a threshold (`--min-gbps`,
//! `--min-line-rate-pct`); and of a measured latency, whether its p99 is above `--max-p99-us`.
//! rdmabw, railsweep and fleet all call these.

/// Percent of line rate, e.g. `percent_of_line_rate(92.0, Some(100.0)) == Some(92.0)`; `None`
/// when the line rate is unknown, zero or not finite.
pub fn percent_of_line_rate(gbps: f64, line_rate_gbps: Option<f64>) -> Option<f64> {
    line_rate_gbps
        .filter(|r| *r > 0.0 && r.is_finite())
        .map(|r| gbps / r * 100.0)
}

/// The threshold in Gb/s once `min_line_rate_pct` is resolved against the line rate: the
/// larger of the two when both are given; `None` when there is none (or when only a
/// percentage is given and the line rate is unknown).
pub fn threshold_gbps(
    min_gbps: Option<f64>,
    min_line_rate_pct: Option<f64>,
    line_rate_gbps: Option<f64>,
) -> Option<f64> {
    let from_pct = min_line_rate_pct
        .zip(line_rate_gbps.filter(|r| *r > 0.0 && r.is_finite()))
        .map(|(p, r)| p / 100.0 * r);
    match (min_gbps, from_pct) {
        (Some(g), Some(p)) => Some(g.max(p)),
        (g, p) => g.or(p),
    }
}

/// Whether `bw_avg_gbps` falls below `threshold_gbps` (never, without a threshold).
pub fn below_threshold(bw_avg_gbps: f64, threshold_gbps: Option<f64>) -> bool {
    threshold_gbps.is_some_and(|t| bw_avg_gbps < t)
}

/// Whether a p99 latency of `p99_us` is above `max_p99_us` (never, without a maximum): what
/// `rdmabw lat --max-p99-us` and railsweep's `--max-p99-us` judge.
pub fn above_max_p99(p99_us: f64, max_p99_us: Option<f64>) -> bool {
    max_p99_us.is_some_and(|m| p99_us > m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_p99_is_judged_only_against_a_maximum_and_only_above_it() {
        assert!(!above_max_p99(50.0, None));
        assert!(!above_max_p99(50.0, Some(50.0)));
        assert!(above_max_p99(50.1, Some(50.0)));
    }

    #[test]
    fn percent_needs_a_usable_line_rate() {
        assert_eq!(percent_of_line_rate(92.0, Some(100.0)), Some(92.0));
        assert_eq!(percent_of_line_rate(92.0, Some(0.0)), None);
        assert_eq!(percent_of_line_rate(92.0, Some(f64::INFINITY)), None);
        assert_eq!(percent_of_line_rate(92.0, None), None);
        // From bench-core's engine, which had a copy of this function.
        assert_eq!(percent_of_line_rate(1.0, None), None);
        assert_eq!(percent_of_line_rate(1.0, Some(0.0)), None);
    }

    #[test]
    fn threshold_takes_the_larger_of_both() {
        assert_eq!(
            threshold_gbps(Some(50.0), Some(90.0), Some(100.0)),
            Some(90.0)
        );
        assert_eq!(
            threshold_gbps(Some(95.0), Some(90.0), Some(100.0)),
            Some(95.0)
        );
        assert_eq!(threshold_gbps(Some(50.0), Some(90.0), None), Some(50.0));
        assert_eq!(threshold_gbps(None, Some(90.0), Some(200.0)), Some(180.0));
        assert_eq!(threshold_gbps(None, Some(90.0), None), None);
        assert_eq!(threshold_gbps(None, None, Some(100.0)), None);
    }

    #[test]
    fn below_only_with_a_threshold() {
        assert!(below_threshold(49.9, Some(50.0)));
        assert!(!below_threshold(50.0, Some(50.0)));
        assert!(!below_threshold(0.0, None));
    }
}
