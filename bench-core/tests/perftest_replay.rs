//! Replays the captured perftest exchanges (`tests/data/perftest/`, see its README) against
//! rdmabw's reading of them: every message of both directions, in the order rdmabw's sessions
//! send and expect them, decoded by rdmabw's decoders, re-encoded to the same bytes where the
//! encoding is deterministic, and the 6.28 negotiation blocks compared with the block rdmabw
//! builds for the same flags. A version whose exchange moved would fail here before a lab run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use ::wire::params::{Sizes, TestLength, TestParams};
use bench_core::perftest::wire::{self, BwReportMsg, KeyMsg, Negotiation, PeerVersion};
use bench_core::perftest::{negotiation_for, ReportUnit};

struct Transcript {
    name: String,
    headers: Vec<(String, String)>,
    c: Vec<u8>,
    s: Vec<u8>,
}

impl Transcript {
    fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn client_argv(&self) -> Vec<String> {
        self.header("client")
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect()
    }

    fn flag(&self, f: &str) -> Option<String> {
        let argv = self.client_argv();
        argv.iter()
            .position(|a| a == f)
            .map(|i| argv.get(i + 1).cloned().unwrap_or_default())
    }

    fn ok(&self) -> bool {
        self.header("client_exit") == Some("0") && self.header("server_exit") == Some("0")
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn transcripts() -> Vec<Transcript> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/perftest");
    let mut v = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "txt") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let mut t = Transcript {
            name: p.file_name().unwrap().to_string_lossy().into_owned(),
            headers: Vec::new(),
            c: Vec::new(),
            s: Vec::new(),
        };
        for line in text.lines() {
            if let Some(h) = line.strip_prefix("# ") {
                if let Some((k, v)) = h.split_once(": ") {
                    t.headers.push((k.to_string(), v.to_string()));
                }
            } else if let Some(x) = line.strip_prefix("C ") {
                t.c.extend(hex(x));
            } else if let Some(x) = line.strip_prefix("S ") {
                t.s.extend(hex(x));
            }
        }
        v.push(t);
    }
    v.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(v.len() >= 30, "the transcripts are missing: {}", v.len());
    v
}

/// One direction's bytes, taken message by message.
struct Stream<'a> {
    name: &'a str,
    dir: char,
    b: &'a [u8],
    at: usize,
}

impl<'a> Stream<'a> {
    fn take(&mut self, n: usize, what: &str) -> &'a [u8] {
        let m = self.b.get(self.at..self.at + n).unwrap_or_else(|| {
            panic!(
                "{} {}: {what}: {n} bytes wanted at {}, the stream has {}",
                self.name,
                self.dir,
                self.at,
                self.b.len()
            )
        });
        self.at += n;
        m
    }

    fn rest(&self) -> &'a [u8] {
        &self.b[self.at..]
    }
}

/// The test the client's command line asked for, as rdmabw's parameters.
fn params_of(t: &Transcript) -> (TestParams, bool) {
    let latency = t.header("tool") == Some("ib_write_lat");
    let argv = t.client_argv();
    let qps: u32 = t.flag("-q").map_or(1, |q| q.parse().unwrap());
    let length = match (t.flag("-D"), t.flag("-n")) {
        (Some(d), _) => TestLength::Duration {
            duration_s: d.parse().unwrap(),
            warmup_s: 0.0,
            cooldown_s: 0.0,
        },
        (None, Some(n)) => TestLength::Iterations {
            iterations: n.parse().unwrap(),
        },
        (None, None) => TestLength::Iterations {
            iterations: if latency { 1000 } else { 5000 },
        },
    };
    let mut p = TestParams::write_bw(
        Sizes::One {
            msg_size_bytes: if latency { 2 } else { 65536 },
        },
        length,
        qps,
    );
    p.latency = latency;
    p.bidirectional = argv.iter().any(|a| a == "-b");
    (p, latency)
}

