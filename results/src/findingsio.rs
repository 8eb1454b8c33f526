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
//! A finding that rests on no counter has one line with `side` to `per_s` empty.
//!
//! Reading a results CSV back ([`crate::read_path`]) reads its findings file too, when there is
//! one, and gives each row its findings whole again, as results JSON keeps them: lines are
//! matched to rows by run, mode, rail, finding and the side's node, in the file's order. The
//! file is checked whole before any row is changed: a malformed line, or one naming a row or
//! a finding that the CSV does not have, is an error naming the findings file, line and
//! column. A finding in a row's `diagnosis` cell with no line (a crash between the two
//! writes) keeps its kind alone, as does every finding of a CSV without a findings file.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::csvio::{col, csv_error, show, untext_cell};
use crate::error::{Location, Result, ResultsError};
use crate::rdmabw::counters::{CounterSource, Evidence, Finding, FindingKind};
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

/// One line of a findings file, its cells checked.
struct Line {
    /// 1-based line number.
    line: u64,
    run: String,
    mode: String,
    rail: u32,
    finding: FindingKind,
    /// The side's node and the counter; `None` for a finding that rests on no counter.
    evidence: Option<(String, Evidence)>,
    summary: String,
    what_to_do: String,
}

/// Consecutive lines of one finding, and the rows (indices) they can belong to.
struct Group {
    line: u64,
    key: (String, String, u32),
    finding: Finding,
    candidates: Vec<usize>,
}

/// Read the findings file `input` (named `file` in errors) and give `rows`, as read from the
/// results CSV beside it, their findings whole: see the module's documentation. On error no
/// row is changed.
pub fn read_findings_csv<R: Read>(input: R, file: &str, rows: &mut [RailResult]) -> Result<()> {
    read_findings_into(input, file, rows.iter_mut().collect())
}

/// [`read_findings_csv`] into rows that are not one slice: those a lenient reader kept and
/// those it left out (whose lines are then matched, and dropped with them).
pub(crate) fn read_findings_into<R: Read>(
    input: R,
    file: &str,
    mut rows: Vec<&mut RailResult>,
) -> Result<()> {
    let lines = parse_lines(input, file)?;
    let at = |line: u64, column: usize| Location {
        file: file.to_string(),
        line,
        column: col(column),
    };
    // The kinds each row's `diagnosis` cell named, before any is replaced.
    let kinds: Vec<Vec<FindingKind>> = rows.iter().map(|r| r.finding_kinds()).collect();
    // The rows of each run, mode and rail, in the CSV's order (a fleet's pairs share them).
    let mut by_rail: std::collections::HashMap<(&str, &str, u32), Vec<usize>> =
        std::collections::HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        by_rail
            .entry((r.run_id.as_str(), r.network_mode.as_str(), r.rail))
            .or_default()
            .push(i);
    }
    let mut groups: Vec<Group> = Vec::new();
    for l in lines {
        let key = (l.run.clone(), l.mode.clone(), l.rail);
        let same_rail = by_rail
            .get(&(l.run.as_str(), l.mode.as_str(), l.rail))
            .cloned()
            .unwrap_or_default();
        if same_rail.is_empty() {
            return Err(ResultsError::parse(
                at(l.line, 2),
                format!(
                    "run `{}`, mode `{}`, rail {}: the results CSV beside it has no such row",
                    l.run, l.mode, l.rail
                ),
            ));
        }
        let with_kind: Vec<usize> = same_rail
            .into_iter()
            .filter(|&i| kinds[i].contains(&l.finding))
            .collect();
        if with_kind.is_empty() {
            return Err(ResultsError::parse(
                at(l.line, 3),
                format!(
                    "column `finding`: run `{}`, rail {}: `{}` is not in the `diagnosis` cell of \
                     that row of the results CSV",
                    l.run,
                    l.rail,
                    l.finding.word()
                ),
            ));
        }
        let candidates: Vec<usize> = match &l.evidence {
            None => with_kind,
            Some((node, e)) => with_kind
                .into_iter()
                .filter(|&i| {
                    let r = &rows[i];
                    match e.role {
                        Role::Client => &r.client_node == node,
                        Role::Server => &r.server_node == node,
                    }
                })
                .collect(),
        };
        if candidates.is_empty() {
            let side = l.evidence.as_ref().map_or("", |(_, e)| e.role.as_str());
            let node = l.evidence.as_ref().map_or("", |(n, _)| n.as_str());
            return Err(ResultsError::parse(
                at(l.line, 5),
                format!(
                    "column `node`: run `{}`, rail {}: no row of the results CSV with `{}` \
                     has {} on its {side} side",
                    l.run,
                    l.rail,
                    l.finding.word(),
                    show(node)
                ),
            ));
        }
        // A counter of the finding on the line before (same finding, same row) joins it.
        if let (Some(g), Some((_, e))) = (groups.last_mut(), &l.evidence) {
            let shared: Vec<usize> = g
                .candidates
                .iter()
                .copied()
                .filter(|i| candidates.contains(i))
                .collect();
            if g.key == key
                && !g.finding.evidence.is_empty()
                && g.finding.finding == l.finding
                && g.finding.summary == l.summary
                && g.finding.what_to_do == l.what_to_do
                && !shared.is_empty()
            {
                g.candidates = shared;
                g.finding.evidence.push(e.clone());
                continue;
            }
        }
        groups.push(Group {
            line: l.line,
            key,
            finding: Finding {
                finding: l.finding,
                summary: l.summary,
                evidence: l.evidence.into_iter().map(|(_, e)| e).collect(),
                what_to_do: l.what_to_do,
            },
            candidates,
        });
    }
    // Each finding to the first of its rows that has none of its kind yet (the pairs of a
    // fleet share run, mode and rail; the file lists them in the CSV's order), else to the
    // last (a row with two findings of one kind).
    let mut found: Vec<Vec<Finding>> = vec![Vec::new(); rows.len()];
    for g in groups {
        let i = g
            .candidates
            .iter()
            .copied()
            .find(|&i| !found[i].iter().any(|f| f.finding == g.finding.finding))
            .or_else(|| g.candidates.last().copied())
            .ok_or_else(|| ResultsError::parse(at(g.line, 0), "a finding of no row"))?;
        found[i].push(g.finding);
    }
    for ((row, mut findings), kinds) in rows.iter_mut().zip(found).zip(kinds) {
        if findings.is_empty() {
            continue;
        }
        // A kind of the cell without a line keeps its kind alone.
        for k in kinds {
            if !findings.iter().any(|f| f.finding == k) {
                findings.push(Finding {
                    finding: k,
                    summary: String::new(),
                    evidence: Vec::new(),
                    what_to_do: String::new(),
                });
            }
        }
        row.diagnosis = findings;
    }
    Ok(())
}

