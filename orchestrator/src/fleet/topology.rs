//! `--pattern topology --topology-label KEY`: pairs inside and across the groups of a node
//! label (a rack or a leaf switch), and the group named as the culprit when its uplink is bad.
//!
//! The nodes are grouped by the value of the label on each pod's node; the nodes without it form
//! one group of their own, `KEY=(none)` (a label value cannot hold a parenthesis, so the name is
//! never a real value). Of the pattern's rounds, half pair nodes inside their groups (each
//! group's own round-robin: its pairs differ round to round until they repeat) and half pair
//! nodes of different groups (random: the nodes ordered group by group in a shuffled order,
//! and the first half of that order paired with the second half, which puts two nodes of one
//! group together only when that group holds more than half of the fleet;
//! [`super::schedule::topology`] builds them).
//!
//! The culprit rule, per rail: a group is named when every one of its cross-group pairs is
//! slow while its inside pairs are fine (at least one fast, and every slow one explained by a
//! node the node rule names, [`super::culprit::judge`]): a bad uplink slows every pair that
//! crosses it and none that stays under its switch. A bad node cannot do that (it slows its
//! inside pairs too), nor can a group with a fast cross pair. When every group that has cross
//! pairs qualifies (two groups always do together), the named groups are the ones between which
//! every pair is slow: the spine, or the uplinks of all of them. The nodes of a named group get
//! no node verdict for the pairs its uplink explains: a node named only through such pairs is
//! taken off the suspects, so `--apply-verdicts` neither labels nor taints it for that.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use futures::stream::StreamExt;
use results::{RailResult, RailStatus};

use super::culprit::{self, PairRail, Suspect};
use super::schedule::Pair;

/// The value standing for "no such label" in a group's name.
pub const NO_LABEL: &str = "(none)";

/// The groups of a fleet's nodes, by the value of one node label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Groups {
    /// The label key (`--topology-label`).
    pub label: String,
    /// The label values, one per group, sorted ([`NO_LABEL`] for the nodes without it).
    pub values: Vec<String>,
    /// The group index of each node, in the fleet's node order.
    pub of: Vec<usize>,
}

impl Groups {
    /// The groups of nodes whose label values are `values` (in the fleet's node order; `None`
    /// for a node without the label).
    pub fn from_values(label: &str, values: &[Option<String>]) -> Groups {
        let names: BTreeSet<&str> = values
            .iter()
            .map(|v| v.as_deref().unwrap_or(NO_LABEL))
            .collect();
        let names: Vec<String> = names.into_iter().map(str::to_string).collect();
        let of = values
            .iter()
            .map(|v| {
                let v = v.as_deref().unwrap_or(NO_LABEL);
                names.iter().position(|x| x == v).unwrap_or(0)
            })
            .collect();
        Groups {
            label: label.to_string(),
            values: names,
            of,
        }
    }

    /// The name of group `g`: `KEY=VALUE`.
    pub fn name(&self, g: usize) -> String {
        format!("{}={}", self.label, self.values[g])
    }

    /// How many nodes each group has.
    pub fn sizes(&self) -> Vec<usize> {
        let mut n = vec![0; self.values.len()];
        for &g in &self.of {
            n[g] += 1;
        }
        n
    }

    /// How many nodes lack the label.
    pub fn unlabelled(&self) -> usize {
        match self.values.iter().position(|v| v == NO_LABEL) {
            Some(g) => self.of.iter().filter(|&&x| x == g).count(),
            None => 0,
        }
    }

    /// What the header says of them: `label rack: 12 groups (sizes 2 to 32)`, and the nodes
    /// without the label.
    pub fn describe(&self) -> String {
        let sizes = self.sizes();
        let (lo, hi) = (
            sizes.iter().min().copied().unwrap_or(0),
            sizes.iter().max().copied().unwrap_or(0),
        );
        let mut s = format!(
            "label {}: {} group(s) of {}",
            self.label,
            self.values.len(),
            if lo == hi {
                format!("{lo} pod(s)")
            } else {
                format!("{lo} to {hi} pods")
            }
        );
        let none = self.unlabelled();
        if none > 0 {
            s += &format!(
                ", {none} pod(s) on nodes without the label grouped as {}={NO_LABEL}",
                self.label
            );
        }
        s
    }
}