fn version(s: &mut Stream<'_>) -> PeerVersion {
    let mut m = [0u8; wire::VERSION_LEN];
    m.copy_from_slice(s.take(wire::VERSION_LEN, "version"));
    wire::decode_version(&m).unwrap_or_else(|e| panic!("{} {}: {e}", s.name, s.dir))
}

fn keys(s: &mut Stream<'_>, n: usize, what: &str) -> Vec<KeyMsg> {
    (0..n)
        .map(|_| {
            let m = s.take(wire::KEY_LEN_GID, what);
            let k =
                KeyMsg::decode(m).unwrap_or_else(|e| panic!("{} {}: {what}: {e}", s.name, s.dir));
            assert_eq!(
                k.encode(),
                m,
                "{} {}: {what} re-encodes alike",
                s.name,
                s.dir
            );
            k
        })
        .collect()
}

/// Walks one successful transcript as rdmabw's sessions do; returns what was checked.
fn walk(t: &Transcript) -> String {
    let (params, latency) = params_of(t);
    let mut c = Stream {
        name: &t.name,
        dir: 'C',
        b: &t.c,
        at: 0,
    };
    let mut s = Stream {
        name: &t.name,
        dir: 'S',
        b: &t.s,
        at: 0,
    };
    let (vc, vs) = (version(&mut c), version(&mut s));
    assert!(vc.rdmabw.is_none() && vs.rdmabw.is_none());
    for st in [&mut c, &mut s] {
        let page = wire::decode_sys(st.take(4, "page size").try_into().unwrap(), "page").unwrap();
        let line = wire::decode_sys(st.take(4, "cache line").try_into().unwrap(), "line").unwrap();
        assert_eq!((page, line), (4096, 64), "{} {}", st.name, st.dir);
        let mtu = wire::decode_mtu(st.take(2, "MTU").try_into().unwrap()).unwrap();
        assert_eq!(mtu, Some(1024), "{} {}", st.name, st.dir);
    }
    // Whether this pair exchanged 6.28's block: where each side's rule says so (rdmabw's
    // rule, PeerVersion::negotiates_with_us, is the same rule seen from a 6.24 side).
    let negotiates =
        |me: &PeerVersion, peer: &PeerVersion| wire::negotiates(me.hundredths(), peer.hundredths());
    let neg = negotiates(&vc, &vs);
    assert_eq!(neg, negotiates(&vs, &vc), "{}: both sides agree", t.name);
    if neg {
        let unit = ReportUnit::MibPerS;
        let ours = negotiation_for(&params, unit, 16);
        for st in [&mut c, &mut s] {
            let b = Negotiation::decode(st.take(wire::NEGOTIATE_LEN_6_28, "negotiation")).unwrap();
            assert_eq!(
                ours.mismatches(&b),
                vec![],
                "{} {}: rdmabw's block for the same flags",
                st.name,
                st.dir
            );
        }
    }
    let q = params.qps as usize;
    let before = 2 * q + 1 + usize::from(latency);
    let kc = keys(&mut c, before, "keys before the run");
    let ks = keys(&mut s, before, "keys before the run");
    // The QPs' second round repeats the first (rdmabw checks this to catch a -q mismatch).
    let first = usize::from(latency);
    for k in [&kc, &ks] {
        for i in 0..q {
            assert_eq!(k[first + i].qpn, k[first + q + i].qpn, "{}", t.name);
        }
    }
    if !latency {
        if params.bidirectional {
            keys(&mut c, 1, "sync");
            keys(&mut s, 1, "sync");
        } else {
            keys(&mut c, 1, "done");
            keys(&mut s, 1, "done");
        }
        let fields = |st: &mut Stream<'_>| {
            let mut f = [[0u8; 8]; 5];
            for x in &mut f {
                x.copy_from_slice(st.take(8, "results"));
            }
            f
        };
        let (fc, fs) = (fields(&mut c), fields(&mut s));
        let rc = BwReportMsg::from_fields(&fc).unwrap();
        assert_eq!(rc.size, 65536, "{}", t.name);
        if let TestLength::Iterations { iterations } = params.length {
            assert_eq!(
                rc.iters,
                iterations * q as u64,
                "{}: iterations x QPs",
                t.name
            );
        }
        assert!(rc.bw_avg > 0.0, "{}", t.name);
        if params.bidirectional {
            let rs = BwReportMsg::from_fields(&fs).unwrap();
            assert_eq!(rs.size, 65536, "{}", t.name);
        }
        keys(&mut c, 1, "close");
        keys(&mut s, 1, "close");
    }
    // 6.06 ends with a "done" each side writes and nobody reads.
    for st in [&c, &s] {
        let rest = st.rest();
        assert!(
            rest.is_empty() || (vc.value < 6.1 && rest == b"done\0"),
            "{} {}: {} bytes left over: {:?}",
            st.name,
            st.dir,
            rest.len(),
            &rest[..rest.len().min(16)]
        );
    }
    format!("{} ({} -> {})", t.name, vc.text, vs.text)
}

