//! `rdmabw probe` on fixture trees: the field reports' failure cases (device files present but
//! not openable, memlock 64 KiB without IPC_LOCK, a 64 MiB /dev/shm, every GPU of the node
//! visible, cluster names that do not resolve in a hostNetwork pod) and pods that work.
//!
//! What the probe does outside the file system comes from each tree's `probe.txt` (see
//! rails_probe_generate.py) through [`FixtureSystem`].

use std::collections::HashMap;
use std::fs;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bench_core::probe::{self, ProbeRoots, ProbeSystem};
use bench_core::rails::PortQuery;
use wire::probe::{ProbeReport, Status};

fn tree(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The world outside a fixture tree's file system, as its `probe.txt` describes it.
#[derive(Debug, Default)]
struct FixtureSystem {
    root: PathBuf,
    env: HashMap<String, String>,
    open_errors: Vec<(String, i32)>,
    resolve: HashMap<String, Vec<IpAddr>>,
    register: Vec<(String, Result<(), String>)>,
}

fn errno(name: &str) -> i32 {
    match name {
        "EPERM" => 1,
        "EACCES" => 13,
        "ENXIO" => 6,
        other => panic!("unknown errno {other}"),
    }
}

impl FixtureSystem {
    fn load(root: &Path) -> FixtureSystem {
        let text = fs::read_to_string(root.join("probe.txt")).unwrap_or_default();
        let mut s = FixtureSystem {
            root: root.to_path_buf(),
            ..FixtureSystem::default()
        };
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let mut f = line.split_whitespace();
            match f.next() {
                Some("env") => {
                    if let Some((k, v)) = f.next().and_then(|kv| kv.split_once('=')) {
                        s.env.insert(k.to_string(), v.to_string());
                    }
                }
                Some("open-error") => {
                    let (Some(p), Some(e)) = (f.next(), f.next()) else {
                        continue;
                    };
                    s.open_errors.push((p.to_string(), errno(e)));
                }
                Some("resolve") => {
                    let Some(name) = f.next() else { continue };
                    let addrs = f.filter_map(|a| a.parse().ok()).collect();
                    s.resolve.insert(name.to_string(), addrs);
                }
                Some("register") => {
                    let (Some(d), Some(r)) = (f.next(), f.next()) else {
                        continue;
                    };
                    let rest: Vec<&str> = f.collect();
                    let res = if r == "ok" {
                        Ok(())
                    } else {
                        Err(format!("{r} {}", rest.join(" ")).trim().to_string())
                    };
                    s.register.push((d.to_string(), res));
                }
                _ => {}
            }
        }
        s
    }
}

impl PortQuery for FixtureSystem {
    fn active_mtu(&self, _device: &str, _port: u8) -> Option<u32> {
        None
    }
}

impl ProbeSystem for FixtureSystem {
    fn env(&self, name: &str) -> Option<String> {
        self.env.get(name).cloned()
    }

    fn open_rw(&self, path: &Path) -> io::Result<()> {
        let rel = path
            .strip_prefix(&self.root)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        for (pat, e) in &self.open_errors {
            let hit = match pat.strip_suffix('*') {
                Some(prefix) => rel.starts_with(prefix),
                None => rel == *pat,
            };
            if hit {
                return Err(io::Error::from_raw_os_error(*e));
            }
        }
        fs::File::open(path).map(drop)
    }

    fn lookup_host(&self, name: &str, timeout: Duration) -> io::Result<Vec<IpAddr>> {
        match self.resolve.get(name) {
            Some(a) if !a.is_empty() => Ok(a.clone()),
            _ => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer within {} s", timeout.as_secs()),
            )),
        }
    }

    fn register_memory(&self, device: &str, _bytes: u64) -> Result<(), String> {
        self.register
            .iter()
            .find(|(d, _)| d == device || d == "*")
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| Err("no registration answer in probe.txt".into()))
    }
}

fn run(name: &str) -> ProbeReport {
    let root = tree(name);
    probe::probe(&ProbeRoots::under(&root), &FixtureSystem::load(&root))
}

fn status(r: &ProbeReport, check: &str) -> Status {
    r.check(check)
        .unwrap_or_else(|| panic!("no check {check}"))
        .status
}

fn detail<'r>(r: &'r ProbeReport, check: &str) -> &'r str {
    r.check(check)
        .map(|c| c.detail.as_str())
        .unwrap_or_default()
}

