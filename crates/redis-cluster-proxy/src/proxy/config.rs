//! The proxy's configuration file: TOML, one `[[pool]]` table per pool, each on its own
//! listen address, as twemproxy has them; or nutcracker's YAML file, whose pools may also
//! be of our kinds (a `kind:` key, then the keys of a TOML pool).
//!
//! ```toml
//! [[pool]]
//! name = "cache"
//! kind = "cluster"                 # the default; also "sentinel" and "static"
//! listen = "127.0.0.1:7400"
//! seeds = ["127.0.0.1:7000", "127.0.0.1:7001"]
//! timeout_ms = 1000                # a backend reply later than this fails the connection
//! read_from = "master"             # or "replica": reads go to replicas (after READONLY)
//! password = "secret"              # optional: AUTH on every backend connection
//! maxclients = 10000               # the default, the server's: more are refused
//! client_timeout = 0               # seconds idle before a client is closed (0: never)
//! proto_max_bulk_len = "512mb"     # the longest argument (bytes, or with the server's units)
//! client_query_buffer_limit = "1gb" # a client with more unparsed than this is closed
//! client_output_buffer_limit = "pubsub 32mb 8mb 60" # a subscriber that lets more pile up
//!
//! [[pool]]
//! name = "sessions"
//! kind = "sentinel"
//! listen = "127.0.0.1:7401"
//! sentinels = ["127.0.0.1:26379", "127.0.0.1:26380", "127.0.0.1:26381"]
//! groups = [{ name = "g1", slots = "0-8191" }, { name = "g2", slots = "8192-16383" }]
//!
//! [[pool]]
//! name = "plain"
//! kind = "static"                  # fixed standalone servers, sharded by slot ranges
//! listen = "127.0.0.1:7402"
//! servers = [{ address = "127.0.0.1:6379", slots = "0-16383" }]
//! ```

use std::time::Duration;

use redis_cluster_proto::resp::server_limits::{OutputLimit, OutputLimits, parse_memory};
use redis_cluster_proto::route::ReadFrom;
use yaml_rust2::{Yaml, YamlLoader};

use redis_cluster_proto::route::twemproxy::{Distribution, Hash};

/// What a client connection reads at a time unless `-m` says otherwise (nutcracker's mbuf).
const DEFAULT_READ_BUFFER: usize = 16 * 1024;

/// A pool's listen queue unless `backlog:` says otherwise (nutcracker's default).
const DEFAULT_BACKLOG: u32 = 512;

/// The whole file.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// The pools, in file order.
    pub(crate) pools: Vec<PoolConfig>,
    /// How much a client connection reads at a time (the command line's `-m`).
    pub(crate) read_buffer: usize,
}

/// One pool.
#[derive(Clone, Debug)]
pub(crate) struct PoolConfig {
    /// Its name, for logs and stats.
    pub(crate) name: String,
    /// Where clients connect (`host:port`; port 0 picks a free one).
    pub(crate) listen: String,
    /// What is behind it.
    pub(crate) kind: PoolKind,
    /// How long a backend may take to answer before its connection is dropped.
    pub(crate) timeout: Duration,
    /// Sent with AUTH on every backend connection.
    pub(crate) password: Option<String>,
    /// The listen queue's length (nutcracker's `backlog:`, default 512).
    pub(crate) backlog: u32,
    /// How many clients may be connected at once (`maxclients`, 10 000 by default as on the
    /// server; nutcracker's `client_connections:`, none by default); `None` for no limit.
    pub(crate) maxclients: Option<u64>,
    /// How long a client may stay idle before it is closed (`client_timeout`, seconds, as
    /// the server's `timeout`); `None` for never.
    pub(crate) client_timeout: Option<Duration>,
    /// What one client may send and leave unread.
    pub(crate) limits: ClientLimits,
}

/// The server's `maxclients` default.
const DEFAULT_MAXCLIENTS: u64 = 10_000;

/// What one client may send and leave unread, by the server's knobs, with its defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClientLimits {
    /// `proto_max_bulk_len`: the longest argument of a command (512 MB). Past it the client
    /// gets a protocol error and is closed.
    pub(crate) max_bulk_len: u64,
    /// `client_query_buffer_limit`: how much a client may have sent that is not yet a whole
    /// command (1 GB). Past it the client is closed without a reply, as the server does.
    pub(crate) query_buffer: u64,
    /// The `pubsub` class of `client_output_buffer_limit`: how many bytes of messages a
    /// subscriber may leave unread (32 MB at once, or 8 MB for 60 seconds).
    pub(crate) pubsub: OutputLimit,
}

impl Default for ClientLimits {
    fn default() -> Self {
        // The server's `proto-max-bulk-len` and `client-query-buffer-limit`, as the decoder's
        // own defaults have them.
        let server = redis_cluster_proto::resp::Limits::DEFAULT;
        Self {
            max_bulk_len: server.max_bulk_len,
            query_buffer: server.max_frame_len as u64,
            pubsub: OutputLimits::DEFAULT.pubsub,
        }
    }
}

/// The least the server takes for `proto-max-bulk-len` and `client-query-buffer-limit`.
const MIN_INPUT_LIMIT: u64 = 1 << 20;

