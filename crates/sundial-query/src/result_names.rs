//! Result column names after planning. Statements that read Sundial's tables had their
//! unaliased items named as QuestDB names them before planning
//! (`sundial_sql::questdb::column_names`); what is left here is a repeated name that `*`
//! brought in (`SELECT * FROM a JOIN b`, both with `ts`), which QuestDB names `ts1`, `ts2`.
//!
//! Statements of PostgreSQL's catalogs, or of table functions only, name columns as PostgreSQL does (`postgres_name`): a call
//! by its function (`count(*)` is `count`), a cast by its operand's name or else its type's
//! (`relname::text` is `relname`, `1::text` is `text`), a CASE by its ELSE result's name or else
//! `case`, a scalar subquery by its
//! column, anything else `?column?`; a repeated name stays repeated (named apart for DataFusion
//! here, and back in `pg_results`). Statements of no table name a call by its function, a cast
//! `cast`, a literal by its SQL text (`SELECT 1` is `1`) and anything else `column`; a name
//! already taken by an earlier column gets the first free suffix (`count`, `count1`, ...).

use std::collections::HashSet;

use datafusion::common::tree_node::TreeNode;
use datafusion::common::{Column, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{Distinct, Expr, LogicalPlan, LogicalPlanBuilder};
use sundial_sql::names::REPEAT_PREFIX;

/// `plan` with its result columns renamed as QuestDB names them (see the module docs); plans
/// that return no query result (DML, DDL, EXPLAIN) are unchanged.
pub(crate) fn questdb_names(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    if !matches!(
        plan,
        LogicalPlan::Projection(_)
            | LogicalPlan::Aggregate(_)
            | LogicalPlan::Sort(_)
            | LogicalPlan::Limit(_)
            | LogicalPlan::Distinct(_)
            | LogicalPlan::Filter(_)
            | LogicalPlan::Window(_)
    ) {
        return Ok(plan);
    }
    let schema = plan.schema().clone();
    // Statements of Sundial's tables were named before planning: only repeats are left.
    let named_before = reads_table(&plan);
    let exprs = output_exprs(&plan).filter(|e| e.len() == schema.fields().len());
    let names: Vec<&String> = schema.fields().iter().map(|f| f.name()).collect();
    let postgres = postgres_statement(&plan);
    let wanted: Vec<Option<String>> = schema
        .iter()
        .enumerate()
        .map(|(i, (qualifier, field))| {
            let name = match exprs.as_ref().map(|e| &e[i]) {
                Some(expr) if postgres => postgres_name(expr),
                Some(expr) => expr_name(expr),
                // PostgreSQL's `?column?` (and its repeats) is a name, not text to name.
                None if postgres && is_postgres_name(field.name()) => None,
                None if qualifier.is_none() => Some(text_name(field.name())),
                None => None,
            };
            name.filter(|n| n != field.name() && !named_before)
        })
        .collect();
    // Names kept as they are stay, except a repeat of an earlier column's (two tables' `ts`
    // under `*`), which QuestDB names `ts1`; PostgreSQL keeps repeats, and so do queries of
    // its catalogs. Renamed columns take the first free suffix.
    let repeats_renamed = !postgres;
    let mut taken: HashSet<String> = names
        .iter()
        .zip(&wanted)
        .filter(|(_, w)| w.is_none())
        .map(|(n, _)| n.to_lowercase())
        .collect();
    let mut seen: HashSet<String> = HashSet::new();
    let free = |base: &str, taken: &mut HashSet<String>| {
        if postgres {
            // A repeat PostgreSQL keeps: named apart for DataFusion, and back by `pg_results`.
            let mut name = format!("{REPEAT_PREFIX}{base}");
            while !taken.insert(name.to_lowercase()) {
                name.insert_str(0, REPEAT_PREFIX);
            }
            return name;
        }
        let name = (1..)
            .map(|k| format!("{base}{k}"))
            .find(|n| !taken.contains(&n.to_lowercase()))
            .unwrap_or_else(|| base.to_string());
        taken.insert(name.to_lowercase());
        name
    };
    let renamed: Vec<Option<String>> = names
        .iter()
        .zip(wanted)
        .map(|(name, w)| match w {
            None if seen.insert(name.to_lowercase()) || !repeats_renamed => None,
            None => Some(free(name, &mut taken)),
            Some(base) if !taken.contains(&base.to_lowercase()) => {
                taken.insert(base.to_lowercase());
                seen.insert(base.to_lowercase());
                Some(base)
            }
            Some(base) => Some(free(&base, &mut taken)),
        })
        .collect();
    if renamed.iter().all(Option::is_none) {
        return Ok(plan);
    }
    let exprs: Vec<Expr> = schema
        .iter()
        .zip(renamed)
        .map(|((qualifier, field), name)| {
            let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
            match name {
                Some(name) => column.alias(name),
                None => column,
            }
        })
        .collect();
    LogicalPlanBuilder::from(plan).project(exprs)?.build()
}

/// Whether `plan` reads one of Sundial's tables (a relation outside PostgreSQL's catalogs).
fn reads_table(plan: &LogicalPlan) -> bool {
    plan.exists(|node| {
        let LogicalPlan::TableScan(scan) = node else {
            return Ok(false);
        };
        let Ok(provider) = datafusion::datasource::source_as_provider(&scan.source) else {
            return Ok(false);
        };
        Ok(provider
            .downcast_ref::<crate::provider::SundialTable>()
            .is_some()
            || provider
                .downcast_ref::<crate::exec::latest::LatestTable>()
                .is_some())
    })
    .unwrap_or(false)
}

/// Whether `plan` is a statement of PostgreSQL's tools, answered with PostgreSQL's names and
/// types: one that reads its catalogs, or table functions only (Grafana's schema list reads
/// `generate_series` and `string_to_array`).
pub(crate) fn postgres_statement(plan: &LogicalPlan) -> bool {
    reads_catalog(plan) || (!reads_table(plan) && reads_relation(plan))
}

/// Whether `plan` reads any relation at all (a table function counts).
fn reads_relation(plan: &LogicalPlan) -> bool {
    plan.exists(|node| Ok(matches!(node, LogicalPlan::TableScan(_))))
        .unwrap_or(false)
}

/// Whether `plan` reads a relation of PostgreSQL's catalogs (`pg_catalog`,
/// `information_schema`), whose queries come from PostgreSQL tools.
fn reads_catalog(plan: &LogicalPlan) -> bool {
    plan.exists(|node| {
        Ok(matches!(node, LogicalPlan::TableScan(scan)
            if matches!(scan.table_name.schema(), Some("pg_catalog" | "information_schema"))))
    })
    .unwrap_or(false)
}

/// The expressions of the projection that makes `plan`'s rows, seen through the nodes that
/// keep its columns (sorts, limits, filters, DISTINCT).
pub(crate) fn output_exprs(plan: &LogicalPlan) -> Option<&[Expr]> {
    match plan {
        LogicalPlan::Projection(p) => Some(&p.expr),
        LogicalPlan::Sort(s) => output_exprs(&s.input),
        LogicalPlan::Limit(l) => output_exprs(&l.input),
        LogicalPlan::Filter(f) => output_exprs(&f.input),
        LogicalPlan::Distinct(Distinct::All(input)) => output_exprs(input),
        _ => None,
    }
}

/// The name PostgreSQL gives an unaliased projection expression, for statements of its
/// catalogs: a column its name, a call its function's, a cast its operand's name or else its
/// type's, a CASE `case`, a scalar subquery its column's, anything else `?column?`.
fn postgres_name(expr: &Expr) -> Option<String> {
    match expr {
        // A column of a relation (`c.reloftype` under a cast or a CASE) by its name.
        Expr::Column(c) if c.relation.is_some() => Some(c.name.clone()),
        Expr::Cast(datafusion::logical_expr::Cast {
            expr: inner, field, ..
        })
        | Expr::TryCast(datafusion::logical_expr::TryCast {
            expr: inner, field, ..
        }) => postgres_name(inner)
            .filter(|n| n != "?column?")
            .or_else(|| Some(pg_type_name(field.data_type()).into())),
        Expr::ScalarSubquery(subquery) => subquery
            .subquery
            .schema()
            .fields()
            .first()
            .map(|f| text_name(f.name()))
            .map(|n| if n == "column" { "?column?".into() } else { n }),
        // A CASE is named after its ELSE result, if that has a name.
        Expr::Case(case) => case
            .else_expr
            .as_deref()
            .and_then(postgres_name)
            .filter(|n| n != "?column?")
            .or_else(|| Some("case".into())),
        // `x = ANY(array)` is planned as `array_has`, which PostgreSQL does not have.
        Expr::ScalarFunction(f) if f.func.name() == "array_has" => Some("?column?".into()),
        Expr::Literal(..) | Expr::BinaryExpr(_) | Expr::Not(_) | Expr::Negative(_) => {
            Some("?column?".into())
        }
        other => expr_name(other).map(|n| if n == "column" { "?column?".into() } else { n }),
    }
}

/// Whether `name` is one only PostgreSQL's naming gives (`?column?`, a repeat).
fn is_postgres_name(name: &str) -> bool {
    name.trim_start_matches(REPEAT_PREFIX) == "?column?" || name.starts_with(REPEAT_PREFIX)
}

/// PostgreSQL's name of the type a cast to `data_type` makes, as it names such a column.
fn pg_type_name(data_type: &datafusion::arrow::datatypes::DataType) -> &'static str {
    use datafusion::arrow::datatypes::DataType as D;
    match data_type {
        D::Utf8 | D::LargeUtf8 | D::Utf8View => "text",
        D::Int16 => "int2",
        D::Int32 => "int4",
        D::Int64 => "int8",
        D::Float32 => "float4",
        D::Float64 => "float8",
        D::Boolean => "bool",
        _ => "?column?",
    }
}

