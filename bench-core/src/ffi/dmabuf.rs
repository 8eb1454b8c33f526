//! File descriptors for dma-buf registration tests without a GPU: a sealed memfd, and a
//! dma-buf made of it by the kernel's udmabuf device.

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
    let fd =
        u32::try_from(memfd.as_raw_fd()).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
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
