//! QuestDB reads an integer that meets a TIMESTAMP as microseconds since the epoch:
//! `ts >= 0`, `ts BETWEEN 1451606400000000 AND 1451610000000000`, `ts IN (0, 1)` and
//! `CAST(1451613600000000 AS TIMESTAMP)` (what QuestDB's Grafana plugin sends for every
//! `$__timeFilter`). SQL has no rule for a TIMESTAMP compared with an integer, and DataFusion
//! casts integers to TIMESTAMP as seconds; so such integer literals become
//! `to_timestamp_micros(n)`:
//!
//! - an integer literal cast to TIMESTAMP, anywhere (the cast stays, for its type and name);
//! - an integer literal compared (`=`, `<>`, `<`, `<=`, `>`, `>=`, `BETWEEN`, `IN`) with a
//!   TIMESTAMP: a column that is a TIMESTAMP in one of the statement's tables (by its
//!   qualifier's table when it has one), a cast to TIMESTAMP, or a function that returns one
//!   (`now()`, `timestamp_floor`, `dateadd`, ...).
//!
//! Only literals (and constant integer arithmetic, `1704067200000000 + 3600000000`) are
//! rewritten: an integer column compared with a timestamp is left to SQL's rules (an error
//! naming both types), since the statement's text alone does not tell its type.
//!
//! The same rule the other way round, as QuestDB answers:
//!
//! - `ts + n` and `ts - n` (an integer constant) add or subtract microseconds;
//! - `ts1 - ts2` is a LONG count of microseconds;
//! - `CAST(ts AS LONG)` (or BIGINT, INT, `ts::long`) is microseconds since the epoch, and
//!   `CAST(ts AS DATE)` keeps the time to the millisecond (QuestDB's DATE);
//! - a string compared with a TIMESTAMP may be partial (`ts > '2024-01-02T12'` is noon,
//!   `'2024-01'` the month's first instant), as in interval literals (`interval`).

use std::collections::HashMap;
use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, CastKind, DataType, Expr, ObjectName, Statement, TableFactor, UnaryOperator,
    Value, Visit, VisitMut, Visitor, VisitorMut,
};

use super::Catalog;
use crate::ast::call;

/// Functions whose result is a TIMESTAMP.
const TIMESTAMP_FUNCTIONS: [&str; 10] = [
    "now",
    "systimestamp",
    "sysdate",
    "timestamp_floor",
    "timestamp_ceil",
    "dateadd",
    "to_timestamp",
    "date_trunc",
    "date_bin",
    "to_timestamp_micros",
];

/// Rewrites the integer literals of `statement` that QuestDB reads as microseconds.
pub(crate) fn rewrite(statement: &mut Statement, catalog: &dyn Catalog) {
    let tables = referenced_tables(statement, catalog);
    let mut rewriter = Rewriter { tables, catalog };
    let _ = statement.visit(&mut rewriter);
}

/// The tables `statement` reads, by the names it refers to them with (alias, or name).
fn referenced_tables(statement: &Statement, catalog: &dyn Catalog) -> HashMap<String, String> {
    struct Tables<'a> {
        catalog: &'a dyn Catalog,
        found: HashMap<String, String>,
    }
    impl Visitor for Tables<'_> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } = factor
                && let Some(table) = last_name(name)
                && self.catalog.designated_timestamp(&table).is_some()
            {
                let by = alias
                    .as_ref()
                    .map_or_else(|| table.clone(), |a| a.name.value.to_lowercase());
                self.found.insert(by, table);
            }
            ControlFlow::Continue(())
        }
    }
    let mut tables = Tables {
        catalog,
        found: HashMap::new(),
    };
    let _ = statement.visit(&mut tables);
    tables.found
}

fn last_name(name: &ObjectName) -> Option<String> {
    let ident = name.0.last()?.as_ident()?;
    Some(if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    })
}

