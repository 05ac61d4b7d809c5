//! Partitions as rows: `SHOW PARTITIONS FROM t` and the table function
//! `table_partitions('t')` (QuestDB's), which selects and filters them like any table.
//!
//! ```text
//!   Snapshot::partitions() ─group parts by key─▶ one row per partition
//!     name, time range, rows, bytes on disk, format (native | parquet | mixed), location
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{
    BooleanArray, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::Expr;
use datafusion::scalar::ScalarValue;
use sundial_storage::{Database, PartFormat, Table};

/// `SHOW PARTITIONS FROM t`: one row per partition, whatever its parts (see sundial-storage's
/// `merge.rs`), with QuestDB's columns and where and how the rows are kept.
pub(crate) fn show_partitions(table: &Table) -> RecordBatch {
    let snapshot = table.snapshot();
    let meta = snapshot.meta();
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, None);
    let schema = Arc::new(Schema::new(vec![
        Field::new("index", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("minTimestamp", ts.clone(), true),
        Field::new("maxTimestamp", ts, true),
        Field::new("numRows", DataType::Int64, false),
        Field::new("diskSize", DataType::Int64, false),
        Field::new("isParquet", DataType::Boolean, false),
        Field::new("parquetFileSize", DataType::Int64, true),
        Field::new("format", DataType::Utf8, false),
        Field::new("parts", DataType::Int64, false),
        Field::new("location", DataType::Utf8, false),
    ]));
    let has_ts = meta.timestamp_index.is_some();
    let (mut names, mut min_ts, mut max_ts, mut rows) = (vec![], vec![], vec![], vec![]);
    let (mut disk, mut is_parquet, mut parquet_bytes) = (vec![], vec![], vec![]);
    let (mut formats, mut part_counts, mut locations) = (vec![], vec![], vec![]);
    let mut first = 0;
    for parts in snapshot.partitions().chunk_by(|a, b| a.key == b.key) {
        let indexes = first..first + parts.len();
        first += parts.len();
        names.push(meta.partition_by.dir_name(parts[0].key));
        min_ts.push(has_ts.then_some(parts[0].min_ts));
        max_ts.push(has_ts.then_some(parts[parts.len() - 1].max_ts));
        rows.push(parts.iter().map(|p| p.row_count as i64).sum::<i64>());
        disk.push(
            indexes
                .clone()
                .map(|i| snapshot.part_disk_bytes(i).unwrap_or(0) as i64)
                .sum::<i64>(),
        );
        let parquet: Vec<u64> = parts
            .iter()
            .filter_map(|p| match p.format {
                PartFormat::Parquet { file_bytes, .. } => Some(file_bytes),
                PartFormat::Native => None,
            })
            .collect();
        is_parquet.push(parquet.len() == parts.len());
        parquet_bytes.push((!parquet.is_empty()).then(|| parquet.iter().sum::<u64>() as i64));
        formats.push(match parquet.len() {
            0 => "native",
            n if n == parts.len() => "parquet",
            _ => "mixed",
        });
        part_counts.push(parts.len() as i64);
        let places: Vec<String> = indexes
            .filter_map(|i| snapshot.part_location(i).ok())
            .collect();
        locations.push(places.join(", "));
    }
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(0..names.len() as i64)),
            Arc::new(StringArray::from(names)),
            Arc::new(TimestampNanosecondArray::from(min_ts)),
            Arc::new(TimestampNanosecondArray::from(max_ts)),
            Arc::new(Int64Array::from(rows)),
            Arc::new(Int64Array::from(disk)),
            Arc::new(BooleanArray::from(is_parquet)),
            Arc::new(Int64Array::from(parquet_bytes)),
            Arc::new(StringArray::from(formats)),
            Arc::new(Int64Array::from(part_counts)),
            Arc::new(StringArray::from(locations)),
        ],
    )
    .unwrap_or_else(|_| RecordBatch::new_empty(Arc::new(Schema::empty())))
}

/// `table_partitions('t')`: the rows of `SHOW PARTITIONS FROM t`, as a table.
#[derive(Debug)]
struct TablePartitions(Arc<Database>);

impl TableFunctionImpl for TablePartitions {
    fn call_with_args(
        &self,
        args: TableFunctionArgs,
    ) -> datafusion::error::Result<Arc<dyn TableProvider>> {
        let name = match args.exprs() {
            [Expr::Literal(ScalarValue::Utf8(Some(name)), _)] => name.clone(),
            _ => {
                return Err(datafusion::error::DataFusionError::Plan(
                    "table_partitions takes one argument: a table name, as a string".into(),
                ));
            }
        };
        let table = self.0.table(&name).ok_or_else(|| {
            datafusion::error::DataFusionError::Plan(format!("table '{name}' does not exist"))
        })?;
        let batch = show_partitions(&table);
        Ok(Arc::new(MemTable::try_new(
            batch.schema(),
            vec![vec![batch]],
        )?))
    }
}

pub(crate) fn register(ctx: &SessionContext, db: Arc<Database>) {
    ctx.register_udtf("table_partitions", Arc::new(TablePartitions(db)));
}
