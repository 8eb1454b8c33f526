//! Choosing device, port and GID over the fixture trees in tests/fixtures.

use std::path::PathBuf;

use bench_core::error::Error;
use bench_core::rails::{resolve_rail, Rail, RailRequest};
use bench_core::sysfs::{self, SysRoots};

fn roots(tree: &str) -> SysRoots {
    SysRoots::under(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(tree),
    )
}

fn resolve(tree: &str, req: RailRequest) -> Result<Rail, Error> {
    let r = roots(tree);
    let inv = sysfs::discover(&r).expect("discover");
    resolve_rail(&inv, &r, &req)
}

fn req(device: Option<&str>, netdev: Option<&str>, gid_index: Option<u32>) -> RailRequest {
    RailRequest {
        device: device.map(str::to_string),
        netdev: netdev.map(str::to_string),
        port: None,
        gid_index,
    }
}

#[test]
fn rxe_pod_defaults_to_its_own_ipv4_gid() {
    let r = resolve("rxe-pods/podA", req(None, None, None)).expect("rail");
    assert_eq!((r.device.as_str(), r.port, r.gid_index), ("rxe_a0", 1, 1));
    assert_eq!(r.netdev.as_deref(), Some("net1"));
    assert_eq!(r.ip.map(|a| a.to_string()).as_deref(), Some("10.224.0.1"));
    assert_eq!(r.line_rate_gbps, Some(10.0));
    assert_eq!(r.netdev_mtu, Some(1500));

    // podB: the first device in name order (rxe_a0) is not usable there; rxe_b0 is chosen.
    let r = resolve("rxe-pods/podB", req(None, None, None)).expect("rail");
    assert_eq!((r.device.as_str(), r.gid_index), ("rxe_b0", 1));
    assert_eq!(r.ip.map(|a| a.to_string()).as_deref(), Some("10.224.0.2"));
}

#[test]
fn netdev_names_the_rail() {
    let r = resolve("rxe-pods/podA", req(None, Some("net2"), None)).expect("rail");
    assert_eq!((r.device.as_str(), r.gid_index), ("rxe_a1", 1));
    assert_eq!(r.ip.map(|a| a.to_string()).as_deref(), Some("10.224.1.1"));
    let r = resolve("rxe-pods/podB", req(None, Some("net2"), None)).expect("rail");
    assert_eq!(r.device, "rxe_b1");
    // Device and netdev given together must agree.
    let r = resolve("rxe-pods/podA", req(Some("rxe_a1"), Some("net2"), None)).expect("rail");
    assert_eq!(r.device, "rxe_a1");
    let e =
        resolve("rxe-pods/podA", req(Some("rxe_a0"), Some("net2"), None)).expect_err("mismatch");
    assert_eq!(
        e.to_string(),
        "network interface net2 is not on RDMA device rxe_a0; it is on rxe_a1 port 1"
    );
}

