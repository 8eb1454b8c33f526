//! Reading a saved results file whose format is told by its name or its content.

use std::io::Read;
use std::path::Path;

use crate::csvio::{read_csv, read_csv_rows, SCHEMA_VERSION_COLUMN};
use crate::error::{Result, ResultsError};
use crate::jsonio::{read_json, read_json_rows};
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
    let file = std::fs::File::open(path).map_err(|e| ResultsError::io(&name, e))?;
    let content = read_capped(file, &name, u64::MAX)?;
    read_str(&content, &name)
}

/// What [`read_str_lenient`] read: the rows that keep the record's rules, and the error of
/// each row left out.
#[derive(Debug, Default)]
pub struct ReadRows {
    /// The rows read, in file order.
    pub rows: Vec<RailResult>,
    /// Each row that parsed but broke [`RailResult::validate`] (a bandwidth of -1): an error
    /// naming its file, line and column, the field and the value.
    pub left_out: Vec<ResultsError>,
}

/// [`read_str`], but a row that parses and breaks one of the record's rules
/// ([`RailResult::validate`]: a value out of range, a failed row without its error) is left
/// out and named in [`ReadRows::left_out`], and every other row still reads. Anything else
/// (a syntax error, a value that does not parse, a missing or unknown column, a newer
/// schema) is still an error for the whole input: such a file is not a results file as
/// written.
pub fn read_str_lenient(content: &str, name: &str) -> Result<ReadRows> {
    let content = content.strip_prefix('\u{feff}').unwrap_or(content);
    let mut left_out = Vec::new();
    let rows = match detect_format(name, content)? {
        InputFormat::Csv => read_csv_rows(content.as_bytes(), name, Some(&mut left_out))?,
        InputFormat::Json => read_json_rows(content, name, Some(&mut left_out))?.rows,
    };
    Ok(ReadRows { rows, left_out })
}

/// All of `input` as text, refused when it holds more than `max_bytes`
/// ([`ResultsError::TooLarge`]: a reader holds its whole input, so its size is capped before
/// it is read, a FIFO or `/dev/zero` included) or is not UTF-8 (naming the line and column).
pub fn read_capped<R: Read>(input: R, name: &str, max_bytes: u64) -> Result<String> {
    let mut bytes = Vec::new();
    input
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| ResultsError::io(name, e))?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > max_bytes {
        return Err(ResultsError::TooLarge {
            file: name.to_string(),
            limit: max_bytes,
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|b| **b == b'\n').count() + 1;
        let column = valid.len() - valid.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1) + 1;
        ResultsError::Parse {
            at: crate::error::Location {
                file: name.to_string(),
                line: u64::try_from(line).unwrap_or(u64::MAX),
                column: u64::try_from(column).unwrap_or(u64::MAX),
            },
            message: "invalid UTF-8".into(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_over_the_cap_is_refused_before_it_is_read_whole() {
        let e = read_capped(std::io::repeat(b'x'), "/dev/zero", 1000).expect_err("capped");
        assert!(
            matches!(&e, ResultsError::TooLarge { file, limit: 1000 } if file == "/dev/zero"),
            "{e}"
        );
        assert_eq!(read_capped(&b"abc"[..], "f", 3).expect("fits"), "abc");
        let e = read_capped(&b"a\n\xffb"[..], "f", 10).expect_err("not UTF-8");
        assert_eq!(e.to_string(), "f:2:1: invalid UTF-8");
    }
}
