//! CSV: one header line, then one line per rail.
//!
//! The first column is `schema_version`, repeated on every row so that rows
//! appended by different program versions stay self-describing; the rest are
//! the fields of [`RailResult`] in declaration order, less `counters`, which go to a
//! file of their own beside it ([`crate::countersio`]; since version 5). The `diagnosis` cell
//! holds the findings' words joined by `;` (`loss;link-flap`), empty when there is none; the
//! findings themselves go to the findings file beside it ([`crate::findingsio`]; since
//! version 10, compact JSON in the cell before, which still reads). The reader
//! accepts the columns in any order but insists on exactly the schema's set of
//! columns, less those added after the file's version
//! ([`crate::record::ADDED_FIELDS`]); the `counters` column of a file before version 5
//! reads as it was written.

use std::cell::Cell;
use std::fmt;
use std::io::{Read, Write};

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::error::{Location, Result, ResultsError};
use crate::record::{field_required, RailResult, SCHEMA_VERSION};

/// Name of the leading CSV column holding the schema version.
pub const SCHEMA_VERSION_COLUMN: &str = "schema_version";

/// The column of [`RailResult::counters`] in files before version 5, which still read;
/// written no more (the counters file holds them).
const LEGACY_COUNTERS_COLUMN: &str = "counters";

/// The column of [`RailResult::diagnosis`]: the findings' words since version 10 (the findings
/// themselves go to the findings file, [`crate::findingsio`]), compact JSON before.
const DIAGNOSIS_COLUMN: &str = "diagnosis";

/// What separates the words of the `diagnosis` cell.
const FINDING_SEPARATOR: char = ';';

/// The `diagnosis` cell: the words of the row's finding kinds, each once, in order, joined by
/// `;` (`loss;link-flap`); empty when there is none.
fn diagnosis_cell(row: &RailResult) -> String {
    let words: Vec<&str> = row.finding_kinds().into_iter().map(|k| k.word()).collect();
    words.join(&FINDING_SEPARATOR.to_string())
}

/// A `diagnosis` cell as the JSON list it stands for: a list of version 2 to 9 as it is, the
/// words of version 10 on as findings of their kind alone (no summary, evidence or advice:
/// those are in the findings file and in JSON).
fn diagnosis_json(cell: &str) -> std::result::Result<String, String> {
    let cell = cell.trim();
    if cell.is_empty() || cell.starts_with('[') {
        return Ok(cell.to_string());
    }
    let findings = cell
        .split(FINDING_SEPARATOR)
        .map(|word| {
            let word = word.trim();
            let kind = crate::rdmabw::counters::FindingKind::from_word(word).ok_or_else(|| {
                let known: Vec<&str> = crate::rdmabw::counters::FindingKind::ALL
                    .iter()
                    .map(|k| k.word())
                    .collect();
                format!(
                    "unknown finding {}; expected words among {}, joined by `;`",
                    show(word),
                    known.join(", ")
                )
            })?;
            Ok(serde_json::json!({
                "finding": kind,
                "summary": "",
                "evidence": [],
                "what_to_do": "",
            }))
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    Ok(serde_json::Value::from(findings).to_string())
}

/// The fields that have a CSV column: [`RailResult::field_names`] less `counters`.
fn csv_fields() -> impl Iterator<Item = &'static str> {
    RailResult::field_names()
        .iter()
        .copied()
        .filter(|f| *f != LEGACY_COUNTERS_COLUMN)
}

/// The CSV header: `schema_version` followed by [`RailResult::field_names`] less `counters`.
pub fn csv_header() -> Vec<&'static str> {
    std::iter::once(SCHEMA_VERSION_COLUMN)
        .chain(csv_fields())
        .collect()
}

fn check_row(row: &RailResult) -> Result<()> {
    row.validate().map_err(|problem| ResultsError::InvalidRow {
        run_id: row.run_id.clone(),
        rail: row.rail,
        problem,
    })
}

