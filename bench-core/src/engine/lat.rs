//! The latency ping-pong (`rdmabw lat`, as perftest's `ib_write_lat`) on a [`Connected`] side
//! of one QP.
//!
//! Per message size `s` and exchange `i` (1, 2, ...), the sequence byte is `i mod 256`: the
//! initiator (the client) stamps the time, writes `s` bytes whose last byte is that sequence
//! into the peer's landing half, then spins on the last byte of its own landing half until the
//! peer's write of the same sequence arrives there; the responder (the server) waits first,
//! then stamps and writes. The time between two posts of one side is a round trip; the report
//! (in `wire::lat`) halves it, as ib_write_lat does. Writes no larger than the
//! inline size go inline from a plain vector; larger ones from the registered source half,
//! whose last byte is stored before each post. Every write is signaled; completions are reaped
//! while waiting, so that an error status ends the run.
//!
//! Iteration mode runs `iterations` exchanges per size (`iterations - 1` samples; at most
//! `wire::lat::MAX_KEPT_SAMPLES` of them kept one by one, the rest in the
//! histogram: a side's memory is bounded whatever `-n` the peer asks). Duration
//! mode (one size) runs exchanges until the warm-up and the window have passed on the
//! initiator, keeping the samples that started inside the window; the responder answers until
//! the initiator's `Done` arrives (`peer_done`). Either side stops on its stop flags (checked
//! every few thousand polls) and when nothing arrives for the stall limit.

use std::time::Instant;

use super::resources::{polls_at_idle_priority, Connected};
use super::StopFlags;
use crate::error::Error;
use crate::verbs::{Completion, Qp, WriteSpec};
use wire::lat::RoundTrips;
use wire::params::{CpuChoice, LocalTuning, SizeResult, TestLength, TestParams};

/// Polls of the landing byte between two looks at the clock, the stop flags and the CQ.
const POLLS_PER_CHECK: u32 = 2048;

/// What one exchange loop of one size gives back.
struct SizeRun {
    exchanges: u64,
    /// The round trips, at most `MAX_KEPT_SAMPLES` of them kept one by one.
    rtt: RoundTrips,
    measured_s: f64,
}

impl Connected {
    /// Runs every message size of a latency test; `initiator` writes first (the client).
    /// `peer_done` says whether the peer has ended its test (its `Done` came): a responder of
    /// a duration test answers until then. After an error the QP may hold unfinished writes:
    /// the object is then unusable.
    pub fn run_pingpong(
        &mut self,
        params: &TestParams,
        tuning: &LocalTuning,
        stop: StopFlags<'_>,
        initiator: bool,
        peer_done: &dyn Fn() -> bool,
    ) -> Result<Vec<SizeResult>, Error> {
        if self.qps.len() != 1 {
            return Err(Error::InvalidParams(format!(
                "a latency test runs one QP, not {}",
                self.qps.len()
            )));
        }
        if !self.buffer.is_host() {
            return Err(Error::InvalidParams(
                "a latency test polls host memory for the peer's writes: GPU memory \
                 (--use_cuda) is not supported"
                    .into(),
            ));
        }
        if self.poisoned {
            return Err(Error::InvalidParams(
                "an earlier run on these QPs failed, was stopped or left writes in flight; set up a new connection".into(),
            ));
        }
        self.poisoned = true;
        if let CpuChoice::Cpu(cpu) = tuning.cpu {
            let _ = crate::ffi::pin_current_thread(cpu);
        }
        // On Soft-RoCE the kernel moves the writes on the CPUs this loop spins on: give way.
        if polls_at_idle_priority(&self.device, tuning.poll) {
            let _ = crate::ffi::set_thread_sched_idle();
        }
        let mut out = Vec::new();
        for (done, size) in params.sizes.list().into_iter().enumerate() {
            let run = match self.exchange_size(size, &params.length, stop, initiator, peer_done) {
                Ok(r) => r,
                Err(Error::Stopped { device, port, .. }) => {
                    return Err(Error::Stopped {
                        device,
                        port,
                        completed_sizes: done,
                    })
                }
                Err(e) => return Err(e),
            };
            out.push(SizeResult {
                msg_size_bytes: size,
                // Timed: the round trips inside the window, as ib_write_lat -D counts them.
                iterations: match params.length {
                    TestLength::Duration { .. } => run.rtt.len(),
                    TestLength::Iterations { .. } => run.exchanges,
                },
                bw_peak_gbps: 0.0,
                bw_avg_gbps: if run.measured_s > 0.0 {
                    run.exchanges as f64 * size as f64 * 8.0 / run.measured_s / 1e9
                } else {
                    0.0
                },
                msg_rate_mpps: if run.measured_s > 0.0 {
                    run.exchanges as f64 / run.measured_s / 1e6
                } else {
                    0.0
                },
                bw_p1_gbps: 0.0,
                bw_p50_gbps: 0.0,
                bw_p99_gbps: 0.0,
                interval_ms: 0,
                measured_s: run.measured_s,
                cpu_s: 0.0,
                cpu_s_per_gb: None,
                polling_cpu: crate::ffi::current_cpu(),
                off_cpu_max_s: None,
                latency: run.rtt.stats(),
            });
        }
        self.poisoned = false;
        Ok(out)
    }

