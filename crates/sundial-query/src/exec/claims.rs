//! The pieces of one run of a scan, handed out to its output partitions as each asks for the
//! next, for operators whose answer does not depend on which partition read which rows.
//!
//! With a fixed share per partition, a query lasts as long as its slowest share: a thread
//! woken late (an idle core of a virtual machine can take milliseconds to wake) or slowed by
//! another process leaves the other cores idle at the end. Taking pieces one at a time, the
//! first thread to run reads pieces until the others join, and all finish within one piece
//! of each other. QuestDB's workers take page frames from a queue the same way.
//!
//! Invariants:
//! * Each piece of a round goes to exactly one reader: its index comes from one counter.
//! * One reader's pieces come in ascending order, so each partition reads in scan order.
//! * The n-th execution of partition p reads round n, so a node executed again (a recursive
//!   query's next iteration) reads every piece again, whatever earlier rounds' readers took.
//!   A round is dropped once every partition has passed it (its readers keep it alive).
//! * Only the executions of one plan node share rounds: a copy of a node (another place in
//!   the plan, another run of a kept plan) starts with none, see [`Claims`]'s `Clone`.
//! * At most [`ROUNDS_OPEN_MAX`] rounds are open (a partition executed again and again
//!   while another never runs would keep them all): past that, no further round is made,
//!   and the executions of those rounds read their partitions' own frames. Whether a round
//!   is shared is decided once, so all of its readers agree.
//! * Float sums, whose rounding depends on the order they add in, are handed in per piece
//!   ([`Round::hand_in_sums`]); the round's last reader to finish adds them up in piece
//!   order, so the answer is the same whoever read which piece.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::frame::Frame;

/// Rounds kept open at once, past which executions read their own frames.
pub(crate) const ROUNDS_OPEN_MAX: usize = 16;

/// The rounds of one plan node's executions.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    rounds: Mutex<Rounds>,
}

/// A copy starts with no rounds: copies are other nodes, whose partitions must not take the
/// pieces this node's partitions read.
impl Clone for Claims {
    fn clone(&self) -> Self {
        Claims::default()
    }
}

#[derive(Debug, Default)]
struct Rounds {
    /// How many times each partition was executed: its next execution reads that round.
    executions: Vec<usize>,
    /// The number of the first round in `open`.
    first: usize,
    open: VecDeque<Arc<Round>>,
    /// The first round that was never made, once [`ROUNDS_OPEN_MAX`] were open: it and every
    /// later round read their partitions' own frames.
    unshared_from: Option<usize>,
}

/// One execution's pieces and the index of the next to hand out.
#[derive(Debug)]
pub(crate) struct Round {
    pieces: Vec<Frame>,
    next: AtomicUsize,
    /// The partitions reading the round: each hands in its sums once.
    readers: usize,
    sums: Mutex<HandedIn>,
}

/// Per aggregate, the sum of a piece's values and how many there were.
pub(crate) type PieceSums = Vec<(f64, u64)>;

/// The piece sums the round's readers have handed in.
#[derive(Debug, Default)]
struct HandedIn {
    /// How many readers have handed theirs in.
    readers_done: usize,
    pieces: Vec<(usize, PieceSums)>,
}

impl Round {
    /// The next piece nobody has taken, if any is left, and its index in scan order.
    pub(crate) fn take(&self) -> Option<(usize, Frame)> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.pieces.get(i).map(|piece| (i, piece.clone()))
    }

    /// Hands in one reader's sums of the pieces it took (by piece index). The last of the
    /// round's readers gets every piece's sums, in piece order, to add up in that order; the
    /// others get `None` (their share is in the last one's answer).
    pub(crate) fn hand_in_sums(&self, mine: Vec<(usize, PieceSums)>) -> Option<Vec<PieceSums>> {
        let mut handed = self.sums.lock().unwrap_or_else(|e| e.into_inner());
        handed.readers_done += 1;
        handed.pieces.extend(mine);
        assert!(
            handed.readers_done <= self.readers,
            "a round's readers hand in their sums once each"
        );
        if handed.readers_done < self.readers {
            return None;
        }
        let mut pieces = std::mem::take(&mut handed.pieces);
        pieces.sort_unstable_by_key(|(i, _)| *i);
        debug_assert!(
            pieces.windows(2).all(|w| w[0].0 < w[1].0),
            "a piece read twice"
        );
        Some(pieces.into_iter().map(|(_, sums)| sums).collect())
    }
}

