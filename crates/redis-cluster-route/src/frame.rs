//! Reading reply frames: the shapes the slot map and the Sentinel parsers share.

use redis_resp::Frame;

/// The elements of an array, a set or a push.
pub(crate) fn items<B>(frame: &Frame<B>) -> Option<&[Frame<B>]> {
    match frame {
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => Some(items),
        _ => None,
    }
}

/// A string's bytes.
pub(crate) fn text<B: AsRef<[u8]>>(frame: &Frame<B>) -> Option<&[u8]> {
    match frame {
        Frame::BulkString(s) | Frame::SimpleString(s) => Some(s.as_ref()),
        Frame::VerbatimString { text, .. } => Some(text.as_ref()),
        _ => None,
    }
}

/// An integer.
pub(crate) fn int<B>(frame: &Frame<B>) -> Option<i64> {
    match frame {
        Frame::Integer(n) => Some(*n),
        _ => None,
    }
}

/// The value named `name` in a RESP3 map or a RESP2 flat array of names and values.
pub(crate) fn field<'f, B: AsRef<[u8]>>(frame: &'f Frame<B>, name: &str) -> Option<&'f Frame<B>> {
    let is = |key: &Frame<B>| text(key) == Some(name.as_bytes());
    match frame {
        Frame::Map(pairs) => pairs.iter().find(|(k, _)| is(k)).map(|(_, v)| v),
        Frame::Array(flat) => flat
            .chunks_exact(2)
            .find(|pair| is(&pair[0]))
            .map(|pair| &pair[1]),
        _ => None,
    }
}
