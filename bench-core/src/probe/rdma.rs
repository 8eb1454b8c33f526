//! The RDMA checks: `rails`, `uverbs-files`, `uverbs-open`, `memory-registration`,
//! `rdma-netns-mode` and `rail-gids`.

use std::fs;

use wire::probe::{Check, Status};
use wire::rails::{Attachment, RailsReport};

use super::system::human;
use super::verdict::{check, list};
use super::world::ProbeSystem;
use crate::rails::netif;
use crate::sysfs::{self, SysRoots};

const FIX_DEVICES: &str = "give the container the RDMA devices: an RDMA device plugin \
(rdma-shared-dev-plugin, or sriov-network-device-plugin with isRdma: true), privileged: true, or \
CRI-O's io.kubernetes.cri-o.Devices annotation; a hostPath mount of /dev/infiniband is not enough";

pub(super) fn check_rails(rails: &RailsReport, devices: usize) -> Check {
    if rails.rails.iter().all(|r| r.device.is_none()) {
        return check(
            "rails",
            Status::Fail,
            format!(
                "no rail interface (rdmaN, netN) with an RDMA device in this network namespace \
                 ({} rail interfaces, {devices} RDMA devices in sysfs)",
                rails.rails.len()
            ),
            Some(
                "run with hostNetwork: true to use the node's rails, or attach one network per \
                 rail (Multus with IPvlan on the rail, or SR-IOV VFs with isRdma: true)",
            ),
        );
    }
    let mut kinds: Vec<&str> = rails
        .rails
        .iter()
        .map(|r| attachment_name(r.attachment))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let names: Vec<String> = rails
        .rails
        .iter()
        .map(|r| match &r.device {
            Some(d) => format!("{} ({d})", r.iface),
            None => r.iface.clone(),
        })
        .collect();
    check(
        "rails",
        Status::Pass,
        format!(
            "{} rails ({}): {}",
            rails.rails.len(),
            kinds.join(", "),
            list(&names, 4)
        ),
        None,
    )
}

/// The word `rdmabw rails` prints for an attachment.
pub fn attachment_name(a: Attachment) -> &'static str {
    match a {
        Attachment::HostNetwork => "hostNetwork",
        Attachment::Ipvlan => "IPvlan",
        Attachment::Sriov => "SR-IOV VF",
        Attachment::Software => "software (rxe)",
        Attachment::Unknown => "unknown",
    }
}

pub(super) fn uverbs_files(roots: &SysRoots) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(roots.dev.join("infiniband"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("uverbs"))
                .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| netif::natural_cmp(a, b));
    v
}

pub(super) fn check_uverbs_files(
    roots: &SysRoots,
    inv: &sysfs::Inventory,
    rails: &RailsReport,
    files: &[String],
) -> Check {
    let devices = inv.devices.len();
    if devices == 0 {
        return check(
            "uverbs-files",
            Status::Fail,
            format!(
                "no RDMA device in {} and {} uverbs files",
                roots.sys.join("class/infiniband").display(),
                files.len()
            ),
            Some("load the NIC's RDMA driver on the node (mlx5_ib), or check the RDMA netns mode"),
        );
    }
    if files.is_empty() {
        return check(
            "uverbs-files",
            Status::Fail,
            format!(
                "no uverbs file in {}: sysfs shows {devices} RDMA devices, but libibverbs can \
                 open none (ibv_devices lists nothing)",
                roots.dev.join("infiniband").display()
            ),
            Some(FIX_DEVICES),
        );
    }
    let missing: Vec<String> = rails
        .rails
        .iter()
        .filter_map(|r| {
            let d = inv.device(r.device.as_deref()?)?;
            (!d.uverbs_present).then(|| {
                format!(
                    "{} ({} {})",
                    r.iface,
                    d.name,
                    d.uverbs.as_deref().unwrap_or("no uverbs")
                )
            })
        })
        .collect();
    let cm = roots.dev.join("infiniband/rdma_cm").exists();
    if !missing.is_empty() {
        return check(
            "uverbs-files",
            Status::Warn,
            format!(
                "{} uverbs files, but not for the devices of {}",
                files.len(),
                list(&missing, 4)
            ),
            Some(FIX_DEVICES),
        );
    }
    check(
        "uverbs-files",
        Status::Pass,
        format!(
            "{} uverbs files for {devices} RDMA devices in sysfs{}",
            files.len(),
            if cm { ", and rdma_cm" } else { "" }
        ),
        None,
    )
}

