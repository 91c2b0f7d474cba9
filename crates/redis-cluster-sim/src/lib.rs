//! A deterministic simulator of a Redis Cluster: N [`ClusterNode`]s talking over in-memory
//! links in virtual time, in one thread or with the nodes of each large batch of events split
//! over several ([`Sim::set_threads`]), with the same result either way.
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

mod step;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use redis_cluster_state::{ClusterNode, Config, Duration, Instant, LinkId};

use step::{Ctx, Rec, SPARE_BUFFERS, Step};

/// The node timeout the simulated nodes use unless told otherwise (ms).
pub const NODE_TIMEOUT: u64 = 5_000;

/// The smallest batch of events that [`Sim::set_threads`] splits by default.
const MIN_PARALLEL: usize = 64;

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
    /// Whether `from` (0) and `to` (1) closed it in the current millisecond: it goes at the
    /// millisecond's end.
    closed: [bool; 2],
}

impl Conn {
    /// Whether node `node`'s end of the connection is closed.
    fn closed_at(&self, node: usize) -> bool {
        self.closed[usize::from(node == self.to)]
    }
}

/// The open connections, by number: a connection's number is its place, and numbers are
/// never given twice (a message in flight names its connection by number, and must not
/// reach a later one). A thousand nodes keep a million connections; an ordered map of
/// them cost the network's side of each message a dozen cache misses. The places of
/// closed connections stay (a `None` each): a run that opens connections without end
/// grows this by 40 bytes per connection.
#[derive(Clone, Debug, Default)]
struct Conns(Vec<Option<Conn>>);

impl Conns {
    fn get(&self, conn: u64) -> Option<&Conn> {
        self.0.get(usize::try_from(conn).ok()?)?.as_ref()
    }

    fn get_mut(&mut self, conn: u64) -> Option<&mut Conn> {
        self.0.get_mut(usize::try_from(conn).ok()?)?.as_mut()
    }

    /// Adds a connection; its number.
    fn insert(&mut self, c: Conn) -> u64 {
        self.0.push(Some(c));
        self.0.len() as u64 - 1
    }

    fn remove(&mut self, conn: u64) -> Option<Conn> {
        self.0.get_mut(usize::try_from(conn).ok()?)?.take()
    }

    /// The open connections in the order they were opened.
    fn iter(&self) -> impl Iterator<Item = (u64, &Conn)> {
        (0u64..)
            .zip(&self.0)
            .filter_map(|(k, c)| Some((k, c.as_ref()?)))
    }
}

/// A hasher for the small integer keys of [`Sim`]'s maps: a multiply and a rotate per
/// word, the same in every run (std's default hashes with SipHash, several times slower,
/// and the keys come from the simulation, never from outside).
#[derive(Clone, Copy, Debug, Default)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(26) ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }
}

/// Each node's connections, by its own handle for them.
type Links = HashMap<(usize, LinkId), u64, BuildHasherDefault<WordHasher>>;

