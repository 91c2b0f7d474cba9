//! Replies of the CLUSTER commands that read the tables, as RESP frames in the protocol of
//! the asking connection (semantics 6.3 to 6.5).

use alloc::{format, string::String, vec, vec::Vec};
use core::fmt::Write as _;

use redis_cluster_bus::{MessageType, NodeId};
use redis_hash_slot::Slot;
use redis_resp::Frame;

use crate::{
    cluster::ClusterNode, config::EndpointType, node::Node, output::LinkId, time::Instant,
};

/// A reply frame: owned bytes.
pub type Reply = Frame<Vec<u8>>;

/// The protocol of the connection a reply goes to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// RESP2: maps become flat arrays of names and values, text becomes bulk strings.
    #[default]
    Resp2,
    /// RESP3 (after `HELLO 3`): maps and verbatim text.
    Resp3,
}

fn bulk(text: impl AsRef<[u8]>) -> Reply {
    Frame::BulkString(text.as_ref().to_vec())
}

/// A map: a RESP3 map, or a RESP2 flat array of names and values.
fn map(protocol: Protocol, pairs: Vec<(&str, Reply)>) -> Reply {
    match protocol {
        Protocol::Resp3 => Frame::Map(pairs.into_iter().map(|(k, v)| (bulk(k), v)).collect()),
        Protocol::Resp2 => {
            Frame::Array(pairs.into_iter().flat_map(|(k, v)| [bulk(k), v]).collect())
        }
    }
}

/// Text: a bulk string, or a RESP3 verbatim string of format `txt`.
pub(crate) fn text_reply(protocol: Protocol, text: String) -> Reply {
    match protocol {
        Protocol::Resp2 => Frame::BulkString(text.into_bytes()),
        Protocol::Resp3 => Frame::VerbatimString {
            format: *b"txt",
            text: text.into_bytes(),
        },
    }
}

/// What the driver knows of one bus connection, for `CLUSTER LINKS`
/// ([`ClusterNode::cluster_links`]): the state machine knows which links exist and whose
/// they are, the driver owns the sockets and their buffers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// When the connection was created (ms, the server's `create-time`).
    pub create_time: u64,
    /// The events the connection waits for: `r`, `w`, `rw`, or empty.
    pub events: String,
    /// Bytes allocated for its send queue.
    pub send_buffer_allocated: u64,
    /// Bytes of that queue in use.
    pub send_buffer_used: u64,
}

impl ClusterNode {
    /// `CLUSTER LINKS`: for every node (in id order; the server walks its node dictionary),
    /// the link this node opened to it (`direction` `to`), then the one it opened to this
    /// node (`from`, known once a message came in on it); each a map of `direction`,
    /// `node`, `create-time`, `events`, `send-buffer-allocated`, `send-buffer-used`, with
    /// the figures from `stats`.
    ///
    /// [`ClusterNode::cluster_command`] does not answer LINKS: only the driver has the
    /// figures.
    ///
    /// ```
    /// use redis_cluster_state::{ClusterNode, Config, LinkStats, Protocol};
    /// use redis_resp::Frame;
    ///
    /// let node = ClusterNode::new(Config::new("127.0.0.1", 7000));
    /// let reply = node.cluster_links(Protocol::Resp2, |_| LinkStats::default());
    /// assert_eq!(reply, Frame::Array(vec![]));
    /// ```
    pub fn cluster_links(&self, protocol: Protocol, stats: impl Fn(LinkId) -> LinkStats) -> Reply {
        let me = self.myself().id;
        let mut out = Vec::new();
        for node in self.nodes().filter(|n| n.id != me) {
            let outbound = node.outbound_link.filter(|_| node.link).map(|l| ("to", l));
            let inbound = node.inbound_link.map(|link| ("from", link));
            for (direction, link) in outbound.into_iter().chain(inbound) {
                let figures = stats(link);
                let int = |n: u64| Frame::Integer(i64::try_from(n).unwrap_or(i64::MAX));
                out.push(map(
                    protocol,
                    vec![
                        ("direction", bulk(direction)),
                        ("node", bulk(node.id.as_bytes())),
                        ("create-time", int(figures.create_time)),
                        ("events", bulk(&figures.events)),
                        ("send-buffer-allocated", int(figures.send_buffer_allocated)),
                        ("send-buffer-used", int(figures.send_buffer_used)),
                    ],
                ));
            }
        }
        Frame::Array(out)
    }

