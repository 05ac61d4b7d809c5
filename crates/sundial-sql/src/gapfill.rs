//! Gap filling written as functions: TimescaleDB's `time_bucket_gapfill` and InfluxDB 3's
//! `date_bin_gapfill`, with `locf` and `interpolate`, planned onto SAMPLE BY ... FILL's
//! machinery (`questdb::fill`), so that one grid and one set of fills serve both dialects.
//!
//! ```text
//!  SELECT time_bucket_gapfill('1 hour', ts) AS b, host, avg(v), locf(avg(v)), interpolate(avg(v))
//!  FROM t WHERE ts >= lo AND ts < hi GROUP BY b, host
//!    ─▶ the grouped query: the item is timestamp_floor('1h', ts, origin, NULL), GROUP BY that
//!       bucket and the keys, locf(..) and interpolate(..) taken off their aggregates
//!    ─▶ FillPlan { fills NULL, PREV, LINEAR; from lo; to hi } ─▶ questdb::fill_query
//!       (every bucket of [lo, hi) for every key seen, LEFT JOIN the grouped rows)
//! ```
//!
//! The rules, as TimescaleDB and InfluxDB 3 have them:
//!
//! - A SELECT with GROUP BY whose select list has exactly one `time_bucket_gapfill(...)` or
//!   `date_bin_gapfill(...)` item is a gap-fill query. Its other items are keys (neither
//!   aggregate nor constant, each in the GROUP BY) or values.
//! - Buckets: `time_bucket_gapfill(width, ts [, start [, finish]])` cuts time at TimescaleDB's
//!   origin, Monday 2000-01-03 (2000-01-01 for widths in months), `date_bin_gapfill(width, ts
//!   [, origin])` at `origin` or the Unix epoch. The width is text (`'1 hour'`, `'5 minutes'`)
//!   or an INTERVAL literal, in whole units, of months or of a fixed length but not both.
//! - The range: the first bucket holds start, the last begins before finish. Start and finish
//!   are the arguments when given (not NULL), and rows outside them are left out; otherwise
//!   the WHERE clause's bounds on the same column, among its top-level ANDs: `ts >= x`,
//!   `ts > x`, `ts < y`, `ts <= y` (which keeps y's bucket), `ts BETWEEN x AND y`, either way
//!   round. Several bounds on one side take the narrowest. `date_bin_gapfill` takes its
//!   bounds from WHERE only, as InfluxDB does. A missing bound is an error naming it.
//! - Values are NULL in buckets without rows; `locf(agg)` repeats the last present bucket's
//!   value (FILL(PREV)); `interpolate(agg)` lies on the line between the present buckets
//!   before and after (FILL(LINEAR), not continued past a key's first or last present bucket).
//!   Both must be a select item of their own.
//! - Rows come in bucket, then key order unless the query orders them; ORDER BY and LIMIT
//!   apply to the filled rows. The grid's size is bounded where it is made (`sample_grid`
//!   refuses more than its limit of buckets).
//!
//! Runs after the QuestDB rewrite, so the WHERE it reads has its intervals and integer
//! timestamps already in standard SQL. The functions anywhere else, and `locf`/`interpolate`
//! outside a gap-fill query, are errors that say where they belong.

mod width;

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, DataType, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments,
    GroupByExpr, Ident, ObjectNamePart, Query, SelectItem, SetExpr, Statement, TimezoneInfo, Value,
    VisitMut, VisitorMut, visit_expressions,
};

use crate::ast::{binary, call, cast, null, number, string};
use crate::error::{Result, SqlError};
use crate::questdb::{
    Catalog, Fill, FillPlan, add_filter, fill_query, is_constant, name_fill_items, output_names,
};

/// The two bucketing functions, by whose rules they take their arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavour {
    /// `time_bucket_gapfill(width, ts [, start [, finish]])`.
    Timescale,
    /// `date_bin_gapfill(width, ts [, origin])`.
    Influx,
}

impl Flavour {
    fn of(f: &Function) -> Option<Flavour> {
        match name_of(f)?.as_str() {
            "time_bucket_gapfill" => Some(Flavour::Timescale),
            "date_bin_gapfill" => Some(Flavour::Influx),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Flavour::Timescale => "time_bucket_gapfill",
            Flavour::Influx => "date_bin_gapfill",
        }
    }
}

