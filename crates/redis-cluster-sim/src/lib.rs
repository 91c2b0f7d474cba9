//! A deterministic simulator of a Redis Cluster: N [`ClusterNode`]s in one thread, talking over
//! in-memory links in virtual time.
//!
//! Every message crosses its link as encoded bytes and is decoded on arrival, so a simulated
//! run also exercises the `redis-cluster-bus` codec; time always jumps to the earliest
//! deadline (a delivery or a node's cron); randomness comes from one seed, so the same seed
//! gives the same trace. Not published: it is for tests, examples, benches and fuzzing.
//!
//! ```
//! use redis_cluster_sim::Sim;
//!
//! let mut sim = Sim::new(3, 42);
//! for n in 1..3 {
//!     sim.meet(n, 0);
//! }
//! sim.run_for(5_000);
//! assert!(sim.nodes().iter().all(|node| node.nodes().count() == 3));
//! ```

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use redis_cluster_bus::Message;
use redis_cluster_state::{ClusterNode, Config, Duration, Instant, LinkId, Output};

/// The node timeout the simulated nodes use unless told otherwise (ms).
pub const NODE_TIMEOUT: u64 = 5_000;

/// One message or connection on its way.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// `from` asked to connect to `to`, on its link `link`.
    Connect {
        from: usize,
        to: usize,
        link: LinkId,
    },
    /// Bytes for `to` on connection `conn`.
    Deliver {
        conn: u64,
        to: usize,
        bytes: Vec<u8>,
    },
    /// Node `node`'s deadline ([`ClusterNode::poll_timeout`]) as it was when scheduled.
    Cron { node: usize },
}

/// A connection: opened by `from` (its link `out`) and accepted by `to` (its link `inb`).
#[derive(Clone, Debug)]
struct Conn {
    from: usize,
    to: usize,
    out: LinkId,
    inb: LinkId,
}

/// What the network does to messages, on every link alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Faults {
    /// The smallest delivery delay (ms).
    pub latency_min: u64,
    /// The largest delivery delay (ms); delays vary between the two, which reorders
    /// messages.
    pub latency_max: u64,
    /// Messages lost, per thousand.
    pub loss: u16,
    /// Messages delivered twice, per thousand.
    pub duplicate: u16,
}

