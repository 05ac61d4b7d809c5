//! The storage seam: what every operator reads a table through.
//!
//! A plan is made against one version of a table's columns (`planned`); each run reads the
//! table's newest snapshot, provided the columns the plan reads are still there and the same.
//! SYMBOL values are looked up in a snapshot's dictionary by value here (a hash lookup in storage).

use std::sync::Arc;

use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use sundial_storage::{ColumnMeta, Snapshot, Table, TableMeta};

/// The newest snapshot of `table`, provided it still has the columns a plan made against
/// `planned` reads, at the same positions (columns added since are ignored: the plan never
/// reads them).
pub(crate) fn newest_snapshot(table: &Table, planned: &Arc<TableMeta>) -> DfResult<Arc<Snapshot>> {
    let newest = table.snapshot();
    if Arc::ptr_eq(newest.meta(), planned) || same_columns(&planned.columns, &newest.meta().columns)
    {
        return Ok(newest);
    }
    Err(DataFusionError::Plan(format!(
        "table '{}' changed its columns after this statement was planned; prepare it again",
        planned.name
    )))
}

/// Whether `now` starts with the columns of `planned` (same ids, names and types).
/// Adding or dropping a symbol index changes no column a plan reads.
pub(crate) fn same_columns(planned: &[ColumnMeta], now: &[ColumnMeta]) -> bool {
    let same = |a: &ColumnMeta, b: &ColumnMeta| {
        (a.id, &a.name, a.column_type) == (b.id, &b.name, b.column_type)
    };
    now.len() >= planned.len() && planned.iter().zip(now).all(|(a, b)| same(a, b))
}

/// The dictionary code of `value` in SYMBOL column `column`, if the column ever held it: a hash
/// lookup in the snapshot's dictionary (NULL and non-text values have none).
pub(crate) fn symbol_code(snapshot: &Snapshot, column: usize, value: &ScalarValue) -> Option<i32> {
    match value {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => snapshot.symbol_code(column, s),
        ScalarValue::Dictionary(_, inner) => symbol_code(snapshot, column, inner),
        _ => None,
    }
}