/// Rewrites every gap-fill query of `statement` (see the module docs); refuses the gap-fill
/// functions anywhere else.
pub(crate) fn rewrite(statement: &mut Statement, catalog: &dyn Catalog) -> Result<()> {
    if !mentions_gapfill(statement) {
        return Ok(());
    }
    let mut rewriter = Rewriter { catalog };
    if let ControlFlow::Break(e) = statement.visit(&mut rewriter) {
        return Err(e);
    }
    leftover(statement)
}

/// Whether `statement` calls any of the gap-fill functions.
fn mentions_gapfill(statement: &Statement) -> bool {
    visit_expressions(statement, |e| match e {
        Expr::Function(f) if gapfill_function(f).is_some() => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// The name of `f` if it is one of the gap-fill functions.
fn gapfill_function(f: &Function) -> Option<&'static str> {
    match name_of(f)?.as_str() {
        "time_bucket_gapfill" => Some("time_bucket_gapfill"),
        "date_bin_gapfill" => Some("date_bin_gapfill"),
        "locf" => Some("locf"),
        "interpolate" => Some("interpolate"),
        _ => None,
    }
}

fn name_of(f: &Function) -> Option<String> {
    match f.name.0.as_slice() {
        [ObjectNamePart::Identifier(i)] => Some(i.value.to_lowercase()),
        _ => None,
    }
}

/// A gap-fill function the rewrite did not reach: it stood where it has no meaning.
fn leftover(statement: &Statement) -> Result<()> {
    let mut found = None;
    let _ = visit_expressions(statement, |e| {
        if let Expr::Function(f) = e
            && let Some(name) = gapfill_function(f)
        {
            found = Some(name);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    match found {
        None => Ok(()),
        Some(name @ ("locf" | "interpolate")) => Err(SqlError::Invalid(format!(
            "{name}() is only allowed as a select item of its own (such as {name}(avg(v))) in \
             a query grouped by time_bucket_gapfill() or date_bin_gapfill()"
        ))),
        Some(name) => Err(SqlError::Invalid(format!(
            "{name}() is only allowed as a select item of its own in a SELECT with GROUP BY, \
             such as SELECT {name}(...) AS bucket, avg(v) FROM t WHERE ... GROUP BY bucket"
        ))),
    }
}

struct Rewriter<'a> {
    catalog: &'a dyn Catalog,
}

impl VisitorMut for Rewriter<'_> {
    type Break = SqlError;

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<SqlError> {
        match self.plan(query) {
            Ok(None) => ControlFlow::Continue(()),
            Ok(Some(plan)) => match fill_query(query, &plan) {
                Ok(filled) => {
                    *query = filled;
                    ControlFlow::Continue(())
                }
                Err(e) => ControlFlow::Break(e),
            },
            Err(e) => ControlFlow::Break(e),
        }
    }
}

/// A gap-fill call's arguments, by meaning.
struct Call {
    flavour: Flavour,
    width: Expr,
    time: Expr,
    start: Option<Expr>,
    finish: Option<Expr>,
    origin: Option<Expr>,
}

impl Rewriter<'_> {
    /// Turns a gap-fill SELECT into the grouped query `fill_query` completes, and returns
    /// the plan for it; `None` for any other query.
    fn plan(&self, query: &mut Query) -> Result<Option<FillPlan>> {
        let default_order = query.order_by.is_none();
        let SetExpr::Select(select) = query.body.as_mut() else {
            return Ok(None);
        };
        let found: Vec<(usize, Flavour)> = select
            .projection
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item_expr(item)? {
                Expr::Function(f) => Some((i, Flavour::of(f)?)),
                _ => None,
            })
            .collect();
        let (at, flavour) = match found.as_slice() {
            [] => return Ok(None),
            [one] => *one,
            [(_, a), (_, b), ..] => {
                return Err(SqlError::Invalid(format!(
                    "a gap-fill query has one bucket: this SELECT has {} ({}() and {}()); \
                     keep one and group by it",
                    found.len(),
                    a.name(),
                    b.name()
                )));
            }
        };
        let name = flavour.name();
        let groups = match &select.group_by {
            GroupByExpr::Expressions(groups, modifiers) if !groups.is_empty() => {
                if !modifiers.is_empty() {
                    return Err(SqlError::NotSupported(format!(
                        "{name}() with ROLLUP, CUBE or GROUPING SETS"
                    )));
                }
                groups.clone()
            }
            _ => {
                return Err(SqlError::Invalid(format!(
                    "{name}() needs GROUP BY: group by its bucket (and any keys), as in \
                     SELECT {name}(...) AS bucket, avg(v) FROM t WHERE ... GROUP BY bucket"
                )));
            }
        };
        let Some(Expr::Function(f)) = item_expr(&select.projection[at]) else {
            return Ok(None);
        };
        let gap = Call::of(flavour, f)?;
        let (stride, months) = width::stride(name, &gap.width)?;
        let origin = match (flavour, &gap.origin) {
            (Flavour::Influx, Some(origin)) => to_timestamp(origin.clone()),
            (Flavour::Influx, None) => timestamp_text("1970-01-01T00:00:00"),
            (Flavour::Timescale, _) if months => timestamp_text("2000-01-01T00:00:00"),
            (Flavour::Timescale, _) => timestamp_text("2000-01-03T00:00:00"),
        };
        let bucket = call(
            "timestamp_floor",
            vec![string(&stride), gap.time.clone(), origin.clone(), null()],
        );
        let (from, to) = bounds(&gap, select.selection.as_ref())?;
        if let Some(start) = &gap.start {
            let start = to_timestamp(start.clone());
            add_filter(
                select,
                binary(gap.time.clone(), BinaryOperator::GtEq, start),
            );
        }
        if let Some(finish) = &gap.finish {
            let finish = to_timestamp(finish.clone());
            add_filter(select, binary(gap.time.clone(), BinaryOperator::Lt, finish));
        }

        let names = output_names(select);
        let originals: Vec<(Option<Ident>, Expr)> = select
            .projection
            .iter()
            .map(|item| match item {
                SelectItem::ExprWithAlias { expr, alias } => {
                    Ok((Some(alias.clone()), expr.clone()))
                }
                SelectItem::UnnamedExpr(expr) => Ok((None, expr.clone())),
                _ => Err(SqlError::Invalid(format!(
                    "{name}(): list the columns to select; '*' cannot be gap-filled"
                ))),
            })
            .collect::<Result<_>>()?;

        let mut fills = Vec::new();
        let mut key_items = Vec::new();
        for (i, item) in select.projection.iter_mut().enumerate() {
            let Some(expr) = item_expr_mut(item) else {
                continue;
            };
            if i == at {
                *expr = bucket.clone();
            } else if let Some((fill, inner)) = fill_call(expr)? {
                *expr = inner;
                fills.push(fill);
            } else if self.has_aggregate(expr) || is_constant(expr) {
                fills.push(Fill::Null);
            } else {
                key_items.push(i);
            }
        }

        let mut group_by = vec![bucket.clone()];
        for group in &groups {
            let resolved = resolve(group, &originals, at);
            let Some(resolved) = resolved else {
                continue;
            };
            let is_key = key_items.iter().any(|k| originals[*k].1 == resolved);
            if !is_key {
                return Err(SqlError::NotSupported(format!(
                    "{name}() with a GROUP BY key that is not selected ({resolved}): select it, \
                     or leave it out of GROUP BY"
                )));
            }
            if !group_by.contains(&resolved) {
                group_by.push(resolved);
            }
        }
        select.group_by = GroupByExpr::Expressions(group_by, Vec::new());

        let plan = FillPlan {
            fills,
            bucket,
            stride,
            origin,
            zone: null(),
            from: Some(from),
            to: Some(to),
            bucket_item: Some(at),
            key_items,
            names,
            default_order,
            extrapolate: false,
        };
        name_fill_items(select, &plan);
        Ok(Some(plan))
    }

    /// Whether `e` calls an aggregate.
    fn has_aggregate(&self, e: &Expr) -> bool {
        visit_expressions(e, |e| match e {
            Expr::Function(f)
                if f.over.is_none()
                    && name_of(f).is_some_and(|n| self.catalog.is_aggregate(&n)) =>
            {
                ControlFlow::Break(())
            }
            _ => ControlFlow::Continue(()),
        })
        .is_break()
    }
}

impl Call {
    /// The arguments of a call to `flavour`'s function, positional or (TimescaleDB's)
    /// named `start => ...`, `finish => ...`. A NULL start or finish is not given.
    fn of(flavour: Flavour, f: &Function) -> Result<Call> {
        let name = flavour.name();
        let usage = match flavour {
            Flavour::Timescale => "time_bucket_gapfill(width, ts [, start [, finish]])",
            Flavour::Influx => "date_bin_gapfill(width, time [, origin])",
        };
        let wrong = || SqlError::Invalid(format!("{name}() takes {usage}"));
        let FunctionArguments::List(list) = &f.args else {
            return Err(wrong());
        };
        if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
            return Err(wrong());
        }
        let mut positional = Vec::new();
        let (mut start, mut finish) = (None, None);
        for arg in &list.args {
            match arg {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => positional.push(e.clone()),
                FunctionArg::Named {
                    name: arg_name,
                    arg: FunctionArgExpr::Expr(e),
                    ..
                } if flavour == Flavour::Timescale => {
                    match arg_name.value.to_lowercase().as_str() {
                        "start" => start = Some(e.clone()),
                        "finish" => finish = Some(e.clone()),
                        "timezone" => {
                            return Err(SqlError::NotSupported(format!(
                                "{name}() with a timezone: bucket in UTC"
                            )));
                        }
                        _ => return Err(wrong()),
                    }
                }
                _ => return Err(wrong()),
            }
        }
        let mut positional = positional.into_iter();
        let (Some(width), Some(time)) = (positional.next(), positional.next()) else {
            return Err(wrong());
        };
        let mut origin = None;
        match flavour {
            Flavour::Timescale => {
                if let Some(s) = positional.next() {
                    start = start.or(Some(s));
                }
                if let Some(f) = positional.next() {
                    finish = finish.or(Some(f));
                }
            }
            Flavour::Influx => origin = positional.next(),
        }
        if positional.next().is_some() {
            return Err(wrong());
        }
        let given = |e: Option<Expr>| e.filter(|e| !is_null(e));
        Ok(Call {
            flavour,
            width,
            time,
            start: given(start),
            finish: given(finish),
            origin: given(origin),
        })
    }
}

