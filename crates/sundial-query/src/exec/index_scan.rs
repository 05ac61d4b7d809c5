//! Scans narrowed by symbol indexes: a filter on an indexed SYMBOL column, or naming a few of
//! the many symbols of another, reads only the rows holding the wanted symbols.
//!
//! ```text
//! WHERE host IN ('a', 'b') AND ts in [lo, hi)
//!   ts bounds ──▶ row range of each partition (binary search, scan.rs)
//!   host      ──▶ codes of 'a', 'b' ──▶ KeyIndexes: each code's rows inside the range
//!             ──▶ Frame { rows, picks: merged rows } ──▶ the scan reads only the picks
//! ```
//!
//! The provider reports such filters as Exact, so the scan must apply them in full: when a
//! partition is too big for the index budget, its codes are compared row by row instead.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int32Type};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use datafusion::scalar::ScalarValue;
use sundial_storage::{ColumnType, Snapshot, Table, TableMeta};

use super::frame::Frame;
use crate::error::Result;
use crate::error::internal;
use crate::key_index::{IndexRows, KeyIndexes};
use crate::snapshot::symbol_code;

/// `column IN (values)` on an indexed SYMBOL column (`=` is a list of one, and so is each
/// term of an OR over the same column).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SymbolFilter {
    pub column: usize,
    pub values: Vec<ScalarValue>,
}

/// Symbols of a column without an index that a filter may name, as a fraction of those the
/// column's dictionary holds, and still read its rows through the in-memory index: a filter
/// naming a few of many symbols (a host, three trucks) keeps about that fraction of rows,
/// which the index finds without reading the others.
const UNINDEXED_NAMED_FRACTION_MAX: usize = 32;

/// Symbols a column without an index must hold for a filter on it to use the in-memory index.
const UNINDEXED_SYMBOLS_MIN: usize = 64;

/// `expr` as a [`SymbolFilter`] of `meta` that the scan answers through key indexes: on a
/// column declared indexed, or naming at most 1/[`UNINDEXED_NAMED_FRACTION_MAX`] of the
/// symbols of `snapshot`'s dictionary of another SYMBOL column (whose in-memory index is
/// then built on first use, as for a declared one).
pub(crate) fn symbol_filter(
    expr: &Expr,
    meta: &TableMeta,
    snapshot: &Snapshot,
) -> Option<SymbolFilter> {
    let (name, values) = symbol_terms(expr)?;
    let column = meta.columns.iter().position(|c| c.name == name)?;
    let column_meta = &meta.columns[column];
    if column_meta.column_type != ColumnType::Symbol {
        return None;
    }
    let symbols = snapshot.symbols(column).map_or(0, |s| s.len());
    (column_meta.indexed || names_few_of_many(values.len(), symbols))
        .then_some(SymbolFilter { column, values })
}

/// Whether `named` symbols of a dictionary of `symbols` are few enough of many that their
/// rows are best found through the in-memory key index, for a column without one declared
/// (here, and for LATEST ON's keys).
pub(crate) fn names_few_of_many(named: usize, symbols: usize) -> bool {
    symbols >= UNINDEXED_SYMBOLS_MIN
        && named.saturating_mul(UNINDEXED_NAMED_FRACTION_MAX) <= symbols
}

/// The filters among `filters` that are [`SymbolFilter`]s.
pub(crate) fn symbol_filters(
    filters: &[Expr],
    meta: &TableMeta,
    snapshot: &Snapshot,
) -> Vec<SymbolFilter> {
    filters
        .iter()
        .filter_map(|f| symbol_filter(f, meta, snapshot))
        .collect()
}

/// `column = 'a'`, `column IN ('a', ...)` or an OR of these over one column: the column's
/// name and the string literals.
fn symbol_terms(expr: &Expr) -> Option<(&str, Vec<ScalarValue>)> {
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) => {
            let (column, value) = match (symbol_column(left), symbol_column(right)) {
                (Some(c), None) => (c, right),
                (None, Some(c)) => (c, left),
                _ => return None,
            };
            Some((column, vec![string_literal(value)?]))
        }
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => {
            // As a filter, `x OR NULL` and `x OR false` admit the rows `x` admits.
            if never_true(right) {
                return symbol_terms(left);
            }
            if never_true(left) {
                return symbol_terms(right);
            }
            let (column, mut values) = symbol_terms(left)?;
            let (other, more) = symbol_terms(right)?;
            if column != other {
                return None;
            }
            values.extend(more);
            Some((column, values))
        }
        Expr::InList(list) if !list.negated => {
            let column = symbol_column(&list.expr)?;
            let values = list
                .list
                .iter()
                .map(string_literal)
                .collect::<Option<Vec<_>>>()?;
            Some((column, values))
        }
        _ => None,
    }
}

