//! The server's knobs for what a connection may hold: memory values as `redis.conf` writes
//! them, and `client-output-buffer-limit`, read, written and applied as the server does.
//!
//! A server, a proxy or a test double that answers RESP clients needs the same rules the real
//! server applies to a client that does not read its replies. Nothing here holds buffers or
//! reads a clock: the caller counts the bytes it holds for a client and passes the time in.
//!
//! ```
//! use redis_resp::server_limits::{OutputLimits, parse_memory};
//!
//! assert_eq!(parse_memory("64mb"), Some(64 << 20));
//! let mut limits = OutputLimits::DEFAULT;
//! limits.apply("pubsub 1mb 512kb 10")?;
//! assert_eq!(
//!     limits.to_string(),
//!     "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 524288 10"
//! );
//!
//! // A subscriber that holds 600 KiB of unread messages: over the soft limit, so the clock
//! // starts at 1 000 ms; 10 seconds later it is still over, and is to be closed.
//! let mut over_soft_since = None;
//! assert!(!limits.pubsub.exceeded(600 << 10, &mut over_soft_since, 1_000));
//! assert!(!limits.pubsub.exceeded(600 << 10, &mut over_soft_since, 11_000));
//! assert!(limits.pubsub.exceeded(600 << 10, &mut over_soft_since, 11_001));
//! # Ok::<(), redis_resp::server_limits::OutputLimitError>(())
//! ```

use core::fmt;

/// A memory value as the server reads one (`redis.conf`, `CONFIG SET`): decimal digits and an
/// optional unit, `b`, `k` (1000), `kb` (1024), `m`, `mb`, `g` or `gb`, in any case.
///
/// `None` for anything else, as the server refuses it: a sign, blanks, an empty number, an
/// unknown unit. A value past `u64` is `None` too (the server would wrap it instead).
pub fn parse_memory(text: &str) -> Option<u64> {
    const UNITS: [(&str, u64); 7] = [
        ("kb", 1 << 10),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("k", 1_000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
        ("b", 1),
    ];
    let digits_end = text
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let scale = if unit.is_empty() {
        1
    } else {
        UNITS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(unit))?
            .1
    };
    if digits.is_empty() {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(scale)
}

/// One client class's `client-output-buffer-limit`: a client is closed once the replies it
/// has not read pass `hard` bytes, or stay past `soft` bytes for longer than `soft_seconds`.
/// A bound of 0 is off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OutputLimit {
    /// Bytes past which the client is closed at once (0: none).
    pub hard: u64,
    /// Bytes past which the client is closed once it has stayed past them (0: none).
    pub soft: u64,
    /// How long, in seconds, a client may stay past `soft`.
    pub soft_seconds: u64,
}

impl OutputLimit {
    /// No limit: the server's `normal 0 0 0`.
    pub const NONE: Self = Self {
        hard: 0,
        soft: 0,
        soft_seconds: 0,
    };

    /// Whether a client that holds `held` bytes of unread replies at `now_ms` (milliseconds
    /// from any fixed start) is to be closed, as the server judges it: past `hard`, or past
    /// `soft` for more than `soft_seconds` since it first went past.
    ///
    /// `over_soft_since` is the client's own record of when that was: set on the first call
    /// past `soft`, cleared on a call back under it. Call it whenever `held` grows (the server
    /// checks as a reply is queued) and whenever time passes, if the client is to be cut while
    /// nothing is queued for it.
    pub fn exceeded(&self, held: u64, over_soft_since: &mut Option<u64>, now_ms: u64) -> bool {
        if self.hard > 0 && held > self.hard {
            return true;
        }
        if self.soft == 0 || held <= self.soft {
            *over_soft_since = None;
            return false;
        }
        let since = *over_soft_since.get_or_insert(now_ms);
        now_ms.saturating_sub(since) > self.soft_seconds.saturating_mul(1000)
    }
}

