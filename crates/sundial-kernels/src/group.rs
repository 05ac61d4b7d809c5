//! Group slots from key codes. A SYMBOL key's code is its dictionary code; an integer key's
//! code numbers its distinct values as they first appear (a direct table for values in
//! `[0, 2^16)`, a hash map beyond). One SYMBOL key's code indexes the slot arrays directly, as
//! does one integer key's; two or three SYMBOL keys combine into one index,
//! `code₀ + card₀ · (code₁ + card₁ · code₂)`, where a key's cardinality counts its
//! dictionary's symbols and NULL. Past [`DENSE_SLOTS_MAX`] combinations, or with an integer
//! key among several, the keys' codes are mapped to slots in order of first appearance.

use foldhash::HashMap;

use crate::aggregate::for_each_row;
use crate::selection::Selection;
use crate::values::{ColumnValues, PREFETCH_AHEAD_BYTES, Values, prefetch};

/// Combined key indexes up to this many are slots themselves (dense arrays of states).
pub const DENSE_SLOTS_MAX: u64 = 1 << 16;

/// Integer key values below this (and from 0) are coded through a direct table.
const SMALL_VALUES: i64 = 1 << 16;

/// Most keys a grouper combines.
pub const GROUP_KEYS_MAX: usize = 3;

/// What a group key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// A SYMBOL column whose dictionary holds this many symbols (read as its codes).
    Symbol { symbols: u32 },
    /// An integer column (BYTE, SHORT, INT, LONG).
    Int,
}

/// The value of one key of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKey {
    /// A SYMBOL key's dictionary code; `None` for NULL.
    Code(Option<i32>),
    /// An integer key's value; `None` for NULL.
    Int(Option<i64>),
}

/// Numbers the distinct values of an integer key as they first appear.
#[derive(Debug, Clone, Default)]
struct IntCoder {
    /// Code + 1 of each value in `[0, SMALL_VALUES)` met so far (0: not met), grown on demand.
    small: Vec<u32>,
    other: HashMap<i64, u32>,
    /// The value of each code (`None`: NULL).
    values: Vec<Option<i64>>,
    null_code: Option<u32>,
}

impl IntCoder {
    fn code(&mut self, value: Option<i64>) -> u32 {
        let next = self.values.len() as u32;
        let code = match value {
            None => *self.null_code.get_or_insert(next),
            Some(v) if (0..SMALL_VALUES).contains(&v) => {
                let v = v as usize;
                if v >= self.small.len() {
                    self.small
                        .resize((v + 1).next_power_of_two().min(1 << 16), 0);
                }
                if self.small[v] == 0 {
                    self.small[v] = next + 1;
                }
                self.small[v] - 1
            }
            Some(v) => *self.other.entry(v).or_insert(next),
        };
        if code == next {
            self.values.push(value);
        }
        code
    }

    fn bytes(&self) -> usize {
        self.small.capacity() * 4 + self.other.capacity() * 16 + self.values.capacity() * 16
    }
}

/// How a key turns into a code.
#[derive(Debug, Clone)]
enum Coder {
    /// Code `card - 1` stands for NULL.
    Symbol {
        card: u64,
    },
    Int(IntCoder),
}

/// How slots are numbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// SYMBOL keys whose combinations fit [`DENSE_SLOTS_MAX`]: the combined index.
    Dense,
    /// One integer key: its code.
    OneInt,
    /// Anything else: each combination of codes numbered as it first appears.
    Sparse,
}

/// Assigns the rows of chunks to group slots by their keys.
#[derive(Debug, Clone)]
pub struct Grouper {
    coders: Vec<Coder>,
    mode: Mode,
    /// The keys' codes → slot, in `Sparse` mode.
    sparse: HashMap<[u32; GROUP_KEYS_MAX], u32>,
    /// The keys' codes of each sparse slot.
    sparse_keys: Vec<[u32; GROUP_KEYS_MAX]>,
    /// Each key's codes of the last chunk's rows (`Sparse`; only passing rows' are meaningful).
    key_codes: Vec<Vec<u32>>,
    /// Slots of the last chunk's rows (only passing rows' entries are meaningful).
    slots: Vec<u32>,
}