impl Claims {
    /// The round this execution of `partition` (of `partitions`) reads; `pieces` makes a new
    /// round's pieces, in scan order. `None`: the execution reads its partition's own frames
    /// (too many rounds were open when its round came).
    pub(crate) fn join(
        &self,
        partition: usize,
        partitions: usize,
        pieces: impl FnOnce() -> Vec<Frame>,
    ) -> Option<Arc<Round>> {
        // The state stays consistent at every step, so a panic elsewhere cannot break it.
        let mut rounds = self.rounds.lock().unwrap_or_else(|e| e.into_inner());
        let Rounds {
            executions,
            first,
            open,
            unshared_from,
        } = &mut *rounds;
        if executions.len() <= partition {
            executions.resize(partitions.max(partition + 1), 0);
        }
        let number = executions[partition];
        executions[partition] += 1;
        if unshared_from.is_some_and(|n| number >= n) {
            return None;
        }
        if number >= *first + open.len() && open.len() >= ROUNDS_OPEN_MAX {
            *unshared_from = Some(number);
            return None;
        }
        if number >= *first + open.len() {
            debug_assert_eq!(number, *first + open.len(), "rounds open in order");
            open.push_back(Arc::new(Round {
                pieces: pieces(),
                next: AtomicUsize::new(0),
                readers: partitions,
                sums: Mutex::default(),
            }));
        }
        let round = open[number - *first].clone();
        let passed = executions.iter().copied().min().unwrap_or(0);
        while *first < passed && !open.is_empty() {
            open.pop_front();
            *first += 1;
        }
        Some(round)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(n: u64) -> Vec<Frame> {
        (0..n)
            .map(|i| Frame::range(0, i * 10..i * 10 + 10))
            .collect()
    }

    fn drain(round: &Round) -> Vec<u64> {
        std::iter::from_fn(|| round.take().map(|(_, f)| f.rows.start)).collect()
    }

    #[test]
    fn partitions_of_one_execution_share_its_pieces_once_each() {
        let claims = Claims::default();
        let a = claims.join(0, 2, || pieces(5)).unwrap();
        let b = claims
            .join(1, 2, || unreachable!("round 0 exists"))
            .unwrap();
        let first = a.take().unwrap().1.rows.start;
        let rest_b = drain(&b);
        let rest_a = drain(&a);
        assert_eq!(first, 0);
        assert_eq!(rest_b, vec![10, 20, 30, 40]);
        assert!(rest_a.is_empty());
    }

    #[test]
    fn a_node_executed_again_reads_every_piece_again() {
        let claims = Claims::default();
        let a0 = claims.join(0, 2, || pieces(3)).unwrap();
        let b0 = claims.join(1, 2, || pieces(99)).unwrap();
        let mut seen = drain(&a0);
        seen.extend(drain(&b0));
        seen.sort();
        assert_eq!(seen, vec![0, 10, 20]);
        // The second execution of each partition: a new round; rounds every partition has
        // passed are dropped (their readers hold them).
        let a1 = claims.join(0, 2, || pieces(3)).unwrap();
        assert_eq!(a1.take().map(|(_, f)| f.rows.start), Some(0));
        let open = |c: &Claims| {
            let r = c.rounds.lock().unwrap();
            (r.first, r.open.len())
        };
        assert_eq!(open(&claims), (1, 1));
        let b1 = claims.join(1, 2, || pieces(99)).unwrap();
        assert_eq!(drain(&b1), vec![10, 20]);
        assert_eq!(open(&claims), (2, 0));
        // Partition 0 runs a third time before partition 1 does: a round of its own, which
        // partition 1's third execution joins.
        let a2 = claims.join(0, 2, || pieces(2)).unwrap();
        assert_eq!(drain(&a2), vec![0, 10]);
        let b2 = claims.join(1, 2, || pieces(99)).unwrap();
        assert!(b2.take().is_none());
    }

    #[test]
    fn past_the_open_rounds_bound_executions_read_their_own_frames() {
        let claims = Claims::default();
        // Partition 0 runs again and again while partition 1 never does.
        for _ in 0..ROUNDS_OPEN_MAX {
            assert!(claims.join(0, 2, || pieces(2)).is_some());
        }
        assert!(claims.join(0, 2, || pieces(2)).is_none());
        assert!(claims.join(0, 2, || pieces(2)).is_none());
        // Partition 1 joins the rounds that were made, and reads its own frames in the rest.
        for _ in 0..ROUNDS_OPEN_MAX {
            let round = claims.join(1, 2, || unreachable!("made")).unwrap();
            assert_eq!(drain(&round), vec![0, 10], "partition 0 took none");
        }
        assert!(claims.join(1, 2, || pieces(2)).is_none());
        let r = claims.rounds.lock().unwrap();
        assert!(r.open.len() <= ROUNDS_OPEN_MAX);
    }

    #[test]
    fn the_last_reader_adds_up_every_piece_in_order() {
        let claims = Claims::default();
        let a = claims.join(0, 2, || pieces(4)).unwrap();
        let b = claims.join(1, 2, || unreachable!("made")).unwrap();
        let sums = |(i, piece): (usize, Frame)| (i, vec![(piece.rows.start as f64, 1)]);
        let mut mine_a = vec![sums(a.take().unwrap())];
        let mut mine_b = vec![sums(b.take().unwrap())];
        mine_a.push(sums(a.take().unwrap()));
        mine_b.push(sums(b.take().unwrap()));
        assert!(b.hand_in_sums(mine_b).is_none());
        let all = a.hand_in_sums(mine_a).unwrap();
        let starts: Vec<f64> = all.iter().map(|s| s[0].0).collect();
        assert_eq!(starts, vec![0.0, 10.0, 20.0, 30.0]);
    }

    #[test]
    fn a_copy_shares_no_round() {
        let claims = Claims::default();
        let a = claims.join(0, 2, || pieces(2)).unwrap();
        let copy = claims.clone();
        let c = copy.join(0, 2, || pieces(2)).unwrap();
        assert_eq!(drain(&a), vec![0, 10]);
        assert_eq!(drain(&c), vec![0, 10]);
    }
}