/// The header line, terminated by a newline.
pub(crate) fn header_bytes() -> Result<Vec<u8>> {
    let mut wtr = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    wtr.write_record(csv_header())
        .map_err(|e| ResultsError::export("csv", e))?;
    wtr.into_inner()
        .map_err(|e| ResultsError::export("csv", e.error()))
}

/// One validated row as a CSV line (possibly several physical lines when a
/// text field holds newlines), terminated by a newline.
pub(crate) fn row_bytes(row: &RailResult) -> Result<Vec<u8>> {
    check_row(row)?;
    let mut wtr = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    wtr.write_record(row_cells(row)?)
        .map_err(|e| ResultsError::export("csv", e))?;
    wtr.into_inner()
        .map_err(|e| ResultsError::export("csv", e.error()))
}

/// Significant digits of the fractional numbers (`f64` fields) in CSV cells. A bandwidth's
/// relative uncertainty from its timing alone (clock reads at both ends of a window of a second
/// or more) is about 10^-6, and the intervals of one window differ far more, so six digits keep
/// all a measurement carries and drop the float noise (`2.3383244800000003` is `2.33832`).
/// JSON keeps every bit.
pub const CSV_SIGNIFICANT_DIGITS: usize = 6;

/// A fractional number as a CSV cell: rounded to [`CSV_SIGNIFICANT_DIGITS`], then the shortest
/// text that reads back to that rounded value (`96.87`, `10.0`, `1e-9`).
pub(crate) fn number_cell(x: f64) -> String {
    let rounded: f64 = format!("{x:.prec$e}", prec = CSV_SIGNIFICANT_DIGITS - 1)
        .parse()
        .unwrap_or(x);
    serde_json::Value::from(rounded).to_string()
}

/// The cells of one row in header order: scalars as their text (`null` an empty cell),
/// lists as compact JSON (an empty list an empty cell). Integers are written whole; fractional
/// numbers rounded to [`CSV_SIGNIFICANT_DIGITS`] ([`number_cell`]).
fn row_cells(row: &RailResult) -> Result<Vec<String>> {
    let value = serde_json::to_value(row).map_err(|e| ResultsError::export("csv", e))?;
    let serde_json::Value::Object(fields) = value else {
        return Err(ResultsError::export(
            "csv",
            CellError("a row is not a map".into()),
        ));
    };
    let cell = |v: Option<&serde_json::Value>| match v {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => text_cell(s),
        Some(serde_json::Value::Array(a)) if a.is_empty() => String::new(),
        Some(serde_json::Value::Number(n)) if n.is_f64() => {
            n.as_f64().map_or_else(|| n.to_string(), number_cell)
        }
        Some(other) => other.to_string(),
    };
    Ok(std::iter::once(SCHEMA_VERSION.to_string())
        .chain(csv_fields().map(|f| {
            if f == DIAGNOSIS_COLUMN {
                diagnosis_cell(row)
            } else {
                cell(fields.get(f))
            }
        }))
        .collect())
}

/// The first characters that make a spreadsheet run a cell as a formula (`=`, `+`, `-`, `@`,
/// and tab or carriage return, which some strip before looking), and the quote that marks a
/// cell as text.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// A text cell as written: one that a spreadsheet would run as a formula (a node name or an
/// error text from elsewhere, `=HYPERLINK(..)`), or that already begins with `'`, gets a
/// leading `'`, which spreadsheets show as text and [`read_csv`] takes off again. Numbers are
/// never text cells: `-1.5` in a numeric column stays a number.
pub(crate) fn text_cell(s: &str) -> String {
    if s.starts_with(FORMULA_STARTS) || s.starts_with('\'') {
        format!("'{s}")
    } else {
        s.to_string()
    }
}

/// A text cell as read: [`text_cell`] undone.
pub(crate) fn untext_cell(s: &str) -> &str {
    s.strip_prefix('\'').unwrap_or(s)
}

