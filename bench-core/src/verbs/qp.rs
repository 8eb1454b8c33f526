//! RC queue pairs with a typestate for their bring-up: `Qp<Init>` -> `Qp<Rtr>` -> `Qp<Rts>`.
//!
//! Only a `Qp<Rts>` can post. A failed transition consumes the QP (it is destroyed) and
//! returns an error naming device, port, QP number, both states and the errno.

use std::io;
use std::marker::PhantomData;
use std::sync::Arc;

use sideway::ibverbs::address::{AddressHandleAttribute, Gid as SwGid};
use sideway::ibverbs::queue_pair::{
    CreateQueuePairErrorKind, ExtendedQueuePair, ModifyQueuePairErrorKind, PostSendError,
    PostSendGuard, QueuePair, QueuePairAttribute, QueuePairState, QueuePairType,
    SendOperationFlags, SetInlineData, WorkRequestFlags,
};
use sideway::ibverbs::AccessFlags;

use super::buffer::Buffer;
use super::cq::Cq;
use super::device::{DevMeta, Pd};
use super::{random_psn, MrInfo, PathParams, QpEndpoint};
use crate::error::Error;
use crate::ffi::{self, LocalSge};
use crate::gid::Gid;

mod sealed {
    pub trait Sealed {}
}

/// A QP bring-up state.
pub trait QpState: sealed::Sealed + std::fmt::Debug {
    /// The verbs name of the state.
    const NAME: &'static str;
}

/// INIT: created, port and access flags set; its endpoint can be sent to the peer.
#[derive(Debug)]
pub struct Init;
/// RTR: connected to the remote QP, can receive.
#[derive(Debug)]
pub struct Rtr;
/// RTS: can send.
#[derive(Debug)]
pub struct Rts;

impl sealed::Sealed for Init {}
impl sealed::Sealed for Rtr {}
impl sealed::Sealed for Rts {}
impl QpState for Init {
    const NAME: &'static str = "INIT";
}
impl QpState for Rtr {
    const NAME: &'static str = "RTR";
}
impl QpState for Rts {
    const NAME: &'static str = "RTS";
}

/// How to create a QP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpConfig {
    /// Local port.
    pub port: u8,
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Largest inline payload (0: none).
    pub max_inline_data: u32,
    /// Our GID (sent to the peer in the endpoint; the source GID index goes in
    /// [`PathParams`]).
    pub gid: Gid,
    /// Our port's LID (0 on RoCE).
    pub lid: u16,
}

/// An RC queue pair in state `S`.
#[derive(Debug)]
pub struct Qp<S: QpState> {
    qp: ExtendedQueuePair,
    meta: Arc<DevMeta>,
    port: u8,
    qpn: u32,
    psn: u32,
    gid: Gid,
    lid: u16,
    max_send_wr: u32,
    max_inline: u32,
    _cq: Cq,
    _state: PhantomData<S>,
}

fn modify_error_parts(e: ModifyQueuePairErrorKind) -> (io::Error, String) {
    match e {
        ModifyQueuePairErrorKind::Ibverbs(source) => (source, String::new()),
        ModifyQueuePairErrorKind::InvalidTransition { source, .. } => {
            (source, "the QP is not in the state this transition starts from".to_string())
        }
        ModifyQueuePairErrorKind::InvalidAttributeMask {
            source,
            invalid,
            needed,
            ..
        } => (source, format!("attribute mask: invalid {invalid:?}, missing {needed:?}")),
        ModifyQueuePairErrorKind::ResolveRouteTimedout { sgid_index, gid, source } => (
            source,
            format!("resolving the route from GID index {sgid_index} to {gid} timed out: is the peer's address reachable on this rail?"),
        ),
        ModifyQueuePairErrorKind::NetworkUnreachable { sgid_index, gid, source } => (
            source,
            format!("no route from GID index {sgid_index} to {gid}: the peer's address is not reachable on this rail's interface"),
        ),
        other => (io::Error::other(other.to_string()), String::new()),
    }
}

impl<S: QpState> Qp<S> {
    /// What the peer needs to connect to this QP.
    pub fn endpoint(&self) -> QpEndpoint {
        QpEndpoint {
            qpn: self.qpn,
            psn: self.psn,
            gid: self.gid.0,
            lid: self.lid,
        }
    }

    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// Local port.
    pub fn port(&self) -> u8 {
        self.port
    }

    /// Device name.
    pub fn device_name(&self) -> &str {
        &self.meta.name
    }

    /// Send queue depth it was created with.
    pub fn max_send_wr(&self) -> u32 {
        self.max_send_wr
    }

    /// Largest inline payload it was created with.
    pub fn max_inline_data(&self) -> u32 {
        self.max_inline
    }

    fn modify<T: QpState>(self, attr: &QueuePairAttribute, hint: &str) -> Result<Qp<T>, Error> {
        self.transition(attr, S::NAME, hint)
    }

