//! [`Route`]: where a command goes, and for commands over several slots or every node, how
//! to split it and merge the replies into the reply one server would have sent.

use alloc::{collections::BTreeMap, vec::Vec};

use redis_hash_slot::{Slot, key_slot};
use redis_resp::Frame;

use crate::{
    keys::{KeyError, Keys, SlotAnswer},
    spec::{CommandSpec, FindKeys, RequestPolicy, ResponsePolicy},
    table::CommandTable,
};

/// Where a command goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// No key and no request policy: any node can serve it (or a proxy answers it).
    Any,
    /// All its keys are in this slot: the slot's node.
    Slot(Slot),
    /// A `multi_shard` command whose keys are in several slots: one sub-command per slot,
    /// replies merged by [`Split::merge`].
    Split(Split),
    /// To every master, replies merged by [`Merge::merge`].
    AllShards(Merge),
    /// To every node, replicas included, replies merged by [`Merge::merge`].
    AllNodes(Merge),
    /// `request_policy:special` (SCAN): only a client that knows the command can route it.
    Special,
    /// Keys in several slots and no way to split: a node would answer `-CROSSSLOT`.
    CrossSlot,
}

/// How the replies of a fanned-out command become one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// By the command's `response_policy` tip.
    Policy(ResponsePolicy),
    /// No tip, a command without keys: arrays are concatenated, maps joined, anything else
    /// is the first reply that is not an error.
    Aggregate,
    /// No tip, a command with keys (MGET): each part's array elements go back to the
    /// positions of their keys.
    ByKey,
}

/// Why replies could not be merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// Not one reply per part.
    #[error("{got} replies for {expected} parts")]
    Count {
        /// Parts.
        expected: usize,
        /// Replies.
        got: usize,
    },
    /// A reply of a type the policy cannot combine (a string for a sum, an array of the wrong
    /// length for ByKey).
    #[error("a reply the {0:?} policy cannot merge")]
    Unexpected(Merge),
    /// `response_policy:special`: only a client that knows the command can merge it.
    #[error("the command's replies need a command-specific merge")]
    Special,
}

/// One sub-command of a [`Split`]: a slot and the key groups (a key and the arguments that
/// follow it: MSET's value) that go there, by their index in the original command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The slot of every key of the part; in a [`CommandTable::split_by`] split, the slot of
    /// its first key.
    pub slot: Slot,
    /// Where the part goes: the slot's number, or in a [`CommandTable::split_by`] split the
    /// shard function's answer.
    pub shard: usize,
    /// The key groups, in their original order.
    pub groups: Vec<usize>,
}

/// A multi-key command split by slot.
///
/// ```
/// use redis_cluster_route::{CommandTable, Route};
/// use redis_resp::Frame;
///
/// let argv = ["MGET", "a", "{a}1", "b"];
/// let Route::Split(split) = CommandTable::REDIS_7_0.route(&argv)? else { panic!("a split") };
/// assert_eq!(split.parts().len(), 2);
/// let first: Vec<&str> = split.argv(0, &argv).copied().collect();
/// assert_eq!(first, ["MGET", "a", "{a}1"]);
/// let replies = vec![
///     Frame::Array(vec![Frame::BulkString("1"), Frame::BulkString("2")]),
///     Frame::Array(vec![Frame::NullBulkString]),
/// ];
/// assert_eq!(
///     split.merge(replies)?,
///     Frame::Array(vec![Frame::BulkString("1"), Frame::BulkString("2"), Frame::NullBulkString]),
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// Arguments before the first key (the name, and a subcommand's).
    prefix: usize,
    /// Arguments per key group.
    group: usize,
    parts: Vec<Part>,
    groups: usize,
    merge: Merge,
}

impl Split {
    /// The sub-commands.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// How the replies merge.
    pub const fn merge_policy(&self) -> Merge {
        self.merge
    }

