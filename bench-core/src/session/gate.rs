//! Admission before the hello: which connections may wait for it, and which one goes when too
//! many wait. Shared by the daemon ([`super::Daemon`]) and the one-test server
//! ([`super::serve_first`]).
//!
//! Every accepted connection enters the gate; none is refused for the others' sake. The gate
//! holds at most [`Admission::per_source`] connections of one source (an IPv4 address, or an
//! IPv6 /64: a host has a whole /64 to pick addresses from) and [`Admission::total`] in all.
//! When a new connection would pass a cap, one that waits already is evicted (its socket shut
//! down, which ends its wait at once):
//!
//! 1. the longest-waiting one whose peer has closed it or has never sent a byte (looked at
//!    when the choice is made: a client whose opening is in flight is not silent);
//! 2. only when none is, the longest-waiting one of the source with the most connections
//!    waiting (for the per-source cap: of that source).
//!
//! A connection must send its first byte within [`Admission::first_byte`] and its whole hello
//! within [`Admission::hello_wait`]. So silent connections, however many and from whatever
//! sources (the client's own address included: NAT, every hostNetwork pod of a node), can
//! never displace a client that speaks within its first-byte wait; each new silent connection only
//! displaces an older silent one. Connections that send part of a hello and stall are
//! displaced in turn too, oldest first: one of them displaces a client only if the cap's worth
//! of them arrives during the client's own handshake (one round trip).

use std::collections::VecDeque;
use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use socket2::SockRef;

use super::admit::{admit, Admitted};
use super::config::ServerConfig;
use super::error::SessionError;
use crate::control::{ControlError, Phase};

/// A server's budget for connections that are not admitted yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// How long a connection may take to send its whole hello, from its acceptance (at most
    /// the handshake timeout).
    pub hello_wait: Duration,
    /// How long a connection may take to send its first byte (rdmabw's client sends its opening
    /// as soon as it connects, perftest's after a pause).
    pub first_byte: Duration,
    /// Connections of one source waiting for admission at once: an IPv4 address, or an IPv6
    /// /64. A new one beyond it evicts one of that source's (see the module's doc).
    pub per_source: usize,
    /// Connections waiting for admission at once, from every source. A new one beyond it
    /// evicts one (see the module's doc).
    pub total: usize,
}

impl Admission {
    /// 5 s for the hello and 4 s for its first byte, 8 connections per source and 64 in all
    /// waiting for admission. The first byte's wait is perftest's: `ib_write_bw`'s client
    /// sleeps [`crate::perftest::CONNECT_PAUSE`] (1 s) after connecting before its version,
    /// and on a busy host it writes later still (1.05 s in the lab under load): with a 1 s
    /// wait, 10 of 56 clients of a looped lab run were dropped as silent and failed with
    /// "Couldn't read reports". Silent connections are still the first to go when a cap is
    /// reached.
    pub const DEFAULT: Admission = Admission {
        hello_wait: Duration::from_secs(5),
        first_byte: Duration::from_secs(4),
        per_source: 8,
        total: 64,
    };
}

impl Default for Admission {
    fn default() -> Self {
        Admission::DEFAULT
    }
}

/// Whom a cap counts together: an IPv4 address (an IPv4-mapped IPv6 address is one), or the
/// first 64 bits of an IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Source {
    /// One IPv4 address.
    V4(Ipv4Addr),
    /// One IPv6 /64.
    V6([u8; 8]),
}

impl Source {
    /// The source `ip` counts against.
    pub(crate) fn of(ip: IpAddr) -> Source {
        match ip {
            IpAddr::V4(v4) => Source::V4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Source::V4(v4),
                None => {
                    let mut p = [0u8; 8];
                    p.copy_from_slice(&v6.octets()[..8]);
                    Source::V6(p)
                }
            },
        }
    }
}

/// What a connection's socket shows now, without waiting or reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shows {
    /// Bytes are waiting to be read.
    Data,
    /// Nothing yet.
    Nothing,
    /// The peer closed it, or it failed.
    Gone,
}

fn shows(stream: &TcpStream) -> Shows {
    let mut b = [MaybeUninit::<u8>::uninit(); 1];
    match SockRef::from(stream).recv_with_flags(&mut b, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
        Ok(0) => Shows::Gone,
        Ok(_) => Shows::Data,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Shows::Nothing
        }
        Err(_) => Shows::Gone,
    }
}

/// One waiting connection.
#[derive(Debug)]
struct Entry {
    id: u64,
    source: Source,
    /// A second handle on the socket, to evict it with.
    socket: TcpStream,
    /// Its first byte came.
    spoke: Arc<AtomicBool>,
}

