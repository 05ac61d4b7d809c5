//! Timestamp patterns in QuestDB's notation (`yyyy-MM-dd HH:mm:ss.SSS`), for columns whose
//! timestamps are not ISO 8601 (HTTP `/imp`'s `schema` part gives them as `"pattern"`).
//!
//! ```text
//!  "dd/MM/yyyy HH:mm"  ──compile──▶ [Day, Lit('/'), Month, Lit('/'), Year4, Lit(' '), ...]
//!  b"31/12/2016 23:59" ──parse────▶ 1483228740000000000 (UTC nanoseconds)
//! ```
//!
//! Letters (a run of the same letter is one field):
//!
//! | letters | field |
//! | --- | --- |
//! | `yyyy` / `yy` / `y` | year: four digits / two digits (70-99 are 19xx, 00-69 20xx) / one to four digits |
//! | `MM` / `M` / `MMM` / `MMMM` | month: two digits / one or two digits / `Jan` / `January` (case-insensitive) |
//! | `dd` / `d` | day of month: two digits / one or two |
//! | `HH` / `H` | hour 0-23; `hh` / `h` hour 1-12 with `a` (`AM`/`PM`) |
//! | `mm` / `m`, `ss` / `s` | minute, second |
//! | `SSS` / `S` | milliseconds: three digits / one to three |
//! | `UUU` / `U` | microseconds after the milliseconds: three digits / one to three |
//! | `NNN` / `N` | nanoseconds after the microseconds: three digits / one to three |
//! | `Z` or `z` | zone: `Z`, `UTC`, `GMT`, `±hh`, `±hhmm`, `±hh:mm` |
//! | `E`... | day-of-week name, checked to be letters and ignored |
//! | `'text'` | literal text (`''` is a quote) |
//!
//! Any other character is a literal. Values without a zone are UTC.

use std::fmt;

use chrono::{Datelike, NaiveDate};

use crate::parse::{NANOS_PER_DAY, NANOS_PER_SECOND};

/// One element of a compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// Year with at least `min` and at most `max` digits (`yy`: two digits, pivoted).
    Year {
        min: usize,
        max: usize,
        pivot: bool,
    },
    /// Month as digits.
    Month {
        min: usize,
    },
    /// Month as a name, abbreviated (`Jan`) or in full.
    MonthName,
    Day {
        min: usize,
    },
    Hour24 {
        min: usize,
    },
    Hour12 {
        min: usize,
    },
    AmPm,
    Minute {
        min: usize,
    },
    Second {
        min: usize,
    },
    /// A group of three fraction digits worth `unit` nanoseconds per last digit
    /// (milliseconds: 1_000_000), at least `min` digits.
    Fraction {
        unit: u32,
        min: usize,
    },
    Zone,
    DayName,
    Literal(String),
}

/// A compiled timestamp pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimestampFormat {
    text: String,
    tokens: Vec<Token>,
}

impl fmt::Display for TimestampFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

