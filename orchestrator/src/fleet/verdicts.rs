//! `railsweep fleet --apply-verdicts`: the fleet's verdict written back into the cluster.
//!
//! Every measured node gets the label `railbench.io/rails` = `ok`, `degraded` or `failed`
//! and `railbench.io/rails-checked` = the run's date (`2026-12-03`); a node with a bad rail
//! gets the annotation `railbench.io/rails-evidence` (a JSON document: the bad rails, their
//! Gb/s, the percentage of the fleet median, the counter findings), which an `ok` verdict
//! removes. With `taints`, a node with a failed or degraded rail also gets the taint
//! `railbench.io/bad-rails=<rails>:NoSchedule` (the rails joined by `.`: `1.3`), unless that
//! would taint more than `--max-taint-pct` of the measured nodes: then no node is tainted, and
//! railsweep says why (so many bad nodes at once point at the fabric, not at the nodes).
//! `--untaint-passed` removes railsweep's taint from the nodes that now pass.
//!
//! A bad rail that a DRA driver publishes as a device of its node gets a DeviceTaintRule on
//! that device instead ([`devicetaints`]): the node is then tainted only when
//! [`devicetaints::node_at_fault`] says so, or for its bad rails that no device stands
//! for. The rules go through the same breaker, and `--untaint-passed` deletes the rule of a
//! rail that passes again.
//!
//! Only the culprits named by [`super::culprit::judge`] get a verdict other than `ok`: a
//! partner that was slow only in its pairs with a bad node is `ok`. A rail's verdict is
//! `failed` when one of the node's pairs on it failed (the test did not complete), else
//! `degraded` (below the outlier threshold, or slow to answer: its p99 latency above
//! `--lat-outlier-factor` times the fleet median; the evidence then has `latency_pairs` and the
//! p99s). A whole rail slow everywhere is the fabric's: it
//! marks no node.
//!
//! railsweep touches only these keys. Labels and annotations go in a JSON merge patch; the
//! taints are read, changed and written with the node's `resourceVersion` in the same patch,
//! so other taints are kept and a concurrent change (409 Conflict) makes railsweep read again.

pub mod devicetaints;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use anyhow::{Context, Result};
use clap::ValueEnum;
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::api::resource::v1::{DeviceTaintRule, ResourceSlice};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::Client;
use results::RailResult;
use serde_json::{json, Value};

use super::culprit::{self, RailEvidence, Rules, Suspect};
use crate::modes::dra;

/// The label with the verdict.
pub const LABEL: &str = "railbench.io/rails";
/// The label with the date of the run that wrote the verdict.
pub const CHECKED_LABEL: &str = "railbench.io/rails-checked";
/// The annotation with the bad rails and their evidence.
pub const EVIDENCE_ANNOTATION: &str = "railbench.io/rails-evidence";
/// The taint key on nodes with bad rails.
pub const TAINT_KEY: &str = "railbench.io/bad-rails";
/// The effect of railsweep's taint.
pub const TAINT_EFFECT: &str = "NoSchedule";
/// Attempts at a node's read-modify-write before giving up on conflicts.
const CONFLICT_ATTEMPTS: usize = 5;

/// What `--apply-verdicts` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApplyVerdicts {
    /// Nothing.
    None,
    /// The labels and the evidence annotation.
    Labels,
    /// The labels, and the taint on nodes with bad rails (a DeviceTaintRule per bad rail that
    /// DRA manages).
    Taints,
}

/// A node's (or a rail's) health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Measured and not a culprit.
    Ok,
    /// A rail below the outlier threshold.
    Degraded,
    /// A rail whose test failed.
    Failed,
}

impl Health {
    /// The label value.
    pub fn word(self) -> &'static str {
        match self {
            Health::Ok => "ok",
            Health::Degraded => "degraded",
            Health::Failed => "failed",
        }
    }
}

