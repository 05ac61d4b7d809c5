//! QuestDB's time-series dialect on DataFusion: SAMPLE BY, LATEST ON/BY, QuestDB's LIMIT,
//! interval literals and QuestDB's function names.
//!
//! ```text
//!  SQL ─clauses::extract─▶ SQL with markers ─sqlparser─▶ AST ─rewrite─▶ standard SQL AST
//!        (SAMPLE BY 1h      (GROUP BY __sundial_sample_by(0))   (GROUP BY timestamp_floor('1h', ts),
//!         FILL .. ALIGN ..)                                      ORDER BY the bucket)
//! ```
//!
//! sqlparser cannot parse QuestDB's clauses, so `clauses` swaps each for a marker standard
//! SQL carries to the right SELECT; [`rewrite`] then turns each marked SELECT into plain SQL
//! that DataFusion plans:
//!
//! - `SAMPLE BY` groups by `timestamp_floor(stride, ts, origin, tz)`; the designated
//!   timestamp in the select list stands for its bucket, every other non-aggregate item is a
//!   key, and the result is ordered by bucket (then keys) unless the query says otherwise.
//!   `FILL(...)` wraps the sampled query in SQL that adds the empty buckets (`sample`,
//!   `fill`).
//! - `LATEST ON ts PARTITION BY k` (and `LATEST BY k`) keeps, among the rows passing the
//!   WHERE before it, the newest row of each key, in timestamp order (`latest`).
//! - `LIMIT -n` and the other negative forms take rows from the end: the query runs in
//!   reverse order with a plain limit (a reverse scan that stops early when the order is the
//!   designated timestamp's), and the rows are put back in order (`order`).
//! - `ts IN '2016-01-01;2h'` becomes `ts >= lo AND ts < hi`, which the scan prunes by.
//! - `ASOF JOIN` / `LT JOIN` become a `LEFT JOIN`, `SPLICE JOIN` a `FULL JOIN`, marked for
//!   the `asof` plan rule (`time_join`).
//! - A statement selecting rows of one table with a designated timestamp, without ORDER BY,
//!   returns them in timestamp order (`order`).
//! - A SELECT with aggregates and other items but no GROUP BY groups by the other items
//!   (QuestDB's implicit GROUP BY).
//! - `first`/`last` are `first_value`/`last_value` in designated-timestamp order;
//!   `count_distinct(x)` is `count(DISTINCT x)`; `hour(ts)` & co. are `date_part`.
//! - Unaliased select items get QuestDB's names (`max(v)`, `v::int`, `v_2`), before any
//!   other rewrite changes them (`column_names`).
//! - NULL is a value, as in QuestDB: `x != 'a'` keeps NULL rows, `x = NULL` finds them,
//!   NULL sorts lowest (`nulls`).
//! - An integer literal that meets a TIMESTAMP (compared, or cast) is microseconds
//!   (`micros`); unquoted names match the camelCase columns of `tables()` & co.
//!   (`meta_names`).

mod clauses;
mod column_names;
mod fill;
mod interval;
mod latest;
mod meta_names;
mod micros;
mod nulls;
mod order;
mod sample;
pub mod stride;
mod time_join;
mod view_buckets;

use std::collections::HashSet;
use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, DataType, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentClause,
    FunctionArguments, GroupByExpr, Ident, ObjectName, ObjectNamePart, OrderBy, OrderByExpr,
    OrderByKind, OrderByOptions, Query, Select, SelectItem, SetExpr, Statement, TableFactor,
    TimezoneInfo, Value, VisitMut, VisitorMut, visit_expressions, visit_expressions_mut,
    visit_relations,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

pub(crate) use clauses::Fill;
pub(crate) use clauses::{Align, SAMPLE_MARKER};
pub use clauses::{Clauses, extract};
use clauses::{INTERVAL_MARKER, LATEST_MARKER, LIMIT_MARKER, Position, TIME_JOIN_MARKER};
pub(crate) use column_names::name_items as name_unaliased_items;
pub(crate) use fill::{FillPlan, fill_query};
pub(crate) use meta_names::quote_meta_columns;
pub(crate) use sample::offset_ns;
pub(crate) use sample::{name_items as name_fill_items, output_names};
pub use view_buckets::{Buckets, Rollup, RollupColumn, view_buckets};

use crate::ast::{call, cast};
use crate::error::{Result, SqlError};

