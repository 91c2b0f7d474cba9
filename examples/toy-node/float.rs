//! INCRBYFLOAT's arithmetic. Redis 7.0 on x86-64 reads both numbers with `strtold` into an
//! 80-bit `long double` (a 64-bit significand), adds them, and prints the sum with `%.17Lf`
//! trimmed of its trailing zeros. An `f64` sum prints other digits for many inputs
//! (`0.1 + 0.2` prints as `0.3` with 64 bits, as `0.30000000000000004` with 53), so
//! this file does the same in software: correctly rounded parsing, one correctly rounded
//! addition, and exact printing, each rounding to nearest, ties to even, as the hardware and
//! glibc do.

use std::cmp::Ordering;

/// The smallest exponent of a significand's lowest bit: subnormals end at 2^-16445.
const MIN_EXP: i32 = -16445;
/// The largest exponent of a 64-bit significand's lowest bit: values stay under 2^16384.
const MAX_EXP: i32 = 16384 - 64;
/// `MAX_LONG_DOUBLE_CHARS`: the server refuses a number this long or longer.
const MAX_CHARS: usize = 5 * 1024;

/// A finite `long double`: `significand × 2^exponent`, negative when `negative`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LongDouble {
    negative: bool,
    significand: u64,
    exponent: i32,
}

/// Why a number cannot be summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FloatError {
    /// Not a number `string2ld` takes: "ERR value is not a valid float".
    Invalid,
    /// Infinite or NaN: "ERR increment would produce NaN or Infinity".
    NotFinite,
}

/// INCRBYFLOAT's new value: `current` (`None`: no key, so 0) plus `by`, with the
/// server's order of errors: a bad number, the current one first, before an infinite sum.
pub(crate) fn increment(current: Option<&[u8]>, by: &[u8]) -> Result<String, FloatError> {
    let current = current.map_or(Ok(LongDouble::ZERO), LongDouble::parse);
    let by = LongDouble::parse(by);
    match (current, by) {
        (Err(FloatError::Invalid), _) | (_, Err(FloatError::Invalid)) => Err(FloatError::Invalid),
        (Ok(current), Ok(by)) => current.add(by).map(LongDouble::to_human),
        _ => Err(FloatError::NotFinite),
    }
}

impl LongDouble {
    const ZERO: Self = Self {
        negative: false,
        significand: 0,
        exponent: 0,
    };

    /// Reads `text` as the server's `string2ld` does: `strtold` over the whole text, no
    /// leading space, no NUL (checked on the server: `2\0x` is refused), at most 5119
    /// bytes, no NaN, no overflow, no underflow to zero.
    /// Infinity is read, and refused by the sum.
    pub(crate) fn parse(text: &[u8]) -> Result<Self, FloatError> {
        if text.is_empty() || text.len() >= MAX_CHARS {
            return Err(FloatError::Invalid);
        }
        let (negative, body) = match text.first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let lower = body.to_ascii_lowercase();
        if lower == b"inf" || lower == b"infinity" {
            return Err(FloatError::NotFinite);
        }
        let value = if lower.starts_with(b"0x") && lower.len() > 2 {
            hexadecimal(&lower[2..])
        } else {
            decimal(&lower)
        }
        .ok_or(FloatError::Invalid)?;
        // An overflow is HUGE_VALL with ERANGE, and an underflow to zero is ERANGE too:
        // both refused; a subnormal is kept.
        let value = value.ok_or(FloatError::Invalid)?;
        Ok(Self { negative, ..value })
    }

