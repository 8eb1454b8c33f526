//! The only module with `unsafe` code: small safe wrappers around calls that sideway, cudarc
//! or libc mark unsafe. Each states the invariant that makes it sound. The [`cuda`] and
//! [`dmabuf`] sections serve [`crate::gpu`].
#![allow(unsafe_code)]
//!
//! One file a concern: [`verbs`] (registration, posts, completions), [`sched`] (threads and
//! CPUs), [`cuda`] and [`dmabuf`] (for [`crate::gpu`]), [`ethtool`] and [`netlink`] (for
//! [`crate::counters`]). The items keep their `ffi::` paths.

pub(crate) mod cuda;
pub(crate) mod dmabuf;
mod ethtool;
pub(crate) mod netlink;
mod pingpong;
mod sched;
mod verbs;

pub use ethtool::ethtool_stats;
pub(crate) use pingpong::{load_landed_byte, store_sent_byte};
pub use sched::{
    allowed_cpus, current_cpu, pin_current_thread, process_cpu_time, set_thread_sched_idle,
};
pub(crate) use verbs::*;
