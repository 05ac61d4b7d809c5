//! Plans shared by statements that differ only in the constants their filters compare with.
//!
//! ```text
//!  SQL ─parse, rewrite─▶ AST ─Shape::of─▶ AST with $1, $2 … in WHERE + the literals' values
//!                                            │ key: that AST's text
//!            PlanCache ◀─────────────────────┤
//!   hit, tables unchanged: bind the values    miss: plan and optimize with placeholders, keep
//!   to the plan's parameter types             it, then bind
//! ```
//!
//! TSBS and dashboards send the same query over and over with another host or time range.
//! Planning one costs about a millisecond, far more than running it over an index, so the
//! literals compared with columns in each WHERE become parameters and the plan is made once
//! per shape, as a prepared statement's is. Only such comparisons are parameterized: their
//! types come from the column, a literal elsewhere could change the plan (`timestamp_floor('1h',
//! ..)`, `LIMIT 5`) or a result column's name, and stays part of the key.
//!
//! A value is bound only if converting it to the parameter's type keeps it exactly (a number
//! to a numeric column, a string to a string, SYMBOL, timestamp or date column); otherwise the
//! statement is planned with its literals, which gives the same coercions and errors as ever.
//! A cached plan is used while every table it reads is the same table with the same columns.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::LogicalPlan;
use datafusion::scalar::ScalarValue;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, Query, SetExpr, Statement, TableFactor, TableWithJoins, UnaryOperator,
    Value,
};
use sundial_storage::{Database, Table, TableMeta};

use crate::exec::latest::LatestTable;
use crate::provider::SundialTable;

/// Longest key a plan is cached under: longer statements are planned each time.
const KEY_BYTES_MAX: usize = 16 << 10;

/// A statement with the literals its filters compare columns with taken out as parameters.
pub(crate) struct Shape {
    /// The statement with `$1`, `$2`, ... in place of the literals.
    pub statement: DFStatement,
    /// The statement's text: equal for statements that differ only in those literals.
    pub key: String,
    /// The literals' values, `$1` first, typed as DataFusion types a literal (Int64, Float64,
    /// Utf8).
    pub literals: Vec<ScalarValue>,
}

impl Shape {
    /// The shape of a query without parameters of its own; `None` for other statements.
    pub fn of(statement: &DFStatement) -> Option<Shape> {
        let DFStatement::Statement(s) = statement else {
            return None;
        };
        let Statement::Query(query) = s.as_ref() else {
            return None;
        };
        let mut query = query.clone();
        let mut literals = Vec::new();
        parameterize_query(&mut query, &mut literals);
        let statement = DFStatement::Statement(Box::new(Statement::Query(query)));
        let key = statement.to_string();
        (key.len() <= KEY_BYTES_MAX).then_some(Shape {
            statement,
            key,
            literals,
        })
    }
}

fn parameterize_query(query: &mut Query, literals: &mut Vec<ScalarValue>) {
    if let Some(with) = &mut query.with {
        for cte in &mut with.cte_tables {
            parameterize_query(&mut cte.query, literals);
        }
    }
    parameterize_set_expr(&mut query.body, literals);
}

fn parameterize_set_expr(body: &mut SetExpr, literals: &mut Vec<ScalarValue>) {
    match body {
        SetExpr::Select(select) => {
            for from in &mut select.from {
                parameterize_from(from, literals);
            }
            // A WHERE before LATEST becomes the latest scan's own filter, which holds no
            // parameters (see `crate::latest`): it keeps its literals, one shape per value.
            if let Some(selection) = &mut select.selection
                && !marks_latest(selection)
            {
                parameterize_predicate(selection, literals);
            }
        }
        SetExpr::Query(query) => parameterize_query(query, literals),
        SetExpr::SetOperation { left, right, .. } => {
            parameterize_set_expr(left, literals);
            parameterize_set_expr(right, literals);
        }
        _ => {}
    }
}

