//! What the unit tests share: rows to feed the table, the summary and the fleet's judgement.

use results::{MemoryKind, NetworkMode, RailResult, RailStatus};

/// A row of rail `rail` between pods `client` and `server` (on nodes of the same names):
/// measured at `bw` Gb/s, or failed (`None`) with the error `failed`; line rate 400 Gb/s.
pub(crate) fn row(client: &str, server: &str, rail: u32, bw: Option<f64>) -> RailResult {
    RailResult {
        run_id: "t".into(),
        time_utc: "2026-01-01T00:00:00Z".into(),
        network_mode: NetworkMode::Lab,
        cluster: "c".into(),
        client_pod: Some(client.into()),
        client_node: client.into(),
        server_pod: Some(server.into()),
        server_node: server.into(),
        rail,
        client_interface: format!("net{}", rail + 1),
        client_rdma_device: "d".into(),
        client_gid_index: Some(1),
        server_interface: format!("net{}", rail + 1),
        server_rdma_device: "d".into(),
        server_gid_index: Some(1),
        traffic_class: None,
        mtu_bytes: None,
        msg_size_bytes: 65536,
        qps: 1,
        duration_s: Some(1.0),
        iterations: None,
        memory: MemoryKind::Host,
        status: if bw.is_some() {
            RailStatus::Ok
        } else {
            RailStatus::Failed
        },
        bw_avg_gbps: bw,
        bw_peak_gbps: bw,
        msg_rate_mpps: None,
        bw_p1_gbps: None,
        bw_p50_gbps: None,
        bw_p99_gbps: None,
        line_rate_gbps: Some(400.0),
        line_rate_pct: None,
        threshold_gbps: None,
        error: bw.is_none().then(|| "failed".into()),
        bidirectional: false,
        diagnosis: Vec::new(),
        counters: Vec::new(),
        poll: None,
        cpu_s_per_gb: None,
        client_gpu: None,
        client_gpu_pcie_root: None,
        server_gpu: None,
        server_gpu_pcie_root: None,
        lat_p50_us: None,
        lat_p99_us: None,
        lat_max_us: None,
        software_rdma: None,
        client_tool: None,
        server_tool: None,
        layer: None,
        evidence: None,
        fix: None,
        client_gpus_without_rail: None,
        server_gpus_without_rail: None,
    }
}
