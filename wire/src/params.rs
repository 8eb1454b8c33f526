//! Test parameters that both ends of a test must agree on, and the measured result.
//!
//! These types travel over bench-core's control channel (serde), are what rdmabw resolves its
//! raw flags into before any work starts, and are part of every [`super::report::BwReport`].

use serde::{Deserialize, Serialize};

use super::gpu::MemoryRequest;

/// Which end of a test printed the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The side that connected (and, unidirectionally, wrote).
    Client,
    /// The side that listened.
    Server,
}

impl Role {
    /// `client` or `server`, as reports and messages name the side.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }
}

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
    /// The message sizes in test order. A sweep stops at the largest power of two that fits in
    /// a `u64` (2^63), whatever `max_bytes` says: the list has at most 63 entries.
    pub fn list(&self) -> Vec<u64> {
        match *self {
            Sizes::One { msg_size_bytes } => vec![msg_size_bytes],
            Sizes::Sweep { max_bytes } => {
                let mut v = Vec::new();
                let mut s = 2u64;
                while s <= max_bytes {
                    v.push(s);
                    match s.checked_mul(2) {
                        Some(next) => s = next,
                        None => break,
                    }
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

/// The largest message rdmabw sends (`-s`, and the top of a sweep): the buffer it registers
/// holds two of them. A server refuses a hello that asks for more, whatever its `--max-buffer`.
pub const MAX_MSG_BYTES: u64 = 1 << 30;

/// The longest any one time of a test may be (`-D`, `--window`, warm-up, cool-down,
/// `--connect-timeout` and the like): a week. Far beyond any real test, and far below what
/// `Duration` or a deadline's `Instant` arithmetic can hold.
pub const MAX_SECONDS: f64 = 7.0 * 86_400.0;

/// A parameter outside what rdmabw allows: the CLI says so before it starts, and a server
/// refuses a hello that carries one before it computes anything from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{param} {value} is out of range: {allowed}")]
pub struct OutOfBounds {
    /// The parameter, as the user knows it (the flag).
    pub param: &'static str,
    /// The value given.
    pub value: String,
    /// What is allowed, in words.
    pub allowed: String,
}

fn out_of_bounds<T: std::fmt::Display>(
    param: &'static str,
    value: T,
    allowed: impl Into<String>,
) -> Result<(), OutOfBounds> {
    Err(OutOfBounds {
        param,
        value: value.to_string(),
        allowed: allowed.into(),
    })
}

/// Checks that `v` seconds is a finite time of at most [`MAX_SECONDS`], positive unless
/// `allow_zero`.
pub fn check_seconds(param: &'static str, v: f64, allow_zero: bool) -> Result<(), OutOfBounds> {
    let low_ok = if allow_zero { v >= 0.0 } else { v > 0.0 };
    if v.is_finite() && low_ok && v <= MAX_SECONDS {
        return Ok(());
    }
    out_of_bounds(
        param,
        v,
        format!(
            "give a {} number of seconds, at most {MAX_SECONDS} (a week)",
            if allow_zero {
                "non-negative"
            } else {
                "positive"
            }
        ),
    )
}

/// What a latency test (`rdmabw lat`, ib_write_lat's ping-pong of one QP) cannot run: one
/// rule, which `rdmabw lat`'s command line applies to its flags and a server to a latency
/// hello before admitting it ([`TestParams::check_latency`], [`check_latency_shape`]). Each
/// message names the flag and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotForLatency {
    /// More than one QP (`-q`).
    #[error("-q {qps}: a latency test runs one QP (as ib_write_lat): leave -q out")]
    Qps {
        /// The QPs asked for.
        qps: u32,
    },
    /// `-b`.
    #[error("not a flag of rdmabw lat: -b/--bidirectional: both sides already write in turn")]
    Bidirectional,
    /// `--run_infinitely`.
    #[error("not a flag of rdmabw lat: --run_infinitely: run -D SECONDS, or several tests")]
    RunInfinitely,
    /// `--data_validation`.
    #[error(
        "not a flag of rdmabw lat: --data_validation: the ping-pong checks only the last byte \
         of each write"
    )]
    DataValidation,
    /// Fewer than [`super::flags::LAT_MIN_ITERS`] exchanges (`-n`).
    #[error(
        "-n/--iters {iterations}: a latency test runs at least {min} exchanges (as ib_write_lat)",
        min = super::flags::LAT_MIN_ITERS
    )]
    TooFewExchanges {
        /// The exchanges asked for.
        iterations: u64,
    },
    /// A sweep of sizes (`-a`) in a timed test (`-D`).
    #[error(
        "-a with -D: a timed latency test runs one size (-s); leave out -D to sweep sizes by -n \
         exchanges"
    )]
    TimedSweep,
}

