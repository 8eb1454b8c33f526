//! A [`BwReport`] as [`RailResult`] rows: the one place where a test becomes rows, for
//! `rdmabw --csv` and for railsweep alike, so that `railsweep report` reads rdmabw's CSV exactly
//! as railsweep's own and a row means the same whoever wrote it.

use std::io::Write;
use std::time::SystemTime;

use super::lat::LatReport;
use super::rails::rail_number;
use super::report::{BwReport, EndpointReport, Role, TestStatus};
use crate::record::{rfc3339_utc, MemoryKind, NetworkMode, RailResult, RailStatus};
use crate::verdict::Cause;

/// What a results row needs and a [`BwReport`] does not hold: the run it belongs to, when it
/// was measured, and where; for railsweep also its pods, nodes and rail, and the test it asked
/// for (for a row whose test left no report, or a report without some value). rdmabw run by
/// hand knows only the first part ([`RdmabwRun::ended_at`]); the report's own ends name hosts,
/// devices, interfaces and GID indexes.
#[derive(Debug, Clone, PartialEq)]
pub struct RdmabwRun {
    /// Shared by the rows of one rdmabw test.
    pub run_id: String,
    /// When the test ended, RFC 3339 in UTC.
    pub time_utc: String,
    /// How the ends reach the network.
    pub network_mode: NetworkMode,
    /// Kubernetes cluster or lab name; empty when not known.
    pub cluster: String,
    /// The rail number, where the caller paired the rails (else the interface name's).
    pub rail: Option<u32>,
    /// The client's end as the caller knows it.
    pub client: EndFacts,
    /// The server's end as the caller knows it.
    pub server: EndFacts,
    /// The test the caller asked for, where it did (railsweep); `None` for rdmabw by hand.
    pub asked: Option<AskedTest>,
}

/// One end of a test as its launcher knows it: where it ran (these win over the report's host),
/// and its rail's interface, device, GID index and rate (the report's win over these).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndFacts {
    /// The pod, if the end ran in one.
    pub pod: Option<String>,
    /// The node; `None`: the report's host name.
    pub node: Option<String>,
    /// Interface, RDMA device and GID index from the rail's discovery.
    pub interface: Option<String>,
    /// See `interface`.
    pub rdma_device: Option<String>,
    /// See `interface`.
    pub gid_index: Option<u32>,
    /// The rail's port rate in Gb/s, for the line rate when the report has none.
    pub rate_gbps: Option<f64>,
    /// The GPU a DRA allocation put beside this rail, and its PCIe root.
    pub gpu: Option<String>,
    /// See `gpu`.
    pub gpu_pcie_root: Option<String>,
    /// Whether the rail's RDMA device is a software one (`rdmabw rails`: attachment
    /// `software`); `None` when the launcher did not discover the rail.
    pub software: Option<bool>,
    /// The program the launcher ran at this end ([`TOOL_RDMABW`], [`TOOL_IB_WRITE_BW`]); a
    /// report's own word (rdmabw at its end, its `peer` at the other) wins over it.
    pub tool: Option<String>,
    /// The pod's GPUs with no rail near them, as the row's `client_gpus_without_rail`.
    pub gpus_without_rail: Option<String>,
}

/// A row's `client_tool`/`server_tool` for an end run by rdmabw.
pub const TOOL_RDMABW: &str = "rdmabw";
/// A row's `client_tool`/`server_tool` for an end run by perftest's `ib_write_bw`.
pub const TOOL_IB_WRITE_BW: &str = "ib_write_bw";

/// The program a bandwidth report's `peer` names, as a row's tool column: rdmabw, or
/// perftest, which in a bandwidth test is its `ib_write_bw`; `None` for a name this crate does
/// not know (the column holds only these two words).
fn peer_program(peer: &super::report::PeerTool) -> Option<String> {
    match peer.tool.as_str() {
        "rdmabw" => Some(TOOL_RDMABW.into()),
        "perftest" => Some(TOOL_IB_WRITE_BW.into()),
        _ => None,
    }
}