impl Grouper {
    /// A grouper for `keys` (one to [`GROUP_KEYS_MAX`]).
    pub fn new(keys: &[KeyKind]) -> Grouper {
        assert!(
            (1..=GROUP_KEYS_MAX).contains(&keys.len()),
            "one to {GROUP_KEYS_MAX} group keys"
        );
        let coders: Vec<Coder> = keys
            .iter()
            .map(|k| match k {
                KeyKind::Symbol { symbols } => Coder::Symbol {
                    card: u64::from(*symbols) + 1,
                },
                KeyKind::Int => Coder::Int(IntCoder::default()),
            })
            .collect();
        let cards: Option<Vec<u64>> = coders
            .iter()
            .map(|c| match c {
                Coder::Symbol { card } => Some(*card),
                Coder::Int(_) => None,
            })
            .collect();
        let mode = match cards {
            Some(cards) => {
                let combinations = cards
                    .iter()
                    .try_fold(1u64, |acc, &c| acc.checked_mul(c))
                    .unwrap_or(u64::MAX);
                if combinations > DENSE_SLOTS_MAX {
                    Mode::Sparse
                } else {
                    Mode::Dense
                }
            }
            None if keys.len() == 1 => Mode::OneInt,
            None => Mode::Sparse,
        };
        Grouper {
            key_codes: vec![Vec::new(); coders.len()],
            coders,
            mode,
            sparse: HashMap::default(),
            sparse_keys: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// Slots in use so far: states need this many entries.
    pub fn slot_count(&self) -> usize {
        match self.mode {
            Mode::Sparse => self.sparse_keys.len(),
            Mode::OneInt => match &self.coders[0] {
                Coder::Int(coder) => coder.values.len(),
                Coder::Symbol { .. } => 0,
            },
            Mode::Dense => self.cards().product::<u64>() as usize,
        }
    }

    fn cards(&self) -> impl Iterator<Item = u64> + '_ {
        self.coders.iter().map(|c| match c {
            Coder::Symbol { card } => *card,
            Coder::Int(_) => 1,
        })
    }

    /// Assigns the rows of a chunk that `selection` passes (all `len` without one) to slots,
    /// from their key columns: SYMBOL codes, or integers (see [`Self::slots`]).
    pub fn assign(&mut self, keys: &[ColumnValues], selection: Option<&Selection>, len: usize) {
        debug_assert_eq!(keys.len(), self.coders.len());
        self.slots.clear();
        match self.mode {
            Mode::Dense => self.assign_dense(keys, len),
            Mode::OneInt => {
                self.slots.resize(len, 0);
                let Coder::Int(coder) = &mut self.coders[0] else {
                    unreachable!("one integer key")
                };
                code_ints(coder, &keys[0], selection, len, &mut self.slots);
            }
            Mode::Sparse => {
                for (i, (key, coder)) in keys.iter().zip(&mut self.coders).enumerate() {
                    let out = &mut self.key_codes[i];
                    out.clear();
                    out.resize(len, 0);
                    match coder {
                        Coder::Int(coder) => code_ints(coder, key, selection, len, out),
                        Coder::Symbol { card } => {
                            let Values::I32(codes) = key.values else {
                                unreachable!("SYMBOL keys are codes");
                            };
                            let null = (*card - 1) as u32;
                            for (row, (o, &c)) in out.iter_mut().zip(&codes[..len]).enumerate() {
                                *o = if key.nulls.is_none_or(|n| n.is_valid(row)) {
                                    c as u32
                                } else {
                                    null
                                };
                            }
                        }
                    }
                }
                self.slots.resize(len, 0);
                let (slots, map, sparse_keys, key_codes) = (
                    &mut self.slots,
                    &mut self.sparse,
                    &mut self.sparse_keys,
                    &self.key_codes,
                );
                for_each_row(len, selection, None, |row| {
                    let mut combination = [0u32; GROUP_KEYS_MAX];
                    for (c, codes) in combination.iter_mut().zip(key_codes) {
                        *c = codes[row];
                    }
                    let next = sparse_keys.len() as u32;
                    slots[row] = *map.entry(combination).or_insert_with(|| {
                        sparse_keys.push(combination);
                        next
                    });
                });
            }
        }
    }

    /// Slots of SYMBOL keys whose combinations fit [`DENSE_SLOTS_MAX`], for every row.
    fn assign_dense(&mut self, keys: &[ColumnValues], len: usize) {
        let mut stride = 1u64;
        for (i, (key, coder)) in keys.iter().zip(&self.coders).enumerate() {
            let Coder::Symbol { card } = *coder else {
                unreachable!("dense keys are SYMBOL keys");
            };
            let Values::I32(codes) = key.values else {
                unreachable!("SYMBOL keys are codes");
            };
            let codes = &codes[..len];
            let null = (card - 1) as u32;
            // At most DENSE_SLOTS_MAX combinations: no overflow (but a NULL row's code may be
            // anything until its digit is replaced below, so its arithmetic wraps).
            let digit = stride as u32;
            // Every row's code first, a cache line at a time: mapped columns lie in 4 KiB
            // pages, at whose edges the processor's prefetcher stops, so they are fetched
            // ahead by hand.
            if i == 0 {
                self.slots.reserve(len);
                for (line, codes_16) in codes.chunks(16).enumerate() {
                    prefetch(codes, line * 16 + PREFETCH_AHEAD_BYTES / 4);
                    self.slots.extend(codes_16.iter().map(|&c| c as u32));
                }
            } else {
                for (line, (slots_16, codes_16)) in
                    self.slots.chunks_mut(16).zip(codes.chunks(16)).enumerate()
                {
                    prefetch(codes, line * 16 + PREFETCH_AHEAD_BYTES / 4);
                    for (slot, &c) in slots_16.iter_mut().zip(codes_16) {
                        *slot = slot.wrapping_add((c as u32).wrapping_mul(digit));
                    }
                }
            }
            // Then the NULL rows' digit replaced by the NULL code's.
            if let Some(nulls) = key.nulls
                && nulls.null_count() > 0
            {
                let valid = nulls.inner().slice(0, len);
                let chunks = valid.bit_chunks();
                let tail = (chunks.remainder_len() > 0)
                    .then(|| chunks.remainder_bits() | (u64::MAX << chunks.remainder_len()));
                for (w, word) in chunks.iter().chain(tail).enumerate() {
                    let mut invalid = !word;
                    while invalid != 0 {
                        let row = w * 64 + invalid.trailing_zeros() as usize;
                        invalid &= invalid - 1;
                        let slot = &mut self.slots[row];
                        *slot = slot
                            .wrapping_sub((codes[row] as u32).wrapping_mul(digit))
                            .wrapping_add(null * digit);
                    }
                }
            }
            stride *= card;
        }
    }

    /// Bytes the grouper holds: per-chunk codes and slots, value codes and sparse slots.
    pub fn bytes(&self) -> usize {
        let coders: usize = self
            .coders
            .iter()
            .map(|c| match c {
                Coder::Int(coder) => coder.bytes(),
                Coder::Symbol { .. } => 0,
            })
            .sum();
        let chunk: usize = self.key_codes.iter().map(|c| c.capacity() * 4).sum();
        self.slots.capacity() * 4
            + chunk
            + coders
            + self.sparse_keys.capacity() * 12
            + self.sparse.capacity() * 16
    }

    /// The slot of each row of the chunk last assigned.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    /// The keys of `slot`.
    pub fn keys(&self, slot: usize) -> Vec<GroupKey> {
        let codes: Vec<u32> = match self.mode {
            Mode::Sparse => self.sparse_keys[slot][..self.coders.len()].to_vec(),
            Mode::OneInt => vec![slot as u32],
            Mode::Dense => {
                let mut index = slot as u64;
                self.cards()
                    .map(|card| {
                        let code = index % card;
                        index /= card;
                        code as u32
                    })
                    .collect()
            }
        };
        codes
            .iter()
            .zip(&self.coders)
            .map(|(&code, coder)| match coder {
                Coder::Symbol { card } => {
                    GroupKey::Code((u64::from(code) != card - 1).then_some(code as i32))
                }
                Coder::Int(coder) => GroupKey::Int(coder.values[code as usize]),
            })
            .collect()
    }
}

/// The codes of the integer key `key` of the rows `selection` passes, into `out`.
fn code_ints(
    coder: &mut IntCoder,
    key: &ColumnValues,
    selection: Option<&Selection>,
    len: usize,
    out: &mut [u32],
) {
    macro_rules! code_all {
        ($v:expr) => {{
            let v = $v;
            for_each_row(len, selection, None, |row| {
                let value = key
                    .nulls
                    .is_none_or(|n| n.is_valid(row))
                    .then(|| v[row] as i64);
                out[row] = coder.code(value);
            })
        }};
    }
    match key.values {
        Values::I8(v) => code_all!(v),
        Values::I16(v) => code_all!(v),
        Values::I32(v) => code_all!(v),
        Values::I64(v) => code_all!(v),
        Values::F32(_) | Values::F64(_) | Values::Bool(_) => {
            unreachable!("integer keys are integers")
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int32Array, Int64Array};

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
            let kinds: Vec<KeyKind> = symbols
                .iter()
                .map(|&symbols| KeyKind::Symbol { symbols })
                .collect();
            let mut g = Grouper::new(&kinds);
            g.assign(&keys, None, 4);
            let slots = g.slots().to_vec();
            let decoded: Vec<_> = slots.iter().map(|&s| g.keys(s as usize)).collect();
            let code = GroupKey::Code;
            assert_eq!(
                decoded,
                vec![
                    vec![code(Some(0)), code(Some(4))],
                    vec![code(Some(2)), code(None)],
                    vec![code(None), code(Some(0))],
                    vec![code(Some(1)), code(Some(4))],
                ]
            );
            assert!(g.slot_count() >= 4);
        }
    }

