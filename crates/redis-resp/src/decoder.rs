//! [`Decoder`]: resumable decoding from a [`BytesMut`], and the one-shot slice path.

use alloc::vec::Vec;

use bytes::{Buf, Bytes, BytesMut};

use crate::{
    build::{FrameSink, leaf_frame_with, replay},
    command::{BorrowedCommand, Command, CommandScanner},
    error::DecodeError,
    fast::{self, Frames, Validate},
    frame::{Frame, Kind},
    limits::Config,
    scan::{Event, Scanned, Scanner},
};

/// The outcome of decoding that did not fail.
#[derive(Clone, Debug, PartialEq)]
pub enum Status<T> {
    /// A whole value.
    Complete(T),
    /// The input ends inside a value. `needed` is how many more bytes are certainly needed,
    /// when the decoder knows (inside a bulk payload, say).
    Incomplete {
        /// At least this many more bytes, when known.
        needed: Option<usize>,
    },
}

/// A frame borrowed from the input, and how many bytes of the input it took.
pub type Borrowed<'a> = (Frame<&'a [u8]>, usize);

/// A complete frame's place in the input, for forwarding it untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Its length in bytes, from the start of the input.
    pub len: usize,
    /// Its first byte.
    pub kind: Kind,
}

/// Decodes frames and commands from a buffer that fills as bytes arrive.
///
/// The decoder remembers how far it got inside a frame, so a frame that arrives in many small
/// reads is still scanned once: call again with the same buffer, more bytes appended. A decoded
/// frame or command is split off the front of the buffer, and its strings are
/// [`Bytes`](bytes::Bytes) slices of it: no copy.
///
/// [`Decoder::decode`] and [`Decoder::decode_span`] share the progress through the current
/// frame, so finish a frame with the method that started it; [`Decoder::decode_command`]
/// keeps its own. The one-shot `_slice` methods drop the progress of their resumable twin.
///
/// ```
/// use bytes::BytesMut;
/// use redis_resp::{Decoder, Frame};
///
/// let mut decoder = Decoder::new();
/// let mut buf = BytesMut::from(&b"*2\r\n$3\r\nfoo\r\n:4"[..]);
/// assert_eq!(decoder.decode(&mut buf)?, None); // not all here yet
/// buf.extend_from_slice(b"2\r\n+OK\r\n");
/// let frame = decoder.decode(&mut buf)?.expect("complete");
/// assert_eq!(frame, Frame::Array(vec![Frame::BulkString("foo".into()), Frame::Integer(42)]));
/// assert_eq!(&buf[..], b"+OK\r\n"); // the next frame stays in the buffer
/// # Ok::<(), redis_resp::DecodeError>(())
/// ```
#[derive(Debug, Default)]
pub struct Decoder {
    config: Config,
    scanner: Scanner,
    /// The structure of the frame being scanned, replayed into it once it is complete.
    events: Vec<Event>,
    command: CommandScanner,
}

impl Decoder {
    /// A decoder with the default [`Config`]: strict, default limits.
    pub fn new() -> Self {
        Self::with_config(Config::default())
    }

