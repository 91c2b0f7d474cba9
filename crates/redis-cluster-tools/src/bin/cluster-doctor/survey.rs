//! What the cluster holds, measured: the masters and their slots, keys per slot
//! (COUNTKEYSINSLOT), memory (INFO memory), operations per second (INFO stats, sampled), each
//! slot's own CPU time where the servers measure it (`CLUSTER SLOT-STATS`: Redis 8.2, Valkey
//! 8.0 and later, with `cluster-slot-stats-enabled yes`), big keys (a bounded SCAN with
//! MEMORY USAGE), hash tags that gather keys, hot keys (OBJECT FREQ under an LFU policy), and
//! slots left open by an interrupted migration.

use std::collections::HashMap;
use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use redis_cluster_state::rebalance::OpenSlot as Marks;
use redis_cluster_state::{ClusterNode, Config};
use redis_hash_slot::{Slot, hash_tag, key_slot};

use crate::conn::{Conn, bytes, cmd, int, items, text};

pub(crate) const SLOTS: usize = 16384;

pub(crate) struct Master {
    pub(crate) id: String,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) slots: Vec<u16>,
    pub(crate) keys: u64,
    /// `used_memory`.
    pub(crate) memory: u64,
    /// `used_memory_dataset`: what the keys take.
    pub(crate) dataset: u64,
    /// Commands per second over the sample.
    pub(crate) ops: f64,
    /// `maxmemory-policy`.
    pub(crate) policy: String,
}

pub(crate) struct BigKey {
    pub(crate) key: Vec<u8>,
    pub(crate) master: usize,
    pub(crate) slot: u16,
    pub(crate) kind: String,
    /// STRLEN, LLEN, HLEN, SCARD, ZCARD or XLEN.
    pub(crate) length: u64,
    /// MEMORY USAGE.
    pub(crate) bytes: u64,
}

pub(crate) struct Tag {
    pub(crate) tag: String,
    pub(crate) slot: u16,
    pub(crate) master: usize,
    /// Keys in the tag's slot, when every key sampled there has the tag; else the keys of
    /// the tag the bounded scan saw.
    pub(crate) keys: u64,
}

pub(crate) struct HotKey {
    pub(crate) key: Vec<u8>,
    pub(crate) master: usize,
    pub(crate) freq: u64,
}

/// A slot a migration left open: a master marks it migrating, or importing, or both.
pub(crate) struct OpenSlot {
    pub(crate) slot: u16,
    pub(crate) marks: Marks,
}

pub(crate) struct Survey {
    pub(crate) masters: Vec<Master>,
    pub(crate) owner: Vec<Option<usize>>,
    pub(crate) slot_keys: Vec<u64>,
    pub(crate) big: Vec<BigKey>,
    pub(crate) tags: Vec<Tag>,
    /// `None` when no master runs an LFU policy.
    pub(crate) hot: Option<Vec<HotKey>>,
    pub(crate) open: Vec<OpenSlot>,
    /// Keys the bounded scan looked at.
    pub(crate) scanned: u64,
    /// Each slot's CPU time (µs) as its master measured it (`CLUSTER SLOT-STATS`
    /// `cpu-usec`, counted since the stats were enabled or reset), when every master with
    /// slots reports it; else `None`, and a slot's operations are its master's shared by
    /// key count.
    pub(crate) slot_cpu: Option<Vec<u64>>,
}

/// Each slot's `cpu-usec` from one node's `CLUSTER SLOT-STATS SLOTSRANGE 0 16383` reply
/// (`[slot, [name, value, ...]]` per slot it owns), or `None` when the node has no such
/// command (before Redis 8.2 / Valkey 8.0) or does not measure CPU
/// (`cluster-slot-stats-enabled no`: key counts only).
fn slot_cpu(conn: &mut Conn) -> io::Result<Option<Vec<(u16, u64)>>> {
    let reply = conn.call(&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "0", "16383"])?;
    if !matches!(reply, redis_resp::Frame::Array(_)) {
        return Ok(None);
    }
    let mut found = Vec::new();
    for entry in items(&reply) {
        let (Some(slot), Some(stats)) = (items(entry).first(), items(entry).get(1)) else {
            return Ok(None);
        };
        let Some(slot) = int(slot).and_then(|s| u16::try_from(s).ok()) else {
            return Ok(None);
        };
        // A RESP2 map: names and values in turn.
        let cpu = items(stats)
            .chunks(2)
            .find(|pair| text(&pair[0]) == "cpu-usec")
            .and_then(|pair| pair.get(1).and_then(int));
        let Some(cpu) = cpu else {
            return Ok(None);
        };
        found.push((slot, cpu.max(0) as u64));
    }
    Ok(Some(found))
}

