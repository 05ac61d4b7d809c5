//! Error text for people. DataFusion's, Arrow's and the SQL parser's errors name Arrow types
//! (`Float64`, `Dictionary(Int32, Utf8)`), internal rule names (`Optimizer rule
//! 'simplify_expressions' failed`), the catalog's `sundial.public.` prefix, Rust debug
//! formatting (`ParserError("...")`) and a plea to report DataFusion bugs. [`describe`] rewords
//! them in Sundial's terms:
//!
//! ```text
//!   DataFusionError ──strip wrappers (context, diagnostics, shared)──▶ the fault
//!        the fault ──by kind (parser, schema, plan, cast, ...)──▶ a sentence
//!     the sentence ──Arrow types as SQL types, literals as SQL──▶ describe()
//! ```
//!
//! Invariant: the text never contains a Rust type's debug form, an Arrow type name, a rule
//! name or a catalog prefix (errors.slt is the regression net). The SQL position is not part
//! of the text: `QueryError` adds it.

use datafusion::arrow::error::ArrowError;
use datafusion::common::SchemaError;
use datafusion::error::DataFusionError;
use sundial_sql::lower_first;

/// The sentence a person reads for `error` (see the module docs).
pub(crate) fn describe(error: &DataFusionError) -> String {
    if is_spill_limit(error) {
        return "the query would spill more to disk than all queries may at once (the server's \
                --spill-bytes-max)"
            .into();
    }
    let text = match fault(error) {
        DataFusionError::SQL(e, _) => sundial_sql::parser_message(&e.to_string()),
        DataFusionError::SchemaError(e, _) => schema_message(e),
        DataFusionError::ArrowError(e, _) => arrow_message(e),
        DataFusionError::Plan(m) | DataFusionError::Execution(m) => plan_message(m),
        DataFusionError::Internal(m) => format!("internal error: {}", plan_message(m)),
        DataFusionError::NotImplemented(m) => format!("not supported: {}", plan_message(m)),
        DataFusionError::ResourcesExhausted(m) => memory_message(m),
        DataFusionError::Configuration(m) => plan_message(m),
        DataFusionError::IoError(e) => format!("i/o error: {e}"),
        DataFusionError::ExecutionJoin(e) => format!("a query task failed: {e}"),
        DataFusionError::External(e) => plan_message(&e.to_string()),
        DataFusionError::Collection(errors) => {
            // The same fault met at several places (one unknown function called twice) is
            // said once.
            let mut said: Vec<String> = Vec::new();
            for message in errors.iter().map(describe) {
                if !said.contains(&message) {
                    said.push(message);
                }
            }
            said.join("; ")
        }
        other => plan_message(&other.message()),
    };
    sql_words(&without_bug_report(&text))
}

/// The error under DataFusion's wrappers: contexts (optimizer rule names), diagnostics and
/// shared errors.
fn fault(error: &DataFusionError) -> &DataFusionError {
    match error {
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => fault(inner),
        DataFusionError::Shared(inner) => fault(inner),
        DataFusionError::ArrowError(e, _) => match e.as_ref() {
            ArrowError::ExternalError(inner) => match inner.downcast_ref::<DataFusionError>() {
                Some(inner) => fault(inner),
                None => error,
            },
            _ => error,
        },
        DataFusionError::Collection(errors) if errors.len() == 1 => fault(&errors[0]),
        other => other,
    }
}

/// Whether `error` is DataFusion's disk manager refusing a spill past its size bound
/// (`--spill-bytes-max`). DataFusion reports it only as an I/O error of kind `Other` inside
/// the spill writer's Arrow error, so its text is what tells it apart.
pub(crate) fn is_spill_limit(error: &DataFusionError) -> bool {
    const SPILL_LIMIT: &str = "spilling process has exceeded the allowable limit";
    let io = |e: &std::io::Error| {
        e.kind() == std::io::ErrorKind::Other && e.to_string().contains(SPILL_LIMIT)
    };
    match fault(error) {
        DataFusionError::IoError(e) => io(e),
        DataFusionError::ArrowError(e, _) => match e.as_ref() {
            ArrowError::IoError(_, e) => io(e),
            other => other.to_string().contains(SPILL_LIMIT),
        },
        DataFusionError::External(e) => e.to_string().contains(SPILL_LIMIT),
        _ => false,
    }
}

