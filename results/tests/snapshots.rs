//! Snapshot tests: every output format of the 16-rail, 3-mode fixture is
//! compared byte for byte with a committed file under tests/snapshots/.
//!
//! After an intended output change, regenerate with
//! `UPDATE_SNAPSHOTS=1 cargo test -p results --test snapshots` and review the
//! diff before committing it.

mod common;

use std::path::PathBuf;

use results::{Format, Report};

fn snapshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("snapshots")
        .join(name)
}

fn check_snapshot(name: &str, actual: &[u8]) {
    let path = snapshot_path(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir snapshots");
        std::fs::write(&path, actual).expect("write snapshot");
        return;
    }
    let expected = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run UPDATE_SNAPSHOTS=1 cargo test -p results --test snapshots",
            path.display()
        )
    });
    if expected != actual {
        let exp = String::from_utf8_lossy(&expected);
        let act = String::from_utf8_lossy(actual);
        let first_diff = exp
            .lines()
            .zip(act.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| exp.lines().count().min(act.lines().count()));
        panic!(
            "{name} differs from {} at line {}:\n  expected: {:?}\n  actual:   {:?}\n\
             (if the change is intended: UPDATE_SNAPSHOTS=1 cargo test -p results --test snapshots)",
            path.display(),
            first_diff + 1,
            exp.lines().nth(first_diff),
            act.lines().nth(first_diff),
        );
    }
}

fn export(report: &Report, format: Format) -> Vec<u8> {
    format
        .exporter()
        .serialize(report)
        .unwrap_or_else(|e| panic!("{format}: {e}"))
}

#[test]
fn fixture_has_16_rails_over_3_modes_with_a_failure_and_a_slow_rail() {
    let report = common::fixture_report();
    let cmp = report.comparison().expect("no duplicate rails");
    let labels: Vec<&str> = cmp.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["hostnetwork", "ipvlan", "sriov"]);
    assert_eq!(cmp.rails, (0..16).collect::<Vec<u32>>());
    let summaries = cmp.summaries();
    assert_eq!(summaries[1].below_rails, [7]);
    assert_eq!(summaries[2].failed_rails, [12]);
}

#[test]
fn csv_snapshot() {
    check_snapshot(
        "sweep-16x3.csv",
        &export(&common::fixture_report(), Format::Csv),
    );
}

#[test]
fn json_snapshot() {
    check_snapshot(
        "sweep-16x3.json",
        &export(&common::fixture_report(), Format::Json),
    );
}

#[test]
fn markdown_snapshot() {
    check_snapshot(
        "sweep-16x3.md",
        &export(&common::fixture_report(), Format::Markdown),
    );
}

#[test]
fn svg_snapshot() {
    check_snapshot(
        "sweep-16x3.svg",
        &export(&common::fixture_report(), Format::Svg),
    );
}

#[test]
fn openmetrics_snapshot() {
    check_snapshot(
        "sweep-16x3.prom",
        &export(&common::fixture_report(), Format::OpenMetrics),
    );
}

/// The fixture with a rack named as the culprit on rail 3 and every group of two named on
/// rail 5 (the spine): the `railbench_group_*` families follow the rails'. scripts/check-metrics
/// reads this snapshot with real Prometheus parsers.
#[test]
fn openmetrics_snapshot_with_group_culprits() {
    let mut report = common::fixture_report();
    let group = |value: &str, rail, every_group| results::GroupCulprit {
        label: "example.com/rack".into(),
        value: value.into(),
        rail,
        cross_pairs: 24,
        cross_median_gbps: 41.2,
        inside_pairs: 4,
        inside_median_gbps: 96.1,
        every_group,
    };
    report.group_culprits = vec![
        group("r7", 3, false),
        group("r1", 5, true),
        group("(none)", 5, true),
    ];
    check_snapshot(
        "sweep-16x3-groups.prom",
        &export(&report, Format::OpenMetrics),
    );
}

#[test]
fn markdown_snapshot_with_report_threshold() {
    let report = common::fixture_report().with_threshold(Some(96.85));
    check_snapshot(
        "sweep-16x3-threshold-96.85.md",
        &export(&report, Format::Markdown),
    );
}

