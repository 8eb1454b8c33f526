//! `railsweep report` reads what `rdmabw --csv` writes, as it reads its own results.
//!
//! rdmabw measures only over an RDMA device, which the test machine lacks. Its `--csv` output
//! is [`BwReport::write_csv`] on the report of the test it just ran (bench-cli's
//! `output::print`); this test runs that same function on a report as `rdmabw client --json`
//! prints it (the document rdmabw builds before writing its CSV), and feeds the file to the
//! built railsweep binary.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, UNIX_EPOCH};

use results::rdmabw::report::BwReport;
use results::rdmabw::RdmabwRun;
use results::{read_path, NetworkMode, RailStatus};

/// A `rdmabw client --json --min-gbps 1` document of a size sweep over net2 (rail 1) of the
/// Soft-RoCE lab, with two of its sizes (4 and 64 KiB) kept.
const RECORDED: &str = include_str!("fixtures/bwreport-lab-4k-64k.json");

fn railsweep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("railsweep runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// The CSV rdmabw writes for [`RECORDED`], at a fixed time, in `dir`.
fn rdmabw_csv(dir: &Path) -> std::path::PathBuf {
    let report: BwReport = serde_json::from_str(RECORDED).expect("a BwReport");
    let path = dir.join("rail1.csv");
    let run = RdmabwRun::ended_at(UNIX_EPOCH + Duration::from_secs(1_709_210_096));
    run.write_csv(std::fs::File::create(&path).expect("create"), &report)
        .expect("rdmabw's CSV");
    path
}

#[test]
fn railsweep_report_reads_rdmabws_csv_rows_and_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = rdmabw_csv(dir.path());
    let header = std::fs::read_to_string(&csv).expect("reads");
    assert!(header.starts_with("schema_version,run_id,"), "{header}");

    let merged = dir.path().join("merged.json");
    let out = railsweep(&["report", path_str(&csv), "--output-file", path_str(&merged)]);
    // Exit 1: the 4 KiB size is below the 1 Gb/s threshold.
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    let rows = read_path(&merged).expect("railsweep's output reads");
    assert_eq!(rows.len(), 2);
    let sizes: Vec<u64> = rows.iter().map(|r| r.msg_size_bytes).collect();
    assert_eq!(sizes, [4096, 65536]);
    let big = &rows[1];
    assert_eq!(big.run_id, "20240229T123456Z-65536B");
    assert_eq!(big.network_mode, NetworkMode::Other("rdmabw".into()));
    assert_eq!(big.rail, 1);
    assert_eq!(
        (big.client_node.as_str(), big.client_interface.as_str()),
        ("podA", "net2")
    );
    assert_eq!(
        (big.server_node.as_str(), big.server_rdma_device.as_str()),
        ("podB", "rxe3")
    );
    assert_eq!(big.bw_avg_gbps, Some(2.2));
    assert_eq!(big.bw_p99_gbps, Some(2.35));
    assert_eq!(big.line_rate_gbps, Some(10.0));
    assert_eq!(big.threshold_gbps, Some(1.0));
    assert_eq!(big.status, RailStatus::Ok);
    assert_eq!(rows[0].status, RailStatus::BelowThreshold);
    assert_eq!(rows[0].bw_avg_gbps, Some(0.9985));
}

#[test]
fn railsweep_report_lines_rdmabws_sizes_up_as_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = rdmabw_csv(dir.path());
    let out = railsweep(&["report", path_str(&csv)]);
    let stdout = text(&out.stdout);
    // The 4 KiB size is below the 1 Gb/s threshold: exit 1, as for any rail below it.
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    assert!(
        stdout.contains("| rail | rdmabw 4 KiB | rdmabw 64 KiB |\n"),
        "{stdout}"
    );
}
