//! `railsweep run --mode M --nodes NODE_A,NODE_B`: railsweep creates the pod pair of a
//! network mode (client on A, server on B), waits until both are ready, sweeps them, and
//! deletes them; `--dry-run` prints them instead.
//!
//! Ctrl-C while the pods start deletes them at once. Ctrl-C during the sweep ends the sweep
//! as `railsweep run` does (remote processes ended, rows kept), and then the pods are
//! deleted. `--keep-pods` keeps them in every case and says how to delete them.

use std::io::Write;

use anyhow::Result;
use tokio_util::sync::CancellationToken;

use crate::config::ClusterArgs;
use crate::exit::Verdict;
use crate::modes::cli::{NodePair, PodArgs};
use crate::modes::dra::{GpusByInterface, PairGpus};
use crate::modes::guard::{PodGuard, DELETE_WAIT};
use crate::modes::lifecycle::{LifecycleError, PodSet};
use crate::modes::{self, yaml, Mode, Placement, PodPair};
use crate::runner::KubeRunner;
use crate::sweep::{self, Pods};

/// The pods railsweep creates: how (`--image`, `--networks`, ...), where (`--nodes`), and
/// what of the sweep they must allow for.
#[derive(Debug, Clone, Copy)]
pub struct PairSpec<'a> {
    /// The pod options of `railsweep run --nodes`.
    pub pods: &'a PodArgs,
    /// The client's and the server's node.
    pub nodes: Option<&'a NodePair>,
    /// The server daemon's port.
    pub port: u16,
    /// `--gpu auto`: the pods ask for GPUs.
    pub gpu: bool,
}

impl PairSpec<'_> {
    fn placement(&self, run_id: &str) -> Placement {
        Placement {
            run: self
                .pods
                .run_id
                .clone()
                .unwrap_or_else(|| run_id.to_string()),
            client_node: self.nodes.map(|n| n.client.clone()),
            server_node: self.nodes.map(|n| n.server.clone()),
        }
    }

    /// The pod options; with `--gpu auto` the pods ask for GPUs (said on stderr with `log`).
    fn pod_options(&self, namespace: &str, log: bool) -> Result<modes::PodOptions> {
        let mut opts = self.pods.pod_options(namespace, self.port)?;
        if self.gpu && opts.ensure_gpus(GPUS_PER_POD) && log {
            results::say!(
                "railsweep: --gpu auto: the pods ask for {}={GPUS_PER_POD} (every GPU of an \
                 8-GPU node); give --resource {}=N for another count",
                modes::GPU_RESOURCE,
                modes::GPU_RESOURCE
            );
        }
        Ok(opts)
    }
}

/// How many GPUs a pod asks for with `--gpu auto` when `--resource` does not say: every GPU of
/// the usual 8-GPU node, so that each rail's nearest GPU is in the pod.
const GPUS_PER_POD: u32 = 8;

/// Connect as `railsweep run` does.
pub async fn connect(access: &ClusterArgs) -> Result<KubeRunner> {
    let target = access.kube_target(None);
    KubeRunner::connect_announced(&target).await
}

