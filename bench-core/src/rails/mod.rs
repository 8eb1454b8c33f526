//! `rdmabw rails`: one row per rail of this network namespace, with the RDMA device, port and
//! GID index a test on that rail uses, and how the rail reaches the pod.
//!
//! # What is a rail
//! An interface named like a rail, `rdmaN` (the node's rails, as a hostNetwork pod sees them) or
//! `netN` (Multus numbers a pod's extra networks from `net1`); its rail number comes from
//! [`rail_number`], so that two pods' tables pair up by rail. A rail is listed even when it
//! cannot be used here, with the reason (no address, no RDMA device, port down, no GID, its
//! `/dev/infiniband/uverbsN` not given to the container). When no interface is named like a
//! rail, every interface with an RDMA port, an IPv4 address and an ACTIVE port is a rail,
//! numbered in name order.
//!
//! Every other RDMA device port is listed in `not_rails` with the reason: a front-end NIC
//! (its interface is not named like a rail), a port that is down, an interface without an
//! address, or a device with no interface in this namespace (another pod's, or the host's).
//!
//! # The device and GID of a rail
//! The GID of a rail is the RoCE v2 IPv4-mapped GID whose address is an address of that
//! interface *in this namespace* ([`crate::sysfs`] checks the address against this namespace's
//! `/proc/net`, because on the lab's kernel another pod's GID names its netdev too, and every
//! pod calls its rail `net1`). The device, port and GID index come from
//! [`select::resolve_rail`] with `--netdev <iface>`, exactly as `rdmabw client --netdev`
//! resolves them, so the two never disagree.
//!
//! # How the rail reaches the pod ([`Attachment`])
//! - `software`: an rxe/siw device created on this very interface (its `parent`), as in the lab;
//! - `sriov`: the interface is a PCI function with a `device/physfn` link (a VF);
//! - `host_network`: the interface is a PCI physical function: the node's own rail;
//! - `ipvlan`: a virtual interface whose address's GID lives on an RDMA device that belongs to
//!   another netdev (a PCI NIC, or an rxe whose `parent` is the master): the kernel puts an
//!   upper device's addresses in its lower device's GID table. Neither `iflink` nor a
//!   `lower_<master>` link can say it in a pod: the master stays in the node's namespace, and
//!   `iflink`, its ifindex there, may equal the child's own. A macvlan child looks the same from
//!   sysfs and is listed as `ipvlan` too;
//! - `unknown`: anything else.
//!
//! # GPUs
//! The `gpus` column lists the GPUs under the same PCIe switch or root port as the rail's NIC
//! ([`crate::topology::gpus_near`] with [`Proximity::SameRootPort`], nvidia-smi's PIX and PXB),
//! the distance up to which NCCL uses GPUDirect RDMA by default. Software devices have none.
//! The report's `gpus` turns that column around, for the GPUs of this container: each with the
//! usable rails near it, none for a GPU NCCL will not use GPUDirect RDMA for ([`gpus`]).

pub mod gpus;
pub mod netif;
pub mod select;

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr};

use wire::rails::{rail_number, Attachment, Capability, NotARail, RailRow, RailsReport};
use wire::topology::Proximity;
use wire::REPORT_SCHEMA_VERSION;

use crate::error::Error;
use crate::gid::GidType;
use crate::sysfs::{self, GidEntry, Inventory, LinkLayer, LocalAddrs, Port, RdmaDevice, SysRoots};
use crate::topology::gpus_near;
use crate::verbs::{Device, PathMtu};
use netif::{NetIf, Route};
pub use select::{choose_gid, resolve_rail, usable_gids, Rail, RailRequest};

/// What rail discovery asks of the devices beyond sysfs (the active MTU is not in sysfs).
pub trait PortQuery {
    /// The active MTU in bytes of `device` port `port`, when it can be asked.
    fn active_mtu(&self, device: &str, port: u8) -> Option<u32>;

    /// The populated `(port, index)` entries of `device`'s GID table, when it can be asked
    /// faster than sysfs reads every entry (`None`: read them all).
    fn populated_gids(&self, _device: &str) -> Option<Vec<(u8, u32)>> {
        None
    }
}

/// Asks nothing: the active MTU is derived from the interface MTU as the kernel does for RoCE.
#[derive(Debug, Clone, Copy, Default)]
pub struct SysfsOnly;

impl PortQuery for SysfsOnly {
    fn active_mtu(&self, _device: &str, _port: u8) -> Option<u32> {
        None
    }
}

