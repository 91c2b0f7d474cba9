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

impl Config {
    /// Reads a configuration file: nutcracker's YAML (a mapping of pool names) or our TOML
    /// (`[[pool]]` tables), told apart by which one parses.
    pub(crate) fn load(text: &str) -> Result<Self, ConfigError> {
        if Self::is_toml(text) {
            return Self::parse(text);
        }
        Self::parse_yaml(text)
    }

    /// Whether `text` is our TOML (with `[[pool]]` tables) rather than nutcracker's YAML.
    pub(crate) fn is_toml(text: &str) -> bool {
        text.parse::<toml::Table>()
            .is_ok_and(|t| t.contains_key("pool"))
    }

    /// Reads nutcracker's YAML: each top-level key a pool, with its keys (`listen`, `hash`,
    /// `hash_tag`, `distribution`, `timeout`, `redis`, `redis_auth`, `redis_db`, `servers`,
    /// `auto_eject_hosts`, `server_retry_timeout`, `server_failure_limit`; `backlog`,
    /// `preconnect`, `client_connections`, `server_connections`, `tcpkeepalive` are
    /// accepted).
    pub(crate) fn parse_yaml(text: &str) -> Result<Self, ConfigError> {
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
            out.push(PoolConfig::parse_yaml(name, pool)?);
        }
        if out.is_empty() {
            return Err(ConfigError("no pool in the file".into()));
        }
        Ok(Self {
            pools: out,
            read_buffer: DEFAULT_READ_BUFFER,
        })
    }

    /// Reads the TOML text of a configuration file.
    pub(crate) fn parse(text: &str) -> Result<Self, ConfigError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError(format!("not TOML: {e}")))?;
        let pools = match table.get("pool") {
            Some(toml::Value::Array(pools)) => pools,
            Some(_) => return Err(ConfigError("`pool` must be an array of tables".into())),
            None => return Err(ConfigError("no [[pool]] in the file".into())),
        };
        if let Some(key) = table.keys().find(|k| *k != "pool") {
            return Err(ConfigError(format!("unknown top-level key `{key}`")));
        }
        let pools = pools
            .iter()
            .enumerate()
            .map(|(i, pool)| match pool {
                toml::Value::Table(pool) => PoolConfig::parse(i, pool),
                _ => Err(ConfigError(format!("pool {i}: not a table"))),
            })
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

impl PoolConfig {
    fn parse(i: usize, pool: &toml::Table) -> Result<Self, ConfigError> {
        let name = match pool.get("name") {
            Some(toml::Value::String(name)) => name.clone(),
            None => format!("pool{i}"),
            Some(_) => return Err(ConfigError(format!("pool {i}: `name` must be a string"))),
        };
        let err = |what: &str| ConfigError(format!("pool {name}: {what}"));
        let string = |key: &str| match pool.get(key) {
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            None => Ok(None),
            Some(_) => Err(err(&format!("`{key}` must be a string"))),
        };
        let listen = string("listen")?.ok_or_else(|| err("`listen` is required"))?;
        let timeout = match pool.get("timeout_ms") {
            None => Duration::from_millis(1000),
            Some(toml::Value::Integer(ms)) if *ms > 0 => Duration::from_millis(*ms as u64),
            Some(_) => return Err(err("`timeout_ms` must be a positive integer")),
        };
        let kind = match string("kind")?.as_deref() {
            Some("cluster") | None => {
                let seeds = strings(pool, "seeds").map_err(|what| err(&what))?;
                let read_from = match string("read_from")?.as_deref() {
                    None | Some("master") => ReadFrom::Master,
                    Some("replica") => ReadFrom::PreferReplica,
                    Some(other) => return Err(err(&format!("unknown read_from `{other}`"))),
                };
                PoolKind::Cluster { seeds, read_from }
            }
            Some("sentinel") => {
                let sentinels = strings(pool, "sentinels").map_err(|what| err(&what))?;
                let groups = ranges(pool, "groups", "name").map_err(|what| err(&what))?;
                PoolKind::Sentinel { sentinels, groups }
            }
            Some("static") => {
                let servers = ranges(pool, "servers", "address").map_err(|what| err(&what))?;
                PoolKind::Static { servers }
            }
            Some(other) => return Err(err(&format!("unknown kind `{other}`"))),
        };
        let password = string("password")?;
        let known = [
            "name",
            "listen",
            "kind",
            "timeout_ms",
            "seeds",
            "read_from",
            "password",
            "sentinels",
            "groups",
            "servers",
        ];
        if let Some(key) = pool.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(err(&format!("unknown key `{key}`")));
        }
        Ok(Self {
            name,
            listen,
            kind,
            timeout,
            password,
            backlog: DEFAULT_BACKLOG,
        })
    }
}

