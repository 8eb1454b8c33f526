//! The fleet run: rounds of pairs, each pair swept by [`crate::sweep`] exactly as `railsweep
//! run` sweeps two pods, outliers measured once more, then heatmaps and suspects.
//!
//! * `job`: a pair to sweep and the configuration it gets, from the run's resolved one;
//! * `pair`: one pair's sweep, and every pod set up once before the rounds;
//! * `rounds`: the rounds of pairs under their deadlines, and the rounds table;
//! * `summary`: what the run prints at its end.

mod job;
mod pair;
mod rounds;
mod summary;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use results::{Format, RailResult, Report, RowSink};
use tokio_util::sync::CancellationToken;

use self::job::{Job, JobRails, PairConfig};
use self::pair::{set_up_all, Fleet, SetUps};
use self::rounds::{pack, Rounds};
use super::culprit::{self, Threshold};
use super::schedule::{self, Pair, Schedule};
use super::{blame, heatmap, topology, FleetArgs};
use crate::config::generated_by;
use crate::exit::Verdict;
use crate::output::{self, Dest};
use crate::runner::{KubeRunner, Runner};
use crate::sweep::{self, SweepConfig};

/// How a fleet run ended: its exit verdict and what the node verdicts are made of.
#[derive(Debug)]
pub(super) struct FleetEnd {
    /// The exit verdict.
    pub(super) verdict: Verdict,
    /// Every row, re-measured ones appended.
    pub(super) rows: Vec<RailResult>,
    /// The judgement of the latest rows.
    pub(super) judged: culprit::Verdict,
    /// The outlier rules the rows were judged by.
    pub(super) threshold: culprit::Rules,
    /// The run id of the rows.
    pub(super) run_id: String,
    /// With `--pattern topology`: the groups named as culprits (their nodes are not).
    pub(super) groups: Vec<topology::GroupCulprit>,
}

