//! The resumable scanner: validates one frame, finds where it ends, and records its structure
//! on a tape that [`crate::build`] turns into a [`Frame`](crate::Frame) without parsing again.

use alloc::vec::Vec;

use crate::{
    error::{DecodeError, ErrorKind},
    frame::Kind,
    limits::Config,
    parse::{LineEnd, int_line, is_big_number, is_strict_double, line_end, parse_double},
};

/// One node of a frame, in pre-order. Offsets count from the frame's first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Node {
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
    /// An aggregate header. `len` counts elements, or pairs for maps and attributes; an
    /// attribute's pairs are followed by the value it is attached to.
    Aggregate {
        kind: Kind,
        len: usize,
        streamed: bool,
    },
    /// A streamed string header, followed by `chunks` chunks.
    StreamedString {
        chunks: usize,
    },
    /// A chunk of a streamed string.
    Chunk {
        start: usize,
        end: usize,
    },
}

/// An aggregate (or streamed string) that is open while scanning.
#[derive(Clone, Copy, Debug)]
struct Level {
    kind: Kind,
    streamed: bool,
    /// Values still to come (not streamed), or values seen so far (streamed).
    count: u64,
    /// The tape index of the header, to fill in a streamed length.
    node: usize,
}

/// What a scan found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scanned {
    /// A whole frame of this many bytes, starting with this type byte.
    Complete { len: usize, kind: Kind },
    /// More input is needed: at least this many bytes, when known.
    Incomplete { needed: Option<usize> },
}

/// A payload whose bytes have not all arrived.
#[derive(Clone, Copy, Debug)]
struct Pending {
    /// Index just past the payload's CRLF.
    end: usize,
    /// Whether it is a streamed string's chunk (which is no value of its own).
    chunk: bool,
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
    pub(crate) tape: Vec<Node>,
    /// Whether to record the tape (not needed to find a frame's span).
    pub(crate) record: bool,
    max_depth: usize,
}

impl Scanner {
    pub(crate) fn reset(&mut self) {
        self.pos = 0;
        self.line_searched = 0;
        self.pending = None;
        self.stack.clear();
        self.tape.clear();
    }

