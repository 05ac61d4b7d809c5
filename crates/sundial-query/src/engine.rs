//! The SQL engine: routes each statement to Sundial's own DDL or to DataFusion.

use std::sync::{Arc, Mutex, RwLock};

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::TableReference;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::TaskContext;
use datafusion::execution::context::{SQLOptions, SessionConfig, SessionContext};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{DmlStatement, LogicalPlan, WriteOp, ident, lit};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::memory::MemoryStream;
use datafusion::scalar::ScalarValue;
use datafusion::sql::parser::Statement as DFStatement;
use futures::StreamExt;
use sundial_auth::{Caller, Role, Users};
use sundial_ingest::Sinks;
use sundial_storage::{
    ColumnType, ConvertTo, Database, ParquetOptions, PartitionBy, Table, TableDef, TableMeta,
};

use sundial_sql::names::{CATALOG, SCHEMA, placeholder_index};
use sundial_sql::statement::{self as ddl, Command, CreateTable, Statement};

use crate::access::{self, Needed};
use crate::dialect::{self, Parsed};
use crate::error::{QueryError, Result};
use crate::exec::bind;
use crate::key_index::KeyIndexes;
use crate::last_values::LastValues;
use crate::plans::lookup::{Lookup, LookupRows, PointLookup};
use crate::plans::mapped::MappedParts;
use crate::plans::plan_cache::{self, PlanCache, PlannedTables, Shape};
use crate::plans::text_shape::{Learned, TextShape};
use crate::provider::{InsertPath, SundialSchema};
use crate::runner::{Runner, blocking};
use crate::running::QueryGate;
use crate::session_statements::{Deallocate, Named, argument_values, parse_deallocate};
use crate::table_keys::TableKeys;

/// What a statement produced.
pub enum Output {
    /// A result set, streamed.
    Rows(SendableRecordBatchStream),
    /// A statement without a result set: its command tag (`CREATE TABLE`, `INSERT`, ...) and the
    /// rows it affected where that means something.
    Done { tag: String, rows: Option<u64> },
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::Rows(_) => write!(f, "Rows(..)"),
            Output::Done { tag, rows } => write!(f, "Done({tag}, {rows:?})"),
        }
    }
}

/// A collected result: the schema and every batch.
#[derive(Debug, Clone)]
pub struct Collected {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    pub tag: Option<String>,
    pub rows_affected: Option<u64>,
}

/// A session's SQL-level prepared statements (see `session_statements`).
pub type SessionStatements = Named<Prepared>;

/// A statement planned once by [`Engine::prepare`].
#[derive(Debug, Clone)]
pub struct Prepared {
    kind: PreparedKind,
    /// The type of each parameter (`$1` first) where the planner could infer it.
    pub param_types: Vec<Option<DataType>>,
    /// The result's columns; `None` for statements that return no rows.
    pub schema: Option<SchemaRef>,
    /// Values of parameters the statement's text does not show: its literals, when its plan is
    /// shared with statements of the same shape (see `plan_cache`).
    literals: Vec<ScalarValue>,
    /// The physical plan runs of an optimized plan bind (see `reuse`), shared by the
    /// statements sharing the plan.
    physical: Arc<KeptPhysical>,
    /// The result column that is the designated timestamp of the table a plain SELECT reads
    /// (see `result_timestamp`).
    pub designated_timestamp: Option<String>,
    /// The role running it needs, checked at each run (see `access`).
    needed: Needed,
}

/// A physical plan kept for reuse, once the first run has tried to plan one.
#[derive(Default)]
struct KeptPhysical(std::sync::Mutex<Kept>);

#[derive(Default)]
enum Kept {
    #[default]
    Untried,
    /// Planned in the session `session` (a SET makes a new one, and the plan is made again).
    Plan {
        plan: Arc<dyn ExecutionPlan>,
        session: std::sync::Weak<Current>,
    },
    /// The plan cannot be bound to values: each run plans afresh.
    Never,
}

impl std::fmt::Debug for KeptPhysical {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = match *self.lock() {
            Kept::Untried => "untried",
            Kept::Plan { .. } => "kept",
            Kept::Never => "never",
        };
        write!(f, "KeptPhysical({kept})")
    }
}

impl KeptPhysical {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The kept plan if it was planned in `session`; `Err(())` if no plan can be kept.
    fn get(
        &self,
        session: &Arc<Current>,
    ) -> std::result::Result<Option<Arc<dyn ExecutionPlan>>, ()> {
        match &*self.lock() {
            Kept::Plan { plan, session: s } if std::ptr::eq(s.as_ptr(), Arc::as_ptr(session)) => {
                Ok(Some(plan.clone()))
            }
            Kept::Never => Err(()),
            _ => Ok(None),
        }
    }

    fn set(&self, kept: Kept) {
        *self.lock() = kept;
    }
}

#[derive(Debug, Clone)]
enum PreparedKind {
    /// One of Sundial's own statements, kept as text.
    Own(String),
    /// A DataFusion plan the session runs (statements such as SET).
    Plan(LogicalPlan),
    /// A query or DML plan, analyzed and optimized once, possibly with placeholders. It
    /// calls no stable function, so optimizing it again would give the same plan.
    Optimized(LogicalPlan),
    /// A lookup by key equalities, run without DataFusion's executor.
    Lookup(PointLookup),
    /// PREPARE, EXECUTE or DEALLOCATE on the session's statements (see `session_statements`).
    Session(SessionOp),
}

/// What a statement on the session's SQL-level prepared statements does when it runs.
#[derive(Debug, Clone)]
enum SessionOp {
    /// Keeps `statement` under `name`.
    Prepare {
        name: String,
        statement: Arc<Prepared>,
        into: SessionStatements,
    },
    /// Runs `statement` with `values` (EXECUTE's arguments, cast to its parameters' types).
    Execute {
        statement: Arc<Prepared>,
        values: Vec<ScalarValue>,
    },
    Deallocate {
        what: Deallocate,
        from: SessionStatements,
    },
}

impl Prepared {
    /// The role a caller needs to run the statement. (`ALTER USER <name> WITH PASSWORD`
    /// needs admin, but the user `name` may run it without any role.)
    pub fn needed_role(&self) -> Role {
        self.needed.role
    }

    /// The user whose password the statement sets (`ALTER USER <name> WITH PASSWORD`), if
    /// it does: a session that sets its own goes on with the new credentials.
    pub fn sets_password_of(&self) -> Option<&str> {
        self.needed.own_password.as_deref()
    }

    /// Whether runs take the point-lookup path (see `lookup`) rather than DataFusion's executor.
    pub fn is_point_lookup(&self) -> bool {
        matches!(self.kind, PreparedKind::Lookup(_))
    }
}

/// The values of a prepared statement's parameters: the caller's, or the literals bound to a
/// shared plan.
fn parameter_values<'a>(
    prepared: &'a Prepared,
    params: &'a [ScalarValue],
) -> Result<&'a [ScalarValue]> {
    if !prepared.literals.is_empty() {
        if !params.is_empty() {
            return Err(QueryError::Invalid(
                "this statement takes no parameters".into(),
            ));
        }
        return Ok(&prepared.literals);
    }
    if params.len() != prepared.param_types.len() {
        return Err(QueryError::Invalid(format!(
            "the statement has {} parameters but {} values were given",
            prepared.param_types.len(),
            params.len()
        )));
    }
    Ok(params)
}

/// `plan` with its parameters replaced by `values`.
fn with_values(plan: &LogicalPlan, values: &[ScalarValue]) -> Result<LogicalPlan> {
    if values.is_empty() {
        return Ok(plan.clone());
    }
    Ok(plan.clone().with_param_values(values.to_vec())?)
}

/// Whether any expression calls a stable function: one constant within a statement but not
/// across statements, like `now()`.
fn has_stable_functions(plan: &LogicalPlan) -> Result<bool> {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::{Expr, Volatility};
    let mut found = false;
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|expr| {
            expr.apply(|e| {
                if let Expr::ScalarFunction(f) = e
                    && f.func.signature().volatility == Volatility::Stable
                {
                    found = true;
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })?;
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    })?;
    Ok(found)
}

/// Plans the session itself must run (SET, PREPARE, CREATE VIEW ...), not the physical planner.
fn is_statement_or_ddl(plan: &LogicalPlan) -> bool {
    matches!(
        plan,
        LogicalPlan::Statement(_) | LogicalPlan::Ddl(_) | LogicalPlan::Copy(_)
    )
}

fn is_insert(plan: &LogicalPlan) -> bool {
    matches!(
        plan,
        LogicalPlan::Dml(DmlStatement {
            op: WriteOp::Insert(_),
            ..
        })
    )
}

/// Runs SQL against a [`Database`].
pub struct Engine {
    db: Arc<Database>,
    /// Where every write of a statement goes: the tables' sinks (see `sundial_ingest`).
    inserts: InsertPath,
    ctx: SessionContext,
    /// A snapshot of the session, taken once all functions and schemas are registered and
    /// again after each SET. Tables come and go through the shared catalog, so the snapshot
    /// stays current; taking it once saves copying every function registry per statement.
    current: RwLock<Arc<Current>>,
    /// Key indexes for point lookups and indexed symbols, shared by all sessions.
    key_indexes: Arc<KeyIndexes>,
    /// The tables' last-value caches, shared by all sessions.
    last_values: Arc<LastValues>,
    /// Whole-table key indexes of point lookups by integer keys, shared by all sessions.
    table_keys: Arc<TableKeys>,
    /// Partitions' columns mapped for point lookups, per table (see `plans::mapped`).
    mapped_parts: Arc<MappedParts>,
    /// Each query's memory limit, the budget queries share, where they spill.
    memory: crate::memory_use::MemoryLimits,
    /// Plans shared by queries of the same shape (see `plan_cache`).
    plans: PlanCache<SharedPlan>,
    /// How texts of the same shape fill a shared plan without being parsed (see `text_shape`).
    text_shapes: PlanCache<Learned>,
    /// The bound on results of functions that build as much as an argument says (see
    /// `bounded`), which follows the query memory limit.
    result_bound: Arc<crate::bounded::ResultBound>,
    /// The directory `COPY ... TO 'file'` may write in (none: such statements are refused).
    sql_file_dir: Option<std::path::PathBuf>,
    /// Whether SET changes this engine's session (see `permissions`).
    settings: crate::permissions::Settings,
    /// The user store statements of logged-in users are checked against, and user
    /// management statements change (none: only the trusted caller may run statements).
    users: Option<Arc<Users>>,
    /// The gate heavy queries wait at (see `running`; None: they run at once).
    gate: Option<Arc<QueryGate>>,
    /// Whether SAMPLE BY queries are answered from materialized views where one serves (see
    /// `sundial_sql::rollup`).
    rollup_routing: bool,
}

