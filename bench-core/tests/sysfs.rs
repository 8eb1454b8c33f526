//! Discovery over the fixture trees in tests/fixtures (see its README).

use std::path::PathBuf;

use bench_core::gid::GidType;
use bench_core::sysfs::{self, BindingSource, LinkLayer, PortState, SysRoots};

fn roots(tree: &str) -> SysRoots {
    SysRoots::under(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(tree),
    )
}

fn inventory(tree: &str) -> sysfs::Inventory {
    sysfs::discover(&roots(tree)).expect("discovery never fails on a readable tree")
}

#[test]
fn rxe_pod_lists_every_device_but_owns_only_its_own() {
    let inv = inventory("rxe-pods/podA");
    assert_eq!(inv.device_names(), ["rxe_a0", "rxe_a1", "rxe_b0", "rxe_b1"]);

    let a0 = inv.device("rxe_a0").expect("rxe_a0");
    assert!(a0.is_rxe());
    assert_eq!(a0.pci_address, None);
    assert_eq!(a0.numa_node, None);
    assert_eq!(a0.parent.as_deref(), Some("net1"));
    assert_eq!(a0.uverbs.as_deref(), Some("uverbs0"));
    assert!(a0.uverbs_present);
    let p = a0.port(1).expect("port 1");
    assert_eq!(p.state, Some(PortState::Active));
    assert_eq!(p.link_layer, Some(LinkLayer::Ethernet));
    assert_eq!(p.rate.as_deref(), Some("10 Gb/sec (1X FDR10)"));
    assert_eq!(p.line_rate_gbps, Some(10.0));
    assert_eq!(p.gid_table_len, 8);
    let g1 = p.gid(1).expect("gid 1");
    assert_eq!(
        g1.gid.to_string(),
        "0000:0000:0000:0000:0000:ffff:0ae0:0001"
    );
    assert_eq!(
        g1.ipv4().map(|a| a.to_string()).as_deref(),
        Some("10.224.0.1")
    );
    assert_eq!(g1.gid_type, Some(GidType::RoceV2));
    assert_eq!(g1.netdev.as_deref(), Some("net1"));
    assert!(g1.netdev_here);
    let g0 = p.gid(0).expect("gid 0");
    assert!(g0.gid.is_link_local());
    // Empty entries: zeros, type and netdev unreadable.
    let g5 = p.gid(5).expect("gid 5");
    assert!(g5.gid.is_zero());
    assert_eq!(
        (g5.gid_type.clone(), g5.netdev.clone(), g5.netdev_here),
        (None, None, false)
    );

    // podB's devices: GID, type and even the netdev read (as on the lab's kernel), and podB's
    // interfaces have the same names as ours; only the address tells that they are not ours.
    for (dev, ndev) in [("rxe_b0", "net1"), ("rxe_b1", "net2")] {
        for i in [0, 1] {
            let g = inv
                .device(dev)
                .and_then(|d| d.port(1))
                .and_then(|p| p.gid(i))
                .expect("gid");
            assert!(!g.gid.is_zero(), "{dev} {i}");
            assert_eq!(g.gid_type, Some(GidType::RoceV2), "{dev} {i}");
            assert_eq!(g.netdev.as_deref(), Some(ndev), "{dev} {i}");
            assert!(!g.netdev_here, "{dev} {i}");
        }
    }

    // Only this pod's interfaces map to devices, and only through the GID tables.
    let pairs: Vec<_> = inv
        .netdevs
        .iter()
        .map(|b| (b.netdev.as_str(), b.device.as_str(), b.port, b.source))
        .collect();
    assert_eq!(
        pairs,
        [
            ("net1", "rxe_a0", 1, BindingSource::GidTable),
            ("net2", "rxe_a1", 1, BindingSource::GidTable)
        ]
    );
    assert_eq!(inv.netdevs[0].mtu, Some(1500));
}

#[test]
fn rxe_other_pod_sees_the_mirror_image() {
    let inv = inventory("rxe-pods/podB");
    let pairs: Vec<_> = inv
        .netdevs
        .iter()
        .map(|b| (b.netdev.as_str(), b.device.as_str()))
        .collect();
    assert_eq!(pairs, [("net1", "rxe_b0"), ("net2", "rxe_b1")]);
    let g = inv
        .device("rxe_b1")
        .and_then(|d| d.port(1))
        .and_then(|p| p.gid(1))
        .expect("gid");
    assert_eq!(g.ip().map(|a| a.to_string()).as_deref(), Some("10.224.1.2"));
}

