//! RESP decoding and encoding, ours side by side with the peers, one group per corpus.
//!
//! Run with `cargo bench --bench resp`. Corpora (built in memory, the same bytes for every
//! contender): (a) 100 000 pipelined `SET` commands, 16-byte keys, 64-byte values; (b) 10 000
//! replies of 1 KiB bulk strings; (c) 10 000 arrays of 100 integers; (c2) the same with integers
//! of 1 to 18 digits, half negative; (d) 10 000 RESP3 maps with nested arrays, doubles,
//! booleans, verbatim strings, nulls and big numbers; (e) one 1 MiB array reply, whole and
//! in 4 KiB reads. Contenders: `redis-resp` (borrowed slice path, `BytesMut` frame path, argv
//! paths for commands, into `Bytes` and borrowed), `redis-protocol` 6 (`decode_range`,
//! `decode_bytes_mut`), `resp-rs` 0.3 (`parse_frame`) and the `redis` crate's `Parser`. Every
//! iteration checks the number of values decoded and that all input was used, so a broken
//! decoder cannot look fast.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use redis_cluster_proto::resp::{
    Decoder, Frame, Status, encode, encode_bulk, encode_command, encode_integer,
};

struct Corpus {
    name: &'static str,
    bytes: Vec<u8>,
    values: usize,
    resp3: bool,
}

fn corpora() -> Vec<Corpus> {
    let mut set = Vec::new();
    for i in 0..100_000u32 {
        let key = format!("key:{i:012}");
        encode_command(&[&b"SET"[..], key.as_bytes(), &[b'v'; 64]], &mut set);
    }
    let mut bulk = Vec::new();
    for _ in 0..10_000 {
        encode_bulk(&[b'x'; 1024], &mut bulk);
    }
    let mut ints = Vec::new();
    for i in 0..10_000i64 {
        ints.extend_from_slice(b"*100\r\n");
        for j in 0..100 {
            encode_integer(i * 1000 + j, &mut ints);
        }
    }
    // Integers of every width from 1 to 19 digits, half of them negative.
    let mut mixed = Vec::new();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..10_000 {
        mixed.extend_from_slice(b"*100\r\n");
        for j in 0..100u32 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let width = 10i64.pow(j % 18 + 1);
            let value = (seed >> 1) as i64 % width;
            encode_integer(if j % 2 == 0 { value } else { -value }, &mut mixed);
        }
    }
    let mut maps = Vec::new();
    for i in 0..10_000 {
        maps.extend_from_slice(
            format!(
                "%6\r\n+name\r\n$12\r\nobject-{i:05}\r\n+scores\r\n*3\r\n,1.5\r\n,-2.25\r\n,{i}e10\r\n\
                 +active\r\n#t\r\n+doc\r\n=15\r\ntxt:Some string\r\n+none\r\n_\r\n\
                 +big\r\n(3492890328409238509324850943850943825024385\r\n"
            )
            .as_bytes(),
        );
    }
    vec![
        Corpus {
            name: "a_pipelined_set",
            bytes: set,
            values: 100_000,
            resp3: false,
        },
        Corpus {
            name: "b_bulk_1k",
            bytes: bulk,
            values: 10_000,
            resp3: false,
        },
        Corpus {
            name: "c_int_arrays",
            bytes: ints,
            values: 10_000,
            resp3: false,
        },
        Corpus {
            name: "c2_mixed_int_arrays",
            bytes: mixed,
            values: 10_000,
            resp3: false,
        },
        Corpus {
            name: "d_resp3_maps",
            bytes: maps,
            values: 10_000,
            resp3: true,
        },
    ]
}

/// One 1 MiB array reply: 16 384 bulk strings of 55 bytes (64 bytes each on the wire).
fn big_reply() -> Vec<u8> {
    let mut reply = b"*16384\r\n".to_vec();
    for i in 0..16_384u32 {
        encode_bulk(format!("{i:055}").as_bytes(), &mut reply);
    }
    reply
}

fn ours_slice(input: &[u8], decoder: &mut Decoder) -> usize {
    let (mut rest, mut n) = (input, 0);
    while let Ok(Status::Complete((frame, used))) = decoder.decode_slice(rest) {
        black_box(&frame);
        rest = &rest[used..];
        n += 1;
    }
    assert!(rest.is_empty());
    n
}

fn ours_bytes_mut(mut buf: BytesMut, decoder: &mut Decoder) -> usize {
    let mut n = 0;
    while let Some(frame) = decoder.decode(&mut buf).expect("valid") {
        black_box(&frame);
        n += 1;
    }
    assert!(buf.is_empty());
    n
}

