//! [`FrameSink`]: builds a [`Frame`] from scan events, slicing strings out of the input.

use alloc::{boxed::Box, vec::Vec};

use bytes::Bytes;

use crate::{
    frame::{Frame, Kind},
    scan::{Event, Sink},
};

/// Where a frame's strings come from: the caller's slice, or a frozen buffer.
pub(crate) trait Source {
    type Slice;
    /// Bytes `start..end` of the frame; empty if the range is not in it (which the scanner
    /// never reports).
    fn slice(&self, start: usize, end: usize) -> Self::Slice;
    /// How many bytes there are.
    fn len(&self) -> usize;
}

impl<'a> Source for &'a [u8] {
    type Slice = &'a [u8];

    #[inline]
    fn slice(&self, start: usize, end: usize) -> &'a [u8] {
        self.get(start..end).unwrap_or_default()
    }

    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
}

impl Source for Bytes {
    type Slice = Self;

    #[inline]
    fn slice(&self, start: usize, end: usize) -> Self {
        if start <= end && end <= Self::len(self) {
            Self::slice(self, start..end)
        } else {
            Self::new()
        }
    }

    fn len(&self) -> usize {
        Self::len(self)
    }
}

/// An aggregate being filled, until the scanner closes it.
enum Open<B> {
    Items {
        kind: Kind,
        streamed: bool,
        items: Vec<Frame<B>>,
    },
    Pairs {
        streamed: bool,
        pairs: Vec<(Frame<B>, Frame<B>)>,
        key: Option<Frame<B>>,
    },
    /// `len` attribute pairs, then the value they belong to.
    Attributes {
        len: usize,
        pairs: Vec<(Frame<B>, Frame<B>)>,
        key: Option<Frame<B>>,
        value: Option<Frame<B>>,
    },
    Chunks(Vec<B>),
}

/// Builds one frame from the events of a scan.
pub(crate) struct FrameSink<'s, S: Source> {
    source: &'s S,
    stack: Vec<Open<S::Slice>>,
    root: Option<Frame<S::Slice>>,
    /// Elements the aggregates may still reserve room for, all levels together: a third of
    /// the input's bytes, as each value takes at least three. The scanner's hint bounds one
    /// level by the bytes at hand; without this, nested declared lengths would each reserve
    /// that much.
    budget: usize,
}

impl<'s, S: Source> FrameSink<'s, S> {
    pub(crate) fn new(source: &'s S) -> Self {
        Self {
            source,
            stack: Vec::new(),
            root: None,
            budget: source.len() / 3,
        }
    }

    /// The frame, once its last event has been seen.
    pub(crate) fn into_frame(self) -> Option<Frame<S::Slice>> {
        self.root
    }

    /// Puts a finished value into the aggregate around it.
    fn deliver(&mut self, value: Frame<S::Slice>) {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Open::Items { items, .. }) => items.push(value),
            Some(Open::Pairs { pairs, key, .. }) => match key.take() {
                None => *key = Some(value),
                Some(k) => pairs.push((k, value)),
            },
            Some(Open::Attributes {
                len,
                pairs,
                key,
                value: slot,
            }) => {
                if pairs.len() < *len {
                    match key.take() {
                        None => *key = Some(value),
                        Some(k) => pairs.push((k, value)),
                    }
                } else {
                    *slot = Some(value);
                }
            }
            // A streamed string holds chunks, never values.
            Some(Open::Chunks(_)) => {}
        }
    }

    /// A leaf value. Inside an array it is written straight into the array: `resize_with`
    /// runs `make` where the element goes, whereas moving each small frame through the stack
    /// into `push` cost a store-forwarding stall per element (`c_int_arrays` bench).
    #[inline(always)]
    fn leaf(&mut self, make: impl Fn(&S) -> Frame<S::Slice>) {
        let source = self.source;
        match self.stack.last_mut() {
            Some(Open::Items { items, .. }) => items.extend(core::iter::once_with(|| make(source))),
            // A frame that is a single value: built where it is kept, for the same reason.
            None => self.root = Some(make(source)),
            Some(_) => self.deliver(make(source)),
        }
    }
}

