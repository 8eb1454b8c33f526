//! Outliers and likely culprits, from the rows of a fleet run.
//!
//! Per rail, the fleet median of the average bandwidth of the measured pairs is the reference.
//! A (pair, rail) below the threshold (90 % of that median by default, or a percentage of the
//! rail's line rate) or failed is an outlier; the fleet measures outliers once more and judges
//! the latest row of each (pair, rail). A node's rail that is slow in every pair it joins on
//! that rail is the likely culprit: a bad rail of one node drags down each of its `N-1` pairs,
//! while each of its partners is slow in only one of theirs. A node slow on every rail is named
//! as a whole, and a rail slow in every pair of the fleet (only visible against the line rate)
//! is named as the rail. With two nodes bandwidth alone does not tell them apart, and both are
//! named.
//!
//! Latency is judged too, where the rows have it (`--test bw,lat`): a (pair, rail) whose p99
//! latency is above `--lat-outlier-factor` (2.1, as ClusterKit) times its rail's fleet median
//! p99 is an outlier as a slow one is, measured again and judged by the same rules: a node
//! whose rail is slow to answer makes every pair it joins there slow to answer.
//!
//! Counter findings are evidence too. A finding of a port's own (the link flapped, the PHY saw
//! errors) read on one side of a slow (pair, rail) names that side's node: it is named on that
//! rail even when its other pairs were fine (a flap during one test), and a partner that is
//! slow only in pairs with such a node, with no finding of its own, is not named. Every named
//! node-rail lists the findings its own side's counters showed in its slow pairs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use results::rdmabw::counters::FindingKind;
use results::rdmabw::report::Role;
use results::stats::median;
use results::{Layer, RailResult, RailStatus};

/// What makes a (pair, rail) an outlier.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// Below this percentage of the rail's fleet median.
    MedianPct(f64),
    /// Below this percentage of the row's line rate (rows without one use the median rule at
    /// the same percentage).
    LineRatePct(f64),
}

impl Default for Threshold {
    fn default() -> Self {
        Threshold::MedianPct(90.0)
    }
}

/// ClusterKit's latency factor: a (pair, rail) whose p99 latency is above this many times its
/// rail's fleet median p99 is an outlier (`--lat-outlier-factor`).
pub const DEFAULT_LAT_OUTLIER_FACTOR: f64 = 2.1;

/// Every rule that makes a (pair, rail) an outlier: its bandwidth against `bw`, and its p99
/// latency (rows that have one) above `lat_factor` times its rail's fleet median p99.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    /// The bandwidth rule.
    pub bw: Threshold,
    /// The latency rule's factor.
    pub lat_factor: f64,
}

impl From<Threshold> for Rules {
    fn from(bw: Threshold) -> Self {
        Rules {
            bw,
            lat_factor: DEFAULT_LAT_OUTLIER_FACTOR,
        }
    }
}

/// The fleet medians of each rail: of the measured average bandwidths, and of the p99
/// latencies where measured (failed rows left out).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Medians {
    /// Gb/s per rail.
    pub bw: BTreeMap<u32, f64>,
    /// p99 latency, microseconds, per rail: the median over the nodes of each node's median
    /// p99 on that rail ([`node_median_per_rail`]).
    pub lat_p99: BTreeMap<u32, f64>,
}

/// The medians of the latest rows.
pub fn medians(rows: &[RailResult]) -> Medians {
    Medians {
        bw: rail_medians(rows),
        lat_p99: node_median_per_rail(rows, |r| r.lat_p99_us),
    }
}

