//! `bench-stats`: the statistics of the benchmark scripts, so that they live in Rust with unit
//! tests (`results::bench`) rather than in awk.
//!
//! ```text
//! bench-stats engine RUNS_TSV [--control]   what scripts/bench-engine prints after its runs
//! ```
//! Exit status: 0 printed; 2 usage error or a file that does not read.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: bench-stats engine RUNS_TSV [--control]";
    let (file, control) = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["engine", file] => (file.to_string(), false),
        ["engine", file, "--control"] => (file.to_string(), true),
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let runs = match std::fs::read_to_string(&file)
        .map_err(|e| e.to_string())
        .and_then(|t| results::bench::read_runs(&t))
    {
        Ok(r) if !r.is_empty() => r,
        Ok(_) => {
            eprintln!("bench-stats: no runs in {file}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("bench-stats: {file}: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", results::bench::engine_summary(&runs, control));
    ExitCode::SUCCESS
}
