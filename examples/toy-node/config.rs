//! The toy node's configuration, read and served as redis-server 7.0.15 does: every parameter
//! of its `CONFIG GET *` (the real server's reply is the table, with its defaults), redis.conf's
//! quoting and `include`, the old names as aliases, `--name value` arguments after the file,
//! the server's error texts, and CONFIG GET / SET / REWRITE on the same table.
//!
//! What a value does to the node is `node.rs`'s business: this file only keeps values. A
//! parameter the toy does not act on is kept all the same and reported by [`Settings::inert`]
//! so that the node can say so once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use redis_cluster_proto::resp::server_limits::{OutputLimit, OutputLimits, parse_memory};
use redis_cluster_proto::resp::{Decoder, Frame};
use redis_cluster_proto::route::glob_match;
use redis_cluster_proto::state::is_hostname;

/// `CONFIG GET *` of a real redis-server 7.0.15: every parameter, in the server's order.
const TABLE: &[u8] = include_bytes!("../../tests/vectors/commands/redis-7.0.15/config-get.resp2");

/// The server whose messages the toy repeats.
pub(crate) const SERVER: &str = "Redis 7.0.15";

/// Old names, answered by CONFIG GET beside the new ones, and the name each stands for.
const ALIASES: &[(&str, &str)] = &[
    ("slaveof", "replicaof"),
    ("slave-read-only", "replica-read-only"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slave-priority", "replica-priority"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
    (
        "cluster-slave-validity-factor",
        "cluster-replica-validity-factor",
    ),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("lua-time-limit", "busy-reply-threshold"),
];

/// Defaults the captured reply does not show, because the capture's server was started with
/// other values (its port, its bind address, `save ""` …). `cluster-enabled` keeps the
/// captured `yes`: the toy node is a cluster node.
const DEFAULTS: &[(&str, &str)] = &[
    ("port", "6379"),
    ("bind", "* -::*"),
    ("save", "3600 1 300 100 60 10000"),
    ("protected-mode", "yes"),
    ("dir", ""),
];

/// Parameters the server accepts but leaves out of `CONFIG GET *`: its debugging knobs, which
/// the suites set.
const HIDDEN: &[(&str, &str)] = &[
    ("key-load-delay", "0"),
    ("loading-process-events-interval-bytes", "2097152"),
    ("rdb-key-save-delay", "0"),
];

/// Directives the server takes in the file and drops without a word.
const DEPRECATED: &[&str] = &[
    "list-max-ziplist-entries",
    "list-max-ziplist-value",
    "lua-replicate-commands",
];

/// The choices of each enumerated parameter, in the order the server lists them.
const ENUMS: &[(&str, &[&str])] = &[
    ("loglevel", &["debug", "verbose", "notice", "warning"]),
    ("repl-diskless-load", &["disabled", "on-empty-db", "swapdb"]),
    ("supervised", &["upstart", "systemd", "auto", "no"]),
    (
        "syslog-facility",
        &[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ],
    ),
    (
        "maxmemory-policy",
        &[
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "noeviction",
        ],
    ),
    ("appendfsync", &["everysec", "always", "no"]),
    ("oom-score-adj", &["no", "yes", "relative", "absolute"]),
    ("acl-pubsub-default", &["allchannels", "resetchannels"]),
    ("sanitize-dump-payload", &["no", "yes", "clients"]),
    (
        "cluster-preferred-endpoint-type",
        &["ip", "hostname", "unknown-endpoint"],
    ),
    (
        "propagation-error-behavior",
        &["ignore", "panic", "panic-on-replicas"],
    ),
    ("enable-protected-configs", &["no", "yes", "local"]),
    ("enable-debug-command", &["no", "yes", "local"]),
    ("enable-module-command", &["no", "yes", "local"]),
    ("tls-auth-clients", &["no", "yes", "optional"]),
    (
        "shutdown-on-sigint",
        &["default", "save", "nosave", "now", "force"],
    ),
    (
        "shutdown-on-sigterm",
        &["default", "save", "nosave", "now", "force"],
    ),
];

/// Parameters held in bytes, written with a unit or without (`1gb`, `64mb`, `100`).
const MEMORY: &[&str] = &[
    "maxmemory",
    "maxmemory-clients",
    "client-query-buffer-limit",
    "proto-max-bulk-len",
    "repl-backlog-size",
    "auto-aof-rewrite-min-size",
    "active-defrag-ignore-bytes",
    "stream-node-max-bytes",
    "cluster-link-sendbuf-limit",
    "hash-max-listpack-value",
    "zset-max-listpack-value",
    "hll-sparse-max-bytes",
];

/// Parameters CONFIG SET refuses: read once, at start.
const IMMUTABLE: &[&str] = &[
    "daemonize",
    "supervised",
    "pidfile",
    "databases",
    "cluster-enabled",
    "cluster-config-file",
    "cluster-port",
    "unixsocket",
    "unixsocketperm",
    "logfile",
    "syslog-enabled",
    "syslog-ident",
    "syslog-facility",
    "io-threads",
    "io-threads-do-reads",
    "always-show-logo",
    "tcp-backlog",
    "aclfile",
    "appenddirname",
    "disable-thp",
    "set-proc-title",
    "enable-protected-configs",
    "enable-debug-command",
    "enable-module-command",
];

/// Parameters CONFIG SET changes only with `enable-protected-configs yes`.
const PROTECTED: &[&str] = &["dir", "dbfilename", "appendfilename"];

/// What the toy node acts on; every other parameter is kept and answered but has no effect.
const ACTED_ON: &[&str] = &[
    "port",
    "bind",
    "dir",
    "logfile",
    "loglevel",
    "pidfile",
    "daemonize",
    "always-show-logo",
    "requirepass",
    "cluster-enabled",
    "cluster-port",
    "cluster-config-file",
    "cluster-node-timeout",
    "cluster-announce-hostname",
    "cluster-preferred-endpoint-type",
    "cluster-require-full-coverage",
    "cluster-allow-reads-when-down",
    "cluster-allow-pubsubshard-when-down",
    "cluster-replica-validity-factor",
    "cluster-migration-barrier",
    "cluster-allow-replica-migration",
    "cluster-replica-no-failover",
    "databases",
    "maxclients",
    "timeout",
    "enable-debug-command",
    "enable-protected-configs",
    "enable-module-command",
    "replicaof",
    "save",
    "dbfilename",
    "appendonly",
    "appendfsync",
    "appendfilename",
];

/// How a parameter's value is checked and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Int,
    Memory,
    Enum(&'static [&'static str]),
    /// One word, any text.
    Text,
    /// Several words kept as one space-separated value (`save`, `bind`,
    /// `client-output-buffer-limit` …).
    Words,
}

