//! The line-level rules: integers, line ends, doubles, big numbers.

use crate::error::{DecodeError, ErrorKind, IntegerError};

/// Reads the integer that starts at `start` and its CRLF, by the server's `string2ll` rules:
/// an optional `-`, then `0` alone or digits without a leading zero, within `i64`.
/// `Ok(None)` when the input ends first; `Ok(Some((value, index after the LF)))` otherwise.
#[inline(always)]
pub(crate) fn int_line(buf: &[u8], start: usize) -> Result<Option<(i64, usize)>, DecodeError> {
    // One or two digits, the length of most headers: no SWAR step (its dependent multiplies
    // were the largest cost of pipelined commands, `a_pipelined_set` bench).
    match buf.get(start..start + 4) {
        Some(&[d, b'\r', b'\n', _]) if d.is_ascii_digit() => {
            return Ok(Some((i64::from(d - b'0'), start + 3)));
        }
        Some(&[t, u, b'\r', b'\n']) if matches!(t, b'1'..=b'9') && u.is_ascii_digit() => {
            return Ok(Some((
                i64::from(t - b'0') * 10 + i64::from(u - b'0'),
                start + 4,
            )));
        }
        _ => {}
    }
    let mut i = start;
    let negative = buf.get(i) == Some(&b'-');
    if negative {
        i += 1;
    }
    let digits = i;
    // A leading zero is reported as soon as the digit after it is seen, before any later
    // overflow, so the error does not depend on how much of the input has arrived.
    if buf.get(digits) == Some(&b'0') && buf.get(digits + 1).is_some_and(u8::is_ascii_digit) {
        return Err(int_error(digits + 1, IntegerError::LeadingZero));
    }
    let mut value: u64 = 0;
    // Up to eight digits at once when eight bytes are at hand.
    if let Some(word) = buf.get(i..i + 8) {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(word);
        let (n, eight) = eight_digits(u64::from_le_bytes(bytes));
        value = eight;
        i += n;
    }
    // Up to 19 digits cannot overflow a u64, so the loop needs no overflow check (checked
    // multiplication made it several times slower); a 20th digit is always out of range.
    while let Some(&b) = buf.get(i) {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        if i - digits == 19 {
            return Err(int_error(i, IntegerError::Overflow));
        }
        value = value * 10 + u64::from(digit);
        i += 1;
    }
    let count = i - digits;
    match buf.get(i) {
        None => return Ok(None),
        Some(b'\r') => {}
        Some(_) => return Err(int_error(i, IntegerError::NotDigit)),
    }
    if count == 0 {
        return Err(int_error(i, IntegerError::Empty));
    }
    let value = if negative {
        if value == 0 {
            return Err(int_error(digits, IntegerError::LeadingZero));
        }
        0i64.checked_sub_unsigned(value)
    } else {
        i64::try_from(value).ok()
    }
    .ok_or(int_error(i - 1, IntegerError::Overflow))?;
    match buf.get(i + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some((value, i + 2))),
        Some(_) => Err(DecodeError::new(i + 1, ErrorKind::BadLineEnd)),
    }
}

