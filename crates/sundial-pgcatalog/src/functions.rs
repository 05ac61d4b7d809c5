//! PostgreSQL's functions for catalog queries: one generic UDF type, [`PgFunction`], holding a
//! name, a return type and a closure from one row's arguments to its value, and the list of them.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use datafusion::arrow::array::{Array, new_empty_array};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{
    Catalog, DATABASE, DATABASE_OWNER, DATABASE_OWNER_OID, NAMESPACES, ROLE, ROLE_OID, Ty,
    format_type, list_of, pg_oid_for_arrow, pg_setting, split_qualified, text_list,
    type_oid_by_name, version_string, with_pg_type,
};

// PostgreSQL type OIDs results are declared as.
const NAME: i32 = 19;
const TEXT: i32 = 25;
const OID: i32 = 26;
const NAME_ARRAY: i32 = 1003;
const TEXT_ARRAY: i32 = 1009;
const REGCLASS: i32 = 2205;
const REGTYPE: i32 = 2206;

type Eval = dyn Fn(&[ScalarValue]) -> DfResult<ScalarValue> + Send + Sync;

/// A PostgreSQL function: a name, a return type and a closure from one row's arguments to its
/// value. Applied to columns it is evaluated row by row, which suits catalog-sized inputs.
pub(super) struct PgFunction {
    pub(super) name: &'static str,
    signature: Signature,
    pub(super) returns: DataType,
    /// The PostgreSQL type of the result where `returns` does not say it (`name`, `text`,
    /// `regclass`, ...): declared on the result's field (see [`crate::PG_TYPE_KEY`]).
    pg_type: Option<i32>,
    eval: Arc<Eval>,
}

impl fmt::Debug for PgFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(...) -> {}", self.name, self.returns)
    }
}

// Functions are identified by name: one name, one function.
impl PartialEq for PgFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for PgFunction {}

impl std::hash::Hash for PgFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl PgFunction {
    /// Calls the closure and gives its result the declared return type.
    fn call(&self, args: &[ScalarValue]) -> DfResult<ScalarValue> {
        let value = (self.eval)(args)?;
        if value.data_type() == self.returns {
            Ok(value)
        } else if value.is_null() {
            ScalarValue::try_from(&self.returns)
        } else {
            value.cast_to(&self.returns)
        }
    }
}

fn arg_at(arg: &ColumnarValue, row: usize) -> DfResult<ScalarValue> {
    match arg {
        ColumnarValue::Scalar(s) => Ok(s.clone()),
        ColumnarValue::Array(a) => ScalarValue::try_from_array(a, row),
    }
}

impl ScalarUDFImpl for PgFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.returns.clone())
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let field = Field::new(self.name, self.returns.clone(), true);
        Ok(Arc::new(match self.pg_type {
            Some(oid) => with_pg_type(field, oid),
            None => field,
        }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.args.iter().find_map(|a| match a {
            ColumnarValue::Array(a) => Some(a.len()),
            ColumnarValue::Scalar(_) => None,
        });
        let Some(rows) = rows else {
            let scalars = args
                .args
                .iter()
                .map(|a| arg_at(a, 0))
                .collect::<DfResult<Vec<_>>>()?;
            return Ok(ColumnarValue::Scalar(self.call(&scalars)?));
        };
        if rows == 0 {
            return Ok(ColumnarValue::Array(new_empty_array(&self.returns)));
        }
        let mut out = Vec::with_capacity(rows);
        for row in 0..rows {
            let scalars = args
                .args
                .iter()
                .map(|a| arg_at(a, row))
                .collect::<DfResult<Vec<_>>>()?;
            out.push(self.call(&scalars)?);
        }
        Ok(ColumnarValue::Array(ScalarValue::iter_to_array(out)?))
    }
}

