//! What each command does once its flags are resolved into a [`Config`]: a test from either
//! side ([`outcome`], [`server`], [`batch`]) and what it prints ([`report`], [`lat`]), and the
//! listings and checks ([`devices`], [`gpus`], [`rails`], [`counters`], [`probe`]).

mod batch;
mod counters;
mod devices;
mod gpus;
mod lat;
mod outcome;
mod probe;
mod rails;
mod report;
mod server;
mod signals;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Result;
use bench_core::session::{self, Log};

use crate::config::Config;
use crate::exit::Exit;
use crate::stdout;

/// Runs the command `cfg` resolved to, until it ends or SIGINT/SIGTERM stops it.
pub fn run(cfg: Config) -> Result<Exit> {
    let stop = Arc::new(AtomicBool::new(false));
    let signalled = Arc::new(AtomicBool::new(false));
    if let Err(e) = signals::install_signals(&stop, &signalled) {
        results::say!("rdmabw: warning: cannot catch SIGINT/SIGTERM: {e}");
    }
    match cfg {
        Config::Devices { json, root } => {
            stdout::listing(json, &devices::collect(root.as_deref())?, devices::render)?;
            Ok(Exit::Ok)
        }
        Config::Gpus(g) => gpus::run(&g),
        Config::Rails(r) => rails::run(&r),
        Config::Counters(c) => counters::run(&c),
        Config::Probe(p) => probe::run(&p),
        Config::Client(c, out) => outcome::client(&c, &out, &stop),
        Config::Batch {
            secret,
            secret_first,
        } => batch::batch(std::io::stdin().lock(), secret, secret_first, &stop),
        Config::Server {
            cfg,
            bind,
            out,
            exit_on_stdin_eof,
        } => {
            if exit_on_stdin_eof {
                signals::stop_at_stdin_eof(&stop)?;
            }
            server::server(&cfg, &bind, &out, &stop, &signalled)
        }
    }
}

/// The log of a test: its progress lines on stderr under `prefix`, none when `quiet`.
fn logger(quiet: bool, prefix: &'static str) -> Log {
    if quiet {
        session::quiet()
    } else {
        Arc::new(move |m: &str| results::say!("{prefix}{m}"))
    }
}
