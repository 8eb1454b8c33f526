//! Checks that relate rows to each other: a fleet's rounds, a fleet's verdicts on planted
//! faults, and a sweep's lossy rail against its clean ones.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{Context, Result};
use results::{Layer, RailResult, RailStatus};
use wire::counters::FindingKind;

use crate::check;
use crate::files;
use crate::outcome::{describe, or_none};

/// `labcheck fleet-rounds`: the rounds of `railsweep fleet --out-dir DIR`.
#[derive(Debug, clap::Args)]
pub struct RoundsArgs {
    /// The fleet's --out-dir (fleet.csv, rounds.tsv).
    pub dir: PathBuf,
    /// Distinct pod pairs among the rows.
    #[arg(long, value_name = "N")]
    pub pairs: usize,
    /// Rows in fleet.csv.
    #[arg(long, value_name = "N")]
    pub rows: usize,
    /// Rounds in rounds.tsv.
    #[arg(long, value_name = "N")]
    pub rounds: usize,
    /// Pairs in each round, no pod in two of them.
    #[arg(long, value_name = "N")]
    pub per_round: usize,
    /// The pairs of each round overlapped in time by more than this, seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub min_overlap: f64,
}

/// `labcheck fleet-rounds`.
pub fn rounds(args: &RoundsArgs) -> Result<()> {
    let rows = files::rows(&args.dir.join("fleet.csv"))?;
    let pairs: BTreeSet<(String, String)> = rows.iter().map(pair_of).collect();
    check!(
        pairs.len() == args.pairs,
        "{} pairs, expected {}: {pairs:?}",
        pairs.len(),
        args.pairs
    );
    check!(
        rows.len() == args.rows,
        "{} rows, expected {}",
        rows.len(),
        args.rows
    );
    let mut rounds: BTreeMap<u32, Vec<files::RoundLine>> = BTreeMap::new();
    for t in files::rounds(&args.dir)? {
        rounds.entry(t.round).or_default().push(t);
    }
    check!(
        rounds.len() == args.rounds,
        "{} rounds, expected {}",
        rounds.len(),
        args.rounds
    );
    for (k, ts) in &rounds {
        check!(
            ts.len() == args.per_round,
            "round {k}: {} pairs, expected {}",
            ts.len(),
            args.per_round
        );
        let pods: BTreeSet<&str> = ts
            .iter()
            .flat_map(|t| [t.client.as_str(), t.server.as_str()])
            .collect();
        check!(
            pods.len() == 2 * ts.len(),
            "round {k}: a pod in two pairs: {pods:?}"
        );
        let start = ts.iter().map(|t| t.start_unix).fold(f64::MIN, f64::max);
        let end = ts.iter().map(|t| t.end_unix).fold(f64::MAX, f64::min);
        let names: Vec<String> = ts
            .iter()
            .map(|t| format!("{}->{}", t.client, t.server))
            .collect();
        println!(
            "round {k}: {} overlap {:.2} s",
            names.join(" and "),
            end - start
        );
        check!(
            end - start > args.min_overlap,
            "round {k}: the pairs overlapped {:.2} s, not more than {} s: they did not run at the same time",
            end - start,
            args.min_overlap
        );
    }
    Ok(())
}

/// A row's pair of pods, in name order.
fn pair_of(r: &RailResult) -> (String, String) {
    let (a, b) = (
        r.client_pod.clone().unwrap_or_default(),
        r.server_pod.clone().unwrap_or_default(),
    );
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

/// `labcheck fleet-faults`: the verdicts of the latest row of each pair and rail.
#[derive(Debug, clap::Args)]
pub struct FaultsArgs {
    /// The fleet's fleet.csv.
    pub file: PathBuf,
    /// `POD:RAIL` slow: each of its pairs on that rail blames the path (the fleet's "node POD
    /// is slow on rail R", or a fabric finding, loss or congestion, that wins over it).
    #[arg(long, value_name = "POD:RAIL")]
    pub slow: Vec<String>,
    /// `POD:RAIL` down in the pod: each of its pairs on that rail failed, at the node's set-up.
    #[arg(long, value_name = "POD:RAIL")]
    pub down: Vec<String>,
}

/// The latest rows of each pair, by rail and pair.
type Latest = BTreeMap<(u32, (String, String)), RailResult>;

/// `POD:RAIL`, and the latest rows of every pair with POD on RAIL (at least one).
fn pairs_with<'a>(latest: &'a Latest, arg: &str) -> Result<(String, u32, Vec<&'a RailResult>)> {
    let (pod, rail) = arg
        .split_once(':')
        .with_context(|| format!("{arg}: give POD:RAIL"))?;
    let rail: u32 = rail
        .parse()
        .with_context(|| format!("{arg}: the rail is a number"))?;
    let mine: Vec<&RailResult> = latest
        .iter()
        .filter(|((r, (a, b)), _)| *r == rail && (a == pod || b == pod))
        .map(|(_, r)| r)
        .collect();
    check!(!mine.is_empty(), "no pair of {pod} on rail {rail}");
    Ok((pod.to_string(), rail, mine))
}