/// Whether a WHERE carries the dialect's LATEST marker.
fn marks_latest(selection: &Expr) -> bool {
    let mut marked = false;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions(selection, |e| {
        if let Expr::Function(f) = e
            && f.name.to_string() == sundial_sql::names::LATEST_BY_MARKER
        {
            marked = true;
            return std::ops::ControlFlow::Break(());
        }
        std::ops::ControlFlow::Continue(())
    });
    marked
}

fn parameterize_from(from: &mut TableWithJoins, literals: &mut Vec<ScalarValue>) {
    parameterize_relation(&mut from.relation, literals);
    for join in &mut from.joins {
        parameterize_relation(&mut join.relation, literals);
    }
}

fn parameterize_relation(relation: &mut TableFactor, literals: &mut Vec<ScalarValue>) {
    match relation {
        TableFactor::Derived { subquery, .. } => parameterize_query(subquery, literals),
        TableFactor::NestedJoin {
            table_with_joins, ..
        } => parameterize_from(table_with_joins, literals),
        _ => {}
    }
}

/// Parameterizes the comparisons of a column with a literal in a WHERE made of AND, OR, NOT
/// and parentheses; anything else keeps its literals.
fn parameterize_predicate(expr: &mut Expr, literals: &mut Vec<ScalarValue>) {
    match expr {
        Expr::BinaryOp { left, op, right } => match op {
            BinaryOperator::And | BinaryOperator::Or => {
                parameterize_predicate(left, literals);
                parameterize_predicate(right, literals);
            }
            BinaryOperator::Eq
            | BinaryOperator::NotEq
            | BinaryOperator::Lt
            | BinaryOperator::LtEq
            | BinaryOperator::Gt
            | BinaryOperator::GtEq => {
                if is_column(left) {
                    parameterize_literal(right, literals);
                } else if is_column(right) {
                    parameterize_literal(left, literals);
                }
            }
            _ => {}
        },
        // QuestDB's `x != 'a'` (see `sundial_sql::questdb::nulls`).
        Expr::IsDistinctFrom(left, right) | Expr::IsNotDistinctFrom(left, right) => {
            if is_column(left) {
                parameterize_literal(right, literals);
            } else if is_column(right) {
                parameterize_literal(left, literals);
            }
        }
        Expr::Nested(inner) | Expr::IsNotTrue(inner) => parameterize_predicate(inner, literals),
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr: inner,
        } => parameterize_predicate(inner, literals),
        Expr::InList { expr, list, .. } if is_column(expr) => {
            for item in list {
                parameterize_literal(item, literals);
            }
        }
        Expr::Between {
            expr, low, high, ..
        } if is_column(expr) => {
            parameterize_literal(low, literals);
            parameterize_literal(high, literals);
        }
        _ => {}
    }
}

fn is_column(expr: &Expr) -> bool {
    matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
}

/// Replaces a number or string literal by the next placeholder.
fn parameterize_literal(expr: &mut Expr, literals: &mut Vec<ScalarValue>) {
    let Expr::Value(value) = expr else {
        return;
    };
    let literal = match &value.value {
        Value::SingleQuotedString(s) => ScalarValue::Utf8(Some(s.clone())),
        Value::Number(text, false) => match number(text) {
            Some(n) => n,
            None => return,
        },
        _ => return,
    };
    literals.push(literal);
    value.value = Value::Placeholder(format!("${}", literals.len()));
}

/// A number literal as DataFusion's SQL planner types it: Int64 if it fits, else Float64 if
/// it has a fraction or exponent; `None` for the rest (UInt64, decimals), which stay literal.
pub(crate) fn number(text: &str) -> Option<ScalarValue> {
    if let Ok(n) = text.parse::<i64>() {
        return Some(ScalarValue::Int64(Some(n)));
    }
    if !text.contains(['.', 'e', 'E']) {
        return None;
    }
    let n = text.parse::<f64>().ok().filter(|n| n.is_finite())?;
    Some(ScalarValue::Float64(Some(n)))
}

