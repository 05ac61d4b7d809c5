//! Strides (`1h`, `15m`, `1M`) and flooring timestamps to the buckets they cut time into.
//!
//! All instants are nanoseconds since the Unix epoch. A stride of fixed length (up to weeks)
//! buckets time into `origin + k * length`; months and years are calendar strides, so their
//! buckets are `origin + k * count` calendar months.

use chrono::{DateTime, Months, NaiveDateTime};

const NANOS_PER_SECOND: i64 = 1_000_000_000;
const NANOS_PER_DAY: i64 = 86_400 * NANOS_PER_SECOND;

/// The Monday after the epoch: weeks start on Mondays (ISO 8601).
const FIRST_MONDAY_NS: i64 = 4 * NANOS_PER_DAY;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Nanosecond,
    Microsecond,
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

impl Unit {
    /// QuestDB's unit letters; `m` is minutes and `M` months.
    fn from_letter(s: &str) -> Option<Unit> {
        Some(match s {
            "n" => Unit::Nanosecond,
            "U" | "u" => Unit::Microsecond,
            "T" => Unit::Millisecond,
            "s" => Unit::Second,
            "m" => Unit::Minute,
            "h" => Unit::Hour,
            "d" => Unit::Day,
            "w" => Unit::Week,
            "M" => Unit::Month,
            "y" => Unit::Year,
            _ => return None,
        })
    }

    fn nanos(self) -> Option<i64> {
        Some(match self {
            Unit::Nanosecond => 1,
            Unit::Microsecond => 1_000,
            Unit::Millisecond => 1_000_000,
            Unit::Second => NANOS_PER_SECOND,
            Unit::Minute => 60 * NANOS_PER_SECOND,
            Unit::Hour => 3_600 * NANOS_PER_SECOND,
            Unit::Day => NANOS_PER_DAY,
            Unit::Week => 7 * NANOS_PER_DAY,
            Unit::Month | Unit::Year => return None,
        })
    }
}

/// A bucket width: `count` units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stride {
    pub count: i64,
    pub unit: Unit,
}

/// How a stride advances time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Nanos(i64),
    Months(u32),
}

impl Stride {
    /// Parses `15m`, `1M`, `h` (one hour).
    pub fn parse(text: &str) -> Result<Stride, String> {
        let text = text.trim();
        let digits = text.bytes().take_while(u8::is_ascii_digit).count();
        let (count, unit) = text.split_at(digits);
        let count = if count.is_empty() {
            1
        } else {
            count
                .parse::<i64>()
                .map_err(|_| format!("stride '{text}' is too large"))?
        };
        let unit = Unit::from_letter(unit).ok_or_else(|| {
            format!(
                "'{text}' is not a stride: write a count and one of the units \
                 n, U, T, s, m, h, d, w, M, y (as in 15m or 1d)"
            )
        })?;
        if count == 0 {
            return Err(format!("stride '{text}' must be at least 1"));
        }
        let stride = Stride { count, unit };
        stride
            .step()
            .ok_or_else(|| format!("stride '{text}' is too large"))?;
        Ok(stride)
    }

    pub fn step(&self) -> Option<Step> {
        match self.unit {
            Unit::Month => u32::try_from(self.count).ok().map(Step::Months),
            Unit::Year => u32::try_from(self.count.checked_mul(12)?)
                .ok()
                .map(Step::Months),
            unit => unit.nanos()?.checked_mul(self.count).map(Step::Nanos),
        }
    }

    /// Where buckets start when neither FROM nor an offset says: the epoch, or for weeks the
    /// first Monday after it.
    pub fn calendar_origin(&self) -> i64 {
        if self.unit == Unit::Week {
            FIRST_MONDAY_NS
        } else {
            0
        }
    }
}

impl Step {
    /// The start of the bucket holding `t`: the greatest `origin + k * step <= t`.
    pub fn floor(self, t: i64, origin: i64) -> Option<i64> {
        match self {
            Step::Nanos(step) => {
                let k = t.checked_sub(origin)?.div_euclid(step);
                origin.checked_add(k.checked_mul(step)?)
            }
            Step::Months(step) => {
                let (t_dt, o_dt) = (naive(t)?, naive(origin)?);
                let months = month_index(&t_dt) - month_index(&o_dt);
                let mut k = months.div_euclid(i64::from(step));
                loop {
                    let start = add_months(o_dt, k * i64::from(step))?;
                    if start <= t_dt {
                        return nanos(start);
                    }
                    k -= 1;
                }
            }
        }
    }

    /// `t` moved by `k` steps.
    pub fn add(self, t: i64, k: i64) -> Option<i64> {
        match self {
            Step::Nanos(step) => t.checked_add(step.checked_mul(k)?),
            Step::Months(step) => nanos(add_months(naive(t)?, k.checked_mul(i64::from(step))?)?),
        }
    }
}

