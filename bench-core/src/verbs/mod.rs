//! Owning wrappers over sideway's verbs: device context, protection domain, basic completion
//! queue, registered buffers and RC queue pairs with a typestate for their bring-up.
//!
//! Ownership: [`Device`] -> [`Pd`] -> ([`Cq`], [`Buffer`], [`Qp`]). sideway's handles hold an
//! `Arc` of their parent, so a child keeps its parents alive; our wrappers add names (device,
//! port, QP number) for error messages and enforce the order QP -> memory on drop.
//!
//! Completion queues are *basic* CQs (`ibv_create_cq`, polled with `ibv_poll_cq`): on the
//! lab's rxe the extended CQ path (`ibv_create_cq_ex` + `ibv_start_poll`) fails with
//! `rxe_cq_post: queue full`. QPs are built with `ibv_create_qp_ex` and posted to with the
//! `ibv_wr_*` API, which works there.

pub mod buffer;
pub mod cq;
pub mod device;
pub mod qp;

use serde::{Deserialize, Serialize};

pub use buffer::Buffer;
pub use cq::{Completion, Cq};
pub use device::{Device, DeviceCaps, Pd, PortInfo};
pub use qp::{Init, Qp, QpConfig, QpState, Rtr, Rts, WriteSpec};

pub use crate::error::errno_symbol;
use crate::error::Error;
pub use crate::gid::{format_gid, parse_gid};
use wire::params::LocalTuning;

/// What the peer needs to know about one of our QPs to connect its QP to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct QpEndpoint {
    /// QP number (24 bits).
    pub qpn: u32,
    /// Initial packet sequence number of our send queue (24 bits).
    pub psn: u32,
    /// Our GID (the source GID of our packets), network byte order; in JSON as
    /// `fe80:0000:0000:0000:0202:c9ff:fe00:0001` ([`format_gid`]).
    #[serde(with = "crate::gid::text")]
    pub gid: [u8; 16],
    /// Our port's LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
}

/// What the peer needs to RDMA WRITE into our memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MrInfo {
    /// Virtual address (or IOVA) of the first byte the peer may write.
    pub addr: u64,
    /// Bytes the peer may write from `addr`.
    pub len: u64,
    /// Remote key.
    pub rkey: u32,
}

/// An InfiniBand path MTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PathMtu {
    /// 256 bytes.
    Mtu256,
    /// 512 bytes.
    Mtu512,
    /// 1024 bytes.
    Mtu1024,
    /// 2048 bytes.
    Mtu2048,
    /// 4096 bytes.
    Mtu4096,
}

impl PathMtu {
    /// All values, smallest first.
    pub const ALL: [PathMtu; 5] = [
        PathMtu::Mtu256,
        PathMtu::Mtu512,
        PathMtu::Mtu1024,
        PathMtu::Mtu2048,
        PathMtu::Mtu4096,
    ];

    /// Bytes.
    pub fn bytes(self) -> u32 {
        match self {
            PathMtu::Mtu256 => 256,
            PathMtu::Mtu512 => 512,
            PathMtu::Mtu1024 => 1024,
            PathMtu::Mtu2048 => 2048,
            PathMtu::Mtu4096 => 4096,
        }
    }

    /// From a byte count; only the five IB values are accepted.
    pub fn from_bytes(bytes: u32) -> Option<PathMtu> {
        Self::ALL.into_iter().find(|m| m.bytes() == bytes)
    }

    /// From the `enum ibv_mtu` value (1 = 256 ... 5 = 4096).
    pub fn from_ibv(v: u32) -> Option<PathMtu> {
        match v {
            1 => Some(PathMtu::Mtu256),
            2 => Some(PathMtu::Mtu512),
            3 => Some(PathMtu::Mtu1024),
            4 => Some(PathMtu::Mtu2048),
            5 => Some(PathMtu::Mtu4096),
            _ => None,
        }
    }

    /// The RoCE MTU the kernel derives from a netdev MTU (`iboe_get_mtu`: the largest IB MTU
    /// that fits after 96 bytes of GRH/UDP/BTH/extension/ICRC headers), e.g. 1500 -> 1024,
    /// 9000 -> 4096.
    pub fn for_netdev_mtu(netdev_mtu: u32) -> Option<PathMtu> {
        let room = netdev_mtu.checked_sub(96)?;
        Self::ALL.into_iter().rev().find(|m| m.bytes() <= room)
    }

