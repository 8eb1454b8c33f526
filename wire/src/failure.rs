//! Why a test did not complete, as a kind that crosses the process boundary typed: rdmabw
//! names it in its report (`error_kind`) and railsweep's per-rail verdict reads it, so that
//! the verdict never parses an error's words.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The kind of a failed test's error: what failed, not whose fault it is (railsweep's verdict
/// decides that from this and the rest of the evidence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// libibverbs (rdma-core) is not in the image.
    NoVerbs,
    /// The kernel has no RDMA support, or the asked device or interface is not there.
    NoRdma,
    /// The RDMA device could not be opened (the device cgroup, or its permissions).
    DeviceAccess,
    /// The port is down, or went down during the test.
    PortDown,
    /// No usable GID: the index asked for is empty or out of range, or the interface has no
    /// address of the family asked for.
    Gid,
    /// The memlock limit is below what the test registers, and the process lacks IPC_LOCK.
    Memlock,
    /// Memory registration failed for another reason.
    Register,
    /// The GPU buffer could not be had or exported (CUDA, dma-buf).
    Gpu,
    /// A verbs call refused a resource or a state change (a CQ, QP, its connection to the
    /// peer's QP).
    Verbs,
    /// The RDMA transport failed: a work completion in error (retries exceeded), or no
    /// completion for too long.
    Transport,
    /// `--data_validation` found a byte that is not what the peer wrote.
    Data,
    /// The peer's process ended, went silent or stopped the test.
    PeerFailed,
    /// Nothing answered at the peer's control address, or it was busy.
    Unreachable,
    /// The peer could not set up its side of the test.
    PeerSetup,
    /// The two ends were asked for different tests, or one the other cannot run.
    Mismatch,
    /// The control exchange broke: another protocol or version, or bytes that break its
    /// rules.
    Protocol,
    /// The test was stopped on this side (SIGINT/SIGTERM).
    Interrupted,
}

impl FailureKind {
    /// Every kind, in order.
    pub const ALL: [FailureKind; 17] = [
        FailureKind::NoVerbs,
        FailureKind::NoRdma,
        FailureKind::DeviceAccess,
        FailureKind::PortDown,
        FailureKind::Gid,
        FailureKind::Memlock,
        FailureKind::Register,
        FailureKind::Gpu,
        FailureKind::Verbs,
        FailureKind::Transport,
        FailureKind::Data,
        FailureKind::PeerFailed,
        FailureKind::Unreachable,
        FailureKind::PeerSetup,
        FailureKind::Mismatch,
        FailureKind::Protocol,
        FailureKind::Interrupted,
    ];

    /// The word in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::NoVerbs => "no-verbs",
            FailureKind::NoRdma => "no-rdma",
            FailureKind::DeviceAccess => "device-access",
            FailureKind::PortDown => "port-down",
            FailureKind::Gid => "gid",
            FailureKind::Memlock => "memlock",
            FailureKind::Register => "register",
            FailureKind::Gpu => "gpu",
            FailureKind::Verbs => "verbs",
            FailureKind::Transport => "transport",
            FailureKind::Data => "data",
            FailureKind::PeerFailed => "peer-failed",
            FailureKind::Unreachable => "unreachable",
            FailureKind::PeerSetup => "peer-setup",
            FailureKind::Mismatch => "mismatch",
            FailureKind::Protocol => "protocol",
            FailureKind::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_serde_names() {
        for k in FailureKind::ALL {
            let json = serde_json::to_string(&k).expect("serializes");
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<FailureKind>(&json).ok(), Some(k));
        }
    }
}
