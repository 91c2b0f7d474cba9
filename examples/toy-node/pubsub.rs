//! Pub/Sub on the toy node: who is subscribed to what, and the frames they get. Where a
//! message goes in the cluster is the state machine's business (`ClusterNode::publish`,
//! `publish_shard`, `Output::Deliver`); this file only delivers on this node.
//!
//! Each subscribed client has a mailbox that its connection task writes out. A subscriber
//! whose mailbox holds more bytes than `client-output-buffer-limit pubsub` allows (past the
//! hard limit, or past the soft one for longer than its seconds) is dropped and its
//! connection closes, as the server closes it; so is one that lets [`MAILBOX`] frames wait,
//! whatever the limits, so that a subscriber costs bounded memory.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use redis_cluster_proto::hash_slot::key_slot;
use redis_cluster_proto::resp::Frame;
use redis_cluster_proto::route::glob_match;
use tokio::sync::mpsc;

use crate::node::Node;
use redis_cluster_proto::resp::server_limits::OutputLimit;

type Reply = Frame<Vec<u8>>;

/// Frames waiting for one subscriber before it is dropped.
pub(crate) const MAILBOX: usize = 4096;

/// The three kinds of subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// SUBSCRIBE: a channel.
    Channel,
    /// PSUBSCRIBE: a pattern.
    Pattern,
    /// SSUBSCRIBE: a shard channel.
    Shard,
}

impl Kind {
    fn words(self) -> (&'static [u8], &'static [u8]) {
        match self {
            Self::Channel => (b"subscribe", b"unsubscribe"),
            Self::Pattern => (b"psubscribe", b"punsubscribe"),
            Self::Shard => (b"ssubscribe", b"sunsubscribe"),
        }
    }
}

struct Mailbox {
    tx: mpsc::Sender<(Reply, u64)>,
    resp3: bool,
    /// Bytes delivered and not yet taken by the connection (shared with its [`Inbox`]).
    queued: Arc<AtomicU64>,
    /// Since when (Unix ms) `queued` has been past the soft limit.
    over_soft_since: Option<u64>,
}

/// A subscribed client's end of its mailbox: the frames delivered to it, in order.
#[derive(Debug)]
pub(crate) struct Inbox {
    rx: mpsc::Receiver<(Reply, u64)>,
    queued: Arc<AtomicU64>,
}

impl Inbox {
    /// The next frame; `None` once the subscriber was dropped.
    pub(crate) async fn recv(&mut self) -> Option<Reply> {
        let (frame, bytes) = self.rx.recv().await?;
        self.queued.fetch_sub(bytes, Ordering::Relaxed);
        Some(frame)
    }

    /// The next frame if one is waiting.
    pub(crate) fn try_recv(&mut self) -> Option<Reply> {
        let (frame, bytes) = self.rx.try_recv().ok()?;
        self.queued.fetch_sub(bytes, Ordering::Relaxed);
        Some(frame)
    }
}

/// The node's subscriptions.
#[derive(Default)]
pub(crate) struct PubSub {
    channels: HashMap<Vec<u8>, Vec<u64>>,
    patterns: HashMap<Vec<u8>, Vec<u64>>,
    shard: HashMap<Vec<u8>, Vec<u64>>,
    mailboxes: HashMap<u64, Mailbox>,
}

impl PubSub {
    fn table(&mut self, kind: Kind) -> &mut HashMap<Vec<u8>, Vec<u64>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// The client's subscriptions that count together: channels and patterns, or shard
    /// channels.
    pub(crate) fn count(&self, client: u64, kind: Kind) -> usize {
        let of = |table: &HashMap<Vec<u8>, Vec<u64>>| {
            table.values().filter(|ids| ids.contains(&client)).count()
        };
        match kind {
            Kind::Shard => of(&self.shard),
            _ => of(&self.channels) + of(&self.patterns),
        }
    }

    /// Whether the client has any subscription (RESP2's subscribed mode).
    pub(crate) fn subscribed(&self, client: u64) -> bool {
        self.mailboxes.contains_key(&client)
            && self.count(client, Kind::Channel) + self.count(client, Kind::Shard) > 0
    }