/// Asks libibverbs (`ibv_query_port`, `ibv_query_gid_table`), opening each device once and
/// keeping it open for the next question (a listing asks two per device).
#[derive(Debug)]
pub struct VerbsQuery {
    roots: SysRoots,
    open: RefCell<HashMap<String, Option<Device>>>,
    /// Why the first device that could not be opened could not.
    open_error: RefCell<Option<Error>>,
}

impl VerbsQuery {
    /// Queries through libibverbs; `roots` serve the error messages of [`Device::open_with`].
    pub fn new(roots: &SysRoots) -> VerbsQuery {
        VerbsQuery {
            roots: roots.clone(),
            open: RefCell::default(),
            open_error: RefCell::default(),
        }
    }

    /// Why the first device asked about could not be opened (its questions got `None`), if
    /// one could not.
    pub fn open_error(&self) -> Option<String> {
        self.open_error.borrow().as_ref().map(ToString::to_string)
    }

    /// `f` on the open device, opening it on first use; `None` when it cannot be opened.
    fn with_device<T>(&self, name: &str, f: impl FnOnce(&Device) -> Option<T>) -> Option<T> {
        let mut open = self.open.borrow_mut();
        let dev = open.entry(name.to_string()).or_insert_with(|| {
            Device::open_with(&self.roots, name)
                .map_err(|e| {
                    self.open_error.borrow_mut().get_or_insert(e);
                })
                .ok()
        });
        f(dev.as_ref()?)
    }
}

impl PortQuery for VerbsQuery {
    fn active_mtu(&self, device: &str, port: u8) -> Option<u32> {
        self.with_device(device, |d| d.port(port).ok()?.active_mtu.map(|m| m.bytes()))
    }

    fn populated_gids(&self, device: &str) -> Option<Vec<(u8, u32)>> {
        self.with_device(device, |d| d.populated_gids().ok())
    }
}

/// Every RDMA device of this namespace and the netdevs bound to them, as
/// [`sysfs::discover`] reads them, except that each GID table is read only at the entries
/// libibverbs lists as populated (`ibv_query_gid_table`, one call per device); a device that
/// cannot be opened has its whole table read. A rxe port's table is 1024 sysfs files, nearly
/// all empty: reading every table of the lab's 8 devices was most of an rdmabw server's or
/// client's start (about 1.5 s of 2.1 s under emulation). libibverbs opens this host's devices,
/// so roots other than this host's own (a fixture, a copy of a pod's view) are read from sysfs
/// only, as [`sysfs::discover`] does.
///
/// # Errors
///
/// As [`sysfs::discover`].
pub fn inventory(roots: &SysRoots) -> Result<Inventory, Error> {
    inventory_with(roots, &VerbsQuery::new(roots))
}

/// [`inventory`], asking `verbs`, whose devices stay open for the caller's next questions
/// (the active MTU of each port, say).
///
/// # Errors
///
/// As [`sysfs::discover`].
pub fn inventory_with(roots: &SysRoots, verbs: &VerbsQuery) -> Result<Inventory, Error> {
    if *roots != SysRoots::default() {
        return sysfs::discover(roots);
    }
    sysfs::discover_with(roots, &|d| verbs.populated_gids(d))
}

/// Why rails could not be listed at all.
#[derive(Debug, thiserror::Error)]
pub enum RailsError {
    /// sysfs discovery failed.
    #[error("cannot read the RDMA devices: {0}")]
    Discover(#[from] Error),
}

/// What is known about one interface before it becomes a row.
#[derive(Debug)]
struct IfView<'a> {
    nif: &'a NetIf,
    /// `(device, port)` the interface belongs to, from the PCI function or the GID table.
    bindings: Vec<(String, u8)>,
    /// The lowest-index RoCE v2 IPv4-mapped GID of this interface's address, with its device
    /// and port.
    own_gid: Option<(String, u8, GidEntry)>,
    /// Its IPv4 address: from that GID, else from the routes.
    ipv4: Option<Ipv4Addr>,
}

fn is_own_v4_gid(g: &GidEntry, iface: &str) -> bool {
    !g.gid.is_zero()
        && g.netdev_here
        && g.gid_type == Some(GidType::RoceV2)
        && g.gid.ipv4_mapped().is_some()
        && g.netdev.as_deref() == Some(iface)
}

