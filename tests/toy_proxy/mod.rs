//! The proxy (`crates/redis-cluster-proxy`) for the tests that run it in-process: its module, and
//! a starter that runs it on a runtime of its own.

#[path = "../../crates/redis-cluster-proxy/src/proxy/mod.rs"]
#[allow(dead_code)]
pub(crate) mod proxy;

use std::time::Duration;

/// Starts the proxy with the configuration `text` (TOML or nutcracker's YAML, as `-c` reads
/// it) on a runtime of its own (a background thread that lives as long as the test binary);
/// returns every pool's port, in configuration order.
pub(crate) fn start(text: &str) -> Vec<u16> {
    let config = proxy::Config::load(text).expect("a valid configuration");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let running = proxy::start(config).await.expect("the proxy starts");
            let ports = running.addrs.iter().map(|a| a.port()).collect::<Vec<_>>();
            tx.send(ports).expect("the test waits");
            std::future::pending::<()>().await;
        });
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the proxy started")
}
