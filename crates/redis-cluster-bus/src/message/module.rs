//! MODULE (format section 6.5): a module's own message, after a normal header or Valkey's
//! light one.

use alloc::vec::Vec;

use crate::{
    codes::MessageType,
    error::BusError,
    header::{Header, header_len},
};

/// Bytes before the payload: module id, payload length, module message type.
const FIXED_LEN: usize = 8 + 4 + 1;

/// A MODULE message, read in place.
#[derive(Clone, Copy, Debug)]
pub struct Module<'a> {
    header: Option<Header<'a>>,
    module_id: [u8; 8],
    kind: u8,
    payload: &'a [u8],
}

impl<'a> Module<'a> {
    /// The body after a header (`None`: a light one) of a `totlen`-byte message: module id,
    /// payload length, type, then exactly that payload.
    pub(crate) fn decode(
        header: Option<Header<'a>>,
        body: &'a [u8],
        totlen: u32,
    ) -> Result<Self, BusError> {
        let header_len = header_len(header.is_some());
        let wrong = |expected| BusError::wrong_length(MessageType::MODULE, totlen, expected);
        let (module_id, rest) = body
            .split_first_chunk::<8>()
            .ok_or(wrong(header_len + FIXED_LEN))?;
        let (len, rest) = rest
            .split_first_chunk::<4>()
            .ok_or(wrong(header_len + FIXED_LEN))?;
        let (kind, payload) = rest.split_first().ok_or(wrong(header_len + FIXED_LEN))?;
        let len = u32::from_be_bytes(*len) as usize;
        if payload.len() != len {
            return Err(wrong((header_len + FIXED_LEN).saturating_add(len)));
        }
        Ok(Self {
            header,
            module_id: *module_id,
            kind: *kind,
            payload,
        })
    }

    /// The header, or `None` for a light header.
    #[inline]
    pub const fn header(&self) -> Option<Header<'a>> {
        self.header
    }

    /// The module id, in the sender's byte order (little-endian on x86-64 and arm64).
    #[inline]
    pub const fn module_id(&self) -> [u8; 8] {
        self.module_id
    }

    /// The module's message type.
    #[inline]
    pub const fn kind(&self) -> u8 {
        self.kind
    }

    /// The payload.
    #[inline]
    pub const fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// The body, copied.
    pub fn to_owned_body(&self) -> OwnedModule {
        OwnedModule {
            module_id: self.module_id,
            kind: self.kind,
            payload: self.payload.to_vec(),
        }
    }
}

/// The body of a MODULE message to send.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnedModule {
    /// The module id, in the byte order to send.
    pub module_id: [u8; 8],
    /// The module's message type.
    pub kind: u8,
    /// The payload.
    pub payload: Vec<u8>,
}

impl OwnedModule {
    pub(crate) fn encoded_len(&self) -> usize {
        FIXED_LEN + self.payload.len()
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.module_id);
        out.extend_from_slice(&(self.payload.len() as u32).to_be_bytes());
        out.push(self.kind);
        out.extend_from_slice(&self.payload);
    }
}
