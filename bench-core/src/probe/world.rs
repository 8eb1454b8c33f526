//! The probe's world: the roots it reads ([`ProbeRoots`]) and what it does outside the file
//! system ([`ProbeSystem`]: environment variables, `open`, DNS, memory registration, port
//! queries), so that the checks run on fixture trees; [`LiveSystem`] is the real one.

use std::fs;
use std::io;
use std::net::{IpAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::rails::{self, PortQuery};
use crate::sysfs::SysRoots;
use crate::verbs::Device;

/// The roots the probe reads: sysfs, devfs and procfs ([`SysRoots`]) and `/etc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRoots {
    /// `/sys`, `/dev`, `/proc`.
    pub sys: SysRoots,
    /// Where `/etc` is (for `resolv.conf`).
    pub etc: PathBuf,
}

impl Default for ProbeRoots {
    fn default() -> Self {
        ProbeRoots {
            sys: SysRoots::default(),
            etc: PathBuf::from("/etc"),
        }
    }
}

impl ProbeRoots {
    /// `<root>/sys`, `<root>/dev`, `<root>/proc` and `<root>/etc`, as the fixtures lay them out.
    pub fn under(root: &Path) -> ProbeRoots {
        ProbeRoots {
            sys: SysRoots::under(root),
            etc: root.join("etc"),
        }
    }
}

/// What the probe does outside the file system, so that tests can stand in for it.
pub trait ProbeSystem: PortQuery {
    /// An environment variable of this process.
    fn env(&self, name: &str) -> Option<String>;
    /// Opens `path` for reading and writing and closes it again.
    fn open_rw(&self, path: &Path) -> io::Result<()>;
    /// Resolves a host name, giving up after `timeout`.
    fn lookup_host(&self, name: &str, timeout: Duration) -> io::Result<Vec<IpAddr>>;
    /// Opens `device`, allocates a protection domain and registers `bytes` of host memory.
    fn register_memory(&self, device: &str, bytes: u64) -> Result<(), String>;
}

/// The real system: the process environment, `open(2)`, the system resolver and libibverbs.
#[derive(Debug)]
pub struct LiveSystem {
    roots: SysRoots,
    verbs: rails::VerbsQuery,
}

impl LiveSystem {
    /// The real system; `roots` serve the engine's error messages.
    pub fn new(roots: &SysRoots) -> LiveSystem {
        LiveSystem {
            roots: roots.clone(),
            verbs: rails::VerbsQuery::new(roots),
        }
    }
}

impl PortQuery for LiveSystem {
    fn active_mtu(&self, device: &str, port: u8) -> Option<u32> {
        self.verbs.active_mtu(device, port)
    }

    fn populated_gids(&self, device: &str) -> Option<Vec<(u8, u32)>> {
        self.verbs.populated_gids(device)
    }
}

impl ProbeSystem for LiveSystem {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn open_rw(&self, path: &Path) -> io::Result<()> {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map(drop)
    }

    fn lookup_host(&self, name: &str, timeout: Duration) -> io::Result<Vec<IpAddr>> {
        let (tx, rx) = mpsc::channel();
        let host = name.to_string();
        // getaddrinfo has no timeout: ask on a thread and stop waiting for it.
        thread::Builder::new()
            .name("probe-dns".into())
            .spawn(move || {
                let r = (host.as_str(), 0)
                    .to_socket_addrs()
                    .map(|it| it.map(|a| a.ip()).collect::<Vec<_>>());
                let _ = tx.send(r);
            })?;
        match rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer within {:.0} s", timeout.as_secs_f64()),
            )),
        }
    }

    fn register_memory(&self, device: &str, bytes: u64) -> Result<(), String> {
        let dev = Device::open_with(&self.roots, device).map_err(|e| e.to_string())?;
        let pd = dev.alloc_pd().map_err(|e| e.to_string())?;
        pd.alloc_host_buffer(bytes)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}