pub(crate) struct SurveyOptions {
    /// Keys scanned per master, at most.
    pub(crate) scan_limit: u64,
    pub(crate) sample: Duration,
    pub(crate) top: usize,
    pub(crate) progress: bool,
}

/// A progress bar on standard error, drawn when it is a terminal (or when asked).
pub(crate) struct Progress {
    label: &'static str,
    total: u64,
    done: u64,
    shown: bool,
    last: Instant,
}

impl Progress {
    pub(crate) fn new(label: &'static str, total: u64, wanted: bool) -> Self {
        Self {
            label,
            total,
            done: 0,
            shown: wanted && io::stderr().is_terminal(),
            last: Instant::now(),
        }
    }

    pub(crate) fn advance(&mut self, n: u64) {
        self.done += n;
        if self.shown
            && (self.last.elapsed() > Duration::from_millis(100) || self.done >= self.total)
        {
            self.last = Instant::now();
            let width = 30;
            let filled = (self.done.min(self.total) * width / self.total.max(1)) as usize;
            eprint!(
                "\r{:<14} [{}{}] {}/{}",
                self.label,
                "#".repeat(filled),
                ".".repeat(width as usize - filled),
                self.done,
                self.total
            );
            let _ = io::stderr().flush();
        }
    }

    pub(crate) fn finish(&mut self) {
        if self.shown {
            eprintln!();
        }
    }
}

/// The masters (with or without slots) and who serves each slot, from `addr`'s view.
pub(crate) fn topology(addr: &str) -> io::Result<(Vec<Master>, Vec<Option<usize>>)> {
    let mut conn = Conn::connect(addr)?;
    let nodes = text(&conn.ok(&["CLUSTER", "NODES"])?);
    let (host, port) = addr
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host, port.parse().ok()?)))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{addr}: not HOST:PORT"),
            )
        })?;
    let view = parse_view(host, port, &nodes)?;
    let mut masters = Vec::new();
    for node in view.nodes() {
        if !node.is_master() || node.is_failed() || node.in_handshake() || node.port == 0 {
            continue;
        }
        let slots: Vec<u16> = node.slots.iter().map(u16::from).collect();
        masters.push(Master {
            id: node.id.to_string(),
            host: node.ip.as_str().to_owned(),
            port: node.port,
            slots,
            keys: 0,
            memory: 0,
            dataset: 0,
            ops: 0.0,
            policy: String::new(),
        });
    }
    // A stable order: by address.
    masters.sort_by(|a, b| (&a.host, a.port).cmp(&(&b.host, b.port)));
    let mut owner = vec![None; SLOTS];
    for (m, master) in masters.iter().enumerate() {
        for &slot in &master.slots {
            owner[usize::from(slot)] = Some(m);
        }
    }
    Ok((masters, owner))
}

/// A node's `CLUSTER NODES` read as the state crate reads a nodes.conf.
fn parse_view(host: &str, port: u16, nodes: &str) -> io::Result<ClusterNode> {
    ClusterNode::from_nodes_conf(
        Config::new(host, port),
        nodes,
        redis_cluster_state::Instant::ZERO,
    )
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{host}:{port}: {e}")))
}

impl Master {
    /// `host:port`.
    pub(crate) fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// The slots each master marks as migrating or importing, in its own view.
pub(crate) fn open_slots(masters: &[Master], owner: &[Option<usize>]) -> io::Result<Vec<OpenSlot>> {
    let index: HashMap<&str, usize> = masters
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id.as_str(), i))
        .collect();
    let mut open: HashMap<u16, OpenSlot> = HashMap::new();
    for (m, master) in masters.iter().enumerate() {
        let mut conn = Conn::connect(&master.addr())?;
        let nodes = text(&conn.ok(&["CLUSTER", "NODES"])?);
        let view = parse_view(&master.host, master.port, &nodes)?;
        for slot in 0..SLOTS as u16 {
            let Some(s) = Slot::new(slot) else { continue };
            let known = |id: Option<&_>| -> Option<usize> {
                id.and_then(|id: &redis_cluster_bus::NodeId| {
                    index.get(id.to_string().as_str()).copied()
                })
            };
            let migrating = known(view.migrating_to(s));
            let importing = known(view.importing_from(s));
            if migrating.is_none() && importing.is_none() {
                continue;
            }
            let entry = open.entry(slot).or_insert_with(|| OpenSlot {
                slot,
                marks: Marks {
                    owner: owner[usize::from(slot)],
                    ..Marks::default()
                },
            });
            if let Some(to) = migrating {
                entry.marks.migrating.push((m, to));
            }
            if let Some(from) = importing {
                entry.marks.importing.push((m, from));
            }
        }
    }
    let mut open: Vec<OpenSlot> = open.into_values().collect();
    open.sort_by_key(|o| o.slot);
    Ok(open)
}

