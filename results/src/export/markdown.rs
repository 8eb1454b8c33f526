//! Markdown: the comparison as people paste it into issues and posts.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::Exporter;
use crate::error::{Result, ResultsError};
use crate::record::{RailResult, RailStatus};
use crate::summary::{fmt_threshold, Comparison, Report};

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

/// Text from a results file made safe anywhere in the document (a table cell, a heading, a
/// list item): no pipes breaking columns, no newlines starting a block of their own, no HTML
/// (`<`, `>`, `&` as entities), no links or images (`[`, `]`), no code spans (`` ` ``).
fn cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '|' => out.push_str("\\|"),
            '[' => out.push_str("\\["),
            ']' => out.push_str("\\]"),
            '`' => out.push_str("\\`"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Text from a results file inside a code span: backticks (which would end it) as `'`, no
/// newlines. Nothing else is read as markup there.
fn code(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '`' => '\'',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

/// The distinct values of one setting over a series, joined.
fn distinct<'r>(
    rows: impl Iterator<Item = &'r RailResult>,
    f: impl Fn(&RailResult) -> Option<String>,
) -> String {
    let values: BTreeSet<String> = rows.map(|r| f(r).unwrap_or_else(|| "-".into())).collect();
    values.into_iter().collect::<Vec<_>>().join(", ")
}

fn signed(d: f64) -> String {
    let rounded = (d * 100.0).round() / 100.0;
    if rounded == 0.0 {
        "0.00".to_string()
    } else {
        format!("{rounded:+.2}")
    }
}

fn render(cmp: &Comparison<'_>, out: &mut String) -> std::fmt::Result {
    let report = cmp.report();
    writeln!(out, "# RDMA bandwidth per rail")?;
    writeln!(out)?;
    if cmp.series.is_empty() {
        writeln!(out, "No rails.")?;
        return Ok(());
    }

    writeln!(out, "## Runs")?;
    writeln!(out)?;
    writeln!(
        out,
        "| mode | run | cluster | time (UTC) | message size (bytes) | QPs | MTU (bytes) | memory | line rate (Gb/s) |"
    )?;
    writeln!(out, "|---|---|---|---|---:|---:|---:|---|---:|")?;
    for (i, series) in cmp.series.iter().enumerate() {
        let rows = || cmp.series_rows(i);
        let first = rows().map(|r| r.time_utc.as_str()).min().unwrap_or("-");
        let last = rows().map(|r| r.time_utc.as_str()).max().unwrap_or("-");
        let time = if first == last {
            first.to_string()
        } else {
            format!("{first} to {last}")
        };
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&series.label),
            cell(&series.run_id),
            cell(&distinct(rows(), |r| Some(r.cluster.clone()))),
            cell(&time),
            distinct(rows(), |r| Some(r.msg_size_bytes.to_string())),
            distinct(rows(), |r| Some(r.qps.to_string())),
            distinct(rows(), |r| r.mtu_bytes.map(|m| m.to_string())),
            distinct(rows(), |r| Some(r.memory.to_string())),
            distinct(rows(), |r| r.line_rate_gbps.map(|l| format!("{l}"))),
        )?;
    }
    writeln!(out)?;

    writeln!(out, "## Average bandwidth (Gb/s)")?;
    writeln!(out)?;
    let threshold_note = match report.threshold_gbps {
        Some(t) => format!("under {} Gb/s", fmt_threshold(t)),
        None => "under the threshold it was measured against".to_string(),
    };
    writeln!(
        out,
        "`(below)` marks a rail {threshold_note}; `failed` a rail that produced no bandwidth; `-` a rail the run did not measure."
    )?;
    writeln!(out)?;
    write!(out, "| rail |")?;
    for series in &cmp.series {
        write!(out, " {} |", cell(&series.label))?;
    }
    writeln!(out)?;
    write!(out, "|---:|")?;
    for _ in &cmp.series {
        write!(out, "---:|")?;
    }
    writeln!(out)?;
    for (r, rail) in cmp.rails.iter().enumerate() {
        write!(out, "| {rail} |")?;
        for s in 0..cmp.series.len() {
            let text = match cmp.cell(r, s) {
                None => "-".to_string(),
                Some(row) if row.status == RailStatus::Failed => "failed".to_string(),
                Some(row) => {
                    let bw = row
                        .bw_avg_gbps
                        .map_or_else(|| "-".to_string(), |b| format!("{b:.2}"));
                    if report.is_below(row) {
                        format!("{bw} (below)")
                    } else {
                        bw
                    }
                }
            };
            write!(out, " {text} |")?;
        }
        writeln!(out)?;
    }
    writeln!(out)?;

    writeln!(out, "## Summary")?;
    writeln!(out)?;
    for mut summary in cmp.summaries() {
        summary.label = cell(&summary.label);
        writeln!(out, "- {summary}")?;
    }
    writeln!(out)?;

    if cmp.series.len() > 1 {
        let base = cell(&cmp.series[0].label);
        writeln!(out, "## Difference from {base} (Gb/s)")?;
        writeln!(out)?;
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

    let failed = labelled_rows(cmp, |r| r.status == RailStatus::Failed);
    if !failed.is_empty() {
        writeln!(out, "## Failed rails")?;
        writeln!(out)?;
        for (label, row) in failed {
            writeln!(
                out,
                "- {} {}: {}",
                cell(label),
                rail_ends(row),
                cell(row.error.as_deref().unwrap_or("no error text"))
            )?;
        }
        writeln!(out)?;
    }
    render_findings(cmp, out)?;
    writeln!(out, "Generated by {}.", cell(&report.generated_by))?;
    Ok(())
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
    writeln!(out, "## GPU of each rail")?;
    writeln!(out)?;
    writeln!(
        out,
        "The GPU allocated with each rail's NIC, and its PCIe root (`--mode dra --gpu-align`)."
    )?;
    writeln!(out)?;
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
    writeln!(out, "## Findings")?;
    writeln!(out)?;
    writeln!(
        out,
        "What the port, hardware and netdev counters read around each window say; `client` and `server` name the side that read a counter."
    )?;
    writeln!(out)?;
    for (label, row) in found {
        writeln!(out, "### {} {}", cell(label), rail_ends(row))?;
        writeln!(out)?;
        for f in &row.diagnosis {
            writeln!(out, "- **{}**: {}", f.finding.word(), cell(&f.summary))?;
            for e in &f.evidence {
                writeln!(
                    out,
                    "  - {} `{}` ({}): +{} ({:.1}/s)",
                    e.role.as_str(),
                    code(&e.counter),
                    e.source.as_str(),
                    e.delta,
                    e.per_s
                )?;
            }
            writeln!(out, "  - what to do: {}", cell(&f.what_to_do))?;
        }
        writeln!(out)?;
    }
    Ok(())
}
