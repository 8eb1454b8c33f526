//! The network interfaces of this namespace as sysfs and procfs show them, for rail discovery
//! and the probe.
//!
//! What is read, per `<sys>/class/net/<if>` (sysfs is mounted per network namespace, so this is
//! the reading process's namespace):
//! - `device` (a link to the PCI function for a PF or a VF; virtual interfaces such as veth,
//!   IPvlan, macvlan and bridges have none) and `device/physfn` (present on SR-IOV VFs only);
//! - `ifindex` and `iflink`: they differ for an interface stacked on another one (an IPvlan or
//!   macvlan child on its master, a veth on its peer). The `lower_<master>` link that the kernel
//!   creates for a stacked interface exists only while both are in one namespace: it is gone in
//!   a pod, so `iflink` is what is left of it there (the master itself lives in the node's
//!   namespace, where this process cannot look);
//! - `addr_assign_type` (0: the address is the permanent one, as an IPvlan child inherits its
//!   master's MAC; 1: random, as veth and macvlan children get), `mtu`, `operstate`, and whether
//!   the interface is a bridge (`bridge/`).
//!
//! An IPvlan child and its RDMA device are tied together by the GID table only: the child's
//! IPv4 address appears as a RoCE v2 GID on the master's RDMA device (see `rails`).
//!
//! `<proc>/net/route` gives each interface's connected IPv4 routes; with the local addresses of
//! `<proc>/net/fib_trie` ([`crate::sysfs::LocalAddrs`]) it tells an interface's address when no
//! GID does (an interface without an RDMA device).

use std::fs;
use std::net::Ipv4Addr;

use crate::sysfs::{dir_names, is_pci_address, link_basename, read_attr, SysRoots};

/// One network interface of this namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetIf {
    /// Interface name.
    pub name: String,
    /// `ifindex`.
    pub ifindex: Option<u32>,
    /// `iflink`: the ifindex of the interface it is stacked on (itself when not stacked).
    pub iflink: Option<u32>,
    /// MTU.
    pub mtu: Option<u32>,
    /// `operstate` (`up`, `down`, `unknown`).
    pub operstate: Option<String>,
    /// PCI address of the function behind it (PF or VF); `None` for virtual interfaces.
    pub pci: Option<String>,
    /// Whether that function is an SR-IOV VF (`device/physfn` exists).
    pub vf: bool,
    /// PCI address of the VF's PF (`device/physfn`).
    pub physfn: Option<String>,
    /// Whether it is a bridge (`bridge/` exists).
    pub bridge: bool,
    /// `addr_assign_type`: 0 permanent (also an IPvlan child's, inherited), 1 random, 3 set.
    pub addr_assign_type: Option<u8>,
    /// RDMA devices of its PCI function (`device/infiniband/*`).
    pub rdma_devices: Vec<String>,
}

impl NetIf {
    /// Whether no PCI function is behind it (veth, IPvlan, macvlan, bridge, loopback).
    pub fn is_virtual(&self) -> bool {
        self.pci.is_none()
    }

    /// Whether it is stacked on another interface (`iflink` differs from `ifindex`).
    pub fn is_stacked(&self) -> bool {
        matches!((self.ifindex, self.iflink), (Some(a), Some(b)) if a != b)
    }

    /// Whether it is a physical function of a NIC (not a VF): what only the node's own network
    /// namespace has, unless a CNI moved a whole PF into a pod.
    pub fn is_pf(&self) -> bool {
        self.pci.is_some() && !self.vf
    }
}

/// The one ordering of interface and device names, re-exported for the probe's listings.
pub use crate::sysfs::natural_cmp;

/// Reads one interface; `None` when `<sys>/class/net/<name>` does not exist.
pub fn read_interface(roots: &SysRoots, name: &str) -> Option<NetIf> {
    let dir = roots.sys.join("class/net").join(name);
    if fs::symlink_metadata(&dir).is_err() {
        return None;
    }
    let num = |attr: &str| read_attr(&dir.join(attr)).and_then(|s| s.parse::<u32>().ok());
    let pci = link_basename(&dir.join("device")).filter(|s| is_pci_address(s));
    let physfn = if pci.is_some() {
        link_basename(&dir.join("device/physfn")).filter(|s| is_pci_address(s))
    } else {
        None
    };
    let vf = pci.is_some() && fs::symlink_metadata(dir.join("device/physfn")).is_ok();
    let rdma_devices = if pci.is_some() {
        dir_names(&dir.join("device/infiniband"))
    } else {
        Vec::new()
    };
    Some(NetIf {
        name: name.to_string(),
        ifindex: num("ifindex"),
        iflink: num("iflink"),
        mtu: num("mtu"),
        operstate: read_attr(&dir.join("operstate")),
        pci,
        vf,
        physfn,
        bridge: dir.join("bridge").is_dir(),
        addr_assign_type: read_attr(&dir.join("addr_assign_type")).and_then(|s| s.parse().ok()),
        rdma_devices,
    })
}