/// A memory value of the TOML file: a number of bytes, or a string with a unit.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum TomlMemory {
    Bytes(u64),
    Text(String),
}

impl TomlMemory {
    /// Its bytes; `key` names it in the error.
    fn bytes(&self, key: &str) -> Result<u64, String> {
        match self {
            Self::Bytes(n) => Ok(*n),
            Self::Text(text) => parse_memory(text).ok_or_else(|| {
                format!(
                    "`{key}` = \"{text}\" is not a memory value (bytes, or digits with b, k, \
                     kb, m, mb, g or gb)"
                )
            }),
        }
    }
}

/// An input limit (`proto_max_bulk_len`, `client_query_buffer_limit`): 1 MB at least, as on
/// the server; `default` when it is not set.
fn input_limit(value: Option<&TomlMemory>, key: &str, default: u64) -> Result<u64, String> {
    let Some(value) = value else {
        return Ok(default);
    };
    let bytes = value.bytes(key)?;
    if bytes < MIN_INPUT_LIMIT {
        return Err(format!(
            "`{key}` must be {MIN_INPUT_LIMIT} bytes (1mb) or more, as on the server"
        ));
    }
    Ok(bytes)
}

/// `client_output_buffer_limit`: the server's words, `class hard soft seconds` once or more,
/// read as a line of redis.conf is. The `pubsub` class is applied; `replica` (or `slave`) is
/// taken and has nothing to bind, the proxy having no replicas; `normal` must be `0 0 0`: the
/// proxy stops reading a client that does not read its replies long before any limit would
/// close it.
fn output_limits(text: &str, pubsub: OutputLimit) -> Result<OutputLimit, String> {
    const KEY: &str = "`client_output_buffer_limit`";
    // The server joins a line's words with one space, and splits the value at each.
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() {
        return Err(format!(
            "{KEY} must be \"class hard soft seconds\", once or more (as the server's)"
        ));
    }
    let mut limits = OutputLimits {
        pubsub,
        ..OutputLimits::DEFAULT
    };
    limits
        .apply(&words.join(" "))
        .map_err(|e| format!("{KEY} = \"{text}\": {e}"))?;
    if limits.normal.hard != 0 || limits.normal.soft != 0 {
        return Err(format!(
            "{KEY}: the normal class must be \"normal 0 0 0\": a client that does not read \
             its replies stops being read instead"
        ));
    }
    Ok(limits.pubsub)
}

/// What a pool fronts.
#[derive(Clone, Debug)]
pub(crate) enum PoolKind {
    /// A Redis Cluster, found from its seed nodes.
    Cluster {
        /// `host:port` of nodes to ask for the slot map, in order.
        seeds: Vec<String>,
        /// Where reads go.
        read_from: ReadFrom,
    },
    /// Fixed standalone servers, sharded by slot ranges: groups whose masters never move.
    Static {
        /// Each server: its address and its slots (first, last).
        servers: Vec<(String, u16, u16)>,
    },
    /// A nutcracker (twemproxy) pool from its YAML file: servers picked by its hash and
    /// distribution.
    Twemproxy(Twemproxy),
    /// Sentinel-managed masters, sharded by slot ranges.
    Sentinel {
        /// `host:port` of the Sentinels, in the order they are tried.
        sentinels: Vec<String>,
        /// Each group: its master name and its slots (first, last).
        groups: Vec<(String, u16, u16)>,
    },
}

/// Why a configuration was refused; the text names the pool and the key.
#[derive(Debug)]
pub(crate) struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// A nutcracker pool's settings (the keys of its YAML file).
#[derive(Clone, Debug)]
pub(crate) struct Twemproxy {
    /// `servers:`: `host:port`, weight, and the name its ketama points use.
    pub(crate) servers: Vec<TwemServer>,
    pub(crate) hash: Hash,
    pub(crate) distribution: Distribution,
    /// `hash_tag:` (two characters).
    pub(crate) hash_tag: Option<[u8; 2]>,
    /// `redis_db:`: SELECTed on every server connection.
    pub(crate) redis_db: u32,
    /// `auto_eject_hosts:` (default false): take failing servers off the continuum.
    pub(crate) auto_eject_hosts: bool,
    /// `server_failure_limit:` (default 2): failures in a row that eject a server.
    pub(crate) server_failure_limit: u32,
    /// `server_retry_timeout:` (default 30 s): how long an ejected server stays out.
    pub(crate) server_retry_timeout: Duration,
    /// `preconnect:` (default false): connect to every server at start-up.
    pub(crate) preconnect: bool,
}

/// One `servers:` line: `host:port:weight [name]`.
#[derive(Clone, Debug)]
pub(crate) struct TwemServer {
    pub(crate) address: String,
    pub(crate) weight: u32,
    /// Its name, else `host:port` (`host` alone on port 11211), as nutcracker names it.
    pub(crate) name: String,
}

/// The two formats of a configuration file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// Our `[[pool]]` tables.
    Toml,
    /// nutcracker's file: a mapping of pool names.
    Yaml,
}

impl Format {
    /// The format of the file at `path`: told by its extension (`.toml`; `.yml` or `.yaml`),
    /// and only for a file without one of those by which of the two `text` parses as.
    pub(crate) fn of(path: &std::path::Path, text: &str) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => Self::Toml,
            Some("yml" | "yaml") => Self::Yaml,
            _ if Config::is_toml(text) => Self::Toml,
            _ => Self::Yaml,
        }
    }
}