fn schema_message(e: &SchemaError) -> String {
    match e {
        SchemaError::FieldNotFound {
            field,
            valid_fields,
        } => {
            let mut names: Vec<&str> = valid_fields.iter().map(|c| c.name.as_str()).collect();
            names.dedup();
            let name = match &field.relation {
                Some(r) => format!("{}.{}", r.table(), field.name),
                None => field.name.clone(),
            };
            // Long lists help nobody; short ones catch typos.
            if !names.is_empty() && names.len() <= 16 {
                format!(
                    "column '{name}' does not exist (columns: {})",
                    names.join(", ")
                )
            } else {
                format!("column '{name}' does not exist")
            }
        }
        SchemaError::AmbiguousReference { field } => {
            format!("column reference '{}' is ambiguous", field.name)
        }
        SchemaError::DuplicateQualifiedField { qualifier, name } => {
            format!("column '{}.{name}' appears twice", qualifier.table())
        }
        SchemaError::DuplicateUnqualifiedField { name } => {
            format!("column '{name}' appears twice")
        }
    }
}

fn arrow_message(e: &ArrowError) -> String {
    match e {
        ArrowError::DivideByZero => "division by zero".into(),
        ArrowError::CastError(m) => match failed_value(m) {
            Some((value, to)) => format!("cannot convert '{value}' to {to}"),
            None => lower_first(m),
        },
        ArrowError::ParseError(m) => match failed_value(m) {
            Some((value, to)) => match m.split_once("': ") {
                Some((_, why)) => format!("cannot convert '{value}' to {to}: {why}"),
                None => format!("cannot convert '{value}' to {to}"),
            },
            None => lower_first(m),
        },
        ArrowError::ComputeError(m) | ArrowError::InvalidArgumentError(m) => lower_first(m),
        ArrowError::ArithmeticOverflow(m) => format!("arithmetic overflow: {}", lower_first(m)),
        ArrowError::ExternalError(e) => lower_first(&e.to_string()),
        other => lower_first(&other.to_string()),
    }
}

/// DataFusion's `Failed to allocate additional 6.5 MB for ScanAggregateExec[0] with 0.0 B
/// already allocated for this reservation - 4.0 MB remain available for the total memory
/// pool: ...` without the operator and the pool's internals.
fn memory_message(m: &str) -> String {
    let needed = m
        .split_once("allocate additional ")
        .and_then(|(_, r)| r.split_once(" for "))
        .map(|(n, _)| n);
    let left = m
        .split_once("- ")
        .and_then(|(_, r)| r.split_once(" remain available"))
        .map(|(n, _)| n);
    match (needed, left) {
        (Some(needed), Some(left)) => format!(
            "the query needs more memory than it may use: {needed} more was asked for with \
             {left} left of the query memory limit (the server's --query-memory-bytes-max)"
        ),
        // Sundial's own bounds word their refusals for people already.
        _ if !m.contains("Failed to allocate") => m.to_string(),
        _ => "the query needs more memory than it may use (the server's --query-memory-bytes-max)"
            .into(),
    }
}

/// The value and the target type of Arrow's conversion errors:
/// `Cannot cast string 'abc' to value of Float64 type` and
/// `Error parsing timestamp from 'x': ...`.
pub(crate) fn failed_value(message: &str) -> Option<(String, String)> {
    if let Some(rest) = message.strip_prefix("Cannot cast string '")
        && let Some((value, rest)) = rest.split_once("' to value of ")
    {
        let to = rest.trim_end_matches(" type");
        return Some((value.to_string(), to.to_string()));
    }
    if let Some(rest) = message.strip_prefix("Error parsing timestamp from '")
        && let Some((value, _)) = rest.split_once('\'')
    {
        return Some((value.to_string(), "TIMESTAMP".into()));
    }
    None
}

