//! What `rdmabw lat` (RDMA WRITE latency, a drop-in for perftest's `ib_write_lat`) prints: the
//! typed [`LatReport`] and ib_write_lat's table. The test itself is `bench_core::session` with
//! `TestParams::latency` set; its flags are resolved in `config`.

use std::io::Write;

use anyhow::{Context, Result};
use bench_core::session::Outcome;
use results::rdmabw::lat::{LatContext, LatReport, LatRow};
use results::rdmabw::params::TestLength;
use results::rdmabw::report::{Role, TestStatus};

use crate::config::{Format, Output};
use crate::exit::Exit;

/// Reads the CPU's clock in MHz from /proc/cpuinfo (for -C), as ib_write_lat estimates it.
fn cpu_mhz() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .find_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .filter(|m| *m > 0.0)
}

/// The context of one side's rows.
fn context(o: &Outcome, role: Role) -> LatContext {
    if role == o.role {
        LatContext {
            role,
            device: o.rail.device.clone(),
            port: o.rail.port,
            gid_index: o.rail.gid_index,
            netdev: o.rail.netdev.clone(),
            remote_host: o.remote.host.clone(),
            remote_device: o.remote.device.clone(),
        }
    } else {
        LatContext {
            role,
            device: o.remote.device.clone(),
            port: o.remote.port,
            gid_index: o.remote.gid_index.unwrap_or(0),
            netdev: o.remote.netdev.clone(),
            remote_host: crate::config::host_name(),
            remote_device: o.rail.device.clone(),
        }
    }
}

/// The typed report of a finished latency test, from this side's point of view.
pub fn report(o: &Outcome, max_p99_us: Option<f64>) -> LatReport {
    let (ours, theirs, peer) = match o.role {
        Role::Client => (&o.client_results, &o.server_results, Role::Server),
        Role::Server => (&o.server_results, &o.client_results, Role::Client),
    };
    let rows = |role: Role, results: &[results::rdmabw::params::SizeResult]| -> Vec<LatRow> {
        let ctx = context(o, role);
        results
            .iter()
            .filter_map(|r| {
                r.latency
                    .as_ref()
                    .map(|s| LatRow::new(&ctx, r.msg_size_bytes, r.iterations, s, max_p99_us))
            })
            .collect()
    };
    LatReport {
        peer: o.remote.tool(),
        ..LatReport::new(
            o.role,
            o.params.clone(),
            o.path_mtu_bytes,
            max_p99_us,
            rows(o.role, ours),
            rows(peer, theirs),
        )
    }
}

const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// ib_write_lat's result table of `rows`, in microseconds or (with `cycles`, cycles per
/// microsecond) cycles; a timed test has ib_write_lat's duration columns.
pub fn table(rows: &[LatRow], timed: bool, cycles: Option<f64>) -> String {
    let unit = if cycles.is_some() { "cycles" } else { "usec" };
    let k = cycles.unwrap_or(1.0);
    let mut s = String::new();
    s.push_str(RULE);
    s.push('\n');
    if timed {
        s.push_str(&format!(
            " #bytes        #iterations       t_avg[{unit}]    tps average\n"
        ));
        for r in rows {
            let tps = if r.t_avg_us > 0.0 {
                1e6 / (2.0 * r.t_avg_us)
            } else {
                0.0
            };
            s.push_str(&format!(
                " {:<13} {:<17} {:<14.2} {:.2}\n",
                r.msg_size_bytes,
                r.iterations,
                r.t_avg_us * k,
                tps
            ));
        }
    } else {
        s.push_str(&format!(
            " #bytes #iterations    t_min[{unit}]    t_max[{unit}]  t_typical[{unit}]    \
             t_avg[{unit}]    t_stdev[{unit}]   99% percentile[{unit}]   99.9% \
             percentile[{unit}] \n"
        ));
        for r in rows {
            s.push_str(&format!(
                " {:<7} {:<14} {:<14.2} {:<14.2} {:<16.2} {:<14.2} {:<15.2} {:<23.2} {:.2}\n",
                r.msg_size_bytes,
                r.iterations,
                r.t_min_us * k,
                r.t_max_us * k,
                r.t_typical_us * k,
                r.t_avg_us * k,
                r.t_stdev_us * k,
                r.t_p99_us * k,
                r.t_p99_9_us * k
            ));
        }
    }
    s.push_str(RULE);
    s.push('\n');
    s
}

