//! The measured loop of one message size on a [`Connected`] side: post, poll, sample, and
//! the checks for a stop, a stall and a failed completion.

use std::time::{Duration, Instant};

use super::plan::{backoff, knobs, plan_posts, stall_limit_for, Knobs, QpRun};
use super::resources::{polls_at_idle_priority, Connected};
use super::sampler::Sampler;
use super::{StopFlags, DURATION_INTERVAL, ITERATION_INTERVAL, STOP_CHECK};
use crate::error::Error;
use crate::params::{LocalTuning, PollMode, SizeResult, TestLength, TestParams};
use crate::verbs::{Completion, Qp, WriteSpec};

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
