//! The latency test's memory polling (`rdmabw lat`, as ib_write_lat): this side stores the
//! sequence byte of its next write into registered host memory, and watches the last byte of
//! the peer's write land in it.
//!
//! Both work on [`HostMemory`] by the address it exposed when it was allocated, never through a
//! Rust reference to its bytes: the device writes them at any time.

use super::host::HostMemory;

/// Reads byte `offset` of registered host memory as it is now (a volatile load: each call reads
/// memory again, so a loop sees the peer's RDMA write arrive), then orders later reads after
/// it (acquire), so that a caller that saw the last byte of a message reads the rest after it.
/// `None` when `offset` is outside the memory.
///
/// Sound because `offset` is checked against the allocation, which `mem` (borrowed for the
/// call) keeps alive and never moves; the address carries the provenance exposed when the
/// allocation was made; and any bit pattern is a valid `u8`, so a byte the device changes
/// during the load is still a value.
pub(crate) fn load_landed_byte(mem: &HostMemory, offset: u64) -> Option<u8> {
    let (base, len) = mem.exposed();
    if offset >= len {
        return None;
    }
    let addr = base.checked_add(usize::try_from(offset).ok()?)?;
    let p: *const u8 = std::ptr::with_exposed_provenance(addr);
    // SAFETY: `p` is inside the allocation (checked above), which `mem` keeps alive and
    // unmoved for the call, with the provenance exposed when it was registered; no reference
    // to these bytes exists, and whatever the device wrote is a valid `u8`.
    let v = unsafe { std::ptr::read_volatile(p) };
    std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
    Some(v)
}

/// Stores `value` at byte `offset` of registered host memory (a volatile store, ordered before
/// the post that follows by a release fence), where this side's next write reads its last
/// byte from. `false` when `offset` is outside the memory.
///
/// Sound because `offset` is checked against the allocation, which `mem` (borrowed for the
/// call) keeps alive and never moves; the address carries the write provenance exposed from
/// `Vec::as_mut_ptr` when the allocation was made, and no Rust reference to these bytes exists
/// (the buffer names them only by address: [`crate::verbs::Buffer`]). The device only reads
/// this half (the source of this side's writes), which the store does not make unsound, only
/// possibly stale for a write already posted.
pub(crate) fn store_sent_byte(mem: &HostMemory, offset: u64, value: u8) -> bool {
    let (base, len) = mem.exposed();
    if offset >= len {
        return false;
    }
    let Some(addr) = usize::try_from(offset)
        .ok()
        .and_then(|o| base.checked_add(o))
    else {
        return false;
    };
    let p: *mut u8 = std::ptr::with_exposed_provenance_mut(addr);
    // SAFETY: `p` is inside the allocation (checked above), which `mem` keeps alive and
    // unmoved for the call, with the write provenance exposed when it was registered; no
    // reference to these bytes exists (the device only reads this half).
    unsafe { std::ptr::write_volatile(p, value) };
    std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
    true
}