    /// Records a node's replication offset: this node's own from the driver's replication
    /// layer, another's from the `offset` of its bus headers. CLUSTER SLOTS lists a replica
    /// only once it has one.
    pub fn set_replication_offset(&mut self, id: &NodeId, offset: u64, now: Instant) -> bool {
        self.tick(now);
        match self.topology.node_mut(id) {
            Some(node) => {
                node.repl_offset = offset;
                true
            }
            None => false,
        }
    }

    /// `CLUSTER SLOTS`: one entry per maximal run of slots with the same owner, in slot order:
    /// start, end, the master, then each replica that is not FAIL and has a replication
    /// offset.
    pub fn cluster_slots(&self, protocol: Protocol) -> Reply {
        let mut out = Vec::new();
        let mut start = 0u16;
        while start < 16384 {
            let owner_of = |n: u16| Slot::new(n).and_then(|s| self.topology.owner_of(s));
            let owner = owner_of(start);
            let mut end = start;
            while end + 1 < 16384 && owner_of(end + 1) == owner {
                end += 1;
            }
            if let Some(master) = Slot::new(start).and_then(|s| self.owner(s)) {
                let mut entry = vec![
                    Frame::Integer(i64::from(start)),
                    Frame::Integer(i64::from(end)),
                    self.slots_node(master, protocol),
                ];
                for replica in self.replicas_of(&master.id) {
                    if !replica.is_failed() && replica.repl_offset != 0 {
                        entry.push(self.slots_node(replica, protocol));
                    }
                }
                out.push(Frame::Array(entry));
            }
            start = end + 1;
        }
        Frame::Array(out)
    }

