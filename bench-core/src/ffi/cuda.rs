//! CUDA driver calls (through cudarc's raw API), each behind a safe signature, for
//! [`crate::gpu`].
//!
//! The invariant that makes cudarc usable at all: cudarc loads `libcuda.so` on the first call
//! and *panics* when it cannot. So every call here is a method of [`cuda::Driver`], which only
//! [`cuda::Driver::load`] makes, after `is_culib_present()` has found the library and
//! `cuInit` has succeeded. Calls that need a newer driver than the oldest one we accept check
//! [`cuda::Driver::version`] first (cudarc panics on a missing symbol too).

use std::ffi::{c_int, c_void, CStr};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::{sys, CudaContext};

/// `cuMemGetHandleForAddressRange` (dma-buf export) appeared in CUDA 11.7.
pub(crate) const DMABUF_EXPORT_MIN_VERSION: i32 = 11070;

/// Proof that libcuda is loaded and initialised.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Driver {
    version: i32,
}

/// Why the driver could not be loaded.
#[derive(Debug)]
pub(crate) enum LoadError {
    /// No `libcuda.so`/`libcuda.so.1` could be opened.
    NoLibrary,
    /// It loaded but `cuDriverGetVersion` or `cuInit` failed.
    Init(&'static str, DriverError),
}

impl Driver {
    /// Loads libcuda and calls `cuInit(0)`.
    pub(crate) fn load() -> Result<Driver, LoadError> {
        // SAFETY: is_culib_present only tries to dlopen the library names and drops them.
        if !unsafe { sys::is_culib_present() } {
            return Err(LoadError::NoLibrary);
        }
        let mut version: c_int = 0;
        // SAFETY: the library is present (checked above); the pointer is a live c_int.
        unsafe { sys::cuDriverGetVersion(&mut version) }
            .result()
            .map_err(|e| LoadError::Init("cuDriverGetVersion", e))?;
        result::init().map_err(|e| LoadError::Init("cuInit", e))?;
        Ok(Driver { version })
    }

    /// The driver's CUDA version, e.g. 13000 for 13.0.
    pub(crate) fn version(&self) -> i32 {
        self.version
    }

    /// Number of devices this process sees.
    pub(crate) fn device_count(&self) -> Result<i32, DriverError> {
        result::device::get_count()
    }

    /// Name of device `ordinal`.
    pub(crate) fn name(&self, ordinal: i32) -> Result<String, DriverError> {
        result::device::get_name(result::device::get(ordinal)?)
    }

    /// An attribute of device `ordinal`.
    pub(crate) fn attribute(
        &self,
        ordinal: i32,
        attr: sys::CUdevice_attribute,
    ) -> Result<i32, DriverError> {
        let dev = result::device::get(ordinal)?;
        // SAFETY: `dev` was just returned by cuDeviceGet.
        unsafe { result::device::get_attribute(dev, attr) }
    }

    /// Total memory of device `ordinal` in bytes.
    pub(crate) fn total_mem(&self, ordinal: i32) -> Result<usize, DriverError> {
        let dev = result::device::get(ordinal)?;
        // SAFETY: `dev` was just returned by cuDeviceGet.
        unsafe { result::device::total_mem(dev) }
    }

    /// PCI bus id of device `ordinal` as the driver spells it (`0000:0F:00.0`).
    pub(crate) fn pci_bus_id(&self, ordinal: i32) -> Result<String, DriverError> {
        let dev = result::device::get(ordinal)?;
        let mut buf = [0u8; 32];
        // SAFETY: `buf` is writable for its full length, which is passed; the driver
        // writes a NUL-terminated string of at most that many bytes.
        unsafe { sys::cuDeviceGetPCIBusId(buf.as_mut_ptr().cast(), buf.len() as c_int, dev) }
            .result()?;
        Ok(CStr::from_bytes_until_nul(&buf)
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default())
    }