/// Every line of a findings file, each cell checked; an error names the line and column.
fn parse_lines<R: Read>(input: R, file: &str) -> Result<Vec<Line>> {
    let at = |line: u64, column: usize| Location {
        file: file.to_string(),
        line,
        column: col(column),
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(input);
    let mut records = rdr.records();
    let header = match records.next() {
        None => {
            return Err(ResultsError::parse(
                at(1, 0),
                "empty file; expected the findings file's header",
            ))
        }
        Some(rec) => rec.map_err(|e| csv_error(file, e))?,
    };
    if let Some(i) = (0..FINDINGS_HEADER.len().max(header.len()))
        .find(|&i| header.get(i) != FINDINGS_HEADER.get(i).copied())
    {
        return Err(ResultsError::parse(
            at(header.position().map_or(1, |p| p.line()), i),
            format!(
                "the header is not a findings file's: expected `{}`, found {}",
                FINDINGS_HEADER.join(","),
                show(header.get(i).unwrap_or(""))
            ),
        ));
    }
    let mut lines = Vec::new();
    for rec in records {
        let rec = rec.map_err(|e| csv_error(file, e))?;
        let line = rec.position().map_or(0, |p| p.line());
        if rec.len() != FINDINGS_HEADER.len() {
            return Err(ResultsError::parse(
                at(line, rec.len().min(FINDINGS_HEADER.len())),
                format!(
                    "line has {} cells but the header has {} columns",
                    rec.len(),
                    FINDINGS_HEADER.len()
                ),
            ));
        }
        let cell = |i: usize| rec.get(i).unwrap_or("");
        let bad = |i: usize, what: &str| {
            ResultsError::parse(
                at(line, i),
                format!(
                    "column `{}`: expected {what}, found {}",
                    FINDINGS_HEADER[i],
                    show(cell(i))
                ),
            )
        };
        let rail: u32 = cell(2)
            .trim()
            .parse()
            .map_err(|_| bad(2, "a rail number"))?;
        let finding = FindingKind::from_word(cell(3).trim()).ok_or_else(|| {
            let known: Vec<&str> = FindingKind::ALL.iter().map(|k| k.word()).collect();
            bad(3, &format!("a finding among {}", known.join(", ")))
        })?;
        let evidence = match cell(4) {
            "" => {
                if let Some(i) = (5..10).find(|&i| !cell(i).is_empty()) {
                    return Err(ResultsError::parse(
                        at(line, i),
                        format!(
                            "column `{}`: a line without a side rests on no counter, so its \
                             cell is empty; found {}",
                            FINDINGS_HEADER[i],
                            show(cell(i))
                        ),
                    ));
                }
                None
            }
            side => {
                let role = match side {
                    "client" => Role::Client,
                    "server" => Role::Server,
                    _ => return Err(bad(4, "`client`, `server` or an empty cell")),
                };
                let source = [
                    CounterSource::Port,
                    CounterSource::Hw,
                    CounterSource::Netdev,
                ]
                .into_iter()
                .find(|s| s.as_str() == cell(6))
                .ok_or_else(|| bad(6, "`port`, `hw` or `netdev`"))?;
                if cell(7).is_empty() {
                    return Err(bad(7, "a counter's name"));
                }
                let delta: u64 = cell(8)
                    .trim()
                    .parse()
                    .map_err(|_| bad(8, "a non-negative integer"))?;
                let per_s: f64 = cell(9)
                    .trim()
                    .parse()
                    .ok()
                    .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| bad(9, "a number of 0 or more"))?;
                Some((
                    untext_cell(cell(5)).to_string(),
                    Evidence {
                        role,
                        source,
                        counter: untext_cell(cell(7)).to_string(),
                        delta,
                        per_s,
                    },
                ))
            }
        };
        lines.push(Line {
            line,
            run: untext_cell(cell(0)).to_string(),
            mode: cell(1).to_string(),
            rail,
            finding,
            evidence,
            summary: untext_cell(cell(10)).to_string(),
            what_to_do: untext_cell(cell(11)).to_string(),
        });
    }
    Ok(lines)
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
