//! Result column names as QuestDB gives them: an unaliased aggregate over a table's column is
//! named without the table's qualifier (`max(usage_user)`, not `max(cpu.usage_user)`), and
//! `count(*)` is `count`. A name that would then clash with another result column keeps
//! DataFusion's.

use std::collections::HashSet;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, Result as DfResult};
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder};

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
    let mut qualifiers = HashSet::new();
    plan.apply(|node| {
        match node {
            LogicalPlan::TableScan(scan) => {
                qualifiers.insert(scan.table_name.table().to_string());
            }
            LogicalPlan::SubqueryAlias(alias) => {
                qualifiers.insert(alias.alias.table().to_string());
            }
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let schema = plan.schema().clone();
    let names: Vec<&String> = schema.fields().iter().map(|f| f.name()).collect();
    let mut renamed: Vec<String> = schema
        .iter()
        .map(|(qualifier, field)| match qualifier {
            Some(_) => field.name().clone(),
            None => short_name(field.name(), &qualifiers),
        })
        .collect();
    for i in 0..renamed.len() {
        let clashes = renamed
            .iter()
            .enumerate()
            .any(|(j, n)| j != i && *n == renamed[i])
            || names
                .iter()
                .enumerate()
                .any(|(j, n)| j != i && **n == renamed[i]);
        if clashes {
            renamed[i] = names[i].clone();
        }
    }
    if renamed.iter().zip(&names).all(|(a, b)| a == *b) {
        return Ok(plan);
    }
    let exprs: Vec<Expr> = schema
        .iter()
        .zip(renamed)
        .map(|((qualifier, field), name)| {
            let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
            if name == *field.name() {
                column
            } else {
                column.alias(name)
            }
        })
        .collect();
    LogicalPlanBuilder::from(plan).project(exprs)?.build()
}

/// `name` without the qualifiers of the plan's tables inside a call, and `count(*)` as `count`.
fn short_name(name: &str, qualifiers: &HashSet<String>) -> String {
    if name == "count(*)" {
        return "count".into();
    }
    if !name.contains('(') {
        return name.to_string();
    }
    let mut out = name.to_string();
    for q in qualifiers {
        for before in ["(", " ", ","] {
            out = out.replace(&format!("{before}{q}."), before);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualifiers_leave_calls() {
        let q: HashSet<String> = ["cpu".to_string(), "t".to_string()].into();
        assert_eq!(short_name("max(cpu.usage_user)", &q), "max(usage_user)");
        assert_eq!(short_name("count(*)", &q), "count");
        assert_eq!(short_name("sum(t.a + t.b)", &q), "sum(a + b)");
        assert_eq!(short_name("corr(cpu.a,cpu.b)", &q), "corr(a,b)");
        assert_eq!(short_name("max(other.v)", &q), "max(other.v)");
        assert_eq!(short_name("cpu.v", &q), "cpu.v");
    }
}
