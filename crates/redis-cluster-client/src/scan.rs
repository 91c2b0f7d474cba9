//! SCAN over a cluster, slot by slot, so that a key present for the whole scan is given once,
//! reshards or not.
//!
//! A node's own SCAN cannot promise that across a reshard: a key that moves from a node not
//! yet scanned to one already scanned is never seen, and one moving the other way is seen
//! twice. So the cursor is a slot, and a call reads whole slots: for each, on the node the
//! map names, `EXISTS probe` / `CLUSTER GETKEYSINSLOT slot n` / `EXISTS probe` in one write,
//! where `probe` is a key of that slot that nobody has. A node that owns a stable slot
//! answers the probe `0`; one that is migrating it answers `ASK`, one that does not own it
//! `MOVED`. The keys read are the slot's whole set when the node owned the slot, stable,
//! before the read and after it. Otherwise the walk goes where the later probe points (after
//! an ASK: `ASKING` before that node's probe) and reads there too, and the slot's keys are
//! the union of the reads. A migration moves a key by restoring it on the target before
//! deleting it on the source, and a slot's keys only ever flow the way its probes point; so
//! a key that was not on one node when it was read had reached the next one already, and a
//! key is never missed, and the union lists it once.
//!
//! Each call walks a batch of slots (COUNT of them, one write per node), then batches twice
//! as large while it has fewer than COUNT keys, up to 16 × COUNT slots (at least 256); MATCH
//! is applied to the keys read, and TYPE by one `TYPE key` per key found, routed as any
//! command (so a key that moved in between is still asked where it is).

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::time::Instant;

use bytes::Bytes;
use redis_cluster_route::{ClusterError, Endpoint, Redirect, glob_match};
use redis_hash_slot::{Slot, key_slot};
use redis_resp::{Frame, errors};

use crate::engine::{Engine, endpoint, redirect_endpoint};
use crate::request::{Call, CallKey, CallState, Combine, Target};
use crate::{ConnId, RequestId};
use crate::{IdHasher, error_frame};

/// Slots in a cluster.
const SLOTS: u32 = 16384;

/// The most slots one write to one node reads.
const BATCH_MAX: u32 = 1024;

/// What the probe keys start with; two bytes follow, chosen per slot.
const PROBE_PREFIX: &[u8] = b"redis-cluster-client:scan-probe:";

/// A SCAN in progress: the slots of this call's current batch and the reads in flight.
#[derive(Debug)]
pub(crate) struct SlotScan {
    /// The batch's first slot.
    start: u32,
    /// The slot after the batch.
    end: u32,
    /// COUNT: keys a call aims at.
    count: u32,
    /// Slots this call walked in its earlier batches.
    walked: u32,
    pattern: Option<Bytes>,
    kind: Option<Bytes>,
    /// Keys the call's finished batches found (MATCH applied).
    found: Vec<Bytes>,
    /// The batch's slots, from `start`.
    slots: Vec<Walk>,
    /// The reads in flight, by call index: their slots and the commands before their last.
    visits: HashMap<usize, Visit, IdHasher>,
    /// TYPE calls in flight, by call index: the index in `found` each asks about.
    types: HashMap<usize, usize, IdHasher>,
    /// The TYPE replies, per index in `found`.
    typed: Vec<Option<Frame>>,
}

/// One slot of a batch.
#[derive(Debug, Default)]
struct Walk {
    /// Its keys read so far (deduplicated once a second read came).
    keys: Vec<Bytes>,
    /// Reads so far.
    hops: u32,
}

/// One write of slot reads to one node.
#[derive(Debug)]
pub(crate) struct Visit {
    addr: String,
    /// Its slots, each with whether the walk came by ASK (then `ASKING` goes before the
    /// probe, and there is no probe before the read).
    slots: Vec<(u16, bool)>,
    /// Every command but the last (the call's own), three per slot.
    pub(crate) commands: Vec<Vec<Bytes>>,
    /// The replies to `commands`, as they come.
    pub(crate) pieces: Vec<Frame>,
}

/// What a probe said.
enum Probe {
    /// The node owns the slot and is not migrating it.
    Clean,
    Moved(String),
    Ask(String),
    /// Anything else (CLUSTERDOWN, LOADING): read there again later.
    Refused,
}

