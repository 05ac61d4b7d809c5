//! LATEST ON/BY over SYMBOL keys as a planner extension: the dialect marks the SELECT's WHERE,
//! this rule turns the marked filter and the table under it into one scan of the newest row
//! per key ([`LatestTable`]), with the rest of the WHERE as that scan's filter.
//!
//! ```text
//!  sundial_sql::questdb     SELECT .. FROM t [AS a] WHERE __sundial_latest_by(k, ..) AND f
//!        │ planned by DataFusion
//!  Filter(marker AND f) ─ [SubqueryAlias a] ─ TableScan(t: SundialTable)
//!        │ LatestRule (analyzer)
//!  [SubqueryAlias a] ─ TableScan(t: LatestTable { keys, filter: f })
//!        │ scan
//!  LatestExec (exec::latest): backward search, f applied to each row before it counts
//! ```
//!
//! The filter travels as an expression, resolved by DataFusion's planner like any WHERE; it
//! is evaluated before a row counts as its key's latest. Filters written around the query
//! apply to the result: [`LatestTable`] accepts no pushed-down filters.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DataFusionError, Result as DfResult};
use datafusion::config::ConfigOptions;
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    Expr, LogicalPlan, ScalarUDF, SubqueryAlias, TableScanBuilder, TypeSignature,
};
use datafusion::optimizer::analyzer::AnalyzerRule;
use sundial_sql::names::LATEST_BY_MARKER;
use sundial_storage::ColumnType;

use crate::exec::latest::LatestTable;
use crate::provider::SundialTable;

/// The marker function, which the session must know for the marked SQL to plan.
pub(crate) fn marker_function() -> ScalarUDF {
    crate::marker::marker(
        LATEST_BY_MARKER,
        TypeSignature::VariadicAny,
        "LATEST ON/BY belongs after a SELECT's FROM and WHERE",
    )
}

/// Turns each marked filter over a Sundial table into a [`LatestTable`] scan.
#[derive(Debug)]
pub(crate) struct LatestRule;

impl AnalyzerRule for LatestRule {
    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(to_latest_scan)
            .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "sundial_latest"
    }
}

fn to_latest_scan(plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::Filter(filter) = &plan else {
        return Ok(Transformed::no(plan));
    };
    let conjuncts = split_conjunction(&filter.predicate);
    let Some(at) = conjuncts.iter().position(|e| is_marker(e)) else {
        return Ok(Transformed::no(plan));
    };
    let Expr::ScalarFunction(marker) = conjuncts[at] else {
        return Ok(Transformed::no(plan));
    };
    let rest: Vec<Expr> = conjuncts
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != at)
        .map(|(_, e)| unqualified((*e).clone()))
        .collect::<DfResult<_>>()?;
    if rest.iter().any(mentions_marker) {
        return Err(misplaced());
    }
    let scan = latest_input(&filter.input, &marker.args, conjunction(rest))?;
    Ok(Transformed::yes(scan))
}

/// The filter's input with its table scan reading the latest rows instead.
fn latest_input(input: &LogicalPlan, keys: &[Expr], filter: Option<Expr>) -> DfResult<LogicalPlan> {
    match input {
        LogicalPlan::SubqueryAlias(alias) => {
            let inner = latest_input(&alias.input, keys, filter)?;
            Ok(LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(
                Arc::new(inner),
                alias.alias.clone(),
            )?))
        }
        LogicalPlan::TableScan(scan) if scan.filters.is_empty() && scan.fetch.is_none() => {
            let provider = source_as_provider(&scan.source)?;
            let Some(table) = provider.downcast_ref::<SundialTable>() else {
                return Err(misplaced());
            };
            let meta = table.planned_meta();
            let keys = keys
                .iter()
                .map(|k| symbol_column(k, meta))
                .collect::<DfResult<Vec<_>>>()?;
            let latest = LatestTable::new(
                (
                    table.table().clone(),
                    table.indexes().clone(),
                    table.last_values().clone(),
                ),
                meta.clone(),
                keys,
                filter,
            )?;
            let scan = TableScanBuilder::new(
                scan.table_name.clone(),
                provider_as_source(Arc::new(latest)),
            )
            .with_projection(scan.projection.clone())
            .build()?;
            Ok(LogicalPlan::TableScan(scan))
        }
        _ => Err(misplaced()),
    }
}

/// The position of the SYMBOL column `key` names.
fn symbol_column(key: &Expr, meta: &sundial_storage::TableMeta) -> DfResult<usize> {
    let Expr::Column(column) = key else {
        return Err(DataFusionError::Plan(format!(
            "LATEST ON/BY: '{key}' is not a column"
        )));
    };
    meta.column_index(&column.name)
        .filter(|&i| meta.columns[i].column_type == ColumnType::Symbol)
        .ok_or_else(|| {
            DataFusionError::Plan(format!(
                "LATEST ON/BY: '{}' is not a SYMBOL column of '{}'",
                column.name, meta.name
            ))
        })
}

/// `e` with its columns named without qualifier: it is evaluated on the table's own rows.
fn unqualified(e: Expr) -> DfResult<Expr> {
    e.transform(|e| match e {
        Expr::Column(c) if c.relation.is_some() => Ok(Transformed::yes(Expr::Column(
            Column::new_unqualified(c.name),
        ))),
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
}

fn is_marker(e: &Expr) -> bool {
    matches!(e, Expr::ScalarFunction(f) if f.name() == LATEST_BY_MARKER)
}

fn mentions_marker(e: &Expr) -> bool {
    e.exists(|e| Ok(is_marker(e))).unwrap_or(true)
}

fn misplaced() -> DataFusionError {
    DataFusionError::Plan(
        "LATEST ON/BY: the clause must follow a SELECT from one table, after its WHERE".into(),
    )
}
