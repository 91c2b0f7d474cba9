//! The gossip's cost, measured in the simulator beside the model of the seeds (semantics
//! section 9): per-node bus messages and bytes per second for N nodes and a node timeout T.
//!
//! ```text
//! cargo run --release -p redis-cluster-sim --example scale            # N = 6 … 300
//! cargo run --release -p redis-cluster-sim --example scale -- 1000    # one N
//! cargo run --release -p redis-cluster-sim --example scale -- 1000 30 # one N, one T (s)
//! cargo run --release -p redis-cluster-sim --example scale -- 1000 30 5 # 5 s measured
//! ```
//!
//! The cluster starts formed (every node loaded the same nodes.conf: half masters, half
//! replicas), runs 10 s to open its links and settle, then 60 simulated seconds (or the
//! third argument's) are measured. The model counts every node pinging every other once per
//! half timeout; real servers (and this simulator) send fewer, because gossip carries pong
//! times: `benches/gossip_live.sh` measures real ones, and the crate README of
//! redis-cluster-state sets the three side by side.

use std::time::Instant;

use redis_cluster_sim::Sim;

/// The model: pings per node per second, message size, per-node bytes per second sent.
fn model(n: u64, timeout_s: f64) -> (f64, f64, f64) {
    let pings = (2.0 * (n as f64 - 1.0) / timeout_s).max(1.0);
    let entries = (n / 10).max(3).min(n - 2) as f64;
    let size = 2256.0 + 104.0 * entries;
    (pings, size, 2.0 * pings * size)
}

fn main() {
    let sizes: Vec<usize> = match std::env::args().nth(1) {
        Some(n) => vec![n.parse().expect("a node count")],
        None => vec![6, 30, 100, 300],
    };
    let timeouts: Vec<u64> = match std::env::args().nth(2) {
        Some(t) => vec![t.parse::<u64>().expect("a node timeout in seconds") * 1000],
        None => vec![15_000, 30_000],
    };
    // A third argument shortens the measured span (seconds), for profiling.
    let measured: u64 = match std::env::args().nth(3) {
        Some(s) => s.parse::<u64>().expect("a measured span in seconds") * 1000,
        None => 60_000,
    };
    // The threads a large batch of events is split over: every core unless SIM_THREADS says.
    let threads = std::env::var("SIM_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .or_else(|| std::thread::available_parallelism().map(usize::from).ok())
        .unwrap_or(1);
    println!(
        "| N | T | messages/s per node (sim) | model 2P | bytes/s per node (sim) | model 2P·S | wall |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for n in sizes {
        for &timeout in &timeouts {
            let mut sim = Sim::formed(n / 2, 1, 1, timeout);
            sim.set_tracing(false);
            sim.set_threads(threads, 0);
            sim.run_for(10_000);
            let (m0, b0) = sim.delivered();
            let wall = Instant::now();
            sim.run_for(measured);
            let wall = wall.elapsed();
            let (m1, b1) = sim.delivered();
            let per_node = |x: u64| x as f64 * 1000.0 / measured as f64 / n as f64;
            let (pings, _, bytes) = model(n as u64, timeout as f64 / 1000.0);
            println!(
                "| {n} | {} s | {:.2} | {:.2} | {:.0} | {:.0} | {:.1} s |",
                timeout / 1000,
                per_node(m1 - m0),
                2.0 * pings,
                per_node(b1 - b0),
                bytes,
                wall.as_secs_f64()
            );
        }
    }
}
