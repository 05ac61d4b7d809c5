//! What each commit of a table changed, kept in memory for materialized views: a view over
//! the table recomputes only the time buckets the commits after its watermark touched.
//!
//! The log holds, per commit, a [`Changes`]: the time range of the rows it added or replaced,
//! and whether it removed rows or changed the schema. It is bounded: past
//! [`CHANGE_LOG_ENTRIES_MAX`] entries the two oldest are merged into one, which answers for
//! both commits with the union of their changes. Every answer is therefore a superset of what
//! changed, which is safe: recomputing a bucket that did not change rewrites the same rows.
//!
//! A commit's changes are recorded before its snapshot is published, so a reader that saw a
//! commit's snapshot finds its changes here.
//!
//! Invariant: the log knows every commit after `known_after` (the sequence number the table
//! was opened at). [`ChangeLog::since`] answers `None` for an older sequence number: after a
//! restart a view whose watermark is older than the table's open refreshes fully.

use std::collections::VecDeque;

/// The most commits the log keeps apart; older ones are merged.
pub const CHANGE_LOG_ENTRIES_MAX: usize = 4096;

/// What one or more commits changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The smallest and largest timestamps of rows added, replaced or removed by a range
    /// replacement (tables without a designated timestamp: `(0, 0)`).
    pub rows: Option<(i64, i64)>,
    /// Why rows were removed other than by a range replacement or the TTL (TRUNCATE, DROP
    /// PARTITION), if they were.
    pub removed: Option<String>,
    /// Whether the TTL dropped partitions.
    pub expired: bool,
    /// A change of schema a query may depend on (a column dropped or renamed, the table
    /// renamed or dropped), if any.
    pub schema: Option<String>,
}

impl Changes {
    /// Rows with timestamps from `min_ts` to `max_ts` (inclusive) changed.
    pub fn rows(min_ts: i64, max_ts: i64) -> Changes {
        Changes {
            rows: Some((min_ts, max_ts)),
            ..Changes::default()
        }
    }

    /// Rows were removed: `why` says how.
    pub fn removed(why: impl Into<String>) -> Changes {
        Changes {
            removed: Some(why.into()),
            ..Changes::default()
        }
    }

    /// The schema changed: `what` says how.
    pub fn schema(what: impl Into<String>) -> Changes {
        Changes {
            schema: Some(what.into()),
            ..Changes::default()
        }
    }

    /// Whether nothing a query reads changed.
    pub fn is_empty(&self) -> bool {
        self.rows.is_none() && self.removed.is_none() && !self.expired && self.schema.is_none()
    }

    /// Adds `other`'s changes to these; the first reason given for a removal or schema change
    /// is kept.
    pub fn merge(&mut self, other: &Changes) {
        self.rows = match (self.rows, other.rows) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (a, b) => a.or(b),
        };
        if self.removed.is_none() {
            self.removed.clone_from(&other.removed);
        }
        self.expired |= other.expired;
        if self.schema.is_none() {
            self.schema.clone_from(&other.schema);
        }
    }
}

/// The changes of a table's commits since it was opened (see the module docs).
#[derive(Debug)]
pub(crate) struct ChangeLog {
    known_after: u64,
    /// `(seq, changes)`: the changes of the commits after the previous entry's `seq` (or
    /// `known_after`) up to `seq`, ascending.
    entries: VecDeque<(u64, Changes)>,
}

impl ChangeLog {
    /// A log of the commits after `seq`.
    pub(crate) fn after(seq: u64) -> ChangeLog {
        ChangeLog {
            known_after: seq,
            entries: VecDeque::new(),
        }
    }

    /// Records commit `seq`'s changes. Sequence numbers ascend.
    pub(crate) fn record(&mut self, seq: u64, changes: Changes) {
        debug_assert!(
            self.entries.back().map_or(self.known_after, |e| e.0) < seq,
            "commits are recorded in order"
        );
        if changes.is_empty() {
            return;
        }
        self.entries.push_back((seq, changes));
        if self.entries.len() > CHANGE_LOG_ENTRIES_MAX
            && let Some((_, oldest)) = self.entries.pop_front()
            && let Some((_, next)) = self.entries.front_mut()
        {
            let mut merged = oldest;
            merged.merge(next);
            *next = merged;
        }
        debug_assert!(self.entries.len() <= CHANGE_LOG_ENTRIES_MAX);
    }

    /// What the commits after `seq` changed (a superset), or `None` when the log does not go
    /// back that far.
    pub(crate) fn since(&self, seq: u64) -> Option<Changes> {
        if seq < self.known_after {
            return None;
        }
        let mut out = Changes::default();
        for (_, c) in self.entries.iter().rev().take_while(|(s, _)| *s > seq) {
            out.merge(c);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_with_the_union_since_a_commit() {
        let mut log = ChangeLog::after(10);
        log.record(11, Changes::rows(5, 9));
        log.record(12, Changes::default());
        log.record(13, Changes::rows(1, 3));
        log.record(14, Changes::removed("TRUNCATE"));
        assert_eq!(log.since(9), None);
        let all = log.since(10).unwrap();
        assert_eq!(all.rows, Some((1, 9)));
        assert_eq!(all.removed.as_deref(), Some("TRUNCATE"));
        assert_eq!(log.since(12).unwrap().rows, Some((1, 3)));
        assert!(log.since(14).unwrap().is_empty());
    }

    #[test]
    fn stays_bounded_and_answers_a_superset() {
        let mut log = ChangeLog::after(0);
        let n = CHANGE_LOG_ENTRIES_MAX as u64 * 3;
        for seq in 1..=n {
            log.record(seq, Changes::rows(seq as i64 * 10, seq as i64 * 10 + 1));
        }
        assert_eq!(log.entries.len(), CHANGE_LOG_ENTRIES_MAX);
        for since in [0, 1, n / 2, n - 2] {
            let (lo, hi) = log.since(since).unwrap().rows.unwrap();
            // Every commit after `since` is covered.
            assert!(lo <= (since as i64 + 1) * 10, "{since}");
            assert_eq!(hi, n as i64 * 10 + 1);
        }
        // Recent commits stay apart.
        assert_eq!(
            log.since(n - 1).unwrap().rows,
            Some((n as i64 * 10, n as i64 * 10 + 1))
        );
    }
}
