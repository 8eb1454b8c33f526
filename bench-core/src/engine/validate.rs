//! `--data_validation`: where each QP's writes of each size land, the pattern they carry, and
//! the check of what landed.
//!
//! With validation on, each QP has a slot of its own in the source half and in the landing
//! half of the buffer, and each message size of the test its own offset in that slot (the
//! sizes of an `-a` sweep add up to less than twice the largest), so a write that goes to the
//! wrong QP's slot, lands at another size's offset, or is stale from an earlier size shows up
//! as a mismatch. The pattern of QP `q` at size `s` is a function of `(q, s, byte offset)`
//! only, and every write of one QP and size carries the same bytes: a write still in flight
//! cannot turn good bytes bad, and the bytes are what the sender filled before its first post.

use serde::{Deserialize, Serialize};

use crate::verbs::buffer::PAGE;

/// Where the writes of each QP and size sit in a slot, and how big a slot is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Bytes per QP slot (page multiple).
    pub slot_bytes: u64,
    /// `(size, offset in the slot)` in test order.
    pub sizes: Vec<(u64, u64)>,
    /// QPs, one slot each.
    pub qps: u32,
}

impl Layout {
    /// The layout of a test of `sizes` (in test order) on `qps` QPs. The sums saturate at
    /// `u64::MAX` (a size no buffer limit admits) rather than wrap.
    pub fn new(sizes: &[u64], qps: u32) -> Layout {
        let mut off = 0u64;
        let mut v = Vec::with_capacity(sizes.len());
        for &s in sizes {
            v.push((s, off));
            off = off.saturating_add(s);
        }
        Layout {
            slot_bytes: off
                .max(1)
                .checked_next_multiple_of(PAGE as u64)
                .unwrap_or(u64::MAX),
            sizes: v,
            qps,
        }
    }

    /// Bytes of one half (source or landing): a slot per QP (saturating).
    pub fn half_bytes(&self) -> u64 {
        self.slot_bytes.saturating_mul(u64::from(self.qps))
    }

    /// The offset of QP `qp`'s writes of `size` within a half.
    pub fn offset(&self, qp: u32, size: u64) -> Option<u64> {
        let (_, off) = self.sizes.iter().find(|(s, _)| *s == size)?;
        Some(u64::from(qp) * self.slot_bytes + off)
    }

    /// Fills `half` (one half, starting at its first byte) with every QP's pattern of every size.
    pub fn fill(&self, half: &mut [u8]) {
        for q in 0..self.qps {
            for &(size, _) in &self.sizes {
                if let Some(off) = self.offset(q, size) {
                    let (a, b) = (off as usize, (off + size) as usize);
                    if let Some(dst) = half.get_mut(a..b) {
                        fill_pattern(q, size, dst);
                    }
                }
            }
        }
    }

    /// The first byte of `landing` (one half, as the peer wrote it) that differs from what the
    /// peer sent: QP by QP, size by size.
    pub fn check(&self, landing: &[u8]) -> Option<Mismatch> {
        for q in 0..self.qps {
            for &(size, _) in &self.sizes {
                let off = self.offset(q, size)?;
                let Some(found) = landing.get(off as usize..(off + size) as usize) else {
                    return Some(Mismatch {
                        qp: q,
                        msg_size_bytes: size,
                        offset: off,
                        expected: 0,
                        found: 0,
                    });
                };
                if let Some(m) = first_mismatch(q, size, found) {
                    return Some(Mismatch {
                        offset: off + m.offset,
                        ..m
                    });
                }
            }
        }
        None
    }
}

