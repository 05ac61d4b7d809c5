//! Rollup routing: a SAMPLE BY query over a table answered from a materialized view of it
//! whose buckets nest in the query's, for the buckets the view covers, and from the table for
//! the rest, with the same answer.
//!
//! ```text
//!  SELECT ts, k, avg(x) FROM t WHERE ts >= a AND ts < b AND k = 'x' SAMPLE BY 1h
//!    view v: SELECT ts, k, sum(x) s, count(x) c FROM t SAMPLE BY 1m   (fresh up to B)
//!  ─▶ SELECT timestamp_floor('1h', __r.__ts, NULL, NULL) AS ts, __r.__k0 AS k,
//!            CAST(sum(__r.__a0) AS DOUBLE) / CAST(sum(__r.__a1) AS DOUBLE) AS "avg(x)"
//!     FROM (SELECT ts AS __ts, k AS __k0, s AS __a0, c AS __a1 FROM v
//!             WHERE k = 'x' AND ts >= ⌈a⌉ AND ts < min(⌊b⌋, B)            -- whole view buckets
//!           UNION ALL
//!           SELECT ts, k, x, CASE WHEN x IS NULL THEN 0 ELSE 1 END FROM t
//!             WHERE <the query's WHERE> AND (ts < ⌈a⌉ OR ts >= min(⌊b⌋, B))) AS __r
//!     GROUP BY 1, 2 ORDER BY 1, 2
//! ```
//!
//! The query qualifies when it is one SELECT from one table with one SAMPLE BY aligned to the
//! calendar in UTC (no FILL, FROM/TO, time zone or other QuestDB clause), selecting the
//! timestamp, key columns and `sum`, `count`, `min`, `max`, `avg`, `first` or `last` of columns
//! (or `count(*)`),
//! with a WHERE of conjuncts on the keys and literal bounds on the timestamp. A view serves it
//! when its buckets nest in the query's (its stride divides the query's, on the same origin),
//! it groups by every key the query does (and filters nothing), and it has a column for each
//! aggregate: `sum`, `count`, `min` and `max` of the same column roll up by `sum`, `sum`, `min`
//! and `max`; `avg` needs the view's `sum` and `count` of the column; `first` and `last` roll up
//! by the first (last) sub-bucket's value, so only from a view grouped by exactly the query's
//! keys (a view row per sub-bucket and key, ordered by the sub-bucket). A view on a time
//! zone's calendar serves nothing. Of several views the
//! coarsest serves. Both branches give partial aggregates that the outer GROUP BY combines, so
//! a query bucket that only part of the view covers comes out whole.
//!
//! A routed statement depends on the view's freshness, not only on its text: it is marked
//! volatile, so that its text's shape is never learned (the engine would skip this rewrite) and
//! the cut points, plain literals compared with the timestamp, become parameters of the shape's
//! plan like any bounds. The catalog says how far each view is fresh (see [`Rollup`]).

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident,
    ObjectName, ObjectNamePart, Query, SelectItem, SetExpr, Statement, TableFactor, Value,
    visit_expressions,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

use crate::ast::{binary, boolean, cast, number, string};
use crate::error::Result;
use crate::questdb::stride::{Step, Stride};
use crate::questdb::{Buckets, Catalog, Clauses, Rollup, RollupColumn, extract};
use crate::template::Slots;