    /// A decoder with `config`.
    pub fn with_config(config: Config) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// The decoder's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Decodes the frame at the front of `buf` and splits it off, or returns `None` (leaving
    /// `buf` as it is) until all of it has arrived.
    ///
    /// After an error the decoder starts afresh at the next call; `buf` is untouched, and the
    /// error's offset says where in it the bad byte is.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, DecodeError> {
        // A frame that is all here is read twice by the fast path, once to find its end and
        // once, split off and frozen, to build it; anything else goes to the scanner.
        if self.scanner.is_fresh() {
            // A leaf (most replies) is read once, and its string cut out of the buffer
            // before it is frozen: one reference to the buffer instead of one to the whole
            // frame and one to a slice of it, and none for an integer.
            if let Some((event, len)) = fast::leaf(buf, &self.config) {
                let mut split = false;
                let frame = leaf_frame_with(event, |start, end| {
                    split = true;
                    let mut text = buf.split_to(len);
                    if start <= end && end <= len {
                        text.truncate(end);
                        text.advance(start);
                    } else {
                        text.clear(); // as `Source` slices: not reached
                    }
                    text.freeze()
                });
                if !split {
                    buf.advance(len.min(buf.len()));
                }
                return Ok(Some(frame));
            }
            if let Some(((), len)) = fast::read(&Validate, buf, &self.config) {
                let bytes = buf.split_to(len).freeze();
                if let Some((frame, _)) = fast::read(&Frames(&bytes), &bytes, &self.config) {
                    return Ok(Some(frame));
                }
                // The same bytes read the same way: not reached, but never lose them.
                return self.decode_whole(&bytes);
            }
        }
        let scanned = self.scanner.scan(buf, &self.config, &mut self.events);
        let Scanned::Complete { len } = self.settle(scanned)? else {
            return Ok(None);
        };
        let bytes = buf.split_to(len).freeze();
        let frame = replay(&self.events, &bytes);
        self.events.clear();
        Ok(frame)
    }

    /// Builds the frame that is the whole of `bytes` with the scanner.
    fn decode_whole(&mut self, bytes: &Bytes) -> Result<Option<Frame>, DecodeError> {
        self.scanner.reset();
        self.events.clear();
        let scanned = self.scanner.scan(bytes, &self.config, &mut self.events);
        let frame = match self.settle(scanned)? {
            Scanned::Complete { .. } => replay(&self.events, bytes),
            Scanned::Incomplete { .. } => None,
        };
        self.scanner.reset();
        self.events.clear();
        Ok(frame)
    }

    /// Finds the end of the frame at the front of `buf` without building it: a proxy can
    /// then forward `buf[..span.len]` byte for byte. Resumable like [`Decoder::decode`]; it
    /// consumes nothing, so after `Complete` the caller drops `span.len` bytes itself.
    ///
    /// ```
    /// use redis_resp::{Decoder, Kind, Span, Status};
    ///
    /// let mut decoder = Decoder::new();
    /// let input = b"%1\r\n+a\r\n:1\r\n+next\r\n";
    /// let status = decoder.decode_span(input)?;
    /// assert_eq!(status, Status::Complete(Span { len: 12, kind: Kind::MAP }));
    /// # Ok::<(), redis_resp::DecodeError>(())
    /// ```
    #[inline]
    pub fn decode_span(&mut self, buf: &[u8]) -> Result<Status<Span>, DecodeError> {
        if self.scanner.is_fresh() {
            if let Some(((), len)) = fast::read(&Validate, buf, &self.config) {
                let kind = Kind(buf.first().copied().unwrap_or_default());
                return Ok(Status::Complete(Span { len, kind }));
            }
        }
        let scanned = self.scanner.scan(buf, &self.config, &mut ());
        match self.settle(scanned)? {
            Scanned::Complete { len } => Ok(Status::Complete(Span {
                len,
                kind: Kind(buf.first().copied().unwrap_or_default()),
            })),
            Scanned::Incomplete { needed } => Ok(Status::Incomplete { needed }),
        }
    }

    /// Decodes the frame at the start of `input` in one go, borrowing its strings from
    /// `input`; returns the frame and how many bytes it took. Not resumable: an incomplete
    /// frame is scanned again from its start at the next call. The decoder's scratch space is
    /// reused, so a frame without aggregates allocates nothing.
    pub fn decode_slice<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<Status<Borrowed<'a>>, DecodeError> {
        // Built where it is returned (see `fast::read_into`): one local, returned on every
        // path, so that the compiler can make it the return slot.
        let mut done = Ok(Status::Complete((Frame::Null, 0)));
        let fast = match &mut done {
            Ok(Status::Complete((frame, used))) => {
                fast::read_into(&Frames(&input), input, &self.config, frame).map(|len| *used = len)
            }
            _ => None,
        };
        if fast.is_none() {
            done = self.scan_slice(input);
        }
        self.scanner.reset();
        done
    }

    /// [`Decoder::decode_slice`] by the scanner.
    #[inline(never)]
    fn scan_slice<'a>(&mut self, input: &'a [u8]) -> Result<Status<Borrowed<'a>>, DecodeError> {
        self.scanner.reset();
        let mut sink = FrameSink::new(&input);
        let scanned = self.scanner.scan(input, &self.config, &mut sink);
        self.scanner.reset();
        match scanned? {
            Scanned::Complete { len } => match sink.into_frame() {
                Some(frame) => Ok(Status::Complete((frame, len))),
                None => Ok(Status::Incomplete { needed: None }),
            },
            Scanned::Incomplete { needed } => Ok(Status::Incomplete { needed }),
        }
    }

    /// Decodes the client command at the front of `buf`, a RESP array of bulk strings or an
    /// inline command line, straight into its arguments, and splits it off. Empty commands
    /// (`*0`, `*-1`, blank inline lines) are consumed and skipped, as the server does.
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use redis_resp::Decoder;
    ///
    /// let mut decoder = Decoder::new();
    /// let mut buf = BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\nPING\r\n"[..]);
    /// let set = decoder.decode_command(&mut buf)?.expect("complete");
    /// assert_eq!(set.args().collect::<Vec<_>>(), [&b"SET"[..], b"k", b"v"]);
    /// let ping = decoder.decode_command(&mut buf)?.expect("inline");
    /// assert_eq!(ping.arg(0), Some(&b"PING"[..]));
    /// # Ok::<(), redis_resp::DecodeError>(())
    /// ```
    #[inline]
    pub fn decode_command(&mut self, buf: &mut BytesMut) -> Result<Option<Command>, DecodeError> {
        self.command.decode(buf, &self.config)
    }

    /// Decodes the client command at the start of `input` in one go, its arguments borrowed
    /// from `input` (no reference counting, no allocation for up to eight arguments); returns
    /// it and how many bytes it took, empty commands before it included. Not resumable, like
    /// [`Decoder::decode_slice`].
    ///
    /// ```
    /// use redis_resp::{Decoder, Status};
    ///
    /// let mut decoder = Decoder::new();
    /// let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    /// let Status::Complete((get, used)) = decoder.decode_command_slice(input)? else {
    ///     panic!("complete")
    /// };
    /// assert_eq!((get.arg(1), used), (Some(&b"k"[..]), input.len()));
    /// # Ok::<(), redis_resp::DecodeError>(())
    /// ```
    #[inline]
    pub fn decode_command_slice<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<Status<(BorrowedCommand<'a>, usize)>, DecodeError> {
        self.command.decode_slice(input, &self.config)
    }

    /// Starts afresh after a complete frame or an error.
    fn settle(&mut self, scanned: Result<Scanned, DecodeError>) -> Result<Scanned, DecodeError> {
        if !matches!(scanned, Ok(Scanned::Incomplete { .. })) {
            self.scanner.reset();
            if scanned.is_err() {
                self.events.clear();
            }
        }
        scanned
    }
}

/// Decodes the frame at the start of `input` with the default [`Config`], borrowing its
/// strings; returns it and how many bytes it took.
///
/// ```
/// use redis_resp::{Frame, Status, decode};
///
/// let Status::Complete((frame, used)) = decode(b"$5\r\nhello\r\n+OK\r\n")? else {
///     panic!("complete")
/// };
/// assert_eq!((frame, used), (Frame::BulkString(&b"hello"[..]), 11));
/// assert_eq!(decode(b"$5\r\nhel")?, Status::Incomplete { needed: Some(4) });
/// # Ok::<(), redis_resp::DecodeError>(())
/// ```
pub fn decode(input: &[u8]) -> Result<Status<Borrowed<'_>>, DecodeError> {
    Decoder::new().decode_slice(input)
}
