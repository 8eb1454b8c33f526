//! What `rdmabw gpus` lists ([`GpusReport`]): every GPU, as CUDA and sysfs show it, with its
//! nearest rails.

use wire::gpu::{GpuRow, GpusReport, NearRail};

use super::{Cuda, GpuError};
use crate::sysfs::{self, SysRoots};
use crate::topology::{self, PciLocation};

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
    let inv = crate::rails::inventory(roots).ok();
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