    /// How many arguments sub-command `part` has: what [`Split::argv`] yields.
    ///
    /// ```
    /// use redis_cluster_route::{CommandTable, Route};
    ///
    /// let argv = ["MSET", "a", "1", "{a}1", "2", "b", "3"];
    /// let Route::Split(split) = CommandTable::REDIS_7_0.route(&argv)? else { panic!("a split") };
    /// assert_eq!(split.argc(0), 5);
    /// assert_eq!(split.argc(1), 3);
    /// assert_eq!(split.argc(2), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn argc(&self, part: usize) -> usize {
        self.parts
            .get(part)
            .map_or(0, |p| self.prefix + p.groups.len() * self.group)
    }

    /// The arguments of sub-command `part`: the original name, then its key groups.
    pub fn argv<'x, A>(
        &self,
        part: usize,
        argv: &'x [A],
    ) -> impl Iterator<Item = &'x A> + use<'_, 'x, A> {
        let groups = self.parts.get(part).map_or(&[][..], |p| &p.groups[..]);
        let prefix = argv.get(..self.prefix).unwrap_or_default();
        prefix.iter().chain(groups.iter().flat_map(move |&g| {
            let at = self.prefix + g * self.group;
            argv.get(at..at + self.group).unwrap_or_default()
        }))
    }

    /// The reply the unsplit command would have had, from one reply per part in part order.
    /// An error reply wins (the first one), as it would have on one server.
    pub fn merge<B: Clone>(&self, replies: Vec<Frame<B>>) -> Result<Frame<B>, MergeError> {
        if replies.len() != self.parts.len() {
            return Err(MergeError::Count {
                expected: self.parts.len(),
                got: replies.len(),
            });
        }
        if self.merge != Merge::ByKey {
            return self.merge.merge(replies);
        }
        if let Some(error) = replies.iter().find(|r| is_error(r)) {
            return Ok(error.clone());
        }
        let unexpected = MergeError::Unexpected(Merge::ByKey);
        let fits = |part: &Part, reply: &Frame<B>| matches!(reply, Frame::Array(items) if items.len() == part.groups.len());
        // One part (every key on one server) holds every group in order: its reply is the
        // merged one as it is.
        if let ([part], [reply]) = (&self.parts[..], &replies[..]) {
            if !fits(part, reply) {
                return Err(unexpected);
            }
            return replies.into_iter().next().ok_or(unexpected);
        }
        // The parts' groups are every group once, so each place below is written once.
        let mut out = Vec::new();
        out.resize_with(self.groups, || Frame::Null);
        for (part, reply) in self.parts.iter().zip(replies) {
            let Frame::Array(items) = reply else {
                return Err(unexpected);
            };
            if items.len() != part.groups.len() {
                return Err(unexpected);
            }
            for (&group, item) in part.groups.iter().zip(items) {
                let place = out.get_mut(group).ok_or(unexpected)?;
                *place = item;
            }
        }
        Ok(Frame::Array(out))
    }
}

fn is_error<B>(frame: &Frame<B>) -> bool {
    matches!(frame, Frame::SimpleError(_) | Frame::BulkError(_))
}

impl Merge {
    /// One reply from the replies of every node a command went to.
    pub fn merge<B: Clone>(&self, replies: Vec<Frame<B>>) -> Result<Frame<B>, MergeError> {
        let first_error = replies.iter().find(|r| is_error(r)).cloned();
        let policy = match self {
            Self::Policy(policy) => *policy,
            Self::Aggregate => return aggregate(replies),
            Self::ByKey => return Err(MergeError::Unexpected(*self)),
        };
        // An error wins, except for a policy that asks for one success.
        if let (Some(error), false) = (first_error, policy == ResponsePolicy::OneSucceeded) {
            return Ok(error);
        }
        let combine: fn(i64, i64) -> i64 = match policy {
            ResponsePolicy::OneSucceeded => {
                return replies
                    .iter()
                    .find(|r| !is_error(r))
                    .or(replies.first())
                    .cloned()
                    .ok_or(MergeError::Unexpected(*self));
            }
            ResponsePolicy::AllSucceeded => {
                return replies
                    .into_iter()
                    .next()
                    .ok_or(MergeError::Unexpected(*self));
            }
            ResponsePolicy::Special => return Err(MergeError::Special),
            ResponsePolicy::AggSum => i64::saturating_add,
            ResponsePolicy::AggMin => i64::min,
            ResponsePolicy::AggMax => i64::max,
            ResponsePolicy::AggLogicalAnd => |a, b| i64::from(a != 0 && b != 0),
            ResponsePolicy::AggLogicalOr => |a, b| i64::from(a != 0 || b != 0),
        };
        fold(replies, combine).ok_or(MergeError::Unexpected(*self))
    }
}

