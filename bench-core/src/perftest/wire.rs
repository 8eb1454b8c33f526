//! perftest's TCP exchange, message by message, as pure encoders and decoders.
//!
//! Read from perftest's public source (`src/perftest_communication.c`, `write_bw.c`,
//! `write_lat.c`) at the tags of the versions in the field, and checked against the captured
//! transcripts in `tests/data/perftest/`. Every message is one fixed-size write with no
//! framing; the sizes below are the whole contract, so each decoder takes exactly that many
//! bytes and checks every one of them before a value is used.

use std::fmt;

/// Bytes of the version message (`MAX_VERSION` in perftest).
pub const VERSION_LEN: usize = 16;
/// Bytes of each of the two system-data messages (page size, cache line size).
pub const SYS_DATA_LEN: usize = 4;
/// Bytes of the MTU message from peers of 5.31 on (an enum digit and a NUL).
pub const MTU_LEN: usize = 2;
/// Bytes of a key message with a GID (RoCE, or any `-x`).
pub const KEY_LEN_GID: usize = 108;
/// Bytes of a key message without a GID (InfiniBand without `-x`).
pub const KEY_LEN_NO_GID: usize = 59;
/// Bytes of each field of the bandwidth report exchange.
pub const REPORT_FIELD_LEN: usize = 8;
/// Fields of the bandwidth report exchange: size, iterations, peak, average, message rate.
pub const REPORT_FIELDS: usize = 5;
/// Bytes of 6.28's negotiation block (`struct perftest_parameters_negotiate` built with
/// mlx5dv, as every distribution builds it).
pub const NEGOTIATE_LEN_6_28: usize = 320;

/// The perftest wire version rdmabw presents to a perftest peer: the lab's reference (Debian's
/// perftest 25.01), whose exchange every version from 5.70 on still speaks.
pub const OUR_VERSION: &str = "6.24";

/// What follows the NUL of an rdmabw's version message: perftest reads the version up to its
/// NUL and ignores the rest, an rdmabw peer reads this and goes on in rdmabw's own protocol.
pub const RDMABW_MARK: &[u8; 4] = b"RDBW";

/// The oldest peer perftest itself accepts (`check_version_compatibility`).
pub const OLDEST: f64 = 5.70;

/// A peer's version message, read.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerVersion {
    /// The text before the NUL, as sent (`6.24`).
    pub text: String,
    /// Its value as perftest reads it (`atof`).
    pub value: f64,
    /// The peer marked itself as rdmabw after the NUL, with this control protocol version.
    pub rdmabw: Option<u16>,
}

impl PeerVersion {
    /// Whether this peer exchanges the 6.28 negotiation block with a peer that presents
    /// [`OUR_VERSION`]: 6.28 negotiates with every peer, 6.29 on only with 6.28 or later.
    pub fn negotiates_with_us(&self) -> bool {
        let ours = hundredths(OUR_VERSION.parse().unwrap_or(0.0));
        negotiates(self.hundredths(), ours)
    }

    /// The version in hundredths (`6.24` is 624), as perftest's comparisons read it.
    pub fn hundredths(&self) -> u32 {
        hundredths(self.value)
    }
}

/// The first version that sends 6.28's negotiation block (to every peer).
pub const NEGOTIATES_FROM: u32 = 628;
/// The first version that sends it only to peers that negotiate too.
pub const NEGOTIATES_WITH_NEGOTIATORS_FROM: u32 = 629;

fn hundredths(v: f64) -> u32 {
    (v * 100.0).round().clamp(0.0, f64::from(u32::MAX)) as u32
}

/// Whether a side of version `me` sends the negotiation block to a peer of version `peer`
/// (both in hundredths): 6.28 to everyone, 6.29 on only to 6.28 or later.
pub fn negotiates(me: u32, peer: u32) -> bool {
    me >= NEGOTIATES_FROM && (me < NEGOTIATES_WITH_NEGOTIATORS_FROM || peer >= NEGOTIATES_FROM)
}

impl PeerVersion {}

/// A message that is not what the exchange allows at that point.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {detail}")]
pub struct WireError {
    /// The message (`version message`, `key message`, ...).
    pub what: &'static str,
    /// What is wrong, with the bytes shown readably.
    pub detail: String,
}

