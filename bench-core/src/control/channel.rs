//! The blocking control channel: one TCP connection, framed messages, a deadline per phase.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use socket2::{SockRef, TcpKeepalive};

use super::error::ControlError;
use super::frame::{encode_frame, FrameDecoder, FrameError, MAGIC};
use super::msg::{Accept, Hello, Msg, PROTOCOL_VERSION};
use super::phase::{Phase, PhaseTimeouts};
use crate::engine::Endpoints;
use crate::perftest::wire::{self, PeerVersion};
use ::wire::counters::CounterReport;
use ::wire::params::SizeResult;

/// Pause between connection attempts in [`ControlChannel::connect_retry`]: short, because a
/// refused attempt costs nothing and an orchestrator starts the daemon and the first client at
/// once (a daemon listens 0.15-0.3 s after its start in the lab).
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// The longest single connection attempt.
const ATTEMPT_MAX: Duration = Duration::from_secs(3);
/// The longest a single write may block, whatever the phase timeout.
const WRITE_TIMEOUT_CAP: Duration = Duration::from_secs(10);
/// How long [`ControlChannel::close`] waits for the peer's end of stream.
const CLOSE_LINGER: Duration = Duration::from_millis(500);
/// How long a failed send looks for an `Error` the peer sent before hanging up.
const LAST_WORDS_WAIT: Duration = Duration::from_millis(200);
/// Write timeout for best-effort error reports.
const ERROR_REPORT_TIMEOUT: Duration = Duration::from_secs(1);

/// One side of a control connection.
///
/// Blocking and single-threaded: the engine drives it phase by phase, and hands it to a
/// `PeerWatch` for the measured window (`ControlChannel::watch`, in `watch.rs`). Socket setup: `TCP_NODELAY`, keepalive probes after
/// 5 s idle every 1 s (3 probes), and `TCP_USER_TIMEOUT` 15 s, so the kernel also gives up on a
/// vanished host.
#[derive(Debug)]
pub struct ControlChannel {
    pub(super) stream: TcpStream,
    pub(super) peer: SocketAddr,
    timeouts: PhaseTimeouts,
    decoder: FrameDecoder,
    /// Messages received by a watcher and left for the next `recv` (a `Done`).
    pub(super) pending: VecDeque<Msg>,
    /// The phase of the last send or receive, used for errors of phase-less messages.
    phase: Phase,
    /// A write failed part-way: the stream is out of frame sync.
    poisoned: bool,
}

