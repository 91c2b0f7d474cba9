//! The toy proxy's nutcracker (twemproxy) key distribution against the real `nutcracker`:
//! for every hash × distribution it shards, the same keys (binary bytes, hash tags, every
//! tail length) land on the same server through nutcracker as our continuum says.

mod support;

#[path = "../examples/toy-proxy/proxy/hashkit.rs"]
#[allow(dead_code)]
mod hashkit;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hashkit::{Continuum, Distribution, Hash, Weighted};
use redis_cluster_proto::resp::Frame;
use support::{Client, RedisServer};

/// A `nutcracker` child process, killed on drop.
struct Nutcracker {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Drop for Nutcracker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts nutcracker with one pool over `servers` (`host:port:weight [name]` lines).
fn nutcracker(hash: &str, distribution: &str, servers: &[String]) -> Nutcracker {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!(
        "redis-cluster-proto-nutcracker-{}-{port}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let mut conf = format!(
        "pool:\n  listen: 127.0.0.1:{port}\n  hash: {hash}\n  distribution: {distribution}\n  \
         hash_tag: \"{{}}\"\n  redis: true\n  servers:\n"
    );
    for server in servers {
        conf.push_str(&format!("   - {server}\n"));
    }
    let path = dir.join("nutcracker.yml");
    std::fs::write(&path, conf).expect("write the configuration");
    let child = Command::new("nutcracker")
        .arg("-c")
        .arg(&path)
        .args(["-s", &free_port().to_string(), "-a", "127.0.0.1"])
        .arg("-o")
        .arg(dir.join("nutcracker.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nutcracker runs (bash .ci/test installs it)");
    let started = Nutcracker { child, port, dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nutcracker did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    started
}

/// Keys with every tail length, bytes above 0x7f (read as signed `char` by some hashes),
/// hash tags, and an empty tag.
fn keys() -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    for i in 0..120u32 {
        keys.push(format!("key:{i}").into_bytes());
    }
    for len in 1..=40usize {
        keys.push(
            (0..len)
                .map(|j| (j as u8).wrapping_mul(37).wrapping_add(0x80))
                .collect(),
        );
    }
    for i in 0..20 {
        keys.push(format!("{{user{i}}}:profile").into_bytes());
        keys.push(format!("a{{}}b{i}").into_bytes());
    }
    keys.push("é{ü}ß".as_bytes().to_vec());
    keys
}

#[test]
fn every_hash_and_distribution_places_keys_as_nutcracker_does() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start_standalone(&[])).collect();
    // Weights 1, 2, 1; the third server named (its name makes its ketama points).
    let lines = vec![
        format!("127.0.0.1:{}:1", servers[0].port()),
        format!("127.0.0.1:{}:2", servers[1].port()),
        format!("127.0.0.1:{}:1 named", servers[2].port()),
    ];
    let weighted = vec![
        Weighted {
            name: format!("127.0.0.1:{}", servers[0].port()),
            weight: 1,
        },
        Weighted {
            name: format!("127.0.0.1:{}", servers[1].port()),
            weight: 2,
        },
        Weighted {
            name: "named".into(),
            weight: 1,
        },
    ];
    let keys = keys();
    for (hash_name, hash) in Hash::ALL {
        for (distribution_name, distribution) in [
            ("ketama", Distribution::Ketama),
            ("modula", Distribution::Modula),
        ] {
            for server in &servers {
                assert_eq!(
                    server.client().command(&[b"FLUSHALL"]),
                    Frame::SimpleString("OK".into())
                );
            }
            let proxy = nutcracker(hash_name, distribution_name, &lines);
            let mut client = Client::connect(proxy.port);
            for key in &keys {
                let reply = client.command(&[b"SET", key, b"1"]);
                assert_eq!(reply, Frame::SimpleString("OK".into()), "{hash_name} SET");
            }
            let continuum = Continuum::new(distribution, &weighted);
            let mut clients: Vec<Client> = servers.iter().map(|s| s.client()).collect();
            for key in &keys {
                let holders: Vec<usize> = (0..3)
                    .filter(|&i| clients[i].command(&[b"EXISTS", key]) == Frame::Integer(1))
                    .collect();
                let ours = continuum.server_for(hash, Some(*b"{}"), key, 0);
                assert_eq!(
                    holders,
                    vec![ours],
                    "{hash_name}/{distribution_name}: key {:?}",
                    String::from_utf8_lossy(key)
                );
            }
        }
    }
}
