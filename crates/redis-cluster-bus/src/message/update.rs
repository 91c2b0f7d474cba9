//! UPDATE (format section 6.4): who owns which slots, at which config epoch.

use alloc::vec::Vec;

use redis_hash_slot::{BITMAP_LEN, SlotSet, SlotSetView};

use crate::{
    codes::NodeId,
    error::BusError,
    header::{HEADER_LEN, Header},
};

/// An UPDATE, read in place (the slot bitmap included).
#[derive(Clone, Copy, Debug)]
pub struct Update<'a> {
    header: Header<'a>,
    config_epoch: u64,
    node: NodeId,
    slots: SlotSetView<'a>,
}

impl<'a> Update<'a> {
    /// The body after `header` is exactly a config epoch, a node id and a slot bitmap.
    pub(crate) fn decode(header: Header<'a>, body: &'a [u8]) -> Result<Self, BusError> {
        let wrong = || {
            BusError::wrong_length(
                header.kind(),
                header.totlen(),
                HEADER_LEN + OwnedUpdate::ENCODED_LEN,
            )
        };
        if body.len() != OwnedUpdate::ENCODED_LEN {
            return Err(wrong());
        }
        let (epoch, rest) = body.split_first_chunk::<8>().ok_or_else(wrong)?;
        let (node, rest) = rest
            .split_first_chunk::<{ NodeId::LEN }>()
            .ok_or_else(wrong)?;
        let slots = rest.first_chunk::<BITMAP_LEN>().ok_or_else(wrong)?;
        Ok(Self {
            header,
            config_epoch: u64::from_be_bytes(*epoch),
            node: NodeId(*node),
            slots: SlotSetView::from_bitmap(slots),
        })
    }

    /// The header.
    #[inline]
    pub const fn header(&self) -> Header<'a> {
        self.header
    }

    /// The owner's config epoch.
    #[inline]
    pub const fn config_epoch(&self) -> u64 {
        self.config_epoch
    }

    /// The owner.
    #[inline]
    pub const fn node(&self) -> NodeId {
        self.node
    }

    /// The owner's slots.
    #[inline]
    pub const fn slots(&self) -> SlotSetView<'a> {
        self.slots
    }

    /// The body, copied.
    pub fn to_owned_body(&self) -> OwnedUpdate {
        OwnedUpdate {
            config_epoch: self.config_epoch,
            node: self.node,
            slots: SlotSet::from(self.slots),
        }
    }
}

/// The body of an UPDATE to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedUpdate {
    /// The owner's config epoch.
    pub config_epoch: u64,
    /// The owner.
    pub node: NodeId,
    /// Its slots.
    pub slots: SlotSet,
}

impl OwnedUpdate {
    pub(crate) const ENCODED_LEN: usize = 8 + NodeId::LEN + BITMAP_LEN;

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.config_epoch.to_be_bytes());
        out.extend_from_slice(&self.node.0);
        out.extend_from_slice(self.slots.as_bitmap());
    }
}
