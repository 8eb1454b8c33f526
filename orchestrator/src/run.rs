//! `railsweep run`: the command line of a sweep, and what it prints.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use results::{Format, NetworkMode, RailStatus, Report, RowSink};
use tokio_util::sync::CancellationToken;

use crate::output;
use crate::plan::parse_rail_list;
use crate::runner::{KubeRunner, KubeTarget, LocalRunner, Runner};
use crate::sweep::{self, SweepConfig, SweepRun};

/// The program name and version recorded in JSON output.
pub const GENERATED_BY: &str = concat!("railsweep ", env!("CARGO_PKG_VERSION"));

/// Exit code after Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// How commands reach the pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunnerKind {
    /// Pod exec through the Kubernetes API (kubeconfig resolved like kubectl).
    Kube,
    /// Network namespaces of this machine (`ip netns exec POD`); `-` is this machine itself.
    Local,
}

/// Where the pods are and how commands reach them (`railsweep run` and `railsweep fleet`).
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Namespace of the pods [default: the kubeconfig context's, else `default`].
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Kubeconfig context [default: the current context].
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Kubeconfig file [default: $KUBECONFIG, else ~/.kube/config, else in-cluster].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// How to reach the pods: `kube` (API server exec) or `local` (network namespaces here).
    #[arg(long, value_enum, default_value_t = RunnerKind::Kube)]
    pub runner: RunnerKind,
}

impl ClusterArgs {
    /// The Kubernetes API target these flags name, running in `container`.
    pub fn kube_target(&self, container: Option<String>) -> KubeTarget {
        KubeTarget {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            namespace: self.namespace.clone(),
            container,
        }
    }

    /// The namespace without asking a cluster (dry runs print pods for it): `--namespace`,
    /// else `default`.
    pub fn namespace_or_default(&self) -> String {
        self.namespace.clone().unwrap_or_else(|| "default".into())
    }
}

/// What goes to stdout at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutFormat {
    /// The per-rail table and the summary lines.
    Table,
    /// Markdown report (as `railsweep report`).
    Markdown,
    /// Results CSV of the run's rows.
    Csv,
    /// Results JSON of the run's rows.
    Json,
}

/// A `--rails` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RailList(pub Vec<u32>);

fn rail_list(s: &str) -> Result<RailList, String> {
    parse_rail_list(s).map(RailList)
}

fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("expected a positive number, got `{s}`")),
    }
}

fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("expected a number >= 0, got `{s}`")),
    }
}

fn mtu(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(v @ (256 | 512 | 1024 | 2048 | 4096)) => Ok(v),
        _ => Err(format!("expected 256, 512, 1024, 2048 or 4096, got `{s}`")),
    }
}

/// Arguments of `railsweep run`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Per rail, the client pod runs `rdmabw client` against the server pod's address on that rail, \
using the rail's interface, RDMA device and GID on each side; one `rdmabw server --daemon` in \
the server pod serves every rail. Each rail's row is appended to the results CSV as soon as it \
is known. The table and summary go to stdout; logs and progress bars to stderr.

Exit status: 0 every rail ok; 1 a rail failed or fell below a threshold; 2 usage or set-up \
error (pods, kubeconfig, rdmabw missing or of another version); 130 interrupted (Ctrl-C: remote \
processes are ended, rows written so far are kept, --resume continues).")]
pub struct RunArgs {
    /// Pod that runs the rdmabw server daemon (not with --nodes, which creates it).
    #[arg(long, value_name = "POD", required_unless_present_any = ["nodes", "dry_run"], conflicts_with = "nodes")]
    pub server_pod: Option<String>,
    /// Pod that runs the rdmabw clients (not with --nodes, which creates it).
    #[arg(long, value_name = "POD", required_unless_present_any = ["nodes", "dry_run"], conflicts_with = "nodes")]
    pub client_pod: Option<String>,
    #[command(flatten)]
    pub access: ClusterArgs,
    /// Container to run in [default: the pod's default container].
    #[arg(short = 'c', long, value_name = "NAME")]
    pub container: Option<String>,

