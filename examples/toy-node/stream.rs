//! Streams held as the server holds them: entries in macro nodes of at most
//! `stream-node-max-entries` entries and `stream-node-max-bytes` bytes, each node under the
//! ID of its first entry (the server's radix tree key), with the fields of that first entry
//! as the node's master fields, and deleted entries kept as tombstones until their whole
//! node goes.
//!
//! Keeping the server's shape, rather than a plain ordered map, is what makes the rest
//! exact: `~` trimming removes whole nodes only, so what it leaves depends on where the
//! nodes split; DUMP writes each node as the server's listpack, so a payload is byte for
//! byte the server's; and a payload of the server's reads back into the same nodes.
//! Consumer groups are not held (a payload with one is refused, never read in part).

use std::collections::BTreeMap;

use crate::dump::ListpackWriter;

/// A stream entry ID: milliseconds and a sequence number, ordered as the server orders them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct StreamId {
    pub(crate) ms: u64,
    pub(crate) seq: u64,
}

impl StreamId {
    pub(crate) const MAX: Self = Self {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub(crate) fn new(ms: u64, seq: u64) -> Self {
        Self { ms, seq }
    }

    /// The next ID (`streamIncrID`), none after the last possible one.
    pub(crate) fn next(self) -> Option<Self> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(Self::new(ms + 1, 0)),
            (ms, seq) => Some(Self::new(ms, seq + 1)),
        }
    }

    /// The previous ID (`streamDecrID`), none before 0-0.
    pub(crate) fn prev(self) -> Option<Self> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(Self::new(ms - 1, u64::MAX)),
            (ms, seq) => Some(Self::new(ms, seq - 1)),
        }
    }

    /// `ms-seq`, as every reply writes an ID.
    pub(crate) fn text(self) -> String {
        format!("{}-{}", self.ms, self.seq)
    }

    /// The 16-byte radix tree key: both halves big-endian.
    fn key(self) -> [u8; 16] {
        let mut key = [0; 16];
        key[..8].copy_from_slice(&self.ms.to_be_bytes());
        key[8..].copy_from_slice(&self.seq.to_be_bytes());
        key
    }

    fn from_key(key: &[u8]) -> Option<Self> {
        let key: &[u8; 16] = key.try_into().ok()?;
        let (ms, seq) = key.split_at(8);
        Some(Self::new(
            u64::from_be_bytes(ms.try_into().ok()?),
            u64::from_be_bytes(seq.try_into().ok()?),
        ))
    }

    /// The ID `delta` away from this one, both halves wrapping as the server's unsigned
    /// arithmetic does.
    fn offset(self, ms: i64, seq: i64) -> Self {
        Self::new(
            self.ms.wrapping_add_signed(ms),
            self.seq.wrapping_add_signed(seq),
        )
    }
}

/// How an ID argument was written, as the server's `streamGenericParseIDOrReply` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdArg {
    /// `ms-seq`, or `ms` alone (its sequence then the caller's default).
    Id(StreamId),
    /// `ms-*` (XADD only): the sequence is chosen.
    AutoSeq(u64),
}

/// Parses an ID: `-` and `+` only when `special` (XRANGE's bounds), `ms-*` only when
/// `auto_seq` (XADD), a missing sequence as `missing_seq`. `None` is the server's "Invalid
/// stream ID".
pub(crate) fn parse_id(
    arg: &[u8],
    missing_seq: u64,
    special: bool,
    auto_seq: bool,
) -> Option<IdArg> {
    // The server copies the argument into a 128-byte C string.
    if arg.len() > 127 {
        return None;
    }
    let arg = arg.split(|&b| b == 0).next().unwrap_or(arg);
    match arg {
        b"-" if special => return Some(IdArg::Id(StreamId::default())),
        b"+" if special => return Some(IdArg::Id(StreamId::MAX)),
        b"-" | b"+" => return None,
        _ => {}
    }
    let (ms, seq) = match arg.iter().position(|&b| b == b'-') {
        Some(at) => (&arg[..at], Some(&arg[at + 1..])),
        None => (arg, None),
    };
    let ms = unsigned(ms)?;
    match seq {
        None => Some(IdArg::Id(StreamId::new(ms, missing_seq))),
        Some(b"*") if auto_seq => Some(IdArg::AutoSeq(ms)),
        Some(seq) => Some(IdArg::Id(StreamId::new(ms, unsigned(seq)?))),
    }
}

