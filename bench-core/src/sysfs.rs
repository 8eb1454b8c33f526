//! RDMA device discovery from sysfs, with injectable roots so that it runs on fixture trees.
//!
//! What is read, per device under `<sys>/class/infiniband/<dev>`:
//! - `device` (a link to the PCI function: its basename is the PCI address; virtual devices such
//!   as rxe have none), `device/numa_node`, `device/driver` (link; basename is the driver),
//!   `node_type`, `parent` (rxe/siw: the netdev they were created on, informational only);
//! - per port `ports/<n>/`: `state` ("4: ACTIVE"), `phys_state` ("5: LinkUp"), `link_layer`,
//!   `rate` ("100 Gb/sec (4X EDR)"), `lid`;
//! - the GID table, `ports/<n>/gids/<i>` (always readable; unused or hidden entries read as
//!   zeros), `ports/<n>/gid_attrs/types/<i>` ("RoCE v2", "IB/RoCE v1"; the read fails for empty
//!   entries) and `ports/<n>/gid_attrs/ndevs/<i>` (the netdev; the read fails for empty
//!   entries and for GIDs whose netdev lives in another network namespace).
//!
//! A failed read is recorded as `None`, never as an error: that is how the kernel says "not
//! yours" or "empty". (Fixture trees emulate a failing read with a missing file or with a
//! directory in its place.)
//!
//! Which netdev of this namespace belongs to which device: physical NICs (PF or VF) show it as
//! `<sys>/class/net/<if>/device/infiniband/<dev>`; rxe devices and IPvlan/macvlan children only
//! through the `gid_attrs/ndevs` entries.
//!
//! Whether a GID belongs to *this* network namespace: its netdev must be readable, an interface
//! of that name must exist in `<sys>/class/net` (sysfs is mounted per network namespace in
//! containers and by `ip netns exec`), **and** the GID's address must be configured here:
//! an IPv6 GID must appear with that interface in `<proc>/net/if_inet6`, an IPv4-mapped GID
//! must be a local address in `<proc>/net/fib_trie` (both files show the reading process's
//! namespace). The address check is what matters in practice: on the lab's kernel (7.2, shared
//! RDMA netns mode) `ndevs` reads succeed for other namespaces' GIDs too, and every pod calls
//! its rail interface `net1`, so names alone collide. When neither `/proc/net` file can be read,
//! the check falls back to the name alone (see [`LocalAddrs::known`]).
//!
//! `<sys>/class/infiniband_verbs/uverbs<N>/ibdev` maps devices to their `/dev/infiniband/uverbs<N>`
//! node, which is checked under the `dev` root: a container can see a device in sysfs without
//! having been given its character device.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::gid::{Gid, GidType};

/// The filesystem roots discovery reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysRoots {
    /// Where sysfs is mounted (`/sys`).
    pub sys: PathBuf,
    /// Where devtmpfs is mounted (`/dev`).
    pub dev: PathBuf,
    /// Where procfs is mounted (`/proc`).
    pub proc: PathBuf,
}

impl Default for SysRoots {
    fn default() -> Self {
        SysRoots {
            sys: PathBuf::from("/sys"),
            dev: PathBuf::from("/dev"),
            proc: PathBuf::from("/proc"),
        }
    }
}

impl SysRoots {
    /// Roots `<root>/sys`, `<root>/dev` and `<root>/proc`, as laid out by the test fixtures.
    pub fn under(root: &Path) -> Self {
        SysRoots {
            sys: root.join("sys"),
            dev: root.join("dev"),
            proc: root.join("proc"),
        }
    }

    /// `class/infiniband/DEV/ports/PORT`: a port's folder (state, counters, GIDs).
    pub fn port_dir(&self, device: &str, port: u8) -> PathBuf {
        self.ib_class()
            .join(device)
            .join("ports")
            .join(port.to_string())
    }

    fn ib_class(&self) -> PathBuf {
        self.sys.join("class/infiniband")
    }

    fn net_class(&self) -> PathBuf {
        self.sys.join("class/net")
    }
}

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

