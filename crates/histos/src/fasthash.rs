//! A small FNV-1a hasher for the policy's name indexes (tool and role lookups on the
//! hot path; keys come from the trusted policy, so HashDoS resistance is not needed).

use std::hash::{BuildHasher, Hasher};

/// Builds [`FnvHasher`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fnv;

impl BuildHasher for Fnv {
    type Hasher = FnvHasher;
    fn build_hasher(&self) -> FnvHasher {
        FnvHasher(0xcbf2_9ce4_8422_2325)
    }
}

/// FNV-1a 64.
#[derive(Debug, Clone, Copy)]
pub struct FnvHasher(u64);

impl Hasher for FnvHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}
