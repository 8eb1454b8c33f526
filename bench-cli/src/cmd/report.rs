//! What a finished (or failed) test prints: ib_write_bw's table, CSV, or one BwReport.

use std::io::Write;
use std::time::SystemTime;

use bench_core::diagnosis::{diagnose, Context};
use bench_core::session::{local_report, Outcome};
use results::rdmabw::params::{LocalTuning, SizeResult, TestParams};
use results::rdmabw::report::{BwReport, Directions, Role, TestStatus};
use results::rdmabw::{FailureKind, RdmabwRun, REPORT_SCHEMA_VERSION};
use results::{below_threshold, percent_of_line_rate, MemoryKind};

use crate::config::{Format, Output};

/// perftest's separator: 87 dashes.
pub const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------";
/// perftest's header with --report_gbits.
pub const HEADER_GBITS: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
/// perftest's header without it (MB = 2^20 bytes).
pub const HEADER_MB: &str =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";

/// Gb/s (10^9 bit/s) to MiB/s (2^20 byte/s), perftest's MB/sec.
pub fn gbps_to_mib_s(gbps: f64) -> f64 {
    gbps * 1e9 / 8.0 / 1_048_576.0
}

/// One row in perftest's format: `" %-7lu    %-7lu          %-7.2lf            %-7.2lf\t\t   %-7.6lf"`.
pub fn table_row(r: &SizeResult, gbits: bool) -> String {
    let conv = |g: f64| if gbits { g } else { gbps_to_mib_s(g) };
    format!(
        " {:<7}    {:<7}          {:<7.2}            {:<7.2}\t\t   {:<7.6}",
        r.msg_size_bytes,
        r.iterations,
        conv(r.bw_peak_gbps),
        conv(r.bw_avg_gbps),
        r.msg_rate_mpps
    )
}

/// The whole table; with `cpu`, ib_write_bw --cpu_util's last column (this process's CPU time
/// over the window in percent of one CPU), then CPU seconds per GB written (`cpu_s_per_gb`;
/// `-` when not measured, as in iteration mode).
pub fn table(rows: &[SizeResult], gbits: bool, cpu: bool) -> String {
    let mut s = String::new();
    s.push_str(RESULT_LINE);
    s.push('\n');
    s.push_str(if gbits { HEADER_GBITS } else { HEADER_MB });
    if cpu {
        s.push_str("\tCPU_Util[%]\tCPU[s/GB]");
    }
    s.push('\n');
    for r in rows {
        s.push_str(&table_row(r, gbits));
        if cpu {
            let pct = if r.measured_s > 0.0 {
                r.cpu_s / r.measured_s * 100.0
            } else {
                0.0
            };
            s.push_str(&format!("\t   {pct:.2}"));
            match r.cpu_s_per_gb {
                Some(c) => s.push_str(&format!("\t   {c:.4}")),
                None => s.push_str("\t   -"),
            }
        }
        s.push('\n');
    }
    s.push_str(RESULT_LINE);
    s.push('\n');
    s
}

/// The threshold in Gb/s of `--min-gbps` and `--min-line-rate-pct` ([`results::threshold_gbps`]).
pub fn threshold_gbps(out: &Output, line_rate: Option<f64>) -> Option<f64> {
    results::threshold_gbps(out.min_gbps, out.min_line_rate_pct, line_rate)
}

