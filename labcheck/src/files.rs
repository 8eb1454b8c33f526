//! Reading what rdmabw and railsweep wrote, through their own types: results' readers for
//! railsweep's results (and the findings file beside a CSV), wire's reports for rdmabw's JSON.
//! The two files no library reads (the counters file beside a results CSV, and a fleet's
//! rounds.tsv) are read here into typed lines whose header must be the writer's.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};
use results::RailResult;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use wire::params::Role;

/// The rows of a results file (CSV with its findings file beside it, or JSON).
pub fn rows(path: &Path) -> Result<Vec<RailResult>> {
    results::read_path(path).with_context(|| format!("cannot read results {}", path.display()))
}

/// The text of `path`, or of stdin for `-`.
pub fn text(path: &Path) -> Result<String> {
    if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read stdin")?;
        return Ok(s);
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// One JSON document of type `T` (an rdmabw report) from `path` (`-`: stdin).
pub fn json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text = text(path)?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not the report expected ({})",
            path.display(),
            std::any::type_name::<T>()
        )
    })
}

/// JSON lines of type `T`: one document per line (`rdmabw client --json --run_infinitely`).
/// `text` is the file's, already read; `path` names it in errors.
pub fn json_lines<T: DeserializeOwned>(text: &str, path: &Path) -> Result<Vec<T>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| {
                format!("{} line {}: not the report expected", path.display(), i + 1)
            })
        })
        .collect()
}

/// The cells of `row` by column name, as results writes them to CSV (one definition of a
/// column's text: results' row builder), so that a check names a column as the file does.
pub fn cells(row: &RailResult) -> Result<BTreeMap<String, String>> {
    let mut buf = Vec::new();
    results::write_csv(&mut buf, std::slice::from_ref(row))
        .context("results cannot write the row")?;
    let mut rdr = csv::Reader::from_reader(buf.as_slice());
    let header = rdr.headers().context("the row's header")?.clone();
    let record = rdr
        .records()
        .next()
        .context("results wrote no row")?
        .context("the row")?;
    Ok(header
        .iter()
        .zip(record.iter())
        .map(|(h, v)| (h.to_string(), v.to_string()))
        .collect())
}

/// The column names of a results CSV.
pub fn columns() -> Vec<&'static str> {
    results::csv_header()
}

/// One line of the counters file beside a results CSV (results' `countersio`): the columns a
/// check reads; the header is checked whole.
#[derive(Debug, Clone, Deserialize)]
pub struct CounterLine {
    /// The sweep's run id.
    pub run: String,
    /// Network mode.
    pub mode: String,
    /// Rail.
    pub rail: u32,
    /// `client` or `server`.
    pub side: Role,
    /// The side's node.
    pub node: String,
    /// `port`, `hw` or `netdev`.
    pub source: String,
    /// The counter.
    pub name: String,
    /// After minus before the window.
    pub delta: u64,
}

/// The counters file beside the results CSV `csv`; none when there is no such file.
pub fn counter_lines(csv: &Path) -> Result<Vec<CounterLine>> {
    let path = results::counters_csv_path(csv);
    if !path.exists() {
        return Ok(Vec::new());
    }
    typed_table(&path, b',', &results::COUNTERS_HEADER)
}

/// One line of a fleet's rounds.tsv: when each pair ran (the columns a check reads; the
/// header is checked whole).
#[derive(Debug, Clone, Deserialize)]
pub struct RoundLine {
    /// The round.
    pub round: u32,
    /// Client pod.
    pub client: String,
    /// Server pod.
    pub server: String,
    /// Start, seconds since the epoch.
    pub start_unix: f64,
    /// End, seconds since the epoch.
    pub end_unix: f64,
}

/// A fleet's rounds.tsv in `dir`.
pub fn rounds(dir: &Path) -> Result<Vec<RoundLine>> {
    typed_table(&dir.join("rounds.tsv"), b'\t', &results::rounds::COLUMNS)
}

/// A delimited file whose header is exactly `header`, as typed lines.
fn typed_table<T: DeserializeOwned>(path: &Path, delimiter: u8, header: &[&str]) -> Result<Vec<T>> {
    let name = path.display();
    let mut rdr = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .from_path(path)
        .with_context(|| format!("cannot read {name}"))?;
    let got: Vec<String> = rdr
        .headers()
        .with_context(|| format!("{name}: no header"))?
        .iter()
        .map(str::to_string)
        .collect();
    if got != header {
        bail!("{name}: header {got:?} is not the writer's {header:?}");
    }
    rdr.deserialize()
        .enumerate()
        .map(|(i, r)| r.with_context(|| format!("{name} line {}", i + 2)))
        .collect()
}
