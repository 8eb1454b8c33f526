//! The only module with `unsafe` code: small safe wrappers around calls that sideway, cudarc
//! or libc mark unsafe. Each states the invariant that makes it sound; where soundness rests
//! on the caller, the function is an `unsafe fn` whose `# Safety` says what the caller must
//! uphold, and its callers are here too: a safe owner discharges it (host memory is registered
//! only inside [`HostRegion`], which keeps the memory for as long as its region exists). Every
//! `unsafe` block says why it is sound (`// SAFETY:`, enforced by clippy's
//! `undocumented_unsafe_blocks` at the crate root). The [`cuda`] and [`dmabuf`] sections serve
//! [`crate::gpu`].
//!
//! One file a concern: [`host`] (host memory and its registration), [`verbs`] (other
//! registration, posts, completions), [`sched`] (threads and
//! CPUs), [`cuda`] and [`dmabuf`] (for [`crate::gpu`]), [`ethtool`] and [`netlink`] (for
//! [`crate::counters`]). The items keep their `ffi::` paths.
#![allow(unsafe_code)]

pub(crate) mod cuda;
pub(crate) mod dmabuf;
mod ethtool;
mod host;
pub(crate) mod netlink;
mod pingpong;
mod sched;
mod verbs;

pub use ethtool::ethtool_stats;
pub(crate) use host::{read_registered_pages, HostMemory, HostRegion};
pub use host::{Page, PAGE};
pub(crate) use pingpong::{load_landed_byte, store_sent_byte};
pub use sched::{
    allowed_cpus, current_cpu, pin_current_thread, process_cpu_time, set_thread_sched_idle,
};
pub(crate) use verbs::*;