#[test]
fn every_successful_transcript_reads_message_by_message_as_rdmabw_speaks_it() {
    let mut walked = Vec::new();
    for t in transcripts().iter().filter(|t| t.ok()) {
        walked.push(walk(t));
    }
    eprintln!("{}", walked.join("\n"));
    // Every version, both tools.
    for v in ["6.06", "6.24", "6.28", "6.29"] {
        for tool in ["ib_write_bw", "ib_write_lat"] {
            assert!(
                walked.iter().any(|w| w.starts_with(&format!("{v}-{tool}"))),
                "{v} {tool} not replayed"
            );
        }
    }
}

#[test]
fn a_6_28_peer_negotiates_with_rdmabw_and_a_6_29_peer_does_not() {
    // rdmabw presents 6.24: the pair 6.24 <-> 6.28 fails between perftests because 6.24 does
    // not send the block 6.28 waits for; rdmabw sends it to a 6.28 peer.
    let ts = transcripts();
    let failed = ts
        .iter()
        .find(|t| t.name == "6.24-ib_write_bw-client-vs-6.28-server.txt")
        .unwrap();
    assert!(!failed.ok());
    let mut s = Stream {
        name: &failed.name,
        dir: 'S',
        b: &failed.s,
        at: 0,
    };
    let v = version(&mut s);
    assert_eq!(v.text, "6.28");
    assert!(v.negotiates_with_us());
    let newest = ts
        .iter()
        .find(|t| t.name == "6.29-ib_write_bw-default.txt")
        .unwrap();
    let mut c = Stream {
        name: &newest.name,
        dir: 'C',
        b: &newest.c,
        at: 0,
    };
    assert!(!version(&mut c).negotiates_with_us());
    for old in [
        "6.06-ib_write_bw-default.txt",
        "6.24-ib_write_bw-default.txt",
    ] {
        let t = ts.iter().find(|t| t.name == old).unwrap();
        let mut c = Stream {
            name: &t.name,
            dir: 'C',
            b: &t.c,
            at: 0,
        };
        assert!(!version(&mut c).negotiates_with_us(), "{old}");
    }
}

#[test]
fn rdmabw_messages_have_the_sizes_and_forms_perftest_sent() {
    let ts = transcripts();
    let t = ts
        .iter()
        .find(|t| t.name == "6.24-ib_write_bw-default.txt")
        .unwrap();
    // perftest's version message: "6.24", a NUL, zeros; rdmabw's plain one is the same bytes.
    assert_eq!(&t.c[..16], &wire::encode_version(None));
    assert_eq!(&t.c[16..20], &wire::encode_sys(4096));
    assert_eq!(&t.c[20..24], &wire::encode_sys(64));
    assert_eq!(&t.c[24..26], &wire::encode_mtu(1024).unwrap());
}
