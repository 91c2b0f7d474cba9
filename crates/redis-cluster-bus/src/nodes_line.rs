//! One line of `CLUSTER NODES` or nodes.conf, read in place: the text form of what the bus
//! carries about a node (its id, address, flags, master, epochs and slots).
//!
//! [`NodesLine::parse`] splits a line into its fields and reads the ones whose grammar is
//! the same for every reader (the address, the slot tokens); what a field means, and how
//! strict to be about it, is the caller's: a node loading its nodes.conf refuses an unknown
//! flag, a client building a slot map skips failed nodes. Both fold over this one reader.
//!
//! The writing side is the same types' `Display`: a [`NodesLine`] writes itself back, and a
//! node writing its own lines puts a [`NodeAddress`] and [`SlotToken`]s (with the flags'
//! own `Display`) between the plain fields.

use core::fmt;

use redis_hash_slot::{Slot, SlotRange};

use crate::{NodeFlags, NodeId};

/// Why a line is not a `CLUSTER NODES` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodesLineError {
    /// Fewer than the 8 fields every line has.
    Fields,
    /// The address is not `ip:port[@cport][,hostname…]`.
    Address,
    /// A slot token that is neither a slot, a range nor an open-slot mark.
    Slot,
    /// An open-slot mark (`[slot->-id]`, `[slot-<-id]`) that does not parse.
    OpenSlot,
}

impl NodesLineError {
    /// What is wrong, as a static text (the `Display`), for errors that carry a `&'static str`.
    pub const fn what(self) -> &'static str {
        match self {
            Self::Fields => "fewer than 8 fields",
            Self::Address => "bad address",
            Self::Slot => "bad slot",
            Self::OpenSlot => "bad open slot",
        }
    }
}

impl fmt::Display for NodesLineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.what())
    }
}

impl core::error::Error for NodesLineError {}

/// A node's address as `CLUSTER NODES` writes it: `ip:port@cport`, then `,hostname` when it
/// has one, and in nodes.conf of newer servers the aux fields after that.
///
/// ```
/// use redis_cluster_bus::NodeAddress;
///
/// let a = NodeAddress::parse("127.0.0.1:7105@17105,node-7105.test,tls-port=0").unwrap();
/// assert_eq!((a.ip, a.port, a.cport), ("127.0.0.1", 7105, Some(17105)));
/// assert_eq!((a.hostname, a.aux), (Some("node-7105.test"), "tls-port=0"));
/// let old = NodeAddress::parse(":7000").unwrap();
/// assert_eq!((old.ip, old.cport, old.bus_port()), ("", None, 17000));
/// assert!(NodeAddress::parse("127.0.0.1").is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeAddress<'a> {
    /// The IP, empty when the node does not know it yet.
    pub ip: &'a str,
    /// The client port.
    pub port: u16,
    /// The bus port, when written (Redis before 4.0 did not).
    pub cport: Option<u16>,
    /// The announced hostname, when not empty.
    pub hostname: Option<&'a str>,
    /// The aux fields after the hostname (nodes.conf of Redis 7.2+ and Valkey:
    /// `shard-id=…`, `tls-port=…`), empty when none.
    pub aux: &'a str,
}

impl<'a> NodeAddress<'a> {
    /// Reads an address field (`ip:port[@cport][,hostname[,aux…]]`; an IPv6 IP is written
    /// bare, the port after its last colon).
    pub fn parse(text: &'a str) -> Option<Self> {
        let (address, extra) = match text.split_once(',') {
            Some((address, extra)) => (address, Some(extra)),
            None => (text, None),
        };
        let (hostname, aux) = match extra {
            Some(extra) => extra.split_once(',').unwrap_or((extra, "")),
            None => ("", ""),
        };
        let (address, cport) = match address.split_once('@') {
            Some((address, cport)) => (address, Some(cport.parse().ok()?)),
            None => (address, None),
        };
        let (ip, port) = address.rsplit_once(':')?;
        Some(Self {
            ip,
            port: port.parse().ok()?,
            cport,
            hostname: (!hostname.is_empty()).then_some(hostname),
            aux,
        })
    }

    /// The bus port: as written, else the client port + 10000.
    pub fn bus_port(&self) -> u16 {
        self.cport.unwrap_or(self.port.wrapping_add(10000))
    }
}

/// One slot token of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotToken<'a> {
    /// Slots the node serves: `5` or `0-5460`.
    Range(SlotRange),
    /// `[slot->-id]`: on the owner's own line, the slot migrates to `id`.
    Migrating(Slot, &'a str),
    /// `[slot-<-id]`: on the importer's own line, the slot comes from `id`.
    Importing(Slot, &'a str),
}

/// A `CLUSTER NODES` / nodes.conf line, its fields split (runs of spaces count as one).
///
/// ```
/// use redis_cluster_bus::{NodeFlags, NodesLine, SlotToken};
///
/// let line = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 \
///             myself,master - 0 1426238317239 1 connected 0-5460 [93->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]";
/// let line = NodesLine::parse(line)?;
/// assert_eq!(line.node_flags(), Some(NodeFlags::MYSELF | NodeFlags::MASTER));
/// assert_eq!(line.master, None);
/// assert_eq!(line.address.port, 30001);
/// let slots: Vec<SlotToken> = line.slots().collect::<Result<_, _>>()?;
/// assert_eq!(slots.len(), 2);
/// assert!(matches!(slots[1], SlotToken::Migrating(slot, _) if slot.get() == 93));
/// # Ok::<(), redis_cluster_bus::NodesLineError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodesLine<'a> {
    /// The node id, as written.
    pub id: &'a str,
    /// The address field.
    pub address: NodeAddress<'a>,
    /// The flags field, as written (`myself,master`).
    pub flags: &'a str,
    /// The master's id for a replica; `None` for `-`.
    pub master: Option<&'a str>,
    /// When the last ping was sent (ms, 0 for none), as written.
    pub ping_sent: &'a str,
    /// When the last pong arrived (ms), as written.
    pub pong_received: &'a str,
    /// The config epoch, as written.
    pub config_epoch: &'a str,
    /// `connected` or `disconnected`.
    pub link_state: &'a str,
    /// The slot tokens, read by [`NodesLine::slots`].
    rest: &'a str,
}

