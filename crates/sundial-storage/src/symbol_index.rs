//! Finding a SYMBOL's code by value in a published dictionary, in constant time.
//!
//! ```text
//!   writer commit ─▶ PublishedSymbols v1 ──(first lookup)──▶ SymbolIndex i1
//!   writer commit ─▶ PublishedSymbols v2 ──(first lookup)──▶ SymbolIndex i2 = copy of i1 + new codes
//! ```
//!
//! Invariants:
//! * A [`PublishedSymbols`] never changes: the writer publishes a new one when a commit adds
//!   symbols, and every snapshot of that version shares it (one `Arc`).
//! * Its index is built at most once, on the first lookup by value (`OnceLock`): ingestion never
//!   pays for it, and a version nobody looks up in never has one.
//! * Dictionaries are append-only, so the values of an earlier version of a column are a prefix
//!   of a later one's with the same codes: a later index may start from a copy of an earlier
//!   one's slots (its `seed`) and add only the new codes. A version holds at most one seed, which
//!   it drops once its own index is built, so memory stays bounded by two indexes per version.
//! * A slot holds a code + 1 (0 is empty); there are at least twice as many slots as symbols,
//!   a power of two, so every probe sequence (linear) reaches an empty slot.
//! * Values are distinct (the writer's map guarantees it), so a value has at most one slot; were
//!   one repeated, the lowest code wins, as a scan from the start would find.
//! * A lookup hashes the value once, compares it with the few values on its probe sequence and
//!   allocates nothing. NULL entries (storage writes none) are never found.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use arrow_array::{Array, StringArray};

use crate::column::SymbolResolver;
use crate::error::{Result, StorageError};
use crate::types::SymbolValues;

/// Resolves the symbols of committed rows (of a part being rewritten): every one is in the
/// published dictionary, so a lookup that fails is an internal error.
pub(crate) struct CommittedSymbols<'a>(pub &'a PublishedSymbols);

impl SymbolResolver for CommittedSymbols<'_> {
    fn resolve(&mut self, value: &str) -> Result<i32> {
        self.0.code(value).ok_or_else(|| {
            StorageError::Internal(format!(
                "committed symbol '{value}' is not in the dictionary"
            ))
        })
    }
}

/// One published version of a SYMBOL column's dictionary, with its lazily built index.
pub(crate) struct PublishedSymbols {
    values: SymbolValues,
    index: OnceLock<Arc<SymbolIndex>>,
    /// The index of an earlier version, if one was built: a head start, taken by the build.
    seed: Mutex<Option<Arc<SymbolIndex>>>,
}

impl PublishedSymbols {
    /// The version after `previous` (if any), holding `values`.
    pub fn new(values: SymbolValues, previous: Option<&PublishedSymbols>) -> PublishedSymbols {
        let seed = previous.and_then(PublishedSymbols::newest_index);
        debug_assert!(
            seed.as_ref().is_none_or(|s| s.indexed_len <= values.len()),
            "a dictionary only grows"
        );
        PublishedSymbols {
            values,
            index: OnceLock::new(),
            seed: Mutex::new(seed),
        }
    }

    /// The values, position = code.
    pub fn values(&self) -> &SymbolValues {
        &self.values
    }

    /// The code of `value`, if this version holds it.
    pub fn code(&self, value: &str) -> Option<i32> {
        self.index().code(&self.values, value)
    }

    fn index(&self) -> &SymbolIndex {
        self.index.get_or_init(|| {
            let seed = self.take_seed();
            Arc::new(SymbolIndex::build(&self.values, seed.as_deref()))
        })
    }

