//! The catalog as QuestDB shows it: `SHOW TABLES`, `SHOW COLUMNS FROM t`, and the table
//! functions `tables()`, `table_columns('t')` and `wal_tables()`, which tools (QuestDB's web
//! console, its Grafana plugin) select from and filter like any table.
//!
//! ```text
//!   Database::tables() ─snapshot each─▶ one row per table    (tables(), wal_tables())
//!   Table::snapshot()  ─meta.columns──▶ one row per column   (table_columns(), SHOW COLUMNS)
//! ```
//!
//! Column names and types are QuestDB 9.3.4's, as it answers them. Where Sundial has no such
//! thing the value says so rather than imitating QuestDB's: `walEnabled` is false (commits are
//! crash-safe without a write-ahead log), `maxUncommittedRows` and `o3MaxLag` are NULL (commits
//! are sized server-wide), and `tables()` stops at `table_txn`, leaving out QuestDB's WAL,
//! write-amplification and replication statistics. `wal_tables()` lists every table as caught
//! up (writer and sequencer at its last commit), since nothing is ever pending in a log.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampNanosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::Expr;
use datafusion::scalar::ScalarValue;
use sundial_storage::{ColumnType, Database, Snapshot, Table, TableKind};

/// QuestDB's index block capacity and symbol capacity for SYMBOL columns (fixed here: Sundial
/// sizes both itself).
const SYMBOL_CAPACITY: i32 = 256;

fn batch(fields: Vec<Field>, columns: Vec<ArrayRef>) -> RecordBatch {
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .expect("columns match their fields")
}

/// `SHOW TABLES`: one column, `table_name`, in name order.
pub(crate) fn show_tables(db: &Database) -> RecordBatch {
    let names = db.table_names();
    batch(
        vec![Field::new("table_name", DataType::Utf8, false)],
        vec![Arc::new(StringArray::from(names))],
    )
}

/// `SHOW COLUMNS FROM t` and `table_columns('t')`: one row per column, QuestDB's nine
/// columns.
pub(crate) fn show_columns(snapshot: &Snapshot) -> RecordBatch {
    let meta = snapshot.meta();
    let columns = &meta.columns;
    let symbol = |i: usize| columns[i].column_type == ColumnType::Symbol;
    let n = columns.len();
    let index_block = (0..n).map(|i| if symbol(i) { SYMBOL_CAPACITY } else { 0 });
    let symbol_capacity = (0..n).map(|i| if symbol(i) { SYMBOL_CAPACITY } else { 0 });
    let symbol_count = (0..n).map(|i| {
        snapshot
            .symbols(i)
            .map_or(0, |values| i32::try_from(values.len()).unwrap_or(i32::MAX))
    });
    batch(
        vec![
            Field::new("column", DataType::Utf8, false),
            Field::new("type", DataType::Utf8, false),
            Field::new("indexed", DataType::Boolean, false),
            Field::new("indexBlockCapacity", DataType::Int32, false),
            Field::new("symbolCached", DataType::Boolean, false),
            Field::new("symbolCapacity", DataType::Int32, false),
            Field::new("symbolTableSize", DataType::Int32, false),
            Field::new("designated", DataType::Boolean, false),
            Field::new("upsertKey", DataType::Boolean, false),
        ],
        vec![
            Arc::new(StringArray::from_iter_values(
                columns.iter().map(|c| c.name.as_str()),
            )),
            Arc::new(StringArray::from_iter_values(
                columns.iter().map(|c| c.column_type.name()),
            )),
            Arc::new(BooleanArray::from_iter(
                columns.iter().map(|c| Some(c.indexed)),
            )),
            Arc::new(Int32Array::from_iter_values(index_block)),
            Arc::new(BooleanArray::from_iter((0..n).map(|i| Some(symbol(i))))),
            Arc::new(Int32Array::from_iter_values(symbol_capacity)),
            Arc::new(Int32Array::from_iter_values(symbol_count)),
            Arc::new(BooleanArray::from_iter(
                (0..n).map(|i| Some(meta.timestamp_index == Some(i))),
            )),
            Arc::new(BooleanArray::from_iter(
                columns.iter().map(|c| Some(c.dedup_key)),
            )),
        ],
    )
}

