//! The control channel between `rdmabw client` and `rdmabw server`.
//!
//! Shaped like iperf3's control connection: one TCP connection carrying versioned,
//! length-prefixed, size-capped JSON messages ([`frame`](encode_frame)), with a deadline on every
//! phase, so neither side can hang on a peer that is gone, frozen, or not rdmabw at all.
//!
//! # Message sequence
//!
//! ```text
//!  client                                         server
//!    |--- TCP connect (retried until deadline) ------>|   Connect
//!    |--- Hello {params, device, client_host} ------->|   Handshake
//!    |<-- Accept {device, port, gid, mtu, rate} ------|     (or Busy / Reject, then close)
//!    |--- Endpoints {qps, mr, mtu} ------------------>|   Exchange
//!    |<-- Endpoints {qps, mr, mtu} -------------------|
//!    |         both: QPs to RTR / RTS                  |
//!    |--- Ready ------------------------------------->|   Ready
//!    |<-- Ready --------------------------------------|
//!    |<== Heartbeat {elapsed_ms} both ways, 500 ms ==>|   Measure (PeerWatch on both sides)
//!    |--- Done {client results} --------------------->|   Results
//!    |<-- Done {server results, empty unless -b} -----|
//!    |--- close ------------------ close -------------|
//!
//!  Either side, at any point: Error {message}, then close.
//! ```
//!
//! # Driving it
//!
//! Client: [`ControlChannel::connect`], [`ControlChannel::client_handshake`] (gives the
//! server's [`Accept`]), [`ControlChannel::exchange_endpoints`] with
//! what `prepared.info()?` gives (connect with `prepared.connect(&theirs, ..)`),
//! [`ControlChannel::sync_ready`], [`ControlChannel::watch`] and pass `&*watch.stop_flag()` to
//! the write loop, [`PeerWatch::finish`], `send(&Msg::Done { .. })`,
//! [`ControlChannel::expect_done`] in [`Phase::Results`], [`ControlChannel::close`].
//!
//! Server: accept, [`ControlChannel::from_stream`], [`ControlChannel::expect_hello`], the
//! admission (`session::server::serve_one`: version, secret, limits, parameters, rail, then
//! the device's claim from [`DeviceClaims`], answering `Reject`/`Busy`), open the device and
//! `send(&Msg::Accept(..))`, then `exchange_endpoints`, `sync_ready`, `watch`, [`PeerWatch::wait_peer_done`] with the measure timeout, `finish`,
//! `expect_done(Phase::Results)` (returns the client's results at once), `send(&Msg::Done {..})`,
//! `close`. On any local failure: [`ControlChannel::fail`] or [`PeerWatch::abort`] with the reason.

mod channel;
mod claims;
mod error;
mod frame;
mod msg;
mod phase;
#[doc(hidden)]
pub mod samples;
mod shown;
mod watch;

pub(crate) use channel::is_wait;
pub use channel::{ControlChannel, Opening};
pub use claims::{ClaimInfo, DeviceBusy, DeviceClaim, DeviceClaims};
pub use error::ControlError;
pub use frame::{
    check_decoder_invariants, decode_frame, encode_frame, read_frame, write_frame, Dribble,
    FrameDecoder, FrameError, HEADER_LEN, MAGIC, MAX_FRAME_BYTES,
};
pub use msg::{Accept, Hello, Msg, RejectReason, RunSecret, PROTOCOL_VERSION, RDMABW_VERSION};
pub use phase::{measure_timeout, Phase, PhaseTimeouts};
pub use shown::{for_log, PEER_TEXT_CHARS};
pub use watch::{PeerAlive, PeerStatus, PeerWatch, Progress, WatchConfig};

// The `endpoints` message's payload and its parts: the engine's and the verbs' own types,
// serialized as they are.
pub use crate::engine::Endpoints;
pub use crate::verbs::{format_gid, parse_gid, MrInfo, QpEndpoint};

/// The default control port: perftest's, so that an rdmabw client pointed at a perftest server
/// (or the reverse) is told so clearly instead of failing obscurely.
pub const DEFAULT_CONTROL_PORT: u16 = 18515;
