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
    Int16Builder, Int32Builder, Int64Builder, StringBuilder, StringDictionaryBuilder,
    TimestampNanosecondBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, RecordBatch};
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
/// Distinct symbols a SYMBOL builder has room for at first.
const SYMBOL_VALUES_MIN: usize = 256;
/// Text bytes a builder reserves at most.
const BUILDER_TEXT_BYTES_MAX: usize = 64 << 20;

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
    /// SYMBOL columns take text keyed by the batch's own dictionary (`write_type`).
    Symbol(StringDictionaryBuilder<Int32Type>),
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
            ColumnType::Symbol => Builder::Symbol(StringDictionaryBuilder::with_capacity(
                rows,
                SYMBOL_VALUES_MIN,
                text_bytes,
            )),
            ColumnType::Varchar | ColumnType::Uuid => {
                Builder::Text(StringBuilder::with_capacity(rows, text_bytes))
            }
            ColumnType::Binary => Builder::Nulls(0),
        }
    }

    /// The values so far as an array, leaving the builder empty with room for as many again.
    fn take(&mut self, column_type: ColumnType) -> ArrayRef {
        let array = self.finish(column_type);
        let rows = array.len().clamp(BUILDER_ROWS_MIN, BUILDER_ROWS_MAX);
        let text_bytes = match self {
            Builder::Text(_) => array
                .as_string_opt::<i32>()
                .map_or(0, |a| a.value_data().len()),
            Builder::Symbol(_) => array
                .as_any_dictionary_opt()
                .and_then(|d| d.values().as_string_opt::<i32>())
                .map_or(0, |v| v.value_data().len()),
            _ => 0,
        }
        .min(BUILDER_TEXT_BYTES_MAX);
        *self = Builder::with_capacity(column_type, rows, text_bytes);
        array
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
            (Builder::Symbol(b), ValueRef::Text(i)) => b.append_value(texts.get(i)),
            (Builder::Ts(b), ValueRef::Time(v)) => b.append_value(v),
            (Builder::Date(b), ValueRef::Time(v)) => b.append_value(v.div_euclid(1_000_000)),
            (other, _) => other.append_null(),
        }
    }

    fn finish(&mut self, column_type: ColumnType) -> ArrayRef {
        match self {
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::I8(b) => Arc::new(b.finish()),
            Builder::I16(b) => Arc::new(b.finish()),
            Builder::I32(b) => Arc::new(b.finish()),
            Builder::I64(b) => Arc::new(b.finish()),
            Builder::F32(b) => Arc::new(b.finish()),
            Builder::F64(b) => Arc::new(b.finish()),
            Builder::Ts(b) => Arc::new(b.finish()),
            Builder::Date(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Symbol(b) => Arc::new(b.finish()),
            Builder::Nulls(n) => {
                let rows = std::mem::take(n);
                arrow_array::new_null_array(&column_type.arrow_type(), rows)
            }
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

pub(crate) struct TableBatch {
    table: Arc<Table>,
    sink: Arc<TableSink>,
    meta: Arc<TableMeta>,
    /// Column name to index, exact and lower-cased (case-insensitive fallback).
    index: HashMap<String, usize>,
    index_lower: HashMap<String, usize>,
    builders: Vec<Builder>,
    rows: usize,
    oldest: Option<Instant>,
    touched: Vec<bool>,
    columns_of_line: Vec<usize>,
    /// The previous line's keys and their columns: senders repeat the same keys in the same
    /// order, so the n-th key is usually found by one comparison, without hashing.
    last_keys: Vec<(String, usize)>,
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
            oldest: None,
            touched: Vec::new(),
            columns_of_line: Vec::new(),
            last_keys: Vec::new(),
        };
        batch.reset_schema();
        batch
    }

    fn reset_schema(&mut self) {
        self.meta = self.table.meta();
        self.last_keys.clear();
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
        self.oldest = None;
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn oldest(&self) -> Option<Instant> {
        self.oldest
    }

    pub fn table_name(&self) -> &str {
        &self.meta.name
    }

    fn column(&self, name: &str) -> Option<usize> {
        self.index
            .get(name)
            .or_else(|| self.index_lower.get(&name.to_lowercase()))
            .copied()
    }

    /// Finds the column of every value into `columns_of_line`; false if one is missing.
    fn resolve_columns(&mut self, texts: &Texts, values: &[(usize, ColumnType, ValueRef)]) -> bool {
        self.columns_of_line.clear();
        for (position, (key, _, _)) in values.iter().enumerate() {
            let name = texts.get(*key);
            let cached = self
                .last_keys
                .get(position)
                .filter(|(k, _)| k == name)
                .map(|(_, i)| *i);
            let i = match cached.or_else(|| self.column(name)) {
                Some(i) => i,
                None => return false,
            };
            if cached.is_none() {
                if position < self.last_keys.len() {
                    let slot = &mut self.last_keys[position];
                    slot.0.clear();
                    slot.0.push_str(name);
                    slot.1 = i;
                } else {
                    self.last_keys.push((name.to_string(), i));
                }
            }
            self.columns_of_line.push(i);
        }
        true
    }

    /// Checks and buffers one row; adds missing columns first (committing buffered rows).
    pub fn add_row(
        &mut self,
        texts: &Texts,
        values: &[(usize, ColumnType, ValueRef)],
        timestamp: i64,
    ) -> Result<(), IngestError> {
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
        self.touched.iter_mut().for_each(|t| *t = false);
        if let Some(ts) = ts_index {
            if let Builder::Ts(b) = &mut self.builders[ts] {
                b.append_value(timestamp);
            }
            self.touched[ts] = true;
        }
        for (i, (_, _, value)) in self.columns_of_line.iter().zip(values) {
            if !self.touched[*i] {
                self.builders[*i].append(*value, texts);
                self.touched[*i] = true;
            }
        }
        for (b, touched) in self.builders.iter_mut().zip(&self.touched) {
            if !touched {
                b.append_null();
            }
        }
        debug_assert!(self.builders.iter().all(|b| b.len() == self.rows + 1));
        self.rows += 1;
        self.oldest.get_or_insert_with(Instant::now);
        Ok(())
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
        let columns: Vec<ArrayRef> = self
            .builders
            .iter_mut()
            .zip(&self.meta.columns)
            .map(|(b, c)| b.take(c.column_type))
            .collect();
        self.rows = 0;
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
