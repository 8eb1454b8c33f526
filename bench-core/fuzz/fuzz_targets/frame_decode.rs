//! Arbitrary bytes into every entry point of the control frame decoder: nothing may panic,
//! the decoder may never buffer more than one capped frame, and whatever decodes must encode
//! again.
#![no_main]

use std::io::{self, Read};

use bench_core::control::{
    decode_frame, encode_frame, read_frame, FrameDecoder, HEADER_LEN, MAX_FRAME_BYTES,
};
use libfuzzer_sys::fuzz_target;

/// Hands out the input in pieces whose sizes come from the input, with timeouts between them.
struct Pieces<'a> {
    data: &'a [u8],
    step: usize,
    tick: bool,
}

impl Read for Pieces<'_> {
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

fuzz_target!(|data: &[u8]| {
    let whole = decode_frame(data);
    if let Ok((msg, used)) = &whole {
        assert!(*used <= data.len());
        assert!(*used <= HEADER_LEN + MAX_FRAME_BYTES as usize);
        // Re-encoding may exceed the cap only by JSON re-spelling; it must not fail otherwise.
        if let Err(e) = encode_frame(msg) {
            assert!(
                matches!(e, bench_core::control::FrameError::Oversized { .. }),
                "{e}"
            );
        }
    }
    let streamed = read_frame(&mut &data[..]);
    assert_eq!(whole.is_ok(), streamed.is_ok());

    let step = 1 + usize::from(data.first().copied().unwrap_or(0) % 17);
    let mut r = Pieces {
        data,
        step,
        tick: false,
    };
    let mut dec = FrameDecoder::new();
    for _ in 0..2 * data.len() + 4 {
        match dec.poll_read(&mut r) {
            Ok(None) => assert!(dec.buffered() <= HEADER_LEN + MAX_FRAME_BYTES as usize),
            Ok(Some(_)) | Err(_) => break,
        }
    }
});
