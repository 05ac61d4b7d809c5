//! `materialized_views()`: one row per materialized view with its refresh settings and state,
//! in QuestDB 9.3.4's columns.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::SessionContext;
use sundial_sql::Refresh;
use sundial_storage::{Database, TableKind};

use super::{definition, slot, stride_text};

/// One view's row.
#[derive(Default)]
struct Row {
    name: String,
    refresh_type: &'static str,
    base: Option<String>,
    start_ns: Option<i64>,
    finish_ns: Option<i64>,
    sql: Option<String>,
    dir: String,
    invalid: Option<String>,
    status: &'static str,
    refresh_txn: Option<i64>,
    base_txn: Option<i64>,
    timer_zone: Option<String>,
    timer_interval: i32,
    timer_unit: Option<String>,
    period_length: i32,
    period_length_unit: Option<String>,
    period_delay: i32,
    period_delay_unit: Option<String>,
}

fn rows(db: &Database) -> Vec<Row> {
    let mut out = Vec::new();
    for table in db.tables() {
        let snapshot = table.snapshot();
        let meta = snapshot.meta();
        if meta.kind != TableKind::MaterializedView {
            continue;
        }
        let mut row = Row {
            name: meta.name.clone(),
            dir: table
                .path()
                .file_name()
                .map_or_else(String::new, |d| d.to_string_lossy().into_owned()),
            ..Row::default()
        };
        let slot = slot(&table);
        let refreshing = slot.is_refreshing();
        let log = slot.log();
        row.start_ns = log.last_start_ns;
        row.finish_ns = log.last_finish_ns;
        match definition(meta) {
            Ok(def) => {
                row.refresh_type = match &def.view.refresh {
                    Refresh::Immediate => "immediate",
                    Refresh::Manual => "manual",
                    Refresh::Every { .. } => "timer",
                    Refresh::Period { .. } => "period",
                };
                if let Refresh::Every {
                    every, time_zone, ..
                } = &def.view.refresh
                {
                    row.timer_interval = i32::try_from(every.count).unwrap_or(i32::MAX);
                    row.timer_unit = Some(unit_of(&stride_text(*every)));
                    row.timer_zone.clone_from(time_zone);
                }
                if let Refresh::Period { length, delay, .. } = &def.view.refresh {
                    row.period_length = i32::try_from(length.count).unwrap_or(i32::MAX);
                    row.period_length_unit = Some(unit_of(&stride_text(*length)));
                    if let Some(delay) = delay {
                        row.period_delay = i32::try_from(delay.count).unwrap_or(i32::MAX);
                        row.period_delay_unit = Some(unit_of(&stride_text(*delay)));
                    }
                }
                row.base_txn = db
                    .table(&def.base)
                    .map(|b| i64::try_from(b.snapshot().seq()).unwrap_or(i64::MAX));
                row.base = Some(def.base);
                row.sql = Some(def.view.query);
            }
            Err(e) => row.invalid = Some(e.to_string()),
        }
        let state = snapshot.refresh();
        row.refresh_txn = state.map(|s| i64::try_from(s.base_seq).unwrap_or(i64::MAX));
        if row.invalid.is_none() {
            row.invalid = state.and_then(|s| s.invalid.clone());
        }
        if row.finish_ns.is_none() {
            row.finish_ns = state.map(|s| s.refreshed_at_ns);
        }
        row.status = if row.invalid.is_some() {
            "invalid"
        } else if refreshing {
            "refreshing"
        } else {
            "valid"
        };
        out.push(row);
    }
    out
}

/// The unit letter of a stride's text (`15m`: `m`).
fn unit_of(text: &str) -> String {
    text.trim_start_matches(|c: char| c.is_ascii_digit())
        .to_string()
}

/// The listing as one batch.
pub(crate) fn materialized_views(db: &Database) -> RecordBatch {
    let rows = rows(db);
    let ts = || DataType::Timestamp(TimeUnit::Nanosecond, None);
    let text = |f: &dyn Fn(&Row) -> Option<String>| -> ArrayRef {
        Arc::new(StringArray::from_iter(rows.iter().map(f)))
    };
    let fields = vec![
        Field::new("view_name", DataType::Utf8, false),
        Field::new("refresh_type", DataType::Utf8, true),
        Field::new("base_table_name", DataType::Utf8, true),
        Field::new("last_refresh_start_timestamp", ts(), true),
        Field::new("last_refresh_finish_timestamp", ts(), true),
        Field::new("view_sql", DataType::Utf8, true),
        Field::new("view_table_dir_name", DataType::Utf8, true),
        Field::new("invalidation_reason", DataType::Utf8, true),
        Field::new("view_status", DataType::Utf8, true),
        Field::new("refresh_period_hi", ts(), true),
        Field::new("refresh_base_table_txn", DataType::Int64, true),
        Field::new("base_table_txn", DataType::Int64, true),
        Field::new("refresh_limit", DataType::Int32, true),
        Field::new("refresh_limit_unit", DataType::Utf8, true),
        Field::new("timer_time_zone", DataType::Utf8, true),
        Field::new("timer_start", ts(), true),
        Field::new("timer_interval", DataType::Int32, true),
        Field::new("timer_interval_unit", DataType::Utf8, true),
        Field::new("period_length", DataType::Int32, true),
        Field::new("period_length_unit", DataType::Utf8, true),
        Field::new("period_delay", DataType::Int32, true),
        Field::new("period_delay_unit", DataType::Utf8, true),
    ];
    let n = rows.len();
    let columns: Vec<ArrayRef> = vec![
        text(&|r| Some(r.name.clone())),
        text(&|r| Some(r.refresh_type.to_string())),
        text(&|r| r.base.clone()),
        Arc::new(TimestampNanosecondArray::from_iter(
            rows.iter().map(|r| r.start_ns),
        )),
        Arc::new(TimestampNanosecondArray::from_iter(
            rows.iter().map(|r| r.finish_ns),
        )),
        text(&|r| r.sql.clone()),
        text(&|r| Some(r.dir.clone())),
        text(&|r| r.invalid.clone()),
        text(&|r| Some(r.status.to_string())),
        Arc::new(TimestampNanosecondArray::from(vec![None; n])),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.refresh_txn))),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.base_txn))),
        Arc::new(Int32Array::from(vec![0; n])),
        text(&|_| None),
        text(&|r| r.timer_zone.clone()),
        Arc::new(TimestampNanosecondArray::from(vec![None; n])),
        Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|r| r.timer_interval),
        )),
        text(&|r| r.timer_unit.clone()),
        Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|r| r.period_length),
        )),
        text(&|r| r.period_length_unit.clone()),
        Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|r| r.period_delay),
        )),
        text(&|r| r.period_delay_unit.clone()),
    ];
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .expect("columns match their fields")
}

/// The table function, answered when a statement is planned.
#[derive(Debug)]
struct MaterializedViews(Arc<Database>);

impl TableFunctionImpl for MaterializedViews {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        if !args.exprs().is_empty() {
            return Err(DataFusionError::Plan(
                "materialized_views() takes no arguments".into(),
            ));
        }
        let batch = materialized_views(&self.0);
        Ok(Arc::new(MemTable::try_new(
            batch.schema(),
            vec![vec![batch]],
        )?))
    }
}

pub(crate) fn register(ctx: &SessionContext, db: Arc<Database>) {
    ctx.register_udtf("materialized_views", Arc::new(MaterializedViews(db)));
}
