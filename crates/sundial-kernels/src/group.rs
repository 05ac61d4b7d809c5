//! Group slots from SYMBOL codes: one key's code indexes the slot arrays directly; two or
//! three keys combine into one index, `code₀ + card₀ · (code₁ + card₁ · code₂)`, where a
//! key's cardinality counts its dictionary's symbols and NULL. Past [`DENSE_SLOTS_MAX`]
//! combinations the combined index is mapped to slots in order of first appearance.

use foldhash::HashMap;

use crate::aggregate::for_each_row;
use crate::selection::Selection;
use crate::values::{ColumnValues, Values};

/// Combined key indexes up to this many are slots themselves (dense arrays of states).
pub const DENSE_SLOTS_MAX: u64 = 1 << 16;

/// Assigns the rows of chunks to group slots by their key codes.
#[derive(Debug, Clone)]
pub struct Grouper {
    /// Each key's dictionary size plus one: code `cards[i] - 1` stands for NULL.
    cards: Vec<u64>,
    /// Combined key index → slot, when there are too many combinations for dense slots.
    sparse: Option<HashMap<u64, u32>>,
    /// The combined key index of each sparse slot.
    sparse_keys: Vec<u64>,
    /// Slots of the last chunk's rows (only passing rows' entries are meaningful).
    slots: Vec<u32>,
}

impl Grouper {
    /// A grouper for keys whose dictionaries hold `symbols[i]` symbols.
    pub fn new(symbols: &[u32]) -> Grouper {
        let cards: Vec<u64> = symbols.iter().map(|&n| u64::from(n) + 1).collect();
        let combinations = cards
            .iter()
            .try_fold(1u64, |acc, &c| acc.checked_mul(c))
            .unwrap_or(u64::MAX);
        Grouper {
            cards,
            sparse: (combinations > DENSE_SLOTS_MAX).then(HashMap::default),
            sparse_keys: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// Slots in use so far: states need this many entries.
    pub fn slot_count(&self) -> usize {
        match &self.sparse {
            Some(_) => self.sparse_keys.len(),
            None => self.cards.iter().product::<u64>() as usize,
        }
    }

    /// Assigns the rows of a chunk that `selection` passes (all `len` without one) to slots,
    /// from their key columns' codes (see [`Self::slots`]).
    pub fn assign(&mut self, keys: &[ColumnValues], selection: Option<&Selection>, len: usize) {
        debug_assert_eq!(keys.len(), self.cards.len());
        self.slots.clear();
        let mut stride = 1u64;
        for (i, (key, &card)) in keys.iter().zip(&self.cards).enumerate() {
            let Values::I32(codes) = key.values else {
                unreachable!("group keys are SYMBOL codes");
            };
            let codes = &codes[..len];
            let null = (card - 1) as u32;
            let code = |row: usize, c: i32| match key.nulls {
                Some(nulls) if !nulls.is_valid(row) => null,
                _ => c as u32,
            };
            if i == 0 {
                match key.nulls {
                    None => self.slots.extend(codes.iter().map(|&c| c as u32)),
                    Some(_) => self
                        .slots
                        .extend(codes.iter().enumerate().map(|(row, &c)| code(row, c))),
                }
            } else {
                let stride = stride as u32;
                for (row, (slot, &c)) in self.slots.iter_mut().zip(codes).enumerate() {
                    *slot = slot.wrapping_add(code(row, c).wrapping_mul(stride));
                }
            }
            stride = stride.saturating_mul(card);
        }
        if let Some(map) = &mut self.sparse {
            // Dense indexes overflow u32 here: recompute them as u64 for the passing rows.
            let (slots, sparse_keys, cards) = (&mut self.slots, &mut self.sparse_keys, &self.cards);
            for_each_row(len, selection, None, |row| {
                let mut index = 0u64;
                let mut stride = 1u64;
                for (key, &card) in keys.iter().zip(cards) {
                    let Values::I32(codes) = key.values else {
                        unreachable!()
                    };
                    let code = if key.nulls.is_none_or(|n| n.is_valid(row)) {
                        codes[row] as u64
                    } else {
                        card - 1
                    };
                    index += code * stride;
                    stride = stride.wrapping_mul(card);
                }
                let next = sparse_keys.len() as u32;
                slots[row] = *map.entry(index).or_insert_with(|| {
                    sparse_keys.push(index);
                    next
                });
            });
        }
    }

    /// Bytes the grouper holds: the last chunk's slots and the sparse slots' keys.
    pub fn bytes(&self) -> usize {
        let sparse = self.sparse.as_ref().map_or(0, |m| m.capacity() * 16);
        self.slots.capacity() * 4 + self.sparse_keys.capacity() * 8 + sparse
    }

    /// The slot of each row of the chunk last assigned.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    /// The codes of `slot`'s keys, `None` for NULL.
    pub fn codes(&self, slot: usize) -> Vec<Option<i32>> {
        let mut index = match &self.sparse {
            Some(_) => self.sparse_keys[slot],
            None => slot as u64,
        };
        self.cards
            .iter()
            .map(|&card| {
                let code = index % card;
                index /= card;
                (code != card - 1).then_some(code as i32)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int32Array};

    use super::*;

    #[test]
    fn slots_combine_codes_and_nulls() {
        let a: ArrayRef = Arc::new(Int32Array::from(vec![Some(0), Some(2), None, Some(1)]));
        let b: ArrayRef = Arc::new(Int32Array::from(vec![Some(4), None, Some(0), Some(4)]));
        let keys = [
            ColumnValues::of(a.as_ref()).unwrap(),
            ColumnValues::of(b.as_ref()).unwrap(),
        ];
        for symbols in [[3u32, 5], [3_000_000, 5]] {
            let mut g = Grouper::new(&symbols);
            g.assign(&keys, None, 4);
            let slots = g.slots().to_vec();
            let decoded: Vec<_> = slots.iter().map(|&s| g.codes(s as usize)).collect();
            assert_eq!(
                decoded,
                vec![
                    vec![Some(0), Some(4)],
                    vec![Some(2), None],
                    vec![None, Some(0)],
                    vec![Some(1), Some(4)],
                ]
            );
            assert!(g.slot_count() >= 4);
        }
    }
}
