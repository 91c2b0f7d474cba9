//! The stream commands without consumer groups: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM
//! and XREAD (BLOCK included), with Redis 7.0's argument rules, errors and replies. The
//! group commands (XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM) and XINFO / XSETID
//! answer that the toy node does not implement them.

use redis_cluster_proto::resp::Frame;
use redis_cluster_proto::resp::errors::{NOT_INTEGER, SYNTAX};

use crate::commands::{Client, Outcome, Reply, WRONGTYPE, bulk, error};
use crate::db::{Db, Entry, Value, integer};
use crate::node::Node;
use crate::stream::{IdArg, NodeLimits, Pairs, Stream, StreamId, Trim, parse_id};

const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// Runs `name` (lower case) if it is a stream command, with `args` after the name.
pub(crate) fn run(
    node: &mut Node,
    client: &mut Client,
    name: &str,
    args: &[&[u8]],
    now: u64,
) -> Option<Outcome> {
    let limits = NodeLimits {
        bytes: usize::try_from(node.settings.number("stream-node-max-bytes")).unwrap_or(0),
        entries: usize::try_from(node.settings.number("stream-node-max-entries")).unwrap_or(0),
    };
    let db = &mut node.db;
    let reply = match (name, args) {
        ("xadd", [key, rest @ ..]) => xadd(db, client, key, rest, limits, now),
        ("xlen", [key]) => match stream(db, key, now) {
            Ok(Some(s)) => Frame::Integer(s.len() as i64),
            Ok(None) => Frame::Integer(0),
            Err(e) => e,
        },
        ("xrange", [key, start, end, rest @ ..]) => xrange(db, key, start, end, rest, false, now),
        ("xrevrange", [key, end, start, rest @ ..]) => xrange(db, key, start, end, rest, true, now),
        ("xdel", [key, ids @ ..]) => xdel(db, key, ids, now),
        ("xtrim", [key, rest @ ..]) => xtrim(db, key, rest, limits.entries, now),
        ("xread", _) => return Some(xread(db, client, args, now)),
        _ => return None,
    };
    Some(Outcome::Reply(reply))
}

/// The stream at `key`: `None` when there is no key, the WRONGTYPE error for another type.
fn stream<'a>(db: &'a mut Db, key: &[u8], now: u64) -> Result<Option<&'a mut Stream>, Reply> {
    match db.get_mut(key, now).map(|e| &mut e.value) {
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(error(WRONGTYPE)),
        None => Ok(None),
    }
}

/// An entry as XRANGE and XREAD give it: its ID, then its fields and values in one array.
fn entry(id: StreamId, pairs: &Pairs) -> Reply {
    let fields = pairs.iter().flat_map(|(f, v)| [bulk(f), bulk(v)]).collect();
    Frame::Array(vec![bulk(id.text().as_bytes()), Frame::Array(fields)])
}

fn entries(list: Vec<(StreamId, &Pairs)>) -> Reply {
    Frame::Array(
        list.into_iter()
            .map(|(id, pairs)| entry(id, pairs))
            .collect(),
    )
}