/// `client-output-buffer-limit`'s three classes of clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OutputLimits {
    /// Clients that are neither replicas nor subscribers.
    pub normal: OutputLimit,
    /// Replicas (the class the server also calls `slave`).
    pub replica: OutputLimit,
    /// Clients subscribed to a channel or pattern.
    pub pubsub: OutputLimit,
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Why a `client-output-buffer-limit` value is refused, in the server's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OutputLimitError {
    /// The words are not groups of four (`class hard soft seconds`).
    #[error("Wrong number of arguments in buffer limit configuration.")]
    WrongNumberOfArguments,
    /// A class that is not `normal`, `replica`, `slave` or `pubsub` (`master` included).
    #[error("Invalid client class specified in buffer limit configuration.")]
    UnknownClass,
    /// A hard or soft limit that is not a memory value, or seconds that are not a number.
    #[error("Error in hard, soft or soft_seconds setting in buffer limit configuration.")]
    BadValue,
}

impl OutputLimits {
    /// The server's defaults: `normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60`.
    pub const DEFAULT: Self = Self {
        normal: OutputLimit::NONE,
        replica: OutputLimit {
            hard: 256 << 20,
            soft: 64 << 20,
            soft_seconds: 60,
        },
        pubsub: OutputLimit {
            hard: 32 << 20,
            soft: 8 << 20,
            soft_seconds: 60,
        },
    };

    /// Applies a value of `client-output-buffer-limit` as `CONFIG SET` does: groups of
    /// `class hard soft seconds`, the words one space apart, each group replacing its class
    /// (a later group wins). An empty value changes nothing; nothing changes when any group
    /// is refused. (A configuration file's line is split into words first, and the words
    /// joined by one space, as the server does.)
    pub fn apply(&mut self, value: &str) -> Result<(), OutputLimitError> {
        if value.is_empty() {
            return Ok(());
        }
        if value.split(' ').count() % 4 != 0 {
            return Err(OutputLimitError::WrongNumberOfArguments);
        }
        let mut next = *self;
        let mut words = value.split(' ');
        while let (Some(class), Some(hard), Some(soft), Some(seconds)) =
            (words.next(), words.next(), words.next(), words.next())
        {
            let slot = if class.eq_ignore_ascii_case("normal") {
                &mut next.normal
            } else if class.eq_ignore_ascii_case("replica") || class.eq_ignore_ascii_case("slave") {
                &mut next.replica
            } else if class.eq_ignore_ascii_case("pubsub") {
                &mut next.pubsub
            } else {
                return Err(OutputLimitError::UnknownClass);
            };
            *slot = OutputLimit {
                hard: parse_memory(hard).ok_or(OutputLimitError::BadValue)?,
                soft: parse_memory(soft).ok_or(OutputLimitError::BadValue)?,
                soft_seconds: seconds.parse().map_err(|_| OutputLimitError::BadValue)?,
            };
        }
        *self = next;
        Ok(())
    }
}

