//! The blocking `std::net` client (`examples/cluster-client`), a second driver of the
//! `redis-cluster-client` engine, against a real 3-master Redis Cluster: commands of every
//! routing kind, then a client that keeps writing and reading while `redis-cli --cluster
//! reshard` moves 1000 slots, with no error and every value read back.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis_cluster_proto::resp::Frame;
use support::{RealCluster, example_binary};

fn binary() -> std::path::PathBuf {
    example_binary(
        "cluster-client",
        &[
            "examples/cluster-client",
            "crates/redis-cluster-client/src",
            "crates/redis-cluster-route/src",
        ],
    )
}

/// One command through the example, its reply line.
fn run(seed: u16, args: &str) -> String {
    let output = Command::new("timeout")
        .arg("20")
        .arg(binary())
        .arg(format!("127.0.0.1:{seed}"))
        .args(args.split(' '))
        .output()
        .expect("the example runs");
    String::from_utf8_lossy(&output.stdout)
        .trim_end_matches('\n')
        .to_string()
}

#[test]
fn commands_of_every_routing_kind_answer_as_one_server() {
    let cluster = RealCluster::start(3, 0, &[]);
    let seed = cluster.nodes[0].port();
    assert_eq!(run(seed, "SET foo bar"), "OK");
    assert_eq!(run(seed, "GET foo"), "bar");
    assert_eq!(run(seed, "MSET a 1 b 2 c 3 d 4"), "OK");
    assert_eq!(run(seed, "MGET a b nope c d"), "[1, 2, (nil), 3, 4]");
    assert_eq!(run(seed, "DEL a b c nope"), "3");
    assert_eq!(run(seed, "DBSIZE"), "2");
    assert_eq!(
        run(seed, "MSETNX x 1 y 2"),
        "(error) CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(
        run(seed, "NOSUCH thing"),
        "(error) ERR unknown command 'NOSUCH', with args beginning with: 'thing' "
    );
    // The server's own name and version (redis 7.0.15 or 8.2.3, valkey 8.1.8 or 9.1.2), as
    // it answers HELLO itself.
    let hello = cluster.nodes[0].client().command(&[b"HELLO", b"3"]);
    let Frame::Map(pairs) = hello else {
        panic!("HELLO 3 is a map: {hello:?}");
    };
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(key, _)| matches!(key, Frame::BulkString(k) if k.as_ref() == name.as_bytes()))
            .map(|(_, value)| match value {
                Frame::BulkString(text) => String::from_utf8_lossy(text).into_owned(),
                other => format!("{other:?}"),
            })
            .unwrap_or_default()
    };
    let expected = format!(
        "{{server: {}, version: {}, proto: 3",
        field("server"),
        field("version")
    );
    let answer = run(seed, "HELLO 3");
    assert!(answer.starts_with(&expected), "{answer} / {expected}");
}

#[test]
fn a_reshard_under_the_blocking_client_shows_it_no_error() {
    let cluster = RealCluster::start(3, 0, &[]);
    let mut child = Command::new(binary())
        .arg(format!("127.0.0.1:{}", cluster.nodes[0].port()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the example starts");
    let mut input = child.stdin.take().expect("stdin");
    let mut output = BufReader::new(child.stdout.take().expect("stdout"));
    let stop = Arc::new(AtomicBool::new(false));
    let stopper = stop.clone();
    let client = std::thread::spawn(move || {
        let (mut done, mut errors) = (0usize, Vec::new());
        let mut i = 0u64;
        while !stopper.load(Ordering::Relaxed) || i < 2000 {
            let key = format!("reshard:{}", i % 3000);
            writeln!(input, "SET {key} {i}\nGET {key}").expect("the client reads");
            let mut set = String::new();
            let mut get = String::new();
            output.read_line(&mut set).expect("a reply");
            output.read_line(&mut get).expect("a reply");
            if set.trim_end() != "OK" || get.trim_end() != i.to_string() {
                errors.push(format!("#{i}: {} / {}", set.trim_end(), get.trim_end()));
            }
            done += 2;
            i += 1;
        }
        (done, errors)
    });
    std::thread::sleep(Duration::from_millis(300));
    support::reshard(&cluster, 0, 1, 1000);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (done, errors) = client.join().expect("the client thread");
    let _ = child.kill();
    let _ = child.wait();
    support::assert_served_through_reshard(&cluster.nodes[1], done, &errors, "the engine");
}
