//! [`Limits`] and [`Config`]: what the decoder accepts.

/// Bounds on what one frame may declare or hold. Each is checked when the frame declares it,
/// before any memory is reserved for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Nesting depth of aggregates and attributes. Capped at [`Limits::MAX_DEPTH`], because
    /// dropping or encoding a frame recurses once per level.
    pub max_depth: usize,
    /// Elements of one aggregate (pairs, for maps and attributes).
    pub max_elements: u64,
    /// Bytes of one bulk string, bulk error, verbatim string or streamed chunk.
    pub max_bulk_len: u64,
    /// Bytes of one inline command line.
    pub max_inline_len: usize,
    /// Bytes of one whole frame.
    pub max_frame_len: usize,
}

impl Limits {
    /// The largest `max_depth` there is: 1024 levels.
    pub const MAX_DEPTH: usize = 1024;

    /// The defaults: depth 128, 2^31 - 1 elements (the server's multibulk limit), 512 MiB bulk
    /// strings (its `proto-max-bulk-len`), 64 KiB inline lines (its `PROTO_INLINE_MAX_SIZE`),
    /// 1 GiB frames (its `client-query-buffer-limit`).
    pub const DEFAULT: Self = Self {
        max_depth: 128,
        max_elements: i32::MAX as u64,
        max_bulk_len: 512 * 1024 * 1024,
        max_inline_len: 64 * 1024,
        max_frame_len: 1024 * 1024 * 1024,
    };

    pub(crate) fn depth(&self) -> usize {
        self.max_depth.min(Self::MAX_DEPTH)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// How strictly to read, and the [`Limits`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// The bounds.
    pub limits: Limits,
    /// Accept what hiredis accepts in replies, where it is looser than the server: the two bytes
    /// after a bulk payload are skipped unchecked, a simple line may hold a CR not followed by LF
    /// (it ends at the first CRLF), and a double may be any text that parses as one (`+inf`,
    /// `-nan`, `1.`, `.5`). Off by default; never use it for requests.
    pub lenient: bool,
}
