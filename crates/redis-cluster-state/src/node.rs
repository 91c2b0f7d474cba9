//! [`Node`]: what a node knows of one node of the cluster (itself included).

use alloc::{boxed::Box, string::String, vec::Vec};
use core::{fmt, ops::Deref};

use redis_cluster_bus::{NodeFlags, NodeId};
use redis_hash_slot::SlotSet;

use crate::output::LinkId;

/// One entry of the node table.
///
/// Laid out for the two hot paths of a large cluster, the cron's walk of the table and the
/// gossip (a tenth of the table drawn or looked up per message): everything they read
/// sits in the first cache line (`repr(C)` keeps the order, the alignment keeps it in one
/// line), except a gossip entry's address and ports, in the second; the failure reports
/// from there on, and the 2 KiB slot set behind a box. A simulated cluster of N nodes
/// holds N² entries; with the set inline a thousand nodes' tables were 2.3 GB, and every
/// look-up a cache and TLB miss.
#[derive(Clone, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Node {
    /// Its id.
    pub id: NodeId,
    /// When our outstanding ping to it was sent (ms), 0 for none.
    pub ping_sent: u64,
    /// When its last PONG arrived (ms).
    pub pong_received: u64,
    /// Its flags: role, failure state, handshake, …
    pub flags: NodeFlags,
    /// How many: kept with `slots`, so that the cluster state is a walk over the nodes, not
    /// over the 16384 slots.
    pub(crate) slot_count: u16,
    /// Whether `fail_reports` may hold a report: false means it is empty. Kept in this
    /// cache line so that the gossip's per-entry checks need not fetch the vector's.
    pub(crate) reported: bool,
    /// Whether we hold an outbound bus link to it.
    pub link: bool,
    /// Whether a connection to it was requested and is not up yet.
    pub connecting: bool,
    /// Its client port.
    pub port: u16,
    /// Its bus port.
    pub cport: u16,
    /// Its secondary client port.
    pub pport: u16,
    /// Its IP, empty when unknown.
    pub ip: NodeIp,
    /// The masters that reported it PFAIL or FAIL, and when (ms).
    pub fail_reports: Vec<(NodeId, u64)>,
    /// The inbound link its messages arrive on, once one did.
    pub inbound_link: Option<LinkId>,
    /// Our outbound link to it, connected (`link`) or connecting.
    pub outbound_link: Option<LinkId>,
    /// When it was flagged FAIL (ms).
    pub fail_time: u64,
    /// Its config epoch (a replica's line shows its master's).
    pub config_epoch: u64,
    /// Its replication offset, as last advertised.
    pub repl_offset: u64,
    /// When the entry was created (ms): a handshake expires after the node timeout.
    pub ctime: u64,
    /// Since when it has been an orphaned master (ms), 0 when it is not one.
    pub orphaned_time: u64,
    /// When this node last voted for one of its replicas (ms), for a master.
    pub voted_time: u64,
    /// When its last message of any type arrived (ms), the server's `data_received`: a
    /// node that keeps talking is not PFAIL, though it answers no PING (a drop filter, a
    /// PONG stuck behind Pub/Sub traffic). Read by the cron only for a ping in flight.
    pub data_received: u64,
    /// When our outbound link to it came up (ms): a link is reset at most once a node
    /// timeout.
    pub(crate) link_time: u64,
    /// Its master, for a replica.
    pub master: Option<NodeId>,
    /// Its announced hostname.
    pub hostname: Option<String>,
    /// Fields after the hostname in a nodes.conf line (Redis 7.2+ / Valkey: `shard-id=…`,
    /// `tls-port=…`), kept as they were read so that the file is written back the same.
    pub aux: String,
    /// The slots it serves, as we know them.
    pub slots: Box<SlotSet>,
}

