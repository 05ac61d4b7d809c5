//! QuestDB's timestamp patterns (`'yyyy-MM-dd HH:mm:ss.SSSUUU'`), for `to_str(ts, pattern)`
//! and `to_timestamp(text, pattern)`.
//!
//! A pattern is cut into tokens greedily, the longest known token first, so `SS` is two `S`
//! and `EEE` is `EE` then `E` (QuestDB 9.3.4 prints them so). Letters outside the table and
//! every other character are literal; text between single quotes is literal, `''` a quote.
//!
//! | token | prints | parses |
//! | --- | --- | --- |
//! | `y` `yy` `yyy` `yyyy` | year; last 2; last 3; 4 digits | any digits; 2 (20yy); 3; 4 |
//! | `M` `MM` `MMM` `MMMM` | month 1-12; 2 digits; `Jan`; `January` | 1-2 digits; 2; name |
//! | `d` `dd`, `D` | day of month; day of year | 1-2 digits; 2 (`D` never parses) |
//! | `E` `EE`, `u` | `Tue`, `Tuesday`; day of the week, Sunday 1 | a name, ignored |
//! | `w` `ww` | ISO week of the year | never parses |
//! | `H` `HH` `k` `kk` `K` `KK` `h` `hh` `a` | hour 0-23, 1-24, 0-11, 1-12; `AM`/`PM` | the same |
//! | `m` `mm` `s` `ss` | minute, second | 1-2 digits; 2 |
//! | `S` `SSS` `U` `UUU` `N` `NNN` | milli, micro, nano of the next coarser unit | 1-3 digits read as a fraction; 3 |
//! | `G`, `z` `Z` `x` | `AD`; `Z` | —; `Z`, `UTC`, `±hh[[:]mm]` or a zone name |
//!
//! Parsing is strict: the whole text must match, or the answer is NULL (QuestDB's rule), as
//! it is for a date that does not exist (`2024-02-30`). A pattern holds at most
//! [`PATTERN_TOKENS_MAX`] tokens.

use chrono::{DateTime, Datelike, NaiveDate, Offset, TimeZone, Timelike};
use chrono_tz::Tz;

/// Tokens one pattern may hold: patterns are constants written by people.
pub(crate) const PATTERN_TOKENS_MAX: usize = 256;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// The known tokens, longest first within a letter.
const TOKENS: &[(&str, Field)] = &[
    ("yyyy", Field::Year(4)),
    ("yyy", Field::Year(3)),
    ("yy", Field::Year(2)),
    ("y", Field::Year(0)),
    ("MMMM", Field::MonthName { long: true }),
    ("MMM", Field::MonthName { long: false }),
    ("MM", Field::Month(2)),
    ("M", Field::Month(0)),
    ("dd", Field::Day(2)),
    ("d", Field::Day(0)),
    ("D", Field::DayOfYear),
    ("EE", Field::DayName { long: true }),
    ("E", Field::DayName { long: false }),
    ("u", Field::DayOfWeek),
    ("ww", Field::Week(2)),
    ("w", Field::Week(0)),
    ("a", Field::AmPm),
    ("HH", Field::Hour(Clock::H0to23, 2)),
    ("H", Field::Hour(Clock::H0to23, 0)),
    ("kk", Field::Hour(Clock::H1to24, 2)),
    ("k", Field::Hour(Clock::H1to24, 0)),
    ("KK", Field::Hour(Clock::H0to11, 2)),
    ("K", Field::Hour(Clock::H0to11, 0)),
    ("hh", Field::Hour(Clock::H1to12, 2)),
    ("h", Field::Hour(Clock::H1to12, 0)),
    ("mm", Field::Minute(2)),
    ("m", Field::Minute(0)),
    ("ss", Field::Second(2)),
    ("s", Field::Second(0)),
    ("SSS", Field::Fraction(Frac::Milli, 3)),
    ("S", Field::Fraction(Frac::Milli, 0)),
    ("UUU", Field::Fraction(Frac::Micro, 3)),
    ("U", Field::Fraction(Frac::Micro, 0)),
    ("NNN", Field::Fraction(Frac::Nano, 3)),
    ("N", Field::Fraction(Frac::Nano, 0)),
    ("G", Field::Era),
    ("z", Field::Zone),
    ("Z", Field::Zone),
    ("x", Field::Zone),
];

/// Which hours a clock token counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clock {
    H0to23,
    H1to24,
    H0to11,
    H1to12,
}