/// The grid's start and (exclusive) end: the call's arguments, else the WHERE clause's
/// bounds on the call's time column.
fn bounds(call: &Call, selection: Option<&Expr>) -> Result<(Expr, Expr)> {
    let (mut lows, mut highs) = (Vec::new(), Vec::new());
    if let Some(selection) = selection {
        let mut conjuncts = Vec::new();
        crate::ast::split_and(selection, &mut conjuncts);
        for c in conjuncts {
            where_bound(c, &call.time, &mut lows, &mut highs);
        }
    }
    let from = call
        .start
        .clone()
        .map(to_timestamp)
        .or_else(|| narrowest("greatest", lows));
    let to = call
        .finish
        .clone()
        .map(to_timestamp)
        .or_else(|| narrowest("least", highs));
    match (from, to) {
        (Some(from), Some(to)) => Ok((from, to)),
        (from, to) => {
            let missing = match (from.is_none(), to.is_none()) {
                (true, true) => "start/finish",
                (true, false) => "start",
                _ => "finish",
            };
            let time = &call.time;
            Err(SqlError::Invalid(match call.flavour {
                Flavour::Timescale => format!(
                    "missing time_bucket_gapfill argument: could not infer {missing} from WHERE \
                     clause: bound {time} in WHERE ({time} >= ... AND {time} < ...), or give \
                     {missing} as arguments: time_bucket_gapfill(width, {time}, start, finish)"
                ),
                Flavour::Influx => format!(
                    "date_bin_gapfill needs a lower and an upper bound on {time} in WHERE \
                     ({time} >= ... AND {time} < ...); missing: {}",
                    match missing {
                        "start/finish" => "both",
                        "start" => "the lower bound",
                        _ => "the upper bound",
                    }
                ),
            }))
        }
    }
}