    /// The exchanges of one size; every write completed when it returns.
    fn exchange_size(
        &mut self,
        size: u64,
        length: &TestLength,
        stop: StopFlags<'_>,
        initiator: bool,
        peer_done: &dyn Fn() -> bool,
    ) -> Result<SizeRun, Error> {
        let len = u32::try_from(size)
            .ok()
            .filter(|l| *l >= 1 && u64::from(*l) <= self.landing)
            .ok_or_else(|| {
                Error::InvalidParams(format!(
                    "a {size}-byte message does not fit the {}-byte landing half",
                    self.landing
                ))
            })?;
        let last = u64::from(len - 1);
        let (iterations, window) = match *length {
            TestLength::Iterations { iterations } => (Some(iterations), None),
            TestLength::Duration {
                duration_s,
                warmup_s,
                ..
            } => (None, Some((warmup_s, duration_s))),
        };
        let device = self.device.name().to_string();
        let port = self.port;
        let stall_limit = self.stall_limit;
        let stall_hint = self.stall_hint.clone();
        let inline = (len as usize) <= self.inline_src.len();
        let depth = u64::from(self.qps[0].max_send_wr().max(1));
        let mut wcs: Vec<Completion> = Vec::with_capacity(32);
        let mut posted = 0u64;
        let mut completed = 0u64;
        // Bounded whatever `-n` or `-D` says: samples beyond `MAX_KEPT_SAMPLES` go to the
        // histogram only.
        let mut rtt = RoundTrips::with_capacity(iterations.unwrap_or(1 << 16));
        let start = Instant::now();
        let (window_open, window_close) = match window {
            Some((w, d)) => (
                Some(start + std::time::Duration::from_secs_f64(w)),
                Some(start + std::time::Duration::from_secs_f64(w + d)),
            ),
            None => (None, None),
        };
        let mut prev_post: Option<Instant> = None;
        let mut first_post: Option<Instant> = None;
        let mut last_post = start;
        let mut exchanges = 0u64;

        // Reaps completions; an error status ends the run.
        let reap = |cq: &crate::verbs::Cq,
                    wcs: &mut Vec<Completion>,
                    completed: &mut u64,
                    qp: &Qp<crate::verbs::Rts>|
         -> Result<(), Error> {
            cq.poll(wcs, 32)?;
            for c in wcs.iter() {
                if !c.is_success() {
                    return Err(Error::WorkCompletion {
                        device: device.clone(),
                        port,
                        qpn: qp.qpn(),
                        status: c.status,
                        status_str: crate::verbs::wc_status_str(c.status),
                        vendor_err: c.vendor_err,
                        hint: crate::verbs::wc_status_hint(c.status),
                    });
                }
            }
            *completed += wcs.len() as u64;
            Ok(())
        };
        let stopped = || Error::Stopped {
            device: device.clone(),
            port,
            completed_sizes: 0,
        };
        // Nothing completed for `stalled_s` with `outstanding` writes posted.
        let stalled = |stalled_s: f64, outstanding: u64| Error::Stalled {
            device: device.clone(),
            port,
            stalled_s,
            outstanding,
            hint: stall_hint.clone(),
        };

        let mut i: u64 = 0;
        loop {
            i += 1;
            let seq = (i & 0xff) as u8;
            // Whether this exchange is the last: the initiator decides in duration mode.
            match (iterations, window_close) {
                (Some(n), _) if i > n => break,
                (None, Some(close)) if initiator && Instant::now() >= close => break,
                _ => {}
            }
            if !initiator {
                // Wait for the initiator's write of `seq` (or, timed, for its end).
                match self.wait_landed(last, seq, stop, &mut wcs, &mut completed, &reap, || {
                    window_close.is_some() && peer_done()
                })? {
                    Landed::Arrived => {}
                    Landed::PeerDone => break,
                    Landed::Stopped => return Err(stopped()),
                    Landed::Stalled(s) => return Err(stalled(s, posted - completed)),
                }
            }
            // Room in the send queue (every write is signaled).
            let wait_from = Instant::now();
            while posted - completed >= depth {
                reap(&self.cq, &mut wcs, &mut completed, &self.qps[0])?;
                if wait_from.elapsed() > stall_limit {
                    return Err(stalled(
                        wait_from.elapsed().as_secs_f64(),
                        posted - completed,
                    ));
                }
            }
            let now = Instant::now();
            if let Some(p) = prev_post {
                let counts = match (window_open, window_close) {
                    (Some(open), Some(close)) => p >= open && now <= close,
                    _ => true,
                };
                if counts {
                    rtt.record(u64::try_from(now.duration_since(p).as_nanos()).unwrap_or(u64::MAX));
                }
            }
            prev_post = Some(now);
            first_post.get_or_insert(now);
            last_post = now;
            if inline {
                self.inline_src[last as usize] = seq;
                let spec = WriteSpec::inline(&self.inline_src[..len as usize], &self.remote_mr, 0)?;
                self.qps[0].post_writes(&spec, [(i, true)])?;
            } else {
                if !self.buffer.store_sent(last, seq) {
                    return Err(Error::InvalidParams(format!(
                        "byte {last} of the source half is outside the buffer on {device}"
                    )));
                }
                let spec = WriteSpec::from_buffer(&self.buffer, 0, len, &self.remote_mr, 0)?;
                self.qps[0].post_writes(&spec, [(i, true)])?;
            }
            posted += 1;
            exchanges += 1;
            if initiator {
                match self
                    .wait_landed(last, seq, stop, &mut wcs, &mut completed, &reap, || false)?
                {
                    Landed::Arrived | Landed::PeerDone => {}
                    Landed::Stopped => return Err(stopped()),
                    Landed::Stalled(s) => return Err(stalled(s, posted - completed)),
                }
            }
        }
        // Every write of this size completes before the next size (or the end).
        let drain_from = Instant::now();
        while completed < posted {
            reap(&self.cq, &mut wcs, &mut completed, &self.qps[0])?;
            if stop.raised() {
                return Err(stopped());
            }
            if drain_from.elapsed() > stall_limit {
                return Err(stalled(
                    drain_from.elapsed().as_secs_f64(),
                    posted - completed,
                ));
            }
        }
        let measured_s = first_post.map_or(0.0, |f| last_post.duration_since(f).as_secs_f64());
        Ok(SizeRun {
            exchanges,
            rtt,
            measured_s,
        })
    }

