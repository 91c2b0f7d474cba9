//! EVAL, FCALL and FUNCTION on the toy node, run by `lua.rs`'s subset of Lua: the shebang
//! and its flags as Redis 7.0 reads them (`#!lua name=… flags=no-writes,no-cluster`), the
//! cluster's rules for a script's commands (every key served here, writes on masters only),
//! function libraries loaded, listed, dumped and restored in the server's payload format.
//!
//! A library is kept as its code and the names and flags of the functions it registered:
//! FCALL loads the code again to call one (a Lua value cannot live in the node, which the
//! node's tasks share). Scripts are cached by SHA-1 as the server caches them (EVAL and
//! SCRIPT LOAD add, EVALSHA runs, SCRIPT FLUSH empties), up to [`CACHED`] of them.

use redis_cluster_proto::resp::Frame;
use redis_cluster_proto::route::{CommandFlags, CommandSpec, CommandTable};

use crate::commands::{Client, Outcome, bulk, error, execute, ok, redirect, written_by};
use crate::db::integer;
use crate::dump::{functions_of, functions_payload};
use crate::log::Level;
use crate::lua::{self, Host, Interp, Value};
use crate::node::Node;
use crate::replication::propagate;

type Reply = Frame<Vec<u8>>;

/// Some of a command's arguments.
type Args<'a> = &'a [&'a [u8]];

/// What a library registered as it loaded: each function's name, value and flags.
type Registered = Vec<(Vec<u8>, Value, Vec<Vec<u8>>)>;

/// Scripts the cache keeps; past this the oldest go (a client sending new scripts forever
/// costs bounded memory).
const CACHED: usize = 1000;

/// The script cache: SHA-1 (lowercase hex) and text, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Cache(std::collections::VecDeque<(String, Vec<u8>)>);

impl Cache {
    fn add(&mut self, code: &[u8]) -> String {
        let sha = sha1_hex(code);
        if !self.0.iter().any(|(s, _)| *s == sha) {
            if self.0.len() == CACHED {
                self.0.pop_front();
            }
            self.0.push_back((sha.clone(), code.to_vec()));
        }
        sha
    }

    fn get(&self, sha: &[u8]) -> Option<Vec<u8>> {
        let sha = sha.to_ascii_lowercase();
        self.0
            .iter()
            .find(|(s, _)| s.as_bytes() == sha)
            .map(|(_, code)| code.clone())
    }
}

fn sha1_hex(code: &[u8]) -> String {
    use sha1::Digest;
    sha1::Sha1::digest(code)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `SCRIPT LOAD / EXISTS / FLUSH / KILL`.
pub(crate) fn script(node: &mut Node, sub: &[u8], args: &[&[u8]]) -> Reply {
    match (sub.to_ascii_lowercase().as_slice(), args) {
        (b"load", [code]) => {
            if let Err(text) = shebang(code, false) {
                return error(&text);
            }
            if let Err(e) = lua::parse(code, "user_script") {
                return error(&format!("ERR Error compiling script (new function): {e}"));
            }
            bulk(node.scripts.add(code).as_bytes())
        }
        (b"exists", shas) if !shas.is_empty() => Frame::Array(
            shas.iter()
                .map(|sha| Frame::Integer(i64::from(node.scripts.get(sha).is_some())))
                .collect(),
        ),
        (b"flush", mode) if mode.len() <= 1 => {
            node.scripts.0.clear();
            ok()
        }
        (b"kill", []) => error("NOTBUSY No scripts in execution right now."),
        _ => error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try SCRIPT HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}

/// A function library: its code, and what it registered.
#[derive(Debug, Clone)]
pub(crate) struct Library {
    name: Vec<u8>,
    code: Vec<u8>,
    /// Each function's name and flags.
    functions: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
}

/// A script's shebang line: the library name (FUNCTION LOAD) and the flags (EVAL).
struct Shebang {
    name: Option<Vec<u8>>,
    flags: Vec<Vec<u8>>,
}

const FLAGS: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// `#!<engine> [name=…] [flags=…]`, if the code starts with one.
fn shebang(code: &[u8], library: bool) -> Result<Option<Shebang>, String> {
    if !code.starts_with(b"#!") {
        return Ok(None);
    }
    let end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let line = String::from_utf8_lossy(&code[2..end]).into_owned();
    let mut words = line.split_whitespace();
    let engine = words.next().unwrap_or("");
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(if library {
            format!("ERR Engine '{engine}' not found")
        } else {
            format!("ERR Unexpected engine in script shebang: #!{engine}")
        });
    }
    let mut shebang = Shebang {
        name: None,
        flags: Vec::new(),
    };
    for word in words {
        if let Some(name) = word.strip_prefix("name=").filter(|_| library) {
            shebang.name = Some(name.as_bytes().to_vec());
        } else if let Some(flags) = word.strip_prefix("flags=").filter(|_| !library) {
            for flag in flags.split(',').filter(|f| !f.is_empty()) {
                if !FLAGS.contains(&flag) {
                    return Err(format!("ERR Unexpected flag in script shebang: {flag}"));
                }
                shebang.flags.push(flag.as_bytes().to_vec());
            }
        } else if library {
            return Err(format!("ERR Invalid metadata value given: {word}"));
        } else {
            return Err(format!("ERR Unknown lua shebang option: {word}"));
        }
    }
    Ok(Some(shebang))
}

fn has(flags: &[Vec<u8>], flag: &str) -> bool {
    flags.iter().any(|f| f == flag.as_bytes())
}

/// Whether a script command counts as a write for the cluster's redirections and a
/// replica's READONLY: a script with a shebang and without `no-writes`, or a function
/// without it. A script without a shebang is judged by the commands it runs, as 7.0 does.
pub(crate) fn writes(node: &Node, spec: &CommandSpec, args: &[&[u8]]) -> bool {
    match (spec.name, args.get(1)) {
        ("eval", Some(code)) => {
            matches!(shebang(code, false), Ok(Some(s)) if !has(&s.flags, "no-writes"))
        }
        ("evalsha", Some(sha)) => node.scripts.get(sha).is_some_and(
            |code| matches!(shebang(&code, false), Ok(Some(s)) if !has(&s.flags, "no-writes")),
        ),
        ("fcall", Some(name)) => {
            find(node, name).is_some_and(|(_, flags)| !has(&flags, "no-writes"))
        }
        _ => false,
    }
}

fn find(node: &Node, name: &[u8]) -> Option<(usize, Vec<Vec<u8>>)> {
    node.libraries.iter().enumerate().find_map(|(at, library)| {
        let found = library.functions.iter().find(|(n, _)| n == name);
        found.map(|(_, flags)| (at, flags.clone()))
    })
}

/// `numkeys key … arg …`: the keys and the arguments.
fn split<'a>(rest: &'a [&'a [u8]]) -> Result<(Args<'a>, Args<'a>), Reply> {
    let Some((numkeys, rest)) = rest.split_first() else {
        return Err(error("ERR wrong number of arguments"));
    };
    match integer(numkeys) {
        None => Err(error("ERR value is not an integer or out of range")),
        Some(n) if n < 0 => Err(error("ERR Number of keys can't be negative")),
        Some(n) if n as usize > rest.len() => Err(error(
            "ERR Number of keys can't be greater than number of args",
        )),
        Some(n) => Ok(rest.split_at(n as usize)),
    }
}

/// The host side of a script's run: its commands run on the node for its client.
struct Runner<'n> {
    node: &'n mut Node,
    client: &'n mut Client,
    now: u64,
    /// Only reads allowed (`no-writes`, EVAL_RO, FCALL_RO).
    read_only: bool,
    /// A library loads: `redis.register_function` only.
    loading: bool,
    registered: Registered,
}

impl Host for Runner<'_> {
    fn call(&mut self, args: &[Vec<u8>]) -> Result<Value, Vec<u8>> {
        if self.loading {
            return Err(b"ERR redis.call is not allowed while a library loads".to_vec());
        }
        let argv: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        // The server's own words for a command a script cannot call.
        let table = &CommandTable::REDIS_7_0;
        let spec = match table.check(&argv) {
            Ok(spec) => spec,
            Err(_) if table.lookup(&argv).is_none() => {
                return Err(b"ERR Unknown Redis command called from script".to_vec());
            }
            Err(_) => {
                return Err(b"ERR Wrong number of args calling Redis command from script".to_vec());
            }
        };
        if spec.flags.contains(CommandFlags::NOSCRIPT) {
            return Err(b"ERR This Redis command is not allowed from script".to_vec());
        }
        let write = spec.flags.contains(CommandFlags::WRITE);
        if write && self.read_only {
            return Err(b"ERR Write commands are not allowed from read-only scripts.".to_vec());
        }
        if write && !self.node.cluster.myself().is_master() {
            return Err(b"READONLY You can't write against a read only replica.".to_vec());
        }
        // Every key the script touches must be served here (the server's `scriptCall`).
        if let Err(refusal) = redirect(self.node, self.client, spec, &argv, self.now) {
            let down = matches!(&refusal, Frame::SimpleError(e) if e.starts_with(b"CLUSTERDOWN"));
            let text: &[u8] = if down {
                b"ERR Script attempted to execute a command while the cluster is down"
            } else {
                b"ERR Script attempted to access a non local key in a cluster node"
            };
            return Err(text.to_vec());
        }
        let effects = write.then(|| written_by(spec, &argv));
        let reply = match execute(self.node, self.client, spec, &argv, self.now) {
            Outcome::Reply(reply) => reply,
            Outcome::Block { .. } => Frame::NullArray,
            Outcome::Feed | Outcome::Migrate(_) | Outcome::Many(_) | Outcome::Quit => {
                return Err(b"ERR This Redis command is not allowed from script".to_vec());
            }
        };
        if let Some((keys, flushall)) = effects {
            propagate(self.node, &keys, flushall, self.now);
        }
        match reply {
            Frame::SimpleError(text) | Frame::BulkError(text) => Err(text),
            reply => Ok(to_lua(reply)),
        }
    }

    fn register(
        &mut self,
        name: Vec<u8>,
        function: Value,
        flags: Vec<Vec<u8>>,
    ) -> Result<(), String> {
        if !self.loading {
            return Err(
                "redis.register_function can only be called on FUNCTION LOAD command".into(),
            );
        }
        if let Some(flag) = flags
            .iter()
            .find(|f| !FLAGS.iter().any(|k| k.as_bytes() == f.as_slice()))
        {
            return Err(format!(
                "unknown flag given: {}",
                String::from_utf8_lossy(flag)
            ));
        }
        if self.registered.iter().any(|(n, _, _)| *n == name) {
            return Err(format!(
                "Function {} already exists",
                String::from_utf8_lossy(&name)
            ));
        }
        self.registered.push((name, function, flags));
        Ok(())
    }

    fn log(&mut self, text: &str) {
        self.node.log.write(Level::Notice, text);
    }
}

