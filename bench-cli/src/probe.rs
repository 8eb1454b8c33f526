//! `rdmabw probe`: can an RDMA test run in this pod (see `bench_core::probe`).

use bench_core::probe::{self, LiveSystem, ProbeReport, ProbeRoots, Status};
use clap::Args;
use comfy_table::{presets, Cell, Color, ContentArrangement, Table};

/// Flags of `rdmabw probe`.
#[derive(Debug, Args)]
pub struct ProbeCmd {
    /// One JSON document (a ProbeReport) instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// The table: check, status, and the explanation with the fix below it.
pub fn render(r: &ProbeReport) -> String {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(vec!["CHECK", "STATUS", "DETAIL"]);
    let colors = std::io::IsTerminal::is_terminal(&std::io::stdout());
    for c in &r.checks {
        let mut status = Cell::new(c.status.as_str());
        if colors {
            status = status.fg(match c.status {
                Status::Pass => Color::Green,
                Status::Warn => Color::Yellow,
                Status::Fail => Color::Red,
            });
        }
        let text = match &c.fix {
            Some(f) if c.status != Status::Pass => format!("{}\nfix: {f}", c.detail),
            _ => c.detail.clone(),
        };
        t.add_row(vec![Cell::new(&c.name), status, Cell::new(text)]);
    }
    format!(
        "{t}\n{}: {} checks, {} PASS, {} WARN, {} FAIL\n",
        r.host,
        r.checks.len(),
        r.summary.pass,
        r.summary.warn,
        r.summary.fail
    )
}

/// Runs `rdmabw probe`; the exit status: 1 when any check failed, else 0.
pub fn run(cmd: &ProbeCmd) -> u8 {
    let roots = ProbeRoots::default();
    let r = probe::probe(&roots, &LiveSystem::new(&roots.sys));
    if cmd.json {
        match serde_json::to_string_pretty(&r) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("rdmabw: error: {e}");
                return 1;
            }
        }
    } else {
        print!("{}", render(&r));
    }
    u8::from(r.failed())
}
