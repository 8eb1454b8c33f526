//! Choosing the device, port and GID index a test runs on: what the user asked for
//! ([`RailRequest`]) resolved against sysfs discovery into a [`Rail`].
//!
//! Rules (RoCE ports):
//! - With an explicit `-x` index, the entry must exist, must not read as zeros, and its netdev
//!   must be readable and be an interface of this network namespace. Otherwise the error
//!   names device, port and index and lists what is usable here.
//! - Without one, the lowest-index RoCE v2 GID that is IPv4-mapped and whose netdev is in this
//!   namespace (and is the `--netdev`, when given) wins. A GID that reads as zeros never does.
//!   GID indices differ from pod to pod (an IPvlan child's GID was at index 5 in one pod and 7
//!   in the next), so a fixed default index is wrong on shared NICs.
//!
//! InfiniBand ports have no netdevs; there, any non-zero entry is usable and the default is 0.
//!
//! `--netdev NAME` also picks the device: the interface's RDMA port comes from
//! [`Inventory::port_for_netdev`], so a rail can be named by its interface (`rdma3`, `net3`).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, GidUnusable, UsableGid};
use crate::gid::{Gid, GidType};
use crate::sysfs::{GidEntry, Inventory, LinkLayer, Port, PortState, RdmaDevice, SysRoots};

/// What the user asked for (all optional): `-d/--ib-dev`, `--netdev`, `-i/--ib-port`,
/// `-x/--gid-index`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RailRequest {
    /// RDMA device name.
    pub device: Option<String>,
    /// Network interface naming the rail (also picks the device).
    pub netdev: Option<String>,
    /// Port number (default: the netdev's port, else 1).
    pub port: Option<u8>,
    /// Explicit GID index.
    pub gid_index: Option<u32>,
}

/// The device, port and GID a test runs on, with what the CLI prints and records about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rail {
    /// RDMA device name.
    pub device: String,
    /// Port number.
    pub port: u8,
    /// GID table index.
    pub gid_index: u32,
    /// The GID.
    pub gid: Gid,
    /// GID type, when readable.
    pub gid_type: Option<GidType>,
    /// The netdev of the GID (RoCE), `None` on InfiniBand.
    pub netdev: Option<String>,
    /// The IP address the GID carries (RoCE).
    pub ip: Option<IpAddr>,
    /// Link layer.
    pub link_layer: Option<LinkLayer>,
    /// Port rate text.
    pub rate: Option<String>,
    /// Line rate in Gb/s.
    pub line_rate_gbps: Option<f64>,
    /// PCI address of the device.
    pub pci_address: Option<String>,
    /// NUMA node of the device.
    pub numa_node: Option<u32>,
    /// MTU of the netdev (RoCE path MTU follows it).
    pub netdev_mtu: Option<u32>,
    /// LID (InfiniBand).
    pub lid: u16,
}

fn is_ethernet(port: &Port) -> bool {
    // rxe and mlx5 RoCE say "Ethernet"; treat an unreadable link layer like Ethernet because
    // requiring a netdev is the safe side.
    !matches!(port.link_layer, Some(LinkLayer::InfiniBand))
}

/// Whether the entry is a default candidate: RoCE v2, IPv4-mapped, netdev in this namespace.
fn is_default_candidate(g: &GidEntry, netdev: Option<&str>) -> bool {
    !g.gid.is_zero()
        && g.netdev_here
        && g.gid_type == Some(GidType::RoceV2)
        && g.gid.ipv4_mapped().is_some()
        && netdev.is_none_or(|n| g.netdev.as_deref() == Some(n))
}

fn usable(g: &GidEntry) -> UsableGid {
    UsableGid {
        index: g.index,
        netdev: g.netdev.clone().unwrap_or_default(),
        ip: g.ip(),
    }
}

