//! A bandwidth or latency test from this side: run it, print its outcome, explain a failure,
//! give its exit status.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use bench_core::control::{ControlError, RejectReason};
use bench_core::error::Error;
use bench_core::probe::Memlock;
use bench_core::session::{self, ClientConfig, Log, Outcome, SessionError};
use bench_core::sysfs::SysRoots;
use results::rdmabw::params::TestParams;
use results::rdmabw::report::{Role, TestStatus};
use results::rdmabw::FailureKind;

use super::{lat, logger, report};
use crate::config::{self, Format, Output};
use crate::exit::Exit;
use crate::stdout;

/// Says which flag a local set-up error is about, and what would work.
pub(super) fn explain_local(e: &Error, server_side: bool) -> String {
    let (dev, netdev, port, gid) = if server_side {
        (
            "--server-dev",
            "--server-netdev",
            "the server's -i",
            "--server-gid-index",
        )
    } else {
        ("-d/--ib-dev", "--netdev", "-i/--ib-port", "-x/--gid-index")
    };
    match e {
        Error::UnknownDevice { name, .. } => format!("{dev} {name}: {e}"),
        Error::UnknownNetdev { netdev: n, .. }
        | Error::AmbiguousNetdev { netdev: n, .. }
        | Error::NetdevNotOnDevice { netdev: n, .. } => format!("{netdev} {n}: {e}"),
        Error::NoSuchPort { port: p, .. } => format!("{port} {p}: {e}"),
        Error::PortDown { .. } => format!(
            "{e}; bring the link up, or pick a device or port that is ACTIVE \
             (`rdmabw devices` lists them)"
        ),
        Error::GidIndexOutOfRange { index, .. }
        | Error::GidNotUsable { index, .. }
        | Error::GidIndexTooLarge { index } => format!("{gid} {index}: {e}"),
        Error::NoUsableGid { .. } | Error::NoUsableDevice { .. } => {
            format!("{e} (`rdmabw devices` shows every GID table)")
        }
        _ => e.to_string(),
    }
}

fn explain(e: &SessionError, port: u16) -> String {
    match e {
        SessionError::Local(l) => explain_local(l, false),
        SessionError::Control(ControlError::ConnectFailed { .. }) => format!(
            "{e}; is `rdmabw server` (or `rdmabw server --daemon`) running there on port {port} (-p)?"
        ),
        SessionError::Control(ControlError::Rejected {
            reason: RejectReason::ParamMismatch { .. },
            ..
        }) => format!("{e}; give both ends the same value, or leave it out on the server"),
        SessionError::Control(ControlError::Rejected {
            reason: RejectReason::UnknownDevice { .. },
            ..
        }) => format!("{e}; ask for one it serves with --server-dev or --server-netdev"),
        SessionError::ServerSetup(_) => format!(
            "{e} (the server's rail comes from --server-dev/--server-netdev/--server-gid-index, \
             or the server's own flags)"
        ),
        _ => e.to_string(),
    }
}

/// Whether the process may lock `needed` bytes: `ulimit -l`, unless it holds CAP_IPC_LOCK.
pub(super) fn check_memlock(params: &TestParams) -> Result<(), String> {
    let m = Memlock::read(&SysRoots::default());
    let needed = config::memlock_needed_bytes(params);
    let Some(limit_kib) = m.limit_kib.filter(|_| m.allows(needed) == Some(false)) else {
        return Ok(());
    };
    Err(format!(
        "memlock limit too low: ulimit -l is {limit_kib} KiB, and this test registers {} KiB of \
         buffers; raise it with `ulimit -l unlimited` (as root, or via /etc/security/limits.conf), \
         in a container with the runtime's memlock ulimit (docker --ulimit memlock=-1, or \
         LimitMEMLOCK=infinity for the container runtime) or give it the IPC_LOCK capability",
        needed.div_ceil(1024)
    ))
}

/// A window whose polling thread was off its CPU for more than this share of it gets a
/// warning that its average misses what completed meanwhile.
const STARVED_SHARE: f64 = 0.25;