    fn take_seed(&self) -> Option<Arc<SymbolIndex>> {
        self.seed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// This version's index if built, else the seed it would start from.
    fn newest_index(&self) -> Option<Arc<SymbolIndex>> {
        if let Some(index) = self.index.get() {
            return Some(index.clone());
        }
        self.seed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// An open-addressing hash table of codes, over the values of one dictionary version.
#[derive(Clone)]
pub(crate) struct SymbolIndex {
    /// Seeded per index family (copied with the slots), fast for the short strings symbols are.
    hasher: foldhash::fast::RandomState,
    /// Code + 1 per occupied slot, 0 when empty; a power of two long.
    slots: Box<[u32]>,
    /// How many leading values (codes `0..indexed_len`) are in the slots.
    indexed_len: usize,
}

impl SymbolIndex {
    /// The index of `values`, starting from `seed` (an index of a prefix of them) if it has room.
    fn build(values: &StringArray, seed: Option<&SymbolIndex>) -> SymbolIndex {
        let slots_len = slots_for(values.len());
        let mut index = match seed {
            Some(s) if s.slots.len() >= slots_len && s.indexed_len <= values.len() => s.clone(),
            _ => SymbolIndex {
                hasher: seed.map(|s| s.hasher.clone()).unwrap_or_default(),
                slots: vec![0; slots_len].into_boxed_slice(),
                indexed_len: 0,
            },
        };
        for code in index.indexed_len..values.len() {
            if values.is_valid(code) {
                index.insert(values, code);
            }
        }
        index.indexed_len = values.len();
        index
    }

    /// Puts `code` in the first empty slot of its value's probe sequence.
    fn insert(&mut self, values: &StringArray, code: usize) {
        let value = values.value(code);
        debug_assert!(
            self.code(values, value).is_none(),
            "symbol {value:?} is in the dictionary twice"
        );
        let mask = self.slots.len() - 1;
        let mut at = self.home(value);
        while self.slots[at] != 0 {
            at = (at + 1) & mask;
        }
        // Codes are below i32::MAX (the writer refuses more), so code + 1 fits.
        self.slots[at] = code as u32 + 1;
    }

    /// The code of `value` among `values` (the values this index was built over).
    fn code(&self, values: &StringArray, value: &str) -> Option<i32> {
        let mask = self.slots.len() - 1;
        let mut at = self.home(value);
        loop {
            let code = (self.slots[at] as usize).checked_sub(1)?;
            if values.value(code) == value {
                return i32::try_from(code).ok();
            }
            at = (at + 1) & mask;
        }
    }

    fn home(&self, value: &str) -> usize {
        use std::hash::BuildHasher;
        (self.hasher.hash_one(value) as usize) & (self.slots.len() - 1)
    }
}

/// Slots for `len` symbols: a power of two at least twice as many (load at most a half).
fn slots_for(len: usize) -> usize {
    len.saturating_mul(2).next_power_of_two().max(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(values: &[&str], previous: Option<&PublishedSymbols>) -> PublishedSymbols {
        PublishedSymbols::new(Arc::new(StringArray::from(values.to_vec())), previous)
    }

    #[test]
    fn finds_every_value_and_nothing_else() {
        let values: Vec<String> = (0..1000).map(|i| format!("s{i}")).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        let v = version(&refs, None);
        for (i, s) in refs.iter().enumerate() {
            assert_eq!(v.code(s), Some(i as i32));
        }
        assert_eq!(v.code("s1000"), None);
        assert_eq!(v.code(""), None);
    }

    #[test]
    fn empty_dictionary_finds_nothing() {
        assert_eq!(version(&[], None).code("a"), None);
    }

    #[test]
    fn empty_string_is_a_symbol_like_any_other() {
        let v = version(&["a", ""], None);
        assert_eq!(v.code(""), Some(1));
    }

    #[test]
    fn null_entries_are_never_found() {
        let array = StringArray::from(vec![None, Some("a")]);
        let v = PublishedSymbols::new(Arc::new(array), None);
        assert_eq!(v.code(""), None);
        assert_eq!(v.code("a"), Some(1));
    }

    #[test]
    fn later_versions_extend_an_earlier_index() {
        let first = version(&["a", "b"], None);
        assert_eq!(first.code("b"), Some(1));
        let second = version(&["a", "b", "c"], Some(&first));
        assert!(second.has_seed());
        assert_eq!(second.code("c"), Some(2));
        assert_eq!(second.code("a"), Some(0));
        assert_eq!(
            first.code("c"),
            None,
            "an earlier version never sees later symbols"
        );
        // Growing past the seed's room rebuilds, with every code still found.
        let many: Vec<String> = (0..100).map(|i| format!("x{i}")).collect();
        let mut refs = vec!["a", "b", "c"];
        refs.extend(many.iter().map(String::as_str));
        let third = version(&refs, Some(&second));
        for (i, s) in refs.iter().enumerate() {
            assert_eq!(third.code(s), Some(i as i32));
        }
        assert!(third.take_seed().is_none(), "the build dropped its seed");
    }

    #[test]
    fn an_unbuilt_version_passes_its_seed_on() {
        let first = version(&["a"], None);
        assert_eq!(first.code("a"), Some(0));
        let second = version(&["a", "b"], Some(&first));
        let third = version(&["a", "b", "c"], Some(&second));
        assert!(third.has_seed());
        assert_eq!(third.code("c"), Some(2));
    }

    impl PublishedSymbols {
        fn has_seed(&self) -> bool {
            self.seed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
        }
    }
}
