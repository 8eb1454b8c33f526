//! PCIe distance between RDMA NICs and GPUs, read from the sysfs PCI tree, and the choice of
//! the GPU nearest a rail.
//!
//! **This is the one place for NIC-to-GPU distance in railbench.** `--use_cuda auto` (the GPU
//! for a test's buffer), `rdmabw gpus` (each GPU's nearest rails) and `rdmabw rails` (a rail's
//! `gpus` column: [`gpus_near`] with [`Proximity::SameRootPort`]) all call it, so that they
//! never disagree about which GPU belongs to which rail. The GPU-to-rail alignment of a pod
//! (`rdmabw rails`' `gpus`, the probe's `gpu-rail-alignment`) is read from that `gpus`
//! column, for the GPUs of the container ([`container_gpus`]). Every reader takes [`SysRoots`], so it
//! runs on fixture trees (`tests/fixtures/gpu-node`: an 8-GPU, 16-rail node).
//!
//! How the distance is read: `<sys>/bus/pci/devices/<address>` (for a GPU) and
//! `<sys>/class/infiniband/<dev>/device` (for a NIC) are links into
//! `<sys>/devices/pci<domain>:<bus>/<root port>/<bridge>/.../<function>`; that path names the
//! host bridge and every PCI bridge from the root port down to the function. Two functions are
//! then, from nearest to farthest ([`Proximity`], ordered):
//!
//! | proximity | nvidia-smi topo | the path between them |
//! | --- | --- | --- |
//! | [`Proximity::SameSwitch`] | PIX | crosses one PCIe switch (its upstream and two downstream ports) or none (functions of one device) |
//! | [`Proximity::SameRootPort`] | PXB | crosses several switches below one root port |
//! | [`Proximity::SameHostBridge`] | PHB | crosses the host bridge between two root ports |
//! | [`Proximity::SameNuma`] | NODE | crosses between host bridges of one NUMA node |
//! | [`Proximity::Remote`] | SYS | crosses between NUMA nodes (or a NUMA node is unknown) |
//!
//! Within one proximity, fewer bridges crossed ([`Distance::bridges`]) is nearer, and then the
//! lower GPU index wins, so the choice is stable. NCCL uses GPUDirect RDMA only up to PXB by
//! default (`NCCL_NET_GDR_LEVEL`), which is why the choice matters: a GPU across the host
//! bridge from its rail's NIC sends through host memory.
//!
//! GPUs in sysfs are NVIDIA functions (vendor `0x10de`) of class 3D or VGA controller
//! (`0x0302xx`, `0x0300xx`); NVSwitches (`0x0680xx`) and audio functions are not GPUs. Their
//! index is their position in PCI address order, which is nvidia-smi's order (and CUDA's with
//! `CUDA_DEVICE_ORDER=PCI_BUS_ID`). Inside a container sysfs shows every GPU of the node while
//! CUDA shows only the pod's: callers restrict the choice to the GPUs CUDA sees with the
//! `allowed` argument of [`nearest_gpu`].

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wire::topology::{Distance, Proximity};

pub use crate::sysfs::normalize_bus_id;
use crate::sysfs::{is_pci_address, read_attr, SysRoots};

/// Why a topology question could not be answered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// The RDMA device has no PCI function (rxe, siw): it is near no GPU.
    #[error("RDMA device {device} is not a PCI function (a software device such as rxe): no GPU is near it; name the GPU with --use_cuda N or --cuda-bus-id")]
    NotPci {
        /// Device name.
        device: String,
    },
    /// There is no such RDMA device.
    #[error("no RDMA device {device} (devices here: {}); see `rdmabw devices`", if .available.is_empty() { "none".to_string() } else { .available.join(", ") })]
    NoDevice {
        /// Device name.
        device: String,
        /// The devices there are.
        available: Vec<String>,
    },
    /// A sysfs link could not be resolved.
    #[error("cannot resolve {}: {source}", .path.display())]
    Unreadable {
        /// The link.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A PCI bus id that cannot be parsed.
    #[error("{text:?} is not a PCI bus id: give it as DOMAIN:BUS:DEVICE.FUNCTION, e.g. 0000:0f:00.0 (nvidia-smi's 00000000:0F:00.0 works too)")]
    BadBusId {
        /// What was given.
        text: String,
    },
    /// No GPU to choose from.
    #[error("no GPU to choose from: {why}")]
    NoGpu {
        /// What was looked at.
        why: String,
    },
}

