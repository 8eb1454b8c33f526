//! The command line resolved into one validated [`Config`] before any work starts, a concern a
//! file: the agreed parameters ([`params`]), this side's tuning ([`tuning`]), the output
//! ([`output`]), a server's addresses, limits and secret ([`server`]), GPU memory ([`gpu`]) and
//! what is read of the system ([`system`]). Every mistake is a [`Usage`] error (exit 2) that
//! names the flag and says what would work; the values' types and ranges were checked by the
//! flags' value parsers already.

mod gpu;
mod output;
mod params;
mod server;
mod system;
#[cfg(test)]
mod tests;
mod tuning;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bench_core::control::{PhaseTimeouts, RunSecret, WatchConfig};
use bench_core::perftest::ReportUnit;
use bench_core::rails::RailRequest;
use bench_core::session::{ClientConfig, PeerChoice, ServerConfig};
use bench_core::sysfs::SysRoots;
use results::rdmabw::flags::ServerRailFlags;

use crate::cli::{
    BwArgs, Cli, Cmd, CountersCmd, LatArgs, PeerArg, ProbeCmd, RailsCmd, ServerArgs, TestArgs,
};
use crate::exit::{usage, Usage};

pub use gpu::{GpusConfig, GpusMode};
pub use output::{Format, Output};
pub use server::{open_daemon_warning, SecretInput, SECRET_ENV};
pub use system::{host_name, memlock_needed_bytes, sys_roots};

/// What to do.
#[derive(Debug)]
pub enum Config {
    Client(Box<ClientConfig>, Output),
    Server {
        cfg: Box<ServerConfig>,
        bind: Vec<SocketAddr>,
        out: Output,
        /// Stop at the end of standard input (`--exit-on-stdin-eof`).
        exit_on_stdin_eof: bool,
    },
    Devices {
        json: bool,
        root: Option<PathBuf>,
    },
    Gpus(GpusConfig),
    Rails(RailsCmd),
    Counters(CountersCmd),
    Probe(ProbeCmd),
    Batch {
        /// The secret every test presents (the input's first line, or RDMABW_SECRET).
        secret: Option<RunSecret>,
        /// Whether the input's first line is the secret (`--secret-stdin`).
        secret_first: bool,
    },
}

/// One test as the command line asks for it, whichever command did: the role, and the flag
/// groups that command composes (a group it lacks is `None`).
struct TestRequest {
    /// The server to test against: a client; `None`: a server.
    host: Option<String>,
    test: TestArgs,
    /// A bandwidth test's flags; `None`: `rdmabw lat`.
    bw: Option<BwArgs>,
    /// The server's end of the rail, where the command takes it.
    server_rail: Option<ServerRailFlags>,
    /// A server's flags, where the command takes them.
    server: Option<ServerArgs>,
    /// `rdmabw lat`'s own flags.
    lat: Option<LatArgs>,
}

/// Resolves the command line; a secret comes from `secrets`.
pub fn resolve(cli: Cli, secrets: &mut SecretInput<'_>) -> Result<Config, Usage> {
    let req = match cli.cmd {
        Some(Cmd::Devices(d)) => {
            return Ok(Config::Devices {
                json: d.json,
                root: d.root,
            })
        }
        Some(Cmd::Gpus(g)) => return gpu::gpus_config(g).map(Config::Gpus),
        Some(Cmd::Rails(r)) => return Ok(Config::Rails(r)),
        Some(Cmd::Counters(c)) => return Ok(Config::Counters(c)),
        Some(Cmd::Probe(p)) => return Ok(Config::Probe(p)),
        Some(Cmd::Batch(b)) => {
            // The tests' lines follow the secret's: the caller reads it from the same input.
            let secret = if b.secret_stdin {
                None
            } else {
                secrets.secret(false)?
            };
            return Ok(Config::Batch {
                secret,
                secret_first: b.secret_stdin,
            });
        }
        Some(Cmd::Lat(l)) => TestRequest {
            host: l.host,
            test: l.test,
            bw: None,
            server_rail: Some(l.server_rail),
            server: Some(l.server),
            lat: Some(l.lat),
        },
        Some(Cmd::Server(s)) => TestRequest {
            host: None,
            test: s.test,
            bw: Some(s.bw),
            server_rail: None,
            server: Some(s.server),
            lat: None,
        },
        Some(Cmd::Client(c)) => TestRequest {
            host: Some(c.host),
            test: c.test,
            bw: Some(c.bw),
            server_rail: Some(c.server_rail),
            server: None,
            lat: None,
        },
        None => TestRequest {
            host: cli.host,
            test: cli.test,
            bw: Some(cli.bw),
            server_rail: Some(cli.server_rail),
            server: Some(cli.server),
            lat: None,
        },
    };
    resolve_test(req, secrets)
}

