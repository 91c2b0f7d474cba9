//! The request fast path: a client command straight into its arguments.

use alloc::{borrow::Cow, vec::Vec};

use bytes::{Buf, Bytes, BytesMut};

use crate::{
    decoder::Status,
    error::{DecodeError, ErrorKind},
    frame::Kind,
    limits::Config,
    parse::int_line,
};

/// Arguments kept inline before spilling to the heap.
const INLINE_ARGS: usize = 8;

/// A client command: its arguments as slices of one buffer `B`.
///
/// From [`Decoder::decode_command`](crate::Decoder::decode_command), `B` is [`Bytes`] split off
/// the decoder's buffer; from
/// [`Decoder::decode_command_slice`](crate::Decoder::decode_command_slice) it borrows the
/// caller's input ([`BorrowedCommand`]). Up to eight arguments are stored without a heap
/// allocation. An inline command with quotes is the one case that copies, to undo its escapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command<B = Bytes> {
    bytes: B,
    args: Args,
    /// Whether `bytes` is the command as it came: a RESP array of bulk strings.
    multibulk: bool,
}

/// A command borrowed from the caller's input (owned only for an inline command with quotes).
pub type BorrowedCommand<'a> = Command<Cow<'a, [u8]>>;

/// Argument spans: small commands keep 32-bit offsets inline, which keeps `Command` small
/// enough to move cheaply (`a_pipelined_set` bench).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Args {
    Inline {
        len: u8,
        spans: [(u32, u32); INLINE_ARGS],
    },
    Heap(Vec<(usize, usize)>),
}

impl<B: AsRef<[u8]>> Command<B> {
    #[inline]
    fn new(bytes: B, spans: &[(usize, usize)], multibulk: bool) -> Self {
        let small = spans.len() <= INLINE_ARGS && u32::try_from(bytes.as_ref().len()).is_ok();
        let args = if small {
            let mut inline = [(0, 0); INLINE_ARGS];
            for (slot, &(start, end)) in inline.iter_mut().zip(spans) {
                // Both fit: they are offsets into `bytes`, whose length fits in a u32.
                *slot = (start as u32, end as u32);
            }
            Args::Inline {
                len: spans.len() as u8, // <= INLINE_ARGS
                spans: inline,
            }
        } else {
            Args::Heap(spans.to_vec())
        };
        Self {
            bytes,
            args,
            multibulk,
        }
    }

    /// The span of argument `i`.
    fn span(&self, i: usize) -> Option<(usize, usize)> {
        match &self.args {
            Args::Inline { len, spans } => spans
                .get(..usize::from(*len))?
                .get(i)
                .map(|&(start, end)| (start as usize, end as usize)),
            Args::Heap(spans) => spans.get(i).copied(),
        }
    }

    /// The number of arguments, the command name included. Never 0.
    pub fn len(&self) -> usize {
        match &self.args {
            Args::Inline { len, .. } => usize::from(*len),
            Args::Heap(spans) => spans.len(),
        }
    }

    /// Always `false`: empty commands are skipped by the decoder.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Argument `i` (0 is the command name).
    pub fn arg(&self, i: usize) -> Option<&[u8]> {
        let (start, end) = self.span(i)?;
        self.bytes.as_ref().get(start..end)
    }

    /// The arguments in order.
    pub fn args(&self) -> impl ExactSizeIterator<Item = &[u8]> + DoubleEndedIterator {
        (0..self.len()).map(|i| self.arg(i).unwrap_or_default())
    }

    /// The command's bytes as they came, when it came as a RESP array of bulk strings (the
    /// form every client library sends): what a proxy can pass on to a server unchanged
    /// instead of encoding its arguments again. A server reads the same arguments from these
    /// bytes: the decoder wants the lengths the server's `string2ll` takes (no leading zero,
    /// no `+`) and `\r\n` wherever the server skips two bytes, so it takes no array that
    /// the server reads otherwise. `None` for an inline command, whose bytes are a line of
    /// text (or its arguments unescaped), not RESP.
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use redis_resp::Decoder;
    ///
    /// let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nGET k\r\n"[..]);
    /// let mut decoder = Decoder::new();
    /// let command = decoder.decode_command(&mut buf)?.expect("a command");
    /// assert_eq!(command.packed(), Some(&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"[..]));
    /// let inline = decoder.decode_command(&mut buf)?.expect("a command");
    /// assert_eq!(inline.packed(), None);
    /// # Ok::<(), redis_resp::DecodeError>(())
    /// ```
    pub fn packed(&self) -> Option<&[u8]> {
        self.multibulk.then(|| self.bytes.as_ref())
    }

