#![allow(clippy::unwrap_used)]

use super::*;
use crate::record::NetworkMode;

fn row(mode: NetworkMode, rail: u32, bw: f64) -> RailResult {
    let text = format!(
        "schema_version,run_id,time_utc,network_mode,cluster,client_pod,client_node,server_pod,server_node,rail,client_interface,client_rdma_device,client_gid_index,server_interface,server_rdma_device,server_gid_index,traffic_class,mtu_bytes,msg_size_bytes,qps,duration_s,iterations,memory,status,bw_avg_gbps,bw_peak_gbps,msg_rate_mpps,bw_p1_gbps,bw_p50_gbps,bw_p99_gbps,line_rate_gbps,line_rate_pct,threshold_gbps,error\n\
         1,run-{mode},2025-06-01T10:00:00Z,{mode},c,,node-a,,node-b,{rail},net{rail},mlx5_{rail},3,net{rail},mlx5_{rail},3,41,4096,65536,4,10.0002,,host,ok,{bw},,,,,,100.0,,,\n"
    );
    crate::read_csv(text.as_bytes(), "t.csv")
        .expect("row")
        .remove(0)
}

fn rows(rails: u32, modes: &[NetworkMode]) -> Vec<RailResult> {
    modes
        .iter()
        .flat_map(|m| (0..rails).map(move |r| row(m.clone(), r, 96.87 - f64::from(r) / 10.0)))
        .collect()
}

fn svg(rows: Vec<RailResult>) -> String {
    let report = Report::new("t", rows);
    String::from_utf8(SvgExporter::default().serialize(&report).expect("renders")).expect("utf-8")
}

/// The number in the attribute value that starts at byte `at` of `svg`.
fn number_at(svg: &str, at: usize) -> u32 {
    svg[at..]
        .split('"')
        .next()
        .unwrap()
        .parse()
        .expect("a number")
}

/// The `width="N"` of the document.
fn width(svg: &str) -> u32 {
    number_at(svg, svg.find("width=\"").expect("a width") + 7)
}

/// The x of the text element that says `text` exactly.
fn text_x(svg: &str, text: &str) -> u32 {
    let end = svg
        .find(&format!(">\n{text}\n</text>"))
        .unwrap_or_else(|| panic!("no text {text}: {svg}"));
    let start = svg[..end].rfind("<text").expect("a text element");
    number_at(svg, svg[start..end].find(" x=\"").expect("x") + start + 4)
}

/// The 16-rail, 4-mode chart of a post: one rail slow (below a 90 Gb/s threshold), one
/// nearly idle (0.04 Gb/s), one failed.
fn post_rows() -> Vec<RailResult> {
    let modes = [
        NetworkMode::HostNetwork,
        NetworkMode::Ipvlan,
        NetworkMode::Sriov,
        NetworkMode::Other("dra".into()),
    ];
    let mut rows = rows(16, &modes);
    rows[5].bw_avg_gbps = Some(88.7);
    rows[21].bw_avg_gbps = Some(0.04);
    rows[40].status = RailStatus::Failed;
    rows[40].bw_avg_gbps = None;
    rows[40].error = Some("no GID".into());
    rows
}

fn layout(report: &Report) -> (String, Layout) {
    ensure_font().unwrap();
    let mut doc = String::new();
    let layout = SvgExporter::default()
        .draw_layout(report, &mut doc)
        .expect("renders");
    (doc, layout)
}

#[test]
fn sixteen_rails_of_four_modes_read_at_1200_pixels() {
    let report = Report::new("t", post_rows()).with_threshold(Some(90.0));
    let (doc, layout) = layout(&report);
    assert_eq!(width(&doc), 1200, "the width a blog shows");
    assert_eq!(layout.width, 1200);
    assert_eq!(layout.panels, 2, "16 rails wrap into two panels of 8");
    // Every measured bar has its label: 64 bars less the failed one.
    assert_eq!(layout.labels.len(), 63);
    for (i, a) in layout.labels.iter().enumerate() {
        assert!(
            a.x0 >= 0 && a.y0 >= 0 && a.x1 <= 1200 - i32::try_from(LEGEND_PX).unwrap(),
            "{a:?} leaves the plot"
        );
        assert!(
            a.y1 <= i32::try_from(layout.height).unwrap(),
            "{a:?} below the image"
        );
        for b in &layout.labels[i + 1..] {
            assert!(!a.overlaps(b), "{a:?} overlaps {b:?}");
        }
        for line in &layout.lines {
            assert!(!a.crossed_by(line), "{line:?} crosses {a:?}");
        }
    }
    // Two lines (line rate, threshold) in each panel.
    assert_eq!(layout.lines.len(), 4);
    // Two significant digits: 0.04 Gb/s does not read 0.0.
    assert!(doc.contains(">\n0.040\n</text>"), "{doc}");
    assert!(doc.contains(">\n89\n</text>"), "{doc}");
    assert!(!doc.contains(">\n0.0\n</text>"), "{doc}");
    // Each mark the chart uses has its legend entry.
    for entry in [
        "hostnetwork",
        "dra",
        "line rate 100.0 Gb/s",
        "threshold 90.0 Gb/s",
        "below threshold",
        "failed rail",
    ] {
        assert!(
            layout.legend.iter().any(|e| e == entry),
            "{entry}: {:?}",
            layout.legend
        );
    }
}