impl Config {
    /// Reads a configuration file's text whose name did not say its format: nutcracker's YAML
    /// (a mapping of pool names) or our TOML (`[[pool]]` tables), told apart by which one
    /// parses.
    #[allow(dead_code)] // the interop tests read texts with it
    pub(crate) fn load(text: &str) -> Result<Self, ConfigError> {
        let format = if Self::is_toml(text) {
            Format::Toml
        } else {
            Format::Yaml
        };
        Self::load_as(format, text)
    }

    /// Reads a configuration file's text in `format`.
    pub(crate) fn load_as(format: Format, text: &str) -> Result<Self, ConfigError> {
        match format {
            Format::Toml => Self::parse(text),
            Format::Yaml => Self::parse_yaml(text),
        }
    }

    /// Whether `text` is our TOML (with `[[pool]]` tables) rather than nutcracker's YAML. A
    /// line that starts a `[[pool]]` table says TOML even where the rest does not parse (in
    /// YAML it would be a list, never nutcracker's mapping of pools), so that a broken file's
    /// error is TOML's.
    pub(crate) fn is_toml(text: &str) -> bool {
        text.lines()
            .any(|line| line.trim_start().starts_with("[[pool]]"))
            || text
                .parse::<toml::Table>()
                .is_ok_and(|t| t.contains_key("pool"))
    }

    /// Reads nutcracker's YAML: each top-level key a pool, with its keys (`listen`, `hash`,
    /// `hash_tag`, `distribution`, `timeout`, `redis`, `redis_auth`, `redis_db`, `servers`,
    /// `auto_eject_hosts`, `server_retry_timeout`, `server_failure_limit`; `backlog`,
    /// `preconnect`, `client_connections`, `server_connections`, `tcpkeepalive` are
    /// accepted).
    pub(crate) fn parse_yaml(text: &str) -> Result<Self, ConfigError> {
        yaml_depth(text)?;
        let docs =
            YamlLoader::load_from_str(text).map_err(|e| ConfigError(format!("not YAML: {e}")))?;
        let Some(Yaml::Hash(pools)) = docs.first() else {
            return Err(ConfigError("no pool in the file".into()));
        };
        let mut out = Vec::new();
        for (name, pool) in pools {
            let Some(name) = name.as_str() else {
                return Err(ConfigError("a pool name must be a string".into()));
            };
            out.push(PoolConfig::parse_yaml(name, pool, text)?);
        }
        if out.is_empty() {
            return Err(ConfigError("no pool in the file".into()));
        }
        Ok(Self {
            pools: out,
            read_buffer: DEFAULT_READ_BUFFER,
        })
    }

    /// Reads the TOML text of a configuration file. A key it does not know, a value of the
    /// wrong type and a syntax error are named with their line and column.
    pub(crate) fn parse(text: &str) -> Result<Self, ConfigError> {
        let file: TomlFile = toml::from_str(text).map_err(|e| ConfigError(toml_error(&e, text)))?;
        let pools = file
            .pool
            .into_iter()
            .enumerate()
            .map(|(i, pool)| PoolConfig::from_toml(i, pool))
            .collect::<Result<Vec<_>, _>>()?;
        if pools.is_empty() {
            return Err(ConfigError("no [[pool]] in the file".into()));
        }
        Ok(Self {
            pools,
            read_buffer: DEFAULT_READ_BUFFER,
        })
    }
}

/// A TOML error as one line where it can be: `line L, column C: what`, the key or value it
/// is about quoted in `what` (the `toml` crate's text draws the line beneath instead).
fn toml_error(e: &toml::de::Error, text: &str) -> String {
    let message = e.message().trim_end();
    match e.span() {
        Some(span) => format!("{}: {message}", TextPosition::of(text, span.start)),
        None => message.to_string(),
    }
}

/// A line and column (both from 1) of a configuration file's text.
struct TextPosition {
    line: usize,
    column: usize,
}

impl TextPosition {
    /// Where byte `at` of `text` is.
    fn of(text: &str, at: usize) -> Self {
        let before = text.get(..at).unwrap_or(text);
        let line_start = before.rfind('\n').map_or(0, |n| n + 1);
        Self {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl std::fmt::Display for TextPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// The TOML file: `[[pool]]` tables and nothing else.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlFile {
    #[serde(default)]
    pool: Vec<TomlPool>,
}

/// One `[[pool]]` table (or a YAML pool with a `kind:`, its keys renamed to these).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlPool {
    name: Option<String>,
    listen: String,
    #[serde(default)]
    kind: TomlKind,
    timeout_ms: Option<u64>,
    seeds: Option<Vec<String>>,
    read_from: Option<TomlReadFrom>,
    password: Option<String>,
    sentinels: Option<Vec<String>>,
    groups: Option<Vec<TomlGroup>>,
    servers: Option<Vec<TomlServer>>,
    maxclients: Option<u64>,
    client_timeout: Option<u64>,
    proto_max_bulk_len: Option<TomlMemory>,
    client_query_buffer_limit: Option<TomlMemory>,
    client_output_buffer_limit: Option<String>,
}

/// `kind = …`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum TomlKind {
    #[default]
    Cluster,
    Sentinel,
    Static,
}

