//! The measured RDMA WRITE loop, and the per-test resources it runs on.
//!
//! Life of one side of a test on one rail:
//!
//! 1. [`Prepared::new`]: PD, one basic CQ, one buffer, `qps` RC QPs in INIT.
//! 2. Send [`Prepared::info`] (a serde [`SideInfo`]) to the peer over the control channel and
//!    receive the peer's; negotiate the MTU ([`PathMtu::negotiate`]) and build
//!    [`PathParams`].
//! 3. [`Prepared::connect`]: every QP to RTR and RTS against the peer's endpoints.
//! 4. Initiator (client, and both sides when bidirectional): [`Connected::run_writes`]. The
//!    responder of a unidirectional test only keeps its [`Connected`] alive until the control
//!    channel says the test is over.
//!
//! The buffer holds two halves of `max message size` bytes each (page-rounded): writes go out
//! from the first half and land in the second, whose range is what [`SideInfo::mr`]
//! advertises, so in bidirectional mode the device never reads what the peer is writing.
//!
//! The loop (per message size): post RDMA WRITEs on the QPs round-robin, up to `tx_depth`
//! outstanding per QP, in lists of `post_list` work requests per post call; signal every
//! `cq_mod`-th write (and the last one); writes no larger than `inline_bytes` go inline; poll
//! the CQ in batches. Iteration mode posts exactly `iterations` writes per QP and measures from
//! the first post to the last completion. Duration mode runs warm-up, measured window and
//! cool-down like perftest `-D`: only completions polled inside the window count, then it
//! stops posting, makes sure each QP's last write is signaled, and drains.
//!
//! Bandwidth samples: the cumulative completed-bytes curve (linearly interpolated between
//! completion events, so that `cq_mod` batching does not show up as spikes) is cut into
//! fixed intervals (10 ms in duration mode, 1 ms in iteration mode) whose rates go into an
//! HDR histogram for p1/p50/p99; the peak is the best interval.
//!
//! A caller-supplied `&AtomicBool` is checked every 200 us; a completion with an error status
//! ends the run with [`Error::WorkCompletion`]; no completion for a long time with writes
//! outstanding ends it with [`Error::Stalled`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use results::rdmabw::gpu::MemoryRequest;
use results::rdmabw::params::{LocalTuning, PollMode, SizeResult, TestLength, TestParams};
use serde::{Deserialize, Serialize};

use crate::error::{Error, GidUnusable};
use crate::gid::Rail;
use crate::gpu::MemoryUse;
use crate::verbs::buffer::PAGE;
use crate::verbs::{
    Buffer, Completion, Cq, Device, Init, MrInfo, PathMtu, PathParams, Pd, Qp, QpConfig,
    QpEndpoint, Rts, WriteSpec,
};

/// How often the stop flag is checked.
pub const STOP_CHECK: Duration = Duration::from_micros(200);
/// Sampling interval in duration mode.
pub const DURATION_INTERVAL: Duration = Duration::from_millis(10);
/// Sampling interval in iteration mode.
pub const ITERATION_INTERVAL: Duration = Duration::from_millis(1);

/// Empty polls between two clock reads while nothing completes. Spinning on an empty CQ needs
/// the time only to see the window close or a stop come, which 64 polls (microseconds on a NIC)
/// delay by nothing that matters; ib_write_bw reads no clock in its loop at all.
const IDLE_POLLS_PER_CLOCK: u32 = 64;
/// Polls tried at most to bracket one poll's time closely (see the loop).
const BRACKET_TRIES: u32 = 8;
/// Adaptive polling: how long the CQ must have been empty before the poller may sleep.
const BACKOFF_AFTER: Duration = Duration::from_millis(1);
/// Adaptive polling: the longest single sleep.
const BACKOFF_MAX: Duration = Duration::from_millis(1);
/// Adaptive polling: sleeps shorter than this are not worth a system call; spin instead.
const BACKOFF_MIN: Duration = Duration::from_micros(50);

/// How long an adaptive poller may sleep after a poll found nothing and nothing could be
/// posted. `idle` is the time since the last completion; `drain` how long the writes in flight
/// last at the rate seen so far (unknown before the first completion); `spare` the part of the
/// send queue still in flight right after a signaled completion ((depth - cq_mod) / depth),
/// i.e. what keeps the link busy while the poller is late. A sleep never exceeds half of that
/// margin, so the queue never runs dry because of it; `None` means spin.
fn backoff(idle: Duration, drain: Option<Duration>, spare: f64) -> Option<Duration> {
    if idle < BACKOFF_AFTER {
        return None;
    }
    let mut q = (idle / 8).min(BACKOFF_MAX);
    if let Some(d) = drain {
        q = q.min(d.mul_f64((spare / 2.0).clamp(0.0, 0.5)));
    }
    (q >= BACKOFF_MIN).then_some(q)
}

/// Whether this side's poller gives way to the kernel: spin-polling on Soft-RoCE, where the
/// device's work (requester, responder, completer) runs in kernel threads on the same CPUs as
/// the poller. At equal priority the poller, which only waits, holds a CPU those threads need.
/// In the lab the bandwidth at idle priority was ahead of normal priority in 7 of 10 batches
/// of rounds against ib_write_bw (both within a few percent of it), and the client's CPU time
/// 20-35% lower. A NIC needs no CPU to move data, so on one nothing changes.
fn polls_at_idle_priority(device: &Device, poll: PollMode) -> bool {
    poll == PollMode::Spin && device.is_rxe()
}

/// Puts the calling (polling) thread in `SCHED_IDLE`, once per thread. Best effort: a thread
/// that may not change its class keeps polling at its priority.
fn idle_priority_once() {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    DONE.with(|d| {
        if !d.replace(true) {
            let _ = crate::ffi::set_thread_sched_idle();
        }
    });
}

/// What stops a run: either flag raised (the caller's, e.g. on SIGINT, and the peer watch's
/// verdict), looked at every [`STOP_CHECK`]. Two flags rather than a thread that copies one
/// into the other: such a thread would have to wake several times a second during the window.
#[derive(Debug, Clone, Copy)]
pub struct StopFlags<'a> {
    first: &'a AtomicBool,
    second: Option<&'a AtomicBool>,
}