    fn transition<T: QpState>(
        mut self,
        attr: &QueuePairAttribute,
        from: &'static str,
        hint: &str,
    ) -> Result<Qp<T>, Error> {
        match self.qp.modify(attr) {
            Ok(()) => Ok(Qp {
                qp: self.qp,
                meta: self.meta,
                port: self.port,
                qpn: self.qpn,
                psn: self.psn,
                gid: self.gid,
                lid: self.lid,
                max_send_wr: self.max_send_wr,
                max_inline: self.max_inline,
                _cq: self._cq,
                _state: PhantomData,
            }),
            Err(e) => {
                let (source, detail) = modify_error_parts(e.0);
                let hint = match (detail.is_empty(), hint.is_empty()) {
                    (true, _) => hint.to_string(),
                    (false, true) => detail,
                    (false, false) => format!("{detail}; {hint}"),
                };
                Err(Error::QpTransition {
                    device: self.meta.name.clone(),
                    port: self.port,
                    qpn: self.qpn,
                    from,
                    to: T::NAME,
                    source,
                    hint,
                })
            }
        }
    }
}

impl Qp<Init> {
    /// Creates an RC QP whose send and receive queues complete on `cq`, and moves it to INIT
    /// with remote-write access.
    pub fn create(pd: &Pd, cq: &Cq, cfg: &QpConfig) -> Result<Qp<Init>, Error> {
        if cfg.max_send_wr == 0 || cfg.max_send_wr > pd.caps.max_qp_wr {
            return Err(Error::InvalidParams(format!(
                "send queue depth {} is outside 1..={} (the device's max_qp_wr)",
                cfg.max_send_wr, pd.caps.max_qp_wr
            )));
        }
        let qp = pd
            .pd
            .create_qp_builder()
            .setup_qp_type(QueuePairType::ReliableConnection)
            .setup_max_send_wr(cfg.max_send_wr)
            .setup_max_recv_wr(1)
            .setup_max_send_sge(1)
            .setup_max_recv_sge(1)
            .setup_max_inline_data(cfg.max_inline_data)
            .setup_send_ops_flags(SendOperationFlags::Write)
            .setup_send_cq(cq.generic())
            .setup_recv_cq(cq.generic())
            .build_ex()
            .map_err(|e| Error::Create {
                device: pd.meta.name.clone(),
                what: format!(
                    "an RC QP (send queue {}, inline {} bytes)",
                    cfg.max_send_wr, cfg.max_inline_data
                ),
                source: match e.0 {
                    CreateQueuePairErrorKind::Ibverbs(e) => e,
                    other => io::Error::other(other.to_string()),
                },
            })?;
        let qpn = qp.qp_number();
        let reset: Qp<Init> = Qp {
            qp,
            meta: Arc::clone(&pd.meta),
            port: cfg.port,
            qpn,
            psn: random_psn(),
            gid: cfg.gid,
            lid: cfg.lid,
            max_send_wr: cfg.max_send_wr,
            max_inline: cfg.max_inline_data,
            _cq: cq.clone(),
            _state: PhantomData,
        };
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::Init)
            .setup_pkey_index(0)
            .setup_port(cfg.port)
            .setup_access_flags(AccessFlags::LocalWrite | AccessFlags::RemoteWrite);
        // The typestate has no RESET marker; the transition is reported as RESET -> INIT.
        let hint = format!("is port {} valid on {}?", cfg.port, pd.meta.name);
        reset.transition(&attr, "RESET", &hint)
    }

    /// Moves to RTR, connected to `remote` along `path`.
    pub fn ready_to_receive(
        self,
        remote: &QpEndpoint,
        path: &PathParams,
    ) -> Result<Qp<Rtr>, Error> {
        if path.port != self.port {
            return Err(Error::InvalidParams(format!(
                "path port {} differs from the QP's port {}",
                path.port, self.port
            )));
        }
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(path.mtu.to_sideway())
            .setup_dest_qp_num(remote.qpn)
            .setup_rq_psn(remote.psn)
            .setup_max_dest_read_atomic(path.max_rd_atomic)
            .setup_min_rnr_timer(path.min_rnr_timer);
        let mut ah = AddressHandleAttribute::new();
        ah.setup_dest_lid(remote.lid)
            .setup_port(path.port)
            .setup_service_level(path.service_level);
        if remote.gid.iter().any(|&b| b != 0) {
            ah.setup_grh(
                &SwGid { raw: remote.gid },
                path.flow_label,
                path.gid_index,
                path.hop_limit,
                path.traffic_class,
            );
        }
        attr.setup_address_vector(&ah);
        let hint = format!(
            "source GID index {}, destination GID {} QPN {:#x}, path MTU {}",
            path.gid_index,
            Gid(remote.gid),
            remote.qpn,
            path.mtu.bytes()
        );
        self.modify(&attr, &hint)
    }

    /// RTR then RTS: the whole connection in one call.
    pub fn connect(self, remote: &QpEndpoint, path: &PathParams) -> Result<Qp<Rts>, Error> {
        self.ready_to_receive(remote, path)?.ready_to_send(path)
    }
}