/// Planning and execution messages: function signatures, missing tables and functions.
fn plan_message(m: &str) -> String {
    let m = m
        .trim_start_matches("Error during planning: ")
        .trim_start_matches("Internal error: ")
        .trim_start_matches("Execution error: ");
    if let Some(at) = m.find("No function matches the given name and argument types '") {
        let rest = &m[at + "No function matches the given name and argument types '".len()..];
        if let Some((call, rest)) = rest.split_once("'.") {
            let candidates: Vec<&str> = rest
                .split_once("Candidate functions:")
                .map(|(_, c)| c.lines().map(str::trim).filter(|l| !l.is_empty()).collect())
                .unwrap_or_default();
            return if candidates.is_empty() {
                format!("function {call} does not exist")
            } else {
                format!(
                    "function {call} does not exist; it takes {}",
                    candidates.join(", ")
                )
            };
        }
    }
    if let Some(rest) = m.strip_prefix("Invalid function '")
        && let Some((name, rest)) = rest.split_once('\'')
    {
        let hint = rest
            .split_once("Did you mean '")
            .and_then(|(_, h)| h.split_once('\''))
            .map(|(h, _)| format!("; did you mean '{h}'?"))
            .unwrap_or_default();
        return format!("function '{name}' does not exist{hint}");
    }
    if let Some(rest) = m.strip_prefix("table '")
        && let Some(name) = rest.strip_suffix("' not found")
    {
        return format!("table '{name}' does not exist");
    }
    if let Some(rest) = m.strip_prefix("Cannot coerce arithmetic expression ")
        && let Some(expr) = rest.strip_suffix(" to valid types")
    {
        return format!("cannot compute {expr}: the types do not match");
    }
    lower_first(m)
}

/// Removes DataFusion's request to report a bug (our users cannot act on it).
fn without_bug_report(text: &str) -> String {
    const START: &str = ".\nThis issue was likely caused by a bug in DataFusion's code.";
    const END: &str = "https://github.com/apache/datafusion/issues";
    let mut out = text.to_string();
    while let Some(at) = out.find(START) {
        let end = out[at..]
            .find(END)
            .map_or(out.len(), |e| at + e + END.len());
        out.replace_range(at..end, "");
    }
    out.trim_end_matches('.').trim().to_string()
}

/// Arrow's names for types and literals replaced with SQL's, and the catalog's prefix gone.
fn sql_words(text: &str) -> String {
    let text = text
        .replace("sundial.public.", "")
        .replace("datafusion.public.", "");
    let text = literals_as_sql(&text);
    replace_words(&text, TYPE_NAMES)
}

/// Arrow type names (as DataFusion prints them) and the SQL type each is, longest first.
const TYPE_NAMES: &[(&str, &str)] = &[
    ("Dictionary(Int32, Utf8)", "SYMBOL"),
    ("Dictionary(UInt32, Utf8)", "SYMBOL"),
    ("Timestamp(Nanosecond, None)", "TIMESTAMP"),
    ("Timestamp(Nanosecond, Some(\"UTC\"))", "TIMESTAMP"),
    ("Timestamp(Nanosecond, Some(\"+00:00\"))", "TIMESTAMP"),
    ("Timestamp(Microsecond, None)", "TIMESTAMP"),
    ("Timestamp(Millisecond, None)", "TIMESTAMP"),
    ("Timestamp(Second, None)", "TIMESTAMP"),
    ("Timestamp(ns)", "TIMESTAMP"),
    ("Timestamp(ns, \"UTC\")", "TIMESTAMP"),
    ("Timestamp(ns, \"+00:00\")", "TIMESTAMP"),
    ("Timestamp(µs)", "TIMESTAMP"),
    ("Timestamp(ms)", "TIMESTAMP"),
    ("Timestamp(s)", "TIMESTAMP"),
    ("Interval(MonthDayNano)", "INTERVAL"),
    ("FixedSizeBinary(16)", "UUID"),
    ("Duration(Nanosecond)", "INTERVAL"),
    ("Duration(ns)", "INTERVAL"),
    ("LargeUtf8", "VARCHAR"),
    ("Utf8View", "VARCHAR"),
    ("Utf8", "VARCHAR"),
    ("LargeBinary", "BINARY"),
    ("BinaryView", "BINARY"),
    ("Binary", "BINARY"),
    ("Float64", "DOUBLE"),
    ("Float32", "FLOAT"),
    ("Float16", "FLOAT"),
    ("UInt64", "UNSIGNED LONG"),
    ("UInt32", "UNSIGNED INT"),
    ("UInt16", "UNSIGNED SHORT"),
    ("UInt8", "UNSIGNED BYTE"),
    ("Int64", "LONG"),
    ("Int32", "INT"),
    ("Int16", "SHORT"),
    ("Int8", "BYTE"),
    ("Boolean", "BOOLEAN"),
    ("Date64", "DATE"),
    ("Date32", "DATE"),
    ("Decimal", "DECIMAL"),
    ("Duration", "INTERVAL"),
    ("Interval", "INTERVAL"),
];