/// The fleet over `pods`, in this order (with `--pattern topology`, `groups` are theirs);
/// `cancel` (Ctrl-C) stops it, keeping the rows.
pub(super) async fn fleet_with<R: Runner>(
    runner: &R,
    args: &FleetArgs,
    cfg: &SweepConfig,
    pods: Vec<String>,
    groups: Option<topology::Groups>,
    cancel: CancellationToken,
) -> Result<FleetEnd> {
    let mut seen = BTreeSet::new();
    for p in &pods {
        if !seen.insert(p) {
            bail!("pod {p} is given twice");
        }
    }
    // `auto` becomes a pattern by the fleet's size, and a random one gets its seed now: the
    // header prints what ran, so that the run can be repeated.
    let pattern = args.pattern.clone().for_fleet(pods.len());
    let schedule =
        Schedule::build_grouped(&pattern, &pods, groups.as_ref().map(|g| g.of.as_slice()))?;
    let threshold = rules(args, cfg);
    let run_id = sweep::new_run_id();
    let (dir, mut sink, mut rounds_tsv) = open_outputs(args, &run_id)?;
    let max_pairs = if args.max_pairs == 0 {
        usize::MAX
    } else {
        args.max_pairs
    };
    let config = PairConfig::resolve(cfg);
    let set_up = tokio::select! {
        s = set_up_all(runner, &config, &pods) => s,
        // Nothing more is measured: the rounds see the Ctrl-C.
        () = cancel.cancelled() => BTreeMap::new(),
    };
    let fleet = Fleet {
        runner,
        config,
        run_id: run_id.clone(),
        dir: dir.clone(),
        set_up,
    };
    results::say!(
        "railsweep: fleet of {} pods ({} runner), pattern {pattern}{}: {} pairs in {} rounds, at most {} pairs at once; run {run_id}, results in {}",
        pods.len(),
        runner.kind(),
        pattern_note(args, &pattern, groups.as_ref()),
        schedule.len(),
        schedule.rounds.len(),
        if args.max_pairs == 0 { "all".to_string() } else { args.max_pairs.to_string() },
        dir.display()
    );
    let mut problems: Vec<String> = Vec::new();
    let t0 = Instant::now();
    let mut rt = Rounds {
        fleet: &fleet,
        args,
        cancel: &cancel,
        max_pairs,
        tsv: &mut rounds_tsv,
        problems: &mut problems,
    };
    rt.run("first", first_jobs(&schedule, &pods), &mut sink)
        .await?;
    let present = present_rails(&fleet.set_up);
    let mut remeasured = 0;
    let mut repaired = None;
    if !args.no_remeasure {
        remeasured =
            measure_outliers_again(&mut rt, &mut sink, threshold, present.as_ref()).await?;
        repaired = confirm_suspects(&mut rt, &mut sink, threshold, present.as_ref()).await?;
    }
    let wall = t0.elapsed().as_secs_f64();

    let mut verdict = culprit::judge(sink.rows(), threshold);
    let group_culprits = match &groups {
        Some(g) => topology::judge(sink.rows(), threshold, &pods, g, &mut verdict),
        None => Vec::new(),
    };
    let absent = culprit::not_present(
        &mut verdict,
        cfg.rails.as_deref().unwrap_or_default(),
        present.as_ref(),
    );
    write_blame(
        &mut sink,
        threshold,
        &verdict,
        &group_culprits,
        &pods,
        groups.as_ref(),
    )?;
    let csv_path = sink.csv_path().to_path_buf();
    let rows: Vec<RailResult> = sink.into_rows();
    let rails = write_heatmaps(&dir, &pods, &rows, threshold.bw)?;
    let rows = write_metrics(args, &dir, rows, &group_culprits)?;
    let (measured, scheduled) = culprit::pairs_measured(
        schedule
            .pairs()
            .map(|p| (pods[p.client].as_str(), pods[p.server].as_str())),
        &rows,
    );
    let nothing = summary::nothing_measured(&rows, &absent, present.as_ref(), &problems);
    summary::print(
        &summary::Counts {
            pods: pods.len(),
            measured,
            scheduled,
            rounds: schedule.rounds.len(),
            rails: rails.len(),
            wall_s: wall,
            remeasured,
            repaired,
        },
        &rows,
        &verdict,
        &group_culprits,
        nothing.is_some(),
        &summary::Files {
            csv: &csv_path,
            dir: &dir,
            metrics: args.metrics.as_ref(),
        },
    )?;
    for p in &problems {
        results::say!("railsweep: {p}");
    }
    if cancel.is_cancelled() {
        results::say!(
            "railsweep: interrupted; what was measured is in {}",
            csv_path.display()
        );
    }
    let failed = culprit::any_not_ok(&rows);
    let exit = if cancel.is_cancelled() {
        Verdict::Interrupted
    } else if let Some(why) = nothing {
        // No verdict at all, which exit 0 (or 1, "a rail failed") would pass off as one.
        bail!("{why}");
    } else {
        Verdict::problems_if(verdict.outliers > 0 || !problems.is_empty() || failed)
    };
    Ok(FleetEnd {
        verdict: exit,
        rows,
        judged: verdict,
        threshold,
        run_id,
        groups: group_culprits,
    })
}

/// The outlier rules: the bandwidth against the line rate (`--min-line-rate-pct`) or the
/// rail's fleet median (`--outlier-pct`), and the latency factor.
fn rules(args: &FleetArgs, cfg: &SweepConfig) -> culprit::Rules {
    culprit::Rules {
        bw: match cfg.test.thresholds.min_line_rate_pct {
            Some(p) => Threshold::LineRatePct(p),
            None => Threshold::MedianPct(args.outlier_pct),
        },
        lat_factor: args.lat_outlier_factor,
    }
}