/// The keys and aggregate columns of a view whose query is `query` and whose columns are
/// `columns` (in the query's order), over a base table whose designated timestamp is
/// `timestamp`; `None` when the view cannot serve other queries (it filters, or computes
/// something else than plain keys and aggregates of columns).
pub fn rollup_columns(
    query: &str,
    columns: &[String],
    timestamp: &str,
) -> Option<(Vec<String>, Vec<RollupColumn>)> {
    let (sql, clauses) = extract(query).ok()?;
    if clauses.samples.len() != 1 || !clauses.latest.is_empty() || !clauses.limits.is_empty() {
        return None;
    }
    let mut statements = Parser::parse_sql(&GenericDialect {}, &sql).ok()?;
    let Some(Statement::Query(q)) = statements.pop() else {
        return None;
    };
    let SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    if select.selection.is_some()
        || select.having.is_some()
        || select.projection.len() != columns.len()
    {
        return None;
    }
    let (mut keys, mut aggregates) = (Vec::new(), Vec::new());
    for (item, column) in select.projection.iter().zip(columns) {
        let (expr, alias) = match item {
            SelectItem::UnnamedExpr(e) => (e, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias)),
            _ => return None,
        };
        match expr {
            Expr::Identifier(id) if id.value.eq_ignore_ascii_case(timestamp) => {}
            Expr::Identifier(id) => {
                if !column.eq_ignore_ascii_case(&id.value)
                    || alias.is_some_and(|a| !a.value.eq_ignore_ascii_case(&id.value))
                {
                    return None;
                }
                keys.push(id.value.clone());
            }
            _ => {
                let (function, argument) = aggregate_of(expr)?;
                aggregates.push(RollupColumn {
                    function,
                    argument,
                    column: column.clone(),
                });
            }
        }
    }
    Some((keys, aggregates))
}

/// `(function, column)` of `f(column)`, `count(*)` or `count()` with `f` one that rolls up.
fn aggregate_of(expr: &Expr) -> Option<(String, Option<String>)> {
    let Expr::Function(f) = expr else {
        return None;
    };
    if f.filter.is_some() || f.over.is_some() || !f.within_group.is_empty() {
        return None;
    }
    let name = f.name.to_string().to_ascii_lowercase();
    if !["sum", "count", "min", "max", "avg", "first", "last"].contains(&name.as_str()) {
        return None;
    }
    let args = match &f.args {
        FunctionArguments::List(list)
            if list.duplicate_treatment.is_none() && list.clauses.is_empty() =>
        {
            list.args.as_slice()
        }
        FunctionArguments::None => &[],
        _ => return None,
    };
    match args {
        [] | [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] if name == "count" => {
            Some((name, None))
        }
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Identifier(id)))] => {
            Some((name, Some(id.value.clone())))
        }
        _ => None,
    }
}

/// Whether buckets of `inner` nest in buckets of `outer`: every outer bucket is a union of
/// inner ones.
fn nests(inner: &Buckets, outer_step: Step, outer_origin: i64) -> bool {
    const DAY: i64 = 86_400_000_000_000;
    match (inner.step, outer_step) {
        (Step::Nanos(i), Step::Nanos(o)) => {
            o % i == 0 && (outer_origin - inner.origin).rem_euclid(i) == 0
        }
        // Months start at midnight UTC.
        (Step::Nanos(i), Step::Months(_)) => DAY % i == 0 && inner.origin.rem_euclid(i) == 0,
        (Step::Months(i), Step::Months(o)) => o % i == 0 && inner.origin == outer_origin,
        (Step::Months(_), Step::Nanos(_)) => false,
    }
}

/// A select item of the query, as the rewrite sees it.
enum Item {
    /// The timestamp, which becomes the bucket.
    Bucket,
    /// A key column of the table.
    Key(String),
    /// `function(argument)` (`count(*)`: no argument).
    Aggregate(String, Option<String>),
}

/// Rewrites `statement` to read a view where one serves it (see the module docs). Returns
/// `(volatile, routed)`: whether the statement's rewrite depends on views' freshness, and
/// whether it was rewritten (its SAMPLE BY is then gone).
pub(crate) fn rewrite(
    statement: &mut Statement,
    clauses: &Clauses,
    catalog: &dyn Catalog,
) -> Result<(bool, bool)> {
    // Only SAMPLE BY queries are routed: others never depend on views' freshness.
    if clauses.samples.is_empty() {
        return Ok((false, false));
    }
    let Some(plan) = plan(statement, clauses, catalog) else {
        let volatile = source_table(statement).is_some_and(|t| !catalog.rollups(&t).is_empty());
        return Ok((volatile, false));
    };
    let Statement::Query(query) = statement else {
        return Ok((true, false));
    };
    let routed = build(query, plan)?;
    **query = routed;
    Ok((true, true))
}

