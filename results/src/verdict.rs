//! The per-rail verdict: which layer a rail's fault is in, the one line of evidence that says
//! so, and the fix.
//!
//! A row's `status` says whether the rail passed (`ok`, `below_threshold`, `failed`); its
//! verdict says where to look. [`judge`] is the one function that decides it, from typed
//! evidence only: the [`Cause`] of a failure (railsweep's own, or the [`FailureKind`] rdmabw's
//! report names), the counter findings of the row, and what a fleet's comparison of pairs
//! says ([`FleetBlame`]). Error texts are shown, never read. The rules, in the order they are
//! tried, with their reasons, are the table in docs/railsweep.md ("Verdicts"); each has a
//! unit test below.

use crate::rdmabw::counters::{Finding, FindingKind};
use crate::rdmabw::params::Role;
use crate::rdmabw::FailureKind;
use crate::record::{RailResult, RailStatus};

pub use crate::layer::{Layer, UnknownLayer};

/// A rail's verdict beyond its status: the layer, the evidence in one line, the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Where the fault is.
    pub layer: Layer,
    /// The one line that shows it.
    pub evidence: String,
    /// What to do.
    pub fix: String,
}

/// Why a rail failed, as railsweep knows it, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// A test's report named the kind of its failure; `side` is the end whose test failed.
    Rdmabw {
        /// The kind.
        kind: FailureKind,
        /// The end that reported it.
        side: Role,
    },
    /// A pod has no interface for the rail.
    RailMissing {
        /// The pod (or host).
        pod: String,
    },
    /// The rail is in the pod but cannot be used: its interface is down, it has no RDMA
    /// device, no usable GID, or no address to connect to.
    RailUnusable {
        /// The pod (or host).
        pod: String,
    },
    /// The client did not end within railsweep's deadline for the rail.
    Timeout,
    /// The client ended without a report (it crashed, or was killed).
    NoReport,
    /// The server's process ended while its client still measured.
    ServerEnded,
}

/// What a fleet's comparison of pairs says of a row's rail.
#[derive(Debug, Clone, PartialEq)]
pub enum FleetBlame {
    /// One end's node is slow (or fails) on this rail with every partner.
    Node {
        /// The node.
        node: String,
        /// Its median on the rail as a percentage of the fleet's median.
        pct_of_fleet: Option<f64>,
    },
    /// A group of nodes (a rack, an uplink) is slow on this rail with every partner outside
    /// it.
    Group {
        /// The group's name (the topology label's value).
        group: String,
    },
    /// The rail is slow in every pair of the fleet.
    Rail {
        /// Pairs measured on it.
        pairs: usize,
    },
}

/// Where it came from, in words: "client", "server", "both ends".
fn sides(roles: &[Role]) -> &'static str {
    let client = roles.contains(&Role::Client);
    let server = roles.contains(&Role::Server);
    match (client, server) {
        (true, true) => "both ends",
        (false, true) => "server",
        _ => "client",
    }
}

fn finding_roles(f: &Finding) -> Vec<Role> {
    let mut roles: Vec<Role> = f.evidence.iter().map(|e| e.role).collect();
    roles.dedup();
    roles
}

/// The layer of one counter finding, and the sides it was seen on.
fn finding_layer(f: &Finding) -> Layer {
    match f.finding {
        FindingKind::LinkFlap | FindingKind::PhysicalErrors => Layer::NicPort,
        FindingKind::NoTrafficClass | FindingKind::OtherPriority => Layer::NodeSetup,
        FindingKind::Congestion | FindingKind::PfcPause => Layer::Path,
        FindingKind::PacketLoss => {
            let roles = finding_roles(f);
            if roles.contains(&Role::Client) && roles.contains(&Role::Server) {
                Layer::Path
            } else {
                Layer::NicPort
            }
        }
    }
}

/// The order findings are weighed in: a port's own fault first (it explains the rest), then
/// the node's QoS set-up, then what the fabric shows.
fn finding_rank(f: &Finding) -> u8 {
    match finding_layer(f) {
        Layer::NicPort if f.finding != FindingKind::PacketLoss => 0,
        Layer::NodeSetup => 1,
        Layer::Path => 2,
        _ => 3,
    }
}