/// What the rewrite needs to know about tables.
pub trait Catalog {
    /// `None` if `table` is not a table; `Some(None)` if it has no designated timestamp.
    fn designated_timestamp(&self, table: &str) -> Option<Option<String>>;
    /// Whether `function` (lower case) names an aggregate.
    fn is_aggregate(&self, function: &str) -> bool;
    /// Whether `column` of `table` is a SYMBOL column.
    fn is_symbol(&self, table: &str, column: &str) -> bool;
    /// Whether `column` of `table` is a TIMESTAMP column (see `micros`).
    fn is_timestamp(&self, _table: &str, _column: &str) -> bool {
        false
    }
    /// Whether `table` has a column named `column`.
    fn has_column(&self, _table: &str, _column: &str) -> bool {
        false
    }
    /// Whether `column` of `table` is a FLOAT or DOUBLE column (whose NULL, QuestDB's NaN,
    /// sorts above every number; see `nulls`).
    fn is_floating(&self, _table: &str, _column: &str) -> bool {
        false
    }
    /// The materialized views a SAMPLE BY query over `table` may be answered from (see
    /// `rollup`); none unless the engine routes queries to views.
    fn rollups(&self, _table: &str) -> Vec<Rollup> {
        Vec::new()
    }
}

/// More rows than any query returns.
const ROWS_MAX: i64 = 1 << 62;

/// Rewrites the marked SELECTs of `statement` (see the module docs) into standard SQL.
pub fn rewrite(statement: &mut Statement, clauses: &Clauses, catalog: &dyn Catalog) -> Result<()> {
    micros::rewrite(statement, catalog);
    let questdb_semantics = column_names::reads_a_table(statement, catalog);
    let (timestamps, tables) = if questdb_semantics {
        (
            designated_timestamps(statement, catalog),
            statement_tables(statement, catalog),
        )
    } else {
        (HashSet::new(), Vec::new())
    };
    let mut rewriter = Rewriter {
        clauses,
        catalog,
        questdb_semantics,
        timestamps,
        tables,
    };
    if let ControlFlow::Break(e) = statement.visit(&mut rewriter) {
        return Err(e);
    }
    rewriter.table_order(statement);
    leftover_marker(statement)
}

struct Rewriter<'a> {
    clauses: &'a Clauses,
    catalog: &'a dyn Catalog,
    /// Whether the statement reads a Sundial table, and so gets QuestDB's NULL rules
    /// (`nulls`); PostgreSQL tools' catalog queries keep SQL's.
    questdb_semantics: bool,
    /// The designated timestamps of the statement's tables, in lower case.
    timestamps: HashSet<String>,
    /// The Sundial tables the statement reads.
    tables: Vec<String>,
}

