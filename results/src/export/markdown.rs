//! Markdown: the comparison as people paste it into issues and posts.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::Exporter;
use crate::error::{Result, ResultsError};
use crate::record::{RailResult, RailStatus};
use crate::summary::{fmt_number, fmt_threshold, Comparison, Report};

/// Rails as rows and modes as columns (average Gb/s), a table of run
/// settings, one summary line per mode, the difference of every mode from
/// the first, the GPU allocated with each rail (when rows have one), the error text of each
/// failed rail, and each rail's counter findings with the counters that show them and what to
/// do.
#[derive(Debug, Clone, Copy, Default)]
pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn serialize(&self, report: &Report) -> Result<Vec<u8>> {
        let cmp = report.comparison()?;
        let mut out = String::new();
        render(&cmp, &mut out).map_err(|e| ResultsError::export("markdown", e))?;
        Ok(out.into_bytes())
    }
}

/// Text from a results file made safe anywhere in the document ([`super::escape::markdown`]).
fn cell(text: &str) -> String {
    super::escape::markdown(text)
}

/// Text from a results file inside a code span ([`super::escape::markdown_code`]).
fn code(text: &str) -> String {
    super::escape::markdown_code(text)
}

/// The distinct values of one setting over a series, joined.
fn distinct<'r>(
    rows: impl Iterator<Item = &'r RailResult>,
    f: impl Fn(&RailResult) -> Option<String>,
) -> String {
    let values: BTreeSet<String> = rows.map(|r| f(r).unwrap_or_else(|| "-".into())).collect();
    values.into_iter().collect::<Vec<_>>().join(", ")
}

/// `node-a → node-b`: a row's two nodes (an arrow that needs no escaping in markdown).
fn nodes(r: &RailResult) -> String {
    format!("{} → {}", r.client_node, r.server_node)
}

/// A row's measured window to a tenth of a second (`10.0 s`: the measured length of a `-D 10`
/// window differs from rail to rail in its last digits), or `5000 iterations`; none when
/// neither is known (a failed rail).
fn window(r: &RailResult) -> Option<String> {
    match (r.duration_s, r.iterations) {
        (Some(d), _) => Some(format!("{d:.1} s")),
        (None, Some(n)) => Some(format!("{n} iterations")),
        (None, None) => None,
    }
}

/// The windows of the measured rails (a failed rail has none, which says nothing of the
/// others'), `-` when no rail was measured.
fn measured_window<'r>(rows: impl Iterator<Item = &'r RailResult>) -> String {
    let text = distinct(rows.filter(|r| r.status != RailStatus::Failed), window);
    if text.is_empty() {
        "-".to_string()
    } else {
        text
    }
}

/// Distinct values in the order met, all of them when three or fewer, else the first, the
/// last and how many (`rdma0, …, rdma15 (16)`).
fn few(values: impl Iterator<Item = String>) -> String {
    let seen = super::distinct_in_order(values);
    match seen.as_slice() {
        [] => "-".to_string(),
        [first, .., last] if seen.len() > 3 => format!("{first}, …, {last} ({})", seen.len()),
        all => all.join(", "),
    }
}

