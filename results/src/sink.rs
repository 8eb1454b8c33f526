//! Writing rows as they are measured, so that a crash loses nothing already measured.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::countersio::{self, counters_csv_path};
use crate::csvio;
use crate::error::{Result, ResultsError};
use crate::findingsio::{self, findings_csv_path};
use crate::group::GroupCulprit;
use crate::jsonio;
use crate::read::read_path;
use crate::record::RailResult;
use crate::replace::{replace_file, sync_parent};

/// Appends each rail's row to disk the moment it is measured.
///
/// The design, chosen so that a crash at any instant loses at most the row
/// being written:
///
/// * The **CSV file is the log.** [`RowSink::create`] writes the header;
///   [`RowSink::append`] writes one complete row with a single `write` on a
///   file opened in append mode and then `fsync`s it. Earlier rows are never
///   rewritten. If the process dies in the middle of a row, the file ends in
///   a partial line; [`crate::read_csv`] reports that line as an error (it is
///   never silently dropped) and every earlier row is intact.
/// * The **JSON file, if asked for, is a snapshot** rewritten after every
///   row: the whole envelope goes to a temporary file next to it, is `fsync`ed,
///   and is renamed over `NAME` ([`crate::replace_file`]). Rename is atomic, so
///   the JSON file always holds either the previous or the new complete
///   document, never a torn one.
///   Rewriting costs O(rows) per append, which is nothing at rail counts.
///
/// * The **counters file** (`NAME.counters.csv`, [`crate::countersio`]) is a
///   log like the CSV: each row's counter deltas are appended after its CSV line.
///   It is made at the first row that has counters.
///
/// * The **findings file** (`NAME.findings.csv`, [`crate::findingsio`]) is a log
///   the same way: each row's counter findings, one line per counter they rest on.
///
/// To continue a sweep after a crash, [`RowSink::resume`] reads the CSV back
/// (strictly), takes the counters and findings of its rows from the JSON snapshot when there
/// is one that holds the same rows (the CSV has no counters since version 5, and only the
/// findings' words since version 10), rewrites the JSON
/// from them, and appends from there.
#[derive(Debug)]
pub struct RowSink {
    csv_path: PathBuf,
    csv_file: File,
    counters_path: PathBuf,
    json_path: Option<PathBuf>,
    generated_by: String,
    rows: Vec<RailResult>,
    group_culprits: Vec<GroupCulprit>,
}

impl RowSink {
    /// Start a new results file at `csv_path` (and optionally a JSON snapshot
    /// at `json_path`). Refuses to overwrite an existing CSV file, which would
    /// throw away an earlier sweep. `generated_by` goes into the JSON envelope.
    pub fn create(
        csv_path: impl AsRef<Path>,
        json_path: Option<&Path>,
        generated_by: impl Into<String>,
    ) -> Result<Self> {
        let csv_path = csv_path.as_ref().to_path_buf();
        let mut csv_file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&csv_path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    ResultsError::AlreadyExists {
                        path: csv_path.display().to_string(),
                    }
                } else {
                    ResultsError::io(csv_path.display(), e)
                }
            })?;
        csv_file
            .write_all(&csvio::header_bytes()?)
            .and_then(|()| csv_file.sync_all())
            .map_err(|e| ResultsError::io(csv_path.display(), e))?;
        sync_parent(&csv_path);
        Self::opened(
            csv_path,
            csv_file,
            json_path,
            generated_by.into(),
            Vec::new(),
        )
    }

    /// Continue appending to an existing CSV file written by a sink. All its
    /// rows are read back and checked first; a torn last line from a crash is
    /// an error naming that line, to be fixed (deleted) by hand. A file of an
    /// older schema is first rewritten in the current one (its rows kept, the
    /// new columns empty; written aside and renamed over it), so that the rows
    /// appended after it match its header.
    pub fn resume(
        csv_path: impl AsRef<Path>,
        json_path: Option<&Path>,
        generated_by: impl Into<String>,
    ) -> Result<Self> {
        let csv_path = csv_path.as_ref().to_path_buf();
        let mut rows = read_path(&csv_path)?;
        if let Some(json) = json_path {
            counters_from_snapshot(&mut rows, json);
        }
        upgrade_header(&csv_path, &rows)?;
        let csv_file = OpenOptions::new()
            .append(true)
            .open(&csv_path)
            .map_err(|e| ResultsError::io(csv_path.display(), e))?;
        Self::opened(csv_path, csv_file, json_path, generated_by.into(), rows)
    }

    /// The sink of an open CSV file holding `rows`, its JSON snapshot written.
    fn opened(
        csv_path: PathBuf,
        csv_file: File,
        json_path: Option<&Path>,
        generated_by: String,
        rows: Vec<RailResult>,
    ) -> Result<Self> {
        let sink = RowSink {
            counters_path: counters_csv_path(&csv_path),
            csv_path,
            csv_file,
            json_path: json_path.map(Path::to_path_buf),
            generated_by,
            rows,
            group_culprits: Vec::new(),
        };
        sink.write_json()?;
        Ok(sink)
    }

    /// Validate `row`, append it to the CSV file and sync it to disk, then
    /// refresh the JSON snapshot. On error nothing is added to the CSV file
    /// unless the error came from the disk itself.
    pub fn append(&mut self, row: RailResult) -> Result<()> {
        let line = csvio::row_bytes(&row)?;
        self.csv_file
            .write_all(&line)
            .and_then(|()| self.csv_file.sync_data())
            .map_err(|e| ResultsError::io(self.csv_path.display(), e))?;
        self.append_counters(&row)?;
        self.append_findings(&row)?;
        self.rows.push(row);
        self.write_json()
    }

    /// Append `row`'s counter deltas to the counters file, made with its header first.
    fn append_counters(&self, row: &RailResult) -> Result<()> {
        let lines = countersio::counters_row_bytes(row)?;
        if lines.is_empty() {
            return Ok(());
        }
        let io = |e| ResultsError::io(self.counters_path.display(), e);
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.counters_path)
            .map_err(io)?;
        let mut bytes = Vec::new();
        if file.metadata().map_err(io)?.len() == 0 {
            bytes = countersio::counters_header_bytes()?;
        }
        bytes.extend(lines);
        file.write_all(&bytes)
            .and_then(|()| file.sync_data())
            .map_err(io)
    }

    /// Append `row`'s findings to the findings file, made with its header first.
    fn append_findings(&self, row: &RailResult) -> Result<()> {
        let lines = findingsio::findings_row_bytes(row)?;
        if lines.is_empty() {
            return Ok(());
        }
        let path = findings_csv_path(&self.csv_path);
        let io = |e| ResultsError::io(path.display(), e);
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io)?;
        let mut bytes = Vec::new();
        if file.metadata().map_err(io)?.len() == 0 {
            bytes = findingsio::findings_header_bytes()?;
        }
        bytes.extend(lines);
        file.write_all(&bytes)
            .and_then(|()| file.sync_data())
            .map_err(io)
    }

    /// Change every row with `change` and write them all again: the CSV (and the JSON
    /// snapshot) is written aside and renamed over the old one, so that a crash leaves either
    /// file whole; the counters file, which `change` must not touch, stays. For what is known
    /// only once every row is in (a fleet's verdict on its rows), never for a row being
    /// measured.
    pub fn rewrite(&mut self, change: impl FnMut(&mut RailResult)) -> Result<()> {
        self.rows.iter_mut().for_each(change);
        let mut bytes = csvio::header_bytes()?;
        for row in &self.rows {
            bytes.extend(csvio::row_bytes(row)?);
        }
        replace_file(&self.csv_path, &bytes)?;
        self.csv_file = OpenOptions::new()
            .append(true)
            .open(&self.csv_path)
            .map_err(|e| ResultsError::io(self.csv_path.display(), e))?;
        self.write_json()
    }

    /// The counters file beside the CSV (written once a row has counters).
    pub fn counters_path(&self) -> &Path {
        &self.counters_path
    }

    /// Record the groups of nodes a fleet named as culprits, once its rows are judged, and
    /// refresh the JSON snapshot with them (its `group_culprits`).
    pub fn set_group_culprits(&mut self, groups: Vec<GroupCulprit>) -> Result<()> {
        self.group_culprits = groups;
        self.write_json()
    }

    /// Rows written so far (including those found by [`RowSink::resume`]).
    pub fn rows(&self) -> &[RailResult] {
        &self.rows
    }

    /// The CSV file being appended to.
    pub fn csv_path(&self) -> &Path {
        &self.csv_path
    }

    /// Close the sink and hand back every row it holds.
    pub fn into_rows(self) -> Vec<RailResult> {
        self.rows
    }

    fn write_json(&self) -> Result<()> {
        let Some(path) = &self.json_path else {
            return Ok(());
        };
        replace_file(
            path,
            &jsonio::json_bytes(&self.generated_by, &self.rows, &self.group_culprits)?,
        )
    }
}

