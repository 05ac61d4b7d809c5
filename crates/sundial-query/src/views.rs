//! Views: `CREATE [OR REPLACE] VIEW`, `DROP VIEW`, `SHOW CREATE VIEW`, and the planning of a
//! view's query whenever a statement reads the view.
//!
//! A view is a table of kind `View` in storage (see `sundial_storage::TableKind`): one
//! namespace with tables, created, dropped and backed up as they are, crash-safe through the
//! same transaction file. It stores no rows; its transaction holds the defining statement
//! and, as its columns, the query's result columns when it was created, which is what the
//! catalogs (`information_schema`, `pg_catalog`, `tables()`, SHOW COLUMNS) list.
//!
//! Reading a view plans its query through the dialect (`dialect`) like any statement's, and
//! DataFusion inlines the plan (`ViewTable`). Invariants:
//! * a view's query yields the columns the view lists, by name, or reading it fails, saying
//!   so (a table it reads lost a column): the catalogs never describe other columns;
//! * views nest at most [`VIEW_NESTING_MAX`] deep, which also ends a view that reads itself
//!   (possible by dropping a table and creating a view of its name over a view of it).

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::LogicalPlan;
use sundial_sql::{Command, CreateView};
use sundial_storage::{ColumnType, Database, PartitionBy, TableDef, TableKind, TableMeta};

use crate::dialect::{self, PlanRules};
use crate::error::{QueryError, Result};
use crate::provider::ViewSource;
use crate::runner::{Runner, blocking};

/// How deep views may read views.
pub(crate) const VIEW_NESTING_MAX: usize = 16;

tokio::task_local! {
    /// How many views deep the planning on this task is.
    static VIEW_DEPTH: usize;
}

/// Plans views' queries for the schema provider (see `provider::ViewSource`).
#[derive(Debug)]
pub(crate) struct ViewPlanner {
    db: Arc<Database>,
    /// The engine's session, which holds this planner (through its catalog): weak, so that
    /// neither keeps the other alive.
    state: Weak<parking_lot::RwLock<SessionState>>,
}

impl ViewPlanner {
    pub(crate) fn new(db: Arc<Database>, state: Weak<parking_lot::RwLock<SessionState>>) -> Self {
        ViewPlanner { db, state }
    }
}

#[async_trait]
impl ViewSource for ViewPlanner {
    async fn plan(&self, view: &TableMeta) -> DfResult<LogicalPlan> {
        let depth = VIEW_DEPTH.try_with(|d| *d).unwrap_or(0);
        if depth >= VIEW_NESTING_MAX {
            return Err(QueryError::Invalid(format!(
                "views nest more than {VIEW_NESTING_MAX} deep at view '{}' (does it read \
                 itself?)",
                view.name
            ))
            .into());
        }
        let state = match self.state.upgrade() {
            Some(state) => state.read().clone(),
            None => return Err(DataFusionError::Internal("the session is gone".into())),
        };
        let query = view_query(view)?;
        let db = self.db.clone();
        let name = view.name.clone();
        let planned = VIEW_DEPTH
            .scope(depth + 1, async move {
                let parsed = dialect::parse(&query, &db, &state, true)?;
                let rules = PlanRules {
                    sql_file_dir: None,
                    settings: crate::permissions::Settings::Fixed,
                };
                dialect::plan(parsed.statement, &state, rules).await
            })
            .await
            .map_err(|e| match e {
                QueryError::Invalid(m) => QueryError::Invalid(format!("in view '{name}': {m}")),
                e => e,
            })?;
        check_columns(view, &planned)?;
        Ok(planned)
    }
}

/// The query of a view, from its defining statement.
fn view_query(view: &TableMeta) -> Result<String> {
    let definition = view.definition.as_deref().unwrap_or_default();
    match sundial_sql::parse(definition) {
        Ok(Command::CreateView(c)) => Ok(c.query),
        _ => Err(QueryError::Invalid(format!(
            "view '{}' has a definition that is not CREATE VIEW: {definition}",
            view.name
        ))),
    }
}

/// Fails unless `plan` yields the columns `view` lists, by name and in order.
fn check_columns(view: &TableMeta, plan: &LogicalPlan) -> Result<()> {
    let listed: Vec<&str> = view.columns.iter().map(|c| c.name.as_str()).collect();
    let planned: Vec<&str> = plan
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    if listed != planned {
        return Err(QueryError::Invalid(format!(
            "view '{}' lists columns ({}) but its query now yields ({}): a table it reads \
             changed; create the view again (CREATE OR REPLACE VIEW)",
            view.name,
            listed.join(", "),
            planned.join(", ")
        )));
    }
    Ok(())
}

