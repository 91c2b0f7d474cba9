//! FAIL (format section 6.2): a node is declared failed.

use alloc::vec::Vec;

use crate::{
    codes::NodeId,
    error::BusError,
    header::{HEADER_LEN, Header},
};

/// A FAIL, read in place.
#[derive(Clone, Copy, Debug)]
pub struct Fail<'a> {
    header: Header<'a>,
    node: NodeId,
}

impl<'a> Fail<'a> {
    /// The body after `header` is exactly one 40-byte node id.
    pub(crate) fn decode(header: Header<'a>, body: &'a [u8]) -> Result<Self, BusError> {
        match body.first_chunk::<{ NodeId::LEN }>() {
            Some(node) if body.len() == NodeId::LEN => Ok(Self {
                header,
                node: NodeId(*node),
            }),
            _ => Err(BusError::wrong_length(
                header.kind(),
                header.totlen(),
                HEADER_LEN + NodeId::LEN,
            )),
        }
    }

    /// The header.
    #[inline]
    pub const fn header(&self) -> Header<'a> {
        self.header
    }

    /// The failed node.
    #[inline]
    pub const fn node(&self) -> NodeId {
        self.node
    }

    /// The body, copied.
    pub const fn to_owned_body(&self) -> OwnedFail {
        OwnedFail { node: self.node }
    }
}

/// The body of a FAIL to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnedFail {
    /// The failed node.
    pub node: NodeId,
}

impl OwnedFail {
    pub(crate) const ENCODED_LEN: usize = NodeId::LEN;

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.node.0);
    }
}