/// `read_from = …`.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum TomlReadFrom {
    Master,
    Replica,
}

/// `{ name = "g1", slots = "0-8191" }` of a Sentinel pool's `groups`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlGroup {
    name: String,
    slots: String,
}

/// `{ address = "host:port", slots = "0-8191" }` of a static pool's `servers`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlServer {
    address: String,
    slots: String,
}

impl PoolConfig {
    /// A pool from its table, `i` its place in the file (its name when it has none).
    fn from_toml(i: usize, pool: TomlPool) -> Result<Self, ConfigError> {
        let name = pool.name.unwrap_or_else(|| format!("pool{i}"));
        let err = |what: &str| ConfigError(format!("pool {name}: {what}"));
        let timeout = match pool.timeout_ms {
            None => Duration::from_millis(1000),
            Some(ms) if ms > 0 => Duration::from_millis(ms),
            Some(_) => return Err(err("`timeout_ms` must be a positive integer")),
        };
        let kind = match pool.kind {
            TomlKind::Cluster => PoolKind::Cluster {
                seeds: non_empty(pool.seeds, "seeds").map_err(|what| err(&what))?,
                read_from: match pool.read_from {
                    None | Some(TomlReadFrom::Master) => ReadFrom::Master,
                    Some(TomlReadFrom::Replica) => ReadFrom::PreferReplica,
                },
            },
            TomlKind::Sentinel => {
                let sentinels =
                    non_empty(pool.sentinels, "sentinels").map_err(|what| err(&what))?;
                let groups = non_empty(pool.groups, "groups").map_err(|what| err(&what))?;
                let groups = groups.into_iter().map(|g| (g.name, g.slots));
                PoolKind::Sentinel {
                    sentinels,
                    groups: ranges(groups, "groups").map_err(|what| err(&what))?,
                }
            }
            TomlKind::Static => {
                let servers = non_empty(pool.servers, "servers").map_err(|what| err(&what))?;
                let servers = servers.into_iter().map(|s| (s.address, s.slots));
                PoolKind::Static {
                    servers: ranges(servers, "servers").map_err(|what| err(&what))?,
                }
            }
        };
        let maxclients = match pool.maxclients {
            None => DEFAULT_MAXCLIENTS,
            Some(n) if n > 0 => n,
            Some(_) => return Err(err("`maxclients` must be 1 or more")),
        };
        let defaults = ClientLimits::default();
        let limits = ClientLimits {
            max_bulk_len: input_limit(
                pool.proto_max_bulk_len.as_ref(),
                "proto_max_bulk_len",
                defaults.max_bulk_len,
            )
            .map_err(|what| err(&what))?,
            query_buffer: input_limit(
                pool.client_query_buffer_limit.as_ref(),
                "client_query_buffer_limit",
                defaults.query_buffer,
            )
            .map_err(|what| err(&what))?,
            pubsub: match &pool.client_output_buffer_limit {
                None => defaults.pubsub,
                Some(text) => output_limits(text, defaults.pubsub).map_err(|what| err(&what))?,
            },
        };
        Ok(Self {
            name,
            listen: pool.listen,
            kind,
            timeout,
            password: pool.password,
            backlog: DEFAULT_BACKLOG,
            maxclients: Some(maxclients),
            client_timeout: pool
                .client_timeout
                .filter(|&s| s > 0)
                .map(Duration::from_secs),
            limits,
        })
    }
}

