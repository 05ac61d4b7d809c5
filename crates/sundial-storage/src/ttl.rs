//! Time to live: which partitions of a table have expired.
//!
//! ```text
//!   partitions:  [ 01-01 ][ 01-02 ][ 01-03 ][ 01-04 ... newest row ]        [ 2261-01-01 ]
//!   reference:   min(newest row, wall clock)           (the 2261 row moves nothing)
//!   TTL 2 DAYS:                cutoff = reference - 2 days
//!   expired:     every partition that ends at or before the cutoff (all its rows are older)
//! ```
//!
//! The TTL counts back from the table's newest row, not from the clock, so a table loaded with
//! old data keeps it; but that reference is capped at the wall clock
//! (`StorageOptions::ttl_wall_clock`, on by default, as QuestDB's `cairo.ttl.use.wall.clock`),
//! so one row stamped in the future (a client's unit bug, a typo in an INSERT) cannot expire
//! every real partition. QuestDB caps at the clock itself, with no tolerance; so does Sundial.
//! `COLD AFTER` counts from the same reference. A partition goes only once all of its time
//! range is older than the TTL. Months and years are calendar ones. Expired partitions are
//! dropped, in a commit like `DROP PARTITION`'s, right after each commit of rows, when the TTL
//! is set, and at open (a crash may have come between).

use chrono::{DateTime, Months};

use crate::error::{Result, StorageError};
use crate::partition::PartitionBy;

/// What expiry reads of one part of a partition (the transaction's `PartitionMeta`).
pub trait PartSpan {
    /// The partition's key (the start of its time range).
    fn key(&self) -> i64;
    /// Whether the part holds any row.
    fn has_rows(&self) -> bool;
    /// The designated timestamp of the part's newest row.
    fn max_ts(&self) -> i64;
}

/// A unit of [`Ttl`]. The discriminant is the on-disk code (never renumber; 0 means none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum TtlUnit {
    Hour = 1,
    Day = 2,
    Week = 3,
    Month = 4,
    Year = 5,
}

impl TtlUnit {
    pub const ALL: [TtlUnit; 5] = [
        TtlUnit::Hour,
        TtlUnit::Day,
        TtlUnit::Week,
        TtlUnit::Month,
        TtlUnit::Year,
    ];

    pub fn from_code(code: u8) -> Option<TtlUnit> {
        TtlUnit::ALL.into_iter().find(|u| *u as u8 == code)
    }

    /// `HOUR`/`HOURS`/`H`, `DAY`/`DAYS`/`D`, `WEEK`/`WEEKS`/`W`, `MONTH`/`MONTHS`/`M`,
    /// `YEAR`/`YEARS`/`Y`, in any case.
    pub fn parse(s: &str) -> Option<TtlUnit> {
        Some(match s.to_ascii_uppercase().as_str() {
            "H" | "HOUR" | "HOURS" => TtlUnit::Hour,
            "D" | "DAY" | "DAYS" => TtlUnit::Day,
            "W" | "WEEK" | "WEEKS" => TtlUnit::Week,
            "M" | "MONTH" | "MONTHS" => TtlUnit::Month,
            "Y" | "YEAR" | "YEARS" => TtlUnit::Year,
            _ => return None,
        })
    }

    pub fn name(self, count: u32) -> &'static str {
        let one = count == 1;
        match self {
            TtlUnit::Hour if one => "HOUR",
            TtlUnit::Hour => "HOURS",
            TtlUnit::Day if one => "DAY",
            TtlUnit::Day => "DAYS",
            TtlUnit::Week if one => "WEEK",
            TtlUnit::Week => "WEEKS",
            TtlUnit::Month if one => "MONTH",
            TtlUnit::Month => "MONTHS",
            TtlUnit::Year if one => "YEAR",
            TtlUnit::Year => "YEARS",
        }
    }
}

/// How long a table keeps its rows, counted back from its newest row (never zero: a table
/// without a TTL has `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ttl {
    pub count: u32,
    pub unit: TtlUnit,
}

const HOUR_NS: i64 = 3_600_000_000_000;

