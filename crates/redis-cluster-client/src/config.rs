//! [`Config`]: what an [`Engine`](crate::Engine) is told once, at its start.

use std::time::Duration;

use redis_cluster_route::{CommandTable, Endpoint, ReadFrom, SlotMap};

/// How an [`Engine`](crate::Engine) finds its cluster and how patient it is.
///
/// ```
/// use redis_cluster_client::Config;
/// use redis_cluster_route::Endpoint;
///
/// let config = Config::new(vec![Endpoint { host: "127.0.0.1".into(), port: 7000, ..Endpoint::default() }]);
/// assert_eq!(config.max_attempts, 16);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// Nodes to ask for the slot map when no known master answers.
    pub seeds: Vec<Endpoint>,
    /// Where reads go. Anything but [`ReadFrom::Master`] sends `READONLY` on every backend
    /// connection first.
    pub read_from: ReadFrom,
    /// The command table used until the cluster says what it runs (`INFO server` of the first
    /// node asked), and for good when [`Config::fixed_table`] is set.
    pub table: CommandTable,
    /// Keep [`Config::table`] whatever the cluster runs.
    pub fixed_table: bool,
    /// How often one command is sent (redirects and retries included) before the client gets
    /// the last error.
    pub max_attempts: u32,
    /// The first pause before a retry (TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN, a lost
    /// connection); each further retry of the same command waits twice as long.
    pub retry_base: Duration,
    /// The longest pause between two retries.
    pub retry_max: Duration,
    /// How often the slot map is reloaded when nothing asked for it.
    pub refresh_interval: Duration,
    /// The shortest time between two reloads of the slot map (a burst of MOVED costs one).
    pub refresh_min_interval: Duration,
    /// How long a backend may keep a reply owed before its connection is closed and what was
    /// on it retried. Connections of blocking commands are not timed.
    pub timeout: Duration,
    /// Sent on every backend connection first: `AUTH [user] password` (or in `HELLO 3`).
    pub auth: Option<(Option<String>, String)>,
    /// Standalone masters sharded by slot range (fixed servers, or Sentinel-managed groups):
    /// this map is used as given and never read from the nodes (no `CLUSTER` command is
    /// sent; `seeds` may be empty). Slots it leaves out answer `CLUSTERDOWN` after the
    /// retries. [`Engine::set_slot_map`](crate::Engine::set_slot_map) replaces it, and
    /// [`Engine::hold`](crate::Engine::hold) holds a range during a failover.
    pub fixed_map: Option<SlotMap>,
    /// Backpressure in bytes: when the replies and pushes handed out to one client and not
    /// yet reported written ([`Engine::handle_written`](crate::Engine::handle_written)) pass
    /// this many bytes, [`Output::Pause`](crate::Output::Pause) asks the driver to stop
    /// reading that client's commands, and [`Output::Resume`](crate::Output::Resume) comes
    /// once half of them are written. `None` (the default): nothing is counted, and a
    /// driver bounds its clients itself (by [`Engine::pending`](crate::Engine::pending)).
    pub client_output_limit: Option<usize>,
    /// The most keys SCAN reads of one slot in one step (`CLUSTER GETKEYSINSLOT`): a slot
    /// that holds this many or more makes SCAN answer an error, rather than give a part of
    /// it. (A cluster SCAN reads whole slots; see the crate docs.)
    pub scan_slot_keys: u32,
    /// Hand a reply the engine passes on unchanged as the bytes the node sent
    /// ([`Output::Raw`](crate::Output::Raw)) instead of a decoded frame
    /// ([`Output::Reply`](crate::Output::Reply)): for a proxy, which writes replies out
    /// again, that is no frame built and none encoded. Only a command that went to one node
    /// whole and was not an error there is handed on so, and a read merged key by key (MGET
    /// split over nodes) whose parts all were: its array is made of their values' bytes.
    /// Errors (a redirect, a retry), other merged replies, transactions and the engine's own
    /// answers still come as frames. Off by default.
    pub raw_replies: bool,
}

impl Config {
    /// The defaults, with these seeds: reads from masters, the Redis 7.0 table until the
    /// cluster says otherwise, 16 attempts, retries from 5 ms doubling to 500 ms, a reload
    /// every 2 s and at most every 100 ms, replies owed for at most 2 s, SCAN steps of at
    /// most 100,000 keys a slot, replies as frames.
    pub fn new(seeds: Vec<Endpoint>) -> Self {
        Self {
            seeds,
            read_from: ReadFrom::Master,
            table: CommandTable::REDIS_7_0,
            fixed_table: false,
            max_attempts: 16,
            retry_base: Duration::from_millis(5),
            retry_max: Duration::from_millis(500),
            refresh_interval: Duration::from_secs(2),
            refresh_min_interval: Duration::from_millis(100),
            timeout: Duration::from_secs(2),
            auth: None,
            fixed_map: None,
            client_output_limit: None,
            scan_slot_keys: 100_000,
            raw_replies: false,
        }
    }
}

/// The pause before the `attempt`-th retry (from 1) of one command: `base` doubled each
/// time, at most `longest`.
pub(crate) fn backoff(base: Duration, longest: Duration, attempt: u32) -> Duration {
    let shift = attempt.saturating_sub(1).min(16);
    base.saturating_mul(1u32 << shift).min(longest)
}