/// The part of the latency rule that a command line can check on its flags alone, before it
/// resolves them: one QP (`-q`, 1 when not given), one direction (`-b`), an end
/// (`--run_infinitely`), no `--data_validation`. [`TestParams::check_latency`] checks this
/// and the rest.
pub fn check_latency_shape(
    qps: u32,
    bidirectional: bool,
    run_infinitely: bool,
    data_validation: bool,
) -> Result<(), NotForLatency> {
    if qps != 1 {
        return Err(NotForLatency::Qps { qps });
    }
    if bidirectional {
        return Err(NotForLatency::Bidirectional);
    }
    if run_infinitely {
        return Err(NotForLatency::RunInfinitely);
    }
    if data_validation {
        return Err(NotForLatency::DataValidation);
    }
    Ok(())
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
    /// A latency test (`rdmabw lat`, ib_write_lat): one QP, each side writing into the other's
    /// buffer in turn and polling its memory for the peer's write.
    #[serde(default, skip_serializing_if = "is_false")]
    pub latency: bool,
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
    /// A bandwidth test of `sizes` over `qps` RC queue pairs, one direction, nothing else asked
    /// (each of the other fields is off); set them on the result.
    pub fn write_bw(sizes: Sizes, length: TestLength, qps: u32) -> TestParams {
        TestParams {
            sizes,
            length,
            qps,
            connection: Connection::RC,
            bidirectional: false,
            run_infinitely: false,
            data_validation: false,
            latency: false,
        }
    }

    /// A latency test (`rdmabw lat`, ib_write_lat's ping-pong) of `sizes` over one RC queue
    /// pair, nothing else asked.
    pub fn write_lat(sizes: Sizes, length: TestLength) -> TestParams {
        TestParams {
            latency: true,
            ..TestParams::write_bw(sizes, length, 1)
        }
    }

    /// Checks every parameter against the bounds rdmabw's command line enforces: sizes 1 B to
    /// [`MAX_MSG_BYTES`] (a sweep's top at least 2 B), at least one QP and one iteration, and
    /// times finite, non-negative, at most [`MAX_SECONDS`] (the window positive). A server
    /// calls this on a hello before any arithmetic on it.
    pub fn check_bounds(&self) -> Result<(), OutOfBounds> {
        match self.sizes {
            Sizes::One { msg_size_bytes } if !(1..=MAX_MSG_BYTES).contains(&msg_size_bytes) => {
                return out_of_bounds(
                    "--size/-s",
                    msg_size_bytes,
                    format!("a message is 1 to {MAX_MSG_BYTES} bytes"),
                )
            }
            Sizes::Sweep { max_bytes } if !(2..=MAX_MSG_BYTES).contains(&max_bytes) => {
                return out_of_bounds(
                    "--all/-a (the sweep's largest size)",
                    max_bytes,
                    format!("a sweep goes up to 2 to {MAX_MSG_BYTES} bytes"),
                )
            }
            _ => {}
        }
        if self.qps == 0 {
            return out_of_bounds("--qp/-q", self.qps, "at least 1 queue pair");
        }
        match self.length {
            TestLength::Iterations { iterations: 0 } => {
                return out_of_bounds("--iters/-n", 0, "at least 1 iteration")
            }
            TestLength::Iterations { .. } => {}
            TestLength::Duration {
                duration_s,
                warmup_s,
                cooldown_s,
            } => {
                check_seconds("--duration/-D", duration_s, false)?;
                check_seconds("--warmup", warmup_s, true)?;
                check_seconds("--cooldown", cooldown_s, true)?;
            }
        }
        Ok(())
    }

    /// Checks what a latency test must be, as `rdmabw lat` takes its flags: the shape
    /// ([`check_latency_shape`]), at least [`super::flags::LAT_MIN_ITERS`] exchanges, and one
    /// size when timed. Any count of exchanges above that is taken (`-n 2^64-1` too): a side
    /// keeps at most [`MAX_KEPT_SAMPLES`](super::lat_stats::MAX_KEPT_SAMPLES) samples of a size one by one.
    pub fn check_latency(&self) -> Result<(), NotForLatency> {
        check_latency_shape(
            self.qps,
            self.bidirectional,
            self.run_infinitely,
            self.data_validation,
        )?;
        match (self.length, &self.sizes) {
            (TestLength::Iterations { iterations }, _)
                if iterations < super::flags::LAT_MIN_ITERS =>
            {
                Err(NotForLatency::TooFewExchanges { iterations })
            }
            (TestLength::Duration { .. }, Sizes::Sweep { .. }) => Err(NotForLatency::TimedSweep),
            _ => Ok(()),
        }
    }

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
        differ(
            "the test (`rdmabw lat` or bandwidth)",
            &self.latency,
            &peer.latency,
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
    /// A latency test's statistics (`rdmabw lat`); absent for bandwidth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<super::lat_stats::LatencyStats>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