    /// The sum, rounded once; `NotFinite` when it overflows.
    pub(crate) fn add(self, other: Self) -> Result<Self, FloatError> {
        if other.significand == 0 {
            return Ok(self);
        }
        if self.significand == 0 {
            return Ok(other);
        }
        // 62 guard bits below each significand; the smaller operand's bits shifted out past
        // them are only remembered as "some".
        let (big, small) = if self.exponent >= other.exponent {
            (self, other)
        } else {
            (other, self)
        };
        let a = u128::from(big.significand) << 62;
        let distance = (big.exponent - small.exponent) as u32;
        let b = u128::from(small.significand) << 62;
        let (b, sticky) = if distance >= 128 {
            (0, b != 0)
        } else {
            (b >> distance, b & ((1u128 << distance) - 1) != 0)
        };
        let exponent = big.exponent - 62;
        let rounded = if big.negative == small.negative {
            round(big.negative, a + b, exponent, sticky)
        } else if a > b {
            // The shifted-out bits made b a little larger than it is here: take one unit
            // off and keep "a little more" as the sticky bit.
            round(big.negative, a - b - u128::from(sticky), exponent, sticky)
        } else {
            // distance is 0 here, so nothing was shifted out.
            round(small.negative, b - a, exponent, false)
        };
        rounded.ok_or(FloatError::NotFinite)
    }

    /// `%.17Lf`, then the server's trim: trailing zeros and a trailing point go, and `-0`
    /// becomes `0`.
    pub(crate) fn to_human(self) -> String {
        let mut out = String::new();
        if self.negative {
            out.push('-');
        }
        if self.exponent >= 0 {
            let whole = Big::from(u128::from(self.significand)).shifted_left(self.exponent as u32);
            out.push_str(&whole.to_decimal());
        } else {
            let shift = self.exponent.unsigned_abs();
            let (whole, fraction) = if shift >= 64 {
                (0u128, u128::from(self.significand))
            } else {
                let whole = u128::from(self.significand >> shift);
                (whole, u128::from(self.significand) & ((1u128 << shift) - 1))
            };
            // 17 decimals of fraction / 2^shift, rounded half to even; the product is under
            // 2^121.
            let scaled = fraction * 10u128.pow(17);
            let digits = if shift > 121 {
                0
            } else {
                let quotient = scaled >> shift;
                let rest = scaled & ((1u128 << shift) - 1);
                let half = 1u128 << (shift - 1);
                let up = rest > half || (rest == half && quotient & 1 == 1);
                quotient + u128::from(up)
            };
            let (whole, digits) = if digits == 10u128.pow(17) {
                (whole + 1, 0)
            } else {
                (whole, digits)
            };
            out.push_str(&format!("{whole}.{digits:017}"));
            let trimmed = out.trim_end_matches('0').trim_end_matches('.').len();
            out.truncate(trimmed);
        }
        if out == "-0" {
            out.remove(0);
        }
        out
    }
}

/// `(negative, value × 2^exponent)` rounded to a `long double`, `sticky` telling that the
/// exact value is a little more than `value`. `None` on overflow.
fn round(negative: bool, value: u128, exponent: i32, sticky: bool) -> Option<LongDouble> {
    if value == 0 {
        return Some(LongDouble::ZERO);
    }
    let length = 128 - value.leading_zeros() as i32;
    // Keep 64 bits, fewer for a subnormal.
    let shift = (length - 64).max(MIN_EXP - exponent);
    let (significand, exponent) = if shift <= 0 {
        (value << shift.unsigned_abs(), exponent + shift)
    } else if shift >= 128 {
        // Under half of the smallest subnormal: the value is at most 2^127 of 2^128 units.
        let up = shift == 128 && (value > 1 << 127 || (value == 1 << 127 && sticky));
        (u128::from(up), exponent + shift)
    } else {
        let shift = shift as u32;
        let quotient = value >> shift;
        let rest = value & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        let up = rest > half || (rest == half && (sticky || quotient & 1 == 1));
        (quotient + u128::from(up), exponent + shift as i32)
    };
    let (significand, exponent) = if significand >> 64 != 0 {
        (significand >> 1, exponent + 1)
    } else {
        (significand, exponent)
    };
    if exponent > MAX_EXP {
        return None;
    }
    Some(LongDouble {
        negative,
        significand: significand as u64,
        exponent,
    })
}

