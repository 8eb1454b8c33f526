//! A server's settings: its addresses and limits, and the run's secret (either role's).

use std::net::{IpAddr, SocketAddr};

use bench_core::control::RunSecret;
use bench_core::session::ServerLimits;
use results::rdmabw::flags::parse_size;

use crate::cli::ServerArgs;
use crate::exit::{usage, Usage};

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
    pub(super) fn secret(&mut self, from_stdin: bool) -> Result<Option<RunSecret>, Usage> {
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

/// The most addresses `--bind` takes: a node's rails, with room to spare.
const MAX_BIND_ADDRS: usize = 64;

/// `--bind ADDR[,ADDR...]`: each an IP address of this host, duplicates dropped.
pub(super) fn bind_addrs(list: &str, port: u16) -> Result<Vec<SocketAddr>, Usage> {
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

/// The limits `--max-qps`, `--max-buffer` and `--max-tests` set, checked.
pub(super) fn limits(s: &ServerArgs) -> Result<ServerLimits, Usage> {
    let at_least_one = |flag: &str, n: u32, example: u32| match n {
        0 => usage(format!(
            "{flag} 0: it must be at least 1 (e.g. {flag} {example})"
        )),
        n => Ok(n),
    };
    Ok(ServerLimits {
        max_qps: at_least_one("--max-qps", s.max_qps, 64)?,
        max_buffer_bytes: parse_size(&s.max_buffer)
            .filter(|b| *b > 0)
            .ok_or_else(|| {
                Usage(format!(
                    "--max-buffer {}: give a size in bytes, or with K, M or G (e.g. \
                     --max-buffer 2G)",
                    s.max_buffer
                ))
            })?,
        max_tests: at_least_one("--max-tests", s.max_tests, 32)?,
    })
}