/// The name an unaliased projection expression gets; `None` keeps the planner's (aliases,
/// and columns of tables and subqueries).
fn expr_name(expr: &Expr) -> Option<String> {
    match expr {
        // DataFusion plans `count(*)` as `count(1) AS "count(*)"`.
        Expr::Alias(a) if a.name == "count(*)" => Some("count".into()),
        Expr::Alias(_) => None,
        Expr::Column(c) if c.relation.is_some() => None,
        // An aggregate's or a grouping expression's output, named by its text.
        Expr::Column(c) => Some(text_name(&c.name)),
        Expr::Literal(value, _) => Some(literal_name(value)),
        Expr::ScalarFunction(f) => Some(f.func.name().to_lowercase()),
        Expr::AggregateFunction(f) => Some(f.func.name().to_lowercase()),
        Expr::WindowFunction(w) => Some(w.fun.name().to_lowercase()),
        Expr::Cast(_) | Expr::TryCast(_) => Some("cast".into()),
        Expr::ScalarVariable(..) | Expr::Placeholder(_) | Expr::OuterReferenceColumn(..) => None,
        _ => Some("column".into()),
    }
}

/// A literal's SQL text.
fn literal_name(value: &ScalarValue) -> String {
    if value.is_null() {
        return "NULL".into();
    }
    match value {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::Utf8View(Some(s))
        | ScalarValue::LargeUtf8(Some(s)) => {
            format!("'{}'", s.replace('\'', "''"))
        }
        other => other.to_string(),
    }
}

