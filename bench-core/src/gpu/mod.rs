//! GPU memory for GPUDirect RDMA: test buffers in CUDA memory, registered with the NIC, on the
//! GPU nearest each rail.
//!
//! `ib_write_bw --use_cuda` in railbench form. A buffer is allocated with `cuMemAlloc` on the
//! GPU [`GpuSelect`](wire::gpu::GpuSelect) names (an index, a PCI bus id, or `auto`: the GPU nearest the rail's NIC,
//! see [`crate::topology`]), then registered with the NIC by one of two paths
//! ([`CudaMemPath`](wire::gpu::CudaMemPath)):
//!
//! - **dma-buf**: the allocation is exported as a dma-buf (`cuMemGetHandleForAddressRange`)
//!   and registered with `ibv_reg_dmabuf_mr`. Needs a GPU driver with dma-buf support
//!   (`CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`, open kernel modules), kernel >= 5.12, and a NIC
//!   driver that takes dma-buf memory (mlx5 with a recent driver). rxe cannot.
//! - **peermem**: the device address is registered with plain `ibv_reg_mr`; the kernel
//!   resolves it through the `nvidia_peermem` module. Needs that module loaded on the host.
//!
//! `auto` takes dma-buf when the GPU can export it and falls back to peermem when the NIC
//! refuses dma-buf memory. [`MemoryUse`] records what was used, for the report.
//!
//! cudarc loads `libcuda` at run time and panics when it is missing; [`Cuda::load`] looks for
//! it first, so a binary without a CUDA driver runs and fails only `--use_cuda`, with
//! [`GpuError::NoDriverLibrary`]. Every `unsafe` call lives in [`crate::ffi`].

mod cuda;
mod error;
pub mod list;
pub mod selftest;

use std::any::Any;
use std::fmt;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sideway::ibverbs::AccessFlags;
use wire::gpu::{CudaMemPath, GpuSelect, GpuUse};
use wire::MemoryKind;

pub use cuda::{Cuda, Gpu, GpuInfo, GpuMemory, GPU_PAGE};
pub use error::GpuError;

use crate::error::{errno_symbol, Error};
use crate::verbs::{Buffer, Pd};

/// What memory a test actually used.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MemoryUse {
    /// Host, or which GPU path.
    pub kind: MemoryKind,
    /// The GPU, for CUDA memory.
    pub gpu: Option<GpuUse>,
}

impl MemoryUse {
    /// Host memory.
    pub fn host() -> MemoryUse {
        MemoryUse::default()
    }
}

impl fmt::Display for MemoryUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.as_str())?;
        if let Some(g) = &self.gpu {
            write!(
                f,
                " on GPU {} ({} {}, {})",
                g.index, g.pci_bus_id, g.name, g.chosen_by
            )?;
        }
        Ok(())
    }
}

/// Keeps what a GPU buffer's memory region points into alive until after it is deregistered
/// (the [`Buffer`]'s owner slot is dropped after its region).
#[derive(Debug)]
struct GpuOwner {
    // Field order: the dma-buf fd is closed before the memory is freed.
    _dmabuf: Option<OwnedFd>,
    memory: GpuMemory,
}

fn access() -> AccessFlags {
    AccessFlags::LocalWrite | AccessFlags::RemoteWrite
}

fn register_dmabuf(pd: &Pd, mem: &GpuMemory) -> Result<(Buffer, OwnedFd), GpuError> {
    let fd = mem.export_dmabuf()?;
    let buf = pd.register_dmabuf(fd.as_fd(), 0, mem.len(), mem.addr())?;
    Ok((buf, fd))
}

fn register_peermem(pd: &Pd, mem: &GpuMemory) -> Result<Buffer, GpuError> {
    let mr = crate::ffi::reg_cuda_alloc(&pd.pd, mem.device_alloc(), access()).map_err(|e| {
        let source = match e.0 {
            sideway::ibverbs::memory_region::RegisterMemoryRegionErrorKind::Ibverbs(e) => e,
            other => std::io::Error::other(other.to_string()),
        };
        match source.raw_os_error() {
            Some(libc::ENOMEM) => GpuError::Verbs(Error::MemlockTooLow {
                device: pd.device_name().to_string(),
                bytes: mem.len(),
                limit_kib: crate::sysfs::memlock_limit_kib(&pd.meta.roots),
            }),
            code => GpuError::PeermemRefused {
                device: pd.device_name().to_string(),
                bytes: mem.len(),
                errno: match code {
                    Some(c) => format!("{} ({})", errno_symbol(c), errno_text(&source)),
                    None => source.to_string(),
                },
            },
        }
    })?;
    Ok(Buffer::dmabuf(
        mr,
        mem.addr(),
        mem.len(),
        Arc::clone(&pd.meta),
    ))
}

fn errno_text(e: &std::io::Error) -> String {
    let t = e.to_string();
    t.split(" (os error").next().unwrap_or(&t).to_string()
}

