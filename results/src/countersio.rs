//! The counters file: every counter delta of every row, one per line, in long format, written
//! beside a results CSV (`NAME.counters.csv` beside `NAME.csv`) instead of a JSON list in each
//! row's cell, so that a spreadsheet can filter and pivot it.
//!
//! Columns: `run`, `mode`, `rail`, `side` (`client` or `server`), `node` and `device` (the
//! side's), `source` (`port`, `hw`, `netdev`), `name`, `delta` (after minus before the window),
//! `unit` (`bytes`, `words4`, `packets`, `microseconds`, `events`). `node` tells the pairs of a
//! fleet apart, whose rows share run, mode and rail. The file is written, not read: results
//! JSON keeps the counters with the rest of each row (their read time and span too).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Result, ResultsError};
use crate::rdmabw::report::Role;
use crate::record::RailResult;

/// The counters file's header.
pub const COUNTERS_HEADER: [&str; 10] = [
    "run", "mode", "rail", "side", "node", "device", "source", "name", "delta", "unit",
];

/// The counters file beside the results CSV `csv`: `NAME.counters.csv` for `NAME.csv` (or for
/// `NAME` with any other extension or none).
pub fn counters_csv_path(csv: &Path) -> PathBuf {
    let stem = csv.file_stem().unwrap_or_default();
    let mut name = stem.to_os_string();
    name.push(".counters.csv");
    csv.with_file_name(name)
}

/// The header line, terminated by a newline.
pub(crate) fn counters_header_bytes() -> Result<Vec<u8>> {
    let mut wtr = csv::WriterBuilder::new().from_writer(Vec::new());
    wtr.write_record(COUNTERS_HEADER)
        .map_err(|e| ResultsError::export("counters csv", e))?;
    wtr.into_inner()
        .map_err(|e| ResultsError::export("counters csv", e.error()))
}

/// The lines of one row's counters (none when it has none), each terminated by a newline.
pub(crate) fn counters_row_bytes(row: &RailResult) -> Result<Vec<u8>> {
    let mut wtr = csv::WriterBuilder::new().from_writer(Vec::new());
    let rail = row.rail.to_string();
    for report in &row.counters {
        let node = match report.role {
            Role::Client => &row.client_node,
            Role::Server => &row.server_node,
        };
        for d in &report.deltas {
            let unit = serde_json::to_value(d.unit)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            wtr.write_record([
                crate::csvio::text_cell(&row.run_id).as_str(),
                row.network_mode.as_str(),
                &rail,
                report.role.as_str(),
                &crate::csvio::text_cell(node),
                &crate::csvio::text_cell(&report.device),
                d.source.as_str(),
                &crate::csvio::text_cell(&d.name),
                &d.delta.to_string(),
                &unit,
            ])
            .map_err(|e| ResultsError::export("counters csv", e))?;
        }
    }
    wtr.into_inner()
        .map_err(|e| ResultsError::export("counters csv", e.error()))
}

/// Whether any of `rows` has counters, so that a counters file has something to hold.
pub fn any_counters(rows: &[RailResult]) -> bool {
    rows.iter()
        .any(|r| r.counters.iter().any(|c| !c.deltas.is_empty()))
}

/// Write the header and every counter delta of `rows` in long format.
pub fn write_counters_csv<W: Write>(mut out: W, rows: &[RailResult]) -> Result<()> {
    let mut buf = counters_header_bytes()?;
    for row in rows {
        buf.extend(counters_row_bytes(row)?);
    }
    out.write_all(&buf)
        .and_then(|()| out.flush())
        .map_err(|e| ResultsError::io("<counters csv output>", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_file_sits_beside_the_results_csv() {
        assert_eq!(
            counters_csv_path(Path::new("out/sweep.csv")),
            Path::new("out/sweep.counters.csv")
        );
        assert_eq!(
            counters_csv_path(Path::new("fleet")),
            Path::new("fleet.counters.csv")
        );
    }
}
