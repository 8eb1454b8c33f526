//! The only module with `unsafe` code: small safe wrappers around calls that sideway, cudarc
//! or libc mark unsafe. Each states the invariant that makes it sound. The [`cuda`] and
//! [`dmabuf`] sections serve [`crate::gpu`].
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

/// Moves the calling thread to the `SCHED_IDLE` scheduling class: from then on it runs only
/// while no ordinary thread wants its CPU, and any that wakes takes the CPU at once. For an
/// unprivileged thread this is one-way (going back needs `CAP_SYS_NICE`).
pub fn set_thread_sched_idle() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param that outlives the call; pid 0 names the calling
    // thread, and the call changes nothing but its scheduling class.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The CPUs the calling thread may run on (`sched_getaffinity`).
pub fn allowed_cpus() -> std::io::Result<Vec<u32>> {
    // SAFETY: cpu_set_t is plain old data for which all-zero bytes are a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed; pid 0 is this thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let max = u32::try_from(libc::CPU_SETSIZE).unwrap_or(1024);
    // SAFETY: CPU_ISSET reads the set within its bounds (cpu < CPU_SETSIZE).
    Ok((0..max)
        .filter(|c| unsafe { libc::CPU_ISSET(*c as usize, &set) })
        .collect())
}

/// Lets the calling thread run on `cpu` only (`sched_setaffinity`).
pub fn pin_current_thread(cpu: u32) -> std::io::Result<()> {
    let cpu = cpu as usize;
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    // SAFETY: as in `allowed_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE, so CPU_SET writes inside the set.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The CPU the calling thread is running on now (`sched_getcpu`).
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments and only returns a number.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).ok()
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

/// CUDA driver calls (through cudarc's raw API), each behind a safe signature, for
/// [`crate::gpu`].
///
/// The invariant that makes cudarc usable at all: cudarc loads `libcuda.so` on the first call
/// and *panics* when it cannot. So every call here is a method of [`cuda::Driver`], which only
/// [`cuda::Driver::load`] makes, after `is_culib_present()` has found the library and
/// `cuInit` has succeeded. Calls that need a newer driver than the oldest one we accept check
/// [`cuda::Driver::version`] first (cudarc panics on a missing symbol too).
pub(crate) mod cuda {
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
}

/// File descriptors for dma-buf registration tests without a GPU: a sealed memfd, and a
/// dma-buf made of it by the kernel's udmabuf device.
pub(crate) mod dmabuf {
    use std::fs::File;
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::path::Path;

    /// `struct udmabuf_create` of `<linux/udmabuf.h>`.
    #[repr(C)]
    struct UdmabufCreate {
        memfd: u32,
        flags: u32,
        offset: u64,
        size: u64,
    }

    /// `_IOW('u', 0x42, struct udmabuf_create)`.
    const UDMABUF_CREATE: libc::c_ulong = 0x4018_7542;
    /// `UDMABUF_FLAGS_CLOEXEC`.
    const UDMABUF_FLAGS_CLOEXEC: u32 = 1;

    /// A memfd of `len` bytes, sealed against shrinking (what udmabuf requires).
    pub(crate) fn sealed_memfd(len: u64) -> io::Result<File> {
        // The raw system call rather than glibc's wrapper, which only glibc 2.27 and later
        // have: the rdmabw that `--inject` copies is built for glibc 2.17.
        // SAFETY: the name is a NUL-terminated literal; the flags are valid.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_memfd_create,
                c"railbench-dmabuf".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        } as libc::c_int;
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: memfd_create just returned this descriptor and nothing else owns it.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        file.set_len(len)?;
        // SAFETY: F_ADD_SEALS on a descriptor we own, with a valid seal mask.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(file)
    }

    /// A dma-buf over all of `memfd` (page-multiple length), from the udmabuf device at `dev`
    /// (`/dev/udmabuf`).
    pub(crate) fn udmabuf(dev: &Path, memfd: &File, len: u64) -> io::Result<OwnedFd> {
        let ctl = File::options().read(true).write(true).open(dev)?;
        let fd = u32::try_from(memfd.as_raw_fd())
            .map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        let arg = UdmabufCreate {
            memfd: fd,
            flags: UDMABUF_FLAGS_CLOEXEC,
            offset: 0,
            size: len,
        };
        // SAFETY: UDMABUF_CREATE reads one `struct udmabuf_create`, which `arg` is (repr(C),
        // live for the call); the kernel returns a new descriptor or -1.
        let out = unsafe {
            libc::ioctl(
                ctl.as_raw_fd(),
                UDMABUF_CREATE,
                &arg as *const UdmabufCreate,
            )
        };
        if out < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel just opened `out` for us and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(out) })
    }
}

/// The driver's ethtool statistics of interface `ifname` in this network namespace (`ethtool
/// -S`): names and values; empty when the interface or the driver has none, or on any error.
pub fn ethtool_stats(ifname: &str) -> Vec<(String, u64)> {
    ethtool::stats(ifname).unwrap_or_default()
}

