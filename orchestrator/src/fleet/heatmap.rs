//! A node-by-node heatmap of one rail, as SVG: cell (i, j) is the latest average bandwidth of
//! the pair of nodes i and j on that rail, coloured against the rail's fleet median (green at
//! or above the outlier limit, orange to red below it, dark red with a cross where it failed,
//! grey where the pair was not measured).

use std::collections::BTreeMap;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use results::charts::{ensure_font, FONT};
use results::{RailResult, RailStatus};

use super::culprit::{self, Threshold};

fn colour(bw: f64, limit: Option<f64>, median: Option<f64>) -> RGBColor {
    match (limit, median) {
        (Some(l), _) if bw >= l => RGBColor(44, 160, 44),
        (Some(l), _) if l > 0.0 => {
            // From orange just under the limit to red at zero.
            let f = (bw / l).clamp(0.0, 1.0);
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let g = (40.0 + 110.0 * f) as u8;
            RGBColor(230, g, 20)
        }
        _ => RGBColor(160, 160, 160),
    }
}

/// What a cell of a fleet heatmap can be, for the legend: its colour, whether it has the
/// cross of a failure, and what it means.
pub(super) struct CellKind {
    pub colour: RGBColor,
    pub cross: bool,
    pub text: &'static str,
}

/// The colour of a failed cell, which also has a white cross.
pub(super) const FAILED_CELL: RGBColor = RGBColor(120, 0, 0);

/// Height of [`draw_legend`]'s row of entries.
pub(super) const LEGEND_PX: i32 = 26;

/// A row of legend entries from `(x, y)`: for each kind a swatch as its cells are drawn and its
/// meaning, so that every colour and mark of the map is told (a failed cell included).
pub(super) fn draw_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    (x, y): (i32, i32),
    kinds: &[CellKind],
) -> Result<()> {
    let e = |e| anyhow!("heatmap legend: {e}");
    let font = (FONT, 12).into_font();
    let mut x = x;
    for k in kinds {
        root.draw(&Rectangle::new(
            [(x, y), (x + 16, y + 14)],
            k.colour.filled(),
        ))
        .map_err(e)?;
        if k.cross {
            for (p, q) in [
                ((x + 2, y + 2), (x + 14, y + 12)),
                ((x + 14, y + 2), (x + 2, y + 12)),
            ] {
                root.draw(&PathElement::new(vec![p, q], WHITE)).map_err(e)?;
            }
        }
        root.draw(&Text::new(k.text, (x + 20, y + 1), font.clone()))
            .map_err(e)?;
        let (w, _) = root
            .estimate_text_size(k.text, &font.clone().into())
            .map_err(e)?;
        x += 20 + i32::try_from(w).unwrap_or(0) + 18;
    }
    Ok(())
}