    /// Subscribes `client`; the confirmations, one per name.
    pub(crate) fn subscribe(
        &mut self,
        client: u64,
        resp3: bool,
        inbox: &mut Option<Inbox>,
        kind: Kind,
        names: &[&[u8]],
    ) -> Vec<Reply> {
        if !self.mailboxes.contains_key(&client) || inbox.is_none() {
            let (tx, rx) = mpsc::channel(MAILBOX);
            let queued = Arc::new(AtomicU64::new(0));
            let mailbox = Mailbox {
                tx,
                resp3,
                queued: queued.clone(),
                over_soft_since: None,
            };
            self.mailboxes.insert(client, mailbox);
            *inbox = Some(Inbox { rx, queued });
        }
        let mut replies = Vec::with_capacity(names.len());
        for name in names {
            let ids = self.table(kind).entry(name.to_vec()).or_default();
            if !ids.contains(&client) {
                ids.push(client);
            }
            let count = self.count(client, kind);
            replies.push(frame(resp3, kind.words().0, Some(name), count));
        }
        replies
    }

    /// Unsubscribes `client` from `names` (all of its `kind` when empty); the
    /// confirmations. The mailbox goes with the last subscription.
    pub(crate) fn unsubscribe(
        &mut self,
        client: u64,
        resp3: bool,
        inbox: &mut Option<Inbox>,
        kind: Kind,
        names: &[&[u8]],
    ) -> Vec<Reply> {
        let names: Vec<Vec<u8>> = if names.is_empty() {
            let mut all: Vec<Vec<u8>> = self
                .table(kind)
                .iter()
                .filter(|(_, ids)| ids.contains(&client))
                .map(|(name, _)| name.clone())
                .collect();
            all.sort();
            all
        } else {
            names.iter().map(|n| n.to_vec()).collect()
        };
        let mut replies = Vec::new();
        for name in &names {
            self.remove(kind, name, client);
            let count = self.count(client, kind);
            replies.push(frame(resp3, kind.words().1, Some(name), count));
        }
        if replies.is_empty() {
            let count = self.count(client, kind);
            replies.push(frame(resp3, kind.words().1, None, count));
        }
        if self.count(client, Kind::Channel) + self.count(client, Kind::Shard) == 0 {
            self.mailboxes.remove(&client);
            *inbox = None;
        }
        replies
    }

    fn remove(&mut self, kind: Kind, name: &[u8], client: u64) {
        let table = self.table(kind);
        if let Some(ids) = table.get_mut(name) {
            ids.retain(|&id| id != client);
            if ids.is_empty() {
                table.remove(name);
            }
        }
    }

