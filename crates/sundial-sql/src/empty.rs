//! SELECTs over catalog relations Sundial never has rows for (constraints, policies,
//! publications, ...), and the columns PostgreSQL would give them.
//!
//! Such a SELECT returns no rows whatever else it says, and DataFusion could not plan many of
//! them (psql's `\d` asks about things Sundial never has, in SQL DataFusion does not know), so it
//! becomes `SELECT CAST(NULL AS <type>) AS name, ... WHERE false` without FROM. A client still
//! reads its columns' names and types, so each keeps PostgreSQL's:
//!
//! ```text
//!  pre_visit_query:  columns(body) ─ per SELECT, as written: each item's name (PostgreSQL's
//!                                    rule for unaliased items) and type (catalog columns',
//!                                    functions', casts' types, through subqueries)
//!  (the query's parts are rewritten)
//!  post_visit_query: empty_selects(body, columns) ─ each SELECT that inner-joins an
//!                                    always-empty relation becomes CAST(NULL AS ...) items
//! ```
//!
//! The columns are worked out before anything in the query is rewritten: rewrites lose what
//! PostgreSQL types by (`c.oid::regclass` becomes `c.oid::INT`). A type is written as
//! `names::PG_TYPE_QUALIFIER.<typname>`, which the engine plans as the Arrow type holding that
//! PostgreSQL type, declared on the result; an item whose type is unknown is a plain NULL (`text`
//! to clients). Repeated names, which PostgreSQL keeps, are made distinct for DataFusion with
//! `names::REPEAT_PREFIX`, which the engine takes off again.

use std::collections::HashSet;
use std::ops::ControlFlow;

use sqlparser::ast::{
    AccessExpr, BinaryOperator, DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    GroupByExpr, Ident, JoinOperator, ObjectName, Query, Select, SelectItem, SetExpr, SetOperator,
    TableFactor, TableWithJoins, TrimWhereField, UnaryOperator, Value, Visit, Visitor,
};

use crate::ast::{boolean, cast, null};
use crate::names::{PG_TYPE_QUALIFIER, REPEAT_PREFIX};
use crate::system_catalog::SystemCatalog;

/// One result column of a SELECT as PostgreSQL would describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Column {
    /// As PostgreSQL names it, case-folded (unquoted names are lower case).
    name: String,
    /// Its `pg_type.typname`, when known.
    pg_type: Option<&'static str>,
}

/// The columns of each SELECT of a query body (through UNION & co., left to right), as
/// written; `None` for a SELECT that cannot become empty or whose columns are not its items
/// (a wildcard).
pub(crate) fn columns(body: &SetExpr, catalog: &dyn SystemCatalog) -> Vec<Option<Vec<Column>>> {
    let mut out = Vec::new();
    collect_columns(body, catalog, &mut out);
    out
}

fn collect_columns(
    body: &SetExpr,
    catalog: &dyn SystemCatalog,
    out: &mut Vec<Option<Vec<Column>>>,
) {
    match body {
        SetExpr::Select(select) => out.push(
            mentions_empty(select, catalog)
                .then(|| select_columns(select, None, catalog))
                .flatten(),
        ),
        SetExpr::SetOperation { left, right, .. } => {
            collect_columns(left, catalog, out);
            collect_columns(right, catalog, out);
        }
        _ => {}
    }
}

/// Whether the FROM of `select` names an always-empty relation anywhere (joins, derived
/// tables): only such a SELECT can be proved empty.
fn mentions_empty(select: &Select, catalog: &dyn SystemCatalog) -> bool {
    empty_relation(&select.from, catalog).is_some()
}

