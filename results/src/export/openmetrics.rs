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
//! - `railbench_rail_verdict{layer}`: 1, on a rail whose verdict names a layer (`pod-spec`,
//!   `node-setup`, `nic-port`, `path`, `peer`, `tool`, `unknown`: [`crate::verdict`]); absent on
//!   a clean rail;
//! - `railbench_rail_latency_p50_us`, `_p99_us`, `_max_us`: the one-way latency where it was
//!   measured (railsweep `--test bw,lat`; the families are left out when no row has one);
//! - `railbench_rail_findings`: how many findings the counters and the diagnosis made;
//! - `railbench_rail_checked_timestamp_seconds`: when it was measured (Unix seconds; samples
//!   carry no timestamps, which the textfile collector refuses).
//!
//! And per group of nodes a fleet named as the culprit on a rail (`--pattern topology`, the
//! report's [`GroupCulprit`]s; the families are left out when it named none), labels
//! `topology_label` (the node label), `group` (its value) and `rail`:
//! - `railbench_group_suspect`: 1 (its cross-group pairs slow, its inside pairs fine);
//! - `railbench_group_every_group`: 1 when every group with cross-group pairs was named with it
//!   (the spine, or every uplink), else 0;
//! - `railbench_group_cross_pairs`, `railbench_group_cross_median_gbps`: its cross-group pairs
//!   on the rail and their median bandwidth;
//! - `railbench_group_inside_pairs`, `railbench_group_inside_median_gbps`: its inside pairs.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Exporter;
use crate::error::{Result, ResultsError};
use crate::group::GroupCulprit;
use crate::record::{unix_seconds, RailResult, RailStatus};
use crate::stats::median;
use crate::summary::Report;

