//! How a test's results are printed and judged ([`Output`]).

use std::path::PathBuf;

use crate::cli::{BwArgs, FigureArg, LatArgs, TestArgs};
use crate::exit::{usage, Usage};

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// ib_write_bw's table.
    Table,
    /// One BwReport.
    Json,
    /// CSV rows.
    Csv,
}

/// Output settings shared by both roles.
#[derive(Debug, Clone)]
pub struct Output {
    pub format: Format,
    pub gbits: bool,
    pub min_gbps: Option<f64>,
    pub min_line_rate_pct: Option<f64>,
    pub quiet: bool,
    /// `-W LIST`: the counters to print after the table (empty: every one that moved).
    pub report_counters: Option<Vec<String>>,
    /// `--out_json`/`--out_json_file`: where the JSON document also goes.
    pub json_file: Option<PathBuf>,
    /// `-y`: the least message rate, Mpps.
    pub min_mpps: Option<f64>,
    /// `--cpu_util`: a CPU column in the table.
    pub cpu_util: bool,
    /// `--report-both`: each direction's table after the sum.
    pub report_both: bool,
    /// `--output`: only this figure on stdout.
    pub figure: Option<FigureArg>,
    /// `rdmabw lat`: its output flags (`None` for bandwidth).
    pub lat: Option<LatArgs>,
}

/// The output settings; `lat`: of `rdmabw lat` (its flags), where --report-both prints the
/// peer's table.
pub fn output(t: &TestArgs, bw: &BwArgs, lat: Option<LatArgs>) -> Result<Output, Usage> {
    let o = &t.output;
    let f = &bw.figures;
    // --output json/csv/table says the format as --json/--csv do; its figures are ib_write_bw's.
    let (json, csv, figure) = match f.output_figure {
        Some(FigureArg::Json) => (true, o.csv, None),
        Some(FigureArg::Csv) => (o.json, true, None),
        Some(FigureArg::Table) if o.json || o.csv => {
            return usage("--output table and --json/--csv conflict: pick one format")
        }
        Some(FigureArg::Table) => (false, false, None),
        other => (o.json, o.csv, other),
    };
    let format = match (json, csv) {
        (true, true) => return usage("--json and --csv conflict: pick one machine format"),
        (true, false) => Format::Json,
        (false, true) => Format::Csv,
        (false, false) => Format::Table,
    };
    // -w is in the table's unit: Gb/s with --report_gbits, else MB/sec (2^20 bytes/s).
    let min_gbps = match f.limit_bw {
        Some(w) if !(w.is_finite() && w >= 0.0) => {
            return usage(format!(
                "-w/--limit_bw {w}: give a bandwidth in the table's unit (MB/sec, or Gb/s with \
                 --report_gbits), e.g. -w 11000"
            ))
        }
        Some(w) if o.report_gbits => Some(w),
        Some(w) => Some(w * 1_048_576.0 * 8.0 / 1e9),
        // In range already: its value parser is the shared one.
        None => f.thresholds.min_gbps,
    };
    let min_mpps = match f.limit_msgrate {
        Some(y) if !(y.is_finite() && y >= 0.0) => {
            return usage(format!(
                "-y/--limit_msgrate {y}: give a message rate in Mpps, e.g. -y 0.18"
            ))
        }
        other => other,
    };
    if bw.shape.run_infinitely {
        for (set, flag) in [
            (f.limit_bw.is_some(), "-w/--limit_bw"),
            (f.limit_msgrate.is_some(), "-y/--limit_msgrate"),
            (f.thresholds.min_gbps.is_some(), "--min-gbps"),
            (
                f.thresholds.min_line_rate_pct.is_some(),
                "--min-line-rate-pct",
            ),
            (
                o.out_json || o.out_json_file.is_some(),
                "--out_json/--out_json_file",
            ),
            (figure.is_some(), "--output"),
            (
                bw.counters.report_counters.is_some(),
                "-W/--report-counters",
            ),
        ] {
            if set {
                return usage(format!(
                    "{flag} judges or reports a test when it ends, and a --run_infinitely test \
                     does not end (SIGINT stops it, exit 130): leave {flag} out, or read the \
                     rows (--json or --csv) as they come"
                ));
            }
        }
    }
    if o.report_both && !bw.shape.shape.bidirectional && lat.is_none() {
        return usage("--report-both prints each direction of -b: add -b");
    }
    Ok(Output {
        format,
        gbits: o.report_gbits,
        min_gbps,
        min_line_rate_pct: f.thresholds.min_line_rate_pct,
        quiet: o.quiet,
        report_counters: bw.counters.report_counters.as_ref().map(|names| {
            names
                .iter()
                .filter(|n| !n.is_empty() && n.as_str() != "all")
                .cloned()
                .collect()
        }),
        json_file: o
            .out_json_file
            .clone()
            .or_else(|| o.out_json.then(|| "perftest_out.json".into())),
        min_mpps,
        cpu_util: f.cpu_util,
        report_both: o.report_both,
        figure,
        lat,
    })
}
