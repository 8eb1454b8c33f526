//! The fleet run: rounds of pairs, each pair swept by [`crate::sweep`] exactly as `railsweep
//! run` sweeps two pods, outliers measured once more, then heatmaps and suspects.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use futures::stream::StreamExt;
use results::{Format, RailResult, Report, RowSink};
use tokio_util::sync::CancellationToken;

use super::culprit::{self, Threshold};
use super::schedule::{self, Pair, Schedule};
use super::{blame, heatmap, topology, FleetArgs};
use crate::config::generated_by;
use crate::exit::Verdict;
use crate::output::{self, Dest};
use crate::pair::{sweep_pair, Interruption, PairRun, RowsFile};
use crate::runner::{KubeRunner, Runner};
use crate::sweep::{self, PodSetUp, Pods, Prepared, Rdmabw, SweepConfig};

/// One pair to sweep: client and server pod, and the rails (`None`: all of them).
#[derive(Debug, Clone)]
struct Job {
    round: usize,
    client: String,
    server: String,
    rails: Option<Vec<u32>>,
}

/// How one pair's sweep ended.
#[derive(Debug)]
struct PairEnd {
    job: Job,
    rows: Vec<RailResult>,
    interrupted: Vec<u32>,
    error: Option<String>,
    start: f64,
    end: f64,
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn file_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

struct Fleet<'a, R: Runner> {
    runner: &'a R,
    base: SweepConfig,
    run_id: String,
    dir: PathBuf,
    /// Each pod set up once for all its pairs (rdmabw copied in with `--inject`, checked, its
    /// rails read), or why it could not be.
    set_up: BTreeMap<String, std::result::Result<PodSetUp, String>>,
}

impl<R: Runner> Fleet<'_, R> {
    /// Sweep one pair with the sweep of `railsweep run`, its rows in a file of its own.
    async fn pair(&self, job: Job, attempt: &str, cancel: CancellationToken) -> PairEnd {
        let start = now_s();
        let mut cfg = self.base.clone();
        if job.rails.is_some() {
            cfg.rails = job.rails.clone();
        }
        let pods = Pods {
            client: job.client.clone(),
            server: job.server.clone(),
            rail_gpus: Default::default(),
        };
        let mut end = PairEnd {
            job,
            rows: Vec::new(),
            interrupted: Vec::new(),
            error: None,
            start,
            end: start,
        };
        let mut ready = Vec::new();
        for (side, pod) in [("client", &pods.client), ("server", &pods.server)] {
            match self.set_up.get(pod) {
                Some(Ok(s)) => ready.push(s.clone()),
                Some(Err(e)) => {
                    end.error = Some(format!("{side} pod: {e}"));
                    end.end = now_s();
                    return end;
                }
                // Not set up (Ctrl-C came first): the sweep sees the Ctrl-C.
                None => {}
            }
        }
        let prepared = match <[PodSetUp; 2]>::try_from(ready) {
            Ok([client, server]) => Some(Prepared::of(&pods, client, server)),
            Err(_) => None,
        };
        let path = self.dir.join("pairs").join(format!(
            "{attempt}-r{}-{}-{}.csv",
            end.job.round + 1,
            file_part(&end.job.client),
            file_part(&end.job.server)
        ));
        let outcome = sweep_pair(
            self.runner,
            &pods,
            &cfg,
            &mut RowsFile::create(path, None),
            PairRun {
                run_id: self.run_id.clone(),
                skip: BTreeSet::new(),
                known_mode: None,
                cancel,
                quiet: true,
                announce: false,
                prepared,
            },
        )
        .await;
        match outcome {
            Ok(o) => match o.interrupted {
                Some(Interruption::SetUp) => {
                    end.error = Some("interrupted before the pair was set up".into());
                }
                Some(Interruption::Rails(rails)) => {
                    end.rows = o.rows;
                    end.interrupted = rails;
                }
                None => end.rows = o.rows,
            },
            Err(e) => end.error = Some(crate::exit::words(&e)),
        }
        end.end = now_s();
        end
    }
}

/// Pods set up at once.
const PARALLEL_SET_UPS: usize = 16;

