//! FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK and MFSTART (format section 6.6): everything they
//! say is in the header.

use crate::{
    error::BusError,
    header::{HEADER_LEN, Header},
};

/// A FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK or MFSTART; its header's type says which.
#[derive(Clone, Copy, Debug)]
pub struct Failover<'a> {
    header: Header<'a>,
}

impl<'a> Failover<'a> {
    /// The message is the header alone.
    pub(crate) fn decode(header: Header<'a>, body: &'a [u8]) -> Result<Self, BusError> {
        if body.is_empty() {
            Ok(Self { header })
        } else {
            Err(BusError::wrong_length(
                header.kind(),
                header.totlen(),
                HEADER_LEN,
            ))
        }
    }

    /// The header.
    #[inline]
    pub const fn header(&self) -> Header<'a> {
        self.header
    }
}