/// One bad rail of a node, with its evidence.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BadRail {
    /// `failed` or `degraded`.
    pub verdict: Health,
    /// The bandwidth and counter evidence.
    #[serde(flatten)]
    pub evidence: RailEvidence,
}

/// The verdict on one measured node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeVerdict {
    /// The Kubernetes node.
    pub node: String,
    /// The pod that stood for it in the fleet.
    pub pod: String,
    /// The worst of its rails.
    pub health: Health,
    /// Its bad rails, by rail.
    pub bad_rails: Vec<BadRail>,
    /// Its measured rails, each with its interface on the node (the rows' client or server
    /// interface): what a DRA device of the node is matched by.
    pub rails: BTreeMap<u32, String>,
}

impl NodeVerdict {
    /// The taint value: the bad rails joined by `.` (a label value allows no comma).
    pub fn taint_value(&self) -> String {
        self.bad_rails
            .iter()
            .map(|b| b.evidence.rail.to_string())
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// The verdict on every node measured in `rows`, by node name: culprits `failed` or
/// `degraded`, everyone else `ok`. Pods are mapped to their nodes through the rows.
pub fn node_verdicts(
    rows: &[RailResult],
    judged: &culprit::Verdict,
    t: impl Into<Rules>,
) -> Vec<NodeVerdict> {
    let t = t.into();
    // pod (as the culprit logic names it) -> node
    let mut node_of: BTreeMap<String, String> = BTreeMap::new();
    // pod -> rail -> its interface there
    let mut rails_of: BTreeMap<String, BTreeMap<u32, String>> = BTreeMap::new();
    for r in culprit::latest(rows).values() {
        let (c, s) = culprit::row_nodes(r);
        rails_of
            .entry(c.clone())
            .or_default()
            .insert(r.rail, r.client_interface.clone());
        rails_of
            .entry(s.clone())
            .or_default()
            .insert(r.rail, r.server_interface.clone());
        node_of.insert(c, r.client_node.clone());
        node_of.insert(s, r.server_node.clone());
    }
    let mut bad: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for s in &judged.suspects {
        match s {
            Suspect::NodeRail { node, rail, .. } => {
                bad.entry(node.clone()).or_default().insert(*rail);
            }
            Suspect::Node { node, rails } => {
                bad.entry(node.clone())
                    .or_default()
                    .extend(rails.iter().copied());
            }
            // The fabric's: no node is to blame.
            Suspect::Rail { .. } | Suspect::NotPresent { .. } => {}
        }
    }
    let mut out: Vec<NodeVerdict> = node_of
        .into_iter()
        .map(|(pod, node)| {
            let bad_rails: Vec<BadRail> = bad
                .get(&pod)
                .into_iter()
                .flatten()
                .map(|rail| {
                    let evidence = culprit::evidence(rows, &pod, *rail, t);
                    let verdict = if evidence.failed_pairs > 0 {
                        Health::Failed
                    } else {
                        Health::Degraded
                    };
                    BadRail { verdict, evidence }
                })
                .collect();
            let health = bad_rails
                .iter()
                .map(|b| b.verdict)
                .max()
                .unwrap_or(Health::Ok);
            NodeVerdict {
                rails: rails_of.remove(&pod).unwrap_or_default(),
                node,
                pod,
                health,
                bad_rails,
            }
        })
        .collect();
    out.sort_by(|a, b| a.node.cmp(&b.node));
    out
}

/// What `--apply-verdicts` and its options ask for, resolved.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--apply-verdicts`.
    pub apply: ApplyVerdicts,
    /// `--max-taint-pct`.
    pub max_taint_pct: f64,
    /// `--untaint-passed`.
    pub untaint_passed: bool,
    /// `--dry-run`: print the patches instead of sending them.
    pub dry_run: bool,
    /// The run's date, `YYYY-MM-DD` (a valid label value).
    pub date: String,
    /// The run id, recorded in the annotation.
    pub run_id: String,
}

/// The circuit breaker: `Err(why)` when tainting `bad` of `measured` nodes would taint more
/// than `max_pct` percent of them.
pub fn breaker(bad: usize, measured: usize, max_pct: f64) -> std::result::Result<(), String> {
    #[allow(clippy::cast_precision_loss)]
    let pct = if measured == 0 {
        0.0
    } else {
        bad as f64 * 100.0 / measured as f64
    };
    if bad == 0 || pct <= max_pct {
        return Ok(());
    }
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let most = (measured as f64 * max_pct / 100.0).floor() as usize;
    Err(format!(
        "not tainting: {bad} of {measured} measured nodes ({pct:.1} %) have bad rails, more than \
         --max-taint-pct {max_pct} (at most {most} node(s)); so many at once point at the fabric \
         (a switch, a cable plan, a setting), not at the nodes. The nodes are labelled; check the \
         fabric, or raise --max-taint-pct to taint them"
    ))
}

/// What railsweep does to one node's taints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaintAction {
    /// Leave them as they are.
    Keep,
    /// Set railsweep's taint (replacing an older railsweep taint).
    Set,
    /// Remove railsweep's taint.
    Remove,
}