/// The connection on node `i`'s `link` and the node at its other end.
fn link_of(conns: &Conns, links: &Links, i: usize, link: LinkId) -> Option<(u64, usize)> {
    let conn = *links.get(&(i, link))?;
    let c = conns.get(conn)?;
    Some((conn, if c.from == i { c.to } else { c.from }))
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
    conns: Conns,
    /// Each node's connections, by its own handle for them.
    links: Links,
    /// The node listening on each bus address.
    addresses: HashMap<(String, u16), usize>,
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
    /// Each node's IP, as its peers see it (the address it listens on).
    ips: Vec<String>,
    /// Connections closed in the current millisecond, removed at its end.
    closing: Vec<u64>,
    /// The threads a large batch is split over (see [`Sim::set_threads`]).
    threads: usize,
    /// The smallest batch split over threads.
    min_parallel: usize,
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
        let ips = nodes
            .iter()
            .map(|n| String::from(n.myself().ip.as_str()))
            .collect();
        Self {
            ips,
            closing: Vec::new(),
            threads: 1,
            min_parallel: MIN_PARALLEL,
            links: Links::default(),
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
            conns: Conns::default(),
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

    /// The connection on node `i`'s `link` and the node at its other end.
    fn link(&self, i: usize, link: LinkId) -> Option<(u64, usize)> {
        link_of(&self.conns, &self.links, i, link)
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
            .map(|(k, c)| (k, c.clone()))
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
        self.settle_closes();
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
            .map(|(k, c)| (k, c.clone()))
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
        self.settle_closes();
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
        self.settle_closes();
    }

    /// Runs the nodes for `ms` of virtual time.
    ///
    /// Nodes' deadlines wait in the same queue as deliveries, so each step costs a heap
    /// operation whatever the cluster's size; every node is looked at once per call, for
    /// changes made to it from outside (commands, restarts).
    ///
    /// The events due at the same millisecond and queued when it begins are a batch: each
    /// node takes its share in order, then what the nodes asked of the network is carried
    /// out in the events' order (see [`Sim::set_threads`]). A connection closed during a
    /// millisecond goes at its end: bytes due in that millisecond still reach the end that
    /// did not close it, as bytes already in flight reach a real socket.
    pub fn run_for(&mut self, ms: u64) {
        let end = self.now + ms;
        for i in 0..self.nodes.len() {
            self.schedule_cron(i);
        }
        let mut batch = Vec::new();
        while let Some(&Reverse((time, _, _))) = self.queue.peek() {
            if time > end {
                break;
            }
            if time > self.now {
                self.settle_closes();
            }
            self.now = time.max(self.now);
            while let Some(Reverse((at, _, _))) = self.queue.peek() {
                if *at != time {
                    break;
                }
                if let Some(Reverse((_, _, event))) = self.queue.pop() {
                    batch.push(event);
                }
            }
            self.run_batch(&mut batch);
        }
        self.settle_closes();
        self.now = end;
    }

    /// Splits large batches over `threads` threads (1 by default): each thread takes the
    /// next node of the batch not yet taken and runs that node's events; batches under
    /// `min_batch` events (0: the default) run on the calling thread. The run is the same
    /// whatever the split: every node sees its events in the same order, and the network
    /// acts on their outputs in the events' order.
    pub fn set_threads(&mut self, threads: usize, min_batch: usize) {
        self.threads = threads.max(1);
        self.min_parallel = match min_batch {
            0 => MIN_PARALLEL,
            n => n,
        };
    }

    /// Runs one batch of events due now: the steps on the nodes (split over threads when the
    /// batch is large), then their records in order.
    fn run_batch(&mut self, events: &mut Vec<Event>) {
        let n = self.nodes.len();
        let threads = match events.len() >= self.min_parallel {
            true => self.threads.min(n).max(1),
            false => 1,
        };
        let mut steps: Vec<Step> = Vec::with_capacity(events.len() + 1);
        for event in events.drain(..) {
            match event {
                Event::Cron { node } => steps.push(Step::Cron { node }),
                Event::Connect { from, to, link } => {
                    if !self.alive[from] {
                        continue;
                    }
                    if !self.alive[to] || self.side[from] != self.side[to] {
                        // Refused, or lost in the partition.
                        steps.push(Step::Refused { node: from, link });
                    } else {
                        steps.push(Step::Accept {
                            node: to,
                            from,
                            out: link,
                        });
                        steps.push(Step::Connected { node: from, link });
                    }
                }
                Event::Deliver { conn, to, bytes } => {
                    steps.push(Step::Deliver {
                        node: to,
                        conn,
                        bytes,
                    });
                }
            }
        }
        let order: Vec<usize> = steps.iter().map(Step::node).collect();
        if threads == 1 {
            let mut recs = Vec::new();
            let (ctx, nodes, cron_at, spare) = self.split();
            step::run(&ctx, 0, nodes, cron_at, steps.into_iter(), spare, &mut recs);
            let mut recs = recs.into_iter();
            for node in order {
                for rec in recs.by_ref() {
                    if self.apply(node, rec) {
                        break;
                    }
                }
            }
            return;
        }
        // The nodes of the batch, in increasing order, each with its steps: a share. The
        // threads take shares as they come free, in the order the nodes first appear in the
        // batch. (Halves of the node range, one per thread, left a thread idle for about a
        // tenth of a split batch: a cron step that pings hundreds of nodes takes
        // milliseconds, and a half could hold more of them than the other.)
        let mut present = order.clone();
        present.sort_unstable();
        present.dedup();
        let share_of = |node: usize| present.binary_search(&node).ok();
        let (ctx, nodes, cron_at, spare) = self.split();
        let mut shares = pick(nodes, cron_at, &present);
        for step in steps {
            if let Some(share) = share_of(step.node()).and_then(|k| shares.get_mut(k)) {
                share.steps.push(step);
            }
        }
        let mut unqueued: Vec<Option<&mut step::Share<'_>>> = shares.iter_mut().map(Some).collect();
        // Popped from the end: the last share to take is first.
        let mut queue: Vec<&mut step::Share<'_>> = order
            .iter()
            .filter_map(|&node| unqueued.get_mut(share_of(node)?)?.take())
            .collect();
        queue.reverse();
        let queue = std::sync::Mutex::new(queue);
        // A share of the spare buffers for each thread.
        let mut pools: Vec<Vec<Vec<u8>>> = (1..threads)
            .map(|_| spare.split_off(spare.len() - spare.len() / threads))
            .collect();
        let work = |pool: &mut Vec<Vec<u8>>| {
            // A poisoned queue means another thread panicked: the scope passes that on.
            while let Some(share) = queue.lock().ok().and_then(|mut q| q.pop()) {
                step::run_share(&ctx, share, pool);
            }
        };
        std::thread::scope(|scope| {
            for pool in &mut pools {
                scope.spawn(|| work(pool));
            }
            work(spare);
        });
        for mut pool in pools {
            spare.append(&mut pool);
        }
        spare.truncate(SPARE_BUFFERS);
        let mut streams: Vec<_> = shares.into_iter().map(|s| s.recs.into_iter()).collect();
        for node in order {
            let Some(stream) = share_of(node).and_then(|k| streams.get_mut(k)) else {
                continue;
            };
            for rec in stream.by_ref() {
                if self.apply(node, rec) {
                    break;
                }
            }
        }
    }

    /// What steps read ([`Ctx`]) apart from what they change: the nodes, their deadlines and
    /// the spare buffers.
    fn split(&mut self) -> (Ctx<'_>, &mut [ClusterNode], &mut [u64], &mut Vec<Vec<u8>>) {
        let Self {
            nodes,
            cron_at,
            alive,
            side,
            start_at,
            addresses,
            ips,
            conns,
            links,
            spare,
            tracing,
            now,
            ..
        } = self;
        let ctx = Ctx {
            now: *now,
            tracing: *tracing,
            alive,
            side,
            start_at,
            addresses,
            ips,
            conns,
            links,
        };
        (ctx, nodes, cron_at, spare)
    }

    /// Carries out one record of node `i`; true at the end of its step.
    fn apply(&mut self, i: usize, rec: Rec) -> bool {
        let now = self.now;
        match rec {
            Rec::Delivered { len, peer, kind } => {
                self.delivered.0 += 1;
                self.delivered.1 += len as u64;
                if self.tracing {
                    self.trace.push((now, i, format!("{kind} from {peer}")));
                }
            }
            Rec::Accepted { from, out, inb } => {
                let conn = self.conns.insert(Conn {
                    from,
                    to: i,
                    out,
                    inb,
                    closed: [false; 2],
                });
                self.links.insert((from, out), conn);
                self.links.insert((i, inb), conn);
                if self.tracing {
                    self.trace.push((now, from, format!("connect {i}")));
                }
                return true;
            }
            Rec::Connect { link, to } => {
                let target = to.map_or(u64::MAX, |t| t as u64);
                self.mix(i, b"connect", &[&target.to_le_bytes()]);
                if let Some(to) = to {
                    let latency = self.latency();
                    self.schedule(latency, Event::Connect { from: i, to, link });
                }
            }
            Rec::Transmit { first, last, bytes } => {
                for (link, target) in first {
                    let mut copy = self.spare.pop().unwrap_or_default();
                    copy.clear();
                    copy.extend_from_slice(&bytes);
                    self.transmit_on(i, link, target, copy);
                }
                self.transmit_on(i, last.0, last.1, bytes);
            }
            Rec::Close(link) => {
                let target = self.link(i, link);
                // The digest names the node at the other end (`u64::MAX`: none).
                let peer = target.map_or(u64::MAX, |(_, to)| to as u64);
                self.mix(i, b"close", &[&peer.to_le_bytes()]);
                if let Some((conn, _)) = target {
                    if let Some(c) = self.conns.get_mut(conn) {
                        let first = c.closed == [false; 2];
                        c.closed[usize::from(i == c.to && link == c.inb)] = true;
                        if first {
                            self.closing.push(conn);
                        }
                    }
                }
            }
            Rec::Save(text) => self.mix(i, b"save", &[text.as_bytes()]),
            Rec::Published {
                channel,
                message,
                sharded,
            } => self.mix(i, b"deliver", &[&channel, &message, &[u8::from(sharded)]]),
            Rec::Event(event) => {
                let text = event_text(&event);
                self.mix(i, b"event", &[text.as_bytes()]);
                if self.tracing {
                    self.trace.push((now, i, format!("{event:?}")));
                }
            }
            Rec::Done { cron } => {
                if let Some(at) = cron {
                    self.sequence += 1;
                    self.queue
                        .push(Reverse((at, self.sequence, Event::Cron { node: i })));
                }
                return true;
            }
        }
        false
    }

    /// Removes the connections closed in the millisecond that ends.
    fn settle_closes(&mut self) {
        for conn in std::mem::take(&mut self.closing) {
            self.remove_conn(conn);
        }
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

    /// Node `i` writes `bytes` on its `link`: on the connection and to the peer `target`
    /// names (resolved by the step, unless the connection is newer than the batch).
    fn transmit_on(
        &mut self,
        i: usize,
        link: LinkId,
        target: Option<(u64, usize)>,
        bytes: Vec<u8>,
    ) {
        match target.or_else(|| self.link(i, link)) {
            Some(target) => self.transmit(i, target, bytes),
            None => self.recycle(bytes),
        }
    }

    /// Node `i` writes `bytes` on connection `conn` to node `to`: lost, duplicated or
    /// delivered after a latency, as the faults draw.
    fn transmit(&mut self, i: usize, (conn, to): (u64, usize), bytes: Vec<u8>) {
        self.mix(i, b"send", &[&(to as u64).to_le_bytes(), &bytes]);
        if self.random() % 1000 < u64::from(self.faults.loss) {
            self.recycle(bytes);
            return;
        }
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

    /// Keeps a delivered message's buffer for a later copy (as many as a large cluster has
    /// in flight at once, about a millisecond's worth).
    fn recycle(&mut self, bytes: Vec<u8>) {
        step::recycle(&mut self.spare, bytes);
    }

    fn remove_conn(&mut self, conn: u64) {
        if let Some(c) = self.conns.remove(conn) {
            for end in [(c.from, c.out), (c.to, c.inb)] {
                if self.links.get(&end) == Some(&conn) {
                    self.links.remove(&end);
                }
            }
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
        let (ctx, nodes, cron_at, spare) = self.split();
        let mut recs = Vec::new();
        let mut closed = Vec::new();
        let (node, at) = (&mut nodes[i], &mut cron_at[i]);
        step::drain(&ctx, i, node, at, spare, &mut closed, &mut recs);
        for rec in recs {
            self.apply(i, rec);
        }
    }
}

/// A share for each of `present` (node numbers in increasing order, each at most once):
/// the node, its deadline entry, no steps yet.
fn pick<'a>(
    mut nodes: &'a mut [ClusterNode],
    mut cron_at: &'a mut [u64],
    present: &[usize],
) -> Vec<step::Share<'a>> {
    let mut shares = Vec::with_capacity(present.len());
    let mut base = 0;
    for &node in present {
        let skip = node - base;
        let (Some((state, rest)), Some((at, rest_at))) = (
            core::mem::take(&mut nodes)
                .get_mut(skip..)
                .and_then(<[_]>::split_first_mut),
            core::mem::take(&mut cron_at)
                .get_mut(skip..)
                .and_then(<[_]>::split_first_mut),
        ) else {
            break;
        };
        shares.push(step::Share {
            state,
            cron_at: at,
            steps: Vec::new(),
            recs: Vec::new(),
        });
        (nodes, cron_at, base) = (rest, rest_at, node + 1);
    }
    shares
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