/// A command's reply as a script sees it (RESP2 rules: nil is `false`, status replies are
/// `{ok=…}`, errors in arrays `{err=…}`).
fn to_lua(reply: Reply) -> Value {
    match reply {
        Frame::Integer(n) => Value::Num(n as f64),
        Frame::BulkString(b) | Frame::Double(b) | Frame::BigNumber(b) => {
            Value::Str(std::rc::Rc::new(b))
        }
        Frame::SimpleString(s) => lua::record("ok", Value::Str(std::rc::Rc::new(s))),
        Frame::SimpleError(s) | Frame::BulkError(s) => {
            lua::record("err", Value::Str(std::rc::Rc::new(s)))
        }
        Frame::Boolean(b) => Value::Bool(b),
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
            lua::array(items.into_iter().map(to_lua).collect())
        }
        Frame::Map(pairs) => lua::array(
            pairs
                .into_iter()
                .flat_map(|(k, v)| [to_lua(k), to_lua(v)])
                .collect(),
        ),
        Frame::NullBulkString | Frame::NullArray | Frame::Null => Value::Bool(false),
        _ => Value::Bool(false),
    }
}

/// A script's return value as a reply.
fn from_lua(value: &Value, client: &Client) -> Reply {
    match value {
        Value::Num(n) => Frame::Integer(*n as i64),
        Value::Str(s) => Frame::BulkString(s.to_vec()),
        Value::Bool(true) => Frame::Integer(1),
        Value::Bool(false) | Value::Nil | Value::Func(_) | Value::Builtin(_) => client.null(),
        Value::Table(t) => {
            let t = t.borrow();
            if let Value::Str(err) = t.field("err") {
                return Frame::SimpleError(err.to_vec());
            }
            if let Value::Str(status) = t.field("ok") {
                return Frame::SimpleString(status.to_vec());
            }
            Frame::Array(t.array.iter().map(|v| from_lua(v, client)).collect())
        }
    }
}