/// The first cache line holds what the cron and the gossip read (see [`Node`]); a gossip
/// entry's address is in the second.
const _: () = {
    assert!(core::mem::offset_of!(Node, connecting) < 64);
    assert!(core::mem::offset_of!(Node, reported) < 64);
    // `Table::touch` reads these two to fetch the first line and the second.
    assert!(core::mem::offset_of!(Node, pong_received) < 64);
    assert!(core::mem::offset_of!(Node, port) >= 64 && core::mem::offset_of!(Node, port) < 128);
    assert!(core::mem::offset_of!(Node, ip) + size_of::<NodeIp>() <= 128);
};

/// A node's IP as text, held inline as the server holds it (`char ip[NET_IP_STR_LEN]`): at
/// most [`NodeIp::MAX_LEN`] bytes, as many as the bus has room for.
///
/// Inline because the gossip copies the IPs of a tenth of the cluster into every message:
/// behind a pointer, each was one more cache miss per entry. It reads as a `str`.
///
/// ```
/// use redis_cluster_state::NodeIp;
///
/// let ip = NodeIp::new("127.0.0.1");
/// assert_eq!(ip, "127.0.0.1");
/// assert_eq!(ip.len(), 9);
/// assert_eq!(format!("{ip}:7000"), "127.0.0.1:7000");
/// assert!(NodeIp::EMPTY.is_empty());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeIp {
    len: u8,
    bytes: [u8; Self::MAX_LEN],
}

impl NodeIp {
    /// The longest IP kept: the size of the bus's address fields (`NET_IP_STR_LEN`).
    pub const MAX_LEN: usize = 46;

    /// No address.
    pub const EMPTY: Self = Self {
        len: 0,
        bytes: [0; Self::MAX_LEN],
    };

    /// `text`, cut to its longest prefix of at most [`NodeIp::MAX_LEN`] bytes that ends on a
    /// character boundary (the server cuts an announced IP to its field the same way, bytes
    /// aside).
    ///
    /// ```
    /// use redis_cluster_state::NodeIp;
    ///
    /// let long = "a".repeat(50);
    /// assert_eq!(NodeIp::new(&long).len(), NodeIp::MAX_LEN);
    /// ```
    pub fn new(text: &str) -> Self {
        let mut end = text.len().min(Self::MAX_LEN);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut ip = Self::EMPTY;
        ip.bytes[..end].copy_from_slice(&text.as_bytes()[..end]);
        ip.len = end as u8;
        ip
    }

    /// An address field as it came off the bus: bytes that are not UTF-8 are replaced, as
    /// `String::from_utf8_lossy` does, and the result is cut as by [`NodeIp::new`].
    pub fn from_wire(bytes: &[u8]) -> Self {
        Self::new(&String::from_utf8_lossy(bytes))
    }

    /// The text's bytes (no UTF-8 check, unlike `as_str().as_bytes()`).
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or_default()
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // Built only from a `str` cut on a character boundary: always UTF-8.
        core::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }
}

impl Default for NodeIp {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl Deref for NodeIp {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for NodeIp {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for NodeIp {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Display for NodeIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for NodeIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for NodeIp {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl PartialEq<str> for NodeIp {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for NodeIp {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Node {
    /// A node with no address, no slots and no flags.
    pub fn new(id: NodeId) -> Self {
        Self {
            id,
            ip: NodeIp::EMPTY,
            port: 0,
            cport: 0,
            pport: 0,
            hostname: None,
            flags: NodeFlags::empty(),
            master: None,
            config_epoch: 0,
            ping_sent: 0,
            pong_received: 0,
            fail_time: 0,
            link: false,
            inbound_link: None,
            outbound_link: None,
            slots: Box::default(),
            slot_count: 0,
            repl_offset: 0,
            ctime: 0,
            connecting: false,
            reported: false,
            orphaned_time: 0,
            voted_time: 0,
            data_received: 0,
            link_time: 0,
            fail_reports: Vec::new(),
            aux: String::new(),
        }
    }

    /// Whether it is a master.
    pub fn is_master(&self) -> bool {
        self.flags.contains(NodeFlags::MASTER)
    }

    /// Whether it is a replica.
    pub fn is_replica(&self) -> bool {
        self.flags.contains(NodeFlags::REPLICA)
    }

    /// Whether it serves at least one slot.
    pub fn has_slots(&self) -> bool {
        self.slot_count > 0
    }

