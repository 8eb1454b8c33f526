//! `rdmabw rails` on fixture trees that reproduce the field reports' layouts and the lab's
//! (see tests/fixtures/README.md and rails_probe_generate.py).

use std::path::PathBuf;

use bench_core::rails::{self, resolve_rail, RailRequest, SysfsOnly};
use bench_core::sysfs::{self, SysRoots};
use wire::rails::{Attachment, RailRow, RailsReport};

fn roots(tree: &str) -> SysRoots {
    SysRoots::under(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(tree),
    )
}

fn report(tree: &str) -> RailsReport {
    match rails::discover(&roots(tree), &SysfsOnly) {
        Ok(r) => r,
        Err(e) => panic!("rails of {tree}: {e}"),
    }
}

fn rail<'r>(r: &'r RailsReport, iface: &str) -> &'r RailRow {
    r.rails
        .iter()
        .find(|x| x.iface == iface)
        .unwrap_or_else(|| panic!("no rail {iface} in {:?}", r.rails))
}

/// The device of rail N on the field reports' node (see ROOTS in the generator).
const NODE_RAIL_DEVICES: [&str; 16] = [
    "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_14",
    "mlx5_15", "mlx5_16", "mlx5_17", "mlx5_9", "mlx5_10", "mlx5_11", "mlx5_12",
];

/// Every usable rail resolves, through `--netdev <iface>`, to the row's device, port and GID
/// index: `rdmabw client --netdev netN` uses exactly what `rails` printed.
fn assert_rows_match_netdev_resolution(tree: &str, r: &RailsReport) {
    let roots = roots(tree);
    let inv = sysfs::discover(&roots).unwrap_or_else(|e| panic!("{e}"));
    for row in r.rails.iter().filter(|x| x.usable) {
        let req = RailRequest {
            netdev: Some(row.iface.clone()),
            ..RailRequest::default()
        };
        let got = resolve_rail(&inv, &roots, &req).unwrap_or_else(|e| panic!("{}: {e}", row.iface));
        assert_eq!(Some(got.device.clone()), row.device, "{tree} {}", row.iface);
        assert_eq!(Some(got.port), row.port, "{tree} {}", row.iface);
        assert_eq!(Some(got.gid_index), row.gid_index, "{tree} {}", row.iface);
        assert_eq!(
            got.ip.map(|a| a.to_string()),
            row.ipv4,
            "{tree} {}",
            row.iface
        );
    }
}

#[test]
fn hostnet_sixteen_rails_of_eighteen_devices_and_two_front_end_nics() {
    let r = report("rails-hostnet");
    assert_eq!(r.host, "oke-cbuyudv52dq-n6z2qyqtd3q-slvnzsli2gq-1");
    assert_eq!(r.rails.len(), 16, "{:#?}", r.rails);
    for (i, row) in r.rails.iter().enumerate() {
        assert_eq!(row.rail as usize, i);
        assert_eq!(row.iface, format!("rdma{i}"));
        assert_eq!(
            row.device.as_deref(),
            Some(NODE_RAIL_DEVICES[i]),
            "rail {i}"
        );
        assert_eq!(row.port, Some(1));
        // The host's index: 0-1 link-local, 2 RoCE v1, 3 RoCE v2 IPv4 (NCCL_IB_GID_INDEX=3).
        assert_eq!(row.gid_index, Some(3), "rail {i}");
        assert_eq!(
            row.ipv4.as_deref(),
            Some(format!("10.224.0.{}", i + 1).as_str())
        );
        assert_eq!(row.attachment, Attachment::HostNetwork);
        assert!(row.usable, "rail {i}: {:?}", row.reason);
        assert_eq!(row.reason, None);
        assert_eq!(row.state.as_deref(), Some("ACTIVE"));
        assert_eq!(row.link_layer.as_deref(), Some("Ethernet"));
        assert_eq!(row.rate_gbps, Some(100.0));
        // Derived from the netdev MTU 4200 without verbs.
        assert_eq!(row.active_mtu_bytes, Some(4096));
    }
    // PCIe: rdma0-3 on the first root with GPUs 0 and 1, rdma12-15 on the last with 6 and 7.
    let r0 = rail(&r, "rdma0");
    assert_eq!(r0.pci.as_deref(), Some("0000:0c:00.0"));
    assert_eq!(r0.numa_node, Some(3));
    assert_eq!(r0.gpus, vec!["0000:0f:00.0", "0000:15:00.0"]);
    assert_eq!(rail(&r, "rdma5").gpus, vec!["0000:50:00.0", "0000:53:00.0"]);
    assert_eq!(rail(&r, "rdma5").numa_node, Some(1));
    assert_eq!(
        rail(&r, "rdma15").gpus,
        vec!["0000:d6:00.0", "0000:da:00.0"]
    );

    // 18 RDMA devices: 16 rails and the two front-end NICs, listed apart with the reason.
    let names: Vec<&str> = r.not_rails.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, vec!["mlx5_0", "mlx5_13"], "{:#?}", r.not_rails);
    assert!(
        r.not_rails[0].reason.contains("front-end NIC")
            && r.not_rails[0].reason.contains("ens300f0")
            && r.not_rails[0].reason.contains("10.140.66.66"),
        "{}",
        r.not_rails[0].reason
    );
    assert!(
        r.not_rails[1]
            .reason
            .contains("ens800f0 has no IPv4 address"),
        "{}",
        r.not_rails[1].reason
    );
    let inv = sysfs::discover(&roots("rails-hostnet")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(inv.devices.len(), 18);
    assert_rows_match_netdev_resolution("rails-hostnet", &r);
}