/// Per rail, the median over the nodes of each node's median of `value` in its latest
/// measured pairs there. A node that is slow to answer raises the value of every pair it is
/// in, but only its own node median: in a fleet of four, all pairs, one such node is in 3 of
/// a rail's 6 pairs, and their median is half its own, which a factor of 2.1 above it never
/// reaches; the median of the four node medians is a good node's.
fn node_median_per_rail(
    rows: &[RailResult],
    value: impl Fn(&RailResult) -> Option<f64>,
) -> BTreeMap<u32, f64> {
    let mut per: BTreeMap<u32, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for r in latest(rows).values() {
        if let (true, Some(v)) = (r.status != RailStatus::Failed, value(r)) {
            let (a, b) = row_nodes(r);
            let nodes = per.entry(r.rail).or_default();
            for n in [a, b] {
                nodes.entry(n).or_default().push(v);
            }
        }
    }
    per.into_iter()
        .filter_map(|(rail, nodes)| {
            let per_node: Vec<f64> = nodes.into_values().filter_map(|v| median(&v)).collect();
            let m = median(&per_node)?;
            Some((rail, m))
        })
        .collect()
}

/// The node names of a row: the pod names where there are pods, else the node names.
pub fn row_nodes(r: &RailResult) -> (String, String) {
    (
        r.client_pod
            .clone()
            .unwrap_or_else(|| r.client_node.clone()),
        r.server_pod
            .clone()
            .unwrap_or_else(|| r.server_node.clone()),
    )
}

/// A (pair, rail) whatever the roles: the two node names in order, and the rail.
pub type PairRail = (String, String, u32);

fn key(r: &RailResult) -> PairRail {
    let (a, b) = row_nodes(r);
    let (a, b) = either_way(a, b);
    (a, b, r.rail)
}

/// Two nodes in order, whichever was the client.
fn either_way<T: PartialOrd>(a: T, b: T) -> (T, T) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

/// The latest row of each (pair, rail), in the order rows came.
pub fn latest(rows: &[RailResult]) -> BTreeMap<PairRail, &RailResult> {
    let mut m = BTreeMap::new();
    for r in rows {
        m.insert(key(r), r);
    }
    m
}

/// Whether a pair's rail failed or fell below its threshold, by its latest row (a pair
/// measured again is judged by that measurement, as `railsweep report` judges a fleet's file).
pub fn any_not_ok(rows: &[RailResult]) -> bool {
    latest(rows)
        .values()
        .any(|r| r.status != results::RailStatus::Ok)
}

/// How many of the `scheduled` pairs of pods (client, server) have a row in `rows`, and how many
/// there are: each pair counted once, whichever way round and however often the schedule meets
/// it (a random schedule meets some pairs twice, a ring meets each both ways).
pub fn pairs_measured<'a>(
    scheduled: impl IntoIterator<Item = (&'a str, &'a str)>,
    rows: &[RailResult],
) -> (usize, usize) {
    let scheduled: BTreeSet<(String, String)> = scheduled
        .into_iter()
        .map(|(a, b)| either_way(a.to_string(), b.to_string()))
        .collect();
    let measured: BTreeSet<(String, String)> =
        latest(rows).into_keys().map(|(a, b, _)| (a, b)).collect();
    (scheduled.intersection(&measured).count(), scheduled.len())
}

/// The median of the measured average bandwidths, per rail (failed rows left out).
pub fn rail_medians(rows: &[RailResult]) -> BTreeMap<u32, f64> {
    median_per_rail(rows, |r| r.bw_avg_gbps)
}

/// The median of `value` over the latest measured rows, per rail.
fn median_per_rail(
    rows: &[RailResult],
    value: impl Fn(&RailResult) -> Option<f64>,
) -> BTreeMap<u32, f64> {
    let mut per: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for r in latest(rows).values() {
        if let (true, Some(v)) = (r.status != RailStatus::Failed, value(r)) {
            per.entry(r.rail).or_default().push(v);
        }
    }
    per.into_iter()
        .filter_map(|(rail, v)| Some((rail, median(&v)?)))
        .collect()
}

/// The Gb/s under which a row is an outlier, if there is a reference for it.
pub fn limit_of(r: &RailResult, medians: &BTreeMap<u32, f64>, t: Threshold) -> Option<f64> {
    match t {
        Threshold::LineRatePct(p) => r
            .line_rate_gbps
            .map(|l| l * p / 100.0)
            .or_else(|| medians.get(&r.rail).map(|m| m * p / 100.0)),
        Threshold::MedianPct(p) => medians.get(&r.rail).map(|m| m * p / 100.0),
    }
}

