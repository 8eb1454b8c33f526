//! `railsweep report`: merge saved runs and print or write the comparison.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use orchestrator::config::{generated_by, heading};
use orchestrator::exit::Verdict;
use orchestrator::output::{export, Dest};
use results::{Format, RailStatus, Report};

/// The end of `railsweep report --help`.
const REPORT_EXAMPLES: &str = "\
Examples:
  # two saved runs side by side, markdown on stdout
  railsweep report hostnet.csv sriov.csv
  # the same as a bar chart, SVG or PNG (the format from the extension)
  railsweep report hostnet.csv sriov.json --output-file modes.svg
  railsweep report hostnet.csv sriov.json --output-file modes.png
  # judge the rails against 90 Gb/s instead of their recorded status, as CSV
  railsweep report hostnet.csv --threshold-gbps 90 -o csv
  # OpenMetrics for node-exporter's textfile collector
  railsweep report fleet.csv --output-file /var/lib/node-exporter/rails.prom";

/// Arguments of `railsweep report`.
#[derive(Debug, Args)]
#[command(after_help = format!("\
Output goes to stdout unless --output-file is given; logs and, for non-markdown output, \
the summary lines go to stderr.\n\n{}\n\n{}",
    orchestrator::exit::help(
        "all rails fine",
        "some rail failed or fell below the threshold, or a row was left out (a value out of range, named)",
        "bad arguments, no rows in any input, or a file that cannot be read (the message names file, line and column)",
        None,
    ),
    REPORT_EXAMPLES
))]
#[command(mut_arg("output", |a| a.help(
    "The report's format, kubectl's -o: `markdown` (the default), `csv`, `json`, `svg`, `png`, \
     `openmetrics` [default: the --output-file extension's (.md, .csv, .json, .svg, .png, .prom), \
     else markdown]"
)))]
#[command(mut_arg("output_file", |a| a.help("Write the report to FILE instead of stdout.")))]
pub struct ReportArgs {
    /// Saved runs: results CSV or JSON, told apart by extension or content. `-` reads stdin.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// -o FORMAT, --json, --csv, and --output-file FILE (the report's file).
    #[command(flatten)]
    pub out: orchestrator::config::FormatFlags,

    /// Count rails under this average bandwidth as below threshold, instead of
    /// the status recorded when they were measured (not for a fleet's rows: refused).
    #[arg(long, value_name = "GBPS", value_parser = parse_gbps, help_heading = heading::VERDICTS)]
    pub threshold_gbps: Option<f64>,

    /// Name a column of the tables and the chart instead of by its mode: KEY is a run id or a
    /// network mode (repeat it: `--label sriov=VFs --label 20250601T100000Z=before`); not for a
    /// fleet's rows, whose columns are rails (refused).
    #[arg(long, value_name = "RUN_OR_MODE=NAME", value_parser = parse_label, help_heading = heading::OUTPUT)]
    pub label: Vec<(String, String)>,

    /// Refuse an input file (or stdin) larger than this many bytes: each is read whole.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_INPUT_BYTES, value_parser = parse_max_input_bytes, help_heading = heading::OUTPUT)]
    pub max_input_bytes: u64,

    /// --max-p99-us: count rails whose p99 latency is above it as below threshold, instead of
    /// the latency judgement recorded when they were measured (rows of `--test bw,lat`).
    #[command(flatten, next_help_heading = heading::VERDICTS)]
    pub lat: results::rdmabw::flags::LatencyFlags,

    /// --title, --width: the chart's (svg, png).
    #[command(flatten)]
    pub chart: orchestrator::config::ChartArgs,
}

fn parse_gbps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("expected a positive number of Gb/s, got `{s}`")),
    }
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.trim().is_empty() => {
            Ok((k.to_string(), v.trim().to_string()))
        }
        _ => Err(format!(
            "expected RUN_OR_MODE=NAME (a run id or a mode, then the column's name), got `{s}`"
        )),
    }
}

