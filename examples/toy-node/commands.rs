//! The toy node's client commands: the checks a Redis 7.0 node makes before it runs a
//! command, in its order (unknown command and arity, authentication, the cluster's redirect,
//! a replica's refusal to write, MULTI's queue), then the command on the keyspace.
//!
//! The checks come from the crates: `CommandTable::check` for the names and arities and
//! their error texts, `CommandTable::routing_keys` for the keys, `ClusterNode::route` for
//! MOVED / ASK / TRYAGAIN / CROSSSLOT / CLUSTERDOWN. This file only holds the keyspace
//! commands' own behaviour and texts, checked against redis-server 7.0.15 by
//! `tests/toy_node.rs`.

use std::collections::VecDeque;

use redis_cluster_proto::bus::MessageType;
use redis_cluster_proto::hash_slot::Slot;
use redis_cluster_proto::resp::errors::{NOT_INTEGER, SYNTAX};
use redis_cluster_proto::resp::{Frame, errors};
use redis_cluster_proto::route::{
    AclCategories, CommandFlags, CommandSpec, CommandTable, Keys, glob_match as glob,
};
use redis_cluster_proto::state::{Instant, Protocol, Request};

use crate::db::{Db, Entry, Fields, Value, integer};
use crate::dump::{dump, restore as undump};
use crate::float::{FloatError, increment};
use crate::log::Level;
use crate::node::Node;
use crate::pubsub::Kind;
use crate::replication::propagate;

/// A reply, in the state machine's frame type.
pub(crate) type Reply = Frame<Vec<u8>>;

pub(crate) const WRONGTYPE: &str =
    "WRONGTYPE Operation against a key holding the wrong kind of value";

/// What one client connection carries from command to command.
#[derive(Debug)]
pub(crate) struct Client {
    pub(crate) id: u64,
    /// ASKING was sent: the next command (or the next EXEC) may use an importing slot.
    asking: bool,
    /// READONLY: a replica serves this client's reads of its master's slots.
    readonly: bool,
    /// HELLO 3 was sent.
    pub(crate) resp3: bool,
    name: Option<Vec<u8>>,
    /// AUTH succeeded, or no password is set.
    authenticated: bool,
    /// Inside MULTI: the queued commands.
    multi: Option<Vec<Vec<Vec<u8>>>>,
    /// A command was refused while queueing: EXEC aborts.
    dirty: bool,
    /// Blocked in BLPOP / BRPOP / XREAD: re-runs are routed as the server redirects blocked
    /// clients.
    pub(crate) blocked_pop: bool,
    /// Blocked in XREAD: the IDs it reads after, as they were when it first ran (`$`).
    pub(crate) stream_from: Option<Vec<crate::stream::StreamId>>,
    /// A replica's `REPLCONF listening-port`: the port it serves clients on.
    pub(crate) listening_port: Option<u16>,
    /// In WAIT: the replication offset the replicas must reach.
    waiting: Option<u64>,
    /// Subscribed: the messages and notices for this client, which its connection writes.
    pub(crate) inbox: Option<crate::pubsub::Inbox>,
    /// What a blocked command answers when its deadline passes (WAIT: how many replicas
    /// had acknowledged at its last try); a null array when unset.
    timeout_reply: Option<Reply>,
}

impl Client {
    pub(crate) fn new(id: u64, password_set: bool) -> Self {
        Self {
            id,
            asking: false,
            readonly: false,
            resp3: false,
            name: None,
            authenticated: !password_set,
            multi: None,
            dirty: false,
            blocked_pop: false,
            stream_from: None,
            listening_port: None,
            waiting: None,
            timeout_reply: None,
            inbox: None,
        }
    }

    /// AUTH succeeded, or no password is set (the server's `authRequired` is false).
    pub(crate) fn authenticated(&self) -> bool {
        self.authenticated
    }

    /// A blocked command's deadline passed: its null reply, and the client is no longer
    /// blocked.
    pub(crate) fn timed_out(&mut self) -> Reply {
        self.blocked_pop = false;
        self.stream_from = None;
        self.waiting = None;
        match self.timeout_reply.take() {
            Some(reply) => reply,
            None => self.null_array(),
        }
    }

    pub(crate) fn protocol(&self) -> Protocol {
        if self.resp3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        }
    }

    pub(crate) fn null(&self) -> Reply {
        if self.resp3 {
            Frame::Null
        } else {
            Frame::NullBulkString
        }
    }

    /// Inside MULTI: a blocking command answers at once.
    pub(crate) fn in_multi(&self) -> bool {
        self.multi.is_some()
    }

    pub(crate) fn null_array(&self) -> Reply {
        if self.resp3 {
            Frame::Null
        } else {
            Frame::NullArray
        }
    }
}

/// What a command leaves the connection with.
pub(crate) enum Outcome {
    Reply(Reply),
    /// Several replies, in order (SUBSCRIBE to several channels confirms each).
    Many(Vec<Reply>),
    /// MIGRATE: the node's I/O task sends the payloads and answers.
    Migrate(Migration),
    /// PSYNC: the connection becomes a replica's feed (`replication.rs`).
    Feed,
    /// QUIT: `+OK`, then the connection closes.
    Quit,
    /// Nothing to answer yet (BLPOP on empty lists, or writes paused for a manual failover):
    /// run the same command again when the keyspace or the cluster changes, or at
    /// `deadline` (Unix ms), when it answers its timeout reply.
    Block {
        deadline: Option<u64>,
    },
}

pub(crate) fn error(text: &str) -> Reply {
    Frame::SimpleError(text.as_bytes().to_vec())
}

fn simple(text: &str) -> Reply {
    Frame::SimpleString(text.as_bytes().to_vec())
}

pub(crate) fn bulk(bytes: &[u8]) -> Reply {
    Frame::BulkString(bytes.to_vec())
}

pub(crate) fn ok() -> Reply {
    simple("OK")
}

