//! Queries built from a constant template and nodes.
//!
//! Some rewrites produce a query too large to write as nested constructors readably (window
//! functions, joins of derived tables). They write it as a template: SQL text whose only names
//! are ones Sundial generates (`__sundial_rn`, `__f0`, ...) and whose holes are calls
//! `__sundial_slot(n)` (an expression, see [`Slots`]) and the table `__sundial_source` (a
//! relation). The template is parsed, then each hole is replaced by its node. Invariant: no
//! user-written name, literal or expression is ever printed into a template, so quoting and
//! odd names cannot change what a rewritten statement means.

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Query, Statement, TableFactor, Value,
    VisitMut, VisitorMut, visit_expressions_mut,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

use crate::error::{Result, SqlError};

/// The function that marks an expression hole; its argument is the slot's number.
const SLOT: &str = "__sundial_slot";
/// The table that marks the relation hole.
pub(crate) const SOURCE: &str = "__sundial_source";

/// Expression nodes for a template's holes, numbered as the template text asks for them.
#[derive(Default)]
pub(crate) struct Slots(Vec<Option<Expr>>);

impl Slots {
    /// A hole for `expr`, as template text.
    pub(crate) fn slot(&mut self, expr: Expr) -> String {
        self.0.push(Some(expr));
        format!("{SLOT}({})", self.0.len() - 1)
    }

    /// How many holes were made.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Replaces each hole of `query` by its node; each must be there exactly once. The nodes
    /// put in are not visited again, so a user's own `__sundial_slot(n)` stays as written.
    pub(crate) fn put_into(mut self, query: &mut Query) -> Result<()> {
        let flow = visit_expressions_mut(query, |e| {
            let Some(n) = slot_number(e) else {
                return ControlFlow::Continue(());
            };
            match self.0.get_mut(n).and_then(Option::take) {
                Some(node) => {
                    *e = node;
                    ControlFlow::Continue(())
                }
                None => ControlFlow::Break(n),
            }
        });
        let unused = self.0.iter().position(Option::is_some);
        match (flow, unused) {
            (ControlFlow::Continue(()), None) => Ok(()),
            (ControlFlow::Break(n), _) | (_, Some(n)) => Err(SqlError::Invalid(format!(
                "internal rewrite failed at template slot {n}"
            ))),
        }
    }
}

/// `n` if `e` is `__sundial_slot(n)`.
fn slot_number(e: &Expr) -> Option<usize> {
    let Expr::Function(f) = e else {
        return None;
    };
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))] = list.args.as_slice() else {
        return None;
    };
    match &v.value {
        Value::Number(n, _) if f.name.to_string() == SLOT => n.parse().ok(),
        _ => None,
    }
}

/// The query of `template` (constant text: see the module docs).
pub(crate) fn parse(template: &str) -> Result<Query> {
    let parsed = Parser::parse_sql(&GenericDialect {}, template)
        .map_err(|e| SqlError::Invalid(format!("internal rewrite template: {e}")))?;
    match parsed.into_iter().next() {
        Some(Statement::Query(query)) => Ok(*query),
        _ => Err(SqlError::Invalid(
            "internal rewrite template is no query".into(),
        )),
    }
}

/// `template` with its expression holes filled from `slots` and the table `__sundial_source`
/// replaced by `source`.
pub(crate) fn build(template: &str, slots: Slots, source: &TableFactor) -> Result<Query> {
    let mut query = parse(template)?;
    slots.put_into(&mut query)?;
    let _ = query.visit(&mut Source { source });
    Ok(query)
}

struct Source<'a> {
    source: &'a TableFactor,
}

impl VisitorMut for Source<'_> {
    type Break = ();

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table {
            name, args: None, ..
        } = factor
            && name.to_string() == SOURCE
        {
            *factor = self.source.clone();
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{column, string};

    /// The relation of `SELECT * FROM <from>`.
    fn relation(from: &str) -> TableFactor {
        let parsed = Parser::parse_sql(&GenericDialect {}, &format!("SELECT * FROM {from}"))
            .expect("parses");
        let Statement::Query(q) = &parsed[0] else {
            panic!("a query")
        };
        let sqlparser::ast::SetExpr::Select(select) = q.body.as_ref() else {
            panic!("a select")
        };
        select.from[0].relation.clone()
    }

    #[test]
    fn holes_take_nodes_whatever_their_text() {
        let source = relation(r#""we""ird tab" AS "a'lias""#);
        let mut slots = Slots::default();
        let template = format!(
            "SELECT {} AS x FROM {SOURCE} WHERE {} = 1",
            slots.slot(column("it's \"odd\"")),
            slots.slot(string("a'); DROP TABLE t; --"))
        );
        let query = build(&template, slots, &source).expect("builds");
        let text = query.to_string();
        let reparsed = Parser::parse_sql(&GenericDialect {}, &text).expect("reparses");
        assert_eq!(reparsed[0].to_string(), text);
        assert!(text.contains(r#""it's ""odd""""#), "{text}");
        assert!(text.contains(r#"FROM "we""ird tab" AS "a'lias""#), "{text}");
        assert!(text.contains("'a''); DROP TABLE t; --' = 1"), "{text}");
    }

    #[test]
    fn every_slot_is_used_once() {
        let source = relation("t");
        let mut slots = Slots::default();
        let _unused = slots.slot(string("x"));
        assert!(build("SELECT 1", slots, &source).is_err());
        let mut slots = Slots::default();
        let once = slots.slot(string("x"));
        assert!(build(&format!("SELECT {once}, {once}"), slots, &source).is_err());
        // A user's own call that looks like a hole, inside a node, stays as written.
        let mut slots = Slots::default();
        let lookalike = crate::ast::call("__sundial_slot", vec![crate::ast::number(0)]);
        let hole = slots.slot(Expr::Nested(Box::new(lookalike)));
        let query = build(&format!("SELECT {hole}"), slots, &source).expect("builds");
        assert_eq!(query.to_string(), "SELECT (__sundial_slot(0))");
    }
}