mod ethtool {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    const ETHTOOL_GSTRINGS: u32 = 0x1b;
    const ETHTOOL_GSTATS: u32 = 0x1d;
    const ETHTOOL_GSSET_INFO: u32 = 0x37;
    const ETH_SS_STATS: u32 = 1;
    const ETH_GSTRING_LEN: usize = 32;
    /// More statistics than any driver has (mlx5 has about 1,500 with every queue).
    const MAX_STATS: usize = 1 << 16;

    /// One SIOCETHTOOL request whose command block is `buf` (u64s, so aligned for every field).
    ///
    /// Sound because `ifr` is a zeroed `ifreq` with a NUL-terminated name shorter than
    /// IFNAMSIZ, and `ifru_data` points at `buf`, which is large enough for the reply of the
    /// command it holds (the callers size it from the counts the kernel gave) and outlives the
    /// call.
    fn request(sock: &OwnedFd, ifname: &str, buf: &mut [u64]) -> Option<()> {
        // SAFETY: all-zero is a valid ifreq.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in ifr.ifr_name.iter_mut().zip(ifname.bytes()) {
            *d = s as libc::c_char;
        }
        ifr.ifr_ifru.ifru_data = buf.as_mut_ptr().cast();
        // SAFETY: see above.
        let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL, &mut ifr) };
        (rc == 0).then_some(())
    }

    /// `buf` as bytes.
    fn bytes(buf: &mut [u64]) -> &mut [u8] {
        let len = std::mem::size_of_val(buf);
        // SAFETY: any u64 memory is valid as bytes, the length is the same memory's.
        unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast(), len) }
    }

    fn put_u32(buf: &mut [u64], at: usize, v: u32) {
        bytes(buf)[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }

    fn get_u32(buf: &mut [u64], at: usize) -> u32 {
        let b = bytes(buf);
        u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    pub(super) fn stats(ifname: &str) -> Option<Vec<(String, u64)>> {
        if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
            return None;
        }
        // SAFETY: socket(2) with constant arguments; the fd is owned from here on.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` is a fresh, open descriptor that nothing else owns.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        // struct ethtool_sset_info { u32 cmd; u32 reserved; u64 sset_mask; u32 data[]; }
        let mut info = [0u64; 3];
        put_u32(&mut info, 0, ETHTOOL_GSSET_INFO);
        info[1] = 1 << ETH_SS_STATS;
        request(&sock, ifname, &mut info)?;
        if info[1] & (1 << ETH_SS_STATS) == 0 {
            return None;
        }
        let n = (get_u32(&mut info, 16) as usize).min(MAX_STATS);
        if n == 0 {
            return None;
        }
        // struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[]; }
        let mut names = vec![0u64; (12 + n * ETH_GSTRING_LEN).div_ceil(8)];
        put_u32(&mut names, 0, ETHTOOL_GSTRINGS);
        put_u32(&mut names, 4, ETH_SS_STATS);
        put_u32(&mut names, 8, n as u32);
        request(&sock, ifname, &mut names)?;
        // struct ethtool_stats { u32 cmd; u32 n_stats; u64 data[]; }
        let mut values = vec![0u64; 1 + n];
        put_u32(&mut values, 0, ETHTOOL_GSTATS);
        put_u32(&mut values, 4, n as u32);
        request(&sock, ifname, &mut values)?;
        let got = (get_u32(&mut values, 4) as usize).min(n);
        let text = bytes(&mut names);
        Some(
            (0..got)
                .map(|i| {
                    let raw = &text[12 + i * ETH_GSTRING_LEN..12 + (i + 1) * ETH_GSTRING_LEN];
                    let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
                    let name = String::from_utf8_lossy(&raw[..end]).trim().to_string();
                    (name, values[1 + i])
                })
                .filter(|(name, _)| !name.is_empty())
                .collect(),
        )
    }
}

/// A NETLINK_RDMA socket with a receive timeout (so that no read waits longer than `timeout`),
/// and the calls on it: [`crate::counters`] speaks the RDMA netlink protocol over them.
pub(crate) mod netlink {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Duration;

    const NETLINK_RDMA: libc::c_int = 20;

    /// Opens the socket.
    pub(crate) fn rdma_socket(timeout: Duration) -> Option<OwnedFd> {
        // SAFETY: socket(2) with constant arguments; the fd is owned from here on.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_RDMA,
            )
        };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` is a fresh, open descriptor that nothing else owns.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        let tv = libc::timeval {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_usec: libc::suseconds_t::from(timeout.subsec_micros() as i32),
        };
        // SAFETY: `tv` is a valid timeval and its size is passed with it.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        (rc == 0).then_some(sock)
    }

    /// Sends one datagram to the kernel.
    pub(crate) fn send(sock: &OwnedFd, msg: &[u8]) -> Option<()> {
        // SAFETY: `msg` is a valid buffer of its length for the duration of the call.
        let n = unsafe { libc::send(sock.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        (n == msg.len() as isize).then_some(())
    }

    /// Receives one datagram into `buf`: its length, or `None` on an error or the timeout.
    pub(crate) fn recv(sock: &OwnedFd, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: `buf` is valid, writable memory of its length for the duration of the call.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        usize::try_from(n).ok()
    }
}