fn view<'a>(inv: &Inventory, nif: &'a NetIf, routes: &[Route], addrs: &LocalAddrs) -> IfView<'a> {
    let bindings: Vec<(String, u8)> = inv
        .bindings_of(&nif.name)
        .iter()
        .map(|b| (b.device.clone(), b.port))
        .collect();
    // Prefer a GID on a bound port; the lowest index wins, as select::choose_gid does.
    let mut own_gid: Option<(String, u8, GidEntry)> = None;
    for d in &inv.devices {
        for p in &d.ports {
            if let Some(g) = p.gids.iter().find(|g| is_own_v4_gid(g, &nif.name)) {
                let better = match &own_gid {
                    None => true,
                    Some((od, op, og)) => {
                        let bound = |dev: &str, port: u8| {
                            bindings.iter().any(|(bd, bp)| bd == dev && *bp == port)
                        };
                        (bound(&d.name, p.num) && !bound(od, *op))
                            || (bound(&d.name, p.num) == bound(od, *op) && g.index < og.index)
                    }
                };
                if better {
                    own_gid = Some((d.name.clone(), p.num, g.clone()));
                }
            }
        }
    }
    let ipv4 = own_gid.as_ref().and_then(|(_, _, g)| g.ipv4()).or_else(|| {
        netif::ipv4_by_routes(routes, &addrs.v4, &nif.name)
            .first()
            .copied()
    });
    IfView {
        nif,
        bindings,
        own_gid,
        ipv4,
    }
}

fn link_layer_name(l: &LinkLayer) -> String {
    match l {
        LinkLayer::InfiniBand => "InfiniBand".to_string(),
        LinkLayer::Ethernet => "Ethernet".to_string(),
        LinkLayer::Other(s) => s.clone(),
    }
}

fn port_of<'i>(inv: &'i Inventory, device: &str, port: u8) -> Option<(&'i RdmaDevice, &'i Port)> {
    let d = inv.device(device)?;
    Some((d, d.port(port)?))
}

/// How the interface reaches this namespace (see the module documentation).
pub fn attachment(nif: &NetIf, device: Option<&RdmaDevice>) -> Attachment {
    if let Some(d) = device {
        if d.pci_address.is_none() && d.parent.as_deref() == Some(nif.name.as_str()) {
            return Attachment::Software;
        }
    }
    if nif.pci.is_some() {
        return if nif.vf {
            Attachment::Sriov
        } else {
            Attachment::HostNetwork
        };
    }
    match device {
        // A virtual interface whose address has its GID on a software device of another netdev
        // (the master), or on a PCI NIC whose netdev is not here: the kernel puts an upper
        // device's addresses in its lower device's GID table, so this is a child of that
        // netdev (IPvlan, macvlan), stacked or not by `iflink`: in a pod, `iflink` is the
        // master's ifindex in the node's namespace, which can equal the child's own
        // (`net1@if3` was ifindex 3 in a real node's IPvlan pod).
        Some(d) if d.pci_address.is_some() || d.parent.as_deref() != Some(nif.name.as_str()) => {
            Attachment::Ipvlan
        }
        _ => Attachment::Unknown,
    }
}

/// Why a rail that resolved to nothing usable is not usable, in one line.
fn reason_for(v: &IfView<'_>, err: &Error) -> String {
    let name = &v.nif.name;
    if v.bindings.is_empty() {
        return match v.ipv4 {
            None => format!("{name} has no IPv4 address (and no RDMA device has a GID of it)"),
            Some(ip) if v.nif.is_stacked() && v.nif.is_virtual() => format!(
                "no RDMA device has a RoCE v2 GID of {name}'s address {ip}: the master's RDMA \
                 device is not visible here (exclusive RDMA netns mode, or not given to the pod)"
            ),
            Some(ip) => format!("no RDMA device has a RoCE v2 GID of {name}'s address {ip}"),
        };
    }
    match err {
        Error::PortDown {
            device,
            port,
            state,
            phys_state,
        } => {
            let phys = phys_state
                .split_once(':')
                .map(|(_, t)| t.trim())
                .unwrap_or(phys_state);
            format!("port {port} of {device} is {state} ({phys})")
        }
        Error::NoUsableGid { device, port, .. } => match v.ipv4 {
            Some(ip) => format!(
                "no RoCE v2 GID of {name}'s address {ip} on {device} port {port} in this namespace"
            ),
            None => format!(
                "{name} has no IPv4 address, so {device} port {port} has no RoCE v2 IPv4 GID of it"
            ),
        },
        _ => {
            // Keep it to one line.
            let s = err.to_string();
            s.lines().next().unwrap_or_default().to_string()
        }
    }
}

