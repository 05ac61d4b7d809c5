//! `SharedExec`: one place a repeated subquery is read (see `crate::shared`). The places of
//! one subquery hold one [`SharedSlot`]; in each run (one `TaskContext`) the first place to
//! run computes its input and keeps the batches, and the others read them.
//!
//! Invariants:
//! * The kept batches are bounded ([`SHARED_BYTES_MAX`], and the query's memory pool): past
//!   the bound the first place returns what it read followed by the rest of its input, and
//!   every other place runs its own input, as if nothing were shared.
//! * A run's entry lives until every place that ran has finished reading it, or its
//!   `TaskContext` is gone (pruned at the slot's next use).
//! * Every place's input is the same logical plan, planned alike, so its rows are the same;
//!   each place returns them under its own schema (field names may differ, types may not).

use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{
    Boundedness, EmissionType, ReplaceChildrenOptions,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use tokio::sync::OnceCell;

/// Bytes of batches a shared subquery keeps for the places that read it after the first.
pub(crate) const SHARED_BYTES_MAX: usize = 64 << 20;

/// What the first place to run left for the others.
enum Outcome {
    /// The input's batches, and the memory they hold.
    Rows {
        batches: Vec<RecordBatch>,
        _reservation: MemoryReservation,
    },
    /// Too many to keep: each place runs its own input.
    Unshared,
}

/// One run's share: set once by the first place to run.
struct Run {
    context: Weak<TaskContext>,
    outcome: Arc<OnceCell<Outcome>>,
    /// Places that started reading this run's share and have not finished.
    readers: usize,
}

/// The share of the places of one repeated subquery, per run.
#[derive(Default)]
pub(crate) struct SharedSlot {
    runs: Mutex<Vec<Run>>,
}

impl fmt::Debug for SharedSlot {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("SharedSlot")
    }
}

impl SharedSlot {
    /// The share of the run `context` belongs to, counted as read by one more place.
    fn enter(&self, context: &Arc<TaskContext>) -> DfResult<Arc<OnceCell<Outcome>>> {
        let mut runs = self.lock()?;
        runs.retain(|r| r.context.strong_count() > 0);
        if let Some(run) = runs
            .iter_mut()
            .find(|r| std::ptr::eq(r.context.as_ptr(), Arc::as_ptr(context)))
        {
            run.readers += 1;
            return Ok(run.outcome.clone());
        }
        let outcome = Arc::new(OnceCell::new());
        runs.push(Run {
            context: Arc::downgrade(context),
            outcome: outcome.clone(),
            readers: 1,
        });
        Ok(outcome)
    }

    /// One place of the run has finished reading: the last one drops the share.
    fn leave(&self, outcome: &Arc<OnceCell<Outcome>>) {
        let Ok(mut runs) = self.lock() else {
            return;
        };
        if let Some(at) = runs.iter().position(|r| Arc::ptr_eq(&r.outcome, outcome)) {
            runs[at].readers -= 1;
            if runs[at].readers == 0 {
                runs.swap_remove(at);
            }
        }
    }

    fn lock(&self) -> DfResult<std::sync::MutexGuard<'_, Vec<Run>>> {
        self.runs
            .lock()
            .map_err(|_| DataFusionError::Internal("a shared subquery's slot is poisoned".into()))
    }
}

#[derive(Debug)]
pub(crate) struct SharedExec {
    id: usize,
    input: Arc<dyn ExecutionPlan>,
    slot: Arc<SharedSlot>,
    properties: Arc<PlanProperties>,
}

impl SharedExec {
    pub(crate) fn new(id: usize, input: Arc<dyn ExecutionPlan>, slot: Arc<SharedSlot>) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(input.schema()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        SharedExec {
            id,
            input,
            slot,
            properties,
        }
    }
}

impl DisplayAs for SharedExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "SharedExec: id={}", self.id)
    }
}