/// The table definition that describes a view (or a materialized view) whose query's result
/// has `schema`: its columns as Sundial types, and `timestamp` as designated timestamp when
/// the result keeps it as a TIMESTAMP column.
pub(crate) fn describe(
    name: &str,
    schema: &datafusion::common::DFSchema,
    timestamp: Option<&str>,
) -> Result<TableDef> {
    let mut columns = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let column_type = ColumnType::from_arrow(field.data_type()).ok_or_else(|| {
            QueryError::Invalid(format!(
                "column '{}' of '{name}' has type {}, which no Sundial column type can hold",
                field.name(),
                field.data_type()
            ))
        })?;
        if columns
            .iter()
            .any(|(n, _): &(String, ColumnType)| n.eq_ignore_ascii_case(field.name()))
        {
            return Err(QueryError::Invalid(format!(
                "'{name}' would have two columns named '{}': name them apart with AS",
                field.name()
            )));
        }
        columns.push((field.name().clone(), column_type));
    }
    let timestamp = timestamp
        .filter(|ts| {
            columns
                .iter()
                .any(|(n, t)| n.eq_ignore_ascii_case(ts) && *t == ColumnType::Timestamp)
        })
        .map(str::to_string);
    Ok(TableDef {
        name: name.to_string(),
        columns,
        timestamp,
        partition_by: PartitionBy::None,
        indexed: Vec::new(),
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
    })
}

/// `CREATE [OR REPLACE] VIEW`: plans the query (so that a view that cannot run is refused
/// now) and stores the statement with the query's columns.
pub(crate) async fn create_view(engine: &dyn Runner, c: CreateView, statement: &str) -> Result<()> {
    let db = engine.db().clone();
    if let Some(existing) = db.table(&c.name) {
        if c.if_not_exists {
            return Ok(());
        }
        if c.or_replace {
            expect_kind(&existing.meta(), TableKind::View, "CREATE OR REPLACE VIEW")?;
        }
    }
    let (plan, timestamp) = engine.plan_query(&c.query).await?;
    let def = describe(&c.name, plan.schema(), timestamp.as_deref())?;
    let statement = statement.trim().trim_end_matches(';').trim().to_string();
    let (name, replace) = (c.name.clone(), c.or_replace);
    blocking(move || {
        // Replacing is a drop and a create under the catalog's DDL lock each: between them the
        // name is free for an instant, never taken by two.
        if replace && db.table(&name).is_some() {
            db.drop_table(&name)?;
        }
        db.create_derived(def, TableKind::View, &statement, false)?;
        Ok(())
    })
    .await?;
    engine.catalog_changed();
    Ok(())
}

/// `DROP VIEW` (or `DROP MATERIALIZED VIEW`: `materialized`): each name must be a view of
/// that kind. Returns the statement's tag.
pub(crate) async fn drop_views(
    engine: &dyn Runner,
    names: Vec<String>,
    if_exists: bool,
    materialized: bool,
) -> Result<&'static str> {
    let (kind, what) = if materialized {
        (TableKind::MaterializedView, "DROP MATERIALIZED VIEW")
    } else {
        (TableKind::View, "DROP VIEW")
    };
    let db = engine.db().clone();
    for name in &names {
        match db.table(name) {
            Some(t) => expect_kind(&t.meta(), kind, what)?,
            None if if_exists => {}
            None => {
                return Err(QueryError::Storage(
                    sundial_storage::StorageError::NotFound(format!(
                        "{} '{name}' does not exist",
                        kind.name()
                    )),
                ));
            }
        }
    }
    let dropped = blocking(move || {
        for name in &names {
            if db.table(name).is_some() {
                db.drop_table(name)?;
            }
        }
        Ok(())
    })
    .await;
    engine.catalog_changed();
    dropped?;
    Ok(what)
}

/// `SHOW CREATE VIEW v` (or `SHOW CREATE MATERIALIZED VIEW`): the defining statement, in a
/// column named `ddl` as QuestDB names it.
pub(crate) fn show_create_view(
    engine: &dyn Runner,
    name: &str,
    materialized: bool,
) -> Result<RecordBatch> {
    let kind = if materialized {
        TableKind::MaterializedView
    } else {
        TableKind::View
    };
    let table = engine.db().table(name).ok_or_else(|| {
        QueryError::Storage(sundial_storage::StorageError::NotFound(format!(
            "{} '{name}' does not exist",
            kind.name()
        )))
    })?;
    let meta = table.meta();
    expect_kind(&meta, kind, "SHOW CREATE")?;
    let ddl = format!("{};", meta.definition.as_deref().unwrap_or_default());
    let schema = Arc::new(Schema::new(vec![Field::new("ddl", DataType::Utf8, false)]));
    Ok(RecordBatch::try_new(
        schema,
        vec![Arc::new(StringArray::from(vec![ddl]))],
    )?)
}

/// Whether `meta` is of `kind`, or the error naming what it is instead (`what` is the
/// statement: "DROP VIEW").
pub(crate) fn expect_kind(meta: &TableMeta, kind: TableKind, what: &str) -> Result<()> {
    if meta.kind == kind {
        return Ok(());
    }
    let hint = match meta.kind {
        TableKind::Table => "DROP TABLE, SHOW CREATE TABLE",
        TableKind::View => "DROP VIEW, SHOW CREATE VIEW",
        TableKind::MaterializedView => "DROP MATERIALIZED VIEW, SHOW CREATE MATERIALIZED VIEW",
    };
    Err(QueryError::Invalid(format!(
        "'{}' is a {}, not a {}: {what} does not apply (use {hint})",
        meta.name,
        meta.kind.name(),
        kind.name()
    )))
}