/// An unsigned 64-bit number as the server's `string2ull` reads one: the plain decimal form,
/// or else whatever C's `strtoull` takes whole (leading spaces, a sign, leading zeros; a
/// minus wraps around), never a plain negative number or one out of range.
fn unsigned(text: &[u8]) -> Option<u64> {
    if let Some(n) = crate::db::integer(text) {
        return u64::try_from(n).ok();
    }
    let mut rest = text;
    while let [b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r', tail @ ..] = rest {
        rest = tail;
    }
    let negative = rest.first() == Some(&b'-');
    if let [b'+' | b'-', tail @ ..] = rest {
        rest = tail;
    }
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: u64 = 0;
    for &digit in rest {
        n = n.checked_mul(10)?.checked_add(u64::from(digit - b'0'))?;
    }
    Some(if negative { n.wrapping_neg() } else { n })
}

/// An entry's field–value pairs, in the order they were added.
pub(crate) type Pairs = [(Vec<u8>, Vec<u8>)];

/// One entry as stored: its ID, its field–value pairs, and whether it was deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Item {
    id: StreamId,
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    deleted: bool,
}

/// A macro node: the master fields (its first entry's) and its entries, tombstones
/// included, in ID order.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    fields: Vec<Vec<u8>>,
    items: Vec<Item>,
    /// Entries not deleted.
    live: usize,
}

/// The server's two limits on a macro node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeLimits {
    /// `stream-node-max-bytes` (0: the listpack's own 1 GiB).
    pub(crate) bytes: usize,
    /// `stream-node-max-entries` (0: no limit).
    pub(crate) entries: usize,
}

/// The listpack size past which no stream node grows (`STREAM_LISTPACK_MAX_SIZE`).
const LISTPACK_MAX: usize = 1 << 30;

impl Node {
    fn new(fields: Vec<Vec<u8>>) -> Self {
        Self {
            fields,
            items: Vec::new(),
            live: 0,
        }
    }

    /// Whether an entry's fields are the master fields, in order (`SAMEFIELDS`).
    fn same_fields(&self, pairs: &Pairs) -> bool {
        pairs.len() == self.fields.len() && pairs.iter().zip(&self.fields).all(|(p, f)| p.0 == *f)
    }

    /// The node's listpack as the server lays it out: the master entry (live count, deleted
    /// count, master fields, a 0), then each entry (flags, ID deltas, its fields unless they
    /// are the master's, its values, its element count).
    fn listpack(&self, master: StreamId) -> Vec<u8> {
        let mut lp = ListpackWriter::default();
        lp.integer(self.live as i64);
        lp.integer((self.items.len() - self.live) as i64);
        lp.integer(self.fields.len() as i64);
        for field in &self.fields {
            lp.string(field);
        }
        lp.integer(0);
        for item in &self.items {
            let same = self.same_fields(&item.pairs);
            let flags = i64::from(item.deleted) | if same { 2 } else { 0 };
            lp.integer(flags);
            lp.integer(item.id.ms.wrapping_sub(master.ms) as i64);
            lp.integer(item.id.seq.wrapping_sub(master.seq) as i64);
            let n = item.pairs.len() as i64;
            if same {
                for (_, value) in &item.pairs {
                    lp.string(value);
                }
                lp.integer(n + 3);
            } else {
                lp.integer(n);
                for (field, value) in &item.pairs {
                    lp.string(field);
                    lp.string(value);
                }
                lp.integer(n + 3 + n + 1);
            }
        }
        lp.finish()
    }

    /// `self.listpack(master).len()`, without writing it: XADD asks it of the last node
    /// each time, whose single entry may be as large as a client can send.
    fn listpack_len(&self, master: StreamId) -> usize {
        let int = ListpackWriter::integer_size;
        let string = ListpackWriter::string_size;
        let mut len = 7; // the 6-byte header and the end byte
        len += int(self.live as i64) + int((self.items.len() - self.live) as i64);
        len += int(self.fields.len() as i64) + int(0);
        len += self.fields.iter().map(|f| string(f)).sum::<usize>();
        for item in &self.items {
            let same = self.same_fields(&item.pairs);
            len += int(i64::from(item.deleted) | if same { 2 } else { 0 });
            len += int(item.id.ms.wrapping_sub(master.ms) as i64);
            len += int(item.id.seq.wrapping_sub(master.seq) as i64);
            let n = item.pairs.len() as i64;
            if same {
                len += item.pairs.iter().map(|(_, v)| string(v)).sum::<usize>() + int(n + 3);
            } else {
                len += int(n) + int(n + 3 + n + 1);
                len += item
                    .pairs
                    .iter()
                    .map(|(f, v)| string(f) + string(v))
                    .sum::<usize>();
            }
        }
        len
    }

