//! What a fleet run prints on stdout at its end, and writes into suspects.txt.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use results::RailResult;

use crate::fleet::culprit;
use crate::fleet::topology::GroupCulprit;

/// The counts of the summary's first line.
pub(super) struct Counts {
    pub(super) pods: usize,
    /// Pairs measured and scheduled ([`culprit::pairs_measured`]).
    pub(super) measured: usize,
    pub(super) scheduled: usize,
    pub(super) rounds: usize,
    pub(super) rails: usize,
    pub(super) wall_s: f64,
    /// Outliers measured again.
    pub(super) remeasured: usize,
    /// Suspect node-rails confirmed against nodes that passed: (suspects, pairs, rounds).
    pub(super) repaired: Option<(usize, usize, usize)>,
}

/// Where the results are.
pub(super) struct Files<'a> {
    pub(super) csv: &'a Path,
    pub(super) dir: &'a Path,
    pub(super) metrics: Option<&'a PathBuf>,
}

/// The summary on stdout (counts, the rails' medians, the suspects, where the results are);
/// the suspects also into suspects.txt. `nothing`: the run measured nothing (no "suspects:
/// none" then).
pub(super) fn print(
    counts: &Counts,
    rows: &[RailResult],
    verdict: &culprit::Verdict,
    groups: &[GroupCulprit],
    nothing: bool,
    files: &Files<'_>,
) -> Result<()> {
    let medians = culprit::rail_medians(rows);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "fleet: {} pods, {} of {} pairs measured in {} rounds, {} rail(s), {} row(s) in {:.1} s; {} outlier(s) measured again",
        counts.pods,
        counts.measured,
        counts.scheduled,
        counts.rounds,
        counts.rails,
        rows.len(),
        counts.wall_s,
        counts.remeasured
    )?;
    for (rail, m) in &medians {
        writeln!(out, "rail {rail}: fleet median {m:.3} Gb/s")?;
    }
    if let Some((suspects, pairs, rounds)) = counts.repaired {
        writeln!(
            out,
            "culprits: {suspects} suspect node-rail(s) measured against nodes that passed on that rail: {pairs} extra pair(s) in {rounds} round(s)"
        )?;
    }
    let mut suspects_txt = String::new();
    if !nothing && verdict.suspects.is_empty() && groups.is_empty() {
        writeln!(out, "suspects: none")?;
    }
    for g in groups {
        suspects_txt.push_str(&format!("suspect: {g}\n"));
    }
    for s in &verdict.suspects {
        suspects_txt.push_str(&format!("suspect: {s}\n"));
    }
    for (a, b, rail) in &verdict.unexplained {
        suspects_txt.push_str(&format!(
            "outlier: {a} <-> {b} rail {rail} (no node or rail slow in all its pairs)\n"
        ));
    }
    out.write_all(suspects_txt.as_bytes())?;
    std::fs::write(files.dir.join("suspects.txt"), &suspects_txt)?;
    writeln!(
        out,
        "results: {} (rows), {}/heatmap-rail*.svg, {}, {} (OpenMetrics){}",
        files.csv.display(),
        files.dir.display(),
        files.dir.join("rounds.tsv").display(),
        files.dir.join("fleet.prom").display(),
        files
            .metrics
            .map(|m| format!(" and {}", m.display()))
            .unwrap_or_default()
    )?;
    out.flush()?;
    Ok(())
}

/// Why the fleet measured nothing, when it did not: no row at all (no pod has rails, or every
/// pair failed to set up: `problems` says how), or rows only of rails no pod has (`absent`;
/// `present`: the rails of the pods whose rails were read, `None` if none were). A set-up
/// error (exit 2) that names the fix.
pub(super) fn nothing_measured(
    rows: &[RailResult],
    absent: &[u32],
    present: Option<&BTreeSet<u32>>,
    problems: &[String],
) -> Option<String> {
    if rows.iter().any(|r| !absent.contains(&r.rail)) {
        return None;
    }
    let list = |rails: &mut dyn Iterator<Item = &u32>| {
        rails.map(u32::to_string).collect::<Vec<_>>().join(",")
    };
    let probe = "see why with `rdmabw probe` in a pod (kubectl exec POD -- rdmabw probe)";
    Some(match present {
        Some(p) if p.is_empty() => format!(
            "nothing measured: no pod has a rail (`rdmabw rails` lists none in any pod); {probe}"
        ),
        Some(p) if !absent.is_empty() => format!(
            "nothing measured: rail(s) {} not present in any pod (the pods have rail(s) {}); give \
             --rails with rails the pods have (`kubectl exec POD -- rdmabw rails` lists them)",
            list(&mut absent.iter()),
            list(&mut p.iter())
        ),
        _ => format!(
            "nothing measured: no pair measured a rail{}; {probe}",
            problems
                .first()
                .map(|p| format!(" ({p})"))
                .unwrap_or_default()
        ),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::test_support::row;

    /// Issue 56: a fleet where no pod has rails printed "0 of 3 pairs measured, suspects: none"
    /// and passed. No row, or rows only of rails no pod has, is nothing measured, naming why
    /// and the fix; a rail measured anywhere is a verdict.
    #[test]
    fn nothing_measured_is_said_with_why_and_the_fix() {
        let none = BTreeSet::new();
        let why = nothing_measured(&[], &[], Some(&none), &[]).expect("nothing measured");
        assert!(
            why.starts_with("nothing measured: no pod has a rail")
                && why.contains("`rdmabw probe`"),
            "{why}"
        );
        let problem = "a -> b: client pod: rdmabw not found".to_string();
        let why = nothing_measured(&[], &[], None, std::slice::from_ref(&problem))
            .expect("nothing measured");
        assert!(
            why.starts_with(
                "nothing measured: no pair measured a rail (a -> b: client pod: rdmabw not found)"
            ),
            "{why}"
        );
        let absent_only = [row("a", "b", 0, None), row("b", "c", 0, None)];
        let have = BTreeSet::from([1, 2]);
        let why = nothing_measured(&absent_only, &[0], Some(&have), &[]).expect("nothing measured");
        assert!(
            why.contains("rail(s) 0 not present in any pod (the pods have rail(s) 1,2)")
                && why.contains("--rails"),
            "{why}"
        );
        let why = nothing_measured(&absent_only, &[0], Some(&none), &[]).expect("nothing measured");
        assert!(
            why.starts_with("nothing measured: no pod has a rail"),
            "{why}"
        );
        let some = [row("a", "b", 0, None), row("a", "b", 1, None)];
        assert_eq!(nothing_measured(&some, &[0], Some(&have), &[]), None);
    }
}