/// The session as statements plan and run in it.
struct Current {
    state: SessionState,
    task: Arc<TaskContext>,
    /// Contexts with a memory pool of their own for queries with a memory bound, kept for
    /// reuse: one no query holds has nothing reserved, and building one copies every
    /// function registry.
    bounded_tasks: Mutex<Vec<Arc<TaskContext>>>,
}

impl Current {
    fn of(ctx: &SessionContext) -> Arc<Current> {
        let state = ctx.state();
        let task = state.task_ctx();
        Arc::new(Current {
            state,
            task,
            bounded_tasks: Mutex::new(Vec::new()),
        })
    }

    /// `plan` (optimized) planned into a physical plan.
    async fn physical_plan(&self, plan: &LogicalPlan) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self
            .state
            .query_planner()
            .create_physical_plan(plan, &self.state)
            .await?)
    }

    /// A context whose queries reserve memory and spill as `memory` says, used by no other
    /// query.
    fn bounded_task(&self, memory: &crate::memory_use::MemoryLimits) -> Arc<TaskContext> {
        let mut kept = self.bounded_tasks.lock().unwrap_or_else(|e| e.into_inner());
        // The lock keeps another query from taking an idle context between the check and the
        // clone.
        if let Some(idle) = kept.iter().find(|t| is_idle(t)) {
            return idle.clone();
        }
        let task = self.task.clone();
        let runtime = memory.runtime(&task.runtime_env());
        let bounded = Arc::new(TaskContext::new(
            task.task_id(),
            task.session_id(),
            memory.config(task.session_config()),
            task.scalar_functions().clone(),
            task.higher_order_functions().clone(),
            task.aggregate_functions().clone(),
            task.window_functions().clone(),
            Arc::new(runtime),
        ));
        if kept.len() < BOUNDED_TASKS_KEPT_MAX {
            kept.push(bounded.clone());
        }
        bounded
    }
}

/// Whether only the kept list holds `task`: no stream of a query holds it, its runtime or a
/// reservation of its memory pool.
fn is_idle(task: &Arc<TaskContext>) -> bool {
    let runtime = task.runtime_env();
    // `runtime` is one holder of the runtime, the context the other.
    Arc::strong_count(task) == 1
        && Arc::strong_count(&runtime) == 2
        && Arc::strong_count(&runtime.memory_pool) == 1
}

/// Memory-bounded query contexts kept for reuse: about the number of queries that run at
/// once.
const BOUNDED_TASKS_KEPT_MAX: usize = 64;

/// What the queries of one shape share.
enum SharedPlan {
    /// A plan with the shape's literals as parameters, good while its tables are unchanged.
    Planned {
        prepared: Box<Prepared>,
        tables: PlannedTables,
    },
    /// Nothing: the plan reads more than Sundial tables, or a parameter's type is unknown, so
    /// each query is planned with its literals.
    Unshared,
}

impl SharedPlan {
    fn is_current(&self, db: &Database) -> bool {
        match self {
            SharedPlan::Planned { tables, .. } => tables.are_current(db),
            SharedPlan::Unshared => true,
        }
    }

    /// The plan with `literals` bound to its parameters; `None` if it is unshared or a value
    /// does not convert exactly (see `plan_cache::bind`).
    fn bind(
        &self,
        literals: &[ScalarValue],
        designated_timestamp: Option<String>,
    ) -> Option<Prepared> {
        let SharedPlan::Planned { prepared, .. } = self else {
            return None;
        };
        let literals = plan_cache::bind(literals, &prepared.param_types)?;
        Some(Prepared {
            kind: prepared.kind.clone(),
            param_types: Vec::new(),
            schema: prepared.schema.clone(),
            literals,
            physical: prepared.physical.clone(),
            designated_timestamp,
            needed: prepared.needed.clone(),
        })
    }
}

/// The most rows [`Engine::run_lookup_now`] indexes or scans in one partition: about a
/// millisecond of work.
const LOOKUP_NOW_STEP_ROWS_MAX: u64 = 1 << 16;

/// Rows pending commit in a table past which an INSERT waits (unless the server says).
pub const INSERT_PENDING_ROWS_MAX: usize = 400_000;

/// Query shapes whose plans are kept (see `plan_cache`).
const PLAN_CACHE_ENTRIES_MAX: usize = 1024;

/// Memory the last-value caches may hold together (see `last_values`).
const LAST_VALUE_CACHE_BYTES_MAX: usize = 1 << 30;

/// Memory the per-partition key indexes (symbol indexes, lookups a whole-table index does
/// not answer) may take.
const KEY_INDEX_BYTES_MAX: usize = 256 << 20;

/// Memory the whole-table key indexes of point lookups may take: about 24 bytes a row, so
/// some 90M rows of keys.
const TABLE_KEYS_BYTES_MAX: usize = 2 << 30;

impl Engine {
    /// An engine whose INSERTs have table sinks of their own.
    pub fn new(db: Arc<Database>) -> Result<Engine> {
        Engine::with_inserts(InsertPath {
            sinks: Sinks::new(db),
            pending_rows_max: INSERT_PENDING_ROWS_MAX,
        })
    }

    /// An engine whose INSERTs go through `inserts`, typically the sinks the ILP receivers
    /// share, so that SQL and ILP rows for a table meet in the same commits.
    pub fn with_inserts(inserts: InsertPath) -> Result<Engine> {
        let db = inserts.sinks.db().clone();
        let config = SessionConfig::new()
            // sundial_pgcatalog registers information_schema in its place, with PostgreSQL's
            // type names.
            .with_information_schema(false)
            .with_default_catalog_and_schema(CATALOG, SCHEMA)
            .with_create_default_catalog_and_schema(true);
        let mut config = config;
        // Spans let planning errors point at the offending identifier.
        config.options_mut().sql_parser.collect_spans = true;
        // Scans report exact row counts, so estimates above them (a partial aggregate's) are
        // good enough to keep small queries in one partition, without repartitioning.
        config
            .options_mut()
            .execution
            .use_row_number_estimates_to_optimize_partitioning = true;
        let result_bound = Arc::new(crate::bounded::ResultBound::default());
        let state = crate::asof::install(
            datafusion::execution::session_state::SessionStateBuilder::new()
                .with_config(config)
                .with_default_features()
                // Casts the dialect writes to PostgreSQL types (`names::PG_TYPE_QUALIFIER`).
                .with_type_planner(Arc::new(sundial_pgcatalog::PgTypePlanner))
                .with_analyzer_rule(Arc::new(crate::latest::LatestRule))
                .with_optimizer_rule(Arc::new(crate::distinct_keys::DistinctKeysRule))
                .with_physical_optimizer_rule(Arc::new(crate::exec::scan_agg::FuseScanAggregates))
                .with_physical_optimizer_rule(Arc::new(
                    crate::exec::bucket_agg::FuseBucketAggregates,
                ))
                .with_physical_optimizer_rule(Arc::new(crate::bounded::BoundLiterals(
                    result_bound.clone(),
                )))
                .with_physical_optimizer_rule(Arc::new(crate::exec::in_order::ScanInOrder))
                .with_physical_optimizer_rule(Arc::new(crate::exec::cooperative::SliceProbes))
                .with_physical_optimizer_rule(Arc::new(crate::exec::gather::GatherSmallInputs))
                // Last: it wraps what the other rules made.
                .with_physical_optimizer_rule(Arc::new(crate::exec::cooperative::YieldEverywhere)),
        )
        // Last among the analyzer rules: it shares subqueries in their final form.
        .with_analyzer_rule(Arc::new(crate::shared::ShareRepeats))
        .build();
        let ctx = SessionContext::new_with_state(state);
        let catalog = ctx
            .catalog(CATALOG)
            .ok_or_else(|| QueryError::Invalid("default catalog missing".into()))?;
        let key_indexes = Arc::new(KeyIndexes::new(KEY_INDEX_BYTES_MAX));
        let last_values = Arc::new(LastValues::new(LAST_VALUE_CACHE_BYTES_MAX));
        catalog.register_schema(
            SCHEMA,
            Arc::new(SundialSchema::new(
                inserts.clone(),
                (key_indexes.clone(), last_values.clone()),
                Arc::new(crate::views::ViewPlanner::new(
                    db.clone(),
                    ctx.state_weak_ref(),
                )),
            )),
        )?;
        sundial_pgcatalog::register(&ctx, db.clone())?;
        crate::functions::register(&ctx);
        crate::partitions::register(&ctx, db.clone());
        crate::meta::register(&ctx, db.clone());
        crate::matview::register(&ctx, db.clone());
        crate::last_values::functions::register(&ctx, db.clone(), last_values.clone());
        crate::bounded::install(&ctx, result_bound.clone());
        ctx.register_udf(crate::asof::marker_function());
        ctx.register_udf(crate::latest::marker_function());
        Ok(Engine {
            db,
            inserts,
            current: RwLock::new(Current::of(&ctx)),
            ctx,
            key_indexes,
            last_values,
            table_keys: Arc::new(TableKeys::new(TABLE_KEYS_BYTES_MAX)),
            mapped_parts: Arc::default(),
            memory: Default::default(),
            plans: PlanCache::new(PLAN_CACHE_ENTRIES_MAX),
            text_shapes: PlanCache::new(PLAN_CACHE_ENTRIES_MAX),
            result_bound,
            sql_file_dir: None,
            settings: crate::permissions::Settings::Session,
            users: None,
            gate: None,
            rollup_routing: true,
        })
    }