fn eq(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// Runs one client command, `args` not empty, at `now` (Unix ms), with every check the
/// server makes first.
pub(crate) fn run(node: &mut Node, client: &mut Client, args: &[&[u8]], now: u64) -> Outcome {
    let table = &CommandTable::REDIS_7_0;
    let spec = match table.check(args) {
        Ok(spec) => spec,
        Err(rejection) => {
            client.dirty |= client.multi.is_some();
            return Outcome::Reply(Frame::SimpleError(rejection.error_line(args)));
        }
    };
    let name = spec.name;
    // QUIT needs no AUTH, is never queued and takes any arguments, as the server's.
    if name == "quit" {
        return Outcome::Quit;
    }
    if !client.authenticated && !matches!(name, "auth" | "hello") {
        return Outcome::Reply(error("NOAUTH Authentication required."));
    }
    // RESP2's subscribed mode: only these commands.
    if !client.resp3 && client.inbox.is_some() && node.pubsub.subscribed(client.id) {
        let allowed = matches!(
            name,
            "subscribe"
                | "psubscribe"
                | "ssubscribe"
                | "unsubscribe"
                | "punsubscribe"
                | "sunsubscribe"
                | "ping"
                | "quit"
                | "reset"
        );
        if !allowed {
            return Outcome::Reply(error(&format!(
                "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / \
                 QUIT / RESET are allowed in this context"
            )));
        }
        if name == "ping" {
            let text = args.get(1).copied().unwrap_or(b"");
            return Outcome::Reply(Frame::Array(vec![bulk(b"pong"), bulk(text)]));
        }
    }
    let queueing = client.multi.is_some()
        && !matches!(
            name,
            "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
        );
    let in_flight = match redirect(node, client, spec, args, now) {
        Ok(in_flight) => in_flight,
        Err(redirect) => {
            if name == "exec" {
                client.multi = None;
                client.dirty = false;
            } else {
                client.dirty |= client.multi.is_some();
            }
            return Outcome::Reply(redirect);
        }
    };
    // A key that a MIGRATE is moving waits, as every client waits while the server
    // migrates.
    if in_flight && !queueing {
        return Outcome::Block { deadline: None };
    }
    let write = spec.flags.contains(CommandFlags::WRITE);
    // A script that declares writes is refused on a replica before it runs; its commands
    // reach the replicas one by one (`scripts.rs`).
    let script_write = crate::scripts::writes(node, spec, args);
    if (write || script_write) && !node.cluster.myself().is_master() {
        client.dirty |= client.multi.is_some();
        return Outcome::Reply(error(errors::READONLY));
    }
    if queueing {
        if let Some(queue) = client.multi.as_mut() {
            queue.push(args.iter().map(|arg| arg.to_vec()).collect());
        }
        return Outcome::Reply(simple("QUEUED"));
    }
    // A pause of writes (a manual failover's, CLIENT PAUSE WRITE) holds every command that
    // may change the dataset or replicate, as the server's does: writes, and the
    // may-replicate ones (EVAL and FCALL of any script, PUBLISH), alone or in an EXEC. A
    // script with no shebang, judged only by what it runs, otherwise wrote on a master
    // whose replica had taken its last offset: the write was lost (Redis's
    // 10-manual-failover found it, its lists short of an element).
    let paused =
        may_replicate(spec) || name == "exec" && client.multi.as_ref().is_some_and(|q| writes(q));
    if paused && node.cluster.writes_paused(Instant::from_unix_millis(now)) {
        return Outcome::Block { deadline: None };
    }
    // CLIENT PAUSE: every command (ALL) or the writes (WRITE) wait; CLIENT itself runs, so
    // that CLIENT UNPAUSE can.
    if let Some((until, all)) = node.client_pause {
        if now < until && (all || paused || script_write) && name != "client" {
            return Outcome::Block { deadline: None };
        }
    }
    // What the replicas will be told about, found before the command runs (EXEC empties
    // its queue).
    let effects = match (name, &client.multi) {
        _ if !node.replication.attached() && node.aof.is_none() => None,
        ("exec", Some(queue)) => Some(written_by_all(queue)),
        ("migrate", _) => None, // its keys leave when the target has them: `migrated`
        _ if write => Some(written_by(spec, args)),
        _ => None,
    };
    let outcome = match name {
        "multi" if client.multi.is_some() => {
            Outcome::Reply(error("ERR MULTI calls can not be nested"))
        }
        "multi" => {
            client.multi = Some(Vec::new());
            client.dirty = false;
            Outcome::Reply(ok())
        }
        "exec" => Outcome::Reply(exec(node, client, now)),
        "discard" if client.multi.take().is_some() => {
            client.dirty = false;
            Outcome::Reply(ok())
        }
        "discard" => Outcome::Reply(error("ERR DISCARD without MULTI")),
        _ => execute(node, client, spec, args, now),
    };
    // ASKING lasts one command, or until EXEC when it was sent before MULTI.
    if name != "asking" && client.multi.is_none() {
        client.asking = false;
    }
    if matches!(outcome, Outcome::Reply(_)) {
        client.blocked_pop = false;
        client.stream_from = None;
    }
    if let (Some((keys, flushall)), Outcome::Reply(_)) = (effects, &outcome) {
        propagate(node, &keys, flushall, now);
    }
    outcome
}

/// The keys a write command may have changed, and whether it empties the keyspace.
pub(crate) fn written_by<A: AsRef<[u8]>>(spec: &CommandSpec, args: &[A]) -> (Vec<Vec<u8>>, bool) {
    let flushall = matches!(spec.name, "flushall" | "flushdb");
    let positions = Keys::routing(spec, args);
    let keys = positions.positions();
    (
        keys.map(|at| args[at].as_ref().to_vec()).collect(),
        flushall,
    )
}

/// [`written_by`] for every write command of a transaction.
fn written_by_all(queue: &[Vec<Vec<u8>>]) -> (Vec<Vec<u8>>, bool) {
    let (mut keys, mut flushall) = (Vec::new(), false);
    for args in queue {
        let Some(spec) = CommandTable::REDIS_7_0.lookup(args) else {
            continue;
        };
        if spec.flags.contains(CommandFlags::WRITE) {
            let (more, flush) = written_by(spec, args);
            keys.extend(more);
            flushall |= flush;
        }
    }
    (keys, flushall)
}

/// Whether any queued command writes or may replicate a write.
fn writes(queue: &[Vec<Vec<u8>>]) -> bool {
    queue.iter().any(|args| {
        CommandTable::REDIS_7_0
            .lookup(args)
            .is_some_and(may_replicate)
    })
}

/// A write, or a command the server flags `may_replicate`. COMMAND does not show that flag
/// (it is the server's own), so the table cannot say: these are the 7.0.15 commands that a
/// CLIENT PAUSE WRITE held on the real server, measured, while SCRIPT FLUSH and EVAL_RO ran.
fn may_replicate(spec: &CommandSpec) -> bool {
    spec.flags
        .intersects(CommandFlags::WRITE | CommandFlags::MAY_REPLICATE)
        || matches!(
            spec.name,
            "eval" | "evalsha" | "fcall" | "publish" | "spublish" | "pfcount"
        )
}

/// SPUBLISH, SSUBSCRIBE, SUNSUBSCRIBE: routed by their channels' slots.
fn pubsub_shard(spec: &CommandSpec) -> bool {
    matches!(spec.name, "spublish" | "ssubscribe" | "sunsubscribe")
}

/// The cluster's decision for a command with keys (EXEC: for all the queued commands
/// together), as the server's `getNodeByQuery`; when it runs here, whether one of its keys
/// is being migrated.
pub(crate) fn redirect(
    node: &Node,
    client: &Client,
    spec: &CommandSpec,
    args: &[&[u8]],
    now: u64,
) -> Result<bool, Reply> {
    let table = &CommandTable::REDIS_7_0;
    let mut write =
        spec.flags.contains(CommandFlags::WRITE) || crate::scripts::writes(node, spec, args);
    let mut keys: Vec<&[u8]> = Vec::new();
    let one: [&[u8]; 1];
    let keys: &[&[u8]] = if spec.name == "exec" {
        for queued in client.multi.iter().flatten() {
            if let Ok(positions) = table.routing_keys(queued) {
                keys.extend(positions.positions().map(|at| queued[at].as_slice()));
            }
            write |= table
                .lookup(queued)
                .is_some_and(|s| s.flags.contains(CommandFlags::WRITE));
        }
        &keys
    } else if pubsub_shard(spec) {
        // Sharded pub/sub: the channels are routed as keys are.
        let channels = if spec.name == "spublish" {
            &args[1..2.min(args.len())]
        } else {
            &args[1..]
        };
        if channels.is_empty() {
            return Ok(false);
        }
        channels
    } else if spec.has_key_arguments() {
        // Most commands have one key: no allocation for it.
        let positions = Keys::routing(spec, args);
        let mut at = positions.positions();
        match (at.next(), at.next()) {
            (None, _) => return Ok(false),
            (Some(first), None) => {
                one = [args[first]];
                &one
            }
            (Some(_), Some(_)) => {
                keys.extend(positions.positions().map(|at| args[at]));
                &keys
            }
        }
    } else {
        return Ok(false);
    };
    if keys.is_empty() {
        return Ok(false);
    }
    let mut request = Request::new(keys);
    request.write = write;
    request.asking = client.asking || spec.flags.contains(CommandFlags::ASKING);
    request.readonly = client.readonly;
    request.migrate = spec.name == "migrate";
    request.pubsub_shard = pubsub_shard(spec);
    let db = &node.db;
    // A client already blocked stays so while its slot migrates (no ASK, no TRYAGAIN),
    // and is redirected once the slot has left.
    let decision = if client.blocked_pop {
        node.cluster.route_blocked(&request)
    } else {
        node.cluster.route(&request, |k| db.contains(k, now))
    };
    if decision.is_served() {
        Ok(keys.iter().any(|key| node.in_flight.contains(*key)))
    } else {
        Err(error(&decision.to_string()))
    }
}

fn exec(node: &mut Node, client: &mut Client, now: u64) -> Reply {
    let Some(queue) = client.multi.take() else {
        return error("ERR EXEC without MULTI");
    };
    if std::mem::take(&mut client.dirty) {
        return error("EXECABORT Transaction discarded because of previous errors.");
    }
    let table = &CommandTable::REDIS_7_0;
    let mut replies = Vec::with_capacity(queue.len());
    for args in &queue {
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let args = args.as_slice();
        let reply = match table.check(args) {
            Ok(spec) => match execute(node, client, spec, args, now) {
                Outcome::Reply(reply) => reply,
                Outcome::Many(replies) => Frame::Array(replies),
                // A blocking command in a transaction answers at once, as if timed out.
                Outcome::Block { .. } => client.null_array(),
                Outcome::Feed => error("ERR PSYNC inside MULTI"),
                Outcome::Quit => ok(),
                // Its I/O cannot run inside the transaction's one step.
                Outcome::Migrate(job) => {
                    migrated(node, &job, &[]);
                    error("ERR the toy node does not run MIGRATE inside MULTI")
                }
            },
            Err(rejection) => Frame::SimpleError(rejection.error_line(args)),
        };
        replies.push(reply);
    }
    Frame::Array(replies)
}

/// The command itself, after every check passed.
pub(crate) fn execute(
    node: &mut Node,
    client: &mut Client,
    spec: &CommandSpec,
    args: &[&[u8]],
    now: u64,
) -> Outcome {
    // A subcommand's spec is named `container|sub`: the container dispatches.
    let name = spec
        .name
        .split_once('|')
        .map_or(spec.name, |(container, _)| container);
    if name.starts_with('x') {
        if let Some(outcome) = crate::stream_commands::run(node, client, name, &args[1..], now) {
            return outcome;
        }
    }
    let reply = match (name, &args[1..]) {
        ("ping", []) => simple("PONG"),
        ("ping", [text]) | ("echo", [text]) => bulk(text),
        ("ping", _) => error("ERR wrong number of arguments for 'ping' command"),
        ("select", [db]) if *db == b"0" => ok(),
        ("select", [db]) if integer(db).is_some() => {
            error("ERR SELECT is not allowed in cluster mode")
        }
        ("select", _) => error(NOT_INTEGER),
        ("asking", []) => {
            client.asking = true;
            ok()
        }
        ("readonly", []) => {
            client.readonly = true;
            ok()
        }
        ("readwrite", []) => {
            client.readonly = false;
            ok()
        }
        ("auth", rest) => auth(node, client, rest),
        ("hello", rest) => return Outcome::Reply(hello(node, client, rest)),
        ("client", [sub, kind, which]) if eq(sub, "kill") && eq(kind, "type") => {
            client_kill_type(node, which)
        }
        ("client", [sub, address]) if eq(sub, "kill") => client_kill_address(node, address),
        ("client", [sub, timeout, mode @ ..]) if eq(sub, "pause") && mode.len() <= 1 => {
            let all = match mode.first() {
                None => true,
                Some(m) if eq(m, "all") => true,
                Some(m) if eq(m, "write") => false,
                Some(_) => return Outcome::Reply(error(SYNTAX)),
            };
            match integer(timeout) {
                Some(ms) if ms >= 0 => {
                    node.client_pause = Some((now.saturating_add(ms as u64), all));
                    ok()
                }
                _ => error("ERR timeout is not an integer or out of range"),
            }
        }
        ("client", [sub]) if eq(sub, "unpause") => {
            node.client_pause = None;
            ok()
        }
        ("client", [sub, rest @ ..]) => client_command(client, sub, rest),
        ("command", rest) => command_command(client, rest),
        ("config", [sub, rest @ ..]) => config(node, sub, rest),
        ("debug", [sub, rest @ ..]) => debug(node, sub, rest, now),
        ("function", [sub, rest @ ..]) => crate::scripts::function(node, client, sub, rest, now),
        ("eval" | "eval_ro" | "evalsha" | "evalsha_ro", _) => {
            crate::scripts::eval(node, client, args, now)
        }
        ("script", [sub, rest @ ..]) => crate::scripts::script(node, sub, rest),
        ("fcall" | "fcall_ro", _) => crate::scripts::fcall(node, client, args, now),
        ("psync", _) if node.cluster.myself().is_master() => return Outcome::Feed,
        ("replconf", options) if options.len() % 2 == 0 => {
            for pair in options.chunks(2) {
                if eq(pair[0], "listening-port") {
                    client.listening_port = integer(pair[1]).and_then(|p| u16::try_from(p).ok());
                }
            }
            ok()
        }
        ("replconf", _) => error(SYNTAX),
        ("role", []) => role(node),
        ("subscribe" | "psubscribe" | "ssubscribe", channels) => {
            let kind = match name {
                "subscribe" => Kind::Channel,
                "psubscribe" => Kind::Pattern,
                _ => Kind::Shard,
            };
            let (id, resp3) = (client.id, client.resp3);
            let replies = node
                .pubsub
                .subscribe(id, resp3, &mut client.inbox, kind, channels);
            return Outcome::Many(replies);
        }
        ("unsubscribe" | "punsubscribe" | "sunsubscribe", channels) => {
            let kind = match name {
                "unsubscribe" => Kind::Channel,
                "punsubscribe" => Kind::Pattern,
                _ => Kind::Shard,
            };
            let (id, resp3) = (client.id, client.resp3);
            let replies = node
                .pubsub
                .unsubscribe(id, resp3, &mut client.inbox, kind, channels);
            return Outcome::Many(replies);
        }
        ("publish", [channel, message]) => {
            let got = crate::node::deliver(node, channel, message, false, now);
            node.cluster
                .publish(channel, message, Instant::from_unix_millis(now));
            Frame::Integer(got as i64)
        }
        ("spublish", [channel, message]) => {
            let got = crate::node::deliver(node, channel, message, true, now);
            node.cluster
                .publish_shard(channel, message, Instant::from_unix_millis(now));
            Frame::Integer(got as i64)
        }
        ("pubsub", [sub, rest @ ..]) => pubsub_command(node, sub, rest),
        ("wait", [replicas, timeout]) => return wait(node, client, replicas, timeout, now),
        ("psync", _) => error("ERR the toy node replicates from masters only"),
        ("info", rest) => info(node, rest, now),
        ("dbsize", []) => Frame::Integer(node.db.len() as i64),
        ("save", []) => match crate::node::save_rdb(node) {
            Ok(()) => ok(),
            Err(_) => error("ERR"),
        },
        // Saved at once: the toy forks no child.
        ("bgsave", options) if options.len() <= 1 => match crate::node::save_rdb(node) {
            Ok(()) => simple("Background saving started"),
            Err(_) => error("ERR"),
        },
        ("lastsave", []) => Frame::Integer(node.last_save as i64),
        ("flushall" | "flushdb", options) => match options {
            [] => {
                node.db.clear();
                ok()
            }
            [mode] if eq(mode, "sync") || eq(mode, "async") => {
                node.db.clear();
                ok()
            }
            _ => error(SYNTAX),
        },
        ("keys", [pattern]) => Frame::Array(
            node.db
                .keys(now)
                .filter(|key| glob(pattern, key))
                .map(|key| bulk(key))
                .collect(),
        ),
        ("scan", [cursor, options @ ..]) => scan(&node.db, cursor, options, now),
        ("cluster", [sub, rest @ ..]) => cluster(node, client, sub, rest, now),
        ("migrate", [host, port, key, db, timeout, options @ ..]) => {
            return match migration(&mut node.db, host, port, key, db, timeout, options, now) {
                Ok(job) if job.keys.is_empty() => Outcome::Reply(simple("NOKEY")),
                Ok(job) => {
                    node.in_flight
                        .extend(job.keys.iter().map(|(key, _, _)| key.clone()));
                    Outcome::Migrate(job)
                }
                Err(reply) => Outcome::Reply(reply),
            };
        }
        ("blpop" | "brpop", [keys @ .., timeout]) => {
            return blocking_pop(&mut node.db, client, name, keys, timeout, now);
        }
        (name, [key, rest @ ..]) => keyed(&mut node.db, client, name, key, rest, now),
        _ => error(&format!(
            "ERR the toy node does not implement '{}'",
            spec.name
        )),
    };
    Outcome::Reply(reply)
}

fn auth(node: &Node, client: &mut Client, args: &[&[u8]]) -> Reply {
    let password = match args {
        [password] | [_, password] => password,
        _ => return error(SYNTAX),
    };
    let user_ok = args.len() == 1 || eq(args[0], "default");
    match &node.password {
        None if args.len() == 1 => error(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        ),
        Some(expected) if user_ok && expected.as_bytes() == *password => {
            client.authenticated = true;
            ok()
        }
        None if user_ok => {
            client.authenticated = true;
            ok()
        }
        _ => error("WRONGPASS invalid username-password pair or user is disabled."),
    }
}

/// `HELLO [protover [AUTH username password] [SETNAME name]]`.
fn hello(node: &Node, client: &mut Client, args: &[&[u8]]) -> Reply {
    let mut version = if client.resp3 { 3 } else { 2 };
    let mut rest = args;
    if let [protover, more @ ..] = args {
        match integer(protover) {
            Some(v @ (2 | 3)) => version = v,
            Some(_) => return error("NOPROTO unsupported protocol version"),
            None => return error("ERR Protocol version is not an integer or out of range"),
        }
        rest = more;
    }
    let mut name = None;
    while let [option, more @ ..] = rest {
        match more {
            [user, password, tail @ ..] if eq(option, "auth") => {
                if let Frame::SimpleError(e) = auth(node, client, &[*user, *password]) {
                    return Frame::SimpleError(e);
                }
                rest = tail;
            }
            [value, tail @ ..] if eq(option, "setname") => {
                name = Some(value.to_vec());
                rest = tail;
            }
            _ => {
                return error(&format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(option)
                ));
            }
        }
    }
    if !client.authenticated {
        return error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        );
    }
    if name.is_some() {
        client.name = name;
    }
    client.resp3 = version == 3;
    let role = if node.cluster.myself().is_master() {
        "master"
    } else {
        "replica"
    };
    let fields = [
        ("server", bulk(b"redis")),
        ("version", bulk(b"7.0.15")),
        ("proto", Frame::Integer(version)),
        ("id", Frame::Integer(client.id as i64)),
        ("mode", bulk(b"cluster")),
        ("role", bulk(role.as_bytes())),
        ("modules", Frame::Array(Vec::new())),
    ];
    if client.resp3 {
        Frame::Map(
            fields
                .into_iter()
                .map(|(k, v)| (bulk(k.as_bytes()), v))
                .collect(),
        )
    } else {
        Frame::Array(
            fields
                .into_iter()
                .flat_map(|(k, v)| [bulk(k.as_bytes()), v])
                .collect(),
        )
    }
}

