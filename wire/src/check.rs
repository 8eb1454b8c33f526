//! The rules a document from rdmabw must keep before railsweep makes rows of it: every number
//! a row takes from it finite and not negative, as `results::RailResult::validate` requires of
//! the row. A document is checked where it arrives, so that one bad value makes its own rail
//! failed (naming the value) instead of stopping the writing of every row.

use super::lat::{LatReport, LatRow};
use super::params::SizeResult;
use super::report::BwReport;
use std::fmt;

/// A record that breaks one of a row's rules (`results::RailResult`), with the field at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidRecord {
    /// Name of the offending field.
    pub field: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for InvalidRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The rule of every number of a record (and of the documents rows are made of): finite and
/// not negative. The error names `field` and shows the value, short however large it is.
pub fn check_number(field: &'static str, v: f64) -> Result<(), InvalidRecord> {
    if v.is_finite() && v >= 0.0 {
        return Ok(());
    }
    // `{v}` writes 1e300 with 301 digits: large and tiny values in exponent form.
    let shown = if v == 0.0 || !v.is_finite() || (1e-6..1e15).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    };
    Err(InvalidRecord {
        field,
        message: format!("must be a finite number >= 0, got {shown}"),
    })
}

/// Check the numbers of one size's result (`results[i]` of a report).
fn size_result(r: &SizeResult) -> Result<(), InvalidRecord> {
    for (field, v) in [
        ("bw_peak_gbps", Some(r.bw_peak_gbps)),
        ("bw_avg_gbps", Some(r.bw_avg_gbps)),
        ("msg_rate_mpps", Some(r.msg_rate_mpps)),
        ("bw_p1_gbps", Some(r.bw_p1_gbps)),
        ("bw_p50_gbps", Some(r.bw_p50_gbps)),
        ("bw_p99_gbps", Some(r.bw_p99_gbps)),
        ("measured_s", Some(r.measured_s)),
        ("cpu_s", Some(r.cpu_s)),
        ("cpu_s_per_gb", r.cpu_s_per_gb),
    ] {
        if let Some(v) = v {
            check_number(field, v).map_err(|e| at_size(e, r.msg_size_bytes))?;
        }
    }
    Ok(())
}

/// `e` of the result of `size` bytes, saying so.
fn at_size(mut e: InvalidRecord, size: u64) -> InvalidRecord {
    e.message = format!("{} (the result of {size} B writes)", e.message);
    e
}

impl BwReport {
    /// Check every number that goes into a row ([`BwReport::rail_results`]): each size's
    /// bandwidths, message rate, window and CPU time, and the line rate, its percentage and
    /// the threshold.
    ///
    /// # Errors
    ///
    /// The first value that is not a finite number >= 0, by field name, with the value.
    pub fn check(&self) -> Result<(), InvalidRecord> {
        for r in &self.results {
            size_result(r)?;
        }
        for (field, v) in [
            ("line_rate_gbps", self.line_rate_gbps),
            ("line_rate_pct", self.line_rate_pct),
            ("threshold_gbps", self.threshold_gbps),
        ] {
            if let Some(v) = v {
                check_number(field, v)?;
            }
        }
        Ok(())
    }
}

/// Check the numbers of one latency row.
fn lat_row(r: &LatRow) -> Result<(), InvalidRecord> {
    // What a row takes first (`lat_p50_us`, `lat_p99_us`, `lat_max_us`), then ib_write_lat's.
    for (field, v) in [
        ("p50_us", r.p50_us),
        ("p99_us", r.p99_us),
        ("max_us", r.max_us),
        ("p99_9_us", r.p99_9_us),
        ("t_min_us", r.t_min_us),
        ("t_max_us", r.t_max_us),
        ("t_typical_us", r.t_typical_us),
        ("t_avg_us", r.t_avg_us),
        ("t_stdev_us", r.t_stdev_us),
        ("t_p99_us", r.t_p99_us),
        ("t_p99_9_us", r.t_p99_9_us),
    ] {
        check_number(field, v).map_err(|e| at_size(e, r.msg_size_bytes))?;
    }
    Ok(())
}

impl LatReport {
    /// Check every number of this side's rows (what a row's `lat_*_us` take) and of
    /// `max_p99_us`.
    ///
    /// # Errors
    ///
    /// The first value that is not a finite number >= 0, by field name, with the value.
    pub fn check(&self) -> Result<(), InvalidRecord> {
        for r in &self.results {
            lat_row(r)?;
        }
        if let Some(v) = self.max_p99_us {
            check_number("max_p99_us", v)?;
        }
        Ok(())
    }
}