impl PoolConfig {
    /// A pool of nutcracker's YAML `text`.
    fn parse_yaml(name: &str, pool: &Yaml, text: &str) -> Result<Self, ConfigError> {
        let err = |what: &str| ConfigError(format!("{name}: {what}"));
        let Yaml::Hash(keys) = pool else {
            return Err(err("not a mapping"));
        };
        if !matches!(pool["kind"], Yaml::BadValue) {
            return Self::parse_yaml_kind(name, keys, text);
        }
        let known = [
            "listen",
            "client_connections",
            "hash",
            "hash_tag",
            "distribution",
            "timeout",
            "backlog",
            "preconnect",
            "redis",
            "redis_auth",
            "redis_db",
            "server_connections",
            "auto_eject_hosts",
            "server_retry_timeout",
            "server_failure_limit",
            "servers",
            "tcpkeepalive",
        ];
        for key in keys.keys() {
            let key = key.as_str().unwrap_or("?");
            if !known.contains(&key) {
                return Err(err(&unknown_yaml_key(text, name, key)));
            }
        }
        let get = |key: &str| &pool[key];
        let string = |key: &str| -> Result<Option<String>, ConfigError> {
            match get(key) {
                Yaml::BadValue | Yaml::Null => Ok(None),
                Yaml::String(s) => Ok(Some(s.clone())),
                Yaml::Integer(n) => Ok(Some(n.to_string())),
                _ => Err(err(&format!("\"{key}\" must be a string"))),
            }
        };
        let listen = string("listen")?.ok_or_else(|| err("\"listen\" is required"))?;
        if get("redis").as_bool() != Some(true) {
            return Err(err("only redis pools are served (\"redis: true\")"));
        }
        let hash = match string("hash")? {
            None => Hash::Fnv1aAnd64,
            Some(h) => Hash::from_name(&h).ok_or_else(|| err(&format!("unknown hash \"{h}\"")))?,
        };
        let distribution = match string("distribution")? {
            None => Distribution::Ketama,
            Some(d) => Distribution::from_name(&d)
                .ok_or_else(|| err(&format!("unknown distribution \"{d}\"")))?,
        };
        let hash_tag = match string("hash_tag")? {
            None => None,
            Some(tag) => match tag.as_bytes() {
                [open, close] => Some([*open, *close]),
                _ => return Err(err("\"hash_tag\" must be two characters")),
            },
        };
        let timeout = match get("timeout").as_i64() {
            Some(ms) if ms > 0 => Duration::from_millis(ms as u64),
            // nutcracker waits forever; a minute here.
            _ => Duration::from_secs(60),
        };
        let redis_db = match get("redis_db").as_i64() {
            None => 0,
            Some(db) => u32::try_from(db).map_err(|_| err("\"redis_db\" must be 0 or more"))?,
        };
        let Yaml::Array(lines) = get("servers") else {
            return Err(err("\"servers\" (a list) is required"));
        };
        let mut servers = Vec::new();
        for line in lines {
            let Some(line) = line.as_str() else {
                return Err(err("each server must be \"host:port:weight [name]\""));
            };
            servers.push(TwemServer::parse(line).map_err(|what| err(&what))?);
        }
        if servers.is_empty() {
            return Err(err("\"servers\" is empty"));
        }
        Ok(Self {
            name: name.to_string(),
            listen,
            kind: PoolKind::Twemproxy(Twemproxy {
                servers,
                hash,
                distribution,
                hash_tag,
                redis_db,
                auto_eject_hosts: get("auto_eject_hosts").as_bool().unwrap_or(false),
                preconnect: get("preconnect").as_bool().unwrap_or(false),
                server_failure_limit: match get("server_failure_limit").as_i64() {
                    None => 2,
                    Some(n) => u32::try_from(n)
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| err("\"server_failure_limit\" must be 1 or more"))?,
                },
                server_retry_timeout: match get("server_retry_timeout").as_i64() {
                    None => Duration::from_secs(30),
                    Some(ms) => Duration::from_millis(
                        u64::try_from(ms)
                            .map_err(|_| err("\"server_retry_timeout\" must be 0 or more"))?,
                    ),
                },
            }),
            timeout,
            password: string("redis_auth")?,
            backlog: match get("backlog").as_i64() {
                None => DEFAULT_BACKLOG,
                Some(n) => u32::try_from(n)
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| err("\"backlog\" must be 1 or more"))?,
            },
            // nutcracker 0.5.0 reads `client_connections:` and does not enforce it (a third
            // client of `client_connections: 2` is served); here it is the limit it says.
            maxclients: match get("client_connections").as_i64() {
                None | Some(0) => None,
                Some(n) => Some(
                    u64::try_from(n)
                        .map_err(|_| err("\"client_connections\" must be 0 or more"))?,
                ),
            },
            client_timeout: None,
            limits: ClientLimits::default(),
        })
    }
}

impl PoolConfig {
    /// A YAML pool with our `kind:` (cluster, sentinel, static): the keys of a TOML
    /// `[[pool]]` (`seeds`, `read_from`, `sentinels`, `groups`, `servers`), plus
    /// nutcracker's `listen`, `timeout` (ms) and `redis_auth` (the servers' password).
    fn parse_yaml_kind(
        name: &str,
        keys: &yaml_rust2::yaml::Hash,
        text: &str,
    ) -> Result<Self, ConfigError> {
        let err = |what: &str| ConfigError(format!("{name}: {what}"));
        let mut table = toml::Table::new();
        table.insert("name".into(), toml::Value::String(name.to_string()));
        for (key, value) in keys {
            let Some(key) = key.as_str() else {
                return Err(err("keys must be strings"));
            };
            let key = match key {
                "timeout" => "timeout_ms",
                "redis_auth" => "password",
                "client_connections" => "maxclients",
                "name" => return Err(err(&unknown_yaml_key(text, name, "name"))),
                other => other,
            };
            let value = to_toml(value).ok_or_else(|| err(&format!("\"{key}\": bad value")))?;
            table.insert(key.to_string(), value);
        }
        let pool: TomlPool =
            toml::Value::Table(table)
                .try_into()
                .map_err(|e: toml::de::Error| {
                    let message = e.message().trim_end();
                    // serde's own words for a key the struct does not have: named here by its
                    // YAML name and line.
                    let unknown = message
                        .strip_prefix("unknown field `")
                        .and_then(|rest| rest.split_once('`'))
                        .map(|(key, _)| key);
                    match unknown {
                        Some(key) => err(&unknown_yaml_key(text, name, key)),
                        None => err(message),
                    }
                })?;
        Self::from_toml(0, pool)
    }
}

/// How deep collections may nest in a YAML file (nutcracker's files nest 3 deep, ours 4).
const MAX_YAML_DEPTH: usize = 64;

