//! This side's tuning ([`LocalTuning`]): queues, completions, polling, the CPU, the rate
//! limiter, the buffer's memory. Not agreed with the peer.

use results::rdmabw::params::{CpuChoice, LocalTuning, PollMode, RateLimit, RateUnit, Sizes};

use crate::cli::{BwArgs, PollArg, RateLimitArgs, TestArgs};
use crate::exit::{usage, Usage};

/// Messages above this size get a completion each by default, as in ib_write_bw (its
/// `MSG_SIZE_CQ_MOD_LIMIT`).
const CQ_MOD_LIMIT_BYTES: u64 = 8192;

/// ib_write_lat's default inline size for RDMA WRITE.
pub const LAT_DEFAULT_INLINE: u32 = 220;

/// ib_write_bw's default CQ moderation: the post list's length with `-l`, else one completion
/// per write for one size above 8 KiB (few completions per second, and a window counted in
/// single writes rather than in blocks of 100: at 64 KiB and 0.25 Gb/s a block of 100 is 0.2 s
/// of traffic), else 100.
fn default_cq_mod(sizes: &Sizes, post_list: Option<u32>) -> u32 {
    match (post_list, sizes) {
        (Some(l), _) if l > 1 => l,
        (_, Sizes::One { msg_size_bytes }) if *msg_size_bytes > CQ_MOD_LIMIT_BYTES => 1,
        _ => 100,
    }
}

/// This side's tuning for a test of `sizes`; `lat`: a latency test (ib_write_lat's inline
/// default). The counts and ranges were checked by the flags' value parsers.
pub fn tuning(t: &TestArgs, bw: &BwArgs, sizes: &Sizes, lat: bool) -> Result<LocalTuning, Usage> {
    let d = LocalTuning::default();
    let (path, queue, tr) = (&t.transport.path, &t.transport.queue, &t.transport);
    let tx_depth = queue.tx_depth.unwrap_or(d.tx_depth);
    let poll = match (queue.use_event, tr.poll) {
        (true, _) | (_, PollArg::Event) => PollMode::Event,
        (false, PollArg::Adaptive) => PollMode::Adaptive,
        (false, PollArg::Spin) => PollMode::Spin,
    };
    // An event wakes the sender once per signaled completion: with ib_write_bw's default of
    // one per write above 8 KiB, every write would cost a wake-up. So in event mode each
    // completion stands for at least half the send queue (the other half keeps the link busy
    // while the sender wakes), unless -Q says otherwise.
    let default_mod = match poll {
        PollMode::Event => default_cq_mod(sizes, queue.post_list)
            .max(tx_depth / 2)
            .max(1),
        _ => default_cq_mod(sizes, queue.post_list),
    };
    let cpu = match (tr.cpu, tr.no_numa_bind) {
        (Some(n), _) => {
            let allowed = bench_core::ffi::allowed_cpus().unwrap_or_default();
            if !allowed.is_empty() && !allowed.contains(&n) {
                return usage(format!(
                    "--cpu {n}: this process may run on CPUs {} only (taskset, cgroup cpuset); \
                     pick one of those, or leave --cpu out for a CPU of the NIC's NUMA node",
                    allowed
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ));
            }
            CpuChoice::Cpu(n)
        }
        (None, true) => CpuChoice::Unbound,
        (None, false) => CpuChoice::Numa,
    };
    let default_inline = if lat {
        LAT_DEFAULT_INLINE
    } else {
        d.inline_bytes
    };
    Ok(LocalTuning {
        tx_depth,
        cq_mod: queue.cq_mod.unwrap_or(default_mod),
        post_list: queue.post_list.unwrap_or(d.post_list),
        inline_bytes: queue.inline_size.unwrap_or(default_inline),
        traffic_class: path.tclass.unwrap_or(d.traffic_class),
        service_level: path.sl.unwrap_or(d.service_level),
        hop_limit: tr.hop_limit.unwrap_or(d.hop_limit),
        mtu_bytes: path.mtu,
        ack_timeout: tr.qp_timeout.unwrap_or(d.ack_timeout),
        retry_count: tr.retry_count.unwrap_or(d.retry_count),
        memory: super::gpu::memory_request(&bw.gpu)?,
        poll,
        cpu,
        rate_limit: rate_limit(&bw.rate, tx_depth)?,
    })
}

/// `--rate_limit RATE` with `--rate_units`, `--burst_size` and `--rate_limit_type`, as
/// ib_write_bw takes them (Gb/s by default, bursts of the send queue depth); SW only.
fn rate_limit(a: &RateLimitArgs, tx_depth: u32) -> Result<Option<RateLimit>, Usage> {
    if let Some(t) = &a.rate_limit_type {
        match t.to_ascii_uppercase().as_str() {
            "SW" => {}
            "HW" | "PP" => {
                return usage(format!(
                    "--rate_limit_type {t}: not supported by rdmabw: the NIC's rate limiter (HW) \
                     and packet pacing (PP) are set through vendor verbs rdmabw does not use; its \
                     limiter is in software: --rate_limit_type SW (or leave it out)"
                ))
            }
            _ => {
                return usage(format!(
                    "--rate_limit_type {t}: give SW (rdmabw's software limiter; HW and PP are not \
                     supported)"
                ))
            }
        }
    }
    let Some(rate) = a.rate_limit else {
        for (set, flag) in [
            (a.rate_units.is_some(), "--rate_units"),
            (a.burst_size.is_some(), "--burst_size"),
            (a.rate_limit_type.is_some(), "--rate_limit_type"),
        ] {
            if set {
                return usage(format!(
                    "{flag} applies to the rate limiter: add --rate_limit RATE (e.g. \
                     --rate_limit 10 for 10 Gb/s)"
                ));
            }
        }
        return Ok(None);
    };
    if !(rate.is_finite() && rate > 0.0) {
        return usage(format!(
            "--rate_limit {rate}: give a positive rate in --rate_units (Gb/s by default), e.g. \
             --rate_limit 10"
        ));
    }
    let unit = match a.rate_units.as_deref() {
        None | Some("g") => RateUnit::Gbps,
        Some("M") => RateUnit::MibPerS,
        Some("p") => RateUnit::MsgsPerS,
        Some(u) => {
            return usage(format!(
                "--rate_units {u}: give g (Gb/s, the default), M (MiB/s) or p (writes per \
                 second), as ib_write_bw"
            ))
        }
    };
    let burst_msgs = match a.burst_size {
        None => tx_depth,
        Some(n) if n >= 1 => u32::try_from(n).unwrap_or(u32::MAX),
        Some(n) => {
            return usage(format!(
                "--burst_size {n}: give at least 1 write per burst (default the send queue depth \
                 -t, {tx_depth})"
            ))
        }
    };
    Ok(Some(RateLimit {
        rate,
        unit,
        burst_msgs,
    }))
}
