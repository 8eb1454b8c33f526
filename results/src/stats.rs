//! Small statistics shared by the reports and the benchmarks: the median, and a seeded
//! generator for resampling and for random pairings that must repeat from their seed.

/// The median; `None` for no values.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// xorshift64*: small, seeded, reproducible (not for secrets).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (any value; 0 is made odd).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_even_and_no_values() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn the_same_seed_the_same_numbers_all_below_n() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        let xs: Vec<usize> = (0..100).map(|_| a.below(7)).collect();
        assert_eq!(xs, (0..100).map(|_| b.below(7)).collect::<Vec<_>>());
        assert!(xs.iter().all(|x| *x < 7));
        assert!((0..7).all(|k| xs.contains(&k)), "every value comes");
        assert_eq!(Rng::new(1).below(0), 0);
    }
}