fn from_finding(f: &Finding) -> Verdict {
    let roles = finding_roles(f);
    Verdict {
        layer: finding_layer(f),
        evidence: format!("{} ({}): {}", f.finding.word(), sides(&roles), f.summary),
        fix: f.what_to_do.clone(),
    }
}

fn from_cause(row: &RailResult, cause: &Cause) -> Verdict {
    let error = row.error.as_deref().unwrap_or("failed");
    let v = |layer, fix: &str| Verdict {
        layer,
        evidence: error.to_string(),
        fix: fix.to_string(),
    };
    match cause {
        Cause::RailMissing { pod } => Verdict {
            layer: Layer::NodeSetup,
            evidence: error.to_string(),
            fix: format!(
                "see the pod's rails with `kubectl exec {pod} -- rdmabw rails`: a rail missing \
                 in the pod is a network attachment (Multus NAD, SR-IOV VF, DRA claim) that the \
                 node did not give it, or a NIC the node does not have"
            ),
        },
        Cause::RailUnusable { pod } => Verdict {
            layer: Layer::NodeSetup,
            evidence: error.to_string(),
            fix: format!(
                "run `kubectl exec {pod} -- rdmabw probe`: it names the check that fails (the \
                 interface's state, its RDMA device, the GID table, its address)"
            ),
        },
        Cause::Timeout => v(
            Layer::Tool,
            "the client outlived railsweep's deadline for the rail: its last words are in the \
             error; raise --margin if the rail is slow to set up, else report it",
        ),
        Cause::NoReport => v(
            Layer::Tool,
            "the client ended without its report (crashed or killed): its last words are in \
             the error",
        ),
        Cause::ServerEnded => v(
            Layer::Peer,
            "the server's process ended during the test: look at the server pod (its events, \
             OOM kills, `kubectl logs --previous`)",
        ),
        Cause::Rdmabw { kind, side } => from_kind(error, *kind, *side),
    }
}

fn from_kind(error: &str, kind: FailureKind, side: Role) -> Verdict {
    use FailureKind as K;
    let (layer, fix) = match kind {
        K::NoVerbs => (
            Layer::PodSpec,
            "the image has no libibverbs: install rdma-core's libibverbs and providers in it, \
             or let railsweep copy its own rdmabw with --inject",
        ),
        K::Memlock => (
            Layer::PodSpec,
            "add IPC_LOCK to the container's securityContext.capabilities.add (or raise the \
             container runtime's memlock limit on the node: LimitMEMLOCK=infinity)",
        ),
        K::NoRdma => (
            Layer::NodeSetup,
            "the pod sees no RDMA device for the rail: request it (device plugin resource, \
             SR-IOV VF, DRA claim) and check the node's RDMA driver and netns mode \
             (`rdma system`)",
        ),
        K::DeviceAccess => (
            Layer::NodeSetup,
            "the device cgroup refused /dev/infiniband: give the pod the device through the \
             device plugin or DRA (so the runtime allows it), not through a hostPath",
        ),
        K::Gid => (
            Layer::NodeSetup,
            "the rail's GID table has no usable RoCE v2 entry for its address: check the \
             interface's IPv4 address in the pod and `rdmabw probe`'s gid check",
        ),
        K::Register | K::Gpu | K::Verbs => (
            Layer::NodeSetup,
            "this side's RDMA stack refused a resource: `rdmabw probe` in the pod names the \
             check that fails",
        ),
        K::PortDown => (
            Layer::NicPort,
            "the port's link is down: check the cable, the switch port and `ethtool` on the \
             node",
        ),
        K::Transport | K::Data => (
            Layer::Path,
            "a work request failed in the RDMA transport, or stalled (the evidence names how): retries \
             exceeded or no completion means the packets do not reach the other end (check the \
             switch path, MTU and the peer's rail); a remote access or invalid-request error means \
             the other end refused them (check the MTU on both ends, and that both run the same \
             rdmabw release)",
        ),
        K::PeerFailed | K::Unreachable => (
            Layer::Peer,
            "the other end died, went silent or did not answer: look at its pod and node",
        ),
        K::PeerSetup => (
            Layer::NodeSetup,
            "the server could not set up its side: run `rdmabw probe` in the server pod",
        ),
        K::Mismatch | K::Protocol | K::Interrupted => (
            Layer::Tool,
            "the two ends did not run the same test: give both the same flags and the same \
             rdmabw release",
        ),
    };
    let evidence = match side {
        Role::Client => error.to_string(),
        Role::Server => format!("server: {error}"),
    };
    Verdict {
        layer,
        evidence,
        fix: fix.to_string(),
    }
}

