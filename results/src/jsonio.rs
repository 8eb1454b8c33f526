//! JSON: one envelope `{"schema_version": N, "generated_by": "...", "rows": [...]}`, and a
//! fleet's `"group_culprits": [...]` after the rows when it named a group (absent otherwise).

use std::collections::BTreeMap;
use std::io::Write;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::{Location, Result, ResultsError};
use crate::group::GroupCulprit;
use crate::record::{field_required, RailResult, SCHEMA_VERSION};

/// The contents of a results JSON file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonResults {
    /// Schema version of the rows ([`SCHEMA_VERSION`] when written by this crate).
    pub schema_version: u32,
    /// Free text naming the program (and version) that wrote the file.
    pub generated_by: String,
    /// One entry per rail.
    pub rows: Vec<RailResult>,
    /// The groups of nodes a fleet named as culprits (`--pattern topology`); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group_culprits: Vec<GroupCulprit>,
}

#[derive(Serialize)]
struct EnvelopeOut<'a> {
    schema_version: u32,
    generated_by: &'a str,
    rows: &'a [RailResult],
    #[serde(skip_serializing_if = "<[GroupCulprit]>::is_empty")]
    group_culprits: &'a [GroupCulprit],
}

/// The envelope as pretty-printed JSON with a trailing newline, `group_culprits` after the rows
/// (left out when empty). Every row is validated first ([`RailResult::validate`]).
pub(crate) fn json_bytes(
    generated_by: &str,
    rows: &[RailResult],
    group_culprits: &[GroupCulprit],
) -> Result<Vec<u8>> {
    for row in rows {
        row.validate().map_err(|problem| ResultsError::InvalidRow {
            run_id: row.run_id.clone(),
            rail: row.rail,
            problem,
        })?;
    }
    let envelope = EnvelopeOut {
        schema_version: SCHEMA_VERSION,
        generated_by,
        rows,
        group_culprits,
    };
    let mut out =
        serde_json::to_vec_pretty(&envelope).map_err(|e| ResultsError::export("json", e))?;
    out.push(b'\n');
    Ok(out)
}

/// Write `rows` as a JSON envelope with the current [`SCHEMA_VERSION`].
/// Nothing is written if a row is invalid.
pub fn write_json<W: Write>(mut out: W, generated_by: &str, rows: &[RailResult]) -> Result<()> {
    let bytes = json_bytes(generated_by, rows, &[])?;
    out.write_all(&bytes)
        .and_then(|()| out.flush())
        .map_err(|e| ResultsError::io("<json output>", e))
}

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    schema_version: &'a RawValue,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body<'a> {
    #[allow(dead_code)]
    schema_version: IgnoredAny,
    generated_by: String,
    #[serde(borrow)]
    rows: Vec<&'a RawValue>,
    #[serde(default)]
    group_culprits: Vec<GroupCulprit>,
}

/// Line and column (1-based, bytes) of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (u64, u64) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.bytes().filter(|b| *b == b'\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (to_u64(line), to_u64(column))
}

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Byte offset of `part`, a slice borrowed from `whole`.
fn offset_in(whole: &str, part: &str) -> usize {
    (part.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize)
}

/// serde_json's message without its " at line L column C" suffix.
fn bare_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(" at line ") {
        Some((msg, _)) if e.line() > 0 => msg.to_string(),
        _ => text,
    }
}

