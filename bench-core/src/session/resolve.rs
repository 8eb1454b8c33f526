//! Which rail a request names: the sysfs inventory it needs, and the short-lived discovery the
//! tests of one server share.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::control::DeviceClaims;
use crate::error::Error;
use crate::rails;
use crate::rails::{resolve_rail, Rail, RailRequest};
use crate::sysfs::{self, Inventory, SysRoots};

/// How long a server reuses one discovery for the next hellos (a daemon receiving one hello per
/// rail at once discovers once; sysfs discovery reads every GID table).
const INVENTORY_TTL: Duration = Duration::from_secs(5);

/// The inventory `req` needs: with a device named and no netdev, only that device is read
/// (what ib_write_bw -d reads); otherwise every device, since a netdev or the default choice
/// may be on any of them.
pub fn inventory_for(roots: &SysRoots, req: &RailRequest) -> Result<Inventory, Error> {
    match (&req.device, &req.netdev) {
        (Some(dev), None) => Ok(Inventory {
            devices: vec![sysfs::read_device(roots, dev)?],
            netdevs: Vec::new(),
        }),
        _ => rails::inventory(roots),
    }
}

/// Resolves `req` into a rail, with the inventory it was resolved from. With a device and a GID
/// index named (what railsweep and most scripts pass), only that GID entry is read; the whole
/// table is read only when that entry is refused, so that the error can list the usable ones.
pub fn resolve_request(roots: &SysRoots, req: &RailRequest) -> Result<(Rail, Inventory), Error> {
    if let (Some(dev), None, Some(index)) = (&req.device, &req.netdev, req.gid_index) {
        let inv = Inventory {
            devices: vec![sysfs::read_device_scoped(
                roots,
                dev,
                sysfs::GidScope::One(index),
            )?],
            netdevs: Vec::new(),
        };
        if let Ok(rail) = resolve_rail(&inv, roots, req) {
            return Ok((with_netdev_mtu(roots, rail), inv));
        }
    }
    let inv = inventory_for(roots, req)?;
    let rail = resolve_rail(&inv, roots, req)?;
    Ok((with_netdev_mtu(roots, rail), inv))
}

/// A device-only inventory knows no netdev bindings: read the rail's interface MTU directly.
fn with_netdev_mtu(roots: &SysRoots, mut rail: Rail) -> Rail {
    if rail.netdev_mtu.is_none() {
        rail.netdev_mtu = rail
            .netdev
            .as_deref()
            .and_then(|n| sysfs::interface_mtu(roots, n));
    }
    rail
}

/// A discovery and when it was made.
type CachedInventory = Arc<Mutex<Option<(Instant, Arc<Inventory>)>>>;

/// What the tests of one server share: which devices are busy, and a short-lived inventory.
#[derive(Debug, Clone, Default)]
pub struct ServerShared {
    /// Devices running a test.
    pub claims: DeviceClaims,
    inventory: CachedInventory,
}

impl ServerShared {
    /// Fresh claims, no inventory yet.
    pub fn new() -> ServerShared {
        ServerShared::default()
    }

    /// Sharing `claims` (tests pre-claim devices through it).
    pub fn with_claims(claims: DeviceClaims) -> ServerShared {
        ServerShared {
            claims,
            ..ServerShared::default()
        }
    }

    /// Hands over a discovery just made (the server's start-up check), to be reused while fresh.
    pub fn seed(&self, inv: Inventory) {
        *self.inventory.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), Arc::new(inv)));
    }

    /// [`resolve_request`], with full discoveries shared while fresh.
    pub fn resolve(&self, roots: &SysRoots, req: &RailRequest) -> Result<Rail, Error> {
        match (&req.device, &req.netdev) {
            (Some(_), None) => resolve_request(roots, req).map(|(rail, _)| rail),
            _ => resolve_rail(&*self.inventory(roots)?, roots, req),
        }
    }

    /// The inventory: the last one while younger than a few seconds, else a new discovery.
    /// Concurrent callers wait for the discovery in flight instead of repeating it.
    pub fn inventory(&self, roots: &SysRoots) -> Result<Arc<Inventory>, Error> {
        let mut slot = self.inventory.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, inv)) = slot.as_ref() {
            if at.elapsed() < INVENTORY_TTL {
                return Ok(Arc::clone(inv));
            }
        }
        let inv = Arc::new(rails::inventory(roots)?);
        *slot = Some((Instant::now(), Arc::clone(&inv)));
        Ok(inv)
    }
}
