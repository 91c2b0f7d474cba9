//! [`Frame`]: one RESP2 or RESP3 value, and [`Kind`], its type byte.

use alloc::{boxed::Box, vec::Vec};
use core::fmt;

use bytes::Bytes;

/// One RESP value, RESP2 and RESP3 alike, holding its strings as `B`.
///
/// `B` is [`Bytes`] (slices of the decoder's buffer, no copy) or `&[u8]` (slices of the caller's
/// input). Every distinction the wire makes is kept, so that encoding a decoded frame gives back
/// its bytes: the two RESP2 nulls and the RESP3 null, a double's text, map order and duplicate
/// keys, a verbatim string's format, attributes, and how a streamed value was chunked.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame<B = Bytes> {
    /// `+OK\r\n`: a line of text without CR or LF.
    SimpleString(B),
    /// `-ERR message\r\n`: the whole line after `-`, error code included.
    SimpleError(B),
    /// `:42\r\n`.
    Integer(i64),
    /// `$5\r\nhello\r\n`: binary-safe.
    BulkString(B),
    /// `$-1\r\n`: RESP2's null bulk string.
    NullBulkString,
    /// `*2\r\n...`.
    Array(Vec<Self>),
    /// `*-1\r\n`: RESP2's null array.
    NullArray,
    /// `_\r\n`: RESP3's null.
    Null,
    /// `#t\r\n` or `#f\r\n`.
    Boolean(bool),
    /// `,3.14\r\n`: the text as sent, so that it re-encodes exactly; [`Frame::to_f64`] reads it.
    Double(B),
    /// `(3492890328409238509324850943850943825024385\r\n`: the digits (and sign) as sent.
    BigNumber(B),
    /// `!21\r\nSYNTAX invalid syntax\r\n`: a binary-safe error.
    BulkError(B),
    /// `=15\r\ntxt:Some string\r\n`: a three-byte format and the text after its `:`.
    VerbatimString {
        /// The format, such as `txt` or `mkd`, kept whatever it is.
        format: [u8; 3],
        /// The text after `format:`.
        text: B,
    },
    /// `%1\r\n+key\r\n+value\r\n`: pairs in wire order, duplicates kept.
    Map(Vec<(Self, Self)>),
    /// `~2\r\n...`: elements in wire order, duplicates kept.
    Set(Vec<Self>),
    /// `>3\r\n...`: an out-of-band message.
    Push(Vec<Self>),
    /// `|1\r\n...` then a value: attributes and the value they were sent before.
    Attributed {
        /// The attribute pairs, in wire order.
        attributes: Vec<(Self, Self)>,
        /// The value that followed them (itself possibly attributed).
        value: Box<Self>,
    },
    /// `$?\r\n;4\r\nHell\r\n;1\r\no\r\n;0\r\n`: the chunks, without the final empty one.
    StreamedString(Vec<B>),
    /// `*?\r\n...\r\n.\r\n`.
    StreamedArray(Vec<Self>),
    /// `~?\r\n...\r\n.\r\n`.
    StreamedSet(Vec<Self>),
    /// `%?\r\n...\r\n.\r\n`.
    StreamedMap(Vec<(Self, Self)>),
}

impl<B: AsRef<[u8]>> Frame<B> {
    /// The type byte this frame starts with on the wire.
    pub fn kind(&self) -> Kind {
        match self {
            Self::SimpleString(_) => Kind::SIMPLE_STRING,
            Self::SimpleError(_) => Kind::SIMPLE_ERROR,
            Self::Integer(_) => Kind::INTEGER,
            Self::BulkString(_) | Self::NullBulkString | Self::StreamedString(_) => {
                Kind::BULK_STRING
            }
            Self::Array(_) | Self::NullArray | Self::StreamedArray(_) => Kind::ARRAY,
            Self::Null => Kind::NULL,
            Self::Boolean(_) => Kind::BOOLEAN,
            Self::Double(_) => Kind::DOUBLE,
            Self::BigNumber(_) => Kind::BIG_NUMBER,
            Self::BulkError(_) => Kind::BULK_ERROR,
            Self::VerbatimString { .. } => Kind::VERBATIM_STRING,
            Self::Map(_) | Self::StreamedMap(_) => Kind::MAP,
            Self::Set(_) | Self::StreamedSet(_) => Kind::SET,
            Self::Push(_) => Kind::PUSH,
            Self::Attributed { .. } => Kind::ATTRIBUTE,
        }
    }

