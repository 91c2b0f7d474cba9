//! `redis-resp` against a real `redis-server`: every reply, RESP2 and RESP3, decodes and
//! re-encodes to the bytes that arrived, and commands encoded by us are understood.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;

use bytes::BytesMut;
use redis_cluster_proto::resp::{Decoder, Frame, encode, encode_command};
use support::RedisServer;

/// Sends `args` then PING, and reads until PING's reply: returns the raw bytes of everything
/// before it and the frames our decoder made of them. Checks that they re-encode exactly.
fn exchange(stream: &mut TcpStream, args: &[&[u8]]) -> (Vec<u8>, Vec<Frame>) {
    let mut out = Vec::new();
    encode_command(args, &mut out);
    encode_command(&[b"PING"], &mut out);
    stream.write_all(&out).expect("send");
    let mut decoder = Decoder::new();
    let mut buf = BytesMut::new();
    let mut raw = Vec::new();
    let mut frames = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(frame) = decoder.decode(&mut buf).unwrap_or_else(|e| {
            panic!(
                "{:?}: {e} in {:?}",
                String::from_utf8_lossy(args[0]),
                String::from_utf8_lossy(&buf)
            )
        }) {
            if frame == Frame::SimpleString("PONG".into()) {
                assert!(buf.is_empty(), "bytes after PONG");
                let mut again = Vec::new();
                frames.iter().for_each(|f| encode(f, &mut again));
                assert!(
                    again == raw,
                    "{:?}: re-encoded {:?}, received {:?}",
                    String::from_utf8_lossy(args[0]),
                    String::from_utf8_lossy(&again),
                    String::from_utf8_lossy(&raw)
                );
                return (raw, frames);
            }
            encode(&frame, &mut raw);
            frames.push(frame);
        }
        let n = stream.read(&mut chunk).expect("read a reply");
        assert!(n > 0, "server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Commands whose replies cover every reply type the server sends.
fn commands() -> Vec<Vec<Vec<u8>>> {
    let big = vec![b'x'; 1024 * 1024];
    let list: &[&[u8]] = &[
        b"SET k v",
        b"GET k",
        b"GET missing",
        b"MGET k missing k",
        b"INCR n",
        b"INCRBYFLOAT f 1.5",
        b"DEL n",
        b"RPUSH l a b c",
        b"LRANGE l 0 -1",
        b"LRANGE missing 0 -1",
        b"HSET h f1 v1 f2 v2",
        b"HGETALL h",
        b"SADD s x y z",
        b"SMEMBERS s",
        b"ZADD z 1.5 a 2.25 b 1e20 c",
        b"ZRANGE z 0 -1 WITHSCORES",
        b"ZSCORE z b",
        b"EXISTS k missing",
        b"NOSUCHCOMMAND",
        b"INFO server",
        b"CLIENT INFO",
        b"COMMAND INFO GET SET",
        b"COMMAND DOCS GET",
        b"CONFIG GET maxmemory*",
        b"XADD st 1-1 a 1",
        b"XRANGE st - +",
        b"BLPOP missing 0.01",
        b"OBJECT ENCODING k",
        b"LPOS l c",
        b"MEMORY USAGE missing",
    ];
    let mut commands: Vec<Vec<Vec<u8>>> = list
        .iter()
        .map(|line| line.split(|&b| b == b' ').map(<[u8]>::to_vec).collect())
        .collect();
    commands.push(vec![b"SET".to_vec(), b"big".to_vec(), big]);
    commands.push(vec![b"GET".to_vec(), b"big".to_vec()]);
    commands.push(vec![
        b"SET".to_vec(),
        b"bin\x00\r\n".to_vec(),
        b"\x00\xff\r\n".to_vec(),
    ]);
    commands.push(vec![b"GET".to_vec(), b"bin\x00\r\n".to_vec()]);
    for kind in [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
        "verbatim", "true", "false",
    ] {
        commands.push(vec![
            b"DEBUG".to_vec(),
            b"PROTOCOL".to_vec(),
            kind.as_bytes().to_vec(),
        ]);
    }
    commands
}

fn run_all(stream: &mut TcpStream) -> Vec<Frame> {
    let mut all = Vec::new();
    for command in commands() {
        let args: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
        let (raw, frames) = exchange(stream, &args);
        assert!(
            !raw.is_empty(),
            "{:?}: no reply",
            String::from_utf8_lossy(args[0])
        );
        all.extend(frames);
    }
    all
}

fn kinds(frames: &[Frame], out: &mut std::collections::BTreeSet<u8>) {
    for frame in frames {
        out.insert(frame.kind().0);
        match frame {
            Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => kinds(items, out),
            Frame::Map(pairs)
            | Frame::Attributed {
                attributes: pairs, ..
            } => {
                for (k, v) in pairs {
                    kinds(std::slice::from_ref(k), out);
                    kinds(std::slice::from_ref(v), out);
                }
                if let Frame::Attributed { value, .. } = frame {
                    kinds(std::slice::from_ref(value), out);
                }
            }
            _ => {}
        }
    }
}

#[test]
fn every_reply_of_the_real_server_round_trips() {
    let server = RedisServer::start_standalone(&["--enable-debug-command", "yes"]);

    let mut resp2 = server.stream();
    let frames2 = run_all(&mut resp2);
    let mut seen2 = std::collections::BTreeSet::new();
    kinds(&frames2, &mut seen2);
    for kind in b"+-:$*" {
        assert!(
            seen2.contains(kind),
            "RESP2 replies lacked {:?}",
            char::from(*kind)
        );
    }
    assert!(frames2.contains(&Frame::NullBulkString));

    let mut resp3 = server.stream();
    let (_, hello) = exchange(&mut resp3, &[b"HELLO", b"3"]);
    assert!(
        matches!(hello.as_slice(), [Frame::Map(_)]),
        "HELLO 3: {hello:?}"
    );
    let frames3 = run_all(&mut resp3);
    let mut seen3 = std::collections::BTreeSet::new();
    kinds(&frames3, &mut seen3);
    for kind in b"+-:$*_#,(=%~|>" {
        assert!(
            seen3.contains(kind),
            "RESP3 replies lacked {:?}",
            char::from(*kind)
        );
    }
    assert!(frames3.contains(&Frame::Null));
    assert!(frames3.contains(&Frame::Boolean(false)));
}

#[test]
fn inline_and_pipelined_commands_are_understood_by_the_server_as_by_us() {
    // The same inline lines go to the server and to our command decoder: the server echoes
    // the arguments it parsed, and ours must be the same.
    let server = RedisServer::start_standalone(&[]);
    let mut stream = server.stream();
    let lines: &[&[u8]] = &[
        b"ECHO plain\r\n",
        b"ECHO \"quoted \\x41\\n\"\r\n",
        b"ECHO 'single \\' quote'\r\n",
        b"ECHO mid\"dle\"\r\n",
        b"  ECHO   spaced  \n",
    ];
    let mut decoder = Decoder::new();
    for line in lines {
        stream.write_all(line).expect("send");
        let mut buf = BytesMut::new();
        let mut chunk = [0u8; 1024];
        let reply = loop {
            if let Some(frame) = decoder.decode(&mut buf).expect("valid reply") {
                break frame;
            }
            let n = stream.read(&mut chunk).expect("read");
            assert!(n > 0);
            buf.extend_from_slice(&chunk[..n]);
        };
        let mut ours = BytesMut::from(*line);
        let command = decoder
            .decode_command(&mut ours)
            .expect("valid")
            .expect("complete");
        assert_eq!(command.arg(0), Some(&b"ECHO"[..]));
        assert_eq!(
            reply.as_bytes(),
            command.arg(1),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
}

/// Sends `request` then PING on a connection of its own, and returns the frames before PONG
/// (`None` if the server closed the connection or did not answer PING).
fn before_pong(server: &RedisServer, request: &[u8]) -> Option<Vec<Frame>> {
    let mut stream = server.stream();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .expect("a read timeout");
    stream.write_all(request).expect("send");
    stream.write_all(b"*1\r\n$4\r\nPING\r\n").expect("send");
    let mut decoder = Decoder::new();
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        while let Some(frame) = decoder.decode(&mut buf).expect("a valid reply") {
            if frame == Frame::SimpleString("PONG".into()) {
                return Some(frames);
            }
            frames.push(frame);
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

#[test]
fn every_array_our_command_decoder_takes_the_server_reads_as_the_same_arguments() {
    // A proxy passes a client's array on as it came (`Command::packed`). That is sound only if
    // the server reads every array our decoder takes as the same arguments, ending where ours
    // ends. Each byte of an ECHO is replaced by, or preceded by, a byte that makes a
    // malformed array (a leading zero, a sign, a space, a lone CR or LF, ...), or is removed;
    // every variant our decoder takes whole, as one command, goes to the server followed by
    // PING, which must echo what we read and then answer PING (no bytes left over, no
    // connection closed). An array the decoder refuses is not checked: it is stricter than
    // the server (it wants `\r\n` where the server skips any two bytes).
    let server = RedisServer::start_standalone(&[]);
    let echo: &[u8] = b"*2\r\n$4\r\nECHO\r\n$5\r\nhe\r\no\r\n";
    let bytes = b"0123456789+- \r\n\0*$:";
    let mut variants: Vec<Vec<u8>> = vec![
        echo.to_vec(),
        // Counts of zero or less are skipped by the server, and by us.
        [&b"*0\r\n"[..], echo].concat(),
        [&b"*-1\r\n"[..], echo].concat(),
        [&b"*-7\r\n"[..], echo].concat(),
    ];
    for at in 0..echo.len() {
        let mut removed = echo.to_vec();
        removed.remove(at);
        variants.push(removed);
        for &byte in bytes {
            let mut replaced = echo.to_vec();
            replaced[at] = byte;
            variants.push(replaced);
            let mut inserted = echo.to_vec();
            inserted.insert(at, byte);
            variants.push(inserted);
        }
    }
    let mut taken = 0;
    for variant in variants {
        let mut buf = BytesMut::from(&variant[..]);
        let Ok(Some(command)) = Decoder::new().decode_command(&mut buf) else {
            continue;
        };
        if !buf.is_empty() || command.packed().is_none() {
            continue;
        }
        taken += 1;
        let shown = String::from_utf8_lossy(&variant).into_owned();
        let packed = command.packed().unwrap_or_default();
        assert!(variant.ends_with(packed), "{shown:?}: packed {packed:?}");
        let replies = before_pong(&server, &variant)
            .unwrap_or_else(|| panic!("{shown:?}: taken by us, the server closed or hung"));
        let args: Vec<&[u8]> = command.args().collect();
        match (args.as_slice(), replies.as_slice()) {
            ([name, arg], [Frame::BulkString(echoed)]) if name.eq_ignore_ascii_case(b"ECHO") => {
                assert_eq!(echoed.as_ref(), *arg, "{shown:?}");
            }
            // Another command (a letter of ECHO replaced): the server refuses it as unknown.
            (_, [Frame::SimpleError(_)]) if !args[0].eq_ignore_ascii_case(b"ECHO") => {}
            _ => panic!("{shown:?}: we read {args:?}, the server answered {replies:?}"),
        }
    }
    // The payload's five bytes, each replaced by each of the bytes above, at least.
    assert!(taken > 5 * (bytes.len() - 1), "only {taken} variants taken");
}
