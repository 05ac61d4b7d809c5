//! One table's buffered rows: an Arrow builder per column, handed to the table's sink as one
//! batch. Also the per-line scratch space ([`Texts`], [`ValueRef`]) the rows are built from.
//!
//! ```text
//!  Ingestor ─(Texts, ValueRef)─▶ TableBatch::add_row ─▶ builders ─hand_off─▶ TableSink::submit
//! ```
//!
//! A row is checked whole before any of its values is appended, so every builder always holds
//! `rows` values.

use foldhash::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Date64Builder, Float32Builder, Float64Builder, Int8Builder,
    Int16Builder, Int32Builder, Int64Builder, StringBuilder, TimestampNanosecondBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};
use arrow_buffer::{Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{Field, Schema};
use sundial_storage::{ColumnType, StorageError, Table, TableMeta};

use crate::error::IngestError;
use crate::sink::TableSink;

/// Reusable list of strings: `clear` keeps every string's capacity.
#[derive(Default)]
pub(crate) struct Texts {
    items: Vec<String>,
    used: usize,
}

impl Texts {
    pub(crate) fn clear(&mut self) {
        self.used = 0;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Stores a copy of `s`; returns its index.
    pub(crate) fn push(&mut self, s: &str) -> usize {
        if self.used == self.items.len() {
            self.items.push(String::new());
        }
        let item = &mut self.items[self.used];
        item.clear();
        item.push_str(s);
        self.used += 1;
        self.used - 1
    }

    pub(crate) fn get(&self, i: usize) -> &str {
        self.items.get(i).map_or("", String::as_str)
    }
}

/// A value of a parsed line: text by index into the line's [`Texts`], or a number.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ValueRef {
    Text(usize),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// Nanoseconds since the epoch.
    Time(i64),
}

/// Rows a new builder has room for, at least and at most (a batch larger than the previous
/// one grows its builders as usual).
const BUILDER_ROWS_MIN: usize = 1024;
const BUILDER_ROWS_MAX: usize = 1 << 20;
/// Text bytes a builder reserves at most.
const BUILDER_TEXT_BYTES_MAX: usize = 64 << 20;
/// A SYMBOL column's dictionary is kept from batch to batch (so the codes a receiver's series
/// cache holds stay valid) while it has at most this many values, or no more than the batch
/// it went out with had rows...
const DICTIONARY_VALUES_MIN: usize = 4096;
/// ...and at most this many bytes of text.
const DICTIONARY_BYTES_MAX: usize = 16 << 20;

/// A SYMBOL column's rows as codes into a dictionary of their distinct values, sent as a
/// dictionary array (storage's `write_type`). The dictionary outlives the batch: a value keeps
/// its code across hand-offs until the dictionary outgrows its bounds and starts again, so a
/// receiver can remember a series' codes instead of looking its tags up on every line.
struct SymbolBuilder {
    keys: Vec<i32>,
    nulls: NullBufferBuilder,
    codes: HashMap<Box<str>, i32>,
    offsets: Vec<i32>,
    bytes: Vec<u8>,
    /// The dictionary as an array, while no value has been added since it was made: batches
    /// that share it can be combined without merging dictionaries.
    values: Option<ArrayRef>,
}

impl SymbolBuilder {
    fn with_capacity(rows: usize) -> SymbolBuilder {
        SymbolBuilder {
            keys: Vec::with_capacity(rows),
            nulls: NullBufferBuilder::new(rows),
            codes: HashMap::default(),
            offsets: vec![0],
            bytes: Vec::new(),
            values: None,
        }
    }

    /// The code of `value`, adding it to the dictionary if it is new. The caller bounds the
    /// text a batch holds (`TableBatch::text_bytes`), so the offsets cannot overflow.
    fn code_of(&mut self, value: &str) -> i32 {
        if let Some(&code) = self.codes.get(value) {
            return code;
        }
        let code = self.codes.len() as i32;
        self.bytes.extend_from_slice(value.as_bytes());
        self.offsets.push(self.bytes.len() as i32);
        self.codes.insert(value.into(), code);
        self.values = None;
        code
    }

    fn append_code(&mut self, code: i32) {
        debug_assert!((code as usize) < self.codes.len());
        self.keys.push(code);
        self.nulls.append_non_null();
    }

    fn append_null(&mut self) {
        self.keys.push(0);
        self.nulls.append_null();
    }

    fn len(&self) -> usize {
        self.keys.len()
    }

    /// The rows so far as a dictionary array, leaving room for as many again. Returns whether
    /// the dictionary started again (the codes handed out so far are void).
    fn finish(&mut self) -> Result<(ArrayRef, bool), StorageError> {
        let rows = self.keys.len();
        let keys = std::mem::replace(
            &mut self.keys,
            Vec::with_capacity(rows.clamp(BUILDER_ROWS_MIN, BUILDER_ROWS_MAX)),
        );
        let keys = Int32Array::new(ScalarBuffer::from(keys), self.nulls.finish());
        let values = match &self.values {
            Some(values) => values.clone(),
            None => {
                let offsets = OffsetBuffer::new(ScalarBuffer::from(self.offsets.clone()));
                let array: ArrayRef = Arc::new(StringArray::new(
                    offsets,
                    Buffer::from_slice_ref(&self.bytes),
                    None,
                ));
                self.values = Some(array.clone());
                array
            }
        };
        // Keys index the dictionary by construction; `try_new` checks that once per batch.
        let array = DictionaryArray::try_new(keys, values)
            .map_err(|e| StorageError::Internal(format!("symbol codes: {e}")))?;
        let outgrown = self.codes.len() > DICTIONARY_VALUES_MIN.max(rows)
            || self.bytes.len() > DICTIONARY_BYTES_MAX;
        if outgrown {
            self.codes.clear();
            self.offsets.truncate(1);
            self.bytes.clear();
            self.values = None;
        }
        Ok((Arc::new(array), outgrown))
    }
}

enum Builder {
    Bool(BooleanBuilder),
    I8(Int8Builder),
    I16(Int16Builder),
    I32(Int32Builder),
    I64(Int64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    Ts(TimestampNanosecondBuilder),
    Date(Date64Builder),
    /// VARCHAR and UUID columns take text.
    Text(StringBuilder),
    /// SYMBOL columns take text as codes into the receiver's dictionary (`write_type`).
    Symbol(SymbolBuilder),
    /// Columns ILP cannot write (BINARY): always NULL.
    Nulls(usize),
}

impl Builder {
    fn new(column_type: ColumnType) -> Builder {
        Builder::with_capacity(column_type, BUILDER_ROWS_MIN, 0)
    }

    /// A builder with room for `rows` values (and `text_bytes` bytes of text), so that a batch
    /// like the previous one fills it without growing it.
    fn with_capacity(column_type: ColumnType, rows: usize, text_bytes: usize) -> Builder {
        match column_type {
            ColumnType::Boolean => Builder::Bool(BooleanBuilder::with_capacity(rows)),
            ColumnType::Byte => Builder::I8(Int8Builder::with_capacity(rows)),
            ColumnType::Short => Builder::I16(Int16Builder::with_capacity(rows)),
            ColumnType::Int => Builder::I32(Int32Builder::with_capacity(rows)),
            ColumnType::Long => Builder::I64(Int64Builder::with_capacity(rows)),
            ColumnType::Float => Builder::F32(Float32Builder::with_capacity(rows)),
            ColumnType::Double => Builder::F64(Float64Builder::with_capacity(rows)),
            ColumnType::Timestamp => Builder::Ts(TimestampNanosecondBuilder::with_capacity(rows)),
            ColumnType::Date => Builder::Date(Date64Builder::with_capacity(rows)),
            ColumnType::Symbol => Builder::Symbol(SymbolBuilder::with_capacity(rows)),
            ColumnType::Varchar | ColumnType::Uuid => {
                Builder::Text(StringBuilder::with_capacity(rows, text_bytes))
            }
            ColumnType::Binary => Builder::Nulls(0),
        }
    }

    /// The values so far as an array, leaving the builder empty with room for as many again;
    /// also whether a SYMBOL column's dictionary started again.
    fn take(&mut self, column_type: ColumnType) -> Result<(ArrayRef, bool), StorageError> {
        let array = match self {
            Builder::Symbol(b) => return b.finish(),
            Builder::Bool(b) => Arc::new(b.finish()) as ArrayRef,
            Builder::I8(b) => Arc::new(b.finish()),
            Builder::I16(b) => Arc::new(b.finish()),
            Builder::I32(b) => Arc::new(b.finish()),
            Builder::I64(b) => Arc::new(b.finish()),
            Builder::F32(b) => Arc::new(b.finish()),
            Builder::F64(b) => Arc::new(b.finish()),
            Builder::Ts(b) => Arc::new(b.finish()),
            Builder::Date(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Nulls(n) => {
                let rows = std::mem::take(n);
                arrow_array::new_null_array(&column_type.arrow_type(), rows)
            }
        };
        let rows = array.len().clamp(BUILDER_ROWS_MIN, BUILDER_ROWS_MAX);
        let text_bytes = match self {
            Builder::Text(_) => array
                .as_string_opt::<i32>()
                .map_or(0, |a| a.value_data().len()),
            _ => 0,
        }
        .min(BUILDER_TEXT_BYTES_MAX);
        *self = Builder::with_capacity(column_type, rows, text_bytes);
        Ok((array, false))
    }

    fn append_null(&mut self) {
        match self {
            Builder::Bool(b) => b.append_null(),
            Builder::I8(b) => b.append_null(),
            Builder::I16(b) => b.append_null(),
            Builder::I32(b) => b.append_null(),
            Builder::I64(b) => b.append_null(),
            Builder::F32(b) => b.append_null(),
            Builder::F64(b) => b.append_null(),
            Builder::Ts(b) => b.append_null(),
            Builder::Date(b) => b.append_null(),
            Builder::Text(b) => b.append_null(),
            Builder::Symbol(b) => b.append_null(),
            Builder::Nulls(n) => *n += 1,
        }
    }

    /// Appends a value already checked by [`check`].
    fn append(&mut self, value: ValueRef, texts: &Texts) {
        match (self, value) {
            (Builder::Bool(b), ValueRef::Bool(v)) => b.append_value(v),
            (Builder::I8(b), ValueRef::Int(v)) => b.append_value(v as i8),
            (Builder::I16(b), ValueRef::Int(v)) => b.append_value(v as i16),
            (Builder::I32(b), ValueRef::Int(v)) => b.append_value(v as i32),
            (Builder::I64(b), ValueRef::Int(v)) => b.append_value(v),
            (Builder::F32(b), ValueRef::Float(v)) => b.append_value(v as f32),
            (Builder::F32(b), ValueRef::Int(v)) => b.append_value(v as f32),
            (Builder::F64(b), ValueRef::Float(v)) => b.append_value(v),
            (Builder::F64(b), ValueRef::Int(v)) => b.append_value(v as f64),
            (Builder::Text(b), ValueRef::Text(i)) => b.append_value(texts.get(i)),
            (Builder::Symbol(b), ValueRef::Text(i)) => {
                let code = b.code_of(texts.get(i));
                b.append_code(code);
            }
            (Builder::Ts(b), ValueRef::Time(v)) => b.append_value(v),
            (Builder::Date(b), ValueRef::Time(v)) => b.append_value(v.div_euclid(1_000_000)),
            (other, _) => other.append_null(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Builder::Bool(b) => b.len(),
            Builder::I8(b) => b.len(),
            Builder::I16(b) => b.len(),
            Builder::I32(b) => b.len(),
            Builder::I64(b) => b.len(),
            Builder::F32(b) => b.len(),
            Builder::F64(b) => b.len(),
            Builder::Ts(b) => b.len(),
            Builder::Date(b) => b.len(),
            Builder::Text(b) => b.len(),
            Builder::Symbol(b) => b.len(),
            Builder::Nulls(n) => *n,
        }
    }
}

/// The column named `name`: exactly, else case-insensitively (as SQL finds it).
fn find_column(
    index: &HashMap<String, usize>,
    index_lower: &HashMap<String, usize>,
    name: &str,
) -> Option<usize> {
    index
        .get(name)
        .or_else(|| index_lower.get(&name.to_lowercase()))
        .copied()
}

/// Whether two names are equal, compared inline: for names of a few bytes, the call into the
/// C library's `memcmp` that slice equality makes costs more than the comparison.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut a, mut b) = (a, b);
    while let (Some((x, rest_a)), Some((y, rest_b))) =
        (a.split_first_chunk::<8>(), b.split_first_chunk::<8>())
    {
        if u64::from_ne_bytes(*x) != u64::from_ne_bytes(*y) {
            return false;
        }
        (a, b) = (rest_a, rest_b);
    }
    a.iter().zip(b).all(|(x, y)| x == y)
}

/// Whether `value` can be stored in a column of `column_type` (with its range), else why not.
fn check(column_type: ColumnType, value: ValueRef, texts: &Texts) -> Result<(), String> {
    let ok = match (column_type, value) {
        (ColumnType::Symbol | ColumnType::Varchar, ValueRef::Text(_)) => true,
        (ColumnType::Uuid, ValueRef::Text(i)) => {
            if sundial_storage::parse_uuid(texts.get(i)).is_none() {
                return Err(format!("'{}' is not a UUID", texts.get(i)));
            }
            true
        }
        (ColumnType::Long, ValueRef::Int(_)) => true,
        (ColumnType::Int, ValueRef::Int(v)) => {
            i32::try_from(v).is_ok() || return Err(format!("{v} is out of range for INT"))
        }
        (ColumnType::Short, ValueRef::Int(v)) => {
            i16::try_from(v).is_ok() || return Err(format!("{v} is out of range for SHORT"))
        }
        (ColumnType::Byte, ValueRef::Int(v)) => {
            i8::try_from(v).is_ok() || return Err(format!("{v} is out of range for BYTE"))
        }
        (ColumnType::Double | ColumnType::Float, ValueRef::Float(_) | ValueRef::Int(_)) => true,
        (ColumnType::Boolean, ValueRef::Bool(_)) => true,
        (ColumnType::Timestamp | ColumnType::Date, ValueRef::Time(_)) => true,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "cannot store {} in a {} column",
            value_kind(value),
            column_type.name()
        ))
    }
}

fn value_kind(value: ValueRef) -> &'static str {
    match value {
        ValueRef::Text(_) => "a string",
        ValueRef::Int(_) => "an integer",
        ValueRef::Float(_) => "a float",
        ValueRef::Bool(_) => "a boolean",
        ValueRef::Time(_) => "a timestamp",
    }
}