impl<'a> StopFlags<'a> {
    /// Stop when `flag` is raised.
    pub fn one(flag: &'a AtomicBool) -> StopFlags<'a> {
        StopFlags {
            first: flag,
            second: None,
        }
    }

    /// Stop when `a` or `b` is raised.
    pub fn either(a: &'a AtomicBool, b: &'a AtomicBool) -> StopFlags<'a> {
        StopFlags {
            first: a,
            second: Some(b),
        }
    }

    fn raised(&self) -> bool {
        self.first.load(Ordering::Relaxed) || self.second.is_some_and(|f| f.load(Ordering::Relaxed))
    }
}

/// What one side tells the other so that both can connect and write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideInfo {
    /// RDMA device name (for messages).
    pub device: String,
    /// Port number.
    pub port: u8,
    /// Active MTU of the port in bytes.
    pub active_mtu_bytes: u32,
    /// One endpoint per QP, in QP order.
    pub qps: Vec<QpEndpoint>,
    /// Where the peer may write.
    pub mr: MrInfo,
    /// The largest message this side was prepared for.
    pub max_msg_bytes: u64,
}

fn round_up_page(n: u64) -> u64 {
    n.div_ceil(PAGE as u64) * PAGE as u64
}

/// The effective loop knobs after clamping, shared by sizing and the loop.
#[derive(Debug, Clone, Copy)]
struct Knobs {
    depth: u64,
    cq_mod: u64,
    post_list: u64,
    poll: PollMode,
}

fn knobs(t: &LocalTuning) -> Result<Knobs, Error> {
    if t.tx_depth == 0 {
        return Err(Error::InvalidParams(
            "tx depth (-t) must be at least 1".into(),
        ));
    }
    let depth = u64::from(t.tx_depth);
    Ok(Knobs {
        depth,
        cq_mod: u64::from(t.cq_mod.max(1)).min(depth),
        post_list: u64::from(t.post_list.max(1)).min(depth),
        poll: t.poll,
    })
}

/// One side's resources with QPs in INIT, ready to exchange [`SideInfo`].
#[derive(Debug)]
pub struct Prepared {
    // Drop order: QPs, then CQ, buffer, PD, device.
    qps: Vec<Qp<Init>>,
    cq: Cq,
    buffer: Buffer,
    pd: Pd,
    device: Device,
    port: u8,
    active_mtu: PathMtu,
    max_msg: u64,
    landing: u64,
    inline_bytes: u32,
    memory: MemoryUse,
}

impl Prepared {
    /// Prepares for `params` on `port` of `device`, sourcing packets from GID `gid_index`.
    pub fn new(
        device: &Device,
        port: u8,
        gid_index: u32,
        params: &TestParams,
        tuning: &LocalTuning,
    ) -> Result<Prepared, Error> {
        let k = knobs(tuning)?;
        let sizes = params.sizes.list();
        let max_msg = sizes.iter().copied().max().unwrap_or(0);
        if sizes.is_empty() || sizes.contains(&0) {
            return Err(Error::InvalidParams(
                "message sizes must be at least 1 byte (and -a needs a maximum of at least 2)"
                    .into(),
            ));
        }
        if max_msg > u64::from(u32::MAX >> 1) {
            return Err(Error::InvalidParams(format!(
                "message size {max_msg} exceeds 2 GiB, the largest RDMA message"
            )));
        }
        if params.qps == 0 {
            return Err(Error::InvalidParams(
                "at least one QP (-q) is needed".into(),
            ));
        }
        let caps = device.caps();
        if params.qps > caps.max_qp {
            return Err(Error::InvalidParams(format!(
                "{} QPs exceed the {} that {} supports",
                params.qps,
                caps.max_qp,
                device.name()
            )));
        }
        if let TestLength::Iterations { iterations: 0 } = params.length {
            return Err(Error::InvalidParams(
                "iterations (-n) must be at least 1".into(),
            ));
        }
        if let TestLength::Duration { duration_s, .. } = params.length {
            if !(duration_s > 0.0 && duration_s.is_finite()) {
                return Err(Error::InvalidParams(
                    "duration (-D) must be positive".into(),
                ));
            }
        }

        let pinfo = device.active_port(port)?;
        let active_mtu = pinfo.active_mtu.ok_or_else(|| Error::Query {
            device: device.name().to_string(),
            what: format!("the active MTU of port {port}"),
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        })?;
        if gid_index >= pinfo.gid_table_len {
            return Err(Error::GidIndexOutOfRange {
                device: device.name().to_string(),
                port,
                index: gid_index,
                table_len: pinfo.gid_table_len,
                usable: Vec::new(),
            });
        }
        let gid = device.gid(port, gid_index)?;
        if gid.is_zero() {
            return Err(Error::GidNotUsable {
                device: device.name().to_string(),
                port,
                index: gid_index,
                reason: GidUnusable::ForeignOrEmpty,
                usable: Vec::new(),
            });
        }

        let pd = device.alloc_pd()?;
        let half = round_up_page(max_msg);
        let (buffer, memory) = match &tuning.memory {
            MemoryRequest::Host => (pd.alloc_host_buffer(2 * half)?, MemoryUse::host()),
            // CUDA memory on the GPU asked for (or nearest this NIC), registered by dma-buf or
            // nvidia_peermem: see `crate::gpu`.
            MemoryRequest::Cuda { gpu, path } => {
                crate::gpu::alloc_buffer(&pd, 2 * half, gpu, *path)?
            }
        };

        let signaled_per_qp = k.depth / k.cq_mod + 2;
        let needed = u64::from(params.qps) * signaled_per_qp;
        if needed > u64::from(caps.max_cqe) {
            return Err(Error::InvalidParams(format!(
                "{} QPs with tx depth {} and cq_mod {} need {needed} CQ entries; {} has {}",
                params.qps,
                k.depth,
                k.cq_mod,
                device.name(),
                caps.max_cqe
            )));
        }
        let entries = (u64::from(params.qps) * k.depth + 1)
            .max(needed)
            .min(u64::from(caps.max_cqe));
        let cq = pd.create_cq(u32::try_from(entries).unwrap_or(u32::MAX))?;

        let cfg = QpConfig {
            port,
            max_send_wr: tuning.tx_depth,
            max_inline_data: tuning.inline_bytes,
            gid,
            lid: pinfo.lid,
        };
        let qps = (0..params.qps)
            .map(|_| pd.create_qp(&cq, &cfg))
            .collect::<Result<Vec<_>, _>>()?;

        Ok(Prepared {
            qps,
            cq,
            buffer,
            pd,
            device: device.clone(),
            port,
            active_mtu,
            max_msg,
            landing: half,
            inline_bytes: tuning.inline_bytes,
            memory,
        })
    }

