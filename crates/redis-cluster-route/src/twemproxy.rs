//! nutcracker's (twemproxy's) key distribution, reproduced so that a key lands on the same
//! server behind our proxy as behind nutcracker: its twelve hash functions, its hash tags,
//! and its three distributions (ketama, modula, random).
//!
//! The hashes follow nutcracker 0.5's, quirks included: several read the key as C `char`,
//! which is signed on the machines it runs on, so a byte of 0x80 or more enters them as a
//! negative number sign-extended to 32 or 64 bits (one_at_a_time, the four FNV variants,
//! the odd byte of hsieh); `fnv1a_64` runs in 32 bits with the 64-bit constants truncated;
//! `crc32` is libmemcached's 15-bit variant and `crc32a` the standard CRC-32; `crc16` is
//! 0.5's XMODEM-table loop whose 32-bit accumulator is never cut to 16 bits. Modula (and
//! random) place one point per unit of weight, the servers ordered by name with shorter
//! names first, as nutcracker leaves them after its duplicate-name check. Checked key by key
//! against Debian's `nutcracker` 0.5.0 by the workspace's `tests/nutcracker_interop.rs`.
//!
//! ```
//! use redis_cluster_route::twemproxy::{Continuum, Distribution, Hash, Weighted};
//!
//! let servers = [
//!     Weighted { name: "127.0.0.1:6379".into(), weight: 1 },
//!     Weighted { name: "127.0.0.1:6380".into(), weight: 1 },
//! ];
//! let ring = Continuum::new(Distribution::Ketama, &servers);
//! let server = ring.server_for(Hash::Fnv1aAnd64, Some(*b"{}"), b"{user1000}.following", 0);
//! assert_eq!(server, ring.server_for(Hash::Fnv1aAnd64, Some(*b"{}"), b"user1000", 0));
//! ```

use alloc::{format, string::String, vec::Vec};

use md5::{Digest, Md5};

/// A nutcracker `hash:` setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hash {
    /// `one_at_a_time`: Jenkins' one-at-a-time.
    OneAtATime,
    /// `md5`: the digest's first four bytes, little-endian.
    Md5,
    /// `crc16`: nutcracker 0.5's XMODEM-table loop (see the module docs).
    Crc16,
    /// `crc32`: libmemcached's 15 bits of CRC-32.
    Crc32,
    /// `crc32a`: the standard CRC-32.
    Crc32a,
    /// `fnv1_64`: FNV-1, 64 bits, cut to 32.
    Fnv1And64,
    /// `fnv1a_64`: FNV-1a with the 64-bit constants cut to 32 bits (nutcracker's default).
    Fnv1aAnd64,
    /// `fnv1_32`: FNV-1, 32 bits.
    Fnv1And32,
    /// `fnv1a_32`: FNV-1a, 32 bits.
    Fnv1aAnd32,
    /// `hsieh`: Paul Hsieh's SuperFastHash.
    Hsieh,
    /// `murmur`: MurmurHash2, seeded with the length.
    Murmur,
    /// `jenkins`: Bob Jenkins' lookup3, initial value 13.
    Jenkins,
}

/// A nutcracker `distribution:` setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// `ketama`: consistent hashing, 160 points per server scaled by weight (the default).
    Ketama,
    /// `modula`: the hash modulo the points (one per unit of weight).
    Modula,
    /// `random`: a random point, whatever the key.
    Random,
}

impl Hash {
    /// Every hash, by its name in a nutcracker configuration.
    pub const ALL: [(&'static str, Self); 12] = [
        ("one_at_a_time", Self::OneAtATime),
        ("md5", Self::Md5),
        ("crc16", Self::Crc16),
        ("crc32", Self::Crc32),
        ("crc32a", Self::Crc32a),
        ("fnv1_64", Self::Fnv1And64),
        ("fnv1a_64", Self::Fnv1aAnd64),
        ("fnv1_32", Self::Fnv1And32),
        ("fnv1a_32", Self::Fnv1aAnd32),
        ("hsieh", Self::Hsieh),
        ("murmur", Self::Murmur),
        ("jenkins", Self::Jenkins),
    ];

    /// The hash a configuration names, as nutcracker spells it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, h)| *h)
    }