/// The literals converted to the parameters' types; `None` if a type is unknown or a value
/// would not survive the conversion exactly (then the statement is planned with its
/// literals).
pub(crate) fn bind(
    literals: &[ScalarValue],
    types: &[Option<DataType>],
) -> Option<Vec<ScalarValue>> {
    if literals.len() != types.len() {
        return None;
    }
    literals
        .iter()
        .zip(types)
        .map(|(literal, data_type)| convert(literal, data_type.as_ref()?))
        .collect()
}

fn convert(literal: &ScalarValue, data_type: &DataType) -> Option<ScalarValue> {
    if literal.data_type() == *data_type {
        return Some(literal.clone());
    }
    match literal {
        // A dictionary value is its value type's value, wrapped (what the cast gives, without
        // building a one-value dictionary array).
        ScalarValue::Utf8(_) if let DataType::Dictionary(key, value) = data_type => {
            let value = convert(literal, value)?;
            Some(ScalarValue::Dictionary(key.clone(), Box::new(value)))
        }
        ScalarValue::Utf8(_) if takes_text(data_type) => literal.cast_to(data_type).ok(),
        ScalarValue::Int64(_) | ScalarValue::Float64(_) if data_type.is_numeric() => {
            let converted = literal.cast_to(data_type).ok()?;
            let back = converted.cast_to(&literal.data_type()).ok()?;
            (back == *literal).then_some(converted)
        }
        _ => None,
    }
}

/// Types a string literal compared with a column of that type is converted to, by the same
/// cast the planner folds.
fn takes_text(data_type: &DataType) -> bool {
    match data_type {
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Timestamp(_, _)
        | DataType::Date32
        | DataType::Date64 => true,
        DataType::Dictionary(_, value) => takes_text(value),
        _ => false,
    }
}

/// The tables a plan reads, each with the metadata it was planned against.
#[derive(Debug)]
pub(crate) struct PlannedTables(Vec<(Arc<Table>, Arc<TableMeta>)>);

impl PlannedTables {
    /// `None` if the plan reads anything but Sundial tables (catalog tables, table
    /// functions): such plans may hold data of the moment they were made.
    pub fn of(plan: &LogicalPlan) -> Option<PlannedTables> {
        let mut tables = Vec::new();
        let mut shareable = true;
        let _ = plan.apply_with_subqueries(|node| {
            let LogicalPlan::TableScan(scan) = node else {
                return Ok(TreeNodeRecursion::Continue);
            };
            let provider = source_as_provider(&scan.source)?;
            if let Some(t) = provider.downcast_ref::<SundialTable>() {
                tables.push((t.table().clone(), t.planned_meta().clone()));
            } else if let Some(t) = provider.downcast_ref::<LatestTable>() {
                let (table, meta) = t.planned();
                tables.push((table.clone(), meta.clone()));
            } else {
                shareable = false;
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        });
        shareable.then_some(PlannedTables(tables))
    }

    /// Whether every table is still the database's table of that name, with the columns (and
    /// indexes, and designated timestamp) it was planned with.
    pub fn are_current(&self, db: &Database) -> bool {
        self.0.iter().all(|(table, planned)| {
            db.table(&planned.name).is_some_and(|t| {
                let now = t.meta();
                Arc::ptr_eq(&t, table) && (Arc::ptr_eq(&now, planned) || *now == **planned)
            })
        })
    }
}

/// Plans by shape key, at most `entries_max`, the oldest dropped first.
pub(crate) struct PlanCache<T> {
    entries: Mutex<Entries<T>>,
    entries_max: usize,
}

struct Entries<T> {
    by_key: HashMap<String, Arc<T>>,
    /// Keys in insertion order.
    order: VecDeque<String>,
}

impl<T> PlanCache<T> {
    pub fn new(entries_max: usize) -> Self {
        PlanCache {
            entries: Mutex::new(Entries {
                by_key: HashMap::new(),
                order: VecDeque::new(),
            }),
            entries_max,
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.entries_max > 0
    }

    pub fn get(&self, key: &str) -> Option<Arc<T>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.by_key.get(key).cloned()
    }