struct Rewriter<'a> {
    /// Referred name (alias or table name) to table name.
    tables: HashMap<String, String>,
    catalog: &'a dyn Catalog,
}

impl Rewriter<'_> {
    /// Whether `expr` is a TIMESTAMP (see the module's docs).
    fn is_timestamp(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Nested(inner) => self.is_timestamp(inner),
            Expr::Cast { data_type, .. } => is_timestamp_type(data_type),
            Expr::Function(f) => {
                let Some(name) = last_name(&f.name) else {
                    return false;
                };
                if TIMESTAMP_FUNCTIONS.contains(&name.as_str()) {
                    return true;
                }
                // An aggregate that returns one of its values: a TIMESTAMP of a TIMESTAMP.
                let picks = matches!(name.as_str(), "min" | "max" | "first" | "last");
                picks
                    && matches!(&f.args, sqlparser::ast::FunctionArguments::List(l)
                        if matches!(l.args.as_slice(),
                            [sqlparser::ast::FunctionArg::Unnamed(
                                sqlparser::ast::FunctionArgExpr::Expr(e))] if self.is_timestamp(e)))
            }
            Expr::Identifier(column) => {
                let column = folded(column);
                self.tables
                    .values()
                    .any(|table| self.catalog.is_timestamp(table, &column))
            }
            Expr::CompoundIdentifier(parts) => {
                let [.., qualifier, column] = parts.as_slice() else {
                    return false;
                };
                let column = folded(column);
                match self.tables.get(&folded(qualifier)) {
                    Some(table) => self.catalog.is_timestamp(table, &column),
                    // A derived table's column: any table's TIMESTAMP of that name.
                    None => self
                        .tables
                        .values()
                        .any(|table| self.catalog.is_timestamp(table, &column)),
                }
            }
            _ => false,
        }
    }
}

fn folded(ident: &sqlparser::ast::Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

fn is_timestamp_type(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Timestamp(..) | DataType::Datetime(_))
}

/// Whether `expr` is an integer literal, possibly negated, or arithmetic of them.
fn is_integer_literal(expr: &Expr) -> bool {
    match expr {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Plus | BinaryOperator::Minus | BinaryOperator::Multiply,
            right,
        } => is_integer_literal(left) && is_integer_literal(right),
        Expr::Value(v) => {
            matches!(&v.value, Value::Number(n, _) if n.bytes().all(|b| b.is_ascii_digit()))
        }
        Expr::UnaryOp {
            op: UnaryOperator::Minus | UnaryOperator::Plus,
            expr,
        } => is_integer_literal(expr),
        Expr::Nested(inner) => is_integer_literal(inner),
        _ => false,
    }
}

/// `to_timestamp_micros(expr)` in place of `expr`, if it is an integer literal.
fn as_micros(expr: &mut Expr) {
    if is_integer_literal(expr) {
        let literal = std::mem::replace(expr, Expr::value(Value::Null));
        *expr = call("to_timestamp_micros", vec![literal]);
    }
}

const COMPARISONS: [BinaryOperator; 6] = [
    BinaryOperator::Eq,
    BinaryOperator::NotEq,
    BinaryOperator::Lt,
    BinaryOperator::LtEq,
    BinaryOperator::Gt,
    BinaryOperator::GtEq,
];

/// A TIMESTAMP as microseconds since the epoch: `CAST(e AS BIGINT) / 1000` (TIMESTAMPs are
/// nanoseconds inside).
fn micros_of(e: Expr) -> Expr {
    Expr::Nested(Box::new(Expr::BinaryOp {
        left: Box::new(Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(e),
            data_type: DataType::BigInt(None),
            array: false,
            format: None,
        }),
        op: BinaryOperator::Divide,
        right: Box::new(Expr::value(Value::Number("1000".into(), false))),
    }))
}

