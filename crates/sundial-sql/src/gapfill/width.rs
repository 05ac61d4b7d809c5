//! A gap-fill bucket width (`'1 hour'`, `'90 seconds'`, `INTERVAL '5 minutes'`,
//! `INTERVAL '1' DAY`, `'01:30:00'`, `'1 month'`) as the stride `timestamp_floor` and
//! `sample_grid` read (`1h`, `90s`, `5m`, `1d`, `90m`, `1M`).
//!
//! A width is a sum of whole counts of units, PostgreSQL's names and abbreviations (a bare
//! number is seconds, as in PostgreSQL), or a clock time `hh:mm[:ss]`. It is either months
//! (and years) or a fixed length, never both: a month's buckets follow the calendar, the
//! others are a fixed number of nanoseconds. A fixed length is written in the largest unit
//! that divides it, so that equal widths make equal strides.

use sqlparser::ast::{DataType, Expr, Value};

use crate::error::{Result, SqlError};

const SECOND_NS: i64 = 1_000_000_000;
const DAY_NS: i64 = 86_400 * SECOND_NS;

/// The stride for `width`, and whether it counts months. `function` names the call in
/// errors.
pub(super) fn stride(function: &str, width: &Expr) -> Result<(String, bool)> {
    let text = text_of(width).ok_or_else(|| {
        SqlError::Invalid(format!(
            "{function}(): the bucket width must be a constant interval such as '1 hour' or \
             INTERVAL '5 minutes', not {width}"
        ))
    })?;
    let (months, nanos) = parse(&text)
        .map_err(|m| SqlError::Invalid(format!("{function}(): bucket width '{text}': {m}")))?;
    match (months, nanos) {
        (0, 0) => Err(SqlError::Invalid(format!(
            "{function}(): bucket width '{text}' must be longer than zero"
        ))),
        (0, nanos) => Ok((fixed(nanos), false)),
        (months, 0) => Ok((format!("{months}M"), true)),
        _ => Err(SqlError::NotSupported(format!(
            "{function}() with a bucket width that mixes months with days or time ('{text}')"
        ))),
    }
}

/// The text of a width literal: a string, an INTERVAL literal (with its unit when it is
/// written after the text), or a string cast to INTERVAL.
fn text_of(width: &Expr) -> Option<String> {
    match width {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => Some(s.clone()),
            _ => None,
        },
        Expr::Interval(interval) if interval.last_field.is_none() => {
            let text = text_of(&interval.value)?;
            Some(match &interval.leading_field {
                Some(field) => format!("{text} {}", field.to_string().to_lowercase()),
                None => text,
            })
        }
        Expr::Cast {
            expr,
            data_type: DataType::Interval { .. },
            ..
        } => text_of(expr),
        Expr::Nested(inner) => text_of(inner),
        _ => None,
    }
}

/// `nanos` as a stride in the largest unit that divides it.
fn fixed(nanos: i64) -> String {
    const UNITS: [(i64, &str); 8] = [
        (7 * DAY_NS, "w"),
        (DAY_NS, "d"),
        (3_600 * SECOND_NS, "h"),
        (60 * SECOND_NS, "m"),
        (SECOND_NS, "s"),
        (1_000_000, "T"),
        (1_000, "U"),
        (1, "n"),
    ];
    for (length, letter) in UNITS {
        if nanos % length == 0 {
            return format!("{}{letter}", nanos / length);
        }
    }
    format!("{nanos}n")
}

/// `text` as months and nanoseconds.
fn parse(text: &str) -> std::result::Result<(i64, i64), String> {
    let too_long = || "too long".to_string();
    let (mut months, mut nanos) = (0i64, 0i64);
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err("write a count and a unit, as in '1 hour' or '5 minutes'".into());
    }
    while !rest.is_empty() {
        let token_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        if rest[..token_end].contains(':') {
            let clock = clock(&rest[..token_end])?;
            nanos = nanos.checked_add(clock).ok_or_else(too_long)?;
            rest = rest[token_end..].trim_start();
            continue;
        }
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!(
                "expected a whole count at '{rest}': write a count and a unit, as in '1 hour' \
                 or '5 minutes'"
            ));
        }
        let count: i64 = rest[..digits].parse().map_err(|_| too_long())?;
        rest = rest[digits..].trim_start();
        let letters = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = rest[..letters].to_ascii_lowercase();
        rest = rest[letters..].trim_start();
        match unit_length(&unit) {
            Some(Length::Months(m)) => {
                let add = count.checked_mul(m).ok_or_else(too_long)?;
                months = months.checked_add(add).ok_or_else(too_long)?;
            }
            Some(Length::Nanos(n)) => {
                let add = count.checked_mul(n).ok_or_else(too_long)?;
                nanos = nanos.checked_add(add).ok_or_else(too_long)?;
            }
            None => {
                return Err(format!(
                    "'{unit}' is not a unit: use microseconds, milliseconds, seconds, minutes, \
                     hours, days, weeks, months or years"
                ));
            }
        }
    }
    Ok((months, nanos))
}

