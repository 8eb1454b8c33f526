//! `labcheck rows`: assertions on the rows of railsweep's results, read by results' own reader
//! (a CSV with its findings file, or JSON) and its counters file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use results::{RailResult, RailStatus};

use crate::check;
use crate::files::{self, CounterLine};
use crate::outcome::{describe, or_none};
#[cfg(test)]
use wire::params::Role;

/// What `labcheck rows` asserts. Every assertion holds for every selected row; a selection of
/// no row fails unless `--count 0` asks for that.
#[derive(Debug, Default, clap::Args)]
pub struct RowsArgs {
    /// railsweep's results: CSV (with the findings file beside it) or JSON.
    pub file: PathBuf,
    /// Only the rows whose column COL is one of the values (repeatable: each must hold).
    #[arg(long = "where", value_parser = cell, value_name = "COL=V[,V...]")]
    pub select: Vec<Cell>,
    /// Leave out the rows whose column COL is one of the values.
    #[arg(long, value_parser = cell, value_name = "COL=V[,V...]")]
    pub except: Vec<Cell>,
    /// Exactly N rows.
    #[arg(long, value_name = "N")]
    pub count: Option<usize>,
    /// The rows' rails in this order: `0-3`, `0,1,3`; with --modes, each mode's in turn.
    #[arg(long, value_parser = parse_rails, value_name = "RAILS")]
    pub rails: Option<Rails>,
    /// The rows' network modes in this order, each with the rails of --rails.
    #[arg(long, value_delimiter = ',', value_name = "MODE,...")]
    pub modes: Vec<String>,
    /// --rails and --modes as sets: a --parallel sweep writes rows as its rails end.
    #[arg(long)]
    pub any_order: bool,
    /// Every row is ok, with an average bandwidth above 0.
    #[arg(long)]
    pub ok: bool,
    /// Every row has this status (`ok`, `below_threshold`, `failed`).
    #[arg(long, value_parser = status, value_name = "STATUS")]
    pub status: Option<RailStatus>,
    /// The client's node and the server's: `node-a,node-b`.
    #[arg(long, value_name = "CLIENT,SERVER")]
    pub nodes: Option<String>,
    /// Both ends' interface and RDMA device, `[MODE:]IFACE,DEVICE`, where `{r}` is the rail,
    /// `{r+1}` the next number and `*` any text (`sriov:net{r+1},rxevf{r}`, `rdma{r},*`);
    /// without MODE, every mode's.
    #[arg(long, value_name = "[MODE:]IFACE,DEVICE")]
    pub ends: Vec<String>,
    /// Column COL is VALUE, as the CSV writes it (numbers compared as numbers; `COL=`: empty).
    #[arg(long = "is", value_parser = cell, value_name = "COL=VALUE")]
    pub is: Vec<Cell>,
    /// Column COL matches PATTERN, where `*` is any text (`*-sriov-client`, `rxe_a*`,
    /// `*(0 iterations)*`).
    #[arg(long, value_parser = cell, value_name = "COL=PATTERN")]
    pub like: Vec<Cell>,
    /// Column COL is a number above X.
    #[arg(long, value_parser = number_cell, value_name = "COL=X")]
    pub above: Vec<(Cell, f64)>,
    /// The latency columns are a measurement: 0 < lat_p50_us <= lat_p99_us <= lat_max_us < 1 s.
    #[arg(long)]
    pub latency: bool,
    /// The counters file beside the CSV has each row's counters from exactly these sides.
    #[arg(long, value_delimiter = ',', value_name = "SIDE,...")]
    pub counter_sides: Vec<String>,
    /// `SIDE:SOURCE:NAME>0` or `SIDE:SOURCE:NAME=0`: that counter's delta on each row (the
    /// counters file's lines of the row's rail and that side's node, summed).
    #[arg(long, value_parser = CounterAsk::parse, value_name = "SIDE:SOURCE:NAME>0|=0")]
    pub counter: Vec<CounterAsk>,
    /// Print each selected row's columns, tab-separated, one line per row.
    #[arg(long, value_delimiter = ',', value_name = "COL,...")]
    pub print: Vec<String>,
}

