//! Reading devices, ports, GID tables and netdev bindings from sysfs into an [`Inventory`].

use std::path::Path;

use super::addrs::LocalAddrs;
use super::inventory::{
    BindingSource, GidEntry, Inventory, LinkLayer, NetdevBinding, Port, PortState, RdmaDevice,
};
use super::roots::{
    dir_names, interface_mtu, is_pci_address, link_basename, natural_cmp, parse_rate_gbps,
    read_attr, read_dir_names, SysRoots,
};
use crate::error::Error;
use crate::gid::{Gid, GidType};

/// Which entries of a port's GID table to read. A rxe port has 1024 entries, each its own
/// sysfs file: a third of a second under the lab's emulation, for nothing when the GID index
/// is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GidScope {
    /// Every entry.
    All,
    /// Only this index (the table's length is still counted).
    One(u32),
    /// Only these `(port, index)` entries: the populated ones, as libibverbs' GID table query
    /// (one call per device) listed them. The others read as zeros and are left out.
    Listed(Vec<(u8, u32)>),
    /// None (device and port facts only).
    Skip,
}

/// The table's length and the entries of `scope`, in index order.
fn read_gid_table(
    roots: &SysRoots,
    addrs: &LocalAddrs,
    port_dir: &Path,
    port: u8,
    scope: &GidScope,
) -> (u32, Vec<GidEntry>) {
    let net = roots.net_class();
    let mut indices: Vec<u32> = dir_names(&port_dir.join("gids"))
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    indices.sort_unstable();
    let len = u32::try_from(indices.len()).unwrap_or(u32::MAX);
    match scope {
        GidScope::All => {}
        GidScope::One(i) => indices.retain(|x| x == i),
        GidScope::Listed(l) => indices.retain(|x| l.contains(&(port, *x))),
        GidScope::Skip => indices.clear(),
    }
    let entries = indices
        .into_iter()
        .map(|index| {
            let gid = read_attr(&port_dir.join(format!("gids/{index}")))
                .and_then(|s| s.parse::<Gid>().ok())
                .unwrap_or_default();
            // An entry that reads as zeros has no readable type or netdev: skip those reads,
            // which are most of a 1024-entry rxe table (seconds under the lab's emulation).
            let gid_type = (!gid.is_zero())
                .then(|| read_attr(&port_dir.join(format!("gid_attrs/types/{index}"))))
                .flatten()
                .map(|s| GidType::parse(&s));
            let netdev = (!gid.is_zero())
                .then(|| read_attr(&port_dir.join(format!("gid_attrs/ndevs/{index}"))))
                .flatten()
                .filter(|s| !s.is_empty());
            let netdev_here = !gid.is_zero()
                && netdev.as_deref().is_some_and(|n| {
                    !n.contains('/') && net.join(n).exists() && addrs.has(&gid, n)
                });
            GidEntry {
                index,
                gid,
                gid_type,
                netdev,
                netdev_here,
            }
        })
        .collect();
    (len, entries)
}

fn read_port(
    roots: &SysRoots,
    addrs: &LocalAddrs,
    dev_dir: &Path,
    num: u8,
    scope: &GidScope,
) -> Port {
    let dir = dev_dir.join(format!("ports/{num}"));
    let rate = read_attr(&dir.join("rate"));
    let (gid_table_len, gids) = read_gid_table(roots, addrs, &dir, num, scope);
    Port {
        num,
        state: read_attr(&dir.join("state")).map(|s| PortState::parse(&s)),
        phys_state: read_attr(&dir.join("phys_state")),
        link_layer: read_attr(&dir.join("link_layer")).map(|s| LinkLayer::parse(&s)),
        line_rate_gbps: rate.as_deref().and_then(parse_rate_gbps),
        rate,
        lid: read_attr(&dir.join("lid"))
            .and_then(|s| u16::from_str_radix(s.trim_start_matches("0x"), 16).ok())
            .unwrap_or(0),
        gid_table_len,
        gids,
    }
}

/// uverbs node name per device name, from `<sys>/class/infiniband_verbs/*/ibdev`.
fn uverbs_map(roots: &SysRoots) -> Vec<(String, String)> {
    let dir = roots.sys.join("class/infiniband_verbs");
    dir_names(&dir)
        .into_iter()
        .filter(|n| n.starts_with("uverbs"))
        .filter_map(|n| read_attr(&dir.join(&n).join("ibdev")).map(|ib| (ib, n)))
        .collect()
}

/// Reads one device. Fails only when the device directory does not exist.
pub fn read_device(roots: &SysRoots, name: &str) -> Result<RdmaDevice, Error> {
    read_device_scoped(roots, name, GidScope::All)
}

/// [`read_device`], reading only the GID entries of `scope`.
pub fn read_device_scoped(
    roots: &SysRoots,
    name: &str,
    scope: GidScope,
) -> Result<RdmaDevice, Error> {
    let dir = roots.ib_class().join(name);
    if !dir.is_dir() {
        return Err(Error::UnknownDevice {
            name: name.to_string(),
            available: dir_names(&roots.ib_class()),
        });
    }
    let uverbs = uverbs_node(roots, name);
    Ok(read_device_dir(
        roots,
        &LocalAddrs::read(roots),
        name,
        &dir,
        uverbs,
        &scope,
    ))
}

