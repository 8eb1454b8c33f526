//! Reports: rows from one or more runs, lined up rail by rail per network
//! mode, with the summary numbers people quote.

use std::collections::BTreeMap;
use std::fmt;

use crate::error::{Result, ResultsError};
use crate::group::GroupCulprit;
use crate::record::{NetworkMode, RailResult, RailStatus};

/// Rows from any number of runs, plus how to judge them. What every
/// [`crate::Exporter`] serializes.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Program (and version) named in outputs that record it (JSON).
    pub generated_by: String,
    /// Every row, in input order.
    pub rows: Vec<RailResult>,
    /// Threshold for "below" in summaries. `None` means: trust each row's
    /// recorded `status` (`below_threshold`), as judged when it was measured.
    pub threshold_gbps: Option<f64>,
    /// Column names chosen by the user (`railsweep report --label KEY=NAME`): KEY is a run id
    /// or a network mode; a run id's wins over its mode's.
    pub labels: Vec<(String, String)>,
    /// Maximum p99 latency (usec) for "below" in summaries, of the rows that have latency.
    /// `None` means: trust the latency judgement each row recorded when it was measured.
    pub max_p99_us: Option<f64>,
    /// The groups of nodes a fleet named as culprits (`--pattern topology`), which the JSON and
    /// OpenMetrics exports carry beside the rows; empty for anything else.
    pub group_culprits: Vec<GroupCulprit>,
    /// What the user asked of the chart (railsweep `--title`, `--width`); the SVG and PNG
    /// exports read it, the others do not.
    pub chart: ChartOptions,
}

/// What the user may set of a chart: its title, and its width in pixels (the SVG's; the PNG
/// has twice as many).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChartOptions {
    /// The title, instead of "RDMA bandwidth per rail: MODE vs MODE".
    pub title: Option<String>,
    /// The image's width, instead of the exporter's.
    pub width: Option<u32>,
}

impl Report {
    /// A report over `rows`, judged by their recorded status.
    pub fn new(generated_by: impl Into<String>, rows: Vec<RailResult>) -> Self {
        Report {
            generated_by: generated_by.into(),
            rows,
            threshold_gbps: None,
            labels: Vec::new(),
            max_p99_us: None,
            group_culprits: Vec::new(),
            chart: ChartOptions::default(),
        }
    }

    /// Draw the chart as `chart` says (its title, its width).
    pub fn with_chart(mut self, chart: ChartOptions) -> Self {
        self.chart = chart;
        self
    }

    /// Name columns by `labels` (KEY=NAME, KEY a run id or a network mode) instead of by mode.
    /// A KEY that names no run and no mode of the rows is an error naming those there are.
    pub fn with_labels(mut self, labels: Vec<(String, String)>) -> Result<Self> {
        for (key, _) in &labels {
            let known = self
                .rows
                .iter()
                .any(|r| r.run_id == *key || r.network_mode.to_string() == *key);
            if !known {
                let mut keys: Vec<String> = self
                    .rows
                    .iter()
                    .flat_map(|r| [r.run_id.clone(), r.network_mode.to_string()])
                    .collect();
                keys.sort();
                keys.dedup();
                return Err(ResultsError::UnknownLabelKey {
                    key: key.clone(),
                    known: keys.join(", "),
                });
            }
        }
        self.labels = labels;
        Ok(self)
    }

