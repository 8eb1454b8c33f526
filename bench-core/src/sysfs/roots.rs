//! Where sysfs, devfs and procfs are ([`SysRoots`]), and the small readers and names that
//! every part of discovery shares: attributes, links, directories, PCI addresses, rates, the
//! memlock limit.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::Error;

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

    pub(super) fn ib_class(&self) -> PathBuf {
        self.sys.join("class/infiniband")
    }

    pub(super) fn net_class(&self) -> PathBuf {
        self.sys.join("class/net")
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

/// Names of the entries of a directory, sorted; empty when it does not exist or cannot be read.
pub(crate) fn dir_names(path: &Path) -> Vec<String> {
    read_dir_names(path).unwrap_or_default()
}

/// Names of the entries of a directory, sorted; empty when it does not exist, the error when
/// it exists and cannot be read.
pub(super) fn read_dir_names(path: &Path) -> Result<Vec<String>, Error> {
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

/// Whether `s` is a PCI address as the kernel names PCI functions in sysfs: `dddd:bb:dd.f`,
/// domain, bus, device and function in lowercase hex (`0000:0f:00.0`: the kernel formats them
/// with `%04x:%02x:%02x.%d`). An uppercase spelling (CUDA's `0000:0F:00.0`) is no sysfs name:
/// [`normalize_bus_id`] turns one into this form.
pub fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.char_indices()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// A PCI bus id in sysfs spelling (`0000:0f:00.0`) from CUDA's (`0000:0F:00.0`), nvidia-smi's
/// (`00000000:0F:00.0`) or a short one (`0f:00.0`, domain 0; `0f:00`, function 0). `None`
/// when it is none of these.
pub fn normalize_bus_id(text: &str) -> Option<String> {
    let t = text.trim().to_ascii_lowercase();
    let (rest, func) = match t.rsplit_once('.') {
        Some((r, f)) => (r.to_string(), u8::from_str_radix(f, 16).ok()?),
        None => (t.clone(), 0),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let (dom, bus, dev) = match parts.as_slice() {
        [d, b, v] => (u32::from_str_radix(d, 16).ok()?, *b, *v),
        [b, v] => (0, *b, *v),
        _ => return None,
    };
    let hex = |s: &str, max: u32| {
        (!s.is_empty() && s.len() <= 2)
            .then(|| u32::from_str_radix(s, 16).ok())
            .flatten()
            .filter(|v| *v <= max)
    };
    let bus = hex(bus, 0xff)?;
    let dev = hex(dev, 0x1f)?;
    if dom > 0xffff || func > 7 {
        return None;
    }
    Some(format!("{dom:04x}:{bus:02x}:{dev:02x}.{func:x}"))
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

/// The MTU of a network interface of this namespace.
pub fn interface_mtu(roots: &SysRoots, netdev: &str) -> Option<u32> {
    read_attr(&roots.net_class().join(netdev).join("mtu")).and_then(|s| s.parse().ok())
}

/// This host's (in a pod: the pod's) name, from `<proc>/sys/kernel/hostname`; `None` when it
/// cannot be read or is empty.
pub fn host_name(roots: &SysRoots) -> Option<String> {
    read_attr(&roots.proc.join("sys/kernel/hostname")).filter(|s| !s.is_empty())
}