/// The settings in which the series differ from one another (each series' set of values of a
/// setting compared), in the Runs table's words: what makes two columns not comparable.
/// Interfaces are left out: each mode names its own (`rdma0` on the host, `net1` in a pod).
fn settings_that_differ(cmp: &Comparison<'_>) -> Vec<&'static str> {
    type Setting = (&'static str, fn(&RailResult) -> Option<String>);
    let settings: [Setting; 5] = [
        ("nodes", |r| Some(nodes(r))),
        ("traffic class", |r| r.traffic_class.map(|t| t.to_string())),
        ("window", window),
        ("message size", |r| Some(r.msg_size_bytes.to_string())),
        ("QPs", |r| Some(r.qps.to_string())),
    ];
    settings
        .into_iter()
        .filter(|(name, f)| {
            // A failed rail has no window: it says nothing of the others', and a run whose
            // rails all failed has no window to compare.
            let counts = |r: &&RailResult| *name != "window" || r.status != RailStatus::Failed;
            let per_series: BTreeSet<String> = (0..cmp.series.len())
                .filter(|&s| cmp.series_rows(s).any(|r| counts(&r)))
                .map(|s| distinct(cmp.series_rows(s).filter(counts), f))
                .collect();
            per_series.len() > 1
        })
        .map(|(name, _)| name)
        .collect()
}

fn signed(d: f64) -> String {
    let rounded = (d * 100.0).round() / 100.0;
    if rounded == 0.0 {
        "0.00".to_string()
    } else {
        format!("{rounded:+.2}")
    }
}

/// The head of a rails x series table: `| rail | SERIES | ... |` and its alignment row.
fn series_header(cmp: &Comparison<'_>, out: &mut String) -> std::fmt::Result {
    write!(out, "| rail |")?;
    for series in &cmp.series {
        write!(out, " {} |", cell(&series.label))?;
    }
    writeln!(out)?;
    write!(out, "|---:|")?;
    for _ in &cmp.series {
        write!(out, "---:|")?;
    }
    writeln!(out)
}

fn render(cmp: &Comparison<'_>, out: &mut String) -> std::fmt::Result {
    let report = cmp.report();
    block(out, "# RDMA bandwidth per rail")?;
    if cmp.series.is_empty() {
        writeln!(out, "No rails.")?;
        return Ok(());
    }

    block(out, "## Runs")?;
    writeln!(
        out,
        "| mode | run | cluster | time (UTC) | nodes (client → server) | interfaces (client) | traffic class | window | message size (bytes) | QPs | MTU (bytes) | memory | line rate (Gb/s) |"
    )?;
    writeln!(
        out,
        "|---|---|---|---|---|---|---:|---:|---:|---:|---:|---|---:|"
    )?;
    for (i, series) in cmp.series.iter().enumerate() {
        let rows = || cmp.series_rows(i);
        let first = rows().map(|r| r.time_utc.as_str()).min().unwrap_or("-");
        let last = rows().map(|r| r.time_utc.as_str()).max().unwrap_or("-");
        let time = if first == last {
            first.to_string()
        } else {
            format!("{first} to {last}")
        };
        let mode = series.mode.to_string();
        let column = if series.label == mode {
            mode
        } else {
            format!("{} ({mode})", series.label)
        };
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&column),
            cell(&series.run_id),
            cell(&distinct(rows(), |r| Some(r.cluster.clone()))),
            cell(&time),
            cell(&distinct(rows(), |r| Some(nodes(r)))),
            cell(&few(rows().map(|r| r.client_interface.clone()))),
            distinct(rows(), |r| r.traffic_class.map(|t| t.to_string())),
            measured_window(rows()),
            distinct(rows(), |r| Some(r.msg_size_bytes.to_string())),
            distinct(rows(), |r| Some(r.qps.to_string())),
            distinct(rows(), |r| r.mtu_bytes.map(|m| m.to_string())),
            distinct(rows(), |r| Some(r.memory.to_string())),
            distinct(rows(), |r| r.line_rate_gbps.map(|l| format!("{l}"))),
        )?;
    }
    writeln!(out)?;
    if cmp.series.len() > 1 {
        writeln!(
            out,
            "The tables below name each run by its mode (with its message size, or `#N`, where a mode has several runs; or the \
             name `railsweep report --label RUN_OR_MODE=NAME` gave it); this table gives its run id."
        )?;
        writeln!(out)?;
    }
    let differ = settings_that_differ(cmp);
    if !differ.is_empty() {
        writeln!(
            out,
            "**Warning:** the runs differ in {}: their bandwidths are not measured alike.",
            differ.join(", ")
        )?;
        writeln!(out)?;
    }

    block(out, "## Average bandwidth (Gb/s)")?;
    let threshold_note = match report.threshold_gbps {
        Some(t) => format!("under {} Gb/s", fmt_threshold(t)),
        None => "under the threshold it was measured against".to_string(),
    };
    block(
        out,
        &format!("`(below)` marks a rail {threshold_note}; `failed` a rail that produced no bandwidth; `-` a rail the run did not measure."),
    )?;
    series_table(cmp, out, |cell| match cell {
        None => "-".to_string(),
        Some(row) if row.status == RailStatus::Failed => "failed".to_string(),
        Some(row) => {
            let bw = row
                .bw_avg_gbps
                .map_or_else(|| "-".to_string(), |b| fmt_number(b, 2));
            if report.is_below(row) {
                format!("{bw} (below)")
            } else {
                bw
            }
        }
    })?;

    render_latency(cmp, out)?;

    block(out, "## Summary")?;
    for mut summary in cmp.summaries() {
        summary.label = cell(&summary.label);
        writeln!(out, "- {summary}")?;
    }
    writeln!(out)?;

    if cmp.series.len() > 1 {
        let base = cell(&cmp.series[0].label);
        block(out, &format!("## Difference from {base} (Gb/s)"))?;
        write!(out, "| rail |")?;
        for series in &cmp.series[1..] {
            write!(out, " {} |", cell(&series.label))?;
        }
        writeln!(out)?;
        write!(out, "|---:|")?;
        for _ in &cmp.series[1..] {
            write!(out, "---:|")?;
        }
        writeln!(out)?;
        let diffs: Vec<_> = (1..cmp.series.len()).map(|s| cmp.diff(0, s)).collect();
        for (r, rail) in cmp.rails.iter().enumerate() {
            write!(out, "| {rail} |")?;
            for d in &diffs {
                let text = d
                    .get(r)
                    .and_then(|d| d.diff_gbps)
                    .map_or_else(|| "-".to_string(), signed);
                write!(out, " {text} |")?;
            }
            writeln!(out)?;
        }
        writeln!(out)?;
    }

    render_gpus(cmp, out)?;

    render_verdicts(cmp, out)?;
    render_findings(cmp, out)?;
    writeln!(out, "Generated by {}.", cell(&report.generated_by))?;
    Ok(())
}

