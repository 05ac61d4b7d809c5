//! `ASOF JOIN` and `LT JOIN`: for each left row, the newest right row at (or, for LT,
//! strictly before) its timestamp, among right rows with equal keys; found by one merge over
//! both sides in timestamp order. `SPLICE JOIN`: the rows of both sides in timestamp order,
//! each with the newest row of the other side at or before it (`exec::splice_join`).
//!
//! ```text
//!  questdb::time_join      LEFT JOIN b ON __sundial_asof_join(kind, tolerance) AND a.k = b.k
//!                          (FULL JOIN for SPLICE)
//!        │ AsofJoinRule (analyzer)
//!        ▼
//!  AsofJoin (logical extension node) ◀── AsofFilterPushdown moves WHERE filters on the left
//!        │ AsofPlanner                    side below it (they select left rows only)
//!        ▼
//!  AsofJoinExec ◀─ left: one partition in timestamp order (streamed)
//!               ◀─ right: one partition in timestamp order (held in memory, reserved)
//! ```
//!
//! Filters on the right side's columns stay above the join: they filter joined rows, as in
//! QuestDB, and never decide which right row matches. Above a SPLICE JOIN every filter stays
//! above: its rows come from either side.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::DataType;
use datafusion::catalog::Session;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, DFSchemaRef, JoinType, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::datasource::source_as_provider;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::logical_plan::builder::build_join_schema;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    BinaryExpr, Expr, Extension, Filter, LogicalPlan, Operator, ScalarUDF, TypeSignature,
    UserDefinedLogicalNode, UserDefinedLogicalNodeCore,
};
use datafusion::optimizer::analyzer::AnalyzerRule;
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{Optimizer, OptimizerConfig, OptimizerRule};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{DefaultPhysicalPlanner, ExtensionPlanner, PhysicalPlanner};

pub(crate) use crate::exec::asof_join::AsofJoinExec;
use crate::exec::asof_join::{self, describe};

use crate::provider::SundialTable;
use sundial_sql::names::TimeJoinKind;

/// The function the dialect marks a time join's `ON` with (see `sundial_sql::names`).
const JOIN_MARKER: &str = sundial_sql::names::ASOF_JOIN_MARKER;

/// Adds the time-join rules and planner to a session being built.
pub(crate) fn install(builder: SessionStateBuilder) -> SessionStateBuilder {
    // The pushdown runs right after DataFusion's: later rules move projections between a
    // filter and the join.
    let mut rules = Optimizer::new().rules;
    let at = rules
        .iter()
        .position(|r| r.name() == "push_down_filter")
        .map_or(rules.len(), |i| i + 1);
    rules.insert(at, Arc::new(AsofFilterPushdown));
    builder
        .with_analyzer_rule(Arc::new(AsofJoinRule))
        .with_optimizer_rules(rules)
        .with_query_planner(Arc::new(SundialQueryPlanner))
}

/// The marker function, which the session must know for the marked SQL to plan.
pub(crate) fn marker_function() -> ScalarUDF {
    crate::marker::marker(
        JOIN_MARKER,
        TypeSignature::Any(2),
        "ASOF JOIN and LT JOIN belong in a FROM clause, joining two relations",
    )
}

/// The join's kind and tolerance, if `e` is the marker call.
fn marker(e: &Expr) -> Option<(TimeJoinKind, Option<i64>)> {
    let Expr::ScalarFunction(f) = e else {
        return None;
    };
    if f.name() != JOIN_MARKER {
        return None;
    }
    let kind = match f.args.first()? {
        Expr::Literal(ScalarValue::Utf8(Some(k)), _) => TimeJoinKind::parse(k)?,
        _ => return None,
    };
    let tolerance = match f.args.get(1)? {
        Expr::Literal(ScalarValue::Int64(v), _) => *v,
        Expr::Literal(ScalarValue::Null, _) => None,
        _ => return None,
    };
    Some((kind, tolerance))
}