/// The RoCE v2, non-link-local GIDs of this namespace on the port, as listed in errors.
pub fn usable_gids(port: &Port) -> Vec<UsableGid> {
    if !is_ethernet(port) {
        return port
            .gids
            .iter()
            .filter(|g| !g.gid.is_zero())
            .map(|g| UsableGid {
                index: g.index,
                netdev: String::new(),
                ip: None,
            })
            .collect();
    }
    port.gids
        .iter()
        .filter(|g| {
            !g.gid.is_zero()
                && g.netdev_here
                && g.gid_type == Some(GidType::RoceV2)
                && !g.gid.is_link_local()
        })
        .map(usable)
        .collect()
}

/// Every GID of this namespace on the port, of any type (for "GIDs here" in errors).
fn gids_here(port: &Port) -> Vec<UsableGid> {
    port.gids
        .iter()
        .filter(|g| !g.gid.is_zero() && g.netdev_here)
        .map(usable)
        .collect()
}

/// Chooses the GID entry on `port` of `device`: the explicit `index` validated, or the default
/// rule (see the module doc), optionally restricted to `netdev`.
pub fn choose_gid<'p>(
    device: &RdmaDevice,
    port: &'p Port,
    index: Option<u32>,
    netdev: Option<&str>,
) -> Result<&'p GidEntry, Error> {
    let eth = is_ethernet(port);
    if let Some(index) = index {
        let Some(entry) = port.gid(index) else {
            return Err(Error::GidIndexOutOfRange {
                device: device.name.clone(),
                port: port.num,
                index,
                table_len: port.gid_table_len,
                usable: usable_gids(port),
            });
        };
        let reason = if !eth {
            entry.gid.is_zero().then_some(GidUnusable::Zero)
        } else if entry.gid.is_zero() || !entry.netdev_here {
            Some(GidUnusable::ForeignOrEmpty)
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(Error::GidNotUsable {
                device: device.name.clone(),
                port: port.num,
                index,
                reason,
                usable: usable_gids(port),
            });
        }
        if let (true, Some(want)) = (eth, netdev) {
            if entry.netdev.as_deref() != Some(want) {
                return Err(Error::InvalidParams(format!(
                    "GID index {index} of {} port {} is on {}, not on --netdev {want}",
                    device.name,
                    port.num,
                    entry.netdev.as_deref().unwrap_or("?")
                )));
            }
        }
        return Ok(entry);
    }

    if !eth {
        return port
            .gids
            .iter()
            .find(|g| !g.gid.is_zero())
            .ok_or_else(|| Error::NoUsableGid {
                device: device.name.clone(),
                port: port.num,
                netdev: None,
                usable: Vec::new(),
                other_devices: Vec::new(),
            });
    }
    port.gids
        .iter()
        .find(|g| is_default_candidate(g, netdev))
        .ok_or_else(|| Error::NoUsableGid {
            device: device.name.clone(),
            port: port.num,
            netdev: netdev.map(str::to_string),
            usable: gids_here(port),
            other_devices: Vec::new(),
        })
}

/// `dev (netdev ip)` for each device port that has a default GID candidate here.
fn devices_with_candidates(inv: &Inventory) -> Vec<String> {
    inv.devices
        .iter()
        .flat_map(|d| {
            d.ports.iter().filter_map(move |p| {
                p.gids
                    .iter()
                    .find(|g| is_default_candidate(g, None))
                    .map(|g| {
                        format!(
                            "{} ({} {})",
                            d.name,
                            g.netdev.as_deref().unwrap_or("?"),
                            g.gid.ip()
                        )
                    })
            })
        })
        .collect()
}

fn port_usable_by_default(port: &Port) -> bool {
    if is_ethernet(port) {
        port.gids.iter().any(|g| is_default_candidate(g, None))
    } else {
        port.is_active() && port.gids.iter().any(|g| !g.gid.is_zero())
    }
}