fn wire_err(what: &'static str, detail: impl Into<String>) -> WireError {
    WireError {
        what,
        detail: detail.into(),
    }
}

/// Up to 24 bytes shown readably: as text when printable, else as hex.
pub fn show(bytes: &[u8]) -> String {
    let b = &bytes[..bytes.len().min(24)];
    let more = if bytes.len() > b.len() { "..." } else { "" };
    if !b.is_empty() && b.iter().all(|c| c.is_ascii_graphic() || *c == b' ') {
        format!("{:?}{more}", String::from_utf8_lossy(b))
    } else {
        let hex: Vec<String> = b.iter().map(|c| format!("{c:02x}")).collect();
        format!("bytes [{}{more}]", hex.join(" "))
    }
}

/// The version message rdmabw sends: [`OUR_VERSION`], a NUL, and (unless it speaks as plain
/// perftest) [`RDMABW_MARK`] with its control protocol version.
pub fn encode_version(mark: Option<u16>) -> [u8; VERSION_LEN] {
    let mut m = [0u8; VERSION_LEN];
    m[..OUR_VERSION.len()].copy_from_slice(OUR_VERSION.as_bytes());
    if let Some(proto) = mark {
        let at = OUR_VERSION.len() + 1;
        m[at..at + 4].copy_from_slice(RDMABW_MARK);
        m[at + 4..at + 6].copy_from_slice(&proto.to_be_bytes());
    }
    m
}

/// Reads a version message: up to its NUL a version (digits with one dot, as perftest's
/// `VERSION` is), after it perhaps rdmabw's mark. Anything else is not a perftest peer.
pub fn decode_version(m: &[u8; VERSION_LEN]) -> Result<PeerVersion, WireError> {
    let what = "version message";
    let nul = m
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| wire_err(what, format!("no NUL in {}", show(m))))?;
    let text = &m[..nul];
    let dots = text.iter().filter(|b| **b == b'.').count();
    if text.is_empty()
        || dots != 1
        || !text.iter().all(|b| b.is_ascii_digit() || *b == b'.')
        || text[0] == b'.'
        || text[text.len() - 1] == b'.'
    {
        return Err(wire_err(
            what,
            format!("{} is not a perftest version", show(text)),
        ));
    }
    let text = String::from_utf8_lossy(text).into_owned();
    let value: f64 = text
        .parse()
        .map_err(|_| wire_err(what, format!("{text:?} is not a number")))?;
    let rest = &m[nul + 1..];
    let rdmabw = (rest.len() >= 6 && rest[..4] == RDMABW_MARK[..])
        .then(|| u16::from_be_bytes([rest[4], rest[5]]));
    Ok(PeerVersion {
        text,
        value,
        rdmabw,
    })
}

/// A system-data message: a big-endian `int` (page size, then cache line size).
pub fn encode_sys(v: u32) -> [u8; SYS_DATA_LEN] {
    v.to_be_bytes()
}

/// Reads a system-data message. perftest keeps the larger of both sides' values; a value of 0
/// or above 1 GiB is refused (no page or cache line is that size).
pub fn decode_sys(m: &[u8; SYS_DATA_LEN], what: &'static str) -> Result<u32, WireError> {
    let v = u32::from_be_bytes(*m);
    if v == 0 || v > (1 << 30) {
        return Err(wire_err(what, format!("{v} is not a plausible size")));
    }
    Ok(v)
}

/// The MTU message: `ibv_mtu`'s enum value (1 = 256 B ... 5 = 4096 B) as one ASCII digit and
/// a NUL.
pub fn encode_mtu(mtu_bytes: u32) -> Result<[u8; MTU_LEN], WireError> {
    let code = mtu_code(mtu_bytes)
        .ok_or_else(|| wire_err("MTU message", format!("{mtu_bytes} is not an IB MTU")))?;
    Ok([b'0' + code, 0])
}

/// Reads the MTU message as bytes. perftest ignores a value outside 1-5 (it keeps its own);
/// rdmabw does the same, so `None` there.
pub fn decode_mtu(m: &[u8; MTU_LEN]) -> Result<Option<u32>, WireError> {
    if !m[0].is_ascii_digit() || m[1] != 0 {
        return Err(wire_err(
            "MTU message",
            format!("{} is not a digit and a NUL", show(m)),
        ));
    }
    Ok(mtu_bytes(m[0] - b'0'))
}