    /// Whether SAMPLE BY queries may be answered from materialized views (on by default).
    pub fn set_rollup_routing(&mut self, on: bool) {
        self.rollup_routing = on;
        self.forget_shared_plans();
    }

    /// Lets `COPY ... TO 'path'` write files inside `dir` (and nowhere else); `None` (the
    /// default) refuses every statement that writes a server file.
    pub fn set_sql_file_dir(&mut self, dir: Option<std::path::PathBuf>) {
        self.sql_file_dir = dir;
    }

    /// The user store: the roles of the callers of [`Engine::run_as`] and
    /// [`Engine::run_prepared_as`], and what `CREATE USER`, `GRANT` ... change. Without one,
    /// only the trusted caller may run statements, and user management is refused.
    pub fn set_users(&mut self, users: Arc<Users>) {
        self.users = Some(users);
    }

    /// The user store, if this engine has one.
    pub fn users(&self) -> Option<&Arc<Users>> {
        self.users.as_ref()
    }

    /// Refuses a statement needing `needed` unless `caller` may run it now.
    fn authorize(&self, caller: &Caller, needed: &Needed) -> Result<()> {
        access::check(self.users.as_deref(), caller, needed)
    }

    /// Refuses unless `caller` holds `role` now (SQLSTATE 42501), for what protocols run
    /// without SQL: `COPY ... FROM STDIN` and `/imp` need write. `what` names it in the
    /// refusal: `permission denied: user 'bob' has the read role; {what} needs write ...`.
    pub fn check_role(&self, caller: &Caller, role: Role, what: &'static str) -> Result<()> {
        self.authorize(
            caller,
            &Needed {
                role,
                what,
                own_password: None,
            },
        )
    }

    /// Whether SET may change this engine's session: [`crate::Settings::Fixed`] for an engine
    /// many clients share.
    pub fn set_settings(&mut self, settings: crate::permissions::Settings) {
        self.settings = settings;
    }

    /// Bounds the memory each query's operators may reserve (0: no limit). A query needing
    /// more fails with a resources-exhausted error (SQLSTATE 53200); other queries go on.
    pub fn set_query_memory_bytes_max(&mut self, bytes: usize) {
        self.memory.query_bytes_max = bytes;
        self.result_bound.set_query_memory_bytes_max(bytes);
        self.forget_query_contexts();
    }

    /// Makes every query also reserve its memory from `server`, the budget all queries of the
    /// server share: a reservation must fit both the query's limit and what `server` has left
    /// (else 53200, after operators that can spill have spilled).
    pub fn set_server_memory(&mut self, server: Arc<crate::memory_use::ServerMemory>) {
        self.memory.server = Some(server);
        self.forget_query_contexts();
    }

    /// Lets at most `running_max` heavy queries execute at once, the others waiting their
    /// turn (see `running`); 0: no bound.
    pub fn set_queries_running_max(&mut self, running_max: usize) {
        self.gate = (running_max > 0).then(|| Arc::new(QueryGate::new(running_max)));
    }

    /// Makes queries spill through `disk` (see [`crate::spill_disk_manager`]) instead of into
    /// the system's temporary directory.
    pub fn set_spill(&mut self, disk: Arc<datafusion::execution::disk_manager::DiskManager>) {
        self.memory.spill = Some(disk);
        self.forget_query_contexts();
    }

    /// Drops the query contexts kept for reuse, made with the memory settings before a change.
    fn forget_query_contexts(&mut self) {
        let current = self.current.get_mut().unwrap_or_else(|e| e.into_inner());
        *current = Current::of(&self.ctx);
    }

