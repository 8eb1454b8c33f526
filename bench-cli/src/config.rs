//! Raw flags resolved into one validated [`Config`] before any work starts. Every mistake is a
//! [`Usage`] error (exit 2) that names the flag and says what would work.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bench_core::control::{PhaseTimeouts, RunSecret, WatchConfig};
use bench_core::perftest::ReportUnit;
use bench_core::rails::RailRequest;
use bench_core::session::{ClientConfig, PeerChoice, Pinned, ServerConfig, ServerLimits};
use bench_core::sysfs::SysRoots;
use results::rdmabw::params::{
    Connection, LocalTuning, PollMode, RateLimit, RateUnit, Sizes, TestLength, TestParams,
    MAX_SECONDS,
};

use crate::cli::{Cli, Cmd, CountersCmd, ProbeCmd, RailsCmd, TestArgs};
use crate::exit::{usage, Usage};

/// The largest message: the buffer rdmabw registers holds two of them (the bound a server
/// checks hellos against too).
pub use results::rdmabw::params::MAX_MSG_BYTES;
/// The top of an `-a` sweep, as ib_write_bw.
pub const SWEEP_MAX_BYTES: u64 = 1 << 23;
/// ib_write_bw's default iteration count.
pub const DEFAULT_ITERS: u64 = 5000;

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
fn resolves(host: &str, port: u16) -> Result<(), String> {
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

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// ib_write_bw's table.
    Table,
    /// One BwReport.
    Json,
    /// CSV rows.
    Csv,
}

/// Output settings shared by both roles.
#[derive(Debug, Clone)]
pub struct Output {
    pub format: Format,
    pub gbits: bool,
    pub min_gbps: Option<f64>,
    pub min_line_rate_pct: Option<f64>,
    pub quiet: bool,
    /// `-W LIST`: the counters to print after the table (empty: every one that moved).
    pub report_counters: Option<Vec<String>>,
    /// `--out_json`/`--out_json_file`: where the JSON document also goes.
    pub json_file: Option<std::path::PathBuf>,
    /// `-y`: the least message rate, Mpps.
    pub min_mpps: Option<f64>,
    /// `--cpu_util`: a CPU column in the table.
    pub cpu_util: bool,
    /// `--report-both`: each direction's table after the sum.
    pub report_both: bool,
    /// `--output`: only this figure on stdout.
    pub figure: Option<crate::cli::FigureArg>,
    /// `rdmabw lat`: its output flags (`None` for bandwidth).
    pub lat: Option<crate::lat::LatArgs>,
}

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
        root: Option<std::path::PathBuf>,
    },
    Gpus(crate::gpus::GpusConfig),
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

/// The environment variable that carries a run's secret (see `--secret-stdin`).
pub const SECRET_ENV: &str = "RDMABW_SECRET";

/// Where a command's secret comes from: `--secret-stdin` reads `stdin_line`, else the
/// environment's [`SECRET_ENV`]; neither: no secret.
pub struct SecretInput<'a> {
    /// The value of [`SECRET_ENV`], if set.
    pub env: Option<String>,
    /// Reads the first line of standard input (only called for `--secret-stdin`).
    pub stdin_line: &'a mut dyn FnMut() -> Result<String, String>,
}

impl SecretInput<'_> {
    fn secret(&mut self, from_stdin: bool) -> Result<Option<RunSecret>, Usage> {
        let (text, from) = if from_stdin {
            let line = (self.stdin_line)()
                .map_err(|e| Usage(format!("--secret-stdin: cannot read the secret: {e}")))?;
            (line, "--secret-stdin: the first line of standard input")
        } else if let Some(v) = &self.env {
            (v.clone(), SECRET_ENV)
        } else {
            return Ok(None);
        };
        RunSecret::given(&text)
            .map(Some)
            .map_err(|e| Usage(format!("{from} is not a usable secret: {e}")))
    }
}

/// What `rdmabw server --daemon` without a secret says when it listens on any of `bound` that
/// is not a loopback address (`0.0.0.0` included): there, any host that reaches it can run
/// tests on this node's RDMA devices. `None` for a one-test server, with a secret, or on
/// loopback only.
pub fn open_daemon_warning(daemon: bool, has_secret: bool, bound: &[SocketAddr]) -> Option<String> {
    if !daemon || has_secret {
        return None;
    }
    let open: Vec<String> = bound
        .iter()
        .filter(|a| !a.ip().is_loopback())
        .map(ToString::to_string)
        .collect();
    (!open.is_empty()).then(|| {
        format!(
            "warning: --daemon without a secret on {}: any host that reaches it can run tests \
             on this node's RDMA devices. Give it one, and the same to its clients: \
             --secret-stdin (the first line of standard input) or RDMABW_SECRET, {} hex \
             digits or more (openssl rand -hex 16); or listen on loopback only (--bind \
             127.0.0.1)",
            open.join(", "),
            RunSecret::MIN_LEN
        )
    })
}

/// `ulimit -l` bytes a test needs: two halves of the largest message, page-rounded (with
/// `--data_validation`, of a slot per QP holding every size), plus slack for queues.
pub fn memlock_needed_bytes(p: &TestParams) -> u64 {
    bench_core::engine::buffer_bytes(p).saturating_add(1 << 20)
}

pub use results::rdmabw::flags::parse_size;

fn seconds(flag: &str, v: f64, allow_zero: bool) -> Result<f64, Usage> {
    if !v.is_finite() || v < 0.0 || (!allow_zero && v == 0.0) || v > MAX_SECONDS {
        return usage(format!(
            "{flag} {v}: give a {} number of seconds, at most {MAX_SECONDS} (a week) (e.g. \
             {flag} 5)",
            if allow_zero {
                "non-negative"
            } else {
                "positive"
            }
        ));
    }
    Ok(v)
}

/// The timing of a timed test. `--window S` measures S seconds, with the warm-up before and
/// the cool-down after it. `-D S` is ib_write_bw's: S seconds in all, of which the first and
/// the last `-f` seconds (default S/4 in whole seconds, as perftest computes it) are warm-up
/// and cool-down, so that the window, and the `#iterations` of the table, are perftest's.
fn duration_length(a: &TestArgs, margin: Option<f64>) -> Result<TestLength, Usage> {
    // An RC queue pair writes at full rate from its first message: the first completion comes
    // one message and one round trip after the first post (a NIC: microseconds; the lab: about
    // 3 ms), and completions then follow at the link's rate. In the lab, six alternating rounds
    // of -D 3 with 0, 0.05 and 0.2 s of warm-up averaged 0.303, 0.305 and 0.296 Gb/s; without
    // warm-up the start shows in p1 (one of six runs: 0.04 Gb/s). 0.05 s leaves that start out.
    // Both directions: 0.2 s, so that the peer's traffic (started a moment apart) is flowing
    // when this side's window opens.
    let default_warmup = if a.flags.transport.bidirectional {
        0.2
    } else {
        0.05
    };
    // One direction: the window closes on this side's completions, with the queue still full,
    // so nothing after it changes the figure. Both directions: keep loading the link while the
    // peer's window (started a moment apart) closes.
    let default_cooldown = if a.flags.transport.bidirectional {
        0.25
    } else {
        0.0
    };
    let warmup = a
        .flags
        .warmup
        .map(|w| seconds("--warmup", w, true))
        .transpose()?;
    let cooldown = a
        .flags
        .cooldown
        .map(|c| seconds("--cooldown", c, true))
        .transpose()?;
    if let Some(w) = a.window {
        return Ok(TestLength::Duration {
            duration_s: seconds("--window", w, false)?,
            warmup_s: warmup.or(margin).unwrap_or(default_warmup),
            cooldown_s: cooldown.or(margin).unwrap_or(default_cooldown),
        });
    }
    let total = seconds("-D/--duration", a.duration.unwrap_or_default(), false)?;
    let margin = margin.unwrap_or((total / 4.0).floor());
    // perftest's margin of 0 (-D 1 to 3) measures all of -D from the first post; rdmabw still
    // leaves its short start out, inside the -D.
    let (w, c) = if margin > 0.0 {
        (margin, margin)
    } else {
        (default_warmup, default_cooldown)
    };
    let (w, c) = (warmup.unwrap_or(w), cooldown.unwrap_or(c));
    let measured = total - w - c;
    if measured <= 0.0 {
        return usage(format!(
            "-D {total} with {w} s of warm-up and {c} s of cool-down (-f/--warmup/--cooldown) \
             leaves nothing to measure: -D is the whole test, as in ib_write_bw; give a longer \
             -D, a smaller -f, or --window {total} to measure {total} s"
        ));
    }
    Ok(TestLength::Duration {
        duration_s: measured,
        warmup_s: w,
        cooldown_s: c,
    })
}

