//! Physical plans kept for reuse: a prepared or shared plan (see `plan_cache`) is planned into
//! a physical plan once, and each run binds that plan to its values and the newest rows
//! instead of running DataFusion's physical planner and optimizer again.
//!
//! ```text
//! first run:  logical plan with $1.. ──▶ physical planner, this run's values in scope
//!               ──▶ physical plan ──▶ runs
//!                        └── unbound (scans drop their rows) ──▶ kept
//! later runs: kept ──bind(values)──▶ scans: newest snapshot, filters with the values
//!                                    other nodes: fresh state (metrics, dynamic filters)
//!                  ──▶ runs
//! ```
//!
//! A plan is kept only if it can be bound: the planner placed every placeholder in a scan's
//! filters (a placeholder anywhere else fails to plan), and every leaf reads the newest rows
//! at each run (a Sundial scan, a LATEST search) or is constant. Scans planned for reuse
//! report estimated row counts, so no optimizer rule turns a count into a constant. A run
//! whose values do not suit the kept plan (see [`SundialScanExec::bound`]) is planned afresh.

use std::sync::Arc;

use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;

use super::distinct_keys::DistinctKeysExec;
use super::latest::LatestExec;
use super::scan::SundialScanExec;
pub(crate) use super::values::plan_for_reuse;

/// Whether `plan` can be kept and bound for each run (see the module docs).
pub(crate) fn is_reusable(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let children = plan.children();
    if !children.is_empty() {
        return children.into_iter().all(is_reusable);
    }
    plan.downcast_ref::<SundialScanExec>().is_some()
        || plan.downcast_ref::<LatestExec>().is_some()
        || plan
            .downcast_ref::<DistinctKeysExec>()
            .is_some_and(|d| is_reusable(d.fallback()))
        || plan.downcast_ref::<EmptyExec>().is_some()
        || plan.downcast_ref::<PlaceholderRowExec>().is_some()
}

