//! PostgreSQL's types as Sundial shows them: the `pg_type` rows (copied from PostgreSQL 15),
//! the mapping from Arrow types to them, and the per-column declaration ([`PG_TYPE_KEY`]) for
//! the types Arrow cannot tell apart (`name` from `text`, `oid` from `int4`).
//!
//! ```text
//!  Field ─ metadata PG_TYPE_KEY? ─ yes, and stored as its Arrow type ─▶ that type
//!        └ no ────────────────────────────────────────────────────────▶ pg_type_for_arrow
//! ```
//!
//! [`PgTypePlanner`] goes the other way for the casts the dialect writes to a PostgreSQL type by
//! name (`CAST(NULL AS __sundial_pg_type__.name)`): the Arrow type that holds it, declaring it.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef, IntervalUnit, TimeUnit};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::planner::TypePlanner;
use datafusion::sql::sqlparser::ast;
use sundial_sql::names::PG_TYPE_QUALIFIER;
use sundial_storage::ColumnType;

use crate::PG_TYPE_KEY;

/// One row of `pg_type`, as PostgreSQL 15 has it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PgType {
    pub(crate) oid: i32,
    pub(crate) name: &'static str,
    /// What `format_type(oid, -1)` prints.
    pub(crate) sql: &'static str,
    pub(crate) len: i16,
    pub(crate) category: char,
    pub(crate) elem: i32,
    pub(crate) array: i32,
    /// The input function; output, receive and send are named after it.
    pub(crate) input: &'static str,
    pub(crate) align: char,
    pub(crate) storage: char,
    pub(crate) collation: i32,
}

#[allow(clippy::too_many_arguments)]
const fn base(
    oid: i32,
    name: &'static str,
    sql: &'static str,
    len: i16,
    category: char,
    elem: i32,
    array: i32,
    input: &'static str,
    align: char,
    storage: char,
    collation: i32,
) -> PgType {
    PgType {
        oid,
        name,
        sql,
        len,
        category,
        elem,
        array,
        input,
        align,
        storage,
        collation,
    }
}

/// An array type over `elem`.
const fn arr(
    oid: i32,
    name: &'static str,
    sql: &'static str,
    elem: i32,
    align: char,
    collation: i32,
) -> PgType {
    base(
        oid, name, sql, -1, 'A', elem, 0, "array_in", align, 'x', collation,
    )
}

