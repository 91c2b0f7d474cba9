//! The resumable scanner: validates one frame, finds where it ends, and reports its structure
//! as [`Event`]s to a [`Sink`] (which builds frames, records them, or ignores them).

use alloc::vec::Vec;

use crate::{
    error::{DecodeError, ErrorKind},
    frame::Kind,
    limits::Config,
    parse::{LineEnd, int_line, is_big_number, is_strict_double, line_end, parse_double},
};

/// One step of a frame's structure, in wire order. Offsets count from the frame's first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A simple string, simple error, double or big number: its text.
    Line {
        kind: Kind,
        start: usize,
        end: usize,
    },
    Integer(i64),
    Boolean(bool),
    Null,
    NullBulkString,
    NullArray,
    /// A bulk string or bulk error: its payload.
    Bulk {
        kind: Kind,
        start: usize,
        end: usize,
    },
    /// A verbatim string: the text after `xxx:`.
    Verbatim {
        format: [u8; 3],
        start: usize,
        end: usize,
    },
    /// An aggregate opens: `len` elements, or pairs for maps and attributes (an attribute's
    /// pairs are followed by the value it belongs to). A streamed aggregate or string
    /// (`kind` `$`) has no `len`. Every aggregate with a value in it, and every streamed one,
    /// is closed by [`Event::Close`]; an empty one is complete at once. `hint` is how many
    /// elements the bytes at hand could hold, which bounds what a sink reserves.
    Open {
        kind: Kind,
        len: usize,
        streamed: bool,
        hint: usize,
    },
    /// A chunk of a streamed string.
    Chunk {
        start: usize,
        end: usize,
    },
    /// The innermost open aggregate or streamed string is complete.
    Close,
}

/// Where a scan reports a frame's structure.
pub(crate) trait Sink {
    fn event(&mut self, event: Event);

    /// An integer: the commonest event, given its own entry so that a sink can take it
    /// without matching on [`Event`].
    #[inline(always)]
    fn integer(&mut self, value: i64) {
        self.event(Event::Integer(value));
    }
}

/// Structure not wanted: only the frame's end is.
impl Sink for () {
    #[inline(always)]
    fn event(&mut self, _: Event) {}
}

/// Structure recorded, to be replayed into a frame once the whole frame has arrived.
impl Sink for Vec<Event> {
    #[inline]
    fn event(&mut self, event: Event) {
        self.push(event);
    }
}

/// An aggregate (or streamed string) that is open while scanning.
#[derive(Clone, Copy, Debug)]
struct Level {
    kind: Kind,
    streamed: bool,
    /// Values still to come (not streamed), or values seen so far (streamed).
    count: u64,
}

/// What a scan found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scanned {
    /// A whole frame of this many bytes.
    Complete { len: usize },
    /// More input is needed: at least this many bytes, when known.
    Incomplete { needed: Option<usize> },
}

/// What the header line of a length-prefixed type held.
enum Header {
    Incomplete,
    /// `?`: a streamed value, now open.
    Streamed,
    /// A length, and the index after the line.
    Length {
        len: i64,
        next: usize,
    },
}

/// A payload whose bytes have not all arrived, and the event to report once they have.
#[derive(Clone, Copy, Debug)]
struct Pending {
    /// Index just past the payload's CRLF.
    end: usize,
    event: Event,
}

/// Scanning state kept between calls, so that no byte is looked at twice however the frame
/// is split across reads.
#[derive(Debug, Default)]
pub(crate) struct Scanner {
    /// The first byte not scanned yet.
    pos: usize,
    /// Where to go on searching for the CRLF of a long line that started at `pos`.
    line_searched: usize,
    pending: Option<Pending>,
    stack: Vec<Level>,
}

const fn error(offset: usize, kind: ErrorKind) -> DecodeError {
    DecodeError::new(offset, kind)
}

impl Scanner {
    /// Whether no frame is under way: nothing has been scanned since the last reset. A
    /// caller that reads a whole frame some other way tries that only then, so that a frame
    /// arriving in pieces costs one pass over its bytes, not one per piece.
    pub(crate) fn is_fresh(&self) -> bool {
        self.pos == 0 && self.line_searched == 0 && self.pending.is_none() && self.stack.is_empty()
    }