/// `CLIENT KILL TYPE replica|slave`: the feeds of the replicas end (they connect again and
/// resync); other types are not served by the toy.
fn client_kill_type(node: &mut Node, which: &[u8]) -> Reply {
    if eq(which, "replica") || eq(which, "slave") {
        let fed = node.replication.replicas.len();
        node.replication.disconnect_replicas();
        Frame::Integer(fed as i64)
    } else if ["normal", "master", "pubsub"].iter().any(|t| eq(which, t)) {
        error("ERR the toy node kills replica clients only")
    } else {
        error(&format!(
            "ERR Unknown client type '{}'",
            String::from_utf8_lossy(which)
        ))
    }
}

/// `CLIENT KILL ip:port`: the toy knows one connection by its address, a replica's link to
/// its master, which it drops (the replica connects again and resyncs).
fn client_kill_address(node: &mut Node, address: &[u8]) -> Reply {
    if crate::node::drop_master_link(node, address) {
        ok()
    } else {
        error("ERR No such client")
    }
}

fn client_command(client: &mut Client, sub: &[u8], args: &[&[u8]]) -> Reply {
    match (sub.to_ascii_lowercase().as_slice(), args) {
        (b"setname", [name]) => {
            if name.iter().any(|&b| b <= b' ' || b > b'~') {
                return error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            client.name = (!name.is_empty()).then(|| name.to_vec());
            ok()
        }
        (b"getname", []) => match &client.name {
            Some(name) => bulk(name),
            None => client.null(),
        },
        (b"id", []) => Frame::Integer(client.id as i64),
        _ => error(&format!(
            "ERR the toy node does not implement 'client|{}'",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        )),
    }
}

/// COMMAND and its subcommands but DOCS, from the route crate's copy of 7.0's table. The
/// server lists commands and subcommands in its hash table's order, which changes from run
/// to run; the toy lists them by name.
fn command_command(client: &Client, args: &[&[u8]]) -> Reply {
    let table = &CommandTable::REDIS_7_0;
    let info = |spec: &CommandSpec| spec.info(client.resp3).map_bytes(&mut |b| b.to_vec());
    match args {
        [] => Frame::Array(table.commands().iter().map(info).collect()),
        [sub] if eq(sub, "info") => Frame::Array(table.commands().iter().map(info).collect()),
        [sub, names @ ..] if eq(sub, "info") => Frame::Array(
            names
                .iter()
                .map(|name| table.by_full_name(name).map_or_else(|| client.null(), info))
                .collect(),
        ),
        [sub] if eq(sub, "count") => Frame::Integer(table.commands().len() as i64),
        [sub, argv @ ..] if eq(sub, "getkeys") => match table.command_getkeys(argv) {
            Ok(keys) => Frame::Array(keys.positions().map(|at| bulk(argv[at])).collect()),
            Err(e) => error(&format!("ERR {e}")),
        },
        [sub] if eq(sub, "list") => {
            Frame::Array(table.all().map(|spec| bulk(spec.name.as_bytes())).collect())
        }
        [sub, filterby, kind, value] if eq(sub, "list") && eq(filterby, "filterby") => {
            let names = table.all().map(|spec| spec.name);
            let names: Vec<&str> = if eq(kind, "pattern") {
                // The server matches without case; the names are lowercase.
                let pattern = value.to_ascii_lowercase();
                names
                    .filter(|name| glob(&pattern, name.as_bytes()))
                    .collect()
            } else if eq(kind, "aclcat") {
                let category = format!("@{}", String::from_utf8_lossy(value).to_lowercase());
                match AclCategories::from_name(&category) {
                    Some(category) => table
                        .all()
                        .filter(|spec| spec.acl_categories.contains(category))
                        .map(|spec| spec.name)
                        .collect(),
                    None => Vec::new(),
                }
            } else if eq(kind, "module") {
                // No module is loaded.
                Vec::new()
            } else {
                return error(SYNTAX);
            };
            Frame::Array(names.iter().map(|name| bulk(name.as_bytes())).collect())
        }
        [sub, ..] if eq(sub, "list") => error(SYNTAX),
        [sub, ..] => error(&format!(
            "ERR the toy node does not implement 'command|{}'",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        )),
    }
}

/// Parameters the server changes live that the toy node cannot: it binds its ports and
/// places its files once, at start.
const FIXED: &[&str] = &[
    "port",
    "bind",
    "cluster-announce-ip",
    "unixsocket",
    "dir",
    "dbfilename",
    "appendfilename",
];

/// CONFIG GET / SET / REWRITE / RESETSTAT, on `config.rs`'s table.
fn config(node: &mut Node, sub: &[u8], args: &[&[u8]]) -> Reply {
    if eq(sub, "get") {
        let mut reply = Vec::new();
        for (name, value) in node.settings.config_get(args) {
            reply.push(bulk(name.as_bytes()));
            reply.push(bulk(value.as_bytes()));
        }
        return Frame::Array(reply);
    }
    if eq(sub, "set") {
        if args.is_empty() || args.len() % 2 != 0 {
            return error("ERR wrong number of arguments for 'config|set' command");
        }
        let pairs: Vec<(&[u8], &[u8])> = args.chunks(2).map(|p| (p[0], p[1])).collect();
        if let Some((name, _)) = pairs.iter().find(|(n, _)| {
            let name = String::from_utf8_lossy(n).to_ascii_lowercase();
            FIXED.contains(&name.as_str())
        }) {
            return error(&format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - the toy node binds \
                 its ports and places its files once, at start",
                String::from_utf8_lossy(name).to_ascii_lowercase()
            ));
        }
        let changed = match node.settings.config_set(&pairs) {
            Ok(changed) => changed,
            Err(line) => return error(&line),
        };
        apply(node, &changed);
        return ok();
    }
    if eq(sub, "rewrite") {
        return match node.settings.rewrite() {
            Ok(()) => {
                node.log
                    .write(Level::Notice, "CONFIG REWRITE executed with success.");
                ok()
            }
            Err(line) => error(&line),
        };
    }
    if eq(sub, "resetstat") {
        node.reset_stats();
        return ok();
    }
    error(&format!(
        "ERR unknown subcommand '{}'. Try CONFIG HELP.",
        String::from_utf8_lossy(sub)
    ))
}

