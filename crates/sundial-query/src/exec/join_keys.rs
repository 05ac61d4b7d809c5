//! Key numbers for the time joins: equal keys get equal numbers, so a join keeps its state
//! per key in a plain table indexed by number.
//!
//! The right side numbers its keys as it reads them; left rows are looked up, and a left key
//! no right row has gets [`NO_KEY`]. A single SYMBOL key (a dictionary of strings) is numbered
//! per dictionary value, once for each dictionary: a scan's batches share their table's
//! dictionary, so numbering a row costs one array lookup and no string is hashed per row.
//! Other keys are numbered by their bytes in Arrow's row format, hashed per row.
//!
//! Keys compare as values: a NULL key matches a NULL key, as QuestDB's time joins match
//! them (a SYMBOL's NULL is one of its values there).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, DictionaryArray};
use datafusion::arrow::datatypes::{DataType, Int32Type};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::HashMap;
use datafusion::error::Result as DfResult;

/// Key number of rows whose key no right row has.
pub(crate) const NO_KEY: u32 = u32::MAX;

/// Dictionary values past which a dictionary is not numbered whole for a batch of fewer
/// rows than this many times its length: its used values are looked up row by row instead.
const WHOLE_DICTIONARY_PER_ROW: usize = 4;

/// Numbers keys (see the module docs).
#[derive(Debug)]
pub(crate) struct KeyNumbers {
    /// The right keys' types, which left keys are cast to.
    types: Vec<DataType>,
    kind: Kind,
    /// Distinct right keys numbered so far.
    count: u32,
}

#[derive(Debug)]
enum Kind {
    /// One key, a dictionary of UTF-8 strings: numbered by value.
    Symbol {
        by_value: HashMap<Box<[u8]>, u32>,
        /// The NULL key's number, once a right row holds it.
        null: Option<u32>,
    },
    /// Any other keys: numbered by their bytes in the row format.
    Rows {
        converter: RowConverter,
        by_row: HashMap<Box<[u8]>, u32>,
    },
}

/// The numbers of one dictionary's values, kept between batches that share it.
#[derive(Debug, Default)]
pub(crate) struct DictionaryCache {
    values: Option<ArrayRef>,
    numbers: Vec<u32>,
}

impl KeyNumbers {
    /// Numbering for keys of these types (the right side's).
    pub(crate) fn new(types: Vec<DataType>) -> DfResult<Self> {
        let symbol = matches!(
            types.as_slice(),
            [DataType::Dictionary(k, v)] if **k == DataType::Int32 && **v == DataType::Utf8
        );
        let kind = if symbol {
            Kind::Symbol {
                by_value: HashMap::new(),
                null: None,
            }
        } else {
            let fields = types.iter().cloned().map(SortField::new).collect();
            Kind::Rows {
                converter: RowConverter::new(fields)?,
                by_row: HashMap::new(),
            }
        };
        Ok(KeyNumbers {
            types,
            kind,
            count: 0,
        })
    }

    pub(crate) fn types(&self) -> &[DataType] {
        &self.types
    }

    /// Distinct right keys numbered: every number given is below it.
    pub(crate) fn count(&self) -> usize {
        self.count as usize
    }

    /// The numbers of the keys of `len` rows, each key an array of its type: new keys get
    /// new numbers when `add` (the right side), else [`NO_KEY`].
    pub(crate) fn number(
        &mut self,
        keys: &[ArrayRef],
        len: usize,
        add: bool,
        cache: &mut DictionaryCache,
    ) -> DfResult<Vec<u32>> {
        let count = &mut self.count;
        match &mut self.kind {
            Kind::Symbol { by_value, null } => {
                let dictionary = keys[0].as_dictionary::<Int32Type>();
                let mut numbering = SymbolNumbering {
                    by_value,
                    null,
                    count,
                    add,
                };
                Ok(numbering.rows(dictionary, cache))
            }
            Kind::Rows { converter, by_row } => {
                let rows = converter.convert_columns(keys)?;
                let mut numbers = Vec::with_capacity(len);
                for row in rows.iter() {
                    numbers.push(match by_row.get(row.as_ref()) {
                        Some(&n) => n,
                        None if add => {
                            let n = *count;
                            by_row.insert(row.as_ref().into(), n);
                            *count += 1;
                            n
                        }
                        None => NO_KEY,
                    });
                }
                Ok(numbers)
            }
        }
    }
}

/// One numbering pass over a SYMBOL key's rows.
struct SymbolNumbering<'a> {
    by_value: &'a mut HashMap<Box<[u8]>, u32>,
    null: &'a mut Option<u32>,
    count: &'a mut u32,
    add: bool,
}