/// Set every pod up once (not once per pair): copy `inject` into it if given, check its
/// rdmabw and read its rails, as a pair's set-up would (`cfg` names the rdmabw in the pods).
/// Each pod's set-up, or why it failed.
async fn set_up_all<R: Runner>(
    runner: &R,
    cfg: &SweepConfig,
    pods: &[String],
    inject: Option<&Path>,
) -> BTreeMap<String, std::result::Result<PodSetUp, String>> {
    let t0 = Instant::now();
    let set_up: BTreeMap<String, std::result::Result<PodSetUp, String>> =
        futures::stream::iter(pods.iter().map(|pod| async move {
            let r = async {
                if let Some(local) = inject {
                    sweep::inject(runner, pod, local).await?;
                }
                sweep::prepare_pod(runner, cfg, pod).await
            }
            .await;
            (pod.clone(), r.map_err(|e| crate::exit::words(&e)))
        }))
        .buffer_unordered(PARALLEL_SET_UPS)
        .collect()
        .await;
    let ok = set_up.values().filter(|r| r.is_ok()).count();
    results::say!(
        "railsweep: {}rails read in {ok} of {} pods ({:.1} s)",
        if inject.is_some() {
            "rdmabw copied in and "
        } else {
            ""
        },
        pods.len(),
        t0.elapsed().as_secs_f64()
    );
    set_up
}

/// Runs rounds of jobs, writing rows, the rounds table and problems as pairs end.
struct Rounds<'a, 'b, R: Runner> {
    fleet: &'a Fleet<'b, R>,
    args: &'a FleetArgs,
    cancel: &'a CancellationToken,
    max_pairs: usize,
    tsv: &'a mut std::fs::File,
    problems: &'a mut Vec<String>,
}

impl<R: Runner> Rounds<'_, '_, R> {
    /// Each round's pairs at the same time (at most `max_pairs`), under the round's deadline.
    async fn run(
        &mut self,
        attempt: &'static str,
        rounds: Vec<Vec<Job>>,
        sink: &mut RowSink,
    ) -> Result<()> {
        let n_rounds = rounds.len();
        for (r, jobs) in rounds.into_iter().enumerate() {
            if self.cancel.is_cancelled() {
                break;
            }
            let deadline = self.args.round_deadline(
                &jobs
                    .iter()
                    .map(|j| j.rails.as_ref().map(Vec::len))
                    .collect::<Vec<_>>(),
                self.max_pairs,
            );
            let round_cancel = self.cancel.child_token();
            let timer = {
                let t = round_cancel.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(deadline).await;
                    t.cancel();
                })
            };
            results::say!(
                "railsweep: {attempt} round {}/{n_rounds}: {} (deadline {:.0} s)",
                r + 1,
                jobs.iter()
                    .map(|j| format!("{}->{}", j.client, j.server))
                    .collect::<Vec<_>>()
                    .join(", "),
                deadline.as_secs_f64()
            );
            let fleet = self.fleet;
            let mut ends = futures::stream::iter(
                jobs.into_iter()
                    .map(|j| fleet.pair(j, attempt, round_cancel.clone())),
            )
            .buffer_unordered(self.max_pairs);
            while let Some(end) = ends.next().await {
                for row in &end.rows {
                    sink.append(row.clone()).with_context(|| {
                        format!("cannot write to {}", sink.csv_path().display())
                    })?;
                }
                let what = format!("{} -> {}", end.job.client, end.job.server);
                let timed_out = round_cancel.is_cancelled() && !self.cancel.is_cancelled();
                if let Some(e) = &end.error {
                    self.problems.push(format!("{what}: {e}"));
                }
                if !end.interrupted.is_empty() {
                    self.problems.push(format!(
                        "{what}: rail(s) {:?} not measured ({})",
                        end.interrupted,
                        if timed_out {
                            "round deadline"
                        } else {
                            "interrupted"
                        }
                    ));
                }
                writeln!(
                    self.tsv,
                    "{attempt}\t{}\t{}\t{}\t{:.3}\t{:.3}\t{}\t{}",
                    end.job.round + 1,
                    end.job.client,
                    end.job.server,
                    end.start,
                    end.end,
                    end.rows.len(),
                    end.error
                        .as_deref()
                        .unwrap_or("")
                        .replace(['\t', '\n'], " ")
                )?;
                results::say!(
                    "railsweep: {attempt} round {}: {what}: {} row(s), {} .. {}{}",
                    r + 1,
                    end.rows.len(),
                    clock(end.start),
                    clock(end.end),
                    end.error
                        .as_deref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                );
            }
            timer.abort();
        }
        Ok(())
    }
}

/// Put jobs into rounds greedily so that no pod is in two jobs of a round.
fn pack(jobs: Vec<Job>) -> Vec<Vec<Job>> {
    let mut rounds: Vec<(BTreeSet<String>, Vec<Job>)> = Vec::new();
    for mut j in jobs {
        let slot = rounds
            .iter()
            .position(|(busy, _)| !busy.contains(&j.client) && !busy.contains(&j.server));
        let i = slot.unwrap_or_else(|| {
            rounds.push((BTreeSet::new(), Vec::new()));
            rounds.len() - 1
        });
        j.round = i;
        rounds[i].0.insert(j.client.clone());
        rounds[i].0.insert(j.server.clone());
        rounds[i].1.push(j);
    }
    rounds.into_iter().map(|(_, j)| j).collect()
}

