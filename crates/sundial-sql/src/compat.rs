//! Rewrites PostgreSQL idioms that drivers and tools send but DataFusion cannot plan.
//!
//! Every statement bound for DataFusion passes through [`rewrite`], whatever the client. Each
//! rewrite only touches syntax DataFusion would reject (or PostgreSQL-only names), so valid
//! DataFusion SQL is left as it was:
//!
//! - `a OPERATOR(pg_catalog.~) b` becomes `a ~ b`; `expr COLLATE x` becomes `expr`;
//! - casts to PostgreSQL's object-identifier types (`::regclass`, `::oid`, ...) become casts to
//!   `INT`, except that a string literal or a parameter cast to `regclass`, `regtype`,
//!   `regnamespace` or `regrole` is looked up (`to_regclass('t')`, ...) and a string literal cast
//!   to `regproc` stays text (the function's name, as `pg_type.typinput` & co. are text);
//!   `::name` and `::"char"` become `TEXT`; a `pg_catalog.` qualifier on a type is dropped;
//! - `pg_catalog.f(...)` becomes `f(...)`, and an unqualified `pg_class` means
//!   `pg_catalog.pg_class` (PostgreSQL searches `pg_catalog` first);
//! - a SELECT that inner-joins a catalog relation Sundial never has rows for (constraints,
//!   policies, publications, ...) returns no rows whatever else it says, so it becomes
//!   `SELECT CAST(NULL AS <type>) AS name, ... WHERE false`, each item named and typed as
//!   PostgreSQL would (see `empty`); then `EXISTS` or `IN` over it becomes false, and
//!   `ARRAY(...)` over it an empty array of its column's type (a scalar subquery over it stays:
//!   it is NULL, of its column's name and type). This is what lets psql's `\d table` run: it
//!   asks about many things Sundial never has, with SQL DataFusion could not otherwise plan;
//! - any other `ARRAY(subquery)` becomes an empty `TEXT[]`: DataFusion cannot plan it (psql's
//!   unnest an outer column), and psql's uses of it find nothing in Sundial (TOAST options);
//! - a scalar subquery looking a value up in catalog relations, which DataFusion cannot plan when
//!   correlated, takes `first_value` of its column;
//! - in a SELECT of catalog relations, a column beside a wildcard (`n.oid, n.*`) is aliased so
//!   that DataFusion plans the repeat (see `repeats`);
//! - `SHOW server_version` (any setting in `pg_settings`) becomes `SELECT current_setting(...)`;
//! - TimescaleDB's `time_bucket(width, ts [, origin])` becomes `date_bin(width, ts, origin)`,
//!   with TimescaleDB's default origin (Monday 2000-01-03);
//! - `x = ANY('{a,b}')` and `x <> ALL('{a,b}')`, an array written as a string (drivers that
//!   inline parameters send arrays so), become `x IN ('a', 'b')` and `x NOT IN (...)`; a cast
//!   of such a string to an array type (`'{1,2}'::int2[]`) casts `make_array('1', '2')`.

use std::collections::HashSet;
use std::ops::ControlFlow;

use sqlparser::ast::{
    ArrayElemTypeDef, BinaryOperator, DataType, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, Ident, ObjectName, ObjectNamePart, Query, Select, SelectItem,
    SetExpr, Statement, TableFactor, TimezoneInfo, Value, VisitMut, VisitorMut,
    visit_expressions_mut,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

use crate::ast::{boolean, call, cast, select_with};
use crate::empty::{self, Column, aggregates_without_groups, is_empty_set};
use crate::names::placeholder_index;
pub use crate::system_catalog::SystemCatalog;

/// Rewrites `statement` in place into SQL DataFusion can plan with the same meaning. Returns
/// how many parameters (`$1` ... `$n`) the statement had as written: a rewritten SELECT over an
/// always-empty relation may have lost some, yet its callers still send a value for each.
pub fn rewrite(statement: &mut Statement, catalog: &dyn SystemCatalog) -> usize {
    let parameters = parameter_count(statement);
    if let Some(query) = show_setting(statement, catalog) {
        *statement = query;
        return parameters;
    }
    let _ = statement.visit(&mut Compat {
        ctes: HashSet::new(),
        columns: Vec::new(),
        catalog,
    });
    parameters
}

/// The highest `$n` placeholder of `statement` (0 without any).
fn parameter_count(statement: &Statement) -> usize {
    let mut count = 0;
    let _ = sqlparser::ast::visit_expressions(statement, |e| {
        if let Expr::Value(v) = e
            && let Value::Placeholder(name) = &v.value
            && let Some(index) = placeholder_index(name)
        {
            count = count.max(index + 1);
        }
        ControlFlow::<()>::Continue(())
    });
    count
}

/// `SHOW name` for a PostgreSQL setting, as the equivalent query.
fn show_setting(statement: &Statement, catalog: &dyn SystemCatalog) -> Option<Statement> {
    let Statement::ShowVariable { variable } = statement else {
        return None;
    };
    let [name] = variable.as_slice() else {
        return None;
    };
    let name = catalog.setting_name(&name.value)?;
    let value = call(
        "current_setting",
        vec![Expr::value(Value::SingleQuotedString(name.into()))],
    );
    Some(Statement::Query(Box::new(select_with(vec![
        SelectItem::ExprWithAlias {
            expr: value,
            alias: Ident::with_quote('"', name.to_lowercase()),
        },
    ]))))
}

struct Compat<'a> {
    /// Names of common table expressions seen so far: a reference to one is not a catalog
    /// relation even when it is spelled like one.
    ctes: HashSet<String>,
    /// Per query being visited (innermost last), the columns of its body's SELECTs as written
    /// (`empty::columns`), for those that turn out empty.
    columns: Vec<Vec<Option<Vec<Column>>>>,
    catalog: &'a dyn SystemCatalog,
}