/// Every rail with a verdict (failed, below its threshold, or a finding on a passing rail):
/// its status, the layer at fault, the evidence and the fix ([`crate::verdict`]); a row of an
/// older file, without a layer, says its error. A rail the report judges otherwise than its
/// recorded status (`--threshold-gbps`, `--max-p99-us`) is judged again with that status: a
/// measured rail's verdict rests on its findings alone, which the row keeps.
fn render_verdicts(cmp: &Comparison<'_>, out: &mut String) -> std::fmt::Result {
    let report = cmp.report();
    let status = |r: &RailResult| match r.status {
        RailStatus::Failed => RailStatus::Failed,
        _ if report.is_below(r) => RailStatus::BelowThreshold,
        _ => RailStatus::Ok,
    };
    let judged = labelled_rows(cmp, |r| status(r) != RailStatus::Ok || r.layer.is_some());
    if judged.is_empty() {
        return Ok(());
    }
    block(out, "## Verdicts")?;
    for (label, recorded) in judged {
        let again;
        let row = if status(recorded) == recorded.status {
            recorded
        } else {
            let mut r = recorded.clone();
            r.status = status(recorded);
            r.judge(None, None);
            again = r;
            &again
        };
        let reason = |r: &RailResult| {
            r.error
                .clone()
                .unwrap_or_else(|| "below the threshold".into())
        };
        match row.verdict() {
            Some(v) => writeln!(
                out,
                "- {} {}: **{}**, layer `{}`: {}. Fix: {}",
                cell(label),
                rail_ends(row),
                row.status,
                v.layer,
                cell(&v.evidence),
                cell(&v.fix)
            )?,
            None => writeln!(
                out,
                "- {} {}: **{}**: {}",
                cell(label),
                rail_ends(row),
                row.status,
                cell(&reason(row))
            )?,
        }
    }
    writeln!(out)
}

/// The latency table (railsweep `--test bw,lat`), one column per series beside the bandwidth
/// table's: `p50 / p99` per rail; nothing when no row has a latency.
fn render_latency(cmp: &Comparison<'_>, out: &mut String) -> std::fmt::Result {
    let report = cmp.report();
    if !report.rows.iter().any(|r| r.lat_p99_us.is_some()) {
        return Ok(());
    }
    block(out, "## Latency (µs, p50 / p99 / max)")?;
    block(
        out,
        "One-way RDMA WRITE latency, 2 B (`rdmabw lat`, half a round trip); `-` a rail whose latency was not measured.",
    )?;
    series_table(cmp, out, |cell| {
        cell.and_then(|row| Some((row.lat_p50_us?, row.lat_p99_us?, row.lat_max_us?)))
            .map_or_else(
                || "-".to_string(),
                |(a, b, c)| {
                    format!(
                        "{} / {} / {}",
                        fmt_number(a, 2),
                        fmt_number(b, 2),
                        fmt_number(c, 2)
                    )
                },
            )
    })
}