/// Text a table's buffered rows may hold before they go to the sink, whatever their number:
/// it bounds a batch's memory and keeps a SYMBOL dictionary's offsets far from overflowing.
pub(crate) const BATCH_TEXT_BYTES_MAX: usize = 64 << 20;

/// The SYMBOL columns a series' tags go to, with their codes in the batch's dictionaries, in
/// the order they are appended: what a receiver remembers of a series (see `series`).
pub(crate) type TagCodes = Vec<(usize, i32)>;

pub(crate) struct TableBatch {
    table: Arc<Table>,
    sink: Arc<TableSink>,
    meta: Arc<TableMeta>,
    /// Column name to index, exact and lower-cased (case-insensitive fallback).
    index: HashMap<String, usize>,
    index_lower: HashMap<String, usize>,
    builders: Vec<Builder>,
    rows: usize,
    /// Bytes of text appended since the last hand-off (at most `BATCH_TEXT_BYTES_MAX` plus one
    /// line).
    text_bytes: usize,
    oldest: Option<Instant>,
    touched: Vec<bool>,
    columns_of_line: Vec<usize>,
    /// The previous line's keys and their columns: senders repeat the same keys in the same
    /// order, so the n-th key is usually found by one comparison, without hashing. One list
    /// for whole lines (tags, then fields), one for the fields of lines of a known series.
    last_keys: Vec<(String, usize)>,
    field_keys: Vec<(String, usize)>,
    /// Changes whenever column indexes or symbol codes handed out before may no longer hold:
    /// a remembered series is valid only with the epoch it was resolved in.
    epoch: u64,
    /// The receiver (`Ingestor`) whose rows these are, for the sink's watermarks.
    receiver: u64,
}