/// The sub-second unit of a fraction token: milliseconds of the second, microseconds of the
/// millisecond, nanoseconds of the microsecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frac {
    Milli,
    Micro,
    Nano,
}

impl Frac {
    fn scale_ns(self) -> i64 {
        match self {
            Frac::Milli => 1_000_000,
            Frac::Micro => 1_000,
            Frac::Nano => 1,
        }
    }
}

/// A token's meaning; a width of 0 is "as many digits as needed" (1-2, or any for a year).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Year(u8),
    Month(u8),
    MonthName { long: bool },
    Day(u8),
    DayOfYear,
    DayName { long: bool },
    DayOfWeek,
    Week(u8),
    AmPm,
    Hour(Clock, u8),
    Minute(u8),
    Second(u8),
    Fraction(Frac, u8),
    Era,
    Zone,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Field(Field),
    Literal(String),
}

/// A compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    tokens: Vec<Token>,
}

impl Pattern {
    /// Cuts `pattern` into tokens; errors name what was wrong.
    pub(crate) fn compile(pattern: &str) -> Result<Pattern, String> {
        let mut tokens: Vec<Token> = Vec::new();
        let mut literal = String::new();
        let mut rest = pattern;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('\'') {
                if let Some(after2) = after.strip_prefix('\'') {
                    literal.push('\'');
                    rest = after2;
                    continue;
                }
                let Some(end) = after.find('\'') else {
                    return Err(format!("pattern '{pattern}' has an unclosed quote"));
                };
                literal.push_str(&after[..end]);
                rest = &after[end + 1..];
                continue;
            }
            if let Some((text, field)) = TOKENS.iter().find(|(t, _)| rest.starts_with(t)) {
                if !literal.is_empty() {
                    tokens.push(Token::Literal(std::mem::take(&mut literal)));
                }
                tokens.push(Token::Field(*field));
                rest = &rest[text.len()..];
            } else {
                let c = rest.chars().next().expect("rest is not empty");
                literal.push(c);
                rest = &rest[c.len_utf8()..];
            }
            if tokens.len() > PATTERN_TOKENS_MAX {
                return Err(format!(
                    "pattern '{pattern}' has more than {PATTERN_TOKENS_MAX} parts"
                ));
            }
        }
        if !literal.is_empty() {
            tokens.push(Token::Literal(literal));
        }
        Ok(Pattern { tokens })
    }

    /// Appends the UTC instant `t_ns` (nanoseconds since the epoch) printed by the pattern.
    pub(crate) fn format(&self, t_ns: i64, out: &mut String) {
        use std::fmt::Write;
        let dt = DateTime::from_timestamp_nanos(t_ns);
        let sub_ns = i64::from(dt.nanosecond() % 1_000_000_000);
        for token in &self.tokens {
            let field = match token {
                Token::Literal(text) => {
                    out.push_str(text);
                    continue;
                }
                Token::Field(f) => *f,
            };
            // `write!` to a String cannot fail.
            let _ = match field {
                Field::Year(0) => write!(out, "{}", dt.year()),
                Field::Year(2) => write!(out, "{:02}", dt.year().rem_euclid(100)),
                Field::Year(3) => write!(out, "{:03}", dt.year().rem_euclid(1000)),
                Field::Year(w) => write!(out, "{:0w$}", dt.year(), w = usize::from(w)),
                Field::Month(w) => padded(out, dt.month(), w),
                Field::MonthName { long } => {
                    let name = MONTHS[dt.month0() as usize];
                    out.push_str(if long { name } else { &name[..3] });
                    Ok(())
                }
                Field::Day(w) => padded(out, dt.day(), w),
                Field::DayOfYear => write!(out, "{}", dt.ordinal()),
                Field::DayName { long } => {
                    let name = DAYS[dt.weekday().num_days_from_monday() as usize];
                    out.push_str(if long { name } else { &name[..3] });
                    Ok(())
                }
                Field::DayOfWeek => write!(out, "{}", dt.weekday().number_from_sunday()),
                Field::Week(w) => padded(out, dt.iso_week().week(), w),
                Field::AmPm => {
                    out.push_str(if dt.hour() < 12 { "AM" } else { "PM" });
                    Ok(())
                }
                Field::Hour(clock, w) => {
                    let h = dt.hour();
                    let shown = match clock {
                        Clock::H0to23 => h,
                        Clock::H1to24 => {
                            if h == 0 {
                                24
                            } else {
                                h
                            }
                        }
                        Clock::H0to11 => h % 12,
                        Clock::H1to12 => {
                            if h.is_multiple_of(12) {
                                12
                            } else {
                                h % 12
                            }
                        }
                    };
                    padded(out, shown, w)
                }
                Field::Minute(w) => padded(out, dt.minute(), w),
                Field::Second(w) => padded(out, dt.second(), w),
                Field::Fraction(frac, w) => {
                    let unit = frac.scale_ns();
                    let value = (sub_ns / unit) % 1000;
                    if w == 0 {
                        write!(out, "{value}")
                    } else {
                        write!(out, "{value:03}")
                    }
                }
                Field::Era => {
                    out.push_str(if dt.year() > 0 { "AD" } else { "BC" });
                    Ok(())
                }
                Field::Zone => {
                    out.push('Z');
                    Ok(())
                }
            };
        }
    }

    /// The UTC instant, in nanoseconds, that `text` spells in the pattern; `None` when it
    /// does not match the whole text or names no instant.
    pub(crate) fn parse(&self, text: &str) -> Option<i64> {
        let mut p = Parsed::default();
        let mut rest = text.as_bytes();
        for token in &self.tokens {
            match token {
                Token::Literal(lit) => rest = rest.strip_prefix(lit.as_bytes())?,
                Token::Field(field) => rest = p.read(*field, rest)?,
            }
        }
        if !rest.is_empty() {
            return None;
        }
        p.instant()
    }
}