/// `--max-input-bytes`' default: 256 MiB, a fleet of a thousand nodes' rows many times over.
pub(crate) const DEFAULT_MAX_INPUT_BYTES: u64 = 256 * 1024 * 1024;

fn parse_max_input_bytes(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("expected a number of bytes above 0, got `{s}`")),
    }
}

/// What [`load`] read from one input.
pub(crate) struct Loaded {
    /// Its rows.
    pub rows: Vec<results::RailResult>,
    /// How many rows were left out (each named on stderr).
    pub left_out: usize,
    /// The findings file read beside a CSV, which gave its rows their findings whole.
    pub findings_file: Option<std::path::PathBuf>,
    /// Whether the input is results CSV (whose findings are in a file beside it).
    pub csv: bool,
}

/// The rows of one input (a file, or `-` for stdin), at most `max_bytes` of it: each row that
/// breaks a rule of the record (a value out of range) named on stderr and left out, the
/// rest read ([`results::read_str_lenient`]). A CSV file's findings file beside it, where
/// there is one, gives its rows their findings whole ([`results::read_file_lenient`]).
pub(crate) fn load(path: &Path, max_bytes: u64) -> Result<Loaded> {
    let (text, name) = if path.as_os_str() == "-" {
        let name = "<stdin>".to_string();
        let text = results::read_capped(std::io::stdin().lock(), &name, max_bytes);
        (text.map_err(|e| too_large(e, "stdin", max_bytes)), name)
    } else {
        let name = path.display().to_string();
        let text = std::fs::File::open(path)
            .map_err(|e| results::ResultsError::Io {
                path: name.clone(),
                source: e,
            })
            .and_then(|f| results::read_capped(f, &name, max_bytes));
        (text.map_err(|e| too_large(e, &name, max_bytes)), name)
    };
    let what = |name: &str| {
        if path.as_os_str() == "-" {
            "cannot read results from stdin".to_string()
        } else {
            format!("cannot read results file {name}")
        }
    };
    let text = text.with_context(|| what(&name))?;
    let read = if path.as_os_str() == "-" {
        results::read_str_lenient(&text, &name)
    } else {
        results::read_file_lenient(&text, path, max_bytes)
    };
    let read = read.with_context(|| what(&name))?;
    let csv = matches!(
        results::detect_format(&name, text.strip_prefix('\u{feff}').unwrap_or(&text)),
        Ok(results::InputFormat::Csv)
    );
    for e in &read.left_out {
        results::say!("railsweep: {e}: row left out");
    }
    Ok(Loaded {
        rows: read.rows,
        left_out: read.left_out.len(),
        findings_file: read.findings_file,
        csv,
    })
}

/// An input over `--max-input-bytes` as the error that names the flag and how to read it.
fn too_large(e: results::ResultsError, what: &str, max_bytes: u64) -> anyhow::Error {
    match e {
        results::ResultsError::TooLarge { .. } => anyhow::Error::new(UsageError(format!(
            "{what} is larger than --max-input-bytes {max_bytes}: give --max-input-bytes BYTES \
             (a larger number) to read it"
        ))),
        e => e.into(),
    }
}

/// A mistake in the arguments that clap cannot see (exit 2, as clap's own).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub(crate) String);

/// The output format: `-o`, `--json`, `--csv`, else the one `--output-file`'s extension names, else markdown. An
/// `--output-file` whose extension names no format, without `-o`, is an error that lists them.
fn output_format(args: &ReportArgs) -> Result<Format> {
    use orchestrator::config::OutFormat::{Csv, Json, Markdown, OpenMetrics, Png, Svg, Table};
    let given = args
        .out
        .format_in(
            "railsweep report",
            &[Markdown, Csv, Json, Svg, Png, OpenMetrics, Table],
        )
        .map_err(|e| UsageError(e.to_string()))?;
    if let Some(f) = given {
        return Ok(f.results_format().unwrap_or(Format::Markdown));
    }
    let Some(path) = &args.out.output_file else {
        return Ok(Format::Markdown);
    };
    if path.as_os_str() == "-" {
        return Ok(Format::Markdown);
    }
    Format::from_path(path).ok_or_else(|| {
        let known: Vec<String> = Format::ALL
            .iter()
            .flat_map(|f| f.extensions().iter().map(|e| format!(".{e}")))
            .collect();
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        UsageError(format!(
            "--output-file {}: cannot tell the format from the file name; use one of the extensions {} or give -o ({})",
            path.display(),
            known.join(", "),
            names.join(", ")
        ))
        .into()
    })
}

