//! The machine-readable documents rdmabw prints (`client`/`server`/`rails`/`gpus`/`probe`
//! `--json`, the end lines of `batch`), typed once here so that rdmabw writes them and
//! railsweep reads them through the same types, without linking the verbs stack.
//!
//! Units are in the field names (`_gbps` = 10^9 bit/s, `_bytes`, `_s`).

mod check;
pub mod counters;
pub mod failure;
#[cfg(feature = "cli")]
pub mod flag_table;
pub mod flags;
pub mod gpu;
pub mod lat;
mod lat_stats;
pub mod params;
pub mod probe;
pub mod rails;
pub mod report;
pub mod secret;
pub mod topology;

pub mod threshold;

pub use check::{check_number, InvalidRecord};
pub use failure::FailureKind;
pub use report::MemoryKind;

// `VERSION`, made by build.rs: the build's version, which both binaries report and rdmabw's
// control channel and documents carry.
include!(concat!(env!("OUT_DIR"), "/version.rs"));

/// Version of the documents in this module; bumped when a field changes meaning or goes away.
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// The line `rdmabw server` prints on stderr once it listens (`rdmabw server: listening on
/// 10.0.1.2:18516`), before any client can be served: a launcher that must start a client
/// only once the server listens (perftest's client connects once, without retrying) waits
/// for it.
pub const SERVER_LISTENING: &str = "rdmabw server: listening on ";
