//! `rdmabw probe`: can an RDMA test run in this pod (see `bench_core::probe`).

use bench_core::probe::{self, LiveSystem, ProbeRoots};
use comfy_table::{presets, Cell, Color, ContentArrangement, Table};
use results::rdmabw::probe::{ProbeReport, Status};

use crate::cli::ProbeCmd;
use crate::exit::Exit;
use crate::stdout;

/// The table: check, status, and the explanation with the fix below it.
pub fn render(r: &ProbeReport) -> String {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(vec!["CHECK", "STATUS", "DETAIL"]);
    let colors = colours_wanted(
        std::io::IsTerminal::is_terminal(&std::io::stdout()),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    // Fit a terminal; anything else (a pipe, kubectl exec without -t, a serial console that
    // reports no width) gets 120 columns, never one character per line.
    if !colors || t.width().is_none_or(|w| w < 40) {
        t.set_width(120);
    }
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

/// Colour on a terminal unless `NO_COLOR` is set to anything but the empty string
/// (<https://no-color.org>).
fn colours_wanted(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Runs `rdmabw probe`: it failed (exit 1) when any check did.
pub fn run(cmd: &ProbeCmd) -> anyhow::Result<Exit> {
    let roots = ProbeRoots::default();
    let r = probe::probe(&roots, &LiveSystem::new(&roots.sys));
    stdout::listing(cmd.json, &r, render)?;
    Ok(if r.failed() { Exit::Failed } else { Exit::Ok })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use results::rdmabw::probe::{Check, Summary};

    #[test]
    fn without_a_terminal_the_table_is_120_columns_wide() {
        let long = "word ".repeat(60);
        let r = ProbeReport {
            schema_version: 1,
            rdmabw_version: "0".into(),
            host: "pod".into(),
            checks: vec![Check {
                name: "rails".into(),
                status: Status::Fail,
                detail: long.clone(),
                fix: Some(long),
            }],
            summary: Summary::default(),
        };
        let text = render(&r);
        let widths: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
        assert!(widths.iter().all(|w| *w <= 120), "{text}");
        assert!(
            text.lines().next().unwrap().chars().count() > 100,
            "wrapped to the width, not one character a line: {text}"
        );
        assert!(
            text.contains("CHECK") && text.contains("fix: word"),
            "{text}"
        );
    }

    /// Issue 33: the probe's colours ignored NO_COLOR.
    #[test]
    fn no_color_turns_the_colours_off_on_a_terminal() {
        use std::ffi::OsStr;
        assert!(colours_wanted(true, None));
        assert!(colours_wanted(true, Some(OsStr::new(""))));
        assert!(!colours_wanted(true, Some(OsStr::new("1"))));
        assert!(!colours_wanted(false, None));
    }
}
