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
/// rail, each bar's value over it to two significant digits (and the rail's p99 latency when
/// it was measured: railsweep `--test bw,lat`), dashed reference lines at each line rate
/// (black) and at the threshold (orange) that no value label crosses, a bar below the
/// threshold hatched and pale, a red cross where a rail failed; a title naming the modes (or
/// the report's [`crate::ChartOptions::title`]), a subtitle with the settings the rows were
/// measured with (and "Soft-RoCE (emulated)" when the rows say their RDMA devices were
/// software ones), and the legend beside the chart, outside the data, with an entry for each
/// mark used. The width is fixed (the report's [`crate::ChartOptions::width`], else
/// `width`); past [`RAILS_PER_PANEL`] rails, the rails wrap into panels stacked one under
/// the other, each `height` less the title band tall.
#[derive(Debug, Clone, Copy)]
pub struct SvgExporter {
    /// Image width in pixels, unless the report asks for another.
    pub width: u32,
    /// Image height in pixels for one panel of rails.
    pub height: u32,
}

impl Default for SvgExporter {
    fn default() -> Self {
        SvgExporter {
            width: 1200,
            height: 560,
        }
    }
}

/// The most rails one panel holds: more wrap into panels of as even a number as can be.
pub const RAILS_PER_PANEL: usize = 8;

/// The narrowest chart the layout allows: the y labels, the legend and a little room for bars.
pub const MIN_WIDTH: u32 = 480;

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

/// A bar's value label: its average to two significant digits, and the rail's p99 latency
/// when measured.
fn bar_text(row: &RailResult) -> Option<String> {
    let bw = row.bw_avg_gbps?;
    Some(match row.lat_p99_us {
        Some(p99) => format!("{} · p99 {} µs", significant(bw), significant(p99)),
        None => significant(bw),
    })
}

/// An axis tick: whole numbers without a fraction (`0`, `20`, `100`), others as short as
/// they read (`2.5`).
fn axis_number(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        let text = format!("{v:.3}");
        text.trim_end_matches('0').to_string()
    }
}

/// `x` to two significant digits, all of its whole part kept (`97`, `5.2`, `0.040`, `140`).
pub(crate) fn significant(x: f64) -> String {
    crate::summary::fmt_number(x, 0)
}

/// Pixels from the left of the image to the plot (the y labels) and to the right of it.
const Y_LABELS_PX: u32 = 64;
const MARGIN_PX: u32 = 16;
/// Width of the legend column, right of the chart.
const LEGEND_PX: u32 = 220;
/// Height of the title and subtitle band.
const HEAD_PX: u32 = 64;
/// Pixels of clearance kept between a value label and a bar, a line or another label.
const GAP_PX: i32 = 3;
/// The font size of the value labels.
const VALUE_FONT: u32 = 15;

/// A value label's box in image pixels, as laid out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LabelBox {
    pub text: String,
    pub x0: i32,
    pub y0: i32,
    pub x1: i32,
    pub y1: i32,
}

impl LabelBox {
    /// Whether two boxes share a pixel.
    #[cfg(test)]
    pub fn overlaps(&self, other: &LabelBox) -> bool {
        self.x0 < other.x1 && other.x0 < self.x1 && self.y0 < other.y1 && other.y0 < self.y1
    }

    /// Whether the horizontal line `line` passes through the box (with [`GAP_PX`] of room).
    pub fn crossed_by(&self, line: &HLine) -> bool {
        self.x0 < line.x1
            && line.x0 < self.x1
            && self.y0 - GAP_PX <= line.y
            && line.y <= self.y1 + GAP_PX
    }
}

/// A horizontal reference line (line rate, threshold) in image pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct HLine {
    pub y: i32,
    pub x0: i32,
    pub x1: i32,
}

/// Where everything went: what the tests check the chart's legibility on.
#[derive(Debug, Default)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Layout {
    pub width: u32,
    pub height: u32,
    pub panels: usize,
    pub labels: Vec<LabelBox>,
    pub lines: Vec<HLine>,
    pub legend: Vec<String>,
}