/// Where a PCI function sits in the PCI tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciLocation {
    /// Its address, `0000:0c:00.0`.
    pub address: String,
    /// The host bridge it is under, `pci0000:00`; `None` when the path names none.
    pub host_bridge: Option<String>,
    /// The bridges from the root port down to its parent, root port first.
    pub bridges: Vec<String>,
    /// NUMA node; `None` when unknown (`-1`, or unreadable).
    pub numa_node: Option<u32>,
}

impl PciLocation {
    /// Reads the location of PCI function `address` (any spelling [`normalize_bus_id`]
    /// takes) from `<sys>/bus/pci/devices/<address>`.
    pub fn of_function(roots: &SysRoots, address: &str) -> Result<PciLocation, TopologyError> {
        let addr = normalize_bus_id(address).ok_or_else(|| TopologyError::BadBusId {
            text: address.to_string(),
        })?;
        Self::from_link(roots, &roots.sys.join("bus/pci/devices").join(&addr))
    }

    /// Reads the location of RDMA device `device`'s PCI function from
    /// `<sys>/class/infiniband/<device>/device`.
    pub fn of_rdma_device(roots: &SysRoots, device: &str) -> Result<PciLocation, TopologyError> {
        let link = roots
            .sys
            .join("class/infiniband")
            .join(device)
            .join("device");
        let class = roots.sys.join("class/infiniband");
        if !class.join(device).exists() {
            let mut available: Vec<String> = fs::read_dir(&class)
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            available.sort();
            return Err(TopologyError::NoDevice {
                device: device.to_string(),
                available,
            });
        }
        if fs::symlink_metadata(&link).is_err() {
            return Err(TopologyError::NotPci {
                device: device.to_string(),
            });
        }
        let loc = Self::from_link(roots, &link)?;
        if is_pci_address(&loc.address) {
            Ok(loc)
        } else {
            Err(TopologyError::NotPci {
                device: device.to_string(),
            })
        }
    }

    fn from_link(roots: &SysRoots, link: &Path) -> Result<PciLocation, TopologyError> {
        let unreadable = |source| TopologyError::Unreadable {
            path: link.to_path_buf(),
            source,
        };
        let real = fs::canonicalize(link).map_err(unreadable)?;
        let devices = fs::canonicalize(roots.sys.join("devices"))
            .unwrap_or_else(|_| roots.sys.join("devices"));
        let rel = real.strip_prefix(&devices).unwrap_or(&real);
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let host_bridge = parts.iter().find(|p| p.starts_with("pci")).cloned();
        let mut chain: Vec<String> = parts.into_iter().filter(|p| is_pci_address(p)).collect();
        let address = match chain.pop() {
            Some(a) => a,
            None => real
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        let numa_node = read_attr(&real.join("numa_node")).and_then(|s| s.parse::<u32>().ok());
        Ok(PciLocation {
            address,
            host_bridge,
            bridges: chain,
            numa_node,
        })
    }

    /// The distance to `other`.
    pub fn distance(&self, other: &PciLocation) -> Distance {
        distance(self, other)
    }
}

/// The distance between two functions (symmetric).
pub fn distance(a: &PciLocation, b: &PciLocation) -> Distance {
    let common = a
        .bridges
        .iter()
        .zip(&b.bridges)
        .take_while(|(x, y)| x == y)
        .count();
    let below = (a.bridges.len() - common + b.bridges.len() - common) as u32;
    let same_hb = a.host_bridge.is_some() && a.host_bridge == b.host_bridge;
    if common > 0 && same_hb {
        // The nearest common bridge is on the path too.
        let bridges = below + 1;
        let same_parent = common == a.bridges.len() && common == b.bridges.len();
        let proximity = if same_parent || (common >= 2 && bridges <= 3) {
            Proximity::SameSwitch
        } else {
            Proximity::SameRootPort
        };
        return Distance { proximity, bridges };
    }
    let bridges = (a.bridges.len() + b.bridges.len()) as u32 + 1;
    let proximity = if same_hb {
        Proximity::SameHostBridge
    } else {
        match (a.numa_node, b.numa_node) {
            (Some(x), Some(y)) if x == y => Proximity::SameNuma,
            _ => Proximity::Remote,
        }
    };
    Distance { proximity, bridges }
}

/// A GPU as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysGpu {
    /// Position in PCI address order among the GPUs (nvidia-smi's index).
    pub index: usize,
    /// Where it sits.
    pub location: PciLocation,
    /// PCI device id, e.g. `0x2335`.
    pub device_id: Option<String>,
    /// Bound driver, e.g. `nvidia`.
    pub driver: Option<String>,
}

