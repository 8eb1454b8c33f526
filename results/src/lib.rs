//! results: typed rail result records and their reports.
//!
//! One [`RailResult`] per measured rail is the only result type. Around it:
//!
//! * writers and readers for CSV ([`write_csv`], [`read_csv`]) and a JSON
//!   envelope ([`write_json`], [`read_json`]), and [`read_path`] that tells
//!   them apart;
//! * [`RowSink`], which appends each row to disk as soon as it is measured;
//! * [`GroupCulprit`]: a fleet's group of nodes (a rack) named as the culprit on a rail, which
//!   the JSON envelope and the OpenMetrics text carry beside the rows;
//! * [`Report`] and [`Comparison`]: rails lined up per network mode, with
//!   [`ModeSummary`] lines and rail-by-rail [`RailDiff`]s;
//! * the [`Exporter`] trait with one implementation per [`Format`]
//!   (CSV, JSON, markdown, SVG chart);
//! * [`rdmabw`]: the documents rdmabw prints and railsweep reads, and rdmabw's
//!   `--csv` rows made of them.
//!
//! Readers never skip anything: a missing column, a newer
//! [`SCHEMA_VERSION`] or a value that does not parse is a [`ResultsError`]
//! naming file, line and column. [`read_str_lenient`] alone leaves out the rows that parse
//! but break the record's rules (a value out of range), naming each, and reads the rest.
#![forbid(unsafe_code)]

/// `eprintln!` that never panics: a line on standard error, dropped when nobody reads it any
/// more (a closed pipe such as `railsweep ... 2>&1 | head`). Logs and progress must not turn a
/// measured run into a panic (exit 101) or skip its clean-up.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// `eprint!` that never panics (see [`say!`]).
#[macro_export]
macro_rules! say_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr().lock(), $($arg)*);
    }};
}

#[cfg(feature = "charts")]
pub mod charts;
pub mod countersio;
mod csvio;
mod error;
#[cfg(feature = "charts")]
mod export;
pub mod findingsio;
mod group;
mod introspect;
mod jsonio;
mod layer;
pub mod rdmabw;
mod read;
mod record;
mod replace;
pub mod rounds;
mod sink;
pub mod stats;
mod summary;
pub mod verdict;

pub use countersio::{counters_csv_path, write_counters_csv, COUNTERS_HEADER};
pub use csvio::{
    csv_header, read_csv, write_csv, write_csv_rows, CSV_SIGNIFICANT_DIGITS, SCHEMA_VERSION_COLUMN,
};
pub use error::{Location, Result, ResultsError};
#[cfg(feature = "charts")]
pub use export::escape;
/// The narrowest chart [`SvgExporter`] draws, in pixels.
#[cfg(feature = "charts")]
pub use export::CHART_MIN_WIDTH;
#[cfg(feature = "charts")]
pub use export::{
    svg_to_png, CsvExporter, Exporter, Format, JsonExporter, MarkdownExporter, PngExporter,
    SvgExporter, UnknownFormatName,
};
pub use findingsio::{findings_csv_path, read_findings_csv, write_findings_csv, FINDINGS_HEADER};
pub use group::GroupCulprit;
pub use jsonio::{read_json, write_json, JsonResults};
pub use read::{
    detect_format, read_capped, read_file_lenient, read_path, read_str, read_str_lenient,
    InputFormat, ReadRows,
};
pub use record::{
    rfc3339_utc, unix_seconds, EmptyNetworkMode, InvalidRecord, MemoryKind, NetworkMode,
    RailResult, RailStatus, SCHEMA_VERSION,
};
pub use replace::replace_file;
pub use sink::RowSink;
pub use summary::{fmt_number, ChartOptions, Comparison, ModeSummary, RailDiff, Report, Series};
pub use verdict::{judge, Cause, FleetBlame, Layer, Verdict};
pub use wire::threshold;
pub use wire::threshold::{above_max_p99, below_threshold, percent_of_line_rate, threshold_gbps};
/// The build's version (`0.1.0+cd06ab8`): [`wire::VERSION`].
pub use wire::VERSION;
