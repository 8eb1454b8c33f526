//! What a finished test gives back: both ends as this side learned them, and both directions'
//! results.

use std::net::SocketAddr;

use crate::gid::Gid;
use crate::gpu::MemoryUse;
use crate::rails::Rail;
use crate::verbs::format_gid;
use wire::counters::CounterReport;
use wire::params::{cpu_s_per_gb, LocalTuning, SizeResult, TestParams};
use wire::report::Role;
use wire::report::{EndpointReport, PeerTool};

/// The other end of a test as this side learned it.
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    /// Its host name (the client's `Hello`) or the address this side dialled.
    pub host: String,
    /// Its control address.
    pub addr: SocketAddr,
    /// RDMA device.
    pub device: String,
    /// Port number.
    pub port: u8,
    /// GID index, when the peer said (the server does in `Accept`).
    pub gid_index: Option<u32>,
    /// The GID of its first QP.
    pub gid: [u8; 16],
    /// The interface it was asked for, when known.
    pub netdev: Option<String>,
    /// Active MTU of its port.
    pub active_mtu_bytes: u32,
    /// Line rate of its port, when it said.
    pub line_rate_gbps: Option<f64>,
    /// Its rdmabw release, when it said.
    pub rdmabw_version: Option<String>,
    /// Its perftest wire version, when the peer was perftest.
    pub perftest_version: Option<String>,
}

impl Remote {
    /// The report form.
    pub fn report(&self) -> EndpointReport {
        let gid = Gid(self.gid);
        EndpointReport {
            host: self.host.clone(),
            device: self.device.clone(),
            port: self.port,
            gid_index: self.gid_index.unwrap_or(u32::MAX),
            gid: format_gid(&self.gid),
            netdev: self.netdev.clone(),
            ipv4: gid.ipv4_mapped().map(|a| a.to_string()),
            active_mtu_bytes: self.active_mtu_bytes,
            line_rate_gbps: self.line_rate_gbps,
        }
    }

    /// Which tool the peer was, and its version.
    pub fn tool(&self) -> Option<PeerTool> {
        match (&self.perftest_version, &self.rdmabw_version) {
            (Some(v), _) => Some(PeerTool::perftest(v)),
            (None, Some(v)) => Some(PeerTool::rdmabw(v)),
            (None, None) => None,
        }
    }
}

/// The report form of this side's rail.
pub fn local_report(host: &str, rail: &Rail, active_mtu_bytes: u32) -> EndpointReport {
    EndpointReport {
        host: host.to_string(),
        device: rail.device.clone(),
        port: rail.port,
        gid_index: rail.gid_index,
        gid: rail.gid.to_string(),
        netdev: rail.netdev.clone(),
        ipv4: rail.gid.ipv4_mapped().map(|a| a.to_string()),
        active_mtu_bytes,
        line_rate_gbps: rail.line_rate_gbps,
    }
}

/// A finished test.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Which side this is.
    pub role: Role,
    /// This side's rail.
    pub rail: Rail,
    /// This side's active MTU.
    pub active_mtu_bytes: u32,
    /// The other side.
    pub remote: Remote,
    /// The agreed parameters (the client's).
    pub params: TestParams,
    /// This side's tuning as used.
    pub tuning: LocalTuning,
    /// The path MTU of the QPs.
    pub path_mtu_bytes: u32,
    /// What the client measured writing (client -> server).
    pub client_results: Vec<SizeResult>,
    /// What the server measured writing (server -> client; empty unless bidirectional).
    pub server_results: Vec<SizeResult>,
    /// The memory this side's buffer was in (host, or which GPU and path).
    pub memory: MemoryUse,
    /// Counter deltas around the window: this side's, then the peer's (each when read).
    pub counters: Vec<CounterReport>,
}

impl Outcome {
    /// The smaller known line rate of both ends.
    pub fn line_rate_gbps(&self) -> Option<f64> {
        match (self.rail.line_rate_gbps, self.remote.line_rate_gbps) {
            (Some(a), Some(b)) if b > 0.0 => Some(a.min(b)),
            (Some(a), _) => Some(a),
            (None, b) => b.filter(|b| *b > 0.0),
        }
    }

    /// The rows perftest would print: the client's direction, plus the server's added size by
    /// size when bidirectional (ib_write_bw -b reports the sum of both directions).
    pub fn combined(&self) -> Vec<SizeResult> {
        combine(&self.client_results, &self.server_results)
    }
}

/// Both directions of a bidirectional test, size by size, summed (peaks and percentiles too,
/// which is an upper bound: the two directions' best intervals need not coincide).
pub fn combine(a: &[SizeResult], b: &[SizeResult]) -> Vec<SizeResult> {
    a.iter()
        .map(
            |x| match b.iter().find(|y| y.msg_size_bytes == x.msg_size_bytes) {
                None => x.clone(),
                Some(y) => SizeResult {
                    msg_size_bytes: x.msg_size_bytes,
                    iterations: x.iterations + y.iterations,
                    bw_peak_gbps: x.bw_peak_gbps + y.bw_peak_gbps,
                    bw_avg_gbps: x.bw_avg_gbps + y.bw_avg_gbps,
                    msg_rate_mpps: x.msg_rate_mpps + y.msg_rate_mpps,
                    bw_p1_gbps: x.bw_p1_gbps + y.bw_p1_gbps,
                    bw_p50_gbps: x.bw_p50_gbps + y.bw_p50_gbps,
                    bw_p99_gbps: x.bw_p99_gbps + y.bw_p99_gbps,
                    interval_ms: x.interval_ms,
                    measured_s: x.measured_s.max(y.measured_s),
                    cpu_s: x.cpu_s + y.cpu_s,
                    // Both processes' CPU over both directions' bytes: as one side alone
                    // when only one measured its CPU (the other row has no ratio).
                    cpu_s_per_gb: match (x.cpu_s_per_gb, y.cpu_s_per_gb) {
                        (Some(_), Some(_)) => cpu_s_per_gb(
                            x.cpu_s + y.cpu_s,
                            (x.iterations + y.iterations) as f64 * x.msg_size_bytes as f64,
                        ),
                        (a, b) => a.or(b),
                    },
                    polling_cpu: x.polling_cpu,
                    off_cpu_max_s: match (x.off_cpu_max_s, y.off_cpu_max_s) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    },
                    latency: x.latency.clone(),
                },
            },
        )
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn r(size: u64, avg: f64) -> SizeResult {
        SizeResult {
            msg_size_bytes: size,
            iterations: 10,
            bw_peak_gbps: avg + 1.0,
            bw_avg_gbps: avg,
            msg_rate_mpps: 0.5,
            bw_p1_gbps: avg - 1.0,
            bw_p50_gbps: avg,
            bw_p99_gbps: avg + 0.5,
            interval_ms: 10,
            measured_s: 2.0,
            cpu_s: 1.0,
            cpu_s_per_gb: None,
            polling_cpu: None,
            off_cpu_max_s: None,
            latency: None,
        }
    }

    #[test]
    fn bidirectional_rows_are_summed_like_perftest() {
        let c = combine(&[r(2, 1.0), r(4, 2.0)], &[r(4, 3.0)]);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0], r(2, 1.0));
        assert_eq!(c[1].bw_avg_gbps, 5.0);
        assert_eq!(c[1].iterations, 20);
        assert_eq!(c[1].msg_rate_mpps, 1.0);
        assert!(combine(&[r(2, 1.0)], &[]) == vec![r(2, 1.0)]);
    }
}