/// The one table a single SELECT reads.
fn source_table(statement: &Statement) -> Option<String> {
    let Statement::Query(q) = statement else {
        return None;
    };
    let SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    match select.from.as_slice() {
        [from] if from.joins.is_empty() => match &from.relation {
            TableFactor::Table {
                name, args: None, ..
            } => single_name(name),
            _ => None,
        },
        _ => None,
    }
}

fn single_name(name: &ObjectName) -> Option<String> {
    match name.0.as_slice() {
        [ObjectNamePart::Identifier(id)] => Some(id.value.clone()),
        _ => None,
    }
}

/// What [`build`] needs: the view, the query's items, its filters and the cut points.
struct Plan {
    rollup: Rollup,
    stride: String,
    origin: Option<i64>,
    items: Vec<Item>,
    aliases: Vec<String>,
    /// The query's conjuncts on keys (both branches) and on the timestamp (base branch).
    key_filters: Vec<Expr>,
    time_filters: Vec<Expr>,
    /// The view branch covers `[lo, hi)` (`None`: unbounded on that side).
    lo: Option<i64>,
    hi: Option<i64>,
    base_ts: String,
}

fn plan(statement: &Statement, clauses: &Clauses, catalog: &dyn Catalog) -> Option<Plan> {
    let table = source_table(statement)?;
    let rollups = catalog.rollups(&table);
    if rollups.is_empty()
        || clauses.samples.len() != 1
        || !clauses.latest.is_empty()
        || !clauses.limits.is_empty()
        || !clauses.time_joins.is_empty()
    {
        return None;
    }
    let sample = &clauses.samples[0];
    if !sample.fill.is_empty() || sample.from.is_some() || sample.to.is_some() {
        return None;
    }
    let origin_shift = match &sample.align {
        crate::questdb::Align::Calendar {
            time_zone: None,
            offset,
        } => match offset {
            None => None,
            Some(text) => Some(crate::questdb::offset_ns(text.trim().trim_matches('\''))?),
        },
        _ => return None,
    };
    let stride = Stride::parse(&sample.stride).ok()?;
    let step = stride.step()?;
    let query_origin = stride.calendar_origin() + origin_shift.unwrap_or(0);
    let base_ts = catalog.designated_timestamp(&table)??;
    let Statement::Query(q) = statement else {
        return None;
    };
    if q.with.is_some() || q.fetch.is_some() || !q.locks.is_empty() {
        return None;
    }
    let SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    if select.having.is_some()
        || select.distinct.is_some()
        || select.qualify.is_some()
        || !select.named_window.is_empty()
        || select.top.is_some()
        || select.into.is_some()
    {
        return None;
    }
    let alias = match &select.from[0].relation {
        TableFactor::Table { alias, .. } => alias.as_ref().map(|a| a.name.value.clone()),
        _ => return None,
    };
    let own = |id: &[Ident]| -> Option<String> {
        match id {
            [c] => Some(c.value.clone()),
            [t, c]
                if t.value.eq_ignore_ascii_case(&table)
                    || alias
                        .as_deref()
                        .is_some_and(|a| a.eq_ignore_ascii_case(&t.value)) =>
            {
                Some(c.value.clone())
            }
            _ => None,
        }
    };
    let column_of = |e: &Expr| -> Option<String> {
        match e {
            Expr::Identifier(id) => own(std::slice::from_ref(id)),
            Expr::CompoundIdentifier(ids) => own(ids),
            _ => None,
        }
    };
    // The select list: the bucket, keys, aggregates.
    let (mut items, mut aliases) = (Vec::new(), Vec::new());
    for item in &select.projection {
        let (expr, alias) = match item {
            SelectItem::UnnamedExpr(e) => (e, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.clone())),
            _ => return None,
        };
        if let Some(column) = column_of(expr) {
            let name = alias.unwrap_or_else(|| column.clone());
            if column.eq_ignore_ascii_case(&base_ts) {
                items.push(Item::Bucket);
            } else {
                items.push(Item::Key(column));
            }
            aliases.push(name);
            continue;
        }
        let (function, argument) = aggregate_of(&unqualified(expr, &column_of)?)?;
        items.push(Item::Aggregate(function, argument));
        // Unaliased aggregates were named by the dialect before this rewrite.
        aliases.push(alias?);
    }
    if !items.iter().any(|i| matches!(i, Item::Bucket)) {
        return None;
    }
    // GROUP BY: the SAMPLE BY marker and keys that are selected.
    let GroupByExpr::Expressions(groups, modifiers) = &select.group_by else {
        return None;
    };
    if !modifiers.is_empty() {
        return None;
    }
    for g in groups {
        if crate::questdb::marker_index(g, crate::questdb::SAMPLE_MARKER).is_some() {
            continue;
        }
        let column = column_of(g)?;
        if !items
            .iter()
            .any(|i| matches!(i, Item::Key(k) if k.eq_ignore_ascii_case(&column)))
        {
            return None;
        }
    }
    // WHERE: conjuncts on keys, and literal bounds on the timestamp.
    let keys: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            Item::Key(k) => Some(k.as_str()),
            _ => None,
        })
        .collect();
    let (mut key_filters, mut time_filters) = (Vec::new(), Vec::new());
    let (mut lo, mut hi): (Option<i64>, Option<i64>) = (None, None);
    if let Some(selection) = &select.selection {
        let mut conjuncts = Vec::new();
        crate::ast::split_and(selection, &mut conjuncts);
        for c in conjuncts {
            let c = unqualified(c, &column_of)?;
            let mut columns = Vec::new();
            let _ = visit_expressions(&c, |e| {
                if let Expr::Identifier(id) = e {
                    columns.push(id.value.clone());
                }
                ControlFlow::<()>::Continue(())
            });
            if columns.is_empty() {
                return None;
            }
            if columns.iter().all(|c| c.eq_ignore_ascii_case(&base_ts)) {
                let (l, h) = time_bound(&c)?;
                lo = max_opt(lo, l);
                hi = min_opt(hi, h);
                time_filters.push(c);
            } else if columns
                .iter()
                .all(|c| keys.iter().any(|k| k.eq_ignore_ascii_case(c)))
            {
                key_filters.push(c);
            } else {
                return None;
            }
        }
    }
    // `first` and `last` roll up only over the view's own keys: a view row per sub-bucket and
    // key, ordered by the sub-bucket, so the order within a query bucket is total.
    let picks = items
        .iter()
        .any(|i| matches!(i, Item::Aggregate(f, _) if f == "first" || f == "last"));
    // The coarsest view that serves.
    let mut best: Option<Rollup> = None;
    for r in rollups {
        // Views on a time zone's calendar serve no query (routing is on UTC's calendar).
        if r.buckets.zone.is_some()
            || !nests(&r.buckets, step, query_origin)
            || !keys
                .iter()
                .all(|k| r.keys.iter().any(|v| v.eq_ignore_ascii_case(k)))
            || (picks && r.keys.len() != keys.len())
        {
            continue;
        }
        let mut resolved = Vec::new();
        let ok = items.iter().all(|i| match i {
            Item::Aggregate(f, a) => match columns_for(&r, f, a.as_deref()) {
                Some(c) => {
                    resolved.push(c);
                    true
                }
                None => false,
            },
            _ => true,
        });
        if !ok {
            continue;
        }
        let coarser = best
            .as_ref()
            .is_none_or(|b| step_nanos(r.buckets.step) > step_nanos(b.buckets.step));
        if coarser {
            best = Some(r);
        }
    }
    let rollup = best?;
    // The view's buckets wholly inside the query's bounds and before its freshness limit.
    let ceil = |t: i64| -> Option<i64> {
        let f = rollup.buckets.floor(t)?;
        if f == t {
            Some(f)
        } else {
            rollup.buckets.ceil_after(t)
        }
    };
    let view_lo = match max_opt(lo, rollup.fresh_from) {
        Some(l) => Some(ceil(l)?),
        None => None,
    };
    let view_hi = match hi {
        Some(h) => Some(rollup.buckets.floor(h)?),
        None => None,
    };
    let view_hi = min_opt(view_hi, rollup.fresh_before);
    if let (Some(l), Some(h)) = (view_lo, view_hi)
        && l >= h
    {
        return None;
    }
    Some(Plan {
        stride: sample.stride.clone(),
        origin: origin_shift.map(|s| stride.calendar_origin() + s),
        items,
        aliases,
        key_filters,
        time_filters,
        lo: view_lo,
        hi: view_hi,
        base_ts,
        rollup,
    })
}

