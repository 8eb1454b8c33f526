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

use super::cuda::DeviceAlloc;

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
    // SAFETY: `fd` is borrowed, so open for the call; the kernel checks that it is a dma-buf
    // and that `offset..offset+len` lies inside it, and fails the call otherwise. The device
    // then reaches only the exporter's memory, which the dma-buf keeps, never this process's.
    unsafe { pd.reg_dmabuf_mr(offset, len, iova, fd.as_raw_fd(), access) }
}

/// Registers GPU memory by its device address (`ibv_reg_mr`), for the peer-memory path
/// (`nvidia_peermem`).
///
/// # Safety
/// `addr..addr+len` must be device memory, never host memory of this process: the kernel
/// resolves such a range through a peer-memory client (nvidia_peermem pins the GPU pages) or
/// fails the call (EFAULT when no client claims it), whereas a host range would let the
/// device write this process's memory behind Rust's back. It must stay device memory for as
/// long as the region exists.
unsafe fn reg_device_va(
    pd: &Arc<ProtectionDomain>,
    addr: u64,
    len: usize,
    access: AccessFlags,
) -> Result<Arc<MemoryRegion>, RegisterMemoryRegionError> {
    let ptr = usize::try_from(addr).unwrap_or(usize::MAX);
    // SAFETY: the range is device memory (this function's contract), which this process
    // never dereferences; the kernel validates it.
    unsafe { pd.reg_mr(ptr, len, access) }
}

/// Registers all of a CUDA allocation on `pd` by its device address, for the peer-memory path.
/// The caller (`gpu`) keeps the allocation alive until the region is deregistered (it is the
/// owner of the `verbs::Buffer`, dropped after the region), so that the device's writes land
/// in it.
pub(crate) fn reg_cuda_alloc(
    pd: &Arc<ProtectionDomain>,
    alloc: &DeviceAlloc,
    access: AccessFlags,
) -> Result<Arc<MemoryRegion>, RegisterMemoryRegionError> {
    // SAFETY: the range is one live `cuMemAlloc` allocation: device memory in CUDA's unified
    // address space, which no host allocation of this process shares (railbench allocates no
    // CUDA host memory).
    unsafe { reg_device_va(pd, alloc.addr(), alloc.len(), access) }
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
/// Sound for any `sge`: the device reaches memory only through the region its `lkey` names and
/// within that region's bounds (anything else completes the work request with a local
/// protection error), and a region's memory stays allocated for as long as the region exists
/// ([`HostRegion`]; dma-buf and GPU memory are not this process's memory). `verbs::Buffer` makes
/// these with bounds checked against its region, so that a post does not fail that way, and the
/// engine drops its QPs, which stops the device, before the buffer.
pub(crate) fn set_sge<G: PostSendGuard>(handle: LocalBufferHandle<'_, G>, sge: LocalSge) {
    // SAFETY: the device checks `sge` against the region of its `lkey`, whose memory outlives
    // the region (see the function's doc); `handle` borrows the work request being built.
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
    // SAFETY: `cq()` only copies the handle out; `cq` is borrowed for the call, so the ibv_cq
    // it names stays alive while `ours` is used below.
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