/// The Sundial tables `statement` reads.
fn statement_tables(statement: &Statement, catalog: &dyn Catalog) -> Vec<String> {
    let mut found = Vec::new();
    let _ = visit_relations(statement, |name| {
        if let Some(table) = object_name_text(name)
            && catalog.designated_timestamp(&table).is_some()
            && !found.contains(&table)
        {
            found.push(table);
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

/// The designated timestamp columns of the tables `statement` reads, in lower case.
fn designated_timestamps(statement: &Statement, catalog: &dyn Catalog) -> HashSet<String> {
    let mut found = HashSet::new();
    let _ = visit_relations(statement, |name| {
        if let Some(table) = object_name_text(name)
            && let Some(Some(column)) = catalog.designated_timestamp(&table)
        {
            found.insert(column.to_lowercase());
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

impl VisitorMut for Rewriter<'_> {
    type Break = SqlError;

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<SqlError> {
        if let Err(e) = self.rewrite_expr(expr) {
            return ControlFlow::Break(e);
        }
        if self.questdb_semantics {
            nulls::rewrite_expr(expr, &self.timestamps);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<SqlError> {
        match self.rewrite_query(query) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    }
}

/// A marker's clause that the rewrite did not reach: it stood where QuestDB does not allow it.
fn leftover_marker(statement: &Statement) -> Result<()> {
    let mut found = None;
    let _ = visit_expressions(statement, |e| {
        for (marker, clause) in [
            (SAMPLE_MARKER, "SAMPLE BY"),
            (LATEST_MARKER, "LATEST ON/BY"),
            (LIMIT_MARKER, "LIMIT"),
            (INTERVAL_MARKER, "IN '<interval>'"),
            (TIME_JOIN_MARKER, "ASOF/LT JOIN"),
        ] {
            if marker_argument(e, marker).is_some() {
                found = Some(clause);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    match found {
        Some(clause) => Err(SqlError::Invalid(format!(
            "{clause} is not allowed here: it belongs after a SELECT's FROM and WHERE"
        ))),
        None => Ok(()),
    }
}

/// The integer (or string) argument of a call to `marker`.
fn marker_argument<'e>(expr: &'e Expr, marker: &str) -> Option<&'e Value> {
    let Expr::Function(f) = expr else {
        return None;
    };
    if !is_named(&f.name, marker) {
        return None;
    }
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))] => Some(&v.value),
        _ => None,
    }
}

pub(crate) fn marker_index(expr: &Expr, marker: &str) -> Option<usize> {
    match marker_argument(expr, marker)? {
        Value::Number(n, _) => n.parse().ok(),
        _ => None,
    }
}

fn is_named(name: &ObjectName, wanted: &str) -> bool {
    matches!(name.0.as_slice(), [ObjectNamePart::Identifier(i)] if i.value.eq_ignore_ascii_case(wanted))
}

fn function_name(f: &Function) -> Option<String> {
    match f.name.0.as_slice() {
        [ObjectNamePart::Identifier(i)] => Some(i.value.to_lowercase()),
        _ => None,
    }
}

fn unnamed_args(f: &Function) -> Option<Vec<&Expr>> {
    let FunctionArguments::List(list) = &f.args else {
        return match &f.args {
            FunctionArguments::None => Some(Vec::new()),
            _ => None,
        };
    };
    list.args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect()
}

fn string(s: &str) -> Expr {
    Expr::value(Value::SingleQuotedString(s.to_string()))
}

fn timestamp_literal(ns: i64) -> Expr {
    let text = chrono::DateTime::from_timestamp_nanos(ns)
        .naive_utc()
        .format("%Y-%m-%dT%H:%M:%S%.f")
        .to_string();
    to_timestamp(string(&text))
}

fn to_timestamp(expr: Expr) -> Expr {
    cast(expr, DataType::Timestamp(None, TimezoneInfo::None))
}

fn and(a: Expr, b: Expr) -> Expr {
    Expr::BinaryOp {
        left: Box::new(a),
        op: BinaryOperator::And,
        right: Box::new(b),
    }
}

fn compare(a: Expr, op: BinaryOperator, b: Expr) -> Expr {
    Expr::BinaryOp {
        left: Box::new(a),
        op,
        right: Box::new(b),
    }
}

fn parse_expr(text: &str, clause: &str, at: Position) -> Result<Expr> {
    Parser::new(&GenericDialect {})
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| SqlError::Invalid(format!("{clause} at {at}: {e}")))
}

fn parse_query(sql: &str) -> Result<Query> {
    let mut parser = Parser::new(&GenericDialect {})
        .try_with_sql(sql)
        .map_err(|e| SqlError::Invalid(format!("internal rewrite failed: {e}")))?;
    let query = parser
        .parse_query()
        .map_err(|e| SqlError::Invalid(format!("internal rewrite failed: {e}: {sql}")))?;
    Ok(*query)
}

/// The table a SELECT reads, with its designated timestamp as the SELECT refers to it.
struct Source {
    /// The table's name as written, for subqueries over the same table.
    table: ObjectName,
    /// The column (qualified by the alias when the table has one).
    timestamp: Expr,
    /// The timestamp column's name.
    column: String,
    /// The alias or table name that qualifies columns.
    qualifier: String,
}

impl Source {
    /// Whether `e` is a plain reference to the designated timestamp.
    fn is_timestamp(&self, e: &Expr) -> bool {
        match e {
            Expr::Identifier(i) => same_name(i, &self.column),
            Expr::CompoundIdentifier(parts) => matches!(
                parts.as_slice(),
                [q, c] if same_name(q, &self.qualifier) && same_name(c, &self.column)
            ),
            Expr::Nested(inner) => self.is_timestamp(inner),
            _ => false,
        }
    }
}

/// Whether `ident` names `name`: exactly when quoted, in any case otherwise.
pub(crate) fn same_name(ident: &Ident, name: &str) -> bool {
    if ident.quote_style.is_some() {
        ident.value == name
    } else {
        ident.value.eq_ignore_ascii_case(name)
    }
}

fn column_ident(name: &str) -> Ident {
    let plain = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if plain {
        Ident::new(name)
    } else {
        Ident::with_quote('"', name)
    }
}

fn object_name_text(name: &ObjectName) -> Option<String> {
    match name.0.last()? {
        ObjectNamePart::Identifier(i) if i.quote_style.is_some() => Some(i.value.clone()),
        ObjectNamePart::Identifier(i) => Some(i.value.to_lowercase()),
        _ => None,
    }
}

impl Rewriter<'_> {
    fn rewrite_expr(&self, expr: &mut Expr) -> Result<()> {
        if let Expr::InList {
            expr: column,
            list,
            negated,
        } = expr
            && let [item] = list.as_slice()
            && let Some(Value::SingleQuotedString(text)) = marker_argument(item, INTERVAL_MARKER)
        {
            let ranges = interval::parse(text).map_err(SqlError::Invalid)?;
            let mut any: Option<Expr> = None;
            for (lo, hi) in ranges {
                let range = and(
                    compare(
                        (**column).clone(),
                        BinaryOperator::GtEq,
                        timestamp_literal(lo),
                    ),
                    compare(
                        (**column).clone(),
                        BinaryOperator::Lt,
                        timestamp_literal(hi),
                    ),
                );
                any = Some(match any {
                    None => range,
                    Some(a) => compare(
                        Expr::Nested(Box::new(a)),
                        BinaryOperator::Or,
                        Expr::Nested(Box::new(range)),
                    ),
                });
            }
            let Some(any) = any else {
                return Ok(());
            };
            *expr = if *negated {
                Expr::UnaryOp {
                    op: sqlparser::ast::UnaryOperator::Not,
                    expr: Box::new(Expr::Nested(Box::new(any))),
                }
            } else {
                Expr::Nested(Box::new(any))
            };
            return Ok(());
        }
        if let Expr::Cast { data_type, .. } = expr
            && let Some(standard) = questdb_type(data_type)
        {
            *data_type = standard;
        }
        if let Expr::Function(f) = expr {
            if let Some(part) = date_part_of(f) {
                *expr = part;
            } else {
                rename_function(f);
            }
        }
        Ok(())
    }

    fn rewrite_query(&self, query: &mut Query) -> Result<()> {
        if self.questdb_semantics
            && let Some(order_by) = &mut query.order_by
        {
            let sorts_lowest = |column: &str| {
                !self.timestamps.contains(&column.to_lowercase())
                    && self.tables.iter().any(|t| {
                        self.catalog.has_column(t, column) && !self.catalog.is_floating(t, column)
                    })
            };
            let projection = match &*query.body {
                SetExpr::Select(select) => select.projection.as_slice(),
                _ => &[],
            };
            nulls::order_nulls_lowest(order_by, projection, &sorts_lowest);
        }
        time_join::rewrite(&mut query.body, &self.clauses.time_joins)?;
        if let SetExpr::Select(select) = &mut *query.body {
            // Latest rows come in timestamp order unless the query orders or aggregates.
            if let Some(timestamp) = self.latest(select)?
                && query.order_by.is_none()
                && !self.aggregates_rows(select)
            {
                query.order_by = Some(order_by(vec![timestamp]));
            }
            let mut fill = None;
            if let Some((order_by, mut fill_plan)) = self.sample_by(select)? {
                if let Some(plan) = &mut fill_plan {
                    plan.default_order = query.order_by.is_none();
                }
                if query.order_by.is_none() {
                    query.order_by = Some(order_by);
                }
                fill = fill_plan;
            }
            self.implicit_group_by(select);
            self.first_and_last(select);
            if let Some(plan) = fill {
                *query = fill::fill_query(query, &plan)?;
                return Ok(());
            }
        }
        if query.limit_clause.is_some() && query.order_by.is_none() {
            // QuestDB's LIMIT counts rows in designated-timestamp order.
            let at = Position { line: 0, column: 0 };
            if let Ok(order) = self.natural_order(query, at) {
                query.order_by = Some(OrderBy {
                    kind: OrderByKind::Expressions(order),
                    interpolate: None,
                });
            }
        }
        self.negative_limit(query)
    }

    /// The table of a SELECT reading exactly one table with a designated timestamp.
    fn source(&self, select: &Select, clause: &str, at: Position) -> Result<Source> {
        let unsupported = || {
            SqlError::Invalid(format!(
                "{clause} at {at} needs FROM to name one table with a designated timestamp"
            ))
        };
        let [from] = select.from.as_slice() else {
            return Err(unsupported());
        };
        if !from.joins.is_empty() {
            return Err(unsupported());
        }
        let TableFactor::Table {
            name, alias, args, ..
        } = &from.relation
        else {
            return Err(unsupported());
        };
        if args.is_some() {
            return Err(unsupported());
        }
        let table = object_name_text(name).ok_or_else(unsupported)?;
        let column = match self.catalog.designated_timestamp(&table) {
            None => {
                return Err(SqlError::Invalid(format!(
                    "{clause} at {at}: table '{table}' does not exist"
                )));
            }
            Some(None) => {
                return Err(SqlError::Invalid(format!(
                    "{clause} at {at} needs a designated timestamp, and table '{table}' has \
                     none: declare one with TIMESTAMP(column) when creating the table"
                )));
            }
            Some(Some(column)) => column,
        };
        let (timestamp, qualifier) = match alias {
            Some(a) => (
                Expr::CompoundIdentifier(vec![a.name.clone(), column_ident(&column)]),
                a.name.value.clone(),
            ),
            None => (Expr::Identifier(column_ident(&column)), table.clone()),
        };
        Ok(Source {
            table: name.clone(),
            timestamp,
            column,
            qualifier,
        })
    }

    fn is_aggregate_call(&self, e: &Expr) -> bool {
        let Expr::Function(f) = e else {
            return false;
        };
        f.over.is_none()
            && function_name(f)
                .is_some_and(|n| self.catalog.is_aggregate(&n) || is_questdb_aggregate(&n))
    }

    /// Whether a SELECT's rows are groups (GROUP BY, aggregates, DISTINCT) rather than table
    /// rows, which have the table's order.
    fn aggregates_rows(&self, select: &Select) -> bool {
        let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(g, _) if g.is_empty());
        grouped
            || select.distinct.is_some()
            || select.projection.iter().any(|item| match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    self.has_aggregate(e)
                }
                _ => false,
            })
    }

    /// QuestDB's implicit GROUP BY: a SELECT with aggregates and other items but no GROUP BY
    /// groups by those other items (`SELECT city, count(*) FROM t` counts per city). Left
    /// alone: a select list with `*` or a window function, where the intent is unclear.
    fn implicit_group_by(&self, select: &mut Select) {
        let GroupByExpr::Expressions(groups, modifiers) = &select.group_by else {
            return;
        };
        if !groups.is_empty() || !modifiers.is_empty() {
            return;
        }
        let mut keys = Vec::new();
        let mut aggregates = false;
        for (i, item) in select.projection.iter().enumerate() {
            let (SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = item
            else {
                return;
            };
            if has_window(e) {
                return;
            }
            if self.has_own_aggregate(e) {
                aggregates = true;
            } else {
                keys.push(crate::ast::number(i as i64 + 1));
            }
        }
        if aggregates && !keys.is_empty() {
            select.group_by = GroupByExpr::Expressions(keys, Vec::new());
        }
    }

    /// Whether `e` calls an aggregate outside the subqueries in it (whose aggregates are
    /// theirs).
    fn has_own_aggregate(&self, e: &Expr) -> bool {
        struct Own<'a, 'b> {
            rewriter: &'a Rewriter<'b>,
            depth: usize,
            found: bool,
        }
        impl sqlparser::ast::Visitor for Own<'_, '_> {
            type Break = ();
            fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
                self.depth += 1;
                ControlFlow::Continue(())
            }
            fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
                self.depth -= 1;
                ControlFlow::Continue(())
            }
            fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
                if self.depth == 0 && self.rewriter.is_aggregate_call(e) {
                    self.found = true;
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            }
        }
        let mut own = Own {
            rewriter: self,
            depth: 0,
            found: false,
        };
        let _ = sqlparser::ast::Visit::visit(e, &mut own);
        own.found
    }

    /// Whether `e` calls an aggregate anywhere.
    fn has_aggregate(&self, e: &Expr) -> bool {
        let mut found = false;
        let _ = visit_expressions(e, |e| {
            if self.is_aggregate_call(e) {
                found = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
        found
    }

    // --- first / last ---

    /// `first(x)` and `last(x)` over a table with a designated timestamp take the first and
    /// last values in its order.
    fn first_and_last(&self, select: &mut Select) {
        let Ok(source) = self.source(select, "", Position { line: 0, column: 0 }) else {
            return;
        };
        let order = OrderByExpr {
            expr: source.timestamp.clone(),
            options: OrderByOptions {
                asc: None,
                nulls_first: None,
            },
            with_fill: None,
        };
        for item in &mut select.projection {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                let _ = visit_expressions_mut(e, |e| {
                    if let Expr::Function(f) = e
                        && f.over.is_none()
                        && matches!(
                            function_name(f).as_deref(),
                            Some("first_value" | "last_value")
                        )
                        && let FunctionArguments::List(list) = &mut f.args
                        && list.clauses.is_empty()
                    {
                        list.clauses
                            .push(FunctionArgumentClause::OrderBy(vec![order.clone()]));
                    }
                    ControlFlow::<()>::Continue(())
                });
            }
        }
    }
}

fn order_by(exprs: Vec<Expr>) -> OrderBy {
    OrderBy {
        kind: OrderByKind::Expressions(
            exprs
                .into_iter()
                .map(|expr| OrderByExpr {
                    expr,
                    options: OrderByOptions {
                        asc: None,
                        nulls_first: None,
                    },
                    with_fill: None,
                })
                .collect(),
        ),
        interpolate: None,
    }
}

/// Adds `filter` to the SELECT's WHERE, as a conjunct.
pub(crate) fn add_filter(select: &mut Select, filter: Expr) {
    select.selection = Some(match select.selection.take() {
        Some(w) => and(Expr::Nested(Box::new(w)), filter),
        None => filter,
    });
}

/// Whether `e` refers to no column and holds no subquery.
pub(crate) fn is_constant(e: &Expr) -> bool {
    let mut constant = true;
    let _ = visit_expressions(e, |e| {
        if matches!(
            e,
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Subquery(_)
        ) {
            constant = false;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    constant
}

/// Splits the marker conjunct off a WHERE clause the clause scanner built:
/// `marker`, `marker AND (w)` or `(w) AND marker`.
fn split_marker(selection: Expr, marker: &str) -> (Option<usize>, Option<Expr>) {
    if let Some(i) = marker_index(&selection, marker) {
        return (Some(i), None);
    }
    if let Expr::BinaryOp {
        left,
        op: BinaryOperator::And,
        right,
    } = &selection
    {
        if let Some(i) = marker_index(left, marker) {
            return (Some(i), Some((**right).clone()));
        }
        if let Some(i) = marker_index(right, marker) {
            return (Some(i), Some((**left).clone()));
        }
    }
    (None, Some(selection))
}

/// Whether `e` calls a window function anywhere.
fn has_window(e: &Expr) -> bool {
    let mut found = false;
    let _ = visit_expressions(e, |e| {
        if matches!(e, Expr::Function(f) if f.over.is_some()) {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

/// QuestDB aggregates under names DataFusion does not know.
fn is_questdb_aggregate(name: &str) -> bool {
    matches!(name, "first" | "last" | "count_distinct")
}

/// QuestDB's function names, as DataFusion's: `first`/`last`, `count_distinct`, `hour` & co.
fn rename_function(f: &mut Function) {
    let Some(name) = function_name(f) else {
        return;
    };
    let rename = |f: &mut Function, to: &str| {
        f.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(to))]);
    };
    match name.as_str() {
        "first" if f.over.is_none() => rename(f, "first_value"),
        "last" if f.over.is_none() => rename(f, "last_value"),
        "count_distinct" => {
            rename(f, "count");
            if let FunctionArguments::List(list) = &mut f.args {
                list.duplicate_treatment = Some(sqlparser::ast::DuplicateTreatment::Distinct);
            }
        }
        "systimestamp" | "sysdate" => {
            rename(f, "now");
        }
        // QuestDB's `variance` is the sample variance.
        "variance" => rename(f, "var_samp"),
        _ => {}
    }
}

/// The SQL type a QuestDB type name in a cast stands for (`x::long` is `x::BIGINT`).
fn questdb_type(data_type: &DataType) -> Option<DataType> {
    let DataType::Custom(name, modifiers) = data_type else {
        return None;
    };
    let [ObjectNamePart::Identifier(ident)] = name.0.as_slice() else {
        return None;
    };
    if !modifiers.is_empty() {
        return None;
    }
    Some(match ident.value.to_lowercase().as_str() {
        "long" => DataType::BigInt(None),
        "short" => DataType::SmallInt(None),
        "byte" => DataType::TinyInt(None),
        "symbol" | "string" => DataType::Text,
        _ => return None,
    })
}

/// `hour(ts)`, `minute(ts)`, ...: `CAST(date_part('hour', ts) AS INT)`.
fn date_part_of(f: &Function) -> Option<Expr> {
    let name = function_name(f)?;
    let part = match name.as_str() {
        "hour" | "minute" | "second" | "day" | "month" | "year" => name.as_str(),
        "day_of_week" => "isodow",
        "week_of_year" => "week",
        _ => return None,
    };
    let args = unnamed_args(f)?;
    let [arg] = args.as_slice() else {
        return None;
    };
    Some(cast_int(call(
        "date_part",
        vec![string(part), (*arg).clone()],
    )))
}

fn cast_int(e: Expr) -> Expr {
    cast(e, DataType::Int(None))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tables;

    impl Catalog for Tables {
        fn designated_timestamp(&self, table: &str) -> Option<Option<String>> {
            match table {
                "cpu" => Some(Some("timestamp".into())),
                "plain" => Some(None),
                _ => None,
            }
        }

        fn is_aggregate(&self, function: &str) -> bool {
            matches!(
                function,
                "avg" | "max" | "min" | "count" | "sum" | "first_value" | "last_value"
            )
        }

        fn is_symbol(&self, table: &str, column: &str) -> bool {
            table == "cpu" && column == "hostname"
        }
    }

    fn rewritten(sql: &str) -> Result<String> {
        let (text, clauses) = extract(sql)?;
        let mut statements = Parser::parse_sql(&GenericDialect {}, &text).unwrap();
        rewrite(&mut statements[0], &clauses, &Tables)?;
        Ok(statements[0].to_string())
    }

    #[test]
    fn sample_by_groups_by_the_bucket_and_the_keys() {
        assert_eq!(
            rewritten("SELECT timestamp, hostname, avg(u) AS a FROM cpu WHERE x > 0 SAMPLE BY 1h GROUP BY timestamp, hostname").unwrap(),
            "SELECT timestamp_floor('1h', timestamp, NULL, NULL) AS timestamp, hostname, avg(u) AS a FROM cpu WHERE x > 0 GROUP BY timestamp_floor('1h', timestamp, NULL, NULL), hostname ORDER BY 1, 2"
        );
        assert_eq!(
            rewritten("SELECT timestamp AS minute, max(u) FROM cpu SAMPLE BY 1m LIMIT 5").unwrap(),
            "SELECT timestamp_floor('1m', timestamp, NULL, NULL) AS minute, max(u) FROM cpu GROUP BY timestamp_floor('1m', timestamp, NULL, NULL) ORDER BY 1 LIMIT 5"
        );
        assert_eq!(
            rewritten("SELECT first(u), last(u) FROM cpu c SAMPLE BY 1d ALIGN TO CALENDAR WITH OFFSET '02:00'").unwrap(),
            "SELECT first_value(u ORDER BY c.timestamp), last_value(u ORDER BY c.timestamp) FROM cpu c GROUP BY timestamp_floor('1d', c.timestamp, CAST('1970-01-01T02:00:00' AS TIMESTAMP), NULL) ORDER BY timestamp_floor('1d', c.timestamp, CAST('1970-01-01T02:00:00' AS TIMESTAMP), NULL)"
        );
    }

    #[test]
    fn sample_by_explains_what_it_needs() {
        let e = rewritten("SELECT max(x) FROM plain SAMPLE BY 1h")
            .unwrap_err()
            .to_string();
        assert!(e.contains("SAMPLE BY at line 1, column 26 needs a designated timestamp, and table 'plain' has none"), "{e}");
        let e = rewritten("SELECT * FROM cpu SAMPLE BY 1h")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'*' cannot be sampled"), "{e}");
        let e = rewritten("SELECT 1 WHERE x IN (SELECT 1 SAMPLE BY 1h)")
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs FROM to name one table"), "{e}");
    }

    #[test]
    fn latest_keeps_the_newest_row_per_key() {
        assert_eq!(
            rewritten("SELECT * FROM cpu latest by hostname").unwrap(),
            "SELECT * FROM cpu WHERE __sundial_latest_by(hostname) ORDER BY cpu.timestamp"
        );
        assert_eq!(
            rewritten(
                "SELECT * FROM cpu c WHERE u > 'it''s' LATEST ON timestamp PARTITION BY c.hostname"
            )
            .unwrap(),
            "SELECT * FROM cpu c WHERE __sundial_latest_by(c.hostname) AND (u > 'it''s') ORDER BY c.timestamp"
        );
        // A filter with a parameter or a subquery: the window, whatever the names.
        assert_eq!(
            rewritten(
                r#"SELECT * FROM cpu "we'ird" WHERE u > $1 OR "x""y" IN (SELECT 1) LATEST BY hostname"#
            )
            .unwrap(),
            r#"SELECT * FROM (SELECT * EXCLUDE (__sundial_rn) FROM (SELECT *, row_number() OVER (PARTITION BY hostname ORDER BY "we'ird".timestamp DESC) AS __sundial_rn FROM cpu "we'ird" WHERE (u > $1 OR "x""y" IN (SELECT 1))) WHERE __sundial_rn = 1) AS "we'ird" ORDER BY "we'ird".timestamp"#
        );
        // Keys that are not all SYMBOLs: a window over the filtered rows.
        assert_eq!(
            rewritten("SELECT hostname FROM cpu WHERE u > 1 LATEST ON timestamp PARTITION BY hostname, region").unwrap(),
            "SELECT hostname FROM (SELECT * EXCLUDE (__sundial_rn) FROM (SELECT *, row_number() OVER (PARTITION BY hostname, region ORDER BY timestamp DESC) AS __sundial_rn FROM cpu WHERE (u > 1)) WHERE __sundial_rn = 1) AS cpu ORDER BY cpu.timestamp"
        );
    }

    #[test]
    fn negative_limits_reverse_and_restore_the_order() {
        assert_eq!(
            rewritten("SELECT u FROM cpu WHERE u > 1 LIMIT -3").unwrap(),
            "SELECT * EXCLUDE (__sundial_k0) FROM (SELECT u, timestamp AS __sundial_k0 FROM cpu WHERE u > 1 ORDER BY timestamp DESC NULLS FIRST LIMIT 3) AS __sundial_tail ORDER BY __sundial_k0"
        );
        assert_eq!(
            rewritten("SELECT * FROM cpu ORDER BY u LIMIT -5, -2").unwrap(),
            "SELECT * FROM (SELECT * FROM cpu ORDER BY u DESC NULLS FIRST LIMIT 3 OFFSET 2) AS __sundial_tail ORDER BY u"
        );
        let e = rewritten("SELECT 1 LIMIT -1").unwrap_err().to_string();
        assert!(e.contains("needs an order"), "{e}");
        // The reversed query is a node of the result, never text parsed again.
        let odd = rewritten(
            r#"SELECT "we'ird ""c""" FROM cpu WHERE s = 'x'') OR (1=1' ORDER BY "we'ird ""c""" LIMIT -2"#,
        )
        .unwrap();
        assert_eq!(
            odd,
            r#"SELECT * FROM (SELECT "we'ird ""c""" FROM cpu WHERE s = 'x'') OR (1=1' ORDER BY "we'ird ""c""" DESC NULLS FIRST LIMIT 2) AS __sundial_tail ORDER BY "we'ird ""c""""#
        );
    }

    #[test]
    fn intervals_become_ranges() {
        assert_eq!(
            rewritten("SELECT * FROM cpu WHERE timestamp IN '2016-01-01T10;2h'").unwrap(),
            "SELECT * FROM cpu WHERE (timestamp >= CAST('2016-01-01T10:00:00' AS TIMESTAMP) AND timestamp < CAST('2016-01-01T12:00:00' AS TIMESTAMP)) ORDER BY timestamp"
        );
    }

    #[test]
    fn rows_of_one_table_come_in_timestamp_order() {
        assert_eq!(
            rewritten("SELECT usage FROM cpu c WHERE usage > 1").unwrap(),
            "SELECT usage FROM cpu c WHERE usage > 1 ORDER BY c.timestamp"
        );
        for sql in [
            "SELECT usage FROM cpu ORDER BY usage",
            "SELECT count(*) FROM cpu",
            "SELECT DISTINCT usage FROM cpu",
            "SELECT * FROM (SELECT usage FROM cpu) AS s",
            "SELECT 1",
        ] {
            assert_eq!(rewritten(sql).unwrap(), sql);
        }
    }
}
