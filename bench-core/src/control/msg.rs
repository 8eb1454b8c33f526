//! The control messages. Each travels as the JSON payload of one frame, tagged by `"type"`.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::phase::Phase;
use crate::engine::Endpoints;
use wire::counters::CounterReport;
use wire::params::{LocalTuning, ParamMismatch, SizeResult, TestParams};

/// The control protocol version this build speaks (also in every frame header). Bump it whenever a message changes shape.
pub const PROTOCOL_VERSION: u16 = 1;
pub use wire::secret::RunSecret;

/// The rdmabw release this build belongs to, sent in [`Hello`] and [`Accept`] for the logs.
pub const RDMABW_VERSION: &str = wire::VERSION;

/// One control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Msg {
    /// Client -> server, first message: what the client wants to run.
    Hello(Hello),
    /// Server -> client: the test is accepted; the server's device facts.
    Accept(Accept),
    /// Server -> client: the requested device is running another test.
    Busy {
        /// The device asked for.
        device: String,
        /// Who holds it (client host and address).
        by: String,
    },
    /// Server -> client: the test cannot run.
    Reject {
        /// Why.
        reason: RejectReason,
    },
    /// Both ways: the queue pairs and memory region the peer must target.
    Endpoints(Endpoints),
    /// Both ways: this side's QPs are in RTS; the measurement may start.
    Ready,
    /// Both ways, every few hundred ms during the measured window: this side is alive.
    Heartbeat {
        /// Milliseconds since this side's measure phase started.
        elapsed_ms: u64,
    },
    /// Both ways after the window (client first, the server answers): this side's results.
    /// The server's list is empty unless it measured a direction too (`-b`).
    Done {
        /// Per-size results, in test order.
        results: Vec<SizeResult>,
        /// This side's counter deltas around its window (absent from a peer that read none,
        /// or from rdmabw before counters).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        counters: Option<CounterReport>,
    },
    /// Either way, whenever something fails: the reason, to be shown by the other side.
    Error {
        /// What went wrong, in words.
        message: String,
    },
}

impl Msg {
    /// The message's name as it appears in the `"type"` tag, for error texts.
    pub fn kind(&self) -> &'static str {
        match self {
            Msg::Hello(_) => "hello",
            Msg::Accept(_) => "accept",
            Msg::Busy { .. } => "busy",
            Msg::Reject { .. } => "reject",
            Msg::Endpoints(_) => "endpoints",
            Msg::Ready => "ready",
            Msg::Heartbeat { .. } => "heartbeat",
            Msg::Done { .. } => "done",
            Msg::Error { .. } => "error",
        }
    }

    /// The phase this message belongs to; `None` for [`Msg::Error`], which may come in any.
    pub fn phase(&self) -> Option<Phase> {
        Some(match self {
            Msg::Hello(_) | Msg::Accept(_) | Msg::Busy { .. } | Msg::Reject { .. } => {
                Phase::Handshake
            }
            Msg::Endpoints(_) => Phase::Exchange,
            Msg::Ready => Phase::Ready,
            Msg::Heartbeat { .. } => Phase::Measure,
            Msg::Done { .. } => Phase::Results,
            Msg::Error { .. } => return None,
        })
    }
}

/// The client's opening message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// The client's [`PROTOCOL_VERSION`] (also in every frame header).
    pub protocol_version: u16,
    /// The client's rdmabw release, for the server's log.
    pub rdmabw_version: String,
    /// The test to run.
    pub params: TestParams,
    /// The server-side device the client wants (`mlx5_3`); `None` takes the server's default.
    /// A `--daemon` server routes by it.
    pub device: Option<String>,
    /// The client's host or pod name, shown in the server's log and in `Busy` replies.
    pub client_host: String,
    /// The server-side network interface the client wants (`--server-netdev net3`); it also
    /// picks the server's device. Absent from older clients' hellos.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
    /// The server-side GID index the client wants (`--server-gid-index`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<u32>,
    /// The client's per-side tuning; a server that was not given its own traffic class,
    /// service level, hop limit or MTU uses these for its QPs (and so for its ACKs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning: Option<LocalTuning>,
    /// The run's secret (`RDMABW_SECRET` or `--secret-stdin`): a server given one serves only
    /// clients that present it. Never logged, never on a command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<RunSecret>,
}

