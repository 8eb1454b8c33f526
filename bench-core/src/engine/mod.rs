//! The measured RDMA WRITE loop, and the per-test resources it runs on.
//!
//! Life of one side of a test on one rail:
//!
//! 1. [`Prepared::new`]: PD, one basic CQ, one buffer, `qps` RC QPs in INIT.
//! 2. Send [`Prepared::info`] (the [`Endpoints`], as the control channel's `endpoints` message
//!    carries them) to the peer and receive the peer's; negotiate the MTU ([`PathMtu::negotiate`]) and build
//!    [`PathParams`].
//! 3. [`Prepared::connect`]: every QP to RTR and RTS against the peer's endpoints.
//! 4. Initiator (client, and both sides when bidirectional): [`Connected::run_writes`]. The
//!    responder of a unidirectional test only keeps its [`Connected`] alive until the control
//!    channel says the test is over.
//!
//! The buffer holds two halves of `max message size` bytes each (page-rounded): writes go out
//! from the first half and land in the second, whose range is what [`Endpoints::mr`]
//! advertises, so in bidirectional mode the device never reads what the peer is writing.
//!
//! The loop (per message size): post RDMA WRITEs on the QPs round-robin, up to `tx_depth`
//! outstanding per QP, in lists of `post_list` work requests per post call; signal every
//! `cq_mod`-th write (and the last one); writes no larger than `inline_bytes` go inline; poll
//! the CQ in batches. Iteration mode posts exactly `iterations` writes per QP and measures from
//! the first post to the last completion. Duration mode runs warm-up, measured window and
//! cool-down like perftest `-D`: only completions polled inside the window count, then it
//! stops posting, makes sure each QP's last write is signaled, and drains.
//!
//! Bandwidth samples: the cumulative completed-bytes curve (linearly interpolated between
//! completion events, so that `cq_mod` batching does not show up as spikes) is cut into
//! fixed intervals (10 ms in duration mode, 1 ms in iteration mode) whose rates go into an
//! HDR histogram for p1/p50/p99; the peak is the best interval.
//!
//! Modes: `--run_infinitely` ([`Connected::run_intervals`]) repeats the measured window of one
//! size until stopped, handing over each window's result as it closes; `--rate_limit` posts
//! from a token bucket (`limit`); `--data_validation` gives each QP and size its own slot and
//! pattern ([`validate`]) and [`Connected::check_landing`] checks what the peer wrote.
//! Waiting for completions (`--poll`): `spin` polls the CQ without pause through the window;
//! `adaptive` sleeps in short steps when completions are far apart; `event` (`-e`) sleeps on
//! the CQ's completion channel between completions (see `event`).
//!
//! A caller-supplied `&AtomicBool` is checked every 200 us; a completion with an error status
//! ends the run with [`Error::WorkCompletion`]; no completion for a long time with writes
//! outstanding ends it with [`Error::Stalled`].

mod event;
mod lat;
mod limit;
mod plan;
mod resources;
mod run;
mod sampler;
pub mod validate;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::verbs::{MrInfo, QpEndpoint};

pub use resources::{buffer_bytes, Connected, Prepared};
pub use validate::Mismatch;

/// How often the stop flag is checked.
pub const STOP_CHECK: Duration = Duration::from_micros(200);
/// Sampling interval in duration mode.
pub const DURATION_INTERVAL: Duration = Duration::from_millis(10);
/// Sampling interval in iteration mode.
pub const ITERATION_INTERVAL: Duration = Duration::from_millis(1);

/// What stops a run: either flag raised (the caller's, e.g. on SIGINT, and the peer watch's
/// verdict), looked at every [`STOP_CHECK`]. Two flags rather than a thread that copies one
/// into the other: such a thread would have to wake several times a second during the window.
#[derive(Debug, Clone, Copy)]
pub struct StopFlags<'a> {
    first: &'a AtomicBool,
    second: Option<&'a AtomicBool>,
}

impl<'a> StopFlags<'a> {
    /// Stop when `flag` is raised.
    pub fn one(flag: &'a AtomicBool) -> StopFlags<'a> {
        StopFlags {
            first: flag,
            second: None,
        }
    }

    /// Stop when `a` or `b` is raised.
    pub fn either(a: &'a AtomicBool, b: &'a AtomicBool) -> StopFlags<'a> {
        StopFlags {
            first: a,
            second: Some(b),
        }
    }

    fn raised(&self) -> bool {
        self.first.load(Ordering::Relaxed) || self.second.is_some_and(|f| f.load(Ordering::Relaxed))
    }
}

/// What one side tells the other so that both can connect and write: one entry per QP, plus
/// the buffer. This is the payload of the control channel's `endpoints` message as it travels
/// (fields in wire order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoints {
    /// The RDMA device of this side (for messages).
    pub device: String,
    /// Its port number.
    pub port: u8,
    /// The queue pairs, in QP order (QP `i` connects to the peer's QP `i`).
    pub qps: Vec<QpEndpoint>,
    /// Where the peer may write.
    pub mr: MrInfo,
    /// This side's active MTU in bytes; the path uses the smaller of both.
    pub mtu_bytes: u32,
    /// The largest message this side prepared its buffer for.
    pub max_msg_bytes: u64,
    /// This side's GID index (so that the server's report names the client's too); absent
    /// from older peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<u32>,
    /// The interface of this side's rail, when known (the session adds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
}
