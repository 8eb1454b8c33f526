//! Arbitrary bytes into every entry point of the control frame decoder: nothing may panic,
//! the decoder may never buffer more than one capped frame, and whatever decodes must encode
//! again ([`bench_core::control::check_decoder_invariants`], which the stable fuzz test runs too).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bench_core::control::check_decoder_invariants(data);
});
