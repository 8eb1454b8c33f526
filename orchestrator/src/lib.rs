//! railsweep's library: rail-by-rail rdmabw sweeps between two pods, through the Kubernetes API
//! or network namespaces of this machine.
//!
//! * [`runner`]: where commands run ([`runner::Runner`], with a Kubernetes and a local runner);
//! * [`rdmabw`]: every rdmabw argument vector and how its output is read;
//! * [`plan`]: `--rails` lists and the pairing of two pods' rails;
//! * [`config`]: the flags every sweeping command shares, resolved once into a validated
//!   [`sweep::SweepConfig`];
//! * [`sweep`]: set-up, the server daemon, the rails, deadlines, retries;
//! * [`pair`]: one sweep of one pair of pods, the same for every command, and Ctrl-C;
//! * [`exit`]: the exit codes of every command, in one place;
//! * [`output`] and [`progress`]: the table, the summary lines and the bars;
//! * [`run`]: the `railsweep run` command line;
//! * [`modes`], [`managed`] and [`compare`]: the pods railsweep creates for each network mode,
//!   `railsweep run --nodes`, and `railsweep compare`;
//! * [`fleet`]: `railsweep fleet`, every pair of a set of nodes in rounds, and the culprits.
#![forbid(unsafe_code)]

pub mod batch;
pub mod compare;
pub mod config;
pub mod exit;
pub mod fleet;
pub mod managed;
pub mod modes;
pub mod names;
pub mod output;
pub mod pair;
pub mod plan;
pub mod progress;
pub mod rdmabw;
pub mod run;
pub mod runner;
pub mod sweep;
#[cfg(test)]
mod test_support;

/// A command of railsweep's that talks to a cluster (or this machine's namespaces).
#[derive(Debug)]
pub enum Command {
    Run(Box<run::RunArgs>),
    Compare(Box<compare::CompareArgs>),
    Fleet(Box<fleet::FleetArgs>),
}

/// Runs `command` to its end on the runtime every command uses (two worker threads).
///
/// Not generic, and it is here rather than in `main`: an optimised build compiles each generic
/// function again in every crate that instantiates it, and a `block_on` in the binary compiled
/// the whole of the commands' async code a second time (two minutes of a release build).
pub fn block_on(command: Command) -> anyhow::Result<exit::Verdict> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match command {
        Command::Run(args) => runtime.block_on(run::run(*args)),
        Command::Compare(args) => runtime.block_on(compare::run(*args)),
        Command::Fleet(args) => runtime.block_on(fleet::run(*args)),
    }
}
