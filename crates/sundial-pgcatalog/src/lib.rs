//! # sundial-pgcatalog
//!
//! The `pg_catalog` schema and PostgreSQL's introspection functions.
//!
//! ```text
//!  register(ctx, db) ─▶ schema sundial.pg_catalog: CatalogTable per relation ─▶ rows from db
//!                   └─▶ schema sundial.information_schema: PostgreSQL's views (tables, columns, ...)
//!                   └─▶ functions (format_type, pg_get_userbyid, ...) ─▶ ScalarUDFs
//!  Names ─▶ what the dialect's PostgreSQL rewrites ask (sundial_sql::SystemCatalog): relations,
//!           their columns' and functions' PostgreSQL types
//!  PgTypePlanner ─▶ the engine's planning of the casts to PostgreSQL types those rewrites write
//! ```
//!
//! PostgreSQL tools (psql's `\d`, pgjdbc's `DatabaseMetaData`, GUI clients) learn what a database
//! holds by querying `pg_catalog` tables and calling functions such as `format_type` and
//! `pg_get_userbyid`. This crate gives them a faithful-enough view of Sundial:
//!
//! - every relation here is a `CatalogTable` whose rows are computed at scan time from the live
//!   [`Database`] (tables come and go at any moment) and from fixed facts (types, settings, the one
//!   role `admin`, the one database `qdb`);
//! - relations Sundial never has rows for (constraints, policies, publications, ...) exist with
//!   their real PostgreSQL columns and no rows, so queries over them plan and return nothing;
//! - the functions (in `functions`) are one generic UDF type holding a name, a return type and a
//!   closure evaluated row by row.
//!
//! Column types follow PostgreSQL's: `oid`, `regproc`-like and `xid` columns are `Int32`, `int2`
//! is `Int16`, `name`, `text` and `"char"` are `Utf8`, `text[]`-like arrays are `List(Utf8)`.
//! Arrow cannot tell `name` from `text` or `oid` from `int4`, so each catalog column (and each
//! function's result) says its PostgreSQL type once, in its field's metadata under
//! [`PG_TYPE_KEY`]; DataFusion carries field metadata through column references, joins and
//! subqueries. [`pg_type_for_field`] reads it (falling back to [`pg_type_for_arrow`], the mapping
//! from Arrow types) and is the single answer the wire protocol describes columns with.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, RecordBatch, new_empty_array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::memory::MemorySourceConfig;
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::common::{Result as DfResult, ScalarValue, internal_err};
use datafusion::datasource::TableType;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{Expr, ScalarUDF, Volatility};
use datafusion::physical_plan::ExecutionPlan;
use sundial_storage::Database;

use sundial_sql::names::{CATALOG, SCHEMA};

mod functions;
mod names;
mod types;

pub use names::Names;
pub use types::{
    PgTypePlanner, pg_array_element, pg_type_for_arrow, pg_type_for_field, pg_type_of, with_pg_type,
};
use types::{TYPES, format_type, pg_oid_for_arrow, pg_type, type_oid_by_name};

/// The field metadata key holding a column's PostgreSQL type OID (decimal), for columns whose
/// Arrow type alone does not say it (`name`, `"char"`, `text`, `oid`, ...).
pub const PG_TYPE_KEY: &str = "sundial.pg_type";

/// The PostgreSQL version Sundial presents itself as.
pub const SERVER_VERSION: &str = "15.0";
/// `SERVER_VERSION` as `server_version_num`.
const SERVER_VERSION_NUM: &str = "150000";
/// The one role: every session is `admin`, a superuser.
const ROLE: &str = "admin";
const ROLE_OID: i32 = 10;
/// The one database's name: QuestDB's, which clients of a QuestDB-compatible server connect
/// to (`dbname=qdb`). Every connection sees this database whatever name it gave.
const DATABASE: &str = "qdb";
const DATABASE_OID: i32 = 16384;
const PG_CATALOG_OID: i32 = 11;
const PUBLIC_OID: i32 = 2200;
/// The role owning `public` in PostgreSQL 15: whoever owns the database.
const DATABASE_OWNER_OID: i32 = 6171;
const DATABASE_OWNER: &str = "pg_database_owner";
/// Namespaces: (oid, name).
const NAMESPACES: &[(i32, &str)] = &[
    (PG_CATALOG_OID, "pg_catalog"),
    (99, "pg_toast"),
    (PUBLIC_OID, SCHEMA),
    (13000, "information_schema"),
];
/// The first OID PostgreSQL hands to user objects; Sundial tables' OIDs are at or above it.
const FIRST_USER_OID: i64 = 16384;
/// Functions are numbered from here, below `FIRST_USER_OID` so they never meet a table's OID.
const FIRST_PROC_OID: i32 = 8000;
/// `anyelement`: the return type recorded for DataFusion's own (polymorphic) functions.
const ANYELEMENT_OID: i32 = 2283;

/// The OID of a Sundial table: a hash of its lower-cased name (names are case-insensitive) into
/// `[16384, 2^31)`. It is the same in every query and every process for as long as the table
/// keeps its name; two names could in principle collide, which no catalog query relies on.
pub fn table_oid(name: &str) -> i32 {
    // FNV-1a: stable across processes and Rust versions, unlike `std`'s hashers.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.to_lowercase().bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let span = (1u64 << 31) - FIRST_USER_OID as u64;
    (FIRST_USER_OID as u64 + hash % span) as i32
}

// ---------------------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------------------