    /// The replicas of a master, in id order.
    pub fn replicas_of<'a>(&'a self, master: &'a NodeId) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes()
            .filter(move |n| n.is_replica() && n.master.as_ref() == Some(master))
    }

    /// `[endpoint, port, id, metadata]`.
    fn slots_node(&self, node: &Node, protocol: Protocol) -> Reply {
        let hostname = node.hostname.as_deref().filter(|h| !h.is_empty());
        let mut meta = Vec::new();
        let endpoint = match self.config.preferred_endpoint {
            EndpointType::Ip => {
                if let Some(host) = hostname {
                    meta.push(("hostname", bulk(host)));
                }
                bulk(node.ip)
            }
            EndpointType::Hostname => {
                meta.push(("ip", bulk(node.ip)));
                bulk(hostname.unwrap_or("?"))
            }
            EndpointType::Unknown => {
                meta.push(("ip", bulk(node.ip)));
                if let Some(host) = hostname {
                    meta.push(("hostname", bulk(host)));
                }
                match protocol {
                    Protocol::Resp2 => Frame::NullBulkString,
                    Protocol::Resp3 => Frame::Null,
                }
            }
        };
        Frame::Array(vec![
            endpoint,
            Frame::Integer(i64::from(node.port)),
            bulk(node.id.as_bytes()),
            map(protocol, meta),
        ])
    }

    /// `CLUSTER SHARDS`: one map per master (slot-less ones included), in id order: its
    /// slot ranges as a flat list, then its nodes, master first.
    pub fn cluster_shards(&self, protocol: Protocol) -> Reply {
        let mut shards = Vec::new();
        for master in self.nodes().filter(|n| n.is_master()) {
            let slots = master
                .slots
                .ranges()
                .flat_map(|r| [u16::from(r.start()), u16::from(r.end())])
                .map(|n| Frame::Integer(i64::from(n)))
                .collect();
            let nodes = core::iter::once(master)
                .chain(self.replicas_of(&master.id))
                .map(|node| self.shards_node(node, protocol))
                .collect();
            shards.push(map(
                protocol,
                vec![
                    ("slots", Frame::Array(slots)),
                    ("nodes", Frame::Array(nodes)),
                ],
            ));
        }
        Frame::Array(shards)
    }

    fn shards_node(&self, node: &Node, protocol: Protocol) -> Reply {
        let mut fields = vec![("id", bulk(node.id.as_bytes()))];
        if node.port != 0 {
            fields.push(("port", Frame::Integer(i64::from(node.port))));
        }
        let tls = node
            .aux
            .split(',')
            .find_map(|field| field.strip_prefix("tls-port="))
            .and_then(|port| port.parse::<u16>().ok())
            .filter(|&port| port != 0);
        if let Some(port) = tls {
            fields.push(("tls-port", Frame::Integer(i64::from(port))));
        }
        fields.push(("ip", bulk(node.ip)));
        let hostname = node.hostname.as_deref().filter(|h| !h.is_empty());
        let endpoint = match self.config.preferred_endpoint {
            EndpointType::Ip => node.ip.as_str(),
            EndpointType::Hostname => hostname.unwrap_or("?"),
            EndpointType::Unknown => "",
        };
        fields.push(("endpoint", bulk(endpoint)));
        if let Some(host) = hostname {
            fields.push(("hostname", bulk(host)));
        }
        let role = if node.is_master() {
            "master"
        } else {
            "replica"
        };
        fields.push(("role", bulk(role)));
        let offset = i64::try_from(node.repl_offset).unwrap_or(i64::MAX);
        fields.push(("replication-offset", Frame::Integer(offset)));
        let health = if node.is_failed() {
            "fail"
        } else if node.is_replica() && node.repl_offset == 0 {
            "loading"
        } else {
            "online"
        };
        fields.push(("health", bulk(health)));
        map(protocol, fields)
    }

    /// `CLUSTER INFO` text, `\r\n` line ends, the message counters of the types with any.
    pub fn cluster_info(&self) -> String {
        let mut out = String::new();
        let (mut assigned, mut pfail, mut fail) = (0, 0, 0);
        for n in 0..16384 {
            if let Some(owner) = Slot::new(n).and_then(|s| self.owner(s)) {
                assigned += 1;
                if owner.is_failed() {
                    fail += 1;
                } else if owner.is_pfailed() {
                    pfail += 1;
                }
            }
        }
        let size = self
            .nodes()
            .filter(|n| n.is_master() && n.has_slots())
            .count();
        let state = if self.health.ok() { "ok" } else { "fail" };
        let lines = [
            format!("cluster_state:{state}"),
            format!("cluster_slots_assigned:{assigned}"),
            format!("cluster_slots_ok:{}", assigned - pfail - fail),
            format!("cluster_slots_pfail:{pfail}"),
            format!("cluster_slots_fail:{fail}"),
            format!("cluster_known_nodes:{}", self.nodes().count()),
            format!("cluster_size:{size}"),
            format!("cluster_current_epoch:{}", self.current_epoch),
            format!("cluster_my_epoch:{}", self.my_epoch()),
        ];
        for line in lines {
            let _ = write!(out, "{line}\r\n");
        }
        for (direction, counts) in [
            ("sent", self.stats.counts(true)),
            ("received", self.stats.counts(false)),
        ] {
            for (name, count) in STAT_NAMES.iter().zip(counts.iter()) {
                if *count > 0 {
                    let _ = write!(out, "cluster_stats_messages_{name}_{direction}:{count}\r\n");
                }
            }
            let total: u64 = counts.iter().sum();
            let _ = write!(out, "cluster_stats_messages_{direction}:{total}\r\n");
        }
        let _ = write!(
            out,
            "total_cluster_links_buffer_limit_exceeded:{}\r\n",
            self.stats.links_over_limit
        );
        out
    }

    /// Counts a link the driver freed because its send buffer passed
    /// `cluster-link-sendbuf-limit`, for CLUSTER INFO's
    /// `total_cluster_links_buffer_limit_exceeded` (the driver then reports the link down
    /// with [`ClusterNode::handle_link_down`]).
    pub fn count_link_over_limit(&mut self) {
        self.stats.links_over_limit += 1;
    }

    /// The node a link belongs to and its direction as CLUSTER LINKS names it: `to` for the
    /// link this node opened, `from` for the one the node opened to us. `None` for a link no
    /// node owns (an inbound link whose sender is not known yet, a link already down).
    pub fn link_peer(&self, link: LinkId) -> Option<(&'static str, NodeId)> {
        self.nodes().find_map(|node| {
            if node.outbound_link == Some(link) {
                Some(("to", node.id))
            } else if node.inbound_link == Some(link) {
                Some(("from", node.id))
            } else {
                None
            }
        })
    }

    /// Counts a bus message of type `kind` (0 to 10) sent or received, for CLUSTER INFO.
    pub fn count_message(&mut self, kind: MessageType, sent: bool) {
        self.stats.count(kind.0, sent);
    }
}

/// The names CLUSTER INFO gives the message types, by type number.
const STAT_NAMES: [&str; 11] = [
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];