    /// Goes on scanning the frame at the start of `buf`, which holds every byte it held at the
    /// previous call and maybe more. After `Complete` or an error, call [`Scanner::reset`].
    pub(crate) fn scan(&mut self, buf: &[u8], config: &Config) -> Result<Scanned, DecodeError> {
        let limits = &config.limits;
        self.max_depth = limits.depth();
        loop {
            if let Some(pending) = self.pending {
                if buf.len() < pending.end {
                    return Ok(Scanned::Incomplete {
                        needed: Some(pending.end - buf.len()),
                    });
                }
                let crlf = pending.end - 2;
                if !config.lenient && buf.get(crlf..pending.end) != Some(b"\r\n") {
                    return Err(DecodeError::new(crlf, ErrorKind::BadPayloadEnd));
                }
                self.pending = None;
                self.pos = pending.end;
                if pending.chunk || !self.close_value() {
                    continue;
                }
                return Ok(self.complete(buf));
            }

            let start = self.pos;
            if start > limits.max_frame_len {
                return Err(DecodeError::new(
                    start,
                    ErrorKind::FrameTooLong {
                        max: limits.max_frame_len,
                    },
                ));
            }
            let Some(&byte) = buf.get(start) else {
                return Ok(Scanned::Incomplete { needed: Some(1) });
            };
            let kind = Kind(byte);
            let in_string = matches!(self.stack.last(), Some(l) if l.kind == Kind::BULK_STRING);
            if in_string && kind != Kind::STREAMED_CHUNK {
                return Err(DecodeError::new(start, ErrorKind::ExpectedChunk(kind)));
            }
            if let Some(level) = self.stack.last() {
                let per_element = if level.kind == Kind::MAP { 2 } else { 1 };
                if level.streamed && level.count >= limits.max_elements.saturating_mul(per_element)
                {
                    let (len, max) = (level.count / per_element + 1, limits.max_elements);
                    return Err(DecodeError::new(
                        start,
                        ErrorKind::TooManyElements { len, max },
                    ));
                }
            }
            let done = match kind {
                Kind::INTEGER => {
                    let Some((value, next)) = int_line(buf, start + 1)? else {
                        return Ok(Scanned::Incomplete { needed: None });
                    };
                    self.push(Node::Integer(value));
                    self.pos = next;
                    self.close_value()
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
                    let text = buf.get(start + 1..cr).unwrap_or_default();
                    let valid = match kind {
                        Kind::DOUBLE if config.lenient => parse_double(text).is_some(),
                        Kind::DOUBLE => is_strict_double(text),
                        Kind::BIG_NUMBER => is_big_number(text),
                        _ => true,
                    };
                    if !valid {
                        let rule = if kind == Kind::DOUBLE {
                            ErrorKind::BadDouble
                        } else {
                            ErrorKind::BadBigNumber
                        };
                        return Err(DecodeError::new(start + 1, rule));
                    }
                    self.push(Node::Line {
                        kind,
                        start: start + 1,
                        end: cr,
                    });
                    self.pos = cr + 2;
                    self.close_value()
                }
                Kind::NULL | Kind::BOOLEAN | Kind::STREAMED_END => {
                    let Some(line) = buf.get(start + 1..start + 3) else {
                        return self.short_line(buf, start);
                    };
                    match (kind, line) {
                        (Kind::NULL, b"\r\n") => {
                            self.push(Node::Null);
                            self.pos = start + 3;
                            self.close_value()
                        }
                        (Kind::BOOLEAN, _) => {
                            let value = match buf.get(start + 1..start + 4) {
                                Some(b"t\r\n") => true,
                                Some(b"f\r\n") => false,
                                None if matches!(line, b"t\r" | b"f\r") => {
                                    return Ok(Scanned::Incomplete { needed: Some(1) });
                                }
                                _ => {
                                    return Err(DecodeError::new(start + 1, ErrorKind::BadBoolean));
                                }
                            };
                            self.push(Node::Boolean(value));
                            self.pos = start + 4;
                            self.close_value()
                        }
                        (Kind::STREAMED_END, b"\r\n") => {
                            self.pos = start + 3;
                            self.end_streamed(start)?
                        }
                        (Kind::NULL, _) => {
                            return Err(DecodeError::new(start + 1, ErrorKind::BadNull));
                        }
                        _ => return Err(DecodeError::new(start + 1, ErrorKind::BadLineEnd)),
                    }
                }
                Kind::BULK_STRING
                | Kind::BULK_ERROR
                | Kind::VERBATIM_STRING
                | Kind::STREAMED_CHUNK => {
                    if kind == Kind::STREAMED_CHUNK && !in_string {
                        return Err(DecodeError::new(start, ErrorKind::StrayChunk));
                    }
                    if kind == Kind::BULK_STRING && buf.get(start + 1) == Some(&b'?') {
                        let Some(line) = buf.get(start + 2..start + 4) else {
                            return Ok(Scanned::Incomplete { needed: None });
                        };
                        if line != b"\r\n" {
                            return Err(DecodeError::new(start + 2, ErrorKind::BadLineEnd));
                        }
                        self.open(Kind::BULK_STRING, true, 0, start)?;
                        self.push(Node::StreamedString { chunks: 0 });
                        self.pos = start + 4;
                        continue;
                    }
                    let Some((len, next)) = int_line(buf, start + 1)? else {
                        return Ok(Scanned::Incomplete { needed: None });
                    };
                    self.pos = next;
                    if len == -1 && kind == Kind::BULK_STRING {
                        self.push(Node::NullBulkString);
                        if self.close_value() {
                            return Ok(self.complete(buf));
                        }
                        continue;
                    }
                    let len = u64::try_from(len)
                        .map_err(|_| DecodeError::new(start + 1, ErrorKind::NegativeLength(len)))?;
                    if len > limits.max_bulk_len {
                        let max = limits.max_bulk_len;
                        return Err(DecodeError::new(
                            start + 1,
                            ErrorKind::BulkTooLong { len, max },
                        ));
                    }
                    let end = usize::try_from(len)
                        .ok()
                        .and_then(|len| next.checked_add(len)?.checked_add(2))
                        .filter(|&end| end <= limits.max_frame_len)
                        .ok_or(DecodeError::new(
                            start,
                            ErrorKind::FrameTooLong {
                                max: limits.max_frame_len,
                            },
                        ))?;
                    let payload_end = end - 2;
                    let node = match kind {
                        Kind::STREAMED_CHUNK if payload_end == next => {
                            self.end_streamed_string();
                            if self.close_value() {
                                return Ok(self.complete(buf));
                            }
                            continue;
                        }
                        Kind::STREAMED_CHUNK => {
                            if let Some(Node::StreamedString { chunks }) =
                                self.stack.last().and_then(|l| self.tape.get_mut(l.node))
                            {
                                *chunks += 1;
                            }
                            Node::Chunk {
                                start: next,
                                end: payload_end,
                            }
                        }
                        Kind::VERBATIM_STRING => {
                            if payload_end - next < 4 {
                                return Err(DecodeError::new(start + 1, ErrorKind::BadVerbatim));
                            }
                            // Wait for the whole payload, then check the `xxx:` format: the
                            // header is read again on the next call, which costs O(1) a call.
                            if buf.len() < end {
                                self.pos = start;
                                return Ok(Scanned::Incomplete {
                                    needed: Some(end - buf.len()),
                                });
                            }
                            let format = match buf.get(next..next + 4) {
                                Some([a, b, c, b':']) => [*a, *b, *c],
                                _ => return Err(DecodeError::new(next, ErrorKind::BadVerbatim)),
                            };
                            Node::Verbatim {
                                format,
                                start: next + 4,
                                end: payload_end,
                            }
                        }
                        _ => Node::Bulk {
                            kind,
                            start: next,
                            end: payload_end,
                        },
                    };
                    self.push(node);
                    self.pending = Some(Pending {
                        end,
                        chunk: kind == Kind::STREAMED_CHUNK,
                    });
                    continue;
                }
                Kind::ARRAY | Kind::SET | Kind::MAP | Kind::PUSH | Kind::ATTRIBUTE => {
                    if buf.get(start + 1) == Some(&b'?')
                        && kind != Kind::PUSH
                        && kind != Kind::ATTRIBUTE
                    {
                        let Some(line) = buf.get(start + 2..start + 4) else {
                            return Ok(Scanned::Incomplete { needed: None });
                        };
                        if line != b"\r\n" {
                            return Err(DecodeError::new(start + 2, ErrorKind::BadLineEnd));
                        }
                        self.open(kind, true, 0, start)?;
                        self.push(Node::Aggregate {
                            kind,
                            len: 0,
                            streamed: true,
                        });
                        self.pos = start + 4;
                        continue;
                    }
                    let Some((len, next)) = int_line(buf, start + 1)? else {
                        return Ok(Scanned::Incomplete { needed: None });
                    };
                    self.pos = next;
                    if len == -1 && kind == Kind::ARRAY {
                        self.push(Node::NullArray);
                        if self.close_value() {
                            return Ok(self.complete(buf));
                        }
                        continue;
                    }
                    let len = u64::try_from(len)
                        .map_err(|_| DecodeError::new(start + 1, ErrorKind::NegativeLength(len)))?;
                    if len > limits.max_elements {
                        let max = limits.max_elements;
                        return Err(DecodeError::new(
                            start + 1,
                            ErrorKind::TooManyElements { len, max },
                        ));
                    }
                    // Values to wait for: pairs count twice, and an attribute's value once more.
                    let values = match kind {
                        Kind::MAP => len * 2,
                        Kind::ATTRIBUTE => len * 2 + 1,
                        _ => len,
                    };
                    self.push(Node::Aggregate {
                        kind,
                        len: len as usize, // <= max_elements, and only ever a count
                        streamed: false,
                    });
                    if values == 0 {
                        self.check_depth(start)?;
                        self.close_value()
                    } else {
                        self.open(kind, false, values, start)?;
                        continue;
                    }
                }
                _ => return Err(DecodeError::new(start, ErrorKind::UnknownType(kind))),
            };
            if done {
                return Ok(self.complete(buf));
            }
        }
    }