/// The labels of one sample.
type Labels = Vec<(&'static str, String)>;
/// A gauge of floating-point values, by labels.
type Gauges = Family<Labels, Gauge<f64, AtomicU64>>;

/// The report's rows as OpenMetrics text.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenMetricsExporter;

fn labels(r: &RailResult) -> Labels {
    vec![
        ("client_node", r.client_node.clone()),
        ("server_node", r.server_node.clone()),
        ("rail", r.rail.to_string()),
        ("interface", r.client_interface.clone()),
        ("mode", r.network_mode.as_str().to_string()),
        ("cluster", r.cluster.clone()),
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

        let rows: Vec<&RailResult> = latest.into_values().collect();
        let mut text = Text::default();
        text.family(
            "rail_bandwidth_gbps",
            "Average bandwidth of the rail over the measured window, Gb/s",
            |f| {
                for r in &rows {
                    if let Some(bw) = r.bw_avg_gbps {
                        f.get_or_create(&labels(r)).set(bw);
                    }
                }
            },
        )?;
        text.family(
            "rail_median_percent",
            "Bandwidth in percent of the median of the report's rows of the same mode on the same rail",
            |f| {
                for r in &rows {
                    let m = medians
                        .get(&(r.network_mode.as_str(), r.rail))
                        .filter(|m| **m > 0.0);
                    if let (Some(bw), Some(m)) = (r.bw_avg_gbps, m) {
                        f.get_or_create(&labels(r)).set(100.0 * bw / m);
                    }
                }
            },
        )?;
        text.family(
            "rail_line_rate_percent",
            "Bandwidth in percent of the rail's line rate",
            |f| {
                for r in &rows {
                    if let Some(p) = r.line_rate_pct {
                        f.get_or_create(&labels(r)).set(p);
                    }
                }
            },
        )?;
        text.family(
            "rail_ok",
            "1 when the rail is ok, 0 when it fell below its threshold or failed",
            |f| {
                for r in &rows {
                    f.get_or_create(&labels(r))
                        .set(if r.status == RailStatus::Ok { 1.0 } else { 0.0 });
                }
            },
        )?;
        text.family(
            "rail_status",
            "The rail's status (ok, below_threshold, failed): 1 for the one that holds",
            |f| {
                for r in &rows {
                    for s in [
                        RailStatus::Ok,
                        RailStatus::BelowThreshold,
                        RailStatus::Failed,
                    ] {
                        let mut ls = labels(r);
                        ls.push(("status", s.as_str().to_string()));
                        f.get_or_create(&ls)
                            .set(if r.status == s { 1.0 } else { 0.0 });
                    }
                }
            },
        )?;
        text.family(
            "rail_verdict",
            "The layer the rail's verdict names (pod-spec, node-setup, nic-port, path, peer, \
             tool, unknown): 1, on rails that have one",
            |f| {
                for r in &rows {
                    if let Some(layer) = r.layer {
                        let mut ls = labels(r);
                        ls.push(("layer", layer.as_str().to_string()));
                        f.get_or_create(&ls).set(1.0);
                    }
                }
            },
        )?;
        for (name, help, value) in [
            (
                "rail_latency_p50_us",
                "Median one-way RDMA WRITE latency, microseconds (railsweep --test bw,lat)",
                (|r: &RailResult| r.lat_p50_us) as fn(&RailResult) -> Option<f64>,
            ),
            (
                "rail_latency_p99_us",
                "99th percentile of the one-way latency, microseconds",
                |r: &RailResult| r.lat_p99_us,
            ),
            (
                "rail_latency_max_us",
                "Largest one-way latency measured, microseconds",
                |r: &RailResult| r.lat_max_us,
            ),
        ] {
            if rows.iter().any(|r| value(r).is_some()) {
                text.family(name, help, |f| {
                    for r in &rows {
                        if let Some(v) = value(r) {
                            f.get_or_create(&labels(r)).set(v);
                        }
                    }
                })?;
            }
        }
        text.family(
            "rail_findings",
            "Findings of the rail's counters and diagnosis",
            |f| {
                for r in &rows {
                    f.get_or_create(&labels(r)).set(r.diagnosis.len() as f64);
                }
            },
        )?;
        text.family(
            "rail_checked_timestamp_seconds",
            "When the rail was measured, Unix seconds",
            |f| {
                for r in &rows {
                    if let Some(t) = unix_seconds(&r.time_utc) {
                        f.get_or_create(&labels(r)).set(t as f64);
                    }
                }
            },
        )?;
        group_gauges(&mut text, &report.group_culprits)?;
        text.finish()
    }
}

/// OpenMetrics text made one metric family at a time: each family's samples are made, encoded
/// by `prometheus-client`, sorted and appended, and dropped before the next family is made, so
/// that a fleet of thousands of node pairs holds one family's samples at a time, not all of
/// them (they were most of `railsweep fleet`'s memory at 1,024 nodes).
#[derive(Default)]
struct Text {
    out: String,
}

impl Text {
    /// The gauge family `railbench_NAME`, its samples made by `fill` (its `# HELP` and `# TYPE`
    /// lines even when it made none).
    fn family(&mut self, name: &str, help: &str, fill: impl FnOnce(&Gauges)) -> Result<()> {
        let gauges = Gauges::default();
        fill(&gauges);
        let mut registry = Registry::with_prefix("railbench");
        registry.register(name, help, gauges);
        let mut part = String::new();
        encode_registry(&mut part, &registry).map_err(encode_error)?;
        drop(registry);
        push_sorted(&mut self.out, &part);
        Ok(())
    }

    /// The text with its `# EOF` line.
    fn finish(mut self) -> Result<Vec<u8>> {
        encode_eof(&mut self.out).map_err(encode_error)?;
        Ok(self.out.into_bytes())
    }
}

fn encode_error(e: std::fmt::Error) -> ResultsError {
    ResultsError::Export {
        format: "openmetrics",
        message: e.to_string(),
    }
}

/// A `railbench_group_*` family: its name, help and each group's value.
type GroupFamily = (&'static str, &'static str, fn(&GroupCulprit) -> f64);

/// The `railbench_group_*` families of the named groups (none when there are none).
fn group_gauges(text: &mut Text, groups: &[GroupCulprit]) -> Result<()> {
    if groups.is_empty() {
        return Ok(());
    }
    let labels = |g: &GroupCulprit| -> Labels {
        vec![
            ("topology_label", g.label.clone()),
            ("group", g.value.clone()),
            ("rail", g.rail.to_string()),
        ]
    };
    let families: [GroupFamily; 6] = [
        (
            "group_suspect",
            "1: the group's cross-group pairs on the rail are all slow and its inside pairs fine (suspect its uplink)",
            |_| 1.0,
        ),
        (
            "group_every_group",
            "1 when every group with cross-group pairs was named with it (suspect the spine, or every uplink)",
            |g| if g.every_group { 1.0 } else { 0.0 },
        ),
        (
            "group_cross_pairs",
            "The group's cross-group pairs measured on the rail",
            |g| g.cross_pairs as f64,
        ),
        (
            "group_cross_median_gbps",
            "Median bandwidth of the group's cross-group pairs on the rail, Gb/s (a failed pair counts 0)",
            |g| g.cross_median_gbps,
        ),
        (
            "group_inside_pairs",
            "The group's inside pairs measured on the rail",
            |g| g.inside_pairs as f64,
        ),
        (
            "group_inside_median_gbps",
            "Median bandwidth of the group's inside pairs on the rail, Gb/s",
            |g| g.inside_median_gbps,
        ),
    ];
    for (name, help, value) in families {
        text.family(name, help, |f| {
            for g in groups {
                f.get_or_create(&labels(g)).set(value(g));
            }
        })?;
    }
    Ok(())
}

/// Append `text` to `out` with the sample lines of each metric family sorted (the encoder
/// writes them in its hash map's order); comment lines (`# HELP`, `# TYPE`) stay where they are.
fn push_sorted(out: &mut String, text: &str) {
    out.reserve(text.len());
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
            flush(&mut run, out);
            out.push_str(line);
            out.push('\n');
        } else {
            run.push(line);
        }
    }
    flush(&mut run, out);
}
