//! The measured loop of one message size on a [`Connected`] side: post, poll, sample, and
//! the checks for a stop, a stall and a failed completion.

use std::time::{Duration, Instant};

use super::event::{wait_timeout, EventWait, Idle};
use super::plan::{backoff, knobs, plan_posts, stall_limit_for, Knobs, QpRun};
use super::resources::{polls_at_idle_priority, Connected};
use super::sampler::Sampler;
use super::{StopFlags, DURATION_INTERVAL, ITERATION_INTERVAL, STOP_CHECK};
use crate::error::Error;
use crate::verbs::{Completion, Cq, Device, Qp, Rts, WriteSpec};
use results::rdmabw::params::{
    cpu_s_per_gb, CpuChoice, LocalTuning, PollMode, SizeResult, TestLength, TestParams,
};

/// Empty polls between two clock reads while nothing completes. Spinning on an empty CQ needs
/// the time only to see the window close or a stop come, which 64 polls (microseconds on a NIC)
/// delay by nothing that matters; ib_write_bw reads no clock in its loop at all.
const IDLE_POLLS_PER_CLOCK: u32 = 64;
/// Polls tried at most to bracket one poll's time closely (see the loop).
const BRACKET_TRIES: u32 = 8;

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

impl Connected {
    /// Runs every message size of `params`; see the module doc. After an error the QPs may
    /// hold unfinished writes or be in the error state: the object is then unusable.
    pub fn run_writes(
        &mut self,
        params: &TestParams,
        tuning: &LocalTuning,
        stop: StopFlags<'_>,
    ) -> Result<Vec<SizeResult>, Error> {
        // The polling thread goes where the side's tuning says (resolved by the session: a CPU
        // of the NIC's NUMA node by default). Best effort: a CPU that cannot be taken leaves the
        // thread where it is, and each row says where it ran.
        if let CpuChoice::Cpu(cpu) = tuning.cpu {
            let _ = crate::ffi::pin_current_thread(cpu);
        }
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

    /// One size: set up, then pass after pass of post, poll, account for the completions,
    /// change phase (warm-up, window, cool-down, drain; or the iterations done), check for a
    /// stop or a stall, and back off when idle; then the result.
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
        let link = Link {
            qps,
            cq,
            spec,
            device,
            port: *port,
            stall_limit: *stall_limit,
            stall_hint: stall_hint.as_str(),
            rate_est: *rate_est,
        };

        let mut run = SizeRun::set_up(link, k, size, Schedule::of(length), drain);
        loop {
            let posted = run.post()?;
            let Some(poll) = run.poll(posted)? else {
                continue;
            };
            if poll.n > 0 {
                run.complete(&poll)?;
            }
            if run.over_at(poll.t) {
                break;
            }
            run.check(poll.now, stop)?;
            if poll.n == 0 && !posted {
                run.idle(&poll)?;
            }
        }
        Ok(run.result())
    }
}

/// What one size runs on: the connection's resources and what its guards know, borrowed from
/// [`Connected`] for the run.
struct Link<'a> {
    qps: &'a mut [Qp<Rts>],
    cq: &'a Cq,
    spec: WriteSpec<'a>,
    device: &'a Device,
    port: u8,
    stall_limit: Duration,
    stall_hint: &'a str,
    /// Bytes per second of the last finished size, if any.
    rate_est: Option<f64>,
}

/// When a size measures and when it ends, in seconds from its first post.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    /// Iteration mode: the writes each QP posts; `None` in duration mode.
    target: Option<u64>,
    /// Start of the measured window (the end of the warm-up).
    ws: f64,
    /// End of the measured window.
    we: f64,
    /// End of the cool-down.
    wend: f64,
    /// Sampling interval.
    interval: Duration,
}

impl Schedule {
    /// Iteration mode measures from the first post to the last completion; duration mode
    /// runs warm-up, window and cool-down.
    fn of(length: &TestLength) -> Schedule {
        match *length {
            TestLength::Iterations { iterations } => Schedule {
                target: Some(iterations),
                ws: 0.0,
                we: f64::INFINITY,
                wend: f64::INFINITY,
                interval: ITERATION_INTERVAL,
            },
            TestLength::Duration {
                duration_s,
                warmup_s,
                cooldown_s,
            } => {
                let w = warmup_s.max(0.0);
                let c = cooldown_s.max(0.0);
                Schedule {
                    target: None,
                    ws: w,
                    we: w + duration_s,
                    wend: w + duration_s + c,
                    interval: DURATION_INTERVAL,
                }
            }
        }
    }
}

