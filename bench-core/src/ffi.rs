//! The only module with `unsafe` code: four small safe wrappers around calls that sideway or
//! libc mark unsafe. Each states the invariant that makes it sound.
#![allow(unsafe_code)]

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

/// User plus system CPU time this process has used so far (`getrusage(RUSAGE_SELF)`).
pub fn process_cpu_time() -> Duration {
    // SAFETY: `rusage` is plain old data for which all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; getrusage writes only into it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
