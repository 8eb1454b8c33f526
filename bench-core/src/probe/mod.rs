//! `rdmabw probe`: can an RDMA test run in this pod, and if not, why not.
//!
//! Each check ends PASS, WARN or FAIL with one line of explanation and the fix; WARN also
//! stands for "does not apply here" (a cluster DNS check outside Kubernetes, a GPU check on a
//! node without GPUs), said so in the detail. The checks, in order:
//!
//! | name | what it reads | FAIL when |
//! | --- | --- | --- |
//! | `rails` | [`crate::rails`] | no rail (`rdmaN`, `netN` with an RDMA device) in this namespace |
//! | `uverbs-files` | `<dev>/infiniband/uverbs*`, `<sys>/class/infiniband_verbs` | no uverbs file although sysfs shows devices |
//! | `uverbs-open` | `open(O_RDWR)` of each uverbs file | an open fails: EPERM although the file is there is the container's device cgroup |
//! | `memlock` | `<proc>/self/limits`, `CapEff` of `<proc>/self/status` (bit 14, `CAP_IPC_LOCK`) | the limit is below 64 MiB without IPC_LOCK |
//! | `memory-registration` | a real 64 KiB registration on each rail's device | it fails |
//! | `rdma-netns-mode` | `<sys>/module/ib_core/parameters/netns_mode` | exclusive, with IPvlan children whose master device is not visible |
//! | `rail-gids` | [`crate::rails`] | a rail has no usable GID here |
//! | `host-network` | PF netdevs and bridges in `<sys>/class/net`, `<proc>/sys/kernel/hostname` | never; WARN for a hostNetwork pod (the node's host name and ports) |
//! | `cluster-dns` | `<etc>/resolv.conf`, a lookup of `kubernetes.default.svc.<domain>` | in Kubernetes, cluster names do not resolve |
//! | `dev-shm` | the `/dev/shm` line of `<proc>/self/mountinfo` (`size=`), else half of `MemTotal` | 64 MiB or less (NCCL's segments alone are larger) |
//! | `gpu-isolation` | `<dev>/nvidia*` opened, GPUs in sysfs, `NVIDIA_VISIBLE_DEVICES`, `CapEff` | fewer GPUs open than given; WARN when a privileged pod can open every GPU of the node |
//! | `gpu-rail-alignment` | [`crate::rails`]' `gpus` (each `<dev>/nvidiaN` as a sysfs GPU, the usable rails under its PCIe switch or root port) | a GPU of this container has no usable rail under its PCIe switch or root port: NCCL will not use GPUDirect RDMA for it; WARN (not applicable) without GPUs or PCI rails |
//!
//! One file a family: `rdma.rs` (the first six), `system.rs` (`memlock`, `dev-shm`), `pod.rs`
//! (`host-network`, `cluster-dns`, `gpu-isolation`, `gpu-rail-alignment`). Everything outside the file system
//! (environment variables, `open`, DNS, memory registration, port queries) goes through
//! [`ProbeSystem`] (`world.rs`), so that the checks run on fixture trees; [`LiveSystem`] is the
//! real one.

mod pod;
mod rdma;
mod system;
mod verdict;
mod world;

use wire::probe::{ProbeReport, Status, Summary};
use wire::rails::RailsReport;
use wire::REPORT_SCHEMA_VERSION;

use crate::rails::{self, netif};
use crate::sysfs;

use pod::{
    check_cluster_dns, check_gpu_rail_alignment, check_gpus, check_host_network,
    node_namespace_evidence,
};
use rdma::{
    check_netns_mode, check_rail_gids, check_rails, check_registration, check_uverbs_files,
    check_uverbs_open, uverbs_files,
};
use system::{check_dev_shm, check_memlock};

pub use rdma::{attachment_name, PROBE_MR_BYTES};
pub use system::{
    cap_eff, human, is_full_capability_set, shm_info, Memlock, ShmInfo, CAP_IPC_LOCK,
};
pub use world::{LiveSystem, ProbeRoots, ProbeSystem};

/// Runs every check.
pub fn probe(roots: &ProbeRoots, sys: &dyn ProbeSystem) -> ProbeReport {
    let s = &roots.sys;
    let inv = sysfs::discover(s).unwrap_or(sysfs::Inventory {
        devices: Vec::new(),
        netdevs: Vec::new(),
    });
    let rails = match rails::discover(s, sys) {
        Ok(r) => r,
        Err(_) => RailsReport {
            schema_version: REPORT_SCHEMA_VERSION,
            rdmabw_version: env!("CARGO_PKG_VERSION").to_string(),
            capabilities: wire::rails::Capability::OURS.to_vec(),
            host: String::new(),
            rails: Vec::new(),
            not_rails: Vec::new(),
            // The GPUs, with no rail near them: the alignment check then says it cannot tell.
            gpus: rails::gpus::alignment(s, &[]),
        },
    };
    let host = sysfs::read_attr(&s.proc.join("sys/kernel/hostname"))
        .unwrap_or_else(|| "unknown".to_string());
    let files = uverbs_files(s);
    let in_k8s = sys
        .env("KUBERNETES_SERVICE_HOST")
        .is_some_and(|v| !v.is_empty());
    let ifs = netif::interfaces(s);
    let evidence = node_namespace_evidence(&ifs);

    let mut checks = vec![
        check_rails(&rails, inv.devices.len()),
        check_uverbs_files(s, &inv, &rails, &files),
    ];
    let (open_check, opened) = check_uverbs_open(s, sys, &files);
    checks.push(open_check);
    checks.push(check_memlock(s));
    checks.push(check_registration(sys, &inv, &rails, &opened));
    checks.push(check_netns_mode(s, &inv, &rails));
    checks.push(check_rail_gids(&rails));
    checks.push(check_host_network(s, in_k8s, &evidence, &host));
    checks.push(check_cluster_dns(roots, sys, in_k8s, !evidence.is_empty()));
    checks.push(check_dev_shm(s));
    checks.push(check_gpus(s, sys));
    checks.push(check_gpu_rail_alignment(&rails));

    let mut summary = Summary::default();
    for c in &checks {
        match c.status {
            Status::Pass => summary.pass += 1,
            Status::Warn => summary.warn += 1,
            Status::Fail => summary.fail += 1,
        }
    }
    ProbeReport {
        schema_version: REPORT_SCHEMA_VERSION,
        rdmabw_version: env!("CARGO_PKG_VERSION").to_string(),
        host,
        checks,
        summary,
    }
}

#[cfg(test)]
mod tests;