/// An argument as an integer: any integer type, or text holding one (`'16385'` is how psql
/// passes OIDs).
fn int_arg(args: &[ScalarValue], i: usize) -> Option<i64> {
    match args.get(i)? {
        ScalarValue::Int8(v) => v.map(i64::from),
        ScalarValue::Int16(v) => v.map(i64::from),
        ScalarValue::Int32(v) => v.map(i64::from),
        ScalarValue::Int64(v) => *v,
        ScalarValue::UInt8(v) => v.map(i64::from),
        ScalarValue::UInt16(v) => v.map(i64::from),
        ScalarValue::UInt32(v) => v.map(i64::from),
        ScalarValue::UInt64(v) => v.and_then(|v| i64::try_from(v).ok()),
        other => str_of(other).and_then(|s| s.trim().parse().ok()),
    }
}

fn str_of(v: &ScalarValue) -> Option<&str> {
    match v {
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => s.as_deref(),
        ScalarValue::Dictionary(_, inner) => str_of(inner),
        _ => None,
    }
}

fn str_arg(args: &[ScalarValue], i: usize) -> Option<&str> {
    args.get(i).and_then(str_of)
}

fn text(s: impl Into<String>) -> ScalarValue {
    ScalarValue::Utf8(Some(s.into()))
}

fn null_text() -> ScalarValue {
    ScalarValue::Utf8(None)
}

fn boolean(b: bool) -> ScalarValue {
    ScalarValue::Boolean(Some(b))
}

fn oid(v: Option<i32>) -> ScalarValue {
    ScalarValue::Int32(v)
}

/// `array_upper(a, 1)` / `array_lower(a, 1)` of a one-dimensional array: `bound(len)`, or NULL
/// for an empty or NULL array or another dimension.
fn array_bound(args: &[ScalarValue], bound: impl Fn(i64) -> i64) -> ScalarValue {
    let len = match args.first() {
        Some(ScalarValue::List(a)) if a.len() == 1 && a.is_valid(0) => a.value(0).len(),
        Some(ScalarValue::LargeList(a)) if a.len() == 1 && a.is_valid(0) => a.value(0).len(),
        _ => 0,
    };
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    ScalarValue::Int64((int_arg(args, 1) == Some(1) && len > 0).then(|| bound(len)))
}

/// The OID an object-identifier input names, as `regclass` & co. read it: a number is the OID
/// itself, anything else a name to look up.
fn object_oid(args: &[ScalarValue], by_name: impl Fn(&str) -> Option<i32>) -> Option<i32> {
    match int_arg(args, 0) {
        Some(n) => i32::try_from(n).ok(),
        None => str_arg(args, 0).and_then(by_name),
    }
}

/// PostgreSQL's reserved key words, which `quote_ident` quotes.
#[rustfmt::skip]
const RESERVED: &[&str] = &[
    "all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric", "both", "case",
    "cast", "check", "collate", "column", "constraint", "create", "current_catalog",
    "current_date", "current_role", "current_time", "current_timestamp", "current_user",
    "default", "deferrable", "desc", "distinct", "do", "else", "end", "except", "false", "fetch",
    "for", "foreign", "from", "grant", "group", "having", "in", "initially", "intersect", "into",
    "lateral", "leading", "limit", "localtime", "localtimestamp", "not", "null", "offset", "on",
    "only", "or", "order", "placing", "primary", "references", "returning", "select",
    "session_user", "some", "symmetric", "table", "then", "to", "trailing", "true", "union",
    "unique", "user", "using", "variadic", "when", "where", "window", "with",
];

/// `regexp_split_to_array(text, pattern)`: the pieces of `text` between matches of `pattern`
/// (a NULL for a NULL argument). A pattern that does not compile, or compiles too large, is an
/// error naming it. Rows are evaluated one by one; each thread keeps the last pattern it
/// compiled, so a column split by one pattern compiles it once.
fn regexp_split_to_array(args: &[ScalarValue]) -> DfResult<ScalarValue> {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(String, regex::Regex)>> =
            const { std::cell::RefCell::new(None) };
    }
    let (Some(text), Some(pattern)) = (str_arg(args, 0), str_arg(args, 1)) else {
        return Ok(ScalarValue::Null);
    };
    let regex = LAST.with_borrow_mut(|last| {
        if let Some((p, regex)) = last.as_ref()
            && p == pattern
        {
            return Ok(regex.clone());
        }
        let regex = regex::Regex::new(pattern).map_err(|e| {
            datafusion::error::DataFusionError::Execution(format!(
                "regexp_split_to_array: invalid pattern '{pattern}': {e}"
            ))
        })?;
        *last = Some((pattern.to_string(), regex.clone()));
        Ok::<_, datafusion::error::DataFusionError>(regex)
    })?;
    let pieces: Vec<ScalarValue> = regex
        .split(text)
        .map(|piece| ScalarValue::Utf8(Some(piece.to_string())))
        .collect();
    Ok(ScalarValue::List(ScalarValue::new_list_nullable(
        &pieces,
        &DataType::Utf8,
    )))
}