    pub fn insert(&self, key: String, value: Arc<T>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.by_key.insert(key.clone(), value).is_some() {
            return;
        }
        entries.order.push_back(key);
        while entries.order.len() > self.entries_max {
            if let Some(oldest) = entries.order.pop_front() {
                entries.by_key.remove(&oldest);
            }
        }
        debug_assert_eq!(entries.order.len(), entries.by_key.len());
    }

    pub fn clear(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.by_key.clear();
        entries.order.clear();
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_key
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::TimeUnit;
    use datafusion::sql::parser::DFParser;

    fn shape(sql: &str) -> Shape {
        let statement = DFParser::parse_sql(sql).unwrap().pop_front().unwrap();
        Shape::of(&statement).unwrap()
    }

    #[test]
    fn filters_literals_become_parameters() {
        let a = shape(
            "SELECT ts, max(v) FROM cpu WHERE hostname IN ('host_1', 'host_2') AND ts >= '2016-01-01' \
             AND (v > 90.5 OR NOT id = 7) AND ts BETWEEN '2016-01-01' AND '2016-01-02' GROUP BY ts",
        );
        let b = shape(
            "SELECT ts, max(v) FROM cpu WHERE hostname IN ('host_9', 'host_3') AND ts >= '2017-01-01' \
             AND (v > 1.0 OR NOT id = 8) AND ts BETWEEN '2016-01-03' AND '2016-01-04' GROUP BY ts",
        );
        assert_eq!(a.key, b.key);
        assert!(a.key.contains("hostname IN ($1, $2)"), "{}", a.key);
        assert_eq!(a.literals.len(), 7);
        assert_eq!(a.literals[3], ScalarValue::Float64(Some(90.5)));
        assert_eq!(a.literals[4], ScalarValue::Int64(Some(7)));
    }

    #[test]
    fn literals_outside_column_comparisons_stay() {
        for (a, b) in [
            ("SELECT 1 FROM t WHERE x > 1", "SELECT 2 FROM t WHERE x > 1"),
            (
                "SELECT date_bin('1 hour', ts) FROM t WHERE x > 1",
                "SELECT date_bin('2 hours', ts) FROM t WHERE x > 1",
            ),
            (
                "SELECT * FROM t WHERE x > 1 LIMIT 5",
                "SELECT * FROM t WHERE x > 1 LIMIT 6",
            ),
            (
                "SELECT * FROM t WHERE x + 1 > 5",
                "SELECT * FROM t WHERE x + 1 > 6",
            ),
            (
                "SELECT * FROM t WHERE x > -5",
                "SELECT * FROM t WHERE x > -6",
            ),
            (
                "SELECT * FROM t WHERE x > 1 ORDER BY 1",
                "SELECT * FROM t WHERE x > 1 ORDER BY 2",
            ),
        ] {
            assert_ne!(shape(a).key, shape(b).key, "{a}");
        }
        let nested = shape(
            "WITH w AS (SELECT * FROM t WHERE x = 'a') SELECT * FROM (SELECT * FROM w WHERE y < 3) s \
             UNION ALL SELECT * FROM u WHERE z = 1",
        );
        assert_eq!(nested.literals.len(), 3, "{}", nested.key);
    }

    #[test]
    fn values_bind_only_when_exact() {
        let ts = DataType::Timestamp(TimeUnit::Nanosecond, None);
        let symbol = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let text = |s: &str| ScalarValue::Utf8(Some(s.into()));
        let bound = bind(
            &[
                text("2016-01-01T02:17:08Z"),
                text("host_1"),
                ScalarValue::Int64(Some(90)),
            ],
            &[
                Some(ts.clone()),
                Some(symbol.clone()),
                Some(DataType::Float64),
            ],
        )
        .unwrap();
        assert_eq!(bound[1], text("host_1").cast_to(&symbol).unwrap());
        assert_eq!(
            bound[0],
            ScalarValue::TimestampNanosecond(Some(1_451_614_628_000_000_000), None)
        );
        assert_eq!(bound[2], ScalarValue::Float64(Some(90.0)));
        for (literal, data_type) in [
            (ScalarValue::Float64(Some(2.5)), DataType::Int32),
            (ScalarValue::Int64(Some(1 << 40)), DataType::Int32),
            (ScalarValue::Int64(Some(5)), ts.clone()),
            (text("5"), DataType::Int64),
            (text("not a time"), ts.clone()),
        ] {
            assert!(
                bind(std::slice::from_ref(&literal), &[Some(data_type)]).is_none(),
                "{literal:?}"
            );
        }
        assert!(bind(&[text("a")], &[None]).is_none());
    }

    /// `sql`'s result as text.
    async fn rows(engine: &crate::Engine, sql: &str) -> String {
        use datafusion::arrow::util::pretty::pretty_format_batches;
        let collected = crate::collect(engine.run(sql).await.expect(sql))
            .await
            .expect(sql);
        pretty_format_batches(&collected.batches)
            .expect("format")
            .to_string()
    }

    /// 1,500 rows over 3 hours (one partition each), inserted out of order, with NULLs.
    async fn cpu(engine: &crate::Engine) {
        let rows = |from: u32, to: u32| {
            format!(
                "INSERT INTO cpu SELECT to_timestamp_seconds(1451606400 + value * 7), \
                 CASE value % 6 WHEN 0 THEN NULL ELSE 'host_' || (value % 6) END, \
                 CASE WHEN value % 9 = 0 THEN NULL ELSE (value * 37) % 100 + 0.5 END, \
                 CAST(value % 10 AS INT) FROM generate_series({from}, {to} - 1)"
            )
        };
        for sql in [
            "CREATE TABLE cpu (ts TIMESTAMP, host SYMBOL, usage DOUBLE, n INT), INDEX(host) \
             TIMESTAMP(ts) PARTITION BY HOUR"
                .to_string(),
            rows(500, 1500),
            rows(0, 500),
        ] {
            rows_of(engine, &sql).await;
        }
    }

    async fn rows_of(engine: &crate::Engine, sql: &str) {
        crate::collect(engine.run(sql).await.expect(sql))
            .await
            .expect(sql);
    }

    /// Queries of a few shapes with varying literals, some of which cannot be bound (an INT
    /// compared with 2.5) or select nothing.
    fn queries() -> Vec<String> {
        let mut state = 12345u64;
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        let mut out = Vec::new();
        for _ in 0..12 {
            let (a, b) = (next(10_500), next(3_600));
            let t = |s: u64| {
                chrono::DateTime::from_timestamp(1451606400 + s as i64, 0)
                    .expect("time")
                    .format("%Y-%m-%dT%H:%M:%SZ")
                    .to_string()
            };
            let pg = |s: u64| {
                chrono::DateTime::from_timestamp(1451606400 + s as i64, 123_456_000)
                    .expect("time")
                    .format("%Y-%m-%d %H:%M:%S%.6f +0000")
                    .to_string()
            };
            let (lo, hi) = (t(a), t(a + b));
            let host = format!("host_{}", next(8));
            let usage = match next(3) {
                0 => format!("{}", next(100)),
                1 => format!("{}.5", next(100)),
                _ => format!("{}.25", next(100)),
            };
            let n = if next(2) == 0 {
                "2.5".to_string()
            } else {
                next(10).to_string()
            };
            out.extend([
                format!(
                    "SELECT ts, max(usage) AS m, count(*) AS c FROM cpu WHERE host IN ('{host}') \
                     AND ts >= '{lo}' AND ts < '{hi}' SAMPLE BY 10m"
                ),
                format!(
                    "SELECT * FROM cpu WHERE usage > {usage} AND ts >= '{}' AND ts < '{}' \
                     ORDER BY ts, host",
                    pg(a),
                    pg(a + b)
                ),
                format!("SELECT count(*), sum(usage) FROM cpu WHERE n >= {n} OR host = '{host}'"),
                format!(
                    "SELECT * FROM cpu WHERE host = '{host}' AND ts BETWEEN '{lo}' AND '{hi}' \
                     LIMIT -3"
                ),
                // The WHERE before LATEST keeps its literals (see `marks_latest`): one shape
                // per value.
                "SELECT * FROM cpu WHERE usage < 50.5 LATEST ON ts PARTITION BY host \
                 ORDER BY host"
                    .to_string(),
                format!(
                    "SELECT host, count(*) FROM (SELECT * FROM cpu WHERE NOT n = {}) s \
                     WHERE host IN ('{host}', 'host_1', 'nope') GROUP BY host ORDER BY host",
                    next(10)
                ),
            ]);
        }
        out
    }

    /// Two engines holding `cpu`: one that plans every query with its literals (no shared
    /// plans), the reference, and one with shared plans.
    async fn planned_each_time_and_shared() -> ([crate::Engine; 2], [tempfile::TempDir; 2]) {
        let (mut literal, literal_dir) = crate::exec::scan::tests::engine();
        literal.set_plan_cache_entries_max(0);
        let (shared, shared_dir) = crate::exec::scan::tests::engine();
        cpu(&literal).await;
        cpu(&shared).await;
        ([literal, shared], [literal_dir, shared_dir])
    }

    #[tokio::test]
    async fn shared_plans_answer_as_plans_with_literals() {
        let ([literal, shared], _dirs) = planned_each_time_and_shared().await;
        let queries = queries();
        for sql in &queries {
            assert_eq!(rows(&shared, sql).await, rows(&literal, sql).await, "{sql}");
        }
        assert_eq!(literal.shared_plans(), 0);
        assert_eq!(shared.shared_plans(), 6);
        // Every shape's text was learned, so most of these skipped parsing.
        assert_eq!(shared.learned_texts(), 6);
    }

    /// Texts of a learned shape fill its plan only when their other literals are the same;
    /// an ambiguous literal (equal to another) is never learned; answers stay those of plans
    /// made with literals.
    #[tokio::test]
    async fn learned_texts_fill_plans_only_where_they_fit() {
        let ([literal, shared], _dirs) = planned_each_time_and_shared().await;
        let mut queries = Vec::new();
        for round in 0..4 {
            let host = format!("host_{}", round % 3 + 1);
            let limit = 10 + round % 2;
            queries.extend([
                format!(
                    "SELECT ts, usage, '{host}' AS h FROM cpu WHERE host = '{host}' \
                     AND usage > {round}.5 ORDER BY ts LIMIT 3"
                ),
                format!(
                    "SELECT ts, usage FROM cpu WHERE host = 'host_{round}' AND n = {round} \
                     ORDER BY ts LIMIT 3"
                ),
                format!(
                    "SELECT ts, '7' AS r FROM cpu WHERE n > {round} AND host <> 'host_{}' \
                     ORDER BY ts LIMIT {limit}",
                    round + 1
                ),
            ]);
        }
        for sql in &queries {
            assert_eq!(rows(&shared, sql).await, rows(&literal, sql).await, "{sql}");
        }
        // The first shape repeats its host outside the WHERE: never learned. The other two
        // are; the third's LIMIT alternates, so only texts with the learned LIMIT fit.
        assert_eq!(shared.learned_texts(), 2);
    }

    #[tokio::test]
    async fn shared_plans_keep_filters_in_the_scan() {
        let (engine, _dir) = crate::exec::scan::tests::engine();
        cpu(&engine).await;
        for (lo, hi, usage) in [("01:00:00", "01:30:00", 1), ("00:10:00", "00:20:00", 2)] {
            for extra in [String::new(), format!("usage > {usage}.5 AND ")] {
                let sql = format!(
                    "SELECT * FROM cpu WHERE {extra}host IN ('host_2') \
                     AND ts >= '2016-01-01T{lo}Z' AND ts < '2016-01-01T{hi}Z'"
                );
                let (plan, shared) = engine.physical_plan_text(&sql).await;
                assert!(shared, "{sql}");
                assert!(!plan.contains("FilterExec"), "{plan}");
                assert!(plan.contains("indexed"), "{plan}");
                assert_eq!(plan.contains("filter=usage@"), !extra.is_empty(), "{plan}");
            }
        }
        let (plan, _) = engine
            .physical_plan_text(
                "SELECT * FROM cpu WHERE host IN ('host_2') AND ts >= '2016-01-01T02:00:00Z'",
            )
            .await;
        assert!(plan.contains("frames=1,"), "only the last hour: {plan}");
    }

    #[tokio::test]
    async fn shared_plans_follow_table_changes() {
        let (engine, _dir) = crate::exec::scan::tests::engine();
        for sql in [
            "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY",
            "INSERT INTO t VALUES ('2020-01-01T00:00:00Z', 'a', 1.0), ('2020-01-01T00:00:01Z', 'b', 2.0)",
        ] {
            rows_of(&engine, sql).await;
        }
        let latest = "SELECT * FROM t WHERE v > 0 LATEST ON ts PARTITION BY k";
        assert!(rows(&engine, latest).await.contains("| 1.0 |"));
        rows_of(
            &engine,
            "INSERT INTO t VALUES ('2020-01-01T00:00:02Z', 'a', 3.0)",
        )
        .await;
        let after = rows(&engine, latest).await;
        assert!(
            after.contains("| 3.0 |") && !after.contains("| 1.0 |"),
            "{after}"
        );

        assert!(
            !rows(&engine, "SELECT * FROM t WHERE v > 1")
                .await
                .contains("| w")
        );
        rows_of(&engine, "ALTER TABLE t ADD COLUMN w INT").await;
        let added = rows(&engine, "SELECT * FROM t WHERE v > 2").await;
        assert!(added.contains("| w"), "{added}");

        rows_of(&engine, "DROP TABLE t").await;
        for sql in [
            "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY",
            "INSERT INTO t VALUES ('2021-01-01T00:00:00Z', 'z', 9.0)",
        ] {
            rows_of(&engine, sql).await;
        }
        let recreated = rows(&engine, "SELECT * FROM t WHERE v > 3").await;
        assert!(
            recreated.contains("| z |") && !recreated.contains("| a |"),
            "{recreated}"
        );
        let fresh = rows(&engine, latest).await;
        assert!(fresh.contains("| z |"), "{fresh}");
    }

    /// A kept plan holds its tables: dropping one must not leave its files behind.
    #[tokio::test]
    async fn dropped_tables_leave_no_files_behind() {
        let (engine, dir) = crate::exec::scan::tests::engine();
        let table_dirs = || {
            std::fs::read_dir(dir.path())
                .expect("data dir")
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("gone~"))
                .count()
        };
        // (Created without INSERT, whose table sink also holds the table.)
        rows_of(
            &engine,
            "CREATE TABLE gone (ts TIMESTAMP, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY",
        )
        .await;
        rows(&engine, "SELECT * FROM gone WHERE v > 0").await;
        assert_eq!(engine.shared_plans(), 1);
        assert_eq!(table_dirs(), 1);
        rows_of(&engine, "DROP TABLE gone").await;
        assert_eq!(table_dirs(), 0);
    }

    #[test]
    fn the_cache_keeps_its_newest_entries() {
        let cache = PlanCache::new(2);
        for key in ["a", "b", "c"] {
            cache.insert(key.to_string(), Arc::new(key.len()));
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.get("a").is_none());
        assert!(cache.get("c").is_some());
    }
}
