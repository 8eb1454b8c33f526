//! Test parameters that both ends of a test must agree on, and the measured result.
//!
//! These types travel over bench-core's control channel (serde), are what rdmabw resolves its
//! raw flags into before any work starts, and are part of every [`super::report::BwReport`].

use serde::{Deserialize, Serialize};

use super::gpu::MemoryRequest;

/// How long a test runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestLength {
    /// A fixed number of RDMA WRITEs per QP (ib_write_bw `-n`).
    Iterations { iterations: u64 },
    /// A measured window in seconds (ib_write_bw `-D`), with warm-up and cool-down margins.
    Duration {
        duration_s: f64,
        warmup_s: f64,
        cooldown_s: f64,
    },
}

/// Message sizes to test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sizes {
    /// One size (ib_write_bw `-s`).
    One { msg_size_bytes: u64 },
    /// Every power of two from 2 B to `max_bytes` (ib_write_bw `-a`, up to 8 MiB).
    Sweep { max_bytes: u64 },
}

impl Sizes {
    /// The message sizes in test order.
    pub fn list(&self) -> Vec<u64> {
        match *self {
            Sizes::One { msg_size_bytes } => vec![msg_size_bytes],
            Sizes::Sweep { max_bytes } => {
                let mut v = Vec::new();
                let mut s = 2u64;
                while s <= max_bytes {
                    v.push(s);
                    s *= 2;
                }
                v
            }
        }
    }

    /// The largest message, which sizes the buffer.
    pub fn max(&self) -> u64 {
        self.list().last().copied().unwrap_or(0)
    }
}

/// Queue pair connection type. Only RC is implemented; the field exists so that a mismatch
/// with a peer is named rather than misread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Connection {
    /// Reliable connection.
    RC,
}

/// Parameters that both sides of one test must agree on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestParams {
    /// Message sizes.
    pub sizes: Sizes,
    /// Iterations or duration.
    pub length: TestLength,
    /// Queue pairs per test (ib_write_bw `-q`).
    pub qps: u32,
    /// Connection type (ib_write_bw `-c`).
    pub connection: Connection,
    /// Traffic in both directions at once (ib_write_bw `-b`).
    pub bidirectional: bool,
    /// Repeat the measured window until stopped, one result per window (ib_write_bw
    /// `--run_infinitely`; duration tests of one size, one direction).
    #[serde(default, skip_serializing_if = "is_false")]
    pub run_infinitely: bool,
    /// Every byte the peer wrote is checked against the pattern it sent once its writes are in
    /// (ib_write_bw `--data_validation`); each QP and size lands at its own offset.
    #[serde(default, skip_serializing_if = "is_false")]
    pub data_validation: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One parameter that differs between client and server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamMismatch {
    /// The parameter's name as the user knows it (the flag).
    pub param: &'static str,
    /// This side's value.
    pub ours: String,
    /// The peer's value.
    pub theirs: String,
}

impl std::fmt::Display for ParamMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "parameter {} differs: this side has {}, the peer has {}",
            self.param, self.ours, self.theirs
        )
    }
}

impl TestParams {
    /// Compares the parameters that must match; the first difference is named.
    pub fn check_matches(&self, peer: &TestParams) -> Result<(), ParamMismatch> {
        fn differ<T: std::fmt::Debug + PartialEq>(
            param: &'static str,
            a: &T,
            b: &T,
        ) -> Result<(), ParamMismatch> {
            if a == b {
                Ok(())
            } else {
                Err(ParamMismatch {
                    param,
                    ours: format!("{a:?}"),
                    theirs: format!("{b:?}"),
                })
            }
        }
        differ("--size/-s/-a", &self.sizes, &peer.sizes)?;
        differ("--iters/-n or --duration/-D", &self.length, &peer.length)?;
        differ("--qp/-q", &self.qps, &peer.qps)?;
        differ("--connection/-c", &self.connection, &peer.connection)?;
        differ(
            "--bidirectional/-b",
            &self.bidirectional,
            &peer.bidirectional,
        )?;
        differ(
            "--run_infinitely",
            &self.run_infinitely,
            &peer.run_infinitely,
        )?;
        differ(
            "--data_validation",
            &self.data_validation,
            &peer.data_validation,
        )?;
        Ok(())
    }
}