#[test]
fn rxe_ipvlan_children_share_a_device_and_a_name() {
    for (pod, mine, theirs) in [
        ("rxe-ipvlan/podA", [2, 3], [4, 5]),
        ("rxe-ipvlan/podB", [4, 5], [2, 3]),
    ] {
        let inv = inventory(pod);
        let p = inv.device("rxe0").and_then(|d| d.port(1)).expect("port");
        for i in mine {
            assert!(p.gid(i).expect("gid").netdev_here, "{pod} {i}");
        }
        // The other pod's child (also net1) and the master's GIDs (rdma0, not here).
        for i in theirs.into_iter().chain([0, 1]) {
            let g = p.gid(i).expect("gid");
            assert!(g.netdev.is_some() && !g.netdev_here, "{pod} {i}");
        }
        let pairs: Vec<_> = inv
            .netdevs
            .iter()
            .map(|b| (b.netdev.as_str(), b.device.as_str()))
            .collect();
        assert_eq!(pairs, [("net1", "rxe0"), ("net2", "rxe1")], "{pod}");
    }
}

#[test]
fn without_proc_net_names_alone_decide_and_collide() {
    // Documented fallback: when /proc/net cannot be read, a GID is ours when its netdev name
    // exists here, which on the lab's layout also claims the other pod's GIDs.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut r = roots("rxe-pods/podB");
    r.proc = dir.path().to_path_buf();
    let inv = sysfs::discover(&r).expect("discover");
    let g = inv
        .device("rxe_a0")
        .and_then(|d| d.port(1))
        .and_then(|p| p.gid(1))
        .expect("gid");
    assert!(g.netdev_here);
    assert_eq!(inv.bindings_of("net1").len(), 2);
}

#[test]
fn ipvlan_pod_sees_host_gids_as_foreign_and_index_3_as_zero() {
    let inv = inventory("ipvlan/pod1");
    let d = inv.device("mlx5_5").expect("mlx5_5");
    assert_eq!(d.pci_address.as_deref(), Some("0000:5a:00.0"));
    assert_eq!(d.numa_node, Some(0));
    assert_eq!(d.driver.as_deref(), Some("mlx5_core"));
    assert!(!d.is_rxe());
    let p = d.port(1).expect("port");
    assert_eq!(p.line_rate_gbps, Some(200.0));
    assert_eq!(p.gid_table_len, 16);
    assert!(p.gid(3).expect("3").gid.is_zero());
    for i in [0, 1, 2, 6, 7] {
        let g = p.gid(i).expect("gid");
        assert!(!g.gid.is_zero() && !g.netdev_here, "index {i}");
    }
    let g5 = p.gid(5).expect("5");
    assert!(g5.netdev_here);
    assert_eq!(g5.gid_type, Some(GidType::RoceV2));
    assert_eq!(p.gid(4).expect("4").gid_type, Some(GidType::IbRoceV1));
    assert_eq!(p.netdevs_here(), ["net1"]);

    // The other NIC: visible, nothing of ours on it, and no uverbs node given to the pod.
    let d4 = inv.device("mlx5_4").expect("mlx5_4");
    assert!(d4.uverbs.is_some() && !d4.uverbs_present);
    assert!(d4.port(1).expect("port").netdevs_here().is_empty());

    let pairs: Vec<_> = inv
        .netdevs
        .iter()
        .map(|b| (b.netdev.as_str(), b.device.as_str(), b.mtu))
        .collect();
    assert_eq!(pairs, [("net1", "mlx5_5", Some(9000))]);
}

#[test]
fn hostnet_maps_sixteen_rails_and_front_end_nics_through_pci() {
    let r = roots("hostnet");
    let inv = sysfs::discover(&r).expect("discover");
    assert_eq!(inv.devices.len(), 18);
    // Natural order: mlx5_2 before mlx5_10.
    assert_eq!(inv.devices[2].name, "mlx5_2");
    assert_eq!(inv.devices[10].name, "mlx5_10");
    for n in 0..16u32 {
        let name = format!("mlx5_{n}");
        let d = inv.device(&name).expect("device");
        assert_eq!(d.pci_address, Some(format!("0000:{:02x}:00.0", 0x17 + n)));
        assert_eq!(d.numa_node, Some(if n < 8 { 0 } else { 1 }));
        let b = inv.bindings_of(&format!("rdma{n}"));
        assert_eq!(b.len(), 1, "rdma{n}");
        assert_eq!((b[0].device.as_str(), b[0].port), (name.as_str(), 1));
        // Found through the PCI function first.
        assert_eq!(b[0].source, BindingSource::PciFunction);
        assert_eq!(b[0].mtu, Some(4200));
    }
    let p7 = inv.device("mlx5_7").and_then(|d| d.port(1)).expect("port");
    assert_eq!(p7.state, Some(PortState::Down));
    assert_eq!(
        inv.device("mlx5_0")
            .and_then(|d| d.port(1))
            .and_then(|p| p.line_rate_gbps),
        Some(400.0)
    );

    assert_eq!(
        inv.port_for_netdev(&r, "ens9f1np1").expect("front-end"),
        ("mlx5_17".to_string(), 1)
    );
    assert!(inv.bindings_of("docker0").is_empty());
    assert!(inv.bindings_of("lo").is_empty());
    assert_eq!(inv.netdevs.len(), 18);
}

