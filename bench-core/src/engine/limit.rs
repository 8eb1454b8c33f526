//! `--rate_limit`: the software rate limiter, a token bucket taken from at post time.

/// Tokens (writes) that fill at `rate` per second up to `burst`; a write may be posted only
/// with a token. It starts empty: a sender that posts whenever it may sends one write per
/// token, evenly at `rate`, and a burst of up to `burst` writes goes out only after the sender
/// could not post for a while (a full send queue). Starting full would put a first burst of
/// `burst` writes on the link, which at a low rate lasts longer than a warm-up (128 writes of
/// 64 KiB at 10 Mb/s: 6.7 s) and lands in the measured window: in the lab a third of the rail's
/// rate measured 128% of the limit that way. Time is in seconds on the caller's clock.
#[derive(Debug, Clone, Copy)]
pub(super) struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: f64,
}

impl TokenBucket {
    /// An empty bucket of `burst` writes (at least 1), filling at `rate` writes per second.
    pub(super) fn new(rate: f64, burst: u32, now: f64) -> TokenBucket {
        TokenBucket {
            rate: rate.max(0.0),
            burst: f64::from(burst.max(1)),
            tokens: 0.0,
            last: now,
        }
    }

    /// Whole writes that may be posted at `now`.
    pub(super) fn available(&mut self, now: f64) -> u64 {
        if now > self.last {
            // The bucket holds `burst` whole tokens and the fraction of the next one: a poll
            // that comes late loses no credit (with bursts of 1 and a poll every 100 us at
            // 100 writes/s, capping at `burst` lost about 1% of the rate).
            let cap = self.burst + 1.0 - 1e-9;
            self.tokens = (self.tokens + (now - self.last) * self.rate).min(cap);
            self.last = now;
        }
        self.tokens.max(0.0).floor() as u64
    }

    /// `n` writes were posted.
    pub(super) fn take(&mut self, n: u64) {
        self.tokens -= n as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Posts as fast as the bucket allows, `step` seconds apart, for `secs`: writes per second.
    fn rate_of(rate: f64, burst: u32, step: f64, secs: f64) -> f64 {
        let mut b = TokenBucket::new(rate, burst, 0.0);
        let mut sent = 0u64;
        let mut t = 0.0;
        while t < secs {
            let n = b.available(t);
            b.take(n);
            sent += n;
            t += step;
        }
        sent as f64 / secs
    }

    #[test]
    fn the_long_run_rate_is_the_limit() {
        // 1907 writes/s (1 Gb/s of 64 KiB), bursts of 128, polled every 10 us for 100 s.
        let r = rate_of(1907.35, 128, 1e-5, 100.0);
        assert!((r / 1907.35 - 1.0).abs() < 0.001, "{r}");
        // Polled coarsely (every 3 ms, the lab's idle poller), still the limit.
        let r = rate_of(5000.0, 16, 0.003, 50.0);
        assert!((r / 5000.0 - 1.0).abs() < 0.001, "{r}");
        // A burst of 1: one write per token.
        let r = rate_of(100.0, 1, 1e-4, 20.0);
        assert!((r / 100.0 - 1.0).abs() < 0.001, "{r}");
    }

    #[test]
    fn bursts_are_at_most_the_bucket() {
        let mut b = TokenBucket::new(1000.0, 8, 0.0);
        // Empty at first: no burst on the link before the rate is reached.
        assert_eq!(b.available(0.0), 0);
        assert_eq!(b.available(0.008), 8);
        b.take(8);
        assert_eq!(b.available(0.008), 0);
        // 2.5 ms refill 2.5 tokens: 2 whole ones.
        assert_eq!(b.available(0.0105), 2);
        // A long pause refills to the bucket, not beyond.
        assert_eq!(b.available(10.0), 8);
        // A clock that goes backwards takes nothing away.
        assert_eq!(b.available(5.0), 8);
    }
}