fn from_blame(blame: &FleetBlame, rail: u32) -> Verdict {
    match blame {
        FleetBlame::Node { node, pct_of_fleet } => Verdict {
            layer: Layer::Path,
            evidence: format!(
                "node {node} is slow on rail {rail} with every partner{}",
                pct_of_fleet
                    .map(|p| format!(" ({p:.0}% of the fleet's median)"))
                    .unwrap_or_default()
            ),
            fix: format!(
                "look at node {node}'s rail {rail} and the switch port it is cabled to: \
                 `rdmabw counters` and `rdmabw probe` on the node, the port's counters on the \
                 switch; its partners are not at fault"
            ),
        },
        FleetBlame::Group { group } => Verdict {
            layer: Layer::Path,
            evidence: format!(
                "group {group} is slow on rail {rail} with every partner outside it, and \
                 not its nodes one by one"
            ),
            fix: format!("look at what group {group} shares on rail {rail}: its switch or uplink"),
        },
        FleetBlame::Rail { pairs } => Verdict {
            layer: Layer::Path,
            evidence: format!("rail {rail} is slow in all {pairs} pairs of the fleet"),
            fix: format!(
                "look at what every node's rail {rail} shares: its switch, or a setting of that \
                 rail (MTU, traffic class) on every node"
            ),
        },
    }
}

/// The verdict of `row`: `None` for a rail that passed with no finding against it.
///
/// Rules, first match wins (docs/railsweep.md has them with their reasons):
/// 1. a failed rail with a typed `cause`: the cause's layer;
/// 2. a failed rail without one: `unknown`, its error as the evidence;
/// 3. a counter finding (on any rail, passing or not): the finding's layer, a port's own
///    faults before QoS set-up before the fabric;
/// 4. a rail a fleet blames on a node, a group or the whole rail (the caller passes `fleet`
///    only for a row the fleet found slow, whatever its recorded status): `path`;
/// 5. a rail below its threshold with nothing else: `unknown`;
/// 6. otherwise none.
pub fn judge(
    row: &RailResult,
    cause: Option<&Cause>,
    fleet: Option<&FleetBlame>,
) -> Option<Verdict> {
    if row.status == RailStatus::Failed {
        return Some(match cause {
            Some(c) => from_cause(row, c),
            None => Verdict {
                layer: Layer::Unknown,
                evidence: row.error.clone().unwrap_or_else(|| "failed".into()),
                fix: "no typed cause came with this failure (an older rdmabw, or perftest): \
                      read the error, and `railsweep explain` the rail"
                    .into(),
            },
        });
    }
    if let Some(f) = row.diagnosis.iter().min_by_key(|f| finding_rank(f)) {
        return Some(from_finding(f));
    }
    if let Some(b) = fleet {
        return Some(from_blame(b, row.rail));
    }
    if row.status != RailStatus::BelowThreshold {
        return None;
    }
    Some(Verdict {
        layer: Layer::Unknown,
        evidence: format!(
            "{} with no counter finding on either end",
            row.error.as_deref().unwrap_or("below the threshold")
        ),
        fix: "one pair cannot tell the node from the path: `railsweep fleet` over more nodes \
              names the node or the group that is slow with every partner"
            .into(),
    })
}

impl RailResult {
    /// Set the row's verdict (`layer`, `evidence`, `fix`) from [`judge`], replacing any it
    /// had: call it once the row's status, error and findings are final, with the typed cause
    /// of a failure where the caller knows one.
    pub fn judge(&mut self, cause: Option<&Cause>, fleet: Option<&FleetBlame>) {
        let v = judge(self, cause, fleet);
        self.layer = v.as_ref().map(|v| v.layer);
        self.evidence = v.as_ref().map(|v| v.evidence.clone());
        self.fix = v.map(|v| v.fix);
    }

    /// The row's verdict, as [`RailResult::judge`] set it (or a file had it).
    pub fn verdict(&self) -> Option<Verdict> {
        Some(Verdict {
            layer: self.layer?,
            evidence: self.evidence.clone().unwrap_or_default(),
            fix: self.fix.clone().unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests;
