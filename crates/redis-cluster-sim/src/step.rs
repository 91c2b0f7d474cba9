//! The half of a millisecond's work that touches one node only, so that the nodes of a batch
//! can be split between threads: each [`Step`] runs on the node it names, and what it asks of
//! the network comes back as [`Rec`]s, which the simulator carries out afterwards in the
//! steps' order, the same order whatever the number of threads.

use std::collections::HashMap;

use redis_cluster_bus::Message;
use redis_cluster_state::{ClusterNode, Instant, LinkId, Output};

use crate::{Conns, Links, link_of};

/// One event's work on one node.
pub(crate) enum Step {
    /// The node's deadline came (it may be stale: see [`run`]).
    Cron { node: usize },
    /// `bytes` arrive on connection `conn` (dropped if it closed or a partition cut it).
    Deliver {
        node: usize,
        conn: u64,
        bytes: Vec<u8>,
    },
    /// The node accepts the connection node `from` opened on its link `out`.
    Accept {
        node: usize,
        from: usize,
        out: LinkId,
    },
    /// The node's connection on `link` was accepted.
    Connected { node: usize, link: LinkId },
    /// The node's connection on `link` was refused.
    Refused { node: usize, link: LinkId },
}

impl Step {
    /// The node the step runs on.
    pub(crate) fn node(&self) -> usize {
        match *self {
            Self::Cron { node }
            | Self::Deliver { node, .. }
            | Self::Accept { node, .. }
            | Self::Connected { node, .. }
            | Self::Refused { node, .. } => node,
        }
    }
}

/// What a step leaves for the simulator to do; each step's records end with a `Done` or an
/// `Accepted`.
pub(crate) enum Rec {
    /// A delivery reached its node: its size, from whom, and its type's name (when tracing).
    Delivered {
        len: usize,
        peer: usize,
        kind: &'static str,
    },
    /// The connection `from` opened on `out` is accepted on the node's link `inb`.
    Accepted {
        from: usize,
        out: LinkId,
        inb: LinkId,
    },
    /// The node opens `link` to the node listening at its address (`None`: nobody, and the
    /// node was told the link is down).
    Connect { link: LinkId, to: Option<usize> },
    /// The node writes `bytes` on each of `first` (a broadcast's links but its last), then
    /// on `last`, with the connection and the peer of each as they were when the batch
    /// began (`None`: none then). Most messages go on one link: their `first` is empty, and
    /// takes no allocation (made on a worker thread, freed on the simulator's, every one
    /// was a trip through the allocator's slow path).
    Transmit {
        first: Vec<(LinkId, Option<(u64, usize)>)>,
        last: (LinkId, Option<(u64, usize)>),
        bytes: Vec<u8>,
    },
    /// The node closes `link`.
    Close(LinkId),
    /// The node's nodes.conf to save (when tracing).
    Save(String),
    /// A published message the node hands its subscribers (when tracing).
    Published {
        channel: Vec<u8>,
        message: Vec<u8>,
        sharded: bool,
    },
    /// An event the node reported (when tracing).
    Event(redis_cluster_state::Event),
    /// The step is over; the node's next deadline is queued at `cron`, if given.
    Done { cron: Option<u64> },
}

/// What every step reads and nobody changes while steps run.
pub(crate) struct Ctx<'a> {
    /// The batch's time (ms).
    pub now: u64,
    pub tracing: bool,
    pub alive: &'a [bool],
    /// Each node's side of the partition.
    pub side: &'a [u8],
    pub start_at: &'a [u64],
    /// The node listening on each bus address.
    pub addresses: &'a HashMap<(String, u16), usize>,
    /// Each node's IP, as its peers see it.
    pub ips: &'a [String],
    /// The connections, as they were when the batch began: the simulator adds those the
    /// batch accepts only when it carries out the records.
    pub conns: &'a Conns,
    pub links: &'a Links,
}

/// Buffers kept for the next copies, at most this many.
pub(crate) const SPARE_BUFFERS: usize = 4096;

/// Keeps a buffer for a later copy.
pub(crate) fn recycle(pool: &mut Vec<Vec<u8>>, bytes: Vec<u8>) {
    if pool.len() < SPARE_BUFFERS {
        pool.push(bytes);
    }
}

/// One node's part of a batch split over threads: the node, its earliest queued
/// deadline, its steps in order, and the records they leave.
pub(crate) struct Share<'a> {
    pub(crate) state: &'a mut ClusterNode,
    pub(crate) cron_at: &'a mut u64,
    pub(crate) steps: Vec<Step>,
    pub(crate) recs: Vec<Rec>,
}

/// Runs `steps`, in order, on `nodes` (node `base` first) and their `cron_at` entries (the
/// time of each node's earliest queued deadline), appending their records to `out`. `pool`
/// lends and takes back buffers.
pub(crate) fn run(
    ctx: &Ctx<'_>,
    base: usize,
    nodes: &mut [ClusterNode],
    cron_at: &mut [u64],
    steps: impl Iterator<Item = Step>,
    pool: &mut Vec<Vec<u8>>,
    out: &mut Vec<Rec>,
) {
    let mut closed: Vec<(usize, LinkId)> = Vec::new();
    for step in steps {
        let k = step.node() - base;
        one(
            ctx,
            &mut nodes[k],
            &mut cron_at[k],
            step,
            pool,
            &mut closed,
            out,
        );
    }
}