    /// rdmabw inside the pods: a path, or a name looked up in PATH
    /// [default: `rdmabw`; for --runner local, the rdmabw next to railsweep if there is one].
    #[arg(long, value_name = "PATH")]
    pub rdmabw: Option<String>,
    /// Copy this railsweep's own rdmabw into both pods (to /tmp) through exec, for images that
    /// have libibverbs but no rdmabw. Needs `sh` and `head` in the image.
    #[arg(long)]
    pub inject: bool,
    /// The local rdmabw binary --inject copies [default: the rdmabw next to railsweep].
    #[arg(long, value_name = "FILE", requires = "inject")]
    pub inject_binary: Option<PathBuf>,

    /// Rails to measure, by rail number: `0,3,5-7` [default: every rail of either pod].
    #[arg(long, value_name = "LIST", value_parser = rail_list)]
    pub rails: Option<RailList>,
    /// Measure all rails at once (the node's aggregate), with the per-rail numbers and the sum.
    #[arg(long)]
    pub parallel: bool,
    /// GPUDirect: `auto` puts each rail's buffers, on both sides, in CUDA memory of the GPU
    /// nearest that rail's NIC (rdmabw --use_cuda auto: same PCIe switch, else root port, else
    /// NUMA node). With --mode the pods ask for nvidia.com/gpu (8 unless --resource says).
    #[arg(long, value_enum, value_name = "auto")]
    pub gpu: Option<GpuArg>,
    /// Measured seconds per rail.
    #[arg(short = 'D', long, value_name = "S", default_value_t = 5.0, value_parser = positive)]
    pub duration: f64,
    /// RDMA WRITE message size in bytes.
    #[arg(short = 's', long, value_name = "BYTES", default_value_t = 65536)]
    pub size: u64,
    /// Traffic class (IPv4 TOS byte) for the QPs, e.g. 41 for a lossless RoCE class
    /// [default: none, with a warning].
    #[arg(long, value_name = "N")]
    pub tclass: Option<u8>,
    /// Queue pairs per rail.
    #[arg(short = 'q', long, value_name = "N", default_value_t = 1)]
    pub qps: u32,
    /// Path MTU in bytes [default: the smaller active MTU of both ends].
    #[arg(short = 'm', long, value_name = "BYTES", value_parser = mtu)]
    pub mtu: Option<u32>,
    /// Rails under this average Gb/s count as below threshold (exit code 1).
    #[arg(long, value_name = "GBPS", value_parser = positive, conflicts_with = "min_line_rate_pct")]
    pub min_gbps: Option<f64>,
    /// Rails under this percentage of their line rate count as below threshold (exit code 1).
    #[arg(long, value_name = "PCT", value_parser = positive)]
    pub min_line_rate_pct: Option<f64>,
    /// rdmabw's seconds of traffic before each measured window [default: rdmabw's, 0.05; 0.2 both ways].
    #[arg(long, value_name = "S", value_parser = non_negative)]
    pub warmup: Option<f64>,
    /// rdmabw's seconds of traffic after each measured window [default: rdmabw's, 0 one way].
    #[arg(long, value_name = "S", value_parser = non_negative)]
    pub cooldown: Option<f64>,
    /// Run a failed rail again up to N more times.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub retries: u32,
    /// Seconds a rail may take beyond --duration before railsweep stops it and records it as
    /// failed (covers start-up, QP bring-up and rdmabw's warm-up).
    #[arg(long, value_name = "S", default_value_t = 15.0, value_parser = non_negative)]
    pub margin: f64,
    /// TCP port of the server daemon.
    #[arg(short = 'p', long, value_name = "PORT", default_value_t = 18515)]
    pub port: u16,

    /// Results CSV, appended one row per rail as measured; must not exist
    /// [default: railsweep-RUNID.csv].
    #[arg(short = 'o', long, value_name = "FILE", conflicts_with = "resume")]
    pub output: Option<PathBuf>,
    /// Also keep a results JSON snapshot here, rewritten after every rail.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Continue the sweep in this results CSV: measure only the rails it has no row for.
    #[arg(long, value_name = "FILE")]
    pub resume: Option<PathBuf>,
    /// Network mode recorded in the rows (hostnetwork, hostnetwork-crio, ipvlan, sriov, pods,
    /// lab, or any name) [default: inferred from the pods and their rails].
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    /// Cluster name recorded in the rows [default: the kubeconfig's cluster, or this host].
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// What to print on stdout at the end.
    #[arg(long, value_enum, default_value_t = OutFormat::Table)]
    pub format: OutFormat,
    /// No progress bars.
    #[arg(long)]
    pub quiet: bool,

