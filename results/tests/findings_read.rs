//! A results CSV read back with its findings file beside it gives the rows the findings JSON
//! keeps: written by the real writers, read by the real readers, compared.

mod common;

use std::path::Path;

use results::rdmabw::counters::{Evidence, Finding, FindingKind};
use results::rdmabw::report::Role;
use results::{read_path, RailResult, RowSink};

use common::{evidence, rounded};

fn finding(kind: FindingKind, summary: &str, evidence: Vec<Evidence>) -> Finding {
    Finding {
        finding: kind,
        summary: summary.into(),
        evidence,
        what_to_do: format!("what to do about {}", kind.word()),
    }
}

/// A fleet's rows: two pairs on the same run, mode and rail (told apart by their nodes only),
/// each with a finding that rests on no counter, of the same kind and words; loss at both
/// ends on one, at one end on the other; findings out of the kinds' order; text a spreadsheet
/// would run as a formula; and a row without a finding between them.
fn fleet_rows() -> Vec<RailResult> {
    let base = common::fixture_rows()[1].clone();
    let pair = |client: &str, server: &str| {
        let mut r = base.clone();
        r.client_node = client.into();
        r.server_node = server.into();
        r
    };
    let mut a = pair("node-a", "=node-b");
    a.diagnosis = vec![
        finding(
            FindingKind::LinkFlap,
            "-1 carrier change",
            vec![evidence(Role::Server, "link_downed", 1, 0.1)],
        ),
        finding(
            FindingKind::PacketLoss,
            "packets were lost, retried 1.2e+03/s",
            vec![
                evidence(Role::Client, "packet_seq_err", 17, 1.7),
                evidence(Role::Server, "local_ack_timeout_err", 12_345, 1_234.567_891),
                evidence(Role::Server, "rnr_nak_retry_err", 3, 0.3),
            ],
        ),
        finding(FindingKind::NoTrafficClass, "no traffic class", Vec::new()),
    ];
    let clean = pair("node-e", "node-f");
    let mut c = pair("node-c", "node-d");
    c.diagnosis = vec![
        finding(
            FindingKind::PacketLoss,
            "packets were lost, retried 1.2e+03/s",
            vec![evidence(Role::Client, "packet_seq_err", 9, 0.9)],
        ),
        finding(FindingKind::NoTrafficClass, "no traffic class", Vec::new()),
    ];
    vec![a, clean, c]
}

fn write_files(dir: &Path, rows: &[RailResult]) -> std::path::PathBuf {
    let csv = dir.join("fleet.csv");
    let mut text = Vec::new();
    results::write_csv(&mut text, rows).expect("csv");
    std::fs::write(&csv, text).expect("write csv");
    let mut text = Vec::new();
    results::write_findings_csv(&mut text, rows).expect("findings");
    std::fs::write(results::findings_csv_path(&csv), text).expect("write findings");
    csv
}

#[test]
fn a_csv_with_its_findings_file_reads_back_to_the_rows_json_keeps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = fleet_rows();
    // Through the writers `railsweep report -o x.csv` uses.
    let csv = write_files(dir.path(), &rows);
    assert_eq!(read_path(&csv).expect("csv"), rounded(&rows));
    // Through the sink `railsweep run` and fleet append with, beside its JSON snapshot.
    let sunk = dir.path().join("sunk.csv");
    let json = dir.path().join("sunk.json");
    let mut sink = RowSink::create(&sunk, Some(&json), "t").expect("create");
    for r in &rows {
        sink.append(r.clone()).expect("append");
    }
    drop(sink);
    let from_json = read_path(&json).expect("json");
    assert_eq!(from_json, rows);
    assert_eq!(read_path(&sunk).expect("csv"), rounded(&from_json));
    // A sink resumed without its JSON (a fleet's --resume judges its culprits from these rows).
    let sink = RowSink::resume(&sunk, None, "t").expect("resume");
    assert_eq!(sink.rows(), rounded(&rows));
    drop(sink);
    // The lenient reader `railsweep report` and `explain` use, too.
    let text = std::fs::read_to_string(&sunk).expect("csv text");
    let read = results::read_file_lenient(&text, &sunk, u64::MAX).expect("lenient");
    assert_eq!(read.rows, rounded(&rows));
    assert_eq!(
        read.findings_file,
        Some(results::findings_csv_path(&sunk)),
        "names the findings file it read"
    );
}