/// Integers combined, or arrays of integers combined element by element (SCRIPT EXISTS).
fn fold<B>(replies: Vec<Frame<B>>, combine: fn(i64, i64) -> i64) -> Option<Frame<B>> {
    let mut replies = replies.into_iter();
    let mut acc = replies.next()?;
    for reply in replies {
        acc = match (acc, reply) {
            (Frame::Integer(a), Frame::Integer(b)) => Frame::Integer(combine(a, b)),
            (Frame::Array(a), Frame::Array(b)) if a.len() == b.len() => Frame::Array(
                a.into_iter()
                    .zip(b)
                    .map(|pair| match pair {
                        (Frame::Integer(a), Frame::Integer(b)) => {
                            Some(Frame::Integer(combine(a, b)))
                        }
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?,
            ),
            _ => return None,
        };
    }
    Some(acc)
}

fn aggregate<B: Clone>(replies: Vec<Frame<B>>) -> Result<Frame<B>, MergeError> {
    let unexpected = MergeError::Unexpected(Merge::Aggregate);
    if let Some(error) = replies.iter().find(|r| is_error(r)) {
        return Ok(error.clone());
    }
    match replies.first() {
        Some(Frame::Array(_) | Frame::Set(_)) => {
            let set = matches!(replies.first(), Some(Frame::Set(_)));
            let mut all = Vec::new();
            for reply in replies {
                match reply {
                    Frame::Array(items) | Frame::Set(items) => all.extend(items),
                    _ => return Err(unexpected),
                }
            }
            Ok(if set {
                Frame::Set(all)
            } else {
                Frame::Array(all)
            })
        }
        Some(Frame::Map(_)) => {
            let mut all = Vec::new();
            for reply in replies {
                match reply {
                    Frame::Map(pairs) => all.extend(pairs),
                    _ => return Err(unexpected),
                }
            }
            Ok(Frame::Map(all))
        }
        Some(_) => Ok(replies.into_iter().next().ok_or(unexpected)?),
        None => Err(unexpected),
    }
}

impl CommandTable {
    /// Where `argv` goes in a cluster, from its keys' slots and its request and response
    /// policy tips. A `multi_shard` command (MGET, MSET, DEL, UNLINK, EXISTS, TOUCH, MSETNX)
    /// over several slots is split when its keys and their arguments fill the whole command,
    /// as they do for those; note that a split MSETNX is no longer atomic across slots.
    pub fn route<A: AsRef<[u8]>>(&self, argv: &[A]) -> Result<Route, KeyError> {
        self.routed(argv).map(|routed| routed.route)
    }

    /// [`CommandTable::route`], with what was found on the way: the command's spec and how
    /// many keys it is routed by. One lookup of the command, for a caller that needs all
    /// three per request (a proxy's hot path).
    ///
    /// ```
    /// use redis_cluster_route::{CommandTable, Route};
    ///
    /// let routed = CommandTable::REDIS_7_0.routed(&["SET", "foo", "1"]).unwrap();
    /// assert!(matches!(routed.route, Route::Slot(_)));
    /// assert_eq!((routed.spec.name, routed.keys), ("set", 1));
    /// ```
    pub fn routed<A: AsRef<[u8]>>(&self, argv: &[A]) -> Result<Routed, KeyError> {
        self.routed_by(argv, usize::from)
    }

    /// [`CommandTable::routed`] for servers that each serve many slots and take a command
    /// over any of theirs (standalone masters behind a proxy, which check no slots): a
    /// [`Route::Split`] has one part per `shard` of its keys' slots instead of one per slot,
    /// each part's [`Part::slot`] the slot of its first key. Commands over one slot route as
    /// in `routed`. Each key is hashed once; splitting by slot and then again by shard hashed
    /// each twice and built the slot split for nothing.
    ///
    /// ```
    /// use redis_cluster_route::{CommandTable, Route};
    ///
    /// // Two servers: the lower half of the slots and the upper half.
    /// let argv = ["MGET", "a", "b", "c"]; // slots 15495, 3300, 7365
    /// let routed = CommandTable::REDIS_7_0.routed_by(&argv, |slot| usize::from(u16::from(slot) >= 8192))?;
    /// let Route::Split(split) = routed.route else { panic!("a split") };
    /// assert_eq!(split.parts().len(), 2);
    /// let upper: Vec<&str> = split.argv(0, &argv).copied().collect();
    /// assert_eq!(upper, ["MGET", "a"]);
    /// let lower: Vec<&str> = split.argv(1, &argv).copied().collect();
    /// assert_eq!(lower, ["MGET", "b", "c"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn routed_by<A: AsRef<[u8]>>(
        &self,
        argv: &[A],
        mut shard: impl FnMut(Slot) -> usize,
    ) -> Result<Routed, KeyError> {
        let spec = self.checked(argv)?;
        let keys = Keys::routing(spec, argv);
        let answer = keys.slot(argv);
        let route = route_of(spec, argv, answer, |key| {
            let slot = key_slot(key);
            (shard(slot), Some(slot))
        });
        Ok(Routed {
            route,
            spec,
            keys: keys.len(),
        })
    }

    /// [`CommandTable::routed_by`] with every slot on one shard (0): a proxy in front of one
    /// standalone server. The same answer, found without hashing every key: a split's only
    /// part is the whole command, and only its first key's slot is needed. Keys are hashed
    /// until two slots differ (as by `routed`) and the first key once more; a 10-key MGET
    /// hashed all ten.
    ///
    /// ```
    /// use redis_cluster_route::{CommandTable, Route};
    ///
    /// let argv = ["MGET", "a", "b", "c"]; // slots 15495, 3300, 7365
    /// let routed = CommandTable::REDIS_7_0.routed_whole(&argv)?;
    /// assert_eq!(routed, CommandTable::REDIS_7_0.routed_by(&argv, |_| 0)?);
    /// let Route::Split(split) = routed.route else { panic!("a split") };
    /// assert_eq!(split.parts().len(), 1);
    /// assert_eq!(u16::from(split.parts()[0].slot), 15495);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn routed_whole<A: AsRef<[u8]>>(&self, argv: &[A]) -> Result<Routed, KeyError> {
        let spec = self.checked(argv)?;
        let keys = Keys::routing(spec, argv);
        let answer = keys.slot(argv);
        // Every key on shard 0, and no slot given: the split hashes the first key of its
        // one part, for the part's slot, and no other.
        let route = route_of(spec, argv, answer, |_| (0, None));
        Ok(Routed {
            route,
            spec,
            keys: keys.len(),
        })
    }

    /// [`CommandTable::routed_whole`] for a caller that sends every command whole to the one
    /// node that serves every slot, as a proxy in front of one standalone server does (predixy
    /// and nutcracker forward such commands as they are).
    ///
    /// A command whose keys hash to several slots is [`Route::Slot`] of its first key, where
    /// `routed_whole` answers [`Route::CrossSlot`] (SUNION, RENAME, an MSETNX on tables that
    /// give it no `multi_shard` tip, a command whose key groups are not whole) or builds a
    /// split of one part (a `multi_shard` MGET or MSET): no split is built (without one, a
    /// proxy in front of one server spent 14 % less CPU on 10-key MGETs). The server then
    /// answers the command as a standalone server does, its arity errors included. Every
    /// other command routes as in `routed_whole`; [`Routed::keys`] is the same.
    ///
    /// The command runs whole on that node: an MSETNX over several slots is all or nothing,
    /// as on one server.
    ///
    /// ```
    /// use redis_cluster_route::{CommandTable, Route};
    /// use redis_hash_slot::key_slot;
    ///
    /// let argv = ["MGET", "a", "b", "c"]; // slots 15495, 3300, 7365
    /// let routed = CommandTable::REDIS_7_0.routed_unsplit(&argv)?;
    /// let Route::Slot(slot) = routed.route else { panic!("one slot") };
    /// assert_eq!((u16::from(slot), routed.keys), (15495, 3));
    /// // No `multi_shard` tip: a cluster refuses it; the one server runs it.
    /// let union = ["SUNION", "b", "a"];
    /// let unsplit = CommandTable::REDIS_7_0.routed_unsplit(&union)?.route;
    /// assert_eq!(unsplit, Route::Slot(key_slot(b"b")));
    /// assert_eq!(CommandTable::REDIS_7_0.routed_whole(&union)?.route, Route::CrossSlot);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn routed_unsplit<A: AsRef<[u8]>>(&self, argv: &[A]) -> Result<Routed, KeyError> {
        let spec = self.checked(argv)?;
        let keys = Keys::routing(spec, argv);
        let answer = keys.slot(argv);
        // Over several slots, the server's first key (which `slot` hashed first).
        let first = match (answer, spec.tips.request_policy()) {
            (_, Some(RequestPolicy::Special)) => None,
            (SlotAnswer::CrossSlot, _) => keys.positions().next().and_then(|at| argv.get(at)),
            _ => None,
        };
        let route = match first {
            Some(key) => Route::Slot(key_slot(key.as_ref())),
            None => route_of(spec, argv, answer, |_| (0, None)),
        };
        Ok(Routed {
            route,
            spec,
            keys: keys.len(),
        })
    }
}

