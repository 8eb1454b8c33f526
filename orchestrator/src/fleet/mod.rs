//! `railsweep fleet`: every rail of every pair of nodes, in rounds of disjoint pairs.
//!
//! * [`schedule`]: which pairs are measured in which round (`all-pairs`, `ring`, `one-to-all`,
//!   `random`);
//! * [`topology`]: `--pattern topology`: pairs inside and across a node label's groups, and a
//!   group named as the culprit when its uplink is bad;
//! * [`culprit`]: per-rail fleet medians, outliers, and the likely culprits;
//! * [`blame`]: what the culprits mean for each row's verdict (the node, group or rail blamed);
//! * [`heatmap`]: a node-by-node SVG per rail;
//! * `run`: the rounds, each pair swept by [`crate::sweep`] as `railsweep run` sweeps two pods;
//! * [`verdicts`]: the verdict written back onto the nodes (`--apply-verdicts`);
//! * [`verdicts::devicetaints`]: a bad rail that DRA manages as a DeviceTaintRule on its device.
#![forbid(unsafe_code)]

pub mod blame;
pub mod culprit;
pub mod heatmap;
pub mod nodemap;
mod nodes;
mod run;
pub mod schedule;
pub mod topology;
pub mod verdicts;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::config::{heading, positive, ClusterArgs, RunnerKind, SweepArgs};
use crate::exit::Verdict;
use crate::modes;
use crate::pair::watch_ctrl_c;
use crate::runner::{KubeRunner, LocalRunner};
use crate::sweep;

