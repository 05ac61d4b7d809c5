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
//! - `nullif` and `coalesce` keep their first argument's declared type in such a statement
//!   (`nullif(a.attidentity, '')` is `"char"`, as PostgreSQL's), wherever in the plan they are:
//!   DataFusion's results declare none, so they are aliased declaring it.
//! - arrays cast to text print as PostgreSQL prints them, `{a,b}` (`nspacl::text`), not as
//!   Arrow does, `[a, b]`: in such a statement, such a cast in a projection or a filter
//!   becomes `array_out` (`sundial_pgcatalog::array_out`).
//! - `bigint`: in such a statement an unsigned 64-bit result (`row_number()`, which PostgreSQL
//!   types `bigint`) is cast to a signed one, so that it is sent as `int8`, not `numeric`.

use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, Result as DfResult, TableReference};
use datafusion::logical_expr::expr::FieldMetadata;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, LogicalPlanBuilder, cast};
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
    let catalog = crate::result_names::postgres_statement(&plan);
    let plan = if catalog {
        argument_types(array_texts(plan)?)?
    } else {
        plan
    };
    let schema = plan.schema().clone();
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

/// `plan` with its projections' and filters' casts of arrays to text made `array_out` calls
/// (see the module docs), each projected column keeping its name; unchanged when there are none.
fn array_texts(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    let needed = plan
        .exists(|node| {
            Ok(
                matches!(node, LogicalPlan::Projection(_) | LogicalPlan::Filter(_))
                    && node.expressions().iter().any(|e| {
                        e.exists(|e| Ok(is_array_text_cast(e, node)))
                            .unwrap_or(false)
                    }),
            )
        })
        .unwrap_or(false);
    if !needed {
        return Ok(plan);
    }
    let array_out = sundial_pgcatalog::array_out();
    plan.transform_up(|node| {
        let input = match &node {
            LogicalPlan::Projection(_) | LogicalPlan::Filter(_) => node.clone(),
            _ => return Ok(Transformed::yes(node.recompute_schema()?)),
        };
        let projection = matches!(node, LogicalPlan::Projection(_));
        let node = node.map_expressions(|e| {
            let (relation, name) = e.qualified_name();
            let printed = e.transform_up(|e| {
                if !is_array_text_cast(&e, &input) {
                    return Ok(Transformed::no(e));
                }
                let Expr::Cast(c) = e else {
                    return Ok(Transformed::no(e));
                };
                let call = array_out.call(vec![*c.expr]);
                Ok(Transformed::yes(match c.field.data_type() {
                    DataType::Utf8 => call,
                    other => cast(call, other.clone()),
                }))
            })?;
            if !(projection && printed.transformed) {
                return Ok(printed);
            }
            Ok(printed.update_data(|e| e.unalias().alias_qualified(relation, name)))
        })?;
        Ok(Transformed::yes(node.data.recompute_schema()?))
    })
    .map(|t| t.data)
}

/// Whether `expr`, in `node`, is a cast of an array to a string type that declares no
/// PostgreSQL type of its own.
fn is_array_text_cast(expr: &Expr, node: &LogicalPlan) -> bool {
    let Expr::Cast(c) = expr else {
        return false;
    };
    if !is_text(c.field.data_type()) || declares_type(&c.field) {
        return false;
    }
    let schema = match node.inputs().as_slice() {
        [input] => input.schema().clone(),
        _ => return false,
    };
    matches!(
        c.expr.get_type(&schema),
        Ok(DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..))
    )
}

/// `plan` with every projected `nullif(x, ...)` and `coalesce(x, ...)` declaring `x`'s
/// PostgreSQL type (see the module docs); unchanged when none needs to.
fn argument_types(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    let needed = plan
        .exists(|node| {
            Ok(match node {
                LogicalPlan::Projection(p) => p
                    .expr
                    .iter()
                    .any(|e| argument_type(e, p.input.schema()).is_some()),
                _ => false,
            })
        })
        .unwrap_or(false);
    if !needed {
        return Ok(plan);
    }
    plan.transform_up(|node| {
        let node = match node {
            LogicalPlan::Projection(mut p) => {
                let input = p.input.schema().clone();
                p.expr = p
                    .expr
                    .into_iter()
                    .map(|e| match argument_type(&e, &input) {
                        Some(metadata) => {
                            let (relation, name) = e.qualified_name();
                            let inner = match e {
                                Expr::Alias(a) => *a.expr,
                                other => other,
                            };
                            inner.alias_qualified_with_metadata(relation, name, Some(metadata))
                        }
                        None => e,
                    })
                    .collect();
                LogicalPlan::Projection(p)
            }
            other => other,
        };
        // Schemas above a changed projection carry its fields.
        Ok(Transformed::yes(node.recompute_schema()?))
    })
    .map(|t| t.data)
}

/// The metadata declaring the first argument's PostgreSQL type, for a `nullif` or `coalesce`
/// (under any alias) whose result declares none and has that argument's Arrow type.
fn argument_type(expr: &Expr, input: &DFSchema) -> Option<FieldMetadata> {
    let call: &Expr = match expr {
        Expr::Alias(a) => &a.expr,
        other => other,
    };
    let Expr::ScalarFunction(f) = call else {
        return None;
    };
    if !matches!(f.func.name(), "nullif" | "coalesce") {
        return None;
    }
    let (_, result) = call.to_field(input).ok()?;
    let (_, first) = f.args.first()?.to_field(input).ok()?;
    (!declares_type(&result)
        && first.metadata().contains_key(crate::PG_TYPE_KEY)
        && first.data_type() == result.data_type())
    .then(|| FieldMetadata::from(first.metadata().clone()))
}

/// Whether `expr` (under any alias) is a cast to a string type that declares no PostgreSQL
/// type of its own (a cast to `text`, not to a catalog type the dialect wrote by name).
fn is_text_cast(expr: &Expr) -> bool {
    match expr {
        Expr::Alias(a) => is_text_cast(&a.expr),
        Expr::Cast(c) => is_text(c.field.data_type()) && !declares_type(&c.field),
        Expr::TryCast(c) => is_text(c.field.data_type()) && !declares_type(&c.field),
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
