//! `railsweep explain`: the whole chain of evidence behind one rail's verdict, from saved
//! results: where it ran, what it measured, its error, each counter finding with the counters it
//! rests on, the counters that moved, and the verdict (layer, evidence, fix).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use orchestrator::config::heading;
use orchestrator::exit::Verdict;
use results::{RailResult, RailStatus};

use crate::report::{load, UsageError, DEFAULT_MAX_INPUT_BYTES};

/// The end of `railsweep explain --help`.
const EXPLAIN_EXAMPLES: &str = "\
Examples:
  # why rail 5 of a saved run is slow or failed
  railsweep explain railsweep-20261206T101500Z.csv --rail 5
  # the same by run id (reads railsweep-RUNID.csv in this directory)
  railsweep explain 20261206T101500Z --rail 5
  # every rail of a fleet's results that has a verdict
  railsweep explain fleet-out/fleet.csv";

/// Arguments of `railsweep explain`.
#[derive(Debug, Args)]
#[command(after_help = format!("{}\n\n{EXPLAIN_EXAMPLES}",
    orchestrator::exit::help(
        "every rail shown is ok",
        "a rail shown failed, fell below its threshold, or has a finding against it",
        "bad arguments, a file that cannot be read, or no row of that rail",
        None,
    ),
))]
pub struct ExplainArgs {
    /// Saved results (CSV or JSON), or a run id: `railsweep-RUNID.csv` in this directory, as
    /// `railsweep run` names its results by default.
    #[arg(required = true, value_name = "RUN_OR_FILE")]
    pub inputs: Vec<String>,

    /// The rail to explain [default: every rail with a verdict].
    #[arg(long, value_name = "N", help_heading = heading::OUTPUT)]
    pub rail: Option<u32>,
}

/// The file a `RUN_OR_FILE` names.
fn input_path(input: &str) -> PathBuf {
    let path = Path::new(input);
    if input == "-" || path.exists() {
        return path.to_path_buf();
    }
    let by_run = PathBuf::from(format!("railsweep-{input}.csv"));
    if by_run.exists() {
        by_run
    } else {
        path.to_path_buf()
    }
}