impl TimestampFormat {
    /// Compiles a pattern; fails on an unterminated quote, a pattern without a year, month and
    /// day, or letters this notation does not define.
    pub fn compile(pattern: &str) -> Result<TimestampFormat, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        let mut literal = String::new();
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                // Quoted literal; '' inside or alone is a quote.
                let mut j = i + 1;
                if chars.get(j) == Some(&'\'') {
                    literal.push('\'');
                    i = j + 1;
                    continue;
                }
                loop {
                    match chars.get(j) {
                        None => return Err(format!("unterminated quote in pattern '{pattern}'")),
                        Some('\'') if chars.get(j + 1) == Some(&'\'') => {
                            literal.push('\'');
                            j += 2;
                        }
                        Some('\'') => break,
                        Some(&other) => {
                            literal.push(other);
                            j += 1;
                        }
                    }
                }
                i = j + 1;
                continue;
            }
            let run = chars[i..].iter().take_while(|&&x| x == c).count();
            let token = match c {
                'y' => Some(match run {
                    2 => Token::Year {
                        min: 2,
                        max: 2,
                        pivot: true,
                    },
                    1 => Token::Year {
                        min: 1,
                        max: 4,
                        pivot: false,
                    },
                    n => Token::Year {
                        min: n,
                        max: n,
                        pivot: false,
                    },
                }),
                'M' if run >= 3 => Some(Token::MonthName),
                'M' => Some(Token::Month { min: run }),
                'd' => Some(Token::Day { min: run }),
                'H' => Some(Token::Hour24 { min: run }),
                'h' => Some(Token::Hour12 { min: run }),
                'a' => Some(Token::AmPm),
                'm' => Some(Token::Minute { min: run }),
                's' => Some(Token::Second { min: run }),
                'S' => Some(Token::Fraction {
                    unit: 1_000_000,
                    min: run,
                }),
                'U' => Some(Token::Fraction {
                    unit: 1_000,
                    min: run,
                }),
                'N' => Some(Token::Fraction { unit: 1, min: run }),
                'Z' | 'z' => Some(Token::Zone),
                'E' => Some(Token::DayName),
                c if c.is_ascii_alphabetic() && c != 'T' => {
                    return Err(format!(
                        "unknown letter '{c}' in timestamp pattern '{pattern}' (quote literal text: 'text')"
                    ));
                }
                _ => None,
            };
            match token {
                Some(token) => {
                    if !literal.is_empty() {
                        tokens.push(Token::Literal(std::mem::take(&mut literal)));
                    }
                    tokens.push(token);
                    i += run;
                }
                None => {
                    literal.push(c);
                    i += 1;
                }
            }
        }
        if !literal.is_empty() {
            tokens.push(Token::Literal(literal));
        }
        let has = |f: &dyn Fn(&Token) -> bool| tokens.iter().any(f);
        if !has(&|t| matches!(t, Token::Year { .. }))
            || !has(&|t| matches!(t, Token::Month { .. } | Token::MonthName))
            || !has(&|t| matches!(t, Token::Day { .. }))
        {
            return Err(format!(
                "timestamp pattern '{pattern}' needs a year (y), a month (M) and a day (d)"
            ));
        }
        Ok(TimestampFormat {
            text: pattern.to_string(),
            tokens,
        })
    }

    /// The pattern as written.
    pub fn pattern(&self) -> &str {
        &self.text
    }

    /// Parses a whole value to UTC nanoseconds; `None` if it does not match the pattern, names
    /// an invalid date or time, or is out of the `i64` nanosecond range.
    pub fn parse_nanos(&self, s: &[u8]) -> Option<i64> {
        self.parse_wide(s)
            .and_then(|nanos| i64::try_from(nanos).ok())
    }

    /// [`parse_nanos`](TimestampFormat::parse_nanos) without its range limit, so that a value
    /// that matches but is out of range can be reported as such.
    pub fn parse_wide(&self, s: &[u8]) -> Option<i128> {
        let mut pos = 0usize;
        let (mut year, mut month, mut day) = (1970i64, 1u32, 1u32);
        let (mut hour, mut minute, mut second) = (0u32, 0u32, 0u32);
        let mut hour12: Option<u32> = None;
        let mut pm: Option<bool> = None;
        let mut nanos = 0u64;
        let mut zone_seconds = 0i64;
        for token in &self.tokens {
            match token {
                Token::Literal(text) => {
                    let bytes = text.as_bytes();
                    if s.get(pos..pos + bytes.len())? != bytes {
                        return None;
                    }
                    pos += bytes.len();
                }
                Token::Year { min, max, pivot } => {
                    let v = digits(s, &mut pos, *min, *max)?;
                    year = if *pivot {
                        if v >= 70 { 1900 + v } else { 2000 + v }
                    } else {
                        v
                    } as i64;
                }
                Token::Month { min } => month = digits(s, &mut pos, *min, 2)? as u32,
                Token::MonthName => {
                    let rest = &s[pos..];
                    let letters = rest.iter().take_while(|b| b.is_ascii_alphabetic()).count();
                    let word = std::str::from_utf8(&rest[..letters]).ok()?.to_lowercase();
                    let index = MONTHS
                        .iter()
                        .position(|m| *m == word || (word.len() == 3 && m.starts_with(&word)))?;
                    month = index as u32 + 1;
                    pos += letters;
                }
                Token::Day { min } => day = digits(s, &mut pos, *min, 2)? as u32,
                Token::Hour24 { min } => hour = digits(s, &mut pos, *min, 2)? as u32,
                Token::Hour12 { min } => hour12 = Some(digits(s, &mut pos, *min, 2)? as u32),
                Token::AmPm => {
                    let word = s.get(pos..pos + 2)?;
                    pm = Some(if word.eq_ignore_ascii_case(b"PM") {
                        true
                    } else if word.eq_ignore_ascii_case(b"AM") {
                        false
                    } else {
                        return None;
                    });
                    pos += 2;
                }
                Token::Minute { min } => minute = digits(s, &mut pos, *min, 2)? as u32,
                Token::Second { min } => second = digits(s, &mut pos, *min, 2)? as u32,
                Token::Fraction { unit, min } => {
                    let start = pos;
                    let v = digits(s, &mut pos, (*min).min(3), 3)?;
                    // Fewer than three digits are the leading ones ("5" is 500 ms).
                    let scale = 10u64.pow(3 - (pos - start) as u32);
                    nanos += v * scale * u64::from(*unit);
                }
                Token::Zone => zone_seconds = zone(s, &mut pos)?,
                Token::DayName => {
                    let letters = s[pos..]
                        .iter()
                        .take_while(|b| b.is_ascii_alphabetic())
                        .count();
                    if letters == 0 {
                        return None;
                    }
                    pos += letters;
                }
            }
        }
        if pos != s.len() {
            return None;
        }
        if let Some(h) = hour12 {
            if !(1..=12).contains(&h) {
                return None;
            }
            hour = (h % 12) + if pm == Some(true) { 12 } else { 0 };
        }
        if hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        let date = NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, day)?;
        let days = i64::from(date.num_days_from_ce()) - 719_163;
        let seconds_of_day = i64::from(hour * 3600 + minute * 60 + second);
        Some(
            i128::from(days) * i128::from(NANOS_PER_DAY)
                + i128::from(seconds_of_day - zone_seconds) * i128::from(NANOS_PER_SECOND)
                + i128::from(nanos),
        )
    }
}

