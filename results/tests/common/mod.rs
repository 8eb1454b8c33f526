//! Shared helpers for the results integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use results::{read_path, RailResult, Report};

/// Path of a file under tests/fixtures.
pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join(name)
}

/// The 16-rail, 3-mode fixture: hostnetwork, ipvlan (rail 7 below 90 Gb/s)
/// and sriov (rail 12 failed).
pub fn fixture_rows() -> Vec<RailResult> {
    read_path(fixture_path("sweep-16x3.csv")).expect("fixture reads")
}

/// The fixture as a report, with a fixed `generated_by` so snapshots do not
/// change with the crate version.
pub fn fixture_report() -> Report {
    Report::new("railbench results test fixture", fixture_rows())
}