fn padded(out: &mut String, value: u32, width: u8) -> std::fmt::Result {
    use std::fmt::Write;
    write!(out, "{value:0w$}", w = usize::from(width))
}

/// Fields read so far.
#[derive(Debug, Default)]
struct Parsed {
    year: Option<i32>,
    month: Option<u32>,
    day: Option<u32>,
    /// Hour as read and the clock it was read on.
    hour: Option<(u32, Clock)>,
    pm: Option<bool>,
    minute: u32,
    second: u32,
    sub_ns: i64,
    /// Offset from UTC in seconds, or a zone whose offset depends on the instant.
    offset_s: Option<i32>,
    zone: Option<Tz>,
}

impl Parsed {
    /// Reads `field` from the front of `input`; the rest, or `None` when it does not match.
    fn read<'a>(&mut self, field: Field, input: &'a [u8]) -> Option<&'a [u8]> {
        match field {
            Field::Year(width) => {
                let (v, rest) = match width {
                    0 => digits(input, 1, 9)?,
                    w => digits(input, usize::from(w), usize::from(w))?,
                };
                let v = i32::try_from(v).ok()?;
                self.year = Some(if width == 2 { 2000 + v } else { v });
                Some(rest)
            }
            Field::Month(w) => {
                let (v, rest) = two(input, w)?;
                self.month = Some(v);
                Some(rest)
            }
            Field::MonthName { long } => {
                let (i, rest) = name(input, &MONTHS, long)?;
                self.month = Some(i as u32 + 1);
                Some(rest)
            }
            Field::Day(w) => {
                let (v, rest) = two(input, w)?;
                self.day = Some(v);
                Some(rest)
            }
            Field::DayName { long } => name(input, &DAYS, long).map(|(_, rest)| rest),
            Field::DayOfWeek => digits(input, 1, 1).map(|(_, rest)| rest),
            Field::DayOfYear | Field::Week(_) | Field::Era => None,
            Field::AmPm => {
                let head = input.get(..2)?;
                self.pm = Some(if head.eq_ignore_ascii_case(b"AM") {
                    false
                } else if head.eq_ignore_ascii_case(b"PM") {
                    true
                } else {
                    return None;
                });
                Some(&input[2..])
            }
            Field::Hour(clock, w) => {
                let (v, rest) = two(input, w)?;
                self.hour = Some((v, clock));
                Some(rest)
            }
            Field::Minute(w) => {
                let (v, rest) = two(input, w)?;
                self.minute = v;
                Some(rest)
            }
            Field::Second(w) => {
                let (v, rest) = two(input, w)?;
                self.second = v;
                Some(rest)
            }
            Field::Fraction(frac, w) => {
                let (lo, hi) = if w == 0 { (1, 3) } else { (3, 3) };
                let taken = input.iter().take(hi).take_while(|b| b.is_ascii_digit());
                let n = taken.count();
                let (v, rest) = digits(input, lo, n.max(lo))?;
                let scaled = v as i64 * 10_i64.pow(3 - n as u32);
                self.sub_ns += scaled * frac.scale_ns();
                Some(rest)
            }
            Field::Zone => self.read_zone(input),
        }
    }

    fn read_zone<'a>(&mut self, input: &'a [u8]) -> Option<&'a [u8]> {
        if let Some(rest) = input.strip_prefix(b"Z") {
            self.offset_s = Some(0);
            return Some(rest);
        }
        if let Some(sign) = input.first().filter(|b| **b == b'+' || **b == b'-') {
            let sign = if *sign == b'-' { -1 } else { 1 };
            let (h, mut rest) = digits(&input[1..], 2, 2)?;
            let mut m = 0;
            let after_colon = rest.strip_prefix(b":").unwrap_or(rest);
            if let Some((mm, r)) = digits(after_colon, 2, 2) {
                m = mm;
                rest = r;
            }
            if h > 23 || m > 59 {
                return None;
            }
            self.offset_s = Some(sign * (h as i32 * 3600 + m as i32 * 60));
            return Some(rest);
        }
        let len = input
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b'+'))
            .count();
        let name = std::str::from_utf8(&input[..len]).ok()?;
        let zone: Tz = name.parse().ok()?;
        self.zone = Some(zone);
        Some(&input[len..])
    }

    fn instant(&self) -> Option<i64> {
        let hour = match self.hour {
            None => 0,
            Some((h, Clock::H0to23)) if h < 24 => h,
            Some((h, Clock::H1to24)) if (1..=24).contains(&h) => h % 24,
            Some((h, Clock::H0to11)) if h < 12 => h + if self.pm == Some(true) { 12 } else { 0 },
            Some((h, Clock::H1to12)) if (1..=12).contains(&h) => {
                h % 12 + if self.pm == Some(true) { 12 } else { 0 }
            }
            Some(_) => return None,
        };
        let date = NaiveDate::from_ymd_opt(
            self.year.unwrap_or(1970),
            self.month.unwrap_or(1),
            self.day.unwrap_or(1),
        )?;
        let local = date.and_hms_opt(hour, self.minute, self.second)?;
        let local_ns = local
            .and_utc()
            .timestamp_nanos_opt()?
            .checked_add(self.sub_ns)?;
        let offset_s = match (self.offset_s, self.zone) {
            (Some(o), _) => o,
            (None, Some(zone)) => zone
                .offset_from_local_datetime(&local)
                .earliest()?
                .fix()
                .local_minus_utc(),
            (None, None) => 0,
        };
        local_ns.checked_sub(i64::from(offset_s) * 1_000_000_000)
    }
}