/// `-U`/`-H`: every sample of each size (in the order measured, or sorted), as ib_write_lat
/// prints them: `#, usec` then `N, value` per line; beyond
/// `results::rdmabw::lat::MAX_KEPT_SAMPLES` of one size, the first ones (said on stderr).
fn samples(o: &Outcome, sorted: bool, cycles: Option<f64>) -> String {
    let ours = match o.role {
        Role::Client => &o.client_results,
        Role::Server => &o.server_results,
    };
    let unit = if cycles.is_some() { "cycles" } else { "usec" };
    let k = cycles.unwrap_or(1.0);
    let mut s = String::new();
    for r in ours {
        let Some(l) = &r.latency else { continue };
        if (l.samples_us.len() as u64) < l.samples {
            results::say!(
                "rdmabw lat: {} B: -U/-H print the first {} of {} samples (a side keeps at most \
                 {} of one size; every sample is in the table's statistics)",
                r.msg_size_bytes,
                l.samples_us.len(),
                l.samples,
                results::rdmabw::lat::MAX_KEPT_SAMPLES
            );
        }
        let mut v = l.samples_us.clone();
        if sorted {
            v.sort_by(f64::total_cmp);
        }
        s.push_str(&format!("#, {unit}\n"));
        for (i, x) in v.iter().enumerate() {
            s.push_str(&format!("{}, {}\n", i + 1, x * k));
        }
    }
    s
}

/// Prints a finished latency test as `out` asks and gives its exit status: 1 when a size's
/// p99 is above `--max-p99-us`.
pub fn print_outcome(o: &Outcome, out: &Output) -> Result<Exit> {
    let lat = out.lat.clone().unwrap_or_default();
    let rep = report(o, lat.limits.max_p99_us);
    if let Some(path) = &out.json_file {
        let mut doc = serde_json::to_vec_pretty(&rep)?;
        doc.push(b'\n');
        std::fs::write(path, doc)
            .with_context(|| format!("--out_json_file {}: cannot write it", path.display()))?;
    }
    let text = match out.format {
        Format::Json => format!("{}\n", serde_json::to_string(&rep)?),
        Format::Csv => {
            let mut v = Vec::new();
            rep.write_csv(&mut v, out.report_both)?;
            String::from_utf8(v)?
        }
        Format::Table => {
            if !out.quiet {
                results::say_raw!("{}", super::report::preamble(o));
            }
            let cycles = if lat.cycles {
                Some(cpu_mhz().context(
                    "-C/--report-cycles: /proc/cpuinfo gives no CPU clock to convert with",
                )?)
            } else {
                None
            };
            let timed = matches!(o.params.length, TestLength::Duration { .. });
            let mut t = String::new();
            if lat.unsorted || lat.histogram {
                t.push_str(&samples(o, !lat.unsorted, cycles));
            }
            t.push_str(&table(&rep.results, timed, cycles));
            if out.report_both && !rep.peer_results.is_empty() {
                t.push_str(&format!(
                    " measured by the {}:\n",
                    rep.peer_results[0].role.as_str()
                ));
                t.push_str(&table(&rep.peer_results, timed, cycles));
            }
            t
        }
    };
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    w.write_all(text.as_bytes())
        .and_then(|()| w.flush())
        .context("writing the results")?;
    match rep.status {
        TestStatus::Ok => Ok(Exit::Ok),
        _ => {
            results::say!(
                "rdmabw: above threshold: {}",
                rep.error
                    .as_deref()
                    .unwrap_or("p99 latency above --max-p99-us")
            );
            Ok(Exit::Failed)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn row(size: u64, rtt_ns: &[u64], max: Option<f64>) -> LatRow {
        let ctx = LatContext {
            role: Role::Client,
            device: "rxe0".into(),
            port: 1,
            gid_index: 1,
            netdev: None,
            remote_host: "h".into(),
            remote_device: "rxe1".into(),
        };
        let s = results::rdmabw::lat::LatencyStats::from_round_trips_ns(rtt_ns).unwrap();
        LatRow::new(&ctx, size, rtt_ns.len() as u64 + 1, &s, max)
    }

    #[test]
    fn the_table_has_ib_write_lats_columns_in_its_order() {
        let t = table(&[row(2, &[4000, 2000, 6000], None)], false, None);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[1].contains("#bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]")
        );
        assert!(lines[1].contains("99% percentile[usec]   99.9% percentile[usec]"));
        let f: Vec<&str> = lines[2].split_whitespace().collect();
        // bytes, iterations, min, max, typical, avg, stdev, 99%, 99.9%: awk '{print $5}' reads
        // the typical latency as it does for ib_write_lat.
        assert_eq!(
            f,
            ["2", "4", "1.00", "3.00", "2.00", "2.00", "0.82", "3.00", "3.00"]
        );
        let c = table(&[row(2, &[4000, 2000, 6000], None)], false, Some(1000.0));
        assert!(
            c.contains("t_min[cycles]") && c.contains(" 1000.00 "),
            "{c}"
        );
        let d = table(&[row(2, &[4000, 2000, 6000], None)], true, None);
        let f: Vec<&str> = d.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(f, ["2", "4", "2.00", "250000.00"]);
    }
}