fn mtu_code(bytes: u32) -> Option<u8> {
    match bytes {
        256 => Some(1),
        512 => Some(2),
        1024 => Some(3),
        2048 => Some(4),
        4096 => Some(5),
        _ => None,
    }
}

fn mtu_bytes(code: u8) -> Option<u32> {
    (1..=5).contains(&code).then(|| 128u32 << code)
}

/// One QP's key message (`struct pingpong_dest` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyMsg {
    /// The port's LID (0 on RoCE).
    pub lid: u16,
    /// Outstanding RDMA reads the sender allows (`max_qp_rd_atom`).
    pub out_reads: u32,
    /// QP number (24 bits).
    pub qpn: u32,
    /// Initial packet sequence number of the sender's send queue (24 bits).
    pub psn: u32,
    /// Remote key of the sender's buffer.
    pub rkey: u32,
    /// Where the peer writes to this QP's buffer.
    pub vaddr: u64,
    /// The sender's GID, in the 108-byte form; `None` in the 59-byte form.
    pub gid: Option<[u8; 16]>,
    /// SRQ number (0 for RC).
    pub srqn: u32,
}

impl KeyMsg {
    /// The message's length on the wire.
    pub fn len(&self) -> usize {
        if self.gid.is_some() {
            KEY_LEN_GID
        } else {
            KEY_LEN_NO_GID
        }
    }

    /// Whether it is the short form (never: a key message has a length).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bytes, with perftest's `KEY_PRINT_FMT` (`_GID`) and its NUL.
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out_reads & 0xffff,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff,
            self.rkey,
            self.vaddr
        );
        if let Some(g) = &self.gid {
            for b in g {
                s.push_str(&format!("{b:02x}:"));
            }
            s.push_str(&format!("{:08x}:", self.srqn));
        } else {
            s.push_str(&format!("{:08x}", self.srqn));
        }
        let mut v = s.into_bytes();
        v.resize(self.len(), 0);
        v
    }

    /// Reads a key message of `m.len()` bytes ([`KEY_LEN_GID`] or [`KEY_LEN_NO_GID`]): every
    /// field lower-case hex of its width, colons between, a NUL after; nothing else.
    pub fn decode(m: &[u8]) -> Result<KeyMsg, WireError> {
        let what = "key message";
        let with_gid = match m.len() {
            KEY_LEN_GID => true,
            KEY_LEN_NO_GID => false,
            n => return Err(wire_err(what, format!("{n} bytes, not 59 or 108"))),
        };
        let body = &m[..m.len() - 1];
        if m[m.len() - 1] != 0 || !body.iter().all(|b| b.is_ascii_hexdigit() || *b == b':') {
            return Err(wire_err(
                what,
                format!("{} is not perftest's colon-separated hex", show(m)),
            ));
        }
        let text = std::str::from_utf8(body).map_err(|_| wire_err(what, "not ASCII"))?;
        let text = text.strip_suffix(':').unwrap_or(text);
        let parts: Vec<&str> = text.split(':').collect();
        let widths: &[usize] = if with_gid {
            &[
                4, 4, 6, 6, 8, 16, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 8,
            ]
        } else {
            &[4, 4, 6, 6, 8, 16, 8]
        };
        if parts.len() != widths.len() || parts.iter().zip(widths).any(|(p, w)| p.len() != *w) {
            return Err(wire_err(
                what,
                format!("{} does not have perftest's field widths", show(m)),
            ));
        }
        let hex = |s: &str| u64::from_str_radix(s, 16).map_err(|e| wire_err(what, e.to_string()));
        let gid = if with_gid {
            let mut g = [0u8; 16];
            for (i, b) in g.iter_mut().enumerate() {
                *b = hex(parts[6 + i])? as u8;
            }
            Some(g)
        } else {
            None
        };
        Ok(KeyMsg {
            lid: hex(parts[0])? as u16,
            out_reads: hex(parts[1])? as u32,
            qpn: hex(parts[2])? as u32,
            psn: hex(parts[3])? as u32,
            rkey: hex(parts[4])? as u32,
            vaddr: hex(parts[5])?,
            gid,
            srqn: hex(parts[widths.len() - 1])? as u32,
        })
    }
}

