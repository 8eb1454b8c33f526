//! The checks of how the pod is set up: `host-network` (does it share the node's network
//! namespace), `cluster-dns` (do cluster names resolve), `gpu-isolation` (can it open only
//! the GPUs it was given) and `gpu-rail-alignment` (has each of its GPUs a rail near enough
//! for GPUDirect RDMA).

use std::fs;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use wire::probe::{Check, Status};
use wire::rails::RailsReport;

use super::system::{cap_eff, is_full_capability_set};
use super::verdict::{check, list};
use super::world::{ProbeRoots, ProbeSystem};
use crate::rails::gpus::{gpu_name, GPU_RAIL_FIX};
use crate::rails::netif;
use crate::sysfs::SysRoots;
use crate::topology;

/// Whether this is the node's own network namespace, and what shows it.
pub(super) fn node_namespace_evidence(ifs: &[netif::NetIf]) -> Vec<String> {
    let mut v: Vec<String> = ifs
        .iter()
        .filter(|n| n.is_pf())
        .map(|n| format!("PF {}", n.name))
        .collect();
    v.extend(
        ifs.iter()
            .filter(|n| n.bridge)
            .map(|n| format!("bridge {}", n.name)),
    );
    v
}

pub(super) fn check_host_network(
    roots: &SysRoots,
    in_k8s: bool,
    evidence: &[String],
    host: &str,
) -> Check {
    match (evidence.is_empty(), in_k8s) {
        (false, true) => check(
            "host-network",
            Status::Warn,
            format!(
                "hostNetwork: this pod is in the node's network namespace ({}): it has the node's \
                 host name {host} and shares the node's ports",
                list(evidence, 3)
            ),
            Some(
                "pick ports no node service uses (the node's sshd has 22: run the workers' sshd \
                 on 2222 and tell mpirun); set dnsPolicy: ClusterFirstWithHostNet",
            ),
        ),
        (false, false) => check(
            "host-network",
            Status::Pass,
            format!(
                "the node's own network namespace ({}), not a Kubernetes pod; host name {host}",
                list(evidence, 3)
            ),
            None,
        ),
        (true, _) => check(
            "host-network",
            Status::Pass,
            format!(
                "own network namespace ({} interfaces, no PF or bridge of the node); host name {host}",
                netif::interfaces(roots).len()
            ),
            None,
        ),
    }
}

/// `nameserver` and `search` of a resolv.conf.
fn resolv_conf(etc: &Path) -> (Vec<String>, Vec<String>) {
    let text = fs::read_to_string(etc.join("resolv.conf")).unwrap_or_default();
    let mut ns = Vec::new();
    let mut search = Vec::new();
    for l in text.lines() {
        let mut f = l.split_whitespace();
        match f.next() {
            Some("nameserver") => ns.extend(f.next().map(str::to_string)),
            Some("search") => search = f.map(str::to_string).collect(),
            _ => {}
        }
    }
    (ns, search)
}

