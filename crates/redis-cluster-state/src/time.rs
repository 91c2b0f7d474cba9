//! Time as the state machine sees it: an [`Instant`] on the driver's clock and a [`Duration`]
//! between two, both whole milliseconds, as the server's `mstime()` counts.
//!
//! The state machine reads no clock: every input carries `now`. Unlike
//! `std::time::Instant`, an [`Instant`] has a known origin, because the bus and `CLUSTER
//! NODES` carry times: gossip entries hold the sender's ping and pong times in Unix seconds,
//! and a receiver compares them with its own clock. A driver of a real node therefore gives
//! Unix time in milliseconds ([`Instant::from_unix_millis`]); a simulator may start at 0.
//! Arithmetic saturates: a time never wraps around, and an early or late `now` is harmless.

use core::ops::{Add, AddAssign, Sub};

/// A point on the driver's clock, in milliseconds (Unix time for a real node).
///
/// ```
/// use redis_cluster_state::{Duration, Instant};
///
/// let start = Instant::from_millis(1_000);
/// let later = start + Duration::from_secs(2);
/// assert_eq!(later.as_millis(), 3_000);
/// assert_eq!(later - start, Duration::from_millis(2_000));
/// assert_eq!(start - later, Duration::ZERO, "saturates");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The clock's origin.
    pub const ZERO: Self = Self(0);
    /// Later than any time a clock reaches: "never", for a deadline.
    pub const NEVER: Self = Self(u64::MAX);

    /// The instant `ms` milliseconds after the clock's origin.
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms)
    }

    /// The instant `ms` milliseconds after the Unix epoch: what a real node's driver passes
    /// (the same number as [`Instant::from_millis`], named for what it means).
    pub const fn from_unix_millis(ms: u64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the clock's origin.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// How long after `earlier` this is; zero when it is not after it.
    pub const fn saturating_since(self, earlier: Self) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Self;

    fn add(self, rhs: Duration) -> Self {
        Self(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Duration> for Instant {
    type Output = Self;

    fn sub(self, rhs: Duration) -> Self {
        Self(self.0.saturating_sub(rhs.0))
    }
}

impl Sub for Instant {
    type Output = Duration;

    /// [`Instant::saturating_since`].
    fn sub(self, rhs: Self) -> Duration {
        self.saturating_since(rhs)
    }
}

/// A span of time in whole milliseconds.
///
/// ```
/// use redis_cluster_state::Duration;
///
/// let timeout = Duration::from_millis(15_000);
/// assert_eq!(timeout / 2, Duration::from_secs(7) + Duration::from_millis(500));
/// assert_eq!(core::time::Duration::from(timeout).as_secs(), 15);
/// assert_eq!(Duration::from(core::time::Duration::from_micros(2_999)).as_millis(), 2);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(u64);

impl Duration {
    /// No time.
    pub const ZERO: Self = Self(0);
    /// The longest span there is.
    pub const MAX: Self = Self(u64::MAX);

    /// `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms)
    }

    /// `s` seconds.
    pub const fn from_secs(s: u64) -> Self {
        Self(s.saturating_mul(1000))
    }

    /// The span in milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// `self * n`, saturating.
    pub const fn saturating_mul(self, n: u64) -> Self {
        Self(self.0.saturating_mul(n))
    }
}

impl Add for Duration {
    type Output = Self;

    fn add(self, rhs: Self) -> Self {
        Self(self.0.saturating_add(rhs.0))
    }
}

impl Sub for Duration {
    type Output = Self;

    fn sub(self, rhs: Self) -> Self {
        Self(self.0.saturating_sub(rhs.0))
    }
}

impl core::ops::Mul<u64> for Duration {
    type Output = Self;

    fn mul(self, rhs: u64) -> Self {
        self.saturating_mul(rhs)
    }
}

impl core::ops::Div<u64> for Duration {
    type Output = Self;

    /// Whole milliseconds, rounded down; dividing by zero gives [`Duration::MAX`].
    fn div(self, rhs: u64) -> Self {
        match self.0.checked_div(rhs) {
            Some(ms) => Self(ms),
            None => Self::MAX,
        }
    }
}

impl From<core::time::Duration> for Duration {
    /// Whole milliseconds, rounded down, saturating.
    fn from(d: core::time::Duration) -> Self {
        Self(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

impl From<Duration> for core::time::Duration {
    fn from(d: Duration) -> Self {
        Self::from_millis(d.0)
    }
}
