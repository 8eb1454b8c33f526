//! `railsweep run`: the command line of a sweep, and what it prints.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use results::{Format, NetworkMode, Report};
use tokio_util::sync::CancellationToken;

use crate::config::{generated_by, heading, ClusterArgs, OutFormat, RunnerKind, SweepArgs};
use crate::exit::Verdict;
use crate::managed::{self, PairSpec};
use crate::modes::Mode;
use crate::output;
use crate::pair::{sweep_pair, watch_ctrl_c, Interruption, PairRun, RowsFile, SweepOutcome};
use crate::runner::{KubeRunner, LocalRunner, Runner};
use crate::sweep::{self, Pods, SweepConfig};

/// The end of `railsweep run --help`.
const RUN_EXAMPLES: &str = "\
Examples:
  # every rail between two existing pods, 5 s each, in the lossless traffic class
  railsweep run -n railbench --client-pod rdma-a --server-pod rdma-b --tclass 41
  # some rails, all at once, judged against 90% of the line rate, into sweep.csv
  railsweep run -n railbench --client-pod rdma-a --server-pod rdma-b --rails 0,3,5-7 --parallel \\
      --min-line-rate-pct 90 --output-file sweep.csv
  # measure only the rails sweep.csv has no row for yet
  railsweep run -n railbench --client-pod rdma-a --server-pod rdma-b --resume sweep.csv
  # images with libibverbs but no rdmabw: copy railsweep's own into the pods
  railsweep run -n railbench --client-pod rdma-a --server-pod rdma-b --inject
  # create a hostNetwork pod on each of two nodes, sweep, delete them
  railsweep run --mode hostnetwork --nodes node-a,node-b --tclass 41
  # bandwidth and latency of each rail, failing a rail whose p99 is above 5 us
  railsweep run -n railbench --client-pod rdma-a --server-pod rdma-b --test bw,lat --max-p99-us 5
  # network namespaces of this machine instead of pods
  railsweep run --runner local --client-pod podA --server-pod podB --window 3 --tclass 41";

/// Arguments of `railsweep run`.
#[derive(Debug, Clone, Args)]
#[command(after_help = format!("\
Per rail, the client pod runs `rdmabw client` against the server pod's address on that rail, \
using the rail's interface, RDMA device and GID on each side; one `rdmabw server --daemon` in \
the server pod serves every rail. Each rail's row is appended to the results CSV as soon as it \
is known. The table and summary go to stdout; logs and progress bars to stderr.\n\n{}\n\n{}",
    crate::exit::help(
        "every rail ok",
        "a rail failed or fell below a threshold",
        "usage or set-up error (pods, kubeconfig, rdmabw missing or of another version)",
        Some("interrupted (Ctrl-C: remote processes are ended, rows written so far are kept, --resume continues)"),
    ),
    RUN_EXAMPLES
))]
#[command(mut_arg("output_file", |a| a
    .help("Results CSV, appended one row per rail as measured; must not exist [default: railsweep-RUNID.csv]")
    .conflicts_with("resume")))]
pub struct RunArgs {
    /// Pod that runs the rdmabw server daemon (not with --nodes, which creates it).
    #[arg(long, value_name = "POD", required_unless_present_any = ["nodes", "dry_run"], conflicts_with = "nodes", help_heading = heading::PODS)]
    pub server_pod: Option<String>,
    /// Pod that runs the rdmabw clients (not with --nodes, which creates it).
    #[arg(long, value_name = "POD", required_unless_present_any = ["nodes", "dry_run"], conflicts_with = "nodes", help_heading = heading::PODS)]
    pub client_pod: Option<String>,
    #[command(flatten)]
    pub access: ClusterArgs,
    /// Container to run in [default: the pod's default container; not with --nodes, whose pods
    /// have railsweep's].
    #[arg(short = 'c', long, value_name = "NAME", conflicts_with = "nodes", help_heading = heading::PODS)]
    pub container: Option<String>,

    /// The test parameters.
    #[command(flatten)]
    pub sweep: SweepArgs,

