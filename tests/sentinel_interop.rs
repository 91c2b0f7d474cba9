//! `redis_cluster_route::sentinel` against a real Sentinel (`redis-server --sentinel`, the
//! same binary Debian's `redis-sentinel` runs): a master, its replica and one Sentinel; the
//! replies a proxy reads to find the master parse, and a forced failover arrives as a
//! `+switch-master` event naming the replica, which Sentinel then gives as the master.

mod support;

use std::time::{Duration, Instant};

use redis_cluster_proto::resp::Frame;
use redis_cluster_proto::route::sentinel::{self, Address, Role};
use support::{Client, RedisServer};

fn local(port: u16) -> Address {
    Address {
        host: "127.0.0.1".into(),
        port,
    }
}

/// Asks until `check` holds, for at most `limit`.
fn wait_for<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn command(client: &mut Client, line: &str) -> Frame {
    let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    client.command(&argv)
}

#[test]
fn a_proxy_follows_a_sentinel_failover() {
    let master = RedisServer::start_standalone(&[]);
    let port = master.port().to_string();
    let replica = RedisServer::start_standalone(&["--replicaof", "127.0.0.1", &port]);
    let mut replica_client = replica.client();
    wait_for(Duration::from_secs(10), || {
        let reply = command(&mut replica_client, "ROLE");
        match sentinel::role(&reply).expect("ROLE parses") {
            Role::Replica {
                master: m, state, ..
            } if state == "connected" => {
                assert_eq!(m, local(master.port()));
                Some(())
            }
            Role::Replica { .. } => None,
            other => panic!("the replica says {other:?}"),
        }
    });
    let mut master_client = master.client();
    let Role::Master { replicas, .. } =
        sentinel::role(&command(&mut master_client, "ROLE")).expect("ROLE parses")
    else {
        panic!("a master")
    };
    assert_eq!(replicas.len(), 1);
    assert_eq!(replicas[0].0, local(replica.port()));

    let sentinel_server = RedisServer::start_sentinel(master.port());
    let mut client = sentinel_server.client();
    assert_eq!(
        sentinel::role(&command(&mut client, "ROLE")),
        Ok(Role::Sentinel {
            masters: vec!["mymaster".into()]
        })
    );
    let reply = command(&mut client, "SENTINEL get-master-addr-by-name mymaster");
    assert_eq!(
        sentinel::master_addr(&reply),
        Ok(Some(local(master.port())))
    );
    let reply = command(&mut client, "SENTINEL get-master-addr-by-name nosuch");
    assert_eq!(sentinel::master_addr(&reply), Ok(None));
    // Sentinel learns the replica from the master's INFO.
    wait_for(Duration::from_secs(15), || {
        let reply = command(&mut client, "SENTINEL replicas mymaster");
        let replicas = sentinel::replicas(&reply).expect("SENTINEL replicas parses");
        replicas
            .iter()
            .any(|r| r.address == local(replica.port()) && r.is_healthy())
            .then_some(())
    });

    let mut events = sentinel_server.client();
    let reply = command(&mut events, "SUBSCRIBE +switch-master");
    assert!(matches!(reply, Frame::Array(_)), "subscribed: {reply:?}");
    let reply = command(&mut client, "SENTINEL FAILOVER mymaster");
    assert_eq!(reply, Frame::SimpleString("OK".into()));
    let event = loop {
        let message = events.read_reply();
        if let Some(event) = sentinel::switch_master(&message) {
            break event;
        }
    };
    assert_eq!(event.name, "mymaster");
    assert_eq!(event.old, local(master.port()));
    assert_eq!(event.new, local(replica.port()));
    let reply = command(&mut client, "SENTINEL get-master-addr-by-name mymaster");
    assert_eq!(
        sentinel::master_addr(&reply),
        Ok(Some(local(replica.port())))
    );
}
