//! The phases of a test and the deadline of each ([`PhaseTimeouts`]), the measured window's
//! included ([`measure_timeout`]).

use std::fmt;
use std::time::Duration;

use wire::params::{TestLength, TestParams};

/// The phases of a test, each with its own timeout (see [`PhaseTimeouts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Establishing the TCP connection (client only).
    Connect,
    /// `Hello` and its answer (`Accept`, `Busy`, `Reject`).
    Handshake,
    /// Both sides' `Endpoints`.
    Exchange,
    /// Both sides' `Ready` (QPs in RTS).
    Ready,
    /// The measured window, heartbeats flowing.
    Measure,
    /// `Done` both ways.
    Results,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Connect => "connect",
            Phase::Handshake => "handshake",
            Phase::Exchange => "endpoint exchange",
            Phase::Ready => "ready",
            Phase::Measure => "measurement",
            Phase::Results => "results",
        })
    }
}

/// How long each phase may wait for the peer.
///
/// Each `ControlChannel::recv` (or `expect_*`) call gets the whole phase timeout as one
/// deadline: heartbeats or a trickle of bytes do not extend it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseTimeouts {
    /// Connection attempts in [`ControlChannel::connect`] (default 10 s).
    pub connect: Duration,
    /// Waiting for `Hello` or its answer (default 10 s; the server opens its device before
    /// answering).
    pub handshake: Duration,
    /// Waiting for the peer's `Endpoints` (default 30 s; the peer creates QPs and registers
    /// its buffer first).
    pub exchange: Duration,
    /// Waiting for the peer's `Ready` (default 30 s).
    pub ready: Duration,
    /// The measured window plus margin: how long the server waits for the client's `Done`
    /// (default 60 s; set it with [`PhaseTimeouts::with_measure_for`]).
    pub measure: Duration,
    /// Waiting for the peer's `Done` after this side's window ended (default 30 s).
    pub results: Duration,
}

impl Default for PhaseTimeouts {
    fn default() -> Self {
        PhaseTimeouts {
            connect: Duration::from_secs(10),
            handshake: Duration::from_secs(10),
            exchange: Duration::from_secs(30),
            ready: Duration::from_secs(30),
            measure: Duration::from_secs(60),
            results: Duration::from_secs(30),
        }
    }
}

impl PhaseTimeouts {
    /// The timeout of `phase`.
    pub fn get(&self, phase: Phase) -> Duration {
        match phase {
            Phase::Connect => self.connect,
            Phase::Handshake => self.handshake,
            Phase::Exchange => self.exchange,
            Phase::Ready => self.ready,
            Phase::Measure => self.measure,
            Phase::Results => self.results,
        }
    }

    /// The same timeouts with every phase set to `d` (handy in tests).
    pub fn uniform(d: Duration) -> Self {
        PhaseTimeouts {
            connect: d,
            handshake: d,
            exchange: d,
            ready: d,
            measure: d,
            results: d,
        }
    }

    /// The same timeouts with the measure phase sized for `params` by [`measure_timeout`].
    pub fn with_measure_for(self, params: &TestParams) -> Self {
        PhaseTimeouts {
            measure: measure_timeout(params),
            ..self
        }
    }
}

/// The measure timeout of a `--run_infinitely` test: ten years, as good as none (the
/// heartbeats still end it within seconds of a peer's death).
pub const ENDLESS_MEASURE: Duration = Duration::from_secs(10 * 365 * 86_400);

/// A generous bound on one test's measured window, plus a 30 s margin.
///
/// Duration tests: sizes x (warm-up + duration + cool-down). Iteration tests: the bytes to move
/// at a floor of 1 Gb/s (an estimate only: the heartbeats, not this bound, detect a dead peer).
/// A `--run_infinitely` test has no end: [`ENDLESS_MEASURE`].
pub fn measure_timeout(params: &TestParams) -> Duration {
    const MARGIN_S: f64 = 30.0;
    if params.run_infinitely {
        return ENDLESS_MEASURE;
    }
    let sizes = params.sizes.list();
    let secs = match params.length {
        TestLength::Duration {
            duration_s,
            warmup_s,
            cooldown_s,
        } => sizes.len() as f64 * (duration_s + warmup_s + cooldown_s).max(0.0),
        TestLength::Iterations { iterations } => {
            let dirs = if params.bidirectional { 2.0 } else { 1.0 };
            let bytes: f64 = sizes.iter().map(|s| *s as f64).sum::<f64>()
                * iterations as f64
                * f64::from(params.qps.max(1))
                * dirs;
            // A latency test waits a round trip per exchange: allow 1 ms each.
            let trips = if params.latency {
                iterations as f64 * sizes.len() as f64 * 1e-3
            } else {
                0.0
            };
            bytes * 8.0 / 1e9 + trips
        }
    };
    // Clamp to a day so that absurd inputs cannot overflow Duration.
    Duration::from_secs_f64((secs + MARGIN_S).clamp(MARGIN_S, 86_400.0))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::control::samples::params;
    use wire::params::Sizes;

    #[test]
    fn measure_timeout_covers_every_size_of_a_sweep() {
        let p = params(); // 23 sizes x (1 + 5 + 0.5) s
        let t = measure_timeout(&p);
        assert_eq!(t, Duration::from_secs_f64(23.0 * 6.5 + 30.0));
        let mut one = p.clone();
        one.sizes = Sizes::One {
            msg_size_bytes: 65536,
        };
        one.length = TestLength::Iterations { iterations: 5000 };
        // 5000 x 64 KiB x 4 QPs at 1 Gb/s, plus the margin.
        let t = measure_timeout(&one);
        assert_eq!(
            t,
            Duration::from_secs_f64(30.0 + 5000.0 * 65536.0 * 4.0 * 8.0 / 1e9)
        );
        let mut huge = one.clone();
        huge.length = TestLength::Iterations {
            iterations: u64::MAX,
        };
        assert_eq!(measure_timeout(&huge), Duration::from_secs(86_400));
        let endless = TestParams {
            run_infinitely: true,
            ..p.clone()
        };
        assert_eq!(measure_timeout(&endless), ENDLESS_MEASURE);
        let t = PhaseTimeouts::default().with_measure_for(&p);
        assert_eq!(t.get(Phase::Measure), measure_timeout(&p));
        assert_eq!(t.get(Phase::Handshake), Duration::from_secs(10));
    }
}
