//! Unit tests of the probe's readings.

use wire::probe::Status;

use super::pod::given_gpus;
use super::system::{human, size_option, Memlock, CAP_IPC_LOCK, GIB, MIB};

#[test]
fn memlock_allows_what_the_limit_or_ipc_lock_allows() {
    let m = |limit_kib, caps| Memlock { limit_kib, caps };
    let ipc = 1 << CAP_IPC_LOCK;
    assert_eq!(m(Some(64), Some(0)).allows(64 * 1024), Some(true));
    assert_eq!(m(Some(64), Some(0)).allows(64 * 1024 + 1), Some(false));
    assert_eq!(m(Some(64), Some(ipc)).allows(u64::MAX), Some(true));
    assert_eq!(m(Some(u64::MAX), None).allows(u64::MAX), Some(true));
    assert_eq!(m(None, Some(0)).allows(1), None);
    assert_eq!(m(None, None).ipc_lock(), None);
}

#[test]
fn shm_sizes() {
    assert_eq!(size_option("rw,size=65536k,inode64"), Some(64 * MIB));
    assert_eq!(size_option("rw,size=32g"), Some(32 * GIB));
    assert_eq!(size_option("rw,inode64"), None);
    assert_eq!(human(64 * MIB), "64 MiB");
    assert_eq!(human(32 * GIB), "32 GiB");
    assert_eq!(human(64 * 1024), "64 KiB");
}

#[test]
fn gpus_given() {
    assert_eq!(given_gpus(Some("0,1,2,3"), 8), Some(4));
    assert_eq!(given_gpus(Some("all"), 8), Some(8));
    assert_eq!(given_gpus(Some("void"), 8), None);
    assert_eq!(given_gpus(Some("none"), 8), Some(0));
    assert_eq!(given_gpus(None, 8), None);
}

#[test]
fn status_json_is_upper_case() {
    assert_eq!(
        serde_json::to_string(&Status::Warn).unwrap_or_default(),
        "\"WARN\""
    );
}
