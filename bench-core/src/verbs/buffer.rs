//! Registered memory: page-aligned host memory today, dma-buf (GPU) memory through
//! [`super::Pd::register_dmabuf`].
//!
//! A [`Buffer`] never hands out Rust references to its bytes: the peer writes into them by
//! RDMA at any time, so they are only ever named by address, length and key. (Inline data is
//! copied from a separate plain vector by the engine.)

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use sideway::ibverbs::memory_region::MemoryRegion;

use super::device::DevMeta;
use super::MrInfo;
use crate::error::Error;
use crate::ffi::LocalSge;

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

/// Page-aligned host memory that is never resized or moved while registered.
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

    pub(crate) fn pages_mut(&mut self) -> &mut [Page] {
        &mut self.pages
    }

    /// Copies `init` to the first bytes (before registration: nothing else sees them yet).
    pub(crate) fn init(&mut self, init: &[u8]) {
        for (page, chunk) in self.pages.iter_mut().zip(init.chunks(PAGE)) {
            page.0[..chunk.len()].copy_from_slice(chunk);
        }
    }

    fn addr(&self) -> u64 {
        self.pages.as_ptr() as u64
    }

    /// Exposes the pages' address for [`crate::ffi::load_landed_byte`] and
    /// [`crate::ffi::store_sent_byte`], after the last `&mut` to them (registration).
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

enum Memory {
    Host(HostMemory),
    /// Device memory behind a dma-buf; `owner` keeps the exporter's allocation alive.
    Dmabuf {
        owner: Option<Box<dyn Any + Send + Sync>>,
    },
}

impl fmt::Debug for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Memory::Host(h) => h.fmt(f),
            Memory::Dmabuf { owner } => f
                .debug_struct("Dmabuf")
                .field("owner", &owner.is_some())
                .finish(),
        }
    }
}

// Field order matters: `mr` is dropped (deregistered) before `memory` is freed.
#[derive(Debug)]
struct Inner {
    mr: Arc<MemoryRegion>,
    memory: Memory,
    addr: u64,
    len: u64,
    meta: Arc<DevMeta>,
}

/// Registered memory: a memory region and the memory behind it, freed in that order.
/// Cloning shares it.
#[derive(Debug, Clone)]
pub struct Buffer {
    inner: Arc<Inner>,
}

impl Buffer {
    pub(crate) fn host(mr: Arc<MemoryRegion>, mut mem: HostMemory, meta: Arc<DevMeta>) -> Buffer {
        mem.expose();
        let addr = mem.addr();
        let len = mem.len();
        Buffer {
            inner: Arc::new(Inner {
                mr,
                memory: Memory::Host(mem),
                addr,
                len,
                meta,
            }),
        }
    }

    pub(crate) fn dmabuf(mr: Arc<MemoryRegion>, iova: u64, len: u64, meta: Arc<DevMeta>) -> Buffer {
        Buffer {
            inner: Arc::new(Inner {
                mr,
                memory: Memory::Dmabuf { owner: None },
                addr: iova,
                len,
                meta,
            }),
        }
    }

    /// Attaches an owner (e.g. the CUDA allocation a dma-buf was exported from) that is
    /// dropped only after the region is deregistered. Returns `self` unchanged for host
    /// memory or when the buffer is already shared.
    pub fn with_owner(mut self, owner: Box<dyn Any + Send + Sync>) -> Buffer {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            if let Memory::Dmabuf { owner: slot } = &mut inner.memory {
                *slot = Some(owner);
            }
        }
        self
    }

    /// Address of the first byte (virtual address, or the IOVA for dma-buf).
    pub fn addr(&self) -> u64 {
        self.inner.addr
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.inner.len
    }

    /// Whether the length is zero (never, for buffers made here).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// Whether this is host memory.
    pub fn is_host(&self) -> bool {
        matches!(self.inner.memory, Memory::Host(_))
    }

    /// The owner attached with [`Buffer::with_owner`], if any.
    pub(crate) fn owner(&self) -> Option<&(dyn Any + Send + Sync)> {
        match &self.inner.memory {
            Memory::Dmabuf { owner } => owner.as_deref(),
            Memory::Host(_) => None,
        }
    }

    /// Copies `out.len()` bytes from `offset` of host memory into `out`; `false` for device
    /// memory (read it through its owner) or a range outside the buffer.
    pub(crate) fn read_host(&self, offset: u64, out: &mut [u8]) -> bool {
        match (&self.inner.memory, usize::try_from(offset)) {
            (Memory::Host(h), Ok(off)) => crate::ffi::read_registered_pages(&h.pages, off, out),
            _ => false,
        }
    }

    /// The latency test: the byte at `offset` of host memory as it is now (the peer's write
    /// landing in it); `None` for device memory or an offset outside the buffer.
    pub(crate) fn load_landed(&self, offset: u64) -> Option<u8> {
        match &self.inner.memory {
            Memory::Host(h) => crate::ffi::load_landed_byte(h, offset),
            Memory::Dmabuf { .. } => None,
        }
    }

    /// The latency test: stores `value` at `offset` of host memory (the last byte of this
    /// side's next write); `false` for device memory or an offset outside the buffer.
    pub(crate) fn store_sent(&self, offset: u64, value: u8) -> bool {
        match &self.inner.memory {
            Memory::Host(h) => crate::ffi::store_sent_byte(h, offset, value),
            Memory::Dmabuf { .. } => false,
        }
    }

    /// Local key.
    pub fn lkey(&self) -> u32 {
        self.inner.mr.lkey()
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        self.inner.mr.rkey()
    }

    /// Name of the device it is registered on.
    pub fn device_name(&self) -> &str {
        &self.inner.meta.name
    }

    /// What the peer needs to write `len` bytes at `offset`.
    pub fn mr_info(&self, offset: u64, len: u64) -> Result<MrInfo, Error> {
        self.check(offset, len)?;
        Ok(MrInfo {
            addr: self.inner.addr + offset,
            len,
            rkey: self.rkey(),
        })
    }

    fn check(&self, offset: u64, len: u64) -> Result<(), Error> {
        match offset.checked_add(len) {
            Some(end) if end <= self.inner.len => Ok(()),
            _ => Err(Error::InvalidParams(format!(
                "range {offset}+{len} exceeds the {}-byte buffer on {}",
                self.inner.len, self.inner.meta.name
            ))),
        }
    }

    /// A scatter/gather element for `len` bytes at `offset`.
    pub(crate) fn sge(&self, offset: u64, len: u32) -> Result<LocalSge, Error> {
        self.check(offset, u64::from(len))?;
        Ok(LocalSge {
            addr: self.inner.addr + offset,
            len,
            lkey: self.lkey(),
        })
    }
}