/// Adds the bound `conjunct` puts on `time`, if any, to `lows` (inclusive) or `highs`
/// (exclusive).
fn where_bound(conjunct: &Expr, time: &Expr, lows: &mut Vec<Expr>, highs: &mut Vec<Expr>) {
    let bound = |e: &Expr| is_constant(e).then(|| to_timestamp(e.clone()));
    match conjunct {
        Expr::BinaryOp { left, op, right } => {
            let (value, op) = if same_column(left, time) {
                (right, op.clone())
            } else if same_column(right, time) {
                let flipped = match op {
                    BinaryOperator::Lt => BinaryOperator::Gt,
                    BinaryOperator::LtEq => BinaryOperator::GtEq,
                    BinaryOperator::Gt => BinaryOperator::Lt,
                    BinaryOperator::GtEq => BinaryOperator::LtEq,
                    _ => return,
                };
                (left, flipped)
            } else {
                return;
            };
            let Some(value) = bound(value) else {
                return;
            };
            match op {
                BinaryOperator::Gt | BinaryOperator::GtEq => lows.push(value),
                BinaryOperator::Lt => highs.push(value),
                BinaryOperator::LtEq => highs.push(just_after(value)),
                _ => {}
            }
        }
        Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } if same_column(expr, time) => {
            if let (Some(low), Some(high)) = (bound(low), bound(high)) {
                lows.push(low);
                highs.push(just_after(high));
            }
        }
        _ => {}
    }
}

