//! The fast path: a frame whose bytes have all arrived, read by plain recursive descent.
//!
//! It gives an answer only when it is sure: a whole, valid frame without attributes or
//! streamed parts, at most [`FAST_DEPTH`] levels deep. For anything else (an incomplete or
//! invalid frame, a rare shape) it returns `None`, and the caller runs the [`Scanner`], which
//! stays the one authority on errors, `needed` counts and resuming. Both apply the same rules,
//! so a frame read here is the frame the scanner would build (checked by the tests below and
//! the `resp_decode` fuzz target, which compares the paths).
//!
//! It exists because `benches/resp.rs` showed the event-driven scanner at about 0.8× of
//! redis-protocol's `decode_range` on pipelined commands: the per-event dispatch, not the
//! byte work, was the cost.
//!
//! [`Scanner`]: crate::scan::Scanner

use alloc::vec::Vec;
use core::cell::Cell;

use crate::{
    build::{Source, leaf_frame},
    frame::{Frame, Kind},
    limits::Config,
    parse::{LineEnd, int_line, is_big_number, is_strict_double, line_end, parse_double},
    scan::Event,
};

/// Deeper frames go to the scanner, which keeps its stack on the heap; this bounds the
/// recursion here to about ten kilobytes of stack (a level takes at most 300 bytes in the
/// release build).
pub(crate) const FAST_DEPTH: usize = 32;

/// What the descent makes of the values it reads.
pub(crate) trait Build {
    type Value;
    /// A value that is not an aggregate: one of [`Event`]'s leaf variants.
    fn leaf(&self, event: Event) -> Self::Value;
    /// An array, set or push.
    fn items(&self, kind: Kind, items: Vec<Self::Value>) -> Self::Value;
    /// A map.
    fn pairs(&self, pairs: Vec<(Self::Value, Self::Value)>) -> Self::Value;
}

/// Builds nothing: only the frame's length is wanted. `Vec<()>` never allocates.
pub(crate) struct Validate;

impl Build for Validate {
    type Value = ();

    #[inline(always)]
    fn leaf(&self, _: Event) {}

    #[inline(always)]
    fn items(&self, _: Kind, _: Vec<()>) {}

    #[inline(always)]
    fn pairs(&self, _: Vec<((), ())>) {}
}

/// Builds [`Frame`]s whose strings are slices of `S`.
pub(crate) struct Frames<'s, S>(pub(crate) &'s S);

impl<S: Source> Build for Frames<'_, S> {
    type Value = Frame<S::Slice>;

    #[inline(always)]
    fn leaf(&self, event: Event) -> Self::Value {
        leaf_frame(self.0, event)
    }

    #[inline(always)]
    fn items(&self, kind: Kind, items: Vec<Self::Value>) -> Self::Value {
        match kind {
            Kind::SET => Frame::Set(items),
            Kind::PUSH => Frame::Push(items),
            _ => Frame::Array(items),
        }
    }

    #[inline(always)]
    fn pairs(&self, pairs: Vec<(Self::Value, Self::Value)>) -> Self::Value {
        Frame::Map(pairs)
    }
}

/// Reads the frame at the start of `buf`: its value and length, or `None` if the scanner
/// must decide.
#[inline]
pub(crate) fn read<B: Build>(build: &B, buf: &[u8], config: &Config) -> Option<(B::Value, usize)> {
    let mut value = build.leaf(Event::Null);
    let len = read_into(build, buf, config, &mut value)?;
    Some((value, len))
}

/// Reads the frame at the start of `buf` into `slot` (which is then dirty if it returns
/// `None`): its length, or `None` if the scanner must decide. Building a frame where the
/// caller keeps it saves moving it (see [`Reader::fill`]).
#[inline]
pub(crate) fn read_into<B: Build>(
    build: &B,
    buf: &[u8],
    config: &Config,
    slot: &mut B::Value,
) -> Option<usize> {
    let reader = Reader {
        build,
        buf,
        config,
        max_depth: config.limits.depth().min(FAST_DEPTH),
        budget: Cell::new(buf.len() / 3),
    };
    let len = reader.fill(0, 0, slot)?;
    // Every value started and every payload ended within the limit, as the scanner requires.
    (len <= config.limits.max_frame_len).then_some(len)
}