    /// [`Prepared::new`] on a rail chosen by [`crate::gid::resolve_rail`].
    pub fn for_rail(
        device: &Device,
        rail: &Rail,
        params: &TestParams,
        tuning: &LocalTuning,
    ) -> Result<Prepared, Error> {
        if rail.device != device.name() {
            return Err(Error::InvalidParams(format!(
                "rail is on {} but the open device is {}",
                rail.device,
                device.name()
            )));
        }
        Self::new(device, rail.port, rail.gid_index, params, tuning)
    }

    /// The memory the buffer is in (host, or which GPU and registration path).
    pub fn memory(&self) -> &MemoryUse {
        &self.memory
    }

    /// The active MTU of the port.
    pub fn active_mtu(&self) -> PathMtu {
        self.active_mtu
    }

    /// What the peer needs from this side.
    pub fn info(&self) -> Result<SideInfo, Error> {
        Ok(SideInfo {
            device: self.device.name().to_string(),
            port: self.port,
            active_mtu_bytes: self.active_mtu.bytes(),
            qps: self.qps.iter().map(Qp::endpoint).collect(),
            mr: self.buffer.mr_info(self.landing, self.landing)?,
            max_msg_bytes: self.max_msg,
        })
    }

    /// Connects every QP to the peer's QP of the same position.
    pub fn connect(self, remote: &SideInfo, path: &PathParams) -> Result<Connected, Error> {
        if remote.qps.len() != self.qps.len() {
            return Err(Error::PeerMismatch(format!(
                "this side has {} QPs, the peer {}",
                self.qps.len(),
                remote.qps.len()
            )));
        }
        if remote.mr.len < self.max_msg {
            return Err(Error::PeerMismatch(format!(
                "the peer's region on {} holds {} bytes, messages here go up to {}",
                remote.device, remote.mr.len, self.max_msg
            )));
        }
        let Prepared {
            qps,
            cq,
            buffer,
            pd,
            device,
            port,
            inline_bytes,
            ..
        } = self;
        let qps = qps
            .into_iter()
            .zip(&remote.qps)
            .map(|(qp, r)| qp.connect(r, path))
            .collect::<Result<Vec<_>, _>>()?;
        // rxe retries forever when the retry count is 7 (its completer never decrements 7),
        // and an ACK timeout of 0 is infinite everywhere: then only this guard ends a run
        // whose peer vanished without the caller noticing.
        let rxe7 = device.is_rxe() && path.retry_count >= 7;
        let stall_hint = if rxe7 {
            "; rxe retries forever with retry count 7, so it never reports retry-exceeded (use a retry count of 6 or less)".to_string()
        } else if path.ack_timeout == 0 {
            "; the ACK timeout is 0 (infinite), so the device never reports retry-exceeded"
                .to_string()
        } else {
            String::new()
        };
        let stall_limit = match path.retry_window() {
            Some(w) if !rxe7 => (w * 3).max(Duration::from_secs(10)),
            _ => Duration::from_secs(10),
        };
        Ok(Connected {
            qps,
            cq,
            buffer,
            _pd: pd,
            device,
            port,
            remote_mr: remote.mr,
            inline_src: vec![0u8; inline_bytes as usize],
            stall_limit,
            stall_hint,
            rate_est: None,
            poisoned: false,
        })
    }
}

/// One side with every QP in RTS.
#[derive(Debug)]
pub struct Connected {
    // Drop order: QPs, then CQ, buffer, PD, device.
    qps: Vec<Qp<Rts>>,
    cq: Cq,
    buffer: Buffer,
    _pd: Pd,
    device: Device,
    port: u8,
    remote_mr: MrInfo,
    inline_src: Vec<u8>,
    stall_limit: Duration,
    stall_hint: String,
    /// Bytes per second seen so far on this connection (the last finished size), for the
    /// stall guard.
    rate_est: Option<f64>,
    poisoned: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct QpRun {
    posted: u64,
    completed: u64,
    unsignaled: u64,
}

impl QpRun {
    fn outstanding(&self) -> u64 {
        self.posted - self.completed
    }
}

/// Decides how many writes to post on one QP now and which are signaled; fills `wrs` with
/// `(wr_id, signaled)`. `wr_id` = QP index << 32 | writes the completion accounts for.
fn plan_posts(
    qi: usize,
    st: &mut QpRun,
    k: Knobs,
    target: Option<u64>,
    force_signal_last: bool,
    wrs: &mut Vec<(u64, bool)>,
) {
    wrs.clear();
    let room = k.depth - st.outstanding();
    let remaining = target.map_or(u64::MAX, |t| t - st.posted);
    let n = k.post_list.min(room).min(remaining);
    if n == 0 {
        return;
    }
    // Wait for room for a whole list, unless this is the tail or nothing signaled is in
    // flight (then nothing would ever make room).
    let signaled_in_flight = st.outstanding() > st.unsignaled;
    let partial = n < k.post_list && n < remaining;
    if partial && signaled_in_flight {
        return;
    }
    for j in 0..n {
        st.unsignaled += 1;
        st.posted += 1;
        let last = target == Some(st.posted) || (j + 1 == n && (force_signal_last || partial));
        if st.unsignaled >= k.cq_mod || last {
            wrs.push((((qi as u64) << 32) | st.unsignaled, true));
            st.unsignaled = 0;
        } else {
            wrs.push(((qi as u64) << 32, false));
        }
    }
}

/// How long to wait without any completion before declaring a stall: at least `base`, and
/// four times the time one signaled completion's worth of data (`batch_bytes`: cq_mod writes
/// on every QP) takes at the rate seen so far. The rate is what this size moved up to its last
/// completion (`done_bytes` in `active`), else `rate_est` from the previous size, else a
/// pessimistic 1 MB/s. Measuring up to the last completion matters: a rate measured up to
/// *now* shrinks while the stall lasts, and the limit would grow with it and never be reached.
fn stall_limit_for(
    base: Duration,
    batch_bytes: u64,
    done_bytes: u64,
    active: Duration,
    rate_est: Option<f64>,
) -> Duration {
    let active_s = active.as_secs_f64();
    let rate = (done_bytes > 0 && active_s > 0.0)
        .then(|| done_bytes as f64 / active_s)
        .or(rate_est)
        .filter(|r| *r > 0.0)
        .unwrap_or(1e6);
    base.max(Duration::from_secs_f64(
        (4.0 * batch_bytes as f64 / rate).min(3600.0),
    ))
}

/// One QP's cumulative completed bytes over time: `(t, bytes)` events starting at `(0, 0)`.
#[derive(Debug)]
struct Curve {
    events: VecDeque<(f64, f64)>,
    done: bool,
}

impl Curve {
    fn new() -> Curve {
        Curve {
            events: VecDeque::from([(0.0, 0.0)]),
            done: false,
        }
    }