/// Whether a cast to `data_type` makes an integer (QuestDB's `long` included).
fn is_integer_type(data_type: &DataType) -> bool {
    match data_type {
        DataType::BigInt(_) | DataType::Int(_) | DataType::Integer(_) | DataType::Int64 => true,
        DataType::Custom(name, modifiers) => {
            modifiers.is_empty()
                && name.0.len() == 1
                && last_name(name).is_some_and(|n| n == "long")
        }
        _ => false,
    }
}

/// A string literal that is a partial timestamp (`'2024-01-02T12'`), as the literal of its
/// first instant; other strings are left for SQL's cast.
fn partial_timestamp(expr: &mut Expr) {
    let Expr::Value(v) = expr else {
        return;
    };
    let Value::SingleQuotedString(text) = &v.value else {
        return;
    };
    // Dates and times to the second are SQL's to read (offsets included).
    let partial = match text.split_once(['T', ' ']) {
        Some((_, time)) => time.matches(':').count() < 2,
        None => text.matches('-').count() < 2,
    };
    if !partial {
        return;
    }
    if let Ok((ns, _)) = super::interval::instant(text) {
        *expr = super::timestamp_literal(ns);
    }
}

impl VisitorMut for Rewriter<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match expr {
            Expr::Cast {
                kind: CastKind::Cast | CastKind::DoubleColon,
                expr: inner,
                data_type,
                format: None,
                ..
            } if is_integer_type(data_type) && self.is_timestamp(inner) => {
                let micros = micros_of((**inner).clone());
                **inner = micros;
            }
            // QuestDB's DATE is milliseconds since the epoch: a TIMESTAMP keeps its time.
            Expr::Cast {
                kind: CastKind::Cast | CastKind::DoubleColon,
                expr: inner,
                data_type: DataType::Date,
                format: None,
                ..
            } if self.is_timestamp(inner) => {
                let date64 = Expr::value(Value::SingleQuotedString("Date64".into()));
                *expr = call("arrow_cast", vec![(**inner).clone(), date64]);
            }
            Expr::BinaryOp {
                left,
                op: op @ (BinaryOperator::Plus | BinaryOperator::Minus),
                right,
            } if self.is_timestamp(left) => {
                if is_integer_literal(right) {
                    // ts ± n µs: the integer as a duration.
                    let n = std::mem::replace(&mut **right, Expr::value(Value::Null));
                    **right = call(
                        "arrow_cast",
                        vec![
                            Expr::Nested(Box::new(Expr::BinaryOp {
                                left: Box::new(n),
                                op: BinaryOperator::Multiply,
                                right: Box::new(Expr::value(Value::Number("1000".into(), false))),
                            })),
                            Expr::value(Value::SingleQuotedString("Duration(Nanosecond)".into())),
                        ],
                    );
                } else if *op == BinaryOperator::Minus && self.is_timestamp(right) {
                    let (a, b) = ((**left).clone(), (**right).clone());
                    *expr = Expr::Nested(Box::new(Expr::BinaryOp {
                        left: Box::new(micros_of(a)),
                        op: BinaryOperator::Minus,
                        right: Box::new(micros_of(b)),
                    }));
                }
            }
            Expr::Cast {
                kind: CastKind::Cast | CastKind::DoubleColon | CastKind::TryCast,
                expr: inner,
                data_type,
                ..
            } if is_timestamp_type(data_type) && is_integer_literal(inner) => {
                // The cast stays: it keeps the type asked for, and the column's name.
                as_micros(inner);
            }
            Expr::BinaryOp { left, op, right } if COMPARISONS.contains(op) => {
                if self.is_timestamp(left) {
                    as_micros(right);
                    partial_timestamp(right);
                } else if self.is_timestamp(right) {
                    as_micros(left);
                    partial_timestamp(left);
                }
            }
            Expr::Between {
                expr: value,
                low,
                high,
                ..
            } if self.is_timestamp(value) => {
                as_micros(low);
                as_micros(high);
                partial_timestamp(low);
                partial_timestamp(high);
            }
            Expr::InList {
                expr: value, list, ..
            } if self.is_timestamp(value) => list.iter_mut().for_each(as_micros),
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    struct Tables;