/// The types Sundial shows, copied from a PostgreSQL 15 `pg_type`.
#[rustfmt::skip]
pub(crate) const TYPES: &[PgType] = &[
    base(16, "bool", "boolean", 1, 'B', 0, 1000, "boolin", 'c', 'p', 0),
    base(17, "bytea", "bytea", -1, 'U', 0, 1001, "byteain", 'i', 'x', 0),
    base(18, "char", "\"char\"", 1, 'Z', 0, 1002, "charin", 'c', 'p', 0),
    base(19, "name", "name", 64, 'S', 18, 1003, "namein", 'c', 'p', 950),
    base(20, "int8", "bigint", 8, 'N', 0, 1016, "int8in", 'd', 'p', 0),
    base(21, "int2", "smallint", 2, 'N', 0, 1005, "int2in", 's', 'p', 0),
    base(22, "int2vector", "int2vector", -1, 'A', 21, 1006, "int2vectorin", 'i', 'p', 0),
    base(23, "int4", "integer", 4, 'N', 0, 1007, "int4in", 'i', 'p', 0),
    base(24, "regproc", "regproc", 4, 'N', 0, 1008, "regprocin", 'i', 'p', 0),
    base(25, "text", "text", -1, 'S', 0, 1009, "textin", 'i', 'x', 100),
    base(26, "oid", "oid", 4, 'N', 0, 1028, "oidin", 'i', 'p', 0),
    base(28, "xid", "xid", 4, 'U', 0, 1011, "xidin", 'i', 'p', 0),
    base(194, "pg_node_tree", "pg_node_tree", -1, 'Z', 0, 0, "pg_node_tree_in", 'i', 'x', 950),
    base(1033, "aclitem", "aclitem", 12, 'U', 0, 1034, "aclitemin", 'd', 'p', 0),
    base(30, "oidvector", "oidvector", -1, 'A', 26, 1013, "oidvectorin", 'i', 'p', 0),
    base(114, "json", "json", -1, 'U', 0, 199, "json_in", 'i', 'x', 0),
    base(700, "float4", "real", 4, 'N', 0, 1021, "float4in", 'i', 'p', 0),
    base(701, "float8", "double precision", 8, 'N', 0, 1022, "float8in", 'd', 'p', 0),
    base(705, "unknown", "unknown", -2, 'X', 0, 0, "unknownin", 'c', 'p', 0),
    base(1042, "bpchar", "bpchar", -1, 'S', 0, 1014, "bpcharin", 'i', 'x', 100),
    base(1043, "varchar", "character varying", -1, 'S', 0, 1015, "varcharin", 'i', 'x', 100),
    base(1082, "date", "date", 4, 'D', 0, 1182, "date_in", 'i', 'p', 0),
    base(1083, "time", "time without time zone", 8, 'D', 0, 1183, "time_in", 'd', 'p', 0),
    base(1114, "timestamp", "timestamp without time zone", 8, 'D', 0, 1115, "timestamp_in", 'd', 'p', 0),
    base(1184, "timestamptz", "timestamp with time zone", 8, 'D', 0, 1185, "timestamptz_in", 'd', 'p', 0),
    base(1186, "interval", "interval", 16, 'T', 0, 1187, "interval_in", 'd', 'p', 0),
    base(1266, "timetz", "time with time zone", 12, 'D', 0, 1270, "timetz_in", 'd', 'p', 0),
    base(1700, "numeric", "numeric", -1, 'N', 0, 1231, "numeric_in", 'i', 'm', 0),
    base(2205, "regclass", "regclass", 4, 'N', 0, 2210, "regclassin", 'i', 'p', 0),
    base(2206, "regtype", "regtype", 4, 'N', 0, 2211, "regtypein", 'i', 'p', 0),
    base(2283, "anyelement", "anyelement", 4, 'P', 0, 0, "anyelement_in", 'i', 'p', 0),
    base(2950, "uuid", "uuid", 16, 'U', 0, 2951, "uuid_in", 'c', 'p', 0),
    base(3802, "jsonb", "jsonb", -1, 'U', 0, 3807, "jsonb_in", 'i', 'x', 0),
    arr(199, "_json", "json[]", 114, 'i', 0),
    arr(1000, "_bool", "boolean[]", 16, 'i', 0),
    arr(1001, "_bytea", "bytea[]", 17, 'i', 0),
    arr(1002, "_char", "\"char\"[]", 18, 'i', 0),
    arr(1003, "_name", "name[]", 19, 'i', 950),
    arr(1005, "_int2", "smallint[]", 21, 'i', 0),
    arr(1006, "_int2vector", "int2vector[]", 22, 'i', 0),
    arr(1007, "_int4", "integer[]", 23, 'i', 0),
    arr(1008, "_regproc", "regproc[]", 24, 'i', 0),
    arr(1009, "_text", "text[]", 25, 'i', 100),
    arr(1013, "_oidvector", "oidvector[]", 30, 'i', 0),
    arr(1014, "_bpchar", "bpchar[]", 1042, 'i', 100),
    arr(1015, "_varchar", "character varying[]", 1043, 'i', 100),
    arr(1016, "_int8", "bigint[]", 20, 'd', 0),
    arr(1021, "_float4", "real[]", 700, 'i', 0),
    arr(1022, "_float8", "double precision[]", 701, 'd', 0),
    arr(1028, "_oid", "oid[]", 26, 'i', 0),
    arr(1011, "_xid", "xid[]", 28, 'i', 0),
    arr(1034, "_aclitem", "aclitem[]", 1033, 'd', 0),
    arr(1115, "_timestamp", "timestamp without time zone[]", 1114, 'd', 0),
    arr(1182, "_date", "date[]", 1082, 'i', 0),
    arr(1183, "_time", "time without time zone[]", 1083, 'd', 0),
    arr(1185, "_timestamptz", "timestamp with time zone[]", 1184, 'd', 0),
    arr(1187, "_interval", "interval[]", 1186, 'd', 0),
    arr(1231, "_numeric", "numeric[]", 1700, 'i', 0),
    arr(1270, "_timetz", "time with time zone[]", 1266, 'd', 0),
    arr(2210, "_regclass", "regclass[]", 2205, 'i', 0),
    arr(2211, "_regtype", "regtype[]", 2206, 'i', 0),
    arr(2951, "_uuid", "uuid[]", 2950, 'i', 0),
    arr(3807, "_jsonb", "jsonb[]", 3802, 'i', 0),
];

