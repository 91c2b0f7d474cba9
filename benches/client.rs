//! The cluster client engine's own cost per request, without sockets, tasks or channels:
//! what `redis-cluster-proxy` spends in `redis-cluster-client` for each command it serves.
//!
//! Run with `cargo bench --bench client`. Each iteration is one round of pipelining clients
//! (one, or 50 as `redis-benchmark -c 50` has them): each client's 16 commands handed to the
//! engine, the bytes [`Engine::poll_transmit`] gives for each backend
//! connection, the replies those backends sent to the same bytes fed back with
//! [`Engine::handle_data`], and every reply taken from [`Engine::poll_output`] and reported
//! written, as the proxy's writer reports them. As in the proxy, replies the engine passes on
//! unchanged come as the backend's bytes ([`Config::raw_replies`]). With 50 clients, 800
//! requests are in flight at once, as in the proxy under that load (the client crate's
//! README has both rounds side by side). The backends' replies are recorded once, before the
//! measurement, from what a scripted server answers to what the engine wrote; every
//! iteration checks that the engine wrote as many bytes to each connection and answered
//! every command. Each command is handed as the proxy hands it, as the decoder read it from
//! the client's bytes ([`Engine::handle_command`]: the bytes are passed on, the argument
//! vector is one a finished request left); the `, argv` rows hand its arguments alone in a
//! new vector ([`Engine::handle_request`]), which the engine encodes again. Set-ups:
//! - `one server`: a static pool of one master ([`Config::fixed_map`]);
//! - `three servers`: a static pool of three masters, the slots split in three;
//! - `cluster`: a three-master cluster, its map read from `CLUSTER SHARDS`.
//!
//! Commands: `GET`, `SET` of a 64-byte value, and `MGET` of 10 keys (a split over slots in a
//! cluster, over servers in a static pool).

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use redis_cluster_proto::client::{ClientId, Config, ConnId, Engine, Output};
use redis_cluster_proto::hash_slot::SlotRange;
use redis_cluster_proto::resp::{Decoder, Frame, encode, encode_command, encoded_len};
use redis_cluster_proto::route::{Endpoint, SlotMap};

/// Commands per round, as `redis-benchmark -P 16` pipelines them.
const PIPELINE: usize = 16;

fn node(port: u16) -> Endpoint {
    Endpoint {
        host: "127.0.0.1".into(),
        port,
        ..Endpoint::default()
    }
}

fn bulk(text: &str) -> Frame {
    Frame::BulkString(Bytes::copy_from_slice(text.as_bytes()))
}

/// `CLUSTER SHARDS` of masters on ports 7000, 7001, … with the slots split evenly.
fn shards(masters: u16) -> Frame {
    let ranges = ranges(masters);
    Frame::Array(
        ranges
            .iter()
            .enumerate()
            .map(|(i, (first, last))| {
                Frame::Array(vec![
                    bulk("slots"),
                    Frame::Array(vec![
                        Frame::Integer(i64::from(*first)),
                        Frame::Integer(i64::from(*last)),
                    ]),
                    bulk("nodes"),
                    Frame::Array(vec![Frame::Array(vec![
                        bulk("endpoint"),
                        bulk("127.0.0.1"),
                        bulk("port"),
                        Frame::Integer(7000 + i as i64),
                        bulk("role"),
                        bulk("master"),
                    ])]),
                ])
            })
            .collect(),
    )
}

fn ranges(masters: u16) -> Vec<(u16, u16)> {
    let each = 16384 / masters;
    (0..masters)
        .map(|i| {
            let last = if i + 1 == masters {
                16383
            } else {
                (i + 1) * each - 1
            };
            (i * each, last)
        })
        .collect()
}

fn range(first: u16, last: u16) -> SlotRange {
    format!("{first}-{last}").parse().expect("a slot range")
}

/// What a scripted server answers to each command in `wire`, as bytes.
fn answer(wire: &[u8]) -> Vec<u8> {
    let mut input = BytesMut::from(wire);
    let mut decoder = Decoder::new();
    let mut out = Vec::new();
    while let Ok(Some(command)) = decoder.decode_command(&mut input) {
        let args: Vec<Vec<u8>> = (0..command.len())
            .filter_map(|i| command.arg(i))
            .map(|a| a.to_ascii_uppercase())
            .collect();
        let reply = match args.first().map(Vec::as_slice) {
            Some(b"INFO") => bulk("# Server\r\nredis_version:7.0.15\r\n"),
            Some(b"CLUSTER") if args.get(1).is_some_and(|a| a == b"INFO") => {
                bulk("cluster_state:ok\r\ncluster_current_epoch:3\r\n")
            }
            Some(b"CLUSTER") if args.get(1).is_some_and(|a| a == b"SHARDS") => shards(3),
            Some(b"GET") => bulk("value"),
            Some(b"SET") => Frame::SimpleString(Bytes::from_static(b"OK")),
            Some(b"MGET") => Frame::Array(vec![bulk("value"); args.len() - 1]),
            other => panic!("the scripted server does not answer {other:?}"),
        };
        encode(&reply, &mut out);
    }
    assert!(input.is_empty(), "a partial command in {wire:?}");
    out
}

/// An engine with its clients, its connections open and its map read.
struct Bench {
    engine: Engine,
    clients: Vec<ClientId>,
    now: Instant,
    /// What each connection's backend answers to a round, and how many bytes the engine
    /// writes to it in one.
    script: HashMap<ConnId, (usize, Vec<u8>)>,
    wire: Vec<u8>,
}