    /// [`Command::packed`], consuming the command: its buffer itself, without a copy.
    pub fn into_packed(self) -> Option<B> {
        self.multibulk.then_some(self.bytes)
    }
}

impl Command {
    /// Argument `i` as a [`Bytes`] that shares the decoder's buffer.
    pub fn arg_bytes(&self, i: usize) -> Option<Bytes> {
        let (start, end) = self.span(i)?;
        (start <= end && end <= self.bytes.len()).then(|| self.bytes.slice(start..end))
    }
}

/// What a scan for a command found at the front of the input.
enum Found {
    Incomplete,
    /// Bytes to drop: `*0`, `*-1` or a blank inline line, which the server ignores.
    Skip(usize),
    /// A multibulk command of this many bytes; its argument spans are in the scanner.
    Multibulk(usize),
    /// An inline line of `len` bytes, newline included, its text ending at `text_end`.
    Inline {
        len: usize,
        text_end: usize,
    },
}

/// Progress through one command, kept between calls.
#[derive(Debug, Default)]
pub(crate) struct CommandScanner {
    /// The first byte not yet scanned (multibulk), or searched for `\n` (inline).
    pos: usize,
    /// Arguments still to come, once the `*` line has been read.
    remaining: Option<u64>,
    /// A bulk payload waiting for its bytes: (payload start, index past its CRLF).
    pending: Option<(usize, usize)>,
    spans: Vec<(usize, usize)>,
}

impl CommandScanner {
    fn reset(&mut self) {
        self.pos = 0;
        self.remaining = None;
        self.pending = None;
        self.spans.clear();
    }

    /// The next command of `buf`, split off it; resumable.
    #[inline]
    pub(crate) fn decode(
        &mut self,
        buf: &mut BytesMut,
        config: &Config,
    ) -> Result<Option<Command>, DecodeError> {
        loop {
            let found = match self.scan(buf, config) {
                Ok(found) => found,
                Err(e) => {
                    self.reset();
                    return Err(e);
                }
            };
            match found {
                Found::Incomplete => return Ok(None),
                Found::Skip(len) => {
                    self.reset();
                    buf.advance(len);
                }
                Found::Multibulk(len) => {
                    let bytes = buf.split_to(len).freeze();
                    let command = Command::new(bytes, &self.spans, true);
                    self.reset();
                    return Ok(Some(command));
                }
                Found::Inline { len, text_end } => {
                    self.reset();
                    let text = buf.get(..text_end).unwrap_or_default();
                    let unescaped = self.split_inline(text)?;
                    let wire = buf.split_to(len).freeze();
                    if self.spans.is_empty() {
                        continue;
                    }
                    let command =
                        Command::new(unescaped.map_or(wire, Bytes::from), &self.spans, false);
                    self.spans.clear();
                    return Ok(Some(command));
                }
            }
        }
    }

