//! `bench-stats`: the statistics of the benchmark scripts, so that they live in Rust with unit
//! tests (the `benchstats` crate) rather than in awk.
//!
//! ```text
//! bench-stats engine RUNS_TSV [--control]   what scripts/bench-engine prints after its runs
//! bench-stats lat RUNS_TSV                  what scripts/bench-lat prints after its runs
//! ```
//! Exit status: 0 printed; 2 usage error or a file that does not read.

use std::process::ExitCode;

/// What to print: bench-engine's summary (with `--control` or not) or bench-lat's.
enum Summary {
    Engine { control: bool },
    Lat,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: bench-stats engine RUNS_TSV [--control] | bench-stats lat RUNS_TSV";
    let (file, what) = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["engine", file] => (file, Summary::Engine { control: false }),
        ["engine", file, "--control"] => (file, Summary::Engine { control: true }),
        ["lat", file] => (file, Summary::Lat),
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bench-stats: {file}: {e}");
            return ExitCode::from(2);
        }
    };
    let summary = match what {
        Summary::Engine { control } => {
            benchstats::read_runs(&text).map(|r| (r.len(), benchstats::engine_summary(&r, control)))
        }
        Summary::Lat => benchstats::lat::read_lat_runs(&text)
            .map(|r| (r.len(), benchstats::lat::lat_summary(&r))),
    };
    match summary {
        Ok((n, s)) if n > 0 => {
            print!("{s}");
            ExitCode::SUCCESS
        }
        Ok(_) => {
            eprintln!("bench-stats: no runs in {file}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("bench-stats: {file}: {e}");
            ExitCode::from(2)
        }
    }
}
