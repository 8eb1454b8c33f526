//! What a server runs when a client asks ([`ServerConfig`]): its rail and parameters, which
//! of them were pinned on its command line, its limits, and which peers it serves.

use crate::control::{PhaseTimeouts, RejectReason, RunSecret, WatchConfig};
use crate::perftest::ReportUnit;
use crate::rails::RailRequest;
use crate::sysfs::SysRoots;
use wire::params::{LocalTuning, TestParams};

/// Which tool the other end is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PeerChoice {
    /// Found out from the peer's first message (rdmabw's default).
    #[default]
    Auto,
    /// Only rdmabw: a client opens in rdmabw's frames at once (an older rdmabw server
    /// understands it), a server refuses perftest.
    Rdmabw,
    /// Only perftest: a client opens with perftest's plain version message, a server refuses
    /// rdmabw clients.
    Perftest,
}

/// Which of a server's parameters were given on its command line: only those must match the
/// client's; the rest follow the client (as a `--daemon` server follows it in everything).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pinned {
    /// `-s`/`-a`.
    pub sizes: bool,
    /// `-n`/`-D` (and the margins).
    pub length: bool,
    /// `-q`.
    pub qps: bool,
    /// `-b`.
    pub bidirectional: bool,
    /// `--tclass`.
    pub traffic_class: bool,
    /// `--sl`.
    pub service_level: bool,
    /// `--hop-limit`.
    pub hop_limit: bool,
    /// `-m`.
    pub mtu: bool,
    /// `--run_infinitely`.
    pub run_infinitely: bool,
    /// `--data_validation`.
    pub data_validation: bool,
}

/// What a server runs when a client asks.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The server's own rail flags; with any of device/netdev given, the only device served.
    pub rail: RailRequest,
    /// The server's parameters (command-line values or defaults).
    pub params: TestParams,
    /// Which of `params` (and of the tuning's path attributes) were given explicitly.
    pub pinned: Pinned,
    /// The server's tuning.
    pub tuning: LocalTuning,
    /// Phase timeouts (the measure timeout is derived per test).
    pub timeouts: PhaseTimeouts,
    /// Heartbeats and silence limit during the window.
    pub watch: WatchConfig,
    /// This host's name.
    pub host: String,
    /// Where sysfs is.
    pub roots: SysRoots,
    /// `--daemon`: follow the client in every parameter (nothing is pinned).
    pub daemon: bool,
    /// The run's secret: when given, only clients that present it are served.
    pub secret: Option<RunSecret>,
    /// What one test may ask of this server, and how many tests a daemon runs at once.
    pub limits: ServerLimits,
    /// Which clients it serves (`--peer`): rdmabw's, perftest's, or both.
    pub peer: PeerChoice,
    /// The units of this side's table: how it reads a perftest client's figures.
    pub unit: ReportUnit,
}

/// What a server allows, so that a client (or many) cannot exhaust the node it runs on. Each
/// refusal names the limit and the server flag that raises it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Queue pairs per test (`--max-qps`).
    pub max_qps: u32,
    /// Bytes of memory one test registers (`--max-buffer`): two halves of the largest message.
    pub max_buffer_bytes: u64,
    /// Tests a daemon runs at once (`--max-tests`); more clients are refused until one ends.
    pub max_tests: u32,
}

impl ServerLimits {
    /// The defaults: room for 16 rails at `-q 4` with 8 MiB messages, far below a GPU node.
    pub const DEFAULT: ServerLimits = ServerLimits {
        max_qps: 64,
        max_buffer_bytes: 1 << 30,
        max_tests: 32,
    };

    /// The first limit `params` exceeds, as the reason to send.
    pub fn check(&self, params: &TestParams) -> Option<RejectReason> {
        let qps = u64::from(params.qps);
        if qps > u64::from(self.max_qps) {
            return Some(RejectReason::Limit {
                what: "queue pairs per test (-q)".into(),
                asked: qps,
                max: u64::from(self.max_qps),
                flag: "--max-qps".into(),
            });
        }
        let bytes = crate::engine::buffer_bytes(params);
        if bytes > self.max_buffer_bytes {
            return Some(RejectReason::Limit {
                what: "bytes of buffer per test (twice the largest message, -s/-a)".into(),
                asked: bytes,
                max: self.max_buffer_bytes,
                flag: "--max-buffer".into(),
            });
        }
        None
    }

    /// The reason for a client that comes while `running` tests run, if that is the limit.
    pub fn check_running(&self, running: usize) -> Option<RejectReason> {
        (running >= self.max_tests as usize).then(|| RejectReason::Limit {
            what: "tests at once".into(),
            asked: running as u64 + 1,
            max: u64::from(self.max_tests),
            flag: "--max-tests".into(),
        })
    }
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits::DEFAULT
    }
}