    fn push(&mut self, t: f64, b: f64) {
        match self.events.back_mut() {
            Some(last) if last.0 >= t => last.1 = b,
            _ => self.events.push_back((t, b)),
        }
    }

    /// The curve at `t`, linearly interpolated; `None` while no event at or after `t` has
    /// arrived and the QP is still running.
    fn at(&self, t: f64) -> Option<f64> {
        let mut prev: Option<(f64, f64)> = None;
        for &(et, eb) in &self.events {
            if et >= t {
                return Some(match prev {
                    Some((pt, pb)) if et > pt => pb + (eb - pb) * (t - pt) / (et - pt),
                    _ => eb,
                });
            }
            prev = Some((et, eb));
        }
        if self.done {
            prev.map(|p| p.1)
        } else {
            None
        }
    }

    /// Forgets events no longer needed once everything up to `t` is accounted for.
    fn prune(&mut self, t: f64) {
        while self.events.len() >= 2 && self.events.get(1).is_some_and(|e| e.0 <= t) {
            self.events.pop_front();
        }
    }
}

/// Bandwidth samples over fixed intervals.
///
/// Each QP has its own cumulative completed-bytes curve, interpolated between that QP's
/// completions (a completion accounts for the bytes written since the same QP's previous
/// one). An interval is closed once every running QP has reported a completion at or after
/// its end; its bytes are the sum of the QPs' curves. Interpolating one curve across QPs
/// instead would credit a QP's bytes to the gap since *another* QP's completion and show
/// spikes that never happened.
#[derive(Debug)]
pub(crate) struct Sampler {
    interval: f64,
    end: Option<f64>,
    next: f64,
    started: bool,
    finished: bool,
    boundary_b: f64,
    boundary_t: f64,
    curves: Vec<Curve>,
    hist: Option<Histogram<u64>>,
    peak_gbps: f64,
    samples: u64,
}

impl Sampler {
    /// Intervals of `interval` from `start` up to `end` (seconds on the caller's clock, which
    /// starts at 0 where every curve is 0), for `qps` curves.
    pub(crate) fn new(interval: Duration, start: f64, end: Option<f64>, qps: usize) -> Sampler {
        Sampler {
            interval: interval.as_secs_f64(),
            end,
            next: start,
            started: false,
            finished: false,
            boundary_b: 0.0,
            boundary_t: start,
            curves: (0..qps.max(1)).map(|_| Curve::new()).collect(),
            // kb/s (Gb/s * 1e6) up to 10 Tb/s with 3 significant digits. (Creation cannot
            // fail for these bounds; without a histogram the summary falls back to the average.)
            hist: Histogram::new_with_bounds(1, 10_000_000_000, 3).ok(),
            peak_gbps: 0.0,
            samples: 0,
        }
    }

    fn record(&mut self, bytes: f64, secs: f64) {
        if secs <= 0.0 {
            return;
        }
        let gbps = bytes.max(0.0) * 8.0 / secs / 1e9;
        if let Some(h) = &mut self.hist {
            h.saturating_record((gbps * 1e6).round() as u64);
        }
        self.peak_gbps = self.peak_gbps.max(gbps);
        self.samples += 1;
    }

    /// A completion on QP `qp` at time `t`: `cum` bytes of that QP have completed in total.
    #[cfg(test)]
    pub(crate) fn event(&mut self, qp: usize, t: f64, cum: u64) {
        self.polled(t, [(qp, cum, false)]);
    }

    /// QP `qp` will complete nothing more (its curve stays flat).
    #[cfg(test)]
    pub(crate) fn finish_qp(&mut self, qp: usize) {
        if let Some(c) = self.curves.get_mut(qp) {
            c.done = true;
        }
        self.advance();
    }

    /// What one poll of the CQ returned at time `t`: for each completion, `(qp, cum, done)`
    /// with `cum` the bytes that QP has completed in total up to that completion (a QP's last
    /// entry counts) and `done` whether it will complete nothing more. Intervals are closed
    /// only once the whole poll is in: closed after its first completion, they would get only
    /// that one's bytes and the next interval the rest, a dip and a spike where the link ran
    /// evenly (a poll that found a backlog of 73 completions after a 150 ms gap showed p1 0.003,
    /// p99 2.3 and a 4.8 Gb/s peak on a lab rail that averaged 0.33 Gb/s).
    pub(crate) fn polled(&mut self, t: f64, batch: impl IntoIterator<Item = (usize, u64, bool)>) {
        let mut finished = false;
        for (qp, cum, done) in batch {
            if let Some(c) = self.curves.get_mut(qp) {
                c.push(t, cum as f64);
                if done && !c.done {
                    c.done = true;
                    finished = true;
                }
            }
        }
        if finished || t >= self.next || self.end.is_some_and(|e| t >= e) {
            self.advance();
        }
    }

    /// Ends every curve; the last interval ends at `t` (iteration mode) or at the end given at
    /// creation, whichever is earlier.
    pub(crate) fn close(&mut self, t: f64) {
        self.end = Some(self.end.map_or(t, |e| e.min(t)));
        for c in &mut self.curves {
            c.done = true;
        }
        self.advance();
    }