/// Refuses a YAML text whose collections nest deeper than [`MAX_YAML_DEPTH`], before the
/// loader sees it: yaml-rust2 0.13 bounds the nesting of flow collections (`[[[`) but not of
/// indented ones, and its loader recursed into a stack overflow on 3 000 levels of indented
/// mappings. The parser's events come from a loop, not a recursion: they are counted here.
/// A syntax error ends the count, and is the loader's to report.
fn yaml_depth(text: &str) -> Result<(), ConfigError> {
    use yaml_rust2::parser::{Event, Parser};
    let mut parser = Parser::new_from_str(text);
    let mut depth = 0usize;
    while let Ok((event, mark)) = parser.next_token() {
        match event {
            Event::StreamEnd => break,
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                depth += 1;
                if depth > MAX_YAML_DEPTH {
                    return Err(ConfigError(format!(
                        "line {}: collections nested deeper than {MAX_YAML_DEPTH}",
                        mark.line()
                    )));
                }
            }
            Event::MappingEnd | Event::SequenceEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// `unknown key "KEY"`, with the line it is on in `text` where it can be found.
fn unknown_yaml_key(text: &str, pool: &str, key: &str) -> String {
    match yaml_key_line(text, pool, key) {
        Some(line) => format!("unknown key \"{key}\" at line {line}"),
        None => format!("unknown key \"{key}\""),
    }
}

/// The line (from 1) of the key `key` of the pool `pool` in nutcracker's YAML `text`: the
/// second level of the top-level mapping, read from the parser's events, which carry their
/// place in the text (the loaded values do not).
fn yaml_key_line(text: &str, pool: &str, key: &str) -> Option<usize> {
    use yaml_rust2::parser::{Event, Parser};
    // For each open collection: whether it is a mapping, and whether its next node is a key.
    let mut open: Vec<(bool, bool)> = Vec::new();
    let mut current_pool: Option<String> = None;
    let mut parser = Parser::new_from_str(text);
    // A node ended: the mapping it was in now waits for the other half of its pair.
    let ended = |open: &mut Vec<(bool, bool)>| {
        if let Some((true, next_is_key)) = open.last_mut() {
            *next_is_key = !*next_is_key;
        }
    };
    loop {
        let (event, mark) = parser.next_token().ok()?;
        let is_key = matches!(open.last(), Some((true, true)));
        match event {
            Event::StreamEnd => return None,
            Event::Scalar(value, ..) => {
                if is_key && open.len() == 1 {
                    current_pool = Some(value);
                } else if is_key
                    && open.len() == 2
                    && current_pool.as_deref() == Some(pool)
                    && value == key
                {
                    return Some(mark.line());
                }
                ended(&mut open);
            }
            Event::Alias(_) => ended(&mut open),
            Event::MappingStart(..) => open.push((true, true)),
            Event::SequenceStart(..) => open.push((false, false)),
            Event::MappingEnd | Event::SequenceEnd => {
                open.pop();
                ended(&mut open);
            }
            _ => {}
        }
    }
}

/// A YAML value as the TOML value our pool parser reads.
fn to_toml(value: &Yaml) -> Option<toml::Value> {
    Some(match value {
        Yaml::String(s) => toml::Value::String(s.clone()),
        Yaml::Integer(n) => toml::Value::Integer(*n),
        Yaml::Boolean(b) => toml::Value::Boolean(*b),
        Yaml::Real(r) => toml::Value::Float(r.parse().ok()?),
        Yaml::Array(items) => toml::Value::Array(items.iter().map(to_toml).collect::<Option<_>>()?),
        Yaml::Hash(entries) => {
            let mut table = toml::Table::new();
            for (key, value) in entries {
                table.insert(key.as_str()?.to_string(), to_toml(value)?);
            }
            toml::Value::Table(table)
        }
        _ => return None,
    })
}

impl TwemServer {
    /// `host:port:weight [name]`.
    fn parse(line: &str) -> Result<Self, String> {
        let (spec, name) = match line.trim().split_once(' ') {
            Some((spec, name)) => (spec, Some(name.trim())),
            None => (line.trim(), None),
        };
        let mut parts = spec.rsplitn(3, ':');
        let (Some(weight), Some(port), Some(host)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("\"{line}\" is not \"host:port:weight [name]\""));
        };
        let weight: u32 = weight
            .parse()
            .ok()
            .filter(|w| *w > 0)
            .ok_or_else(|| format!("\"{line}\": bad weight"))?;
        let port: u16 = port.parse().map_err(|_| format!("\"{line}\": bad port"))?;
        let name = match name {
            Some(name) => name.to_string(),
            None if port == 11211 => host.to_string(),
            None => format!("{host}:{port}"),
        };
        Ok(Self {
            address: format!("{host}:{port}"),
            weight,
            name,
        })
    }
}

/// A list the pool's kind requires, not empty.
fn non_empty<T>(list: Option<Vec<T>>, key: &str) -> Result<Vec<T>, String> {
    match list {
        Some(list) if !list.is_empty() => Ok(list),
        _ => Err(format!("`{key}` (a non-empty array) is required")),
    }
}

/// `(name, "first-last")` entries of `key`, covering every slot exactly once.
fn ranges(
    list: impl Iterator<Item = (String, String)>,
    key: &str,
) -> Result<Vec<(String, u16, u16)>, String> {
    let list = list
        .map(|(name, slots)| parse_range(name, &slots))
        .collect::<Result<Vec<_>, _>>()?;
    for slot in 0..16384u16 {
        let owners = list
            .iter()
            .filter(|(_, first, last)| *first <= slot && slot <= *last)
            .count();
        if owners != 1 {
            return Err(format!(
                "slot {slot} is in {owners} of `{key}`: they must cover 0-16383 once"
            ));
        }
    }
    Ok(list)
}

/// `slots = "0-8191"` of the entry `name`.
fn parse_range(name: String, slots: &str) -> Result<(String, u16, u16), String> {
    let range = slots
        .split_once('-')
        .and_then(|(a, b)| Some((a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?)))
        .filter(|(a, b)| a <= b && *b < 16384);
    let Some((first, last)) = range else {
        return Err(format!(
            "{name}: `slots` must be \"first-last\" within 0-16383"
        ));
    };
    Ok((name, first, last))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Config, Format};

    fn error(format: Format, text: &str) -> String {
        match Config::load_as(format, text) {
            Ok(config) => panic!("accepted: {config:?}"),
            Err(e) => e.to_string(),
        }
    }

    const TOML: &str = "[[pool]]\nname = \"a\"\nlisten = \"127.0.0.1:7400\"\nseeds = [\"x:1\"]\n";

    #[test]
    fn the_extension_says_the_format_and_the_content_only_without_one() {
        let yaml = "alpha:\n  listen: 127.0.0.1:1\n  redis: true\n  servers: [\"h:1:1\"]\n";
        assert_eq!(Format::of(Path::new("p.toml"), yaml), Format::Toml);
        assert_eq!(Format::of(Path::new("p.yml"), TOML), Format::Yaml);
        assert_eq!(Format::of(Path::new("p.yaml"), TOML), Format::Yaml);
        assert_eq!(Format::of(Path::new("p"), TOML), Format::Toml);
        assert_eq!(Format::of(Path::new("p.conf"), yaml), Format::Yaml);
        // A TOML file with a syntax error is reported as TOML, where the guess took it for
        // YAML ("not YAML: …").
        let broken = TOML.replace("7400\"", "7400");
        for path in ["proxy.toml", "proxy"] {
            let format = Format::of(Path::new(path), &broken);
            let e = error(format, &broken);
            assert!(e.starts_with("line 3, column 25: "), "{path}: {e}");
            assert!(!e.contains("YAML"), "{path}: {e}");
        }
        // Nor is a nutcracker file taken for TOML.
        assert_eq!(Format::of(Path::new("p"), yaml), Format::Yaml);
    }

    #[test]
    fn toml_keys_and_values_it_does_not_know_are_named_with_their_line() {
        assert!(Config::load_as(Format::Toml, TOML).is_ok());
        let e = error(Format::Toml, &TOML.replace("seeds", "seed"));
        assert!(
            e.starts_with("line 4, column 1: unknown field `seed`"),
            "{e}"
        );
        let e = error(Format::Toml, &format!("{TOML}kind = \"clusterr\"\n"));
        assert!(
            e.starts_with("line 5, column 8: unknown variant `clusterr`"),
            "{e}"
        );
        let e = error(Format::Toml, &format!("{TOML}timeout_ms = \"1s\"\n"));
        assert!(e.starts_with("line 5, column 14: invalid type"), "{e}");
        let e = error(Format::Toml, &format!("seed = 1\n{TOML}"));
        assert!(
            e.starts_with("line 1, column 1: unknown field `seed`"),
            "{e}"
        );
        let e = error(
            Format::Toml,
            &format!("{TOML}[[pool]]\nlisten = \"127.0.0.1:1\"\nkind = \"static\"\n"),
        );
        assert_eq!(e, "pool pool1: `servers` (a non-empty array) is required");
    }

    #[test]
    fn client_limits_default_as_on_the_server_and_as_in_nutcracker() {
        let pools = |format, text: &str| Config::load_as(format, text).expect("loads").pools;
        let toml = &pools(Format::Toml, TOML)[0];
        assert_eq!((toml.maxclients, toml.client_timeout), (Some(10_000), None));
        let text = format!("{TOML}maxclients = 2\nclient_timeout = 3\n");
        let set = &pools(Format::Toml, &text)[0];
        assert_eq!(
            (set.maxclients, set.client_timeout),
            (Some(2), Some(std::time::Duration::from_secs(3)))
        );
        let e = error(Format::Toml, &format!("{TOML}maxclients = 0\n"));
        assert_eq!(e, "pool a: `maxclients` must be 1 or more");
        // nutcracker's key: no limit unless it names one.
        let yaml = "alpha:\n  listen: 127.0.0.1:1\n  redis: true\n  servers: [\"h:1:1\"]\n";
        assert_eq!(pools(Format::Yaml, yaml)[0].maxclients, None);
        let limited = format!("{yaml}  client_connections: 5\n");
        assert_eq!(pools(Format::Yaml, &limited)[0].maxclients, Some(5));
    }

    #[test]
    fn input_and_pubsub_limits_take_the_servers_words_units_and_bounds() {
        use super::{ClientLimits, OutputLimit};
        let limits = |text: &str| match Config::load_as(Format::Toml, text) {
            Ok(config) => Ok(config.pools[0].limits),
            Err(e) => Err(e.to_string()),
        };
        // The server's defaults: `proto-max-bulk-len 512mb`, `client-query-buffer-limit 1gb`,
        // `client-output-buffer-limit pubsub 32mb 8mb 60`.
        let defaults = limits(TOML).expect("loads");
        assert_eq!(defaults, ClientLimits::default());
        assert_eq!(
            (defaults.max_bulk_len, defaults.query_buffer),
            (536_870_912, 1_073_741_824)
        );
        assert_eq!(
            defaults.pubsub,
            OutputLimit {
                hard: 33_554_432,
                soft: 8_388_608,
                soft_seconds: 60
            }
        );
        // Bytes as a number, or the server's units in any case (k is 1000, kb 1024).
        let set = limits(&format!(
            "{TOML}proto_max_bulk_len = 2000000
client_query_buffer_limit = \"2MB\"\n\
             client_output_buffer_limit = \"normal 0 0 0 slave 256mb 64mb 60 pubsub 1m 500k 5\"\n"
        ))
        .expect("loads");
        assert_eq!((set.max_bulk_len, set.query_buffer), (2_000_000, 2 << 20));
        assert_eq!(
            set.pubsub,
            OutputLimit {
                hard: 1_000_000,
                soft: 500_000,
                soft_seconds: 5
            }
        );
        // The server's bounds and refusals, each named.
        let refused = |line: &str| limits(&format!("{TOML}{line}\n")).expect_err(line);
        assert_eq!(
            refused("proto_max_bulk_len = 1048575"),
            "pool a: `proto_max_bulk_len` must be 1048576 bytes (1mb) or more, as on the server"
        );
        assert!(
            refused("client_query_buffer_limit = \"1xb\"")
                .contains("\"1xb\" is not a memory value")
        );
        assert!(refused("client_query_buffer_limit = \"mb\"").contains("is not a memory value"));
        assert_eq!(
            refused("client_output_buffer_limit = \"pubsub 1mb\""),
            "pool a: `client_output_buffer_limit` = \"pubsub 1mb\": Wrong number of arguments \
             in buffer limit configuration."
        );
        assert!(refused("client_output_buffer_limit = \" \"").contains("class hard soft seconds"));
        assert!(
            refused("client_output_buffer_limit = \"bogus 1 1 1\"")
                .ends_with("Invalid client class specified in buffer limit configuration.")
        );
        assert!(
            refused("client_output_buffer_limit = \"pubsub 1x 1 1\"").ends_with(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration."
            )
        );
        // A file's words, as redis.conf's: any blanks between them.
        let spaced = limits(&format!(
            "{TOML}client_output_buffer_limit = \"  pubsub 3mb\\t2mb 1 \"\n"
        ))
        .expect("loads");
        assert_eq!(
            spaced.pubsub,
            OutputLimit {
                hard: 3 << 20,
                soft: 2 << 20,
                soft_seconds: 1
            }
        );
        assert!(
            refused("client_output_buffer_limit = \"normal 1mb 0 0\"").contains("stops being read")
        );
        // A YAML pool of our kinds takes the same keys.
        let yaml = "alpha:\n  kind: cluster\n  listen: 127.0.0.1:1\n  seeds: [\"x:1\"]\n  \
                    proto_max_bulk_len: 4mb\n";
        let pool = &Config::load_as(Format::Yaml, yaml).expect("loads").pools[0];
        assert_eq!(pool.limits.max_bulk_len, 4 << 20);
    }

    #[test]
    fn yaml_nested_too_deep_is_refused_before_the_loader_overflows_its_stack() {
        // 3 000 levels of indented mappings overflowed the loader's stack (yaml-rust2 0.13
        // bounds only flow collections); a compact sequence of sequences nests without
        // indenting.
        let mappings: String = (0..3000)
            .map(|i| format!("{}k:\n", " ".repeat(i)))
            .collect();
        let sequences = format!("a:\n{}x\n", "- ".repeat(3000));
        for text in [mappings, sequences] {
            let e = error(Format::Yaml, &text);
            assert!(e.ends_with("collections nested deeper than 64"), "{e}");
        }
        // nutcracker's own nesting passes.
        let text = "alpha:\n  listen: 127.0.0.1:1\n  redis: true\n  servers:\n   - h:1:1\n";
        assert!(Config::load_as(Format::Yaml, text).is_ok());
    }

    #[test]
    fn yaml_keys_it_does_not_know_are_named_with_their_line() {
        let text = "alpha:\n  listen: 127.0.0.1:1\n  redis: true\n  servers:\n   - h:1:1\n\
                    beta:\n  listen: 127.0.0.1:2\n  redis: true\n  servers: [\"h:1:1\"]\n  \
                    bogus: {listen: 3}\n";
        assert_eq!(
            error(Format::Yaml, text),
            "beta: unknown key \"bogus\" at line 10"
        );
        // One of our kinds in the YAML file: the key is named as the file spells it.
        let text = "p:\n  kind: cluster\n  listen: 127.0.0.1:0\n  seeds: [\"a:1\"]\n  hash: md5\n";
        assert_eq!(
            error(Format::Yaml, text),
            "p: unknown key \"hash\" at line 5"
        );
        let text = "p:\n  kind: static\n  listen: 127.0.0.1:0\n  name: x\n";
        assert_eq!(
            error(Format::Yaml, text),
            "p: unknown key \"name\" at line 4"
        );
    }
}