/// Resolves one test: the parameters, this side's tuning and the output, then the role's own.
fn resolve_test(req: TestRequest, secrets: &mut SecretInput<'_>) -> Result<Config, Usage> {
    let t = &req.test;
    let lat = req.lat.is_some();
    // A latency test takes no bandwidth flag: resolved, they are their defaults.
    let bw = req.bw.unwrap_or_default();
    let (params, pinned) = if lat {
        params::lat_params(t)?
    } else {
        params::test_params(t, &bw)?
    };
    let tuning = tuning::tuning(t, &bw, &params.sizes, lat)?;
    let out = output::output(t, &bw, req.lat)?;
    let r = &t.rail.rail;
    let rail = RailRequest {
        device: r.ib_dev.clone(),
        netdev: r.netdev.clone(),
        port: r.ib_port,
        gid_index: r.gid_index,
    };
    let ctl = &t.control;
    let secret = secrets.secret(ctl.secret_stdin)?;
    let Some(host) = req.host else {
        // A server: the server's end of the rail is its own rail flags.
        if let Some(sr) = &req.server_rail {
            for (set, flag) in [
                (sr.server_dev.is_some(), "--server-dev"),
                (sr.server_netdev.is_some(), "--server-netdev"),
                (sr.server_gid_index.is_some(), "--server-gid-index"),
            ] {
                if set {
                    return usage(format!(
                        "{flag} is a client flag (it tells the server which rail to use); on the \
                         server use -d/--ib-dev, --netdev or -x"
                    ));
                }
            }
        }
        let s = req
            .server
            .ok_or_else(|| Usage("this command runs no server: give HOST".into()))?;
        if s.exit_on_stdin_eof && !s.daemon {
            return usage(
                "--exit-on-stdin-eof applies to --daemon only (a one-test server ends after its test): add --daemon or drop it",
            );
        }
        if s.daemon && (out.min_gbps.is_some() || out.min_line_rate_pct.is_some()) {
            return usage(
                "--min-gbps/--min-line-rate-pct do not apply to --daemon: give them to each client",
            );
        }
        let limits = server::limits(&s)?;
        if limits.max_qps < params.qps && pinned.qps {
            return usage(format!(
                "-q {} is more than --max-qps {}: raise --max-qps",
                params.qps, limits.max_qps
            ));
        }
        let bind = server::bind_addrs(&s.bind, ctl.port)?;
        return Ok(Config::Server {
            cfg: Box::new(ServerConfig {
                rail,
                params,
                pinned,
                tuning,
                timeouts: PhaseTimeouts::default(),
                watch: WatchConfig::default(),
                host: host_name(),
                roots: SysRoots::default(),
                daemon: s.daemon,
                secret,
                limits,
                peer: peer_choice(ctl.peer),
                unit: report_unit(t.output.report_gbits),
            }),
            bind,
            out,
            exit_on_stdin_eof: s.exit_on_stdin_eof,
        });
    };
    // A client, of a command that is a server without HOST: the server's flags are refused.
    if let Some(flag) = req.server.as_ref().and_then(|s| s.given().first().copied()) {
        return usage(match flag {
            "--daemon" => {
                "--daemon is a server flag: run `rdmabw server --daemon` (no HOST)".into()
            }
            "--exit-on-stdin-eof" => "--exit-on-stdin-eof is a server flag: run `rdmabw server \
                                      --daemon --exit-on-stdin-eof`"
                .into(),
            flag => format!(
                "{flag} is a server flag (the server's limits and addresses): give it to `rdmabw \
                 server`"
            ),
        });
    }
    if host.trim().is_empty() {
        return usage("HOST is empty: give the server's address, e.g. rdmabw client 10.0.0.2");
    }
    if let Err(why) = system::resolves(&host, ctl.port) {
        return usage(format!(
            "HOST {host}: the name does not resolve here ({why}): give the server's IP address, \
             or a name this pod's resolver knows (a pod IP, a Service, a headless Service's pod \
             name)"
        ));
    }
    let connect = params::seconds("--connect-timeout", ctl.connect_timeout, false)?;
    // The server discovers its rail, opens the device and creates its QPs before it answers
    // the hello: allow for slow hosts (and a daemon busy with other rails).
    let timeouts = PhaseTimeouts {
        connect: Duration::from_secs_f64(connect),
        handshake: Duration::from_secs(30),
        ..PhaseTimeouts::default()
    };
    let sr = req.server_rail.unwrap_or_default();
    Ok(Config::Client(
        Box::new(ClientConfig {
            server: host,
            port: ctl.port,
            rail,
            server_rail: RailRequest {
                device: sr.server_dev,
                netdev: sr.server_netdev,
                port: None,
                gid_index: sr.server_gid_index,
            },
            params,
            tuning,
            timeouts,
            watch: WatchConfig::default(),
            host: host_name(),
            roots: SysRoots::default(),
            secret,
            peer: peer_choice(ctl.peer),
            unit: report_unit(t.output.report_gbits),
        }),
        out,
    ))
}

/// `--peer` as the session takes it.
fn peer_choice(p: PeerArg) -> PeerChoice {
    match p {
        PeerArg::Auto => PeerChoice::Auto,
        PeerArg::Rdmabw => PeerChoice::Rdmabw,
        PeerArg::Perftest => PeerChoice::Perftest,
    }
}

/// The units of the table (`--report_gbits`), which are those of the figures a perftest peer
/// exchanges.
fn report_unit(gbits: bool) -> ReportUnit {
    if gbits {
        ReportUnit::Gbps
    } else {
        ReportUnit::MibPerS
    }
}
