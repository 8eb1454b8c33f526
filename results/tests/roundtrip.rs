//! Write, read back, compare: CSV, JSON, and the appending RowSink.

mod common;

use std::path::PathBuf;

use results::{
    read_csv, read_json, read_path, write_csv, write_json, Format, GroupCulprit, NetworkMode,
    RailResult, RailStatus, Report, ResultsError, RowSink, SCHEMA_VERSION,
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
fn csv_round_trip_keeps_six_significant_digits() {
    let rows = varied_rows();
    let mut buf = Vec::new();
    write_csv(&mut buf, &rows).expect("write");
    let back = read_csv(buf.as_slice(), "mem.csv").expect("read");
    // Every value of the fixture has fewer than 7 significant digits and reads back exactly;
    // 0.1 + 0.2 (0.30000000000000004) reads back as 0.3.
    let mut want = rows.clone();
    let odd = want.len() - 2;
    want[odd].bw_avg_gbps = Some(0.3);
    assert_eq!(back, want);
    let text = String::from_utf8(buf).expect("utf-8");
    assert!(!text.contains("0.30000000000000004"), "{text}");
}

#[test]
fn csv_numbers_carry_no_float_noise() {
    let mut row = common::fixture_rows().remove(0);
    row.bw_avg_gbps = Some(2.338_324_480_000_000_3);
    row.bw_peak_gbps = Some(96.869_999_999_999_99);
    row.msg_rate_mpps = Some(0.000_012_345_678_9);
    row.duration_s = Some(10.0);
    let mut buf = Vec::new();
    write_csv(&mut buf, &[row]).expect("write");
    let text = String::from_utf8(buf).expect("utf-8");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let cells: Vec<&str> = lines.next().expect("row").split(',').collect();
    let cell = |name: &str| cells[header.iter().position(|h| *h == name).expect(name)];
    assert_eq!(cell("bw_avg_gbps"), "2.33832");
    assert_eq!(cell("bw_peak_gbps"), "96.87");
    assert_eq!(cell("msg_rate_mpps"), "0.0000123457");
    assert_eq!(cell("duration_s"), "10.0");
    assert_eq!(cell("msg_size_bytes"), "65536");
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

/// A rack named as the culprit on rail 1, as `railsweep fleet --pattern topology` names it.
fn rack_r7() -> GroupCulprit {
    GroupCulprit {
        label: "example.com/rack".into(),
        value: "r7".into(),
        rail: 1,
        cross_pairs: 24,
        cross_median_gbps: 41.2,
        inside_pairs: 4,
        inside_median_gbps: 96.1,
        every_group: false,
    }
}

#[test]
fn a_fleets_group_culprits_travel_in_the_json_envelope_after_the_rows() {
    let rows = varied_rows();
    let mut report = Report::new("groups test", rows.clone());
    // Without one, the envelope has no such key (files of other runs are unchanged).
    let plain = Format::Json.exporter().serialize(&report).expect("json");
    let plain = String::from_utf8(plain).expect("utf-8");
    assert!(!plain.contains("group_culprits"), "{plain}");
    assert_eq!(
        read_json(&plain, "plain.json")
            .expect("read")
            .group_culprits,
        []
    );

    report.group_culprits = vec![rack_r7()];
    let text = Format::Json.exporter().serialize(&report).expect("json");
    let text = String::from_utf8(text).expect("utf-8");
    let back = read_json(&text, "groups.json").expect("read");
    assert_eq!(back.rows, rows);
    assert_eq!(back.group_culprits, [rack_r7()]);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(doc["group_culprits"][0]["label"], "example.com/rack");
    assert_eq!(doc["group_culprits"][0]["value"], "r7");
    assert_eq!(doc["group_culprits"][0]["cross_median_gbps"], 41.2);
    assert_eq!(
        rack_r7().to_string(),
        "group example.com/rack=r7: cross-group pairs slow on rail 1 (all 24, median 41.200 Gb/s), \
         inside pairs fine (4, median 96.100 Gb/s): suspect its uplink"
    );

    // A key a group does not have is refused, as in a row.
    let bad = text.replace("\"every_group\"", "\"every_groups\"");
    assert!(read_json(&bad, "bad.json").is_err());
}

#[test]
fn the_row_sinks_json_snapshot_takes_the_group_culprits_once_judged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (csv, json) = (dir.path().join("fleet.csv"), dir.path().join("fleet.json"));
    let rows = common::fixture_rows();
    let mut sink = RowSink::create(&csv, Some(&json), "sink test").expect("create");
    sink.append(rows[0].clone()).expect("append");
    sink.set_group_culprits(vec![rack_r7()]).expect("groups");
    let back =
        read_json(&std::fs::read_to_string(&json).expect("json"), "fleet.json").expect("read");
    assert_eq!(back.rows, rows[..1]);
    assert_eq!(back.group_culprits, [rack_r7()]);
    // The CSV is rows only.
    assert_eq!(read_path(&csv).expect("csv"), rows[..1]);
}

#[test]
fn files_round_trip_through_read_path_by_extension_and_by_content() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Values of six significant digits or fewer, which CSV keeps exactly.
    let mut rows = varied_rows();
    for row in &mut rows {
        row.bw_avg_gbps = row.bw_avg_gbps.map(|b| if b < 1.0 { 0.3 } else { b });
    }
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
    // A version 3 file: the current layout less the four GPU columns and the four
    // columns after them (latency, software_rdma), its rows' last.
    let mut buf = Vec::new();
    results::write_csv(&mut buf, &rows[..3]).expect("write");
    let current = String::from_utf8(buf).expect("utf-8");
    let gpu_columns = ",client_gpu,client_gpu_pcie_root,server_gpu,server_gpu_pcie_root";
    let lat_columns =
        ",lat_p50_us,lat_p99_us,lat_max_us,software_rdma,client_tool,server_tool,layer,evidence,fix,client_gpus_without_rail,server_gpus_without_rail";
    let v3: String = current
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let l = if i == 0 {
                l.strip_suffix(lat_columns)
                    .and_then(|l| l.strip_suffix(gpu_columns))
                    .expect("the GPU columns are last before the latency columns")
            } else {
                l.strip_suffix(",,,,,,,,,,,,,,,")
                    .expect("no GPU, no latency and no software_rdma in the fixture rows")
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
            .is_some_and(|h| h.ends_with(&format!("{gpu_columns}{lat_columns}"))),
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
            ",error,diagnosis,poll,cpu_s_per_gb,client_gpu,client_gpu_pcie_root,server_gpu,server_gpu_pcie_root,lat_p50_us,lat_p99_us,lat_max_us,software_rdma,client_tool,server_tool,layer,evidence,fix,client_gpus_without_rail,server_gpus_without_rail"
        )));
    let current = format!("{},", results::SCHEMA_VERSION);
    assert!(
        text.lines().skip(1).all(|l| l.starts_with(&current)),
        "{text}"
    );
    // The CSV keeps the finding's word; the findings file beside it the rest.
    assert!(
        text.lines().nth(5).is_some_and(|l| l.contains(",loss,")),
        "{text}"
    );
    let findings = std::fs::read_to_string(results::findings_csv_path(&csv)).expect("findings");
    assert_eq!(
        findings,
        format!(
            "{}\nsweep-0601-host,hostnetwork,4,loss,,,,,,,lost,look\n",
            results::FINDINGS_HEADER.join(",")
        )
    );
    // Read back with its findings file beside it, the row has its finding whole.
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