/// The rails of `--rails`, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rails(pub Vec<u32>);

/// `0-3` or `0,1,3`.
fn parse_rails(s: &str) -> Result<Rails, String> {
    let bad = || format!("{s:?}: give rails as 0-3 or 0,1,3");
    if let Some((a, b)) = s.split_once('-') {
        let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if a > b {
            return Err(bad());
        }
        return Ok(Rails((a..=b).collect()));
    }
    s.split(',')
        .map(|x| x.trim().parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()
        .map(Rails)
}

/// A column of results' CSV and a text for it: `COL=VALUE`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The column, as the CSV header names it.
    pub col: String,
    /// The text after `=`.
    pub text: String,
}

/// `COL=VALUE`, with COL a column of results' CSV.
fn cell(arg: &str) -> Result<Cell, String> {
    let (col, text) = arg.split_once('=').ok_or("give COL=VALUE")?;
    if !files::columns().contains(&col) {
        return Err(format!(
            "{col} is not a column of railsweep's results (columns: {})",
            files::columns().join(", ")
        ));
    }
    Ok(Cell {
        col: col.to_string(),
        text: text.to_string(),
    })
}

/// `COL=X`, X a number.
fn number_cell(arg: &str) -> Result<(Cell, f64), String> {
    let c = cell(arg)?;
    let x = c
        .text
        .parse()
        .map_err(|_| format!("{}: not a number", c.text))?;
    Ok((c, x))
}

/// `ok`, `below_threshold` or `failed`.
fn status(arg: &str) -> Result<RailStatus, String> {
    RailStatus::ALL
        .into_iter()
        .find(|x| x.as_str() == arg)
        .ok_or_else(|| {
            let names: Vec<&str> = RailStatus::ALL.iter().map(|s| s.as_str()).collect();
            format!(
                "give {} or {}",
                names[..names.len() - 1].join(", "),
                names[names.len() - 1]
            )
        })
}

/// Two cells equal: as numbers where both are numbers, else as text.
fn same(cell: &str, want: &str) -> bool {
    match (cell.parse::<f64>(), want.parse::<f64>()) {
        (Ok(a), Ok(b)) => a == b,
        _ => cell == want,
    }
}

/// Whether `text` matches `pattern`, where `*` stands for any text.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == text;
    };
    if parts.len() == 1 {
        return pattern == text;
    }
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// A row with its cells.
struct Row {
    row: RailResult,
    cells: BTreeMap<String, String>,
}

impl Row {
    fn new(row: RailResult) -> Result<Row> {
        Ok(Row {
            cells: files::cells(&row)?,
            row,
        })
    }

    fn cell(&self, col: &str) -> &str {
        self.cells.get(col).map_or("", String::as_str)
    }
}

/// `labcheck rows`.
pub fn run(args: &RowsArgs) -> Result<()> {
    let rows = files::rows(&args.file)?
        .into_iter()
        .map(Row::new)
        .collect::<Result<Vec<_>>>()?;
    let rows = select(args, rows);
    for col in &args.print {
        if !files::columns().contains(&col.as_str()) {
            bail!("--print {col}: not a column of railsweep's results");
        }
    }
    for r in &rows {
        let line: Vec<&str> = args.print.iter().map(|c| r.cell(c)).collect();
        if !line.is_empty() {
            println!("{}", line.join("\t"));
        }
    }
    let counters = if args.counter_sides.is_empty() && args.counter.is_empty() {
        Vec::new()
    } else {
        files::counter_lines(&args.file)?
    };
    assert_rows(args, &rows, &counters)
}

/// The rows `--where` and `--except` select: a row whose column is one of the values listed
/// (`COL=V1,V2`), or is none of them.
fn select(args: &RowsArgs, mut rows: Vec<Row>) -> Vec<Row> {
    let is_one = |r: &Row, c: &Cell| c.text.split(',').any(|v| same(r.cell(&c.col), v));
    rows.retain(|r| {
        args.select.iter().all(|c| is_one(r, c)) && !args.except.iter().any(|c| is_one(r, c))
    });
    rows
}

