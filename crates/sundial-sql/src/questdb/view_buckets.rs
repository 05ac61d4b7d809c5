//! How a materialized view's query cuts time into buckets, so that a refresh recomputes whole
//! buckets: the query's one `SAMPLE BY`, aligned to the calendar in UTC or in a time zone's
//! wall-clock time (with an optional offset), without FILL or FROM/TO, as QuestDB requires of
//! materialized views. In a time zone a bucket starts where the zone's clocks show its start
//! (the first time, when they show it twice), as `timestamp_floor` buckets SAMPLE BY's rows,
//! so a bucket around a daylight-saving change is an hour shorter or longer.

use super::clauses::{Align, Clauses};
use super::sample::offset_ns;
use super::stride::{Step, Stride, local_to_utc, parse_zone, utc_offset_ns};
use crate::error::{Result, SqlError};

/// The buckets of a materialized view's query: `origin + k * step` (see [`Step::floor`]), in
/// UTC or on `zone`'s wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buckets {
    pub stride: Stride,
    pub step: Step,
    /// In wall-clock time when `zone` is given.
    pub origin: i64,
    pub zone: Option<chrono_tz::Tz>,
}

impl Buckets {
    /// The start of the bucket holding `t`.
    pub fn floor(&self, t: i64) -> Option<i64> {
        self.floor_at(t, 0)
    }

    /// The start of the bucket after the one holding `t`.
    pub fn ceil_after(&self, t: i64) -> Option<i64> {
        self.floor_at(t, 1)
    }

    /// The start of the `k`th bucket after the one holding `t`.
    fn floor_at(&self, t: i64, k: i64) -> Option<i64> {
        match &self.zone {
            None => self.step.add(self.step.floor(t, self.origin)?, k),
            Some(zone) => {
                let wall = t.checked_add(utc_offset_ns(zone, t))?;
                let start = self.step.add(self.step.floor(wall, self.origin)?, k)?;
                local_to_utc(zone, start)
            }
        }
    }
}

/// The buckets of `clauses`' query (see [`crate::questdb::extract`]), or why a materialized
/// view cannot follow it bucket by bucket.
pub fn view_buckets(clauses: &Clauses) -> Result<Buckets> {
    let refuse = |why: &str| {
        Err(SqlError::NotSupported(format!(
            "{why} in a materialized view's query, which must group rows into time buckets \
             with one SAMPLE BY aligned to the calendar"
        )))
    };
    let sample = match clauses.samples.as_slice() {
        [] => return refuse("no SAMPLE BY"),
        [one] => one,
        _ => return refuse("more than one SAMPLE BY"),
    };
    if !sample.fill.is_empty() {
        return refuse("FILL");
    }
    if sample.from.is_some() || sample.to.is_some() {
        return refuse("SAMPLE BY FROM/TO");
    }
    let stride = Stride::parse(&sample.stride).map_err(SqlError::Invalid)?;
    let step = stride
        .step()
        .ok_or_else(|| SqlError::Invalid(format!("stride '{}' is too large", sample.stride)))?;
    let (time_zone, offset) = match &sample.align {
        Align::FirstObservation => return refuse("ALIGN TO FIRST OBSERVATION"),
        Align::Calendar { time_zone, offset } => (time_zone, offset),
    };
    let zone = match time_zone {
        None => None,
        Some(text) => {
            let text = text.trim();
            let Some(name) = text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) else {
                return refuse("a TIME ZONE that is not a quoted name");
            };
            Some(parse_zone(name).map_err(SqlError::Invalid)?)
        }
    };
    let origin = match offset {
        None => stride.calendar_origin(),
        Some(offset) => {
            let text = offset.trim().trim_matches('\'');
            let shift = offset_ns(text).ok_or_else(|| {
                SqlError::Invalid(format!(
                    "WITH OFFSET: '{text}' is not an offset such as '00:15' or '-01:30'"
                ))
            })?;
            stride.calendar_origin() + shift
        }
    };
    Ok(Buckets {
        stride,
        step,
        origin,
        zone,
    })
}

