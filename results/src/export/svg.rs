//! SVG: a grouped bar chart, one bar per rail and mode.

use std::collections::BTreeSet;

use plotters::prelude::*;

use super::Exporter;
use crate::charts::{ensure_font, FONT};
use crate::error::{Result, ResultsError};
use crate::record::{RailResult, RailStatus};
use crate::summary::{fmt_threshold, size_text, Report};

/// Bar colours, one per series, cycling (Tableau 10).
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(214, 39, 40),
];
const FAILED: RGBColor = RGBColor(214, 39, 40);
const THRESHOLD: RGBColor = RGBColor(230, 85, 13);
/// Bar chart of average bandwidth: rails along x, one bar per mode side by side within each
/// rail, each bar's value over it (and the rail's p99 latency when it was measured: railsweep
/// `--test bw,lat`), dashed reference lines at each line rate (black) and at the threshold
/// (orange), a red cross where a rail failed; a title naming the modes, a subtitle with the
/// settings the rows were measured with (and "Soft-RoCE (emulated)" when the rows say their
/// RDMA devices were software ones), and the legend beside the chart, outside the data. The
/// image grows with the number of rails and modes: the size given is its smallest.
#[derive(Debug, Clone, Copy)]
pub struct SvgExporter {
    /// Smallest image width in pixels.
    pub width: u32,
    /// Image height in pixels.
    pub height: u32,
}

impl Default for SvgExporter {
    fn default() -> Self {
        SvgExporter {
            width: 900,
            height: 600,
        }
    }
}

impl Exporter for SvgExporter {
    fn serialize(&self, report: &Report) -> Result<Vec<u8>> {
        ensure_font()?;
        let mut svg = String::new();
        self.draw(report, &mut svg)?;
        svg.push('\n');
        Ok(svg.into_bytes())
    }
}

/// Text from a results file as a label ([`super::escape::svg`]; the backend escapes `<`,
/// `>`, `&` and quotes itself).
fn label(text: &str) -> String {
    super::escape::svg(text)
}

fn chart_err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> ResultsError {
    ResultsError::export("svg", e)
}

#[allow(clippy::cast_precision_loss)]
fn as_f64(n: usize) -> f64 {
    n as f64
}

/// The distinct values of one setting over the rows, in the order met, joined by `/`.
fn values<'r>(
    rows: impl Iterator<Item = &'r RailResult>,
    f: impl Fn(&RailResult) -> Option<String>,
) -> Option<String> {
    let seen = super::distinct_in_order(rows.filter_map(f));
    (!seen.is_empty()).then(|| seen.join("/"))
}

/// The subtitle: what the rows were measured with (sizes, QPs, traffic class, window, MTU,
/// memory), and whether the RDMA devices were emulated.
fn subtitle(rows: &[RailResult]) -> String {
    let measured = || rows.iter().filter(|r| r.status != RailStatus::Failed);
    let mut parts: Vec<String> = Vec::new();
    if let Some(v) = values(rows.iter(), |r| Some(size_text(r.msg_size_bytes))) {
        parts.push(format!("{v} writes"));
    }
    if let Some(v) = values(rows.iter(), |r| Some(r.qps.to_string())) {
        parts.push(format!("{v} QP{}", if v == "1" { "" } else { "s" }));
    }
    if rows.iter().any(|r| r.bidirectional) {
        parts.push("both directions".into());
    }
    parts.push(
        match values(rows.iter(), |r| r.traffic_class.map(|t| t.to_string())) {
            Some(v) => format!("traffic class {v}"),
            None => "no traffic class".into(),
        },
    );
    if let Some(v) = values(measured(), |r| r.duration_s.map(|d| format!("{d:.0} s"))) {
        parts.push(format!("{v} windows"));
    }
    if let Some(v) = values(rows.iter(), |r| r.mtu_bytes.map(|m| m.to_string())) {
        parts.push(format!("MTU {v}"));
    }
    if let Some(v) = values(rows.iter(), |r| Some(r.memory.to_string())) {
        if v != "host" {
            parts.push(format!("{v} memory"));
        }
    }
    let software = rows
        .iter()
        .filter(|r| r.software_rdma == Some(true))
        .count();
    if software > 0 {
        parts.push(if software == rows.len() {
            "Soft-RoCE (emulated): not a NIC's figures".into()
        } else {
            format!("{software} of {} rows on Soft-RoCE (emulated)", rows.len())
        });
    }
    parts.join(", ")
}