    /// The label the user gave the run `run_id` or, failing that, its mode.
    fn user_label(&self, mode: &NetworkMode, run_id: &str) -> Option<&str> {
        let find = |key: &str| {
            self.labels
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        find(run_id).or_else(|| find(&mode.to_string()))
    }

    /// Judge rails against `threshold_gbps` instead of their recorded status.
    pub fn with_threshold(mut self, threshold_gbps: Option<f64>) -> Self {
        self.threshold_gbps = threshold_gbps;
        self
    }

    /// Judge rails' p99 latency against `max_p99_us` instead of their recorded status.
    pub fn with_max_p99(mut self, max_p99_us: Option<f64>) -> Self {
        self.max_p99_us = max_p99_us;
        self
    }

    /// Whether a measured rail counts as below threshold: under the report's
    /// threshold when one is set, otherwise as its `status` says. Failed rails
    /// are never "below"; they are failed. With a maximum p99 latency, a row whose
    /// p99 is above it is below too; the other judgement stays as recorded (a row
    /// recorded below whose bandwidth met its own threshold was judged by its latency).
    pub fn is_below(&self, row: &RailResult) -> bool {
        if row.status == RailStatus::Failed {
            return false;
        }
        let Some(max) = self.max_p99_us else {
            return match (self.threshold_gbps, row.bw_avg_gbps) {
                (Some(t), Some(bw)) => bw < t,
                (Some(_), None) => false,
                (None, _) => row.status == RailStatus::BelowThreshold,
            };
        };
        let slow = row
            .lat_p99_us
            .is_some_and(|p99| crate::threshold::above_max_p99(p99, Some(max)));
        let low = match (self.threshold_gbps, row.bw_avg_gbps) {
            (Some(t), Some(bw)) => bw < t,
            (Some(_), None) => false,
            (None, bw) => {
                row.status == RailStatus::BelowThreshold
                    && bw.is_none_or(|bw| crate::threshold::below_threshold(bw, row.threshold_gbps))
            }
        };
        slow || low
    }

    /// True when some rail failed or fell below the threshold: the condition
    /// `railsweep report` signals with exit code 1.
    pub fn has_problems(&self) -> bool {
        self.rows
            .iter()
            .any(|r| r.status == RailStatus::Failed || self.is_below(r))
    }

    /// Line the rows up: one series per (network mode, run), one line per
    /// rail. Fails if a run has the same rail twice.
    pub fn comparison(&self) -> Result<Comparison<'_>> {
        let mut by_series: BTreeMap<(&NetworkMode, &str), BTreeMap<u32, &RailResult>> =
            BTreeMap::new();
        for row in &self.rows {
            let rails = by_series
                .entry((&row.network_mode, row.run_id.as_str()))
                .or_default();
            if rails.insert(row.rail, row).is_some() {
                return Err(ResultsError::DuplicateRail {
                    run_id: row.run_id.clone(),
                    mode: row.network_mode.clone(),
                    rail: row.rail,
                });
            }
        }
        let mut runs_per_mode: BTreeMap<&NetworkMode, usize> = BTreeMap::new();
        for (mode, _) in by_series.keys() {
            *runs_per_mode.entry(mode).or_default() += 1;
        }
        // A mode with several runs names each by its message size where each run has one size
        // of its own (rdmabw's sweep of sizes: `rdmabw 4 KiB`, `rdmabw 64 KiB`), else numbers
        // them in run id order (`sriov #1`, `sriov #2`); the Runs table says which run each is:
        // the run id itself would crowd every heading.
        let one_size = |rails: &BTreeMap<u32, &RailResult>| -> Option<u64> {
            let first = rails.values().next()?.msg_size_bytes;
            rails
                .values()
                .all(|r| r.msg_size_bytes == first)
                .then_some(first)
        };
        let mut sizes_of_mode: BTreeMap<&NetworkMode, Vec<Option<u64>>> = BTreeMap::new();
        for ((mode, _), rails) in &by_series {
            sizes_of_mode.entry(mode).or_default().push(one_size(rails));
        }
        let by_size = |mode: &NetworkMode| {
            sizes_of_mode.get(mode).is_some_and(|sizes| {
                let distinct: std::collections::BTreeSet<_> = sizes.iter().collect();
                sizes.iter().all(Option::is_some) && distinct.len() == sizes.len()
            })
        };
        let mut nth_of_mode: BTreeMap<&NetworkMode, usize> = BTreeMap::new();
        let series = by_series
            .iter()
            .map(|((mode, run_id), rails)| {
                let nth = nth_of_mode.entry(mode).or_default();
                *nth += 1;
                let several = runs_per_mode.get(mode).copied().unwrap_or(0) > 1;
                let label = match (self.user_label(mode, run_id), one_size(rails)) {
                    (Some(l), _) => l.to_string(),
                    (None, Some(size)) if several && by_size(mode) => {
                        format!("{mode} {}", size_text(size))
                    }
                    (None, _) if several => format!("{mode} #{nth}"),
                    (None, _) => mode.to_string(),
                };
                Series {
                    mode: (*mode).clone(),
                    run_id: (*run_id).to_string(),
                    label,
                }
            })
            .collect();
        let mut rails: Vec<u32> = self.rows.iter().map(|r| r.rail).collect();
        rails.sort_unstable();
        rails.dedup();
        let cells = rails
            .iter()
            .map(|rail| by_series.values().map(|m| m.get(rail).copied()).collect())
            .collect();
        Ok(Comparison {
            report: self,
            series,
            rails,
            cells,
        })
    }
}

