//! Host memory for RDMA: page-aligned pages ([`HostMemory`]) and their registration with a
//! device ([`HostRegion`], which owns both so that the device never touches freed memory), and
//! the copy out of them that `--data_validation` makes.

use std::fmt;
use std::sync::Arc;

use sideway::ibverbs::memory_region::{MemoryRegion, RegisterMemoryRegionError};
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::AccessFlags;

/// Host page size the allocation is aligned to.
pub const PAGE: usize = 4096;

/// One page of host memory, page-aligned.
#[derive(Clone, Copy)]
#[repr(C, align(4096))]
pub struct Page(pub(crate) [u8; PAGE]);

impl fmt::Debug for Page {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Page")
    }
}

/// Page-aligned host memory that is never resized or moved while registered: its pages are
/// only written before registration ([`HostMemory::init`]), and afterwards only named by the
/// address [`HostMemory::expose`] exposed.
pub(crate) struct HostMemory {
    pages: Vec<Page>,
    /// The pages' address with its provenance exposed, once registered ([`HostMemory::expose`]);
    /// 0 before. The latency test's byte loads and stores go through it.
    exposed: usize,
}

impl fmt::Debug for HostMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostMemory")
            .field("bytes", &self.len())
            .finish()
    }
}

impl HostMemory {
    /// Zeroed memory of at least `bytes` (at least one page).
    pub(crate) fn new(bytes: u64) -> Option<HostMemory> {
        let bytes = usize::try_from(bytes).ok()?;
        let n = bytes.div_ceil(PAGE).max(1);
        let mut pages = Vec::new();
        pages.try_reserve_exact(n).ok()?;
        pages.resize(n, Page([0; PAGE]));
        Some(HostMemory { pages, exposed: 0 })
    }

    pub(crate) fn len(&self) -> u64 {
        (self.pages.len() * PAGE) as u64
    }

    fn pages_mut(&mut self) -> &mut [Page] {
        &mut self.pages
    }

    /// Copies `init` to the first bytes (before registration: nothing else sees them yet).
    pub(crate) fn init(&mut self, init: &[u8]) {
        for (page, chunk) in self.pages.iter_mut().zip(init.chunks(PAGE)) {
            page.0[..chunk.len()].copy_from_slice(chunk);
        }
    }

    pub(crate) fn addr(&self) -> u64 {
        self.pages.as_ptr() as u64
    }

    /// Exposes the pages' address for [`read_registered_pages`] and the latency test's byte
    /// loads and stores ([`super::load_landed_byte`], [`super::store_sent_byte`]), after the
    /// last `&mut` to them (registration).
    fn expose(&mut self) {
        self.exposed = self.pages.as_mut_ptr().expose_provenance();
    }

    /// The exposed address and the length in bytes (0 before [`HostMemory::expose`]).
    pub(crate) fn exposed(&self) -> (usize, u64) {
        if self.exposed == 0 {
            (0, 0)
        } else {
            (self.exposed, self.len())
        }
    }
}

/// Registers host pages (`ibv_reg_mr`).
///
/// # Safety
/// From the call until the returned region is deregistered (its last `Arc` dropped), the
/// device may read and write `pages` at any time. The caller must keep them allocated at the
/// same address (never freed, resized or moved) for as long as the region exists.
unsafe fn reg_host_pages(
    pd: &Arc<ProtectionDomain>,
    pages: &mut [Page],
    access: AccessFlags,
) -> Result<Arc<MemoryRegion>, RegisterMemoryRegionError> {
    let ptr = pages.as_mut_ptr() as usize;
    let len = std::mem::size_of_val(pages);
    // SAFETY: `ptr..ptr+len` is `pages`, live and writable for the call (an exclusive
    // borrow); the caller keeps it allocated where it is for as long as the region exists
    // (this function's contract).
    unsafe { pd.reg_mr(ptr, len, access) }
}

/// Host memory registered with a device, owning both: the region is deregistered before the
/// memory is freed (field order), and the region never leaves this struct (it is neither
/// cloned nor handed out), so the device touches the memory only while it is allocated.
pub(crate) struct HostRegion {
    mr: Arc<MemoryRegion>,
    memory: HostMemory,
}

impl fmt::Debug for HostRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostRegion")
            .field("bytes", &self.memory.len())
            .field("lkey", &self.mr.lkey())
            .finish()
    }
}

impl HostRegion {
    /// Registers `memory` on `pd` with `access` and keeps both; then exposes the pages'
    /// address for the latency test's byte loads and stores ([`HostMemory::expose`]).
    pub(crate) fn register(
        pd: &Arc<ProtectionDomain>,
        mut memory: HostMemory,
        access: AccessFlags,
    ) -> Result<HostRegion, RegisterMemoryRegionError> {
        // SAFETY: `memory` moves into the `HostRegion` returned, which keeps the region to
        // itself and drops it before `memory` (field order). `HostMemory` never resizes its
        // pages, and moving it does not move them (they are a `Vec`'s heap allocation). On an
        // error no region exists.
        let mr = unsafe { reg_host_pages(pd, memory.pages_mut(), access) }?;
        memory.expose();
        Ok(HostRegion { mr, memory })
    }

    /// The memory registered.
    pub(crate) fn memory(&self) -> &HostMemory {
        &self.memory
    }

    /// The region's local key.
    pub(crate) fn lkey(&self) -> u32 {
        self.mr.lkey()
    }

    /// The region's remote key.
    pub(crate) fn rkey(&self) -> u32 {
        self.mr.rkey()
    }
}

/// Copies `out.len()` bytes of registered host memory, from byte `offset`, into `out`
/// (`--data_validation` reads what the peer wrote); `false` when the range is outside it.
///
/// Sound because the range is checked against the allocation, which `mem` (borrowed for the
/// call) keeps alive and never moves, and the bytes are read through the address exposed at
/// registration, never through a Rust reference, so the compiler assumes nothing about them;
/// the caller reads only after the peer's writes have completed (its `Done` came), and a byte
/// the device changed during the copy would only make the check fail, never make the copy
/// unsound (any bit pattern is a valid `u8`). The fence orders the copy after whatever told the
/// caller that the writes are complete.
pub(crate) fn read_registered_pages(mem: &HostMemory, offset: usize, out: &mut [u8]) -> bool {
    let (base, len) = mem.exposed();
    match offset.checked_add(out.len()) {
        Some(end) if end as u64 <= len => {}
        _ => return false,
    }
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    let src: *const u8 = std::ptr::with_exposed_provenance(base);
    // SAFETY: `src + offset .. src + offset + out.len()` lies inside the allocation (checked
    // above), which outlives the call and carries the provenance exposed at registration; `out`
    // is a distinct, exclusively borrowed slice.
    unsafe {
        std::ptr::copy_nonoverlapping(src.add(offset), out.as_mut_ptr(), out.len());
    }
    true
}
