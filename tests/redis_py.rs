//! redis-py 8 (its default RESP3) through the proxy in front of a real 3-master cluster:
//! SET / GET / MGET / DEL, a RESP3 map, a pipeline, a transaction on one slot, Pub/Sub and
//! sharded Pub/Sub (`tests/redis_py/through_proxy.py`; `.ci/run` installs redis-py with pip).

mod support;

mod toy_proxy;

use std::time::Duration;

use support::{RealCluster, run_bounded};

#[test]
fn redis_py_with_resp3_works_through_the_proxy() {
    let cluster = RealCluster::start(3, 0, &[]);
    let text = format!(
        "[[pool]]\nname = \"py\"\nlisten = \"127.0.0.1:0\"\nseeds = [\"127.0.0.1:{}\"]\n",
        cluster.nodes[0].port()
    );
    let port = toy_proxy::start(&text)[0];
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/redis_py/through_proxy.py"
    );
    let output = run_bounded(
        "python3",
        &[script, &port.to_string()],
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.trim() == "ok",
        "redis-py through the proxy:\n{stdout}\n{stderr}"
    );
}