fn naive(t: i64) -> Option<NaiveDateTime> {
    Some(DateTime::from_timestamp_nanos(t).naive_utc())
}

fn nanos(t: NaiveDateTime) -> Option<i64> {
    t.and_utc().timestamp_nanos_opt()
}

fn month_index(t: &NaiveDateTime) -> i64 {
    use chrono::Datelike;
    i64::from(t.year()) * 12 + i64::from(t.month0())
}

fn add_months(t: NaiveDateTime, months: i64) -> Option<NaiveDateTime> {
    let magnitude = Months::new(u32::try_from(months.unsigned_abs()).ok()?);
    if months >= 0 {
        t.checked_add_months(magnitude)
    } else {
        t.checked_sub_months(magnitude)
    }
}

/// `zone`'s offset from UTC at the instant `t`, in nanoseconds.
pub fn utc_offset_ns(zone: &chrono_tz::Tz, t: i64) -> i64 {
    use chrono::{Offset, TimeZone};
    let utc = DateTime::from_timestamp_nanos(t).naive_utc();
    let seconds = zone.offset_from_utc_datetime(&utc).fix().local_minus_utc();
    i64::from(seconds) * 1_000_000_000
}

/// The instant at which `zone`'s clocks show `local` (nanoseconds of wall-clock time); in a
/// gap (clocks jumping forward), the instant the gap starts; when clocks show it twice, the
/// first.
pub fn local_to_utc(zone: &chrono_tz::Tz, local: i64) -> Option<i64> {
    use chrono::{Offset, TimeZone};
    let naive = DateTime::from_timestamp_nanos(local).naive_utc();
    let offset = match zone.offset_from_local_datetime(&naive).earliest() {
        Some(o) => o.fix().local_minus_utc(),
        None => zone
            .offset_from_utc_datetime(&naive)
            .fix()
            .local_minus_utc(),
    };
    local.checked_sub(i64::from(offset) * 1_000_000_000)
}

/// An IANA time zone name (`Europe/Berlin`) or `UTC`.
pub fn parse_zone(name: &str) -> Result<chrono_tz::Tz, String> {
    name.trim()
        .parse::<chrono_tz::Tz>()
        .map_err(|_| format!("unknown time zone '{name}'"))
}

/// Nanoseconds since the epoch of an RFC 3339 instant, for tests.
#[cfg(test)]
pub fn ns(s: &str) -> i64 {
    s.parse::<DateTime<chrono::Utc>>()
        .expect("an RFC 3339 instant")
        .timestamp_nanos_opt()
        .expect("in range")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_questdb_strides() {
        assert_eq!(
            Stride::parse("15m").unwrap().step(),
            Some(Step::Nanos(900 * NANOS_PER_SECOND))
        );
        assert_eq!(Stride::parse("1M").unwrap().step(), Some(Step::Months(1)));
        assert_eq!(Stride::parse("2y").unwrap().step(), Some(Step::Months(24)));
        assert_eq!(
            Stride::parse("h").unwrap().step(),
            Some(Step::Nanos(3_600 * NANOS_PER_SECOND))
        );
        assert!(Stride::parse("1q").is_err());
        assert!(Stride::parse("0s").is_err());
        assert!(Stride::parse("99999999999999999w").is_err());
    }

    #[test]
    fn floors_to_calendar_buckets() {
        let hour = Stride::parse("1h").unwrap();
        let step = hour.step().unwrap();
        assert_eq!(
            step.floor(ns("2016-01-01T07:47:52Z"), 0),
            Some(ns("2016-01-01T07:00:00Z"))
        );
        assert_eq!(
            step.floor(ns("1969-12-31T23:30:00Z"), 0),
            Some(ns("1969-12-31T23:00:00Z"))
        );
        let week = Stride::parse("1w").unwrap();
        // 2016-01-07 is a Thursday; its week starts on Monday the 4th.
        assert_eq!(
            week.step()
                .unwrap()
                .floor(ns("2016-01-07T12:00:00Z"), week.calendar_origin()),
            Some(ns("2016-01-04T00:00:00Z"))
        );
        let quarter = Stride::parse("3M").unwrap().step().unwrap();
        assert_eq!(
            quarter.floor(ns("2016-05-31T12:00:00Z"), 0),
            Some(ns("2016-04-01T00:00:00Z"))
        );
        assert_eq!(
            quarter.floor(ns("2016-05-31T12:00:00Z"), ns("2016-01-15T00:00:00Z")),
            Some(ns("2016-04-15T00:00:00Z"))
        );
        assert_eq!(
            quarter.add(ns("2016-01-31T00:00:00Z"), 1),
            Some(ns("2016-04-30T00:00:00Z"))
        );
    }
}
