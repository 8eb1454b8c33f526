//! perftest's own connection exchange, so that rdmabw meets a stock `ib_write_bw` or
//! `ib_write_lat` on the other end, in either role.
//!
//! perftest has no framing and no deadlines: each side writes fixed-size messages in a fixed
//! order and blocks on the peer's. [`wire`] has the messages; [`PerftestConn`] carries them
//! with a deadline on every step, so a perftest peer that dies, goes silent or runs other
//! flags ends the test with an error that says which step it was, never a hang.
//!
//! # Telling the peers apart
//!
//! Both of rdmabw's ends open with perftest's own 16-byte version message. Behind its NUL an
//! rdmabw writes [`wire::RDMABW_MARK`] and its control protocol version: perftest reads the
//! version up to the NUL and ignores the rest, an rdmabw server sees the mark, answers with
//! its own marked version, and both go on in rdmabw's framed protocol. A version without the
//! mark is perftest: the rest of the exchange is perftest's. Nothing is probed and retried, so
//! a perftest server, which takes one connection and exits on what it cannot read, is never
//! broken by the detection.
//!
//! # The exchange (`ib_write_bw`, 5.70 to 6.29, without rdma_cm)
//!
//! ```text
//!  client                                            server
//!    |--- version (16) ---->|<--- version (16) -------|   client writes first, always
//!    |--- page size (4) --->|<--- page size (4) ------|
//!    |--- cache line (4) -->|<--- cache line (4) -----|
//!    |--- MTU (2) --------->|<--- MTU (2) ------------|
//!    |--- negotiation (320) ... only where a 6.28 side negotiates (see wire)
//!    |--- key (108) x q --->|<--- key (108) x q ------|   (lat: one extra exchange first)
//!    |           both: QPs to RTR / RTS              |
//!    |--- key (108) x q --->|<--- key (108) x q ------|
//!    |--- key (108) ------->|<--- key (108) ----------|   after RTR
//!    |--- key (108) sync, -b only                     |
//!    |          the writes (lat: the ping-pong, and nothing after it)
//!    |--- key (108) ------->|<--- key (108) ----------|   client done (one way only)
//!    |--- 5 x 8 results --->|<--- 5 x 8 --------------|   client's figures (-b: both)
//!    |--- key (108) ------->|<--- key (108) ----------|   close
//! ```

pub mod wire;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use wire::{BwReportMsg, KeyMsg, Negotiation, PeerVersion, ReportUnit, WireError};

use ::wire::params::{Sizes, TestLength, TestParams};

/// How long perftest's `ib_write_bw` sleeps right after connecting, on both sides, before its
/// version message: a server that expects a client's first byte at once must wait longer.
pub const CONNECT_PAUSE: Duration = Duration::from_secs(1);

/// The longest one read waits before looking at the stop flag again.
const SLICE: Duration = Duration::from_millis(250);

/// A step of perftest's exchange, named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The version messages.
    Version,
    /// Page and cache line sizes.
    SysData,
    /// The MTU.
    Mtu,
    /// 6.28's parameter negotiation.
    Negotiation,
    /// The QPs' key messages before the QPs are connected.
    Keys,
    /// The key messages after the QPs are connected.
    KeysAgain,
    /// The exchange after RTR.
    AfterRtr,
    /// The sync before a bidirectional run.
    Sync,
    /// The measured writes (the server waits for the client's "done").
    Measure,
    /// The client's results.
    Results,
    /// The closing exchange.
    Close,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Version => "version exchange",
            Step::SysData => "page and cache line size exchange",
            Step::Mtu => "MTU exchange",
            Step::Negotiation => "parameter negotiation",
            Step::Keys => "QP key exchange",
            Step::KeysAgain => "second QP key exchange",
            Step::AfterRtr => "exchange after RTR",
            Step::Sync => "sync before the bidirectional run",
            Step::Measure => "measurement",
            Step::Results => "results exchange",
            Step::Close => "closing exchange",
        })
    }
}