    /// The path MTU both ends can use: the smaller active MTU, or `requested` (bytes) if it is
    /// a valid IB MTU no larger than that.
    pub fn negotiate(
        local: PathMtu,
        remote: PathMtu,
        requested: Option<u32>,
    ) -> Result<PathMtu, Error> {
        let both = local.min(remote);
        match requested {
            None => Ok(both),
            Some(b) => {
                let m = PathMtu::from_bytes(b).ok_or_else(|| {
                    Error::InvalidParams(format!(
                        "MTU {b} is not an InfiniBand MTU (256, 512, 1024, 2048, 4096)"
                    ))
                })?;
                if m > both {
                    Err(Error::InvalidParams(format!(
                        "MTU {b} exceeds the active MTU of the path ({} here, {} at the peer)",
                        local.bytes(),
                        remote.bytes()
                    )))
                } else {
                    Ok(m)
                }
            }
        }
    }

    pub(crate) fn to_sideway(self) -> sideway::ibverbs::device_context::Mtu {
        use sideway::ibverbs::device_context::Mtu;
        match self {
            PathMtu::Mtu256 => Mtu::Mtu256,
            PathMtu::Mtu512 => Mtu::Mtu512,
            PathMtu::Mtu1024 => Mtu::Mtu1024,
            PathMtu::Mtu2048 => Mtu::Mtu2048,
            PathMtu::Mtu4096 => Mtu::Mtu4096,
        }
    }
}

/// Path and transport attributes for connecting an RC QP (RTR and RTS).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathParams {
    /// Local port.
    pub port: u8,
    /// Source GID index.
    pub gid_index: u8,
    /// Path MTU (negotiated: see [`PathMtu::negotiate`]).
    pub mtu: PathMtu,
    /// GRH traffic class (the IPv4 TOS byte on RoCE v2: DSCP << 2 | ECN).
    pub traffic_class: u8,
    /// Service level (the VLAN PCP on RoCE).
    pub service_level: u8,
    /// GRH hop limit (IP TTL on RoCE v2).
    pub hop_limit: u8,
    /// GRH flow label (0: let the provider choose the UDP source port).
    pub flow_label: u32,
    /// Local ACK timeout exponent: 4.096 us * 2^t; 0 means infinite.
    pub ack_timeout: u8,
    /// Transport retries before the WR fails with retry-exceeded.
    pub retry_count: u8,
    /// RNR retries (7 = infinite; WRITE-only traffic never gets RNR NAKs).
    pub rnr_retry: u8,
    /// Outstanding RDMA READ/atomic requests as initiator and responder.
    pub max_rd_atomic: u8,
    /// Minimal RNR NAK timer code.
    pub min_rnr_timer: u8,
}

impl PathParams {
    /// Path attributes from the local tuning, the chosen port and GID index and the
    /// negotiated MTU.
    pub fn new(
        port: u8,
        gid_index: u32,
        tuning: &LocalTuning,
        mtu: PathMtu,
    ) -> Result<PathParams, Error> {
        let gid_index =
            u8::try_from(gid_index).map_err(|_| Error::GidIndexTooLarge { index: gid_index })?;
        Ok(PathParams {
            port,
            gid_index,
            mtu,
            traffic_class: tuning.traffic_class,
            service_level: tuning.service_level,
            hop_limit: tuning.hop_limit,
            flow_label: 0,
            ack_timeout: tuning.ack_timeout,
            retry_count: tuning.retry_count.min(7),
            rnr_retry: 7,
            max_rd_atomic: 1,
            min_rnr_timer: 12,
        })
    }

    /// How long the HCA keeps retrying an unacknowledged packet before reporting
    /// retry-exceeded, roughly; `None` for the infinite timeout (`ack_timeout` 0).
    pub fn retry_window(&self) -> Option<std::time::Duration> {
        if self.ack_timeout == 0 {
            return None;
        }
        let one = 4.096e-6 * 2f64.powi(i32::from(self.ack_timeout.min(31)));
        Some(std::time::Duration::from_secs_f64(
            one * f64::from(self.retry_count + 1),
        ))
    }
}

/// `ibv_wc_status_str` (rdma-core's text) for a work completion status.
pub fn wc_status_str(status: u32) -> &'static str {
    match status {
        0 => "success",
        1 => "local length error",
        2 => "local QP operation error",
        3 => "local EE context operation error",
        4 => "local protection error",
        5 => "Work Request Flushed Error",
        6 => "memory bind operation error",
        7 => "bad response error",
        8 => "local access error",
        9 => "remote invalid request error",
        10 => "remote access error",
        11 => "remote operation error",
        12 => "transport retry counter exceeded",
        13 => "RNR retry counter exceeded",
        14 => "local RDD violation error",
        15 => "remote invalid RD request",
        16 => "aborted error",
        17 => "invalid EE context number",
        18 => "invalid EE context state",
        19 => "fatal error",
        20 => "response timeout error",
        21 => "general error",
        22 => "TM error",
        23 => "TM software rendezvous",
        _ => "unknown",
    }
}