    /// Create the pods: the client pod on NODE_A and the server pod on NODE_B (by
    /// kubernetes.io/hostname), wait until both are ready, sweep, and delete them.
    #[arg(
        long,
        value_name = "NODE_A,NODE_B",
        help_heading = "Pods railsweep creates (--nodes)"
    )]
    pub nodes: Option<crate::modes::cli::NodePair>,
    /// The pods railsweep creates itself with `--nodes` and `--mode` (see `modes`).
    #[command(flatten)]
    pub pods: crate::modes::cli::PodArgs,
}

pub(crate) fn sibling_rdmabw() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.join("rdmabw");
    p.is_file().then_some(p)
}

impl RunArgs {
    pub(crate) fn sweep_config(&self) -> Result<SweepConfig> {
        if self.size == 0 {
            bail!("--size must be at least 1 byte");
        }
        if self.qps == 0 {
            bail!("--qps must be at least 1");
        }
        let mode = match &self.mode {
            Some(m) => Some(m.parse::<NetworkMode>().context("--mode")?),
            None => None,
        };
        let inject =
            if self.inject {
                Some(self.inject_binary.clone().or_else(sibling_rdmabw).context(
                    "--inject: no rdmabw next to railsweep; give one with --inject-binary",
                )?)
            } else {
                None
            };
        let rdmabw = match (&self.rdmabw, self.access.runner) {
            (Some(p), _) => p.clone(),
            (None, RunnerKind::Local) => sibling_rdmabw()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "rdmabw".into()),
            (None, RunnerKind::Kube) => "rdmabw".into(),
        };
        Ok(SweepConfig {
            client_pod: self.client_pod.clone().unwrap_or_default(),
            server_pod: self.server_pod.clone().unwrap_or_default(),
            rdmabw,
            inject,
            rails: self.rails.clone().map(|r| r.0),
            port: self.port,
            duration_s: self.duration,
            size_bytes: self.size,
            tclass: self.tclass,
            qps: self.qps,
            mtu: self.mtu,
            min_gbps: self.min_gbps,
            min_line_rate_pct: self.min_line_rate_pct,
            warmup_s: self.warmup,
            cooldown_s: self.cooldown,
            parallel: self.parallel,
            retries: self.retries,
            margin: Duration::from_secs_f64(self.margin),
            mode,
            cluster: self.cluster.clone(),
            gpu_auto: self.gpu == Some(GpuArg::Auto),
        })
    }
}

/// `--gpu` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GpuArg {
    /// Each rail's buffers in the GPU nearest that rail's NIC, on both sides.
    Auto,
}

/// Run `railsweep run`. `Err` is a usage or set-up error (exit code 2).
pub async fn run(args: RunArgs) -> Result<ExitCode> {
    if args.nodes.is_some() || args.pods.dry_run {
        return crate::managed::run(args).await;
    }
    let cfg = args.sweep_config()?;
    if cfg.tclass.is_none() {
        eprintln!(
            "railsweep: warning: no --tclass: RoCE fabrics usually need the traffic class of their \
             lossless queue (often --tclass 41, NCCL_IB_TC); without it a field report lost 40% of the bandwidth"
        );
    }
    match args.access.runner {
        RunnerKind::Local => sweep_with(LocalRunner::new(), &args, cfg).await,
        RunnerKind::Kube => {
            let target = args.access.kube_target(args.container.clone());
            let runner = KubeRunner::connect_announced(&target).await?;
            sweep_with(runner, &args, cfg).await
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

/// Ctrl-C once: cancel (remote processes are ended, rows kept). Twice: leave at once.
fn watch_ctrl_c(cancel: CancellationToken) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        eprintln!(
            "\nrailsweep: interrupted: ending the remote processes (Ctrl-C again to leave at once)"
        );
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
    });
}