fn fix<'r>(r: &'r ProbeReport, check: &str) -> &'r str {
    r.check(check)
        .and_then(|c| c.fix.as_deref())
        .unwrap_or_default()
}

fn table(r: &ProbeReport) -> String {
    r.checks
        .iter()
        .map(|c| format!("{:<20} {} {}", c.name, c.status.as_str(), c.detail))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_check_has_a_name_a_status_a_line_and_a_fix_unless_it_passed() {
    for t in [
        "rails-hostnet",
        "probe-hostpath",
        "rails-ipvlan/pod1",
        "rails-sriov",
        "probe-ipvlan-exclusive",
        "rails-lab-pods/podA",
        "rails-split/aligned",
        "rails-split/unaligned",
    ] {
        let r = run(t);
        assert_eq!(r.checks.len(), 12, "{t}");
        for c in &r.checks {
            assert!(
                !c.detail.is_empty() && !c.detail.contains('\n'),
                "{t} {}",
                c.name
            );
            if c.status == Status::Fail {
                assert!(c.fix.is_some(), "{t} {} FAIL without a fix", c.name);
            }
        }
        let n = r.summary.pass + r.summary.warn + r.summary.fail;
        assert_eq!(n, r.checks.len());
        assert_eq!(r.failed(), r.summary.fail > 0);
    }
}

#[test]
fn hostpath_mount_files_present_but_the_device_cgroup_says_eperm() {
    let r = run("probe-hostpath");
    assert_eq!(status(&r, "uverbs-files"), Status::Pass, "{}", table(&r));
    assert_eq!(status(&r, "uverbs-open"), Status::Fail, "{}", table(&r));
    let d = detail(&r, "uverbs-open");
    assert!(d.contains("EPERM") && d.contains("device cgroup"), "{d}");
    let f = fix(&r, "uverbs-open");
    for w in [
        "hostPath",
        "device plugin",
        "privileged",
        "io.kubernetes.cri-o.Devices",
    ] {
        assert!(f.contains(w), "fix lacks {w}: {f}");
    }
    // Nothing opened, so no registration was tried.
    assert_eq!(status(&r, "memory-registration"), Status::Warn);
    assert!(detail(&r, "memory-registration").contains("not attempted"));
    assert!(r.failed());
}

#[test]
fn memlock_64_kib_without_ipc_lock_fails() {
    let r = run("probe-hostpath");
    assert_eq!(status(&r, "memlock"), Status::Fail, "{}", table(&r));
    let d = detail(&r, "memlock");
    assert!(
        d.contains("64 KiB") && d.contains("no IPC_LOCK") && d.contains("a80425fb"),
        "{d}"
    );
    assert!(fix(&r, "memlock").contains("IPC_LOCK"));
    // The same limit with IPC_LOCK effective passes (the SR-IOV pod: 8 MiB, IPC_LOCK).
    let s = run("rails-sriov");
    assert_eq!(
        status(&s, "memlock"),
        Status::Pass,
        "{}",
        detail(&s, "memlock")
    );
    assert!(detail(&s, "memlock").contains("IPC_LOCK is effective"));
    // And the kernel's 8 MiB default without IPC_LOCK fails too.
    let e = run("probe-ipvlan-exclusive");
    assert_eq!(
        status(&e, "memlock"),
        Status::Fail,
        "{}",
        detail(&e, "memlock")
    );
}

#[test]
fn dev_shm_of_64_mib_fails_and_a_memory_backed_one_passes() {
    let r = run("probe-hostpath");
    assert_eq!(status(&r, "dev-shm"), Status::Fail);
    assert!(
        detail(&r, "dev-shm").contains("64 MiB"),
        "{}",
        detail(&r, "dev-shm")
    );
    assert!(fix(&r, "dev-shm").contains("medium: Memory"));
    let ok = run("rails-ipvlan/pod1");
    assert_eq!(
        status(&ok, "dev-shm"),
        Status::Pass,
        "{}",
        detail(&ok, "dev-shm")
    );
    assert!(detail(&ok, "dev-shm").contains("32 GiB"));
    // No size= on the tmpfs: half the memory (SR-IOV pod: about 1 TiB of 2 TiB).
    let s = run("rails-sriov");
    assert_eq!(
        status(&s, "dev-shm"),
        Status::Pass,
        "{}",
        detail(&s, "dev-shm")
    );
    assert!(detail(&s, "dev-shm").contains("half of the memory"));
}

#[test]
fn privileged_pod_sees_every_gpu_of_the_node() {
    let r = run("rails-hostnet");
    assert_eq!(status(&r, "gpu-isolation"), Status::Warn, "{}", table(&r));
    let d = detail(&r, "gpu-isolation");
    assert!(
        d.contains("can open 8 GPUs") && d.contains("given 4"),
        "{d}"
    );
    assert!(d.contains("privileged") && d.contains("same GPUs"), "{d}");
    assert!(fix(&r, "gpu-isolation").contains("privileged"));
    // Given what it can open: pass.
    let ok = run("rails-ipvlan/pod1");
    assert_eq!(
        status(&ok, "gpu-isolation"),
        Status::Pass,
        "{}",
        detail(&ok, "gpu-isolation")
    );
    let hp = run("probe-hostpath");
    assert_eq!(
        status(&hp, "gpu-isolation"),
        Status::Pass,
        "{}",
        detail(&hp, "gpu-isolation")
    );
}

#[test]
fn hostnetwork_pod_with_the_nodes_dns_cannot_resolve_cluster_names() {
    let r = run("rails-hostnet");
    assert_eq!(status(&r, "host-network"), Status::Warn, "{}", table(&r));
    let d = detail(&r, "host-network");
    assert!(
        d.contains("PF rdma0") && d.contains("oke-cbuyudv52dq"),
        "{d}"
    );
    assert_eq!(status(&r, "cluster-dns"), Status::Fail);
    assert!(detail(&r, "cluster-dns").contains("kubernetes.default.svc.cluster.local"));
    assert!(fix(&r, "cluster-dns").contains("ClusterFirstWithHostNet"));
    // The rest of that privileged pod works.
    for c in [
        "rails",
        "uverbs-files",
        "uverbs-open",
        "memlock",
        "memory-registration",
        "rdma-netns-mode",
        "rail-gids",
    ] {
        assert_eq!(status(&r, c), Status::Pass, "{c}: {}", detail(&r, c));
    }
    assert!(
        detail(&r, "rails").starts_with("16 rails (hostNetwork)"),
        "{}",
        detail(&r, "rails")
    );
    assert!(detail(&r, "uverbs-files").contains("18 uverbs files"));
    // With ClusterFirstWithHostNet (the hostPath pod), cluster names resolve.
    let hp = run("probe-hostpath");
    assert_eq!(
        status(&hp, "cluster-dns"),
        Status::Pass,
        "{}",
        detail(&hp, "cluster-dns")
    );
}

#[test]
fn ipvlan_pod_passes_everything() {
    for t in ["rails-ipvlan/pod1", "rails-ipvlan/pod2"] {
        let r = run(t);
        assert_eq!(r.summary.pass, 12, "{t}\n{}", table(&r));
        assert!(!r.failed());
    }
    let r = run("rails-ipvlan/pod2");
    assert!(
        detail(&r, "rail-gids").contains("GID index 7"),
        "{}",
        detail(&r, "rail-gids")
    );
    assert!(detail(&r, "rails").contains("IPvlan"));
    assert!(detail(&r, "host-network").starts_with("own network namespace"));
    assert!(detail(&r, "rdma-netns-mode").starts_with("shared"));
}

#[test]
fn sriov_pod_with_a_down_vf_fails_on_rail_gids_only() {
    let r = run("rails-sriov");
    let failed: Vec<&str> = r
        .checks
        .iter()
        .filter(|c| c.status != Status::Pass)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(failed, vec!["rail-gids"], "{}", table(&r));
    assert!(detail(&r, "rail-gids").contains("rail 3 (net4)"));
    assert!(detail(&r, "rdma-netns-mode").starts_with("exclusive"));
}

#[test]
fn ipvlan_in_the_exclusive_rdma_netns_mode_sees_no_device() {
    let r = run("probe-ipvlan-exclusive");
    assert_eq!(status(&r, "rails"), Status::Fail, "{}", table(&r));
    assert_eq!(status(&r, "uverbs-files"), Status::Fail);
    assert_eq!(status(&r, "rdma-netns-mode"), Status::Fail);
    assert!(detail(&r, "rdma-netns-mode").contains("net1"));
    assert!(fix(&r, "rdma-netns-mode").contains("netns_mode=1"));
    assert_eq!(status(&r, "rail-gids"), Status::Fail);
    // No GPU anywhere: not applicable.
    assert_eq!(status(&r, "gpu-isolation"), Status::Warn);
    assert!(detail(&r, "gpu-isolation").starts_with("not applicable"));
    assert_eq!(status(&r, "gpu-rail-alignment"), Status::Warn);
    assert!(detail(&r, "gpu-rail-alignment").starts_with("not applicable"));
}

#[test]
fn a_failed_registration_is_a_fail() {
    let root = tree("rails-lab-pods/podA");
    let mut sys = FixtureSystem::load(&root);
    sys.register = vec![(
        "*".into(),
        Err("registering 64 KiB on rxe_a0: Cannot allocate memory (ENOMEM)".into()),
    )];
    let r = probe::probe(&ProbeRoots::under(&root), &sys);
    assert_eq!(status(&r, "memory-registration"), Status::Fail);
    assert!(detail(&r, "memory-registration").contains("ENOMEM"));
}

#[test]
fn lab_pod_passes_and_says_warn_for_what_does_not_apply() {
    let r = run("rails-lab-pods/podA");
    let warn: Vec<&str> = r
        .checks
        .iter()
        .filter(|c| c.status == Status::Warn)
        .map(|c| c.name.as_str())
        .collect();
    assert!(!r.failed(), "{}", table(&r));
    // Outside Kubernetes, without GPUs, with a tmpfs of half of 1 GiB on /dev/shm.
    assert_eq!(
        warn,
        vec![
            "cluster-dns",
            "dev-shm",
            "gpu-isolation",
            "gpu-rail-alignment"
        ],
        "{}",
        table(&r)
    );
    assert!(detail(&r, "cluster-dns").starts_with("not applicable"));
    assert!(detail(&r, "gpu-rail-alignment").starts_with("not applicable"));
}

#[test]
fn json_statuses_are_upper_case_and_round_trip() {
    let r = run("probe-hostpath");
    let text = serde_json::to_string(&r).unwrap_or_default();
    assert!(text.contains("\"status\":\"FAIL\""), "{text}");
    let back: ProbeReport = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, r);
}

