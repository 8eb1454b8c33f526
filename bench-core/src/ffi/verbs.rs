//! Verbs calls that sideway and rdma-mummy-sys leave unsafe: memory registration, the
//! scatter-gather entry of a post, completion polling and completion-channel events, and the
//! waits on their file descriptors.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;
use std::time::Duration;

use sideway::ibverbs::memory_region::{MemoryRegion, RegisterMemoryRegionError};
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{LocalBufferHandle, PostSendGuard, SetScatterGatherEntry};
use sideway::ibverbs::AccessFlags;

use crate::verbs::buffer::Page;

/// Registers host pages.
///
/// Sound because the pointer and length come from a live, exclusively borrowed slice. The
/// caller (`verbs::buffer`) keeps the pages allocated and never moves them (a `Vec` that is
/// never resized) for as long as the returned region exists: the region is dropped (and
/// deregistered, after which the device no longer touches the memory) before the pages, by
/// field order of the owning struct.
pub(crate) fn reg_host_pages(
    pd: &Arc<ProtectionDomain>,
    pages: &mut [Page],
    access: AccessFlags,
) -> Result<Arc<MemoryRegion>, RegisterMemoryRegionError> {
    let ptr = pages.as_mut_ptr() as usize;
    let len = std::mem::size_of_val(pages);
    // SAFETY: `ptr..ptr+len` is valid, writable memory (see above for its lifetime).
    unsafe { pd.reg_mr(ptr, len, access) }
}

/// Copies `out.len()` bytes of registered host pages, from byte `offset` of `pages`, into
/// `out` (`--data_validation` reads what the peer wrote).
///
/// Sound because the range is checked against `pages` (a live allocation borrowed for the
/// call) and the bytes are read through a raw pointer, never a Rust reference, so the compiler
/// assumes nothing about them; the caller reads only after the peer's writes have completed
/// (its `Done` came), and a byte the device changed during the copy would only make the check
/// fail, never make the copy unsound (any bit pattern is a valid `u8`). The fence orders the
/// copy after whatever told the caller that the writes are complete.
pub(crate) fn read_registered_pages(pages: &[Page], offset: usize, out: &mut [u8]) -> bool {
    let len = std::mem::size_of_val(pages);
    match offset.checked_add(out.len()) {
        Some(end) if end <= len => {}
        _ => return false,
    }
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    let src = pages.as_ptr().cast::<u8>();
    // SAFETY: `src + offset .. src + offset + out.len()` lies inside `pages` (checked above),
    // which outlives the call; `out` is a distinct, exclusively borrowed slice.
    unsafe {
        std::ptr::copy_nonoverlapping(src.add(offset), out.as_mut_ptr(), out.len());
    }
    true
}

/// Registers dma-buf memory.
///
/// Sound because the kernel validates the file descriptor (a borrowed, open fd; if it is not
/// a dma-buf the call fails) and the range against the dma-buf's size; no host memory is
/// touched by the call.
pub(crate) fn reg_dmabuf(
    pd: &Arc<ProtectionDomain>,
    fd: BorrowedFd<'_>,
    offset: u64,
    len: usize,
    iova: u64,
    access: AccessFlags,
) -> Result<Arc<MemoryRegion>, RegisterMemoryRegionError> {
    // SAFETY: see above.
    unsafe { pd.reg_dmabuf_mr(offset, len, iova, fd.as_raw_fd(), access) }
}

/// Registers GPU memory by its device address, for the peer-memory path (`nvidia_peermem`).
///
/// Sound because this process never dereferences `addr`: the kernel resolves the range
/// through a peer-memory client (nvidia_peermem pins the GPU pages) or fails the call (EFAULT
/// when no client claims it). The caller (`gpu`) keeps the CUDA allocation alive until the
/// region is deregistered (it is the owner of the `verbs::Buffer`, dropped after the region).
pub(crate) fn reg_device_va(
    pd: &Arc<ProtectionDomain>,
    addr: u64,
    len: usize,
    access: AccessFlags,
) -> Result<Arc<MemoryRegion>, RegisterMemoryRegionError> {
    let ptr = usize::try_from(addr).unwrap_or(usize::MAX);
    // SAFETY: see above.
    unsafe { pd.reg_mr(ptr, len, access) }
}

/// A local scatter/gather element inside a registered memory region. Only
/// `verbs::buffer::Buffer` makes these, with bounds checked against its region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalSge {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    pub(crate) lkey: u32,
}

/// Attaches `sge` to a work request being built.
///
/// Sound because `sge` lies inside a registered region (checked where it is made), and the
/// region outlives the work request: the engine drops its QPs, which stops the device, before
/// the buffer, and deregistration also revokes device access before the memory is freed.
pub(crate) fn set_sge<G: PostSendGuard>(handle: LocalBufferHandle<'_, G>, sge: LocalSge) {
    // SAFETY: see above.
    unsafe { handle.setup_sge(sge.lkey, sge.addr, sge.len) }
}