/// The pods of the fleet: `--pods`, or those `--pods-selector` finds through the API.
pub(super) async fn kube_pods(runner: &KubeRunner, selector: &str) -> Result<Vec<String>> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, ListParams};
    let api: Api<Pod> = Api::namespaced(runner.client(), runner.namespace());
    let list = api
        .list(&ListParams::default().labels(selector))
        .await
        .with_context(|| format!("cannot list the pods with labels {selector}"))?;
    let mut names: Vec<String> = list
        .items
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    if names.is_empty() {
        bail!(
            "no running pod in namespace {} has the labels {selector}",
            runner.namespace()
        );
    }
    Ok(names)
}

fn clock(t: f64) -> String {
    let secs = t.floor();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let base = results::rfc3339_utc(UNIX_EPOCH + Duration::from_secs(secs as u64));
    format!(
        "{}.{:03}Z",
        base.trim_end_matches('Z'),
        ((t - secs) * 1000.0).floor()
    )
}

/// Why the fleet measured nothing, when it did not: no row at all (no pod has rails, or every
/// pair failed to set up: `problems` says how), or rows only of rails no pod has (`absent`;
/// `present`: the rails of the pods whose rails were read, `None` if none were). A set-up
/// error (exit 2) that names the fix.
fn nothing_measured(
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
    let threshold = culprit::Rules {
        bw: match cfg.test.thresholds.min_line_rate_pct {
            Some(p) => Threshold::LineRatePct(p),
            None => Threshold::MedianPct(args.outlier_pct),
        },
        lat_factor: args.lat_outlier_factor,
    };
    let run_id = sweep::new_run_id();
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
    let mut sink = RowSink::create(dir.join("fleet.csv"), args.json.as_deref(), generated_by())
        .with_context(|| format!("cannot open {}", dir.join("fleet.csv").display()))?;
    let mut rounds_tsv = std::fs::File::create(dir.join("rounds.tsv"))?;
    writeln!(
        rounds_tsv,
        "attempt\tround\tclient\tserver\tstart_unix\tend_unix\trows\terror"
    )?;

    let max_pairs = if args.max_pairs == 0 {
        usize::MAX
    } else {
        args.max_pairs
    };
    let mut base = cfg.clone();
    let inject = match &cfg.rdmabw {
        Rdmabw::Inject(local) => {
            base.rdmabw = Rdmabw::Injected;
            Some(local.as_path())
        }
        Rdmabw::InPods(_) | Rdmabw::Injected => None,
    };
    let set_up = tokio::select! {
        s = set_up_all(runner, &base, &pods, inject) => s,
        // Nothing more is measured: the rounds see the Ctrl-C.
        () = cancel.cancelled() => BTreeMap::new(),
    };
    let fleet = Fleet {
        runner,
        base,
        run_id: run_id.clone(),
        dir: dir.clone(),
        set_up,
    };
    results::say!(
        "railsweep: fleet of {} pods ({} runner), pattern {}{}: {} pairs in {} rounds, at most {} pairs at once; run {run_id}, results in {}",
        pods.len(),
        runner.kind(),
        pattern,
        match (&pattern, &groups) {
            _ if args.pattern == schedule::Pattern::Auto => {
                format!(" (auto: all pairs up to {} pods)", schedule::AUTO_ALL_PAIRS_MAX)
            }
            (schedule::Pattern::Topology { rounds, .. }, Some(g)) => {
                let (inside, cross) = schedule::topology_split(*rounds);
                format!(" ({}; up to {inside} round(s) inside the groups, {cross} across)", g.describe())
            }
            _ => String::new(),
        },
        schedule.len(),
        schedule.rounds.len(),
        if args.max_pairs == 0 { "all".to_string() } else { args.max_pairs.to_string() },
        dir.display()
    );
    let first: Vec<Vec<Job>> = schedule
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
                    rails: None,
                })
                .collect()
        })
        .collect();
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
    rt.run("first", first, &mut sink).await?;

    // The rails the pods have (`None`: no pod's rails were read). A rail of --rails that none
    // has is not present: never measured again, never the rail's switch.
    let read: Vec<&PodSetUp> = fleet.set_up.values().flatten().collect();
    let present: Option<BTreeSet<u32>> = (!read.is_empty()).then(|| {
        read.iter()
            .flat_map(|s| s.rails.rails.iter().map(|r| r.rail))
            .collect()
    });
    let nowhere = |rail: u32| present.as_ref().is_some_and(|p| !p.contains(&rail));

    // Outliers: measured once more, in rounds of their own. (The rows are read where the sink
    // keeps them, not copied: a fleet of a thousand nodes has thousands of them.)
    let mut slow = culprit::outliers(sink.rows(), threshold);
    slow.retain(|k| !nowhere(k.2));
    let mut remeasured = 0;
    if !slow.is_empty() && !cancel.is_cancelled() && !args.no_remeasure {
        let last = culprit::latest(sink.rows());
        let mut by_pair: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
        for k in &slow {
            if let Some(r) = last.get(k) {
                let (c, s) = culprit::row_nodes(r);
                by_pair.entry((c, s)).or_default().push(k.2);
            }
        }
        remeasured = slow.len();
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
                rails: Some(rails),
            })
            .collect();
        rt.run("again", pack(jobs), &mut sink).await?;
    }
    // Culprits: each node that no fast pair clears on a rail, against a node that passed there.
    let mut repaired: Option<(usize, usize, usize)> = None;
    if !cancel.is_cancelled() && !args.no_remeasure {
        let mut plan = culprit::repairs(sink.rows(), threshold);
        for r in &mut plan {
            r.rails.retain(|&rail| !nowhere(rail));
        }
        plan.retain(|r| !r.rails.is_empty());
        if !plan.is_empty() {
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
                    rails: Some(r.rails.clone()),
                })
                .collect();
            let packed = pack(jobs);
            repaired = Some((suspects.len(), plan.len(), packed.len()));
            rt.run("confirm", packed, &mut sink).await?;
        }
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
    // Each slow row's verdict now that the fleet is judged: the node, group or rail blamed.
    let group_of: BTreeMap<String, String> = match &groups {
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
            &group_culprits,
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
    // The JSON snapshot (--json) carries them beside the rows.
    sink.set_group_culprits(group_culprits.clone())
        .with_context(|| {
            format!(
                "cannot write the JSON snapshot of {}",
                sink.csv_path().display()
            )
        })?;
    let csv_path = sink.csv_path().to_path_buf();
    let rows: Vec<RailResult> = sink.into_rows();
    let rails: BTreeSet<u32> = rows.iter().map(|r| r.rail).collect();
    for rail in &rails {
        let path = dir.join(format!("heatmap-rail{rail}.svg"));
        match heatmap::heatmap(&pods, &rows, *rail, threshold.bw) {
            Ok(svg) => std::fs::write(&path, svg)
                .with_context(|| format!("cannot write {}", path.display()))?,
            Err(e) => results::say!(
                "railsweep: warning: no heatmap for rail {rail}: {}",
                crate::exit::words(&e)
            ),
        }
    }
    // The rows go into the report for the metrics and come back out of it, not copied.
    let mut metrics = Report::new(generated_by(), rows);
    metrics.group_culprits.clone_from(&group_culprits);
    // Made once, written to fleet.prom and --metrics.
    let prom = output::export(
        &metrics,
        Format::OpenMetrics,
        Dest::File(&dir.join("fleet.prom")),
    )?;
    if let Some(path) = &args.metrics {
        output::write(&prom, Dest::File(path))?;
    }
    drop(prom);
    let rows = metrics.rows;
    let medians = culprit::rail_medians(&rows);
    let mut out = std::io::stdout().lock();
    let (measured, scheduled) = culprit::pairs_measured(
        schedule
            .pairs()
            .map(|p| (pods[p.client].as_str(), pods[p.server].as_str())),
        &rows,
    );
    writeln!(
        out,
        "fleet: {} pods, {} of {} pairs measured in {} rounds, {} rail(s), {} row(s) in {:.1} s; {} outlier(s) measured again",
        pods.len(),
        measured,
        scheduled,
        schedule.rounds.len(),
        rails.len(),
        rows.len(),
        wall,
        remeasured
    )?;
    for (rail, m) in &medians {
        writeln!(out, "rail {rail}: fleet median {m:.3} Gb/s")?;
    }
    if let Some((suspects, pairs, rounds)) = repaired {
        writeln!(
            out,
            "culprits: {suspects} suspect node-rail(s) measured against nodes that passed on that rail: {pairs} extra pair(s) in {rounds} round(s)"
        )?;
    }
    let nothing = nothing_measured(&rows, &absent, present.as_ref(), &problems);
    let mut suspects_txt = String::new();
    if nothing.is_none() && verdict.suspects.is_empty() && group_culprits.is_empty() {
        writeln!(out, "suspects: none")?;
    }
    for g in &group_culprits {
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
    std::fs::write(dir.join("suspects.txt"), &suspects_txt)?;
    writeln!(
        out,
        "results: {} (rows), {}/heatmap-rail*.svg, {}, {} (OpenMetrics){}",
        csv_path.display(),
        dir.display(),
        dir.join("rounds.tsv").display(),
        dir.join("fleet.prom").display(),
        args.metrics
            .as_ref()
            .map(|m| format!(" and {}", m.display()))
            .unwrap_or_default()
    )?;
    out.flush()?;
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

#[cfg(test)]
mod tests {
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
