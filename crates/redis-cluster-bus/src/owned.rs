//! Owned messages: built by a program or copied out of a [`Message`], encoded byte for byte.

use alloc::vec::Vec;

use redis_hash_slot::SlotSet;

use crate::{
    codes::{MessageFlags, MessageType, NodeFlags, NodeId},
    ext::ExtensionType,
    gossip::GOSSIP_LEN,
    header::{HEADER_LEN, Header, LIGHT_HEADER_LEN, SIGNATURE, VERSION},
    message::Message,
};

/// The fields of a normal header that are not derived from the body. `totlen`, `count` and
/// `extensions` are computed when the message is encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedHeader {
    /// The sender's announced client port.
    pub port: u16,
    /// The sender's current epoch.
    pub current_epoch: u64,
    /// The config epoch of the sender or of its master.
    pub config_epoch: u64,
    /// The replication offset.
    pub offset: u64,
    /// The sender's id.
    pub sender: NodeId,
    /// The slots the sender (or its master) serves.
    pub myslots: SlotSet,
    /// The sender's master, [`NodeId::NONE`] for a master.
    pub replicaof: NodeId,
    /// The announced IP, up to 46 bytes (zero-padded on the wire); empty for none.
    pub myip: Vec<u8>,
    /// The secondary client port.
    pub pport: u16,
    /// The sender's cluster bus port.
    pub cport: u16,
    /// The sender's own flags.
    pub flags: NodeFlags,
    /// 0 ok, 1 fail.
    pub state: u8,
    /// The three `mflags` bytes; EXT_DATA in byte 0 is set when extensions are encoded.
    pub mflags: [u8; 3],
}

/// A gossip entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedGossip {
    /// The node described.
    pub node: NodeId,
    /// Seconds of the sender's unanswered ping to it; 0 for none.
    pub ping_sent: u32,
    /// Seconds of the last pong from it.
    pub pong_received: u32,
    /// Its address, up to 46 bytes (zero-padded on the wire).
    pub ip: Vec<u8>,
    /// Its client port.
    pub port: u16,
    /// Its bus port.
    pub cport: u16,
    /// The sender's flags for it.
    pub flags: NodeFlags,
    /// Its secondary client port.
    pub pport: u16,
}

/// A ping extension: its type and its payload without padding (a string extension's text
/// without its NUL). Encoding adds the NUL for string types and pads to 8 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedExtension {
    /// The type.
    pub kind: ExtensionType,
    /// The payload: text for string types, 40 + 8 bytes for a forgotten node, 40 for a shard
    /// id, raw bytes (padding included, as received) for unknown types.
    pub payload: Vec<u8>,
}

/// An owned message body.
// UPDATE carries a 2 KiB slot set inline, as the header does: a message is built and encoded
// one at a time, and a box would cost an allocation for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedBody {
    /// PING, PONG or MEET.
    Gossip {
        /// The entries.
        gossip: Vec<OwnedGossip>,
        /// The extensions.
        extensions: Vec<OwnedExtension>,
    },
    /// FAIL.
    Fail(NodeId),
    /// PUBLISH or PUBLISHSHARD.
    Publish {
        /// The channel.
        channel: Vec<u8>,
        /// The message.
        message: Vec<u8>,
    },
    /// UPDATE.
    Update {
        /// The owner's config epoch.
        config_epoch: u64,
        /// The owner.
        node: NodeId,
        /// Its slots.
        slots: SlotSet,
    },
    /// MODULE.
    Module {
        /// The module id, in the byte order to send.
        module_id: [u8; 8],
        /// The module's message type.
        kind: u8,
        /// The payload.
        payload: Vec<u8>,
    },
    /// FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, MFSTART.
    Bare,
    /// An unknown type's body, as received.
    Unknown(Vec<u8>),
}

