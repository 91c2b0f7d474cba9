//! A `tokio-util` codec of frames.

use bytes::BytesMut;

use crate::{DecodeError, Decoder, Frame, encode};

/// Frames in and out of a `tokio_util::codec::Framed`.
#[derive(Debug, Default)]
pub struct RespCodec {
    decoder: Decoder,
}

impl RespCodec {
    /// A codec around `decoder`, with its configuration.
    pub fn new(decoder: Decoder) -> Self {
        Self { decoder }
    }
}

/// A codec failure: bad input, or the transport's I/O error.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The peer sent something that is not RESP.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// Reading or writing failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl tokio_util::codec::Decoder for RespCodec {
    type Item = Frame;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        Ok(self.decoder.decode(src)?)
    }
}

impl<B: AsRef<[u8]>> tokio_util::codec::Encoder<&Frame<B>> for RespCodec {
    type Error = CodecError;

    fn encode(&mut self, frame: &Frame<B>, dst: &mut BytesMut) -> Result<(), CodecError> {
        dst.reserve(crate::encoded_len(frame));
        encode(frame, dst);
        Ok(())
    }
}