/// The SVG heatmap of `rail` over `nodes` (the fleet's node order).
pub fn heatmap(nodes: &[String], rows: &[RailResult], rail: u32, t: Threshold) -> Result<String> {
    ensure_font()?;
    let medians = culprit::rail_medians(rows);
    let index: BTreeMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let n = nodes.len();
    let cell: i32 = i32::try_from((900 / n.max(1)).clamp(6, 60)).unwrap_or(6);
    let label_w: i32 = 110;
    let top: i32 = 60;
    let side = i32::try_from(n).unwrap_or(0) * cell;
    // Room below the map for the legend, whose four entries need about 560 px in a row.
    let (w, h) = (
        (label_w + side + 20).max(600),
        top + label_w + side + 20 + LEGEND_PX,
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w.unsigned_abs(), h.unsigned_abs()))
            .into_drawing_area();
        let e = |e| anyhow!("heatmap: {e}");
        root.fill(&WHITE).map_err(e)?;
        let title = match medians.get(&rail) {
            Some(m) => format!("rail {rail}: average Gb/s per pair (fleet median {m:.3})"),
            None => format!("rail {rail}: no pair measured"),
        };
        root.draw(&Text::new(title, (10, 15), (FONT, 16).into_font()))
            .map_err(e)?;
        let y0 = top + label_w;
        let small = (FONT, (cell - 2).clamp(6, 12)).into_font();
        for (i, name) in nodes.iter().enumerate() {
            let i = i32::try_from(i).unwrap_or(0);
            if cell >= 8 {
                let name = results::escape::svg(name);
                root.draw(&Text::new(
                    name.clone(),
                    (4, y0 + i * cell + cell / 4),
                    small.clone(),
                ))
                .map_err(e)?;
                root.draw(&Text::new(
                    name,
                    (label_w + i * cell + cell / 4, top + label_w - 4),
                    small.clone().transform(FontTransform::Rotate270),
                ))
                .map_err(e)?;
            }
            for j in 0..i32::try_from(n).unwrap_or(0) {
                let (x, y) = (label_w + j * cell, y0 + i * cell);
                root.draw(&Rectangle::new(
                    [(x, y), (x + cell - 1, y + cell - 1)],
                    RGBColor(235, 235, 235).filled(),
                ))
                .map_err(e)?;
            }
        }
        for r in culprit::latest(rows).values().filter(|r| r.rail == rail) {
            let (a, b) = culprit::row_nodes(r);
            let (Some(&i), Some(&j)) = (index.get(a.as_str()), index.get(b.as_str())) else {
                continue;
            };
            let failed = r.status == RailStatus::Failed || r.bw_avg_gbps.is_none();
            let bw = r.bw_avg_gbps.unwrap_or(0.0);
            let c = if failed {
                FAILED_CELL
            } else {
                colour(
                    bw,
                    culprit::limit_of(r, &medians, t),
                    medians.get(&rail).copied(),
                )
            };
            for (p, q) in [(i, j), (j, i)] {
                let (p, q) = (i32::try_from(p).unwrap_or(0), i32::try_from(q).unwrap_or(0));
                let (x, y) = (label_w + q * cell, y0 + p * cell);
                root.draw(&Rectangle::new(
                    [(x, y), (x + cell - 1, y + cell - 1)],
                    c.filled(),
                ))
                .map_err(e)?;
                if failed && cell >= 8 {
                    root.draw(&PathElement::new(
                        vec![(x + 2, y + 2), (x + cell - 3, y + cell - 3)],
                        WHITE,
                    ))
                    .map_err(e)?;
                    root.draw(&PathElement::new(
                        vec![(x + cell - 3, y + 2), (x + 2, y + cell - 3)],
                        WHITE,
                    ))
                    .map_err(e)?;
                } else if cell >= 40 {
                    root.draw(&Text::new(
                        results::fmt_number(bw, 2),
                        (x + 3, y + cell / 2 - 5),
                        small.clone().color(&WHITE),
                    ))
                    .map_err(e)?;
                }
            }
        }
        draw_legend(
            &root,
            (10, y0 + side + 12),
            &[
                CellKind {
                    colour: RGBColor(44, 160, 44),
                    cross: false,
                    text: "at or above the outlier limit",
                },
                CellKind {
                    colour: RGBColor(230, 95, 20),
                    cross: false,
                    text: "below it",
                },
                CellKind {
                    colour: FAILED_CELL,
                    cross: true,
                    text: "failed",
                },
                CellKind {
                    colour: RGBColor(235, 235, 235),
                    cross: false,
                    text: "not measured",
                },
            ],
        )?;
        root.present().map_err(e)?;
    }
    svg.push('\n');
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::row;

    #[test]
    fn heatmap_marks_the_failed_pair() {
        let nodes: Vec<String> = ["a", "b", "c"].iter().map(|s| (*s).to_string()).collect();
        let rows = vec![
            row("a", "b", 0, Some(1.0)),
            row("b", "c", 0, None),
            row("a", "c", 0, Some(1.0)),
        ];
        let svg = heatmap(&nodes, &rows, 0, Threshold::default()).expect("a heatmap");
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("rail 0"));
        assert!(svg.contains("#780000") || svg.contains("rgb(120,0,0)") || svg.contains("120"));
        // The legend tells every kind of cell, the failed one included.
        for entry in [">\nfailed\n<", ">\nnot measured\n<", ">\nbelow it\n<"] {
            assert!(svg.contains(entry), "no legend entry {entry}: {svg}");
        }
    }
}
