//! Subqueries a statement reads more than once, computed once per run: a CTE named in two
//! places, and the sampled query that SAMPLE BY ... FILL reads three times (for the grid's
//! bounds, its keys and the rows, see `sundial_sql`'s `questdb::fill`). PostgreSQL
//! materialises such a CTE too; DataFusion copies its plan into every place.
//!
//! ```text
//!  ShareRepeats (analyzer, last)   SubqueryAlias a ─ X   (X reads a table and combines
//!                                  SubqueryAlias a ─ X    rows; the same X under two or
//!                                                         more aliases)
//!        ▼
//!  SubqueryAlias a ─ Shared{id} ─ X     (each place; X optimised alike in each)
//!        │ SharedPlanner: one SharedSlot per id and planning
//!        ▼
//!  SharedExec{slot} ─ X'   the first to run computes X' and keeps its batches (bounded);
//!  SharedExec{slot} ─ X'   the others read them; past the bound each runs its own X'
//! ```
//!
//! The node hides its input from the optimizer's pushdowns (an extension node asks for all
//! its input's columns and takes no filter or limit), so every copy of X is optimised into the
//! same plan.

use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchemaRef, HashMap};
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{
    Expr, Extension, LogicalPlan, SubqueryAlias, UserDefinedLogicalNode, UserDefinedLogicalNodeCore,
};
use datafusion::optimizer::analyzer::AnalyzerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{ExtensionPlanner, PhysicalPlanner};

use crate::exec::shared::{SharedExec, SharedSlot};

/// Shares repeated subqueries (see the module docs). Runs after every other analyzer rule.
#[derive(Debug)]
pub(crate) struct ShareRepeats;

