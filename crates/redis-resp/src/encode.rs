//! Encoding frames, commands and the common replies into a caller's buffer.

use bytes::BufMut;

use crate::frame::Frame;

/// Writes `frame` to `out`, byte for byte as the server would send it. A frame that was
/// decoded encodes back to the bytes it came from.
///
/// Recurses once per level of nesting; decoded frames are at most
/// [`Limits::MAX_DEPTH`](crate::Limits::MAX_DEPTH) deep.
///
/// ```
/// use redis_resp::{Frame, encode};
///
/// let mut out = Vec::new();
/// encode(&Frame::Array(vec![Frame::<&[u8]>::Integer(1), Frame::Null]), &mut out);
/// assert_eq!(out, b"*2\r\n:1\r\n_\r\n");
/// ```
pub fn encode<B: AsRef<[u8]>>(frame: &Frame<B>, out: &mut impl BufMut) {
    match frame {
        Frame::SimpleString(s) => line(out, b'+', s.as_ref()),
        Frame::SimpleError(s) => line(out, b'-', s.as_ref()),
        Frame::Integer(n) => encode_integer(*n, out),
        Frame::BulkString(b) => bulk(out, b'$', b.as_ref()),
        Frame::NullBulkString => out.put_slice(b"$-1\r\n"),
        Frame::Array(items) => items_of(out, b'*', items),
        Frame::NullArray => out.put_slice(b"*-1\r\n"),
        Frame::Null => out.put_slice(b"_\r\n"),
        Frame::Boolean(true) => out.put_slice(b"#t\r\n"),
        Frame::Boolean(false) => out.put_slice(b"#f\r\n"),
        Frame::Double(text) => line(out, b',', text.as_ref()),
        Frame::BigNumber(text) => line(out, b'(', text.as_ref()),
        Frame::BulkError(b) => bulk(out, b'!', b.as_ref()),
        Frame::VerbatimString { format, text } => {
            let text = text.as_ref();
            header(out, b'=', (text.len() + 4) as u64);
            out.put_slice(format);
            out.put_u8(b':');
            out.put_slice(text);
            out.put_slice(b"\r\n");
        }
        Frame::Map(pairs) => pairs_of(out, b'%', pairs),
        Frame::Set(items) => items_of(out, b'~', items),
        Frame::Push(items) => items_of(out, b'>', items),
        Frame::Attributed { attributes, value } => {
            pairs_of(out, b'|', attributes);
            encode(value, out);
        }
        Frame::StreamedString(chunks) => {
            out.put_slice(b"$?\r\n");
            for chunk in chunks {
                bulk(out, b';', chunk.as_ref());
            }
            out.put_slice(b";0\r\n");
        }
        Frame::StreamedArray(items) => streamed(out, b'*', items),
        Frame::StreamedSet(items) => streamed(out, b'~', items),
        Frame::StreamedMap(pairs) => {
            out.put_slice(b"%?\r\n");
            for (key, value) in pairs {
                encode(key, out);
                encode(value, out);
            }
            out.put_slice(b".\r\n");
        }
    }
}

/// How many bytes [`encode`] writes for `frame`: size a fixed buffer with it.
pub fn encoded_len<B: AsRef<[u8]>>(frame: &Frame<B>) -> usize {
    let header = |n: usize| 3 + decimal_len(n as u64, false);
    let bulk = |len: usize| header(len) + len + 2;
    let items = |items: &[Frame<B>]| items.iter().map(encoded_len).sum::<usize>();
    let pairs = |pairs: &[(Frame<B>, Frame<B>)]| {
        pairs
            .iter()
            .map(|(k, v)| encoded_len(k) + encoded_len(v))
            .sum::<usize>()
    };
    match frame {
        Frame::SimpleString(s) | Frame::SimpleError(s) | Frame::Double(s) | Frame::BigNumber(s) => {
            s.as_ref().len() + 3
        }
        Frame::Integer(n) => 3 + decimal_len(n.unsigned_abs(), *n < 0),
        Frame::BulkString(b) | Frame::BulkError(b) => bulk(b.as_ref().len()),
        Frame::NullBulkString | Frame::NullArray => 5,
        Frame::Null => 3,
        Frame::Boolean(_) => 4,
        Frame::VerbatimString { text, .. } => bulk(text.as_ref().len() + 4),
        Frame::Array(i) | Frame::Set(i) | Frame::Push(i) => header(i.len()) + items(i),
        Frame::Map(p) => header(p.len()) + pairs(p),
        Frame::Attributed { attributes, value } => {
            header(attributes.len()) + pairs(attributes) + encoded_len(value)
        }
        Frame::StreamedString(chunks) => {
            4 + chunks.iter().map(|c| bulk(c.as_ref().len())).sum::<usize>() + 4
        }
        Frame::StreamedArray(i) | Frame::StreamedSet(i) => 4 + items(i) + 3,
        Frame::StreamedMap(p) => 4 + pairs(p) + 3,
    }
}