/// The first always-empty `pg_catalog` relation `from` names anywhere (joins, derived tables).
fn empty_relation(from: &[TableWithJoins], catalog: &dyn SystemCatalog) -> Option<String> {
    let mut found = None;
    for from in from {
        let _ = sqlparser::ast::visit_relations(from, |name| {
            if let Some(rel) = catalog_relation(name, catalog)
                && catalog.is_always_empty(rel)
            {
                found = Some(rel.to_lowercase());
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
        if found.is_some() {
            break;
        }
    }
    found
}

/// Rewrites every SELECT of a query body (through UNION & co.) that provably returns no rows,
/// with the columns [`columns`] found for it as written. Nested queries are rewritten by
/// their own visit, which comes first.
pub(crate) fn empty_selects(
    body: &mut SetExpr,
    columns: &mut impl Iterator<Item = Option<Vec<Column>>>,
    catalog: &dyn SystemCatalog,
) {
    match body {
        SetExpr::Select(select) => {
            let columns = columns.next().flatten();
            if returns_no_rows(select, catalog) {
                make_empty(select, columns, catalog);
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            empty_selects(left, columns, catalog);
            empty_selects(right, columns, catalog);
        }
        _ => {}
    }
}

/// Whether a query body returns no rows: the canonical `... WHERE false` a rewritten SELECT has,
/// or set operations over such.
pub(crate) fn is_empty_set(body: &SetExpr) -> bool {
    match body {
        SetExpr::Select(select) => {
            matches!(&select.selection, Some(Expr::Value(v)) if v.value == Value::Boolean(false))
                && !aggregates_without_groups(select)
        }
        SetExpr::Query(q) => is_empty_set(&q.body),
        SetExpr::SetOperation {
            op, left, right, ..
        } => match op {
            SetOperator::Union => is_empty_set(left) && is_empty_set(right),
            SetOperator::Intersect => is_empty_set(left) || is_empty_set(right),
            SetOperator::Except | SetOperator::Minus => is_empty_set(left),
        },
        _ => false,
    }
}

/// The first SELECT of an empty query body, whose items name and type its result.
pub(crate) fn first_select(body: &SetExpr) -> Option<&Select> {
    match body {
        SetExpr::Select(select) => Some(select),
        SetExpr::Query(q) => first_select(&q.body),
        SetExpr::SetOperation { left, .. } => first_select(left),
        _ => None,
    }
}

/// Whether a SELECT provably returns no rows because its FROM inner-joins an always-empty
/// relation. An aggregate without GROUP BY returns one row even then, so such SELECTs are not.
fn returns_no_rows(select: &Select, catalog: &dyn SystemCatalog) -> bool {
    select.from.iter().any(|f| joins_empty(f, catalog)) && !aggregates_without_groups(select)
}

/// Whether a FROM item (a relation and its joins) has no rows.
fn joins_empty(from: &TableWithJoins, catalog: &dyn SystemCatalog) -> bool {
    let mut empty = is_empty_factor(&from.relation, catalog);
    for join in &from.joins {
        let right = is_empty_factor(&join.relation, catalog);
        empty = match &join.join_operator {
            JoinOperator::Join(_)
            | JoinOperator::Inner(_)
            | JoinOperator::CrossJoin(_)
            | JoinOperator::Semi(_)
            | JoinOperator::LeftSemi(_)
            | JoinOperator::CrossApply
            | JoinOperator::StraightJoin(_) => empty || right,
            JoinOperator::Left(_)
            | JoinOperator::LeftOuter(_)
            | JoinOperator::Anti(_)
            | JoinOperator::LeftAnti(_)
            | JoinOperator::OuterApply => empty,
            JoinOperator::Right(_)
            | JoinOperator::RightOuter(_)
            | JoinOperator::RightSemi(_)
            | JoinOperator::RightAnti(_) => right,
            JoinOperator::FullOuter(_) => empty && right,
            _ => false,
        };
    }
    empty
}

fn is_empty_factor(factor: &TableFactor, catalog: &dyn SystemCatalog) -> bool {
    match factor {
        TableFactor::Table {
            name, args: None, ..
        } => catalog_relation(name, catalog).is_some_and(|rel| catalog.is_always_empty(rel)),
        TableFactor::Derived { subquery, .. } => is_empty_set(&subquery.body),
        TableFactor::NestedJoin {
            table_with_joins, ..
        } => joins_empty(table_with_joins, catalog),
        _ => false,
    }
}

/// The `pg_catalog` relation `name` refers to: unqualified, or qualified with `pg_catalog`
/// (and perhaps a catalog).
fn catalog_relation<'n>(name: &'n ObjectName, catalog: &dyn SystemCatalog) -> Option<&'n str> {
    let parts: Vec<&str> = name
        .0
        .iter()
        .filter_map(|p| p.as_ident().map(|i| i.value.as_str()))
        .collect();
    let rel = match parts.as_slice() {
        [rel] => rel,
        [.., schema, rel] if parts.len() <= 3 && schema.eq_ignore_ascii_case("pg_catalog") => rel,
        _ => return None,
    };
    catalog.is_catalog_relation(rel).then_some(*rel)
}

/// Aggregate functions common enough to recognise by name without the session's registry.
#[rustfmt::skip]
const AGGREGATES: &[&str] = &[
    "count", "sum", "min", "max", "avg", "mean", "string_agg", "array_agg", "bool_and",
    "bool_or", "every", "bit_and", "bit_or", "bit_xor", "json_agg", "jsonb_agg",
    "json_object_agg", "jsonb_object_agg", "stddev", "stddev_pop", "stddev_samp", "variance",
    "var_pop", "var_samp", "corr", "covar_pop", "covar_samp", "median", "first_value",
    "last_value", "approx_distinct", "approx_median", "approx_percentile_cont",
    "percentile_cont", "percentile_disc", "mode", "xmlagg",
];

/// Whether the SELECT aggregates without GROUP BY (so returns a row even over no input).
pub(crate) fn aggregates_without_groups(select: &Select) -> bool {
    let grouped = match &select.group_by {
        GroupByExpr::Expressions(exprs, _) => !exprs.is_empty(),
        GroupByExpr::All(_) => true,
    };
    if grouped {
        return false;
    }
    if select.having.is_some() {
        return true;
    }
    let mut finder = AggregateFinder::default();
    for item in &select.projection {
        if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
            let _ = e.visit(&mut finder);
        }
    }
    finder.found
}

/// Finds an aggregate call in an expression, not looking into its subqueries (whose aggregates
/// are theirs).
#[derive(Default)]
struct AggregateFinder {
    /// How many queries deep the visit is.
    depth: usize,
    found: bool,
}

impl Visitor for AggregateFinder {
    type Break = ();

    fn pre_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        if self.depth == 0
            && let Expr::Function(f) = expr
            && f.over.is_none()
            && f.name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .is_some_and(|i| AGGREGATES.contains(&i.value.to_lowercase().as_str()))
        {
            self.found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

/// Turns a SELECT that returns no rows into `SELECT CAST(NULL AS <type>) AS name, ... FROM
/// pg_catalog.<relation> WHERE false`, with the `columns` it had as written (when known). The
/// FROM keeps one always-empty relation it read, alone, so that the engine still answers it as
/// a statement of PostgreSQL's catalogs (names and types as PostgreSQL's). A `*` projection
/// cannot be named, so that SELECT keeps its FROM (whose relations exist) and only its WHERE
/// becomes false.
fn make_empty(select: &mut Select, columns: Option<Vec<Column>>, catalog: &dyn SystemCatalog) {
    select.selection = Some(boolean(false));
    select.group_by = GroupByExpr::Expressions(Vec::new(), Vec::new());
    select.having = None;
    select.qualify = None;
    select.named_window = Vec::new();
    select.sort_by = Vec::new();
    select.cluster_by = Vec::new();
    select.distribute_by = Vec::new();
    select.prewhere = None;
    select.connect_by = Vec::new();
    // DISTINCT ON names columns of the FROM; over no rows DISTINCT changes nothing.
    select.distinct = None;
    let wildcard = select.projection.iter().any(|item| {
        matches!(
            item,
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
        )
    });
    if wildcard {
        return;
    }
    let relation = empty_relation(&select.from, catalog);
    select.from = relation
        .map(|rel| TableWithJoins {
            relation: crate::ast::table(ObjectName::from(vec![
                Ident::new("pg_catalog"),
                Ident::new(rel),
            ])),
            joins: Vec::new(),
        })
        .into_iter()
        .collect();
    select.lateral_views = Vec::new();
    let columns = columns.filter(|c| c.len() == select.projection.len());
    let mut used = HashSet::new();
    for (i, item) in select.projection.iter_mut().enumerate() {
        let column = columns.as_ref().map(|c| &c[i]);
        let name = match item {
            SelectItem::ExprWithAlias { alias, .. } => fold(alias),
            _ => column.map_or_else(|| "?column?".to_string(), |c| c.name.clone()),
        };
        // DataFusion wants distinct column names (PostgreSQL does not): a repeat is named
        // apart, and back by the engine.
        let mut unique = name;
        while !used.insert(unique.clone()) {
            unique.insert_str(0, REPEAT_PREFIX);
        }
        *item = SelectItem::ExprWithAlias {
            expr: typed_null(column.and_then(|c| c.pg_type)),
            alias: Ident::with_quote('"', unique),
        };
    }
}

/// `CAST(NULL AS <PG_TYPE_QUALIFIER>.<typname>)`, or a plain NULL for an unknown type.
pub(crate) fn typed_null(pg_type: Option<&str>) -> Expr {
    match pg_type {
        Some(t) => cast(null(), pg_type_named(t)),
        None => null(),
    }
}

/// The SQL type standing for PostgreSQL type `typname` (see the module docs).
pub(crate) fn pg_type_named(typname: &str) -> DataType {
    DataType::Custom(
        ObjectName::from(vec![Ident::new(PG_TYPE_QUALIFIER), Ident::new(typname)]),
        Vec::new(),
    )
}

/// The `typname` a type written by [`pg_type_named`] stands for.
pub(crate) fn pg_type_of_cast(expr: &Expr) -> Option<&str> {
    let Expr::Cast {
        data_type: DataType::Custom(name, _),
        ..
    } = expr
    else {
        return None;
    };
    match name.0.as_slice() {
        [q, t] if q.as_ident()?.value == PG_TYPE_QUALIFIER => Some(t.as_ident()?.value.as_str()),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Names and types of items, as PostgreSQL gives them
// ---------------------------------------------------------------------------------------------

/// A name as PostgreSQL folds it: unquoted names are lower case.
fn fold(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

/// The columns of `select`'s items (`None` with a wildcard), its names resolved in its FROM and
/// then in `outer` (a correlated subquery's).
fn select_columns(
    select: &Select,
    outer: Option<&Scope<'_>>,
    catalog: &dyn SystemCatalog,
) -> Option<Vec<Column>> {
    let scope = Scope::of(select, outer, catalog);
    select
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(e) => Some(Column {
                name: pg_name(e, catalog).map_or_else(|| "?column?".into(), |(n, _)| n),
                pg_type: expr_type(e, &scope, catalog),
            }),
            SelectItem::ExprWithAlias { expr, alias } => Some(Column {
                name: fold(alias),
                pg_type: expr_type(expr, &scope, catalog),
            }),
            _ => None,
        })
        .collect()
}

/// What a name in FROM stands for.
enum Source<'a> {
    /// A `pg_catalog` relation.
    Catalog(&'a str),
    /// A subquery.
    Derived(&'a Query),
    /// `generate_series(start, ...)`, whose one column (of this name) has `start`'s type.
    Series(String, &'a Expr),
}

/// The names a SELECT's items can refer to: its FROM's, then the enclosing query's.
struct Scope<'a> {
    bindings: Vec<(String, Source<'a>)>,
    outer: Option<&'a Scope<'a>>,
}

impl<'a> Scope<'a> {
    fn of(select: &'a Select, outer: Option<&'a Scope<'a>>, catalog: &dyn SystemCatalog) -> Self {
        let mut bindings = Vec::new();
        for from in &select.from {
            bind(from, catalog, &mut bindings);
        }
        Scope { bindings, outer }
    }

    /// The PostgreSQL type of column `column` of the FROM item named `qualifier` (any, when
    /// unqualified).
    fn column_type(
        &self,
        qualifier: Option<&Ident>,
        column: &Ident,
        catalog: &dyn SystemCatalog,
    ) -> Option<&'static str> {
        let column_name = fold(column);
        let folded = qualifier.map(fold);
        let found = self
            .bindings
            .iter()
            .filter(|(name, _)| folded.as_ref().is_none_or(|q| q == name))
            .find_map(|(_, source)| match source {
                Source::Catalog(rel) => catalog.column_type(rel, &column_name),
                Source::Series(name, start) => (*name == column_name)
                    .then(|| expr_type(start, self, catalog))
                    .flatten(),
                Source::Derived(query) => {
                    let select = first_select(&query.body)?;
                    let inner = Scope::of(select, None, catalog);
                    select.projection.iter().find_map(|item| {
                        let (expr, name) = match item {
                            SelectItem::UnnamedExpr(e) => (e, pg_name(e, catalog)?.0),
                            SelectItem::ExprWithAlias { expr, alias } => (expr, fold(alias)),
                            _ => return None,
                        };
                        (name == column_name)
                            .then(|| expr_type(expr, &inner, catalog))
                            .flatten()
                    })
                }
            });
        found.or_else(|| {
            self.outer
                .and_then(|o| o.column_type(qualifier, column, catalog))
        })
    }
}

/// The names a FROM item (and its joins) binds.
fn bind<'a>(
    from: &'a TableWithJoins,
    catalog: &dyn SystemCatalog,
    out: &mut Vec<(String, Source<'a>)>,
) {
    for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation)) {
        match factor {
            TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } => {
                let Some(rel) = catalog_relation(name, catalog) else {
                    continue;
                };
                let bound = match alias {
                    Some(a) => fold(&a.name),
                    None => rel.to_lowercase(),
                };
                out.push((bound, Source::Catalog(rel)));
            }
            TableFactor::Table {
                name,
                alias: Some(alias),
                args: Some(args),
                ..
            } if name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .is_some_and(|i| i.value.eq_ignore_ascii_case("generate_series")) =>
            {
                let column = alias.columns.first().map_or(&alias.name, |c| &c.name);
                if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(start))) = args.args.first()
                {
                    out.push((fold(&alias.name), Source::Series(fold(column), start)));
                }
            }
            TableFactor::Derived {
                subquery,
                alias: Some(alias),
                ..
            } if alias.columns.is_empty() => {
                out.push((fold(&alias.name), Source::Derived(subquery)));
            }
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => bind(table_with_joins, catalog, out),
            _ => {}
        }
    }
}

