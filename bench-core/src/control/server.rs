//! The server's side of the handshake: read the `Hello`, decide, and claim the device.

use results::rdmabw::params::TestParams;

use super::channel::ControlChannel;
use super::claims::{DeviceClaim, DeviceClaims};
use super::error::ControlError;
use super::frame::PROTOCOL_VERSION;
use super::msg::{Hello, Msg, RejectReason};

/// What a server accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerPolicy {
    /// The device used when the client names none.
    pub default_device: String,
    /// The devices this server serves; empty accepts any name the client gives.
    pub devices: Vec<String>,
    /// The parameters given on the server's command line, which the client's must match;
    /// `None` (`--daemon`) runs whatever the client asks for.
    pub params: Option<TestParams>,
}

/// The outcome of [`admit`].
#[derive(Debug)]
pub enum Admission {
    /// Go ahead: open `device`, send `Msg::Accept`, and keep `claim` until the test ends.
    Admitted {
        /// The client's hello.
        hello: Hello,
        /// The device to open.
        device: String,
        /// The device's claim; dropping it frees the device for the next client.
        claim: DeviceClaim,
    },
    /// The client was turned away with `reply` (already sent: `Busy` or `Reject`); log it and
    /// close the channel.
    Refused {
        /// The client's hello.
        hello: Hello,
        /// The message sent to the client.
        reply: Box<Msg>,
    },
}

/// Server: reads the client's `Hello` (handshake timeout), checks it against `policy`, and
/// claims the device in `claims`. A mismatch or a busy device is answered (`Reject`/`Busy`) here;
/// the `Accept` is the caller's, once the device is open.
///
/// Checks run in this order: protocol version, device name, parameters, then the claim, so a
/// client that would be rejected never holds a device.
pub fn admit(
    ch: &mut ControlChannel,
    policy: &ServerPolicy,
    claims: &DeviceClaims,
) -> Result<Admission, ControlError> {
    let hello = ch.expect_hello()?;
    let device = hello
        .device
        .clone()
        .unwrap_or_else(|| policy.default_device.clone());
    let reason = if hello.protocol_version != PROTOCOL_VERSION {
        Some(RejectReason::ProtocolVersion {
            server: PROTOCOL_VERSION,
            client: hello.protocol_version,
        })
    } else if !policy.devices.is_empty() && !policy.devices.contains(&device) {
        Some(RejectReason::UnknownDevice {
            device: device.clone(),
            available: policy.devices.clone(),
        })
    } else if let Some(Err(m)) = policy
        .params
        .as_ref()
        .map(|p| p.check_matches(&hello.params))
    {
        Some(RejectReason::from_server_mismatch(&m))
    } else {
        None
    };
    if let Some(reason) = reason {
        let reply = Msg::Reject { reason };
        ch.send(&reply)?;
        return Ok(Admission::Refused {
            hello,
            reply: Box::new(reply),
        });
    }
    let by = format!("{} ({})", hello.client_host, ch.peer_addr());
    match claims.try_claim(&device, &by) {
        Ok(claim) => Ok(Admission::Admitted {
            hello,
            device,
            claim,
        }),
        Err(busy) => {
            let reply = busy.to_msg();
            ch.send(&reply)?;
            Ok(Admission::Refused {
                hello,
                reply: Box::new(reply),
            })
        }
    }
}
