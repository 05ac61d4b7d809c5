//! # sundial-query
//!
//! The thin seam between Sundial's storage and Apache DataFusion. It turns each table into a
//! DataFusion `TableProvider` and runs Sundial's own statements (QuestDB-style DDL, SHOW,
//! DESCRIBE) itself; everything else is DataFusion's SQL.
//!
//! ```text
//!  SQL text ──split──▶ statement ──ddl::parse──▶ Command::CreateTable / Alter / Show ... ─▶ storage
//!                                      └──────▶ Command::Sql ─▶ questdb (SAMPLE BY, LATEST ON,
//!                                                   │  LIMIT -n, intervals) + compat (PostgreSQL)
//!                                                   ▼  rewrites ─▶ plan_cache (a query's
//!                                                   │  filter literals become $n; one plan
//!                                                   │  per shape) ─▶ DataFusion planner
//!                                                   │  (reuse: the physical plan is kept and
//!                                                   │   bound to each run's values)
//!                                                   │ scan:   SundialTable ─▶ SundialScanExec
//!                                                   │          (ts pruning, frames on all cores,
//!                                                   │           ts order, reverse for ts DESC)
//!                                                   │ latest: latest_rows ─▶ LatestExec (backward)
//!                                                   │ ASOF/LT JOIN: asof rule ─▶ AsofJoinExec (merge)
//!                                                   │ SAMPLE BY / time_bucket aggregates:
//!                                                   │   BucketAggregateExec (in scan order, no hash)
//!                                                   └ insert: SundialSink ─▶ TableWriter (1 commit)
//! ```
//!
//! What no statement may do is bounded in four places: `limits` checks a statement's shape on
//! its text before anything builds a tree from it (54001/54011); `permissions` refuses file
//! writes outside `--sql-file-dir` and SETs of a shared engine; `bounded` makes functions
//! that build as much as an argument says check the size first (53200); `cooperative` makes
//! every operator's output yield, so that cancel, timeouts and hang-ups reach any plan.
//!
//! Every query plans against one snapshot per table, so it sees a consistent table however
//! many commits land while it runs. A plan kept for later (a prepared statement, a query
//! shape's shared plan, its kept physical plan) reads each table's newest snapshot whenever
//! it runs.

/// `ExecutionPlan::with_new_children`, which DataFusion still requires though deprecated, as
/// the `replace_children` call (recomputing properties) it stands for.
macro_rules! with_new_children_recomputing {
    () => {
        fn with_new_children(
            self: std::sync::Arc<Self>,
            children: Vec<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
        ) -> datafusion::error::Result<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>>
        {
            use datafusion::physical_plan::execution_plan::{
                ChildrenPropertiesMode, ReplaceChildrenOptions,
            };
            self.replace_children(
                children,
                ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
            )
        }
    };
}

mod asof;
mod bounded;
mod bucket_agg;
mod compat;
mod cooperative;
pub mod copy;
mod ddl;
mod engine;
mod error;
mod index_scan;
mod key_index;
mod latest;
pub mod limits;
mod lookup;
mod permissions;
mod pg_catalog;
mod plan_cache;
mod provider;
mod questdb;
mod result_timestamp;
mod reuse;
pub mod scan;
pub mod text;
mod text_shape;

pub use datafusion::execution::SendableRecordBatchStream;
pub use datafusion::scalar::ScalarValue;
pub use ddl::{Command, CreateTable, Statement, parse, split_statements};
pub use engine::{
    CATALOG, Collected, Engine, INSERT_PENDING_ROWS_MAX, Output, Prepared, SCHEMA, collect, conform,
};
pub use error::{QueryError, Result};
pub use permissions::Settings;
pub use pg_catalog::{SERVER_VERSION, pg_setting, pg_type_for_arrow, pg_type_of, table_oid};
pub use provider::{InsertPath, SundialSchema, SundialSink, SundialTable};
