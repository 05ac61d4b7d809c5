//! A materialized view's definition as stored (its normalised `CREATE MATERIALIZED VIEW`),
//! parsed, and what a query over its base table may take from it (rollup routing: the
//! dialect's `rollup`). A leaf: the refresh (`matview`) and the dialect (`dialect`) both read
//! definitions through here.

use sundial_sql::questdb::{Buckets, Rollup, extract, view_buckets};
use sundial_sql::rollup::rollup_columns;
use sundial_sql::{Command, CreateMaterializedView};
use sundial_storage::{Database, TableKind, TableMeta};

use crate::error::{QueryError, Result};

/// A materialized view's definition, parsed from its stored statement.
#[derive(Debug, Clone)]
pub(crate) struct Definition {
    pub view: CreateMaterializedView,
    /// The base table (as `WITH BASE` names it; always present in a stored statement).
    pub base: String,
    pub buckets: Buckets,
}

/// The definition of the materialized view `meta`.
pub(crate) fn definition(meta: &TableMeta) -> Result<Definition> {
    let text = meta.definition.as_deref().unwrap_or_default();
    let view = match sundial_sql::parse(text)? {
        Command::CreateMaterializedView(view) => view,
        _ => {
            return Err(QueryError::Invalid(format!(
                "materialized view '{}' has a definition that is not CREATE MATERIALIZED VIEW",
                meta.name
            )));
        }
    };
    let base = view.base.clone().ok_or_else(|| {
        QueryError::Invalid(format!(
            "materialized view '{}' has no base table in its definition",
            meta.name
        ))
    })?;
    let buckets = view_buckets(&extract(&view.query)?.1)?;
    Ok(Definition {
        view,
        base,
        buckets,
    })
}

/// The materialized views over `table` a query may be answered from, with how far each is
/// fresh (see `sundial_sql::rollup`): valid views whose watermark the base table's change log
/// reaches, with no removal or schema change since.
pub(crate) fn rollups(db: &Database, table: &str) -> Vec<Rollup> {
    let Some(base) = db.table(table) else {
        return Vec::new();
    };
    let base_snapshot = base.snapshot();
    let base_meta = base_snapshot.meta();
    let Some(base_ts) = base_meta.timestamp_column().map(|c| c.name.clone()) else {
        return Vec::new();
    };
    // Rows the TTL dropped may still be in a view: it serves only from the oldest partition
    // the base table still has.
    let fresh_from = match base_snapshot.partitions().first() {
        Some(first) if base_meta.ttl.is_some() => Some(first.key),
        Some(_) => None,
        None => return Vec::new(),
    };
    let mut out = Vec::new();
    for view in db.tables() {
        let snapshot = view.snapshot();
        let meta = snapshot.meta();
        if meta.kind != TableKind::MaterializedView {
            continue;
        }
        let Ok(def) = definition(meta) else { continue };
        if !def.base.eq_ignore_ascii_case(&base_meta.name) {
            continue;
        }
        let Some(state) = snapshot.refresh() else {
            continue;
        };
        // A watermark past the base table's last commit (a restored backup) proves nothing.
        if state.invalid.is_some()
            || state.base_id != base.id()
            || state.base_seq > base_snapshot.seq()
        {
            continue;
        }
        let fresh_before = if state.base_seq == base_snapshot.seq() {
            None
        } else {
            match base.changes_since(state.base_seq) {
                Some(c) if c.removed.is_none() && c.schema.is_none() && !c.expired => {
                    match c.rows {
                        Some((min_ts, _)) => match def.buckets.floor(min_ts) {
                            Some(b) => Some(b),
                            None => continue,
                        },
                        None => None,
                    }
                }
                _ => continue,
            }
        };
        let columns: Vec<String> = meta.columns.iter().map(|c| c.name.clone()).collect();
        let Some((keys, aggregates)) = rollup_columns(&def.view.query, &columns, &base_ts) else {
            continue;
        };
        let Some(timestamp) = meta.timestamp_column().map(|c| c.name.clone()) else {
            continue;
        };
        out.push(Rollup {
            view: meta.name.clone(),
            buckets: def.buckets,
            timestamp,
            keys,
            aggregates,
            fresh_from,
            fresh_before,
        });
    }
    out
}