#[derive(Debug, Clone)]
struct Param {
    name: String,
    kind: Kind,
    default: String,
    value: String,
}

/// The node's configuration: every parameter's value, and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    params: Vec<Param>,
    /// Every name, aliases included, in CONFIG GET * order, with its index in `params`.
    names: Vec<(String, usize)>,
    by_name: HashMap<String, usize>,
    /// The configuration file the node started from, for CONFIG REWRITE.
    file: Option<PathBuf>,
    /// Directives of the file that are not parameters (`include`, `rename-command` …), kept
    /// for REWRITE.
    extra: Vec<String>,
    /// A `save` line was read: the next one adds to it.
    saves_read: bool,
}

/// The parameter names and values of the captured `CONFIG GET *`.
fn captured() -> Vec<(String, String)> {
    let mut buf = bytes::BytesMut::from(TABLE);
    let mut pairs = Vec::new();
    if let Ok(Some(Frame::Array(items))) = Decoder::new().decode(&mut buf) {
        let words: Vec<String> = items
            .into_iter()
            .filter_map(|item| match item {
                Frame::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                _ => None,
            })
            .collect();
        for pair in words.chunks_exact(2) {
            pairs.push((pair[0].clone(), pair[1].clone()));
        }
    }
    pairs
}

fn kind_of(name: &str, default: &str) -> Kind {
    if let Some((_, choices)) = ENUMS.iter().find(|(n, _)| *n == name) {
        return Kind::Enum(choices);
    }
    if MEMORY.contains(&name) {
        return Kind::Memory;
    }
    match name {
        "save"
        | "bind"
        | "client-output-buffer-limit"
        | "oom-score-adj-values"
        | "latency-tracking-info-percentiles"
        | "replicaof" => return Kind::Words,
        // Octal, or a set of flags: any word.
        "unixsocketperm" | "notify-keyspace-events" => return Kind::Text,
        _ => {}
    }
    if default == "yes" || default == "no" {
        Kind::Bool
    } else if default.parse::<i64>().is_ok() {
        Kind::Int
    } else {
        Kind::Text
    }
}

