//! Reading a saved results file whose format is told by its name or its content.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::csvio::{read_csv, read_csv_rows, SCHEMA_VERSION_COLUMN};
use crate::error::{Result, ResultsError};
use crate::findingsio::{findings_csv_path, read_findings_into};
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

/// Read a saved results file, CSV or JSON; see [`read_str`]. A CSV's findings file beside it
/// ([`crate::findingsio`]), where there is one, gives its rows their findings whole.
pub fn read_path(path: impl AsRef<Path>) -> Result<Vec<RailResult>> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| ResultsError::io(&name, e))?;
    let content = read_capped(file, &name, u64::MAX)?;
    let mut rows = read_str(&content, &name)?;
    let content = content.strip_prefix('\u{feff}').unwrap_or(&content);
    if detect_format(&name, content)? == InputFormat::Csv {
        read_findings_beside(path, rows.iter_mut().collect(), u64::MAX)?;
    }
    Ok(rows)
}

/// Give `rows`, read from the results CSV at `csv`, the findings of the findings file beside
/// it ([`crate::findings_csv_path`], at most `max_bytes` of it); the file read, or `None` where
/// there is none.
fn read_findings_beside(
    csv: &Path,
    rows: Vec<&mut RailResult>,
    max_bytes: u64,
) -> Result<Option<PathBuf>> {
    let path = findings_csv_path(csv);
    let name = path.display().to_string();
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ResultsError::io(&name, e)),
    };
    let content = read_capped(file, &name, max_bytes)?;
    let content = content.strip_prefix('\u{feff}').unwrap_or(&content);
    read_findings_into(content.as_bytes(), &name, rows)?;
    Ok(Some(path))
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
    /// The findings file read beside a CSV ([`read_file_lenient`]), where there was one.
    pub findings_file: Option<PathBuf>,
}

/// [`read_str`], but a row that parses and breaks one of the record's rules
/// ([`RailResult::validate`]: a value out of range, a failed row without its error) is left
/// out and named in [`ReadRows::left_out`], and every other row still reads. Anything else
/// (a syntax error, a value that does not parse, a missing or unknown column, a newer
/// schema) is still an error for the whole input: such a file is not a results file as
/// written.
pub fn read_str_lenient(content: &str, name: &str) -> Result<ReadRows> {
    lenient(content, name, None)
}

/// [`read_str_lenient`] of `content`, the text of the file at `path`; where it is a CSV, the
/// findings file beside it ([`crate::findingsio`], at most `max_bytes` of it) gives its rows
/// their findings whole, as [`read_path`] does ([`ReadRows::findings_file`] names it).
pub fn read_file_lenient(content: &str, path: &Path, max_bytes: u64) -> Result<ReadRows> {
    lenient(
        content,
        &path.display().to_string(),
        Some((path, max_bytes)),
    )
}

fn lenient(content: &str, name: &str, beside: Option<(&Path, u64)>) -> Result<ReadRows> {
    let content = content.strip_prefix('\u{feff}').unwrap_or(content);
    let mut left_out = Vec::new();
    let mut findings_file = None;
    let rows = match detect_format(name, content)? {
        InputFormat::Csv => {
            let mut out = Vec::new();
            let mut rows = read_csv_rows(content.as_bytes(), name, Some(&mut out))?;
            if let Some((path, max_bytes)) = beside {
                // Every row in the file's order: the lines of a row left out go with it, not
                // to another row.
                let mut all: Vec<&mut RailResult> = Vec::new();
                let mut out_rows = out.iter_mut().peekable();
                for (i, row) in rows.iter_mut().enumerate() {
                    while let Some((_, r, _)) = out_rows.next_if(|(_, _, before)| *before == i) {
                        all.push(r);
                    }
                    all.push(row);
                }
                all.extend(out_rows.map(|(_, r, _)| r));
                findings_file = read_findings_beside(path, all, max_bytes)?;
            }
            left_out = out.into_iter().map(|(e, _, _)| e).collect();
            rows
        }
        InputFormat::Json => read_json_rows(content, name, Some(&mut left_out))?.rows,
    };
    Ok(ReadRows {
        rows,
        left_out,
        findings_file,
    })
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
