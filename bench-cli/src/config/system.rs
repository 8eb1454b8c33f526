//! What resolving reads of the system: the sysfs root a listing reads, this host's name, what
//! a host name resolves to, and how much memory a test locks.

use std::time::Duration;

use bench_core::sysfs::SysRoots;
use results::rdmabw::params::TestParams;

use crate::exit::{usage, Usage};

/// The system a listing reads: this host's, or with `--root ROOT` the tree under ROOT (a
/// fixture, a copy of a pod's view), which must hold a `sys` folder: a root that does not is a
/// usage error, not an empty listing.
pub fn sys_roots(root: Option<&std::path::Path>) -> Result<SysRoots, Usage> {
    match root {
        None => Ok(SysRoots::default()),
        Some(r) if r.join("sys").is_dir() => Ok(SysRoots::under(r)),
        Some(r) => usage(format!(
            "--root {}: no folder {} there; give the folder that holds sys/ (and proc/, dev/), \
             as a fixture tree or a copy of a pod's view does",
            r.display(),
            r.join("sys").display()
        )),
    }
}

/// Whether `host` (an IP address, or a name) gives at least one address. A name that does not
/// resolve is a usage error at once, not a server that does not answer yet; a resolver that
/// fails is asked once more, a second later, before the name is called unknown.
pub(super) fn resolves(host: &str, port: u16) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    if host.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    let once = || match (host, port).to_socket_addrs() {
        Ok(mut a) => match a.next() {
            Some(_) => Ok(()),
            None => Err("it has no addresses".to_string()),
        },
        Err(e) => Err(e.to_string()),
    };
    once().or_else(|_| {
        std::thread::sleep(Duration::from_secs(1));
        once()
    })
}

/// `ulimit -l` bytes a test needs: two halves of the largest message, page-rounded (with
/// `--data_validation`, of a slot per QP holding every size), plus slack for queues.
pub fn memlock_needed_bytes(p: &TestParams) -> u64 {
    bench_core::engine::buffer_bytes(p).saturating_add(1 << 20)
}

/// This host's (pod's) name.
pub fn host_name() -> String {
    bench_core::sysfs::host_name(&SysRoots::default()).unwrap_or_else(|| "unknown-host".to_string())
}
