//! `SELECT DISTINCT k FROM t` (and `GROUP BY k` with no aggregate) from a last-value cache
//! keyed by `k`: the cache holds a row per key, so the distinct keys are its rows' keys.
//! Grafana's template variables send exactly this, on every dashboard load.
//!
//! ```text
//!  Aggregate(group by k.., no aggregates)          Aggregate(group by k.., no aggregates)
//!    [Projection of columns]                          [Projection of columns]
//!    TableScan(t: SundialTable, [k..], no filter) ──▶  TableScan(t: DistinctKeys, [k..])
//!                                                       DistinctKeysExec: the cache's rows,
//!                                                       else the table scan planned beside
//! ```
//!
//! The rule ([`DistinctKeysRule`], a logical optimizer rule, so it sees the scan after
//! projections are pushed into it) applies when every column the scan reads is a key of one
//! of the table's caches and the scan has no filter. [`DistinctKeys`] plans the ordinary
//! scan too, and runs it instead when the cache cannot answer (it failed, or was dropped after
//! planning). Filters written above the DISTINCT stay above it: the provider accepts none.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::Result as DfResult;
use datafusion::common::tree_node::Transformed;
use datafusion::datasource::{TableProvider, TableType, provider_as_source, source_as_provider};
use datafusion::logical_expr::{
    Aggregate, Expr, LogicalPlan, Projection, TableProviderFilterPushDown, TableScan,
};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};
use datafusion::physical_plan::ExecutionPlan;
use sundial_storage::{Table, TableMeta};

use crate::exec::distinct_keys::DistinctKeysExec;
use crate::last_values::LastValues;
use crate::provider::SundialTable;

/// Puts [`DistinctKeys`] under aggregates without aggregate functions over a table's cache
/// keys.
#[derive(Debug)]
pub(crate) struct DistinctKeysRule;

impl OptimizerRule for DistinctKeysRule {
    fn name(&self) -> &str {
        "sundial_distinct_keys"
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        plan.transform_up_with_subqueries(to_distinct_keys)
    }
}

fn to_distinct_keys(plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::Aggregate(aggregate) = &plan else {
        return Ok(Transformed::no(plan));
    };
    if !aggregate.aggr_expr.is_empty() {
        return Ok(Transformed::no(plan));
    }
    let Some(input) = with_keys_scan(&aggregate.input)? else {
        return Ok(Transformed::no(plan));
    };
    let rewritten = Aggregate::try_new(
        Arc::new(input),
        aggregate.group_expr.clone(),
        aggregate.aggr_expr.clone(),
    )?;
    Ok(Transformed::yes(LogicalPlan::Aggregate(rewritten)))
}

/// `input` (projections of columns over a table scan) with the scan reading the distinct
/// keys, if a cache holds them.
fn with_keys_scan(input: &LogicalPlan) -> DfResult<Option<LogicalPlan>> {
    match input {
        LogicalPlan::Projection(p) if p.expr.iter().all(is_column) => {
            let Some(inner) = with_keys_scan(&p.input)? else {
                return Ok(None);
            };
            Ok(Some(LogicalPlan::Projection(Projection::try_new(
                p.expr.clone(),
                Arc::new(inner),
            )?)))
        }
        LogicalPlan::TableScan(scan) => keys_scan(scan),
        _ => Ok(None),
    }
}

fn is_column(e: &Expr) -> bool {
    match e {
        Expr::Column(_) => true,
        Expr::Alias(a) => is_column(&a.expr),
        _ => false,
    }
}

/// `scan` reading from [`DistinctKeys`], if it reads only keys of one of the table's caches,
/// unfiltered.
fn keys_scan(scan: &TableScan) -> DfResult<Option<LogicalPlan>> {
    if !scan.filters.is_empty() || scan.fetch.is_some() {
        return Ok(None);
    }
    let provider = source_as_provider(&scan.source)?;
    let Some(table) = provider.downcast_ref::<SundialTable>() else {
        return Ok(None);
    };
    let meta = table.planned_meta();
    let Some(projection) = &scan.projection else {
        return Ok(None);
    };
    let columns: Vec<u32> = projection.iter().map(|&i| meta.columns[i].id).collect();
    if columns.is_empty()
        || table
            .last_values()
            .for_distinct(table.table(), &columns)
            .is_none()
    {
        return Ok(None);
    }
    let source = DistinctKeys {
        table: table.table().clone(),
        planned: meta.clone(),
        caches: table.last_values().clone(),
        inner: provider.clone(),
        columns,
    };
    let mut new_scan = TableScan::clone(scan);
    new_scan.source = provider_as_source(Arc::new(source));
    Ok(Some(LogicalPlan::TableScan(new_scan)))
}

/// A table read for its distinct keys: from a last-value cache when it can answer.
#[derive(Debug)]
pub(crate) struct DistinctKeys {
    table: Arc<Table>,
    planned: Arc<TableMeta>,
    caches: Arc<LastValues>,
    /// The table's own provider (a [`SundialTable`]), which plans the scan run without cache.
    inner: Arc<dyn TableProvider>,
    /// The ids of the columns read, all keys of a cache.
    columns: Vec<u32>,
}

#[async_trait]
impl TableProvider for DistinctKeys {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(vec![
            TableProviderFilterPushDown::Unsupported;
            filters.len()
        ])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let fallback = self.inner.scan(state, projection, filters, limit).await?;
        let projection = projection
            .cloned()
            .unwrap_or_else(|| (0..self.inner.schema().fields().len()).collect());
        let output = Arc::new(self.inner.schema().project(&projection)?);
        Ok(Arc::new(DistinctKeysExec::new(
            (self.table.clone(), self.planned.clone()),
            self.caches.clone(),
            (self.columns.clone(), projection, output),
            fallback,
        )))
    }
}
