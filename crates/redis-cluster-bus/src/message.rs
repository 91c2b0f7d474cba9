//! [`Message`]: one whole bus message, validated as the servers validate it, read in place.

use redis_hash_slot::{BITMAP_LEN, SlotSetView};

use crate::{
    codes::{MessageFlags, MessageType, NodeId},
    error::BusError,
    ext::{Extension, Extensions},
    gossip::{GOSSIP_LEN, Gossip},
    header::{HEADER_LEN, Header, LIGHT_HEADER_LEN, SIGNATURE, VERSION},
};

/// A validated message. Every body field is read in place from the bytes it was decoded from.
#[derive(Clone, Debug)]
pub enum Message<'a> {
    /// PING, PONG or MEET: gossip entries, then ping extensions.
    Gossip {
        /// The header (its type says which of the three).
        header: Header<'a>,
        /// The entries.
        gossip: Gossip<'a>,
        /// The extensions: `header.extensions()` of them when EXT_DATA is set, else none.
        extensions: Extensions<'a>,
    },
    /// FAIL: a node is declared failed.
    Fail {
        /// The header.
        header: Header<'a>,
        /// The failed node.
        node: NodeId,
    },
    /// PUBLISH or PUBLISHSHARD, with a normal header or (Valkey) a light one.
    Publish {
        /// The header, or `None` for a light header.
        header: Option<Header<'a>>,
        /// PUBLISH or PUBLISHSHARD (without the light bit).
        kind: MessageType,
        /// The channel, binary-safe.
        channel: &'a [u8],
        /// The message, binary-safe.
        message: &'a [u8],
    },
    /// UPDATE: who owns which slots, at which config epoch.
    Update {
        /// The header.
        header: Header<'a>,
        /// The owner's config epoch.
        config_epoch: u64,
        /// The owner.
        node: NodeId,
        /// The owner's slots.
        slots: SlotSetView<'a>,
    },
    /// MODULE, with a normal header or (Valkey) a light one.
    Module {
        /// The header, or `None` for a light header.
        header: Option<Header<'a>>,
        /// The module id, in the sender's byte order (little-endian on x86-64 and arm64).
        module_id: [u8; 8],
        /// The module's message type.
        kind: u8,
        /// The payload.
        payload: &'a [u8],
    },
    /// FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK or MFSTART: all in the header.
    Bare {
        /// The header.
        header: Header<'a>,
    },
    /// A type this crate does not know, taken as well formed, as the servers do.
    Unknown {
        /// The header.
        header: Header<'a>,
        /// Everything after the header.
        body: &'a [u8],
    },
}