impl Hello {
    /// A hello carrying this build's protocol and release versions.
    pub fn new(params: TestParams, device: Option<String>, client_host: impl Into<String>) -> Self {
        Hello {
            protocol_version: PROTOCOL_VERSION,
            rdmabw_version: RDMABW_VERSION.to_string(),
            params,
            device,
            client_host: client_host.into(),
            netdev: None,
            gid_index: None,
            tuning: None,
            secret: None,
        }
    }

    /// The same hello presenting the run's secret.
    pub fn with_secret(mut self, secret: Option<RunSecret>) -> Self {
        self.secret = secret;
        self
    }

    /// The same hello asking for the server-side interface `netdev` and GID index `gid_index`.
    pub fn with_server_rail(mut self, netdev: Option<String>, gid_index: Option<u32>) -> Self {
        self.netdev = netdev;
        self.gid_index = gid_index;
        self
    }

    /// The same hello carrying the client's tuning.
    pub fn with_tuning(mut self, tuning: LocalTuning) -> Self {
        self.tuning = Some(tuning);
        self
    }
}

/// The server's acceptance, with the facts of the device it opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Accept {
    /// The server's device (`mlx5_3`).
    pub device: String,
    /// The IB port number on it.
    pub port: u8,
    /// The GID index the server uses.
    pub gid_index: u8,
    /// The port's active MTU in bytes.
    pub active_mtu_bytes: u32,
    /// The port's line rate in Gb/s (width x speed).
    pub line_rate_gbps: f64,
    /// The server's rdmabw release, for the client's log.
    pub rdmabw_version: String,
    /// Whether the server runs latency tests (`rdmabw lat`). Absent from older servers, which
    /// would run a bandwidth test for a latency hello: the client then stops at once instead of
    /// waiting out its timeouts.
    #[serde(default)]
    pub latency: bool,
}

/// Why a server refused a test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RejectReason {
    /// A parameter given to the server differs from the client's.
    ParamMismatch {
        /// The flag, as the user knows it (`--qp/-q`).
        param: String,
        /// The server's value.
        server: String,
        /// The client's value.
        client: String,
    },
    /// The client asked for a device this server does not serve.
    UnknownDevice {
        /// The device asked for.
        device: String,
        /// The devices the server serves.
        available: Vec<String>,
    },
    /// The `Hello` names another protocol version than its frame header (a buggy peer).
    ProtocolVersion {
        /// The server's version.
        server: u16,
        /// The version in the client's `Hello`.
        client: u16,
    },
    /// The server serves one run only (it was given a secret), and the client presented no
    /// secret or another one.
    NotThisRun {
        /// Whether the client presented a secret at all.
        presented: bool,
    },
    /// The test asks for more than the server allows per test, or the server runs as many
    /// tests as it allows.
    Limit {
        /// What is limited, in words (`queue pairs per test`).
        what: String,
        /// What the test asks for (or the tests running).
        asked: u64,
        /// The server's limit.
        max: u64,
        /// The server flag that raises it (`--max-qps`).
        flag: String,
    },
    /// Anything else, in words.
    Other {
        /// The reason.
        message: String,
    },
}