#[test]
fn unknown_netdevs_are_named_with_what_exists() {
    let r = roots("hostnet");
    let inv = sysfs::discover(&r).expect("discover");
    let e = inv
        .port_for_netdev(&r, "docker0")
        .expect_err("docker0 has no RDMA");
    let msg = e.to_string();
    assert!(
        msg.starts_with("network interface docker0 maps to no RDMA device"),
        "{msg}"
    );
    assert!(!msg.contains("does not exist"), "{msg}");
    assert!(msg.contains("rdma3 -> mlx5_3 port 1"), "{msg}");
    let e = inv
        .port_for_netdev(&r, "net9")
        .expect_err("no such interface");
    assert!(e.to_string().contains("(it does not exist here)"), "{e}");
}

#[test]
fn read_device_names_what_exists() {
    let e = sysfs::read_device(&roots("rxe-pods/podA"), "mlx5_0").expect_err("no mlx5 here");
    assert_eq!(
        e.to_string(),
        "RDMA device mlx5_0 not found; devices here: rxe_a0, rxe_a1, rxe_b0, rxe_b1"
    );
}

#[test]
fn empty_root_is_an_empty_inventory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = sysfs::discover(&SysRoots::under(dir.path())).expect("discover");
    assert!(inv.devices.is_empty() && inv.netdevs.is_empty());
}

#[test]
fn memlock_limit_from_proc() {
    assert_eq!(sysfs::memlock_limit_kib(&roots("hostnet")), Some(8192));
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(sysfs::memlock_limit_kib(&SysRoots::under(dir.path())), None);
}

/// What `ibv_query_gid_table` would list for the fixture: every entry that does not read as
/// zeros.
fn populated(inv: &sysfs::Inventory, device: &str) -> Option<Vec<(u8, u32)>> {
    let d = inv.device(device)?;
    Some(
        d.ports
            .iter()
            .flat_map(|p| {
                p.gids
                    .iter()
                    .filter(|g| !g.gid.is_zero())
                    .map(move |g| (p.num, g.index))
            })
            .collect(),
    )
}

#[test]
fn a_listed_gid_table_reads_only_the_populated_entries_and_finds_the_same_rails() {
    let r = roots("rxe-pods/podA");
    let full = sysfs::discover(&r).expect("discover");
    let hinted = sysfs::discover_with(&r, &|d| populated(&full, d)).expect("discover");
    assert_eq!(hinted.netdevs, full.netdevs);
    for d in &full.devices {
        let h = hinted.device(&d.name).expect("same devices");
        for p in &d.ports {
            let hp = h.port(p.num).expect("same ports");
            assert_eq!(hp.gid_table_len, p.gid_table_len, "{} table length", d.name);
            let nonzero: Vec<_> = p.gids.iter().filter(|g| !g.gid.is_zero()).collect();
            assert_eq!(hp.gids.iter().collect::<Vec<_>>(), nonzero, "{}", d.name);
        }
    }
    // Entries the list leaves out are not read at all.
    let only0 =
        sysfs::discover_with(&r, &|d| (d == "rxe_a0").then(|| vec![(1, 0)])).expect("discover");
    let a0 = only0
        .device("rxe_a0")
        .expect("rxe_a0")
        .port(1)
        .expect("port 1");
    assert_eq!(a0.gids.iter().map(|g| g.index).collect::<Vec<_>>(), [0]);
    assert!(a0.gid(1).is_none());
    // Devices the list says nothing about are read in full.
    assert_eq!(
        only0
            .device("rxe_b0")
            .expect("rxe_b0")
            .port(1)
            .expect("port")
            .gids
            .len(),
        8
    );
}
