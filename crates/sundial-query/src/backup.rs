//! `BACKUP DATABASE TO '/absolute/dir'`: runs `Database::backup` off the query runtime and
//! answers one row: `path`, `tables`, `rows`, `bytes`, `duration_ms`.
//!
//! The path rules (absolute, outside the data directory, new or an empty directory) are the
//! storage layer's, so `sundial backup` offline and the statement refuse the same targets with
//! the same messages. The statement holds no table's writer: ingestion goes on while it runs.
//!
//! It needs the admin role (see `access`): it writes only a copy of the database, only into a
//! new or empty directory, but on the server's file system.

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use sundial_storage::{BackupReport, Database};

use crate::error::{QueryError, Result};

/// The columns of the statement's one row.
pub(crate) fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("tables", DataType::Int64, false),
        Field::new("rows", DataType::Int64, false),
        Field::new("bytes", DataType::Int64, false),
        Field::new("duration_ms", DataType::Int64, false),
    ]))
}

/// Takes the backup on the blocking pool (it reads and writes files for as long as the data
/// takes to copy) and describes it.
/// Backs up every table, then the users (when the engine has a store): a backup cut short
/// between the two holds the tables and no users, and the built-in admin still logs in.
pub(crate) async fn run(
    db: Arc<Database>,
    to: String,
    users: Option<Arc<sundial_auth::Users>>,
) -> Result<RecordBatch> {
    let report = tokio::task::spawn_blocking(move || {
        let report = db.backup(&PathBuf::from(to))?;
        if let Some(users) = users {
            users.copy_to(&report.path)?;
        }
        Ok::<_, QueryError>(report)
    })
    .await
    .map_err(|e| crate::error::internal(format!("the backup task failed: {e}")))??;
    describe(&report)
}

fn describe(report: &BackupReport) -> Result<RecordBatch> {
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from(vec![report.path.display().to_string()])),
            Arc::new(Int64Array::from(vec![n(report.tables as u64)])),
            Arc::new(Int64Array::from(vec![n(report.rows)])),
            Arc::new(Int64Array::from(vec![n(report.bytes)])),
            Arc::new(Int64Array::from(vec![
                n(report.duration.as_millis() as u64),
            ])),
        ],
    )
    .map_err(|e| QueryError::from(datafusion::error::DataFusionError::from(e)))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;
    use sundial_storage::{Durability, StorageOptions};

    use crate::Engine;

    #[tokio::test(flavor = "multi_thread")]
    async fn backup_database_answers_one_row_and_the_copy_opens() {
        let dir = tempfile::tempdir().unwrap();
        let options = || StorageOptions {
            durability: Durability::None,
            ..StorageOptions::default()
        };
        let db = sundial_storage::Database::open(dir.path().join("data"), options()).unwrap();
        let engine = Engine::new(db).unwrap();
        let to = dir.path().join("copy");
        let out = engine
            .execute(&format!(
                "CREATE TABLE t (x LONG); INSERT INTO t VALUES (1), (2), (3); \
                 BACKUP DATABASE TO '{}'",
                to.display()
            ))
            .await
            .unwrap();
        let batch = &out[2].batches[0];
        assert_eq!(batch.num_rows(), 1);
        assert_eq!(batch.schema(), super::schema());
        let number = |i: usize| batch.column(i).as_primitive::<Int64Type>().value(0);
        assert_eq!((number(1), number(2)), (1, 3));
        assert!(number(3) > 0);
        for bad in ["BACKUP DATABASE TO 'relative'", "BACKUP DATABASE TO ''"] {
            let e = engine.execute(bad).await.unwrap_err();
            assert!(e.to_string().contains("absolute path"), "{e}");
        }
        let e = engine
            .execute(&format!("BACKUP DATABASE TO '{}'", to.display()))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("not empty"), "{e}");
        let copy = sundial_storage::Database::open(&to, options()).unwrap();
        assert_eq!(copy.table("t").unwrap().snapshot().row_count(), 3);
    }
}