    fn complete(&self, buf: &[u8]) -> Scanned {
        Scanned::Complete {
            len: self.pos,
            kind: Kind(buf.first().copied().unwrap_or_default()),
        }
    }

    /// A line of a fixed size was cut short: wait, unless what is there is already wrong.
    fn short_line(&self, buf: &[u8], start: usize) -> Result<Scanned, DecodeError> {
        let kind = Kind(buf.get(start).copied().unwrap_or_default());
        let rest = buf.get(start + 1..).unwrap_or_default();
        let ok = match kind {
            Kind::BOOLEAN => matches!(rest, [] | [b't' | b'f']),
            _ => matches!(rest, [] | [b'\r']),
        };
        if ok {
            Ok(Scanned::Incomplete { needed: None })
        } else if kind == Kind::NULL {
            Err(DecodeError::new(start + 1, ErrorKind::BadNull))
        } else if kind == Kind::BOOLEAN {
            Err(DecodeError::new(start + 1, ErrorKind::BadBoolean))
        } else {
            Err(DecodeError::new(start + 1, ErrorKind::BadLineEnd))
        }
    }

    fn push(&mut self, node: Node) {
        if self.record {
            self.tape.push(node);
        }
    }

    fn check_depth(&self, start: usize) -> Result<(), DecodeError> {
        if self.stack.len() >= self.max_depth {
            return Err(DecodeError::new(
                start,
                ErrorKind::TooDeep {
                    max: self.max_depth,
                },
            ));
        }
        Ok(())
    }

    fn open(
        &mut self,
        kind: Kind,
        streamed: bool,
        count: u64,
        start: usize,
    ) -> Result<(), DecodeError> {
        self.check_depth(start)?;
        self.stack.push(Level {
            kind,
            streamed,
            count,
            node: self.tape.len(),
        });
        Ok(())
    }

    /// A value has ended: counts it in the aggregate around it, closing every aggregate that
    /// it completes. Returns whether the whole frame is complete.
    fn close_value(&mut self) -> bool {
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
        }
        true
    }

    /// A `.` at `start`: ends the innermost streamed aggregate.
    fn end_streamed(&mut self, start: usize) -> Result<bool, DecodeError> {
        let Some(level) = self.stack.last().copied() else {
            return Err(DecodeError::new(start, ErrorKind::StrayEnd));
        };
        let pairs = level.kind == Kind::MAP;
        if !level.streamed || (pairs && level.count % 2 == 1) {
            return Err(DecodeError::new(start, ErrorKind::StrayEnd));
        }
        let len = if pairs { level.count / 2 } else { level.count };
        if let Some(Node::Aggregate { len: l, .. }) = self.tape.get_mut(level.node) {
            *l = len as usize;
        }
        self.stack.pop();
        Ok(self.close_value())
    }

    /// A `;0` chunk: ends the streamed string.
    fn end_streamed_string(&mut self) {
        self.stack.pop();
    }
}