/// Reads a small sysfs attribute, trimmed; `None` when the read fails (missing file, a
/// directory in its place, EINVAL from the kernel).
pub fn read_attr(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The name a symbolic link points to (its last component); `None` when it is no link.
pub(crate) fn link_basename(path: &Path) -> Option<String> {
    fs::read_link(path)
        .ok()
        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
}

/// Whether `s` is a PCI address as the kernel names PCI functions in sysfs: `dddd:bb:dd.f`,
/// domain, bus, device and function in lowercase hex (`0000:0f:00.0`: the kernel formats them
/// with `%04x:%02x:%02x.%d`). An uppercase spelling (CUDA's `0000:0F:00.0`) is no sysfs name:
/// [`crate::topology::normalize_bus_id`] turns one into this form.
pub fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.char_indices()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// Names of the entries of a directory, sorted; empty when it does not exist or cannot be read.
pub(crate) fn dir_names(path: &Path) -> Vec<String> {
    read_dir_names(path).unwrap_or_default()
}

/// Names of the entries of a directory, sorted; empty when it does not exist, the error when
/// it exists and cannot be read.
fn read_dir_names(path: &Path) -> Result<Vec<String>, Error> {
    let mut v: Vec<String> = match fs::read_dir(path) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(source) => {
            return Err(Error::Sysfs {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    v.sort_by(|a, b| natural_cmp(a, b));
    Ok(v)
}

/// Orders `mlx5_2` before `mlx5_10` and `net2` before `net10`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn split(s: &str) -> (&str, Option<u64>) {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (head, tail) = s.split_at(s.len() - digits);
        (head, tail.parse().ok())
    }
    let (ha, na) = split(a);
    let (hb, nb) = split(b);
    ha.cmp(hb).then(na.cmp(&nb)).then(a.cmp(b))
}

/// Parses a port rate string (`"100 Gb/sec (4X EDR)"`, `"2.5 Gb/sec (1X SDR)"`,
/// `"10 Gb/sec (1X SDR)"` as rxe reports it for a 10 GbE netdev) into Gb/s.
pub fn parse_rate_gbps(rate: &str) -> Option<f64> {
    let mut it = rate.split_whitespace();
    let value: f64 = it.next()?.parse().ok()?;
    let unit = it.next()?;
    let scale = match unit {
        "Gb/sec" | "Gb/s" => 1.0,
        "Mb/sec" | "Mb/s" => 1e-3,
        "Tb/sec" | "Tb/s" => 1e3,
        _ => return None,
    };
    (value.is_finite() && value > 0.0).then_some(value * scale)
}

/// The memlock soft limit of this process in KiB from `<proc>/self/limits`; `None` when
/// unreadable, `Some(u64::MAX)` for unlimited.
pub fn memlock_limit_kib(roots: &SysRoots) -> Option<u64> {
    let text = fs::read_to_string(roots.proc.join("self/limits")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Max locked memory"))?;
    let soft = line
        .trim_start_matches("Max locked memory")
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        Some(u64::MAX)
    } else {
        soft.parse::<u64>().ok().map(|b| b / 1024)
    }
}

/// The IP addresses configured in this network namespace, from `<proc>/net`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalAddrs {
    /// Whether `if_inet6` or `fib_trie` could be read at all; when not, GIDs are matched by
    /// netdev name only.
    pub known: bool,
    /// Local IPv4 addresses (`/32 host LOCAL` entries of `fib_trie`).
    pub v4: Vec<Ipv4Addr>,
    /// IPv6 addresses with their interface (`if_inet6`).
    pub v6: Vec<(Ipv6Addr, String)>,
}

impl LocalAddrs {
    /// Reads `<proc>/net/if_inet6` and `<proc>/net/fib_trie`.
    pub fn read(roots: &SysRoots) -> LocalAddrs {
        let inet6 = fs::read_to_string(roots.proc.join("net/if_inet6")).ok();
        let trie = fs::read_to_string(roots.proc.join("net/fib_trie")).ok();
        LocalAddrs {
            known: inet6.is_some() || trie.is_some(),
            v4: trie
                .as_deref()
                .map(parse_fib_trie_local)
                .unwrap_or_default(),
            v6: inet6.as_deref().map(parse_if_inet6).unwrap_or_default(),
        }
    }

    /// Whether `gid` (on `netdev`) is an address of this namespace; `true` when unknown.
    pub fn has(&self, gid: &Gid, netdev: &str) -> bool {
        if !self.known {
            return true;
        }
        match gid.ipv4_mapped() {
            Some(v4) => self.v4.contains(&v4),
            None => {
                let a = gid.to_ipv6();
                self.v6.iter().any(|(b, n)| *b == a && n == netdev)
            }
        }
    }
}

/// Local IPv4 addresses from `/proc/net/fib_trie`: a `|-- A.B.C.D` line followed by a
/// `/32 host LOCAL` line.
pub fn parse_fib_trie_local(text: &str) -> Vec<Ipv4Addr> {
    let mut out: Vec<Ipv4Addr> = Vec::new();
    let mut current: Option<Ipv4Addr> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(ip) = t.strip_prefix("|-- ") {
            current = ip.trim().parse().ok();
        } else if t.starts_with("/32 host LOCAL") {
            if let Some(ip) = current {
                if !out.contains(&ip) {
                    out.push(ip);
                }
            }
        } else if t.starts_with("+--") || !t.starts_with('/') {
            current = None;
        }
    }
    out
}

/// `(address, interface)` pairs from `/proc/net/if_inet6`.
pub fn parse_if_inet6(text: &str) -> Vec<(Ipv6Addr, String)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (hex, name) = (f.first()?, f.get(5)?);
            let v = u128::from_str_radix(hex, 16).ok()?;
            Some((Ipv6Addr::from(v), (*name).to_string()))
        })
        .collect()
}

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

/// The MTU of a network interface of this namespace.
pub fn interface_mtu(roots: &SysRoots, netdev: &str) -> Option<u32> {
    read_attr(&roots.net_class().join(netdev).join("mtu")).and_then(|s| s.parse().ok())
}

