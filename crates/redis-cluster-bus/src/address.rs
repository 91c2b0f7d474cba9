//! [`Address`]: where a node is reached, a host and a port, as every reply that names a node
//! gives it (MOVED and ASK, CLUSTER SLOTS, SENTINEL, ROLE) and as MIGRATE and CLUSTER MEET
//! take it; `host:port` in text, an IPv6 host in brackets.

use alloc::string::String;
use core::{fmt, str::FromStr};

/// A host (an IP or a hostname) and a port.
///
/// ```
/// use redis_cluster_bus::Address;
///
/// let node: Address = "[::1]:7000".parse()?;
/// assert_eq!(node, Address::new("::1", 7000));
/// assert_eq!(node.to_string(), "[::1]:7000");
/// assert_eq!("127.0.0.1:6379".parse::<Address>()?.port, 6379);
/// assert!("localhost".parse::<Address>().is_err());
/// # Ok::<(), redis_cluster_bus::AddressError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Address {
    /// The IP or hostname, without brackets; empty when unknown.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl Address {
    /// `host` and `port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Text that is not `host:port` (the port after the last colon, a number up to 65535).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not host:port")]
pub struct AddressError;

impl FromStr for Address {
    type Err = AddressError;

    /// Reads `host:port` as `Display` writes it; an IPv6 host may also be bare, as MOVED
    /// writes it (`::1:7000`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (host, port) = text.rsplit_once(':').ok_or(AddressError)?;
        let host = match host.strip_prefix('[') {
            Some(inner) => inner.strip_suffix(']').ok_or(AddressError)?,
            None => host,
        };
        Ok(Self::new(host, port.parse().map_err(|_| AddressError)?))
    }
}
