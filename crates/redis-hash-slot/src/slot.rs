//! [`Slot`], and the key → slot mapping.

use core::fmt;

use crc::{CRC_16_XMODEM, Crc, Table};

/// Number of hash slots in a Redis Cluster.
pub const SLOT_COUNT: u16 = 16384;

/// CRC16/XMODEM with the `crc` crate's slice-by-16 tables. A `static`, so the 8 KiB of tables
/// exist once.
static CRC16: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_XMODEM);

/// A hash slot: a number that is always below [`SLOT_COUNT`].
///
/// ```
/// use redis_hash_slot::Slot;
///
/// let slot = Slot::new(12739).unwrap();
/// assert_eq!(slot.get(), 12739);
/// assert_eq!(u16::from(slot), 12739);
/// assert_eq!(slot.to_string(), "12739");
/// assert_eq!(Slot::new(16384), None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot(u16);

impl Slot {
    /// Slot 0.
    pub const MIN: Self = Self(0);
    /// Slot 16383.
    pub const MAX: Self = Self(SLOT_COUNT - 1);

    /// The slot numbered `n`, or `None` when `n` is 16384 or more.
    pub const fn new(n: u16) -> Option<Self> {
        if n < SLOT_COUNT { Some(Self(n)) } else { None }
    }

    /// The slot's number, below 16384.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// Every slot, in ascending order.
    ///
    /// ```
    /// assert_eq!(redis_hash_slot::Slot::all().count(), 16384);
    /// ```
    pub fn all() -> impl DoubleEndedIterator<Item = Self> + ExactSizeIterator {
        (0..SLOT_COUNT).map(Self)
    }

    /// The slot at bit index `i` of a 16384-bit map; callers guarantee `i < 16384`.
    pub(crate) const fn from_index(i: usize) -> Self {
        debug_assert!(i < SLOT_COUNT as usize);
        Self(i as u16 & (SLOT_COUNT - 1))
    }

    /// The slot's bit index in a 16384-bit map.
    pub(crate) const fn index(self) -> usize {
        self.0 as usize
    }
}

impl From<Slot> for u16 {
    fn from(slot: Slot) -> Self {
        slot.0
    }
}

impl From<Slot> for usize {
    fn from(slot: Slot) -> Self {
        slot.index()
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The hash slot of `key`: CRC16/XMODEM of its [`hash_tag`], modulo 16384.
///
/// This is the server's `keyHashSlot`, and the answer of `CLUSTER KEYSLOT`.
///
/// ```
/// use redis_hash_slot::key_slot;
///
/// assert_eq!(key_slot(b"123456789").get(), 12739);
/// assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
/// assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
/// ```
#[inline]
pub fn key_slot(key: &[u8]) -> Slot {
    Slot(crc16(hash_tag(key)) & (SLOT_COUNT - 1))
}

/// The part of `key` that is hashed.
///
/// The rule is the server's: if the key has a `{`, and after that first `{` a `}` with at least
/// one byte between them, only the bytes between that first `{` and the first `}` after it are
/// hashed. Otherwise (no `{`, no `}` after it, or `{}` empty) the whole key is.
///
/// ```
/// use redis_hash_slot::hash_tag;
///
/// assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
/// assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}"); // the first tag is empty: whole key
/// assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar"); // from the first `{` to the first `}`
/// assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar"); // only the first tag counts
/// assert_eq!(hash_tag(b"}{a}"), b"a");
/// ```
pub fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = find_byte(b'{', key) else {
        return key;
    };
    let (_, after_open) = key.split_at(open + 1);
    match find_byte(b'}', after_open) {
        Some(close) if close > 0 => after_open.split_at(close).0,
        _ => key,
    }
}

/// CRC16/XMODEM of `bytes`.
///
/// Whole 16-byte blocks go through the `crc` crate's slice-by-16 loop. The crate does the last
/// 0 to 15 bytes one table look-up after the other, each waiting for the one before, which made
/// 8-byte keys slower than the server's own loop; here they go by 8 and by 4 bytes with the same
/// tables, so their look-ups are independent (`benches/hash_slot.rs`, `key_slot/8`).
#[inline]
fn crc16(bytes: &[u8]) -> u16 {
    let (blocks, mut tail) = bytes.split_at(bytes.len() - bytes.len() % 16);
    // XMODEM starts from 0 and neither reflects nor xors its output, so a checksum is also the
    // running state from which the tail carries on.
    let mut crc = if blocks.is_empty() {
        0
    } else {
        CRC16.checksum(blocks)
    };
    let tables = CRC16.table();
    if let Some((block, rest)) = tail.split_first_chunk::<8>() {
        crc = crc16_block(crc, block, tables);
        tail = rest;
    }
    if let Some((block, rest)) = tail.split_first_chunk::<4>() {
        crc = crc16_block(crc, block, tables);
        tail = rest;
    }
    for &b in tail {
        crc = (crc << 8) ^ tables[0][usize::from((crc >> 8) as u8 ^ b)];
    }
    crc
}

/// Carries `crc` over an `N`-byte block (2 <= N <= 16). `tables[k][b]` is the CRC of byte `b`
/// followed by `k` zero bytes, so byte `i` of the block is looked up in `tables[N - 1 - i]`, and
/// the running CRC folds into the block's first two bytes.
#[inline(always)]
fn crc16_block<const N: usize>(crc: u16, block: &[u8; N], tables: &[[u16; 256]; 16]) -> u16 {
    let [high, low] = crc.to_be_bytes();
    let mut out = 0;
    for (i, &b) in block.iter().enumerate() {
        let b = match i {
            0 => b ^ high,
            1 => b ^ low,
            _ => b,
        };
        out ^= tables[N - 1 - i][usize::from(b)];
    }
    out
}

/// The index of the first `needle` in `haystack`, eight bytes at a time.
///
/// `iter().position` looks at one byte per step; keys are scanned for `{` before any hashing,
/// so this scan is half the cost of a long key without it (`key_slot/1024`).
#[inline]
fn find_byte(needle: u8, haystack: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let pattern = ONES * u64::from(needle);
    let mut words = haystack.chunks_exact(8);
    let mut offset = 0;
    for word in &mut words {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(word);
        // A byte equal to `needle` becomes zero; the lowest zero byte of `x` is the lowest one
        // flagged in `(x - ONES) & !x & HIGHS` (bytes above it may be flagged falsely).
        let x = u64::from_le_bytes(bytes) ^ pattern;
        let zeros = x.wrapping_sub(ONES) & !x & HIGHS;
        if zeros != 0 {
            return Some(offset + zeros.trailing_zeros() as usize / 8);
        }
        offset += 8;
    }
    let rest = words.remainder().iter().position(|&b| b == needle)?;
    Some(offset + rest)
}