const TEXT_OID: i32 = 25;

pub(crate) fn pg_type(oid: i32) -> Option<&'static PgType> {
    TYPES.iter().find(|t| t.oid == oid)
}

/// The element type of array type `oid` (`int8` for `_int8`); `None` for types that are not
/// arrays of one element type (the vector types are arrays in the catalog, but not in input).
pub fn pg_array_element(oid: i32) -> Option<i32> {
    pg_type(oid)
        .filter(|t| t.category == 'A' && t.elem != 0 && !matches!(t.oid, 22 | 30))
        .map(|t| t.elem)
}

/// `(oid, typname, typlen)` of a PostgreSQL type known to be in `TYPES`.
fn describe(oid: i32) -> (i32, &'static str, i16) {
    match pg_type(oid) {
        Some(t) => (t.oid, t.name, t.len),
        None => (TEXT_OID, "text", -1),
    }
}

/// The PostgreSQL type a result column of this Arrow type is sent as: `(oid, typname, typlen)`.
///
/// Strings are `varchar` (so a Sundial UUID, stored as text, is `varchar` too); types PostgreSQL
/// has no counterpart for are `text`.
pub fn pg_type_for_arrow(data_type: &DataType) -> (i32, &'static str, i16) {
    describe(pg_oid_for_arrow(data_type))
}

/// The PostgreSQL type a result field is sent as: the type its metadata names under
/// [`PG_TYPE_KEY`] when that type is stored as the field's Arrow type (a cast keeps the
/// metadata of its input, so `oid_column::text` must not stay an `oid`), else
/// [`pg_type_for_arrow`] of its Arrow type.
pub fn pg_type_for_field(field: &Field) -> (i32, &'static str, i16) {
    let declared = field
        .metadata()
        .get(PG_TYPE_KEY)
        .and_then(|oid| oid.parse::<i32>().ok())
        .and_then(pg_type)
        .filter(|t| stored_as(t.oid, field.data_type()));
    match declared {
        Some(t) => (t.oid, t.name, t.len),
        None => pg_type_for_arrow(field.data_type()),
    }
}

/// Whether values of PostgreSQL type `oid` are held in Arrow as `data_type` (as catalog
/// columns and functions hold them).
fn stored_as(oid: i32, data_type: &DataType) -> bool {
    let text =
        |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    match (pg_type(oid), data_type) {
        (None, _) => false,
        (Some(t), DataType::List(item)) if t.category == 'A' => {
            pg_type(t.elem).is_some_and(|e| stored_as(e.oid, item.data_type()))
        }
        // `oidvector` may be held as its text too (`pg_proc.proargtypes`).
        (Some(_), t) if oid == 30 && text(t) => true,
        (Some(t), _) if t.category == 'A' => false,
        (Some(_), t) if text(t) => {
            matches!(oid, 18 | 19 | 24 | 25 | 194 | 1033 | 1042 | 1043 | 2950)
        }
        (Some(_), DataType::Int32) => matches!(oid, 23 | 26 | 28 | 2205 | 2206),
        (Some(_), other) => pg_oid_for_arrow(other) == oid,
    }
}