    /// -o FORMAT (stdout), --json, --csv, and --output-file: the results CSV.
    #[command(flatten)]
    pub out: crate::config::FormatFlags,
    /// Also keep a results JSON snapshot in FILE, rewritten after every rail (rdmabw's
    /// --out_json_file).
    #[arg(long = "out_json_file", alias = "out-json-file", value_name = "FILE", help_heading = heading::OUTPUT)]
    pub out_json_file: Option<PathBuf>,
    /// Also write OpenMetrics (a sample per node pair and rail; see docs/fleet.md) to FILE,
    /// replaced at once: a file of node-exporter's textfile collector, or for a Pushgateway.
    #[arg(long, value_name = "FILE", help_heading = heading::OUTPUT)]
    pub metrics: Option<PathBuf>,
    /// Continue the sweep in this results CSV: measure only the rails it has no row for.
    #[arg(long, value_name = "FILE", help_heading = heading::OUTPUT)]
    pub resume: Option<PathBuf>,
    /// Network mode recorded in the rows (hostnetwork, hostnetwork-crio, ipvlan, sriov, pods,
    /// lab, or any name) [default: inferred from the pods and their rails]; with --nodes, the
    /// pods to create.
    #[arg(long, value_name = "MODE", help_heading = heading::PODS)]
    pub mode: Option<String>,
    /// The cluster's name recorded in the rows [default: the kubeconfig's cluster (--cluster),
    /// or this host with --runner local].
    #[arg(long = "cluster-label", value_name = "NAME", help_heading = heading::OUTPUT)]
    pub cluster_label: Option<String>,
    /// No progress bars.
    #[arg(long, help_heading = heading::OUTPUT)]
    pub quiet: bool,

    /// Create the pods: the client pod on NODE_A and the server pod on NODE_B (by
    /// kubernetes.io/hostname), wait until both are ready, sweep, and delete them.
    #[arg(
        long,
        value_name = "NODE_A,NODE_B",
        help_heading = heading::CREATED
    )]
    pub nodes: Option<crate::modes::cli::NodePair>,
    /// The pods railsweep creates itself with `--nodes` and `--mode` (see `modes`).
    #[command(flatten)]
    pub pods: crate::modes::cli::PodArgs,
}

impl RunArgs {
    /// What to print on stdout at the end: `-o`, `--json`, `--csv` (a table by default).
    pub fn stdout_format(&self) -> Result<OutFormat> {
        use OutFormat::{Csv, Json, Markdown, Table};
        Ok(self
            .out
            .format_in("railsweep run", &[Table, Markdown, Csv, Json])?
            .unwrap_or(Table))
    }

    /// `--dry-run`'s format: `-o yaml` (the default) or `-o json`.
    pub fn dry_run_format(&self) -> Result<OutFormat> {
        use OutFormat::{Json, Yaml};
        Ok(self
            .out
            .format_in("--dry-run", &[Yaml, Json])?
            .unwrap_or(Yaml))
    }

    /// The mode `--mode` names, for `--nodes` and `--dry-run`.
    fn pod_mode(&self) -> Result<Mode> {
        let m = self
            .mode
            .as_deref()
            .with_context(|| format!("--nodes and --dry-run need --mode: {}", Mode::names()))?;
        Ok(m.parse::<Mode>()?)
    }

    /// The pods railsweep creates with `--nodes` (and prints with `--dry-run`).
    pub(crate) fn pair_spec(&self) -> PairSpec<'_> {
        PairSpec {
            pods: &self.pods,
            nodes: self.nodes.as_ref(),
            port: self.sweep.port,
            gpu: self.sweep.gpu.is_some() || self.sweep.use_cuda.is_some(),
        }
    }
}