/// `color` mixed with white, `share` of white.
fn pale(color: RGBColor, share: f64) -> RGBColor {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let mix = |c: u8| (f64::from(c) * (1.0 - share) + 255.0 * share).round() as u8;
    RGBColor(mix(color.0), mix(color.1), mix(color.2))
}

/// The hatch of a bar below the threshold: `/` strokes 6 px apart inside the box
/// `(l, t)`-`(r, b)`, each clipped to it.
fn hatch(l: i32, t: i32, r: i32, b: i32) -> Vec<[(i32, i32); 2]> {
    let mut strokes = Vec::new();
    let mut c = l + t + 3;
    while c < r + b {
        // The stroke x + y = c, where it lies inside the box.
        let x0 = (c - b).max(l);
        let x1 = (c - t).min(r);
        if x0 < x1 {
            strokes.push([(x0, c - x0), (x1, c - x1)]);
        }
        c += 6;
    }
    strokes
}

/// Move `label` up until no line in `lines` crosses it; false when it would leave the panel
/// (above `top`).
fn lift_clear_of(label: &mut LabelBox, lines: &[HLine], top: i32) -> bool {
    while let Some(line) = lines.iter().find(|l| label.crossed_by(l)) {
        let up = label.y1 - (line.y - GAP_PX - 1);
        label.y0 -= up;
        label.y1 -= up;
        if label.y0 < top {
            return false;
        }
    }
    true
}

impl SvgExporter {
    /// The rails of each panel: past [`RAILS_PER_PANEL`], as many panels as it takes, their
    /// rails as even in number as can be (16 rails: two of 8; 12: two of 6).
    fn panels(rails: usize) -> Vec<std::ops::Range<usize>> {
        let n = rails.div_ceil(RAILS_PER_PANEL).max(1);
        let per = rails.div_ceil(n).max(1);
        (0..n)
            .map(|p| (p * per).min(rails)..((p + 1) * per).min(rails))
            .collect()
    }

    fn draw(&self, report: &Report, svg: &mut String) -> Result<()> {
        self.draw_layout(report, svg).map(|_| ())
    }

