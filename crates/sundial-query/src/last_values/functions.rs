//! The table functions of last-value caches: `last_cache('table'[, 'cache'])` reads a cache
//! (InfluxDB 3's name; the only way to read an `IGNORE NULLS` cache), and
//! `last_value_caches()` lists them with their size and state.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::Expr;
use sundial_storage::Database;

use super::LastValues;

/// `last_cache('table'[, 'cache'])`: the cache's rows, caught up to the table's newest commit
/// when the statement is planned.
#[derive(Debug)]
struct LastCache {
    db: Arc<Database>,
    caches: Arc<LastValues>,
}

impl TableFunctionImpl for LastCache {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let texts = args
            .exprs()
            .iter()
            .map(|e| match e {
                Expr::Literal(
                    ScalarValue::Utf8(Some(s))
                    | ScalarValue::LargeUtf8(Some(s))
                    | ScalarValue::Utf8View(Some(s)),
                    _,
                ) => Ok(s.clone()),
                _ => Err(usage()),
            })
            .collect::<Result<Vec<_>>>()?;
        let (table_name, cache) = match texts.as_slice() {
            [t] => (t, None),
            [t, c] => (t, Some(c.as_str())),
            _ => return Err(usage()),
        };
        let table = self.db.table(table_name).ok_or_else(|| {
            DataFusionError::Plan(format!("last_cache: table '{table_name}' does not exist"))
        })?;
        let slot = self
            .caches
            .named(&table, cache)
            .map_err(DataFusionError::from)?;
        let snapshot = table.snapshot();
        let Some((meta, rows)) = self
            .caches
            .rows(&slot, &table, &snapshot)
            .map_err(DataFusionError::from)?
        else {
            return Err(DataFusionError::Execution(format!(
                "last value cache '{}' of '{}' failed (see last_value_caches()); LATEST ON \
                 reads the table instead",
                slot.name(),
                table.name()
            )));
        };
        let schema = meta.arrow_schema();
        let rows = RecordBatch::try_new(schema.clone(), rows.columns().to_vec())?;
        Ok(Arc::new(MemTable::try_new(schema, vec![vec![rows]])?))
    }
}

fn usage() -> DataFusionError {
    DataFusionError::Plan(
        "last_cache takes a table name and optionally a cache name, as text: \
         last_cache('cpu') or last_cache('cpu', 'by_host')"
            .into(),
    )
}

/// `last_value_caches()`: one row per cache.
#[derive(Debug)]
struct Listing {
    db: Arc<Database>,
    caches: Arc<LastValues>,
}

impl TableFunctionImpl for Listing {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        if !args.exprs().is_empty() {
            return Err(DataFusionError::Plan(
                "last_value_caches() takes no arguments".into(),
            ));
        }
        let infos = self.caches.listing(&self.db);
        let text = |f: &dyn Fn(&super::SlotInfo) -> Option<String>| -> ArrayRef {
            Arc::new(StringArray::from_iter(infos.iter().map(f)))
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("table_name", DataType::Utf8, false),
            Field::new("cache_name", DataType::Utf8, false),
            Field::new("key_columns", DataType::Utf8, false),
            Field::new("ignore_nulls", DataType::Boolean, false),
            Field::new("status", DataType::Utf8, false),
            Field::new("keys", DataType::Int64, false),
            Field::new("memory_bytes", DataType::Int64, false),
            Field::new("table_txn", DataType::Int64, true),
            Field::new("failure", DataType::Utf8, true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            text(&|i| Some(i.table.clone())),
            text(&|i| Some(i.name.clone())),
            text(&|i| Some(i.key_columns.join(","))),
            Arc::new(BooleanArray::from_iter(
                infos.iter().map(|i| Some(i.ignore_nulls)),
            )),
            text(&|i| {
                Some(
                    match (&i.failed, i.seq) {
                        (Some(_), _) => "failed",
                        (None, Some(_)) => "ready",
                        (None, None) => "empty",
                    }
                    .to_string(),
                )
            }),
            Arc::new(Int64Array::from_iter_values(
                infos.iter().map(|i| i.keys as i64),
            )),
            Arc::new(Int64Array::from_iter_values(
                infos.iter().map(|i| i.bytes as i64),
            )),
            Arc::new(Int64Array::from_iter(
                infos.iter().map(|i| i.seq.map(|s| s as i64)),
            )),
            text(&|i| i.failed.clone()),
        ];
        let batch = RecordBatch::try_new(schema.clone(), columns)?;
        Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
    }
}

pub(crate) fn register(ctx: &SessionContext, db: Arc<Database>, caches: Arc<LastValues>) {
    ctx.register_udtf(
        "last_cache",
        Arc::new(LastCache {
            db: db.clone(),
            caches: caches.clone(),
        }),
    );
    ctx.register_udtf("last_value_caches", Arc::new(Listing { db, caches }));
}
