//! DUMP / RESTORE payloads as Redis 7.0 writes and reads them: the value in RDB encoding,
//! the RDB version (10) as two bytes little-endian, then the CRC-64 (Jones, reflected, as
//! the server's `crc64`) of all that, eight bytes little-endian.
//!
//! Strings are written as the server writes them — an integer that fits in 32 bits as one,
//! the rest as length and bytes — except that a string over 20 bytes is never LZF-compressed:
//! the server's compressor leaves its hash table uninitialised (liblzf's `INIT_HTAB 0`), so
//! its compressed bytes are not a fixed function of the string, and uncompressed strings are
//! equally valid RDB. Lists and hashes are written in the RDB's plain list (type 1) and hash
//! (type 4) encodings, which 7.0 reads. Reading takes what 7.0 writes for all three types:
//! strings in any encoding (LZF included), lists as quicklists of listpacks (type 18) and
//! hashes as listpacks (type 16), plus the plain encodings.

use std::collections::VecDeque;

use crc::{CRC_64_REDIS, Crc};

use crate::db::{Fields, Value, integer};
use crate::stream::{Stream, StreamId};

/// The RDB version of Redis 7.0.
const RDB_VERSION: u16 = 10;

const TYPE_STRING: u8 = 0;
const TYPE_LIST: u8 = 1;
const TYPE_HASH: u8 = 4;
const TYPE_HASH_ZIPLIST: u8 = 13;
const TYPE_HASH_LISTPACK: u8 = 16;
const TYPE_LIST_QUICKLIST: u8 = 14;
const TYPE_LIST_QUICKLIST_2: u8 = 18;
const TYPE_STREAM_LISTPACKS: u8 = 15;
const TYPE_STREAM_LISTPACKS_2: u8 = 19;

const CRC64: Crc<u64> = Crc::<u64>::new(&CRC_64_REDIS);

/// Why a payload was refused, with the server's texts.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DumpError {
    /// A newer RDB version, or a checksum that does not match.
    VersionOrChecksum,
    /// The value does not decode, or is of a type the toy node does not hold.
    BadFormat,
}

impl DumpError {
    pub(crate) fn text(&self) -> &'static str {
        match self {
            Self::VersionOrChecksum => "ERR DUMP payload version or checksum are wrong",
            Self::BadFormat => "ERR Bad data format",
        }
    }
}

/// The DUMP payload of `value`.
pub(crate) fn dump(value: &Value) -> Vec<u8> {
    seal(encode(value))
}

/// `value` in RDB encoding: its type byte, then the value.
fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    match value {
        Value::Str(bytes) => {
            out.push(TYPE_STRING);
            write_string(&mut out, bytes);
        }
        Value::List(items) => {
            out.push(TYPE_LIST);
            write_length(&mut out, items.len() as u64);
            for item in items {
                write_string(&mut out, item);
            }
        }
        Value::Hash(pairs) => {
            out.push(TYPE_HASH);
            write_length(&mut out, pairs.len() as u64);
            for (field, value) in pairs.iter() {
                write_string(&mut out, field);
                write_string(&mut out, value);
            }
        }
        Value::Stream(stream) => {
            out.push(TYPE_STREAM_LISTPACKS_2);
            stream.encode(&mut out, write_length);
        }
    }
    out
}

const OPCODE_AUX: u8 = 0xfa;
const OPCODE_RESIZEDB: u8 = 0xfb;
const OPCODE_EXPIRETIME_MS: u8 = 0xfc;
const OPCODE_EXPIRETIME: u8 = 0xfd;
const OPCODE_SELECTDB: u8 = 0xfe;
const OPCODE_EOF: u8 = 0xff;
const OPCODE_IDLE: u8 = 0xf8;
const OPCODE_FREQ: u8 = 0xf9;

/// What an RDB file holds for the toy: database 0's keys and the function libraries.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// Each key, its value and its expiry (Unix ms).
    pub(crate) keys: Vec<(Vec<u8>, Value, Option<u64>)>,
    /// Each library's code.
    pub(crate) libraries: Vec<Vec<u8>>,
}

