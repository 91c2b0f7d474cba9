//! [`SlotRange`], and parsing slot numbers the way the server does.

use core::{fmt, str::FromStr};

use crate::slot::{SLOT_COUNT, Slot};

/// An inclusive, non-empty range of slots, as `CLUSTER NODES` and `CLUSTER ADDSLOTSRANGE` write
/// them: `0-5460`, or `7` for a range of one slot.
///
/// ```
/// use redis_hash_slot::{Slot, SlotRange};
///
/// let range: SlotRange = "0-5460".parse()?;
/// assert_eq!(range.len(), 5461);
/// assert_eq!(range.to_string(), "0-5460");
/// let one: SlotRange = "7".parse()?;
/// assert_eq!(one, SlotRange::from(Slot::new(7).unwrap()));
/// assert_eq!(one.to_string(), "7");
/// # Ok::<(), redis_hash_slot::ParseSlotRangeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlotRange {
    start: Slot,
    end: Slot,
}

impl SlotRange {
    /// Every slot: `0-16383`.
    pub const ALL: Self = Self {
        start: Slot::MIN,
        end: Slot::MAX,
    };

    /// The slots from `start` to `end`, both included; `None` when `end` is before `start`.
    pub const fn new(start: Slot, end: Slot) -> Option<Self> {
        if start.get() <= end.get() {
            Some(Self { start, end })
        } else {
            None
        }
    }

    /// The first slot of the range.
    pub const fn start(self) -> Slot {
        self.start
    }

    /// The last slot of the range (included).
    pub const fn end(self) -> Slot {
        self.end
    }

    /// How many slots the range holds: 1 to 16384.
    #[allow(clippy::len_without_is_empty)] // a range is never empty
    pub const fn len(self) -> u16 {
        self.end.get() - self.start.get() + 1
    }

    /// Whether `slot` is in the range.
    pub const fn contains(self, slot: Slot) -> bool {
        self.start.get() <= slot.get() && slot.get() <= self.end.get()
    }

    /// Parses `N` or `N-M` from ASCII bytes, with the server's rules for each number (see
    /// [`ParseSlotError`]) and `N <= M`.
    pub fn from_ascii(text: &[u8]) -> Result<Self, ParseSlotRangeError> {
        let (start, end) = match text.iter().position(|&b| b == b'-') {
            Some(dash) => {
                let (start, dash_end) = text.split_at(dash);
                (start, dash_end.get(1..).unwrap_or_default())
            }
            None => (text, text),
        };
        let start = parse_slot(start).map_err(ParseSlotRangeError::Start)?;
        let end = parse_slot(end).map_err(ParseSlotRangeError::End)?;
        Self::new(start, end).ok_or(ParseSlotRangeError::Reversed { start, end })
    }
}

impl From<Slot> for SlotRange {
    fn from(slot: Slot) -> Self {
        Self {
            start: slot,
            end: slot,
        }
    }
}

impl IntoIterator for SlotRange {
    type Item = Slot;
    type IntoIter = core::iter::Map<core::ops::RangeInclusive<u16>, fn(u16) -> Slot>;

    /// The range's slots, in ascending order.
    fn into_iter(self) -> Self::IntoIter {
        (self.start.get()..=self.end.get()).map(|n| Slot::from_index(usize::from(n)))
    }
}

impl fmt::Display for SlotRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.start == self.end {
            write!(f, "{}", self.start)
        } else {
            write!(f, "{}-{}", self.start, self.end)
        }
    }
}

impl FromStr for SlotRange {
    type Err = ParseSlotRangeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_ascii(s.as_bytes())
    }
}

impl FromStr for Slot {
    type Err = ParseSlotError;

    /// Parses a slot number with the server's rules (see [`ParseSlotError`]).
    ///
    /// ```
    /// use redis_hash_slot::{ParseSlotError, Slot};
    ///
    /// assert_eq!("16383".parse::<Slot>(), Ok(Slot::MAX));
    /// assert_eq!("016".parse::<Slot>(), Err(ParseSlotError::LeadingZero));
    /// assert_eq!("16384".parse::<Slot>(), Err(ParseSlotError::OutOfRange));
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_slot(s.as_bytes())
    }
}

/// Decimal digits, no sign, no leading zero, below 16384: what the server's `string2ll`
/// followed by its `0 <= slot < 16384` check accepts for a slot argument.
fn parse_slot(text: &[u8]) -> Result<Slot, ParseSlotError> {
    match text {
        [] => return Err(ParseSlotError::Empty),
        [b'0', _, ..] => return Err(ParseSlotError::LeadingZero),
        _ => {}
    }
    let mut n: u32 = 0;
    for &b in text {
        if !b.is_ascii_digit() {
            return Err(ParseSlotError::InvalidDigit);
        }
        n = n * 10 + u32::from(b - b'0');
        if n >= u32::from(SLOT_COUNT) {
            return Err(ParseSlotError::OutOfRange);
        }
    }
    // `n < SLOT_COUNT` was checked after every digit.
    Ok(Slot::from_index(n as usize))
}

/// Why a slot number was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseSlotError {
    /// There were no digits at all.
    #[error("empty slot number")]
    Empty,
    /// A byte other than `0`-`9` (signs and spaces included, as in the server).
    #[error("slot number has a byte that is not a decimal digit")]
    InvalidDigit,
    /// A number of two or more digits started with `0`, which the server's integer parser refuses.
    #[error("slot number has a leading zero")]
    LeadingZero,
    /// The number is 16384 or more.
    #[error("slot number is not below 16384")]
    OutOfRange,
}

/// Why a slot range was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseSlotRangeError {
    /// The number before the `-` (or the only number) is not a slot.
    #[error("bad start of slot range: {0}")]
    Start(ParseSlotError),
    /// The number after the `-` is not a slot.
    #[error("bad end of slot range: {0}")]
    End(ParseSlotError),
    /// The range ends before it starts.
    #[error("slot range {start}-{end} ends before it starts")]
    Reversed {
        /// The first number.
        start: Slot,
        /// The second number, below the first.
        end: Slot,
    },
}