/// Run `railsweep run`. `Err` is a usage or set-up error (exit code 2).
pub async fn run(mut args: RunArgs) -> Result<Verdict> {
    args.access.check(false)?;
    // The output asked for is checked before any work, as everything a run would refuse.
    if args.pods.dry_run {
        args.dry_run_format()?;
    } else {
        args.stdout_format()?;
    }
    if args.nodes.is_some() || args.pods.dry_run {
        let mode = args.pod_mode()?;
        if args.pods.dry_run {
            // What a run would refuse, a dry run refuses too.
            args.sweep.test()?;
            return managed::dry_run(
                &args.pair_spec(),
                &args.access,
                args.dry_run_format()?,
                &[mode],
            );
        }
        if args.access.runner != RunnerKind::Kube {
            bail!(
                "--nodes creates pods through the Kubernetes API: it cannot go with --runner local"
            );
        }
        if args.resume.is_some() {
            bail!("--resume continues a sweep between existing pods: give --client-pod and --server-pod, not --nodes");
        }
        // Refused before a pod is made (it was refused once both pods were up).
        if let Some(o) = args.out.output_file.as_deref() {
            refuse_existing_output(o, false)?;
        }
        args.pods.default_injects(&mut args.sweep)?;
        let cfg = args.sweep.resolve(
            RunnerKind::Kube,
            Some(mode.network_mode()),
            args.cluster_label.clone(),
        )?;
        let runner = managed::connect(&args.access).await?;
        let outcome =
            sweep_mode(&runner, &args, &cfg, mode, args.out.output_file.as_deref()).await?;
        write_metrics(args.metrics.as_deref(), &outcome.rows)?;
        return Ok(outcome.verdict());
    }
    let mode = match &args.mode {
        Some(m) => Some(m.parse::<NetworkMode>().context("--mode")?),
        None => None,
    };
    let cfg = args
        .sweep
        .resolve(args.access.runner, mode, args.cluster_label.clone())?;
    if cfg.test.path.tclass.is_none() {
        results::say!(
            "railsweep: warning: no --tclass: RoCE fabrics usually need the traffic class of their \
             lossless queue (often --tclass 41, NCCL_IB_TC); without it a field report lost 40% of the bandwidth"
        );
    }
    let pods = Pods {
        client: args.client_pod.clone().unwrap_or_default(),
        server: args.server_pod.clone().unwrap_or_default(),
        rail_gpus: Default::default(),
    };
    let outcome = match args.access.runner {
        RunnerKind::Local => {
            sweep_and_print(
                &LocalRunner::new(),
                &args,
                args.out.output_file.as_deref(),
                &cfg,
                &pods,
            )
            .await?
        }
        RunnerKind::Kube => {
            let target = args.access.kube_target(args.container.clone());
            let runner = KubeRunner::connect_announced(&target).await?;
            sweep_and_print(&runner, &args, args.out.output_file.as_deref(), &cfg, &pods).await?
        }
    };
    write_metrics(args.metrics.as_deref(), &outcome.rows)?;
    Ok(outcome.verdict())
}

/// `--metrics FILE`: the rows as OpenMetrics, when asked for and there are rows.
pub(crate) fn write_metrics(path: Option<&Path>, rows: &[results::RailResult]) -> Result<()> {
    if let Some(path) = path.filter(|_| !rows.is_empty()) {
        let report = Report::new(generated_by(), rows.to_vec());
        output::export(&report, Format::OpenMetrics, output::Dest::File(path))?;
        results::say!("railsweep: metrics in {}", path.display());
    }
    Ok(())
}

/// Create the pods of `mode`, sweep them as `railsweep run --client-pod --server-pod` does
/// (rows to `csv`), and delete them: the whole of `railsweep run --nodes`, and one mode of
/// `railsweep compare`. `cfg` records the rows under `mode`.
pub(crate) async fn sweep_mode(
    runner: &KubeRunner,
    args: &RunArgs,
    cfg: &SweepConfig,
    mode: Mode,
    csv: Option<&Path>,
) -> Result<SweepOutcome> {
    let Some(pair) = managed::start_pair(runner, &args.pair_spec(), mode).await? else {
        return Ok(SweepOutcome::interrupted_in_set_up());
    };
    let outcome = sweep_and_print(runner, args, csv, cfg, &pair.pods).await;
    let interrupted = matches!(&outcome, Ok(o) if o.interrupted.is_some());
    if !pair.finish(interrupted).await {
        return outcome;
    }
    // Ctrl-C during the clean-up: the command was interrupted (exit 130), whatever it found.
    match outcome {
        Ok(mut o) => {
            o.interrupted.get_or_insert(Interruption::Rails(Vec::new()));
            Ok(o)
        }
        Err(e) => {
            if !crate::exit::already_said(&e) {
                results::say!("railsweep: error: {}", crate::exit::words(&e));
            }
            Ok(SweepOutcome::interrupted_in_set_up())
        }
    }
}

/// The rails a results file already has rows for, and the run id and mode to continue with.
fn read_resume(path: &Path) -> Result<(BTreeSet<u32>, Option<String>, Option<NetworkMode>)> {
    let rows = results::read_path(path)
        .with_context(|| format!("cannot read the results file to resume, {}", path.display()))?;
    let last = rows.last();
    Ok((
        rows.iter().map(|r| r.rail).collect(),
        last.map(|r| r.run_id.clone()),
        last.map(|r| r.network_mode.clone()),
    ))
}

