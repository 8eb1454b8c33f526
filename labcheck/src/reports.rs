//! Checks of rdmabw's own JSON reports, read into wire's types: a bandwidth test's findings,
//! the windows of `--run_infinitely`, a latency test, `probe`, `rails` and `counters`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use wire::counters::{CountersReport, FindingKind};
use wire::lat::LatReport;
use wire::probe::{ProbeReport, Status};
use wire::rails::{Attachment, RailsReport};
use wire::report::{BwReport, Role, TestStatus};

use crate::check;
use crate::files;
use crate::outcome::or_none;

/// A finding kind by its word (`loss`, `link-flap`), as the CSV's `diagnosis` cell writes it.
fn kind(word: &str) -> Result<FindingKind> {
    FindingKind::from_word(word).with_context(|| {
        let words: Vec<&str> = FindingKind::ALL.iter().map(|k| k.word()).collect();
        format!("{word}: not a finding; give one of {}", words.join(", "))
    })
}

/// `labcheck findings`: what the counters of `rdmabw client --json` say.
#[derive(Debug, clap::Args)]
pub struct FindingsArgs {
    /// The report (`rdmabw client --json`).
    pub file: PathBuf,
    /// The counters were read on exactly these sides, in this order.
    #[arg(long, value_delimiter = ',', value_name = "SIDE,...")]
    pub counter_sides: Vec<String>,
    /// The findings are exactly these kinds, in order, each resting on counters that moved;
    /// `none`: there is no finding.
    #[arg(long, value_delimiter = ',', value_name = "KIND,...|none")]
    pub exactly: Vec<String>,
    /// There is a finding of this kind.
    #[arg(long, value_name = "KIND")]
    pub includes: Option<String>,
    /// With --includes: its every counter was read on this side.
    #[arg(long, value_name = "SIDE")]
    pub evidence_side: Option<String>,
}

/// `labcheck findings`.
pub fn findings(args: &FindingsArgs) -> Result<()> {
    let d: BwReport = files::json(&args.file)?;
    let name = args.file.display();
    let last_bw = d.results.last().map_or(0.0, |r| r.bw_avg_gbps);
    let found: Vec<String> = d
        .diagnosis
        .iter()
        .map(|f| format!("{} ({})", f.finding.word(), f.summary))
        .collect();
    println!(
        "{name}: {} {last_bw} Gb/s; findings {found:?}",
        d.status.as_str()
    );
    for c in &d.counters {
        let moved: Vec<String> = c
            .moved()
            .map(|x| format!("{} {}", x.name, x.delta))
            .collect();
        println!(
            "  {} moved ({:.1} ms to read): {}",
            c.role.as_str(),
            c.read_ms,
            moved.join(", ")
        );
    }
    if !args.counter_sides.is_empty() {
        let roles: Vec<&str> = d.counters.iter().map(|c| c.role.as_str()).collect();
        check!(
            roles == args.counter_sides,
            "{name}: counters of {roles:?}, not {:?}",
            args.counter_sides
        );
    }
    if !args.exactly.is_empty() {
        let want: Vec<FindingKind> = if args.exactly == ["none"] {
            Vec::new()
        } else {
            args.exactly
                .iter()
                .map(|w| kind(w))
                .collect::<Result<_>>()?
        };
        let got: Vec<FindingKind> = d.diagnosis.iter().map(|f| f.finding).collect();
        check!(
            got == want,
            "{name}: findings {found:?}, expected {:?}",
            args.exactly
        );
        for f in &d.diagnosis {
            check!(
                !f.evidence.is_empty() && f.evidence.iter().all(|e| e.delta > 0),
                "{name}: {} does not rest on counters that moved: {:?}",
                f.finding.word(),
                f.evidence
                    .iter()
                    .map(|e| (e.counter.as_str(), e.delta))
                    .collect::<Vec<_>>()
            );
        }
    }
    if let Some(word) = &args.includes {
        let k = kind(word)?;
        let f = d.diagnosis.iter().find(|f| f.finding == k);
        check!(f.is_some(), "{name}: no {word} finding among {found:?}");
        if let (Some(f), Some(side)) = (f, &args.evidence_side) {
            check!(
                f.evidence.iter().all(|e| e.role.as_str() == side),
                "{name}: {word} rests on counters of {:?}, not of the {side} alone",
                f.evidence
                    .iter()
                    .map(|e| e.role.as_str())
                    .collect::<Vec<_>>()
            );
        }
    }
    Ok(())
}

