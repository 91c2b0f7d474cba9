//! [`Message`]: one whole bus message, validated as the servers validate it and read in place,
//! and [`OwnedMessage`], one to send. Each body layout has its module, with its view, its
//! owned form, its decoding and its encoding; the two enums tie them together.

mod fail;
mod failover;
mod module;
mod ping;
mod publish;
mod unknown;
mod update;

use alloc::vec::Vec;

pub use fail::{Fail, OwnedFail};
pub use failover::Failover;
pub use module::{Module, OwnedModule};
pub use ping::{OwnedPing, Ping};
pub use publish::{OwnedPublish, Publish};
pub use unknown::Unknown;
pub use update::{OwnedUpdate, Update};

use crate::{
    codes::MessageType,
    error::BusError,
    header::{HEADER_LEN, Header, LIGHT_HEADER_LEN, OwnedHeader, SIGNATURE, VERSION},
};

/// A validated message, every field read in place from the bytes it was decoded from.
///
/// ```
/// use redis_cluster_bus::{Message, MessageType, OwnedHeader, OwnedMessage, OwnedPing};
/// # use redis_cluster_bus::{NodeFlags, NodeId};
/// # let header = OwnedHeader {
/// #     port: 7000, current_epoch: 1, config_epoch: 1, offset: 0,
/// #     sender: NodeId(*b"e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca"),
/// #     myslots: Default::default(), replicaof: NodeId::NONE, myip: b"127.0.0.1".to_vec(),
/// #     pport: 0, cport: 17000, flags: NodeFlags::MASTER, state: 0, mflags: [0; 3],
/// # };
///
/// let mut wire = Vec::new();
/// OwnedMessage::new(MessageType::PING, header, OwnedPing::default()).encode(&mut wire);
/// let Message::Ping(ping) = Message::decode(&wire)? else { unreachable!() };
/// assert_eq!(ping.header().port(), 7000);
/// assert_eq!(ping.gossip().len(), 0);
/// # Ok::<(), redis_cluster_bus::BusError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Message<'a> {
    /// PING, PONG or MEET.
    Ping(Ping<'a>),
    /// FAIL.
    Fail(Fail<'a>),
    /// PUBLISH or PUBLISHSHARD, normal or light header.
    Publish(Publish<'a>),
    /// UPDATE.
    Update(Update<'a>),
    /// MODULE, normal or light header.
    Module(Module<'a>),
    /// FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK or MFSTART.
    Failover(Failover<'a>),
    /// A type this crate does not know, taken as well formed, as the servers do.
    Unknown(Unknown<'a>),
}

impl<'a> Message<'a> {
    /// Validates the message that is exactly `bytes` (as [`crate::Framer`] delimits it) by
    /// the servers' rules (format section 9), and reads it in place.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, BusError> {
        let Some(head) = bytes.first_chunk::<LIGHT_HEADER_LEN>() else {
            return Err(BusError::Truncated { len: bytes.len() });
        };
        // Section 9, in the servers' order: signature, totlen against what was read, version.
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
            // Section 7: a light header is valid on PUBLISH, PUBLISHSHARD and MODULE only.
            let body = bytes.get(LIGHT_HEADER_LEN..).unwrap_or_default();
            return match kind.base() {
                MessageType::PUBLISH | MessageType::PUBLISHSHARD => {
                    Publish::decode(None, kind.base(), body, totlen).map(Self::Publish)
                }
                MessageType::MODULE => Module::decode(None, body, totlen).map(Self::Module),
                _ => Err(BusError::BadLightType(kind.0)),
            };
        }
        let Some((header, body)) = bytes.split_first_chunk::<HEADER_LEN>() else {
            let min = HEADER_LEN as u32;
            return Err(BusError::TooShort { totlen, min });
        };
        let header = Header::new(header);
        // Section 9: the length each type calls for, checked by each body's decoder.
        Ok(match kind {
            MessageType::PING | MessageType::PONG | MessageType::MEET => {
                Self::Ping(Ping::decode(header, body)?)
            }
            MessageType::FAIL => Self::Fail(Fail::decode(header, body)?),
            MessageType::PUBLISH | MessageType::PUBLISHSHARD => {
                Self::Publish(Publish::decode(Some(header), kind, body, totlen)?)
            }
            MessageType::UPDATE => Self::Update(Update::decode(header, body)?),
            MessageType::MODULE => Self::Module(Module::decode(Some(header), body, totlen)?),
            MessageType::FAILOVER_AUTH_REQUEST
            | MessageType::FAILOVER_AUTH_ACK
            | MessageType::MFSTART => Self::Failover(Failover::decode(header, body)?),
            _ => Self::Unknown(Unknown::decode(header, body)),
        })
    }

    /// The type as on the wire: the light bit is set for a light-header message, so
    /// [`MessageType::name`] gives `PUBLISH_LIGHT` and the like.
    #[inline]
    pub fn kind(&self) -> MessageType {
        let (base, header) = match self {
            Self::Publish(publish) => (publish.kind(), publish.header()),
            Self::Module(module) => (MessageType::MODULE, module.header()),
            _ => return self.header().map_or(MessageType(0), Header::kind),
        };
        match header {
            Some(_) => base,
            None => MessageType(base.0 | MessageType::LIGHT),
        }
    }

    /// The normal header, or `None` for a light one.
    #[inline]
    pub fn header(&self) -> Option<Header<'a>> {
        match self {
            Self::Ping(ping) => Some(ping.header()),
            Self::Fail(fail) => Some(fail.header()),
            Self::Publish(publish) => publish.header(),
            Self::Update(update) => Some(update.header()),
            Self::Module(module) => module.header(),
            Self::Failover(failover) => Some(failover.header()),
            Self::Unknown(unknown) => Some(unknown.header()),
        }
    }

    /// The message, copied into owned values that encode to the same bytes.
    pub fn to_owned_message(&self) -> OwnedMessage {
        let body = match self {
            Self::Ping(ping) => OwnedBody::Ping(ping.to_owned_body()),
            Self::Fail(fail) => OwnedBody::Fail(fail.to_owned_body()),
            Self::Publish(publish) => OwnedBody::Publish(publish.to_owned_body()),
            Self::Update(update) => OwnedBody::Update(update.to_owned_body()),
            Self::Module(module) => OwnedBody::Module(module.to_owned_body()),
            Self::Failover(_) => OwnedBody::Failover,
            Self::Unknown(unknown) => OwnedBody::Unknown(unknown.body().to_vec()),
        };
        OwnedMessage {
            kind: self.kind().base(),
            header: self.header().map(OwnedHeader::from_view),
            body,
        }
    }
}

/// The body of a message to send.
// UPDATE carries a 2 KiB slot set inline, as the header does: a message is built and encoded
// one at a time, and a box would cost an allocation for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedBody {
    /// PING, PONG or MEET.
    Ping(OwnedPing),
    /// FAIL.
    Fail(OwnedFail),
    /// PUBLISH or PUBLISHSHARD.
    Publish(OwnedPublish),
    /// UPDATE.
    Update(OwnedUpdate),
    /// MODULE.
    Module(OwnedModule),
    /// FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK or MFSTART: no body.
    Failover,
    /// An unknown type's body, as received.
    Unknown(Vec<u8>),
}

impl OwnedBody {
    fn encoded_len(&self) -> usize {
        match self {
            Self::Ping(ping) => ping.encoded_len(),
            Self::Fail(_) => OwnedFail::ENCODED_LEN,
            Self::Publish(publish) => publish.encoded_len(),
            Self::Update(_) => OwnedUpdate::ENCODED_LEN,
            Self::Module(module) => module.encoded_len(),
            Self::Failover => 0,
            Self::Unknown(body) => body.len(),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Self::Ping(ping) => ping.encode(out),
            Self::Fail(fail) => fail.encode(out),
            Self::Publish(publish) => publish.encode(out),
            Self::Update(update) => update.encode(out),
            Self::Module(module) => module.encode(out),
            Self::Failover => {}
            Self::Unknown(body) => out.extend_from_slice(body),
        }
    }
}

/// A whole message to send: its type, its header (`None` for Valkey's light header, which
/// only PUBLISH, PUBLISHSHARD and MODULE may have) and its body. [`OwnedMessage::encode`]
/// computes `totlen`, `count` and the extensions count, and sets EXT_DATA when extensions are
/// written, so a program gives only what it chooses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedMessage {
    /// The type, without the light bit (encoding sets it when `header` is `None`).
    pub kind: MessageType,
    /// The header, or `None` for a light header.
    pub header: Option<OwnedHeader>,
    /// The body.
    pub body: OwnedBody,
}

impl OwnedMessage {
    /// A message with a normal header.
    #[inline]
    pub fn new(kind: MessageType, header: OwnedHeader, body: impl Into<OwnedBody>) -> Self {
        Self {
            kind,
            header: Some(header),
            body: body.into(),
        }
    }

    /// How many bytes [`OwnedMessage::encode`] writes: the message's `totlen`.
    pub fn encoded_len(&self) -> usize {
        let header = match self.header {
            Some(_) => HEADER_LEN,
            None => LIGHT_HEADER_LEN,
        };
        header + self.body.encoded_len()
    }

    /// Appends the message to `out`. A `myip` or gossip `ip` longer than its 46-byte field
    /// is cut to it; more than 65535 gossip entries or extensions make a message the servers
    /// reject, as would a message longer than 4 GiB.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let totlen = self.encoded_len();
        out.reserve(totlen);
        let start = out.len();
        out.extend_from_slice(&SIGNATURE);
        out.extend_from_slice(&(totlen as u32).to_be_bytes());
        out.extend_from_slice(&VERSION.to_be_bytes());
        match &self.header {
            None => {
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&(self.kind.0 | MessageType::LIGHT).to_be_bytes());
                out.extend_from_slice(&[0, 0]);
            }
            Some(header) => {
                let (count, extensions) = match &self.body {
                    OwnedBody::Ping(ping) => ping.counts(),
                    _ => (0, 0),
                };
                header.encode_rest(self.kind, count, extensions, out);
            }
        }
        self.body.encode(out);
        debug_assert_eq!(out.len() - start, totlen);
    }
}

macro_rules! into_body {
    ($($owned:ident => $variant:ident),*) => {$(
        impl From<$owned> for OwnedBody {
            fn from(body: $owned) -> Self {
                Self::$variant(body)
            }
        }
    )*};
}

into_body!(
    OwnedPing => Ping,
    OwnedFail => Fail,
    OwnedPublish => Publish,
    OwnedUpdate => Update,
    OwnedModule => Module
);
