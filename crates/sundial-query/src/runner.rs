//! The seam between the engine and the statements built on running queries (views'
//! definitions, materialized views' refreshes): what those need of the engine, which the
//! engine provides, so that they sit below it and never name it.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use datafusion::logical_expr::LogicalPlan;
use sundial_storage::{Database, Table};

use crate::error::{QueryError, Result};

/// Plans and runs queries through the dialect, over one database.
#[async_trait]
pub(crate) trait Runner: Send + Sync {
    fn db(&self) -> &Arc<Database>;

    /// Plans a query (SELECT ...) through the dialect: the plan and the designated timestamp
    /// of its result, when the dialect knows it.
    async fn plan_query(&self, sql: &str) -> Result<(LogicalPlan, Option<String>)>;

    /// Runs a plan [`Runner::plan_query`] made, collecting its rows.
    async fn collect_plan(&self, plan: LogicalPlan) -> Result<Vec<RecordBatch>>;

    /// The instant SQL text (`'2025-01-01'`, `now()`) stands for, in nanoseconds.
    async fn timestamp_of(&self, sql: &str) -> Result<i64>;

    /// Forgets plans kept for reuse and tables the ingestion sinks hold: a table or view was
    /// created or dropped.
    fn catalog_changed(&self);

    /// A table (of any kind) by name, or the error saying it does not exist.
    fn table_or_error(&self, name: &str) -> Result<Arc<Table>> {
        self.db().table(name).ok_or_else(|| {
            QueryError::Storage(sundial_storage::StorageError::NotFound(format!(
                "table '{name}' does not exist"
            )))
        })
    }
}

/// Runs `f` on the blocking pool (storage waits for writers and may fsync).
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| crate::error::internal(format!("blocking task failed: {e}")))?
}
