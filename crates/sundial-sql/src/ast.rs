//! Builders of the AST nodes the rewrites put in place of what they replace.
//!
//! Rewrites build nodes, never SQL text to parse again: names and literals travel as values,
//! so no quoting or odd name can change what a rewritten statement means.

use sqlparser::ast::{
    BinaryOperator, CastKind, DataType, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentList, FunctionArguments, GroupByExpr, Ident, ObjectName, Query, SelectItem,
    SetExpr, Statement, TableFactor, Value,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

/// `NULL`.
pub fn null() -> Expr {
    Expr::value(Value::Null)
}

/// `TRUE` or `FALSE`.
pub fn boolean(b: bool) -> Expr {
    Expr::value(Value::Boolean(b))
}

/// A string literal.
pub fn string(text: &str) -> Expr {
    Expr::value(Value::SingleQuotedString(text.into()))
}

/// A number literal.
pub fn number(n: i64) -> Expr {
    Expr::value(Value::Number(n.to_string(), false))
}

/// A column (or any name) as written, quoted so that its case and characters are kept.
pub fn column(name: &str) -> Expr {
    Expr::Identifier(Ident::with_quote('"', name))
}

/// `qualifier.name`, both quoted.
pub fn qualified(qualifier: &str, name: &str) -> Expr {
    Expr::CompoundIdentifier(vec![
        Ident::with_quote('"', qualifier),
        Ident::with_quote('"', name),
    ])
}

/// `left op right`.
pub fn binary(left: Expr, op: BinaryOperator, right: Expr) -> Expr {
    Expr::BinaryOp {
        left: Box::new(left),
        op,
        right: Box::new(right),
    }
}

/// `a AND b`.
pub fn and(a: Expr, b: Expr) -> Expr {
    binary(a, BinaryOperator::And, b)
}

/// `CAST(expr AS data_type)`.
pub fn cast(expr: Expr, data_type: DataType) -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(expr),
        data_type,
        array: false,
        format: None,
    }
}

/// `name(args...)`, unqualified.
pub fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: Vec::new(),
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: Vec::new(),
    })
}

/// The conjuncts of `e`'s top-level ANDs, through parentheses, appended to `out`.
pub fn split_and<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            split_and(left, out);
            split_and(right, out);
        }
        Expr::Nested(inner) => split_and(inner, out),
        other => out.push(other),
    }
}

/// The table `name` as a FROM item, without alias or anything else.
pub fn table(name: ObjectName) -> TableFactor {
    TableFactor::Table {
        name,
        alias: None,
        args: None,
        with_hints: Vec::new(),
        version: None,
        with_ordinality: false,
        partitions: Vec::new(),
        json_path: None,
        sample: None,
        index_hints: Vec::new(),
    }
}

/// `expr AS alias`, the alias quoted.
pub fn aliased(expr: Expr, alias: &str) -> SelectItem {
    SelectItem::ExprWithAlias {
        expr,
        alias: Ident::with_quote('"', alias),
    }
}

/// A `SELECT <projection>` without FROM, WHERE or anything else.
///
/// The parser builds the (large) query struct from a constant text, which holds no name or
/// value: those are set as nodes.
pub fn select_with(projection: Vec<SelectItem>) -> Query {
    let parsed = Parser::parse_sql(&GenericDialect {}, "SELECT NULL");
    let Ok(mut statements) = parsed else {
        unreachable!("a constant SELECT parses");
    };
    let Some(Statement::Query(mut query)) = statements.pop() else {
        unreachable!("a constant SELECT is a query");
    };
    if let SetExpr::Select(select) = query.body.as_mut() {
        select.projection = projection;
        select.group_by = GroupByExpr::Expressions(Vec::new(), Vec::new());
    }
    *query
}