    pub(crate) fn reset(&mut self) {
        self.pos = 0;
        self.line_searched = 0;
        self.pending = None;
        self.stack.clear();
    }

    /// Goes on scanning the frame at the start of `buf`, which holds every byte it held at the
    /// previous call and maybe more; the events of bytes already scanned are not repeated.
    /// After `Complete` or an error, call [`Scanner::reset`].
    pub(crate) fn scan<S: Sink>(
        &mut self,
        buf: &[u8],
        config: &Config,
        sink: &mut S,
    ) -> Result<Scanned, DecodeError> {
        let limits = &config.limits;
        let max_depth = limits.depth();
        if let Some(pending) = self.pending {
            if buf.len() < pending.end {
                return Ok(Scanned::Incomplete {
                    needed: Some(pending.end - buf.len()),
                });
            }
            self.pending = None;
            if self.payload_done(buf, pending, config, sink)? {
                return Ok(Scanned::Complete { len: self.pos });
            }
        }
        loop {
            let start = self.pos;
            if start > limits.max_frame_len {
                let max = limits.max_frame_len;
                return Err(error(start, ErrorKind::FrameTooLong { max }));
            }
            let Some(&byte) = buf.get(start) else {
                return Ok(Scanned::Incomplete { needed: Some(1) });
            };
            let kind = Kind(byte);
            let mut in_string = false;
            if let Some(level) = self.stack.last().filter(|l| l.streamed) {
                in_string = level.kind == Kind::BULK_STRING;
                if in_string && kind != Kind::STREAMED_CHUNK {
                    return Err(error(start, ErrorKind::ExpectedChunk(kind)));
                }
                let per = if level.kind == Kind::MAP { 2 } else { 1 };
                if !in_string && level.count >= limits.max_elements.saturating_mul(per) {
                    let (len, max) = (level.count / per + 1, limits.max_elements);
                    return Err(error(start, ErrorKind::TooManyElements { len, max }));
                }
            }
            let done = match kind {
                Kind::INTEGER => {
                    let Some((value, next)) = int_line(buf, start + 1)? else {
                        return Ok(Scanned::Incomplete { needed: None });
                    };
                    sink.integer(value);
                    self.pos = next;
                    self.integer_run(buf, limits.max_frame_len, sink)?;
                    self.close_value(sink)
                }
                Kind::BULK_STRING
                | Kind::BULK_ERROR
                | Kind::VERBATIM_STRING
                | Kind::STREAMED_CHUNK => {
                    if kind == Kind::STREAMED_CHUNK && !in_string {
                        return Err(error(start, ErrorKind::StrayChunk));
                    }
                    let streamable = kind == Kind::BULK_STRING;
                    let (len, next) = match self.header(buf, start, streamable, max_depth, sink)? {
                        Header::Incomplete => return Ok(Scanned::Incomplete { needed: None }),
                        Header::Streamed => continue,
                        Header::Length { len, next } => (len, next),
                    };
                    if len == -1 && kind == Kind::BULK_STRING {
                        sink.event(Event::NullBulkString);
                        self.close_value(sink)
                    } else {
                        let Some(pending) = self.payload(buf, start, kind, len, next, config)?
                        else {
                            return Ok(Scanned::Incomplete { needed: None });
                        };
                        if kind == Kind::STREAMED_CHUNK && pending.end == next + 2 {
                            // `;0`: the end of a streamed string, with no payload of its own.
                            self.pos = next;
                            self.stack.pop();
                            sink.event(Event::Close);
                            self.close_value(sink)
                        } else if buf.len() < pending.end {
                            self.pending = Some(pending);
                            return Ok(Scanned::Incomplete {
                                needed: Some(pending.end - buf.len()),
                            });
                        } else if self.payload_done(buf, pending, config, sink)? {
                            return Ok(Scanned::Complete { len: self.pos });
                        } else {
                            continue;
                        }
                    }
                }
                Kind::ARRAY | Kind::SET | Kind::MAP | Kind::PUSH | Kind::ATTRIBUTE => {
                    let streamable = kind != Kind::PUSH && kind != Kind::ATTRIBUTE;
                    let (len, next) = match self.header(buf, start, streamable, max_depth, sink)? {
                        Header::Incomplete => return Ok(Scanned::Incomplete { needed: None }),
                        Header::Streamed => continue,
                        Header::Length { len, next } => (len, next),
                    };
                    if len == -1 && kind == Kind::ARRAY {
                        sink.event(Event::NullArray);
                        self.close_value(sink)
                    } else {
                        let len = u64::try_from(len)
                            .map_err(|_| error(start + 1, ErrorKind::NegativeLength(len)))?;
                        if len > limits.max_elements {
                            let max = limits.max_elements;
                            return Err(error(start + 1, ErrorKind::TooManyElements { len, max }));
                        }
                        if self.stack.len() >= max_depth {
                            return Err(error(start, ErrorKind::TooDeep { max: max_depth }));
                        }
                        // Values to wait for: pairs count twice, an attribute's value once more.
                        let values = match kind {
                            Kind::MAP => len * 2,
                            Kind::ATTRIBUTE => len * 2 + 1,
                            _ => len,
                        };
                        // Each value takes at least 3 bytes (`_\r\n`).
                        let room = (buf.len().saturating_sub(next) / 3) as u64;
                        let len = len as usize; // <= max_elements, and only ever a count
                        sink.event(Event::Open {
                            kind,
                            len,
                            streamed: false,
                            hint: len.min(room as usize),
                        });
                        if values == 0 {
                            self.close_value(sink)
                        } else {
                            self.stack.push(Level {
                                kind,
                                streamed: false,
                                count: values,
                            });
                            continue;
                        }
                    }
                }
                Kind::SIMPLE_STRING | Kind::SIMPLE_ERROR | Kind::DOUBLE | Kind::BIG_NUMBER => {
                    let from = self.line_searched.max(start + 1);
                    let cr = match line_end(buf, from, config.lenient)? {
                        LineEnd::Found(cr) => cr,
                        LineEnd::Incomplete(resume) => {
                            self.line_searched = resume;
                            return Ok(Scanned::Incomplete { needed: None });
                        }
                    };
                    self.line_searched = 0;
                    if kind == Kind::DOUBLE || kind == Kind::BIG_NUMBER {
                        let text = buf.get(start + 1..cr).unwrap_or_default();
                        let (valid, rule) = match kind {
                            Kind::DOUBLE if config.lenient => {
                                (parse_double(text).is_some(), ErrorKind::BadDouble)
                            }
                            Kind::DOUBLE => (is_strict_double(text), ErrorKind::BadDouble),
                            _ => (is_big_number(text), ErrorKind::BadBigNumber),
                        };
                        if !valid {
                            return Err(error(start + 1, rule));
                        }
                    }
                    sink.event(Event::Line {
                        kind,
                        start: start + 1,
                        end: cr,
                    });
                    self.pos = cr + 2;
                    self.close_value(sink)
                }
                Kind::NULL | Kind::BOOLEAN | Kind::STREAMED_END => {
                    let (event, len) = match (kind, buf.get(start + 1..start + 3)) {
                        (_, None) => return self.short_line(buf, start),
                        (Kind::NULL, Some(b"\r\n")) => (Some(Event::Null), 3),
                        (Kind::NULL, _) => return Err(error(start + 1, ErrorKind::BadNull)),
                        (Kind::STREAMED_END, Some(b"\r\n")) => (None, 3),
                        (Kind::STREAMED_END, _) => {
                            return Err(error(start + 1, ErrorKind::BadLineEnd));
                        }
                        (_, Some(line)) => match buf.get(start + 1..start + 4) {
                            Some(b"t\r\n") => (Some(Event::Boolean(true)), 4),
                            Some(b"f\r\n") => (Some(Event::Boolean(false)), 4),
                            None if matches!(line, b"t\r" | b"f\r") => {
                                return Ok(Scanned::Incomplete { needed: Some(1) });
                            }
                            _ => return Err(error(start + 1, ErrorKind::BadBoolean)),
                        },
                    };
                    self.pos = start + len;
                    match event {
                        Some(event) => {
                            sink.event(event);
                            self.close_value(sink)
                        }
                        None => self.end_streamed(start, sink)?,
                    }
                }
                _ => return Err(error(start, ErrorKind::UnknownType(kind))),
            };
            if done {
                return Ok(Scanned::Complete { len: self.pos });
            }
        }
    }