enum Length {
    Months(i64),
    Nanos(i64),
}

/// The length of one `unit` (lower case); none written is seconds.
fn unit_length(unit: &str) -> Option<Length> {
    Some(match unit {
        "nanosecond" | "nanoseconds" | "ns" => Length::Nanos(1),
        "microsecond" | "microseconds" | "us" | "usec" | "usecs" => Length::Nanos(1_000),
        "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" => Length::Nanos(1_000_000),
        "" | "second" | "seconds" | "s" | "sec" | "secs" => Length::Nanos(SECOND_NS),
        "minute" | "minutes" | "m" | "min" | "mins" => Length::Nanos(60 * SECOND_NS),
        "hour" | "hours" | "h" | "hr" | "hrs" => Length::Nanos(3_600 * SECOND_NS),
        "day" | "days" | "d" => Length::Nanos(DAY_NS),
        "week" | "weeks" | "w" => Length::Nanos(7 * DAY_NS),
        "month" | "months" | "mon" | "mons" => Length::Months(1),
        "year" | "years" | "y" | "yr" | "yrs" => Length::Months(12),
        _ => return None,
    })
}

/// `hh:mm` or `hh:mm:ss` in nanoseconds.
fn clock(text: &str) -> std::result::Result<i64, String> {
    let wrong = || format!("'{text}' is not a clock time such as 01:30:00");
    let parts: Vec<&str> = text.split(':').collect();
    if !(2..=3).contains(&parts.len()) {
        return Err(wrong());
    }
    let mut seconds: i64 = 0;
    for (part, scale) in parts.iter().zip([3_600, 60, 1]) {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(wrong());
        }
        let n: i64 = part.parse().map_err(|_| wrong())?;
        seconds = n
            .checked_mul(scale)
            .and_then(|s| seconds.checked_add(s))
            .ok_or_else(wrong)?;
    }
    seconds.checked_mul(SECOND_NS).ok_or_else(wrong)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::string;
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    fn of(sql: &str) -> Result<(String, bool)> {
        let expr = Parser::new(&GenericDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_expr())
            .expect(sql);
        stride("f", &expr)
    }

    #[test]
    fn widths_become_strides() {
        for (sql, want) in [
            ("'1 hour'", "1h"),
            ("'5 minutes'", "5m"),
            ("'90 seconds'", "90s"),
            ("'1 hour 30 minutes'", "90m"),
            ("'01:30:00'", "90m"),
            ("'1 day'", "1d"),
            ("'7 days'", "1w"),
            ("'250 ms'", "250T"),
            ("'3600'", "1h"),
            ("'15min'", "15m"),
            ("INTERVAL '1 hour'", "1h"),
            ("INTERVAL '2' HOUR", "2h"),
            ("CAST('10 minutes' AS INTERVAL)", "10m"),
            ("'1 month'", "1M"),
            ("'1 year 2 months'", "14M"),
        ] {
            let (stride, months) = of(sql).unwrap();
            assert_eq!(stride, want, "{sql}");
            assert_eq!(months, want.ends_with('M'), "{sql}");
        }
    }

    #[test]
    fn odd_widths_are_refused_by_name() {
        for (sql, message) in [
            ("'0 hours'", "must be longer than zero"),
            ("'1 fortnight'", "'fortnight' is not a unit"),
            ("'1.5 hours'", "expected a whole count at '.5 hours'"),
            ("'-1 hour'", "expected a whole count"),
            ("'1 month 1 day'", "mixes months with days"),
            ("'99999999999999999999 hours'", "too long"),
            ("'9999999999 weeks'", "too long"),
            ("'1:2:3:4'", "not a clock time"),
            ("''", "write a count and a unit"),
            ("v", "must be a constant interval"),
        ] {
            let e = of(sql).unwrap_err().to_string();
            assert!(e.contains(message), "{sql}: {e}");
        }
        assert!(stride("f", &string("1 hour")).is_ok());
    }
}