/// The taints `current` becomes under `action`: other taints kept in their order; `None`
/// when nothing changes.
pub fn new_taints(current: &[Taint], action: TaintAction, value: &str) -> Option<Vec<Taint>> {
    let mine = |t: &Taint| t.key == TAINT_KEY;
    let mut others: Vec<Taint> = current.iter().filter(|t| !mine(t)).cloned().collect();
    match action {
        TaintAction::Keep => None,
        TaintAction::Remove => (others.len() != current.len()).then_some(others),
        TaintAction::Set => {
            let want = Taint {
                key: TAINT_KEY.into(),
                value: Some(value.into()),
                effect: TAINT_EFFECT.into(),
                time_added: None,
            };
            let have: Vec<&Taint> = current.iter().filter(|t| mine(t)).collect();
            if have.len() == 1 && have[0].value == want.value && have[0].effect == want.effect {
                return None;
            }
            others.push(want);
            Some(others)
        }
    }
}

/// The annotation's text for a node's verdict (`None` for `ok`: the annotation is removed).
pub fn evidence_text(v: &NodeVerdict, o: &Options) -> Option<String> {
    if v.health == Health::Ok {
        return None;
    }
    let doc = json!({
        "verdict": v.health,
        "run_id": o.run_id,
        "checked": o.date,
        "pod": v.pod,
        "bad_rails": v.bad_rails,
    });
    Some(doc.to_string())
}

/// The merge patch for one node: the labels and annotation, and with `taints` the whole
/// taint list with the `resource_version` it was read at.
pub fn node_patch(v: &NodeVerdict, o: &Options, taints: Option<(Vec<Taint>, &str)>) -> Value {
    let mut patch = json!({
        "metadata": {
            "labels": { LABEL: v.health.word(), CHECKED_LABEL: o.date },
            "annotations": { EVIDENCE_ANNOTATION: evidence_text(v, o) },
        }
    });
    if let Some((list, rv)) = taints {
        patch["metadata"]["resourceVersion"] = json!(rv);
        patch["spec"] = json!({ "taints": list });
    }
    patch
}

/// What [`apply`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Nodes patched (or printed, with --dry-run).
    pub labelled: usize,
    /// Nodes that got railsweep's taint.
    pub tainted: Vec<String>,
    /// Nodes whose railsweep taint was removed.
    pub untainted: Vec<String>,
    /// The DeviceTaintRules written (bad rails that DRA manages), by name.
    pub rules_written: Vec<String>,
    /// The DeviceTaintRules removed (their rails pass now), by name.
    pub rules_removed: Vec<String>,
    /// The DeviceTaintRules the circuit breaker kept from being written.
    pub rules_held: usize,
    /// The circuit breaker's message, when it kept the taints off.
    pub breaker: Option<String>,
}