fn mentions_marker(e: &Expr) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::ScalarFunction(f) if f.name() == JOIN_MARKER)))
        .unwrap_or(false)
}

// --- the logical node ---

/// A time join of `left` and `right`: left's rows, each with the matching right row or NULLs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct AsofJoin {
    left: LogicalPlan,
    right: LogicalPlan,
    /// Equal keys: an expression over left and one over right.
    on: Vec<(Expr, Expr)>,
    left_time: Expr,
    right_time: Expr,
    kind: TimeJoinKind,
    /// The right row may be at most this much older.
    tolerance_ns: Option<i64>,
    schema: DFSchemaRef,
}

impl PartialOrd for AsofJoin {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        // The schema follows from the inputs.
        fn key(j: &AsofJoin) -> impl PartialOrd + '_ {
            let times = (&j.left_time, &j.right_time);
            (&j.left, &j.right, &j.on, times, j.kind, j.tolerance_ns)
        }
        key(self).partial_cmp(&key(other))
    }
}

impl AsofJoin {
    fn try_new(
        left: LogicalPlan,
        right: LogicalPlan,
        on: Vec<(Expr, Expr)>,
        times: (Expr, Expr),
        kind: TimeJoinKind,
        tolerance_ns: Option<i64>,
    ) -> DfResult<Self> {
        let schema = Arc::new(build_join_schema(
            left.schema(),
            right.schema(),
            &join_type(kind),
        )?);
        Ok(AsofJoin {
            left,
            right,
            on,
            left_time: times.0,
            right_time: times.1,
            kind,
            tolerance_ns,
            schema,
        })
    }

    fn with_left(&self, left: LogicalPlan) -> DfResult<Self> {
        AsofJoin::try_new(
            left,
            self.right.clone(),
            self.on.clone(),
            (self.left_time.clone(), self.right_time.clone()),
            self.kind,
            self.tolerance_ns,
        )
    }

    fn clause(&self) -> &'static str {
        self.kind.clause()
    }
}

/// The join type a time join's SQL is planned as, which also gives its output schema:
/// SPLICE keeps the rows of both sides.
fn join_type(kind: TimeJoinKind) -> JoinType {
    match kind {
        TimeJoinKind::Asof | TimeJoinKind::Lt => JoinType::Left,
        TimeJoinKind::Splice => JoinType::Full,
    }
}

impl UserDefinedLogicalNodeCore for AsofJoin {
    fn name(&self) -> &str {
        "AsofJoin"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.left, &self.right]
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        let mut exprs = vec![self.left_time.clone(), self.right_time.clone()];
        for (l, r) in &self.on {
            exprs.push(l.clone());
            exprs.push(r.clone());
        }
        exprs
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let times = (&self.left_time, &self.right_time);
        describe(f, "AsofJoin", times, &self.on, self.kind, self.tolerance_ns)
    }

    fn with_exprs_and_inputs(&self, exprs: Vec<Expr>, inputs: Vec<LogicalPlan>) -> DfResult<Self> {
        let [left, right]: [LogicalPlan; 2] = inputs
            .try_into()
            .map_err(|_| DataFusionError::Internal("AsofJoin has two inputs".into()))?;
        let mut exprs = exprs.into_iter();
        let (Some(left_time), Some(right_time)) = (exprs.next(), exprs.next()) else {
            return Err(DataFusionError::Internal(
                "AsofJoin has two timestamp expressions".into(),
            ));
        };
        let rest: Vec<Expr> = exprs.collect();
        let on = rest
            .chunks_exact(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect();
        AsofJoin::try_new(
            left,
            right,
            on,
            (left_time, right_time),
            self.kind,
            self.tolerance_ns,
        )
    }

    /// Each output column comes from one input column; the planner adds the columns the
    /// timestamps and keys read.
    fn necessary_children_exprs(&self, output_columns: &[usize]) -> Option<Vec<Vec<usize>>> {
        let left_len = self.left.schema().fields().len();
        let (left, right): (Vec<usize>, Vec<usize>) =
            output_columns.iter().partition(|&&i| i < left_len);
        let right = right.into_iter().map(|i| i - left_len).collect();
        Some(vec![left, right])
    }
}