/// Per-side tuning that does not have to match the peer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalTuning {
    /// Send queue depth (ib_write_bw `-t`).
    pub tx_depth: u32,
    /// Signal one completion every `cq_mod` writes (ib_write_bw `-Q`).
    pub cq_mod: u32,
    /// Writes posted per `ibv_post_send` call (ib_write_bw `-l`).
    pub post_list: u32,
    /// Inline data up to this many bytes (ib_write_bw `-I`).
    pub inline_bytes: u32,
    /// Traffic class in the GRH, carried in the IPv4 TOS byte on RoCE v2.
    pub traffic_class: u8,
    /// Service level.
    pub service_level: u8,
    /// GRH hop limit.
    pub hop_limit: u8,
    /// Path MTU in bytes; `None` uses the smaller active MTU of both ends.
    pub mtu_bytes: Option<u32>,
    /// Local ACK timeout exponent (4.096 us * 2^t).
    pub ack_timeout: u8,
    /// Retry count.
    pub retry_count: u8,
    /// Where this side's buffer lives (`--use_cuda`, `--cuda-bus-id`, `--cuda-mem`); host
    /// memory by default. Per side, as ib_write_bw's flags are: a server never takes it from
    /// the client.
    #[serde(default, skip_serializing_if = "MemoryRequest::is_host")]
    pub memory: MemoryRequest,
    /// How this side waits for completions (`--poll`).
    #[serde(default)]
    pub poll: PollMode,
    /// Which CPU polls this side's queue pairs (`--cpu`, `--no-numa-bind`). Per side: a server
    /// never takes it from the client.
    #[serde(default)]
    pub cpu: CpuChoice,
    /// A software rate limit on this side's writes (`--rate_limit`, `--rate_units`,
    /// `--burst_size`); none by default. Per side: a server never takes it from the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
}

/// ib_write_bw's `--rate_units`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateUnit {
    /// Gb/s, 10^9 bit/s (`g`, ib_write_bw's default).
    Gbps,
    /// MiB/s, 2^20 byte/s (`M`).
    MibPerS,
    /// Messages (RDMA WRITEs) per second (`p`).
    MsgsPerS,
}

/// A software rate limiter on the sender: a token bucket filled at `rate` and holding at most
/// `burst_msgs` writes, taken from at post time. Long runs send at `rate`; a burst of up to
/// `burst_msgs` writes goes out at once after a pause.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateLimit {
    /// The limit, in `unit`s (positive).
    pub rate: f64,
    /// What `rate` counts.
    pub unit: RateUnit,
    /// Writes per burst: the bucket's size (ib_write_bw `--burst_size`, default the send queue
    /// depth `-t`).
    pub burst_msgs: u32,
}

impl RateLimit {
    /// Writes per second at `msg_size_bytes` bytes each (all of this side's QPs together).
    pub fn msgs_per_s(&self, msg_size_bytes: u64) -> f64 {
        let size = msg_size_bytes.max(1) as f64;
        match self.unit {
            RateUnit::Gbps => self.rate * 1e9 / 8.0 / size,
            RateUnit::MibPerS => self.rate * 1_048_576.0 / size,
            RateUnit::MsgsPerS => self.rate,
        }
    }

    /// The limit in Gb/s at `msg_size_bytes` bytes per write.
    pub fn gbps(&self, msg_size_bytes: u64) -> f64 {
        self.msgs_per_s(msg_size_bytes) * msg_size_bytes as f64 * 8.0 / 1e9
    }
}