/// The report of a finished test, with the threshold applied.
pub fn report(o: &Outcome, out: &Output) -> BwReport {
    let rows = o.combined();
    let line_rate = o.line_rate_gbps();
    let last = rows.last();
    let pct = last.and_then(|r| percent_of_line_rate(r.bw_avg_gbps, line_rate));
    let threshold = threshold_gbps(out, line_rate);
    let below = last.is_some_and(|r| below_threshold(r.bw_avg_gbps, threshold));
    let slow_rate = last
        .zip(out.min_mpps)
        .filter(|(r, min)| r.msg_rate_mpps < *min);
    let missing_rate = out.min_line_rate_pct.is_some() && line_rate.is_none();
    BwReport {
        schema_version: REPORT_SCHEMA_VERSION,
        rdmabw_version: results::VERSION.to_string(),
        role: o.role,
        params: o.params.clone(),
        tuning: o.tuning.clone(),
        path_mtu_bytes: Some(o.path_mtu_bytes),
        memory: o.memory.kind,
        gpu: o.memory.gpu.clone(),
        local: Some(local_report(&host(o), &o.rail, o.active_mtu_bytes)),
        remote: Some(o.remote.report()),
        peer: o.remote.tool(),
        results: rows.clone(),
        line_rate_gbps: line_rate,
        line_rate_pct: pct,
        threshold_gbps: threshold,
        status: if below || missing_rate || slow_rate.is_some() {
            TestStatus::BelowThreshold
        } else {
            TestStatus::Ok
        },
        error: if missing_rate {
            Some("--min-line-rate-pct: the line rate of the ports is unknown".into())
        } else if let (false, Some((r, min))) = (below, slow_rate) {
            Some(format!(
                "message rate {:.6} Mpps at {} B is below -y/--limit_msgrate {min} Mpps",
                r.msg_rate_mpps, r.msg_size_bytes
            ))
        } else if below {
            Some(format!(
                "average {:.2} Gb/s at {} B is below the threshold of {:.2} Gb/s",
                last.map_or(0.0, |r| r.bw_avg_gbps),
                last.map_or(0, |r| r.msg_size_bytes),
                threshold.unwrap_or(0.0)
            ))
        } else {
            None
        },
        error_kind: None,
        directions: o.params.bidirectional.then(|| Directions {
            client_to_server: o.client_results.clone(),
            server_to_client: o.server_results.clone(),
        }),
        counters: o.counters.clone(),
        diagnosis: diagnose(
            &o.counters,
            Context {
                traffic_class: o.tuning.traffic_class,
            },
        ),
    }
}

fn host(_o: &Outcome) -> String {
    crate::config::host_name()
}

/// The report of a test that did not complete.
pub fn failed_report(
    role: Role,
    params: &TestParams,
    tuning: &LocalTuning,
    error: &str,
    kind: Option<FailureKind>,
) -> BwReport {
    BwReport {
        schema_version: REPORT_SCHEMA_VERSION,
        rdmabw_version: results::VERSION.to_string(),
        role,
        params: params.clone(),
        tuning: tuning.clone(),
        path_mtu_bytes: None,
        memory: if tuning.memory.is_host() {
            MemoryKind::Host
        } else {
            MemoryKind::Cuda
        },
        gpu: None,
        local: None,
        remote: None,
        peer: None,
        results: Vec::new(),
        line_rate_gbps: None,
        line_rate_pct: None,
        threshold_gbps: None,
        status: TestStatus::Failed,
        error: Some(error.to_string()),
        error_kind: kind,
        directions: None,
        counters: Vec::new(),
        diagnosis: Vec::new(),
    }
}

/// Prints a finished test on stdout in the chosen format (and a summary on stderr).
pub fn print(rep: &BwReport, out: &Output) -> std::io::Result<()> {
    if let Some(path) = &out.json_file {
        let mut doc = serde_json::to_vec_pretty(rep).map_err(std::io::Error::from)?;
        doc.push(b'\n');
        std::fs::write(path, doc).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("--out_json_file {}: cannot write it: {e}", path.display()),
            )
        })?;
    }
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    match out.format {
        Format::Json => {
            serde_json::to_writer(&mut w, rep).map_err(std::io::Error::from)?;
            writeln!(w)?;
        }
        Format::Csv => RdmabwRun::ended_at(SystemTime::now())
            .write_csv(&mut w, rep)
            .map_err(|e| match e {
                results::ResultsError::Io { source, .. } => source,
                other => std::io::Error::other(other),
            })?,
        Format::Table if out.figure.is_some() => {
            if let Some(r) = rep.results.last() {
                match out.figure {
                    Some(crate::cli::FigureArg::MessageRate) => {
                        writeln!(w, "{:.6}", r.msg_rate_mpps)?;
                    }
                    _ if out.gbits => writeln!(w, "{:.2}", r.bw_avg_gbps)?,
                    _ => writeln!(w, "{:.2}", gbps_to_mib_s(r.bw_avg_gbps))?,
                }
            }
        }
        Format::Table => {
            write!(w, "{}", table(&rep.results, out.gbits, out.cpu_util))?;
            if let (true, Some(d)) = (out.report_both, &rep.directions) {
                for (name, rows) in [
                    ("client to server", &d.client_to_server),
                    ("server to client", &d.server_to_client),
                ] {
                    writeln!(w, " {name}:")?;
                    write!(w, "{}", table(rows, out.gbits, out.cpu_util))?;
                }
            }
            if let Some(names) = &out.report_counters {
                write!(w, "{}", super::counters::deltas_table(&rep.counters, names))?;
            }
        }
    }
    w.flush()?;
    if !out.quiet {
        results::say_raw!("{}", super::counters::findings_text(&rep.diagnosis));
    }
    if !out.quiet && out.format == Format::Table {
        for r in &rep.results {
            results::say!(
                " intervals at {} B: p1 {:.3} p50 {:.3} p99 {:.3} Gb/s, peak {:.3}, average {:.3} Gb/s{}",
                r.msg_size_bytes,
                r.bw_p1_gbps,
                r.bw_p50_gbps,
                r.bw_p99_gbps,
                r.bw_peak_gbps,
                r.bw_avg_gbps,
                match percent_of_line_rate(r.bw_avg_gbps, rep.line_rate_gbps) {
                    Some(p) => format!(
                        " = {p:.2}% of the {} Gb/s line rate",
                        rep.line_rate_gbps.unwrap_or(0.0)
                    ),
                    None => String::new(),
                }
            );
        }
    }
    Ok(())
}

