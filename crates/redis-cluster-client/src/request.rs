//! A client's request in flight: the calls it was routed into, and how their replies become
//! the one reply a standalone server would have sent.

use std::time::Instant;

use std::io::Write as _;

use bytes::{Bytes, BytesMut};
use redis_cluster_route::{Merge, ResponsePolicy, Split};
use redis_hash_slot::Slot;
use redis_resp::{Decoder, Frame, Kind, Status};

use crate::{ClientId, ConnId, RequestId, error_frame};

/// A call of a request: the request and the call's index in it.
pub(crate) type CallKey = (RequestId, usize);

/// Where a call goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// The node serving the slot (a replica for a read when configured).
    Slot { slot: Slot, read: bool },
    /// This node, whatever the map says (a fan-out's part, a SCAN step or slot read).
    Node(String),
    /// Any master (a command without keys).
    Any,
}

/// Where a call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallState {
    /// Waiting to be sent: for a map, for an earlier command of its slot, or just routed.
    Queued,
    /// Written on this connection; its reply is owed.
    Sent(ConnId),
    /// Waiting for this moment to be sent again.
    Retry(Instant),
    /// Answered.
    Done,
}

/// One command to one node.
#[derive(Debug)]
pub(crate) struct Call {
    pub(crate) argv: Vec<Bytes>,
    pub(crate) target: Target,
    /// Times sent so far.
    pub(crate) attempts: u32,
    pub(crate) state: CallState,
    /// Later commands of its slot wait for its reply (it has several keys, so it can meet
    /// TRYAGAIN, or it blocks).
    pub(crate) barrier: bool,
    /// A blocking command: a connection of its own.
    pub(crate) dedicated: bool,
    /// Its `argv` is its request's whole command, unchanged: written as the request's
    /// [`Request::packed`] bytes when it has them.
    pub(crate) packed: bool,
    pub(crate) reply: Option<Reply>,
    /// What few calls need (a redirect, a retry, a transaction), made on first use.
    pub(crate) rare: Option<Box<Rare>>,
}

/// What a call needs only after an ASK or a retry, or in a transaction: behind one box, so
/// that a call is 120 bytes (two cache lines) and not 256, written when it is routed and
/// read again when its reply comes.
#[derive(Debug, Default)]
pub(crate) struct Rare {
    /// The node of an ASK: the next send goes there, after ASKING.
    pub(crate) asking: Option<String>,
    /// The last error a retry answered, given to the client when attempts run out.
    pub(crate) last_error: Option<Frame>,
    /// A transaction: these commands between MULTI and EXEC (`argv` is the EXEC).
    pub(crate) batch: Option<Vec<Vec<Bytes>>>,
    /// The first error a transaction's command met when queued (a MOVED makes the EXEC
    /// fail: the transaction is sent again where the slot is).
    pub(crate) queued_error: Option<Frame>,
    /// The client's WATCH connection: the call goes there and nowhere else.
    pub(crate) pinned: Option<ConnId>,
}

impl Call {
    pub(crate) fn new(argv: Vec<Bytes>, target: Target) -> Self {
        Self {
            argv,
            target,
            attempts: 0,
            state: CallState::Queued,
            barrier: false,
            dedicated: false,
            packed: false,
            reply: None,
            rare: None,
        }
    }

    /// Its rare fields, made when first written.
    pub(crate) fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// The node of an ASK, for its next send.
    pub(crate) fn asking(&self) -> Option<&String> {
        self.rare.as_ref()?.asking.as_ref()
    }

    /// A transaction's commands between MULTI and EXEC.
    pub(crate) fn batch(&self) -> Option<&Vec<Vec<Bytes>>> {
        self.rare.as_ref()?.batch.as_ref()
    }

    /// The client's WATCH connection, for a call that must go there.
    pub(crate) fn pinned(&self) -> Option<ConnId> {
        self.rare.as_ref()?.pinned
    }

    pub(crate) fn slot(&self) -> Option<Slot> {
        match self.target {
            Target::Slot { slot, .. } => Some(slot),
            _ => None,
        }
    }
}

