//! The RDMA part of one side once its rail is known: prepared, described to the peer, and
//! connected to the peer's endpoints.

use crate::engine::{Connected, Endpoints, Prepared};
use crate::error::Error;
use crate::gid::{Gid, Rail};
use crate::params::{LocalTuning, TestParams};
use crate::sysfs::SysRoots;
use crate::verbs::{Device, PathMtu, PathParams};

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
pub(super) fn endpoints_of(side: &Side) -> Endpoints {
    Endpoints {
        netdev: side.rail.netdev.clone(),
        ..side.info.clone()
    }
}

pub(super) fn connect_qps(
    roots: &SysRoots,
    side: Side,
    theirs: &Endpoints,
    tuning: &LocalTuning,
) -> Result<(Connected, Rail, PathMtu, u32), Error> {
    if let Some(peer) = theirs
        .qps
        .first()
        .and_then(|q| Gid::from(q.gid).ipv4_mapped())
    {
        crate::neigh::resolve(roots, peer, crate::neigh::WAIT);
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
    let conn = side.prepared.connect(theirs, &path)?;
    Ok((conn, side.rail, mtu, local_mtu.bytes()))
}
