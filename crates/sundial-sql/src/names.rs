//! Names the dialect's rewrites and the engine that runs their output agree on.
//!
//! A rewrite names an engine function or table by one of these constants; the engine registers
//! that function or table under the same constant. Nothing here depends on anything.

/// The catalog every Sundial table is in.
pub const CATALOG: &str = "sundial";
/// The schema every Sundial table is in.
pub const SCHEMA: &str = "public";

/// The function a SELECT's WHERE is marked with when LATEST ON/BY over SYMBOL keys is left to
/// the engine's backward search: `WHERE __sundial_latest_by(key, ...) [AND <filter>]` keeps,
/// among the rows of the one table in FROM that pass the filter, the newest row per key.
pub const LATEST_BY_MARKER: &str = "__sundial_latest_by";

/// The function an ASOF/LT/SPLICE JOIN's `ON` is marked with for the engine's time-join
/// planner: `__sundial_asof_join(kind VARCHAR, tolerance_ns BIGINT or NULL)`, the kind being
/// one of [`TimeJoinKind::as_str`].
pub const ASOF_JOIN_MARKER: &str = "__sundial_asof_join";

/// QuestDB's time joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd)]
pub enum TimeJoinKind {
    /// Each left row with the newest right row at or before its timestamp.
    Asof,
    /// Each left row with the newest right row strictly before its timestamp.
    Lt,
    /// Rows of both sides in timestamp order, each with the newest row of the other side at
    /// or before it (a full ASOF JOIN).
    Splice,
}

impl TimeJoinKind {
    /// The kind's name in the marker call.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeJoinKind::Asof => "asof",
            TimeJoinKind::Lt => "lt",
            TimeJoinKind::Splice => "splice",
        }
    }

    /// The kind [`TimeJoinKind::as_str`] names.
    pub fn parse(name: &str) -> Option<TimeJoinKind> {
        [TimeJoinKind::Asof, TimeJoinKind::Lt, TimeJoinKind::Splice]
            .into_iter()
            .find(|k| k.as_str() == name)
    }

    /// The clause as users write it, for messages.
    pub fn clause(self) -> &'static str {
        match self {
            TimeJoinKind::Asof => "ASOF JOIN",
            TimeJoinKind::Lt => "LT JOIN",
            TimeJoinKind::Splice => "SPLICE JOIN",
        }
    }
}

/// The window function `SAMPLE BY ... FILL(LINEAR)` fills a value with:
/// `__sundial_fill_linear(value, present BOOLEAN, bucket_ns BIGINT) OVER (PARTITION BY keys
/// ORDER BY bucket)`.
pub const FILL_LINEAR_FUNCTION: &str = "__sundial_fill_linear";

/// The alias prefix a plain column item beside a wildcard gets (`SELECT n.oid, n.*`), so that
/// DataFusion plans the repeat; the engine names the column after the prefix again.
pub const REPEAT_PREFIX: &str = "__sundial_repeat__";

/// The qualifier of a type in a cast the dialect writes to stand for a PostgreSQL type by its
/// `pg_type.typname` (`CAST(NULL AS __sundial_pg_type__.name)`): the engine plans it as the
/// Arrow type that holds that PostgreSQL type, with the type declared on the result.
pub const PG_TYPE_QUALIFIER: &str = "__sundial_pg_type__";

/// The zero-based position of placeholder `$n`; `None` for any other name (`$0`, `?`, `$x`).
pub fn placeholder_index(id: &str) -> Option<usize> {
    id.strip_prefix('$')?.parse::<usize>().ok()?.checked_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_count_from_one() {
        assert_eq!(placeholder_index("$1"), Some(0));
        assert_eq!(placeholder_index("$12"), Some(11));
        assert_eq!(placeholder_index("$0"), None);
        assert_eq!(placeholder_index("?"), None);
        assert_eq!(placeholder_index("$x"), None);
    }
}