/// Write a header and `rows` as CSV. Every row is validated first
/// ([`RailResult::validate`]); nothing is written if one is invalid.
pub fn write_csv<W: Write>(out: W, rows: &[RailResult]) -> Result<()> {
    write_csv_rows(out, rows, true)
}

/// [`write_csv`], with the header line only when `header` is true: a stream of rows written
/// as they come (`rdmabw --csv --run_infinitely`) has one header, then row after row.
pub fn write_csv_rows<W: Write>(mut out: W, rows: &[RailResult], header: bool) -> Result<()> {
    let mut buf = if header { header_bytes()? } else { Vec::new() };
    for row in rows {
        buf.extend(row_bytes(row)?);
    }
    out.write_all(&buf)
        .and_then(|()| out.flush())
        .map_err(|e| ResultsError::io("<csv output>", e))
}

/// Read results CSV written by [`write_csv`] or [`crate::RowSink`].
///
/// `file` names the input in error messages. Every problem is an error with
/// its line and column: a missing, unknown or repeated column, a
/// `schema_version` newer than [`SCHEMA_VERSION`], a row with the wrong
/// number of cells, a value that does not parse, or a row that breaks
/// [`RailResult::validate`]. No row is skipped. The findings of a version 10 file read as
/// their kinds alone: [`crate::read_path`] reads the findings file beside a CSV too.
pub fn read_csv<R: Read>(input: R, file: &str) -> Result<Vec<RailResult>> {
    read_csv_rows(input, file, None)
}

