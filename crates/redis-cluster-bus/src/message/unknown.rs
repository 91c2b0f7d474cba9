//! A message type this crate does not know, kept whole.

use crate::header::Header;

/// A message of an unknown type: its header and raw body. The servers accept any length for a
/// type they do not know (and then ignore the message), so this is not validated further.
#[derive(Clone, Copy, Debug)]
pub struct Unknown<'a> {
    header: Header<'a>,
    body: &'a [u8],
}

impl<'a> Unknown<'a> {
    pub(crate) const fn decode(header: Header<'a>, body: &'a [u8]) -> Self {
        Self { header, body }
    }

    /// The header.
    #[inline]
    pub const fn header(&self) -> Header<'a> {
        self.header
    }

    /// Everything after the header.
    #[inline]
    pub const fn body(&self) -> &'a [u8] {
        self.body
    }
}