/// The units of the bandwidth figures in a report: those of the sender's own table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportUnit {
    /// MB/sec, 2^20 bytes per second (perftest's default).
    MibPerS,
    /// Gb/sec, 10^9 bits per second (`--report_gbits`).
    Gbps,
}

impl ReportUnit {
    /// How many Gb/s one unit is.
    pub fn gbps_per_unit(self) -> f64 {
        match self {
            ReportUnit::MibPerS => 1_048_576.0 * 8.0 / 1e9,
            ReportUnit::Gbps => 1.0,
        }
    }

    /// perftest's `report_fmt` enum value (GBS = 0, MBS = 1).
    pub fn code(self) -> u32 {
        match self {
            ReportUnit::Gbps => 0,
            ReportUnit::MibPerS => 1,
        }
    }
}

impl fmt::Display for ReportUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReportUnit::MibPerS => "MB/sec",
            ReportUnit::Gbps => "Gb/sec",
        })
    }
}

/// The client's results as `xchg_bw_reports` carries them, in the sender's units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BwReportMsg {
    /// Bytes per write.
    pub size: u64,
    /// Writes completed (measured).
    pub iters: u64,
    /// Peak bandwidth.
    pub bw_peak: f64,
    /// Average bandwidth.
    pub bw_avg: f64,
    /// Messages per second, in millions.
    pub msg_rate: f64,
}

impl BwReportMsg {
    /// Whether perftest measured writes but has no figure for them: it reports 0 for the
    /// bandwidth and the message rate when its clock calibration failed (its
    /// `sample_get_cpu_mhz` gives 0 when the timing samples of a busy host fit worse than
    /// r² 0.9, and every figure is scaled by it), however many writes it counted.
    pub fn clockless(&self) -> bool {
        self.iters > 0 && self.bw_avg == 0.0 && self.msg_rate == 0.0
    }

    /// The five 8-byte fields, each big-endian (doubles by their bits), in exchange order.
    pub fn fields(&self) -> [[u8; REPORT_FIELD_LEN]; REPORT_FIELDS] {
        [
            self.size.to_be_bytes(),
            self.iters.to_be_bytes(),
            self.bw_peak.to_bits().to_be_bytes(),
            self.bw_avg.to_bits().to_be_bytes(),
            self.msg_rate.to_bits().to_be_bytes(),
        ]
    }

    /// The report from its five fields; non-finite or negative figures are refused.
    pub fn from_fields(f: &[[u8; REPORT_FIELD_LEN]; REPORT_FIELDS]) -> Result<Self, WireError> {
        let d = |b: &[u8; 8]| f64::from_bits(u64::from_be_bytes(*b));
        let r = BwReportMsg {
            size: u64::from_be_bytes(f[0]),
            iters: u64::from_be_bytes(f[1]),
            bw_peak: d(&f[2]),
            bw_avg: d(&f[3]),
            msg_rate: d(&f[4]),
        };
        for (name, v) in [
            ("peak", r.bw_peak),
            ("average", r.bw_avg),
            ("message rate", r.msg_rate),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(wire_err(
                    "results",
                    format!("the {name} figure {v} is not a bandwidth"),
                ));
            }
        }
        Ok(r)
    }
}

/// perftest's test method (`enum ctx_test_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestMethod {
    /// One size (`-s`).
    Regular = 0,
    /// Every power of two (`-a`).
    All = 1,
    /// `--run_infinitely`.
    Infinitely = 2,
}

/// What 6.28's negotiation block carries and checks (`struct perftest_parameters_negotiate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiation {
    /// `-a`, one size, or endless.
    pub test_method: u32,
    /// RC = 0.
    pub connection_type: u32,
    /// WRITE = 2.
    pub verb: u32,
    /// LAT = 0, BW = 1.
    pub tst: u32,
    /// Atomic type (0 here).
    pub atomic_type: u32,
    /// ITERATIONS = 0, DURATION = 1.
    pub test_type: u32,
    /// GBS = 0, MBS = 1.
    pub report_fmt: u32,
    /// `-s` (8 MiB with `-a`).
    pub size: u64,
    /// `-n`.
    pub iters: u64,
    /// AES-XTS (0).
    pub aes_xts: u32,
    /// `-q`.
    pub num_of_qps: u32,
    /// `-D` in whole seconds.
    pub duration: u32,
    /// rdma_cm (0).
    pub use_rdma_cm: u32,
    /// Write with immediate (0).
    pub use_write_with_imm: u32,
    /// No enhanced reorder.
    pub no_enhanced_reorder: u32,
    /// Signature offload (0).
    pub sig_offload: u32,
    /// The device's `max_qp_rd_atom`: the only device attribute the peer reads.
    pub max_qp_rd_atom: u32,
}