/// Why a value is refused, in the server's words.
fn check(kind: Kind, name: &str, words: &[String]) -> Result<String, String> {
    if kind != Kind::Words && words.len() != 1 {
        return Err("wrong number of arguments".into());
    }
    let word = words.first().map_or("", String::as_str);
    match kind {
        Kind::Bool => match word.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.to_string()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int => {
            let n: i64 = word
                .parse()
                .map_err(|_| String::from("argument couldn't be parsed into an integer"))?;
            let range = match name {
                "port"
                | "cluster-port"
                | "tls-port"
                | "cluster-announce-port"
                | "cluster-announce-bus-port"
                | "cluster-announce-tls-port"
                | "replica-announce-port" => Some((0, 65535)),
                "databases" | "hz" | "maxclients" => Some((1, i64::from(i32::MAX))),
                "cluster-node-timeout" | "timeout" | "cluster-migration-barrier" => {
                    Some((0, i64::MAX))
                }
                _ => None,
            };
            match range {
                Some((lo, hi)) if n < lo || n > hi => {
                    Err(format!("argument must be between {lo} and {hi} inclusive"))
                }
                _ => Ok(n.to_string()),
            }
        }
        // maxmemory-clients may be a share of maxmemory.
        Kind::Memory
            if name == "maxmemory-clients"
                && word
                    .strip_suffix('%')
                    .is_some_and(|p| p.parse::<u32>().is_ok()) =>
        {
            Ok(word.to_string())
        }
        Kind::Memory => {
            let n = parse_memory(word)
                .ok_or_else(|| String::from("argument must be a memory value"))?;
            // The server's bounds on the input limits (1 MiB at least). The toy keeps every
            // memory value within i64.
            let lo = match name {
                "client-query-buffer-limit" | "proto-max-bulk-len" => 1 << 20,
                _ => 0,
            };
            if n < lo || i64::try_from(n).is_err() {
                return Err(format!(
                    "argument must be between {lo} and {} inclusive",
                    i64::MAX
                ));
            }
            Ok(n.to_string())
        }
        Kind::Enum(choices) => {
            let lower = word.to_ascii_lowercase();
            // The shutdown flags may be several, one space apart.
            let several = name.starts_with("shutdown-on-sig");
            let ok = if several {
                lower.split(' ').all(|w| choices.contains(&w))
            } else {
                choices.contains(&lower.as_str())
            };
            if ok {
                Ok(lower)
            } else {
                Err(format!(
                    "argument(s) must be one of the following: {}",
                    choices.join(", ")
                ))
            }
        }
        Kind::Text if name == "cluster-announce-hostname" && word.len() >= 256 => {
            Err("Hostnames must be less than 256 characters".into())
        }
        Kind::Text if name == "cluster-announce-hostname" => {
            if is_hostname(word.as_bytes()) {
                Ok(word.to_string())
            } else {
                Err("Hostnames may only contain alphanumeric characters, hyphens or dots".into())
            }
        }
        Kind::Text => Ok(word.to_string()),
        Kind::Words => words_value(name, words),
    }
}