/// `labcheck windows`: the rows of `rdmabw client --run_infinitely`, one per window.
#[derive(Debug, clap::Args)]
pub struct WindowsArgs {
    /// `--json` lines (one report per window) or `--csv` rows (results' CSV).
    pub file: PathBuf,
    /// Each window's length, seconds.
    #[arg(long, value_name = "SECONDS")]
    pub window: f64,
}

/// `labcheck windows`. JSON: every line is a report of one window, with writes and bandwidth.
/// CSV: every row is one window; the windows' mean bandwidth is above 0 (under emulation the
/// idle-priority poller can be off its CPU for a whole short window, which then reads 0).
pub fn windows(args: &WindowsArgs) -> Result<()> {
    let name = args.file.display();
    let text = files::text(&args.file)?;
    if text.trim_start().starts_with('{') {
        let reports: Vec<BwReport> = files::json_lines(&text, &args.file)?;
        check!(!reports.is_empty(), "{name}: no line");
        for (i, d) in reports.iter().enumerate() {
            check!(
                d.params.run_infinitely,
                "{name} line {}: not a --run_infinitely report",
                i + 1
            );
            check!(
                d.results.len() == 1,
                "{name} line {}: {} results, not one window's",
                i + 1,
                d.results.len()
            );
            let r = &d.results[0];
            println!(
                "row {}: {:.4} Gb/s, {} writes, p50 {:.4}",
                i + 1,
                r.bw_avg_gbps,
                r.iterations,
                r.bw_p50_gbps
            );
            check!(
                (r.measured_s - args.window).abs() < 1e-9
                    && r.iterations > 0
                    && r.bw_avg_gbps > 0.0,
                "{name} line {}: {} s, {} writes, {} Gb/s: not a {} s window with traffic",
                i + 1,
                r.measured_s,
                r.iterations,
                r.bw_avg_gbps,
                args.window
            );
        }
        return Ok(());
    }
    let rows = results::read_str(&text, &name.to_string()).context("the CSV rows do not read")?;
    check!(!rows.is_empty(), "{name}: no row");
    for r in &rows {
        check!(
            r.duration_s.is_some_and(|d| (d - args.window).abs() < 1e-9),
            "{name}: rail {} window of {} s, not {}",
            r.rail,
            or_none(r.duration_s),
            args.window
        );
    }
    let bw: Vec<f64> = rows.iter().map(|r| r.bw_avg_gbps.unwrap_or(0.0)).collect();
    let mean = bw.iter().sum::<f64>() / bw.len() as f64;
    println!(
        "{} CSV rows: mean {mean:.4} Gb/s, {} of them 0",
        bw.len(),
        bw.iter().filter(|b| **b == 0.0).count()
    );
    check!(mean > 0.0, "{name}: the windows' mean bandwidth is {mean}");
    Ok(())
}

/// `labcheck lat`: `rdmabw lat --json` on the client.
#[derive(Debug, clap::Args)]
pub struct LatArgs {
    /// The report.
    pub file: PathBuf,
    /// Its one size, bytes.
    #[arg(long, value_name = "BYTES")]
    pub size: Option<u64>,
    /// Its exchanges (`-n`).
    #[arg(long, value_name = "N")]
    pub iters: Option<u64>,
    /// The samples of each side's histogram (the exchanges less the first).
    #[arg(long, value_name = "N")]
    pub samples: Option<u64>,
    /// The client's interface.
    #[arg(long, value_name = "IFACE")]
    pub netdev: Option<String>,
}