/// Waits until `a` or `b` can be read from (data, end of stream or an error), or `timeout`
/// has passed (`poll(2)`): whether each can. A signal ends the wait early with neither.
pub(crate) fn wait_readable(
    a: BorrowedFd<'_>,
    b: BorrowedFd<'_>,
    timeout: Duration,
) -> std::io::Result<(bool, bool)> {
    let mut fds = [a, b].map(|fd| libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    });
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fds` is an array of two initialised pollfd that outlives the call, and the
    // borrowed descriptors stay open for it.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        return match e.kind() {
            std::io::ErrorKind::Interrupted => Ok((false, false)),
            _ => Err(e),
        };
    }
    let ready = |p: &libc::pollfd| p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0;
    Ok((ready(&fds[0]), ready(&fds[1])))
}

/// One work completion as `ibv_poll_cq` leaves it.
pub(crate) type RawWc = rdma_mummy_sys::ibv_wc;

/// Polls `cq` into `wcs` (`ibv_poll_cq`); returns the completions written, at the front of
/// `wcs`, or the negative errno. sideway's own poll allocates its result buffer on every call;
/// the engine's loop polls millions of times, so it polls into a buffer of its own.
pub(crate) fn poll_cq<'a>(
    cq: &sideway::ibverbs::completion::BasicCompletionQueue,
    wcs: &'a mut [std::mem::MaybeUninit<RawWc>],
) -> Result<&'a [RawWc], i32> {
    use sideway::ibverbs::completion::CompletionQueue;
    let max = i32::try_from(wcs.len()).unwrap_or(i32::MAX);
    // SAFETY: `cq` is borrowed for the call, so its ibv_cq is alive; `wcs` is writable for
    // `max` entries and ibv_poll_cq writes at most `max`. MaybeUninit<T> has T's layout.
    let n = unsafe { rdma_mummy_sys::ibv_poll_cq(cq.cq().as_ptr(), max, wcs.as_mut_ptr().cast()) };
    if n < 0 {
        return Err(n);
    }
    let n = (n as usize).min(wcs.len());
    // SAFETY: ibv_poll_cq initialised the first `n` entries (plain old data).
    Ok(unsafe { std::slice::from_raw_parts(wcs.as_ptr().cast::<RawWc>(), n) })
}

/// Arms `cq` (`ibv_req_notify_cq` for every completion, not only solicited ones): the next
/// completion added to it raises one event on its completion channel. The errno on failure.
pub(crate) fn req_notify_cq(
    cq: &sideway::ibverbs::completion::BasicCompletionQueue,
) -> Result<(), i32> {
    use sideway::ibverbs::completion::CompletionQueue;
    // SAFETY: `cq` is borrowed for the call, so its ibv_cq (and its context) is alive; the call
    // only asks the provider to arm it.
    let rc = unsafe { rdma_mummy_sys::ibv_req_notify_cq(cq.cq().as_ptr(), 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(rc)
    }
}

/// Takes one event from `channel` (`ibv_get_cq_event`) and acknowledges it at once
/// (`ibv_ack_cq_events`: `ibv_destroy_cq` waits until every event taken is acknowledged).
/// `cq` must be the only CQ attached to `channel`, whose descriptor is non-blocking: `Ok(false)`
/// when no event is pending.
pub(crate) fn take_cq_event(
    channel: &sideway::ibverbs::completion::CompletionChannel,
    cq: &sideway::ibverbs::completion::BasicCompletionQueue,
) -> std::io::Result<bool> {
    use sideway::ibverbs::completion::CompletionQueue;
    let mut ev_cq: *mut rdma_mummy_sys::ibv_cq = std::ptr::null_mut();
    let mut ev_ctx: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: `channel` is borrowed for the call, so its ibv_comp_channel is alive; the two out
    // pointers are live locals that the call writes.
    let rc = unsafe {
        rdma_mummy_sys::ibv_get_cq_event(channel.comp_channel().as_ptr(), &mut ev_cq, &mut ev_ctx)
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => Ok(false),
            _ => Err(e),
        };
    }
    // SAFETY: as in `req_notify_cq`, `cq` is alive.
    let ours = unsafe { cq.cq() }.as_ptr();
    if ev_cq != ours {
        // Cannot happen while `cq` is the channel's only CQ; acking a CQ we do not hold would
        // not be sound, so the event is left unacknowledged and reported.
        return Err(std::io::Error::other(
            "a completion event for another CQ on this CQ's channel",
        ));
    }
    // SAFETY: `ours` is the live CQ the event was for, and this acknowledges the one event just
    // taken.
    unsafe { rdma_mummy_sys::ibv_ack_cq_events(ours, 1) };
    Ok(true)
}

/// Waits until `fd` can be read from (or has an error), or `timeout` has passed (`ppoll(2)`,
/// to the microsecond): whether it can. A signal ends the wait early with `false`.
pub(crate) fn wait_fd_readable<F: AsRawFd + ?Sized>(
    fd: &F,
    timeout: Duration,
) -> std::io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `pfd` is one initialised pollfd and `ts` a valid timespec, both outliving the
    // call; `fd`'s owner is borrowed, so the descriptor stays open for it (an invalid one
    // would only come back as POLLNVAL); a null signal mask keeps this thread's.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        return match e.kind() {
            std::io::ErrorKind::Interrupted => Ok(false),
            _ => Err(e),
        };
    }
    Ok(pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0)
}