impl SysGpu {
    /// PCI address, `0000:0f:00.0`.
    pub fn address(&self) -> &str {
        &self.location.address
    }
}

/// Every NVIDIA GPU under `<sys>/bus/pci/devices`, in PCI address order; empty when none (or
/// when sysfs cannot be read).
pub fn sysfs_gpus(roots: &SysRoots) -> Vec<SysGpu> {
    let dir = roots.sys.join("bus/pci/devices");
    let mut addrs: Vec<String> = match fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|a| is_pci_address(a))
            .collect(),
        Err(_) => Vec::new(),
    };
    addrs.sort();
    let mut out = Vec::new();
    for addr in addrs {
        let d = dir.join(&addr);
        let vendor = read_attr(&d.join("vendor"));
        let class = read_attr(&d.join("class")).unwrap_or_default();
        let is_gpu = vendor.as_deref() == Some("0x10de")
            && (class.starts_with("0x0302") || class.starts_with("0x0300"));
        if !is_gpu {
            continue;
        }
        let Ok(location) = PciLocation::from_link(roots, &d) else {
            continue;
        };
        out.push(SysGpu {
            index: out.len(),
            location,
            device_id: read_attr(&d.join("device")),
            driver: fs::read_link(d.join("driver"))
                .ok()
                .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned())),
        });
    }
    out
}

/// The `/dev/nvidiaN` files under `<dev>` (`nvidia0`, `nvidia1`, ...; not `nvidiactl` or
/// `nvidia-uvm`), in number order: the GPUs given to this container.
pub fn nvidia_device_files(roots: &SysRoots) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(&roots.dev)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| nvidia_minor(n).is_some())
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|n| nvidia_minor(n));
    v
}

/// N of a `nvidiaN` file name.
fn nvidia_minor(file: &str) -> Option<u32> {
    file.strip_prefix("nvidia")
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse().ok())
}

/// The `Device Minor:` line of a `<proc>/driver/nvidia/gpus/<address>/information` file.
pub fn parse_device_minor(information: &str) -> Option<u32> {
    information.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Device Minor:")
            .and_then(|v| v.trim().parse().ok())
    })
}

/// A GPU given to this container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerGpu {
    /// The GPU as sysfs shows it.
    pub gpu: SysGpu,
    /// Its `/dev` file, `nvidia4`.
    pub device_file: String,
}

/// The GPUs of this container: one per `/dev/nvidiaN` file here ([`nvidia_device_files`];
/// a container sees every GPU of the node in sysfs, but only its own device files), in PCI
/// address order. File N is the GPU whose `<proc>/driver/nvidia/gpus/<address>/information`
/// says `Device Minor: N`; where that file cannot be read (no driver, or a runtime that does
/// not mount it), the N-th GPU in PCI address order, the order in which the driver numbers
/// them. A file that matches no GPU in sysfs is left out.
pub fn container_gpus(roots: &SysRoots) -> Vec<ContainerGpu> {
    let all = sysfs_gpus(roots);
    let info = roots.proc.join("driver/nvidia/gpus");
    let minors: Vec<Option<u32>> = all
        .iter()
        .map(|g| {
            fs::read_to_string(info.join(g.address()).join("information"))
                .ok()
                .and_then(|t| parse_device_minor(&t))
        })
        .collect();
    let by_proc = minors.iter().any(Option::is_some);
    let mut out: Vec<ContainerGpu> = nvidia_device_files(roots)
        .into_iter()
        .filter_map(|file| {
            let n = nvidia_minor(&file)?;
            let i = if by_proc {
                minors.iter().position(|m| *m == Some(n))?
            } else {
                usize::try_from(n).ok().filter(|i| *i < all.len())?
            };
            Some(ContainerGpu {
                gpu: all[i].clone(),
                device_file: file,
            })
        })
        .collect();
    out.sort_by_key(|g| g.gpu.index);
    out
}

