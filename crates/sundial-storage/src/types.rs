//! Column types: their SQL names, their on-disk shape and their Arrow form.

use std::sync::Arc;

use arrow_schema::{DataType, TimeUnit};

/// A Sundial column type. The discriminant is the on-disk type code (never renumber).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ColumnType {
    Boolean = 1,
    Byte = 2,
    Short = 3,
    Int = 4,
    Long = 5,
    Float = 6,
    Double = 7,
    /// Nanoseconds since the Unix epoch, UTC.
    Timestamp = 8,
    /// Milliseconds since the Unix epoch, UTC (QuestDB's DATE).
    Date = 9,
    /// A repeated string stored as an `i32` key into a per-table, per-column dictionary.
    Symbol = 10,
    Varchar = 11,
    Uuid = 12,
    Binary = 13,
}

/// How a column's values are laid out in its data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `width` little-endian bytes per row.
    Fixed { width: usize },
    /// One bit per row, least significant bit first (Arrow's bit order).
    Bits,
    /// Bytes in `N.d` plus `u64` end offsets in `N.o`.
    Var,
}

impl ColumnType {
    pub const ALL: [ColumnType; 13] = [
        ColumnType::Boolean,
        ColumnType::Byte,
        ColumnType::Short,
        ColumnType::Int,
        ColumnType::Long,
        ColumnType::Float,
        ColumnType::Double,
        ColumnType::Timestamp,
        ColumnType::Date,
        ColumnType::Symbol,
        ColumnType::Varchar,
        ColumnType::Uuid,
        ColumnType::Binary,
    ];