/// `plan` ready for a run with `values`, or with none, unbound for keeping (its scans hold
/// no rows). `None` if the values do not suit the plan: the run must be planned afresh.
///
/// Nodes keep their properties: a bound scan has its kept scan's partitioning and order.
pub(crate) fn bind(
    plan: &Arc<dyn ExecutionPlan>,
    values: Option<&[ScalarValue]>,
) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(scan) = plan.downcast_ref::<SundialScanExec>() {
        return Ok(scan
            .bound(values)?
            .map(|s| Arc::new(s) as Arc<dyn ExecutionPlan>));
    }
    if let Some(distinct) = plan.downcast_ref::<DistinctKeysExec>() {
        let Some(fallback) = bind(distinct.fallback(), values)? else {
            return Ok(None);
        };
        return Ok(Some(Arc::new(distinct.with_fallback(fallback))));
    }
    let children = plan.children();
    let node = if children.is_empty() {
        plan.clone()
    } else {
        let mut bound = Vec::with_capacity(children.len());
        for child in children {
            let Some(child) = bind(child, values)? else {
                return Ok(None);
            };
            bound.push(child);
        }
        plan.clone().replace_children(
            bound,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep),
        )?
    };
    // Fresh metrics and dynamic filters: a run must not see another run's state.
    Ok(Some(node.reset_state()?))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::util::pretty::pretty_format_batches;

    use super::*;
    use crate::Engine;

    async fn rows(engine: &Engine, sql: &str, params: Vec<ScalarValue>) -> String {
        let prepared = engine.prepare(sql).await.expect(sql);
        run(engine, &prepared, params).await
    }

    async fn run(engine: &Engine, prepared: &crate::Prepared, params: Vec<ScalarValue>) -> String {
        let output = engine.run_prepared(prepared, params).await.expect("run");
        let collected = crate::collect(output).await.expect("collect");
        pretty_format_batches(&collected.batches)
            .expect("format")
            .to_string()
    }

    /// How the statement's physical plan is kept: `untried`, `kept` or `never`.
    async fn kept(engine: &Engine, sql: &str) -> String {
        let prepared = format!("{:?}", engine.prepare(sql).await.expect(sql));
        let at = prepared.find("KeptPhysical(").expect("kept state") + "KeptPhysical(".len();
        prepared[at..].split(')').next().expect("state").to_string()
    }

    async fn engines() -> [(Engine, tempfile::TempDir); 2] {
        let fresh = crate::exec::scan::tests::engine();
        let mut planned_each_time = crate::exec::scan::tests::engine();
        planned_each_time.0.set_plan_cache_entries_max(0);
        for (engine, _) in [&fresh, &planned_each_time] {
            for sql in [
                "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, v DOUBLE), INDEX(k) TIMESTAMP(ts) \
                 PARTITION BY HOUR",
                "INSERT INTO t SELECT to_timestamp_seconds(1451606400 + value * 5), \
                 'k' || (value % 4), value FROM generate_series(0, 2999)",
            ] {
                rows(engine, sql, vec![]).await;
            }
        }
        [fresh, planned_each_time]
    }

    /// Runs of one shape bind the plan its first run kept, and answer as plans made for
    /// their own values do, rows committed since included.
    #[tokio::test]
    async fn kept_plans_answer_each_run() {
        let [(engine, _a), (reference, _b)] = engines().await;
        let shape = |k: u32, from: u32, to: u32| {
            format!(
                "SELECT ts, max(v), count(*) FROM t WHERE k IN ('k{k}') AND \
                 ts >= '2016-01-01T0{from}:00:00Z' AND ts < '2016-01-01T0{to}:00:00Z' \
                 SAMPLE BY 20m"
            )
        };
        let count = "SELECT count(*) FROM t";
        let runs = [
            shape(1, 0, 1),
            shape(2, 1, 4),
            shape(3, 3, 5),
            shape(0, 2, 3),
        ];
        for sql in runs.iter().chain([&count.to_string()]) {
            assert_eq!(
                rows(&engine, sql, vec![]).await,
                rows(&reference, sql, vec![]).await,
                "{sql}"
            );
        }
        assert_eq!(kept(&engine, &runs[0]).await, "kept");
        assert_eq!(kept(&engine, count).await, "kept");
        let insert = "INSERT INTO t SELECT to_timestamp_seconds(1451606400 + value * 5 + 2), \
                      'k1', value FROM generate_series(0, 99)";
        rows(&engine, insert, vec![]).await;
        rows(&reference, insert, vec![]).await;
        // A count kept as a constant, or a scan of the old snapshot, would miss these.
        for sql in [&runs[0], &count.to_string()] {
            assert_eq!(
                rows(&engine, sql, vec![]).await,
                rows(&reference, sql, vec![]).await,
                "{sql}"
            );
        }
        assert!(rows(&engine, count, vec![]).await.contains("| 3100 "));
    }

    /// A kept plan takes any value: one that bounds nothing (NULL) is tested row by row, as
    /// is a filter the scan's bounds and indexes do not apply.
    #[tokio::test]
    async fn kept_plans_take_any_value() {
        let [(engine, _a), (reference, _b)] = engines().await;
        let sql = "SELECT count(*) FROM t WHERE ts >= $1";
        let prepared = engine.prepare(sql).await.expect(sql);
        let at = |v: Option<i64>| vec![ScalarValue::TimestampNanosecond(v, None)];
        for value in [Some(1_451_610_000_000_000_000), None, Some(0)] {
            assert_eq!(
                run(&engine, &prepared, at(value)).await,
                rows(&reference, sql, at(value)).await,
                "{value:?}"
            );
        }
        assert!(format!("{prepared:?}").contains("KeptPhysical(kept)"));
        assert!(run(&engine, &prepared, at(None)).await.contains("| 0 "));
        let tested = "SELECT count(*), min(v) FROM t WHERE v > $1 AND k = $2";
        let prepared = engine.prepare(tested).await.expect(tested);
        for (v, k) in [(Some(10.5), "k3"), (None, "k1"), (Some(2000.0), "k2")] {
            let values = vec![ScalarValue::Float64(v), ScalarValue::from(k)];
            assert_eq!(
                run(&engine, &prepared, values.clone()).await,
                rows(&reference, tested, values).await,
                "{v:?}"
            );
        }
        assert!(format!("{prepared:?}").contains("KeptPhysical(kept)"));
    }
}