impl<'a> Message<'a> {
    /// Validates the message that is exactly `bytes` (as [`crate::Framer`] delimits it) by
    /// the servers' rules (format section 9), and reads it in place.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, BusError> {
        let Some(head) = bytes.first_chunk::<LIGHT_HEADER_LEN>() else {
            return Err(BusError::Truncated { len: bytes.len() });
        };
        let signature = [head[0], head[1], head[2], head[3]];
        if signature != SIGNATURE {
            return Err(BusError::BadSignature(signature));
        }
        let totlen = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if totlen as usize != bytes.len() {
            return Err(BusError::LengthMismatch {
                totlen,
                len: bytes.len(),
            });
        }
        let version = u16::from_be_bytes([head[8], head[9]]);
        if version != VERSION {
            return Err(BusError::BadVersion(version));
        }
        let kind = MessageType(u16::from_be_bytes([head[12], head[13]]));
        if kind.is_light() {
            let body = bytes.get(LIGHT_HEADER_LEN..).unwrap_or_default();
            return match kind.base() {
                MessageType::PUBLISH | MessageType::PUBLISHSHARD => {
                    publish(None, kind.base(), body, LIGHT_HEADER_LEN, totlen)
                }
                MessageType::MODULE => module(None, body, LIGHT_HEADER_LEN, totlen),
                _ => Err(BusError::BadLightType(kind.0)),
            };
        }
        let Some((header, body)) = bytes.split_first_chunk::<HEADER_LEN>() else {
            let min = HEADER_LEN as u32;
            return Err(BusError::TooShort { totlen, min });
        };
        let header = Header::new(header);
        let wrong = |expected: usize| BusError::WrongLength {
            kind: kind.0,
            totlen,
            expected: expected.min(u32::MAX as usize) as u32,
        };
        match kind {
            MessageType::PING | MessageType::PONG | MessageType::MEET => {
                let gossip_len = usize::from(header.count()) * GOSSIP_LEN;
                let Some((entries, mut rest)) = body.split_at_checked(gossip_len) else {
                    return Err(wrong(HEADER_LEN + gossip_len));
                };
                let mut expected = HEADER_LEN + gossip_len;
                let count = if header.message_flags().contains(MessageFlags::EXT_DATA) {
                    header.extensions()
                } else {
                    0
                };
                for index in 0..count {
                    let len = rest
                        .first_chunk::<4>()
                        .map(|l| u32::from_be_bytes(*l) as usize)
                        .ok_or(BusError::BadExtension { index, len: 0 })?;
                    // Each length is a multiple of 8, at least the extension's own header,
                    // below 65536 (servers truncate it to 16 bits), and fits.
                    if len % 8 != 0 || len < Extension::HEADER_LEN || len > u16::MAX as usize {
                        return Err(BusError::BadExtension { index, len });
                    }
                    let Some((_, after)) = rest.split_at_checked(len) else {
                        return Err(BusError::BadExtension { index, len });
                    };
                    rest = after;
                    expected += len;
                }
                if expected != bytes.len() {
                    return Err(wrong(expected));
                }
                Ok(Self::Gossip {
                    header,
                    gossip: Gossip::new(entries),
                    extensions: Extensions::new(body.get(gossip_len..).unwrap_or_default(), count),
                })
            }
            MessageType::FAIL => match body.first_chunk::<{ NodeId::LEN }>() {
                Some(node) if body.len() == NodeId::LEN => Ok(Self::Fail {
                    header,
                    node: NodeId(*node),
                }),
                _ => Err(wrong(HEADER_LEN + NodeId::LEN)),
            },
            MessageType::PUBLISH | MessageType::PUBLISHSHARD => {
                publish(Some(header), kind, body, HEADER_LEN, totlen)
            }
            MessageType::UPDATE => {
                const UPDATE_LEN: usize = 8 + NodeId::LEN + BITMAP_LEN;
                if body.len() != UPDATE_LEN {
                    return Err(wrong(HEADER_LEN + UPDATE_LEN));
                }
                let (epoch, rest) = body.split_first_chunk::<8>().ok_or(wrong(HEADER_LEN))?;
                let (node, rest) = rest
                    .split_first_chunk::<{ NodeId::LEN }>()
                    .ok_or(wrong(HEADER_LEN))?;
                let slots = rest.first_chunk::<BITMAP_LEN>().ok_or(wrong(HEADER_LEN))?;
                Ok(Self::Update {
                    header,
                    config_epoch: u64::from_be_bytes(*epoch),
                    node: NodeId(*node),
                    slots: SlotSetView::from_bitmap(slots),
                })
            }
            MessageType::MODULE => module(Some(header), body, HEADER_LEN, totlen),
            MessageType::FAILOVER_AUTH_REQUEST
            | MessageType::FAILOVER_AUTH_ACK
            | MessageType::MFSTART => {
                if body.is_empty() {
                    Ok(Self::Bare { header })
                } else {
                    Err(wrong(HEADER_LEN))
                }
            }
            _ => Ok(Self::Unknown { header, body }),
        }
    }

    /// The type as on the wire: the light bit is set for a light-header message, so
    /// [`MessageType::name`] gives `PUBLISH_LIGHT` and the like.
    pub fn kind(&self) -> MessageType {
        match self {
            Self::Publish {
                header: None, kind, ..
            } => MessageType(kind.0 | MessageType::LIGHT),
            Self::Module { header: None, .. } => {
                MessageType(MessageType::MODULE.0 | MessageType::LIGHT)
            }
            Self::Publish { kind, .. } => *kind,
            Self::Module { .. } => MessageType::MODULE,
            other => other.header().map_or(MessageType(0), |h| h.kind()),
        }
    }

    /// The normal header, or `None` for a light one.
    pub fn header(&self) -> Option<Header<'a>> {
        match self {
            Self::Gossip { header, .. }
            | Self::Fail { header, .. }
            | Self::Update { header, .. }
            | Self::Bare { header }
            | Self::Unknown { header, .. } => Some(*header),
            Self::Publish { header, .. } | Self::Module { header, .. } => *header,
        }
    }
}

/// A PUBLISH or PUBLISHSHARD body after a header of `header_len` bytes.
fn publish<'a>(
    header: Option<Header<'a>>,
    kind: MessageType,
    body: &'a [u8],
    header_len: usize,
    totlen: u32,
) -> Result<Message<'a>, BusError> {
    let wrong = |expected: usize| BusError::WrongLength {
        kind: kind.0,
        totlen,
        expected: expected.min(u32::MAX as usize) as u32,
    };
    let (lens, rest) = body.split_first_chunk::<8>().ok_or(wrong(header_len + 8))?;
    let channel_len = u32::from_be_bytes([lens[0], lens[1], lens[2], lens[3]]) as usize;
    let message_len = u32::from_be_bytes([lens[4], lens[5], lens[6], lens[7]]) as usize;
    let expected = header_len + 8 + channel_len + message_len;
    if rest.len() != channel_len + message_len {
        return Err(wrong(expected));
    }
    let (channel, message) = rest.split_at(channel_len);
    Ok(Message::Publish {
        header,
        kind,
        channel,
        message,
    })
}

/// A MODULE body after a header of `header_len` bytes.
fn module<'a>(
    header: Option<Header<'a>>,
    body: &'a [u8],
    header_len: usize,
    totlen: u32,
) -> Result<Message<'a>, BusError> {
    let wrong = |expected: usize| BusError::WrongLength {
        kind: MessageType::MODULE.0,
        totlen,
        expected: expected.min(u32::MAX as usize) as u32,
    };
    let (module_id, rest) = body
        .split_first_chunk::<8>()
        .ok_or(wrong(header_len + 13))?;
    let (len, rest) = rest
        .split_first_chunk::<4>()
        .ok_or(wrong(header_len + 13))?;
    let (kind, payload) = rest.split_first().ok_or(wrong(header_len + 13))?;
    let len = u32::from_be_bytes(*len) as usize;
    if payload.len() != len {
        return Err(wrong(header_len + 13 + len));
    }
    Ok(Message::Module {
        header,
        module_id: *module_id,
        kind: *kind,
        payload,
    })
}
