//! rdmabw: RDMA WRITE bandwidth, a drop-in for ib_write_bw.
//!
//! This binary is thin: flags are resolved into a validated [`config::Config`] first, the test
//! itself is `bench_core::session`, and this file prints outcomes and turns them into the
//! process's exit status, which [`exit`] declares and maps:
//!
//! | status | meaning |
//! |---|---|
//! | 0 | it worked; or the reader of standard output went away (broken pipe) |
//! | 1 | it ran but failed, or fell below `--min-gbps` / `--min-line-rate-pct` |
//! | 2 | usage or set-up error (an unreadable sysfs included) |
//! | 130 | interrupted by SIGINT or SIGTERM |
#![forbid(unsafe_code)]

mod cli;
mod config;
mod counters;
mod devices;
mod exit;
mod gpus;
mod lat;
mod output;
mod perftest;
mod probe;
mod rails;
mod stdout;

use std::io::ErrorKind;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};
use bench_core::control::{for_log, ControlError, RejectReason, RunSecret, PEER_TEXT_CHARS};
use bench_core::error::Error;
use bench_core::probe::Memlock;
use bench_core::session::{
    self, ClientConfig, Daemon, Listener, Log, OnTest, Outcome, ServerConfig, ServerShared,
    SessionError,
};
use bench_core::sysfs::SysRoots;
use clap::Parser;
use results::rdmabw::params::TestParams;
use results::rdmabw::report::{BatchEnd, Role, TestStatus};

use crate::config::{Config, Format, Output};
use crate::exit::{Exit, Usage};

fn main() -> ExitCode {
    let mut argv = std::env::args();
    let argv0 = argv.next().unwrap_or_default();
    // Called through a link named ib_write_lat: `rdmabw lat`.
    let args = lat::args_for_name(&argv0, argv.collect());
    if let Err(e) = refuse_unsupported(&args) {
        return ExitCode::from(exit::finish(Err(e.into())).code());
    }
    let cli = match cli::Cli::try_parse_from(std::iter::once(argv0).chain(args)) {
        Ok(c) => c,
        // Help and --version exit 0; usage errors exit 2 (clap's convention matches ours).
        Err(e) => e.exit(),
    };
    ExitCode::from(exit::finish(run(cli)).code())
}

/// The first perftest flag that rdmabw (or `rdmabw lat`) refuses by name, as a usage error.
fn refuse_unsupported(args: &[String]) -> Result<(), Usage> {
    if args.first().is_some_and(|a| a == "lat") {
        lat::refuse_unsupported(args)
    } else {
        perftest::refuse_unsupported(args)
    }
}

/// Resolves the flags and runs the subcommand they name.
fn run(cli: cli::Cli) -> Result<Exit> {
    let mut read_line = || {
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) => Err("standard input is empty".to_string()),
            Ok(_) => Ok(line),
            Err(e) => Err(e.to_string()),
        }
    };
    let cfg = config::resolve(
        cli,
        &mut config::SecretInput {
            env: std::env::var(config::SECRET_ENV).ok(),
            stdin_line: &mut read_line,
        },
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    if let Err(e) = install_signals(&stop) {
        results::say!("rdmabw: warning: cannot catch SIGINT/SIGTERM: {e}");
    }
    match cfg {
        Config::Devices { json, root } => devices(json, root.as_deref()),
        Config::Gpus(g) => gpus::run(&g),
        Config::Rails(r) => rails::run(&r),
        Config::Counters(c) => counters::run(&c),
        Config::Probe(p) => probe::run(&p),
        Config::Client(c, out) => client(&c, &out, &stop),
        Config::Batch {
            secret,
            secret_first,
        } => batch(std::io::stdin().lock(), secret, secret_first, &stop),
        Config::Server {
            cfg,
            bind,
            out,
            exit_on_stdin_eof,
        } => {
            if exit_on_stdin_eof {
                stop_at_stdin_eof(&stop)?;
            }
            server(&cfg, &bind, &out, &stop)
        }
    }
}

/// SIGINT/SIGTERM raise `stop`; a test then ends within milliseconds and tells its peer. If the
/// process is still there 6 s later (blocked in a set-up phase), it exits anyway. The thread
/// sleeps in the signal iterator until a signal comes: no periodic wake-up during the window.
fn install_signals(stop: &Arc<AtomicBool>) -> std::io::Result<()> {
    let sigs = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM];
    for sig in sigs {
        signal_hook::flag::register(sig, Arc::clone(stop))?;
    }
    let mut signals = signal_hook::iterator::Signals::new(sigs)?;
    thread::Builder::new()
        .name("rdmabw-signal".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                exit_after_grace("interrupted");
            }
        })?;
    Ok(())
}