    /// A client that went away: all its subscriptions.
    pub(crate) fn forget(&mut self, client: u64) {
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            let table = self.table(kind);
            table.retain(|_, ids| {
                ids.retain(|&id| id != client);
                !ids.is_empty()
            });
        }
        self.mailboxes.remove(&client);
    }

    /// Delivers a message to this node's subscribers at `now` (Unix ms), under `limit`
    /// (`client-output-buffer-limit pubsub`): how many got it (PUBLISH's reply), and the
    /// subscribers dropped for not reading.
    pub(crate) fn deliver(
        &mut self,
        channel: &[u8],
        message: &[u8],
        sharded: bool,
        limit: OutputLimit,
        now: u64,
    ) -> (usize, Vec<u64>) {
        let mut sends: Vec<(u64, Vec<&[u8]>)> = Vec::new();
        if sharded {
            for &id in self.shard.get(channel).into_iter().flatten() {
                sends.push((id, vec![b"smessage", channel, message]));
            }
        } else {
            for &id in self.channels.get(channel).into_iter().flatten() {
                sends.push((id, vec![b"message", channel, message]));
            }
            for (pattern, ids) in &self.patterns {
                if glob_match(pattern, channel) {
                    for &id in ids {
                        sends.push((id, vec![b"pmessage", pattern, channel, message]));
                    }
                }
            }
        }
        let sends: Vec<(u64, Vec<Vec<u8>>)> = sends
            .into_iter()
            .map(|(id, words)| (id, words.into_iter().map(<[u8]>::to_vec).collect()))
            .collect();
        let mut slow = Vec::new();
        for (id, words) in &sends {
            let Some(mailbox) = self.mailboxes.get_mut(id) else {
                continue;
            };
            // The frame's bytes as written: each word with its `$len\r\n` and CRLF.
            let bytes = words.iter().map(|w| w.len() as u64 + 16).sum::<u64>() + 4;
            let held = mailbox.queued.load(Ordering::Relaxed) + bytes;
            if !limit.exceeded(held, &mut mailbox.over_soft_since, now) {
                let items = words.iter().map(|w| Frame::BulkString(w.clone())).collect();
                let frame = if mailbox.resp3 {
                    Frame::Push(items)
                } else {
                    Frame::Array(items)
                };
                if mailbox.tx.try_send((frame, bytes)).is_ok() {
                    mailbox.queued.fetch_add(bytes, Ordering::Relaxed);
                    continue;
                }
            }
            slow.push(*id);
        }
        // A subscriber that does not read is dropped: its connection closes.
        for &id in &slow {
            self.forget(id);
        }
        (sends.len(), slow)
    }

    /// PUBSUB CHANNELS / SHARDCHANNELS: the channels with subscribers, matching `pattern`.
    pub(crate) fn names(&self, sharded: bool, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let table = if sharded { &self.shard } else { &self.channels };
        let mut names: Vec<Vec<u8>> = table
            .keys()
            .filter(|name| pattern.is_none_or(|p| glob_match(p, name)))
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// PUBSUB NUMSUB / SHARDNUMSUB: subscribers of a channel.
    pub(crate) fn subscribers(&self, sharded: bool, channel: &[u8]) -> usize {
        let table = if sharded { &self.shard } else { &self.channels };
        table.get(channel).map_or(0, Vec::len)
    }

    /// PUBSUB NUMPAT: patterns with subscribers.
    pub(crate) fn patterns(&self) -> usize {
        self.patterns.len()
    }
}

/// `[kind, name, count]`: a push in RESP3, an array in RESP2.
fn frame(resp3: bool, word: &[u8], name: Option<&[u8]>, count: usize) -> Reply {
    let name = match name {
        Some(name) => Frame::BulkString(name.to_vec()),
        None if resp3 => Frame::Null,
        None => Frame::NullBulkString,
    };
    let items = vec![
        Frame::BulkString(word.to_vec()),
        name,
        Frame::Integer(count as i64),
    ];
    if resp3 {
        Frame::Push(items)
    } else {
        Frame::Array(items)
    }
}

/// After the cluster changed: the shard channels of slots this node's shard no longer
/// serves (the state machine's `serves_slot`) are dropped, each subscriber told with
/// `sunsubscribe`, as the server does when it loses a slot.
pub(crate) fn drop_unserved(node: &mut Node) {
    if node.pubsub.shard.is_empty() {
        return;
    }
    let gone: Vec<Vec<u8>> = node
        .pubsub
        .shard
        .keys()
        .filter(|channel| !node.cluster.serves_slot(key_slot(channel)))
        .cloned()
        .collect();
    for channel in gone {
        let ids = node.pubsub.shard.remove(&channel).unwrap_or_default();
        for id in ids {
            let count = node.pubsub.count(id, Kind::Shard);
            let Some(mailbox) = node.pubsub.mailboxes.get(&id) else {
                continue;
            };
            let frame = frame(mailbox.resp3, b"sunsubscribe", Some(&channel), count);
            let bytes = channel.len() as u64 + 48;
            if mailbox.tx.try_send((frame, bytes)).is_ok() {
                mailbox.queued.fetch_add(bytes, Ordering::Relaxed);
            } else {
                node.pubsub.forget(id);
            }
        }
    }
}
