//! bench-core: the verbs engine of railbench: RC queue pairs doing RDMA WRITE over one rail,
//! with a control channel that never hangs.
//!
//! `unsafe` code lives in the `ffi` module alone; every other module forbids it. There, every
//! unsafe block says why it is sound and every `unsafe fn` says what its caller must uphold.
#![deny(unsafe_code)]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

pub mod control;
pub mod counters;
pub mod diagnosis;
pub mod engine;
pub mod error;
pub mod failure;
pub mod ffi;
pub mod gid;
pub mod gpu;
pub mod neigh;
pub mod numa;
pub mod perftest;
pub mod probe;
pub mod rails;
pub mod session;
pub mod sysfs;
pub mod topology;
pub mod verbs;