/// A request's one reply: a frame, or the bytes a node sent ([`Config::raw_replies`]).
///
/// [`Config::raw_replies`]: crate::Config::raw_replies
#[derive(Debug, PartialEq)]
pub(crate) enum Reply {
    Frame(Frame),
    Raw(Bytes),
}

impl Reply {
    /// The reply as a frame: bytes are decoded (they are one whole value, which the
    /// connection's decoder read already).
    pub(crate) fn into_frame(self) -> Frame {
        match self {
            Self::Frame(frame) => frame,
            Self::Raw(bytes) => {
                let mut buf = BytesMut::from(bytes);
                match Decoder::new().decode(&mut buf) {
                    Ok(Some(frame)) if buf.is_empty() => frame,
                    _ => error_frame("ERR a node's reply could not be read again"),
                }
            }
        }
    }
}

/// How a call's reply may be handed on as the node's bytes ([`Config::raw_replies`]).
///
/// [`Config::raw_replies`]: crate::Config::raw_replies
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Decoded into a frame.
    No,
    /// As it is: it is the request's reply.
    Whole,
    /// Kept as bytes until the other parts of its split read (MGET) have theirs: their
    /// elements are put in the keys' order under one array header.
    Part,
}

/// How a request's replies become its one reply.
#[derive(Debug)]
pub(crate) enum Combine {
    /// One call: its reply.
    One,
    /// A split multi-key command: [`Split::merge`] over the parts in order.
    /// Boxed: a request is moved in and out of the engine's map, and most are not split.
    Split(Box<Split>),
    /// A fan-out: [`Merge::merge`] over the nodes' replies.
    Fan(Merge),
    /// SCAN over the masters (sorted by address) one after the other; the cursor the
    /// client sees is the node's cursor times [`SCAN_NODES`] plus the node's index.
    Scan { masters: Vec<String>, node: usize },
    /// SCAN over a cluster, slot by slot (`scan.rs`): its reply is made there.
    SlotScan(Box<crate::scan::SlotScan>),
}

/// How many masters a composite SCAN cursor can name.
pub(crate) const SCAN_NODES: u64 = 1024;

/// A client's request.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) client: ClientId,
    /// The command as the client sent it, until it is routed (it waits for a slot map).
    pub(crate) unrouted: Option<Vec<Bytes>>,
    /// The command's bytes as the client sent them ([`Engine::handle_packed_request`]):
    /// written for a call whose `argv` is the whole command ([`Call::packed`]) instead of
    /// encoding `argv` again.
    ///
    /// [`Engine::handle_packed_request`]: crate::Engine::handle_packed_request
    pub(crate) packed: Option<Bytes>,
    pub(crate) calls: Vec<Call>,
    pub(crate) combine: Combine,
    /// Its reply, while an earlier request of its client is owed one.
    pub(crate) reply: Option<Reply>,
    /// Answered by pushes, not by a reply (SUBSCRIBE).
    pub(crate) silent: bool,
    /// How many calls from the first had replies when [`Request::combined`] last looked: a
    /// hint, each call is stepped over once instead of all of them at every reply (an MGET
    /// split over the 16384 slots spent a fifth of its time there).
    pub(crate) answered: usize,
}

