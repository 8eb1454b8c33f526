//! The per-rail result record and its small enums.

use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::layer::Layer;
use crate::rdmabw::counters::{CounterReport, Finding, FindingKind};
use crate::rdmabw::params::PollMode;
use crate::threshold::{below_threshold, percent_of_line_rate};
pub use wire::{check_number, InvalidRecord, MemoryKind};

/// Version of the record layout written by this crate.
///
/// It is written once per JSON file (the envelope's `schema_version`) and once
/// per CSV row (the first column, `schema_version`). Readers refuse files with
/// a higher version than this instead of guessing at fields they do not know.
/// Bump it whenever a field of [`RailResult`] is added, removed, renamed or
/// changes meaning, and list an added field in [`ADDED_FIELDS`] so that older
/// files still read.
///
/// Version 2 added `bidirectional`, `diagnosis` and `counters`; version 3 `poll` and
/// `cpu_s_per_gb`; version 4 `client_gpu`, `client_gpu_pcie_root`, `server_gpu` and
/// `server_gpu_pcie_root`. Version 5 changed the CSV alone: its `counters` column went to the
/// counters file beside it ([`crate::countersio`]), and its fractional numbers are rounded to
/// six significant digits; the record and JSON are as in version 4. Version 6 added
/// `lat_p50_us`, `lat_p99_us` and `lat_max_us` (railsweep `--test bw,lat`); version 7
/// `software_rdma` (whether the figures measure an emulated RDMA device); version 8
/// `client_tool` and `server_tool` (which program ran each end: rdmabw or perftest's
/// ib_write_bw); version 9 `layer`, `evidence` and `fix` (the per-rail verdict,
/// [`crate::verdict`]), and `client_gpus_without_rail`, `server_gpus_without_rail`. Version 10
/// changed the CSV alone: its `diagnosis` cell holds the findings' words (`loss;link-flap`)
/// instead of their JSON, the findings going to the findings file beside it
/// ([`crate::findingsio`]); the record and JSON are as in version 9.
pub const SCHEMA_VERSION: u32 = 10;

/// Fields added after version 1, with the version that added them: a file of an
/// older version has no column (no key) for them, and its rows read with the
/// field's default (`false`, an empty list, or empty). Every other field is required.
pub const ADDED_FIELDS: &[(&str, u32)] = &[
    ("bidirectional", 2),
    ("diagnosis", 2),
    ("counters", 2),
    ("poll", 3),
    ("cpu_s_per_gb", 3),
    ("client_gpu", 4),
    ("client_gpu_pcie_root", 4),
    ("server_gpu", 4),
    ("server_gpu_pcie_root", 4),
    ("lat_p50_us", 6),
    ("lat_p99_us", 6),
    ("lat_max_us", 6),
    ("software_rdma", 7),
    ("client_tool", 8),
    ("server_tool", 8),
    ("layer", 9),
    ("evidence", 9),
    ("fix", 9),
    ("client_gpus_without_rail", 9),
    ("server_gpus_without_rail", 9),
];

/// True when a file of `version` must have field `name`.
pub(crate) fn field_required(name: &str, version: u32) -> bool {
    ADDED_FIELDS
        .iter()
        .find(|(field, _)| *field == name)
        .is_none_or(|(_, added)| version >= *added)
}

/// How the two pods (or hosts) reached the RDMA NICs.
///
/// Serialized as a lower-case string: `hostnetwork`, `hostnetwork-crio`,
/// `ipvlan`, `sriov`, `pods`, `lab`, or any other non-empty text, which is
/// kept as [`NetworkMode::Other`]. The order of the variants is the column
/// order of comparisons; `Other` modes sort last, by name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum NetworkMode {
    /// Pods with `hostNetwork: true` (containerd or unspecified runtime).
    HostNetwork,
    /// Pods with `hostNetwork: true` under CRI-O.
    HostNetworkCrio,
    /// Pods with a secondary IPvlan interface on the RDMA NIC.
    Ipvlan,
    /// Pods with an SR-IOV virtual function per rail.
    Sriov,
    /// Pods on the cluster's default pod network, no RDMA-specific attachment.
    Pods,
    /// Bare-metal lab hosts, no Kubernetes.
    Lab,
    /// Any other mode, by name. Use [`NetworkMode::from_str`] (or `parse`) to
    /// build one so that known names map to their own variant.
    Other(String),
}

