//! rdmabw's exit statuses, every one of them, and the one mapping from how a subcommand ended
//! to its status. Subcommands return `anyhow::Result<Exit>`: `Ok` when they have reported the
//! outcome themselves (a test that failed prints its own explanation and `--json` document),
//! `Err` when [`finish`] is to report it. Only `main` turns the status into the process's
//! `ExitCode`.
//!
//! | status | meaning |
//! |---|---|
//! | 0 | it worked (a test ran and met `--min-gbps` / `--min-line-rate-pct`); also when the reader of standard output went away (a broken pipe, `rdmabw rails \| head -1`): ripgrep's way |
//! | 1 | it ran but failed: the peer died, the rail went down, an RDMA error, a server busy or unreachable, a result below the threshold, a probe check that FAILs, a GPU step that failed |
//! | 2 | usage or set-up error: a bad flag, an unknown device, an unusable GID, parameters that differ from the server's, memlock too low, no libibverbs, a peer that is not rdmabw, an unreadable sysfs |
//! | 130 | interrupted by SIGINT or SIGTERM |

use std::io;

use bench_core::error::Error;
use bench_core::gpu::GpuError;
use bench_core::rails::RailsError;
use bench_core::session::SessionError;

/// A usage or set-up mistake, shown as is, exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// `Err` of a [`Usage`] saying `msg`.
pub fn usage<T>(msg: impl Into<String>) -> Result<T, Usage> {
    Err(Usage(msg.into()))
}

/// Every exit status rdmabw uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It worked (and met any threshold), or standard output's reader went away.
    Ok = 0,
    /// It ran but failed, or fell below the threshold.
    Failed = 1,
    /// Usage or set-up error.
    Usage = 2,
    /// Stopped by SIGINT/SIGTERM.
    Interrupted = 130,
}

/// The exit statuses as `rdmabw --help` states them, in short (the table above is in full).
pub const HELP: &str = "\
Exit status: 0 it worked, or the reader of standard output goes away (`rdmabw rails | head -1`).
1 it ran but failed or fell below the threshold (peer died, rail down, RDMA error, server busy or
unreachable, a check FAILs). 2 usage or set-up error (bad flag, unknown device, unusable GID, the
server's parameters differ, no libibverbs, sysfs unreadable). 130 interrupted (SIGINT, SIGTERM).";

impl Exit {
    /// The number the process exits with.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The status of a test that ended in `e`.
    pub fn of_session(e: &SessionError) -> Exit {
        match e {
            SessionError::Interrupted { .. } => Exit::Interrupted,
            e if e.is_setup() => Exit::Usage,
            _ => Exit::Failed,
        }
    }

    /// The status of an error that ended a subcommand. A test's own errors come first: a
    /// broken socket to the peer is a failed test, not a reader that went away. Then a broken
    /// pipe anywhere in the chain is 0; set-up errors are 2; anything else is 1.
    pub fn of_error(e: &anyhow::Error) -> Exit {
        if let Some(s) = find::<SessionError>(e) {
            return Exit::of_session(s);
        }
        if is_broken_pipe(e) {
            return Exit::Ok;
        }
        if let Some(g) = find::<GpuError>(e) {
            return if g.is_setup() {
                Exit::Usage
            } else {
                Exit::Failed
            };
        }
        let setup = find::<Usage>(e).is_some()
            || find::<RailsError>(e).is_some()
            || matches!(find::<Error>(e), Some(Error::Sysfs { .. }));
        if setup {
            Exit::Usage
        } else {
            Exit::Failed
        }
    }
}

/// Whether a broken pipe (EPIPE: the reader went away) is anywhere in the chain.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// `T` as the error itself, a context of it, or a cause in its chain.
fn find<T>(e: &anyhow::Error) -> Option<&T>
where
    T: std::error::Error + Send + Sync + 'static,
{
    e.downcast_ref::<T>()
        .or_else(|| e.chain().find_map(|c| c.downcast_ref::<T>()))
}

/// The error and its causes on one line, each cause once: most of bench-core's errors already
/// name their source in their own text.
pub fn message(e: &anyhow::Error) -> String {
    let mut s = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if s.contains(&text) {
            continue;
        }
        if !s.is_empty() {
            s.push_str(": ");
        }
        s.push_str(&text);
    }
    s
}

/// Ends a subcommand: reports an error it did not report itself on stderr (nothing for a
/// reader that went away) and gives the status.
pub fn finish(r: anyhow::Result<Exit>) -> Exit {
    match r {
        Ok(x) => x,
        Err(e) => {
            let x = Exit::of_error(&e);
            if x != Exit::Ok {
                results::say!("rdmabw: error: {}", message(&e));
            }
            x
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    fn epipe() -> io::Error {
        io::Error::from(io::ErrorKind::BrokenPipe)
    }

    #[test]
    fn a_broken_pipe_anywhere_in_the_chain_is_0() {
        assert_eq!(Exit::of_error(&anyhow::Error::new(epipe())), Exit::Ok);
        let deep = Err::<(), _>(epipe())
            .context("writing the listing")
            .context("rdmabw rails")
            .expect_err("an Err stays an Err under context");
        assert_eq!(Exit::of_error(&deep), Exit::Ok);
        assert_eq!(finish(Err(deep)), Exit::Ok);
        let other = anyhow::Error::new(io::Error::from(io::ErrorKind::WriteZero));
        assert_eq!(Exit::of_error(&other), Exit::Failed);
    }

    #[test]
    fn an_unreadable_sysfs_and_usage_errors_are_2() {
        let sysfs = Error::Sysfs {
            path: "/sys/class/infiniband".into(),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        };
        let e = anyhow::Error::new(sysfs).context("listing the RDMA devices");
        assert_eq!(Exit::of_error(&e), Exit::Usage);
        let rails = anyhow::Error::new(RailsError::Discover(Error::Sysfs {
            path: "/sys/class/infiniband".into(),
            source: io::Error::from(io::ErrorKind::NotADirectory),
        }))
        .context("listing the rails");
        assert_eq!(Exit::of_error(&rails), Exit::Usage);
        let usage = anyhow::Error::new(Usage("-s/--size 0: ...".into()));
        assert_eq!(Exit::of_error(&usage), Exit::Usage);
        assert_eq!(
            Exit::of_error(&anyhow::Error::new(GpuError::NoGpus)),
            Exit::Usage
        );
        assert_eq!(Exit::of_error(&anyhow::anyhow!("serving")), Exit::Failed);
    }

    #[test]
    fn the_codes_are_the_documented_ones() {
        let codes: Vec<u8> = [Exit::Ok, Exit::Failed, Exit::Usage, Exit::Interrupted]
            .iter()
            .map(|x| x.code())
            .collect();
        assert_eq!(codes, vec![0, 1, 2, 130]);
        for n in [
            "0 it worked",
            "1 it ran but failed",
            "2 usage",
            "130 interrupted",
        ] {
            assert!(HELP.replace('\n', " ").contains(n), "{n}: {HELP}");
        }
    }

    #[test]
    fn the_message_names_each_cause_once() {
        let e = anyhow::Error::new(Error::Sysfs {
            path: "/x/sys/class/infiniband".into(),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        })
        .context("listing the RDMA devices");
        assert_eq!(
            message(&e),
            "listing the RDMA devices: cannot read /x/sys/class/infiniband: permission denied"
        );
    }
}