impl Request {
    /// Whether a reply to call `at` may be handed on as bytes ([`Config::raw_replies`]):
    /// [`Pass::Whole`] when it is this request's reply as it is (its only call, sent whole
    /// or as the one part of a split whose merge of one reply is that reply),
    /// [`Pass::Part`] when it is one part of a split read merged key by key (MGET over
    /// several nodes). Either way on a shared connection, outside any transaction, redirect
    /// or retry. With `reply` (the reply's bytes, no error), its shape is checked too: a
    /// split read's array must hold one value per key of its part, or the merge refuses it.
    ///
    /// [`Config::raw_replies`]: crate::Config::raw_replies
    pub(crate) fn passes_on(&self, at: usize, reply: Option<&[u8]>) -> Pass {
        let Some(call) = self.calls.get(at) else {
            return Pass::No;
        };
        if self.unrouted.is_some() || self.silent || call.dedicated || call.rare.is_some() {
            return Pass::No;
        }
        let split = match &self.combine {
            Combine::One if self.calls.len() == 1 => return Pass::Whole,
            Combine::Split(split) => split,
            _ => return Pass::No,
        };
        let (Some(part), whole) = (split.parts().get(at), split.parts().len() == 1) else {
            return Pass::No;
        };
        let by_key = if whole { Pass::Whole } else { Pass::Part };
        match (split.merge_policy(), reply) {
            (Merge::ByKey, None) => by_key,
            (Merge::ByKey, Some(reply)) if array_len(reply) == Some(part.groups.len()) => by_key,
            (Merge::ByKey, Some(_)) => Pass::No,
            (Merge::Policy(_), _) if !whole => Pass::No,
            (Merge::Policy(policy), reply) => match policy {
                ResponsePolicy::AllSucceeded | ResponsePolicy::OneSucceeded => Pass::Whole,
                // Folded as integers: one integer is itself.
                ResponsePolicy::AggSum
                | ResponsePolicy::AggMin
                | ResponsePolicy::AggMax
                | ResponsePolicy::AggLogicalAnd
                | ResponsePolicy::AggLogicalOr
                    if reply.is_none_or(|r| r.first() == Some(&b':')) =>
                {
                    Pass::Whole
                }
                _ => Pass::No,
            },
            (Merge::Aggregate, _) => Pass::No,
        }
    }

    /// The one reply, once every call has one: a split read whose parts all came as bytes
    /// is merged as bytes.
    pub(crate) fn combined(&mut self) -> Option<Reply> {
        if self.unrouted.is_some() {
            return None;
        }
        while self
            .calls
            .get(self.answered)
            .is_some_and(|c| c.reply.is_some())
        {
            self.answered += 1;
        }
        if self.answered < self.calls.len() {
            return None;
        }
        // Once per request, which makes a stale hint harmless (calls replaced, a reply
        // taken back): it is only where the next look starts.
        if self.calls.iter().any(|c| c.reply.is_none()) {
            self.answered = 0;
            return None;
        }
        let mut replies: Vec<Reply> = self
            .calls
            .iter_mut()
            .filter_map(|c| c.reply.take())
            .collect();
        let merged = match &self.combine {
            Combine::One | Combine::Scan { .. } | Combine::SlotScan(_) => {
                return Some(replies.pop().unwrap_or_else(no_reply));
            }
            Combine::Split(split) => {
                if let Some(bytes) = merge_raw(split, &replies) {
                    return Some(Reply::Raw(bytes));
                }
                split.merge(frames(replies))
            }
            Combine::Fan(merge) => merge.merge(frames(replies)),
        };
        Some(Reply::Frame(merged.unwrap_or_else(cannot_merge)))
    }
}

fn no_reply() -> Reply {
    Reply::Frame(error_frame("ERR no reply"))
}

fn frames(replies: Vec<Reply>) -> Vec<Frame> {
    replies.into_iter().map(Reply::into_frame).collect()
}

/// A split read's merge ([`Merge::ByKey`]) made from its parts' bytes: one array header,
/// then each key's value as its node sent it, in the keys' order. `None` unless every part
/// came as bytes (an error, or a part that met a redirect, makes the merge the frames').
fn merge_raw(split: &Split, replies: &[Reply]) -> Option<Bytes> {
    if split.merge_policy() != Merge::ByKey || replies.len() != split.parts().len() {
        return None;
    }
    let groups: usize = split.parts().iter().map(|p| p.groups.len()).sum();
    // Each key group's value, found part by part.
    let mut values: Vec<&[u8]> = vec![&[]; groups];
    let mut decoder = Decoder::new();
    for (part, reply) in split.parts().iter().zip(replies) {
        let Reply::Raw(reply) = reply else {
            return None;
        };
        // After the header line, one value per key of the part (checked when it came).
        let header = reply.iter().position(|&b| b == b'\n')? + 1;
        let mut rest = reply.get(header..)?;
        for &group in &part.groups {
            let Ok(Status::Complete(span)) = decoder.decode_span(rest) else {
                return None;
            };
            if matches!(span.kind, Kind::ATTRIBUTE | Kind::PUSH) {
                return None;
            }
            *values.get_mut(group)? = rest.get(..span.len)?;
            rest = rest.get(span.len..)?;
        }
        if !rest.is_empty() {
            return None;
        }
    }
    let len: usize = values.iter().map(|v| v.len()).sum();
    let mut out = Vec::with_capacity(len + 24);
    // Writing to a vector cannot fail.
    let _ = write!(out, "*{groups}\r\n");
    for value in values {
        out.extend_from_slice(value);
    }
    Some(Bytes::from(out))
}