/// A row of `rows` with counters on both sides.
fn with_counters(mut row: RailResult) -> RailResult {
    use results::rdmabw::counters::{CounterDelta, CounterReport, CounterSource, CounterUnit};
    use results::rdmabw::report::Role;
    let side = |role, device: &str, cnps| CounterReport {
        role,
        device: device.into(),
        port: 1,
        netdev: Some("rdma0".into()),
        span_s: 12.5,
        read_ms: 3.25,
        counters_read: 140,
        deltas: vec![
            CounterDelta {
                source: CounterSource::Port,
                name: "port_xmit_data".into(),
                delta: 30_000_000_000,
                unit: CounterUnit::Words4,
            },
            CounterDelta {
                source: CounterSource::Hw,
                name: "np_cnp_sent".into(),
                delta: cnps,
                unit: CounterUnit::Packets,
            },
        ],
    };
    row.counters = vec![
        side(Role::Client, "mlx5_0", 0),
        side(Role::Server, "mlx5_9", 17),
    ];
    row
}

/// The fixture's rows, and a sink of sweep.csv and its JSON snapshot sweep.json in a new
/// directory that has appended the first of them: (the directory, the CSV, the JSON, the sink,
/// the rows).
fn sink_with_one_row() -> (
    tempfile::TempDir,
    PathBuf,
    PathBuf,
    RowSink,
    Vec<RailResult>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("sweep.csv");
    let json = dir.path().join("sweep.json");
    let rows = common::fixture_rows();
    let mut sink = RowSink::create(&csv, Some(&json), "t").expect("create");
    sink.append(rows[0].clone()).expect("append");
    (dir, csv, json, sink, rows)
}