impl NetworkMode {
    /// The name used in files, tables and legends.
    pub fn as_str(&self) -> &str {
        match self {
            NetworkMode::HostNetwork => "hostnetwork",
            NetworkMode::HostNetworkCrio => "hostnetwork-crio",
            NetworkMode::Ipvlan => "ipvlan",
            NetworkMode::Sriov => "sriov",
            NetworkMode::Pods => "pods",
            NetworkMode::Lab => "lab",
            NetworkMode::Other(name) => name,
        }
    }
}

impl fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for an empty network mode name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("network mode must not be empty")]
pub struct EmptyNetworkMode;

impl FromStr for NetworkMode {
    type Err = EmptyNetworkMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "" => return Err(EmptyNetworkMode),
            "hostnetwork" => NetworkMode::HostNetwork,
            "hostnetwork-crio" => NetworkMode::HostNetworkCrio,
            "ipvlan" => NetworkMode::Ipvlan,
            "sriov" => NetworkMode::Sriov,
            "pods" => NetworkMode::Pods,
            "lab" => NetworkMode::Lab,
            other => NetworkMode::Other(other.to_string()),
        })
    }
}

impl TryFrom<String> for NetworkMode {
    type Error = EmptyNetworkMode;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<NetworkMode> for String {
    fn from(mode: NetworkMode) -> String {
        match mode {
            NetworkMode::Other(name) => name,
            known => known.as_str().to_string(),
        }
    }
}

/// Outcome of one rail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RailStatus {
    /// Measured, and at or above the threshold (or no threshold was set).
    Ok,
    /// Measured, but the average bandwidth was under `threshold_gbps` (or the p99 latency
    /// above railsweep's `--max-p99-us`: `error` says which).
    BelowThreshold,
    /// No bandwidth could be measured (or, with railsweep `--test bw,lat`, no latency: then
    /// the bandwidth figures stay); `error` says why.
    Failed,
}

impl RailStatus {
    /// Every status, in the order of their names in usage text.
    pub const ALL: [RailStatus; 3] = [
        RailStatus::Ok,
        RailStatus::BelowThreshold,
        RailStatus::Failed,
    ];

    /// The name used in files and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            RailStatus::Ok => "ok",
            RailStatus::BelowThreshold => "below_threshold",
            RailStatus::Failed => "failed",
        }
    }
}