/// True when the row failed, is under its bandwidth limit, or is slow to answer
/// ([`is_slow_to_answer`]).
pub fn is_slow(r: &RailResult, m: &Medians, t: Rules) -> bool {
    bw_slow(r, &m.bw, t.bw) || is_slow_to_answer(r, m, t)
}

/// True when the row's p99 latency is above `t.lat_factor` times its rail's fleet median p99.
pub fn is_slow_to_answer(r: &RailResult, m: &Medians, t: Rules) -> bool {
    match (r.lat_p99_us, m.lat_p99.get(&r.rail)) {
        (Some(p99), Some(median)) if r.status != RailStatus::Failed && *median > 0.0 => {
            p99 > t.lat_factor * median
        }
        _ => false,
    }
}

/// True when the row failed or is under its bandwidth limit.
fn bw_slow(r: &RailResult, medians: &BTreeMap<u32, f64>, t: Threshold) -> bool {
    if r.status == RailStatus::Failed {
        return true;
    }
    match (r.bw_avg_gbps, limit_of(r, medians, t)) {
        (Some(bw), Some(limit)) => bw < limit,
        (None, _) => true,
        (Some(_), None) => false,
    }
}

/// The outliers among the latest rows: (pair, rail) keys, in order.
pub fn outliers(rows: &[RailResult], t: impl Into<Rules>) -> Vec<PairRail> {
    let t = t.into();
    let medians = medians(rows);
    latest(rows)
        .into_iter()
        .filter(|(_, r)| is_slow(r, &medians, t))
        .map(|(k, _)| k)
        .collect()
}

/// What is named as a likely culprit.
#[derive(Debug, Clone, PartialEq)]
pub enum Suspect {
    /// One rail of one node: slow in every pair that node joins on that rail.
    NodeRail {
        /// The node (or pod).
        node: String,
        /// The rail.
        rail: u32,
        /// Pairs it joined on that rail.
        pairs: usize,
        /// Of those, the slow ones (all of them, unless a finding of its own port named it).
        slow_pairs: usize,
        /// The findings its own side's counters showed in its slow pairs on that rail.
        findings: Vec<FindingKind>,
        /// Median Gb/s of its pairs on that rail (0 when all failed).
        median_gbps: f64,
        /// The fleet median of that rail, if any pair was measured.
        fleet_median_gbps: Option<f64>,
        /// Of its slow pairs, those slow to answer (p99 latency above the rule's factor times
        /// the fleet median).
        lat_slow_pairs: usize,
        /// Median p99 latency of its pairs on that rail, where measured.
        lat_p99_us: Option<f64>,
        /// The fleet median p99 latency of that rail, where measured.
        fleet_lat_p99_us: Option<f64>,
    },
    /// A node slow on every rail in every pair.
    Node {
        /// The node (or pod).
        node: String,
        /// Its rails.
        rails: Vec<u32>,
    },
    /// A rail asked for (`--rails`) that no pod has: nothing to blame but the request (never
    /// the rail's switch, which a rail no pod has cannot reach).
    NotPresent {
        /// The rail.
        rail: u32,
    },
    /// A rail slow in every pair of the fleet.
    Rail {
        /// The rail.
        rail: u32,
        /// Pairs measured on it.
        pairs: usize,
    },
}

