//! Bad input is an error naming file, line and column; nothing is skipped.

mod common;

use results::{read_str, write_csv, write_json, RailResult, ResultsError};

fn csv_of(rows: &[RailResult]) -> String {
    let mut buf = Vec::new();
    write_csv(&mut buf, rows).expect("write");
    String::from_utf8(buf).expect("utf-8")
}

fn json_of(rows: &[RailResult]) -> String {
    let mut buf = Vec::new();
    write_json(&mut buf, "t", rows).expect("write");
    String::from_utf8(buf).expect("utf-8")
}

fn fixture_csv() -> String {
    csv_of(&common::fixture_rows()[..3])
}

fn fixture_json() -> String {
    json_of(&common::fixture_rows()[..3])
}

/// Replace the cell `column` of data row `row` (0-based) of a CSV text.
fn set_cell(csv: &str, row: usize, column: &str, value: &str) -> String {
    let mut lines: Vec<String> = csv.lines().map(str::to_string).collect();
    let idx = lines[0]
        .split(',')
        .position(|c| c == column)
        .expect("column exists");
    let mut cells: Vec<String> = lines[row + 1].split(',').map(str::to_string).collect();
    cells[idx] = value.to_string();
    lines[row + 1] = cells.join(",");
    lines.join("\n") + "\n"
}

