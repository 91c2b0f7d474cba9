//! [`Follower`]: where each Sentinel-managed group's master is, and when its writes must wait.
//!
//! The seed design of this workspace (twemproxy made highly available through Sentinel), as
//! a state machine of its own, with the engine's shape: inputs with `now`, outputs drained,
//! one deadline. It asks the Sentinel in use for each group's master
//! (`SENTINEL get-master-addr-by-name`), checks with `ROLE` on the master itself that it is
//! one before reporting it, and listens to **every** Sentinel: a failover is announced (from
//! `+try-failover` to `+promoted-slave`) only on the Sentinel that runs it, before anyone is
//! promoted. From the first such sign until `+switch-master` (or an abort) the group is
//! *held*: a driver keeps new writes back, so that no write is acknowledged by a master that
//! is about to stop being one, for at most [`FollowerConfig::hold`]. Each Sentinel link is
//! pinged; a link that fails or stays silent is reopened, and queries move to the next
//! Sentinel.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use redis_cluster_client::sentinel::{Follower, FollowerConfig, Output};
//! use redis_cluster_route::Endpoint;
//!
//! let sentinel = Endpoint { host: "127.0.0.1".into(), port: 26379, ..Endpoint::default() };
//! let now = Instant::now();
//! let mut follower = Follower::new(FollowerConfig::new(vec![sentinel], vec!["g1".into()]), now);
//! // It asks for a subscriber link and a query link to the Sentinel.
//! let mut connects = 0;
//! while let Some(output) = follower.poll_output() {
//!     if let Output::Connect { conn, .. } = output {
//!         follower.handle_connected(now, conn);
//!         connects += 1;
//!     }
//! }
//! assert_eq!(connects, 2);
//! assert_eq!(follower.master("g1"), None);
//! assert!(follower.poll_timeout().is_some_and(|at| at <= now + Duration::from_secs(1)));
//! ```

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use redis_cluster_route::Endpoint;
use redis_cluster_route::sentinel::{self as parse, Role};
use redis_resp::{Decoder, Frame, encode_command};

use crate::{ConnId, IdHasher};

/// The channels every Sentinel is subscribed to: the switch, a failover's first signs and
/// its aborts, and the down states (for logs).
const CHANNELS: &[&str] = &[
    "+switch-master",
    "+try-failover",
    "+elected-leader",
    "+failover-state-select-slave",
    "+selected-slave",
    "+failover-state-send-slaveof-noone",
    "+failover-state-wait-promotion",
    "+promoted-slave",
    "-failover-abort-not-elected",
    "-failover-abort-no-good-slave",
    "-failover-abort-slave-timeout",
    "+failover-end-for-timeout",
    "+sdown",
    "-sdown",
    "+odown",
    "-odown",
];

/// Connection ids the follower hands out start here, apart from an [`Engine`](crate::Engine)'s
/// (which count from 1), so that one driver can run both.
const FIRST_CONN: u64 = 1 << 48;

/// What a [`Follower`] is told once.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FollowerConfig {
    /// Every Sentinel of the groups.
    pub sentinels: Vec<Endpoint>,
    /// The master names Sentinel knows the groups by.
    pub groups: Vec<String>,
    /// How often each Sentinel link is pinged.
    pub heartbeat: Duration,
    /// How long a Sentinel link may stay silent (pongs included) before it is reopened.
    pub silence: Duration,
    /// The longest a group's writes are held during a failover.
    pub hold: Duration,
    /// The pause before a failed link is opened again, or a query asked again.
    pub retry: Duration,
    /// Sent to a master before `ROLE` (`AUTH [user] password`).
    pub auth: Option<(Option<String>, String)>,
}

impl FollowerConfig {
    /// Pings every second, silence of 3 s, holds of at most 10 s, retries after 500 ms.
    pub fn new(sentinels: Vec<Endpoint>, groups: Vec<String>) -> Self {
        Self {
            sentinels,
            groups,
            heartbeat: Duration::from_secs(1),
            silence: Duration::from_secs(3),
            hold: Duration::from_secs(10),
            retry: Duration::from_millis(500),
            auth: None,
        }
    }
}