    /// The bytes of a simple string, bulk string, verbatim string's text, or an error's
    /// message; `None` for other frames.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Self::SimpleString(b)
            | Self::SimpleError(b)
            | Self::BulkString(b)
            | Self::BulkError(b)
            | Self::VerbatimString { text: b, .. } => Some(b.as_ref()),
            _ => None,
        }
    }

    /// Whether this is a simple or bulk error.
    pub fn is_error(&self) -> bool {
        matches!(self, Self::SimpleError(_) | Self::BulkError(_))
    }

    /// Whether this is one of the three nulls.
    pub fn is_null(&self) -> bool {
        matches!(self, Self::Null | Self::NullBulkString | Self::NullArray)
    }

    /// A double's value. The decoder has already checked the text, so this is `None` only for
    /// frames that are not doubles, or for a `Double` built by hand from text that is not one.
    pub fn to_f64(&self) -> Option<f64> {
        let Self::Double(text) = self else {
            return None;
        };
        crate::parse::parse_double(text.as_ref())
    }

    /// The same frame holding its strings as `C`.
    pub fn map_bytes<C>(self, f: &mut impl FnMut(B) -> C) -> Frame<C> {
        match self {
            Self::SimpleString(b) => Frame::SimpleString(f(b)),
            Self::SimpleError(b) => Frame::SimpleError(f(b)),
            Self::Integer(n) => Frame::Integer(n),
            Self::BulkString(b) => Frame::BulkString(f(b)),
            Self::NullBulkString => Frame::NullBulkString,
            Self::Array(items) => Frame::Array(items.into_iter().map(|i| i.map_bytes(f)).collect()),
            Self::NullArray => Frame::NullArray,
            Self::Null => Frame::Null,
            Self::Boolean(b) => Frame::Boolean(b),
            Self::Double(b) => Frame::Double(f(b)),
            Self::BigNumber(b) => Frame::BigNumber(f(b)),
            Self::BulkError(b) => Frame::BulkError(f(b)),
            Self::VerbatimString { format, text } => Frame::VerbatimString {
                format,
                text: f(text),
            },
            Self::Map(p) => Frame::Map(map_pairs(p, f)),
            Self::Set(items) => Frame::Set(items.into_iter().map(|i| i.map_bytes(f)).collect()),
            Self::Push(items) => Frame::Push(items.into_iter().map(|i| i.map_bytes(f)).collect()),
            Self::Attributed { attributes, value } => Frame::Attributed {
                attributes: map_pairs(attributes, f),
                value: Box::new(value.map_bytes(f)),
            },
            Self::StreamedString(chunks) => {
                Frame::StreamedString(chunks.into_iter().map(f).collect())
            }
            Self::StreamedArray(items) => {
                Frame::StreamedArray(items.into_iter().map(|i| i.map_bytes(f)).collect())
            }
            Self::StreamedSet(items) => {
                Frame::StreamedSet(items.into_iter().map(|i| i.map_bytes(f)).collect())
            }
            Self::StreamedMap(p) => Frame::StreamedMap(map_pairs(p, f)),
        }
    }
}

fn map_pairs<B: AsRef<[u8]>, C>(
    pairs: Vec<(Frame<B>, Frame<B>)>,
    f: &mut impl FnMut(B) -> C,
) -> Vec<(Frame<C>, Frame<C>)> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.map_bytes(f), v.map_bytes(f)))
        .collect()
}

impl Frame<&[u8]> {
    /// The same frame owning its strings, as [`Bytes`] copies.
    pub fn to_owned_frame(&self) -> Frame<Bytes> {
        self.clone().map_bytes(&mut Bytes::copy_from_slice)
    }
}

/// A RESP type byte: `+`, `$`, `%` … Unknown bytes are representable, so that a caller can
/// report or forward what it does not understand.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Kind(pub u8);

impl Kind {
    /// `+`
    pub const SIMPLE_STRING: Self = Self(b'+');
    /// `-`
    pub const SIMPLE_ERROR: Self = Self(b'-');
    /// `:`
    pub const INTEGER: Self = Self(b':');
    /// `$` (also RESP2's null bulk string and the streamed string)
    pub const BULK_STRING: Self = Self(b'$');
    /// `*` (also RESP2's null array and the streamed array)
    pub const ARRAY: Self = Self(b'*');
    /// `_`
    pub const NULL: Self = Self(b'_');
    /// `#`
    pub const BOOLEAN: Self = Self(b'#');
    /// `,`
    pub const DOUBLE: Self = Self(b',');
    /// `(`
    pub const BIG_NUMBER: Self = Self(b'(');
    /// `!`
    pub const BULK_ERROR: Self = Self(b'!');
    /// `=`
    pub const VERBATIM_STRING: Self = Self(b'=');
    /// `%`
    pub const MAP: Self = Self(b'%');
    /// `~`
    pub const SET: Self = Self(b'~');
    /// `>`
    pub const PUSH: Self = Self(b'>');
    /// `|`: attributes, which travel with the value after them.
    pub const ATTRIBUTE: Self = Self(b'|');
    /// `;`: a chunk of a streamed string (never a frame of its own).
    pub const STREAMED_CHUNK: Self = Self(b';');
    /// `.`: the end of a streamed aggregate (never a frame of its own).
    pub const STREAMED_END: Self = Self(b'.');
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kind({:?})", char::from(self.0))
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_ascii_graphic() {
            write!(f, "'{}'", char::from(self.0))
        } else {
            write!(f, "0x{:02x}", self.0)
        }
    }
}
