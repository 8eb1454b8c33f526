//! Unit tests of the probe's readings.

use wire::probe::Status;
use wire::rails::{Attachment, GpuRails, RailRow, RailsReport};

use super::pod::{check_gpu_rail_alignment, given_gpus};
use super::system::{human, size_option, Memlock, CAP_IPC_LOCK, GIB, MIB};

#[test]
fn memlock_allows_what_the_limit_or_ipc_lock_allows() {
    let m = |limit_kib, caps| Memlock { limit_kib, caps };
    let ipc = 1 << CAP_IPC_LOCK;
    assert_eq!(m(Some(64), Some(0)).allows(64 * 1024), Some(true));
    assert_eq!(m(Some(64), Some(0)).allows(64 * 1024 + 1), Some(false));
    assert_eq!(m(Some(64), Some(ipc)).allows(u64::MAX), Some(true));
    assert_eq!(m(Some(u64::MAX), None).allows(u64::MAX), Some(true));
    assert_eq!(m(None, Some(0)).allows(1), None);
    assert_eq!(m(None, None).ipc_lock(), None);
}

#[test]
fn shm_sizes() {
    assert_eq!(size_option("rw,size=65536k,inode64"), Some(64 * MIB));
    assert_eq!(size_option("rw,size=32g"), Some(32 * GIB));
    assert_eq!(size_option("rw,inode64"), None);
    assert_eq!(human(64 * MIB), "64 MiB");
    assert_eq!(human(32 * GIB), "32 GiB");
    assert_eq!(human(64 * 1024), "64 KiB");
}

#[test]
fn gpus_given() {
    assert_eq!(given_gpus(Some("0,1,2,3"), 8), Some(4));
    assert_eq!(given_gpus(Some("all"), 8), Some(8));
    assert_eq!(given_gpus(Some("void"), 8), None);
    assert_eq!(given_gpus(Some("none"), 8), Some(0));
    assert_eq!(given_gpus(None, 8), None);
}

#[test]
fn status_json_is_upper_case() {
    assert_eq!(
        serde_json::to_string(&Status::Warn).unwrap_or_default(),
        "\"WARN\""
    );
}

fn rail(iface: &str, pci: Option<&str>, gpus: &[&str], usable: bool) -> RailRow {
    RailRow {
        rail: 0,
        iface: iface.into(),
        ipv4: None,
        device: Some("mlx5_0".into()),
        port: Some(1),
        gid_index: Some(5),
        state: None,
        link_layer: None,
        rate_gbps: None,
        active_mtu_bytes: None,
        pci: pci.map(str::to_string),
        numa_node: None,
        gpus: gpus.iter().map(|g| g.to_string()).collect(),
        attachment: Attachment::Ipvlan,
        usable,
        reason: None,
        operstate: None,
    }
}

fn gpu(pci: &str, rails: &[&str]) -> GpuRails {
    GpuRails {
        pci: pci.into(),
        node_index: 0,
        device_file: "nvidia0".into(),
        pcie_root: Some("pci0000:80".into()),
        numa_node: Some(7),
        rails: rails.iter().map(|r| r.to_string()).collect(),
    }
}

fn report(rails: Vec<RailRow>, gpus: Vec<GpuRails>) -> RailsReport {
    RailsReport {
        schema_version: 1,
        rdmabw_version: "0".into(),
        capabilities: Vec::new(),
        host: "pod".into(),
        rails,
        not_rails: Vec::new(),
        gpus,
    }
}

#[test]
fn gpu_rail_alignment_fails_only_for_a_gpu_without_a_rail_near_it() {
    let near = rail("net1", Some("0000:89:00.0"), &["0000:8c:00.0"], true);
    // No GPU in the container: not applicable.
    let c = check_gpu_rail_alignment(&report(vec![near.clone()], vec![]));
    assert_eq!(c.status, Status::Warn);
    assert!(c.detail.starts_with("not applicable"), "{}", c.detail);
    // Each GPU with a rail: PASS, no fix.
    let c = check_gpu_rail_alignment(&report(
        vec![near.clone()],
        vec![gpu("0000:8c:00.0", &["net1"])],
    ));
    assert_eq!(c.status, Status::Pass, "{}", c.detail);
    assert!(c.fix.is_none());
    // A GPU without: FAIL, named with its root, and the fix.
    let far = rail("net2", Some("0000:0c:00.0"), &["0000:0f:00.0"], true);
    let c = check_gpu_rail_alignment(&report(vec![far.clone()], vec![gpu("0000:8c:00.0", &[])]));
    assert_eq!(c.status, Status::Fail, "{}", c.detail);
    assert!(
        c.detail
            .contains("GPU 0000:8c:00.0 (nvidia0, PCIe root pci0000:80, NUMA 7)"),
        "{}",
        c.detail
    );
    assert!(
        c.detail.contains("near none of this pod's GPUs: net2"),
        "{}",
        c.detail
    );
    assert!(c.fix.as_deref().unwrap_or_default().contains("restricted"));
    // GPUs but no usable rail on a PCI NIC (a software rail, or a rail not usable here):
    // nothing to align with, the rails checks say why.
    let rxe = rail("net1", None, &[], true);
    let unusable = rail("net3", Some("0000:89:00.0"), &["0000:8c:00.0"], false);
    let c = check_gpu_rail_alignment(&report(vec![rxe, unusable], vec![gpu("0000:8c:00.0", &[])]));
    assert_eq!(c.status, Status::Warn, "{}", c.detail);
    assert!(c.detail.starts_with("not applicable"), "{}", c.detail);
}