#[test]
fn another_pods_device_has_no_usable_gid_and_the_error_says_where_to_look() {
    let e = resolve("rxe-pods/podA", req(Some("rxe_b0"), None, None)).expect_err("foreign");
    assert_eq!(
        e.to_string(),
        "rxe_b0 port 1 has no RoCE v2 IPv4 GID in this network namespace; its GIDs here: none; \
         devices with one here: rxe_a0 (net1 10.224.0.1), rxe_a1 (net2 10.224.1.1)"
    );
    let e = resolve("rxe-pods/podA", req(Some("rxe_b0"), None, Some(1))).expect_err("foreign");
    assert!(matches!(e, Error::GidNotUsable { index: 1, .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "GID index 1 of rxe_b0 port 1 belongs to another network namespace or is empty; usable here: none"
    );
}

#[test]
fn explicit_index_is_validated() {
    // Link-local GID of our own netdev: allowed when asked for explicitly.
    let r = resolve("rxe-pods/podA", req(Some("rxe_a0"), None, Some(0))).expect("index 0");
    assert_eq!(r.gid_index, 0);
    assert!(r.gid.is_link_local());
    // Empty entry.
    let e = resolve("rxe-pods/podA", req(Some("rxe_a0"), None, Some(6))).expect_err("empty");
    assert_eq!(
        e.to_string(),
        "GID index 6 of rxe_a0 port 1 belongs to another network namespace or is empty; usable here: 1 (net1 10.224.0.1)"
    );
    // Beyond the table.
    let e = resolve("rxe-pods/podA", req(Some("rxe_a0"), None, Some(8))).expect_err("range");
    assert_eq!(
        e.to_string(),
        "GID index 8 of rxe_a0 port 1 is out of range (the table has 8 entries); usable here: 1 (net1 10.224.0.1)"
    );
    // Index and netdev disagree.
    let e =
        resolve("rxe-pods/podA", req(Some("rxe_a0"), Some("net1"), Some(5))).expect_err("empty");
    assert!(matches!(e, Error::GidNotUsable { .. }), "{e}");
}

#[test]
fn rxe_ipvlan_children_are_told_apart_by_address() {
    let r = resolve("rxe-ipvlan/podA", req(None, None, None)).expect("podA");
    assert_eq!((r.device.as_str(), r.gid_index), ("rxe0", 2));
    assert_eq!(r.ip.map(|a| a.to_string()).as_deref(), Some("10.224.0.1"));
    let r = resolve("rxe-ipvlan/podB", req(None, Some("net2"), None)).expect("podB");
    assert_eq!((r.device.as_str(), r.gid_index), ("rxe1", 4));
    assert_eq!(r.ip.map(|a| a.to_string()).as_deref(), Some("10.224.1.2"));
    let e = resolve("rxe-ipvlan/podA", req(Some("rxe0"), None, Some(4))).expect_err("podB's");
    assert_eq!(
        e.to_string(),
        "GID index 4 of rxe0 port 1 belongs to another network namespace or is empty; usable here: 2 (net1 10.224.0.1)"
    );
    // The master's GID (rdma0 lives in the initial namespace).
    let e = resolve("rxe-ipvlan/podA", req(Some("rxe0"), None, Some(1))).expect_err("master's");
    assert!(matches!(e, Error::GidNotUsable { index: 1, .. }), "{e}");
}

#[test]
fn ipvlan_child_gid_index_differs_per_pod() {
    let r = resolve("ipvlan/pod1", req(None, None, None)).expect("pod1");
    assert_eq!((r.device.as_str(), r.gid_index), ("mlx5_5", 5));
    assert_eq!(r.ip.map(|a| a.to_string()).as_deref(), Some("10.239.255.1"));
    assert_eq!(r.pci_address.as_deref(), Some("0000:5a:00.0"));
    assert_eq!(r.netdev_mtu, Some(9000));
    let r = resolve("ipvlan/pod2", req(None, Some("net1"), None)).expect("pod2");
    assert_eq!((r.device.as_str(), r.gid_index), ("mlx5_5", 7));
    assert_eq!(r.ip.map(|a| a.to_string()).as_deref(), Some("10.239.255.2"));
}

#[test]
fn ipvlan_host_gid_index_3_is_refused_with_the_usable_one() {
    let e = resolve("ipvlan/pod1", req(Some("mlx5_5"), None, Some(3))).expect_err("zero gid");
    assert_eq!(
        e.to_string(),
        "GID index 3 of mlx5_5 port 1 belongs to another network namespace or is empty; usable here: 5 (net1 10.239.255.1)"
    );
    // A host GID that reads fine but whose netdev is elsewhere.
    let e = resolve("ipvlan/pod2", req(Some("mlx5_5"), None, Some(5))).expect_err("pod1's gid");
    assert_eq!(
        e.to_string(),
        "GID index 5 of mlx5_5 port 1 belongs to another network namespace or is empty; usable here: 7 (net1 10.239.255.2)"
    );
    // The RoCE v1 sibling of our GID is ours: allowed when asked for.
    let r = resolve("ipvlan/pod1", req(Some("mlx5_5"), None, Some(4))).expect("v1");
    assert_eq!(r.gid_index, 4);
}

#[test]
fn hostnet_rails_by_interface() {
    for n in [0u32, 3, 15] {
        let r = resolve("hostnet", req(None, Some(&format!("rdma{n}")), None)).expect("rail");
        assert_eq!(r.device, format!("mlx5_{n}"));
        assert_eq!(r.gid_index, 3);
        assert_eq!(r.ip.map(|a| a.to_string()), Some(format!("10.224.{n}.1")));
        assert_eq!(r.line_rate_gbps, Some(400.0));
        assert_eq!(r.numa_node, Some(if n < 8 { 0 } else { 1 }));
    }
    let r = resolve("hostnet", req(None, Some("ens9f0np0"), None)).expect("front-end");
    assert_eq!((r.device.as_str(), r.gid_index), ("mlx5_16", 3));
    // No device named: the first with a usable GID, in natural order.
    let r = resolve("hostnet", req(None, None, None)).expect("default");
    assert_eq!(r.device, "mlx5_0");
}

#[test]
fn hostnet_port_down_is_named() {
    let e = resolve("hostnet", req(None, Some("rdma7"), None)).expect_err("down");
    assert_eq!(
        e.to_string(),
        "port 1 of RDMA device mlx5_7 is DOWN (physical state 3: Disabled); the link is down or not configured"
    );
}

#[test]
fn unknown_names_list_what_exists() {
    let e = resolve("rxe-pods/podA", req(Some("mlx5_0"), None, None)).expect_err("unknown");
    assert_eq!(
        e.to_string(),
        "RDMA device mlx5_0 not found; devices here: rxe_a0, rxe_a1, rxe_b0, rxe_b1"
    );
    let e = resolve("rxe-pods/podA", req(None, Some("eth0"), None)).expect_err("eth0");
    assert_eq!(
        e.to_string(),
        "network interface eth0 maps to no RDMA device in this network namespace; interfaces that do: \
         net1 -> rxe_a0 port 1, net2 -> rxe_a1 port 1"
    );
    let e = resolve(
        "rxe-pods/podA",
        RailRequest {
            port: Some(2),
            ..req(Some("rxe_a0"), None, None)
        },
    )
    .expect_err("port 2");
    assert_eq!(
        e.to_string(),
        "RDMA device rxe_a0 has no port 2 (ports: 1..=1)"
    );
}

#[test]
fn no_devices_at_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = SysRoots::under(dir.path());
    let inv = sysfs::discover(&r).expect("discover");
    let e = resolve_rail(&inv, &r, &RailRequest::default()).expect_err("none");
    assert_eq!(
        e.to_string(),
        "no RDMA device has a usable RoCE v2 IPv4 GID in this network namespace; devices here: none; \
         name one with --ib-dev/-d or --netdev"
    );
}

#[test]
fn a_named_gid_index_reads_only_that_entry_and_the_whole_table_to_explain_a_refusal() {
    let r = roots("rxe-pods/podA");
    // Only entry 1 is read; the table's length is still counted.
    let dev = sysfs::read_device_scoped(&r, "rxe_a0", sysfs::GidScope::One(1)).expect("device");
    let port = dev.port(1).expect("port 1");
    assert_eq!(
        port.gids.iter().map(|g| g.index).collect::<Vec<_>>(),
        vec![1]
    );
    let full = sysfs::read_device(&r, "rxe_a0").expect("device");
    assert_eq!(
        port.gid_table_len,
        full.port(1).expect("port 1").gid_table_len
    );
    assert!(full.port(1).expect("port 1").gids.len() > 1);
    let none = sysfs::read_device_scoped(&r, "rxe_a0", sysfs::GidScope::Skip).expect("device");
    assert!(none.port(1).expect("port 1").gids.is_empty());

    // The fast path gives the same rail as a full discovery.
    let (fast, _) = bench_core::session::resolve_request(&r, &req(Some("rxe_a0"), None, Some(1)))
        .expect("rail");
    assert_eq!(
        fast,
        resolve("rxe-pods/podA", req(Some("rxe_a0"), None, Some(1))).expect("rail")
    );
    // A refused index is explained from the whole table: the usable GIDs are listed.
    let e = bench_core::session::resolve_request(&r, &req(Some("rxe_a0"), None, Some(5)))
        .expect_err("entry 5 is empty");
    let full_err =
        resolve("rxe-pods/podA", req(Some("rxe_a0"), None, Some(5))).expect_err("refused");
    assert_eq!(e.to_string(), full_err.to_string());
    assert!(e.to_string().contains("1 (net1 10.224.0.1)"), "{e}");
}
