//! Which device runs which test, for a `--daemon` server that runs tests on several rails at
//! once but only one test per device.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::msg::Msg;

/// Who holds a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimInfo {
    /// The holder, as given to [`DeviceClaims::try_claim`] (client host and address).
    pub by: String,
    /// When the claim was made.
    pub since: Instant,
}

type Table = HashMap<String, ClaimInfo>;

/// A thread-safe registry of claimed devices. Clones share the registry.
#[derive(Debug, Clone, Default)]
pub struct DeviceClaims {
    table: Arc<Mutex<Table>>,
}

/// The device is already running a test.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("device {device} is busy with a test for {by} (running for {held_for:.1?})")]
pub struct DeviceBusy {
    /// The device.
    pub device: String,
    /// Who holds it.
    pub by: String,
    /// How long it has been held.
    pub held_for: Duration,
}

impl DeviceBusy {
    /// The `Busy` message for the client.
    pub fn to_msg(&self) -> Msg {
        Msg::Busy {
            device: self.device.clone(),
            by: self.by.clone(),
        }
    }
}

/// A held device; dropping it releases the device.
#[derive(Debug)]
#[must_use = "the device is released as soon as the claim is dropped"]
pub struct DeviceClaim {
    table: Arc<Mutex<Table>>,
    device: String,
}

impl DeviceClaim {
    /// The claimed device.
    pub fn device(&self) -> &str {
        &self.device
    }
}

impl Drop for DeviceClaim {
    fn drop(&mut self) {
        // The device cannot be claimed again while this guard lives, so the entry is ours.
        lock(&self.table).remove(&self.device);
    }
}

fn lock(table: &Mutex<Table>) -> MutexGuard<'_, Table> {
    // Every change is a single insert or remove, so a poisoned table is still consistent.
    table.lock().unwrap_or_else(|e| e.into_inner())
}

impl DeviceClaims {
    /// An empty registry.
    pub fn new() -> Self {
        DeviceClaims::default()
    }

    /// Claims `device` for `by`, or says who holds it.
    pub fn try_claim(&self, device: &str, by: &str) -> Result<DeviceClaim, DeviceBusy> {
        let mut table = lock(&self.table);
        if let Some(held) = table.get(device) {
            return Err(DeviceBusy {
                device: device.to_string(),
                by: held.by.clone(),
                held_for: held.since.elapsed(),
            });
        }
        table.insert(
            device.to_string(),
            ClaimInfo {
                by: by.to_string(),
                since: Instant::now(),
            },
        );
        Ok(DeviceClaim {
            table: Arc::clone(&self.table),
            device: device.to_string(),
        })
    }

    /// Who holds `device`, if anyone.
    pub fn holder(&self, device: &str) -> Option<ClaimInfo> {
        lock(&self.table).get(device).cloned()
    }

    /// Every claim now, sorted by device name.
    pub fn snapshot(&self) -> Vec<(String, ClaimInfo)> {
        let mut v: Vec<_> = lock(&self.table)
            .iter()
            .map(|(d, c)| (d.clone(), c.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// The number of devices claimed now.
    pub fn len(&self) -> usize {
        lock(&self.table).len()
    }

    /// True when no device is claimed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::thread;

    #[test]
    fn a_claim_is_exclusive_until_dropped() {
        let claims = DeviceClaims::new();
        let a = claims.try_claim("mlx5_0", "pod-a").unwrap();
        assert_eq!(a.device(), "mlx5_0");
        let busy = claims.try_claim("mlx5_0", "pod-b").unwrap_err();
        assert_eq!(busy.device, "mlx5_0");
        assert_eq!(busy.by, "pod-a");
        assert_eq!(
            busy.to_msg(),
            Msg::Busy {
                device: "mlx5_0".into(),
                by: "pod-a".into()
            }
        );
        assert!(busy.to_string().contains("busy with a test for pod-a"));
        assert_eq!(claims.holder("mlx5_0").unwrap().by, "pod-a");
        drop(a);
        assert!(claims.holder("mlx5_0").is_none());
        assert!(claims.is_empty());
        let b = claims.try_claim("mlx5_0", "pod-b").unwrap();
        assert_eq!(claims.holder("mlx5_0").unwrap().by, "pod-b");
        drop(b);
    }

    #[test]
    fn different_devices_run_side_by_side() {
        let claims = DeviceClaims::new();
        let rails: Vec<_> = (0..8)
            .map(|i| {
                claims
                    .try_claim(&format!("mlx5_{i}"), &format!("client-{i}"))
                    .unwrap()
            })
            .collect();
        assert_eq!(claims.len(), 8);
        let snap = claims.snapshot();
        assert_eq!(snap[0].0, "mlx5_0");
        assert_eq!(snap[7].1.by, "client-7");
        drop(rails);
        assert!(claims.is_empty());
    }

    #[test]
    fn racing_claims_have_exactly_one_winner() {
        let claims = DeviceClaims::new();
        for _round in 0..50 {
            let n = 8;
            let barrier = Arc::new(Barrier::new(n));
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    let claims = claims.clone();
                    let barrier = Arc::clone(&barrier);
                    thread::spawn(move || {
                        barrier.wait();
                        // Hold a winning claim until every thread has tried.
                        let r = claims.try_claim("mlx5_0", &format!("t{i}"));
                        barrier.wait();
                        r.is_ok()
                    })
                })
                .collect();
            let wins = handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .filter(|w| *w)
                .count();
            assert_eq!(wins, 1);
            assert!(
                claims.is_empty(),
                "released after the winner's thread ended"
            );
        }
    }

    #[test]
    fn a_panicking_holder_still_releases() {
        let claims = DeviceClaims::new();
        let c2 = claims.clone();
        let r = thread::spawn(move || {
            let _claim = c2.try_claim("mlx5_1", "doomed").unwrap();
            panic!("engine blew up");
        })
        .join();
        assert!(r.is_err());
        assert!(claims.try_claim("mlx5_1", "next").is_ok());
    }
}