/// Every interface of this namespace but `lo`, in natural name order.
pub fn interfaces(roots: &SysRoots) -> Vec<NetIf> {
    dir_names(&roots.sys.join("class/net"))
        .into_iter()
        .filter(|n| n != "lo")
        .filter_map(|n| read_interface(roots, &n))
        .collect()
}

/// One line of `/proc/net/route` (the main routing table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Interface.
    pub iface: String,
    /// Destination network.
    pub destination: Ipv4Addr,
    /// Gateway; `0.0.0.0` for a connected route.
    pub gateway: Ipv4Addr,
    /// Network mask.
    pub mask: Ipv4Addr,
}

impl Route {
    /// Whether `ip` is in the destination network.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let m = u32::from(self.mask);
        u32::from(ip) & m == u32::from(self.destination) & m
    }

    /// Whether it is a connected route (no gateway, not the default route).
    pub fn is_connected(&self) -> bool {
        self.gateway.is_unspecified() && !self.mask.is_unspecified()
    }
}

/// An address field of `/proc/net/route`: the `__be32` printed as a host-order hex number.
fn route_addr(hex: &str) -> Option<Ipv4Addr> {
    let v = u32::from_str_radix(hex, 16).ok()?;
    Some(Ipv4Addr::from(v.to_ne_bytes()))
}

/// Parses `/proc/net/route`.
pub fn parse_proc_net_route(text: &str) -> Vec<Route> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some(Route {
                iface: (*f.first()?).to_string(),
                destination: route_addr(f.get(1)?)?,
                gateway: route_addr(f.get(2)?)?,
                mask: route_addr(f.get(7)?)?,
            })
        })
        .collect()
}

/// Reads `<proc>/net/route`; empty when unreadable.
pub fn routes(roots: &SysRoots) -> Vec<Route> {
    fs::read_to_string(roots.proc.join("net/route"))
        .map(|t| parse_proc_net_route(&t))
        .unwrap_or_default()
}

/// The local addresses (`local`, from `fib_trie`) that can only be `iface`'s: inside one of its
/// connected routes and inside no connected route of another interface. Several interfaces in
/// one subnet (16 rails in one /12, as in the field reports) make their addresses ambiguous:
/// then this gives nothing and the GID table has to tell.
pub fn ipv4_by_routes(routes: &[Route], local: &[Ipv4Addr], iface: &str) -> Vec<Ipv4Addr> {
    local
        .iter()
        .copied()
        .filter(|ip| !ip.is_loopback())
        .filter(|ip| {
            let owners: Vec<&str> = routes
                .iter()
                .filter(|r| r.is_connected() && r.contains(*ip))
                .map(|r| r.iface.as_str())
                .collect();
            !owners.is_empty() && owners.iter().all(|o| *o == iface)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_table_of_the_lab() {
        // From capture_rails.sh in the lab's ipvlan podA (x86: host order is little-endian).
        let text =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth0\t0000630A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
net1\t0000E00A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
net2\t0001E00A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let r = parse_proc_net_route(text);
        assert_eq!(r.len(), 3);
        if cfg!(target_endian = "little") {
            assert_eq!(r[1].destination, Ipv4Addr::new(10, 224, 0, 0));
            assert_eq!(r[1].mask, Ipv4Addr::new(255, 255, 255, 0));
            let local = [
                Ipv4Addr::new(10, 224, 0, 1),
                Ipv4Addr::new(10, 224, 1, 1),
                Ipv4Addr::new(127, 0, 0, 1),
            ];
            assert_eq!(
                ipv4_by_routes(&r, &local, "net2"),
                vec![Ipv4Addr::new(10, 224, 1, 1)]
            );
            // Two interfaces in one subnet: ambiguous, nothing.
            let mut shared = r.clone();
            shared.push(Route {
                iface: "net3".into(),
                ..r[1].clone()
            });
            assert!(ipv4_by_routes(&shared, &local, "net1").is_empty());
        }
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["net10", "net2", "net1", "eth0"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, vec!["eth0", "net1", "net2", "net10"]);
    }
}