/// What a CONFIG SET changes at once: the state machine's options, the log level, the
/// password; the rest is logged (once) as having no effect on the toy.
fn apply(node: &mut Node, changed: &[String]) {
    if changed.iter().any(|name| name.starts_with("cluster-")) {
        let config = node.cluster.config().clone();
        let config = crate::node::cluster_config(&node.settings, config);
        let now = Instant::from_unix_millis(crate::node::now());
        node.cluster.set_config(config, now);
    }
    if changed.iter().any(|name| name == "loglevel") {
        let level = node.settings.get("loglevel").and_then(Level::parse);
        node.log.level = level.unwrap_or(Level::Notice);
    }
    if changed.iter().any(|name| name == "appendonly") {
        match (node.settings.flag("appendonly"), node.aof.is_some()) {
            (true, false) => {
                let _ = crate::node::start_aof(node);
            }
            (false, true) => node.aof = None,
            _ => {}
        }
    }
    if let Some(aof) = node.aof.as_mut() {
        aof.fsync_always = node.settings.get("appendfsync") == Some("always");
    }
    if changed.iter().any(|name| name == "requirepass") {
        let password = node.settings.get("requirepass").unwrap_or("");
        node.password = (!password.is_empty()).then(|| password.to_string());
    }
    crate::node::tell_inert(node);
}