impl<S: Source> Sink for FrameSink<'_, S> {
    #[inline(always)]
    fn integer(&mut self, value: i64) {
        self.leaf(|_| Frame::Integer(value));
    }

    #[inline]
    fn event(&mut self, event: Event) {
        match event {
            Event::Integer(_)
            | Event::Bulk { .. }
            | Event::Line { .. }
            | Event::Boolean(_)
            | Event::Null
            | Event::NullBulkString
            | Event::NullArray
            | Event::Verbatim { .. } => self.leaf(|source| leaf_frame(source, event)),
            Event::Chunk { start, end } => {
                let chunk = self.source.slice(start, end);
                if let Some(Open::Chunks(chunks)) = self.stack.last_mut() {
                    chunks.push(chunk);
                }
            }
            Event::Close => {
                if let Some(frame) = self.stack.pop().and_then(finish) {
                    self.deliver(frame);
                }
            }
            Event::Open {
                kind,
                len,
                streamed,
                hint,
            } => {
                let hint = hint.min(self.budget);
                self.budget -= hint;
                let open = open(kind, streamed, len, hint);
                if !streamed && len == 0 && kind != Kind::ATTRIBUTE {
                    if let Some(frame) = finish(open) {
                        self.deliver(frame);
                    }
                } else {
                    self.stack.push(open);
                }
            }
        }
    }
}

/// The frame of a leaf event, its strings sliced out of `source`; a null for the structural
/// events (`Open`, `Chunk`, `Close`), which callers never pass.
#[inline(always)]
pub(crate) fn leaf_frame<S: Source>(source: &S, event: Event) -> Frame<S::Slice> {
    leaf_frame_with(event, |start, end| source.slice(start, end))
}

/// [`leaf_frame`] with its string (a leaf has one at most) made by `slice` from the string's
/// start and end; `slice` is not called for a leaf without one.
#[inline(always)]
pub(crate) fn leaf_frame_with<B>(event: Event, slice: impl FnOnce(usize, usize) -> B) -> Frame<B> {
    match event {
        Event::Integer(n) => Frame::Integer(n),
        Event::Bulk { kind, start, end } => {
            let payload = slice(start, end);
            if kind == Kind::BULK_ERROR {
                Frame::BulkError(payload)
            } else {
                Frame::BulkString(payload)
            }
        }
        Event::Line { kind, start, end } => {
            let text = slice(start, end);
            match kind {
                Kind::SIMPLE_ERROR => Frame::SimpleError(text),
                Kind::DOUBLE => Frame::Double(text),
                Kind::BIG_NUMBER => Frame::BigNumber(text),
                _ => Frame::SimpleString(text),
            }
        }
        Event::Verbatim { format, start, end } => Frame::VerbatimString {
            format,
            text: slice(start, end),
        },
        Event::Boolean(b) => Frame::Boolean(b),
        Event::NullBulkString => Frame::NullBulkString,
        Event::NullArray => Frame::NullArray,
        Event::Null | Event::Open { .. } | Event::Chunk { .. } | Event::Close => Frame::Null,
    }
}

/// A new aggregate of `kind`, reserving room for `hint` elements.
fn open<B>(kind: Kind, streamed: bool, len: usize, hint: usize) -> Open<B> {
    match kind {
        Kind::BULK_STRING => Open::Chunks(Vec::new()),
        Kind::MAP => Open::Pairs {
            streamed,
            pairs: Vec::with_capacity(hint),
            key: None,
        },
        Kind::ATTRIBUTE => Open::Attributes {
            len,
            pairs: Vec::with_capacity(hint),
            key: None,
            value: None,
        },
        _ => Open::Items {
            kind,
            streamed,
            items: Vec::with_capacity(hint),
        },
    }
}

/// The frame of a closed aggregate; `None` only for attributes closed without a value,
/// which the scanner never does.
fn finish<B>(open: Open<B>) -> Option<Frame<B>> {
    Some(match open {
        Open::Items {
            kind,
            streamed,
            items,
        } => match (kind, streamed) {
            (Kind::SET, false) => Frame::Set(items),
            (Kind::SET, true) => Frame::StreamedSet(items),
            (Kind::PUSH, _) => Frame::Push(items),
            (_, true) => Frame::StreamedArray(items),
            _ => Frame::Array(items),
        },
        Open::Pairs {
            streamed: false,
            pairs,
            ..
        } => Frame::Map(pairs),
        Open::Pairs { pairs, .. } => Frame::StreamedMap(pairs),
        Open::Attributes { pairs, value, .. } => Frame::Attributed {
            attributes: pairs,
            value: Box::new(value?),
        },
        Open::Chunks(chunks) => Frame::StreamedString(chunks),
    })
}

/// Replays recorded events into a frame: the whole frame has arrived, so every declared
/// length is real and may be reserved in full.
pub(crate) fn replay<S: Source>(events: &[Event], source: &S) -> Option<Frame<S::Slice>> {
    let mut sink = FrameSink::new(source);
    for &event in events {
        let event = match event {
            Event::Open {
                kind,
                len,
                streamed,
                ..
            } => Event::Open {
                kind,
                len,
                streamed,
                hint: len,
            },
            other => other,
        };
        sink.event(event);
    }
    sink.into_frame()
}
