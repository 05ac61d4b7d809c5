//! Types of statement parameters the planner leaves open, as PostgreSQL gives them: a driver
//! encodes a parameter's value by the type Describe reports, so a parameter typed by its use
//! (`$1::BIGINT`, `id = ANY($1)`) is described with that type rather than as text.
//!
//! DataFusion types a placeholder only where it meets a column or literal in a comparison,
//! `BETWEEN` or `IN`; [`infer`] adds casts and the arrays of `= ANY($n)` / `<> ALL($n)`.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::expr::Placeholder;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan};

use crate::error::Result;
use sundial_sql::names::placeholder_index;

/// Fills the open entries of `types` (indexed by parameter, `$1` first) that `plan` implies.
pub(crate) fn infer(plan: &LogicalPlan, types: &mut Vec<Option<DataType>>) -> Result<()> {
    cast_types(plan, types)?;
    array_types(plan, types)
}

/// Records `data_type` for placeholder `expr` if it is one without a type yet.
fn record(expr: &Expr, data_type: &DataType, types: &mut Vec<Option<DataType>>) {
    if let Expr::Placeholder(p) = expr
        && p.field.is_none()
        && let Some(i) = placeholder_index(&p.id)
    {
        if types.len() <= i {
            types.resize(i + 1, None);
        }
        types[i].get_or_insert_with(|| data_type.clone());
    }
}

/// Types for parameters the planner left open but the SQL casts (`$1::BIGINT`, `CAST($2 AS
/// INT)`): PostgreSQL describes such a parameter with the cast's type, and drivers encode
/// their values by it.
fn cast_types(plan: &LogicalPlan, types: &mut Vec<Option<DataType>>) -> Result<()> {
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|expr| {
            expr.apply(|e| {
                let (inner, target) = match e {
                    Expr::Cast(c) => (c.expr.as_ref(), c.field.data_type()),
                    Expr::TryCast(c) => (c.expr.as_ref(), c.field.data_type()),
                    _ => return Ok(TreeNodeRecursion::Continue),
                };
                record(inner, target, types);
                Ok(TreeNodeRecursion::Continue)
            })
        })?;
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(())
}

/// Arrays the SQL compares a value with: `x = ANY($1)` is planned as `array_has($1, x)` (and
/// `x <> ALL($1)` uses it too), so `$1` is an array of `x`'s type (of a SYMBOL's strings).
fn array_types(plan: &LogicalPlan, types: &mut Vec<Option<DataType>>) -> Result<()> {
    plan.apply_with_subqueries(|node| {
        let inputs = node.inputs();
        let [input] = inputs.as_slice() else {
            return Ok(TreeNodeRecursion::Continue);
        };
        let schema = input.schema();
        node.apply_expressions(|expr| {
            expr.apply(|e| {
                if let Expr::ScalarFunction(f) = e
                    && f.name() == "array_has"
                    && let [haystack, needle] = f.args.as_slice()
                    && matches!(haystack, Expr::Placeholder(p) if p.field.is_none())
                    && let Ok(field) = needle.to_field(schema)
                {
                    let element = match field.1.data_type() {
                        DataType::Dictionary(_, values) => values.as_ref().clone(),
                        other => other.clone(),
                    };
                    if element != DataType::Null {
                        record(haystack, &DataType::new_list(element, true), types);
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })?;
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(())
}

/// `plan` with its untyped placeholders of array type typed as `types` says, so the analyzer
/// coerces what they meet as for an array literal (`x <> ALL($1)` looks for NULL elements).
pub(crate) fn with_array_types(
    plan: LogicalPlan,
    types: &[Option<DataType>],
) -> Result<LogicalPlan> {
    let array_type = |p: &Placeholder| {
        let t = types.get(placeholder_index(&p.id)?)?.as_ref()?;
        (p.field.is_none() && matches!(t, DataType::List(_))).then(|| t.clone())
    };
    if !types
        .iter()
        .flatten()
        .any(|t| matches!(t, DataType::List(_)))
    {
        return Ok(plan);
    }
    let typed = plan.transform_up_with_subqueries(|node| {
        let node = node.map_expressions(|expr| {
            expr.transform(|e| match &e {
                Expr::Placeholder(p) => match array_type(p) {
                    Some(t) => Ok(Transformed::yes(Expr::Placeholder(
                        Placeholder::new_with_field(
                            p.id.clone(),
                            Some(Arc::new(Field::new("", t, true))),
                        ),
                    ))),
                    None => Ok(Transformed::no(e)),
                },
                _ => Ok(Transformed::no(e)),
            })
        })?;
        if node.transformed {
            node.map_data(LogicalPlan::recompute_schema)
        } else {
            Ok(node)
        }
    })?;
    Ok(typed.data)
}
