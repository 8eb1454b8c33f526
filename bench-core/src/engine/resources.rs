//! One side's verbs resources: [`Prepared`] (QPs in INIT, ready to exchange [`Endpoints`]) and
//! [`Connected`] (every QP in RTS, ready to run the writes).

use std::time::Duration;

use super::plan::knobs;
use super::validate::{Layout, Mismatch};
use super::Endpoints;
use crate::error::{Error, GidUnusable};
use crate::gpu::MemoryUse;
use crate::rails::Rail;
use crate::verbs::buffer::PAGE;
use crate::verbs::{Buffer, Cq, Device, Init, MrInfo, PathMtu, PathParams, Pd, Qp, QpConfig, Rts};
use wire::gpu::MemoryRequest;
use wire::params::{LocalTuning, PollMode, TestLength, TestParams};

/// Whether this side's poller gives way to the kernel: spin-polling on Soft-RoCE, where the
/// device's work (requester, responder, completer) runs in kernel threads on the same CPUs as
/// the poller. At equal priority the poller, which only waits, holds a CPU those threads need.
/// In the lab the bandwidth at idle priority was ahead of normal priority in 7 of 10 batches
/// of rounds against ib_write_bw (both within a few percent of it), and the client's CPU time
/// 20-35% lower. A NIC needs no CPU to move data, so on one nothing changes.
pub(super) fn polls_at_idle_priority(device: &Device, poll: PollMode) -> bool {
    poll == PollMode::Spin && device.is_rxe()
}

/// `n` rounded up to whole pages; `u64::MAX` where that does not fit (so that a limit compared
/// with it refuses it).
fn round_up_page(n: u64) -> u64 {
    n.checked_next_multiple_of(PAGE as u64).unwrap_or(u64::MAX)
}

/// The bytes of memory one side of a test registers: two halves (what its writes land in, and
/// what it sends from), each the largest message page-rounded, or with --data_validation a
/// slot per QP holding every size. Saturates at `u64::MAX`: sizes a peer sends cannot wrap it
/// below `--max-buffer`.
pub fn buffer_bytes(params: &TestParams) -> u64 {
    half_bytes(params).saturating_mul(2)
}

fn half_bytes(params: &TestParams) -> u64 {
    if params.data_validation {
        Layout::new(&params.sizes.list(), params.qps).half_bytes()
    } else {
        round_up_page(params.sizes.max())
    }
}

/// The environment variable that makes a test corrupt its own pattern: byte N of what this side
/// sends under `--data_validation` is flipped before the first write, so that the lab can show
/// the peer's check failing end to end. For tests only; nothing else reads it.
pub const CORRUPT_FOR_TESTS_ENV: &str = "RDMABW_TEST_CORRUPT_SENT_BYTE";

fn corrupt_for_tests(sent: &mut [u8]) {
    let at = std::env::var(CORRUPT_FOR_TESTS_ENV)
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    if let Some(b) = at.and_then(|i| sent.get_mut(i)) {
        *b ^= 0xff;
    }
}

/// One side's resources with QPs in INIT, ready to exchange [`Endpoints`].
#[derive(Debug)]
pub struct Prepared {
    // Drop order: QPs, then CQ, buffer, PD, device.
    qps: Vec<Qp<Init>>,
    cq: Cq,
    buffer: Buffer,
    pd: Pd,
    device: Device,
    port: u8,
    gid_index: u32,
    active_mtu: PathMtu,
    max_msg: u64,
    landing: u64,
    inline_bytes: u32,
    memory: MemoryUse,
    layout: Option<Layout>,
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
        // --data_validation: a slot per QP in each half, each size at its own offset, and the
        // source half filled with the pattern before the buffer is registered.
        let layout = params
            .data_validation
            .then(|| Layout::new(&sizes, params.qps));
        // The same half that the daemon's --max-buffer and rdmabw's memlock check count.
        let half = half_bytes(params);
        let init = match &layout {
            Some(l) => {
                let mut v = vec![0u8; usize::try_from(half).unwrap_or(usize::MAX)];
                l.fill(&mut v);
                corrupt_for_tests(&mut v);
                v
            }
            None => Vec::new(),
        };
        let (buffer, memory) = match &tuning.memory {
            MemoryRequest::Host => (
                pd.alloc_host_buffer_init(half.saturating_mul(2), &init)?,
                MemoryUse::host(),
            ),
            // CUDA memory on the GPU asked for (or nearest this NIC), registered by dma-buf or
            // nvidia_peermem: see `crate::gpu`.
            MemoryRequest::Cuda { gpu, path } => {
                crate::gpu::alloc_buffer(&pd, half.saturating_mul(2), gpu, *path, &init)?
            }
        };
        drop(init);

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
        let entries = u32::try_from(entries).unwrap_or(u32::MAX);
        // Event mode sleeps on a completion channel of this CQ's own.
        let cq = if tuning.poll == PollMode::Event {
            pd.create_cq_with_events(entries)?
        } else {
            pd.create_cq(entries)?
        };

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
            gid_index,
            active_mtu,
            max_msg,
            landing: half,
            inline_bytes: tuning.inline_bytes,
            memory,
            layout,
        })
    }

    /// [`Prepared::new`] on a rail chosen by [`crate::rails::resolve_rail`].
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

    /// What the peer needs from this side (the interface is not known here: `netdev` is
    /// `None`).
    pub fn info(&self) -> Result<Endpoints, Error> {
        Ok(Endpoints {
            device: self.device.name().to_string(),
            port: self.port,
            qps: self.qps.iter().map(Qp::endpoint).collect(),
            mr: self.buffer.mr_info(self.landing, self.landing)?,
            mtu_bytes: self.active_mtu.bytes(),
            max_msg_bytes: self.max_msg,
            gid_index: Some(self.gid_index),
            netdev: None,
        })
    }

    /// Connects every QP to the peer's QP of the same position.
    pub fn connect(self, remote: &Endpoints, path: &PathParams) -> Result<Connected, Error> {
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
        if let Some(l) = &self.layout {
            if remote.mr.len < l.half_bytes() {
                return Err(Error::PeerMismatch(format!(
                    "the peer's region on {} holds {} bytes, data validation here writes {} \
                     (a slot per QP and size)",
                    remote.device,
                    remote.mr.len,
                    l.half_bytes()
                )));
            }
        }
        let Prepared {
            qps,
            cq,
            buffer,
            pd,
            device,
            port,
            inline_bytes,
            landing,
            layout,
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
            landing,
            layout,
        })
    }
}