fn words_value(name: &str, words: &[String]) -> Result<String, String> {
    if name == "client-output-buffer-limit" {
        // The server joins a file line's words with one space; CONFIG SET's one argument is
        // taken as it is, split at each single space.
        let value = words.join(" ");
        let mut limits = OutputLimits::DEFAULT;
        limits.apply(&value).map_err(|e| e.to_string())?;
        return Ok(value);
    }
    // CONFIG SET passes the words as one argument; the file passes them apart.
    let words: Vec<&str> = words.iter().flat_map(|w| w.split_whitespace()).collect();
    let ints = |what: &str| -> Result<(), String> {
        for w in &words {
            w.parse::<i64>()
                .map_err(|_| format!("Invalid {what} parameters"))?;
        }
        Ok(())
    };
    match name {
        "save" => {
            if words.len() % 2 != 0 {
                return Err("Invalid save parameters".into());
            }
            ints("save")?;
        }
        "oom-score-adj-values" => {
            if words.len() != 3 {
                return Err("Invalid oom-score-adj-values".into());
            }
            ints("oom-score-adj-values")?;
        }
        "replicaof" => {
            let ok = words.is_empty()
                || (words.len() == 2
                    && (words[1].parse::<u16>().is_ok()
                        || words.iter().all(|w| {
                            w.eq_ignore_ascii_case("no") || w.eq_ignore_ascii_case("one")
                        })));
            if !ok {
                return Err("wrong number of arguments".into());
            }
        }
        _ => {}
    }
    Ok(words.join(" "))
}

/// `current` (a value as CONFIG GET shows it) with the classes `new` names replaced, written
/// as CONFIG GET shows it. `new` has been checked.
fn merged_output_limits(current: &str, new: &str) -> String {
    let mut limits = output_limits_of(current);
    // Checked by `words_value`: a refusal leaves `current`'s limits.
    let _ = limits.apply(new);
    limits.to_string()
}

/// The limits a stored value (CONFIG GET's form, always valid) sets.
fn output_limits_of(value: &str) -> OutputLimits {
    let mut limits = OutputLimits::DEFAULT;
    let _ = limits.apply(value);
    limits
}

/// The limit of `client`'s class: pub/sub once it has subscribed, else normal. (A replica's
/// connection leaves the client loop at PSYNC.)
pub(crate) fn class_limit(limits: &OutputLimits, client: &crate::commands::Client) -> OutputLimit {
    match client.inbox {
        Some(_) => limits.pubsub,
        None => limits.normal,
    }
}
impl Settings {
    /// `client-output-buffer-limit`, as it is now.
    pub(crate) fn output_limits(&self) -> OutputLimits {
        output_limits_of(self.get("client-output-buffer-limit").unwrap_or(""))
    }
}

/// Splits a configuration line into words as redis.conf is read: blanks separate words,
/// `"…"` takes the escapes `\n \r \t \b \a \\ \" \xHH`, `'…'` takes `\'`, and a closing quote
/// must end the word. `None` when the quotes do not balance.
pub(crate) fn split_args(line: &str) -> Option<Vec<String>> {
    let bytes = line.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == bytes.len() {
            return Some(words);
        }
        let mut word = Vec::new();
        let mut quote = None::<u8>;
        loop {
            let Some(&c) = bytes.get(i) else {
                if quote.is_some() {
                    return None;
                }
                break;
            };
            match quote {
                Some(b'"') => {
                    if c == b'\\' && i + 3 < bytes.len() && bytes[i + 1] == b'x' {
                        let hex = std::str::from_utf8(&bytes[i + 2..i + 4]).ok();
                        if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                            word.push(b);
                            i += 4;
                            continue;
                        }
                    }
                    if c == b'\\' && i + 1 < bytes.len() {
                        word.push(match bytes[i + 1] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            other => other,
                        });
                        i += 2;
                        continue;
                    }
                    if c == b'"' {
                        if bytes.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    word.push(c);
                }
                Some(_) => {
                    if c == b'\\' && bytes.get(i + 1) == Some(&b'\'') {
                        word.push(b'\'');
                        i += 2;
                        continue;
                    }
                    if c == b'\'' {
                        if bytes.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    word.push(c);
                }
                None => match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' | b'\'' => quote = Some(c),
                    _ => word.push(c),
                },
            }
            i += 1;
        }
        words.push(String::from_utf8_lossy(&word).into_owned());
    }
}