#[test]
fn ipvlan_each_pod_gets_its_own_childs_gid_index_and_never_the_hosts() {
    let p1 = report("rails-ipvlan/pod1");
    let p2 = report("rails-ipvlan/pod2");
    for (r, index, first) in [(&p1, 5, 65), (&p2, 7, 81)] {
        assert_eq!(r.rails.len(), 16, "{:#?}", r.rails);
        for (i, row) in r.rails.iter().enumerate() {
            assert_eq!(row.rail as usize, i);
            assert_eq!(
                row.iface,
                format!("net{}", i + 1),
                "rail order follows net1..net16"
            );
            assert_eq!(row.device.as_deref(), Some(NODE_RAIL_DEVICES[i]));
            assert_eq!(row.gid_index, Some(index), "{} of {}", row.iface, r.host);
            assert_eq!(
                row.ipv4.as_deref(),
                Some(format!("10.239.255.{}", first + i).as_str())
            );
            assert_eq!(row.attachment, Attachment::Ipvlan, "{}", row.iface);
            assert!(row.usable, "{}: {:?}", row.iface, row.reason);
        }
        // The front-end NICs are no rails: no interface here, and not given to the pod.
        let names: Vec<&str> = r.not_rails.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, vec!["mlx5_0", "mlx5_13"]);
        assert!(r.not_rails[0]
            .reason
            .contains("no interface of this network namespace"));
        assert!(r.not_rails[0].reason.contains("not in this container"));
    }
    // The field report: net1 of the first pod at index 5, of the second at 7, one device.
    assert_eq!(rail(&p1, "net1").device, rail(&p2, "net1").device);
    assert_eq!(rail(&p1, "net1").device.as_deref(), Some("mlx5_5"));
    assert_eq!(rail(&p1, "net16").device.as_deref(), Some("mlx5_12"));
    assert_ne!(rail(&p1, "net1").gid_index, rail(&p2, "net1").gid_index);
    // The host's RoCE v2 GID (index 3) reads as zeros in the pod, and is never offered.
    let inv = sysfs::discover(&roots("rails-ipvlan/pod1")).unwrap_or_else(|e| panic!("{e}"));
    let port = inv
        .device("mlx5_5")
        .and_then(|d| d.port(1))
        .unwrap_or_else(|| panic!("mlx5_5 port 1"));
    assert!(port.gid(3).is_some_and(|g| g.gid.is_zero()));
    assert!(p1.rails.iter().all(|r| r.gid_index.is_some_and(|i| i > 3)));
    // GPUs follow the master's PCI function: net1 (rdma0, mlx5_5) sits with GPUs 0 and 1.
    assert_eq!(rail(&p1, "net1").gpus, vec!["0000:0f:00.0", "0000:15:00.0"]);
    assert_rows_match_netdev_resolution("rails-ipvlan/pod1", &p1);
    assert_rows_match_netdev_resolution("rails-ipvlan/pod2", &p2);
}

