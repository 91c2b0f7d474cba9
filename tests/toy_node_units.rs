//! The toy node's own unit tests (glob patterns, DUMP payloads, INCRBYFLOAT's numbers,
//! streams, its log), compiled from its files: an example with `test = true` would be built as a
//! test harness instead of the binary that `tests/toy_node.rs` runs.

#[allow(dead_code)]
#[path = "../examples/toy-node/db.rs"]
mod db;
#[allow(dead_code)]
#[path = "../examples/toy-node/dump.rs"]
mod dump;
#[allow(dead_code)]
#[path = "../examples/toy-node/float.rs"]
mod float;
#[allow(dead_code)]
#[path = "../examples/toy-node/log.rs"]
mod log;
#[allow(dead_code)]
#[path = "../examples/toy-node/stream.rs"]
mod stream;