/// Resolves what the user asked for into a [`Rail`]: device (named, or found through the
/// netdev, or the first device with a usable GID here), port, and GID; checks the port is
/// ACTIVE as far as sysfs tells.
pub fn resolve_rail(inv: &Inventory, roots: &SysRoots, req: &RailRequest) -> Result<Rail, Error> {
    let netdev = req.netdev.as_deref();
    let (device, port_num): (&RdmaDevice, Option<u8>) = match (&req.device, netdev) {
        (Some(name), nd) => {
            let dev = inv.device(name).ok_or_else(|| Error::UnknownDevice {
                name: name.clone(),
                available: inv.device_names(),
            })?;
            let port = match nd {
                Some(nd) => {
                    let bindings = inv.bindings_of(nd);
                    match bindings.iter().find(|b| b.device == *name) {
                        Some(b) => Some(b.port),
                        None if bindings.is_empty() => {
                            // Let the generic error list what exists.
                            inv.port_for_netdev(roots, nd)?;
                            None
                        }
                        None => {
                            return Err(Error::NetdevNotOnDevice {
                                device: name.clone(),
                                netdev: nd.to_string(),
                                actual: bindings
                                    .iter()
                                    .map(|b| format!("{} port {}", b.device, b.port))
                                    .collect(),
                            })
                        }
                    }
                }
                None => None,
            };
            (dev, port)
        }
        (None, Some(nd)) => {
            let (name, port) = inv.port_for_netdev(roots, nd)?;
            let dev = inv.device(&name).ok_or_else(|| Error::UnknownDevice {
                name: name.clone(),
                available: inv.device_names(),
            })?;
            (dev, Some(port))
        }
        (None, None) => {
            let dev = inv
                .devices
                .iter()
                .find(|d| {
                    d.ports
                        .iter()
                        .filter(|p| req.port.is_none_or(|n| n == p.num))
                        .any(port_usable_by_default)
                })
                .ok_or_else(|| Error::NoUsableDevice {
                    devices: inv.device_names(),
                })?;
            let port = dev
                .ports
                .iter()
                .filter(|p| req.port.is_none_or(|n| n == p.num))
                .find(|p| port_usable_by_default(p))
                .map(|p| p.num);
            (dev, port)
        }
    };

    let port_num = req
        .port
        .or(port_num)
        .or_else(|| device.ports.first().map(|p| p.num))
        .unwrap_or(1);
    let port = device.port(port_num).ok_or_else(|| Error::NoSuchPort {
        device: device.name.clone(),
        port: port_num,
        ports: u8::try_from(device.ports.len()).unwrap_or(u8::MAX),
    })?;
    if let Some(state) = &port.state {
        if *state != PortState::Active {
            return Err(Error::PortDown {
                device: device.name.clone(),
                port: port_num,
                state: state.name().to_string(),
                phys_state: port.phys_state.clone().unwrap_or_else(|| "unknown".into()),
            });
        }
    }

    let entry = match choose_gid(device, port, req.gid_index, netdev) {
        Err(Error::NoUsableGid {
            device,
            port,
            netdev,
            usable,
            ..
        }) => {
            return Err(Error::NoUsableGid {
                device,
                port,
                netdev,
                usable,
                other_devices: devices_with_candidates(inv),
            })
        }
        other => other?,
    };

    let netdev_mtu = entry
        .netdev
        .as_deref()
        .and_then(|n| inv.netdevs.iter().find(|b| b.netdev == n))
        .and_then(|b| b.mtu);
    Ok(Rail {
        device: device.name.clone(),
        port: port.num,
        gid_index: entry.index,
        gid: entry.gid,
        gid_type: entry.gid_type.clone(),
        netdev: if is_ethernet(port) {
            entry.netdev.clone()
        } else {
            None
        },
        ip: if is_ethernet(port) { entry.ip() } else { None },
        link_layer: port.link_layer.clone(),
        rate: port.rate.clone(),
        line_rate_gbps: port.line_rate_gbps,
        pci_address: device.pci_address.clone(),
        numa_node: device.numa_node,
        netdev_mtu,
        lid: port.lid,
    })
}