/// `labcheck fleet-faults`.
pub fn faults(args: &FaultsArgs) -> Result<()> {
    let mut latest = Latest::new();
    for r in files::rows(&args.file)? {
        latest.insert((r.rail, pair_of(&r)), r);
    }
    for ((rail, (a, b)), r) in &latest {
        println!(
            "{a},{b} rail {rail} {} {} {}",
            r.status.as_str(),
            r.layer.map_or("-", |l| l.as_str()),
            r.evidence.as_deref().unwrap_or("")
        );
    }
    for arg in &args.slow {
        let (pod, rail, mine) = pairs_with(&latest, arg)?;
        let blame = format!("node {pod} is slow on rail {rail}");
        for r in mine {
            let evidence = r.evidence.as_deref().unwrap_or("");
            check!(
                r.layer == Some(Layer::Path)
                    && [blame.as_str(), "loss (", "congestion ("].iter().any(|p| evidence.starts_with(p)),
                "{pod} rail {rail} is slow, and this row does not blame the path to it (layer {}, {evidence:?}): {}",
                or_none(r.layer.map(|l| l.as_str())),
                describe(r)
            );
        }
    }
    for arg in &args.down {
        let (pod, rail, mine) = pairs_with(&latest, arg)?;
        for r in mine {
            check!(
                r.status == RailStatus::Failed && r.layer == Some(Layer::NodeSetup),
                "{pod} rail {rail} is down, and this row is not failed at node-setup (layer {}): {}",
                or_none(r.layer.map(|l| l.as_str())),
                describe(r)
            );
        }
    }
    Ok(())
}

/// `labcheck lossy-rail`: a sweep with loss planted on one rail's path.
#[derive(Debug, clap::Args)]
pub struct LossyArgs {
    /// The sweep's results CSV (its findings and counters files beside it).
    pub file: PathBuf,
    /// The rail with the loss; every other rail is clean.
    #[arg(long, value_name = "RAIL")]
    pub rail: u32,
}