/// What a [`Follower`] asks of its driver, or tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Output {
    /// Open a TCP connection to this endpoint under this name.
    Connect {
        /// The name.
        conn: ConnId,
        /// Where.
        endpoint: Endpoint,
    },
    /// Close this connection (forgotten already).
    Close {
        /// Which.
        conn: ConnId,
    },
    /// A group has a (new) master, checked with ROLE: send its requests there; what is in
    /// flight to the old one finishes there.
    Master {
        /// The group.
        group: String,
        /// Its master before, if one was known.
        old: Option<Endpoint>,
        /// Its master now.
        new: Endpoint,
    },
    /// A failover of the group began (`event` is the Sentinel's channel, `sentinel` which
    /// one said it): its writes are held until [`Output::Master`], an abort, or the hold's
    /// end.
    Hold {
        /// The group.
        group: String,
        /// The channel that said so.
        event: String,
        /// The Sentinel.
        sentinel: Endpoint,
    },
    /// The group's writes are no longer held (`switched`: because its new master is known).
    Release {
        /// The group.
        group: String,
        /// Whether a switch ended the hold (else an abort or the hold's end).
        switched: bool,
    },
    /// A Sentinel event worth a log line (`+sdown`, `-odown` …), or a link that failed.
    Notice {
        /// The Sentinel.
        sentinel: Endpoint,
        /// What happened.
        text: String,
    },
}

/// What a connection of the follower is for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Purpose {
    /// Subscribed to Sentinel `i`'s events.
    Events(usize),
    /// Queries to Sentinel `i`, the one in use.
    Queries(usize),
    /// `ROLE` of the candidate master of a group.
    Check { group: usize, candidate: Endpoint },
}

/// A reply owed on a query or check connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owed {
    MasterOf(usize),
    Role,
    Ignore,
}

#[derive(Debug)]
struct Link {
    purpose: Purpose,
    open: bool,
    out: Vec<u8>,
    owed: VecDeque<Owed>,
    input: BytesMut,
    decoder: Decoder,
    heard: Instant,
    ping_at: Instant,
}

#[derive(Debug, Default)]
struct Group {
    name: String,
    master: Option<Endpoint>,
    /// Held since, until this moment.
    held: Option<Instant>,
    /// A check of a candidate is running.
    checking: bool,
}

/// The Sentinel follower. See the module docs.
#[derive(Debug)]
pub struct Follower {
    config: FollowerConfig,
    next_id: u64,
    links: HashMap<ConnId, Link, IdHasher>,
    /// The subscriber link of each Sentinel, and when to open one again.
    events: Vec<(Option<ConnId>, Option<Instant>)>,
    /// The Sentinel queries go to, its link, and when to ask again.
    current: usize,
    queries: Option<ConnId>,
    ask_at: Option<Instant>,
    groups: Vec<Group>,
    outputs: VecDeque<Output>,
    writable: VecDeque<ConnId>,
}

impl Follower {
    /// A follower that starts by opening its links to every Sentinel.
    pub fn new(config: FollowerConfig, now: Instant) -> Self {
        let groups = config
            .groups
            .iter()
            .map(|name| Group {
                name: name.clone(),
                ..Group::default()
            })
            .collect();
        let mut follower = Self {
            events: vec![(None, Some(now)); config.sentinels.len()],
            config,
            next_id: FIRST_CONN,
            links: HashMap::default(),
            current: 0,
            queries: None,
            ask_at: Some(now),
            groups,
            outputs: VecDeque::new(),
            writable: VecDeque::new(),
        };
        follower.handle_timeout(now);
        follower
    }

    /// The group's master, once a Sentinel named it and ROLE confirmed it.
    pub fn master(&self, group: &str) -> Option<&Endpoint> {
        self.group(group)?.master.as_ref()
    }

    /// Until when the group's writes wait (a failover is under way); `None` when they go.
    pub fn held_until(&self, group: &str, now: Instant) -> Option<Instant> {
        let until = self.group(group)?.held? + self.config.hold;
        (until > now).then_some(until)
    }