    /// Retains the primary context of device `ordinal`.
    pub(crate) fn context(&self, ordinal: usize) -> Result<Arc<CudaContext>, DriverError> {
        CudaContext::new(ordinal)
    }
}

/// Device memory from `cuMemAlloc`, freed (in its context) on drop.
#[derive(Debug)]
pub(crate) struct DeviceAlloc {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
    len: usize,
}

impl DeviceAlloc {
    /// `cuMemAlloc(len)` in `ctx`.
    pub(crate) fn new(
        _driver: &Driver,
        ctx: &Arc<CudaContext>,
        len: usize,
    ) -> Result<DeviceAlloc, DriverError> {
        ctx.bind_to_thread()?;
        // SAFETY: the context is current; the memory is only ever accessed through the
        // bounds-checked copies below (its contents being uninitialised is fine for bytes).
        let ptr = unsafe { result::malloc_sync(len) }?;
        Ok(DeviceAlloc {
            ctx: Arc::clone(ctx),
            ptr,
            len,
        })
    }

    /// The device address of the first byte.
    pub(crate) fn addr(&self) -> u64 {
        self.ptr
    }

    /// Bytes allocated.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Sets `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` (as perftest does): copies to and from this
    /// memory complete before the NIC may touch it.
    pub(crate) fn set_sync_memops(&self) -> Result<(), DriverError> {
        self.ctx.bind_to_thread()?;
        let flag: u32 = 1;
        // SAFETY: `ptr` is a live allocation of this context; `flag` outlives the call.
        unsafe {
            sys::cuPointerSetAttribute(
                (&flag as *const u32).cast::<c_void>(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                self.ptr,
            )
        }
        .result()
    }

    /// Exports the whole allocation as a dma-buf file descriptor
    /// (`cuMemGetHandleForAddressRange`, `CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD`). The caller
    /// has checked [`Driver::version`] against [`DMABUF_EXPORT_MIN_VERSION`].
    pub(crate) fn export_dmabuf(&self) -> Result<OwnedFd, DriverError> {
        self.ctx.bind_to_thread()?;
        let mut fd: c_int = -1;
        // SAFETY: `ptr..ptr+len` is one live allocation; `fd` is a live c_int the driver
        // writes the new descriptor into.
        unsafe {
            sys::cuMemGetHandleForAddressRange(
                (&mut fd as *mut c_int).cast::<c_void>(),
                self.ptr,
                self.len,
                sys::CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                0,
            )
        }
        .result()?;
        if fd < 0 {
            return Err(DriverError(sys::CUresult::CUDA_ERROR_INVALID_HANDLE));
        }
        // SAFETY: the driver just opened `fd` for us and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Copies `data` to `offset` (`cuMemcpyHtoD`); `false` when it does not fit.
    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> Result<bool, DriverError> {
        if offset
            .checked_add(data.len())
            .is_none_or(|end| end > self.len)
        {
            return Ok(false);
        }
        self.ctx.bind_to_thread()?;
        // SAFETY: the range lies inside the live allocation (checked above).
        unsafe { result::memcpy_htod_sync(self.ptr + offset as u64, data) }?;
        Ok(true)
    }

    /// Copies from `offset` into `out` (`cuMemcpyDtoH`); `false` when it does not fit.
    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) -> Result<bool, DriverError> {
        if offset
            .checked_add(out.len())
            .is_none_or(|end| end > self.len)
        {
            return Ok(false);
        }
        self.ctx.bind_to_thread()?;
        // SAFETY: the range lies inside the live allocation (checked above).
        unsafe { result::memcpy_dtoh_sync(out, self.ptr + offset as u64) }?;
        Ok(true)
    }

    /// Frees the memory now and reports the driver's answer (drop frees it silently).
    pub(crate) fn free(mut self) -> Result<(), DriverError> {
        self.free_inner()
    }

    fn free_inner(&mut self) -> Result<(), DriverError> {
        if self.ptr == 0 {
            return Ok(());
        }
        self.ctx.bind_to_thread()?;
        let ptr = std::mem::replace(&mut self.ptr, 0);
        // SAFETY: `ptr` came from cuMemAlloc in this context and is freed once (zeroed
        // above). Whoever registered it with a NIC has deregistered it first: the owner of
        // a `verbs::Buffer` is dropped after its memory region.
        unsafe { result::free_sync(ptr) }
    }
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        let _ = self.free_inner();
    }
}
