//! The error lines a Redis Cluster node sends, byte for byte as Redis 7.0.15 writes them
//! (`cluster.c`, `server.c`), without the leading `-` and the CRLF.
//!
//! One place for every crate of the workspace: the state machine answers with them, the
//! client engine answers with them where a node would have, and the router's tests compare
//! with them. [`encode_error`](crate::encode_error) writes one.

/// A command whose keys are in different slots (`CROSSSLOT`), also across slots of one node.
pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";
/// A multi-key command on a slot being migrated, its keys split between the two nodes.
pub const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";
/// The key's slot has no owner.
pub const CLUSTERDOWN_UNBOUND: &str = "CLUSTERDOWN Hash slot not served";
/// The node sees the cluster as down (`cluster_state:fail`).
pub const CLUSTERDOWN: &str = "CLUSTERDOWN The cluster is down";
/// Down, with `cluster-allow-reads-when-down yes`, and the command writes.
pub const CLUSTERDOWN_READONLY: &str =
    "CLUSTERDOWN The cluster is down and only accepts read commands";
/// A write sent to a replica.
pub const READONLY: &str = "READONLY You can't write against a read only replica.";
/// A replica that lost its master, with `replica-serve-stale-data no`.
pub const MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
/// A node loading its dataset.
pub const LOADING: &str = "LOADING Redis is loading the dataset in memory";
/// A command's arguments do not parse (`shared.syntaxerr`).
pub const SYNTAX: &str = "ERR syntax error";
/// An argument that must be an integer is not one, or does not fit (`getLongLongFromObject`).
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