impl fmt::Display for RailStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One measured rail: the only result type; every file and report is made of these.
///
/// Field order is the CSV column order (after the leading `schema_version`
/// column) and the key order of JSON rows; it is part of the schema. Units are
/// in the field names: `_gbps` is 10^9 bit/s, `_mpps` 10^6 messages/s,
/// `_bytes` bytes, `_s` seconds, `_pct` percent (0 to 100).
///
/// `Option` fields are empty cells in CSV and `null` in JSON. Note that an
/// empty string in an `Option<String>` column reads back as `None`. The two
/// lists, `diagnosis` and `counters`, are arrays in JSON; in CSV `diagnosis` is the findings'
/// words joined by `;` (an empty cell is an empty list; the findings whole go to the findings
/// file beside it, [`crate::findingsio`]), and `counters` have no column: they go to the
/// counters file beside it ([`crate::countersio`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RailResult {
    /// Identifier shared by all rails of one sweep.
    pub run_id: String,
    /// When the rail was measured, RFC 3339 in UTC, e.g. `2025-06-01T12:00:00Z`
    /// (see [`rfc3339_utc`]).
    pub time_utc: String,
    /// How the endpoints were attached to the network.
    pub network_mode: NetworkMode,
    /// Kubernetes cluster or lab name.
    pub cluster: String,
    /// Client pod name; `None` outside Kubernetes.
    pub client_pod: Option<String>,
    /// Node (host) the client ran on.
    pub client_node: String,
    /// Server pod name; `None` outside Kubernetes.
    pub server_pod: Option<String>,
    /// Node (host) the server ran on.
    pub server_node: String,
    /// Rail number, 0-based.
    pub rail: u32,
    /// Client network interface of this rail, e.g. `net1` or `ens1f0`.
    pub client_interface: String,
    /// Client RDMA device, e.g. `mlx5_0`.
    pub client_rdma_device: String,
    /// Client GID index, when it was resolved.
    pub client_gid_index: Option<u32>,
    /// Server network interface of this rail.
    pub server_interface: String,
    /// Server RDMA device.
    pub server_rdma_device: String,
    /// Server GID index, when it was resolved.
    pub server_gid_index: Option<u32>,
    /// Traffic class (IPv4 TOS / IPv6 traffic class byte) set on the QPs, if any.
    pub traffic_class: Option<u8>,
    /// Path MTU used by the QPs, in bytes.
    pub mtu_bytes: Option<u32>,
    /// RDMA WRITE message size.
    pub msg_size_bytes: u64,
    /// Number of queue pairs.
    pub qps: u32,
    /// Both directions at once (rdmabw -b): the bandwidth is the sum of both.
    #[serde(default)]
    pub bidirectional: bool,
    /// Measured duration for a time-bound run.
    pub duration_s: Option<f64>,
    /// Iterations for an iteration-bound run.
    pub iterations: Option<u64>,
    /// Where the buffers lived.
    pub memory: MemoryKind,
    /// Outcome of the rail.
    pub status: RailStatus,
    /// Average bandwidth over the run; required unless `status` is `failed`.
    pub bw_avg_gbps: Option<f64>,
    /// Highest interval bandwidth.
    pub bw_peak_gbps: Option<f64>,
    /// Message rate.
    pub msg_rate_mpps: Option<f64>,
    /// 1st percentile of the interval bandwidths.
    pub bw_p1_gbps: Option<f64>,
    /// Median of the interval bandwidths.
    pub bw_p50_gbps: Option<f64>,
    /// 99th percentile of the interval bandwidths.
    pub bw_p99_gbps: Option<f64>,
    /// Link speed of the rail.
    pub line_rate_gbps: Option<f64>,
    /// `bw_avg_gbps` as a percentage of `line_rate_gbps`.
    pub line_rate_pct: Option<f64>,
    /// Threshold the rail was judged against when measured.
    pub threshold_gbps: Option<f64>,
    /// Why the rail failed; required when `status` is `failed`.
    pub error: Option<String>,
    /// What the counters around the window say is wrong (rdmabw's `diagnosis`: each finding
    /// with the counters that show it and what to do); empty when nothing is, or when no
    /// counter was read.
    #[serde(default)]
    pub diagnosis: Vec<Finding>,
    /// The counter deltas around the window, one report per side that read them (client
    /// first); only the counters that moved and those a diagnosis reads.
    #[serde(default)]
    pub counters: Vec<CounterReport>,
    /// How the client waited for completions (rdmabw `--poll`: `spin`, `adaptive`, or `event`
    /// for `-e`); empty when not known (a rail that failed before rdmabw reported, or an
    /// older file).
    #[serde(default)]
    pub poll: Option<PollMode>,
    /// CPU seconds per GB (10^9 bytes) written in the measured window, as the report of the
    /// row's size has it (rdmabw's `cpu_s_per_gb`: the reporting process's CPU over its bytes;
    /// with `bidirectional`, both processes' over both directions'); empty when not measured.
    #[serde(default)]
    pub cpu_s_per_gb: Option<f64>,
    /// The GPU allocated with this rail to the client pod (railsweep `--mode dra
    /// --gpu-align`): the DRA device name, e.g. `gpu-3`, of the claim's request for the rail's
    /// GPU. Empty without `--gpu-align`, outside DRA, and in an older file. It is not the GPU
    /// the buffers were in (`--use_cuda`): rdmabw's report says that.
    #[serde(default)]
    pub client_gpu: Option<String>,
    /// The PCIe root of `client_gpu` (the `resource.kubernetes.io/pcieRoot` its ResourceSlice
    /// publishes, e.g. `pci0000:4c`); empty when none is published.
    #[serde(default)]
    pub client_gpu_pcie_root: Option<String>,
    /// The GPU allocated with this rail to the server pod, as `client_gpu`.
    #[serde(default)]
    pub server_gpu: Option<String>,
    /// The PCIe root of `server_gpu`, as `client_gpu_pcie_root`.
    #[serde(default)]
    pub server_gpu_pcie_root: Option<String>,
    /// Median one-way RDMA WRITE latency of the rail, microseconds (railsweep `--test bw,lat`:
    /// `rdmabw lat` after the bandwidth, at ib_write_lat's 2 B whatever `msg_size_bytes` is:
    /// the client's histogram median of half round trips). Empty when latency was not
    /// measured, and in an older file.
    #[serde(default)]
    pub lat_p50_us: Option<f64>,
    /// 99th percentile of the one-way latency, microseconds, as `lat_p50_us`: what
    /// `--max-p99-us` judges.
    #[serde(default)]
    pub lat_p99_us: Option<f64>,
    /// Largest one-way latency measured, microseconds, as `lat_p50_us`.
    #[serde(default)]
    pub lat_max_us: Option<f64>,
    /// Whether either end's RDMA device is a software one (Soft-RoCE `rxe`, `siw`: no NIC
    /// under it), so that the figures measure an emulation: `true` when `rdmabw rails` named
    /// the rail's attachment `software` on either side, as railsweep saw the rails. Empty where
    /// not known (rdmabw run by hand, and an older file).
    #[serde(default)]
    pub software_rdma: Option<bool>,
    /// The program that ran the client's end: `rdmabw`, or `ib_write_bw` (perftest). Empty
    /// where not known (an older file).
    #[serde(default)]
    pub client_tool: Option<String>,
    /// The program that ran the server's end, as `client_tool`: `ib_write_bw` where the rail
    /// was measured against perftest's server (`railsweep run --server-tool ib_write_bw`, or
    /// an rdmabw client that found perftest on the other end).
    #[serde(default)]
    pub server_tool: Option<String>,
    /// Where the rail's fault is (`pod-spec`, `node-setup`, `nic-port`, `path`, `peer`,
    /// `tool`, `unknown`: [`Layer`]): set on every rail that is not `ok`, and on an `ok` rail
    /// that a counter finding names a fault on (loss on a rail at line rate). Empty on a clean
    /// rail, and in an older file. [`crate::verdict::judge`] decides it.
    #[serde(default)]
    pub layer: Option<Layer>,
    /// The one line of evidence for `layer`.
    #[serde(default)]
    pub evidence: Option<String>,
    /// What to do about it.
    #[serde(default)]
    pub fix: Option<String>,
    /// The client pod's GPUs that have no rail of the pod under their PCIe switch or root
    /// port (`rdmabw rails`' `gpus`), so that NCCL will not use GPUDirect RDMA for them: their
    /// PCI addresses, comma-separated (`0000:8c:00.0,0000:8d:00.0`). Empty when every GPU of
    /// the pod has a rail near it, when the pod has none, where not known (rdmabw by hand, an
    /// older rdmabw) and in an older file. The same on every row of the pod.
    #[serde(default)]
    pub client_gpus_without_rail: Option<String>,
    /// The server pod's, as `client_gpus_without_rail`.
    #[serde(default)]
    pub server_gpus_without_rail: Option<String>,
}

