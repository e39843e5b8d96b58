//! A small multiplicative hasher for the neighbour table's fixed-size integer keys.
//!
//! SipHash (std's default) resists hash flooding, but neighbour keys come from the router's own
//! configuration and the kernel's neighbour table, not from packets, and it costs ~20 ns per lookup
//! on the per-packet path; the FxHash scheme (rustc's) is a few ns.

use core::hash::{BuildHasherDefault, Hasher};

/// FxHash-style hasher: rotate, xor, multiply per word.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.hash = (self.hash.rotate_left(26) ^ w).wrapping_mul(K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.add(i as u64);
        self.add((i >> 64) as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The multiply leaves the low bits weakest; hashbrown uses the top 7 bits and the low
        // bits for the bucket, so fold the high half down.
        self.hash ^ (self.hash >> 32)
    }
}

/// `BuildHasher` for [`FxHasher`].
pub type FxBuild = BuildHasherDefault<FxHasher>;
