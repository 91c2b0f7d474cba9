//! The toy proxy against the real `nutcracker` (twemproxy), both reading the same YAML file:
//! for every hash × distribution, the same keys (binary bytes, hash tags, every tail length)
//! land on the same server through nutcracker, through our proxy, and where our continuum
//! says; a multi-key MGET across servers answers the same through both.

mod support;

mod toy_proxy;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis_cluster_proto::resp::Frame;
use redis_cluster_proto::route::twemproxy::{Continuum, Distribution, Hash, Weighted};
use support::{Client, RedisServer, free_ports};

/// A `nutcracker` child process, killed on drop.
struct Nutcracker {
    child: Child,
    dir: std::path::PathBuf,
}

impl Drop for Nutcracker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts nutcracker with the YAML `conf`, listening on `ports`.
fn nutcracker(conf: &str, ports: &[u16]) -> Nutcracker {
    let port = ports[0];
    let dir = std::env::temp_dir().join(format!(
        "redis-cluster-proto-nutcracker-{}-{port}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let path = dir.join("nutcracker.yml");
    std::fs::write(&path, conf).expect("write the configuration");
    // A stats port that is none of the pools' ports.
    let stats = free_ports(ports.len() + 1)
        .into_iter()
        .find(|p| !ports.contains(p))
        .expect("one more port than the pools have");
    let child = Command::new("nutcracker")
        .arg("-c")
        .arg(&path)
        .args(["-s", &stats.to_string(), "-a", "127.0.0.1"])
        .arg("-o")
        .arg(dir.join("nutcracker.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nutcracker runs (bash .ci/test installs it)");
    let mut started = Nutcracker { child, dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    for &port in ports {
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let exited = started.child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() >= deadline {
                let log = std::fs::read_to_string(started.dir.join("nutcracker.log"));
                panic!("nutcracker did not listen on {port} ({exited:?}): {log:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    started
}

/// One pool per hash × distribution over `lines`, listening on `ports` in that order.
fn yaml(lines: &[String], ports: &[u16]) -> String {
    let mut conf = String::new();
    let combos = Hash::ALL
        .iter()
        .flat_map(|(h, _)| ["ketama", "modula"].map(move |d| (*h, d)));
    for ((hash, distribution), port) in combos.zip(ports) {
        conf.push_str(&format!(
            "{hash}_{distribution}:\n  listen: 127.0.0.1:{port}\n  hash: {hash}\n  \
             distribution: {distribution}\n  hash_tag: \"{{}}\"\n  redis: true\n  servers:\n"
        ));
        for line in lines {
            conf.push_str(&format!("   - {line}\n"));
        }
    }
    conf
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
    let combos: Vec<(&str, Hash, &str, Distribution)> = Hash::ALL
        .iter()
        .flat_map(|&(name, hash)| {
            [
                ("ketama", Distribution::Ketama),
                ("modula", Distribution::Modula),
            ]
            .map(move |(d, distribution)| (name, hash, d, distribution))
        })
        .collect();
    let ports = free_ports(combos.len());
    let conf = yaml(&lines, &ports);
    let _twemproxy = nutcracker(&conf, &ports);
    let ours = toy_proxy::start(&yaml(&lines, &vec![0; ports.len()]));
    let mut clients: Vec<Client> = servers.iter().map(|s| s.client()).collect();
    // Where each key is, after SETs through a proxy's pool.
    let mut placed = |port: u16| -> Vec<Vec<usize>> {
        for client in clients.iter_mut() {
            assert_eq!(
                client.command(&[b"FLUSHALL"]),
                Frame::SimpleString("OK".into())
            );
        }
        let mut client = Client::connect(port);
        for key in &keys {
            let reply = client.command(&[b"SET", key, b"1"]);
            assert_eq!(reply, Frame::SimpleString("OK".into()), "SET");
        }
        keys.iter()
            .map(|key| {
                (0..3)
                    .filter(|&i| clients[i].command(&[b"EXISTS", key]) == Frame::Integer(1))
                    .collect()
            })
            .collect()
    };
    for (at, (hash_name, hash, distribution_name, distribution)) in combos.iter().enumerate() {
        let continuum = Continuum::new(*distribution, &weighted);
        let theirs = placed(ports[at]);
        let mine = placed(ours[at]);
        for ((key, theirs), mine) in keys.iter().zip(&theirs).zip(&mine) {
            let expected = continuum.server_for(*hash, Some(*b"{}"), key, 0);
            let key = String::from_utf8_lossy(key);
            assert_eq!(
                theirs,
                &vec![expected],
                "{hash_name}/{distribution_name}: {key:?}"
            );
            assert_eq!(
                mine, theirs,
                "ours, {hash_name}/{distribution_name}: {key:?}"
            );
        }
        // Both proxies see the same data now: a multi-key MGET across servers agrees.
        let mget: Vec<&[u8]> = std::iter::once(&b"MGET"[..])
            .chain(keys.iter().take(25).map(Vec::as_slice))
            .chain(std::iter::once(&b"missing"[..]))
            .collect();
        let (a, b) = (
            Client::connect(ours[at]).command(&mget),
            Client::connect(ports[at]).command(&mget),
        );
        assert_eq!(a, b, "MGET, {hash_name}/{distribution_name}");
    }
}

/// The argument lists the command table is probed with: the name, then `extra` arguments
/// (a key, then numbers, so that counts and scores parse).
fn probe(name: &str, extra: usize) -> Vec<Vec<u8>> {
    let mut argv = vec![name.as_bytes().to_vec()];
    for i in 0..extra {
        argv.push(if i == 0 {
            b"k".to_vec()
        } else {
            i.to_string().into_bytes()
        });
    }
    argv
}

/// Sends one command on a fresh connection: `true` when a reply came back, `false` when the
/// connection was closed without one.
fn answered(port: u16, argv: &[Vec<u8>]) -> bool {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut out = Vec::new();
    redis_cluster_proto::resp::encode_command(argv, &mut out);
    stream.write_all(&out).expect("write");
    let mut byte = [0u8; 1];
    matches!(stream.read(&mut byte), Ok(1))
}

/// Which argument counts nutcracker 0.5.0 accepts for every Redis 7.0 command (it closes the
/// connection on anything else), read from the real binary: the table the toy proxy's
/// nutcracker pools follow. `REGENERATE_NUTCRACKER=1` rewrites the table; otherwise the test
/// fails when the binary and the table disagree, or when our proxy answers (or closes)
/// differently from nutcracker for any probe.
#[test]
fn commands_are_accepted_or_refused_as_nutcracker_does() {
    let server = RedisServer::start_standalone(&[]);
    let port = free_ports(1)[0];
    let conf = format!(
        "alpha:\n  listen: 127.0.0.1:{port}\n  redis: true\n  servers:\n   - 127.0.0.1:{}:1\n",
        server.port()
    );
    let _twemproxy = nutcracker(&conf, &[port]);
    let ours = toy_proxy::start(&conf.replace(&format!(":{port}\n"), ":0\n"))[0];
    let mut table = String::new();
    let mut differences = Vec::new();
    for spec in redis_cluster_proto::route::CommandTable::REDIS_7_0.commands() {
        // Commands that would disturb the probes that follow.
        if [
            "shutdown",
            "debug",
            "monitor",
            "subscribe",
            "psubscribe",
            "ssubscribe",
            "sync",
            "psync",
            "replicaof",
            "slaveof",
            "failover",
            "client",
        ]
        .contains(&spec.name)
        {
            continue;
        }
        let mut mask = 0u8;
        for extra in 0..8 {
            let argv = probe(spec.name, extra);
            let theirs = answered(port, &argv);
            if theirs {
                mask |= 1 << extra;
            }
            let mine = answered(ours, &argv);
            if mine != theirs {
                differences.push(format!(
                    "{} +{extra}: nutcracker {theirs}, ours {mine}",
                    spec.name
                ));
            }
            // Blocking commands wait for their timeout argument ("1" second at most).
        }
        if mask != 0 {
            table.push_str(&format!("{} {mask:08b}\n", spec.name));
        }
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/redis-cluster-proxy/src/proxy/nutcracker-commands.txt");
    if std::env::var_os("REGENERATE_NUTCRACKER").is_some() {
        std::fs::write(&path, &table).expect("write the table");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        committed, table,
        "nutcracker accepts other commands than the table says"
    );
    assert!(differences.is_empty(), "{differences:#?}");
}
