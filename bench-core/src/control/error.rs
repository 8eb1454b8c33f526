//! The control channel's error type: every failure names the peer and the phase.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::frame::{show_bytes, FrameError};
use super::msg::RejectReason;
use super::phase::Phase;

/// Whether the bytes found where a frame belongs start a perftest version message (`6.24`).
fn looks_like_perftest(found: &[u8]) -> bool {
    let digits = found.iter().take_while(|b| b.is_ascii_digit()).count();
    digits >= 1 && found.get(digits) == Some(&b'.')
}

/// Which end should be upgraded when the protocol versions differ.
fn upgrade_hint(ours: u16, theirs: u16) -> &'static str {
    if ours < theirs {
        "upgrade rdmabw on this side"
    } else {
        "upgrade rdmabw on the peer"
    }
}

/// A control channel failure. Cloneable, so a watcher thread can hand the same error to every
/// caller that asks.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ControlError {
    /// No connection could be made before the deadline.
    #[error("could not reach an rdmabw control endpoint at {addr} within {waited:.1?}: {source}")]
    ConnectFailed {
        /// The address as given.
        addr: String,
        /// How long attempts went on.
        waited: Duration,
        /// The last attempt's error.
        source: Arc<io::Error>,
    },
    /// The peer's bytes do not start with the rdmabw magic.
    #[error(
        "peer at {peer} {}: it sent {} during the {phase} phase",
        if looks_like_perftest(.found) {
            "is perftest (that is its version message), and this side was given --peer rdmabw: \
             leave --peer out to test against perftest"
        } else {
            "speaks neither rdmabw's control protocol nor perftest's"
        },
        show_bytes(.found)
    )]
    NotRdmabw {
        /// The peer.
        peer: SocketAddr,
        /// The phase.
        phase: Phase,
        /// The bytes found where the magic belongs.
        found: Vec<u8>,
    },
    /// The peer speaks another control protocol version.
    #[error(
        "peer at {peer} speaks rdmabw control protocol v{theirs}, this side speaks v{ours} \
         ({phase} phase): {} so both ends run the same release",
        upgrade_hint(*.ours, *.theirs)
    )]
    VersionMismatch {
        /// The peer.
        peer: SocketAddr,
        /// The phase.
        phase: Phase,
        /// This side's version.
        ours: u16,
        /// The peer's version.
        theirs: u16,
    },
    /// The connection ended inside a frame.
    #[error(
        "control connection to {peer} ended inside a frame during the {phase} phase \
         (got {got} of {needed} bytes)"
    )]
    Truncated {
        /// The peer.
        peer: SocketAddr,
        /// The phase.
        phase: Phase,
        /// Bytes of the frame received.
        got: usize,
        /// Bytes the frame (or its header) needed.
        needed: usize,
    },
    /// A frame over the size cap, sent by the peer or about to be sent by this side.
    #[error(
        "control frame of {len} bytes exceeds the {cap}-byte cap (peer {peer}, {phase} phase)"
    )]
    Oversized {
        /// The peer.
        peer: SocketAddr,
        /// The phase.
        phase: Phase,
        /// The frame's payload length.
        len: u64,
        /// The cap.
        cap: u32,
    },
    /// The payload is not a valid message.
    #[error("malformed control message from {peer} during the {phase} phase: {detail}")]
    Malformed {
        /// The peer.
        peer: SocketAddr,
        /// The phase.
        phase: Phase,
        /// The serde error text.
        detail: String,
    },
    /// The phase's deadline passed.
    #[error("timed out after {after:.1?} in the {phase} phase waiting for the peer at {peer}")]
    Timeout {
        /// The peer.
        peer: SocketAddr,
        /// The phase.
        phase: Phase,
        /// The phase's timeout.
        after: Duration,
    },
    /// The peer closed (or reset) the connection.
    #[error("peer at {peer} closed the control connection during the {phase} phase")]
    PeerClosed {
        /// The peer.
        peer: SocketAddr,
        /// The phase.
        phase: Phase,
    },
    /// The peer's heartbeats stopped.
    #[error(
        "peer at {peer} went silent during the {phase} phase: no heartbeat for {silent_for:.1?}"
    )]
    PeerSilent {
        /// The peer.
        peer: SocketAddr,
        /// The phase.
        phase: Phase,
        /// Time since the last message from the peer.
        silent_for: Duration,
    },
    /// The peer sent an `Error` message.
    #[error("peer at {peer} reported an error during the {phase} phase: {message}")]
    PeerError {
        /// The peer.
        peer: SocketAddr,
        /// The phase.
        phase: Phase,
        /// The peer's text.
        message: String,
    },
    /// The peer sent a message that does not belong here.
    #[error("peer at {peer} sent '{got}' during the {phase} phase, expected {expected}")]
    Unexpected {
        /// The peer.
        peer: SocketAddr,
        /// The phase.
        phase: Phase,
        /// What would have been valid.
        expected: &'static str,
        /// The message's kind.
        got: &'static str,
    },
    /// The server answered `Busy`.
    #[error("server at {peer} is busy: device {device} is running a test for {by}")]
    Busy {
        /// The server.
        peer: SocketAddr,
        /// The device asked for.
        device: String,
        /// Who holds it.
        by: String,
    },
    /// The server answered `Reject`.
    #[error("server at {peer} rejected the test: {reason}")]
    Rejected {
        /// The server.
        peer: SocketAddr,
        /// Why.
        reason: RejectReason,
    },
    /// The peer's messages are well formed but inconsistent (e.g. a QP count that differs).
    #[error("protocol error with {peer} during the {phase} phase: {detail}")]
    Protocol {
        /// The peer.
        peer: SocketAddr,
        /// The phase.
        phase: Phase,
        /// What is wrong.
        detail: String,
    },
    /// Any other socket error.
    #[error("control connection to {peer} failed during the {phase} phase: {source}")]
    Io {
        /// The peer.
        peer: SocketAddr,
        /// The phase.
        phase: Phase,
        /// The socket error.
        source: Arc<io::Error>,
    },
}