/// What one poll found, and when.
struct Poll {
    /// Completions taken.
    n: usize,
    /// The clock read after the poll.
    now: Instant,
    /// `now` in seconds from the first post.
    t: f64,
}

/// One message size's loop: the resources, the schedule, and what has happened so far.
struct SizeRun<'a> {
    link: Link<'a>,
    k: Knobs,
    size: u64,
    sched: Schedule,
    /// Whether the writes in flight are waited for after the cool-down (see `run_writes`).
    drain: bool,
    st: Vec<QpRun>,
    wrs: Vec<(u64, bool)>,
    wcs: Vec<Completion>,
    poll_max: usize,
    sampler: Sampler,
    /// The data one signaled completion stands for: cq_mod writes on every QP.
    batch_bytes: u64,
    size_bytes_done: u64,
    window_msgs: u64,
    draining: bool,
    cpu0: Option<Duration>,
    cpu1: Option<Duration>,
    t_end: f64,
    rr: usize,
    t0: Instant,
    last_progress: Instant,
    last_stop_check: Instant,
    last_clock: Instant,
    bracket: Duration,
    spare: f64,
    idle_polls: u32,
    /// Event mode: whether the CQ is armed.
    events: EventWait,
}

impl<'a> SizeRun<'a> {
    /// Set-up: the per-QP state, the buffers for posting and polling, the sampler; the clock
    /// starts here.
    fn set_up(link: Link<'a>, k: Knobs, size: u64, sched: Schedule, drain: bool) -> SizeRun<'a> {
        let nq = link.qps.len();
        // A poll takes everything the CQ holds (at most every write in flight), under one time.
        let poll_max = (k.depth as usize).saturating_mul(nq).max(1);
        let st = vec![QpRun::default(); nq];
        let wrs = Vec::with_capacity(k.post_list as usize);
        let wcs = Vec::with_capacity(poll_max);
        let sampler = Sampler::new(
            sched.interval,
            sched.ws,
            sched.target.map_or(Some(sched.we), |_| None),
            nq,
        );
        let t0 = Instant::now();
        let cpu0 = (sched.target.is_some() || sched.ws <= 0.0).then(crate::ffi::process_cpu_time);
        SizeRun {
            link,
            k,
            size,
            sched,
            drain,
            st,
            wrs,
            wcs,
            poll_max,
            sampler,
            // The stall guard must outlast the wait for one signaled completion: up to cq_mod
            // writes on every QP at the rate seen so far (this size, else the last one, else a
            // pessimistic 1 MB/s). On a slow link with big messages that is many seconds: 100
            // writes of 1 MiB at 0.09 Gb/s (the lab's emulated rxe) take 9 s.
            batch_bytes: k.cq_mod * size * nq as u64,
            size_bytes_done: 0,
            window_msgs: 0,
            draining: false,
            cpu0,
            cpu1: None,
            t_end: 0.0,
            rr: 0,
            t0,
            last_progress: t0,
            last_stop_check: t0,
            last_clock: t0,
            bracket: sched.interval / 10,
            spare: (k.depth - k.cq_mod) as f64 / k.depth as f64,
            idle_polls: 0,
            events: EventWait::default(),
        }
    }

    /// Posts on every QP, round-robin starting one QP further each pass; while draining, only
    /// one signaled write on each QP whose last write was unsignaled. Whether anything went out.
    fn post(&mut self) -> Result<bool, Error> {
        let nq = self.link.qps.len();
        let mut posted = false;
        for off in 0..nq {
            let qi = (self.rr + off) % nq;
            let s = &mut self.st[qi];
            if self.draining {
                if s.unsignaled == 0 {
                    continue;
                }
                let one = Knobs {
                    post_list: 1,
                    ..self.k
                };
                plan_posts(qi, s, one, Some(s.posted + 1), true, &mut self.wrs);
            } else {
                plan_posts(qi, s, self.k, self.sched.target, false, &mut self.wrs);
            }
            if !self.wrs.is_empty() {
                self.link.qps[qi].post_writes(&self.link.spec, self.wrs.iter().copied())?;
                posted = true;
            }
        }
        self.rr = (self.rr + 1) % nq.max(1);
        Ok(posted)
    }

    /// Polls the CQ. A pass that neither posted nor completed anything changes nothing that
    /// needs the time: `None` (go on posting) on all but every IDLE_POLLS_PER_CLOCK-th such
    /// pass; in event mode every such pass goes on to `idle`, to arm the CQ or sleep.
    fn poll(&mut self, posted: bool) -> Result<Option<Poll>, Error> {
        let mut n = self.link.cq.poll(&mut self.wcs, self.poll_max)?;
        if n == 0 && !posted && self.k.poll != PollMode::Event {
            self.idle_polls += 1;
            if self.idle_polls < IDLE_POLLS_PER_CLOCK {
                return Ok(None);
            }
        }
        self.idle_polls = 0;
        let mut now = Instant::now();
        // The completions are stamped with the time read after the poll. When the poller
        // was off its CPU since the clock was last read (the idle-priority poller on
        // Soft-RoCE, for up to 250 ms), the poll may have happened long before that time,
        // and whatever completed in between would be credited to the next interval as a
        // burst. So poll again until one poll is bracketed by two clock reads less than a
        // tenth of an interval apart: its time, and so every completion's, is then known
        // to that precision.
        let mut tries = 0;
        let mut before = self.last_clock;
        while n > 0 && now.duration_since(before) > self.bracket && tries < BRACKET_TRIES {
            before = now;
            n += self.link.cq.poll_more(&mut self.wcs, self.poll_max)?;
            now = Instant::now();
            tries += 1;
        }
        self.last_clock = now;
        let t = now.duration_since(self.t0).as_secs_f64();
        Ok(Some(Poll { n, now, t }))
    }

    /// Accounts for what a poll found: a failed completion ends the run; the others advance
    /// their QPs, the sampler, and the window's count.
    fn complete(&mut self, poll: &Poll) -> Result<(), Error> {
        let size = self.size;
        let target = self.sched.target;
        if let Some(bad) = self
            .wcs
            .iter()
            .find(|c| !c.is_success() && c.status != 5)
            .or_else(|| self.wcs.iter().find(|c| !c.is_success()))
        {
            let qi = (bad.wr_id >> 32) as usize;
            return Err(Error::WorkCompletion {
                device: self.link.device.name().to_string(),
                port: self.link.port,
                qpn: self.link.qps.get(qi).map_or(0, Qp::qpn),
                status: bad.status,
                status_str: crate::verbs::wc_status_str(bad.status),
                vendor_err: bad.vendor_err,
                hint: crate::verbs::wc_status_hint(bad.status),
            });
        }
        let mut msgs = 0u64;
        for c in &self.wcs {
            let qi = (c.wr_id >> 32) as usize;
            let covered = c.wr_id & 0xffff_ffff;
            if let Some(s) = self.st.get_mut(qi) {
                s.completed += covered;
            }
            msgs += covered;
        }
        let st = &self.st;
        self.sampler.polled(
            poll.t,
            self.wcs.iter().filter_map(|c| {
                let qi = (c.wr_id >> 32) as usize;
                let s = st.get(qi)?;
                Some((
                    qi,
                    s.completed * size,
                    target.is_some_and(|n| s.completed >= n),
                ))
            }),
        );
        if poll.t >= self.sched.ws && poll.t < self.sched.we {
            self.window_msgs += msgs;
        }
        self.size_bytes_done += msgs * size;
        self.last_progress = poll.now;
        Ok(())
    }

    /// The phase changes at `t`: warm-up to window and window to cool-down (CPU time is taken
    /// at both), cool-down to drain; whether the run is over (the cool-down has ended and
    /// there is nothing to drain, or the drain or the iterations are done).
    fn over_at(&mut self, t: f64) -> bool {
        let sched = self.sched;
        if let Some(n) = sched.target {
            if self.st.iter().all(|s| s.completed >= n) {
                self.cpu1 = Some(crate::ffi::process_cpu_time());
                self.t_end = t;
                self.sampler.close(t);
                return true;
            }
            return false;
        }
        if self.cpu0.is_none() && t >= sched.ws {
            self.cpu0 = Some(crate::ffi::process_cpu_time());
        }
        if self.cpu1.is_none() && t >= sched.we {
            self.cpu1 = Some(crate::ffi::process_cpu_time());
        }
        if t >= sched.wend {
            if !self.drain {
                self.sampler.close(t);
                return true;
            }
            self.draining = true;
        }
        if self.draining
            && self
                .st
                .iter()
                .all(|s| s.outstanding() == 0 && s.unsignaled == 0)
        {
            self.sampler.close(t);
            return true;
        }
        false
    }

    /// Every [`STOP_CHECK`]: a raised stop flag ends the run, and so does a stall (writes
    /// outstanding and no completion for longer than [`stall_limit_for`] allows).
    fn check(&mut self, now: Instant, stop: StopFlags<'_>) -> Result<(), Error> {
        if now.duration_since(self.last_stop_check) < STOP_CHECK {
            return Ok(());
        }
        self.last_stop_check = now;
        if stop.raised() {
            return Err(Error::Stopped {
                device: self.link.device.name().to_string(),
                port: self.link.port,
                completed_sizes: 0,
            });
        }
        let outstanding: u64 = self.st.iter().map(QpRun::outstanding).sum();
        let limit = stall_limit_for(
            self.link.stall_limit,
            self.batch_bytes,
            self.size_bytes_done,
            self.last_progress.duration_since(self.t0),
            self.link.rate_est,
        );
        if outstanding > 0 && now.duration_since(self.last_progress) > limit {
            return Err(Error::Stalled {
                device: self.link.device.name().to_string(),
                port: self.link.port,
                stalled_s: now.duration_since(self.last_progress).as_secs_f64(),
                outstanding,
                hint: self.link.stall_hint.to_string(),
            });
        }
        Ok(())
    }

    /// After a pass that posted and completed nothing: in event mode, arm the CQ or sleep on
    /// its channel until the next completion (see `event`), in every phase; an adaptive poller
    /// may sleep (see [`backoff`]). Warm-up and cool-down only keep the link loaded around the
    /// measured window: there, a spinning poller waits adaptively too.
    fn idle(&mut self, poll: &Poll) -> Result<(), Error> {
        if self.k.poll == PollMode::Event {
            let s = self.sched;
            let timeout = wait_timeout(poll.t, &[s.ws, s.we, s.wend]);
            if let Idle::Slept(_) = self.events.idle(self.link.cq, timeout)? {
                // The thread chose to sleep: the poll that follows happens right after this
                // clock read, so it needs no bracketing (see `poll`).
                self.last_clock = Instant::now();
            }
            return Ok(());
        }
        let outside_window =
            self.sched.target.is_none() && (poll.t < self.sched.ws || poll.t >= self.sched.we);
        if !(self.k.poll == PollMode::Adaptive || outside_window) {
            return Ok(());
        }
        // The rate of this size so far, else of the last one.
        let elapsed = self.last_progress.duration_since(self.t0).as_secs_f64();
        let rate = if self.size_bytes_done > 0 && elapsed > 0.0 {
            Some(self.size_bytes_done as f64 / elapsed)
        } else {
            self.link.rate_est
        };
        let in_flight: u64 = self.st.iter().map(QpRun::outstanding).sum::<u64>() * self.size;
        let drain = rate
            .filter(|r| *r > 0.0)
            .map(|r| Duration::from_secs_f64(in_flight as f64 / r));
        if let Some(q) = backoff(
            poll.now.duration_since(self.last_progress),
            drain,
            self.spare,
        ) {
            std::thread::sleep(q);
        }
        Ok(())
    }

    /// The result: the window's writes (duration mode) or all of them (iteration mode) over
    /// the measured time, the sampler's percentiles and the CPU time in between.
    fn result(self) -> SizeResult {
        let size = self.size;
        let (measured_s, msgs) = match self.sched.target {
            Some(n) => (self.t_end, n * self.st.len() as u64),
            None => (self.sched.we - self.sched.ws, self.window_msgs),
        };
        let bytes = msgs as f64 * size as f64;
        let avg = if measured_s > 0.0 {
            bytes * 8.0 / measured_s / 1e9
        } else {
            0.0
        };
        let (p1, p50, p99, peak) = self.sampler.summary(avg);
        let cpu_s = match (self.cpu0, self.cpu1) {
            (Some(a), Some(b)) => b.saturating_sub(a).as_secs_f64(),
            _ => 0.0,
        };
        SizeResult {
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
            interval_ms: self.sched.interval.as_millis() as u64,
            measured_s,
            cpu_s,
            cpu_s_per_gb: cpu_s_per_gb(cpu_s, bytes),
            polling_cpu: crate::ffi::current_cpu(),
        }
    }
}