/// Give `rows` (read from the CSV, which has no counters) the counters of the JSON snapshot at
/// `json`, when it holds the same rows in the same order (the sink rewrites it after every
/// row, so it has the CSV's rows, or one fewer after a crash between the two). Nothing
/// changes when it cannot be read or holds other rows.
fn counters_from_snapshot(rows: &mut [RailResult], json: &Path) {
    let Ok(snapshot) = read_path(json) else {
        return;
    };
    let same = |a: &RailResult, b: &RailResult| {
        (
            &a.run_id,
            &a.network_mode,
            a.rail,
            &a.client_node,
            &a.server_node,
            &a.time_utc,
        ) == (
            &b.run_id,
            &b.network_mode,
            b.rail,
            &b.client_node,
            &b.server_node,
            &b.time_utc,
        )
    };
    if snapshot.len() > rows.len() || !rows.iter().zip(&snapshot).all(|(a, b)| same(a, b)) {
        return;
    }
    for (row, old) in rows.iter_mut().zip(snapshot) {
        // The CSV keeps only the findings' words: the snapshot has them whole.
        if row.finding_kinds() == old.finding_kinds() {
            row.diagnosis = old.diagnosis;
        }
        if row.counters.is_empty() {
            row.counters = old.counters;
        }
    }
}

/// Rewrite `path` with the current header when its header is another one: the rows of an
/// older schema, in the current one ([`replace_file`]). The counters of a file before
/// version 5 (a column then) go to the counters file beside it, written whole.
fn upgrade_header(path: &Path, rows: &[RailResult]) -> Result<()> {
    use std::io::{BufRead, BufReader};
    let header = csvio::header_bytes()?;
    let mut first = Vec::with_capacity(header.len());
    File::open(path)
        .and_then(|f| BufReader::new(f).read_until(b'\n', &mut first))
        .map_err(|e| ResultsError::io(path.display(), e))?;
    if first == header {
        return Ok(());
    }
    let mut bytes = Vec::new();
    csvio::write_csv(&mut bytes, rows)?;
    if countersio::any_counters(rows) {
        let mut counters = Vec::new();
        countersio::write_counters_csv(&mut counters, rows)?;
        replace_file(&counters_csv_path(path), &counters)?;
    }
    if findingsio::any_findings(rows) {
        let mut findings = Vec::new();
        findingsio::write_findings_csv(&mut findings, rows)?;
        replace_file(&findings_csv_path(path), &findings)?;
    }
    replace_file(path, &bytes)
}
