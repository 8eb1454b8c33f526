//! How near two PCI functions (a NIC and a GPU) are, as the documents name it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How near two PCI functions are, nearest first (see bench-core's `topology` module for how it is read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Proximity {
    /// One PCIe switch between them, or none (nvidia-smi PIX).
    SameSwitch,
    /// Several switches below one root port (PXB).
    SameRootPort,
    /// Two root ports of one host bridge (PHB).
    SameHostBridge,
    /// Two host bridges of one NUMA node (NODE).
    SameNuma,
    /// Different or unknown NUMA nodes (SYS).
    Remote,
}

impl Proximity {
    /// nvidia-smi topo's name for it: `PIX`, `PXB`, `PHB`, `NODE`, `SYS`.
    pub fn nvidia_smi(self) -> &'static str {
        match self {
            Proximity::SameSwitch => "PIX",
            Proximity::SameRootPort => "PXB",
            Proximity::SameHostBridge => "PHB",
            Proximity::SameNuma => "NODE",
            Proximity::Remote => "SYS",
        }
    }

    /// Words for messages: `same PCIe switch`, ...
    pub fn describe(self) -> &'static str {
        match self {
            Proximity::SameSwitch => "same PCIe switch",
            Proximity::SameRootPort => "same PCIe root port",
            Proximity::SameHostBridge => "same host bridge",
            Proximity::SameNuma => "same NUMA node",
            Proximity::Remote => "another NUMA node",
        }
    }
}

impl fmt::Display for Proximity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.describe(), self.nvidia_smi())
    }
}

/// The distance between two PCI functions: proximity first, then bridges crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Distance {
    /// The coarse class.
    pub proximity: Proximity,
    /// PCI bridges (switch ports, root ports) on the path; across root ports, those of both
    /// sides plus one for the host bridge or interconnect.
    pub bridges: u32,
}