pub(super) fn check_uverbs_open(
    roots: &SysRoots,
    sys: &dyn ProbeSystem,
    files: &[String],
) -> (Check, Vec<String>) {
    if files.is_empty() {
        return (
            check(
                "uverbs-open",
                Status::Warn,
                "not applicable: no uverbs file to open".into(),
                None,
            ),
            Vec::new(),
        );
    }
    let mut ok = Vec::new();
    let mut eperm = Vec::new();
    let mut other = Vec::new();
    for f in files {
        let path = roots.dev.join("infiniband").join(f);
        match sys.open_rw(&path) {
            Ok(()) => ok.push(f.clone()),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => eperm.push(f.clone()),
            Err(e) => other.push(format!("{f}: {e}")),
        }
    }
    let c = if !eperm.is_empty() {
        let mode = fs::metadata(roots.dev.join("infiniband").join(&eperm[0]))
            .map(|m| {
                use std::os::unix::fs::PermissionsExt;
                format!("{:04o}", m.permissions().mode() & 0o7777)
            })
            .unwrap_or_else(|_| "?".into());
        check(
            "uverbs-open",
            Status::Fail,
            format!(
                "open() of {} of {} uverbs files fails with EPERM (Operation not permitted) \
                 although the files are there (mode {mode}): the container's device cgroup does \
                 not allow them",
                eperm.len(),
                files.len()
            ),
            Some(
                "a hostPath mount adds the files, not the permission to open them: use an RDMA \
                 device plugin, privileged: true, or CRI-O's io.kubernetes.cri-o.Devices \
                 annotation (with the devices in allowed_devices)",
            ),
        )
    } else if !other.is_empty() {
        check(
            "uverbs-open",
            Status::Fail,
            format!("cannot open {}", list(&other, 3)),
            Some("EACCES: run as root or in the group that owns the files; ENXIO/ENODEV: the device went away"),
        )
    } else {
        check(
            "uverbs-open",
            Status::Pass,
            format!("opened all {} uverbs files read-write", ok.len()),
            None,
        )
    };
    (c, ok)
}

/// Bytes the `memory-registration` check registers.
pub const PROBE_MR_BYTES: u64 = 64 * 1024;

pub(super) fn check_registration(
    sys: &dyn ProbeSystem,
    inv: &sysfs::Inventory,
    rails: &RailsReport,
    opened: &[String],
) -> Check {
    // The devices of the rails, else every device; only those whose uverbs file opened.
    let mut devs: Vec<String> = rails
        .rails
        .iter()
        .filter_map(|r| r.device.clone())
        .collect();
    if devs.is_empty() {
        devs = inv.device_names();
    }
    let mut seen = Vec::new();
    devs.retain(|d| {
        let keep = !seen.contains(d)
            && inv
                .device(d)
                .and_then(|x| x.uverbs.as_ref())
                .is_some_and(|u| opened.contains(u));
        seen.push(d.clone());
        keep
    });
    if devs.is_empty() {
        return check(
            "memory-registration",
            Status::Warn,
            "not attempted: no RDMA device whose uverbs file opens".into(),
            None,
        );
    }
    let mut failed = Vec::new();
    for d in &devs {
        if let Err(e) = sys.register_memory(d, PROBE_MR_BYTES) {
            failed.push(format!("{d}: {e}"));
        }
    }
    if failed.is_empty() {
        check(
            "memory-registration",
            Status::Pass,
            format!(
                "registered {} of host memory on {}",
                human(PROBE_MR_BYTES),
                list(&devs, 4)
            ),
            None,
        )
    } else {
        check(
            "memory-registration",
            Status::Fail,
            format!(
                "registering {} failed on {} of {} devices: {}",
                human(PROBE_MR_BYTES),
                failed.len(),
                devs.len(),
                failed.first().map(String::as_str).unwrap_or_default()
            ),
            Some("see memlock and uverbs-open above; with a missing libibverbs provider, install rdma-core's providers (ibverbs-providers) in the image"),
        )
    }
}