/// `tables()`: one row per table, in name order, `id` counting from 1.
pub(crate) fn tables(db: &Database) -> RecordBatch {
    let tables: Vec<Arc<Table>> = db
        .table_names()
        .iter()
        .filter_map(|name| db.table(name))
        .collect();
    let snapshots: Vec<Arc<Snapshot>> = tables.iter().map(|t| t.snapshot()).collect();
    let metas: Vec<_> = snapshots.iter().map(|s| s.meta().clone()).collect();
    let n = tables.len();
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, None);
    let bounds: Vec<(Option<i64>, Option<i64>)> = snapshots
        .iter()
        .map(|s| {
            let parts = s.partitions();
            match (parts.first(), parts.last(), s.meta().timestamp_index) {
                (Some(first), Some(last), Some(_)) => (Some(first.min_ts), Some(last.max_ts)),
                _ => (None, None),
            }
        })
        .collect();
    batch(
        vec![
            Field::new("id", DataType::Int32, false),
            Field::new("table_name", DataType::Utf8, false),
            Field::new("designatedTimestamp", DataType::Utf8, true),
            Field::new("partitionBy", DataType::Utf8, false),
            Field::new("walEnabled", DataType::Boolean, false),
            Field::new("dedup", DataType::Boolean, false),
            Field::new("ttlValue", DataType::Int32, false),
            Field::new("ttlUnit", DataType::Utf8, false),
            Field::new("matView", DataType::Boolean, false),
            Field::new("directoryName", DataType::Utf8, false),
            Field::new("maxUncommittedRows", DataType::Int32, true),
            Field::new("o3MaxLag", DataType::Int64, true),
            Field::new("table_suspended", DataType::Boolean, false),
            Field::new("table_type", DataType::Utf8, false),
            Field::new("table_row_count", DataType::Int64, true),
            Field::new("table_min_timestamp", ts.clone(), true),
            Field::new("table_max_timestamp", ts.clone(), true),
            Field::new("table_last_write_timestamp", ts, true),
            Field::new("table_txn", DataType::Int64, true),
        ],
        vec![
            Arc::new(Int32Array::from_iter_values(
                (1..=n).map(|i| i32::try_from(i).unwrap_or(i32::MAX)),
            )),
            Arc::new(StringArray::from_iter_values(
                metas.iter().map(|m| m.name.as_str()),
            )),
            Arc::new(StringArray::from_iter(
                metas
                    .iter()
                    .map(|m| m.timestamp_index.map(|i| m.columns[i].name.as_str())),
            )),
            Arc::new(StringArray::from_iter_values(
                metas.iter().map(|m| m.partition_by.name()),
            )),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(BooleanArray::from_iter(
                metas.iter().map(|m| Some(m.deduplicates())),
            )),
            Arc::new(Int32Array::from_iter_values(metas.iter().map(|m| {
                m.ttl
                    .map_or(0, |ttl| i32::try_from(ttl.count).unwrap_or(i32::MAX))
            }))),
            // QuestDB says HOUR for a table without a TTL (value 0).
            Arc::new(StringArray::from_iter_values(
                metas
                    .iter()
                    .map(|m| m.ttl.map_or("HOUR", |ttl| ttl.unit.name(1))),
            )),
            Arc::new(BooleanArray::from_iter(
                metas
                    .iter()
                    .map(|m| Some(m.kind == TableKind::MaterializedView)),
            )),
            Arc::new(StringArray::from_iter_values(tables.iter().map(|t| {
                t.path()
                    .file_name()
                    .map_or_else(|| t.name(), |d| d.to_string_lossy().into_owned())
            }))),
            Arc::new(Int32Array::from(vec![None; n])),
            Arc::new(Int64Array::from(vec![None; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            // QuestDB's letters: T a table, M a materialized view, V a view.
            Arc::new(StringArray::from_iter_values(metas.iter().map(
                |m| match m.kind {
                    TableKind::Table => "T",
                    TableKind::MaterializedView => "M",
                    TableKind::View => "V",
                },
            ))),
            Arc::new(Int64Array::from_iter_values(
                snapshots
                    .iter()
                    .map(|s| i64::try_from(s.row_count()).unwrap_or(i64::MAX)),
            )),
            Arc::new(TimestampNanosecondArray::from_iter(
                bounds.iter().map(|b| b.0),
            )),
            Arc::new(TimestampNanosecondArray::from_iter(
                bounds.iter().map(|b| b.1),
            )),
            Arc::new(TimestampNanosecondArray::from(vec![None; n])),
            Arc::new(Int64Array::from_iter_values(
                snapshots
                    .iter()
                    .map(|s| i64::try_from(s.seq()).unwrap_or(i64::MAX)),
            )),
        ],
    )
}

/// `wal_tables()`: every table, caught up (see the module's docs).
pub(crate) fn wal_tables(db: &Database) -> RecordBatch {
    let snapshots: Vec<Arc<Snapshot>> = db
        .table_names()
        .iter()
        .filter_map(|name| db.table(name))
        .map(|t| t.snapshot())
        .collect();
    let n = snapshots.len();
    let txn = || {
        Arc::new(Int64Array::from_iter_values(
            snapshots
                .iter()
                .map(|s| i64::try_from(s.seq()).unwrap_or(i64::MAX)),
        )) as ArrayRef
    };
    batch(
        vec![
            Field::new("name", DataType::Utf8, false),
            Field::new("suspended", DataType::Boolean, false),
            Field::new("writerTxn", DataType::Int64, false),
            Field::new("bufferedTxnSize", DataType::Int64, false),
            Field::new("sequencerTxn", DataType::Int64, false),
            Field::new("errorTag", DataType::Utf8, false),
            Field::new("errorMessage", DataType::Utf8, false),
            Field::new("memoryPressure", DataType::Int32, false),
        ],
        vec![
            Arc::new(StringArray::from_iter_values(
                snapshots.iter().map(|s| s.meta().name.as_str()),
            )),
            Arc::new(BooleanArray::from(vec![false; n])),
            txn(),
            Arc::new(Int64Array::from(vec![0; n])),
            txn(),
            Arc::new(StringArray::from(vec![""; n])),
            Arc::new(StringArray::from(vec![""; n])),
            Arc::new(Int32Array::from(vec![0; n])),
        ],
    )
}

/// Which table function this is.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Tables,
    TableColumns,
    WalTables,
}

/// A QuestDB meta table function over `db`, answered from the tables' current snapshots
/// when a statement is planned.
#[derive(Debug)]
struct MetaFunction {
    db: Arc<Database>,
    kind: Kind,
}

impl TableFunctionImpl for MetaFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let batch = match (self.kind, args.exprs()) {
            (Kind::Tables, []) => tables(&self.db),
            (Kind::WalTables, []) => wal_tables(&self.db),
            (Kind::TableColumns, [Expr::Literal(ScalarValue::Utf8(Some(name)), _)]) => {
                let table = self.db.table(name).ok_or_else(|| {
                    DataFusionError::Plan(format!("table '{name}' does not exist"))
                })?;
                show_columns(&table.snapshot())
            }
            (Kind::TableColumns, _) => {
                return Err(DataFusionError::Plan(
                    "table_columns takes one argument: a table name, as a string".into(),
                ));
            }
            (Kind::Tables, _) => {
                return Err(DataFusionError::Plan("tables() takes no arguments".into()));
            }
            (Kind::WalTables, _) => {
                return Err(DataFusionError::Plan(
                    "wal_tables() takes no arguments".into(),
                ));
            }
        };
        Ok(Arc::new(MemTable::try_new(
            batch.schema(),
            vec![vec![batch]],
        )?))
    }
}