/// A bar's value label: its average to a tenth of a Gb/s, and the rail's p99 latency when
/// measured.
fn bar_text(row: &RailResult) -> Option<String> {
    let bw = row.bw_avg_gbps?;
    Some(match row.lat_p99_us {
        Some(p99) => format!("{bw:.1} · p99 {p99:.1} µs"),
        None => format!("{bw:.1}"),
    })
}

/// Pixels from the left of the image to the plot (the y labels) and to the right of it.
const Y_LABELS_PX: u32 = 64;
const MARGIN_PX: u32 = 16;
/// Width of the legend column, right of the chart.
const LEGEND_PX: u32 = 240;
/// Height of the title and subtitle band.
const HEAD_PX: u32 = 64;
/// Roughly the width of a character of the 12 px value labels.
const CHAR_PX: f64 = 7.0;

impl SvgExporter {
    /// The image's width for `rails` rails of `series` bars each: enough for a bar of at least
    /// 22 pixels, and never less than `self.width`.
    fn width_for(&self, rails: usize, series: usize) -> u32 {
        let group = u32::try_from(series.max(1) * 26 + 24)
            .unwrap_or(u32::MAX)
            .max(64);
        let plot = group.saturating_mul(u32::try_from(rails.max(1)).unwrap_or(u32::MAX));
        (plot + Y_LABELS_PX + 3 * MARGIN_PX + LEGEND_PX).max(self.width)
    }