/// The test a launcher asked rdmabw for: what its rows say where no report says otherwise.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AskedTest {
    /// Message size in bytes.
    pub size_bytes: u64,
    /// Queue pairs.
    pub qps: u32,
    /// Both directions.
    pub bidirectional: bool,
    /// The traffic class given, if any (rows show it, not rdmabw's default).
    pub traffic_class: Option<u8>,
    /// The path MTU forced, if any.
    pub mtu_bytes: Option<u32>,
    /// The buffer's memory: [`MemoryKind::Cuda`] where GPU memory was asked for.
    pub memory: MemoryKind,
    /// Threshold in Gb/s, if given.
    pub min_gbps: Option<f64>,
    /// Threshold in percent of the line rate, if given.
    pub min_line_rate_pct: Option<f64>,
}

impl RdmabwRun {
    /// What rdmabw knows of a test that ended at `time`: the run id is that time in UTC
    /// (`20250601T120000Z`, as railsweep names its runs); rdmabw knows neither the cluster
    /// (left empty) nor how the pods are attached (network mode `rdmabw`: measured by hand).
    pub fn ended_at(time: SystemTime) -> RdmabwRun {
        let time_utc = rfc3339_utc(time);
        RdmabwRun {
            run_id: time_utc.replace(['-', ':'], ""),
            time_utc,
            network_mode: NetworkMode::Other("rdmabw".to_string()),
            cluster: String::new(),
            rail: None,
            client: EndFacts::default(),
            server: EndFacts::default(),
            asked: None,
        }
    }

    /// The row of a test that failed, saying `error` ("failed" if empty): from its report
    /// where it left one (without its numbers: a window in which nothing completed is no
    /// measurement), else from what the launcher knows (it never started, or its client died).
    pub fn failed_row(&self, rep: Option<&BwReport>, error: &str) -> RailResult {
        let mut row = self.row(rep);
        row.error = Some(if error.is_empty() { "failed" } else { error }.to_string());
        row.classify(self.threshold(rep, row.line_rate_gbps));
        let cause = rep.and_then(|r| {
            r.error_kind
                .map(|kind| Cause::Rdmabw { kind, side: r.role })
        });
        row.judge(cause.as_ref(), None);
        row
    }

    /// The threshold a row is judged against: the report's, else the one asked for (in Gb/s,
    /// or in percent of `line_rate`).
    fn threshold(&self, rep: Option<&BwReport>, line_rate: Option<f64>) -> Option<f64> {
        let asked = self.asked.as_ref();
        rep.and_then(|r| r.threshold_gbps)
            .or(asked.and_then(|a| a.min_gbps))
            .or_else(|| {
                asked
                    .and_then(|a| a.min_line_rate_pct)
                    .zip(line_rate)
                    .map(|(p, l)| p * l / 100.0)
            })
    }

