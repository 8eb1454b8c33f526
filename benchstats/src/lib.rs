//! benchstats: the statistics of the benchmark scripts (`scripts/bench-*`), in Rust with unit
//! tests rather than in awk; a development crate, not part of what railbench ships.
//!
//! This module: the statistics of `scripts/bench-engine`, a tool's runs against ib_write_bw's,
//! in the same rounds of the same guests. Medians and their ratio, a 90% interval of that ratio
//! by resampling, and the verdict on a goal, which says when the interval straddles the goal
//! (the run then cannot tell). The script writes `runs.tsv` and calls `bench-stats engine`
//! (this crate's binary), which prints [`engine_summary`]. [`lat`]: `scripts/bench-lat`'s.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;

use results::stats::{median, Rng};

pub mod lat;

/// One run of one tool in one round of one guest: a row of `runs.tsv`.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The guest (boot) it ran in.
    pub boot: String,
    /// `rdmabw`, `rdmabw-e`, `perftest`, or with `--mixed` `rdmabw-client` (rdmabw's client
    /// against ib_write_bw's server) and `rdmabw-server` (the other way round).
    pub tool: String,
    /// The round within the guest.
    pub round: u32,
    /// Bandwidth, Gb/s.
    pub gbps: f64,
    /// CPU seconds (client and server) per GB moved.
    pub cpu_s_per_gb: f64,
}

/// Which figure of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// Bandwidth.
    Gbps,
    /// CPU per GB.
    CpuPerGb,
}

impl Run {
    fn get(&self, f: Figure) -> f64 {
        match f {
            Figure::Gbps => self.gbps,
            Figure::CpuPerGb => self.cpu_s_per_gb,
        }
    }
}

/// Reads `runs.tsv` (a header line naming `boot`, `tool`, `round`, `gbps` and `cpu_s_per_gb`,
/// tab-separated); an error names the line.
///
/// # Errors
///
/// A missing column, or a cell that is not a number.
pub fn read_runs(tsv: &str) -> Result<Vec<Run>, String> {
    let table = Tsv::read(tsv, &["boot", "tool", "round", "gbps", "cpu_s_per_gb"])?;
    table
        .rows()
        .map(|row| {
            Ok(Run {
                boot: row.text(0)?.to_string(),
                tool: row.text(1)?.to_string(),
                round: row.whole(2)?,
                gbps: row.number(3)?,
                cpu_s_per_gb: row.number(4)?,
            })
        })
        .collect()
}

/// A bench's `runs.tsv`: a header line naming the columns, then tab-separated rows (blank lines
/// skipped). Errors name the line.
pub(crate) struct Tsv<'a> {
    /// Each wanted column's place in a row.
    cols: Vec<usize>,
    /// Each row: its line number and its cells.
    rows: Vec<(usize, Vec<&'a str>)>,
}

/// A row of a [`Tsv`], its cells by the wanted columns' order.
pub(crate) struct TsvRow<'t, 'a> {
    cols: &'t [usize],
    line: usize,
    cells: &'t [&'a str],
}

impl<'a> Tsv<'a> {
    /// Reads `tsv`, whose header must name each of `columns`.
    pub(crate) fn read(tsv: &'a str, columns: &[&str]) -> Result<Tsv<'a>, String> {
        let mut lines = tsv.lines();
        let header: Vec<&str> = lines.next().ok_or("empty file")?.split('\t').collect();
        let cols = columns
            .iter()
            .map(|name| {
                header
                    .iter()
                    .position(|h| h == name)
                    .ok_or_else(|| format!("no column {name} in the header"))
            })
            .collect::<Result<_, _>>()?;
        let rows = lines
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i + 2, l.split('\t').collect()))
            .collect();
        Ok(Tsv { cols, rows })
    }

    pub(crate) fn rows(&self) -> impl Iterator<Item = TsvRow<'_, 'a>> {
        self.rows.iter().map(|(line, cells)| TsvRow {
            cols: &self.cols,
            line: *line,
            cells,
        })
    }
}