/// Why a test with a perftest peer did not complete.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PerftestError {
    /// The peer sent nothing at a step within its deadline.
    #[error(
        "the perftest peer at {peer} sent nothing for {after:.1?} at the {step}{}",
        hint_for(*.step, false)
    )]
    Timeout {
        /// The peer.
        peer: SocketAddr,
        /// Where.
        step: Step,
        /// The step's deadline.
        after: Duration,
    },
    /// The peer closed the connection.
    #[error(
        "the perftest peer at {peer} closed the connection at the {step}{}{}",
        if *.needed > 0 { format!(" (after {got} of {needed} bytes)") } else { String::new() },
        hint_for(*.step, true)
    )]
    Closed {
        /// The peer.
        peer: SocketAddr,
        /// Where.
        step: Step,
        /// Bytes of the message that came.
        got: usize,
        /// Bytes the message has.
        needed: usize,
    },
    /// A socket error.
    #[error("the connection to the perftest peer at {peer} failed at the {step}: {message}")]
    Io {
        /// The peer.
        peer: SocketAddr,
        /// Where.
        step: Step,
        /// The error.
        message: String,
    },
    /// A message that is not what the step allows.
    #[error("the perftest peer at {peer} sent a bad {error} at the {step}")]
    Wire {
        /// The peer.
        peer: SocketAddr,
        /// Where.
        step: Step,
        /// What is wrong.
        error: WireError,
    },
    /// The peer counted writes but sent 0 for every figure ([`BwReportMsg::clockless`]).
    #[error(
        "the perftest peer at {peer} reported 0 Gb/s for {iters} writes of {size} B: its clock \
         calibration failed (perftest prints \"Correlation coefficient r^2 < 0.9\" when its host \
         is too busy to time its samples), so it has no figure for this test; run it again when \
         that host is quieter"
    )]
    NoFigures {
        /// The peer.
        peer: SocketAddr,
        /// The writes it counted.
        iters: u64,
        /// Bytes per write.
        size: u64,
    },
    /// A version perftest itself refuses.
    #[error(
        "the peer at {peer} is perftest {version}, older than 5.70, which perftest itself no \
         longer talks to: upgrade perftest there"
    )]
    TooOld {
        /// The peer.
        peer: SocketAddr,
        /// Its version text.
        version: String,
    },
    /// The two ends run different tests.
    #[error(
        "the perftest {version} peer at {peer} runs another test: {}; give both ends the same \
         flags (perftest takes them from each end's command line)",
        .items.iter().map(|(n, o, t)| format!("{n} is {o} here and {t} there")).collect::<Vec<_>>().join(", ")
    )]
    Mismatch {
        /// The peer.
        peer: SocketAddr,
        /// Its version.
        version: String,
        /// Each differing parameter: name, this side's value, the peer's.
        items: Vec<(String, String, String)>,
    },
    /// A flag whose test perftest's exchange cannot carry.
    #[error("{flag} cannot be used with a perftest peer: {why}")]
    Unsupported {
        /// The flag.
        flag: &'static str,
        /// Why, and what to do.
        why: String,
    },
    /// SIGINT/SIGTERM during a step.
    #[error("interrupted at the {step}")]
    Interrupted {
        /// Where.
        step: Step,
    },
}

fn hint_for(step: Step, closed: bool) -> &'static str {
    match (step, closed) {
        (Step::Keys | Step::KeysAgain | Step::AfterRtr, _) => {
            " (perftest before 6.28 cannot tell its peer that its flags differ: a -q that \
             differs between the ends stops the exchange here; give both the same flags)"
        }
        (Step::Measure, true) => {
            ": its process died or was killed, or its test failed (its own output says which)"
        }
        (Step::Measure, false) => " (its test failed or ran longer than this side's bound)",
        (Step::Version | Step::SysData | Step::Mtu | Step::Negotiation, true) => {
            ": perftest exits when the peer's flags or version do not suit it (its own output \
             says why)"
        }
        _ => "",
    }
}