// --- the analyzer rule ---

/// Turns each marked LEFT JOIN (see `questdb::time_join`) into an [`AsofJoin`].
#[derive(Debug)]
struct AsofJoinRule;

impl AnalyzerRule for AsofJoinRule {
    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(to_asof_join)
            .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "sundial_asof_join"
    }
}

fn to_asof_join(plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::Join(join) = &plan else {
        return Ok(Transformed::no(plan));
    };
    let Some(filter) = &join.filter else {
        return Ok(Transformed::no(plan));
    };
    let conjuncts = split_conjunction(filter);
    let Some((at, (kind, tolerance_ns))) = conjuncts
        .iter()
        .enumerate()
        .find_map(|(i, e)| marker(e).map(|m| (i, m)))
    else {
        if mentions_marker(filter) {
            return Err(user_error(
                "ASOF JOIN / LT JOIN / SPLICE JOIN: the ON condition must be key equalities \
                 joined by AND",
            ));
        }
        return Ok(Transformed::no(plan));
    };
    let clause = kind.clause();
    if join.join_type != join_type(kind) {
        return Err(DataFusionError::Internal(format!(
            "{clause} planned as a {} join",
            join.join_type
        )));
    }
    let mut on = join.on.clone();
    for (i, c) in conjuncts.iter().enumerate() {
        if i != at {
            on.push(key_pair(
                c,
                join.left.schema(),
                join.right.schema(),
                clause,
            )?);
        }
    }
    let time = |side: &LogicalPlan, name: &str| {
        designated_time(side).map(Expr::Column).ok_or_else(|| {
            user_error(format!(
                "{clause}: its {name} side has no designated timestamp; join tables (or \
                 subqueries selecting a table's designated timestamp) that have one"
            ))
        })
    };
    let times = (time(&join.left, "left")?, time(&join.right, "right")?);
    let node = AsofJoin::try_new(
        join.left.as_ref().clone(),
        join.right.as_ref().clone(),
        on,
        times,
        kind,
        tolerance_ns,
    )?;
    Ok(Transformed::yes(LogicalPlan::Extension(Extension {
        node: Arc::new(node),
    })))
}

fn user_error(message: impl Into<String>) -> DataFusionError {
    DataFusionError::Plan(message.into())
}

/// `l = r` with `l` over the left side's columns and `r` over the right's (either way round).
fn key_pair(e: &Expr, left: &DFSchema, right: &DFSchema, clause: &str) -> DfResult<(Expr, Expr)> {
    let over = |e: &Expr, schema: &DFSchema| {
        let columns = e.column_refs();
        !columns.is_empty() && columns.iter().all(|c| schema.has_column(c))
    };
    if let Expr::BinaryExpr(BinaryExpr {
        left: l,
        op: Operator::Eq,
        right: r,
    }) = e
    {
        if over(l, left) && over(r, right) {
            return Ok((l.as_ref().clone(), r.as_ref().clone()));
        }
        if over(r, left) && over(l, right) {
            return Ok((r.as_ref().clone(), l.as_ref().clone()));
        }
    }
    Err(user_error(format!(
        "{clause}: ON may only equate a column of the left side with one of the right side \
         (as in ON (sym) or ON a.sym = b.sym), not '{e}'; filter rows in WHERE or in a subquery"
    )))
}