    /// Spins until byte `offset` of the landing half reads `seq`, reaping completions, looking
    /// at the stop flags and `give_up` every [`POLLS_PER_CHECK`] polls.
    #[allow(clippy::too_many_arguments)]
    fn wait_landed<R>(
        &self,
        offset: u64,
        seq: u8,
        stop: StopFlags<'_>,
        wcs: &mut Vec<Completion>,
        completed: &mut u64,
        reap: &R,
        give_up: impl Fn() -> bool,
    ) -> Result<Landed, Error>
    where
        R: Fn(
            &crate::verbs::Cq,
            &mut Vec<Completion>,
            &mut u64,
            &Qp<crate::verbs::Rts>,
        ) -> Result<(), Error>,
    {
        let at = self.landing + offset;
        let since = Instant::now();
        let mut polls = 0u32;
        loop {
            match self.buffer.load_landed(at) {
                Some(v) if v == seq => return Ok(Landed::Arrived),
                Some(_) => {}
                None => {
                    return Err(Error::InvalidParams(format!(
                        "byte {at} of the landing half cannot be read on {}",
                        self.device.name()
                    )))
                }
            }
            polls += 1;
            if polls >= POLLS_PER_CHECK {
                polls = 0;
                reap(&self.cq, wcs, completed, &self.qps[0])?;
                if stop.raised() {
                    return Ok(Landed::Stopped);
                }
                if give_up() {
                    return Ok(Landed::PeerDone);
                }
                let waited = since.elapsed();
                if waited > self.stall_limit {
                    return Ok(Landed::Stalled(waited.as_secs_f64()));
                }
            }
            std::hint::spin_loop();
        }
    }
}

/// How a wait for the peer's write ended.
enum Landed {
    Arrived,
    PeerDone,
    Stopped,
    Stalled(f64),
}
