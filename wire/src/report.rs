//! What `rdmabw client --json` and `rdmabw server --json` print, and the end lines of
//! `rdmabw batch`.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::counters::{CounterReport, Finding};
use super::gpu::GpuUse;
pub use super::params::Role;
use super::params::{LocalTuning, SizeResult, TestParams};

/// Where the benchmark buffers lived: the `memory` of a row and of rdmabw's
/// [`BwReport`].
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryKind {
    /// Ordinary host memory (`host`).
    #[default]
    Host,
    /// GPU memory registered through a dma-buf file descriptor (`cuda-dmabuf`).
    CudaDmabuf,
    /// GPU memory registered through nvidia-peermem (`cuda-peermem`).
    CudaPeermem,
    /// GPU memory asked for, registered by neither path yet (`cuda`): the memory of a test
    /// that failed before its GPU buffer was registered. Rows carry it like the others.
    Cuda,
}

impl MemoryKind {
    /// The name used in files and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Host => "host",
            MemoryKind::CudaDmabuf => "cuda-dmabuf",
            MemoryKind::CudaPeermem => "cuda-peermem",
            MemoryKind::Cuda => "cuda",
        }
    }
}

impl fmt::Display for MemoryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestStatus {
    /// Measured, and above any threshold.
    Ok,
    /// Measured, but below `--min-gbps` or `--min-line-rate-pct`.
    BelowThreshold,
    /// Did not complete; `error` says why.
    Failed,
}

impl TestStatus {
    /// The name in reports (the JSON value).
    pub fn as_str(self) -> &'static str {
        match self {
            TestStatus::Ok => "ok",
            TestStatus::BelowThreshold => "below_threshold",
            TestStatus::Failed => "failed",
        }
    }
}

/// One end of a test: where it ran and what it used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointReport {
    /// Host (pod) name of that end.
    pub host: String,
    /// RDMA device.
    pub device: String,
    /// Port number.
    pub port: u8,
    /// GID index used.
    pub gid_index: u32,
    /// The GID itself, colon-hex.
    pub gid: String,
    /// The netdev the GID belongs to, when known.
    pub netdev: Option<String>,
    /// The IPv4 address of an IPv4-mapped GID.
    pub ipv4: Option<String>,
    /// Active MTU of the port.
    pub active_mtu_bytes: u32,
    /// Line rate of the port (speed times width).
    pub line_rate_gbps: Option<f64>,
}

/// Which tool the other end of a test was, and its version: `rdmabw` and its release, or
/// `perftest` and the wire version its `ib_write_bw`/`ib_write_lat` sent (`6.24`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerTool {
    /// `rdmabw` or `perftest`.
    pub tool: String,
    /// The peer's version as it said it.
    pub version: String,
}

impl PeerTool {
    /// An rdmabw peer of release `version`.
    pub fn rdmabw(version: &str) -> PeerTool {
        PeerTool {
            tool: "rdmabw".into(),
            version: version.into(),
        }
    }

    /// A perftest peer of wire version `version`.
    pub fn perftest(version: &str) -> PeerTool {
        PeerTool {
            tool: "perftest".into(),
            version: version.into(),
        }
    }

    /// Whether the peer is perftest.
    pub fn is_perftest(&self) -> bool {
        self.tool == "perftest"
    }
}

impl std::fmt::Display for PeerTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.tool, self.version)
    }
}