/// The name PostgreSQL gives an unaliased item, and whether it is a strong one (a column's or
/// a function's, as opposed to a CASE's `case` or a cast's type): `None` for `?column?`.
fn pg_name(expr: &Expr, catalog: &dyn SystemCatalog) -> Option<(String, bool)> {
    let strong = |s: String| Some((s, true));
    match expr {
        Expr::Identifier(i) => strong(fold(i)),
        Expr::CompoundIdentifier(parts) => strong(fold(parts.last()?)),
        Expr::Nested(e) => pg_name(e, catalog),
        Expr::Cast {
            expr, data_type, ..
        } => match pg_name(expr, catalog) {
            Some((name, true)) => strong(name),
            _ => {
                let name = catalog
                    .type_name(&data_type.to_string())
                    .map(str::to_string)
                    .or_else(|| match data_type {
                        DataType::Custom(name, _) => name.0.last()?.as_ident().map(fold),
                        _ => None,
                    })?;
                Some((name, false))
            }
        },
        Expr::Function(f) if array_subquery(f).is_some() => strong("array".into()),
        Expr::Function(f) => strong(fold(f.name.0.last()?.as_ident()?)),
        Expr::Case { else_result, .. } => {
            match else_result.as_deref().and_then(|e| pg_name(e, catalog)) {
                Some((name, true)) => strong(name),
                _ => Some(("case".into(), false)),
            }
        }
        Expr::Subquery(q) => {
            let select = first_select(&q.body)?;
            match select.projection.first()? {
                SelectItem::ExprWithAlias { alias, .. } => strong(fold(alias)),
                SelectItem::UnnamedExpr(e) => {
                    strong(pg_name(e, catalog).map_or_else(|| "?column?".into(), |(n, _)| n))
                }
                _ => None,
            }
        }
        Expr::Exists { .. } => strong("exists".into()),
        Expr::Array(_) => strong("array".into()),
        Expr::Trim { trim_where, .. } => strong(
            match trim_where {
                Some(TrimWhereField::Leading) => "ltrim",
                Some(TrimWhereField::Trailing) => "rtrim",
                _ => "btrim",
            }
            .into(),
        ),
        Expr::Substring { .. } => strong("substring".into()),
        Expr::Position { .. } => strong("position".into()),
        Expr::Extract { .. } => strong("extract".into()),
        Expr::CompoundFieldAccess { access_chain, .. } => match access_chain.last()? {
            AccessExpr::Dot(Expr::Identifier(i)) => strong(fold(i)),
            _ => None,
        },
        _ => None,
    }
}