/// As `CONFIG GET` writes the value: all three classes, in bytes, the replica class named
/// `slave`.
impl fmt::Display for OutputLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let classes = [
            ("normal", self.normal),
            ("slave", self.replica),
            ("pubsub", self.pubsub),
        ];
        for (i, (name, limit)) in classes.into_iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(
                f,
                "{name} {} {} {}",
                limit.hard, limit.soft, limit.soft_seconds
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn memory_values_read_as_the_server_reads_them() {
        let cases = [
            ("0", Some(0)),
            ("08", Some(8)),
            ("1k", Some(1_000)),
            ("1Kb", Some(1_024)),
            ("2MB", Some(2 << 20)),
            ("3m", Some(3_000_000)),
            ("1g", Some(1_000_000_000)),
            ("1gB", Some(1 << 30)),
            ("7b", Some(7)),
            ("-1", None),
            ("+5", None),
            (" 5", None),
            ("5 ", None),
            ("kb", None),
            ("", None),
            ("1x", None),
            ("1kbb", None),
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("18014398509481984kb", None),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_memory(text), bytes, "{text:?}");
        }
    }

    #[test]
    fn a_value_is_applied_whole_or_not_at_all() {
        let mut limits = OutputLimits::DEFAULT;
        limits
            .apply("pubsub 1kb 2 3 SLAVE 10 20 +30 normal 0 0 0 pubsub 4 5 6")
            .unwrap();
        assert_eq!(
            limits.to_string(),
            "normal 0 0 0 slave 10 20 30 pubsub 4 5 6"
        );
        limits.apply("").unwrap();
        assert_eq!(
            limits.to_string(),
            "normal 0 0 0 slave 10 20 30 pubsub 4 5 6"
        );
        let before = limits;
        // The answers real servers (7.0.15, 8.2.3, Valkey 8.1.8, 9.1.2) give to CONFIG SET.
        let refused = [
            (
                "pubsub 1 2 3  normal 0 0 0",
                OutputLimitError::WrongNumberOfArguments,
            ),
            (
                "pubsub 1 2 3\tnormal 0 0 0",
                OutputLimitError::WrongNumberOfArguments,
            ),
            (" pubsub 1 2 3", OutputLimitError::WrongNumberOfArguments),
            ("pubsub 1 2 3 ", OutputLimitError::WrongNumberOfArguments),
            ("master 1 2 3", OutputLimitError::UnknownClass),
            ("bogus 1x 2 3", OutputLimitError::UnknownClass),
            ("pubsub 1 2 3 normal 1x 0 0", OutputLimitError::BadValue),
            ("pubsub 1 2", OutputLimitError::WrongNumberOfArguments),
            (
                "pubsub 1 2 3 normal",
                OutputLimitError::WrongNumberOfArguments,
            ),
            ("bogus 1 2 3", OutputLimitError::UnknownClass),
            ("normal -1 0 0", OutputLimitError::BadValue),
            ("normal 0 -5 0", OutputLimitError::BadValue),
            ("pubsub 1x 2 3", OutputLimitError::BadValue),
            ("pubsub 10 20 -1", OutputLimitError::BadValue),
            ("pubsub +10 20 1", OutputLimitError::BadValue),
            ("pubsub 1 2 3 bogus 1 2 3", OutputLimitError::UnknownClass),
        ];
        for (value, error) in refused {
            assert_eq!(limits.apply(value), Err(error), "{value:?}");
            assert_eq!(limits, before, "{value:?} changed the limits");
        }
        assert_eq!(
            OutputLimitError::BadValue.to_string(),
            "Error in hard, soft or soft_seconds setting in buffer limit configuration."
        );
    }

    #[test]
    fn the_defaults_are_the_servers() {
        assert_eq!(
            OutputLimits::default().to_string(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
    }

    #[test]
    fn hard_cuts_at_once_soft_after_its_seconds() {
        let limit = OutputLimit {
            hard: 100,
            soft: 50,
            soft_seconds: 2,
        };
        let mut since = None;
        assert!(!limit.exceeded(50, &mut since, 0));
        assert_eq!(since, None);
        assert!(limit.exceeded(101, &mut since, 0));
        assert!(!limit.exceeded(51, &mut since, 1_000));
        assert_eq!(since, Some(1_000));
        assert!(!limit.exceeded(99, &mut since, 3_000));
        // Back under the soft limit: the clock starts again.
        assert!(!limit.exceeded(10, &mut since, 3_001));
        assert_eq!(since, None);
        assert!(!limit.exceeded(60, &mut since, 4_000));
        assert!(limit.exceeded(60, &mut since, 6_001));
        // Off bounds cut nothing.
        let mut since = None;
        assert!(!OutputLimit::NONE.exceeded(u64::MAX, &mut since, u64::MAX));
        let soft_only = OutputLimit {
            hard: 0,
            soft: 1,
            soft_seconds: 0,
        };
        assert!(!soft_only.exceeded(2, &mut since, 5));
        assert!(soft_only.exceeded(2, &mut since, 6));
    }
}
