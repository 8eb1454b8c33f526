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
fn markdown_snapshot_with_report_threshold() {
    let report = common::fixture_report().with_threshold(Some(96.85));
    check_snapshot(
        "sweep-16x3-threshold-96.85.md",
        &export(&report, Format::Markdown),
    );
}

#[test]
fn csv_export_of_the_fixture_is_the_fixture() {
    let fixture = std::fs::read(common::fixture_path("sweep-16x3.csv")).expect("fixture");
    let out = export(&common::fixture_report(), Format::Csv);
    assert_eq!(
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&fixture),
        "reading and rewriting the fixture must not change a byte"
    );
}
