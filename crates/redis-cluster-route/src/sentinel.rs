//! Replies a proxy reads to follow Sentinel failovers: `SENTINEL get-master-addr-by-name`,
//! `SENTINEL replicas`, `ROLE`, and the `+switch-master` event.

use alloc::{string::String, vec::Vec};

use redis_resp::Frame;

use crate::frame::{self, field, items};

/// A host and port, as Sentinel and ROLE give them: the bus crate's, the one address type
/// of every crate.
pub use redis_cluster_bus::Address;

/// What `ROLE` says a server is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// A master: its replication offset and its replicas (address and acknowledged offset).
    Master {
        /// The master replication offset.
        offset: i64,
        /// Each replica's address and offset.
        replicas: Vec<(Address, i64)>,
    },
    /// A replica: its master, the link state (`connect`, `connecting`, `sync`,
    /// `connected`…) and the offset received.
    Replica {
        /// The master it replicates.
        master: Address,
        /// The replication link state.
        state: String,
        /// The offset received, -1 before the first sync.
        offset: i64,
    },
    /// A Sentinel and the masters it monitors.
    Sentinel {
        /// The master names.
        masters: Vec<String>,
    },
}

/// A `+switch-master` event: Sentinel moved `name` from `old` to `new`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchMaster {
    /// The master name.
    pub name: String,
    /// Its previous address.
    pub old: Address,
    /// Its new address.
    pub new: Address,
}

/// A replica as `SENTINEL replicas` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentinelReplica {
    /// Its address.
    pub address: Address,
    /// Its flags (`slave`, `s_down`, `o_down`, `disconnected`…).
    pub flags: Vec<String>,
    /// `master-link-status`: `ok` or `err`.
    pub master_link_ok: bool,
}

impl SentinelReplica {
    /// Whether it is usable for reads: no down or disconnected flag, and its link to the
    /// master up.
    pub fn is_healthy(&self) -> bool {
        self.master_link_ok
            && !self
                .flags
                .iter()
                .any(|f| matches!(f.as_str(), "s_down" | "o_down" | "disconnected"))
    }
}

/// Why a reply is not what the command replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unexpected {0} reply")]
pub struct SentinelError(pub &'static str);

fn text<B: AsRef<[u8]>>(frame: &Frame<B>) -> Option<String> {
    frame::text(frame).map(|s| String::from_utf8_lossy(s).into_owned())
}

/// An integer, or (as ROLE gives a replica's offsets in a master's list) a decimal string.
fn int<B: AsRef<[u8]>>(frame: &Frame<B>) -> Option<i64> {
    frame::int(frame).or_else(|| core::str::from_utf8(frame::text(frame)?).ok()?.parse().ok())
}

fn address<B: AsRef<[u8]>>(host: &Frame<B>, port: &Frame<B>) -> Option<Address> {
    Some(Address {
        host: text(host)?,
        port: u16::try_from(int(port)?).ok()?,
    })
}

/// `SENTINEL get-master-addr-by-name <name>`: the master's address, `None` when Sentinel
/// does not know the name (a null reply).
pub fn master_addr<B: AsRef<[u8]>>(reply: &Frame<B>) -> Result<Option<Address>, SentinelError> {
    const WHAT: SentinelError = SentinelError("get-master-addr-by-name");
    match reply {
        Frame::NullArray | Frame::NullBulkString | Frame::Null => Ok(None),
        _ => match items(reply) {
            Some([host, port]) => address(host, port).map(Some).ok_or(WHAT),
            _ => Err(WHAT),
        },
    }
}

/// `ROLE`.
pub fn role<B: AsRef<[u8]>>(reply: &Frame<B>) -> Result<Role, SentinelError> {
    const WHAT: SentinelError = SentinelError("ROLE");
    let fields = items(reply).ok_or(WHAT)?;
    let kind = fields.first().and_then(text).ok_or(WHAT)?;
    match (kind.as_str(), fields) {
        ("master", [_, offset, replicas]) => Ok(Role::Master {
            offset: int(offset).ok_or(WHAT)?,
            replicas: items(replicas)
                .ok_or(WHAT)?
                .iter()
                .map(|replica| match items(replica) {
                    Some([host, port, offset]) => Some((address(host, port)?, int(offset)?)),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .ok_or(WHAT)?,
        }),
        ("slave", [_, host, port, state, offset]) => Ok(Role::Replica {
            master: address(host, port).ok_or(WHAT)?,
            state: text(state).ok_or(WHAT)?,
            offset: int(offset).ok_or(WHAT)?,
        }),
        ("sentinel", [_, masters]) => Ok(Role::Sentinel {
            masters: items(masters)
                .ok_or(WHAT)?
                .iter()
                .map(text)
                .collect::<Option<Vec<_>>>()
                .ok_or(WHAT)?,
        }),
        _ => Err(WHAT),
    }
}

/// `SENTINEL replicas <name>` (or the older `SENTINEL slaves`).
pub fn replicas<B: AsRef<[u8]>>(reply: &Frame<B>) -> Result<Vec<SentinelReplica>, SentinelError> {
    const WHAT: SentinelError = SentinelError("SENTINEL replicas");
    items(reply)
        .ok_or(WHAT)?
        .iter()
        .map(|entry| {
            let host = field(entry, "ip")?;
            let port = field(entry, "port")?;
            let flags = field(entry, "flags").and_then(text).unwrap_or_default();
            let link = field(entry, "master-link-status").and_then(text);
            Some(SentinelReplica {
                address: address(host, port)?,
                flags: flags
                    .split(',')
                    .filter(|f| !f.is_empty())
                    .map(String::from)
                    .collect(),
                master_link_ok: link.as_deref() == Some("ok"),
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or(WHAT)
}

/// A `+switch-master` event, from the pub/sub message (`message`, channel, payload; RESP2
/// array or RESP3 push) or from its payload alone; `None` for any other message.
pub fn switch_master<B: AsRef<[u8]>>(message: &Frame<B>) -> Option<SwitchMaster> {
    let payload = match items(message) {
        Some([kind, channel, payload])
            if text(kind).as_deref() == Some("message")
                && text(channel).as_deref() == Some("+switch-master") =>
        {
            text(payload)?
        }
        Some(_) => return None,
        None => text(message)?,
    };
    let mut words = payload.split(' ');
    let mut next = || words.next();
    let name = String::from(next()?);
    let addr = |host: Option<&str>, port: Option<&str>| {
        Some(Address {
            host: String::from(host?),
            port: port?.parse().ok()?,
        })
    };
    let old = addr(next(), next())?;
    let new = addr(next(), next())?;
    Some(SwitchMaster { name, old, new })
}