pub(crate) fn register(ctx: &SessionContext, db: Arc<Database>) {
    for (name, kind) in [
        ("tables", Kind::Tables),
        ("table_columns", Kind::TableColumns),
        ("wal_tables", Kind::WalTables),
    ] {
        ctx.register_udtf(
            name,
            Arc::new(MetaFunction {
                db: db.clone(),
                kind,
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sundial_storage::{PartitionBy, TableDef};

    #[test]
    fn columns_tables_and_wal_tables_have_questdbs_shape() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), sundial_storage::StorageOptions::default()).unwrap();
        db.create_table(
            TableDef {
                name: "cpu".into(),
                columns: vec![
                    ("ts".into(), ColumnType::Timestamp),
                    ("host".into(), ColumnType::Symbol),
                    ("v".into(), ColumnType::Double),
                ],
                timestamp: Some("ts".into()),
                partition_by: PartitionBy::Day,
                indexed: vec![],
                dedup_keys: vec![],
                ttl: None,
                cold_after: None,
            },
            false,
        )
        .unwrap();
        let columns = show_columns(&db.table("cpu").unwrap().snapshot());
        assert_eq!(columns.num_rows(), 3);
        assert_eq!(columns.num_columns(), 9);
        let tables = tables(&db);
        assert_eq!(tables.num_rows(), 1);
        assert_eq!(tables.schema().field(1).name(), "table_name");
        let wal = wal_tables(&db);
        assert_eq!(wal.num_rows(), 1);
    }
}
