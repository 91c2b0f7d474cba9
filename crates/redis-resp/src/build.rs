//! Turns a scanned tape into a [`Frame`], slicing strings out of the frame's bytes.

use alloc::{boxed::Box, vec::Vec};

use bytes::Bytes;

use crate::{frame::Frame, frame::Kind, scan::Node};

/// Where a frame's strings come from: the caller's slice, or a frozen buffer.
pub(crate) trait Source {
    type Slice;
    /// Bytes `start..end` of the frame. The tape only holds ranges inside the frame, so the
    /// empty fallback is never taken.
    fn slice(&self, start: usize, end: usize) -> Self::Slice;
}

impl<'a> Source for &'a [u8] {
    type Slice = &'a [u8];

    fn slice(&self, start: usize, end: usize) -> &'a [u8] {
        self.get(start..end).unwrap_or_default()
    }
}

impl Source for Bytes {
    type Slice = Self;

    fn slice(&self, start: usize, end: usize) -> Self {
        if start <= end && end <= self.len() {
            Self::slice(self, start..end)
        } else {
            Self::new()
        }
    }
}

/// An aggregate being filled.
enum Open<B> {
    Items {
        kind: Kind,
        streamed: bool,
        len: usize,
        items: Vec<Frame<B>>,
    },
    Pairs {
        streamed: bool,
        len: usize,
        pairs: Vec<(Frame<B>, Frame<B>)>,
        key: Option<Frame<B>>,
    },
    /// Attribute pairs, then the value they belong to.
    Attributes {
        len: usize,
        pairs: Vec<(Frame<B>, Frame<B>)>,
        key: Option<Frame<B>>,
    },
    Chunks {
        len: usize,
        chunks: Vec<B>,
    },
}

/// Builds the frame that `tape` describes. A frame without aggregates allocates nothing.
pub(crate) fn build<S: Source>(tape: &[Node], source: &S) -> Frame<S::Slice> {
    let mut stack: Vec<Open<S::Slice>> = Vec::new();
    for node in tape {
        let value = match *node {
            Node::Line { kind, start, end } => {
                let text = source.slice(start, end);
                match kind {
                    Kind::SIMPLE_ERROR => Frame::SimpleError(text),
                    Kind::DOUBLE => Frame::Double(text),
                    Kind::BIG_NUMBER => Frame::BigNumber(text),
                    _ => Frame::SimpleString(text),
                }
            }
            Node::Integer(n) => Frame::Integer(n),
            Node::Boolean(b) => Frame::Boolean(b),
            Node::Null => Frame::Null,
            Node::NullBulkString => Frame::NullBulkString,
            Node::NullArray => Frame::NullArray,
            Node::Bulk { kind, start, end } => {
                let payload = source.slice(start, end);
                if kind == Kind::BULK_ERROR {
                    Frame::BulkError(payload)
                } else {
                    Frame::BulkString(payload)
                }
            }
            Node::Verbatim { format, start, end } => Frame::VerbatimString {
                format,
                text: source.slice(start, end),
            },
            Node::Chunk { start, end } => {
                let chunk = source.slice(start, end);
                match stack.last_mut() {
                    Some(Open::Chunks { len, chunks }) if chunks.len() + 1 < *len => {
                        chunks.push(chunk);
                        continue;
                    }
                    Some(Open::Chunks { chunks, .. }) => {
                        chunks.push(chunk);
                        match stack.pop() {
                            Some(Open::Chunks { chunks, .. }) => Frame::StreamedString(chunks),
                            _ => continue,
                        }
                    }
                    _ => continue,
                }
            }
            Node::StreamedString { chunks: 0 } => Frame::StreamedString(Vec::new()),
            Node::StreamedString { chunks } => {
                stack.push(Open::Chunks {
                    len: chunks,
                    chunks: Vec::with_capacity(chunks),
                });
                continue;
            }
            Node::Aggregate {
                kind,
                len,
                streamed,
            } => {
                if len == 0 && kind != Kind::ATTRIBUTE {
                    empty(kind, streamed)
                } else {
                    stack.push(match kind {
                        Kind::MAP => Open::Pairs {
                            streamed,
                            len,
                            pairs: Vec::with_capacity(len),
                            key: None,
                        },
                        Kind::ATTRIBUTE => Open::Attributes {
                            len,
                            pairs: Vec::with_capacity(len),
                            key: None,
                        },
                        _ => Open::Items {
                            kind,
                            streamed,
                            len,
                            items: Vec::with_capacity(len),
                        },
                    });
                    continue;
                }
            }
        };
        if let Some(root) = deliver(&mut stack, value) {
            return root;
        }
    }
    // A complete tape always ends with its root; an empty one cannot come from the scanner.
    Frame::Null
}

/// The aggregate of `kind` with no elements.
fn empty<B>(kind: Kind, streamed: bool) -> Frame<B> {
    match (kind, streamed) {
        (Kind::MAP, false) => Frame::Map(Vec::new()),
        (Kind::MAP, true) => Frame::StreamedMap(Vec::new()),
        (Kind::SET, false) => Frame::Set(Vec::new()),
        (Kind::SET, true) => Frame::StreamedSet(Vec::new()),
        (Kind::PUSH, _) => Frame::Push(Vec::new()),
        (_, true) => Frame::StreamedArray(Vec::new()),
        _ => Frame::Array(Vec::new()),
    }
}

/// Hands a finished value to the aggregate around it; returns the root once it is finished.
fn deliver<B>(stack: &mut Vec<Open<B>>, mut value: Frame<B>) -> Option<Frame<B>> {
    loop {
        let Some(open) = stack.last_mut() else {
            return Some(value);
        };
        let full = match open {
            Open::Items { len, items, .. } => {
                items.push(value);
                items.len() == *len
            }
            Open::Pairs {
                len, pairs, key, ..
            } => match key.take() {
                None => {
                    *key = Some(value);
                    return None;
                }
                Some(k) => {
                    pairs.push((k, value));
                    pairs.len() == *len
                }
            },
            Open::Attributes { len, pairs, key } => {
                if pairs.len() < *len {
                    match key.take() {
                        None => *key = Some(value),
                        Some(k) => pairs.push((k, value)),
                    }
                    return None;
                }
                let Some(Open::Attributes { pairs, .. }) = stack.pop() else {
                    return None;
                };
                value = Frame::Attributed {
                    attributes: pairs,
                    value: Box::new(value),
                };
                continue;
            }
            // Chunks are delivered in `build`, never as values.
            Open::Chunks { .. } => return None,
        };
        if !full {
            return None;
        }
        value = stack.pop().and_then(finish)?;
    }
}

/// The frame of a filled aggregate.
fn finish<B>(open: Open<B>) -> Option<Frame<B>> {
    Some(match open {
        Open::Items {
            kind,
            streamed,
            items,
            ..
        } => match (kind, streamed) {
            (Kind::ARRAY, false) => Frame::Array(items),
            (Kind::ARRAY, true) => Frame::StreamedArray(items),
            (Kind::SET, false) => Frame::Set(items),
            (Kind::SET, true) => Frame::StreamedSet(items),
            (Kind::PUSH, _) => Frame::Push(items),
            _ => Frame::Array(items),
        },
        Open::Pairs {
            streamed: false,
            pairs,
            ..
        } => Frame::Map(pairs),
        Open::Pairs { pairs, .. } => Frame::StreamedMap(pairs),
        Open::Attributes { .. } | Open::Chunks { .. } => return None,
    })
}
