//! `railsweep compare --modes hostnetwork,ipvlan,sriov --nodes A,B`: the pod pair of each
//! mode in turn, with the same sweep parameters, then one comparison of all of them.
//!
//! Files, from `--output-file FILE.csv` (default `railsweep-compare-RUN.csv`): each mode's rows as
//! `FILE.MODE.csv` while it runs (as `railsweep run` writes them, so a crash loses nothing),
//! then every mode's rows in `FILE.csv`, the markdown comparison in `FILE.md` (also on
//! stdout) and the chart in `FILE.svg`. A mode whose pods do not start is explained and
//! skipped; the others still run.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use results::{Format, Report};

use crate::config::{generated_by, RunnerKind};
use crate::exit::Verdict;
use crate::managed;
use crate::modes::Mode;
use crate::output::{self, Dest};
use crate::run::{sweep_mode, RunArgs};
use crate::sweep::{self, SweepConfig};

/// The end of `railsweep compare --help`.
const COMPARE_EXAMPLES: &str = "\
Examples:
  # hostNetwork against IPvlan pods on the same two nodes, in the lossless traffic class
  railsweep compare --modes hostnetwork,ipvlan --nodes node-a,node-b --tclass 41 \\
      --networks 'ipvlan:rdma-ipvlan-{0..15}' --rdma-resource 'ipvlan:nvidia.com/hostdev=16'
  # the pods each mode would create, without creating them
  railsweep compare --modes hostnetwork,sriov --dry-run \\
      --networks 'sriov:sriov-rdma-rail-{0..15}' \\
      --rdma-resource 'sriov:nvidia.com/sriov_rdma_rail{0..15}=1'
  # every mode's rows in modes.csv, the comparison in modes.md and modes.svg
  railsweep compare --modes hostnetwork,hostnetwork-crio --nodes node-a,node-b \\
      --uverbs 0-17 --output-file modes.csv";

/// Arguments of `railsweep compare`: the modes, and every `railsweep run` option for the
/// pods and the sweep (`--nodes` is required; `--mode` is replaced by `--modes`).
#[derive(Debug, Args)]
#[command(after_help = format!("\
Each mode needs its own settings where it has any: give them all at once, with a MODE: prefix \
where they differ, e.g. --uverbs 0-17 --networks 'ipvlan:rdma-ipvlan-{{0..15}}' --rdma-resource \
'ipvlan:nvidia.com/hostdev=16' --networks 'sriov:sriov-rdma-rail-{{0..15}}' --rdma-resource \
'sriov:nvidia.com/sriov_rdma_rail{{0..15}}=1'.\n\n{}\n\n{}",
    crate::exit::help(
        "every mode ran and every rail is ok",
        "a mode did not start, or a rail failed or fell below a threshold",
        "usage or set-up error",
        Some("interrupted (the pods are deleted)"),
    ),
    COMPARE_EXAMPLES
))]
// What compare refuses of `railsweep run`'s options is not listed (each is still refused by
// name when given): it creates its pods (no --server-pod, --client-pod, -c; --modes, not
// --mode), through the API server (no --runner local), and writes its own files (no --resume,
// --out_json_file).
#[command(mut_arg("server_pod", |a| a.hide(true)))]
#[command(mut_arg("client_pod", |a| a.hide(true)))]
#[command(mut_arg("container", |a| a.hide(true)))]
#[command(mut_arg("mode", |a| a.hide(true)))]
#[command(mut_arg("runner", |a| a.hide(true)))]
#[command(mut_arg("resume", |a| a.hide(true)))]
#[command(mut_arg("out_json_file", |a| a.hide(true)))]
pub struct CompareArgs {
    /// The modes, run one after the other in this order.
    #[arg(
        long,
        value_delimiter = ',',
        required = true,
        value_name = "MODE,...",
        help_heading = crate::config::heading::PODS
    )]
    pub modes: Vec<Mode>,
    /// Everything `railsweep run` takes.
    #[command(flatten)]
    pub run: RunArgs,
    /// --title, --width: the chart's (`FILE.svg`).
    #[command(flatten)]
    pub chart: crate::config::ChartArgs,
}

/// `FILE.csv` -> `FILE.EXT`.
fn sibling(csv: &Path, ext: &str) -> PathBuf {
    csv.with_extension(ext)
}

