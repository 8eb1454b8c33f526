//! `rdmabw batch`: client tests read from standard input, run one after another in this process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Result;
use bench_core::control::RunSecret;
use results::rdmabw::report::BatchEnd;

use super::outcome::client;
use crate::cli;
use crate::config::{self, Config};
use crate::exit::{self, Exit, Usage};
use crate::stdout;

/// `rdmabw batch`: each input line is the argument vector of one client test, run here in
/// turn; after each, the [`BatchEnd`] line on stdout and on stderr. Exit 0 at end of input (or
/// when standard output's reader goes away), 130 when interrupted, 2 when the input cannot be
/// read.
pub(super) fn batch(
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
            // A signal that came during or just after this test: said here, as the signal
            // thread says it when the batch is blocked on its input instead.
            results::say!("rdmabw: interrupted");
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
    let argv = std::iter::once("rdmabw".to_string()).chain(args).collect();
    let cli = match cli::parse(argv) {
        Ok(c) => c,
        Err(cli::ParseError::Refused(u)) => return Err(u.into()),
        Err(cli::ParseError::Clap(e)) => {
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