/// Offsets in the block: seven ints, padding to 8, two u64, seven ints, padding to 8, then
/// `struct ibv_device_attr` (host byte order, 232 bytes; `max_qp_rd_atom` at 144 of it), then
/// the mlx5dv mask.
const NEG_SIZE_AT: usize = 32;
const NEG_INTS2_AT: usize = 48;
const NEG_ATTR_AT: usize = 80;
const ATTR_MAX_QP_RD_ATOM: usize = 144;

impl Negotiation {
    /// The names of the checked fields with both sides' values, where they differ, in
    /// perftest's order and words (`size mismatch: local=..., remote=...`).
    pub fn mismatches(&self, theirs: &Negotiation) -> Vec<(&'static str, String, String)> {
        let named = |n: &Negotiation| -> [(&'static str, u64); 16] {
            [
                ("test_method", u64::from(n.test_method)),
                ("connection_type", u64::from(n.connection_type)),
                ("verb", u64::from(n.verb)),
                ("tst", u64::from(n.tst)),
                ("atomicType", u64::from(n.atomic_type)),
                ("test_type", u64::from(n.test_type)),
                ("report_fmt", u64::from(n.report_fmt)),
                ("size", n.size),
                ("iters", n.iters),
                ("aes_xts", u64::from(n.aes_xts)),
                ("num_of_qps", u64::from(n.num_of_qps)),
                ("duration", u64::from(n.duration)),
                ("use_rdma_cm", u64::from(n.use_rdma_cm)),
                ("use_write_with_imm", u64::from(n.use_write_with_imm)),
                ("no_enhanced_reorder", u64::from(n.no_enhanced_reorder)),
                ("sig_offload", u64::from(n.sig_offload)),
            ]
        };
        named(self)
            .into_iter()
            .zip(named(theirs))
            .filter(|(a, b)| a.1 != b.1)
            .map(|(a, b)| (a.0, show_neg(a.0, a.1), show_neg(a.0, b.1)))
            .collect()
    }

    /// The 320-byte block.
    pub fn encode(&self) -> Vec<u8> {
        let mut m = vec![0u8; NEGOTIATE_LEN_6_28];
        let ints1 = [
            self.test_method,
            self.connection_type,
            self.verb,
            self.tst,
            self.atomic_type,
            self.test_type,
            self.report_fmt,
        ];
        for (i, v) in ints1.iter().enumerate() {
            m[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
        }
        m[NEG_SIZE_AT..NEG_SIZE_AT + 8].copy_from_slice(&self.size.to_be_bytes());
        m[NEG_SIZE_AT + 8..NEG_SIZE_AT + 16].copy_from_slice(&self.iters.to_be_bytes());
        let ints2 = [
            self.aes_xts,
            self.num_of_qps,
            self.duration,
            self.use_rdma_cm,
            self.use_write_with_imm,
            self.no_enhanced_reorder,
            self.sig_offload,
        ];
        for (i, v) in ints2.iter().enumerate() {
            let at = NEG_INTS2_AT + i * 4;
            m[at..at + 4].copy_from_slice(&v.to_be_bytes());
        }
        let at = NEG_ATTR_AT + ATTR_MAX_QP_RD_ATOM;
        m[at..at + 4].copy_from_slice(&self.max_qp_rd_atom.to_le_bytes());
        m
    }

    /// Reads a 320-byte block.
    pub fn decode(m: &[u8]) -> Result<Negotiation, WireError> {
        if m.len() != NEGOTIATE_LEN_6_28 {
            return Err(wire_err(
                "negotiation block",
                format!("{} bytes, not {NEGOTIATE_LEN_6_28}", m.len()),
            ));
        }
        let be32 = |at: usize| u32::from_be_bytes([m[at], m[at + 1], m[at + 2], m[at + 3]]);
        let be64 = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&m[at..at + 8]);
            u64::from_be_bytes(b)
        };
        let at = NEG_ATTR_AT + ATTR_MAX_QP_RD_ATOM;
        Ok(Negotiation {
            test_method: be32(0),
            connection_type: be32(4),
            verb: be32(8),
            tst: be32(12),
            atomic_type: be32(16),
            test_type: be32(20),
            report_fmt: be32(24),
            size: be64(NEG_SIZE_AT),
            iters: be64(NEG_SIZE_AT + 8),
            aes_xts: be32(NEG_INTS2_AT),
            num_of_qps: be32(NEG_INTS2_AT + 4),
            duration: be32(NEG_INTS2_AT + 8),
            use_rdma_cm: be32(NEG_INTS2_AT + 12),
            use_write_with_imm: be32(NEG_INTS2_AT + 16),
            no_enhanced_reorder: be32(NEG_INTS2_AT + 20),
            sig_offload: be32(NEG_INTS2_AT + 24),
            max_qp_rd_atom: u32::from_le_bytes([m[at], m[at + 1], m[at + 2], m[at + 3]]),
        })
    }
}