/// The action on a node's taints; `node_taint`: the node taint is warranted (its plan's).
fn action_for(v: &NodeVerdict, o: &Options, may_taint: bool, node_taint: bool) -> TaintAction {
    match (v.health, o.apply) {
        (Health::Ok, _) if o.untaint_passed => TaintAction::Remove,
        (Health::Degraded | Health::Failed, ApplyVerdicts::Taints) if may_taint && node_taint => {
            TaintAction::Set
        }
        // Its bad rails are DRA's: their rules stand for them, not a taint on the whole node.
        (Health::Degraded | Health::Failed, ApplyVerdicts::Taints)
            if may_taint && o.untaint_passed =>
        {
            TaintAction::Remove
        }
        _ => TaintAction::Keep,
    }
}

/// The rights the verdicts need, for the messages.
const GRANTS: &str = "deploy/fleet-job.yaml's ClusterRole railsweep-verdicts";

/// What railsweep reads of DRA: the ResourceSlices (with `taints`) and its own
/// DeviceTaintRules (with `taints` or `--untaint-passed`). A cluster that does not serve
/// `resource.k8s.io/v1` (404) has neither.
struct DraState {
    slices: Vec<ResourceSlice>,
    rules: BTreeSet<String>,
}

impl DraState {
    async fn read(client: &Client, o: &Options) -> Result<DraState> {
        let absent = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404);
        let mut slices = Vec::new();
        if o.apply == ApplyVerdicts::Taints {
            match Api::<ResourceSlice>::all(client.clone())
                .list(&ListParams::default())
                .await
            {
                Ok(l) => slices = l.items,
                Err(e) if absent(&e) => {}
                Err(e) => {
                    return Err(anyhow::Error::new(e)).with_context(|| {
                        format!("cannot list the ResourceSlices (which rails DRA manages; railsweep needs list on resourceslices in resource.k8s.io: {GRANTS})")
                    })
                }
            }
        }
        let mut rules = BTreeSet::new();
        if o.apply == ApplyVerdicts::Taints || o.untaint_passed {
            let lp = ListParams::default().labels(&format!(
                "{}={}",
                devicetaints::MANAGED_BY_LABEL,
                devicetaints::MANAGED_BY
            ));
            match Api::<DeviceTaintRule>::all(client.clone()).list(&lp).await {
                Ok(l) => rules = l.items.into_iter().filter_map(|r| r.metadata.name).collect(),
                Err(e) if absent(&e) => {}
                Err(e) => {
                    return Err(anyhow::Error::new(e)).with_context(|| {
                        format!("cannot list railsweep's DeviceTaintRules (railsweep needs list on devicetaintrules in resource.k8s.io: {GRANTS})")
                    })
                }
            }
        }
        Ok(DraState { slices, rules })
    }
}

