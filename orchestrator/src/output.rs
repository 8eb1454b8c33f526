//! The per-rail table and the summary lines printed at the end of a sweep, and the one place
//! where a report leaves railsweep in one of the results formats.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use std::io::IsTerminal;

use comfy_table::presets::{NOTHING, UTF8_FULL_CONDENSED};
use comfy_table::{CellAlignment, ContentArrangement, Table};
use results::{Format, RailResult, RailStatus, Report};

/// Where [`export`] writes.
pub enum Dest<'a> {
    /// A file, created or replaced at once (written beside it, then renamed over it, so that a
    /// reader, such as node-exporter's textfile collector, never sees half of it).
    File(&'a Path),
    /// A stream (standard output), flushed after.
    Stream(&'a mut dyn Write),
}

impl std::fmt::Debug for Dest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dest::File(p) => write!(f, "File({})", p.display()),
            Dest::Stream(_) => f.write_str("Stream"),
        }
    }
}

/// `report` in `format`, written to `to`; the bytes written, for a caller that shows them
/// again. Results CSV written to a file gets the counters file beside it
/// ([`results::counters_csv_path`]) when a row has counters, and the findings file
/// ([`results::findings_csv_path`]) when a row has a finding. Errors name the format or the
/// destination.
///
/// # Errors
///
/// The format cannot be produced, or the file or stream cannot be written.
pub fn export(report: &Report, format: Format, to: Dest<'_>) -> anyhow::Result<Vec<u8>> {
    let bytes = format
        .exporter()
        .serialize(report)
        .with_context(|| format!("cannot produce {format} output"))?;
    let counters_beside = match &to {
        Dest::File(path) => Some(path.to_path_buf()),
        Dest::Stream(_) => None,
    };
    write(&bytes, to)?;
    // Results CSV has no counters column and only the findings' words: the counters and the
    // findings go to their files beside it.
    if let Some(path) = counters_beside {
        if format == Format::Csv && results::countersio::any_counters(&report.rows) {
            let mut counters = Vec::new();
            results::write_counters_csv(&mut counters, &report.rows)
                .context("cannot produce the counters file")?;
            write_whole(&results::counters_csv_path(&path), &counters)?;
        }
        if format == Format::Csv && results::findingsio::any_findings(&report.rows) {
            let mut findings = Vec::new();
            results::write_findings_csv(&mut findings, &report.rows)
                .context("cannot produce the findings file")?;
            write_whole(&results::findings_csv_path(&path), &findings)?;
        }
    }
    Ok(bytes)
}

/// Output already made, to a file (created or replaced at once) or a stream.
pub fn write(bytes: &[u8], to: Dest<'_>) -> anyhow::Result<()> {
    match to {
        Dest::File(path) => write_whole(path, bytes),
        Dest::Stream(out) => out
            .write_all(bytes)
            .and_then(|()| out.flush())
            .context("cannot write to stdout"),
    }
}