/// Between `min` and `max` ASCII digits at `pos` as a number.
fn digits(s: &[u8], pos: &mut usize, min: usize, max: usize) -> Option<u64> {
    let available = s[*pos..]
        .iter()
        .take(max)
        .take_while(|b| b.is_ascii_digit())
        .count();
    if available < min.max(1) {
        return None;
    }
    let mut v = 0u64;
    for &b in &s[*pos..*pos + available] {
        v = v * 10 + u64::from(b - b'0');
    }
    *pos += available;
    Some(v)
}

/// `Z`, `UTC`, `GMT`, `±hh`, `±hhmm` or `±hh:mm` as an offset east of UTC in seconds.
fn zone(s: &[u8], pos: &mut usize) -> Option<i64> {
    let rest = &s[*pos..];
    if rest.first().is_some_and(|b| b.eq_ignore_ascii_case(&b'Z')) {
        *pos += 1;
        return Some(0);
    }
    for name in [b"UTC", b"GMT"] {
        if rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(name) {
            *pos += 3;
            if *pos == s.len() {
                return Some(0);
            }
            return zone(s, pos);
        }
    }
    let sign = match rest.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    *pos += 1;
    let hours = digits(s, pos, 2, 2)? as i64;
    if s.get(*pos) == Some(&b':') {
        *pos += 1;
    }
    let minutes = if s.get(*pos).is_some_and(u8::is_ascii_digit) {
        digits(s, pos, 2, 2)? as i64
    } else {
        0
    };
    if hours > 23 || minutes > 59 {
        return None;
    }
    Some(sign * (hours * 3600 + minutes * 60))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_timestamp_str;

    fn parse(pattern: &str, value: &str) -> Option<i64> {
        TimestampFormat::compile(pattern)
            .expect("pattern")
            .parse_nanos(value.as_bytes())
    }

    fn iso(value: &str) -> Option<i64> {
        parse_timestamp_str(value)
    }

    #[test]
    fn questdb_patterns() {
        assert_eq!(
            parse("yyyy-MM-dd - HH:mm:ss", "2010-01-01 - 00:51:00"),
            iso("2010-01-01T00:51:00Z")
        );
        assert_eq!(
            parse("dd/MM/yyyy HH:mm", "31/12/2016 23:59"),
            iso("2016-12-31T23:59:00Z")
        );
        assert_eq!(
            parse("yyyy-MM-ddTHH:mm:ss.SSSUUUZ", "2016-01-01T00:00:00.123456Z"),
            iso("2016-01-01T00:00:00.123456Z")
        );
        assert_eq!(
            parse(
                "yyyy-MM-dd HH:mm:ss.SSSUUUNNN",
                "2016-01-01 00:00:00.123456789"
            ),
            Some(1_451_606_400_123_456_789)
        );
        assert_eq!(
            parse("d MMM yyyy h:mm a", "5 Jan 2016 1:07 PM"),
            iso("2016-01-05T13:07:00Z")
        );
        assert_eq!(
            parse("MMMM d, yyyy", "February 29, 2016"),
            iso("2016-02-29")
        );
        assert_eq!(
            parse("yyyy-MM-dd HH:mm:ssZ", "2016-01-01 02:00:00+02:00"),
            iso("2016-01-01T00:00:00Z")
        );
        assert_eq!(
            parse("E, dd MMM yyyy HH:mm:ss z", "Fri, 01 Jan 2016 00:00:00 GMT"),
            iso("2016-01-01T00:00:00Z")
        );
        assert_eq!(parse("yy-M-d", "99-1-2"), iso("1999-01-02"));
        assert_eq!(
            parse("yyyy.MM.dd 'at' HH", "2016.01.02 at 07"),
            iso("2016-01-02T07:00:00Z")
        );
        assert_eq!(
            parse("yyyy-MM-dd HH:mm:ss.S", "2016-01-01 00:00:00.5"),
            iso("2016-01-01T00:00:00.5Z")
        );
    }

    #[test]
    fn mismatches_are_none() {
        assert_eq!(parse("yyyy-MM-dd", "2016-02-30"), None);
        assert_eq!(parse("yyyy-MM-dd", "2016-01-01 "), None);
        assert_eq!(parse("yyyy-MM-dd", "2016/01/01"), None);
        assert_eq!(parse("yyyy-MM-dd HH", "2016-01-01 24"), None);
        assert_eq!(parse("MMM yyyy d", "Foo 2016 1"), None);
        assert_eq!(parse("yyyy-MM-dd h a", "2016-01-01 13 PM"), None);
    }

    #[test]
    fn bad_patterns() {
        assert!(TimestampFormat::compile("HH:mm").is_err());
        assert!(TimestampFormat::compile("yyyy-MM-dd 'oops").is_err());
        assert!(TimestampFormat::compile("yyyy-MM-dd QQ").is_err());
    }
}