impl fmt::Display for Suspect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Suspect::NodeRail {
                node,
                rail,
                pairs,
                slow_pairs,
                findings,
                median_gbps,
                fleet_median_gbps,
                lat_slow_pairs,
                lat_p99_us,
                fleet_lat_p99_us,
            } => {
                if slow_pairs == pairs {
                    write!(f, "node {node} rail {rail}: slow in all {pairs} of its pairs on rail {rail} (median {median_gbps:.3} Gb/s")?;
                } else {
                    write!(f, "node {node} rail {rail}: slow in {slow_pairs} of its {pairs} pairs on rail {rail} (median {median_gbps:.3} Gb/s")?;
                }
                match fleet_median_gbps {
                    Some(m) => write!(f, ", fleet median {m:.3} Gb/s)")?,
                    None => f.write_str(")")?,
                }
                if let (true, Some(p99), Some(m)) =
                    (*lat_slow_pairs > 0, lat_p99_us, fleet_lat_p99_us)
                {
                    write!(f, "; latency: p99 {p99:.2} us in {lat_slow_pairs} of its pairs' median, fleet median {m:.2} us")?;
                }
                if !findings.is_empty() {
                    let words: Vec<&str> = findings.iter().map(|k| k.word()).collect();
                    write!(f, "; its own counters: {}", words.join(", "))?;
                }
                Ok(())
            }
            Suspect::Node { node, rails } => {
                write!(
                    f,
                    "node {node}: slow on every rail ({rails:?}) in every pair it joins"
                )
            }
            Suspect::NotPresent { rail } => {
                write!(f, "rail {rail}: not present in any pod (no pod's `rdmabw rails` lists it; give --rails with rails the pods have)")
            }
            Suspect::Rail { rail, pairs } => {
                write!(f, "rail {rail}: slow in all {pairs} pairs of the fleet (the rail's switch or its settings)")
            }
        }
    }
}

/// The rails of `asked` that no pod lists among its rails (`present`: every rail of the pods
/// whose rails were read; `None` when no pod's were, and then nothing is said: the pods'
/// set-up errors say why). A fleet's rows of such a rail all fail, and would make it a
/// [`Suspect::Rail`]: it is [`Suspect::NotPresent`] in `verdict` instead.
pub fn not_present(
    verdict: &mut Verdict,
    asked: &[u32],
    present: Option<&BTreeSet<u32>>,
) -> Vec<u32> {
    let Some(present) = present else {
        return Vec::new();
    };
    let absent: Vec<u32> = asked
        .iter()
        .copied()
        .filter(|r| !present.contains(r))
        .collect();
    verdict
        .suspects
        .retain(|s| !matches!(s, Suspect::Rail { rail, .. } if absent.contains(rail)));
    verdict
        .suspects
        .extend(absent.iter().map(|&rail| Suspect::NotPresent { rail }));
    verdict.unexplained.retain(|k| !absent.contains(&k.2));
    absent
}

/// What the rows say: the suspects, and the outliers no suspect explains.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Verdict {
    /// Likely culprits, nodes by name then rails.
    pub suspects: Vec<Suspect>,
    /// Slow (pair, rail)s that involve no suspect.
    pub unexplained: Vec<PairRail>,
    /// Slow (pair, rail)s in all.
    pub outliers: usize,
}

/// The node whose counters a finding's evidence was read on, by side.
fn side_node(r: &RailResult, role: Role) -> String {
    let (client, server) = row_nodes(r);
    match role {
        Role::Client => client,
        Role::Server => server,
    }
}

/// True for a finding about a port itself, which names the node it was read on.
fn names_its_port(kind: FindingKind) -> bool {
    matches!(kind, FindingKind::LinkFlap | FindingKind::PhysicalErrors)
}

/// The kinds of finding that `node`'s own counters showed in row `r`.
fn own_findings(r: &RailResult, node: &str) -> BTreeSet<FindingKind> {
    r.diagnosis
        .iter()
        .filter(|f| f.evidence.iter().any(|e| side_node(r, e.role) == node))
        .map(|f| f.finding)
        .collect()
}