/// What [`CommandTable::routed`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Routed {
    /// Where the command goes.
    pub route: Route,
    /// The command (or subcommand) it is.
    pub spec: &'static CommandSpec,
    /// How many keys it is routed by.
    pub keys: usize,
}

fn route_of<A: AsRef<[u8]>>(
    spec: &'static CommandSpec,
    argv: &[A],
    answer: SlotAnswer,
    shard: impl FnMut(&[u8]) -> (usize, Option<Slot>),
) -> Route {
    {
        let tips = spec.tips;
        let merge = match tips.response_policy() {
            Some(policy) => Merge::Policy(policy),
            None if answer == SlotAnswer::NoKeys => Merge::Aggregate,
            None => Merge::ByKey,
        };
        match (answer, tips.request_policy()) {
            (_, Some(RequestPolicy::Special)) => Route::Special,
            (SlotAnswer::NoKeys, Some(RequestPolicy::AllShards)) => Route::AllShards(merge),
            (SlotAnswer::NoKeys, Some(RequestPolicy::AllNodes)) => Route::AllNodes(merge),
            (SlotAnswer::NoKeys, _) => Route::Any,
            (SlotAnswer::Slot(slot), _) => Route::Slot(slot),
            (SlotAnswer::CrossSlot, Some(RequestPolicy::MultiShard)) => {
                split(spec, argv, merge, shard).map_or(Route::CrossSlot, Route::Split)
            }
            (SlotAnswer::CrossSlot, _) => Route::CrossSlot,
        }
    }
}

