//! The hasher behind [`IdHasher`](crate::IdHasher).

use std::hash::Hasher;

/// Multiplicative mixing (the golden-ratio constant), a word at a time: ids and slots hash in
/// one multiplication.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mix(u64);

const K: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_u16(&mut self, n: u16) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(K);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}