#[test]
fn counters_leave_the_csv_for_a_long_file_beside_it_and_the_sink_keeps_them() {
    let (dir, csv, json, mut sink, rows) = sink_with_one_row();
    assert!(!sink.counters_path().exists(), "no counters, no file");
    sink.append(with_counters(rows[1].clone())).expect("append");
    drop(sink);

    let text = std::fs::read_to_string(&csv).expect("csv");
    assert!(
        !text.contains("counters") && !text.contains("np_cnp_sent"),
        "{text}"
    );
    let counters = dir.path().join("sweep.counters.csv");
    assert_eq!(
        std::fs::read_to_string(&counters).expect("counters file"),
        "run,mode,rail,side,node,device,source,name,delta,unit\n\
         sweep-0601-host,hostnetwork,1,client,gpu-node-01,mlx5_0,port,port_xmit_data,30000000000,words4\n\
         sweep-0601-host,hostnetwork,1,client,gpu-node-01,mlx5_0,hw,np_cnp_sent,0,packets\n\
         sweep-0601-host,hostnetwork,1,server,gpu-node-02,mlx5_9,port,port_xmit_data,30000000000,words4\n\
         sweep-0601-host,hostnetwork,1,server,gpu-node-02,mlx5_9,hw,np_cnp_sent,17,packets\n"
    );
    // JSON keeps them whole; resuming takes them from it, so the rewritten JSON loses nothing.
    let want = vec![rows[0].clone(), with_counters(rows[1].clone())];
    assert_eq!(read_path(&json).expect("json"), want);
    let mut sink = RowSink::resume(&csv, Some(&json), "t").expect("resume");
    assert_eq!(sink.rows(), &want[..]);
    sink.append(with_counters(rows[2].clone())).expect("append");
    drop(sink);
    let lines = std::fs::read_to_string(&counters).expect("counters file");
    assert_eq!(lines.lines().count(), 1 + 8, "{lines}");
    assert_eq!(lines.matches("run,mode").count(), 1, "{lines}");
    assert_eq!(read_path(&json).expect("json").len(), 3);
    assert_eq!(read_path(&json).expect("json")[1], want[1]);
}

#[test]
fn a_version_4_csv_with_its_counters_column_still_reads() {
    let row = with_counters(common::fixture_rows().remove(0));
    let mut buf = Vec::new();
    write_csv(&mut buf, std::slice::from_ref(&row)).expect("write");
    let text = String::from_utf8(buf).expect("utf-8");
    let mut lines = text.lines();
    let header = lines
        .next()
        .expect("header")
        .replace(",diagnosis,", ",diagnosis,counters,");
    let cells = serde_json::to_string(&row.counters).expect("json");
    let quoted = format!("\"{}\"", cells.replace('"', "\"\""));
    let body = lines.next().expect("row");
    // diagnosis is empty: the cell after `error`'s empty cell.
    let at = header
        .split(',')
        .position(|h| h == "counters")
        .expect("counters");
    let mut parts: Vec<String> = body.split(',').map(str::to_string).collect();
    parts[0] = "4".into();
    parts.insert(at, quoted);
    let v4 = format!("{header}\n{}\n", parts.join(","));
    let back = read_csv(v4.as_bytes(), "v4.csv").expect("a version 4 file reads");
    assert_eq!(back, vec![row]);
}

/// Issue 53, finding 4: the sink's JSON snapshot went to `NAME.tmp` beside it, opened like any
/// file: a symbolic link planted there had its target overwritten at every row. With links at
/// the names the old code used, the target is untouched and the snapshot holds the rows.
#[test]
fn the_json_snapshot_follows_no_link_planted_beside_it() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("tempdir");
    let (csv, json) = (dir.path().join("sweep.csv"), dir.path().join("sweep.json"));
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").expect("victim");
    for name in [
        "sweep.json.tmp".to_string(),
        format!("sweep.json.tmp-{}", std::process::id()),
    ] {
        symlink(&victim, dir.path().join(name)).expect("plant a link");
    }
    let rows = common::fixture_rows();
    let mut sink = RowSink::create(&csv, Some(&json), "sink test").expect("create");
    sink.append(rows[0].clone()).expect("append");
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "keep me");
    assert_eq!(read_path(&json).expect("json"), rows[..1]);
}

#[test]
fn a_sinks_rows_rewritten_with_their_verdicts_read_back_and_it_keeps_appending() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("fleet.csv");
    let json = dir.path().join("fleet.json");
    let rows = common::fixture_rows();
    let mut sink = RowSink::create(&csv, Some(&json), "sink test").expect("create");
    for r in &rows[..3] {
        sink.append(r.clone()).expect("append");
    }
    let blame = results::FleetBlame::Node {
        node: "gpu-node-02".into(),
        pct_of_fleet: Some(50.0),
    };
    sink.rewrite(|r| {
        if r.rail == 1 {
            r.judge(None, Some(&blame));
        }
    })
    .expect("rewrite");
    sink.append(rows[3].clone())
        .expect("append after the rewrite");
    drop(sink);
    for path in [&csv, &json] {
        let back = read_path(path).expect("reads back");
        assert_eq!(back.len(), 4, "{}", path.display());
        assert_eq!(
            back[1].layer,
            Some(results::Layer::Path),
            "{}",
            path.display()
        );
        assert_eq!(
            back[1].evidence.as_deref(),
            Some(
                "node gpu-node-02 is slow on rail 1 with every partner (50% of the fleet's median)"
            )
        );
        assert_eq!((back[0].layer, back[3].layer), (None, None));
    }
}