/// One side with every QP in RTS.
#[derive(Debug)]
pub struct Connected {
    // Drop order: QPs, then CQ, buffer, PD, device.
    pub(super) qps: Vec<Qp<Rts>>,
    pub(super) cq: Cq,
    pub(super) buffer: Buffer,
    _pd: Pd,
    pub(super) device: Device,
    pub(super) port: u8,
    pub(super) remote_mr: MrInfo,
    pub(super) inline_src: Vec<u8>,
    pub(super) stall_limit: Duration,
    pub(super) stall_hint: String,
    /// Bytes per second seen so far on this connection (the last finished size), for the
    /// stall guard.
    pub(super) rate_est: Option<f64>,
    pub(super) poisoned: bool,
    /// Where the peer's writes land in `buffer` (the second half).
    pub(super) landing: u64,
    /// `--data_validation`: where each QP's writes of each size go.
    pub(super) layout: Option<Layout>,
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

    /// `--data_validation`: checks every byte the peer wrote in this side's landing half (each
    /// QP's writes of each size), once the peer's writes have completed (its `Done` came):
    /// `Ok(None)` when all are the peer's pattern, else the first that is not. GPU memory is
    /// copied to the host first. `Ok(None)` too when validation is off.
    pub fn check_landing(&self) -> Result<Option<Mismatch>, Error> {
        let Some(layout) = &self.layout else {
            return Ok(None);
        };
        let mut copy = vec![0u8; usize::try_from(layout.half_bytes()).unwrap_or(usize::MAX)];
        if self.buffer.is_host() {
            if !self.buffer.read_host(self.landing, &mut copy) {
                return Err(Error::InvalidParams(format!(
                    "the landing region ({} bytes at {}) is outside the buffer on {}",
                    copy.len(),
                    self.landing,
                    self.device.name()
                )));
            }
        } else {
            crate::gpu::read_buffer(&self.buffer, self.landing, &mut copy).map_err(|e| {
                Error::InvalidParams(format!(
                    "copying the GPU landing region to the host for --data_validation: {e}"
                ))
            })?;
        }
        Ok(layout.check(&copy))
    }

    /// Whether the thread that runs the writes polls at idle CPU priority (spin-polling on
    /// Soft-RoCE, where kernel threads on the same CPUs move the data).
    pub fn polls_at_idle_priority(&self, tuning: &LocalTuning) -> bool {
        polls_at_idle_priority(&self.device, tuning.poll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::params::{Connection, Sizes};

    fn one(msg_size_bytes: u64, data_validation: bool) -> TestParams {
        TestParams {
            sizes: Sizes::One { msg_size_bytes },
            length: TestLength::Iterations { iterations: 1 },
            qps: 4,
            connection: Connection::RC,
            bidirectional: false,
            run_infinitely: false,
            data_validation,
            latency: false,
        }
    }

    #[test]
    fn buffer_bytes_saturate_instead_of_wrapping_below_a_limit() {
        assert_eq!(buffer_bytes(&one(65536, false)), 2 * 65536);
        assert_eq!(buffer_bytes(&one(1, false)), 2 * PAGE as u64);
        // Before: 2 * (2^63 + 4096) wrapped to 8192, which passed any --max-buffer.
        for size in [(1u64 << 63) + 1, u64::MAX, u64::MAX - 1] {
            assert_eq!(buffer_bytes(&one(size, false)), u64::MAX, "{size}");
            assert_eq!(buffer_bytes(&one(size, true)), u64::MAX, "{size}");
        }
        let sweep = TestParams {
            sizes: Sizes::Sweep {
                max_bytes: u64::MAX,
            },
            ..one(1, true)
        };
        assert_eq!(buffer_bytes(&sweep), u64::MAX);
    }
}