#[test]
fn sriov_vfs_have_their_own_devices_and_a_down_vf_is_listed_with_the_reason() {
    let r = report("rails-sriov");
    let ifaces: Vec<&str> = r.rails.iter().map(|x| x.iface.as_str()).collect();
    assert_eq!(ifaces, vec!["net1", "net2", "net3", "net4"]);
    for (i, row) in r.rails.iter().enumerate() {
        assert_eq!(
            row.device.as_deref(),
            Some(format!("mlx5_{}", 18 + i).as_str())
        );
        assert_eq!(row.attachment, Attachment::Sriov);
        assert_eq!(row.gid_index, Some(3));
        assert_eq!(row.active_mtu_bytes, Some(4096));
    }
    let n1 = rail(&r, "net1");
    assert!(n1.usable);
    assert_eq!(n1.pci.as_deref(), Some("0000:0c:00.2"));
    assert_eq!(n1.gpus, vec!["0000:0f:00.0", "0000:15:00.0"]);
    let n4 = rail(&r, "net4");
    assert!(!n4.usable);
    assert_eq!(n4.state.as_deref(), Some("DOWN"));
    let reason = n4.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("DOWN") && reason.contains("mlx5_21"),
        "{reason}"
    );
    assert_eq!(n4.ipv4.as_deref(), Some("10.56.0.13"));
    // Exclusive mode: only the pod's own devices, so nothing else to list.
    assert!(r.not_rails.is_empty(), "{:#?}", r.not_rails);
    assert_rows_match_netdev_resolution("rails-sriov", &r);
}

#[test]
fn lab_pods_each_pod_its_own_rxe_device_classified_as_software() {
    let a = report("rails-lab-pods/podA");
    let b = report("rails-lab-pods/podB");
    for (r, pod, k) in [(&a, "a", 1), (&b, "b", 2)] {
        assert_eq!(r.rails.len(), 2);
        for (i, row) in r.rails.iter().enumerate() {
            assert_eq!(row.iface, format!("net{}", i + 1));
            assert_eq!(row.device, Some(format!("rxe_{pod}{i}")));
            assert_eq!(row.ipv4, Some(format!("10.224.{i}.{k}")));
            assert_eq!(row.gid_index, Some(1));
            assert_eq!(row.attachment, Attachment::Software);
            assert!(row.usable);
            assert!(row.gpus.is_empty() && row.pci.is_none());
            // 1500 - 96 bytes of RoCE headers: 1024.
            assert_eq!(row.active_mtu_bytes, Some(1024));
        }
        // The other pod's rxe devices are listed in every namespace, and are no rails here.
        let other = if pod == "a" { "b" } else { "a" };
        let names: Vec<String> = r.not_rails.iter().map(|n| n.name.clone()).collect();
        assert_eq!(
            names,
            vec![format!("rxe_{other}0"), format!("rxe_{other}1")]
        );
    }
    assert_rows_match_netdev_resolution("rails-lab-pods/podA", &a);
}

#[test]
fn lab_ipvlan_two_pods_on_one_rail_get_different_indexes() {
    let a = report("rails-lab-ipvlan/podA");
    let b = report("rails-lab-ipvlan/podB");
    for (r, index, k) in [(&a, 2, 1), (&b, 4, 2)] {
        for (i, row) in r.rails.iter().enumerate() {
            assert_eq!(row.device, Some(format!("rxe{i}")));
            assert_eq!(row.gid_index, Some(index));
            assert_eq!(row.ipv4, Some(format!("10.224.{i}.{k}")));
            assert_eq!(
                row.attachment,
                Attachment::Ipvlan,
                "rxe parent is rdma{i}, not net{}",
                i + 1
            );
            assert!(row.usable);
        }
        assert!(r.not_rails.is_empty(), "{:#?}", r.not_rails);
    }
    assert_rows_match_netdev_resolution("rails-lab-ipvlan/podB", &b);
}

