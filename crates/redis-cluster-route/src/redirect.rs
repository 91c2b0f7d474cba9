//! The cluster errors a client or proxy must act on: MOVED, ASK, TRYAGAIN, CLUSTERDOWN,
//! CROSSSLOT, LOADING, READONLY, MASTERDOWN.

use redis_hash_slot::Slot;

/// A redirect: where the slot's keys are now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redirect<'a> {
    /// `MOVED <slot> <host>:<port>`: the slot has a new owner; update the map.
    Moved {
        /// The slot.
        slot: Slot,
        /// The host: an IPv4 or IPv6 address or a hostname; empty when the server does not
        /// know an endpoint for it (`cluster-preferred-endpoint-type unknown-endpoint`, or
        /// `?` for a node without a hostname): then the host of the connection that received
        /// the error.
        host: &'a [u8],
        /// The client port.
        port: u16,
    },
    /// `ASK <slot> <host>:<port>`: this one command goes to the node named, after ASKING;
    /// the map does not change.
    Ask {
        /// The slot.
        slot: Slot,
        /// As for MOVED.
        host: &'a [u8],
        /// The client port.
        port: u16,
    },
}

/// A server error reply sorted by what a cluster client must do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterError<'a> {
    /// MOVED or ASK.
    Redirect(Redirect<'a>),
    /// `TRYAGAIN`: a multi-key command during a slot migration; retry after a short wait.
    TryAgain,
    /// `CLUSTERDOWN …`: the cluster (or the slot) is not served; the text says which.
    ClusterDown(&'a [u8]),
    /// `CROSSSLOT`: the keys are in different slots; the command must be split or refused.
    CrossSlot,
    /// `LOADING`: the node is loading its dataset; retry later or elsewhere.
    Loading,
    /// `READONLY`: a write reached a replica (outside cluster mode: a stale master address).
    ReadOnly,
    /// `MASTERDOWN`: a replica lost its master and does not serve stale data.
    MasterDown,
    /// Any other error: the command's own, for the client.
    Other,
}

impl<'a> ClusterError<'a> {
    /// Sorts the text of an error reply (without its `-`, as
    /// `redis_resp::Frame::SimpleError` holds it). A MOVED or ASK that does not parse is
    /// [`ClusterError::Other`].
    ///
    /// ```
    /// use redis_cluster_route::{ClusterError, Redirect};
    ///
    /// let ClusterError::Redirect(Redirect::Moved { slot, host, port }) =
    ///     ClusterError::parse(b"MOVED 3999 ::1:6381")
    /// else {
    ///     panic!("a MOVED")
    /// };
    /// assert_eq!((u16::from(slot), host, port), (3999, &b"::1"[..], 6381));
    /// assert_eq!(ClusterError::parse(b"TRYAGAIN Multiple keys request during rehashing of slot"),
    ///            ClusterError::TryAgain);
    /// ```
    pub fn parse(error: &'a [u8]) -> Self {
        let (code, rest) = match error.iter().position(|&b| b == b' ') {
            Some(at) => (&error[..at], &error[at + 1..]),
            None => (error, &[][..]),
        };
        match code {
            b"MOVED" | b"ASK" => match redirect(rest) {
                Some((slot, host, port)) if code == b"MOVED" => {
                    Self::Redirect(Redirect::Moved { slot, host, port })
                }
                Some((slot, host, port)) => Self::Redirect(Redirect::Ask { slot, host, port }),
                None => Self::Other,
            },
            b"TRYAGAIN" => Self::TryAgain,
            b"CLUSTERDOWN" => Self::ClusterDown(rest),
            b"CROSSSLOT" => Self::CrossSlot,
            b"LOADING" => Self::Loading,
            b"READONLY" => Self::ReadOnly,
            b"MASTERDOWN" => Self::MasterDown,
            _ => Self::Other,
        }
    }
}

/// `<slot> <host>:<port>`: the port after the last colon, so that IPv6 hosts keep theirs.
fn redirect(rest: &[u8]) -> Option<(Slot, &[u8], u16)> {
    let space = rest.iter().position(|&b| b == b' ')?;
    let (slot, address) = (&rest[..space], &rest[space + 1..]);
    let slot = Slot::new(decimal(slot)?.try_into().ok()?)?;
    let colon = address.iter().rposition(|&b| b == b':')?;
    let port = u16::try_from(decimal(&address[colon + 1..])?).ok()?;
    let host = &address[..colon];
    let host = if host == b"?" { &[][..] } else { host };
    Some((slot, host, port))
}

fn decimal(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
}