impl Default for Faults {
    /// A perfect network with one millisecond of latency.
    fn default() -> Self {
        Self {
            latency_min: 1,
            latency_max: 1,
            loss: 0,
            duplicate: 0,
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// One line of the trace: when, who, what.
pub type TraceLine = (u64, usize, String);

/// The simulated cluster.
#[derive(Clone)]
pub struct Sim {
    nodes: Vec<ClusterNode>,
    now: u64,
    /// Pending events by (time, sequence number).
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    sequence: u64,
    conns: BTreeMap<u64, Conn>,
    /// Each node's connections, by its own handle for them.
    links: HashMap<(usize, LinkId), u64>,
    /// The node listening on each bus address.
    addresses: HashMap<(String, u16), usize>,
    next_conn: u64,
    /// Whether deliveries are written to the trace (large runs turn it off).
    tracing: bool,
    /// Every node's cron walks its table on every tick (see `set_walk_every_tick`).
    walk_every_tick: bool,
    /// Messages and bytes delivered.
    delivered: (u64, u64),
    faults: Faults,
    /// The network's own randomness, from the seed.
    rng: u64,
    trace: Vec<TraceLine>,
    /// FNV-1a over every output of every node while tracing is on (see [`Sim::digest`]).
    digest: u64,
    /// Whether each node runs; a crashed node keeps the nodes.conf it had.
    alive: Vec<bool>,
    saved: Vec<String>,
    /// Each node's side of the partition; nodes on different sides cannot talk.
    side: Vec<u8>,
    /// The time of each node's earliest `Cron` event in the queue (`u64::MAX`: none); a
    /// `Cron` event for another time is stale and skipped.
    cron_at: Vec<u64>,
    /// When each node's first cron may run (a formed cluster's nodes start one by one).
    start_at: Vec<u64>,
    /// Buffers of delivered messages, for the next encodes (fresh ones cost page faults).
    spare: Vec<Vec<u8>>,
}

impl Sim {
    /// `n` fresh nodes on 127.0.0.1, client ports 7000…, bus ports 17000…, each seeded from
    /// `seed`, one millisecond of latency per message (see [`Sim::set_faults`]).
    pub fn new(n: usize, seed: u64) -> Self {
        Self::with_config(n, seed, |_, _| {})
    }

    /// As [`Sim::new`], with `tune` changing each node's config (by index) first.
    pub fn with_config(n: usize, seed: u64, tune: impl Fn(usize, &mut Config)) -> Self {
        let nodes: Vec<ClusterNode> = (0..n)
            .map(|i| {
                let mut config = Config::new("127.0.0.1", 7000 + i as u16);
                config.node_timeout = Duration::from_millis(NODE_TIMEOUT);
                config.seed = seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
                tune(i, &mut config);
                ClusterNode::new(config)
            })
            .collect();
        let addresses = nodes
            .iter()
            .enumerate()
            .map(|(i, n): (usize, &ClusterNode)| {
                ((String::from(n.myself().ip.as_str()), n.myself().cport), i)
            })
            .collect();
        Self {
            links: HashMap::new(),
            addresses,
            tracing: true,
            walk_every_tick: false,
            delivered: (0, 0),
            alive: vec![true; n],
            side: vec![0; n],
            cron_at: vec![u64::MAX; n],
            start_at: vec![0; n],
            spare: Vec::new(),
            saved: vec![String::new(); n],
            nodes,
            now: 0,
            queue: BinaryHeap::new(),
            sequence: 0,
            conns: BTreeMap::new(),
            next_conn: 1,
            faults: Faults::default(),
            rng: seed ^ 0x5851_f42d_4c95_7f2d,
            trace: Vec::new(),
            digest: FNV_OFFSET,
        }
    }

    /// The nodes, by index.
    pub fn nodes(&self) -> &[ClusterNode] {
        &self.nodes
    }

    /// Node `i`, to drive with commands.
    pub fn node_mut(&mut self, i: usize) -> &mut ClusterNode {
        &mut self.nodes[i]
    }

    /// The virtual time (ms).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// What happened, in order: deliveries by message type, connections.
    pub fn trace(&self) -> &[TraceLine] {
        &self.trace
    }

    /// A digest of every output of every node so far, while tracing was on: when, which
    /// node, and what, with links named by the node at the other end and messages by their
    /// encoded bytes. Two runs with the same digest sent the same bytes to the same peers at
    /// the same times, saved the same nodes.conf and reported the same events, however the
    /// state machine is built inside.
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// Adds one output to the digest: the time, the node, a tag, then each part with its
    /// length.
    fn mix(&mut self, node: usize, tag: &[u8], parts: &[&[u8]]) {
        if !self.tracing {
            return;
        }
        let mut h = self.digest;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
            }
        };
        eat(&self.now.to_le_bytes());
        eat(&(node as u64).to_le_bytes());
        eat(tag);
        for part in parts {
            eat(&(part.len() as u64).to_le_bytes());
            eat(part);
        }
        self.digest = h;
    }

    /// The node at the other end of node `i`'s `link`, as the digest names it.
    fn peer_of(&self, i: usize, link: LinkId) -> u64 {
        let conn = self.links.get(&(i, link)).copied();
        match conn.and_then(|conn| self.conns.get(&conn)) {
            Some(c) if c.from == i => c.to as u64,
            Some(c) => c.from as u64,
            None => u64::MAX,
        }
    }

    /// A cluster formed the way `redis-cli --cluster create --cluster-replicas R` forms real
    /// nodes: `masters` masters get the slots split evenly (ADDSLOTS), every node gets a
    /// distinct config epoch (SET-CONFIG-EPOCH 1…), every node MEETs node 0, time passes
    /// until every node knows every other one, then each replica REPLICATEs its master (replica `masters + k` follows master
    /// `k % masters`), and five more seconds pass. `tune` changes each node's config first.
    pub fn create(
        masters: usize,
        replicas: usize,
        seed: u64,
        tune: impl Fn(usize, &mut Config),
    ) -> Self {
        let n = masters * (1 + replicas);
        let mut sim = Self::with_config(n, seed, tune);
        for i in 0..masters {
            let start = (i * 16384 / masters) as u16;
            let end = ((i + 1) * 16384 / masters - 1) as u16;
            let slots = (start..=end).filter_map(redis_hash_slot::Slot::new);
            sim.nodes[i]
                .add_slots(slots, Instant::ZERO)
                .expect("fresh nodes own no slot");
        }
        for i in 0..n {
            sim.nodes[i]
                .set_config_epoch(i as u64 + 1, Instant::ZERO)
                .expect("a fresh node knows no other node");
        }
        for i in 1..n {
            sim.meet(i, 0);
        }
        // redis-cli waits for the configuration to agree; here: until every node knows every
        // other one (and at least the second redis-cli sleeps).
        sim.run_for(1_000);
        let deadline = sim.now + 60_000;
        while !sim.all_met() {
            assert!(sim.now < deadline, "the nodes did not meet within a minute");
            sim.run_for(100);
        }
        for replica in masters..n {
            let master = sim.nodes[(replica - masters) % masters].myself().id;
            sim.nodes[replica]
                .replicate(&master, Instant::from_millis(sim.now))
                .expect("the master is known by now");
        }
        sim.run_for(5_000);
        sim
    }

    /// Whether every node knows every other one, none of them still in a handshake.
    pub fn all_met(&self) -> bool {
        let n = self.nodes.len();
        self.nodes
            .iter()
            .all(|node| node.nodes().filter(|other| !other.in_handshake()).count() == n)
    }

    /// A cluster that is already formed, as if every node had loaded the same nodes.conf:
    /// `masters` masters with the slots split evenly (config epochs 1…), each with `replicas`
    /// replicas; ids as random as real ones, from the seed; `node_timeout` in ms. The nodes
    /// start within N ms (at most a second), each opening its links at its first cron.
    pub fn formed(masters: usize, replicas: usize, seed: u64, node_timeout: u64) -> Self {
        let n = masters * (1 + replicas);
        let id = |i: usize| {
            // splitmix64 of the seed and the index, as 40 hex digits.
            let mut x = seed.wrapping_add((i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut out = String::new();
            for _ in 0..3 {
                x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                x ^= x >> 31;
                out.push_str(&format!("{x:016x}"));
            }
            out.truncate(40);
            out
        };
        let mut lines = Vec::with_capacity(n);
        for i in 0..n {
            let (port, cport) = (7000 + i, 17000 + i);
            if i < masters {
                let start = i * 16384 / masters;
                let end = (i + 1) * 16384 / masters - 1;
                lines.push(format!(
                    "{} 127.0.0.1:{port}@{cport} master - 0 0 {} connected {start}-{end}",
                    id(i),
                    i + 1
                ));
            } else {
                let master = (i - masters) % masters;
                lines.push(format!(
                    "{} 127.0.0.1:{port}@{cport} slave {} 0 0 {} connected",
                    id(i),
                    id(master),
                    master + 1
                ));
            }
        }
        let mut sim = Self::with_config(n, seed, |_, config| {
            config.node_timeout = Duration::from_millis(node_timeout)
        });
        for i in 0..n {
            let mut text = String::new();
            for (j, line) in lines.iter().enumerate() {
                if j == i {
                    let line = line.replacen(" master ", " myself,master ", 1).replacen(
                        " slave ",
                        " myself,slave ",
                        1,
                    );
                    text.push_str(&line);
                } else {
                    text.push_str(line);
                }
                text.push('\n');
            }
            text.push_str(&format!("vars currentEpoch {masters} lastVoteEpoch 0\n"));
            let config = sim.nodes[i].config().clone();
            sim.nodes[i] = ClusterNode::from_nodes_conf(config, &text, Instant::ZERO)
                .expect("the layout is a valid nodes.conf");
        }
        // The processes start one by one, about a millisecond apart: all at once, a
        // thousand nodes would open a million links and send a million PINGs in the same
        // millisecond (gigabytes in flight in the simulator).
        let spread = n.min(1000) as u64;
        for i in 0..n {
            sim.start_at[i] = sim.random() % spread;
        }
        sim
    }

    /// Whether node `i` runs.
    pub fn is_alive(&self, i: usize) -> bool {
        self.alive[i]
    }

    /// Stops node `i` as a kill does: its connections drop (its peers see their links go
    /// down), nothing reaches it, it runs no cron. Its nodes.conf is kept for a restart.
    pub fn crash(&mut self, i: usize) {
        if !self.alive[i] {
            return;
        }
        self.alive[i] = false;
        self.saved[i] = self.nodes[i].nodes_conf();
        self.trace.push((self.now, i, "crash".into()));
        let dropped: Vec<(u64, Conn)> = self
            .conns
            .iter()
            .filter(|(_, c)| c.from == i || c.to == i)
            .map(|(k, c)| (*k, c.clone()))
            .collect();
        let now = self.now;
        for (conn, c) in dropped {
            self.remove_conn(conn);
            if c.from != i {
                self.nodes[c.from].handle_link_down(c.out, Instant::from_millis(now));
                self.drain(c.from);
            } else {
                self.nodes[c.to].handle_link_down(c.inb, Instant::from_millis(now));
                self.drain(c.to);
            }
        }
    }

    /// Cuts the network in two: `group` on one side, every other node on the other.
    /// Connections across drop (both ends see their links go down) and new ones fail.
    pub fn partition(&mut self, group: &[usize]) {
        for (i, side) in self.side.iter_mut().enumerate() {
            *side = u8::from(group.contains(&i));
        }
        self.trace
            .push((self.now, 0, format!("partition {group:?}")));
        let cut: Vec<(u64, Conn)> = self
            .conns
            .iter()
            .filter(|(_, c)| self.side[c.from] != self.side[c.to])
            .map(|(k, c)| (*k, c.clone()))
            .collect();
        let now = self.now;
        for (conn, c) in cut {
            self.remove_conn(conn);
            if self.alive[c.from] {
                self.nodes[c.from].handle_link_down(c.out, Instant::from_millis(now));
                self.drain(c.from);
            }
            if self.alive[c.to] {
                self.nodes[c.to].handle_link_down(c.inb, Instant::from_millis(now));
                self.drain(c.to);
            }
        }
    }

    /// Joins the network again.
    pub fn heal(&mut self) {
        self.side.fill(0);
        self.trace.push((self.now, 0, "heal".into()));
    }

    /// Starts node `i` again from the nodes.conf it had when it crashed.
    pub fn restart(&mut self, i: usize) {
        if self.alive[i] {
            return;
        }
        let config = self.nodes[i].config().clone();
        let now = self.now;
        self.nodes[i] =
            ClusterNode::from_nodes_conf(config, &self.saved[i], Instant::from_millis(now))
                .expect("a node reloads the nodes.conf it wrote");
        self.nodes[i].set_walk_every_tick(self.walk_every_tick);
        self.alive[i] = true;
        self.trace.push((now, i, "restart".into()));
    }

    /// `CLUSTER MEET` on node `from` with the address of node `to`.
    pub fn meet(&mut self, from: usize, to: usize) {
        let (ip, port, cport) = {
            let target = self.nodes[to].myself();
            (target.ip, target.port, target.cport)
        };
        let now = self.now;
        self.nodes[from]
            .meet(&ip, port, cport, Instant::from_millis(now))
            .expect("a valid address");
        self.drain(from);
    }

    /// Runs the nodes for `ms` of virtual time.
    ///
    /// Nodes' deadlines wait in the same queue as deliveries, so each step costs a heap
    /// operation whatever the cluster's size; every node is looked at once per call, for
    /// changes made to it from outside (commands, restarts).
    pub fn run_for(&mut self, ms: u64) {
        let end = self.now + ms;
        for i in 0..self.nodes.len() {
            self.schedule_cron(i);
        }
        while let Some(Reverse((time, _, _))) = self.queue.peek() {
            if *time > end {
                break;
            }
            let Some(Reverse((time, _, event))) = self.queue.pop() else {
                break;
            };
            self.now = time.max(self.now);
            self.handle(event);
        }
        self.now = end;
    }

    /// Queues node `i`'s next deadline, unless an earlier or equal one is queued already.
    fn schedule_cron(&mut self, i: usize) {
        if !self.alive[i] {
            return;
        }
        let at = self.nodes[i]
            .poll_timeout()
            .as_millis()
            .max(self.now)
            .max(self.start_at[i]);
        if at < self.cron_at[i] {
            self.cron_at[i] = at;
            self.sequence += 1;
            self.queue
                .push(Reverse((at, self.sequence, Event::Cron { node: i })));
        }
    }

    /// Sets the network's behaviour from now on.
    pub fn set_faults(&mut self, faults: Faults) {
        self.faults = faults;
    }

    fn random(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A delivery delay drawn between the latency bounds.
    fn latency(&mut self) -> u64 {
        let Faults {
            latency_min,
            latency_max,
            ..
        } = self.faults;
        let spread = latency_max.saturating_sub(latency_min) + 1;
        latency_min + self.random() % spread
    }

    fn schedule(&mut self, delay: u64, event: Event) {
        self.sequence += 1;
        self.queue
            .push(Reverse((self.now + delay, self.sequence, event)));
    }

    fn handle(&mut self, event: Event) {
        let now = self.now;
        match event {
            Event::Cron { node } => {
                if self.cron_at[node] != now {
                    return; // superseded by an earlier deadline, already run
                }
                self.cron_at[node] = u64::MAX;
                if self.alive[node] {
                    self.nodes[node].handle_timeout(Instant::from_millis(now));
                    self.drain(node);
                }
            }
            Event::Connect { from, to, link } => {
                if !self.alive[from] {
                    return;
                }
                if !self.alive[to] || self.side[from] != self.side[to] {
                    // Refused, or lost in the partition.
                    self.nodes[from].handle_link_down(link, Instant::from_millis(now));
                    self.drain(from);
                    return;
                }
                let conn = self.next_conn;
                self.next_conn += 1;
                let inb = self.nodes[to].handle_accepted(Instant::from_millis(now));
                self.conns.insert(
                    conn,
                    Conn {
                        from,
                        to,
                        out: link,
                        inb,
                    },
                );
                self.links.insert((from, link), conn);
                self.links.insert((to, inb), conn);
                if self.tracing {
                    self.trace.push((now, from, format!("connect {to}")));
                }
                self.nodes[from].handle_connected(link, Instant::from_millis(now));
                self.drain(from);
            }
            Event::Deliver { conn, to, bytes } => {
                let Some(c) = self.conns.get(&conn).cloned() else {
                    return; // the connection closed while the bytes were on their way
                };
                if !self.alive[to] || self.side[c.from] != self.side[c.to] {
                    return;
                }
                let message = Message::decode(&bytes).expect("simulated nodes send valid messages");
                let (link, peer) = if to == c.to {
                    (c.inb, c.from)
                } else {
                    (c.out, c.to)
                };
                self.delivered.0 += 1;
                self.delivered.1 += bytes.len() as u64;
                if self.tracing {
                    let kind = message.kind().name().unwrap_or("?");
                    self.trace.push((now, to, format!("{kind} from {peer}")));
                }
                let ip = self.nodes[peer].myself().ip;
                self.nodes[to].handle_message(link, &ip, &message, Instant::from_millis(now));
                self.recycle(bytes);
                self.drain(to);
            }
        }
    }

    /// Keeps a delivered message's buffer for a later encode (as many as a large cluster has
    /// in flight at once, about a millisecond's worth).
    /// Node `i` writes `encoded` on `link`: lost, duplicated or delivered after a latency,
    /// as the faults draw.
    fn transmit(&mut self, i: usize, link: LinkId, encoded: &[u8]) {
        let peer = self.peer_of(i, link);
        let Some(&conn) = self.links.get(&(i, link)) else {
            return;
        };
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let to = if c.from == i { c.to } else { c.from };
        self.mix(i, b"send", &[&peer.to_le_bytes(), encoded]);
        if self.random() % 1000 < u64::from(self.faults.loss) {
            return;
        }
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(encoded);
        if self.random() % 1000 < u64::from(self.faults.duplicate) {
            let latency = self.latency();
            let copy = Event::Deliver {
                conn,
                to,
                bytes: bytes.clone(),
            };
            self.schedule(latency, copy);
        }
        let latency = self.latency();
        self.schedule(latency, Event::Deliver { conn, to, bytes });
    }

    fn recycle(&mut self, bytes: Vec<u8>) {
        if self.spare.len() < 4096 {
            self.spare.push(bytes);
        }
    }

    fn remove_conn(&mut self, conn: u64) {
        if let Some(c) = self.conns.remove(&conn) {
            self.links.remove(&(c.from, c.out));
            self.links.remove(&(c.to, c.inb));
        }
    }

    /// Makes every node's cron walk its table on every tick, restarted nodes included
    /// ([`ClusterNode::set_walk_every_tick`]): a run with it must be the run without.
    pub fn set_walk_every_tick(&mut self, on: bool) {
        self.walk_every_tick = on;
        for node in &mut self.nodes {
            node.set_walk_every_tick(on);
        }
    }

    /// Turns the per-delivery trace on or off (on by default; large runs turn it off).
    pub fn set_tracing(&mut self, on: bool) {
        self.tracing = on;
    }

    /// Messages and bytes delivered so far.
    pub fn delivered(&self) -> (u64, u64) {
        self.delivered
    }

    /// Carries out node `i`'s outputs.
    fn drain(&mut self, i: usize) {
        // Where the node writes each message, once; each link's delivery copies it into a
        // spare buffer.
        let mut encoded = self.spare.pop().unwrap_or_default();
        while let Some(output) = self.nodes[i].poll_output(&mut encoded) {
            match output {
                Output::Connect {
                    link, ip, cport, ..
                } => {
                    let target = self.addresses.get(&(ip, cport)).copied();
                    let to = target.map_or(u64::MAX, |t| t as u64);
                    self.mix(i, b"connect", &[&to.to_le_bytes()]);
                    match target {
                        Some(to) => {
                            let latency = self.latency();
                            self.schedule(latency, Event::Connect { from: i, to, link });
                        }
                        None => {
                            let now = self.now;
                            self.nodes[i].handle_link_down(link, Instant::from_millis(now));
                        }
                    }
                }
                Output::Transmit { links } => {
                    for link in links {
                        self.transmit(i, link, &encoded);
                    }
                }
                Output::Close(link) => {
                    let peer = self.peer_of(i, link);
                    self.mix(i, b"close", &[&peer.to_le_bytes()]);
                    if let Some(&conn) = self.links.get(&(i, link)) {
                        self.remove_conn(conn);
                    }
                }
                Output::SaveConfig => {
                    if self.tracing {
                        let text = self.nodes[i].nodes_conf();
                        self.mix(i, b"save", &[text.as_bytes()]);
                    }
                }
                Output::Deliver {
                    channel,
                    message,
                    sharded,
                } => {
                    self.mix(i, b"deliver", &[&channel, &message, &[u8::from(sharded)]]);
                }
                Output::Event(event) => {
                    if self.tracing {
                        let text = event_text(&event);
                        self.mix(i, b"event", &[text.as_bytes()]);
                        self.trace.push((self.now, i, format!("{event:?}")));
                    }
                }
            }
        }
        self.recycle(encoded);
        self.schedule_cron(i);
    }
}

/// An event as the digest spells it: by name and node id, independent of how `Debug`
/// prints the types.
fn event_text(event: &redis_cluster_state::Event) -> String {
    use redis_cluster_state::Event;
    match event {
        Event::StateChanged { ok } => format!("state {ok}"),
        Event::BecameReplica { master } => format!("replica of {master}"),
        Event::BecameMaster => "master".into(),
        Event::NodeFailed { node } => format!("failed {node}"),
        Event::NodeRecovered { node } => format!("recovered {node}"),
    }
}