/// The leading decimal digits of eight bytes (the first byte in the lowest bits): how many
/// there are, and their value.
///
/// A hand-written SWAR step: the digit loop was the largest cost of decoding arrays of
/// integers (`c_int_arrays` bench), one dependent multiply per digit.
#[inline(always)]
fn eight_digits(word: u64) -> (usize, u64) {
    const LOW_NIBBLES: u64 = u64::from_ne_bytes([0x0f; 8]);
    const HIGH_NIBBLES: u64 = u64::from_ne_bytes([0xf0; 8]);
    const ZEROS: u64 = u64::from_ne_bytes([b'0'; 8]);
    const SIXES: u64 = u64::from_ne_bytes([0x06; 8]);
    // A byte is a digit when its high nibble is 3 and adding 6 keeps it so (0x30..=0x39).
    // A carry out of a byte only happens for a non-digit, so the first flagged byte is right.
    let not_digit =
        ((word & HIGH_NIBBLES) ^ ZEROS) | ((word.wrapping_add(SIXES) & HIGH_NIBBLES) ^ ZEROS);
    let n = (not_digit.trailing_zeros() / 8) as usize;
    if n == 0 {
        return (0, 0);
    }
    // Keep the n digits, moved to the top so that the empty places read as leading zeros,
    // then combine pairs, quads and octets.
    let digits = (word & LOW_NIBBLES) << (8 * (8 - n));
    let pairs = (digits * 10 + (digits >> 8)) & 0x00ff_00ff_00ff_00ff;
    let quads = (pairs * 100 + (pairs >> 16)) & 0x0000_ffff_0000_ffff;
    let octet = (quads * 10_000 + (quads >> 32)) & 0xffff_ffff;
    (n, octet)
}

const fn int_error(offset: usize, e: IntegerError) -> DecodeError {
    DecodeError::new(offset, ErrorKind::Integer(e))
}

/// Where the line whose bytes are searched from `from` ends.
pub(crate) enum LineEnd {
    /// The CR of the line's CRLF is at this index.
    Found(usize),
    /// No CRLF yet; a later search can start again from this index.
    Incomplete(usize),
}

/// Finds the CRLF that ends a line. Strictly, the line may hold neither CR nor LF; with
/// `lenient` it ends at the first CRLF whatever comes before.
#[inline]
pub(crate) fn line_end(buf: &[u8], from: usize, lenient: bool) -> Result<LineEnd, DecodeError> {
    let mut i = from;
    loop {
        let rest = buf.get(i..).unwrap_or_default();
        let found = if lenient {
            rest.iter().position(|&b| b == b'\r')
        } else {
            rest.iter().position(|&b| b == b'\r' || b == b'\n')
        };
        let Some(at) = found.map(|at| i + at) else {
            return Ok(LineEnd::Incomplete(buf.len()));
        };
        match (buf.get(at), buf.get(at + 1)) {
            (Some(b'\r'), Some(b'\n')) => return Ok(LineEnd::Found(at)),
            (Some(b'\r'), None) => return Ok(LineEnd::Incomplete(at)),
            _ if lenient => i = at + 1,
            _ => {
                let bad = if buf.get(at) == Some(&b'\n') {
                    at
                } else {
                    at + 1
                };
                return Err(DecodeError::new(bad, ErrorKind::BadLineEnd));
            }
        }
    }
}

/// Whether `text` is a double as the servers print it: an optional `-`, then `inf`, `nan`, or
/// digits with an optional fraction and exponent (Redis before 7.2 printed `%.17g`, so
/// `1e+300` and `-nan` occur).
pub(crate) fn is_strict_double(text: &[u8]) -> bool {
    let body = text.strip_prefix(b"-").unwrap_or(text);
    if body == b"inf" || body == b"nan" {
        return true;
    }
    let digits = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
    let mut i = digits(body);
    if i == 0 {
        return false;
    }
    if body.get(i) == Some(&b'.') {
        let n = digits(body.get(i + 1..).unwrap_or_default());
        if n == 0 {
            return false;
        }
        i += 1 + n;
    }
    if matches!(body.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(body.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let n = digits(body.get(i..).unwrap_or_default());
        if n == 0 {
            return false;
        }
        i += n;
    }
    i == body.len()
}

/// A double's value: any text that Rust reads as an `f64` (which covers `inf`, `-inf`, `nan`,
/// `-nan` and exponents).
pub(crate) fn parse_double(text: &[u8]) -> Option<f64> {
    core::str::from_utf8(text).ok()?.parse().ok()
}

/// Whether `text` is a big number: an optional `-` and at least one decimal digit.
pub(crate) fn is_big_number(text: &[u8]) -> bool {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}