/// Which CPU the polling thread (one for all of a side's QPs) runs on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuChoice {
    /// A CPU of the NIC's NUMA node, when the node is known and one of its CPUs is allowed
    /// (perftest 6.29's default); else wherever the scheduler puts it.
    #[default]
    Numa,
    /// This CPU (`--cpu N`).
    Cpu(u32),
    /// Wherever the scheduler puts it (`--no-numa-bind`).
    Unbound,
}

/// How the engine waits for work completions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PollMode {
    /// Spin during the measured window, as ib_write_bw does: the highest bandwidth, one busy
    /// core per side. The warm-up and cool-down of a `-D` test, which only keep the link
    /// loaded around the window, are polled adaptively.
    #[default]
    Spin,
    /// Spin while completions come often; when the CQ has been empty for over a millisecond
    /// and the writes in flight last long enough at the rate seen so far, sleep in short steps
    /// that end well before the send queue could run dry. On a NIC at line rate completions
    /// come every few microseconds and this never sleeps; on slow links and huge messages it
    /// frees the core. In the Soft-RoCE lab it cut the client's CPU time by about 85% but also
    /// the bandwidth by about 30% (the guest's kernel moves the data, and wakes up slower when
    /// a vCPU idles), hence not the default.
    Adaptive,
    /// Sleep on a completion channel (`-e`/`--use_event`): when the CQ is empty and nothing
    /// can be posted, arm the CQ (`ibv_req_notify_cq`), poll it once more (a completion that
    /// came before the arm raises no event), then wait for the channel's event with a timeout
    /// (so that a stop, the window's end and the stall guard are still seen), take and ack it.
    /// Each event stands for `cq_mod` writes on a QP: without `-Q`, the moderation is at least
    /// half the send queue. ib_write_bw refuses `-e` for RDMA WRITE; here the sender's core is
    /// free between completions, at the cost of one wake-up per event.
    Event,
}

impl PollMode {
    /// The name `--poll` takes and reports print.
    pub fn as_str(self) -> &'static str {
        match self {
            PollMode::Spin => "spin",
            PollMode::Adaptive => "adaptive",
            PollMode::Event => "event",
        }
    }
}

/// CPU seconds per GB (10^9 bytes): `cpu_s` spent while `bytes` were written; `None` when
/// either is 0 or not finite (nothing measured, so no ratio).
pub fn cpu_s_per_gb(cpu_s: f64, bytes: f64) -> Option<f64> {
    (cpu_s > 0.0 && bytes > 0.0 && cpu_s.is_finite() && bytes.is_finite())
        .then(|| cpu_s / (bytes / 1e9))
}

impl Default for LocalTuning {
    fn default() -> Self {
        LocalTuning {
            tx_depth: 128,
            cq_mod: 100,
            post_list: 1,
            inline_bytes: 0,
            traffic_class: 0,
            service_level: 0,
            hop_limit: 64,
            mtu_bytes: None,
            ack_timeout: 14,
            retry_count: 7,
            memory: MemoryRequest::Host,
            poll: PollMode::Spin,
            cpu: CpuChoice::Numa,
            rate_limit: None,
        }
    }
}

