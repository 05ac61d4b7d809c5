//! Allocation-free value parsers working on raw field bytes.
//!
//! These are the parsers the reader uses both for type detection and for
//! conversion; they are public so other crates (e.g. the HTTP `/imp`
//! endpoint or SQL literal handling) can reuse the same rules, in particular
//! [`parse_timestamp_nanos`].
//!
//! None of them trims whitespace; callers decide (the reader trims ASCII
//! whitespace around non-string values).

use chrono::{Datelike, NaiveDate};

/// Nanoseconds in one second.
pub const NANOS_PER_SECOND: i64 = 1_000_000_000;
/// Nanoseconds in one day.
pub const NANOS_PER_DAY: i64 = 86_400 * NANOS_PER_SECOND;

/// `NaiveDate::num_days_from_ce()` of 1970-01-01.
const UNIX_EPOCH_DAYS_FROM_CE: i64 = 719_163;

/// Parses `true` / `false`, ASCII case-insensitively.
pub fn parse_bool(s: &[u8]) -> Option<bool> {
    if s.eq_ignore_ascii_case(b"true") {
        Some(true)
    } else if s.eq_ignore_ascii_case(b"false") {
        Some(false)
    } else {
        None
    }
}

/// Parses an optionally signed decimal integer. Returns `None` for anything
/// else, including values out of range for `i64`.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut magnitude: u64 = 0;
    for &b in digits {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        magnitude = magnitude.checked_mul(10)?.checked_add(u64::from(digit))?;
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Parses a floating point number: decimal or exponent notation, `NaN`,
/// `inf`, `Infinity` (case-insensitive, optionally signed).
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    // Cheap rejection before UTF-8 validation: every accepted spelling
    // starts with a sign, a digit, a dot, `i` or `n`.
    match s.first() {
        Some(b'+' | b'-' | b'.' | b'0'..=b'9' | b'i' | b'I' | b'n' | b'N') => {}
        _ => return None,
    }
    std::str::from_utf8(s).ok()?.parse::<f64>().ok()
}

/// Parses a canonical `8-4-4-4-12` hex UUID (case-insensitive) into its 16
/// bytes, in the order they are written.
pub fn parse_uuid(s: &[u8]) -> Option<[u8; 16]> {
    if s.len() != 36 || s[8] != b'-' || s[13] != b'-' || s[18] != b'-' || s[23] != b'-' {
        return None;
    }
    let mut out = [0u8; 16];
    let mut nibbles = s
        .iter()
        .enumerate()
        .filter(|(i, _)| !matches!(i, 8 | 13 | 18 | 23))
        .map(|(_, &b)| hex_value(b));
    for byte in &mut out {
        let high = nibbles.next()??;
        let low = nibbles.next()??;
        *byte = (high << 4) | low;
    }
    Some(out)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Parses an ISO 8601 / RFC 3339 style timestamp into UTC nanoseconds since
/// the Unix epoch.
///
/// Accepted shapes (`T`, `t` or a space between date and time):
///
/// ```text
/// YYYY-MM-DD
/// YYYY-MM-DDTHH:MM
/// YYYY-MM-DDTHH:MM:SS
/// YYYY-MM-DDTHH:MM:SS.fffffffff     (1 to 9 fraction digits, '.' or ',')
/// ... followed by an optional zone:  Z | ±hh | ±hh:mm | ±hhmm
///     (optionally preceded by one space, e.g. "2016-01-01 07:47:52 +0000")
/// ```
///
/// A value without a zone is taken as UTC. Returns `None` for anything else,
/// for invalid calendar dates or times, and for instants outside the range
/// representable as `i64` nanoseconds (roughly years 1677 to 2262): see
/// [`parse_timestamp_wide`] to tell those from values that do not parse.
pub fn parse_timestamp_nanos(s: &[u8]) -> Option<i64> {
    parse_timestamp_wide(s).and_then(|nanos| i64::try_from(nanos).ok())
}

/// [`parse_timestamp_nanos`] without its range limit: nanoseconds since the Unix epoch of any
/// valid date from year 0000 to 9999, so that a value that is well-formed but out of range
/// can be reported as such.
pub fn parse_timestamp_wide(s: &[u8]) -> Option<i128> {
    let mut cur = Cursor { s, pos: 0 };
    let year = cur.digits(4)?;
    cur.eat(b'-')?;
    let month = cur.digits(2)?;
    cur.eat(b'-')?;
    let day = cur.digits(2)?;
    let date = NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, day)?;
    let days = i64::from(date.num_days_from_ce()) - UNIX_EPOCH_DAYS_FROM_CE;

    let mut nanos_of_day: i64 = 0;
    if matches!(cur.peek(), Some(b'T' | b't' | b' '))
        && cur.peek_at(1).is_some_and(|b| b.is_ascii_digit())
    {
        cur.pos += 1;
        let hour = cur.digits(2)?;
        cur.eat(b':')?;
        let minute = cur.digits(2)?;
        let mut second = 0;
        let mut fraction_nanos = 0;
        if cur.peek() == Some(b':') {
            cur.pos += 1;
            second = cur.digits(2)?;
            if matches!(cur.peek(), Some(b'.' | b',')) {
                cur.pos += 1;
                fraction_nanos = cur.fraction_nanos()?;
            }
        }
        if hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        nanos_of_day = i64::from(hour * 3600 + minute * 60 + second) * NANOS_PER_SECOND
            + i64::from(fraction_nanos);
    }

    let offset_seconds = cur.zone_offset_seconds()?;
    if cur.pos != s.len() {
        return None;
    }
    // Years 0000 to 9999 in nanoseconds fit in i128 many times over.
    Some(
        i128::from(days) * i128::from(NANOS_PER_DAY) + i128::from(nanos_of_day)
            - i128::from(offset_seconds) * i128::from(NANOS_PER_SECOND),
    )
}