impl VisitorMut for Compat<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.insert(cte.alias.name.value.to_lowercase());
            }
        }
        self.columns.push(empty::columns(&query.body, self.catalog));
        ControlFlow::Continue(())
    }

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, args, .. } = factor {
            if args.is_some() {
                // A table function: `pg_catalog.generate_series(...)`.
                strip_pg_catalog(name);
            } else if let [ObjectNamePart::Identifier(rel)] = name.0.as_slice()
                && self.catalog.is_catalog_relation(&rel.value)
                && !self.ctes.contains(&rel.value.to_lowercase())
            {
                name.0
                    .insert(0, ObjectNamePart::Identifier(Ident::new("pg_catalog")));
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        name_repeated_literals(&mut select.projection);
        let reads_catalog = select.from.iter().any(|from| {
            std::iter::once(&from.relation)
                .chain(from.joins.iter().map(|j| &j.relation))
                .any(|f| is_catalog_factor(f, self.catalog))
        });
        if reads_catalog {
            crate::repeats::alias_beside_wildcards(&mut select.projection);
        }
        if reads_only_functions(select) {
            for item in &mut select.projection {
                if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item
                {
                    let _ = visit_expressions_mut(e, |e| {
                        bare_session_function(e);
                        ControlFlow::<()>::Continue(())
                    });
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let columns = self.columns.pop().unwrap_or_default();
        empty::empty_selects(&mut query.body, &mut columns.into_iter(), self.catalog);
        // An ORDER BY may name columns the rewritten SELECT no longer has.
        if is_empty_set(&query.body) {
            query.order_by = None;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        rewrite_expr(expr, self.catalog);
        ControlFlow::Continue(())
    }
}

// ---------------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------------

/// `ARRAY(subquery)` as an empty array: of the subquery's column's type when the subquery was
/// made empty (`empty`), else `TEXT[]` (what psql collects with `ARRAY(...)` is names and
/// options). PostgreSQL's `ARRAY(...)` is never NULL, and an empty array is what psql's uses of
/// it find in Sundial (no TOAST options, no role memberships, no policies).
fn empty_array(query: &Query, catalog: &dyn SystemCatalog) -> Expr {
    let element = empty::first_select(&query.body)
        .filter(|_| is_empty_set(&query.body))
        .and_then(|s| match s.projection.first()? {
            SelectItem::ExprWithAlias { expr, .. } | SelectItem::UnnamedExpr(expr) => {
                empty::pg_type_of_cast(expr)
            }
            _ => None,
        })
        .and_then(|t| catalog.type_name(&format!("{t}[]")));
    let data_type = match element {
        Some(t) => empty::pg_type_named(t),
        None => DataType::Array(ArrayElemTypeDef::SquareBracket(
            Box::new(DataType::Text),
            None,
        )),
    };
    cast(call("make_array", Vec::new()), data_type)
}

fn is_pg_catalog(part: &ObjectNamePart) -> bool {
    part.as_ident()
        .is_some_and(|i| i.value.eq_ignore_ascii_case("pg_catalog"))
}

/// `pg_catalog.x` becomes `x`.
fn strip_pg_catalog(name: &mut ObjectName) {
    if name.0.len() == 2 && is_pg_catalog(&name.0[0]) {
        name.0.remove(0);
    }
}

fn rewrite_expr(expr: &mut Expr, catalog: &dyn SystemCatalog) {
    match expr {
        Expr::BinaryOp { op, .. } => {
            if let BinaryOperator::PGCustomBinaryOperator(parts) = op
                && let Some(plain) = parts.last().and_then(|p| plain_operator(p))
                && (parts.len() == 1 || parts[0].eq_ignore_ascii_case("pg_catalog"))
            {
                *op = plain;
            }
        }
        Expr::Collate { expr: inner, .. } => *expr = (**inner).clone(),
        Expr::Cast {
            expr: inner,
            data_type,
            ..
        } => {
            if let DataType::Array(_) = data_type
                && let Some(elements) = text_array_elements(inner)
            {
                **inner = elements;
            } else if let Some(replacement) = rewrite_cast(inner, data_type) {
                *expr = replacement;
            }
        }
        Expr::Function(f) => {
            strip_pg_catalog(&mut f.name);
            if let Some(q) = empty::array_subquery(f) {
                *expr = empty_array(q, catalog);
            } else if is_named(&f.name, "time_bucket")
                && let Some(bucket) = time_bucket(f)
            {
                *expr = bucket;
            }
        }
        // Over no rows a scalar subquery is NULL; left as it is, it keeps its column's name and
        // type, and DataFusion plans it (the empty SELECT refers to nothing outside).
        Expr::Subquery(q) if is_empty_set(&q.body) => {}
        Expr::Subquery(q) => aggregate_catalog_lookup(q, catalog),
        Expr::Exists { subquery, negated } if is_empty_set(&subquery.body) => {
            *expr = boolean(*negated);
        }
        Expr::InSubquery {
            subquery, negated, ..
        } if is_empty_set(&subquery.body) => *expr = boolean(*negated),
        Expr::AnyOp {
            left,
            compare_op: BinaryOperator::Eq,
            right,
            ..
        } => {
            if let Some(list) = text_array(right, left, false) {
                *expr = list;
            }
        }
        Expr::AllOp {
            left,
            compare_op: BinaryOperator::NotEq,
            right,
        } => {
            if let Some(list) = text_array(right, left, true) {
                *expr = list;
            }
        }
        _ => {}
    }
}

/// The elements of `text`, a string literal holding an array's text form (`'{a,NULL}'`), as
/// string literals (`None` for NULL); `None` if it is not one.
fn string_array(text: &Expr) -> Option<Vec<Option<Expr>>> {
    let Expr::Value(v) = text else {
        return None;
    };
    let Value::SingleQuotedString(text) = &v.value else {
        return None;
    };
    let elements = crate::array_text::split(text).ok()?;
    Some(
        elements
            .into_iter()
            .map(|e| e.map(|e| Expr::value(Value::SingleQuotedString(e.into_owned()))))
            .collect(),
    )
}

/// `make_array('a', 'b', NULL)` for the string `'{a,b,NULL}'`, an array's text form, which a
/// cast to an array type then converts element by element (`'{1,2}'::int2[]`).
fn text_array_elements(text: &Expr) -> Option<Expr> {
    let elements = string_array(text)?
        .into_iter()
        .map(|e| e.unwrap_or_else(|| Expr::value(Value::Null)))
        .collect();
    Some(call("make_array", elements))
}

/// `x = ANY('{a,b}')` (and `x <> ALL(...)` when `negated`) with the array written as a string,
/// as drivers that inline parameters send an array: `x IN ('a', 'b')`, each string coerced to
/// `x`'s type as any literal is. NULL elements make the answer NULL where no element matches
/// (`OR NULL`; `AND NULL` for `<> ALL`), as in PostgreSQL; an empty array is false (true).
fn text_array(array: &Expr, x: &Expr, negated: bool) -> Option<Expr> {
    let elements = string_array(array)?;
    let has_null = elements.iter().any(Option::is_none);
    let list: Vec<Expr> = elements.into_iter().flatten().collect();
    let matched = match list.is_empty() {
        true => boolean(negated),
        false => Expr::InList {
            expr: Box::new(x.clone()),
            list,
            negated,
        },
    };
    if !has_null {
        return Some(matched);
    }
    let op = match negated {
        true => BinaryOperator::And,
        false => BinaryOperator::Or,
    };
    Some(Expr::Nested(Box::new(Expr::BinaryOp {
        left: Box::new(Expr::Nested(Box::new(matched))),
        op,
        right: Box::new(cast(Expr::value(Value::Null), DataType::Boolean)),
    })))
}

/// Whether an unqualified name is `wanted` (case-insensitively).
fn is_named(name: &ObjectName, wanted: &str) -> bool {
    match name.0.as_slice() {
        [part] => part
            .as_ident()
            .is_some_and(|i| i.value.eq_ignore_ascii_case(wanted)),
        _ => false,
    }
}

fn plain_operator(op: &str) -> Option<BinaryOperator> {
    Some(match op {
        "~" => BinaryOperator::PGRegexMatch,
        "~*" => BinaryOperator::PGRegexIMatch,
        "!~" => BinaryOperator::PGRegexNotMatch,
        "!~*" => BinaryOperator::PGRegexNotIMatch,
        "~~" => BinaryOperator::PGLikeMatch,
        "~~*" => BinaryOperator::PGILikeMatch,
        "!~~" => BinaryOperator::PGNotLikeMatch,
        "!~~*" => BinaryOperator::PGNotILikeMatch,
        "=" => BinaryOperator::Eq,
        "<>" | "!=" => BinaryOperator::NotEq,
        "<" => BinaryOperator::Lt,
        "<=" => BinaryOperator::LtEq,
        ">" => BinaryOperator::Gt,
        ">=" => BinaryOperator::GtEq,
        "+" => BinaryOperator::Plus,
        "-" => BinaryOperator::Minus,
        "*" => BinaryOperator::Multiply,
        "/" => BinaryOperator::Divide,
        "%" => BinaryOperator::Modulo,
        "||" => BinaryOperator::StringConcat,
        _ => return None,
    })
}

/// What a PostgreSQL-only cast target becomes.
enum Target {
    /// An object identifier: an `INT`, or for a string literal or a parameter the lookup
    /// function named.
    Oid(Option<&'static str>),
    /// `regproc`: an `INT`, but a string literal stays the function's name, as `pg_type`'s
    /// `typinput`-like columns are text.
    Proc,
    Text,
    /// A standard type that was written with a `pg_catalog.` qualifier.
    Standard(DataType),
}

fn target(data_type: &DataType) -> Option<Target> {
    let (name, modifiers) = match data_type {
        DataType::Regclass => return Some(Target::Oid(Some("to_regclass"))),
        DataType::Custom(name, modifiers) => (name, modifiers),
        _ => return None,
    };
    let qualified = name.0.len() == 2 && is_pg_catalog(&name.0[0]);
    if !(name.0.len() == 1 || qualified) {
        return None;
    }
    let ident = name.0.last()?.as_ident()?;
    let lower = ident.value.to_lowercase();
    Some(match lower.as_str() {
        "regclass" => Target::Oid(Some("to_regclass")),
        "regtype" => Target::Oid(Some("to_regtype")),
        "regnamespace" => Target::Oid(Some("to_regnamespace")),
        "regrole" => Target::Oid(Some("to_regrole")),
        "regproc" | "regprocedure" => Target::Proc,
        "oid" | "xid" | "cid" | "regoper" | "regoperator" | "regconfig" | "regdictionary"
        | "regcollation" => Target::Oid(None),
        "name" | "char" | "bpchar" | "pg_node_tree" | "aclitem" => Target::Text,
        _ if qualified && modifiers.is_empty() => {
            let parsed = Parser::new(&GenericDialect {})
                .try_with_sql(&ident.value)
                .ok()?
                .parse_data_type()
                .ok()?;
            // A custom type stays custom: dropping the qualifier would not help DataFusion.
            if matches!(parsed, DataType::Custom(..)) {
                return None;
            }
            Target::Standard(parsed)
        }
        _ => return None,
    })
}

/// The rewritten form of `inner::data_type`, or `None` to keep it; `data_type` may be changed in
/// place (array element types).
fn rewrite_cast(inner: &Expr, data_type: &mut DataType) -> Option<Expr> {
    if let DataType::Array(ArrayElemTypeDef::SquareBracket(elem, _)) = data_type {
        if let Some(t) = target(elem) {
            **elem = plain_type(t);
        }
        return None;
    }
    let (literal, placeholder) = match inner {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => (Some(s.clone()), false),
            Value::Placeholder(_) => (None, true),
            _ => (None, false),
        },
        _ => (None, false),
    };
    match (target(data_type)?, literal) {
        // A name (or a parameter, which clients bind to a name) is looked up.
        (Target::Oid(Some(lookup)), Some(_)) => Some(call(lookup, vec![inner.clone()])),
        (Target::Oid(Some(lookup)), None) if placeholder => Some(call(lookup, vec![inner.clone()])),
        (Target::Proc, Some(s)) => {
            let name = s.rsplit('.').next().unwrap_or(&s);
            let name = name.split('(').next().unwrap_or(name);
            Some(Expr::value(Value::SingleQuotedString(name.to_string())))
        }
        (t, _) => {
            *data_type = plain_type(t);
            None
        }
    }
}

fn plain_type(t: Target) -> DataType {
    match t {
        Target::Oid(_) | Target::Proc => DataType::Int(None),
        Target::Text => DataType::Text,
        Target::Standard(d) => d,
    }
}

/// `name(args)`.
/// TimescaleDB's `time_bucket(width, ts [, origin])` as `date_bin(width, ts, origin)`, with
/// TimescaleDB's default origin, Monday 2000-01-03 (so that weeks start on Mondays), and a
/// width written as text (`'60 seconds'`) cast to an interval. `None` for other arities.
fn time_bucket(f: &Function) -> Option<Expr> {
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let mut args = Vec::with_capacity(3);
    for arg in &list.args {
        match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => args.push(e.clone()),
            _ => return None,
        }
    }
    if !(2..=3).contains(&args.len()) {
        return None;
    }
    if let Expr::Value(v) = &args[0]
        && matches!(v.value, Value::SingleQuotedString(_))
    {
        args[0] = cast(
            args[0].clone(),
            DataType::Interval {
                fields: None,
                precision: None,
            },
        );
    }
    if args.len() == 2 {
        let origin = Expr::value(Value::SingleQuotedString("2000-01-03T00:00:00".into()));
        args.push(cast(origin, DataType::Timestamp(None, TimezoneInfo::None)));
    }
    Some(call("date_bin", args))
}

/// A scalar subquery that looks a value up in catalog relations, such as psql's
/// `(SELECT c.relkind = 'c' FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid)`, returns at
/// most one row (it matches a key), but DataFusion plans a correlated scalar subquery only if it
/// aggregates. Taking `first_value` of its one column keeps its meaning: NULL for no row, the
/// value for one.
fn aggregate_catalog_lookup(query: &mut Query, catalog: &dyn SystemCatalog) {
    if query.order_by.is_some() || query.limit_clause.is_some() || query.fetch.is_some() {
        return;
    }
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    let from_catalog = !select.from.is_empty()
        && select.from.iter().all(|f| {
            is_catalog_factor(&f.relation, catalog)
                && f.joins
                    .iter()
                    .all(|j| is_catalog_factor(&j.relation, catalog))
        });
    let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(e, _) if e.is_empty());
    if !from_catalog
        || grouped
        || select.having.is_some()
        || select.distinct.is_some()
        || aggregates_without_groups(select)
    {
        return;
    }
    if let [SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }] =
        select.projection.as_mut_slice()
    {
        *e = call("first_value", vec![e.clone()]);
    }
}

/// Whether a FROM item is a `pg_catalog` relation (unqualified ones were qualified already).
fn is_catalog_factor(factor: &TableFactor, catalog: &dyn SystemCatalog) -> bool {
    let TableFactor::Table {
        name, args: None, ..
    } = factor
    else {
        return false;
    };
    let parts: Vec<&str> = name
        .0
        .iter()
        .filter_map(|p| p.as_ident().map(|i| i.value.as_str()))
        .collect();
    match parts.as_slice() {
        [.., schema, rel] => {
            schema.eq_ignore_ascii_case("pg_catalog") && catalog.is_catalog_relation(rel)
        }
        _ => false,
    }
}

/// Whether `select` has no FROM, or one of table functions only (`generate_series(...) i`,
/// as Grafana's table list has): no relation there has a column named `user`.
fn reads_only_functions(select: &Select) -> bool {
    let function = |f: &TableFactor| matches!(f, TableFactor::Table { args: Some(_), .. });
    select
        .from
        .iter()
        .all(|from| function(&from.relation) && from.joins.iter().all(|j| function(&j.relation)))
}

/// In a SELECT without FROM, or of table functions only, PostgreSQL's bare `user` and
/// `current_schema` (no parentheses) are the session functions; with tables they could be
/// column names (QuestDB lets a table have a column `user`), so they are left alone there.
fn bare_session_function(expr: &mut Expr) {
    match expr {
        Expr::Function(f)
            if matches!(f.args, FunctionArguments::None) && is_named(&f.name, "user") =>
        {
            f.name = ObjectName::from(vec![Ident::new("current_user")]);
        }
        Expr::Identifier(i)
            if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("current_schema") =>
        {
            *expr = call("current_schema", Vec::new());
        }
        _ => {}
    }
}

/// Gives the second and later of repeated unaliased literals in a select list (`SELECT NULL,
/// NULL`, as pgjdbc's metadata queries have) PostgreSQL's name for them, `?column?`, made
/// unique: DataFusion wants distinct column names, PostgreSQL does not.
fn name_repeated_literals(projection: &mut [SelectItem]) {
    let mut seen = HashSet::new();
    let mut taken: HashSet<String> = projection
        .iter()
        .filter_map(|item| match item {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_lowercase()),
            _ => None,
        })
        .collect();
    // Names are tried in one increasing sequence for the whole list, so naming k repeats
    // costs O(k), not O(k²).
    let mut n = 0;
    for item in projection.iter_mut() {
        let SelectItem::UnnamedExpr(expr @ Expr::Value(_)) = item else {
            continue;
        };
        if seen.insert(expr.to_string().to_lowercase()) {
            continue;
        }
        n += 1;
        let mut name = if n == 1 {
            "?column?".to_string()
        } else {
            format!("?column?{n}")
        };
        while !taken.insert(name.clone()) {
            n += 1;
            name = format!("?column?{n}");
        }
        *item = SelectItem::ExprWithAlias {
            expr: expr.clone(),
            alias: Ident::with_quote('"', name),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A few of PostgreSQL's catalog relations, as the engine's catalog names them.
    struct Catalog;

    const WITH_ROWS: &[&str] = &[
        "pg_namespace",
        "pg_class",
        "pg_attribute",
        "pg_type",
        "pg_database",
        "pg_proc",
        "pg_am",
        "pg_roles",
        "pg_settings",
    ];
    const ALWAYS_EMPTY: &[&str] = &[
        "pg_auth_members",
        "pg_index",
        "pg_description",
        "pg_constraint",
        "pg_attrdef",
        "pg_inherits",
        "pg_collation",
        "pg_trigger",
        "pg_enum",
        "pg_depend",
        "pg_policy",
        "pg_publication",
        "pg_publication_rel",
    ];

    impl SystemCatalog for Catalog {
        fn is_catalog_relation(&self, name: &str) -> bool {
            let name = name.to_lowercase();
            WITH_ROWS.contains(&name.as_str()) || ALWAYS_EMPTY.contains(&name.as_str())
        }

        fn is_always_empty(&self, name: &str) -> bool {
            ALWAYS_EMPTY.contains(&name.to_lowercase().as_str())
        }

        fn column_type(&self, relation: &str, column: &str) -> Option<&'static str> {
            Some(match (relation, column) {
                ("pg_policy", "polname") | ("pg_auth_members" | "pg_roles", "rolname") => "name",
                ("pg_policy", "polpermissive") => "bool",
                ("pg_policy", "polqual") => "pg_node_tree",
                ("pg_class", "oid") | ("pg_inherits", "inhparent") => "oid",
                ("pg_class", "relkind") => "char",
                ("pg_inherits", "inhseqno") => "int4",
                _ => return None,
            })
        }

        fn function_type(&self, name: &str) -> Option<&'static str> {
            match name {
                "pg_get_expr" | "array_to_string" => Some("text"),
                "count" => Some("int8"),
                _ => None,
            }
        }

        fn type_name(&self, sql: &str) -> Option<&'static str> {
            let sql = sql.to_lowercase();
            let sql = sql.strip_prefix("pg_catalog.").unwrap_or(&sql);
            Some(match sql {
                "text" => "text",
                "name" => "name",
                "name[]" | "_name" => "_name",
                "int" | "integer" | "int4" => "int4",
                "int8" | "bigint" => "int8",
                "bool" | "boolean" => "bool",
                "regclass" => "regclass",
                _ => return None,
            })
        }

        fn setting_name(&self, name: &str) -> Option<&'static str> {
            ["server_version", "TimeZone"]
                .into_iter()
                .find(|s| s.eq_ignore_ascii_case(name))
        }
    }

    fn rewritten(sql: &str) -> String {
        let mut statements = Parser::parse_sql(&GenericDialect {}, sql).expect("parses");
        let mut statement = statements.remove(0);
        rewrite(&mut statement, &Catalog);
        statement.to_string()
    }

    #[test]
    fn time_bucket_becomes_date_bin() {
        assert_eq!(
            rewritten("SELECT time_bucket('60 seconds', time) AS m FROM cpu"),
            "SELECT date_bin(CAST('60 seconds' AS INTERVAL), time, CAST('2000-01-03T00:00:00' AS TIMESTAMP)) AS m FROM cpu"
        );
        assert_eq!(
            rewritten("SELECT time_bucket(INTERVAL '1 hour', t, o) FROM x"),
            "SELECT date_bin(INTERVAL '1 hour', t, o) FROM x"
        );
        assert_eq!(
            rewritten("SELECT time_bucket(t) FROM x"),
            "SELECT time_bucket(t) FROM x"
        );
    }

    #[test]
    fn arrays_written_as_strings_become_in_lists() {
        assert_eq!(
            rewritten("SELECT * FROM t WHERE id = ANY('{1, 2,\"a b\"}')"),
            "SELECT * FROM t WHERE id IN ('1', '2', 'a b')"
        );
        assert_eq!(
            rewritten("SELECT * FROM t WHERE id <> ALL('{1}')"),
            "SELECT * FROM t WHERE id NOT IN ('1')"
        );
        assert_eq!(
            rewritten("SELECT id = ANY('{1,NULL}'), id <> ALL('{NULL}') FROM t"),
            "SELECT ((id IN ('1')) OR CAST(NULL AS BOOLEAN)), ((true) AND CAST(NULL AS BOOLEAN)) FROM t"
        );
        assert_eq!(
            rewritten("SELECT id = ANY('{}') FROM t"),
            "SELECT false FROM t"
        );
        // Not an array, another operator, or a parameter: left to the planner.
        for kept in [
            "SELECT id = ANY('{{1}}') FROM t",
            "SELECT id > ANY('{1}') FROM t",
            "SELECT id = ANY($1) FROM t",
        ] {
            assert_eq!(rewritten(kept), kept);
        }
    }

    #[test]
    fn repeated_unaliased_literals_get_distinct_names() {
        assert_eq!(
            rewritten("SELECT NULL AS a, NULL, NULL, 2, NULL, 2 FROM t"),
            "SELECT NULL AS a, NULL, NULL AS \"?column?\", 2, NULL AS \"?column?2\", 2 AS \"?column?3\" FROM t"
        );
    }

    #[test]
    fn parameters_dropped_by_an_empty_select_are_still_counted() {
        let sql = "SELECT c.conname FROM pg_catalog.pg_constraint c WHERE c.conrelid = $2::oid";
        let mut statement = Parser::parse_sql(&GenericDialect {}, sql)
            .expect("parses")
            .remove(0);
        assert_eq!(rewrite(&mut statement, &Catalog), 2);
        assert!(!statement.to_string().contains('$'), "{statement}");
    }

    #[test]
    fn custom_operators_and_collations_become_plain() {
        assert_eq!(
            rewritten(
                "SELECT 1 FROM t WHERE a OPERATOR(pg_catalog.~) '^(t)$' COLLATE pg_catalog.default"
            ),
            "SELECT 1 FROM t WHERE a ~ '^(t)$'"
        );
        assert_eq!(
            rewritten("SELECT a OPERATOR(pg_catalog.!~*) 'x', a OPERATOR(=) 1 FROM t"),
            "SELECT a !~* 'x', a = 1 FROM t"
        );
    }

    #[test]
    fn object_identifier_casts_become_ints_or_lookups() {
        assert_eq!(
            rewritten(
                "SELECT c.oid::pg_catalog.regclass, x::oid, y::regtype::pg_catalog.text FROM t"
            ),
            "SELECT c.oid::INT, x::INT, y::INT::TEXT FROM t"
        );
        assert_eq!(
            rewritten("SELECT 'pg_class'::regclass, 'int4'::regtype, 'public'::regnamespace"),
            "SELECT to_regclass('pg_class'), to_regtype('int4'), to_regnamespace('public')"
        );
        assert_eq!(
            rewritten("SELECT * FROM t WHERE relid = $1::regclass"),
            "SELECT * FROM t WHERE relid = to_regclass($1)"
        );
        assert_eq!(
            rewritten("SELECT typinput = 'pg_catalog.array_in'::regproc FROM t"),
            "SELECT typinput = 'array_in' FROM t"
        );
        assert_eq!(
            rewritten(
                "SELECT a::name, b::\"char\", c::pg_catalog.int2[], d::pg_catalog.varchar FROM t"
            ),
            "SELECT a::TEXT, b::TEXT, c::INT2[], d::VARCHAR FROM t"
        );
    }

    #[test]
    fn catalog_functions_and_relations_are_unqualified_or_qualified() {
        assert_eq!(
            rewritten("SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM pg_class c"),
            "SELECT pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c"
        );
        assert_eq!(
            rewritten(
                "WITH pg_class AS (SELECT 1) SELECT * FROM pg_class, pg_catalog.generate_series(1, 2)"
            ),
            "WITH pg_class AS (SELECT 1) SELECT * FROM pg_class, generate_series(1, 2)"
        );
    }

    #[test]
    fn selects_over_always_empty_relations_become_empty() {
        assert_eq!(
            rewritten(
                "SELECT pol.polname, pol.polpermissive, pg_catalog.pg_get_expr(pol.polqual, pol.polrelid), pg_get_expr(x, y), 'r' AS cmd FROM pg_catalog.pg_policy pol WHERE pol.polrelid = '1' ORDER BY 1"
            ),
            "SELECT CAST(NULL AS __sundial_pg_type__.name) AS \"polname\", CAST(NULL AS __sundial_pg_type__.bool) AS \"polpermissive\", CAST(NULL AS __sundial_pg_type__.text) AS \"pg_get_expr\", CAST(NULL AS __sundial_pg_type__.text) AS \"__sundial_repeat__pg_get_expr\", CAST(NULL AS __sundial_pg_type__.text) AS \"cmd\" FROM pg_catalog.pg_policy WHERE false"
        );
        assert_eq!(
            rewritten(
                "SELECT c.oid::pg_catalog.regclass FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i WHERE c.oid = i.inhparent ORDER BY inhseqno"
            ),
            "SELECT CAST(NULL AS __sundial_pg_type__.regclass) AS \"oid\" FROM pg_catalog.pg_inherits WHERE false"
        );
        assert_eq!(
            rewritten(
                "SELECT pubname, NULL, NULL FROM pg_publication p JOIN pg_class c ON true UNION SELECT pubname, NULL, NULL FROM pg_publication p ORDER BY 1"
            ),
            "SELECT NULL AS \"pubname\", NULL AS \"?column?\", NULL AS \"__sundial_repeat__?column?\" FROM pg_catalog.pg_publication WHERE false UNION SELECT NULL AS \"pubname\", NULL AS \"?column?\", NULL AS \"__sundial_repeat__?column?\" FROM pg_catalog.pg_publication WHERE false"
        );
        assert_eq!(
            rewritten("SELECT * FROM pg_inherits i WHERE i.inhrelid = 1"),
            "SELECT * FROM pg_catalog.pg_inherits i WHERE false"
        );
    }

    #[test]
    fn outer_joins_and_aggregates_keep_their_rows() {
        let sql = "SELECT c.relname, d.description FROM pg_catalog.pg_class AS c LEFT JOIN pg_catalog.pg_description AS d ON c.oid = d.objoid";
        assert_eq!(rewritten(sql), sql);
        let sql = "SELECT count(*) FROM pg_catalog.pg_inherits";
        assert_eq!(rewritten(sql), sql);
        let sql = "SELECT (SELECT count(*) FROM t) FROM pg_catalog.pg_inherits";
        assert_eq!(
            rewritten(sql),
            "SELECT CAST(NULL AS __sundial_pg_type__.int8) AS \"count\" FROM pg_catalog.pg_inherits WHERE false"
        );
        assert_eq!(
            rewritten("SELECT x AS Y, y, i.inhseqno FROM pg_catalog.pg_inherits AS i, t"),
            "SELECT NULL AS \"y\", NULL AS \"__sundial_repeat__y\", CAST(NULL AS __sundial_pg_type__.int4) AS \"inhseqno\" FROM pg_catalog.pg_inherits WHERE false"
        );
        assert_eq!(
            rewritten("SELECT 1 AS \"?column?\", 2 FROM pg_catalog.pg_inherits"),
            "SELECT CAST(NULL AS __sundial_pg_type__.int4) AS \"?column?\", CAST(NULL AS __sundial_pg_type__.int4) AS \"__sundial_repeat__?column?\" FROM pg_catalog.pg_inherits WHERE false"
        );
        let sql = "SELECT a, count(*) FROM pg_catalog.pg_inherits GROUP BY a";
        assert_eq!(
            rewritten(sql),
            "SELECT NULL AS \"a\", CAST(NULL AS __sundial_pg_type__.int8) AS \"count\" FROM pg_catalog.pg_inherits WHERE false"
        );
    }

    #[test]
    fn subqueries_over_empty_selects_fold() {
        // A scalar subquery stays, uncorrelated, for its column's name and type.
        assert_eq!(
            rewritten(
                "SELECT a.attname, (SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid) FROM pg_catalog.pg_attribute a"
            ),
            "SELECT a.attname, (SELECT CAST(NULL AS __sundial_pg_type__.text) AS \"pg_get_expr\" FROM pg_catalog.pg_attrdef WHERE false) FROM pg_catalog.pg_attribute a"
        );
        assert_eq!(
            rewritten(
                "SELECT 1 FROM t WHERE EXISTS (SELECT 1 FROM pg_inherits) OR NOT EXISTS (SELECT 1 FROM pg_trigger) OR x IN (SELECT 1 FROM pg_depend) OR x NOT IN (SELECT 1 FROM pg_enum)"
            ),
            "SELECT 1 FROM t WHERE false OR true OR false OR true"
        );
        assert_eq!(
            rewritten("SELECT * FROM (SELECT a FROM pg_index) AS x JOIN pg_class c ON true"),
            "SELECT * FROM (SELECT NULL AS \"a\" FROM pg_catalog.pg_index WHERE false) AS x JOIN pg_catalog.pg_class c ON true WHERE false"
        );
    }

    #[test]
    fn scalar_catalog_lookups_aggregate() {
        assert_eq!(
            rewritten(
                "SELECT t.typname FROM pg_type t WHERE t.typrelid = 0 OR (SELECT c.relkind = 'c' FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid)"
            ),
            "SELECT t.typname FROM pg_catalog.pg_type t WHERE t.typrelid = 0 OR (SELECT first_value(c.relkind = 'c') FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid)"
        );
        // Subqueries over other relations, or already aggregating, are DataFusion's business.
        for sql in [
            "SELECT (SELECT a FROM t WHERE t.b = u.b) FROM u",
            "SELECT (SELECT count(*) FROM pg_catalog.pg_class c WHERE c.oid = u.b) FROM u",
            "SELECT (SELECT c.oid FROM pg_catalog.pg_class c ORDER BY 1 LIMIT 1) FROM u",
        ] {
            assert_eq!(rewritten(sql), sql);
        }
    }

    #[test]
    fn array_subqueries_become_empty_arrays() {
        assert_eq!(
            rewritten("SELECT array_to_string(array(SELECT x FROM unnest(y) x), ', ') FROM t"),
            "SELECT array_to_string(CAST(make_array() AS TEXT[]), ', ') FROM t"
        );
        // Over an always-empty relation: an empty array of its column's type.
        assert_eq!(
            rewritten(
                "SELECT r.rolname, ARRAY(SELECT b.rolname FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles b ON (m.roleid = b.oid) WHERE m.member = r.oid) AS memberof FROM pg_catalog.pg_roles r"
            ),
            "SELECT r.rolname, CAST(make_array() AS __sundial_pg_type__._name) AS memberof FROM pg_catalog.pg_roles r"
        );
    }

    #[test]
    fn bare_session_functions_without_from() {
        assert_eq!(
            rewritten("SELECT user, current_schema"),
            "SELECT current_user, current_schema()"
        );
        assert_eq!(rewritten("SELECT user FROM t"), "SELECT user FROM t");
    }

    #[test]
    fn show_settings_become_queries() {
        assert_eq!(
            rewritten("SHOW server_version"),
            "SELECT current_setting('server_version') AS \"server_version\""
        );
        assert_eq!(
            rewritten("SHOW TimeZone"),
            "SELECT current_setting('TimeZone') AS \"timezone\""
        );
        let sql = "SHOW datafusion.execution.batch_size";
        let parsed = Parser::parse_sql(&GenericDialect {}, sql).expect("parses");
        assert_eq!(rewritten(sql), parsed[0].to_string());
    }

    #[test]
    fn ordinary_sql_is_untouched() {
        for sql in [
            "SELECT a, b FROM t WHERE a ~ 'x' ORDER BY b",
            "SELECT CAST(a AS INT), b::TEXT FROM t",
            "SELECT * FROM t JOIN u ON t.a = u.a",
            "INSERT INTO t VALUES (1, 'a')",
        ] {
            assert_eq!(rewritten(sql), sql);
        }
    }
}