impl<'a> TsvRow<'_, 'a> {
    /// The cell of the `k`th wanted column.
    pub(crate) fn text(&self, k: usize) -> Result<&'a str, String> {
        self.cells
            .get(self.cols[k])
            .copied()
            .ok_or_else(|| format!("line {}: {} cells, too few", self.line, self.cells.len()))
    }

    /// The cell as a finite number.
    pub(crate) fn number(&self, k: usize) -> Result<f64, String> {
        let s = self.text(k)?;
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("line {}: `{s}` is not a number", self.line))
    }

    /// The cell as a whole number.
    pub(crate) fn whole<T: std::str::FromStr>(&self, k: usize) -> Result<T, String> {
        let s = self.text(k)?;
        s.parse()
            .map_err(|_| format!("line {}: `{s}` is not a whole number", self.line))
    }
}

/// A round: (boot, round).
type Round<'a> = (&'a str, u32);

/// The runs indexed by tool and round.
struct Table<'a> {
    by: BTreeMap<(&'a str, Round<'a>), &'a Run>,
    /// Each boot's rounds, in the order boots first appear.
    boots: Vec<(&'a str, Vec<u32>)>,
}

impl<'a> Table<'a> {
    fn new(runs: &'a [Run]) -> Table<'a> {
        let mut by = BTreeMap::new();
        let mut boots: Vec<(&str, Vec<u32>)> = Vec::new();
        for r in runs {
            by.insert((r.tool.as_str(), (r.boot.as_str(), r.round)), r);
            match boots.iter_mut().find(|(b, _)| *b == r.boot) {
                Some((_, rounds)) if !rounds.contains(&r.round) => rounds.push(r.round),
                Some(_) => {}
                None => boots.push((r.boot.as_str(), vec![r.round])),
            }
        }
        Table { by, boots }
    }

    fn rounds_of(&self, boots: &[&'a str]) -> Vec<Round<'a>> {
        boots
            .iter()
            .flat_map(|b| {
                self.boots
                    .iter()
                    .filter(move |(x, _)| x == b)
                    .flat_map(move |(_, rs)| rs.iter().map(move |r| (*b, *r)))
            })
            .collect()
    }

    fn pick(&self, tool: &str, f: Figure, rounds: &[Round<'a>]) -> Vec<f64> {
        rounds
            .iter()
            .filter_map(|rd| self.by.get(&(tool, *rd)).map(|r| r.get(f)))
            .collect()
    }

    /// The ratio of medians, `tool` over `base`, over `rounds`; 0 when either has none (or
    /// the base's median is 0), as the figures print it.
    fn ratio(&self, tool: &str, base: &str, f: Figure, rounds: &[Round<'a>]) -> f64 {
        match (
            median(&self.pick(tool, f, rounds)),
            median(&self.pick(base, f, rounds)),
        ) {
            (Some(x), Some(y)) if y > 0.0 => x / y,
            _ => 0.0,
        }
    }
}

/// How many resamples an interval draws.
pub const RESAMPLES: usize = 1000;

/// A 90% interval (the 5th and 95th percentiles of [`RESAMPLES`] resamples) of the ratio of
/// medians of `tool` over `base` for figure `f`. Rounds in one guest move together (a guest
/// settles into its own pace, for one tool or the other), so with several guests whole guests
/// are drawn; with one, its rounds.
pub fn interval(runs: &[Run], tool: &str, base: &str, f: Figure) -> (f64, f64) {
    let t = Table::new(runs);
    // A fixed seed: the same runs give the same interval.
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let boots: Vec<&str> = t.boots.iter().map(|(b, _)| *b).collect();
    let mut ratios: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let rounds = if boots.len() > 1 {
                let drawn: Vec<&str> = (0..boots.len())
                    .map(|_| boots[rng.below(boots.len())])
                    .collect();
                t.rounds_of(&drawn)
            } else {
                let all = t.rounds_of(&boots);
                (0..all.len()).map(|_| all[rng.below(all.len())]).collect()
            };
            t.ratio(tool, base, f, &rounds)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    (
        ratios[RESAMPLES / 20 - 1],
        ratios[RESAMPLES - RESAMPLES / 20],
    )
}

/// The verdict on a goal `r >= goal` (`at_least`) or `r <= goal`: an interval on both sides of
/// the goal means this run cannot tell, and says so.
pub fn verdict(r: f64, (lo, hi): (f64, f64), at_least: bool, goal: f64) -> String {
    let met = if at_least { r >= goal } else { r <= goal };
    let word = if met { "met" } else { "not met" };
    if lo < goal && hi > goal {
        format!("{word}, within the noise (the interval spans {goal})")
    } else {
        word.to_string()
    }
}

/// The bandwidth goal of the `-e` arm, "not below ib_write_bw's beyond the noise": not met
/// only when the whole interval lies below 1.0.
pub fn not_below(r: f64, (_, hi): (f64, f64)) -> String {
    if r >= 1.0 {
        "met".into()
    } else if hi >= 1.0 {
        "met: below 1.0 by the medians, within the noise (the interval reaches 1.0)".into()
    } else {
        "not met (the whole interval is below 1.0)".into()
    }
}

/// A verdict for a mixed pair (rdmabw on one side, ib_write_bw on the other): its bandwidth is
/// meant to be the pure pair's, so the goal is a ratio whose interval reaches 1.0 (within the
/// noise, which the A/A control shows).
pub fn within_noise(r: f64, (lo, hi): (f64, f64)) -> String {
    if lo <= 1.0 && hi >= 1.0 {
        format!("met: {r:.3}, the interval {lo:.3} to {hi:.3} holds 1.0")
    } else {
        format!("not met: the interval {lo:.3} to {hi:.3} does not hold 1.0")
    }
}

/// Which bandwidth goal an arm is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BwGoal {
    /// rdmabw against ib_write_bw: at least 1.0.
    AtLeastOne,
    /// rdmabw -e: not below 1.0 beyond the noise.
    NotBelow,
    /// A mixed pair against the pure perftest pair: 1.0 within the noise.
    WithinNoise,
}

/// Every figure of one arm (`tool`, printed as `label`) against ib_write_bw (`perftest`): per
/// guest, per round, medians, their ratio, the intervals and the verdicts. `cpu_goal` is the
/// CPU-per-GB ratio to stay at or under (none for a mixed pair); `goal` the bandwidth goal.
pub fn arm(runs: &[Run], tool: &str, label: &str, cpu_goal: Option<f64>, goal: BwGoal) -> String {
    const BASE: &str = "perftest";
    let t = Table::new(runs);
    let mut o = String::new();
    let _ = writeln!(o, "== {label} against ib_write_bw ==");
    for (b, _) in &t.boots {
        let rounds = t.rounds_of(&[b]);
        let _ = writeln!(
            o,
            "guest {b}: {} round(s), bandwidth ratio {:.3}, CPU-per-GB ratio {:.3}",
            rounds.len(),
            t.ratio(tool, BASE, Figure::Gbps, &rounds),
            t.ratio(tool, BASE, Figure::CpuPerGb, &rounds)
        );
    }
    let boots: Vec<&str> = t.boots.iter().map(|(b, _)| *b).collect();
    let rounds = t.rounds_of(&boots);
    let mut per_round: Vec<f64> = rounds
        .iter()
        .filter_map(|rd| {
            let x = t.by.get(&(tool, *rd))?;
            let y = t.by.get(&(BASE, *rd))?;
            (y.gbps > 0.0).then(|| x.gbps / y.gbps)
        })
        .collect();
    if let Some(m) = median(&per_round) {
        per_round.sort_by(f64::total_cmp);
        let _ = writeln!(
            o,
            "per-round bandwidth ratios ({label} / perftest, same round): {} of {} at least 1.0, min {:.3}, median {m:.3}, max {:.3}",
            per_round.iter().filter(|q| **q >= 1.0).count(),
            per_round.len(),
            per_round[0],
            per_round[per_round.len() - 1]
        );
    }
    let (a1, a2) = (
        t.pick(tool, Figure::Gbps, &rounds),
        t.pick(BASE, Figure::Gbps, &rounds),
    );
    let (c1, c2) = (
        t.pick(tool, Figure::CpuPerGb, &rounds),
        t.pick(BASE, Figure::CpuPerGb, &rounds),
    );
    let m = |v: &[f64]| median(v).unwrap_or(0.0);
    let _ = writeln!(
        o,
        "median bandwidth over {} guest(s):  {label} {:.4} Gb/s ({} runs), ib_write_bw {:.4} Gb/s ({} runs)",
        boots.len(),
        m(&a1),
        a1.len(),
        m(&a2),
        a2.len()
    );
    let _ = writeln!(
        o,
        "median CPU per GB: {label} {:.3} s, ib_write_bw {:.3} s",
        m(&c1),
        m(&c2)
    );
    let rb = t.ratio(tool, BASE, Figure::Gbps, &rounds);
    let rc = t.ratio(tool, BASE, Figure::CpuPerGb, &rounds);
    let _ = writeln!(
        o,
        "ratio of medians ({label} / perftest): bandwidth {rb:.3} (goal {}), CPU per GB {rc:.3} ({})",
        match goal {
            BwGoal::NotBelow => "not below 1.0 beyond the noise",
            BwGoal::WithinNoise => "1.0 within the noise",
            BwGoal::AtLeastOne => ">= 1.0",
        },
        cpu_goal.map_or_else(|| "no goal".to_string(), |g| format!("goal <= {g}"))
    );
    let ib = interval(runs, tool, BASE, Figure::Gbps);
    let ic = interval(runs, tool, BASE, Figure::CpuPerGb);
    let _ = writeln!(
        o,
        "90% intervals ({RESAMPLES} resamples of the {}): bandwidth {:.3} to {:.3}, CPU per GB {:.3} to {:.3}",
        if boots.len() > 1 {
            format!("{} guests", boots.len())
        } else {
            "rounds".into()
        },
        ib.0,
        ib.1,
        ic.0,
        ic.1
    );
    let _ = writeln!(
        o,
        "verdict: bandwidth goal {}; CPU-per-GB goal {}",
        match goal {
            BwGoal::NotBelow => not_below(rb, ib),
            BwGoal::WithinNoise => within_noise(rb, ib),
            BwGoal::AtLeastOne => verdict(rb, ib, true, 1.0),
        },
        cpu_goal.map_or_else(|| "none set".to_string(), |g| verdict(rc, ic, false, g))
    );
    o
}

/// What `scripts/bench-engine` prints after its runs: the rdmabw arm, and the `-e` arm where
/// the runs have one; in a `control` run (ib_write_bw in every place) the arms are named as
/// the A/A comparisons they are.
pub fn engine_summary(runs: &[Run], control: bool) -> String {
    let has = |tool: &str| runs.iter().any(|r| r.tool == tool);
    let mut o = String::new();
    if has("rdmabw") {
        o.push_str(&arm(
            runs,
            "rdmabw",
            if control { "A/A ib_write_bw" } else { "rdmabw" },
            Some(1.0),
            BwGoal::AtLeastOne,
        ));
    }
    // --mixed: rdmabw on one side of ib_write_bw, against the pure ib_write_bw pair.
    for (tool, label) in [
        ("rdmabw-client", "rdmabw client + ib_write_bw server"),
        ("rdmabw-server", "ib_write_bw client + rdmabw server"),
    ] {
        if has(tool) {
            let label = if control {
                format!("A/A ib_write_bw (in the arm '{label}')")
            } else {
                label.to_string()
            };
            o.push_str(&arm(runs, tool, &label, None, BwGoal::WithinNoise));
        }
    }
    if has("rdmabw-e") {
        o.push_str(&arm(
            runs,
            "rdmabw-e",
            if control {
                "A/A ib_write_bw (in the -e arm)"
            } else {
                "rdmabw -e"
            },
            Some(0.5),
            BwGoal::NotBelow,
        ));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mixed_pair_is_met_when_its_interval_holds_one() {
        assert!(within_noise(0.98, (0.95, 1.02)).starts_with("met"));
        assert!(within_noise(1.03, (1.01, 1.05)).starts_with("not met"));
        assert!(within_noise(0.9, (0.85, 0.97)).starts_with("not met"));
    }

    fn run(boot: &str, tool: &str, round: u32, gbps: f64, cpu: f64) -> Run {
        Run {
            boot: boot.into(),
            tool: tool.into(),
            round,
            gbps,
            cpu_s_per_gb: cpu,
        }
    }

    #[test]
    fn the_file_reads_by_column_name_and_a_bad_cell_names_its_line() {
        let tsv = "boot\ttool\tround\tgbps\tclient_cpu_s\tserver_cpu_s\tclient_wall_s\tgb_moved\tcpu_s_per_gb\n\
                   1\trdmabw\t1\t0.5\t1\t1\t10\t0.5\t4.0\n";
        let runs = read_runs(tsv).expect("reads");
        assert_eq!(runs, vec![run("1", "rdmabw", 1, 0.5, 4.0)]);
        let bad = tsv.replace("0.5\t1\t1", "fast\t1\t1");
        assert_eq!(
            read_runs(&bad).expect_err("refused"),
            "line 2: `fast` is not a number"
        );
        assert!(read_runs("boot\ttool\n")
            .expect_err("no column")
            .contains("round"));
    }

    #[test]
    fn equal_tools_have_ratio_one_and_an_interval_at_one() {
        let runs: Vec<Run> = (1..=3)
            .flat_map(|b| {
                (1..=2).flat_map(move |r| {
                    let g = 0.1 * f64::from(b);
                    [
                        run(&b.to_string(), "rdmabw", r, g, 2.0),
                        run(&b.to_string(), "perftest", r, g, 2.0),
                    ]
                })
            })
            .collect();
        let s = arm(&runs, "rdmabw", "rdmabw", Some(1.0), BwGoal::AtLeastOne);
        assert!(
            s.contains("bandwidth 1.000 (goal >= 1.0), CPU per GB 1.000"),
            "{s}"
        );
        assert!(s.contains("bandwidth 1.000 to 1.000"), "{s}");
        assert!(
            s.contains("verdict: bandwidth goal met; CPU-per-GB goal met"),
            "{s}"
        );
        assert!(s.contains("(1000 resamples of the 3 guests)"), "{s}");
    }

    #[test]
    fn a_clear_loss_is_not_met_and_a_straddle_is_within_the_noise() {
        assert_eq!(verdict(0.9, (0.85, 0.95), true, 1.0), "not met");
        assert_eq!(
            verdict(1.01, (0.97, 1.04), true, 1.0),
            "met, within the noise (the interval spans 1)"
        );
        assert_eq!(verdict(0.4, (0.35, 0.45), false, 0.5), "met");
        assert_eq!(
            not_below(0.98, (0.95, 1.01)),
            "met: below 1.0 by the medians, within the noise (the interval reaches 1.0)"
        );
        assert_eq!(
            not_below(0.9, (0.85, 0.95)),
            "not met (the whole interval is below 1.0)"
        );
    }

    #[test]
    fn one_guest_resamples_its_rounds_and_the_interval_holds_the_ratio() {
        let runs: Vec<Run> = (1..=6)
            .flat_map(|r| {
                let noise = f64::from(r % 3) * 0.01;
                [
                    run("1", "rdmabw", r, 0.95 + noise, 1.0),
                    run("1", "perftest", r, 1.0, 1.0),
                ]
            })
            .collect();
        let (lo, hi) = interval(&runs, "rdmabw", "perftest", Figure::Gbps);
        assert!(
            lo <= 0.96 && hi >= 0.96 && lo >= 0.95 && hi <= 0.97,
            "{lo} {hi}"
        );
        let s = engine_summary(&runs, true);
        assert!(
            s.starts_with("== A/A ib_write_bw against ib_write_bw =="),
            "{s}"
        );
        assert!(s.contains("resamples of the rounds"), "{s}");
        assert!(!s.contains("-e arm"), "no -e runs, no -e arm: {s}");
    }
}