/// The probe key of `slot`: a key of that slot, of a name no application uses.
fn probe_key(slot: u16) -> Bytes {
    static SUFFIXES: OnceLock<Vec<u16>> = OnceLock::new();
    let suffixes = SUFFIXES.get_or_init(|| {
        // Two bytes after a fixed prefix reach every CRC16 value once, so every slot (the
        // low 14 bits) four times; the first of each is kept.
        let mut table = vec![u16::MAX; SLOTS as usize];
        let mut key = PROBE_PREFIX.to_vec();
        key.extend_from_slice(&[0, 0]);
        for suffix in 0..=u16::MAX {
            let at = key.len() - 2;
            key[at..].copy_from_slice(&suffix.to_be_bytes());
            let slot = usize::from(u16::from(key_slot(&key)));
            if table[slot] == u16::MAX {
                table[slot] = suffix;
            }
        }
        table
    });
    let mut key = PROBE_PREFIX.to_vec();
    let suffix = suffixes.get(usize::from(slot)).copied().unwrap_or_default();
    key.extend_from_slice(&suffix.to_be_bytes());
    Bytes::from(key)
}

/// SCAN's arguments as the server checks them: the slot to start at, COUNT, MATCH, TYPE.
fn parse(argv: &[Bytes]) -> Result<(u32, u32, Option<Bytes>, Option<Bytes>), Frame> {
    let cursor = argv
        .get(1)
        .and_then(|c| std::str::from_utf8(c).ok())
        .and_then(|c| c.parse::<u64>().ok())
        .filter(|c| *c < u64::from(SLOTS))
        .ok_or_else(|| error_frame("ERR invalid cursor"))?;
    let (mut count, mut pattern, mut kind) = (10u32, None, None);
    let mut rest = argv.get(2..).unwrap_or_default().chunks(2);
    for option in rest.by_ref() {
        let [name, value] = option else {
            return Err(error_frame(errors::SYNTAX));
        };
        if name.eq_ignore_ascii_case(b"COUNT") {
            let n: i64 = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| error_frame(errors::NOT_INTEGER))?;
            if n < 1 {
                return Err(error_frame(errors::SYNTAX));
            }
            count = u32::try_from(n).unwrap_or(u32::MAX);
        } else if name.eq_ignore_ascii_case(b"MATCH") {
            pattern = Some(value.clone());
        } else if name.eq_ignore_ascii_case(b"TYPE") {
            kind = Some(value.clone());
        } else {
            return Err(error_frame(errors::SYNTAX));
        }
    }
    Ok((cursor as u32, count, pattern, kind))
}

impl SlotScan {
    /// The most slots one call walks.
    fn budget(&self) -> u32 {
        self.count.saturating_mul(16).max(256)
    }

    /// The reply of the call: the next slot as the cursor (0 at the end), the keys.
    fn reply(&mut self) -> Frame {
        let next = if self.end >= SLOTS { 0 } else { self.end };
        let keys = std::mem::take(&mut self.found);
        let keys = match self.kind.take() {
            None => keys,
            Some(kind) => keys
                .into_iter()
                .zip(std::mem::take(&mut self.typed))
                .filter(|(_, t)| {
                    t.as_ref()
                        .and_then(Frame::as_bytes)
                        .is_some_and(|t| t.eq_ignore_ascii_case(&kind))
                })
                .map(|(k, _)| k)
                .collect(),
        };
        Frame::Array(vec![
            Frame::BulkString(Bytes::from(next.to_string())),
            Frame::Array(keys.into_iter().map(Frame::BulkString).collect()),
        ])
    }
}

impl SlotScan {
    /// The slot read of call `index`, while it is in flight.
    pub(crate) fn visit_mut(&mut self, index: usize) -> Option<&mut Visit> {
        self.visits.get_mut(&index)
    }
}

impl Visit {
    fn new(addr: String, slots: Vec<(u16, bool)>, limit: u32) -> (Self, Vec<Bytes>) {
        let mut commands = Vec::with_capacity(slots.len() * 3);
        for &(slot, asking) in &slots {
            let probe = probe_key(slot);
            let exists = vec![Bytes::from_static(b"EXISTS"), probe];
            let read = vec![
                Bytes::from_static(b"CLUSTER"),
                Bytes::from_static(b"GETKEYSINSLOT"),
                Bytes::from(slot.to_string()),
                Bytes::from(limit.to_string()),
            ];
            if asking {
                commands.push(read);
                commands.push(vec![Bytes::from_static(b"ASKING")]);
            } else {
                commands.push(exists.clone());
                commands.push(read);
            }
            commands.push(exists);
        }
        let last = commands.pop().unwrap_or_default();
        let visit = Self {
            addr,
            slots,
            commands,
            pieces: Vec::new(),
        };
        (visit, last)
    }
}