/// Every assertion of `args` on `rows`.
fn assert_rows(args: &RowsArgs, rows: &[Row], counters: &[CounterLine]) -> Result<()> {
    // Printing alone asserts nothing; any assertion over no row would hold and prove nothing.
    let print_only = args.count.is_none() && args.rails.is_none() && no_row_assertions(args);
    if args.count != Some(0) && !print_only {
        check!(!rows.is_empty(), "{}: no row to check", args.file.display());
    }
    if let Some(n) = args.count {
        check!(rows.len() == n, "{} rows, expected {n}", rows.len());
    }
    order(args, rows)?;
    let nodes = args
        .nodes
        .as_deref()
        .map(|n| {
            n.split_once(',')
                .with_context(|| format!("--nodes {n}: give CLIENT,SERVER"))
        })
        .transpose()?;
    for r in rows {
        let row = &r.row;
        let what = describe(row);
        if args.ok {
            check!(
                row.status == RailStatus::Ok && row.bw_avg_gbps.is_some_and(|b| b > 0.0),
                "not ok with traffic: {what}"
            );
        }
        if let Some(s) = args.status {
            check!(row.status == s, "status is not {}: {what}", s.as_str());
        }
        if let Some((client, server)) = nodes {
            check!(
                row.client_node == client && row.server_node == server,
                "not {client} -> {server}: {what}"
            );
        }
        ends(args, row, &what)?;
        for Cell { col, text } in &args.is {
            check!(
                same(r.cell(col), text),
                "{col} is {:?}, not {text:?}: {what}",
                r.cell(col)
            );
        }
        for Cell { col, text } in &args.like {
            check!(
                glob(text, r.cell(col)),
                "{col} {:?} is not like {text:?}: {what}",
                r.cell(col)
            );
        }
        for (Cell { col, .. }, x) in &args.above {
            let cell = r.cell(col);
            check!(
                cell.parse::<f64>().is_ok_and(|v| v > *x),
                "{col} is {cell:?}, not a number above {x}: {what}"
            );
        }
        if args.latency {
            let (p50, p99, max) = (row.lat_p50_us, row.lat_p99_us, row.lat_max_us);
            check!(
                matches!((p50, p99, max), (Some(a), Some(b), Some(c)) if 0.0 < a && a <= b && b <= c && c < 1e6),
                "latency p50/p99/max {}/{}/{} us is not a measurement: {what}",
                or_none(p50),
                or_none(p99),
                or_none(max)
            );
        }
        let mine: Vec<&CounterLine> = counters.iter().filter(|c| belongs(c, row)).collect();
        if !args.counter_sides.is_empty() {
            let mut sides: Vec<&str> = mine.iter().map(|c| c.side.as_str()).collect();
            sides.sort_unstable();
            sides.dedup();
            let mut want: Vec<&str> = args.counter_sides.iter().map(String::as_str).collect();
            want.sort_unstable();
            check!(
                sides == want,
                "counters from {sides:?}, not {want:?}: {what}"
            );
        }
        for ask in &args.counter {
            let delta: u64 = mine
                .iter()
                .filter(|c| {
                    c.side.as_str() == ask.side && c.source == ask.source && c.name == ask.name
                })
                .map(|c| c.delta)
                .sum();
            check!(
                (delta > 0) == ask.moved,
                "{} {} {} moved by {delta}, expected {}: {what}",
                ask.side,
                ask.source,
                ask.name,
                if ask.moved { "more than 0" } else { "0" }
            );
        }
    }
    Ok(())
}

/// Whether `args` asserts anything of each row (beyond printing it).
fn no_row_assertions(args: &RowsArgs) -> bool {
    !args.ok
        && args.status.is_none()
        && args.nodes.is_none()
        && args.ends.is_empty()
        && args.is.is_empty()
        && args.like.is_empty()
        && args.above.is_empty()
        && !args.latency
        && args.counter_sides.is_empty()
        && args.counter.is_empty()
}