/// Read a results JSON envelope.
///
/// `file` names the input in error messages. Syntax errors, a missing or
/// newer `schema_version`, unknown envelope keys, rows with missing or
/// unknown keys, values of the wrong type and rows that break
/// [`RailResult::validate`] are all errors with line and column.
pub fn read_json(text: &str, file: &str) -> Result<JsonResults> {
    let at = |(line, column): (u64, u64)| Location {
        file: file.to_string(),
        line,
        column,
    };
    let whole_err = |e: serde_json::Error| {
        ResultsError::parse(at((to_u64(e.line()), to_u64(e.column()))), bare_message(&e))
    };

    let head: Head<'_> = serde_json::from_str(text).map_err(whole_err)?;
    let sv_at = at(line_col(text, offset_in(text, head.schema_version.get())));
    let version: u64 = serde_json::from_str(head.schema_version.get()).map_err(|_| {
        ResultsError::parse(
            sv_at.clone(),
            format!(
                "schema_version: expected a version number, found {}",
                head.schema_version.get()
            ),
        )
    })?;
    if version > u64::from(SCHEMA_VERSION) {
        return Err(ResultsError::NewerSchema {
            at: sv_at,
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if version == 0 {
        return Err(ResultsError::parse(
            sv_at,
            "schema_version: versions start at 1, found 0",
        ));
    }
    let schema_version = u32::try_from(version).unwrap_or(SCHEMA_VERSION);

    let body: Body<'_> = serde_json::from_str(text).map_err(whole_err)?;
    let fields = RailResult::field_names();
    let mut rows = Vec::with_capacity(body.rows.len());
    for (index, raw) in body.rows.iter().enumerate() {
        let raw_text = raw.get();
        let start = offset_in(text, raw_text);
        let (start_line, start_col) = line_col(text, start);
        let inner = |e: &serde_json::Error| {
            let (l, c) = (to_u64(e.line()), to_u64(e.column()));
            if l <= 1 {
                (start_line, start_col + c.saturating_sub(1))
            } else {
                (start_line + l - 1, c)
            }
        };
        let row_err = |e: serde_json::Error| {
            ResultsError::parse(at(inner(&e)), format!("row {index}: {}", bare_message(&e)))
        };
        let keys: BTreeMap<String, IgnoredAny> = serde_json::from_str(raw_text).map_err(row_err)?;
        if let Some(missing) = fields
            .iter()
            .find(|f| !keys.contains_key(**f) && field_required(f, schema_version))
        {
            return Err(ResultsError::MissingColumn {
                at: at((start_line, start_col)),
                column: (*missing).to_string(),
            });
        }
        if let Some(unknown) = keys.keys().find(|k| !fields.contains(&k.as_str())) {
            let pos = key_offset(raw_text, unknown)
                .map_or((start_line, start_col), |o| line_col(text, start + o));
            return Err(ResultsError::UnknownColumn {
                at: at(pos),
                column: unknown.clone(),
                supported: SCHEMA_VERSION,
            });
        }
        let row: RailResult = serde_json::from_str(raw_text).map_err(row_err)?;
        if let Err(problem) = row.validate() {
            let pos = key_offset(raw_text, problem.field)
                .map_or((start_line, start_col), |o| line_col(text, start + o));
            return Err(ResultsError::parse(
                at(pos),
                format!("row {index}: `{}` {}", problem.field, problem.message),
            ));
        }
        rows.push(row);
    }
    Ok(JsonResults {
        schema_version,
        generated_by: body.generated_by,
        rows,
        group_culprits: body.group_culprits,
    })
}

/// Byte offset of `"key"` used as a key (followed by `:`) in one JSON object.
fn key_offset(object: &str, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    let mut from = 0;
    while let Some(found) = object.get(from..)?.find(&quoted) {
        let at = from + found;
        let rest = object.get(at + quoted.len()..)?;
        if rest.trim_start().starts_with(':') {
            return Some(at);
        }
        from = at + quoted.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let text = "ab\ncd\nef";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 4), (2, 2));
        assert_eq!(line_col(text, 6), (3, 1));
    }

    #[test]
    fn key_offset_skips_values_that_look_like_keys() {
        let obj = r#"{"error": "rail", "rail": 3}"#;
        assert_eq!(key_offset(obj, "rail"), obj.find(r#""rail":"#));
        assert_eq!(key_offset(obj, "qps"), None);
    }
}