/// One (pair, rail) as the group rule sees it.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// The groups of its two nodes.
    pub groups: (usize, usize),
    /// Slow or failed.
    pub slow: bool,
    /// One of its nodes is named by the node rule on that rail.
    pub node_named: bool,
}

/// The group rule over one rail's pairs: the groups named (every cross pair slow, inside pairs
/// fine), and whether that is every group that has cross pairs.
pub fn named_groups(n_groups: usize, pairs: &[Seen]) -> (Vec<usize>, bool) {
    #[derive(Default, Clone, Copy)]
    struct Count {
        cross: usize,
        cross_slow: usize,
        inside_fast: usize,
        inside_slow_unexplained: usize,
    }
    let mut c = vec![Count::default(); n_groups];
    for p in pairs {
        let (a, b) = p.groups;
        if a == b {
            if !p.slow {
                c[a].inside_fast += 1;
            } else if !p.node_named {
                c[a].inside_slow_unexplained += 1;
            }
        } else {
            for g in [a, b] {
                c[g].cross += 1;
                c[g].cross_slow += usize::from(p.slow);
            }
        }
    }
    let with_cross = c.iter().filter(|x| x.cross > 0).count();
    let named: Vec<usize> = (0..n_groups)
        .filter(|&g| {
            let x = c[g];
            x.cross > 0
                && x.cross_slow == x.cross
                && x.inside_fast > 0
                && x.inside_slow_unexplained == 0
        })
        .collect();
    let every = with_cross >= 2 && named.len() == with_cross;
    (named, every)
}

pub use results::GroupCulprit;