    #[allow(clippy::too_many_lines)]
    fn draw(&self, report: &Report, svg: &mut String) -> Result<()> {
        let cmp = report.comparison()?;
        let n_rails = cmp.rails.len().max(1);
        let n_series = cmp.series.len().max(1);
        let width = self.width_for(cmp.rails.len(), cmp.series.len());
        let line_rates: BTreeSet<u64> = report
            .rows
            .iter()
            .filter_map(|r| r.line_rate_gbps)
            .map(f64::to_bits)
            .collect();
        let line_rates: Vec<f64> = line_rates.into_iter().map(f64::from_bits).collect();
        let summaries = cmp.summaries();
        let threshold = report.threshold_gbps.or_else(|| {
            let first = summaries.first().and_then(|s| s.threshold_gbps);
            summaries
                .iter()
                .all(|s| s.threshold_gbps == first)
                .then_some(first)
                .flatten()
        });
        let top = report
            .rows
            .iter()
            .filter_map(|r| r.bw_avg_gbps)
            .chain(line_rates.iter().copied())
            .chain(threshold)
            .fold(0.0_f64, f64::max);

        let title = if cmp.series.is_empty() {
            "RDMA bandwidth per rail".to_string()
        } else {
            let labels: Vec<String> = cmp.series.iter().map(|s| label(&s.label)).collect();
            format!("RDMA bandwidth per rail: {}", labels.join(" vs "))
        };

        let root = SVGBackend::with_string(svg, (width, self.height)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let (head, body) = root.split_vertically(HEAD_PX);
        let left = i32::try_from(MARGIN_PX).unwrap_or(16);
        head.draw(&Text::new(title, (left, 12), (FONT, 22).into_font()))
            .map_err(chart_err)?;
        head.draw(&Text::new(
            label(&subtitle(&report.rows)),
            (left, 42),
            (FONT, 15).into_font().color(&RGBColor(80, 80, 80)),
        ))
        .map_err(chart_err)?;
        let (plot_area, legend_area) = body.split_horizontally(width - LEGEND_PX);

        // The value labels: over each bar, or standing up when a bar is too narrow for them.
        let plot_px = f64::from(width - LEGEND_PX - Y_LABELS_PX - 2 * MARGIN_PX);
        let group = 0.8;
        let bar = group / as_f64(n_series);
        let bar_px = plot_px / as_f64(n_rails) * bar;
        let longest = report
            .rows
            .iter()
            .filter_map(bar_text)
            .map(|t| t.chars().count())
            .max()
            .unwrap_or(0);
        let text_px = as_f64(longest) * CHAR_PX;
        let upright = text_px > bar_px;
        // Head room above the highest bar or line for a level label (an upright one goes
        // inside a bar as tall as the highest).
        let body_px = f64::from(self.height - HEAD_PX - 64);
        let y_max = if top > 0.0 {
            top / (1.0 - 28.0 / body_px)
        } else {
            1.0
        };

        let x_range = -0.5..(as_f64(n_rails) - 0.5);
        let mut chart = ChartBuilder::on(&plot_area)
            .margin(MARGIN_PX)
            .x_label_area_size(40)
            .y_label_area_size(Y_LABELS_PX)
            .build_cartesian_2d(x_range.clone(), 0.0..y_max)
            .map_err(chart_err)?;

        let rails = cmp.rails.clone();
        let rail_label = move |x: &f64| -> String {
            let i = x.round();
            if (x - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let idx = i as usize;
            rails.get(idx).map(u32::to_string).unwrap_or_default()
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n_rails)
            .x_label_formatter(&rail_label)
            .y_labels(10)
            .x_desc("rail")
            .y_desc("average Gb/s")
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .draw()
            .map_err(chart_err)?;

        let mut failed_marks = Vec::new();
        let mut value_marks: Vec<(String, (f64, f64))> = Vec::new();
        for (s, _) in cmp.series.iter().enumerate() {
            let color = PALETTE[s % PALETTE.len()];
            let mut bars = Vec::new();
            for r in 0..cmp.rails.len() {
                let Some(row) = cmp.cell(r, s) else { continue };
                let x0 = as_f64(r) - group / 2.0 + as_f64(s) * bar;
                let x1 = x0 + bar;
                match (row.status, row.bw_avg_gbps) {
                    (RailStatus::Failed, _) | (_, None) => {
                        failed_marks.push(((x0 + x1) / 2.0, y_max * 0.02));
                    }
                    (_, Some(bw)) => {
                        bars.push(Rectangle::new([(x0, 0.0), (x1, bw)], color.filled()));
                        if let Some(text) = bar_text(row) {
                            value_marks.push((text, ((x0 + x1) / 2.0, bw)));
                        }
                    }
                }
            }
            chart.draw_series(bars).map_err(chart_err)?;
        }
        for rate in &line_rates {
            chart
                .draw_series(DashedLineSeries::new(
                    [(x_range.start, *rate), (x_range.end, *rate)],
                    10,
                    6,
                    BLACK.stroke_width(2),
                ))
                .map_err(chart_err)?;
        }
        if let Some(t) = threshold {
            chart
                .draw_series(DashedLineSeries::new(
                    [(x_range.start, t), (x_range.end, t)],
                    4,
                    4,
                    THRESHOLD.stroke_width(2),
                ))
                .map_err(chart_err)?;
        }
        // Value labels, centred on their bar: level over it, or upright (reading upwards) in
        // the bar's top in white where the bar is too narrow for them level and tall enough,
        // else upright over it.
        for (text, (x, y)) in value_marks {
            let (px, py) = chart.backend_coord(&(x, y));
            let bar_height = chart.backend_coord(&(x, 0.0)).1 - py;
            let chars = i32::try_from(text.chars().count()).unwrap_or(0);
            #[allow(clippy::cast_possible_truncation)]
            let text_len = (f64::from(chars) * CHAR_PX) as i32;
            let font = (FONT, 12).into_font();
            let element = if !upright {
                Text::new(text, (px - text_len / 2, py - 18), font)
            } else if bar_height > text_len + 12 {
                let white = font.color(&WHITE).transform(FontTransform::Rotate270);
                Text::new(text, (px - 7, py + 6 + text_len), white)
            } else {
                Text::new(
                    text,
                    (px - 7, py - 6),
                    font.transform(FontTransform::Rotate270),
                )
            };
            root.draw(&element).map_err(chart_err)?;
        }
        if !failed_marks.is_empty() {
            chart
                .draw_series(
                    failed_marks
                        .into_iter()
                        .map(|p| Cross::new(p, 6, FAILED.stroke_width(3))),
                )
                .map_err(chart_err)?;
        }

        // The legend, beside the chart.
        let mut y = 40;
        let entry = |y: i32, text: String| -> Result<()> {
            legend_area
                .draw(&Text::new(text, (34, y - 8), (FONT, 14).into_font()))
                .map_err(chart_err)
        };
        for (s, series) in cmp.series.iter().enumerate() {
            let color = PALETTE[s % PALETTE.len()];
            legend_area
                .draw(&Rectangle::new([(10, y - 6), (26, y + 6)], color.filled()))
                .map_err(chart_err)?;
            entry(y, label(&series.label))?;
            y += 24;
        }
        for rate in &line_rates {
            legend_area
                .draw(&PathElement::new([(8, y), (28, y)], BLACK.stroke_width(2)))
                .map_err(chart_err)?;
            entry(y, format!("line rate {} Gb/s", fmt_threshold(*rate)))?;
            y += 24;
        }
        if let Some(t) = threshold {
            legend_area
                .draw(&PathElement::new(
                    [(8, y), (28, y)],
                    THRESHOLD.stroke_width(2),
                ))
                .map_err(chart_err)?;
            entry(y, format!("threshold {} Gb/s", fmt_threshold(t)))?;
            y += 24;
        }
        if report
            .rows
            .iter()
            .any(|r| r.status == RailStatus::Failed || r.bw_avg_gbps.is_none())
        {
            legend_area
                .draw(&Cross::new((18, y), 5, FAILED.stroke_width(3)))
                .map_err(chart_err)?;
            entry(y, "failed rail".into())?;
        }
        root.present().map_err(chart_err)?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
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
        String::from_utf8(SvgExporter::default().serialize(&report).expect("renders"))
            .expect("utf-8")
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

    #[test]
    fn the_chart_grows_with_rails_and_modes_and_keeps_its_smallest_size() {
        let modes = [
            NetworkMode::HostNetwork,
            NetworkMode::Ipvlan,
            NetworkMode::Sriov,
            NetworkMode::Other("dra".into()),
        ];
        let small = width(&svg(rows(2, &modes[..1])));
        let big = width(&svg(rows(16, &modes)));
        assert_eq!(small, 900, "the smallest width");
        // 16 rails of 4 bars at 26 px and 24 px between rails, beside the axis and legend.
        assert_eq!(
            big,
            16 * (4 * 26 + 24) + Y_LABELS_PX + 3 * MARGIN_PX + LEGEND_PX
        );
    }

    #[test]
    fn each_bar_says_its_value_and_the_legend_stands_beside_the_data() {
        let modes = [NetworkMode::HostNetwork, NetworkMode::Sriov];
        let doc = svg(rows(4, &modes));
        // Four rails of two bars each: every value written, to a tenth of a Gb/s.
        for v in ["96.9", "96.8", "96.7", "96.6"] {
            assert_eq!(
                doc.matches(&format!(">\n{v}\n</text>")).count(),
                2,
                "{v}: {doc}"
            );
        }
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
            doc.contains(
                ">\n64 KiB writes, 4 QPs, traffic class 41, 10 s windows, MTU 4096\n</text>"
            ),
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
}
