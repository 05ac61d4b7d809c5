//! A batch made fit for a table: the one place a batch is cast to a table's column types.
//!
//! Every writer (ILP builders, INSERT, COPY, CSV loads, CREATE TABLE AS) hands
//! [`conform`]'s output to `TableWriter::append`: each column whose Arrow type `append`
//! does not take as it is is cast to [`ColumnType::write_type`], and columns are named as
//! the table names them. Whether a value fits (a number in range, a string that parses) is
//! the cast's to decide; its error names the column.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

use crate::column::accepts;
use crate::error::{Result, StorageError};
use crate::txn::TableMeta;
use crate::types::ColumnType;

impl ColumnType {
    /// The Arrow type a writer builds for a column of this type: what `append` takes without
    /// a cast (text for VARCHAR and UUID; for SYMBOL, text keyed by a batch's own dictionary,
    /// so that `append` looks up each distinct symbol once per batch, not once per row).
    pub fn write_type(self) -> DataType {
        match self {
            ColumnType::Symbol => {
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
            }
            ColumnType::Varchar | ColumnType::Uuid => DataType::Utf8,
            other => other.arrow_type(),
        }
    }
}

/// `array` as a column of `column_type` takes it: as it is, or cast to its write type.
pub fn conform_column(array: &ArrayRef, column_type: ColumnType, name: &str) -> Result<ArrayRef> {
    if accepts(column_type, array.data_type()) {
        return Ok(array.clone());
    }
    to_write_type(array, column_type, name)
}

/// `array` as exactly [`ColumnType::write_type`] (what batches of any source are merged as).
pub fn to_write_type(array: &ArrayRef, column_type: ColumnType, name: &str) -> Result<ArrayRef> {
    if array.data_type() == &column_type.write_type() {
        return Ok(array.clone());
    }
    let options = arrow_cast::CastOptions {
        safe: false,
        ..Default::default()
    };
    arrow_cast::cast_with_options(array, &column_type.write_type(), &options).map_err(|e| {
        StorageError::InvalidInput(format!(
            "column '{name}' is {} and a value does not convert: {e}",
            column_type.name()
        ))
    })
}

/// `batch` with every column cast as [`conform_column`] says and named as the table names
/// it. A column the table does not have is an error.
pub fn conform(batch: &RecordBatch, meta: &TableMeta) -> Result<RecordBatch> {
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let index = meta.column_index(field.name()).ok_or_else(|| {
            StorageError::NotFound(format!(
                "column '{}' does not exist in table '{}'",
                field.name(),
                meta.name
            ))
        })?;
        let target = &meta.columns[index];
        let column = conform_column(column, target.column_type, &target.name)?;
        fields.push(Field::new(&target.name, column.data_type().clone(), true));
        columns.push(column);
    }
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
    .map_err(|e| StorageError::Internal(format!("conformed batch: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ColumnType as C;
    use arrow_array::{Int64Array, StringArray, new_null_array};

    const TYPES: [C; 13] = [
        C::Boolean,
        C::Byte,
        C::Short,
        C::Int,
        C::Long,
        C::Float,
        C::Double,
        C::Timestamp,
        C::Date,
        C::Symbol,
        C::Varchar,
        C::Uuid,
        C::Binary,
    ];

    /// What `accepts` says is what `from_arrow` does, and every write type is taken as it is.
    #[test]
    fn accepts_agrees_with_from_arrow() {
        let candidates = [
            DataType::Boolean,
            DataType::Int8,
            DataType::Int16,
            DataType::Int32,
            DataType::Int64,
            DataType::UInt8,
            DataType::UInt16,
            DataType::UInt32,
            DataType::UInt64,
            DataType::Float32,
            DataType::Float64,
            DataType::Utf8,
            DataType::LargeUtf8,
            DataType::Date32,
            DataType::Date64,
            DataType::LargeBinary,
            DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, None),
        ];
        for t in TYPES {
            assert!(accepts(t, &t.write_type()), "{t:?}");
            if t == C::Symbol {
                // Taking text for a SYMBOL needs the writer's dictionary.
                continue;
            }
            for d in &candidates {
                let array = new_null_array(d, 1);
                let taken = crate::column::from_arrow(&array, t, "c", None).is_ok();
                assert_eq!(accepts(t, d), taken, "{t:?} {d:?}");
            }
        }
    }

    #[test]
    fn numbers_and_text_are_cast_and_bad_values_name_the_column() {
        let longs: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
        let as_double = conform_column(&longs, C::Double, "v").expect("casts");
        assert_eq!(as_double.data_type(), &DataType::Float64);
        let kept = conform_column(&longs, C::Long, "v").expect("keeps");
        assert!(Arc::ptr_eq(&kept, &longs));
        let text: ArrayRef = Arc::new(StringArray::from(vec!["1.5", "abc"]));
        let e = conform_column(&text, C::Double, "price").expect_err("abc");
        assert!(e.to_string().contains("'price'"), "{e}");
    }
}
