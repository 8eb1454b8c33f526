//! Wire framing: `magic (4) | version (u16 BE) | payload length (u32 BE) | JSON payload`.
//!
//! The magic and the version field are fixed for all future protocol versions, so that any two
//! rdmabw releases can at least tell each other that they differ. The payload length is checked
//! against [`MAX_FRAME_BYTES`] before a single payload byte is buffered, and the buffer then grows
//! only with bytes that actually arrive, so a peer that announces a large frame and sends nothing
//! costs nothing.

use std::io::{self, Read, Write};
use std::sync::Arc;

use super::msg::{Msg, PROTOCOL_VERSION};

/// The 4 bytes that open every frame: ASCII `RDBW`.
pub const MAGIC: [u8; 4] = *b"RDBW";

/// Bytes in a frame header: magic, version, payload length.
pub const HEADER_LEN: usize = 10;

/// The largest payload accepted or sent, in bytes (1 MiB). A full `-a` sweep's results are a
/// few KiB, so anything near this is a bug or not an rdmabw peer.
pub const MAX_FRAME_BYTES: u32 = 1 << 20;

/// The most bytes read from the stream in one call while a payload arrives.
const READ_CHUNK: usize = 8 * 1024;

/// A decoding or encoding failure of one frame, without connection context.
///
/// [`ControlError`](super::ControlError) adds the peer address and the protocol phase.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FrameError {
    /// The stream ended cleanly at a frame boundary.
    #[error("the stream ended at a frame boundary")]
    Closed,
    /// The stream ended inside a frame.
    #[error("truncated frame: the stream ended after {got} of {needed} bytes")]
    Truncated {
        /// Bytes of the frame that arrived.
        got: usize,
        /// Bytes needed to complete the header, or the whole frame once the header is known.
        needed: usize,
    },
    /// The announced payload length exceeds the cap.
    #[error("frame payload of {len} bytes exceeds the cap of {cap} bytes")]
    Oversized {
        /// The payload length the header announced (or the encoder produced).
        len: u64,
        /// The cap, [`MAX_FRAME_BYTES`].
        cap: u32,
    },
    /// The first bytes are not [`MAGIC`]: the peer does not speak this protocol.
    #[error("not an rdmabw control frame: expected magic \"RDBW\", got {}", show_bytes(.found))]
    BadMagic {
        /// The bytes found where the magic belongs (up to 4).
        found: Vec<u8>,
    },
    /// The frame's protocol version is not [`PROTOCOL_VERSION`].
    #[error("control protocol version mismatch: the frame is v{theirs}, this side speaks v{ours}")]
    BadVersion {
        /// The version in the frame.
        theirs: u16,
        /// [`PROTOCOL_VERSION`].
        ours: u16,
    },
    /// The payload is not a valid JSON message.
    #[error("malformed payload: {detail}")]
    Malformed {
        /// The serde error text.
        detail: String,
    },
    /// Reading or writing the stream failed.
    #[error("i/o error: {0}")]
    Io(#[source] Arc<io::Error>),
}

impl From<io::Error> for FrameError {
    fn from(e: io::Error) -> Self {
        FrameError::Io(Arc::new(e))
    }
}

/// Renders up to a few bytes readably: as text when printable, else as hex.
pub(crate) fn show_bytes(bytes: &[u8]) -> String {
    if !bytes.is_empty() && bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}", String::from_utf8_lossy(bytes))
    } else {
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("bytes [{}]", hex.join(" "))
    }
}

/// Validates as much of a header as `buf` holds.
///
/// `Ok(None)`: the bytes so far are a valid header prefix, more are needed. `Ok(Some(len))`: the
/// header is complete and announces a payload of `len` bytes, which is within the cap.
fn check_header(buf: &[u8]) -> Result<Option<usize>, FrameError> {
    let m = buf.len().min(MAGIC.len());
    if buf[..m] != MAGIC[..m] {
        return Err(FrameError::BadMagic {
            found: buf[..m].to_vec(),
        });
    }
    if buf.len() < 6 {
        return Ok(None);
    }
    let theirs = u16::from_be_bytes([buf[4], buf[5]]);
    if theirs != PROTOCOL_VERSION {
        return Err(FrameError::BadVersion {
            theirs,
            ours: PROTOCOL_VERSION,
        });
    }
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = u32::from_be_bytes([buf[6], buf[7], buf[8], buf[9]]);
    if len > MAX_FRAME_BYTES {
        return Err(FrameError::Oversized {
            len: u64::from(len),
            cap: MAX_FRAME_BYTES,
        });
    }
    // u32 -> usize cannot truncate on the 32/64-bit targets rdma-core supports.
    Ok(Some(len as usize))
}