fn ours_argv(mut buf: BytesMut, decoder: &mut Decoder) -> usize {
    let mut n = 0;
    while let Some(command) = decoder.decode_command(&mut buf).expect("valid") {
        black_box(&command);
        n += 1;
    }
    assert!(buf.is_empty());
    n
}

fn ours_argv_slice(input: &[u8], decoder: &mut Decoder) -> usize {
    let (mut rest, mut n) = (input, 0);
    while let Ok(Status::Complete((command, used))) = decoder.decode_command_slice(rest) {
        black_box(&command);
        rest = &rest[used..];
        n += 1;
    }
    assert!(rest.is_empty());
    n
}

fn rp_range(input: &[u8], resp3: bool) -> usize {
    let (mut rest, mut n) = (input, 0);
    loop {
        let used = if resp3 {
            redis_protocol::resp3::decode::complete::decode_range(rest)
                .expect("valid")
                .map(|(f, used)| {
                    black_box(&f);
                    used
                })
        } else {
            redis_protocol::resp2::decode::decode_range(rest)
                .expect("valid")
                .map(|(f, used)| {
                    black_box(&f);
                    used
                })
        };
        let Some(used) = used else { break };
        rest = &rest[used..];
        n += 1;
    }
    assert!(rest.is_empty());
    n
}

fn resp_rs(input: &bytes::Bytes, resp3: bool) -> usize {
    let (mut rest, mut n) = (input.clone(), 0);
    while !rest.is_empty() {
        rest = if resp3 {
            let (frame, rest) = resp_rs::resp3::parse_frame(rest).expect("valid");
            black_box(&frame);
            rest
        } else {
            let (frame, rest) = resp_rs::resp2::parse_frame(rest).expect("valid");
            black_box(&frame);
            rest
        };
        n += 1;
    }
    n
}

fn rp_bytes_mut(mut buf: BytesMut, resp3: bool) -> usize {
    let mut n = 0;
    loop {
        let done = if resp3 {
            redis_protocol::resp3::decode::complete::decode_bytes_mut(&mut buf)
                .expect("valid")
                .map(|f| black_box(f).1)
        } else {
            redis_protocol::resp2::decode::decode_bytes_mut(&mut buf)
                .expect("valid")
                .map(|f| black_box(f).1)
        };
        if done.is_none() {
            break;
        }
        n += 1;
    }
    assert!(buf.is_empty());
    n
}

fn redis_crate(input: &[u8], values: usize) -> usize {
    let mut parser = redis::Parser::new();
    let mut reader = input;
    for _ in 0..values {
        black_box(parser.parse_value(&mut reader).expect("valid"));
    }
    assert!(reader.is_empty());
    values
}

/// With `RESP_BENCH_CORPORA=DIR`, writes each corpus to `DIR/NAME.resp` and its number of
/// values to `DIR/NAME.values`, for `benches/hiredis.sh` to feed the same bytes to hiredis.
fn write_corpora(corpora: &[Corpus]) {
    let Some(dir) = std::env::var_os("RESP_BENCH_CORPORA") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).expect("corpus directory");
    for corpus in corpora {
        std::fs::write(dir.join(format!("{}.resp", corpus.name)), &corpus.bytes).expect("write");
        let values = corpus.values.to_string();
        std::fs::write(dir.join(format!("{}.values", corpus.name)), values).expect("write");
    }
}