    /// A failed row of the report's (or the asked) test, before its numbers: the fields every
    /// row of the test shares.
    fn row(&self, rep: Option<&BwReport>) -> RailResult {
        let (client, server) = match rep {
            Some(r) if r.role == Role::Server => (r.remote.as_ref(), r.local.as_ref()),
            Some(r) => (r.local.as_ref(), r.remote.as_ref()),
            None => (None, None),
        };
        let end = |e: Option<&EndpointReport>, f: &EndFacts| {
            (
                f.node
                    .clone()
                    .or_else(|| e.map(|e| e.host.clone()))
                    .unwrap_or_default(),
                e.and_then(|e| e.netdev.clone())
                    .or_else(|| f.interface.clone())
                    .unwrap_or_default(),
                // A perftest peer names neither its device nor its GID index: the report has
                // them empty and `u32::MAX`, and the launcher's (if any) are the row's.
                e.map(|e| e.device.clone())
                    .filter(|d| !d.is_empty())
                    .or_else(|| f.rdma_device.clone())
                    .unwrap_or_default(),
                e.map(|e| e.gid_index)
                    .filter(|g| *g != u32::MAX)
                    .or(f.gid_index),
            )
        };
        let (cn, ci, cd, cg) = end(client, &self.client);
        let (sn, si, sd, sg) = end(server, &self.server);
        let rail = self
            .rail
            .or_else(|| rail_number(&ci))
            .or_else(|| rail_number(&si))
            .unwrap_or(0);
        let line_rate = rep.and_then(|r| r.line_rate_gbps).or_else(|| {
            match (self.client.rate_gbps, self.server.rate_gbps) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        });
        let asked = self.asked.as_ref();
        // The report's end is rdmabw's; the other end is what its peer said it was.
        let (own, other) = match rep {
            Some(r) => (
                Some(TOOL_RDMABW.to_string()),
                r.peer.as_ref().and_then(peer_program),
            ),
            None => (None, None),
        };
        let (client_tool, server_tool) = match rep.map(|r| r.role) {
            Some(Role::Server) => (other, own),
            Some(_) => (own, other),
            None => (None, None),
        };
        RailResult {
            run_id: self.run_id.clone(),
            time_utc: self.time_utc.clone(),
            network_mode: self.network_mode.clone(),
            cluster: self.cluster.clone(),
            client_pod: self.client.pod.clone(),
            client_node: cn,
            server_pod: self.server.pod.clone(),
            server_node: sn,
            rail,
            client_interface: ci,
            client_rdma_device: cd,
            client_gid_index: cg,
            server_interface: si,
            server_rdma_device: sd,
            server_gid_index: sg,
            traffic_class: match asked {
                Some(a) => a.traffic_class,
                None => rep.map(|r| r.tuning.traffic_class),
            },
            mtu_bytes: rep
                .and_then(|r| r.path_mtu_bytes)
                .or(asked.and_then(|a| a.mtu_bytes)),
            msg_size_bytes: rep
                .map(|r| r.params.sizes.max())
                .or(asked.map(|a| a.size_bytes))
                .unwrap_or(0),
            qps: rep
                .map(|r| r.params.qps)
                .or(asked.map(|a| a.qps))
                .unwrap_or(1),
            bidirectional: rep
                .map(|r| r.params.bidirectional)
                .or(asked.map(|a| a.bidirectional))
                .unwrap_or(false),
            duration_s: None,
            iterations: None,
            memory: rep
                .map(|r| r.memory)
                .or(asked.map(|a| a.memory))
                .unwrap_or_default(),
            status: RailStatus::Failed,
            bw_avg_gbps: None,
            bw_peak_gbps: None,
            msg_rate_mpps: None,
            bw_p1_gbps: None,
            bw_p50_gbps: None,
            bw_p99_gbps: None,
            line_rate_gbps: line_rate.filter(|r| r.is_finite() && *r > 0.0),
            line_rate_pct: None,
            threshold_gbps: None,
            error: None,
            diagnosis: rep.map(|r| r.diagnosis.clone()).unwrap_or_default(),
            counters: rep.map(|r| r.counters.clone()).unwrap_or_default(),
            poll: rep.map(|r| r.tuning.poll),
            cpu_s_per_gb: None,
            client_gpu: self.client.gpu.clone(),
            client_gpu_pcie_root: self.client.gpu_pcie_root.clone(),
            server_gpu: self.server.gpu.clone(),
            server_gpu_pcie_root: self.server.gpu_pcie_root.clone(),
            lat_p50_us: None,
            lat_p99_us: None,
            lat_max_us: None,
            software_rdma: match (self.client.software, self.server.software) {
                (None, None) => None,
                (c, s) => Some(c.unwrap_or(false) || s.unwrap_or(false)),
            },
            client_tool: client_tool.or_else(|| self.client.tool.clone()),
            server_tool: server_tool.or_else(|| self.server.tool.clone()),
            layer: None,
            evidence: None,
            fix: None,
            client_gpus_without_rail: self.client.gpus_without_rail.clone(),
            server_gpus_without_rail: self.server.gpus_without_rail.clone(),
        }
    }
}

impl RdmabwRun {
    /// What `rdmabw --csv` prints: [`RdmabwRun::rail_results`] of `report` through this
    /// crate's CSV writer ([`crate::write_csv`]: the header, `schema_version` first, then the
    /// rows).
    pub fn write_csv<W: Write>(&self, out: W, report: &BwReport) -> crate::Result<()> {
        crate::write_csv(out, &self.rail_results(report))
    }