impl ControlChannel {
    /// Connects to `addr`, retrying until `deadline`, so a client started a moment before its
    /// server waits for it. The name is resolved again on every attempt (a pod's DNS entry may
    /// appear late).
    pub fn connect_retry<A>(addr: A, deadline: Instant) -> Result<ControlChannel, ControlError>
    where
        A: ToSocketAddrs + fmt::Display,
    {
        let start = Instant::now();
        let mut last: io::Error =
            io::Error::new(io::ErrorKind::TimedOut, "deadline already passed");
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(ControlError::ConnectFailed {
                    addr: addr.to_string(),
                    waited: now - start,
                    source: Arc::new(last),
                });
            }
            match addr.to_socket_addrs() {
                Ok(addrs) => {
                    let mut any = false;
                    for sa in addrs {
                        any = true;
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        let attempt = left.min(ATTEMPT_MAX).max(Duration::from_millis(1));
                        match TcpStream::connect_timeout(&sa, attempt) {
                            Ok(stream) => {
                                return ControlChannel::from_stream(stream).map_err(|e| {
                                    ControlError::ConnectFailed {
                                        addr: addr.to_string(),
                                        waited: start.elapsed(),
                                        source: Arc::new(e),
                                    }
                                })
                            }
                            Err(e) => last = e,
                        }
                    }
                    if !any {
                        last = io::Error::new(
                            io::ErrorKind::NotFound,
                            "the name resolved to no addresses",
                        );
                    }
                }
                Err(e) => last = e,
            }
            let left = deadline.saturating_duration_since(Instant::now());
            thread::sleep(left.min(RETRY_PAUSE));
        }
    }

    /// Connects to `addr`, retrying for `timeouts.connect`, and keeps `timeouts` for the
    /// phases that follow.
    pub fn connect<A>(addr: A, timeouts: PhaseTimeouts) -> Result<ControlChannel, ControlError>
    where
        A: ToSocketAddrs + fmt::Display,
    {
        let ch = ControlChannel::connect_retry(addr, Instant::now() + timeouts.connect)?;
        Ok(ch.with_timeouts(timeouts))
    }

    /// The socket, for a wait on it together with something else ([`crate::ffi::wait_readable`]).
    pub(super) fn socket_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.stream)
    }

    /// Wraps an accepted (or otherwise connected) stream, with default timeouts.
    pub fn from_stream(stream: TcpStream) -> io::Result<ControlChannel> {
        let peer = stream.peer_addr()?;
        stream.set_nonblocking(false)?;
        stream.set_nodelay(true)?;
        let sock = SockRef::from(&stream);
        sock.set_tcp_keepalive(
            &TcpKeepalive::new()
                .with_time(Duration::from_secs(5))
                .with_interval(Duration::from_secs(1))
                .with_retries(3),
        )?;
        sock.set_tcp_user_timeout(Some(Duration::from_secs(15)))?;
        Ok(ControlChannel {
            stream,
            peer,
            timeouts: PhaseTimeouts::default(),
            decoder: FrameDecoder::new(),
            pending: VecDeque::new(),
            phase: Phase::Connect,
            poisoned: false,
        })
    }

    /// The same channel with other phase timeouts.
    pub fn with_timeouts(mut self, timeouts: PhaseTimeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Replaces the phase timeouts (e.g. the measure timeout once the `Hello` is known).
    pub fn set_timeouts(&mut self, timeouts: PhaseTimeouts) {
        self.timeouts = timeouts;
    }

    /// The phase timeouts in force.
    pub fn timeouts(&self) -> &PhaseTimeouts {
        &self.timeouts
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// This side's address (the interface the peer was reached on).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// Sends one message, with a write timeout of its phase's timeout (at most 10 s).
    pub fn send(&mut self, msg: &Msg) -> Result<(), ControlError> {
        let phase = msg.phase().unwrap_or(self.phase);
        let timeout = self.timeouts.get(phase).min(WRITE_TIMEOUT_CAP);
        self.send_within(msg, phase, timeout)
    }

    pub(super) fn send_within(
        &mut self,
        msg: &Msg,
        phase: Phase,
        timeout: Duration,
    ) -> Result<(), ControlError> {
        self.phase = phase;
        let peer = self.peer;
        if self.poisoned {
            return Err(ControlError::Protocol {
                peer,
                phase,
                detail: "the channel is unusable after an earlier write failed part-way".into(),
            });
        }
        let frame = encode_frame(msg).map_err(|e| ControlError::from_frame(e, peer, phase))?;
        let io = |e: io::Error| ControlError::from_io(Arc::new(e), peer, phase);
        self.stream
            .set_write_timeout(Some(timeout.max(Duration::from_millis(1))))
            .map_err(io)?;
        if let Err(e) = (&self.stream).write_all(&frame) {
            self.poisoned = true;
            let err = match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ControlError::Timeout {
                    peer,
                    phase,
                    after: timeout,
                },
                _ => io(e),
            };
            // A peer that hung up may have said why first: prefer its words.
            if err.is_peer_gone() {
                if let Some(message) = self.last_words(phase) {
                    return Err(ControlError::PeerError {
                        peer,
                        phase,
                        message,
                    });
                }
            }
            return Err(err);
        }
        Ok(())
    }

    /// The text of an `Error` the peer sent before closing, if it is already here.
    fn last_words(&mut self, phase: Phase) -> Option<String> {
        let deadline = Instant::now() + LAST_WORDS_WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match self.poll(phase, left) {
                Ok(Some(Msg::Error { message })) => return Some(message),
                Ok(Some(_)) | Ok(None) => continue,
                Err(_) => return None,
            }
        }
    }

    /// Sends `Error { message }` so the peer shows this side's reason, ignoring failures (the
    /// peer may be gone already). Blocks at most about a second.
    pub fn send_error(&mut self, message: &str) {
        let msg = Msg::Error {
            message: message.to_string(),
        };
        let phase = self.phase;
        // Ignored on purpose: this is a courtesy to a peer that may not be listening.
        let _ = self.send_within(&msg, phase, ERROR_REPORT_TIMEOUT);
    }

    /// Receives the next message, whatever it is (heartbeats and peer `Error`s included),
    /// waiting at most the phase's timeout.
    pub fn recv(&mut self, phase: Phase) -> Result<Msg, ControlError> {
        let deadline = Instant::now() + self.timeouts.get(phase);
        self.recv_until(phase, deadline)
    }

    fn recv_until(&mut self, phase: Phase, deadline: Instant) -> Result<Msg, ControlError> {
        self.phase = phase;
        if let Some(msg) = self.pending.pop_front() {
            return Ok(msg);
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ControlError::Timeout {
                    peer: self.peer,
                    phase,
                    after: self.timeouts.get(phase),
                });
            }
            if let Some(msg) = self.poll(phase, left)? {
                return Ok(msg);
            }
        }
    }

    /// One read of at most `wait`; `Ok(None)` if no complete message arrived.
    pub(super) fn poll(
        &mut self,
        phase: Phase,
        wait: Duration,
    ) -> Result<Option<Msg>, ControlError> {
        let peer = self.peer;
        self.stream
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .map_err(|e| ControlError::from_io(Arc::new(e), peer, phase))?;
        match self.decoder.poll_read(&mut &self.stream) {
            Ok(m) => Ok(m),
            Err(e) => {
                if let FrameError::BadVersion { .. } = e {
                    // Answer in our own version, so that the peer's decoder reports the
                    // mismatch on its side too, instead of a bare disconnect.
                    let text = ControlError::from_frame(e.clone(), peer, phase).to_string();
                    self.send_error(&text);
                }
                Err(ControlError::from_frame(e, peer, phase))
            }
        }
    }

    /// Receives within `phase`'s deadline, skipping heartbeats, and hands the message to
    /// `pick`; a peer `Error` becomes [`ControlError::PeerError`], a message `pick` refuses
    /// (`None`) becomes [`ControlError::Unexpected`].
    fn expect<T>(
        &mut self,
        phase: Phase,
        expected: &'static str,
        mut pick: impl FnMut(Msg, SocketAddr) -> Option<Result<T, ControlError>>,
    ) -> Result<T, ControlError> {
        let deadline = Instant::now() + self.timeouts.get(phase);
        loop {
            match self.recv_until(phase, deadline)? {
                Msg::Heartbeat { .. } => continue,
                Msg::Error { message } => {
                    return Err(ControlError::PeerError {
                        peer: self.peer,
                        phase,
                        message,
                    })
                }
                msg => {
                    let got = msg.kind();
                    return pick(msg, self.peer).unwrap_or(Err(ControlError::Unexpected {
                        peer: self.peer,
                        phase,
                        expected,
                        got,
                    }));
                }
            }
        }
    }

    /// Server: waits for the client's `Hello` (handshake phase).
    pub fn expect_hello(&mut self) -> Result<Hello, ControlError> {
        self.expect(Phase::Handshake, "hello", |m, _| match m {
            Msg::Hello(h) => Some(Ok(h)),
            _ => None,
        })
    }

    /// Client: waits for the server's answer to `Hello`. `Busy` and `Reject` become
    /// [`ControlError::Busy`] and [`ControlError::Rejected`].
    pub fn expect_accept(&mut self) -> Result<Accept, ControlError> {
        self.expect(
            Phase::Handshake,
            "accept, busy or reject",
            |m, peer| match m {
                Msg::Accept(a) => Some(Ok(a)),
                Msg::Busy { device, by } => Some(Err(ControlError::Busy { peer, device, by })),
                Msg::Reject { reason } => Some(Err(ControlError::Rejected { peer, reason })),
                _ => None,
            },
        )
    }

    /// Waits for the peer's `Endpoints` (exchange phase).
    pub fn expect_endpoints(&mut self) -> Result<Endpoints, ControlError> {
        self.expect(Phase::Exchange, "endpoints", |m, _| match m {
            Msg::Endpoints(e) => Some(Ok(e)),
            _ => None,
        })
    }

    /// Waits for the peer's `Ready` (ready phase).
    pub fn expect_ready(&mut self) -> Result<(), ControlError> {
        self.expect(Phase::Ready, "ready", |m, _| match m {
            Msg::Ready => Some(Ok(())),
            _ => None,
        })
    }

    /// Waits for the peer's `Done` within `phase`'s timeout (`Results` for the client; the
    /// server, whose watcher already holds the client's `Done`, gets it at once).
    pub fn expect_done(
        &mut self,
        phase: Phase,
    ) -> Result<(Vec<SizeResult>, Option<CounterReport>), ControlError> {
        self.expect(phase, "done", |m, _| match m {
            Msg::Done { results, counters } => Some(Ok((results, counters))),
            _ => None,
        })
    }

    /// Client: sends `hello` and waits for `Accept` (see [`ControlChannel::expect_accept`]).
    pub fn client_handshake(&mut self, hello: &Hello) -> Result<Accept, ControlError> {
        self.send(&Msg::Hello(hello.clone()))?;
        self.expect_accept()
    }

    /// Both sides: sends this side's endpoints and returns the peer's. Fails with
    /// [`ControlError::Protocol`] when the QP counts differ.
    pub fn exchange_endpoints(&mut self, ours: &Endpoints) -> Result<Endpoints, ControlError> {
        self.send(&Msg::Endpoints(ours.clone()))?;
        let theirs = self.expect_endpoints()?;
        if theirs.qps.len() != ours.qps.len() {
            let detail = format!(
                "the peer sent {} queue pairs, this side has {}",
                theirs.qps.len(),
                ours.qps.len()
            );
            self.send_error(&detail);
            return Err(ControlError::Protocol {
                peer: self.peer,
                phase: Phase::Exchange,
                detail,
            });
        }
        Ok(theirs)
    }

    /// Both sides: sends `Ready` and waits for the peer's.
    pub fn sync_ready(&mut self) -> Result<(), ControlError> {
        self.send(&Msg::Ready)?;
        self.expect_ready()
    }

    /// Closes gracefully: ends this side's stream, then waits briefly (0.5 s at most) for the
    /// peer's end, so that neither side's last message is lost to a reset.
    pub fn close(self) {
        // Failures here mean the peer is gone already; there is nothing left to report.
        let _ = self.stream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + CLOSE_LINGER;
        let mut scratch = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.stream.set_read_timeout(Some(left)).is_err() {
                break;
            }
            match (&self.stream).read(&mut scratch) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }

    /// Sends `Error { message }` (best effort) and closes.
    pub fn fail(mut self, message: &str) {
        self.send_error(message);
        self.close();
    }

    /// Client: opens with perftest's version message, marked as rdmabw's unless `plain` (see
    /// [`crate::perftest`]), and reads the server's within the handshake timeout.
    pub fn client_opening(&mut self, plain: bool) -> Result<PeerVersion, ControlError> {
        let phase = Phase::Handshake;
        let peer = self.peer;
        let mine = wire::encode_version((!plain).then_some(PROTOCOL_VERSION));
        let io = |e: io::Error| ControlError::from_io(Arc::new(e), peer, phase);
        self.stream
            .set_write_timeout(Some(self.timeouts.handshake.min(WRITE_TIMEOUT_CAP)))
            .map_err(io)?;
        (&self.stream).write_all(&mine).map_err(io)?;
        let deadline = Instant::now() + self.timeouts.handshake;
        let theirs = match self.read_exact_by(phase, wire::VERSION_LEN, deadline) {
            Err(ControlError::PeerClosed { .. }) => {
                return Err(ControlError::Protocol {
                    peer,
                    phase,
                    detail: "the server closed the connection on rdmabw's opening (perftest's \
                             version message): an rdmabw older than this one does; run the same \
                             release at both ends, or give --peer rdmabw"
                        .into(),
                })
            }
            r => r?,
        };
        if theirs.starts_with(&MAGIC) {
            return Err(ControlError::Protocol {
                peer,
                phase,
                detail: "the server answered in rdmabw's framed protocol without a version                          message: it is an older rdmabw; run the same release at both ends, or                          give --peer rdmabw"
                    .into(),
            });
        }
        let mut m = [0u8; wire::VERSION_LEN];
        m.copy_from_slice(&theirs);
        wire::decode_version(&m).map_err(|_| ControlError::NotRdmabw {
            peer,
            phase,
            found: theirs,
        })
    }

    /// Server: what the client opened with, read within the handshake timeout. rdmabw's
    /// frame magic (a client that gave `--peer rdmabw`, or an older rdmabw) is left unread for
    /// the frames that follow; a version message is read, and a marked one answered with this
    /// side's marked version (rdmabw's frames follow), an unmarked one left to the perftest
    /// exchange to answer.
    pub fn server_opening(&mut self) -> Result<Opening, ControlError> {
        let phase = Phase::Handshake;
        let peer = self.peer;
        let deadline = Instant::now() + self.timeouts.handshake;
        let mut head = [0u8; 4];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ControlError::Timeout {
                    peer,
                    phase,
                    after: self.timeouts.handshake,
                });
            }
            self.stream
                .set_read_timeout(Some(left.min(Duration::from_millis(250))))
                .map_err(|e| ControlError::from_io(Arc::new(e), peer, phase))?;
            match self.stream.peek(&mut head) {
                Ok(0) => return Err(ControlError::PeerClosed { peer, phase }),
                Ok(n) if n >= 4 || head[..n] != MAGIC[..n] => break,
                Ok(_) => thread::sleep(Duration::from_millis(5)),
                Err(e) if crate::control::is_wait(&e) => {}
                Err(e) => return Err(ControlError::from_io(Arc::new(e), peer, phase)),
            }
        }
        if head == MAGIC {
            return Ok(Opening::Frames);
        }
        let theirs = self.read_exact_by(phase, wire::VERSION_LEN, deadline)?;
        let mut m = [0u8; wire::VERSION_LEN];
        m.copy_from_slice(&theirs);
        let version = wire::decode_version(&m).map_err(|_| ControlError::NotRdmabw {
            peer,
            phase,
            found: theirs,
        })?;
        if version.rdmabw.is_some() {
            let mine = wire::encode_version(Some(PROTOCOL_VERSION));
            let io = |e: io::Error| ControlError::from_io(Arc::new(e), peer, phase);
            self.stream
                .set_write_timeout(Some(self.timeouts.handshake.min(WRITE_TIMEOUT_CAP)))
                .map_err(io)?;
            (&self.stream).write_all(&mine).map_err(io)?;
            return Ok(Opening::Marked);
        }
        Ok(Opening::Perftest(version))
    }

    /// Reads exactly `n` bytes by `deadline`, before any frame (the opening).
    fn read_exact_by(
        &mut self,
        phase: Phase,
        n: usize,
        deadline: Instant,
    ) -> Result<Vec<u8>, ControlError> {
        let peer = self.peer;
        let mut buf = vec![0u8; n];
        let mut got = 0;
        while got < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ControlError::Timeout {
                    peer,
                    phase,
                    after: self.timeouts.get(phase),
                });
            }
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|e| ControlError::from_io(Arc::new(e), peer, phase))?;
            match (&self.stream).read(&mut buf[got..]) {
                Ok(0) => return Err(ControlError::PeerClosed { peer, phase }),
                Ok(k) => got += k,
                Err(e) if crate::control::is_wait(&e) => {}
                Err(e) => return Err(ControlError::from_io(Arc::new(e), peer, phase)),
            }
        }
        Ok(buf)
    }

    /// The socket itself, for a test that goes on in perftest's exchange.
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }
}

/// Whether a socket error only says that a read or write with a timeout found nothing yet
/// (or was interrupted): the caller looks at its deadline and tries again.
pub(crate) fn is_wait(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// What a client's connection opened with ([`ControlChannel::server_opening`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Opening {
    /// rdmabw's frames from the first byte.
    Frames,
    /// A version message with rdmabw's mark, answered: rdmabw's frames follow.
    Marked,
    /// perftest's version message: the rest is perftest's exchange.
    Perftest(PeerVersion),
}