/// Field report 001, two jobs splitting a node's rails: with the Topology Manager the pod's
/// GPUs and PFs share their PCIe roots (PASS); without it, the PFs did not follow the GPUs and
/// two GPUs have no PF on their root (FAIL, naming each GPU, its root and the fix). Nothing
/// else tells the two pods apart.
#[test]
fn gpus_whose_pcie_root_has_no_rail_of_the_pod_fail_gpu_rail_alignment() {
    let ok = run("rails-split/aligned");
    assert_eq!(
        status(&ok, "gpu-rail-alignment"),
        Status::Pass,
        "{}",
        table(&ok)
    );
    let d = detail(&ok, "gpu-rail-alignment");
    assert!(d.contains("each of the 4 GPUs"), "{d}");
    assert!(d.contains("0000:0f:00.0 net1+net2+net3+net4"), "{d}");

    let bad = run("rails-split/unaligned");
    assert_eq!(
        status(&bad, "gpu-rail-alignment"),
        Status::Fail,
        "{}",
        table(&bad)
    );
    assert!(bad.failed());
    let d = detail(&bad, "gpu-rail-alignment");
    for w in [
        "2 of the 4 GPUs",
        "GPU 0000:8c:00.0 (nvidia4, PCIe root pci0000:80, NUMA 7)",
        "GPU 0000:91:00.0 (nvidia5, PCIe root pci0000:80, NUMA 7)",
        "GPUDirect RDMA",
        // The PFs that did not follow the GPUs: rdma1 and rdma12-15.
        "rails near none of this pod's GPUs: net2, net13, net14, net15, net16",
    ] {
        assert!(d.contains(w), "detail lacks {w:?}: {d}");
    }
    assert!(!d.contains("0000:50:00.0"), "an aligned GPU named: {d}");
    let f = fix(&bad, "gpu-rail-alignment");
    for w in [
        "Topology Manager",
        "restricted",
        "single-numa-node",
        "topologyManagerScope pod",
        "resource.kubernetes.io/pcieRoot",
    ] {
        assert!(f.contains(w), "fix lacks {w:?}: {f}");
    }
    // Every other check ends the same way in both pods.
    let others = |r: &ProbeReport| -> Vec<(String, Status)> {
        r.checks
            .iter()
            .filter(|c| c.name != "gpu-rail-alignment")
            .map(|c| (c.name.clone(), c.status))
            .collect()
    };
    assert_eq!(others(&ok), others(&bad));
}
