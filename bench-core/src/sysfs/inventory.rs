//! What discovery finds: devices, their ports and GID tables, and the netdevs of this
//! namespace bound to them ([`Inventory`]).

use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use super::roots::SysRoots;
use crate::error::Error;
use crate::gid::{Gid, GidType};

/// Logical port state (`ports/<n>/state`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PortState {
    /// `1: DOWN`.
    Down,
    /// `2: INIT`.
    Init,
    /// `3: ARMED`.
    Armed,
    /// `4: ACTIVE`.
    Active,
    /// `5: ACTIVE_DEFER`.
    ActiveDefer,
    /// Anything else, verbatim.
    Other(String),
}

impl PortState {
    /// Parses the sysfs text, e.g. `4: ACTIVE`.
    pub fn parse(s: &str) -> PortState {
        match s.trim().split_once(':').map(|(n, _)| n.trim()) {
            Some("1") => PortState::Down,
            Some("2") => PortState::Init,
            Some("3") => PortState::Armed,
            Some("4") => PortState::Active,
            Some("5") => PortState::ActiveDefer,
            _ => PortState::Other(s.trim().to_string()),
        }
    }

    /// The name as `ibv_devinfo` prints it.
    pub fn name(&self) -> &str {
        match self {
            PortState::Down => "DOWN",
            PortState::Init => "INIT",
            PortState::Armed => "ARMED",
            PortState::Active => "ACTIVE",
            PortState::ActiveDefer => "ACTIVE_DEFER",
            PortState::Other(s) => s,
        }
    }
}

/// Link layer of a port (`ports/<n>/link_layer`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinkLayer {
    /// Native InfiniBand: GIDs need no netdev, LIDs are used.
    InfiniBand,
    /// RoCE (or iWARP): every GID belongs to a netdev.
    Ethernet,
    /// Anything else, verbatim.
    Other(String),
}

impl LinkLayer {
    /// Parses the sysfs text.
    pub fn parse(s: &str) -> LinkLayer {
        match s.trim() {
            "InfiniBand" => LinkLayer::InfiniBand,
            "Ethernet" => LinkLayer::Ethernet,
            other => LinkLayer::Other(other.to_string()),
        }
    }
}

/// One GID table entry as this process sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GidEntry {
    /// Index in the port's GID table.
    pub index: u32,
    /// The GID (all zeros for empty entries and, in pods, for some entries of other namespaces).
    pub gid: Gid,
    /// The type; `None` when the read failed (empty entry).
    pub gid_type: Option<GidType>,
    /// The netdev; `None` when the read failed (empty entry, or netdev in another namespace).
    pub netdev: Option<String>,
    /// Whether the GID belongs to this network namespace: `netdev` was read, exists in
    /// `<sys>/class/net`, and the GID's address is configured here (see the module doc).
    pub netdev_here: bool,
}

impl GidEntry {
    /// The IP address the GID carries: IPv4 for IPv4-mapped GIDs, else the IPv6 address.
    pub fn ip(&self) -> Option<IpAddr> {
        if self.gid.is_zero() {
            None
        } else if let Some(v4) = self.gid.ipv4_mapped() {
            Some(IpAddr::V4(v4))
        } else {
            Some(IpAddr::V6(self.gid.to_ipv6()))
        }
    }

    /// The IPv4 address of an IPv4-mapped GID.
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        self.gid.ipv4_mapped()
    }
}

/// One port of an RDMA device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Port {
    /// Port number (from 1).
    pub num: u8,
    /// Logical state; `None` when unreadable.
    pub state: Option<PortState>,
    /// Physical state text, e.g. `5: LinkUp`.
    pub phys_state: Option<String>,
    /// Link layer; `None` when unreadable.
    pub link_layer: Option<LinkLayer>,
    /// Rate text, e.g. `100 Gb/sec (4X EDR)`.
    pub rate: Option<String>,
    /// Line rate in Gb/s parsed from `rate`.
    pub line_rate_gbps: Option<f64>,
    /// LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// GID table length (number of `gids/<i>` entries).
    pub gid_table_len: u32,
    /// The GID table in index order; entries are present for every index.
    pub gids: Vec<GidEntry>,
}

impl Port {
    /// The entry at `index`.
    pub fn gid(&self, index: u32) -> Option<&GidEntry> {
        self.gids.iter().find(|g| g.index == index)
    }

