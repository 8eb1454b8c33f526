//! A fleet's results seen per node, for `railsweep report fleet.csv`: for each node and rail,
//! the best of the latest average bandwidths of the pairs the node joined (a node's rail is as
//! good as its best pair: a bad node is slow in every pair, the fleet's suspect rule), as a
//! percentage of that rail's fleet median. As a markdown table, and as an SVG heatmap of nodes x
//! rails with a colour scale.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use results::charts::{ensure_font, FONT};
use results::{escape, RailResult, RailStatus};

use super::culprit::{self, Threshold};

/// Whether `rows` hold a fleet: some run has one rail of one mode from more than one pair of
/// pods (a sweep or a comparison has one pair per run and mode).
pub fn is_fleet(rows: &[RailResult]) -> bool {
    let mut seen: BTreeMap<(&str, String, u32), (String, String)> = BTreeMap::new();
    for r in rows {
        let pair = culprit::row_nodes(r);
        let k = (r.run_id.as_str(), r.network_mode.to_string(), r.rail);
        match seen.get(&k) {
            Some(p) if *p != pair => return true,
            Some(_) => {}
            None => {
                seen.insert(k, pair);
            }
        }
    }
    false
}

/// Whether `rows` (one file's) hold some run's rail of one pair of pods more than once,
/// whichever way round: a fleet measures its outliers again and appends the new rows, so even
/// a fleet of two pods (one pair, which [`is_fleet`] cannot tell from a sweep) is a fleet.
/// Its report keeps the latest row of each pair's rail ([`culprit::latest`]).
pub fn remeasures(rows: &[RailResult]) -> bool {
    let mut seen = BTreeSet::new();
    rows.iter().any(|r| {
        let (a, b) = culprit::row_nodes(r);
        let pair = if a <= b { (a, b) } else { (b, a) };
        !seen.insert((r.run_id.as_str(), r.network_mode.to_string(), pair, r.rail))
    })
}

/// One node's rail.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NodeCell {
    /// The best latest average bandwidth of the node's pairs on the rail, Gb/s; `None` when
    /// every pair failed.
    pub best_gbps: Option<f64>,
    /// Pairs measured.
    pub pairs: usize,
    /// Of which failed.
    pub failed: usize,
}

/// A fleet per node and rail.
#[derive(Debug, Clone, Default)]
pub struct NodeRails {
    /// The nodes, sorted.
    pub nodes: Vec<String>,
    /// The rails, sorted.
    pub rails: Vec<u32>,
    /// Each (node, rail) measured.
    pub cells: BTreeMap<(String, u32), NodeCell>,
    /// Each rail's fleet median (of the pairs, failed ones left out), Gb/s.
    pub medians: BTreeMap<u32, f64>,
    /// The runs the rows came from.
    pub runs: BTreeSet<String>,
}

impl NodeRails {
    /// The per-node view of a fleet's rows (the latest row of each pair and rail counts).
    pub fn new(rows: &[RailResult]) -> NodeRails {
        let mut v = NodeRails {
            medians: culprit::rail_medians(rows),
            ..NodeRails::default()
        };
        let mut nodes = BTreeSet::new();
        let mut rails = BTreeSet::new();
        for r in culprit::latest(rows).values() {
            v.runs.insert(r.run_id.clone());
            rails.insert(r.rail);
            let (a, b) = culprit::row_nodes(r);
            let failed = r.status == RailStatus::Failed || r.bw_avg_gbps.is_none();
            for n in [a, b] {
                nodes.insert(n.clone());
                let c = v.cells.entry((n, r.rail)).or_default();
                c.pairs += 1;
                if failed {
                    c.failed += 1;
                } else {
                    let bw = r.bw_avg_gbps.unwrap_or(0.0);
                    c.best_gbps = Some(c.best_gbps.map_or(bw, |b| b.max(bw)));
                }
            }
        }
        v.nodes = nodes.into_iter().collect();
        v.rails = rails.into_iter().collect();
        v
    }

    /// A cell's percentage of its rail's median.
    pub fn pct(&self, node: &str, rail: u32) -> Option<f64> {
        let c = self.cells.get(&(node.to_string(), rail))?;
        let m = self.medians.get(&rail).filter(|m| **m > 0.0)?;
        c.best_gbps.map(|b| 100.0 * b / m)
    }

    /// Whether a cell is below `t`'s median rule (or failed in every pair).
    pub fn is_low(&self, node: &str, rail: u32, t: Threshold) -> bool {
        let pct_limit = match t {
            Threshold::MedianPct(p) | Threshold::LineRatePct(p) => p,
        };
        match self.cells.get(&(node.to_string(), rail)) {
            Some(c) if c.best_gbps.is_none() => true,
            Some(_) => self.pct(node, rail).is_some_and(|p| p < pct_limit),
            None => false,
        }
    }

