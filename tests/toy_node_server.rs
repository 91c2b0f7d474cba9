//! The toy node started, configured and persisted as redis-server 7.0.15 is, checked side by
//! side with the real server (issue #22): the fatal configuration errors, CONFIG GET's names,
//! CONFIG SET's errors, nodes.conf after the same CLUSTER commands (read right after each
//! reply: it is saved before the reply), a SIGKILL right after ADDSLOTSRANGE, CONFIG REWRITE
//! read back at a restart, the log's line format, SIGTERM and the pidfile.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis_cluster_proto::resp::Frame;
use support::{Client, RedisServer, free_ports, text, toy_node_binary};

/// A toy node process and its scratch directory, killed and removed on drop.
struct Toy {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Toy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toy-server-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Starts the toy with `args` after its port, bus port and `dir`, its log in `dir/log.txt`.
fn spawn(dir: &Path, port: u16, cport: u16, args: &[&str]) -> Child {
    let child = Command::new(toy_node_binary())
        .args(args)
        .args([
            "--port",
            &port.to_string(),
            "--cluster-port",
            &cport.to_string(),
        ])
        .arg("--dir")
        .arg(dir)
        .args(["--logfile", "log.txt"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start toy-node");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "toy node on {port} never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn toy(name: &str, args: &[&str]) -> Toy {
    let dir = scratch(name);
    let ports = free_ports(2);
    let child = spawn(&dir, ports[0], ports[1], args);
    Toy {
        child,
        port: ports[0],
        dir,
    }
}

fn command(client: &mut Client, line: &str) -> Frame {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    client.command(&args)
}

/// The fatal error block a server prints for a bad configuration, without what precedes it.
fn fatal_error(program: &Path, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the server");
    assert_eq!(output.status.code(), Some(1), "{program:?} {args:?}");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    match stderr.find("*** FATAL CONFIG FILE ERROR") {
        Some(at) => stderr[at..].trim_end().to_string(),
        None => panic!("{program:?} {args:?}: no fatal error in {stderr:?}"),
    }
}

#[test]
fn a_bad_configuration_stops_both_with_the_same_words() {
    let real = PathBuf::from("redis-server");
    let dir = scratch("fatal");
    let file = dir.join("bad.conf");
    let cases: &[(&str, &[&str])] = &[
        ("", &["--appendonly", "maybe"]),
        ("", &["--port", "70000"]),
        ("", &["--maxmemory", "1x"]),
        ("", &["--loglevel", "loud"]),
        ("", &["--no-such-directive", "1"]),
        ("", &["--save", "900"]),
        ("", &["--client-output-buffer-limit", "foo", "1", "2", "3"]),
        ("", &["--cluster-node-timeout", "soon"]),
        ("", &["--dir", "/nonexistent/toy-node"]),
        ("port 7000\nappendonly \"yes\"x\n", &[]),
        ("# a comment\n\nslave-read-only perhaps\n", &[]),
        ("port 7000\n", &["--hz", "ten"]),
    ];
    for (text, args) in cases {
        let mut argv: Vec<&str> = Vec::new();
        let path = file.display().to_string();
        if !text.is_empty() {
            std::fs::write(&file, text).expect("write the file");
            argv.push(&path);
        }
        argv.extend_from_slice(args);
        let theirs = fatal_error(&real, &argv);
        let ours = fatal_error(&toy_node_binary(), &argv);
        assert_eq!(ours, theirs, "{text:?} {args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_get_and_set_answer_as_the_real_server() {
    let real = RedisServer::start_cluster(&[]);
    let ours = toy("config", &[]);
    let mut clients = [Client::connect(ours.port), real.client()];
    // The same 192 names (aliases included), and the same values where neither start-up
    // nor the machine decides them.
    let names = |client: &mut Client| -> Vec<(String, String)> {
        let Frame::Array(items) = command(client, "CONFIG GET *") else {
            panic!("CONFIG GET * is an array");
        };
        let mut pairs: Vec<(String, String)> = items
            .chunks(2)
            .map(|pair| (text(&pair[0]), text(&pair[1])))
            .collect();
        pairs.sort();
        pairs
    };
    let [toy_pairs, real_pairs] = [names(&mut clients[0]), names(&mut clients[1])];
    let toy_names: Vec<&String> = toy_pairs.iter().map(|(n, _)| n).collect();
    let real_names: Vec<&String> = real_pairs.iter().map(|(n, _)| n).collect();
    assert_eq!(toy_names, real_names);
    assert_eq!(toy_names.len(), 192);
    // Set by each one's start-up (ports, files, paths, persistence) or by the machine.
    let started = [
        "port",
        "cluster-port",
        "dir",
        "logfile",
        "save",
        "appendonly",
        "bind",
        "cluster-config-file",
        "daemonize",
        "protected-mode",
        "io-threads",
        "pidfile",
    ];
    for ((name, ours), (_, theirs)) in toy_pairs.iter().zip(&real_pairs) {
        if !started.contains(&name.as_str()) {
            assert_eq!(ours, theirs, "CONFIG GET {name}");
        }
    }
    // Patterns, several at once, any case; a name without a wildcard comes back as given.
    // The order is the server's hash table's: compared sorted.
    for line in [
        "CONFIG GET cluster-*-timeout",
        "CONFIG GET MAXMEMORY hz",
        "CONFIG GET nosuch",
        "CONFIG GET Slave-Priority *priority",
        "CONFIG GET key-load-delay",
    ] {
        let replies: Vec<Vec<(String, String)>> = clients
            .iter_mut()
            .map(|c| match command(c, line) {
                Frame::Array(items) => {
                    let mut pairs: Vec<(String, String)> = items
                        .chunks(2)
                        .map(|pair| (text(&pair[0]), text(&pair[1])))
                        .collect();
                    pairs.sort();
                    pairs
                }
                other => panic!("{line}: {other:?}"),
            })
            .collect();
        assert_eq!(replies[0], replies[1], "{line}");
    }
    // CONFIG SET: the errors, all or nothing, values read back as the server writes them.
    for line in [
        "CONFIG SET appendfsync sometimes",
        "CONFIG SET nosuch 1",
        "CONFIG SET daemonize yes",
        "CONFIG SET hz 20 hz 30",
        "CONFIG SET maxmemory 10mb lazyfree-lazy-eviction maybe",
        "CONFIG GET maxmemory",
        "CONFIG SET maxmemory 10mb cluster-node-timeout 4321",
        "CONFIG GET maxmemory",
        "CONFIG GET cluster-node-timeout",
        "CONFIG SET slave-priority 7",
        "CONFIG GET replica-priority",
        "CONFIG SET cluster-slave-validity-factor 3",
        "CONFIG GET cluster-replica-validity-factor",
        "CONFIG SET hz",
        "CONFIG SET cluster-announce-hostname with_underscore",
        "CONFIG SET cluster-announce-hostname ?.com",
        "CONFIG SET cluster-announce-hostname abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.",
        "CONFIG SET cluster-announce-hostname toy-1.example",
        "CONFIG GET cluster-announce-hostname",
        "CONFIG RESETSTAT",
    ] {
        let replies: Vec<Frame> = clients.iter_mut().map(|c| command(c, line)).collect();
        assert_eq!(replies[0], replies[1], "{line}");
    }
    let long = "x".repeat(256);
    let replies: Vec<Frame> = clients
        .iter_mut()
        .map(|c| {
            c.command(&[
                b"CONFIG",
                b"SET",
                b"cluster-announce-hostname",
                long.as_bytes(),
            ])
        })
        .collect();
    assert_eq!(replies[0], replies[1], "a hostname of 256 characters");
    // Values of one argument with spaces in it, each followed by the value read back.
    for (name, value) in [
        (
            "client-output-buffer-limit",
            "pubsub 1Kb 2MB +3 SLAVE 4 5 6",
        ),
        ("client-output-buffer-limit", "normal -1 0 0"),
        ("client-output-buffer-limit", "pubsub 1x 2 3"),
        ("client-output-buffer-limit", "pubsub 10 20 -1"),
        ("client-output-buffer-limit", "pubsub 1 2 3  normal 0 0 0"),
        ("client-output-buffer-limit", "master 1 2 3"),
        ("client-output-buffer-limit", "bogus 1x 2 3"),
        ("client-output-buffer-limit", "pubsub 7 8 9 normal 1x 0 0"),
        ("client-output-buffer-limit", ""),
        ("maxmemory", "-1"),
        ("maxmemory", "+5"),
        ("maxmemory", "1gB"),
    ] {
        for line in [
            &[&b"CONFIG"[..], b"SET", name.as_bytes(), value.as_bytes()][..],
            &[b"CONFIG", b"GET", name.as_bytes()],
        ] {
            let replies: Vec<Frame> = clients.iter_mut().map(|c| c.command(line)).collect();
            assert_eq!(replies[0], replies[1], "{name} {value:?}");
        }
    }
    // What the toy cannot change live is refused, not taken in silence.
    for line in [
        "CONFIG SET dir /tmp",
        "CONFIG SET dbfilename other.rdb",
        "CONFIG SET port 1",
    ] {
        let reply = command(&mut clients[0], line);
        assert!(
            text(&reply).starts_with("ERR CONFIG SET failed (possibly related to argument"),
            "{line}: {reply:?}"
        );
    }
}

/// nodes.conf with each node's id and the address field made comparable: the real server
/// writes an empty IP until a peer tells it its own, the toy the one it binds.
fn normalized(path: &Path, id: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|line| {
            let mut fields: Vec<String> = line.split(' ').map(String::from).collect();
            if fields.len() > 2 && fields[0] == id {
                fields[1] = "ADDRESS".into();
            }
            fields.join(" ").replace(id, "MYID")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn nodes_conf_is_saved_before_the_reply_and_matches_the_real_servers() {
    let real = RedisServer::start_cluster(&[]);
    let ours = toy("nodes-conf", &["--cluster-config-file", "nodes.conf"]);
    let mut toy_client = Client::connect(ours.port);
    let mut real_client = real.client();
    let toy_id = text(&command(&mut toy_client, "CLUSTER MYID"));
    let real_id = text(&command(&mut real_client, "CLUSTER MYID"));
    for line in [
        "CLUSTER ADDSLOTSRANGE 0 16383",
        "CLUSTER SET-CONFIG-EPOCH 7",
        "CLUSTER DELSLOTSRANGE 100 200 300 310",
        "CLUSTER DELSLOTS 5 6",
        "CLUSTER ADDSLOTS 5",
        "CLUSTER BUMPEPOCH",
        "CLUSTER FLUSHSLOTS",
        "CLUSTER ADDSLOTSRANGE 0 999",
    ] {
        let ours_reply = command(&mut toy_client, line);
        let theirs_reply = command(&mut real_client, line);
        assert_eq!(ours_reply, theirs_reply, "{line}");
        // Read at once: the file was written before the reply left.
        let ours_file = normalized(&ours.dir.join("nodes.conf"), &toy_id);
        let theirs_file = normalized(&real.dir().join("nodes.conf"), &real_id);
        assert_eq!(ours_file, theirs_file, "nodes.conf after {line}");
    }
    assert!(
        !ours.dir.join("nodes.conf.tmp").exists(),
        "the temporary file is renamed"
    );
}

#[test]
fn a_node_killed_right_after_addslotsrange_restarts_owning_its_slots() {
    let mut ours = toy("sigkill", &["--cluster-config-file", "nodes.conf"]);
    let mut client = Client::connect(ours.port);
    let id = text(&command(&mut client, "CLUSTER MYID"));
    assert_eq!(
        text(&command(&mut client, "CLUSTER ADDSLOTSRANGE 0 16383")),
        "OK"
    );
    ours.child.kill().expect("SIGKILL");
    ours.child.wait().expect("reaped");
    // The same ports again: the bus port is the one nodes.conf names.
    let bus = {
        let conf = std::fs::read_to_string(ours.dir.join("nodes.conf")).expect("nodes.conf");
        let address = conf.split(' ').nth(1).unwrap_or_default().to_string();
        address
            .split(['@', ','])
            .nth(1)
            .and_then(|p| p.parse::<u16>().ok())
            .expect("the bus port in nodes.conf")
    };
    ours.child = spawn(
        &ours.dir,
        ours.port,
        bus,
        &["--cluster-config-file", "nodes.conf"],
    );
    let mut client = Client::connect(ours.port);
    assert_eq!(text(&command(&mut client, "CLUSTER MYID")), id);
    let nodes = text(&command(&mut client, "CLUSTER NODES"));
    assert!(
        nodes.contains("myself,master - 0 0 0 connected 0-16383"),
        "{nodes}"
    );
    wait_ok(&mut client);
}

fn wait_ok(client: &mut Client) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !text(&command(client, "CLUSTER INFO")).contains("cluster_state:ok") {
        assert!(Instant::now() < deadline, "the node never came up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn config_rewrite_is_read_back_at_the_next_start() {
    let dir = scratch("rewrite");
    let file = dir.join("redis.conf");
    let ports = free_ports(2);
    std::fs::write(
        &file,
        "# kept as it is\nport 1\ncluster-node-timeout 5000\nslave-read-only yes\n\
         include \"/dev/null\"\n",
    )
    .expect("write redis.conf");
    let path = file.display().to_string();
    let mut child = spawn(&dir, ports[0], ports[1], &[&path]);
    let mut client = Client::connect(ports[0]);
    for line in [
        "CONFIG SET cluster-node-timeout 1234 maxmemory 2mb replica-read-only no",
        "CONFIG SET cluster-announce-hostname toy-1.example masterauth a\\sb",
    ] {
        let line = line.replace("\\s", "\u{1}");
        let args: Vec<Vec<u8>> = line
            .split(' ')
            .map(|a| a.replace('\u{1}', " ").into_bytes())
            .collect();
        let argv: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        assert_eq!(text(&client.command(&argv)), "OK", "{line}");
    }
    // Set live: CLUSTER NODES shows the hostname the node announces now.
    let nodes = text(&command(&mut client, "CLUSTER NODES"));
    assert!(nodes.contains(",toy-1.example "), "{nodes}");
    assert_eq!(text(&command(&mut client, "CONFIG REWRITE")), "OK");
    let rewritten = std::fs::read_to_string(&file).expect("the rewritten file");
    assert!(rewritten.starts_with("# kept as it is\n"), "{rewritten}");
    assert!(
        rewritten.contains("\ncluster-node-timeout 1234\n"),
        "{rewritten}"
    );
    // An old name's line is rewritten under the new name, as the server does.
    assert!(
        rewritten.contains("\nreplica-read-only no\n"),
        "{rewritten}"
    );
    assert!(!rewritten.contains("slave-read-only"), "{rewritten}");
    assert!(rewritten.contains("\nmaxmemory 2mb\n"), "{rewritten}");
    assert!(
        rewritten.contains("\ncluster-announce-hostname \"toy-1.example\"\n"),
        "{rewritten}"
    );
    assert!(rewritten.contains("\nmasterauth \"a b\"\n"), "{rewritten}");
    assert!(
        rewritten.contains("\ninclude \"/dev/null\"\n"),
        "{rewritten}"
    );
    let _ = child.kill();
    let _ = child.wait();
    // The arguments after the file override it, as before.
    let mut child = spawn(&dir, ports[0], ports[1], &[&path]);
    let mut client = Client::connect(ports[0]);
    for (name, value) in [
        ("cluster-node-timeout", "1234"),
        ("maxmemory", "2097152"),
        ("slave-read-only", "no"),
        ("cluster-announce-hostname", "toy-1.example"),
        ("masterauth", "a b"),
    ] {
        let reply = client.command(&[b"CONFIG", b"GET", name.as_bytes()]);
        let Frame::Array(items) = reply else {
            panic!("CONFIG GET {name}");
        };
        assert_eq!(text(&items[1]), value, "{name}");
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn logs_pidfile_and_sigterm_as_the_server() {
    let dir = scratch("sigterm");
    let ports = free_ports(2);
    let pidfile = dir.join("toy.pid");
    let pidfile_arg = pidfile.display().to_string();
    let mut child = spawn(
        &dir,
        ports[0],
        ports[1],
        &[
            "--pidfile",
            &pidfile_arg,
            "--maxmemory",
            "1mb",
            "--loglevel",
            "verbose",
        ],
    );
    let pid = std::fs::read_to_string(&pidfile).expect("the pidfile");
    assert_eq!(pid.trim(), child.id().to_string());
    let mut client = Client::connect(ports[0]);
    assert_eq!(text(&command(&mut client, "CLUSTER ADDSLOTS 1")), "OK");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        assert!(Instant::now() < deadline, "SIGTERM did not stop the node");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));
    assert!(!pidfile.exists(), "the pidfile is removed at shutdown");
    let log = std::fs::read_to_string(dir.join("log.txt")).expect("log.txt");
    // `pid:role dd Mon yyyy hh:mm:ss.mmm L text`, as the server writes its lines.
    let formatted = |line: &str| -> bool {
        let Some((pid_role, rest)) = line.split_once(' ') else {
            return false;
        };
        let stamp: Vec<&str> = rest.splitn(6, ' ').collect();
        pid_role.starts_with(&format!("{}:", child.id()))
            && matches!(pid_role.chars().last(), Some('C' | 'M' | 'S'))
            && stamp.len() == 6
            && stamp[0].len() == 2
            && stamp[1].len() == 3
            && stamp[2].len() == 4
            && stamp[3].len() == 12
            && matches!(stamp[4], "." | "-" | "*" | "#")
    };
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    for line in &lines {
        assert!(
            formatted(line) || line.contains("signal-handler"),
            "{line:?}\n{log}"
        );
    }
    assert!(log.contains(" * Ready to accept connections\n"), "{log}");
    assert!(
        log.contains("'maxmemory 1048576' is kept but has no effect"),
        "{log}"
    );
    assert!(
        log.contains(" # Redis is now ready to exit, bye bye...\n"),
        "{log}"
    );
    let conf = std::fs::read_to_string(dir.join("nodes.conf")).expect("nodes.conf");
    assert!(conf.contains("connected 1\n"), "{conf}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn read_all(client: &mut Client) -> Vec<String> {
    [
        "GET s",
        "GET n",
        "LRANGE l 0 -1",
        "HGETALL h",
        "GET big",
        "EXISTS gone",
        "FUNCTION LIST",
        "DBSIZE",
    ]
    .iter()
    .map(|line| format!("{:?}", command(client, line)))
    .collect()
}

fn write_all(client: &mut Client) {
    for line in [
        "SET s hello",
        "SET n 12345",
        "RPUSH l a b c 7",
        "HSET h f1 v1 f2 22",
        "SET gone x PX 1",
        "FUNCTION LOAD #!lua\u{1}name=lib\nredis.register_function('f',function()\u{1}return\u{1}1\u{1}end)",
    ] {
        let args: Vec<Vec<u8>> = line
            .split(' ')
            .map(|a| a.replace('\u{1}', " ").into_bytes())
            .collect();
        let argv: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        assert!(
            !matches!(client.command(&argv), Frame::SimpleError(_)),
            "{line}"
        );
    }
    // Long enough that the server compresses it (LZF) in its file.
    let big = "abcdefghij".repeat(100);
    client.command(&[b"SET", b"big", big.as_bytes()]);
    client.command(&[b"PEXPIRE", b"s", b"100000000"]);
    std::thread::sleep(Duration::from_millis(5));
}

#[test]
fn the_rdb_file_reads_back_in_the_real_server_and_the_real_one_in_the_toy() {
    // The toy's file, loaded by the real server.
    let real = RedisServer::start_standalone(&["--enable-debug-command", "yes"]);
    let mut ours = toy("rdb", &["--cluster-config-file", "nodes.conf"]);
    let mut toy_client = Client::connect(ours.port);
    assert_eq!(
        text(&command(&mut toy_client, "CLUSTER ADDSLOTSRANGE 0 16383")),
        "OK"
    );
    wait_ok(&mut toy_client);
    write_all(&mut toy_client);
    assert_eq!(text(&command(&mut toy_client, "SAVE")), "OK");
    let mut real_client = real.client();
    std::fs::copy(ours.dir.join("dump.rdb"), real.dir().join("dump.rdb")).expect("copy");
    assert_eq!(
        text(&command(&mut real_client, "DEBUG RELOAD NOSAVE")),
        "OK"
    );
    let expected = read_all(&mut toy_client);
    assert_eq!(read_all(&mut real_client), expected);
    let ttl = command(&mut real_client, "PTTL s");
    assert!(
        matches!(ttl, Frame::Integer(ms) if ms > 1_000_000),
        "{ttl:?}"
    );

    // The real server's file (its own encodings), loaded by the toy at start.
    assert_eq!(text(&command(&mut real_client, "SAVE")), "OK");
    ours.child.kill().expect("SIGKILL");
    ours.child.wait().expect("reaped");
    std::fs::copy(real.dir().join("dump.rdb"), ours.dir.join("dump.rdb")).expect("copy");
    let ports = free_ports(1);
    let cport = ports[0];
    ours.child = spawn(
        &ours.dir,
        ours.port,
        cport,
        &["--cluster-config-file", "nodes.conf"],
    );
    let mut toy_client = Client::connect(ours.port);
    wait_ok(&mut toy_client);
    assert_eq!(read_all(&mut toy_client), expected);

    // SIGTERM saves (the node has save points), the next start loads.
    command(&mut toy_client, "SET after term");
    let status = Command::new("kill")
        .args(["-TERM", &ours.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    ours.child.wait().expect("reaped");
    ours.child = spawn(
        &ours.dir,
        ours.port,
        cport,
        &["--cluster-config-file", "nodes.conf"],
    );
    let mut toy_client = Client::connect(ours.port);
    wait_ok(&mut toy_client);
    assert_eq!(text(&command(&mut toy_client, "GET after")), "term");

    // A file that does not read stops the start, with the reason.
    ours.child.kill().expect("SIGKILL");
    ours.child.wait().expect("reaped");
    std::fs::write(ours.dir.join("dump.rdb"), b"REDIS0010\xfe\x00\x00\x03key").expect("write");
    let output = Command::new(toy_node_binary())
        .args([
            "--port",
            &ours.port.to_string(),
            "--cluster-port",
            &cport.to_string(),
        ])
        .arg("--dir")
        .arg(&ours.dir)
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.contains("Unrecoverable error, aborting now."),
        "{said}"
    );
}

#[test]
fn the_append_only_file_survives_sigkill_and_reads_in_the_real_server() {
    let args = [
        "--cluster-config-file",
        "nodes.conf",
        "--appendonly",
        "yes",
        "--save",
        "",
    ];
    let mut ours = toy("aof", &args);
    let mut client = Client::connect(ours.port);
    assert_eq!(
        text(&command(&mut client, "CLUSTER ADDSLOTSRANGE 0 16383")),
        "OK"
    );
    wait_ok(&mut client);
    assert_eq!(text(&command(&mut client, "SET before enabled")), "OK");
    write_all(&mut client);
    command(&mut client, "FUNCTION FLUSH");
    command(&mut client, "DEL n");
    command(&mut client, "INCR counter");
    command(&mut client, "INCR counter");
    let info = text(&command(&mut client, "INFO persistence"));
    assert!(info.contains("aof_enabled:1"), "{info}");
    let expected = read_all(&mut client);
    let counter = command(&mut client, "GET counter");

    // SIGKILL: no save at shutdown (and no save points); the file has every write.
    ours.child.kill().expect("SIGKILL");
    ours.child.wait().expect("reaped");
    let aof = ours.dir.join("appendonly.aof");
    let cport = free_ports(1)[0];
    ours.child = spawn(&ours.dir, ours.port, cport, &args);
    let mut client = Client::connect(ours.port);
    wait_ok(&mut client);
    assert_eq!(read_all(&mut client), expected);
    assert_eq!(command(&mut client, "GET counter"), counter);

    // A write cut short by a crash: the incomplete command is cut off, the rest loads.
    ours.child.kill().expect("SIGKILL");
    ours.child.wait().expect("reaped");
    let whole = std::fs::read(&aof).expect("the AOF");
    let mut cut = whole.clone();
    cut.extend_from_slice(b"*2\r\n$3\r\nDEL\r\n$1\r");
    std::fs::write(&aof, &cut).expect("write");
    ours.child = spawn(&ours.dir, ours.port, cport, &args);
    let mut client = Client::connect(ours.port);
    wait_ok(&mut client);
    assert_eq!(read_all(&mut client), expected);
    assert_eq!(
        std::fs::read(&aof).expect("the AOF"),
        whole,
        "the cut tail is gone"
    );
    let log = std::fs::read_to_string(ours.dir.join("log.txt")).expect("log.txt");
    assert!(
        log.contains("short read while loading the AOF file"),
        "{log}"
    );

    // The real server reads the file (it turns the single file into its own layout).
    let dir = scratch("aof-real");
    std::fs::copy(&aof, dir.join("appendonly.aof")).expect("copy");
    let port = free_ports(1)[0];
    let mut real = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--appendonly",
            "yes",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(&dir)
        .args(["--logfile", "redis.log"])
        .stdin(Stdio::null())
        .spawn()
        .expect("redis-server");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut real_client = loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            let mut c = Client::connect(port);
            if text(&command(&mut c, "PING")) == "PONG" {
                break c;
            }
        }
        assert!(Instant::now() < deadline, "redis-server never answered");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(read_all(&mut real_client), expected);
    assert_eq!(command(&mut real_client, "GET counter"), counter);
    let _ = real.kill();
    let _ = real.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hostile_scripts_get_errors_and_the_node_stays_up() {
    let ours = toy("hostile-lua", &["--cluster-config-file", "nodes.conf"]);
    let mut client = Client::connect(ours.port);
    assert_eq!(
        text(&command(&mut client, "CLUSTER ADDSLOTSRANGE 0 16383")),
        "OK"
    );
    wait_ok(&mut client);
    let deep = |open: &str, close: &str, n: usize| {
        format!("return {}1{}", open.repeat(n), close.repeat(n))
    };
    let scripts = [
        "local function f(n) return f(n+1) end return f(1)".to_string(),
        "local function f(n) if n > 0 then return f(n-1) + 1 else return 0 end end return f(1000)"
            .to_string(),
        deep("(", ")", 100_000),
        deep("{", "}", 100_000),
        "while true do end".to_string(),
        "local t = {} for i = 1, 1e12 do t[i] = i end".to_string(),
        "local s = 'x' for i = 1, 64 do s = s .. s end return #s".to_string(),
        "return 'unfinished".to_string(),
        "return [[unfinished".to_string(),
        "x = ".repeat(10_000),
    ];
    for script in &scripts {
        let reply = client.command(&[b"EVAL", script.as_bytes(), b"0"]);
        assert!(
            matches!(reply, Frame::SimpleError(_)),
            "{}: {reply:?}",
            &script[..script.len().min(60)]
        );
    }
    assert_eq!(text(&command(&mut client, "PING")), "PONG");
}