    /// A node read back from its listpack's elements (`master` is its radix tree key).
    fn from_elements(master: StreamId, elements: &[Vec<u8>]) -> Option<Self> {
        let mut at = elements.iter();
        let mut number = || -> Option<i64> { crate::db::integer(at.next()?) };
        let live = usize::try_from(number()?).ok()?;
        let deleted = usize::try_from(number()?).ok()?;
        let nfields = usize::try_from(number()?).ok()?;
        let rest = elements.get(3..)?;
        let fields = rest.get(..nfields)?.to_vec();
        let mut rest = rest.get(nfields..)?;
        if rest.first().map(Vec::as_slice) != Some(b"0") {
            return None;
        }
        rest = &rest[1..];
        let mut node = Self::new(fields);
        let int = |e: &Vec<u8>| crate::db::integer(e);
        while !rest.is_empty() {
            let [flags, ms, seq, tail @ ..] = rest else {
                return None;
            };
            let (flags, ms, seq) = (int(flags)?, int(ms)?, int(seq)?);
            let (pairs, tail): (Vec<(Vec<u8>, Vec<u8>)>, _) = if flags & 2 != 0 {
                let values = tail.get(..nfields)?;
                let pairs = node.fields.iter().cloned().zip(values.iter().cloned());
                (pairs.collect(), &tail[nfields..])
            } else {
                let n = usize::try_from(int(tail.first()?)?).ok()?;
                let body = tail.get(1..1 + n.checked_mul(2)?)?;
                let pairs = body.chunks(2).map(|p| (p[0].clone(), p[1].clone()));
                (pairs.collect(), &tail[1 + 2 * n..])
            };
            let [_count, tail @ ..] = tail else {
                return None;
            };
            let id = master.offset(ms, seq);
            if node.items.last().is_some_and(|last| last.id >= id) || id < master {
                return None;
            }
            let deleted = flags & 1 != 0;
            node.live += usize::from(!deleted);
            node.items.push(Item { id, pairs, deleted });
            rest = tail;
        }
        (node.live == live && node.items.len() == live + deleted).then_some(node)
    }
}

/// A stream: its macro nodes and the metadata the server keeps beside them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stream {
    /// Each node under its master ID (the ID of the first entry added to it).
    nodes: BTreeMap<StreamId, Node>,
    /// Entries not deleted.
    length: u64,
    /// The largest ID ever added (entries deleted since included).
    pub(crate) last_id: StreamId,
    /// The first entry not deleted (0-0 when empty).
    first_id: StreamId,
    /// The largest ID deleted by XDEL.
    max_deleted: StreamId,
    /// Entries ever added.
    entries_added: u64,
}

/// Why XADD added nothing, each with the server's text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AddError {
    /// The ID is not above the last one.
    NotAboveTop,
    /// The last ID is the largest possible.
    Exhausted,
}

impl AddError {
    pub(crate) fn text(&self) -> &'static str {
        match self {
            Self::NotAboveTop => {
                "ERR The ID specified in XADD is equal or smaller than the target stream top item"
            }
            Self::Exhausted => {
                "ERR The stream has exhausted the last possible ID, unable to add more items"
            }
        }
    }
}

/// What XADD and XTRIM trim to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trim {
    /// At most this many entries.
    MaxLen(u64),
    /// No entry below this ID.
    MinId(StreamId),
}

impl Stream {
    /// Entries not deleted (XLEN).
    pub(crate) fn len(&self) -> u64 {
        self.length
    }

    /// The last entry not deleted, 0-0 when there is none (`streamLastValidID`).
    pub(crate) fn last_valid_id(&self) -> StreamId {
        self.nodes
            .values()
            .rev()
            .find_map(|node| node.items.iter().rev().find(|i| !i.deleted))
            .map_or_else(StreamId::default, |item| item.id)
    }