    fn advance(&mut self) {
        while !self.finished {
            let (tb, is_end) = match self.end {
                Some(e) if e < self.next => (e, true),
                None if self.curves.iter().all(|c| c.done) => return,
                _ => (self.next, false),
            };
            let mut total = 0.0;
            for c in &self.curves {
                match c.at(tb) {
                    Some(v) => total += v,
                    None => return,
                }
            }
            if is_end {
                let partial = tb - self.boundary_t;
                if self.started && partial >= self.interval / 2.0 {
                    self.record(total - self.boundary_b, partial);
                }
                self.finished = true;
                return;
            }
            if self.started {
                self.record(total - self.boundary_b, self.interval);
            }
            self.started = true;
            self.boundary_b = total;
            self.boundary_t = tb;
            self.next += self.interval;
            for c in &mut self.curves {
                c.prune(tb);
            }
        }
    }

    /// (p1, p50, p99, peak) in Gb/s; `fallback` for each when there was no full sample.
    pub(crate) fn summary(&self, fallback: f64) -> (f64, f64, f64, f64) {
        let Some(h) = self.hist.as_ref().filter(|_| self.samples > 0) else {
            return (fallback, fallback, fallback, fallback);
        };
        let q = |x: f64| h.value_at_quantile(x) as f64 / 1e6;
        (q(0.01), q(0.50), q(0.99), self.peak_gbps)
    }
}

impl Connected {
    /// The local QP numbers, in QP order.
    pub fn qp_numbers(&self) -> Vec<u32> {
        self.qps.iter().map(Qp::qpn).collect()
    }

    /// Device name.
    pub fn device_name(&self) -> &str {
        self.device.name()
    }

    /// Whether the thread that runs the writes polls at idle CPU priority (spin-polling on
    /// Soft-RoCE, where kernel threads on the same CPUs move the data).
    pub fn polls_at_idle_priority(&self, tuning: &LocalTuning) -> bool {
        polls_at_idle_priority(&self.device, tuning.poll)
    }