fn read_device_dir(
    roots: &SysRoots,
    addrs: &LocalAddrs,
    name: &str,
    dir: &Path,
    uverbs: Option<String>,
    scope: &GidScope,
) -> RdmaDevice {
    let ports = dir_names(&dir.join("ports"))
        .iter()
        .filter_map(|n| n.parse::<u8>().ok())
        .map(|n| read_port(roots, addrs, dir, n, scope))
        .collect();
    let uverbs_present = uverbs
        .as_deref()
        .is_some_and(|u| roots.dev.join("infiniband").join(u).exists());
    RdmaDevice {
        uverbs,
        uverbs_present,
        ports,
        ..read_identity_dir(name, dir)
    }
}

/// Who a device is (PCI function, driver, node type, parent netdev), without its ports and
/// uverbs node: what opening a device needs (rxe or not, the driver for messages), in at most
/// five reads instead of a port's worth. `None` when the device directory does not exist.
pub fn read_identity(roots: &SysRoots, name: &str) -> Option<RdmaDevice> {
    let dir = roots.ib_class().join(name);
    dir.is_dir().then(|| read_identity_dir(name, &dir))
}

fn read_identity_dir(name: &str, dir: &Path) -> RdmaDevice {
    let pci_address = link_basename(&dir.join("device")).filter(|s| is_pci_address(s));
    let (numa_node, driver) = if pci_address.is_some() {
        (
            read_attr(&dir.join("device/numa_node")).and_then(|s| s.parse::<u32>().ok()),
            link_basename(&dir.join("device/driver")),
        )
    } else {
        (None, None)
    };
    RdmaDevice {
        name: name.to_string(),
        pci_address,
        numa_node,
        driver,
        node_type: read_attr(&dir.join("node_type")),
        parent: read_attr(&dir.join("parent")),
        uverbs: None,
        uverbs_present: false,
        ports: Vec::new(),
    }
}

/// The uverbs node of device `name` (`uverbs3`), from `<sys>/class/infiniband_verbs`.
pub fn uverbs_node(roots: &SysRoots, name: &str) -> Option<String> {
    uverbs_map(roots)
        .into_iter()
        .find(|(ib, _)| ib == name)
        .map(|(_, u)| u)
}

/// Discovers every RDMA device and the netdevs of this namespace that belong to them. A host
/// without `/sys/class/infiniband` yields an empty inventory.
///
/// # Errors
///
/// [`Error::Sysfs`] when `<sys>/class/infiniband` exists but cannot be read (no permission,
/// not a directory): the devices are unknown, not absent.
pub fn discover(roots: &SysRoots) -> Result<Inventory, Error> {
    discover_with(roots, &|_| None)
}

/// Per device, the populated GID entries as (port, GID index), when the device can be asked.
pub type PopulatedGids<'a> = dyn Fn(&str) -> Option<Vec<(u8, u32)>> + 'a;

/// [`discover`], reading of each device's GID table only the entries `populated` lists for it
/// (`None`: every entry). A rxe port has 1024 entries, one sysfs file each, nearly all empty:
/// reading them all for 8 devices took most of a second under the lab's emulation.
pub fn discover_with(roots: &SysRoots, populated: &PopulatedGids<'_>) -> Result<Inventory, Error> {
    let class = roots.ib_class();
    let uv = uverbs_map(roots);
    let addrs = LocalAddrs::read(roots);
    let devices: Vec<RdmaDevice> = read_dir_names(&class)?
        .into_iter()
        .map(|name| {
            let uverbs = uv
                .iter()
                .find(|(ib, _)| *ib == name)
                .map(|(_, u)| u.clone());
            read_device_dir(
                roots,
                &addrs,
                &name,
                &class.join(&name),
                uverbs,
                &populated(&name).map_or(GidScope::All, GidScope::Listed),
            )
        })
        .collect();

    let mut netdevs: Vec<NetdevBinding> = Vec::new();
    let mut push = |netdev: &str, device: &str, port: u8, source: BindingSource| {
        if !netdevs
            .iter()
            .any(|b| b.netdev == netdev && b.device == device && b.port == port)
        {
            netdevs.push(NetdevBinding {
                netdev: netdev.to_string(),
                device: device.to_string(),
                port,
                source,
                mtu: interface_mtu(roots, netdev),
            });
        }
    };

    // Physical functions: <sys>/class/net/<if>/device/infiniband/<dev>.
    for ifname in dir_names(&roots.net_class()) {
        let ibdir = roots.net_class().join(&ifname).join("device/infiniband");
        for dev in dir_names(&ibdir) {
            let Some(d) = devices.iter().find(|d| d.name == dev) else {
                continue;
            };
            // dev_port is 0-based on multi-port devices; one-port devices have 0 or nothing.
            let dev_port = read_attr(&roots.net_class().join(&ifname).join("dev_port"))
                .and_then(|s| s.parse::<u8>().ok())
                .unwrap_or(0);
            let port = dev_port.saturating_add(1);
            let port = if d.port(port).is_some() {
                port
            } else {
                d.ports.first().map(|p| p.num).unwrap_or(1)
            };
            push(&ifname, &dev, port, BindingSource::PciFunction);
        }
    }
    // GID tables: rxe, IPvlan/macvlan children, and PFs again.
    for d in &devices {
        for p in &d.ports {
            for n in p.netdevs_here() {
                push(&n, &d.name, p.num, BindingSource::GidTable);
            }
        }
    }
    netdevs.sort_by(|a, b| {
        natural_cmp(&a.netdev, &b.netdev)
            .then(natural_cmp(&a.device, &b.device))
            .then(a.port.cmp(&b.port))
    });

    Ok(Inventory { devices, netdevs })
}
