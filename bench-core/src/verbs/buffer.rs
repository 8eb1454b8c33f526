//! Registered memory: page-aligned host memory today, dma-buf (GPU) memory through
//! [`super::Pd::register_dmabuf`].
//!
//! A [`Buffer`] never hands out Rust references to its bytes: the peer writes into them by
//! RDMA at any time, so they are only ever named by address, length and key. (Inline data is
//! copied from a separate plain vector by the engine.)

use std::any::Any;
use std::fmt;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use sideway::ibverbs::memory_region::{MemoryRegion, RegisterMemoryRegionErrorKind};
use sideway::ibverbs::AccessFlags;

use super::device::{DevMeta, Pd};
use super::MrInfo;
use crate::error::Error;
use crate::ffi::{HostMemory, HostRegion, LocalSge};
pub use crate::ffi::{Page, PAGE};
use crate::sysfs;

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

fn reg_error_source(kind: RegisterMemoryRegionErrorKind) -> io::Error {
    match kind {
        RegisterMemoryRegionErrorKind::Ibverbs(e) => e,
        other => io::Error::other(other.to_string()),
    }
}

/// Registering memory on a protection domain.
impl Pd {
    /// Allocates `bytes` of page-aligned host memory (rounded up to whole pages) and registers
    /// it with local-write and remote-write access.
    pub fn alloc_host_buffer(&self, bytes: u64) -> Result<Buffer, Error> {
        self.alloc_host_buffer_init(bytes, &[])
    }

    /// [`Pd::alloc_host_buffer`] whose first bytes are `init` (copied before registration).
    pub fn alloc_host_buffer_init(&self, bytes: u64, init: &[u8]) -> Result<Buffer, Error> {
        let mut mem = HostMemory::new(bytes).ok_or_else(|| {
            Error::InvalidParams(format!("a buffer of {bytes} bytes cannot be allocated"))
        })?;
        mem.init(init);
        let len = mem.len();
        let access = AccessFlags::LocalWrite | AccessFlags::RemoteWrite;
        let region = crate::ffi::HostRegion::register(&self.pd, mem, access).map_err(|e| {
            let source = reg_error_source(e.0);
            if source.raw_os_error() == Some(libc::ENOMEM) {
                Error::MemlockTooLow {
                    device: self.meta.name.clone(),
                    bytes: len,
                    limit_kib: sysfs::memlock_limit_kib(&self.meta.roots),
                }
            } else {
                Error::RegisterMemory {
                    device: self.meta.name.clone(),
                    kind: "host",
                    bytes: len,
                    source,
                }
            }
        })?;
        Ok(Buffer::host(region, Arc::clone(&self.meta)))
    }

    /// Registers `len` bytes of a dma-buf (e.g. GPU memory exported by CUDA) from `offset`,
    /// mapped at `iova`, with local-write and remote-write access. The caller keeps the
    /// exporter's allocation alive for as long as the returned buffer exists (attach it with
    /// [`Buffer::with_owner`]). Fails with [`Error::DmabufUnsupported`] on devices that do not
    /// support dma-buf (rxe; older mlx5 drivers).
    pub fn register_dmabuf(
        &self,
        fd: BorrowedFd<'_>,
        offset: u64,
        len: u64,
        iova: u64,
    ) -> Result<Buffer, Error> {
        let ulen = usize::try_from(len)
            .map_err(|_| Error::InvalidParams(format!("dma-buf length {len} too large")))?;
        let access = AccessFlags::LocalWrite | AccessFlags::RemoteWrite;
        let mr = crate::ffi::reg_dmabuf(&self.pd, fd, offset, ulen, iova, access).map_err(|e| {
            let source = reg_error_source(e.0);
            match source.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EPROTONOSUPPORT) => {
                    Error::DmabufUnsupported {
                        device: self.meta.name.clone(),
                        why: if self.meta.is_rxe {
                            "rxe has no dma-buf support".to_string()
                        } else {
                            format!(
                                "the {} driver or this libibverbs returned {}",
                                self.meta.driver,
                                super::errno_symbol(source.raw_os_error().unwrap_or(0))
                            )
                        },
                    }
                }
                Some(libc::ENOMEM) => Error::MemlockTooLow {
                    device: self.meta.name.clone(),
                    bytes: len,
                    limit_kib: sysfs::memlock_limit_kib(&self.meta.roots),
                },
                _ => Error::RegisterMemory {
                    device: self.meta.name.clone(),
                    kind: "dma-buf",
                    bytes: len,
                    source,
                },
            }
        })?;
        Ok(Buffer::dmabuf(mr, iova, len, Arc::clone(&self.meta)))
    }
}