fn decode_groups(c: &mut Criterion) {
    let corpora = corpora();
    write_corpora(&corpora);
    for corpus in corpora {
        let mut group = c.benchmark_group(corpus.name);
        group.throughput(Throughput::Bytes(corpus.bytes.len() as u64));
        group.sample_size(20);
        let (input, values, resp3) = (&corpus.bytes[..], corpus.values, corpus.resp3);
        let mut decoder = Decoder::new();
        group.bench_function("redis-resp slice", |b| {
            b.iter(|| assert_eq!(ours_slice(input, &mut decoder), values))
        });
        group.bench_function("redis-resp BytesMut", |b| {
            b.iter_batched(
                || BytesMut::from(input),
                |buf| assert_eq!(ours_bytes_mut(buf, &mut decoder), values),
                BatchSize::LargeInput,
            )
        });
        if corpus.name.starts_with("a_") {
            group.bench_function("redis-resp argv", |b| {
                b.iter_batched(
                    || BytesMut::from(input),
                    |buf| assert_eq!(ours_argv(buf, &mut decoder), values),
                    BatchSize::LargeInput,
                )
            });
            group.bench_function("redis-resp argv slice", |b| {
                b.iter(|| assert_eq!(ours_argv_slice(input, &mut decoder), values))
            });
        }
        group.bench_function("redis-protocol decode_range", |b| {
            b.iter(|| assert_eq!(rp_range(input, resp3), values))
        });
        group.bench_function("redis-protocol decode_bytes_mut", |b| {
            b.iter_batched(
                || BytesMut::from(input),
                |buf| assert_eq!(rp_bytes_mut(buf, resp3), values),
                BatchSize::LargeInput,
            )
        });
        let shared = bytes::Bytes::copy_from_slice(input);
        group.bench_function("resp-rs parse_frame", |b| {
            b.iter(|| assert_eq!(resp_rs(&shared, resp3), values))
        });
        group.bench_function("redis crate", |b| {
            b.iter(|| assert_eq!(redis_crate(input, values), values))
        });
        group.finish();
    }
}

/// Feeds `reply` to `decode` in 4 KiB reads, as from a socket; returns the decoded value.
fn in_reads<T>(reply: &[u8], mut decode: impl FnMut(&mut BytesMut) -> Option<T>) -> T {
    let mut buf = BytesMut::with_capacity(reply.len());
    for chunk in reply.chunks(4096) {
        buf.extend_from_slice(chunk);
        if let Some(value) = decode(&mut buf) {
            assert!(buf.is_empty());
            return value;
        }
    }
    panic!("reply not complete");
}

fn big_reply_group(c: &mut Criterion) {
    let reply = big_reply();
    let mut group = c.benchmark_group("e_1mib_reply");
    group.throughput(Throughput::Bytes(reply.len() as u64));
    group.sample_size(20);
    let mut decoder = Decoder::new();
    let check =
        |frame: &Frame| assert!(matches!(frame, Frame::Array(items) if items.len() == 16_384));
    group.bench_function("redis-resp whole buffer", |b| {
        b.iter_batched(
            || BytesMut::from(&reply[..]),
            |mut buf| check(&decoder.decode(&mut buf).expect("valid").expect("complete")),
            BatchSize::LargeInput,
        )
    });
    group.bench_function("redis-resp 4 KiB reads", |b| {
        b.iter(|| check(&in_reads(&reply, |buf| decoder.decode(buf).expect("valid"))))
    });
    group.bench_function("redis-protocol decode_bytes_mut whole buffer", |b| {
        b.iter_batched(
            || BytesMut::from(&reply[..]),
            |mut buf| {
                let frame = redis_protocol::resp2::decode::decode_bytes_mut(&mut buf);
                assert!(frame.expect("valid").is_some());
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("redis-protocol decode_bytes_mut 4 KiB reads", |b| {
        b.iter(|| {
            in_reads(&reply, |buf| {
                redis_protocol::resp2::decode::decode_bytes_mut(buf).expect("valid")
            })
        })
    });
    group.bench_function("redis crate 4 KiB reads", |b| {
        b.iter(|| {
            let mut parser = redis::Parser::new();
            let value = parser.parse_value(ChunkedReader(&reply)).expect("valid");
            assert!(matches!(value, redis::Value::Array(ref items) if items.len() == 16_384));
        })
    });
    group.finish();
}

/// A reader that hands out at most 4 KiB per read, like a socket.
struct ChunkedReader<'a>(&'a [u8]);

impl std::io::Read for ChunkedReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = out.len().min(4096).min(self.0.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn encode_group(c: &mut Criterion) {
    let replies: Vec<Frame> = (0..10_000)
        .map(|_| Frame::BulkString(bytes::Bytes::from(vec![b'x'; 1024])))
        .collect();
    let len: usize = replies
        .iter()
        .map(redis_cluster_proto::resp::encoded_len)
        .sum();
    let mut group = c.benchmark_group("encode_b_bulk_1k");
    group.throughput(Throughput::Bytes(len as u64));
    let mut out = Vec::with_capacity(len);
    group.bench_function("redis-resp encode", |b| {
        b.iter(|| {
            out.clear();
            for frame in &replies {
                encode(frame, &mut out);
            }
            assert_eq!(out.len(), len);
        })
    });
    group.finish();
}

criterion_group!(benches, decode_groups, big_reply_group, encode_group);
criterion_main!(benches);
