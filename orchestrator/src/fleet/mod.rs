//! `railsweep fleet`: every rail of every pair of nodes, in rounds of disjoint pairs.
//!
//! * [`schedule`]: which pairs are measured in which round (`all-pairs`, `ring`, `one-to-all`);
//! * [`culprit`]: per-rail fleet medians, outliers, and the likely culprits;
//! * [`heatmap`]: a node-by-node SVG per rail;
//! * `run`: the rounds, each pair swept by [`crate::sweep`] as `railsweep run` sweeps two pods.
#![forbid(unsafe_code)]

pub mod culprit;
pub mod heatmap;
mod nodes;
mod run;
pub mod schedule;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

pub use self::run::run;
use crate::run::{ClusterArgs, RailList, RunnerKind};
use crate::sweep::SweepConfig;

fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("expected a positive number, got `{s}`")),
    }
}

fn rail_list(s: &str) -> Result<RailList, String> {
    crate::plan::parse_rail_list(s).map(RailList)
}

/// Arguments of `railsweep fleet`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
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

Exit status: 0 every pair and rail ok; 1 an outlier, a failed rail or a pair not measured; 2 usage \
or set-up error; 130 interrupted (what was measured is kept).")]
pub struct FleetArgs {
    /// The fleet's pods (or network namespaces with --runner local), in this order.
    #[arg(long, value_name = "POD,POD,...", value_delimiter = ',', num_args = 1.., conflicts_with_all = ["pods_selector", "nodes"])]
    pub pods: Option<Vec<String>>,
    /// Existing pods by label, `label=value` (Kubernetes label selector); running pods only.
    #[arg(long, value_name = "SELECTOR", conflicts_with = "nodes")]
    pub pods_selector: Option<String>,
    /// Create one pod of --mode on each node, run the fleet over them (in node order) and
    /// delete them: the nodes with these labels (`rail-test=true`, sorted by name), or the nodes
    /// named, `NODE,NODE,...` (a value without `=`).
    #[arg(long, value_name = "SELECTOR|NODE,...")]
    pub nodes: Option<String>,
    /// Network mode: with --nodes, the pods to create (hostnetwork, hostnetwork-crio, ipvlan,
    /// sriov); otherwise recorded in the rows [default: inferred, as railsweep run].
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    #[command(flatten)]
    pub access: ClusterArgs,
    /// Container to run in [default: the pod's default container; with --nodes, railsweep's].
    #[arg(short = 'c', long, value_name = "NAME", conflicts_with = "nodes")]
    pub container: Option<String>,
    /// rdmabw inside the pods [default: `rdmabw`; for --runner local, the one next to railsweep].
    #[arg(long, value_name = "PATH")]
    pub rdmabw: Option<String>,
    /// Copy this railsweep's own rdmabw into the pods of each pair (to /tmp) through exec, for
    /// images that have libibverbs but no rdmabw. Needs `sh` and `head` in the image.
    #[arg(long)]
    pub inject: bool,
    /// The local rdmabw binary --inject copies [default: the rdmabw next to railsweep].
    #[arg(long, value_name = "FILE", requires = "inject")]
    pub inject_binary: Option<PathBuf>,