    /// Adds an entry: `id` given (`Some(IdArg)`) or chosen from `now` (Unix ms), as
    /// `streamAppendItem` chooses it. Its ID, or why nothing was added.
    pub(crate) fn add(
        &mut self,
        id: Option<IdArg>,
        pairs: Vec<(Vec<u8>, Vec<u8>)>,
        now: u64,
        limits: NodeLimits,
    ) -> Result<StreamId, AddError> {
        if self.last_id == StreamId::MAX {
            return Err(AddError::Exhausted);
        }
        let id = match id {
            Some(IdArg::Id(id)) => id,
            Some(IdArg::AutoSeq(ms)) if ms == self.last_id.ms => {
                if self.last_id.seq == u64::MAX {
                    return Err(AddError::NotAboveTop);
                }
                StreamId::new(ms, self.last_id.seq + 1)
            }
            Some(IdArg::AutoSeq(ms)) => StreamId::new(ms, 0),
            None if now > self.last_id.ms => StreamId::new(now, 0),
            None => self.last_id.next().ok_or(AddError::Exhausted)?,
        };
        if id <= self.last_id {
            return Err(AddError::NotAboveTop);
        }
        let max_bytes = match limits.bytes {
            0 => LISTPACK_MAX,
            n => n.min(LISTPACK_MAX),
        };
        let new_bytes: usize = pairs.iter().map(|(f, v)| f.len() + v.len()).sum();
        let tail_fits = self.nodes.iter().next_back().is_some_and(|(master, node)| {
            node.listpack_len(*master) + new_bytes < max_bytes
                && (limits.entries == 0 || node.items.len() < limits.entries)
        });
        if !tail_fits {
            let fields = pairs.iter().map(|(f, _)| f.clone()).collect();
            self.nodes.insert(id, Node::new(fields));
        }
        if let Some((_, node)) = self.nodes.iter_mut().next_back() {
            node.items.push(Item {
                id,
                pairs,
                deleted: false,
            });
            node.live += 1;
        }
        if self.length == 0 {
            self.first_id = id;
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        Ok(id)
    }

    /// Trims from the head as `streamTrim` does: whole nodes while that leaves enough; then,
    /// unless `approx`, entries inside the next node marked deleted. At most `limit` entries
    /// go (0: no limit). How many went.
    pub(crate) fn trim(&mut self, trim: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted: u64 = 0;
        let masters: Vec<StreamId> = self.nodes.keys().copied().collect();
        for master in masters {
            if matches!(trim, Trim::MaxLen(max) if self.length <= max) {
                break;
            }
            let Some(node) = self.nodes.get_mut(&master) else {
                break;
            };
            let entries = node.live as u64;
            if limit != 0 && deleted + entries > limit {
                break;
            }
            let whole = match trim {
                Trim::MaxLen(max) => self.length - entries >= max,
                Trim::MinId(min) => node.items.last().is_some_and(|last| last.id < min),
            };
            if whole {
                self.nodes.remove(&master);
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            for item in &mut node.items {
                let stop = match trim {
                    Trim::MaxLen(max) => self.length <= max,
                    Trim::MinId(min) => item.id >= min,
                };
                if stop {
                    break;
                }
                if !item.deleted {
                    item.deleted = true;
                    node.live -= 1;
                    self.length -= 1;
                    deleted += 1;
                }
            }
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::default();
        } else if deleted > 0 {
            self.first_id = self.first_valid_id();
        }
        deleted
    }

    fn first_valid_id(&self) -> StreamId {
        self.nodes
            .values()
            .find_map(|node| node.items.iter().find(|i| !i.deleted))
            .map_or_else(StreamId::default, |item| item.id)
    }

    /// XDEL of `ids`: each entry found is marked deleted (its node goes with its last
    /// entry). How many were.
    pub(crate) fn delete(&mut self, ids: &[StreamId]) -> u64 {
        let mut deleted = 0;
        let mut first_gone = false;
        for &id in ids {
            let Some((&master, node)) = self.nodes.range_mut(..=id).next_back() else {
                continue;
            };
            let Some(item) = node.items.iter_mut().find(|i| i.id == id && !i.deleted) else {
                continue;
            };
            item.deleted = true;
            node.live -= 1;
            if node.live == 0 {
                self.nodes.remove(&master);
            }
            self.length -= 1;
            deleted += 1;
            first_gone |= id == self.first_id;
            self.max_deleted = self.max_deleted.max(id);
        }
        if deleted > 0 {
            if self.length == 0 {
                self.first_id = StreamId::default();
            } else if first_gone {
                self.first_id = self.first_valid_id();
            }
        }
        deleted
    }

    /// The entries from `start` to `end`, both included, in order (`rev`: last first), at
    /// most `count` of them (0: all).
    pub(crate) fn range(
        &self,
        start: StreamId,
        end: StreamId,
        count: usize,
        rev: bool,
    ) -> Vec<(StreamId, &Pairs)> {
        if start > end {
            return Vec::new();
        }
        let first = self
            .nodes
            .range(..=start)
            .next_back()
            .map_or(start, |(k, _)| *k);
        let nodes = self.nodes.range(first..=end).map(|(_, node)| node);
        let items = nodes.flat_map(|node| &node.items);
        let wanted = |item: &&Item| !item.deleted && item.id >= start && item.id <= end;
        let limit = if count == 0 { usize::MAX } else { count };
        fn pick(item: &Item) -> (StreamId, &Pairs) {
            (item.id, item.pairs.as_slice())
        }
        if rev {
            let items: Vec<&Item> = items.filter(wanted).collect();
            items.into_iter().rev().take(limit).map(pick).collect()
        } else {
            items.filter(wanted).take(limit).map(pick).collect()
        }
    }

    /// The stream in RDB encoding after its type byte (`RDB_TYPE_STREAM_LISTPACKS_2`, as
    /// 7.0 writes it): the nodes, each as its key and its listpack, then the length, the
    /// last, first and largest deleted IDs, the count of entries ever added, and no groups.
    pub(crate) fn encode(&self, out: &mut Vec<u8>, write_length: fn(&mut Vec<u8>, u64)) {
        write_length(out, self.nodes.len() as u64);
        for (master, node) in &self.nodes {
            let key = master.key();
            write_length(out, key.len() as u64);
            out.extend_from_slice(&key);
            let lp = node.listpack(*master);
            write_length(out, lp.len() as u64);
            out.extend_from_slice(&lp);
        }
        for n in [
            self.length,
            self.last_id.ms,
            self.last_id.seq,
            self.first_id.ms,
            self.first_id.seq,
            self.max_deleted.ms,
            self.max_deleted.seq,
            self.entries_added,
            0,
        ] {
            write_length(out, n);
        }
    }

    /// A stream from its nodes (each its radix tree key and listpack elements) and the
    /// numbers after them. `metadata` is `(length, last, first, max deleted, added)`;
    /// first, max deleted and added are `None` in an RDB before version 10, and are then
    /// worked out as the server works them out.
    pub(crate) fn decode(
        nodes: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
        length: u64,
        last_id: StreamId,
        newer: Option<(StreamId, StreamId, u64)>,
    ) -> Option<Self> {
        let mut stream = Self {
            length,
            last_id,
            ..Self::default()
        };
        let mut live = 0;
        for (key, elements) in nodes {
            let master = StreamId::from_key(&key)?;
            let node = Node::from_elements(master, &elements)?;
            // The server refuses an empty listpack; a node whose entries are all
            // deleted would have been removed, so one is corrupt.
            if node.live == 0 {
                return None;
            }
            if stream
                .nodes
                .keys()
                .next_back()
                .is_some_and(|prev| *prev >= master)
            {
                return None;
            }
            live += node.live as u64;
            stream.nodes.insert(master, node);
        }
        if live != length || stream.last_valid_id() > last_id {
            return None;
        }
        match newer {
            Some((first, max_deleted, added)) => {
                stream.first_id = first;
                stream.max_deleted = max_deleted;
                stream.entries_added = added;
            }
            None => {
                stream.first_id = stream.first_valid_id();
                stream.entries_added = length;
            }
        }
        Some(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: NodeLimits = NodeLimits {
        bytes: 4096,
        entries: 100,
    };

    fn pairs(items: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        items
            .iter()
            .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn ids_parse_as_the_server_reads_them() {
        let id = |ms, seq| Some(IdArg::Id(StreamId::new(ms, seq)));
        assert_eq!(parse_id(b"5-1", 0, false, false), id(5, 1));
        assert_eq!(parse_id(b"5", 7, false, false), id(5, 7));
        assert_eq!(parse_id(b"0005-01", 0, false, false), id(5, 1));
        assert_eq!(parse_id(b"-", 0, true, false), id(0, 0));
        assert_eq!(parse_id(b"+", 0, true, false), id(u64::MAX, u64::MAX));
        assert_eq!(parse_id(b"-", 0, false, false), None);
        assert_eq!(parse_id(b"5-*", 0, false, true), Some(IdArg::AutoSeq(5)));
        assert_eq!(parse_id(b"5-*", 0, false, false), None);
        assert_eq!(parse_id(b"-5", 0, false, false), None);
        assert_eq!(parse_id(b"5-x", 0, false, false), None);
        assert_eq!(parse_id(b"18446744073709551616", 0, false, false), None);
        assert_eq!(parse_id(&[b'1'; 128], 0, false, false), None);
    }

    #[test]
    fn nodes_split_and_trim_as_the_servers() {
        let mut stream = Stream::default();
        for n in 1..=250 {
            let id = Some(IdArg::Id(StreamId::new(n, 0)));
            stream
                .add(id, pairs(&[("f", "v")]), 0, LIMITS)
                .expect("added");
        }
        assert_eq!(stream.nodes.len(), 3, "100 entries a node");
        // `~` removes whole nodes only: 250 - 100 leaves 150 >= 120, 150 - 100 does not.
        assert_eq!(stream.trim(Trim::MaxLen(120), true, 0), 100);
        assert_eq!(stream.len(), 150);
        assert_eq!(stream.trim(Trim::MaxLen(120), false, 0), 30);
        assert_eq!(
            stream.range(StreamId::default(), StreamId::MAX, 1, false)[0]
                .0
                .ms,
            131
        );
        assert_eq!(
            stream.trim(Trim::MinId(StreamId::new(240, 0)), false, 0),
            109
        );
        assert_eq!(stream.len(), 11);
        assert_eq!(stream.first_id, StreamId::new(240, 0));
    }

    /// The size XADD measures is the size DUMP writes, across every width of element.
    #[test]
    fn a_nodes_measured_size_is_its_listpacks() {
        let mut stream = Stream::default();
        let limits = NodeLimits {
            bytes: 0,
            entries: 0,
        };
        let values = [
            "1", "-1", "127", "128", "-4096", "4095", "40000", "-8388608", "1e3",
        ];
        let long = [
            "x".repeat(63),
            "y".repeat(64),
            "z".repeat(4096),
            "7".repeat(20),
        ];
        for (n, value) in values.iter().map(|v| v.to_string()).chain(long).enumerate() {
            let same = [("f".to_string(), value.clone())];
            let other = [("g".to_string(), value.clone()), ("h".to_string(), value)];
            let fields: &[(String, String)] = if n % 3 == 0 { &other } else { &same };
            let pairs = fields
                .iter()
                .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect();
            let ms = (n as u64 + 1) * 1_000_000_007;
            let id = Some(IdArg::Id(StreamId::new(ms, u64::from(n % 2 == 0) << 40)));
            stream.add(id, pairs, 0, limits).expect("added");
        }
        stream.delete(&[StreamId::new(2_000_000_014, 0)]);
        let (master, node) = stream.nodes.iter().next().expect("one node");
        assert_eq!(stream.nodes.len(), 1);
        assert_eq!(node.listpack_len(*master), node.listpack(*master).len());
    }

    #[test]
    fn ids_are_chosen_as_the_servers() {
        let mut stream = Stream::default();
        let add = |s: &mut Stream, id, now| s.add(id, pairs(&[("a", "1")]), now, LIMITS);
        assert_eq!(add(&mut stream, None, 1000), Ok(StreamId::new(1000, 0)));
        assert_eq!(add(&mut stream, None, 999), Ok(StreamId::new(1000, 1)));
        let auto = Some(IdArg::AutoSeq(1000));
        assert_eq!(add(&mut stream, auto, 0), Ok(StreamId::new(1000, 2)));
        let low = Some(IdArg::Id(StreamId::new(1000, 2)));
        assert_eq!(add(&mut stream, low, 0), Err(AddError::NotAboveTop));
        let top = Some(IdArg::Id(StreamId::MAX));
        assert_eq!(add(&mut stream, top, 0), Ok(StreamId::MAX));
        assert_eq!(add(&mut stream, None, 0), Err(AddError::Exhausted));
        assert_eq!(
            stream.delete(&[StreamId::new(1000, 0), StreamId::new(7, 7)]),
            1
        );
        assert_eq!(stream.first_id, StreamId::new(1000, 1));
        assert_eq!(stream.max_deleted, StreamId::new(1000, 0));
        assert_eq!(stream.len(), 3);
    }
}