/// The subquery of `ARRAY(subquery)`.
pub(crate) fn array_subquery(f: &sqlparser::ast::Function) -> Option<&Query> {
    let FunctionArguments::Subquery(q) = &f.args else {
        return None;
    };
    let [part] = f.name.0.as_slice() else {
        return None;
    };
    part.as_ident()?
        .value
        .eq_ignore_ascii_case("array")
        .then_some(q.as_ref())
}

/// The PostgreSQL type of `expr` (its `typname`), when the catalog can tell it.
fn expr_type(expr: &Expr, scope: &Scope<'_>, catalog: &dyn SystemCatalog) -> Option<&'static str> {
    use BinaryOperator as B;
    let of = |e: &Expr| expr_type(e, scope, catalog);
    match expr {
        Expr::Identifier(c) => scope.column_type(None, c, catalog),
        Expr::CompoundIdentifier(parts) => match parts.as_slice() {
            [.., q, c] => scope.column_type(Some(q), c, catalog),
            [c] => scope.column_type(None, c, catalog),
            [] => None,
        },
        Expr::Nested(e) => of(e),
        Expr::Cast { data_type, .. } => catalog.type_name(&data_type.to_string()),
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(_)
            | Value::EscapedStringLiteral(_)
            | Value::DollarQuotedString(_) => catalog.type_name("text"),
            Value::Number(n, _) if n.parse::<i32>().is_ok() => catalog.type_name("int4"),
            Value::Number(n, _) if n.parse::<i64>().is_ok() => catalog.type_name("int8"),
            Value::Number(..) => catalog.type_name("numeric"),
            Value::Boolean(_) => catalog.type_name("bool"),
            _ => None,
        },
        Expr::Function(f) => {
            if let Some(q) = array_subquery(f) {
                let select = first_select(&q.body)?;
                let inner = Scope::of(select, Some(scope), catalog);
                let element = match select.projection.first()? {
                    SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                        expr_type(e, &inner, catalog)?
                    }
                    _ => return None,
                };
                return catalog.type_name(&format!("{element}[]"));
            }
            let name = f.name.0.last()?.as_ident()?.value.to_lowercase();
            let args: Vec<&Expr> = match &f.args {
                FunctionArguments::List(list) => list
                    .args
                    .iter()
                    .filter_map(|a| match a {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            match name.as_str() {
                // Of their arguments' type.
                "coalesce" | "greatest" | "least" => args.iter().find_map(|e| of(e)),
                "nullif" | "min" | "max" | "first_value" | "last_value" => of(args.first()?),
                _ => catalog.function_type(&name),
            }
        }
        Expr::BinaryOp { left, op, right } => match op {
            B::Eq
            | B::NotEq
            | B::Lt
            | B::LtEq
            | B::Gt
            | B::GtEq
            | B::And
            | B::Or
            | B::PGRegexMatch
            | B::PGRegexIMatch
            | B::PGRegexNotMatch
            | B::PGRegexNotIMatch
            | B::PGLikeMatch
            | B::PGILikeMatch
            | B::PGNotLikeMatch
            | B::PGNotILikeMatch
            | B::Spaceship => catalog.type_name("bool"),
            B::StringConcat => {
                let array = [left, right]
                    .into_iter()
                    .find_map(|e| of(e).filter(|t| t.starts_with('_')));
                array.or_else(|| catalog.type_name("text"))
            }
            _ => of(left).or_else(|| of(right)),
        },
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            ..
        } => catalog.type_name("bool"),
        Expr::UnaryOp { expr, .. } => of(expr),
        Expr::IsNull(_)
        | Expr::IsNotNull(_)
        | Expr::IsTrue(_)
        | Expr::IsFalse(_)
        | Expr::IsNotTrue(_)
        | Expr::IsNotFalse(_)
        | Expr::IsUnknown(_)
        | Expr::IsNotUnknown(_)
        | Expr::IsDistinctFrom(..)
        | Expr::IsNotDistinctFrom(..)
        | Expr::InList { .. }
        | Expr::InSubquery { .. }
        | Expr::InUnnest { .. }
        | Expr::Between { .. }
        | Expr::Like { .. }
        | Expr::ILike { .. }
        | Expr::SimilarTo { .. }
        | Expr::Exists { .. }
        | Expr::AnyOp { .. }
        | Expr::AllOp { .. } => catalog.type_name("bool"),
        Expr::Case {
            conditions,
            else_result,
            ..
        } => conditions
            .iter()
            .find_map(|c| of(&c.result))
            .or_else(|| else_result.as_deref().and_then(of)),
        Expr::Subquery(q) => {
            let select = first_select(&q.body)?;
            let inner = Scope::of(select, Some(scope), catalog);
            match select.projection.first()? {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    expr_type(e, &inner, catalog)
                }
                _ => None,
            }
        }
        Expr::Trim { .. } | Expr::Substring { .. } | Expr::Overlay { .. } => {
            catalog.type_name("text")
        }
        Expr::Position { .. } => catalog.type_name("int4"),
        // `information_schema._pg_expandarray(a)` is a record `(x anyelement, n int4)`.
        Expr::CompoundFieldAccess { root, access_chain } => {
            match (root.as_ref(), access_chain.as_slice()) {
                (Expr::Nested(f), [AccessExpr::Dot(Expr::Identifier(field))])
                    if matches!(f.as_ref(), Expr::Function(f)
                    if f.name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| i.value.eq_ignore_ascii_case("_pg_expandarray")))
                        && field.value.eq_ignore_ascii_case("n") =>
                {
                    catalog.type_name("int4")
                }
                _ => None,
            }
        }
        _ => None,
    }
}