impl Ttl {
    /// The moment `count` units before `newest`: rows before it have expired. `None` when
    /// that is before any time a table can hold (nothing has expired).
    pub fn cutoff(self, newest: i64) -> Option<i64> {
        let hours = match self.unit {
            TtlUnit::Hour => 1,
            TtlUnit::Day => 24,
            TtlUnit::Week => 24 * 7,
            TtlUnit::Month | TtlUnit::Year => {
                let months = if self.unit == TtlUnit::Year {
                    self.count.checked_mul(12)?
                } else {
                    self.count
                };
                let at = DateTime::from_timestamp_nanos(newest);
                return at
                    .checked_sub_months(Months::new(months))?
                    .timestamp_nanos_opt();
            }
        };
        let span = i64::from(self.count).checked_mul(hours * HOUR_NS)?;
        newest.checked_sub(span)
    }

    /// The keys of the partitions of `parts` (a table's, in key order, several parts of a key
    /// adjacent) that have expired: those that end at or before the cutoff from the
    /// [`reference`] (the newest row, capped at `cap`).
    pub fn expired(
        self,
        partition_by: PartitionBy,
        parts: &[impl PartSpan],
        cap: Option<i64>,
    ) -> Vec<i64> {
        if partition_by == PartitionBy::None {
            return Vec::new();
        }
        let Some(cutoff) = reference(parts, cap).and_then(|r| self.cutoff(r)) else {
            return Vec::new();
        };
        let mut keys: Vec<i64> = parts
            .iter()
            .map(|p| p.key())
            .filter(|key| partition_by.next(*key) <= cutoff)
            .collect();
        keys.dedup();
        keys
    }
}

/// The newest row of `parts`, never later than `cap` (the wall clock, when TTL is capped by
/// it); `None` when no part holds a row.
pub fn reference(parts: &[impl PartSpan], cap: Option<i64>) -> Option<i64> {
    let newest = newest_row(parts)?;
    Some(cap.map_or(newest, |cap| newest.min(cap)))
}

/// The designated timestamp of the newest row of `parts`.
pub(crate) fn newest_row(parts: &[impl PartSpan]) -> Option<i64> {
    parts
        .iter()
        .filter(|p| p.has_rows())
        .map(|p| p.max_ts())
        .max()
}

/// A TTL drops whole partitions by time: it needs a designated timestamp and partitions.
pub(crate) fn check(
    ttl: Option<Ttl>,
    has_timestamp: bool,
    partition_by: PartitionBy,
) -> Result<()> {
    match ttl {
        Some(ttl) if !has_timestamp || partition_by == PartitionBy::None => {
            Err(StorageError::InvalidInput(format!(
                "TTL {ttl} needs a table partitioned by time: add TIMESTAMP(column) PARTITION BY \
                 HOUR, DAY, WEEK, MONTH or YEAR"
            )))
        }
        _ => Ok(()),
    }
}

/// `COLD AFTER` converts whole partitions by time, like a TTL drops them.
pub(crate) fn check_cold_after(
    cold_after: Option<Ttl>,
    has_timestamp: bool,
    partition_by: PartitionBy,
) -> Result<()> {
    match cold_after {
        Some(d) if !has_timestamp || partition_by == PartitionBy::None => {
            Err(StorageError::InvalidInput(format!(
                "COLD AFTER {d} needs a table partitioned by time: add TIMESTAMP(column) \
                 PARTITION BY HOUR, DAY, WEEK, MONTH or YEAR"
            )))
        }
        _ => Ok(()),
    }
}

