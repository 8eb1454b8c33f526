//! Counter deltas around a test's measured window and the findings read from them: what
//! `rdmabw --report-counters` prints, and the `counters` and `diagnosis` of a report.

use serde::{Deserialize, Serialize};

use super::params::Role;

/// Where the kernel publishes a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterSource {
    /// `/sys/class/infiniband/DEV/ports/P/counters` (the InfiniBand port counters).
    Port,
    /// `/sys/class/infiniband/DEV/ports/P/hw_counters` (the driver's: mlx5, rxe, ...).
    Hw,
    /// The netdev: `/sys/class/net/IF/statistics`, `carrier_changes`, and the driver's
    /// ethtool statistics (per-priority bytes and pauses, PHY errors).
    Netdev,
}

impl CounterSource {
    /// The word used in tables.
    pub fn as_str(self) -> &'static str {
        match self {
            CounterSource::Port => "port",
            CounterSource::Hw => "hw",
            CounterSource::Netdev => "netdev",
        }
    }
}

/// What one unit of a counter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterUnit {
    /// Bytes.
    Bytes,
    /// 4-byte words (`port_xmit_data`, `port_rcv_data`).
    Words4,
    /// Packets or frames.
    Packets,
    /// Microseconds (`*_pause_duration`).
    Microseconds,
    /// Events of the kind the name says (errors, retries, link changes).
    Events,
}

/// One counter's change between the reads before and after the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterDelta {
    /// Where it was read.
    pub source: CounterSource,
    /// The driver's name for it.
    pub name: String,
    /// After minus before (a counter that went backwards, reset or wrapped, is left out).
    pub delta: u64,
    /// What it counts.
    pub unit: CounterUnit,
}

/// One side's counter deltas around its measured window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterReport {
    /// The side they were read on.
    pub role: Role,
    /// RDMA device.
    pub device: String,
    /// Its port.
    pub port: u8,
    /// The netdev of the rail, when known.
    pub netdev: Option<String>,
    /// Seconds between the two reads: the window with its warm-up and cool-down.
    pub span_s: f64,
    /// Milliseconds one read of every counter took (outside the measured window).
    pub read_ms: f64,
    /// How many counters were read both times.
    pub counters_read: usize,
    /// The counters that moved, and the ones a diagnosis reads even when they did not, in
    /// source and name order.
    pub deltas: Vec<CounterDelta>,
}

impl CounterReport {
    /// Only the deltas that moved, and those `keep` names (the counters a diagnosis reads, so
    /// that "no CNPs" is told apart from "no CNP counter"): the form reports and the control
    /// channel carry.
    pub fn trimmed(mut self, keep: impl Fn(&CounterDelta) -> bool) -> CounterReport {
        self.deltas.retain(|d| d.delta > 0 || keep(d));
        self
    }

    /// The deltas of the counters that moved in the window.
    pub fn moved(&self) -> impl Iterator<Item = &CounterDelta> {
        self.deltas.iter().filter(|d| d.delta > 0)
    }

    /// The delta of counter `name` from `source`, when it was read.
    pub fn get(&self, source: CounterSource, name: &str) -> Option<u64> {
        self.deltas
            .iter()
            .find(|d| d.source == source && d.name == name)
            .map(|d| d.delta)
    }
}

/// What a finding says is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// Packets were lost or retransmitted (sequence errors, retries, drops).
    PacketLoss,
    /// The network signalled congestion (CNPs, ECN marks).
    Congestion,
    /// PFC paused a priority for a share of the window.
    PfcPause,
    /// The bytes went on another priority than the traffic class maps to.
    OtherPriority,
    /// No traffic class was asked for, and the bytes went on priority 0.
    NoTrafficClass,
    /// The link went down, or its carrier changed, during the window.
    LinkFlap,
    /// The PHY saw symbol, CRC or corrected-bit errors.
    PhysicalErrors,
}

impl FindingKind {
    /// Every kind, in order.
    pub const ALL: [FindingKind; 7] = [
        FindingKind::PacketLoss,
        FindingKind::Congestion,
        FindingKind::PfcPause,
        FindingKind::OtherPriority,
        FindingKind::NoTrafficClass,
        FindingKind::LinkFlap,
        FindingKind::PhysicalErrors,
    ];

    /// The kind whose [`FindingKind::word`] is `word`.
    pub fn from_word(word: &str) -> Option<FindingKind> {
        FindingKind::ALL.into_iter().find(|k| k.word() == word)
    }

    /// The word railsweep's table shows.
    pub fn word(self) -> &'static str {
        match self {
            FindingKind::PacketLoss => "loss",
            FindingKind::Congestion => "congestion",
            FindingKind::PfcPause => "pfc-pause",
            FindingKind::OtherPriority => "other-priority",
            FindingKind::NoTrafficClass => "no-tclass",
            FindingKind::LinkFlap => "link-flap",
            FindingKind::PhysicalErrors => "phy-errors",
        }
    }
}

/// One counter a finding rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The side it was read on.
    pub role: Role,
    /// Where.
    pub source: CounterSource,
    /// The counter.
    pub counter: String,
    /// Its delta.
    pub delta: u64,
    /// The delta per second of the span.
    pub per_s: f64,
}

/// A finding: what is wrong, the counters that show it, and what to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// What kind.
    pub finding: FindingKind,
    /// In words, with the figures (`rx_prio3_pause_duration: paused 23% of the window`).
    pub summary: String,
    /// The counters it rests on.
    pub evidence: Vec<Evidence>,
    /// What to look at or change.
    pub what_to_do: String,
}

/// One counter as it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterValue {
    /// Where it was read.
    pub source: CounterSource,
    /// The driver's name for it.
    pub name: String,
    /// Its value now.
    pub value: u64,
    /// What it counts.
    pub unit: CounterUnit,
}

/// What `rdmabw counters --json` prints: every counter of one rail as it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountersReport {
    /// [`super::REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// RDMA device.
    pub device: String,
    /// Its port.
    pub port: u8,
    /// The rail's interface, when known.
    pub netdev: Option<String>,
    /// Milliseconds the read took.
    pub read_ms: f64,
    /// Every counter read, in source and name order.
    pub counters: Vec<CounterValue>,
}