/// A literal NULL or false.
fn never_true(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::Literal(
            ScalarValue::Boolean(None | Some(false)) | ScalarValue::Null,
            _
        )
    )
}

/// A column, possibly cast to a string type (how the planner compares a SYMBOL to text).
fn symbol_column(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Column(c) => Some(c.name.as_str()),
        Expr::Cast(c) if is_string(c.field.data_type()) => symbol_column(&c.expr),
        Expr::TryCast(c) if is_string(c.field.data_type()) => symbol_column(&c.expr),
        _ => None,
    }
}

fn is_string(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(_, _)
    )
}

/// A string literal (or NULL), possibly dictionary-encoded or cast.
fn string_literal(expr: &Expr) -> Option<ScalarValue> {
    match expr {
        Expr::Literal(value, _) => {
            let inner = match value {
                ScalarValue::Dictionary(_, inner) => inner.as_ref(),
                v => v,
            };
            matches!(
                inner,
                ScalarValue::Utf8(_) | ScalarValue::LargeUtf8(_) | ScalarValue::Utf8View(_)
            )
            .then(|| inner.clone())
        }
        Expr::Cast(c) if is_string(c.field.data_type()) => string_literal(&c.expr),
        _ => None,
    }
}

/// `frames` narrowed to the rows every filter admits: each frame gets its `picks`, and frames
/// left with none are dropped.
pub(crate) fn pick_rows(
    indexes: &KeyIndexes,
    table: &Arc<Table>,
    snapshot: &Snapshot,
    filters: &[SymbolFilter],
    frames: Vec<Frame>,
) -> Result<Vec<Frame>> {
    let codes: Vec<Vec<i32>> = filters
        .iter()
        .map(|f| {
            let mut codes: Vec<i32> = f
                .values
                .iter()
                .filter_map(|v| symbol_code(snapshot, f.column, v))
                .collect();
            codes.sort_unstable();
            codes.dedup();
            codes
        })
        .collect();
    let mut out = Vec::with_capacity(frames.len());
    for frame in frames {
        let mut picks: Option<Vec<u32>> = None;
        for (filter, codes) in filters.iter().zip(&codes) {
            let rows = filter_rows(indexes, table, snapshot, &frame, filter.column, codes)?;
            picks = Some(match picks {
                None => rows,
                Some(previous) => intersect(&previous, &rows),
            });
        }
        let Some(picks) = picks else {
            out.push(frame);
            continue;
        };
        if let (Some(first), Some(last)) = (picks.first(), picks.last()) {
            out.push(Frame {
                partition: frame.partition,
                rows: *first as u64..*last as u64 + 1,
                picks: Some(picks.into()),
            });
        }
    }
    Ok(out)
}

/// The rows of `frame` whose `column` holds one of `codes`, ascending.
fn filter_rows(
    indexes: &KeyIndexes,
    table: &Arc<Table>,
    snapshot: &Snapshot,
    frame: &Frame,
    column: usize,
    codes: &[i32],
) -> Result<Vec<u32>> {
    let mut rows = Vec::new();
    for &code in codes {
        let found = indexes.rows(
            table,
            snapshot,
            u64::MAX,
            (frame.partition, column),
            i64::from(code),
            frame.rows.clone(),
            usize::MAX,
        )?;
        match found {
            IndexRows::Hits(hits) => rows.extend(hits),
            IndexRows::Unindexed | IndexRows::Deferred => {
                return compare_codes(snapshot, frame, column, codes);
            }
        }
    }
    if codes.len() > 1 {
        rows.sort_unstable();
    }
    Ok(rows)
}