#[test]
fn a_label_just_under_a_line_is_lifted_clear_of_it() {
    // 99.5 Gb/s: its label would sit on the 100 Gb/s line rate.
    let mut rows = rows(4, &[NetworkMode::HostNetwork]);
    rows[2].bw_avg_gbps = Some(99.5);
    let (_, layout) = layout(&Report::new("t", rows));
    let line = layout.lines[0];
    let lifted = layout
        .labels
        .iter()
        .find(|l| l.text == "100")
        .expect("label");
    assert!(lifted.y1 < line.y - GAP_PX, "{lifted:?} {line:?}");
}

#[test]
fn up_to_eight_rails_stay_in_one_panel_and_more_wrap_evenly() {
    let sizes = |n| {
        SvgExporter::panels(n)
            .iter()
            .map(std::ops::Range::len)
            .collect::<Vec<_>>()
    };
    assert_eq!(sizes(8), [8]);
    assert_eq!(sizes(9), [5, 4]);
    assert_eq!(sizes(12), [6, 6]);
    assert_eq!(sizes(16), [8, 8]);
    assert_eq!(sizes(17), [6, 6, 5]);
}

#[test]
fn title_and_width_are_the_users_and_a_width_too_narrow_is_refused() {
    let report =
        Report::new("t", rows(2, &[NetworkMode::HostNetwork])).with_chart(crate::ChartOptions {
            title: Some("Rails of <rack 3>".into()),
            width: Some(800),
        });
    let (doc, layout) = layout(&report);
    assert_eq!(width(&doc), 800);
    assert_eq!(layout.width, 800);
    assert!(doc.contains("Rails of &lt;rack 3&gt;"), "{doc}");
    let narrow =
        Report::new("t", rows(2, &[NetworkMode::HostNetwork])).with_chart(crate::ChartOptions {
            title: None,
            width: Some(300),
        });
    let e = SvgExporter::default()
        .serialize(&narrow)
        .expect_err("too narrow");
    assert!(e.to_string().contains("width of 480 or more"), "{e}");
}

#[test]
fn two_significant_digits_keep_the_whole_part() {
    assert_eq!(super::significant(96.87), "97");
    assert_eq!(super::significant(0.04), "0.040");
    assert_eq!(super::significant(0.0437), "0.044");
    assert_eq!(super::significant(5.25), "5.2");
    assert_eq!(super::significant(140.2), "140");
    assert_eq!(super::significant(0.0), "0");
    // Tables keep their decimals, and more where a value would read as zero.
    assert_eq!(crate::fmt_number(96.871, 2), "96.87");
    assert_eq!(crate::fmt_number(0.0043, 2), "0.0043");
    assert_eq!(crate::fmt_number(0.37, 2), "0.37");
}

#[test]
fn each_bar_says_its_value_and_the_legend_stands_beside_the_data() {
    let modes = [NetworkMode::HostNetwork, NetworkMode::Sriov];
    let doc = svg(rows(4, &modes));
    // Four rails of two bars each (96.87 to 96.57): every value written, two digits.
    assert_eq!(doc.matches(">\n97\n</text>").count(), 8, "{doc}");
    // The legend's entries stand right of the plot, in the legend's own column.
    let w = width(&doc);
    for entry in ["hostnetwork", "sriov", "line rate 100.0 Gb/s"] {
        assert!(text_x(&doc, entry) > w - LEGEND_PX, "{entry}: {doc}");
    }
}

#[test]
fn the_subtitle_says_the_settings_and_soft_roce_only_when_the_rows_say_so() {
    let mut measured = rows(2, &[NetworkMode::HostNetwork]);
    let doc = svg(measured.clone());
    assert!(
        doc.contains(">\n64 KiB writes, 4 QPs, traffic class 41, 10 s windows, MTU 4096\n</text>"),
        "{doc}"
    );
    assert!(!doc.contains("Soft-RoCE"), "{doc}");
    for r in &mut measured {
        r.software_rdma = Some(true);
    }
    let doc = svg(measured.clone());
    assert!(
        doc.contains("MTU 4096, Soft-RoCE (emulated): not a NIC"),
        "{doc}"
    );
    measured[1].software_rdma = Some(false);
    assert!(svg(measured).contains("1 of 2 rows on Soft-RoCE (emulated)"));
}