/// Convenience wrapper of [`parse_timestamp_nanos`] for `&str`.
pub fn parse_timestamp_str(s: &str) -> Option<i64> {
    parse_timestamp_nanos(s.as_bytes())
}

/// A tiny forward-only scanner over the bytes of one value.
struct Cursor<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.s.get(self.pos + ahead).copied()
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Some(())
        } else {
            None
        }
    }

    /// Exactly `count` ASCII digits as a number.
    fn digits(&mut self, count: usize) -> Option<u32> {
        let bytes = self.s.get(self.pos..self.pos + count)?;
        let mut value = 0u32;
        for &b in bytes {
            if !b.is_ascii_digit() {
                return None;
            }
            value = value * 10 + u32::from(b - b'0');
        }
        self.pos += count;
        Some(value)
    }

    /// 1 to 9 fraction digits, scaled to nanoseconds.
    fn fraction_nanos(&mut self) -> Option<u32> {
        let start = self.pos;
        let mut value = 0u32;
        while let Some(b) = self.peek().filter(u8::is_ascii_digit) {
            if self.pos - start == 9 {
                return None;
            }
            value = value * 10 + u32::from(b - b'0');
            self.pos += 1;
        }
        let count = self.pos - start;
        if count == 0 {
            return None;
        }
        Some(value * 10u32.pow((9 - count) as u32))
    }

    /// Optional zone designator; returns its offset from UTC in seconds
    /// (0 when absent). `None` means a malformed zone.
    fn zone_offset_seconds(&mut self) -> Option<i32> {
        if self.peek() == Some(b' ') && matches!(self.peek_at(1), Some(b'Z' | b'z' | b'+' | b'-')) {
            self.pos += 1;
        }
        let sign = match self.peek() {
            Some(b'Z' | b'z') => {
                self.pos += 1;
                return Some(0);
            }
            Some(b'+') => 1,
            Some(b'-') => -1,
            _ => return Some(0),
        };
        self.pos += 1;
        let hours = self.digits(2)?;
        let minutes = if self.peek() == Some(b':') {
            self.pos += 1;
            self.digits(2)?
        } else if self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.digits(2)?
        } else {
            0
        };
        if hours > 23 || minutes > 59 {
            return None;
        }
        Some(sign * (hours * 3600 + minutes * 60) as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Option<i64> {
        parse_timestamp_str(s)
    }

    #[test]
    fn bools() {
        assert_eq!(parse_bool(b"true"), Some(true));
        assert_eq!(parse_bool(b"FALSE"), Some(false));
        assert_eq!(parse_bool(b"True"), Some(true));
        assert_eq!(parse_bool(b"t"), None);
        assert_eq!(parse_bool(b"1"), None);
        assert_eq!(parse_bool(b""), None);
    }

    #[test]
    fn longs() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"+42"), Some(42));
        assert_eq!(parse_i64(b"-42"), Some(-42));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"-9223372036854775809"), None);
        assert_eq!(parse_i64(b"99999999999999999999999"), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b""), None);
        assert_eq!(parse_i64(b"1.0"), None);
        assert_eq!(parse_i64(b"1e3"), None);
        assert_eq!(parse_i64(b" 1"), None);
    }

    #[test]
    fn doubles() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-2.5e3"), Some(-2500.0));
        assert_eq!(parse_f64(b"1E-2"), Some(0.01));
        assert_eq!(parse_f64(b".5"), Some(0.5));
        assert_eq!(parse_f64(b"7"), Some(7.0));
        assert!(parse_f64(b"NaN").is_some_and(f64::is_nan));
        assert_eq!(parse_f64(b"Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"abc"), None);
        assert_eq!(parse_f64(b"1.2.3"), None);
        assert_eq!(parse_f64(b""), None);
        assert_eq!(parse_f64(b"2016-01-01"), None);
    }

    #[test]
    fn uuids() {
        let bytes = parse_uuid(b"123e4567-E89B-12d3-a456-426614174000");
        assert_eq!(
            bytes,
            Some([
                0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17,
                0x40, 0x00
            ])
        );
        assert_eq!(parse_uuid(b"123e4567e89b12d3a456426614174000"), None);
        assert_eq!(parse_uuid(b"123e4567-e89b-12d3-a456-42661417400g"), None);
        assert_eq!(parse_uuid(b"123e4567-e89b-12d3-a456_426614174000"), None);
    }

    #[test]
    fn timestamps_utc() {
        assert_eq!(ts("1970-01-01"), Some(0));
        assert_eq!(ts("2016-01-01T02:17:08Z"), Some(1_451_614_628_000_000_000));
        assert_eq!(ts("2016-01-01 02:17:08"), Some(1_451_614_628_000_000_000));
        assert_eq!(ts("2016-01-01t02:17:08z"), Some(1_451_614_628_000_000_000));
        assert_eq!(
            ts("2016-01-01T00:00:00.123456789Z"),
            Some(1_451_606_400_123_456_789)
        );
        assert_eq!(ts("2016-01-01T00:00:00.5"), Some(1_451_606_400_500_000_000));
        assert_eq!(
            ts("2016-01-01T00:00:00,25Z"),
            Some(1_451_606_400_250_000_000)
        );
        assert_eq!(ts("2016-01-01"), Some(1_451_606_400_000_000_000));
        assert_eq!(ts("2016-01-01T02:17"), Some(1_451_614_620_000_000_000));
        assert_eq!(ts("1969-12-31T23:59:59.999999999Z"), Some(-1));
        assert_eq!(ts("2024-02-29T12:00:00Z"), Some(1_709_208_000_000_000_000));
    }

    #[test]
    fn timestamps_with_offsets() {
        // 07:47:52.646325 UTC
        let expected = 1_451_634_472_646_325_000;
        assert_eq!(ts("2016-01-01 07:47:52.646325 +0000"), Some(expected));
        assert_eq!(ts("2016-01-01T07:47:52.646325+00:00"), Some(expected));
        assert_eq!(ts("2016-01-01T09:47:52.646325+02:00"), Some(expected));
        assert_eq!(ts("2016-01-01T09:47:52.646325+0200"), Some(expected));
        assert_eq!(ts("2016-01-01T09:47:52.646325+02"), Some(expected));
        assert_eq!(ts("2016-01-01T02:17:52.646325-05:30"), Some(expected));
        assert_eq!(ts("2016-01-01 07:47:52.646325 Z"), Some(expected));
        // crossing midnight backwards
        assert_eq!(
            ts("2016-01-01T01:00:00+02:00"),
            Some(1_451_602_800_000_000_000)
        );
    }

    #[test]
    fn timestamps_rejected() {
        for bad in [
            "",
            "2016",
            "2016-1-01",
            "2016-01-1",
            "2016-13-01",
            "2016-02-30",
            "2015-02-29",
            "2016-01-01T",
            "2016-01-01T24:00:00",
            "2016-01-01T23:60:00",
            "2016-01-01T23:59:60",
            "2016-01-01T23:59:59.",
            "2016-01-01T23:59:59.1234567890",
            "2016-01-01T23:59:59Zjunk",
            "2016-01-01T23:59:59+",
            "2016-01-01T23:59:59+2",
            "2016-01-01T23:59:59+02:",
            "2016-01-01T23:59:59+24:00",
            "2016-01-01 ",
            "2016-01-01  12:00",
            "20160101",
            "2016/01/01",
            "9999-12-31",
            "1000-01-01",
            "hello",
        ] {
            assert_eq!(ts(bad), None, "{bad:?} should not parse");
        }
    }

    #[test]
    fn wide_timestamps_cover_every_four_digit_year() {
        let wide = |s: &str| parse_timestamp_wide(s.as_bytes());
        assert_eq!(wide("1970-01-01"), Some(0));
        assert_eq!(wide("1600-01-01"), Some(-11_676_096_000 * 1_000_000_000));
        assert_eq!(wide("2300-01-01"), Some(10_413_792_000 * 1_000_000_000));
        assert_eq!(
            wide("2262-04-11T23:47:16.854775808Z"),
            Some(i128::from(i64::MAX) + 1)
        );
        assert_eq!(ts("2300-01-01"), None);
        assert_eq!(wide("9999-12-31T23:59:59Z").map(|n| n > 0), Some(true));
        assert_eq!(wide("0000-01-01").map(|n| n < 0), Some(true));
        for bad in ["2300-13-01", "99999999999999999999", "1e30", "2016-01-01X"] {
            assert_eq!(wide(bad), None, "{bad}");
        }
    }

    #[test]
    fn timestamp_range_edges() {
        assert_eq!(ts("2262-04-11T23:47:16.854775807Z"), Some(i64::MAX));
        assert_eq!(ts("2262-04-11T23:47:16.854775808Z"), None);
        assert_eq!(ts("1677-09-21T00:12:43.145224192Z"), Some(i64::MIN));
    }
}
