//! Which GPUs of this container have a rail of this pod near enough for GPUDirect RDMA
//! ([`RailsReport::gpus`](wire::rails::RailsReport)), and what to say about those that do not.
//!
//! A GPU is aligned when a usable rail's NIC is under the same PCIe switch or root port: the
//! rail's `gpus` column lists it ([`crate::topology::gpus_near`] with
//! [`Proximity::SameRootPort`](wire::topology::Proximity)), the distance up to which NCCL uses
//! GPUDirect RDMA by default. A rail that is listed but not usable here (its
//! `/dev/infiniband/uverbsN` was not given to the container, its port is down) does not count:
//! NCCL opens only the devices it can. Field report 001 is the case this catches: the kubelet
//! took a pod's GPUs and its rail PFs from two device plugins without matching them, so two
//! of each job's four GPUs had no PF on their PCIe root and NCCL sent through 3 or 4 of the
//! job's 8 PFs (56 to 59 GB/s instead of 96).

use wire::rails::{GpuRails, RailRow};

use crate::sysfs::SysRoots;
use crate::topology::container_gpus;

pub use wire::rails::GPU_RAIL_FIX;

/// The GPUs of this container with the usable rails of `rails` near each.
pub fn alignment(roots: &SysRoots, rails: &[RailRow]) -> Vec<GpuRails> {
    container_gpus(roots)
        .into_iter()
        .map(|c| GpuRails {
            rails: rails
                .iter()
                .filter(|r| r.usable && r.gpus.iter().any(|g| g == c.gpu.address()))
                .map(|r| r.iface.clone())
                .collect(),
            pci: c.gpu.address().to_string(),
            node_index: c.gpu.index,
            device_file: c.device_file,
            pcie_root: c.gpu.location.host_bridge.clone(),
            numa_node: c.gpu.location.numa_node.and_then(|n| i32::try_from(n).ok()),
        })
        .collect()
}

/// `GPU 0000:8c:00.0 (nvidia4, PCIe root pci0000:80, NUMA 7)`: how a GPU is named in messages.
pub fn gpu_name(g: &GpuRails) -> String {
    g.name()
}

/// One line for a GPU with no rail near it: what is wrong, and [`GPU_RAIL_FIX`].
pub fn unaligned_line(g: &GpuRails) -> String {
    g.unaligned_line()
}