/// This host's (in a pod: the pod's) name, from `<proc>/sys/kernel/hostname`; `None` when it
/// cannot be read or is empty.
pub fn host_name(roots: &SysRoots) -> Option<String> {
    read_attr(&roots.proc.join("sys/kernel/hostname")).filter(|s| !s.is_empty())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate_gbps("100 Gb/sec (4X EDR)"), Some(100.0));
        assert_eq!(parse_rate_gbps("2.5 Gb/sec (1X SDR)"), Some(2.5));
        assert_eq!(parse_rate_gbps("10 Gb/sec (1X SDR)"), Some(10.0));
        assert_eq!(parse_rate_gbps("400 Gb/sec (4X NDR)"), Some(400.0));
        assert_eq!(parse_rate_gbps("53.125 Gb/sec (1X HDR)"), Some(53.125));
        assert_eq!(parse_rate_gbps("Unknown"), None);
        assert_eq!(parse_rate_gbps(""), None);
    }

    #[test]
    fn states() {
        assert_eq!(PortState::parse("4: ACTIVE"), PortState::Active);
        assert_eq!(PortState::parse("1: DOWN\n"), PortState::Down);
        assert_eq!(PortState::parse("7: WHAT").name(), "7: WHAT");
    }

    #[test]
    fn pci() {
        assert!(is_pci_address("0000:17:00.0"));
        assert!(!is_pci_address("rxe0"));
        assert!(!is_pci_address("0000:17:00"));
    }

    #[test]
    fn pci_addresses_are_the_kernels_lowercase_hex() {
        assert!(is_pci_address("0000:0f:00.0"));
        assert!(is_pci_address("000a:bc:1f.7"));
        assert!(
            !is_pci_address("0000:0F:00.0"),
            "CUDA's spelling is no sysfs name"
        );
        assert!(!is_pci_address("000A:BC:1F.7"));
        assert!(!is_pci_address("0000:0g:00.0"));
        assert!(!is_pci_address("0000-0f-00.0"));
        assert!(!is_pci_address("00000000:0f:00.0"));
    }

    #[test]
    fn a_missing_device_class_is_no_device_an_unreadable_one_an_error() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let roots = SysRoots::under(dir.path());
        let inv = discover(&roots).expect("no sysfs at all: no devices");
        assert!(inv.devices.is_empty() && inv.netdevs.is_empty());
        let class = dir.path().join("sys/class");
        fs::create_dir_all(&class).expect("sys/class");
        fs::write(class.join("infiniband"), "").expect("sys/class/infiniband");
        match discover(&roots) {
            Err(Error::Sysfs { path, .. }) => assert_eq!(path, class.join("infiniband")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn proc_net_parsers_on_lab_captures() {
        // From capture_lab.sh in the lab's podB.
        let trie = "Main:\n  +-- 0.0.0.0/1 2 0 2\n     +-- 10.0.0.0/8 2 0 2\n        +-- 10.224.0.0/23 3 0 4\n           +-- 10.224.0.0/30 2 0 2\n              |-- 10.224.0.0\n                 /24 link UNICAST\n              |-- 10.224.0.2\n                 /32 host LOCAL\n           |-- 10.224.0.255\n              /32 link BROADCAST\n     +-- 127.0.0.0/8 2 0 2\n        +-- 127.0.0.0/31 1 0 0\n           |-- 127.0.0.0\n              /8 host LOCAL\n           |-- 127.0.0.1\n              /32 host LOCAL\nLocal:\n              |-- 10.224.0.2\n                 /32 host LOCAL\n";
        let v4 = parse_fib_trie_local(trie);
        assert_eq!(
            v4,
            vec![Ipv4Addr::new(10, 224, 0, 2), Ipv4Addr::new(127, 0, 0, 1)]
        );
        let inet6 = "fe80000000000000d84917fffeed81d8 03 40 20 80     net1\n00000000000000000000000000000001 01 80 10 80       lo\n";
        let v6 = parse_if_inet6(inet6);
        assert_eq!(v6.len(), 2);
        assert_eq!(v6[0].0.to_string(), "fe80::d849:17ff:feed:81d8");
        assert_eq!(v6[0].1, "net1");
        let addrs = LocalAddrs {
            known: true,
            v4,
            v6,
        };
        let ll: Gid = "fe80:0000:0000:0000:d849:17ff:feed:81d8"
            .parse()
            .unwrap_or_default();
        assert!(addrs.has(&ll, "net1"));
        assert!(!addrs.has(&ll, "net2"));
        let a0: Gid = "0000:0000:0000:0000:0000:ffff:0ae0:0001"
            .parse()
            .unwrap_or_default();
        let b0: Gid = "0000:0000:0000:0000:0000:ffff:0ae0:0002"
            .parse()
            .unwrap_or_default();
        assert!(!addrs.has(&a0, "net1"));
        assert!(addrs.has(&b0, "net1"));
        assert!(LocalAddrs::default().has(&a0, "net1"));
    }

    #[test]
    fn natural() {
        let mut v = vec!["mlx5_10", "mlx5_2", "mlx5_1", "rdma0"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, vec!["mlx5_1", "mlx5_2", "mlx5_10", "rdma0"]);
    }
}