/// `whole[.fraction][<marker>[+-]exponent]`, the digits of `whole` and `fraction` as
/// `is_digit` says and the exponent's decimal (saturated at a million either way, far past
/// any long double); `None` when the text is not that.
fn split(text: &[u8], marker: u8, is_digit: fn(&u8) -> bool) -> Option<(&[u8], &[u8], i64)> {
    let (mantissa, exponent) = match text.iter().position(|&b| b == marker) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let (whole, fraction) = match mantissa.iter().position(|&b| b == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, &[][..]),
    };
    let digits = |part: &[u8]| part.iter().all(is_digit);
    if whole.len() + fraction.len() == 0 || !digits(whole) || !digits(fraction) {
        return None;
    }
    let Some(exponent) = exponent else {
        return Some((whole, fraction, 0));
    };
    let (sign, body) = match exponent.first() {
        Some(b'-') => (-1, &exponent[1..]),
        Some(b'+') => (1, &exponent[1..]),
        _ => (1, exponent),
    };
    if body.is_empty() || !body.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = body
        .iter()
        .fold(0i64, |n, &d| (n * 10 + i64::from(d - b'0')).min(1_000_000));
    Some((whole, fraction, sign * n))
}

/// `digits[.digits][e[+-]digits]`, lowercase, the sign taken. `None`: not a number;
/// `Some(None)`: out of range.
fn decimal(text: &[u8]) -> Option<Option<LongDouble>> {
    let (whole, fraction, power) = split(text, b'e', u8::is_ascii_digit)?;
    let all: Vec<u8> = whole.iter().chain(fraction).copied().collect();
    let first = all.iter().position(|&d| d != b'0');
    let Some(first) = first else {
        return Some(Some(LongDouble::ZERO));
    };
    let significant = &all[first..];
    let power = power - fraction.len() as i64;
    // The value is significant × 10^power, in [10^(magnitude - 1), 10^magnitude).
    let magnitude = significant.len() as i64 + power;
    if magnitude > 4934 {
        return Some(None);
    }
    if magnitude < -4952 {
        return Some(None);
    }
    let number = Big::from_decimal(significant);
    let value = if power >= 0 {
        let number = number.times_pow10(power as u32);
        let (top, exponent, sticky) = number.top_bits();
        round(false, top, exponent, sticky)
    } else {
        let divisor = Big::from(1).times_pow10(power.unsigned_abs() as u32);
        // A quotient of 127 or 128 bits, and whether anything is left over.
        let shift = 127 + divisor.bit_length() as i64 - number.bit_length() as i64;
        let (numerator, divisor) = if shift >= 0 {
            (number.shifted_left(shift as u32), divisor)
        } else {
            (number, divisor.shifted_left(shift.unsigned_abs() as u32))
        };
        let (quotient, exact) = numerator.divide(&divisor);
        round(false, quotient, -shift as i32, !exact)
    };
    Some(underflow_refused(value))
}

/// A rounded value as `strtold`'s caller sees it: rounded to zero from a number that was not
/// zero is an underflow (ERANGE), refused like an overflow (`None` in, `None` out).
fn underflow_refused(value: Option<LongDouble>) -> Option<LongDouble> {
    value.filter(|v| v.significand != 0)
}

/// `hexdigits[.hexdigits][p[+-]digits]` after `0x`: exact binary, rounded once.
fn hexadecimal(text: &[u8]) -> Option<Option<LongDouble>> {
    let (whole, fraction, mut power) = split(text, b'p', u8::is_ascii_hexdigit)?;
    power -= 4 * fraction.len() as i64;
    let (mut value, mut sticky) = (0u128, false);
    for &d in whole.iter().chain(fraction) {
        let d = (d as char).to_digit(16).unwrap_or_default();
        if value >> 120 == 0 {
            value = value << 4 | u128::from(d);
        } else {
            // Past 120 bits, a digit only scales the value and may leave something over.
            sticky |= d != 0;
            power += 4;
        }
    }
    if value == 0 {
        return Some(Some(LongDouble::ZERO));
    }
    let length = 128 - i64::from(value.leading_zeros());
    if length + power > 16385 || length + power < -16450 {
        return Some(None);
    }
    Some(underflow_refused(round(false, value, power as i32, sticky)))
}

