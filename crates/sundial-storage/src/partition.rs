//! Partitioning: which partition a designated timestamp falls in, and how partitions are named.

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};

const NANOS_PER_SECOND: i64 = 1_000_000_000;
const NANOS_PER_HOUR: i64 = 3_600 * NANOS_PER_SECOND;
const NANOS_PER_DAY: i64 = 24 * NANOS_PER_HOUR;

/// How a table with a designated timestamp is split into partitions.
/// The discriminant is the on-disk code (never renumber).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PartitionBy {
    None = 0,
    Hour = 1,
    Day = 2,
    Week = 3,
    Month = 4,
    Year = 5,
}

impl PartitionBy {
    pub fn parse(s: &str) -> Option<PartitionBy> {
        Some(match s.trim().to_ascii_uppercase().as_str() {
            "NONE" => PartitionBy::None,
            "HOUR" => PartitionBy::Hour,
            "DAY" => PartitionBy::Day,
            "WEEK" => PartitionBy::Week,
            "MONTH" => PartitionBy::Month,
            "YEAR" => PartitionBy::Year,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            PartitionBy::None => "NONE",
            PartitionBy::Hour => "HOUR",
            PartitionBy::Day => "DAY",
            PartitionBy::Week => "WEEK",
            PartitionBy::Month => "MONTH",
            PartitionBy::Year => "YEAR",
        }
    }

    /// Every partitioning, NONE first, then from the finest to the coarsest.
    pub const ALL: [PartitionBy; 6] = [
        PartitionBy::None,
        PartitionBy::Hour,
        PartitionBy::Day,
        PartitionBy::Week,
        PartitionBy::Month,
        PartitionBy::Year,
    ];

    pub fn from_code(code: u8) -> Option<PartitionBy> {
        PartitionBy::ALL.into_iter().find(|p| *p as u8 == code)
    }

    /// The partition key of a timestamp: the first nanosecond of its partition. Rounds toward
    /// negative infinity (a timestamp before 1970 belongs to the partition that starts at or
    /// before it). Total over `i64`, saturating at `i64::MIN`; for timestamps in
    /// [`crate::timestamp_in_range`] the key, and [`PartitionBy::next`] of it, are exact.
    pub fn floor(self, ts: i64) -> i64 {
        match self {
            PartitionBy::None => 0,
            PartitionBy::Hour => ts.div_euclid(NANOS_PER_HOUR).saturating_mul(NANOS_PER_HOUR),
            PartitionBy::Day => ts.div_euclid(NANOS_PER_DAY).saturating_mul(NANOS_PER_DAY),
            PartitionBy::Week => {
                let day = ts.div_euclid(NANOS_PER_DAY);
                // 1970-01-01 was a Thursday; ISO weeks start on Monday.
                let monday = day - (day + 3).rem_euclid(7);
                monday.saturating_mul(NANOS_PER_DAY)
            }
            PartitionBy::Month | PartitionBy::Year => {
                let date = to_datetime(ts).date_naive();
                let month = if self == PartitionBy::Month {
                    date.month()
                } else {
                    1
                };
                NaiveDate::from_ymd_opt(date.year(), month, 1)
                    .and_then(|d| d.and_hms_opt(0, 0, 0))
                    .and_then(|d| d.and_utc().timestamp_nanos_opt())
                    .unwrap_or(i64::MIN)
            }
        }
    }

    /// The key of the partition after the one starting at `key` (`i64::MAX` when none).
    pub fn next(self, key: i64) -> i64 {
        let step = match self {
            PartitionBy::None => return i64::MAX,
            PartitionBy::Hour => NANOS_PER_HOUR,
            PartitionBy::Day => NANOS_PER_DAY,
            PartitionBy::Week => 7 * NANOS_PER_DAY,
            PartitionBy::Month | PartitionBy::Year => {
                let date = to_datetime(key).date_naive();
                let (year, month) = match self {
                    PartitionBy::Month if date.month() == 12 => (date.year() + 1, 1),
                    PartitionBy::Month => (date.year(), date.month() + 1),
                    _ => (date.year() + 1, 1),
                };
                return NaiveDate::from_ymd_opt(year, month, 1)
                    .and_then(|d| d.and_hms_opt(0, 0, 0))
                    .and_then(|d| d.and_utc().timestamp_nanos_opt())
                    .unwrap_or(i64::MAX);
            }
        };
        key.saturating_add(step)
    }

    /// The directory name stem of the partition with this key, e.g. `2016-01-01` for DAY.
    pub fn dir_name(self, key: i64) -> String {
        let dt = to_datetime(key);
        match self {
            PartitionBy::None => "default".to_string(),
            PartitionBy::Hour => dt.format("%Y-%m-%dT%H").to_string(),
            PartitionBy::Day => dt.format("%Y-%m-%d").to_string(),
            PartitionBy::Week => {
                let week = dt.iso_week();
                format!("{:04}-W{:02}", week.year(), week.week())
            }
            PartitionBy::Month => dt.format("%Y-%m").to_string(),
            PartitionBy::Year => dt.format("%Y").to_string(),
        }
    }

    /// Parses a partition name as written in `DROP PARTITION LIST '...'` into its key.
    pub fn parse_name(self, name: &str) -> Option<i64> {
        let name = name.trim();
        let key = match self {
            PartitionBy::None => return (name == "default").then_some(0),
            PartitionBy::Week => {
                let (year, week) = name.split_once("-W")?;
                let date = NaiveDate::from_isoywd_opt(
                    year.parse().ok()?,
                    week.parse().ok()?,
                    chrono::Weekday::Mon,
                )?;
                date.and_hms_opt(0, 0, 0)?.and_utc().timestamp_nanos_opt()?
            }
            PartitionBy::Year => {
                let d = NaiveDate::from_ymd_opt(name.parse().ok()?, 1, 1)?;
                d.and_hms_opt(0, 0, 0)?.and_utc().timestamp_nanos_opt()?
            }
            PartitionBy::Month => {
                let d = NaiveDate::parse_from_str(&format!("{name}-01"), "%Y-%m-%d").ok()?;
                d.and_hms_opt(0, 0, 0)?.and_utc().timestamp_nanos_opt()?
            }
            PartitionBy::Day => {
                let d = NaiveDate::parse_from_str(name, "%Y-%m-%d").ok()?;
                d.and_hms_opt(0, 0, 0)?.and_utc().timestamp_nanos_opt()?
            }
            PartitionBy::Hour => {
                let (date, hour) = name.split_once('T')?;
                let d = NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
                d.and_hms_opt(hour.parse().ok()?, 0, 0)?
                    .and_utc()
                    .timestamp_nanos_opt()?
            }
        };
        (self.floor(key) == key).then_some(key)
    }
}

fn to_datetime(ts: i64) -> DateTime<Utc> {
    Utc.timestamp_nanos(ts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> i64 {
        DateTime::parse_from_rfc3339(s)
            .unwrap()
            .timestamp_nanos_opt()
            .unwrap()
    }

    #[test]
    fn floors_and_names() {
        let t = ts("2016-01-06T10:17:08.5Z");
        assert_eq!(PartitionBy::Hour.floor(t), ts("2016-01-06T10:00:00Z"));
        assert_eq!(PartitionBy::Day.floor(t), ts("2016-01-06T00:00:00Z"));
        assert_eq!(PartitionBy::Week.floor(t), ts("2016-01-04T00:00:00Z"));
        assert_eq!(PartitionBy::Month.floor(t), ts("2016-01-01T00:00:00Z"));
        assert_eq!(PartitionBy::Year.floor(t), ts("2016-01-01T00:00:00Z"));
        assert_eq!(PartitionBy::None.floor(t), 0);
        assert_eq!(
            PartitionBy::Week.dir_name(PartitionBy::Week.floor(t)),
            "2016-W01"
        );
        assert_eq!(
            PartitionBy::Hour.dir_name(PartitionBy::Hour.floor(t)),
            "2016-01-06T10"
        );
        let before_epoch = ts("1969-12-31T23:00:00Z");
        assert_eq!(
            PartitionBy::Day.floor(before_epoch),
            ts("1969-12-31T00:00:00Z")
        );
    }

    const ALL: [PartitionBy; 6] = PartitionBy::ALL;

    /// Before 1970 keys round down (floor division, not truncation toward zero).
    #[test]
    fn timestamps_before_1970_floor_down_and_name_their_partition() {
        let cases = [
            (
                -1,
                [
                    "default",
                    "1969-12-31T23",
                    "1969-12-31",
                    "1970-W01",
                    "1969-12",
                    "1969",
                ],
            ),
            (
                0,
                [
                    "default",
                    "1970-01-01T00",
                    "1970-01-01",
                    "1970-W01",
                    "1970-01",
                    "1970",
                ],
            ),
            (
                ts("1900-03-15T12:30:00Z"),
                [
                    "default",
                    "1900-03-15T12",
                    "1900-03-15",
                    "1900-W11",
                    "1900-03",
                    "1900",
                ],
            ),
        ];
        for (t, names) in cases {
            for (p, name) in ALL.into_iter().zip(names) {
                let key = p.floor(t);
                // NONE has one partition, keyed 0, whatever the timestamps.
                assert!(
                    p == PartitionBy::None || key <= t && t < p.next(key),
                    "{p:?} {t}"
                );
                assert_eq!(p.dir_name(key), name, "{p:?} {t}");
                assert_eq!(p.parse_name(name), Some(key), "{p:?} {name}");
            }
        }
        assert_eq!(PartitionBy::Hour.floor(-1), -NANOS_PER_HOUR);
        assert_eq!(PartitionBy::Day.floor(-1), -NANOS_PER_DAY);
        assert_eq!(PartitionBy::Week.floor(-1), ts("1969-12-29T00:00:00Z"));
        assert_eq!(PartitionBy::Month.floor(-1), ts("1969-12-01T00:00:00Z"));
        assert_eq!(PartitionBy::Year.floor(-1), ts("1969-01-01T00:00:00Z"));
    }

    /// The ends of the range have exact partitions; outside it nothing overflows or panics.
    #[test]
    fn range_ends_have_exact_partitions_and_nothing_overflows() {
        for p in ALL {
            for t in [crate::TIMESTAMP_MIN_NS, crate::TIMESTAMP_END_NS - 1] {
                let key = p.floor(t);
                assert!(
                    p == PartitionBy::None || key <= t && t < p.next(key),
                    "{p:?} {t}"
                );
                assert_eq!(p.parse_name(&p.dir_name(key)), Some(key), "{p:?} {t}");
            }
            for t in [i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 1] {
                let key = p.floor(t);
                assert!(p == PartitionBy::None || key <= t, "{p:?} {t}");
                let _ = (p.next(key), p.dir_name(key));
            }
        }
        assert_eq!(
            PartitionBy::Year.dir_name(PartitionBy::Year.floor(crate::TIMESTAMP_MIN_NS)),
            "1678"
        );
        assert_eq!(
            PartitionBy::Year.next(PartitionBy::Year.floor(crate::TIMESTAMP_END_NS - 1)),
            crate::TIMESTAMP_END_NS
        );
    }

    #[test]
    fn next_and_parse_round_trip() {
        for p in [
            PartitionBy::Hour,
            PartitionBy::Day,
            PartitionBy::Week,
            PartitionBy::Month,
            PartitionBy::Year,
        ] {
            // Across 1970 and a month, year and ISO-week-year boundary.
            for start in ["1969-11-20T00:00:00Z", "1969-12-31T12:00:00Z"] {
                let mut key = p.floor(ts(start));
                for _ in 0..60 {
                    let next = p.next(key);
                    assert!(next > key);
                    assert_eq!(p.floor(next), next);
                    assert_eq!(p.floor(next - 1), key);
                    assert_eq!(p.parse_name(&p.dir_name(key)), Some(key), "{p:?}");
                    key = next;
                }
            }
        }
    }
}