/// Remove a column (header and every row) from a CSV text.
fn drop_column(csv: &str, column: &str) -> String {
    let idx = csv
        .lines()
        .next()
        .and_then(|h| h.split(',').position(|c| c == column))
        .expect("column exists");
    csv.lines()
        .map(|l| {
            let mut cells: Vec<&str> = l.split(',').collect();
            cells.remove(idx);
            cells.join(",")
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The error of reading the fixture's CSV as `a.csv` with one cell set (see [`set_cell`]).
fn cell_error(row: usize, column: &str, value: &str) -> String {
    err(&set_cell(&fixture_csv(), row, column, value), "a.csv").to_string()
}

/// Asserts that the error's text `e` begins with `prefix`.
#[track_caller]
fn assert_starts(e: &str, prefix: &str) {
    assert!(
        e.starts_with(prefix),
        "expected {prefix:?} at the start of: {e}"
    );
}

fn err(text: &str, name: &str) -> ResultsError {
    read_str(text, name).expect_err("input must be rejected")
}

#[test]
fn csv_missing_column_names_file_line_column() {
    let text = drop_column(&fixture_csv(), "bw_avg_gbps");
    let e = err(&text, "runs/host.csv");
    assert!(matches!(e, ResultsError::MissingColumn { .. }), "{e:?}");
    // bw_avg_gbps is column 26 of the schema (schema_version is column 1).
    assert_eq!(
        e.to_string(),
        "runs/host.csv:1:26: missing column `bw_avg_gbps`"
    );
}

#[test]
fn csv_missing_optional_column_is_still_an_error() {
    let text = drop_column(&fixture_csv(), "bw_p99_gbps");
    let e = err(&text, "a.csv");
    assert!(e.to_string().starts_with("a.csv:1:"), "{e}");
    assert!(
        e.to_string().contains("missing column `bw_p99_gbps`"),
        "{e}"
    );
}

#[test]
fn csv_unknown_column_is_an_error() {
    let text = fixture_csv().replacen(
        "server_gpus_without_rail\n",
        "server_gpus_without_rail,extra\n",
        1,
    );
    let text = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                l.to_string()
            } else {
                format!("{l},x")
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let e = err(&text, "a.csv");
    assert_eq!(
        e.to_string(),
        "a.csv:1:54: unknown column `extra` (schema_version 10 has no such column)"
    );
}

#[test]
fn csv_newer_schema_is_refused_before_column_checks() {
    // A newer schema typically has columns this one does not know; the
    // version is what the user needs to hear about.
    let text = set_cell(&fixture_csv(), 0, "schema_version", "11").replacen(
        "server_gpus_without_rail\n",
        "server_gpus_without_rail,new_field\n",
        1,
    );
    newer_schema(&text, "new.csv", "new.csv:2:1: schema_version 11 is newer");
}

/// `text`, read as `name`, is refused as of the newer schema 11 with a message starting `start`.
fn newer_schema(text: &str, name: &str, start: &str) {
    let e = err(text, name);
    assert!(
        matches!(e, ResultsError::NewerSchema { found: 11, .. }),
        "{e:?}"
    );
    assert_starts(&e.to_string(), start);
}

#[test]
fn csv_newer_schema_on_a_later_row_is_refused() {
    let text = set_cell(&fixture_csv(), 2, "schema_version", "11");
    newer_schema(
        &text,
        "mixed.csv",
        "mixed.csv:4:1: schema_version 11 is newer",
    );
}

#[test]
fn csv_bad_number_names_line_and_column() {
    let text = set_cell(&fixture_csv(), 1, "bw_avg_gbps", "96.8x");
    let e = err(&text, "host.csv");
    assert_eq!(
        e.to_string(),
        "host.csv:3:26: column `bw_avg_gbps`: expected a number, found `96.8x`"
    );
}

#[test]
fn csv_bad_integer_and_empty_required_number() {
    assert_eq!(
        cell_error(0, "rail", "-1"),
        "a.csv:2:10: column `rail`: expected an integer from 0 to 4294967295, found `-1`"
    );
    let text = set_cell(&fixture_csv(), 0, "qps", "");
    assert_eq!(
        err(&text, "a.csv").to_string(),
        "a.csv:2:20: column `qps`: expected an integer from 0 to 4294967295, found an empty cell"
    );
}

#[test]
fn csv_bad_enum_value_is_pinned_to_its_column() {
    let e = cell_error(2, "status", "great");
    assert_starts(&e, "a.csv:4:25: column `status`: unknown variant `great`");
}

#[test]
fn csv_row_breaking_a_rule_is_an_error() {
    assert_eq!(
        cell_error(0, "bw_avg_gbps", ""),
        "a.csv:2:26: column `bw_avg_gbps` is required when status is ok"
    );
}

#[test]
fn csv_short_row_is_an_error() {
    let mut text = fixture_csv();
    text.push_str("1,run,2025-06-01T00:00:00Z\n");
    let e = err(&text, "a.csv").to_string();
    assert_starts(
        &e,
        "a.csv:5:4: row has 3 cells but the header has 53 columns",
    );
}

#[test]
fn json_newer_schema_names_file_line_column() {
    let text = fixture_json().replacen("\"schema_version\": 10", "\"schema_version\": 11", 1);
    newer_schema(
        &text,
        "new.json",
        "new.json:2:21: schema_version 11 is newer",
    );
}

#[test]
fn json_bad_number_names_line_and_column() {
    let text = fixture_json().replacen("\"bw_avg_gbps\": 96.86", "\"bw_avg_gbps\": \"fast\"", 1);
    let line = text
        .lines()
        .position(|l| l.contains("\"fast\""))
        .expect("edited")
        + 1;
    let e = err(&text, "host.json").to_string();
    assert!(
        e.starts_with(&format!("host.json:{line}:")),
        "error should point at line {line}: {e}"
    );
    assert!(
        e.contains("row 1: invalid type: string \"fast\", expected f64"),
        "{e}"
    );
}

#[test]
fn json_missing_key_names_the_row_position() {
    let text = fixture_json().replacen("      \"bw_p99_gbps\": 96.91,\n", "", 1);
    let e = err(&text, "a.json");
    assert!(matches!(e, ResultsError::MissingColumn { .. }), "{e:?}");
    // The first row's object starts on line 5, column 5.
    assert_eq!(e.to_string(), "a.json:5:5: missing column `bw_p99_gbps`");
}

#[test]
fn json_unknown_key_points_at_the_key() {
    let text = fixture_json().replacen("\"qps\": 4,", "\"qps\": 4, \"colour\": 1,", 1);
    let e = err(&text, "a.json").to_string();
    assert_starts(&e, "a.json:24:17: unknown column `colour`");
}

#[test]
fn json_syntax_error_names_line_and_column() {
    let text = fixture_json().replacen("\"rail\": 0,", "\"rail\": 0,,", 1);
    let e = err(&text, "a.json").to_string();
    assert!(e.starts_with("a.json:14:17: "), "{e}");
}

#[test]
fn json_rule_violation_points_at_the_field() {
    let text = fixture_json()
        .replacen("\"error\": null", "\"error\": \"\"", 1)
        .replacen("\"status\": \"ok\"", "\"status\": \"failed\"", 1);
    let e = err(&text, "a.json").to_string();
    assert_eq!(
        e,
        "a.json:39:7: row 0: `error` is required when status is failed"
    );
}

#[test]
fn unrecognised_content_is_an_error() {
    let e = err("hello,world\n1,2\n", "notes.txt");
    assert!(matches!(e, ResultsError::UnknownFormat { .. }), "{e:?}");
    let e = err("", "empty");
    assert!(matches!(e, ResultsError::UnknownFormat { .. }), "{e:?}");
    let e = err("", "empty.csv");
    assert_eq!(
        e.to_string(),
        "empty.csv:1:1: empty file; expected a CSV header"
    );
}

#[test]
fn a_byte_order_mark_is_ignored() {
    let text = format!("\u{feff}{}", fixture_csv());
    assert_eq!(read_str(&text, "excel.csv").expect("read").len(), 3);
}

#[test]
fn a_version_2_file_without_the_new_columns_is_an_error() {
    let text = drop_column(&fixture_csv(), "diagnosis");
    assert_eq!(
        err(&text, "a.csv").to_string(),
        "a.csv:1:36: missing column `diagnosis`"
    );
}

#[test]
fn a_version_2_csv_reads_without_poll_and_cpu_columns() {
    let v3 = drop_column(&drop_column(&fixture_csv(), "cpu_s_per_gb"), "poll");
    // Claiming the current version, the file lacks the columns version 3 added.
    assert_eq!(
        err(&v3, "a.csv").to_string(),
        "a.csv:1:37: missing column `poll`"
    );
    let mut v2 = v3;
    for row in 0..3 {
        v2 = set_cell(&v2, row, "schema_version", "2");
    }
    let rows = read_str(&v2, "old.csv").expect("a version 2 file reads");
    assert_eq!(rows.len(), 3);
    assert!(rows
        .iter()
        .all(|r| r.poll.is_none() && r.cpu_s_per_gb.is_none()));
}

#[test]
fn poll_and_cpu_per_gb_round_trip_through_csv() {
    let mut rows = common::fixture_rows()[..2].to_vec();
    rows[0].poll = Some(results::rdmabw::params::PollMode::Event);
    rows[0].cpu_s_per_gb = Some(0.125);
    let text = csv_of(&rows);
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.ends_with(",event,0.125,,,,,,,,,,,,,,,")),
        "{text}"
    );
    assert_eq!(read_str(&text, "rt.csv").expect("reads back"), rows);
}

#[test]
fn a_list_cell_that_is_not_json_names_its_column() {
    let e = cell_error(1, "diagnosis", "[loss");
    assert_starts(
        &e,
        "a.csv:3:36: column `diagnosis`: expected a JSON list (or an empty cell)",
    );
}

#[test]
fn a_diagnosis_word_that_names_no_finding_names_its_column_and_the_words() {
    let e = cell_error(1, "diagnosis", "loss;lost");
    assert_starts(
        &e,
        "a.csv:3:36: column `diagnosis`: unknown finding `lost`; expected words among loss, congestion,",
    );
}

#[test]
fn a_version_1_json_file_reads_without_the_new_keys() {
    let text = fixture_json().replacen("\"schema_version\": 10", "\"schema_version\": 1", 1);
    let text = without_gpu_keys(&without_lat_keys(&text))
        .replace(",\n      \"poll\": null,\n      \"cpu_s_per_gb\": null", "")
        .replace(",\n      \"diagnosis\": [],\n      \"counters\": []", "")
        .replace(
            "\"error\": null,\n      \"diagnosis\": [],\n      \"counters\": []",
            "\"error\": null",
        );
    assert!(!text.contains("diagnosis"), "{text}");
    let rows = read_str(&text, "old.json").expect("a version 1 file reads");
    assert_eq!(rows.len(), 3);
    // The same document claiming version 2 lacks required keys.
    let v2 = text.replacen("\"schema_version\": 1", "\"schema_version\": 2", 1);
    assert!(err(&v2, "new.json")
        .to_string()
        .contains("missing column `diagnosis`"));
}

/// The keys versions 6 to 9 added (each row's last eleven): the latency, `software_rdma`, the
/// tools and the verdict.
const LAT_KEYS: &[&str] = &[
    "lat_p50_us",
    "lat_p99_us",
    "lat_max_us",
    "software_rdma",
    "client_tool",
    "server_tool",
    "layer",
    "evidence",
    "fix",
    "client_gpus_without_rail",
    "server_gpus_without_rail",
];

/// A JSON results text without the keys versions 6 to 9 added (each row's last eleven, all
/// null).
fn without_lat_keys(json: &str) -> String {
    let gone = LAT_KEYS.iter().fold(json.to_string(), |t, k| {
        t.replace(&format!(",\n      \"{k}\": null"), "")
    });
    assert!(
        !gone.contains("lat_") && !gone.contains("software_rdma") && !gone.contains("_tool"),
        "{gone}"
    );
    gone
}

#[test]
fn a_version_5_file_reads_without_the_latency_columns() {
    // Written by railsweep before --test bw,lat (the first rows of the version 5 snapshot).
    let path = common::fixture_path("sweep-v5-2.csv");
    let text = std::fs::read_to_string(&path).expect("fixture");
    assert!(
        text.lines().nth(1).is_some_and(|l| l.starts_with("5,")),
        "{text}"
    );
    assert!(!text.contains("lat_p99_us"), "{text}");
    let rows = results::read_path(&path).expect("a version 5 CSV reads");
    assert_eq!(rows.len(), 2);
    assert!(rows
        .iter()
        .all(|r| r.lat_p50_us.is_none() && r.lat_p99_us.is_none() && r.lat_max_us.is_none()));
    // The same file claiming version 6 lacks the columns version 6 added.
    let v6 = text.replace("\n5,", "\n6,");
    assert_eq!(
        err(&v6, "a.csv").to_string(),
        "a.csv:1:43: missing column `lat_p50_us`"
    );
    // And its JSON, without the keys, claiming version 5.
    let json = without_lat_keys(&fixture_json()).replacen(
        "\"schema_version\": 10",
        "\"schema_version\": 5",
        1,
    );
    let rows = read_str(&json, "old.json").expect("a version 5 JSON file reads");
    assert_eq!(rows, common::fixture_rows()[..3].to_vec());
}

#[test]
fn latency_round_trips_through_csv_and_json() {
    let mut rows = common::fixture_rows()[..2].to_vec();
    (rows[0].lat_p50_us, rows[0].lat_p99_us, rows[0].lat_max_us) =
        (Some(3.5), Some(4.25), Some(19.0));
    let text = csv_of(&rows);
    assert!(
        text.lines().next().is_some_and(|l| l
            .ends_with(",lat_p50_us,lat_p99_us,lat_max_us,software_rdma,client_tool,server_tool,layer,evidence,fix,client_gpus_without_rail,server_gpus_without_rail")),
        "{text}"
    );
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.ends_with(",3.5,4.25,19.0,,,,,,,,")),
        "{text}"
    );
    assert_eq!(read_str(&text, "rt.csv").expect("reads back"), rows);
    let text = json_of(&rows);
    assert_eq!(read_str(&text, "rt.json").expect("reads back"), rows);
}