/// One column of a comparison: the rails of one run in one network mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// The network mode.
    pub mode: NetworkMode,
    /// The run.
    pub run_id: String,
    /// Column heading: the user's `--label` for the run or its mode, else the mode; where the
    /// mode has several runs, with the run's message size when each has its own
    /// (`rdmabw 64 KiB`), else numbered (`sriov #2`).
    pub label: String,
}

/// A message size as people write it: `64 KiB`, `1 MiB`, `2 B`.
pub(crate) fn size_text(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// Rails as rows, series (modes) as columns. Built by [`Report::comparison`].
#[derive(Debug, Clone)]
pub struct Comparison<'a> {
    report: &'a Report,
    /// Columns, ordered by network mode, then run id.
    pub series: Vec<Series>,
    /// Every rail number seen in any series, ascending.
    pub rails: Vec<u32>,
    cells: Vec<Vec<Option<&'a RailResult>>>,
}

impl<'a> Comparison<'a> {
    /// The report this comparison was built from.
    pub fn report(&self) -> &'a Report {
        self.report
    }

    /// The row for `self.rails[rail_index]` in `self.series[series_index]`,
    /// if that series measured that rail.
    pub fn cell(&self, rail_index: usize, series_index: usize) -> Option<&'a RailResult> {
        self.cells
            .get(rail_index)
            .and_then(|row| row.get(series_index))
            .copied()
            .flatten()
    }

    /// The rows of one series, by ascending rail.
    pub fn series_rows(&self, series_index: usize) -> impl Iterator<Item = &'a RailResult> + '_ {
        (0..self.rails.len()).filter_map(move |r| self.cell(r, series_index))
    }

    /// Summary numbers for one series.
    pub fn summary(&self, series_index: usize) -> ModeSummary {
        let label = self
            .series
            .get(series_index)
            .map(|s| s.label.clone())
            .unwrap_or_default();
        let rows: Vec<&RailResult> = self.series_rows(series_index).collect();
        let measured: Vec<&RailResult> = rows
            .iter()
            .copied()
            .filter(|r| r.status != RailStatus::Failed)
            .collect();
        let bws: Vec<f64> = measured.iter().filter_map(|r| r.bw_avg_gbps).collect();
        let pcts: Vec<f64> = measured
            .iter()
            .filter_map(|r| match (r.bw_avg_gbps, r.line_rate_gbps) {
                (Some(bw), Some(line)) if line > 0.0 => Some(bw / line * 100.0),
                _ => None,
            })
            .collect();
        let p99s: Vec<f64> = rows.iter().filter_map(|r| r.lat_p99_us).collect();
        let threshold_gbps = self.report.threshold_gbps.or_else(|| {
            let first = rows.first().and_then(|r| r.threshold_gbps);
            rows.iter()
                .all(|r| r.threshold_gbps == first)
                .then_some(first)
                .flatten()
        });
        ModeSummary {
            label,
            rails: rows.len(),
            measured: measured.len(),
            bw_min_gbps: bws.iter().copied().reduce(f64::min),
            bw_max_gbps: bws.iter().copied().reduce(f64::max),
            bw_mean_gbps: mean(&bws),
            line_rate_pct_mean: mean(&pcts),
            lat_p99_min_us: p99s.iter().copied().reduce(f64::min),
            lat_p99_max_us: p99s.iter().copied().reduce(f64::max),
            threshold_gbps,
            below_rails: measured
                .iter()
                .filter(|r| self.report.is_below(r))
                .map(|r| r.rail)
                .collect(),
            failed_rails: rows
                .iter()
                .filter(|r| r.status == RailStatus::Failed)
                .map(|r| r.rail)
                .collect(),
        }
    }

    /// Summary numbers for every series, in column order.
    pub fn summaries(&self) -> Vec<ModeSummary> {
        (0..self.series.len()).map(|i| self.summary(i)).collect()
    }

    /// Rail-by-rail difference of series `b` from series `a`, over every rail
    /// of the comparison.
    pub fn diff(&self, a: usize, b: usize) -> Vec<RailDiff> {
        let bw = |rail_index, series| {
            self.cell(rail_index, series)
                .filter(|r| r.status != RailStatus::Failed)
                .and_then(|r| r.bw_avg_gbps)
        };
        self.rails
            .iter()
            .enumerate()
            .map(|(i, &rail)| {
                let (a_gbps, b_gbps) = (bw(i, a), bw(i, b));
                let diff_gbps = a_gbps.zip(b_gbps).map(|(x, y)| y - x);
                RailDiff {
                    rail,
                    a_gbps,
                    b_gbps,
                    diff_gbps,
                    diff_pct: a_gbps
                        .zip(diff_gbps)
                        .filter(|(x, _)| *x > 0.0)
                        .map(|(x, d)| d / x * 100.0),
                }
            })
            .collect()
    }
}

