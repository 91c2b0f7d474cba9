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

/// Ids of a cluster's nodes, by index.
fn node_id(node: &RedisServer) -> String {
    support::info(node, b"MYID").trim().to_string()
}

/// A client that pipelines SETs and GETs of its own keys through the proxy until told to
/// stop, checking every reply; returns (commands, errors seen).
fn pipelining_client(
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<(usize, Vec<String>)> {
    std::thread::spawn(move || {
        let mut client = Client::connect(port);
        let (mut done, mut errors) = (0usize, Vec::new());
        let mut round = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            round += 1;
            let mut commands: Vec<Vec<Vec<u8>>> = Vec::new();
            for i in 0..50u64 {
                let key = format!("reshard:{}", (round * 50 + i) % 5000).into_bytes();
                let value = format!("{round}:{i}").into_bytes();
                commands.push(vec![b"SET".to_vec(), key.clone(), value]);
                commands.push(vec![b"GET".to_vec(), key]);
            }
            let refs: Vec<Vec<&[u8]>> = commands
                .iter()
                .map(|c| c.iter().map(Vec::as_slice).collect())
                .collect();
            let batch: Vec<&[&[u8]]> = refs.iter().map(Vec::as_slice).collect();
            client.send(&batch);
            for i in 0..50u64 {
                let set = client.read_reply();
                let get = client.read_reply();
                let value = Frame::BulkString(format!("{round}:{i}").into_bytes().into());
                if set != Frame::SimpleString("OK".into()) || get != value {
                    errors.push(format!("round {round} #{i}: {set:?} / {get:?}"));
                }
                done += 2;
            }
        }
        (done, errors)
    })
}

#[test]
fn a_reshard_under_a_pipelining_client_shows_it_no_error() {
    let cluster = RealCluster::start(3, 0, &[]);
    let port = start_proxy(&[cluster.nodes[0].port()]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client = pipelining_client(port, stop.clone());
    std::thread::sleep(Duration::from_millis(300));
    let (from, to) = (node_id(&cluster.nodes[0]), node_id(&cluster.nodes[1]));
    let output = Command::new("timeout")
        .args(["180", "redis-cli", "--cluster", "reshard"])
        .arg(format!("127.0.0.1:{}", cluster.nodes[0].port()))
        .args(["--cluster-from", &from, "--cluster-to", &to])
        .args(["--cluster-slots", "1000", "--cluster-yes"])
        .args(["--cluster-pipeline", "10"])
        .output()
        .expect("redis-cli runs");
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (done, errors) = client.join().expect("the client thread");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "reshard failed:\n{stdout}");
    // The slots did move: node 1 now serves 1000 more.
    let slots = |node: &RedisServer| {
        support::info(node, b"NODES")
            .lines()
            .find(|l| l.contains("myself"))
            .map(|l| l.split(' ').skip(8).count())
            .unwrap_or(0)
    };
    assert!(slots(&cluster.nodes[1]) >= 2, "no slot moved");
    println!("{done} commands through the proxy during the reshard");
    assert!(done > 1000, "the client hardly ran: {done}");
    assert!(
        errors.is_empty(),
        "{} errors: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
}

#[test]
fn a_hung_master_is_replaced_and_its_slots_served_again() {
    let cluster = RealCluster::start(3, 1, &["--cluster-node-timeout", "2000"]);
    let port = start_proxy(&[cluster.nodes[1].port(), cluster.nodes[2].port()]);
    let mut client = Client::connect(port);
    // A key of master 0 (slots 0-5460): "foo" is slot 12182, "bar" 5061.
    assert_eq!(
        client.command(&argv("SET bar before")),
        Frame::SimpleString("OK".into())
    );
    let stopped = cluster.nodes[0].pid().to_string();
    let status = Command::new("kill").args(["-STOP", &stopped]).status();
    assert!(status.is_ok_and(|s| s.success()), "SIGSTOP");
    let began = std::time::Instant::now();
    let mut first_error = None;
    let served_again = loop {
        assert!(
            began.elapsed() < Duration::from_secs(90),
            "not served again within 90 s"
        );
        let reply = client.command(&argv("SET bar after"));
        if reply == Frame::SimpleString("OK".into()) && began.elapsed() > Duration::from_secs(1) {
            break began.elapsed();
        }
        if !matches!(reply, Frame::SimpleString(_)) && first_error.is_none() {
            first_error = Some((began.elapsed(), reply));
        }
    };
    let _ = Command::new("kill").args(["-CONT", &stopped]).status();
    println!(
        "master 0 stopped: its slots were served again after {served_again:?} \
         (first error to the client: {first_error:?})"
    );
    assert_eq!(
        client.command(&argv("GET bar")),
        Frame::BulkString("after".into())
    );
    // The replica took over: it is a master now.
    let promoted = support::info(&cluster.nodes[3], b"NODES");
    assert!(
        promoted
            .lines()
            .any(|l| l.contains("myself,master") && l.split(' ').count() > 8),
        "{promoted}"
    );
}