/// One 64-bit word of the pattern of QP `qp` at size `size` (splitmix64 of the word index,
/// keyed by both).
fn word(qp: u32, size: u64, index: u64) -> u64 {
    let mut z = index
        .wrapping_add(u64::from(qp).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(size.rotate_left(32).wrapping_mul(0xD6E8_FEB8_6659_FD93))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The pattern byte at `offset` of a write of QP `qp` at size `size`.
pub fn pattern_byte(qp: u32, size: u64, offset: u64) -> u8 {
    word(qp, size, offset / 8).to_le_bytes()[(offset % 8) as usize]
}

/// Fills `dst` (one write's bytes) with the pattern of QP `qp` at size `size`.
pub fn fill_pattern(qp: u32, size: u64, dst: &mut [u8]) {
    for (i, chunk) in dst.chunks_mut(8).enumerate() {
        let w = word(qp, size, i as u64).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// The first byte of `found` (one write's bytes) that is not QP `qp`'s pattern at `size`;
/// the offset is within the write.
pub fn first_mismatch(qp: u32, size: u64, found: &[u8]) -> Option<Mismatch> {
    for (i, chunk) in found.chunks(8).enumerate() {
        let w = word(qp, size, i as u64).to_le_bytes();
        if chunk != &w[..chunk.len()] {
            let j = chunk.iter().zip(w).position(|(a, b)| *a != b).unwrap_or(0);
            return Some(Mismatch {
                qp,
                msg_size_bytes: size,
                offset: (i * 8 + j) as u64,
                expected: w[j],
                found: chunk[j],
            });
        }
    }
    None
}

/// A byte the peer wrote that is not what it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    /// The QP whose slot holds it.
    pub qp: u32,
    /// The message size whose writes it belongs to.
    pub msg_size_bytes: u64,
    /// Its offset in the landing region the peer writes (the `endpoints` region).
    pub offset: u64,
    /// The byte the peer sent.
    pub expected: u8,
    /// The byte found.
    pub found: u8,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "data validation failed: byte {} of the landing region (QP {}, {} B writes) is \
             0x{:02x}, expected 0x{:02x}",
            self.offset, self.qp, self.msg_size_bytes, self.found, self.expected
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_qp_and_size_has_its_own_place_and_pattern() {
        let sizes: Vec<u64> = (1..=23).map(|i| 1u64 << i).collect();
        let l = Layout::new(&sizes, 2);
        // A sweep to 8 MiB adds up to 16 MiB - 2 bytes: one slot of 16 MiB per QP.
        assert_eq!(l.slot_bytes, 16 << 20);
        assert_eq!(l.offset(0, 2), Some(0));
        assert_eq!(l.offset(0, 4), Some(2));
        assert_eq!(l.offset(1, 2), Some(16 << 20));
        assert_eq!(l.offset(0, 3), None);
        let one = Layout::new(&[65536], 4);
        assert_eq!((one.slot_bytes, one.half_bytes()), (65536, 4 * 65536));
        let odd = Layout::new(&[5000], 1);
        assert_eq!(odd.slot_bytes, 8192);
        // Patterns differ between QPs and sizes, and are what fill_pattern writes.
        let mut a = vec![0u8; 64];
        let mut b = vec![0u8; 64];
        fill_pattern(0, 64, &mut a);
        fill_pattern(1, 64, &mut b);
        assert_ne!(a, b);
        fill_pattern(0, 128, &mut b[..]);
        assert_ne!(a, b);
        assert!((0..64).all(|i| a[i] == pattern_byte(0, 64, i as u64)));
    }

    #[test]
    fn a_clean_landing_passes_and_an_injected_corruption_is_named() {
        let l = Layout::new(&[2, 4, 8, 4096], 3);
        let mut half = vec![0u8; l.half_bytes() as usize];
        l.fill(&mut half);
        assert_eq!(l.check(&half), None);
        // One flipped byte in QP 2's 4096 B write.
        let off = l.offset(2, 4096).unwrap_or(0) + 1234;
        let was = half[off as usize];
        half[off as usize] ^= 0x5a;
        assert_eq!(
            l.check(&half),
            Some(Mismatch {
                qp: 2,
                msg_size_bytes: 4096,
                offset: off,
                expected: was,
                found: was ^ 0x5a,
            })
        );
        half[off as usize] = was;
        // QP 1's bytes of 8 B written where QP 0's go (a misplaced write).
        let (q0, q1) = (l.offset(0, 8).unwrap_or(0), l.offset(1, 8).unwrap_or(0));
        let q1_bytes = half[q1 as usize..q1 as usize + 8].to_vec();
        half[q0 as usize..q0 as usize + 8].copy_from_slice(&q1_bytes);
        let m = l.check(&half).expect("a misplaced write is caught");
        assert_eq!((m.qp, m.msg_size_bytes), (0, 8));
        assert!(m.to_string().contains("QP 0, 8 B writes"), "{m}");
        // Nothing written at all (a peer whose writes never landed).
        let zeros = vec![0u8; l.half_bytes() as usize];
        assert_eq!(
            l.check(&zeros).map(|m| (m.qp, m.msg_size_bytes)),
            Some((0, 2))
        );
    }
}
