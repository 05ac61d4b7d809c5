//! # sundial-sql
//!
//! Sundial's SQL dialect: from SQL text to statements DataFusion can plan, and nothing else.
//! It executes nothing and knows no engine: what it must know of tables and of the
//! PostgreSQL catalog it asks through [`Catalog`] and [`SystemCatalog`].
//!
//! ```text
//!  SQL text ─statement::split_statements─▶ one statement's text
//!     │
//!     ├─statement::parse─▶ Command (Sundial's own DDL, SHOW, ...)        ─▶ engine runs it
//!     │
//!     └─limits::check (bounds on the text, before any tree is built)
//!        ─questdb::extract─▶ text with markers for QuestDB's clauses + Clauses
//!        ─(the engine's parser)─▶ AST
//!        ─rewrite─▶ result_timestamp (which column QuestDB calls "timestamp")
//!                   questdb::name_unaliased_items (QuestDB's names of unaliased items, as written)
//!                   compat   (PostgreSQL idioms drivers and tools send; empty: SELECTs
//!                            over catalog relations that never have rows)
//!                   questdb  (SAMPLE BY, LATEST ON, LIMIT -n, intervals, ASOF JOIN, ...)
//!                   gapfill  (time_bucket_gapfill, date_bin_gapfill, locf, interpolate:
//!                            onto SAMPLE BY's FILL, over the WHERE questdb left standard)
//!        ─▶ standard SQL AST ─▶ engine plans it
//! ```
//!
//! Rewrites are AST to AST and build nodes (see [`ast`]), never text to parse again; the one
//! text pass, [`questdb::extract`], works on tokens because QuestDB's clauses are not SQL the
//! parser knows. [`names`] holds the names of the engine functions the rewrites call.
//! [`copy`] parses PostgreSQL's `COPY ... FROM STDIN / TO STDOUT` for the wire protocol;
//! [`users`] parses user management (`CREATE USER`, `GRANT`, ...), [`last_value_cache`] the
//! last-value caches' DDL. Both Sundial's own
//! statements and user management are parsed over one token cursor (`tokens`).

pub mod array_text;
pub mod ast;
pub mod compat;
pub mod copy;
mod empty;
mod error;
mod from_functions;
mod gapfill;
pub mod last_value_cache;
pub mod limits;
pub mod names;
pub mod questdb;
mod repeats;
pub mod result_timestamp;
pub mod rollup;
pub mod statement;
mod system_catalog;
mod template;
mod tokens;
pub mod users;
pub mod views;

pub use compat::SystemCatalog;
pub use error::{Result, SqlError, lower_first, parser_message};
pub use last_value_cache::CreateLastValueCache;
pub use questdb::{Catalog, Clauses};
pub use sqlparser;
pub use statement::{Command, CreateTable, Statement, create_table_sql, parse, split_statements};
pub use users::{Password, TokenType, UserCommand, UserRole};
pub use views::{AlterView, CreateMaterializedView, CreateView, Refresh, RefreshHow};

/// What [`rewrite`] learned of a statement before rewriting it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rewritten {
    /// How many parameters (`$1` ... `$n`) the statement had as written (see
    /// [`compat::rewrite`]).
    pub parameters: usize,
    /// The result column that is its table's designated timestamp, if any.
    pub designated_timestamp: Option<String>,
    /// The rewrite depends on more than the text: on materialized views' freshness (see
    /// [`rollup`]), so the text's shape must not stand for its rewrite.
    pub volatile: bool,
}

/// Rewrites a parsed statement whose QuestDB clauses [`questdb::extract`] took out into
/// standard SQL with the same meaning.
pub fn rewrite(
    statement: &mut sqlparser::ast::Statement,
    clauses: &Clauses,
    tables: &dyn Catalog,
    system: &dyn SystemCatalog,
) -> Result<Rewritten> {
    let designated_timestamp = if *clauses == Clauses::default() {
        result_timestamp::designated_timestamp(tables, statement)
    } else {
        None
    };
    questdb::name_unaliased_items(statement, tables);
    let parameters = compat::rewrite(statement, system);
    from_functions::rewrite(statement);
    questdb::quote_meta_columns(statement);
    let (volatile, routed) = rollup::rewrite(statement, clauses, tables)?;
    let clauses = if routed { &Clauses::default() } else { clauses };
    questdb::rewrite(statement, clauses, tables)?;
    gapfill::rewrite(statement, tables)?;
    Ok(Rewritten {
        parameters,
        designated_timestamp,
        volatile,
    })
}
