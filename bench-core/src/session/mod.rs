//! One test from start to end on either side: the control channel and the engine tied together,
//! so that `rdmabw` stays a thin command line and `railsweep` can run the same drivers.
//!
//! - [`run_client`]: resolve the local rail, prepare the QPs (local mistakes surface before any
//!   connection), connect, `Hello` -> `Accept`, exchange endpoints, connect the QPs, `Ready`,
//!   run the writes under a [`PeerWatch`], exchange `Done`.
//! - [`Listener`] + [`serve_one`]: the server's side of one test, from an accepted connection.
//!   [`Daemon`] serves test after test on one port, several at once on different devices, and
//!   answers `Busy` for a device in use.
//!
//! Every wait has a deadline (the channel's phase timeouts, the watch's silence limit), and the
//! caller's `stop` flag (SIGINT/SIGTERM) ends a test within the engine's stop-check interval,
//! telling the peer why. Errors are typed ([`SessionError`]) so that a command line can map them
//! to exit codes: [`SessionError::is_setup`] is true for mistakes in what was asked (wrong device,
//! GID, parameters that differ from the server's, a peer that is not rdmabw).

// A session's result is returned once per test: the size of its error does not matter, and
// keeping the engine's and the channel's errors unboxed keeps them matchable.
#![allow(clippy::result_large_err)]

mod admit;
mod client;
mod config;
mod daemon;
mod error;
mod gate;
mod guard;
mod outcome;
mod perftest;
mod resolve;
mod server;
mod side;
mod window;

use std::sync::Arc;
use std::time::Duration;

pub use admit::{admit, check_hello, is_plain_name, refuse, Admitted, MAX_NAME_BYTES};
pub use client::{run_client, run_client_streaming, ClientConfig};
pub use config::{PeerChoice, Pinned, ServerConfig, ServerLimits};
pub use daemon::{Daemon, OnTest};
pub use error::SessionError;
pub use gate::Admission;
pub use outcome::{combine, local_report, Outcome, Remote};
pub use perftest::check_supported as check_perftest_supported;
pub use resolve::{inventory_for, resolve_request, ServerShared};
pub use server::{serve_admitted, serve_first, serve_one, Listener};

/// Poll interval of the listeners (a new test waits for it) and of the daemon's shutdown.
const POLL: Duration = Duration::from_millis(10);

/// A progress logger: one line per call, for stderr.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// A logger that drops everything.
pub fn quiet() -> Log {
    Arc::new(|_| {})
}