    /// Markdown: nodes as rows, rails as columns, each cell the best pair's Gb/s and its
    /// percentage of the rail's median; low cells in bold.
    pub fn markdown(&self, t: Threshold) -> String {
        let mut s = String::new();
        // Node names and run ids came from the rows: escaped as every markdown text is.
        let runs: Vec<String> = self.runs.iter().map(|r| escape::markdown(r)).collect();
        let _ = writeln!(
            s,
            "# Fleet: {} nodes x {} rails (run {})\n",
            self.nodes.len(),
            self.rails.len(),
            runs.join(", ")
        );
        let _ = writeln!(
            s,
            "Each cell: the best average Gb/s of the node's pairs on that rail, and its percentage \
             of the rail's fleet median; **bold** below the outlier limit, `failed` when every \
             pair failed.\n"
        );
        let _ = write!(s, "| node |");
        for r in &self.rails {
            let _ = write!(s, " rail {r} |");
        }
        let _ = write!(s, "\n|---|");
        for _ in &self.rails {
            let _ = write!(s, "---:|");
        }
        s.push('\n');
        for n in &self.nodes {
            let _ = write!(s, "| {} |", escape::markdown(n));
            for &rail in &self.rails {
                let text = match self.cells.get(&(n.clone(), rail)) {
                    None => "-".to_string(),
                    Some(NodeCell {
                        best_gbps: None, ..
                    }) => "failed".to_string(),
                    Some(NodeCell {
                        best_gbps: Some(b), ..
                    }) => {
                        let cell = match self.pct(n, rail) {
                            Some(p) => format!("{b:.3} ({p:.0}%)"),
                            None => format!("{b:.3}"),
                        };
                        if self.is_low(n, rail, t) {
                            format!("**{cell}**")
                        } else {
                            cell
                        }
                    }
                };
                let _ = write!(s, " {text} |");
            }
            s.push('\n');
        }
        s.push('\n');
        for (rail, m) in &self.medians {
            let _ = writeln!(s, "rail {rail}: fleet median {m:.3} Gb/s");
        }
        s
    }