    /// Which pairs: `all-pairs`, `ring` (each pod with the next), or `one-to-all=POD`.
    #[arg(long, value_name = "PATTERN", default_value = "all-pairs")]
    pub pattern: schedule::Pattern,
    /// At most this many pairs at once within a round (0: the whole round).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_pairs: usize,
    /// Seconds a round may take before its pairs are stopped [default: from the rails,
    /// --duration and --margin, plus 60 s of set-up].
    #[arg(long, value_name = "S", value_parser = positive)]
    pub round_deadline: Option<f64>,
    /// Rails to measure: `0,3,5-7` [default: every rail].
    #[arg(long, value_name = "LIST", value_parser = rail_list)]
    pub rails: Option<RailList>,
    /// Measure all rails of a pair at once.
    #[arg(long)]
    pub parallel: bool,
    /// Measured seconds per rail.
    #[arg(short = 'D', long, value_name = "S", default_value_t = 5.0, value_parser = positive)]
    pub duration: f64,
    /// RDMA WRITE message size in bytes.
    #[arg(short = 's', long, value_name = "BYTES", default_value_t = 65536)]
    pub size: u64,
    /// Traffic class (IPv4 TOS byte) for the QPs.
    #[arg(long, value_name = "N")]
    pub tclass: Option<u8>,
    /// Queue pairs per rail.
    #[arg(short = 'q', long, value_name = "N", default_value_t = 1)]
    pub qps: u32,
    /// A (pair, rail) under this percentage of its rail's fleet median is an outlier.
    #[arg(long, value_name = "PCT", default_value_t = 90.0, value_parser = positive)]
    pub outlier_pct: f64,
    /// Judge against the line rate instead: under this percentage of it is an outlier.
    #[arg(long, value_name = "PCT", value_parser = positive)]
    pub min_line_rate_pct: Option<f64>,
    /// Do not measure outliers again.
    #[arg(long)]
    pub no_remeasure: bool,
    /// Seconds a rail may take beyond --duration before it is stopped and recorded as failed.
    #[arg(long, value_name = "S", default_value_t = 15.0, value_parser = positive)]
    pub margin: f64,
    /// TCP port of the server daemons.
    #[arg(short = 'p', long, value_name = "PORT", default_value_t = 18515)]
    pub port: u16,
    /// Directory for the results [default: railsweep-fleet-RUNID].
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Also keep a results JSON snapshot of fleet.csv here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// With --dry-run: print the pods as `yaml` (the default) or as a JSON `List` (`json`).
    #[arg(short = 'o', long, value_name = "FORMAT", requires = "dry_run", value_parser = ["yaml", "json"])]
    pub output: Option<String>,

    /// The pods railsweep creates with --nodes: the options of `railsweep run --nodes`.
    #[command(flatten)]
    pub pod_args: crate::modes::cli::PodArgs,
}

impl FleetArgs {
    /// The sweep of one pair, pods left empty (each pair fills them in).
    fn sweep_config(&self) -> Result<SweepConfig> {
        if self.size == 0 {
            bail!("--size must be at least 1 byte");
        }
        if self.qps == 0 {
            bail!("--qps must be at least 1");
        }
        let sibling = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|p| p.join("rdmabw")))
            .filter(|p| p.is_file());
        let rdmabw = match (&self.rdmabw, self.access.runner, sibling) {
            (Some(p), _, _) => p.clone(),
            (None, RunnerKind::Local, Some(s)) => s.display().to_string(),
            _ => "rdmabw".into(),
        };
        let inject = if self.inject {
            Some(
                self.inject_binary
                    .clone()
                    .or_else(crate::run::sibling_rdmabw)
                    .context(
                        "--inject: no rdmabw next to railsweep; give one with --inject-binary",
                    )?,
            )
        } else {
            None
        };
        Ok(SweepConfig {
            client_pod: String::new(),
            server_pod: String::new(),
            rdmabw,
            inject,
            rails: self.rails.clone().map(|r| r.0),
            port: self.port,
            duration_s: self.duration,
            size_bytes: self.size,
            tclass: self.tclass,
            qps: self.qps,
            mtu: None,
            min_gbps: None,
            min_line_rate_pct: self.min_line_rate_pct,
            warmup_s: None,
            cooldown_s: None,
            parallel: self.parallel,
            retries: 0,
            margin: Duration::from_secs_f64(self.margin),
            mode: None,
            cluster: None,
            gpu_auto: false,
        })
    }

    /// The deadline of a round of jobs with these rail counts (`None`: every rail, taken as
    /// the --rails count or 8).
    fn round_deadline(&self, rails: &[Option<usize>], max_pairs: usize) -> Duration {
        if let Some(s) = self.round_deadline {
            return Duration::from_secs_f64(s);
        }
        let per_rail = self.duration + self.margin;
        let default_rails = self.rails.as_ref().map_or(8, |r| r.0.len());
        let longest = rails
            .iter()
            .map(|n| n.unwrap_or(default_rails).max(1))
            .max()
            .unwrap_or(1);
        #[allow(clippy::cast_precision_loss)]
        let pair_s = if self.parallel {
            per_rail
        } else {
            per_rail * longest as f64
        };
        let waves = rails.len().div_ceil(max_pairs.max(1)).max(1);
        #[allow(clippy::cast_precision_loss)]
        Duration::from_secs_f64(60.0 + pair_s * waves as f64)
    }
}