/// `field` declaring PostgreSQL type `oid` (see [`PG_TYPE_KEY`]).
pub fn with_pg_type(field: Field, oid: i32) -> Field {
    let mut metadata = field.metadata().clone();
    metadata.insert(PG_TYPE_KEY.to_string(), oid.to_string());
    field.with_metadata(metadata)
}

pub(crate) fn pg_oid_for_arrow(data_type: &DataType) -> i32 {
    match data_type {
        DataType::Boolean => 16,
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => 21,
        DataType::Int32 | DataType::UInt16 => 23,
        DataType::Int64 | DataType::UInt32 => 20,
        DataType::UInt64
        | DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => 1700,
        DataType::Float16 | DataType::Float32 => 700,
        DataType::Float64 => 701,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => 1043,
        DataType::Dictionary(_, value) => pg_oid_for_arrow(value),
        DataType::Timestamp(_, None) => 1114,
        DataType::Timestamp(_, Some(_)) => 1184,
        DataType::Date32 | DataType::Date64 => 1082,
        DataType::Time32(_) | DataType::Time64(_) => 1083,
        DataType::Interval(_) | DataType::Duration(_) => 1186,
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => 17,
        DataType::List(item)
        | DataType::LargeList(item)
        | DataType::ListView(item)
        | DataType::LargeListView(item)
        | DataType::FixedSizeList(item, _) => match pg_oid_for_arrow(item.data_type()) {
            // A list of strings is `text[]`, the array type tools expect.
            1043 => 1009,
            elem => pg_type(elem)
                .map(|t| t.array)
                .filter(|a| *a != 0)
                .unwrap_or(1009),
        },
        _ => TEXT_OID,
    }
}

/// The PostgreSQL type of a Sundial column: as its Arrow type, except that UUID is `uuid`.
pub fn pg_type_of(column_type: ColumnType) -> (i32, &'static str, i16) {
    match column_type {
        ColumnType::Uuid => describe(2950),
        other => pg_type_for_arrow(&other.arrow_type()),
    }
}

/// `format_type(oid, typmod)`: the type's SQL name, with a length or precision when `typmod`
/// carries one.
pub(crate) fn format_type(oid: i32, typmod: Option<i64>) -> String {
    let Some(t) = pg_type(oid) else {
        return "???".into();
    };
    match (t.oid, typmod) {
        (1042 | 1043, Some(m)) if m >= 4 => format!("{}({})", t.sql, m - 4),
        (1700, Some(m)) if m >= 4 => format!("numeric({},{})", (m - 4) >> 16, (m - 4) & 0xffff),
        _ => t.sql.into(),
    }
}

/// The OID for a type name as `to_regtype` / `'name'::regtype` read it.
pub(crate) fn type_oid_by_name(name: &str) -> Option<i32> {
    let name = name.trim().to_lowercase();
    let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
    if let Some(elem) = name.strip_suffix("[]") {
        return type_oid_by_name(elem).and_then(|e| pg_type(e).map(|t| t.array));
    }
    let alias = match name {
        "int" => Some(23),
        "float" => Some(701),
        "decimal" => Some(1700),
        "char" | "character" => Some(1042),
        "\"char\"" => Some(18),
        _ => None,
    };
    alias.or_else(|| {
        TYPES
            .iter()
            .find(|t| t.name == name || t.sql == name)
            .map(|t| t.oid)
    })
}