    /// The Sentinel queries go to.
    pub fn sentinel(&self) -> Option<&Endpoint> {
        self.config.sentinels.get(self.current)
    }

    fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name)
    }

    // ------------------------------------------------------------------ inputs

    /// A connection the follower asked for is open.
    pub fn handle_connected(&mut self, now: Instant, conn: ConnId) {
        let Some(link) = self.links.get_mut(&conn) else {
            return;
        };
        link.open = true;
        link.heard = now;
        if !link.out.is_empty() {
            self.writable.push_back(conn);
        }
    }

    /// Bytes from one of the follower's connections.
    pub fn handle_data(&mut self, now: Instant, conn: ConnId, data: &[u8]) {
        let Some(link) = self.links.get_mut(&conn) else {
            return;
        };
        link.input.extend_from_slice(data);
        link.heard = now;
        loop {
            let Some(link) = self.links.get_mut(&conn) else {
                return;
            };
            let frame = match link.decoder.decode(&mut link.input) {
                Ok(Some(frame)) => frame,
                Ok(None) => return,
                Err(e) => return self.fail(now, conn, &format!("not RESP: {e}")),
            };
            match link.purpose.clone() {
                Purpose::Events(i) => self.event(now, i, &frame),
                Purpose::Queries(_) => {
                    let owed = link.owed.pop_front();
                    if let Some(Owed::MasterOf(group)) = owed {
                        self.master_named(now, group, &frame);
                    }
                }
                Purpose::Check { group, candidate } => {
                    if link.owed.pop_front() == Some(Owed::Role) {
                        self.close(conn);
                        self.checked(now, group, candidate, &frame);
                    }
                }
            }
        }
    }

    /// A connection failed or closed.
    pub fn handle_closed(&mut self, now: Instant, conn: ConnId, reason: &str) {
        self.fail(now, conn, reason);
    }

    /// Time passed: links are pinged or reopened, queries asked again, holds ended.
    pub fn handle_timeout(&mut self, now: Instant) {
        for i in 0..self.events.len() {
            if let (None, Some(at)) = self.events[i] {
                if at <= now {
                    self.open_events(now, i);
                }
            }
        }
        if self.queries.is_none() && self.ask_at.is_some_and(|at| at <= now) {
            self.open_queries(now);
        } else if let (Some(conn), Some(at)) = (self.queries, self.ask_at) {
            if at <= now {
                self.ask(now, conn);
            }
        }
        let silence = self.config.silence;
        let heartbeat = self.config.heartbeat;
        let mut silent = Vec::new();
        for (conn, link) in &mut self.links {
            if matches!(link.purpose, Purpose::Check { .. }) || !link.open {
                continue;
            }
            if now.saturating_duration_since(link.heard) >= silence {
                silent.push(*conn);
            } else if link.ping_at <= now {
                encode_command(&[&b"PING"[..]], &mut link.out);
                if matches!(link.purpose, Purpose::Queries(_)) {
                    link.owed.push_back(Owed::Ignore);
                }
                link.ping_at = now + heartbeat;
                self.writable.push_back(*conn);
            }
        }
        for conn in silent {
            self.fail(now, conn, &format!("silent for {silence:?}"));
            self.outputs.push_back(Output::Close { conn });
        }
        let hold = self.config.hold;
        for g in 0..self.groups.len() {
            if self.groups[g].held.is_some_and(|since| since + hold <= now) {
                self.release(g, false);
            }
        }
    }

    // ------------------------------------------------------------------ outputs

    /// Bytes for one connection, appended to `out`; the connection's name.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>) -> Option<ConnId> {
        while let Some(conn) = self.writable.pop_front() {
            let Some(link) = self.links.get_mut(&conn) else {
                continue;
            };
            if !link.open || link.out.is_empty() {
                continue;
            }
            out.append(&mut link.out);
            return Some(conn);
        }
        None
    }

    /// The next connection to open or close, or what happened.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When [`Follower::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let links = self
            .links
            .values()
            .filter(|l| l.open && !matches!(l.purpose, Purpose::Check { .. }))
            .map(|l| l.ping_at.min(l.heard + self.config.silence));
        let reopen = self
            .events
            .iter()
            .filter_map(|(conn, at)| conn.map_or(*at, |_| None));
        let holds = self
            .groups
            .iter()
            .filter_map(|g| g.held.map(|since| since + self.config.hold));
        links.chain(reopen).chain(holds).chain(self.ask_at).min()
    }

    // ------------------------------------------------------------------ the work

    fn open(&mut self, now: Instant, endpoint: Endpoint, purpose: Purpose) -> ConnId {
        let conn = ConnId(self.next_id);
        self.next_id += 1;
        self.links.insert(
            conn,
            Link {
                purpose,
                open: false,
                out: Vec::new(),
                owed: VecDeque::new(),
                input: BytesMut::new(),
                decoder: Decoder::new(),
                heard: now,
                ping_at: now + self.config.heartbeat,
            },
        );
        self.outputs.push_back(Output::Connect { conn, endpoint });
        conn
    }

    fn close(&mut self, conn: ConnId) {
        if self.links.remove(&conn).is_some() {
            self.outputs.push_back(Output::Close { conn });
        }
    }

    fn open_events(&mut self, now: Instant, i: usize) {
        let Some(endpoint) = self.config.sentinels.get(i).cloned() else {
            return;
        };
        let conn = self.open(now, endpoint, Purpose::Events(i));
        let mut argv: Vec<&[u8]> = vec![b"SUBSCRIBE"];
        argv.extend(CHANNELS.iter().map(|c| c.as_bytes()));
        if let Some(link) = self.links.get_mut(&conn) {
            encode_command(&argv, &mut link.out);
        }
        self.events[i] = (Some(conn), None);
    }

    fn open_queries(&mut self, now: Instant) {
        let Some(endpoint) = self.config.sentinels.get(self.current).cloned() else {
            return;
        };
        let conn = self.open(now, endpoint, Purpose::Queries(self.current));
        self.queries = Some(conn);
        self.ask(now, conn);
    }

    /// Asks the Sentinel in use for every group's master.
    fn ask(&mut self, now: Instant, conn: ConnId) {
        self.ask_at = Some(now + self.config.retry.max(Duration::from_secs(5)));
        let Some(link) = self.links.get_mut(&conn) else {
            return;
        };
        for (g, group) in self.groups.iter().enumerate() {
            let argv: [&[u8]; 3] = [
                b"SENTINEL",
                b"get-master-addr-by-name",
                group.name.as_bytes(),
            ];
            encode_command(&argv, &mut link.out);
            link.owed.push_back(Owed::MasterOf(g));
        }
        self.writable.push_back(conn);
    }

    /// A Sentinel named a group's master: checked with ROLE before it is used.
    fn master_named(&mut self, now: Instant, group: usize, reply: &Frame) {
        let named = match parse::master_addr(reply) {
            Ok(Some(address)) => Endpoint {
                host: address.host,
                port: address.port,
                ..Endpoint::default()
            },
            _ => return,
        };
        self.candidate(now, group, named);
    }

    fn candidate(&mut self, now: Instant, group: usize, candidate: Endpoint) {
        let Some(g) = self.groups.get_mut(group) else {
            return;
        };
        if g.master.as_ref() == Some(&candidate) || g.checking {
            return;
        }
        g.checking = true;
        let purpose = Purpose::Check {
            group,
            candidate: candidate.clone(),
        };
        let conn = self.open(now, candidate, purpose);
        let auth = self.config.auth.clone();
        if let Some(link) = self.links.get_mut(&conn) {
            if let Some((user, password)) = &auth {
                let mut argv = vec![Bytes::from_static(b"AUTH")];
                argv.extend(user.clone().map(Bytes::from));
                argv.push(Bytes::from(password.clone()));
                encode_command(&argv, &mut link.out);
                link.owed.push_back(Owed::Ignore);
            }
            encode_command(&[&b"ROLE"[..]], &mut link.out);
            link.owed.push_back(Owed::Role);
        }
    }

    /// ROLE of a candidate: a master is the group's master from now on.
    fn checked(&mut self, now: Instant, group: usize, candidate: Endpoint, reply: &Frame) {
        let Some(g) = self.groups.get_mut(group) else {
            return;
        };
        g.checking = false;
        if !matches!(parse::role(reply), Ok(Role::Master { .. })) {
            // Not promoted yet: ask again soon.
            self.ask_at = Some(now + self.config.retry);
            return;
        }
        let old = g.master.replace(candidate.clone());
        if old.as_ref() != Some(&candidate) {
            self.outputs.push_back(Output::Master {
                group: g.name.clone(),
                old,
                new: candidate,
            });
        }
        if g.held.is_some() {
            self.release(group, true);
        }
    }

    fn release(&mut self, group: usize, switched: bool) {
        if let Some(g) = self.groups.get_mut(group) {
            if g.held.take().is_some() {
                self.outputs.push_back(Output::Release {
                    group: g.name.clone(),
                    switched,
                });
            }
        }
    }

    /// A message on Sentinel `i`'s event link.
    fn event(&mut self, now: Instant, i: usize, frame: &Frame) {
        let items = match frame {
            Frame::Array(items) | Frame::Push(items) => &items[..],
            _ => return,
        };
        let [kind, channel, payload] = items else {
            return;
        };
        if kind.as_bytes() != Some(b"message") {
            return;
        }
        let channel = String::from_utf8_lossy(channel.as_bytes().unwrap_or_default()).into_owned();
        let payload = String::from_utf8_lossy(payload.as_bytes().unwrap_or_default()).into_owned();
        let sentinel = self.config.sentinels.get(i).cloned().unwrap_or_default();
        let Some(group) = group_of(&channel, &payload)
            .and_then(|name| self.groups.iter().position(|g| g.name == name))
        else {
            return;
        };
        match channel.as_str() {
            "+switch-master" => {
                if let Some(switch) = parse::switch_master(frame) {
                    let new = Endpoint {
                        host: switch.new.host,
                        port: switch.new.port,
                        ..Endpoint::default()
                    };
                    self.candidate(now, group, new);
                }
            }
            "+sdown" | "-sdown" | "+odown" | "-odown" => {
                self.outputs.push_back(Output::Notice {
                    sentinel,
                    text: format!("{channel} {payload}"),
                });
            }
            abort
                if abort.starts_with("-failover-abort") || abort == "+failover-end-for-timeout" =>
            {
                self.release(group, false);
            }
            _ => {
                let g = &mut self.groups[group];
                if g.held.is_none() {
                    g.held = Some(now);
                    self.outputs.push_back(Output::Hold {
                        group: g.name.clone(),
                        event: channel,
                        sentinel,
                    });
                }
            }
        }
    }

    /// A link failed: an event link is reopened after a pause; the query link moves to the
    /// next Sentinel; a check is asked again later.
    fn fail(&mut self, now: Instant, conn: ConnId, reason: &str) {
        let link = self.links.remove(&conn);
        let purpose = match link {
            Some(link) => link.purpose,
            None => return,
        };
        match purpose {
            Purpose::Events(i) => {
                self.events[i] = (None, Some(now + self.config.retry));
                let sentinel = self.config.sentinels.get(i).cloned().unwrap_or_default();
                self.outputs.push_back(Output::Notice {
                    sentinel,
                    text: format!("event link: {reason}"),
                });
            }
            Purpose::Queries(i) => {
                self.queries = None;
                self.current = (i + 1) % self.config.sentinels.len().max(1);
                self.ask_at = Some(now + self.config.retry);
            }
            Purpose::Check { group, .. } => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.checking = false;
                }
                self.ask_at = Some(now + self.config.retry);
            }
        }
    }
}

/// The master name an event is about: after `@` for a replica or Sentinel instance, the
/// second word for a master instance, the first for `+switch-master`.
fn group_of<'a>(channel: &str, payload: &'a str) -> Option<&'a str> {
    let mut words = payload.split(' ');
    if channel == "+switch-master" {
        return words.next();
    }
    if let Some(at) = payload.split(" @ ").nth(1) {
        return at.split(' ').next();
    }
    match words.next()? {
        "master" | "slave" | "sentinel" => words.next(),
        name => Some(name),
    }
}
