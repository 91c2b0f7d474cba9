//! Key → slot, ours side by side with the peers, at four key sizes.
//!
//! Run with `cargo bench --bench hash_slot`. Contenders in each `key_slot/N` group:
//! - `redis-hash-slot`: [`key_slot`];
//! - `byte table (server)`: the byte-at-a-time 256-entry-table CRC16 that the Redis server uses,
//!   written below as the baseline, with the server's hash-tag rule;
//! - `crc16 crate`: the `crc16` crate's XMODEM with our [`hash_tag`];
//! - `redis-protocol`: `redis_protocol::redis_keyslot`.
//!
//! The `crc_table/N` groups compare the `crc` crate's table variants, which is how the variant
//! used by `key_slot` was chosen. Every call's result is checked inside the measured loop.

use std::hint::black_box;

use crc::{CRC_16_XMODEM, Crc, NoTable, Table};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use redis_cluster_proto::hash_slot::{hash_tag, key_slot};

const SIZES: [usize; 4] = [8, 16, 64, 1024];

/// A contender: its name, and key (or bytes) → slot (or checksum).
type Contender = (&'static str, fn(&[u8]) -> u16);

/// The server's table: entry `i` is the CRC of the single byte `i`, MSB first, poly 0x1021.
const SERVER_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// The server's CRC16: one table look-up per byte.
fn server_crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ SERVER_TABLE[usize::from((crc >> 8) as u8 ^ b)]
    })
}

/// The server's `keyHashSlot`, over [`server_crc16`].
fn server_key_slot(key: &[u8]) -> u16 {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return server_crc16(key) & 0x3fff;
    };
    match key[open + 1..].iter().position(|&b| b == b'}') {
        Some(close) if close > 0 => server_crc16(&key[open + 1..open + 1 + close]) & 0x3fff,
        _ => server_crc16(key) & 0x3fff,
    }
}

fn crc16_crate_key_slot(key: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(hash_tag(key)) & 0x3fff
}

/// Printable keys without braces, so that every byte is hashed, from a fixed seed.
fn make_key(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b"abcdefghijklmnopqrstuvwxyz0123456789:_-"[(state >> 33) as usize % 39]
        })
        .collect()
}

fn key_slot_groups(c: &mut Criterion) {
    for size in SIZES {
        let key = make_key(size, size as u64);
        let expected = u16::from(key_slot(&key));
        assert_eq!(server_key_slot(&key), expected);
        let mut group = c.benchmark_group(format!("key_slot/{size}"));
        group.throughput(Throughput::Bytes(size as u64));
        let contenders: [Contender; 4] = [
            ("redis-hash-slot", |k| u16::from(key_slot(k))),
            ("byte table (server)", server_key_slot),
            ("crc16 crate", crc16_crate_key_slot),
            ("redis-protocol", redis_protocol::redis_keyslot),
        ];
        for (name, f) in contenders {
            group.bench_with_input(BenchmarkId::from_parameter(name), &key, |b, key| {
                b.iter(|| assert_eq!(f(black_box(key)), expected));
            });
        }
        group.finish();
    }
}

static NO_TABLE: Crc<u16, NoTable> = Crc::<u16, NoTable>::new(&CRC_16_XMODEM);
static TABLE_1: Crc<u16, Table<1>> = Crc::<u16, Table<1>>::new(&CRC_16_XMODEM);
static TABLE_16: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_XMODEM);

fn crc_table_groups(c: &mut Criterion) {
    for size in SIZES {
        let key = make_key(size, size as u64);
        let expected = server_crc16(&key);
        let mut group = c.benchmark_group(format!("crc_table/{size}"));
        group.throughput(Throughput::Bytes(size as u64));
        let contenders: [Contender; 3] = [
            ("NoTable", |k| NO_TABLE.checksum(k)),
            ("Table<1>", |k| TABLE_1.checksum(k)),
            ("Table<16>", |k| TABLE_16.checksum(k)),
        ];
        for (name, f) in contenders {
            group.bench_with_input(BenchmarkId::from_parameter(name), &key, |b, key| {
                b.iter(|| assert_eq!(f(black_box(key)), expected));
            });
        }
        group.finish();
    }
}

criterion_group!(benches, key_slot_groups, crc_table_groups);
criterion_main!(benches);
