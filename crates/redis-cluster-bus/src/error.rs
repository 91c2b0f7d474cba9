//! [`BusError`]: why bus bytes were rejected, and what a real server does about it.

/// What a real server does with a message it rejects (format section 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The connection is closed (and re-opened later by the cluster cron).
    CloseLink,
    /// The message is dropped; the connection stays.
    DropMessage,
}

/// Why bus bytes were rejected. [`BusError::action`] tells what a real server would do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BusError {
    /// The message does not start with `RCmb`.
    #[error("bad signature {0:02x?}, expected \"RCmb\"")]
    BadSignature([u8; 4]),
    /// `totlen` is below the header's size (2256, or 16 for a light header).
    #[error("totlen {totlen} below the minimum of {min}")]
    TooShort {
        /// The announced length.
        totlen: u32,
        /// The minimum for this header.
        min: u32,
    },
    /// `totlen` is above this framer's limit (the real server has none).
    #[error("totlen {totlen} above the limit of {max}")]
    TooLong {
        /// The announced length.
        totlen: u32,
        /// [`crate::Framer`]'s limit.
        max: u32,
    },
    /// The light bit on a type other than PUBLISH, MODULE or PUBLISHSHARD.
    #[error("light header on message type {0:#06x}")]
    BadLightType(u16),
    /// Fewer bytes than even a light header.
    #[error("{len} bytes, shorter than any header")]
    Truncated {
        /// The bytes given.
        len: usize,
    },
    /// The bytes given are not exactly the message that `totlen` announces.
    #[error("totlen {totlen} but {len} bytes given")]
    LengthMismatch {
        /// The announced length.
        totlen: u32,
        /// The bytes given.
        len: usize,
    },
    /// A protocol version other than 1.
    #[error("protocol version {0}, expected 1")]
    BadVersion(u16),
    /// `totlen` is not what the type, `count` and the extensions add up to.
    #[error("message type {kind} of length {totlen}, expected {expected}")]
    WrongLength {
        /// The raw message type.
        kind: u16,
        /// The announced length.
        totlen: u32,
        /// The length its contents call for.
        expected: u32,
    },
    /// A ping extension whose length is not a multiple of 8, is below 8 or 65536 and above,
    /// or does not fit in the message.
    #[error("ping extension {index} of length {len}")]
    BadExtension {
        /// Its position among the extensions.
        index: u16,
        /// Its declared length.
        len: usize,
    },
}

impl BusError {
    /// [`BusError::WrongLength`] for a message of type `kind` that would need `expected` bytes.
    pub(crate) fn wrong_length(kind: crate::MessageType, totlen: u32, expected: usize) -> Self {
        Self::WrongLength {
            kind: kind.0,
            totlen,
            expected: u32::try_from(expected).unwrap_or(u32::MAX),
        }
    }

    /// What a real server does on this error.
    pub const fn action(&self) -> Action {
        match self {
            Self::BadSignature(_)
            | Self::TooShort { .. }
            | Self::TooLong { .. }
            | Self::LengthMismatch { .. } => Action::CloseLink,
            Self::BadLightType(_)
            | Self::Truncated { .. }
            | Self::BadVersion(_)
            | Self::WrongLength { .. }
            | Self::BadExtension { .. } => Action::DropMessage,
        }
    }
}
