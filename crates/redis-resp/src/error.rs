//! [`DecodeError`]: where decoding failed and which rule the input broke.

use crate::frame::Kind;

/// Why input was rejected, and where: `offset` counts bytes from the start of the buffer that
/// was passed to the decoder. Nothing before the failed frame was consumed, so a caller can
/// report, log or skip from there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind} (at byte {offset})")]
pub struct DecodeError {
    /// The offset of the byte that broke the rule.
    pub offset: usize,
    /// The rule.
    pub kind: ErrorKind,
}

impl DecodeError {
    pub(crate) const fn new(offset: usize, kind: ErrorKind) -> Self {
        Self { offset, kind }
    }
}

/// The rule that the input broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A frame started with a byte that is no RESP type.
    #[error("unknown type byte {0}")]
    UnknownType(Kind),
    /// A line did not end with CRLF: a CR followed by something else, or a bare LF.
    #[error("line not ended by CRLF")]
    BadLineEnd,
    /// The two bytes after a bulk payload or chunk were not CRLF.
    #[error("payload not followed by CRLF")]
    BadPayloadEnd,
    /// An integer, or a length, broke the server's integer rules.
    #[error("bad integer: {0}")]
    Integer(IntegerError),
    /// A length was negative other than the `-1` of RESP2's nulls.
    #[error("negative length {0}")]
    NegativeLength(i64),
    /// `#` followed by something else than `t` or `f`.
    #[error("boolean is not `t` or `f`")]
    BadBoolean,
    /// `_` followed by something before its CRLF.
    #[error("null has a payload")]
    BadNull,
    /// A double's text is not a number, `inf`, `-inf` or `nan`.
    #[error("bad double")]
    BadDouble,
    /// A big number is not an optional `-` and decimal digits.
    #[error("bad big number")]
    BadBigNumber,
    /// A verbatim string shorter than 4 bytes, or without `:` after its 3-byte format.
    #[error("verbatim string without a `xxx:` format")]
    BadVerbatim,
    /// A `;` chunk outside a streamed string.
    #[error("streamed string chunk outside a streamed string")]
    StrayChunk,
    /// A `.` outside a streamed aggregate, or between a streamed map's key and its value.
    #[error("streamed aggregate end where it cannot be")]
    StrayEnd,
    /// Something else than a `;` chunk inside a streamed string.
    #[error("expected a `;` chunk in a streamed string, got {0}")]
    ExpectedChunk(Kind),
    /// A command's array held something else than a bulk string (the server's
    /// "expected '$', got 'x'").
    #[error("expected '$' in a command, got {0}")]
    ExpectedBulk(Kind),
    /// An inline command with an unclosed quote, or a closing quote not followed by a space.
    #[error("unbalanced quotes in inline command")]
    UnbalancedQuotes,
    /// A bulk string or chunk longer than the configured limit.
    #[error("bulk length {len} over the limit of {max}")]
    BulkTooLong {
        /// The declared length.
        len: u64,
        /// [`Limits::max_bulk_len`](crate::Limits::max_bulk_len).
        max: u64,
    },
    /// An aggregate with more elements than the configured limit.
    #[error("aggregate of {len} elements over the limit of {max}")]
    TooManyElements {
        /// The declared number of elements (pairs for maps and attributes).
        len: u64,
        /// [`Limits::max_elements`](crate::Limits::max_elements).
        max: u64,
    },
    /// Aggregates nested deeper than the configured limit.
    #[error("nesting deeper than {max}")]
    TooDeep {
        /// [`Limits::max_depth`](crate::Limits::max_depth).
        max: usize,
    },
    /// A frame longer than the configured limit.
    #[error("frame longer than {max} bytes")]
    FrameTooLong {
        /// [`Limits::max_frame_len`](crate::Limits::max_frame_len).
        max: usize,
    },
    /// An inline command line longer than the configured limit.
    #[error("inline command longer than {max} bytes")]
    InlineTooLong {
        /// [`Limits::max_inline_len`](crate::Limits::max_inline_len).
        max: usize,
    },
}

/// How an integer or length broke the server's integer rules (those of its `string2ll`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IntegerError {
    /// No digits.
    #[error("no digits")]
    Empty,
    /// A byte that is not a digit (a `+` sign and spaces included).
    #[error("not a decimal digit")]
    NotDigit,
    /// A leading zero (`007`, `-0`).
    #[error("leading zero")]
    LeadingZero,
    /// Outside the range of a signed 64-bit integer.
    #[error("out of range")]
    Overflow,
}

impl From<IntegerError> for ErrorKind {
    fn from(e: IntegerError) -> Self {
        Self::Integer(e)
    }
}
