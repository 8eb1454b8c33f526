//! SVG: a grouped bar chart, one bar per rail and mode.

use std::collections::BTreeSet;

use plotters::prelude::*;

use super::Exporter;
use crate::charts::{ensure_font, FONT};
use crate::error::{Result, ResultsError};
use crate::record::RailStatus;
use crate::summary::{fmt_threshold, Report};

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
/// Bar chart of average bandwidth: rails along x, one bar per mode side by
/// side within each rail, a legend naming the modes, dashed reference lines at
/// each line rate (black) and at the threshold (orange), a red cross where
/// a rail failed, and a rail's p99 latency over its bar when it was measured
/// (railsweep `--test bw,lat`).
#[derive(Debug, Clone, Copy)]
pub struct SvgExporter {
    /// Image width in pixels.
    pub width: u32,
    /// Image height in pixels.
    pub height: u32,
}

impl Default for SvgExporter {
    fn default() -> Self {
        SvgExporter {
            width: 1200,
            height: 650,
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

/// Text from a results file as a label: its control characters (which XML 1.0 does not
/// allow: the document would not parse) as spaces. The backend escapes `<`, `>`, `&` and
/// quotes itself.
fn label(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn chart_err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> ResultsError {
    ResultsError::export("svg", e)
}

#[allow(clippy::cast_precision_loss)]
fn as_f64(n: usize) -> f64 {
    n as f64
}

impl SvgExporter {
    fn draw(&self, report: &Report, svg: &mut String) -> Result<()> {
        let cmp = report.comparison()?;
        let n_rails = cmp.rails.len().max(1);
        let n_series = cmp.series.len().max(1);
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
        // Head room above the highest bar or line for the legend.
        let y_max = if top > 0.0 { top * 1.35 } else { 1.0 };

        let title = if cmp.series.is_empty() {
            "RDMA bandwidth per rail".to_string()
        } else {
            let labels: Vec<String> = cmp.series.iter().map(|s| label(&s.label)).collect();
            format!("RDMA bandwidth per rail: {}", labels.join(" vs "))
        };

        let root = SVGBackend::with_string(svg, (self.width, self.height)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let x_range = -0.5..(as_f64(n_rails) - 0.5);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(64)
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
            .y_desc("Gb/s")
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .draw()
            .map_err(chart_err)?;

        let group = 0.8;
        let bar = group / as_f64(n_series);
        let mut failed_marks = Vec::new();
        let mut lat_marks: Vec<(String, (f64, f64))> = Vec::new();
        for (s, series) in cmp.series.iter().enumerate() {
            let color = PALETTE[s % PALETTE.len()];
            let mut bars = Vec::new();
            for r in 0..cmp.rails.len() {
                let Some(row) = cmp.cell(r, s) else { continue };
                let x0 = as_f64(r) - group / 2.0 + as_f64(s) * bar;
                let x1 = x0 + bar;
                if let Some(p99) = row.lat_p99_us {
                    let y = row.bw_avg_gbps.unwrap_or(0.0) + y_max * 0.02;
                    lat_marks.push((format!("p99 {p99:.1} µs"), (x0, y)));
                }
                match (row.status, row.bw_avg_gbps) {
                    (RailStatus::Failed, _) | (_, None) => {
                        failed_marks.push(((x0 + x1) / 2.0, y_max * 0.02));
                    }
                    (_, Some(bw)) => {
                        bars.push(Rectangle::new([(x0, 0.0), (x1, bw)], color.filled()));
                    }
                }
            }
            chart
                .draw_series(bars)
                .map_err(chart_err)?
                .label(label(&series.label))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())
                });
        }

        for rate in &line_rates {
            let rate = *rate;
            chart
                .draw_series(DashedLineSeries::new(
                    [(x_range.start, rate), (x_range.end, rate)],
                    10,
                    6,
                    BLACK.stroke_width(2),
                ))
                .map_err(chart_err)?
                .label(format!("line rate {} Gb/s", fmt_threshold(rate)))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], BLACK.stroke_width(2)));
        }
        if let Some(t) = threshold {
            chart
                .draw_series(DashedLineSeries::new(
                    [(x_range.start, t), (x_range.end, t)],
                    4,
                    4,
                    THRESHOLD.stroke_width(2),
                ))
                .map_err(chart_err)?
                .label(format!("threshold {} Gb/s", fmt_threshold(t)))
                .legend(|(x, y)| {
                    PathElement::new([(x, y), (x + 14, y)], THRESHOLD.stroke_width(2))
                });
        }
        if !lat_marks.is_empty() {
            chart
                .draw_series(
                    lat_marks
                        .into_iter()
                        .map(|(text, at)| Text::new(text, at, (FONT, 11).into_font())),
                )
                .map_err(chart_err)?;
        }
        if !failed_marks.is_empty() {
            chart
                .draw_series(
                    failed_marks
                        .into_iter()
                        .map(|p| Cross::new(p, 6, FAILED.stroke_width(3))),
                )
                .map_err(chart_err)?
                .label("failed rail")
                .legend(|(x, y)| Cross::new((x + 7, y), 5, FAILED.stroke_width(3)));
        }

        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()
            .map_err(chart_err)?;
        root.present().map_err(chart_err)?;
        Ok(())
    }
}