    /// The 32-bit hash of `key`.
    pub fn hash(self, key: &[u8]) -> u32 {
        match self {
            Self::OneAtATime => one_at_a_time(key),
            Self::Md5 => {
                let digest = md5(key);
                u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
            }
            Self::Crc16 => crc16(key),
            Self::Crc32 => (CRC32.checksum(key) >> 16) & 0x7fff,
            Self::Crc32a => CRC32.checksum(key),
            Self::Fnv1And64 => fnv1_64(key),
            Self::Fnv1aAnd64 => fnv1a_64(key),
            Self::Fnv1And32 => fnv1_32(key),
            Self::Fnv1aAnd32 => fnv1a_32(key),
            Self::Hsieh => hsieh(key),
            Self::Murmur => murmur(key),
            Self::Jenkins => jenkins(key),
        }
    }
}

impl Distribution {
    /// The distribution a configuration names (`ketama`, `modula`, `random`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "ketama" => Some(Self::Ketama),
            "modula" => Some(Self::Modula),
            "random" => Some(Self::Random),
            _ => None,
        }
    }
}

/// The CRC-16/XMODEM table (poly 0x1021, not reflected), as nutcracker 0.5's `crc16` uses:
/// entry `i` is the CRC of the byte `i`.
const XMODEM: [u32; 256] = {
    let crc = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = crc.checksum(&[i as u8]) as u32;
        i += 1;
    }
    table
};

/// nutcracker 0.5's `crc16`: the XMODEM table driven with a 32-bit accumulator that is never
/// cut back to 16 bits, so the result carries the bits shifted past the 16th (later
/// versions switched to the kernel's CRC-16/ARC).
fn crc16(key: &[u8]) -> u32 {
    key.iter().fold(0u32, |crc, &b| {
        (crc << 8) ^ XMODEM[(((crc >> 8) ^ u32::from(b)) & 0xff) as usize]
    })
}
/// The standard CRC-32 (`crc32a`; `crc32` keeps 15 bits of it).
const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);