/// The Arrow type holding values of PostgreSQL type `oid`, as catalog columns hold them; `None`
/// for types Sundial holds no values of.
fn arrow_type(oid: i32) -> Option<DataType> {
    let t = pg_type(oid)?;
    Some(match oid {
        16 => DataType::Boolean,
        17 => DataType::Binary,
        18 | 19 | 24 | 25 | 194 | 1033 | 1042 | 1043 | 2950 => DataType::Utf8,
        20 => DataType::Int64,
        21 => DataType::Int16,
        23 | 26 | 28 | 2205 | 2206 => DataType::Int32,
        700 => DataType::Float32,
        701 => DataType::Float64,
        1082 => DataType::Date32,
        1083 => DataType::Time64(TimeUnit::Microsecond),
        1114 => DataType::Timestamp(TimeUnit::Microsecond, None),
        1184 => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        1186 => DataType::Interval(IntervalUnit::MonthDayNano),
        _ if t.category == 'A' && t.elem != 0 => {
            DataType::List(Arc::new(Field::new_list_field(arrow_type(t.elem)?, true)))
        }
        _ => return None,
    })
}

/// Whether a value of PostgreSQL type `oid` can be held as that type (see [`PgTypePlanner`]).
pub(crate) fn plannable(oid: i32) -> bool {
    arrow_type(oid).is_some_and(|t| stored_as(oid, &t))
}

/// Plans `<PG_TYPE_QUALIFIER>.<typname>`, the type of the casts the dialect writes to stand for
/// a PostgreSQL type (`sundial_sql::names::PG_TYPE_QUALIFIER`), as the Arrow type holding it
/// with the type declared under [`PG_TYPE_KEY`]; every other type is left to DataFusion.
#[derive(Debug, Clone, Copy, Default)]
pub struct PgTypePlanner;

impl TypePlanner for PgTypePlanner {
    fn plan_type_field(&self, sql_type: &ast::DataType) -> DfResult<Option<FieldRef>> {
        let ast::DataType::Custom(name, modifiers) = sql_type else {
            return Ok(None);
        };
        let [qualifier, typname] = name.0.as_slice() else {
            return Ok(None);
        };
        let (Some(qualifier), Some(typname)) = (qualifier.as_ident(), typname.as_ident()) else {
            return Ok(None);
        };
        if qualifier.value != PG_TYPE_QUALIFIER || !modifiers.is_empty() {
            return Ok(None);
        }
        let planned = TYPES
            .iter()
            .find(|t| t.name == typname.value && plannable(t.oid))
            .and_then(|t| Some((t.oid, arrow_type(t.oid)?)));
        Ok(planned
            .map(|(oid, data_type)| Arc::new(with_pg_type(Field::new("", data_type, true), oid))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plannable_type_is_declared_as_itself() {
        for t in TYPES.iter().filter(|t| plannable(t.oid)) {
            let data_type = arrow_type(t.oid).expect("plannable");
            let field = with_pg_type(Field::new("x", data_type, true), t.oid);
            assert_eq!(pg_type_for_field(&field).0, t.oid, "{}", t.name);
        }
        for oid in [19, 18, 26, 2205, 1003, 30, 22, 1034, 1184] {
            assert!(plannable(oid), "{oid}");
        }
    }

    #[test]
    fn the_planner_plans_only_qualified_postgres_types() {
        let custom = |parts: &[&str]| {
            ast::DataType::Custom(
                ast::ObjectName::from(
                    parts
                        .iter()
                        .map(|p| ast::Ident::new(*p))
                        .collect::<Vec<_>>(),
                ),
                Vec::new(),
            )
        };
        let field = PgTypePlanner
            .plan_type_field(&custom(&[PG_TYPE_QUALIFIER, "name"]))
            .expect("plans")
            .expect("a field");
        assert_eq!(field.data_type(), &DataType::Utf8);
        assert_eq!(pg_type_for_field(&field).0, 19);
        for other in [
            custom(&["name"]),
            custom(&[PG_TYPE_QUALIFIER, "nope"]),
            ast::DataType::Text,
        ] {
            assert!(
                PgTypePlanner
                    .plan_type_field(&other)
                    .expect("plans")
                    .is_none()
            );
        }
    }
}