    /// Whether it is flagged FAIL.
    pub fn is_failed(&self) -> bool {
        self.flags.contains(NodeFlags::FAIL)
    }

    /// Whether it is flagged PFAIL.
    pub fn is_pfailed(&self) -> bool {
        self.flags.contains(NodeFlags::PFAIL)
    }

    /// Whether it is still in a handshake.
    pub fn in_handshake(&self) -> bool {
        self.flags.contains(NodeFlags::HANDSHAKE)
    }

    pub(crate) fn set(&mut self, flag: NodeFlags, on: bool) {
        self.flags.set(flag, on);
    }

    /// An aux field's value (`shard-id`, `nodename`, `tls-port`, …), as nodes.conf of Redis
    /// 7.2+ and Valkey keeps it after the hostname; `None` when it has none.
    pub fn aux_field(&self, name: &str) -> Option<&str> {
        self.aux.split(',').find_map(|field| {
            field
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('='))
        })
    }

    /// The shard id it announced (ping extension 3, Redis 7.2+ and Valkey) or that a newer
    /// server's nodes.conf gave it; `None` for a node no newer server told us of.
    pub fn shard_id(&self) -> Option<NodeId> {
        self.aux_field("shard-id")?.parse().ok()
    }

    /// The human node name it announced (`cluster-announce-human-nodename`, ping extension
    /// 1, Redis 7.2+ and Valkey); `None` when it announces none.
    pub fn human_nodename(&self) -> Option<&str> {
        self.aux_field("nodename").filter(|name| !name.is_empty())
    }

    /// Sets an aux field (`None` removes it); whether it changed. A new field goes where the
    /// newer servers write it: their order is `client-ipv6`, `client-ipv4`, `tls-port`,
    /// `tcp-port`, `nodename`, `shard-id`, unknown fields kept where they are.
    pub(crate) fn set_aux_field(&mut self, name: &str, value: Option<&str>) -> bool {
        const ORDER: [&str; 6] = [
            "client-ipv6",
            "client-ipv4",
            "tls-port",
            "tcp-port",
            "nodename",
            "shard-id",
        ];
        if self.aux_field(name) == value {
            return false;
        }
        let rank = |field: &str| {
            let key = field.split('=').next().unwrap_or(field);
            ORDER.iter().position(|known| *known == key)
        };
        let mut fields: Vec<String> = self
            .aux
            .split(',')
            .filter(|field| !field.is_empty() && field.split('=').next() != Some(name))
            .map(String::from)
            .collect();
        if let Some(value) = value {
            let new = alloc::format!("{name}={value}");
            let at = match rank(name) {
                Some(mine) => fields
                    .iter()
                    .position(|field| rank(field).is_some_and(|theirs| theirs > mine))
                    .unwrap_or(fields.len()),
                None => fields.len(),
            };
            fields.insert(at, new);
        }
        self.aux = fields.join(",");
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ip_is_cut_on_a_character_boundary() {
        // 45 ASCII bytes and a 2-byte character: 47 bytes, cut before the character.
        let text = alloc::format!("{}é", "1".repeat(45));
        let ip = NodeIp::new(&text);
        assert_eq!(ip.len(), 45);
        assert_eq!(ip.as_bytes(), "1".repeat(45).as_bytes());
        assert_eq!(NodeIp::new("::1"), "::1");
    }

    #[test]
    fn a_wire_field_that_is_not_utf8_is_replaced_and_still_fits() {
        // Each invalid byte becomes U+FFFD (3 bytes): 46 of them would be 138 bytes.
        let ip = NodeIp::from_wire(&[0xff; NodeIp::MAX_LEN]);
        assert_eq!(ip.len(), 45, "15 whole replacement characters");
        assert!(ip.chars().all(|c| c == char::REPLACEMENT_CHARACTER));
        let full = NodeIp::from_wire(&[b'7'; NodeIp::MAX_LEN]);
        assert_eq!(full.len(), NodeIp::MAX_LEN, "a full field is kept whole");
    }
}