/// `labcheck lat`: an ok client report of one size, its percentiles in order, and the server's
/// own measurement beside it.
pub fn lat(args: &LatArgs) -> Result<()> {
    let d: LatReport = files::json(&args.file)?;
    let name = args.file.display();
    check!(
        d.test == "latency" && d.status == TestStatus::Ok && d.role == Role::Client,
        "{name}: test {}, status {}, role {}: not an ok client latency report (error: {})",
        d.test,
        d.status.as_str(),
        d.role.as_str(),
        or_none(d.error.as_deref())
    );
    check!(
        d.results.len() == 1,
        "{name}: {} rows, not one size's",
        d.results.len()
    );
    check!(
        d.peer_results.len() == 1,
        "{name}: {} peer rows, not one",
        d.peer_results.len()
    );
    let (r, p) = (&d.results[0], &d.peer_results[0]);
    println!(
        "client on {} {} gid index {} -> {}: {} B x {}, {} samples; typical {} p50 {} p99 {} p99.9 {} max {} us",
        or_none(r.netdev.as_deref()), r.device, r.gid_index, r.remote_device, r.msg_size_bytes, r.iterations, r.samples,
        r.t_typical_us, r.p50_us, r.p99_us, r.p99_9_us, r.max_us
    );
    println!(
        "server measured: typical {} p99 {} us, {} samples",
        p.t_typical_us, p.p99_us, p.samples
    );
    check!(
        0.0 < r.t_min_us
            && r.t_min_us <= r.p50_us * 1.01
            && r.p50_us <= r.p99_us
            && r.p99_us <= r.p99_9_us
            && r.p99_9_us <= r.max_us * 1.01,
        "{name}: min {} p50 {} p99 {} p99.9 {} max {} us are not in order",
        r.t_min_us,
        r.p50_us,
        r.p99_us,
        r.p99_9_us,
        r.max_us
    );
    check!(
        p.role == Role::Server,
        "{name}: the peer's row is the {}'s",
        p.role.as_str()
    );
    if let Some(n) = args.size {
        check!(
            r.msg_size_bytes == n,
            "{name}: {} B, not {n}",
            r.msg_size_bytes
        );
    }
    if let Some(n) = args.iters {
        check!(
            r.iterations == n,
            "{name}: {} exchanges, not {n}",
            r.iterations
        );
    }
    if let Some(n) = args.samples {
        check!(
            r.samples == n && p.samples == n,
            "{name}: {} samples on the client and {} on the server, not {n}",
            r.samples,
            p.samples
        );
    }
    if let Some(nd) = &args.netdev {
        check!(
            r.netdev.as_deref() == Some(nd.as_str()),
            "{name}: client on {}, not {nd}",
            or_none(r.netdev.as_deref())
        );
    }
    Ok(())
}

/// `labcheck probe`: `rdmabw probe --json`.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// The report.
    pub file: PathBuf,
    /// `CHECK=STATUS` or `CHECK=STATUS:WORDS`: the check has that status (PASS, WARN, FAIL)
    /// and its detail says WORDS.
    #[arg(value_name = "CHECK=STATUS[:WORDS]")]
    pub expect: Vec<String>,
    /// Print every check, not only rails, uverbs-files and uverbs-open.
    #[arg(long)]
    pub all: bool,
}

/// `labcheck probe`.
pub fn probe(args: &ProbeArgs) -> Result<()> {
    let d: ProbeReport = files::json(&args.file)?;
    let name = args.file.display();
    for c in &d.checks {
        if args.all || ["rails", "uverbs-files", "uverbs-open"].contains(&c.name.as_str()) {
            println!("{} {} {}", c.name, c.status.as_str(), c.detail);
        }
    }
    for want in &args.expect {
        let (check_name, rest) = want
            .split_once('=')
            .with_context(|| format!("{want}: give CHECK=STATUS[:WORDS]"))?;
        let (status, words) = rest.split_once(':').unwrap_or((rest, ""));
        let status = [Status::Pass, Status::Warn, Status::Fail]
            .into_iter()
            .find(|s| s.as_str() == status)
            .with_context(|| format!("{want}: the status is PASS, WARN or FAIL"))?;
        let c = d.check(check_name);
        check!(c.is_some(), "{name}: no check {check_name}");
        if let Some(c) = c {
            check!(
                c.status == status,
                "{name}: {check_name} is {} ({}), not {}",
                c.status.as_str(),
                c.detail,
                status.as_str()
            );
            check!(
                c.detail.contains(words),
                "{name}: {check_name}'s detail {:?} does not say {words:?}",
                c.detail
            );
        }
    }
    Ok(())
}