    /// `report` (rdmabw's, of this run) as results rows: one per message size, in test order, each judged against
    /// the report's threshold, else the one `run` asked for ([`RailResult::classify`]); the
    /// largest size, the one the report judged, keeps the report's `below_threshold` and its
    /// reason in `error` (also when the threshold could not be resolved:
    /// `--min-line-rate-pct` without a line rate). A failed report is one failed row at its
    /// largest size.
    ///
    /// A report of several sizes (`-a`) gives each size a run of its own, `RUN-SIZEB`
    /// (`20250601T120000Z-65536B`): a run has a rail once, and `railsweep report` lines the
    /// sizes up as columns.
    ///
    /// The client and server columns come from the `local` and `remote` ends as the report's
    /// role says, and where the report lacks one from what `run` knows of it; hosts are nodes
    /// unless `run` names the nodes (rdmabw cannot tell a pod's host name from a node's). The
    /// rail number is `run`'s, else the one the client's interface name implies (`rdmaN`,
    /// `netN`; else the server's, else 0). `duration_s` is the measured window, `iterations`
    /// the writes completed in it.
    pub fn rail_results(&self, report: &BwReport) -> Vec<RailResult> {
        if report.status == TestStatus::Failed || report.results.is_empty() {
            return vec![self.failed_row(Some(report), report.error.as_deref().unwrap_or(""))];
        }
        let base = self.row(Some(report));
        let threshold = self.threshold(Some(report), base.line_rate_gbps);
        let last = report.results.len() - 1;
        report
            .results
            .iter()
            .enumerate()
            .map(|(i, r)| {
                // A perftest peer's figures (its result exchange: size, iterations, peak,
                // average, message rate) come without a window or per-interval samples, and
                // with a peak of 0 from a -D test: those columns stay empty rather than say 0.
                let sampled = r.interval_ms > 0;
                let percentile = |v: f64| sampled.then_some(v);
                let mut row = RailResult {
                    run_id: if last == 0 {
                        self.run_id.clone()
                    } else {
                        format!("{}-{}B", self.run_id, r.msg_size_bytes)
                    },
                    msg_size_bytes: r.msg_size_bytes,
                    duration_s: (r.measured_s > 0.0).then_some(r.measured_s),
                    iterations: Some(r.iterations),
                    status: RailStatus::Ok,
                    bw_avg_gbps: Some(r.bw_avg_gbps),
                    // perftest's -D test measures no peak and sends 0.
                    bw_peak_gbps: (sampled || r.bw_peak_gbps > 0.0).then_some(r.bw_peak_gbps),
                    msg_rate_mpps: Some(r.msg_rate_mpps),
                    bw_p1_gbps: percentile(r.bw_p1_gbps),
                    bw_p50_gbps: percentile(r.bw_p50_gbps),
                    bw_p99_gbps: percentile(r.bw_p99_gbps),
                    cpu_s_per_gb: r.cpu_s_per_gb,
                    ..base.clone()
                };
                row.classify(threshold);
                if i == last && report.status == TestStatus::BelowThreshold {
                    row.status = RailStatus::BelowThreshold;
                    row.error.clone_from(&report.error);
                }
                row.judge(None, None);
                row
            })
            .collect()
    }
}

impl RailResult {
    /// Add the rail's latency (railsweep `--test bw,lat`) from the client's `rdmabw lat`
    /// report: its largest size's histogram p50, p99 and maximum. A p99 above `max_p99_us`
    /// makes a measured rail `below_threshold`, saying so in `error` (after the bandwidth's
    /// reason, if it had one); a failed rail stays failed.
    pub fn add_latency(&mut self, rep: &LatReport, max_p99_us: Option<f64>) {
        let Some(last) = rep.results.last() else {
            self.latency_failed("rdmabw lat reported no result rows", Some(&Cause::NoReport));
            return;
        };
        self.lat_p50_us = Some(last.p50_us);
        self.lat_p99_us = Some(last.p99_us);
        self.lat_max_us = Some(last.max_us);
        if self.status == RailStatus::Failed
            || !crate::threshold::above_max_p99(last.p99_us, max_p99_us)
        {
            return;
        }
        self.status = RailStatus::BelowThreshold;
        let why = format!(
            "p99 latency {:.2} us is above --max-p99-us {}",
            last.p99_us,
            max_p99_us.map(super::flags::fmt_num).unwrap_or_default()
        );
        self.error = Some(match self.error.take() {
            Some(bw) if !bw.is_empty() => format!("{bw}; {why}"),
            _ => why,
        });
        self.judge(None, None);
    }

