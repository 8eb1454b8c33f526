//! `railsweep run --mode M --nodes NODE_A,NODE_B`: railsweep creates the pod pair of a
//! network mode (client on A, server on B), waits until both are ready, sweeps them, and
//! deletes them; `--dry-run` prints them instead.
//!
//! Ctrl-C while the pods start deletes them at once. Ctrl-C during the sweep ends the sweep
//! as `railsweep run` does (remote processes ended, rows kept), and then the pods are
//! deleted. `--keep-pods` keeps them in every case and says how to delete them.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio_util::sync::CancellationToken;

use crate::modes::lifecycle::{LifecycleError, PodSet};
use crate::modes::{self, yaml, Mode, Placement, PodPair};
use crate::run::{RunArgs, RunnerKind, EXIT_INTERRUPTED};
use crate::runner::KubeRunner;
use crate::sweep;

/// How long railsweep waits for its deleted pods to be gone (so that the next mode of a
/// comparison finds their devices, addresses and ports free).
pub(crate) const DELETE_WAIT: Duration = Duration::from_secs(60);

/// The mode `--mode` names, for `--nodes` and `--dry-run`.
pub fn mode_of(args: &RunArgs) -> Result<Mode> {
    let m = args.mode.as_deref().context(
        "--nodes and --dry-run need --mode: hostnetwork, hostnetwork-crio, ipvlan or sriov",
    )?;
    Ok(m.parse::<Mode>()?)
}

fn placement(args: &RunArgs, run_id: &str) -> Placement {
    Placement {
        run: args
            .pods
            .run_id
            .clone()
            .unwrap_or_else(|| run_id.to_string()),
        client_node: args.nodes.as_ref().map(|n| n.client.clone()),
        server_node: args.nodes.as_ref().map(|n| n.server.clone()),
    }
}

/// How many GPUs a pod asks for with `--gpu auto` when `--resource` does not say: every GPU of
/// the usual 8-GPU node, so that each rail's nearest GPU is in the pod.
const GPUS_PER_POD: u32 = 8;

/// The pod options of `args`; with `--gpu auto` the pods ask for GPUs.
fn pod_options(args: &RunArgs, namespace: &str, log: bool) -> Result<modes::PodOptions> {
    let mut opts = args.pods.pod_options(namespace, args.port, args.inject)?;
    if args.gpu.is_some() && opts.ensure_gpus(GPUS_PER_POD) && log {
        eprintln!(
            "railsweep: --gpu auto: the pods ask for {}={GPUS_PER_POD} (every GPU of an \
             8-GPU node); give --resource {}=N for another count",
            modes::GPU_RESOURCE,
            modes::GPU_RESOURCE
        );
    }
    Ok(opts)
}

/// `railsweep run` with `--nodes` or `--dry-run`.
pub async fn run(args: RunArgs) -> Result<ExitCode> {
    let mode = mode_of(&args)?;
    if args.pods.dry_run {
        return dry_run(&args, mode);
    }
    if args.access.runner != RunnerKind::Kube {
        bail!("--nodes creates pods through the Kubernetes API: it cannot go with --runner local");
    }
    if args.resume.is_some() {
        bail!("--resume continues a sweep between existing pods: give --client-pod and --server-pod, not --nodes");
    }
    let runner = connect(&args).await?;
    run_mode(&runner, &args, mode).await
}

/// Connect as `railsweep run` does.
pub async fn connect(args: &RunArgs) -> Result<KubeRunner> {
    let target = args.access.kube_target(None);
    KubeRunner::connect_announced(&target).await
}

/// Print the pods of `mode` as YAML (`-o yaml`, the default) or as a JSON `List` (`-o json`).
fn dry_run(args: &RunArgs, mode: Mode) -> Result<ExitCode> {
    let format = match args.output.as_deref().map(Path::to_str) {
        None | Some(Some("yaml")) => "yaml",
        Some(Some("json")) => "json",
        Some(other) => bail!(
            "with --dry-run, -o takes yaml or json, not {}",
            other.unwrap_or("a non-UTF-8 name")
        ),
    };
    let namespace = args.access.namespace_or_default();
    let opts = pod_options(args, &namespace, false)?;
    let pair = modes::pod_pair(mode, &opts, &placement(args, &sweep::new_run_id()))?;
    let text = if format == "yaml" {
        yaml::pairs_yaml(std::slice::from_ref(&pair))?
    } else {
        let list = serde_json::json!({
            "apiVersion": "v1", "kind": "List",
            "items": [&pair.server, &pair.client],
        });
        serde_json::to_string_pretty(&list)? + "\n"
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

fn describe(pair: &PodPair) -> String {
    let node = |p: &k8s_openapi::api::core::v1::Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_selector.as_ref())
            .and_then(|s| s.get("kubernetes.io/hostname"))
            .cloned()
            .unwrap_or_else(|| "any node".into())
    };
    format!(
        "client pod {} on {}, server pod {} on {}",
        pair.client.metadata.name.as_deref().unwrap_or("?"),
        node(&pair.client),
        pair.server.metadata.name.as_deref().unwrap_or("?"),
        node(&pair.server),
    )
}