fn step_nanos(step: Step) -> i64 {
    match step {
        Step::Nanos(n) => n,
        Step::Months(m) => i64::from(m).saturating_mul(2_629_746_000_000_000),
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The view columns an aggregate rolls up from: one, or `sum` and `count` for `avg`.
fn columns_for(r: &Rollup, function: &str, argument: Option<&str>) -> Option<Vec<String>> {
    let find = |f: &str| {
        r.aggregates
            .iter()
            .find(|c| {
                c.function == f
                    && match (&c.argument, argument) {
                        (None, None) => true,
                        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                        _ => false,
                    }
            })
            .map(|c| c.column.clone())
    };
    match function {
        "avg" => Some(vec![find("sum")?, find("count")?]),
        f => Some(vec![find(f)?]),
    }
}

/// `e` with its columns of the query's table written unqualified; `None` if it names another.
fn unqualified(e: &Expr, column_of: &dyn Fn(&Expr) -> Option<String>) -> Option<Expr> {
    let mut out = e.clone();
    let mut foreign = false;
    let _ = sqlparser::ast::visit_expressions_mut(&mut out, |x| {
        if let Expr::CompoundIdentifier(_) = x {
            match column_of(x) {
                Some(c) => *x = Expr::Identifier(Ident::new(c)),
                None => foreign = true,
            }
        }
        ControlFlow::<()>::Continue(())
    });
    (!foreign).then_some(out)
}

/// The bounds `[lo, hi)` a conjunct on the timestamp alone puts on it, if it is a comparison
/// with a timestamp literal or a BETWEEN of two.
fn time_bound(c: &Expr) -> Option<(Option<i64>, Option<i64>)> {
    match c {
        Expr::BinaryOp { left, op, right } => {
            let (op, literal) = match (left.as_ref(), right.as_ref()) {
                (Expr::Identifier(_), r) => (op.clone(), instant(r)?),
                (l, Expr::Identifier(_)) => (flipped(op)?, instant(l)?),
                _ => return None,
            };
            match op {
                BinaryOperator::GtEq => Some((Some(literal), None)),
                BinaryOperator::Gt => Some((Some(literal.checked_add(1)?), None)),
                BinaryOperator::Lt => Some((None, Some(literal))),
                BinaryOperator::LtEq => Some((None, Some(literal.checked_add(1)?))),
                _ => None,
            }
        }
        Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } if matches!(expr.as_ref(), Expr::Identifier(_)) => {
            Some((Some(instant(low)?), Some(instant(high)?.checked_add(1)?)))
        }
        _ => None,
    }
}

fn flipped(op: &BinaryOperator) -> Option<BinaryOperator> {
    Some(match op {
        BinaryOperator::Lt => BinaryOperator::Gt,
        BinaryOperator::LtEq => BinaryOperator::GtEq,
        BinaryOperator::Gt => BinaryOperator::Lt,
        BinaryOperator::GtEq => BinaryOperator::LtEq,
        _ => return None,
    })
}

/// A timestamp literal in nanoseconds: `'2024-01-01'`, `'2024-01-01T10:00:00[.fff][Z]'`, as
/// text or cast to TIMESTAMP.
fn instant(e: &Expr) -> Option<i64> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => instant_of_text(s),
            _ => None,
        },
        Expr::Cast { expr, .. } => instant(expr),
        Expr::Nested(inner) => instant(inner),
        _ => None,
    }
}

