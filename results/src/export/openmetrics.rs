//! OpenMetrics text, as node-exporter's textfile collector and a Pushgateway take it: one
//! sample per (mode, client node, server node, rail) of the report, the latest row of each,
//! encoded by `prometheus-client` (the samples of each metric sorted, so that the same report
//! gives the same text).
//!
//! The metrics (all gauges; labels `client_node`, `server_node`, `rail`, `interface`, `mode`,
//! `cluster`):
//! - `railbench_rail_bandwidth_gbps`: the average over the measured window (absent when the
//!   rail failed);
//! - `railbench_rail_median_percent`: that bandwidth in percent of the median of the report's
//!   rows of the same mode on the same rail (the fleet median, in a fleet's report);
//! - `railbench_rail_line_rate_percent`: in percent of the line rate, where it is known;
//! - `railbench_rail_ok`: 1 when the rail's status is ok, 0 when it fell below its threshold or
//!   failed; `railbench_rail_status{status}` says which, 1 for the one that holds;
//! - `railbench_rail_findings`: how many findings the counters and the diagnosis made;
//! - `railbench_rail_checked_timestamp_seconds`: when it was measured (Unix seconds; samples
//!   carry no timestamps, which the textfile collector refuses).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Exporter;
use crate::error::{Result, ResultsError};
use crate::record::{unix_seconds, RailResult, RailStatus};
use crate::stats::median;
use crate::summary::Report;

/// The labels of one sample.
type Labels = Vec<(String, String)>;
/// A gauge of floating-point values, by labels.
type Gauges = Family<Labels, Gauge<f64, AtomicU64>>;

/// The report's rows as OpenMetrics text.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenMetricsExporter;

fn labels(r: &RailResult) -> Labels {
    vec![
        ("client_node".into(), r.client_node.clone()),
        ("server_node".into(), r.server_node.clone()),
        ("rail".into(), r.rail.to_string()),
        ("interface".into(), r.client_interface.clone()),
        ("mode".into(), r.network_mode.as_str().to_string()),
        ("cluster".into(), r.cluster.clone()),
    ]
}

impl Exporter for OpenMetricsExporter {
    fn serialize(&self, report: &Report) -> Result<Vec<u8>> {
        // The latest row of each (mode, client, server, rail): a fleet appends its
        // re-measurements.
        let mut latest: BTreeMap<(&str, &str, &str, u32), &RailResult> = BTreeMap::new();
        for r in &report.rows {
            latest.insert(
                (
                    r.network_mode.as_str(),
                    &r.client_node,
                    &r.server_node,
                    r.rail,
                ),
                r,
            );
        }
        let mut by_rail: BTreeMap<(&str, u32), Vec<f64>> = BTreeMap::new();
        for r in latest.values() {
            if let Some(bw) = r.bw_avg_gbps {
                by_rail
                    .entry((r.network_mode.as_str(), r.rail))
                    .or_default()
                    .push(bw);
            }
        }
        let medians: BTreeMap<(&str, u32), f64> = by_rail
            .into_iter()
            .filter_map(|(rail, v)| Some((rail, median(&v)?)))
            .collect();

        let mut registry = Registry::with_prefix("railbench_rail");
        let mut family = |name: &str, help: &str| {
            let f = Gauges::default();
            registry.register(name, help, f.clone());
            f
        };
        let bandwidth = family(
            "bandwidth_gbps",
            "Average bandwidth of the rail over the measured window, Gb/s",
        );
        let median_pct = family(
            "median_percent",
            "Bandwidth in percent of the median of the report's rows of the same mode on the same rail",
        );
        let line_pct = family(
            "line_rate_percent",
            "Bandwidth in percent of the rail's line rate",
        );
        let ok = family(
            "ok",
            "1 when the rail is ok, 0 when it fell below its threshold or failed",
        );
        let status = family(
            "status",
            "The rail's status (ok, below_threshold, failed): 1 for the one that holds",
        );
        let findings = family("findings", "Findings of the rail's counters and diagnosis");
        let checked = family(
            "checked_timestamp_seconds",
            "When the rail was measured, Unix seconds",
        );
        for r in latest.values() {
            let l = labels(r);
            if let Some(bw) = r.bw_avg_gbps {
                bandwidth.get_or_create(&l).set(bw);
                if let Some(m) = medians
                    .get(&(r.network_mode.as_str(), r.rail))
                    .filter(|m| **m > 0.0)
                {
                    median_pct.get_or_create(&l).set(100.0 * bw / m);
                }
            }
            if let Some(p) = r.line_rate_pct {
                line_pct.get_or_create(&l).set(p);
            }
            ok.get_or_create(&l)
                .set(if r.status == RailStatus::Ok { 1.0 } else { 0.0 });
            for s in [
                RailStatus::Ok,
                RailStatus::BelowThreshold,
                RailStatus::Failed,
            ] {
                let mut ls = l.clone();
                ls.push(("status".into(), s.as_str().to_string()));
                status
                    .get_or_create(&ls)
                    .set(if r.status == s { 1.0 } else { 0.0 });
            }
            findings.get_or_create(&l).set(r.diagnosis.len() as f64);
            if let Some(t) = unix_seconds(&r.time_utc) {
                checked.get_or_create(&l).set(t as f64);
            }
        }
        let mut text = String::new();
        encode(&mut text, &registry).map_err(|e| ResultsError::Export {
            format: "openmetrics",
            message: e.to_string(),
        })?;
        Ok(sorted_samples(&text).into_bytes())
    }
}

/// `text` with the sample lines of each metric family sorted (the encoder writes them in its
/// hash map's order); comment lines (`# HELP`, `# TYPE`, `# EOF`) stay where they are.
fn sorted_samples(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run: Vec<&str> = Vec::new();
    let flush = |run: &mut Vec<&str>, out: &mut String| {
        run.sort_unstable();
        for l in run.drain(..) {
            out.push_str(l);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut run, &mut out);
            out.push_str(line);
            out.push('\n');
        } else {
            run.push(line);
        }
    }
    flush(&mut run, &mut out);
    out
}