fn parse_payload(payload: &[u8]) -> Result<Msg, FrameError> {
    serde_json::from_slice(payload).map_err(|e| FrameError::Malformed {
        detail: e.to_string(),
    })
}

/// Serializes `msg` into one complete frame.
///
/// Fails with [`FrameError::Oversized`] when the payload would exceed [`MAX_FRAME_BYTES`].
pub fn encode_frame(msg: &Msg) -> Result<Vec<u8>, FrameError> {
    let payload = serde_json::to_vec(msg).map_err(|e| FrameError::Malformed {
        detail: e.to_string(),
    })?;
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|l| *l <= MAX_FRAME_BYTES)
        .ok_or(FrameError::Oversized {
            len: payload.len() as u64,
            cap: MAX_FRAME_BYTES,
        })?;
    let mut frame = Vec::with_capacity(HEADER_LEN + payload.len());
    frame.extend_from_slice(&MAGIC);
    frame.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&payload);
    Ok(frame)
}

/// Decodes the frame at the start of `buf`, returning the message and the bytes it used.
///
/// Bytes after the frame are left alone. An incomplete frame is [`FrameError::Truncated`].
pub fn decode_frame(buf: &[u8]) -> Result<(Msg, usize), FrameError> {
    let Some(len) = check_header(buf)? else {
        return Err(FrameError::Truncated {
            got: buf.len(),
            needed: HEADER_LEN,
        });
    };
    let total = HEADER_LEN + len;
    let Some(payload) = buf.get(HEADER_LEN..total) else {
        return Err(FrameError::Truncated {
            got: buf.len(),
            needed: total,
        });
    };
    Ok((parse_payload(payload)?, total))
}

/// Writes `msg` as one frame and flushes.
pub fn write_frame<W: Write + ?Sized>(w: &mut W, msg: &Msg) -> Result<(), FrameError> {
    let frame = encode_frame(msg)?;
    w.write_all(&frame)?;
    w.flush()?;
    Ok(())
}

/// Reads exactly one frame from a blocking reader.
///
/// Never reads past the end of the frame, so it can be called again on the same reader for the
/// next one. A read timeout of the underlying stream surfaces as [`FrameError::Io`].
pub fn read_frame<R: Read + ?Sized>(r: &mut R) -> Result<Msg, FrameError> {
    let mut dec = FrameDecoder::new();
    loop {
        if let Some(msg) = dec.read_step(r, false)? {
            return Ok(msg);
        }
    }
}

