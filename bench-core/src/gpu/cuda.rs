//! The CUDA driver as railbench uses it: load it, list GPUs, pick one, allocate, export a
//! dma-buf, copy bytes in and out, free.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use cudarc::driver::result::DriverError;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::CudaContext;
use serde::{Deserialize, Serialize};
use wire::gpu::{ChosenBy, GpuSelect};

use super::error::GpuError;
use crate::ffi::cuda::{DeviceAlloc, Driver, LoadError, DMABUF_EXPORT_MIN_VERSION};
use crate::sysfs::SysRoots;
use crate::topology::{self, normalize_bus_id};

/// `CUDA_ERROR_NAME (description)` for messages.
pub(crate) fn code(e: &DriverError) -> String {
    let name = e
        .error_name()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name} ({})", s.to_string_lossy()),
        Err(_) => name,
    }
}

/// A GPU as CUDA shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// CUDA device ordinal (`--use_cuda N`).
    pub index: u32,
    /// Marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// PCI bus id in sysfs spelling, `0000:0f:00.0`.
    pub pci_bus_id: String,
    /// Device memory in bytes.
    pub total_mem_bytes: u64,
    /// Compute capability, e.g. `9.0`.
    pub compute_capability: String,
    /// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED` (and a driver new enough to export).
    pub dmabuf_supported: bool,
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED`.
    pub gpudirect_rdma_supported: bool,
}

impl GpuInfo {
    /// `INDEX (BUS_ID)` for messages.
    pub fn label(&self) -> String {
        format!("{} ({})", self.index, self.pci_bus_id)
    }
}

/// The loaded CUDA driver.
#[derive(Debug, Clone, Copy)]
pub struct Cuda {
    driver: Driver,
}

impl Cuda {
    /// Loads `libcuda` and initialises it. Without the library this is
    /// [`GpuError::NoDriverLibrary`] (never a panic: the library is looked for before cudarc
    /// is asked for anything).
    pub fn load() -> Result<Cuda, GpuError> {
        match Driver::load() {
            Ok(driver) => Ok(Cuda { driver }),
            Err(LoadError::NoLibrary) => Err(GpuError::NoDriverLibrary),
            Err(LoadError::Init(call, e)) => Err(GpuError::DriverInit {
                call,
                code: code(&e),
            }),
        }
    }

    /// The CUDA version the driver supports, as `(major, minor)`, e.g. `(13, 0)`.
    pub fn driver_version(&self) -> (i32, i32) {
        let v = self.driver.version();
        (v / 1000, (v % 1000) / 10)
    }

    /// Every GPU CUDA sees, in CUDA order.
    pub fn gpus(&self) -> Result<Vec<GpuInfo>, GpuError> {
        let n = self
            .driver
            .device_count()
            .map_err(|e| GpuError::DriverInit {
                call: "cuDeviceGetCount",
                code: code(&e),
            })?;
        (0..n).map(|i| self.info(i)).collect()
    }

    fn info(&self, ordinal: i32) -> Result<GpuInfo, GpuError> {
        let d = &self.driver;
        let fail = |what: &str, e: DriverError| GpuError::Cuda {
            what: what.to_string(),
            gpu: ordinal.to_string(),
            code: code(&e),
        };
        let raw_bus = d
            .pci_bus_id(ordinal)
            .map_err(|e| fail("cuDeviceGetPCIBusId", e))?;
        let attr = |a| d.attribute(ordinal, a).unwrap_or(0);
        Ok(GpuInfo {
            index: u32::try_from(ordinal).unwrap_or(0),
            name: d.name(ordinal).map_err(|e| fail("cuDeviceGetName", e))?,
            pci_bus_id: normalize_bus_id(&raw_bus).unwrap_or(raw_bus),
            total_mem_bytes: d.total_mem(ordinal).map(|b| b as u64).unwrap_or(0),
            compute_capability: format!(
                "{}.{}",
                attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
            ),
            dmabuf_supported: d.version() >= DMABUF_EXPORT_MIN_VERSION
                && attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) == 1,
            gpudirect_rdma_supported: attr(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED,
            ) == 1,
        })
    }

    /// The GPU `sel` names. `Auto` picks the GPU nearest `rdma_device` among those CUDA sees
    /// ([`topology::nearest_gpu`]), reading sysfs under `roots`.
    pub fn select(
        &self,
        sel: &GpuSelect,
        roots: &SysRoots,
        rdma_device: Option<&str>,
    ) -> Result<(GpuInfo, ChosenBy), GpuError> {
        let gpus = self.gpus()?;
        if gpus.is_empty() {
            return Err(GpuError::NoGpus);
        }
        let available = || {
            gpus.iter()
                .map(|g| format!("{} ({} {})", g.index, g.pci_bus_id, g.name))
                .collect()
        };
        match sel {
            GpuSelect::Index(i) => gpus
                .iter()
                .find(|g| g.index == *i)
                .map(|g| (g.clone(), ChosenBy::Index))
                .ok_or_else(|| GpuError::NoSuchGpu {
                    asked: i.to_string(),
                    available: available(),
                }),
            GpuSelect::BusId(b) => {
                let want = normalize_bus_id(b).ok_or_else(|| {
                    GpuError::Topology(topology::TopologyError::BadBusId { text: b.clone() })
                })?;
                gpus.iter()
                    .find(|g| g.pci_bus_id == want)
                    .map(|g| (g.clone(), ChosenBy::BusId))
                    .ok_or_else(|| GpuError::NoSuchGpu {
                        asked: format!("with PCI bus id {want}"),
                        available: available(),
                    })
            }
            GpuSelect::Auto => {
                let dev = rdma_device.ok_or_else(|| {
                    GpuError::Invalid(
                        "--use_cuda auto needs the RDMA device of the test (-d or --netdev)".into(),
                    )
                })?;
                let seen: Vec<String> = gpus.iter().map(|g| g.pci_bus_id.clone()).collect();
                let choice = topology::nearest_gpu(roots, dev, Some(&seen))?;
                let g = gpus
                    .iter()
                    .find(|g| g.pci_bus_id == choice.gpu)
                    .ok_or_else(|| GpuError::NoSuchGpu {
                        asked: format!("with PCI bus id {}", choice.gpu),
                        available: available(),
                    })?;
                Ok((
                    g.clone(),
                    ChosenBy::Nearest {
                        device: dev.to_string(),
                        distance: choice.distance,
                    },
                ))
            }
        }
    }

    /// Retains `info`'s primary context.
    pub fn open(&self, info: &GpuInfo) -> Result<Gpu, GpuError> {
        let ctx = self
            .driver
            .context(info.index as usize)
            .map_err(|e| GpuError::Cuda {
                what: "retaining the primary context".into(),
                gpu: info.label(),
                code: code(&e),
            })?;
        Ok(Gpu {
            cuda: *self,
            info: info.clone(),
            ctx,
        })
    }
}

/// A GPU with its primary context retained.
#[derive(Debug, Clone)]
pub struct Gpu {
    cuda: Cuda,
    info: GpuInfo,
    ctx: Arc<CudaContext>,
}

/// Allocations are rounded up to this (the GPU page GPUDirect RDMA pins).
pub const GPU_PAGE: u64 = 64 * 1024;

impl Gpu {
    /// What CUDA says about it.
    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// `cuMemAlloc` of `bytes` rounded up to [`GPU_PAGE`], with
    /// `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` set (as perftest does for GPUDirect).
    pub fn alloc(&self, bytes: u64) -> Result<GpuMemory, GpuError> {
        let len = bytes.max(1).div_ceil(GPU_PAGE) * GPU_PAGE;
        let ulen = usize::try_from(len)
            .map_err(|_| GpuError::Invalid(format!("{bytes} bytes cannot be allocated here")))?;
        let alloc =
            DeviceAlloc::new(&self.cuda.driver, &self.ctx, ulen).map_err(|e| GpuError::Cuda {
                what: format!("cuMemAlloc of {len} bytes"),
                gpu: self.info.label(),
                code: code(&e),
            })?;
        alloc.set_sync_memops().map_err(|e| GpuError::Cuda {
            what: "cuPointerSetAttribute(SYNC_MEMOPS)".into(),
            gpu: self.info.label(),
            code: code(&e),
        })?;
        Ok(GpuMemory {
            alloc,
            gpu: self.info.clone(),
        })
    }
}

/// Device memory of one GPU, freed on drop.
#[derive(Debug)]
pub struct GpuMemory {
    alloc: DeviceAlloc,
    gpu: GpuInfo,
}

impl GpuMemory {
    /// Device address of the first byte.
    pub fn addr(&self) -> u64 {
        self.alloc.addr()
    }

    /// Bytes.
    pub fn len(&self) -> u64 {
        self.alloc.len() as u64
    }

    /// Whether the length is zero (never: allocations are at least one GPU page).
    pub fn is_empty(&self) -> bool {
        self.alloc.len() == 0
    }

    /// The GPU it lives on.
    pub fn gpu(&self) -> &GpuInfo {
        &self.gpu
    }

    /// The allocation, for registering it with a NIC ([`crate::ffi::reg_cuda_alloc`]).
    pub(crate) fn device_alloc(&self) -> &DeviceAlloc {
        &self.alloc
    }

    /// Exports all of it as a dma-buf (`cuMemGetHandleForAddressRange`).
    pub fn export_dmabuf(&self) -> Result<OwnedFd, GpuError> {
        if !self.gpu.dmabuf_supported {
            return Err(GpuError::DmabufExportUnsupported {
                gpu: self.gpu.label(),
                why: "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0, or the driver is older than CUDA 11.7".into(),
            });
        }
        self.alloc
            .export_dmabuf()
            .map_err(|e| GpuError::DmabufExportUnsupported {
                gpu: self.gpu.label(),
                why: format!("cuMemGetHandleForAddressRange failed with {}", code(&e)),
            })
    }

    /// Copies `data` in at `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), GpuError> {
        let off = usize::try_from(offset).unwrap_or(usize::MAX);
        match self.alloc.write(off, data) {
            Ok(true) => Ok(()),
            Ok(false) => Err(GpuError::Invalid(format!(
                "{} bytes at {offset} exceed the {}-byte GPU buffer",
                data.len(),
                self.len()
            ))),
            Err(e) => Err(GpuError::Cuda {
                what: format!("cuMemcpyHtoD of {} bytes", data.len()),
                gpu: self.gpu.label(),
                code: code(&e),
            }),
        }
    }

    /// Copies `out.len()` bytes out from `offset`.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), GpuError> {
        let off = usize::try_from(offset).unwrap_or(usize::MAX);
        match self.alloc.read(off, out) {
            Ok(true) => Ok(()),
            Ok(false) => Err(GpuError::Invalid(format!(
                "{} bytes at {offset} exceed the {}-byte GPU buffer",
                out.len(),
                self.len()
            ))),
            Err(e) => Err(GpuError::Cuda {
                what: format!("cuMemcpyDtoH of {} bytes", out.len()),
                gpu: self.gpu.label(),
                code: code(&e),
            }),
        }
    }

    /// Frees it now (`cuMemFree`), reporting the driver's answer.
    pub fn free(self) -> Result<(), GpuError> {
        let gpu = self.gpu.label();
        self.alloc.free().map_err(|e| GpuError::Cuda {
            what: "cuMemFree".into(),
            gpu,
            code: code(&e),
        })
    }
}