impl TableBatch {
    pub fn new(table: Arc<Table>, sink: Arc<TableSink>, receiver: u64) -> TableBatch {
        let mut batch = TableBatch {
            receiver,
            meta: table.meta(),
            table,
            sink,
            index: HashMap::default(),
            index_lower: HashMap::default(),
            builders: Vec::new(),
            rows: 0,
            text_bytes: 0,
            oldest: None,
            touched: Vec::new(),
            columns_of_line: Vec::new(),
            last_keys: Vec::new(),
            field_keys: Vec::new(),
            epoch: 0,
        };
        batch.reset_schema();
        batch
    }

    fn reset_schema(&mut self) {
        self.meta = self.table.meta();
        self.last_keys.clear();
        self.field_keys.clear();
        self.epoch += 1;
        let columns = self.meta.columns.iter().enumerate();
        self.index = columns.clone().map(|(i, c)| (c.name.clone(), i)).collect();
        self.index_lower = columns.map(|(i, c)| (c.name.to_lowercase(), i)).collect();
        self.builders = self
            .meta
            .columns
            .iter()
            .map(|c| Builder::new(c.column_type))
            .collect();
        self.touched = vec![false; self.builders.len()];
        self.rows = 0;
        self.text_bytes = 0;
        self.oldest = None;
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn text_bytes(&self) -> usize {
        self.text_bytes
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn oldest(&self) -> Option<Instant> {
        self.oldest
    }

    pub fn table_name(&self) -> &str {
        &self.meta.name
    }

    /// Whether DROP TABLE dropped the table these rows are for (see [`Table::is_dropped`]).
    pub fn is_dropped(&self) -> bool {
        self.table.is_dropped()
    }

    fn column(&self, name: &str) -> Option<usize> {
        find_column(&self.index, &self.index_lower, name)
    }

    /// The column of the key at `position` of a line, through `cache` (the previous line's
    /// keys at each position).
    fn cached_column(
        cache: &mut Vec<(String, usize)>,
        position: usize,
        name: &str,
        lookup: impl Fn(&str) -> Option<usize>,
    ) -> Option<usize> {
        if let Some((key, i)) = cache.get(position)
            && same_bytes(key.as_bytes(), name.as_bytes())
        {
            return Some(*i);
        }
        let i = lookup(name)?;
        match cache.get_mut(position) {
            Some(slot) => {
                slot.0.clear();
                slot.0.push_str(name);
                slot.1 = i;
            }
            None => cache.push((name.to_string(), i)),
        }
        Some(i)
    }

    /// Finds the column of every value into `columns_of_line`; false if one is missing.
    fn resolve_columns(&mut self, texts: &Texts, values: &[(usize, ColumnType, ValueRef)]) -> bool {
        self.columns_of_line.clear();
        let (index, index_lower) = (&self.index, &self.index_lower);
        let lookup = |name: &str| find_column(index, index_lower, name);
        for (position, (key, _, _)) in values.iter().enumerate() {
            match Self::cached_column(&mut self.last_keys, position, texts.get(*key), lookup) {
                Some(i) => self.columns_of_line.push(i),
                None => return false,
            }
        }
        true
    }

    /// The column of field `name`, the `position`-th field of a line of a known series; `None`
    /// when the table has no such column (the line then takes [`add_row`](Self::add_row)).
    pub fn field_column(&mut self, position: usize, name: &str) -> Option<usize> {
        let (index, index_lower) = (&self.index, &self.index_lower);
        let lookup = |name: &str| find_column(index, index_lower, name);
        Self::cached_column(&mut self.field_keys, position, name, lookup)
    }

    /// Whether `value` can go to `column` as a field: it fits the column's type, and the column
    /// is not the designated timestamp.
    pub fn field_fits(&self, column: usize, value: ValueRef, texts: &Texts) -> bool {
        Some(column) != self.meta.timestamp_index
            && self
                .meta
                .columns
                .get(column)
                .is_some_and(|c| check(c.column_type, value, texts).is_ok())
    }

    /// Checks and buffers one row whose first `tags` values are its tags; adds missing columns
    /// first (committing buffered rows). The tags that went to SYMBOL columns are listed in
    /// `series`, with their codes; returns whether those were all of them, so that later lines
    /// of the series can skip to [`add_known_row`](Self::add_known_row).
    pub fn add_row(
        &mut self,
        texts: &Texts,
        values: &[(usize, ColumnType, ValueRef)],
        tags: usize,
        timestamp: i64,
        series: &mut TagCodes,
    ) -> Result<bool, IngestError> {
        if !self.resolve_columns(texts, values) {
            let missing: Vec<(String, ColumnType)> = values
                .iter()
                .filter(|(key, _, _)| self.column(texts.get(*key)).is_none())
                .map(|(key, t, _)| (texts.get(*key).to_string(), *t))
                .collect();
            self.add_columns(&missing)?;
            if !self.resolve_columns(texts, values) {
                return Err(StorageError::Internal("added columns vanished".into()).into());
            }
        }
        let ts_index = self.meta.timestamp_index;
        for (position, (key, _, value)) in values.iter().enumerate() {
            let name = texts.get(*key);
            let i = self.columns_of_line[position];
            if Some(i) == ts_index {
                return Err(IngestError::Rejected(format!(
                    "'{name}' is the designated timestamp column; it cannot be set as a tag or field"
                )));
            }
            check(self.meta.columns[i].column_type, *value, texts)
                .map_err(|why| IngestError::Rejected(format!("column '{name}': {why}")))?;
        }
        // Checked: from here the row is appended whole.
        self.start_row(timestamp);
        series.clear();
        let mut all_symbols = true;
        for (position, (_, _, value)) in values.iter().enumerate() {
            let i = self.columns_of_line[position];
            if !self.touch(i, *value, texts) {
                continue;
            }
            match (&mut self.builders[i], value) {
                (Builder::Symbol(b), ValueRef::Text(t)) if position < tags => {
                    let code = b.code_of(texts.get(*t));
                    b.append_code(code);
                    series.push((i, code));
                }
                (builder, value) => {
                    all_symbols &= position >= tags;
                    builder.append(*value, texts);
                }
            }
        }
        self.end_row();
        Ok(all_symbols)
    }

    /// Buffers one row of a known series: its tags as `series` lists them (resolved in the
    /// current epoch), and `fields` (column, value), each found by `field_column` and checked
    /// by `field_fits`.
    pub fn add_known_row(
        &mut self,
        series: &[(usize, i32)],
        fields: &[(usize, ValueRef)],
        texts: &Texts,
        timestamp: i64,
    ) {
        self.start_row(timestamp);
        for &(i, code) in series {
            if let Some(Builder::Symbol(b)) = self.builders.get_mut(i) {
                b.append_code(code);
                self.touched[i] = true;
            }
        }
        for &(i, value) in fields {
            if self.touch(i, value, texts) {
                self.builders[i].append(value, texts);
            }
        }
        self.end_row();
    }

    /// Marks column `i` as set by the row, counting `value`'s text; false when an earlier
    /// value of the row set it (the first of repeated keys wins).
    fn touch(&mut self, i: usize, value: ValueRef, texts: &Texts) -> bool {
        if self.touched[i] {
            return false;
        }
        self.touched[i] = true;
        if let ValueRef::Text(t) = value {
            self.text_bytes += texts.get(t).len();
        }
        true
    }

    /// Appends the designated timestamp of a new row; every column is untouched but that one.
    fn start_row(&mut self, timestamp: i64) {
        self.touched.iter_mut().for_each(|t| *t = false);
        if let Some(ts) = self.meta.timestamp_index {
            if let Builder::Ts(b) = &mut self.builders[ts] {
                b.append_value(timestamp);
            }
            self.touched[ts] = true;
        }
    }

    /// Appends NULL to every column the row did not touch.
    fn end_row(&mut self) {
        for (b, touched) in self.builders.iter_mut().zip(&self.touched) {
            if !touched {
                b.append_null();
            }
        }
        debug_assert!(self.builders.iter().all(|b| b.len() == self.rows + 1));
        self.rows += 1;
        self.oldest.get_or_insert_with(Instant::now);
    }

    fn add_columns(&mut self, missing: &[(String, ColumnType)]) -> Result<(), IngestError> {
        // The buffered rows go to the sink under the old schema; it takes mixed schemas.
        self.hand_off(usize::MAX)?;
        let mut writer = self.table.writer()?;
        for (name, column_type) in missing {
            match writer.add_column(name, *column_type) {
                Ok(()) => {}
                // Another receiver added it first.
                Err(StorageError::AlreadyExists(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        drop(writer);
        self.reset_schema();
        Ok(())
    }

    /// Hands the buffered rows to the table's sink, which commits once `commit_rows` are
    /// pending there (and makes this wait while the table is far behind); returns the rows
    /// handed off.
    pub fn hand_off(&mut self, commit_rows: usize) -> Result<u64, IngestError> {
        if self.rows == 0 {
            return Ok(0);
        }
        let rows = self.rows;
        let arrived = self.oldest.unwrap_or_else(Instant::now);
        let fields: Vec<Field> = self
            .meta
            .columns
            .iter()
            .map(|c| Field::new(&c.name, c.column_type.write_type(), true))
            .collect();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(fields.len());
        for (b, c) in self.builders.iter_mut().zip(&self.meta.columns) {
            match b.take(c.column_type) {
                Ok((column, restarted)) => {
                    self.epoch += u64::from(restarted);
                    columns.push(column);
                }
                Err(e) => {
                    // Some builders are taken, some not: start afresh rather than misalign.
                    tracing::error!("{rows} row(s) for '{}' dropped: {e}", self.meta.name);
                    self.reset_schema();
                    return Err(e.into());
                }
            }
        }
        self.rows = 0;
        self.text_bytes = 0;
        self.oldest = None;
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
            .map_err(|e| StorageError::Internal(e.to_string()))?;
        self.sink
            .submit(batch, arrived, commit_rows, self.receiver)?;
        Ok(rows as u64)
    }

    pub fn receiver(&self) -> u64 {
        self.receiver
    }

    pub fn sink(&self) -> &Arc<TableSink> {
        &self.sink
    }
}

#[cfg(test)]
mod tests {
    use super::same_bytes;

    #[test]
    fn same_bytes_is_slice_equality() {
        let words: Vec<Vec<u8>> = (0..40)
            .flat_map(|len: usize| {
                let base: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
                let mut variants = vec![base.clone()];
                for at in [0, len / 2, len.saturating_sub(1)] {
                    if let Some(byte) = base.get(at) {
                        let mut changed = base.clone();
                        changed[at] = byte ^ 1;
                        variants.push(changed);
                    }
                }
                variants
            })
            .collect();
        for a in &words {
            for b in &words {
                assert_eq!(same_bytes(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }
}
