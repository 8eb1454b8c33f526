//! The findings file: every counter finding of every row, one line per counter it rests on, in
//! long format, written beside a results CSV (`NAME.findings.csv` beside `NAME.csv`), so that
//! the CSV's `diagnosis` cell holds only the findings' words (`loss;link-flap`; since version
//! 10) and a spreadsheet can filter the evidence.
//!
//! Columns: `run`, `mode`, `rail`, `finding` (its word, as in the `diagnosis` cell), `side`
//! (`client` or `server`, the end whose counter shows it), `node` (that side's: it tells the
//! pairs of a fleet apart, whose rows share run, mode and rail), `source` (`port`, `hw`,
//! `netdev`), `counter`, `delta`, `per_s` (the delta per second of the read span, to six
//! significant digits), `summary` (the finding in words, with its figures) and `what_to_do`.
//! A finding that rests on no counter has one line with `side` to `per_s` empty. The file is
//! written, not read: results JSON keeps each finding whole with the rest of its row.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Result, ResultsError};
use crate::rdmabw::report::Role;
use crate::record::RailResult;

/// The findings file's header.
pub const FINDINGS_HEADER: [&str; 12] = [
    "run",
    "mode",
    "rail",
    "finding",
    "side",
    "node",
    "source",
    "counter",
    "delta",
    "per_s",
    "summary",
    "what_to_do",
];

/// The findings file beside the results CSV `csv`: `NAME.findings.csv` for `NAME.csv` (or for
/// `NAME` with any other extension or none).
pub fn findings_csv_path(csv: &Path) -> PathBuf {
    let stem = csv.file_stem().unwrap_or_default();
    let mut name = stem.to_os_string();
    name.push(".findings.csv");
    csv.with_file_name(name)
}

fn export_err(e: impl std::fmt::Display) -> ResultsError {
    ResultsError::export("findings csv", e)
}

/// The header line, terminated by a newline.
pub(crate) fn findings_header_bytes() -> Result<Vec<u8>> {
    let mut wtr = csv::WriterBuilder::new().from_writer(Vec::new());
    wtr.write_record(FINDINGS_HEADER).map_err(export_err)?;
    wtr.into_inner().map_err(|e| export_err(e.error()))
}

/// The lines of one row's findings (none when it has none), each terminated by a newline.
pub(crate) fn findings_row_bytes(row: &RailResult) -> Result<Vec<u8>> {
    use crate::csvio::text_cell;
    let mut wtr = csv::WriterBuilder::new().from_writer(Vec::new());
    let rail = row.rail.to_string();
    for f in &row.diagnosis {
        let head = [
            text_cell(&row.run_id),
            row.network_mode.as_str().to_string(),
            rail.clone(),
            f.finding.word().to_string(),
        ];
        let tail = [text_cell(&f.summary), text_cell(&f.what_to_do)];
        let mut lines: Vec<[String; 6]> = f
            .evidence
            .iter()
            .map(|e| {
                let node = match e.role {
                    Role::Client => &row.client_node,
                    Role::Server => &row.server_node,
                };
                [
                    e.role.as_str().to_string(),
                    text_cell(node),
                    e.source.as_str().to_string(),
                    text_cell(&e.counter),
                    e.delta.to_string(),
                    crate::csvio::number_cell(e.per_s),
                ]
            })
            .collect();
        if lines.is_empty() {
            lines.push(Default::default());
        }
        for middle in lines {
            wtr.write_record(head.iter().chain(&middle).chain(&tail))
                .map_err(export_err)?;
        }
    }
    wtr.into_inner().map_err(|e| export_err(e.error()))
}

/// Whether any of `rows` has a finding, so that a findings file has something to hold.
pub fn any_findings(rows: &[RailResult]) -> bool {
    rows.iter().any(|r| !r.diagnosis.is_empty())
}

/// Write the header and every finding of `rows` in long format.
pub fn write_findings_csv<W: Write>(mut out: W, rows: &[RailResult]) -> Result<()> {
    let mut buf = findings_header_bytes()?;
    for row in rows {
        buf.extend(findings_row_bytes(row)?);
    }
    out.write_all(&buf)
        .and_then(|()| out.flush())
        .map_err(|e| ResultsError::io("<findings csv output>", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_findings_file_sits_beside_the_results_csv() {
        assert_eq!(
            findings_csv_path(Path::new("out/sweep.csv")),
            Path::new("out/sweep.findings.csv")
        );
        assert_eq!(
            findings_csv_path(Path::new("fleet")),
            Path::new("fleet.findings.csv")
        );
    }
}
