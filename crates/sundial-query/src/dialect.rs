//! The dialect in front of DataFusion: a statement's text parsed, rewritten from QuestDB's and
//! PostgreSQL's SQL into SQL DataFusion plans (`sundial_sql`), and planned with Sundial's
//! result names and plan checks. The engine plans every statement through here, and so does a
//! view's query whenever a statement reads the view (see `views`).

use datafusion::execution::context::SQLOptions;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::Statement as DFStatement;
use sundial_storage::{ColumnType, Database};

use crate::error::{QueryError, Result};

/// A statement parsed and rewritten (see [`parse`]).
pub(crate) struct Parsed {
    pub statement: DFStatement,
    /// Parameters in the SQL text (which may exceed the plan's: see
    /// `sundial_sql::compat::rewrite`).
    pub parameters: usize,
    /// The result's designated timestamp column, when the query keeps one (SAMPLE BY's
    /// bucket, a table's own).
    pub designated_timestamp: Option<String>,
    /// The rewrite depends on materialized views' freshness: the text's shape must not stand
    /// for it (see `sundial_sql::rollup`).
    pub volatile: bool,
}

/// What the dialect asks of the database: tables' columns and designated timestamps, and
/// which functions aggregate.
struct DialectCatalog<'a> {
    db: &'a Database,
    state: &'a SessionState,
    /// Whether SAMPLE BY queries may be answered from materialized views.
    rollups: bool,
}

impl DialectCatalog<'_> {
    /// The type of `column` of `table`, if both exist.
    fn column_type(&self, table: &str, column: &str) -> Option<ColumnType> {
        let t = self.db.table(table)?;
        let meta = t.meta();
        meta.column_index(column)
            .map(|i| meta.columns[i].column_type)
    }
}

impl sundial_sql::Catalog for DialectCatalog<'_> {
    fn designated_timestamp(&self, table: &str) -> Option<Option<String>> {
        let table = self.db.table(table)?;
        let meta = table.meta();
        Some(meta.timestamp_column().map(|c| c.name.clone()))
    }

    fn is_aggregate(&self, function: &str) -> bool {
        self.state.aggregate_functions().contains_key(function)
    }

    fn is_symbol(&self, table: &str, column: &str) -> bool {
        self.column_type(table, column) == Some(ColumnType::Symbol)
    }

    fn is_timestamp(&self, table: &str, column: &str) -> bool {
        self.column_type(table, column) == Some(ColumnType::Timestamp)
    }

    fn has_column(&self, table: &str, column: &str) -> bool {
        self.column_type(table, column).is_some()
    }

    fn is_floating(&self, table: &str, column: &str) -> bool {
        matches!(
            self.column_type(table, column),
            Some(ColumnType::Float | ColumnType::Double)
        )
    }

    fn rollups(&self, table: &str) -> Vec<sundial_sql::questdb::Rollup> {
        if !self.rollups {
            return Vec::new();
        }
        crate::view_def::rollups(self.db, table)
    }
}

/// Parses and rewrites one statement into SQL DataFusion plans (see `sundial_sql`); with
/// `rollups`, a SAMPLE BY query may read a materialized view of its table.
pub(crate) fn parse(
    sql: &str,
    db: &Database,
    state: &SessionState,
    rollups: bool,
) -> Result<Parsed> {
    let dialect = state.config().options().sql_parser.dialect;
    // Before anything builds a tree from the text (see `limits`).
    sundial_sql::limits::check(sql)?;
    let (sql, clauses) = sundial_sql::questdb::extract(sql)?;
    let mut statement = state
        .sql_to_statement(&sql, &dialect)
        .map_err(|e| QueryError::datafusion(e).at_end_if_unplaced(&sql))?;
    if let DFStatement::Statement(s) = &statement {
        sundial_sql::limits::check_select_lists(s)?;
    }
    let mut rewritten = sundial_sql::Rewritten::default();
    if let Some(s) = sql_statement(&mut statement) {
        let catalog = DialectCatalog { db, state, rollups };
        rewritten = sundial_sql::rewrite(s, &clauses, &catalog, &sundial_pgcatalog::Names)?;
    }
    Ok(Parsed {
        statement,
        parameters: rewritten.parameters,
        designated_timestamp: rewritten.designated_timestamp,
        volatile: rewritten.volatile,
    })
}

/// What a plan may do (see `permissions`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlanRules<'a> {
    /// Where `COPY ... TO 'file'` may write (none: nowhere).
    pub sql_file_dir: Option<&'a std::path::Path>,
    pub settings: crate::permissions::Settings,
}

/// Plans a parsed statement: DataFusion's plan with QuestDB's result names and PostgreSQL's
/// result types, checked against `rules`. DDL DataFusion would run itself is refused.
pub(crate) async fn plan(
    statement: DFStatement,
    state: &SessionState,
    rules: PlanRules<'_>,
) -> Result<LogicalPlan> {
    let plan = state.statement_to_plan(statement).await?;
    SQLOptions::new()
        .with_allow_ddl(false)
        .verify_plan(&plan)
        .map_err(|_| {
            QueryError::NotSupported(
                "this DDL statement; Sundial supports CREATE/ALTER/DROP/TRUNCATE/RENAME TABLE, \
                 CREATE/DROP VIEW and CREATE/REFRESH/DROP MATERIALIZED VIEW"
                    .into(),
            )
        })?;
    let plan = crate::result_names::questdb_names(plan)?;
    let plan = crate::pg_results::as_postgres(plan)?;
    crate::permissions::check(plan, rules.sql_file_dir, rules.settings)
}

/// The SQL statement to rewrite: the statement itself, or the one EXPLAIN explains.
fn sql_statement(
    statement: &mut DFStatement,
) -> Option<&mut datafusion::sql::sqlparser::ast::Statement> {
    match statement {
        DFStatement::Statement(s) => Some(s),
        DFStatement::Explain(explain) => sql_statement(&mut explain.statement),
        _ => None,
    }
}