/// The median of `v` (0 when empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The group culprits of the latest rows, and the node rule's verdict amended: the node
/// suspects whose every slow pair on a rail crosses a named group's uplink there are taken off
/// (and get no node verdict), and the outliers such a group explains are no longer unexplained.
/// `pods` are the fleet's pods in the order of `groups.of`; a pod not among them is in no group.
pub fn judge(
    rows: &[RailResult],
    t: impl Into<culprit::Rules>,
    pods: &[String],
    groups: &Groups,
    verdict: &mut culprit::Verdict,
) -> Vec<GroupCulprit> {
    let t = t.into();
    let group_of: BTreeMap<&str, usize> = pods
        .iter()
        .map(String::as_str)
        .zip(groups.of.iter().copied())
        .collect();
    let medians = culprit::medians(rows);
    let last = culprit::latest(rows);
    let mut node_named: BTreeSet<(String, u32)> = BTreeSet::new();
    for s in &verdict.suspects {
        match s {
            Suspect::NodeRail { node, rail, .. } => {
                node_named.insert((node.clone(), *rail));
            }
            Suspect::Node { node, rails } => {
                node_named.extend(rails.iter().map(|r| (node.clone(), *r)));
            }
            Suspect::Rail { .. } | Suspect::NotPresent { .. } => {}
        }
    }
    // rail -> its pairs, with their keys and Gb/s.
    let mut per: BTreeMap<u32, Vec<(Seen, &PairRail, f64)>> = BTreeMap::new();
    for (k, r) in &last {
        let (Some(&ga), Some(&gb)) = (group_of.get(k.0.as_str()), group_of.get(k.1.as_str()))
        else {
            continue;
        };
        let seen = Seen {
            groups: (ga, gb),
            slow: culprit::is_slow(r, &medians, t),
            node_named: node_named.contains(&(k.0.clone(), k.2))
                || node_named.contains(&(k.1.clone(), k.2)),
        };
        let bw = if r.status == RailStatus::Failed {
            0.0
        } else {
            r.bw_avg_gbps.unwrap_or(0.0)
        };
        per.entry(k.2).or_default().push((seen, k, bw));
    }
    let mut out = Vec::new();
    // (group, rail) named.
    let mut named: BTreeSet<(usize, u32)> = BTreeSet::new();
    for (rail, seen) in &per {
        let plain: Vec<Seen> = seen.iter().map(|x| x.0).collect();
        let (gs, every) = named_groups(groups.values.len(), &plain);
        for g in gs {
            let (mut cross, mut inside) = (Vec::new(), Vec::new());
            for (s, _, bw) in seen {
                if s.groups.0 == g && s.groups.1 == g {
                    inside.push(*bw);
                } else if s.groups.0 == g || s.groups.1 == g {
                    cross.push(*bw);
                }
            }
            out.push(GroupCulprit {
                label: groups.label.clone(),
                value: groups.values[g].clone(),
                rail: *rail,
                cross_pairs: cross.len() as u64,
                cross_median_gbps: median(cross),
                inside_pairs: inside.len() as u64,
                inside_median_gbps: median(inside),
                every_group: every,
            });
            named.insert((g, *rail));
        }
    }
    if named.is_empty() {
        return out;
    }
    let explained = |k: &PairRail| -> bool {
        match (group_of.get(k.0.as_str()), group_of.get(k.1.as_str())) {
            (Some(&a), Some(&b)) => {
                a != b && (named.contains(&(a, k.2)) || named.contains(&(b, k.2)))
            }
            _ => false,
        }
    };
    let slow_keys: Vec<&PairRail> = last
        .iter()
        .filter(|(_, r)| culprit::is_slow(r, &medians, t))
        .map(|(k, _)| k)
        .collect();
    // A node's slow pairs on a rail all explained by a named group.
    let only_uplink = |node: &str, rail: u32| {
        slow_keys
            .iter()
            .filter(|k| k.2 == rail && (k.0 == node || k.1 == node))
            .all(|k| explained(k))
    };
    verdict.suspects.retain(|s| match s {
        Suspect::NodeRail { node, rail, .. } => !only_uplink(node, *rail),
        Suspect::Node { node, rails } => !rails.iter().all(|r| only_uplink(node, *r)),
        Suspect::Rail { .. } | Suspect::NotPresent { .. } => true,
    });
    verdict.unexplained.retain(|k| !explained(k));
    out
}

/// The label `key` of the node of each of `pods` (in order), read through the API: each pod's
/// `spec.nodeName`, then that node's labels (each node read once, 16 reads at a time).
pub async fn node_labels(
    client: kube::Client,
    namespace: &str,
    pods: &[String],
    key: &str,
) -> Result<Vec<Option<String>>> {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::api::Api;
    let node_of: Vec<String> = futures::stream::iter(pods.iter().map(|pod| {
        // `NAMESPACE/NAME` (`-A`), else a pod of `namespace`.
        let (ns, name) = pod.split_once('/').unwrap_or((namespace, pod.as_str()));
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        async move {
            let p = api
                .get(name)
                .await
                .with_context(|| format!("--topology-label: cannot read pod {ns}/{name}"))?;
            p.spec
                .and_then(|s| s.node_name)
                .with_context(|| format!("--topology-label: pod {ns}/{name} is on no node"))
        }
    }))
    .buffered(16)
    .collect::<Vec<Result<String>>>()
    .await
    .into_iter()
    .collect::<Result<_>>()?;
    let node_api: Api<Node> = Api::all(client);
    let distinct: BTreeSet<&String> = node_of.iter().collect();
    let labels: BTreeMap<String, Option<String>> =
        futures::stream::iter(distinct.into_iter().map(|node| {
            let api = node_api.clone();
            async move {
                let n = api.get(node).await.with_context(|| {
                    format!(
                        "--topology-label: cannot read node {node} (railsweep needs `get` on nodes for it)"
                    )
                })?;
                let v = n.metadata.labels.and_then(|mut l| l.remove(key));
                Ok::<_, anyhow::Error>((node.clone(), v))
            }
        }))
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    Ok(node_of
        .iter()
        .map(|n| labels.get(n).cloned().flatten())
        .collect())
}

