//! A server: one test (as ib_write_bw without HOST), or `--daemon`'s test after test.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use bench_core::control::{for_log, PEER_TEXT_CHARS};
use bench_core::session::{
    self, Daemon, Listener, Log, OnTest, ServerConfig, ServerShared, SessionError,
};
use results::rdmabw::report::Role;
use results::rdmabw::FailureKind;

use super::outcome::{check_memlock, explain_local, failure, print_outcome};
use super::{lat, logger, report};
use crate::config::{self, Format, Output};
use crate::exit::{self, Exit};
use crate::stdout;

fn bind_error(e: &std::io::Error, bind: std::net::SocketAddr) -> String {
    match e.kind() {
        ErrorKind::AddrInUse => format!(
            "-p/--port {}: control port {} is in use on {} (another rdmabw or ib_write_bw \
             server?); stop it or pick a free port with -p",
            bind.port(),
            bind.port(),
            bind.ip()
        ),
        ErrorKind::AddrNotAvailable => format!(
            "--bind {}: not an address of this host (or pod); use one of its addresses or 0.0.0.0",
            bind.ip()
        ),
        ErrorKind::PermissionDenied => format!(
            "-p/--port {}: not allowed to listen on this port (ports below 1024 need privileges); \
             pick another with -p",
            bind.port()
        ),
        _ => format!("cannot listen on {bind}: {e}"),
    }
}

pub(super) fn server(
    cfg: &ServerConfig,
    bind: &[std::net::SocketAddr],
    out: &Output,
    stop: &Arc<AtomicBool>,
    signalled: &AtomicBool,
) -> Result<Exit> {
    let fail = |msg: &str, kind, code| {
        failure(Role::Server, &cfg.params, out, &cfg.tuning, msg, kind, code)
    };
    // The server's own rail must be usable before it waits for anyone.
    let shared = ServerShared::new();
    let own =
        cfg.rail.device.is_some() || cfg.rail.netdev.is_some() || cfg.rail.gid_index.is_some();
    if own || !cfg.daemon {
        let full = cfg.rail.device.is_none() || cfg.rail.netdev.is_some();
        let r = session::resolve_request(&cfg.roots, &cfg.rail).map(|(rail, inv)| {
            if full {
                shared.seed(inv);
            }
            rail
        });
        if let Err(e) = r {
            return fail(&explain_local(&e, false), e.kind(), Exit::Usage);
        }
        if !cfg.daemon {
            if let Err(msg) = check_memlock(&cfg.params) {
                return fail(&msg, FailureKind::Memlock, Exit::Usage);
            }
        }
    }
    let listener = match Listener::bind_each(bind) {
        Ok(l) => l,
        Err((at, e)) => {
            let at = at.or_else(|| bind.first().copied());
            let msg = at.map_or_else(|| e.to_string(), |a| bind_error(&e, a));
            return fail(&msg, FailureKind::Unreachable, Exit::Usage);
        }
    };
    let log = logger(out.quiet, "rdmabw server: ");
    let addrs = listener.local_addrs().unwrap_or_else(|_| bind.to_vec());
    // Launchers wait for this line (railsweep's perftest clients): its words are defined once.
    if !out.quiet {
        results::say!(
            "{}{}{}",
            results::rdmabw::SERVER_LISTENING,
            addrs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            if cfg.daemon {
                " (daemon: test after test)"
            } else {
                ""
            }
        );
    }
    if let Some(w) = config::open_daemon_warning(cfg.daemon, cfg.secret.is_some(), &addrs) {
        results::say!("rdmabw server: {w}");
    }
    if cfg.daemon {
        return daemon(cfg, &listener, out, stop, signalled, &log);
    }
    // Connections that never become a test (silent, garbage, another run's secret) do not
    // end a one-test server: it keeps waiting for its client.
    match session::serve_first(cfg, &listener, &shared, stop, &log) {
        Ok(None) => {
            results::say!("rdmabw: interrupted while waiting for a client");
            Ok(Exit::Interrupted)
        }
        Err(e) => fail(
            &format!("accepting a connection: {e}"),
            FailureKind::Unreachable,
            Exit::Failed,
        ),
        Ok(Some(Ok(o))) => print_outcome(&o, out),
        Ok(Some(Err(e))) => {
            let msg = match &e {
                SessionError::Local(l) => explain_local(l, false),
                e => for_log(&e.to_string(), LOGGED_ERROR_CHARS),
            };
            fail(&msg, e.kind(), Exit::of_session(&e))
        }
    }
}

/// A daemon's report of one test as one JSON line on stdout; a daemon outlives the reader of
/// its stdout, so a failure to print is logged (a reader gone, not even that) and it goes on.
fn json_line_or_log(rep: &impl serde::Serialize, peer: impl std::fmt::Display, log: &Log) {
    match stdout::json_line(rep) {
        Err(e) if !exit::is_broken_pipe(&e) => log(&format!(
            "[{peer}] cannot print the report: {}",
            exit::message(&e)
        )),
        _ => {}
    }
}

/// The most characters of a test's error a server logs (it may quote what the peer sent).
const LOGGED_ERROR_CHARS: usize = 1024;

fn daemon(
    cfg: &ServerConfig,
    listener: &Listener,
    out: &Output,
    stop: &Arc<AtomicBool>,
    signalled: &AtomicBool,
    log: &Log,
) -> Result<Exit> {
    let d = Daemon::new(cfg.clone());
    let out2 = out.clone();
    let log2 = Arc::clone(log);
    let on_test: OnTest = Arc::new(move |peer, r| match r {
        Ok(o) if o.params.latency => {
            let rep = lat::report(o, None);
            if let Some(last) = rep.results.last() {
                log2(&format!(
                    "[{peer}] done: latency on {} <- {}: {} B typical {:.2} us, p99 {:.2} us",
                    o.rail.device,
                    for_log(&o.remote.host, PEER_TEXT_CHARS),
                    last.msg_size_bytes,
                    last.t_typical_us,
                    last.p99_us
                ));
            }
            if out2.format == Format::Json {
                json_line_or_log(&rep, peer, &log2);
            }
        }
        Ok(o) => {
            let rep = report::report(o, &out2);
            if let Some(last) = rep.results.last() {
                log2(&format!(
                    "[{peer}] done: {} on {} <- {} ({}): {} B average {:.3} Gb/s",
                    o.rail.device,
                    o.rail.netdev.as_deref().unwrap_or("-"),
                    for_log(&o.remote.host, PEER_TEXT_CHARS),
                    for_log(&o.remote.device, PEER_TEXT_CHARS),
                    last.msg_size_bytes,
                    last.bw_avg_gbps
                ));
            }
            if out2.format == Format::Json {
                json_line_or_log(&rep, peer, &log2);
            }
        }
        // Before admission nothing is logged: what the peer sent stays out of the log, and
        // a flood of such connections cannot fill it.
        Err(SessionError::NotAdmitted(_)) => {}
        Err(e) => log2(&format!(
            "[{peer}] test failed: {}",
            for_log(&e.to_string(), LOGGED_ERROR_CHARS)
        )),
    });
    d.run(listener, stop, log, &on_test).context("serving")?;
    // SIGINT/SIGTERM is an interruption (130), as for every command; the end of standard input
    // (--exit-on-stdin-eof) is the launcher's way to say it is done (0).
    if signalled.load(Ordering::SeqCst) {
        log("stopped by a signal");
        Ok(Exit::Interrupted)
    } else {
        log("stopped");
        Ok(Exit::Ok)
    }
}
