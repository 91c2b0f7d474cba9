//! The Sentinel follower against Sentinels and masters that may say anything (issue 27):
//! well-formed replies (a master's address, a null, `ROLE` of a master or a replica, PONG,
//! the events of a failover from `+try-failover` to `+switch-master`, an abort) or arbitrary
//! bytes, on connections that open, fail or close, while time passes. It never panics, and:
//! - a master it reports is the one [`Follower::master`] answers right after;
//! - it releases only a group it holds, and holds a group at most once at a time;
//! - once time runs past the longest hold, no group is held any more.
//!
//! Input: a list of steps, each a byte naming the step and the bytes it uses.
#![no_main]

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use redis_cluster_client::ConnId;
use redis_cluster_client::sentinel::{Follower, FollowerConfig, Output};
use redis_cluster_route::Endpoint;

const GROUPS: [&str; 2] = ["g1", "g2"];

/// The well-formed answers a step can pick, built with their lengths right.
fn answers() -> Vec<Vec<u8>> {
    let bulk = |text: &str| format!("${}\r\n{text}\r\n", text.len());
    let array = |items: &[String]| format!("*{}\r\n{}", items.len(), items.concat());
    let message =
        |channel: &str, payload: &str| array(&[bulk("message"), bulk(channel), bulk(payload)]);
    let event = |channel: &str, group: &str, port: u16| {
        let payload = format!("master {group} 127.0.0.1 {port} @ {group} 127.0.0.1 {port}");
        message(channel, &payload)
    };
    let mut answers: Vec<String> = vec![
        // SENTINEL get-master-addr-by-name
        array(&[bulk("127.0.0.1"), bulk("6379")]),
        array(&[bulk("127.0.0.1"), bulk("6380")]),
        "*-1\r\n".into(),
        array(&[bulk("127.0.0.1"), bulk("99999")]),
        // ROLE
        array(&[bulk("master"), ":100\r\n".into(), "*0\r\n".into()]),
        array(&[
            bulk("slave"),
            bulk("127.0.0.1"),
            ":6379\r\n".into(),
            bulk("connected"),
            ":100\r\n".into(),
        ]),
        "+PONG\r\n".into(),
        "-NOAUTH Authentication required.\r\n".into(),
        "+OK\r\n".into(),
        array(&[bulk("subscribe"), bulk("+switch-master"), ":1\r\n".into()]),
        message("+switch-master", "g1 127.0.0.1 6379 127.0.0.1 6380"),
        message("+switch-master", "g2 127.0.0.1 6380 127.0.0.1 6379"),
        message(
            "+promoted-slave",
            "slave 127.0.0.1:6380 127.0.0.1 6380 @ g1 127.0.0.1 6379",
        ),
    ];
    for group in ["g1", "g2"] {
        for channel in [
            "+try-failover",
            "+elected-leader",
            "-failover-abort-no-good-slave",
            "+failover-end-for-timeout",
            "+sdown",
        ] {
            answers.push(event(channel, group, 6379));
        }
    }
    answers.into_iter().map(String::into_bytes).collect()
}

fn endpoint(port: u16) -> Endpoint {
    Endpoint {
        host: "127.0.0.1".into(),
        port,
        ..Endpoint::default()
    }
}

fuzz_target!(|input: &[u8]| {
    let start = Instant::now();
    let mut now = start;
    let config = FollowerConfig::new(
        vec![endpoint(26379), endpoint(26380)],
        GROUPS.iter().map(|g| g.to_string()).collect(),
    );
    let hold = config.hold;
    let mut follower = Follower::new(config, now);
    // Connections asked for: whether open.
    let mut conns: BTreeMap<ConnId, bool> = BTreeMap::new();
    let mut held: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    let answers = answers();

    let mut drain = |follower: &mut Follower,
                     conns: &mut BTreeMap<ConnId, bool>,
                     held: &mut HashSet<String>| {
        while let Some(output) = follower.poll_output() {
            match output {
                Output::Connect { conn, .. } => {
                    assert!(conns.insert(conn, false).is_none(), "{conn:?} asked twice");
                }
                Output::Close { conn } => {
                    conns.remove(&conn);
                }
                Output::Master { group, new, .. } => {
                    assert_eq!(follower.master(&group), Some(&new), "{group}");
                }
                Output::Hold { group, .. } => {
                    assert!(held.insert(group.clone()), "{group} held twice");
                }
                Output::Release { group, .. } => {
                    assert!(held.remove(&group), "{group} released, not held");
                }
                _ => {}
            }
        }
        while let Some(conn) = follower.poll_transmit(&mut out) {
            assert_eq!(
                conns.get(&conn),
                Some(&true),
                "bytes for {conn:?}, not open"
            );
            out.clear();
        }
    };
    drain(&mut follower, &mut conns, &mut held);

    let mut at = 0;
    let mut byte = || {
        let b = input.get(at).copied();
        at += 1;
        b
    };
    while let Some(step) = byte() {
        let pick = usize::from(byte().unwrap_or(0));
        let nth =
            |conns: &BTreeMap<ConnId, bool>| conns.keys().nth(pick % conns.len().max(1)).copied();
        match step % 5 {
            0 => {
                if let Some(conn) = nth(&conns) {
                    conns.insert(conn, true);
                    follower.handle_connected(now, conn);
                }
            }
            1 => {
                let open = conns.iter().filter(|(_, open)| **open).map(|(c, _)| *c);
                if let Some(conn) = open.clone().nth(pick % open.count().max(1)) {
                    let answer = &answers[usize::from(byte().unwrap_or(0)) % answers.len()];
                    follower.handle_data(now, conn, answer);
                }
            }
            2 => {
                // Arbitrary bytes, up to 32.
                let len = usize::from(byte().unwrap_or(0) % 32);
                let bytes: Vec<u8> = (0..len).filter_map(|_| byte()).collect();
                if let Some(conn) = nth(&conns).filter(|c| conns[c]) {
                    follower.handle_data(now, conn, &bytes);
                }
            }
            3 => {
                if let Some(conn) = nth(&conns) {
                    conns.remove(&conn);
                    follower.handle_closed(now, conn, "closed");
                }
            }
            _ => {
                now += Duration::from_millis(pick as u64 * 20);
                follower.handle_timeout(now);
            }
        }
        drain(&mut follower, &mut conns, &mut held);
    }

    // Past the longest hold, nothing is held (whatever the Sentinels said).
    let end = now + hold + Duration::from_secs(1);
    while now < end {
        now = follower.poll_timeout().map_or(end, |at| at.clamp(now, end));
        follower.handle_timeout(now);
        drain(&mut follower, &mut conns, &mut held);
        if now == end {
            break;
        }
    }
    assert!(
        held.is_empty(),
        "still held past the longest hold: {held:?}"
    );
});