/// After `stop` was raised: give the tests 6 s to end and tell their peers, then exit as
/// interrupted if the process is still there (blocked in a set-up phase), saying `why`.
fn exit_after_grace(why: &str) -> ! {
    thread::sleep(Duration::from_secs(6));
    results::say!("rdmabw: {why}");
    std::process::exit(i32::from(Exit::Interrupted.code()));
}

/// `--exit-on-stdin-eof`: a thread reads standard input (what follows the secret line) to its
/// end, then raises `stop` as SIGTERM would, and exits after 6 s if the process is still there
/// (as after a signal). A launcher that holds the input open ends the daemon by closing it, and
/// the daemon does not outlive a launcher that died.
fn stop_at_stdin_eof(stop: &Arc<AtomicBool>) -> std::io::Result<()> {
    let stop = Arc::clone(stop);
    thread::Builder::new()
        .name("rdmabw-stdin".into())
        .spawn(move || {
            use std::io::Read;
            let mut sink = [0u8; 4096];
            let mut input = std::io::stdin().lock();
            loop {
                match input.read(&mut sink) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => {
                        results::say!("rdmabw server: cannot read standard input ({e}): stopping");
                        break;
                    }
                }
            }
            results::say!("rdmabw server: standard input closed: stopping");
            stop.store(true, Ordering::SeqCst);
            exit_after_grace("stopped at the end of standard input");
        })?;
    Ok(())
}

fn logger(quiet: bool, prefix: &'static str) -> Log {
    if quiet {
        session::quiet()
    } else {
        Arc::new(move |m: &str| results::say!("{prefix}{m}"))
    }
}

/// `rdmabw devices`; with `root`, the fixture tree under it, and no device is opened.
fn devices(json: bool, root: Option<&std::path::Path>) -> Result<Exit> {
    stdout::listing(json, &devices::collect(root)?, devices::render)?;
    Ok(Exit::Ok)
}