/// The element count of the array reply `reply` (`*3\r\n…`): `None` for anything else.
fn array_len(reply: &[u8]) -> Option<usize> {
    let rest = reply.strip_prefix(b"*")?;
    let end = rest.iter().position(|&b| b == b'\r')?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

fn cannot_merge(e: redis_cluster_route::MergeError) -> Frame {
    error_frame(&format!("ERR cannot merge the nodes' replies: {e}"))
}

/// A SCAN cursor the client sent, as (node index, the node's cursor); `None` when it is not
/// one this engine gave.
pub(crate) fn scan_cursor(arg: &[u8]) -> Option<(usize, u64)> {
    let cursor: u64 = std::str::from_utf8(arg).ok()?.parse().ok()?;
    Some(((cursor % SCAN_NODES) as usize, cursor / SCAN_NODES))
}

/// What one node's SCAN reply means for the composite scan: the reply to give the client,
/// or the next node to ask (its index) when this one is done and gave nothing.
pub(crate) fn scan_step(reply: Frame, node: usize, masters: usize) -> Result<Frame, usize> {
    let Frame::Array(mut parts) = reply else {
        return Ok(reply);
    };
    let (Some(keys), Some(next), true) = (parts.pop(), parts.pop(), parts.is_empty()) else {
        return Ok(error_frame("ERR unexpected SCAN reply"));
    };
    let next: Option<u64> = next
        .as_bytes()
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|s| s.parse().ok());
    let Some(next) = next else {
        return Ok(error_frame("ERR unexpected SCAN reply"));
    };
    let (inner, at) = if next != 0 {
        (next, node)
    } else {
        (0, node + 1)
    };
    let empty = matches!(&keys, Frame::Array(k) if k.is_empty());
    if next == 0 && at < masters && empty {
        return Err(at);
    }
    let cursor = if next == 0 && at >= masters {
        0
    } else {
        match inner.checked_mul(SCAN_NODES) {
            Some(base) => base + at as u64,
            None => return Ok(error_frame("ERR the node's SCAN cursor is too large")),
        }
    };
    Ok(Frame::Array(vec![
        Frame::BulkString(Bytes::from(cursor.to_string())),
        keys,
    ]))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use redis_cluster_route::{CommandTable, Merge, Route};
    use redis_resp::Frame;

    use super::{Call, Combine, Pass, Reply, Request, Target};
    use crate::ClientId;

    /// `line` routed as a static pool routes it (every key on server 0), as the engine
    /// makes it: a split of one part, or one call.
    fn routed(line: &str) -> Request {
        let argv: Vec<Bytes> = line.split(' ').map(|a| Bytes::from(a.to_owned())).collect();
        let routed = CommandTable::REDIS_7_0
            .routed_by(&argv, |_| 0)
            .expect("a command");
        let combine = match routed.route {
            Route::Split(split) => Combine::Split(Box::new(split)),
            _ => Combine::One,
        };
        let mut request = with_calls(1);
        request.calls[0].argv = argv;
        request.combine = combine;
        request
    }

    /// A reply passes on as bytes only when it is the merged reply as it is, or a part of
    /// a split read merged key by key.
    #[test]
    fn only_a_reply_that_is_the_merge_of_itself_passes_on() {
        let mget = routed("MGET a b c");
        assert!(matches!(&mget.combine, Combine::Split(s) if s.parts().len() == 1));
        assert_eq!(mget.passes_on(0, None), Pass::Whole);
        assert_eq!(
            mget.passes_on(0, Some(b"*3\r\n$1\r\n1\r\n$-1\r\n:5\r\n")),
            Pass::Whole
        );
        // The merge refuses these (one value per key), so they must reach it.
        assert_eq!(
            mget.passes_on(0, Some(b"*2\r\n$1\r\n1\r\n$-1\r\n")),
            Pass::No
        );
        assert_eq!(mget.passes_on(0, Some(b"*-1\r\n")), Pass::No);
        assert_eq!(mget.passes_on(0, Some(b"$1\r\n1\r\n")), Pass::No);
        assert_eq!(mget.passes_on(1, None), Pass::No);
        // DEL sums one integer: itself; anything else is the merge's to refuse.
        let del = routed("DEL a b");
        assert_eq!(del.passes_on(0, Some(b":2\r\n")), Pass::Whole);
        assert_eq!(del.passes_on(0, Some(b"+OK\r\n")), Pass::No);
        let get = routed("GET a");
        assert!(matches!(get.combine, Combine::One));
        assert_eq!(get.passes_on(0, Some(b"$-1\r\n")), Pass::Whole);
        // A call that met an ASK or a retry, or a blocking one, does not.
        let mut asked = routed("GET a");
        asked.calls[0].rare_mut().asking = Some("127.0.0.1:7001".into());
        assert_eq!(asked.passes_on(0, None), Pass::No);
        let mut blocking = routed("GET a");
        blocking.calls[0].dedicated = true;
        assert_eq!(blocking.passes_on(0, None), Pass::No);
        // Fan-outs and requests of several calls are merged.
        let mut fan = with_calls(1);
        fan.combine = Combine::Fan(Merge::Aggregate);
        assert_eq!(fan.passes_on(0, None), Pass::No);
        assert_eq!(with_calls(2).passes_on(0, None), Pass::No);
        // Over two servers: an MGET's parts are kept as bytes (each checked for one value
        // per key of its part), a DEL's merged as frames.
        let mget = split("MGET a b c", |key| usize::from(key == b"b"));
        assert_eq!(mget.passes_on(0, None), Pass::Part);
        assert_eq!(
            mget.passes_on(0, Some(b"*2\r\n$1\r\n1\r\n$-1\r\n")),
            Pass::Part
        );
        assert_eq!(mget.passes_on(1, Some(b"*1\r\n$1\r\n2\r\n")), Pass::Part);
        assert_eq!(mget.passes_on(1, Some(b"*2\r\n:1\r\n:2\r\n")), Pass::No);
        let del = split("DEL a b", |key| usize::from(key == b"b"));
        assert_eq!(del.passes_on(0, Some(b":1\r\n")), Pass::No);
    }

    /// `line` split over servers as `server` places its keys, each part a call.
    fn split(line: &str, server: impl Fn(&[u8]) -> usize) -> Request {
        let argv: Vec<Bytes> = line.split(' ').map(|a| Bytes::from(a.to_owned())).collect();
        let Some(split) = CommandTable::REDIS_7_0.split_by(&argv, |key| server(key)) else {
            panic!("a split: {line}");
        };
        let mut request = with_calls(split.parts().len());
        for (i, call) in request.calls.iter_mut().enumerate() {
            call.argv = split.argv(i, &argv).cloned().collect();
        }
        request.combine = Combine::Split(Box::new(split));
        request
    }

    /// A split read whose parts all came as bytes is merged as bytes: each key's value as
    /// its node sent it, in the keys' order; a part that came as a frame (an error, a
    /// redirect) makes the merge the frames'.
    #[test]
    fn a_split_read_is_merged_from_its_parts_bytes() {
        // a, c, e on server 0; b, d on server 1.
        let server = |key: &[u8]| usize::from(key == b"b" || key == b"d");
        let mut mget = split("MGET a b c d e", server);
        let first = &b"*3\r\n$1\r\nA\r\n$-1\r\n*2\r\n:1\r\n+x\r\n"[..];
        let second = &b"*2\r\n$2\r\nBB\r\n%1\r\n+k\r\n:7\r\n"[..];
        mget.calls[1].reply = Some(Reply::Raw(Bytes::from_static(second)));
        assert_eq!(mget.combined(), None);
        mget.calls[0].reply = Some(Reply::Raw(Bytes::from_static(first)));
        let Some(Reply::Raw(merged)) = mget.combined() else {
            panic!("merged as bytes");
        };
        assert_eq!(
            &merged[..],
            &b"*5\r\n$1\r\nA\r\n$2\r\nBB\r\n$-1\r\n%1\r\n+k\r\n:7\r\n*2\r\n:1\r\n+x\r\n"[..]
        );
        // One part an error: the error, as the frames' merge gives it.
        let mut mget = split("MGET a b c d e", server);
        mget.calls[0].reply = Some(Reply::Raw(Bytes::from_static(first)));
        let error = crate::error_frame("MOVED 1 127.0.0.1:7000");
        mget.calls[1].reply = Some(Reply::Frame(error.clone()));
        assert_eq!(mget.combined(), Some(Reply::Frame(error)));
        // One part a frame, the other bytes: merged as frames, the same values.
        let mut mget = split("MGET a b c d e", server);
        mget.calls[0].reply = Some(Reply::Raw(Bytes::from_static(first)));
        let frame = Reply::Raw(Bytes::from_static(second)).into_frame();
        mget.calls[1].reply = Some(Reply::Frame(frame));
        let Some(Reply::Frame(frame)) = mget.combined() else {
            panic!("merged as frames");
        };
        let mut encoded = Vec::new();
        redis_resp::encode(&frame, &mut encoded);
        assert_eq!(encoded, merged);
        // A part whose bytes hold another count of values than its keys: the merge's refusal.
        let mut mget = split("MGET a b c d e", server);
        mget.calls[0].reply = Some(Reply::Raw(Bytes::from_static(b"*1\r\n:1\r\n")));
        mget.calls[1].reply = Some(Reply::Raw(Bytes::from_static(second)));
        assert!(matches!(
            mget.combined(),
            Some(Reply::Frame(Frame::SimpleError(_)))
        ));
    }

    fn with_calls(calls: usize) -> Request {
        Request {
            client: ClientId(1),
            unrouted: None,
            packed: None,
            calls: (0..calls)
                .map(|_| Call::new(Vec::new(), Target::Any))
                .collect(),
            combine: Combine::Fan(Merge::Aggregate),
            reply: None,
            silent: false,
            answered: 0,
        }
    }

    fn bulk(n: usize) -> Option<Reply> {
        Some(Reply::Frame(Frame::Array(vec![Frame::BulkString(
            n.to_string().into(),
        )])))
    }

    /// Replies in any order: no reply until every call has one, then the merge in call
    /// order; a hint left stale (calls replaced, a reply taken back) changes nothing.
    #[test]
    fn a_request_is_combined_once_every_call_has_its_reply() {
        let merged = Some(Reply::Frame(Frame::Array(
            (0..4)
                .map(|n| Frame::BulkString(n.to_string().into()))
                .collect(),
        )));
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2], [2, 0, 3, 1]] {
            let mut request = with_calls(4);
            for (i, &call) in order.iter().enumerate() {
                request.calls[call].reply = bulk(call);
                let got = request.combined();
                if i < 3 {
                    assert_eq!(got, None, "{order:?} after {i}");
                } else {
                    assert_eq!(got, merged, "{order:?}");
                }
            }
        }
        let mut request = with_calls(4);
        for call in 0..3 {
            request.calls[call].reply = bulk(call);
            assert_eq!(request.combined(), None);
        }
        assert_eq!(request.answered, 3);
        // A reply taken back behind the hint: still not complete.
        request.calls[1].reply = None;
        request.calls[3].reply = bulk(3);
        assert_eq!(request.combined(), None);
        request.calls[1].reply = bulk(1);
        assert_eq!(request.combined(), merged);
        // Fewer calls than the hint counts.
        let mut request = with_calls(2);
        request.answered = 5;
        assert_eq!(request.combined(), None);
        request.calls[0].reply = bulk(0);
        request.calls[1].reply = bulk(1);
        assert!(request.combined().is_some());
    }
}