/// A materialized view a query over its base table may be answered from.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollup {
    pub view: String,
    pub buckets: Buckets,
    /// The view's designated timestamp (its buckets' start).
    pub timestamp: String,
    /// The base table's columns the view groups by (its columns of the same names).
    pub keys: Vec<String>,
    pub aggregates: Vec<RollupColumn>,
    /// The view holds the query's answer for no bucket before this instant (the base table
    /// expired older rows); `None`: no such limit.
    pub fresh_from: Option<i64>,
    /// The view holds the query's answer for every bucket before this instant; `None`: for
    /// every bucket.
    pub fresh_before: Option<i64>,
}

/// A column of a view that holds an aggregate of the base table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupColumn {
    /// `sum`, `count`, `min`, `max` (lower case).
    pub function: String,
    /// The base column aggregated; `None` for `count(*)`.
    pub argument: Option<String>,
    /// The view's column.
    pub column: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::questdb::extract;

    fn buckets(sql: &str) -> Result<Buckets> {
        view_buckets(&extract(sql)?.1)
    }

    #[test]
    fn reads_the_stride_and_origin() {
        let b = buckets("SELECT ts, avg(v) FROM t SAMPLE BY 15m").unwrap();
        assert_eq!(b.step, Step::Nanos(15 * 60 * 1_000_000_000));
        assert_eq!(b.origin, 0);
        assert_eq!(
            b.floor(16 * 60 * 1_000_000_000),
            Some(15 * 60 * 1_000_000_000)
        );
        let b =
            buckets("SELECT ts, avg(v) FROM t SAMPLE BY 1h ALIGN TO CALENDAR WITH OFFSET '00:30'")
                .unwrap();
        assert_eq!(b.origin, 30 * 60 * 1_000_000_000);
        assert_eq!(
            buckets("SELECT ts, avg(v) FROM t SAMPLE BY 1M")
                .unwrap()
                .step,
            Step::Months(1)
        );
    }

    #[test]
    fn buckets_on_a_time_zone_s_wall_clock() {
        let at = |s: &str| {
            chrono::DateTime::parse_from_rfc3339(s)
                .unwrap()
                .timestamp_nanos_opt()
                .unwrap()
        };
        let b = buckets(
            "SELECT ts, avg(v) FROM t SAMPLE BY 1d ALIGN TO CALENDAR TIME ZONE 'Europe/Berlin'",
        )
        .unwrap();
        // 00:30 in Berlin on 2 January: the local day began at 23:00 UTC.
        let t = at("2024-01-01T23:30:00Z");
        assert_eq!(b.floor(t), Some(at("2024-01-01T23:00:00Z")));
        assert_eq!(b.ceil_after(t), Some(at("2024-01-02T23:00:00Z")));
        // The day clocks move forward (31 March 2024) has 23 hours.
        let t = at("2024-03-31T12:00:00Z");
        assert_eq!(b.floor(t), Some(at("2024-03-30T23:00:00Z")));
        assert_eq!(b.ceil_after(t), Some(at("2024-03-31T22:00:00Z")));
        // Hourly across the change back (27 October 2024, 01:00 UTC): 02:00-03:00 local comes
        // twice and is one bucket of two hours.
        let b = buckets(
            "SELECT ts, avg(v) FROM t SAMPLE BY 1h ALIGN TO CALENDAR TIME ZONE 'Europe/Berlin'",
        )
        .unwrap();
        let second = at("2024-10-27T01:30:00Z");
        assert_eq!(b.floor(second), Some(at("2024-10-27T00:00:00Z")));
        assert_eq!(b.ceil_after(second), Some(at("2024-10-27T02:00:00Z")));
    }

    #[test]
    fn refuses_what_cannot_be_refreshed_by_bucket() {
        for (sql, says) in [
            ("SELECT avg(v) FROM t", "no SAMPLE BY"),
            ("SELECT ts, avg(v) FROM t SAMPLE BY 1h FILL(PREV)", "FILL"),
            (
                "SELECT ts, avg(v) FROM t SAMPLE BY 1h FROM '2024-01-01' TO '2024-02-01'",
                "FROM/TO",
            ),
            (
                "SELECT ts, avg(v) FROM t SAMPLE BY 1h ALIGN TO FIRST OBSERVATION",
                "FIRST OBSERVATION",
            ),
            (
                "SELECT ts, avg(v) FROM t SAMPLE BY 1h ALIGN TO CALENDAR TIME ZONE 'Mars/Olympus'",
                "unknown time zone",
            ),
        ] {
            let e = buckets(sql).unwrap_err().to_string();
            assert!(e.contains(says), "{sql}: {e}");
        }
    }
}