/// The bandwidth measured for one message size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    /// Bytes per RDMA WRITE.
    pub msg_size_bytes: u64,
    /// Writes completed in the measured window (all QPs).
    pub iterations: u64,
    /// Peak bandwidth: the best short interval (Gb/s = 10^9 bit/s).
    pub bw_peak_gbps: f64,
    /// Average bandwidth over the measured window.
    pub bw_avg_gbps: f64,
    /// Messages per second, in millions.
    pub msg_rate_mpps: f64,
    /// 1st percentile of per-interval bandwidth.
    pub bw_p1_gbps: f64,
    /// Median per-interval bandwidth.
    pub bw_p50_gbps: f64,
    /// 99th percentile of per-interval bandwidth.
    pub bw_p99_gbps: f64,
    /// Length of one sampling interval in milliseconds.
    pub interval_ms: u64,
    /// Seconds of the measured window.
    pub measured_s: f64,
    /// CPU time (user + system) this process spent in the measured window, in seconds.
    pub cpu_s: f64,
    /// CPU seconds per GB (10^9 bytes) written in the measured window: `cpu_s` over the bytes
    /// of `iterations` (see [`cpu_s_per_gb`]); absent when the CPU time or the bytes are 0
    /// (iteration mode measures no CPU time) and in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s_per_gb: Option<f64>,
    /// The CPU the polling thread of every QP was on when the window closed (`sched_getcpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polling_cpu: Option<u32>,
    /// The longest time inside the window that the polling thread did not run (between two
    /// of its clock reads), in seconds: completions in such a gap are only seen after it, and
    /// one longer than the window's end drops them from the average. Absent in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu_max_s: Option<f64>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rate_limits_convert_as_ib_write_bw_counts_them() {
        let r = |rate, unit| RateLimit {
            rate,
            unit,
            burst_msgs: 128,
        };
        // 1 Gb/s of 64 KiB writes: 10^9 / 8 / 65536 = 1907.35 writes/s.
        let g = r(1.0, RateUnit::Gbps);
        assert!((g.msgs_per_s(65536) - 1_907.348_632_8).abs() < 1e-6);
        assert!((g.gbps(65536) - 1.0).abs() < 1e-12);
        // 100 MiB/s of 1 MiB writes: 100 writes/s, 0.8388608 Gb/s.
        let m = r(100.0, RateUnit::MibPerS);
        assert!((m.msgs_per_s(1 << 20) - 100.0).abs() < 1e-9);
        assert!((m.gbps(1 << 20) - 0.838_860_8).abs() < 1e-12);
        // Packets per second do not depend on the size.
        let p = r(5000.0, RateUnit::MsgsPerS);
        assert_eq!(p.msgs_per_s(4096), 5000.0);
        assert!((p.gbps(4096) - 5000.0 * 4096.0 * 8.0 / 1e9).abs() < 1e-12);
    }

    #[test]
    fn the_new_modes_are_compared_and_absent_from_older_peers() {
        let a = TestParams {
            sizes: Sizes::One {
                msg_size_bytes: 65536,
            },
            length: TestLength::Iterations { iterations: 10 },
            qps: 1,
            connection: Connection::RC,
            bidirectional: false,
            run_infinitely: false,
            data_validation: false,
        };
        // An older peer's JSON has neither field: both read as off, and off is not written.
        let json = serde_json::to_string(&a).unwrap_or_default();
        assert!(!json.contains("run_infinitely") && !json.contains("data_validation"));
        let back: TestParams = serde_json::from_str(&json).unwrap_or_else(|_| a.clone());
        assert_eq!(back, a);
        let b = TestParams {
            data_validation: true,
            ..a.clone()
        };
        let m = a.check_matches(&b).err().map(|m| m.param);
        assert_eq!(m, Some("--data_validation"));
        let c = TestParams {
            run_infinitely: true,
            ..a.clone()
        };
        assert_eq!(
            a.check_matches(&c).err().map(|m| m.param),
            Some("--run_infinitely")
        );
    }

    #[test]
    fn cpu_per_gb_is_cpu_seconds_over_gigabytes() {
        // 2 s of CPU while 4 * 10^9 bytes went out: 0.5 s/GB.
        assert_eq!(cpu_s_per_gb(2.0, 4e9), Some(0.5));
        // Nothing measured: no ratio rather than 0 or infinity.
        assert_eq!(cpu_s_per_gb(0.0, 4e9), None);
        assert_eq!(cpu_s_per_gb(1.0, 0.0), None);
        assert_eq!(cpu_s_per_gb(f64::NAN, 1.0), None);
    }

    #[test]
    fn poll_modes_read_and_print_their_names() {
        for m in [PollMode::Spin, PollMode::Adaptive, PollMode::Event] {
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.as_str()));
            let back: PollMode = serde_json::from_str(&json).unwrap();
            assert_eq!(back, m);
        }
    }
}
