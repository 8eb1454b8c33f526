//! One of every control message, with plausible values: for the tests of the channel and the
//! frames (here and in `tests/`) and for the fuzz target's seeds. Not part of the protocol.
#![allow(clippy::unwrap_used)]

use super::msg::{Accept, Hello, Msg, RejectReason, RunSecret, RDMABW_VERSION};
use crate::engine::Endpoints;
use crate::verbs::{MrInfo, QpEndpoint};
use wire::counters::CounterReport;
use wire::params::LocalTuning;
use wire::params::{SizeResult, Sizes, TestLength, TestParams};

/// A size sweep to 8 MiB, 5 s windows, 4 QPs.
pub fn params() -> TestParams {
    TestParams::write_bw(
        Sizes::Sweep { max_bytes: 1 << 23 },
        TestLength::Duration {
            duration_s: 5.0,
            warmup_s: 1.0,
            cooldown_s: 0.5,
        },
        4,
    )
}

/// A result of `size` bytes near 400 Gb/s.
pub fn result(size: u64) -> SizeResult {
    SizeResult {
        msg_size_bytes: size,
        iterations: 123_456,
        bw_peak_gbps: 391.5,
        bw_avg_gbps: 388.25,
        msg_rate_mpps: 0.75,
        bw_p1_gbps: 380.0,
        bw_p50_gbps: 388.0,
        bw_p99_gbps: 390.5,
        interval_ms: 10,
        measured_s: 5.0,
        cpu_s: 4.99,
        cpu_s_per_gb: None,
        polling_cpu: None,
        off_cpu_max_s: None,
        latency: None,
    }
}

/// This build's accept of a test on `device` (port 1, GID index 3, 400 Gb/s, MTU 4096).
pub fn accept(device: &str) -> Accept {
    Accept {
        device: device.into(),
        port: 1,
        gid_index: 3,
        active_mtu_bytes: 4096,
        line_rate_gbps: 400.0,
        rdmabw_version: RDMABW_VERSION.into(),
        latency: true,
    }
}

/// One instance of every message variant (and every reject reason).
pub fn every_variant() -> Vec<Msg> {
    let gid = [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x02, 0xc9, 0xff, 0xfe, 0x00, 0x00, 0x01,
    ];
    vec![
        Msg::Hello(Hello::new(params(), Some("mlx5_3".into()), "pod-a-0")),
        Msg::Hello(Hello::new(params(), None, "host")),
        Msg::Hello(
            Hello::new(params(), None, "pod-b-3")
                .with_server_rail(Some("net4".into()), Some(5))
                .with_tuning(LocalTuning::default()),
        ),
        Msg::Accept(accept("mlx5_3")),
        Msg::Busy {
            device: "mlx5_3".into(),
            by: "pod-b-1 (10.0.0.7:50312)".into(),
        },
        Msg::Reject {
            reason: RejectReason::ParamMismatch {
                param: "--qp/-q".into(),
                server: "4".into(),
                client: "2".into(),
            },
        },
        Msg::Reject {
            reason: RejectReason::UnknownDevice {
                device: "mlx5_9".into(),
                available: vec!["mlx5_0".into(), "mlx5_1".into()],
            },
        },
        Msg::Reject {
            reason: RejectReason::ProtocolVersion {
                server: 1,
                client: 2,
            },
        },
        Msg::Reject {
            reason: RejectReason::Other {
                message: "shutting down".into(),
            },
        },
        Msg::Reject {
            reason: RejectReason::NotThisRun { presented: true },
        },
        Msg::Reject {
            reason: RejectReason::Limit {
                what: "queue pairs per test (-q)".into(),
                asked: 128,
                max: 64,
                flag: "--max-qps".into(),
            },
        },
        Msg::Hello(Hello::new(params(), None, "pod-c").with_secret(RunSecret::new("0123abcd"))),
        Msg::Endpoints(Endpoints {
            device: "mlx5_3".into(),
            port: 1,
            gid_index: Some(3),
            netdev: Some("net4".into()),
            max_msg_bytes: 1 << 23,
            qps: vec![
                QpEndpoint {
                    qpn: 0x00_0123,
                    psn: 0x00ab_cdef,
                    gid,
                    lid: 0,
                },
                QpEndpoint {
                    qpn: u32::MAX,
                    psn: 0,
                    gid: [0xff; 16],
                    lid: u16::MAX,
                },
            ],
            mr: MrInfo {
                addr: u64::MAX - 4095,
                len: 1 << 23,
                rkey: 0xdead_beef,
            },
            mtu_bytes: 4096,
        }),
        Msg::Ready,
        Msg::Heartbeat { elapsed_ms: 1500 },
        Msg::Done {
            results: vec![result(2), result(1 << 23)],
            counters: None,
        },
        Msg::Done {
            results: vec![],
            counters: Some(CounterReport {
                role: wire::report::Role::Server,
                device: "mlx5_3".into(),
                port: 1,
                netdev: Some("rdma3".into()),
                span_s: 2.5,
                read_ms: 0.4,
                counters_read: 1,
                deltas: vec![wire::counters::CounterDelta {
                    source: wire::counters::CounterSource::Hw,
                    name: "out_of_sequence".into(),
                    delta: 3,
                    unit: wire::counters::CounterUnit::Events,
                }],
            }),
        },
        Msg::Error {
            message: "ibv_post_send: retry exceeded \"quoted\" \u{1F4A5}".into(),
        },
    ]
}
