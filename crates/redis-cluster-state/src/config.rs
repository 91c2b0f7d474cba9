//! [`Config`]: what a node is told at start, with the options real Redis has.

use alloc::string::String;

use redis_cluster_bus::NodeId;

use crate::time::Duration;

/// Whether `text` is a hostname as a server lets itself announce one
/// (`cluster-announce-hostname`): letters, digits, `-` and `.` only, the empty one included.
/// This node takes a peer's hostname only when it passes: a blank, comma or line break would
/// be written into nodes.conf and CLUSTER NODES. (CONFIG SET also refuses 256 bytes and more.)
///
/// ```
/// use redis_cluster_state::is_hostname;
///
/// assert!(is_hostname(b"node-1.example"));
/// assert!(!is_hostname(b"a b") && !is_hostname(b"a,b") && !is_hostname(b"a\nb"));
/// ```
pub fn is_hostname(text: &[u8]) -> bool {
    text.iter()
        .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
}

/// What `MOVED` / `ASK` and `CLUSTER SLOTS` name a node by
/// (`cluster-preferred-endpoint-type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EndpointType {
    /// Its IP (the default).
    #[default]
    Ip,
    /// Its announced hostname, `?` when it has none.
    Hostname,
    /// Nothing: the client uses the host it is connected to.
    Unknown,
}

/// A node's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The node id; `None` picks one from the seed, as a first start does.
    pub id: Option<NodeId>,
    /// The announced IP.
    pub ip: String,
    /// The client port.
    pub port: u16,
    /// The cluster bus port (`cluster-port`; default port + 10000).
    pub cport: u16,
    /// The secondary client port (the plaintext one in a TLS cluster); 0 for none.
    pub pport: u16,
    /// `cluster-announce-hostname`.
    pub hostname: Option<String>,
    /// `cluster-node-timeout`.
    pub node_timeout: Duration,
    /// The seed of every random choice the node makes.
    pub seed: u64,
    /// `cluster-require-full-coverage`.
    pub require_full_coverage: bool,
    /// `cluster-allow-reads-when-down`.
    pub allow_reads_when_down: bool,
    /// `cluster-allow-pubsubshard-when-down`.
    pub allow_pubsubshard_when_down: bool,
    /// `cluster-replica-validity-factor`.
    pub replica_validity_factor: u32,
    /// `cluster-migration-barrier`.
    pub migration_barrier: u32,
    /// `cluster-allow-replica-migration`.
    pub allow_replica_migration: bool,
    /// `cluster-replica-no-failover`.
    pub replica_no_failover: bool,
    /// `cluster-preferred-endpoint-type`.
    pub preferred_endpoint: EndpointType,
}

impl Config {
    /// The defaults of Redis 7.0 for a node on `ip:port`, bus port port + 10000.
    pub fn new(ip: &str, port: u16) -> Self {
        Self {
            id: None,
            ip: String::from(ip),
            port,
            cport: port.wrapping_add(10000),
            pport: 0,
            hostname: None,
            node_timeout: Duration::from_millis(15_000),
            seed: 0,
            require_full_coverage: true,
            allow_reads_when_down: false,
            allow_pubsubshard_when_down: true,
            replica_validity_factor: 10,
            migration_barrier: 1,
            allow_replica_migration: true,
            replica_no_failover: false,
            preferred_endpoint: EndpointType::Ip,
        }
    }
}