impl PerftestError {
    /// True for mistakes in what was asked (exit 2): flags that differ or cannot be carried,
    /// a peer too old, a peer whose first message is not perftest's.
    pub fn is_setup(&self) -> bool {
        match self {
            PerftestError::TooOld { .. }
            | PerftestError::Mismatch { .. }
            | PerftestError::Unsupported { .. } => true,
            PerftestError::Wire { step, .. } => *step == Step::Version,
            _ => false,
        }
    }
}

/// Which end of perftest's exchange this side is: the client writes first at every step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Connected out; writes, then reads.
    Client,
    /// Accepted; reads, then writes.
    Server,
}

/// The TCP connection of a test with a perftest peer: exact-size messages, a deadline on
/// each, and the caller's stop flag looked at while waiting.
#[derive(Debug)]
pub struct PerftestConn {
    stream: TcpStream,
    peer: SocketAddr,
    end: End,
    step_timeout: Duration,
}

impl PerftestConn {
    /// Wraps a connected stream; `step_timeout` bounds each message of the set-up steps.
    pub fn new(stream: TcpStream, end: End, step_timeout: Duration) -> io::Result<PerftestConn> {
        let peer = stream.peer_addr()?;
        stream.set_nodelay(true)?;
        Ok(PerftestConn {
            stream,
            peer,
            end,
            step_timeout,
        })
    }

    /// The peer's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// This side's end.
    pub fn end(&self) -> End {
        self.end
    }

    /// One exchange as perftest's `ctx_xchg_data`: the client writes `mine` then reads
    /// `theirs_len` bytes, the server the other way round.
    pub fn exchange(
        &mut self,
        step: Step,
        mine: &[u8],
        theirs_len: usize,
        stop: &AtomicBool,
    ) -> Result<Vec<u8>, PerftestError> {
        let deadline = Instant::now() + self.step_timeout;
        match self.end {
            End::Client => {
                self.write(step, mine)?;
                self.read_until(step, theirs_len, deadline, stop)
            }
            End::Server => {
                let theirs = self.read_until(step, theirs_len, deadline, stop)?;
                self.write(step, mine)?;
                Ok(theirs)
            }
        }
    }

    /// Writes one message whole (within the step timeout, at most 10 s).
    pub fn write(&mut self, step: Step, msg: &[u8]) -> Result<(), PerftestError> {
        let t = self.step_timeout.min(Duration::from_secs(10));
        self.stream
            .set_write_timeout(Some(t.max(Duration::from_millis(1))))
            .map_err(|e| self.io(step, &e))?;
        self.stream.write_all(msg).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => PerftestError::Timeout {
                peer: self.peer,
                step,
                after: t,
            },
            io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted => PerftestError::Closed {
                peer: self.peer,
                step,
                got: 0,
                needed: 0,
            },
            _ => self.io(step, &e),
        })
    }

    /// Reads exactly `n` bytes by `deadline`, looking at `stop` at least every 250 ms.
    pub fn read_until(
        &mut self,
        step: Step,
        n: usize,
        deadline: Instant,
        stop: &AtomicBool,
    ) -> Result<Vec<u8>, PerftestError> {
        self.read_by(step, n, deadline, SLICE, stop)
    }

    /// Reads exactly `n` bytes by `deadline` without waking before it (perftest's own server
    /// blocks in one `read` while the client writes; under emulation every wake-up of the
    /// passive side costs the transfer). `stop` is looked at only when a read returns early: a
    /// signal interrupts the read (the socket has a timeout, so it is not restarted), and
    /// anything else that must end the wait shuts the read side of a clone of the socket
    /// ([`PerftestConn::try_clone_stream`]), which ends it as [`PerftestError::Closed`]: the
    /// caller looks at its own flags before it believes that.
    pub fn read_until_woken(
        &mut self,
        step: Step,
        n: usize,
        deadline: Instant,
        stop: &AtomicBool,
    ) -> Result<Vec<u8>, PerftestError> {
        self.read_by(step, n, deadline, Duration::MAX, stop)
    }

    /// Reads exactly `n` bytes by `deadline`, each read waiting at most `slice`.
    fn read_by(
        &mut self,
        step: Step,
        n: usize,
        deadline: Instant,
        slice: Duration,
        stop: &AtomicBool,
    ) -> Result<Vec<u8>, PerftestError> {
        let start = Instant::now();
        let mut buf = vec![0u8; n];
        let mut got = 0;
        while got < n {
            if stop.load(Ordering::Relaxed) {
                return Err(PerftestError::Interrupted { step });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(PerftestError::Timeout {
                    peer: self.peer,
                    step,
                    after: deadline.saturating_duration_since(start),
                });
            }
            self.stream
                .set_read_timeout(Some(left.min(slice).max(Duration::from_millis(1))))
                .map_err(|e| self.io(step, &e))?;
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(PerftestError::Closed {
                        peer: self.peer,
                        step,
                        got,
                        needed: n,
                    })
                }
                Ok(k) => got += k,
                Err(e) if crate::control::is_wait(&e) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    return Err(PerftestError::Closed {
                        peer: self.peer,
                        step,
                        got,
                        needed: n,
                    })
                }
                Err(e) => return Err(self.io(step, &e)),
            }
        }
        Ok(buf)
    }

    /// A clone of the socket, for a thread that watches for the peer's end during the run.
    pub fn try_clone_stream(&self) -> io::Result<TcpStream> {
        self.stream.try_clone()
    }

    /// Closes the connection (both directions).
    pub fn close(self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }

    fn io(&self, step: Step, e: &io::Error) -> PerftestError {
        PerftestError::Io {
            peer: self.peer,
            step,
            message: e.to_string(),
        }
    }

    /// A wire error at `step`.
    pub fn wire(&self, step: Step, error: WireError) -> PerftestError {
        PerftestError::Wire {
            peer: self.peer,
            step,
            error,
        }
    }
}

