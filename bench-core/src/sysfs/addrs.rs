//! The IP addresses configured in this network namespace, from `<proc>/net`: what tells a GID
//! of this namespace from another's.

use std::fs;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::roots::SysRoots;
use crate::gid::Gid;

/// The IP addresses configured in this network namespace, from `<proc>/net`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalAddrs {
    /// Whether `if_inet6` or `fib_trie` could be read at all; when not, GIDs are matched by
    /// netdev name only.
    pub known: bool,
    /// Local IPv4 addresses (`/32 host LOCAL` entries of `fib_trie`).
    pub v4: Vec<Ipv4Addr>,
    /// IPv6 addresses with their interface (`if_inet6`).
    pub v6: Vec<(Ipv6Addr, String)>,
}

impl LocalAddrs {
    /// Reads `<proc>/net/if_inet6` and `<proc>/net/fib_trie`.
    pub fn read(roots: &SysRoots) -> LocalAddrs {
        let inet6 = fs::read_to_string(roots.proc.join("net/if_inet6")).ok();
        let trie = fs::read_to_string(roots.proc.join("net/fib_trie")).ok();
        LocalAddrs {
            known: inet6.is_some() || trie.is_some(),
            v4: trie
                .as_deref()
                .map(parse_fib_trie_local)
                .unwrap_or_default(),
            v6: inet6.as_deref().map(parse_if_inet6).unwrap_or_default(),
        }
    }

    /// Whether `gid` (on `netdev`) is an address of this namespace; `true` when unknown.
    pub fn has(&self, gid: &Gid, netdev: &str) -> bool {
        if !self.known {
            return true;
        }
        match gid.ipv4_mapped() {
            Some(v4) => self.v4.contains(&v4),
            None => {
                let a = gid.to_ipv6();
                self.v6.iter().any(|(b, n)| *b == a && n == netdev)
            }
        }
    }
}

/// Local IPv4 addresses from `/proc/net/fib_trie`: a `|-- A.B.C.D` line followed by a
/// `/32 host LOCAL` line.
pub fn parse_fib_trie_local(text: &str) -> Vec<Ipv4Addr> {
    let mut out: Vec<Ipv4Addr> = Vec::new();
    let mut current: Option<Ipv4Addr> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(ip) = t.strip_prefix("|-- ") {
            current = ip.trim().parse().ok();
        } else if t.starts_with("/32 host LOCAL") {
            if let Some(ip) = current {
                if !out.contains(&ip) {
                    out.push(ip);
                }
            }
        } else if t.starts_with("+--") || !t.starts_with('/') {
            current = None;
        }
    }
    out
}

/// `(address, interface)` pairs from `/proc/net/if_inet6`.
pub fn parse_if_inet6(text: &str) -> Vec<(Ipv6Addr, String)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (hex, name) = (f.first()?, f.get(5)?);
            let v = u128::from_str_radix(hex, 16).ok()?;
            Some((Ipv6Addr::from(v), (*name).to_string()))
        })
        .collect()
}
