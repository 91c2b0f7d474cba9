//! Command → keys → slot, and split + merge, with `redis-cluster-route`.
//!
//! Run with `cargo bench --bench route`. In each group:
//! - `keys + slot`: [`CommandTable::keys`] then [`Keys::slot`] (what `COMMAND GETKEYS` finds);
//! - `routing slot`: [`CommandTable::slot`] (how a cluster node routes);
//! - `hand-written table (peer)`: what proxies do today, where it can: a `HashMap` from the
//!   upper-cased command name to a (first, last, step) key range, and the `crc16` crate for
//!   the slot — no key specs, no subcommands, no keyword or keynum forms.
//!
//! `mget_100_split_merge` routes an MGET of 100 keys over many slots, builds each part's
//! arguments and merges one array reply per part. Every result is checked inside the loop.

use std::collections::HashMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use redis_cluster_proto::hash_slot::{hash_tag, key_slot};
use redis_cluster_proto::resp::Frame;
use redis_cluster_proto::route::{CommandTable, Keys, Route, SlotAnswer};

/// The peer: a static (first, last, step) table keyed by upper-case name.
struct HandWritten(HashMap<&'static [u8], (usize, isize, usize)>);

impl HandWritten {
    fn new() -> Self {
        Self(HashMap::from([
            (&b"GET"[..], (1, 1, 1)),
            (&b"SET"[..], (1, 1, 1)),
            (&b"MSET"[..], (1, -1, 2)),
            (&b"MGET"[..], (1, -1, 1)),
        ]))
    }

    fn slot(&self, argv: &[&[u8]]) -> Option<u16> {
        let mut name = [0u8; 16];
        let n = argv[0].len().min(16);
        name[..n].copy_from_slice(&argv[0][..n]);
        name[..n].make_ascii_uppercase();
        let &(first, last, step) = self.0.get(&name[..n])?;
        let last = if last < 0 {
            (argv.len() as isize + last) as usize
        } else {
            last as usize
        };
        let mut slot = None;
        for at in (first..=last).step_by(step) {
            let key = argv.get(at)?;
            let this = crc16::State::<crc16::XMODEM>::calculate(hash_tag(key)) % 16384;
            match slot {
                None => slot = Some(this),
                Some(s) if s != this => return None,
                _ => {}
            }
        }
        slot
    }
}

fn commands() -> Vec<(&'static str, Vec<Vec<u8>>, bool)> {
    let mset: Vec<Vec<u8>> = std::iter::once(b"MSET".to_vec())
        .chain((0..10).flat_map(|i| [format!("{{u}}:{i}").into_bytes(), b"v".to_vec()]))
        .collect();
    let eval: Vec<Vec<u8>> = ["EVAL", "return 1", "3", "{u}a", "{u}b", "{u}c", "x"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let xread: Vec<Vec<u8>> = std::iter::once("XREAD")
        .chain(["COUNT", "10", "STREAMS"])
        .map(|s| s.as_bytes().to_vec())
        .chain((0..5).map(|i| format!("{{s}}{i}").into_bytes()))
        .chain((0..5).map(|_| b"0".to_vec()))
        .collect();
    vec![
        ("get", vec![b"GET".to_vec(), b"user:1000".to_vec()], true),
        ("mset_10_pairs", mset, true),
        ("eval_3_keys", eval, false),
        ("xread_5_streams", xread, false),
    ]
}

fn single(c: &mut Criterion) {
    let table = CommandTable::REDIS_7_0;
    let peer = HandWritten::new();
    for (name, argv, peer_can) in commands() {
        let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        let expected = match table.slot(&argv) {
            Ok(SlotAnswer::Slot(slot)) => slot,
            other => panic!("{name}: {other:?}"),
        };
        let mut group = c.benchmark_group(format!("route_{name}"));
        group.bench_function(BenchmarkId::from_parameter("keys + slot"), |b| {
            b.iter(|| {
                let keys: Keys = table.keys(black_box(&argv)).expect("known");
                assert_eq!(keys.slot(&argv), SlotAnswer::Slot(expected));
            })
        });
        group.bench_function(BenchmarkId::from_parameter("routing slot"), |b| {
            b.iter(|| {
                let answer = table.slot(black_box(&argv)).expect("known");
                assert_eq!(answer, SlotAnswer::Slot(expected));
            })
        });
        if peer_can {
            group.bench_function(
                BenchmarkId::from_parameter("hand-written table (peer)"),
                |b| {
                    b.iter(|| {
                        let slot = peer.slot(black_box(&argv));
                        assert_eq!(slot, Some(u16::from(expected)));
                    })
                },
            );
        }
        group.finish();
    }
    // The single-key answer really is the slot of the key.
    assert_eq!(u16::from(key_slot(b"user:1000")), 1649);
}

fn split_merge(c: &mut Criterion) {
    let table = CommandTable::REDIS_7_0;
    let argv: Vec<Vec<u8>> = std::iter::once(b"MGET".to_vec())
        .chain((0..100).map(|i| format!("key:{i}").into_bytes()))
        .collect();
    let mut group = c.benchmark_group("mget_100_split_merge");
    group.bench_function(BenchmarkId::from_parameter("route + parts + merge"), |b| {
        b.iter(|| {
            let Ok(Route::Split(split)) = table.route(black_box(&argv)) else {
                panic!("a split")
            };
            let mut replies = Vec::with_capacity(split.parts().len());
            for part in 0..split.parts().len() {
                let keys = split.argv(part, &argv).skip(1);
                replies.push(Frame::Array(
                    keys.map(|k| Frame::BulkString(k.as_slice())).collect(),
                ));
            }
            let Ok(Frame::Array(merged)) = split.merge(replies) else {
                panic!("an array")
            };
            assert_eq!(merged.len(), 100);
            assert_eq!(merged[7], Frame::BulkString(&b"key:7"[..]));
        })
    });
    group.finish();
}

criterion_group!(benches, single, split_merge);
criterion_main!(benches);