/// A binary format (PNG) for a terminal is a usage error: it needs -o or a pipe.
fn refuse_binary_on_a_terminal(args: &ReportArgs, format: Format) -> Result<()> {
    if format.is_binary() && args.out.output_file.is_none() && std::io::stdout().is_terminal() {
        return Err(UsageError(format!(
            "{format} is binary and stdout is a terminal: give --output-file FILE.{format} or pipe it"
        ))
        .into());
    }
    Ok(())
}

/// The flags of `report` that judge or name the columns of a comparison of runs, each with what
/// to do instead when the input is a fleet's rows: the fleet's view has a row per node and a
/// column per rail, and judges each against its rail's fleet median, so none of them would
/// change it. The one place that says which flags a fleet input refuses.
fn not_for_a_fleet(args: &ReportArgs) -> Vec<(&'static str, &'static str)> {
    let rules: [(bool, &str, &str); 3] = [
        (
            args.threshold_gbps.is_some(),
            "--threshold-gbps",
            "a fleet's node is judged rail by rail against that rail's fleet median, not a fixed \
             bandwidth (when measuring: `railsweep fleet --outlier-pct`); \
             leave it out, or report one pair's CSV (pairs/ of the fleet's directory) with it",
        ),
        (
            !args.label.is_empty(),
            "--label",
            "a fleet's view has a row per node and a column per rail, no column per mode or run \
             to name; leave it out",
        ),
        (
            args.lat.max_p99_us.is_some(),
            "--max-p99-us",
            "a fleet's view judges bandwidth; its latency outliers are judged when it measures \
             (`railsweep fleet --test bw,lat --lat-outlier-factor K`); leave it out, or report \
             one pair's CSV (pairs/ of the fleet's directory) with it",
        ),
    ];
    rules
        .into_iter()
        .filter(|(given, _, _)| *given)
        .map(|(_, flag, instead)| (flag, instead))
        .collect()
}

/// A fleet's rows given a flag of [`not_for_a_fleet`] is a usage error naming each such flag
/// and what to do instead.
fn refuse_for_a_fleet(args: &ReportArgs) -> Result<()> {
    let refused = not_for_a_fleet(args);
    if refused.is_empty() {
        return Ok(());
    }
    let said: Vec<String> = refused
        .iter()
        .map(|(flag, instead)| format!("{flag} does not apply to a fleet's rows: {instead}"))
        .collect();
    Err(UsageError(said.join("; ")).into())
}