fn mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        None
    } else {
        #[allow(clippy::cast_precision_loss)]
        let n = values.len() as f64;
        Some(values.iter().sum::<f64>() / n)
    }
}

/// One rail's bandwidth in two series and the difference `b - a`.
#[derive(Debug, Clone, PartialEq)]
pub struct RailDiff {
    /// The rail.
    pub rail: u32,
    /// Average bandwidth in series `a`; `None` if not measured or failed.
    pub a_gbps: Option<f64>,
    /// Average bandwidth in series `b`; `None` if not measured or failed.
    pub b_gbps: Option<f64>,
    /// `b_gbps - a_gbps`, when both exist.
    pub diff_gbps: Option<f64>,
    /// The difference as a percentage of `a_gbps`.
    pub diff_pct: Option<f64>,
}

/// Summary numbers of one series, displayed as the line people post:
/// `hostnetwork: 16 rails, 96.86 to 96.88 Gb/s (mean 96.87 Gb/s, 96.9% of
/// line rate), 0 below 90.0 Gb/s, 0 failed`.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeSummary {
    /// The series label (network mode, with run id if needed).
    pub label: String,
    /// Rails in the series, failed ones included.
    pub rails: usize,
    /// Rails that produced a bandwidth.
    pub measured: usize,
    /// Lowest average bandwidth over measured rails.
    pub bw_min_gbps: Option<f64>,
    /// Highest average bandwidth over measured rails.
    pub bw_max_gbps: Option<f64>,
    /// Mean of the average bandwidths over measured rails.
    pub bw_mean_gbps: Option<f64>,
    /// Mean over measured rails of bandwidth as a percentage of line rate.
    pub line_rate_pct_mean: Option<f64>,
    /// Lowest p99 latency over the rails whose latency was measured (`--test bw,lat`).
    pub lat_p99_min_us: Option<f64>,
    /// Highest p99 latency, as `lat_p99_min_us`.
    pub lat_p99_max_us: Option<f64>,
    /// The threshold "below" refers to, if one is known for the whole series.
    pub threshold_gbps: Option<f64>,
    /// Rails below the threshold (see [`Report::is_below`]).
    pub below_rails: Vec<u32>,
    /// Rails that failed.
    pub failed_rails: Vec<u32>,
}

/// A threshold printed as people write it: `90.0`, `92.25`.
/// A figure for people to read: `decimals` decimals, or more where it takes them to show two
/// significant digits, so that a small value never reads as zero (`fmt_number(96.871, 2)` is
/// `96.87`, `(0.0043, 2)` `0.0043`, `(96.87, 0)` `97`, `(0.04, 0)` `0.040`, 0 `0`).
pub fn fmt_number(x: f64, decimals: usize) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x:.decimals$}");
    }
    #[allow(clippy::cast_possible_truncation)]
    let magnitude = x.abs().log10().floor() as i64;
    let for_two = usize::try_from(1 - magnitude).unwrap_or(0);
    let decimals = decimals.max(for_two);
    format!("{x:.decimals$}")
}

pub(crate) fn fmt_threshold(t: f64) -> String {
    if t.fract() == 0.0 {
        format!("{t:.1}")
    } else {
        format!("{t}")
    }
}

