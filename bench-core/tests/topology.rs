//! Nearest-GPU choice over the sysfs fixture of an 8-GPU, 16-rail node (tests/fixtures/gpu-node,
//! made by gpu-generate.py): four PCIe roots, each with 2 GPUs and 2 dual-port NICs; GPU i
//! shares a PCIe switch with rails 2i and 2i+1.

use std::path::PathBuf;

use bench_core::sysfs::{self, SysRoots};
use bench_core::topology::{
    self, gpus_near, nearest_gpu, rdma_devices_near, sysfs_gpus, PciLocation, TopologyError,
};
use wire::topology::{Distance, Proximity};

fn roots(tree: &str) -> SysRoots {
    SysRoots::under(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(tree),
    )
}

const GPUS: [&str; 8] = [
    "0000:0f:00.0",
    "0000:13:00.0",
    "0000:4e:00.0",
    "0000:51:00.0",
    "0000:8d:00.0",
    "0000:90:00.0",
    "0000:c6:00.0",
    "0000:cb:00.0",
];

#[test]
fn sysfs_lists_the_eight_gpus_in_pci_order_and_not_the_nvswitches() {
    let gpus = sysfs_gpus(&roots("gpu-node"));
    let addrs: Vec<&str> = gpus.iter().map(|g| g.address()).collect();
    assert_eq!(addrs, GPUS);
    for (i, g) in gpus.iter().enumerate() {
        assert_eq!(g.index, i);
        assert_eq!(g.driver.as_deref(), Some("nvidia"));
        assert_eq!(g.location.numa_node, Some(if i < 4 { 0 } else { 1 }));
    }
}

#[test]
fn a_nic_location_names_its_host_bridge_and_every_bridge() {
    let loc = PciLocation::of_rdma_device(&roots("gpu-node"), "mlx5_1").expect("mlx5_1");
    assert_eq!(loc.address, "0000:0c:00.1");
    assert_eq!(loc.host_bridge.as_deref(), Some("pci0000:00"));
    assert_eq!(
        loc.bridges,
        [
            "0000:00:01.1",
            "0000:01:00.0",
            "0000:02:00.0",
            "0000:03:00.0",
            "0000:04:08.0"
        ]
    );
    assert_eq!(loc.numa_node, Some(0));
    // The same function by its bus id, in CUDA's spelling.
    let same = PciLocation::of_function(&roots("gpu-node"), "0000:0C:00.1").expect("by bus id");
    assert_eq!(same, loc);
}

#[test]
fn every_rail_gets_the_gpu_under_its_own_switch() {
    let r = roots("gpu-node");
    for rail in 0..16 {
        let dev = format!("mlx5_{rail}");
        let c = nearest_gpu(&r, &dev, None).expect("a GPU");
        assert_eq!(c.gpu, GPUS[rail / 2], "{dev}");
        assert_eq!(c.sysfs_index, rail / 2, "{dev}");
        assert_eq!(
            c.distance,
            Distance {
                proximity: Proximity::SameSwitch,
                bridges: 3
            },
            "{dev}"
        );
    }
}

#[test]
fn the_other_gpu_of_the_root_is_next_and_the_rest_are_farther() {
    let r = roots("gpu-node");
    let near = gpus_near(&r, "mlx5_2", Proximity::SameRootPort).expect("mlx5_2");
    let v: Vec<(&str, Proximity)> = near
        .iter()
        .map(|(g, d)| (g.address(), d.proximity))
        .collect();
    assert_eq!(
        v,
        [
            ("0000:13:00.0", Proximity::SameSwitch),
            ("0000:0f:00.0", Proximity::SameRootPort)
        ]
    );
    // Everything, nearest first: the root's two GPUs, then the other root of NUMA node 0, then
    // NUMA node 1.
    let all = gpus_near(&r, "mlx5_2", Proximity::Remote).expect("mlx5_2");
    let p: Vec<Proximity> = all.iter().map(|(_, d)| d.proximity).collect();
    assert_eq!(
        p,
        [
            Proximity::SameSwitch,
            Proximity::SameRootPort,
            Proximity::SameNuma,
            Proximity::SameNuma,
            Proximity::Remote,
            Proximity::Remote,
            Proximity::Remote,
            Proximity::Remote
        ]
    );
}

