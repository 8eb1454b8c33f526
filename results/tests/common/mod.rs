//! Shared helpers for the results integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use results::rdmabw::counters::{CounterSource, Evidence};
use results::rdmabw::report::Role;
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

/// A hardware counter's evidence on `role`'s side: `delta` counted, `per_s` a second.
pub fn evidence(role: Role, counter: &str, delta: u64, per_s: f64) -> Evidence {
    Evidence {
        role,
        source: CounterSource::Hw,
        counter: counter.into(),
        delta,
        per_s,
    }
}

/// `rows` as a results CSV gives them back: each finding's `per_s` to six significant digits.
pub fn rounded(rows: &[RailResult]) -> Vec<RailResult> {
    let mut rows = rows.to_vec();
    for e in rows
        .iter_mut()
        .flat_map(|r| &mut r.diagnosis)
        .flat_map(|f| &mut f.evidence)
    {
        e.per_s = format!("{:.5e}", e.per_s).parse().expect("a number");
    }
    rows
}