/// `labcheck rails`: `rdmabw rails --json`.
#[derive(Debug, clap::Args)]
pub struct RailsArgs {
    /// The report.
    pub file: PathBuf,
    /// Exactly N rails, numbered 0 to N-1.
    #[arg(long, value_name = "N")]
    pub count: usize,
    /// Rail r's interface, `{r}` the rail and `{r+1}` the next number (`net{r+1}`).
    #[arg(long, value_name = "PATTERN")]
    pub iface: Option<String>,
    /// Rail r's RDMA device, as --iface (`rxe{r}`).
    #[arg(long, value_name = "PATTERN")]
    pub device: Option<String>,
    /// Every rail's attachment (`ipvlan`, `sriov-vf`, `software`, ...).
    #[arg(long, value_name = "KIND")]
    pub attachment: Option<String>,
    /// Every rail usable here.
    #[arg(long)]
    pub usable: bool,
}

/// `labcheck rails`.
pub fn rails(args: &RailsArgs) -> Result<()> {
    let d: RailsReport = files::json(&args.file)?;
    let name = args.file.display();
    let attachment = |a: &Attachment| {
        serde_json::to_value(a)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    for x in &d.rails {
        println!(
            "rail {} {} {} {} GID {} {} usable {} {}",
            x.rail,
            x.iface,
            or_none(x.ipv4.as_deref()),
            or_none(x.device.as_deref()),
            or_none(x.gid_index),
            attachment(&x.attachment),
            x.usable,
            x.reason.as_deref().unwrap_or("")
        );
    }
    let mut rails: Vec<_> = d.rails.iter().collect();
    rails.sort_by_key(|x| x.rail);
    let numbers: Vec<u32> = rails.iter().map(|x| x.rail).collect();
    let want: Vec<u32> = (0..args.count as u32).collect();
    check!(numbers == want, "{name}: rails {numbers:?}, not {want:?}");
    for x in rails {
        let fill = |p: &str| {
            p.replace("{r+1}", &(x.rail + 1).to_string())
                .replace("{r}", &x.rail.to_string())
        };
        if let Some(p) = &args.iface {
            check!(
                x.iface == fill(p),
                "{name}: rail {} is {}, not {}",
                x.rail,
                x.iface,
                fill(p)
            );
        }
        if let Some(p) = &args.device {
            check!(
                x.device.as_deref() == Some(fill(p).as_str()),
                "{name}: rail {}'s device is {}, not {}",
                x.rail,
                or_none(x.device.as_deref()),
                fill(p)
            );
        }
        if let Some(a) = &args.attachment {
            check!(
                attachment(&x.attachment) == *a,
                "{name}: rail {} is attached {}, not {a}",
                x.rail,
                attachment(&x.attachment)
            );
        }
        if args.usable {
            check!(
                x.usable,
                "{name}: rail {} is not usable: {}",
                x.rail,
                or_none(x.reason.as_deref())
            );
        }
    }
    Ok(())
}

/// `labcheck counters`: `rdmabw counters --json`.
#[derive(Debug, clap::Args)]
pub struct CountersArgs {
    /// The report (`-`: stdin).
    pub file: PathBuf,
    /// The rail's interface.
    #[arg(long, value_name = "IFACE")]
    pub netdev: Option<String>,
    /// A counter of this name is among those read.
    #[arg(long = "has", value_name = "NAME")]
    pub has: Vec<String>,
}

/// `labcheck counters`.
pub fn counters(args: &CountersArgs) -> Result<()> {
    let d: CountersReport = files::json(&args.file)?;
    let name = args.file.display();
    println!(
        "{} port {} ({}): {} counters",
        d.device,
        d.port,
        or_none(d.netdev.as_deref()),
        d.counters.len()
    );
    if let Some(nd) = &args.netdev {
        check!(
            d.netdev.as_deref() == Some(nd.as_str()),
            "{name}: netdev {}, not {nd}",
            or_none(d.netdev.as_deref())
        );
    }
    for c in &args.has {
        check!(
            d.counters.iter().any(|x| &x.name == c),
            "{name}: no counter {c}"
        );
    }
    check!(!d.counters.is_empty(), "{name}: no counter at all");
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::Parser;

    fn fixture(name: &str) -> String {
        format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
    }

    /// `labcheck LINE` (the fixtures named by their file names): `Ok`, or the failure's words.
    fn labcheck(line: &str) -> Result<(), String> {
        #[derive(Parser)]
        struct T {
            #[command(subcommand)]
            c: C,
        }
        #[derive(clap::Subcommand)]
        enum C {
            Findings(FindingsArgs),
            Windows(WindowsArgs),
            Lat(LatArgs),
        }
        let words = line.split(' ').map(|w| {
            if w.contains('.') && !w.starts_with("0.") {
                fixture(w)
            } else {
                w.to_string()
            }
        });
        let t = T::try_parse_from(std::iter::once("t".to_string()).chain(words)).unwrap();
        let out = match &t.c {
            C::Findings(a) => findings(a),
            C::Windows(a) => windows(a),
            C::Lat(a) => lat(a),
        };
        out.map_err(|e| {
            assert!(e.is::<crate::outcome::Failed>(), "not a failure: {e:#}");
            e.to_string()
        })
    }

    #[test]
    fn loss_where_it_was_and_nowhere_else() {
        assert_eq!(
            labcheck("findings lossy.json --counter-sides client,server --exactly loss"),
            Ok(())
        );
        assert_eq!(
            labcheck("findings clean.json --counter-sides client,server --exactly none"),
            Ok(())
        );
        let e = labcheck("findings clean.json --exactly loss").unwrap_err();
        assert!(e.contains("findings [], expected [\"loss\"]"), "{e}");
        assert!(labcheck("findings lossy.json --exactly none").is_err());
        assert!(
            labcheck("findings lossy.json --counter-sides server,client")
                .unwrap_err()
                .contains("counters of")
        );
    }

    #[test]
    fn a_link_flap_seen_on_the_server() {
        assert_eq!(
            labcheck("findings flap.json --includes link-flap --evidence-side server"),
            Ok(())
        );
        assert!(
            labcheck("findings flap.json --includes link-flap --evidence-side client")
                .unwrap_err()
                .contains("not of the client alone")
        );
        assert!(labcheck("findings clean.json --includes link-flap")
            .unwrap_err()
            .contains("no link-flap finding"));
    }

    #[test]
    fn windows_of_run_infinitely() {
        assert_eq!(labcheck("windows windows.jsonl --window 1"), Ok(()));
        assert_eq!(labcheck("windows windows.csv --window 0.25"), Ok(()));
        assert!(labcheck("windows windows.jsonl --window 2")
            .unwrap_err()
            .contains("not a 2 s window"));
        assert!(labcheck("windows windows.csv --window 1")
            .unwrap_err()
            .contains("not 1"));
        assert!(
            labcheck("windows lossy.json --window 2").is_err(),
            "one report is not a --run_infinitely line"
        );
    }

    #[test]
    fn a_latency_report() {
        assert_eq!(
            labcheck("lat lat.json --size 64 --iters 300 --samples 299"),
            Ok(())
        );
        assert!(labcheck("lat lat.json --iters 200")
            .unwrap_err()
            .contains("300 exchanges, not 200"));
        assert!(labcheck("lat lat.json --samples 300").is_err());
        assert!(labcheck("lat lat.json --netdev net9")
            .unwrap_err()
            .contains("not net9"));
    }
}