/// The one bound of `bounds`, or the narrowest (`greatest` of starts, `least` of ends).
fn narrowest(function: &str, mut bounds: Vec<Expr>) -> Option<Expr> {
    match bounds.len() {
        0 => None,
        1 => bounds.pop(),
        _ => Some(call(function, bounds)),
    }
}

/// The instant one nanosecond after `t`: the exclusive end that keeps `t`'s bucket.
fn just_after(t: Expr) -> Expr {
    call(
        "to_timestamp_nanos",
        vec![binary(
            cast(t, DataType::BigInt(None)),
            BinaryOperator::Plus,
            number(1),
        )],
    )
}

/// Whether `a` and `b` name the same column (a qualifier on only one of them matches any).
fn same_column(a: &Expr, b: &Expr) -> bool {
    match (column_parts(a), column_parts(b)) {
        (Some((qa, ca)), Some((qb, cb))) => {
            same_ident(ca, cb)
                && match (qa, qb) {
                    (Some(qa), Some(qb)) => same_ident(qa, qb),
                    _ => true,
                }
        }
        _ => false,
    }
}

fn column_parts(e: &Expr) -> Option<(Option<&Ident>, &Ident)> {
    match e {
        Expr::Identifier(c) => Some((None, c)),
        Expr::CompoundIdentifier(parts) => match parts.as_slice() {
            [q, c] => Some((Some(q), c)),
            _ => None,
        },
        Expr::Nested(inner) => column_parts(inner),
        _ => None,
    }
}

/// Whether two names are one: exactly when either is quoted, in any case otherwise.
fn same_ident(a: &Ident, b: &Ident) -> bool {
    if a.quote_style.is_some() || b.quote_style.is_some() {
        a.value == b.value
    } else {
        a.value.eq_ignore_ascii_case(&b.value)
    }
}

/// What a GROUP BY expression groups by, in the select list's terms: an item's expression for
/// its position or alias; `None` for the gap-fill item (the bucket).
fn resolve(group: &Expr, items: &[(Option<Ident>, Expr)], bucket: usize) -> Option<Expr> {
    let index = match group {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n
                .parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .filter(|i| *i < items.len()),
            _ => None,
        },
        Expr::Identifier(name) => items
            .iter()
            .position(|(alias, _)| alias.as_ref().is_some_and(|a| same_ident(a, name))),
        _ => None,
    };
    let index = index.or_else(|| items.iter().position(|(_, e)| e == group));
    match index {
        Some(i) if i == bucket => None,
        Some(i) => Some(items[i].1.clone()),
        None => Some(group.clone()),
    }
}

/// `locf(x)` as PREV and `interpolate(x)` as LINEAR, with `x`; `None` for other items.
fn fill_call(e: &Expr) -> Result<Option<(Fill, Expr)>> {
    let Expr::Function(f) = e else {
        return Ok(None);
    };
    let (fill, name, extra) = match name_of(f).as_deref() {
        Some("locf") => (Fill::Prev, "locf", "prev and treat_null_as_missing"),
        Some("interpolate") => (Fill::Linear, "interpolate", "prev and next"),
        _ => return Ok(None),
    };
    let args = match &f.args {
        FunctionArguments::List(list)
            if list.duplicate_treatment.is_none() && list.clauses.is_empty() =>
        {
            list.args.as_slice()
        }
        _ => &[],
    };
    match args {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(inner))] if f.over.is_none() => {
            Ok(Some((fill, inner.clone())))
        }
        [] => Err(SqlError::Invalid(format!(
            "{name}() takes one value, such as {name}(avg(v))"
        ))),
        _ => Err(SqlError::NotSupported(format!(
            "{name}() with more than its value ({extra})"
        ))),
    }
}

fn item_expr(item: &SelectItem) -> Option<&Expr> {
    match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
        _ => None,
    }
}

fn item_expr_mut(item: &mut SelectItem) -> Option<&mut Expr> {
    match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
        _ => None,
    }
}