/// What a probe's reply says; a redirect that names no host names the node's.
fn probe(frame: &Frame, host: &str) -> Probe {
    let Frame::SimpleError(text) = frame else {
        return match frame {
            Frame::Integer(_) => Probe::Clean,
            _ => Probe::Refused,
        };
    };
    let to = |to: &[u8], port: u16| redirect_endpoint(to, port, host).to_string();
    match ClusterError::parse(text) {
        ClusterError::Redirect(Redirect::Moved { host, port, .. }) => Probe::Moved(to(host, port)),
        ClusterError::Redirect(Redirect::Ask { host, port, .. }) => Probe::Ask(to(host, port)),
        _ => Probe::Refused,
    }
}

impl Engine {
    /// Starts a SCAN (a cluster's: [`Config::fixed_map`](crate::Config::fixed_map) pools
    /// walk their masters with the nodes' own SCAN).
    pub(crate) fn scan_start(&mut self, now: Instant, id: RequestId, argv: &[Bytes]) {
        let (cursor, count, pattern, kind) = match parse(argv) {
            Ok(parsed) => parsed,
            Err(e) => return self.finish(id, e),
        };
        let scan = SlotScan {
            start: cursor,
            end: cursor,
            count,
            walked: 0,
            pattern,
            kind,
            found: Vec::new(),
            slots: Vec::new(),
            visits: HashMap::default(),
            types: HashMap::default(),
            typed: Vec::new(),
        };
        if let Some(request) = self.requests.get_mut(&id) {
            request.combine = Combine::SlotScan(Box::new(scan));
        }
        self.scan_batch(now, id, count.clamp(1, BATCH_MAX));
    }

    /// Reads the next `size` slots (fewer at the end, or at the call's budget).
    fn scan_batch(&mut self, now: Instant, id: RequestId, size: u32) {
        let Some(Combine::SlotScan(scan)) = self.requests.get_mut(&id).map(|r| &mut r.combine)
        else {
            return;
        };
        let size = size.min(scan.budget().saturating_sub(scan.walked)).max(1);
        scan.start = scan.end;
        scan.end = (scan.start + size).min(SLOTS);
        scan.slots = (scan.start..scan.end).map(|_| Walk::default()).collect();
        let (start, end) = (scan.start, scan.end);
        // Consecutive slots of one master go in one write.
        let mut groups: Vec<(String, Vec<(u16, bool)>)> = Vec::new();
        for raw in start..end {
            let slot = raw as u16;
            let master =
                Slot::new(slot).and_then(|s| self.map.as_ref().and_then(|m| m.shard_index(s)));
            // A slot nobody serves (`cluster-require-full-coverage no`) has no key anyone
            // can reach: it is passed over, and the map reloaded in case it is stale.
            let Some(addr) = master.and_then(|i| self.master_addrs.get(i)) else {
                self.refresh.want(now);
                continue;
            };
            match groups.last_mut() {
                Some((last, slots)) if last == addr => slots.push((slot, false)),
                _ => groups.push((addr.clone(), vec![(slot, false)])),
            }
        }
        if groups.is_empty() {
            return self.scan_settled(now, id);
        }
        for (addr, slots) in groups {
            self.scan_visit(now, id, addr, slots, None);
        }
    }

    /// Sends one write of slot reads to `addr`, now or at `at`.
    fn scan_visit(
        &mut self,
        now: Instant,
        id: RequestId,
        addr: String,
        slots: Vec<(u16, bool)>,
        at: Option<Instant>,
    ) {
        let limit = self.config.scan_slot_keys;
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        let Combine::SlotScan(scan) = &mut request.combine else {
            return;
        };
        let (visit, last) = Visit::new(addr.clone(), slots, limit);
        let index = request.calls.len();
        scan.visits.insert(index, visit);
        request.calls.push(Call::new(last, Target::Node(addr)));
        let key = (id, index);
        match at {
            Some(at) => {
                if let Some(call) = self.call_mut(key) {
                    call.state = CallState::Retry(at);
                }
                self.retries.insert((at, key));
            }
            None => self.send(now, key),
        }
    }

    /// A reply to one of a slot read's commands before its last.
    pub(crate) fn scan_piece(&mut self, conn: ConnId, key: CallKey, frame: Frame) {
        let Some(request) = self.requests.get_mut(&key.0) else {
            return;
        };
        if request.calls.get(key.1).map(|c| c.state) != Some(CallState::Sent(conn)) {
            return;
        }
        if let Combine::SlotScan(scan) = &mut request.combine {
            if let Some(visit) = scan.visits.get_mut(&key.1) {
                visit.pieces.push(frame);
            }
        }
    }