    /// Markdown: the pairs whose latest row has a verdict (failed, slow, or a finding against
    /// it), one line each with its status, the layer at fault and the evidence; nothing when
    /// none has.
    pub fn verdicts_markdown(rows: &[RailResult]) -> String {
        let latest = super::culprit::latest(rows);
        let judged: Vec<&RailResult> = latest
            .values()
            .copied()
            .filter(|r| r.layer.is_some() || r.status != RailStatus::Ok)
            .collect();
        if judged.is_empty() {
            return String::new();
        }
        let mut s = String::from(
            "\n## Verdicts\n\n| client | server | rail | Gb/s | status | layer | evidence |\n\
             |---|---|---:|---:|---|---|---|\n",
        );
        for r in judged {
            let (a, b) = (&r.client_node, &r.server_node);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                escape::markdown(a),
                escape::markdown(b),
                r.rail,
                r.bw_avg_gbps
                    .map_or_else(|| "-".into(), |b| format!("{b:.3}")),
                r.status,
                r.layer.map_or_else(|| "-".into(), |l| l.to_string()),
                escape::markdown(r.evidence.as_deref().or(r.error.as_deref()).unwrap_or("-"))
            );
        }
        s
    }

    /// The heatmap, nodes x rails, coloured by percentage of the rail's median on a scale
    /// drawn below it: green at or above the limit, orange to red below, dark red with a cross
    /// where every pair failed, grey where the node did not join the rail.
    pub fn svg(&self, t: Threshold) -> Result<String> {
        ensure_font()?;
        let limit = match t {
            Threshold::MedianPct(p) | Threshold::LineRatePct(p) => p,
        };
        let rows = i32::try_from(self.nodes.len()).unwrap_or(i32::MAX);
        let cols = i32::try_from(self.rails.len()).unwrap_or(i32::MAX);
        let cell_h: i32 = (700 / rows.max(1)).clamp(4, 28);
        let cell_w: i32 = (900 / cols.max(1)).clamp(24, 90);
        let (label_w, top, scale_h) = (130, 70, 70);
        // The colour scale is at least 400 px wide; the labels past its right end need 150.
        let span = (cols * cell_w).max(400);
        let (w, h) = (
            (label_w + span + 150).max(680),
            top + rows * cell_h + scale_h + 20 + super::heatmap::LEGEND_PX,
        );
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (w.unsigned_abs(), h.unsigned_abs()))
                .into_drawing_area();
            let e = |e| anyhow!("fleet heatmap: {e}");
            root.fill(&WHITE).map_err(e)?;
            let runs: Vec<String> = self.runs.iter().map(|r| escape::svg(r)).collect();
            root.draw(&Text::new(
                format!(
                    "Fleet: {} nodes x {} rails, best pair's Gb/s as % of the rail's median",
                    self.nodes.len(),
                    self.rails.len()
                ),
                (10, 12),
                (FONT, 16).into_font(),
            ))
            .map_err(e)?;
            root.draw(&Text::new(
                format!("run {}", runs.join(", ")),
                (10, 34),
                (FONT, 12).into_font(),
            ))
            .map_err(e)?;
            let small = (FONT, (cell_h - 2).clamp(6, 12)).into_font();
            for (j, rail) in self.rails.iter().enumerate() {
                let j = i32::try_from(j).unwrap_or(0);
                root.draw(&Text::new(
                    format!("rail {rail}"),
                    (label_w + j * cell_w + 2, top - 14),
                    (FONT, 11).into_font(),
                ))
                .map_err(e)?;
            }
            for (i, node) in self.nodes.iter().enumerate() {
                let y = top + i32::try_from(i).unwrap_or(0) * cell_h;
                if cell_h >= 8 {
                    root.draw(&Text::new(escape::svg(node), (4, y + 1), small.clone()))
                        .map_err(e)?;
                }
                for (j, &rail) in self.rails.iter().enumerate() {
                    let x = label_w + i32::try_from(j).unwrap_or(0) * cell_w;
                    let cell = self.cells.get(&(node.clone(), rail));
                    let pct = self.pct(node, rail);
                    let c = match (cell, pct) {
                        (None, _) => RGBColor(200, 200, 200),
                        (Some(c), _) if c.best_gbps.is_none() => super::heatmap::FAILED_CELL,
                        (Some(_), Some(p)) => colour(p, limit),
                        (Some(_), None) => RGBColor(200, 200, 200),
                    };
                    root.draw(&Rectangle::new(
                        [(x, y), (x + cell_w - 1, y + cell_h - 1)],
                        c.filled(),
                    ))
                    .map_err(e)?;
                    if cell.is_some_and(|c| c.best_gbps.is_none()) && cell_h >= 8 {
                        for (p, q) in [
                            ((x + 2, y + 2), (x + cell_w - 3, y + cell_h - 3)),
                            ((x + cell_w - 3, y + 2), (x + 2, y + cell_h - 3)),
                        ] {
                            root.draw(&PathElement::new(vec![p, q], WHITE)).map_err(e)?;
                        }
                    } else if let (Some(p), true) = (pct, cell_h >= 12 && cell_w >= 40) {
                        root.draw(&Text::new(
                            format!("{p:.0}%"),
                            (x + 4, y + 1),
                            small.clone().color(&WHITE),
                        ))
                        .map_err(e)?;
                    }
                }
            }
            // The colour scale: 0 % to 110 % of the median, the limit marked.
            let y = top + rows * cell_h + 24;
            let x0 = label_w;
            for k in 0..=110 {
                let x = x0 + span * k / 110;
                root.draw(&Rectangle::new(
                    [(x, y), (x + span / 110 + 1, y + 14)],
                    colour(f64::from(k), limit).filled(),
                ))
                .map_err(e)?;
            }
            for (k, text) in [
                (0.0, "0%".to_string()),
                (50.0, "50%".to_string()),
                (limit, format!("{limit:.0}% (outlier limit)")),
                (100.0, "100% = median".to_string()),
            ] {
                #[allow(clippy::cast_possible_truncation)]
                let x = x0 + (f64::from(span) * k / 110.0) as i32;
                root.draw(&PathElement::new(vec![(x, y - 2), (x, y + 18)], BLACK))
                    .map_err(e)?;
                let dy = if (k - limit).abs() < f64::EPSILON {
                    32
                } else {
                    20
                };
                root.draw(&Text::new(text, (x + 2, y + dy), (FONT, 11).into_font()))
                    .map_err(e)?;
            }
            // The cells the scale does not tell.
            super::heatmap::draw_legend(
                &root,
                (x0, y + 52),
                &[
                    super::heatmap::CellKind {
                        colour: super::heatmap::FAILED_CELL,
                        cross: true,
                        text: "failed (every pair)",
                    },
                    super::heatmap::CellKind {
                        colour: RGBColor(200, 200, 200),
                        cross: false,
                        text: "not joined or not measured",
                    },
                ],
            )?;
            root.present().map_err(e)?;
        }
        svg.push('\n');
        Ok(svg)
    }
}

