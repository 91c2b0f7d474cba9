//! [`DecodeError`]: where decoding failed and which rule the input broke.

use alloc::{format, string::String};

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

    /// The error line a Redis server sends before it closes a client connection whose
    /// command broke this rule (without the leading `-` and the CRLF), for an error from
    /// [`Decoder::decode_command`](crate::Decoder::decode_command) on `input`, the buffer it
    /// was given. A length that is not a number, or is negative or too large, is an
    /// `invalid multibulk length` on a `*` line and an `invalid bulk length` on a `$` line,
    /// as Redis 7.0 says it. The rules the server does not check (the CRLF after a payload,
    /// the whole frame's size) get a line of the same form naming the rule.
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use redis_resp::Decoder;
    ///
    /// let input = &b"*1\r\n$abc\r\n"[..];
    /// let error = Decoder::new().decode_command(&mut BytesMut::from(input)).unwrap_err();
    /// assert_eq!(error.server_reply(input), "ERR Protocol error: invalid bulk length");
    /// ```
    pub fn server_reply(&self, input: &[u8]) -> String {
        let start = input[..self.offset.min(input.len())]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        let length = || match input.get(start) {
            Some(b'*') => "invalid multibulk length",
            _ => "invalid bulk length",
        };
        let text = match self.kind {
            ErrorKind::ExpectedBulk(kind) => {
                return format!(
                    "ERR Protocol error: expected '$', got '{}'",
                    char::from(kind.0)
                );
            }
            ErrorKind::UnbalancedQuotes => "unbalanced quotes in request",
            ErrorKind::InlineTooLong { .. } => "too big inline request",
            ErrorKind::TooManyElements { .. } => "invalid multibulk length",
            ErrorKind::Integer(_)
            | ErrorKind::NegativeLength(_)
            | ErrorKind::BadLineEnd
            | ErrorKind::BulkTooLong { .. } => length(),
            ErrorKind::BadPayloadEnd => "bulk string not followed by CRLF",
            ErrorKind::FrameTooLong { .. } => "too big request",
            _ => "expected a command",
        };
        format!("ERR Protocol error: {text}")
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

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use crate::Decoder;

    /// Each input, and the reply of a real redis-server 7.0.15 to it.
    #[test]
    fn the_real_servers_protocol_errors() {
        let cases: [(&[u8], &str); 10] = [
            (b"*abc\r\n", "invalid multibulk length"),
            (b"*99999999999\r\n", "invalid multibulk length"),
            (b"*01\r\n$4\r\nPING\r\n", "invalid multibulk length"),
            (b"*1\r\n:1\r\n", "expected '$', got ':'"),
            (
                b"*2\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n",
                "expected '$', got '*'",
            ),
            (b"*1\r\n$-5\r\n", "invalid bulk length"),
            (b"*1\r\n$abc\r\n", "invalid bulk length"),
            (b"*1\r\n$+4\r\n", "invalid bulk length"),
            (b"*1\r\n$99999999999\r\n", "invalid bulk length"),
            (b"\"unbalanced\r\n", "unbalanced quotes in request"),
        ];
        for (input, text) in cases {
            let error = Decoder::new()
                .decode_command(&mut BytesMut::from(input))
                .expect_err("a protocol error");
            let expected = alloc::format!("ERR Protocol error: {text}");
            assert_eq!(error.server_reply(input), expected, "{input:?}");
        }
    }
}