impl Entry {
    /// Closed by its peer, or silent so far.
    fn idle(&self) -> bool {
        match shows(&self.socket) {
            Shows::Gone => true,
            Shows::Nothing => !self.spoke.load(Ordering::SeqCst),
            Shows::Data => false,
        }
    }
}

#[derive(Debug, Default)]
struct Waiting {
    next_id: u64,
    /// In the order they came.
    entries: VecDeque<Entry>,
}

impl Waiting {
    fn count(&self, source: Source) -> usize {
        self.entries.iter().filter(|e| e.source == source).count()
    }

    /// Evicts one connection among those `in_scope`: the longest-waiting idle one, else the
    /// longest-waiting one of the source with the most connections in scope.
    fn evict_one(&mut self, in_scope: impl Fn(&Entry) -> bool) {
        let idle = self.entries.iter().position(|e| in_scope(e) && e.idle());
        let at = idle.or_else(|| {
            let busiest = self
                .entries
                .iter()
                .filter(|e| in_scope(e))
                .map(|e| e.source)
                .max_by_key(|s| self.count(*s))?;
            self.entries
                .iter()
                .position(|e| in_scope(e) && e.source == busiest)
        });
        if let Some(e) = at.and_then(|i| self.entries.remove(i)) {
            // Its wait ends at once: reads on the other handle see the end of the stream.
            let _ = e.socket.shutdown(Shutdown::Both);
        }
    }
}

/// The connections waiting for admission on one listener.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    admission: Admission,
    waiting: Arc<Mutex<Waiting>>,
}

/// A connection's place in the [`Gate`], given back when dropped (admitted, refused, gone or
/// evicted).
#[derive(Debug)]
pub(crate) struct Ticket {
    id: u64,
    spoke: Arc<AtomicBool>,
    waiting: Arc<Mutex<Waiting>>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        w.entries.retain(|e| e.id != self.id);
    }
}

impl Gate {
    pub(crate) fn new(admission: Admission) -> Gate {
        Gate {
            admission,
            waiting: Arc::default(),
        }
    }

    /// Lets `stream` (from `peer`) wait for admission, evicting an older connection if a cap
    /// is reached. Fails only when the socket cannot be duplicated (no file descriptors).
    pub(crate) fn enter(&self, stream: &TcpStream, peer: SocketAddr) -> io::Result<Ticket> {
        let socket = stream.try_clone()?;
        let source = Source::of(peer.ip());
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let per_source = self.admission.per_source.max(1);
        while w.count(source) >= per_source {
            w.evict_one(|e| e.source == source);
        }
        while w.entries.len() >= self.admission.total.max(1) {
            w.evict_one(|_| true);
        }
        let id = w.next_id;
        w.next_id += 1;
        let spoke = Arc::new(AtomicBool::new(false));
        w.entries.push_back(Entry {
            id,
            source,
            socket,
            spoke: Arc::clone(&spoke),
        });
        Ok(Ticket {
            id,
            spoke,
            waiting: Arc::clone(&self.waiting),
        })
    }

    /// How many connections wait.
    pub(crate) fn len(&self) -> usize {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .len()
    }

    /// Ends every wait (the server stops, or a one-test server has its client).
    pub(crate) fn evict_all(&self) {
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        for e in w.entries.drain(..) {
            let _ = e.socket.shutdown(Shutdown::Both);
        }
    }

    /// Waits for `stream`'s first byte, then reads its hello and admits it ([`admit`]), all
    /// within the gate's deadlines; the ticket is given back when this returns.
    pub(crate) fn admit(
        &self,
        cfg: &ServerConfig,
        stream: TcpStream,
        ticket: Ticket,
    ) -> Result<Admitted, SessionError> {
        let start = Instant::now();
        first_byte(
            &stream,
            self.admission.first_byte.min(self.admission.hello_wait),
        )?;
        ticket.spoke.store(true, Ordering::SeqCst);
        let left = self
            .admission
            .hello_wait
            .saturating_sub(start.elapsed())
            .max(Duration::from_millis(1));
        let r = admit(cfg, stream, left);
        drop(ticket);
        r
    }
}

