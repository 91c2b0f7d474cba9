//! [`Requests`]: the requests in flight by id, in a slab. A request is looked up about eight
//! times between its arrival and its reply; in a hash map each look-up hashed the id,
//! probed a group and compared, here it is an index and one comparison, and a request's
//! entry is one that a request just answered left (still in the cache).

use bytes::Bytes;

use crate::RequestId;
use crate::request::{Call, Request};

/// How many low bits of a [`RequestId`] say where its entry is: the high 32 count the
/// requests made, so that ids order as the requests arrived (the retry queue breaks ties
/// by id) and an entry reused by a later request does not answer to an earlier id.
const INDEX_BITS: u32 = 32;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// The most calls whose room an entry keeps for its next request: a request of one call
/// (nearly all) gets a vector without an allocation, and an entry that held a large split
/// does not keep its room.
const SPARE_CALLS: usize = 4;

/// The most arguments an argument vector kept for the next request has room for: a vector
/// with more goes back to the allocator. Kept vectors are empty (they hold no buffer).
const SPARE_ARGS: usize = 16;

/// One entry: the id of the request it holds (or held last), the request, and the emptied
/// vectors of calls and of arguments of the last one, for the next.
#[derive(Debug)]
struct Entry {
    id: RequestId,
    request: Option<Request>,
    spare: Vec<Call>,
    /// The argument vector of the request it held last, emptied.
    spare_argv: Vec<Bytes>,
}

/// The requests in flight, by id.
///
/// An id counts the requests made in its high 32 bits, which wrap after 2^32 of them: an id
/// could then come back for the same entry, but only a key left behind for 2^32 requests
/// would mistake the new request for its own, and none is (every key is dropped with its
/// request or its connection, and a connection that owes a reply times out).
#[derive(Debug, Default)]
pub(crate) struct Requests {
    entries: Vec<Entry>,
    /// Free entries, the last freed on top.
    free: Vec<u32>,
    len: usize,
    /// Requests made so far.
    made: u64,
}

impl Requests {
    /// Keeps `request` and names it. The entry's spare vector of calls stays there for the
    /// request to take ([`Requests::take_spare`]).
    #[inline]
    pub(crate) fn insert(&mut self, request: Request) -> RequestId {
        self.made = self.made.wrapping_add(1);
        let seq = self.made & INDEX_MASK;
        self.len += 1;
        match self.free.pop() {
            Some(index) => {
                let id = RequestId(seq << INDEX_BITS | u64::from(index));
                let entry = &mut self.entries[index as usize];
                entry.id = id;
                entry.request = Some(request);
                id
            }
            None => {
                // As many entries as requests in flight at once: 2^32 would be terabytes.
                let index = self.entries.len() as u64 & INDEX_MASK;
                let id = RequestId(seq << INDEX_BITS | index);
                self.entries.push(Entry {
                    id,
                    request: Some(request),
                    spare: Vec::new(),
                    spare_argv: Vec::new(),
                });
                id
            }
        }
    }

    fn entry(&self, id: RequestId) -> Option<&Entry> {
        let entry = self.entries.get((id.0 & INDEX_MASK) as usize)?;
        (entry.id == id).then_some(entry)
    }

    pub(crate) fn get(&self, id: &RequestId) -> Option<&Request> {
        self.entry(*id)?.request.as_ref()
    }

    pub(crate) fn get_mut(&mut self, id: &RequestId) -> Option<&mut Request> {
        let entry = self.entries.get_mut((id.0 & INDEX_MASK) as usize)?;
        if entry.id != *id {
            return None;
        }
        entry.request.as_mut()
    }

    /// The emptied vector of calls of the request `id`'s entry held before it (no room when
    /// there is none), for the request to fill: one allocation less per request.
    pub(crate) fn take_spare(&mut self, id: &RequestId) -> Vec<Call> {
        match self.entries.get_mut((id.0 & INDEX_MASK) as usize) {
            Some(entry) if entry.id == *id => std::mem::take(&mut entry.spare),
            _ => Vec::new(),
        }
    }