/// Sweep `pods` into `csv` (or `--resume`'s file), then print the rows as `-o` says and
/// the summary lines.
async fn sweep_and_print<R: Runner>(
    runner: &R,
    args: &RunArgs,
    csv: Option<&Path>,
    cfg: &SweepConfig,
    pods: &Pods,
) -> Result<SweepOutcome> {
    // Refuse before any pod work whatever would fail at the end.
    let (skip, resume_id, resume_mode) = match &args.resume {
        Some(p) => read_resume(p)?,
        None => (BTreeSet::new(), None, None),
    };
    let run_id = resume_id.unwrap_or_else(sweep::new_run_id);
    let output = match (&args.resume, csv) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => p.to_path_buf(),
        (None, None) => PathBuf::from(format!("railsweep-{run_id}.csv")),
    };
    if args.resume.is_none() {
        refuse_existing_output(&output, true)?;
    }
    let mut rows = if args.resume.is_some() {
        RowsFile::resume(output, args.out_json_file.clone())
    } else {
        RowsFile::create(output, args.out_json_file.clone())
    };

    let cancel = CancellationToken::new();
    watch_ctrl_c(cancel.clone());
    let outcome = sweep_pair(
        runner,
        pods,
        cfg,
        &mut rows,
        PairRun {
            run_id,
            skip,
            known_mode: resume_mode,
            cancel,
            quiet: args.quiet,
            announce: true,
            prepared: None,
        },
    )
    .await?;
    let not_measured = match &outcome.interrupted {
        Some(Interruption::SetUp) => return Ok(outcome),
        Some(Interruption::Rails(r)) => Some(r),
        None => None,
    };
    print_rows(&outcome.rows, args.stdout_format()?, cfg.parallel)?;

    let t = &outcome.timings;
    let n = t.measured;
    if n > 0 && not_measured.is_none_or(Vec::is_empty) {
        let measured_s = if cfg.parallel {
            cfg.duration_s
        } else {
            cfg.duration_s * n as f64
        };
        let total = t.setup_s + t.rails_wall_s;
        results::say!(
            "railsweep: {n} rail(s) in {total:.2} s (set-up {:.2} s, rails {:.2} s, rdmabw clients {:.2} s): \
             {:.2} s per rail beyond the {} s measured, {:.2} s of it outside the rdmabw clients",
            t.setup_s,
            t.rails_wall_s,
            t.clients_s,
            (total - measured_s) / n as f64,
            cfg.duration_s,
            (total - if cfg.parallel { t.clients_s / n as f64 } else { t.clients_s }) / n as f64
        );
    }
    results::say!("railsweep: results in {}", rows.csv_path().display());
    if let Some(rails) = not_measured.filter(|r| !r.is_empty()) {
        results::say!(
            "railsweep: interrupted before rail(s) {rails:?} were measured; continue with --resume {}",
            rows.csv_path().display()
        );
    } else if not_measured.is_some() {
        results::say!(
            "railsweep: interrupted after every rail was measured: the results are complete"
        );
    }
    Ok(outcome)
}

fn print_rows(rows: &[results::RailResult], format: OutFormat, parallel: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        OutFormat::Table => {
            writeln!(out, "{}", output::table(rows, parallel))?;
            for line in output::summary_lines(rows, &generated_by()) {
                writeln!(out, "{line}")?;
            }
        }
        other => {
            let f = other.results_format().unwrap_or(Format::Json);
            let report = Report::new(generated_by(), rows.to_vec());
            output::export(&report, f, output::Dest::Stream(&mut out))?;
        }
    }
    out.flush()?;
    Ok(())
}

/// A run never writes over an earlier run's rows: an `--output` that exists is refused, with
/// `--resume` offered where the run could continue that file (a sweep between existing pods).
fn refuse_existing_output(output: &Path, resumable: bool) -> Result<()> {
    if output.exists() {
        bail!(
            "{} exists; give another --output{}",
            output.display(),
            if resumable {
                ", or continue it with --resume"
            } else {
                ""
            }
        );
    }
    Ok(())
}