fn md5(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

/// A byte as C reads a `char` on x86 and ARM Linux builds of nutcracker: signed.
fn signed(byte: u8) -> u32 {
    byte as i8 as i32 as u32
}

fn one_at_a_time(key: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &b in key {
        h = h.wrapping_add(signed(b));
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h.wrapping_add(h << 15)
}

fn fnv1_64(key: &[u8]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        h ^= b as i8 as i64 as u64;
    }
    h as u32
}

fn fnv1a_64(key: &[u8]) -> u32 {
    // nutcracker keeps only the low 32 bits of the 64-bit basis and prime, and works in 32.
    let mut h: u32 = 0x8422_2325;
    for &b in key {
        h ^= signed(b);
        h = h.wrapping_mul(0x0000_01b3);
    }
    h
}

fn fnv1_32(key: &[u8]) -> u32 {
    let mut h: u32 = 2_166_136_261;
    for &b in key {
        h = h.wrapping_mul(16_777_619);
        h ^= signed(b);
    }
    h
}

fn fnv1a_32(key: &[u8]) -> u32 {
    let mut h: u32 = 2_166_136_261;
    for &b in key {
        h ^= signed(b);
        h = h.wrapping_mul(16_777_619);
    }
    h
}

/// Paul Hsieh's SuperFastHash, as nutcracker has it.
fn hsieh(key: &[u8]) -> u32 {
    if key.is_empty() {
        return 0;
    }
    let pair = |at: usize| u32::from(key[at]) | (u32::from(key[at + 1]) << 8);
    let mut h: u32 = 0;
    let blocks = key.len() / 4;
    for block in 0..blocks {
        let at = block * 4;
        h = h.wrapping_add(pair(at));
        let tmp = (pair(at + 2) << 11) ^ h;
        h = (h << 16) ^ tmp;
        h = h.wrapping_add(h >> 11);
    }
    let at = blocks * 4;
    match key.len() % 4 {
        3 => {
            h = h.wrapping_add(pair(at));
            h ^= h << 16;
            // The third byte is read as a signed `char`.
            h ^= signed(key[at + 2]) << 18;
            h = h.wrapping_add(h >> 11);
        }
        2 => {
            h = h.wrapping_add(pair(at));
            h ^= h << 11;
            h = h.wrapping_add(h >> 17);
        }
        1 => {
            h = h.wrapping_add(u32::from(key[at]));
            h ^= h << 10;
            h = h.wrapping_add(h >> 1);
        }
        _ => {}
    }
    h ^= h << 3;
    h = h.wrapping_add(h >> 5);
    h ^= h << 4;
    h = h.wrapping_add(h >> 17);
    h ^= h << 25;
    h.wrapping_add(h >> 6)
}

/// MurmurHash2 with nutcracker's seed (0xdeadbeef times the length).
fn murmur(key: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let len = key.len() as u32;
    let mut h = 0xdead_beef_u32.wrapping_mul(len) ^ len;
    let mut chunks = key.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// Bob Jenkins' lookup3 `hashlittle`, initial value 13, read byte by byte (what its
/// word-reading paths compute on a little-endian machine).
fn jenkins(key: &[u8]) -> u32 {
    let init = 0xdead_beef_u32
        .wrapping_add(key.len() as u32)
        .wrapping_add(13);
    let (mut a, mut b, mut c) = (init, init, init);
    let word = |bytes: &[u8]| -> u32 {
        bytes.iter().enumerate().fold(0u32, |w, (i, &byte)| {
            w.wrapping_add(u32::from(byte) << (8 * i))
        })
    };
    let mut rest = key;
    while rest.len() > 12 {
        a = a.wrapping_add(word(&rest[0..4]));
        b = b.wrapping_add(word(&rest[4..8]));
        c = c.wrapping_add(word(&rest[8..12]));
        (a, b, c) = mix(a, b, c);
        rest = &rest[12..];
    }
    if rest.is_empty() {
        return c;
    }
    a = a.wrapping_add(word(&rest[..rest.len().min(4)]));
    if rest.len() > 4 {
        b = b.wrapping_add(word(&rest[4..rest.len().min(8)]));
    }
    if rest.len() > 8 {
        c = c.wrapping_add(word(&rest[8..]));
    }
    finish(a, b, c)
}

fn mix(mut a: u32, mut b: u32, mut c: u32) -> (u32, u32, u32) {
    a = a.wrapping_sub(c);
    a ^= c.rotate_left(4);
    c = c.wrapping_add(b);
    b = b.wrapping_sub(a);
    b ^= a.rotate_left(6);
    a = a.wrapping_add(c);
    c = c.wrapping_sub(b);
    c ^= b.rotate_left(8);
    b = b.wrapping_add(a);
    a = a.wrapping_sub(c);
    a ^= c.rotate_left(16);
    c = c.wrapping_add(b);
    b = b.wrapping_sub(a);
    b ^= a.rotate_left(19);
    a = a.wrapping_add(c);
    c = c.wrapping_sub(b);
    c ^= b.rotate_left(4);
    b = b.wrapping_add(a);
    (a, b, c)
}

fn finish(mut a: u32, mut b: u32, mut c: u32) -> u32 {
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c.wrapping_sub(b.rotate_left(24))
}

/// The part of `key` that is hashed: with a two-character `hash_tag` such as `{}`, what is
/// between the first opening character and the next closing one, when not empty.
pub fn tagged(key: &[u8], hash_tag: Option<[u8; 2]>) -> &[u8] {
    let Some([open, close]) = hash_tag else {
        return key;
    };
    let Some(start) = key.iter().position(|&b| b == open) else {
        return key;
    };
    match key[start + 1..].iter().position(|&b| b == close) {
        Some(len) if len > 0 => &key[start + 1..start + 1 + len],
        _ => key,
    }
}

/// A pool's servers placed on nutcracker's continuum.
#[derive(Clone, Debug)]
pub struct Continuum {
    distribution: Distribution,
    /// (point, server index), sorted by point for ketama; for modula and random one entry
    /// per unit of weight, servers sorted by name.
    points: Vec<(u32, usize)>,
    servers: usize,
}

/// A server as the distribution sees it: the name its ketama points are made of (its
/// configured name, else `host:port`, or `host` alone on port 11211) and its weight.
#[derive(Clone, Debug)]
pub struct Weighted {
    /// The name its ketama points are made of.
    pub name: String,
    /// Its `weight` (at least 1).
    pub weight: u32,
}

impl Continuum {
    /// The continuum of `servers` (their order is the indexes [`Continuum::dispatch`]
    /// answers with).
    pub fn new(distribution: Distribution, servers: &[Weighted]) -> Self {
        let mut points = Vec::new();
        let total: u32 = servers.iter().map(|s| s.weight).sum();
        let live = servers.len() as f32;
        for (index, server) in servers.iter().enumerate() {
            match distribution {
                Distribution::Ketama => {
                    // In nutcracker's own mixture of float and double arithmetic.
                    let share = server.weight as f32 / total.max(1) as f32;
                    let raw = (share * 160.0 / 4.0 * live) as f64 + 0.000_000_000_1;
                    // floorf of a non-negative value: the cast truncates the same way.
                    let per_server = ((raw as f32) as u32) * 4;
                    for group in 0..per_server / 4 {
                        let mut host = format!("{}-{group}", server.name).into_bytes();
                        host.truncate(85); // snprintf into 86 bytes, NUL included
                        let digest = md5(&host);
                        for x in 0..4 {
                            let at = x * 4;
                            let bytes =
                                [digest[at], digest[at + 1], digest[at + 2], digest[at + 3]];
                            points.push((u32::from_le_bytes(bytes), index));
                        }
                    }
                }
                Distribution::Modula | Distribution::Random => {}
            }
        }
        if distribution == Distribution::Ketama {
            points.sort_by_key(|&(point, _)| point);
        } else {
            // One point per unit of weight, the servers in the order nutcracker leaves them
            // after checking their names for duplicates: sorted by name, shorter names first
            // (its string comparison looks at lengths before bytes).
            let mut order: Vec<usize> = (0..servers.len()).collect();
            order.sort_by(|&a, &b| {
                let (a, b) = (servers[a].name.as_bytes(), servers[b].name.as_bytes());
                a.len().cmp(&b.len()).then(a.cmp(b))
            });
            for index in order {
                for _ in 0..servers[index].weight {
                    points.push((0, index));
                }
            }
        }
        Self {
            distribution,
            points,
            servers: servers.len(),
        }
    }

    /// The server (by index) a key with this hash goes to; `random` draws from `random`.
    pub fn dispatch(&self, hash: u32, random: u32) -> usize {
        if self.points.is_empty() {
            return 0;
        }
        match self.distribution {
            Distribution::Ketama => {
                let at = self.points.partition_point(|&(point, _)| point < hash);
                self.points.get(at).unwrap_or(&self.points[0]).1
            }
            Distribution::Modula => self.points[hash as usize % self.points.len()].1,
            Distribution::Random => self.points[random as usize % self.points.len()].1,
        }
    }

    /// The server for `key`, as nutcracker picks it: a pool of one server needs no hash;
    /// an empty key hashes to 0.
    pub fn server_for(
        &self,
        hash: Hash,
        hash_tag: Option<[u8; 2]>,
        key: &[u8],
        random: u32,
    ) -> usize {
        if self.servers == 1 {
            return 0;
        }
        let key = tagged(key, hash_tag);
        let hashed = if key.is_empty() { 0 } else { hash.hash(key) };
        self.dispatch(hashed, random)
    }
}
