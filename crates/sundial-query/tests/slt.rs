//! Runs every `tests/slt/*.slt` sqllogictest file against a fresh database, then again with
//! every other sealed partition of every table converted to Parquet before each query: every
//! query must answer the same over a table whose partitions alternate native and Parquet.
//! `SUNDIAL_SLT_COMPLETE=1 cargo test -p sundial-query --test slt` rewrites the expected results.

use std::path::PathBuf;

use datafusion::arrow::array::Array;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType, Runner};
use sundial_query::{Engine, QueryError};
use sundial_storage::{ConvertTo, Database, Durability, ParquetOptions, StorageOptions};

struct SundialDb {
    engine: Engine,
    db: std::sync::Arc<Database>,
    /// Convert every other sealed partition to Parquet before each query.
    mixed: bool,
    _dir: tempfile::TempDir,
}

#[derive(Debug)]
struct SltError(QueryError);

impl std::fmt::Display for SltError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for SltError {}

impl SundialDb {
    fn new(mixed: bool) -> SundialDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let options = StorageOptions {
            durability: Durability::None,
            ..StorageOptions::default()
        };
        let db = Database::open(dir.path(), options).expect("open database");
        let mut engine = Engine::new(db.clone()).expect("engine");
        // For users.slt: user management runs against a store of the test's own.
        engine.set_users(sundial_query::Users::in_memory(None));
        SundialDb {
            engine,
            db,
            mixed,
            _dir: dir,
        }
    }

    /// Converts the first, third, ... partition of every table partitioned by time to Parquet
    /// (never the newest, which takes rows in order), in row groups of 100 rows so that reads
    /// cross row groups.
    fn alternate_formats(&self) {
        let options = ParquetOptions {
            row_group_rows: 100,
            ..ParquetOptions::default()
        };
        for table in self.db.tables() {
            let snapshot = table.snapshot();
            if snapshot.meta().timestamp_index.is_none() {
                continue;
            }
            let mut keys: Vec<i64> = snapshot.partitions().iter().map(|p| p.key).collect();
            keys.dedup();
            keys.pop();
            for key in keys.into_iter().step_by(2) {
                let converted = table
                    .convert_partition(key, ConvertTo::Parquet, &options)
                    .unwrap_or_else(|e| panic!("converting a partition of {}: {e}", table.name()));
                if converted {
                    CONVERTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
    }
}

/// Partitions converted by `alternate_formats`, so the mixed run can tell that it tested.
static CONVERTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Whether a statement only reads (so that converting partitions before it changes no answer).
fn is_query(sql: &str) -> bool {
    let word = sql.split_whitespace().next().unwrap_or("");
    ["SELECT", "WITH", "EXPLAIN", "DECLARE", "SHOW"]
        .iter()
        .any(|w| word.eq_ignore_ascii_case(w))
}

fn column_type(t: &DataType) -> DefaultColumnType {
    match t {
        t if t.is_integer() => DefaultColumnType::Integer,
        t if t.is_floating() => DefaultColumnType::FloatingPoint,
        _ => DefaultColumnType::Text,
    }
}

#[async_trait::async_trait]
impl AsyncDB for SundialDb {
    type Error = SltError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SltError> {
        if self.mixed && is_query(sql) {
            self.alternate_formats();
        }
        let mut results = self.engine.execute(sql).await.map_err(SltError)?;
        let Some(last) = results.pop() else {
            return Ok(DBOutput::StatementComplete(0));
        };
        if last.tag.is_some() {
            return Ok(DBOutput::StatementComplete(last.rows_affected.unwrap_or(0)));
        }
        let types = last
            .schema
            .fields()
            .iter()
            .map(|f| column_type(f.data_type()))
            .collect();
        let options = FormatOptions::default().with_null("NULL");
        let mut rows = Vec::new();
        for batch in &last.batches {
            let formatters: Vec<_> = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref() as &dyn Array, &options))
                .collect::<Result<_, _>>()
                .map_err(|e| SltError(QueryError::from(e)))?;
            for row in 0..batch.num_rows() {
                rows.push(
                    formatters
                        .iter()
                        .map(|f| match f.value(row).to_string() {
                            s if s.is_empty() => "(empty)".to_string(),
                            s => s,
                        })
                        .collect(),
                );
            }
        }
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "sundial"
    }
}

fn slt_files() -> Vec<PathBuf> {
    // Cargo sets the variable when it runs the test too: the crate as it is now, wherever the
    // binary was built from.
    let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let dir = crate_dir.join("tests/slt");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/slt")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictest_files() {
    run_files(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictest_files_over_alternating_parquet_partitions() {
    if std::env::var("SUNDIAL_SLT_COMPLETE").is_ok() {
        return;
    }
    run_files(true).await;
    let converted = CONVERTED.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("{converted} partitions converted to Parquet");
    assert!(
        converted >= 15,
        "only {converted} partitions were converted"
    );
}

async fn run_files(mixed: bool) {
    let complete = std::env::var("SUNDIAL_SLT_COMPLETE").is_ok();
    let mut failures = Vec::new();
    let files = slt_files();
    assert!(!files.is_empty(), "no .slt files found");
    for file in files {
        // That file converts partitions itself, and shows their formats.
        if mixed && file.ends_with("parquet.slt") {
            continue;
        }
        let mut runner =
            Runner::new(move || async move { Ok::<_, SltError>(SundialDb::new(mixed)) });
        if complete {
            runner
                .update_test_file(
                    &file,
                    " ",
                    sqllogictest::default_validator,
                    sqllogictest::default_normalizer,
                    sqllogictest::default_column_validator,
                )
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        } else if let Err(e) = runner.run_file_async(&file).await {
            failures.push(format!("{}: {e}", file.display()));
        }
    }
    let mode = if mixed {
        " over alternating Parquet partitions"
    } else {
        ""
    };
    assert!(
        failures.is_empty(),
        "{} file(s) failed{mode}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