/// `parse_ident('public."My Table"')`: the parts of a qualified name, unquoted parts in lower
/// case, as a text array (`{public,"My Table"}`); an empty part is an error, as in PostgreSQL.
fn parse_ident(name: Option<&str>) -> DfResult<ScalarValue> {
    let Some(name) = name else {
        return ScalarValue::try_from(&DataType::new_list(DataType::Utf8, true));
    };
    let parts = super::split_qualified(name);
    if parts.iter().any(String::is_empty) {
        return Err(datafusion::error::DataFusionError::Execution(format!(
            "string is not a valid identifier: \"{name}\""
        )));
    }
    let parts: Vec<ScalarValue> = parts
        .into_iter()
        .map(|p| ScalarValue::Utf8(Some(p)))
        .collect();
    Ok(ScalarValue::List(ScalarValue::new_list_nullable(
        &parts,
        &DataType::Utf8,
    )))
}

fn quote_ident(s: &str) -> String {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$')
        && !RESERVED.contains(&s);
    if plain {
        s.to_string()
    } else {
        format!("\"{}\"", s.replace('"', "\"\""))
    }
}

/// `pg_size_pretty`: bytes below 10 kB, else the largest unit keeping the number below 20480
/// (i.e. 10 units, rounded half up), as PostgreSQL 15 does.
fn size_pretty(bytes: i64) -> String {
    const UNITS: [&str; 5] = ["kB", "MB", "GB", "TB", "PB"];
    if bytes.abs() < 10 * 1024 {
        return format!("{bytes} bytes");
    }
    let half_rounded = |x: i64| (x + if x < 0 { -1 } else { 1 }) / 2;
    // Keep one extra bit for rounding.
    let mut size = bytes / (1 << 9);
    for (i, unit) in UNITS.iter().enumerate() {
        if size.abs() < 20 * 1024 - 1 || i == UNITS.len() - 1 {
            return format!("{} {unit}", half_rounded(size));
        }
        size /= 1 << 10;
    }
    format!("{bytes} bytes")
}

fn encoding_name(code: i64) -> &'static str {
    match code {
        0 => "SQL_ASCII",
        6 => "UTF8",
        _ => "",
    }
}

fn namespace_oid(name: &str) -> Option<i32> {
    let name = split_qualified(name).pop()?;
    NAMESPACES.iter().find(|(_, n)| *n == name).map(|(o, _)| *o)
}

/// How a function is called: with no arguments, or with any number of any type (the closure
/// reads what it needs; PostgreSQL's overloads differ only in arity).
enum Args {
    None,
    Any,
}

fn function(
    name: &'static str,
    args: Args,
    volatility: Volatility,
    returns: DataType,
    eval: impl Fn(&[ScalarValue]) -> DfResult<ScalarValue> + Send + Sync + 'static,
) -> PgFunction {
    let signature = match args {
        Args::None => Signature::nullary(volatility),
        Args::Any => Signature::variadic_any(volatility),
    };
    PgFunction {
        name,
        signature,
        returns,
        pg_type: None,
        eval: Arc::new(eval),
    }
}

impl PgFunction {
    /// The function with its result declared as PostgreSQL type `oid`.
    fn pg(mut self, oid: i32) -> PgFunction {
        self.pg_type = Some(oid);
        self
    }