impl ControlError {
    /// The peer's address, when a connection existed.
    pub fn peer(&self) -> Option<SocketAddr> {
        use ControlError::*;
        match self {
            ConnectFailed { .. } => None,
            NotRdmabw { peer, .. }
            | VersionMismatch { peer, .. }
            | Truncated { peer, .. }
            | Oversized { peer, .. }
            | Malformed { peer, .. }
            | Timeout { peer, .. }
            | PeerClosed { peer, .. }
            | PeerSilent { peer, .. }
            | PeerError { peer, .. }
            | Unexpected { peer, .. }
            | Busy { peer, .. }
            | Rejected { peer, .. }
            | Protocol { peer, .. }
            | Io { peer, .. } => Some(*peer),
        }
    }

    /// The phase the error happened in.
    pub fn phase(&self) -> Phase {
        use ControlError::*;
        match self {
            ConnectFailed { .. } => Phase::Connect,
            Busy { .. } | Rejected { .. } => Phase::Handshake,
            NotRdmabw { phase, .. }
            | VersionMismatch { phase, .. }
            | Truncated { phase, .. }
            | Oversized { phase, .. }
            | Malformed { phase, .. }
            | Timeout { phase, .. }
            | PeerClosed { phase, .. }
            | PeerSilent { phase, .. }
            | PeerError { phase, .. }
            | Unexpected { phase, .. }
            | Protocol { phase, .. }
            | Io { phase, .. } => *phase,
        }
    }

    /// True when the peer is gone (closed, reset, or silent), as opposed to misbehaving.
    pub fn is_peer_gone(&self) -> bool {
        matches!(
            self,
            ControlError::PeerClosed { .. } | ControlError::PeerSilent { .. }
        )
    }

    /// Adds peer and phase to a frame error.
    pub(crate) fn from_frame(e: FrameError, peer: SocketAddr, phase: Phase) -> Self {
        match e {
            FrameError::Closed => ControlError::PeerClosed { peer, phase },
            FrameError::Truncated { got, needed } => ControlError::Truncated {
                peer,
                phase,
                got,
                needed,
            },
            FrameError::Oversized { len, cap } => ControlError::Oversized {
                peer,
                phase,
                len,
                cap,
            },
            FrameError::BadMagic { found } => ControlError::NotRdmabw { peer, phase, found },
            FrameError::BadVersion { theirs, ours } => ControlError::VersionMismatch {
                peer,
                phase,
                ours,
                theirs,
            },
            FrameError::Malformed { detail } => ControlError::Malformed {
                peer,
                phase,
                detail,
            },
            FrameError::Io(source) => Self::from_io(source, peer, phase),
        }
    }

    /// Adds peer and phase to a socket error; resets and broken pipes mean the peer is gone.
    pub(crate) fn from_io(source: Arc<io::Error>, peer: SocketAddr, phase: Phase) -> Self {
        match source.kind() {
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof => ControlError::PeerClosed { peer, phase },
            _ => ControlError::Io {
                peer,
                phase,
                source,
            },
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        "10.1.2.3:18515".parse().unwrap()
    }

    #[test]
    fn version_mismatch_says_which_side_to_upgrade() {
        let older_peer = ControlError::VersionMismatch {
            peer: peer(),
            phase: Phase::Handshake,
            ours: 2,
            theirs: 1,
        };
        let text = older_peer.to_string();
        assert!(text.contains("v1") && text.contains("v2"), "{text}");
        assert!(text.contains("upgrade rdmabw on the peer"), "{text}");
        let newer_peer = ControlError::VersionMismatch {
            peer: peer(),
            phase: Phase::Handshake,
            ours: 1,
            theirs: 2,
        };
        assert!(newer_peer.to_string().contains("on this side"));
    }

    #[test]
    fn not_rdmabw_names_the_address_and_what_came() {
        let e = ControlError::from_frame(
            FrameError::BadMagic {
                found: b"0000".to_vec(),
            },
            peer(),
            Phase::Handshake,
        );
        let text = e.to_string();
        assert!(
            text.starts_with(
                "peer at 10.1.2.3:18515 speaks neither rdmabw's control protocol nor perftest's: it \
                 sent \"0000\""
            ),
            "{text}"
        );
        assert_eq!(e.peer(), Some(peer()));
        assert_eq!(e.phase(), Phase::Handshake);
    }

    #[test]
    fn resets_mean_the_peer_is_gone() {
        let e = ControlError::from_frame(
            io::Error::from(io::ErrorKind::ConnectionReset).into(),
            peer(),
            Phase::Measure,
        );
        assert!(matches!(e, ControlError::PeerClosed { .. }));
        assert!(e.is_peer_gone());
    }
}
