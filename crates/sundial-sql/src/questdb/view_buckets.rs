//! How a materialized view's query cuts time into buckets, so that a refresh recomputes whole
//! buckets: the query's one `SAMPLE BY`, aligned to the calendar in UTC (with an optional
//! offset), without FILL or FROM/TO, as QuestDB requires of materialized views.

use super::clauses::{Align, Clauses};
use super::sample::offset_ns;
use super::stride::{Step, Stride};
use crate::error::{Result, SqlError};

/// The buckets of a materialized view's query: `origin + k * step` (see [`Step::floor`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buckets {
    pub stride: Stride,
    pub step: Step,
    pub origin: i64,
}

impl Buckets {
    /// The start of the bucket holding `t`.
    pub fn floor(&self, t: i64) -> Option<i64> {
        self.step.floor(t, self.origin)
    }

    /// The start of the bucket after the one holding `t`.
    pub fn ceil_after(&self, t: i64) -> Option<i64> {
        self.step.add(self.floor(t)?, 1)
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
    let origin = match &sample.align {
        Align::FirstObservation => return refuse("ALIGN TO FIRST OBSERVATION"),
        Align::Calendar {
            time_zone: Some(_), ..
        } => return refuse("ALIGN TO CALENDAR TIME ZONE (not yet supported)"),
        Align::Calendar {
            time_zone: None,
            offset: None,
        } => stride.calendar_origin(),
        Align::Calendar {
            time_zone: None,
            offset: Some(offset),
        } => {
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
                "SELECT ts, avg(v) FROM t SAMPLE BY 1h ALIGN TO CALENDAR TIME ZONE 'Europe/Paris'",
                "TIME ZONE",
            ),
        ] {
            let e = buckets(sql).unwrap_err().to_string();
            assert!(e.contains(says), "{sql}: {e}");
        }
    }
}