/// What one node's latest rows on one rail show: the evidence behind a verdict on that rail.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RailEvidence {
    /// The rail.
    pub rail: u32,
    /// Pairs the node joined on that rail.
    pub pairs: usize,
    /// Of those, the slow or failed ones.
    pub slow_pairs: usize,
    /// Of those, the failed ones (the test did not complete).
    pub failed_pairs: usize,
    /// Median Gb/s of its pairs on that rail (a failed pair counts 0).
    pub median_gbps: f64,
    /// The fleet median of that rail, if any pair was measured.
    pub fleet_median_gbps: Option<f64>,
    /// `median_gbps` as a percentage of the fleet median.
    pub pct_of_fleet_median: Option<f64>,
    /// The findings its own side's counters showed in its slow pairs there (`link-flap`, ...).
    pub findings: Vec<String>,
    /// Of the slow pairs, those slow to answer: p99 latency above the latency rule
    /// (`--test bw,lat`); absent when none is.
    #[serde(skip_serializing_if = "is_zero")]
    pub latency_pairs: usize,
    /// Median p99 latency of its pairs on that rail, microseconds, where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_p99_us: Option<f64>,
    /// The fleet median p99 latency of that rail, where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet_lat_p99_us: Option<f64>,
    /// The layers the verdicts of its slow pairs there name (`node-setup`, `peer`, ...:
    /// [`results::Layer`]), each once; `unknown` for a slow pair without a verdict.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The median of `v` (the upper one of an even count), sorting it; `None` when empty.