/// The name of an expression DataFusion names by its text (`avg(cpu.usage_user)`,
/// `Int64(1)`, `t.v + Int64(1)`): see the module docs.
fn text_name(text: &str) -> String {
    if let Some((sql, used)) = crate::messages::literal_at(text)
        && used == text.len()
    {
        return sql;
    }
    if text.starts_with("CAST(") || text.starts_with("TRY_CAST(") {
        return "cast".into();
    }
    if let Some(open) = text.find('(') {
        let function = &text[..open];
        let plain = !function.is_empty()
            && function
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if plain && closes_at_end(&text[open..]) {
            return function.to_lowercase();
        }
        return "column".into();
    }
    let is_name = text
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '.');
    if is_name {
        return text.rsplit('.').next().unwrap_or(text).to_string();
    }
    "column".into()
}

/// Whether the parenthesis opening `text` closes at its last character (the double quotes of
/// string literals respected; single quotes are parts of names there).
fn closes_at_end(text: &str) -> bool {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1 == text.len();
                }
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_text() {
        assert_eq!(text_name("max(cpu.usage_user)"), "max");
        assert_eq!(text_name("count(*)"), "count");
        assert_eq!(text_name("count(DISTINCT t.host)"), "count");
        assert_eq!(text_name("sum(t.a + t.b)"), "sum");
        assert_eq!(text_name("Int64(1)"), "1");
        assert_eq!(text_name("Utf8(\"a\")"), "'a'");
        assert_eq!(text_name("t.v + Int64(1)"), "column");
        assert_eq!(text_name("max(a) + max(b)"), "column");
        assert_eq!(text_name("CAST(t.v AS Int32)"), "cast");
        assert_eq!(text_name("date_trunc(Utf8(\"hour\"),t.ts)"), "date_trunc");
        assert_eq!(text_name("cpu.v"), "v");
        assert_eq!(text_name("f(Utf8(\")\"))"), "f");
        assert_eq!(text_name("min(o'dd T.v)"), "min");
    }
}