/// Run `railsweep compare`.
pub async fn run(args: CompareArgs) -> Result<Verdict> {
    let base = &args.run;
    base.access.check(false)?;
    if base.nodes.is_none() && !base.pods.dry_run {
        bail!("compare creates its pods: give --nodes NODE_A,NODE_B (client on A, server on B)");
    }
    if base.mode.is_some() {
        bail!("compare takes --modes, not --mode");
    }
    if base.resume.is_some() || base.out_json_file.is_some() {
        bail!("compare writes its own files: --resume and --out_json_file are for railsweep run");
    }
    let stdout = if base.pods.dry_run {
        crate::config::OutFormat::Table
    } else {
        base.stdout_format()?
    };
    if base.access.runner != RunnerKind::Kube {
        bail!("compare creates pods through the Kubernetes API: it cannot go with --runner local");
    }
    let mut modes = args.modes.clone();
    modes.dedup();
    if base.pods.dry_run {
        // What a run would refuse, a dry run refuses too, for every mode before any is printed
        // (half of the output would otherwise be applied with `kubectl apply`).
        for m in &modes {
            base.sweep
                .resolve(
                    RunnerKind::Kube,
                    Some(m.network_mode()),
                    base.cluster_label.clone(),
                )
                .with_context(|| format!("mode {m}"))?;
        }
        return managed::dry_run(
            &base.pair_spec(),
            &base.access,
            base.dry_run_format()?,
            &modes,
        );
    }
    // One complete configuration per mode (its rows recorded under it), resolved before the
    // first pod is made.
    let mut sweep = base.sweep.clone();
    base.pods.default_injects(&mut sweep)?;
    let cfgs = modes
        .iter()
        .map(|m| {
            sweep.resolve(
                RunnerKind::Kube,
                Some(m.network_mode()),
                base.cluster_label.clone(),
            )
        })
        .collect::<Result<Vec<SweepConfig>>>()?;

    let run_id = sweep::new_run_id();
    let csv = base
        .out
        .output_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("railsweep-compare-{run_id}.csv")));
    let per_mode = |m: Mode| sibling(&csv, &format!("{m}.csv"));
    for p in std::iter::once(csv.clone())
        .chain([sibling(&csv, "md"), sibling(&csv, "svg")])
        .chain(modes.iter().map(|m| per_mode(*m)))
    {
        if p.exists() {
            bail!("{} exists; give another --output-file", p.display());
        }
    }
    // Every mode's options are checked before the first pod is made.
    for m in &modes {
        let opts = base.pods.pod_options("default", base.sweep.port)?;
        crate::modes::check(*m, &opts).with_context(|| format!("mode {m}"))?;
    }

    let runner = managed::connect(&base.access).await?;
    let mut failed_modes = Vec::new();
    let mut interrupted = false;
    let mut rows = Vec::new();
    for (i, (m, mode_cfg)) in modes.iter().zip(&cfgs).enumerate() {
        results::say!("railsweep: compare: mode {} of {}: {m}", i + 1, modes.len());
        match sweep_mode(&runner, base, mode_cfg, *m, Some(&per_mode(*m))).await {
            Ok(outcome) => {
                rows.extend(outcome.rows);
                if outcome.interrupted.is_some() {
                    interrupted = true;
                    break;
                }
            }
            Err(e) => {
                if !crate::exit::already_said(&e) {
                    results::say!("railsweep: error: {}", crate::exit::words(&e));
                }
                failed_modes.push(*m);
            }
        }
    }

    crate::run::write_metrics(base.metrics.as_deref(), &rows)?;
    let report = Report::new(generated_by(), rows).with_chart(args.chart.options());
    for (format, path) in [
        (Format::Csv, csv.clone()),
        (Format::Markdown, sibling(&csv, "md")),
        (Format::Svg, sibling(&csv, "svg")),
    ] {
        output::export(&report, format, Dest::File(&path))?;
    }
    // The comparison on stdout: markdown (`table`, the default), or the rows as -o says.
    let mut out = std::io::stdout().lock();
    let format = stdout.results_format().unwrap_or(Format::Markdown);
    output::export(&report, format, Dest::Stream(&mut out))?;
    results::say!(
        "railsweep: compare: {} rows of {} mode(s) in {}; comparison in {} and {}",
        report.rows.len(),
        modes.len() - failed_modes.len(),
        csv.display(),
        sibling(&csv, "md").display(),
        sibling(&csv, "svg").display()
    );
    if interrupted {
        return Ok(Verdict::Interrupted);
    }
    if !failed_modes.is_empty() {
        let names: Vec<&str> = failed_modes.iter().map(|m| m.as_str()).collect();
        results::say!(
            "railsweep: compare: mode(s) {} did not run (see above)",
            names.join(", ")
        );
        return Ok(Verdict::Problems);
    }
    Ok(Verdict::problems_if(report.has_problems()))
}
