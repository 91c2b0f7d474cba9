//! `redis-cluster-bus` against a real `redis-server` in cluster mode: a fake node made of
//! this crate's messages MEETs the server, answers its PINGs with PONGs, and must end up in
//! the server's `CLUSTER NODES` as a known, connected master. This proves the encoder (a
//! real server accepts what it writes), not only the decoder.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redis_cluster_proto::bus::{
    Framed, Framer, Message, MessageType, NodeFlags, NodeId, OwnedBody, OwnedHeader, OwnedMessage,
    OwnedPing,
};
use redis_cluster_proto::hash_slot::SlotSet;
use redis_cluster_proto::resp::Frame;
use support::RedisServer;

/// The fake node's id.
const FAKE: NodeId = NodeId(*b"fa4e00000000000000000000000000000000c0de");
/// How long the whole handshake may take.
const DEADLINE: Duration = Duration::from_secs(20);

/// A PING, PONG or MEET from the fake node: a master with no slots, no gossip.
fn from_fake(kind: MessageType, port: u16, cport: u16) -> Vec<u8> {
    let message = OwnedMessage {
        kind,
        header: Some(OwnedHeader {
            port,
            current_epoch: 0,
            config_epoch: 0,
            offset: 0,
            sender: FAKE,
            myslots: SlotSet::new(),
            replicaof: NodeId::NONE,
            myip: Vec::new(),
            pport: 0,
            cport,
            flags: NodeFlags::MASTER | NodeFlags::MYSELF,
            state: 0,
            mflags: [0; 3],
        }),
        body: OwnedBody::Ping(OwnedPing::default()),
    };
    let mut wire = Vec::new();
    message.encode(&mut wire);
    wire
}

/// Reads one whole message from `stream`, or `None` when the peer closed it or nothing came
/// within the stream's read timeout.
fn read_message(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let framer = Framer::default();
    let mut chunk = [0u8; 8192];
    loop {
        match framer
            .frame(buf)
            .expect("the server sends valid bus frames")
        {
            Framed::Message(len) => return Some(buf.drain(..len).collect()),
            Framed::Incomplete(_) => match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            },
        }
    }
}

/// Answers every PING or MEET on a connection the server opened to the fake node with a
/// PONG, recording the types it got, until `stop`.
fn answer(
    mut stream: TcpStream,
    port: u16,
    cport: u16,
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
) {
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("set read timeout");
    let mut buf = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let Some(bytes) = read_message(&mut stream, &mut buf) else {
            continue;
        };
        let message = Message::decode(&bytes).expect("the server's message decodes");
        let header = message.header().expect("a normal header");
        seen.lock()
            .expect("lock")
            .push(format!("{:?}", header.kind()));
        if matches!(header.kind(), MessageType::PING | MessageType::MEET) {
            let pong = from_fake(MessageType::PONG, port, cport);
            if stream.write_all(&pong).is_err() {
                return;
            }
        }
    }
}

#[test]
fn a_fake_node_made_of_our_messages_joins_a_real_cluster_node() {
    let server = RedisServer::start_cluster(&[]);
    let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind the fake node's bus port");
    let cport = listener.local_addr().expect("local address").port();
    let port = cport.wrapping_sub(1).max(1); // announced client port; nothing connects to it
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::new()));

    // The fake node's inbound side: the server connects to `cport` and PINGs.
    listener.set_nonblocking(true).expect("non-blocking accept");
    let acceptor = {
        let (stop, seen) = (stop.clone(), seen.clone());
        thread::spawn(move || {
            let mut handlers = Vec::new();
            let started = Instant::now();
            while !stop.load(Ordering::Relaxed) && started.elapsed() < DEADLINE {
                match listener.accept() {
                    Ok((stream, _)) => {
                        stream.set_nonblocking(false).expect("blocking stream");
                        let (stop, seen) = (stop.clone(), seen.clone());
                        handlers.push(thread::spawn(move || {
                            answer(stream, port, cport, seen, stop)
                        }));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(20)),
                }
            }
            for handler in handlers {
                let _ = handler.join();
            }
        })
    };

    // The fake node's outbound link: MEET, and the server's PONG back on it.
    let mut link =
        TcpStream::connect(("127.0.0.1", server.bus_port())).expect("connect to the bus port");
    link.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("set read timeout");
    link.write_all(&from_fake(MessageType::MEET, port, cport))
        .expect("send MEET");
    let mut buf = Vec::new();
    let reply = read_message(&mut link, &mut buf).expect("the server answers the MEET");
    let reply = Message::decode(&reply).expect("its answer decodes");
    let reply_header = reply.header().expect("a normal header");
    assert_eq!(reply_header.kind(), MessageType::PONG);
    assert!(reply_header.flags().contains(NodeFlags::MYSELF));

    // Until the server lists the fake node as a connected master, out of handshake.
    let mut client = server.client();
    let started = Instant::now();
    let line = loop {
        let Frame::BulkString(nodes) = client.command(&[b"CLUSTER", b"NODES"]) else {
            panic!("CLUSTER NODES is a bulk string");
        };
        let text = String::from_utf8_lossy(&nodes).into_owned();
        let ours = text
            .lines()
            .find(|l| l.starts_with(&FAKE.to_string()))
            .map(str::to_owned);
        if let Some(line) = ours.filter(|l| l.contains(" connected") && !l.contains("handshake")) {
            break line;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the fake node never became connected:\n{text}\nseen: {:?}",
            seen.lock().expect("lock")
        );
        thread::sleep(Duration::from_millis(100));
    };
    stop.store(true, Ordering::Relaxed);
    acceptor.join().expect("acceptor thread");

    assert!(line.contains("master"), "{line}");
    assert!(
        line.contains(&format!("127.0.0.1:{port}@{cport}")),
        "{line}"
    );
    let seen = seen.lock().expect("lock");
    assert!(
        seen.iter().any(|t| t == "PING" || t == "MEET"),
        "the server never pinged the fake node: {seen:?}"
    );
}