    /// A slot read's last reply: each of its slots is settled, or read again where its
    /// probe points.
    pub(crate) fn scan_visited(&mut self, now: Instant, conn: ConnId, key: CallKey, last: Frame) {
        let limit = self.config.scan_slot_keys;
        let max = self.config.max_attempts;
        let (base, longest) = (self.config.retry_base, self.config.retry_max);
        let Some(request) = self.requests.get_mut(&key.0) else {
            return;
        };
        if request.calls.get(key.1).map(|c| c.state) != Some(CallState::Sent(conn)) {
            return;
        }
        if let Some(call) = request.calls.get_mut(key.1) {
            call.state = CallState::Done;
        }
        let Combine::SlotScan(scan) = &mut request.combine else {
            return;
        };
        let Some(mut visit) = scan.visits.remove(&key.1) else {
            return;
        };
        if request.reply.is_some() {
            return;
        }
        visit.pieces.push(last);
        if visit.pieces.len() != visit.slots.len() * 3 {
            return self.finish(key.0, error_frame("ERR unexpected reply to a SCAN step"));
        }
        let host = endpoint(&visit.addr).host;
        // Where each unsettled slot is read next, and the MOVED heard.
        let mut next: Vec<(String, u16, bool)> = Vec::new();
        let mut moved: Vec<(u16, Endpoint)> = Vec::new();
        let mut asked = 0;
        let mut pieces = visit.pieces.into_iter();
        for &(slot, asking) in &visit.slots {
            let (Some(first), Some(second), Some(after)) =
                (pieces.next(), pieces.next(), pieces.next())
            else {
                break;
            };
            let (before, keys) = if asking {
                (Probe::Clean, first)
            } else {
                (probe(&first, &host), second)
            };
            let keys = match keys {
                Frame::Array(keys) if keys.len() >= limit as usize => {
                    let text = format!(
                        "ERR slot {slot} holds {limit} keys or more, more than one SCAN step \
                         reads (Config::scan_slot_keys)"
                    );
                    return self.finish(key.0, error_frame(&text));
                }
                Frame::Array(keys) => keys,
                other if other.is_error() => return self.finish(key.0, other),
                _ => return self.finish(key.0, error_frame("ERR unexpected GETKEYSINSLOT reply")),
            };
            let at = u32::from(slot).checked_sub(scan.start);
            let Some(walk) = at.and_then(|at| scan.slots.get_mut(at as usize)) else {
                continue;
            };
            let read = keys.into_iter().filter_map(|k| match k {
                Frame::BulkString(k) => Some(k),
                _ => None,
            });
            if walk.hops == 0 {
                walk.keys.extend(read);
            } else {
                let mut seen: HashSet<Bytes> = walk.keys.iter().cloned().collect();
                walk.keys.extend(read.filter(|k| seen.insert(k.clone())));
            }
            walk.hops += 1;
            let to = match probe(&after, &host) {
                Probe::Clean if matches!(before, Probe::Clean) => continue,
                Probe::Clean => (visit.addr.clone(), false),
                Probe::Moved(to) => {
                    moved.push((slot, endpoint(&to)));
                    (to, false)
                }
                Probe::Ask(to) => {
                    asked += 1;
                    (to, true)
                }
                Probe::Refused => (visit.addr.clone(), asking),
            };
            if walk.hops >= max {
                let text = match after {
                    e if e.is_error() => e,
                    _ => error_frame(&format!(
                        "TRYAGAIN slot {slot} did not settle during SCAN; send the same \
                         cursor again"
                    )),
                };
                return self.finish(key.0, text);
            }
            next.push((to.0, slot, to.1));
        }
        let hops = scan.slots.iter().map(|w| w.hops).max().unwrap_or(1);
        let settled = scan.visits.is_empty() && next.is_empty();
        self.counters.asked += asked;
        self.counters.moved += moved.len() as u64;
        for (slot, to) in moved {
            if let Some(slot) = Slot::new(slot) {
                self.moved(now, slot, to);
            }
        }
        // Reads of the same node again wait a little: it was between two states.
        let mut groups: Vec<(String, Vec<(u16, bool)>)> = Vec::new();
        for (addr, slot, asking) in next {
            match groups.iter_mut().find(|(a, _)| *a == addr) {
                Some((_, slots)) => slots.push((slot, asking)),
                None => groups.push((addr, vec![(slot, asking)])),
            }
        }
        for (addr, slots) in groups {
            let at = (addr == visit.addr)
                .then(|| now + crate::config::backoff(base, longest, hops.saturating_sub(1)));
            self.scan_visit(now, key.0, addr, slots, at);
        }
        if settled {
            self.scan_settled(now, key.0);
        }
    }