impl Qp<Rtr> {
    /// Moves to RTS.
    pub fn ready_to_send(self, path: &PathParams) -> Result<Qp<Rts>, Error> {
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(self.psn)
            .setup_timeout(path.ack_timeout)
            .setup_retry_cnt(path.retry_count)
            .setup_rnr_retry(path.rnr_retry)
            .setup_max_read_atomic(path.max_rd_atomic);
        self.modify(&attr, "")
    }
}

enum Source<'a> {
    Sge(LocalSge),
    Inline(&'a [u8]),
}

/// What one RDMA WRITE moves: a local range (registered, or inline bytes) to a remote
/// address. Built checked against both memory regions.
pub struct WriteSpec<'a> {
    src: Source<'a>,
    remote_addr: u64,
    rkey: u32,
    len: u32,
}

impl std::fmt::Debug for WriteSpec<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteSpec")
            .field("inline", &matches!(self.src, Source::Inline(_)))
            .field("remote_addr", &self.remote_addr)
            .field("len", &self.len)
            .finish()
    }
}

fn remote_addr(remote: &MrInfo, offset: u64, len: u32) -> Result<u64, Error> {
    match offset.checked_add(u64::from(len)) {
        Some(end) if end <= remote.len => Ok(remote.addr + offset),
        _ => Err(Error::PeerMismatch(format!(
            "a {len}-byte write at offset {offset} does not fit the peer's {}-byte region",
            remote.len
        ))),
    }
}

impl<'a> WriteSpec<'a> {
    /// `len` bytes from `buf` at `offset` to `remote` at `remote_offset`.
    pub fn from_buffer(
        buf: &Buffer,
        offset: u64,
        len: u32,
        remote: &MrInfo,
        remote_offset: u64,
    ) -> Result<WriteSpec<'static>, Error> {
        Ok(WriteSpec {
            src: Source::Sge(buf.sge(offset, len)?),
            remote_addr: remote_addr(remote, remote_offset, len)?,
            rkey: remote.rkey,
            len,
        })
    }

    /// `data` copied inline into the work request, to `remote` at `remote_offset`.
    pub fn inline(
        data: &'a [u8],
        remote: &MrInfo,
        remote_offset: u64,
    ) -> Result<WriteSpec<'a>, Error> {
        let len = u32::try_from(data.len())
            .map_err(|_| Error::InvalidParams("inline data larger than 4 GiB".into()))?;
        Ok(WriteSpec {
            src: Source::Inline(data),
            remote_addr: remote_addr(remote, remote_offset, len)?,
            rkey: remote.rkey,
            len,
        })
    }

    /// Bytes per write.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether it moves no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the payload goes inline.
    pub fn is_inline(&self) -> bool {
        matches!(self.src, Source::Inline(_))
    }
}

impl Qp<Rts> {
    /// Posts one RDMA WRITE per `(wr_id, signaled)` item, all in one post call (a post list
    /// when there are several). The caller keeps the send queue from overflowing.
    pub fn post_writes<I>(&mut self, spec: &WriteSpec<'_>, wrs: I) -> Result<(), Error>
    where
        I: IntoIterator<Item = (u64, bool)>,
    {
        if let Source::Inline(d) = spec.src {
            if d.len() > self.max_inline as usize {
                return Err(Error::InvalidParams(format!(
                    "{}-byte inline write exceeds the QP's inline limit of {} bytes",
                    d.len(),
                    self.max_inline
                )));
            }
        }
        // rxe copies wr_flags into the WQE and reads inline data only when IBV_SEND_INLINE is
        // set, even with ibv_wr_set_inline_data; other providers ignore the flag there.
        let base = match spec.src {
            Source::Inline(_) => WorkRequestFlags::Inline,
            Source::Sge(_) => WorkRequestFlags::none(),
        };
        let mut guard = self.qp.start_post_send();
        for (wr_id, signaled) in wrs {
            let flags = if signaled {
                base | WorkRequestFlags::Signaled
            } else {
                base
            };
            let h = guard
                .construct_wr(wr_id, flags)
                .setup_write(spec.rkey, spec.remote_addr);
            match spec.src {
                Source::Sge(sge) => ffi::set_sge(h, sge),
                Source::Inline(d) => h.setup_inline_data(d),
            }
        }
        guard.post().map_err(|e| Error::PostSend {
            device: self.meta.name.clone(),
            port: self.port,
            qpn: self.qpn,
            source: match e {
                PostSendError::Ibverbs(e)
                | PostSendError::InvalidWorkRequest(e)
                | PostSendError::InvalidQueuePair(e)
                | PostSendError::NotEnoughResources(e) => e,
                other => io::Error::other(other.to_string()),
            },
        })
    }
}

/// Creating queue pairs on a protection domain.
impl Pd {
    /// Creates an RC QP on `cq` and moves it to INIT.
    pub fn create_qp(&self, cq: &Cq, cfg: &QpConfig) -> Result<Qp<Init>, Error> {
        Qp::create(self, cq, cfg)
    }
}