fn median_of(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// The evidence of `node`'s rail `rail` in the latest rows.
pub fn evidence(rows: &[RailResult], node: &str, rail: u32, t: impl Into<Rules>) -> RailEvidence {
    let t = t.into();
    let medians = medians(rows);
    let mut bws = Vec::new();
    let mut p99s = Vec::new();
    let (mut slow, mut failed, mut lat_slow) = (0, 0, 0);
    let mut findings: BTreeSet<FindingKind> = BTreeSet::new();
    let mut layers: BTreeSet<Layer> = BTreeSet::new();
    for (k, r) in latest(rows) {
        if k.2 != rail || (k.0 != node && k.1 != node) {
            continue;
        }
        let failed_row = r.status == RailStatus::Failed;
        bws.push(if failed_row {
            0.0
        } else {
            r.bw_avg_gbps.unwrap_or(0.0)
        });
        if is_slow(r, &medians, t) {
            slow += 1;
            findings.extend(own_findings(r, node));
            layers.insert(r.layer.unwrap_or(Layer::Unknown));
        }
        lat_slow += usize::from(is_slow_to_answer(r, &medians, t));
        p99s.extend(r.lat_p99_us.filter(|_| !failed_row));
        failed += usize::from(failed_row);
    }
    bws.sort_by(f64::total_cmp);
    let median_gbps = bws.get(bws.len() / 2).copied().unwrap_or(0.0);
    let fleet_median_gbps = medians.bw.get(&rail).copied();
    RailEvidence {
        rail,
        pairs: bws.len(),
        slow_pairs: slow,
        failed_pairs: failed,
        median_gbps,
        fleet_median_gbps,
        pct_of_fleet_median: fleet_median_gbps
            .filter(|m| *m > 0.0)
            .map(|m| median_gbps / m * 100.0),
        findings: findings.iter().map(|k| k.word().to_string()).collect(),
        latency_pairs: lat_slow,
        lat_p99_us: median_of(&mut p99s),
        fleet_lat_p99_us: medians.lat_p99.get(&rail).copied(),
        layers: layers.iter().map(|l| l.as_str().to_string()).collect(),
    }
}

/// Judge the latest row of every (pair, rail).
pub fn judge(rows: &[RailResult], t: impl Into<Rules>) -> Verdict {
    let t = t.into();
    let medians = medians(rows);
    let last = latest(rows);
    // (node, rail) -> (pairs slow to answer, p99 latencies)
    let mut lat: BTreeMap<(String, u32), (usize, Vec<f64>)> = BTreeMap::new();
    // (node, rail) -> (pairs joined, slow pairs, bandwidths)
    let mut per: BTreeMap<(String, u32), (usize, usize, Vec<f64>)> = BTreeMap::new();
    let mut rail_counts: BTreeMap<u32, (usize, usize)> = BTreeMap::new();
    let mut slow_keys = Vec::new();
    for (k, r) in &last {
        let slow = is_slow(r, &medians, t);
        if slow {
            slow_keys.push(k.clone());
        }
        let rc = rail_counts.entry(k.2).or_default();
        rc.0 += 1;
        rc.1 += usize::from(slow);
        for node in [&k.0, &k.1] {
            let l = lat.entry((node.clone(), k.2)).or_default();
            l.0 += usize::from(is_slow_to_answer(r, &medians, t));
            l.1.extend(r.lat_p99_us.filter(|_| r.status != RailStatus::Failed));
            let e = per.entry((node.clone(), k.2)).or_default();
            e.0 += 1;
            e.1 += usize::from(slow);
            e.2.push(if r.status == RailStatus::Failed {
                0.0
            } else {
                r.bw_avg_gbps.unwrap_or(0.0)
            });
        }
    }
    // (node, rail) -> the findings of its own port in its slow pairs there, and its slow
    // partners there.
    let mut port_named: BTreeMap<(String, u32), BTreeSet<FindingKind>> = BTreeMap::new();
    let mut own: BTreeMap<(String, u32), BTreeSet<FindingKind>> = BTreeMap::new();
    let mut slow_partners: BTreeMap<(String, u32), Vec<String>> = BTreeMap::new();
    for k in &slow_keys {
        let r = last[k];
        for (node, partner) in [(&k.0, &k.1), (&k.1, &k.0)] {
            let kinds = own_findings(r, node);
            let key = (node.clone(), k.2);
            let port: BTreeSet<FindingKind> = kinds
                .iter()
                .copied()
                .filter(|k| names_its_port(*k))
                .collect();
            if !port.is_empty() {
                port_named.entry(key.clone()).or_default().extend(port);
            }
            own.entry(key.clone()).or_default().extend(kinds);
            slow_partners.entry(key).or_default().push(partner.clone());
        }
    }
    // A rail slow in every pair of the fleet, unless in each of them a port's own findings
    // name a node.
    let bad_rails: BTreeSet<u32> = rail_counts
        .iter()
        .filter(|(_, (n, s))| *n > 0 && n == s)
        .map(|(r, _)| *r)
        .filter(|rail| {
            !slow_keys.iter().filter(|k| k.2 == *rail).all(|k| {
                port_named.contains_key(&(k.0.clone(), k.2))
                    || port_named.contains_key(&(k.1.clone(), k.2))
            })
        })
        .collect();
    // Named by bandwidth (slow in every pair), unless each of its slow pairs is with a node its
    // own port findings name and it has none of its own; or named by its own port findings.
    let named_rail = |node: &String, rail: u32, n: usize, s: usize| {
        let key = (node.clone(), rail);
        if port_named.contains_key(&key) {
            return true;
        }
        let by_bandwidth = n > 0 && n == s && !bad_rails.contains(&rail);
        let excused = slow_partners.get(&key).is_some_and(|partners| {
            partners
                .iter()
                .all(|p| port_named.contains_key(&(p.clone(), rail)))
        });
        by_bandwidth && !excused
    };
    let mut suspects = Vec::new();
    let mut node_rails: BTreeMap<String, (Vec<u32>, usize)> = BTreeMap::new();
    for ((node, rail), (n, s, _)) in &per {
        let e = node_rails.entry(node.clone()).or_default();
        e.1 += 1;
        if named_rail(node, *rail, *n, *s) {
            e.0.push(*rail);
        }
    }
    let all_rails: BTreeSet<u32> = rail_counts.keys().copied().collect();
    let mut named: BTreeSet<(String, Option<u32>)> = BTreeSet::new();
    for (node, (rails, _)) in &node_rails {
        if rails.is_empty() {
            continue;
        }
        let everywhere = rails.iter().all(|rail| {
            let (n, slow, _) = &per[&(node.clone(), *rail)];
            n == slow
        });
        if all_rails.len() > 1 && rails.len() == all_rails.len() && everywhere {
            suspects.push(Suspect::Node {
                node: node.clone(),
                rails: rails.clone(),
            });
            named.insert((node.clone(), None));
            continue;
        }
        for rail in rails {
            let (n, slow, bws) = &per[&(node.clone(), *rail)];
            let mut v = bws.clone();
            v.sort_by(f64::total_cmp);
            let (lat_slow_pairs, mut p99s) =
                lat.get(&(node.clone(), *rail)).cloned().unwrap_or_default();
            suspects.push(Suspect::NodeRail {
                node: node.clone(),
                rail: *rail,
                pairs: *n,
                slow_pairs: *slow,
                findings: own
                    .get(&(node.clone(), *rail))
                    .map(|k| k.iter().copied().collect())
                    .unwrap_or_default(),
                median_gbps: v[v.len() / 2],
                fleet_median_gbps: medians.bw.get(rail).copied(),
                lat_slow_pairs,
                lat_p99_us: median_of(&mut p99s),
                fleet_lat_p99_us: medians.lat_p99.get(rail).copied(),
            });
            named.insert((node.clone(), Some(*rail)));
        }
    }
    for rail in &bad_rails {
        suspects.push(Suspect::Rail {
            rail: *rail,
            pairs: rail_counts[rail].0,
        });
    }
    let explained = |k: &PairRail| {
        bad_rails.contains(&k.2)
            || [&k.0, &k.1].iter().any(|n| {
                named.contains(&((*n).clone(), None)) || named.contains(&((*n).clone(), Some(k.2)))
            })
    };
    let unexplained = slow_keys
        .iter()
        .filter(|k| !explained(k))
        .cloned()
        .collect();
    Verdict {
        suspects,
        unexplained,
        outliers: slow_keys.len(),
    }
}

/// One pair measured after the schedule to tell a bad node from its partners: a suspect node
/// against a node that passed on the suspect's rails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// The node no row clears on these rails.
    pub suspect: String,
    /// A node that passed on each of them (a fast pair there).
    pub partner: String,
    /// The rails.
    pub rails: Vec<u32>,
}