fn show_neg(name: &str, v: u64) -> String {
    let names: &[&str] = match name {
        "test_method" => &["RUN_REGULAR", "RUN_ALL", "RUN_INFINITELY"],
        "connection_type" => &["RC", "UC", "UD", "RawEth", "XRC", "DC", "SRD"],
        "verb" => &["SEND", "SEND_IMM", "WRITE", "WRITE_IMM", "READ", "ATOMIC"],
        "tst" => &["LAT", "BW", "LAT_BY_BW", "FS_RATE"],
        "test_type" => &["ITERATIONS", "DURATION"],
        "report_fmt" => &["GBS", "MBS"],
        _ => &[],
    };
    names
        .get(v as usize)
        .map_or_else(|| v.to_string(), |s| (*s).to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn writes_counted_with_every_figure_zero_are_a_clockless_report() {
        let m = |iters, bw_avg, msg_rate| BwReportMsg {
            size: 4096,
            iters,
            bw_peak: 0.0,
            bw_avg,
            msg_rate,
        };
        // As the lab saw it: 2,400 writes in the window, 0 for both figures.
        assert!(m(2400, 0.0, 0.0).clockless());
        assert!(!m(2400, 0.039, 0.0012).clockless());
        // Nothing measured at all is not a clock's fault.
        assert!(!m(0, 0.0, 0.0).clockless());
    }

    #[test]
    fn our_version_reads_as_perftest_reads_it_and_carries_the_mark() {
        let m = encode_version(Some(1));
        assert_eq!(&m[..5], b"6.24\0");
        let v = decode_version(&m).unwrap();
        assert_eq!(v.text, "6.24");
        assert!((v.value - 6.24).abs() < 1e-9);
        assert_eq!(v.rdmabw, Some(1));
        let plain = decode_version(&encode_version(None)).unwrap();
        assert_eq!(plain.rdmabw, None);
    }

    #[test]
    fn a_version_message_that_is_not_perftest_is_refused_with_its_bytes() {
        let mut m = [0u8; 16];
        m[..10].copy_from_slice(b"RDBW\x00\x01\x00\x00\x00\x40");
        let e = decode_version(&m).unwrap_err();
        assert!(e.to_string().contains("not a perftest version"), "{e}");
        let e = decode_version(b"6.24xxxxxxxxxxxx").unwrap_err();
        assert!(e.to_string().contains("no NUL"), "{e}");
        for bad in [&b"6\0"[..], b".6\0", b"6.\0", b"6.2.4\0", b"\0"] {
            let mut m = [0u8; 16];
            m[..bad.len()].copy_from_slice(bad);
            assert!(decode_version(&m).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn negotiation_follows_each_version_rule() {
        let v = |s: &str| PeerVersion {
            text: s.into(),
            value: s.parse().unwrap(),
            rdmabw: None,
        };
        assert!(!v("6.06").negotiates_with_us());
        assert!(!v("6.24").negotiates_with_us());
        assert!(v("6.28").negotiates_with_us(), "6.28 negotiates with all");
        assert!(
            !v("6.29").negotiates_with_us(),
            "6.29 only with 6.28 or later"
        );
    }

    #[test]
    fn mtu_messages_are_the_enum_digit() {
        assert_eq!(encode_mtu(1024).unwrap(), *b"3\0");
        assert_eq!(encode_mtu(4096).unwrap(), *b"5\0");
        assert!(encode_mtu(1500).is_err());
        assert_eq!(decode_mtu(b"3\0").unwrap(), Some(1024));
        assert_eq!(decode_mtu(b"9\0").unwrap(), None);
        assert!(decode_mtu(b"3x").is_err());
    }

    #[test]
    fn key_messages_have_perftest_sizes_and_round_trip() {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[10, 224, 0, 1]);
        let k = KeyMsg {
            lid: 0,
            out_reads: 128,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234,
            vaddr: 0x55d0_0000_1000,
            gid: Some(gid),
            srqn: 0,
        };
        let m = k.encode();
        assert_eq!(m.len(), KEY_LEN_GID);
        assert_eq!(
            std::str::from_utf8(&m[..50]).unwrap(),
            "0000:0080:000011:abcdef:00001234:000055d000001000:"
        );
        assert_eq!(m[107], 0);
        assert_eq!(KeyMsg::decode(&m).unwrap(), k);
        let short = KeyMsg { gid: None, ..k };
        let m = short.encode();
        assert_eq!(m.len(), KEY_LEN_NO_GID);
        assert_eq!(KeyMsg::decode(&m).unwrap(), short);
    }

    #[test]
    fn a_malformed_key_message_is_refused_not_misread() {
        let k = KeyMsg {
            lid: 0,
            out_reads: 1,
            qpn: 1,
            psn: 1,
            rkey: 1,
            vaddr: 1,
            gid: Some([0; 16]),
            srqn: 0,
        };
        let good = k.encode();
        let mut m = good.clone();
        m[3] = b'g';
        assert!(KeyMsg::decode(&m).is_err());
        let mut m = good.clone();
        m[107] = b'0';
        assert!(KeyMsg::decode(&m).is_err());
        assert!(KeyMsg::decode(&good[..100]).is_err());
        let mut m = good;
        m[4] = b'0'; // a colon missing: the widths no longer hold
        assert!(KeyMsg::decode(&m).is_err());
    }

    #[test]
    fn reports_round_trip_and_refuse_nonsense() {
        let r = BwReportMsg {
            size: 65536,
            iters: 5000,
            bw_peak: 12.5,
            bw_avg: 11.25,
            msg_rate: 0.021,
        };
        assert_eq!(BwReportMsg::from_fields(&r.fields()).unwrap(), r);
        assert_eq!(r.fields()[0], [0, 0, 0, 0, 0, 1, 0, 0]);
        let mut f = r.fields();
        f[3] = f64::NAN.to_bits().to_be_bytes();
        assert!(BwReportMsg::from_fields(&f).is_err());
        f[3] = (-1.0f64).to_bits().to_be_bytes();
        assert!(BwReportMsg::from_fields(&f).is_err());
    }

    #[test]
    fn the_negotiation_block_has_its_c_layout_and_names_mismatches() {
        let n = Negotiation {
            test_method: TestMethod::Regular as u32,
            connection_type: 0,
            verb: 2,
            tst: 1,
            atomic_type: 0,
            test_type: 0,
            report_fmt: 1,
            size: 65536,
            iters: 5000,
            aes_xts: 0,
            num_of_qps: 1,
            duration: 5,
            use_rdma_cm: 0,
            use_write_with_imm: 0,
            no_enhanced_reorder: 0,
            sig_offload: 0,
            max_qp_rd_atom: 128,
        };
        let m = n.encode();
        assert_eq!(m.len(), 320);
        assert_eq!(&m[8..12], &[0, 0, 0, 2]);
        assert_eq!(&m[32..40], &65536u64.to_be_bytes());
        assert_eq!(&m[52..56], &1u32.to_be_bytes());
        assert_eq!(Negotiation::decode(&m).unwrap(), n);
        let other = Negotiation {
            size: 4096,
            num_of_qps: 2,
            ..n
        };
        let mm = n.mismatches(&other);
        assert_eq!(
            mm,
            vec![
                ("size", "65536".to_string(), "4096".to_string()),
                ("num_of_qps", "1".to_string(), "2".to_string())
            ]
        );
        let lat = Negotiation { tst: 0, ..n };
        assert_eq!(
            n.mismatches(&lat),
            vec![("tst", "BW".to_string(), "LAT".to_string())]
        );
    }
}