/// The GPUs at `within` or nearer to RDMA device `device`, nearest first (ties in PCI order).
/// For `rdmabw rails`' `gpus` column: `gpus_near(roots, dev, Proximity::SameRootPort)` gives
/// the GPUs under the same PCIe switch or root port as the NIC. An rxe device (no PCI
/// function) gives [`TopologyError::NotPci`].
pub fn gpus_near(
    roots: &SysRoots,
    device: &str,
    within: Proximity,
) -> Result<Vec<(SysGpu, Distance)>, TopologyError> {
    let nic = PciLocation::of_rdma_device(roots, device)?;
    let mut v: Vec<(SysGpu, Distance)> = sysfs_gpus(roots)
        .into_iter()
        .map(|g| {
            let d = distance(&nic, &g.location);
            (g, d)
        })
        .filter(|(_, d)| d.proximity <= within)
        .collect();
    v.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.index.cmp(&b.0.index)));
    Ok(v)
}

/// The GPU chosen for a NIC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuChoice {
    /// The NIC's PCI address.
    pub nic: String,
    /// The GPU's PCI address.
    pub gpu: String,
    /// Its sysfs index (PCI order).
    pub sysfs_index: usize,
    /// How near.
    pub distance: Distance,
}

/// The nearest of `gpus` to `nic` (ties: the first in the slice). `None` when `gpus` is empty.
pub fn nearest<'a>(nic: &PciLocation, gpus: &'a [SysGpu]) -> Option<(&'a SysGpu, Distance)> {
    gpus.iter()
        .map(|g| (g, distance(nic, &g.location)))
        .min_by(|a, b| a.1.cmp(&b.1).then(a.0.index.cmp(&b.0.index)))
}

/// The GPU nearest RDMA device `device`: same PCIe switch, else root port, else host bridge,
/// else NUMA node, else any. `allowed`: PCI addresses of the GPUs that may be chosen (those
/// CUDA sees in this container), any spelling; `None` allows every GPU sysfs shows.
pub fn nearest_gpu(
    roots: &SysRoots,
    device: &str,
    allowed: Option<&[String]>,
) -> Result<GpuChoice, TopologyError> {
    let nic = PciLocation::of_rdma_device(roots, device)?;
    let all = sysfs_gpus(roots);
    let seen = all.len();
    let gpus: Vec<SysGpu> = match allowed {
        None => all,
        Some(list) => {
            let list: Vec<String> = list.iter().filter_map(|a| normalize_bus_id(a)).collect();
            all.into_iter()
                .filter(|g| list.iter().any(|a| a == g.address()))
                .collect()
        }
    };
    let (g, d) = nearest(&nic, &gpus).ok_or_else(|| TopologyError::NoGpu {
        why: match allowed {
            None => format!(
                "{} lists no NVIDIA GPU",
                roots.sys.join("bus/pci/devices").display()
            ),
            Some(list) => format!(
                "none of the {} GPU(s) in sysfs is among those CUDA sees ({})",
                seen,
                if list.is_empty() {
                    "none".to_string()
                } else {
                    list.join(", ")
                }
            ),
        },
    })?;
    Ok(GpuChoice {
        nic: nic.address.clone(),
        gpu: g.address().to_string(),
        sysfs_index: g.index,
        distance: d,
    })
}

/// Every RDMA device backed by a PCI function, with its distance to the PCI function
/// `address` (a GPU), nearest first (ties in name order). Software devices (rxe) are left out.
pub fn rdma_devices_near(
    roots: &SysRoots,
    address: &str,
) -> Result<Vec<(String, Distance)>, TopologyError> {
    let gpu = PciLocation::of_function(roots, address)?;
    let mut names: Vec<String> = match fs::read_dir(roots.sys.join("class/infiniband")) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort_by_key(|a| natural_key(a));
    let mut v: Vec<(String, Distance)> = names
        .into_iter()
        .filter_map(|n| {
            let loc = PciLocation::of_rdma_device(roots, &n).ok()?;
            Some((n, distance(&gpu, &loc)))
        })
        .collect();
    v.sort_by_key(|(_, d)| *d);
    Ok(v)
}

