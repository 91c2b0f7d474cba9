//! Prints one JSON object per cluster-bus message, with the field names of the shared
//! vectors' manifest (`type_name`, `sender`, `current_epoch`, `myslots_ranges`, `gossip`,
//! `extensions`, …). The input is a file (or stdin) of back-to-back messages, or a pcap or
//! pcapng capture of a bus port (gzipped or not): then each TCP stream is reassembled and each
//! message also gets its `time`, `src` and `dst`.
//!
//! ```text
//! bus-dump tests/vectors/clusterbus/redis-7.0.15/PING-002.bin
//! bus-dump tests/vectors/clusterbus/redis-7.0.15/capture.pcap.gz
//! sudo tcpdump -i lo -w bus.pcap 'tcp port 17000' && bus-dump bus.pcap
//! ```

mod pcap;

#[path = "../../exit.rs"]
mod exit;

use std::io::{self, Read, Write};

use redis_cluster_bus::{Dialect, Framed, Framer, Header, Message, SIGNATURE, VERSION};
use serde_json::{Map, Value, json};

const USAGE: &str = "usage: bus-dump [--dialect auto|redis|valkey] [FILE]
  FILE       a file of bus messages, or a pcap or pcapng capture of a bus port, gzipped or
             not (default, or -: stdin)
  --dialect  how ping extensions 4 and 5 read: as the sender's header flags say (auto, the
             default: Valkey when it sets a light-header flag), as Redis numbers them
             (4 = internal_secret), or as Valkey does (4 / 5 = client_ipv4 / client_ipv6).
             A Valkey 8.0 node sets no light-header flag: its capture needs --dialect valkey";

fn main() {
    exit::exit("bus-dump", run());
}

fn run() -> io::Result<()> {
    let mut input = Vec::new();
    let mut dialect = None;
    let mut path = None;
    let mut args = lexopt::Parser::from_env();
    while let Some(arg) = args.next().map_err(exit::lexopt)? {
        use lexopt::Arg::{Long, Short, Value};
        match arg {
            Short('h') | Long("help") => {
                println!("{USAGE}");
                return Ok(());
            }
            Short('V') | Long("version") => {
                println!("bus-dump {}", env!("CARGO_PKG_VERSION"));
                return Ok(());
            }
            Long("dialect") => {
                let value = args.value().map_err(exit::lexopt)?;
                dialect = match value.to_str() {
                    Some("auto") => None,
                    Some("redis") => Some(Dialect::Redis),
                    Some("valkey") => Some(Dialect::Valkey),
                    _ => {
                        let value = value.to_string_lossy();
                        return Err(exit::usage(format!(
                            "--dialect {value}: not auto, redis or valkey"
                        )));
                    }
                };
            }
            // `-` is standard input.
            Value(arg) if path.is_none() => path = Some(arg).filter(|arg| arg != "-"),
            Value(_) => return Err(exit::usage(format!("one file at most\n{USAGE}"))),
            other => return Err(exit::usage(format!("{}\n{USAGE}", other.unexpected()))),
        }
    }
    match path {
        Some(path) => {
            input = std::fs::read(&path).map_err(|e| {
                io::Error::new(e.kind(), format!("{}: {e}", path.to_string_lossy()))
            })?;
        }
        None => {
            io::stdin().read_to_end(&mut input)?;
        }
    }
    if input.starts_with(&[0x1f, 0x8b]) {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&input[..]).read_to_end(&mut plain)?;
        input = plain;
    }
    let mut out = io::BufWriter::new(io::stdout().lock());
    if input.starts_with(&SIGNATURE) {
        let rest = dump(&input, &Map::new(), dialect, &mut out)?;
        if !rest.is_empty() {
            eprintln!(
                "the input ends inside a message ({} bytes left)",
                rest.len()
            );
        }
    } else {
        let segments = pcap::segments(&input).map_err(io::Error::other)?;
        let mut streams = pcap::Streams::default();
        for segment in &segments {
            if segment.payload.is_empty() {
                continue;
            }
            let stream = streams.push(segment);
            let mut context = Map::new();
            let (seconds, nanos) = segment.time;
            context.insert("time".into(), json!(format!("{seconds}.{nanos:09}")));
            context.insert("src".into(), json!(segment.flow.src.to_string()));
            context.insert("dst".into(), json!(segment.flow.dst.to_string()));
            if stream.gap {
                // Bytes are missing: start again at the next signature.
                stream.gap = false;
                let at = stream.bytes.windows(4).position(|w| w == SIGNATURE);
                let skipped = at.unwrap_or(stream.bytes.len());
                stream.bytes.drain(..skipped);
                let mut value = context.clone();
                value.insert("error".into(), json!("bytes missing from the capture"));
                writeln!(out, "{}", Value::Object(value))?;
            }
            let left = dump(&stream.bytes, &context, dialect, &mut out)?.len();
            let used = stream.bytes.len() - left;
            stream.bytes.drain(..used);
        }
    }
    out.flush()
}