#[test]
fn nics_without_a_gpu_on_their_root_fall_back_to_host_bridge_then_numa() {
    let r = roots("gpu-node");
    // mlx5_16 sits on another root port of root 2's host bridge.
    let c = nearest_gpu(&r, "mlx5_16", None).expect("mlx5_16");
    assert_eq!(c.gpu, GPUS[2]);
    assert_eq!(c.distance.proximity, Proximity::SameHostBridge);
    // mlx5_17 has a host bridge of its own on NUMA node 1.
    let c = nearest_gpu(&r, "mlx5_17", None).expect("mlx5_17");
    assert_eq!(c.gpu, GPUS[4]);
    assert_eq!(c.distance.proximity, Proximity::SameNuma);
    assert!(gpus_near(&r, "mlx5_17", Proximity::SameRootPort)
        .expect("mlx5_17")
        .is_empty());
}

#[test]
fn the_choice_keeps_to_the_gpus_cuda_sees() {
    let r = roots("gpu-node");
    // A pod given GPU 1 only (CUDA's spelling): rail 0 gets it, one switch level away.
    let c = nearest_gpu(&r, "mlx5_0", Some(&["00000000:13:00.0".to_string()])).expect("one GPU");
    assert_eq!(c.gpu, GPUS[1]);
    assert_eq!(c.distance.proximity, Proximity::SameRootPort);
    // A pod given the NUMA-1 half: rail 0 is remote from all of them; the first wins.
    let half: Vec<String> = GPUS[4..].iter().map(|s| s.to_uppercase()).collect();
    let c = nearest_gpu(&r, "mlx5_0", Some(&half)).expect("half");
    assert_eq!(c.gpu, GPUS[4]);
    assert_eq!(c.distance.proximity, Proximity::Remote);
    // Rail 12 in that pod still gets its own GPU.
    let c = nearest_gpu(&r, "mlx5_12", Some(&half)).expect("half");
    assert_eq!(c.gpu, GPUS[6]);
    assert_eq!(c.distance.proximity, Proximity::SameSwitch);
    // None of them.
    let e = nearest_gpu(&r, "mlx5_0", Some(&[])).expect_err("no GPU");
    assert!(matches!(e, TopologyError::NoGpu { .. }), "{e}");
    assert!(e.to_string().contains("none of the 8 GPU(s)"), "{e}");
}

#[test]
fn each_gpu_lists_its_two_rails_first() {
    let r = roots("gpu-node");
    for (i, gpu) in GPUS.iter().enumerate() {
        let near = rdma_devices_near(&r, gpu).expect("devices");
        assert_eq!(near.len(), 18, "16 rails and 2 front-end NICs");
        let first: Vec<(&str, Proximity)> = near
            .iter()
            .take(3)
            .map(|(n, d)| (n.as_str(), d.proximity))
            .collect();
        let a = format!("mlx5_{}", 2 * i);
        let b = format!("mlx5_{}", 2 * i + 1);
        assert_eq!(first[0], (a.as_str(), Proximity::SameSwitch), "GPU {i}");
        assert_eq!(first[1], (b.as_str(), Proximity::SameSwitch), "GPU {i}");
        assert_eq!(first[2].1, Proximity::SameRootPort, "GPU {i}");
    }
}

#[test]
fn rxe_is_near_no_gpu() {
    let e = nearest_gpu(&roots("rxe-pods/podA"), "rxe_a0", None).expect_err("rxe");
    assert!(matches!(e, TopologyError::NotPci { .. }), "{e}");
    assert!(e.to_string().contains("--use_cuda N"), "{e}");
    // A device that does not exist is said to be missing (seen on the H200 machine, where
    // `--use_cuda auto -d mlx5_0` was told mlx5_0 was "not a PCI function").
    let e = nearest_gpu(&roots("gpu-node"), "mlx5_99", None).expect_err("no such device");
    assert!(matches!(e, TopologyError::NoDevice { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with("no RDMA device mlx5_99 (devices here: mlx5_0, mlx5_1"),
        "{e}"
    );
}

#[test]
fn a_node_without_gpus_says_so() {
    let e = nearest_gpu(&roots("hostnet"), "mlx5_0", None).expect_err("no GPUs in hostnet");
    assert!(matches!(e, TopologyError::NoGpu { .. }), "{e}");
    assert!(topology::sysfs_gpus(&roots("hostnet")).is_empty());
}

#[test]
fn the_fixture_is_a_discoverable_rail_node_too() {
    let inv = sysfs::discover(&roots("gpu-node")).expect("discover");
    assert_eq!(inv.devices.len(), 18);
    for rail in 0..16 {
        let b = inv.bindings_of(&format!("rdma{rail}"));
        assert_eq!(b.len(), 1, "rdma{rail}");
        assert_eq!(b[0].device, format!("mlx5_{rail}"));
    }
    let d = inv.device("mlx5_5").expect("mlx5_5");
    assert_eq!(d.pci_address.as_deref(), Some("0000:47:00.1"));
    assert_eq!(d.numa_node, Some(0));
}