/// The group rule over a schedule's pairs alone (no measurement), for the simulation: `slow`
/// says whether a pair is slow, `named_node` whether the node rule names a node. Returns the
/// groups named.
pub fn simulate(
    group_of: &[usize],
    pairs: &[Pair],
    slow: &dyn Fn(usize, usize) -> bool,
    named_node: &dyn Fn(usize) -> bool,
) -> (Vec<usize>, bool) {
    let n_groups = group_of.iter().max().map_or(0, |g| g + 1);
    let seen: Vec<Seen> = pairs
        .iter()
        .map(|p| Seen {
            groups: (group_of[p.client], group_of[p.server]),
            slow: slow(p.client, p.server),
            node_named: named_node(p.client) || named_node(p.server),
        })
        .collect();
    named_groups(n_groups, &seen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::culprit::Threshold;
    use crate::test_support::row;

    #[test]
    fn unequal_groups_and_the_unlabelled_group() {
        let values: Vec<Option<String>> = ["r1", "r1", "r2", "", "r2", "r2", "r3"]
            .iter()
            .map(|v| (!v.is_empty()).then(|| v.to_string()))
            .collect();
        let g = Groups::from_values("rack", &values);
        assert_eq!(g.values, ["(none)", "r1", "r2", "r3"]);
        assert_eq!(g.of, [1, 1, 2, 0, 2, 2, 3]);
        assert_eq!(g.sizes(), [1, 2, 3, 1]);
        assert_eq!(g.unlabelled(), 1);
        assert_eq!(g.name(0), "rack=(none)");
        assert!(
            g.describe()
                .ends_with("1 pod(s) on nodes without the label grouped as rack=(none)"),
            "{}",
            g.describe()
        );
    }

    /// 4 racks of 4 pods over `topology:8:5`, 2 rails; `slow(a, b, rail)` says which pairs
    /// run at 40 instead of 96 Gb/s.
    fn fleet(slow: &dyn Fn(usize, usize, u32) -> bool) -> (Vec<String>, Groups, Vec<RailResult>) {
        let pods: Vec<String> = (0..16).map(|i| format!("p{i:02}")).collect();
        let values: Vec<Option<String>> = (0..16).map(|i| Some(format!("r{}", i / 4))).collect();
        let groups = Groups::from_values("rack", &values);
        let s = crate::fleet::schedule::topology(&groups.of, 8, 5);
        let mut rows = Vec::new();
        for p in s.pairs() {
            for rail in 0..2 {
                let bw = if slow(p.client, p.server, rail) {
                    40.0
                } else {
                    96.0
                };
                rows.push(row(&pods[p.client], &pods[p.server], rail, Some(bw)));
            }
        }
        (pods, groups, rows)
    }

    #[test]
    fn a_bad_uplink_names_its_group_and_none_of_its_nodes() {
        // Rack r2's uplink on rail 1: every pair with one end in r2 and one outside is slow.
        let up = |x: usize| x / 4 == 2;
        let (pods, groups, rows) = fleet(&|a, b, rail| rail == 1 && up(a) != up(b));
        let t = Threshold::default();
        let mut v = culprit::judge(&rows, t);
        assert!(v.outliers > 0);
        let named = judge(&rows, t, &pods, &groups, &mut v);
        assert_eq!(named.len(), 1, "{named:?}");
        assert_eq!((named[0].name().as_str(), named[0].rail), ("rack=r2", 1));
        assert!(!named[0].every_group);
        let text = named[0].to_string();
        assert!(
            text.starts_with("group rack=r2: cross-group pairs slow on rail 1 (all ")
                && text.ends_with("suspect its uplink"),
            "{text}"
        );
        assert!(v.suspects.is_empty(), "no node named: {:?}", v.suspects);
        assert!(v.unexplained.is_empty(), "{:?}", v.unexplained);
        let nodes = super::super::verdicts::node_verdicts(&rows, &v, t);
        assert!(nodes
            .iter()
            .all(|n| n.health == super::super::verdicts::Health::Ok));
    }

    #[test]
    fn a_bad_node_is_named_as_a_node_not_its_group() {
        // p09 (rack r2) bad on rail 0: its inside pairs are slow too.
        let (pods, groups, rows) = fleet(&|a, b, rail| rail == 0 && (a == 9 || b == 9));
        let t = Threshold::default();
        let mut v = culprit::judge(&rows, t);
        let named = judge(&rows, t, &pods, &groups, &mut v);
        assert!(named.is_empty(), "{named:?}");
        assert_eq!(v.suspects.len(), 1, "{:?}", v.suspects);
        assert!(matches!(&v.suspects[0], Suspect::NodeRail { node, rail: 0, .. } if node == "p09"));
    }

    #[test]
    fn a_bad_node_behind_a_bad_uplink_is_still_named() {
        let up = |x: usize| x / 4 == 1;
        let (pods, groups, rows) =
            fleet(&|a, b, rail| rail == 1 && (up(a) != up(b) || a == 5 || b == 5));
        let t = Threshold::default();
        let mut v = culprit::judge(&rows, t);
        let named = judge(&rows, t, &pods, &groups, &mut v);
        assert_eq!(
            named.iter().map(GroupCulprit::name).collect::<Vec<_>>(),
            ["rack=r1"]
        );
        assert_eq!(v.suspects.len(), 1, "{:?}", v.suspects);
        assert!(matches!(&v.suspects[0], Suspect::NodeRail { node, rail: 1, .. } if node == "p05"));
    }

    #[test]
    fn every_cross_pair_slow_names_every_group_as_the_spine() {
        let (pods, groups, mut rows) = fleet(&|a, b, rail| rail == 0 && a / 4 != b / 4);
        // Half of the pairs are across, all slow: the fleet median is theirs, and only the
        // line rate tells.
        assert!(culprit::judge(&rows, Threshold::default()).outliers == 0);
        for r in &mut rows {
            r.line_rate_gbps = Some(100.0);
        }
        let t = Threshold::LineRatePct(80.0);
        let mut v = culprit::judge(&rows, t);
        let named = judge(&rows, t, &pods, &groups, &mut v);
        assert_eq!(named.len(), 4, "{named:?}");
        assert!(named.iter().all(|g| g.every_group && g.rail == 0));
        assert!(named[0].to_string().contains("suspect the spine"));
        assert!(v.suspects.is_empty() && v.unexplained.is_empty(), "{v:?}");
    }

    #[test]
    fn the_rule_on_its_own() {
        let s = |a, b, slow| Seen {
            groups: (a, b),
            slow,
            node_named: false,
        };
        // Group 0: cross slow, inside fast: named. Group 1: one cross pair fast.
        let pairs = [
            s(0, 0, false),
            s(0, 1, true),
            s(0, 2, true),
            s(1, 2, false),
            s(1, 1, false),
            s(2, 2, false),
        ];
        assert_eq!(named_groups(3, &pairs), (vec![0], false));
        // No inside pair measured: nothing tells an uplink from a node.
        assert_eq!(named_groups(3, &pairs[1..]), (vec![], false));
        // An inside pair slow with no named node: not an uplink.
        let mut more = pairs.to_vec();
        more.push(s(0, 0, true));
        assert_eq!(named_groups(3, &more).0, Vec::<usize>::new());
        more.last_mut().expect("a pair").node_named = true;
        assert_eq!(named_groups(3, &more).0, vec![0]);
    }
}