/// What a failed work completion most likely means, for the user.
pub fn wc_status_hint(status: u32) -> &'static str {
    match status {
        12 | 13 | 20 => "the peer stopped responding: its process died or the rail is down",
        5 => "the QP had moved to the error state (an earlier failure the provider did not report as a completion, or teardown); check dmesg on both ends",
        9 => "the peer's QP refused a packet as invalid (a length or an opcode sequence it did not expect): the two ends' path MTUs differ, or the sender's provider went wrong in a retransmission (Soft-RoCE does, now and then, under heavy load); check the MTU on both ends and dmesg on both nodes",
        10 => "the peer rejected the write: its memory region (address, length or rkey) does not match what was exchanged, or its QP lacks remote-write access",
        11 => "the peer's HCA could not complete the operation",
        1 | 2 | 4 | 8 => "local error in the work request (buffer, key or QP capability); a bug in the engine",
        7 => "the peer sent an unexpected response; check that both ends run the same test",
        19 | 21 => "the device reported a fatal or general error; check dmesg",
        _ => "the operation failed",
    }
}

/// A random 24-bit PSN (no RNG dependency: std's randomly keyed hasher).
pub(crate) fn random_psn() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (h.finish() & 0x00ff_ffff) as u32
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn gid_travels_as_colon_hex() {
        let ep = QpEndpoint {
            qpn: 1,
            psn: 2,
            gid: [
                0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x02, 0xc9, 0xff, 0xfe, 0x00, 0x00, 0x01,
            ],
            lid: 0,
        };
        let json = serde_json::to_string(&ep).unwrap();
        assert!(
            json.contains("\"gid\":\"fe80:0000:0000:0000:0202:c9ff:fe00:0001\""),
            "{json}"
        );
        let short = json.replace(
            "fe80:0000:0000:0000:0202:c9ff:fe00:0001",
            "fe80::202:c9ff:fe00:1",
        );
        assert_eq!(serde_json::from_str::<QpEndpoint>(&short).unwrap(), ep);
        let v4 = parse_gid("::ffff:10.0.0.1").unwrap();
        assert_eq!(&v4[10..], &[0xff, 0xff, 10, 0, 0, 1]);
        let bad = json.replace("fe80:0000", "fe80:zz");
        let err = serde_json::from_str::<QpEndpoint>(&bad).unwrap_err();
        assert!(err.to_string().contains("invalid GID"), "{err}");
    }

    #[test]
    fn mtu() {
        assert_eq!(PathMtu::for_netdev_mtu(1500), Some(PathMtu::Mtu1024));
        assert_eq!(PathMtu::for_netdev_mtu(9000), Some(PathMtu::Mtu4096));
        assert_eq!(PathMtu::for_netdev_mtu(4200), Some(PathMtu::Mtu4096));
        assert_eq!(PathMtu::for_netdev_mtu(4000), Some(PathMtu::Mtu2048));
        assert_eq!(PathMtu::for_netdev_mtu(64), None);
        assert_eq!(PathMtu::from_ibv(3), Some(PathMtu::Mtu1024));
        assert!(matches!(
            PathMtu::negotiate(PathMtu::Mtu4096, PathMtu::Mtu1024, None),
            Ok(PathMtu::Mtu1024)
        ));
        assert!(PathMtu::negotiate(PathMtu::Mtu4096, PathMtu::Mtu1024, Some(2048)).is_err());
        assert!(PathMtu::negotiate(PathMtu::Mtu4096, PathMtu::Mtu4096, Some(1500)).is_err());
        assert!(matches!(
            PathMtu::negotiate(PathMtu::Mtu4096, PathMtu::Mtu4096, Some(512)),
            Ok(PathMtu::Mtu512)
        ));
    }

    #[test]
    fn psn_is_24_bits() {
        for _ in 0..100 {
            assert!(random_psn() <= 0x00ff_ffff);
        }
    }

    #[test]
    fn retry_window() {
        let p = PathParams::new(1, 1, &LocalTuning::default(), PathMtu::Mtu1024);
        let w = p.ok().and_then(|p| p.retry_window()).unwrap_or_default();
        // 4.096 us * 2^14 * 8 = 0.537 s
        assert!((w.as_secs_f64() - 0.5369).abs() < 0.001, "{w:?}");
        assert!(PathParams::new(1, 300, &LocalTuning::default(), PathMtu::Mtu1024).is_err());
    }
}