    #[test]
    fn integer_keys_number_their_values_alone_and_with_symbols() {
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(7),
            Some(-1 << 40),
            None,
            Some(7),
            Some(65_535),
            Some(65_536),
        ]));
        let syms: ArrayRef = Arc::new(Int32Array::from(vec![
            Some(1),
            Some(1),
            Some(0),
            Some(0),
            None,
            Some(1),
        ]));
        let int_values = ColumnValues::of(ints.as_ref()).unwrap();
        let sym_values = ColumnValues::of(syms.as_ref()).unwrap();
        let mut one = Grouper::new(&[KeyKind::Int]);
        one.assign(&[int_values], None, 6);
        let slots = one.slots().to_vec();
        assert_eq!(slots[0], slots[3]);
        assert_eq!(one.slot_count(), 5);
        let decoded: Vec<_> = slots.iter().map(|&s| one.keys(s as usize)[0]).collect();
        let int = GroupKey::Int;
        assert_eq!(
            decoded,
            vec![
                int(Some(7)),
                int(Some(-1 << 40)),
                int(None),
                int(Some(7)),
                int(Some(65_535)),
                int(Some(65_536))
            ]
        );
        let mut two = Grouper::new(&[KeyKind::Symbol { symbols: 2 }, KeyKind::Int]);
        let selection = Selection::from_bits(&arrow_buffer::BooleanBuffer::from(vec![
            true, true, true, false, true, true,
        ]));
        two.assign(&[sym_values, int_values], Some(&selection), 6);
        assert_eq!(two.slot_count(), 5);
        let slots = two.slots();
        assert_eq!(
            two.keys(slots[4] as usize),
            vec![GroupKey::Code(None), int(Some(65_535))]
        );
        assert_eq!(
            two.keys(slots[1] as usize),
            vec![GroupKey::Code(Some(1)), int(Some(-1 << 40))]
        );
    }
}