/// `mlx5_2` before `mlx5_10`.
fn natural_key(s: &str) -> (String, u64) {
    let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = s.split_at(s.len() - digits);
    (head.to_string(), tail.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(hb: &str, bridges: &[&str], addr: &str, numa: Option<u32>) -> PciLocation {
        PciLocation {
            address: addr.into(),
            host_bridge: Some(hb.into()),
            bridges: bridges.iter().map(|s| s.to_string()).collect(),
            numa_node: numa,
        }
    }

    #[test]
    fn bus_ids_in_every_spelling() {
        assert_eq!(
            normalize_bus_id("0000:0F:00.0").as_deref(),
            Some("0000:0f:00.0")
        );
        assert_eq!(
            normalize_bus_id("00000000:0F:00.0").as_deref(),
            Some("0000:0f:00.0")
        );
        assert_eq!(normalize_bus_id("0f:00.1").as_deref(), Some("0000:0f:00.1"));
        assert_eq!(normalize_bus_id("0f:00").as_deref(), Some("0000:0f:00.0"));
        assert_eq!(
            normalize_bus_id(" 0001:c3:1f.7 ").as_deref(),
            Some("0001:c3:1f.7")
        );
        assert_eq!(normalize_bus_id("0000:0f:20.0"), None);
        assert_eq!(normalize_bus_id("0000:0f:00.8"), None);
        assert_eq!(normalize_bus_id("gpu0"), None);
        assert_eq!(normalize_bus_id(""), None);
        assert_eq!(normalize_bus_id("0000:100:00.0"), None);
    }

    #[test]
    fn device_minor_of_the_drivers_information_file() {
        let info = "Model: \t\t NVIDIA A100-SXM4-40GB\nIRQ:   \t\t 0\n\
                    Bus Location: \t 0000:8c:00.0\nDevice Minor: \t 4\nGPU Excluded:\t No\n";
        assert_eq!(parse_device_minor(info), Some(4));
        assert_eq!(parse_device_minor("Model: x\n"), None);
        assert_eq!(nvidia_minor("nvidia12"), Some(12));
        assert_eq!(nvidia_minor("nvidiactl"), None);
        assert_eq!(nvidia_minor("nvidia-uvm"), None);
        assert_eq!(nvidia_minor("nvidia"), None);
    }

    #[test]
    fn tiers() {
        let rp = "0000:00:01.1";
        // One switch: upstream port u, downstream ports a and b.
        let g = loc("pci0000:00", &[rp, "u", "a"], "g", Some(0));
        let n = loc("pci0000:00", &[rp, "u", "b"], "n", Some(0));
        assert_eq!(
            distance(&g, &n),
            Distance {
                proximity: Proximity::SameSwitch,
                bridges: 3
            }
        );
        // Two functions of one device.
        let n2 = loc("pci0000:00", &[rp, "u", "b"], "n2", Some(0));
        assert_eq!(distance(&n, &n2).proximity, Proximity::SameSwitch);
        // Two switch levels.
        let far = loc("pci0000:00", &[rp, "u", "c", "u2", "d"], "f", Some(0));
        assert_eq!(
            distance(&g, &far),
            Distance {
                proximity: Proximity::SameRootPort,
                bridges: 5
            }
        );
        // Another root port of the same host bridge.
        let other_rp = loc("pci0000:00", &["0000:00:03.1"], "o", Some(0));
        assert_eq!(
            distance(&g, &other_rp),
            Distance {
                proximity: Proximity::SameHostBridge,
                bridges: 5
            }
        );
        // Another host bridge, same NUMA node; then another node; then unknown.
        let hb = loc("pci0000:40", &["0000:40:01.1"], "h", Some(0));
        assert_eq!(distance(&g, &hb).proximity, Proximity::SameNuma);
        let remote = loc("pci0000:80", &["0000:80:01.1"], "r", Some(1));
        assert_eq!(distance(&g, &remote).proximity, Proximity::Remote);
        let unknown = loc("pci0000:40", &["0000:40:01.1"], "x", None);
        assert_eq!(distance(&g, &unknown).proximity, Proximity::Remote);
        // Symmetric.
        assert_eq!(distance(&far, &g), distance(&g, &far));
        assert!(Proximity::SameSwitch < Proximity::SameRootPort);
        assert!(Proximity::SameNuma < Proximity::Remote);
    }
}