/// A table of one row per rail and one column per series ([`series_header`]), each cell the
/// text `text` gives of that rail's row in that series (`None`: not measured), then a blank
/// line.
fn series_table(
    cmp: &Comparison<'_>,
    out: &mut String,
    text: impl Fn(Option<&RailResult>) -> String,
) -> std::fmt::Result {
    series_header(cmp, out)?;
    for (r, rail) in cmp.rails.iter().enumerate() {
        write!(out, "| {rail} |")?;
        for s in 0..cmp.series.len() {
            write!(out, " {} |", text(cmp.cell(r, s)))?;
        }
        writeln!(out)?;
    }
    writeln!(out)
}

/// A heading, or a paragraph, and the blank line after it.
fn block(out: &mut String, text: &str) -> std::fmt::Result {
    writeln!(out, "{text}")?;
    writeln!(out)
}

/// The rows of every series that `keep` picks, each with its series' label, in series order.
fn labelled_rows<'c>(
    cmp: &'c Comparison<'_>,
    keep: impl Fn(&RailResult) -> bool + Copy + 'c,
) -> Vec<(&'c str, &'c RailResult)> {
    cmp.series
        .iter()
        .enumerate()
        .flat_map(|(s, series)| {
            cmp.series_rows(s)
                .filter(move |r| keep(r))
                .map(move |r| (series.label.as_str(), r))
        })
        .collect()
}

/// `rail 3 (node-a mlx5_3 -> node-b mlx5_3)`: a rail and its two ends.
fn rail_ends(row: &RailResult) -> String {
    format!(
        "rail {} ({} {} -> {} {})",
        row.rail,
        cell(&row.client_node),
        cell(&row.client_rdma_device),
        cell(&row.server_node),
        cell(&row.server_rdma_device)
    )
}

/// `gpu-3 (pci0000:4c)`: a GPU and its PCIe root; `-` for none.
fn gpu_cell(gpu: Option<&str>, root: Option<&str>) -> String {
    match (gpu, root) {
        (None, _) => "-".to_string(),
        (Some(g), None) => cell(g),
        (Some(g), Some(r)) => cell(&format!("{g} ({r})")),
    }
}

/// `## GPU of each rail`: per mode and rail, each side's interface and the GPU allocated with
/// it (railsweep `--mode dra --gpu-align`). Nothing when no row has a GPU.
fn render_gpus(cmp: &Comparison<'_>, out: &mut String) -> std::fmt::Result {
    let rows = labelled_rows(cmp, |r| r.client_gpu.is_some() || r.server_gpu.is_some());
    if rows.is_empty() {
        return Ok(());
    }
    block(out, "## GPU of each rail")?;
    block(
        out,
        "The GPU allocated with each rail's NIC, and its PCIe root (`--mode dra --gpu-align`).",
    )?;
    writeln!(
        out,
        "| mode | rail | client | client GPU | server | server GPU |"
    )?;
    writeln!(out, "|---|---:|---|---|---|---|")?;
    for (label, r) in rows {
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            cell(label),
            r.rail,
            cell(&format!("{} {}", r.client_node, r.client_interface)),
            gpu_cell(r.client_gpu.as_deref(), r.client_gpu_pcie_root.as_deref()),
            cell(&format!("{} {}", r.server_node, r.server_interface)),
            gpu_cell(r.server_gpu.as_deref(), r.server_gpu_pcie_root.as_deref()),
        )?;
    }
    writeln!(out)
}

