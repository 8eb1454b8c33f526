//! Arbitrary bytes into every entry point of the control frame decoder: nothing may panic,
//! the decoder may never buffer more than one capped frame, and whatever decodes must encode
//! again.
#![no_main]


use bench_core::control::{
    Dribble,
    decode_frame, encode_frame, read_frame, FrameDecoder, HEADER_LEN, MAX_FRAME_BYTES,
};
use libfuzzer_sys::fuzz_target;

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
    let mut r = Dribble::new(data, step);
    let mut dec = FrameDecoder::new();
    for _ in 0..2 * data.len() + 4 {
        match dec.poll_read(&mut r) {
            Ok(None) => assert!(dec.buffered() <= HEADER_LEN + MAX_FRAME_BYTES as usize),
            Ok(Some(_)) | Err(_) => break,
        }
    }
});