impl RailResult {
    /// The names of the fields in schema order (the CSV header after
    /// `schema_version`), taken from the type's serde derive.
    pub fn field_names() -> &'static [&'static str] {
        crate::introspect::struct_fields::<RailResult>()
    }

    /// The finding kinds of `diagnosis`, each once, in order: the words of railsweep's
    /// `diagnosis` column.
    pub fn finding_kinds(&self) -> Vec<FindingKind> {
        let mut kinds: Vec<FindingKind> = self.diagnosis.iter().map(|f| f.finding).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// Fill `line_rate_pct` from `bw_avg_gbps` and `line_rate_gbps`, record
    /// `threshold_gbps`, and set `status` to `ok` or `below_threshold`.
    ///
    /// A `failed` rail is left failed. Call this once the bandwidth numbers
    /// are in, before appending the row.
    pub fn classify(&mut self, threshold_gbps: Option<f64>) {
        self.threshold_gbps = threshold_gbps;
        self.line_rate_pct = self
            .bw_avg_gbps
            .and_then(|bw| percent_of_line_rate(bw, self.line_rate_gbps));
        if self.status == RailStatus::Failed {
            return;
        }
        self.status = match self.bw_avg_gbps {
            Some(bw) if below_threshold(bw, threshold_gbps) => RailStatus::BelowThreshold,
            _ => RailStatus::Ok,
        };
    }

    /// This row made a failed one that says `why`, its figures dropped (the line rate and
    /// threshold kept where they keep the rules): what a row that broke a rule of
    /// [`RailResult::validate`] becomes, so that it is written, failed, instead of stopping the
    /// writing of every row after it.
    pub fn failed_because(mut self, why: impl Into<String>) -> RailResult {
        let valid = |v: Option<f64>| v.filter(|v| check_number("", *v).is_ok());
        self.status = RailStatus::Failed;
        self.error = Some(why.into()).filter(|e: &String| !e.is_empty());
        self.error.get_or_insert_with(|| "failed".into());
        for figure in [
            &mut self.duration_s,
            &mut self.bw_avg_gbps,
            &mut self.bw_peak_gbps,
            &mut self.msg_rate_mpps,
            &mut self.bw_p1_gbps,
            &mut self.bw_p50_gbps,
            &mut self.bw_p99_gbps,
            &mut self.line_rate_pct,
            &mut self.cpu_s_per_gb,
            &mut self.lat_p50_us,
            &mut self.lat_p99_us,
            &mut self.lat_max_us,
        ] {
            *figure = None;
        }
        self.iterations = None;
        self.line_rate_gbps = valid(self.line_rate_gbps);
        self.threshold_gbps = valid(self.threshold_gbps);
        self
    }

    /// Check the rules the type alone cannot express: every number finite and
    /// not negative, a bandwidth for measured rails, an error text for failed
    /// ones, and a non-empty run id.
    pub fn validate(&self) -> Result<(), InvalidRecord> {
        let bad = |field: &'static str, message: String| Err(InvalidRecord { field, message });
        if self.run_id.is_empty() {
            return bad("run_id", "must not be empty".into());
        }
        let floats = [
            ("duration_s", self.duration_s),
            ("bw_avg_gbps", self.bw_avg_gbps),
            ("bw_peak_gbps", self.bw_peak_gbps),
            ("msg_rate_mpps", self.msg_rate_mpps),
            ("bw_p1_gbps", self.bw_p1_gbps),
            ("bw_p50_gbps", self.bw_p50_gbps),
            ("bw_p99_gbps", self.bw_p99_gbps),
            ("line_rate_gbps", self.line_rate_gbps),
            ("line_rate_pct", self.line_rate_pct),
            ("threshold_gbps", self.threshold_gbps),
            ("lat_p50_us", self.lat_p50_us),
            ("lat_p99_us", self.lat_p99_us),
            ("lat_max_us", self.lat_max_us),
        ];
        for (field, value) in floats {
            if let Some(v) = value {
                check_number(field, v)?;
            }
        }
        match self.status {
            RailStatus::Ok | RailStatus::BelowThreshold if self.bw_avg_gbps.is_none() => bad(
                "bw_avg_gbps",
                format!("is required when status is {}", self.status),
            ),
            RailStatus::Failed if self.error.as_deref().is_none_or(str::is_empty) => {
                bad("error", "is required when status is failed".into())
            }
            _ => Ok(()),
        }
    }
}