/// A non-negative integer of any size: 64-bit limbs, least significant first, no zero limb
/// at the top.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u64>);

impl From<u128> for Big {
    fn from(n: u128) -> Self {
        let mut big = Self(vec![n as u64, (n >> 64) as u64]);
        big.trim();
        big
    }
}

impl Big {
    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn from_decimal(digits: &[u8]) -> Self {
        let mut big = Self(Vec::new());
        for chunk in digits.chunks(19) {
            let n = chunk
                .iter()
                .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
            big.multiply_add(10u64.pow(chunk.len() as u32), n);
        }
        big
    }

    /// self × factor + addend.
    fn multiply_add(&mut self, factor: u64, addend: u64) {
        let mut carry = u128::from(addend);
        for limb in &mut self.0 {
            let product = u128::from(*limb) * u128::from(factor) + carry;
            *limb = product as u64;
            carry = product >> 64;
        }
        if carry != 0 {
            self.0.push(carry as u64);
        }
    }

    fn times_pow10(mut self, mut power: u32) -> Self {
        while power > 0 {
            let step = power.min(19);
            self.multiply_add(10u64.pow(step), 0);
            power -= step;
        }
        self
    }

    fn bit_length(&self) -> u64 {
        self.0.last().map_or(0, |top| {
            64 * (self.0.len() as u64 - 1) + 64 - u64::from(top.leading_zeros())
        })
    }

    fn shifted_left(&self, bits: u32) -> Self {
        let (limbs, bits) = ((bits / 64) as usize, bits % 64);
        let mut out = vec![0u64; limbs];
        let mut carry = 0u64;
        for &limb in &self.0 {
            if bits == 0 {
                out.push(limb);
            } else {
                out.push(limb << bits | carry);
                carry = limb >> (64 - bits);
            }
        }
        out.push(carry);
        let mut big = Self(out);
        big.trim();
        big
    }

    fn bit(&self, at: u64) -> bool {
        self.0
            .get((at / 64) as usize)
            .is_some_and(|limb| limb >> (at % 64) & 1 == 1)
    }

    /// The top 128 bits (all of them when fewer), the exponent of the lowest one kept, and
    /// whether any bit below is set.
    fn top_bits(&self) -> (u128, i32, bool) {
        let length = self.bit_length();
        let low = length.saturating_sub(128);
        let top = (low..length)
            .rev()
            .fold(0u128, |top, at| top << 1 | u128::from(self.bit(at)));
        let sticky = (0..low).any(|at| self.bit(at));
        (top, low as i32, sticky)
    }

