//! Prints one JSON object per cluster-bus message found in a file of back-to-back messages (or
//! stdin), with the field names of the shared vectors' manifest.
//!
//! ```text
//! cargo run --example bus-dump -- ../shared/vectors/clusterbus/redis-7.0.15/PING-002.bin
//! ```
//!
//! Reading a pcap is not supported yet: give it the reassembled TCP payload of one direction.

use std::io::{self, Read, Write};

use redis_cluster_proto::bus::{Framed, Framer, Header, Message};
use serde_json::{Value, json};

fn main() -> io::Result<()> {
    let mut input = Vec::new();
    match std::env::args_os().nth(1) {
        Some(path) => input = std::fs::read(path)?,
        None => {
            io::stdin().read_to_end(&mut input)?;
        }
    }
    let framer = Framer::default();
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut rest = &input[..];
    while !rest.is_empty() {
        let len = match framer.frame(rest) {
            Ok(Framed::Message(len)) => len,
            Ok(Framed::Incomplete(more)) => {
                eprintln!("stream ends inside a message ({more} more bytes needed)");
                break;
            }
            Err(e) => {
                eprintln!("not a bus stream: {e}");
                break;
            }
        };
        let (bytes, after) = rest.split_at(len);
        rest = after;
        let value = match Message::decode(bytes) {
            Ok(message) => describe(&message),
            Err(e) => json!({ "error": e.to_string(), "totlen": len }),
        };
        writeln!(out, "{value}")?;
    }
    out.flush()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn header_fields(header: Header<'_>) -> Value {
    let slots: Vec<[u16; 2]> = header
        .myslots()
        .ranges()
        .map(|r| [r.start().get(), r.end().get()])
        .collect();
    json!({
        "totlen": header.totlen(),
        "version": header.version(),
        "sender": header.sender().to_string(),
        "sender_ip": text(header.myip()),
        "port": header.port(),
        "pport": header.pport(),
        "cport": header.cport(),
        "current_epoch": header.current_epoch(),
        "config_epoch": header.config_epoch(),
        "offset": header.offset(),
        "flags": header.flags().0,
        "state": header.state(),
        "mflags": header.mflags(),
        "count": header.count(),
        "extensions_field": header.extensions(),
        "myslots_count": header.myslots().len(),
        "myslots_ranges": slots,
        "replicaof": header.replicaof().map(|id| id.to_string()),
    })
}

fn describe(message: &Message<'_>) -> Value {
    let mut value = match message.header() {
        Some(header) => header_fields(header),
        None => json!({ "light_header": true }),
    };
    let body = match message {
        Message::Gossip {
            gossip, extensions, ..
        } => json!({
            "gossip": gossip.clone().map(|g| json!({
                "node_id": g.node().to_string(),
                "ip": text(g.ip()),
                "port": g.port(),
                "cport": g.cport(),
                "pport": g.pport(),
                "flags": g.flags().0,
                "ping_sent": g.ping_sent(),
                "pong_received": g.pong_received(),
            })).collect::<Vec<_>>(),
            "extensions": extensions.clone().map(|e| json!({
                "type": e.kind().0,
                "type_name": e.kind().name(),
                "length": e.len(),
                "value": e.text().map(text),
                "node_id": e.forgotten_node().map(|(id, _)| id.to_string()),
                "ttl_seconds": e.forgotten_node().map(|(_, ttl)| ttl),
                "shard_id": e.shard_id().map(|id| id.to_string()),
            })).collect::<Vec<_>>(),
        }),
        Message::Fail { node, .. } => json!({
            "fail": { "node_id": node.to_string() },
        }),
        Message::Publish {
            channel, message, ..
        } => json!({
            "publish": {
                "channel_len": channel.len(),
                "message_len": message.len(),
                "channel": text(channel),
                "message": text(message),
            },
        }),
        Message::Update {
            config_epoch,
            node,
            slots,
            ..
        } => json!({
            "update": {
                "config_epoch": config_epoch,
                "node_id": node.to_string(),
                "slots_count": slots.len(),
                "slot_ranges": slots.ranges().map(|r| [r.start().get(), r.end().get()]).collect::<Vec<_>>(),
            },
        }),
        Message::Module {
            module_id,
            kind,
            payload,
            ..
        } => json!({
            "module": {
                "module_id_raw_hex": module_id.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                "module_type": kind,
                "payload_len": payload.len(),
            },
        }),
        Message::Bare { .. } => json!({}),
        Message::Unknown { body, .. } => json!({ "body_len": body.len() }),
    };
    if let (Value::Object(fields), Value::Object(more)) = (&mut value, body) {
        fields.extend(more);
        fields.insert("type".into(), json!(message.kind().base().0));
        fields.insert("raw_type_field".into(), json!(message.kind().0));
        fields.insert("type_name".into(), json!(message.kind().name()));
    }
    value
}