/// The column of `plan`'s output that carries a table's designated timestamp, in that
/// table's order: through aliases, projections, filters, sorts and limits, time joins (their
/// left side's), a SAMPLE BY's bucket, and a sort ascending by a timestamp column.
fn designated_time(plan: &LogicalPlan) -> Option<Column> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            let provider = source_as_provider(&scan.source).ok()?;
            // A table, or the latest rows of one (LATEST ON), which keep its timestamp.
            let name = match provider.downcast_ref::<SundialTable>() {
                Some(table) => table.timestamp_name()?,
                None => provider
                    .downcast_ref::<crate::exec::latest::LatestTable>()?
                    .timestamp_name()?,
            };
            let column = Column::new(Some(scan.table_name.clone()), name);
            scan.projected_schema.has_column(&column).then_some(column)
        }
        LogicalPlan::SubqueryAlias(a) => {
            designated_time(&a.input).map(|c| Column::new(Some(a.alias.clone()), c.name))
        }
        LogicalPlan::Projection(p) => {
            let time = designated_time(&p.input)?;
            let at = p
                .expr
                .iter()
                .position(|e| matches!(e.clone().unalias(), Expr::Column(c) if c == time))?;
            Some(Column::from(p.schema.qualified_field(at)))
        }
        LogicalPlan::Aggregate(a) => {
            let time = designated_time(&a.input)?;
            let at = a.group_expr.iter().position(|e| is_bucket_of(e, &time))?;
            Some(Column::from(a.schema.qualified_field(at)))
        }
        LogicalPlan::Extension(e) => match e.node.as_any().downcast_ref::<AsofJoin>()?.left_time {
            // A time join keeps its left side's rows, order and columns.
            Expr::Column(ref c) => Some(c.clone()),
            _ => None,
        },
        LogicalPlan::Filter(f) => designated_time(&f.input),
        // Rows sorted by a timestamp column (a subquery that declares `timestamp(ts)`) are
        // in that column's order whatever their source.
        LogicalPlan::Sort(s) => designated_time(&s.input).or_else(|| {
            let first = s.expr.first().filter(|e| e.asc)?;
            let Expr::Column(c) = &first.expr else {
                return None;
            };
            let (_, field) = s.input.schema().qualified_field_from_column(c).ok()?;
            matches!(field.data_type(), DataType::Timestamp(..)).then(|| c.clone())
        }),
        LogicalPlan::Limit(l) => designated_time(&l.input),
        _ => None,
    }
}

/// Whether `e` is SAMPLE BY's bucket of `time`: `timestamp_floor(stride, time, ...)`.
fn is_bucket_of(e: &Expr, time: &Column) -> bool {
    match e.clone().unalias() {
        Expr::ScalarFunction(f) if f.name() == "timestamp_floor" => {
            matches!(f.args.get(1), Some(Expr::Column(c)) if c == time)
        }
        _ => false,
    }
}

// --- the filter pushdown ---

/// Moves the conjuncts of a filter above an [`AsofJoin`] that read only left columns into
/// its left input, where DataFusion's own pushdown takes them on to the scan. Each left row's
/// output depends on that row and the right side only, so filtering left rows first is
/// equivalent; right columns' filters stay above.
#[derive(Debug)]
struct AsofFilterPushdown;

impl OptimizerRule for AsofFilterPushdown {
    fn name(&self) -> &str {
        "sundial_asof_filter_pushdown"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let LogicalPlan::Filter(filter) = &plan else {
            return Ok(Transformed::no(plan));
        };
        let LogicalPlan::Extension(extension) = filter.input.as_ref() else {
            return Ok(Transformed::no(plan));
        };
        let Some(join) = extension
            .node
            .as_any()
            .downcast_ref::<AsofJoin>()
            .filter(|j| j.kind != TimeJoinKind::Splice)
        else {
            return Ok(Transformed::no(plan));
        };
        let left = join.left.schema();
        let (push, keep): (Vec<&Expr>, Vec<&Expr>) = split_conjunction(&filter.predicate)
            .into_iter()
            .partition(|e| !e.is_volatile() && e.column_refs().iter().all(|c| left.has_column(c)));
        let Some(pushed) = conjunction(push.into_iter().cloned()) else {
            return Ok(Transformed::no(plan));
        };
        let new_left = LogicalPlan::Filter(Filter::try_new(pushed, Arc::new(join.left.clone()))?);
        let joined = LogicalPlan::Extension(Extension {
            node: Arc::new(join.with_left(new_left)?),
        });
        let plan = match conjunction(keep.into_iter().cloned()) {
            Some(kept) => LogicalPlan::Filter(Filter::try_new(kept, Arc::new(joined))?),
            None => joined,
        };
        Ok(Transformed::yes(plan))
    }
}

