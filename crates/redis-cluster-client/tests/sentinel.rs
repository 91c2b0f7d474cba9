//! The Sentinel follower against scripted Sentinels and masters, no sockets: discovery checked
//! with ROLE, a failover held from its first sign on any Sentinel until the switch, a hold
//! that ends by itself, a candidate that is not a master yet, and silent or failed links.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use redis_cluster_client::ConnId;
use redis_cluster_client::sentinel::{Follower, FollowerConfig, Output};
use redis_cluster_route::Endpoint;
use redis_resp::{Decoder, Frame, encode};

fn endpoint(port: u16) -> Endpoint {
    Endpoint {
        host: "127.0.0.1".into(),
        port,
        ..Endpoint::default()
    }
}

fn bulk(s: &str) -> Frame {
    Frame::BulkString(Bytes::copy_from_slice(s.as_bytes()))
}

/// Who answers on each connection, and what it was asked.
struct World {
    follower: Follower,
    now: Instant,
    conns: BTreeMap<ConnId, (u16, Decoder, BytesMut)>,
    /// The master each Sentinel names for g1, and the ports that say ROLE master.
    named: u16,
    masters: Vec<u16>,
    outputs: Vec<Output>,
    refuse: Vec<u16>,
}

impl World {
    fn new(sentinels: &[u16], tune: impl FnOnce(&mut FollowerConfig)) -> Self {
        let mut config = FollowerConfig::new(
            sentinels.iter().map(|p| endpoint(*p)).collect(),
            vec!["g1".into()],
        );
        tune(&mut config);
        let now = Instant::now();
        Self {
            follower: Follower::new(config, now),
            now,
            conns: BTreeMap::new(),
            named: 7000,
            masters: vec![7000],
            outputs: Vec::new(),
            refuse: Vec::new(),
        }
    }

    /// Drains outputs and writes; every command gets its scripted answer.
    fn run(&mut self) {
        for _ in 0..100 {
            let mut busy = false;
            while let Some(output) = self.follower.poll_output() {
                busy = true;
                match &output {
                    Output::Connect { conn, endpoint } if self.refuse.contains(&endpoint.port) => {
                        self.follower.handle_closed(self.now, *conn, "refused");
                    }
                    Output::Connect { conn, endpoint } => {
                        self.conns
                            .insert(*conn, (endpoint.port, Decoder::new(), BytesMut::new()));
                        self.follower.handle_connected(self.now, *conn);
                    }
                    Output::Close { conn } => {
                        self.conns.remove(conn);
                    }
                    _ => self.outputs.push(output.clone()),
                }
            }
            let mut out = Vec::new();
            while let Some(conn) = self.follower.poll_transmit(&mut out) {
                busy = true;
                let answers = self.answer(conn, &out);
                out.clear();
                if !answers.is_empty() {
                    self.follower.handle_data(self.now, conn, &answers);
                }
            }
            if !busy {
                return;
            }
        }
    }

    fn answer(&mut self, conn: ConnId, bytes: &[u8]) -> Vec<u8> {
        let Some((port, decoder, input)) = self.conns.get_mut(&conn) else {
            return Vec::new();
        };
        input.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Ok(Some(command)) = decoder.decode_command(input) {
            let args: Vec<Vec<u8>> = (0..command.len())
                .map(|i| command.arg(i).unwrap_or_default().to_vec())
                .collect();
            let reply = match args[0].to_ascii_uppercase().as_slice() {
                b"SUBSCRIBE" => continue,
                b"PING" => Frame::SimpleString(Bytes::from_static(b"PONG")),
                b"SENTINEL" => Frame::Array(vec![bulk("127.0.0.1"), bulk(&self.named.to_string())]),
                b"ROLE" if self.masters.contains(port) => Frame::Array(vec![
                    bulk("master"),
                    Frame::Integer(0),
                    Frame::Array(vec![]),
                ]),
                b"ROLE" => Frame::Array(vec![
                    bulk("slave"),
                    bulk("127.0.0.1"),
                    Frame::Integer(7000),
                    bulk("connected"),
                    Frame::Integer(10),
                ]),
                _ => Frame::SimpleError(Bytes::from_static(b"ERR unknown")),
            };
            encode(&reply, &mut out);
        }
        out
    }

    /// A Sentinel's event, on its subscriber link.
    fn publish(&mut self, sentinel: u16, channel: &str, payload: &str) {
        let conn = self
            .conns
            .iter()
            .filter(|(_, (p, _, _))| *p == sentinel)
            .map(|(c, _)| *c)
            .min()
            .expect("a subscriber link to the Sentinel");
        let mut out = Vec::new();
        encode(
            &Frame::Array(vec![bulk("message"), bulk(channel), bulk(payload)]),
            &mut out,
        );
        self.follower.handle_data(self.now, conn, &out);
        self.run();
    }

    fn advance(&mut self, by: Duration) {
        let end = self.now + by;
        while let Some(at) = self.follower.poll_timeout().filter(|at| *at <= end) {
            self.now = self.now.max(at);
            self.follower.handle_timeout(self.now);
            self.run();
        }
        self.now = end;
        self.follower.handle_timeout(self.now);
        self.run();
    }
}

