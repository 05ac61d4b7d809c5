//! Selection bitmaps: which rows of a chunk pass, one bit per row in 64-row words.

use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer};

/// Rows of a chunk that pass: bit `i % 64` of word `i / 64` for row `i`, least significant
/// bit first (Arrow's bit order). Bits past `len` are always zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    words: Vec<u64>,
    len: usize,
}

/// The word of `len` rows' last block with only the bits of rows that exist set.
fn tail_mask(len: usize) -> u64 {
    match len % 64 {
        0 => u64::MAX,
        r => (1u64 << r) - 1,
    }
}

impl Selection {
    /// Every one of `len` rows.
    pub fn all(len: usize) -> Selection {
        let mut words = vec![u64::MAX; len.div_ceil(64)];
        if let Some(last) = words.last_mut() {
            *last &= tail_mask(len);
        }
        Selection { words, len }
    }

    /// None of `len` rows.
    pub fn none(len: usize) -> Selection {
        Selection {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// The rows a boolean buffer sets.
    pub fn from_bits(bits: &BooleanBuffer) -> Selection {
        let len = bits.len();
        let chunks = bits.bit_chunks();
        let mut words: Vec<u64> = chunks.iter().collect();
        if chunks.remainder_len() > 0 {
            words.push(chunks.remainder_bits());
        }
        Selection { words, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn words(&self) -> &[u64] {
        &self.words
    }

    pub(crate) fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// How many rows pass.
    pub fn count(&self) -> usize {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the processor has the instruction, checked just above.
            return unsafe { count_popcnt(&self.words) };
        }
        count_ones(&self.words)
    }

    /// Whether no row passes.
    pub fn none_pass(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Keeps only the rows `other` passes too.
    pub fn and(&mut self, other: &Selection) {
        debug_assert_eq!(self.len, other.len);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= b;
        }
    }

    /// Adds the rows `other` passes.
    pub fn or(&mut self, other: &Selection) {
        debug_assert_eq!(self.len, other.len);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// Keeps only the rows that are valid (not NULL) in `nulls`, if given.
    pub fn and_valid(&mut self, nulls: Option<&NullBuffer>) {
        if let Some(nulls) = nulls {
            and_bits(&mut self.words, nulls.inner());
        }
    }

    /// The passing rows, ascending.
    pub fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut word = word;
            std::iter::from_fn(move || {
                if word == 0 {
                    return None;
                }
                let bit = word.trailing_zeros() as usize;
                word &= word - 1;
                Some(w * 64 + bit)
            })
        })
    }

    /// The first passing row, if any passes.
    pub fn first_one(&self) -> Option<usize> {
        let (w, word) = self.words.iter().enumerate().find(|(_, w)| **w != 0)?;
        Some(w * 64 + word.trailing_zeros() as usize)
    }

    /// The last passing row, if any passes.
    pub fn last_one(&self) -> Option<usize> {
        let (w, word) = self
            .words
            .iter()
            .enumerate()
            .rev()
            .find(|(_, w)| **w != 0)?;
        Some(w * 64 + 63 - word.leading_zeros() as usize)
    }

    /// The selection as an Arrow boolean buffer (the words become its bytes, no copy).
    pub fn into_bits(self) -> BooleanBuffer {
        BooleanBuffer::new(Buffer::from_vec(self.words), 0, self.len)
    }
}

/// `words &= bits`, word by word, for `bits` at any bit offset.
pub(crate) fn and_bits(words: &mut [u64], bits: &BooleanBuffer) {
    let chunks = bits.bit_chunks();
    let mut i = 0;
    for chunk in chunks.iter() {
        words[i] &= chunk;
        i += 1;
    }
    if chunks.remainder_len() > 0 {
        words[i] &= chunks.remainder_bits();
    }
}

/// `words &= !bits` (rows NULL in a validity buffer), for `bits` at any bit offset.
pub(crate) fn and_not_bits(words: &mut [u64], bits: &BooleanBuffer, len: usize) {
    let chunks = bits.bit_chunks();
    let mut i = 0;
    for chunk in chunks.iter() {
        words[i] &= !chunk;
        i += 1;
    }
    if chunks.remainder_len() > 0 {
        words[i] &= !chunks.remainder_bits() & tail_mask(len);
    }
}

/// The set bits of `bits`, with the processor's population count instruction where it has
/// one: Arrow's own count is compiled for the portable baseline, which emulates it.
pub fn count_set_bits(bits: &BooleanBuffer) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the processor has the instruction, checked just above.
        return unsafe { count_set_bits_popcnt(bits) };
    }
    bits.count_set_bits()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn count_set_bits_popcnt(bits: &BooleanBuffer) -> usize {
    let chunks = bits.inner().bit_chunks(bits.offset(), bits.len());
    let whole: usize = chunks.iter().map(|w| w.count_ones() as usize).sum();
    whole + chunks.remainder_bits().count_ones() as usize
}

/// The set bits of `words`.
#[inline(always)]
fn count_ones(words: &[u64]) -> usize {
    words.iter().map(|w| w.count_ones() as usize).sum()
}

/// [`count_ones`] with the processor's population count instruction (the portable build
/// emulates it in a dozen instructions per word).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn count_popcnt(words: &[u64]) -> usize {
    count_ones(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_and_last_passing_rows() {
        for ones in [
            vec![],
            vec![0],
            vec![63],
            vec![64, 200],
            vec![5, 64, 130, 191],
        ] {
            let bits: Vec<bool> = (0..192).map(|i| ones.contains(&i)).collect();
            let selection = Selection::from_bits(&BooleanBuffer::from(bits));
            assert_eq!(
                selection.first_one(),
                ones.first().copied().filter(|&r| r < 192)
            );
            let last = ones.iter().copied().rfind(|&r| r < 192);
            assert_eq!(selection.last_one(), last, "{ones:?}");
        }
    }

    #[test]
    fn set_bits_are_counted_at_any_offset() {
        let bits: Vec<bool> = (0..300).map(|i| i % 3 == 0 || i % 7 == 0).collect();
        let all = BooleanBuffer::from(bits.clone());
        for (start, len) in [(0, 300), (1, 299), (5, 64), (63, 130), (200, 0), (7, 3)] {
            let sliced = all.slice(start, len);
            let expected = bits[start..start + len].iter().filter(|&&b| b).count();
            assert_eq!(count_set_bits(&sliced), expected, "{start}+{len}");
        }
    }

    #[test]
    fn bits_round_trip_at_any_offset() {
        let bools: Vec<bool> = (0..200).map(|i| i % 3 == 0 || i % 7 == 0).collect();
        let full = BooleanBuffer::from(bools.as_slice());
        for offset in [0, 1, 5, 63, 64, 65] {
            let sliced = full.slice(offset, 200 - offset);
            let s = Selection::from_bits(&sliced);
            let expected: Vec<usize> = (0..200 - offset).filter(|&i| bools[i + offset]).collect();
            assert_eq!(s.ones().collect::<Vec<_>>(), expected, "offset {offset}");
            assert_eq!(s.count(), expected.len());
            assert_eq!(s.clone().into_bits(), sliced);
            let mut all = Selection::all(200 - offset);
            and_bits(all.words_mut(), &sliced);
            assert_eq!(all, s);
            let mut all = Selection::all(200 - offset);
            and_not_bits(all.words_mut(), &sliced, 200 - offset);
            assert_eq!(all.count(), 200 - offset - expected.len());
        }
        assert_eq!(Selection::all(0).count(), 0);
        assert_eq!(Selection::all(130).count(), 130);
    }
}