fn at_least_one(flag: &str, v: Option<u32>, default: u32, example: u32) -> Result<u32, Usage> {
    match v {
        Some(0) => usage(format!(
            "{flag} 0: it must be at least 1 (e.g. {flag} {example})"
        )),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

/// Which role the command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Client,
    Server,
}

/// Resolves the command line; a secret comes from `secrets`.
pub fn resolve(cli: Cli, secrets: &mut SecretInput<'_>) -> Result<Config, Usage> {
    // `rdmabw lat`: its own flags, and ib_write_lat's defaults on the test flags.
    let mut lat = None;
    let (role, args, host) = match cli.cmd {
        Some(Cmd::Devices(d)) => {
            return Ok(Config::Devices {
                json: d.json,
                root: d.root,
            })
        }
        Some(Cmd::Gpus(g)) => return crate::gpus::gpus_config(g).map(Config::Gpus),
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
        Some(Cmd::Lat(l)) => {
            lat = Some(l.lat);
            let role = if l.host.is_some() {
                Role::Client
            } else {
                Role::Server
            };
            (role, l.test, l.host)
        }
        Some(Cmd::Server(s)) => (Role::Server, s.test, None),
        Some(Cmd::Client(c)) => (Role::Client, c.test, Some(c.host)),
        None => match cli.host {
            Some(h) => (Role::Client, cli.test, Some(h)),
            None => (Role::Server, cli.test, None),
        },
    };
    let a = args;
    if lat.is_some() {
        crate::lat::refuse_test_flags(&a)?;
    }
    let (params, pinned) = test_params(&a)?;
    let (params, pinned) = match lat {
        Some(_) => crate::lat::params(params, pinned)?,
        None => (params, pinned),
    };
    let mut tuning = tuning(&a, &params.sizes)?;
    if lat.is_some() && a.flags.transport.inline_size.is_none() {
        tuning.inline_bytes = crate::lat::DEFAULT_INLINE;
    }
    let mut out = output(&a, lat.is_some())?;
    out.lat = lat;
    let rail = RailRequest {
        device: a.ib_dev.clone(),
        netdev: a.netdev.clone(),
        port: a.ib_port,
        gid_index: a.gid_index,
    };
    if a.ib_port == Some(0) {
        return usage("-i/--ib-port 0: ports are numbered from 1 (e.g. -i 1)");
    }
    let host_name = host_name();
    let secret = secrets.secret(a.secret_stdin)?;
    match role {
        Role::Client => {
            if a.daemon {
                return usage("--daemon is a server flag: run `rdmabw server --daemon` (no HOST)");
            }
            if a.exit_on_stdin_eof {
                return usage(
                    "--exit-on-stdin-eof is a server flag: run `rdmabw server --daemon --exit-on-stdin-eof`",
                );
            }
            // Set to other than their defaults (the values clap fills in when they are absent).
            let d = ServerLimits::DEFAULT;
            for (set, flag) in [
                (a.max_qps != d.max_qps, "--max-qps"),
                (
                    a.max_buffer != crate::cli::MAX_BUFFER_DEFAULT,
                    "--max-buffer",
                ),
                (a.max_tests != d.max_tests, "--max-tests"),
                (a.bind != crate::cli::BIND_DEFAULT, "--bind"),
            ] {
                if set {
                    return usage(format!(
                        "{flag} is a server flag (the server's limits and addresses): give it to \
                         `rdmabw server`"
                    ));
                }
            }
            let host = host.unwrap_or_default();
            if host.trim().is_empty() {
                return usage(
                    "HOST is empty: give the server's address, e.g. rdmabw client 10.0.0.2",
                );
            }
            if let Err(why) = resolves(&host, a.port) {
                return usage(format!(
                    "HOST {host}: the name does not resolve here ({why}): give the server's IP \
                     address, or a name this pod's resolver knows (a pod IP, a Service, a \
                     headless Service's pod name)"
                ));
            }
            let connect = seconds("--connect-timeout", a.connect_timeout, false)?;
            // The server discovers its rail, opens the device and creates its QPs before it
            // answers the hello: allow for slow hosts (and a daemon busy with other rails).
            let timeouts = PhaseTimeouts {
                connect: Duration::from_secs_f64(connect),
                handshake: Duration::from_secs(30),
                ..PhaseTimeouts::default()
            };
            Ok(Config::Client(
                Box::new(ClientConfig {
                    server: host,
                    port: a.port,
                    rail,
                    server_rail: RailRequest {
                        device: a.server_dev.clone(),
                        netdev: a.server_netdev.clone(),
                        port: None,
                        gid_index: a.server_gid_index,
                    },
                    params,
                    tuning,
                    timeouts,
                    watch: WatchConfig::default(),
                    host: host_name,
                    roots: SysRoots::default(),
                    secret,
                    peer: peer_choice(a.peer),
                    unit: report_unit(a.report_gbits),
                }),
                out,
            ))
        }
        Role::Server => {
            for (set, flag) in [
                (a.server_dev.is_some(), "--server-dev"),
                (a.server_netdev.is_some(), "--server-netdev"),
                (a.server_gid_index.is_some(), "--server-gid-index"),
            ] {
                if set {
                    return usage(format!(
                        "{flag} is a client flag (it tells the server which rail to use); on the \
                         server use -d/--ib-dev, --netdev or -x"
                    ));
                }
            }
            if a.exit_on_stdin_eof && !a.daemon {
                return usage(
                    "--exit-on-stdin-eof applies to --daemon only (a one-test server ends after its test): add --daemon or drop it",
                );
            }
            if a.daemon && (out.min_gbps.is_some() || out.min_line_rate_pct.is_some()) {
                return usage(
                    "--min-gbps/--min-line-rate-pct do not apply to --daemon: give them to each client",
                );
            }
            let limits = ServerLimits {
                max_qps: at_least_one("--max-qps", Some(a.max_qps), 0, 64)?,
                max_buffer_bytes: parse_size(&a.max_buffer).filter(|b| *b > 0).ok_or_else(
                    || {
                        Usage(format!(
                            "--max-buffer {}: give a size in bytes, or with K, M or G (e.g. \
                             --max-buffer 2G)",
                            a.max_buffer
                        ))
                    },
                )?,
                max_tests: at_least_one("--max-tests", Some(a.max_tests), 0, 32)?,
            };
            if limits.max_qps < params.qps && pinned.qps {
                return usage(format!(
                    "-q {} is more than --max-qps {}: raise --max-qps",
                    params.qps, limits.max_qps
                ));
            }
            let bind = bind_addrs(&a.bind, a.port)?;
            Ok(Config::Server {
                cfg: Box::new(ServerConfig {
                    rail,
                    params,
                    pinned,
                    tuning,
                    timeouts: PhaseTimeouts::default(),
                    watch: WatchConfig::default(),
                    host: host_name,
                    roots: SysRoots::default(),
                    daemon: a.daemon,
                    secret,
                    limits,
                    peer: peer_choice(a.peer),
                    unit: report_unit(a.report_gbits),
                }),
                bind,
                out,
                exit_on_stdin_eof: a.exit_on_stdin_eof,
            })
        }
    }
}

/// The most addresses `--bind` takes: a node's rails, with room to spare.
const MAX_BIND_ADDRS: usize = 64;

/// `--bind ADDR[,ADDR...]`: each an IP address of this host, duplicates dropped.
fn bind_addrs(list: &str, port: u16) -> Result<Vec<SocketAddr>, Usage> {
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for item in list.split(',').map(str::trim) {
        let ip: IpAddr = item.parse().map_err(|_| {
            Usage(format!(
                "--bind {list}: {item:?} is not an IP address; give addresses of this host, \
                 comma-separated (e.g. --bind 0.0.0.0, or --bind 10.0.1.2,10.0.2.2)"
            ))
        })?;
        let a = SocketAddr::new(ip, port);
        if !addrs.contains(&a) {
            addrs.push(a);
        }
    }
    if addrs.len() > 1 && addrs.iter().any(|a| a.ip().is_unspecified()) {
        return usage(format!(
            "--bind {list}: an unspecified address (0.0.0.0, ::) listens on every address \
             already: give it alone, or only specific addresses"
        ));
    }
    if addrs.len() > MAX_BIND_ADDRS {
        return usage(format!(
            "--bind: {} addresses, at most {MAX_BIND_ADDRS}: listen on 0.0.0.0 instead",
            addrs.len()
        ));
    }
    Ok(addrs)
}

fn test_params(a: &TestArgs) -> Result<(TestParams, Pinned), Usage> {
    let mut pinned = Pinned::default();
    let sizes = match (a.flags.size, a.all) {
        (Some(_), true) => {
            return usage(
                "-s/--size and -a/--all conflict: -a sweeps 2 B .. 8 MiB, -s runs one size",
            )
        }
        (None, true) => {
            pinned.sizes = true;
            Sizes::Sweep {
                max_bytes: SWEEP_MAX_BYTES,
            }
        }
        (Some(n), false) => {
            pinned.sizes = true;
            if n == 0 {
                return usage("-s/--size 0: a message must be at least 1 byte (e.g. -s 65536)");
            }
            if n > MAX_MSG_BYTES {
                return usage(format!(
                    "-s/--size {n}: above the largest buffer rdmabw registers ({MAX_MSG_BYTES} bytes \
                     = 1 GiB per message); use at most -s 1G"
                ));
            }
            Sizes::One { msg_size_bytes: n }
        }
        (None, false) => Sizes::One {
            msg_size_bytes: results::rdmabw::flags::DEFAULT_SIZE_BYTES,
        },
    };
    let margin = a
        .margin
        .map(|m| seconds("-f/--margin", m, true))
        .transpose()?;
    if a.run_infinitely {
        return endless_params(a, sizes, margin, pinned);
    }
    let length = match (a.iters, a.duration.or(a.window)) {
        (Some(_), Some(_)) => {
            return usage(
                "-n/--iters and -D/--duration (or --window) conflict: give a count of writes or seconds",
            )
        }
        (Some(0), None) => return usage("-n/--iters 0: give at least 1 (e.g. -n 5000)"),
        (Some(n), None) => {
            pinned.length = true;
            TestLength::Iterations { iterations: n }
        }
        (None, Some(_)) => {
            pinned.length = true;
            duration_length(a, margin)?
        }
        (None, None) => {
            if a.flags.warmup.is_some() || a.flags.cooldown.is_some() || a.margin.is_some() {
                return usage(
                    "--warmup/--cooldown/-f apply to timed tests: add -D SECONDS or --window SECONDS",
                );
            }
            TestLength::Iterations {
                iterations: DEFAULT_ITERS,
            }
        }
    };
    finish_params(a, sizes, length, pinned)
}

/// `--run_infinitely`: one size, one direction, -D or --window SECONDS the interval, a warm-up
/// before the first window and no cool-down (the windows follow each other).
fn endless_params(
    a: &TestArgs,
    sizes: Sizes,
    margin: Option<f64>,
    mut pinned: Pinned,
) -> Result<(TestParams, Pinned), Usage> {
    let example = "e.g. rdmabw --run_infinitely -D 5 HOST";
    if a.all {
        return usage(format!(
            "--run_infinitely repeats one size: give -s BYTES (or leave it out for 65536), not \
             -a ({example})"
        ));
    }
    if a.flags.transport.bidirectional {
        return usage(format!(
            "--run_infinitely measures one direction: leave out -b ({example})"
        ));
    }
    if a.flags.transport.data_validation {
        return usage(
            "--data_validation checks the bytes when the test ends, and a --run_infinitely test \
             does not end: run --data_validation tests of their own (-D SECONDS)",
        );
    }
    if a.iters.is_some() {
        return usage(format!(
            "-n/--iters and --run_infinitely conflict: --run_infinitely repeats a timed window; \
             give -D SECONDS, the reporting interval ({example})"
        ));
    }
    if a.flags.cooldown.is_some() {
        return usage(
            "--cooldown does not apply to --run_infinitely: its windows follow each other, and \
             SIGINT ends the last one",
        );
    }
    let interval = match (a.duration, a.window) {
        (Some(d), None) => seconds("-D/--duration", d, false)?,
        (None, Some(w)) => seconds("--window", w, false)?,
        _ => {
            return usage(format!(
                "--run_infinitely needs -D SECONDS: a row is printed every -D seconds, as in \
                 ib_write_bw ({example})"
            ))
        }
    };
    let warmup = a
        .flags
        .warmup
        .map(|w| seconds("--warmup", w, true))
        .transpose()?
        .or(margin)
        .unwrap_or(0.05);
    pinned.length = true;
    let length = TestLength::Duration {
        duration_s: interval,
        warmup_s: warmup,
        cooldown_s: 0.0,
    };
    finish_params(a, sizes, length, pinned)
}

/// The parameters both sides agree on, from the sizes and the length.
fn finish_params(
    a: &TestArgs,
    sizes: Sizes,
    length: TestLength,
    mut pinned: Pinned,
) -> Result<(TestParams, Pinned), Usage> {
    if let Some(c) = &a.connection {
        if !c.eq_ignore_ascii_case("rc") {
            return usage(format!(
                "-c/--connection {c}: rdmabw runs RC queue pairs only (use -c RC or leave it out)"
            ));
        }
    }
    pinned.qps = a.flags.qp.is_some();
    pinned.bidirectional = a.flags.transport.bidirectional;
    pinned.run_infinitely = a.run_infinitely;
    pinned.data_validation = a.flags.transport.data_validation;
    let qps = at_least_one("-q/--qp", a.flags.qp, 1, 4)?;
    Ok((
        TestParams {
            sizes,
            length,
            qps,
            connection: Connection::RC,
            bidirectional: a.flags.transport.bidirectional,
            run_infinitely: a.run_infinitely,
            data_validation: a.flags.transport.data_validation,
            latency: false,
        },
        pinned,
    ))
    .map(|(p, mut pin)| {
        pin.traffic_class = a.flags.tclass.is_some();
        pin.service_level = a.flags.transport.sl.is_some();
        pin.hop_limit = a.hop_limit.is_some();
        pin.mtu = a.flags.mtu.is_some();
        (p, pin)
    })
}

/// Messages above this size get a completion each by default, as in ib_write_bw (its
/// `MSG_SIZE_CQ_MOD_LIMIT`).
const CQ_MOD_LIMIT_BYTES: u64 = 8192;

/// ib_write_bw's default CQ moderation: the post list's length with `-l`, else one completion
/// per write for one size above 8 KiB (few completions per second, and a window counted in
/// single writes rather than in blocks of 100: at 64 KiB and 0.25 Gb/s a block of 100 is 0.2 s
/// of traffic), else 100.
fn default_cq_mod(sizes: &Sizes, post_list: Option<u32>) -> u32 {
    match (post_list, sizes) {
        (Some(l), _) if l > 1 => l,
        (_, Sizes::One { msg_size_bytes }) if *msg_size_bytes > CQ_MOD_LIMIT_BYTES => 1,
        _ => 100,
    }
}

fn tuning(a: &TestArgs, sizes: &Sizes) -> Result<LocalTuning, Usage> {
    let d = LocalTuning::default();
    let traffic_class = match a.flags.tclass {
        None => d.traffic_class,
        Some(tc) => u8::try_from(tc).map_err(|_| {
            Usage(format!(
                "--tclass {tc}: the traffic class is one byte, 0-255 (e.g. --tclass 41 for DSCP 10 \
                 with ECN 01, or --tclass 106 for DSCP 26)"
            ))
        })?,
    };
    if let Some(sl) = a.flags.transport.sl {
        if sl > 15 {
            return usage(format!("--sl {sl}: service levels are 0-15"));
        }
    }
    if let Some(t) = a.qp_timeout {
        if t > 31 {
            return usage(format!(
                "-u/--qp-timeout {t}: the ACK timeout exponent is 0-31 (default 14 = 67 ms)"
            ));
        }
    }
    if let Some(r) = a.retry_count {
        if r > 7 {
            return usage(format!("--retry-count {r}: the retry count is 0-7"));
        }
    }
    if let Some(m) = a.flags.mtu {
        if ![256, 512, 1024, 2048, 4096].contains(&m) {
            return usage(format!(
                "-m/--mtu {m}: use 256, 512, 1024, 2048 or 4096 (or leave it out for the smaller \
                 active MTU of both ports)"
            ));
        }
    }
    let tx_depth = at_least_one("-t/--tx-depth", a.flags.transport.tx_depth, d.tx_depth, 128)?;
    let poll = match (a.flags.transport.use_event, a.poll) {
        (true, _) | (_, crate::cli::PollArg::Event) => PollMode::Event,
        (false, crate::cli::PollArg::Adaptive) => PollMode::Adaptive,
        (false, crate::cli::PollArg::Spin) => PollMode::Spin,
    };
    // An event wakes the sender once per signaled completion: with ib_write_bw's default of
    // one per write above 8 KiB, every write would cost a wake-up. So in event mode each
    // completion stands for at least half the send queue (the other half keeps the link busy
    // while the sender wakes), unless -Q says otherwise.
    let default_mod = match poll {
        PollMode::Event => default_cq_mod(sizes, a.flags.transport.post_list)
            .max(tx_depth / 2)
            .max(1),
        _ => default_cq_mod(sizes, a.flags.transport.post_list),
    };
    let cq_mod = at_least_one("-Q/--cq-mod", a.flags.transport.cq_mod, default_mod, 100)?;
    let post_list = at_least_one(
        "-l/--post_list",
        a.flags.transport.post_list,
        d.post_list,
        1,
    )?;
    let rate_limit = rate_limit(a, tx_depth)?;
    let cpu = match (a.cpu, a.no_numa_bind) {
        (Some(n), _) => {
            let allowed = bench_core::ffi::allowed_cpus().unwrap_or_default();
            if !allowed.is_empty() && !allowed.contains(&n) {
                return usage(format!(
                    "--cpu {n}: this process may run on CPUs {} only (taskset, cgroup cpuset); \
                     pick one of those, or leave --cpu out for a CPU of the NIC's NUMA node",
                    allowed
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ));
            }
            results::rdmabw::params::CpuChoice::Cpu(n)
        }
        (None, true) => results::rdmabw::params::CpuChoice::Unbound,
        (None, false) => results::rdmabw::params::CpuChoice::Numa,
    };
    Ok(LocalTuning {
        tx_depth,
        cq_mod,
        post_list,
        inline_bytes: a.flags.transport.inline_size.unwrap_or(d.inline_bytes),
        traffic_class,
        service_level: a.flags.transport.sl.unwrap_or(d.service_level),
        hop_limit: a.hop_limit.unwrap_or(d.hop_limit),
        mtu_bytes: a.flags.mtu,
        ack_timeout: a.qp_timeout.unwrap_or(d.ack_timeout),
        retry_count: a.retry_count.unwrap_or(d.retry_count),
        memory: crate::gpus::memory_request(a)?,
        poll,
        cpu,
        rate_limit,
    })
}

/// `--rate_limit RATE` with `--rate_units`, `--burst_size` and `--rate_limit_type`, as
/// ib_write_bw takes them (Gb/s by default, bursts of the send queue depth); SW only.
fn rate_limit(a: &TestArgs, tx_depth: u32) -> Result<Option<RateLimit>, Usage> {
    if let Some(t) = &a.rate_limit_type {
        match t.to_ascii_uppercase().as_str() {
            "SW" => {}
            "HW" | "PP" => {
                return usage(format!(
                    "--rate_limit_type {t}: not supported by rdmabw: the NIC's rate limiter (HW) \
                     and packet pacing (PP) are set through vendor verbs rdmabw does not use; its \
                     limiter is in software: --rate_limit_type SW (or leave it out)"
                ))
            }
            _ => {
                return usage(format!(
                    "--rate_limit_type {t}: give SW (rdmabw's software limiter; HW and PP are not \
                     supported)"
                ))
            }
        }
    }
    let Some(rate) = a.rate_limit else {
        for (set, flag) in [
            (a.rate_units.is_some(), "--rate_units"),
            (a.burst_size.is_some(), "--burst_size"),
            (a.rate_limit_type.is_some(), "--rate_limit_type"),
        ] {
            if set {
                return usage(format!(
                    "{flag} applies to the rate limiter: add --rate_limit RATE (e.g. \
                     --rate_limit 10 for 10 Gb/s)"
                ));
            }
        }
        return Ok(None);
    };
    if !(rate.is_finite() && rate > 0.0) {
        return usage(format!(
            "--rate_limit {rate}: give a positive rate in --rate_units (Gb/s by default), e.g. \
             --rate_limit 10"
        ));
    }
    let unit = match a.rate_units.as_deref() {
        None | Some("g") => RateUnit::Gbps,
        Some("M") => RateUnit::MibPerS,
        Some("p") => RateUnit::MsgsPerS,
        Some(u) => {
            return usage(format!(
                "--rate_units {u}: give g (Gb/s, the default), M (MiB/s) or p (writes per \
                 second), as ib_write_bw"
            ))
        }
    };
    let burst_msgs = match a.burst_size {
        None => tx_depth,
        Some(n) if n >= 1 => u32::try_from(n).unwrap_or(u32::MAX),
        Some(n) => {
            return usage(format!(
                "--burst_size {n}: give at least 1 write per burst (default the send queue depth \
                 -t, {tx_depth})"
            ))
        }
    };
    Ok(Some(RateLimit {
        rate,
        unit,
        burst_msgs,
    }))
}

/// The output settings; `lat`: of `rdmabw lat`, where --report-both prints the peer's table.
fn output(a: &TestArgs, lat: bool) -> Result<Output, Usage> {
    let format = match (a.json, a.csv) {
        (true, true) => return usage("--json and --csv conflict: pick one machine format"),
        (true, false) => Format::Json,
        (false, true) => Format::Csv,
        (false, false) => Format::Table,
    };
    // -w is in the table's unit: Gb/s with --report_gbits, else MB/sec (2^20 bytes/s).
    let min_gbps = match a.limit_bw {
        Some(w) if !(w.is_finite() && w >= 0.0) => {
            return usage(format!(
                "-w/--limit_bw {w}: give a bandwidth in the table's unit (MB/sec, or Gb/s with \
                 --report_gbits), e.g. -w 11000"
            ))
        }
        Some(w) if a.report_gbits => Some(w),
        Some(w) => Some(w * 1_048_576.0 * 8.0 / 1e9),
        None => a.flags.min_gbps,
    };
    let min_mpps = match a.limit_msgrate {
        Some(y) if !(y.is_finite() && y >= 0.0) => {
            return usage(format!(
                "-y/--limit_msgrate {y}: give a message rate in Mpps, e.g. -y 0.18"
            ))
        }
        other => other,
    };
    if a.run_infinitely {
        for (set, flag) in [
            (a.limit_bw.is_some(), "-w/--limit_bw"),
            (a.limit_msgrate.is_some(), "-y/--limit_msgrate"),
            (a.flags.min_gbps.is_some(), "--min-gbps"),
            (a.flags.min_line_rate_pct.is_some(), "--min-line-rate-pct"),
            (
                a.out_json || a.out_json_file.is_some(),
                "--out_json/--out_json_file",
            ),
            (a.output_figure.is_some(), "--output"),
            (a.report_counters.is_some(), "-W/--report-counters"),
        ] {
            if set {
                return usage(format!(
                    "{flag} judges or reports a test when it ends, and a --run_infinitely test \
                     does not end (SIGINT stops it, exit 130): leave {flag} out, or read the \
                     rows (--json or --csv) as they come"
                ));
            }
        }
    }
    if a.report_both && !a.flags.transport.bidirectional && !lat {
        return usage("--report-both prints each direction of -b: add -b");
    }
    if let Some(g) = a.flags.min_gbps {
        if !(g.is_finite() && g >= 0.0) {
            return usage(format!(
                "--min-gbps {g}: give a bandwidth in Gb/s, e.g. --min-gbps 90"
            ));
        }
    }
    if let Some(p) = a.flags.min_line_rate_pct {
        if !(p.is_finite() && p > 0.0 && p <= 100.0) {
            return usage(format!(
                "--min-line-rate-pct {p}: give a percentage above 0 and at most 100, e.g. 90"
            ));
        }
    }
    Ok(Output {
        format,
        gbits: a.report_gbits,
        min_gbps,
        min_line_rate_pct: a.flags.min_line_rate_pct,
        quiet: a.quiet,
        report_counters: a.report_counters.as_ref().map(|names| {
            names
                .iter()
                .filter(|n| !n.is_empty() && n.as_str() != "all")
                .cloned()
                .collect()
        }),
        json_file: a
            .out_json_file
            .clone()
            .or_else(|| a.out_json.then(|| "perftest_out.json".into())),
        min_mpps,
        cpu_util: a.cpu_util,
        report_both: a.report_both,
        figure: a.output_figure,
        lat: None,
    })
}

/// This host's (pod's) name.
pub fn host_name() -> String {
    bench_core::sysfs::host_name(&SysRoots::default()).unwrap_or_else(|| "unknown-host".to_string())
}

/// `--peer` as the session takes it.
fn peer_choice(p: crate::cli::PeerArg) -> PeerChoice {
    match p {
        crate::cli::PeerArg::Auto => PeerChoice::Auto,
        crate::cli::PeerArg::Rdmabw => PeerChoice::Rdmabw,
        crate::cli::PeerArg::Perftest => PeerChoice::Perftest,
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::Parser;

    fn cfg(args: &[&str]) -> Result<Config, Usage> {
        cfg_with(args, None, "")
    }

    /// `args` resolved with `env` as RDMABW_SECRET and `stdin` as standard input.
    fn cfg_with(args: &[&str], env: Option<&str>, stdin: &str) -> Result<Config, Usage> {
        let mut v = vec!["rdmabw"];
        v.extend_from_slice(args);
        let mut line = || Ok(stdin.lines().next().unwrap_or_default().to_string());
        let mut secrets = SecretInput {
            env: env.map(str::to_string),
            stdin_line: &mut line,
        };
        resolve(Cli::try_parse_from(v).unwrap(), &mut secrets)
    }

    #[test]
    fn the_secret_comes_from_stdin_or_the_environment_and_limits_name_their_flag() {
        let secret = |c: Config| match c {
            Config::Client(c, _) => c.secret,
            Config::Server { cfg, .. } => cfg.secret,
            other => panic!("{other:?}"),
        };
        let s32 = "0123456789abcdef0123456789abcdef";
        let want = RunSecret::new(s32);
        let got = secret(
            cfg_with(
                &["--secret-stdin", "10.0.0.9"],
                None,
                &format!("{s32}\nrest"),
            )
            .unwrap(),
        );
        assert_eq!(got, want);
        let got = secret(cfg_with(&["server", "--daemon"], Some(s32), "").unwrap());
        assert_eq!(got, want);
        // The flag wins over the environment; neither: no secret.
        let got = secret(cfg_with(&["--secret-stdin", "10.0.0.9"], Some("env"), s32).unwrap());
        assert_eq!(got, want);
        assert_eq!(secret(cfg(&["10.0.0.9"]).unwrap()), None);
        let e = cfg_with(&["--secret-stdin", "10.0.0.9"], None, "").unwrap_err();
        assert!(e.0.starts_with("--secret-stdin: the first line"), "{e}");
        let e = cfg_with(&["10.0.0.9"], Some("two words"), "").unwrap_err();
        assert!(
            e.0.starts_with("RDMABW_SECRET is not a usable secret"),
            "{e}"
        );

        match cfg(&[
            "server",
            "--daemon",
            "--max-qps",
            "8",
            "--max-buffer",
            "64M",
        ])
        .unwrap()
        {
            Config::Server { cfg, .. } => {
                assert_eq!(cfg.limits.max_qps, 8);
                assert_eq!(cfg.limits.max_buffer_bytes, 64 << 20);
                assert_eq!(cfg.limits.max_tests, ServerLimits::DEFAULT.max_tests);
            }
            other => panic!("{other:?}"),
        }
        let e = |a: &[&str]| cfg(a).unwrap_err().to_string();
        assert!(e(&["server", "--max-buffer", "lots"]).starts_with("--max-buffer lots: "));
        assert!(e(&["server", "--max-tests", "0"]).starts_with("--max-tests 0: "));
        assert!(e(&["server", "-q", "16", "--max-qps", "8"]).contains("raise --max-qps"));
        // A batch's secret is the first line of its input: the caller reads it there.
        assert!(matches!(
            cfg_with(&["batch", "--secret-stdin"], Some("x"), "s").unwrap(),
            Config::Batch {
                secret: None,
                secret_first: true
            }
        ));
    }

    /// Issue 53, finding 3: a secret of fewer than 128 bits (32 hex digits) is refused wherever
    /// rdmabw is given one, naming the rule; railsweep's (16 random bytes as 32 hex digits)
    /// pass it.
    #[test]
    fn a_secret_shorter_than_128_bits_is_refused_naming_the_rule() {
        let s31 = "0123456789abcdef0123456789abcde";
        for (args, env, stdin, from) in [
            (
                &["server", "--daemon"][..],
                Some("abc123"),
                "",
                "RDMABW_SECRET",
            ),
            (&["server", "--daemon"][..], Some(s31), "", "RDMABW_SECRET"),
            (
                &["server", "--daemon", "--secret-stdin"][..],
                None,
                "0123456789abcdef",
                "--secret-stdin",
            ),
            (
                &["10.0.0.9", "--secret-stdin"][..],
                None,
                s31,
                "--secret-stdin",
            ),
        ] {
            let e = cfg_with(args, env, stdin).unwrap_err().0;
            assert!(e.starts_with(from), "{args:?}: {e}");
            assert!(
                e.contains("fewer than 32")
                    && e.contains("128 bits")
                    && e.contains("openssl rand -hex 16"),
                "{args:?}: {e}"
            );
        }
        let railsweeps = results::rdmabw::secret::RunSecret::from_bytes(&[0xa5; 16]).unwrap();
        assert!(cfg_with(&["server", "--daemon"], Some(railsweeps.expose()), "").is_ok());
    }

    /// Issue 53, finding 3: a daemon without a secret on an address other hosts can reach is
    /// warned about, with how to give one; on loopback, or with a secret, it is not.
    #[test]
    fn an_open_daemon_on_a_reachable_address_is_warned_about() {
        let a = |s: &str| -> std::net::SocketAddr { s.parse().unwrap() };
        let w = open_daemon_warning(true, false, &[a("0.0.0.0:18515")]).expect("a warning");
        assert!(
            w.contains("--daemon without a secret")
                && w.contains("0.0.0.0:18515")
                && w.contains("--secret-stdin")
                && w.contains("RDMABW_SECRET"),
            "{w}"
        );
        let w = open_daemon_warning(true, false, &[a("127.0.0.1:1"), a("10.224.0.2:1")]);
        assert!(w.is_some_and(|w| w.contains("10.224.0.2:1") && !w.contains("127.0.0.1:1")));
        assert!(open_daemon_warning(true, false, &[a("[::]:1")]).is_some());
        assert_eq!(
            open_daemon_warning(true, false, &[a("127.0.0.1:1"), a("[::1]:1")]),
            None
        );
        assert_eq!(open_daemon_warning(true, true, &[a("0.0.0.0:1")]), None);
        assert_eq!(open_daemon_warning(false, false, &[a("0.0.0.0:1")]), None);
    }

    #[test]
    fn bare_form_is_server_without_host_and_client_with_one() {
        assert!(matches!(
            cfg(&["-d", "mlx5_0"]).unwrap(),
            Config::Server { .. }
        ));
        match cfg(&["-d", "mlx5_0", "-D", "5", "10.0.0.2"]).unwrap() {
            Config::Client(c, _) => {
                assert_eq!(c.server, "10.0.0.2");
                assert_eq!(c.rail.device.as_deref(), Some("mlx5_0"));
                assert!(
                    matches!(c.params.length, TestLength::Duration { duration_s, .. } if duration_s == 3.0)
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            cfg(&["client", "10.0.0.9"]).unwrap(),
            Config::Client(..)
        ));
        assert!(matches!(
            cfg(&["devices"]).unwrap(),
            Config::Devices {
                json: false,
                root: None
            }
        ));
    }

    #[test]
    fn bad_values_name_the_flag() {
        let e = |a: &[&str]| cfg(a).unwrap_err().to_string();
        assert!(e(&["--tclass", "256", "10.0.0.9"]).starts_with("--tclass 256: "));
        assert!(e(&["-s", "0", "10.0.0.9"]).starts_with("-s/--size 0"));
        assert!(e(&["-s", "2G", "10.0.0.9"]).contains("largest buffer"));
        assert!(e(&["-m", "1500", "10.0.0.9"]).contains("256, 512"));
        // Issue 33: a server's limits given to a client were taken and ignored.
        for flag in [
            &["--max-qps", "8"][..],
            &["--max-buffer", "2G"],
            &["--max-tests", "4"],
            &["--bind", "10.0.0.1"],
        ] {
            let mut args = flag.to_vec();
            args.push("10.0.0.9");
            assert!(
                e(&args).starts_with(&format!("{} is a server flag", flag[0])),
                "{flag:?}: {}",
                e(&args)
            );
        }
        assert!(e(&["-n", "5", "-D", "2", "10.0.0.9"]).contains("conflict"));
        assert!(e(&["--use_cuda", "x", "10.0.0.9"]).contains("give a CUDA GPU index"));
        assert!(e(&["--cuda-mem", "peermem", "10.0.0.9"]).contains("add --use_cuda"));
        // Without a CUDA driver (CI), --use_cuda fails before any work, naming the flag.
        if let Err(u) = cfg(&["--use_cuda", "0", "10.0.0.9"]) {
            assert!(u.to_string().starts_with("--use_cuda 0: "), "{u}");
        }
        assert!(e(&["--server-netdev", "net1"]).contains("client flag"));
        assert!(e(&["client", "--daemon", "10.0.0.9"]).contains("server flag"));
        assert!(e(&["client", "--exit-on-stdin-eof", "10.0.0.9"]).contains("server flag"));
        assert!(e(&["server", "--exit-on-stdin-eof"]).contains("add --daemon"));
        assert!(e(&["--json", "--csv", "10.0.0.9"]).contains("conflict"));
        assert!(e(&["-q", "0", "10.0.0.9"]).contains("at least 1"));
    }

    /// The flags of one role are left out of the other's help, and refused there by name
    /// when given anyway: a server's limits and daemon flags in `rdmabw client`, the server's
    /// rail in `rdmabw server`.
    #[test]
    fn each_roles_help_lists_only_its_flags_and_the_others_are_refused_by_name() {
        use clap::CommandFactory;
        let help = |role: &str| {
            let mut cli = crate::cli::Cli::command();
            let sub = cli.find_subcommand_mut(role).expect("subcommand");
            [
                sub.render_help().to_string(),
                sub.render_long_help().to_string(),
            ]
        };
        // The flags of the options' own lines (not of the descriptions or the examples).
        let listed = |help: &str, flag: &str| {
            help.lines()
                .filter(|l| (2..=6).contains(&(l.len() - l.trim_start().len())))
                .filter(|l| l.trim_start().starts_with('-'))
                .flat_map(|l| l.split(|c: char| c.is_whitespace() || c == ','))
                .any(|w| w == flag)
        };
        let server_only: &[&[&str]] = &[
            &["--daemon"],
            &["--exit-on-stdin-eof"],
            &["--bind", "10.0.0.1"],
            &["--max-qps", "8"],
            &["--max-buffer", "2G"],
            &["--max-tests", "4"],
        ];
        for h in help("client") {
            for flag in server_only {
                assert!(!listed(&h, flag[0]), "client help lists {}:\n{h}", flag[0]);
            }
            assert!(
                listed(&h, "--server-netdev") && listed(&h, "--tclass"),
                "{h}"
            );
        }
        for flag in server_only {
            let mut args = vec!["client"];
            args.extend_from_slice(flag);
            args.push("10.0.0.9");
            let e = cfg(&args).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("{} is a server flag", flag[0])),
                "{args:?}: {e}"
            );
        }
        let client_only = ["--server-dev", "--server-netdev", "--server-gid-index"];
        for h in help("server") {
            for flag in client_only {
                assert!(!listed(&h, flag), "server help lists {flag}:\n{h}");
            }
            assert!(listed(&h, "--max-qps") && listed(&h, "--tclass"), "{h}");
        }
        for flag in client_only {
            let e = cfg(&["server", flag, "1"]).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("{flag} is a client flag")),
                "{flag}: {e}"
            );
        }
    }

    /// `-h` is a summary, one line per flag; `--help` has the whole text.
    #[test]
    fn minus_h_is_one_line_per_flag_and_help_the_whole_text() {
        use clap::CommandFactory;
        for role in ["client", "server"] {
            let mut cli = crate::cli::Cli::command();
            let sub = cli.find_subcommand_mut(role).expect("subcommand");
            let short = sub.render_help().to_string();
            let long = sub.render_long_help().to_string();
            // A flag's line, and nothing under it but the next flag, a heading or a blank line.
            let wrapped: Vec<&str> = short
                .lines()
                .skip_while(|l| !l.ends_with(':') || l.starts_with(' '))
                .filter(|l| l.starts_with("    ") && !l.trim_start().starts_with('-'))
                .collect();
            assert!(wrapped.is_empty(), "{role} -h wraps {wrapped:?}:\n{short}");
            let lines = short.lines().count();
            assert!(lines < 85, "{role} -h: {lines} lines:\n{short}");
            assert!(
                short.trim_end().ends_with(crate::cli::SHORT_EXAMPLES),
                "{short}"
            );
            for text in [
                "busy-polls through the measured window",
                "Fail a CI job below 90%",
            ] {
                assert!(!short.contains(text), "{role} -h: {text}");
                assert!(long.contains(text), "{role} --help lacks {text}:\n{long}");
            }
        }
    }

    #[test]
    fn run_infinitely_repeats_a_window_of_minus_d() {
        let c = |a: &[&str]| match cfg(a).unwrap() {
            Config::Client(c, _) => c,
            other => panic!("{other:?}"),
        };
        let p = c(&["--run_infinitely", "-D", "2", "10.0.0.2"]).params;
        assert!(p.run_infinitely);
        // -D is the reporting interval: all of it is measured, after a short warm-up.
        assert_eq!(
            p.length,
            TestLength::Duration {
                duration_s: 2.0,
                warmup_s: 0.05,
                cooldown_s: 0.0
            }
        );
        let p = c(&["--run_infinitely", "--window", "1", "-f", "1", "10.0.0.2"]).params;
        assert_eq!(
            p.length,
            TestLength::Duration {
                duration_s: 1.0,
                warmup_s: 1.0,
                cooldown_s: 0.0
            }
        );
        let e = |a: &[&str]| cfg(a).unwrap_err().to_string();
        assert!(e(&["--run_infinitely", "10.0.0.2"]).starts_with("--run_infinitely needs -D"));
        assert!(e(&["--run_infinitely", "-n", "5", "10.0.0.2"]).contains("-n/--iters"));
        assert!(e(&["--run_infinitely", "-D", "2", "-a", "10.0.0.2"]).contains("not -a"));
        assert!(e(&["--run_infinitely", "-D", "2", "-b", "10.0.0.2"]).contains("leave out -b"));
        assert!(
            e(&["--run_infinitely", "-D", "2", "--data_validation", "h"])
                .starts_with("--data_validation")
        );
        assert!(e(&["--run_infinitely", "-D", "2", "--min-gbps", "5", "h"])
            .starts_with("--min-gbps judges"));
        assert!(e(&["--run_infinitely", "-D", "0", "h"]).starts_with("-D/--duration 0"));
        // The server pins it when given, and follows the client when not.
        match cfg(&["server", "--run_infinitely", "-D", "2"]).unwrap() {
            Config::Server { cfg, .. } => {
                assert!(cfg.pinned.run_infinitely && cfg.params.run_infinitely);
            }
            other => panic!("{other:?}"),
        }
        match cfg(&["server"]).unwrap() {
            Config::Server { cfg, .. } => assert!(!cfg.pinned.run_infinitely),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rate_limits_resolve_as_ib_write_bw_and_nonsense_names_the_flag() {
        let rl = |a: &[&str]| match cfg(a).unwrap() {
            Config::Client(c, _) => c.tuning.rate_limit,
            other => panic!("{other:?}"),
        };
        assert_eq!(rl(&["10.0.0.2"]), None);
        // Gb/s by default, bursts of the send queue depth.
        assert_eq!(
            rl(&["--rate_limit", "2.5", "-t", "64", "10.0.0.2"]),
            Some(RateLimit {
                rate: 2.5,
                unit: RateUnit::Gbps,
                burst_msgs: 64
            })
        );
        assert_eq!(
            rl(&[
                "--rate_limit=300",
                "--rate_units=M",
                "--burst_size=8",
                "--rate_limit_type=SW",
                "10.0.0.2"
            ]),
            Some(RateLimit {
                rate: 300.0,
                unit: RateUnit::MibPerS,
                burst_msgs: 8
            })
        );
        assert_eq!(
            rl(&["--rate_limit", "1000", "--rate_units", "p", "10.0.0.2"]).map(|r| r.unit),
            Some(RateUnit::MsgsPerS)
        );
        let e = |a: &[&str]| cfg(a).unwrap_err().to_string();
        assert!(e(&["--rate_limit", "0", "h"]).starts_with("--rate_limit 0: give a positive"));
        assert!(e(&["--rate_limit", "-3", "h"]).starts_with("--rate_limit -3: give a positive"));
        assert!(e(&["--rate_limit=-3", "h"]).starts_with("--rate_limit -3: "));
        assert!(e(&["--rate_limit", "1", "--burst_size", "0", "h"]).starts_with("--burst_size 0"));
        assert!(e(&["--rate_limit", "1", "--burst_size", "-2", "h"]).starts_with("--burst_size -2"));
        assert!(e(&["--rate_limit", "1", "--rate_units", "k", "h"]).starts_with("--rate_units k"));
        assert!(e(&["--rate_limit", "1", "--rate_limit_type", "HW", "h"])
            .starts_with("--rate_limit_type HW: not supported by rdmabw"));
        assert!(e(&["--rate_limit", "1", "--rate_limit_type", "PP", "h"]).contains("(PP)"));
        assert!(e(&["--burst_size", "4", "h"]).starts_with("--burst_size applies"));
        assert!(e(&["--rate_units", "M", "h"]).contains("add --rate_limit"));
    }

    #[test]
    fn data_validation_is_agreed_and_sizes_the_buffer() {
        let p = match cfg(&["--data_validation", "-a", "-q", "2", "10.0.0.2"]).unwrap() {
            Config::Client(c, _) => c.params,
            other => panic!("{other:?}"),
        };
        assert!(p.data_validation);
        // A 16 MiB slot (every size of the sweep) per QP, in both halves, plus 1 MiB.
        assert_eq!(memlock_needed_bytes(&p), 2 * 2 * (16 << 20) + (1 << 20));
        let plain = TestParams {
            data_validation: false,
            latency: false,
            ..p
        };
        assert_eq!(memlock_needed_bytes(&plain), 2 * (8 << 20) + (1 << 20));
        match cfg(&["server", "--data_validation"]).unwrap() {
            Config::Server { cfg, .. } => assert!(cfg.pinned.data_validation),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_given_server_flags_are_pinned() {
        match cfg(&["server", "-q", "2", "--tclass", "41"]).unwrap() {
            Config::Server { cfg, .. } => {
                assert!(cfg.pinned.qps && cfg.pinned.traffic_class);
                assert!(!cfg.pinned.sizes && !cfg.pinned.length && !cfg.pinned.mtu);
                assert_eq!(cfg.tuning.traffic_class, 41);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cq_moderation_defaults_as_ib_write_bw() {
        let q = |a: &[&str]| match cfg(a).unwrap() {
            Config::Client(c, _) => c.tuning.cq_mod,
            other => panic!("{other:?}"),
        };
        assert_eq!(q(&["-s", "65536", "10.0.0.2"]), 1);
        assert_eq!(q(&["-s", "8192", "10.0.0.2"]), 100);
        assert_eq!(q(&["-a", "10.0.0.2"]), 100);
        assert_eq!(q(&["-s", "65536", "-l", "8", "10.0.0.2"]), 8);
        assert_eq!(q(&["-s", "65536", "-Q", "50", "10.0.0.2"]), 50);
    }

    #[test]
    fn use_event_waits_on_events_with_moderation() {
        let t = |a: &[&str]| match cfg(a).unwrap() {
            Config::Client(c, _) => c.tuning,
            Config::Server { cfg, .. } => cfg.tuning,
            other => panic!("{other:?}"),
        };
        assert_eq!(t(&["10.0.0.2"]).poll, PollMode::Spin);
        // -e, its long spelling and --poll event say the same, on either side.
        for a in [
            &["-e", "10.0.0.2"][..],
            &["--use_event", "10.0.0.2"],
            &["--poll", "event", "10.0.0.2"],
            &["server", "-e"],
            &["server", "-b", "-e"],
        ] {
            assert_eq!(t(a).poll, PollMode::Event, "{a:?}");
        }
        // Each event stands for half the send queue at least, unless -Q is given.
        assert_eq!(t(&["-e", "-s", "65536", "10.0.0.2"]).cq_mod, 64);
        assert_eq!(t(&["-e", "-t", "512", "10.0.0.2"]).cq_mod, 256);
        assert_eq!(t(&["-e", "-s", "64", "10.0.0.2"]).cq_mod, 100);
        assert_eq!(t(&["-e", "-t", "1", "10.0.0.2"]).cq_mod, 1);
        assert_eq!(t(&["-e", "-Q", "4", "10.0.0.2"]).cq_mod, 4);
        // -e and another --poll mode contradict each other.
        let mut v = vec!["rdmabw", "-e", "--poll", "adaptive", "10.0.0.2"];
        assert!(Cli::try_parse_from(&v).is_err());
        v[3] = "spin";
        assert!(Cli::try_parse_from(&v).is_err());
    }

    #[test]
    fn limit_bw_is_in_the_tables_unit() {
        let min = |a: &[&str]| match cfg(a).unwrap() {
            Config::Client(_, out) => out.min_gbps,
            other => panic!("{other:?}"),
        };
        assert_eq!(min(&["-w", "90", "--report_gbits", "10.0.0.2"]), Some(90.0));
        // 11000 MB/sec of 2^20 bytes is 92.27 Gb/s.
        let g = min(&["-w", "11000", "10.0.0.2"]).unwrap();
        assert!((g - 92.274_688).abs() < 1e-6, "{g}");
        assert!(cfg(&["-w=-1", "10.0.0.2"]).is_err());
        match cfg(&["--out_json", "10.0.0.2"]).unwrap() {
            Config::Client(_, out) => {
                assert_eq!(out.json_file, Some("perftest_out.json".into()));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn perftests_output_flags_resolve() {
        let out = |a: &[&str]| match cfg(a).unwrap() {
            Config::Client(_, out) => out,
            other => panic!("{other:?}"),
        };
        let o = out(&[
            "-y",
            "0.18",
            "--cpu_util",
            "--output=message_rate",
            "10.0.0.2",
        ]);
        assert_eq!(o.min_mpps, Some(0.18));
        assert!(o.cpu_util);
        assert_eq!(o.figure, Some(crate::cli::FigureArg::MessageRate));
        assert!(out(&["-b", "--report-both", "10.0.0.2"]).report_both);
        let e = cfg(&["--report-both", "10.0.0.2"]).unwrap_err().0;
        assert!(e.contains("add -b"), "{e}");
    }

    #[test]
    fn duration_margins_default_by_direction_and_give_way_to_flags() {
        let len = |a: &[&str]| match cfg(a).unwrap() {
            Config::Client(c, _) => c.params.length,
            other => panic!("{other:?}"),
        };
        let d = |m: f64, w: f64, c: f64| TestLength::Duration {
            duration_s: m,
            warmup_s: w,
            cooldown_s: c,
        };
        // --window: the measured seconds, the margins outside.
        assert_eq!(len(&["--window", "3", "10.0.0.2"]), d(3.0, 0.05, 0.0));
        assert_eq!(len(&["--window", "3", "-b", "10.0.0.2"]), d(3.0, 0.2, 0.25));
        assert_eq!(
            len(&["--window", "3", "-f", "2", "10.0.0.2"]),
            d(3.0, 2.0, 2.0)
        );
        assert_eq!(
            len(&[
                "--window",
                "3",
                "--warmup",
                "1",
                "--cooldown",
                "0.5",
                "10.0.0.2"
            ]),
            d(3.0, 1.0, 0.5)
        );
        // -D: perftest's whole test, margins of a quarter in whole seconds inside it.
        assert_eq!(len(&["-D", "4", "10.0.0.2"]), d(2.0, 1.0, 1.0));
        assert_eq!(len(&["-D", "10", "10.0.0.2"]), d(6.0, 2.0, 2.0));
        assert_eq!(len(&["-D", "5", "-f", "2", "10.0.0.2"]), d(1.0, 2.0, 2.0));
        // perftest's margin of 0 (-D 3): rdmabw's short start, inside the 3 s.
        assert_eq!(len(&["-D", "3", "10.0.0.2"]), d(2.95, 0.05, 0.0));
        assert_eq!(
            len(&["-D", "8", "--warmup", "1", "10.0.0.2"]),
            d(5.0, 1.0, 2.0)
        );
        let e = cfg(&["-D", "4", "-f", "2", "10.0.0.2"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("leaves nothing to measure") && e.contains("--window 4"),
            "{e}"
        );
    }
}
