//! [`Header`]: the 2256-byte header of every normal message, read in place.

use alloc::vec::Vec;

use redis_hash_slot::{BITMAP_LEN, SlotSet, SlotSetView};

use crate::codes::{MessageFlags, MessageType, NodeFlags, NodeId};

/// The four bytes every message starts with.
pub const SIGNATURE: [u8; 4] = *b"RCmb";
/// Bytes in a normal header; the body starts here.
pub const HEADER_LEN: usize = 2256;
/// Bytes in Valkey's light header.
pub const LIGHT_HEADER_LEN: usize = 16;
/// The only bus protocol version.
pub const VERSION: u16 = 1;

/// Field offsets (format section 2).
mod at {
    pub(super) const TOTLEN: usize = 4;
    pub(super) const VERSION: usize = 8;
    pub(super) const PORT: usize = 10;
    pub(super) const TYPE: usize = 12;
    pub(super) const COUNT: usize = 14;
    pub(super) const CURRENT_EPOCH: usize = 16;
    pub(super) const CONFIG_EPOCH: usize = 24;
    pub(super) const OFFSET: usize = 32;
    pub(super) const SENDER: usize = 40;
    pub(super) const MYSLOTS: usize = 80;
    pub(super) const REPLICAOF: usize = 2128;
    pub(super) const MYIP: usize = 2168;
    pub(super) const MYIP_LEN: usize = 46;
    pub(super) const EXTENSIONS: usize = 2214;
    pub(super) const PPORT: usize = 2246;
    pub(super) const CPORT: usize = 2248;
    pub(super) const FLAGS: usize = 2250;
    pub(super) const STATE: usize = 2252;
    pub(super) const MFLAGS: usize = 2253;
}

/// A normal message header, read in place: every accessor reads its bytes at a fixed offset,
/// nothing is copied (the 2 KiB slot bitmap included).
///
/// ```
/// use redis_cluster_bus::{HEADER_LEN, Header, MessageType};
///
/// let mut bytes = [0u8; HEADER_LEN];
/// bytes[..4].copy_from_slice(b"RCmb");
/// bytes[4..8].copy_from_slice(&(HEADER_LEN as u32).to_be_bytes());
/// bytes[8..10].copy_from_slice(&1u16.to_be_bytes());
/// let header = Header::new(&bytes);
/// assert_eq!(header.kind(), MessageType::PING);
/// assert_eq!(header.totlen(), 2256);
/// assert!(header.myslots().is_empty());
/// ```
#[derive(Clone, Copy)]
pub struct Header<'a> {
    bytes: &'a [u8; HEADER_LEN],
}

impl<'a> Header<'a> {
    /// The header in `bytes`. Any 2256 bytes are readable; [`crate::Framer`] is what checks the
    /// signature and lengths.
    #[inline]
    pub const fn new(bytes: &'a [u8; HEADER_LEN]) -> Self {
        Self { bytes }
    }

    /// The header's bytes.
    #[inline]
    pub const fn as_bytes(self) -> &'a [u8; HEADER_LEN] {
        self.bytes
    }

    #[inline]
    fn u16_at(self, at: usize) -> u16 {
        u16::from_be_bytes(self.array(at))
    }

    #[inline]
    fn u32_at(self, at: usize) -> u32 {
        u32::from_be_bytes(self.array(at))
    }

    #[inline]
    fn u64_at(self, at: usize) -> u64 {
        u64::from_be_bytes(self.array(at))
    }

    #[inline]
    fn array<const N: usize>(self, at: usize) -> [u8; N] {
        field_at(self.bytes, at)
    }

    /// `totlen`: the whole message's length, header included.
    #[inline]
    pub fn totlen(self) -> u32 {
        self.u32_at(at::TOTLEN)
    }

    /// `ver`: the protocol version, 1.
    #[inline]
    pub fn version(self) -> u16 {
        self.u16_at(at::VERSION)
    }

    /// The sender's announced client port (the TLS one with `tls-cluster yes`).
    #[inline]
    pub fn port(self) -> u16 {
        self.u16_at(at::PORT)
    }

    /// The message type.
    #[inline]
    pub fn kind(self) -> MessageType {
        MessageType(self.u16_at(at::TYPE))
    }

    /// Gossip entries in a PING, PONG or MEET; 0 otherwise.
    #[inline]
    pub fn count(self) -> u16 {
        self.u16_at(at::COUNT)
    }

    /// The sender's current epoch.
    #[inline]
    pub fn current_epoch(self) -> u64 {
        self.u64_at(at::CURRENT_EPOCH)
    }

    /// The config epoch of the sender, or of its master if it is a replica.
    #[inline]
    pub fn config_epoch(self) -> u64 {
        self.u64_at(at::CONFIG_EPOCH)
    }

    /// The replication offset.
    #[inline]
    pub fn offset(self) -> u64 {
        self.u64_at(at::OFFSET)
    }

    /// The sender's node id.
    #[inline]
    pub fn sender(self) -> NodeId {
        NodeId(self.array(at::SENDER))
    }

    /// The slots the sender serves (a replica sends its master's), read in place.
    #[inline]
    pub fn myslots(self) -> SlotSetView<'a> {
        let bitmap: &'a [u8; BITMAP_LEN] = self
            .bytes
            .get(at::MYSLOTS..at::MYSLOTS + BITMAP_LEN)
            .and_then(|b| b.try_into().ok())
            .unwrap_or(&[0; BITMAP_LEN]);
        SlotSetView::from_bitmap(bitmap)
    }

    /// The sender's master, or `None` when the field is 40 zero bytes.
    #[inline]
    pub fn replicaof(self) -> Option<NodeId> {
        let id = NodeId(self.array(at::REPLICAOF));
        (!id.is_none()).then_some(id)
    }

    /// The announced IP up to its NUL (bounded by the 46-byte field); empty means "use the
    /// TCP peer address".
    #[inline]
    pub fn myip(self) -> &'a [u8] {
        until_nul(
            self.bytes
                .get(at::MYIP..at::MYIP + at::MYIP_LEN)
                .unwrap_or_default(),
        )
    }

    /// How many ping extensions follow the gossip section.
    #[inline]
    pub fn extensions(self) -> u16 {
        self.u16_at(at::EXTENSIONS)
    }

    /// The secondary client port.
    #[inline]
    pub fn pport(self) -> u16 {
        self.u16_at(at::PPORT)
    }

    /// The sender's cluster bus port.
    #[inline]
    pub fn cport(self) -> u16 {
        self.u16_at(at::CPORT)
    }

    /// The sender's own node flags.
    #[inline]
    pub fn flags(self) -> NodeFlags {
        NodeFlags::from_bits_retain(self.u16_at(at::FLAGS))
    }

    /// The sender's view of the cluster: 0 ok, 1 fail.
    #[inline]
    pub fn state(self) -> u8 {
        self.array::<1>(at::STATE)[0]
    }

    /// The three `mflags` bytes as sent (only byte 0 is used, see [`Header::message_flags`]).
    #[inline]
    pub fn mflags(self) -> [u8; 3] {
        self.array(at::MFLAGS)
    }

    /// `mflags[0]`.
    #[inline]
    pub fn message_flags(self) -> MessageFlags {
        MessageFlags::from_bits_retain(self.mflags()[0])
    }
}

