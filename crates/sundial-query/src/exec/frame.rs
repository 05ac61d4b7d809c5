//! The unit of a scan's work: a run of one partition's rows, or chosen rows of it.

use std::ops::Range;
use std::sync::Arc;

/// Rows `rows` of partition `partition` of a snapshot: all of them, or only `picks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub partition: usize,
    pub rows: Range<u64>,
    /// The rows of `rows` to read, ascending, when an index chose them (see `index_scan`).
    pub picks: Option<Arc<[u32]>>,
}

impl Frame {
    /// All rows `rows` of `partition`.
    pub fn range(partition: usize, rows: Range<u64>) -> Frame {
        Frame {
            partition,
            rows,
            picks: None,
        }
    }

    /// How many rows the frame reads.
    pub fn len(&self) -> u64 {
        match &self.picks {
            Some(picks) => picks.len() as u64,
            None => self.rows.end - self.rows.start,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frame's rows from the `from`-th to before the `to`-th it reads.
    pub(crate) fn slice(&self, from: u64, to: u64) -> Frame {
        match &self.picks {
            Some(picks) => {
                let picks = &picks[from as usize..to as usize];
                Frame {
                    partition: self.partition,
                    rows: picks.first().map_or(0, |r| *r as u64)
                        ..picks.last().map_or(0, |r| *r as u64 + 1),
                    picks: Some(picks.into()),
                }
            }
            None => Frame::range(self.partition, self.rows.start + from..self.rows.start + to),
        }
    }
}