/// Runs a share's steps, in order, leaving their records in it.
pub(crate) fn run_share(ctx: &Ctx<'_>, share: &mut Share<'_>, pool: &mut Vec<Vec<u8>>) {
    let mut closed: Vec<(usize, LinkId)> = Vec::new();
    for step in core::mem::take(&mut share.steps) {
        one(
            ctx,
            share.state,
            share.cron_at,
            step,
            pool,
            &mut closed,
            &mut share.recs,
        );
    }
}

/// Runs one step on `node` (the one it names) and its `at` entry. A delivery on a link its
/// node closed earlier in the batch (in `closed`) is dropped: the simulator only learns of
/// the close when it carries the records out.
fn one(
    ctx: &Ctx<'_>,
    node: &mut ClusterNode,
    at: &mut u64,
    step: Step,
    pool: &mut Vec<Vec<u8>>,
    closed: &mut Vec<(usize, LinkId)>,
    out: &mut Vec<Rec>,
) {
    let now = Instant::from_millis(ctx.now);
    let i = step.node();
    match step {
        Step::Cron { .. } => {
            if *at != ctx.now {
                // Superseded by an earlier deadline, already run.
                out.push(Rec::Done { cron: None });
                return;
            }
            *at = u64::MAX;
            if !ctx.alive[i] {
                out.push(Rec::Done { cron: None });
                return;
            }
            node.handle_timeout(now);
        }
        Step::Deliver { conn, bytes, .. } => {
            let open = ctx.conns.get(conn).filter(|c| {
                // Closed, or cut by a partition.
                ctx.alive[i] && ctx.side[c.from] == ctx.side[c.to] && !c.closed_at(i)
            });
            let end = open.map(|c| match i == c.to {
                true => (c.inb, c.from),
                false => (c.out, c.to),
            });
            // Or closed by this node earlier in the batch.
            let Some((link, peer)) = end.filter(|&(link, _)| !closed.contains(&(i, link))) else {
                recycle(pool, bytes);
                out.push(Rec::Done { cron: None });
                return;
            };
            {
                let message = Message::decode(&bytes).expect("simulated nodes send valid messages");
                let kind = match ctx.tracing {
                    true => message.kind().name().unwrap_or("?"),
                    false => "",
                };
                out.push(Rec::Delivered {
                    len: bytes.len(),
                    peer,
                    kind,
                });
                node.handle_message(link, &ctx.ips[peer], &message, now);
            }
            recycle(pool, bytes);
        }
        Step::Accept {
            from, out: link, ..
        } => {
            let inb = node.handle_accepted(now);
            out.push(Rec::Accepted {
                from,
                out: link,
                inb,
            });
            return;
        }
        Step::Connected { link, .. } => node.handle_connected(link, now),
        Step::Refused { link, .. } => node.handle_link_down(link, now),
    }
    drain(ctx, i, node, at, pool, closed, out);
}

/// Takes node `i`'s outputs as records, then works out its next deadline.
pub(crate) fn drain(
    ctx: &Ctx<'_>,
    i: usize,
    node: &mut ClusterNode,
    cron_at: &mut u64,
    pool: &mut Vec<Vec<u8>>,
    closed: &mut Vec<(usize, LinkId)>,
    out: &mut Vec<Rec>,
) {
    let now = Instant::from_millis(ctx.now);
    // Where the node writes each message (it clears the buffer first).
    let mut encoded = pool.pop().unwrap_or_default();
    while let Some(output) = node.poll_output(&mut encoded) {
        match output {
            Output::Connect {
                link, ip, cport, ..
            } => {
                let to = ctx.addresses.get(&(ip, cport)).copied();
                out.push(Rec::Connect { link, to });
                if to.is_none() {
                    node.handle_link_down(link, now);
                }
            }
            Output::Transmit { mut links } => {
                let Some(link) = links.pop() else {
                    continue;
                };
                // The record takes the written buffer; the next output goes to a spare one.
                let spare = pool.pop().unwrap_or_default();
                let bytes = std::mem::replace(&mut encoded, spare);
                let target = |link| (link, link_of(ctx.conns, ctx.links, i, link));
                out.push(Rec::Transmit {
                    first: links.into_iter().map(target).collect(),
                    last: target(link),
                    bytes,
                });
            }
            Output::Close(link) => {
                closed.push((i, link));
                out.push(Rec::Close(link));
            }
            Output::SaveConfig if ctx.tracing => out.push(Rec::Save(node.nodes_conf())),
            Output::Deliver {
                channel,
                message,
                sharded,
            } if ctx.tracing => out.push(Rec::Published {
                channel,
                message,
                sharded,
            }),
            Output::Event(event) if ctx.tracing => out.push(Rec::Event(event)),
            Output::SaveConfig | Output::Deliver { .. } | Output::Event(_) => {}
        }
    }
    recycle(pool, encoded);
    let mut cron = None;
    if ctx.alive[i] {
        let due = node
            .poll_timeout()
            .as_millis()
            .max(ctx.now)
            .max(ctx.start_at[i]);
        if due < *cron_at {
            *cron_at = due;
            cron = Some(due);
        }
    }
    out.push(Rec::Done { cron });
}