/// The run's directory (`--out-dir`, or one named after the run), with its rows (fleet.csv,
/// and the JSON snapshot of `--json`) and its rounds table (rounds.tsv) opened.
fn open_outputs(args: &FleetArgs, run_id: &str) -> Result<(PathBuf, RowSink, std::fs::File)> {
    let dir = args
        .out_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("railsweep-fleet-{run_id}")));
    if dir.join("fleet.csv").exists() {
        bail!(
            "{} already has a fleet.csv; give another --out-dir",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir.join("pairs"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let sink = RowSink::create(
        dir.join("fleet.csv"),
        args.out_json_file.as_deref(),
        generated_by(),
    )
    .with_context(|| format!("cannot open {}", dir.join("fleet.csv").display()))?;
    let mut tsv = std::fs::File::create(dir.join("rounds.tsv"))?;
    writeln!(tsv, "{}", results::rounds::COLUMNS.join("\t"))?;
    Ok((dir, sink, tsv))
}

/// What the header adds to the pattern: how `auto` chose, or the groups of `topology`.
fn pattern_note(
    args: &FleetArgs,
    pattern: &schedule::Pattern,
    groups: Option<&topology::Groups>,
) -> String {
    match (pattern, groups) {
        _ if args.pattern == schedule::Pattern::Auto => {
            format!(
                " (auto: all pairs up to {} pods)",
                schedule::AUTO_ALL_PAIRS_MAX
            )
        }
        (schedule::Pattern::Topology { rounds, .. }, Some(g)) => {
            let (inside, cross) = schedule::topology_split(*rounds);
            format!(
                " ({}; up to {inside} round(s) inside the groups, {cross} across)",
                g.describe()
            )
        }
        _ => String::new(),
    }
}

/// The schedule's rounds as jobs over the run's rails.
fn first_jobs(schedule: &Schedule, pods: &[String]) -> Vec<Vec<Job>> {
    schedule
        .rounds
        .iter()
        .enumerate()
        .map(|(r, round)| {
            round
                .iter()
                .map(|&Pair { client, server }| Job {
                    round: r,
                    client: pods[client].clone(),
                    server: pods[server].clone(),
                    rails: JobRails::Run,
                })
                .collect()
        })
        .collect()
}

/// The rails the pods have (`None`: no pod's rails were read). A rail of --rails that none
/// has is not present: never measured again, never the rail's switch.
fn present_rails(set_up: &SetUps) -> Option<BTreeSet<u32>> {
    let read: Vec<_> = set_up.values().flatten().collect();
    (!read.is_empty()).then(|| {
        read.iter()
            .flat_map(|s| s.rails.rails.iter().map(|r| r.rail))
            .collect()
    })
}

/// A rail of the run that no pod has (see [`present_rails`]).
fn nowhere(present: Option<&BTreeSet<u32>>, rail: u32) -> bool {
    present.is_some_and(|p| !p.contains(&rail))
}

/// Outliers measured once more, in rounds of their own; how many. (The rows are read where
/// the sink keeps them, not copied: a fleet of a thousand nodes has thousands of them.)
async fn measure_outliers_again<R: Runner>(
    rt: &mut Rounds<'_, '_, R>,
    sink: &mut RowSink,
    threshold: culprit::Rules,
    present: Option<&BTreeSet<u32>>,
) -> Result<usize> {
    let mut slow = culprit::outliers(sink.rows(), threshold);
    slow.retain(|k| !nowhere(present, k.2));
    if slow.is_empty() || rt.cancel.is_cancelled() {
        return Ok(0);
    }
    let last = culprit::latest(sink.rows());
    let mut by_pair: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for k in &slow {
        if let Some(r) = last.get(k) {
            let (c, s) = culprit::row_nodes(r);
            by_pair.entry((c, s)).or_default().push(k.2);
        }
    }
    results::say!(
        "railsweep: {} outlier(s) among {} pair-rails: measuring them again",
        slow.len(),
        last.len()
    );
    let jobs = by_pair
        .into_iter()
        .map(|((client, server), rails)| Job {
            round: 0,
            client,
            server,
            rails: JobRails::Only(rails),
        })
        .collect();
    rt.run("again", pack(jobs), sink).await?;
    Ok(slow.len())
}

/// Culprits: each node that no fast pair clears on a rail, measured against a node that passed
/// there. (suspect node-rails, extra pairs, rounds) when there were any.
async fn confirm_suspects<R: Runner>(
    rt: &mut Rounds<'_, '_, R>,
    sink: &mut RowSink,
    threshold: culprit::Rules,
    present: Option<&BTreeSet<u32>>,
) -> Result<Option<(usize, usize, usize)>> {
    if rt.cancel.is_cancelled() {
        return Ok(None);
    }
    let mut plan = culprit::repairs(sink.rows(), threshold);
    for r in &mut plan {
        r.rails.retain(|&rail| !nowhere(present, rail));
    }
    plan.retain(|r| !r.rails.is_empty());
    if plan.is_empty() {
        return Ok(None);
    }
    let suspects: BTreeSet<(&str, u32)> = plan
        .iter()
        .flat_map(|r| r.rails.iter().map(|rail| (r.suspect.as_str(), *rail)))
        .collect();
    results::say!(
        "railsweep: {} suspect node-rail(s): measuring each against a node that passed on that rail",
        suspects.len()
    );
    let jobs: Vec<Job> = plan
        .iter()
        .map(|r| Job {
            round: 0,
            client: r.suspect.clone(),
            server: r.partner.clone(),
            rails: JobRails::Only(r.rails.clone()),
        })
        .collect();
    let packed = pack(jobs);
    let repaired = (suspects.len(), plan.len(), packed.len());
    rt.run("confirm", packed, sink).await?;
    Ok(Some(repaired))
}

/// Each slow row's verdict now that the fleet is judged (the node, group or rail blamed),
/// written into the rows; the JSON snapshot (`--json`) carries the group culprits beside them.
fn write_blame(
    sink: &mut RowSink,
    threshold: culprit::Rules,
    verdict: &culprit::Verdict,
    group_culprits: &[topology::GroupCulprit],
    pods: &[String],
    groups: Option<&topology::Groups>,
) -> Result<()> {
    let group_of: BTreeMap<String, String> = match groups {
        Some(g) => pods
            .iter()
            .zip(&g.of)
            .map(|(p, i)| (p.clone(), g.values[*i].clone()))
            .collect(),
        None => BTreeMap::new(),
    };
    let medians = culprit::medians(sink.rows());
    sink.rewrite(|r| {
        let blamed = blame::blame(
            r,
            &medians,
            threshold,
            &verdict.suspects,
            group_culprits,
            &group_of,
        );
        if blamed.is_some() {
            r.judge(None, blamed.as_ref());
        }
    })
    .with_context(|| {
        format!(
            "cannot write the fleet's verdicts into {}",
            sink.csv_path().display()
        )
    })?;
    sink.set_group_culprits(group_culprits.to_vec())
        .with_context(|| {
            format!(
                "cannot write the JSON snapshot of {}",
                sink.csv_path().display()
            )
        })
}

/// heatmap-railN.svg for each rail of the rows (a warning for one that cannot be drawn); the
/// rails.
fn write_heatmaps(
    dir: &std::path::Path,
    pods: &[String],
    rows: &[RailResult],
    bw: Threshold,
) -> Result<BTreeSet<u32>> {
    let rails: BTreeSet<u32> = rows.iter().map(|r| r.rail).collect();
    for rail in &rails {
        let path = dir.join(format!("heatmap-rail{rail}.svg"));
        match heatmap::heatmap(pods, rows, *rail, bw) {
            Ok(svg) => std::fs::write(&path, svg)
                .with_context(|| format!("cannot write {}", path.display()))?,
            Err(e) => results::say!(
                "railsweep: warning: no heatmap for rail {rail}: {}",
                crate::exit::words(&e)
            ),
        }
    }
    Ok(rails)
}

/// The OpenMetrics of the rows, made once and written to fleet.prom and `--metrics`. The rows
/// go into the report and come back out of it, not copied.
fn write_metrics(
    args: &FleetArgs,
    dir: &std::path::Path,
    rows: Vec<RailResult>,
    group_culprits: &[topology::GroupCulprit],
) -> Result<Vec<RailResult>> {
    let mut metrics = Report::new(generated_by(), rows);
    metrics.group_culprits = group_culprits.to_vec();
    let prom = output::export(
        &metrics,
        Format::OpenMetrics,
        Dest::File(&dir.join("fleet.prom")),
    )?;
    if let Some(path) = &args.metrics {
        output::write(&prom, Dest::File(path))?;
    }
    Ok(metrics.rows)
}

/// The pods of the fleet that `-l SELECTOR` finds through the API: the runner's namespace's,
/// or with `all` (`-A`) every namespace's, named `NAMESPACE/NAME`.
pub(super) async fn kube_pods(
    runner: &KubeRunner,
    selector: &str,
    all: bool,
) -> Result<Vec<String>> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, ListParams};
    let api: Api<Pod> = if all {
        Api::all(runner.client())
    } else {
        Api::namespaced(runner.client(), runner.namespace())
    };
    let list = api
        .list(&ListParams::default().labels(selector))
        .await
        .with_context(|| format!("cannot list the pods with labels {selector}"))?;
    let mut names: Vec<String> = list
        .items
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| {
            let name = p.metadata.name.clone()?;
            Some(match (all, &p.metadata.namespace) {
                (true, Some(ns)) => format!("{ns}/{name}"),
                _ => name,
            })
        })
        .collect();
    names.sort();
    if names.is_empty() {
        let where_ = if all {
            "any namespace".to_string()
        } else {
            format!("namespace {}", runner.namespace())
        };
        bail!("no running pod in {where_} has the labels {selector}");
    }
    Ok(names)
}