    /// The PostgreSQL type of the result.
    pub(super) fn pg_oid(&self) -> i32 {
        self.pg_type
            .unwrap_or_else(|| pg_oid_for_arrow(&self.returns))
    }
}

/// A function returning a constant.
fn constant(name: &'static str, args: Args, value: ScalarValue) -> PgFunction {
    let returns = value.data_type();
    function(name, args, Volatility::Stable, returns, move |_| {
        Ok(value.clone())
    })
}

pub(super) fn functions(c: &Arc<Catalog>) -> Vec<PgFunction> {
    use Args::{Any as A, None as N};
    let utf8 = DataType::Utf8;
    let mut fns =
        vec![
            constant("version", N, text(version_string())).pg(TEXT),
            constant("current_schema", N, text(sundial_sql::names::SCHEMA)).pg(NAME),
            constant("current_database", N, text(DATABASE)).pg(NAME),
            constant("current_catalog", N, text(DATABASE)).pg(NAME),
            constant("current_user", N, text(ROLE)).pg(NAME),
            constant("session_user", N, text(ROLE)).pg(NAME),
            constant("current_role", N, text(ROLE)).pg(NAME),
            constant("pg_backend_pid", N, ScalarValue::Int32(Some(0))),
            constant("pg_is_in_recovery", N, boolean(false)),
            constant("pg_my_temp_schema", N, oid(Some(0))).pg(OID),
            function(
                "current_schemas",
                A,
                Volatility::Stable,
                list_of(utf8.clone()),
                |a| {
                    let mut schemas = vec![sundial_sql::names::SCHEMA.to_string()];
                    if matches!(a.first(), Some(ScalarValue::Boolean(Some(true)))) {
                        schemas.insert(0, "pg_catalog".into());
                    }
                    Ok(ScalarValue::List(text_list(&schemas)))
                },
            )
            .pg(NAME_ARRAY),
            function(
                "current_setting",
                A,
                Volatility::Stable,
                utf8.clone(),
                |a| {
                    let Some(name) = str_arg(a, 0) else {
                        return Ok(null_text());
                    };
                    match pg_setting(name) {
                        Some(v) => Ok(text(v)),
                        None if matches!(a.get(1), Some(ScalarValue::Boolean(Some(true)))) => {
                            Ok(null_text())
                        }
                        None => exec_err!("unrecognized configuration parameter \"{name}\""),
                    }
                },
            )
            .pg(TEXT)
            .pg(TEXT),
            function("set_config", A, Volatility::Volatile, utf8.clone(), |a| {
                Ok(str_arg(a, 1).map_or_else(null_text, text))
            }),
            function(
                "pg_get_userbyid",
                A,
                Volatility::Stable,
                utf8.clone(),
                |a| {
                    Ok(match int_arg(a, 0) {
                        None => null_text(),
                        Some(10) => text(ROLE),
                        Some(n) if n == i64::from(DATABASE_OWNER_OID) => text(DATABASE_OWNER),
                        Some(n) => text(format!("unknown (OID={n})")),
                    })
                },
            )
            .pg(TEXT)
            .pg(NAME),
            function("format_type", A, Volatility::Stable, utf8.clone(), |a| {
                Ok(int_arg(a, 0)
                    .map_or_else(null_text, |o| text(format_type(o as i32, int_arg(a, 1)))))
            }),
            function("pg_typeof", A, Volatility::Stable, utf8.clone(), |a| {
                let data_type = a.first().map_or(DataType::Null, |v| v.data_type());
                Ok(text(format_type(pg_oid_for_arrow(&data_type), None)))
            }),
            function(
                "pg_encoding_to_char",
                A,
                Volatility::Stable,
                utf8.clone(),
                |a| Ok(int_arg(a, 0).map_or_else(null_text, |e| text(encoding_name(e)))),
            )
            .pg(TEXT)
            .pg(NAME),
            function("quote_ident", A, Volatility::Immutable, utf8.clone(), |a| {
                Ok(str_arg(a, 0).map_or_else(null_text, |s| text(quote_ident(s))))
            }),
            function(
                "parse_ident",
                A,
                Volatility::Immutable,
                DataType::new_list(DataType::Utf8, true),
                |a| parse_ident(str_arg(a, 0)),
            )
            .pg(TEXT_ARRAY),
            function(
                "regexp_split_to_array",
                A,
                Volatility::Immutable,
                DataType::new_list(DataType::Utf8, true),
                regexp_split_to_array,
            ),
            function(
                "pg_size_pretty",
                A,
                Volatility::Immutable,
                utf8.clone(),
                |a| Ok(int_arg(a, 0).map_or_else(null_text, |n| text(size_pretty(n)))),
            )
            .pg(REGTYPE)
            .pg(TEXT),
            function("to_regtype", A, Volatility::Stable, DataType::Int32, |a| {
                Ok(oid(object_oid(a, type_oid_by_name)))
            }),
            function(
                "to_regnamespace",
                A,
                Volatility::Stable,
                DataType::Int32,
                |a| Ok(oid(object_oid(a, namespace_oid))),
            ),
            function("to_regrole", A, Volatility::Stable, DataType::Int32, |a| {
                Ok(oid(object_oid(a, |s| {
                    let name = split_qualified(s).pop();
                    (name.as_deref() == Some(ROLE)).then_some(ROLE_OID)
                })))
            }),
            function("txid_current", N, Volatility::Volatile, DataType::Int64, {
                let c = c.clone();
                move |_| {
                    Ok(ScalarValue::Int64(Some(
                        c.xid.fetch_add(1, Ordering::Relaxed) + 1,
                    )))
                }
            }),
            function(
                "pg_postmaster_start_time",
                N,
                Volatility::Stable,
                Ty::Ts.arrow(),
                {
                    let started = c.started_us;
                    move |_| {
                        Ok(ScalarValue::TimestampMicrosecond(
                            Some(started),
                            Some("UTC".into()),
                        ))
                    }
                },
            ),
            // Bounds are `Int64` (PostgreSQL's are `int4`) so that they can feed `generate_series`.
            function(
                "array_upper",
                A,
                Volatility::Immutable,
                DataType::Int64,
                |a| Ok(array_bound(a, |len| len)),
            ),
            function(
                "array_lower",
                A,
                Volatility::Immutable,
                DataType::Int64,
                |a| Ok(array_bound(a, |_| 1)),
            )
            .pg(REGCLASS),
            function("to_regclass", A, Volatility::Stable, DataType::Int32, {
                let c = c.clone();
                move |a| Ok(oid(object_oid(a, |n| c.relation_oid(n))))
            }),
        ];
    // Everything is visible and permitted: one role, a superuser, one search path.
    for name in [
        "pg_table_is_visible",
        "pg_type_is_visible",
        "pg_function_is_visible",
        "has_table_privilege",
        "has_schema_privilege",
        "has_database_privilege",
        "has_column_privilege",
        "has_any_column_privilege",
        "has_function_privilege",
        "has_sequence_privilege",
        "has_tablespace_privilege",
        "pg_has_role",
    ] {
        fns.push(constant(name, A, boolean(true)));
    }
    for name in ["pg_relation_is_publishable", "pg_is_other_temp_schema"] {
        fns.push(constant(name, A, boolean(false)));
    }
    // Sizes: Sundial does not account bytes per relation.
    for name in [
        "pg_relation_size",
        "pg_total_relation_size",
        "pg_table_size",
        "pg_indexes_size",
        "pg_database_size",
    ] {
        fns.push(constant(name, A, ScalarValue::Int64(Some(0))));
    }
    // Definitions and comments of objects Sundial never has.
    for name in [
        "pg_get_expr",
        "pg_get_indexdef",
        "pg_get_constraintdef",
        "pg_get_viewdef",
        "pg_get_partkeydef",
        "pg_get_statisticsobjdef_columns",
        "pg_get_triggerdef",
        "pg_get_ruledef",
        "pg_get_functiondef",
        "pg_get_function_result",
        "pg_get_function_arguments",
        "pg_get_function_identity_arguments",
        "pg_get_serial_sequence",
        "obj_description",
        "col_description",
        "shobj_description",
    ] {
        fns.push(constant(name, A, null_text()).pg(TEXT));
    }
    // Every tablespace is a default one, which has no location.
    fns.push(constant("pg_tablespace_location", A, text("")).pg(TEXT));
    // Statistics Sundial does not keep (DBeaver's index list asks for scans).
    for name in ["pg_stat_get_numscans", "pg_stat_get_tuples_returned"] {
        fns.push(constant(name, A, ScalarValue::Int64(Some(0))));
    }
    fns.push(array_out());
    fns
}