/// An RDB file (version 10, as 7.0 writes) of `snapshot`: the header, two aux fields, the
/// libraries, database 0 with its sizes, each key (its expiry first), EOF and the CRC-64.
pub(crate) fn rdb_file(snapshot: &Snapshot) -> Vec<u8> {
    let mut out = format!("REDIS{RDB_VERSION:04}").into_bytes();
    for (name, value) in [("redis-ver", "7.0.15"), ("redis-bits", "64")] {
        out.push(OPCODE_AUX);
        write_string(&mut out, name.as_bytes());
        write_string(&mut out, value.as_bytes());
    }
    for code in &snapshot.libraries {
        out.push(OPCODE_FUNCTION);
        write_string(&mut out, code);
    }
    out.push(OPCODE_SELECTDB);
    write_length(&mut out, 0);
    out.push(OPCODE_RESIZEDB);
    write_length(&mut out, snapshot.keys.len() as u64);
    let expires = snapshot.keys.iter().filter(|(_, _, e)| e.is_some()).count();
    write_length(&mut out, expires as u64);
    for (key, value, expires) in &snapshot.keys {
        if let Some(at) = expires {
            out.push(OPCODE_EXPIRETIME_MS);
            out.extend_from_slice(&at.to_le_bytes());
        }
        let encoded = encode(value);
        out.push(encoded[0]);
        write_string(&mut out, key);
        out.extend_from_slice(&encoded[1..]);
    }
    out.push(OPCODE_EOF);
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Reads an RDB file of version 10 or before: database 0's strings, lists and hashes and
/// the function libraries. A key in another database, a module's data or a type the toy
/// does not hold is an error, never a key silently dropped.
pub(crate) fn read_rdb(file: &[u8]) -> Result<Snapshot, DumpError> {
    let bad = DumpError::BadFormat;
    let version = file
        .strip_prefix(b"REDIS")
        .and_then(|rest| {
            std::str::from_utf8(rest.get(..4)?)
                .ok()?
                .parse::<u16>()
                .ok()
        })
        .ok_or(DumpError::BadFormat)?;
    if version > RDB_VERSION {
        return Err(DumpError::VersionOrChecksum);
    }
    let mut reader = Reader { input: &file[9..] };
    let mut snapshot = Snapshot::default();
    let mut expires = None;
    loop {
        let opcode = reader.byte().ok_or(DumpError::BadFormat)?;
        match opcode {
            OPCODE_EOF => break,
            OPCODE_AUX => {
                reader.string().ok_or(DumpError::BadFormat)?;
                reader.string().ok_or(DumpError::BadFormat)?;
            }
            OPCODE_RESIZEDB => {
                reader.count().ok_or(DumpError::BadFormat)?;
                reader.count().ok_or(DumpError::BadFormat)?;
            }
            OPCODE_SELECTDB => {
                if reader.count() != Some(0) {
                    return Err(bad);
                }
            }
            OPCODE_EXPIRETIME_MS => {
                let bytes = reader.take(8).ok_or(DumpError::BadFormat)?;
                expires = Some(u64::from_le_bytes(
                    bytes.try_into().map_err(|_| DumpError::BadFormat)?,
                ));
            }
            OPCODE_EXPIRETIME => {
                let bytes = reader.take(4).ok_or(DumpError::BadFormat)?;
                let secs = u32::from_le_bytes(bytes.try_into().map_err(|_| DumpError::BadFormat)?);
                expires = Some(u64::from(secs) * 1000);
            }
            OPCODE_IDLE => {
                reader.count().ok_or(DumpError::BadFormat)?;
            }
            OPCODE_FREQ => {
                reader.byte().ok_or(DumpError::BadFormat)?;
            }
            OPCODE_FUNCTION => {
                snapshot
                    .libraries
                    .push(reader.string().ok_or(DumpError::BadFormat)?);
            }
            kind => {
                let key = reader.string().ok_or(DumpError::BadFormat)?;
                let value = reader.value_of(kind).ok_or(DumpError::BadFormat)?;
                snapshot.keys.push((key, value, expires.take()));
            }
        }
    }
    // The checksum covers everything before it; zero means the writer computed none.
    let body = file.len() - reader.input.len();
    let crc = reader
        .take(8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_le_bytes);
    match crc {
        Some(0) => Ok(snapshot),
        Some(crc) if crc == CRC64.checksum(&file[..body]) => Ok(snapshot),
        Some(_) => Err(DumpError::VersionOrChecksum),
        None if version < 5 => Ok(snapshot),
        None => Err(DumpError::BadFormat),
    }
}

/// A payload of `body`: the body, the RDB version, the CRC-64 (FUNCTION DUMP of no
/// functions is one with an empty body).
pub(crate) fn seal(mut body: Vec<u8>) -> Vec<u8> {
    body.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// The body of a payload whose version and checksum are right.
pub(crate) fn verify(payload: &[u8]) -> Result<&[u8], DumpError> {
    let Some(body_len) = payload.len().checked_sub(10) else {
        return Err(DumpError::VersionOrChecksum);
    };
    let (body, footer) = payload.split_at(body_len);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..10].try_into().map_err(|_| DumpError::BadFormat)?);
    if version > RDB_VERSION || CRC64.checksum(&payload[..body_len + 2]) != crc {
        return Err(DumpError::VersionOrChecksum);
    }
    Ok(body)
}