    /// Checks a length-prefixed payload's header and returns what to wait for, or `None` when
    /// a verbatim string's bytes are not all here (its `xxx:` is checked with them; the header
    /// is then read again at the next call, which costs O(1) a call).
    fn payload(
        &mut self,
        buf: &[u8],
        start: usize,
        kind: Kind,
        len: i64,
        next: usize,
        config: &Config,
    ) -> Result<Option<Pending>, DecodeError> {
        let limits = &config.limits;
        let len =
            u64::try_from(len).map_err(|_| error(start + 1, ErrorKind::NegativeLength(len)))?;
        if len > limits.max_bulk_len {
            let max = limits.max_bulk_len;
            return Err(error(start + 1, ErrorKind::BulkTooLong { len, max }));
        }
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| next.checked_add(len)?.checked_add(2))
            .filter(|&end| end <= limits.max_frame_len)
            .ok_or(error(
                start,
                ErrorKind::FrameTooLong {
                    max: limits.max_frame_len,
                },
            ))?;
        let payload_end = end - 2;
        let event = match kind {
            Kind::STREAMED_CHUNK => Event::Chunk {
                start: next,
                end: payload_end,
            },
            Kind::VERBATIM_STRING => {
                if payload_end - next < 4 {
                    return Err(error(start + 1, ErrorKind::BadVerbatim));
                }
                if buf.len() < end {
                    self.pos = start;
                    return Ok(None);
                }
                let format = match buf.get(next..next + 4) {
                    Some([a, b, c, b':']) => [*a, *b, *c],
                    _ => return Err(error(next, ErrorKind::BadVerbatim)),
                };
                Event::Verbatim {
                    format,
                    start: next + 4,
                    end: payload_end,
                }
            }
            _ => Event::Bulk {
                kind,
                start: next,
                end: payload_end,
            },
        };
        Ok(Some(Pending { end, event }))
    }

    /// A payload's bytes are all here: checks its CRLF and reports it. Returns whether the
    /// whole frame is complete.
    fn payload_done<S: Sink>(
        &mut self,
        buf: &[u8],
        pending: Pending,
        config: &Config,
        sink: &mut S,
    ) -> Result<bool, DecodeError> {
        let crlf = pending.end - 2;
        if !config.lenient && buf.get(crlf..pending.end) != Some(b"\r\n") {
            return Err(error(crlf, ErrorKind::BadPayloadEnd));
        }
        self.pos = pending.end;
        sink.event(pending.event);
        Ok(!matches!(pending.event, Event::Chunk { .. }) && self.close_value(sink))
    }

    /// The header line of a length-prefixed type at `start`: a length (`pos` moves past the
    /// line), or, where `streamable`, `?`: a streamed value, opened here.
    fn header<S: Sink>(
        &mut self,
        buf: &[u8],
        start: usize,
        streamable: bool,
        max_depth: usize,
        sink: &mut S,
    ) -> Result<Header, DecodeError> {
        if streamable && buf.get(start + 1) == Some(&b'?') {
            let kind = Kind(buf.get(start).copied().unwrap_or_default());
            self.open_streamed(buf, start, kind, max_depth, sink)?;
            return Ok(if self.pos == start {
                Header::Incomplete
            } else {
                Header::Streamed
            });
        }
        let Some((len, next)) = int_line(buf, start + 1)? else {
            return Ok(Header::Incomplete);
        };
        self.pos = next;
        Ok(Header::Length { len, next })
    }

    /// `*?`, `~?`, `%?` or `$?` at `start`. Leaves `pos` at `start` when the line is not all
    /// here yet.
    fn open_streamed<S: Sink>(
        &mut self,
        buf: &[u8],
        start: usize,
        kind: Kind,
        max_depth: usize,
        sink: &mut S,
    ) -> Result<(), DecodeError> {
        let Some(line) = buf.get(start + 2..start + 4) else {
            return match buf.get(start + 2) {
                Some(b'\r') | None => Ok(()),
                Some(_) => Err(error(start + 2, ErrorKind::BadLineEnd)),
            };
        };
        if line != b"\r\n" {
            return Err(error(start + 2, ErrorKind::BadLineEnd));
        }
        if self.stack.len() >= max_depth {
            return Err(error(start, ErrorKind::TooDeep { max: max_depth }));
        }
        self.stack.push(Level {
            kind,
            streamed: true,
            count: 0,
        });
        sink.event(Event::Open {
            kind,
            len: 0,
            streamed: true,
            hint: 0,
        });
        self.pos = start + 4;
        Ok(())
    }

    /// A line of a fixed size was cut short: wait, unless what is there is already wrong.
    fn short_line(&self, buf: &[u8], start: usize) -> Result<Scanned, DecodeError> {
        let kind = Kind(buf.get(start).copied().unwrap_or_default());
        let rest = buf.get(start + 1..).unwrap_or_default();
        match kind {
            Kind::BOOLEAN if !matches!(rest, [] | [b't' | b'f']) => {
                Err(error(start + 1, ErrorKind::BadBoolean))
            }
            Kind::NULL if !matches!(rest, [] | [b'\r']) => {
                Err(error(start + 1, ErrorKind::BadNull))
            }
            Kind::STREAMED_END if !matches!(rest, [] | [b'\r']) => {
                Err(error(start + 1, ErrorKind::BadLineEnd))
            }
            _ => Ok(Scanned::Incomplete { needed: None }),
        }
    }

    /// After an integer inside an aggregate, reads the integers that follow it in the same
    /// aggregate (the shape of most numeric replies) without the general dispatch, stopping
    /// before the aggregate's last value, anything else, or an incomplete line. Counted with
    /// `benches/resp.rs` (`c_int_arrays`).
    #[inline(always)]
    fn integer_run<S: Sink>(
        &mut self,
        buf: &[u8],
        max_frame_len: usize,
        sink: &mut S,
    ) -> Result<(), DecodeError> {
        while let Some(level) = self.stack.last_mut() {
            let pos = self.pos;
            if level.streamed || level.count <= 1 || pos > max_frame_len {
                break;
            }
            if buf.get(pos) != Some(&b':') {
                break;
            }
            let Some((value, next)) = int_line(buf, pos + 1)? else {
                break;
            };
            sink.integer(value);
            level.count -= 1;
            self.pos = next;
        }
        Ok(())
    }

    /// A value has ended: counts it in the aggregate around it, closing every aggregate that
    /// it completes. Returns whether the whole frame is complete.
    #[inline]
    fn close_value<S: Sink>(&mut self, sink: &mut S) -> bool {
        while let Some(level) = self.stack.last_mut() {
            if level.streamed {
                level.count += 1;
                return false;
            }
            level.count -= 1;
            if level.count > 0 {
                return false;
            }
            self.stack.pop();
            sink.event(Event::Close);
        }
        true
    }

    /// A `.` at `start`: ends the innermost streamed aggregate.
    fn end_streamed<S: Sink>(&mut self, start: usize, sink: &mut S) -> Result<bool, DecodeError> {
        let Some(level) = self.stack.last().copied() else {
            return Err(error(start, ErrorKind::StrayEnd));
        };
        if !level.streamed || (level.kind == Kind::MAP && level.count % 2 == 1) {
            return Err(error(start, ErrorKind::StrayEnd));
        }
        self.stack.pop();
        sink.event(Event::Close);
        Ok(self.close_value(sink))
    }
}