fn is_null(e: &Expr) -> bool {
    matches!(e, Expr::Value(v) if v.value == Value::Null)
}

fn to_timestamp(e: Expr) -> Expr {
    cast(e, DataType::Timestamp(None, TimezoneInfo::None))
}

fn timestamp_text(text: &str) -> Expr {
    to_timestamp(string(text))
}

#[cfg(test)]
mod tests {
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    use super::*;
    use crate::questdb::extract;

    struct Tables;

    impl Catalog for Tables {
        fn designated_timestamp(&self, table: &str) -> Option<Option<String>> {
            (table == "cpu").then(|| Some("ts".into()))
        }

        fn is_aggregate(&self, function: &str) -> bool {
            matches!(function, "avg" | "sum" | "max" | "min" | "count")
        }

        fn is_symbol(&self, _table: &str, column: &str) -> bool {
            column == "host"
        }
    }

    /// The statement after the QuestDB and gap-fill rewrites, checked to read back as itself.
    fn rewritten(sql: &str) -> Result<String> {
        let (text, clauses) = extract(sql)?;
        let mut statements = Parser::parse_sql(&GenericDialect {}, &text).expect(sql);
        let statement = &mut statements[0];
        crate::questdb::rewrite(statement, &clauses, &Tables)?;
        rewrite(statement, &Tables)?;
        let printed = statement.to_string();
        let reparsed = Parser::parse_sql(&GenericDialect {}, &printed).expect(&printed);
        assert_eq!(reparsed[0].to_string(), printed, "{sql}");
        Ok(printed)
    }

    fn error(sql: &str) -> String {
        rewritten(sql).unwrap_err().to_string()
    }

    const FLOOR: &str = "timestamp_floor('1h', ts, CAST('2000-01-03T00:00:00' AS TIMESTAMP), NULL)";

    #[test]
    fn a_gapfill_query_becomes_a_filled_sample() {
        let text = rewritten(
            "SELECT time_bucket_gapfill('1 hour', ts) AS b, host, avg(v) AS a, locf(avg(v)) AS l, \
             interpolate(avg(v)) AS i FROM cpu WHERE ts >= '2024-01-01' AND ts < '2024-01-02' \
             GROUP BY b, host",
        )
        .unwrap();
        let sampled = format!(
            "WITH __s AS (SELECT {FLOOR} AS __f0, host AS __f1, avg(v) AS __f2, avg(v) AS __f3, \
             avg(v) AS __f4 FROM cpu WHERE ts >= '2024-01-01' AND ts < '2024-01-02' \
             GROUP BY {FLOOR}, host)"
        );
        assert!(text.starts_with(&sampled), "{text}");
        for part in [
            "sample_grid('1h', CAST('2024-01-01' AS TIMESTAMP), CAST('2024-01-02' AS TIMESTAMP), \
             CAST('2000-01-03T00:00:00' AS TIMESTAMP), NULL)",
            "CROSS JOIN (SELECT DISTINCT __f1 FROM __s) AS __k",
            "count(CASE WHEN __present THEN 1 END) OVER (PARTITION BY __f1 ORDER BY __f0 ROWS \
             BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS __after",
            "__sundial_fill_linear(__f4, __present, CAST(__f0 AS BIGINT)) OVER (PARTITION BY \
             __f1 ORDER BY __f0) AS __line4",
            "SELECT __f0 AS b, __f1 AS host, __f2 AS a, CASE WHEN __present THEN __f3 ELSE \
             __prev3 END AS l, CASE WHEN __present OR (__before > 0 AND __after > 0) THEN \
             __line4 END AS i FROM __v ORDER BY __f0, __f1",
        ] {
            assert!(text.contains(part), "{part}\n{text}");
        }
    }

