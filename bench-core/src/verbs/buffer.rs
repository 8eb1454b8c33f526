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
use crate::ffi::{HostRegion, LocalSge};
pub use crate::ffi::{Page, PAGE};

enum Memory {
    /// Host memory and its region, owned together.
    Host(HostRegion),
    /// Device memory behind a dma-buf (or a GPU allocation registered by address); `owner`
    /// keeps the exporter's allocation alive. Field order: the region is deregistered before
    /// the owner is dropped.
    Dmabuf {
        mr: Arc<MemoryRegion>,
        owner: Option<Box<dyn Any + Send + Sync>>,
    },
}

impl fmt::Debug for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Memory::Host(h) => h.fmt(f),
            Memory::Dmabuf { owner, .. } => f
                .debug_struct("Dmabuf")
                .field("owner", &owner.is_some())
                .finish(),
        }
    }
}

#[derive(Debug)]
struct Inner {
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
    pub(crate) fn host(region: HostRegion, meta: Arc<DevMeta>) -> Buffer {
        let addr = region.memory().addr();
        let len = region.memory().len();
        Buffer {
            inner: Arc::new(Inner {
                memory: Memory::Host(region),
                addr,
                len,
                meta,
            }),
        }
    }

    pub(crate) fn dmabuf(mr: Arc<MemoryRegion>, iova: u64, len: u64, meta: Arc<DevMeta>) -> Buffer {
        Buffer {
            inner: Arc::new(Inner {
                memory: Memory::Dmabuf { mr, owner: None },
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
            if let Memory::Dmabuf { owner: slot, .. } = &mut inner.memory {
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
            Memory::Dmabuf { owner, .. } => owner.as_deref(),
            Memory::Host(_) => None,
        }
    }

    /// Copies `out.len()` bytes from `offset` of host memory into `out`; `false` for device
    /// memory (read it through its owner) or a range outside the buffer.
    pub(crate) fn read_host(&self, offset: u64, out: &mut [u8]) -> bool {
        match (&self.inner.memory, usize::try_from(offset)) {
            (Memory::Host(r), Ok(off)) => crate::ffi::read_registered_pages(r.memory(), off, out),
            _ => false,
        }
    }

    /// The latency test: the byte at `offset` of host memory as it is now (the peer's write
    /// landing in it); `None` for device memory or an offset outside the buffer.
    pub(crate) fn load_landed(&self, offset: u64) -> Option<u8> {
        match &self.inner.memory {
            Memory::Host(r) => crate::ffi::load_landed_byte(r.memory(), offset),
            Memory::Dmabuf { .. } => None,
        }
    }

    /// The latency test: stores `value` at `offset` of host memory (the last byte of this
    /// side's next write); `false` for device memory or an offset outside the buffer.
    pub(crate) fn store_sent(&self, offset: u64, value: u8) -> bool {
        match &self.inner.memory {
            Memory::Host(r) => crate::ffi::store_sent_byte(r.memory(), offset, value),
            Memory::Dmabuf { .. } => false,
        }
    }

    /// Local key.
    pub fn lkey(&self) -> u32 {
        match &self.inner.memory {
            Memory::Host(r) => r.lkey(),
            Memory::Dmabuf { mr, .. } => mr.lkey(),
        }
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        match &self.inner.memory {
            Memory::Host(r) => r.rkey(),
            Memory::Dmabuf { mr, .. } => mr.rkey(),
        }
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