    /// The first command of `input`, borrowed from it, and how many bytes it took (blank
    /// commands before it included). Not resumable.
    pub(crate) fn decode_slice<'a>(
        &mut self,
        input: &'a [u8],
        config: &Config,
    ) -> Result<Status<(BorrowedCommand<'a>, usize)>, DecodeError> {
        let mut offset = 0;
        loop {
            self.reset();
            let rest = input.get(offset..).unwrap_or_default();
            let found = self.scan(rest, config).map_err(|e| DecodeError {
                offset: e.offset + offset,
                ..e
            });
            let found = match found {
                Ok(found) => found,
                Err(e) => {
                    self.reset();
                    return Err(e);
                }
            };
            match found {
                Found::Incomplete => {
                    self.reset();
                    return Ok(Status::Incomplete { needed: None });
                }
                Found::Skip(len) => offset += len,
                Found::Multibulk(len) => {
                    let bytes = Cow::Borrowed(rest.get(..len).unwrap_or_default());
                    let command = Command::new(bytes, &self.spans, true);
                    self.reset();
                    return Ok(Status::Complete((command, offset + len)));
                }
                Found::Inline { len, text_end } => {
                    self.reset();
                    let text = rest.get(..text_end).unwrap_or_default();
                    let unescaped = self.split_inline(text)?;
                    if !self.spans.is_empty() {
                        let bytes = unescaped.map_or(Cow::Borrowed(text), Cow::Owned);
                        let command = Command::new(bytes, &self.spans, false);
                        self.spans.clear();
                        return Ok(Status::Complete((command, offset + len)));
                    }
                    offset += len;
                }
            }
        }
    }

    /// Splits an inline line's text into `self.spans`: into the text itself, or, when it has
    /// quotes, into the returned unescaped copy.
    fn split_inline(&mut self, text: &[u8]) -> Result<Option<Vec<u8>>, DecodeError> {
        self.spans.clear();
        if text.iter().any(|&b| b == b'"' || b == b'\'') {
            let mut out = Vec::new();
            split_quoted(text, &mut out, &mut self.spans)
                .map_err(|at| DecodeError::new(at, ErrorKind::UnbalancedQuotes))?;
            Ok(Some(out))
        } else {
            split_plain(text, &mut self.spans);
            Ok(None)
        }
    }

    /// Goes on scanning the command at the front of `buf`.
    fn scan(&mut self, buf: &[u8], config: &Config) -> Result<Found, DecodeError> {
        let limits = &config.limits;
        let remaining = match self.remaining {
            Some(n) => n,
            None => {
                let Some(&first) = buf.first() else {
                    return Ok(Found::Incomplete);
                };
                if first != b'*' {
                    return self.inline(buf, config);
                }
                let Some((count, next)) = int_line(buf, 1)? else {
                    if buf.len() > limits.max_inline_len {
                        let max = limits.max_inline_len;
                        return Err(DecodeError::new(0, ErrorKind::InlineTooLong { max }));
                    }
                    return Ok(Found::Incomplete);
                };
                if count <= 0 {
                    // The server ignores `*0` and `*-1` (and any count <= 0) in requests.
                    return Ok(Found::Skip(next));
                }
                let count = count as u64; // > 0
                if count > limits.max_elements {
                    let max = limits.max_elements;
                    let kind = ErrorKind::TooManyElements { len: count, max };
                    return Err(DecodeError::new(1, kind));
                }
                self.pos = next;
                self.remaining = Some(count);
                count
            }
        };
        // The arguments, as many as are here, in locals; the state is written back once.
        let (mut pos, mut remaining) = (self.pos, remaining);
        if let Some((start, end)) = self.pending {
            if buf.len() < end {
                return Ok(Found::Incomplete);
            }
            if buf.get(end - 2..end) != Some(b"\r\n") {
                return Err(DecodeError::new(end - 2, ErrorKind::BadPayloadEnd));
            }
            self.spans.push((start, end - 2));
            self.pending = None;
            pos = end;
            remaining -= 1;
        }
        while remaining > 0 {
            let Some(&byte) = buf.get(pos) else {
                break;
            };
            if byte != b'$' {
                return Err(DecodeError::new(pos, ErrorKind::ExpectedBulk(Kind(byte))));
            }
            let Some((len, next)) = int_line(buf, pos + 1)? else {
                break;
            };
            let len = u64::try_from(len)
                .map_err(|_| DecodeError::new(pos + 1, ErrorKind::NegativeLength(len)))?;
            if len > limits.max_bulk_len {
                let max = limits.max_bulk_len;
                return Err(DecodeError::new(
                    pos + 1,
                    ErrorKind::BulkTooLong { len, max },
                ));
            }
            let end = usize::try_from(len)
                .ok()
                .and_then(|len| next.checked_add(len)?.checked_add(2))
                .filter(|&end| end <= limits.max_frame_len)
                .ok_or(DecodeError::new(
                    pos,
                    ErrorKind::FrameTooLong {
                        max: limits.max_frame_len,
                    },
                ))?;
            if buf.len() < end {
                self.pending = Some((next, end));
                break;
            }
            if buf.get(end - 2..end) != Some(b"\r\n") {
                return Err(DecodeError::new(end - 2, ErrorKind::BadPayloadEnd));
            }
            self.spans.push((next, end - 2));
            pos = end;
            remaining -= 1;
        }
        self.pos = pos;
        self.remaining = Some(remaining);
        if remaining > 0 {
            Ok(Found::Incomplete)
        } else {
            Ok(Found::Multibulk(pos))
        }
    }

    /// An inline command: one line up to `\n`, at most `max_inline_len` bytes.
    fn inline(&mut self, buf: &[u8], config: &Config) -> Result<Found, DecodeError> {
        let max = config.limits.max_inline_len;
        let searched = self.pos.min(buf.len());
        let Some(newline) = buf
            .get(searched..)
            .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
            .map(|at| searched + at)
        else {
            if buf.len() > max {
                return Err(DecodeError::new(max, ErrorKind::InlineTooLong { max }));
            }
            self.pos = buf.len();
            return Ok(Found::Incomplete);
        };
        if newline > max {
            return Err(DecodeError::new(max, ErrorKind::InlineTooLong { max }));
        }
        let text_end = if newline > 0 && buf.get(newline - 1) == Some(&b'\r') {
            newline - 1
        } else {
            newline
        };
        Ok(Found::Inline {
            len: newline + 1,
            text_end,
        })
    }
}