    /// Netdevs of this namespace that own GIDs on this port, sorted and deduplicated.
    pub fn netdevs_here(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .gids
            .iter()
            .filter(|g| g.netdev_here && !g.gid.is_zero())
            .filter_map(|g| g.netdev.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Whether the port is ACTIVE.
    pub fn is_active(&self) -> bool {
        self.state == Some(PortState::Active)
    }
}

/// One RDMA device as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RdmaDevice {
    /// Device name, e.g. `mlx5_0` or `rxe_a0`.
    pub name: String,
    /// PCI address (`0000:17:00.0`) for devices backed by a PCI function.
    pub pci_address: Option<String>,
    /// NUMA node of the PCI function; `None` when unknown or -1.
    pub numa_node: Option<u32>,
    /// Kernel driver of the PCI function, e.g. `mlx5_core`.
    pub driver: Option<String>,
    /// `node_type` text, e.g. `1: CA`.
    pub node_type: Option<String>,
    /// For software devices (rxe, siw): the netdev they were created on. Informational: it may
    /// be in another network namespace.
    pub parent: Option<String>,
    /// The uverbs node name, e.g. `uverbs3`.
    pub uverbs: Option<String>,
    /// Whether `<dev>/infiniband/<uverbs>` exists.
    pub uverbs_present: bool,
    /// Ports in number order.
    pub ports: Vec<Port>,
}

impl RdmaDevice {
    /// The port numbered `num`.
    pub fn port(&self, num: u8) -> Option<&Port> {
        self.ports.iter().find(|p| p.num == num)
    }

    /// Whether this looks like a Soft-RoCE (rxe) device: no PCI function, a `parent` netdev,
    /// or an `rxe` name.
    pub fn is_rxe(&self) -> bool {
        self.name.starts_with("rxe")
            || (self.pci_address.is_none()
                && self.parent.is_some()
                && self
                    .node_type
                    .as_deref()
                    .is_some_and(|t| t.starts_with("1")))
    }

    /// A short description of the driver for messages: `rxe`, `mlx5_core`, or `unknown driver`.
    pub fn driver_label(&self) -> String {
        if self.is_rxe() {
            "rxe".to_string()
        } else {
            self.driver
                .clone()
                .unwrap_or_else(|| "unknown driver".to_string())
        }
    }
}

/// How a netdev was found to belong to an RDMA port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BindingSource {
    /// `<sys>/class/net/<if>/device/infiniband/<dev>`: the netdev is a function of the NIC.
    PciFunction,
    /// A GID entry whose netdev is this interface (rxe, IPvlan/macvlan children, and physical
    /// NICs too).
    GidTable,
}

/// A netdev of this network namespace and the RDMA port it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetdevBinding {
    /// Interface name.
    pub netdev: String,
    /// RDMA device name.
    pub device: String,
    /// Port number.
    pub port: u8,
    /// How the binding was found (the first source that showed it).
    pub source: BindingSource,
    /// Interface MTU, when readable.
    pub mtu: Option<u32>,
}

/// All RDMA devices visible here, and the netdevs of this namespace that map to them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    /// Devices sorted by name.
    pub devices: Vec<RdmaDevice>,
    /// Netdev bindings sorted by netdev, then device.
    pub netdevs: Vec<NetdevBinding>,
}

impl Inventory {
    /// The device named `name`.
    pub fn device(&self, name: &str) -> Option<&RdmaDevice> {
        self.devices.iter().find(|d| d.name == name)
    }

    /// Device names in order.
    pub fn device_names(&self) -> Vec<String> {
        self.devices.iter().map(|d| d.name.clone()).collect()
    }

    /// The bindings of `netdev` (several when e.g. a bond spans two devices).
    pub fn bindings_of(&self, netdev: &str) -> Vec<&NetdevBinding> {
        self.netdevs.iter().filter(|b| b.netdev == netdev).collect()
    }

    /// The single RDMA port behind `netdev`, or a typed error listing what exists.
    pub fn port_for_netdev(&self, roots: &SysRoots, netdev: &str) -> Result<(String, u8), Error> {
        let found = self.bindings_of(netdev);
        match found.as_slice() {
            [one] => Ok((one.device.clone(), one.port)),
            [] => Err(Error::UnknownNetdev {
                netdev: netdev.to_string(),
                exists: roots.net_class().join(netdev).exists(),
                available: self
                    .netdevs
                    .iter()
                    .map(|b| format!("{} -> {} port {}", b.netdev, b.device, b.port))
                    .collect(),
            }),
            many => Err(Error::AmbiguousNetdev {
                netdev: netdev.to_string(),
                candidates: many
                    .iter()
                    .map(|b| format!("{} port {}", b.device, b.port))
                    .collect(),
            }),
        }
    }
}