impl ExecutionPlan for SharedExec {
    fn name(&self) -> &'static str {
        "SharedExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        vec![Distribution::SinglePartition]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        _: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let [input]: [Arc<dyn ExecutionPlan>; 1] = children
            .try_into()
            .map_err(|_| DataFusionError::Internal("SharedExec has one child".into()))?;
        // The same slot: the places of the subquery still share.
        Ok(Arc::new(SharedExec::new(self.id, input, self.slot.clone())))
    }

    with_new_children_recomputing!();

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "SharedExec has one partition, asked for {partition}"
            )));
        }
        let outcome = self.slot.enter(&context)?;
        let input = self.input.clone();
        let schema = self.schema();
        let leaving = Leaving {
            slot: self.slot.clone(),
            outcome: outcome.clone(),
        };
        let batches = futures::stream::once(async move {
            let mut own: Option<SendableRecordBatchStream> = None;
            let own_slot = &mut own;
            let shared = outcome
                .get_or_try_init(|| async {
                    let (outcome, rest) = keep(&input, &context, SHARED_BYTES_MAX).await?;
                    *own_slot = rest;
                    Ok::<_, DataFusionError>(outcome)
                })
                .await?;
            let stream: futures::stream::BoxStream<'static, DfResult<RecordBatch>> =
                match (own, shared) {
                    // This place ran first and could not keep everything: its own rows.
                    (Some(own), _) => own.boxed(),
                    (None, Outcome::Rows { batches, .. }) => {
                        let batches = batches
                            .iter()
                            .map(|b| relabel(b, &schema))
                            .collect::<Vec<_>>();
                        futures::stream::iter(batches).boxed()
                    }
                    (None, Outcome::Unshared) => input.execute(0, context)?.boxed(),
                };
            // The share is left once this place's stream is done or dropped.
            Ok::<_, DataFusionError>(stream.map(move |b| {
                let _ = &leaving;
                b
            }))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            batches,
        )))
    }
}

/// Leaves the share when dropped (the place's stream is done or abandoned).
struct Leaving {
    slot: Arc<SharedSlot>,
    outcome: Arc<OnceCell<Outcome>>,
}

impl Drop for Leaving {
    fn drop(&mut self) {
        self.slot.leave(&self.outcome);
    }
}

/// Runs `input` and keeps its batches, up to `bytes_max`; past it, [`Outcome::Unshared`] and
/// the stream of what was read followed by the rest.
async fn keep(
    input: &Arc<dyn ExecutionPlan>,
    context: &Arc<TaskContext>,
    bytes_max: usize,
) -> DfResult<(Outcome, Option<SendableRecordBatchStream>)> {
    let mut stream = input.execute(0, context.clone())?;
    let reservation = MemoryConsumer::new("SharedExec").register(context.memory_pool());
    let mut batches = Vec::new();
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let bytes = batch.get_array_memory_size();
        if reservation.size() + bytes > bytes_max || reservation.try_grow(bytes).is_err() {
            batches.push(batch);
            let read = batches.into_iter().map(Ok).collect::<Vec<_>>();
            let schema = stream.schema();
            let rest = futures::stream::iter(read).chain(stream);
            let rest = Box::pin(RecordBatchStreamAdapter::new(schema, rest));
            return Ok((Outcome::Unshared, Some(rest)));
        }
        batches.push(batch);
    }
    Ok((
        Outcome::Rows {
            batches,
            _reservation: reservation,
        },
        None,
    ))
}

/// `batch` under `schema` (another place's names for the same columns).
fn relabel(batch: &RecordBatch, schema: &SchemaRef) -> DfResult<RecordBatch> {
    Ok(RecordBatch::try_new(
        schema.clone(),
        batch.columns().to_vec(),
    )?)
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::memory::MemorySourceConfig;

    use super::*;

    fn input(batches: usize) -> (Arc<dyn ExecutionPlan>, Vec<RecordBatch>) {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let batches: Vec<RecordBatch> = (0..batches as i64)
            .map(|b| {
                let values = Int64Array::from_iter_values(b * 100..b * 100 + 100);
                RecordBatch::try_new(schema.clone(), vec![Arc::new(values)]).expect("batch")
            })
            .collect();
        let plan = MemorySourceConfig::try_new_exec(std::slice::from_ref(&batches), schema, None)
            .expect("memory plan");
        (plan, batches)
    }

    /// Within the bound every batch is kept; past it the first reader still gets every
    /// batch, in order, and nothing is kept for the others.
    #[tokio::test]
    async fn kept_batches_are_bounded_and_never_lost() {
        let context = Arc::new(TaskContext::default());
        let (plan, batches) = input(5);
        let (outcome, rest) = keep(&plan, &context, usize::MAX).await.expect("keep");
        assert!(rest.is_none());
        let Outcome::Rows { batches: kept, .. } = outcome else {
            panic!("kept nothing")
        };
        assert_eq!(kept, batches);
        let one = batches[0].get_array_memory_size();
        for bytes_max in [0, one, 3 * one] {
            let (outcome, rest) = keep(&plan, &context, bytes_max).await.expect("keep");
            assert!(matches!(outcome, Outcome::Unshared), "{bytes_max}");
            let read: Vec<RecordBatch> = rest
                .expect("the first reader's rows")
                .try_collect()
                .await
                .expect("read");
            assert_eq!(read, batches, "{bytes_max}");
        }
    }
}