/// Allocates `bytes` of CUDA memory on the GPU `gpu` names and registers it on `pd`'s device
/// by `path`. `auto` picks the GPU nearest `pd`'s NIC (sysfs under the device's roots). The
/// first bytes are `init` (copied in with `cuMemcpyHtoD`; `--data_validation`'s pattern).
pub fn alloc_buffer(
    pd: &Pd,
    bytes: u64,
    gpu: &GpuSelect,
    path: CudaMemPath,
    init: &[u8],
) -> Result<(Buffer, MemoryUse), GpuError> {
    let cuda = Cuda::load()?;
    let (info, chosen_by) = cuda.select(gpu, &pd.meta.roots, Some(pd.device_name()))?;
    let g = cuda.open(&info)?;
    let mem = g.alloc(bytes)?;
    if !init.is_empty() {
        mem.write(0, init)?;
    }
    let use_of = |kind| MemoryUse {
        kind,
        gpu: Some(GpuUse {
            index: info.index,
            name: info.name.clone(),
            pci_bus_id: info.pci_bus_id.clone(),
            chosen_by: chosen_by.clone(),
        }),
    };
    let (buf, fd, kind) = match path {
        CudaMemPath::Dmabuf => {
            let (b, fd) = register_dmabuf(pd, &mem)?;
            (b, Some(fd), MemoryKind::CudaDmabuf)
        }
        CudaMemPath::Peermem => (register_peermem(pd, &mem)?, None, MemoryKind::CudaPeermem),
        CudaMemPath::Auto => match register_dmabuf(pd, &mem) {
            Ok((b, fd)) => (b, Some(fd), MemoryKind::CudaDmabuf),
            Err(
                e @ (GpuError::DmabufExportUnsupported { .. }
                | GpuError::Verbs(Error::DmabufUnsupported { .. })),
            ) => match register_peermem(pd, &mem) {
                Ok(b) => (b, None, MemoryKind::CudaPeermem),
                Err(p) => {
                    return Err(GpuError::NoPath {
                        device: pd.device_name().to_string(),
                        dmabuf: e.to_string(),
                        peermem: p.to_string(),
                    })
                }
            },
            Err(e) => return Err(e),
        },
    };
    let owner: Box<dyn Any + Send + Sync> = Box::new(GpuOwner {
        _dmabuf: fd,
        memory: mem,
    });
    Ok((buf.with_owner(owner), use_of(kind)))
}

/// Copies `out.len()` bytes from `offset` of a GPU buffer made by [`alloc_buffer`] to `out`
/// (`cuMemcpyDtoH`), e.g. to check what the peer wrote there.
pub fn read_buffer(buf: &Buffer, offset: u64, out: &mut [u8]) -> Result<(), GpuError> {
    match buf.owner().and_then(|o| o.downcast_ref::<GpuOwner>()) {
        Some(owner) => owner.memory.read(offset, out),
        None => Err(GpuError::Invalid(format!(
            "the buffer on {} is not GPU memory from alloc_buffer",
            buf.device_name()
        ))),
    }
}

/// Where a host dma-buf for [`check_dmabuf_registration`] came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostDmabufSource {
    /// A real dma-buf from the kernel's udmabuf device over a sealed memfd.
    Udmabuf {
        /// The device node used.
        device: PathBuf,
    },
    /// No udmabuf device: a plain memfd (not a dma-buf). A driver without dma-buf support
    /// refuses before looking at the fd; one with it refuses the fd itself (EINVAL/EBADF).
    Memfd {
        /// Why udmabuf was not used.
        why: String,
    },
}

impl fmt::Display for HostDmabufSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostDmabufSource::Udmabuf { device } => {
                write!(f, "a dma-buf from {} over a sealed memfd", device.display())
            }
            HostDmabufSource::Memfd { why } => {
                write!(f, "a plain memfd, not a dma-buf ({why})")
            }
        }
    }
}

/// A host dma-buf of `len` bytes (page multiple): from `<dev>/udmabuf` when it can be opened,
/// else a plain memfd, saying which.
pub fn host_dmabuf(
    roots: &crate::sysfs::SysRoots,
    len: u64,
) -> Result<(OwnedFd, File, HostDmabufSource), GpuError> {
    let memfd = crate::ffi::dmabuf::sealed_memfd(len).map_err(|source| GpuError::Io {
        what: format!("creating a sealed memfd of {len} bytes"),
        source,
    })?;
    let dev = roots.dev.join("udmabuf");
    match crate::ffi::dmabuf::udmabuf(&dev, &memfd, len) {
        Ok(fd) => Ok((fd, memfd, HostDmabufSource::Udmabuf { device: dev })),
        Err(e) => {
            let why = format!("{}: {}", dev.display(), e);
            let plain = memfd.try_clone().map_err(|source| GpuError::Io {
                what: "duplicating the memfd".into(),
                source,
            })?;
            Ok((OwnedFd::from(plain), memfd, HostDmabufSource::Memfd { why }))
        }
    }
}

/// Registers a host dma-buf of `len` bytes on `pd`'s device: does this NIC take dma-buf
/// memory at all? (No GPU needed.) Returns the source used and the registration's outcome.
pub fn check_dmabuf_registration(
    pd: &Pd,
    len: u64,
) -> Result<(HostDmabufSource, Result<Buffer, GpuError>), GpuError> {
    let len = len.max(1).div_ceil(4096) * 4096;
    let (fd, memfd, source) = host_dmabuf(&pd.meta.roots, len)?;
    let reg = pd.register_dmabuf(fd.as_fd(), 0, len, 0);
    let reg = reg
        .map(|b| {
            let owner: Box<dyn Any + Send + Sync> = Box::new((fd, memfd));
            b.with_owner(owner)
        })
        .map_err(GpuError::from);
    Ok((source, reg))
}

/// Checks before any work starts that `sel` can work here: the CUDA driver loads and, for an
/// index or bus id, that GPU exists (`auto` needs the test's NIC and is resolved later; it
/// only needs some GPU). Returns the GPUs CUDA sees.
pub fn preflight(sel: &GpuSelect) -> Result<Vec<GpuInfo>, GpuError> {
    let cuda = Cuda::load()?;
    match sel {
        GpuSelect::Auto => {
            let gpus = cuda.gpus()?;
            if gpus.is_empty() {
                return Err(GpuError::NoGpus);
            }
            Ok(gpus)
        }
        other => {
            cuda.select(other, &crate::sysfs::SysRoots::default(), None)?;
            cuda.gpus()
        }
    }
}
