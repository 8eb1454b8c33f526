//! Admission: reading a client's opening and hello, and answering the ones that cannot be
//! served (protocol version, the run's secret, values out of bounds) before anything they
//! sent is used or logged.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::config::{PeerChoice, ServerConfig};
use super::error::{control, SessionError};
use crate::control::{
    ControlChannel, ControlError, Hello, Msg, Opening, Phase, RejectReason, PROTOCOL_VERSION,
};
use crate::error::Error;
use crate::perftest::PeerVersion;

/// Answers a client that cannot be served now with `reason`, after reading its hello (closing
/// with the hello unread would reset the connection before the client reads the answer).
pub fn refuse(cfg: &ServerConfig, stream: TcpStream, reason: RejectReason) -> SessionError {
    let peer = stream
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let refused = SessionError::Control(ControlError::Rejected {
        peer,
        reason: reason.clone(),
    });
    let Ok(ch) = ControlChannel::from_stream(stream) else {
        return refused;
    };
    let mut ch = ch.with_timeouts(cfg.timeouts);
    if ch.expect_hello().is_ok() {
        let _ = ch.send(&Msg::Reject { reason });
    }
    ch.close();
    refused
}

/// The longest a device or network interface name in a hello may be (the kernel's IB device
/// names are at most 64 bytes, interface names 16).
pub const MAX_NAME_BYTES: usize = 64;

/// Whether `name` is a plain device or interface name: not empty, at most [`MAX_NAME_BYTES`],
/// not `.` or `..`, and without `/`, NUL, white space or control characters. Such a name
/// stays one path component under sysfs; anything else is refused before any lookup.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_whitespace() || c.is_control())
}

/// Checks what a hello asks for against the bounds rdmabw's command line enforces, before the
/// server computes anything from it: the parameters (`TestParams::check_bounds`; for a latency
/// test also `rdmabw lat`'s rule, `TestParams::check_latency`), the device and interface names
/// (plain names), and the path attributes a server takes from the client (service level 0-15,
/// an MTU of 256-4096).
pub fn check_hello(hello: &Hello) -> Result<(), RejectReason> {
    let invalid = |what: String| RejectReason::Other {
        message: format!("invalid hello: {what}"),
    };
    hello
        .params
        .check_bounds()
        .map_err(|e| invalid(e.to_string()))?;
    // A latency test: admitted exactly as `rdmabw lat`'s command line takes its flags.
    if hello.params.latency {
        hello
            .params
            .check_latency()
            .map_err(|e| invalid(e.to_string()))?;
    }
    for (flag, name) in [
        ("--server-dev", hello.device.as_deref()),
        ("--server-netdev", hello.netdev.as_deref()),
    ] {
        if let Some(n) = name {
            if !is_plain_name(n) {
                return Err(invalid(format!(
                    "{flag} {}: not a device name (1 to {MAX_NAME_BYTES} bytes, no '/', no \
                     white space, not '.' or '..')",
                    crate::control::for_log(n, crate::control::PEER_TEXT_CHARS)
                )));
            }
        }
    }
    if let Some(t) = &hello.tuning {
        if t.service_level > 15 {
            return Err(invalid(format!(
                "--sl {}: service levels are 0-15",
                t.service_level
            )));
        }
        if let Some(m) = t.mtu_bytes {
            if ![256, 512, 1024, 2048, 4096].contains(&m) {
                return Err(invalid(format!(
                    "-m/--mtu {m}: the MTU is 256, 512, 1024, 2048 or 4096"
                )));
            }
        }
    }
    Ok(())
}

/// A client whose hello passed admission: its protocol version is this one, it presented the
/// run's secret (where the server has one), and every value in it is within bounds. Nothing
/// the client sent is logged before this.
#[derive(Debug)]
pub struct Admitted {
    pub(super) ch: ControlChannel,
    pub(super) client: Client,
    pub(super) peer: SocketAddr,
}

/// Who an admitted client is.
#[derive(Debug)]
pub(super) enum Client {
    /// rdmabw, with its hello.
    Rdmabw(Box<Hello>),
    /// perftest's ib_write_bw or ib_write_lat, with its version message: the test is this
    /// server's own flags, as with perftest's server.
    Perftest(PeerVersion),
}

impl Admitted {
    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Answers `reason` and closes: the client is admitted but cannot be served now (a
    /// perftest client, which has no words for a refusal, sees the connection close).
    pub fn refuse(self, reason: RejectReason) -> SessionError {
        let mut ch = self.ch;
        if matches!(self.client, Client::Rdmabw(_)) {
            let _ = ch.send(&Msg::Reject {
                reason: reason.clone(),
            });
        }
        ch.close();
        SessionError::Control(ControlError::Rejected {
            peer: self.peer,
            reason,
        })
    }
}

/// Reads a client's hello within `hello_wait` (or the handshake timeout, if shorter) and
/// admits it, or answers why not (protocol version, secret, a value out of bounds) and closes.
/// Logs nothing: what a peer sends is not shown before it is admitted.
pub fn admit(
    cfg: &ServerConfig,
    stream: TcpStream,
    hello_wait: Duration,
) -> Result<Admitted, SessionError> {
    let ch = ControlChannel::from_stream(stream)
        .map_err(|e| SessionError::Local(Error::InvalidParams(format!("control socket: {e}"))))?;
    let mut first = cfg.timeouts;
    first.handshake = first.handshake.min(hello_wait);
    let mut ch = ch.with_timeouts(first);
    let peer = ch.peer_addr();
    let opening = ch.server_opening().map_err(control)?;
    if let Opening::Perftest(version) = opening {
        ch.set_timeouts(cfg.timeouts);
        let why = if cfg.peer == PeerChoice::Rdmabw {
            Some("this server was started with --peer rdmabw")
        } else if cfg.secret.is_some() {
            Some("this server serves one run's clients, and perftest cannot present its secret")
        } else {
            None
        };
        if let Some(why) = why {
            ch.close();
            return Err(SessionError::NotRdmabw(ControlError::Protocol {
                peer,
                phase: Phase::Handshake,
                detail: format!("a perftest {} client is refused: {why}", version.text),
            }));
        }
        return Ok(Admitted {
            ch,
            client: Client::Perftest(version),
            peer,
        });
    }
    let hello = ch.expect_hello().map_err(control)?;
    ch.set_timeouts(cfg.timeouts);
    let reason = if hello.protocol_version != PROTOCOL_VERSION {
        Some(RejectReason::ProtocolVersion {
            server: PROTOCOL_VERSION,
            client: hello.protocol_version,
        })
    } else if cfg
        .secret
        .as_ref()
        .is_some_and(|s| !s.admits(hello.secret.as_ref()))
    {
        Some(RejectReason::NotThisRun {
            presented: hello.secret.is_some(),
        })
    } else if cfg.peer == PeerChoice::Perftest {
        Some(RejectReason::Other {
            message: "this server was started with --peer perftest: it serves perftest's \
                      ib_write_bw and ib_write_lat only"
                .into(),
        })
    } else {
        check_hello(&hello).err()
    };
    let admitted = Admitted {
        ch,
        client: Client::Rdmabw(Box::new(hello)),
        peer,
    };
    match reason {
        Some(r) => Err(admitted.refuse(r)),
        None => Ok(admitted),
    }
}