/// The instant timestamp text names, in nanoseconds: RFC 3339 (`2024-01-01T10:00:00+01:00`),
/// or a UTC date and time (`2024-01-01T10:00:00[.fff][Z]`, `2024-01-01 10:00:00`,
/// `2024-01-01`); surrounding single quotes are taken off.
pub fn instant_of_text(text: &str) -> Option<i64> {
    let text = text.trim().trim_matches('\'').trim();
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return t.timestamp_nanos_opt();
    }
    let text = text.strip_suffix('Z').unwrap_or(text);
    let parsed = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f"))
        .ok()
        .or_else(|| {
            chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })?;
    parsed.and_utc().timestamp_nanos_opt()
}

/// A timestamp literal: text the engine compares with a TIMESTAMP column exactly.
fn timestamp_text(ns: i64) -> Expr {
    let text = chrono::DateTime::from_timestamp_nanos(ns)
        .naive_utc()
        .format("%Y-%m-%dT%H:%M:%S%.9f")
        .to_string();
    string(&text)
}

/// The routed query (see the module docs), keeping `query`'s ORDER BY and LIMIT.
fn build(query: &Query, plan: Plan) -> Result<Query> {
    let mut slots = Slots::default();
    let column = |name: &str| Expr::Identifier(Ident::new(name));
    let and_all = |mut filters: Vec<Expr>| -> Expr {
        let first = if filters.is_empty() {
            boolean(true)
        } else {
            filters.remove(0)
        };
        filters
            .into_iter()
            .fold(first, |a, b| binary(a, BinaryOperator::And, b))
    };
    // Union columns: __ts, keys __k0.., aggregate parts __a0...
    let keys: Vec<&str> = plan
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Key(k) => Some(k.as_str()),
            _ => None,
        })
        .collect();
    let mut view_parts: Vec<Expr> = Vec::new();
    let mut base_parts: Vec<Expr> = Vec::new();
    // Per item, the outer expression's text (over union columns) and its slots.
    let mut outer: Vec<String> = Vec::new();
    let mut group_positions: Vec<usize> = Vec::new();
    for (position, item) in plan.items.iter().enumerate() {
        match item {
            Item::Bucket => {
                let stride = slots.slot(string(&plan.stride));
                let origin = slots.slot(match plan.origin {
                    Some(o) => cast(
                        timestamp_text(o),
                        sqlparser::ast::DataType::Timestamp(
                            None,
                            sqlparser::ast::TimezoneInfo::None,
                        ),
                    ),
                    None => crate::ast::null(),
                });
                outer.push(format!(
                    "timestamp_floor({stride}, __r.__ts, {origin}, NULL)"
                ));
                group_positions.push(position + 1);
            }
            Item::Key(k) => {
                let at = keys.iter().position(|x| x == k).unwrap_or_default();
                outer.push(format!("__r.__k{at}"));
                group_positions.push(position + 1);
            }
            Item::Aggregate(function, argument) => {
                let columns =
                    columns_for(&plan.rollup, function, argument.as_deref()).unwrap_or_default();
                let base_value = |f: &str| -> Expr {
                    match (f, argument) {
                        ("count", None) => number(1),
                        ("count", Some(a)) => Expr::Case {
                            case_token:
                                sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                            end_token:
                                sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                            operand: None,
                            conditions: vec![sqlparser::ast::CaseWhen {
                                condition: Expr::IsNull(Box::new(column(a))),
                                result: number(0),
                            }],
                            else_result: Some(Box::new(number(1))),
                        },
                        (_, Some(a)) => column(a),
                        (_, None) => number(1),
                    }
                };
                let mut part = |view_column: &str, f: &str| -> String {
                    view_parts.push(column(view_column));
                    base_parts.push(base_value(f));
                    format!("__r.__a{}", view_parts.len() - 1)
                };
                outer.push(match function.as_str() {
                    "avg" => {
                        let s = part(&columns[0], "sum");
                        let c = part(&columns[1], "count");
                        format!("CAST(sum({s}) AS DOUBLE) / CAST(sum({c}) AS DOUBLE)")
                    }
                    "min" => format!("min({})", part(&columns[0], "min")),
                    "max" => format!("max({})", part(&columns[0], "max")),
                    // Per query bucket and key, the view's rows are one per sub-bucket: the
                    // first sub-bucket's first value is the bucket's (see `plan`).
                    "first" => format!(
                        "first_value({} ORDER BY __r.__ts)",
                        part(&columns[0], "first")
                    ),
                    "last" => format!(
                        "last_value({} ORDER BY __r.__ts)",
                        part(&columns[0], "last")
                    ),
                    f => format!("sum({})", part(&columns[0], f)),
                });
            }
        }
    }
    let branch = |table: &str,
                  ts: Expr,
                  key_values: Vec<Expr>,
                  parts: Vec<Expr>,
                  filter: Expr,
                  slots: &mut Slots| {
        let mut cols = vec![format!("{} AS __ts", slots.slot(ts))];
        for (i, k) in key_values.into_iter().enumerate() {
            cols.push(format!("{} AS __k{i}", slots.slot(k)));
        }
        for (i, p) in parts.into_iter().enumerate() {
            cols.push(format!("{} AS __a{i}", slots.slot(p)));
        }
        format!(
            "SELECT {} FROM {table} WHERE {}",
            cols.join(", "),
            slots.slot(filter)
        )
    };
    let ts_view = column(&plan.rollup.timestamp);
    let ts_base = column(&plan.base_ts);
    let mut view_filters = plan.key_filters.clone();
    if let Some(lo) = plan.lo {
        view_filters.push(binary(
            ts_view.clone(),
            BinaryOperator::GtEq,
            timestamp_text(lo),
        ));
    }
    if let Some(hi) = plan.hi {
        view_filters.push(binary(
            ts_view.clone(),
            BinaryOperator::Lt,
            timestamp_text(hi),
        ));
    }
    let view_branch = branch(
        VIEW_TABLE,
        ts_view,
        keys.iter().map(|k| column(k)).collect(),
        view_parts,
        and_all(view_filters),
        &mut slots,
    );
    // The base branch reads what the view does not cover, if anything.
    let outside = match (plan.lo, plan.hi) {
        (None, None) => None,
        (Some(lo), None) => Some(binary(
            ts_base.clone(),
            BinaryOperator::Lt,
            timestamp_text(lo),
        )),
        (None, Some(hi)) => Some(binary(
            ts_base.clone(),
            BinaryOperator::GtEq,
            timestamp_text(hi),
        )),
        (Some(lo), Some(hi)) => Some(Expr::Nested(Box::new(binary(
            binary(ts_base.clone(), BinaryOperator::Lt, timestamp_text(lo)),
            BinaryOperator::Or,
            binary(ts_base.clone(), BinaryOperator::GtEq, timestamp_text(hi)),
        )))),
    };
    let union = match outside {
        None => view_branch,
        Some(outside) => {
            let mut base_filters = plan.key_filters.clone();
            base_filters.extend(plan.time_filters.iter().cloned());
            base_filters.push(outside);
            let base_branch = branch(
                crate::template::SOURCE,
                ts_base,
                keys.iter().map(|k| column(k)).collect(),
                base_parts,
                and_all(base_filters),
                &mut slots,
            );
            format!("{view_branch} UNION ALL {base_branch}")
        }
    };
    let positions: Vec<String> = group_positions.iter().map(usize::to_string).collect();
    let mut template = format!(
        "SELECT {} FROM ({union}) AS __r GROUP BY {}",
        outer
            .iter()
            .enumerate()
            .map(|(i, e)| format!("{e} AS __o{i}"))
            .collect::<Vec<_>>()
            .join(", "),
        positions.join(", ")
    );
    let own_order = query.order_by.is_some();
    if !own_order {
        template.push_str(&format!(" ORDER BY {}", positions.join(", ")));
    }
    let mut routed = crate::template::parse(&template)?;
    slots.put_into(&mut routed)?;
    // The tables: the base as the query names it, the view by its name.
    let base = match query.body.as_ref() {
        SetExpr::Select(s) => s.from[0].relation.clone(),
        _ => {
            return Err(crate::error::SqlError::Invalid(
                "internal: rollup lost its table".into(),
            ));
        }
    };
    let view = crate::ast::table(ObjectName::from(vec![Ident::with_quote(
        '"',
        &plan.rollup.view,
    )]));
    let _ = sqlparser::ast::VisitMut::visit(
        &mut routed,
        &mut Tables {
            base: &base,
            view: &view,
        },
    );
    // The output names of the query.
    if let SetExpr::Select(s) = routed.body.as_mut() {
        for (item, name) in s.projection.iter_mut().zip(&plan.aliases) {
            if let SelectItem::ExprWithAlias { alias, .. } = item {
                *alias = Ident::with_quote('"', name);
            }
        }
    }
    if own_order {
        routed.order_by.clone_from(&query.order_by);
    }
    routed.limit_clause.clone_from(&query.limit_clause);
    Ok(routed)
}

