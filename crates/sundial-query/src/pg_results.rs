//! Results of statements over PostgreSQL's catalogs, shaped as PostgreSQL shapes them, in the
//! one projection this adds on top of the planned statement (only when something changes):
//!
//! - repeated names: `SELECT n.oid, n.* FROM pg_namespace n` returns `oid` twice. The dialect
//!   aliased the plain column as `__sundial_repeat__oid` so that DataFusion could plan it
//!   (`sundial_sql`'s `repeats`; `result_names` names a repeated `?column?` the same way); here
//!   it gets its name back. DataFusion keeps output names unique per qualifier, so every column
//!   then takes a qualifier of its own (`__sundial_repeat__<position>`): the two `oid`s are
//!   distinct to DataFusion and the same to a client, which sees unqualified names only.
//! - `text`: in a statement that reads `pg_catalog` or `information_schema` (or table functions
//!   only; `result_names::postgres_statement`), a string result
//!   whose PostgreSQL type nothing declared (a CASE of literals, `||`, a literal) is `text`, as
//!   PostgreSQL types string expressions. Catalog columns and functions declare their own type
//!   (`name`, `"char"`, `varchar`: `sundial_pgcatalog::PG_TYPE_KEY`), which stays, except
//!   through a cast to text (`typinput::text`), which DataFusion lets keep its input's
//!   declaration. Statements of Sundial's tables are left as they are: their strings are
//!   `varchar`, as QuestDB sends them.
//! - `bigint`: in such a statement an unsigned 64-bit result (`row_number()`, which PostgreSQL
//!   types `bigint`) is cast to a signed one, so that it is sent as `int8`, not `numeric`.

use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{Column, Result as DfResult, TableReference};
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, cast};
use sundial_sql::names::REPEAT_PREFIX;

/// PostgreSQL's `text`.
const TEXT_OID: i32 = 25;

/// `plan` with its result shaped as PostgreSQL's (see the module docs); unchanged when nothing
/// needs to change.
pub(crate) fn as_postgres(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    if !matches!(
        plan,
        LogicalPlan::Projection(_)
            | LogicalPlan::Aggregate(_)
            | LogicalPlan::Sort(_)
            | LogicalPlan::Limit(_)
            | LogicalPlan::Distinct(_)
            | LogicalPlan::Filter(_)
            | LogicalPlan::Window(_)
            | LogicalPlan::Union(_)
    ) {
        return Ok(plan);
    }
    let schema = plan.schema().clone();
    let catalog = crate::result_names::postgres_statement(&plan);
    let casts_to_text: Vec<bool> = match crate::result_names::output_exprs(&plan) {
        Some(exprs) if exprs.len() == schema.fields().len() => {
            exprs.iter().map(|e| catalog && is_text_cast(e)).collect()
        }
        _ => vec![false; schema.fields().len()],
    };
    let repeated = |f: &Field| f.name().starts_with(REPEAT_PREFIX);
    let untyped_text = |i: usize, f: &Field| {
        catalog && is_text(f.data_type()) && (!declares_type(f) || casts_to_text[i])
    };
    let unsigned = |f: &Field| catalog && f.data_type() == &DataType::UInt64;
    if !schema
        .fields()
        .iter()
        .enumerate()
        .any(|(i, f)| repeated(f) || untyped_text(i, f) || unsigned(f))
    {
        return Ok(plan);
    }
    // With a repeat, every column takes a qualifier of its own (its position): an unqualified
    // name beside the same name qualified would be ambiguous to DataFusion.
    let any_repeat = schema.fields().iter().any(|f| repeated(f));
    let exprs: Vec<Expr> = schema
        .iter()
        .enumerate()
        .map(|(i, (qualifier, field))| {
            let column = Expr::Column(Column::from((qualifier, field)));
            let name = field.name().trim_start_matches(REPEAT_PREFIX);
            let relation = if any_repeat {
                Some(TableReference::bare(format!("{REPEAT_PREFIX}{i}")))
            } else {
                qualifier.cloned()
            };
            if untyped_text(i, field) {
                let typed = crate::with_pg_type(field.as_ref().clone(), TEXT_OID);
                column.alias_qualified_with_metadata(
                    relation,
                    name,
                    Some(typed.metadata().clone().into()),
                )
            } else if unsigned(field) {
                cast(column, DataType::Int64).alias_qualified(relation, name)
            } else if any_repeat {
                column.alias_qualified(relation, name)
            } else {
                column
            }
        })
        .collect();
    LogicalPlanBuilder::from(plan).project(exprs)?.build()
}

/// Whether `expr` (under any alias) is a cast to a string type.
fn is_text_cast(expr: &Expr) -> bool {
    match expr {
        Expr::Alias(a) => is_text_cast(&a.expr),
        Expr::Cast(c) => is_text(c.field.data_type()),
        Expr::TryCast(c) => is_text(c.field.data_type()),
        _ => false,
    }
}

fn is_text(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

fn declares_type(field: &Field) -> bool {
    let metadata = field.metadata();
    metadata.contains_key(crate::PG_TYPE_KEY)
        || metadata.contains_key(sundial_storage::SUNDIAL_TYPE_KEY)
}
