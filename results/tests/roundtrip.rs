//! Write, read back, compare: CSV, JSON, and the appending RowSink.

mod common;

use results::{
    read_csv, read_json, read_path, write_csv, write_json, NetworkMode, RailResult, RailStatus,
    Report, ResultsError, RowSink, SCHEMA_VERSION,
};

/// Rows exercising every kind of value: all options empty, odd text, other modes.
fn varied_rows() -> Vec<RailResult> {
    let mut rows = common::fixture_rows();
    let mut odd = rows[0].clone();
    odd.run_id = "run, with \"quotes\"".into();
    odd.network_mode = "macvlan".parse().expect("non-empty");
    odd.client_pod = None;
    odd.server_pod = None;
    odd.client_gid_index = None;
    odd.traffic_class = None;
    odd.mtu_bytes = None;
    odd.duration_s = None;
    odd.iterations = Some(5000);
    odd.memory = results::MemoryKind::Host;
    odd.bw_avg_gbps = Some(0.1 + 0.2); // not exactly representable in short decimal
    odd.bw_peak_gbps = None;
    odd.msg_rate_mpps = Some(1e-9);
    odd.line_rate_gbps = None;
    odd.line_rate_pct = None;
    odd.threshold_gbps = None;
    rows.push(odd);
    let mut failed = rows[0].clone();
    failed.network_mode = NetworkMode::Lab;
    failed.status = RailStatus::Failed;
    failed.bw_avg_gbps = None;
    failed.error = Some("line one\nline two, with a comma | and a pipe".into());
    rows.push(failed);
    rows
}

#[test]
fn csv_round_trip_is_exact() {
    let rows = varied_rows();
    let mut buf = Vec::new();
    write_csv(&mut buf, &rows).expect("write");
    let back = read_csv(buf.as_slice(), "mem.csv").expect("read");
    assert_eq!(back, rows);
}

#[test]
fn json_round_trip_is_exact() {
    let rows = varied_rows();
    let mut buf = Vec::new();
    write_json(&mut buf, "roundtrip test", &rows).expect("write");
    let text = String::from_utf8(buf).expect("utf-8");
    let back = read_json(&text, "mem.json").expect("read");
    assert_eq!(back.schema_version, SCHEMA_VERSION);
    assert_eq!(back.generated_by, "roundtrip test");
    assert_eq!(back.rows, rows);
}

#[test]
fn files_round_trip_through_read_path_by_extension_and_by_content() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = varied_rows();
    let csv = dir.path().join("a.csv");
    let json = dir.path().join("b.json");
    let csv_noext = dir.path().join("c");
    let json_noext = dir.path().join("d.results");
    for (path, is_csv) in [
        (&csv, true),
        (&json, false),
        (&csv_noext, true),
        (&json_noext, false),
    ] {
        let f = std::fs::File::create(path).expect("create");
        if is_csv {
            write_csv(f, &rows).expect("write csv");
        } else {
            write_json(f, "t", &rows).expect("write json");
        }
        assert_eq!(
            read_path(path).expect("read back"),
            rows,
            "{}",
            path.display()
        );
    }
}

#[test]
fn writers_refuse_invalid_rows() {
    let mut row = common::fixture_rows().remove(0);
    row.bw_avg_gbps = Some(f64::NAN);
    let err = write_csv(Vec::new(), std::slice::from_ref(&row)).expect_err("NaN refused");
    assert!(err.to_string().contains("bw_avg_gbps"), "{err}");
    let err = write_json(Vec::new(), "t", &[row]).expect_err("NaN refused");
    assert!(matches!(err, ResultsError::InvalidRow { .. }), "{err}");
}

#[test]
fn row_sink_keeps_every_row_on_disk_as_it_goes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("sweep.csv");
    let json = dir.path().join("sweep.json");
    let rows = common::fixture_rows();

    let mut sink = RowSink::create(&csv, Some(&json), "sink test").expect("create");
    // Before any row: a header-only CSV and an empty envelope, both readable.
    assert_eq!(read_path(&csv).expect("csv"), []);
    assert_eq!(read_path(&json).expect("json"), []);
    for (n, row) in rows.iter().take(5).enumerate() {
        sink.append(row.clone()).expect("append");
        // After each append, both files already hold every row so far.
        assert_eq!(read_path(&csv).expect("csv"), rows[..=n]);
        assert_eq!(read_path(&json).expect("json"), rows[..=n]);
    }
    assert!(!dir.path().join("sweep.json.tmp").exists());
    drop(sink);

    let err = RowSink::create(&csv, None, "again").expect_err("must not overwrite");
    assert!(matches!(err, ResultsError::AlreadyExists { .. }), "{err}");

    let mut sink = RowSink::resume(&csv, Some(&json), "resumed").expect("resume");
    assert_eq!(sink.rows(), &rows[..5]);
    sink.append(rows[5].clone()).expect("append after resume");
    assert_eq!(sink.into_rows(), rows[..6]);
    assert_eq!(read_path(&csv).expect("csv"), rows[..6]);
    let text = std::fs::read_to_string(&json).expect("json");
    assert_eq!(
        read_json(&text, "sweep.json").expect("json").generated_by,
        "resumed"
    );

    let mut invalid = rows[6].clone();
    invalid.status = RailStatus::Failed;
    let mut sink = RowSink::resume(&csv, None, "x").expect("resume");
    assert!(
        sink.append(invalid).is_err(),
        "failed row without error text"
    );
    assert_eq!(
        read_path(&csv).expect("csv").len(),
        6,
        "invalid row not written"
    );
}