/// The frame at the start of `buf` when it is a leaf (no aggregate): its event, whose
/// offsets are `buf`'s, and its length; `None` for an aggregate, or if the scanner must
/// decide. The rules are [`read`]'s for a leaf.
#[inline]
pub(crate) fn leaf(buf: &[u8], config: &Config) -> Option<(Event, usize)> {
    let kind = Kind(*buf.first()?);
    if is_aggregate(kind) {
        return None;
    }
    let reader = Reader {
        build: &Validate,
        buf,
        config,
        max_depth: 0,
        budget: Cell::new(0),
    };
    let (event, len) = reader.leaf(kind, 0)?;
    (len <= config.limits.max_frame_len).then_some((event, len))
}

struct Reader<'a, B> {
    build: &'a B,
    buf: &'a [u8],
    config: &'a Config,
    max_depth: usize,
    /// Values the aggregates read so far may still declare, all levels together.
    budget: Cell<usize>,
}

impl<B: Build> Reader<'_, B> {
    /// The value at `pos`, written over `slot`; the index after it. A leaf is built where it
    /// is kept: returning each one through the stack, or pushing it, cost a store-forwarding
    /// stall per element (`a_pipelined_set`, `c_int_arrays` benches).
    #[inline(always)]
    fn fill(&self, pos: usize, depth: usize, slot: &mut B::Value) -> Option<usize> {
        let kind = Kind(*self.buf.get(pos)?);
        if is_aggregate(kind) {
            return self.aggregate(kind, pos, depth, slot);
        }
        let (event, next) = self.leaf(kind, pos)?;
        overwrite_placeholder(slot, self.build.leaf(event));
        Some(next)
    }

    /// The leaf value of `kind` at `pos`, and the index after it.
    #[inline(always)]
    fn leaf(&self, kind: Kind, pos: usize) -> Option<(Event, usize)> {
        let buf = self.buf;
        match kind {
            Kind::BULK_STRING | Kind::BULK_ERROR => {
                let (len, next) = int_line(buf, pos + 1).ok()??;
                if len < 0 {
                    let null = len == -1 && kind == Kind::BULK_STRING;
                    return null.then_some((Event::NullBulkString, next));
                }
                let end = self.payload(len, next)?;
                let event = Event::Bulk {
                    kind,
                    start: next,
                    end: end - 2,
                };
                Some((event, end))
            }
            Kind::INTEGER => {
                let (value, next) = int_line(buf, pos + 1).ok()??;
                Some((Event::Integer(value), next))
            }
            Kind::SIMPLE_STRING | Kind::SIMPLE_ERROR | Kind::DOUBLE | Kind::BIG_NUMBER => {
                let LineEnd::Found(cr) = line_end(buf, pos + 1, self.config.lenient).ok()? else {
                    return None;
                };
                let text = buf.get(pos + 1..cr)?;
                let valid = match kind {
                    Kind::DOUBLE if self.config.lenient => parse_double(text).is_some(),
                    Kind::DOUBLE => is_strict_double(text),
                    Kind::BIG_NUMBER => is_big_number(text),
                    _ => true,
                };
                let event = Event::Line {
                    kind,
                    start: pos + 1,
                    end: cr,
                };
                valid.then_some((event, cr + 2))
            }
            Kind::NULL => {
                let null = buf.get(pos + 1..pos + 3) == Some(b"\r\n");
                null.then_some((Event::Null, pos + 3))
            }
            Kind::BOOLEAN => {
                let value = match buf.get(pos + 1..pos + 4)? {
                    b"t\r\n" => true,
                    b"f\r\n" => false,
                    _ => return None,
                };
                Some((Event::Boolean(value), pos + 4))
            }
            Kind::VERBATIM_STRING => {
                let (len, next) = int_line(buf, pos + 1).ok()??;
                let end = self.payload(len, next)?;
                let format = match buf.get(next..next + 4)? {
                    [a, b, c, b':'] if end - 2 - next >= 4 => [*a, *b, *c],
                    _ => return None,
                };
                let event = Event::Verbatim {
                    format,
                    start: next + 4,
                    end: end - 2,
                };
                Some((event, end))
            }
            // Attributes, streamed chunks and ends, unknown bytes.
            _ => None,
        }
    }

    /// A payload of `len` bytes from `next`, all here and followed by its CRLF: the index
    /// after the CRLF.
    #[inline(always)]
    fn payload(&self, len: i64, next: usize) -> Option<usize> {
        let len = u64::try_from(len).ok()?;
        if len > self.config.limits.max_bulk_len {
            return None;
        }
        let end = next
            .checked_add(usize::try_from(len).ok()?)?
            .checked_add(2)?;
        let crlf = self.buf.get(end - 2..end)?;
        (self.config.lenient || crlf == b"\r\n").then_some(end)
    }

    /// An array, set, push or map at `pos`.
    fn aggregate(
        &self,
        kind: Kind,
        pos: usize,
        depth: usize,
        slot: &mut B::Value,
    ) -> Option<usize> {
        let (len, next) = int_line(self.buf, pos + 1).ok()??;
        if len < 0 {
            let null = len == -1 && kind == Kind::ARRAY;
            *slot = self.build.leaf(Event::NullArray);
            return null.then_some(next);
        }
        let len = u64::try_from(len).ok()?;
        if len > self.config.limits.max_elements || depth >= self.max_depth {
            return None;
        }
        // Each value takes at least 3 bytes (`_\r\n`), so a whole frame declares at most a
        // third of its length in values, all levels together. Counting them against that
        // budget bounds what is reserved (and written: the placeholders) by the bytes at
        // hand; checked level by level, nested declared lengths could each reserve it anew.
        let values = if kind == Kind::MAP { len * 2 } else { len };
        let left = self.budget.get();
        if values > left as u64 {
            return None;
        }
        self.budget.set(left - values as usize); // values <= left
        let len = len as usize; // bounded by the bytes at hand just above
        let mut at = next;
        if kind == Kind::MAP {
            let mut pairs = Vec::new();
            pairs.resize_with(len, || {
                (self.build.leaf(Event::Null), self.build.leaf(Event::Null))
            });
            for (key, value) in &mut pairs {
                at = self.fill(at, depth + 1, key)?;
                at = self.fill(at, depth + 1, value)?;
            }
            *slot = self.build.pairs(pairs);
            Some(at)
        } else {
            let mut items = Vec::new();
            items.resize_with(len, || self.build.leaf(Event::Null));
            for slot in &mut items {
                at = self.fill(at, depth + 1, slot)?;
            }
            *slot = self.build.items(kind, items);
            Some(at)
        }
    }
}