/// What `rdmabw client --json` (and `rdmabw server --json`) prints: one document per test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BwReport {
    /// [`super::REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Version of the rdmabw that printed it.
    pub rdmabw_version: String,
    /// Which end printed it.
    pub role: Role,
    /// The agreed test parameters.
    pub params: TestParams,
    /// This side's tuning.
    pub tuning: LocalTuning,
    /// Path MTU the QPs used.
    pub path_mtu_bytes: Option<u32>,
    /// Memory the buffers were in: `host`, `cuda-dmabuf` or `cuda-peermem` (`cuda` in the
    /// report of a test that failed before its GPU buffer was registered).
    pub memory: MemoryKind,
    /// The GPU this side's buffer was on (`--use_cuda`), and how it was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuUse>,
    /// This end.
    pub local: Option<EndpointReport>,
    /// The other end, as it reported itself.
    pub remote: Option<EndpointReport>,
    /// Which tool the other end was (absent in older reports and before a peer answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerTool>,
    /// One row per message size (the client's measurement).
    pub results: Vec<SizeResult>,
    /// Line rate used for percentages: the smaller of both ends.
    pub line_rate_gbps: Option<f64>,
    /// Average bandwidth of the largest size as a percentage of the line rate.
    pub line_rate_pct: Option<f64>,
    /// Threshold applied, in Gb/s, after resolving `--min-line-rate-pct`.
    pub threshold_gbps: Option<f64>,
    /// Outcome.
    pub status: TestStatus,
    /// Why it failed.
    pub error: Option<String>,
    /// What kind of failure `error` is (absent in older reports, and where the test
    /// completed): what railsweep's per-rail verdict reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<crate::FailureKind>,
    /// Bidirectional tests (`-b`): what each side measured writing; `results` holds their sum
    /// size by size, as `ib_write_bw -b` prints. Absent for one-way tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directions: Option<Directions>,
    /// Counter deltas around the measured window: this side's, then the peer's as it sent
    /// them. Absent when no counter could be read (and from rdmabw before counters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<CounterReport>,
    /// What the counters say, finding by finding, with their evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnosis: Vec<Finding>,
}

/// Both directions of a bidirectional test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Directions {
    /// Measured by the client, writing to the server.
    pub client_to_server: Vec<SizeResult>,
    /// Measured by the server, writing to the client.
    pub server_to_client: Vec<SizeResult>,
}

/// The word that starts the line `rdmabw batch` prints, on stdout and on stderr, after each
/// test: `rdmabw-batch-end {"test":1,"exit_code":0}`.
pub const BATCH_END: &str = "rdmabw-batch-end";

/// The end of one test of `rdmabw batch`: which input line it was and how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchEnd {
    /// The input line, counted from 1.
    pub test: u64,
    /// What `rdmabw client` with those arguments would have exited with.
    pub exit_code: i32,
}

impl BatchEnd {
    /// The line, without its newline.
    pub fn line(&self) -> String {
        format!(
            "{BATCH_END} {}",
            serde_json::to_string(self).unwrap_or_default()
        )
    }

    /// Reads a line [`BatchEnd::line`] wrote; `None` for any other line.
    pub fn parse(line: &str) -> Option<BatchEnd> {
        let rest = line.trim_end().strip_prefix(BATCH_END)?.strip_prefix(' ')?;
        serde_json::from_str(rest).ok()
    }

    /// Splits a line that ends with an end line (output that did not end with a newline comes
    /// before it) into that output and the end; `(line, None)` when there is no end in it.
    pub fn split(line: &str) -> (&str, Option<BatchEnd>) {
        match line.rfind(BATCH_END) {
            Some(at) => match BatchEnd::parse(&line[at..]) {
                Some(end) => (&line[..at], Some(end)),
                None => (line, None),
            },
            None => (line, None),
        }
    }
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    #[test]
    fn a_status_name_is_its_json_value() {
        for s in [
            TestStatus::Ok,
            TestStatus::BelowThreshold,
            TestStatus::Failed,
        ] {
            assert_eq!(
                serde_json::to_string(&s).unwrap_or_default(),
                format!("\"{}\"", s.as_str())
            );
        }
    }

    #[test]
    fn batch_end_lines_round_trip_and_other_lines_are_not_ends() {
        let e = BatchEnd {
            test: 3,
            exit_code: 2,
        };
        assert_eq!(e.line(), r#"rdmabw-batch-end {"test":3,"exit_code":2}"#);
        assert_eq!(BatchEnd::parse(&format!("{}\n", e.line())), Some(e));
        assert_eq!(BatchEnd::parse("rdmabw: error: x"), None);
        assert_eq!(BatchEnd::parse("rdmabw-batch-endless"), None);
        assert_eq!(BatchEnd::parse("rdmabw-batch-end {\"test\":1}"), None);
        assert_eq!(
            BatchEnd::split(&format!("{{}}{}", e.line())),
            ("{}", Some(e))
        );
        assert_eq!(BatchEnd::split(&e.line()), ("", Some(e)));
        assert_eq!(BatchEnd::split("plain"), ("plain", None));
    }
}
