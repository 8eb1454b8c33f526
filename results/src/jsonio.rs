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

/// Line and column (1-based, bytes) of byte `offset` in `text`. It reads the text up to
/// `offset`, so a reader calls it for an error only: once per row made reading quadratic (an
/// 8 MB file took 21 s).
fn line_col(text: &str, offset: usize) -> (u64, u64) {
    let before = text.get(..offset).unwrap_or(text);
    #[cfg(test)]
    tests::SCANNED.with(|s| s.set(s.get() + before.len()));
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
    read_json_rows(text, file, None)
}

/// [`read_json`], but a row that parses and breaks [`RailResult::validate`] goes to
/// `left_out` (when given) as the error that names it, and the reading goes on.
pub(crate) fn read_json_rows(
    text: &str,
    file: &str,
    mut left_out: Option<&mut Vec<ResultsError>>,
) -> Result<JsonResults> {
    let at = |(line, column): (u64, u64)| Location {
        file: file.to_string(),
        line,
        column,
    };
    let whole_err = |e: serde_json::Error| {
        ResultsError::parse(at((to_u64(e.line()), to_u64(e.column()))), bare_message(&e))
    };

    let head: Head<'_> = serde_json::from_str(text).map_err(whole_err)?;
    // Positions are worked out for an error only ([`line_col`] reads the text up to them).
    let sv_at = || at(line_col(text, offset_in(text, head.schema_version.get())));
    let version: u64 = serde_json::from_str(head.schema_version.get()).map_err(|_| {
        ResultsError::parse(
            sv_at(),
            format!(
                "schema_version: expected a version number, found {}",
                head.schema_version.get()
            ),
        )
    })?;
    if version > u64::from(SCHEMA_VERSION) {
        return Err(ResultsError::NewerSchema {
            at: sv_at(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if version == 0 {
        return Err(ResultsError::parse(
            sv_at(),
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
        let row_start = || line_col(text, start);
        let inner = |e: &serde_json::Error| {
            let (start_line, start_col) = row_start();
            let (l, c) = (to_u64(e.line()), to_u64(e.column()));
            if l <= 1 {
                (start_line, start_col + c.saturating_sub(1))
            } else {
                (start_line + l - 1, c)
            }
        };
        // The position of `key` in the row, else of the row.
        let key_at = |key: &str| {
            key_offset(raw_text, key).map_or_else(row_start, |o| line_col(text, start + o))
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
                at: at(row_start()),
                column: (*missing).to_string(),
            });
        }
        if let Some(unknown) = keys.keys().find(|k| !fields.contains(&k.as_str())) {
            return Err(ResultsError::UnknownColumn {
                at: at(key_at(unknown)),
                column: unknown.clone(),
                supported: SCHEMA_VERSION,
            });
        }
        let row: RailResult = serde_json::from_str(raw_text).map_err(row_err)?;
        if let Err(problem) = row.validate() {
            let e = ResultsError::parse(
                at(key_at(problem.field)),
                format!("row {index}: `{}` {}", problem.field, problem.message),
            );
            match left_out.as_deref_mut() {
                Some(left_out) => left_out.push(e),
                None => return Err(e),
            }
            continue;
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

    thread_local! {
        /// Bytes [`line_col`] has read on this thread: the reader's work beyond parsing.
        pub(super) static SCANNED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// A results JSON envelope of `n` rows, as the writer makes it (from version-1 CSV rows).
    fn envelope(n: usize) -> String {
        let mut text = String::from(
            "schema_version,run_id,time_utc,network_mode,cluster,client_pod,client_node,\
             server_pod,server_node,rail,client_interface,client_rdma_device,client_gid_index,\
             server_interface,server_rdma_device,server_gid_index,traffic_class,mtu_bytes,\
             msg_size_bytes,qps,duration_s,iterations,memory,status,bw_avg_gbps,bw_peak_gbps,\
             msg_rate_mpps,bw_p1_gbps,bw_p50_gbps,bw_p99_gbps,line_rate_gbps,line_rate_pct,\
             threshold_gbps,error\n",
        );
        for i in 0..n {
            text.push_str(&format!(
                "1,run-{i},2025-06-01T10:00:00Z,hostnetwork,lab,podA,node-a,podB,node-b,0,rdma0,\
                 mlx5_0,3,rdma0,mlx5_0,3,106,4096,65536,4,10.0,,host,ok,96.87,96.92,0.1848,\
                 96.56,96.88,96.91,100.0,96.87,90.0,\n"
            ));
        }
        let rows = crate::read_csv(text.as_bytes(), "gen.csv").expect("generated rows read");
        let mut out = Vec::new();
        write_json(&mut out, "test", &rows).expect("writes");
        String::from_utf8(out).expect("utf-8")
    }

    /// Issue 53, finding 3: the reader worked out the line and column of every row from the
    /// start of the file, quadratic in its size. Reading a good file reads no positions;
    /// a bad row's position is worked out once, for its error.
    #[test]
    fn reading_works_out_positions_for_an_error_only() {
        let text = envelope(2000);
        SCANNED.with(|s| s.set(0));
        let read = read_json(&text, "big.json").expect("reads");
        assert_eq!(read.rows.len(), 2000);
        let scanned = SCANNED.with(std::cell::Cell::get);
        assert!(
            scanned <= text.len(),
            "read {scanned} bytes of positions for a {}-byte file",
            text.len()
        );
        // The last row bad: its error still names its line, the work about one file's length.
        let bad = {
            let at = text.rfind("\"bw_peak_gbps\": ").expect("a peak");
            format!(
                "{}\"bw_peak_gbps\": -1.0,{}",
                &text[..at],
                &text[at..].split_once(',').expect("comma").1
            )
        };
        SCANNED.with(|s| s.set(0));
        let e = read_json(&bad, "big.json").expect_err("a bad row");
        let line = bad[..bad.rfind("\"bw_peak_gbps\"").expect("peak")]
            .lines()
            .count();
        assert!(
            e.to_string().starts_with(&format!("big.json:{line}:")),
            "{e}"
        );
        assert!(e.to_string().contains("`bw_peak_gbps`"), "{e}");
        let scanned = SCANNED.with(std::cell::Cell::get);
        assert!(
            scanned <= 3 * bad.len(),
            "read {scanned} bytes for {}",
            bad.len()
        );
    }

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
