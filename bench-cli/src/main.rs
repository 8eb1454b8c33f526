//! rdmabw: RDMA WRITE bandwidth, a drop-in for ib_write_bw.
//!
//! This file is parse -> resolve -> dispatch -> exit status: the command line ([`cli`], clap's
//! structs and the flag groups each command composes) is resolved into one validated
//! [`config::Config`] before any work, [`cmd`] runs it (the test itself is
//! `bench_core::session`), and [`exit`] declares and maps the process's exit status:
//!
//! | status | meaning |
//! |---|---|
//! | 0 | it worked; or the reader of standard output went away (broken pipe) |
//! | 1 | it ran but failed, or fell below `--min-gbps` / `--min-line-rate-pct` |
//! | 2 | usage or set-up error (an unreadable sysfs included) |
//! | 130 | interrupted by SIGINT or SIGTERM |
#![forbid(unsafe_code)]

mod cli;
mod cmd;
mod config;
mod exit;
mod stdout;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match cli::parse(std::env::args().collect()) {
        Ok(c) => c,
        // A perftest flag rdmabw refuses by name: a usage error (exit 2), as any other.
        Err(cli::ParseError::Refused(u)) => {
            return ExitCode::from(exit::finish(Err(u.into())).code())
        }
        // Help and --version exit 0; usage errors exit 2 (clap's convention matches ours).
        Err(cli::ParseError::Clap(e)) => e.exit(),
    };
    let mut read_line = || {
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) => Err("standard input is empty".to_string()),
            Ok(_) => Ok(line),
            Err(e) => Err(e.to_string()),
        }
    };
    let mut secrets = config::SecretInput {
        env: std::env::var(config::SECRET_ENV).ok(),
        stdin_line: &mut read_line,
    };
    let done = config::resolve(cli, &mut secrets)
        .map_err(anyhow::Error::from)
        .and_then(cmd::run);
    ExitCode::from(exit::finish(done).code())
}