pub(super) fn print_outcome(o: &Outcome, out: &Output) -> Result<Exit> {
    if o.params.latency {
        return lat::print_outcome(o, out);
    }
    let rep = report::report(o, out);
    if out.format == Format::Table && !out.quiet {
        results::say_raw!("{}", report::preamble(o));
    }
    if let results::rdmabw::params::TestLength::Duration { .. } = o.params.length {
        let batch = u64::from(o.tuning.cq_mod.max(1));
        for r in o.client_results.iter().chain(&o.server_results) {
            if let Some(gap) = r
                .off_cpu_max_s
                .filter(|g| *g > STARVED_SHARE * r.measured_s)
            {
                if !out.quiet {
                    results::say!(
                        "rdmabw: warning: {} B: the polling thread did not run for {gap:.1} s of \
                         the {:.1} s window (the host's CPUs were taken: on Soft-RoCE by the \
                         kernel moving the queued writes), so the completions of that time are \
                         missing from this average; use fewer or smaller writes in flight (-t, \
                         -q, -s) or a less loaded host",
                        r.msg_size_bytes,
                        r.measured_s
                    );
                }
                continue;
            }
            if r.iterations < 10 * batch && !out.quiet {
                results::say!(
                    "rdmabw: warning: {} B: only {} writes completed in the window, counted in \
                     completions of {batch} (-Q): the average is coarse; use a longer -D or a \
                     smaller -Q",
                    r.msg_size_bytes,
                    r.iterations
                );
            }
        }
    }
    report::print(&rep, out).context("writing the results")?;
    match rep.status {
        TestStatus::Ok => Ok(Exit::Ok),
        _ => {
            results::say!(
                "rdmabw: below threshold: {}",
                rep.error
                    .as_deref()
                    .unwrap_or("the result is below the threshold")
            );
            Ok(Exit::Failed)
        }
    }
}

/// Reports a test that did not complete (the message on stderr; with --json, its document on
/// stdout) and gives `code`.
pub(super) fn failure(
    role: Role,
    params: &TestParams,
    out: &Output,
    tuning: &results::rdmabw::params::LocalTuning,
    msg: &str,
    kind: FailureKind,
    code: Exit,
) -> Result<Exit> {
    results::say!("rdmabw: error: {msg}");
    if out.format == Format::Json {
        stdout::json_line(&report::failed_report(
            role,
            params,
            tuning,
            msg,
            Some(kind),
        ))?;
    }
    Ok(code)
}

pub(super) fn client(c: &ClientConfig, out: &Output, stop: &Arc<AtomicBool>) -> Result<Exit> {
    let fail =
        |msg: &str, kind, code| failure(Role::Client, &c.params, out, &c.tuning, msg, kind, code);
    if let Err(msg) = check_memlock(&c.params) {
        return fail(&msg, FailureKind::Memlock, Exit::Usage);
    }
    let log = logger(out.quiet, "rdmabw: ");
    if c.params.run_infinitely {
        return endless(c, out, stop, &log);
    }
    match session::run_client(c, stop, &log) {
        Ok(o) => print_outcome(&o, out),
        Err(e) => fail(&explain(&e, c.port), e.kind(), Exit::of_session(&e)),
    }
}

/// `--run_infinitely`: a row per measured window on stdout as it closes (the table, a BwReport
/// per line, or CSV rows after one header) until SIGINT/SIGTERM, then exit 130. A reader of
/// stdout that goes away ends the test too (exit 0, as for every other output).
fn endless(c: &ClientConfig, out: &Output, stop: &Arc<AtomicBool>, log: &Log) -> Result<Exit> {
    let mut stream = report::Stream::new(out);
    let mut broken: Option<std::io::Error> = None;
    let r = session::run_client_streaming(c, stop, log, &mut |o| {
        if broken.is_some() {
            return;
        }
        if let Err(e) = stream.window(o) {
            broken = Some(e);
            stop.store(true, Ordering::Relaxed);
        }
    });
    if let Some(e) = broken {
        return Err(anyhow::Error::new(e).context("writing the results"));
    }
    let windows = stream.windows();
    stream.end().context("writing the results")?;
    match r {
        Err(SessionError::Interrupted { told_peer }) => {
            log(&format!(
                "interrupted after {windows} window{}{}",
                if windows == 1 { "" } else { "s" },
                if told_peer {
                    "; the server was told"
                } else {
                    ""
                }
            ));
            Ok(Exit::Interrupted)
        }
        Err(e) => failure(
            Role::Client,
            &c.params,
            out,
            &c.tuning,
            &explain(&e, c.port),
            e.kind(),
            Exit::of_session(&e),
        ),
        Ok(o) => print_outcome(&o, out),
    }
}