    /// The type's name as written in SQL and shown by `SHOW COLUMNS`.
    pub fn name(self) -> &'static str {
        match self {
            ColumnType::Boolean => "BOOLEAN",
            ColumnType::Byte => "BYTE",
            ColumnType::Short => "SHORT",
            ColumnType::Int => "INT",
            ColumnType::Long => "LONG",
            ColumnType::Float => "FLOAT",
            ColumnType::Double => "DOUBLE",
            ColumnType::Timestamp => "TIMESTAMP",
            ColumnType::Date => "DATE",
            ColumnType::Symbol => "SYMBOL",
            ColumnType::Varchar => "VARCHAR",
            ColumnType::Uuid => "UUID",
            ColumnType::Binary => "BINARY",
        }
    }

    /// Parses a SQL type name, accepting QuestDB's names and the common PostgreSQL aliases.
    pub fn parse(name: &str) -> Option<ColumnType> {
        let upper = name.trim().to_ascii_uppercase();
        let t = match upper.as_str() {
            "BOOLEAN" | "BOOL" => ColumnType::Boolean,
            "BYTE" | "TINYINT" | "INT1" => ColumnType::Byte,
            "SHORT" | "SMALLINT" | "INT2" => ColumnType::Short,
            "INT" | "INTEGER" | "INT4" => ColumnType::Int,
            "LONG" | "BIGINT" | "INT8" => ColumnType::Long,
            "FLOAT" | "REAL" | "FLOAT4" => ColumnType::Float,
            "DOUBLE" | "DOUBLE PRECISION" | "FLOAT8" => ColumnType::Double,
            "TIMESTAMP" | "TIMESTAMP_NS" | "TIMESTAMPTZ" => ColumnType::Timestamp,
            "DATE" => ColumnType::Date,
            "SYMBOL" => ColumnType::Symbol,
            "VARCHAR" | "STRING" | "TEXT" | "CHAR VARYING" | "CHARACTER VARYING" => {
                ColumnType::Varchar
            }
            "UUID" => ColumnType::Uuid,
            "BINARY" | "BYTEA" | "VARBINARY" | "BLOB" => ColumnType::Binary,
            _ => return None,
        };
        Some(t)
    }

    /// Decodes an on-disk type code.
    pub fn from_code(code: u8) -> Option<ColumnType> {
        ColumnType::ALL.into_iter().find(|t| *t as u8 == code)
    }

    pub fn layout(self) -> Layout {
        match self {
            ColumnType::Boolean => Layout::Bits,
            ColumnType::Byte => Layout::Fixed { width: 1 },
            ColumnType::Short => Layout::Fixed { width: 2 },
            ColumnType::Int | ColumnType::Float | ColumnType::Symbol => Layout::Fixed { width: 4 },
            ColumnType::Long | ColumnType::Double | ColumnType::Timestamp | ColumnType::Date => {
                Layout::Fixed { width: 8 }
            }
            ColumnType::Uuid => Layout::Fixed { width: 16 },
            ColumnType::Varchar | ColumnType::Binary => Layout::Var,
        }
    }

    /// The Arrow type a column of this type is read as.
    pub fn arrow_type(self) -> DataType {
        match self {
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::Byte => DataType::Int8,
            ColumnType::Short => DataType::Int16,
            ColumnType::Int => DataType::Int32,
            ColumnType::Long => DataType::Int64,
            ColumnType::Float => DataType::Float32,
            ColumnType::Double => DataType::Float64,
            ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Nanosecond, None),
            ColumnType::Date => DataType::Date64,
            ColumnType::Symbol => {
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
            }
            ColumnType::Varchar => DataType::LargeUtf8,
            // Shown as canonical text (8-4-4-4-12), so literals compare and display naturally.
            ColumnType::Uuid => DataType::Utf8,
            ColumnType::Binary => DataType::LargeBinary,
        }
    }

    /// The Sundial type for an Arrow type, used by `CREATE TABLE AS SELECT` and imports.
    pub fn from_arrow(data_type: &DataType) -> Option<ColumnType> {
        let t = match data_type {
            DataType::Boolean => ColumnType::Boolean,
            DataType::Int8 => ColumnType::Byte,
            DataType::Int16 | DataType::UInt8 => ColumnType::Short,
            DataType::Int32 | DataType::UInt16 => ColumnType::Int,
            DataType::Int64 | DataType::UInt32 | DataType::UInt64 => ColumnType::Long,
            DataType::Float16 | DataType::Float32 => ColumnType::Float,
            DataType::Float64 | DataType::Decimal128(_, _) | DataType::Decimal256(_, _) => {
                ColumnType::Double
            }
            DataType::Timestamp(_, _) => ColumnType::Timestamp,
            DataType::Date32 | DataType::Date64 => ColumnType::Date,
            DataType::Dictionary(_, value) if value.is_string_family() => ColumnType::Symbol,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnType::Varchar,
            DataType::FixedSizeBinary(16) => ColumnType::Uuid,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => ColumnType::Binary,
            DataType::Null => ColumnType::Varchar,
            _ => return None,
        };
        Some(t)
    }

    /// Whether the type can be a designated timestamp.
    pub fn is_timestamp(self) -> bool {
        self == ColumnType::Timestamp
    }
}

/// The Arrow field for a column: nullable, with the Sundial type name in its metadata so that
/// protocol layers can tell SYMBOL from VARCHAR without guessing.
pub fn arrow_field(name: &str, column_type: ColumnType) -> arrow_schema::Field {
    let mut metadata = std::collections::HashMap::new();
    metadata.insert(SUNDIAL_TYPE_KEY.to_string(), column_type.name().to_string());
    arrow_schema::Field::new(name, column_type.arrow_type(), true).with_metadata(metadata)
}

/// Key of the Arrow field metadata entry holding the Sundial type name.
pub const SUNDIAL_TYPE_KEY: &str = "sundial.type";

/// Shared dictionary of a SYMBOL column as read by queries.
pub type SymbolValues = Arc<arrow_array::StringArray>;

trait StringFamily {
    fn is_string_family(&self) -> bool;
}

impl StringFamily for DataType {
    fn is_string_family(&self) -> bool {
        matches!(
            self,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_names_parse() {
        for t in ColumnType::ALL {
            assert_eq!(ColumnType::from_code(t as u8), Some(t));
            assert_eq!(ColumnType::parse(t.name()), Some(t));
            if t != ColumnType::Uuid {
                assert_eq!(ColumnType::from_arrow(&t.arrow_type()), Some(t));
            }
        }
        assert_eq!(ColumnType::from_code(0), None);
        assert_eq!(
            ColumnType::parse("double precision"),
            Some(ColumnType::Double)
        );
        assert_eq!(ColumnType::parse("nonsense"), None);
    }
}