/// `(name, setting, unit, category, short_desc, context, vartype)` of every setting Sundial
/// reports, in `pg_settings` and through `current_setting` / `SHOW`.
#[rustfmt::skip]
const SETTINGS: &[(&str, &str, &str, &str, &str, &str, &str)] = &[
    ("application_name", "", "", "Reporting and Logging / What to Log", "Sets the application name to be reported in statistics and logs.", "user", "string"),
    ("block_size", "8192", "", "Preset Options", "Shows the size of a disk block.", "internal", "integer"),
    ("client_encoding", "UTF8", "", "Client Connection Defaults / Locale and Formatting", "Sets the client's character set encoding.", "user", "string"),
    ("DateStyle", "ISO, MDY", "", "Client Connection Defaults / Locale and Formatting", "Sets the display format for date and time values.", "user", "string"),
    ("default_transaction_isolation", "read committed", "", "Client Connection Defaults / Statement Behavior", "Sets the transaction isolation level of each new transaction.", "user", "enum"),
    ("default_transaction_read_only", "off", "", "Client Connection Defaults / Statement Behavior", "Sets the default read-only status of new transactions.", "user", "bool"),
    ("extra_float_digits", "1", "", "Client Connection Defaults / Locale and Formatting", "Sets the number of digits displayed for floating-point values.", "user", "integer"),
    ("integer_datetimes", "on", "", "Preset Options", "Shows whether datetimes are integer based.", "internal", "bool"),
    ("IntervalStyle", "postgres", "", "Client Connection Defaults / Locale and Formatting", "Sets the display format for interval values.", "user", "enum"),
    ("is_superuser", "on", "", "Preset Options", "Shows whether the current user is a superuser.", "internal", "bool"),
    ("lc_collate", "C", "", "Preset Options", "Shows the collation order locale.", "internal", "string"),
    ("lc_ctype", "C", "", "Preset Options", "Shows the character classification and case conversion locale.", "internal", "string"),
    ("max_connections", "100", "", "Connections and Authentication / Connection Settings", "Sets the maximum number of concurrent connections.", "postmaster", "integer"),
    ("max_identifier_length", "63", "", "Preset Options", "Shows the maximum identifier length.", "internal", "integer"),
    ("max_index_keys", "32", "", "Preset Options", "Shows the maximum number of index keys.", "internal", "integer"),
    ("search_path", "\"$user\", public", "", "Client Connection Defaults / Statement Behavior", "Sets the schema search order for names that are not schema-qualified.", "user", "string"),
    ("server_encoding", "UTF8", "", "Preset Options", "Shows the server (database) character set encoding.", "internal", "string"),
    ("server_version", SERVER_VERSION, "", "Preset Options", "Shows the server version.", "internal", "string"),
    ("server_version_num", SERVER_VERSION_NUM, "", "Preset Options", "Shows the server version as an integer.", "internal", "integer"),
    ("standard_conforming_strings", "on", "", "Version and Platform Compatibility / Previous PostgreSQL Versions", "Causes '...' strings to treat backslashes literally.", "user", "bool"),
    ("statement_timeout", "0", "ms", "Client Connection Defaults / Statement Behavior", "Sets the maximum allowed duration of any statement.", "user", "integer"),
    ("TimeZone", "UTC", "", "Client Connection Defaults / Locale and Formatting", "Sets the time zone for displaying and interpreting time stamps.", "user", "string"),
    ("transaction_isolation", "read committed", "", "Client Connection Defaults / Statement Behavior", "Sets the current transaction's isolation level.", "user", "enum"),
    ("transaction_read_only", "off", "", "Client Connection Defaults / Statement Behavior", "Sets the current transaction's read-only status.", "user", "bool"),
];

/// A setting's value by name (case-insensitive, as in PostgreSQL), for `current_setting`,
/// `SHOW` and the wire protocol's `ParameterStatus`.
pub fn pg_setting(name: &str) -> Option<&'static str> {
    SETTINGS
        .iter()
        .find(|s| s.0.eq_ignore_ascii_case(name))
        .map(|s| s.1)
}

/// A setting's name as PostgreSQL spells it, for a name matched case-insensitively.
fn setting_name(name: &str) -> Option<&'static str> {
    SETTINGS
        .iter()
        .find(|s| s.0.eq_ignore_ascii_case(name))
        .map(|s| s.0)
}

/// The text `version()` returns.
fn version_string() -> String {
    format!(
        "PostgreSQL {SERVER_VERSION} (Sundial {}), 64-bit",
        env!("CARGO_PKG_VERSION")
    )
}

// ---------------------------------------------------------------------------------------------
// Catalog relations: column specs with defaults, rows computed per scan
// ---------------------------------------------------------------------------------------------

/// A catalog column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    /// `oid`, `regproc`-like and `xid` columns.
    Oid,
    I2,
    I4,
    I8,
    F4,
    Bool,
    Name,
    /// `"char"`.
    Char,
    Text,
    /// `character varying`: information_schema's `character_data` and `yes_or_no`.
    Varchar,
    /// `text[]`, `name[]`.
    TextArr,
    /// `aclitem[]`: access privileges, held as their text.
    AclArr,
    /// `"char"[]`.
    CharArr,
    /// `regproc`: a function, held as its name.
    Regproc,
    /// `xid`: a transaction id.
    Xid,
    /// `pg_node_tree`: a stored expression, held as its text.
    NodeTree,
    /// `int2[]`.
    I2Arr,
    /// `int2vector`.
    I2Vector,
    /// `oid[]`.
    OidArr,
    /// `oidvector`.
    OidVector,
    /// `oidvector` held as its text, as PostgreSQL prints it (`23 25`; '' for none):
    /// `pg_proc.proargtypes`, which tools read as text.
    OidVectorText,
    /// `timestamptz`.
    Ts,
}

impl Ty {
    fn arrow(self) -> DataType {
        match self {
            Ty::Oid | Ty::I4 | Ty::Xid => DataType::Int32,
            Ty::I2 => DataType::Int16,
            Ty::I8 => DataType::Int64,
            Ty::F4 => DataType::Float32,
            Ty::Bool => DataType::Boolean,
            Ty::Name
            | Ty::Char
            | Ty::Text
            | Ty::Varchar
            | Ty::Regproc
            | Ty::NodeTree
            | Ty::OidVectorText => DataType::Utf8,
            Ty::TextArr | Ty::AclArr | Ty::CharArr => list_of(DataType::Utf8),
            Ty::I2Arr | Ty::I2Vector => list_of(DataType::Int16),
            Ty::OidArr | Ty::OidVector => list_of(DataType::Int32),
            Ty::Ts => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        }
    }

    /// The column's PostgreSQL type, for `pg_attribute` rows describing catalog relations.
    fn pg_oid(self) -> i32 {
        match self {
            Ty::Oid => 26,
            Ty::I2 => 21,
            Ty::I4 => 23,
            Ty::I8 => 20,
            Ty::F4 => 700,
            Ty::Bool => 16,
            Ty::Name => 19,
            Ty::Char => 18,
            Ty::Text => 25,
            Ty::Varchar => 1043,
            Ty::TextArr => 1009,
            Ty::AclArr => 1034,
            Ty::CharArr => 1002,
            Ty::Regproc => 24,
            Ty::Xid => 28,
            Ty::NodeTree => 194,
            Ty::I2Arr => 1005,
            Ty::I2Vector => 22,
            Ty::OidArr => 1028,
            Ty::OidVector | Ty::OidVectorText => 30,
            Ty::Ts => 1184,
        }
    }
}

fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(item, true)))
}

/// A column default: the value of a column a row does not mention.
#[derive(Debug, Clone, Copy)]
enum D {
    Null,
    I(i64),
    F(f32),
    B(bool),
    S(&'static str),
}

const Z: D = D::I(0);
const M1: D = D::I(-1);
const F: D = D::B(false);
const T: D = D::B(true);
const E: D = D::S("");

/// `(name, type, default)`.
type Col = (&'static str, Ty, D);

/// Column specs: `name: Type` (default NULL) or `name: Type = default`.
macro_rules! cols {
    (@d) => { D::Null };
    (@d $d:expr) => { $d };
    ($($name:ident : $ty:ident $(= $def:expr)?),* $(,)?) => {
        &[$((stringify!($name), Ty::$ty, cols!(@d $($def)?))),*]
    };
}

/// A value in a computed row.
#[derive(Debug, Clone)]
enum V {
    Null,
    I(i64),
    F(f32),
    B(bool),
    S(Cow<'static, str>),
    /// A `text[]`-like value.
    L(Vec<String>),
}

impl From<D> for V {
    fn from(d: D) -> V {
        match d {
            D::Null => V::Null,
            D::I(i) => V::I(i),
            D::F(f) => V::F(f),
            D::B(b) => V::B(b),
            D::S(s) => V::S(Cow::Borrowed(s)),
        }
    }
}

macro_rules! into_v {
    ($($t:ty => $v:expr),* $(,)?) => {
        $(impl From<$t> for V {
            fn from(x: $t) -> V {
                ($v)(x)
            }
        })*
    };
}

into_v! {
    i16 => |x| V::I(i64::from(x)),
    i32 => |x| V::I(i64::from(x)),
    i64 => V::I,
    f32 => V::F,
    bool => V::B,
    &'static str => |x| V::S(Cow::Borrowed(x)),
    String => |x| V::S(Cow::Owned(x)),
    char => |x: char| V::S(Cow::Owned(x.to_string())),
}

/// A computed row: the columns that differ from their defaults.
type Row = Vec<(&'static str, V)>;

macro_rules! row {
    ($($k:ident : $v:expr),* $(,)?) => {
        vec![$((stringify!($k), V::from($v))),*]
    };
}

// After the macros, which it uses.
mod information_schema;

fn scalar(ty: Ty, v: &V) -> DfResult<ScalarValue> {
    Ok(match (ty, v) {
        (_, V::Null) => ScalarValue::try_from(&ty.arrow())?,
        (Ty::Oid | Ty::I4 | Ty::Xid, V::I(i)) => ScalarValue::Int32(Some(*i as i32)),
        (Ty::I2, V::I(i)) => ScalarValue::Int16(Some(*i as i16)),
        (Ty::I8, V::I(i)) => ScalarValue::Int64(Some(*i)),
        (Ty::F4, V::F(f)) => ScalarValue::Float32(Some(*f)),
        (Ty::Bool, V::B(b)) => ScalarValue::Boolean(Some(*b)),
        (Ty::TextArr | Ty::AclArr | Ty::CharArr, V::L(items)) => {
            ScalarValue::List(text_list(items))
        }
        (
            Ty::Name
            | Ty::Char
            | Ty::Text
            | Ty::Varchar
            | Ty::Regproc
            | Ty::NodeTree
            | Ty::OidVectorText,
            V::S(s),
        ) => ScalarValue::Utf8(Some(s.to_string())),
        (ty, v) => return internal_err!("catalog value {v:?} does not fit a {ty:?} column"),
    })
}

fn text_list(items: &[String]) -> Arc<datafusion::arrow::array::ListArray> {
    let values: Vec<ScalarValue> = items
        .iter()
        .map(|s| ScalarValue::Utf8(Some(s.clone())))
        .collect();
    ScalarValue::new_list_nullable(&values, &DataType::Utf8)
}

/// The schema of a relation: each field declares its column's PostgreSQL type.
fn schema_of(cols: &[Col]) -> SchemaRef {
    Arc::new(Schema::new(
        cols.iter()
            .map(|(name, ty, _)| with_pg_type(Field::new(*name, ty.arrow(), true), ty.pg_oid()))
            .collect::<Vec<_>>(),
    ))
}

/// Builds a batch from rows, filling what a row leaves out with the column's default.
fn batch(schema: SchemaRef, cols: &[Col], rows: &[Row]) -> DfResult<RecordBatch> {
    for row in rows {
        if let Some((k, _)) = row.iter().find(|(k, _)| !cols.iter().any(|c| c.0 == *k)) {
            return internal_err!("catalog row names unknown column {k}");
        }
    }
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(cols.len());
    for (name, ty, default) in cols {
        if rows.is_empty() {
            arrays.push(new_empty_array(&ty.arrow()));
            continue;
        }
        let default = V::from(*default);
        let values = rows
            .iter()
            .map(|row| {
                let v = row
                    .iter()
                    .find(|(k, _)| k == name)
                    .map_or(&default, |(_, v)| v);
                scalar(*ty, v)
            })
            .collect::<DfResult<Vec<_>>>()?;
        arrays.push(ScalarValue::iter_to_array(values)?);
    }
    Ok(RecordBatch::try_new(schema, arrays)?)
}

/// A relation of `pg_catalog`. `rows` is `None` for relations that are always empty in Sundial.
struct Rel {
    name: &'static str,
    /// The relation's OID in PostgreSQL 15.
    oid: i32,
    view: bool,
    cols: &'static [Col],
    rows: Option<fn(&Catalog) -> Vec<Row>>,
}

impl fmt::Debug for Rel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pg_catalog.{}", self.name)
    }
}

const fn table(
    name: &'static str,
    oid: i32,
    cols: &'static [Col],
    rows: fn(&Catalog) -> Vec<Row>,
) -> Rel {
    Rel {
        name,
        oid,
        view: false,
        cols,
        rows: Some(rows),
    }
}

const fn view(
    name: &'static str,
    oid: i32,
    cols: &'static [Col],
    rows: fn(&Catalog) -> Vec<Row>,
) -> Rel {
    Rel {
        name,
        oid,
        view: true,
        cols,
        rows: Some(rows),
    }
}

const fn empty(name: &'static str, oid: i32, view: bool, cols: &'static [Col]) -> Rel {
    Rel {
        name,
        oid,
        view,
        cols,
        rows: None,
    }
}

#[rustfmt::skip]
static RELATIONS: &[Rel] = &[
    table("pg_namespace", 2615, cols![oid: Oid, nspname: Name, nspowner: Oid = D::I(10), nspacl: AclArr], pg_namespace),
    table("pg_class", 1259, cols![
        oid: Oid, relname: Name, relnamespace: Oid = D::I(2200), reltype: Oid = Z, reloftype: Oid = Z,
        relowner: Oid = D::I(10), relam: Oid = D::I(2), relfilenode: Oid = Z, reltablespace: Oid = Z,
        relpages: I4 = Z, reltuples: F4 = D::F(-1.0), relallvisible: I4 = Z, reltoastrelid: Oid = Z,
        relhasindex: Bool = F, relisshared: Bool = F, relpersistence: Char = D::S("p"),
        relkind: Char = D::S("r"), relnatts: I2 = Z, relchecks: I2 = Z, relhasrules: Bool = F,
        relhastriggers: Bool = F, relhassubclass: Bool = F, relrowsecurity: Bool = F,
        relforcerowsecurity: Bool = F, relispopulated: Bool = T, relreplident: Char = D::S("d"),
        relispartition: Bool = F, relrewrite: Oid = Z, relfrozenxid: Xid = Z, relminmxid: Xid = Z,
        relacl: AclArr, reloptions: TextArr, relpartbound: NodeTree,
    ], pg_class),
    table("pg_attribute", 1249, cols![
        attrelid: Oid, attname: Name, atttypid: Oid, attstattarget: I4 = M1, attlen: I2,
        attnum: I2, attndims: I4 = Z, attcacheoff: I4 = M1, atttypmod: I4 = M1, attbyval: Bool,
        attalign: Char, attstorage: Char, attcompression: Char = E, attnotnull: Bool = F,
        atthasdef: Bool = F, atthasmissing: Bool = F, attidentity: Char = E,
        attgenerated: Char = E, attisdropped: Bool = F, attislocal: Bool = T, attinhcount: I4 = Z,
        attcollation: Oid = Z, attacl: AclArr, attoptions: TextArr, attfdwoptions: TextArr,
        attmissingval: TextArr,
    ], pg_attribute),
    table("pg_type", 1247, cols![
        oid: Oid, typname: Name, typnamespace: Oid = D::I(11), typowner: Oid = D::I(10),
        typlen: I2, typbyval: Bool, typtype: Char = D::S("b"), typcategory: Char,
        typispreferred: Bool = F, typisdefined: Bool = T, typdelim: Char = D::S(","),
        typrelid: Oid = Z, typsubscript: Regproc = D::S("-"), typelem: Oid = Z, typarray: Oid = Z,
        typinput: Regproc, typoutput: Regproc, typreceive: Regproc, typsend: Regproc,
        typmodin: Regproc = D::S("-"), typmodout: Regproc = D::S("-"), typanalyze: Regproc = D::S("-"),
        typalign: Char, typstorage: Char, typnotnull: Bool = F, typbasetype: Oid = Z,
        typtypmod: I4 = M1, typndims: I4 = Z, typcollation: Oid = Z, typdefaultbin: NodeTree,
        typdefault: Text, typacl: AclArr,
    ], pg_type_rows),
    table("pg_database", 1262, cols![
        oid: Oid, datname: Name, datdba: Oid = D::I(10), encoding: I4 = D::I(6),
        datlocprovider: Char = D::S("c"), datistemplate: Bool = F, datallowconn: Bool = T,
        datconnlimit: I4 = M1, datfrozenxid: Xid = Z, datminmxid: Xid = D::I(1),
        dattablespace: Oid = D::I(1663), datcollate: Text = D::S("C"), datctype: Text = D::S("C"),
        daticulocale: Text, datcollversion: Text, datacl: AclArr,
    ], pg_database),
    table("pg_proc", 1255, cols![
        oid: Oid, proname: Name, pronamespace: Oid = D::I(11), proowner: Oid = D::I(10),
        prolang: Oid = D::I(12), procost: F4 = D::F(1.0), prorows: F4 = D::F(0.0),
        provariadic: Oid = Z, prosupport: Regproc = D::S("-"), prokind: Char = D::S("f"),
        prosecdef: Bool = F, proleakproof: Bool = F, proisstrict: Bool = F, proretset: Bool = F,
        provolatile: Char = D::S("i"), proparallel: Char = D::S("s"), pronargs: I2 = Z,
        pronargdefaults: I2 = Z, prorettype: Oid = D::I(2283), proargtypes: OidVectorText = E,
        proallargtypes: OidArr, proargmodes: CharArr, proargnames: TextArr, proargdefaults: NodeTree,
        protrftypes: OidArr, prosrc: Text, probin: Text, prosqlbody: NodeTree, proconfig: TextArr,
        proacl: AclArr,
    ], pg_proc),
    table("pg_am", 2601, cols![oid: Oid, amname: Name, amhandler: Regproc, amtype: Char], pg_am),
    table("pg_authid", 1260, cols![
        oid: Oid = D::I(10), rolname: Name = D::S(ROLE), rolsuper: Bool = T, rolinherit: Bool = T,
        rolcreaterole: Bool = T, rolcreatedb: Bool = T, rolcanlogin: Bool = T,
        rolreplication: Bool = T, rolbypassrls: Bool = T, rolconnlimit: I4 = M1,
        rolpassword: Text, rolvaliduntil: Ts,
    ], one_row),
    table("pg_tablespace", 1213, cols![
        oid: Oid, spcname: Name, spcowner: Oid = D::I(10), spcacl: AclArr, spcoptions: TextArr,
    ], pg_tablespace),
    view("pg_roles", 12000, cols![
        rolname: Name = D::S(ROLE), rolsuper: Bool = T, rolinherit: Bool = T,
        rolcreaterole: Bool = T, rolcreatedb: Bool = T, rolcanlogin: Bool = T,
        rolreplication: Bool = T, rolconnlimit: I4 = M1, rolpassword: Text = D::S("********"),
        rolvaliduntil: Ts, rolbypassrls: Bool = T, rolconfig: TextArr, oid: Oid = D::I(10),
    ], one_row),
    view("pg_user", 12014, cols![
        usename: Name = D::S(ROLE), usesysid: Oid = D::I(10), usecreatedb: Bool = T,
        usesuper: Bool = T, userepl: Bool = T, usebypassrls: Bool = T,
        passwd: Text = D::S("********"), valuntil: Ts, useconfig: TextArr,
    ], one_row),
    view("pg_tables", 12033, cols![
        schemaname: Name, tablename: Name, tableowner: Name = D::S(ROLE), tablespace: Name,
        hasindexes: Bool = F, hasrules: Bool = F, hastriggers: Bool = F, rowsecurity: Bool = F,
    ], pg_tables),
    view("pg_settings", 12104, cols![
        name: Text, setting: Text, unit: Text, category: Text, short_desc: Text, extra_desc: Text,
        context: Text, vartype: Text, source: Text = D::S("default"), min_val: Text,
        max_val: Text, enumvals: TextArr, boot_val: Text, reset_val: Text, sourcefile: Text,
        sourceline: I4, pending_restart: Bool = F,
    ], pg_settings),
    empty("pg_views", 12028, true, cols![schemaname: Name, viewname: Name, viewowner: Name, definition: Text]),
    empty("pg_matviews", 12038, true, cols![
        schemaname: Name, matviewname: Name, matviewowner: Name, tablespace: Name,
        hasindexes: Bool, ispopulated: Bool, definition: Text,
    ]),
    empty("pg_indexes", 12043, true, cols![schemaname: Name, tablename: Name, indexname: Name, tablespace: Name, indexdef: Text]),
    empty("pg_index", 2610, false, cols![
        indexrelid: Oid, indrelid: Oid, indnatts: I2, indnkeyatts: I2, indisunique: Bool,
        indnullsnotdistinct: Bool, indisprimary: Bool, indisexclusion: Bool, indimmediate: Bool,
        indisclustered: Bool, indisvalid: Bool, indcheckxmin: Bool, indisready: Bool,
        indislive: Bool, indisreplident: Bool, indkey: I2Vector, indcollation: OidVector,
        indclass: OidVector, indoption: I2Vector, indexprs: NodeTree, indpred: NodeTree,
    ]),
    empty("pg_description", 2609, false, cols![objoid: Oid, classoid: Oid, objsubid: I4, description: Text]),
    empty("pg_constraint", 2606, false, cols![
        oid: Oid, conname: Name, connamespace: Oid, contype: Char, condeferrable: Bool,
        condeferred: Bool, convalidated: Bool, conrelid: Oid, contypid: Oid, conindid: Oid,
        conparentid: Oid, confrelid: Oid, confupdtype: Char, confdeltype: Char,
        confmatchtype: Char, conislocal: Bool, coninhcount: I4, connoinherit: Bool, conkey: I2Arr,
        confkey: I2Arr, conpfeqop: OidArr, conppeqop: OidArr, conffeqop: OidArr,
        confdelsetcols: I2Arr, conexclop: OidArr, conbin: NodeTree,
    ]),
    empty("pg_attrdef", 2604, false, cols![oid: Oid, adrelid: Oid, adnum: I2, adbin: NodeTree]),
    empty("pg_inherits", 2611, false, cols![inhrelid: Oid, inhparent: Oid, inhseqno: I4, inhdetachpending: Bool]),
    empty("pg_collation", 3456, false, cols![
        oid: Oid, collname: Name, collnamespace: Oid, collowner: Oid, collprovider: Char,
        collisdeterministic: Bool, collencoding: I4, collcollate: Text, collctype: Text,
        colliculocale: Text, collversion: Text,
    ]),
    empty("pg_trigger", 2620, false, cols![
        oid: Oid, tgrelid: Oid, tgparentid: Oid, tgname: Name, tgfoid: Oid, tgtype: I2,
        tgenabled: Char, tgisinternal: Bool, tgconstrrelid: Oid, tgconstrindid: Oid,
        tgconstraint: Oid, tgdeferrable: Bool, tginitdeferred: Bool, tgnargs: I2, tgattr: I2Arr,
        tgargs: Text, tgqual: NodeTree, tgoldtable: Name, tgnewtable: Name,
    ]),
    empty("pg_enum", 3501, false, cols![oid: Oid, enumtypid: Oid, enumsortorder: F4, enumlabel: Name]),
    empty("pg_extension", 3079, false, cols![
        oid: Oid, extname: Name, extowner: Oid, extnamespace: Oid, extrelocatable: Bool,
        extversion: Text, extconfig: OidArr, extcondition: TextArr,
    ]),
    empty("pg_depend", 2608, false, cols![
        classid: Oid, objid: Oid, objsubid: I4, refclassid: Oid, refobjid: Oid, refobjsubid: I4,
        deptype: Char,
    ]),
    empty("pg_rewrite", 2618, false, cols![
        oid: Oid, rulename: Name, ev_class: Oid, ev_type: Char, ev_enabled: Char,
        is_instead: Bool, ev_qual: NodeTree, ev_action: NodeTree,
    ]),
    empty("pg_policy", 3256, false, cols![
        oid: Oid, polname: Name, polrelid: Oid, polcmd: Char, polpermissive: Bool,
        polroles: OidArr, polqual: NodeTree, polwithcheck: NodeTree,
    ]),
    empty("pg_statistic_ext", 3381, false, cols![
        oid: Oid, stxrelid: Oid, stxname: Name, stxnamespace: Oid, stxowner: Oid,
        stxstattarget: I4, stxkeys: I2Arr, stxkind: TextArr, stxexprs: NodeTree,
    ]),
    empty("pg_publication", 6104, false, cols![
        oid: Oid, pubname: Name, pubowner: Oid, puballtables: Bool, pubinsert: Bool,
        pubupdate: Bool, pubdelete: Bool, pubtruncate: Bool, pubviaroot: Bool,
    ]),
    empty("pg_publication_rel", 6106, false, cols![oid: Oid, prpubid: Oid, prrelid: Oid, prqual: Text, prattrs: I2Arr]),
    empty("pg_publication_namespace", 6237, false, cols![oid: Oid, pnpubid: Oid, pnnspid: Oid]),
    empty("pg_foreign_table", 3118, false, cols![ftrelid: Oid, ftserver: Oid, ftoptions: TextArr]),
    empty("pg_foreign_server", 1417, false, cols![
        oid: Oid, srvname: Name, srvowner: Oid, srvfdw: Oid, srvtype: Text, srvversion: Text,
        srvacl: AclArr, srvoptions: TextArr,
    ]),
    empty("pg_foreign_data_wrapper", 2328, false, cols![
        oid: Oid, fdwname: Name, fdwowner: Oid, fdwhandler: Oid, fdwvalidator: Oid,
        fdwacl: AclArr, fdwoptions: TextArr,
    ]),
    empty("pg_partitioned_table", 3350, false, cols![
        partrelid: Oid, partstrat: Char, partnatts: I2, partdefid: Oid, partattrs: I2Arr,
        partclass: OidArr, partcollation: OidArr, partexprs: NodeTree,
    ]),
    empty("pg_sequence", 2224, false, cols![
        seqrelid: Oid, seqtypid: Oid, seqstart: I8, seqincrement: I8, seqmax: I8, seqmin: I8,
        seqcache: I8, seqcycle: Bool,
    ]),
    empty("pg_range", 3541, false, cols![
        rngtypid: Oid, rngsubtype: Oid, rngmultitypid: Oid, rngcollation: Oid, rngsubopc: Oid,
        rngcanonical: Regproc, rngsubdiff: Regproc,
    ]),
    empty("pg_event_trigger", 3466, false, cols![
        oid: Oid, evtname: Name, evtevent: Name, evtowner: Oid, evtfoid: Oid, evtenabled: Char,
        evttags: TextArr,
    ]),
    empty("pg_shdescription", 2396, false, cols![objoid: Oid, classoid: Oid, description: Text]),
    empty("pg_auth_members", 1261, false, cols![roleid: Oid, member: Oid, grantor: Oid, admin_option: Bool]),
];

fn relation(name: &str) -> Option<&'static Rel> {
    RELATIONS.iter().find(|r| r.name.eq_ignore_ascii_case(name))
}

fn one_row(_: &Catalog) -> Vec<Row> {
    vec![Vec::new()]
}

fn pg_namespace(_: &Catalog) -> Vec<Row> {
    NAMESPACES
        .iter()
        .map(|(oid, name)| {
            let (owner, owner_oid) = match *oid {
                PUBLIC_OID => (DATABASE_OWNER, DATABASE_OWNER_OID),
                _ => (ROLE, ROLE_OID),
            };
            let mut r = row!(oid: *oid, nspname: *name, nspowner: owner_oid);
            // PostgreSQL's initial grants: the owner may use and create, everyone may use.
            if *oid != 99 {
                let acl = vec![format!("{owner}=UC/{owner}"), format!("=U/{owner}")];
                r.push(("nspacl", V::L(acl)));
            }
            r
        })
        .collect()
}

fn pg_class(c: &Catalog) -> Vec<Row> {
    let mut rows: Vec<Row> =
        c.db.tables()
            .iter()
            .map(|t| {
                let meta = t.meta();
                let oid = table_oid(&meta.name);
                let view = meta.kind == sundial_storage::TableKind::View;
                let relkind = match meta.kind {
                    sundial_storage::TableKind::Table => "r",
                    sundial_storage::TableKind::View => "v",
                    sundial_storage::TableKind::MaterializedView => "m",
                };
                row!(
                    oid: oid,
                    relname: meta.name.clone(),
                    reltype: row_type_oid(oid),
                    relkind: relkind,
                    relam: if view { 0 } else { 2 },
                    relfilenode: if view { 0 } else { oid },
                    relnatts: meta.columns.len() as i16,
                    reltuples: t.snapshot().row_count() as f32,
                )
            })
            .collect();
    rows.extend(RELATIONS.iter().map(|r| {
        row!(
            oid: r.oid,
            relname: r.name,
            relnamespace: PG_CATALOG_OID,
            relkind: if r.view { "v" } else { "r" },
            relam: if r.view { 0 } else { 2 },
            relfilenode: if r.view { 0 } else { r.oid },
            relnatts: r.cols.len() as i16,
        )
    }));
    rows
}

/// The OID of a Sundial table's row type (PostgreSQL makes a composite type per table): the
/// next OID after the table's, which no other table's hash is expected to take.
fn row_type_oid(table_oid: i32) -> i32 {
    table_oid.checked_add(1).unwrap_or(FIRST_USER_OID as i32)
}

/// A `pg_attribute` row for column `num` (from 1) of relation `relid`.
fn attribute(relid: i32, num: usize, name: String, type_oid: i32) -> Row {
    let t = pg_type(type_oid).unwrap_or(&TYPES[0]);
    row!(
        attrelid: relid,
        attname: name,
        atttypid: t.oid,
        attlen: t.len,
        attnum: num as i16,
        attbyval: matches!(t.len, 1 | 2 | 4 | 8),
        attalign: t.align,
        attstorage: t.storage,
        attcollation: t.collation,
    )
}

fn pg_attribute(c: &Catalog) -> Vec<Row> {
    let mut rows = Vec::new();
    for t in c.db.tables() {
        let meta = t.meta();
        let oid = table_oid(&meta.name);
        for (i, col) in meta.columns.iter().enumerate() {
            rows.push(attribute(
                oid,
                i + 1,
                col.name.clone(),
                pg_type_of(col.column_type).0,
            ));
        }
    }
    for r in RELATIONS {
        for (i, (name, ty, _)) in r.cols.iter().enumerate() {
            rows.push(attribute(r.oid, i + 1, (*name).to_string(), ty.pg_oid()));
        }
    }
    rows
}

/// `typinput` `foo_in` / `fooin` gives `foo_out`, `foo_recv`, `foo_send`.
fn io_function(input: &str, suffix: &str) -> String {
    format!("{}{suffix}", input.strip_suffix("in").unwrap_or(input))
}

fn pg_type_rows(_: &Catalog) -> Vec<Row> {
    TYPES
        .iter()
        .map(|t| {
            let mut r = row!(
                oid: t.oid,
                typname: t.name,
                typlen: t.len,
                typbyval: matches!(t.len, 1 | 2 | 4 | 8),
                typtype: if matches!(t.category, 'P' | 'X') { "p" } else { "b" },
                typcategory: t.category,
                typispreferred: matches!(t.oid, 16 | 25 | 701 | 1184 | 1186),
                typsubscript: if t.category == 'A' { "array_subscript_handler" } else { "-" },
                typelem: t.elem,
                typarray: t.array,
                typinput: t.input,
                typoutput: io_function(t.input, "out"),
                typreceive: io_function(t.input, "recv"),
                typsend: io_function(t.input, "send"),
                typalign: t.align,
                typstorage: t.storage,
                typcollation: t.collation,
            );
            // Types whose declarations take a modifier (`varchar(10)`, `timestamp(3)`).
            if matches!(t.oid, 1042 | 1043 | 1083 | 1114 | 1184 | 1186 | 1266 | 1700) {
                r.push(("typmodin", V::from(format!("{}typmodin", t.name))));
                r.push(("typmodout", V::from(format!("{}typmodout", t.name))));
            }
            r
        })
        .collect()
}

fn pg_database(_: &Catalog) -> Vec<Row> {
    vec![row!(oid: DATABASE_OID, datname: DATABASE)]
}

fn pg_am(_: &Catalog) -> Vec<Row> {
    vec![
        row!(oid: 2, amname: "heap", amhandler: "heap_tableam_handler", amtype: "t"),
        row!(oid: 403, amname: "btree", amhandler: "bthandler", amtype: "i"),
    ]
}

fn pg_tablespace(_: &Catalog) -> Vec<Row> {
    vec![
        row!(oid: 1663, spcname: "pg_default"),
        row!(oid: 1664, spcname: "pg_global"),
    ]
}

fn pg_tables(c: &Catalog) -> Vec<Row> {
    let mut rows: Vec<Row> =
        c.db.table_names()
            .into_iter()
            .map(|name| row!(schemaname: SCHEMA, tablename: name))
            .collect();
    rows.extend(
        RELATIONS
            .iter()
            .filter(|r| !r.view)
            .map(|r| row!(schemaname: "pg_catalog", tablename: r.name)),
    );
    rows
}

fn pg_settings(_: &Catalog) -> Vec<Row> {
    SETTINGS
        .iter()
        .map(
            |&(name, setting, unit, category, short_desc, context, vartype)| {
                let unit = if unit.is_empty() {
                    V::Null
                } else {
                    V::from(unit)
                };
                let mut r = row!(
                    name: name,
                    setting: setting,
                    category: category,
                    short_desc: short_desc,
                    context: context,
                    vartype: vartype,
                    boot_val: setting,
                    reset_val: setting,
                );
                r.push(("unit", unit));
                r
            },
        )
        .collect()
}

fn pg_proc(c: &Catalog) -> Vec<Row> {
    c.procs
        .get()
        .map(|procs| {
            procs
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    row!(
                        oid: FIRST_PROC_OID + i as i32,
                        proname: p.name.clone(),
                        prokind: p.kind,
                        provolatile: p.volatility,
                        prorettype: p.rettype,
                        prosrc: p.name.clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The schema provider
// ---------------------------------------------------------------------------------------------

/// A function as `pg_proc` lists it.
#[derive(Debug)]
struct Proc {
    name: String,
    /// `f` function, `a` aggregate, `w` window.
    kind: char,
    /// `i` immutable, `s` stable, `v` volatile.
    volatility: char,
    rettype: i32,
}

/// What the catalog's rows and functions are computed from.
#[derive(Debug)]
struct Catalog {
    db: Arc<Database>,
    /// Every function of the session, set once after Sundial's own are registered.
    procs: OnceLock<Vec<Proc>>,
    /// When the engine started, in microseconds since the epoch.
    started_us: i64,
    /// The last transaction id `txid_current()` handed out.
    xid: AtomicI64,
}

impl Catalog {
    /// The OID of a relation named as `to_regclass` / `'name'::regclass` read it: schema-qualified
    /// or not, quoted or not. Unqualified names look in `pg_catalog` first, as PostgreSQL does.
    fn relation_oid(&self, name: &str) -> Option<i32> {
        let parts: Vec<String> = split_qualified(name);
        let (schema, rel) = match parts.as_slice() {
            [rel] => (None, rel.as_str()),
            [schema, rel] => (Some(schema.as_str()), rel.as_str()),
            [_, schema, rel] => (Some(schema.as_str()), rel.as_str()),
            _ => return None,
        };
        let catalog = || relation(rel).map(|r| r.oid);
        let public = || self.db.table(rel).map(|t| table_oid(&t.name()));
        match schema {
            None => catalog().or_else(public),
            Some("pg_catalog") => catalog(),
            Some(s) if s == SCHEMA => public(),
            Some(_) => None,
        }
    }
}

/// Splits `a."B".c` into `["a", "B", "c"]`, lower-casing unquoted parts.
fn split_qualified(name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = name.trim().chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '"' if quoted && chars.peek() == Some(&'"') => {
                current.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut current)),
            c if quoted => current.push(c),
            c => current.extend(c.to_lowercase()),
        }
    }
    parts.push(current);
    parts
}

/// The `pg_catalog` schema: each relation's rows are computed when it is scanned.
#[derive(Debug)]
struct PgCatalogSchema {
    catalog: Arc<Catalog>,
}

#[async_trait]
impl SchemaProvider for PgCatalogSchema {
    fn table_names(&self) -> Vec<String> {
        RELATIONS.iter().map(|r| r.name.to_string()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        Ok(relation(name).map(|rel| {
            Arc::new(CatalogTable {
                rel,
                schema: schema_of(rel.cols),
                catalog: self.catalog.clone(),
            }) as Arc<dyn TableProvider>
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        relation(name).is_some()
    }
}

/// One `pg_catalog` relation.
#[derive(Debug)]
struct CatalogTable {
    rel: &'static Rel,
    schema: SchemaRef,
    catalog: Arc<Catalog>,
}

#[async_trait]
impl TableProvider for CatalogTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        if self.rel.view {
            TableType::View
        } else {
            TableType::Base
        }
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let rows = self.rel.rows.map(|f| f(&self.catalog)).unwrap_or_default();
        let batch = batch(self.schema.clone(), self.rel.cols, &rows)?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            self.schema.clone(),
            projection.cloned(),
        )?)
    }
}

fn volatility_code(v: Volatility) -> char {
    match v {
        Volatility::Immutable => 'i',
        Volatility::Stable => 's',
        Volatility::Volatile => 'v',
    }
}

/// Every function the session knows, for `pg_proc`, sorted by name.
fn collect_procs(ctx: &SessionContext, ours: &[(String, i32)]) -> Vec<Proc> {
    let state = ctx.state();
    let rettype = |name: &str| {
        ours.iter()
            .find(|(n, _)| n == name)
            .map_or(ANYELEMENT_OID, |(_, t)| *t)
    };
    let mut procs: Vec<Proc> = state
        .scalar_functions()
        .iter()
        .map(|(name, f)| Proc {
            name: name.clone(),
            kind: 'f',
            volatility: volatility_code(f.signature().volatility),
            rettype: rettype(name),
        })
        .collect();
    procs.extend(state.aggregate_functions().iter().map(|(name, f)| Proc {
        name: name.clone(),
        kind: 'a',
        volatility: volatility_code(f.signature().volatility),
        rettype: ANYELEMENT_OID,
    }));
    procs.extend(state.window_functions().iter().map(|(name, f)| Proc {
        name: name.clone(),
        kind: 'w',
        volatility: volatility_code(f.signature().volatility),
        rettype: ANYELEMENT_OID,
    }));
    procs.sort_by(|a, b| a.name.cmp(&b.name).then(a.kind.cmp(&b.kind)));
    procs.dedup_by(|a, b| a.name == b.name);
    procs
}

/// PostgreSQL's `array_out` (an array as PostgreSQL prints it, `{a,b}`), for the engine's casts
/// of arrays to text in catalog statements; registered by [`register`] too.
pub fn array_out() -> Arc<ScalarUDF> {
    static UDF: OnceLock<Arc<ScalarUDF>> = OnceLock::new();
    UDF.get_or_init(|| Arc::new(ScalarUDF::new_from_impl(functions::array_out())))
        .clone()
}

/// Registers `pg_catalog` and the PostgreSQL functions with `ctx`.
pub fn register(ctx: &SessionContext, db: Arc<Database>) -> DfResult<()> {
    let started_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64);
    let catalog = Arc::new(Catalog {
        db,
        procs: OnceLock::new(),
        started_us,
        xid: AtomicI64::new(1000),
    });
    let fns = functions::functions(&catalog);
    names::declare_functions(|| fns.iter().map(|f| (f.name, f.pg_oid())).collect());
    let mut ours = Vec::new();
    for f in fns {
        ours.push((f.name.to_string(), pg_oid_for_arrow(&f.returns)));
        ctx.register_udf(ScalarUDF::new_from_impl(f));
    }
    // Set once, right after the functions it lists are registered.
    let _ = catalog.procs.set(collect_procs(ctx, &ours));
    let Some(sundial) = ctx.catalog(CATALOG) else {
        return internal_err!("the session has no catalog {CATALOG}");
    };
    sundial.register_schema(
        "pg_catalog",
        Arc::new(PgCatalogSchema {
            catalog: catalog.clone(),
        }),
    )?;
    // In place of DataFusion's own (which the engine turns off): see `information_schema`.
    let catalogs = ctx.state().catalog_list().clone();
    sundial.register_schema(
        "information_schema",
        Arc::new(information_schema::InformationSchema::new(
            catalogs, catalog,
        )),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use sundial_storage::ColumnType;

    use super::*;

    #[test]
    fn table_oids_are_stable_and_in_the_user_range() {
        let oid = table_oid("cpu");
        assert_eq!(oid, table_oid("CPU"));
        assert!(i64::from(oid) >= FIRST_USER_OID);
        assert_ne!(oid, table_oid("mem"));
    }

    #[test]
    fn arrow_types_map_to_postgres_types() {
        assert_eq!(pg_type_for_arrow(&DataType::Int64), (20, "int8", 8));
        assert_eq!(
            pg_type_for_arrow(&DataType::LargeUtf8),
            (1043, "varchar", -1)
        );
        let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        assert_eq!(pg_type_for_arrow(&dict).0, 1043);
        let ts = DataType::Timestamp(TimeUnit::Nanosecond, None);
        assert_eq!(pg_type_for_arrow(&ts).0, 1114);
        assert_eq!(pg_type_for_arrow(&list_of(DataType::Utf8)).0, 1009);
        assert_eq!(pg_type_for_arrow(&list_of(DataType::Int64)).0, 1016);
        assert_eq!(pg_type_for_arrow(&DataType::Null), (25, "text", -1));
        assert_eq!(pg_type_of(ColumnType::Uuid), (2950, "uuid", 16));
        assert_eq!(pg_type_of(ColumnType::Byte).0, 21);
    }

    #[test]
    fn every_array_type_points_at_its_element() {
        for t in TYPES {
            if t.array != 0 {
                assert_eq!(pg_type(t.array).map(|a| a.elem), Some(t.oid), "{}", t.name);
            }
        }
    }

    #[test]
    fn qualified_names_split() {
        assert_eq!(split_qualified("public.\"My.T\""), vec!["public", "My.T"]);
        assert_eq!(split_qualified("PG_CLASS"), vec!["pg_class"]);
    }

    #[test]
    fn every_relation_builds_its_rows() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = Database::open(dir.path(), sundial_storage::StorageOptions::default())
            .expect("open database");
        let ctx = SessionContext::new();
        let catalog = Catalog {
            db,
            procs: OnceLock::new(),
            started_us: 0,
            xid: AtomicI64::new(0),
        };
        let _ = catalog.procs.set(collect_procs(&ctx, &[]));
        for rel in RELATIONS {
            let rows = rel.rows.map(|f| f(&catalog)).unwrap_or_default();
            let built = batch(schema_of(rel.cols), rel.cols, &rows);
            assert!(built.is_ok(), "{rel:?}: {:?}", built.err());
            assert_eq!(rel.rows.is_some(), !rows.is_empty(), "{rel:?}");
        }
    }

    #[test]
    fn types_resolve_by_name() {
        assert_eq!(type_oid_by_name("integer"), Some(23));
        assert_eq!(type_oid_by_name("pg_catalog.int4"), Some(23));
        assert_eq!(type_oid_by_name("text[]"), Some(1009));
        assert_eq!(type_oid_by_name("nope"), None);
        assert_eq!(format_type(1043, Some(36)), "character varying(32)");
    }
}