/// `railsweep report` of a fleet's rows (its fleet.csv): markdown, SVG and PNG show the nodes x
/// rails view ([`orchestrator::fleet::nodemap`]); CSV, JSON and OpenMetrics are the rows, as for
/// any run. 1 when a node's rail failed in every pair or is below the fleet's outlier limit;
/// the flags of [`not_for_a_fleet`] are refused.
fn fleet(args: &ReportArgs, rows: Vec<results::RailResult>, format: Format) -> Result<Verdict> {
    use orchestrator::fleet::culprit::Threshold;
    use orchestrator::fleet::nodemap::NodeRails;
    refuse_for_a_fleet(args)?;
    let view = NodeRails::new(&rows);
    let t = Threshold::default();
    results::say!(
        "railsweep: a fleet: {} nodes, {} rails; each node's rail is its best pair's bandwidth",
        view.nodes.len(),
        view.rails.len()
    );
    refuse_binary_on_a_terminal(args, format)?;
    let view_bytes: Option<Vec<u8>> = match format {
        Format::Markdown => {
            Some((view.markdown(t) + &NodeRails::verdicts_markdown(&rows)).into_bytes())
        }
        Format::Svg => Some(view.svg(t)?.into_bytes()),
        Format::Png => Some(results::svg_to_png(view.svg(t)?.as_bytes(), 1.0)?),
        _ => None,
    };
    let mut stdout = std::io::stdout().lock();
    let to = match &args.out.output_file {
        Some(path) => Dest::File(path),
        None => Dest::Stream(&mut stdout),
    };
    match view_bytes {
        Some(bytes) => orchestrator::output::write(&bytes, to)?,
        // The rows themselves, as for any run (CSV with its counters file beside it).
        None => {
            export(
                &Report::new(generated_by(), rows).with_chart(args.chart.options()),
                format,
                to,
            )?;
        }
    }
    if let Some(path) = &args.out.output_file {
        results::say!("railsweep: wrote {format} to {}", path.display());
    }
    let low: Vec<String> = view
        .nodes
        .iter()
        .flat_map(|n| view.rails.iter().map(move |r| (n, *r)))
        .filter(|(n, r)| view.is_low(n, *r, t))
        .map(|(n, r)| format!("{n} rail {r}"))
        .collect();
    if low.is_empty() {
        Ok(Verdict::Ok)
    } else {
        results::say!(
            "railsweep: below the fleet's outlier limit in every pair, or failed: {}",
            low.join(", ")
        );
        Ok(Verdict::Problems)
    }
}

/// Run `railsweep report`: 0 when every rail is fine, 1 when some rail failed
/// or is below the threshold; input and output errors are `Err`.
pub fn run(args: &ReportArgs) -> Result<Verdict> {
    let mut rows = Vec::new();
    let mut left_out = 0;
    let mut remeasured = false;
    for path in &args.files {
        let Loaded {
            rows: loaded,
            left_out: bad,
            findings_file,
            ..
        } = load(path, args.max_input_bytes)?;
        results::say!(
            "railsweep: read {} rows from {}{}",
            loaded.len(),
            path.display(),
            findings_file
                .map(|f| format!(", their findings from {}", f.display()))
                .unwrap_or_default()
        );
        // A pair's rail twice in one file: a fleet's outliers measured again (the same run
        // given twice, in two files, is still refused).
        remeasured |= orchestrator::fleet::nodemap::remeasures(&loaded);
        rows.extend(loaded);
        left_out += bad;
    }
    if rows.is_empty() {
        // Nothing measured is no verdict: a set-up error, as an empty sweep is.
        let names: Vec<String> = args.files.iter().map(|p| p.display().to_string()).collect();
        anyhow::bail!(
            "nothing to report: {} hold{} no rows{}; give the CSV or JSON that `railsweep run`, \
             `compare` or `fleet` wrote (a sweep that measured nothing writes none)",
            names.join(", "),
            if names.len() == 1 { "s" } else { "" },
            if left_out > 0 {
                format!(" ({left_out} left out, named above)")
            } else {
                String::new()
            }
        );
    }
    let verdict = run_rows(args, rows, remeasured)?;
    if left_out > 0 {
        results::say!(
            "railsweep: {left_out} row(s) left out for a value that breaks the results' rules (named above)"
        );
        return Ok(Verdict::Problems);
    }
    Ok(verdict)
}

