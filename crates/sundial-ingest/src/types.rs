//! The Arrow type each column type travels as between a writer and a table's sink.
//!
//! The ILP builders produce these types, and every other writer's batch is cast to them
//! ([`crate::Sinks::write`]), so the sink can merge batches of any source without casting.
//! They are the storage's Arrow types except for the text-like columns, which all travel as
//! `Utf8` (storage reads SYMBOL as a dictionary and UUID as its canonical text).

use arrow_schema::DataType;
use sundial_storage::ColumnType;

/// The Arrow type of a column of `column_type` in a batch on its way to a table.
pub(crate) fn batch_type(column_type: ColumnType) -> DataType {
    match column_type {
        ColumnType::Symbol | ColumnType::Varchar | ColumnType::Uuid => DataType::Utf8,
        other => other.arrow_type(),
    }
}