    /// Drops the request where it is (a request is about 160 bytes: taking it out would
    /// copy it); whether there was one. Its entry is free for the next, and keeps its
    /// vector of calls, emptied, when it has room for few.
    pub(crate) fn discard(&mut self, id: &RequestId) -> bool {
        let index = id.0 & INDEX_MASK;
        let Some(entry) = self.entries.get_mut(index as usize) else {
            return false;
        };
        if entry.id != *id {
            return false;
        }
        let Some(request) = entry.request.as_mut() else {
            return false;
        };
        // The first call's arguments (a one-call request's are the command's own), or the
        // command's when it was never routed.
        let argv = match request.calls.first_mut() {
            Some(call) => Some(&mut call.argv),
            None => request.unrouted.as_mut(),
        };
        if let Some(argv) = argv.filter(|argv| {
            argv.capacity() <= SPARE_ARGS && argv.capacity() > entry.spare_argv.capacity()
        }) {
            let mut argv = std::mem::take(argv);
            argv.clear();
            entry.spare_argv = argv;
        }
        if request.calls.capacity() <= SPARE_CALLS {
            let mut calls = std::mem::take(&mut request.calls);
            calls.clear();
            entry.spare = calls;
        }
        entry.request = None;
        self.free.push(index as u32);
        self.len -= 1;
        true
    }

