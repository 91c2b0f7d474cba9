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
}

impl BusError {
    /// What a real server does on this error.
    pub const fn action(&self) -> Action {
        match self {
            Self::BadSignature(_) | Self::TooShort { .. } | Self::TooLong { .. } => {
                Action::CloseLink
            }
            Self::BadLightType(_) => Action::DropMessage,
        }
    }
}