pub(super) fn check_netns_mode(
    roots: &SysRoots,
    inv: &sysfs::Inventory,
    rails: &RailsReport,
) -> Check {
    let mode = sysfs::read_attr(&roots.sys.join("module/ib_core/parameters/netns_mode"));
    let orphan_children: Vec<String> = rails
        .rails
        .iter()
        .filter(|r| r.device.is_none())
        .filter(|r| {
            netif::read_interface(roots, &r.iface).is_some_and(|n| n.is_virtual() && n.is_stacked())
        })
        .map(|r| r.iface.clone())
        .collect();
    match mode.as_deref() {
        Some("Y") | Some("1") => check(
            "rdma-netns-mode",
            Status::Pass,
            format!(
                "shared (Y): all {} RDMA devices are visible in every namespace; only the GIDs \
                 of this namespace's addresses are usable here",
                inv.devices.len()
            ),
            None,
        ),
        Some("N") | Some("0") if !orphan_children.is_empty() => check(
            "rdma-netns-mode",
            Status::Fail,
            format!(
                "exclusive (N): each RDMA device belongs to one namespace, so the masters' \
                 devices of the IPvlan children {} are not visible here",
                list(&orphan_children, 4)
            ),
            Some(
                "IPvlan needs the shared mode (options ib_core netns_mode=1 in \
                 /etc/modprobe.d/ib_core.conf, or rdma system set netns shared); or give pods \
                 SR-IOV VFs",
            ),
        ),
        Some("N") | Some("0") => check(
            "rdma-netns-mode",
            Status::Pass,
            format!(
                "exclusive (N): only this namespace's RDMA devices are visible ({})",
                inv.devices.len()
            ),
            None,
        ),
        Some(other) => check(
            "rdma-netns-mode",
            Status::Warn,
            format!("netns_mode reads {other:?}"),
            None,
        ),
        None => check(
            "rdma-netns-mode",
            Status::Warn,
            format!(
                "{} unreadable: ib_core not loaded, or sysfs not mounted",
                roots
                    .sys
                    .join("module/ib_core/parameters/netns_mode")
                    .display()
            ),
            None,
        ),
    }
}

pub(super) fn check_rail_gids(rails: &RailsReport) -> Check {
    if rails.rails.is_empty() {
        return check(
            "rail-gids",
            Status::Warn,
            "not applicable: no rails (see rails)".into(),
            None,
        );
    }
    let bad: Vec<String> = rails
        .rails
        .iter()
        .filter(|r| !r.usable)
        .map(|r| {
            format!(
                "rail {} ({}): {}",
                r.rail,
                r.iface,
                r.reason.as_deref().unwrap_or("not usable")
            )
        })
        .collect();
    if bad.is_empty() {
        let mut idx: Vec<u32> = rails.rails.iter().filter_map(|r| r.gid_index).collect();
        idx.sort_unstable();
        idx.dedup();
        let idx: Vec<String> = idx.iter().map(u32::to_string).collect();
        check(
            "rail-gids",
            Status::Pass,
            format!(
                "every rail has the RoCE v2 GID of its own address (GID index {})",
                idx.join(", ")
            ),
            None,
        )
    } else {
        check(
            "rail-gids",
            Status::Fail,
            format!(
                "{} of {} rails cannot be used: {}",
                bad.len(),
                rails.rails.len(),
                list(&bad, 2)
            ),
            Some("`rdmabw rails` lists every rail with its reason"),
        )
    }
}