/// A word in double quotes with the escapes redis.conf reads back (the server's `sdscatrepr`).
fn repr(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An OS error as the server's `strerror` words it, without Rust's "(os error N)".
pub(crate) fn os_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// The fatal error of a bad configuration line, as the server prints it before it exits.
fn fatal(line_no: usize, line: &str, reason: &str) -> String {
    format!(
        "\n*** FATAL CONFIG FILE ERROR ({SERVER}) ***\nReading the configuration file, at line \
         {line_no}\n>>> '{line}'\n{reason}"
    )
}

impl Settings {
    /// The server's defaults.
    pub(crate) fn new() -> Self {
        let mut params: Vec<Param> = Vec::new();
        let mut names = Vec::new();
        let mut by_name = HashMap::new();
        let alias_of = |name: &str| ALIASES.iter().find(|(a, _)| *a == name).map(|(_, c)| *c);
        let mut captured = captured();
        captured.extend(HIDDEN.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        // Canonical names first, so that aliases find them.
        for (name, value) in captured.iter().filter(|(n, _)| alias_of(n).is_none()) {
            let default = DEFAULTS
                .iter()
                .find(|(n, _)| n == name)
                .map_or(value.as_str(), |(_, v)| v);
            by_name.insert(name.clone(), params.len());
            params.push(Param {
                name: name.clone(),
                kind: kind_of(name, default),
                default: default.to_string(),
                value: default.to_string(),
            });
        }
        for (name, _) in &captured {
            let canonical = alias_of(name).unwrap_or(name);
            if let Some(&at) = by_name.get(canonical) {
                by_name.insert(name.clone(), at);
                if !HIDDEN.iter().any(|(n, _)| n == name) {
                    names.push((name.clone(), at));
                }
            }
        }
        Self {
            params,
            names,
            by_name,
            file: None,
            extra: Vec::new(),
            saves_read: false,
        }
    }

    /// The configuration of a server started as `redis-server [FILE] [--name value …]`: the
    /// file (with its `include`s), then the arguments, each `--name` with the words up to
    /// the next `--`. The error is the server's fatal message.
    pub(crate) fn load(args: &[String]) -> Result<Self, String> {
        let mut settings = Self::new();
        let mut text = String::new();
        let mut rest = args;
        if let Some(file) = rest.first().filter(|a| !a.starts_with("--")) {
            text = std::fs::read_to_string(file).map_err(|e| {
                format!(
                    "Fatal error, can't open config file '{file}': {}",
                    os_reason(&e)
                )
            })?;
            settings.file = Some(PathBuf::from(file));
            rest = &rest[1..];
        }
        // As the server does, the arguments become lines after the file's and a blank one,
        // each word quoted, so that line numbers and the quoted line match its errors.
        let mut args_text = String::new();
        for arg in rest {
            if let Some(name) = arg.strip_prefix("--") {
                if !args_text.is_empty() {
                    args_text.push('\n');
                }
                args_text.push_str(name);
            } else {
                args_text.push(' ');
                args_text.push_str(&repr(arg));
            }
        }
        text.push('\n');
        text.push_str(&args_text);
        settings.read(&text, 0)?;
        Ok(settings)
    }

    fn read(&mut self, text: &str, depth: usize) -> Result<(), String> {
        for (n, raw) in text.split('\n').enumerate() {
            let line = raw.trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'));
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some(mut words) = split_args(line) else {
                return Err(fatal(
                    n + 1,
                    line,
                    "Unbalanced quotes in configuration line",
                ));
            };
            if words.is_empty() {
                continue;
            }
            let name = words.remove(0).to_ascii_lowercase();
            match name.as_str() {
                "include" if words.len() == 1 => {
                    if depth > 16 {
                        return Err(fatal(n + 1, line, "Too many nested includes"));
                    }
                    let included = std::fs::read_to_string(&words[0]).map_err(|e| {
                        format!(
                            "Fatal error, can't open config file '{}': {}",
                            words[0],
                            os_reason(&e)
                        )
                    })?;
                    self.read(&included, depth + 1)?;
                    self.extra.push(line.to_string());
                    continue;
                }
                "rename-command" | "user" | "loadmodule" => {
                    self.extra.push(line.to_string());
                    continue;
                }
                d if DEPRECATED.contains(&d) => continue,
                _ => {}
            }
            let Some(&at) = self.by_name.get(&name) else {
                return Err(fatal(
                    n + 1,
                    line,
                    "Bad directive or wrong number of arguments",
                ));
            };
            if name == "dir" {
                if let Some(dir) = words.first() {
                    std::fs::read_dir(dir).map_err(|e| fatal(n + 1, line, &os_reason(&e)))?;
                }
            }
            let param = &mut self.params[at];
            let mut value =
                check(param.kind, &param.name, &words).map_err(|e| fatal(n + 1, line, &e))?;
            if param.name == "client-output-buffer-limit" {
                value = merged_output_limits(&param.value, &value);
            }
            // `save` lines add up; the first one read replaces the default.
            if param.name == "save" {
                if self.saves_read && !value.is_empty() && !param.value.is_empty() {
                    value = format!("{} {value}", param.value);
                }
                self.saves_read = true;
            }
            param.value = value;
        }
        Ok(())
    }

    /// A parameter's value (by any of its names).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        let at = *self.by_name.get(name)?;
        Some(&self.params[at].value)
    }

    /// A boolean parameter.
    pub(crate) fn flag(&self, name: &str) -> bool {
        self.get(name) == Some("yes")
    }

    /// A numeric parameter (0 when it is not one).
    pub(crate) fn number(&self, name: &str) -> i64 {
        self.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// Sets a value without checking it: the node's own bookkeeping (`dir` made absolute).
    pub(crate) fn put(&mut self, name: &str, value: &str) {
        if let Some(&at) = self.by_name.get(name) {
            self.params[at].value = value.to_string();
        }
    }

    /// The file the node started from.
    pub(crate) fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The parameters set to something else than their default that the toy does not act
    /// on, by their canonical names.
    pub(crate) fn inert(&self) -> Vec<(&str, &str)> {
        self.params
            .iter()
            .filter(|p| p.value != p.default && !ACTED_ON.contains(&p.name.as_str()))
            .map(|p| (p.name.as_str(), p.value.as_str()))
            .collect()
    }

    /// CONFIG GET: every name (aliases included) that one of `patterns` matches (without
    /// case), once, with its value.
    pub(crate) fn config_get(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        // As the server: patterns in order, each name once (without case), the first to
        // find it naming it; a pattern without a wildcard is looked up (hidden names too)
        // and answered under the name as it was given.
        let mut out: Vec<(String, String)> = Vec::new();
        let mut add = |name: &str, value: &str| {
            if !out.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                out.push((name.to_string(), value.to_string()));
            }
        };
        for pattern in patterns {
            if pattern.iter().any(|b| b"[*?".contains(b)) {
                let pattern = pattern.to_ascii_lowercase();
                for (name, at) in &self.names {
                    if glob_match(&pattern, name.as_bytes()) {
                        add(name, &self.params[*at].value);
                    }
                }
            } else {
                let given = String::from_utf8_lossy(pattern);
                if let Some(&at) = self.by_name.get(&given.to_ascii_lowercase()) {
                    add(&given, &self.params[at].value);
                }
            }
        }
        out
    }

    /// CONFIG SET of name-value pairs, all or none: the canonical names changed, or the
    /// server's error line.
    pub(crate) fn config_set(&mut self, pairs: &[(&[u8], &[u8])]) -> Result<Vec<String>, String> {
        let mut staged: Vec<(usize, String)> = Vec::new();
        for (name, value) in pairs {
            let name = String::from_utf8_lossy(name).to_ascii_lowercase();
            let failed = |why: &str| {
                format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
            };
            let Some(&at) = self.by_name.get(&name) else {
                return Err(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                ));
            };
            if staged.iter().any(|(a, _)| *a == at) {
                return Err(failed("duplicate parameter"));
            }
            let param = &self.params[at];
            if IMMUTABLE.contains(&param.name.as_str()) {
                return Err(failed("can't set immutable config"));
            }
            if PROTECTED.contains(&param.name.as_str()) && !self.flag("enable-protected-configs") {
                return Err(failed("can't set protected config"));
            }
            let words = vec![String::from_utf8_lossy(value).into_owned()];
            let mut value = check(param.kind, &param.name, &words).map_err(|e| failed(&e))?;
            if param.name == "client-output-buffer-limit" {
                value = merged_output_limits(&param.value, &value);
            }
            staged.push((at, value));
        }
        let mut changed = Vec::new();
        for (at, value) in staged {
            self.params[at].value = value;
            changed.push(self.params[at].name.clone());
        }
        Ok(changed)
    }

    /// CONFIG REWRITE: the file the node started from, with each line of a parameter set to
    /// its value now (the first line of a name; later ones dropped), other lines kept, and
    /// the parameters set away from their defaults that the file did not name appended. The
    /// server's way: a temporary file, fsynced, renamed over the old one.
    pub(crate) fn rewrite(&self) -> Result<(), String> {
        let Some(path) = &self.file else {
            return Err("ERR The server is running without a config file".into());
        };
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let mut written = vec![false; self.params.len()];
        let mut lines = Vec::new();
        for raw in old.split('\n') {
            let line = raw.trim();
            if line == "# Generated by CONFIG REWRITE" {
                continue;
            }
            let name = split_args(line)
                .and_then(|w| w.into_iter().next())
                .map(|w| w.to_ascii_lowercase());
            let at = name
                .filter(|_| !line.starts_with('#'))
                .and_then(|n| self.by_name.get(&n).copied());
            match at {
                Some(at) if written[at] => {}
                Some(at) => {
                    written[at] = true;
                    lines.push(self.line(at));
                }
                None if line.is_empty() && lines.last().is_some_and(String::is_empty) => {}
                None => lines.push(raw.trim_end_matches('\r').to_string()),
            }
        }
        while lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        let mut appended = false;
        for (at, param) in self.params.iter().enumerate() {
            if written[at]
                || param.value == param.default
                || HIDDEN.iter().any(|(n, _)| *n == param.name)
            {
                continue;
            }
            if !appended {
                lines.push(String::new());
                lines.push("# Generated by CONFIG REWRITE".into());
                appended = true;
            }
            lines.push(self.line(at));
        }
        let mut text = lines.join("\n");
        text.push('\n');
        write_durably(path, text.as_bytes()).map_err(|e| format!("ERR Rewriting config file: {e}"))
    }

    /// One parameter as redis.conf lines, as the server rewrites it: `save` one line a pair,
    /// memory values in the largest unit that divides them, strings quoted.
    fn line(&self, at: usize) -> String {
        let param = &self.params[at];
        match param.kind {
            Kind::Words if param.name == "save" && !param.value.is_empty() => {
                let words: Vec<&str> = param.value.split(' ').collect();
                let lines: Vec<String> = words
                    .chunks(2)
                    .map(|pair| format!("save {}", pair.join(" ")))
                    .collect();
                lines.join("\n")
            }
            Kind::Memory if param.value.ends_with('%') => {
                format!("{} {}", param.name, param.value)
            }
            Kind::Memory => {
                let bytes: i64 = param.value.parse().unwrap_or(0);
                let units = [(1 << 30, "gb"), (1 << 20, "mb"), (1 << 10, "kb")];
                let unit = units
                    .iter()
                    .find(|(size, _)| bytes != 0 && bytes % size == 0);
                match unit {
                    Some((size, name)) => format!("{} {}{name}", param.name, bytes / size),
                    None => format!("{} {bytes}", param.name),
                }
            }
            Kind::Words if param.value.is_empty() => format!("{} \"\"", param.name),
            Kind::Words => format!("{} {}", param.name, param.value),
            Kind::Text => format!("{} {}", param.name, repr(&param.value)),
            _ => format!("{} {}", param.name, param.value),
        }
    }
}

/// Writes `bytes` to `path` as the server writes nodes.conf and its config file: to a
/// temporary file beside it, fsynced, renamed over the old one, and the directory fsynced, so
/// that a crash leaves the old file or the new one, never a part.
pub(crate) fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)?.sync_all()
}