impl CommandTable {
    /// Splits a `multi_shard` command (MGET, MSET, DEL, UNLINK, EXISTS, TOUCH, MSETNX) by any
    /// function of its keys instead of their slots: one part per shard, in the order shards
    /// first appear, each with its keys in their original order. This is how a proxy that
    /// shards keys another way (a consistent-hash ring: the `twemproxy` module's) splits such a
    /// command and merges the replies with [`Split::merge`].
    ///
    /// Unlike [`CommandTable::route`], the split is made even when every key lands on one
    /// shard (one part). `None` when the command is not `multi_shard` or its arguments are
    /// not whole key groups.
    ///
    /// ```
    /// use redis_cluster_route::CommandTable;
    ///
    /// let argv = ["MSET", "a", "1", "bb", "2", "c", "3"];
    /// // Two shards: keys of odd length and keys of even length.
    /// let split = CommandTable::REDIS_7_0.split_by(&argv, |key| key.len() % 2).unwrap();
    /// assert_eq!(split.parts().len(), 2);
    /// let odd: Vec<&str> = split.argv(0, &argv).copied().collect();
    /// assert_eq!(odd, ["MSET", "a", "1", "c", "3"]);
    /// assert_eq!(split.parts()[1].shard, 0);
    /// ```
    pub fn split_by<A: AsRef<[u8]>>(
        &self,
        argv: &[A],
        mut shard: impl FnMut(&[u8]) -> usize,
    ) -> Option<Split> {
        let spec = self.lookup(argv)?;
        if spec.tips.request_policy() != Some(RequestPolicy::MultiShard) {
            return None;
        }
        let merge = match spec.tips.response_policy() {
            Some(policy) => Merge::Policy(policy),
            None => Merge::ByKey,
        };
        split(spec, argv, merge, |key| (shard(key), None))
    }
}