/// Write the rules of `plans` (when `may_taint`) and, with `--untaint-passed`, delete
/// railsweep's rules of the rails that pass; with `--dry-run` print each as a JSON line
/// `{"device_taint_rule": NAME, "apply": RULE}` or `{"device_taint_rule": NAME, "delete": true}`.
async fn apply_rules(
    client: &Client,
    plans: &[devicetaints::NodePlan],
    existing: &BTreeSet<String>,
    o: &Options,
    may_taint: bool,
    applied: &mut Applied,
    out: &mut impl Write,
) -> Result<()> {
    let api: Api<DeviceTaintRule> = Api::all(client.clone());
    let pp = PatchParams::apply("railsweep").force();
    for p in plans {
        for rule in &p.rules {
            let name = rule.metadata.name.clone().unwrap_or_default();
            if !may_taint {
                applied.rules_held += 1;
                continue;
            }
            if o.dry_run {
                writeln!(
                    out,
                    "{}",
                    json!({ "device_taint_rule": name, "apply": rule })
                )?;
            } else {
                api.patch(&name, &pp, &Patch::Apply(rule))
                    .await
                    .with_context(|| {
                        format!("cannot write DeviceTaintRule {name} (railsweep needs create, get and patch on devicetaintrules in resource.k8s.io: {GRANTS})")
                    })?;
            }
            applied.rules_written.push(name);
        }
        if !o.untaint_passed {
            continue;
        }
        for name in p.passing.iter().filter(|n| existing.contains(*n)) {
            if o.dry_run {
                writeln!(
                    out,
                    "{}",
                    json!({ "device_taint_rule": name, "delete": true })
                )?;
            } else {
                match api.delete(name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => continue,
                    Err(e) => {
                        return Err(anyhow::Error::new(e)).with_context(|| {
                            format!("cannot delete DeviceTaintRule {name} (railsweep needs delete on devicetaintrules in resource.k8s.io: {GRANTS})")
                        })
                    }
                }
            }
            applied.rules_removed.push(name.clone());
        }
    }
    Ok(())
}

/// Write the verdicts into the cluster (or, with `--dry-run`, print each node's patch as a
/// JSON line `{"node": ..., "patch": ...}` on `out`).
pub async fn apply(
    client: Client,
    verdicts: &[NodeVerdict],
    o: &Options,
    out: &mut impl Write,
) -> Result<Applied> {
    let mut applied = Applied::default();
    if o.apply == ApplyVerdicts::None {
        return Ok(applied);
    }
    let dra = DraState::read(&client, o).await?;
    let plans: Vec<devicetaints::NodePlan> = verdicts
        .iter()
        .map(|v| devicetaints::plan(v, &dra::node_devices(&dra.slices, &v.node), o))
        .collect();
    // A node counts once whether its bad rails get the node taint or rules.
    let bad = verdicts.iter().filter(|v| v.health != Health::Ok).count();
    let mut may_taint = o.apply == ApplyVerdicts::Taints;
    if may_taint {
        if let Err(why) = breaker(bad, verdicts.len(), o.max_taint_pct) {
            applied.breaker = Some(why);
            may_taint = false;
        }
    }
    let api: Api<Node> = Api::all(client.clone());
    let pp = PatchParams {
        field_manager: Some("railsweep".into()),
        ..PatchParams::default()
    };
    for (v, plan) in verdicts.iter().zip(&plans) {
        let action = action_for(v, o, may_taint, plan.node_taint);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let taints = if action == TaintAction::Keep {
                None
            } else {
                let node = api.get(&v.node).await.with_context(|| {
                    format!(
                        "cannot read node {} for its taints (railsweep needs get and patch on nodes: deploy/fleet-job.yaml's ClusterRole railsweep-verdicts)",
                        v.node
                    )
                })?;
                let current = node.spec.and_then(|s| s.taints).unwrap_or_default();
                new_taints(&current, action, &plan.taint_value())
                    .map(|list| (list, node.metadata.resource_version.unwrap_or_default()))
            };
            let patch = node_patch(
                v,
                o,
                taints.as_ref().map(|(l, rv)| (l.clone(), rv.as_str())),
            );
            if o.dry_run {
                writeln!(out, "{}", json!({ "node": v.node, "patch": patch }))?;
            } else {
                match api.patch(&v.node, &pp, &Patch::Merge(&patch)).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 409 && attempt < CONFLICT_ATTEMPTS => {
                        results::say!(
                            "railsweep: node {} changed while its taints were written; reading it again",
                            v.node
                        );
                        continue;
                    }
                    Err(e) => {
                        return Err(anyhow::Error::new(e)).with_context(|| {
                            format!(
                                "cannot patch node {} with its verdict (railsweep needs get and patch on nodes: deploy/fleet-job.yaml's ClusterRole railsweep-verdicts)",
                                v.node
                            )
                        })
                    }
                }
            }
            applied.labelled += 1;
            if taints.is_some() {
                match action {
                    TaintAction::Set => applied.tainted.push(v.node.clone()),
                    TaintAction::Remove => applied.untainted.push(v.node.clone()),
                    TaintAction::Keep => {}
                }
            }
            break;
        }
    }
    apply_rules(&client, &plans, &dra.rules, o, may_taint, &mut applied, out).await?;
    Ok(applied)
}