/// Print the pods of each of `modes` as YAML (`-o yaml`, the default) or as one JSON `List`
/// (`-o json`). Every mode's pods are made (and so checked) before anything is printed: a mode
/// that cannot be made prints nothing at all, never half of what would be applied.
pub fn dry_run(
    spec: &PairSpec<'_>,
    access: &ClusterArgs,
    format: crate::config::OutFormat,
    modes: &[Mode],
) -> Result<Verdict> {
    let format = if format == crate::config::OutFormat::Json {
        "json"
    } else {
        "yaml"
    };
    let namespace = access.namespace_or_default();
    let opts = spec.pod_options(&namespace, false)?;
    let run_id = sweep::new_run_id();
    let pairs = modes
        .iter()
        .map(|&mode| {
            modes::pod_pair(mode, &opts, &spec.placement(&run_id)).map_err(|e| {
                // Which mode failed, where there are several and the error does not say.
                let named = e.to_string().contains(&format!("mode {mode}"));
                let e = anyhow::Error::new(e);
                if modes.len() > 1 && !named {
                    e.context(format!("mode {mode}"))
                } else {
                    e
                }
            })
        })
        .collect::<Result<Vec<PodPair>>>()?;
    let text = if format == "yaml" {
        yaml::pairs_yaml(&pairs)?
    } else {
        let mut items: Vec<serde_json::Value> = Vec::new();
        for pair in &pairs {
            for t in &pair.templates {
                items.push(serde_json::to_value(t)?);
            }
            items.push(serde_json::to_value(&pair.server)?);
            items.push(serde_json::to_value(&pair.client)?);
        }
        let list = serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": items });
        serde_json::to_string_pretty(&list)? + "\n"
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(Verdict::Ok)
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

/// The pod pair of a mode, created and ready; [`ManagedPair::finish`] deletes it, and so does
/// dropping it (an error or a panic before `finish`: [`PodGuard`]).
#[derive(Debug)]
pub struct ManagedPair {
    guard: PodGuard,
    /// The pods' names, and (mode `dra --gpu-align`) the GPU allocated with each of their rails.
    pub pods: Pods,
}

impl ManagedPair {
    /// Delete the pods (with `--keep-pods`, say how to); after Ctrl-C (`interrupted`) without
    /// waiting for them to be gone. `true` when Ctrl-C came during the clean-up.
    pub async fn finish(self, interrupted: bool) -> bool {
        let wait = if interrupted { None } else { Some(DELETE_WAIT) };
        self.guard.finish(wait).await
    }
}

/// Say on stderr which rails a `dra` pod was allocated, one line per rail, each with its GPU;
/// the GPUs by their rails' interfaces, for the rows.
pub(crate) async fn report_allocation(
    set: &PodSet,
    pod: &k8s_openapi::api::core::v1::Pod,
) -> GpusByInterface {
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("?");
    match set.allocation(pod).await {
        Ok(rails) => {
            results::say!(
                "railsweep: mode dra: pod {name} on {node} was allocated {} rail(s):",
                rails.len()
            );
            for r in &rails {
                results::say!("railsweep:   {r}");
                if r.gpu.is_some() && r.interface.is_none() {
                    results::say!(
                        "railsweep: warning: pod {name}: the interface of {} ({}) is not known \
                         (no dra.net/ifName, or railsweep may not list ResourceSlices): its rows \
                         cannot say which GPU sits with it",
                        r.request,
                        r.nic
                    );
                }
            }
            GpusByInterface::of(&rails)
        }
        Err(e) => {
            results::say!("railsweep: mode dra: pod {name}: {e}");
            GpusByInterface::default()
        }
    }
}

/// Create the pods of `mode` and wait until both are ready (`None`: Ctrl-C came first; the
/// pods are deleted then, and on an error).
pub async fn start_pair(
    runner: &KubeRunner,
    spec: &PairSpec<'_>,
    mode: Mode,
) -> Result<Option<ManagedPair>> {
    let namespace = runner.namespace().to_string();
    let opts = spec.pod_options(&namespace, true)?;
    let pair = modes::pod_pair(mode, &opts, &spec.placement(&sweep::new_run_id()))?;
    let mut set = PodSet::new(runner.client(), &namespace);
    if mode == Mode::Dra {
        set = set.with_dra(opts.dra.clone());
    }
    // From here, whatever ends this command deletes what the set creates.
    let guard = PodGuard::new(set, &namespace, spec.pods.keep_pods);
    let set = guard.set();

    // Ctrl-C from here until the sweep takes over: stop waiting, delete the pods.
    let cancel = CancellationToken::new();
    let interrupted = cancel.clone();
    let listener = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            interrupted.cancel();
        }
    });

    results::say!("railsweep: mode {mode}: creating {}", describe(&pair));
    let creating = std::time::Instant::now();
    let started = tokio::select! {
        r = set.create(&pair) => r,
        _ = cancel.cancelled() => Err(LifecycleError::Interrupted),
    };
    let timeout = results::rdmabw::flags::secs(spec.pods.pod_timeout.max(1.0));
    let ready = match started {
        Ok(()) => set.wait_ready(timeout, &cancel).await,
        Err(e) => Err(e),
    };
    listener.abort();
    let mut rail_gpus = PairGpus::default();
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
            results::say!(
                "railsweep: mode {mode}: pods ready {:.1} s after their creation: {}",
                creating.elapsed().as_secs_f64(),
                ips.join(", ")
            );
            if mode == Mode::Dra {
                for p in &pods {
                    let gpus = report_allocation(set, p).await;
                    if p.metadata.name == pair.client.metadata.name {
                        rail_gpus.client = gpus;
                    } else if p.metadata.name == pair.server.metadata.name {
                        rail_gpus.server = gpus;
                    }
                }
            }
        }
        Err(e) => {
            let what = format!("mode {mode}: the pods did not start");
            guard.fail(e, what).await?;
            return Ok(None);
        }
    }
    let pods = Pods {
        client: pair.client.metadata.name.clone().unwrap_or_default(),
        server: pair.server.metadata.name.clone().unwrap_or_default(),
        rail_gpus,
    };
    Ok(Some(ManagedPair { guard, pods }))
}