/// In a pod, an IPvlan child's `iflink` is its master's ifindex in the node's namespace, and that
/// number can be the child's own ifindex in the pod's (a real node's pod had `net1@if3` as
/// ifindex 3): the child is still an IPvlan child of the master's device.
#[test]
fn lab_ipvlan_child_whose_iflink_equals_its_ifindex_is_still_ipvlan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rails-lab-ipvlan/podA");
    let copied = std::process::Command::new("cp")
        .args([
            "-a",
            &format!("{}/.", src.display()),
            &dir.path().display().to_string(),
        ])
        .status()
        .expect("cp");
    assert!(copied.success());
    for i in [1, 2] {
        let net = dir.path().join(format!("sys/class/net/net{i}"));
        let ifindex = std::fs::read_to_string(net.join("ifindex")).expect("ifindex");
        std::fs::write(net.join("iflink"), ifindex).expect("iflink");
    }
    let r = rails::discover(&SysRoots::under(dir.path()), &SysfsOnly).expect("rails");
    assert_eq!(r.rails.len(), 2);
    for row in &r.rails {
        assert_eq!(row.attachment, Attachment::Ipvlan, "{}", row.iface);
        assert!(row.usable, "{}", row.iface);
    }
}

#[test]
fn json_keeps_the_orchestrators_contract() {
    let r = report("rails-ipvlan/pod2");
    let text = serde_json::to_string(&r).unwrap_or_default();
    let back: RailsReport = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, r);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let row = &v["rails"][0];
    for key in [
        "rail",
        "iface",
        "ipv4",
        "device",
        "port",
        "gid_index",
        "state",
        "link_layer",
        "rate_gbps",
        "active_mtu_bytes",
        "pci",
        "numa_node",
        "gpus",
        "attachment",
        "usable",
        "reason",
        "operstate",
    ] {
        assert!(row.get(key).is_some(), "missing {key} in {row}");
    }
    assert_eq!(row["attachment"], "ipvlan");
    assert_eq!(row["gid_index"], 7);
    assert_eq!(v["schema_version"], 1);
}

/// Issue 56: a rail whose interface is down (`ip link set rdma0 down`) is listed as down, and
/// its reason says so first: railsweep fails it at once instead of waiting for its GID.
#[test]
fn a_rail_whose_interface_is_down_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostnet");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(dir.path())
        .status()
        .expect("cp runs");
    assert!(status.success());
    let tree = dir.path().join("hostnet");
    let up = report_of(&tree);
    assert!(rail(&up, "rdma0").usable);
    assert_eq!(rail(&up, "rdma0").operstate.as_deref(), Some("up"));
    assert!(!rail(&up, "rdma0").interface_down());
    std::fs::write(
        tree.join("sys/devices/pci0000:00/0000:17:00.0/net/rdma0/operstate"),
        "down\n",
    )
    .expect("writes operstate");
    let down = report_of(&tree);
    let r0 = rail(&down, "rdma0");
    assert!(!r0.usable);
    assert!(r0.interface_down());
    assert_eq!(
        r0.reason.as_deref(),
        Some("interface rdma0 is down (operstate down)"),
        "{r0:?}"
    );
    assert!(rail(&down, "rdma1").usable, "the other rails are untouched");
}

fn report_of(tree: &std::path::Path) -> RailsReport {
    rails::discover(&SysRoots::under(tree), &SysfsOnly)
        .unwrap_or_else(|e| panic!("rails of {}: {e}", tree.display()))
}

#[test]
fn engine_hostnet_fixture_a_rail_whose_port_is_down_is_a_rail_that_cannot_be_used() {
    // The engine's hostnet fixture names its rails rdmaN; its front-end NICs are listed apart,
    // and the rail whose port is down is a rail that cannot be used.
    let r = report("hostnet");
    assert_eq!(r.rails.len(), 16);
    let r7 = rail(&r, "rdma7");
    assert!(!r7.usable);
    assert!(r7.reason.as_deref().unwrap_or_default().contains("DOWN"));
    assert_eq!(r.not_rails.len(), 2, "{:#?}", r.not_rails);
}