/// The value of `field` in INFO text.
pub(crate) fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_owned())
}

fn info_number(conn: &mut Conn, section: &str, field: &str) -> io::Result<u64> {
    let info = text(&conn.ok(&["INFO", section])?);
    Ok(info_field(&info, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_default())
}

pub(crate) fn survey(addr: &str, options: &SurveyOptions) -> io::Result<Survey> {
    let (mut masters, owner) = topology(addr)?;
    let open = open_slots(&masters, &owner)?;
    let mut conns = masters
        .iter()
        .map(|m| Conn::connect(&m.addr()))
        .collect::<io::Result<Vec<_>>>()?;

    // Keys per slot.
    let mut slot_keys = vec![0u64; SLOTS];
    let owned: u64 = masters.iter().map(|m| m.slots.len() as u64).sum();
    let mut progress = Progress::new("counting keys", owned, options.progress);
    for (master, conn) in masters.iter_mut().zip(&mut conns) {
        for chunk in master.slots.chunks(1024) {
            let commands: Vec<Vec<Vec<u8>>> = chunk
                .iter()
                .map(|s| cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s.to_string()]))
                .collect();
            for (&slot, reply) in chunk.iter().zip(conn.pipeline(&commands)?) {
                let n = int(&reply).unwrap_or_default().max(0) as u64;
                slot_keys[usize::from(slot)] = n;
                master.keys += n;
            }
            progress.advance(chunk.len() as u64);
        }
    }
    progress.finish();

    // Memory, policy, and operations per second over the sample.
    let mut before = Vec::new();
    for (master, conn) in masters.iter_mut().zip(&mut conns) {
        master.memory = info_number(conn, "memory", "used_memory")?;
        master.dataset = info_number(conn, "memory", "used_memory_dataset")?;
        let policy = conn.ok(&["CONFIG", "GET", "maxmemory-policy"])?;
        master.policy = items(&policy).get(1).map(text).unwrap_or_default();
        before.push((
            Instant::now(),
            info_number(conn, "stats", "total_commands_processed")?,
        ));
    }
    std::thread::sleep(options.sample);
    for ((master, conn), (t0, n0)) in masters.iter_mut().zip(&mut conns).zip(before) {
        let n1 = info_number(conn, "stats", "total_commands_processed")?;
        // The second INFO itself is one command.
        let commands = n1.saturating_sub(n0).saturating_sub(1);
        master.ops = commands as f64 / t0.elapsed().as_secs_f64().max(1e-3);
    }

    // The bounded scan: big keys, tags, hot keys.
    let lfu = masters.iter().any(|m| m.policy.contains("lfu"));
    let mut big: Vec<BigKey> = Vec::new();
    let mut hot: Vec<HotKey> = Vec::new();
    let mut seen_tags: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut scanned = 0u64;
    let planned: u64 = masters.iter().map(|m| m.keys.min(options.scan_limit)).sum();
    let mut progress = Progress::new("scanning keys", planned, options.progress);
    for (m, conn) in conns.iter_mut().enumerate() {
        let mut cursor = String::from("0");
        let mut done = 0u64;
        loop {
            let reply = conn.ok(&["SCAN", &cursor, "COUNT", "1000"])?;
            let parts = items(&reply);
            cursor = parts.first().map(text).unwrap_or_else(|| "0".into());
            let keys: Vec<Vec<u8>> = parts
                .get(1)
                .map(|k| items(k).iter().map(bytes).collect())
                .unwrap_or_default();
            let usage: Vec<Vec<Vec<u8>>> = keys
                .iter()
                .map(|k| cmd(&[&b"MEMORY"[..], b"USAGE", k]))
                .collect();
            let bytes = conn.pipeline(&usage)?;
            for (key, bytes) in keys.iter().zip(&bytes) {
                let bytes = int(bytes).unwrap_or_default().max(0) as u64;
                big.push(BigKey {
                    key: key.clone(),
                    master: m,
                    slot: u16::from(key_slot(key)),
                    kind: String::new(),
                    length: 0,
                    bytes,
                });
                let tag = hash_tag(key);
                if tag.len() < key.len() {
                    *seen_tags.entry(tag.to_vec()).or_default() += 1;
                }
            }
            keep_top(&mut big, options.top, |k| k.bytes);
            if lfu && masters[m].policy.contains("lfu") {
                let freq: Vec<Vec<Vec<u8>>> = keys
                    .iter()
                    .map(|k| cmd(&[&b"OBJECT"[..], b"FREQ", k]))
                    .collect();
                for (key, f) in keys.iter().zip(conn.pipeline(&freq)?) {
                    hot.push(HotKey {
                        key: key.clone(),
                        master: m,
                        freq: int(&f).unwrap_or_default().max(0) as u64,
                    });
                }
                keep_top(&mut hot, options.top, |k| k.freq);
            }
            done += keys.len() as u64;
            scanned += keys.len() as u64;
            progress.advance(keys.len() as u64);
            if cursor == "0" || done >= options.scan_limit {
                break;
            }
        }
    }
    progress.finish();
    for key in &mut big {
        let conn = &mut conns[key.master];
        key.kind = text(&conn.ok(&[&b"TYPE"[..], &key.key])?);
        let length = match key.kind.as_str() {
            "string" => "STRLEN",
            "list" => "LLEN",
            "hash" => "HLEN",
            "set" => "SCARD",
            "zset" => "ZCARD",
            "stream" => "XLEN",
            _ => continue,
        };
        key.length = int(&conn.ok(&[length.as_bytes(), &key.key])?)
            .unwrap_or_default()
            .max(0) as u64;
    }

    let tags = find_tags(&owner, &slot_keys, &mut conns, &seen_tags, scanned)?;
    // Measured per-slot CPU, only if every master with slots gives it for its own slots.
    let mut cpu = vec![0u64; SLOTS];
    let mut measured = true;
    for (m, conn) in conns.iter_mut().enumerate() {
        if masters[m].slots.is_empty() {
            continue;
        }
        match slot_cpu(conn)? {
            Some(slots) => {
                for (slot, usec) in slots {
                    if owner.get(usize::from(slot)) == Some(&Some(m)) {
                        cpu[usize::from(slot)] = usec;
                    }
                }
            }
            None => measured = false,
        }
    }
    Ok(Survey {
        masters,
        owner,
        slot_keys,
        big,
        tags,
        hot: lfu.then_some(hot),
        open,
        scanned,
        slot_cpu: measured.then_some(cpu),
    })
}

