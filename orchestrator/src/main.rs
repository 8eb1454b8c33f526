//! railsweep: rail-by-rail RDMA sweeps between Kubernetes pods.
//!
//! Exit codes, for every subcommand: 0 when all is well, 1 when the command
//! ran but found a problem in the results (a rail failed or fell below the
//! threshold), 2 for usage errors and unreadable input.
#![forbid(unsafe_code)]

mod report;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Sweep every RDMA rail between two pods and compare network modes.
#[derive(Debug, Parser)]
#[command(name = "railsweep", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands. Each returns the exit code for a run that completed
/// (0 or 1); an `Err` becomes exit code 2.
#[derive(Debug, Subcommand)]
enum Command {
    /// Sweep the rails between two pods with rdmabw, one rail after another (or all at once).
    Run(Box<orchestrator::run::RunArgs>),
    /// Merge saved runs (CSV or JSON) and print or write the per-rail comparison.
    Report(report::ReportArgs),
    /// Create the pod pair of each network mode in turn, sweep it, and compare the modes.
    Compare(Box<orchestrator::compare::CompareArgs>),
    /// Every rail of every pair of a set of pods, in rounds of disjoint pairs, and the suspects.
    Fleet(Box<orchestrator::fleet::FleetArgs>),
}

fn run_async(args: orchestrator::run::RunArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(orchestrator::run::run(args))
}

/// Exit code for usage and input errors (clap uses the same for bad arguments).
const EXIT_ERROR: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Report(args) => report::run(&args),
        Command::Run(args) => run_async(*args),
        Command::Compare(args) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(orchestrator::compare::run(*args))),
        Command::Fleet(args) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(orchestrator::fleet::run(*args))),
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("railsweep: error: {err:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