/// [`read_csv`], but a row that parses and breaks [`RailResult::validate`] goes to
/// `left_out` (when given) as the error that names it, with the row and the number of rows
/// read before it, and the reading goes on.
pub(crate) fn read_csv_rows<R: Read>(
    input: R,
    file: &str,
    mut left_out: Option<&mut Vec<(ResultsError, RailResult, usize)>>,
) -> Result<Vec<RailResult>> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(input);
    let at = |line: u64, column: u64| Location {
        file: file.to_string(),
        line,
        column,
    };
    let mut records = rdr.records();
    let header = match records.next() {
        None => {
            return Err(ResultsError::parse(
                at(1, 1),
                "empty file; expected a CSV header",
            ))
        }
        Some(rec) => rec.map_err(|e| csv_error(file, e))?,
    };
    let header_line = header.position().map_or(1, |p| p.line());
    let names: Vec<&str> = header.iter().collect();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(ResultsError::DuplicateColumn {
                at: at(header_line, col(i)),
                column: (*name).to_string(),
            });
        }
    }
    let expected = csv_header();
    let Some(sv_idx) = names.iter().position(|n| *n == SCHEMA_VERSION_COLUMN) else {
        return Err(ResultsError::MissingColumn {
            at: at(header_line, 1),
            column: SCHEMA_VERSION_COLUMN.to_string(),
        });
    };
    // Column checks come after the first row's schema_version, so that a file
    // from a newer schema is reported as such rather than as odd columns.
    let check_columns = |version: u32| -> Result<()> {
        for (i, want) in expected.iter().enumerate() {
            if !names.contains(want) && field_required(want, version) {
                return Err(ResultsError::MissingColumn {
                    at: at(header_line, col(i)),
                    column: (*want).to_string(),
                });
            }
        }
        for (i, name) in names.iter().enumerate() {
            if !expected.contains(name) && *name != LEGACY_COUNTERS_COLUMN {
                return Err(ResultsError::UnknownColumn {
                    at: at(header_line, col(i)),
                    column: (*name).to_string(),
                    supported: SCHEMA_VERSION,
                });
            }
        }
        Ok(())
    };

    let mut rows = Vec::new();
    let mut columns_checked = false;
    for rec in records {
        let rec = rec.map_err(|e| csv_error(file, e))?;
        let line = rec.position().map_or(0, |p| p.line());
        let sv_cell = rec.get(sv_idx).unwrap_or("");
        let version: u64 = sv_cell.trim().parse().map_err(|_| {
            ResultsError::parse(
                at(line, col(sv_idx)),
                format!(
                    "column `{SCHEMA_VERSION_COLUMN}`: expected a version number, found {}",
                    show(sv_cell)
                ),
            )
        })?;
        if version > u64::from(SCHEMA_VERSION) {
            return Err(ResultsError::NewerSchema {
                at: at(line, col(sv_idx)),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if version == 0 {
            return Err(ResultsError::parse(
                at(line, col(sv_idx)),
                format!("column `{SCHEMA_VERSION_COLUMN}`: versions start at 1, found 0"),
            ));
        }
        if !columns_checked {
            check_columns(u32::try_from(version).unwrap_or(SCHEMA_VERSION))?;
            columns_checked = true;
        }
        if rec.len() != names.len() {
            return Err(ResultsError::parse(
                at(line, col(rec.len().min(names.len()))),
                format!(
                    "row has {} cells but the header has {} columns",
                    rec.len(),
                    names.len()
                ),
            ));
        }
        // The diagnosis cell's words, as the JSON list the record reads.
        let diagnosis = match names.iter().position(|n| *n == DIAGNOSIS_COLUMN) {
            Some(i) => Some(diagnosis_json(rec.get(i).unwrap_or("")).map_err(|message| {
                ResultsError::parse(
                    at(line, col(i)),
                    format!("column `{DIAGNOSIS_COLUMN}`: {message}"),
                )
            })?),
            None => None,
        };
        let cells: Vec<(&str, &str, usize)> = names
            .iter()
            .zip(rec.iter())
            .enumerate()
            .filter(|(i, _)| *i != sv_idx)
            .map(
                |(i, (name, value))| match (&diagnosis, *name == DIAGNOSIS_COLUMN) {
                    (Some(list), true) => (*name, list.as_str(), i),
                    _ => (*name, value, i),
                },
            )
            .collect();
        let current = Cell::new(None);
        let row = RailResult::deserialize(RecordDe {
            cells: &cells,
            current: &current,
        })
        .map_err(|e| {
            let i = current.get().unwrap_or(0);
            let name = names.get(i).copied().unwrap_or("?");
            ResultsError::parse(at(line, col(i)), format!("column `{name}`: {}", e.0))
        })?;
        if let Err(problem) = row.validate() {
            let i = names.iter().position(|n| *n == problem.field).unwrap_or(0);
            let e = ResultsError::parse(
                at(line, col(i)),
                format!("column `{}` {}", problem.field, problem.message),
            );
            match left_out.as_deref_mut() {
                Some(left_out) => left_out.push((e, row, rows.len())),
                None => return Err(e),
            }
            continue;
        }
        rows.push(row);
    }
    if !columns_checked {
        // A header and no row: the header's own columns say which version wrote it.
        check_columns(1)?;
    }
    Ok(rows)
}

/// 0-based cell index to 1-based column.
pub(crate) fn col(i: usize) -> u64 {
    u64::try_from(i).map_or(u64::MAX, |i| i + 1)
}

pub(crate) fn show(value: &str) -> String {
    if value.is_empty() {
        "an empty cell".to_string()
    } else {
        format!("`{value}`")
    }
}

pub(crate) fn csv_error(file: &str, e: csv::Error) -> ResultsError {
    let (line, column) = match e.kind() {
        csv::ErrorKind::Utf8 { pos, err } => {
            (pos.as_ref().map_or(0, |p| p.line()), col(err.field()))
        }
        _ => (e.position().map_or(0, |p| p.line()), 1),
    };
    let at = Location {
        file: file.to_string(),
        line,
        column,
    };
    match e.into_kind() {
        csv::ErrorKind::Io(err) => ResultsError::io(file, err),
        csv::ErrorKind::Utf8 { .. } => ResultsError::parse(at, "invalid UTF-8"),
        other => ResultsError::parse(at, format!("malformed CSV: {other:?}")),
    }
}

/// Error from deserializing one cell; the reader adds the location.
#[derive(Debug)]
struct CellError(String);

impl fmt::Display for CellError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CellError {}

impl de::Error for CellError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        CellError(msg.to_string())
    }
}

