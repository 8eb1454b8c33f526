//! The crate's error type.

use std::fmt;
use std::io;

use crate::record::{InvalidRecord, NetworkMode};

/// A place in an input file: file name, 1-based line and 1-based column.
///
/// For CSV the column counts fields (cells); for JSON it counts characters,
/// as `serde_json` does. Displayed as `file:line:column`, the form editors
/// and terminals can jump to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file as the user named it (or a label such as `<stdin>`).
    pub file: String,
    /// 1-based line.
    pub line: u64,
    /// 1-based column.
    pub column: u64,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// Everything that can go wrong reading, writing or summarising results.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// Opening, reading, writing or syncing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A CSV header lacks a column of the schema (or a JSON row lacks a key).
    #[error("{at}: missing column `{column}`")]
    MissingColumn {
        /// Where the header (or row) is.
        at: Location,
        /// The column that is missing.
        column: String,
    },
    /// A CSV header (or JSON row) has a column the schema does not know.
    #[error("{at}: unknown column `{column}` (schema_version {supported} has no such column)")]
    UnknownColumn {
        /// Where the column is.
        at: Location,
        /// Its name.
        column: String,
        /// The schema version this crate reads.
        supported: u32,
    },
    /// A CSV header names the same column twice.
    #[error("{at}: column `{column}` appears twice")]
    DuplicateColumn {
        /// Where the second occurrence is.
        at: Location,
        /// Its name.
        column: String,
    },
    /// The file was written with a newer schema than this crate understands.
    #[error(
        "{at}: schema_version {found} is newer than this program reads \
         (schema_version {supported}); upgrade railbench to read this file"
    )]
    NewerSchema {
        /// Where the version is.
        at: Location,
        /// The version in the file.
        found: u64,
        /// The version this crate reads.
        supported: u32,
    },
    /// A value, a row or the file's syntax could not be parsed, or a row
    /// breaks one of the record's rules.
    #[error("{at}: {message}")]
    Parse {
        /// Where the problem is.
        at: Location,
        /// What is wrong, naming the column where there is one.
        message: String,
    },
    /// The file is neither results CSV nor results JSON.
    #[error("{file}: cannot tell whether this is CSV or JSON: {reason}")]
    UnknownFormat {
        /// The file.
        file: String,
        /// Why.
        reason: String,
    },
    /// A row given to a writer breaks one of the record's rules.
    #[error("run {run_id}, rail {rail}: invalid row: {problem}")]
    InvalidRow {
        /// The row's run.
        run_id: String,
        /// The row's rail.
        rail: u32,
        /// The broken rule.
        problem: InvalidRecord,
    },
    /// The same rail of the same run and mode appears more than once.
    #[error("run {run_id} ({mode}) has rail {rail} more than once; pass each run once")]
    DuplicateRail {
        /// The run.
        run_id: String,
        /// Its network mode.
        mode: NetworkMode,
        /// The repeated rail.
        rail: u32,
    },
    /// A column label was given for a run id or mode that no row has.
    #[error(
        "--label {key}=...: no run id or network mode `{key}` in the rows (they have: {known})"
    )]
    UnknownLabelKey {
        /// The key given.
        key: String,
        /// The run ids and modes the rows have, joined.
        known: String,
    },
    /// Serializing to CSV or JSON, or drawing the chart, failed.
    #[error("writing {format}: {message}")]
    Export {
        /// The output format.
        format: &'static str,
        /// What failed.
        message: String,
    },
    /// An input holds more bytes than the reader was allowed to take ([`crate::read_capped`]).
    #[error("{file}: larger than the limit of {limit} bytes on an input")]
    TooLarge {
        /// The input.
        file: String,
        /// The limit, bytes.
        limit: u64,
    },
    /// [`crate::RowSink::create`] was pointed at a file that already exists.
    #[error("{path}: already exists; refusing to overwrite earlier results (use RowSink::resume to append)")]
    AlreadyExists {
        /// The file.
        path: String,
    },
}

/// Result with [`ResultsError`] as the default error.
pub type Result<T, E = ResultsError> = std::result::Result<T, E>;

impl ResultsError {
    pub(crate) fn io(path: impl fmt::Display, source: io::Error) -> Self {
        ResultsError::Io {
            path: path.to_string(),
            source,
        }
    }

    pub(crate) fn parse(at: Location, message: impl Into<String>) -> Self {
        ResultsError::Parse {
            at,
            message: message.into(),
        }
    }

    pub(crate) fn export(format: &'static str, message: impl fmt::Display) -> Self {
        ResultsError::Export {
            format,
            message: message.to_string(),
        }
    }
}