pub(crate) async fn sweep_with<R: Runner>(
    runner: R,
    args: &RunArgs,
    cfg: SweepConfig,
) -> Result<ExitCode> {
    // Refuse before any pod work whatever would fail at the end.
    let (skip, resume_id, resume_mode) = match &args.resume {
        Some(p) => read_resume(p)?,
        None => (BTreeSet::new(), None, None),
    };
    let run_id = resume_id.unwrap_or_else(sweep::new_run_id);
    let output = match (&args.resume, &args.output) {
        (Some(p), _) | (None, Some(p)) => p.clone(),
        (None, None) => PathBuf::from(format!("railsweep-{run_id}.csv")),
    };
    if args.resume.is_none() && output.exists() {
        bail!(
            "{} exists; give another --output, or continue it with --resume",
            output.display()
        );
    }

    let cancel = CancellationToken::new();
    watch_ctrl_c(cancel.clone());
    eprintln!(
        "railsweep: {} runner: server pod {}, client pod {}",
        runner.kind(),
        cfg.server_pod,
        cfg.client_pod
    );
    let prep = tokio::select! {
        p = sweep::prepare(&runner, &cfg) => p?,
        _ = cancel.cancelled() => return Ok(ExitCode::from(EXIT_INTERRUPTED)),
    };
    let mode = match (&cfg.mode, resume_mode) {
        (None, Some(m)) => m,
        _ => sweep::infer_mode(cfg.mode.as_ref(), runner.kind(), &prep),
    };
    let planned = sweep::planned_rails(&cfg, &prep, &skip);
    eprintln!(
        "railsweep: rdmabw ready in both pods ({:.1} s); {} rail(s) to measure{}, mode {mode}, run {run_id}{}",
        prep.setup_s,
        planned.len(),
        if cfg.parallel { " at once" } else { "" },
        if skip.is_empty() {
            String::new()
        } else {
            format!(", {} already in {}", skip.len(), output.display())
        }
    );

    let mut sink = match &args.resume {
        Some(p) => RowSink::resume(p, args.json.as_deref(), GENERATED_BY),
        None => RowSink::create(&output, args.json.as_deref(), GENERATED_BY),
    }
    .with_context(|| format!("cannot open the results file {}", output.display()))?;

    let outcome = sweep::run(
        &runner,
        &cfg,
        &prep,
        SweepRun {
            sink: &mut sink,
            skip,
            run_id: run_id.clone(),
            mode,
            cancel: cancel.clone(),
            quiet: args.quiet,
        },
    )
    .await?;

    let rows: Vec<results::RailResult> = sink
        .rows()
        .iter()
        .filter(|r| r.run_id == run_id)
        .cloned()
        .collect();
    print_rows(&rows, args.format, cfg.parallel)?;

    let n = outcome.rows.len();
    if n > 0 && outcome.interrupted.is_empty() {
        let measured_s = if cfg.parallel {
            cfg.duration_s
        } else {
            cfg.duration_s * n as f64
        };
        let total = prep.setup_s + outcome.rails_wall_s;
        eprintln!(
            "railsweep: {n} rail(s) in {total:.2} s (set-up {:.2} s, rails {:.2} s, rdmabw clients {:.2} s): \
             {:.2} s per rail beyond the {} s measured, {:.2} s of it outside the rdmabw clients",
            prep.setup_s,
            outcome.rails_wall_s,
            outcome.clients_s,
            (total - measured_s) / n as f64,
            cfg.duration_s,
            (total - if cfg.parallel { outcome.clients_s / n as f64 } else { outcome.clients_s }) / n as f64
        );
    }
    eprintln!("railsweep: results in {}", sink.csv_path().display());
    if !outcome.interrupted.is_empty() {
        eprintln!(
            "railsweep: interrupted before rail(s) {:?} were measured; continue with --resume {}",
            outcome.interrupted,
            sink.csv_path().display()
        );
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    let bad = rows.iter().filter(|r| r.status != RailStatus::Ok).count();
    Ok(if bad > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_rows(rows: &[results::RailResult], format: OutFormat, parallel: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        OutFormat::Table => {
            writeln!(out, "{}", output::table(rows, parallel))?;
            for line in output::summary_lines(rows, GENERATED_BY) {
                writeln!(out, "{line}")?;
            }
        }
        other => {
            let f = match other {
                OutFormat::Markdown => Format::Markdown,
                OutFormat::Csv => Format::Csv,
                _ => Format::Json,
            };
            let bytes = f
                .exporter()
                .serialize(&Report::new(GENERATED_BY, rows.to_vec()))
                .with_context(|| format!("cannot produce {f} output"))?;
            out.write_all(&bytes)?;
        }
    }
    out.flush()?;
    Ok(())
}