/// `## Findings`: per mode and rail, each finding, its evidence (side, counter, delta and
/// rate) and what to do. Nothing when no row has a finding.
fn render_findings(cmp: &Comparison<'_>, out: &mut String) -> std::fmt::Result {
    let found = labelled_rows(cmp, |r| !r.diagnosis.is_empty());
    if found.is_empty() {
        return Ok(());
    }
    block(out, "## Findings")?;
    block(
        out,
        "What the port, hardware and netdev counters read around each window say; `client` and `server` name the side that read a counter.",
    )?;
    for (label, row) in found {
        writeln!(out, "### {} {}", cell(label), rail_ends(row))?;
        writeln!(out)?;
        for f in &row.diagnosis {
            writeln!(out, "- **{}**: {}", f.finding.word(), cell(&f.summary))?;
            for e in &f.evidence {
                writeln!(
                    out,
                    "  - {} `{}` ({}): +{} ({}/s)",
                    e.role.as_str(),
                    code(&e.counter),
                    e.source.as_str(),
                    e.delta,
                    fmt_number(e.per_s, 1)
                )?;
            }
            writeln!(out, "  - what to do: {}", cell(&f.what_to_do))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::NetworkMode;

    fn row(mode: NetworkMode, rail: u32, size: u64, tclass: Option<u8>) -> RailResult {
        let text = format!(
            "schema_version,run_id,time_utc,network_mode,cluster,client_pod,client_node,server_pod,server_node,rail,client_interface,client_rdma_device,client_gid_index,server_interface,server_rdma_device,server_gid_index,traffic_class,mtu_bytes,msg_size_bytes,qps,duration_s,iterations,memory,status,bw_avg_gbps,bw_peak_gbps,msg_rate_mpps,bw_p1_gbps,bw_p50_gbps,bw_p99_gbps,line_rate_gbps,line_rate_pct,threshold_gbps,error\n\
             1,run-{mode},2025-06-01T10:00:00Z,{mode},c,,node-a,,node-b,{rail},net{rail},mlx5_{rail},3,net{rail},mlx5_{rail},3,{},4096,{size},1,10.0002,,host,ok,90.5,,,,,,100.0,,,\n",
            tclass.map(|t| t.to_string()).unwrap_or_default()
        );
        crate::read_csv(text.as_bytes(), "t.csv")
            .expect("row")
            .remove(0)
    }

    fn markdown(rows: Vec<RailResult>) -> String {
        let report = Report::new("t", rows);
        String::from_utf8(MarkdownExporter.serialize(&report).expect("renders")).expect("utf-8")
    }

    #[test]
    fn the_runs_table_says_nodes_interfaces_traffic_class_and_window() {
        let rows = (0..5)
            .map(|rail| row(NetworkMode::Sriov, rail, 65536, Some(41)))
            .collect();
        let md = markdown(rows);
        assert!(
            md.contains("| sriov | run-sriov | c | 2025-06-01T10:00:00Z | node-a → node-b | net0, …, net4 (5) | 41 | 10.0 s | 65536 | 1 | 4096 | host | 100 |"),
            "{md}"
        );
        assert!(!md.contains("Warning"), "{md}");
    }

    #[test]
    fn merged_runs_that_differ_in_settings_are_warned_about() {
        let mut rows = vec![
            row(NetworkMode::Sriov, 0, 65536, Some(41)),
            row(NetworkMode::Ipvlan, 0, 1_048_576, None),
        ];
        let md = markdown(rows.clone());
        assert!(
            md.contains("**Warning:** the runs differ in traffic class, message size: "),
            "{md}"
        );
        // Interfaces differ from mode to mode by nature; that alone is no warning.
        rows[1] = row(NetworkMode::Ipvlan, 0, 65536, Some(41));
        rows[1].client_interface = "eth9".into();
        assert!(!markdown(rows.clone()).contains("Warning"));
        // A mode whose every rail failed (no window, no bandwidth) is measured alike all the
        // same; its other settings still count.
        rows[1].status = RailStatus::Failed;
        rows[1].duration_s = None;
        rows[1].bw_avg_gbps = None;
        assert!(
            !markdown(rows.clone()).contains("Warning"),
            "{}",
            markdown(rows.clone())
        );
        rows[1].traffic_class = Some(3);
        assert!(
            markdown(rows).contains("**Warning:** the runs differ in traffic class: "),
            "a failed run's traffic class still counts"
        );
    }
}