/// The GPUs of the pod with the usable rails near each, as `(pci, device file, root, rails)`.
fn gpu_rails(r: &RailsReport) -> Vec<(String, String, String, Vec<String>)> {
    r.gpus
        .iter()
        .map(|g| {
            (
                g.pci.clone(),
                g.device_file.clone(),
                g.pcie_root.clone().unwrap_or_default(),
                g.rails.clone(),
            )
        })
        .collect()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Field report 001 with the Topology Manager (restricted, scope pod): the pod's 4 GPUs and 8
/// PFs on the same two PCIe roots; every GPU has the rails of its own root, and none of the
/// 8 rails whose uverbs file the pod was not given counts.
#[test]
fn split_node_aligned_every_gpu_has_the_rails_of_its_own_root() {
    let r = report("rails-split/aligned");
    assert_eq!(r.rails.len(), 16);
    assert_eq!(r.rails.iter().filter(|x| x.usable).count(), 8);
    let n = |v: &[&str]| strings(v);
    assert_eq!(
        gpu_rails(&r),
        vec![
            (
                "0000:0f:00.0".into(),
                "nvidia0".into(),
                "pci0000:00".into(),
                n(&["net1", "net2", "net3", "net4"])
            ),
            (
                "0000:15:00.0".into(),
                "nvidia1".into(),
                "pci0000:00".into(),
                n(&["net1", "net2", "net3", "net4"])
            ),
            (
                "0000:50:00.0".into(),
                "nvidia2".into(),
                "pci0000:40".into(),
                n(&["net5", "net6", "net7", "net8"])
            ),
            (
                "0000:53:00.0".into(),
                "nvidia3".into(),
                "pci0000:40".into(),
                n(&["net5", "net6", "net7", "net8"])
            ),
        ]
    );
    assert_eq!(r.unaligned_gpus().count(), 0);
    assert_eq!(r.gpus[2].node_index, 2);
    assert_eq!(r.gpus[2].numa_node, Some(1));
}

/// Field report 001 without it: the first job's GPUs 2-5 and PFs rdma1, rdma4-6, rdma12-15.
/// GPUs 4 and 5 (pci0000:80) have no PF on their root, although the pod has an IPvlan child
/// on rdma8-11 there: those rails' devices were not given to it.
#[test]
fn split_node_unaligned_names_the_gpus_whose_root_has_no_rail_of_the_pod() {
    let r = report("rails-split/unaligned");
    assert_eq!(r.rails.len(), 16);
    let near_second_root = strings(&["net5", "net6", "net7"]);
    assert_eq!(
        gpu_rails(&r),
        vec![
            (
                "0000:50:00.0".into(),
                "nvidia2".into(),
                "pci0000:40".into(),
                near_second_root.clone()
            ),
            (
                "0000:53:00.0".into(),
                "nvidia3".into(),
                "pci0000:40".into(),
                near_second_root
            ),
            (
                "0000:8c:00.0".into(),
                "nvidia4".into(),
                "pci0000:80".into(),
                vec![]
            ),
            (
                "0000:91:00.0".into(),
                "nvidia5".into(),
                "pci0000:80".into(),
                vec![]
            ),
        ]
    );
    let un: Vec<(&str, usize, Option<i32>)> = r
        .unaligned_gpus()
        .map(|g| (g.pci.as_str(), g.node_index, g.numa_node))
        .collect();
    assert_eq!(
        un,
        vec![("0000:8c:00.0", 4, Some(7)), ("0000:91:00.0", 5, Some(7))]
    );
    // The rails of that root are listed with their GPUs but cannot be used here.
    let net9 = rail(&r, "net9");
    assert!(!net9.usable);
    assert_eq!(net9.gpus, strings(&["0000:8c:00.0", "0000:91:00.0"]));
}

#[test]
fn gpus_of_a_privileged_pod_are_the_nodes_and_a_pod_without_gpus_has_none() {
    // Privileged hostNetwork: every GPU of the node is the pod's, each next to its rails.
    let r = report("rails-hostnet");
    assert_eq!(r.gpus.len(), 8);
    assert_eq!(r.unaligned_gpus().count(), 0);
    assert_eq!(
        r.gpus[7].rails,
        strings(&["rdma12", "rdma13", "rdma14", "rdma15"])
    );
    // The lab's pods: no GPU.
    assert!(report("rails-lab-pods/podA").gpus.is_empty());
    // sysfs shows the node's 8 GPUs (the rails' GPUS column), but no /dev/nvidiaN is here:
    // the container has none.
    let g = report("gpu-node");
    assert!(g.rails.iter().any(|x| !x.gpus.is_empty()), "{:#?}", g.rails);
    assert!(g.gpus.is_empty(), "{:#?}", g.gpus);
}