/// Format a time as RFC 3339 in UTC with second precision, e.g.
/// `2025-06-01T12:00:00Z`. Times before 1970 are clamped to the epoch.
pub fn rfc3339_utc(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Civil-from-days, Howard Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Seconds since the Unix epoch of a time exactly as [`rfc3339_utc`] writes it
/// (`YYYY-MM-DDTHH:MM:SSZ`); `None` for any other text.
pub fn unix_seconds(rfc3339: &str) -> Option<i64> {
    let b = rfc3339.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || !rfc3339.ends_with('Z')
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| rfc3339.get(r)?.parse::<i64>().ok();
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, m, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    // Days-from-civil, Howard Hinnant's algorithm (the inverse of rfc3339_utc's).
    let y = year - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + m * 60 + sec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// `ALL` names each status once, by its name in files.
    #[test]
    fn all_names_each_status_once() {
        let names: std::collections::BTreeSet<&str> =
            RailStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names.len(), RailStatus::ALL.len());
        for s in RailStatus::ALL {
            assert_eq!(
                serde_json::to_string(&s).unwrap_or_default(),
                format!("\"{s}\"")
            );
        }
    }

    #[test]
    fn unix_seconds_reads_what_rfc3339_utc_writes() {
        for secs in [
            0u64,
            951_782_400,
            1_767_225_600,
            1_796_428_799,
            4_102_444_800,
        ] {
            let text = rfc3339_utc(UNIX_EPOCH + Duration::from_secs(secs));
            assert_eq!(unix_seconds(&text), Some(secs as i64), "{text}");
        }
        assert_eq!(unix_seconds("2026-12-04T12:00:00.5Z"), None);
        assert_eq!(unix_seconds("2026-13-04T12:00:00Z"), None);
        assert_eq!(unix_seconds("yesterday"), None);
    }

    #[test]
    fn network_mode_names_round_trip() {
        for name in [
            "hostnetwork",
            "hostnetwork-crio",
            "ipvlan",
            "sriov",
            "pods",
            "lab",
            "macvlan",
        ] {
            let mode: NetworkMode = name.parse().expect("non-empty");
            assert_eq!(mode.as_str(), name);
            assert_eq!(String::from(mode), name);
        }
        assert_eq!("macvlan".parse(), Ok(NetworkMode::Other("macvlan".into())));
        assert_eq!("".parse::<NetworkMode>(), Err(EmptyNetworkMode));
        assert!(NetworkMode::Sriov < NetworkMode::Other("a".into()));
    }

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_709_210_096);
        assert_eq!(rfc3339_utc(t), "2024-02-29T12:34:56Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339_utc(t), "2000-02-29T00:00:00Z");
    }
}