/// The pairs that tell the bad nodes from their partners: every node that is in a slow
/// (pair, rail) of the latest rows and in no fast one on that rail is measured once more on
/// that rail, against a node that passed on it (a node with a fast pair there: a bad end makes
/// every pair slow), one pair per suspect node and partner. With no node that passed on a
/// rail, nothing is added for it (bandwidth cannot tell then).
pub fn repairs(rows: &[RailResult], t: impl Into<Rules>) -> Vec<Repair> {
    let t = t.into();
    let medians = medians(rows);
    // rail -> (nodes in a slow pair, nodes in a fast pair)
    let mut per: BTreeMap<u32, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for (k, r) in latest(rows) {
        let e = per.entry(k.2).or_default();
        let side = if is_slow(r, &medians, t) {
            &mut e.0
        } else {
            &mut e.1
        };
        side.insert(k.0.clone());
        side.insert(k.1.clone());
    }
    // suspect -> its rails; rail -> the nodes that passed on it
    let mut suspects: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut passed: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (rail, (slow, fast)) in &per {
        for n in slow.difference(fast) {
            suspects.entry(n.clone()).or_default().push(*rail);
        }
        passed.insert(*rail, fast.iter().cloned().collect());
    }
    // Partners in turn, so the extra pairs spread over the good nodes and fit in few rounds.
    let mut next: BTreeMap<u32, usize> = BTreeMap::new();
    let mut out: Vec<Repair> = Vec::new();
    for (node, rails) in suspects {
        let mut by_partner: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for rail in rails {
            let good = &passed[&rail];
            if good.is_empty() {
                continue;
            }
            // One partner for all its rails when one passed on each of them.
            let shared = by_partner.keys().find(|p| good.contains(p)).cloned();
            let partner = shared.unwrap_or_else(|| {
                let i = next.entry(rail).or_default();
                let p = good[*i % good.len()].clone();
                *i += 1;
                p
            });
            by_partner.entry(partner).or_default().push(rail);
        }
        out.extend(by_partner.into_iter().map(|(partner, rails)| Repair {
            suspect: node.clone(),
            partner,
            rails,
        }));
    }
    out
}

pub mod simulate;

#[cfg(test)]
mod tests;
