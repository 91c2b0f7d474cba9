//! The cluster client engine against scripted backends that may say anything: requests from
//! two clients, backend bytes that are well-formed answers (a slot map, MOVED, ASK, TRYAGAIN,
//! CLUSTERDOWN, a value) or arbitrary bytes, connections that open, fail or close, time that
//! passes. It never panics, and once every backend is gone and time has run out every
//! request has exactly one answer, each client's in the order it asked.
//!
//! Commands come as argument vectors (`handle_request`) or as a proxy decodes them
//! (`handle_command`).
//!
//! Input: a list of steps, each a byte naming the step and the bytes it uses.
#![no_main]

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use redis_cluster_client::{ClientId, Config, ConnId, Engine, Output, RequestId};
use redis_cluster_route::Endpoint;
use redis_resp::Decoder;

const COMMANDS: &[&str] = &[
    "GET k",
    "SET k v",
    "MGET a b c",
    "MSET a 1 b 2",
    "DEL a b",
    "DBSIZE",
    "SCAN 0",
    "SCAN 16000 MATCH a* COUNT 3 TYPE string",
    "BLPOP l 0",
    "MULTI",
    "EXEC",
    "WATCH k",
    "SUBSCRIBE ch",
    "SSUBSCRIBE ch",
    "UNSUBSCRIBE",
    "HELLO 3",
    "PING",
    "KEYS *",
    "EVAL x 0",
];

const ANSWERS: &[&[u8]] = &[
    b"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n",
    b"*2\r\n*3\r\n:0\r\n:8191\r\n*2\r\n$0\r\n\r\n:7000\r\n*3\r\n:8192\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:7001\r\n",
    b"-MOVED 12539 127.0.0.1:7001\r\n",
    b"-ASK 12539 127.0.0.1:7001\r\n",
    b"-MOVED 12539 :7002\r\n",
    b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
    b"-CLUSTERDOWN The cluster is down\r\n",
    b"-LOADING Redis is loading the dataset in memory\r\n",
    b"-ERR unknown subcommand\r\n",
    b"+OK\r\n",
    b"$1\r\nv\r\n",
    b":3\r\n",
    b"*2\r\n$1\r\n0\r\n*0\r\n",
    b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    b"$28\r\n# Server\r\nserver_name:valkey\r\n\r\n",
    b"*-1\r\n",
    b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
    b"+string\r\n",
];

fuzz_target!(|input: &[u8]| {
    let seed = Endpoint {
        host: "127.0.0.1".into(),
        port: 7000,
        ..Endpoint::default()
    };
    let mut config = Config::new(vec![seed]);
    config.max_attempts = 4;
    let start = Instant::now();
    let mut now = start;
    let mut engine = Engine::new(config, now);
    let clients = [engine.open_client(), engine.open_client()];
    let mut asked: HashMap<ClientId, Vec<RequestId>> = HashMap::new();
    let mut answered: HashMap<ClientId, Vec<RequestId>> = HashMap::new();
    let mut conns: BTreeMap<ConnId, bool> = BTreeMap::new();
    let mut out = Vec::new();
    let mut closed = [false; 2];

    let mut drain = |engine: &mut Engine,
                     conns: &mut BTreeMap<ConnId, bool>,
                     answered: &mut HashMap<ClientId, Vec<RequestId>>| {
        while let Some(output) = engine.poll_output() {
            match output {
                Output::Connect { conn, .. } => {
                    conns.insert(conn, false);
                }
                Output::Close { conn } => {
                    conns.remove(&conn);
                }
                Output::Reply {
                    client, request, ..
                }
                | Output::Answered { client, request } => {
                    answered.entry(client).or_default().push(request);
                }
                _ => {}
            }
        }
        while engine.poll_transmit(&mut out).is_some() {
            out.clear();
        }
    };

    let mut at = 0;
    let mut byte = || {
        let b = input.get(at).copied();
        at += 1;
        b
    };
    while let Some(step) = byte() {
        let pick = usize::from(byte().unwrap_or(0));
        let nth =
            |conns: &BTreeMap<ConnId, bool>| conns.keys().nth(pick % conns.len().max(1)).copied();
        match step % 7 {
            0 => {
                let client = clients[pick % 2];
                let line = COMMANDS[(pick / 2) % COMMANDS.len()];
                let id = if pick < 128 {
                    let argv = line
                        .split(' ')
                        .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                        .collect();
                    engine.handle_request(now, client, argv)
                } else {
                    // As a proxy hands it on: decoded from an array or an inline line, its
                    // arguments in a vector a finished request left.
                    let mut wire = BytesMut::new();
                    if pick & 0x40 == 0 {
                        let args: Vec<&str> = line.split(' ').collect();
                        wire.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
                        for arg in args {
                            wire.extend_from_slice(
                                format!("${}\r\n{arg}\r\n", arg.len()).as_bytes(),
                            );
                        }
                    } else {
                        wire.extend_from_slice(line.as_bytes());
                        wire.extend_from_slice(b"\r\n");
                    }
                    match Decoder::new().decode_command(&mut wire) {
                        Ok(Some(command)) => engine.handle_command(now, client, command),
                        other => panic!("{line:?} does not decode: {other:?}"),
                    }
                };
                asked.entry(client).or_default().push(id);
            }
            1 => {
                if let Some(conn) = nth(&conns) {
                    conns.insert(conn, true);
                    engine.handle_connected(now, conn);
                }
            }
            2 => {
                if let Some(conn) = nth(&conns) {
                    let answer = ANSWERS[usize::from(byte().unwrap_or(0)) % ANSWERS.len()];
                    engine.handle_data(now, conn, answer);
                }
            }
            3 => {
                // Arbitrary bytes from a backend, up to 32.
                let len = usize::from(byte().unwrap_or(0) % 32);
                let bytes: Vec<u8> = (0..len).filter_map(|_| byte()).collect();
                if let Some(conn) = nth(&conns) {
                    engine.handle_data(now, conn, &bytes);
                }
            }
            4 => {
                if let Some(conn) = nth(&conns) {
                    conns.remove(&conn);
                    engine.handle_closed(now, conn, "closed");
                }
            }
            5 => {
                now += Duration::from_millis(pick as u64 * 10);
                engine.handle_timeout(now);
            }
            _ => {
                closed[pick % 2] = true;
                engine.close_client(now, clients[pick % 2]);
            }
        }
        drain(&mut engine, &mut conns, &mut answered);
    }

    // Every backend goes away, and no new one opens: each request must end, in order.
    for _ in 0..10_000 {
        let open: Vec<ConnId> = conns.keys().copied().collect();
        for conn in open {
            conns.remove(&conn);
            engine.handle_closed(now, conn, "refused");
        }
        drain(&mut engine, &mut conns, &mut answered);
        if engine.requests_pending() == 0 {
            break;
        }
        match engine.poll_timeout() {
            Some(deadline) => now = now.max(deadline),
            None => now += Duration::from_secs(1),
        }
        engine.handle_timeout(now);
        drain(&mut engine, &mut conns, &mut answered);
    }
    for (client, closed) in clients.into_iter().zip(closed) {
        let asked = asked.remove(&client).unwrap_or_default();
        let answered = answered.remove(&client).unwrap_or_default();
        // A closed client's requests may go unanswered; none is answered twice or out of order.
        assert!(answered.len() <= asked.len());
        assert_eq!(
            &asked[..answered.len()],
            &answered[..],
            "answers in request order"
        );
        if !closed {
            assert_eq!(
                answered.len(),
                asked.len(),
                "every request of an open client answered"
            );
        }
    }
    assert!(now - start < Duration::from_secs(100_000));
});