/// The view's table in the template, replaced by the view.
const VIEW_TABLE: &str = "__sundial_view";

struct Tables<'a> {
    base: &'a TableFactor,
    view: &'a TableFactor,
}

impl sqlparser::ast::VisitorMut for Tables<'_> {
    type Break = ();

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, .. } = factor {
            let name = name.to_string();
            if name == crate::template::SOURCE {
                *factor = self.base.clone();
            } else if name == VIEW_TABLE {
                *factor = self.view.clone();
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_views_keys_and_aggregates() {
        let columns: Vec<String> = ["ts", "host", "s", "c", "n", "m"]
            .map(String::from)
            .to_vec();
        let (keys, aggregates) = rollup_columns(
            "SELECT ts, host, sum(v) AS s, count(v) AS c, count() AS n, max(v) m FROM t SAMPLE BY 1m",
            &columns,
            "ts",
        )
        .unwrap();
        assert_eq!(keys, vec!["host".to_string()]);
        assert_eq!(aggregates.len(), 4);
        assert_eq!(aggregates[2].argument, None);
        assert_eq!(aggregates[3].function, "max");
        // A filtered view, or one computing more than plain aggregates, serves nothing else.
        for q in [
            "SELECT ts, host, sum(v) AS s, count(v) AS c, count() AS n, max(v) m FROM t WHERE v > 0 SAMPLE BY 1m",
            "SELECT ts, host, sum(v * 2) AS s, count(v) AS c, count() AS n, max(v) m FROM t SAMPLE BY 1m",
        ] {
            assert_eq!(rollup_columns(q, &columns, "ts"), None, "{q}");
        }
    }

    #[test]
    fn buckets_nest_on_the_same_origin() {
        let minute = Buckets {
            stride: Stride::parse("1m").unwrap(),
            step: Step::Nanos(60_000_000_000),
            origin: 0,
            zone: None,
        };
        assert!(nests(&minute, Step::Nanos(3_600_000_000_000), 0));
        assert!(nests(&minute, Step::Months(1), 0));
        assert!(!nests(&minute, Step::Nanos(90_000_000_000), 0));
        assert!(!nests(
            &minute,
            Step::Nanos(3_600_000_000_000),
            30_000_000_000
        ));
    }

    #[test]
    fn reads_literal_time_bounds() {
        let e = |sql: &str| -> Expr {
            let s = format!("SELECT 1 WHERE {sql}");
            let Statement::Query(q) = Parser::parse_sql(&GenericDialect {}, &s)
                .unwrap()
                .pop()
                .unwrap()
            else {
                panic!()
            };
            let SetExpr::Select(s) = *q.body else {
                panic!()
            };
            s.selection.unwrap()
        };
        let day = 1_704_067_200_000_000_000i64;
        assert_eq!(
            time_bound(&e("ts >= '2024-01-01'")),
            Some((Some(day), None))
        );
        assert_eq!(
            time_bound(&e("'2024-01-01T00:00:00Z' > ts")),
            Some((None, Some(day)))
        );
        assert_eq!(
            time_bound(&e("ts BETWEEN '2024-01-01' AND '2024-01-01'")),
            Some((Some(day), Some(day + 1)))
        );
        assert_eq!(time_bound(&e("ts > now()")), None);
    }
}
