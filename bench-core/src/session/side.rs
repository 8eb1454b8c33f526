//! The RDMA part of one side once its rail is known: prepared, described to the peer, and
//! connected to the peer's endpoints.

use super::error::{control, SessionError};
use crate::control::ControlChannel;
use crate::engine::{Connected, Endpoints, Prepared};
use crate::error::Error;
use crate::gid::Gid;
use crate::gpu::MemoryUse;
use crate::rails::Rail;
use crate::sysfs::SysRoots;
use crate::verbs::{Device, PathMtu, PathParams};
use wire::params::{LocalTuning, TestParams};

/// The RDMA part of one side once the rail is known.
pub(super) struct Side {
    pub(super) rail: Rail,
    pub(super) prepared: Prepared,
    pub(super) info: Endpoints,
}

pub(super) fn prepare(
    roots: &SysRoots,
    rail: Rail,
    params: &TestParams,
    tuning: &LocalTuning,
) -> Result<Side, Error> {
    let device = Device::open_with(roots, &rail.device)?;
    let prepared = Prepared::for_rail(&device, &rail, params, tuning)?;
    let info = prepared.info()?;
    Ok(Side {
        rail,
        prepared,
        info,
    })
}

/// What this side tells the peer in the exchange: its QPs, memory and GID index (the engine's
/// [`Endpoints`]) and its interface.
fn endpoints_of(side: &Side) -> Endpoints {
    Endpoints {
        netdev: side.rail.netdev.clone(),
        ..side.info.clone()
    }
}

/// This side's QPs connected to the peer's (in RTS), and what the bring-up settled: the same
/// for a peer that is rdmabw or perftest.
pub(super) struct Link {
    /// This side's QPs.
    pub(super) conn: Connected,
    /// This side's rail.
    pub(super) rail: Rail,
    /// The path MTU of the QPs.
    pub(super) mtu: PathMtu,
    /// This side's active MTU in bytes.
    pub(super) local_mtu: u32,
    /// What the peer sent in the exchange.
    pub(super) theirs: Endpoints,
    /// The memory this side's buffer is in.
    pub(super) memory: MemoryUse,
}

/// Connects `side`'s QPs to the peer's endpoints `theirs`.
pub(super) fn connect_qps(
    roots: &SysRoots,
    side: Side,
    theirs: Endpoints,
    tuning: &LocalTuning,
) -> Result<Link, Error> {
    if let Some(peer) = theirs
        .qps
        .first()
        .and_then(|q| Gid::from(q.gid).ipv4_mapped())
    {
        crate::neigh::ensure_neighbour(roots, peer, crate::neigh::WAIT);
    }
    let remote_mtu = PathMtu::from_bytes(theirs.mtu_bytes).ok_or_else(|| {
        Error::PeerMismatch(format!(
            "the peer's active MTU {} is not an InfiniBand MTU",
            theirs.mtu_bytes
        ))
    })?;
    let local_mtu = side.prepared.active_mtu();
    let mtu = PathMtu::negotiate(local_mtu, remote_mtu, tuning.mtu_bytes)?;
    let path = PathParams::new(side.rail.port, side.rail.gid_index, tuning, mtu)?;
    let memory = side.prepared.memory().clone();
    let conn = side.prepared.connect(&theirs, &path)?;
    Ok(Link {
        conn,
        rail: side.rail,
        mtu,
        local_mtu: local_mtu.bytes(),
        theirs,
        memory,
    })
}

/// The exchange and the bring-up, the same on both sides (`who` names this one to the peer
/// when it fails): swap endpoints, connect the QPs, telling the peer when that fails, and wait
/// until both sides are ready: the measurement may start. The control channel, past `Ready`,
/// and the link.
pub(super) fn link(
    mut ch: ControlChannel,
    roots: &SysRoots,
    side: Side,
    tuning: &LocalTuning,
    who: &str,
) -> Result<(ControlChannel, Link), SessionError> {
    let ours = endpoints_of(&side);
    let theirs = ch.exchange_endpoints(&ours).map_err(control)?;
    let link = match connect_qps(roots, side, theirs, tuning) {
        Ok(l) => l,
        Err(e) => {
            ch.fail(&format!("the {who} could not connect its QPs: {e}"));
            return Err(e.into());
        }
    };
    ch.sync_ready().map_err(control)?;
    Ok((ch, link))
}
