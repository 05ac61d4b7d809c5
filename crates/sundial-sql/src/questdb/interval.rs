//! QuestDB's interval literals, as in `ts IN '2016-01-01T10;2h'`.
//!
//! ```text
//!  '2016'                  the whole year          [2016-01-01, 2017-01-01)
//!  '2016-01-01T10'         the whole hour          [10:00, 11:00)
//!  '2016-01-01T10:15;2h'   2h from that minute     [10:15, 12:15)
//!  '2016-01-01;1h;1d;3'    1h from midnight, on 3 days in a row (duration;period;count)
//! ```
//!
//! The written precision sets the base interval (year, month, day, hour, minute, second or
//! the fraction's digits); a duration replaces it, counted from the start (as QuestDB 9.3.4
//! answers: `'2023-12-31T23;1h'` does not hold midnight). Times are UTC; a trailing `Z` is
//! allowed.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};

use super::stride::{Step, Stride};

/// Half-open `[lo, hi)` ranges in nanoseconds since the epoch, in ascending order.
pub(crate) fn parse(text: &str) -> Result<Vec<(i64, i64)>, String> {
    let mut parts = text.split(';').map(str::trim);
    let base = parts.next().unwrap_or_default();
    let (lo, precision) = instant(base)?;
    let mut hi = precision.add(lo, 1).ok_or_else(|| out_of_range(text))?;
    if let Some(duration) = parts.next() {
        hi = step(duration, text)?
            .add(lo, 1)
            .ok_or_else(|| out_of_range(text))?;
    }
    let mut ranges = vec![(lo, hi)];
    match (parts.next(), parts.next()) {
        (None, None) => {}
        (Some(period), Some(count)) => {
            let period = step(period, text)?;
            let count: i64 = count
                .parse()
                .ok()
                .filter(|c| (1..=100_000).contains(c))
                .ok_or_else(|| format!("interval '{text}': the count must be 1 to 100000"))?;
            for k in 1..count {
                let lo = period.add(lo, k).ok_or_else(|| out_of_range(text))?;
                let hi = period.add(hi, k).ok_or_else(|| out_of_range(text))?;
                ranges.push((lo, hi));
            }
        }
        _ => {
            return Err(format!(
                "interval '{text}': write 'start', 'start;duration' or 'start;duration;period;count'"
            ));
        }
    }
    if parts.next().is_some() {
        return Err(format!("interval '{text}' has too many ';' parts"));
    }
    Ok(ranges)
}

fn out_of_range(text: &str) -> String {
    format!("interval '{text}' is out of range")
}

fn step(duration: &str, text: &str) -> Result<Step, String> {
    Stride::parse(duration)
        .map_err(|m| format!("interval '{text}': {m}"))?
        .step()
        .ok_or_else(|| out_of_range(text))
}

/// The instant a (possibly partial) timestamp names, and the step of its precision.
pub(super) fn instant(text: &str) -> Result<(i64, Step), String> {
    let bad = || {
        format!(
            "'{text}' is not a timestamp interval: write a UTC date or time such as \
             '2016-01-01', '2016-01-01T10' or '2016-01-01T10:15:30.5'"
        )
    };
    let s = text.strip_suffix('Z').unwrap_or(text);
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let fields: Vec<&str> = date.split('-').collect();
    let number = |f: &str, digits: usize| -> Result<u32, String> {
        if f.len() != digits || !f.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        f.parse().map_err(|_| bad())
    };
    let year = number(fields[0], 4)? as i32;
    let month = fields.get(1).map(|f| number(f, 2)).transpose()?;
    let day = fields.get(2).map(|f| number(f, 2)).transpose()?;
    if fields.len() > 3 || (time.is_some() && day.is_none()) {
        return Err(bad());
    }
    let date =
        NaiveDate::from_ymd_opt(year, month.unwrap_or(1), day.unwrap_or(1)).ok_or_else(bad)?;
    let unit = |u: &str| Stride::parse(u).ok().and_then(|s| s.step()).ok_or_else(bad);
    let (time, precision) = match time {
        None if month.is_none() => (NaiveTime::MIN, unit("1y")?),
        None if day.is_none() => (NaiveTime::MIN, unit("1M")?),
        None => (NaiveTime::MIN, unit("1d")?),
        Some(t) => clock(t, bad)?,
    };
    let nanos = NaiveDateTime::new(date, time)
        .and_utc()
        .timestamp_nanos_opt()
        .ok_or_else(|| out_of_range(text))?;
    Ok((nanos, precision))
}

