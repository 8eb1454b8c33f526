//! What a command prints and writes: `-o FORMAT`, `--json`, `--csv`, `--output-file`, and the
//! chart's title and width.

use std::path::PathBuf;

use anyhow::{bail, Result};

use super::heading;

/// The chart's title and width: `railsweep report` (`--output-file FILE.svg`, `FILE.png`) and the
/// chart `compare` writes beside its CSV. One definition, flattened into each command.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ChartArgs {
    /// The chart's title [default: "RDMA bandwidth per rail: MODE vs MODE"].
    #[arg(long, value_name = "TEXT", help_heading = heading::OUTPUT)]
    pub title: Option<String>,

    /// The chart's width in pixels (a PNG has twice as many); past 8 rails, the rails wrap
    /// into panels one under the other [default: 1200].
    #[arg(
        long,
        value_name = "PIXELS",
        value_parser = clap::value_parser!(u32).range(i64::from(results::CHART_MIN_WIDTH)..=20_000),
        help_heading = heading::OUTPUT
    )]
    pub width: Option<u32>,
}

impl ChartArgs {
    /// What the chart exporters read.
    pub fn options(&self) -> results::ChartOptions {
        results::ChartOptions {
            title: self.title.clone(),
            width: self.width,
        }
    }
}

/// What a command prints on stdout: `-o FORMAT`, kubectl's flag, or rdmabw's `--json` and
/// `--csv` for the same two formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutFormat {
    /// The per-rail table and the summary lines (`run`); the comparison (`compare`).
    Table,
    /// A markdown report, as `railsweep report` writes it.
    Markdown,
    /// Results CSV of the rows.
    Csv,
    /// Results JSON of the rows; with `--dry-run`, the pods as a JSON `List`.
    Json,
    /// With `--dry-run`: the pods as YAML (the default there).
    Yaml,
    /// `report`: the grouped bar chart.
    Svg,
    /// `report`: the chart as a PNG image.
    Png,
    /// `report`: OpenMetrics text, a sample per node pair and rail (docs/fleet.md).
    OpenMetrics,
}

impl OutFormat {
    /// Every value of `-o`, as given.
    pub const ALL: [(&'static str, OutFormat); 8] = [
        ("table", OutFormat::Table),
        ("markdown", OutFormat::Markdown),
        ("csv", OutFormat::Csv),
        ("json", OutFormat::Json),
        ("yaml", OutFormat::Yaml),
        ("svg", OutFormat::Svg),
        ("png", OutFormat::Png),
        ("openmetrics", OutFormat::OpenMetrics),
    ];

    /// The word `-o` takes for it.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("table", |(n, _)| n)
    }

    /// The results format that writes it (`None`: the table, or the pods' YAML).
    pub fn results_format(self) -> Option<results::Format> {
        use results::Format;
        match self {
            OutFormat::Table | OutFormat::Yaml => None,
            OutFormat::Markdown => Some(Format::Markdown),
            OutFormat::Csv => Some(Format::Csv),
            OutFormat::Json => Some(Format::Json),
            OutFormat::Svg => Some(Format::Svg),
            OutFormat::Png => Some(Format::Png),
            OutFormat::OpenMetrics => Some(Format::OpenMetrics),
        }
    }
}

/// `-o`'s value parser. A value that is no format but looks like a file is what `-o` took
/// before it meant the format: refused with the flag that takes a file now.
fn out_format(s: &str) -> Result<OutFormat, String> {
    let word = s.trim().to_ascii_lowercase();
    let word = match word.as_str() {
        "md" => "markdown",
        "prom" => "openmetrics",
        w => w,
    };
    if let Some((_, f)) = OutFormat::ALL.iter().find(|(n, _)| *n == word) {
        return Ok(*f);
    }
    let names: Vec<&str> = OutFormat::ALL.iter().map(|(n, _)| *n).collect();
    if s.contains(['.', '/']) {
        return Err(format!(
            "-o/--output is the output format, as kubectl's ({}), no longer a file: to write \
             the file, give --output-file {s}",
            names.join(", ")
        ));
    }
    Err(format!(
        "expected an output format ({}), got `{s}`",
        names.join(", ")
    ))
}

/// What a command prints on stdout and the file it writes: `-o FORMAT` (kubectl's), `--json`
/// and `--csv` (rdmabw's, the same as `-o json` and `-o csv`), and `--output-file FILE`. One
/// definition, flattened into `run`, `compare`, `fleet` and `report`; each command says which
/// formats it takes ([`FormatFlags::format_in`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FormatFlags {
    /// What to print on stdout, kubectl's -o: `table` (the default), `markdown`, `csv`, `json`;
    /// with --dry-run, the pods as `yaml` (the default there) or `json`.
    #[arg(short = 'o', long = "output", value_name = "FORMAT", value_parser = out_format, help_heading = heading::OUTPUT)]
    pub output: Option<OutFormat>,
    /// The rows as one JSON document on stdout, as rdmabw's --json (= -o json).
    #[arg(long, conflicts_with_all = ["output", "csv"], help_heading = heading::OUTPUT)]
    pub json: bool,
    /// The rows as results CSV on stdout, as rdmabw's --csv (= -o csv).
    #[arg(long, conflicts_with = "output", help_heading = heading::OUTPUT)]
    pub csv: bool,
    /// The results file.
    #[arg(long = "output-file", value_name = "FILE", help_heading = heading::OUTPUT)]
    pub output_file: Option<PathBuf>,
}

impl FormatFlags {
    /// The format asked for (`-o`, `--json`, `--csv`), if any.
    pub fn format(&self) -> Option<OutFormat> {
        if self.json {
            Some(OutFormat::Json)
        } else if self.csv {
            Some(OutFormat::Csv)
        } else {
            self.output
        }
    }

    /// The format asked for, refused with the ones `command` takes when it is not one of
    /// `allowed`.
    ///
    /// # Errors
    ///
    /// A format `command` does not print.
    pub fn format_in(&self, command: &str, allowed: &[OutFormat]) -> Result<Option<OutFormat>> {
        match self.format() {
            Some(f) if !allowed.contains(&f) => {
                let names: Vec<&str> = allowed.iter().map(|f| f.name()).collect();
                bail!("-o {}: {command} prints {}", f.name(), names.join(", "))
            }
            f => Ok(f),
        }
    }
}