/// Waits up to `wait` for the first byte of `stream` (not reading it).
fn first_byte(stream: &TcpStream, wait: Duration) -> Result<(), SessionError> {
    let phase = Phase::Handshake;
    let peer = stream
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
    let io = |e: io::Error| {
        SessionError::Control(ControlError::Io {
            peer,
            phase,
            source: Arc::new(e),
        })
    };
    stream
        .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
        .map_err(io)?;
    let deadline = Instant::now() + wait;
    let mut b = [0u8; 1];
    loop {
        match stream.peek(&mut b) {
            Ok(0) => {
                return Err(SessionError::Control(ControlError::PeerClosed {
                    peer,
                    phase,
                }))
            }
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted && Instant::now() < deadline => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(SessionError::Control(ControlError::Timeout {
                    peer,
                    phase,
                    after: wait,
                }))
            }
            Err(e) => return Err(io(e)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{Ipv6Addr, TcpListener};

    /// A connected pair on loopback: (the accepted side, the client side).
    fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (s, c)
    }

    fn gate(per_source: usize, total: usize) -> Gate {
        Gate::new(Admission {
            per_source,
            total,
            ..Admission::DEFAULT
        })
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(Source::of(a), Source::of(b));
        assert_ne!(Source::of(a), Source::of(c));
        let mapped: IpAddr = Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped().into();
        assert_eq!(
            Source::of(mapped),
            Source::of(Ipv4Addr::new(10, 0, 0, 1).into())
        );
        assert_ne!(
            Source::of(Ipv4Addr::new(10, 0, 0, 1).into()),
            Source::of(Ipv4Addr::new(10, 0, 0, 2).into())
        );
        assert_eq!(Source::of(Ipv6Addr::LOCALHOST.into()), Source::V6([0; 8]));
    }

    #[test]
    fn a_full_source_evicts_its_oldest_silent_connection_never_one_that_spoke() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let g = gate(2, 64);
        let peer: SocketAddr = "10.0.0.1:1000".parse().unwrap();
        // The first has spoken (bytes waiting), the second is silent.
        let (s1, mut c1) = pair(&l);
        c1.write_all(b"x").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let t1 = g.enter(&s1, peer).unwrap();
        let (s2, _c2) = pair(&l);
        let t2 = g.enter(&s2, peer).unwrap();
        assert_eq!(g.len(), 2);
        // A third from the same source: the silent one goes, the one that spoke stays.
        let (s3, _c3) = pair(&l);
        let t3 = g.enter(&s3, peer).unwrap();
        assert_eq!(g.len(), 2);
        let mut b = [0u8; 1];
        s2.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        assert_eq!(s2.peek(&mut b).unwrap(), 0, "the silent one was shut down");
        assert_eq!(s1.peek(&mut b).unwrap(), 1, "the one that spoke was kept");
        // Another source is not held up by this one.
        let (s4, _c4) = pair(&l);
        let _t4 = g.enter(&s4, "10.0.0.2:1000".parse().unwrap()).unwrap();
        assert_eq!(g.len(), 3);
        drop((t1, t2, t3));
        assert_eq!(g.len(), 1, "tickets give their place back");
    }

    #[test]
    fn when_every_connection_spoke_the_busiest_sources_oldest_goes() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let g = gate(8, 3);
        let (a, b): (SocketAddr, SocketAddr) =
            ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:1".parse().unwrap());
        let mut held = Vec::new();
        for p in [b, a, a] {
            let (s, mut c) = pair(&l);
            c.write_all(b"x").unwrap();
            let t = g.enter(&s, p).unwrap();
            t.spoke.store(true, Ordering::SeqCst);
            held.push((s, c, t));
        }
        // Full: a new one from b evicts a's oldest (a has two), not b's only one.
        let (s, _c) = pair(&l);
        let _t = g.enter(&s, b).unwrap();
        let mut buf = [0u8; 8];
        let a_oldest = &held[1].0;
        a_oldest
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        // Evicted: its reads come to the end of the stream (after any byte left unread).
        let ended = (0..4).any(|_| matches!(std::io::Read::read(&mut &*a_oldest, &mut buf), Ok(0)));
        assert!(ended, "a's oldest was not shut down");
        assert_eq!(held[0].0.peek(&mut buf).unwrap(), 1, "b's one is kept");
        assert_eq!(g.len(), 3);
    }

    #[test]
    fn the_first_byte_is_awaited_within_its_deadline_and_not_consumed() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (s, _c) = pair(&l);
        let t0 = Instant::now();
        let e = first_byte(&s, Duration::from_millis(200)).unwrap_err();
        assert!(
            matches!(e, SessionError::Control(ControlError::Timeout { .. })),
            "{e:?}"
        );
        assert!(t0.elapsed() < Duration::from_secs(2));
        let (s, mut c) = pair(&l);
        c.write_all(b"ab").unwrap();
        first_byte(&s, Duration::from_secs(1)).unwrap();
        let mut b = [0u8; 2];
        assert_eq!(s.peek(&mut b).unwrap(), 2);
        let (s, c) = pair(&l);
        drop(c);
        assert!(matches!(
            first_byte(&s, Duration::from_secs(1)).unwrap_err(),
            SessionError::Control(ControlError::PeerClosed { .. })
        ));
    }
}
