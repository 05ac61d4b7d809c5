//! Queries built from a constant template and nodes.
//!
//! Some rewrites produce a query too large to write as nested constructors readably (window
//! functions, derived tables). They write it once as a constant SQL template whose only names
//! are ones Sundial generates (`__sundial_rn`, ...) and whose holes are calls
//! `__sundial_slot(i)` (an expression) and the table `__sundial_source` (a relation); the
//! template is parsed, then each hole is replaced by a node. No user-written name, literal or
//! expression is ever printed into text and parsed again, so quoting and odd names cannot
//! change what the query means.

use std::ops::ControlFlow;

use sqlparser::ast::{Expr, Query, Statement, TableFactor, VisitMut, VisitorMut};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

use crate::error::{Result, SqlError};

/// The function that marks an expression hole.
const SLOT: &str = "__sundial_slot";
/// The table that marks the relation hole.
const SOURCE: &str = "__sundial_source";

/// `template` (constant text: see the module docs) with hole `__sundial_slot(i)` replaced by
/// `slots[i]` and table `__sundial_source` by `source`.
pub(crate) fn build(template: &str, slots: &[Expr], source: &TableFactor) -> Result<Query> {
    let parsed = Parser::parse_sql(&GenericDialect {}, template)
        .map_err(|e| SqlError::Invalid(format!("internal rewrite template: {e}")))?;
    let Some(Statement::Query(mut query)) = parsed.into_iter().next() else {
        return Err(SqlError::Invalid(
            "internal rewrite template is no query".into(),
        ));
    };
    let mut filler = Filler {
        slots,
        source,
        missing: None,
    };
    let _ = query.visit(&mut filler);
    match filler.missing {
        Some(i) => Err(SqlError::Invalid(format!(
            "internal rewrite template: no node for hole {i}"
        ))),
        None => Ok(*query),
    }
}

struct Filler<'a> {
    slots: &'a [Expr],
    source: &'a TableFactor,
    missing: Option<usize>,
}

impl VisitorMut for Filler<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some(i) = slot_index(expr) {
            match self.slots.get(i) {
                Some(node) => *expr = node.clone(),
                None => self.missing = Some(i),
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, .. } = factor
            && name.to_string() == SOURCE
        {
            *factor = self.source.clone();
        }
        ControlFlow::Continue(())
    }
}

/// `i` for the hole `__sundial_slot(i)`.
fn slot_index(expr: &Expr) -> Option<usize> {
    let Expr::Function(f) = expr else {
        return None;
    };
    if f.name.to_string() != SLOT {
        return None;
    }
    let sqlparser::ast::FunctionArguments::List(list) = &f.args else {
        return None;
    };
    match list.args.as_slice() {
        [
            sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(
                Expr::Value(v),
            )),
        ] => match &v.value {
            sqlparser::ast::Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{column, string};

    #[test]
    fn holes_take_nodes_whatever_their_text() {
        let from = Parser::parse_sql(
            &GenericDialect {},
            r#"SELECT * FROM "we""ird tab" AS "a'lias""#,
        )
        .expect("parses");
        let Statement::Query(q) = &from[0] else {
            panic!("a query")
        };
        let sqlparser::ast::SetExpr::Select(select) = q.body.as_ref() else {
            panic!("a select")
        };
        let source = select.from[0].relation.clone();
        let query = build(
            "SELECT __sundial_slot(0) AS x FROM __sundial_source WHERE __sundial_slot(1) = 1",
            &[column("it's \"odd\""), string("a'); DROP TABLE t; --")],
            &source,
        )
        .expect("builds");
        let text = query.to_string();
        let reparsed = Parser::parse_sql(&GenericDialect {}, &text).expect("reparses");
        assert_eq!(reparsed[0].to_string(), text);
        assert!(text.contains(r#""it's ""odd""""#), "{text}");
        assert!(text.contains(r#"FROM "we""ird tab" AS "a'lias""#), "{text}");
        assert!(text.contains("'a''); DROP TABLE t; --' = 1"), "{text}");
        assert!(build("SELECT __sundial_slot(2)", &[], &source).is_err());
    }
}
