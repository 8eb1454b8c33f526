//! Reading a saved results file whose format is told by its name or its content.

use std::path::Path;

use crate::csvio::{read_csv, SCHEMA_VERSION_COLUMN};
use crate::error::{Result, ResultsError};
use crate::jsonio::read_json;
use crate::record::RailResult;

/// The two formats results are saved in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// Results CSV ([`crate::write_csv`], [`crate::RowSink`]).
    Csv,
    /// Results JSON envelope ([`crate::write_json`]).
    Json,
}

/// Tell CSV from JSON: by the extension `.csv` or `.json` (any case) when
/// there is one, otherwise by the content: JSON starts with `{`, results CSV
/// with a header naming `schema_version`.
pub fn detect_format(name: &str, content: &str) -> Result<InputFormat> {
    let ext = Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("csv") => return Ok(InputFormat::Csv),
        Some("json") => return Ok(InputFormat::Json),
        _ => {}
    }
    let trimmed = content.trim_start();
    if trimmed.starts_with('{') {
        Ok(InputFormat::Json)
    } else if trimmed
        .lines()
        .next()
        .is_some_and(|l| l.contains(SCHEMA_VERSION_COLUMN))
    {
        Ok(InputFormat::Csv)
    } else if trimmed.is_empty() {
        Err(ResultsError::UnknownFormat {
            file: name.to_string(),
            reason: "the file is empty".into(),
        })
    } else {
        Err(ResultsError::UnknownFormat {
            file: name.to_string(),
            reason: format!(
                "no .csv/.json extension, it does not start with `{{`, and its first line has no `{SCHEMA_VERSION_COLUMN}` column"
            ),
        })
    }
}

/// Read results from text, CSV or JSON as [`detect_format`] decides.
/// `name` is used for detection and in error messages. A leading UTF-8 byte
/// order mark (as spreadsheet programs write) is ignored.
pub fn read_str(content: &str, name: &str) -> Result<Vec<RailResult>> {
    let content = content.strip_prefix('\u{feff}').unwrap_or(content);
    match detect_format(name, content)? {
        InputFormat::Csv => read_csv(content.as_bytes(), name),
        InputFormat::Json => Ok(read_json(content, name)?.rows),
    }
}

/// Read a saved results file, CSV or JSON; see [`read_str`].
pub fn read_path(path: impl AsRef<Path>) -> Result<Vec<RailResult>> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| ResultsError::io(&name, e))?;
    let content = String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|b| **b == b'\n').count() + 1;
        let column = valid.len() - valid.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1) + 1;
        ResultsError::Parse {
            at: crate::error::Location {
                file: name.clone(),
                line: u64::try_from(line).unwrap_or(u64::MAX),
                column: u64::try_from(column).unwrap_or(u64::MAX),
            },
            message: "invalid UTF-8".into(),
        }
    })?;
    read_str(&content, &name)
}