/// Keeps the `top` largest by `measure`, largest first.
fn keep_top<T>(list: &mut Vec<T>, top: usize, measure: impl Fn(&T) -> u64) {
    list.sort_by_key(|item| std::cmp::Reverse(measure(item)));
    list.truncate(top);
}

/// Hash tags that gather keys: every slot far above the mean is sampled with GETKEYSINSLOT,
/// and a tag shared by every sampled key is named with the slot's count; tags the scan saw
/// often (1% of the keys it saw) are named with what it saw.
fn find_tags(
    owner: &[Option<usize>],
    slot_keys: &[u64],
    conns: &mut [Conn],
    seen: &HashMap<Vec<u8>, u64>,
    scanned: u64,
) -> io::Result<Vec<Tag>> {
    let total: u64 = slot_keys.iter().sum();
    let mean = total / SLOTS as u64;
    let mut tags: Vec<Tag> = Vec::new();
    for (slot, &keys) in slot_keys.iter().enumerate() {
        let Some(m) = owner[slot] else { continue };
        if keys < 100 || keys < mean.saturating_mul(10) {
            continue;
        }
        let sample = conns[m].ok(&["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "20"])?;
        let sampled: Vec<Vec<u8>> = items(&sample).iter().map(bytes).collect();
        let Some(first) = sampled.first() else {
            continue;
        };
        let tag = hash_tag(first);
        if tag.len() < first.len() && sampled.iter().all(|k| hash_tag(k) == tag) {
            tags.push(Tag {
                tag: String::from_utf8_lossy(tag).into_owned(),
                slot: slot as u16,
                master: m,
                keys,
            });
        }
    }
    for (tag, &count) in seen {
        if count * 100 < scanned || count < 2 {
            continue;
        }
        let name = String::from_utf8_lossy(tag).into_owned();
        if tags.iter().any(|t| t.tag == name) {
            continue;
        }
        let slot = u16::from(key_slot(tag));
        let Some(master) = owner[usize::from(slot)] else {
            continue;
        };
        tags.push(Tag {
            tag: name,
            slot,
            master,
            keys: count,
        });
    }
    tags.sort_by_key(|t| std::cmp::Reverse(t.keys));
    Ok(tags)
}