    impl Catalog for Tables {
        fn designated_timestamp(&self, table: &str) -> Option<Option<String>> {
            ["cpu", "readings"]
                .contains(&table)
                .then(|| Some("ts".into()))
        }
        fn is_aggregate(&self, _: &str) -> bool {
            false
        }
        fn is_symbol(&self, _: &str, _: &str) -> bool {
            false
        }
        fn is_timestamp(&self, table: &str, column: &str) -> bool {
            matches!(
                (table, column),
                ("cpu", "ts") | ("readings", "ts") | ("readings", "seen")
            )
        }
    }

    fn rewritten(sql: &str) -> String {
        let mut statement = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        rewrite(&mut statement, &Tables);
        statement.to_string()
    }

    #[test]
    fn integers_meeting_timestamps_are_microseconds() {
        assert_eq!(
            rewritten("SELECT * FROM cpu WHERE ts >= 0 AND 10 > ts"),
            "SELECT * FROM cpu WHERE ts >= to_timestamp_micros(0) AND to_timestamp_micros(10) > ts"
        );
        assert_eq!(
            rewritten(
                "SELECT * FROM cpu WHERE ts >= cast(1451613600000000 as timestamp) AND ts <= 1::timestamp"
            ),
            "SELECT * FROM cpu WHERE ts >= CAST(to_timestamp_micros(1451613600000000) AS TIMESTAMP) AND ts <= to_timestamp_micros(1)::TIMESTAMP"
        );
        assert_eq!(
            rewritten("SELECT * FROM readings r WHERE r.seen BETWEEN -5 AND 5 OR r.ts IN (1, 2)"),
            "SELECT * FROM readings r WHERE r.seen BETWEEN to_timestamp_micros(-5) AND to_timestamp_micros(5) OR r.ts IN (to_timestamp_micros(1), to_timestamp_micros(2))"
        );
        assert_eq!(
            rewritten("SELECT now() > 0"),
            "SELECT now() > to_timestamp_micros(0)"
        );
        assert_eq!(
            rewritten("SELECT * FROM cpu WHERE ts < 1 + 2"),
            "SELECT * FROM cpu WHERE ts < to_timestamp_micros(1 + 2)"
        );
    }

    #[test]
    fn timestamps_meeting_integers_are_microseconds() {
        assert_eq!(
            rewritten(
                "SELECT ts + 5, ts - 1, CAST(ts AS LONG), ts::bigint, max(ts) - min(ts) FROM cpu"
            ),
            "SELECT ts + arrow_cast((5 * 1000), 'Duration(Nanosecond)'), \
             ts - arrow_cast((1 * 1000), 'Duration(Nanosecond)'), \
             CAST((CAST(ts AS BIGINT) / 1000) AS LONG), (CAST(ts AS BIGINT) / 1000)::BIGINT, \
             ((CAST(max(ts) AS BIGINT) / 1000) - (CAST(min(ts) AS BIGINT) / 1000)) FROM cpu"
        );
        assert_eq!(
            rewritten(
                "SELECT * FROM cpu WHERE ts > '2024-01-02T12' AND ts < '2024-01-02T13:00:00Z'"
            ),
            "SELECT * FROM cpu WHERE ts > CAST('2024-01-02T12:00:00' AS TIMESTAMP) AND ts < '2024-01-02T13:00:00Z'"
        );
    }

    #[test]
    fn other_integers_are_left_alone() {
        for sql in [
            "SELECT * FROM cpu WHERE v >= 0",
            "SELECT * FROM cpu WHERE ts >= 1.5",
            "SELECT * FROM cpu WHERE ts >= '2024-01-01'",
            "SELECT CAST(1 AS BIGINT)",
            "SELECT * FROM other WHERE ts >= 0",
        ] {
            assert_eq!(rewritten(sql), sql);
        }
    }
}