/// `railsweep report` of the rows read; `remeasured`: a file measured a pair's rail again (a
/// fleet's, reported as one whatever its size).
fn run_rows(
    args: &ReportArgs,
    rows: Vec<results::RailResult>,
    remeasured: bool,
) -> Result<Verdict> {
    let format = output_format(args)?;
    if remeasured || orchestrator::fleet::nodemap::is_fleet(&rows) {
        return fleet(args, rows, format);
    }
    let report = Report::new(generated_by(), rows)
        .with_chart(args.chart.options())
        .with_threshold(args.threshold_gbps)
        .with_max_p99(args.lat.max_p99_us)
        .with_labels(args.label.clone())
        .map_err(|e| UsageError(e.to_string()))?;
    let comparison = report.comparison().context("cannot merge the runs")?;

    refuse_binary_on_a_terminal(args, format)?;
    if let Some(path) = &args.out.output_file {
        if let Some(implied) = Format::from_path(path).filter(|f| *f != format) {
            results::say!(
                "railsweep: warning: writing {format} to {}, whose extension suggests {implied}",
                path.display()
            );
        }
    }
    match &args.out.output_file {
        Some(path) => {
            export(&report, format, Dest::File(path))?;
            results::say!("railsweep: wrote {format} to {}", path.display());
            if format == Format::Csv && results::countersio::any_counters(&report.rows) {
                results::say!(
                    "railsweep: wrote the counters to {}",
                    results::counters_csv_path(path).display()
                );
            }
            if format == Format::Csv && results::findingsio::any_findings(&report.rows) {
                results::say!(
                    "railsweep: wrote the findings to {}",
                    results::findings_csv_path(path).display()
                );
            }
        }
        None => {
            export(&report, format, Dest::Stream(&mut std::io::stdout().lock()))?;
        }
    }
    // Markdown on stdout already has the summary lines; otherwise log them.
    if format != Format::Markdown || args.out.output_file.is_some() {
        for summary in comparison.summaries() {
            results::say!("{summary}");
        }
    }

    if report.has_problems() {
        let failed = report
            .rows
            .iter()
            .filter(|r| r.status == RailStatus::Failed)
            .count();
        let below = report.rows.iter().filter(|r| report.is_below(r)).count();
        results::say!("railsweep: {failed} rail(s) failed, {below} below threshold");
        Ok(Verdict::Problems)
    } else {
        Ok(Verdict::Ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Report {
        #[command(flatten)]
        args: ReportArgs,
    }

    fn args(a: &[&str]) -> ReportArgs {
        Report::try_parse_from(std::iter::once("report").chain(a.iter().copied()))
            .expect("the arguments parse")
            .args
    }

    /// Issue 33: `report fleet.csv --label ...` and `--threshold-gbps` were taken and left out
    /// of the fleet's view without a word. Each flag a fleet's view cannot use is a usage error
    /// that names it and what to do instead.
    #[test]
    fn each_flag_a_fleet_cannot_use_is_refused_by_name_with_what_to_do() {
        for (flag, value, instead) in [
            ("--threshold-gbps", "90", "--outlier-pct"),
            ("--label", "lab=before", "leave it out"),
            ("--max-p99-us", "20", "--lat-outlier-factor"),
        ] {
            let e = refuse_for_a_fleet(&args(&["fleet.csv", flag, value]))
                .expect_err("refused for a fleet");
            assert!(e.downcast_ref::<UsageError>().is_some(), "{flag}: {e:#}");
            let said = e.to_string();
            assert!(
                said.starts_with(&format!("{flag} does not apply to a fleet's rows: ")),
                "{said}"
            );
            assert!(said.contains(instead), "{flag}: {said}");
        }
        // Given together, each is named.
        let e = refuse_for_a_fleet(&args(&[
            "fleet.csv",
            "--label",
            "lab=x",
            "--threshold-gbps",
            "90",
            "--max-p99-us",
            "5",
        ]))
        .expect_err("refused");
        for flag in ["--threshold-gbps", "--label", "--max-p99-us"] {
            assert!(e.to_string().contains(flag), "{e}");
        }
    }

    /// The flags a fleet's report does use are not refused.
    #[test]
    fn the_flags_a_fleet_uses_are_taken() {
        for a in [
            &["fleet.csv"][..],
            &["fleet.csv", "--output-file", "fleet.png"],
            &["fleet.csv", "-o", "openmetrics"],
            &["a.csv", "b.csv", "-o", "csv", "--output-file", "-"],
        ] {
            assert!(refuse_for_a_fleet(&args(a)).is_ok(), "{a:?}");
            assert!(not_for_a_fleet(&args(a)).is_empty(), "{a:?}");
        }
    }
}
