//! PING, PONG and MEET (format sections 6 and 8): gossip entries, then ping extensions.

use alloc::vec::Vec;

use crate::{
    codes::MessageFlags,
    error::BusError,
    ext::{Dialect, Extension, Extensions, OwnedExtension},
    gossip::{GOSSIP_LEN, Gossip, OwnedGossip},
    header::{HEADER_LEN, Header},
};

/// A PING, PONG or MEET, read in place; its header's type says which.
#[derive(Clone, Copy, Debug)]
pub struct Ping<'a> {
    header: Header<'a>,
    gossip: &'a [u8],
    extensions: &'a [u8],
    extension_count: u16,
}

impl<'a> Ping<'a> {
    /// Validates the body after `header` as the servers do (`clusterIsValidPacket`): `count`
    /// entries of 104 bytes, then, when EXT_DATA is set, `extensions` ping extensions, each a
    /// multiple of 8 long, at least its own 8-byte header, below 65536 (the servers keep 16
    /// bits of it) and inside the message; then nothing more.
    pub(crate) fn decode(header: Header<'a>, body: &'a [u8]) -> Result<Self, BusError> {
        let totlen = header.totlen();
        let gossip_len = usize::from(header.count()) * GOSSIP_LEN;
        let Some((gossip, extensions)) = body.split_at_checked(gossip_len) else {
            return Err(BusError::wrong_length(
                header.kind(),
                totlen,
                HEADER_LEN + gossip_len,
            ));
        };
        // Without EXT_DATA the extensions count is not looked at (Redis 7.0 and later).
        let extension_count = if header.message_flags().contains(MessageFlags::EXT_DATA) {
            header.extensions()
        } else {
            0
        };
        let mut rest = extensions;
        for index in 0..extension_count {
            let len = rest
                .first_chunk::<4>()
                .map(|l| u32::from_be_bytes(*l) as usize)
                .ok_or(BusError::BadExtension { index, len: 0 })?;
            if len % 8 != 0 || len < Extension::HEADER_LEN || len > usize::from(u16::MAX) {
                return Err(BusError::BadExtension { index, len });
            }
            rest = rest
                .get(len..)
                .ok_or(BusError::BadExtension { index, len })?;
        }
        if !rest.is_empty() {
            let expected = HEADER_LEN + body.len() - rest.len();
            return Err(BusError::wrong_length(header.kind(), totlen, expected));
        }
        Ok(Self {
            header,
            gossip,
            extensions,
            extension_count,
        })
    }

    /// The header.
    #[inline]
    pub const fn header(&self) -> Header<'a> {
        self.header
    }

    /// The gossip entries.
    #[inline]
    pub fn gossip(&self) -> Gossip<'a> {
        Gossip::new(self.gossip)
    }

    /// The ping extensions: `header().extensions()` of them when EXT_DATA is set, else none.
    #[inline]
    pub const fn extensions(&self) -> Extensions<'a> {
        Extensions::new(self.extensions, self.extension_count)
    }

    /// The body, copied into a value that encodes to the same bytes.
    pub fn to_owned_body(&self) -> OwnedPing {
        OwnedPing {
            gossip: self.gossip().map(|entry| *entry.as_bytes()).collect(),
            extensions: {
                let dialect = Dialect::of_sender(self.header.flags());
                self.extensions()
                    .map(|ext| OwnedExtension::from_view_in(ext, dialect))
                    .collect()
            },
        }
    }
}

/// The body of a PING, PONG or MEET to send. Encoding writes `count` and `extensions` into
/// the header and sets EXT_DATA when there are extensions.
///
/// The gossip entries are kept back to back in their wire form, so that encoding copies them
/// all at once (`benches/bus.rs`: one copy per entry cost 4.1× the copy of the message at 100
/// entries, against the goal of 3×).
///
/// ```
/// use redis_cluster_bus::{NodeId, OwnedGossip, OwnedPing};
///
/// let node = NodeId(*b"e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca");
/// let ping = OwnedPing::default().with_gossip([OwnedGossip::new(node).with_port(7001)]);
/// assert_eq!(ping.gossip().len(), 1);
/// assert_eq!(ping.gossip().next().map(|g| g.port()), Some(7001));
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct OwnedPing {
    gossip: Vec<[u8; GOSSIP_LEN]>,
    /// The ping extensions.
    pub extensions: Vec<OwnedExtension>,
}

impl OwnedPing {
    /// The body with `gossip` added after the entries it has.
    pub fn with_gossip(mut self, gossip: impl IntoIterator<Item = OwnedGossip>) -> Self {
        self.gossip
            .extend(gossip.into_iter().map(|entry| *entry.as_bytes()));
        self
    }

    /// The body with `extensions` added after the ones it has.
    pub fn with_extensions(mut self, extensions: impl IntoIterator<Item = OwnedExtension>) -> Self {
        self.extensions.extend(extensions);
        self
    }

    /// Makes room for `additional` more gossip entries (one allocation for a section built
    /// entry by entry).
    #[inline]
    pub fn reserve_gossip(&mut self, additional: usize) {
        self.gossip.reserve(additional);
    }

    /// Adds a gossip entry.
    #[inline]
    pub fn push_gossip(&mut self, entry: OwnedGossip) {
        self.gossip.push(*entry.as_bytes());
    }

    /// Removes every gossip entry.
    pub fn clear_gossip(&mut self) {
        self.gossip.clear();
    }

    /// The gossip entries, read as from a received message.
    pub fn gossip(&self) -> Gossip<'_> {
        Gossip::new(self.gossip.as_flattened())
    }

    pub(crate) fn encoded_len(&self) -> usize {
        self.gossip.len() * GOSSIP_LEN
            + self
                .extensions
                .iter()
                .map(OwnedExtension::encoded_len)
                .sum::<usize>()
    }

    /// `count` and the extensions count as the header carries them.
    pub(crate) fn counts(&self) -> (u16, u16) {
        let narrow = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
        (narrow(self.gossip.len()), narrow(self.extensions.len()))
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.gossip.as_flattened());
        for ext in &self.extensions {
            ext.encode(out);
        }
    }
}

impl core::fmt::Debug for OwnedPing {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        struct Entries<'a>(Gossip<'a>);
        impl core::fmt::Debug for Entries<'_> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_list().entries(self.0.clone()).finish()
            }
        }
        f.debug_struct("OwnedPing")
            .field("gossip", &Entries(self.gossip()))
            .field("extensions", &self.extensions)
            .finish()
    }
}
