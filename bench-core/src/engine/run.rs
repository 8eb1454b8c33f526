//! The measured loop of one message size on a [`Connected`] side: post, poll, sample, and
//! the checks for a stop, a stall and a failed completion.

use std::time::{Duration, Instant};

use super::event::{wait_timeout, EventWait, Idle};
use super::limit::TokenBucket;
use super::plan::{backoff, knobs, plan_posts, stall_limit_for, Knobs, QpRun};
use super::resources::{polls_at_idle_priority, Connected};
use super::sampler::Sampler;
use super::{StopFlags, DURATION_INTERVAL, ITERATION_INTERVAL, STOP_CHECK};
use crate::error::Error;
use crate::verbs::{Completion, Cq, Device, Qp, Rts, WriteSpec};
use wire::params::{
    cpu_s_per_gb, CpuChoice, LocalTuning, PollMode, RateLimit, SizeResult, TestLength, TestParams,
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
            // --data_validation: the peer checks what landed once this side's writes are in.
            let drain = i + 1 < n || params.data_validation;
            match self.run_size_inner(size, &params.length, tuning, stop, drain, None) {
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

    /// `--run_infinitely`: runs the one message size of a duration test with its warm-up, then
    /// measured window after measured window (each `duration_s` long, back to back: the writes
    /// never pause) until a stop flag is raised, handing each window's result to `on_window`
    /// as it closes. It only ends on an error: [`Error::Stopped`] for a stop. The memory it
    /// uses does not grow with the windows.
    pub fn run_intervals(
        &mut self,
        params: &TestParams,
        tuning: &LocalTuning,
        stop: StopFlags<'_>,
        on_window: &mut dyn FnMut(SizeResult),
    ) -> Error {
        let sizes = params.sizes.list();
        let (&[size], TestLength::Duration { .. }) = (sizes.as_slice(), &params.length) else {
            return Error::InvalidParams(
                "--run_infinitely runs one size (-s) for a duration (-D or --window)".into(),
            );
        };
        if let CpuChoice::Cpu(cpu) = tuning.cpu {
            let _ = crate::ffi::pin_current_thread(cpu);
        }
        match self.run_size_inner(size, &params.length, tuning, stop, false, Some(on_window)) {
            Err(e) => e,
            Ok(_) => Error::InvalidParams("an endless run ended without a stop".into()),
        }
    }

    /// Runs one message size, and waits for every write it posted before returning.
    pub fn run_size(
        &mut self,
        size: u64,
        length: &TestLength,
        tuning: &LocalTuning,
        stop: StopFlags<'_>,
    ) -> Result<SizeResult, Error> {
        self.run_size_inner(size, length, tuning, stop, true, None)
    }

    /// One size: set up, then pass after pass of post, poll, account for the completions,
    /// change phase (warm-up, window, cool-down, drain; or the iterations done), check for a
    /// stop or a stall, and back off when idle; then the result. With `drain` false, a
    /// duration run returns when its window (and cool-down) closes, leaving writes in flight:
    /// the QPs can then run nothing else. With `on_window` (`--run_infinitely`) the window
    /// repeats until a stop, each one handed over as it closes. Refused on QPs that an earlier
    /// run left unusable: one that failed, was stopped or left writes in flight.
    fn run_size_inner(
        &mut self,
        size: u64,
        length: &TestLength,
        tuning: &LocalTuning,
        stop: StopFlags<'_>,
        drain: bool,
        mut on_window: Option<&mut dyn FnMut(SizeResult)>,
    ) -> Result<SizeResult, Error> {
        if self.poisoned {
            return Err(Error::InvalidParams(
                "an earlier run on these QPs failed, was stopped or left writes in flight; set up a new connection".into(),
            ));
        }
        self.poisoned = true;
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
            layout,
            ..
        } = self;
        let inline = size32 as usize <= inline_src.len();
        // --data_validation: each QP writes its own pattern from its own slot to its slot in
        // the peer's buffer (inline writes carry the pattern in the work request).
        let patterns: Vec<Vec<u8>> = match layout {
            Some(_) if inline => (0..qps.len() as u32)
                .map(|q| {
                    let mut v = vec![0u8; size32 as usize];
                    super::validate::fill_pattern(q, size, &mut v);
                    v
                })
                .collect(),
            _ => Vec::new(),
        };
        let mut specs = Vec::with_capacity(qps.len());
        for qi in 0..qps.len() as u32 {
            let off = match layout {
                Some(l) => l.offset(qi, size).ok_or_else(|| {
                    Error::InvalidParams(format!("size {size} is not one of this test's sizes"))
                })?,
                None => 0,
            };
            specs.push(match patterns.get(qi as usize) {
                Some(p) => WriteSpec::inline(p, remote_mr, off)?,
                None if inline => WriteSpec::inline(&inline_src[..size32 as usize], remote_mr, 0)?,
                None => WriteSpec::from_buffer(buffer, off, size32, remote_mr, off)?,
            });
        }
        let limit = tuning.rate_limit;
        let link = Link {
            qps,
            cq,
            specs,
            device,
            port: *port,
            stall_limit: *stall_limit,
            stall_hint: stall_hint.as_str(),
            // Under a rate limit the writes go no faster than the limit: the stall guard's
            // first estimate (before this size completes anything) is that rate at most.
            rate_est: match limit {
                Some(l) => {
                    let cap = l.msgs_per_s(size) * size as f64;
                    Some(rate_est.map_or(cap, |r| r.min(cap)))
                }
                None => *rate_est,
            },
        };

        let sched = Schedule::of(length, on_window.is_some());
        let mut run = SizeRun::set_up(link, k, size, sched, drain, limit);
        loop {
            let posted = run.post()?;
            let Some(poll) = run.poll(posted)? else {
                continue;
            };
            if let Some(emit) = on_window.as_mut() {
                run.roll(poll.t, &mut **emit);
            }
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
        let res = run.result();
        // With `drain` false, a duration run returned when its window (and cool-down) closed,
        // leaving writes in flight: they would complete during the next size and be counted
        // there, so the QPs can run nothing else.
        self.poisoned = !drain && matches!(length, TestLength::Duration { .. });
        if res.bw_avg_gbps > 0.0 {
            self.rate_est = Some(res.bw_avg_gbps * 1e9 / 8.0);
        }
        Ok(res)
    }
}

/// What one size runs on: the connection's resources and what its guards know, borrowed from
/// [`Connected`] for the run.
struct Link<'a> {
    qps: &'a mut [Qp<Rts>],
    cq: &'a Cq,
    /// What each QP writes (the same for every QP unless `--data_validation` gives each QP
    /// its own slot and pattern).
    specs: Vec<WriteSpec<'a>>,
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
    /// `--run_infinitely`: when the window closes, the next one opens (no cool-down, no end).
    repeat: bool,
    /// The first window's start.
    first_ws: f64,
    /// The window's length.
    length: f64,
}