/// The rows' modes and rails, in order (or as sets with --any-order).
fn order(args: &RowsArgs, rows: &[Row]) -> Result<()> {
    let Some(Rails(rails)) = &args.rails else {
        if !args.modes.is_empty() {
            bail!("--modes needs --rails: each mode's rails");
        }
        return Ok(());
    };
    let with_modes = !args.modes.is_empty();
    let mut want: Vec<(String, u32)> = if with_modes {
        args.modes
            .iter()
            .flat_map(|m| rails.iter().map(move |r| (m.clone(), *r)))
            .collect()
    } else {
        rails.iter().map(|r| (String::new(), *r)).collect()
    };
    let mut got: Vec<(String, u32)> = rows
        .iter()
        .map(|r| {
            let mode = if with_modes {
                r.row.network_mode.as_str().to_string()
            } else {
                String::new()
            };
            (mode, r.row.rail)
        })
        .collect();
    if args.any_order {
        want.sort();
        got.sort();
    }
    let show = |v: &[(String, u32)]| {
        v.iter()
            .map(|(m, r)| {
                if m.is_empty() {
                    r.to_string()
                } else {
                    format!("{m}/{r}")
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    check!(
        got == want,
        "rows of [{}], expected [{}]",
        show(&got),
        show(&want)
    );
    Ok(())
}

/// `--ends`: both sides' interface and device, by mode.
fn ends(args: &RowsArgs, row: &RailResult, what: &str) -> Result<()> {
    let mode = row.network_mode.as_str();
    for spec in &args.ends {
        let (for_mode, pair) = match spec.split_once(':') {
            Some((m, p)) => (Some(m), p),
            None => (None, spec.as_str()),
        };
        if for_mode.is_some_and(|m| m != mode) {
            continue;
        }
        let (iface, device) = pair
            .split_once(',')
            .with_context(|| format!("--ends {spec}: give [MODE:]IFACE,DEVICE"))?;
        let fill = |s: &str| {
            s.replace("{r+1}", &(row.rail + 1).to_string())
                .replace("{r}", &row.rail.to_string())
        };
        let want = (fill(iface), fill(device));
        for (side, got) in [
            ("client", (&row.client_interface, &row.client_rdma_device)),
            ("server", (&row.server_interface, &row.server_rdma_device)),
        ] {
            check!(
                glob(&want.0, got.0) && glob(&want.1, got.1),
                "{side} end is {} {}, not {} {}: {what}",
                got.0,
                got.1,
                want.0,
                want.1
            );
        }
    }
    Ok(())
}

/// Whether a counters-file line is one of `row`'s: its run, mode and rail, and its side's node.
fn belongs(c: &CounterLine, row: &RailResult) -> bool {
    let node = match c.side.as_str() {
        "client" => &row.client_node,
        _ => &row.server_node,
    };
    c.run == row.run_id
        && c.mode == row.network_mode.as_str()
        && c.rail == row.rail
        && &c.node == node
}

/// `--counter SIDE:SOURCE:NAME>0|=0`.
#[derive(Debug, Clone)]
pub struct CounterAsk {
    side: String,
    source: String,
    name: String,
    moved: bool,
}

impl CounterAsk {
    fn parse(arg: &str) -> Result<CounterAsk, String> {
        let bad = || "give SIDE:SOURCE:NAME>0 or SIDE:SOURCE:NAME=0".to_string();
        let (spec, moved) = if let Some(s) = arg.strip_suffix(">0") {
            (s, true)
        } else if let Some(s) = arg.strip_suffix("=0") {
            (s, false)
        } else {
            return Err(bad());
        };
        let mut parts = spec.splitn(3, ':');
        let (Some(side), Some(source), Some(name)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        if !["client", "server"].contains(&side) || !["port", "hw", "netdev"].contains(&source) {
            return Err(bad());
        }
        Ok(CounterAsk {
            side: side.into(),
            source: source.into(),
            name: name.into(),
            moved,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use clap::Parser;

    /// A row of `mode` and `rail`, node-a's rdma{rail}/rxe{rail} to node-b's, ok at `bw`.
    pub(crate) fn row(mode: &str, rail: u32, bw: &str) -> RailResult {
        let status = if bw.is_empty() { "failed" } else { "ok" };
        let error = if bw.is_empty() {
            "no traffic (0 iterations)"
        } else {
            ""
        };
        let text = format!(
            "schema_version,run_id,time_utc,network_mode,cluster,client_pod,client_node,server_pod,server_node,rail,client_interface,client_rdma_device,client_gid_index,server_interface,server_rdma_device,server_gid_index,traffic_class,mtu_bytes,msg_size_bytes,qps,duration_s,iterations,memory,status,bw_avg_gbps,bw_peak_gbps,msg_rate_mpps,bw_p1_gbps,bw_p50_gbps,bw_p99_gbps,line_rate_gbps,line_rate_pct,threshold_gbps,error\n\
             1,run-1,2025-06-01T10:00:00Z,{mode},c,a,node-a,b,node-b,{rail},rdma{rail},rxe{rail},1,rdma{rail},rxe{rail},1,41,1024,65536,1,2,,host,{status},{bw},,,,,,,,,{error}\n"
        );
        results::read_csv(text.as_bytes(), "t.csv")
            .unwrap()
            .remove(0)
    }

    fn try_args(line: &str) -> Result<RowsArgs, String> {
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            a: RowsArgs,
        }
        T::try_parse_from(["t", "f.csv"].into_iter().chain(line.split(' ')))
            .map(|t| t.a)
            .map_err(|e| e.to_string())
    }

    fn args(line: &str) -> RowsArgs {
        try_args(line).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    /// The rows of `rows` that `a` selects.
    fn selected(a: &RowsArgs, rows: Vec<RailResult>) -> Vec<Row> {
        select(a, rows.into_iter().map(|r| Row::new(r).unwrap()).collect())
    }

    /// What `labcheck rows` says of `rows` under the flags `line`: `Ok` or the failure's words.
    fn verdict(line: &str, rows: Vec<RailResult>) -> Result<(), String> {
        let a = args(line);
        let rows = selected(&a, rows);
        assert_rows(&a, &rows, &[]).map_err(|e| {
            assert!(e.is::<crate::outcome::Failed>(), "not a failure: {e}");
            e.to_string()
        })
    }

    fn four() -> Vec<RailResult> {
        (0..4).map(|r| row("sriov", r, "0.3")).collect()
    }

    #[test]
    fn rails_in_order_or_as_a_set() {
        assert_eq!(verdict("--rails 0-3 --ok", four()), Ok(()));
        let mut shuffled = four();
        shuffled.swap(0, 2);
        let e = verdict("--rails 0-3", shuffled.clone()).unwrap_err();
        assert!(e.contains("rows of [2 1 0 3], expected [0 1 2 3]"), "{e}");
        assert_eq!(verdict("--rails 0-3 --any-order", shuffled), Ok(()));
        assert!(verdict("--rails 0,1,2", four()).is_err());
    }

    #[test]
    fn modes_each_with_the_rails() {
        let rows = vec![
            row("hostnetwork", 0, "1"),
            row("hostnetwork", 1, "1"),
            row("sriov", 0, "1"),
            row("sriov", 1, "1"),
        ];
        assert_eq!(
            verdict("--modes hostnetwork,sriov --rails 0-1", rows.clone()),
            Ok(())
        );
        assert!(verdict("--modes sriov,hostnetwork --rails 0-1", rows).is_err());
    }

    #[test]
    fn a_failed_row_is_not_ok_and_is_selected_by_its_columns() {
        let mut rows = four();
        rows[2] = row("sriov", 2, "");
        let e = verdict("--ok", rows.clone()).unwrap_err();
        assert!(e.contains("not ok with traffic: sriov rail 2"), "{e}");
        assert_eq!(verdict("--ok --where rail=0,1,3", rows.clone()), Ok(()));
        assert_eq!(
            verdict("--ok --except status=failed --count 3", rows.clone()),
            Ok(())
        );
        assert_eq!(
            verdict(
                "--where rail=2 --status failed --like error=*(0*iterations)",
                rows.clone()
            ),
            Ok(())
        );
        assert!(verdict("--where rail=2 --like error=*refused*", rows.clone()).is_err());
        assert!(
            verdict("--where rail=2 --like error=(0*", rows.clone()).is_err(),
            "not a prefix"
        );
        // A selection of nothing proves nothing: it fails, unless --count 0 asks for it.
        assert!(verdict("--where rail=7 --ok", rows.clone())
            .unwrap_err()
            .contains("no row"));
        assert_eq!(verdict("--where rail=7 --count 0", rows), Ok(()));
    }

    #[test]
    fn ends_nodes_and_cells() {
        assert_eq!(
            verdict("--ends rdma{r},rxe{r} --nodes node-a,node-b", four()),
            Ok(())
        );
        assert_eq!(
            verdict("--ends dra:net{r+1},x{r}", four()),
            Ok(()),
            "another mode's ends"
        );
        let e = verdict("--ends sriov:net{r+1},rxevf{r}", four()).unwrap_err();
        assert!(
            e.contains("client end is rdma0 rxe0, not net1 rxevf0"),
            "{e}"
        );
        assert!(verdict("--nodes node-b,node-a", four()).is_err());
        // Numbers compare as numbers: the CSV's 2 is 2.0.
        assert_eq!(
            verdict(
                "--is duration_s=2.0 --is bw_peak_gbps= --above bw_avg_gbps=0.2",
                four()
            ),
            Ok(())
        );
        assert!(verdict("--above bw_avg_gbps=0.3", four()).is_err());
        assert!(verdict("--is cluster=lab", four()).is_err());
        assert!(verdict("--latency", four())
            .unwrap_err()
            .contains("not a measurement"));
    }

    #[test]
    fn globs() {
        assert!(glob("*-sriov-client", "railsweep-x1-sriov-client"));
        assert!(!glob("*-sriov-client", "railsweep-x1-sriov-client-2"));
        assert!(glob("rxe_a*", "rxe_a0") && !glob("rxe_a*", "xrxe_a0"));
        assert!(glob("*loss (*", "rail 1: loss (rnr)") && glob("", "") && !glob("", "x"));
        assert!(glob("a*b*a", "aba") && !glob("a*a", "a"));
    }

    #[test]
    fn a_bad_flag_value_is_a_usage_error_naming_the_flag() {
        for (line, says) in [
            ("--where colour=red", "--where"),
            ("--is colour=red", "not a column of railsweep's results"),
            ("--above bw_avg_gbps=fast", "not a number"),
            ("--status broken", "give ok, below_threshold or failed"),
            ("--counter client:hw:sent_pkts", "SIDE:SOURCE:NAME>0"),
            ("--rails 3-1", "give rails as 0-3 or 0,1,3"),
        ] {
            let e = try_args(line)
                .err()
                .unwrap_or_else(|| panic!("{line} parsed"));
            assert!(e.contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn counters_by_side_and_name() {
        let line = |side: &str, node: &str, name: &str, delta: u64| CounterLine {
            run: "run-1".into(),
            mode: "sriov".into(),
            rail: 0,
            side: if side == "client" {
                Role::Client
            } else {
                Role::Server
            },
            node: node.into(),
            source: "hw".into(),
            name: name.into(),
            delta,
        };
        let a = args("--where rail=0 --counter-sides client,server --counter client:hw:sent_pkts>0 --counter server:hw:rcvd_pkts=0");
        let rows = selected(&a, four());
        let counters = vec![
            line("client", "node-a", "sent_pkts", 9),
            line("server", "node-b", "rcvd_pkts", 0),
        ];
        assert!(assert_rows(&a, &rows, &counters).is_ok());
        let moved = vec![
            line("client", "node-a", "sent_pkts", 9),
            line("server", "node-b", "rcvd_pkts", 4),
        ];
        let e = assert_rows(&a, &rows, &moved).unwrap_err().to_string();
        assert!(
            e.contains("server hw rcvd_pkts moved by 4, expected 0"),
            "{e}"
        );
        // A line of another node is another pair's.
        let other = vec![
            line("client", "node-a", "sent_pkts", 9),
            line("server", "node-c", "rcvd_pkts", 0),
        ];
        assert!(assert_rows(&a, &rows, &other)
            .unwrap_err()
            .to_string()
            .contains("counters from [\"client\"]"));
    }
}