/// [`filter_rows`] without an index: the column's codes compared row by row.
fn compare_codes(
    snapshot: &Snapshot,
    frame: &Frame,
    column: usize,
    codes: &[i32],
) -> Result<Vec<u32>> {
    let values = snapshot.read_column(frame.partition, column, frame.rows.clone())?;
    let keys = match values.as_any_dictionary_opt() {
        Some(dictionary) => cast(dictionary.keys(), &DataType::Int32)?,
        None => {
            return Err(internal(format!(
                "SYMBOL column {column} read without codes"
            )));
        }
    };
    let keys = keys.as_primitive::<Int32Type>();
    let start = frame.rows.start as u32;
    Ok((0..keys.len())
        .filter(|&i| keys.is_valid(i) && codes.contains(&keys.value(i)))
        .map(|i| start + i as u32)
        .collect())
}

/// The rows in both ascending lists.
fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::scan::tests::{answer_as_general_path, engine, plan_and_rows};

    /// Rows `from..to`: hosts a, b, c and NULL in turn, one every 7 hours from 2024-01-01.
    fn insert(table: &str, from: u32, to: u32) -> String {
        format!(
            "INSERT INTO {table} SELECT CASE value % 4 WHEN 0 THEN 'a' WHEN 1 THEN 'b' \
             WHEN 2 THEN 'c' END, to_timestamp_seconds(1704067200 + value * 25200), value \
             FROM generate_series({from}, {to} - 1)"
        )
    }

    /// Each query gives the same rows on the indexed table `t` as on the plain table `r`.
    async fn same_as_unindexed(engine: &crate::Engine, queries: &[&str]) {
        for query in queries {
            let (plan, indexed) = plan_and_rows(engine, &query.replace("$t", "t")).await;
            let (_, plain) = plan_and_rows(engine, &query.replace("$t", "r")).await;
            assert_eq!(indexed, plain, "{query}: {plan}");
            assert!(
                plan.contains("indexed") || plan.contains("rows=0"),
                "{query}: {plan}"
            );
            assert!(!plan.contains("FilterExec"), "{query}: {plan}");
        }
    }

    #[tokio::test]
    async fn indexed_symbols_read_only_their_rows() {
        let (engine, _dir) = engine();
        let mut setup = vec![
            "CREATE TABLE t (host SYMBOL INDEX, ts TIMESTAMP, v LONG) TIMESTAMP(ts) PARTITION BY WEEK".to_string(),
            "CREATE TABLE r (host SYMBOL, ts TIMESTAMP, v LONG) TIMESTAMP(ts) PARTITION BY WEEK".to_string(),
        ];
        for table in ["t", "r"] {
            setup.push(insert(table, 100, 300));
        }
        for sql in &setup {
            engine.run(sql).await.expect(sql);
        }
        let queries = [
            "SELECT * FROM $t WHERE host = 'a' ORDER BY ts",
            "SELECT v, ts FROM $t WHERE host IN ('c', 'b', 'c') ORDER BY ts DESC LIMIT 7",
            "SELECT count(*), sum(v) AS s FROM $t WHERE host = 'b' AND ts >= '2024-01-20' AND ts < '2024-02-03'",
            "SELECT host, count(*) FROM $t WHERE host = 'a' OR host = 'b' GROUP BY host ORDER BY host",
            "SELECT * FROM $t WHERE host IN ('nowhere') ORDER BY ts",
        ];
        same_as_unindexed(&engine, &queries).await;
        // Out-of-order rows rewrite partitions the index has already covered, and appends
        // extend it.
        for sql in [
            insert("t", 0, 100),
            insert("r", 0, 100),
            insert("t", 300, 350),
            insert("r", 300, 350),
        ] {
            engine.run(&sql).await.expect(&sql);
        }
        same_as_unindexed(&engine, &queries).await;
        let (_, rows) = plan_and_rows(&engine, "SELECT count(*) FROM t WHERE host = 'a'").await;
        assert!(rows.contains("| 88 "), "{rows}");

        // Dropping the index leaves the filter to be tested row by row, with the same answer.
        engine
            .run("ALTER TABLE t ALTER COLUMN host DROP INDEX")
            .await
            .expect("drop index");
        let (plan, rows) = plan_and_rows(&engine, "SELECT count(*) FROM t WHERE host = 'a'").await;
        assert!(
            !plan.contains("indexed") && plan.contains("filter=host@0 = a"),
            "{plan}"
        );
        assert!(rows.contains("| 88 "), "{rows}");
    }

    /// A column without an index reads through the in-memory index when a filter names at
    /// most 1/32 of its symbols, and compares codes row by row otherwise; answers agree with
    /// DataFusion's filter above the scan, before and after rows arrive out of order.
    #[tokio::test]
    async fn selective_filters_on_unindexed_symbols_use_the_index() {
        let (engine, _dir) = engine();
        let insert = |from: u32, to: u32| {
            format!(
                "INSERT INTO u SELECT CASE WHEN value % 11 = 0 THEN NULL \
                 ELSE concat('h', CAST(value % 100 AS VARCHAR)) END, \
                 to_timestamp_seconds(1704067200 + value * 3600), value \
                 FROM generate_series({from}, {to} - 1)"
            )
        };
        for sql in [
            "CREATE TABLE u (host SYMBOL, ts TIMESTAMP, v LONG) TIMESTAMP(ts) PARTITION BY DAY"
                .to_string(),
            insert(1000, 3000),
        ] {
            engine.run(&sql).await.expect(&sql);
        }
        let queries = [
            ("SELECT * FROM $t WHERE host = 'h7' ORDER BY ts", true),
            (
                "SELECT count(*), sum(v) FROM $t WHERE host IN ('h1', 'h2', 'h3') AND v > 1500",
                true,
            ),
            ("SELECT * FROM $t WHERE host = 'nowhere'", true),
            (
                "SELECT count(*) FROM $t WHERE host IN ('h1', 'h2', 'h3', 'h4')",
                false,
            ),
        ];
        for round in 0..2 {
            for (query, indexed) in queries {
                let plan = answer_as_general_path(&engine, query, "u").await;
                let scan = plan
                    .lines()
                    .find(|l| l.contains("SundialScanExec: table=u,"))
                    .unwrap_or_default();
                // No frame is left when no row holds the symbol.
                let picked = scan.contains("indexed") || scan.contains("rows=0");
                assert_eq!(picked, indexed, "{query}: {plan}");
            }
            if round == 0 {
                // Out-of-order rows rewrite indexed partitions; appends extend them.
                for sql in [insert(0, 1000), insert(3000, 3300)] {
                    engine.run(&sql).await.expect(&sql);
                }
            }
        }
    }

    #[tokio::test]
    async fn filters_the_index_does_not_recognise_are_tested_row_by_row() {
        use datafusion::logical_expr::{col, lit};
        use datafusion::physical_plan::collect_partitioned;
        let (engine, _dir) = engine();
        for sql in [
            "CREATE TABLE t (host SYMBOL INDEX, ts TIMESTAMP, v LONG) TIMESTAMP(ts)".to_string(),
            insert("t", 0, 300),
        ] {
            engine.run(&sql).await.expect(&sql);
        }
        let state = engine.session().state();
        let provider = engine.session().table_provider("t").await.expect("t");
        // Not a shape the index applies; the scan must still apply all of it, and its limit
        // (per output partition) counts the rows that pass.
        let filter = col("v").gt(lit(250i64)).or(col("host").eq(lit("zzz")));
        for limit in [None, Some(3)] {
            let plan = provider
                .scan(&state, Some(&vec![2]), std::slice::from_ref(&filter), limit)
                .await
                .expect("scan");
            assert_eq!(plan.name(), "SundialScanExec");
            let partitions = collect_partitioned(plan, state.task_ctx())
                .await
                .expect("collect");
            let counts: Vec<usize> = partitions
                .iter()
                .map(|p| p.iter().map(|b| b.num_rows()).sum())
                .collect();
            match limit {
                None => assert_eq!(counts.iter().sum::<usize>(), 49, "{counts:?}"),
                Some(limit) => assert!(counts.iter().all(|n| *n == limit), "{counts:?}"),
            }
            assert!(partitions.iter().flatten().all(|b| b.num_columns() == 1));
        }
    }

    #[test]
    fn intersects_ascending_lists() {
        assert_eq!(intersect(&[1, 3, 5, 7], &[0, 3, 4, 7, 9]), [3, 7]);
        assert!(intersect(&[1], &[]).is_empty());
    }
}