/// Up to this many parts, a key's part is found by walking them.
const WALKED_PARTS: usize = 16;

/// The key groups of a command that can be split: its one key spec is a range to the end with
/// the keys at every `step`, each followed by `step - 1` arguments of its own, and its
/// arguments after the name are whole groups, at least one. Returns where the first group
/// starts and how many arguments each group has.
fn key_groups<A>(spec: &CommandSpec, argv: &[A]) -> Option<(usize, usize)> {
    let [key_spec] = spec.key_specs else {
        return None;
    };
    let FindKeys::Range {
        last_key: -1,
        step,
        limit: 0,
    } = key_spec.find_keys
    else {
        return None;
    };
    let prefix = spec.name.split('|').count();
    let group = usize::try_from(step).ok().filter(|&s| s > 0)?;
    let args = argv.len().checked_sub(prefix)?;
    if args == 0
        || args % group != 0
        || key_spec.begin_search != crate::BeginSearch::Index(prefix as i32)
    {
        return None;
    }
    Some((prefix, group))
}

/// Splits a command whose arguments are [`key_groups`] by `shard` of each key (which may give
/// the key's slot too, when it had to hash the key).
fn split<A: AsRef<[u8]>>(
    spec: &CommandSpec,
    argv: &[A],
    merge: Merge,
    mut shard: impl FnMut(&[u8]) -> (usize, Option<Slot>),
) -> Option<Split> {
    let (prefix, group) = key_groups(spec, argv)?;
    let args = argv.len() - prefix;
    let mut parts: Vec<Part> = Vec::new();
    // Each key's part, found by a walk over the parts while they are few, then through an
    // index: a walk for every key made an MGET of a million keys over a cluster's 16384
    // slots take four seconds.
    let mut by_shard: BTreeMap<usize, usize> = BTreeMap::new();
    for index in 0..args / group {
        let key = argv.get(prefix + index * group)?.as_ref();
        let (to, slot) = shard(key);
        let found = if parts.len() <= WALKED_PARTS {
            parts.iter().position(|p| p.shard == to)
        } else {
            if by_shard.is_empty() {
                by_shard.extend(parts.iter().enumerate().map(|(at, p)| (p.shard, at)));
            }
            by_shard.get(&to).copied()
        };
        match found.and_then(|at| parts.get_mut(at)) {
            Some(part) => part.groups.push(index),
            None => {
                if !by_shard.is_empty() {
                    by_shard.insert(to, parts.len());
                }
                // The first part often takes every key (one server): room for them (up to
                // 64), where growing one by one reallocated three times for ten keys.
                let room = if parts.is_empty() {
                    (args / group).min(64)
                } else {
                    1
                };
                let mut groups = Vec::with_capacity(room);
                groups.push(index);
                parts.push(Part {
                    slot: slot.unwrap_or_else(|| key_slot(key)),
                    shard: to,
                    groups,
                });
            }
        }
    }
    Some(Split {
        prefix,
        group,
        parts,
        groups: args / group,
        merge,
    })
}
