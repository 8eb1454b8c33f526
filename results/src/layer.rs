//! Where a rail's fault is: the layer a row's verdict names ([`crate::verdict`] decides it),
//! a column of the row itself.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where a rail's fault is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// What the pod asked for: admission, scheduling, resources, network attachments,
    /// capabilities, its image.
    PodSpec,
    /// What the node gave the pod: the device cgroup, the memlock limit, the GID table, a rail
    /// missing or down in the pod, QoS (traffic class to priority), the runtime, GPU drivers.
    NodeSetup,
    /// This rail's NIC port: its link, its PHY, loss seen at one end only.
    NicPort,
    /// The fabric beyond the NIC: loss or congestion seen at both ends, a node a fleet finds
    /// slow with every partner on this rail (its NIC, cable or switch port: the comparison of
    /// pairs cannot tell which), a group of nodes (a rack, an uplink) a fleet blames, an RDMA
    /// transport that gave up.
    Path,
    /// The other end's process: it died, went silent or did not answer.
    Peer,
    /// The measurement itself: the two ends asked for different tests, the client timed out
    /// or ended without a report.
    Tool,
    /// Nothing typed says: a rail below its threshold with clean counters (one pair cannot
    /// tell the node from the path), or a failure with no kind (an older rdmabw, perftest).
    Unknown,
}

impl Layer {
    /// Every layer, in order.
    pub const ALL: [Layer; 7] = [
        Layer::PodSpec,
        Layer::NodeSetup,
        Layer::NicPort,
        Layer::Path,
        Layer::Peer,
        Layer::Tool,
        Layer::Unknown,
    ];

    /// The word in files and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::PodSpec => "pod-spec",
            Layer::NodeSetup => "node-setup",
            Layer::NicPort => "nic-port",
            Layer::Path => "path",
            Layer::Peer => "peer",
            Layer::Tool => "tool",
            Layer::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A layer name that is not one of [`Layer::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown layer {0:?} (layers: pod-spec, node-setup, nic-port, path, peer, tool, unknown)")]
pub struct UnknownLayer(pub String);

impl FromStr for Layer {
    type Err = UnknownLayer;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Layer::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| UnknownLayer(s.to_string()))
    }
}
