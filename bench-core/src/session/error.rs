//! Why a test did not complete, told apart into set-up mistakes and failed runs.

use crate::control::{ControlError, RejectReason};
use crate::error::Error;

/// Why a test did not complete.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// This side cannot run the test as asked: device, port, GID, parameters, memory, verbs.
    #[error("{0}")]
    Local(#[from] Error),
    /// The control channel failed before the measured window, or the server refused.
    #[error("{0}")]
    Control(#[from] ControlError),
    /// The peer turned out not to speak rdmabw (perftest's ib_write_bw, most likely).
    #[error("{0}")]
    NotRdmabw(ControlError),
    /// The server could not set up its side.
    #[error("the server could not run the test: {0}")]
    ServerSetup(String),
    /// The peer failed during the test: it died, went silent, or reported an error.
    #[error("{}{}", peer_failure_text(.cause), match .local { Some(e) => format!(" (this side saw: {e})"), None => String::new() })]
    PeerFailed {
        /// What the control channel saw.
        cause: ControlError,
        /// What the RDMA side saw, if it failed too.
        local: Option<Error>,
    },
    /// The RDMA run failed on this side while the peer was alive.
    #[error("{error}{}", .port_note.as_deref().map(|n| format!("; {n}")).unwrap_or_default())]
    Run {
        /// The engine's error.
        error: Error,
        /// The port's state now, when it is not ACTIVE (the rail went down).
        port_note: Option<String>,
    },
    /// This side's port went down during the window.
    #[error("{note}")]
    RailDown {
        /// Which port, and its state.
        note: String,
    },
    /// `--data_validation`: a byte the peer wrote is not what it sent.
    #[error("{0}")]
    DataValidation(crate::engine::Mismatch),
    /// A daemon's connection that never became a test: it sent no hello in time, garbage, or
    /// a hello the daemon refused before admission (another run's secret, a value out of
    /// bounds). What the peer sent may be in `cause`: a daemon does not log these.
    #[error("connection not admitted: {0}")]
    NotAdmitted(Box<SessionError>),
    /// A test with a perftest peer failed in perftest's exchange or its run.
    #[error("{error}{}", match .local { Some(e) => format!(" (this side saw: {e})"), None => String::new() })]
    Perftest {
        /// What the exchange saw.
        error: crate::perftest::PerftestError,
        /// What the RDMA side saw, if it failed too.
        local: Option<Error>,
    },
    /// SIGINT/SIGTERM (the caller's stop flag) ended the test.
    #[error("interrupted: the test was stopped on this side{}", if *.told_peer { " (the peer was told)" } else { "" })]
    Interrupted {
        /// Whether the peer was still there to be told.
        told_peer: bool,
    },
}

fn peer_failure_text(e: &ControlError) -> String {
    match e {
        ControlError::PeerClosed { peer, phase } => format!(
            "the peer at {peer} closed the control connection during the {phase} phase: \
             its rdmabw process died, was killed, or its host went away"
        ),
        ControlError::PeerSilent {
            peer, silent_for, ..
        } => format!(
            "the peer at {peer} went silent for {silent_for:.1?}: its process is frozen or the \
             control network to it is down"
        ),
        ControlError::PeerError { peer, message, .. } => {
            format!("the peer at {peer} stopped the test: {message}")
        }
        other => other.to_string(),
    }
}

impl SessionError {
    /// True for mistakes in what was asked (exit 2): a bad device, port or GID, parameters the
    /// engine refuses or that differ from the server's, a peer that is not rdmabw, a server
    /// that cannot set up what was asked. False for failures of a test that could have run
    /// (exit 1): an unreachable or busy server, a peer or rail that died, an RDMA error.
    pub fn is_setup(&self) -> bool {
        match self {
            SessionError::Local(e) => !matches!(
                e,
                Error::WorkCompletion { .. }
                    | Error::Stalled { .. }
                    | Error::Stopped { .. }
                    | Error::PostSend { .. }
                    | Error::PollCq { .. }
            ),
            SessionError::Control(c) => matches!(
                c,
                ControlError::Rejected { .. }
                    | ControlError::NotRdmabw { .. }
                    | ControlError::VersionMismatch { .. }
            ),
            SessionError::NotRdmabw(_) | SessionError::ServerSetup(_) => true,
            SessionError::NotAdmitted(cause) => cause.is_setup(),
            SessionError::Perftest { error, .. } => error.is_setup(),
            SessionError::PeerFailed { .. }
            | SessionError::RailDown { .. }
            | SessionError::Run { .. }
            | SessionError::DataValidation(_)
            | SessionError::Interrupted { .. } => false,
        }
    }
}

pub(super) fn control(e: ControlError) -> SessionError {
    match e {
        e @ ControlError::NotRdmabw { .. } => SessionError::NotRdmabw(e),
        // A server that could not open what was asked says so in a Reject.
        ControlError::Rejected {
            reason: RejectReason::Other { message },
            ..
        } if message.starts_with(SERVER_SETUP) => {
            SessionError::ServerSetup(message[SERVER_SETUP.len()..].to_string())
        }
        e => SessionError::Control(e),
    }
}

/// A failure of the peer seen on the control channel alone (this side's run went well).
pub(super) fn peer_failed(cause: ControlError) -> SessionError {
    SessionError::PeerFailed { cause, local: None }
}

/// The prefix of a `Reject` for a server-side set-up failure.
pub(super) const SERVER_SETUP: &str = "server set-up: ";

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::control::Phase;

    #[test]
    fn setup_errors_are_told_apart_from_failed_runs() {
        let peer: SocketAddr = "10.0.0.1:18515".parse().unwrap();
        assert!(SessionError::Local(Error::InvalidParams("x".into())).is_setup());
        assert!(SessionError::Control(ControlError::Rejected {
            peer,
            reason: RejectReason::Other {
                message: "m".into()
            }
        })
        .is_setup());
        assert!(!SessionError::Control(ControlError::Busy {
            peer,
            device: "d".into(),
            by: "b".into()
        })
        .is_setup());
        let dead = SessionError::PeerFailed {
            cause: ControlError::PeerClosed {
                peer,
                phase: Phase::Measure,
            },
            local: None,
        };
        assert!(!dead.is_setup());
        assert!(dead.to_string().contains("died"), "{dead}");
        assert!(!SessionError::Interrupted { told_peer: true }.is_setup());
    }
}