impl PoolConfig {
    fn parse_yaml(name: &str, pool: &Yaml) -> Result<Self, ConfigError> {
        let err = |what: &str| ConfigError(format!("{name}: {what}"));
        let Yaml::Hash(keys) = pool else {
            return Err(err("not a mapping"));
        };
        if !matches!(pool["kind"], Yaml::BadValue) {
            return Self::parse_yaml_kind(name, keys);
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
                return Err(err(&format!("unknown key \"{key}\"")));
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
        })
    }
}

impl PoolConfig {
    /// A YAML pool with our `kind:` (cluster, sentinel, static): the keys of a TOML
    /// `[[pool]]` (`seeds`, `read_from`, `sentinels`, `groups`, `servers`), plus
    /// nutcracker's `listen`, `timeout` (ms) and `redis_auth` (the servers' password).
    fn parse_yaml_kind(name: &str, keys: &yaml_rust2::yaml::Hash) -> Result<Self, ConfigError> {
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
                "name" => return Err(err("unknown key \"name\"")),
                other => other,
            };
            let value = to_toml(value).ok_or_else(|| err(&format!("\"{key}\": bad value")))?;
            table.insert(key.to_string(), value);
        }
        Self::parse(0, &table)
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

/// `key = ["…", …]`, not empty.
fn strings(pool: &toml::Table, key: &str) -> Result<Vec<String>, String> {
    match pool.get(key) {
        Some(toml::Value::Array(list)) if !list.is_empty() => list
            .iter()
            .map(|s| match s {
                toml::Value::String(s) => Ok(s.clone()),
                _ => Err(format!("`{key}` must be strings")),
            })
            .collect(),
        _ => Err(format!(
            "`{key}` (a non-empty array of strings) is required"
        )),
    }
}

/// `key = [{ <label> = "…", slots = "first-last" }, …]`, covering every slot exactly once.
fn ranges(pool: &toml::Table, key: &str, label: &str) -> Result<Vec<(String, u16, u16)>, String> {
    let list = match pool.get(key) {
        Some(toml::Value::Array(list)) if !list.is_empty() => list
            .iter()
            .map(|g| parse_range(g, label))
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(format!("`{key}` (a non-empty array) is required")),
    };
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

/// `{ name = "g1", slots = "0-8191" }` (or `address` for a static server).
fn parse_range(entry: &toml::Value, label: &str) -> Result<(String, u16, u16), String> {
    let toml::Value::Table(entry) = entry else {
        return Err("each entry must be a table".into());
    };
    let Some(toml::Value::String(name)) = entry.get(label) else {
        return Err(format!("each entry needs `{label}`"));
    };
    let Some(toml::Value::String(slots)) = entry.get("slots") else {
        return Err(format!("{name} needs `slots` (\"first-last\")"));
    };
    let range = slots
        .split_once('-')
        .and_then(|(a, b)| Some((a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?)))
        .filter(|(a, b)| a <= b && *b < 16384);
    let Some((first, last)) = range else {
        return Err(format!(
            "{name}: `slots` must be \"first-last\" within 0-16383"
        ));
    };
    Ok((name.clone(), first, last))
}