fn eq(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

fn strict_id(arg: &[u8]) -> Result<StreamId, Reply> {
    match parse_id(arg, 0, false, false) {
        Some(IdArg::Id(id)) => Ok(id),
        _ => Err(error(INVALID_ID)),
    }
}

/// What XADD and XTRIM read before the ID: the trim and its options.
#[derive(Default)]
struct TrimArgs {
    trim: Option<Trim>,
    approx: bool,
    limit: Option<i64>,
    no_mkstream: bool,
}

/// Reads the trim options (`streamParseAddOrTrimArgsOrReply`); for XADD (`xadd`) stops at
/// the ID, whose position in `args` it returns.
fn trim_args(
    args: &[&[u8]],
    xadd: bool,
    max_entries: usize,
) -> Result<(TrimArgs, usize, i64), Reply> {
    let mut parsed = TrimArgs::default();
    let mut at = 0;
    while at < args.len() {
        let more = args.len() - 1 - at;
        let opt = args[at];
        if xadd && opt == b"*" {
            break;
        } else if (eq(opt, "maxlen") || eq(opt, "minid")) && more > 0 {
            if parsed.trim.is_some() {
                return Err(error(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not \
                     compatible",
                ));
            }
            parsed.approx = false;
            if more >= 2 && (args[at + 1] == b"~" || args[at + 1] == b"=") {
                parsed.approx = args[at + 1] == b"~";
                at += 1;
            }
            let value = args[at + 1];
            parsed.trim = Some(if eq(opt, "maxlen") {
                let max = integer(value).ok_or_else(|| error(NOT_INTEGER))?;
                if max < 0 {
                    return Err(error("ERR The MAXLEN argument must be >= 0."));
                }
                Trim::MaxLen(max as u64)
            } else {
                Trim::MinId(strict_id(value)?)
            });
            at += 2;
        } else if eq(opt, "limit") && more > 0 {
            let limit = integer(args[at + 1]).ok_or_else(|| error(NOT_INTEGER))?;
            if limit < 0 {
                return Err(error("ERR The LIMIT argument must be >= 0."));
            }
            parsed.limit = Some(limit);
            at += 2;
        } else if xadd && eq(opt, "nomkstream") {
            parsed.no_mkstream = true;
            at += 1;
        } else if xadd {
            break;
        } else {
            return Err(error(SYNTAX));
        }
    }
    if parsed.limit.is_some_and(|l| l != 0) && parsed.trim.is_none() {
        return Err(error(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && parsed.trim.is_none() {
        return Err(error(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    let limit = match parsed.limit {
        Some(_) if !parsed.approx => {
            return Err(error(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
        Some(limit) => limit,
        // Without LIMIT, `~` trims at most 100 nodes' worth of entries.
        None if parsed.approx => {
            let limit = 100 * max_entries as i64;
            if limit <= 0 || limit > 1_000_000 {
                10_000
            } else {
                limit
            }
        }
        None => 0,
    };
    Ok((parsed, at, limit))
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value ...`
fn xadd(
    db: &mut Db,
    client: &Client,
    key: &[u8],
    args: &[&[u8]],
    limits: NodeLimits,
    now: u64,
) -> Reply {
    let (parsed, at, limit) = match trim_args(args, true, limits.entries) {
        Ok(parsed) => parsed,
        Err(e) => return e,
    };
    let id = match args.get(at) {
        Some(&b"*") | None => None,
        Some(arg) => match parse_id(arg, 0, false, true) {
            Some(id) => Some(id),
            None => return error(INVALID_ID),
        },
    };
    let pairs = &args[(at + 1).min(args.len())..];
    if pairs.len() < 2 || pairs.len() % 2 == 1 {
        return error("ERR wrong number of arguments for 'xadd' command");
    }
    if id == Some(IdArg::Id(StreamId::default())) {
        return error("ERR The ID specified in XADD must be greater than 0-0");
    }
    match stream(db, key, now) {
        Err(e) => return e,
        Ok(Some(_)) => {}
        Ok(None) if parsed.no_mkstream => return client.null(),
        Ok(None) => {
            let value = Value::Stream(Stream::default());
            db.insert(
                key,
                Entry {
                    value,
                    expires: None,
                },
            );
        }
    }
    let Ok(Some(stream)) = stream(db, key, now) else {
        return error(WRONGTYPE);
    };
    let pairs = pairs
        .chunks(2)
        .map(|p| (p[0].to_vec(), p[1].to_vec()))
        .collect();
    match stream.add(id, pairs, now, limits) {
        Ok(id) => {
            if let Some(trim) = parsed.trim {
                stream.trim(trim, parsed.approx, limit as u64);
            }
            bulk(id.text().as_bytes())
        }
        Err(e) => error(e.text()),
    }
}

/// An interval bound of XRANGE: `-`, `+`, an ID (a missing sequence as `missing_seq`), or
/// `(` and an ID, excluded.
fn bound(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), Reply> {
    if arg.len() > 1 && arg[0] == b'(' {
        match parse_id(&arg[1..], missing_seq, false, false) {
            Some(IdArg::Id(id)) => Ok((id, true)),
            _ => Err(error(INVALID_ID)),
        }
    } else {
        match parse_id(arg, missing_seq, true, false) {
            Some(IdArg::Id(id)) => Ok((id, false)),
            _ => Err(error(INVALID_ID)),
        }
    }
}

/// `XRANGE key start end [COUNT n]` and `XREVRANGE key end start [COUNT n]`.
fn xrange(
    db: &mut Db,
    key: &[u8],
    start: &[u8],
    end: &[u8],
    options: &[&[u8]],
    rev: bool,
    now: u64,
) -> Reply {
    // The server reads the first argument after the key first: the end for XREVRANGE.
    let (first, second) = if rev { (end, start) } else { (start, end) };
    let parse = |arg: &[u8], is_start: bool| -> Result<StreamId, Reply> {
        let (id, excluded) = bound(arg, if is_start { 0 } else { u64::MAX })?;
        match (excluded, is_start) {
            (false, _) => Ok(id),
            (true, true) => id
                .next()
                .ok_or_else(|| error("ERR invalid start ID for the interval")),
            (true, false) => id
                .prev()
                .ok_or_else(|| error("ERR invalid end ID for the interval")),
        }
    };
    let bounds = if rev {
        parse(first, false).and_then(|e| Ok((parse(second, true)?, e)))
    } else {
        parse(first, true).and_then(|s| Ok((s, parse(second, false)?)))
    };
    let (start, end) = match bounds {
        Ok(bounds) => bounds,
        Err(e) => return e,
    };
    let mut count: i64 = -1;
    let mut rest = options;
    while let [option, tail @ ..] = rest {
        match tail {
            [n, tail @ ..] if eq(option, "count") => {
                let Some(n) = integer(n) else {
                    return error(NOT_INTEGER);
                };
                count = n.max(0);
                rest = tail;
            }
            _ => return error(SYNTAX),
        }
    }
    match stream(db, key, now) {
        Err(e) => e,
        Ok(None) => Frame::Array(Vec::new()),
        Ok(Some(_)) if count == 0 => Frame::NullArray,
        Ok(Some(s)) => entries(s.range(start, end, count.max(0) as usize, rev)),
    }
}

/// `XDEL key id [id ...]`.
fn xdel(db: &mut Db, key: &[u8], ids: &[&[u8]], now: u64) -> Reply {
    let stream = match stream(db, key, now) {
        Err(e) => return e,
        Ok(None) => return Frame::Integer(0),
        Ok(Some(s)) => s,
    };
    let ids: Result<Vec<StreamId>, Reply> = ids.iter().map(|arg| strict_id(arg)).collect();
    match ids {
        Ok(ids) => Frame::Integer(stream.delete(&ids) as i64),
        Err(e) => e,
    }
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]`.
fn xtrim(db: &mut Db, key: &[u8], args: &[&[u8]], max_entries: usize, now: u64) -> Reply {
    let stream = match stream(db, key, now) {
        Err(e) => return e,
        Ok(None) => return Frame::Integer(0),
        Ok(Some(s)) => s,
    };
    match trim_args(args, false, max_entries) {
        Ok((
            TrimArgs {
                trim: Some(trim),
                approx,
                ..
            },
            _,
            limit,
        )) => Frame::Integer(stream.trim(trim, approx, limit as u64) as i64),
        Ok(_) => error(SYNTAX),
        Err(e) => e,
    }
}

/// `XREAD [COUNT n] [BLOCK ms] STREAMS key ... id ...`: the entries after each ID, or,
/// with BLOCK and none yet, block until some come (`$` read once, when the command first
/// runs: a re-run after a change keeps the IDs in `client`).
fn xread(db: &mut Db, client: &mut Client, args: &[&[u8]], now: u64) -> Outcome {
    let reply = |r| Outcome::Reply(r);
    let mut count: i64 = 0;
    let mut timeout: Option<u64> = None;
    let mut streams_at = None;
    let mut at = 0;
    while at < args.len() {
        let more = args.len() - 1 - at;
        let opt = args[at];
        if eq(opt, "block") && more > 0 {
            let Some(ms) = integer(args[at + 1]) else {
                return reply(error("ERR timeout is not an integer or out of range"));
            };
            if ms < 0 {
                return reply(error("ERR timeout is negative"));
            }
            timeout = Some(ms as u64);
            at += 2;
        } else if eq(opt, "count") && more > 0 {
            let Some(n) = integer(args[at + 1]) else {
                return reply(error(NOT_INTEGER));
            };
            count = n.max(0);
            at += 2;
        } else if eq(opt, "streams") && more > 0 {
            streams_at = Some(at + 1);
            break;
        } else {
            return reply(error(SYNTAX));
        }
    }
    let Some(streams_at) = streams_at else {
        return reply(error(SYNTAX));
    };
    let rest = &args[streams_at..];
    if rest.len() % 2 != 0 {
        return reply(error(
            "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be \
             specified.",
        ));
    }
    let (keys, id_args) = rest.split_at(rest.len() / 2);
    let mut ids = Vec::with_capacity(keys.len());
    for (key, arg) in keys.iter().zip(id_args) {
        let stream = match stream(db, key, now) {
            Ok(s) => s,
            Err(e) => return reply(e),
        };
        let id = match *arg {
            b"$" => stream.map_or_else(StreamId::default, |s| s.last_id),
            b">" => {
                return reply(error(
                    "ERR The > ID can be specified only when calling XREADGROUP using the \
                     GROUP <group> <consumer> option.",
                ));
            }
            arg => match strict_id(arg) {
                Ok(id) => id,
                Err(e) => return reply(e),
            },
        };
        ids.push(id);
    }
    // A re-run of a blocked XREAD: `$` meant the last IDs when it first ran.
    if let Some(first) = client.stream_from.as_ref().filter(|f| f.len() == ids.len()) {
        ids.clone_from(first);
    }
    let mut served = Vec::new();
    for (key, &after) in keys.iter().zip(&ids) {
        let Ok(Some(stream)) = stream(db, key, now) else {
            continue;
        };
        if stream.len() == 0 || stream.last_valid_id() <= after {
            continue;
        }
        let Some(start) = after.next() else {
            continue;
        };
        let found = entries(stream.range(start, StreamId::MAX, count as usize, false));
        served.push((bulk(key), found));
    }
    if !served.is_empty() {
        client.stream_from = None;
        return reply(if client.resp3 {
            Frame::Map(served)
        } else {
            Frame::Array(
                served
                    .into_iter()
                    .map(|(k, v)| Frame::Array(vec![k, v]))
                    .collect(),
            )
        });
    }
    match timeout {
        Some(_) if client.in_multi() => reply(client.null_array()),
        Some(ms) => {
            client.stream_from.get_or_insert(ids);
            client.blocked_pop = true;
            let deadline = (ms > 0).then(|| now.saturating_add(ms));
            Outcome::Block { deadline }
        }
        None => reply(client.null_array()),
    }
}