/// An incremental frame reader for streams with read timeouts.
///
/// It keeps the bytes of a partly received frame between calls, so a read timeout never loses
/// stream synchronisation. It never reads past the end of the current frame, so at most
/// `HEADER_LEN + MAX_FRAME_BYTES` bytes are ever buffered, and the buffer grows only with bytes
/// that actually arrived.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        FrameDecoder::default()
    }

    /// Bytes of a partial frame held now.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Bytes still needed to complete the header, or the frame once the header is known.
    fn wants(&self) -> usize {
        if self.buf.len() < HEADER_LEN {
            return HEADER_LEN - self.buf.len();
        }
        let len = u32::from_be_bytes([self.buf[6], self.buf[7], self.buf[8], self.buf[9]]);
        let len = len.min(MAX_FRAME_BYTES) as usize;
        (HEADER_LEN + len).saturating_sub(self.buf.len())
    }

    /// Takes a complete frame out of the buffer, if one is there.
    fn take_frame(&mut self) -> Result<Option<Msg>, FrameError> {
        let Some(len) = check_header(&self.buf)? else {
            return Ok(None);
        };
        if self.buf.len() < HEADER_LEN + len {
            return Ok(None);
        }
        let msg = parse_payload(&self.buf[HEADER_LEN..HEADER_LEN + len]);
        // The decoder never reads past a frame, so nothing follows it in the buffer. Keep a
        // small buffer for the next frame; give a large one back.
        if self.buf.capacity() > READ_CHUNK {
            self.buf = Vec::new();
        } else {
            self.buf.clear();
        }
        msg.map(Some)
    }

    /// Reads once from `r` (at most up to the end of the current frame) and returns the frame
    /// if it is now complete.
    ///
    /// `Ok(None)`: the frame is still incomplete, or the read timed out or was interrupted
    /// (`WouldBlock`, `TimedOut`, `Interrupted`): call again. End of stream is
    /// [`FrameError::Closed`] at a frame boundary and [`FrameError::Truncated`] inside a frame.
    pub fn poll_read<R: Read + ?Sized>(&mut self, r: &mut R) -> Result<Option<Msg>, FrameError> {
        self.read_step(r, true)
    }

    fn read_step<R: Read + ?Sized>(
        &mut self,
        r: &mut R,
        tolerate_timeouts: bool,
    ) -> Result<Option<Msg>, FrameError> {
        if let Some(msg) = self.take_frame()? {
            return Ok(Some(msg));
        }
        let want = self.wants().clamp(1, READ_CHUNK);
        let old = self.buf.len();
        let mut chunk = [0u8; READ_CHUNK];
        let res = r.read(&mut chunk[..want]);
        if let Ok(n) = res {
            let got = n.min(want);
            // Grow by doubling, but never past the end of the current frame (the header's
            // length is checked against the cap before any payload byte is kept).
            let need = old + got;
            if need > self.buf.capacity() {
                let frame_end = old + self.wants();
                let target = (self.buf.capacity() * 2).clamp(need, frame_end.max(need));
                self.buf.reserve_exact(target - old);
            }
            self.buf.extend_from_slice(&chunk[..got]);
        }
        match res {
            Ok(0) if old == 0 => Err(FrameError::Closed),
            Ok(0) => Err(FrameError::Truncated {
                got: old,
                needed: old + self.wants(),
            }),
            Ok(_) => self.take_frame(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e)
                if tolerate_timeouts
                    && matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// A reader that hands out its bytes `step` at a time, with a would-block timeout before each
/// piece, as a slow peer's socket would: what the decoder's tests and fuzz targets read from.
#[derive(Debug)]
pub struct Dribble<'a> {
    data: &'a [u8],
    step: usize,
    tick: bool,
}

impl<'a> Dribble<'a> {
    /// `data`, `step` bytes at a time (at least one).
    pub fn new(data: &'a [u8], step: usize) -> Dribble<'a> {
        Dribble {
            data,
            step: step.max(1),
            tick: false,
        }
    }
}

impl Read for Dribble<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.tick = !self.tick;
        if self.tick {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.step.min(out.len()).min(self.data.len());
        out[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// The decoder's invariants on one arbitrary input, for the fuzz target (`fuzz/`) and the
/// stable-toolchain fuzz test: every entry point takes `data` without panicking and agrees on
/// whether it holds a frame, what decodes encodes again (unless JSON re-spelling passes the
/// cap), and the streaming decoder, fed a few bytes at a time, never buffers more than one
/// capped frame.
///
/// # Panics
///
/// When an invariant does not hold: that is what a fuzzer looks for.
#[doc(hidden)]
pub fn check_decoder_invariants(data: &[u8]) {
    let whole = decode_frame(data);
    if let Ok((msg, used)) = &whole {
        assert!(*used <= data.len());
        assert!(*used <= HEADER_LEN + MAX_FRAME_BYTES as usize);
        if let Err(e) = encode_frame(msg) {
            assert!(matches!(e, FrameError::Oversized { .. }), "{e}");
        }
    }
    let streamed = read_frame(&mut &data[..]);
    assert_eq!(whole.is_ok(), streamed.is_ok());
    let step = 1 + usize::from(data.first().copied().unwrap_or(0) % 17);
    let mut r = Dribble::new(data, step);
    let mut dec = FrameDecoder::new();
    for _ in 0..2 * data.len() + 4 {
        match dec.poll_read(&mut r) {
            Ok(None) => assert!(dec.buffered() <= HEADER_LEN + MAX_FRAME_BYTES as usize),
            Ok(Some(_)) | Err(_) => break,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::control::samples::every_variant;

    fn header(magic: &[u8; 4], version: u16, len: u32) -> Vec<u8> {
        let mut h = magic.to_vec();
        h.extend_from_slice(&version.to_be_bytes());
        h.extend_from_slice(&len.to_be_bytes());
        h
    }

    #[test]
    fn every_variant_round_trips_through_a_frame() {
        for msg in every_variant() {
            let frame = encode_frame(&msg).unwrap();
            assert_eq!(&frame[..4], b"RDBW");
            assert_eq!(
                u32::from_be_bytes(frame[6..10].try_into().unwrap()) as usize,
                frame.len() - HEADER_LEN
            );
            let (back, used) = decode_frame(&frame).unwrap();
            assert_eq!(back, msg);
            assert_eq!(used, frame.len());
            let back = read_frame(&mut &frame[..]).unwrap();
            assert_eq!(back, msg);
        }
    }

    #[test]
    fn consecutive_frames_are_read_one_at_a_time() {
        let all = every_variant();
        let mut stream = Vec::new();
        for m in &all {
            stream.extend(encode_frame(m).unwrap());
        }
        let mut r = &stream[..];
        for m in &all {
            assert_eq!(&read_frame(&mut r).unwrap(), m);
        }
        assert!(matches!(read_frame(&mut r), Err(FrameError::Closed)));
    }

    #[test]
    fn truncated_frames_are_named() {
        let frame = encode_frame(&Msg::Ready).unwrap();
        for cut in 1..frame.len() {
            let part = &frame[..cut];
            match read_frame(&mut &part[..]) {
                Err(FrameError::Truncated { got, needed }) => {
                    assert_eq!(got, cut);
                    let full = if cut < HEADER_LEN {
                        HEADER_LEN
                    } else {
                        frame.len()
                    };
                    assert_eq!(needed, full);
                }
                other => panic!("cut at {cut}: {other:?}"),
            }
            assert!(matches!(
                decode_frame(part),
                Err(FrameError::Truncated { .. })
            ));
        }
        assert!(matches!(read_frame(&mut &[][..]), Err(FrameError::Closed)));
    }

    #[test]
    fn oversized_frames_are_rejected_from_the_header_alone() {
        for len in [MAX_FRAME_BYTES + 1, u32::MAX] {
            let h = header(&MAGIC, PROTOCOL_VERSION, len);
            match read_frame(&mut &h[..]) {
                Err(FrameError::Oversized { len: l, cap }) => {
                    assert_eq!(l, u64::from(len));
                    assert_eq!(cap, MAX_FRAME_BYTES);
                }
                other => panic!("{other:?}"),
            }
            let err = decode_frame(&h).unwrap_err();
            assert!(err.to_string().contains(&len.to_string()), "{err}");
            assert!(err.to_string().contains("1048576"), "{err}");
        }
        // Exactly the cap passes the header check (and then needs the bytes).
        let h = header(&MAGIC, PROTOCOL_VERSION, MAX_FRAME_BYTES);
        assert!(matches!(
            decode_frame(&h),
            Err(FrameError::Truncated { needed, .. }) if needed == HEADER_LEN + MAX_FRAME_BYTES as usize
        ));
    }

    #[test]
    fn encoder_refuses_oversized_messages() {
        let msg = Msg::Error {
            message: "x".repeat(MAX_FRAME_BYTES as usize),
        };
        assert!(matches!(
            encode_frame(&msg),
            Err(FrameError::Oversized { .. })
        ));
    }

    #[test]
    fn wrong_magic_is_detected_from_the_first_byte() {
        // perftest's ib_write_bw exchanges ASCII hex like "0000:000123:...".
        let perftest = b"0000:000123:000456:00000000:fe80000000000000";
        match read_frame(&mut &perftest[..]) {
            Err(FrameError::BadMagic { found }) => assert_eq!(found, b"0000"),
            other => panic!("{other:?}"),
        }
        let err = decode_frame(b"GET / HTTP/1.1\r\n").unwrap_err();
        assert!(err.to_string().contains("got \"GET \""), "{err}");
        let err = decode_frame(b"RD\x00").unwrap_err();
        assert!(err.to_string().contains("52 44 00"), "{err}");
    }

    #[test]
    fn wrong_version_names_both() {
        let mut f = header(&MAGIC, 7, 2);
        f.extend_from_slice(b"{}");
        match decode_frame(&f) {
            Err(FrameError::BadVersion { theirs, ours }) => {
                assert_eq!(theirs, 7);
                assert_eq!(ours, PROTOCOL_VERSION);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_payloads_carry_the_serde_text() {
        for payload in [
            &b"{not json"[..],
            b"",
            b"{\"type\":\"no_such_message\"}",
            b"{\"type\":\"heartbeat\"}",
            b"[1,2,3]",
        ] {
            let mut f = header(&MAGIC, PROTOCOL_VERSION, payload.len() as u32);
            f.extend_from_slice(payload);
            match decode_frame(&f) {
                Err(FrameError::Malformed { detail }) => assert!(!detail.is_empty()),
                other => panic!("{payload:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn decoder_survives_timeouts_between_pieces() {
        let all = every_variant();
        let mut stream = Vec::new();
        for m in &all {
            stream.extend(encode_frame(m).unwrap());
        }
        for step in [1, 3, 7, 64, 4096] {
            let mut r = Dribble::new(&stream, step);
            let mut dec = FrameDecoder::new();
            let mut got = Vec::new();
            loop {
                match dec.poll_read(&mut r) {
                    Ok(Some(m)) => got.push(m),
                    Ok(None) => {}
                    Err(FrameError::Closed) => break,
                    Err(e) => panic!("step {step}: {e}"),
                }
            }
            assert_eq!(got, all);
            assert_eq!(dec.buffered(), 0);
        }
    }

    /// xorshift64*: deterministic pseudo-random numbers without a dependency.
    pub(crate) struct Rng(u64);

    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    /// One fuzz input: random bytes, a valid header over random bytes, or a mutated real frame.
    pub(crate) fn fuzz_input(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
        match rng.below(4) {
            0 => (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
            1 => {
                let len = match rng.below(3) {
                    0 => rng.next() as u32,
                    1 => MAX_FRAME_BYTES - rng.below(2) as u32 + rng.below(2) as u32,
                    _ => rng.below(80) as u32,
                };
                let mut f = header(&MAGIC, PROTOCOL_VERSION, len);
                f.extend((0..rng.below(96)).map(|_| rng.next() as u8));
                f
            }
            _ => {
                let mut f = seeds[rng.below(seeds.len())].clone();
                for _ in 0..=rng.below(4) {
                    match rng.below(4) {
                        0 => {
                            let i = rng.below(f.len());
                            f[i] = rng.next() as u8;
                        }
                        1 => {
                            let i = rng.below(f.len());
                            f.truncate(i);
                        }
                        2 => {
                            let i = rng.below(f.len() + 1);
                            f.insert(i, b"{}[]\":,0\\e-"[rng.below(11)]);
                        }
                        _ => {
                            let i = rng.below(f.len());
                            f[i] ^= 1 << rng.below(8);
                        }
                    }
                    if f.is_empty() {
                        break;
                    }
                }
                f
            }
        }
    }

    /// Stand-in for the cargo-fuzz target on stable: 200k inputs through every decoding entry
    /// point; none may panic, and whatever decodes must re-encode.
    #[test]
    fn decoder_never_panics_on_200k_pseudo_random_inputs() {
        let seeds: Vec<Vec<u8>> = every_variant()
            .iter()
            .map(|m| encode_frame(m).unwrap())
            .collect();
        let mut rng = Rng(0x5eed_cafe_f00d_d00d);
        let mut decoded = 0usize;
        for _ in 0..200_000 {
            let input = fuzz_input(&mut rng, &seeds);
            let a = decode_frame(&input);
            let b = read_frame(&mut &input[..]);
            match (&a, &b) {
                (Ok((ma, used)), Ok(mb)) => {
                    assert!(*used <= input.len());
                    assert_eq!(ma, mb);
                    assert!(encode_frame(ma).is_ok());
                    decoded += 1;
                }
                (Err(_), Err(_)) => {}
                _ => panic!("decode_frame and read_frame disagree on {input:?}: {a:?} vs {b:?}"),
            }
            let step = 1 + rng.below(16);
            let mut r = Dribble::new(&input, step);
            let mut dec = FrameDecoder::new();
            for _ in 0..input.len() * 2 + 4 {
                match dec.poll_read(&mut r) {
                    Ok(None) => {}
                    Ok(Some(_)) | Err(_) => break,
                }
                assert!(dec.buffered() <= HEADER_LEN + MAX_FRAME_BYTES as usize);
            }
        }
        // The mutator keeps a fair share of inputs valid, so the success path is exercised too.
        assert!(decoded > 1_000, "only {decoded} inputs decoded");
    }
}