/// Writes `value` over `slot`, which holds a placeholder leaf (a null, nothing on the heap):
/// its drop is skipped, because running the frame's drop glue on it, a call per element, cost
/// 10–15 % on arrays of integers (`c_int_arrays` bench). Were `slot` ever a real value, it
/// would leak, never be freed twice.
#[inline(always)]
fn overwrite_placeholder<T>(slot: &mut T, value: T) {
    core::mem::forget(core::mem::replace(slot, value));
}

fn is_aggregate(kind: Kind) -> bool {
    matches!(kind, Kind::ARRAY | Kind::SET | Kind::PUSH | Kind::MAP)
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::{Frames, Validate, read};
    use crate::{
        build::{FrameSink, leaf_frame},
        frame::Frame,
        limits::{Config, Limits},
        scan::{Scanned, Scanner},
    };

    /// The scanner's answer, the reference: the frame and its length when complete and valid.
    fn scanned<'a>(buf: &'a [u8], config: &Config) -> Option<(Frame<&'a [u8]>, usize)> {
        let mut sink = FrameSink::new(&buf);
        match Scanner::default().scan(buf, config, &mut sink) {
            Ok(Scanned::Complete { len }) => Some((sink.into_frame()?, len)),
            _ => None,
        }
    }

    /// Whatever the fast path answers, the scanner answers the same; the length-only reading
    /// agrees with the building one.
    fn agrees(buf: &[u8], config: &Config) -> bool {
        let fast = read(&Frames(&buf), buf, config);
        let span = read(&Validate, buf, config).map(|((), len)| len);
        assert_eq!(span, fast.as_ref().map(|(_, len)| *len), "{buf:?}");
        // The leaf reading answers for every leaf the descent answers for, the same.
        let leaf = super::leaf(buf, config).map(|(event, len)| (leaf_frame(&buf, event), len));
        match buf.first() {
            Some(&kind) if super::is_aggregate(crate::frame::Kind(kind)) => {
                assert_eq!(leaf, None, "{buf:?}");
            }
            _ => assert_eq!(leaf, fast, "{buf:?} {config:?}"),
        }
        if let Some(fast) = &fast {
            assert_eq!(
                scanned(buf, config).as_ref(),
                Some(fast),
                "{buf:?} {config:?}"
            );
        }
        fast.is_some()
    }

    const SEEDS: &[&[u8]] = &[
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n",
        b"*2\r\n:0\r\n:-12345678901234\r\n",
        b"%2\r\n+a\r\n,1.5e-3\r\n$-1\r\n*-1\r\n",
        b"~3\r\n#t\r\n#f\r\n_\r\n",
        b">2\r\n(-123\r\n=7\r\ntxt:abc\r\n",
        b"*1\r\n*1\r\n*0\r\n",
        b"*-1\r\n",
        b"-ERR x\r\n",
        b"!3\r\nbad\r\n",
        b",-inf\r\n",
        b":9223372036854775807\r\n",
        b"$0\r\n\r\n",
        b"%0\r\n",
        // At the tight configuration's limits, and one past each.
        b"$3\r\nabc\r\n",
        b"$4\r\nabcd\r\n",
        b"*2\r\n:1\r\n:2\r\n",
        b"*3\r\n:1\r\n:2\r\n:3\r\n",
        b"*1\r\n*1\r\n:1\r\n",
        b"*2\r\n+0123456789abc\r\n:1\r\n",
        b"*2\r\n+0123456789abcd\r\n:1\r\n",
    ];

    fn configs() -> Vec<Config> {
        let small = Limits {
            max_depth: 1,
            max_elements: 2,
            max_bulk_len: 3,
            max_inline_len: 8,
            max_frame_len: 20,
        };
        Vec::from([
            Config::default(),
            Config {
                lenient: true,
                ..Config::default()
            },
            Config {
                limits: small,
                ..Config::default()
            },
        ])
    }

    #[test]
    fn every_seed_takes_the_fast_path() {
        for seed in SEEDS {
            assert!(agrees(seed, &Config::default()), "{seed:?}");
        }
    }

    #[test]
    fn attributes_and_streamed_values_go_to_the_scanner() {
        for wire in [
            &b"|1\r\n+a\r\n+b\r\n:1\r\n"[..],
            b"*?\r\n:1\r\n.\r\n",
            b"$?\r\n;1\r\na\r\n;0\r\n",
        ] {
            assert!(!agrees(wire, &Config::default()));
            assert!(scanned(wire, &Config::default()).is_some());
        }
    }

    /// Every prefix of every seed, and every seed with any one byte replaced by one of the
    /// bytes that matter to the rules, under strict, lenient and tight configurations.
    #[test]
    fn every_cut_and_one_byte_change_agrees() {
        const BYTES: &[u8] = b"\r\n0123456789-+?*$%~>|=!:,(_#.;tfx\x00\xff";
        for config in configs() {
            for seed in SEEDS {
                for cut in 0..seed.len() {
                    let _ = agrees(&seed[..cut], &config);
                }
                let mut wire = seed.to_vec();
                for at in 0..wire.len() {
                    let was = wire[at];
                    for &b in BYTES {
                        wire[at] = b;
                        let _ = agrees(&wire, &config);
                    }
                    wire[at] = was;
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_agree(wire in proptest::collection::vec(proptest::sample::select(b"\r\n019-*$%~>=:,(_#t".to_vec()), 0..40)) {
            for config in configs() {
                let _ = agrees(&wire, &config);
            }
        }
    }
}