impl<'a> NodesLine<'a> {
    /// Splits `line` into its fields and reads its address.
    pub fn parse(line: &'a str) -> Result<Self, NodesLineError> {
        let mut rest = line;
        let mut next = || {
            rest = rest.trim_start_matches(' ');
            if rest.is_empty() {
                return Err(NodesLineError::Fields);
            }
            let (field, after) = rest.split_at(rest.find(' ').unwrap_or(rest.len()));
            rest = after;
            Ok(field)
        };
        let (id, address, flags, master) = (next()?, next()?, next()?, next()?);
        let (ping_sent, pong_received, config_epoch, link_state) =
            (next()?, next()?, next()?, next()?);
        let address = NodeAddress::parse(address).ok_or(NodesLineError::Address)?;
        Ok(Self {
            id,
            address,
            flags,
            master: (master != "-").then_some(master),
            ping_sent,
            pong_received,
            config_epoch,
            link_state,
            rest,
        })
    }

    /// The id, when it is 40 hex digits.
    pub fn node_id(&self) -> Option<NodeId> {
        self.id.parse().ok()
    }

    /// A node id written in a line (the master field, an open-slot mark), when it is 40 hex
    /// digits.
    pub fn id_of(text: &str) -> Option<NodeId> {
        text.parse().ok()
    }

    /// The master's id, when given and 40 hex digits; `Some(None)` for `-`.
    pub fn master_id(&self) -> Option<Option<NodeId>> {
        match self.master {
            None => Some(None),
            Some(master) => master.parse().ok().map(Some),
        }
    }

    /// The flags, when every name is one the server writes.
    pub fn node_flags(&self) -> Option<NodeFlags> {
        NodeFlags::from_cluster_nodes(self.flags)
    }

    /// Whether the flags field names `flag` (`"fail"`, `"handshake"`, …), unknown names
    /// allowed: for lenient readers.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.split(',').any(|f| f == flag)
    }

    /// The slot tokens, in order.
    pub fn slots(&self) -> impl Iterator<Item = Result<SlotToken<'a>, NodesLineError>> + 'a {
        self.rest
            .split(' ')
            .filter(|t| !t.is_empty())
            .map(slot_token)
    }
}

impl fmt::Display for NodeAddress<'_> {
    /// As the servers write it: `ip:port`, `@cport` when there is one, then `,hostname`
    /// when there is one or aux fields follow (which nodes.conf of newer servers keeps, and
    /// `CLUSTER NODES` leaves out: a caller writing that clears `aux`).
    ///
    /// ```
    /// use redis_cluster_bus::NodeAddress;
    ///
    /// for text in ["127.0.0.1:7000@17000", "10.0.0.1:7001@17001,,shard-id=ab", ":7002"] {
    ///     assert_eq!(NodeAddress::parse(text).map(|a| a.to_string()).as_deref(), Some(text));
    /// }
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.ip, self.port)?;
        if let Some(cport) = self.cport {
            write!(f, "@{cport}")?;
        }
        if self.hostname.is_some() || !self.aux.is_empty() {
            write!(f, ",{}", self.hostname.unwrap_or_default())?;
        }
        if !self.aux.is_empty() {
            write!(f, ",{}", self.aux)?;
        }
        Ok(())
    }
}

impl fmt::Display for SlotToken<'_> {
    /// `5`, `0-5460`, `[93->-id]` or `[93-<-id]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Range(range) => write!(f, "{range}"),
            Self::Migrating(slot, to) => write!(f, "[{slot}->-{to}]"),
            Self::Importing(slot, from) => write!(f, "[{slot}-<-{from}]"),
        }
    }
}

impl fmt::Display for NodesLine<'_> {
    /// The line again: its fields as read, one space apart, then its slot tokens as
    /// written (a run of spaces between fields is written as one).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} {} {} {} {}",
            self.id,
            self.address,
            self.flags,
            self.master.unwrap_or("-"),
            self.ping_sent,
            self.pong_received,
            self.config_epoch,
            self.link_state
        )?;
        for token in self.rest.split(' ').filter(|t| !t.is_empty()) {
            write!(f, " {token}")?;
        }
        Ok(())
    }
}

fn slot_token(token: &str) -> Result<SlotToken<'_>, NodesLineError> {
    let Some(mark) = token.strip_prefix('[') else {
        return SlotRange::from_ascii(token.as_bytes())
            .map(SlotToken::Range)
            .map_err(|_| NodesLineError::Slot);
    };
    let mark = mark.strip_suffix(']').ok_or(NodesLineError::OpenSlot)?;
    let (slot, migrating, id) = if let Some((slot, id)) = mark.split_once("->-") {
        (slot, true, id)
    } else if let Some((slot, id)) = mark.split_once("-<-") {
        (slot, false, id)
    } else {
        return Err(NodesLineError::OpenSlot);
    };
    let slot = slot
        .parse()
        .ok()
        .and_then(Slot::new)
        .ok_or(NodesLineError::OpenSlot)?;
    Ok(match migrating {
        true => SlotToken::Migrating(slot, id),
        false => SlotToken::Importing(slot, id),
    })
}