    fn compare_shifted(&self, other: &Self, shift: u64) -> Ordering {
        let length = other.bit_length() + shift;
        match self.bit_length().cmp(&length) {
            Ordering::Equal => {}
            unequal => return unequal,
        }
        for at in (shift..length).rev() {
            match self.bit(at).cmp(&other.bit(at - shift)) {
                Ordering::Equal => {}
                unequal => return unequal,
            }
        }
        if (0..shift).any(|at| self.bit(at)) {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    fn subtract(&mut self, other: &Self) {
        let mut borrow = false;
        for (at, limb) in self.0.iter_mut().enumerate() {
            let theirs = other.0.get(at).copied().unwrap_or_default();
            let (difference, under) = limb.overflowing_sub(theirs);
            let (difference, under_again) = difference.overflowing_sub(u64::from(borrow));
            *limb = difference;
            borrow = under || under_again;
        }
        self.trim();
    }

    /// The quotient, which must fit in 128 bits, and whether the division was exact.
    fn divide(mut self, divisor: &Self) -> (u128, bool) {
        let mut quotient = 0u128;
        let span = self.bit_length().saturating_sub(divisor.bit_length());
        for shift in (0..=span.min(127)).rev() {
            if self.compare_shifted(divisor, shift) != Ordering::Less {
                self.subtract(&divisor.shifted_left(shift as u32));
                quotient |= 1 << shift;
            }
        }
        (quotient, self.0.is_empty())
    }

    fn to_decimal(&self) -> String {
        let mut limbs = self.0.clone();
        let mut chunks = Vec::new();
        while !limbs.is_empty() {
            // Divide by 10^19, most significant limb first.
            let mut rest = 0u128;
            for limb in limbs.iter_mut().rev() {
                let current = rest << 64 | u128::from(*limb);
                *limb = (current / 10_000_000_000_000_000_000) as u64;
                rest = current % 10_000_000_000_000_000_000;
            }
            chunks.push(rest as u64);
            while limbs.last() == Some(&0) {
                limbs.pop();
            }
        }
        let mut out = chunks.pop().unwrap_or_default().to_string();
        for chunk in chunks.iter().rev() {
            out.push_str(&format!("{chunk:019}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_print_as_redis_7_0_prints_them() {
        // Each checked on redis-server 7.0.15 (x86-64): SET k a, INCRBYFLOAT k b.
        let cases = [
            ("0", "0.1", "0.1"),
            ("0.1", "0.2", "0.3"),
            ("0.1", "0.7", "0.8"),
            ("1.1", "2.2", "3.3"),
            ("10.5", "0.1", "10.6"),
            ("5.0e3", "2.0e2", "5200"),
            ("3", "-3", "0"),
            ("-1", "0.5", "-0.5"),
            ("0", "1e-20", "0"),
            ("0", "-1e-20", "0"),
            ("1", "0x10", "17"),
            ("0", ".5", "0.5"),
            ("0", "5.", "5"),
            ("0", "+.5e1", "5"),
            ("0", "1e30", "1000000000000000000024696061952"),
            ("0", "1.0000000000000000001", "1"),
            ("0", "0.30000000000000000000000001", "0.3"),
            ("0", "1e-4950", "0"),
            ("0", "0x1p-16445", "0"),
        ];
        for (a, b, expected) in cases {
            let sum = increment(Some(a.as_bytes()), b.as_bytes());
            assert_eq!(sum.as_deref(), Ok(expected), "{a} + {b}");
        }
        assert_eq!(increment(None, b"2.5").as_deref(), Ok("2.5"));
        // 4933 digits, the first ones as the server prints them.
        let big = increment(None, b"1e4932").expect("under the maximum");
        assert_eq!(big.len(), 4933);
        assert!(big.starts_with("100000000000000000000601894938796389132383777425453311477"));
    }

    #[test]
    fn refused_as_redis_7_0_refuses() {
        for bad in [
            "", " 1", "1 ", "abc", "nan", "1e", "1e+", ".", "0x", "0x1p", "1e99999", "1e-5000",
            "--1", "2\0x", "\0",
        ] {
            assert_eq!(
                increment(None, bad.as_bytes()),
                Err(FloatError::Invalid),
                "{bad:?}"
            );
        }
        assert_eq!(
            increment(None, &[b'1'; MAX_CHARS]),
            Err(FloatError::Invalid)
        );
        assert_eq!(increment(None, b"inf"), Err(FloatError::NotFinite));
        assert_eq!(
            increment(Some(b"-Infinity"), b"1"),
            Err(FloatError::NotFinite)
        );
        // A bad number is reported before an infinite one, whichever comes first.
        assert_eq!(increment(Some(b"inf"), b"x"), Err(FloatError::Invalid));
        assert_eq!(
            increment(Some(b"1e4932"), b"1e4932"),
            Err(FloatError::NotFinite)
        );
    }

    #[test]
    fn integers_round_trip_exactly() {
        for n in [0i64, 1, -1, 42, i64::MAX, i64::MIN, 1 << 53, (1 << 53) + 1] {
            let text = n.to_string();
            assert_eq!(
                increment(Some(text.as_bytes()), b"0").as_deref(),
                Ok(&*text)
            );
        }
    }
}