/// A JSON results text without the keys version 4 added (each row's last four, all null).
fn without_gpu_keys(json: &str) -> String {
    let keys = [
        "client_gpu",
        "client_gpu_pcie_root",
        "server_gpu",
        "server_gpu_pcie_root",
    ];
    let gone = keys.iter().fold(json.to_string(), |t, k| {
        t.replace(&format!(",\n      \"{k}\": null"), "")
    });
    assert!(
        !gone.contains("_gpu\"") && !gone.contains("_gpu_pcie_root"),
        "{gone}"
    );
    gone
}

#[test]
fn a_version_3_file_reads_without_the_gpu_columns() {
    let keys = [
        "client_gpu",
        "client_gpu_pcie_root",
        "server_gpu",
        "server_gpu_pcie_root",
    ];
    let v4 = keys
        .iter()
        .chain(LAT_KEYS)
        .fold(fixture_csv(), |t, k| drop_column(&t, k));
    // Claiming version 4 or later, the file lacks the columns version 4 added.
    assert_eq!(
        err(&v4, "a.csv").to_string(),
        "a.csv:1:39: missing column `client_gpu`"
    );
    let v3 = (0..3).fold(v4, |t, row| set_cell(&t, row, "schema_version", "3"));
    let rows = read_str(&v3, "old.csv").expect("a version 3 CSV reads");
    assert_eq!(rows, common::fixture_rows()[..3].to_vec());
    assert!(rows.iter().all(|r| r.client_gpu.is_none()
        && r.client_gpu_pcie_root.is_none()
        && r.server_gpu.is_none()
        && r.server_gpu_pcie_root.is_none()));

    let json = without_gpu_keys(&without_lat_keys(&fixture_json()));
    assert!(err(&json, "a.json")
        .to_string()
        .contains("missing column `client_gpu`"));
    let json = json.replacen("\"schema_version\": 10", "\"schema_version\": 3", 1);
    let rows = read_str(&json, "old.json").expect("a version 3 JSON file reads");
    assert_eq!(rows, common::fixture_rows()[..3].to_vec());
}

#[test]
fn each_sides_gpu_and_its_root_round_trip_through_csv_and_json() {
    let mut rows = common::fixture_rows()[..2].to_vec();
    rows[0].client_gpu = Some("gpu-3".into());
    rows[0].client_gpu_pcie_root = Some("pci0000:4c".into());
    rows[0].server_gpu = Some("gpu-0".into());
    // A GPU whose ResourceSlice publishes no PCIe root.
    rows[0].server_gpu_pcie_root = None;
    let text = csv_of(&rows);
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.ends_with(",gpu-3,pci0000:4c,gpu-0,,,,,,,,,,,,")),
        "{text}"
    );
    assert!(
        text.lines().nth(2).is_some_and(|l| l.ends_with(",,,,,,,")),
        "{text}"
    );
    assert_eq!(read_str(&text, "rt.csv").expect("reads back"), rows);
    let text = json_of(&rows);
    assert!(
        text.contains("\"client_gpu\": \"gpu-3\",\n      \"client_gpu_pcie_root\": \"pci0000:4c\""),
        "{text}"
    );
    assert_eq!(read_str(&text, "rt.json").expect("reads back"), rows);
}