/// The DEBUG subcommands Redis's test suites use, as the server runs them.
fn debug(node: &mut Node, sub: &[u8], args: &[&[u8]], now: u64) -> Reply {
    // The toy listens on loopback only: `local` allows every client, as `yes` does.
    if node.settings.get("enable-debug-command") == Some("no") {
        return error(
            "ERR DEBUG command not allowed. If the enable-debug-command option is set to \
             \"local\", you can run it from a local connection, otherwise you need to set this \
             option in the configuration file, and then restart the server.",
        );
    }
    let number = |arg: &[u8]| std::str::from_utf8(arg).ok()?.parse::<f64>().ok();
    match args {
        [seconds] if eq(sub, "sleep") => match number(seconds) {
            // The whole node stops, bus included, as the server's one thread does: the
            // node's lock is held throughout.
            Some(s) if s.is_finite() && s >= 0.0 => {
                std::thread::sleep(std::time::Duration::from_secs_f64(s.min(3600.0)));
                ok()
            }
            _ => error("ERR value is not a valid float"),
        },
        [kind] if eq(sub, "drop-cluster-packet-filter") => match integer(kind) {
            Some(kind) => {
                node.cluster
                    .set_drop_filter(u16::try_from(kind).ok().map(MessageType));
                ok()
            }
            None => error(NOT_INTEGER),
        },
        [] if eq(sub, "digest") => {
            let mut digest = [0u8; 20];
            let keys: Vec<Vec<u8>> = node.db.keys(now).cloned().collect();
            for key in keys {
                xor(&mut digest, &key_digest(&node.db, &key, now));
            }
            bulk(hex(&digest).as_bytes())
        }
        keys if eq(sub, "digest-value") => Frame::Array(
            keys.iter()
                .map(|key| bulk(hex(&key_digest(&node.db, key, now)).as_bytes()))
                .collect(),
        ),
        [count, rest @ ..] if eq(sub, "populate") && rest.len() <= 2 => {
            let Some(count) = integer(count).filter(|c| *c >= 0) else {
                return error("ERR count can't be negative");
            };
            let prefix = rest.first().copied().unwrap_or(b"key");
            let size = match rest.get(1).map(|s| integer(s)) {
                None => None,
                Some(Some(size)) if size >= 0 => Some(size as usize),
                Some(_) => return error("ERR size can't be negative"),
            };
            for n in 0..count {
                let mut key = prefix.to_vec();
                key.extend_from_slice(format!(":{n}").as_bytes());
                if node.db.contains(&key, now) {
                    continue;
                }
                // As the server: `value:N`, or exactly `size` bytes of it, zero-padded.
                let mut value = format!("value:{n}").into_bytes();
                if let Some(size) = size.filter(|s| *s > 0) {
                    value.resize(size, 0);
                }
                node.db.insert(&key, string(&value));
            }
            ok()
        }
        [text] if eq(sub, "log") => {
            let text = format!("DEBUG LOG: {}", String::from_utf8_lossy(text));
            node.log.write(Level::Warning, &text);
            ok()
        }
        [_] if eq(sub, "set-active-expire") => ok(),
        _ => error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}

/// A key's share of DEBUG DIGEST: 20 bytes that depend on its name, value and expiry, all
/// zero for a missing key. Not the server's SHA1 mix: digests compare between toy nodes (a
/// master and its replica), never with a real server's.
fn key_digest(db: &Db, key: &[u8], now: u64) -> [u8; 20] {
    use std::hash::{Hash, Hasher};
    let mut out = [0u8; 20];
    let Some(entry) = db.peek(key, now) else {
        return out;
    };
    let payload = dump(&entry.value);
    for (round, chunk) in out.chunks_mut(8).enumerate() {
        // SipHash with fixed keys: the same bytes from every node of one build.
        let mut hasher = std::hash::DefaultHasher::new();
        (round, key, &payload, entry.expires).hash(&mut hasher);
        let bytes = hasher.finish().to_be_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    out
}

fn xor(into: &mut [u8; 20], other: &[u8; 20]) {
    for (a, b) in into.iter_mut().zip(other) {
        *a ^= b;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `WAIT numreplicas timeout`: blocks until that many replicas acknowledged the stream as
/// far as it was when WAIT came (or the timeout passes), and answers how many did.
fn wait(node: &Node, client: &mut Client, replicas: &[u8], timeout: &[u8], now: u64) -> Outcome {
    let (Some(wanted), Some(timeout)) = (integer(replicas), integer(timeout)) else {
        return Outcome::Reply(error(NOT_INTEGER));
    };
    if timeout < 0 {
        return Outcome::Reply(error("ERR timeout is negative"));
    }
    if !node.cluster.myself().is_master() {
        return Outcome::Reply(error(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis \
             4.0 if a replica is configured to be writable (which is not the default) writes to \
             replicas are just local and are not propagated.",
        ));
    }
    let target = *client.waiting.get_or_insert(node.replication.offset);
    let acked = node.replication.acked(target);
    if acked as i64 >= wanted {
        client.waiting = None;
        client.timeout_reply = None;
        return Outcome::Reply(Frame::Integer(acked as i64));
    }
    client.timeout_reply = Some(Frame::Integer(acked as i64));
    let deadline = (timeout > 0).then(|| now.saturating_add(timeout as u64));
    Outcome::Block { deadline }
}

/// PUBSUB CHANNELS / NUMSUB / NUMPAT / SHARDCHANNELS / SHARDNUMSUB: this node's
/// subscriptions, as the server answers (for its own clients only).
fn pubsub_command(node: &Node, sub: &[u8], args: &[&[u8]]) -> Reply {
    let sub = sub.to_ascii_lowercase();
    match (sub.as_slice(), args) {
        (b"channels" | b"shardchannels", pattern) if pattern.len() <= 1 => Frame::Array(
            node.pubsub
                .names(sub == b"shardchannels", pattern.first().copied())
                .iter()
                .map(|name| bulk(name))
                .collect(),
        ),
        (b"numsub" | b"shardnumsub", channels) => Frame::Array(
            channels
                .iter()
                .flat_map(|channel| {
                    let count = node.pubsub.subscribers(sub == b"shardnumsub", channel);
                    [bulk(channel), Frame::Integer(count as i64)]
                })
                .collect(),
        ),
        (b"numpat", []) => Frame::Integer(node.pubsub.patterns() as i64),
        _ => error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            String::from_utf8_lossy(&sub)
        )),
    }
}

/// ROLE: a master's replicas fed now, or a replica's master and link.
fn role(node: &Node) -> Reply {
    let myself = node.cluster.myself();
    let offset = |n: u64| Frame::Integer(n as i64);
    match myself.master.and_then(|id| node.cluster.node(&id)) {
        None => {
            let replicas = node
                .replication
                .replicas
                .iter()
                .map(|r| {
                    Frame::Array(vec![
                        bulk(r.ip.as_bytes()),
                        bulk(r.port.to_string().as_bytes()),
                        bulk(r.ack.to_string().as_bytes()),
                    ])
                })
                .collect();
            Frame::Array(vec![
                bulk(b"master"),
                offset(node.replication.offset),
                Frame::Array(replicas),
            ])
        }
        Some(master) => {
            let state: &[u8] = if node.replication.link_up {
                b"connected"
            } else {
                b"connect"
            };
            Frame::Array(vec![
                bulk(b"slave"),
                bulk(master.ip.to_string().as_bytes()),
                Frame::Integer(i64::from(master.port)),
                bulk(state),
                offset(node.replication.offset),
            ])
        }
    }
}

/// INFO's sections, in the server's order, and whether plain INFO shows each.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("errorstats", true),
    ("cluster", true),
    ("keyspace", true),
];

/// `INFO [section ...]`: the fields the server reports that mean something for the toy (the
/// ones Redis's own test suites read among them), under the server's names.
fn info(node: &Node, args: &[&[u8]], now: u64) -> Reply {
    let wanted = |section: &str, default: bool| {
        args.is_empty() && default
            || args.iter().any(|a| {
                eq(a, section)
                    || eq(a, "all")
                    || eq(a, "everything")
                    || (eq(a, "default") && default)
            })
    };
    let mut text = String::new();
    for &(section, default) in SECTIONS {
        if !wanted(section, default) {
            continue;
        }
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        let mut title = section.to_string();
        title[..1].make_ascii_uppercase();
        text.push_str(&format!("# {title}\r\n"));
        for (field, value) in info_section(node, section, now) {
            text.push_str(&format!("{field}:{value}\r\n"));
        }
    }
    Frame::BulkString(text.into_bytes())
}

fn info_section(node: &Node, section: &str, now: u64) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut add = |field: &str, value: &dyn std::fmt::Display| {
        fields.push((field.to_string(), value.to_string()));
    };
    let myself = node.cluster.myself();
    let uptime = now.saturating_sub(node.started) / 1000;
    match section {
        "server" => {
            add("redis_version", &"7.0.15");
            add("redis_mode", &"cluster");
            add("os", &std::env::consts::OS);
            add("arch_bits", &64);
            add("process_id", &std::process::id());
            add("run_id", &node.replication.replid);
            add("tcp_port", &node.port);
            add("uptime_in_seconds", &uptime);
            add("uptime_in_days", &(uptime / 86_400));
            let exe = std::env::current_exe().map(|p| p.display().to_string());
            add("executable", &exe.unwrap_or_default());
            let file = node.settings.file().map(|p| p.display().to_string());
            add("config_file", &file.unwrap_or_default());
        }
        "clients" => {
            add("connected_clients", &node.clients);
            add("blocked_clients", &node.blocked);
            add("tracking_clients", &0);
        }
        "memory" => {
            add("mem_allocator", &"libc");
            add("lazyfree_pending_objects", &0);
        }
        "persistence" => {
            add("loading", &0);
            add("rdb_bgsave_in_progress", &0);
            add("rdb_last_save_time", &node.last_save);
            add("rdb_last_bgsave_status", &"ok");
            add("aof_enabled", &u8::from(node.aof.is_some()));
            add("aof_rewrite_in_progress", &0);
        }
        "stats" => {
            add("total_connections_received", &node.stats.connections);
            add("total_commands_processed", &node.stats.commands);
            add("rejected_connections", &node.stats.rejected_connections);
            add("dump_payload_sanitizations", &0);
        }
        "replication" => {
            let master = myself.master.and_then(|id| node.cluster.node(&id));
            match master {
                Some(master) => {
                    add("role", &"slave");
                    add("master_host", &master.ip);
                    add("master_port", &master.port);
                    let up = node.replication.link_up;
                    add("master_link_status", &if up { "up" } else { "down" });
                    add("master_sync_in_progress", &u8::from(!up));
                    add("slave_repl_offset", &node.replication.offset);
                    add("slave_priority", &node.settings.number("replica-priority"));
                    add(
                        "slave_read_only",
                        &u8::from(node.settings.flag("replica-read-only")),
                    );
                    add("replica_announced", &1);
                }
                None => add("role", &"master"),
            }
            add("connected_slaves", &node.replication.replicas.len());
            for (n, r) in node.replication.replicas.iter().enumerate() {
                let (ip, port, offset) = (&r.ip, r.port, r.ack);
                let line = format!("ip={ip},port={port},state=online,offset={offset},lag=0");
                add(&format!("slave{n}"), &line);
            }
            add("master_failover_state", &"no-failover");
            add("master_replid", &node.replication.replid);
            add(
                "master_replid2",
                &"0000000000000000000000000000000000000000",
            );
            add("master_repl_offset", &node.replication.offset);
            add("second_repl_offset", &-1);
        }
        "cluster" => add("cluster_enabled", &1),
        "keyspace" if node.db.len() > 0 => {
            let value = format!(
                "keys={},expires={},avg_ttl=0",
                node.db.len(),
                node.db.volatile()
            );
            add("db0", &value);
        }
        _ => {}
    }
    fields
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`.
fn scan(db: &Db, cursor: &[u8], options: &[&[u8]], now: u64) -> Reply {
    let Some(cursor) = std::str::from_utf8(cursor)
        .ok()
        .and_then(|c| c.parse::<u64>().ok())
    else {
        return error("ERR invalid cursor");
    };
    let (mut pattern, mut count, mut kind) = (None, 10, None);
    let mut rest = options;
    while let [option, value, more @ ..] = rest {
        if eq(option, "match") {
            pattern = Some(value);
        } else if eq(option, "count") {
            match integer(value) {
                Some(n) if n >= 1 => count = n as usize,
                Some(_) => return error(SYNTAX),
                None => return error(NOT_INTEGER),
            }
        } else if eq(option, "type") {
            kind = Some(value.to_ascii_lowercase());
        } else {
            return error(SYNTAX);
        }
        rest = more;
    }
    if !rest.is_empty() {
        return error(SYNTAX);
    }
    let (next, keys) = db.scan(cursor, count, now);
    let keys = keys
        .into_iter()
        .filter(|key| pattern.is_none_or(|p| glob(p, key)))
        .filter(|key| {
            kind.as_ref().is_none_or(|kind| {
                db.peek(key, now)
                    .is_some_and(|e| e.value.type_name().as_bytes() == kind.as_slice())
            })
        })
        .map(|key| bulk(&key))
        .collect();
    Frame::Array(vec![bulk(next.to_string().as_bytes()), Frame::Array(keys)])
}

/// CLUSTER subcommands: the state machine's, plus the two that read the keyspace.
fn cluster(node: &mut Node, client: &Client, sub: &[u8], args: &[&[u8]], now: u64) -> Reply {
    let slot = |arg: &[u8]| {
        integer(arg)
            .and_then(|n| u16::try_from(n).ok())
            .and_then(Slot::new)
    };
    match (sub.to_ascii_lowercase().as_slice(), args) {
        (b"countkeysinslot", [s]) => match slot(s) {
            Some(s) => Frame::Integer(node.db.count_in_slot(u16::from(s)) as i64),
            None if integer(s).is_none() => error(NOT_INTEGER),
            None => error("ERR Invalid slot"),
        },
        (b"getkeysinslot", [s, count]) => match (slot(s), integer(count)) {
            _ if integer(s).is_none() || integer(count).is_none() => error(NOT_INTEGER),
            (Some(s), Some(count)) if count >= 0 => Frame::Array(
                node.db
                    .keys_in_slot(u16::from(s), count as usize, now)
                    .iter()
                    .map(|k| bulk(k))
                    .collect(),
            ),
            _ => error("ERR Invalid slot or number of keys"),
        },
        (b"links", []) => node.cluster_links(client.protocol()),
        _ => {
            let mut full = Vec::with_capacity(args.len() + 1);
            full.push(sub);
            full.extend_from_slice(args);
            let db = &node.db;
            node.cluster
                .cluster_command(
                    &full,
                    client.protocol(),
                    Instant::from_unix_millis(now),
                    |slot: Slot| db.count_in_slot(u16::from(slot)) as u64,
                )
                .unwrap_or_else(|| {
                    error(&format!(
                        "ERR the toy node does not implement 'cluster|{}'",
                        String::from_utf8_lossy(sub).to_ascii_lowercase()
                    ))
                })
        }
    }
}

/// BLPOP / BRPOP: the first non-empty list's head (or tail), or block until `timeout`
/// seconds (0: for ever) have passed.
fn blocking_pop(
    db: &mut Db,
    client: &mut Client,
    name: &str,
    keys: &[&[u8]],
    timeout: &[u8],
    now: u64,
) -> Outcome {
    let Some(timeout) = std::str::from_utf8(timeout)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|t| t.is_finite())
    else {
        return Outcome::Reply(error("ERR timeout is not a float or out of range"));
    };
    if timeout < 0.0 {
        return Outcome::Reply(error("ERR timeout is negative"));
    }
    // Too large for the server's milliseconds: it overflows there, and reads as negative.
    if timeout * 1000.0 > i64::MAX as f64 {
        return Outcome::Reply(error("ERR timeout is negative"));
    }
    for key in keys {
        match db.get_mut(key, now).map(|e| &mut e.value) {
            Some(Value::List(items)) => {
                let item = if name == "blpop" {
                    items.pop_front()
                } else {
                    items.pop_back()
                };
                if let Some(item) = item {
                    db.drop_if_empty(key);
                    return Outcome::Reply(Frame::Array(vec![bulk(key), Frame::BulkString(item)]));
                }
            }
            Some(_) => return Outcome::Reply(error(WRONGTYPE)),
            None => {}
        }
    }
    if client.multi.is_some() {
        return Outcome::Reply(client.null_array());
    }
    let deadline = (timeout > 0.0).then(|| now.saturating_add((timeout * 1000.0) as u64));
    client.blocked_pop = true;
    Outcome::Block { deadline }
}

/// The commands on one key's value.
fn keyed(db: &mut Db, client: &Client, name: &str, key: &[u8], rest: &[&[u8]], now: u64) -> Reply {
    match (name, rest) {
        ("get", []) => match db.get(key, now).map(|e| &e.value) {
            Some(Value::Str(v)) => bulk(v),
            Some(_) => error(WRONGTYPE),
            None => client.null(),
        },
        ("set", [value, options @ ..]) => set(db, client, key, value, options, now),
        ("mget", _) => Frame::Array(
            std::iter::once(key)
                .chain(rest.iter().map(|k| k.as_ref()))
                .map(|k| match db.get(k, now).map(|e| &e.value) {
                    Some(Value::Str(v)) => bulk(v),
                    _ => client.null(),
                })
                .collect(),
        ),
        ("mset", pairs) if pairs.len() % 2 == 1 => {
            db.insert(key, string(pairs[0]));
            for pair in pairs[1..].chunks_exact(2) {
                db.insert(pair[0], string(pair[1]));
            }
            ok()
        }
        ("mset", _) => error("ERR wrong number of arguments for 'mset' command"),
        ("del" | "unlink", _) => {
            let keys = std::iter::once(key).chain(rest.iter().map(|k| k.as_ref()));
            let removed = keys.filter(|k| {
                let live = db.get(k, now).is_some();
                live && db.remove(k).is_some()
            });
            Frame::Integer(removed.count() as i64)
        }
        ("exists", _) => {
            let keys = std::iter::once(key).chain(rest.iter().map(|k| k.as_ref()));
            Frame::Integer(keys.filter(|k| db.get(k, now).is_some()).count() as i64)
        }
        ("type", []) => simple(db.get(key, now).map_or("none", |e| e.value.type_name())),
        ("incr", []) => add(db, key, 1, now),
        ("decr", []) => add(db, key, -1, now),
        ("incrby", [by]) => {
            integer(by).map_or_else(|| error(NOT_INTEGER), |by| add(db, key, by, now))
        }
        ("incrbyfloat", [by]) => add_float(db, key, by, now),
        ("decrby", [by]) => match integer(by).and_then(i64::checked_neg) {
            Some(by) => add(db, key, by, now),
            None if integer(by).is_some() => error("ERR decrement would overflow"),
            None => error(NOT_INTEGER),
        },
        ("append", [tail]) => match db.get_mut(key, now).map(|e| &mut e.value) {
            // The server's proto-max-bulk-len (512 MB) bounds a string grown by APPEND.
            Some(Value::Str(v)) if v.len() + tail.len() > 512 << 20 => {
                error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
            }
            Some(Value::Str(v)) => {
                v.extend_from_slice(tail);
                Frame::Integer(v.len() as i64)
            }
            Some(_) => error(WRONGTYPE),
            None => {
                db.insert(key, string(tail));
                Frame::Integer(tail.len() as i64)
            }
        },
        ("strlen", []) => match db.get(key, now).map(|e| &e.value) {
            Some(Value::Str(v)) => Frame::Integer(v.len() as i64),
            Some(_) => error(WRONGTYPE),
            None => Frame::Integer(0),
        },
        ("expire" | "pexpire", [time, options @ ..]) => expire(db, name, key, time, options, now),
        ("ttl" | "pttl", []) => match db.get(key, now) {
            None => Frame::Integer(-2),
            Some(Entry { expires: None, .. }) => Frame::Integer(-1),
            Some(Entry {
                expires: Some(at), ..
            }) => {
                let left = at - now; // the key is live: `at` is later than `now`
                let left = if name == "ttl" {
                    (left + 500) / 1000
                } else {
                    left
                };
                Frame::Integer(left as i64)
            }
        },
        ("persist", []) => match db.get_mut(key, now) {
            Some(entry) if entry.expires.is_some() => {
                entry.expires = None;
                Frame::Integer(1)
            }
            _ => Frame::Integer(0),
        },
        ("lpush" | "rpush", values) if !values.is_empty() => {
            let Value::List(items) = db.value_or_insert(key, now, || Value::List(VecDeque::new()))
            else {
                return error(WRONGTYPE);
            };
            for value in values {
                if name == "lpush" {
                    items.push_front(value.to_vec());
                } else {
                    items.push_back(value.to_vec());
                }
            }
            Frame::Integer(items.len() as i64)
        }
        ("lpop" | "rpop", count) if count.len() <= 1 => {
            let count = match count.first().map(|c| integer(c)) {
                None => None,
                Some(Some(n)) if n >= 0 => Some(n as usize),
                Some(_) => return error("ERR value is out of range, must be positive"),
            };
            let reply = match db.get_mut(key, now).map(|e| &mut e.value) {
                None => {
                    return if count.is_some() {
                        client.null_array()
                    } else {
                        client.null()
                    };
                }
                Some(Value::List(items)) => {
                    let mut pop = || {
                        if name == "lpop" {
                            items.pop_front()
                        } else {
                            items.pop_back()
                        }
                    };
                    match count {
                        None => pop().map_or_else(|| client.null(), Frame::BulkString),
                        Some(n) => Frame::Array(
                            (0..n).map_while(|_| pop()).map(Frame::BulkString).collect(),
                        ),
                    }
                }
                Some(_) => return error(WRONGTYPE),
            };
            db.drop_if_empty(key);
            reply
        }
        ("llen", []) => match db.get(key, now).map(|e| &e.value) {
            Some(Value::List(items)) => Frame::Integer(items.len() as i64),
            Some(_) => error(WRONGTYPE),
            None => Frame::Integer(0),
        },
        ("lrange", [start, stop]) => {
            let (Some(start), Some(stop)) = (integer(start), integer(stop)) else {
                return error(NOT_INTEGER);
            };
            match db.get(key, now).map(|e| &e.value) {
                Some(Value::List(items)) => {
                    let len = items.len() as i64;
                    let start = if start < 0 {
                        (len + start).max(0)
                    } else {
                        start
                    };
                    let stop = if stop < 0 {
                        len + stop
                    } else {
                        stop.min(len - 1)
                    };
                    if start > stop || start >= len {
                        return Frame::Array(Vec::new());
                    }
                    let range = start as usize..=stop as usize;
                    Frame::Array(items.range(range).map(|v| bulk(v)).collect())
                }
                Some(_) => error(WRONGTYPE),
                None => Frame::Array(Vec::new()),
            }
        }
        ("hset", pairs) if !pairs.is_empty() && pairs.len() % 2 == 0 => {
            let new = || Value::Hash(Fields::default());
            let Value::Hash(fields) = db.value_or_insert(key, now, new) else {
                return error(WRONGTYPE);
            };
            let added = pairs
                .chunks_exact(2)
                .filter(|pair| fields.insert(pair[0], pair[1]))
                .count();
            Frame::Integer(added as i64)
        }
        ("hset", _) => error("ERR wrong number of arguments for 'hset' command"),
        ("hget", [field]) => match db.get(key, now).map(|e| &e.value) {
            Some(Value::Hash(fields)) => fields.get(field).map_or_else(|| client.null(), bulk),
            Some(_) => error(WRONGTYPE),
            None => client.null(),
        },
        ("hdel", names) => {
            let removed = match db.get_mut(key, now).map(|e| &mut e.value) {
                Some(Value::Hash(fields)) => {
                    names.iter().filter(|name| fields.remove(name)).count()
                }
                Some(_) => return error(WRONGTYPE),
                None => 0,
            };
            db.drop_if_empty(key);
            Frame::Integer(removed as i64)
        }
        ("hgetall", []) => match db.get(key, now).map(|e| &e.value) {
            Some(Value::Hash(fields)) if client.resp3 => {
                Frame::Map(fields.iter().map(|(f, v)| (bulk(f), bulk(v))).collect())
            }
            Some(Value::Hash(fields)) => Frame::Array(
                fields
                    .iter()
                    .flat_map(|(f, v)| [bulk(f), bulk(v)])
                    .collect(),
            ),
            Some(_) => error(WRONGTYPE),
            None if client.resp3 => Frame::Map(Vec::new()),
            None => Frame::Array(Vec::new()),
        },
        ("dump", []) => match db.get(key, now) {
            Some(entry) => Frame::BulkString(dump(&entry.value)),
            None => client.null(),
        },
        ("restore" | "restore-asking", [ttl, payload, options @ ..]) => {
            restore(db, key, ttl, payload, options, now)
        }
        ("hlen", []) => match db.get(key, now).map(|e| &e.value) {
            Some(Value::Hash(fields)) => Frame::Integer(fields.len() as i64),
            Some(_) => error(WRONGTYPE),
            None => Frame::Integer(0),
        },
        _ => error(&format!("ERR the toy node does not implement '{name}'")),
    }
}

fn string(value: &[u8]) -> Entry {
    Entry {
        value: Value::Str(value.to_vec()),
        expires: None,
    }
}

/// `SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]`.
fn set(
    db: &mut Db,
    client: &Client,
    key: &[u8],
    value: &[u8],
    options: &[&[u8]],
    now: u64,
) -> Reply {
    let (mut nx, mut xx, mut get, mut keep) = (false, false, false, false);
    let mut expires: Option<(&str, &[u8])> = None;
    let mut rest = options;
    while let [option, more @ ..] = rest {
        let word = option.to_ascii_lowercase();
        match (word.as_slice(), more) {
            (b"nx", _) if !xx => nx = true,
            (b"xx", _) if !nx => xx = true,
            (b"get", _) => get = true,
            (b"keepttl", _) if expires.is_none() => keep = true,
            (b"ex" | b"px" | b"exat" | b"pxat", [time, tail @ ..])
                if expires.is_none() && !keep =>
            {
                let unit = match word.as_slice() {
                    b"ex" => "ex",
                    b"px" => "px",
                    b"exat" => "exat",
                    _ => "pxat",
                };
                expires = Some((unit, time));
                rest = tail;
                continue;
            }
            _ => return error(SYNTAX),
        }
        rest = more;
    }
    let at = match expires {
        None => None,
        Some((unit, time)) => {
            let Some(n) = integer(time) else {
                return error(NOT_INTEGER);
            };
            let at = match unit {
                "ex" => n
                    .checked_mul(1000)
                    .and_then(|ms| ms.checked_add(now as i64)),
                "px" => n.checked_add(now as i64),
                "exat" => n.checked_mul(1000),
                _ => Some(n),
            };
            match at {
                Some(at) if n > 0 => Some(at.max(0) as u64),
                _ => return error("ERR invalid expire time in 'set' command"),
            }
        }
    };
    // The old value is copied only for GET.
    let old = match db.get(key, now) {
        Some(Entry {
            value: Value::Str(v),
            expires,
        }) => Some((get.then(|| v.clone()), *expires)),
        Some(_) if get => return error(WRONGTYPE),
        Some(entry) => Some((None, entry.expires)),
        None => None,
    };
    let old_value = || match &old {
        Some((Some(v), _)) => bulk(v),
        _ => client.null(),
    };
    if nx && old.is_some() || xx && old.is_none() {
        return if get { old_value() } else { client.null() };
    }
    let expires = if keep {
        old.as_ref().and_then(|(_, e)| *e)
    } else {
        at
    };
    let reply = if get { old_value() } else { ok() };
    db.insert(
        key,
        Entry {
            value: Value::Str(value.to_vec()),
            expires,
        },
    );
    reply
}

/// INCR, DECR, INCRBY, DECRBY.
fn add(db: &mut Db, key: &[u8], by: i64, now: u64) -> Reply {
    let (current, expires) = match db.get(key, now) {
        None => (0, None),
        Some(Entry {
            value: Value::Str(v),
            expires,
        }) => match integer(v) {
            Some(n) => (n, *expires),
            None => return error(NOT_INTEGER),
        },
        Some(_) => return error(WRONGTYPE),
    };
    let Some(sum) = current.checked_add(by) else {
        return error("ERR increment or decrement would overflow");
    };
    db.insert(
        key,
        Entry {
            value: Value::Str(sum.to_string().into_bytes()),
            expires,
        },
    );
    Frame::Integer(sum)
}

/// INCRBYFLOAT: the sum as the server's `long double` gives it, the TTL kept.
fn add_float(db: &mut Db, key: &[u8], by: &[u8], now: u64) -> Reply {
    let (current, expires) = match db.get(key, now) {
        None => (None, None),
        Some(Entry {
            value: Value::Str(v),
            expires,
        }) => (Some(v.as_slice()), *expires),
        Some(_) => return error(WRONGTYPE),
    };
    match increment(current, by) {
        Ok(sum) => {
            let reply = bulk(sum.as_bytes());
            let value = Value::Str(sum.into_bytes());
            db.insert(key, Entry { value, expires });
            reply
        }
        Err(FloatError::Invalid) => error("ERR value is not a valid float"),
        Err(FloatError::NotFinite) => error("ERR increment would produce NaN or Infinity"),
    }
}

/// `EXPIRE key seconds [NX | XX | GT | LT]`, PEXPIRE in ms.
fn expire(db: &mut Db, name: &str, key: &[u8], time: &[u8], options: &[&[u8]], now: u64) -> Reply {
    let Some(n) = integer(time) else {
        return error(NOT_INTEGER);
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for option in options {
        let word = option.to_ascii_lowercase();
        match word.as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"gt" => gt = true,
            b"lt" => lt = true,
            _ => {
                return error(&format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(option)
                ));
            }
        }
    }
    if nx && (xx || gt || lt) {
        return error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return error("ERR GT and LT options at the same time are not compatible");
    }
    let ms = if name == "expire" {
        n.checked_mul(1000)
    } else {
        Some(n)
    };
    let Some(at) = ms.and_then(|ms| ms.checked_add(now as i64)) else {
        return error(&format!("ERR invalid expire time in '{name}' command"));
    };
    let Some(entry) = db.get_mut(key, now) else {
        return Frame::Integer(0);
    };
    // A missing expiry counts as infinite for GT and LT.
    let allowed = match entry.expires {
        Some(_) if nx => false,
        None if xx || gt => false,
        Some(current) if gt => at > current as i64,
        Some(current) if lt => at < current as i64,
        _ => true,
    };
    if !allowed {
        return Frame::Integer(0);
    }
    if at <= now as i64 {
        db.remove(key);
    } else {
        entry.expires = Some(at as u64);
    }
    Frame::Integer(1)
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]` (and RESTORE-ASKING),
/// with the server's checks in its order: options, an existing key, the TTL, the payload.
fn restore(
    db: &mut Db,
    key: &[u8],
    ttl: &[u8],
    payload: &[u8],
    options: &[&[u8]],
    now: u64,
) -> Reply {
    let (mut replace, mut absolute) = (false, false);
    let mut rest = options;
    while let [option, more @ ..] = rest {
        rest = more;
        if eq(option, "replace") {
            replace = true;
        } else if eq(option, "absttl") {
            absolute = true;
        } else if eq(option, "idletime") || eq(option, "freq") {
            let [value, more @ ..] = rest else {
                return error(SYNTAX);
            };
            rest = more;
            match integer(value) {
                None => return error(NOT_INTEGER),
                Some(n) if eq(option, "idletime") && n < 0 => {
                    return error("ERR Invalid IDLETIME value, must be >= 0");
                }
                Some(n) if eq(option, "freq") && !(0..=255).contains(&n) => {
                    return error("ERR Invalid FREQ value, must be >= 0 and <= 255");
                }
                Some(_) => {} // the toy keeps no LRU / LFU figures
            }
        } else {
            return error(SYNTAX);
        }
    }
    if !replace && db.get(key, now).is_some() {
        return error("BUSYKEY Target key name already exists.");
    }
    let ttl = match integer(ttl) {
        None => return error(NOT_INTEGER),
        Some(ttl) if ttl < 0 => return error("ERR Invalid TTL value, must be >= 0"),
        Some(ttl) => ttl as u64,
    };
    let value = match undump(payload) {
        Ok(value) => value,
        Err(e) => return error(e.text()),
    };
    if replace {
        db.remove(key);
    }
    let expires = match ttl {
        0 => None,
        ttl if absolute => Some(ttl),
        ttl => Some(now.saturating_add(ttl)),
    };
    if expires.is_some_and(|at| at <= now) {
        return ok(); // already expired: restored and gone at once
    }
    db.insert(key, Entry { value, expires });
    ok()
}