/// Green at or above `limit` percent, orange just under it to red at zero.
fn colour(pct: f64, limit: f64) -> RGBColor {
    if pct >= limit {
        RGBColor(44, 160, 44)
    } else {
        let f = (pct / limit.max(1.0)).clamp(0.0, 1.0);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let g = (40.0 + 110.0 * f) as u8;
        RGBColor(230, g, 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::row;

    /// Four nodes in all pairs on one rail; node c is slow in each of its pairs.
    fn fleet() -> Vec<RailResult> {
        let mut rows = Vec::new();
        for (a, b, bw) in [
            ("a", "b", 10.0),
            ("a", "c", 4.0),
            ("b", "c", 4.2),
            ("a", "d", 10.0),
            ("b", "d", 10.0),
            ("c", "d", 4.1),
        ] {
            rows.push(row(a, b, 0, Some(bw)));
        }
        rows
    }

    /// The characters XML 1.0 forbids (C0 controls but tab, newline, CR; U+FFFE, U+FFFF).
    pub(crate) fn xml_forbidden(c: char) -> bool {
        matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}')
    }

    /// A fleet whose node names and run id came from elsewhere, hostile.
    fn hostile_fleet() -> Vec<RailResult> {
        let mut rows = fleet();
        for r in &mut rows {
            r.run_id = "run\n# forged heading <b>x</b>".into();
            for n in [&mut r.client_pod, &mut r.server_pod] {
                if n.as_deref() == Some("c") {
                    *n = Some("c<script>alert(1)</script>|x|\u{1b}[31m\u{fffe}".into());
                } else if n.as_deref() == Some("a") {
                    *n = Some(format!("a{}", "y".repeat(100_000)));
                }
            }
        }
        rows
    }

    /// Issue 53, finding 5: the fleet's markdown took node names and run ids raw: a `<script>`,
    /// a new column or a heading of a node's making went through. They are escaped as every
    /// markdown text of railbench is, and cut to a bounded length.
    #[test]
    fn the_fleets_markdown_escapes_node_names_and_run_ids() {
        let v = NodeRails::new(&hostile_fleet());
        let md = v.markdown(Threshold::default());
        for bad in ["<script", "<b>", "|x|", "\u{1b}", "\u{fffe}"] {
            assert!(!md.contains(bad), "{bad:?} in:\n{md}");
        }
        assert!(!md.lines().any(|l| l.starts_with("# forged")), "{md}");
        assert!(md.contains("&lt;script&gt;"), "{md}");
        assert!(!md.contains(&"y".repeat(1000)), "a node name cut short");
        // A row per node, as before.
        assert_eq!(
            md.lines().filter(|l| l.starts_with("| ")).count(),
            5,
            "{md}"
        );
    }

    /// The heatmaps take the same names: no character XML forbids, and the PNG renders.
    #[test]
    fn the_fleets_svg_takes_node_names_with_characters_xml_forbids() {
        let rows = hostile_fleet();
        let v = NodeRails::new(&rows);
        let svg = v.svg(Threshold::default()).expect("svg");
        assert!(!svg.chars().any(xml_forbidden), "{svg:?}");
        assert!(!svg.contains("<script"), "{svg}");
        results::svg_to_png(svg.as_bytes(), 1.0).expect("the PNG renders");
        let svg = super::super::heatmap::heatmap(&v.nodes, &rows, 0, Threshold::default())
            .expect("heatmap");
        assert!(!svg.chars().any(xml_forbidden), "{svg:?}");
        results::svg_to_png(svg.as_bytes(), 1.0).expect("the PNG renders");
    }

    #[test]
    fn a_fleet_is_told_from_a_sweep_and_its_slow_node_shows() {
        let rows = fleet();
        assert!(is_fleet(&rows));
        assert!(!is_fleet(&rows[..1]));
        let v = NodeRails::new(&rows);
        assert_eq!(v.nodes, ["a", "b", "c", "d"]);
        assert_eq!(v.cells[&("a".to_string(), 0)].best_gbps, Some(10.0));
        assert_eq!(v.cells[&("c".to_string(), 0)].pairs, 3);
        let t = Threshold::default();
        assert!(v.is_low("c", 0, t) && !v.is_low("a", 0, t) && !v.is_low("b", 0, t));
        let md = v.markdown(t);
        // The median of the six pairs is 7.1 Gb/s: c's best pair, 4.2, is 59 % of it.
        assert!(md.contains("| c | **4.200 (59%)** |"), "{md}");
        assert!(md.contains("| a | 10.000 (141%) |"), "{md}");
        let svg = v.svg(t).expect("svg");
        assert!(
            svg.contains("outlier limit") && svg.contains("rail 0"),
            "{svg}"
        );
        // The legend tells the cells the colour scale does not: failed, and not joined.
        assert!(svg.contains(">\nfailed (every pair)\n<"), "{svg}");
        assert!(svg.contains(">\nnot joined or not measured\n<"), "{svg}");
    }
}