/// A whole message to encode: its type, its header (`None` for Valkey's light header, valid
/// for PUBLISH, PUBLISHSHARD and MODULE only) and its body.
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
    /// How many bytes [`OwnedMessage::encode`] writes: the message's `totlen`.
    pub fn encoded_len(&self) -> usize {
        let header = if self.header.is_some() {
            HEADER_LEN
        } else {
            LIGHT_HEADER_LEN
        };
        header
            + match &self.body {
                OwnedBody::Gossip { gossip, extensions } => {
                    gossip.len() * GOSSIP_LEN + extensions.iter().map(extension_len).sum::<usize>()
                }
                OwnedBody::Fail(_) => NodeId::LEN,
                OwnedBody::Publish { channel, message } => 8 + channel.len() + message.len(),
                OwnedBody::Update { .. } => 8 + NodeId::LEN + 2048,
                OwnedBody::Module { payload, .. } => 13 + payload.len(),
                OwnedBody::Bare => 0,
                OwnedBody::Unknown(body) => body.len(),
            }
    }

    /// Appends the message to `out`, computing `totlen`, `count` and `extensions` (and
    /// setting EXT_DATA when there are extensions). A `myip` or gossip `ip` longer than its
    /// 46-byte field is cut to it.
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
            Some(header) => self.encode_header(header, out),
        }
        match &self.body {
            OwnedBody::Gossip { gossip, extensions } => {
                let at = out.len();
                out.resize(at + gossip.len() * GOSSIP_LEN, 0);
                let area = out.get_mut(at..).unwrap_or_default();
                for (entry, bytes) in gossip.iter().zip(area.chunks_exact_mut(GOSSIP_LEN)) {
                    entry.write(bytes);
                }
                for ext in extensions {
                    let len = extension_len(ext);
                    out.extend_from_slice(&(len as u32).to_be_bytes());
                    out.extend_from_slice(&ext.kind.0.to_be_bytes());
                    out.extend_from_slice(&[0, 0]);
                    out.extend_from_slice(&ext.payload);
                    out.resize(out.len() + len - 8 - ext.payload.len(), 0);
                }
            }
            OwnedBody::Fail(node) => out.extend_from_slice(&node.0),
            OwnedBody::Publish { channel, message } => {
                out.extend_from_slice(&(channel.len() as u32).to_be_bytes());
                out.extend_from_slice(&(message.len() as u32).to_be_bytes());
                out.extend_from_slice(channel);
                out.extend_from_slice(message);
            }
            OwnedBody::Update {
                config_epoch,
                node,
                slots,
            } => {
                out.extend_from_slice(&config_epoch.to_be_bytes());
                out.extend_from_slice(&node.0);
                out.extend_from_slice(slots.as_bitmap());
            }
            OwnedBody::Module {
                module_id,
                kind,
                payload,
            } => {
                out.extend_from_slice(module_id);
                out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
                out.push(*kind);
                out.extend_from_slice(payload);
            }
            OwnedBody::Bare => {}
            OwnedBody::Unknown(body) => out.extend_from_slice(body),
        }
        debug_assert_eq!(out.len() - start, totlen);
    }

    fn encode_header(&self, header: &OwnedHeader, out: &mut Vec<u8>) {
        let (count, extensions) = match &self.body {
            OwnedBody::Gossip { gossip, extensions } => (gossip.len(), extensions.len()),
            _ => (0, 0),
        };
        out.extend_from_slice(&header.port.to_be_bytes());
        out.extend_from_slice(&self.kind.0.to_be_bytes());
        out.extend_from_slice(&(count as u16).to_be_bytes());
        out.extend_from_slice(&header.current_epoch.to_be_bytes());
        out.extend_from_slice(&header.config_epoch.to_be_bytes());
        out.extend_from_slice(&header.offset.to_be_bytes());
        out.extend_from_slice(&header.sender.0);
        out.extend_from_slice(header.myslots.as_bitmap());
        out.extend_from_slice(&header.replicaof.0);
        put_field::<46>(out, &header.myip);
        out.extend_from_slice(&(extensions as u16).to_be_bytes());
        out.extend_from_slice(&[0; 30]);
        for n in [header.pport, header.cport, header.flags.0] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        out.push(header.state);
        let mut mflags = header.mflags;
        if extensions > 0 {
            mflags[0] |= MessageFlags::EXT_DATA.0;
        }
        out.extend_from_slice(&mflags);
    }
}

