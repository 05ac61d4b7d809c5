//! Frames narrowed by zone maps: runs of [`ZONE_ROWS`] rows whose ranges of values no row
//! of which can pass the scan's filter (see `sundial_storage::Snapshot::zones`) are cut out of
//! the scan's frames before any row is read.
//!
//! The filter is the scan's kernel predicate, or the conjuncts of its row filter that compile
//! into one; a zone without an entry, a column without zone maps and a test the zones cannot
//! decide all count as "may pass", so a frame is only ever cut where the filter passes no row.
//! Frames of rows an index picked are left whole.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use datafusion::error::Result as DfResult;
use sundial_kernels::{Predicate, Zone};
use sundial_storage::{Snapshot, ZONE_ROWS};

use super::frame::Frame;
use crate::error::external;

/// `frames` without the zones `predicate` (over the table columns `columns`, by position)
/// cannot pass, and how many rows were cut.
pub(crate) fn skip_zones(
    frames: Vec<Frame>,
    snapshot: &Snapshot,
    predicate: &Predicate,
    columns: &[usize],
) -> DfResult<(Vec<Frame>, u64)> {
    let mut tested = Vec::new();
    leaf_columns(predicate, &mut tested);
    tested.sort_unstable();
    tested.dedup();
    // Per partition, whether each complete zone may pass.
    let mut passing: HashMap<usize, Vec<bool>> = HashMap::new();
    let mut out = Vec::with_capacity(frames.len());
    let mut skipped = 0;
    for frame in frames {
        let zones_in_frame = frame.rows.start / ZONE_ROWS..frame.rows.end.div_ceil(ZONE_ROWS);
        let whole = snapshot
            .partitions()
            .get(frame.partition)
            .map_or(0, |p| p.row_count / ZONE_ROWS);
        if frame.picks.is_some() || zones_in_frame.start >= whole || tested.is_empty() {
            out.push(frame);
            continue;
        }
        let may = match passing.entry(frame.partition) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(zones_passing(
                snapshot,
                frame.partition,
                predicate,
                columns,
                &tested,
            )?),
        };
        let mut start = frame.rows.start;
        let mut kept_from = start;
        while start < frame.rows.end {
            let k = start / ZONE_ROWS;
            let end = ((k + 1) * ZONE_ROWS).min(frame.rows.end);
            if may.get(k as usize) == Some(&false) {
                if kept_from < start {
                    out.push(Frame::range(frame.partition, kept_from..start));
                }
                skipped += end - start;
                kept_from = end;
            }
            start = end;
        }
        if kept_from < frame.rows.end {
            out.push(Frame::range(frame.partition, kept_from..frame.rows.end));
        }
    }
    Ok((out, skipped))
}

/// Whether each complete zone of partition `partition` may hold a row `predicate` passes.
fn zones_passing(
    snapshot: &Snapshot,
    partition: usize,
    predicate: &Predicate,
    columns: &[usize],
    tested: &[usize],
) -> DfResult<Vec<bool>> {
    let zones: Vec<(usize, Vec<Option<Zone>>)> = tested
        .iter()
        .map(|&c| {
            let table_column = columns[c];
            snapshot
                .zones(partition, table_column)
                .map(|z| (c, z))
                .map_err(external)
        })
        .collect::<DfResult<_>>()?;
    let count = zones.first().map_or(0, |(_, z)| z.len());
    Ok((0..count)
        .map(|k| {
            predicate.may_pass(&mut |c| {
                zones
                    .iter()
                    .find(|(col, _)| *col == c)
                    .and_then(|(_, z)| z.get(k).copied().flatten())
            })
        })
        .collect())
}

/// The input columns `predicate`'s leaves test.
fn leaf_columns(predicate: &Predicate, out: &mut Vec<usize>) {
    match predicate {
        Predicate::Const(_) => {}
        Predicate::Leaf(leaf) => out.push(leaf.column),
        Predicate::And(parts) | Predicate::Or(parts) => {
            parts.iter().for_each(|p| leaf_columns(p, out))
        }
    }
}
