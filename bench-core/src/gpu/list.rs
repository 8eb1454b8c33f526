//! What `rdmabw gpus` lists: every GPU, as CUDA and sysfs show it, with its nearest rails.

use serde::{Deserialize, Serialize};

use super::{Cuda, GpuError};
use crate::sysfs::{self, SysRoots};
use crate::topology::{self, PciLocation, Proximity};

/// An RDMA device near a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NearRail {
    /// RDMA device.
    pub device: String,
    /// Its netdevs in this network namespace (`rdma3`), when known.
    pub netdevs: Vec<String>,
    /// How near.
    pub proximity: Proximity,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuRow {
    /// CUDA index (`--use_cuda N`); `None` when CUDA does not see it (another pod's GPU, or no
    /// CUDA driver here).
    pub index: Option<u32>,
    /// Name from CUDA.
    pub name: Option<String>,
    /// PCI bus id.
    pub pci_bus_id: String,
    /// NUMA node from sysfs.
    pub numa_node: Option<u32>,
    /// Whether CUDA can export its memory as a dma-buf; `None` without CUDA.
    pub dmabuf_supported: Option<bool>,
    /// Whether CUDA says it supports GPUDirect RDMA; `None` without CUDA.
    pub gpudirect_rdma_supported: Option<bool>,
    /// Device memory in bytes; `None` without CUDA.
    pub total_mem_bytes: Option<u64>,
    /// Compute capability; `None` without CUDA.
    pub compute_capability: Option<String>,
    /// The RDMA devices nearest it (all those of the nearest proximity).
    pub nearest_rails: Vec<NearRail>,
}

/// What `rdmabw gpus --json` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpusReport {
    /// The CUDA version the driver supports (`13.0`); `None` without CUDA.
    pub cuda_driver: Option<String>,
    /// Why CUDA could not be used, when it could not.
    pub cuda_error: Option<String>,
    /// GPUs: CUDA's in CUDA order, then those only sysfs shows, in PCI order.
    pub gpus: Vec<GpuRow>,
}

fn near_rails(roots: &SysRoots, inv: Option<&sysfs::Inventory>, bus_id: &str) -> Vec<NearRail> {
    let Ok(all) = topology::rdma_devices_near(roots, bus_id) else {
        return Vec::new();
    };
    let Some(best) = all.first().map(|(_, d)| d.proximity) else {
        return Vec::new();
    };
    all.into_iter()
        .filter(|(_, d)| d.proximity == best)
        .map(|(device, d)| NearRail {
            netdevs: inv
                .map(|i| {
                    i.netdevs
                        .iter()
                        .filter(|b| b.device == device)
                        .map(|b| b.netdev.clone())
                        .collect()
                })
                .unwrap_or_default(),
            device,
            proximity: d.proximity,
        })
        .collect()
}

/// Lists GPUs: through CUDA when it loads (the error is returned alongside otherwise), joined
/// with sysfs under `roots` for NUMA nodes, GPUs CUDA does not see, and the nearest rails.
pub fn gpus_report(roots: &SysRoots) -> (GpusReport, Option<GpuError>) {
    let inv = sysfs::discover(roots).ok();
    let sys = topology::sysfs_gpus(roots);
    let numa = |bus: &str| {
        PciLocation::of_function(roots, bus)
            .ok()
            .and_then(|l| l.numa_node)
    };
    let mut rows = Vec::new();
    let mut err = None;
    let mut driver = None;
    match Cuda::load().and_then(|c| c.gpus().map(|g| (c, g))) {
        Ok((cuda, gpus)) => {
            let (ma, mi) = cuda.driver_version();
            driver = Some(format!("{ma}.{mi}"));
            for g in gpus {
                rows.push(GpuRow {
                    index: Some(g.index),
                    name: Some(g.name.clone()),
                    numa_node: numa(&g.pci_bus_id),
                    dmabuf_supported: Some(g.dmabuf_supported),
                    gpudirect_rdma_supported: Some(g.gpudirect_rdma_supported),
                    total_mem_bytes: Some(g.total_mem_bytes),
                    compute_capability: Some(g.compute_capability.clone()),
                    nearest_rails: near_rails(roots, inv.as_ref(), &g.pci_bus_id),
                    pci_bus_id: g.pci_bus_id,
                });
            }
        }
        Err(e) => err = Some(e),
    }
    for s in sys {
        if rows.iter().any(|r| r.pci_bus_id == s.address()) {
            continue;
        }
        rows.push(GpuRow {
            index: None,
            name: None,
            pci_bus_id: s.address().to_string(),
            numa_node: s.location.numa_node,
            dmabuf_supported: None,
            gpudirect_rdma_supported: None,
            total_mem_bytes: None,
            compute_capability: None,
            nearest_rails: near_rails(roots, inv.as_ref(), s.address()),
        });
    }
    (
        GpusReport {
            cuda_driver: driver,
            cuda_error: err.as_ref().map(ToString::to_string),
            gpus: rows,
        },
        err,
    )
}