#[test]
fn a_findings_file_naming_a_row_the_csv_lacks_is_an_error_at_its_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = fleet_rows();
    let csv = write_files(dir.path(), &rows);
    let findings = results::findings_csv_path(&csv);
    let text = std::fs::read_to_string(&findings).expect("findings");
    let name = findings.display();
    let cases = [
        // Another rail.
        (
            ",hostnetwork,1,link-flap,",
            ",hostnetwork,9,link-flap,",
            2,
            3,
            "no such row",
        ),
        // A finding the row's diagnosis cell does not name.
        (
            ",1,link-flap,server,",
            ",1,pfc-pause,server,",
            2,
            4,
            "`pfc-pause` is not in",
        ),
        // A node that is not the row's server.
        (
            ",server,'=node-b,",
            ",server,node-x,",
            2,
            6,
            "`node-x` on its server side",
        ),
        // Malformed: a delta that is no number, a side that is none, a word that is no finding.
        (
            ",link_downed,1,",
            ",link_downed,one,",
            2,
            9,
            "column `delta`",
        ),
        (
            ",1,link-flap,server,",
            ",1,link-flap,both,",
            2,
            5,
            "column `side`",
        ),
        (",1,link-flap,", ",1,flap,", 2, 4, "column `finding`"),
        // A line without a side, but a counter.
        (
            ",no-tclass,,,,,,,",
            ",no-tclass,,,,,7,,",
            6,
            9,
            "rests on no counter",
        ),
        // A header that is not a findings file's.
        (
            "run,mode,rail,",
            "run,mode,rails,",
            1,
            3,
            "not a findings file's",
        ),
    ];
    for (from, to, line, column, says) in cases {
        assert!(text.contains(from), "{from} in {text}");
        std::fs::write(&findings, text.replacen(from, to, 1)).expect("write");
        let e = read_path(&csv).expect_err(to).to_string();
        assert!(
            e.starts_with(&format!("{name}:{line}:{column}: ")) && e.contains(says),
            "{to}: {e}"
        );
    }
    // A torn last line (a crash while appending) names its line too.
    std::fs::write(&findings, format!("{text}x,hostnetwork")).expect("write");
    let e = read_path(&csv).expect_err("torn").to_string();
    assert!(e.starts_with(&format!("{name}:9:")), "{e}");
}

#[test]
fn a_findings_file_in_error_changes_no_row() {
    let rows = fleet_rows();
    let mut text = Vec::new();
    results::write_csv(&mut text, &rows).expect("csv");
    let mut read = results::read_csv(text.as_slice(), "f.csv").expect("csv");
    let before = read.clone();
    let mut findings = Vec::new();
    results::write_findings_csv(&mut findings, &rows).expect("findings");
    // The first lines are good; the last names a rail the CSV lacks.
    let bad = String::from_utf8(findings).expect("utf-8")
        + "sweep-0601-host,hostnetwork,7,loss,,,,,,,lost,look\n";
    let e = results::read_findings_csv(bad.as_bytes(), "f.findings.csv", &mut read)
        .expect_err("rail 7");
    assert!(e.to_string().starts_with("f.findings.csv:9:3: "), "{e}");
    assert_eq!(read, before, "no row has the good lines' findings");
}

#[test]
fn a_kind_without_lines_keeps_its_kind_alone_and_a_left_out_row_takes_its_lines_along() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = fleet_rows();
    let csv = write_files(dir.path(), &rows);
    // The last pair's lines gone, as after a crash between the CSV and the findings file.
    let findings = results::findings_csv_path(&csv);
    let text = std::fs::read_to_string(&findings).expect("findings");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[lines.len() - 2].contains(",node-c,"), "{text}");
    let kept: String = lines[..lines.len() - 2]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&findings, &kept).expect("write");
    let back = read_path(&csv).expect("reads");
    assert_eq!(back[0], rounded(&rows)[0]);
    let kinds: Vec<_> = back[2]
        .diagnosis
        .iter()
        .map(|f| (f.finding.word(), f.summary.as_str()))
        .collect();
    assert_eq!(kinds, [("loss", ""), ("no-tclass", "")]);

    // A row the lenient reader leaves out (a bandwidth of -1) takes its lines with it.
    std::fs::write(&findings, &text).expect("write");
    let csv_text = std::fs::read_to_string(&csv).expect("csv");
    let mut lines: Vec<String> = csv_text.lines().map(str::to_string).collect();
    let bw = lines[1].replacen(",96.86,", ",-1,", 1);
    assert_ne!(bw, lines[1], "the first row's bandwidth");
    lines[1] = bw;
    let broken = lines.join("\n") + "\n";
    let read = results::read_file_lenient(&broken, &csv, u64::MAX).expect("lenient");
    assert_eq!(read.left_out.len(), 1, "{:?}", read.left_out);
    assert_eq!(read.rows, rounded(&rows)[1..]);
}
