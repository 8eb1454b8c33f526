//! Output formats, all behind one trait.

pub mod escape;
mod markdown;
mod openmetrics;
mod png;
mod svg;

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::csvio::write_csv;
use crate::error::Result;
use crate::jsonio::json_bytes;
use crate::summary::Report;

pub use markdown::MarkdownExporter;
pub use openmetrics::OpenMetricsExporter;
pub use png::{svg_to_png, PngExporter};
pub use svg::{SvgExporter, MIN_WIDTH as CHART_MIN_WIDTH};

/// The distinct values, in the order met.
fn distinct_in_order(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for v in values {
        if !seen.contains(&v) {
            seen.push(v);
        }
    }
    seen
}

/// Turns a [`Report`] into the bytes of one output format.
pub trait Exporter {
    /// Serialize the whole report.
    fn serialize(&self, report: &Report) -> Result<Vec<u8>>;
}

/// Every row as results CSV (readable again by [`crate::read_csv`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn serialize(&self, report: &Report) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        write_csv(&mut out, &report.rows)?;
        Ok(out)
    }
}

/// Every row in a results JSON envelope (readable again by [`crate::read_json`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn serialize(&self, report: &Report) -> Result<Vec<u8>> {
        json_bytes(&report.generated_by, &report.rows, &report.group_culprits)
    }
}

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Results CSV: every row, lossless.
    Csv,
    /// Results JSON envelope: every row, lossless.
    Json,
    /// Comparison table, summary lines, differences and failures.
    Markdown,
    /// Grouped bar chart, one bar per rail and mode.
    Svg,
    /// The SVG chart rendered as a PNG image.
    Png,
    /// OpenMetrics text: a sample per node pair and rail (Prometheus, node-exporter's textfile
    /// collector, a Pushgateway).
    OpenMetrics,
}

impl Format {
    /// Every format, in the order help texts list them.
    pub const ALL: [Format; 6] = [
        Format::Markdown,
        Format::Csv,
        Format::Json,
        Format::Svg,
        Format::Png,
        Format::OpenMetrics,
    ];

    /// The exporter for this format, with default settings.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Csv => Box::new(CsvExporter),
            Format::Json => Box::new(JsonExporter),
            Format::Markdown => Box::new(MarkdownExporter),
            Format::Svg => Box::new(SvgExporter::default()),
            Format::Png => Box::new(PngExporter::default()),
            Format::OpenMetrics => Box::new(OpenMetricsExporter),
        }
    }

    /// The format's name, as accepted by [`Format::from_str`].
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Markdown => "markdown",
            Format::Svg => "svg",
            Format::Png => "png",
            Format::OpenMetrics => "openmetrics",
        }
    }

    /// The file name extensions that imply this format (any case), the first the usual one.
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            Format::Csv => &["csv"],
            Format::Json => &["json"],
            Format::Markdown => &["md", "markdown"],
            Format::Svg => &["svg"],
            Format::Png => &["png"],
            Format::OpenMetrics => &["prom"],
        }
    }

    /// Whether the format is binary (not text to show on a terminal).
    pub fn is_binary(self) -> bool {
        self == Format::Png
    }

    /// The format a file name's extension implies: `.csv`, `.json`, `.md` or
    /// `.markdown`, `.svg`, `.png`, `.prom` (any case).
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Format::ALL
            .into_iter()
            .find(|f| f.extensions().contains(&ext.as_str()))
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown format name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format `{0}`; expected markdown, csv, json, svg, png or openmetrics")]
pub struct UnknownFormatName(pub String);

impl FromStr for Format {
    type Err = UnknownFormatName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            "markdown" | "md" => Ok(Format::Markdown),
            "svg" => Ok(Format::Svg),
            "png" => Ok(Format::Png),
            "openmetrics" | "prom" => Ok(Format::OpenMetrics),
            _ => Err(UnknownFormatName(s.to_string())),
        }
    }
}