/// `labcheck lossy-rail`: only the lossy rail has findings, and they are loss, each resting on
/// a counter that moved and saying what to do; its verdict is the path's when both ends saw
/// the loss, else that end's NIC port; both ends' counters are in the counters file; the clean
/// rails have no finding and no verdict.
pub fn lossy(args: &LossyArgs) -> Result<()> {
    let rows = files::rows(&args.file)?;
    let counters = files::counter_lines(&args.file)?;
    check!(
        rows.iter().any(|r| r.rail == args.rail),
        "no row of rail {}",
        args.rail
    );
    for r in &rows {
        if r.rail != args.rail {
            check!(
                r.diagnosis.is_empty() && r.layer.is_none() && r.evidence.is_none(),
                "a clean rail has a finding or a verdict (evidence {}): {}",
                or_none(r.evidence.as_deref()),
                describe(r)
            );
            continue;
        }
        let kinds: BTreeSet<FindingKind> = r.diagnosis.iter().map(|f| f.finding).collect();
        check!(
            kinds == BTreeSet::from([FindingKind::PacketLoss]),
            "rail {}'s findings are {:?}, not loss alone",
            r.rail,
            kinds.iter().map(|k| k.word()).collect::<Vec<_>>()
        );
        for f in &r.diagnosis {
            println!("rail {}: {}", r.rail, f.summary);
            check!(
                !f.evidence.is_empty()
                    && f.evidence
                        .iter()
                        .all(|e| e.delta > 0 && !e.counter.is_empty())
                    && !f.what_to_do.is_empty(),
                "rail {}: a loss finding without counters that moved or without what to do: {}",
                r.rail,
                f.summary
            );
        }
        let sides: BTreeSet<&str> = counters
            .iter()
            .filter(|c| c.rail == r.rail && c.run == r.run_id)
            .map(|c| c.side.as_str())
            .collect();
        check!(
            sides == BTreeSet::from(["client", "server"]),
            "rail {}: counters of {sides:?} in the counters file",
            r.rail
        );
        let seen: BTreeSet<&str> = r
            .diagnosis
            .iter()
            .flat_map(|f| f.evidence.iter().map(|e| e.role.as_str()))
            .collect();
        let want = if seen.len() == 2 {
            Layer::Path
        } else {
            Layer::NicPort
        };
        let evidence = r.evidence.as_deref().unwrap_or("");
        println!(
            "rail {} verdict: {} - {evidence}",
            r.rail,
            r.layer.map_or("-", |l| l.as_str())
        );
        check!(
            r.layer == Some(want) && evidence.starts_with("loss ("),
            "rail {}: verdict {} ({evidence:?}), expected {} from loss seen on {:?}",
            r.rail,
            or_none(r.layer.map(|l| l.as_str())),
            want.as_str(),
            seen
        );
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::rows::tests::row;

    /// A fleet row of the pair `client`,`server` on `rail`.
    fn pair(
        client: &str,
        server: &str,
        rail: u32,
        layer: Option<Layer>,
        evidence: &str,
    ) -> RailResult {
        let mut r = row("sriov", rail, "0.3");
        r.client_pod = Some(client.into());
        r.server_pod = Some(server.into());
        if layer == Some(Layer::NodeSetup) {
            r = r.failed_because("rail down");
        }
        r.layer = layer;
        r.evidence = (!evidence.is_empty()).then(|| evidence.to_string());
        r.fix = r.layer.map(|_| "look".to_string());
        r
    }

    fn faults_of(rows: &[RailResult], slow: &[&str], down: &[&str]) -> Result<(), String> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("fleet.csv");
        results::write_csv(std::fs::File::create(&file).unwrap(), rows).unwrap();
        let args = FaultsArgs {
            file,
            slow: slow.iter().map(|s| s.to_string()).collect(),
            down: down.iter().map(|s| s.to_string()).collect(),
        };
        faults(&args).map_err(|e| e.to_string())
    }

    #[test]
    fn the_latest_row_of_each_pair_carries_the_verdict() {
        let slow = Some(Layer::Path);
        let mut rows = vec![
            pair("podA", "podC", 1, None, ""),
            pair(
                "podC",
                "podD",
                1,
                slow,
                "node podC is slow on rail 1 (0.1 Gb/s)",
            ),
            pair("podA", "podB", 0, Some(Layer::NodeSetup), "net1 down"),
            pair("podA", "podC", 1, slow, "loss (rnr_nak_retry_err 3)"),
        ];
        assert_eq!(faults_of(&rows, &["podC:1"], &["podB:0"]), Ok(()));
        // The first row of podA,podC had no verdict; a re-measurement without one fails.
        rows.push(pair("podC", "podA", 1, None, ""));
        let e = faults_of(&rows, &["podC:1"], &[]).unwrap_err();
        assert!(e.contains("does not blame the path"), "{e}");
        assert!(faults_of(&rows, &[], &["podD:1"])
            .unwrap_err()
            .contains("not failed at node-setup"));
        assert!(faults_of(&rows, &["podE:0"], &[])
            .unwrap_err()
            .contains("no pair of podE"));
    }

    #[test]
    fn rounds_overlap_and_no_pod_twice() {
        let dir = tempfile::tempdir().unwrap();
        let rows = vec![
            pair("podA", "podB", 0, None, ""),
            pair("podC", "podD", 0, None, ""),
        ];
        results::write_csv(
            std::fs::File::create(dir.path().join("fleet.csv")).unwrap(),
            &rows,
        )
        .unwrap();
        let write = |lines: &str| {
            let header = results::rounds::COLUMNS.join("\t");
            std::fs::write(dir.path().join("rounds.tsv"), format!("{header}\n{lines}")).unwrap();
        };
        let args = RoundsArgs {
            dir: dir.path().to_path_buf(),
            pairs: 2,
            rows: 2,
            rounds: 1,
            per_round: 2,
            min_overlap: 1.0,
        };
        write("1\t1\tpodA\tpodB\t100.0\t104.0\t1\t\n1\t1\tpodC\tpodD\t101.0\t105.0\t1\t\n");
        assert!(rounds(&args).is_ok());
        write("1\t1\tpodA\tpodB\t100.0\t104.0\t1\t\n1\t1\tpodC\tpodD\t103.5\t108.0\t1\t\n");
        assert!(rounds(&args)
            .unwrap_err()
            .to_string()
            .contains("did not run at the same time"));
        write("1\t1\tpodA\tpodB\t100.0\t104.0\t1\t\n1\t1\tpodA\tpodD\t101.0\t105.0\t1\t\n");
        assert!(rounds(&args)
            .unwrap_err()
            .to_string()
            .contains("a pod in two pairs"));
        std::fs::write(dir.path().join("rounds.tsv"), "round\tclient\n1\tpodA\n").unwrap();
        let e = rounds(&args).unwrap_err();
        assert!(
            !e.is::<crate::outcome::Failed>() && e.to_string().contains("not the writer's"),
            "{e}"
        );
    }
}