/// Prints every whole message at the start of `bytes`, each with the fields of `context`
/// (its extensions read in `dialect`, or the sender's), and returns what is left: the start
/// of a message still to come, or what follows bytes that are not a bus stream (then said on
/// stderr, and left whole).
fn dump<'a>(
    bytes: &'a [u8],
    context: &Map<String, Value>,
    dialect: Option<Dialect>,
    out: &mut impl Write,
) -> io::Result<&'a [u8]> {
    let framer = Framer::default();
    let mut rest = bytes;
    while !rest.is_empty() {
        let len = match framer.frame(rest) {
            Ok(Framed::Message(len)) => len,
            Ok(Framed::Incomplete(_)) => break,
            Err(e) => {
                eprintln!("not a bus stream: {e}");
                return Ok(&[]);
            }
        };
        let (message, after) = rest.split_at(len);
        rest = after;
        let mut value = context.clone();
        match Message::decode(message) {
            Ok(decoded) => {
                value.extend(describe(&decoded, dialect));
                if decoded.header().is_none() {
                    // A light header carries totlen and version too; decoding checked that
                    // totlen is the message's length and the version the one there is.
                    value.insert("totlen".into(), json!(message.len()));
                    value.insert("version".into(), json!(VERSION));
                }
            }
            Err(e) => {
                value.insert("error".into(), json!(e.to_string()));
                value.insert("totlen".into(), json!(len));
            }
        }
        writeln!(out, "{}", Value::Object(value))?;
    }
    Ok(rest)
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
        "flags": header.flags().bits(),
        "state": header.state(),
        "mflags": header.mflags(),
        "count": header.count(),
        "extensions_field": header.extensions(),
        "myslots_count": header.myslots().len(),
        "myslots_ranges": slots,
        "replicaof": header.replicaof().map(|id| id.to_string()),
    })
}

fn describe(message: &Message<'_>, dialect: Option<Dialect>) -> Map<String, Value> {
    let mut value = match message.header() {
        Some(header) => header_fields(header),
        None => json!({ "light_header": true }),
    };
    // Extension types 4 and 5 read as the sender's fork numbers them, unless told.
    let dialect = dialect.unwrap_or_else(|| {
        message
            .header()
            .map_or(Dialect::Valkey, |h| Dialect::of_sender(h.flags()))
    });
    let body = match message {
        Message::Ping(ping) => json!({
            "dialect": format!("{dialect:?}").to_lowercase(),
            "gossip": ping.gossip().map(|g| json!({
                "node_id": g.node().to_string(),
                "ip": text(g.ip()),
                "port": g.port(),
                "cport": g.cport(),
                "pport": g.pport(),
                "flags": g.flags().bits(),
                "ping_sent": g.ping_sent(),
                "pong_received": g.pong_received(),
            })).collect::<Vec<_>>(),
            "extensions": ping.extensions().map(|e| json!({
                "type": e.kind().0,
                "type_name": e.kind().name_in(dialect),
                "length": e.len(),
                "value": e.text_in(dialect).map(text),
                "internal_secret": e.internal_secret(dialect).map(|s| text(s)),
                "node_id": e.forgotten_node().map(|(id, _)| id.to_string()),
                "ttl_seconds": e.forgotten_node().map(|(_, ttl)| ttl),
                "shard_id": e.shard_id().map(|id| id.to_string()),
            })).collect::<Vec<_>>(),
        }),
        Message::Fail(fail) => json!({
            "fail": { "node_id": fail.node().to_string() },
        }),
        Message::Publish(publish) => json!({
            "publish": {
                "channel_len": publish.channel().len(),
                "message_len": publish.message().len(),
                "channel": text(publish.channel()),
                "message": text(publish.message()),
            },
        }),
        Message::Update(update) => json!({
            "update": {
                "config_epoch": update.config_epoch(),
                "node_id": update.node().to_string(),
                "slots_count": update.slots().len(),
                "slot_ranges": update
                    .slots()
                    .ranges()
                    .map(|r| [r.start().get(), r.end().get()])
                    .collect::<Vec<_>>(),
            },
        }),
        Message::Module(module) => json!({
            "module": {
                "module_id_raw_hex": module
                    .module_id()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>(),
                "module_type": module.kind(),
                "payload_len": module.payload().len(),
            },
        }),
        Message::Failover(_) => json!({}),
        Message::Unknown(unknown) => json!({ "body_len": unknown.body().len() }),
    };
    let mut fields = Map::new();
    if let (Value::Object(header), Value::Object(body)) = (&mut value, body) {
        fields.append(header);
        fields.extend(body);
    }
    fields.insert("type".into(), json!(message.kind().base().0));
    fields.insert("raw_type_field".into(), json!(message.kind().0));
    fields.insert("type_name".into(), json!(message.kind().name()));
    fields
}
