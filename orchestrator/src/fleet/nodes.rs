//! `railsweep fleet --mode M --nodes SELECTOR`: one pod of mode M per node, created from the
//! mode's typed pod (as `railsweep run --nodes` creates its pair, with the same options),
//! waited for under `--pod-timeout`, measured as a fleet in node order, and deleted.
//!
//! A pod that does not start is explained (as `railsweep run --nodes` explains it) and
//! deleted at once; the fleet goes on without its node when at least 2 pods are ready, and
//! its exit status is then at least 1 (that node's pairs were not measured). With fewer than
//! 2 ready pods there is no fleet: every pod is deleted and the exit status is 2.
//!
//! Ctrl-C while the pods start deletes them at once (exit 130). Ctrl-C during the fleet
//! stops it as `railsweep fleet` stops (remote processes ended, the rows written so far
//! kept), then the pods are deleted (exit 130). `--keep-pods` keeps them in every case.

use std::io::Write;

use anyhow::{anyhow, bail, Context, Result};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use tokio_util::sync::CancellationToken;

use super::FleetArgs;
use crate::exit::Verdict;
use crate::modes::guard::PodGuard;
use crate::modes::guard::DELETE_WAIT;
use crate::modes::lifecycle::{LifecycleError, PodSet};
use crate::modes::pattern::TolerationSpec;
use crate::modes::{self, yaml, Mode};
use crate::runner::{KubeRunner, KubeTarget};

/// Pods watched at once while they start.
const PARALLEL_WAITS: usize = 32;

/// What `--nodes` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum NodeChoice {
    /// A label selector: the nodes are listed through the API.
    Selector(String),
    /// Node names, in this order.
    Names(Vec<String>),
}

impl NodeChoice {
    /// A value with `=` (or a set-based `in (..)`, `!key`) is a label selector; else node names.
    pub(super) fn parse(s: &str) -> Result<NodeChoice> {
        let s = s.trim();
        if s.is_empty() {
            bail!("--nodes is empty: give a label selector (--nodes rail-test=true) or node names (--nodes n1,n2,n3)");
        }
        if s.contains('=') || s.contains('(') || s.starts_with('!') {
            return Ok(NodeChoice::Selector(s.to_string()));
        }
        let names: Vec<String> = s.split(',').map(str::trim).map(String::from).collect();
        if names.iter().any(String::is_empty) {
            bail!("--nodes {s}: an empty node name; give NODE,NODE,... or a label selector such as rail-test=true");
        }
        // The same rule as `run --nodes`: a node name goes into each pod's spec.
        for n in &names {
            crate::names::subdomain("--nodes: node", n).map_err(|e| anyhow!("{e}"))?;
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(twice) = names.iter().find(|n| !seen.insert(*n)) {
            bail!("--nodes: node {twice} is given twice (one pod per node)");
        }
        Ok(NodeChoice::Names(names))
    }
}

/// The nodes whose labels match `selector`, schedulable ones only, sorted by name.
async fn list_nodes(runner: &KubeRunner, selector: &str) -> Result<Vec<String>> {
    let api: Api<Node> = Api::all(runner.client());
    let list = api.list(&ListParams::default().labels(selector)).await.with_context(|| {
        format!("--nodes {selector}: cannot list the nodes (railsweep needs `list` on nodes; or name them: --nodes n1,n2,...)")
    })?;
    let mut names = Vec::new();
    for n in list.items {
        let Some(name) = n.metadata.name.clone() else {
            continue;
        };
        if n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
            results::say!(
                "railsweep: node {name} is cordoned (unschedulable): left out of the fleet"
            );
            continue;
        }
        names.push(name);
    }
    names.sort();
    if names.is_empty() {
        bail!("--nodes {selector}: no schedulable node has these labels (kubectl get nodes -l '{selector}' lists them)");
    }
    Ok(names)
}

/// The mode `--mode` names, for `--nodes`.
pub(super) fn mode_of(args: &FleetArgs) -> Result<Mode> {
    let m = args.mode.as_deref().with_context(|| {
        format!(
            "--nodes creates the pods of a network mode: give --mode {}",
            Mode::names()
        )
    })?;
    m.parse::<Mode>().map_err(|e| anyhow!("--mode: {e}"))
}

/// The pod options of `--nodes`, plus a toleration of railsweep's own taint
/// (`--apply-verdicts taints`): a node tainted by an earlier run is measured again, which is
/// how `--untaint-passed` can clear it.
fn fleet_pod_options(args: &FleetArgs, namespace: &str) -> Result<modes::PodOptions> {
    let mut opts = args.pod_args.pod_options(namespace, args.sweep.port)?;
    let own = TolerationSpec {
        key: super::verdicts::TAINT_KEY.into(),
        value: None,
        effect: Some(super::verdicts::TAINT_EFFECT.into()),
    };
    if !opts.tolerations.contains(&own) {
        opts.tolerations.push(own);
    }
    Ok(opts)
}