/// The stderr lines that say what was written.
pub fn summary(verdicts: &[NodeVerdict], applied: &Applied, o: &Options) -> Vec<String> {
    let count = |h: Health| verdicts.iter().filter(|v| v.health == h).count();
    let verb = if o.dry_run { "would label" } else { "labelled" };
    let mut lines = vec![format!(
        "verdicts: {verb} {} node(s) {LABEL}: {} ok, {} degraded, {} failed",
        applied.labelled,
        count(Health::Ok),
        count(Health::Degraded),
        count(Health::Failed)
    )];
    for v in verdicts.iter().filter(|v| v.health != Health::Ok) {
        let rails: Vec<String> = v
            .bad_rails
            .iter()
            .map(|b| {
                let pct = b
                    .evidence
                    .pct_of_fleet_median
                    .map(|p| format!(", {p:.0} % of the fleet median"))
                    .unwrap_or_default();
                let findings = if b.evidence.findings.is_empty() {
                    String::new()
                } else {
                    format!("; counters: {}", b.evidence.findings.join(", "))
                };
                format!(
                    "rail {} {} ({:.3} Gb/s{pct}{findings})",
                    b.evidence.rail,
                    b.verdict.word(),
                    b.evidence.median_gbps
                )
            })
            .collect();
        lines.push(format!(
            "verdict: node {} {}: {}",
            v.node,
            v.health.word(),
            rails.join("; ")
        ));
    }
    if let Some(why) = &applied.breaker {
        lines.push(why.clone());
    }
    let verb = if o.dry_run { "would taint" } else { "tainted" };
    if !applied.tainted.is_empty() {
        lines.push(format!(
            "verdicts: {verb} {} with {TAINT_KEY}:{TAINT_EFFECT}",
            applied.tainted.join(", ")
        ));
    }
    let passes = |n: &String| {
        verdicts
            .iter()
            .any(|v| &v.node == n && v.health == Health::Ok)
    };
    let (passed, ruled): (Vec<String>, Vec<String>) =
        applied.untainted.iter().cloned().partition(passes);
    let verb = if o.dry_run { "would remove" } else { "removed" };
    if !passed.is_empty() {
        lines.push(format!(
            "verdicts: {verb} {TAINT_KEY} from {} (they pass now)",
            passed.join(", ")
        ));
    }
    if !ruled.is_empty() {
        lines.push(format!(
            "verdicts: {verb} {TAINT_KEY} from {} (DeviceTaintRules stand for their bad rails)",
            ruled.join(", ")
        ));
    }
    if !applied.rules_written.is_empty() {
        let verb = if o.dry_run { "would write" } else { "wrote" };
        lines.push(format!(
            "verdicts: {verb} DeviceTaintRule {} ({}:{TAINT_EFFECT} on the rail's DRA device; the node is not tainted for it)",
            applied.rules_written.join(", "),
            devicetaints::RULE_TAINT_KEY
        ));
    }
    if applied.rules_held > 0 {
        lines.push(format!(
            "verdicts: the breaker kept {} DeviceTaintRule(s) from being written",
            applied.rules_held
        ));
    }
    if !applied.rules_removed.is_empty() {
        let verb = if o.dry_run { "would remove" } else { "removed" };
        lines.push(format!(
            "verdicts: {verb} DeviceTaintRule {} (the rail passes now)",
            applied.rules_removed.join(", ")
        ));
    }
    lines
}

#[cfg(test)]
mod tests;