impl std::fmt::Display for Ttl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.count, self.unit.name(self.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::{PartFormat, PartitionMeta};

    const DAY_NS: i64 = 24 * HOUR_NS;
    const JAN_1_2016: i64 = 1_451_606_400_000_000_000;

    fn part(key: i64, max_ts: i64) -> PartitionMeta {
        PartitionMeta {
            key,
            version: 0,
            row_count: 1,
            min_ts: key,
            max_ts,
            tops: Vec::new(),
            format: PartFormat::Native,
        }
    }

    #[test]
    fn partitions_go_once_their_whole_range_is_older_than_the_ttl() {
        let ttl = Ttl {
            count: 2,
            unit: TtlUnit::Day,
        };
        let days: Vec<PartitionMeta> = (0..5)
            .map(|d| part(JAN_1_2016 + d * DAY_NS, JAN_1_2016 + d * DAY_NS + HOUR_NS))
            .collect();
        // Newest row: Jan 5 01:00; cutoff Jan 3 01:00: Jan 1 and Jan 2 end before it, Jan 3
        // still holds rows after it.
        assert_eq!(
            ttl.expired(PartitionBy::Day, &days, None),
            vec![JAN_1_2016, JAN_1_2016 + DAY_NS]
        );
        // A partition ending exactly at the cutoff has expired.
        let exact = [
            part(JAN_1_2016, JAN_1_2016),
            part(JAN_1_2016 + 2 * DAY_NS, JAN_1_2016 + 3 * DAY_NS),
        ];
        assert_eq!(
            ttl.expired(PartitionBy::Day, &exact, None),
            vec![JAN_1_2016]
        );
        // Parts of one partition give its key once.
        let parts = [
            part(JAN_1_2016, JAN_1_2016),
            part(JAN_1_2016, JAN_1_2016 + HOUR_NS),
            part(JAN_1_2016 + 9 * DAY_NS, JAN_1_2016 + 9 * DAY_NS),
        ];
        assert_eq!(
            ttl.expired(PartitionBy::Day, &parts, None),
            vec![JAN_1_2016]
        );
        assert!(ttl.expired(PartitionBy::None, &days, None).is_empty());
        assert!(
            ttl.expired(PartitionBy::Day, &[] as &[PartitionMeta], None)
                .is_empty()
        );
    }

    /// One row far in the future moves the reference only as far as the wall clock.
    #[test]
    fn the_reference_is_the_newest_row_capped_at_the_clock() {
        let ttl = Ttl {
            count: 1,
            unit: TtlUnit::Day,
        };
        let year_2261 = 9_183_110_400_000_000_000;
        let mut days: Vec<PartitionMeta> = (0..3)
            .map(|d| part(JAN_1_2016 + d * DAY_NS, JAN_1_2016 + d * DAY_NS + HOUR_NS))
            .collect();
        days.push(part(year_2261, year_2261));
        let now = JAN_1_2016 + 2 * DAY_NS + 2 * HOUR_NS;
        assert_eq!(reference(&days, Some(now)), Some(now));
        // Capped: cutoff Jan 2 02:00, only Jan 1 has expired.
        assert_eq!(
            ttl.expired(PartitionBy::Day, &days, Some(now)),
            vec![JAN_1_2016]
        );
        // Uncapped (`ttl_wall_clock` off): the 2261 row expires every other partition.
        assert_eq!(ttl.expired(PartitionBy::Day, &days, None).len(), 3);
        // A clock ahead of the newest row changes nothing.
        assert_eq!(reference(&days[..3], Some(year_2261)), Some(days[2].max_ts));
        assert_eq!(reference(&[] as &[PartitionMeta], Some(now)), None);
    }

    #[test]
    fn months_and_years_are_calendar_ones() {
        let mar_31 = JAN_1_2016 + (31 + 29 + 30) * DAY_NS;
        let month = Ttl {
            count: 1,
            unit: TtlUnit::Month,
        };
        // 2016-03-31 minus a month: 2016-02-29 (the last day of February in a leap year).
        assert_eq!(month.cutoff(mar_31), Some(JAN_1_2016 + (31 + 28) * DAY_NS));
        let year = Ttl {
            count: 1,
            unit: TtlUnit::Year,
        };
        assert_eq!(year.cutoff(JAN_1_2016 + 366 * DAY_NS), Some(JAN_1_2016));
        // Far beyond any time a table holds: nothing expires.
        let huge = Ttl {
            count: u32::MAX,
            unit: TtlUnit::Year,
        };
        assert_eq!(huge.cutoff(JAN_1_2016), None);
        let hours = Ttl {
            count: u32::MAX,
            unit: TtlUnit::Hour,
        };
        assert_eq!(hours.cutoff(JAN_1_2016), None);
        let hours = Ttl {
            count: 1000,
            unit: TtlUnit::Hour,
        };
        assert_eq!(hours.cutoff(JAN_1_2016), Some(JAN_1_2016 - 1000 * HOUR_NS));
    }

    #[test]
    fn units_parse_and_print_as_questdb_writes_them() {
        assert_eq!(TtlUnit::parse("days"), Some(TtlUnit::Day));
        assert_eq!(TtlUnit::parse("H"), Some(TtlUnit::Hour));
        assert_eq!(TtlUnit::parse("fortnight"), None);
        for unit in TtlUnit::ALL {
            assert_eq!(TtlUnit::from_code(unit as u8), Some(unit));
        }
        assert_eq!(TtlUnit::from_code(0), None);
        let ttl = Ttl {
            count: 1,
            unit: TtlUnit::Week,
        };
        assert_eq!(ttl.to_string(), "1 WEEK");
    }
}