/// The value of a DUMP payload, after its version and checksum are checked.
pub(crate) fn restore(payload: &[u8]) -> Result<Value, DumpError> {
    let mut reader = Reader {
        input: verify(payload)?,
    };
    let value = reader.value().ok_or(DumpError::BadFormat)?;
    if reader.input.is_empty() {
        Ok(value)
    } else {
        Err(DumpError::BadFormat)
    }
}

/// The RDB opcode of one function library (`RDB_OPCODE_FUNCTION2`): its code follows.
const OPCODE_FUNCTION: u8 = 245;

/// FUNCTION DUMP's payload, as the server writes it: for each library its opcode and code,
/// then the version and checksum.
pub(crate) fn functions_payload<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut body = Vec::new();
    for code in codes {
        body.push(OPCODE_FUNCTION);
        write_string(&mut body, code);
    }
    seal(body)
}

/// The libraries' code in a FUNCTION DUMP payload.
pub(crate) fn functions_of(payload: &[u8]) -> Result<Vec<Vec<u8>>, DumpError> {
    let mut reader = Reader {
        input: verify(payload)?,
    };
    let mut codes = Vec::new();
    while !reader.input.is_empty() {
        if reader.byte() != Some(OPCODE_FUNCTION) {
            return Err(DumpError::BadFormat);
        }
        codes.push(reader.string().ok_or(DumpError::BadFormat)?);
    }
    Ok(codes)
}

