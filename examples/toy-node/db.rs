//! The toy node's keyspace: strings, lists, hashes and streams in memory, with expiry times, and an
//! index by hash slot for `CLUSTER GETKEYSINSLOT` / `COUNTKEYSINSLOT` and for SCAN.
//!
//! Expired keys are removed when they are next touched, as the server's lazy expiry does;
//! there is no active expiry cycle, so a key never touched again after it expired stays in
//! memory (it is never seen: every read and every listing checks the time).

use std::collections::{BTreeSet, HashMap, VecDeque};

use redis_cluster_proto::hash_slot::key_slot;

/// A value of one of the toy's four types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    Str(Vec<u8>),
    List(VecDeque<Vec<u8>>),
    /// Field–value pairs in insertion order, as the server's small (listpack) hashes reply.
    Hash(Fields),
    /// Entries in the server's macro nodes (`stream.rs`).
    Stream(crate::stream::Stream),
}

/// A hash's fields in insertion order (the order HGETALL gives for the server's small,
/// listpack-encoded hashes), each found by name without a scan: HSET and HDEL of many fields
/// cost linear time, not quadratic, whatever a client sends.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fields {
    /// In insertion order; a removed field leaves `None` until the next compaction.
    order: Vec<Option<(Vec<u8>, Vec<u8>)>>,
    /// Where each field is in `order`.
    index: HashMap<Vec<u8>, usize>,
}

impl Fields {
    /// The pairs in order, or `None` if a field repeats (the server refuses such a DUMP
    /// payload).
    pub(crate) fn from_pairs(pairs: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) -> Option<Self> {
        let mut fields = Self::default();
        for (field, value) in pairs {
            if !fields.insert(&field, &value) {
                return None;
            }
        }
        Some(fields)
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub(crate) fn get(&self, field: &[u8]) -> Option<&[u8]> {
        let at = *self.index.get(field)?;
        self.order.get(at)?.as_ref().map(|(_, v)| v.as_slice())
    }

    /// Sets `field`; whether it is new.
    pub(crate) fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        if let Some(&at) = self.index.get(field) {
            if let Some(Some((_, old))) = self.order.get_mut(at) {
                *old = value.to_vec();
            }
            return false;
        }
        self.index.insert(field.to_vec(), self.order.len());
        self.order.push(Some((field.to_vec(), value.to_vec())));
        true
    }

    /// Removes `field`; whether it was there.
    pub(crate) fn remove(&mut self, field: &[u8]) -> bool {
        let Some(at) = self.index.remove(field) else {
            return false;
        };
        if let Some(slot) = self.order.get_mut(at) {
            *slot = None;
        }
        // Compact once the holes outnumber the fields: amortised linear.
        if self.order.len() > 2 * self.index.len() + 16 {
            self.order.retain(Option::is_some);
            for (at, (field, _)) in self.order.iter().flatten().enumerate() {
                self.index.insert(field.clone(), at);
            }
        }
        true
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.order
            .iter()
            .flatten()
            .map(|(f, v)| (f.as_slice(), v.as_slice()))
    }
}

impl PartialEq for Fields {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Fields {}

impl Value {
    /// The name TYPE answers.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Self::Str(_) => "string",
            Self::List(_) => "list",
            Self::Hash(_) => "hash",
            Self::Stream(_) => "stream",
        }
    }
}

/// A key's value and its expiry time (Unix ms), if it has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) value: Value,
    pub(crate) expires: Option<u64>,
}

#[derive(Default)]
pub(crate) struct Db {
    entries: HashMap<Vec<u8>, Entry>,
    /// Every key with its slot, so that one slot's keys are one range.
    by_slot: BTreeSet<(u16, Vec<u8>)>,
}

impl Db {
    /// Removes `key` if it expired at `now`; whether it is (still) there.
    fn live(&mut self, key: &[u8], now: u64) -> bool {
        match self.entries.get(key) {
            None => false,
            Some(entry) if entry.expires.is_some_and(|at| at <= now) => {
                self.remove(key);
                false
            }
            Some(_) => true,
        }
    }

    /// Whether `key` exists at `now`, without removing it if it expired (for `route()`,
    /// which only reads).
    pub(crate) fn contains(&self, key: &[u8], now: u64) -> bool {
        self.peek(key, now).is_some()
    }

    pub(crate) fn get(&mut self, key: &[u8], now: u64) -> Option<&Entry> {
        if self.live(key, now) {
            self.entries.get(key)
        } else {
            None
        }
    }

    /// The entry of `key` if it is live at `now`, without removing it if it expired.
    pub(crate) fn peek(&self, key: &[u8], now: u64) -> Option<&Entry> {
        self.entries
            .get(key)
            .filter(|entry| entry.expires.is_none_or(|at| at > now))
    }

    pub(crate) fn get_mut(&mut self, key: &[u8], now: u64) -> Option<&mut Entry> {
        if self.live(key, now) {
            self.entries.get_mut(key)
        } else {
            None
        }
    }

    /// The value of `key`, created by `make` (without an expiry) when the key is missing or
    /// expired: LPUSH and HSET on a new key.
    pub(crate) fn value_or_insert(
        &mut self,
        key: &[u8],
        now: u64,
        make: impl FnOnce() -> Value,
    ) -> &mut Value {
        if !self.live(key, now) {
            self.by_slot
                .insert((u16::from(key_slot(key)), key.to_vec()));
        }
        let entry = self.entries.entry(key.to_vec()).or_insert_with(|| Entry {
            value: make(),
            expires: None,
        });
        &mut entry.value
    }

