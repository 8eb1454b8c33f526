//! The peer's link-layer address, resolved before the QPs need it.
//!
//! Moving a RoCE QP to RTR makes the kernel look up the neighbour entry (ARP) of the peer's
//! RoCE address. Without one, it sends an ARP request and waits for the neighbour-update
//! event, and a reply that arrives before it starts waiting is missed: the wait then ends at
//! the kernel's 1 s timeout, when it looks again and finds the entry. A veth pair answers ARP
//! at once, so in the Soft-RoCE lab every rail's first test lost 1.0 s there (0.01 s with the
//! entry in place). Sending one datagram to the peer's address first (the discard port, as an
//! unprivileged `arping`) and waiting briefly for the entry to complete avoids the race
//! wherever it happens; where the entry exists, nothing is sent.

use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use crate::sysfs::SysRoots;

/// How long to wait for the ARP reply before going on (the QP bring-up then waits as before).
pub const WAIT: Duration = Duration::from_millis(100);

/// Whether `<proc>/net/arp` text holds a complete entry (flag `ATF_COM`, 0x2) for `ip`.
pub fn arp_complete(text: &str, ip: Ipv4Addr) -> bool {
    let ip = ip.to_string();
    text.lines().skip(1).any(|l| {
        let mut f = l.split_whitespace();
        f.next() == Some(ip.as_str())
            && f.nth(1)
                .and_then(|flags| u32::from_str_radix(flags.trim_start_matches("0x"), 16).ok())
                .is_some_and(|flags| flags & 0x2 != 0)
    })
}

fn complete(roots: &SysRoots, ip: Ipv4Addr) -> bool {
    std::fs::read_to_string(roots.proc.join("net/arp")).is_ok_and(|t| arp_complete(&t, ip))
}

/// Makes sure this namespace knows `peer`'s link-layer address: nothing when it does; else one
/// datagram to its discard port, then up to `wait` for the entry to complete. Best effort:
/// returns whether the entry is complete.
pub fn ensure_neighbour(roots: &SysRoots, peer: Ipv4Addr, wait: Duration) -> bool {
    if complete(roots, peer) {
        return true;
    }
    let sent = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| s.send_to(&[0], (peer, 9)))
        .is_ok();
    if !sent {
        return false;
    }
    let t0 = Instant::now();
    while t0.elapsed() < wait {
        if complete(roots, peer) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARP: &str = "\
IP address       HW type     Flags       HW address            Mask     Device
10.224.0.2       0x1         0x2         c6:a2:3c:a4:52:86     *        net1
10.224.1.2       0x1         0x0         00:00:00:00:00:00     *        net2
10.224.2.20      0x1         0x6         72:6c:7c:aa:49:a0     *        net3
";

    #[test]
    fn only_complete_entries_of_that_exact_address_count() {
        assert!(arp_complete(ARP, Ipv4Addr::new(10, 224, 0, 2)));
        assert!(
            !arp_complete(ARP, Ipv4Addr::new(10, 224, 1, 2)),
            "incomplete"
        );
        assert!(
            !arp_complete(ARP, Ipv4Addr::new(10, 224, 2, 2)),
            "prefix only"
        );
        assert!(
            arp_complete(ARP, Ipv4Addr::new(10, 224, 2, 20)),
            "0x6 has ATF_COM"
        );
        assert!(!arp_complete("", Ipv4Addr::new(10, 224, 0, 2)));
    }

    #[test]
    fn an_unreachable_peer_costs_at_most_the_wait() {
        // Loopback never gets an ARP entry: the datagram goes nowhere, and the wait ends it.
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("proc/net")).expect("mkdir");
        std::fs::write(dir.path().join("proc/net/arp"), ARP).expect("write");
        let roots = SysRoots {
            proc: dir.path().join("proc"),
            ..SysRoots::default()
        };
        let t0 = Instant::now();
        assert!(!ensure_neighbour(
            &roots,
            Ipv4Addr::LOCALHOST,
            Duration::from_millis(50)
        ));
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert!(ensure_neighbour(
            &roots,
            Ipv4Addr::new(10, 224, 0, 2),
            Duration::from_millis(50)
        ));
    }
}
