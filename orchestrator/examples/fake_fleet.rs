//! The fake rdmabw of railsweep's tests (`tests/support/fake.rs`, compiled here as it is there)
//! set up for a fleet of test cluster nodes, for `scripts/bench-fleet`: nodes bench-1 ...
//! bench-N, each with rail addresses of its own (`Fake::per_node`), every client a 1 s window
//! (`Behave::Slow` on every rail), and the planted bad rails at half speed (`Fake::report_on`,
//! 48 Gb/s against 96).
//!
//! `cargo run -p orchestrator --example fake_fleet -- DIR NODES RAILS [NODE:RAILS]...`: DIR an
//! existing folder (the fake is DIR/rdmabw; the files it logs to stay there), RAILS of a
//! planted node joined by '.' (`bench-17:1`, `bench-5:0.1`).

#[path = "../tests/support/fake.rs"]
mod fake;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use fake::{Behave, Fake};

const USAGE: &str = "usage: fake_fleet DIR NODES RAILS [NODE:RAILS]...";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fake_fleet: {e:#}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, nodes, rails, planted @ ..] = args.as_slice() else {
        bail!("DIR, NODES and RAILS are needed");
    };
    let dir = PathBuf::from(dir);
    if !dir.is_dir() {
        bail!("DIR {}: not a folder (make it first)", dir.display());
    }
    let nodes: usize = nodes.parse().with_context(|| format!("NODES {nodes}"))?;
    let rails: u32 = rails.parse().with_context(|| format!("RAILS {rails}"))?;
    let names: Vec<String> = (1..=nodes).map(|i| format!("bench-{i}")).collect();
    let f = Fake::in_dir(&dir, rails);
    f.per_node(&names.iter().map(String::as_str).collect::<Vec<_>>(), rails);
    for r in 1..=rails {
        f.behave(&format!("net{r}"), Behave::Slow);
    }
    for p in planted {
        let Some((node, bad)) = p.split_once(':') else {
            bail!("{p}: not NODE:RAILS");
        };
        for r in bad.split('.') {
            let r: u32 = r.parse().with_context(|| format!("{p}: rail {r}"))?;
            if r >= rails {
                bail!("{p}: rail {r}, but only {rails} rail(s)");
            }
            f.report_on(node, &format!("net{}", r + 1), 48.0);
        }
    }
    Ok(())
}