// --- physical planning ---

/// DataFusion's planner, with [`AsofPlanner`] for [`AsofJoin`] nodes.
#[derive(Debug)]
struct SundialQueryPlanner;

#[async_trait]
impl QueryPlanner for SundialQueryPlanner {
    async fn create_physical_plan(
        &self,
        plan: &LogicalPlan,
        session: &dyn Session,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        DefaultPhysicalPlanner::with_extension_planners(vec![
            Arc::new(AsofPlanner),
            Arc::new(crate::shared::SharedPlanner::default()),
        ])
        .create_physical_plan(plan, session)
        .await
    }
}

struct AsofPlanner;

#[async_trait]
impl ExtensionPlanner for AsofPlanner {
    async fn plan_extension(
        &self,
        planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        _: &[&LogicalPlan],
        inputs: &[Arc<dyn ExecutionPlan>],
        session: &dyn Session,
        planning: &PhysicalPlanningContext,
    ) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
        let Some(join) = node.as_any().downcast_ref::<AsofJoin>() else {
            return Ok(None);
        };
        let [left, right] = inputs else {
            return Err(DataFusionError::Internal("AsofJoin has two inputs".into()));
        };
        let physical = |e: &Expr, schema: &DFSchema| {
            planner.create_physical_expr(e, schema, session, planning)
        };
        let (left_schema, right_schema) = (join.left.schema(), join.right.schema());
        let mut keys = Vec::with_capacity(join.on.len());
        for (l, r) in &join.on {
            keys.push((physical(l, left_schema)?, physical(r, right_schema)?));
        }
        let exec = AsofJoinExec::try_new(
            asof_join::Inputs {
                left: left.clone(),
                right: right.clone(),
            },
            asof_join::Match {
                keys,
                left_time: physical(&join.left_time, left_schema)?,
                right_time: physical(&join.right_time, right_schema)?,
                kind: join.kind,
                tolerance_ns: join.tolerance_ns,
            },
            join.schema.inner().clone(),
            join.clause(),
        )?;
        Ok(Some(Arc::new(exec)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use datafusion::arrow::array::{Array, AsArray, Int64Array};
    use datafusion::arrow::datatypes::Int64Type;

    use crate::exec::scan::tests::{engine, plan_and_rows};

    /// A row of either side: id, symbol (None: NULL), seconds since 2024-01-01.
    type Row = (i64, Option<u8>, i64);

    fn random_rows(seed: &mut u64, n: i64, distinct_times: bool) -> Vec<Row> {
        let mut next = || {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed
        };
        let mut used = std::collections::HashSet::new();
        let mut rows = Vec::new();
        for id in 0..n {
            let sym = match next() % 6 {
                5 => None,
                s => Some(s as u8),
            };
            // Three days, in whole minutes so that both sides share timestamps.
            let mut t = (next() % (3 * 24 * 60)) as i64 * 60;
            while distinct_times && !used.insert(t) {
                t += 1;
            }
            rows.push((id, sym, t));
        }
        rows
    }

    fn insert(table: &str, rows: &[Row]) -> Vec<String> {
        rows.chunks(500)
            .map(|chunk| {
                let values: Vec<String> = chunk
                    .iter()
                    .map(|(id, sym, t)| {
                        let sym = sym.map_or("NULL".to_string(), |s| format!("'s{s}'"));
                        format!("({id}, {sym}, to_timestamp_seconds(1704067200 + {t}))")
                    })
                    .collect();
                format!("INSERT INTO {table} VALUES {}", values.join(", "))
            })
            .collect()
    }

    /// Tables `l` and `r` holding `left` and `right`, inserted in chunks that arrive out of
    /// order, so partitions are rewritten by merges.
    async fn create_sides(engine: &crate::Engine, left: &[Row], right: &[Row]) {
        let mut setup = vec![
            "CREATE TABLE l (id LONG, sym SYMBOL, ts TIMESTAMP) TIMESTAMP(ts) PARTITION BY DAY"
                .to_string(),
            "CREATE TABLE r (id LONG, sym SYMBOL, ts TIMESTAMP) TIMESTAMP(ts) PARTITION BY DAY"
                .to_string(),
        ];
        setup.extend(insert("l", left));
        setup.extend(insert("r", right));
        for sql in &setup {
            engine.run(sql).await.expect(sql);
        }
    }

    /// The matches a time join must find, by brute force: left id to right id.
    fn expected(
        left: &[Row],
        right: &[Row],
        keyed: bool,
        strict: bool,
        tolerance_s: Option<i64>,
    ) -> BTreeMap<i64, Option<i64>> {
        left.iter()
            .map(|&(id, sym, t)| {
                let found = right
                    .iter()
                    .filter(|&&(_, rs, rt)| {
                        (!keyed || rs == sym)
                            && (if strict { rt < t } else { rt <= t })
                            && tolerance_s.is_none_or(|tol| t - rt <= tol)
                    })
                    .max_by_key(|&&(_, _, rt)| rt)
                    .map(|&(rid, _, _)| rid);
                (id, found)
            })
            .collect()
    }

    async fn matches(engine: &crate::Engine, sql: &str) -> BTreeMap<i64, Option<i64>> {
        let out = crate::collect(engine.run(sql).await.expect(sql))
            .await
            .expect(sql);
        let mut found = BTreeMap::new();
        let mut last_ts = i64::MIN;
        for batch in &out.batches {
            let ids = batch.column(0).as_primitive::<Int64Type>();
            let rids: &Int64Array = batch.column(1).as_primitive::<Int64Type>();
            let ts = batch.column(2).as_primitive::<Int64Type>();
            for i in 0..batch.num_rows() {
                assert!(ts.value(i) >= last_ts, "{sql}: rows out of timestamp order");
                last_ts = ts.value(i);
                let rid = (!rids.is_null(i)).then(|| rids.value(i));
                assert!(
                    found.insert(ids.value(i), rid).is_none(),
                    "{sql}: row twice"
                );
            }
        }
        found
    }

    #[tokio::test]
    async fn time_joins_match_a_brute_force_model() {
        let (engine, _dir) = engine();
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        let left = random_rows(&mut seed, 1500, false);
        let right = random_rows(&mut seed, 1000, true);
        create_sides(&engine, &left, &right).await;
        let select = "SELECT l.id, r.id, CAST(l.ts AS BIGINT) FROM l";
        for (join, keyed, strict, tolerance_s) in [
            ("ASOF JOIN r ON (sym)", true, false, None),
            ("LT JOIN r ON (sym)", true, true, None),
            ("ASOF JOIN r", false, false, None),
            ("LT JOIN r", false, true, None),
            (
                "ASOF JOIN r ON l.sym = r.sym TOLERANCE 30m",
                true,
                false,
                Some(1800),
            ),
            ("LT JOIN r TOLERANCE 2m", false, true, Some(120)),
        ] {
            let sql = format!("{select} {join}");
            let want = expected(&left, &right, keyed, strict, tolerance_s);
            assert_eq!(matches(&engine, &sql).await, want, "{sql}");
        }
        // Few left rows, whose keys and times narrow the right side's scan; an empty left
        // side; a right side that is a subquery of projections and filters.
        let few = |&(id, sym, _): &Row| id < 300 && matches!(sym, Some(1 | 3) | None);
        let even = |&(id, _, _): &Row| id % 2 == 0;
        let subquery = "(SELECT ts, id * 1 AS n, id, sym FROM r WHERE id % 2 = 0) r";
        for (join, filter, keyed, strict, tolerance_s, left_rows, right_rows) in [
            (
                "ASOF JOIN r ON (sym)".to_string(),
                "WHERE l.id < 300 AND (l.sym IN ('s1', 's3') OR l.sym IS NULL)",
                true,
                false,
                None,
                &few as &dyn Fn(&Row) -> bool,
                &(|_: &Row| true) as &dyn Fn(&Row) -> bool,
            ),
            (
                "LT JOIN r ON (sym) TOLERANCE 1h".to_string(),
                "WHERE l.id < 300 AND l.sym IN ('s1', 's3')",
                true,
                true,
                Some(3600),
                &|r: &Row| few(r) && r.1.is_some(),
                &|_: &Row| true,
            ),
            (
                format!("ASOF JOIN {subquery} ON (sym)"),
                "WHERE l.id < 300 AND l.sym IN ('s1', 's3')",
                true,
                false,
                None,
                &|r: &Row| few(r) && r.1.is_some(),
                &even,
            ),
            (
                format!("LT JOIN {subquery}"),
                "WHERE l.id BETWEEN 100 AND 120",
                false,
                true,
                None,
                &|r: &Row| (100..=120).contains(&r.0),
                &even,
            ),
            (
                "ASOF JOIN r ON (sym)".to_string(),
                "WHERE l.id < 0",
                true,
                false,
                None,
                &|_: &Row| false,
                &|_: &Row| true,
            ),
        ] {
            let sql = format!("{select} {join} {filter}");
            let left: Vec<Row> = left.iter().copied().filter(|r| left_rows(r)).collect();
            let right: Vec<Row> = right.iter().copied().filter(|r| right_rows(r)).collect();
            let want = expected(&left, &right, keyed, strict, tolerance_s);
            assert_eq!(matches(&engine, &sql).await, want, "{sql}");
        }
        let (plan, _) = plan_and_rows(&engine, &format!("{select} ASOF JOIN r ON (sym)")).await;
        assert!(plan.contains("AsofJoinExec"), "{plan}");
        assert!(!plan.contains("HashJoinExec"), "{plan}");
    }

    /// A narrowed right side keeps the rows at the newest left time (for ASOF, not LT) and at
    /// the tolerance's edge.
    #[tokio::test]
    async fn narrowing_keeps_the_rows_at_its_edges() {
        let (engine, _dir) = engine();
        let left: Vec<Row> = vec![(1, Some(1), 100), (2, Some(1), 200), (3, Some(2), 200)];
        let right: Vec<Row> = vec![
            (10, Some(1), 100),
            (11, Some(2), 150),
            (12, Some(1), 200),
            (13, Some(1), 300),
            (14, Some(3), 50),
        ];
        create_sides(&engine, &left, &right).await;
        let select = "SELECT l.id, r.id, CAST(l.ts AS BIGINT) FROM l";
        for (join, keyed, strict, tolerance_s) in [
            ("ASOF JOIN r ON (sym)", true, false, None),
            ("LT JOIN r ON (sym)", true, true, None),
            ("ASOF JOIN r", false, false, None),
            ("LT JOIN r", false, true, None),
            ("ASOF JOIN r ON (sym) TOLERANCE 50s", true, false, Some(50)),
            ("LT JOIN r ON (sym) TOLERANCE 100s", true, true, Some(100)),
            ("ASOF JOIN r TOLERANCE 100s", false, false, Some(100)),
        ] {
            let sql = format!("{select} {join}");
            let want = expected(&left, &right, keyed, strict, tolerance_s);
            assert_eq!(matches(&engine, &sql).await, want, "{sql}");
        }
    }
}