    #[test]
    fn bounds_come_from_the_where_clause() {
        let grid = |sql: &str| {
            let text = rewritten(sql).unwrap();
            let start = text.find("sample_grid(").expect("a grid");
            let end = text[start..].find(", CAST('2000").expect("an origin");
            text[start + "sample_grid('1h', ".len()..start + end].to_string()
        };
        assert_eq!(
            grid(
                "SELECT time_bucket_gapfill('1 hour', c.ts) b, max(v) FROM cpu c \
                 WHERE v > 0 AND (ts > 'a' AND c.ts <= 'b') GROUP BY 1"
            ),
            "CAST('a' AS TIMESTAMP), to_timestamp_nanos(CAST(CAST('b' AS TIMESTAMP) AS BIGINT) + 1)"
        );
        assert_eq!(
            grid(
                "SELECT time_bucket_gapfill('60 minutes', ts) b, max(v) FROM cpu \
                 WHERE ts BETWEEN 'a' AND 'b' GROUP BY b"
            ),
            "CAST('a' AS TIMESTAMP), to_timestamp_nanos(CAST(CAST('b' AS TIMESTAMP) AS BIGINT) + 1)"
        );
        assert_eq!(
            grid(
                "SELECT time_bucket_gapfill(INTERVAL '1 hour', ts) b, max(v) FROM cpu \
                 WHERE 'b' > ts AND ts >= 'a' AND ts >= now() GROUP BY b"
            ),
            "greatest(CAST('a' AS TIMESTAMP), CAST(now() AS TIMESTAMP)), CAST('b' AS TIMESTAMP)"
        );
        // Arguments win over WHERE, and bound the rows too; NULL is not given.
        let text = rewritten(
            "SELECT time_bucket_gapfill('1h', ts, 'x', finish => 'y') b, max(v) FROM cpu \
             WHERE ts >= 'a' AND ts < 'b' GROUP BY b",
        )
        .unwrap();
        assert!(
            text.contains(
                "WHERE ((ts >= 'a' AND ts < 'b') AND ts >= CAST('x' AS TIMESTAMP)) AND ts < \
                 CAST('y' AS TIMESTAMP)"
            ),
            "{text}"
        );
        assert!(
            text.contains("sample_grid('1h', CAST('x' AS TIMESTAMP), CAST('y' AS TIMESTAMP)"),
            "{text}"
        );
        assert_eq!(
            grid(
                "SELECT time_bucket_gapfill('1h', ts, NULL, 'y') b, max(v) FROM cpu \
                 WHERE ts >= 'a' GROUP BY b"
            ),
            "CAST('a' AS TIMESTAMP), CAST('y' AS TIMESTAMP)"
        );
    }

    #[test]
    fn date_bin_gapfill_buckets_from_its_origin() {
        let text = rewritten(
            "SELECT date_bin_gapfill(INTERVAL '15 minutes', ts) AS t, locf(max(v)) FROM cpu \
             WHERE ts >= 'a' AND ts < 'b' GROUP BY t ORDER BY t DESC LIMIT 2",
        )
        .unwrap();
        assert!(
            text.contains(
                "timestamp_floor('15m', ts, CAST('1970-01-01T00:00:00' AS TIMESTAMP), NULL) AS __f0"
            ),
            "{text}"
        );
        assert!(text.ends_with("FROM __v ORDER BY t DESC LIMIT 2"), "{text}");
        let text = rewritten(
            "SELECT date_bin_gapfill('1 day', ts, '2024-01-01T06:00:00') AS t, max(v) FROM cpu \
             WHERE ts >= 'a' AND ts < 'b' GROUP BY t",
        )
        .unwrap();
        assert!(
            text.contains(
                "timestamp_floor('1d', ts, CAST('2024-01-01T06:00:00' AS TIMESTAMP), NULL)"
            ),
            "{text}"
        );
        // Months start at TimescaleDB's 2000-01-01.
        let text = rewritten(
            "SELECT time_bucket_gapfill('1 month', ts) AS t, max(v) FROM cpu \
             WHERE ts >= 'a' AND ts < 'b' GROUP BY t",
        )
        .unwrap();
        assert!(
            text.contains("timestamp_floor('1M', ts, CAST('2000-01-01T00:00:00' AS TIMESTAMP)"),
            "{text}"
        );
    }

    #[test]
    fn missing_bounds_are_named() {
        let e = error("SELECT time_bucket_gapfill('1h', ts) b, max(v) FROM cpu GROUP BY b");
        assert!(
            e.starts_with(
                "missing time_bucket_gapfill argument: could not infer start/finish from WHERE \
                 clause"
            ),
            "{e}"
        );
        let e = error(
            "SELECT time_bucket_gapfill('1h', ts) b, max(v) FROM cpu WHERE ts >= 'a' OR ts < 'b' \
             GROUP BY b",
        );
        assert!(e.contains("could not infer start/finish"), "{e}");
        let e = error(
            "SELECT time_bucket_gapfill('1h', ts) b, max(v) FROM cpu WHERE ts >= 'a' GROUP BY b",
        );
        assert!(e.contains("could not infer finish"), "{e}");
        // A bound on another column, or one that is not constant, is no bound.
        let e = error(
            "SELECT time_bucket_gapfill('1h', ts) b, max(v) FROM cpu WHERE v >= 1 AND ts < v \
             GROUP BY b",
        );
        assert!(e.contains("could not infer start/finish"), "{e}");
        let e = error(
            "SELECT date_bin_gapfill('1h', ts, 'o') b, max(v) FROM cpu WHERE ts >= 'a' GROUP BY b",
        );
        assert!(
            e.contains("date_bin_gapfill needs a lower and an upper bound on ts in WHERE"),
            "{e}"
        );
        assert!(e.ends_with("missing: the upper bound"), "{e}");
    }