    /// An empty argument vector for the request [`Requests::insert`] stores next: the one
    /// the entry it takes kept from its last request (no allocation), or a new one.
    #[inline]
    pub(crate) fn spare_argv(&mut self) -> Vec<Bytes> {
        match self.free.last() {
            Some(&index) => self
                .entries
                .get_mut(index as usize)
                .map(|entry| std::mem::take(&mut entry.spare_argv))
                .unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// How many requests are in flight.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::{Requests, SPARE_ARGS, SPARE_CALLS};
    use crate::request::{Combine, Request};
    use crate::{ClientId, RequestId};

    fn request(client: u64) -> Request {
        Request {
            client: ClientId(client),
            unrouted: None,
            packed: None,
            calls: Vec::new(),
            combine: Combine::One,
            reply: None,
            silent: false,
            answered: 0,
        }
    }

    /// Ids are new for every request and order as the requests came; an id answers for its
    /// own request only, also once its entry holds a later one.
    #[test]
    fn an_id_finds_its_own_request_and_no_other() {
        let mut requests = Requests::default();
        let a = requests.insert(request(1));
        let b = requests.insert(request(2));
        assert!(a < b);
        assert_eq!(requests.len(), 2);
        assert_eq!(requests.get(&a).map(|r| r.client), Some(ClientId(1)));
        assert!(requests.discard(&a));
        assert!(requests.get(&a).is_none());
        assert!(!requests.discard(&a));
        assert_eq!(requests.len(), 1);
        // The freed entry is taken again, under a new id.
        let c = requests.insert(request(3));
        assert!(c > b && c != a);
        assert!(requests.get(&a).is_none());
        assert!(requests.get_mut(&a).is_none());
        assert!(!requests.discard(&a));
        assert_eq!(requests.get(&c).map(|r| r.client), Some(ClientId(3)));
        if let Some(r) = requests.get_mut(&b) {
            r.silent = true;
        }
        assert_eq!(requests.get(&b).map(|r| r.silent), Some(true));
        assert_eq!(requests.len(), 2);
        // Ids never made, or past the end.
        assert!(requests.get(&RequestId(0)).is_none());
        assert!(requests.get(&RequestId(u64::MAX)).is_none());
    }

    /// A discarded request's vector of calls comes back, emptied, to the next request of its
    /// entry, and to that one only; one with room for many calls is not kept.
    #[test]
    fn an_entry_keeps_a_small_vector_of_calls_for_its_next_request() {
        use crate::request::{Call, Target};
        let call = || Call::new(vec![bytes::Bytes::from_static(b"PING")], Target::Any);
        let mut requests = Requests::default();
        let a = requests.insert(request(1));
        let mut calls = requests.take_spare(&a);
        assert_eq!(calls.capacity(), 0, "a new entry has none");
        calls.push(call());
        let room = calls.capacity();
        if let Some(r) = requests.get_mut(&a) {
            r.calls = calls;
        }
        assert!(requests.discard(&a));
        let b = requests.insert(request(2));
        assert!(requests.take_spare(&a).capacity() == 0, "not for an old id");
        let spare = requests.take_spare(&b);
        assert!(spare.is_empty());
        assert_eq!(spare.capacity(), room);
        assert_eq!(requests.take_spare(&b).capacity(), 0, "taken once");
        // Room for many calls is given back to the allocator.
        if let Some(r) = requests.get_mut(&b) {
            r.calls = (0..SPARE_CALLS + 1).map(|_| call()).collect();
        }
        assert!(requests.discard(&b));
        let c = requests.insert(request(3));
        assert_eq!(requests.take_spare(&c).capacity(), 0);
    }

    #[test]
    fn an_entry_keeps_an_empty_argument_vector_for_its_next_request() {
        use crate::request::{Call, Target};
        use bytes::Bytes;
        let mut requests = Requests::default();
        assert_eq!(requests.spare_argv().capacity(), 0, "no entry yet");
        // A buffer the command's arguments are slices of: a kept vector must not hold it.
        let buffer = Bytes::from(b"GETkey".to_vec());
        let routed = |argv: Vec<Bytes>| {
            let mut r = request(1);
            r.calls.push(Call::new(argv, Target::Any));
            r
        };
        let a = requests.insert(routed(vec![buffer.slice(..3), buffer.slice(3..)]));
        assert!(requests.discard(&a));
        let argv = requests.spare_argv();
        assert!(argv.is_empty());
        assert!(argv.capacity() >= 2, "the last request's vector");
        assert_eq!(requests.spare_argv().capacity(), 0, "taken once");
        // A request never routed gives its command's vector back too.
        let b = requests.insert(request(2));
        if let Some(r) = requests.get_mut(&b) {
            r.unrouted = Some(Vec::with_capacity(5));
        }
        assert!(requests.discard(&b));
        assert!(requests.spare_argv().capacity() >= 5);
        // Room for many arguments goes back to the allocator.
        let c = requests.insert(routed(Vec::with_capacity(SPARE_ARGS + 1)));
        assert!(requests.discard(&c));
        assert_eq!(requests.spare_argv().capacity(), 0);
        // With every entry in use, a new vector.
        let _d = requests.insert(request(3));
        assert_eq!(requests.spare_argv().capacity(), 0);
        assert!(
            buffer.is_unique(),
            "no kept vector holds the command's bytes"
        );
    }

    /// Against a map, through many inserts and removals in a scattered order.
    #[test]
    fn the_slab_answers_as_a_map() {
        let mut requests = Requests::default();
        let mut model = std::collections::BTreeMap::new();
        let mut gone = Vec::new();
        for n in 0..2000u64 {
            let id = requests.insert(request(n));
            model.insert(id, n);
            if n % 3 != 0 {
                // Remove one from the middle of what is there.
                let pick = *model.keys().nth(model.len() / 2).expect("one");
                assert_eq!(requests.get(&pick).map(|r| r.client.0), model.remove(&pick));
                assert!(requests.discard(&pick));
                gone.push(pick);
            }
            assert_eq!(requests.len(), model.len());
        }
        for (id, n) in &model {
            assert_eq!(requests.get(id).map(|r| r.client.0), Some(*n));
        }
        for id in &gone {
            assert!(requests.get(id).is_none(), "{id:?}");
        }
        let ids: Vec<_> = model.keys().copied().collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
    }
}