/// The fields of a normal header that a sender chooses. `totlen`, `type`, `count` and
/// `extensions` follow from the message and are computed when it is encoded.
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

    /// Appends the header's bytes after `version`, from `port` to `mflags`, for a message of
    /// type `kind` with `count` gossip entries and `extensions` ping extensions.
    pub(crate) fn encode_rest(
        &self,
        kind: MessageType,
        count: u16,
        extensions: u16,
        out: &mut Vec<u8>,
    ) {
        out.extend_from_slice(&self.port.to_be_bytes());
        out.extend_from_slice(&kind.0.to_be_bytes());
        out.extend_from_slice(&count.to_be_bytes());
        out.extend_from_slice(&self.current_epoch.to_be_bytes());
        out.extend_from_slice(&self.config_epoch.to_be_bytes());
        out.extend_from_slice(&self.offset.to_be_bytes());
        out.extend_from_slice(&self.sender.0);
        out.extend_from_slice(self.myslots.as_bitmap());
        out.extend_from_slice(&self.replicaof.0);
        let myip = self.myip.get(..at::MYIP_LEN).unwrap_or(&self.myip);
        out.extend_from_slice(myip);
        out.resize(out.len() + at::MYIP_LEN - myip.len(), 0);
        out.extend_from_slice(&extensions.to_be_bytes());
        // The 30 reserved bytes before pport.
        out.extend_from_slice(&[0; at::PPORT - at::EXTENSIONS - 2]);
        for n in [self.pport, self.cport, self.flags.bits()] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        out.push(self.state);
        let mut mflags = self.mflags;
        if extensions > 0 {
            mflags[0] |= MessageFlags::EXT_DATA.bits();
        }
        out.extend_from_slice(&mflags);
    }
}

/// The length of a normal header, or of Valkey's light one.
pub(crate) const fn header_len(normal: bool) -> usize {
    if normal { HEADER_LEN } else { LIGHT_HEADER_LEN }
}

/// The `N` bytes of a fixed-size field at `at`. Every caller passes an offset that fits in
/// its fixed-size message part, so the zero fallback is never taken.
pub(crate) fn field_at<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0; N];
    if let Some(field) = bytes.get(at..at + N) {
        out.copy_from_slice(field);
    }
    out
}

/// A C string inside a fixed-size field: the bytes before the first NUL, or all of them.
pub(crate) fn until_nul(field: &[u8]) -> &[u8] {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    field.get(..end).unwrap_or_default()
}

impl core::fmt::Debug for Header<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Header")
            .field("totlen", &self.totlen())
            .field("kind", &self.kind())
            .field("sender", &self.sender())
            .field("current_epoch", &self.current_epoch())
            .field("config_epoch", &self.config_epoch())
            .field("flags", &self.flags())
            .field("count", &self.count())
            .field("extensions", &self.extensions())
            .field("myslots", &self.myslots())
            .finish_non_exhaustive()
    }
}