/// One MIGRATE: where to, and each key that exists with its TTL (ms, 0 for none) and DUMP
/// payload. Its keys are in `Node::in_flight` until it ends.
#[derive(Debug)]
pub(crate) struct Migration {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) db: i64,
    pub(crate) timeout_ms: u64,
    pub(crate) copy: bool,
    pub(crate) replace: bool,
    /// `AUTH password` or `AUTH2 username password`.
    pub(crate) auth: Vec<Vec<u8>>,
    pub(crate) keys: Vec<(Vec<u8>, u64, Vec<u8>)>,
}

/// `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
/// [AUTH2 username password] [KEYS key …]`, parsed as the server parses it.
#[allow(clippy::too_many_arguments)]
fn migration(
    db: &mut Db,
    host: &[u8],
    port: &[u8],
    key: &[u8],
    dbid: &[u8],
    timeout: &[u8],
    options: &[&[u8]],
    now: u64,
) -> Result<Migration, Reply> {
    let (mut copy, mut replace, mut auth) = (false, false, Vec::new());
    let mut keys: Vec<&[u8]> = vec![key];
    let mut rest = options;
    while let [option, more @ ..] = rest {
        rest = more;
        if eq(option, "copy") {
            copy = true;
        } else if eq(option, "replace") {
            replace = true;
        } else if eq(option, "auth") {
            let [password, more @ ..] = rest else {
                return Err(error(SYNTAX));
            };
            auth = vec![password.to_vec()];
            rest = more;
        } else if eq(option, "auth2") {
            let [user, password, more @ ..] = rest else {
                return Err(error(SYNTAX));
            };
            auth = vec![user.to_vec(), password.to_vec()];
            rest = more;
        } else if eq(option, "keys") {
            if !key.is_empty() {
                return Err(error(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the \
                     empty string",
                ));
            }
            keys = rest.iter().map(|k| k.as_ref()).collect();
            rest = &[];
        } else {
            return Err(error(SYNTAX));
        }
    }
    let (Some(port), Some(dbid), Some(timeout)) = (
        std::str::from_utf8(port)
            .ok()
            .and_then(|p| p.parse::<u16>().ok()),
        integer(dbid),
        integer(timeout),
    ) else {
        return Err(error(NOT_INTEGER));
    };
    let mut found = Vec::new();
    for key in keys {
        if let Some(entry) = db.get(key, now) {
            let ttl = entry.expires.map_or(0, |at| at - now);
            found.push((key.to_vec(), ttl, dump(&entry.value)));
        }
    }
    Ok(Migration {
        host: String::from_utf8_lossy(host).into_owned(),
        port,
        db: dbid,
        timeout_ms: if timeout <= 0 { 1000 } else { timeout as u64 },
        copy,
        replace,
        auth,
        keys: found,
    })
}

/// The end of a MIGRATE: each key the target restored leaves this node (unless COPY), and
/// none is in flight any more. `restored[i]` is whether key `i` was restored.
pub(crate) fn migrated(node: &mut Node, job: &Migration, restored: &[bool]) {
    let mut gone = Vec::new();
    for (n, (key, _, _)) in job.keys.iter().enumerate() {
        node.in_flight.remove(key);
        if restored.get(n) == Some(&true) && !job.copy {
            node.db.remove(key);
            gone.push(key.clone());
        }
    }
    propagate(node, &gone, false, 0);
}