/// Writes a command as the array of bulk strings that clients send.
///
/// ```
/// let mut out = Vec::new();
/// redis_resp::encode_command(&[&b"GET"[..], b"key"], &mut out);
/// assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n");
/// ```
pub fn encode_command<A: AsRef<[u8]>>(args: &[A], out: &mut impl BufMut) {
    header(out, b'*', args.len() as u64);
    for arg in args {
        bulk(out, b'$', arg.as_ref());
    }
}

/// Writes `+OK\r\n`.
pub fn encode_ok(out: &mut impl BufMut) {
    out.put_slice(b"+OK\r\n");
}

/// Writes `:n\r\n`.
pub fn encode_integer(n: i64, out: &mut impl BufMut) {
    out.put_u8(b':');
    decimal(out, n.unsigned_abs(), n < 0);
    out.put_slice(b"\r\n");
}

/// Writes a bulk string.
pub fn encode_bulk(payload: &[u8], out: &mut impl BufMut) {
    bulk(out, b'$', payload);
}

/// Writes RESP2's null bulk string, `$-1\r\n`.
pub fn encode_null_bulk(out: &mut impl BufMut) {
    out.put_slice(b"$-1\r\n");
}

/// Writes RESP3's null, `_\r\n`.
pub fn encode_null(out: &mut impl BufMut) {
    out.put_slice(b"_\r\n");
}

/// Writes a simple error, `-message\r\n`: `message` starts with its code (`ERR ...`) and holds
/// no CR or LF.
pub fn encode_error(message: &[u8], out: &mut impl BufMut) {
    line(out, b'-', message);
}

/// Writes the cluster redirect `-MOVED <slot> <host>:<port>\r\n`.
///
/// ```
/// let mut out = Vec::new();
/// redis_resp::encode_moved(3999, b"127.0.0.1", 6381, &mut out);
/// assert_eq!(out, b"-MOVED 3999 127.0.0.1:6381\r\n");
/// ```
pub fn encode_moved(slot: u16, host: &[u8], port: u16, out: &mut impl BufMut) {
    redirect(out, b"-MOVED ", slot, host, port);
}

/// Writes the cluster redirect `-ASK <slot> <host>:<port>\r\n`.
pub fn encode_ask(slot: u16, host: &[u8], port: u16, out: &mut impl BufMut) {
    redirect(out, b"-ASK ", slot, host, port);
}

fn redirect(out: &mut impl BufMut, prefix: &[u8], slot: u16, host: &[u8], port: u16) {
    out.put_slice(prefix);
    decimal(out, u64::from(slot), false);
    out.put_u8(b' ');
    out.put_slice(host);
    out.put_u8(b':');
    decimal(out, u64::from(port), false);
    out.put_slice(b"\r\n");
}

fn line(out: &mut impl BufMut, kind: u8, text: &[u8]) {
    out.put_u8(kind);
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

fn header(out: &mut impl BufMut, kind: u8, len: u64) {
    out.put_u8(kind);
    decimal(out, len, false);
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut impl BufMut, kind: u8, payload: &[u8]) {
    header(out, kind, payload.len() as u64);
    out.put_slice(payload);
    out.put_slice(b"\r\n");
}

fn items_of<B: AsRef<[u8]>>(out: &mut impl BufMut, kind: u8, items: &[Frame<B>]) {
    header(out, kind, items.len() as u64);
    for item in items {
        encode(item, out);
    }
}

fn pairs_of<B: AsRef<[u8]>>(out: &mut impl BufMut, kind: u8, pairs: &[(Frame<B>, Frame<B>)]) {
    header(out, kind, pairs.len() as u64);
    for (key, value) in pairs {
        encode(key, out);
        encode(value, out);
    }
}

fn streamed<B: AsRef<[u8]>>(out: &mut impl BufMut, kind: u8, items: &[Frame<B>]) {
    out.put_slice(&[kind, b'?', b'\r', b'\n']);
    for item in items {
        encode(item, out);
    }
    out.put_slice(b".\r\n");
}

/// Writes `n` in decimal, after a `-` when `negative`.
fn decimal(out: &mut impl BufMut, mut n: u64, negative: bool) {
    let mut digits = [0u8; 21];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if negative {
        at -= 1;
        digits[at] = b'-';
    }
    out.put_slice(&digits[at..]);
}

fn decimal_len(mut n: u64, negative: bool) -> usize {
    let mut len = 1 + usize::from(negative);
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}