/// Delete what `set` created, or with `--keep-pods` (`keep`) say how to.
pub(crate) async fn clean_up(set: &PodSet, keep: bool, namespace: &str, wait: Option<Duration>) {
    let created = set.created();
    if created.is_empty() {
        return;
    }
    let names: Vec<String> = created.iter().map(|c| c.name.clone()).collect();
    if keep {
        eprintln!(
            "railsweep: keeping pods {} (--keep-pods); delete them with: kubectl delete pods -n {} {}",
            names.join(", "),
            namespace,
            names.join(" ")
        );
        return;
    }
    let (deleted, errors) = set.delete_all(wait).await;
    if !deleted.is_empty() {
        eprintln!("railsweep: deleted pods {}", deleted.join(", "));
    }
    for e in errors {
        eprintln!("railsweep: warning: {e}; delete it with kubectl delete pod");
    }
}

/// The end of a command whose pods did not start: their clean-up, then exit 130 after Ctrl-C
/// or the error, with `what` as its context (e.g. `mode sriov: the pods did not start`).
pub(crate) async fn pods_not_started(
    e: LifecycleError,
    set: &PodSet,
    keep: bool,
    namespace: &str,
    what: String,
) -> Result<ExitCode> {
    if let LifecycleError::Interrupted = e {
        eprintln!("\nrailsweep: interrupted while the pods were starting");
        clean_up(set, keep, namespace, None).await;
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    clean_up(set, keep, namespace, Some(DELETE_WAIT)).await;
    Err(anyhow::Error::new(e).context(what))
}

/// Create, wait for, sweep and delete the pods of `mode` (the whole of `railsweep run
/// --nodes`, and one mode of `railsweep compare`).
pub async fn run_mode(runner: &KubeRunner, args: &RunArgs, mode: Mode) -> Result<ExitCode> {
    let namespace = runner.namespace().to_string();
    let opts = pod_options(args, &namespace, true)?;
    let pair = modes::pod_pair(mode, &opts, &placement(args, &sweep::new_run_id()))?;
    let set = PodSet::new(runner.client(), &namespace);

    // Ctrl-C from here until the sweep takes over: stop waiting, delete the pods.
    let cancel = CancellationToken::new();
    let interrupted = cancel.clone();
    let listener = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            interrupted.cancel();
        }
    });

    eprintln!("railsweep: mode {mode}: creating {}", describe(&pair));
    let started = tokio::select! {
        r = set.create(&pair) => r,
        _ = cancel.cancelled() => Err(LifecycleError::Interrupted),
    };
    let timeout = Duration::from_secs_f64(args.pods.pod_timeout.max(1.0));
    let ready = match started {
        Ok(()) => set.wait_ready(timeout, &cancel).await,
        Err(e) => Err(e),
    };
    match ready {
        Ok(pods) => {
            let ips: Vec<String> = pods
                .iter()
                .map(|p| {
                    format!(
                        "{} ({})",
                        p.metadata.name.as_deref().unwrap_or("?"),
                        p.status
                            .as_ref()
                            .and_then(|s| s.pod_ip.as_deref())
                            .unwrap_or("no IP")
                    )
                })
                .collect();
            eprintln!("railsweep: mode {mode}: pods ready: {}", ips.join(", "));
        }
        Err(e) => {
            listener.abort();
            let what = format!("mode {mode}: the pods did not start");
            return pods_not_started(e, &set, args.pods.keep_pods, &namespace, what).await;
        }
    }
    listener.abort();

    // The sweep, exactly as `railsweep run --client-pod --server-pod` does it.
    let mut sweep_args = args.clone();
    sweep_args.client_pod = pair.client.metadata.name.clone();
    sweep_args.server_pod = pair.server.metadata.name.clone();
    sweep_args.access.namespace = Some(namespace.clone());
    sweep_args.container = Some(modes::CONTAINER.to_string());
    sweep_args.mode = Some(mode.as_str().to_string());
    let outcome = match sweep_args.sweep_config() {
        Ok(cfg) => crate::run::sweep_with(runner.clone(), &sweep_args, cfg).await,
        Err(e) => Err(e),
    };
    let interrupted = matches!(&outcome, Ok(code) if *code == ExitCode::from(EXIT_INTERRUPTED));
    clean_up(
        &set,
        args.pods.keep_pods,
        &namespace,
        if interrupted { None } else { Some(DELETE_WAIT) },
    )
    .await;
    outcome
}