/// Arguments of `railsweep fleet`.
#[derive(Debug, Clone, Args)]
#[command(after_help = format!("\
The pairs of a round are disjoint (no pod in two tests at once) and are measured at the same \
time, each as `railsweep run` measures two pods (one rdmabw server daemon, the rails one after \
another or all at once with --parallel). A (pair, rail) under --outlier-pct of its rail's fleet \
median (or under --min-line-rate-pct of its line rate) is measured once more; a pod's rail slow in \
every pair it joins is named as a suspect. Files in --out-dir: fleet.csv (one row per pair and \
rail, re-measured rows appended), rounds.tsv (when each pair ran), heatmap-railN.svg, \
suspects.txt, pairs/*.csv.

With --mode M --nodes SELECTOR, railsweep creates one pod of mode M per node (the pod options \
of `railsweep run --nodes`: --image, --inject, --toleration, --resource, --networks, ...), waits \
up to --pod-timeout for them, runs the fleet over the ready ones and deletes them at the end \
(also on Ctrl-C; not with --keep-pods). A pod that does not start is explained and deleted, and \
the fleet goes on without its node if at least 2 pods are ready (exit status then at least 1: \
its pairs were not measured); with fewer than 2 ready it stops with exit status 2. --dry-run \
prints the pods instead.

{}

--apply-verdicts labels|taints writes the verdict onto the nodes (Kubernetes runner only): every \
measured node gets railbench.io/rails=ok|degraded|failed and railbench.io/rails-checked=DATE, a \
bad one the annotation railbench.io/rails-evidence (its bad rails, Gb/s, % of the fleet median, \
counter findings); with taints, also railbench.io/bad-rails=RAILS:NoSchedule, unless more than \
--max-taint-pct of the measured nodes would get it (then none does, and railsweep says why). A bad \
rail that a DRA driver publishes as a device of its node (its ifName attribute) gets a \
DeviceTaintRule railbench-NODE-railN (railbench.io/bad-rail:NoSchedule on that device) instead, \
and the node is tainted only when every measured rail of it is bad. Only \
the culprits get a verdict other than ok. With --dry-run the fleet runs and the patches are \
printed on stdout (one JSON line per node) instead of sent.

--pattern topology --topology-label KEY groups the pods by that label of their nodes (a rack or \
leaf switch; nodes without it form the group KEY=(none), which the header says) and measures half \
the rounds inside the groups, half across them (topology = topology:8: up to 4 and 4). A group \
whose cross-group pairs on a rail are all slow while its inside pairs are fine is named, \
`suspect: group KEY=VALUE: cross-group pairs slow on rail N ..., inside pairs fine ...: suspect \
its uplink`, and its nodes are not (nor labelled or tainted for it); bad nodes are still named \
as nodes. Exit status 1 then, as for any outlier.

Examples:
  # every pair of the running pods labelled app=rdmabw, 5 s per rail, lossless class
  railsweep fleet -l app=rdmabw --window 5 --tclass 41
  # a hostNetwork pod on each node labelled rail-test=true, and the verdict as node labels
  railsweep fleet --mode hostnetwork --nodes rail-test=true --apply-verdicts labels
  # 8 rounds of random pairs, repeatable with seed 42
  railsweep fleet -l app=rdmabw --pattern random:8:42
  # pairs inside and across racks, to tell a rack's uplink from its nodes
  railsweep fleet -l app=rdmabw --pattern topology --topology-label example.com/rack
  # network namespaces of this machine, each with the next
  railsweep fleet --runner local --pods podA,podB,podC,podD --window 1 --pattern ring",
    crate::exit::help(
        "every pair and rail ok",
        "an outlier, a failed rail or a pair not measured",
        "usage or set-up error, or nothing measured (no pod has the rails asked for)",
        Some("interrupted (what was measured is kept)"),
    )
))]
// The test parameters are `railsweep run`'s; these say what they mean for a fleet.
#[command(mut_arg("rdmabw", |a| a.help(
    "rdmabw inside the pods [default: `rdmabw`; for --runner local, the one next to railsweep]"
)))]
#[command(mut_arg("inject", |a| a.help(
    "Copy this railsweep's own rdmabw into the pods of each pair (to /tmp) through exec, for \
     images that have libibverbs but no rdmabw. Needs `sh` and `head` in the image."
)))]
#[command(mut_arg("rails", |a| a.help("Rails to measure: `0,3,5-7` [default: every rail].")))]
#[command(mut_arg("parallel", |a| a.help("Measure all rails of a pair at once.")))]
#[command(mut_arg("tclass", |a| a.help("Traffic class (IPv4 TOS byte) for the QPs.")))]
#[command(mut_arg("min_line_rate_pct", |a| a.help(
    "Judge against the line rate instead: under this percentage of it is an outlier."
)))]
#[command(mut_arg("deadline_slack", |a| a
    .help("Seconds a rail may take beyond its test before it is stopped and recorded as failed.")
    .value_parser(crate::config::seconds_positive)))]
#[command(mut_arg("port", |a| a.help("TCP port of the server daemons.")))]
#[command(mut_arg("output", |a| a.help(
    "What to print on stdout, kubectl's -o: `table`, the summary (the rows are in --out-dir); \
     with --dry-run, the pods as `yaml` (the default) or a JSON `List` (`json`)."
)))]
#[command(mut_arg("json", |a| a.hide(true)))]
#[command(mut_arg("csv", |a| a.hide(true)))]
#[command(mut_arg("output_file", |a| a.hide(true)))]
pub struct FleetArgs {
    /// The fleet's pods (or network namespaces with --runner local), in this order.
    #[arg(help_heading = heading::PODS, long, value_name = "POD,POD,...", value_delimiter = ',', num_args = 1.., conflicts_with_all = ["pods_selector", "nodes"])]
    pub pods: Option<Vec<String>>,
    /// Existing pods by label, `label=value` (Kubernetes label selector, as kubectl's `-l`);
    /// running pods only.
    #[arg(help_heading = heading::PODS,
        short = 'l',
        long = "selector",
        alias = "pods-selector",
        value_name = "SELECTOR",
        conflicts_with = "nodes"
    )]
    pub pods_selector: Option<String>,
    /// Create one pod of --mode on each node, run the fleet over them (in node order) and
    /// delete them: the nodes with these labels (`rail-test=true`, sorted by name), or the nodes
    /// named, `NODE,NODE,...` (a value without `=`).
    #[arg(help_heading = heading::PODS, long, value_name = "SELECTOR|NODE,...")]
    pub nodes: Option<String>,
    /// Network mode: with --nodes, the pods to create (hostnetwork, hostnetwork-crio, ipvlan,
    /// sriov); otherwise recorded in the rows [default: inferred, as railsweep run].
    #[arg(help_heading = heading::PODS, long, value_name = "MODE")]
    pub mode: Option<String>,
    #[command(flatten)]
    pub access: ClusterArgs,
    /// Container to run in [default: the pod's default container; with --nodes, railsweep's].
    #[arg(help_heading = heading::PODS, short = 'c', long, value_name = "NAME", conflicts_with = "nodes")]
    pub container: Option<String>,
    /// Which pairs: `all-pairs`, `ring` (each pod with the next), `random[:ROUNDS[:SEED]]`
    /// (ROUNDS rounds of random disjoint pairs, default 8, for fleets too large for all pairs;
    /// the header prints the seed that repeats it), `topology[:ROUNDS[:SEED]]` (with
    /// --topology-label: half the rounds inside the label's groups, half across; default 8),
    /// `one-to-all=POD`, or `auto`: all pairs up to 64 pods, random:8 above.
    #[arg(help_heading = heading::PAIRS, long, value_name = "PATTERN", default_value = "auto")]
    pub pattern: schedule::Pattern,
    /// With --pattern topology: the node label that groups the nodes, a rack or leaf switch
    /// (read from each pod's node; nodes without it form the group KEY=(none)). A group whose
    /// cross-group pairs are all slow while its inside pairs are fine is named as the culprit
    /// (its uplink), not its nodes.
    #[arg(help_heading = heading::PAIRS, long, value_name = "KEY")]
    pub topology_label: Option<String>,
    /// At most this many pairs at once within a round (0: the whole round).
    #[arg(help_heading = heading::PAIRS, long, value_name = "N", default_value_t = 0)]
    pub max_pairs: usize,
    /// Seconds a round may take before its pairs are stopped [default: from the rails,
    /// the test's length and --deadline-slack, plus 60 s of set-up].
    #[arg(help_heading = heading::PAIRS, long, value_name = "S", value_parser = crate::config::seconds_positive)]
    pub round_deadline: Option<f64>,
    /// A (pair, rail) under this percentage of its rail's fleet median is an outlier.
    #[arg(help_heading = heading::VERDICTS, long, value_name = "PCT", default_value_t = 90.0, value_parser = positive)]
    pub outlier_pct: f64,
    /// With --test bw,lat: a (pair, rail) whose p99 latency is above this many times its rail's
    /// fleet median p99 is an outlier (slow to answer), measured again and judged as a slow one.
    #[arg(help_heading = heading::VERDICTS,
        long,
        value_name = "K",
        default_value_t = culprit::DEFAULT_LAT_OUTLIER_FACTOR,
        value_parser = positive
    )]
    pub lat_outlier_factor: f64,
    /// Do not measure outliers again, nor the suspects against nodes that passed.
    #[arg(help_heading = heading::VERDICTS, long)]
    pub no_remeasure: bool,
    /// Directory for the results [default: railsweep-fleet-RUNID].
    #[arg(help_heading = heading::OUTPUT, long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Also keep a results JSON snapshot of fleet.csv in FILE (rdmabw's --out_json_file).
    #[arg(help_heading = heading::OUTPUT, long = "out_json_file", alias = "out-json-file", value_name = "FILE")]
    pub out_json_file: Option<PathBuf>,
    /// Also write the fleet's OpenMetrics (fleet.prom of --out-dir: a sample per node pair and
    /// rail) to FILE, replaced at once: e.g. a file in node-exporter's textfile-collector
    /// directory, or for a Pushgateway.
    #[arg(help_heading = heading::OUTPUT, long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// -o FORMAT: the summary (`table`), or with --dry-run the pods as `yaml` or `json`.
    #[command(flatten)]
    pub out: crate::config::FormatFlags,

    /// Write the verdict onto the measured nodes: `labels` (railbench.io/rails=ok|degraded|failed,
    /// railbench.io/rails-checked=DATE, and on a bad node the railbench.io/rails-evidence
    /// annotation), `taints` (the labels, and railbench.io/bad-rails=RAILS:NoSchedule on the
    /// nodes with bad rails), or `none`.
    #[arg(help_heading = heading::VERDICTS, long, value_name = "WHAT", value_enum, default_value = "none")]
    pub apply_verdicts: verdicts::ApplyVerdicts,
    /// With --apply-verdicts taints: taint no node when more than this percentage of the
    /// measured nodes have bad rails (a problem of the fabric, more likely than of the nodes).
    #[arg(help_heading = heading::VERDICTS, long, value_name = "PCT", default_value_t = 10.0, value_parser = percentage)]
    pub max_taint_pct: f64,
    /// With --apply-verdicts: remove railsweep's taint from the measured nodes that pass now.
    #[arg(help_heading = heading::VERDICTS, long)]
    pub untaint_passed: bool,

    /// The test parameters, as `railsweep run` takes them.
    #[command(flatten)]
    pub sweep: SweepArgs,

    /// The pods railsweep creates with --nodes: the options of `railsweep run --nodes`.
    #[command(flatten)]
    pub pod_args: crate::modes::cli::PodArgs,
}

/// A percentage from 0 to 100.
fn percentage(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("{s} is not a percentage from 0 to 100")),
    }
}

impl FleetArgs {
    /// `-o`: `table` (the summary), or with `--dry-run` the pods' `yaml` (the default) or
    /// `json`. The fleet's rows are files of `--out-dir`, not stdout.
    pub(crate) fn stdout_format(&self) -> Result<crate::config::OutFormat> {
        use crate::config::OutFormat::{Json, Table, Yaml};
        if self.out.output_file.is_some() {
            bail!(
                "--output-file: a fleet writes several files (fleet.csv, its counters and \
                 findings, fleet.json, fleet.prom): give their directory with --out-dir DIR"
            );
        }
        if self.dry_run_pods() {
            return Ok(self
                .out
                .format_in("fleet --dry-run", &[Yaml, Json])?
                .unwrap_or(Yaml));
        }
        match self.out.format() {
            Some(f @ (Json | crate::config::OutFormat::Csv)) => bail!(
                "-o {}: a fleet's rows are files of --out-dir (fleet.csv, and fleet.json with \
                 --out_json_file FILE for a copy of it elsewhere); its stdout is the summary \
                 (-o table), or with --dry-run the pods (-o yaml, -o json)",
                f.name()
            ),
            _ => Ok(self.out.format_in("fleet", &[Table])?.unwrap_or(Table)),
        }
    }

    /// `--topology-label`, checked against `--pattern` and the runner: the label when the
    /// pattern is `topology`.
    fn topology_label(&self) -> Result<Option<&str>> {
        let topology = matches!(self.pattern, schedule::Pattern::Topology { .. });
        match (topology, self.topology_label.as_deref()) {
            (true, None) => bail!(
                "--pattern topology groups the nodes by a node label: give --topology-label KEY \
                 (a rack or leaf label of your nodes, e.g. --topology-label example.com/rack)"
            ),
            (true, Some("")) => bail!("--topology-label needs a label key, e.g. example.com/rack"),
            (false, Some(_)) => bail!(
                "--topology-label goes with --pattern topology: add --pattern topology, or leave \
                 --topology-label out"
            ),
            (true, Some(_)) if self.access.runner != RunnerKind::Kube => bail!(
                "--pattern topology reads the labels of the pods' nodes through the Kubernetes \
                 API: it cannot go with --runner local (give another --pattern)"
            ),
            (_, label) => Ok(label),
        }
    }

    /// The verdict options, checked against the other flags.
    fn verdict_options(&self) -> Result<verdicts::Options> {
        use verdicts::ApplyVerdicts;
        if self.apply_verdicts == ApplyVerdicts::None && self.untaint_passed {
            bail!("--untaint-passed changes the nodes' verdicts: give --apply-verdicts labels or taints with it");
        }
        if self.apply_verdicts != ApplyVerdicts::None && self.access.runner != RunnerKind::Kube {
            bail!(
                "--apply-verdicts writes onto Kubernetes nodes: it cannot go with --runner local"
            );
        }
        let today = results::rfc3339_utc(std::time::SystemTime::now());
        Ok(verdicts::Options {
            apply: self.apply_verdicts,
            max_taint_pct: self.max_taint_pct,
            untaint_passed: self.untaint_passed,
            dry_run: self.pod_args.dry_run,
            date: today.get(..10).unwrap_or(&today).to_string(),
            run_id: String::new(),
        })
    }

    /// Whether `--dry-run` prints the pods (without --apply-verdicts) rather than the patches.
    fn dry_run_pods(&self) -> bool {
        self.pod_args.dry_run && self.apply_verdicts == verdicts::ApplyVerdicts::None
    }

    /// The deadline of a round of jobs with these rail counts (`None`: every rail, taken as
    /// the --rails count or 8), each rail's attempt taking `cfg`'s deadlines (its bandwidth
    /// test's, and its latency test's with `--test bw,lat`).
    fn round_deadline(
        &self,
        cfg: &crate::sweep::SweepConfig,
        rails: &[Option<usize>],
        max_pairs: usize,
    ) -> Duration {
        if let Some(s) = self.round_deadline {
            return Duration::from_secs_f64(s);
        }
        let lat = cfg
            .latency
            .as_ref()
            .map_or(Duration::ZERO, |_| cfg.lat_deadline());
        let per_rail = (cfg.deadline() + lat).as_secs_f64();
        let default_rails = self.sweep.rails.as_ref().map_or(8, |r| r.0.len());
        let longest = rails
            .iter()
            .map(|n| n.unwrap_or(default_rails).max(1))
            .max()
            .unwrap_or(1);
        #[allow(clippy::cast_precision_loss)]
        let pair_s = if self.sweep.parallel {
            per_rail
        } else {
            per_rail * longest as f64
        };
        let waves = rails.len().div_ceil(max_pairs.max(1)).max(1);
        #[allow(clippy::cast_precision_loss)]
        Duration::from_secs_f64(60.0 + pair_s * waves as f64)
    }
}

/// `railsweep fleet`: over the pods railsweep creates (`--mode M --nodes SELECTOR`), or over
/// existing ones.
pub async fn run(args: FleetArgs) -> Result<Verdict> {
    if args.sweep.server_tool != crate::sweep::Tool::Rdmabw
        || args.sweep.client_tool != crate::sweep::Tool::Rdmabw
    {
        bail!(
            "--server-tool/--client-tool: a fleet serves every pair with rdmabw (its pods serve \
             and measure by turns); measure a pair against perftest with `railsweep run \
             --server-tool ib_write_bw`"
        );
    }
    args.access.check(args.pods_selector.is_some())?;
    let verdict_opts = args.verdict_options()?;
    args.topology_label()?;
    args.stdout_format()?;
    if let Some(nodes) = &args.nodes {
        return over_nodes(&args, nodes, verdict_opts).await;
    }
    if args.dry_run_pods() {
        bail!("--dry-run prints the pods railsweep would create: give --mode M --nodes SELECTOR with it (or --apply-verdicts, to print the nodes' patches)");
    }
    let mode = match &args.mode {
        Some(m) => Some(m.parse::<results::NetworkMode>().context("--mode")?),
        None => None,
    };
    let cfg = args.sweep.resolve(args.access.runner, mode, None)?;
    match args.access.runner {
        RunnerKind::Local => {
            let pods = args
                .pods
                .clone()
                .context("--runner local needs --pods POD,POD,... (network namespaces)")?;
            let cancel = CancellationToken::new();
            watch_ctrl_c(cancel.clone());
            Ok(
                run::fleet_with(&LocalRunner::new(), &args, &cfg, pods, None, cancel)
                    .await?
                    .verdict,
            )
        }
        RunnerKind::Kube => {
            let target = args.access.kube_target(args.container.clone());
            let runner = KubeRunner::connect_announced(&target).await?;
            let pods = match (&args.pods, &args.pods_selector) {
                (Some(p), _) => p.clone(),
                (None, Some(sel)) => run::kube_pods(&runner, sel, args.access.all_namespaces).await?,
                (None, None) => bail!(
                    "give the fleet's pods: -l/--selector label=value, --pods POD,POD,..., or --mode M --nodes SELECTOR \
                     (railsweep creates one pod per node)"
                ),
            };
            let groups = groups_of(&runner, &args, &pods).await?;
            let cancel = CancellationToken::new();
            watch_ctrl_c(cancel.clone());
            let end = run::fleet_with(&runner, &args, &cfg, pods, groups, cancel).await?;
            write_verdicts(&runner, &end, verdict_opts).await?;
            Ok(end.verdict)
        }
    }
}

/// With `--pattern topology`: the pods' groups by their nodes' `--topology-label`.
async fn groups_of(
    runner: &KubeRunner,
    args: &FleetArgs,
    pods: &[String],
) -> Result<Option<topology::Groups>> {
    let Some(label) = args.topology_label()? else {
        return Ok(None);
    };
    let values = topology::node_labels(runner.client(), runner.namespace(), pods, label).await?;
    Ok(Some(topology::Groups::from_values(label, &values)))
}

/// `--apply-verdicts`: the verdict on every measured node, written (or printed) after the
/// fleet; not after Ctrl-C.
async fn write_verdicts(
    runner: &KubeRunner,
    end: &run::FleetEnd,
    mut opts: verdicts::Options,
) -> Result<()> {
    if opts.apply == verdicts::ApplyVerdicts::None {
        return Ok(());
    }
    if end.verdict == Verdict::Interrupted {
        results::say!("railsweep: interrupted: no verdict is written onto the nodes");
        return Ok(());
    }
    opts.run_id.clone_from(&end.run_id);
    let nodes = verdicts::node_verdicts(&end.rows, &end.judged, end.threshold);
    let mut out = std::io::stdout();
    let applied = verdicts::apply(runner.client(), &nodes, &opts, &mut out).await?;
    std::io::Write::flush(&mut out)?;
    for line in verdicts::summary(&nodes, &applied, &opts) {
        results::say!("railsweep: {line}");
    }
    for g in &end.groups {
        eprintln!(
            "railsweep: verdicts: group {} is the suspect on rail {} (its uplink): its nodes are not marked for it",
            g.name(),
            g.rail
        );
    }
    Ok(())
}

/// `railsweep fleet --mode M --nodes SELECTOR` (and its `--dry-run`): the pods, the fleet over
/// the ready ones in node order, in railsweep's container, and the pods' deletion.
async fn over_nodes(
    args: &FleetArgs,
    nodes: &str,
    verdict_opts: verdicts::Options,
) -> Result<Verdict> {
    let mode = nodes::mode_of(args)?;
    if args.access.runner != RunnerKind::Kube {
        bail!("--nodes creates pods through the Kubernetes API: it cannot go with --runner local (give --pods instead)");
    }
    let choice = nodes::NodeChoice::parse(nodes)?;
    let run_id = args
        .pod_args
        .run_id
        .clone()
        .unwrap_or_else(sweep::new_run_id);
    let target = args.access.kube_target(Some(modes::CONTAINER.to_string()));
    if args.dry_run_pods() {
        return nodes::dry_run(args, &target, mode, choice, &run_id).await;
    }
    let mut sweep = args.sweep.clone();
    args.pod_args.default_injects(&mut sweep)?;
    let cfg = sweep.resolve(RunnerKind::Kube, Some(mode.network_mode()), None)?;
    if let Some(dir) = &args.out_dir {
        if dir.join("fleet.csv").exists() {
            bail!(
                "{} already has a fleet.csv; give another --out-dir",
                dir.display()
            );
        }
    }
    let runner = KubeRunner::connect_announced(&target).await?;
    // One Ctrl-C watch for the whole command: it stops the start of the pods, then the fleet.
    let cancel = CancellationToken::new();
    watch_ctrl_c(cancel.clone());
    let Some(pods) = nodes::start(&runner, args, mode, choice, &run_id, &cancel).await? else {
        return Ok(Verdict::Interrupted);
    };
    let outcome = match groups_of(&runner, args, &pods.ready).await {
        Ok(groups) => {
            run::fleet_with(
                &runner,
                args,
                &cfg,
                pods.ready.clone(),
                groups,
                cancel.clone(),
            )
            .await
        }
        Err(e) => Err(e),
    };
    let some_not_started = pods.some_not_started();
    if pods.finish(cancel.is_cancelled()).await {
        // Ctrl-C during the clean-up: interrupted (exit 130), whatever the fleet found.
        if let Err(e) = &outcome {
            results::say!("railsweep: error: {}", crate::exit::words(e));
        }
        return Ok(Verdict::Interrupted);
    }
    let end = outcome?;
    write_verdicts(&runner, &end, verdict_opts).await?;
    // The pairs of a pod that did not start were not measured.
    Ok(end.verdict.and(Verdict::problems_if(some_not_started)))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        fleet: super::FleetArgs,
    }

    /// Issue 33: kubectl's `-l`/`--selector` picks the fleet's pods; perftest's post list stays
    /// reachable as `--post_list`, and `-l` means nothing else in railsweep.
    #[test]
    fn dash_l_is_kubectls_selector() {
        for flag in ["-l", "--selector", "--pods-selector"] {
            let t = T::try_parse_from(["t", flag, "app=rdmabw"]).expect("parses");
            assert_eq!(
                t.fleet.pods_selector.as_deref(),
                Some("app=rdmabw"),
                "{flag}"
            );
        }
        let t = T::try_parse_from(["t", "-l", "app=x", "--post_list", "4"]).expect("parses");
        assert_eq!(t.fleet.sweep.test.queue.post_list, Some(4));
    }
}