/// `10`, `10:15`, `10:15:30`, `10:15:30.123456`: the time and its precision.
fn clock(t: &str, bad: impl Fn() -> String) -> Result<(NaiveTime, Step), String> {
    let (hms, fraction) = match t.split_once('.') {
        Some((hms, f)) => (hms, Some(f)),
        None => (t, None),
    };
    let parts: Vec<u32> = hms
        .split(':')
        .map(|p| {
            if p.len() == 2 && p.bytes().all(|b| b.is_ascii_digit()) {
                p.parse().map_err(|_| bad())
            } else {
                Err(bad())
            }
        })
        .collect::<Result<_, _>>()?;
    let (h, m, s) = match parts.as_slice() {
        [h] => (*h, 0, 0),
        [h, m] => (*h, *m, 0),
        [h, m, s] => (*h, *m, *s),
        _ => return Err(bad()),
    };
    let nanos_of = |digits: &str| -> Result<(u32, i64), String> {
        if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let scale = 10u32.pow(9 - digits.len() as u32);
        let value: u32 = digits.parse().map_err(|_| bad())?;
        Ok((value * scale, i64::from(scale)))
    };
    let (nanos, precision) = match fraction {
        Some(f) if parts.len() == 3 => {
            let (n, scale) = nanos_of(f)?;
            (n, Step::Nanos(scale))
        }
        Some(_) => return Err(bad()),
        None => (
            0,
            Step::Nanos(match parts.len() {
                1 => 3_600_000_000_000,
                2 => 60_000_000_000,
                _ => 1_000_000_000,
            }),
        ),
    };
    let time = NaiveTime::from_hms_nano_opt(h, m, s, nanos).ok_or_else(bad)?;
    Ok((time, precision))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::questdb::stride::ns;

    #[test]
    fn precision_sets_the_interval() {
        assert_eq!(
            parse("2016").unwrap(),
            vec![(ns("2016-01-01T00:00:00Z"), ns("2017-01-01T00:00:00Z"))]
        );
        assert_eq!(
            parse("2016-02").unwrap(),
            vec![(ns("2016-02-01T00:00:00Z"), ns("2016-03-01T00:00:00Z"))]
        );
        assert_eq!(
            parse("2016-01-01T10").unwrap(),
            vec![(ns("2016-01-01T10:00:00Z"), ns("2016-01-01T11:00:00Z"))]
        );
        assert_eq!(
            parse("2016-01-01T10:15:30.5Z").unwrap(),
            vec![(ns("2016-01-01T10:15:30.5Z"), ns("2016-01-01T10:15:30.6Z"))]
        );
    }

    #[test]
    fn durations_and_repeats() {
        assert_eq!(
            parse("2016-01-01T10;2h").unwrap(),
            vec![(ns("2016-01-01T10:00:00Z"), ns("2016-01-01T12:00:00Z"))]
        );
        let r = parse("2016-01-01T10:00;1h;1d;3").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(
            r[2],
            (ns("2016-01-03T10:00:00Z"), ns("2016-01-03T11:00:00Z"))
        );
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        for bad in [
            "16-01-01",
            "2016-13-01",
            "2016-01-01T25",
            "2016-01-01;2q",
            "2016;1d;1d",
            "x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