fn row(
    roots: &SysRoots,
    inv: &Inventory,
    ports: &dyn PortQuery,
    v: &IfView<'_>,
    rail: u32,
) -> RailRow {
    let req = RailRequest {
        netdev: Some(v.nif.name.clone()),
        ..RailRequest::default()
    };
    let resolved = resolve_rail(inv, roots, &req);
    let (device, port, gid_index, ipv4) = match &resolved {
        Ok(r) => (
            Some(r.device.clone()),
            Some(r.port),
            Some(r.gid_index),
            match r.ip {
                Some(IpAddr::V4(a)) => Some(a),
                _ => v.ipv4,
            },
        ),
        Err(_) => {
            let (d, p) = match (&v.own_gid, v.bindings.first()) {
                (Some((d, p, _)), _) => (Some(d.clone()), Some(*p)),
                (None, Some((d, p))) => (Some(d.clone()), Some(*p)),
                (None, None) => (None, None),
            };
            let idx = v
                .own_gid
                .as_ref()
                .filter(|(od, op, _)| Some(od) == d.as_ref() && Some(*op) == p)
                .map(|(_, _, g)| g.index);
            (d, p, idx, v.ipv4)
        }
    };
    let dp = match (&device, port) {
        (Some(d), Some(p)) => port_of(inv, d, p),
        _ => None,
    };
    let dev = dp.map(|(d, _)| d);
    let p = dp.map(|(_, p)| p);

    let mut usable = resolved.is_ok();
    let mut reason = match &resolved {
        Ok(_) => None,
        Err(e) => Some(reason_for(v, e)),
    };
    if usable {
        if let Some(d) = dev {
            if !d.uverbs_present {
                usable = false;
                reason = Some(match &d.uverbs {
                    Some(u) => format!(
                        "/dev/infiniband/{u} of {} is not in this container: the device was not \
                         given to the pod (device plugin resource, or privileged)",
                        d.name
                    ),
                    None => format!(
                        "{} has no uverbs device in sysfs: libibverbs cannot open it",
                        d.name
                    ),
                });
            }
        }
    }

    let ethernet = p.is_none_or(|p| !matches!(p.link_layer, Some(LinkLayer::InfiniBand)));
    let active_mtu_bytes = match (&device, port) {
        (Some(d), Some(pn)) => ports.active_mtu(d, pn),
        _ => None,
    }
    .or_else(|| {
        if ethernet && dev.is_some() {
            v.nif
                .mtu
                .and_then(PathMtu::for_netdev_mtu)
                .map(PathMtu::bytes)
        } else {
            None
        }
    });
    let gpus = match &device {
        Some(d) => gpus_near(roots, d, Proximity::SameRootPort)
            .map(|v| {
                v.into_iter()
                    .map(|(g, _)| g.address().to_string())
                    .collect()
            })
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let mut row = RailRow {
        rail,
        iface: v.nif.name.clone(),
        ipv4: ipv4.map(|a| a.to_string()),
        device,
        port,
        gid_index,
        state: p
            .and_then(|p| p.state.as_ref())
            .map(|s| s.name().to_string()),
        link_layer: p.and_then(|p| p.link_layer.as_ref()).map(link_layer_name),
        rate_gbps: p.and_then(|p| p.line_rate_gbps),
        active_mtu_bytes,
        pci: dev.and_then(|d| d.pci_address.clone()),
        numa_node: dev
            .and_then(|d| d.numa_node)
            .and_then(|n| i32::try_from(n).ok()),
        gpus,
        attachment: attachment(v.nif, dev),
        usable,
        reason,
        operstate: v.nif.operstate.clone(),
    };
    // An interface that is down is said first: it is the first thing to fix, and what tells
    // railsweep not to wait for its GID (which does not come while it is down).
    if row.interface_down() {
        let said = format!(
            "interface {} is down (operstate {})",
            row.iface,
            row.operstate.as_deref().unwrap_or("down")
        );
        row.usable = false;
        row.reason = Some(match row.reason.take() {
            Some(r) => format!("{said}; {r}"),
            None => said,
        });
    }
    row
}

fn port_state_text(p: &Port) -> String {
    let state = p.state.as_ref().map(|s| s.name().to_string());
    match (state, &p.phys_state) {
        (Some(s), Some(ph)) => {
            let ph = ph.split_once(':').map(|(_, t)| t.trim()).unwrap_or(ph);
            format!("{s} ({ph})")
        }
        (Some(s), None) => s,
        (None, _) => "in an unknown state".to_string(),
    }
}

/// Lists the rails of this network namespace and everything else that was looked at.
pub fn discover(roots: &SysRoots, ports: &dyn PortQuery) -> Result<RailsReport, RailsError> {
    let inv = sysfs::discover_with(roots, &|d| ports.populated_gids(d))?;
    let addrs = LocalAddrs::read(roots);
    let routes = netif::routes(roots);
    let ifs = netif::interfaces(roots);
    let views: Vec<IfView<'_>> = ifs.iter().map(|n| view(&inv, n, &routes, &addrs)).collect();
    Ok(build(roots, &inv, ports, &views))
}

fn build(
    roots: &SysRoots,
    inv: &Inventory,
    ports: &dyn PortQuery,
    views: &[IfView<'_>],
) -> RailsReport {
    let named: Vec<(u32, &IfView<'_>)> = views
        .iter()
        .filter_map(|v| rail_number(&v.nif.name).map(|n| (n, v)))
        .collect();
    let chosen: Vec<(u32, &IfView<'_>)> = if !named.is_empty() {
        named
    } else {
        // No rail names: every interface with an RDMA port, an address and an ACTIVE port.
        views
            .iter()
            .filter(|v| {
                v.ipv4.is_some()
                    && v.bindings
                        .iter()
                        .any(|(d, p)| port_of(inv, d, *p).is_some_and(|(_, port)| port.is_active()))
            })
            .enumerate()
            .map(|(i, v)| (u32::try_from(i).unwrap_or(u32::MAX), v))
            .collect()
    };
    let mut rails: Vec<RailRow> = chosen
        .iter()
        .map(|(n, v)| row(roots, inv, ports, v, *n))
        .collect();
    rails.sort_by(|a, b| {
        a.rail
            .cmp(&b.rail)
            .then(sysfs::natural_cmp(&a.iface, &b.iface))
    });

    let rail_ifaces: BTreeSet<&str> = chosen.iter().map(|(_, v)| v.nif.name.as_str()).collect();
    let mut seen: BTreeSet<(String, u8)> = rails
        .iter()
        .filter_map(|r| Some((r.device.clone()?, r.port?)))
        .collect();
    let mut not_rails: Vec<NotARail> = Vec::new();

    // Interfaces with an RDMA port that are not rails.
    for v in views
        .iter()
        .filter(|v| !rail_ifaces.contains(v.nif.name.as_str()))
    {
        for (d, pn) in &v.bindings {
            if !seen.insert((d.clone(), *pn)) {
                continue;
            }
            let Some((dev, p)) = port_of(inv, d, *pn) else {
                continue;
            };
            let on = if dev.ports.len() > 1 {
                format!("port {pn}: ")
            } else {
                String::new()
            };
            let name = &v.nif.name;
            let reason = if !p.is_active() {
                format!("{on}port {pn} is {}; interface {name}", port_state_text(p))
            } else if let Some(ip) = v.ipv4 {
                format!(
                    "{on}front-end NIC: its interface {name} ({ip}) is not named like a rail \
                     (rdmaN, netN)"
                )
            } else {
                format!("{on}interface {name} has no IPv4 address")
            };
            not_rails.push(NotARail {
                name: d.clone(),
                reason,
            });
        }
    }
    // Device ports with no interface here.
    for d in &inv.devices {
        for p in &d.ports {
            if seen.contains(&(d.name.clone(), p.num)) {
                continue;
            }
            let on = if d.ports.len() > 1 {
                format!("port {}: ", p.num)
            } else {
                String::new()
            };
            let mut reason = if !p.is_active() {
                format!(
                    "{on}port {} is {}, and no interface of this network namespace uses it",
                    p.num,
                    port_state_text(p)
                )
            } else {
                format!(
                    "{on}no interface of this network namespace uses it (another namespace's \
                     device, or the node's)"
                )
            };
            if !d.uverbs_present {
                reason.push_str("; its uverbs device is not in this container");
            }
            not_rails.push(NotARail {
                name: d.name.clone(),
                reason,
            });
        }
    }
    not_rails.sort_by(|a, b| sysfs::natural_cmp(&a.name, &b.name));

    RailsReport {
        schema_version: REPORT_SCHEMA_VERSION,
        rdmabw_version: env!("CARGO_PKG_VERSION").to_string(),
        capabilities: Capability::OURS.to_vec(),
        host: sysfs::host_name(roots).unwrap_or_else(|| "unknown".to_string()),
        gpus: gpus::alignment(roots, &rails),
        rails,
        not_rails,
    }
}