impl OwnedGossip {
    /// Writes the entry into its 104 zeroed bytes of the output. Written in place: building
    /// it in a stack array and copying that stalled on store forwarding, and appending field
    /// by field cost a capacity check per field (`benches/bus.rs`).
    fn write(&self, bytes: &mut [u8]) {
        let (node, rest) = bytes.split_at_mut(NodeId::LEN);
        node.copy_from_slice(&self.node.0);
        let (ping_sent, rest) = rest.split_at_mut(4);
        ping_sent.copy_from_slice(&self.ping_sent.to_be_bytes());
        let (pong_received, rest) = rest.split_at_mut(4);
        pong_received.copy_from_slice(&self.pong_received.to_be_bytes());
        let (ip, rest) = rest.split_at_mut(46);
        let n = self.ip.len().min(ip.len());
        if let (Some(to), Some(from)) = (ip.get_mut(..n), self.ip.get(..n)) {
            to.copy_from_slice(from);
        }
        let numbers = [self.port, self.cport, self.flags.0, self.pport];
        for (field, n) in rest.chunks_exact_mut(2).zip(numbers) {
            field.copy_from_slice(&n.to_be_bytes());
        }
    }
}

/// An extension's length on the wire: its header, the payload (plus a NUL for strings),
/// padded to a multiple of 8.
fn extension_len(ext: &OwnedExtension) -> usize {
    let nul = usize::from(ext.kind.is_string());
    8 + (ext.payload.len() + nul).next_multiple_of(8)
}

/// A C string in a fixed field of `N` bytes, zero-padded (so NUL-terminated when shorter than
/// the field; a text of exactly `N` bytes fills it, as one received that way did).
fn put_field<const N: usize>(out: &mut Vec<u8>, text: &[u8]) {
    let text = text.get(..text.len().min(N)).unwrap_or_default();
    out.extend_from_slice(text);
    out.resize(out.len() + N - text.len(), 0);
}

impl OwnedHeader {
    /// The header's fields, copied.
    pub fn from_view(header: Header<'_>) -> Self {
        Self {
            port: header.port(),
            current_epoch: header.current_epoch(),
            config_epoch: header.config_epoch(),
            offset: header.offset(),
            sender: header.sender(),
            myslots: SlotSet::from(header.myslots()),
            replicaof: header.replicaof().unwrap_or(NodeId::NONE),
            myip: header.myip().to_vec(),
            pport: header.pport(),
            cport: header.cport(),
            flags: header.flags(),
            state: header.state(),
            mflags: header.mflags(),
        }
    }
}

impl Message<'_> {
    /// The message, copied into owned values that encode to the same bytes.
    pub fn to_owned_message(&self) -> OwnedMessage {
        let header = self.header().map(OwnedHeader::from_view);
        let (kind, body) = match self {
            Self::Gossip {
                header: view,
                gossip,
                extensions,
            } => (
                view.kind(),
                OwnedBody::Gossip {
                    gossip: gossip
                        .clone()
                        .map(|g| OwnedGossip {
                            node: g.node(),
                            ping_sent: g.ping_sent(),
                            pong_received: g.pong_received(),
                            ip: g.ip().to_vec(),
                            port: g.port(),
                            cport: g.cport(),
                            flags: g.flags(),
                            pport: g.pport(),
                        })
                        .collect(),
                    extensions: extensions
                        .clone()
                        .map(|e| OwnedExtension {
                            kind: e.kind(),
                            payload: e.text().unwrap_or(e.payload()).to_vec(),
                        })
                        .collect(),
                },
            ),
            Self::Fail { header, node } => (header.kind(), OwnedBody::Fail(*node)),
            Self::Publish {
                kind,
                channel,
                message,
                ..
            } => (
                *kind,
                OwnedBody::Publish {
                    channel: channel.to_vec(),
                    message: message.to_vec(),
                },
            ),
            Self::Update {
                header,
                config_epoch,
                node,
                slots,
            } => (
                header.kind(),
                OwnedBody::Update {
                    config_epoch: *config_epoch,
                    node: *node,
                    slots: SlotSet::from(*slots),
                },
            ),
            Self::Module {
                module_id,
                kind,
                payload,
                ..
            } => (
                MessageType::MODULE,
                OwnedBody::Module {
                    module_id: *module_id,
                    kind: *kind,
                    payload: payload.to_vec(),
                },
            ),
            Self::Bare { header } => (header.kind(), OwnedBody::Bare),
            Self::Unknown { header, body } => (header.kind(), OwnedBody::Unknown(body.to_vec())),
        };
        OwnedMessage { kind, header, body }
    }
}