/// This side's negotiation block, as perftest built with the same flags would send it.
pub fn negotiation_for(params: &TestParams, unit: ReportUnit, max_qp_rd_atom: u32) -> Negotiation {
    let (test_type, iters, duration) = match params.length {
        TestLength::Iterations { iterations } => (0, iterations, 5),
        // perftest's -D is the whole test, its margins inside; rdmabw's duration_s is the
        // measured window between its warm-up and cool-down.
        TestLength::Duration {
            duration_s,
            warmup_s,
            cooldown_s,
        } => (1, 0, (duration_s + warmup_s + cooldown_s).round() as u32),
    };
    let (method, size) = match params.sizes {
        Sizes::One { msg_size_bytes } => (0, msg_size_bytes),
        Sizes::Sweep { .. } => (1, 8_388_608),
    };
    Negotiation {
        test_method: method,
        connection_type: 0,
        verb: 2,
        tst: u32::from(!params.latency),
        atomic_type: 0,
        test_type,
        report_fmt: unit.code(),
        size,
        iters,
        aes_xts: 0,
        num_of_qps: params.qps,
        duration,
        use_rdma_cm: 0,
        use_write_with_imm: 0,
        no_enhanced_reorder: 0,
        sig_offload: 0,
        max_qp_rd_atom,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    #[test]
    fn a_clockless_report_is_the_peers_failure_in_words_that_say_why() {
        let e = PerftestError::NoFigures {
            peer: "10.224.1.1:42286".parse().unwrap(),
            iters: 2400,
            size: 4096,
        };
        let text = e.to_string();
        assert!(
            text.contains("reported 0 Gb/s for 2400 writes of 4096 B")
                && text.contains("clock calibration failed"),
            "{text}"
        );
        assert_eq!(e.kind(), ::wire::FailureKind::PeerFailed);
    }

    fn pair(timeout: Duration) -> (PerftestConn, PerftestConn) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        (
            PerftestConn::new(c, End::Client, timeout).unwrap(),
            PerftestConn::new(s, End::Server, timeout).unwrap(),
        )
    }

    #[test]
    fn an_exchange_is_write_then_read_on_the_client_and_the_reverse_on_the_server() {
        let (mut c, mut s) = pair(Duration::from_secs(5));
        let stop = AtomicBool::new(false);
        let t = thread::spawn(move || {
            let stop = AtomicBool::new(false);
            s.exchange(Step::Version, b"server", 6, &stop).unwrap()
        });
        assert_eq!(
            c.exchange(Step::Version, b"client", 6, &stop).unwrap(),
            b"server"
        );
        assert_eq!(t.join().unwrap(), b"client");
    }

    #[test]
    fn a_silent_peer_ends_the_step_at_its_deadline_naming_it() {
        let (mut c, _s) = pair(Duration::from_millis(300));
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        let e = c.exchange(Step::Keys, b"x", 108, &stop).unwrap_err();
        assert!(t0.elapsed() >= Duration::from_millis(290));
        assert!(t0.elapsed() < Duration::from_secs(3));
        let text = e.to_string();
        assert!(
            text.contains("sent nothing") && text.contains("QP key exchange"),
            "{text}"
        );
        assert!(
            text.contains("-q"),
            "the hint names the likely cause: {text}"
        );
    }

    #[test]
    fn a_peer_that_hangs_up_mid_message_is_named_with_the_bytes_that_came() {
        let (mut c, s) = pair(Duration::from_secs(5));
        let t = thread::spawn(move || {
            let mut st = s.stream;
            st.write_all(&[b'6'; 5]).unwrap();
        });
        t.join().unwrap();
        let stop = AtomicBool::new(false);
        let e = c.read_until(
            Step::Version,
            16,
            Instant::now() + Duration::from_secs(5),
            &stop,
        );
        match e {
            Err(PerftestError::Closed { got, needed, .. }) => assert_eq!((got, needed), (5, 16)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_stop_flag_ends_a_wait_within_a_slice() {
        let (mut c, _s) = pair(Duration::from_secs(60));
        let stop = AtomicBool::new(true);
        let t0 = Instant::now();
        let e = c.exchange(Step::Measure, b"", 108, &stop).unwrap_err();
        assert!(matches!(e, PerftestError::Interrupted { .. }));
        assert!(t0.elapsed() < Duration::from_secs(1));
    }

    /// The passive server's wait: no wake-up before its deadline, and a shutdown of the read
    /// side of a clone (the guard's wake) ends it at once, as a close.
    #[test]
    fn a_woken_wait_blocks_to_its_deadline_and_ends_at_once_when_its_clone_is_shut() {
        let (mut c, _s) = pair(Duration::from_secs(60));
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        let e = c
            .read_until_woken(Step::Measure, 108, t0 + Duration::from_millis(600), &stop)
            .unwrap_err();
        assert!(matches!(e, PerftestError::Timeout { .. }), "{e}");
        assert!(t0.elapsed() >= Duration::from_millis(590));

        let clone = c.try_clone_stream().unwrap();
        let waker = thread::spawn(move || {
            thread::sleep(Duration::from_millis(300));
            clone.shutdown(std::net::Shutdown::Read).unwrap();
        });
        let t0 = Instant::now();
        let e = c
            .read_until_woken(Step::Measure, 108, t0 + Duration::from_secs(30), &stop)
            .unwrap_err();
        waker.join().unwrap();
        assert!(matches!(e, PerftestError::Closed { .. }), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }

    /// A 6.28 peer checks the duration against its own -D, the whole test: rdmabw's `-D 10`
    /// (6 s measured between margins of 2) says 10, not 6; a passive server's `--window 7` with
    /// its 0.05 s start says 7 (railsweep's --client-tool gives it perftest's -D 7 -f 1 as one).
    #[test]
    fn the_negotiated_duration_is_perftests_whole_test() {
        let with = |duration_s, warmup_s, cooldown_s| {
            let length = TestLength::Duration {
                duration_s,
                warmup_s,
                cooldown_s,
            };
            TestParams::write_bw(
                Sizes::One {
                    msg_size_bytes: 65536,
                },
                length,
                1,
            )
        };
        let d = |p: &TestParams| negotiation_for(p, ReportUnit::MibPerS, 16).duration;
        assert_eq!(d(&with(6.0, 2.0, 2.0)), 10);
        assert_eq!(d(&with(7.0, 0.05, 0.0)), 7);
        assert_eq!(d(&with(1.95, 0.05, 0.0)), 2);
    }
}