    /// The session as it is now.
    fn current(&self) -> Arc<Current> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Takes the session's snapshot again after a SET; shared plans were optimized with the
    /// old settings, so they go.
    fn refresh_session(&self) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Current::of(&self.ctx);
        self.forget_shared_plans();
    }

    /// Bounds how many query shapes keep a shared plan (0: none; each query is planned with
    /// its literals).
    pub fn set_plan_cache_entries_max(&mut self, entries: usize) {
        self.plans = PlanCache::new(entries);
        self.text_shapes = PlanCache::new(entries);
    }

    /// Drops every shared plan, and what texts learned of them.
    pub(crate) fn forget_shared_plans(&self) {
        self.plans.clear();
        self.text_shapes.clear();
    }

    /// How many query shapes have a plan kept.
    #[cfg(test)]
    pub(crate) fn shared_plans(&self) -> usize {
        self.plans.len()
    }

    /// How many text shapes learned which shared plan they fill.
    #[cfg(test)]
    pub(crate) fn learned_texts(&self) -> usize {
        self.text_shapes.len()
    }

    /// The physical plan `sql` runs with, as text, and whether it is a shared plan.
    #[cfg(test)]
    pub(crate) async fn physical_plan_text(&self, sql: &str) -> (String, bool) {
        use datafusion::physical_plan::displayable;
        let prepared = self.prepare(sql).await.expect(sql);
        let PreparedKind::Optimized(plan) = &prepared.kind else {
            panic!("{sql}: not an optimized plan");
        };
        let plan = with_values(plan, &prepared.literals).expect(sql);
        let physical = self.current().physical_plan(&plan).await.expect(sql);
        let text = displayable(physical.as_ref()).indent(false).to_string();
        (text, !prepared.literals.is_empty())
    }

    /// The context a query executes in: the session's, with a memory pool of its own when
    /// queries are bounded.
    fn query_task(&self) -> Arc<TaskContext> {
        let current = self.current();
        if !self.memory.is_bounded() {
            return current.task.clone();
        }
        current.bounded_task(&self.memory)
    }

    /// The rows `physical` yields, executed in a query context of its own once the gate lets
    /// it (see `running`).
    fn stream(&self, physical: Arc<dyn ExecutionPlan>) -> Result<SendableRecordBatchStream> {
        Ok(QueryGate::execute(
            self.gate.as_ref(),
            physical,
            self.query_task(),
        )?)
    }

    /// Where this engine's writes go: the tables' sinks, shared with the ILP receivers.
    pub fn inserts(&self) -> &InsertPath {
        &self.inserts
    }

    pub fn db(&self) -> &Arc<Database> {
        &self.db
    }

    pub fn session(&self) -> &SessionContext {
        &self.ctx
    }

    /// Splits a script into statements.
    pub fn split(sql: &str) -> Result<Vec<Statement>> {
        Ok(ddl::split_statements(sql)?)
    }

    /// Runs one statement as the trusted caller (the CLI, tests).
    pub async fn run(&self, sql: &str) -> Result<Output> {
        self.run_as(sql, &Caller::trusted()).await
    }

    /// Runs one statement for `caller`, if its role allows (SQLSTATE 42501 if not). SQL-level
    /// prepared statements live for this statement only (see [`Engine::run_in`]).
    pub async fn run_as(&self, sql: &str, caller: &Caller) -> Result<Output> {
        self.run_in(sql, caller, &SessionStatements::new()).await
    }

    /// [`Engine::run_as`] in a session: PREPARE, EXECUTE and DEALLOCATE use `statements`.
    pub async fn run_in(
        &self,
        sql: &str,
        caller: &Caller,
        statements: &SessionStatements,
    ) -> Result<Output> {
        if parse_deallocate(sql).is_some() {
            // Boxed: preparing may run a statement (a SHOW, to learn its shape).
            let prepared = Box::pin(self.prepare_in(sql, caller, statements)).await?;
            return self.run_prepared_as(&prepared, Vec::new(), caller).await;
        }
        let command = ddl::parse(sql)?;
        if command == Command::Sql {
            // Every such statement needs read at least: a caller without it learns nothing
            // from planning it (which tables exist, which columns).
            self.authorize(caller, &access::READ)?;
            return self.run_datafusion(sql, caller, statements).await;
        }
        self.authorize(caller, &access::of_command(&command))?;
        self.run_command(command, sql).await
    }

    /// Runs one of Sundial's own statements; the caller's role was checked.
    async fn run_command(&self, command: Command, sql: &str) -> Result<Output> {
        if let Some((names, allowed)) = crate::matview::applies_to(&command) {
            for name in names {
                self.check_kind(name, allowed)?;
            }
        }
        match command {
            Command::CreateView(c) => {
                crate::views::create_view(self, c, sql).await?;
                done("CREATE VIEW")
            }
            Command::DropViews {
                names,
                if_exists,
                materialized,
            } => done(crate::views::drop_views(self, names, if_exists, materialized).await?),
            Command::ShowCreateView { name, materialized } => {
                rows(crate::views::show_create_view(self, &name, materialized)?)
            }
            Command::CreateMaterializedView(c) => {
                crate::matview::create(self, c).await?;
                done("CREATE MATERIALIZED VIEW")
            }
            Command::AlterMaterializedView { name, change } => {
                crate::matview::alter(self, &name, change).await?;
                done("ALTER MATERIALIZED VIEW")
            }
            Command::RefreshMaterializedView { name, how } => Ok(Output::Done {
                tag: "REFRESH MATERIALIZED VIEW".into(),
                rows: Some(crate::matview::refresh_statement(self, &name, how).await?),
            }),
            Command::Sql => Err(crate::error::internal(
                "run_command was given a statement for DataFusion".into(),
            )),
            Command::User(command) => match crate::users::run(self.users.clone(), command).await? {
                crate::users::Answer::Rows(batch) => rows(batch),
                crate::users::Answer::Done(tag) => done(tag),
            },
            Command::CreateTable(c) => self.create_table(c).await,
            Command::ShowTables => rows(crate::meta::show_tables(&self.db)),
            Command::Backup { to } => {
                rows(crate::backup::run(self.db.clone(), to, self.users.clone()).await?)
            }
            Command::ShowColumns { table } => {
                let t = self.table(&table)?;
                rows(crate::meta::show_columns(&t.snapshot()))
            }
            Command::ShowPartitions { table } => {
                let t = self.table(&table)?;
                rows(crate::partitions::show_partitions(&t))
            }
            Command::ShowCreateTable { table } => {
                let t = self.table(&table)?;
                rows(show_create_table(&t.meta()))
            }
            Command::AddColumns {
                table,
                columns,
                indexed,
                if_not_exists,
            } => {
                let t = self.table(&table)?;
                blocking(move || {
                    let mut w = t.writer()?;
                    for (name, column_type) in columns {
                        if if_not_exists && w.meta().column_index(&name).is_some() {
                            continue;
                        }
                        w.add_column(&name, column_type)?;
                        if indexed.contains(&name) {
                            w.set_column_indexed(&name, true)?;
                        }
                    }
                    Ok(())
                })
                .await?;
                done("ALTER TABLE")
            }
            Command::SetIndexed {
                table,
                column,
                indexed,
            } => {
                let t = self.table(&table)?;
                blocking(move || Ok(t.writer()?.set_column_indexed(&column, indexed)?)).await?;
                done("ALTER TABLE")
            }
            Command::SetColdAfter { table, cold_after } => {
                let t = self.table(&table)?;
                blocking(move || Ok(t.writer()?.set_cold_after(cold_after)?)).await?;
                done("ALTER TABLE")
            }
            Command::SetTtl { table, ttl } => {
                let t = self.table(&table)?;
                // A TTL applies at once, not at the next background check.
                blocking(move || {
                    let mut w = t.writer()?;
                    w.set_ttl(ttl)?;
                    w.drop_expired()?;
                    Ok(())
                })
                .await?;
                done("ALTER TABLE")
            }
            Command::CreateLastValueCache(c) => {
                let t = self.table(&c.table)?;
                let exists = t
                    .meta()
                    .last_value_caches
                    .iter()
                    .any(|d| d.name.eq_ignore_ascii_case(&c.name));
                if !(exists && c.if_not_exists) {
                    blocking(move || {
                        let mut w = t.writer()?;
                        Ok(w.add_last_value_cache(&c.name, &c.keys, c.ignore_nulls)?)
                    })
                    .await?;
                }
                done("CREATE LAST VALUE CACHE")
            }
            Command::DropLastValueCache {
                name,
                table,
                if_exists,
            } => {
                let t = self.table(&table)?;
                let found = blocking({
                    let name = name.clone();
                    move || Ok(t.writer()?.drop_last_value_cache(&name)?)
                })
                .await?;
                if !found && !if_exists {
                    return Err(QueryError::Invalid(format!(
                        "'{table}' has no last value cache named '{name}'"
                    )));
                }
                done("DROP LAST VALUE CACHE")
            }
            Command::SetDedup { table, keys } => {
                let t = self.table(&table)?;
                blocking(move || Ok(t.writer()?.set_dedup_keys(&keys)?)).await?;
                done("ALTER TABLE")
            }
            Command::DropColumns { table, columns } => {
                let t = self.table(&table)?;
                blocking(move || {
                    let mut w = t.writer()?;
                    for c in columns {
                        w.drop_column(&c)?;
                    }
                    Ok(())
                })
                .await?;
                done("ALTER TABLE")
            }
            Command::RenameColumn { table, from, to } => {
                let t = self.table(&table)?;
                blocking(move || Ok(t.writer()?.rename_column(&from, &to)?)).await?;
                done("ALTER TABLE")
            }
            Command::RenameTable { from, to } => {
                let db = self.db.clone();
                blocking(move || Ok(db.rename_table(&from, &to)?)).await?;
                self.forget_shared_plans();
                done("RENAME TABLE")
            }
            Command::DropPartitions {
                table,
                names,
                predicate,
            } => self.drop_partitions(&table, names, predicate).await,
            Command::ConvertPartitions {
                table,
                to,
                names,
                predicate,
            } => self.convert_partitions(&table, to, names, predicate).await,
            Command::DropTables { names, if_exists } => {
                let db = self.db.clone();
                let dropped = blocking(move || {
                    for name in &names {
                        if !(if_exists && db.table(name).is_none()) {
                            db.drop_table(name)?;
                        }
                    }
                    Ok(())
                })
                .await;
                // Kept plans and the sinks hold their tables, and a dropped table's files go
                // with its last holder.
                self.forget_shared_plans();
                self.inserts.sinks.forget_dropped();
                dropped?;
                done("DROP TABLE")
            }
            Command::Truncate { tables } => {
                let tables = tables
                    .iter()
                    .map(|t| self.table(t))
                    .collect::<Result<Vec<_>>>()?;
                blocking(move || {
                    for t in tables {
                        t.writer()?.truncate()?;
                    }
                    Ok(())
                })
                .await?;
                done("TRUNCATE TABLE")
            }
        }
    }

    /// Runs a script and collects every statement's result; stops at the first error.
    pub async fn execute(&self, sql: &str) -> Result<Vec<Collected>> {
        let mut out = Vec::new();
        for statement in Engine::split(sql)? {
            out.push(
                collect(
                    self.run(&statement.text)
                        .await
                        .map_err(|e| e.in_statement_at(statement.line, statement.column))?,
                )
                .await?,
            );
        }
        Ok(out)
    }

    fn table(&self, name: &str) -> Result<Arc<Table>> {
        self.db.table(name).ok_or_else(|| {
            QueryError::Storage(sundial_storage::StorageError::NotFound(format!(
                "table '{name}' does not exist"
            )))
        })
    }

    async fn run_datafusion(
        &self,
        sql: &str,
        caller: &Caller,
        statements: &SessionStatements,
    ) -> Result<Output> {
        let run = async {
            let prepared = self.prepare_sql(sql).await?;
            let prepared = self.in_session(prepared, statements)?;
            self.run_prepared_as(&prepared, Vec::new(), caller).await
        };
        run.await
            .map_err(|e| crate::bad_value::locate(e, sql, &self.db))
    }

    /// Parses and plans one statement once, for running many times with parameters (`$1`, ...).
    ///
    /// Sundial's own statements take no parameters; those that return rows (SHOW, DESCRIBE)
    /// are run once here to learn their result's shape, which is safe as they only read.
    pub async fn prepare(&self, sql: &str) -> Result<Prepared> {
        self.prepare_as(sql, &Caller::trusted()).await
    }

    /// [`Engine::prepare`] for `caller`: a caller without the read role may prepare only
    /// user management statements (its own password), so that planning errors tell it
    /// nothing of the tables. The role the statement needs is checked when it runs
    /// ([`Engine::run_prepared_as`]).
    /// SQL-level prepared statements live for this statement only (see [`Engine::prepare_in`]).
    pub async fn prepare_as(&self, sql: &str, caller: &Caller) -> Result<Prepared> {
        self.prepare_in(sql, caller, &SessionStatements::new())
            .await
    }

    /// [`Engine::prepare_as`] in a session: a PREPARE keeps its statement in `statements` when
    /// it runs, an EXECUTE takes one from there now (its result's shape is known at once), a
    /// DEALLOCATE removes from there when it runs.
    pub async fn prepare_in(
        &self,
        sql: &str,
        caller: &Caller,
        statements: &SessionStatements,
    ) -> Result<Prepared> {
        if let Some(what) = parse_deallocate(sql) {
            self.authorize(caller, &access::READ)?;
            return Ok(Prepared {
                kind: PreparedKind::Session(SessionOp::Deallocate {
                    what: what?,
                    from: statements.clone(),
                }),
                param_types: Vec::new(),
                schema: None,
                literals: Vec::new(),
                physical: Default::default(),
                designated_timestamp: None,
                needed: access::READ,
            });
        }
        let command = ddl::parse(sql)?;
        if !matches!(command, Command::User(_)) {
            self.authorize(caller, &access::READ)?;
        }
        if command == Command::Sql {
            return self
                .prepare_sql(sql)
                .await
                .and_then(|prepared| self.in_session(prepared, statements))
                .map_err(|e| crate::bad_value::locate(e, sql, &self.db));
        }
        let schema = match command {
            Command::ShowTables
            | Command::ShowColumns { .. }
            | Command::ShowPartitions { .. }
            | Command::ShowCreateTable { .. } => match self.run(sql).await? {
                Output::Rows(stream) => Some(stream.schema()),
                Output::Done { .. } => None,
            },
            // Known without running it: a backup is no query to run twice.
            Command::Backup { .. } => Some(crate::backup::schema()),
            Command::User(ref user) => crate::users::schema(user),
            _ => None,
        };
        Ok(Prepared {
            kind: PreparedKind::Own(sql.to_string()),
            param_types: Vec::new(),
            schema,
            literals: Vec::new(),
            physical: Default::default(),
            designated_timestamp: None,
            needed: access::of_command(&command),
        })
    }

    /// `prepared` bound to the session's statements if it is a PREPARE or an EXECUTE (which
    /// DataFusion would otherwise run against its one store, shared by every caller).
    fn in_session(&self, prepared: Prepared, statements: &SessionStatements) -> Result<Prepared> {
        use datafusion::logical_expr::Statement as Plan;
        let PreparedKind::Plan(LogicalPlan::Statement(statement)) = &prepared.kind else {
            return Ok(prepared);
        };
        let op = match statement {
            Plan::Prepare(p) => {
                // The statement's parameters, typed by PREPARE's list where it gives one.
                let mut inner = self.prepare_plan(p.input.as_ref().clone(), p.fields.len())?;
                for (i, field) in p.fields.iter().enumerate() {
                    inner.param_types[i] = Some(field.data_type().clone());
                }
                inner.designated_timestamp = prepared.designated_timestamp.clone();
                SessionOp::Prepare {
                    name: p.name.clone(),
                    statement: Arc::new(inner),
                    into: statements.clone(),
                }
            }
            Plan::Execute(e) => {
                let statement = statements.get(&e.name)?;
                let values =
                    argument_values(&e.name, e.parameters.clone(), &statement.param_types)?;
                return Ok(Prepared {
                    schema: statement.schema.clone(),
                    designated_timestamp: statement.designated_timestamp.clone(),
                    // The role the prepared statement's plan needs, checked at each run.
                    needed: statement.needed.clone(),
                    kind: PreparedKind::Session(SessionOp::Execute { statement, values }),
                    param_types: Vec::new(),
                    literals: Vec::new(),
                    physical: Default::default(),
                });
            }
            Plan::Deallocate(d) => SessionOp::Deallocate {
                what: Deallocate::Name(d.name.clone()),
                from: statements.clone(),
            },
            _ => return Ok(prepared),
        };
        Ok(Prepared {
            kind: PreparedKind::Session(op),
            param_types: Vec::new(),
            schema: None,
            literals: Vec::new(),
            physical: Default::default(),
            designated_timestamp: None,
            needed: access::READ,
        })
    }

    /// Prepares a statement DataFusion plans: a query without parameters of its own takes
    /// the plan its shape shares where it can (see `plan_cache`).
    async fn prepare_sql(&self, sql: &str) -> Result<Prepared> {
        let multi_thread = || {
            tokio::runtime::Handle::try_current()
                .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
        };
        if sql.len() >= sundial_sql::limits::LARGE_STATEMENT_BYTES && multi_thread() {
            // The thread's other tasks move to another thread while this one plans.
            return tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(self.prepare_sql_here(sql))
            });
        }
        self.prepare_sql_here(sql).await
    }

    async fn prepare_sql_here(&self, sql: &str) -> Result<Prepared> {
        let text = if self.plans.is_enabled() {
            TextShape::of(sql)
        } else {
            None
        };
        if let Some(prepared) = text.as_ref().and_then(|t| self.prepare_learned(t)) {
            return Ok(prepared);
        }
        let Parsed {
            statement,
            parameters,
            designated_timestamp,
            volatile,
        } = self.parse_sql(sql)?;
        // A text whose rewrite depends on views' freshness is not learned (see `text_shape`).
        let text = if volatile { None } else { text };
        let shared = if parameters == 0
            && self.plans.is_enabled()
            && let Some(shape) = Shape::of(&statement)
        {
            self.prepare_shared(shape, text.as_ref(), &designated_timestamp)
                .await
        } else {
            None
        };
        let prepared = match shared {
            Some(prepared) => prepared,
            None => {
                let plan = self.plan_statement(statement).await?;
                self.prepare_plan(plan, parameters)?
            }
        };
        Ok(Prepared {
            designated_timestamp,
            ..prepared
        })
    }

    /// The shared plan a text of a learned shape fills, without parsing it; `None` if the
    /// shape is not learned, its fixed literals differ, or the plan is gone or out of date.
    fn prepare_learned(&self, text: &TextShape) -> Option<Prepared> {
        let learned = self.text_shapes.get(&text.key)?;
        let literals = learned.parameters(text)?;
        let shared = self.plans.get(&learned.shape_key)?;
        if !shared.is_current(&self.db) {
            return None;
        }
        shared.bind(&literals, learned.designated_timestamp.clone())
    }

    /// The shape's shared plan with the shape's literals bound, planning it first if needed;
    /// `None` if the statement must be planned with its literals. A plan used again teaches
    /// `text`'s shape how to find it.
    async fn prepare_shared(
        &self,
        shape: Shape,
        text: Option<&TextShape>,
        designated_timestamp: &Option<String>,
    ) -> Option<Prepared> {
        let (shared, reused) = match self.plans.get(&shape.key) {
            Some(shared) if shared.is_current(&self.db) => (shared, true),
            _ => {
                // A failure here is the statement's own: planning it with its literals
                // reports it.
                let shared = Arc::new(self.plan_shared(shape.statement.clone()).await.ok()?);
                self.plans.insert(shape.key.clone(), shared.clone());
                (shared, false)
            }
        };
        let prepared = shared.bind(&shape.literals, None)?;
        if reused && let Some(text) = text {
            self.learn(text, &shape, designated_timestamp);
        }
        Some(prepared)
    }

    /// Learns how `text`'s literals fill `shape`'s parameters, if a probe confirms it (see
    /// `text_shape`). A shape already learned is learned again only if its literals still fit
    /// but now lead to another plan (a table changed under it).
    fn learn(&self, text: &TextShape, shape: &Shape, designated_timestamp: &Option<String>) {
        if let Some(old) = self.text_shapes.get(&text.key)
            && (old.shape_key == shape.key || old.parameters(text).is_none())
        {
            return;
        }
        let Some((learned, probe, expected)) = Learned::guess(
            text,
            &shape.key,
            &shape.literals,
            designated_timestamp.clone(),
        ) else {
            return;
        };
        let Ok(parsed) = self.parse_sql(&probe) else {
            return;
        };
        let confirmed = parsed.parameters == 0
            && parsed.designated_timestamp == *designated_timestamp
            && Shape::of(&parsed.statement)
                .is_some_and(|p| learned.check(&p.key, &p.literals, &expected));
        if confirmed {
            self.text_shapes.insert(text.key.clone(), Arc::new(learned));
        }
    }

    async fn plan_shared(&self, statement: DFStatement) -> Result<SharedPlan> {
        let plan = self.plan_statement(statement).await?;
        let Some(tables) = PlannedTables::of(&plan) else {
            return Ok(SharedPlan::Unshared);
        };
        let prepared = self.prepare_plan(plan, 0)?;
        if prepared.param_types.iter().any(Option::is_none) {
            return Ok(SharedPlan::Unshared);
        }
        Ok(SharedPlan::Planned {
            prepared: Box::new(prepared),
            tables,
        })
    }

    /// A planned statement with `parameters` parameters in its text, optimized unless it
    /// must be optimized at each run.
    fn prepare_plan(&self, plan: LogicalPlan, parameters: usize) -> Result<Prepared> {
        // Parameters the rewrite dropped still take (unused) values.
        let mut param_types = vec![None; parameters];
        for (name, data_type) in plan.get_parameter_types()? {
            let index = placeholder_index(&name).ok_or_else(|| {
                QueryError::Invalid(format!(
                    "parameter '{name}': parameters are written $1, $2, ..."
                ))
            })?;
            if param_types.len() <= index {
                param_types.resize(index + 1, None);
            }
            param_types[index] = data_type;
        }
        crate::parameter_types::infer(&plan, &mut param_types)?;
        let plan = crate::parameter_types::with_array_types(plan, &param_types)?;
        let schema = if is_insert(&plan) || plan.schema().fields().is_empty() {
            None
        } else {
            Some(crate::column_origin::annotated(
                &plan,
                plan.schema().as_arrow().clone(),
            ))
        };
        let needed = access::of_plan(&plan);
        let kind = if is_statement_or_ddl(&plan) || has_stable_functions(&plan)? {
            // Stable functions (now(), current_date ...) are folded by the optimizer, so
            // such plans are optimized at each run, with that run's statement time.
            PreparedKind::Plan(plan)
        } else {
            let optimized = self.current().state.optimize(&plan)?;
            match PointLookup::from_plan(&optimized) {
                Some(lookup) => PreparedKind::Lookup(lookup),
                None => PreparedKind::Optimized(optimized),
            }
        };
        Ok(Prepared {
            kind,
            param_types,
            schema,
            literals: Vec::new(),
            physical: Default::default(),
            designated_timestamp: None,
            needed,
        })
    }

    /// Runs a prepared statement with values for its parameters (`params[0]` is `$1`), as the
    /// trusted caller.
    pub async fn run_prepared(
        &self,
        prepared: &Prepared,
        params: Vec<ScalarValue>,
    ) -> Result<Output> {
        self.run_prepared_as(prepared, params, &Caller::trusted())
            .await
    }

    /// Runs a prepared statement for `caller`, if its role allows now (SQLSTATE 42501 if
    /// not): a user revoked or dropped since the statement was prepared is refused.
    pub async fn run_prepared_as(
        &self,
        prepared: &Prepared,
        params: Vec<ScalarValue>,
        caller: &Caller,
    ) -> Result<Output> {
        self.authorize(caller, &prepared.needed)?;
        let values = parameter_values(prepared, &params)?;
        match &prepared.kind {
            PreparedKind::Own(sql) => Box::pin(self.run_command(ddl::parse(sql)?, sql)).await,
            PreparedKind::Session(op) => match op {
                SessionOp::Prepare {
                    name,
                    statement,
                    into,
                } => {
                    into.insert(name, statement.clone())?;
                    done("PREPARE")
                }
                SessionOp::Execute { statement, values } => {
                    Box::pin(self.run_prepared_as(statement, values.clone(), caller)).await
                }
                SessionOp::Deallocate { what, from } => match what {
                    Deallocate::All => {
                        from.clear();
                        done("DEALLOCATE ALL")
                    }
                    Deallocate::Name(name) if from.remove(name) => done("DEALLOCATE"),
                    Deallocate::Name(name) => {
                        Err(crate::session_statements::unknown_statement(name))
                    }
                },
            },
            PreparedKind::Plan(plan) => self.run_plan(with_values(plan, values)?).await,
            PreparedKind::Lookup(lookup) => {
                let indexes = (
                    self.key_indexes.as_ref(),
                    self.table_keys.as_ref(),
                    &self.mapped_parts,
                );
                let found = match lookup.find(indexes, values, LOOKUP_NOW_STEP_ROWS_MAX)? {
                    // Indexing or scanning many rows (a table's first lookup builds its key
                    // index): on the blocking pool, so the query threads serve others meanwhile.
                    Lookup::Deferred => {
                        let (lookup, values) = (lookup.clone(), values.to_vec());
                        let (key_indexes, table_keys, mapped) = (
                            self.key_indexes.clone(),
                            self.table_keys.clone(),
                            self.mapped_parts.clone(),
                        );
                        tokio::task::spawn_blocking(move || {
                            lookup.find((&key_indexes, &table_keys, &mapped), &values, u64::MAX)
                        })
                        .await
                        .map_err(|e| {
                            crate::error::internal(format!("a point lookup stopped: {e}"))
                        })??
                    }
                    found => found,
                };
                match found {
                    Lookup::Found(rows) => {
                        let stream = MemoryStream::try_new(
                            rows.into_batches()?,
                            lookup.schema().clone(),
                            None,
                        )?;
                        Ok(Output::Rows(Box::pin(stream)))
                    }
                    // Too many rows to read at once: the general plan streams them.
                    Lookup::TooMany | Lookup::Deferred => {
                        self.run_optimized(with_values(lookup.plan(), values)?)
                            .await
                    }
                }
            }
            PreparedKind::Optimized(plan) => {
                if !is_insert(plan)
                    && let Some(physical) =
                        self.reused_plan(plan, values, &prepared.physical).await?
                {
                    return Ok(Output::Rows(self.stream(physical)?));
                }
                self.run_optimized(with_values(plan, values)?).await
            }
        }
    }

    /// The physical plan `plan` runs with `values`, bound from the kept one (planning and
    /// keeping it on the first run); `None` if the run must be planned afresh (see `reuse`).
    async fn reused_plan(
        &self,
        plan: &LogicalPlan,
        values: &[ScalarValue],
        kept: &KeptPhysical,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let current = self.current();
        match kept.get(&current) {
            Ok(Some(physical)) => return Ok(bind::bind(&physical, Some(values))?),
            Ok(None) => {}
            Err(()) => return Ok(None),
        }
        let planning = current.physical_plan(plan);
        // A failure is a placeholder the scans do not take, or the statement's own, which
        // planning it with its values reports.
        let physical = match bind::plan_for_reuse(values, planning).await {
            Ok(physical) if bind::is_reusable(&physical) => physical,
            _ => {
                kept.set(Kept::Never);
                return Ok(None);
            }
        };
        if let Some(unbound) = bind::bind(&physical, None)? {
            kept.set(Kept::Plan {
                plan: unbound,
                session: Arc::downgrade(&current),
            });
        }
        Ok(Some(physical))
    }

    #[cfg(test)]
    pub(crate) fn mapped_parts(&self) -> &MappedParts {
        &self.mapped_parts
    }

    /// Runs a point lookup (see [`Prepared::is_point_lookup`]) right here if that is quick:
    /// `None` when the statement is no lookup or would index or scan many rows, and must be
    /// run by [`Engine::run_prepared`] on a thread that may block.
    /// Checks `caller`'s role as [`Engine::run_prepared_as`] does.
    pub fn run_lookup_now(
        &self,
        prepared: &Prepared,
        params: &[ScalarValue],
        caller: &Caller,
    ) -> Option<Result<LookupRows>> {
        let PreparedKind::Lookup(lookup) = &prepared.kind else {
            return None;
        };
        if let Err(e) = self.authorize(caller, &prepared.needed) {
            return Some(Err(e));
        }
        let values = match parameter_values(prepared, params) {
            Ok(values) => values,
            Err(e) => return Some(Err(e)),
        };
        let indexes = (
            self.key_indexes.as_ref(),
            self.table_keys.as_ref(),
            &self.mapped_parts,
        );
        match lookup.find(indexes, values, LOOKUP_NOW_STEP_ROWS_MAX) {
            Ok(Lookup::Found(found)) => Some(Ok(found)),
            Ok(Lookup::Deferred | Lookup::TooMany) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// Runs a plan the optimizer already saw: straight to physical planning.
    async fn run_optimized(&self, plan: LogicalPlan) -> Result<Output> {
        let insert = is_insert(&plan);
        let physical = self.current().physical_plan(&plan).await?;
        if insert {
            let batches =
                datafusion::physical_plan::common::collect(self.stream(physical)?).await?;
            return Ok(Output::Done {
                tag: "INSERT".into(),
                rows: Some(single_count(&batches)),
            });
        }
        Ok(Output::Rows(self.stream(physical)?))
    }

    /// Refreshes materialized views in the background until `stop` turns true or the engine
    /// is dropped (see `matview`): run it on the runtime queries run on.
    pub async fn refresh_views(
        engine: std::sync::Weak<Engine>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let caches = {
            let engine = engine.clone();
            move || {
                engine
                    .upgrade()
                    .map(|e| (e.db.clone(), e.last_values.clone()))
            }
        };
        tokio::join!(
            crate::matview::refresh_views(engine, stop.clone()),
            crate::last_values::keep_up(caches, stop),
        );
    }

    /// Fails when table `name` is of a kind `allowed` leaves out (a statement for tables on a
    /// view, say); a missing table is left for the statement to report.
    fn check_kind(&self, name: &str, allowed: &[sundial_storage::TableKind]) -> Result<()> {
        let Some(t) = self.db.table(name) else {
            return Ok(());
        };
        let meta = t.meta();
        if allowed.contains(&meta.kind) {
            return Ok(());
        }
        Err(QueryError::Invalid(format!(
            "'{}' is a {}: this statement applies to tables{}",
            meta.name,
            meta.kind.name(),
            if allowed.contains(&sundial_storage::TableKind::MaterializedView) {
                " and materialized views"
            } else {
                ""
            }
        )))
    }

    /// Parses and rewrites the statement into SQL DataFusion plans (see [`dialect::parse`]).
    fn parse_sql(&self, sql: &str) -> Result<Parsed> {
        dialect::parse(sql, &self.db, &self.current().state, self.rollup_routing)
    }

    async fn plan_statement(&self, statement: DFStatement) -> Result<LogicalPlan> {
        let current = self.current();
        let rules = dialect::PlanRules {
            sql_file_dir: self.sql_file_dir.as_deref(),
            settings: self.settings,
        };
        dialect::plan(statement, &current.state, rules).await
    }

    async fn run_plan(&self, plan: LogicalPlan) -> Result<Output> {
        use datafusion::logical_expr::Statement as Plan;
        if let LogicalPlan::Statement(Plan::Prepare(_) | Plan::Execute(_) | Plan::Deallocate(_)) =
            &plan
        {
            // DataFusion keeps these in one store for every caller: they belong to sessions.
            return Err(crate::error::internal(
                "an SQL prepared statement reached DataFusion's shared store".into(),
            ));
        }
        let insert = is_insert(&plan);
        let sets = matches!(
            plan,
            LogicalPlan::Statement(
                datafusion::logical_expr::Statement::SetVariable(_)
                    | datafusion::logical_expr::Statement::ResetVariable(_)
            )
        );
        let df = self.ctx.execute_logical_plan(plan).await?;
        if sets {
            self.refresh_session();
        }
        let physical = df.create_physical_plan().await?;
        if insert {
            let batches =
                datafusion::physical_plan::common::collect(self.stream(physical)?).await?;
            let rows = single_count(&batches);
            return Ok(Output::Done {
                tag: "INSERT".into(),
                rows: Some(rows),
            });
        }
        Ok(Output::Rows(self.stream(physical)?))
    }

    async fn create_table(&self, c: CreateTable) -> Result<Output> {
        let partition_by = c.partition_by.unwrap_or(if c.timestamp.is_some() {
            PartitionBy::Day
        } else {
            PartitionBy::None
        });
        let Some(query) = &c.as_query else {
            let def = TableDef {
                name: c.name,
                columns: c.columns,
                timestamp: c.timestamp,
                partition_by,
                indexed: c.indexed,
                dedup_keys: c.dedup_keys,
                ttl: c.ttl,
                cold_after: c.cold_after,
            };
            let (db, if_not_exists) = (self.db.clone(), c.if_not_exists);
            blocking(move || Ok(db.create_table(def, if_not_exists).map(drop)?)).await?;
            return done("CREATE TABLE");
        };
        if c.if_not_exists && self.db.table(&c.name).is_some() {
            return done("CREATE TABLE");
        }
        sundial_sql::limits::check(query)?;
        let df = self
            .ctx
            .sql_with_options(
                query,
                SQLOptions::new()
                    .with_allow_ddl(false)
                    .with_allow_dml(false),
            )
            .await?;
        let mut columns = Vec::new();
        for field in df.schema().fields() {
            let column_type = ColumnType::from_arrow(field.data_type()).ok_or_else(|| {
                QueryError::Invalid(format!(
                    "column '{}' has type {}, which no Sundial column type can hold",
                    field.name(),
                    field.data_type()
                ))
            })?;
            columns.push((field.name().clone(), column_type));
        }
        let def = TableDef {
            name: c.name.clone(),
            columns,
            timestamp: c.timestamp,
            partition_by,
            indexed: c.indexed,
            dedup_keys: c.dedup_keys,
            ttl: c.ttl,
            cold_after: c.cold_after,
        };
        let db = self.db.clone();
        let table = blocking(move || Ok(db.create_table(def, false)?)).await?;
        let stream = df.execute_stream().await?;
        let chunk_bytes = self.db.options().uncommitted_bytes_max / 2;
        let result = commit_in_chunks(stream, &table, &self.inserts, chunk_bytes).await;
        match result {
            Ok(rows) => Ok(Output::Done {
                tag: "CREATE TABLE".into(),
                rows: Some(rows),
            }),
            Err(e) => {
                // The statement failed: leave no table behind.
                drop(table);
                let db = self.db.clone();
                let _ = blocking(move || Ok(db.drop_table(&c.name)?)).await;
                Err(e)
            }
        }
    }

    async fn drop_partitions(
        &self,
        table: &str,
        names: Vec<String>,
        predicate: Option<String>,
    ) -> Result<Output> {
        let t = self.table(table)?;
        let keys = self.partition_keys(&t, &names, predicate).await?;
        let dropped = blocking(move || Ok(t.writer()?.drop_partitions(&keys)?)).await?;
        Ok(Output::Done {
            tag: "ALTER TABLE".into(),
            rows: Some(dropped as u64),
        })
    }

    /// `ALTER TABLE t CONVERT PARTITION TO ...`: converts each partition named, or each whose
    /// rows all satisfy the predicate (but the newest, when converting to Parquet: it still
    /// takes rows); the statement's row count is how many were converted.
    async fn convert_partitions(
        &self,
        table: &str,
        to: ConvertTo,
        names: Vec<String>,
        predicate: Option<String>,
    ) -> Result<Output> {
        let t = self.table(table)?;
        let by_predicate = predicate.is_some();
        let mut keys = self.partition_keys(&t, &names, predicate).await?;
        if by_predicate && to == ConvertTo::Parquet {
            let newest = t.snapshot().partitions().last().map(|p| p.key);
            keys.retain(|k| Some(*k) != newest);
        }
        let converted = blocking(move || {
            let options = ParquetOptions::default();
            let mut converted = 0u64;
            for key in keys {
                converted += u64::from(t.convert_partition(key, to, &options)?);
            }
            Ok(converted)
        })
        .await?;
        Ok(Output::Done {
            tag: "ALTER TABLE".into(),
            rows: Some(converted),
        })
    }

    /// The keys of the partitions of `t` named (each must exist), or whose rows all satisfy
    /// `predicate`.
    async fn partition_keys(
        &self,
        t: &Arc<Table>,
        names: &[String],
        predicate: Option<String>,
    ) -> Result<Vec<i64>> {
        let snapshot = t.snapshot();
        let meta = snapshot.meta().clone();
        let mut keys = Vec::new();
        for name in names {
            let key = meta
                .partition_by
                .parse_name(name)
                .filter(|k| snapshot.partitions().iter().any(|p| p.key == *k))
                .ok_or_else(|| {
                    QueryError::Invalid(format!("table '{}' has no partition '{name}'", meta.name))
                })?;
            keys.push(key);
        }
        if let Some(predicate) = predicate {
            let ts = meta.timestamp_column().ok_or_else(|| {
                QueryError::Invalid(format!(
                    "table '{}' has no designated timestamp, so no partitions",
                    meta.name
                ))
            })?;
            // A partition goes when every one of its rows satisfies the predicate. Its parts
            // (see sundial-storage's `merge.rs`) follow each other in time.
            let rows = self
                .ctx
                .table(TableReference::bare(meta.name.clone()))
                .await?;
            let predicate = rows.parse_sql_expr(&predicate)?;
            let ts = ident(ts.name.clone());
            for parts in snapshot.partitions().chunk_by(|a, b| a.key == b.key) {
                let (first, last) = (&parts[0], &parts[parts.len() - 1]);
                let in_partition = ts.clone().between(
                    lit(ScalarValue::TimestampNanosecond(Some(first.min_ts), None)),
                    lit(ScalarValue::TimestampNanosecond(Some(last.max_ts), None)),
                );
                let kept = rows
                    .clone()
                    .filter(in_partition.and(predicate.clone().is_not_true()))?
                    .count()
                    .await?;
                if kept == 0 {
                    keys.push(first.key);
                }
            }
        }
        Ok(keys)
    }
}

#[async_trait::async_trait]
impl Runner for Engine {
    fn db(&self) -> &Arc<Database> {
        &self.db
    }

    /// Plans a query through the dialect, for Sundial's own statements that run one (views,
    /// materialized views' refreshes): the plan and the result's designated timestamp.
    async fn plan_query(&self, sql: &str) -> Result<(LogicalPlan, Option<String>)> {
        // A view's refresh must read its base table, never a view (itself, say).
        let parsed = dialect::parse(sql, &self.db, &self.current().state, false)?;
        if !matches!(&parsed.statement, DFStatement::Statement(s) if matches!(**s, datafusion::sql::sqlparser::ast::Statement::Query(_)))
        {
            return Err(QueryError::Invalid(format!(
                "expected a query (SELECT ...), not: {sql}"
            )));
        }
        let plan = self.plan_statement(parsed.statement).await?;
        Ok((plan, parsed.designated_timestamp))
    }

    /// The instant SQL text (`'2025-01-01'`, `now()`) stands for, in nanoseconds.
    async fn timestamp_of(&self, sql: &str) -> Result<i64> {
        let (plan, _) = self
            .plan_query(&format!("SELECT CAST({sql} AS TIMESTAMP) AS t"))
            .await?;
        let batches = self.collect_plan(plan).await?;
        let value = batches
            .iter()
            .find(|b| b.num_rows() > 0)
            .map(|b| ScalarValue::try_from_array(b.column(0), 0))
            .transpose()?;
        match value {
            Some(ScalarValue::TimestampNanosecond(Some(t), _)) => Ok(t),
            Some(ScalarValue::TimestampMicrosecond(Some(t), _)) => Ok(t.saturating_mul(1_000)),
            Some(ScalarValue::TimestampMillisecond(Some(t), _)) => Ok(t.saturating_mul(1_000_000)),
            Some(ScalarValue::TimestampSecond(Some(t), _)) => Ok(t.saturating_mul(1_000_000_000)),
            _ => Err(QueryError::Invalid(format!("{sql} is not a timestamp"))),
        }
    }

    /// Runs a plan [`Engine::plan_query`] made, collecting its rows.
    async fn collect_plan(&self, plan: LogicalPlan) -> Result<Vec<RecordBatch>> {
        let current = self.current();
        // Analysed (types coerced) and optimised as every statement's plan is.
        let plan = current.state.optimize(&plan)?;
        let physical = current.physical_plan(&plan).await?;
        Ok(datafusion::physical_plan::common::collect(self.stream(physical)?).await?)
    }

    fn catalog_changed(&self) {
        self.forget_shared_plans();
        self.inserts.sinks.forget_dropped();
    }
}

fn done(tag: &str) -> Result<Output> {
    Ok(Output::Done {
        tag: tag.into(),
        rows: None,
    })
}

fn rows(batch: RecordBatch) -> Result<Output> {
    let schema = batch.schema();
    Ok(Output::Rows(Box::pin(MemoryStream::try_new(
        vec![batch],
        schema,
        None,
    )?)))
}

/// Collects an output into memory.
pub async fn collect(output: Output) -> Result<Collected> {
    match output {
        Output::Rows(mut stream) => {
            let schema = stream.schema();
            let mut batches = Vec::new();
            while let Some(b) = stream.next().await {
                batches.push(b?);
            }
            Ok(Collected {
                schema,
                batches,
                tag: None,
                rows_affected: None,
            })
        }
        Output::Done { tag, rows } => Ok(Collected {
            schema: Arc::new(Schema::empty()),
            batches: Vec::new(),
            tag: Some(tag),
            rows_affected: rows,
        }),
    }
}

/// The one number in the result of DML or `SELECT count(*)`.
fn single_count(batches: &[RecordBatch]) -> u64 {
    batches
        .iter()
        .filter(|b| b.num_columns() > 0 && b.num_rows() > 0)
        .map(|b| {
            let c = b.column(0);
            if let Some(a) = c.as_any().downcast_ref::<UInt64Array>() {
                a.value(0)
            } else if let Some(a) = c.as_any().downcast_ref::<Int64Array>() {
                a.value(0) as u64
            } else {
                0
            }
        })
        .sum()
}

/// `batch` cast to `meta`'s column types (see `sundial_storage::conform`).
pub fn conform(batch: &RecordBatch, meta: &TableMeta) -> Result<RecordBatch> {
    Ok(sundial_storage::conform(batch, meta)?)
}

fn show_create_table(meta: &TableMeta) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![Field::new("ddl", DataType::Utf8, false)]));
    let ddl = sundial_sql::create_table_sql(meta);
    RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(vec![ddl]))])
        .unwrap_or_else(|_| RecordBatch::new_empty(Arc::new(Schema::empty())))
}