    #[test]
    fn misplaced_calls_say_where_they_belong() {
        let bounded = "FROM cpu WHERE ts >= 'a' AND ts < 'b'";
        for (sql, message) in [
            (
                format!("SELECT locf(max(v)) {bounded}"),
                "locf() is only allowed as a select item of its own",
            ),
            (
                format!("SELECT host, interpolate(max(v)) {bounded} GROUP BY host"),
                "interpolate() is only allowed as a select item of its own",
            ),
            (
                format!(
                    "SELECT time_bucket_gapfill('1h', ts) b, locf(max(v)) + 1 {bounded} GROUP BY b"
                ),
                "locf() is only allowed as a select item of its own",
            ),
            (
                // (With an aggregate, QuestDB's implicit GROUP BY groups by the bucket.)
                format!("SELECT time_bucket_gapfill('1h', ts) b, v {bounded}"),
                "time_bucket_gapfill() needs GROUP BY",
            ),
            (
                format!(
                    "SELECT time_bucket_gapfill('1h', ts) b, date_bin_gapfill('1h', ts) d, max(v) \
                     {bounded} GROUP BY b, d"
                ),
                "a gap-fill query has one bucket: this SELECT has 2",
            ),
            (
                format!("SELECT max(v) {bounded} AND date_bin_gapfill('1h', ts) IS NULL"),
                "date_bin_gapfill() is only allowed as a select item of its own",
            ),
            (
                format!(
                    "SELECT time_bucket_gapfill('1h', ts) b, max(v) {bounded} GROUP BY b, host"
                ),
                "GROUP BY key that is not selected (host)",
            ),
            (
                format!("SELECT time_bucket_gapfill('1h', ts) b, * {bounded} GROUP BY b"),
                "'*' cannot be gap-filled",
            ),
            (
                format!("SELECT time_bucket_gapfill(v, ts) b, max(v) {bounded} GROUP BY b"),
                "the bucket width must be a constant interval",
            ),
            (
                format!("SELECT time_bucket_gapfill('1h') b, max(v) {bounded} GROUP BY b"),
                "time_bucket_gapfill() takes time_bucket_gapfill(width, ts [, start [, finish]])",
            ),
            (
                format!(
                    "SELECT time_bucket_gapfill('1h', ts) b, locf(max(v), 0) {bounded} GROUP BY b"
                ),
                "locf() with more than its value",
            ),
        ] {
            let e = error(&sql);
            assert!(e.contains(message), "{sql}: {e}");
        }
    }

    #[test]
    fn group_by_refers_to_items_by_position_alias_or_expression() {
        for group_by in [
            "1, 2",
            "b, h",
            "time_bucket_gapfill('1h', ts), host",
            "h, 1",
        ] {
            let text = rewritten(&format!(
                "SELECT time_bucket_gapfill('1h', ts) AS b, host AS h, sum(v) FROM cpu \
                 WHERE ts >= 'a' AND ts < 'b' GROUP BY {group_by}"
            ))
            .unwrap();
            assert!(
                text.contains(&format!("GROUP BY {FLOOR}, host)")),
                "{group_by}: {text}"
            );
        }
    }

    #[test]
    fn other_statements_are_left_alone() {
        for sql in [
            "SELECT max(v) FROM cpu GROUP BY host",
            "SELECT time_bucket('1h', ts) FROM cpu",
            "SELECT locf FROM cpu",
        ] {
            let (text, clauses) = extract(sql).unwrap();
            let mut statements = Parser::parse_sql(&GenericDialect {}, &text).unwrap();
            let before = statements[0].clone();
            rewrite(&mut statements[0], &Tables).unwrap();
            assert_eq!(statements[0], before, "{sql}");
            let _ = clauses;
        }
    }
}
