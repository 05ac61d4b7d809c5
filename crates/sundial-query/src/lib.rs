//! # sundial-query
//!
//! Sundial's query engine: runs SQL over Sundial's tables on Apache DataFusion, with the
//! dialect (`sundial-sql`) in front and Sundial's own operators, plan caches and point-lookup
//! path around DataFusion's planner. Layers, each using only those below it:
//!
//! ```text
//!  engine        the facade: Engine::run / prepare / run_prepared, sessions, Sundial's own
//!     │          commands (CREATE/ALTER/DROP TABLE, SHOW, ...), the kept-plan cache
//!  plans         text shapes ─▶ statement shapes ─▶ kept physical plans; point lookups
//!     │
//!  asof, latest  planner extensions: ASOF/LT/SPLICE JOIN (analyzer rule, logical node,
//!  shared        planner); LATEST ON over SYMBOL keys (analyzer rule to a LatestTable
//!  distinct_keys scan); subqueries read more than once computed once (shared); DISTINCT
//!     │          keys from a last-value cache (distinct_keys)
//!  permissions   plan checks: file writes, session settings; access: the role each
//!     │          statement needs, checked at every run (users: CREATE USER, GRANT, ...);
//!     │          column_origin: the table and column each result column reads
//!     │
//!  provider      DataFusion's view of tables: schema + table providers, the INSERT sink
//!     │
//!  exec          physical operators: scan, index scan, LATEST, bucket aggregate, ASOF
//!     │          merge, cooperative yielding, rebinding kept plans to a run's values
//!  snapshot      the storage seam: newest snapshot of a planned table, symbol lookup
//!  key_index     per-partition hash indexes of keys, for point lookups and index scans
//!  last_values   last-value caches: the newest row per key, kept up with the commits
//!  table_keys    whole-table hash indexes of integer keys: a point lookup probes once
//!  functions     QuestDB's time functions (date_format: its timestamp patterns;
//!                fill_linear: SAMPLE BY's FILL(LINEAR) as a window function);
//!                bounded: functions that check sizes first
//!  error, text   the error type; date and time text for the wire protocols
//! ```
//!
//! `sundial-sql` turns QuestDB's and PostgreSQL's SQL into standard SQL without executing
//! anything; `sundial-pgcatalog` serves PostgreSQL's system catalog. `docs/query.md` is the
//! design: the three ways Sundial extends DataFusion, the caches, the point-lookup path.
//!
//! What no statement may do is bounded in four places: `sundial_sql::limits` checks a
//! statement's shape on its text before anything builds a tree from it (54001/54011);
//! `permissions` refuses file writes outside `--sql-file-dir` and SETs of a shared engine;
//! `bounded` makes functions that build as much as an argument says check the size first
//! (53200); `exec::cooperative` makes every operator's output yield, so that cancel,
//! timeouts and hang-ups reach any plan.
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

mod access;
mod asof;
mod backup;
mod bad_value;
mod bounded;
mod column_origin;
mod date_format;
mod dialect;
mod distinct_keys;
mod engine;
mod error;
mod exec;
mod fill_linear;
mod functions;
mod key_index;
mod last_values;
mod latest;
mod marker;
mod matview;
mod memory_use;
mod messages;
mod meta;
mod parameter_types;
mod partitions;
mod permissions;
mod pg_results;
mod plans;
mod provider;
mod result_names;
mod runner;
mod running;
mod session_statements;
mod shared;
mod snapshot;
mod table_keys;
pub mod text;
mod users;
mod view_def;
mod views;

pub use exec::scan;
pub use sundial_sql::limits;

/// PostgreSQL's COPY statements, parsed by the dialect, with the engine's error type.
pub mod copy {
    pub use sundial_sql::copy::{
        CopyDirection, CopyFormat, CopyOptions, CopySourceSpec, CopyStatement,
    };

    /// `Some` for PostgreSQL's `COPY ... FROM STDIN` / `TO STDOUT` (see
    /// [`sundial_sql::copy::parse_copy`]).
    pub fn parse_copy(sql: &str) -> crate::Result<Option<CopyStatement>> {
        Ok(sundial_sql::copy::parse_copy(sql)?)
    }
}

pub use column_origin::of_field as pg_column_origin;
pub use datafusion::execution::SendableRecordBatchStream;
pub use datafusion::scalar::ScalarValue;
pub use engine::{
    Collected, Engine, INSERT_PENDING_ROWS_MAX, Output, Prepared, SessionStatements, collect,
    conform,
};
pub use error::{QueryError, Result, StatementFault};
pub use memory_use::{ServerMemory, query_memory_in_use, spill_disk_manager};
pub use permissions::Settings;
pub use plans::lookup::LookupRows;
pub use provider::{InsertPath, SundialSchema, SundialSink, SundialTable};
pub use running::{queries_running, queries_waiting};
pub use session_statements::{
    Deallocate, SESSION_STATEMENTS_MAX, parse_deallocate, unknown_statement,
};
pub use sundial_auth::{Caller, Role, Users};
pub use sundial_pgcatalog::{
    PG_TYPE_KEY, SERVER_VERSION, pg_array_element, pg_setting, pg_type_for_arrow,
    pg_type_for_field, pg_type_of, table_oid, with_pg_type,
};
pub use sundial_sql::array_text;
pub use sundial_sql::names::{CATALOG, SCHEMA};
pub use sundial_sql::{Command, CreateTable, Statement, parse, split_statements};