    #[allow(clippy::too_many_lines)]
    pub(crate) fn draw_layout(&self, report: &Report, svg: &mut String) -> Result<Layout> {
        let cmp = report.comparison()?;
        let n_series = cmp.series.len().max(1);
        let width = report.chart.width.unwrap_or(self.width);
        if width < MIN_WIDTH {
            return Err(ResultsError::export(
                "svg",
                format!("a chart {width} pixels wide has no room for its bars; give a width of {MIN_WIDTH} or more"),
            ));
        }
        let panels = Self::panels(cmp.rails.len());
        let panel_px = self.height.saturating_sub(HEAD_PX).max(200);
        let height = HEAD_PX + panel_px * u32::try_from(panels.len()).unwrap_or(1);
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

        let title = match &report.chart.title {
            Some(t) => label(t),
            None if cmp.series.is_empty() => "RDMA bandwidth per rail".to_string(),
            None => {
                let labels: Vec<String> = cmp.series.iter().map(|s| label(&s.label)).collect();
                format!("RDMA bandwidth per rail: {}", labels.join(" vs "))
            }
        };

        let root = SVGBackend::with_string(svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let (head, body) = root.split_vertically(HEAD_PX);
        let left = i32::try_from(MARGIN_PX).unwrap_or(16);
        head.draw(&Text::new(title, (left, 12), (FONT, 26).into_font()))
            .map_err(chart_err)?;
        head.draw(&Text::new(
            label(&subtitle(&report.rows)),
            (left, 40),
            (FONT, 18).into_font().color(&RGBColor(80, 80, 80)),
        ))
        .map_err(chart_err)?;
        let (plots, legend_area) = body.split_horizontally(width - LEGEND_PX);
        let panel_areas = plots.split_evenly((panels.len(), 1));

        // Head room above the highest bar or line for a level label and a lifted one.
        let y_max = if top > 0.0 {
            top / (1.0 - 44.0 / f64::from(panel_px - 64))
        } else {
            1.0
        };
        let group = 0.8;
        let bar = group / as_f64(n_series);
        let font = (FONT, VALUE_FONT).into_font();
        let text_size = |text: &str| -> Result<(i32, i32)> {
            let style = TextStyle::from(font.clone());
            let (w, h) = root.estimate_text_size(text, &style).map_err(chart_err)?;
            Ok((
                i32::try_from(w).unwrap_or(i32::MAX),
                i32::try_from(h).unwrap_or(i32::MAX),
            ))
        };

        let mut layout = Layout {
            width,
            height,
            panels: panels.len(),
            ..Layout::default()
        };
        let mut any_below = false;
        let mut any_failed = false;
        for (rails, area) in panels.iter().zip(&panel_areas) {
            let n_rails = rails.len().max(1);
            let x_range = -0.5..(as_f64(n_rails) - 0.5);
            let mut chart = ChartBuilder::on(area)
                .margin(MARGIN_PX)
                .x_label_area_size(40)
                .y_label_area_size(Y_LABELS_PX)
                .build_cartesian_2d(x_range.clone(), 0.0..y_max)
                .map_err(chart_err)?;
            let names: Vec<u32> = cmp.rails[rails.clone()].to_vec();
            let rail_label = move |x: &f64| -> String {
                let i = x.round();
                if (x - i).abs() > 1e-6 || i < 0.0 {
                    return String::new();
                }
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let idx = i as usize;
                names.get(idx).map(u32::to_string).unwrap_or_default()
            };
            chart
                .configure_mesh()
                .disable_x_mesh()
                .light_line_style(TRANSPARENT)
                .x_labels(n_rails)
                .x_label_formatter(&rail_label)
                .y_labels(6)
                .y_label_formatter(&|v: &f64| axis_number(*v))
                .x_desc("rail")
                .y_desc("average Gb/s")
                .label_style((FONT, 16))
                .axis_desc_style((FONT, 18))
                .draw()
                .map_err(chart_err)?;

            // The bars, and where each one's value goes.
            let mut values: Vec<(String, f64, f64, bool)> = Vec::new();
            let mut failed_marks = Vec::new();
            for (s, _) in cmp.series.iter().enumerate() {
                let color = PALETTE[s % PALETTE.len()];
                for (i, r) in rails.clone().enumerate() {
                    let Some(row) = cmp.cell(r, s) else { continue };
                    let x0 = as_f64(i) - group / 2.0 + as_f64(s) * bar;
                    let x1 = x0 + bar;
                    match (row.status, row.bw_avg_gbps) {
                        (RailStatus::Failed, _) | (_, None) => {
                            failed_marks.push(((x0 + x1) / 2.0, y_max * 0.02));
                        }
                        (_, Some(bw)) => {
                            let below = report.is_below(row);
                            let (l, t) = chart.backend_coord(&(x0, bw));
                            let (r, b) = chart.backend_coord(&(x1, 0.0));
                            if below {
                                any_below = true;
                                root.draw(&Rectangle::new(
                                    [(l, t), (r, b)],
                                    pale(color, 0.65).filled(),
                                ))
                                .map_err(chart_err)?;
                                for stroke in hatch(l, t, r, b) {
                                    root.draw(&PathElement::new(stroke, color.stroke_width(2)))
                                        .map_err(chart_err)?;
                                }
                                root.draw(&Rectangle::new([(l, t), (r, b)], color.stroke_width(1)))
                                    .map_err(chart_err)?;
                            } else {
                                root.draw(&Rectangle::new([(l, t), (r, b)], color.filled()))
                                    .map_err(chart_err)?;
                            }
                            if let Some(text) = bar_text(row) {
                                values.push((text, (x0 + x1) / 2.0, bw, below));
                            }
                        }
                    }
                }
            }
            let mut lines = Vec::new();
            let (line_x0, _) = chart.backend_coord(&(x_range.start, 0.0));
            let (line_x1, plot_top) = chart.backend_coord(&(x_range.end, y_max));
            for rate in &line_rates {
                chart
                    .draw_series(DashedLineSeries::new(
                        [(x_range.start, *rate), (x_range.end, *rate)],
                        10,
                        6,
                        BLACK.stroke_width(2),
                    ))
                    .map_err(chart_err)?;
                lines.push(HLine {
                    y: chart.backend_coord(&(0.0, *rate)).1,
                    x0: line_x0,
                    x1: line_x1,
                });
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
                lines.push(HLine {
                    y: chart.backend_coord(&(0.0, t)).1,
                    x0: line_x0,
                    x1: line_x1,
                });
            }
            if !failed_marks.is_empty() {
                any_failed = true;
                chart
                    .draw_series(
                        failed_marks
                            .into_iter()
                            .map(|p| Cross::new(p, 6, FAILED.stroke_width(3))),
                    )
                    .map_err(chart_err)?;
            }

            // The value labels, centred on their bar: level over it when it fits the bar's
            // width, else upright (reading upwards), in the bar's top in
            // white when the bar is tall enough and not hatched, else over it. A label a line
            // would cross is lifted clear of it.
            let bar_px = {
                let (a, _) = chart.backend_coord(&(0.0, 0.0));
                let (b, _) = chart.backend_coord(&(bar, 0.0));
                b - a
            };
            for (text, x, y, below) in values {
                let (px, py) = chart.backend_coord(&(x, y));
                let bar_height = chart.backend_coord(&(x, 0.0)).1 - py;
                let (w, h) = text_size(&text)?;
                let upright = w + 2 * GAP_PX > bar_px;
                // A box `wide` by `tall` centred on the bar, its top at `top`.
                let boxed = |text: String, wide: i32, tall: i32, top: i32| {
                    let x0 = px - wide / 2;
                    LabelBox {
                        text,
                        x0,
                        y0: top,
                        x1: x0 + wide,
                        y1: top + tall,
                    }
                };
                let over = py - GAP_PX;
                let (mut at, inside) = if !upright {
                    (boxed(text, w, h, over - h), false)
                } else if bar_height > w + 4 * GAP_PX && !below {
                    (boxed(text, h, w, py + 2 * GAP_PX), true)
                } else {
                    (boxed(text, h, w, over - w), false)
                };
                let mut inside = inside;
                if inside && lines.iter().any(|l| at.crossed_by(l)) {
                    // A line through the bar's top: over the bar instead.
                    at.y0 = over - w;
                    at.y1 = over;
                    inside = false;
                }
                if !lift_clear_of(&mut at, &lines, plot_top) {
                    return Err(ResultsError::export(
                        "svg",
                        "no room for a value label clear of the reference lines",
                    ));
                }
                let element = if !upright {
                    Text::new(at.text.clone(), (at.x0, at.y0), font.clone())
                } else if inside {
                    let white = font.color(&WHITE).transform(FontTransform::Rotate270);
                    Text::new(at.text.clone(), (at.x0, at.y1), white)
                } else {
                    let turned = font.clone().transform(FontTransform::Rotate270);
                    Text::new(at.text.clone(), (at.x0, at.y1), turned)
                };
                root.draw(&element).map_err(chart_err)?;
                layout.labels.push(at);
            }
            layout.lines.extend(lines);
        }

        // The legend, beside the chart: an entry for each mark the chart uses.
        let mut y = 40;
        let mut entry = |y: i32, text: String| -> Result<()> {
            legend_area
                .draw(&Text::new(
                    text.clone(),
                    (34, y - 8),
                    (FONT, 17).into_font(),
                ))
                .map_err(chart_err)?;
            layout.legend.push(text);
            Ok(())
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
        if any_below {
            let grey = RGBColor(90, 90, 90);
            legend_area
                .draw(&Rectangle::new(
                    [(10, y - 6), (26, y + 6)],
                    pale(grey, 0.65).filled(),
                ))
                .map_err(chart_err)?;
            for stroke in hatch(10, y - 6, 26, y + 6) {
                legend_area
                    .draw(&PathElement::new(stroke, grey.stroke_width(2)))
                    .map_err(chart_err)?;
            }
            entry(y, "below threshold".into())?;
            y += 24;
        }
        if any_failed {
            legend_area
                .draw(&Cross::new((18, y), 5, FAILED.stroke_width(3)))
                .map_err(chart_err)?;
            entry(y, "failed rail".into())?;
        }
        root.present().map_err(chart_err)?;
        Ok(layout)
    }
}

#[cfg(test)]
mod tests;