/// `bytes` as the whole of `path`, created or replaced at once ([`results::replace_file`]:
/// written beside it under a name no link can take, then renamed over it).
fn write_whole(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    results::replace_file(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

fn gid(i: Option<u32>) -> String {
    i.map_or_else(|| "-".into(), |v| v.to_string())
}

/// One side of a rail: `iface dev`, and the GPU allocated with it when there is one.
fn side(iface: &str, dev: &str, gpu: Option<&str>) -> String {
    let ends = match (iface.is_empty(), dev.is_empty()) {
        (true, true) => "-".into(),
        (false, true) => iface.into(),
        (true, false) => dev.into(),
        (false, false) => format!("{iface} {dev}"),
    };
    match gpu {
        Some(g) => format!("{ends} {g}"),
        None => ends,
    }
}

/// The words of a row's findings (`loss,link-flap`), `-` when there are none.
fn diagnosis(r: &RailResult) -> String {
    let words: Vec<&str> = r.finding_kinds().into_iter().map(|k| k.word()).collect();
    if words.is_empty() {
        "-".into()
    } else {
        words.join(",")
    }
}

/// How a table is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableStyle {
    /// Box-drawing lines, for a person at a terminal.
    Boxed,
    /// Columns apart by spaces and nothing else, for a file, a pipe, `grep` and `awk`.
    Plain,
}

impl TableStyle {
    /// [`TableStyle::Boxed`] when stdout is a terminal, else [`TableStyle::Plain`].
    pub fn for_stdout() -> TableStyle {
        if std::io::stdout().is_terminal() {
            TableStyle::Boxed
        } else {
            TableStyle::Plain
        }
    }
}

/// [`table_in`] in the style stdout asks for ([`TableStyle::for_stdout`]).
pub fn table(rows: &[RailResult], sum: bool) -> Table {
    table_in(rows, sum, TableStyle::for_stdout())
}

/// The per-rail table: rail, devices on each side (with the GPU allocated with each rail's NIC,
/// `--mode dra --gpu-align`), GID indexes, Gb/s, % of line rate, status, the verdict's layer,
/// and a word per counter finding (`diagnosis`).
/// With `sum`, a last line adds up the bandwidth of the measured rails (for `--parallel`).
/// No colour is used in either style, so `NO_COLOR` has nothing to turn off.
pub fn table_in(rows: &[RailResult], sum: bool, style: TableStyle) -> Table {
    let gpus = rows
        .iter()
        .any(|r| r.client_gpu.is_some() || r.server_gpu.is_some());
    let lat = rows.iter().any(|r| r.lat_p99_us.is_some());
    let mut t = Table::new();
    t.load_preset(match style {
        TableStyle::Boxed => UTF8_FULL_CONDENSED,
        TableStyle::Plain => NOTHING,
    })
    .set_content_arrangement(ContentArrangement::Disabled);
    let mut header = vec![
        "rail",
        if gpus {
            "client (iface dev GPU)"
        } else {
            "client (iface dev)"
        },
        if gpus {
            "server (iface dev GPU)"
        } else {
            "server (iface dev)"
        },
        "GID idx c/s",
        "Gb/s",
        "% line rate",
        "status",
        "layer",
        "diagnosis",
    ];
    if lat {
        header.insert(6, "lat p50/p99/max us");
    }
    t.set_header(header);
    let mut sorted: Vec<&RailResult> = rows.iter().collect();
    sorted.sort_by_key(|r| r.rail);
    for r in &sorted {
        let mut cells = vec![
            r.rail.to_string(),
            side(
                &r.client_interface,
                &r.client_rdma_device,
                r.client_gpu.as_deref(),
            ),
            side(
                &r.server_interface,
                &r.server_rdma_device,
                r.server_gpu.as_deref(),
            ),
            format!("{}/{}", gid(r.client_gid_index), gid(r.server_gid_index)),
            r.bw_avg_gbps
                .map_or_else(|| "-".into(), |b| results::fmt_number(b, 2)),
            r.line_rate_pct
                .map_or_else(|| "-".into(), |p| results::fmt_number(p, 1)),
            r.status.to_string(),
            r.layer.map_or_else(|| "-".into(), |l| l.to_string()),
            diagnosis(r),
        ];
        if lat {
            cells.insert(6, lat_cell(r));
        }
        t.add_row(cells);
    }
    if sum {
        let measured: Vec<&&RailResult> = sorted
            .iter()
            .filter(|r| r.status != RailStatus::Failed)
            .collect();
        let total: f64 = measured
            .iter()
            .filter_map(|r| r.bw_avg_gbps)
            .fold(0.0, |a, b| a + b);
        let line: Option<f64> = measured
            .iter()
            .map(|r| r.line_rate_gbps)
            .sum::<Option<f64>>();
        let mut cells = vec![
            "sum".to_string(),
            format!("{} rails at once", measured.len()),
            String::new(),
            String::new(),
            results::fmt_number(total, 2),
            line.filter(|l| *l > 0.0)
                .map_or_else(|| "-".into(), |l| results::fmt_number(total / l * 100.0, 1)),
            String::new(),
            String::new(),
            String::new(),
        ];
        if lat {
            cells.insert(6, String::new());
        }
        t.add_row(cells);
    }
    let right: &[usize] = if lat { &[0, 3, 4, 5, 6] } else { &[0, 3, 4, 5] };
    for &i in right {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// A row's latency, `p50/p99/max` in microseconds (`1.52/3.10/12.4`), `-` when not measured.
fn lat_cell(r: &RailResult) -> String {
    match (r.lat_p50_us, r.lat_p99_us, r.lat_max_us) {
        (Some(a), Some(b), Some(c)) => format!(
            "{}/{}/{}",
            results::fmt_number(a, 2),
            results::fmt_number(b, 2),
            results::fmt_number(c, 2)
        ),
        _ => "-".into(),
    }
}

/// The summary line per network mode (results' [`results::ModeSummary`]), the rails with
/// counter findings (`findings: rail 1 loss, rail 3 link-flap`), then each rail with a verdict:
/// a failed rail's error (`rail 2 failed: ...`), a slow rail's evidence, each followed by the
/// verdict's layer and fix.
pub fn summary_lines(rows: &[RailResult], generated_by: &str) -> Vec<String> {
    let report = Report::new(generated_by, rows.to_vec());
    let mut lines: Vec<String> = match report.comparison() {
        Ok(c) => c.summaries().iter().map(ToString::to_string).collect(),
        Err(e) => vec![format!("(no summary: {e})")],
    };
    let mut found: Vec<&RailResult> = rows.iter().filter(|r| !r.diagnosis.is_empty()).collect();
    found.sort_by_key(|r| r.rail);
    if !found.is_empty() {
        let named: Vec<String> = found
            .iter()
            .map(|r| format!("rail {} {}", r.rail, diagnosis(r)))
            .collect();
        lines.push(format!(
            "findings: {} (the counters' evidence is in the JSON and markdown reports)",
            named.join(", ")
        ));
    }
    let mut judged: Vec<&RailResult> = rows
        .iter()
        .filter(|r| r.status != RailStatus::Ok || r.layer.is_some())
        .collect();
    judged.sort_by_key(|r| (r.rail, r.status));
    for r in judged {
        let said = match r.status {
            RailStatus::Failed => r.error.as_deref().unwrap_or("no error recorded"),
            _ => r
                .evidence
                .as_deref()
                .or(r.error.as_deref())
                .unwrap_or("no reason recorded"),
        };
        lines.push(format!("rail {} {}: {said}", r.rail, r.status));
        if let Some(v) = r.verdict() {
            lines.push(format!("  layer {}; fix: {}", v.layer, v.fix));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::NetworkMode;

    fn row(rail: u32, bw: Option<f64>) -> RailResult {
        let mut r = RailResult {
            run_id: "r1".into(),
            network_mode: NetworkMode::Sriov,
            client_node: "n1".into(),
            server_node: "n2".into(),
            client_rdma_device: format!("mlx5_{rail}"),
            client_gid_index: Some(3),
            server_rdma_device: format!("mlx5_{rail}"),
            server_gid_index: Some(5),
            traffic_class: Some(41),
            mtu_bytes: Some(4096),
            duration_s: bw.map(|_| 3.0),
            line_rate_gbps: Some(100.0),
            error: bw.is_none().then(|| "port down".to_string()),
            ..crate::test_support::row("a", "b", rail, bw)
        };
        r.classify(Some(90.0));
        r
    }

    /// Issue 53, finding 4: `-o` and `--metrics` were written to `FILE.tmp-PID` beside the
    /// file, opened like any file: a symbolic link planted at that name had its target
    /// overwritten. With a link at every name the old code used, the target is untouched.
    #[test]
    fn a_file_is_written_through_no_link_planted_beside_it() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me").expect("victim");
        let out = dir.path().join("rails.prom");
        for name in [
            format!("rails.prom.tmp-{}", std::process::id()),
            "rails.prom.tmp".to_string(),
        ] {
            symlink(&victim, dir.path().join(name)).expect("plant a link");
        }
        write(b"rail_bw 1\n", Dest::File(&out)).expect("writes");
        assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "keep me");
        assert_eq!(std::fs::read_to_string(&out).expect("out"), "rail_bw 1\n");
    }

    #[test]
    fn table_has_a_line_per_rail_and_the_sum() {
        let rows = vec![row(1, Some(96.87)), row(0, Some(96.88)), row(2, None)];
        let text = table_in(&rows, true, TableStyle::Boxed).to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines
                .iter()
                .any(|l| l.contains("96.88") && l.contains("mlx5_0")),
            "{text}"
        );
        assert!(lines.iter().any(|l| l.contains("3/5")), "{text}");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("sum") && l.contains("193.75")),
            "{text}"
        );
        assert!(lines.iter().any(|l| l.contains("failed")), "{text}");
        let s = summary_lines(&rows, "t");
        assert!(
            s[0].starts_with("sriov: 3 rails, 96.87 to 96.88 Gb/s"),
            "{s:?}"
        );
        assert_eq!(s[1], "rail 2 failed: port down");
        assert!(lines.iter().all(|l| !l.contains("loss")), "{text}");
        assert!(
            lines[1].contains("client (iface dev)") && !text.contains("GPU"),
            "{text}"
        );
    }

    #[test]
    fn a_rail_with_a_verdict_shows_its_layer_and_fix() {
        let mut down = row(1, None);
        down.judge(
            Some(&results::Cause::RailUnusable {
                pod: "client-0".into(),
            }),
            None,
        );
        let rows = vec![row(0, Some(96.88)), down];
        let text = table_in(&rows, false, TableStyle::Plain).to_string();
        let words: Vec<&str> = text
            .lines()
            .nth(2)
            .unwrap_or("")
            .split_whitespace()
            .collect();
        assert_eq!(
            words[words.len() - 3..],
            ["failed", "node-setup", "-"],
            "{text}"
        );
        let s = summary_lines(&rows, "test");
        let at = s
            .iter()
            .position(|l| l == "rail 1 failed: port down")
            .unwrap_or_else(|| panic!("{s:?}"));
        assert!(
            s[at + 1].starts_with(
                "  layer node-setup; fix: run `kubectl exec client-0 -- rdmabw probe`"
            ),
            "{s:?}"
        );
    }

    #[test]
    fn a_plain_table_has_no_box_characters_and_its_columns_apart_by_spaces() {
        let rows = vec![row(0, Some(96.88)), row(1, None)];
        let text = table_in(&rows, true, TableStyle::Plain).to_string();
        assert!(
            !text.contains(['│', '┆', '─', '╭', '┌', '═', '|', '+']),
            "{text}"
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "header, two rails, sum: {text}");
        let words: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            words,
            ["0", "net1", "mlx5_0", "net1", "mlx5_0", "3/5", "96.88", "96.9", "ok", "-", "-"],
            "{text}"
        );
        assert!(lines[0].split_whitespace().next() == Some("rail"), "{text}");
        assert!(table_in(&rows, true, TableStyle::Boxed)
            .to_string()
            .contains('│'));
    }

    #[test]
    fn each_side_shows_the_gpu_allocated_with_its_rail() {
        let mut aligned = row(0, Some(96.0));
        aligned.client_interface = "eth0".into();
        aligned.client_gpu = Some("gpu-1".into());
        aligned.server_interface = "eth2".into();
        aligned.server_gpu = Some("gpu-3".into());
        let text = table_in(&[aligned, row(1, Some(96.0))], false, TableStyle::Boxed).to_string();
        assert!(
            text.contains("client (iface dev GPU)") && text.contains("server (iface dev GPU)"),
            "{text}"
        );
        let line = text
            .lines()
            .find(|l| l.contains("eth0"))
            .unwrap_or_default();
        assert!(
            line.contains("eth0 mlx5_0 gpu-1") && line.contains("eth2 mlx5_0 gpu-3"),
            "{text}"
        );
    }

    #[test]
    fn findings_are_a_column_and_a_summary_line() {
        use results::rdmabw::counters::{Finding, FindingKind};
        let finding = |kind| Finding {
            finding: kind,
            summary: String::new(),
            evidence: Vec::new(),
            what_to_do: String::new(),
        };
        let mut lossy = row(1, Some(10.0));
        lossy.diagnosis = vec![
            finding(FindingKind::LinkFlap),
            finding(FindingKind::PacketLoss),
            finding(FindingKind::PacketLoss),
        ];
        let rows = vec![row(0, Some(96.0)), lossy];
        let text = table_in(&rows, false, TableStyle::Boxed).to_string();
        let line = |rail: &str| {
            text.lines()
                .find(|l| l.trim_start_matches(['│', ' ']).starts_with(rail))
                .unwrap_or_default()
                .to_string()
        };
        assert!(line("1 ").contains("loss,link-flap"), "{text}");
        assert!(
            line("0 ").trim_end_matches(['│', ' ']).ends_with('-'),
            "{text}"
        );
        let s = summary_lines(&rows, "t");
        assert!(
            s.iter()
                .any(|l| l.starts_with("findings: rail 1 loss,link-flap (")),
            "{s:?}"
        );
    }
}