/// A row of `rows` with two findings, the first resting on a counter of each side.
fn with_findings(mut row: RailResult) -> RailResult {
    use common::evidence;
    use results::rdmabw::counters::{Finding, FindingKind};
    use results::rdmabw::report::Role;
    row.diagnosis = vec![
        Finding {
            finding: FindingKind::PacketLoss,
            summary: "packets were lost, retried 1.2e+03/s".into(),
            evidence: vec![
                evidence(Role::Client, "packet_seq_err", 17, 1.7),
                evidence(
                    Role::Server,
                    "local_ack_timeout_err",
                    12_345,
                    1_234.567_891_2,
                ),
            ],
            what_to_do: "look at the switch's drops".into(),
        },
        Finding {
            finding: FindingKind::LinkFlap,
            summary: "the carrier changed".into(),
            evidence: vec![evidence(Role::Server, "link_downed", 1, 0.1)],
            what_to_do: "reseat the cable".into(),
        },
    ];
    row
}

#[test]
fn findings_leave_the_csv_for_a_long_file_beside_it_and_json_keeps_them_whole() {
    let (dir, csv, json, mut sink, rows) = sink_with_one_row();
    assert!(
        !results::findings_csv_path(&csv).exists(),
        "no finding, no file"
    );
    sink.append(with_findings(rows[1].clone())).expect("append");
    drop(sink);

    // The CSV's cell holds the words alone.
    let text = std::fs::read_to_string(&csv).expect("csv");
    assert!(text.contains(",loss;link-flap,"), "{text}");
    assert!(
        !text.contains("packet_seq_err") && !text.contains('{'),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sweep.findings.csv")).expect("findings file"),
        "run,mode,rail,finding,side,node,source,counter,delta,per_s,summary,what_to_do\n\
         sweep-0601-host,hostnetwork,1,loss,client,gpu-node-01,hw,packet_seq_err,17,1.7,\"packets were lost, retried 1.2e+03/s\",look at the switch's drops\n\
         sweep-0601-host,hostnetwork,1,loss,server,gpu-node-02,hw,local_ack_timeout_err,12345,1234.57,\"packets were lost, retried 1.2e+03/s\",look at the switch's drops\n\
         sweep-0601-host,hostnetwork,1,link-flap,server,gpu-node-02,hw,link_downed,1,0.1,the carrier changed,reseat the cable\n"
    );
    // Read back, JSON and a resumed sink give the findings whole; the CSV too, with its
    // findings file, as rounded to the CSV's six significant digits.
    let want = vec![rows[0].clone(), with_findings(rows[1].clone())];
    assert_eq!(read_path(&json).expect("json"), want);
    assert_eq!(read_path(&csv).expect("csv"), common::rounded(&want));
    let sink = RowSink::resume(&csv, Some(&json), "t").expect("resume");
    assert_eq!(sink.rows(), &want[..]);
    // Without the findings file, the CSV gives the kinds alone.
    std::fs::remove_file(dir.path().join("sweep.findings.csv")).expect("remove");
    let kinds: Vec<_> = read_path(&csv).expect("csv")[1]
        .diagnosis
        .iter()
        .map(|f| (f.finding.word(), f.evidence.len(), f.summary.clone()))
        .collect();
    assert_eq!(
        kinds,
        [("loss", 0, String::new()), ("link-flap", 0, String::new())]
    );
}

#[test]
fn a_version_9_csv_with_the_findings_as_json_in_the_cell_still_reads_them_whole() {
    let row = with_findings(common::fixture_rows()[1].clone());
    let mut text = Vec::new();
    write_csv(&mut text, std::slice::from_ref(&row)).expect("csv");
    let text = String::from_utf8(text).expect("utf-8");
    let (header, line) = text.split_once('\n').expect("two lines");
    let json = serde_json::to_string(&row.diagnosis).expect("json");
    let cell = format!("\"{}\"", json.replace('"', "\"\""));
    let line = line
        .replacen(&format!("{SCHEMA_VERSION},"), "9,", 1)
        .replacen(",loss;link-flap,", &format!(",{cell},"), 1);
    let old = format!("{header}\n{line}");
    assert_eq!(
        read_csv(old.as_bytes(), "v9.csv").expect("reads"),
        vec![row]
    );
}