    /// Stores `entry` under `key`, replacing what was there.
    pub(crate) fn insert(&mut self, key: &[u8], entry: Entry) {
        if let Some(old) = self.entries.get_mut(key) {
            *old = entry;
        } else {
            self.by_slot
                .insert((u16::from(key_slot(key)), key.to_vec()));
            self.entries.insert(key.to_vec(), entry);
        }
    }

    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let entry = self.entries.remove(key)?;
        self.by_slot
            .remove(&(u16::from(key_slot(key)), key.to_vec()));
        Some(entry)
    }

    /// Removes `key` if its value became empty (a list or hash whose last item went).
    pub(crate) fn drop_if_empty(&mut self, key: &[u8]) {
        let empty = match self.entries.get(key).map(|e| &e.value) {
            Some(Value::List(items)) => items.is_empty(),
            Some(Value::Hash(fields)) => fields.is_empty(),
            _ => false,
        };
        if empty {
            self.remove(key);
        }
    }

    /// Keys stored, expired ones not yet removed included (as the server's DBSIZE counts).
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Keys with an expiry time.
    pub(crate) fn volatile(&self) -> usize {
        self.entries
            .values()
            .filter(|e| e.expires.is_some())
            .count()
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.by_slot.clear();
    }

    /// Up to `count` live keys of `slot`, in key order.
    pub(crate) fn keys_in_slot(&self, slot: u16, count: usize, now: u64) -> Vec<Vec<u8>> {
        self.slot_keys(slot)
            .filter(|key| self.contains(key, now))
            .take(count)
            .cloned()
            .collect()
    }

    /// How many keys `slot` holds.
    pub(crate) fn count_in_slot(&self, slot: u16) -> usize {
        self.slot_keys(slot).count()
    }

    fn slot_keys(&self, slot: u16) -> impl Iterator<Item = &Vec<u8>> {
        self.by_slot
            .range((slot, Vec::new())..)
            .take_while(move |(s, _)| *s == slot)
            .map(|(_, key)| key)
    }

    /// One SCAN step from `cursor`: every live key of whole slots, from the cursor's slot on,
    /// until at least `count` keys were looked at, and the next cursor (0 at the end). Whole
    /// slots at a time, so that a key present for the whole scan is returned whatever else
    /// changes meanwhile, as SCAN promises.
    pub(crate) fn scan(&self, cursor: u64, count: usize, now: u64) -> (u64, Vec<Vec<u8>>) {
        let Ok(start) = u16::try_from(cursor) else {
            return (0, Vec::new());
        };
        let mut keys = Vec::new();
        let mut slot = start;
        for (looked, (s, key)) in self.by_slot.range((start, Vec::new())..).enumerate() {
            if *s != slot {
                if looked >= count {
                    return (u64::from(*s), keys);
                }
                slot = *s;
            }
            if self.contains(key, now) {
                keys.push(key.clone());
            }
        }
        (0, keys)
    }

    /// Every live key, in slot order.
    pub(crate) fn keys(&self, now: u64) -> impl Iterator<Item = &Vec<u8>> {
        self.by_slot
            .iter()
            .map(|(_, key)| key)
            .filter(move |key| self.contains(key, now))
    }
}

/// A decimal i64 as the server reads one (`string2ll`): no spaces, no `+`, no leading zero.
pub(crate) fn integer(arg: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(arg).ok()?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    let canonical = digits == "0" && !text.starts_with('-')
        || !digits.is_empty()
            && !digits.starts_with('0')
            && digits.bytes().all(|b| b.is_ascii_digit());
    if canonical { text.parse().ok() } else { None }
}

#[cfg(test)]
mod tests {
    use super::Fields;

    #[test]
    fn fields_keep_insertion_order_through_updates_and_removals() {
        let mut fields = Fields::default();
        for n in 0..1000u32 {
            assert!(fields.insert(&n.to_be_bytes(), b"v"));
        }
        assert!(!fields.insert(&7u32.to_be_bytes(), b"new"));
        // Remove all but every tenth, which forces compactions on the way.
        for n in (0..1000u32).filter(|n| n % 10 != 0) {
            assert!(fields.remove(&n.to_be_bytes()));
        }
        assert!(!fields.remove(&1u32.to_be_bytes()));
        assert_eq!(fields.len(), 100);
        let order: Vec<u32> = fields
            .iter()
            .map(|(f, _)| u32::from_be_bytes(f.try_into().unwrap_or_default()))
            .collect();
        assert_eq!(order, (0..1000).step_by(10).collect::<Vec<u32>>());
        assert_eq!(fields.get(&990u32.to_be_bytes()), Some(&b"v"[..]));
        assert!(fields.insert(&5u32.to_be_bytes(), b"back"));
        assert_eq!(
            fields.iter().last(),
            Some((&5u32.to_be_bytes()[..], &b"back"[..]))
        );
        let repeated = [
            (b"a".to_vec(), b"1".to_vec()),
            (b"a".to_vec(), b"2".to_vec()),
        ];
        assert!(Fields::from_pairs(repeated).is_none());
    }
}