fn node_of(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.node_selector.as_ref())
        .and_then(|s| s.get("kubernetes.io/hostname"))
        .cloned()
        .unwrap_or_else(|| "?".into())
}

fn name_of(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// `--dry-run`: print the pods, one per node (node names need no cluster; a selector is
/// listed through the API).
pub(super) async fn dry_run(
    args: &FleetArgs,
    target: &KubeTarget,
    mode: Mode,
    choice: NodeChoice,
    run_id: &str,
) -> Result<Verdict> {
    let (nodes, namespace) = match choice {
        NodeChoice::Names(n) => (n, args.access.namespace_or_default()),
        NodeChoice::Selector(s) => {
            let runner = KubeRunner::connect(target).await?;
            (
                list_nodes(&runner, &s).await?,
                runner.namespace().to_string(),
            )
        }
    };
    let opts = fleet_pod_options(args, &namespace)?;
    let pods = modes::fleet_pods(mode, &opts, run_id, &nodes)?;
    let templates = modes::templates(mode, &opts, &modes::run_label(run_id)?);
    let text = if args.stdout_format()? == crate::config::OutFormat::Json {
        let mut items: Vec<serde_json::Value> = Vec::new();
        for t in &templates {
            items.push(serde_json::to_value(t)?);
        }
        for p in &pods {
            items.push(serde_json::to_value(p)?);
        }
        let list = serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": items });
        serde_json::to_string_pretty(&list)? + "\n"
    } else {
        let mut text = String::new();
        for t in &templates {
            text.push_str(&yaml::template_document(t, mode)?);
        }
        text + &yaml::fleet_yaml(mode, &pods)?
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(Verdict::Ok)
}

/// The fleet's pods, created; [`FleetPods::finish`] deletes them, and so does dropping them
/// (an error or a panic before `finish`: [`PodGuard`]).
#[derive(Debug)]
pub(super) struct FleetPods {
    guard: PodGuard,
    /// The pods that are ready, in node order.
    pub(super) ready: Vec<String>,
    /// (pod, node, why it did not start)
    not_started: Vec<(String, String, String)>,
}

impl FleetPods {
    /// Whether a pod did not start (its pairs are not measured).
    pub(super) fn some_not_started(&self) -> bool {
        !self.not_started.is_empty()
    }

    /// Delete the pods (with `--keep-pods`, say how to); after Ctrl-C without waiting.
    /// `true` when Ctrl-C came during the clean-up.
    pub(super) async fn finish(self, interrupted: bool) -> bool {
        let wait = if interrupted { None } else { Some(DELETE_WAIT) };
        self.guard.finish(wait).await
    }
}

/// Create one pod of `mode` per node and wait for them: `None` after Ctrl-C (the pods are
/// deleted then). Pods that do not start are explained and deleted; fewer than 2 ready is an
/// error.
pub(super) async fn start(
    runner: &KubeRunner,
    args: &FleetArgs,
    mode: Mode,
    choice: NodeChoice,
    run_id: &str,
    cancel: &CancellationToken,
) -> Result<Option<FleetPods>> {
    let namespace = runner.namespace().to_string();
    let nodes = match choice {
        NodeChoice::Names(n) => n,
        NodeChoice::Selector(s) => list_nodes(runner, &s).await?,
    };
    if nodes.len() < 2 {
        bail!(
            "--nodes {}: a fleet needs at least 2 nodes, found only {}",
            args.nodes.as_deref().unwrap_or(""),
            nodes.join(", ")
        );
    }
    let opts = fleet_pod_options(args, &namespace)?;
    let pods = modes::fleet_pods(mode, &opts, run_id, &nodes)?;
    let templates = modes::templates(mode, &opts, &modes::run_label(run_id)?);
    let mut set = PodSet::new(runner.client(), &namespace);
    if mode == Mode::Dra {
        set = set.with_dra(opts.dra.clone());
    }
    let keep = args.pod_args.keep_pods;
    // From here, whatever ends this command deletes what the set creates.
    let guard = PodGuard::new(set, &namespace, keep);
    let set = guard.set();
    if let Some(first) = pods.first() {
        let made = tokio::select! {
            r = set.create_templates(&templates, first) => r,
            () = cancel.cancelled() => Err(LifecycleError::Interrupted),
        };
        if let Err(e) = made {
            let what = format!("mode {mode}: cannot create the fleet's ResourceClaimTemplate");
            guard.fail(e, what).await?;
            return Ok(None);
        }
    }

    results::say!(
        "railsweep: mode {mode}: creating {} pods: {}",
        pods.len(),
        pods.iter()
            .map(|p| format!("{} on {}", name_of(p), node_of(p)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // (pod, node, why it did not start)
    let mut not_started: Vec<(String, String, String)> = Vec::new();
    for pod in &pods {
        let made = tokio::select! {
            r = set.create_one(pod) => r,
            () = cancel.cancelled() => Err(LifecycleError::Interrupted),
        };
        match made {
            Ok(()) => {}
            Err(LifecycleError::NotStarted(d)) => {
                not_started.push((name_of(pod), node_of(pod), d.to_string()))
            }
            Err(e) => {
                let what = format!("mode {mode}: cannot create the fleet's pods");
                guard.fail(e, what).await?;
                return Ok(None);
            }
        }
    }

    let timeout = results::rdmabw::flags::secs(args.pod_args.pod_timeout.max(1.0));
    let ends = match set.wait_each(timeout, cancel, PARALLEL_WAITS).await {
        Ok(e) => e,
        Err(e) => {
            let what = format!("mode {mode}: the fleet's pods did not start");
            guard.fail(e, what).await?;
            return Ok(None);
        }
    };
    let mut ready: Vec<String> = Vec::new();
    let mut failed_names: Vec<String> = Vec::new();
    for pod in &pods {
        let name = name_of(pod);
        match ends.iter().find(|(n, _)| *n == name).map(|(_, r)| r) {
            Some(Ok(_)) => ready.push(name),
            Some(Err(e)) => {
                not_started.push((name.clone(), node_of(pod), e.to_string()));
                failed_names.push(name);
            }
            None => {} // refused at create: already in not_started
        }
    }
    for (pod, node, why) in &not_started {
        results::say!("railsweep: pod {pod} on node {node} did not start: {why}");
    }
    if ready.len() < 2 {
        if guard.finish(Some(DELETE_WAIT)).await {
            return Ok(None);
        }
        bail!(
            "mode {mode}: {} of {} pods started; a fleet needs at least 2 (the reasons are above)",
            ready.len(),
            pods.len()
        );
    }
    if !failed_names.is_empty() && !keep {
        let (deleted, errors) = set.delete_named(&failed_names, None).await;
        if !deleted.is_empty() {
            results::say!(
                "railsweep: deleted pods that did not start: {}",
                deleted.join(", ")
            );
        }
        for e in errors {
            results::say!("railsweep: warning: {e}; delete it with kubectl delete pod");
        }
    }
    if !not_started.is_empty() {
        results::say!(
            "railsweep: going on with {} of {} pods; the pairs of node(s) {} are not measured",
            ready.len(),
            pods.len(),
            not_started
                .iter()
                .map(|(_, n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    results::say!(
        "railsweep: mode {mode}: {} pods ready: {}",
        ready.len(),
        ready.join(", ")
    );

    Ok(Some(FleetPods {
        guard,
        ready,
        not_started,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_and_names() {
        assert_eq!(
            NodeChoice::parse("rail-test=true").expect("ok"),
            NodeChoice::Selector("rail-test=true".into())
        );
        assert_eq!(
            NodeChoice::parse("env in (a,b)").expect("ok"),
            NodeChoice::Selector("env in (a,b)".into())
        );
        assert_eq!(
            NodeChoice::parse("n1, n2,n3").expect("ok"),
            NodeChoice::Names(vec!["n1".into(), "n2".into(), "n3".into()])
        );
        assert!(NodeChoice::parse("n1,,n2").is_err());
        assert!(NodeChoice::parse("n1,n1").is_err());
        assert!(NodeChoice::parse(" ").is_err());
    }

    /// Issue 53, finding 6: `fleet --nodes` took any text as a node name, unlike `run
    /// --nodes`; each name is an RFC 1123 subdomain, or refused naming the flag and the rule.
    #[test]
    fn node_names_are_checked_as_run_checks_them() {
        for bad in ["Node-A", "n1,a b", "n1,n2\n---\nkind: Pod", "n_1", "n1,-x"] {
            let e = NodeChoice::parse(bad).expect_err(bad).to_string();
            assert!(
                e.starts_with("--nodes: node `") && e.contains("RFC 1123"),
                "{bad:?}: {e}"
            );
        }
        assert!(NodeChoice::parse("gpu-node-01,node.example.com").is_ok());
    }
}
