//! What the bounded fuzz tests share (`results/tests/fuzz_readers.rs`,
//! `bench-core/tests/fuzz_control.rs`, which includes this file by path): a small seeded
//! generator, and each test's time and seed from `RAILBENCH_FUZZ_SECS` and `RAILBENCH_FUZZ_SEED`.
#![allow(dead_code)]

use std::time::Duration;

/// The seeded generator of `results::stats`, with the edges fuzzing wants.
pub struct Rng(pub results::stats::Rng);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn byte(&mut self) -> u8 {
        self.next() as u8
    }
    /// A u64 that is often at an edge (0, 1, a power of two and its neighbours, the top).
    pub fn edgy_u64(&mut self) -> u64 {
        match self.below(6) {
            0 => 0,
            1 => u64::MAX - self.below(3),
            2 => (1u64 << self.below(64))
                .wrapping_add(self.below(3))
                .wrapping_sub(1),
            3 => self.below(1 << 31),
            _ => self.next(),
        }
    }
    /// An f64 that is often NaN, infinite, negative, tiny or huge.
    pub fn edgy_f64(&mut self) -> f64 {
        match self.below(8) {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            3 => -(self.below(1000) as f64),
            4 => 1e300,
            5 => f64::from_bits(self.next()),
            _ => self.below(100_000) as f64 / 100.0,
        }
    }
}

/// How long the test named `name` runs (`RAILBENCH_FUZZ_SECS`, else `default_secs`), and its
/// generator (seeded by `RAILBENCH_FUZZ_SEED`, else the clock); both are printed, so that a
/// failure can be replayed.
pub fn budget(name: &str, default_secs: f64) -> (Duration, Rng) {
    let secs = std::env::var("RAILBENCH_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(default_secs);
    let seed = std::env::var("RAILBENCH_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
        | 1;
    eprintln!("{name}: seed {seed} (RAILBENCH_FUZZ_SEED), {secs} s (RAILBENCH_FUZZ_SECS)");
    (
        Duration::from_secs_f64(secs),
        Rng(results::stats::Rng::new(seed)),
    )
}