impl SymbolNumbering<'_> {
    fn null_number(&mut self) -> u32 {
        match *self.null {
            Some(n) => n,
            None if self.add => {
                let n = *self.count;
                *self.null = Some(n);
                *self.count += 1;
                n
            }
            None => NO_KEY,
        }
    }

    fn value_number(&mut self, value: &[u8]) -> u32 {
        match self.by_value.get(value) {
            Some(&n) => n,
            None if self.add => {
                let n = *self.count;
                self.by_value.insert(value.into(), n);
                *self.count += 1;
                n
            }
            None => NO_KEY,
        }
    }

    fn rows(
        &mut self,
        array: &DictionaryArray<Int32Type>,
        cache: &mut DictionaryCache,
    ) -> Vec<u32> {
        let values = array.values();
        let strings = values.as_string::<i32>();
        let codes = array.keys();
        let cached = cache
            .values
            .as_ref()
            .is_some_and(|v| Arc::ptr_eq(v, values) || v.to_data().ptr_eq(&values.to_data()));
        if !cached && values.len() > array.len().saturating_mul(WHOLE_DICTIONARY_PER_ROW) {
            // A large dictionary for a small batch: look up only the values rows use.
            return (0..array.len())
                .map(|i| match codes.is_valid(i) {
                    true => {
                        let code = codes.value(i) as usize;
                        match strings.is_valid(code) {
                            true => self.value_number(strings.value(code).as_bytes()),
                            false => self.null_number(),
                        }
                    }
                    false => self.null_number(),
                })
                .collect();
        }
        if !cached {
            cache.numbers.clear();
            for i in 0..strings.len() {
                let number = match strings.is_valid(i) {
                    true => self.value_number(strings.value(i).as_bytes()),
                    false => self.null_number(),
                };
                cache.numbers.push(number);
            }
            cache.values = Some(values.clone());
        }
        let numbers = &cache.numbers;
        let number_of = |code: i32| numbers.get(code as usize).copied().unwrap_or(NO_KEY);
        if codes.null_count() == 0 {
            codes.values().iter().map(|&c| number_of(c)).collect()
        } else {
            let null = self.null_number();
            (0..codes.len())
                .map(|i| match codes.is_valid(i) {
                    true => number_of(codes.value(i)),
                    false => null,
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int32Array, Int64Array, StringArray};

    fn symbols(values: &ArrayRef, codes: &[Option<i32>]) -> ArrayRef {
        let codes = Int32Array::from(codes.to_vec());
        Arc::new(DictionaryArray::<Int32Type>::try_new(codes, values.clone()).unwrap())
    }

    fn symbol_type() -> DataType {
        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
    }

    #[test]
    fn symbols_number_by_value_across_dictionaries_and_null_is_a_key() {
        let mut numbers = KeyNumbers::new(vec![symbol_type()]).unwrap();
        let right_values: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "a2", "c"]));
        let mut cache = DictionaryCache::default();
        let right = symbols(&right_values, &[Some(1), Some(0), None, Some(1), Some(3)]);
        let got = numbers.number(&[right], 5, true, &mut cache).unwrap();
        // Every dictionary value is numbered when the dictionary is first seen.
        assert_eq!(got, vec![1, 0, 4, 1, 3]);
        assert_eq!(numbers.count(), 5);
        // The left side: another dictionary with the values in another order.
        let left_values: ArrayRef = Arc::new(StringArray::from(vec!["c", "zz", "b", "a"]));
        let mut left_cache = DictionaryCache::default();
        let left = symbols(&left_values, &[Some(0), Some(1), Some(2), None, Some(3)]);
        let got = numbers.number(&[left], 5, false, &mut left_cache).unwrap();
        assert_eq!(got, vec![3, NO_KEY, 1, 4, 0]);
        assert_eq!(numbers.count(), 5, "looking up adds nothing");
    }

    #[test]
    fn a_large_dictionary_for_few_rows_numbers_only_the_values_used() {
        let mut numbers = KeyNumbers::new(vec![symbol_type()]).unwrap();
        let values: ArrayRef = Arc::new(StringArray::from(
            (0..100).map(|i| format!("v{i}")).collect::<Vec<_>>(),
        ));
        let mut cache = DictionaryCache::default();
        let right = symbols(&values, &[Some(42), Some(7), Some(42)]);
        let got = numbers.number(&[right], 3, true, &mut cache).unwrap();
        assert_eq!(got, vec![0, 1, 0]);
        assert_eq!(numbers.count(), 2);
        assert!(cache.values.is_none());
    }

    #[test]
    fn other_keys_number_by_row_bytes() {
        let mut numbers = KeyNumbers::new(vec![DataType::Int64]).unwrap();
        let mut cache = DictionaryCache::default();
        let right: ArrayRef = Arc::new(Int64Array::from(vec![Some(5), None, Some(5), Some(9)]));
        let got = numbers.number(&[right], 4, true, &mut cache).unwrap();
        assert_eq!(got, vec![0, 1, 0, 2]);
        let left: ArrayRef = Arc::new(Int64Array::from(vec![Some(9), Some(6), None]));
        let got = numbers.number(&[left], 3, false, &mut cache).unwrap();
        assert_eq!(got, vec![2, NO_KEY, 1]);
    }
}