/// `--run_infinitely`'s output: the rows of the windows as they close, each flushed at once so
/// that a reader of the pipe sees it then. The table: ib_write_bw's header before the first
/// row, a row per window, and the closing line at the end. `--json`: one BwReport per line
/// (its `results` that window alone). `--csv`: the header, then a results row per window.
pub struct Stream<'a> {
    out: &'a Output,
    windows: u64,
}

impl<'a> Stream<'a> {
    /// Nothing printed yet.
    pub fn new(out: &'a Output) -> Stream<'a> {
        Stream { out, windows: 0 }
    }

    /// Windows printed so far.
    pub fn windows(&self) -> u64 {
        self.windows
    }

    /// Prints the window `o` holds (its `client_results`).
    pub fn window(&mut self, o: &Outcome) -> std::io::Result<()> {
        let first = self.windows == 0;
        self.windows += 1;
        let out = self.out;
        let rep = report(o, out);
        let mut buf: Vec<u8> = Vec::new();
        match out.format {
            Format::Json => {
                serde_json::to_writer(&mut buf, &rep).map_err(std::io::Error::from)?;
                buf.push(b'\n');
            }
            Format::Csv => {
                let rows = RdmabwRun::ended_at(SystemTime::now()).rail_results(&rep);
                results::write_csv_rows(&mut buf, &rows, first).map_err(|e| match e {
                    results::ResultsError::Io { source, .. } => source,
                    other => std::io::Error::other(other),
                })?;
            }
            Format::Table => {
                if first {
                    if !out.quiet {
                        results::say_raw!("{}", preamble(o));
                    }
                    writeln!(buf, "{RESULT_LINE}")?;
                    write!(buf, "{}", if out.gbits { HEADER_GBITS } else { HEADER_MB })?;
                    if out.cpu_util {
                        write!(buf, "\tCPU_Util[%]")?;
                    }
                    writeln!(buf)?;
                }
                let t = table(&rep.results, out.gbits, out.cpu_util);
                // The table's rows without its header and lines.
                for line in t.lines().skip(2).filter(|l| *l != RESULT_LINE) {
                    writeln!(buf, "{line}")?;
                }
            }
        }
        let stdout = std::io::stdout();
        let mut w = stdout.lock();
        w.write_all(&buf)?;
        w.flush()
    }

    /// After the last window: the table's closing line (nothing for JSON and CSV).
    pub fn end(self) -> std::io::Result<()> {
        if self.out.format == Format::Table && self.windows > 0 {
            let stdout = std::io::stdout();
            let mut w = stdout.lock();
            writeln!(w, "{RESULT_LINE}")?;
            w.flush()?;
        }
        Ok(())
    }
}

/// The preamble on stderr, like ib_write_bw's header block.
pub fn preamble(o: &Outcome) -> String {
    let r = &o.rail;
    let t = &o.tuning;
    let mut s = String::new();
    s.push_str(RESULT_LINE);
    s.push('\n');
    s.push_str(&format!(
        "                    RDMA_Write BW Test (rdmabw {})\n",
        results::VERSION
    ));
    s.push_str(&format!(
        " Dual-port       : OFF\t\tDevice         : {}\n",
        r.device
    ));
    s.push_str(&format!(
        " Number of qps   : {}\t\tTransport type : IB\n",
        o.params.qps
    ));
    s.push_str(&format!(
        " Connection type : RC\t\tUsing SRQ      : OFF\n PCIe relax order: OFF\n TX depth        : {}\n CQ Moderation   : {}\n Post List       : {}\n",
        t.tx_depth, t.cq_mod, t.post_list
    ));
    s.push_str(&format!(
        " Mtu             : {}[B]\n Link type       : {}\n GID index       : {}\n Max inline data : {}[B]\n Traffic class   : {}\n",
        o.path_mtu_bytes,
        match &r.link_layer {
            Some(bench_core::sysfs::LinkLayer::InfiniBand) => "IB",
            _ => "Ethernet",
        },
        r.gid_index,
        t.inline_bytes,
        t.traffic_class
    ));
    if let Some(rate) = o.line_rate_gbps() {
        s.push_str(&format!(" Line rate       : {rate} Gb/s\n"));
    }
    s.push_str(RESULT_LINE);
    s.push('\n');
    let gid = |g: &str| g.to_string();
    s.push_str(&format!(
        " local address: {} port {} GID index {} GID: {}{}\n",
        r.device,
        r.port,
        r.gid_index,
        gid(&r.gid.to_string()),
        match (&r.netdev, &r.ip) {
            (Some(n), Some(ip)) => format!(" ({n} {ip})"),
            _ => String::new(),
        }
    ));
    let rem = o.remote.report();
    if let Some(tool) = o.remote.tool() {
        s.push_str(&format!(" peer: {tool}\n"));
    }
    s.push_str(&format!(
        " remote address: {}port {}{} GID: {} ({} at {})\n",
        if rem.device.is_empty() {
            String::new()
        } else {
            format!("{} ", rem.device)
        },
        rem.port,
        o.remote
            .gid_index
            .map(|i| format!(" GID index {i}"))
            .unwrap_or_default(),
        rem.gid,
        rem.host,
        o.remote.addr
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_perftests_layout() {
        let r = SizeResult {
            msg_size_bytes: 65536,
            iterations: 5000,
            bw_peak_gbps: 0.1234,
            bw_avg_gbps: 0.1111,
            msg_rate_mpps: 0.000212,
            bw_p1_gbps: 0.1,
            bw_p50_gbps: 0.11,
            bw_p99_gbps: 0.12,
            interval_ms: 10,
            measured_s: 5.0,
            cpu_s: 5.0,
            cpu_s_per_gb: None,
            polling_cpu: None,
            off_cpu_max_s: None,
            latency: None,
        };
        let row = table_row(&r, true);
        assert_eq!(
            row,
            " 65536      5000             0.12               0.11   \t\t   0.000212"
        );
        // awk '/^ 65536/ {print $4}' reads the average.
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(fields[3], "0.11");
        let mb = table_row(&r, false);
        assert!(
            mb.split_whitespace().nth(3).unwrap_or("") == "13.24",
            "{mb}"
        );
        assert_eq!(RESULT_LINE.len(), 87);
        let t = table(std::slice::from_ref(&r), true, false);
        assert!(t.starts_with(RESULT_LINE));
        assert!(t.contains(HEADER_GBITS));
        assert!(!t.contains("CPU_Util"));
        // --cpu_util: two more columns, this process's CPU over the window (1.25 s of 5 s:
        // 25%) and CPU seconds per GB (not measured here: `-`).
        let t = table(
            &[SizeResult {
                cpu_s: 1.25,
                ..r.clone()
            }],
            true,
            true,
        );
        assert!(
            t.contains(&format!("{HEADER_GBITS}\tCPU_Util[%]\tCPU[s/GB]")),
            "{t}"
        );
        let row = t.lines().nth(2).unwrap_or_default();
        assert_eq!(row.split_whitespace().nth(5), Some("25.00"), "{row}");
        assert_eq!(row.split_whitespace().nth(6), Some("-"), "{row}");
        let t = table(
            &[SizeResult {
                cpu_s: 1.25,
                cpu_s_per_gb: Some(0.3125),
                ..r
            }],
            true,
            true,
        );
        let row = t.lines().nth(2).unwrap_or_default();
        assert_eq!(row.split_whitespace().nth(6), Some("0.3125"), "{row}");
    }

    #[test]
    fn percentage_thresholds_resolve_against_the_line_rate() {
        let out = Output {
            format: Format::Table,
            gbits: true,
            min_gbps: None,
            min_line_rate_pct: Some(90.0),
            quiet: true,
            report_counters: None,
            json_file: None,
            min_mpps: None,
            cpu_util: false,
            report_both: false,
            figure: None,
            lat: None,
        };
        assert_eq!(threshold_gbps(&out, Some(400.0)), Some(360.0));
        assert_eq!(threshold_gbps(&out, None), None);
        let both = Output {
            min_gbps: Some(370.0),
            ..out
        };
        assert_eq!(threshold_gbps(&both, Some(400.0)), Some(370.0));
    }
}