impl Schedule {
    /// Iteration mode measures from the first post to the last completion; duration mode
    /// runs warm-up, window and cool-down, or with `repeat` warm-up and window after window.
    fn of(length: &TestLength, repeat: bool) -> Schedule {
        match *length {
            TestLength::Iterations { iterations } => Schedule {
                target: Some(iterations),
                ws: 0.0,
                we: f64::INFINITY,
                wend: f64::INFINITY,
                interval: ITERATION_INTERVAL,
                repeat: false,
                first_ws: 0.0,
                length: f64::INFINITY,
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
                    wend: if repeat {
                        f64::INFINITY
                    } else {
                        w + duration_s + c
                    },
                    interval: DURATION_INTERVAL,
                    repeat,
                    first_ws: w,
                    length: duration_s,
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
    /// The longest gap between two clock reads inside the window, in seconds.
    off_cpu_max_s: f64,
    bracket: Duration,
    spare: f64,
    idle_polls: u32,
    /// `--rate_limit`: the tokens writes are posted with.
    bucket: Option<TokenBucket>,
    /// `--run_infinitely`: windows closed so far.
    windows: u64,
    /// Event mode: whether the CQ is armed.
    events: EventWait,
}

impl<'a> SizeRun<'a> {
    /// Set-up: the per-QP state, the buffers for posting and polling, the sampler; the clock
    /// starts here.
    fn set_up(
        link: Link<'a>,
        k: Knobs,
        size: u64,
        sched: Schedule,
        drain: bool,
        limit: Option<RateLimit>,
    ) -> SizeRun<'a> {
        let nq = link.qps.len();
        // A poll takes everything the CQ holds (at most every write in flight), under one time.
        let poll_max = (k.depth as usize).saturating_mul(nq).max(1);
        let st = vec![QpRun::default(); nq];
        let wrs = Vec::with_capacity(k.post_list as usize);
        let wcs = Vec::with_capacity(poll_max);
        // An endless run's intervals go on past each window (see `roll`).
        let sampler = Sampler::new(
            sched.interval,
            sched.ws,
            (sched.target.is_none() && !sched.repeat).then_some(sched.we),
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
            off_cpu_max_s: 0.0,
            bracket: sched.interval / 10,
            spare: (k.depth - k.cq_mod) as f64 / k.depth as f64,
            idle_polls: 0,
            bucket: limit.map(|l| TokenBucket::new(l.msgs_per_s(size), l.burst_msgs, 0.0)),
            windows: 0,
            events: EventWait::default(),
        }
    }

    /// Posts on every QP, round-robin starting one QP further each pass; while draining, only
    /// one signaled write on each QP whose last write was unsignaled. Whether anything went out.
    fn post(&mut self) -> Result<bool, Error> {
        let nq = self.link.qps.len();
        let mut posted = false;
        // Under a rate limit, no more writes than the bucket holds now (the drain's few
        // signaled writes are not counted: they only close the QPs' last batches).
        let mut tokens = match &mut self.bucket {
            Some(b) if !self.draining => b.available(self.t0.elapsed().as_secs_f64()),
            _ => u64::MAX,
        };
        for off in 0..nq {
            let qi = (self.rr + off) % nq;
            let s = &mut self.st[qi];
            if tokens == 0 {
                break;
            }
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
                let k = Knobs {
                    post_list: self.k.post_list.min(tokens),
                    ..self.k
                };
                plan_posts(qi, s, k, self.sched.target, false, &mut self.wrs);
            }
            if !self.wrs.is_empty() {
                let spec = &self.link.specs[qi];
                self.link.qps[qi].post_writes(spec, self.wrs.iter().copied())?;
                posted = true;
                if let (Some(b), false) = (&mut self.bucket, self.draining) {
                    let n = self.wrs.len() as u64;
                    b.take(n);
                    tokens = tokens.saturating_sub(n);
                }
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
        self.note_gap(self.last_clock, now);
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

    /// Keeps the longest part of the window between two clock reads (`from`, `to`).
    fn note_gap(&mut self, from: Instant, to: Instant) {
        let a = from.saturating_duration_since(self.t0).as_secs_f64();
        let b = to.saturating_duration_since(self.t0).as_secs_f64();
        let inside = b.min(self.sched.we) - a.max(self.sched.ws);
        if inside > self.off_cpu_max_s {
            self.off_cpu_max_s = inside;
        }
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

    /// `--run_infinitely`: every window that has closed by `t` is handed to `emit` and the
    /// next one opens where it closed, with its own count, intervals and CPU time. Completions
    /// polled at `t` belong to the window open after this (call it before accounting for them).
    fn roll(&mut self, t: f64, emit: &mut dyn FnMut(SizeResult)) {
        while self.sched.repeat && t >= self.sched.we {
            let cpu = crate::ffi::process_cpu_time();
            if self.cpu0.is_none() {
                self.cpu0 = Some(cpu);
            }
            self.cpu1 = Some(cpu);
            let measured_s = self.sched.length;
            emit(self.row(measured_s, self.window_msgs));
            // From the first window's start, so that no rounding adds up over the windows.
            self.windows += 1;
            self.sched.ws = self.sched.we;
            self.sched.we = self.sched.first_ws + (self.windows + 1) as f64 * self.sched.length;
            self.window_msgs = 0;
            self.cpu0 = Some(cpu);
            self.cpu1 = None;
        }
    }

    /// The result: the window's writes (duration mode) or all of them (iteration mode) over
    /// the measured time, the sampler's percentiles and the CPU time in between.
    fn result(mut self) -> SizeResult {
        let (measured_s, msgs) = match self.sched.target {
            Some(n) => (self.t_end, n * self.st.len() as u64),
            None => (self.sched.we - self.sched.ws, self.window_msgs),
        };
        self.row(measured_s, msgs)
    }

    /// `msgs` writes over `measured_s` seconds, with the sampler's intervals so far (which
    /// it then forgets) and the CPU time between the window's two readings.
    fn row(&mut self, measured_s: f64, msgs: u64) -> SizeResult {
        let size = self.size;
        let bytes = msgs as f64 * size as f64;
        let avg = if measured_s > 0.0 {
            bytes * 8.0 / measured_s / 1e9
        } else {
            0.0
        };
        let (p1, p50, p99, peak) = self.sampler.take_summary(avg);
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
            off_cpu_max_s: Some(std::mem::take(&mut self.off_cpu_max_s)),
            latency: None,
        }
    }
}
