//! What the operators that replace DataFusion's partial aggregate share: a single-stage
//! aggregate split into a partial stage and a final one above it, and the partial states'
//! column types checked against what DataFusion's partial aggregate writes.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::error::Result as DfResult;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};

/// `aggregate` with its partial stage done by the operator `try_fuse` makes of it, if any: a
/// partial aggregate is replaced; a single-stage one is split (see [`partial_of`]) and
/// `finish_single` puts the fused partial stage under what completes the answer (usually
/// [`final_over`]). Aggregates with a limit, and final ones, are left alone.
pub(crate) fn fuse_partial_stage<E: ExecutionPlan + 'static>(
    aggregate: &AggregateExec,
    try_fuse: impl Fn(&AggregateExec) -> DfResult<Option<E>>,
    finish_single: impl FnOnce(
        E,
        &AggregateExec,
        &AggregateExec,
    ) -> DfResult<Option<Arc<dyn ExecutionPlan>>>,
) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    if aggregate.limit_options().is_some() {
        return Ok(None);
    }
    match aggregate.mode() {
        AggregateMode::Partial => Ok(try_fuse(aggregate)?.map(|e| Arc::new(e) as _)),
        AggregateMode::Single | AggregateMode::SinglePartitioned => {
            let partial = partial_of(aggregate)?;
            match try_fuse(&partial)? {
                Some(fused) => finish_single(fused, &partial, aggregate),
                None => Ok(None),
            }
        }
        _ => Ok(None),
    }
}

/// The partial stage of single-stage `single`: the same groups, aggregates and input.
fn partial_of(single: &AggregateExec) -> DfResult<AggregateExec> {
    AggregateExec::try_new(
        AggregateMode::Partial,
        single.group_expr().clone(),
        single.aggr_expr().to_vec(),
        single.filter_expr().to_vec(),
        single.input().clone(),
        single.input_schema(),
    )
}

/// The final stage above `states`, an operator that writes `partial`'s states (the partial
/// stage of `single`): it answers as `single` does.
pub(crate) fn final_over(
    partial: &AggregateExec,
    single: &AggregateExec,
    states: Arc<dyn ExecutionPlan>,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    Ok(Arc::new(AggregateExec::try_new(
        AggregateMode::Final,
        partial.group_expr().as_final(),
        partial.aggr_expr().to_vec(),
        single.filter_expr().to_vec(),
        states,
        single.input_schema(),
    )?))
}

/// Whether the partial schema `schema` holds columns of types `states` from position `at`:
/// the position after them if so.
pub(crate) fn states_at(schema: &SchemaRef, at: usize, states: &[DataType]) -> Option<usize> {
    let written = schema.fields().get(at..at + states.len())?;
    written
        .iter()
        .zip(states)
        .all(|(field, state)| field.data_type() == state)
        .then_some(at + states.len())
}
