//! PUBLISH and PUBLISHSHARD (format section 6.3), after a normal header or Valkey's light one.

use alloc::vec::Vec;

use crate::{
    codes::MessageType,
    error::BusError,
    header::{Header, header_len},
};

/// A PUBLISH or PUBLISHSHARD, read in place.
#[derive(Clone, Copy, Debug)]
pub struct Publish<'a> {
    header: Option<Header<'a>>,
    kind: MessageType,
    channel: &'a [u8],
    message: &'a [u8],
}

impl<'a> Publish<'a> {
    /// The body after a header (`None`: a light one) of a `totlen`-byte message of type `kind`
    /// (without the light bit): the channel and message lengths, then exactly that many bytes.
    pub(crate) fn decode(
        header: Option<Header<'a>>,
        kind: MessageType,
        body: &'a [u8],
        totlen: u32,
    ) -> Result<Self, BusError> {
        let header_len = header_len(header.is_some());
        let wrong = |expected| BusError::wrong_length(kind, totlen, expected);
        let (lens, rest) = body.split_first_chunk::<8>().ok_or(wrong(header_len + 8))?;
        let channel_len = u32::from_be_bytes([lens[0], lens[1], lens[2], lens[3]]) as usize;
        let message_len = u32::from_be_bytes([lens[4], lens[5], lens[6], lens[7]]) as usize;
        if rest.len() != channel_len.saturating_add(message_len) {
            let expected = (header_len + 8)
                .saturating_add(channel_len)
                .saturating_add(message_len);
            return Err(wrong(expected));
        }
        let (channel, message) = rest.split_at(channel_len);
        Ok(Self {
            header,
            kind,
            channel,
            message,
        })
    }

    /// The header, or `None` for a light header.
    #[inline]
    pub const fn header(&self) -> Option<Header<'a>> {
        self.header
    }

    /// PUBLISH or PUBLISHSHARD, without the light bit.
    #[inline]
    pub const fn kind(&self) -> MessageType {
        self.kind
    }

    /// The channel, binary-safe.
    #[inline]
    pub const fn channel(&self) -> &'a [u8] {
        self.channel
    }

    /// The message, binary-safe.
    #[inline]
    pub const fn message(&self) -> &'a [u8] {
        self.message
    }

    /// The body, copied.
    pub fn to_owned_body(&self) -> OwnedPublish {
        OwnedPublish {
            channel: self.channel.to_vec(),
            message: self.message.to_vec(),
        }
    }
}

/// The body of a PUBLISH or PUBLISHSHARD to send.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnedPublish {
    /// The channel.
    pub channel: Vec<u8>,
    /// The message.
    pub message: Vec<u8>,
}

impl OwnedPublish {
    pub(crate) fn encoded_len(&self) -> usize {
        8 + self.channel.len() + self.message.len()
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.channel.len() as u32).to_be_bytes());
        out.extend_from_slice(&(self.message.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.channel);
        out.extend_from_slice(&self.message);
    }
}
