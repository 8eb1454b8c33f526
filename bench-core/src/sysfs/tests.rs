//! Unit tests of sysfs discovery.

use std::fs;
use std::net::Ipv4Addr;

use super::*;
use crate::error::Error;
use crate::gid::Gid;

#[test]
fn rates() {
    assert_eq!(parse_rate_gbps("100 Gb/sec (4X EDR)"), Some(100.0));
    assert_eq!(parse_rate_gbps("2.5 Gb/sec (1X SDR)"), Some(2.5));
    assert_eq!(parse_rate_gbps("10 Gb/sec (1X SDR)"), Some(10.0));
    assert_eq!(parse_rate_gbps("400 Gb/sec (4X NDR)"), Some(400.0));
    assert_eq!(parse_rate_gbps("53.125 Gb/sec (1X HDR)"), Some(53.125));
    assert_eq!(parse_rate_gbps("Unknown"), None);
    assert_eq!(parse_rate_gbps(""), None);
}

#[test]
fn states() {
    assert_eq!(PortState::parse("4: ACTIVE"), PortState::Active);
    assert_eq!(PortState::parse("1: DOWN\n"), PortState::Down);
    assert_eq!(PortState::parse("7: WHAT").name(), "7: WHAT");
}

#[test]
fn pci() {
    assert!(is_pci_address("0000:17:00.0"));
    assert!(!is_pci_address("rxe0"));
    assert!(!is_pci_address("0000:17:00"));
}

#[test]
fn pci_addresses_are_the_kernels_lowercase_hex() {
    assert!(is_pci_address("0000:0f:00.0"));
    assert!(is_pci_address("000a:bc:1f.7"));
    assert!(
        !is_pci_address("0000:0F:00.0"),
        "CUDA's spelling is no sysfs name"
    );
    assert!(!is_pci_address("000A:BC:1F.7"));
    assert!(!is_pci_address("0000:0g:00.0"));
    assert!(!is_pci_address("0000-0f-00.0"));
    assert!(!is_pci_address("00000000:0f:00.0"));
}

#[test]
fn a_missing_device_class_is_no_device_an_unreadable_one_an_error() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let roots = SysRoots::under(dir.path());
    let inv = discover(&roots).expect("no sysfs at all: no devices");
    assert!(inv.devices.is_empty() && inv.netdevs.is_empty());
    let class = dir.path().join("sys/class");
    fs::create_dir_all(&class).expect("sys/class");
    fs::write(class.join("infiniband"), "").expect("sys/class/infiniband");
    match discover(&roots) {
        Err(Error::Sysfs { path, .. }) => assert_eq!(path, class.join("infiniband")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn proc_net_parsers_on_lab_captures() {
    // From capture_lab.sh in the lab's podB.
    let trie = "Main:\n  +-- 0.0.0.0/1 2 0 2\n     +-- 10.0.0.0/8 2 0 2\n        +-- 10.224.0.0/23 3 0 4\n           +-- 10.224.0.0/30 2 0 2\n              |-- 10.224.0.0\n                 /24 link UNICAST\n              |-- 10.224.0.2\n                 /32 host LOCAL\n           |-- 10.224.0.255\n              /32 link BROADCAST\n     +-- 127.0.0.0/8 2 0 2\n        +-- 127.0.0.0/31 1 0 0\n           |-- 127.0.0.0\n              /8 host LOCAL\n           |-- 127.0.0.1\n              /32 host LOCAL\nLocal:\n              |-- 10.224.0.2\n                 /32 host LOCAL\n";
    let v4 = parse_fib_trie_local(trie);
    assert_eq!(
        v4,
        vec![Ipv4Addr::new(10, 224, 0, 2), Ipv4Addr::new(127, 0, 0, 1)]
    );
    let inet6 = "fe80000000000000d84917fffeed81d8 03 40 20 80     net1\n00000000000000000000000000000001 01 80 10 80       lo\n";
    let v6 = parse_if_inet6(inet6);
    assert_eq!(v6.len(), 2);
    assert_eq!(v6[0].0.to_string(), "fe80::d849:17ff:feed:81d8");
    assert_eq!(v6[0].1, "net1");
    let addrs = LocalAddrs {
        known: true,
        v4,
        v6,
    };
    let ll: Gid = "fe80:0000:0000:0000:d849:17ff:feed:81d8"
        .parse()
        .unwrap_or_default();
    assert!(addrs.has(&ll, "net1"));
    assert!(!addrs.has(&ll, "net2"));
    let a0: Gid = "0000:0000:0000:0000:0000:ffff:0ae0:0001"
        .parse()
        .unwrap_or_default();
    let b0: Gid = "0000:0000:0000:0000:0000:ffff:0ae0:0002"
        .parse()
        .unwrap_or_default();
    assert!(!addrs.has(&a0, "net1"));
    assert!(addrs.has(&b0, "net1"));
    assert!(LocalAddrs::default().has(&a0, "net1"));
}

#[test]
fn natural() {
    let mut v = vec!["mlx5_10", "mlx5_2", "mlx5_1", "rdma0"];
    v.sort_by(|a, b| natural_cmp(a, b));
    assert_eq!(v, vec!["mlx5_1", "mlx5_2", "mlx5_10", "rdma0"]);
}