/// An unsigned number of `lo..=hi` ASCII digits (as many as there are, up to `hi`).
fn digits(input: &[u8], lo: usize, hi: usize) -> Option<(u64, &[u8])> {
    let n = input
        .iter()
        .take(hi)
        .take_while(|b| b.is_ascii_digit())
        .count();
    if n < lo {
        return None;
    }
    let v = input[..n]
        .iter()
        .fold(0u64, |acc, b| acc * 10 + u64::from(b - b'0'));
    Some((v, &input[n..]))
}

/// A one- or two-digit field: exactly `width` digits when given, else 1-2.
fn two(input: &[u8], width: u8) -> Option<(u32, &[u8])> {
    let (lo, hi) = if width == 0 { (1, 2) } else { (2, 2) };
    digits(input, lo, hi).map(|(v, rest)| (v as u32, rest))
}

/// One of `names` (in full, or its first three letters), case-insensitively.
fn name<'a>(input: &'a [u8], names: &[&str], long: bool) -> Option<(usize, &'a [u8])> {
    names.iter().enumerate().find_map(|(i, n)| {
        let n = if long {
            n.as_bytes()
        } else {
            &n.as_bytes()[..3]
        };
        let head = input.get(..n.len())?;
        head.eq_ignore_ascii_case(n).then(|| (i, &input[n.len()..]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(s: &str) -> i64 {
        DateTime::parse_from_rfc3339(s)
            .unwrap()
            .timestamp_nanos_opt()
            .unwrap()
    }

    fn show(t: &str, pattern: &str) -> String {
        let mut out = String::new();
        Pattern::compile(pattern).unwrap().format(ns(t), &mut out);
        out
    }

    fn read(text: &str, pattern: &str) -> Option<i64> {
        Pattern::compile(pattern).unwrap().parse(text)
    }

    // Expected texts are QuestDB 9.3.4's answers to the same calls.
    #[test]
    fn prints_as_questdb() {
        let t = "2024-03-05T17:08:09.012345Z";
        assert_eq!(
            show(t, "yyyy-MM-dd HH:mm:ss.SSSUUU"),
            "2024-03-05 17:08:09.012345"
        );
        assert_eq!(show(t, "y yy yyy yyyy"), "2024 24 024 2024");
        assert_eq!(show(t, "M MM MMM MMMM"), "3 03 Mar March");
        assert_eq!(show(t, "d dd D"), "5 05 65");
        assert_eq!(
            show(t, "E EE EEE EEEE u"),
            "Tue Tuesday TuesdayTue TuesdayTuesday 3"
        );
        assert_eq!(show(t, "w ww"), "10 10");
        assert_eq!(show(t, "h hh H HH k kk K KK a"), "5 05 17 17 17 17 5 05 PM");
        assert_eq!(
            show(t, "S SS SSS U UU UUU N NNN"),
            "12 1212 012 345 345345 345 0 000"
        );
        assert_eq!(show(t, "G z"), "AD Z");
        assert_eq!(show(t, "yyyy-MM-ddTHH"), "2024-03-05T17");
        assert_eq!(show("2005-01-01T00:08:09Z", "h k K H a"), "12 24 0 0 AM");
        assert_eq!(show(t, "'yyyy' yyyy''"), "yyyy 2024'");
    }

    #[test]
    fn parses_as_questdb() {
        let p = |s| Some(ns(s));
        assert_eq!(
            read("2024-01-02 10:00:00", "yyyy-MM-dd HH:mm:ss"),
            p("2024-01-02T10:00:00Z")
        );
        assert_eq!(read("2024-1-2", "yyyy-M-d"), p("2024-01-02T00:00:00Z"));
        assert_eq!(read("20240102", "yyyyMMdd"), p("2024-01-02T00:00:00Z"));
        assert_eq!(read("2024-01-02x", "yyyy-MM-dd"), None);
        assert_eq!(read(" 2024", "yyyy"), None);
        assert_eq!(read("2024-02-30", "yyyy-MM-dd"), None);
        assert_eq!(read("2024-13-02", "yyyy-MM-dd"), None);
        assert_eq!(
            read("2024-01-02T10:11:12.123456Z", "yyyy-MM-ddTHH:mm:ss.SSSUUUz"),
            p("2024-01-02T10:11:12.123456Z")
        );
        assert_eq!(
            read("2024-01-02T10:11:12+01:00", "yyyy-MM-ddTHH:mm:ssz"),
            p("2024-01-02T09:11:12Z")
        );
        assert_eq!(
            read("2024-01-02 10:00:00 Europe/Berlin", "yyyy-MM-dd HH:mm:ss z"),
            p("2024-01-02T09:00:00Z")
        );
        assert_eq!(
            read("2024-01-02 10:00:00 -05", "yyyy-MM-dd HH:mm:ss x"),
            p("2024-01-02T15:00:00Z")
        );
        assert_eq!(
            read("Tue, 02 January 2024 5 PM", "E, dd MMMM yyyy h a"),
            p("2024-01-02T17:00:00Z")
        );
        assert_eq!(
            read("1/2/2024 12 AM", "M/d/yyyy h a"),
            p("2024-01-02T00:00:00Z")
        );
        assert_eq!(
            read("2024-01-02 24", "yyyy-MM-dd k"),
            p("2024-01-02T00:00:00Z")
        );
        assert_eq!(read("24-01-02", "yy-MM-dd"), p("2024-01-02T00:00:00Z"));
        assert_eq!(
            read("2024-01-02 1:2:3.45", "yyyy-MM-dd H:m:s.S"),
            p("2024-01-02T01:02:03.450Z")
        );
        assert_eq!(read("2024-01-02 1:2:3.45", "yyyy-MM-dd H:m:s.SSS"), None);
        assert_eq!(read("2024-01-02 1:2:3.4567", "yyyy-MM-dd H:m:s.S"), None);
        assert_eq!(
            read("2024-01-02 01:02:03.456789", "yyyy-MM-dd HH:mm:ss.SSSU"),
            p("2024-01-02T01:02:03.456789Z")
        );
        assert_eq!(read("2024", "yyyy"), p("2024-01-01T00:00:00Z"));
    }

    #[test]
    fn patterns_are_bounded() {
        assert!(Pattern::compile("'open").is_err());
        assert!(Pattern::compile(&"y-".repeat(PATTERN_TOKENS_MAX + 1)).is_err());
    }
}