/// What the server's `isspace` skips between arguments.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// What ends an unquoted argument in the server's `sdssplitargs` (a NUL ends the whole line).
fn ends_token(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// The part of an inline line that the server reads: it stops at a NUL byte.
fn until_nul(line: &[u8]) -> &[u8] {
    let end = line.iter().position(|&b| b == 0).unwrap_or(line.len());
    line.get(..end).unwrap_or_default()
}

/// Splits a line without quotes: arguments are runs between separators.
fn split_plain(line: &[u8], spans: &mut Vec<(usize, usize)>) {
    let line = until_nul(line);
    let mut i = 0;
    while i < line.len() {
        while line.get(i).is_some_and(|&b| is_space(b)) {
            i += 1;
        }
        if i == line.len() {
            break;
        }
        let start = i;
        while line.get(i).is_some_and(|&b| !ends_token(b)) {
            i += 1;
        }
        spans.push((start, i));
    }
}

/// Splits a line with quotes the way `sdssplitargs` does, writing the unescaped arguments to
/// `out`. Returns the offset of the problem for unbalanced quotes, or for a closing quote
/// followed by something other than a space.
fn split_quoted(
    line: &[u8],
    out: &mut Vec<u8>,
    spans: &mut Vec<(usize, usize)>,
) -> Result<(), usize> {
    let line = until_nul(line);
    let at = |i: usize| line.get(i).copied();
    let mut i = 0;
    loop {
        while at(i).is_some_and(is_space) {
            i += 1;
        }
        if at(i).is_none() {
            return Ok(());
        }
        let start = out.len();
        let (mut double, mut single) = (false, false);
        loop {
            let Some(b) = at(i) else {
                if double || single {
                    return Err(i);
                }
                break;
            };
            if double {
                match (b, at(i + 1)) {
                    (b'\\', Some(b'x'))
                        if at(i + 2).is_some_and(|c| c.is_ascii_hexdigit())
                            && at(i + 3).is_some_and(|c| c.is_ascii_hexdigit()) =>
                    {
                        out.push(hex(at(i + 2)) << 4 | hex(at(i + 3)));
                        i += 3;
                    }
                    (b'\\', Some(c)) => {
                        out.push(match c {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                        i += 1;
                    }
                    (b'"', next) => {
                        if next.is_some_and(|c| !is_space(c)) {
                            return Err(i + 1);
                        }
                        i += 1;
                        break;
                    }
                    _ => out.push(b),
                }
            } else if single {
                match (b, at(i + 1)) {
                    (b'\\', Some(b'\'')) => {
                        out.push(b'\'');
                        i += 1;
                    }
                    (b'\'', next) => {
                        if next.is_some_and(|c| !is_space(c)) {
                            return Err(i + 1);
                        }
                        i += 1;
                        break;
                    }
                    _ => out.push(b),
                }
            } else {
                match b {
                    _ if ends_token(b) => break,
                    b'"' => double = true,
                    b'\'' => single = true,
                    _ => out.push(b),
                }
            }
            i += 1;
        }
        spans.push((start, out.len()));
    }
}

fn hex(digit: Option<u8>) -> u8 {
    match digit {
        Some(d @ b'0'..=b'9') => d - b'0',
        Some(d @ b'a'..=b'f') => d - b'a' + 10,
        Some(d @ b'A'..=b'F') => d - b'A' + 10,
        _ => 0,
    }
}