pub(super) fn check_cluster_dns(
    roots: &ProbeRoots,
    sys: &dyn ProbeSystem,
    in_k8s: bool,
    host_network: bool,
) -> Check {
    let (ns, search) = resolv_conf(&roots.etc);
    let conf = format!(
        "nameserver {}, search {}",
        if ns.is_empty() {
            "none".into()
        } else {
            ns.join(" ")
        },
        if search.is_empty() {
            "none".into()
        } else {
            search.join(" ")
        }
    );
    if !in_k8s {
        return check(
            "cluster-dns",
            Status::Warn,
            format!("not applicable: not in a Kubernetes pod (KUBERNETES_SERVICE_HOST is unset); {conf}"),
            None,
        );
    }
    let domain = search
        .iter()
        .find_map(|s| s.strip_prefix("svc."))
        .unwrap_or("cluster.local");
    let name = format!("kubernetes.default.svc.{domain}");
    match sys.lookup_host(&name, Duration::from_secs(2)) {
        Ok(a) if !a.is_empty() => check(
            "cluster-dns",
            Status::Pass,
            format!(
                "{name} resolves to {} ({conf})",
                a.iter()
                    .map(IpAddr::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            None,
        ),
        r => {
            let why = match r {
                Err(e) => e.to_string(),
                Ok(_) => "no address".into(),
            };
            check(
                "cluster-dns",
                Status::Fail,
                format!("{name} does not resolve ({why}; {conf}): cluster names (an MPI job's workers) will not either"),
                Some(if host_network {
                    "a hostNetwork pod gets the node's DNS settings: set dnsPolicy: ClusterFirstWithHostNet"
                } else {
                    "check the pod's dnsPolicy and the cluster DNS service (CoreDNS)"
                }),
            )
        }
    }
}

/// How many GPUs this container was given: a list in `NVIDIA_VISIBLE_DEVICES` (indexes, UUIDs
/// or CDI names); `all` means every GPU of the node; unset, `void` (CDI) or `none` say nothing.
pub(super) fn given_gpus(value: Option<&str>, node: usize) -> Option<usize> {
    let v = value?.trim();
    match v {
        "" | "void" => None,
        "none" => Some(0),
        "all" => Some(node),
        list => Some(list.split(',').filter(|s| !s.trim().is_empty()).count()),
    }
}

pub(super) fn check_gpus(roots: &SysRoots, sys: &dyn ProbeSystem) -> Check {
    let node = topology::sysfs_gpus(roots).len();
    let files = topology::nvidia_device_files(roots);
    let openable: Vec<String> = files
        .iter()
        .filter(|f| sys.open_rw(&roots.dev.join(f)).is_ok())
        .cloned()
        .collect();
    let nvd = sys.env("NVIDIA_VISIBLE_DEVICES");
    let given = given_gpus(nvd.as_deref(), node);
    let privileged = cap_eff(roots).is_some_and(|c| is_full_capability_set(roots, c));
    let open_n = openable.len();
    let given_text = match (&nvd, given) {
        (Some(v), Some(k)) => format!("given {k} (NVIDIA_VISIBLE_DEVICES={v})"),
        (Some(v), None) => {
            format!("which were given is not said (NVIDIA_VISIBLE_DEVICES={v}: CDI)")
        }
        (None, _) => "which were given is not said (NVIDIA_VISIBLE_DEVICES unset)".to_string(),
    };
    const RISK: &str =
        "CUDA uses every GPU it can open, so CUDA device 0 here is the node's first \
GPU whatever the device plugin gave: two jobs on one node run on the same GPUs";
    const FIX: &str = "drop privileged: true (it adds every device of the node); give the RDMA \
devices through a device plugin or CRI-O's io.kubernetes.cri-o.Devices annotation with \
privileged_without_host_devices = true; or set CUDA_VISIBLE_DEVICES to the given GPUs";
    if node == 0 && files.is_empty() {
        return check(
            "gpu-isolation",
            Status::Warn,
            "not applicable: no NVIDIA GPU in sysfs and no /dev/nvidiaN".into(),
            None,
        );
    }
    match given {
        Some(k) if open_n > k => check(
            "gpu-isolation",
            Status::Warn,
            format!(
                "can open {open_n} GPUs ({}) of the node's {node} but was {given_text}{}: {RISK}",
                list(&openable, 4),
                if privileged { ", privileged" } else { "" }
            ),
            Some(FIX),
        ),
        Some(k) if open_n < k => check(
            "gpu-isolation",
            Status::Fail,
            format!(
                "was {given_text} but can open only {open_n} ({} /dev/nvidiaN files)",
                files.len()
            ),
            Some("the GPU device files are missing or blocked by the device cgroup: check the GPU device plugin or CDI spec"),
        ),
        None if privileged && open_n > 0 && open_n == node => check(
            "gpu-isolation",
            Status::Warn,
            format!("privileged: can open all {node} GPUs of the node; {given_text}: {RISK}"),
            Some(FIX),
        ),
        _ => check(
            "gpu-isolation",
            Status::Pass,
            format!(
                "can open {open_n} of the node's {node} GPUs; {given_text}{}",
                if privileged {
                    " (privileged: it would see every GPU even if it had asked for fewer)"
                } else {
                    ""
                }
            ),
            None,
        ),
    }
}

/// `gpu-rail-alignment`: FAIL when a GPU of this container has no usable rail of this pod
/// under its PCIe switch or root port (`rails.gpus`, see [`crate::rails::gpus`]).
pub(super) fn check_gpu_rail_alignment(rails: &RailsReport) -> Check {
    const NAME: &str = "gpu-rail-alignment";
    let n = rails.gpus.len();
    if n == 0 {
        return check(
            NAME,
            Status::Warn,
            "not applicable: no GPU in this container (no /dev/nvidiaN of an NVIDIA GPU in sysfs)"
                .into(),
            None,
        );
    }
    if !rails.rails.iter().any(|r| r.usable && r.pci.is_some()) {
        return check(
            NAME,
            Status::Warn,
            format!(
                "not applicable: {n} GPUs but no usable rail on a PCI NIC here (see the rails \
                 and rail-gids checks)"
            ),
            None,
        );
    }
    let unaligned: Vec<String> = rails.unaligned_gpus().map(gpu_name).collect();
    if unaligned.is_empty() {
        let each: Vec<String> = rails
            .gpus
            .iter()
            .map(|g| format!("{} {}", g.pci, g.rails.join("+")))
            .collect();
        return check(
            NAME,
            Status::Pass,
            format!(
                "each of the {n} GPUs has a rail under its PCIe switch or root (GPUDirect RDMA): {}",
                list(&each, 4)
            ),
            None,
        );
    }
    // The rails that did not follow the GPUs: usable here, near none of this pod's GPUs.
    let ours: Vec<&str> = rails.gpus.iter().map(|g| g.pci.as_str()).collect();
    let stray: Vec<String> = rails
        .rails
        .iter()
        .filter(|r| {
            r.usable && r.pci.is_some() && !r.gpus.iter().any(|g| ours.contains(&g.as_str()))
        })
        .map(|r| r.iface.clone())
        .collect();
    check(
        NAME,
        Status::Fail,
        format!(
            "{} of the {n} GPUs have no rail of this pod under their PCIe switch or root, so NCCL \
             will not use GPUDirect RDMA for them: {}{}",
            unaligned.len(),
            unaligned.join(", "),
            if stray.is_empty() {
                String::new()
            } else {
                format!("; rails near none of this pod's GPUs: {}", list(&stray, 8))
            }
        ),
        Some(GPU_RAIL_FIX),
    )
}