#[test]
fn resuming_a_version_3_file_keeps_its_rows_and_adds_a_row_with_gpus() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("v3.csv");
    let rows = common::fixture_rows();
    // A version 3 file: the current layout less the four GPU columns, its rows' last.
    let mut buf = Vec::new();
    results::write_csv(&mut buf, &rows[..3]).expect("write");
    let current = String::from_utf8(buf).expect("utf-8");
    let gpu_columns = ",client_gpu,client_gpu_pcie_root,server_gpu,server_gpu_pcie_root";
    let v3: String = current
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let l = if i == 0 {
                l.strip_suffix(gpu_columns)
                    .expect("the GPU columns are last")
            } else {
                l.strip_suffix(",,,,").expect("no GPU in the fixture rows")
            };
            let l = match l.strip_prefix(&format!("{},", results::SCHEMA_VERSION)) {
                Some(rest) => format!("3,{rest}"),
                None => l.to_string(),
            };
            format!("{l}\n")
        })
        .collect();
    std::fs::write(&csv, &v3).expect("write");
    assert_eq!(read_path(&csv).expect("a version 3 file reads"), rows[..3]);

    let mut aligned = rows[3].clone();
    aligned.client_gpu = Some("gpu-1".into());
    aligned.client_gpu_pcie_root = Some("pci0000:0c".into());
    aligned.server_gpu = Some("gpu-6".into());
    aligned.server_gpu_pcie_root = Some("pci0000:cc".into());
    let json = dir.path().join("v3.json");
    let mut sink = RowSink::resume(&csv, Some(&json), "resumed").expect("resume");
    sink.append(aligned.clone()).expect("append");
    drop(sink);
    let text = std::fs::read_to_string(&csv).expect("csv");
    assert!(
        text.lines()
            .next()
            .is_some_and(|h| h.ends_with(gpu_columns)),
        "{text}"
    );
    let version = format!("{},", results::SCHEMA_VERSION);
    assert!(
        text.lines().skip(1).all(|l| l.starts_with(&version)),
        "{text}"
    );
    let mut want = rows[..3].to_vec();
    want.push(aligned);
    assert_eq!(read_path(&csv).expect("csv"), want);
    assert_eq!(read_path(&json).expect("json"), want);
}

#[test]
fn resuming_a_version_1_file_rewrites_it_in_the_current_schema_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("old.csv");
    // The fixture file itself is version 1; its first 4 rows, as an old railsweep left them.
    let fixture = std::fs::read_to_string(common::fixture_path("sweep-16x3.csv")).expect("fixture");
    let old: String = fixture.lines().take(5).map(|l| format!("{l}\n")).collect();
    std::fs::write(&csv, &old).expect("write");
    let rows = common::fixture_rows();
    let mut finding = rows[4].clone();
    finding.diagnosis = vec![results::rdmabw::counters::Finding {
        finding: results::rdmabw::counters::FindingKind::PacketLoss,
        summary: "lost".into(),
        evidence: Vec::new(),
        what_to_do: "look".into(),
    }];
    let mut sink = RowSink::resume(&csv, None, "resumed").expect("resume");
    sink.append(finding.clone()).expect("append");
    drop(sink);
    let text = std::fs::read_to_string(&csv).expect("csv");
    assert!(text
        .lines()
        .next()
        .is_some_and(|h| h.ends_with(
            ",error,diagnosis,counters,poll,cpu_s_per_gb,client_gpu,client_gpu_pcie_root,server_gpu,server_gpu_pcie_root"
        )));
    let current = format!("{},", results::SCHEMA_VERSION);
    assert!(
        text.lines().skip(1).all(|l| l.starts_with(&current)),
        "{text}"
    );
    let mut want = rows[..4].to_vec();
    want.push(finding);
    assert_eq!(read_path(&csv).expect("csv"), want);
    assert!(!dir.path().join("old.csv.tmp").exists());
}

#[test]
fn a_torn_last_row_is_reported_not_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("sweep.csv");
    let rows = common::fixture_rows();
    let mut sink = RowSink::create(&csv, None, "t").expect("create");
    for row in &rows[..3] {
        sink.append(row.clone()).expect("append");
    }
    drop(sink);
    // Simulate a crash in the middle of writing row 4.
    let mut bytes = std::fs::read(&csv).expect("read");
    let mut line = Vec::new();
    write_csv(&mut line, &rows[3..4]).expect("row");
    let row_only = line.split(|b| *b == b'\n').nth(1).expect("data line");
    bytes.extend_from_slice(&row_only[..row_only.len() / 2]);
    std::fs::write(&csv, bytes).expect("write");
    let err = read_path(&csv).expect_err("torn row");
    let msg = err.to_string();
    assert!(msg.contains("sweep.csv:5:"), "{msg}");
}

#[test]
fn report_rejects_the_same_rail_twice_in_one_run() {
    let mut rows = common::fixture_rows();
    rows.push(rows[3].clone());
    let err = Report::new("t", rows).comparison().expect_err("duplicate");
    assert!(err.to_string().contains("rail 3"), "{err}");
}