#[test]
fn a_version_1_fixture_reads_and_rewrites_as_the_current_version_row_for_row() {
    // The fixture was written with schema version 1 (before `bidirectional`, `diagnosis` and
    // `counters` of version 2, `poll` and `cpu_s_per_gb` of version 3, and the GPU columns of
    // version 4); version 5 has no `counters` column (they go to a file of their own).
    let fixture = std::fs::read_to_string(common::fixture_path("sweep-16x3.csv")).expect("fixture");
    let out = String::from_utf8(export(&common::fixture_report(), Format::Csv)).expect("utf-8");
    let records = |text: &str| -> Vec<Vec<String>> {
        csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(text.as_bytes())
            .records()
            .map(|r| r.expect("csv").iter().map(str::to_string).collect())
            .collect()
    };
    let (old, new) = (records(&fixture), records(&out));
    assert_eq!(old.len(), new.len());
    let after_qps = old[0].iter().position(|c| c == "qps").expect("qps") + 1;
    for (i, (o, n)) in old.iter().zip(&new).enumerate() {
        let mut want = o.clone();
        if i == 0 {
            want.insert(after_qps, "bidirectional".into());
            want.extend([
                "diagnosis".into(),
                "poll".into(),
                "cpu_s_per_gb".into(),
                "client_gpu".into(),
                "client_gpu_pcie_root".into(),
                "server_gpu".into(),
                "server_gpu_pcie_root".into(),
                "lat_p50_us".into(),
                "lat_p99_us".into(),
                "lat_max_us".into(),
                "software_rdma".into(),
                "client_tool".into(),
                "server_tool".into(),
                "layer".into(),
                "evidence".into(),
                "fix".into(),
                "client_gpus_without_rail".into(),
                "server_gpus_without_rail".into(),
            ]);
        } else {
            assert_eq!(want[0], "1", "a version 1 row");
            want[0] = results::SCHEMA_VERSION.to_string();
            want.insert(after_qps, "false".into());
            want.extend(std::iter::repeat_n(String::new(), 18));
        }
        assert_eq!(
            &want,
            n,
            "line {}: only the version and the new columns change",
            i + 1
        );
    }
    let again = results::read_str(&out, "again.csv").expect("reads back");
    assert_eq!(again, common::fixture_rows());
}

#[test]
fn markdown_lists_each_rails_findings_with_their_evidence() {
    use results::rdmabw::counters::{CounterSource, Evidence, Finding, FindingKind};
    use results::rdmabw::report::Role;
    let mut rows = common::fixture_rows();
    let slow = rows
        .iter_mut()
        .find(|r| r.network_mode.as_str() == "ipvlan" && r.rail == 7)
        .expect("the slow ipvlan rail");
    slow.diagnosis = vec![Finding {
        finding: FindingKind::PfcPause,
        summary: "priority 3 was paused 23% of the window".into(),
        evidence: vec![Evidence {
            role: Role::Server,
            source: CounterSource::Netdev,
            counter: "rx_prio3_pause_duration".into(),
            delta: 2_300_000,
            per_s: 230_000.0,
        }],
        what_to_do: "find who sends the pauses".into(),
    }];
    let md = String::from_utf8(export(
        &Report::new("railbench results test fixture", rows),
        Format::Markdown,
    ))
    .expect("utf-8");
    let at = md.find("## Findings").expect("a findings section");
    let section = &md[at..];
    assert!(section.contains("### ipvlan rail 7 ("), "{section}");
    assert!(
        section.contains("- **pfc-pause**: priority 3 was paused 23% of the window"),
        "{section}"
    );
    assert!(
        section.contains("  - server `rx_prio3_pause_duration` (netdev): +2300000 (230000.0/s)"),
        "{section}"
    );
    assert!(
        section.contains("  - what to do: find who sends the pauses"),
        "{section}"
    );
    assert!(!export(&common::fixture_report(), Format::Markdown)
        .windows(11)
        .any(|w| w == b"## Findings"));
}

#[test]
fn markdown_says_which_gpu_sits_with_each_rail_when_rows_have_one() {
    let mut rows = common::fixture_rows();
    let aligned = rows
        .iter_mut()
        .find(|r| r.network_mode.as_str() == "sriov" && r.rail == 2)
        .expect("sriov rail 2");
    aligned.client_gpu = Some("gpu-5".into());
    aligned.client_gpu_pcie_root = Some("pci0000:8c".into());
    aligned.server_gpu = Some("gpu-4".into());
    let md = String::from_utf8(export(
        &Report::new("railbench results test fixture", rows),
        Format::Markdown,
    ))
    .expect("utf-8");
    let at = md.find("## GPU of each rail").expect("a GPU section");
    let section = &md[at..md[at..].find("## Verdicts").map_or(md.len(), |e| at + e)];
    let lines: Vec<&str> = section.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(
        lines,
        [
            "| mode | rail | client | client GPU | server | server GPU |",
            "| sriov | 2 | gpu-node-01 net3 | gpu-5 (pci0000:8c) | gpu-node-02 net3 | gpu-4 |",
        ],
        "{section}"
    );
    // Without a GPU in any row, no such section (the snapshot above).
    assert!(
        !String::from_utf8(export(&common::fixture_report(), Format::Markdown))
            .expect("utf-8")
            .contains("GPU of each rail")
    );
}