/// The chain of evidence of one row, in lines a person reads top to bottom. `findings`: the
/// findings file where a finding read from a CSV without it (its kind alone) has the rest.
pub fn chain(r: &RailResult, findings: Option<&Path>) -> String {
    let mut out = String::new();
    let pod = |p: &Option<String>, node: &str| match p {
        Some(p) => format!("pod {p} on {node}"),
        None => node.to_string(),
    };
    let gid = |g: Option<u32>| g.map_or_else(|| "-".into(), |g| g.to_string());
    let _ = writeln!(
        out,
        "rail {} of run {} ({}{}{})",
        r.rail,
        r.run_id,
        r.network_mode,
        if r.cluster.is_empty() {
            ""
        } else {
            ", cluster "
        },
        r.cluster
    );
    let ends = [
        ("client", &r.client_pod, &r.client_node, &r.client_interface),
        ("server", &r.server_pod, &r.server_node, &r.server_interface),
    ];
    let more = [
        (&r.client_rdma_device, r.client_gid_index, &r.client_tool),
        (&r.server_rdma_device, r.server_gid_index, &r.server_tool),
    ];
    for ((side, p, node, iface), (dev, g, tool)) in ends.into_iter().zip(more) {
        let tool = tool
            .as_deref()
            .map(|t| format!(" ({t})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {side}: {}, {iface} {dev} GID {}{tool}",
            pod(p, node),
            gid(g)
        );
    }
    let num =
        |v: Option<f64>, unit: &str| v.map_or_else(|| "-".into(), |v| format!("{v:.2}{unit}"));
    let _ = writeln!(
        out,
        "  measured: {} Gb/s of {} line rate ({}), threshold {}",
        num(r.bw_avg_gbps, ""),
        num(r.line_rate_gbps, " Gb/s"),
        num(r.line_rate_pct, " %"),
        num(r.threshold_gbps, " Gb/s")
    );
    if let Some(p99) = r.lat_p99_us {
        let _ = writeln!(
            out,
            "  latency: p50 {}, p99 {p99:.2} us, max {}",
            num(r.lat_p50_us, " us"),
            num(r.lat_max_us, " us")
        );
    }
    let _ = writeln!(out, "  status: {}", r.status);
    if let Some(e) = &r.error {
        let _ = writeln!(out, "  error: {e}");
    }
    for f in &r.diagnosis {
        if f.summary.is_empty() && f.evidence.is_empty() && f.what_to_do.is_empty() {
            // A results CSV keeps the finding's word alone since version 10; the findings file
            // beside it, read with it where it is there, the rest.
            let file = findings.map_or_else(
                || "the findings file beside the CSV (NAME.findings.csv)".to_string(),
                |p| format!("{}, which was not there or has no line for it", p.display()),
            );
            let _ = writeln!(
                out,
                "  finding {}: its counters and what to do would be in {file}; or explain the \
                 run's JSON",
                f.finding.word()
            );
            continue;
        }
        let _ = writeln!(out, "  finding {}: {}", f.finding.word(), f.summary);
        for e in &f.evidence {
            let _ = writeln!(
                out,
                "    {} {} {}: +{} ({:.1}/s)",
                e.role.as_str(),
                e.source.as_str(),
                e.counter,
                e.delta,
                e.per_s
            );
        }
        let _ = writeln!(out, "    what to do: {}", f.what_to_do);
    }
    for c in &r.counters {
        let moved: Vec<String> = c
            .moved()
            .map(|d| format!("{} +{}", d.name, d.delta))
            .collect();
        let _ = writeln!(
            out,
            "  counters, {} {} port {}: {} read over {:.1} s, {} moved{}",
            c.role.as_str(),
            c.device,
            c.port,
            c.counters_read,
            c.span_s,
            moved.len(),
            if moved.is_empty() {
                String::new()
            } else {
                format!(": {}", moved.join(", "))
            }
        );
    }
    match r.verdict() {
        Some(v) => {
            let _ = writeln!(out, "  verdict: {} at {}", r.status, v.layer);
            let _ = writeln!(out, "    evidence: {}", v.evidence);
            let _ = writeln!(out, "    fix: {}", v.fix);
        }
        None if r.status == RailStatus::Ok => {
            let _ = writeln!(out, "  verdict: ok, nothing against it");
        }
        None => {
            let _ = writeln!(
                out,
                "  verdict: {} (no layer recorded: a file written before schema 9)",
                r.status
            );
        }
    }
    out
}

/// `railsweep explain`.
pub fn run(args: &ExplainArgs) -> Result<Verdict> {
    // Each row with the findings file that would complete it (none from stdin).
    let mut rows: Vec<(RailResult, Option<PathBuf>)> = Vec::new();
    for input in &args.inputs {
        let path = input_path(input);
        let loaded = load(&path, DEFAULT_MAX_INPUT_BYTES)?;
        let findings = (input != "-" && loaded.csv).then(|| results::findings_csv_path(&path));
        rows.extend(loaded.rows.into_iter().map(|r| (r, findings.clone())));
    }
    let shown: Vec<&(RailResult, Option<PathBuf>)> = rows
        .iter()
        .filter(|(r, _)| match args.rail {
            Some(n) => r.rail == n,
            None => r.status != RailStatus::Ok || r.layer.is_some(),
        })
        .collect();
    if shown.is_empty() {
        if let Some(n) = args.rail {
            let mut have: Vec<u32> = rows.iter().map(|(r, _)| r.rail).collect();
            have.sort_unstable();
            have.dedup();
            return Err(UsageError(format!(
                "--rail {n}: no row of rail {n} in {} (rails there: {})",
                args.inputs.join(", "),
                have.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .into());
        }
        let text = format!(
            "every rail is ok, with nothing against it ({} rows)\n",
            rows.len()
        );
        std::io::stdout().lock().write_all(text.as_bytes())?;
        return Ok(Verdict::Ok);
    }
    let text: Vec<String> = shown.iter().map(|(r, f)| chain(r, f.as_deref())).collect();
    std::io::stdout()
        .lock()
        .write_all(text.join("\n").as_bytes())?;
    Ok(Verdict::problems_if(shown.iter().any(|(r, _)| {
        r.status != RailStatus::Ok || r.layer.is_some()
    })))
}