/// `array_out(array)`: an array as PostgreSQL prints it, `{a,b}`, which is what its casts of
/// arrays to text give (`nspacl::text`).
pub(super) fn array_out() -> PgFunction {
    function(
        "array_out",
        Args::Any,
        Volatility::Immutable,
        DataType::Utf8,
        |a| {
            let Some(value) = a.first() else {
                return Ok(null_text());
            };
            if value.is_null() {
                return Ok(null_text());
            }
            let mut out = String::new();
            array_text(value, &mut out)?;
            Ok(text(out))
        },
    )
    .pg(TEXT)
}

/// Appends PostgreSQL's text of array `value` (a list scalar) to `out`.
fn array_text(value: &ScalarValue, out: &mut String) -> DfResult<()> {
    let items = match value {
        ScalarValue::List(l) => l.value(0),
        ScalarValue::LargeList(l) => l.value(0),
        ScalarValue::FixedSizeList(l) => l.value(0),
        other => return exec_err!("array_out of a {}", other.data_type()),
    };
    out.push('{');
    for i in 0..items.len() {
        if i > 0 {
            out.push(',');
        }
        let item = ScalarValue::try_from_array(&items, i)?;
        match &item {
            v if v.is_null() => out.push_str("NULL"),
            ScalarValue::List(_) | ScalarValue::LargeList(_) | ScalarValue::FixedSizeList(_) => {
                array_text(&item, out)?;
            }
            ScalarValue::Boolean(Some(b)) => out.push(if *b { 't' } else { 'f' }),
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => push_array_element(s, out),
            other => push_array_element(&other.to_string(), out),
        }
    }
    out.push('}');
    Ok(())
}

