//! The driver's ethtool statistics (`ethtool -S`) through the SIOCETHTOOL ioctl.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// More statistics than any driver has (mlx5 has about 1,500 with every queue).
const MAX_STATS: usize = 1 << 16;
/// Room beyond the driver's count in the names' and values' buffers (see [`stats`]).
const STATS_SLACK: usize = 256;

/// One SIOCETHTOOL request whose command block is `buf` (u64s, so aligned for every field).
///
/// # Safety
/// `ifname` must be shorter than `IFNAMSIZ` (so that the name in the request ends in a NUL),
/// and `buf` must be large enough for the kernel's reply to the command it holds: the kernel
/// writes as much as the command's counts say, whatever the length of `buf`.
unsafe fn request(sock: &OwnedFd, ifname: &str, buf: &mut [u64]) -> Option<()> {
    // SAFETY: all-zero is a valid ifreq (plain old data).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(ifname.bytes()) {
        *d = s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = buf.as_mut_ptr().cast();
    // SAFETY: `ifr` is a live ifreq whose name ends in a NUL (zeroed, and `ifname` is shorter
    // than IFNAMSIZ: this function's contract) and whose `ifru_data` points at `buf`, large
    // enough for the reply (the contract) and exclusively borrowed for the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL, &mut ifr) };
    (rc == 0).then_some(())
}

/// `buf` as bytes.
fn bytes(buf: &mut [u64]) -> &mut [u8] {
    let len = std::mem::size_of_val(buf);
    // SAFETY: any u64 memory is valid as bytes, the length is the same memory's.
    unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast(), len) }
}

fn put_u32(buf: &mut [u64], at: usize, v: u32) {
    bytes(buf)[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn get_u32(buf: &mut [u64], at: usize) -> u32 {
    let b = bytes(buf);
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn stats(ifname: &str) -> Option<Vec<(String, u64)>> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
        return None;
    }
    // SAFETY: socket(2) with constant arguments; the fd is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is a fresh, open descriptor that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // struct ethtool_sset_info { u32 cmd; u32 reserved; u64 sset_mask; u32 data[]; }
    let mut info = [0u64; 3];
    put_u32(&mut info, 0, ETHTOOL_GSSET_INFO);
    info[1] = 1 << ETH_SS_STATS;
    // SAFETY: `ifname` is shorter than IFNAMSIZ (checked above); the reply is the 16-byte
    // header and one u32 count, as the mask asks for one string set: 24 bytes, `info`'s size.
    unsafe { request(&sock, ifname, &mut info) }?;
    if info[1] & (1 << ETH_SS_STATS) == 0 {
        return None;
    }
    // The kernel writes the driver's count of names and values at the time of each call,
    // whatever count the request gives: a count over the limit is refused (clamping it would
    // overrun the buffers), and the buffers have room for STATS_SLACK more than the count, so
    // that a driver whose count grows a little between the calls writes inside them (ethtool(8)
    // itself allocates the exact count).
    let n = get_u32(&mut info, 16) as usize;
    if n == 0 || n > MAX_STATS {
        return None;
    }
    let room = n + STATS_SLACK;
    // struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[]; }
    let mut names = vec![0u64; (12 + room * ETH_GSTRING_LEN).div_ceil(8)];
    put_u32(&mut names, 0, ETHTOOL_GSTRINGS);
    put_u32(&mut names, 4, ETH_SS_STATS);
    put_u32(&mut names, 8, n as u32);
    // SAFETY: `ifname` is shorter than IFNAMSIZ (checked above); `names` holds the 12-byte
    // header and `room` strings of ETH_GSTRING_LEN bytes: the count the kernel gave just above
    // (at most MAX_STATS) and STATS_SLACK more, for a count that grows before this call (one
    // that grows by more than that between two ioctls of one read is the residue ethtool(8)
    // shares).
    unsafe { request(&sock, ifname, &mut names) }?;
    let named = get_u32(&mut names, 8) as usize;
    // struct ethtool_stats { u32 cmd; u32 n_stats; u64 data[]; }
    let mut values = vec![0u64; 1 + room];
    put_u32(&mut values, 0, ETHTOOL_GSTATS);
    put_u32(&mut values, 4, n as u32);
    // SAFETY: `ifname` is shorter than IFNAMSIZ (checked above); `values` holds the 8-byte
    // header and `room` u64 values, as `names` holds `room` strings.
    unsafe { request(&sock, ifname, &mut values) }?;
    let valued = get_u32(&mut values, 4) as usize;
    // Names and values of different counts belong to different moments: none is trusted.
    if named != valued || valued > room {
        return None;
    }
    let got = valued;
    let text = bytes(&mut names);
    Some(
        (0..got)
            .map(|i| {
                let raw = &text[12 + i * ETH_GSTRING_LEN..12 + (i + 1) * ETH_GSTRING_LEN];
                let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
                let name = String::from_utf8_lossy(&raw[..end]).trim().to_string();
                (name, values[1 + i])
            })
            .filter(|(name, _)| !name.is_empty())
            .collect(),
    )
}

/// The driver's ethtool statistics of interface `ifname` in this network namespace (`ethtool
/// -S`): names and values; empty when the interface or the driver has none, or on any error.
pub fn ethtool_stats(ifname: &str) -> Vec<(String, u64)> {
    stats(ifname).unwrap_or_default()
}
