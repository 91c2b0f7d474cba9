//! The toy proxy (`examples/toy-proxy`) in front of real servers: a real 3-master Redis
//! Cluster behind a `cluster` pool. `redis-benchmark`, which knows nothing of clusters, runs
//! through it without an error; multi-key commands across slots answer exactly what one
//! standalone server answers; a pipeline's replies come back in order; garbage from one
//! client closes that client only.

mod support;

#[path = "../examples/toy-proxy/proxy/mod.rs"]
#[allow(dead_code)]
mod proxy;

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use redis_cluster_proto::resp::Frame;
use support::{Client, RealCluster, RedisServer};

/// Starts the proxy on a runtime of its own (a background thread that lives as long as the
/// test binary) with one cluster pool over `seeds`; returns its port.
fn start_proxy(seeds: &[u16]) -> u16 {
    let seeds: Vec<String> = seeds.iter().map(|p| format!("\"127.0.0.1:{p}\"")).collect();
    let text = format!(
        "[[pool]]\nname = \"test\"\nlisten = \"127.0.0.1:0\"\nseeds = [{}]\ntimeout_ms = 2000\n",
        seeds.join(", ")
    );
    let config = proxy::Config::parse(&text).expect("a valid configuration");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let running = proxy::start(config).await.expect("the proxy starts");
            tx.send(running.addrs[0].port()).expect("the test waits");
            std::future::pending::<()>().await;
        });
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the proxy started")
}

fn argv(line: &str) -> Vec<&[u8]> {
    line.split(' ').map(str::as_bytes).collect()
}

#[test]
fn redis_benchmark_runs_through_the_proxy_without_errors() {
    let cluster = RealCluster::start(3, 0, &[]);
    let port = start_proxy(&[cluster.nodes[0].port()]);
    let output = Command::new("timeout")
        .args(["120", "redis-benchmark", "-h", "127.0.0.1", "-p"])
        .arg(port.to_string())
        .args([
            "-t",
            "set,get,mset,incr,lpush",
            "-n",
            "20000",
            "-c",
            "20",
            "-P",
            "8",
        ])
        .args(["-r", "100000", "-q", "-e"])
        .output()
        .expect("redis-benchmark runs (bash .ci/test installs redis-tools)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // Progress lines end in CR; each test's result is the last of its line.
    let results: Vec<&str> = stdout.split(['\r', '\n']).map(str::trim).collect();
    for test in ["SET", "GET", "INCR", "LPUSH", "MSET (10 keys)"] {
        assert!(
            results
                .iter()
                .any(|l| l.starts_with(&format!("{test}: ")) && l.contains("requests per second")),
            "no {test} result:\n{stdout}"
        );
    }
    assert!(
        !stdout.contains("ERR") && !stdout.contains("Error"),
        "{stdout}"
    );
    // The writes landed on every master (keys spread over the slots).
    for node in &cluster.nodes {
        let Frame::Integer(keys) = node.client().command(&[b"DBSIZE"]) else {
            panic!("DBSIZE")
        };
        assert!(keys > 1000, "only {keys} keys on a master");
    }
}

#[test]
fn multi_key_commands_across_slots_answer_as_one_server() {
    let cluster = RealCluster::start(3, 0, &[]);
    let single = RedisServer::start_standalone(&[]);
    let port = start_proxy(&[cluster.nodes[1].port(), cluster.nodes[0].port()]);
    let script = [
        "MSET a 1 b 2 c 3 {a}x 4 d 5 e 6",
        "MGET a b c {a}x nope d e",
        "DEL a nope c",
        "EXISTS a b c {a}x d e a",
        "MGET a b c",
        "MSETNX {p}1 1 {p}2 2 {p}3 3",
        "MSETNX {p}1 1 {p}4 2",
        "TOUCH b {a}x zz",
        "UNLINK b zz e",
        "MGET {p}1 {p}2 {p}3 {p}4 b",
        "INCR n",
        "INCRBY n 5",
        "LPUSH l 1 2 3",
        "LRANGE l 0 -1",
        "DBSIZE",
        "PING",
        "PING hello",
        "ECHO hi",
        "GET nope",
        "SET k",
        "NOSUCHCOMMAND x y",
        "MGET",
    ];
    let mut ours = Client::connect(port);
    let mut theirs = single.client();
    for line in script {
        let (got, want) = (ours.command(&argv(line)), theirs.command(&argv(line)));
        assert_eq!(got, want, "{line}");
    }
    // MSETNX across slots cannot be all or nothing: refused, as a cluster node refuses it.
    assert_eq!(
        ours.command(&argv("MSETNX x 1 y 2")),
        Frame::SimpleError("CROSSSLOT Keys in request don't hash to the same slot".into())
    );
}

#[test]
fn a_pipeline_gets_its_replies_in_order() {
    let cluster = RealCluster::start(3, 0, &[]);
    let port = start_proxy(&[cluster.nodes[0].port()]);
    let mut client = Client::connect(port);
    let mut commands: Vec<Vec<Vec<u8>>> = Vec::new();
    for i in 0..500 {
        commands.push(vec![
            b"SET".to_vec(),
            format!("key:{i}").into_bytes(),
            i.to_string().into_bytes(),
        ]);
        commands.push(vec![b"GET".to_vec(), format!("key:{i}").into_bytes()]);
        commands.push(vec![
            b"MGET".to_vec(),
            format!("key:{i}").into_bytes(),
            b"key:0".to_vec(),
        ]);
    }
    let refs: Vec<Vec<&[u8]>> = commands
        .iter()
        .map(|c| c.iter().map(Vec::as_slice).collect())
        .collect();
    let batch: Vec<&[&[u8]]> = refs.iter().map(Vec::as_slice).collect();
    client.send(&batch);
    for i in 0..500 {
        assert_eq!(
            client.read_reply(),
            Frame::SimpleString("OK".into()),
            "SET {i}"
        );
        let value = Frame::BulkString(i.to_string().into_bytes().into());
        assert_eq!(client.read_reply(), value, "GET {i}");
        let zero = Frame::BulkString("0".into());
        assert_eq!(
            client.read_reply(),
            Frame::Array(vec![value, zero]),
            "MGET {i}"
        );
    }
}

#[test]
fn garbage_closes_that_client_only() {
    let cluster = RealCluster::start(3, 0, &[]);
    let port = start_proxy(&[cluster.nodes[0].port()]);
    let mut good = Client::connect(port);
    assert_eq!(
        good.command(&argv("SET x 1")),
        Frame::SimpleString("OK".into())
    );
    let mut bad = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    bad.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    bad.write_all(b"*2\r\n$3\r\nGET\r\n$abc\r\nxyz\r\n")
        .expect("write");
    let mut reply = Vec::new();
    bad.read_to_end(&mut reply)
        .expect("the proxy closes the connection");
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("-ERR Protocol error"), "{reply:?}");
    assert_eq!(good.command(&argv("GET x")), Frame::BulkString("1".into()));
}