/// `text` with each whole-word occurrence of a pair's first element replaced by its second.
fn replace_words(text: &str, pairs: &[(&str, &str)]) -> String {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while let Some(c) = rest.chars().next() {
        let at_boundary = !out.chars().next_back().is_some_and(word);
        if at_boundary {
            for (from, to) in pairs {
                if let Some(after) = rest.strip_prefix(from)
                    && !after.chars().next().is_some_and(word)
                {
                    out.push_str(to);
                    rest = after;
                    continue 'scan;
                }
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// DataFusion prints literals as `Int64(1)`, `Utf8("a")`, `Float64(1.5)`, `Boolean(true)`:
/// these become `1`, `'a'`, `1.5` and `true`.
fn literals_as_sql(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some((sql, used)) = literal_at(rest)
            && !out
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            out.push_str(&sql);
            rest = &rest[used..];
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The SQL text of DataFusion's display of a literal at the start of `text`, and how many
/// bytes it took.
pub(crate) fn literal_at(text: &str) -> Option<(String, usize)> {
    const NUMERIC: &[&str] = &[
        "Int8(", "Int16(", "Int32(", "Int64(", "UInt8(", "UInt16(", "UInt32(", "UInt64(",
        "Float16(", "Float32(", "Float64(", "Boolean(",
    ];
    for prefix in NUMERIC {
        if let Some(rest) = text.strip_prefix(prefix) {
            let end = rest.find(')')?;
            let value = &rest[..end];
            let plain = value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'));
            return plain.then(|| (value.to_string(), prefix.len() + end + 1));
        }
    }
    for prefix in ["Utf8(\"", "Utf8View(\"", "LargeUtf8(\""] {
        if let Some(rest) = text.strip_prefix(prefix) {
            let end = rest.find("\")")?;
            let value = &rest[..end];
            return Some((
                format!("'{}'", value.replace('\'', "''")),
                prefix.len() + end + 2,
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrow_types_and_literals_become_sql() {
        assert_eq!(
            sql_words("Cannot coerce Float64 + Utf8 and Dictionary(Int32, Utf8)"),
            "Cannot coerce DOUBLE + VARCHAR and SYMBOL"
        );
        assert_eq!(
            sql_words("t.v + Int64(1) and Utf8(\"it's\")"),
            "t.v + 1 and 'it''s'"
        );
        assert_eq!(sql_words("MyInt64 Int64x"), "MyInt64 Int64x");
        assert_eq!(sql_words("table 'sundial.public.cpu'"), "table 'cpu'");
    }

    #[test]
    fn a_fault_met_twice_is_said_once() {
        let unknown = || DataFusionError::Plan("function 'f' does not exist".into());
        let other = DataFusionError::Plan("function 'g' does not exist".into());
        let collected = DataFusionError::Collection(vec![unknown(), unknown(), other]);
        assert_eq!(
            describe(&collected),
            "function 'f' does not exist; function 'g' does not exist"
        );
    }

    #[test]
    fn parser_errors_lose_their_debug_form() {
        use sundial_sql::parser_message;
        assert_eq!(
            parser_message(
                "sql parser error: Expected: an SQL statement, found: SELCT at Line: 1, Column: 1"
            ),
            "expected an SQL statement, found 'SELCT'"
        );
        assert_eq!(
            parser_message("sql parser error: Expected: ), found: EOF at Line: 1, Column: 9"),
            "expected ), found the end of the statement"
        );
    }

    #[test]
    fn the_bug_report_plea_goes() {
        let text = "Function 'sum' failed.\nThis issue was likely caused by a bug in DataFusion's code. Please help us to resolve this by filing a bug report in our issue tracker: https://github.com/apache/datafusion/issues. No function matches";
        assert_eq!(
            without_bug_report(text),
            "Function 'sum' failed. No function matches"
        );
    }

    #[test]
    fn conversion_failures_name_value_and_type() {
        assert_eq!(
            failed_value("Cannot cast string 'abc' to value of Float64 type"),
            Some(("abc".into(), "Float64".into()))
        );
        assert_eq!(
            failed_value(
                "Error parsing timestamp from 'x': timestamp must contain at least 10 characters"
            ),
            Some(("x".into(), "TIMESTAMP".into()))
        );
    }
}