impl RejectReason {
    /// The reason for a mismatch found on the server by
    /// `server_params.check_matches(&hello.params)` (so `ours` is the server's value).
    pub fn from_server_mismatch(m: &ParamMismatch) -> Self {
        RejectReason::ParamMismatch {
            param: m.param.to_string(),
            server: m.ours.clone(),
            client: m.theirs.clone(),
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejectReason::ParamMismatch {
                param,
                server,
                client,
            } => write!(
                f,
                "parameter {param} differs: the server has {server}, the client has {client}"
            ),
            RejectReason::UnknownDevice { device, available } => write!(
                f,
                "the server has no device {device} (it serves: {})",
                available.join(", ")
            ),
            RejectReason::ProtocolVersion { server, client } => write!(
                f,
                "the client's hello claims protocol v{client}, the server speaks v{server}"
            ),
            RejectReason::NotThisRun { presented } => write!(
                f,
                "this rdmabw server serves only the run that started it, and the client {}; \
                 give the client that run's secret (RDMABW_SECRET or --secret-stdin: railsweep \
                 does this for its own clients), or use a server of your own",
                if *presented {
                    "presented another run's secret"
                } else {
                    "presented no secret"
                }
            ),
            RejectReason::Limit {
                what,
                asked,
                max,
                flag,
            } => write!(
                f,
                "the server allows at most {max} {what} and this test needs {asked}; ask for \
                 less, or start the server with {flag} {asked} (or more)"
            ),
            RejectReason::Other { message } => f.write_str(message),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use crate::control::samples::{every_variant, params};

    #[test]
    fn every_variant_round_trips_through_json() {
        for msg in every_variant() {
            let json = serde_json::to_string(&msg).unwrap();
            let back: Msg = serde_json::from_str(&json).unwrap();
            assert_eq!(back, msg, "{json}");
            assert!(
                json.contains(&format!("\"type\":\"{}\"", msg.kind())),
                "{json}"
            );
        }
    }

    #[test]
    fn an_older_servers_accept_reads_as_no_latency() {
        let old = r#"{"type":"accept","device":"mlx5_3","port":1,"gid_index":3,
            "active_mtu_bytes":4096,"line_rate_gbps":400.0,"rdmabw_version":"0.1.0"}"#;
        let Msg::Accept(a) = serde_json::from_str(old).unwrap() else {
            panic!("not an accept")
        };
        assert!(!a.latency);
    }

    #[test]
    fn a_hello_without_the_server_rail_fields_still_parses() {
        let mut v = serde_json::to_value(Msg::Hello(Hello::new(params(), None, "old"))).unwrap();
        let obj = v.as_object_mut().unwrap();
        assert!(!obj.contains_key("netdev") && !obj.contains_key("tuning"));
        obj.remove("netdev");
        let back: Msg = serde_json::from_value(v).unwrap();
        let Msg::Hello(h) = back else {
            panic!("not a hello")
        };
        assert_eq!((h.netdev, h.gid_index, h.tuning), (None, None, None));
    }

    #[test]
    fn an_endpoints_frame_is_pinned_byte_for_byte() {
        let msg = every_variant()
            .into_iter()
            .find(|m| matches!(m, Msg::Endpoints(_)))
            .unwrap();
        let frame = super::super::frame::encode_frame(&msg).unwrap();
        let json = concat!(
            r#"{"type":"endpoints","device":"mlx5_3","port":1,"qps":["#,
            r#"{"qpn":291,"psn":11259375,"gid":"fe80:0000:0000:0000:0202:c9ff:fe00:0001","lid":0},"#,
            r#"{"qpn":4294967295,"psn":0,"gid":"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff","lid":65535}],"#,
            r#""mr":{"addr":18446744073709547520,"len":8388608,"rkey":3735928559},"#,
            r#""mtu_bytes":4096,"max_msg_bytes":8388608,"gid_index":3,"netdev":"net4"}"#
        );
        let mut header = b"RDBW\x00\x01".to_vec();
        header.extend_from_slice(&(json.len() as u32).to_be_bytes());
        assert_eq!(&frame[..10], &header[..]);
        assert_eq!(std::str::from_utf8(&frame[10..]).unwrap(), json);
    }

    #[test]
    fn reject_reason_names_the_parameter_and_both_values() {
        let server = params();
        let mut client = params();
        client.qps = 2;
        let m = server.check_matches(&client).unwrap_err();
        let r = RejectReason::from_server_mismatch(&m);
        assert_eq!(
            r,
            RejectReason::ParamMismatch {
                param: "--qp/-q".into(),
                server: "4".into(),
                client: "2".into()
            }
        );
        assert_eq!(
            r.to_string(),
            "parameter --qp/-q differs: the server has 4, the client has 2"
        );
    }
}