    /// Every slot of the batch is read: the call goes on, asks TYPE, or replies.
    fn scan_settled(&mut self, now: Instant, id: RequestId) {
        let Some(Combine::SlotScan(scan)) = self.requests.get_mut(&id).map(|r| &mut r.combine)
        else {
            return;
        };
        let size = scan.end - scan.start;
        for walk in std::mem::take(&mut scan.slots) {
            match &scan.pattern {
                Some(p) => scan
                    .found
                    .extend(walk.keys.into_iter().filter(|k| glob_match(p, k))),
                None => scan.found.extend(walk.keys),
            }
        }
        scan.walked += size;
        let more = scan.end < SLOTS
            && scan.found.len() < scan.count as usize
            && scan.walked < scan.budget();
        if more {
            return self.scan_batch(now, id, size.saturating_mul(2).min(BATCH_MAX));
        }
        if scan.kind.is_none() || scan.found.is_empty() {
            let reply = scan.reply();
            return self.finish(id, reply);
        }
        // TYPE: each key asked where it is now.
        scan.typed = vec![None; scan.found.len()];
        let asks: Vec<Bytes> = scan.found.clone();
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        let first = request.calls.len();
        for (at, k) in asks.into_iter().enumerate() {
            let slot = key_slot(&k);
            let argv = vec![Bytes::from_static(b"TYPE"), k];
            request
                .calls
                .push(Call::new(argv, Target::Slot { slot, read: false }));
            if let Combine::SlotScan(scan) = &mut request.combine {
                scan.types.insert(first + at, at);
            }
        }
        let last = request.calls.len();
        for index in first..last {
            self.enqueue((id, index));
            self.dispatch(now, (id, index));
        }
    }

    /// A call of a SCAN has its final reply (a TYPE's, or an error that ends a slot read):
    /// the SCAN's reply when that was the last one owed.
    pub(crate) fn scan_complete(&mut self, key: CallKey, frame: Frame) -> Option<Frame> {
        let request = self.requests.get_mut(&key.0)?;
        let Combine::SlotScan(scan) = &mut request.combine else {
            return None;
        };
        if request.reply.is_some() {
            return None;
        }
        if scan.visits.remove(&key.1).is_some() {
            // A slot read that ran out of attempts, or whose connection was closed.
            return Some(frame);
        }
        let at = scan.types.remove(&key.1)?;
        if let Some(slot) = scan.typed.get_mut(at) {
            *slot = Some(frame);
        }
        scan.types.is_empty().then(|| scan.reply())
    }
}

#[cfg(test)]
mod tests {
    use super::{SLOTS, parse, probe_key};
    use bytes::Bytes;
    use redis_hash_slot::key_slot;

    #[test]
    fn every_slot_has_a_probe_key_of_its_own_slot() {
        for slot in 0..SLOTS as u16 {
            assert_eq!(u16::from(key_slot(&probe_key(slot))), slot);
        }
    }

    #[test]
    fn arguments_are_checked_as_the_server_checks_them() {
        let argv = |line: &str| -> Vec<Bytes> {
            line.split(' ')
                .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                .collect()
        };
        let ok = parse(&argv("SCAN 17 match a* COUNT 100 type hash")).expect("valid");
        assert_eq!((ok.0, ok.1), (17, 100));
        assert_eq!(ok.2.as_deref(), Some(&b"a*"[..]));
        assert_eq!(ok.3.as_deref(), Some(&b"hash"[..]));
        for (line, error) in [
            ("SCAN 16384", "ERR invalid cursor"),
            ("SCAN x", "ERR invalid cursor"),
            ("SCAN 0 COUNT 0", "ERR syntax error"),
            (
                "SCAN 0 COUNT x",
                "ERR value is not an integer or out of range",
            ),
            ("SCAN 0 COUNT", "ERR syntax error"),
            ("SCAN 0 LIMIT 3", "ERR syntax error"),
        ] {
            let got = parse(&argv(line))
                .err()
                .and_then(|f| f.as_bytes().map(<[u8]>::to_vec));
            assert_eq!(got.as_deref(), Some(error.as_bytes()), "{line}");
        }
    }
}