impl AnalyzerRule for ShareRepeats {
    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> DfResult<LogicalPlan> {
        let mut seen: HashMap<LogicalPlan, usize> = HashMap::new();
        plan.apply(|node| {
            if let LogicalPlan::SubqueryAlias(alias) = node
                && worth_sharing(&alias.input)
            {
                *seen.entry(alias.input.as_ref().clone()).or_default() += 1;
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        seen.retain(|_, count| *count > 1);
        if seen.is_empty() {
            return Ok(plan);
        }
        // Ids in order of first appearance.
        let mut ids: HashMap<LogicalPlan, usize> = HashMap::new();
        plan.transform_down(|node| {
            let LogicalPlan::SubqueryAlias(alias) = &node else {
                return Ok(Transformed::no(node));
            };
            if !seen.contains_key(alias.input.as_ref()) {
                return Ok(Transformed::no(node));
            }
            let next = ids.len();
            let id = *ids.entry(alias.input.as_ref().clone()).or_insert(next);
            let shared = LogicalPlan::Extension(Extension {
                node: Arc::new(Shared {
                    id,
                    input: alias.input.as_ref().clone(),
                }),
            });
            let wrapped = SubqueryAlias::try_new(Arc::new(shared), alias.alias.clone())?;
            // What the shared copy holds is computed once with it: no need to look inside.
            Ok(Transformed::new(
                LogicalPlan::SubqueryAlias(wrapped),
                true,
                TreeNodeRecursion::Jump,
            ))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "sundial_share_repeats"
    }
}

/// Whether computing `plan` once saves work: it reads a table (sharing a constant saves
/// nothing) and combines rows (an aggregate, join, window, sort, DISTINCT or union). A table's
/// rows, filtered or not, are read again from its mapped files faster than they are kept.
fn worth_sharing(plan: &LogicalPlan) -> bool {
    let reads_table = plan
        .exists(|p| Ok(matches!(p, LogicalPlan::TableScan(_))))
        .unwrap_or(false);
    let combines = plan
        .exists(|p| {
            Ok(matches!(
                p,
                LogicalPlan::Aggregate(_)
                    | LogicalPlan::Join(_)
                    | LogicalPlan::Window(_)
                    | LogicalPlan::Sort(_)
                    | LogicalPlan::Distinct(_)
                    | LogicalPlan::Union(_)
                    | LogicalPlan::Extension(_)
            ))
        })
        .unwrap_or(false);
    reads_table && combines
}

/// One place a repeated subquery is read; the places with one `id` share its rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub(crate) struct Shared {
    id: usize,
    input: LogicalPlan,
}

impl UserDefinedLogicalNodeCore for Shared {
    fn name(&self) -> &str {
        "Shared"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.input]
    }

    fn schema(&self) -> &DFSchemaRef {
        self.input.schema()
    }

    fn expressions(&self) -> Vec<Expr> {
        Vec::new()
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Shared: id={}", self.id)
    }

    fn with_exprs_and_inputs(&self, _: Vec<Expr>, inputs: Vec<LogicalPlan>) -> DfResult<Self> {
        let [input]: [LogicalPlan; 1] = inputs
            .try_into()
            .map_err(|_| DataFusionError::Internal("Shared has one input".into()))?;
        Ok(Shared { id: self.id, input })
    }
}

/// Plans [`Shared`] nodes: one [`SharedSlot`] per id for the plan being made.
#[derive(Default)]
pub(crate) struct SharedPlanner {
    slots: Mutex<HashMap<usize, Arc<SharedSlot>>>,
}

#[async_trait]
impl ExtensionPlanner for SharedPlanner {
    async fn plan_extension(
        &self,
        _: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        _: &[&LogicalPlan],
        inputs: &[Arc<dyn ExecutionPlan>],
        _: &dyn Session,
        _: &PhysicalPlanningContext,
    ) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
        let Some(shared) = node.as_any().downcast_ref::<Shared>() else {
            return Ok(None);
        };
        let [input] = inputs else {
            return Err(DataFusionError::Internal("Shared has one input".into()));
        };
        let slot = self
            .slots
            .lock()
            .map_err(|_| DataFusionError::Internal("shared slots poisoned".into()))?
            .entry(shared.id)
            .or_default()
            .clone();
        Ok(Some(Arc::new(SharedExec::new(
            shared.id,
            input.clone(),
            slot,
        ))))
    }
}

#[cfg(test)]
mod tests {
    use crate::exec::scan::tests::{engine_with, plan_and_rows};

    /// A CTE read twice and a filled SAMPLE BY compute their repeated subquery once, with
    /// the answers they gave unshared.
    #[tokio::test]
    async fn repeated_subqueries_are_computed_once() {
        let (engine, _dir) = engine_with(&[
            "CREATE TABLE t (s SYMBOL, v DOUBLE, ts TIMESTAMP) TIMESTAMP(ts) PARTITION BY DAY",
            "INSERT INTO t VALUES ('a', 1.0, '2024-01-01T00:10:00Z'), \
             ('b', 2.0, '2024-01-01T00:20:00Z'), ('a', 3.0, '2024-01-01T02:30:00Z'), \
             ('b', 5.0, '2024-01-01T03:40:00Z')",
        ])
        .await;
        let (plan, rows) = plan_and_rows(
            &engine,
            "WITH c AS (SELECT s, sum(v) AS total FROM t GROUP BY s) \
             SELECT a.s, a.total, b.total FROM c a JOIN c b ON a.s = b.s ORDER BY a.s",
        )
        .await;
        assert_eq!(plan.matches("SharedExec").count(), 2, "{plan}");
        assert!(rows.contains("| a | 4.0   | 4.0     |"), "{rows}");
        assert!(rows.contains("| b | 7.0   | 7.0     |"), "{rows}");
        // Computed once: both places see the same random values (as PostgreSQL, which
        // materialises the CTE), so each row meets only itself.
        let (_, rows) = plan_and_rows(
            &engine,
            "WITH c AS (SELECT s, max(v) * random() AS r FROM t GROUP BY s) \
             SELECT count(*) AS n FROM c a JOIN c b ON a.r = b.r",
        )
        .await;
        assert!(rows.contains("| 2 |"), "{rows}");
        // A table read twice (a self-join) is not kept: its mapped rows are read again.
        let (plan, _) = plan_and_rows(
            &engine,
            "SELECT count(*) FROM t a JOIN t b ON a.s = b.s WHERE a.v < b.v",
        )
        .await;
        assert!(!plan.contains("SharedExec"), "{plan}");
        // Read once: no sharing.
        let (plan, _) = plan_and_rows(
            &engine,
            "WITH c AS (SELECT s, sum(v) AS total FROM t GROUP BY s) SELECT * FROM c",
        )
        .await;
        assert!(!plan.contains("SharedExec"), "{plan}");
        let (plan, rows) = plan_and_rows(
            &engine,
            "SELECT ts, s, sum(v) FROM t SAMPLE BY 1h FILL(PREV)",
        )
        .await;
        assert!(plan.contains("SharedExec"), "{plan}");
        // Four hours for each of two keys, the empty ones filled from the key's previous.
        assert_eq!(
            rows.lines().filter(|l| l.starts_with("| 2024")).count(),
            8,
            "{rows}"
        );
        assert!(rows.contains("| 2024-01-01T01:00:00 | a | 1.0"), "{rows}");
    }
}
