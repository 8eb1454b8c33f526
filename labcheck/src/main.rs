//! `labcheck`: the lab suites' checks of what rdmabw and railsweep wrote (scripts/labtests),
//! each file read through the types that wrote it (results' readers and record, wire's
//! reports), so that a check cannot drift from the format as a Python re-parse could.
//!
//! ```text
//! labcheck rows FILE [--where COL=V] [--rails 0-3] [--ok] [--is COL=VALUE] ...
//! labcheck findings REPORT.json --exactly loss
//! labcheck windows ROWS --window 1
//! labcheck lat REPORT.json --size 64 --iters 300 --samples 299
//! labcheck probe PROBE.json uverbs-open=PASS rails=FAIL:no
//! labcheck rails RAILS.json --count 2 --iface 'net{r+1}' --attachment ipvlan
//! labcheck counters COUNTERS.json --netdev net1 --has sent_pkts
//! labcheck fleet-rounds DIR --pairs 6 --rows 12 --rounds 3 --per-round 2
//! labcheck fleet-faults fleet.csv --down podB:0 --slow podC:1
//! labcheck lossy-rail sweep.csv --rail 1
//! ```
//! Exit status: 0 every assertion held; 1 one did not (`labcheck: FAIL: ...` says which, with
//! the row); 2 a file that does not read as its type, or a usage error.
#![forbid(unsafe_code)]

mod files;
mod fleet;
mod outcome;
mod reports;
mod rows;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The lab suites' checks of rdmabw's and railsweep's output.
#[derive(Debug, Parser)]
#[command(
    name = "labcheck",
    version,
    after_help = "Examples:\n  \
    labcheck rows sweep.csv --rails 0-3 --any-order --ok --nodes node-a,node-b\n  \
    labcheck rows cmp.csv --where network_mode=ipvlan --status failed --like 'error=*(0 iterations)*'\n  \
    labcheck findings lossy.json --counter-sides client,server --exactly loss\n  \
    labcheck probe probe.json uverbs-open=FAIL:EPERM\n\n\
    Exit status: 0 every assertion held; 1 one did not (the row that broke it is named); 2 a file \
    that does not read as its type, or a usage error."
)]
struct Cli {
    #[command(subcommand)]
    check: Check,
}

#[derive(Debug, Subcommand)]
enum Check {
    /// Rows of railsweep's results (CSV with its findings and counters files, or JSON).
    Rows(Box<rows::RowsArgs>),
    /// The findings of an `rdmabw client --json` report.
    Findings(reports::FindingsArgs),
    /// The windows of `rdmabw client --run_infinitely` (JSON lines or CSV rows).
    Windows(reports::WindowsArgs),
    /// An `rdmabw lat --json` client report.
    Lat(reports::LatArgs),
    /// An `rdmabw probe --json` report.
    Probe(reports::ProbeArgs),
    /// An `rdmabw rails --json` report.
    Rails(reports::RailsArgs),
    /// An `rdmabw counters --json` report.
    Counters(reports::CountersArgs),
    /// The rounds of `railsweep fleet --out-dir DIR`.
    FleetRounds(fleet::RoundsArgs),
    /// A fleet's verdicts on planted faults.
    FleetFaults(fleet::FaultsArgs),
    /// A sweep with loss on one rail: the findings, verdict and counters of each rail.
    LossyRail(fleet::LossyArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let outcome = match &cli.check {
        Check::Rows(a) => rows::run(a),
        Check::Findings(a) => reports::findings(a),
        Check::Windows(a) => reports::windows(a),
        Check::Lat(a) => reports::lat(a),
        Check::Probe(a) => reports::probe(a),
        Check::Rails(a) => reports::rails(a),
        Check::Counters(a) => reports::counters(a),
        Check::FleetRounds(a) => fleet::rounds(a),
        Check::FleetFaults(a) => fleet::faults(a),
        Check::LossyRail(a) => fleet::lossy(a),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<outcome::Failed>() => {
            eprintln!("labcheck: FAIL: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            // Each cause once: an error whose message already says its source's is not
            // followed by it again.
            let mut said = String::new();
            for cause in e.chain() {
                let text = cause.to_string();
                if !said.contains(&text) {
                    said = if said.is_empty() {
                        text
                    } else {
                        format!("{said}: {text}")
                    };
                }
            }
            eprintln!("labcheck: error: {said}");
            ExitCode::from(2)
        }
    }
}