    /// Runs every message size of `params`; see the module doc. After an error the QPs may
    /// hold unfinished writes or be in the error state: the object is then unusable.
    pub fn run_writes(
        &mut self,
        params: &TestParams,
        tuning: &LocalTuning,
        stop: StopFlags<'_>,
    ) -> Result<Vec<SizeResult>, Error> {
        let mut out = Vec::new();
        let sizes = params.sizes.list();
        let n = sizes.len();
        for (i, size) in sizes.into_iter().enumerate() {
            // After the last size nothing else runs on these QPs: its writes still in flight
            // when the window (and cool-down) closes count for nothing, so they are not waited
            // for. At Soft-RoCE's rate a full queue of 64 KiB writes takes 0.1-0.2 s to drain.
            let drain = i + 1 < n;
            match self.run_size_drained(size, &params.length, tuning, stop, drain) {
                Ok(r) => out.push(r),
                Err(Error::Stopped { device, port, .. }) => {
                    return Err(Error::Stopped {
                        device,
                        port,
                        completed_sizes: out.len(),
                    })
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Runs one message size, and waits for every write it posted before returning.
    pub fn run_size(
        &mut self,
        size: u64,
        length: &TestLength,
        tuning: &LocalTuning,
        stop: StopFlags<'_>,
    ) -> Result<SizeResult, Error> {
        self.run_size_drained(size, length, tuning, stop, true)
    }

    /// [`Connected::run_size`]; with `drain` false, a duration run returns when its window
    /// (and cool-down) closes, leaving writes in flight: the QPs can then run nothing else.
    fn run_size_drained(
        &mut self,
        size: u64,
        length: &TestLength,
        tuning: &LocalTuning,
        stop: StopFlags<'_>,
        drain: bool,
    ) -> Result<SizeResult, Error> {
        if self.poisoned {
            return Err(Error::InvalidParams(
                "an earlier run on these QPs failed, was stopped or left writes in flight; set up a new connection".into(),
            ));
        }
        self.poisoned = true;
        let r = self.run_size_inner(size, length, tuning, stop, drain);
        if let Ok(res) = &r {
            // Writes left in flight would complete during the next size and be counted there.
            self.poisoned = !drain && matches!(length, TestLength::Duration { .. });
            if res.bw_avg_gbps > 0.0 {
                self.rate_est = Some(res.bw_avg_gbps * 1e9 / 8.0);
            }
        }
        r
    }

    fn run_size_inner(
        &mut self,
        size: u64,
        length: &TestLength,
        tuning: &LocalTuning,
        stop: StopFlags<'_>,
        drain: bool,
    ) -> Result<SizeResult, Error> {
        let k = knobs(tuning)?;
        if polls_at_idle_priority(&self.device, k.poll) {
            idle_priority_once();
        }
        let size32 = u32::try_from(size)
            .map_err(|_| Error::InvalidParams(format!("message size {size} too large")))?;
        let Connected {
            qps,
            cq,
            buffer,
            device,
            port,
            remote_mr,
            inline_src,
            stall_limit,
            stall_hint,
            rate_est,
            ..
        } = self;
        let spec = if size32 as usize <= inline_src.len() {
            WriteSpec::inline(&inline_src[..size32 as usize], remote_mr, 0)?
        } else {
            WriteSpec::from_buffer(buffer, 0, size32, remote_mr, 0)?
        };

        let nq = qps.len();
        // The stall guard must outlast the wait for one signaled completion: up to cq_mod
        // writes on every QP at the rate seen so far (this size, else the last one, else a
        // pessimistic 1 MB/s). On a slow link with big messages that is many seconds: 100
        // writes of 1 MiB at 0.09 Gb/s (the lab's emulated rxe) take 9 s.
        let batch_bytes = k.cq_mod * size * nq as u64;
        let mut size_bytes_done: u64 = 0;
        let mut st = vec![QpRun::default(); nq];
        let mut wrs: Vec<(u64, bool)> = Vec::with_capacity(k.post_list as usize);
        // A poll takes everything the CQ holds (at most every write in flight), under one time.
        let poll_max = (k.depth as usize).saturating_mul(nq).max(1);
        let mut wcs: Vec<Completion> = Vec::with_capacity(poll_max);

        let (target, ws, we, wend, interval) = match *length {
            TestLength::Iterations { iterations } => (
                Some(iterations),
                0.0,
                f64::INFINITY,
                f64::INFINITY,
                ITERATION_INTERVAL,
            ),
            TestLength::Duration {
                duration_s,
                warmup_s,
                cooldown_s,
            } => {
                let w = warmup_s.max(0.0);
                let c = cooldown_s.max(0.0);
                (
                    None,
                    w,
                    w + duration_s,
                    w + duration_s + c,
                    DURATION_INTERVAL,
                )
            }
        };
        let mut sampler = Sampler::new(interval, ws, target.map_or(Some(we), |_| None), nq);

        let mut window_msgs: u64 = 0;
        let mut draining = false;
        let mut cpu0 = None;
        let mut cpu1 = None;
        let mut t_end = 0.0;
        let mut rr = 0usize;

        let t0 = Instant::now();
        if target.is_some() || ws <= 0.0 {
            cpu0 = Some(crate::ffi::process_cpu_time());
        }
        let mut last_progress = t0;
        let mut last_stop_check = t0;
        let mut last_clock = t0;
        let bracket = interval / 10;
        let spare = (k.depth - k.cq_mod) as f64 / k.depth as f64;
        let mut idle_polls: u32 = 0;

        loop {
            // Post, round-robin starting one QP further each pass.
            let mut posted = false;
            for off in 0..nq {
                let qi = (rr + off) % nq;
                let s = &mut st[qi];
                if draining {
                    if s.unsignaled == 0 {
                        continue;
                    }
                    let one = Knobs { post_list: 1, ..k };
                    plan_posts(qi, s, one, Some(s.posted + 1), true, &mut wrs);
                } else {
                    plan_posts(qi, s, k, target, false, &mut wrs);
                }
                if !wrs.is_empty() {
                    qps[qi].post_writes(&spec, wrs.iter().copied())?;
                    posted = true;
                }
            }
            rr = (rr + 1) % nq.max(1);

            // Poll. A pass that neither posted nor completed anything changes nothing that needs
            // the time: read the clock on every IDLE_POLLS_PER_CLOCK-th such pass only.
            let mut n = cq.poll(&mut wcs, poll_max)?;
            if n == 0 && !posted {
                idle_polls += 1;
                if idle_polls < IDLE_POLLS_PER_CLOCK {
                    continue;
                }
            }
            idle_polls = 0;
            let mut now = Instant::now();
            // The completions are stamped with the time read after the poll. When the poller
            // was off its CPU since the clock was last read (the idle-priority poller on
            // Soft-RoCE, for up to 250 ms), the poll may have happened long before that time,
            // and whatever completed in between would be credited to the next interval as a
            // burst. So poll again until one poll is bracketed by two clock reads less than a
            // tenth of an interval apart: its time, and so every completion's, is then known
            // to that precision.
            let mut tries = 0;
            let mut before = last_clock;
            while n > 0 && now.duration_since(before) > bracket && tries < BRACKET_TRIES {
                before = now;
                n += cq.poll_more(&mut wcs, poll_max)?;
                now = Instant::now();
                tries += 1;
            }
            last_clock = now;
            let t = now.duration_since(t0).as_secs_f64();
            if n > 0 {
                if let Some(bad) = wcs
                    .iter()
                    .find(|c| !c.is_success() && c.status != 5)
                    .or_else(|| wcs.iter().find(|c| !c.is_success()))
                {
                    let qi = (bad.wr_id >> 32) as usize;
                    return Err(Error::WorkCompletion {
                        device: device.name().to_string(),
                        port: *port,
                        qpn: qps.get(qi).map_or(0, Qp::qpn),
                        status: bad.status,
                        status_str: crate::verbs::wc_status_str(bad.status),
                        vendor_err: bad.vendor_err,
                        hint: crate::verbs::wc_status_hint(bad.status),
                    });
                }
                let mut msgs = 0u64;
                for c in &wcs {
                    let qi = (c.wr_id >> 32) as usize;
                    let covered = c.wr_id & 0xffff_ffff;
                    if let Some(s) = st.get_mut(qi) {
                        s.completed += covered;
                    }
                    msgs += covered;
                }
                sampler.polled(
                    t,
                    wcs.iter().filter_map(|c| {
                        let qi = (c.wr_id >> 32) as usize;
                        let s = st.get(qi)?;
                        Some((
                            qi,
                            s.completed * size,
                            target.is_some_and(|n| s.completed >= n),
                        ))
                    }),
                );
                if t >= ws && t < we {
                    window_msgs += msgs;
                }
                size_bytes_done += msgs * size;
                last_progress = now;
            }

            // Phase changes and the end.
            if target.is_none() {
                if cpu0.is_none() && t >= ws {
                    cpu0 = Some(crate::ffi::process_cpu_time());
                }
                if cpu1.is_none() && t >= we {
                    cpu1 = Some(crate::ffi::process_cpu_time());
                }
                if t >= wend {
                    if !drain {
                        sampler.close(t);
                        break;
                    }
                    draining = true;
                }
                if draining && st.iter().all(|s| s.outstanding() == 0 && s.unsignaled == 0) {
                    sampler.close(t);
                    break;
                }
            } else if let Some(n) = target {
                if st.iter().all(|s| s.completed >= n) {
                    cpu1 = Some(crate::ffi::process_cpu_time());
                    t_end = t;
                    sampler.close(t);
                    break;
                }
            }

            if now.duration_since(last_stop_check) >= STOP_CHECK {
                last_stop_check = now;
                if stop.raised() {
                    return Err(Error::Stopped {
                        device: device.name().to_string(),
                        port: *port,
                        completed_sizes: 0,
                    });
                }
                let outstanding: u64 = st.iter().map(QpRun::outstanding).sum();
                let limit = stall_limit_for(
                    *stall_limit,
                    batch_bytes,
                    size_bytes_done,
                    last_progress.duration_since(t0),
                    *rate_est,
                );
                if outstanding > 0 && now.duration_since(last_progress) > limit {
                    return Err(Error::Stalled {
                        device: device.name().to_string(),
                        port: *port,
                        stalled_s: now.duration_since(last_progress).as_secs_f64(),
                        outstanding,
                        hint: stall_hint.clone(),
                    });
                }
            }

            // Warm-up and cool-down only keep the link loaded around the measured window:
            // there, completions are waited for adaptively whatever --poll says.
            let outside_window = target.is_none() && (t < ws || t >= we);
            if n == 0 && !posted && (k.poll == PollMode::Adaptive || outside_window) {
                // The rate of this size so far, else of the last one.
                let elapsed = last_progress.duration_since(t0).as_secs_f64();
                let rate = if size_bytes_done > 0 && elapsed > 0.0 {
                    Some(size_bytes_done as f64 / elapsed)
                } else {
                    *rate_est
                };
                let in_flight: u64 = st.iter().map(QpRun::outstanding).sum::<u64>() * size;
                let drain = rate
                    .filter(|r| *r > 0.0)
                    .map(|r| Duration::from_secs_f64(in_flight as f64 / r));
                if let Some(q) = backoff(now.duration_since(last_progress), drain, spare) {
                    std::thread::sleep(q);
                }
            }
        }

        let (measured_s, msgs) = match target {
            Some(n) => (t_end, n * nq as u64),
            None => (we - ws, window_msgs),
        };
        let bytes = msgs as f64 * size as f64;
        let avg = if measured_s > 0.0 {
            bytes * 8.0 / measured_s / 1e9
        } else {
            0.0
        };
        let (p1, p50, p99, peak) = sampler.summary(avg);
        let cpu_s = match (cpu0, cpu1) {
            (Some(a), Some(b)) => b.saturating_sub(a).as_secs_f64(),
            _ => 0.0,
        };
        Ok(SizeResult {
            msg_size_bytes: size,
            iterations: msgs,
            bw_peak_gbps: peak,
            bw_avg_gbps: avg,
            msg_rate_mpps: if measured_s > 0.0 {
                msgs as f64 / measured_s / 1e6
            } else {
                0.0
            },
            bw_p1_gbps: p1,
            bw_p50_gbps: p50,
            bw_p99_gbps: p99,
            interval_ms: interval.as_millis() as u64,
            measured_s,
            cpu_s,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(depth: u64, cq_mod: u64, post_list: u64) -> Knobs {
        Knobs {
            depth,
            cq_mod,
            post_list,
            poll: PollMode::Adaptive,
        }
    }

    #[test]
    fn backoff_spins_while_completions_come_often() {
        let ms = Duration::from_millis;
        // A NIC at line rate completes a batch every ~100 us: the CQ is never idle for 1 ms.
        assert_eq!(backoff(Duration::from_micros(900), Some(ms(1)), 0.22), None);
        // Idle long enough, but the writes in flight drain in 200 us: sleeping could starve
        // the queue, so spin.
        assert_eq!(backoff(ms(5), Some(Duration::from_micros(200)), 0.22), None);
        // A queue that empties at every signaled completion (-Q equal to -t) has no margin.
        assert_eq!(backoff(ms(5), Some(ms(500)), 0.0), None);
    }

    #[test]
    fn backoff_sleeps_in_steps_that_end_before_the_queue_runs_dry() {
        let ms = Duration::from_millis;
        // Soft-RoCE: a batch of 64 KiB writes every ~0.4 s, the queue lasts ~0.5 s.
        assert_eq!(
            backoff(ms(2), Some(ms(500)), 0.22),
            Some(Duration::from_micros(250))
        );
        assert_eq!(backoff(ms(100), Some(ms(500)), 0.22), Some(BACKOFF_MAX));
        // Never more than half the margin left after a completion.
        let q = backoff(ms(100), Some(ms(4)), 0.22).unwrap();
        assert!(q <= Duration::from_micros(440), "{q:?}");
        // Before the first completion the rate is unknown: grow with the idle time.
        assert_eq!(backoff(ms(4), None, 0.22), Some(Duration::from_micros(500)));
    }

    /// Simulates the post/complete protocol and checks it never deadlocks, never exceeds the
    /// depth, and that completions account for every write exactly once.
    fn simulate(kn: Knobs, target: u64) {
        let mut st = QpRun::default();
        let mut wrs = Vec::new();
        let mut inflight: std::collections::VecDeque<(u64, bool)> = Default::default();
        let mut accounted = 0;
        for _ in 0..1_000_000 {
            plan_posts(0, &mut st, kn, Some(target), false, &mut wrs);
            inflight.extend(wrs.iter().copied());
            assert!(st.outstanding() <= kn.depth);
            // Complete the oldest write; only signaled ones produce a completion.
            match inflight.pop_front() {
                Some((id, true)) => {
                    st.completed += id & 0xffff_ffff;
                    accounted += id & 0xffff_ffff;
                }
                Some((_, false)) => {}
                None => {}
            }
            if st.completed == target {
                break;
            }
        }
        assert_eq!(st.completed, target, "{kn:?} target {target}");
        assert_eq!(accounted, target);
        assert_eq!(st.unsignaled, 0);
    }

    #[test]
    fn post_plans_progress() {
        for (d, c, p) in [
            (128, 100, 1),
            (128, 100, 8),
            (128, 128, 100),
            (1, 1, 1),
            (16, 16, 16),
            (128, 1, 32),
            (10, 7, 4),
        ] {
            for target in [1, 5, 99, 100, 101, 1000] {
                simulate(k(d, c, p), target);
            }
        }
    }

    #[test]
    fn sampler_even_rate() {
        // 1 GB/s = 8 Gb/s, completions every 0.25 ms, 10 ms intervals over a 1 s window.
        let mut s = Sampler::new(Duration::from_millis(10), 0.5, Some(1.5), 1);
        let mut cum = 0u64;
        let mut t = 0.0;
        while t < 2.0 {
            t += 0.00025;
            cum += 250_000;
            s.event(0, t, cum);
        }
        s.close(t);
        let (p1, p50, p99, peak) = s.summary(0.0);
        for v in [p1, p50, p99, peak] {
            assert!((v - 8.0).abs() < 0.02, "{v}");
        }
        assert_eq!(s.samples, 100);
    }

    #[test]
    fn sampler_sparse_completions_are_smoothed() {
        // A completion only every 35 ms (coarse cq_mod) still gives steady 1 ms samples.
        let mut s = Sampler::new(Duration::from_millis(1), 0.0, None, 1);
        let mut cum = 0u64;
        let mut t = 0.0;
        for _ in 0..20 {
            t += 0.035;
            cum += 35_000_000; // 1 GB/s
            s.event(0, t, cum);
        }
        s.finish_qp(0);
        s.close(t);
        let (p1, _, p99, peak) = s.summary(0.0);
        assert!((p1 - 8.0).abs() < 0.05 && (p99 - 8.0).abs() < 0.05 && (peak - 8.0).abs() < 0.05);
        assert_eq!(s.samples, 700);
    }

    #[test]
    fn sampler_interleaved_qps_show_no_spikes() {
        // 4 QPs at 2 Gb/s each (8 Gb/s in all), each completing every 40 ms, staggered by
        // 10 ms: a single interpolated curve would swing; per-QP curves stay flat.
        let mut s = Sampler::new(Duration::from_millis(1), 0.0, None, 4);
        let per = 0.25e9 * 0.040; // bytes per completion per QP
        let mut events = Vec::new();
        for q in 0..4usize {
            for k in 1..=25u32 {
                events.push((
                    0.010 * q as f64 + 0.040 * f64::from(k),
                    q,
                    (per * f64::from(k)) as u64,
                ));
            }
        }
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        let t_end = events.last().map_or(0.0, |e| e.0);
        for (t, q, cum) in events {
            s.event(q, t, cum);
        }
        s.close(t_end);
        let (p1, p50, p99, peak) = s.summary(0.0);
        // Between 40 ms and 1.0 s all four run; the ramp at the start and the tail differ.
        assert!((p50 - 8.0).abs() < 0.05, "p50 {p50}");
        assert!(peak < 8.05, "peak {peak}");
        assert!(p99 < 8.05, "p99 {p99}");
        assert!(p1 > 1.9, "p1 {p1}");
    }

    #[test]
    fn sampler_spreads_a_backlog_over_the_gap_before_it() {
        // 8 Gb/s throughout, polled every 1 ms, except one poll that comes 150 ms late and
        // finds 150 completions: every 10 ms interval, the gap's included, reads 8 Gb/s.
        let mut s = Sampler::new(Duration::from_millis(10), 0.0, Some(1.0), 1);
        let per = 1_000_000u64; // bytes per 1 ms at 8 Gb/s
        let mut cum = 0u64;
        let mut ms = 0u64;
        while ms < 1100 {
            let step = if ms == 400 { 150 } else { 1 };
            ms += step;
            // One entry per completion, with the QP's running total, as the CQ hands them out.
            let base = cum;
            let batch = (1..=step).map(move |k| (0usize, base + per * k, false));
            cum += per * step;
            s.polled(ms as f64 / 1e3, batch);
        }
        s.close(1.1);
        let (p1, p50, p99, peak) = s.summary(0.0);
        for v in [p1, p50, p99, peak] {
            assert!(
                (v - 8.0).abs() < 0.02,
                "p1 {p1} p50 {p50} p99 {p99} peak {peak}"
            );
        }
    }

    #[test]
    fn sampler_short_run_falls_back() {
        let mut s = Sampler::new(Duration::from_millis(10), 0.0, None, 1);
        s.event(0, 0.001, 1000);
        s.event(0, 0.002, 2000);
        s.close(0.002);
        assert_eq!(s.summary(3.5), (3.5, 3.5, 3.5, 3.5));
    }

    #[test]
    fn sampler_waits_for_every_qp() {
        // QP 1 reports late: the interval stays open until it does, then is exact.
        let mut s = Sampler::new(Duration::from_millis(10), 0.0, None, 2);
        s.event(0, 0.010, 1_250_000); // 1 Gb/s
        s.event(0, 0.020, 2_500_000);
        assert_eq!(s.samples, 0);
        s.event(1, 0.020, 2_500_000);
        // [0, 10 ms] and [10, 20 ms], both 2 Gb/s.
        assert_eq!(s.samples, 2);
        s.close(0.020);
        let (_, p50, _, peak) = s.summary(0.0);
        assert!(
            (p50 - 2.0).abs() < 0.01 && (peak - 2.0).abs() < 0.01,
            "{p50} {peak}"
        );
    }

    #[test]
    fn sampler_sees_a_dip() {
        // 10 Gb/s with a 50 ms stall in the middle of a 1 s window.
        let mut s = Sampler::new(Duration::from_millis(10), 0.0, Some(1.0), 1);
        let mut cum = 0u64;
        let mut t = 0.0;
        while t < 1.2 {
            t += 0.0001;
            if !(0.5..0.55).contains(&t) {
                cum += 125_000; // 1.25 GB/s per 0.1 ms -> 10 Gb/s
            }
            s.event(0, t, cum);
        }
        s.close(t);
        let (p1, p50, _, peak) = s.summary(0.0);
        assert!(p1 < 1.0, "p1 {p1}");
        assert!((p50 - 10.0).abs() < 0.05, "p50 {p50}");
        assert!(peak < 10.5, "peak {peak}");
    }

    #[test]
    fn stall_limit_scales_with_batch_and_rate() {
        let ten = Duration::from_secs(10);
        // 100 x 1 MiB per completion at the lab's 0.09 Gb/s (~11 MB/s): about 37 s.
        let batch = 100 * (1 << 20);
        let l = stall_limit_for(ten, batch, 0, Duration::ZERO, Some(11.25e6));
        assert!((l.as_secs_f64() - 37.3).abs() < 0.5, "{l:?}");
        // Fast link, small batch: the base.
        assert_eq!(
            stall_limit_for(ten, 6_553_600, 1 << 30, Duration::from_secs(1), None),
            ten
        );
        // Unknown rate: 1 MB/s.
        let l = stall_limit_for(ten, 6_553_600, 0, Duration::ZERO, None);
        assert!((l.as_secs_f64() - 26.2).abs() < 0.1, "{l:?}");
        // The regression found in the lab: the rate comes from the time up to the last
        // completion (2 s here), whatever time it is now, so the limit stays put.
        let a = stall_limit_for(ten, 6_553_600, 13_107_200, Duration::from_secs(2), None);
        assert_eq!(a, ten);
    }
}