/// An RDB length: 6 bits, 14 bits, or a marker byte and 32 or 64 bits big-endian.
fn write_length(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.extend_from_slice(&((len as u16) | 0x4000).to_be_bytes());
    } else if let Ok(len) = u32::try_from(len) {
        out.push(0x80);
        out.extend_from_slice(&len.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// An RDB string: as an 8-, 16- or 32-bit integer when it is the canonical text of one (as
/// the server's `rdbTryIntegerEncoding`), else its length and bytes.
fn write_string(out: &mut Vec<u8>, bytes: &[u8]) {
    if let Some(n) = canonical_integer(bytes) {
        if let Ok(n) = i8::try_from(n) {
            out.push(0xc0);
            out.extend_from_slice(&n.to_le_bytes());
            return;
        }
        if let Ok(n) = i16::try_from(n) {
            out.push(0xc1);
            out.extend_from_slice(&n.to_le_bytes());
            return;
        }
        if let Ok(n) = i32::try_from(n) {
            out.push(0xc2);
            out.extend_from_slice(&n.to_le_bytes());
            return;
        }
    }
    write_length(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// The integer whose shortest decimal text is `bytes`, if it is 11 bytes at most (the
/// server tries no longer string).
fn canonical_integer(bytes: &[u8]) -> Option<i64> {
    if bytes.len() > 11 {
        None
    } else {
        integer(bytes)
    }
}

/// A cursor over a payload's body; every read is checked, none panics.
struct Reader<'a> {
    input: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.input.len() {
            return None;
        }
        let (taken, rest) = self.input.split_at(n);
        self.input = rest;
        Some(taken)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// A length, or the special encoding (`Err`) of a string.
    fn length(&mut self) -> Option<Result<u64, u8>> {
        let first = self.byte()?;
        Some(match first >> 6 {
            0 => Ok(u64::from(first & 0x3f)),
            1 => Ok(u64::from(first & 0x3f) << 8 | u64::from(self.byte()?)),
            2 if first == 0x80 => Ok(u64::from(u32::from_be_bytes(
                self.take(4)?.try_into().ok()?,
            ))),
            2 if first == 0x81 => Ok(u64::from_be_bytes(self.take(8)?.try_into().ok()?)),
            2 => return None,
            _ => Err(first & 0x3f),
        })
    }

    fn count(&mut self) -> Option<usize> {
        usize::try_from(self.length()?.ok()?).ok()
    }

    /// A plain RDB length read as a number (a stream's IDs and counters).
    fn number(&mut self) -> Option<u64> {
        self.length()?.ok()
    }

    fn string(&mut self) -> Option<Vec<u8>> {
        match self.length()? {
            Ok(len) => Some(self.take(usize::try_from(len).ok()?)?.to_vec()),
            Err(0) => Some(i8::from_le_bytes([self.byte()?]).to_string().into_bytes()),
            Err(1) => {
                let n = i16::from_le_bytes(self.take(2)?.try_into().ok()?);
                Some(n.to_string().into_bytes())
            }
            Err(2) => {
                let n = i32::from_le_bytes(self.take(4)?.try_into().ok()?);
                Some(n.to_string().into_bytes())
            }
            Err(3) => {
                let compressed = self.count()?;
                let len = self.count()?;
                lzf_decompress(self.take(compressed)?, len)
            }
            Err(_) => None,
        }
    }

    fn value(&mut self) -> Option<Value> {
        let kind = self.byte()?;
        self.value_of(kind)
    }

    /// A value of type `kind`, whose type byte was read.
    fn value_of(&mut self, kind: u8) -> Option<Value> {
        match kind {
            TYPE_STRING => Some(Value::Str(self.string()?)),
            TYPE_LIST => {
                let n = self.count()?;
                let mut items = VecDeque::new();
                for _ in 0..n {
                    items.push_back(self.string()?);
                }
                Some(Value::List(items))
            }
            TYPE_HASH => {
                let n = self.count()?;
                let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                for _ in 0..n {
                    let field = self.string()?;
                    let value = self.string()?;
                    pairs.push((field, value));
                }
                // The server refuses a payload whose fields repeat.
                Fields::from_pairs(pairs).map(Value::Hash)
            }
            TYPE_HASH_LISTPACK => {
                let entries = listpack(&self.string()?)?;
                if entries.len() % 2 != 0 {
                    return None;
                }
                let mut entries = entries.into_iter();
                let mut pairs = Vec::new();
                while let (Some(field), Some(value)) = (entries.next(), entries.next()) {
                    pairs.push((field, value));
                }
                Fields::from_pairs(pairs).map(Value::Hash)
            }
            TYPE_LIST_QUICKLIST_2 => {
                let nodes = self.count()?;
                let mut items = VecDeque::new();
                for _ in 0..nodes {
                    let container = self.count()?;
                    let node = self.string()?;
                    match container {
                        1 => items.push_back(node), // a plain node: one large element
                        2 => items.extend(listpack(&node)?),
                        _ => return None,
                    }
                }
                Some(Value::List(items))
            }
            TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 => {
                let n = self.count()?;
                let mut nodes = Vec::new();
                for _ in 0..n {
                    let key = self.string()?;
                    nodes.push((key, listpack(&self.string()?)?));
                }
                let length = self.number()?;
                let last = StreamId::new(self.number()?, self.number()?);
                let newer = if kind == TYPE_STREAM_LISTPACKS_2 {
                    let first = StreamId::new(self.number()?, self.number()?);
                    let max_deleted = StreamId::new(self.number()?, self.number()?);
                    Some((first, max_deleted, self.number()?))
                } else {
                    None
                };
                // Consumer groups are not held: a stream with one is refused whole.
                if self.number()? != 0 {
                    return None;
                }
                Stream::decode(nodes, length, last, newer).map(Value::Stream)
            }
            // Ziplists (RDB 9 and before) are not read by the toy node.
            TYPE_HASH_ZIPLIST | TYPE_LIST_QUICKLIST => None,
            _ => None,
        }
    }
}

/// A listpack under construction, its elements encoded as the server's `lpAppend` and
/// `lpAppendInteger` encode them: an integer in the fewest bytes of the six integer widths,
/// a string in a 6-, 12- or 32-bit length form (or as an integer when it is the canonical
/// text of one), each element followed by its back-length.
#[derive(Default)]
pub(crate) struct ListpackWriter {
    body: Vec<u8>,
    count: usize,
}

impl ListpackWriter {
    pub(crate) fn integer(&mut self, n: i64) {
        let start = self.body.len();
        let out = &mut self.body;
        if (0..=127).contains(&n) {
            out.push(n as u8);
        } else if (-4096..=4095).contains(&n) {
            let raw = (n as u16) & 0x1fff;
            out.extend_from_slice(&[0xc0 | (raw >> 8) as u8, raw as u8]);
        } else {
            let (marker, width) = if i16::try_from(n).is_ok() {
                (0xf1, 2)
            } else if (-(1 << 23)..1 << 23).contains(&n) {
                (0xf2, 3)
            } else if i32::try_from(n).is_ok() {
                (0xf3, 4)
            } else {
                (0xf4, 8)
            };
            out.push(marker);
            out.extend_from_slice(&n.to_le_bytes()[..width]);
        }
        self.close(start);
    }

    pub(crate) fn string(&mut self, bytes: &[u8]) {
        if bytes.len() <= 20 {
            if let Some(n) = integer(bytes) {
                return self.integer(n);
            }
        }
        let start = self.body.len();
        let out = &mut self.body;
        let len = bytes.len();
        if len < 64 {
            out.push(0x80 | len as u8);
        } else if len < 4096 {
            out.extend_from_slice(&[0xe0 | (len >> 8) as u8, len as u8]);
        } else {
            out.push(0xf0);
            out.extend_from_slice(&(len as u32).to_le_bytes());
        }
        out.extend_from_slice(bytes);
        self.close(start);
    }

    /// The bytes `integer(n)` adds, its back-length included.
    pub(crate) fn integer_size(n: i64) -> usize {
        let encoded = match n {
            0..=127 => 1,
            -4096..=4095 => 2,
            -32_768..=32_767 => 3,
            -8_388_608..=8_388_607 => 4,
            _ if i32::try_from(n).is_ok() => 5,
            _ => 9,
        };
        encoded + backlen_size(encoded)
    }

    /// The bytes `string(bytes)` adds, its back-length included.
    pub(crate) fn string_size(bytes: &[u8]) -> usize {
        if bytes.len() <= 20 {
            if let Some(n) = integer(bytes) {
                return Self::integer_size(n);
            }
        }
        let encoded = bytes.len()
            + match bytes.len() {
                0..64 => 1,
                64..4096 => 2,
                _ => 5,
            };
        encoded + backlen_size(encoded)
    }

    /// The back-length of the element that began at `start`: its size in 7-bit groups,
    /// most significant first, every group but the first with its top bit set.
    fn close(&mut self, start: usize) {
        let size = self.body.len() - start;
        let groups = backlen_size(size);
        let size = size as u64;
        for group in (0..groups).rev() {
            let bits = ((size >> (7 * group)) & 0x7f) as u8;
            self.body.push(if group == groups - 1 {
                bits
            } else {
                bits | 0x80
            });
        }
        self.count += 1;
    }

    /// The listpack: its total size and element count (65535: too many to count), the
    /// elements, 0xFF.
    pub(crate) fn finish(self) -> Vec<u8> {
        let total = self.body.len() + 7;
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&(total as u32).to_le_bytes());
        out.extend_from_slice(&(self.count.min(65_535) as u16).to_le_bytes());
        out.extend_from_slice(&self.body);
        out.push(0xff);
        out
    }
}

/// The bytes of the back-length of an element of `size` bytes.
fn backlen_size(size: usize) -> usize {
    match size {
        0..=127 => 1,
        128..=16_382 => 2,
        16_383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// The entries of a listpack: a 4-byte total length, a 2-byte count, the entries (each
/// followed by its 1–5 byte back-length), 0xFF.
fn listpack(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let total = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    if total != bytes.len() || bytes.last() != Some(&0xff) {
        return None;
    }
    let mut at = 6;
    let mut entries = Vec::new();
    while *bytes.get(at)? != 0xff {
        let first = bytes[at];
        let (entry, len): (Vec<u8>, usize) = match first {
            0x00..=0x7f => (u64::from(first).to_string().into_bytes(), 1),
            0x80..=0xbf => {
                let n = usize::from(first & 0x3f);
                (bytes.get(at + 1..at + 1 + n)?.to_vec(), 1 + n)
            }
            0xc0..=0xdf => {
                let raw = u16::from(first & 0x1f) << 8 | u16::from(*bytes.get(at + 1)?);
                let n = i64::from((raw << 3) as i16 >> 3); // 13-bit two's complement
                (n.to_string().into_bytes(), 2)
            }
            0xe0..=0xef => {
                let n = usize::from(first & 0x0f) << 8 | usize::from(*bytes.get(at + 1)?);
                (bytes.get(at + 2..at + 2 + n)?.to_vec(), 2 + n)
            }
            0xf0 => {
                let n = u32::from_le_bytes(bytes.get(at + 1..at + 5)?.try_into().ok()?) as usize;
                (bytes.get(at + 5..at.checked_add(5 + n)?)?.to_vec(), 5 + n)
            }
            0xf1..=0xf4 => {
                let width = match first {
                    0xf1 => 2,
                    0xf2 => 3,
                    0xf3 => 4,
                    _ => 8,
                };
                let mut raw = [0u8; 8];
                raw[..width].copy_from_slice(bytes.get(at + 1..at + 1 + width)?);
                let shift = 64 - 8 * width as u32;
                let n = (i64::from_le_bytes(raw) << shift) >> shift;
                (n.to_string().into_bytes(), 1 + width)
            }
            _ => return None,
        };
        at = at.checked_add(len + backlen_size(len))?;
        entries.push(entry);
    }
    let count = usize::from(u16::from_le_bytes(bytes.get(4..6)?.try_into().ok()?));
    (count == 65_535 || count == entries.len()).then_some(entries)
}

/// LZF decompression into exactly `len` bytes: a control byte below 32 copies that many
/// plus one literal bytes; above, its top three bits (plus a byte when they are all set)
/// give a length, and the rest with the next byte a distance back into the output.
fn lzf_decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(len.min(input.len().saturating_mul(4)));
    let mut at = 0;
    while at < input.len() {
        let control = usize::from(input[at]);
        at += 1;
        if control < 32 {
            let run = input.get(at..at + control + 1)?;
            out.extend_from_slice(run);
            at += control + 1;
        } else {
            let mut run = control >> 5;
            if run == 7 {
                run += usize::from(*input.get(at)?);
                at += 1;
            }
            let back = ((control & 0x1f) << 8) + usize::from(*input.get(at)?) + 1;
            at += 1;
            let start = out.len().checked_sub(back)?;
            for i in 0..run + 2 {
                let byte = out[start + i];
                out.push(byte);
            }
        }
        if out.len() > len {
            return None;
        }
    }
    (out.len() == len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Payloads a real redis-server 7.0.15 gave for DUMP of these values.
    #[test]
    fn the_real_servers_payloads() {
        let hex = |s: &str| -> Vec<u8> {
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
                .collect()
        };
        let strings: [(&[u8], &str); 6] = [
            (b"v", "0001760a009108ceb219388ace"),
            (b"123", "00c07b0a0048e253e1007a67b9"),
            (b"-5", "00c0fb0a0049c4c6f4d7263f68"),
            (b"007", "00033030370a007258e27b4c69bad9"),
            (b"32767", "00c1ff7f0a00495a37da17f4d52b"),
            (b"2147483647", "00c2ffffff7f0a002c74e59ee02eada1"),
        ];
        for (value, payload) in strings {
            let value = Value::Str(value.to_vec());
            assert_eq!(dump(&value), hex(payload), "{value:?}");
            assert_eq!(restore(&hex(payload)), Ok(value));
        }
        // Compressed by the server: read, not written.
        let x21 = hex("00c30615017878e00a000a00941a83676017192f");
        assert_eq!(restore(&x21), Ok(Value::Str(vec![b'x'; 21])));
        let list = b"\x12\x01\x02\x10\x10\x00\x00\x00\x03\x00\x81a\x02\x82bb\x03{\x01\xff\n\x00\xc5\xa8gGM\xf4\xa4\xe8";
        let items = ["a", "bb", "123"].map(|s| s.as_bytes().to_vec());
        assert_eq!(restore(list), Ok(Value::List(items.into())));
        let hash = b"\x10\x12\x12\x00\x00\x00\x04\x00\x81f\x02\x81v\x02\x81n\x02\x01\x01\xff\n\x00\xfc\xe4\x08\xf1y\"\xe0\x16";
        let pairs = vec![
            (b"f".to_vec(), b"v".to_vec()),
            (b"n".to_vec(), b"1".to_vec()),
        ];
        let fields = Fields::from_pairs(pairs).expect("distinct fields");
        assert_eq!(restore(hash), Ok(Value::Hash(fields)));
        let mut bad = hex("0001760a009108ceb219388ace");
        bad[2] = b'w';
        assert_eq!(restore(&bad), Err(DumpError::VersionOrChecksum));
    }

    /// Streams a real redis-server 7.0.15 dumped: `XADD t 5-1 a 1 b hello`, `XADD t 5-2 a 2
    /// b x`, `XADD t 7-0 c 3` (one node, two entries with its master fields); then `XDEL t
    /// 5-2` (a tombstone); and a stream whose one entry was deleted (no node). Each restores
    /// and dumps again byte for byte.
    #[test]
    fn the_real_servers_streams() {
        let hex = |s: &str| -> Vec<u8> {
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
                .collect()
        };
        let payloads = [
            "130110000000000000000500000000000000014043430000001900030100010201816102816202000102\
             010001000101018568656c6c6f0605010201000101010201817802050100010201dfff0201018163020301\
             0601ff0307000501000003000a002295832d13666327",
            "130110000000000000000500000000000000014043430000001900020101010201816102816202000102\
             010001000101018568656c6c6f0605010301000101010201817802050100010201dfff0201018163020301\
             0601ff0207000501050203000a004b04c959031f8e16",
            "13000001010000010101000a00cda16212d34bf396",
        ];
        let mut values = Vec::new();
        for payload in payloads {
            let payload = hex(&payload.replace(' ', ""));
            let value = restore(&payload).expect("a stream");
            assert_eq!(dump(&value), payload);
            values.push(value);
        }
        let Value::Stream(tombstoned) = &values[1] else {
            panic!("not a stream");
        };
        assert_eq!(tombstoned.len(), 2);
        let all = tombstoned.range(StreamId::default(), StreamId::MAX, 0, false);
        let ids: Vec<String> = all.iter().map(|(id, _)| id.text()).collect();
        assert_eq!(ids, ["5-1", "7-0"]);
        assert_eq!(all[1].1, [(b"c".to_vec(), b"3".to_vec())]);
        // The same three entries added here give the server's bytes.
        let mut made = Stream::default();
        let limits = crate::stream::NodeLimits {
            bytes: 4096,
            entries: 100,
        };
        for (ms, seq, pairs) in [
            (5, 1, vec![("a", "1"), ("b", "hello")]),
            (5, 2, vec![("a", "2"), ("b", "x")]),
            (7, 0, vec![("c", "3")]),
        ] {
            let id = Some(crate::stream::IdArg::Id(StreamId::new(ms, seq)));
            let pairs = pairs
                .into_iter()
                .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect();
            made.add(id, pairs, 0, limits).expect("added");
        }
        assert_eq!(
            dump(&Value::Stream(made.clone())),
            hex(&payloads[0].replace(' ', ""))
        );
        made.delete(&[StreamId::new(5, 2)]);
        assert_eq!(Value::Stream(made), values[1]);
        // A group is not held: refused, not dropped.
        let mut grouped = hex(&payloads[2].replace(' ', ""));
        grouped[10] = 1;
        assert!(restore(&seal(grouped[..grouped.len() - 10].to_vec())).is_err());
    }

    #[test]
    fn every_value_comes_back() {
        let values = [
            Value::Str(Vec::new()),
            Value::Str(vec![b'z'; 70_000]),
            Value::List(["1", "-300", "x"].map(|s| s.as_bytes().to_vec()).into()),
            Value::Hash(Fields::from_pairs([(b"k".to_vec(), vec![7; 200])]).expect("one field")),
        ];
        for value in values {
            assert_eq!(restore(&dump(&value)), Ok(value));
        }
        for cut in 0..12 {
            let payload = dump(&Value::Str(b"hello".to_vec()));
            assert!(restore(&payload[..cut]).is_err());
        }
    }
}
