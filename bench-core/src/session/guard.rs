//! This side's port during and after the window: a thread that stops the run when the rail goes
//! down, and a note on the port's state after a failed run.

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::rails::Rail;
use crate::sysfs::{self, SysRoots};

/// A note on the port's state when it is no longer ACTIVE (after a failed run).
pub(super) fn port_note(roots: &SysRoots, rail: &Rail) -> Option<String> {
    let dev = sysfs::read_device_scoped(roots, &rail.device, sysfs::GidScope::Skip).ok()?;
    let port = dev.port(rail.port)?;
    let state = port.state.as_ref()?;
    if port.is_active() {
        return None;
    }
    Some(format!(
        "port {} of {} is now {} ({}): the rail{} went down",
        rail.port,
        rail.device,
        state.name(),
        port.phys_state
            .as_deref()
            .unwrap_or("physical state unknown"),
        rail.netdev
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    ))
}

/// How often the guard reads the rail's port state during the window (on rxe the read takes
/// the RTNL lock to ask the netdev its speed: not something to do in a tight loop). The guard
/// wakes for nothing else: every wake-up of a helper thread costs the data path, most of all on
/// Soft-RoCE, where the kernel moves the data on the same CPUs (the guard, the heartbeats and
/// the signal thread waking 4-5 times a second each cost rdmabw 2-3% of its bandwidth in the
/// lab). The end of the window wakes it at once.
const RAIL_CHECK: Duration = Duration::from_secs(1);

/// How long a port seen down may take to come back before the guard stops the run. A link
/// that flaps (down and up again in a moment) is not a dead rail: the transport retransmits
/// what was lost, the test goes on, and the counters' `link-flap` finding says what happened.
/// A rail that stays down is reported this much later than it was seen.
const LINK_GRACE: Duration = Duration::from_secs(2);

/// How often the guard looks again while a port is down, within [`LINK_GRACE`].
const GRACE_CHECK: Duration = Duration::from_millis(100);

/// For a wait that blocks in one read with no wake-up of its own (perftest's passive server,
/// [`crate::perftest::PerftestConn::read_until_woken`]): at each of its checks the guard also
/// looks at the caller's `stop` (SIGINT, when the signal did not interrupt the read itself),
/// and when that or the rail ends the run it shuts the read side of `stream`, a clone of the
/// waiting socket, so that the read returns at once.
pub(super) struct Wake {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) stream: TcpStream,
}

impl Wake {
    fn wake(&self) {
        let _ = self.stream.shutdown(Shutdown::Read);
    }
}

/// During the window: watches this side's port: a rail that goes down and stays down for
/// [`LINK_GRACE`] stops the run (rxe, for one, retries forever and would only show a stall
/// much later); one that comes back within it lets the run go on. The caller's stop
/// flag needs no thread: the engine looks at it directly ([`StopFlags::either`]); a wait
/// that blocks in one read hands the guard a [`Wake`].
pub(super) struct Guard {
    quit: Arc<AtomicBool>,
    rail_down: Arc<Mutex<Option<String>>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Guard {
    pub(super) fn start(
        to: Arc<AtomicBool>,
        roots: &SysRoots,
        rail: &Rail,
        wake: Option<Wake>,
    ) -> Guard {
        let quit = Arc::new(AtomicBool::new(false));
        let rail_down = Arc::new(Mutex::new(None));
        let port_dir = roots.port_dir(&rail.device, rail.port);
        let what = format!(
            "port {} of {}{}",
            rail.port,
            rail.device,
            rail.netdev
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        );
        let (q, down) = (Arc::clone(&quit), Arc::clone(&rail_down));
        let thread = thread::Builder::new()
            .name("rdmabw-guard".into())
            .spawn(move || 'watch: loop {
                let next = Instant::now() + RAIL_CHECK;
                loop {
                    if q.load(Ordering::Acquire) {
                        return;
                    }
                    let left = next.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    thread::park_timeout(left);
                }
                if let Some(w) = wake.as_ref().filter(|w| w.stop.load(Ordering::Relaxed)) {
                    w.wake();
                    return;
                }
                let down_now = || {
                    sysfs::read_attr(&port_dir.join("state"))
                        .map(|s| sysfs::PortState::parse(&s))
                        .filter(|s| *s != sysfs::PortState::Active)
                };
                let Some(mut state) = down_now() else {
                    continue;
                };
                // Down: look again every GRACE_CHECK until LINK_GRACE has passed.
                let until = Instant::now() + LINK_GRACE;
                while Instant::now() < until {
                    if q.load(Ordering::Acquire) {
                        return;
                    }
                    thread::park_timeout(GRACE_CHECK);
                    match down_now() {
                        Some(s) => state = s,
                        None => continue 'watch,
                    }
                }
                let phys = sysfs::read_attr(&port_dir.join("phys_state"))
                    .unwrap_or_else(|| "unknown".into());
                *down.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                    "{what} went {} (physical state {phys}) during the test: the rail is down",
                    state.name()
                ));
                to.store(true, Ordering::Relaxed);
                if let Some(w) = &wake {
                    w.wake();
                }
                return;
            })
            .ok();
        Guard {
            quit,
            rail_down,
            thread,
        }
    }

    /// Stops the thread; what it saw of the rail.
    pub(super) fn stop(mut self) -> Option<String> {
        self.quit.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        self.rail_down
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Guard")
    }
}
