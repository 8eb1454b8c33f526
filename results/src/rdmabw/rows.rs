//! `rdmabw --csv`: a [`BwReport`] as [`RailResult`] rows, one per message size, so that
//! `railsweep report` reads rdmabw's CSV exactly as railsweep's own.

use std::io::Write;
use std::time::SystemTime;

use super::rails::rail_number;
use super::report::{BwReport, EndpointReport, Role, TestStatus};
use crate::record::{rfc3339_utc, NetworkMode, RailResult, RailStatus};

/// What a results row needs and a [`BwReport`] does not hold: the run it belongs to, when it
/// was measured, and where. (Host names, devices, interfaces and GID indexes are the
/// report's `local` and `remote` ends.)
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
        }
    }
}

impl BwReport {
    /// What `rdmabw --csv` prints: [`BwReport::rail_results`] through this crate's CSV writer
    /// ([`crate::write_csv`]: the header, `schema_version` first, then the rows).
    pub fn write_csv<W: Write>(&self, out: W, run: &RdmabwRun) -> crate::Result<()> {
        crate::write_csv(out, &self.rail_results(run))
    }

    /// The report as results rows: one per message size, in test order, each judged against
    /// the report's threshold ([`RailResult::classify`]); the largest size, the one the report
    /// judged, keeps the report's `below_threshold` and its reason in `error` (also when the
    /// threshold could not be resolved: `--min-line-rate-pct` without a line rate). A failed
    /// report is one failed row at its largest size.
    ///
    /// A report of several sizes (`-a`) gives each size a run of its own, `RUN-SIZEB`
    /// (`20250601T120000Z-65536B`): a run has a rail once, and `railsweep report` lines the
    /// sizes up as columns.
    ///
    /// The client and server columns come from the `local` and `remote` ends as the report's
    /// role says; hosts are nodes (the pod columns stay empty: rdmabw cannot tell a pod's host
    /// name from a node's). The rail number is the one the client's interface name implies
    /// (`rdmaN`, `netN`; else the server's, else 0). `duration_s` is the measured window,
    /// `iterations` the writes completed in it.
    pub fn rail_results(&self, run: &RdmabwRun) -> Vec<RailResult> {
        let (client, server) = match self.role {
            Role::Client => (self.local.as_ref(), self.remote.as_ref()),
            Role::Server => (self.remote.as_ref(), self.local.as_ref()),
        };
        let host = |e: Option<&EndpointReport>| e.map(|e| e.host.clone()).unwrap_or_default();
        let iface = |e: Option<&EndpointReport>| e.and_then(|e| e.netdev.clone());
        let device = |e: Option<&EndpointReport>| e.map(|e| e.device.clone()).unwrap_or_default();
        let rail = iface(client)
            .as_deref()
            .and_then(rail_number)
            .or_else(|| iface(server).as_deref().and_then(rail_number))
            .unwrap_or(0);
        let base = RailResult {
            run_id: run.run_id.clone(),
            time_utc: run.time_utc.clone(),
            network_mode: run.network_mode.clone(),
            cluster: run.cluster.clone(),
            client_pod: None,
            client_node: host(client),
            server_pod: None,
            server_node: host(server),
            rail,
            client_interface: iface(client).unwrap_or_default(),
            client_rdma_device: device(client),
            client_gid_index: client.map(|e| e.gid_index),
            server_interface: iface(server).unwrap_or_default(),
            server_rdma_device: device(server),
            server_gid_index: server.map(|e| e.gid_index),
            traffic_class: Some(self.tuning.traffic_class),
            mtu_bytes: self.path_mtu_bytes,
            msg_size_bytes: self.params.sizes.max(),
            qps: self.params.qps,
            bidirectional: self.params.bidirectional,
            duration_s: None,
            iterations: None,
            memory: self.memory,
            status: RailStatus::Failed,
            bw_avg_gbps: None,
            bw_peak_gbps: None,
            msg_rate_mpps: None,
            bw_p1_gbps: None,
            bw_p50_gbps: None,
            bw_p99_gbps: None,
            line_rate_gbps: self.line_rate_gbps,
            line_rate_pct: None,
            threshold_gbps: None,
            error: None,
            diagnosis: self.diagnosis.clone(),
            counters: self.counters.clone(),
            poll: Some(self.tuning.poll),
            cpu_s_per_gb: None,
            // A DRA allocation, which rdmabw does not know; its own buffer's GPU is `gpu`.
            client_gpu: None,
            client_gpu_pcie_root: None,
            server_gpu: None,
            server_gpu_pcie_root: None,
        };
        if self.status == TestStatus::Failed || self.results.is_empty() {
            let mut row = base;
            row.error = Some(
                self.error
                    .clone()
                    .filter(|e| !e.is_empty())
                    .unwrap_or_else(|| "failed".to_string()),
            );
            row.classify(self.threshold_gbps);
            return vec![row];
        }
        let last = self.results.len() - 1;
        self.results
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut row = RailResult {
                    run_id: if last == 0 {
                        run.run_id.clone()
                    } else {
                        format!("{}-{}B", run.run_id, r.msg_size_bytes)
                    },
                    msg_size_bytes: r.msg_size_bytes,
                    duration_s: Some(r.measured_s),
                    iterations: Some(r.iterations),
                    status: RailStatus::Ok,
                    bw_avg_gbps: Some(r.bw_avg_gbps),
                    bw_peak_gbps: Some(r.bw_peak_gbps),
                    msg_rate_mpps: Some(r.msg_rate_mpps),
                    bw_p1_gbps: Some(r.bw_p1_gbps),
                    bw_p50_gbps: Some(r.bw_p50_gbps),
                    bw_p99_gbps: Some(r.bw_p99_gbps),
                    cpu_s_per_gb: r.cpu_s_per_gb,
                    ..base.clone()
                };
                row.classify(self.threshold_gbps);
                if i == last && self.status == TestStatus::BelowThreshold {
                    row.status = RailStatus::BelowThreshold;
                    row.error.clone_from(&self.error);
                }
                row
            })
            .collect()
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
    const SWEEP: &str = r#"{"schema_version":1,"rdmabw_version":"0.1.0","role":"client",
        "params":{"sizes":{"sweep":{"max_bytes":4}},"length":{"iterations":{"iterations":1000}},
            "qps":2,"connection":"RC","bidirectional":false},
        "tuning":{"tx_depth":128,"cq_mod":100,"post_list":1,"inline_bytes":0,"traffic_class":41,
            "service_level":0,"hop_limit":64,"mtu_bytes":null,"ack_timeout":14,"retry_count":7,
            "poll":"spin"},
        "path_mtu_bytes":1024,"memory":"host",
        "local":{"host":"podA","device":"rxe2","port":1,"gid_index":1,"gid":"::ffff:10.0.3.1",
            "netdev":"net3","ipv4":"10.0.3.1","active_mtu_bytes":1024,"line_rate_gbps":8.0},
        "remote":{"host":"podB","device":"rxe5","port":1,"gid_index":3,"gid":"::ffff:10.0.3.2",
            "netdev":"net3","ipv4":"10.0.3.2","active_mtu_bytes":1024,"line_rate_gbps":8.0},
        "results":[
            {"msg_size_bytes":2,"iterations":2000,"bw_peak_gbps":2.5,"bw_avg_gbps":2.0,
             "msg_rate_mpps":2.5,"bw_p1_gbps":1.5,"bw_p50_gbps":2.0,"bw_p99_gbps":2.5,
             "interval_ms":10,"measured_s":0.5,"cpu_s":0.4},
            {"msg_size_bytes":4,"iterations":2000,"bw_peak_gbps":4.5,"bw_avg_gbps":4.0,
             "msg_rate_mpps":2.5,"bw_p1_gbps":3.5,"bw_p50_gbps":4.0,"bw_p99_gbps":4.5,
             "interval_ms":10,"measured_s":0.5,"cpu_s":0.4}],
        "line_rate_gbps":8.0,"line_rate_pct":50.0,"threshold_gbps":3.0,"status":"ok",
        "error":null}"#;

    fn run() -> RdmabwRun {
        RdmabwRun::ended_at(UNIX_EPOCH + Duration::from_secs(1_709_210_096))
    }

    #[test]
    fn a_sweep_is_one_row_per_size_judged_against_the_threshold() {
        let rep: BwReport = serde_json::from_str(SWEEP).unwrap();
        let rows = rep.rail_results(&run());
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
    }

    #[test]
    fn the_servers_report_puts_its_own_end_in_the_server_columns() {
        let rep: BwReport =
            serde_json::from_str(&SWEEP.replace(r#""role":"client""#, r#""role":"server""#))
                .unwrap();
        let row = &rep.rail_results(&run())[1];
        assert_eq!(row.client_node, "podB");
        assert_eq!(row.server_node, "podA");
        assert_eq!(row.server_rdma_device, "rxe2");
    }

    #[test]
    fn the_largest_size_keeps_the_reports_verdict_and_reason() {
        let mut rep: BwReport = serde_json::from_str(SWEEP).unwrap();
        rep.results.truncate(1);
        rep.threshold_gbps = None;
        rep.status = TestStatus::BelowThreshold;
        rep.error = Some("--min-line-rate-pct: the line rate of the ports is unknown".into());
        let rows = rep.rail_results(&run());
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
        let rows = rep.rail_results(&run());
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
        rep.write_csv(&mut csv, &run()).unwrap();
        let text = String::from_utf8(csv).unwrap();
        assert!(text.starts_with("schema_version,run_id,"), "{text}");
        assert_eq!(
            crate::read_str(&text, "rdmabw.csv").unwrap(),
            rep.rail_results(&run())
        );
    }
}