    /// Record that the rail's latency test failed, saying `why`: the rail is `failed` (it was
    /// asked for and not measured), its bandwidth figures kept.
    pub fn latency_failed(&mut self, why: &str, cause: Option<&Cause>) {
        self.status = RailStatus::Failed;
        let why = format!("latency: {why}");
        self.error = Some(match self.error.take() {
            Some(e) if !e.is_empty() => format!("{e}; {why}"),
            _ => why,
        });
        self.judge(cause, None);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::MemoryKind;

    /// What `rdmabw client --json` printed for a sweep of 2 and 4 B over net3 (rail 2), with a
    /// 3 Gb/s threshold.
    const SWEEP: &str = include_str!("../../tests/fixtures/bwreport-sweep-2-4B.json");

    fn run() -> RdmabwRun {
        RdmabwRun::ended_at(UNIX_EPOCH + Duration::from_secs(1_709_210_096))
    }

    #[test]
    fn a_sweep_is_one_row_per_size_judged_against_the_threshold() {
        let rep: BwReport = serde_json::from_str(SWEEP).unwrap();
        let rows = run().rail_results(&rep);
        assert_eq!(rows.len(), 2);
        let (small, big) = (&rows[0], &rows[1]);
        assert_eq!(small.run_id, "20240229T123456Z-2B");
        assert_eq!(big.run_id, "20240229T123456Z-4B");
        assert_eq!(big.time_utc, "2024-02-29T12:34:56Z");
        assert_eq!(big.network_mode, NetworkMode::Other("rdmabw".into()));
        assert_eq!((big.rail, big.client_interface.as_str()), (2, "net3"));
        assert_eq!(
            (big.client_node.as_str(), big.client_rdma_device.as_str()),
            ("podA", "rxe2")
        );
        assert_eq!(
            (big.server_node.as_str(), big.server_rdma_device.as_str()),
            ("podB", "rxe5")
        );
        assert_eq!(
            (big.client_gid_index, big.server_gid_index),
            (Some(1), Some(3))
        );
        assert_eq!(
            (big.traffic_class, big.mtu_bytes, big.qps),
            (Some(41), Some(1024), 2)
        );
        assert_eq!((big.duration_s, big.iterations), (Some(0.5), Some(2000)));
        assert_eq!(big.memory, MemoryKind::Host);
        assert_eq!(big.bw_avg_gbps, Some(4.0));
        assert_eq!(big.line_rate_pct, Some(50.0));
        assert_eq!(big.threshold_gbps, Some(3.0));
        assert_eq!(big.status, RailStatus::Ok);
        assert_eq!(small.status, RailStatus::BelowThreshold);
        assert!(rows.iter().all(|r| r.validate().is_ok()));
        // rdmabw by hand knows nothing of the rail's device kind.
        assert_eq!(big.software_rdma, None);
    }

    /// The row says which program ran each end: the report's own end is rdmabw, the other is
    /// its `peer` (perftest's is ib_write_bw); where the report has no peer (an older rdmabw,
    /// or no report), what the launcher ran.
    #[test]
    fn a_row_names_the_program_at_each_end() {
        use super::super::report::PeerTool;
        let mut rep: BwReport = serde_json::from_str(SWEEP).unwrap();
        let tools = |rep: &BwReport, run: &RdmabwRun| {
            let r = &run.rail_results(rep)[0];
            (r.client_tool.clone(), r.server_tool.clone())
        };
        let some = |s: &str| Some(s.to_string());
        rep.peer = None;
        assert_eq!(tools(&rep, &run()), (some("rdmabw"), None));
        let mut launched = run();
        launched.server.tool = some(TOOL_IB_WRITE_BW);
        assert_eq!(
            tools(&rep, &launched),
            (some("rdmabw"), some("ib_write_bw"))
        );
        rep.peer = Some(PeerTool::perftest("6.24"));
        assert_eq!(tools(&rep, &run()), (some("rdmabw"), some("ib_write_bw")));
        rep.peer = Some(PeerTool::rdmabw("0.1.0"));
        assert_eq!(tools(&rep, &launched), (some("rdmabw"), some("rdmabw")));
        // A server's report: its own end is the server's.
        rep.role = Role::Server;
        rep.peer = Some(PeerTool::perftest("6.24"));
        assert_eq!(tools(&rep, &run()), (some("ib_write_bw"), some("rdmabw")));
        // perftest names neither its device nor its GID index: the launcher's are the row's,
        // and without them the row leaves them unknown rather than u32::MAX.
        rep.role = Role::Client;
        let remote = rep.remote.as_mut().unwrap();
        (remote.device, remote.gid_index) = (String::new(), u32::MAX);
        let row = &run().rail_results(&rep)[0];
        assert_eq!(
            (row.server_rdma_device.as_str(), row.server_gid_index),
            ("", None)
        );
        launched.server.rdma_device = some("rxe_b2");
        launched.server.gid_index = Some(1);
        let row = &launched.rail_results(&rep)[0];
        assert_eq!(
            (row.server_rdma_device.as_str(), row.server_gid_index),
            ("rxe_b2", Some(1))
        );
        assert_eq!(
            row.client_rdma_device, "rxe2",
            "the report's own end is its own"
        );
        // No report: only what the launcher knows.
        let failed = launched.failed_row(None, "no route");
        assert_eq!(
            (failed.client_tool, failed.server_tool),
            (None, some("ib_write_bw"))
        );
    }

    #[test]
    fn a_software_device_on_either_end_makes_the_row_emulated() {
        let rep: BwReport = serde_json::from_str(SWEEP).unwrap();
        let with = |client, server| {
            let mut run = run();
            run.client.software = client;
            run.server.software = server;
            run.rail_results(&rep)[0].software_rdma
        };
        assert_eq!(with(Some(false), Some(true)), Some(true));
        assert_eq!(with(Some(true), None), Some(true));
        assert_eq!(with(Some(false), Some(false)), Some(false));
        assert_eq!(with(None, None), None);
    }

    #[test]
    fn the_servers_report_puts_its_own_end_in_the_server_columns() {
        let rep: BwReport =
            serde_json::from_str(&SWEEP.replace(r#""role":"client""#, r#""role":"server""#))
                .unwrap();
        let row = &run().rail_results(&rep)[1];
        assert_eq!(row.client_node, "podB");
        assert_eq!(row.server_node, "podA");
        assert_eq!(row.server_rdma_device, "rxe2");
    }

    /// A server's report of a perftest client holds the figures perftest's result exchange
    /// sent (size, iterations, peak, average, message rate), no window and no per-interval
    /// samples (and a peak of 0 from a -D test): the row leaves those columns empty rather than
    /// saying 0, and names perftest's program at the client's end.
    #[test]
    fn a_perftest_peers_figures_leave_the_window_and_percentiles_empty() {
        use super::super::report::PeerTool;
        let mut rep: BwReport =
            serde_json::from_str(&SWEEP.replace(r#""role":"client""#, r#""role":"server""#))
                .unwrap();
        rep.peer = Some(PeerTool::perftest("6.24"));
        let sampled = run().rail_results(&rep)[1].clone();
        assert!(sampled.duration_s.is_some() && sampled.bw_p1_gbps.is_some());
        for r in &mut rep.results {
            (r.interval_ms, r.measured_s) = (0, 0.0);
            (r.bw_p1_gbps, r.bw_p50_gbps, r.bw_p99_gbps) = (0.0, 0.0, 0.0);
        }
        let row = &run().rail_results(&rep)[1];
        assert_eq!(row.duration_s, None);
        assert_eq!(
            (row.bw_p1_gbps, row.bw_p50_gbps, row.bw_p99_gbps),
            (None, None, None)
        );
        assert_eq!(
            (row.bw_avg_gbps, row.bw_peak_gbps, row.iterations),
            (
                sampled.bw_avg_gbps,
                sampled.bw_peak_gbps,
                sampled.iterations
            )
        );
        // perftest's -D test sends a peak of 0: not measured.
        for r in &mut rep.results {
            r.bw_peak_gbps = 0.0;
        }
        assert_eq!(run().rail_results(&rep)[1].bw_peak_gbps, None);
        assert_eq!(row.msg_rate_mpps, sampled.msg_rate_mpps);
        assert_eq!(
            (row.client_tool.as_deref(), row.server_tool.as_deref()),
            (Some("ib_write_bw"), Some("rdmabw"))
        );
        assert_eq!(row.status, sampled.status);
        assert!(row.validate().is_ok());
    }

    #[test]
    fn the_largest_size_keeps_the_reports_verdict_and_reason() {
        let mut rep: BwReport = serde_json::from_str(SWEEP).unwrap();
        rep.results.truncate(1);
        rep.threshold_gbps = None;
        rep.status = TestStatus::BelowThreshold;
        rep.error = Some("--min-line-rate-pct: the line rate of the ports is unknown".into());
        let rows = run().rail_results(&rep);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].run_id, "20240229T123456Z");
        assert_eq!(rows[0].status, RailStatus::BelowThreshold);
        assert_eq!(rows[0].error, rep.error);
    }

    #[test]
    fn a_failed_report_is_one_failed_row_and_keeps_cuda_memory() {
        let mut rep: BwReport =
            serde_json::from_str(&SWEEP.replace(r#""memory":"host""#, r#""memory":"cuda""#))
                .unwrap();
        assert_eq!(rep.memory, MemoryKind::Cuda);
        rep.results.clear();
        rep.local = None;
        rep.remote = None;
        rep.status = TestStatus::Failed;
        rep.error = Some("no CUDA driver library: libcuda.so".into());
        let rows = run().rail_results(&rep);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].status, RailStatus::Failed);
        assert_eq!(rows[0].msg_size_bytes, 4);
        assert_eq!(rows[0].memory, MemoryKind::Cuda);
        assert_eq!(rows[0].error, rep.error);
        assert!(rows[0].validate().is_ok());
    }

    #[test]
    fn the_csv_reads_back_as_results_rows() {
        let rep: BwReport = serde_json::from_str(SWEEP).unwrap();
        let mut csv = Vec::new();
        run().write_csv(&mut csv, &rep).unwrap();
        let text = String::from_utf8(csv).unwrap();
        assert!(text.starts_with("schema_version,run_id,"), "{text}");
        assert_eq!(
            crate::read_str(&text, "rdmabw.csv").unwrap(),
            run().rail_results(&rep)
        );
    }

    /// A client's `rdmabw lat --json` report of one 2 B size, p99 `p99` us.
    fn lat_report(p99: f64) -> LatReport {
        use crate::rdmabw::lat::{LatContext, LatRow, LatencyStats};
        let ctx = LatContext {
            role: Role::Client,
            device: "rxe2".into(),
            port: 1,
            gid_index: 1,
            netdev: Some("net3".into()),
            remote_host: "10.0.2.2".into(),
            remote_device: "rxe5".into(),
        };
        // Round trips of 2*p99 us: every one-way sample is p99.
        let s = LatencyStats::from_round_trips_ns(&[(p99 * 2000.0) as u64; 100]).unwrap();
        let row = LatRow::new(&ctx, 2, 100, &s, None);
        let params: crate::rdmabw::params::TestParams = serde_json::from_value(serde_json::json!({
            "sizes": {"one": {"msg_size_bytes": 2}},
            "length": {"iterations": {"iterations": 100}},
            "qps": 1, "connection": "RC", "bidirectional": false, "latency": true,
        }))
        .unwrap();
        LatReport::new(Role::Client, params, 1024, None, vec![row], vec![])
    }

    #[test]
    fn latency_joins_the_row_and_a_p99_above_the_maximum_marks_it_below_threshold() {
        let rep: BwReport = serde_json::from_str(SWEEP).unwrap();
        let row = run().rail_results(&rep).pop().unwrap();
        assert_eq!(row.status, RailStatus::Ok);
        let mut ok = row.clone();
        ok.add_latency(&lat_report(8.0), Some(10.0));
        assert_eq!(ok.status, RailStatus::Ok);
        assert!((ok.lat_p99_us.unwrap() - 8.0).abs() < 0.01, "{ok:?}");
        assert!(ok.lat_p50_us.is_some() && ok.lat_max_us.is_some());
        assert!(ok.validate().is_ok() && ok.error.is_none());
        let mut slow = row.clone();
        slow.add_latency(&lat_report(12.0), Some(10.0));
        assert_eq!(slow.status, RailStatus::BelowThreshold);
        // The histogram keeps 3 significant digits: 12 us reads back as 12.0x.
        let error = slow.error.as_deref().unwrap();
        assert!(
            error.starts_with("p99 latency 12.0")
                && error.ends_with(" us is above --max-p99-us 10"),
            "{error}"
        );
        // Without a maximum, a slow rail is only measured.
        let mut unjudged = row.clone();
        unjudged.add_latency(&lat_report(12.0), None);
        assert_eq!(unjudged.status, RailStatus::Ok);
        // A latency test that failed fails the rail, keeping its bandwidth.
        let mut failed = row;
        failed.latency_failed("the server runs no latency tests", None);
        assert_eq!(failed.status, RailStatus::Failed);
        assert_eq!(failed.bw_avg_gbps, Some(4.0));
        assert_eq!(
            failed.error.as_deref(),
            Some("latency: the server runs no latency tests")
        );
        assert!(failed.validate().is_ok());
    }
}