/// A row as a map from column name to cell text. `current` records which
/// cell is being deserialized, so that any error, including ones raised by
/// serde's derived code, can be pinned to its column.
struct RecordDe<'a> {
    cells: &'a [(&'a str, &'a str, usize)],
    current: &'a Cell<Option<usize>>,
}

impl<'de> de::Deserializer<'de> for RecordDe<'_> {
    type Error = CellError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CellError> {
        visitor.visit_map(RowAccess {
            cells: self.cells.iter(),
            value: None,
            current: self.current,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

struct RowAccess<'a> {
    cells: std::slice::Iter<'a, (&'a str, &'a str, usize)>,
    value: Option<(&'a str, usize)>,
    current: &'a Cell<Option<usize>>,
}

impl<'de> MapAccess<'de> for RowAccess<'_> {
    type Error = CellError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, CellError> {
        match self.cells.next() {
            None => Ok(None),
            Some(&(name, value, index)) => {
                self.value = Some((value, index));
                self.current.set(Some(index));
                let key: de::value::StrDeserializer<'_, CellError> = name.into_deserializer();
                seed.deserialize(key).map(Some)
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, CellError> {
        let (value, index) = self
            .value
            .take()
            .ok_or_else(|| CellError("value requested before key".into()))?;
        self.current.set(Some(index));
        seed.deserialize(CellDe(value))
    }
}

/// One cell's text, parsed as whatever the field's type asks for.
struct CellDe<'a>(&'a str);

impl CellDe<'_> {
    fn number<T: std::str::FromStr>(&self, what: &str) -> Result<T, CellError> {
        self.0
            .trim()
            .parse()
            .map_err(|_| CellError(format!("expected {what}, found {}", show(self.0))))
    }
}

macro_rules! parse_number {
    ($($method:ident => $visit:ident : $ty:ty, $what:literal;)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CellError> {
                visitor.$visit(self.number::<$ty>($what)?)
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for CellDe<'_> {
    type Error = CellError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CellError> {
        visitor.visit_str(untext_cell(self.0))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CellError> {
        visitor.visit_bool(self.number::<bool>("true or false")?)
    }

    parse_number! {
        deserialize_i8 => visit_i8: i8, "an integer from -128 to 127";
        deserialize_i16 => visit_i16: i16, "an integer from -32768 to 32767";
        deserialize_i32 => visit_i32: i32, "a 32-bit integer";
        deserialize_i64 => visit_i64: i64, "a 64-bit integer";
        deserialize_u8 => visit_u8: u8, "an integer from 0 to 255";
        deserialize_u16 => visit_u16: u16, "an integer from 0 to 65535";
        deserialize_u32 => visit_u32: u32, "an integer from 0 to 4294967295";
        deserialize_u64 => visit_u64: u64, "a non-negative integer";
        deserialize_f32 => visit_f32: f32, "a number";
        deserialize_f64 => visit_f64: f64, "a number";
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CellError> {
        if self.0.is_empty() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, CellError> {
        let text: de::value::StrDeserializer<'_, CellError> =
            untext_cell(self.0).into_deserializer();
        visitor.visit_enum(text)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, CellError> {
        visitor.visit_newtype_struct(self)
    }

    /// A list cell: compact JSON, or empty for an empty list.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CellError> {
        let text = if self.0.trim().is_empty() {
            "[]"
        } else {
            self.0
        };
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| CellError(format!("expected a JSON list (or an empty cell), {e}")))?;
        de::Deserializer::deserialize_seq(value, visitor).map_err(|e| CellError(e.to_string()))
    }

    serde::forward_to_deserialize_any! {
        i128 u128 char str string bytes byte_buf unit unit_struct tuple
        tuple_struct map struct identifier ignored_any
    }
}