/// Says which flag a local set-up error is about, and what would work.
fn explain_local(e: &Error, server_side: bool) -> String {
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
fn check_memlock(params: &TestParams) -> Result<(), String> {
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

fn print_outcome(o: &Outcome, out: &Output) -> Result<Exit> {
    if o.params.latency {
        return lat::print_outcome(o, out);
    }
    let rep = output::report(o, out);
    if out.format == Format::Table && !out.quiet {
        results::say_raw!("{}", output::preamble(o));
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
    output::print(&rep, out).context("writing the results")?;
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
fn failure(
    role: Role,
    params: &TestParams,
    out: &Output,
    tuning: &results::rdmabw::params::LocalTuning,
    msg: &str,
    code: Exit,
) -> Result<Exit> {
    results::say!("rdmabw: error: {msg}");
    if out.format == Format::Json {
        stdout::json_line(&output::failed_report(role, params, tuning, msg))?;
    }
    Ok(code)
}

fn client(c: &ClientConfig, out: &Output, stop: &Arc<AtomicBool>) -> Result<Exit> {
    let fail = |msg: &str, code| failure(Role::Client, &c.params, out, &c.tuning, msg, code);
    if let Err(msg) = check_memlock(&c.params) {
        return fail(&msg, Exit::Usage);
    }
    let log = logger(out.quiet, "rdmabw: ");
    if c.params.run_infinitely {
        return endless(c, out, stop, &log);
    }
    match session::run_client(c, stop, &log) {
        Ok(o) => print_outcome(&o, out),
        Err(e) => fail(&explain(&e, c.port), Exit::of_session(&e)),
    }
}

/// `--run_infinitely`: a row per measured window on stdout as it closes (the table, a BwReport
/// per line, or CSV rows after one header) until SIGINT/SIGTERM, then exit 130. A reader of
/// stdout that goes away ends the test too (exit 0, as for every other output).
fn endless(c: &ClientConfig, out: &Output, stop: &Arc<AtomicBool>, log: &Log) -> Result<Exit> {
    let mut stream = output::Stream::new(out);
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
            Exit::of_session(&e),
        ),
        Ok(o) => print_outcome(&o, out),
    }
}

/// `rdmabw batch`: each input line is the argument vector of one client test, run here in
/// turn; after each, the [`BatchEnd`] line on stdout and on stderr. Exit 0 at end of input (or
/// when standard output's reader goes away), 130 when interrupted, 2 when the input cannot be
/// read.
fn batch(
    input: impl std::io::BufRead,
    mut secret: Option<RunSecret>,
    secret_first: bool,
    stop: &Arc<AtomicBool>,
) -> Result<Exit> {
    let mut lines = input.lines();
    if secret_first {
        let first = lines
            .next()
            .transpose()
            .map_err(|e| Usage(format!("batch: cannot read standard input: {e}")))?
            .unwrap_or_default();
        secret = Some(RunSecret::given(&first).map_err(|e| {
            Usage(format!(
                "batch --secret-stdin: the first line of standard input is not a usable secret: \
                 {e}"
            ))
        })?);
    }
    for (n, line) in lines.enumerate() {
        let line = line.map_err(|e| Usage(format!("batch: cannot read standard input: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let code = exit::finish(batch_test(&line, secret.as_ref(), stop));
        let end = BatchEnd {
            test: n as u64 + 1,
            exit_code: i32::from(code.code()),
        }
        .line();
        stdout::line(&end)?;
        results::say!("{end}");
        if stop.load(Ordering::Relaxed) {
            return Ok(Exit::Interrupted);
        }
    }
    Ok(Exit::Ok)
}

/// One line of `rdmabw batch`: parse it as `rdmabw ARGS...` would be, refuse all but client
/// tests, run it.
fn batch_test(line: &str, secret: Option<&RunSecret>, stop: &Arc<AtomicBool>) -> Result<Exit> {
    let args: Vec<String> = serde_json::from_str(line).map_err(|e| {
        Usage(format!(
            "batch: each line must be a JSON array of strings, the arguments of `rdmabw \
             client` (e.g. [\"client\",\"--json\",\"10.0.0.2\"]): {e}"
        ))
    })?;
    refuse_unsupported(&args)?;
    let cli = match cli::Cli::try_parse_from(std::iter::once("rdmabw".to_string()).chain(args)) {
        Ok(c) => c,
        Err(e) => {
            results::say_raw!("{}", e.render());
            return Ok(Exit::Usage);
        }
    };
    // The batch's input is the tests' lines: a test cannot read a secret from it.
    let mut no_stdin = || Err("give --secret-stdin to `rdmabw batch` itself".to_string());
    let mut secrets = config::SecretInput {
        env: std::env::var(config::SECRET_ENV).ok(),
        stdin_line: &mut no_stdin,
    };
    match config::resolve(cli, &mut secrets)? {
        Config::Client(mut c, out) => {
            if let Some(s) = secret {
                c.secret = Some(s.clone());
            }
            client(&c, &out, stop)
        }
        _ => Err(Usage("batch runs client tests only (`client ... HOST`)".into()).into()),
    }
}

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

fn server(
    cfg: &ServerConfig,
    bind: &[std::net::SocketAddr],
    out: &Output,
    stop: &Arc<AtomicBool>,
) -> Result<Exit> {
    let fail = |msg: &str, code| failure(Role::Server, &cfg.params, out, &cfg.tuning, msg, code);
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
            return fail(&explain_local(&e, false), Exit::Usage);
        }
        if !cfg.daemon {
            if let Err(msg) = check_memlock(&cfg.params) {
                return fail(&msg, Exit::Usage);
            }
        }
    }
    let listener = match Listener::bind_each(bind) {
        Ok(l) => l,
        Err((at, e)) => {
            let at = at.or_else(|| bind.first().copied());
            let msg = at.map_or_else(|| e.to_string(), |a| bind_error(&e, a));
            return fail(&msg, Exit::Usage);
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
        return daemon(cfg, &listener, out, stop, &log);
    }
    // Connections that never become a test (silent, garbage, another run's secret) do not
    // end a one-test server: it keeps waiting for its client.
    match session::serve_first(cfg, &listener, &shared, stop, &log) {
        Ok(None) => {
            results::say!("rdmabw: interrupted while waiting for a client");
            Ok(Exit::Interrupted)
        }
        Err(e) => fail(&format!("accepting a connection: {e}"), Exit::Failed),
        Ok(Some(Ok(o))) => print_outcome(&o, out),
        Ok(Some(Err(e))) => {
            let msg = match &e {
                SessionError::Local(l) => explain_local(l, false),
                e => for_log(&e.to_string(), LOGGED_ERROR_CHARS),
            };
            fail(&msg, Exit::of_session(&e))
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
            let rep = output::report(o, &out2);
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
    log("stopped");
    Ok(Exit::Ok)
}