/// A script's error as the server words it: a command's error reply, or the script's own
/// error at `chunk:line`, then which script (`script` is its SHA-1, or a function's name) and
/// the line.
fn failure(text: &str, raised: bool, chunk: &str, script: &str, line: usize) -> Reply {
    let text = if raised {
        text.to_string()
    } else {
        format!("ERR {chunk}:{line}: {text}")
    };
    error(&format!("{text} script: {script}, on @{chunk}:{line}."))
}

/// Runs a script for a client (`run` starts it: a chunk, or a registered function) and
/// turns its end into the reply; `name` is the chunk's name and the script's (its SHA-1,
/// or the function's name) for errors.
fn run_script(
    (node, client, now, read_only): (&mut Node, &mut Client, u64, bool),
    keys: &[&[u8]],
    argv: &[&[u8]],
    (chunk, script): (&str, &str),
    run: impl FnOnce(&mut Interp<'_>) -> Result<Value, String>,
) -> Reply {
    let mut runner = Runner {
        node,
        client,
        now,
        read_only,
        loading: false,
        registered: Vec::new(),
    };
    let mut interp = Interp::new(&mut runner, keys, argv);
    let result = run(&mut interp);
    let (line, raised) = (interp.line(), interp.raised());
    drop(interp);
    match result {
        Ok(value) => from_lua(&value, runner.client),
        Err(text) => failure(&text, raised, chunk, script, line),
    }
}

/// `EVAL script numkeys key … arg …` (and EVAL_RO), or EVALSHA (EVALSHA_RO) of a cached one.
pub(crate) fn eval(node: &mut Node, client: &mut Client, args: &[&[u8]], now: u64) -> Reply {
    let by_sha = args[0].len() >= 7 && args[0][..7].eq_ignore_ascii_case(b"evalsha");
    let read_only = args[0].ends_with(b"_ro") || args[0].ends_with(b"_RO");
    let code = if by_sha {
        match node.scripts.get(args[1]) {
            Some(code) => code,
            None => return error("NOSCRIPT No matching script. Please use EVAL."),
        }
    } else {
        args[1].to_vec()
    };
    let code = code.as_slice();
    let (keys, argv) = match split(&args[2..]) {
        Ok(split) => split,
        Err(reply) => return reply,
    };
    let flags = match shebang(code, false) {
        Ok(shebang) => shebang.map(|s| s.flags).unwrap_or_default(),
        Err(text) => return error(&text),
    };
    if has(&flags, "no-cluster") {
        return error("ERR Can not run script on cluster, 'no-cluster' flag is set.");
    }
    let chunk = match lua::parse(code, "user_script") {
        Ok(chunk) => chunk,
        Err(e) => return error(&format!("ERR Error compiling script (new function): {e}")),
    };
    let sha = node.scripts.add(code);
    let read_only = read_only || has(&flags, "no-writes");
    let script = (node, client, now, read_only);
    run_script(script, keys, argv, ("user_script", &sha), |interp| {
        interp.run(&chunk)
    })
}

/// Loads a library's code: its name and what it registers, with the registered values for
/// a call. The error is the reply.
fn load(
    node: &mut Node,
    client: &mut Client,
    code: &[u8],
    now: u64,
) -> Result<(Vec<u8>, Registered), Reply> {
    let shebang = match shebang(code, true) {
        Ok(Some(shebang)) => shebang,
        Ok(None) => return Err(error("ERR Missing library metadata")),
        Err(text) => return Err(error(&text)),
    };
    let Some(name) = shebang.name else {
        return Err(error("ERR Library name was not given"));
    };
    let chunk = lua::parse(code, "user_function")
        .map_err(|e| error(&format!("ERR Error compiling function: {e}")))?;
    let mut runner = Runner {
        node,
        client,
        now,
        read_only: false,
        loading: true,
        registered: Vec::new(),
    };
    let ran = Interp::new(&mut runner, &[], &[]).run(&chunk);
    if let Err(e) = ran {
        return Err(error(&format!("ERR Error registering functions: {e}")));
    }
    if runner.registered.is_empty() {
        return Err(error("ERR No functions registered"));
    }
    Ok((name, runner.registered))
}

/// Adds a library (replacing one of the same name when `replace`).
fn install(
    node: &mut Node,
    client: &mut Client,
    code: &[u8],
    replace: bool,
    now: u64,
) -> Result<Vec<u8>, Reply> {
    let (name, registered) = load(node, client, code, now)?;
    let existing = node.libraries.iter().position(|l| l.name == name);
    if existing.is_some() && !replace {
        return Err(error(&format!(
            "ERR Library '{}' already exists",
            String::from_utf8_lossy(&name)
        )));
    }
    for (function, _, _) in &registered {
        let clash = node
            .libraries
            .iter()
            .any(|l| l.name != name && l.functions.iter().any(|(n, _)| n == function));
        if clash {
            return Err(error(&format!(
                "ERR Function {} already exists",
                String::from_utf8_lossy(function)
            )));
        }
    }
    let library = Library {
        name: name.clone(),
        code: code.to_vec(),
        functions: registered.into_iter().map(|(n, _, f)| (n, f)).collect(),
    };
    match existing {
        Some(at) => node.libraries[at] = library,
        None => node.libraries.push(library),
    }
    Ok(name)
}

impl Library {
    /// The library's code, as FUNCTION LOAD got it.
    pub(crate) fn code(&self) -> &[u8] {
        &self.code
    }
}

/// Loads a library from an RDB file at start; the error's text.
pub(crate) fn restore(
    node: &mut Node,
    client: &mut Client,
    code: &[u8],
    now: u64,
) -> Result<(), String> {
    match install(node, client, code, false, now) {
        Ok(_) => Ok(()),
        Err(Frame::SimpleError(text)) => Err(String::from_utf8_lossy(&text).into_owned()),
        Err(other) => Err(format!("{other:?}")),
    }
}

/// `FCALL function numkeys key … arg …` (and FCALL_RO).
pub(crate) fn fcall(node: &mut Node, client: &mut Client, args: &[&[u8]], now: u64) -> Reply {
    let read_only = args[0].eq_ignore_ascii_case(b"fcall_ro");
    let (keys, argv) = match split(&args[2..]) {
        Ok(split) => split,
        Err(reply) => return reply,
    };
    let Some((at, flags)) = find(node, args[1]) else {
        return error("ERR Function not found");
    };
    if has(&flags, "no-cluster") {
        return error("ERR Can not run script on cluster, 'no-cluster' flag is set.");
    }
    if read_only && !has(&flags, "no-writes") {
        return error("ERR Can not execute a script with write flag using *_ro command.");
    }
    let code = node.libraries[at].code.clone();
    let registered = match load(node, client, &code, now) {
        Ok((_, registered)) => registered,
        Err(reply) => return reply,
    };
    let Some((_, function, _)) = registered.into_iter().find(|(n, _, _)| n == args[1]) else {
        return error("ERR Function not found");
    };
    let name = String::from_utf8_lossy(args[1]).into_owned();
    let read_only = read_only || has(&flags, "no-writes");
    let script = (node, client, now, read_only);
    run_script(script, keys, argv, ("user_function", &name), |interp| {
        interp.call_value(&function, vec![lua::list(keys), lua::list(argv)])
    })
}

/// FUNCTION LOAD / LIST / DUMP / RESTORE / DELETE / FLUSH / STATS / KILL.
pub(crate) fn function(
    node: &mut Node,
    client: &mut Client,
    sub: &[u8],
    args: &[&[u8]],
    now: u64,
) -> Reply {
    let word = |arg: &[u8], w: &str| arg.eq_ignore_ascii_case(w.as_bytes());
    match (sub.to_ascii_lowercase().as_slice(), args) {
        (b"load", [code]) => match install(node, client, code, false, now) {
            Ok(name) => bulk(&name),
            Err(reply) => reply,
        },
        (b"load", [replace, code]) if word(replace, "replace") => {
            match install(node, client, code, true, now) {
                Ok(name) => bulk(&name),
                Err(reply) => reply,
            }
        }
        (b"list", options) => list(node, client, options),
        (b"dump", []) => {
            let codes = node.libraries.iter().map(|l| l.code.as_slice());
            Frame::BulkString(functions_payload(codes))
        }
        (b"restore", [payload, policy @ ..]) if policy.len() <= 1 => {
            let policy = policy.first().map(|p| p.to_ascii_lowercase());
            let policy = policy.as_deref().unwrap_or(b"append");
            if !matches!(policy, b"append" | b"replace" | b"flush") {
                return error(
                    "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
                );
            }
            let codes = match functions_of(payload) {
                Ok(codes) => codes,
                Err(e) => return error(e.text()),
            };
            // All or nothing: the libraries as they were come back on an error.
            let before = node.libraries.clone();
            if policy == b"flush" {
                node.libraries.clear();
            }
            for code in codes {
                if let Err(reply) = install(node, client, &code, policy == b"replace", now) {
                    node.libraries = before;
                    return reply;
                }
            }
            ok()
        }
        (b"delete", [name]) => match node.libraries.iter().position(|l| l.name == *name) {
            Some(at) => {
                node.libraries.remove(at);
                ok()
            }
            None => error("ERR Library not found"),
        },
        (b"flush", mode) if mode.len() <= 1 => {
            node.libraries.clear();
            ok()
        }
        (b"kill", []) => error("NOTBUSY No scripts in execution right now."),
        (b"stats", []) => {
            let functions: usize = node.libraries.iter().map(|l| l.functions.len()).sum();
            let engine = Frame::Array(vec![
                bulk(b"libraries_count"),
                Frame::Integer(node.libraries.len() as i64),
                bulk(b"functions_count"),
                Frame::Integer(functions as i64),
            ]);
            Frame::Array(vec![
                bulk(b"running_script"),
                client.null(),
                bulk(b"engines"),
                Frame::Array(vec![bulk(b"LUA"), engine]),
            ])
        }
        _ => error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE], in RESP2's flat form.
fn list(node: &Node, client: &Client, options: &[&[u8]]) -> Reply {
    let mut pattern: Option<&[u8]> = None;
    let mut with_code = false;
    let mut rest = options.iter();
    while let Some(option) = rest.next() {
        if option.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if option.eq_ignore_ascii_case(b"libraryname") {
            match rest.next() {
                Some(p) => pattern = Some(p),
                None => return error("ERR library name argument was not given"),
            }
        } else {
            return error(&format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(option)
            ));
        }
    }
    let libraries = node
        .libraries
        .iter()
        .filter(|l| pattern.is_none_or(|p| redis_cluster_proto::route::glob_match(p, &l.name)));
    Frame::Array(
        libraries
            .map(|library| {
                let functions = library
                    .functions
                    .iter()
                    .map(|(name, flags)| {
                        Frame::Array(vec![
                            bulk(b"name"),
                            bulk(name),
                            bulk(b"description"),
                            client.null(),
                            bulk(b"flags"),
                            Frame::Array(flags.iter().map(|f| bulk(f)).collect()),
                        ])
                    })
                    .collect();
                let mut fields = vec![
                    bulk(b"library_name"),
                    bulk(&library.name),
                    bulk(b"engine"),
                    bulk(b"LUA"),
                    bulk(b"functions"),
                    Frame::Array(functions),
                ];
                if with_code {
                    fields.push(bulk(b"library_code"));
                    fields.push(bulk(&library.code));
                }
                Frame::Array(fields)
            })
            .collect(),
    )
}
