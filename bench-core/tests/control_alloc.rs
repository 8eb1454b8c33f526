//! The frame decoder's memory use follows the bytes that actually arrived, never the length a
//! peer announces, and no single allocation exceeds one capped frame.
//!
//! Measured with a counting global allocator, which is why this is its own test binary, with a
//! single test so that nothing else allocates meanwhile.
// `GlobalAlloc` is an unsafe trait. This test-only wrapper counts bytes and forwards every call
// unchanged to the system allocator; the library itself stays free of unsafe code.
#![allow(unsafe_code)]
#![allow(clippy::unwrap_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use bench_core::control::{
    decode_frame, encode_frame, read_frame, Dribble, FrameDecoder, FrameError, Msg, HEADER_LEN,
    MAGIC, MAX_FRAME_BYTES, PROTOCOL_VERSION,
};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

fn grew(size: usize) {
    let live = LIVE.fetch_add(size, Relaxed) + size;
    PEAK.fetch_max(live, Relaxed);
    LARGEST.fetch_max(size, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on to the system allocator unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with this layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; the new size is the caller's, passed on unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f`; returns its result, the peak of live heap bytes above the level before it, and
/// the largest single allocation it made.
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    LARGEST.store(0, Relaxed);
    let out = f();
    (
        out,
        PEAK.load(Relaxed).saturating_sub(base),
        LARGEST.load(Relaxed),
    )
}

fn header(len: u32) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    h.extend_from_slice(&len.to_be_bytes());
    h
}

#[test]
fn decoder_memory_follows_arrived_bytes_not_announced_length() {
    let frame_max = HEADER_LEN + MAX_FRAME_BYTES as usize;

    // 1. A header announcing 4 GiB: rejected from the header, next to nothing allocated.
    let h = header(u32::MAX);
    let (r, peak, largest) = measure(|| read_frame(&mut &h[..]));
    assert!(matches!(r, Err(FrameError::Oversized { .. })), "{r:?}");
    assert!(peak < 1024, "peak {peak}");
    assert!(largest < 1024, "largest {largest}");
    let (r, peak, _) = measure(|| decode_frame(&h));
    assert!(matches!(r, Err(FrameError::Oversized { .. })), "{r:?}");
    assert!(peak < 1024, "peak {peak}");

    // 2. A header announcing the full cap, then 100 bytes, then the end: the buffer holds what
    //    came, not what was promised.
    let mut lie = header(MAX_FRAME_BYTES);
    lie.extend_from_slice(&[b' '; 100]);
    let (r, peak, largest) = measure(|| read_frame(&mut &lie[..]));
    assert!(
        matches!(r, Err(FrameError::Truncated { got: 110, .. })),
        "{r:?}"
    );
    assert!(peak < 4096, "peak {peak}");
    assert!(largest < 4096, "largest {largest}");

    // Same, through the incremental decoder fed five bytes at a time.
    let (_, peak, _) = measure(|| {
        let mut dec = FrameDecoder::new();
        let mut r = Dribble::new(&lie, 5);
        while let Ok(None) = dec.poll_read(&mut r) {}
    });
    assert!(peak < 4096, "peak {peak}");

    // 3. 300 KiB of a promised 1 MiB: at most about twice what arrived.
    let mut part = header(MAX_FRAME_BYTES);
    part.extend(std::iter::repeat_n(b' ', 300 << 10));
    let (r, peak, largest) = measure(|| read_frame(&mut &part[..]));
    assert!(matches!(r, Err(FrameError::Truncated { .. })), "{r:?}");
    assert!(peak <= 2 * part.len() + 8192, "peak {peak}");
    assert!(largest <= frame_max, "largest {largest}");

    // 4. A real frame at the cap decodes; no single allocation exceeds one frame, and the
    //    whole decode is the frame buffer plus the decoded message (about 2 frames).
    let overhead = encode_frame(&Msg::Error {
        message: String::new(),
    })
    .unwrap()
    .len();
    let big = encode_frame(&Msg::Error {
        message: "x".repeat(frame_max - overhead),
    })
    .unwrap();
    assert_eq!(big.len(), frame_max);
    let (r, peak, largest) = measure(|| read_frame(&mut &big[..]).map(|m| m.kind()));
    assert_eq!(r.unwrap(), "error");
    assert!(largest <= frame_max, "largest {largest}");
    assert!(peak <= 2 * frame_max + 65536, "peak {peak}");

    // 5. Pseudo-random headers and bytes: no input makes any allocation larger than a frame.
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (_, _, largest) = measure(|| {
        for _ in 0..20_000 {
            let mut input = header(next() as u32 % (2 * MAX_FRAME_BYTES));
            let n = (next() % 64) as usize;
            input.extend((0..n).map(|_| next() as u8));
            let _ = read_frame(&mut &input[..]);
            let _ = decode_frame(&input);
        }
    });
    assert!(largest <= frame_max, "largest {largest}");
}