#[test]
fn the_master_is_named_by_a_sentinel_and_checked_with_role() {
    let mut w = World::new(&[26379, 26380], |_| {});
    w.run();
    assert_eq!(w.follower.master("g1"), Some(&endpoint(7000)));
    assert_eq!(
        w.outputs,
        [Output::Master {
            group: "g1".into(),
            old: None,
            new: endpoint(7000),
        }]
    );
    // One subscriber link per Sentinel, and one query link.
    let links: Vec<u16> = w.conns.values().map(|(p, _, _)| *p).collect();
    assert_eq!(links.iter().filter(|p| **p == 26379).count(), 2);
    assert_eq!(links.iter().filter(|p| **p == 26380).count(), 1);
}

#[test]
fn a_failover_announced_on_any_sentinel_holds_writes_until_the_checked_switch() {
    let mut w = World::new(&[26379, 26380, 26381], |_| {});
    w.run();
    w.outputs.clear();
    // The Sentinel that runs the failover is not the one queries go to.
    w.publish(
        26381,
        "+try-failover",
        "master g1 127.0.0.1 7000 #quorum 2/2",
    );
    assert!(w.follower.held_until("g1", w.now).is_some());
    assert!(
        matches!(&w.outputs[..], [Output::Hold { group, event, sentinel }]
        if group == "g1" && event == "+try-failover" && sentinel.port == 26381)
    );
    w.publish(
        26381,
        "+selected-slave",
        "slave 127.0.0.1:7001 127.0.0.1 7001 @ g1 127.0.0.1 7000",
    );
    assert_eq!(w.outputs.len(), 1, "one hold, not one per sign");
    // The switch names 7001, which is not a master yet: the hold stays.
    w.publish(26379, "+switch-master", "g1 127.0.0.1 7000 127.0.0.1 7001");
    assert_eq!(w.follower.master("g1"), Some(&endpoint(7000)));
    assert!(w.follower.held_until("g1", w.now).is_some());
    // Promoted: the next query's check sees it.
    w.masters = vec![7001];
    w.named = 7001;
    w.advance(Duration::from_secs(1));
    assert_eq!(w.follower.master("g1"), Some(&endpoint(7001)));
    assert_eq!(w.follower.held_until("g1", w.now), None);
    assert_eq!(
        w.outputs[1..],
        [
            Output::Master {
                group: "g1".into(),
                old: Some(endpoint(7000)),
                new: endpoint(7001),
            },
            Output::Release {
                group: "g1".into(),
                switched: true,
            },
        ]
    );
}

#[test]
fn a_hold_ends_by_itself_and_an_abort_ends_it_at_once() {
    let mut w = World::new(&[26379], |c| c.hold = Duration::from_secs(2));
    w.run();
    w.publish(
        26379,
        "+try-failover",
        "master g1 127.0.0.1 7000 #quorum 1/1",
    );
    let until = w.follower.held_until("g1", w.now).expect("held");
    assert_eq!(until - w.now, Duration::from_secs(2));
    w.advance(Duration::from_millis(2100));
    assert_eq!(w.follower.held_until("g1", w.now), None);
    assert!(w.outputs.contains(&Output::Release {
        group: "g1".into(),
        switched: false,
    }));
    w.outputs.clear();
    w.publish(
        26379,
        "+try-failover",
        "master g1 127.0.0.1 7000 #quorum 1/1",
    );
    w.publish(
        26379,
        "-failover-abort-no-good-slave",
        "master g1 127.0.0.1 7000",
    );
    assert_eq!(w.follower.held_until("g1", w.now), None);
    assert_eq!(w.outputs.len(), 2);
    // Other groups' events are not ours.
    w.publish(
        26379,
        "+try-failover",
        "master other 127.0.0.1 9000 #quorum 1/1",
    );
    assert_eq!(w.outputs.len(), 2);
}

#[test]
fn a_silent_sentinel_is_left_for_the_next_and_its_event_link_reopened() {
    let mut w = World::new(&[26379, 26380], |_| {});
    w.run();
    let first_links: Vec<ConnId> = w
        .conns
        .iter()
        .filter(|(_, v)| v.0 == 26379)
        .map(|(c, _)| *c)
        .collect();
    // 26379 stops answering anything (its pongs too).
    w.refuse.push(26379);
    for conn in &first_links {
        w.conns.remove(conn);
    }
    w.advance(Duration::from_secs(4));
    assert_eq!(w.follower.sentinel(), Some(&endpoint(26380)));
    assert!(
        w.outputs
            .iter()
            .any(|o| matches!(o, Output::Notice { sentinel, .. } if sentinel.port == 26379))
    );
    // It comes back: its event link is opened again.
    w.refuse.clear();
    w.advance(Duration::from_secs(2));
    assert!(w.conns.values().any(|(p, _, _)| *p == 26379));
    assert_eq!(w.follower.master("g1"), Some(&endpoint(7000)));
}