/// An element of an array's text, double-quoted when PostgreSQL quotes it: empty, `NULL`, or
/// holding a delimiter, a brace, a quote, a backslash or white space.
fn push_array_element(s: &str, out: &mut String) {
    let quoted = s.is_empty()
        || s.eq_ignore_ascii_case("null")
        || s.chars()
            .any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\') || c.is_ascii_whitespace());
    if !quoted {
        out.push_str(s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_as_postgres_does() {
        assert_eq!(size_pretty(0), "0 bytes");
        assert_eq!(size_pretty(8192), "8192 bytes");
        assert_eq!(size_pretty(10 * 1024), "10 kB");
        assert_eq!(size_pretty(1_000_000), "977 kB");
        assert_eq!(size_pretty(100_000_000), "95 MB");
    }

    #[test]
    fn arrays_print_as_postgres_does() {
        let f = array_out();
        let list = |items: &[&str]| {
            let items: Vec<String> = items.iter().map(|s| s.to_string()).collect();
            ScalarValue::List(crate::text_list(&items))
        };
        let printed = |v: ScalarValue| f.call(&[v]).expect("prints");
        assert_eq!(
            printed(list(&["admin=UC/admin", "=U/admin"])),
            text("{admin=UC/admin,=U/admin}")
        );
        assert_eq!(printed(list(&[])), text("{}"));
        assert_eq!(
            printed(list(&["a b", "", "x,y", "q\"", "null"])),
            text(r#"{"a b","","x,y","q\"","null"}"#)
        );
        assert_eq!(printed(null_text()), null_text());
    }

    #[test]
    fn identifiers_quote_when_needed() {
        assert_eq!(quote_ident("cpu"), "cpu");
        assert_eq!(quote_ident("Cpu"), "\"Cpu\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_ident("select"), "\"select\"");
    }
}