impl fmt::Display for ModeSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.rails == 1 { "rail" } else { "rails" };
        write!(f, "{}: {} {plural}, ", self.label, self.rails)?;
        match (self.bw_min_gbps, self.bw_max_gbps, self.bw_mean_gbps) {
            (Some(lo), Some(hi), Some(mean)) => {
                write!(
                    f,
                    "{} to {} Gb/s (mean {} Gb/s",
                    fmt_number(lo, 2),
                    fmt_number(hi, 2),
                    fmt_number(mean, 2)
                )?;
                if let Some(pct) = self.line_rate_pct_mean {
                    write!(f, ", {}% of line rate", fmt_number(pct, 1))?;
                }
                f.write_str(")")?;
            }
            _ => f.write_str("no bandwidth measured")?,
        }
        if let (Some(lo), Some(hi)) = (self.lat_p99_min_us, self.lat_p99_max_us) {
            write!(
                f,
                ", p99 latency {} to {} us",
                fmt_number(lo, 2),
                fmt_number(hi, 2)
            )?;
        }
        match self.threshold_gbps {
            Some(t) => write!(
                f,
                ", {} below {} Gb/s",
                self.below_rails.len(),
                fmt_threshold(t)
            )?,
            None => write!(f, ", {} below threshold", self.below_rails.len())?,
        }
        write!(f, ", {} failed", self.failed_rails.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labelled(run_ids: &[(&str, NetworkMode)]) -> Report {
        let rows = run_ids
            .iter()
            .map(|(run, mode)| RailResult {
                run_id: (*run).to_string(),
                network_mode: mode.clone(),
                ..crate::rdmabw::RdmabwRun::ended_at(std::time::UNIX_EPOCH).failed_row(None, "x")
            })
            .collect();
        Report::new("t", rows)
    }

    fn labels(report: &Report) -> Vec<String> {
        let cmp = report.comparison().expect("merges");
        cmp.series.iter().map(|s| s.label.clone()).collect()
    }

    #[test]
    fn columns_are_named_by_mode_numbered_when_a_mode_has_several_runs_or_as_labelled() {
        let report = labelled(&[
            ("r2", NetworkMode::Sriov),
            ("r1", NetworkMode::Sriov),
            ("r3", NetworkMode::HostNetwork),
        ]);
        assert_eq!(labels(&report), ["hostnetwork", "sriov #1", "sriov #2"]);
        let named = report
            .clone()
            .with_labels(vec![
                ("sriov".into(), "VFs".into()),
                ("r2".into(), "VFs after".into()),
            ])
            .expect("known keys");
        // A run id's label wins over its mode's.
        assert_eq!(labels(&named), ["hostnetwork", "VFs", "VFs after"]);
        let e = report
            .with_labels(vec![("ipvlan".into(), "x".into())])
            .expect_err("no such run or mode");
        assert_eq!(
            e.to_string(),
            "--label ipvlan=...: no run id or network mode `ipvlan` in the rows (they have: hostnetwork, r1, r2, r3, sriov)"
        );
    }

    fn summary() -> ModeSummary {
        ModeSummary {
            label: "sriov".into(),
            rails: 2,
            measured: 2,
            bw_min_gbps: Some(385.004),
            bw_max_gbps: Some(391.5),
            bw_mean_gbps: Some(388.252),
            line_rate_pct_mean: Some(97.0631),
            lat_p99_min_us: None,
            lat_p99_max_us: None,
            threshold_gbps: Some(380.0),
            below_rails: vec![],
            failed_rails: vec![],
        }
    }

    #[test]
    fn summary_line_reads_like_a_post() {
        assert_eq!(
            summary().to_string(),
            "sriov: 2 rails, 385.00 to 391.50 Gb/s (mean 388.25 Gb/s, 97.1% of line rate), 0 below 380.0 Gb/s, 0 failed"
        );
    }

    #[test]
    fn summary_line_without_line_rate_threshold_or_bandwidth() {
        let mut s = summary();
        s.line_rate_pct_mean = None;
        s.threshold_gbps = Some(92.25);
        s.below_rails = vec![1];
        assert_eq!(
            s.to_string(),
            "sriov: 2 rails, 385.00 to 391.50 Gb/s (mean 388.25 Gb/s), 1 below 92.25 Gb/s, 0 failed"
        );
        let mut lat = summary();
        (lat.lat_p99_min_us, lat.lat_p99_max_us) = (Some(3.104), Some(12.5));
        assert!(
            lat.to_string().contains(
                "(mean 388.25 Gb/s, 97.1% of line rate), p99 latency 3.10 to 12.50 us, 0 below"
            ),
            "{lat}"
        );
        let s = ModeSummary {
            rails: 1,
            measured: 0,
            bw_min_gbps: None,
            bw_max_gbps: None,
            bw_mean_gbps: None,
            line_rate_pct_mean: None,
            threshold_gbps: None,
            failed_rails: vec![0],
            ..summary()
        };
        assert_eq!(
            s.to_string(),
            "sriov: 1 rail, no bandwidth measured, 0 below threshold, 1 failed"
        );
    }
}
