//! A NETLINK_RDMA socket with a receive timeout (so that no read waits longer than `timeout`),
//! and the calls on it: [`crate::counters`] speaks the RDMA netlink protocol over them.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

const NETLINK_RDMA: libc::c_int = 20;

/// Opens the socket.
pub(crate) fn rdma_socket(timeout: Duration) -> Option<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the fd is owned from here on.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_RDMA,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is a fresh, open descriptor that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: libc::suseconds_t::from(timeout.subsec_micros() as i32),
    };
    // SAFETY: `tv` is a valid timeval and its size is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    (rc == 0).then_some(sock)
}

/// Sends one datagram to the kernel.
pub(crate) fn send(sock: &OwnedFd, msg: &[u8]) -> Option<()> {
    // SAFETY: `msg` is a valid buffer of its length for the duration of the call.
    let n = unsafe { libc::send(sock.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    (n == msg.len() as isize).then_some(())
}

/// Receives one datagram into `buf`: its length, or `None` on an error or the timeout.
pub(crate) fn recv(sock: &OwnedFd, buf: &mut [u8]) -> Option<usize> {
    // SAFETY: `buf` is valid, writable memory of its length for the duration of the call.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    usize::try_from(n).ok()
}