impl Bench {
    fn new(setup: &str, clients: usize) -> Self {
        let now = Instant::now();
        let mut config = Config::new(vec![node(7000)]);
        // As the proxy drives it: counted replies (reported written below), and those the
        // engine passes on unchanged as the backend's bytes.
        config.client_output_limit = Some(4 << 20);
        config.raw_replies = true;
        match setup {
            "one server" => {
                let mut map = SlotMap::default();
                map.assign_range(range(0, 16383), node(7000));
                config.fixed_map = Some(map);
            }
            "three servers" => {
                let mut map = SlotMap::default();
                for (i, (first, last)) in ranges(3).into_iter().enumerate() {
                    map.assign_range(range(first, last), node(7000 + i as u16));
                }
                config.fixed_map = Some(map);
            }
            _ => {}
        }
        let mut engine = Engine::new(config, now);
        let clients = (0..clients).map(|_| engine.open_client()).collect();
        let mut bench = Self {
            engine,
            clients,
            now,
            script: HashMap::new(),
            wire: Vec::new(),
        };
        // Until the engine has its map (and the cluster's version) and asks nothing more.
        bench.round(&[], true);
        bench
    }

    /// Hands `commands` to the engine (with their bytes, when they have them) and runs the
    /// connections until it asks nothing more; with `learn`, answers with the scripted server
    /// and records it. Returns the replies.
    fn round(&mut self, commands: &[Command], learn: bool) -> usize {
        for &client in &self.clients {
            for command in commands {
                match command {
                    Command::Decoded(command) => {
                        self.engine
                            .handle_command(self.now, client, command.clone())
                    }
                    Command::Argv(argv) => {
                        self.engine.handle_request(self.now, client, argv.clone())
                    }
                };
            }
        }
        let mut replies = 0;
        loop {
            while let Some(output) = self.engine.poll_output() {
                match output {
                    Output::Connect { conn, .. } => self.engine.handle_connected(self.now, conn),
                    Output::Reply { client, frame, .. } => {
                        replies += 1;
                        self.engine.handle_written(client, encoded_len(&frame));
                        black_box(frame);
                    }
                    Output::Raw { client, bytes, .. } => {
                        replies += 1;
                        self.engine.handle_written(client, bytes.len());
                        black_box(bytes);
                    }
                    _ => {}
                }
            }
            let Some(conn) = self.engine.poll_transmit(&mut self.wire) else {
                return replies;
            };
            if learn {
                self.script
                    .insert(conn, (self.wire.len(), answer(&self.wire)));
            }
            let (len, reply) = &self.script[&conn];
            assert_eq!(self.wire.len(), *len, "the engine wrote something else");
            self.engine.handle_data(self.now, conn, reply);
            self.wire.clear();
        }
    }
}

/// A command as the engine is given it.
enum Command {
    /// As the decoder read it from the bytes a client sent (the proxy's way).
    Decoded(redis_cluster_proto::resp::Command),
    /// Its arguments alone.
    Argv(Vec<Bytes>),
}

/// A round's commands named `name`, decoded from their bytes when `packed`.
fn commands(name: &str, packed: bool) -> Vec<Command> {
    let key = |i: usize| Bytes::from(format!("key:{i:06}"));
    (0..PIPELINE)
        .map(|i| {
            let name = Bytes::copy_from_slice(name.as_bytes());
            let argv: Vec<Bytes> = match name.as_ref() {
                b"GET" => vec![name, key(i)],
                b"SET" => vec![name, key(i), Bytes::from(vec![b'v'; 64])],
                _ => std::iter::once(name)
                    .chain((0..10).map(|j| key(i * 10 + j)))
                    .collect(),
            };
            if !packed {
                return Command::Argv(argv);
            }
            let mut bytes = Vec::new();
            encode_command(&argv, &mut bytes);
            let mut input = BytesMut::from(&bytes[..]);
            match Decoder::new().decode_command(&mut input) {
                Ok(Some(command)) if input.is_empty() => Command::Decoded(command),
                other => panic!("{argv:?} does not decode back: {other:?}"),
            }
        })
        .collect()
}

fn engine(c: &mut Criterion) {
    for clients in [1, 50] {
        for setup in ["one server", "three servers", "cluster"] {
            let name = match clients {
                1 => format!("engine/{setup}"),
                n => format!("engine/{setup}, {n} clients"),
            };
            let mut group = c.benchmark_group(name);
            let per_round = clients * PIPELINE;
            group.throughput(Throughput::Elements(per_round as u64));
            for (name, packed) in [
                ("GET", true),
                ("SET", true),
                ("MGET", true),
                ("GET", false),
                ("SET", false),
                ("MGET", false),
            ] {
                let commands = commands(name, packed);
                let mut bench = Bench::new(setup, clients);
                // The first rounds learn what the backends answer (the first has a new
                // connection's set-up in it); the same round again must write the same bytes
                // and be answered whole.
                assert_eq!(bench.round(&commands, true), per_round);
                assert_eq!(bench.round(&commands, true), per_round);
                assert_eq!(bench.round(&commands, false), per_round);
                let label = if name == "MGET" { "MGET10" } else { name };
                let label = if packed {
                    label.to_string()
                } else {
                    format!("{label}, argv")
                };
                group.bench_function(BenchmarkId::from_parameter(label), |b| {
                    b.iter(|| assert_eq!(bench.round(&commands, false), per_round));
                });
            }
            group.finish();
        }
    }
}

criterion_group!(benches, engine);
criterion_main!(benches);