/// Commits the rows of `stream` to `table` through its sink, in commits of about
/// `chunk_bytes` each (the rows gathered for one commit are all that is held); returns the
/// rows committed. Other writers' rows share the sink's commits between chunks.
async fn commit_in_chunks(
    mut stream: SendableRecordBatchStream,
    table: &Arc<Table>,
    inserts: &InsertPath,
    chunk_bytes: usize,
) -> Result<u64> {
    let meta = table.meta();
    let mut chunk = Vec::new();
    let (mut chunk_size_bytes, mut rows) = (0usize, 0u64);
    loop {
        let next = stream.next().await.transpose()?;
        if let Some(batch) = &next {
            let batch = conform(batch, &meta)?;
            chunk_size_bytes += batch.get_array_memory_size();
            chunk.push(batch);
        }
        if chunk.is_empty() || (next.is_some() && chunk_size_bytes < chunk_bytes) {
            if next.is_none() {
                return Ok(rows);
            }
            continue;
        }
        let batch = datafusion::arrow::compute::concat_batches(&chunk[0].schema(), &chunk)?;
        chunk.clear();
        chunk_size_bytes = 0;
        let (t, sinks, pending_rows_max) = (
            table.clone(),
            inserts.sinks.clone(),
            inserts.pending_rows_max,
        );
        rows += blocking(move || Ok(sinks.write(&t, batch, pending_rows_max)?)).await?;
        if next.is_none() {
            return Ok(rows);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory-bounded contexts are reused only once no query holds them, with nothing left
    /// reserved by the query that had them, a failed one included.
    #[tokio::test]
    async fn bounded_contexts_are_reused_when_idle() {
        let (mut engine, _dir) = crate::exec::scan::tests::engine();
        engine.set_query_memory_bytes_max(4 << 20);
        let held = engine.query_task();
        let other = engine.query_task();
        assert!(!Arc::ptr_eq(&held, &other));
        let idle = Arc::as_ptr(&other);
        drop(other);
        assert!(!Arc::ptr_eq(&held, &engine.query_task()));
        assert_eq!(held.memory_pool().reserved(), 0);
        assert_eq!(
            Arc::as_ptr(&engine.query_task()),
            idle,
            "an idle context is reused"
        );

        // A reservation outliving its query's context keeps the context busy.
        let task = engine.query_task();
        let reservation = datafusion::execution::memory_pool::MemoryConsumer::new("left")
            .register(task.memory_pool());
        drop(task);
        assert_ne!(Arc::as_ptr(&engine.query_task()), idle);
        drop(reservation);
        assert_eq!(Arc::as_ptr(&engine.query_task()), idle);

        let big =
            "SELECT x, count(*) FROM generate_series(1, 2000000) AS g(x) GROUP BY x ORDER BY x";
        for _ in 0..2 {
            let failed = match engine.run(big).await {
                Ok(output) => collect(output).await.err(),
                Err(e) => Some(e),
            };
            assert!(
                failed.is_some_and(|e| e.to_string().contains("more memory than it may use")),
                "the bound holds on every run"
            );
        }
        let task = engine.query_task();
        assert_eq!(task.memory_pool().reserved(), 0);
        drop(task);
        let small = collect(
            engine
                .run("SELECT count(*) FROM generate_series(1, 1000)")
                .await
                .unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(single_count(&small.batches), 1000);
    }

    /// FILL's rewrite (in `sundial_sql::questdb`) end to end.
    /// Result names as QuestDB gives them, the same with and without FILL.
    #[tokio::test]
    async fn result_columns_are_named_as_questdb_names_them() {
        let (engine, _dir) = crate::exec::scan::tests::engine();
        engine
            .run("CREATE TABLE t (ts TIMESTAMP, host SYMBOL, v DOUBLE) TIMESTAMP(ts)")
            .await
            .expect("create");
        engine
            .run("INSERT INTO t VALUES ('2024-01-01T00:00:00Z', 'a', 1.5)")
            .await
            .expect("insert");
        for (sql, expected) in [
            (
                "SELECT 1, 'a', 1 + 1, 1.5, true, NULL",
                &["1", "'a'", "column", "1.5", "true", "NULL"][..],
            ),
            (
                "SELECT avg(t.v), count(*), count(v), max(v), max(v * 2), upper(host), \
                 CAST(v * 3 AS INT), v, t.host, v + 1 AS w FROM t GROUP BY host, v",
                &[
                    "\"avg(t.v)\"",
                    "count()",
                    "count(v)",
                    "max(v)",
                    "max(v * 2)",
                    "upper(host)",
                    "(v * 3)::int",
                    "v",
                    "host",
                    "w",
                ][..],
            ),
            (
                "SELECT ts, avg(v) FROM t SAMPLE BY 1h",
                &["ts", "avg(v)"][..],
            ),
            (
                "SELECT ts, avg(v) FROM t SAMPLE BY 1h FILL(PREV)",
                &["ts", "avg(v)"][..],
            ),
            (
                "SELECT ts, host, avg(t.v), max(v) FROM t SAMPLE BY 1h FILL(NULL)",
                &["ts", "host", "\"avg(t.v)\"", "max(v)"][..],
            ),
            (
                "SELECT DISTINCT upper(host) FROM t ORDER BY 1 LIMIT 3",
                &["upper(host)"][..],
            ),
            ("SELECT v, v, max(v) FROM t", &["v", "v_2", "max(v)"][..]),
            (
                "SELECT * FROM t a JOIN t b ON a.ts = b.ts",
                &["ts", "host", "v", "ts1", "host1", "v1"][..],
            ),
            (
                "SELECT \"max(v)\" FROM (SELECT max(v) FROM t)",
                &["max(v)"][..],
            ),
        ] {
            let collected = crate::collect(engine.run(sql).await.expect(sql))
                .await
                .expect(sql);
            let schema = collected.batches[0].schema();
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            assert_eq!(names, expected, "{sql}");
        }
    }

    #[tokio::test]
    async fn filled_columns_keep_questdb_names_and_calendar_days() {
        let (engine, _dir) = crate::exec::scan::tests::engine();
        for sql in [
            "CREATE TABLE t (ts TIMESTAMP, v LONG) TIMESTAMP(ts)",
            "INSERT INTO t VALUES ('2024-10-25T12:00:00Z', 1), ('2024-10-28T12:00:00Z', 2)",
        ] {
            engine.run(sql).await.expect(sql);
        }
        let sql = "SELECT ts, sum(v), max(v) AS top FROM t \
                   SAMPLE BY 1d FILL(NULL, 0) ALIGN TO CALENDAR TIME ZONE 'Europe/Berlin'";
        let collected = crate::collect(engine.run(sql).await.expect(sql))
            .await
            .expect(sql);
        let schema = collected.batches[0].schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["ts", "sum(v)", "top"]);
        // Berlin's days: the 27th is 25 hours long (clocks go back), so its successor
        // starts at 23:00 UTC.
        let (_, rows) = crate::exec::scan::tests::plan_and_rows(&engine, sql).await;
        let expected = "\
+---------------------+--------+-----+
| ts                  | sum(v) | top |
+---------------------+--------+-----+
| 2024-10-24T22:00:00 | 1      | 1   |
| 2024-10-25T22:00:00 |        | 0   |
| 2024-10-26T22:00:00 |        | 0   |
| 2024-10-27T23:00:00 | 2      | 2   |
+---------------------+--------+-----+";
        assert_eq!(rows, expected);
    }

    /// An INSERT ... SELECT holds its rows in the query's memory pool until its one commit:
    /// past the bound it fails with 53200 and inserts nothing; within it, every row lands.
    #[tokio::test]
    async fn insert_select_rows_count_against_the_memory_bound() {
        let (mut engine, _dir) = crate::exec::scan::tests::engine();
        engine.set_query_memory_bytes_max(8 << 20);
        engine
            .run("CREATE TABLE t (ts TIMESTAMP, v BIGINT) TIMESTAMP(ts)")
            .await
            .expect("create");
        let big = "INSERT INTO t SELECT to_timestamp_seconds(value), value \
                   FROM generate_series(1, 2000000)";
        let e = match engine.run(big).await {
            Err(e) => e,
            Ok(output) => collect(output).await.expect_err("over the bound"),
        };
        assert_eq!(e.sqlstate(), "53200", "{e}");
        let count = |engine: &Engine| {
            let engine = engine.session().clone();
            async move {
                let batches = engine
                    .sql("SELECT count(*) FROM t")
                    .await
                    .expect("count")
                    .collect()
                    .await
                    .expect("count");
                single_count(&batches)
            }
        };
        assert_eq!(count(&engine).await, 0);
        let small = "INSERT INTO t SELECT to_timestamp_seconds(value), value \
                     FROM generate_series(1, 1000)";
        collect(engine.run(small).await.expect("plans"))
            .await
            .expect("within the bound");
        assert_eq!(count(&engine).await, 1000);
    }

    /// CREATE TABLE AS commits through the sink in chunks: a result of many chunks lands
    /// whole. DROP PARTITION WHERE evaluates its predicate against an oddly named table.
    #[tokio::test]
    async fn create_as_and_drop_partition_where_on_odd_names() {
        use sundial_storage::{Durability, StorageOptions};
        let dir = tempfile::tempdir().expect("temp dir");
        // Commits of about 256 KiB: the 1.6 MB result takes several.
        let options = StorageOptions {
            durability: Durability::None,
            uncommitted_bytes_max: 512 << 10,
            ..StorageOptions::default()
        };
        let db = Database::open(dir.path(), options).expect("open database");
        let engine = Engine::new(db.clone()).expect("engine");
        for sql in [
            r#"CREATE TABLE "o'dd T" AS (SELECT to_timestamp_seconds(value * 3600) AS "t s", value AS v FROM generate_series(0, 99999)) TIMESTAMP("t s") PARTITION BY DAY"#,
            r#"ALTER TABLE "o'dd T" DROP PARTITION WHERE "t s" < '1970-01-03' AND v >= 0"#,
        ] {
            collect(engine.run(sql).await.expect(sql)).await.expect(sql);
        }
        let out = engine
            .execute(r#"SELECT count(*), min(v) FROM "o'dd T""#)
            .await
            .expect("count");
        let batch = &out[0].batches[0];
        let text =
            datafusion::arrow::util::pretty::pretty_format_batches(std::slice::from_ref(batch))
                .expect("format")
                .to_string();
        assert!(text.contains("| count() | min(v) |"), "{text}");
        assert!(text.contains("| 99952   | 48     |"), "{text}");
        let seq = db.table("o'dd T").expect("table").snapshot().seq();
        assert!(seq > 3, "the result was committed by transaction {seq}");
    }
}
