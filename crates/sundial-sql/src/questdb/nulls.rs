//! QuestDB's NULL, which is a value rather than SQL's unknown, in statements that read
//! Sundial's tables (PostgreSQL tools' catalog queries keep SQL's rules):
//!
//! - `x = NULL` is `x IS NULL` and `x != NULL` is `x IS NOT NULL`;
//! - `x != y` is true when one side is NULL and the other is not: `x IS DISTINCT FROM y`
//!   (so `WHERE fleet != 'North'` keeps the rows without a fleet);
//! - `a || b` is `concat(a, b)`, which reads a NULL as empty text;
//! - `x NOT IN (a, b)` and `x NOT LIKE p` keep the rows where `x` is NULL, and `x IN (a,
//!   NULL)` matches them;
//! - `NOT` of a comparison is the opposite comparison (`NOT (x > 1)` is `x <= 1`, false for
//!   a NULL `x`; `NOT (x = 'a')` is `x != 'a'`, true for it); `NOT` of anything else is true
//!   when its operand is NULL (`x IS NOT TRUE`). A designated timestamp is never NULL, so a NOT of
//!   conditions on it alone (`ts NOT IN '2024-01-01'`) stays, for the scan to prune by;
//! - a column's NULL sorts below every value (first in ascending order, last in descending
//!   order) unless the ORDER BY item says `NULLS FIRST`/`NULLS LAST`, except FLOAT and
//!   DOUBLE, whose NULL is NaN and sorts above every number (SQL's default order, kept).
//!   Items that are not a column of a statement's table keep SQL's default too, as do
//!   designated timestamps (never NULL; the scan's own order still applies).
//!
//! `x = y` between two columns that are both NULL stays unknown (QuestDB would call it
//! true): joins on keys rely on it, and QuestDB's own joins do not match NULL keys either
//! except in ASOF/LT JOIN (see `sundial_query::exec::asof`).

use std::collections::HashSet;
use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, OrderBy, OrderByKind, SelectItem, UnaryOperator, Value, visit_expressions,
};

use crate::ast::and;

/// Rewrites one expression (its children were rewritten before it).
pub(super) fn rewrite_expr(expr: &mut Expr, timestamps: &HashSet<String>) {
    match expr {
        Expr::BinaryOp { left, op, right }
            if matches!(op, BinaryOperator::Eq | BinaryOperator::NotEq) =>
        {
            let eq = matches!(op, BinaryOperator::Eq);
            let other = match (is_null(left), is_null(right)) {
                (true, false) => Some(right.clone()),
                (false, true) => Some(left.clone()),
                _ => None,
            };
            if let Some(other) = other {
                *expr = if eq {
                    Expr::IsNull(other)
                } else {
                    Expr::IsNotNull(other)
                };
            } else if !eq {
                *expr = Expr::IsDistinctFrom(left.clone(), right.clone());
            }
        }
        // `||` is QuestDB's `concat`, which reads a NULL as empty text.
        Expr::BinaryOp {
            left,
            op: BinaryOperator::StringConcat,
            right,
        } => {
            *expr = crate::ast::call("concat", vec![(**left).clone(), (**right).clone()]);
        }
        Expr::InList {
            expr: x,
            list,
            negated,
        } => {
            let had_null = list.iter().any(is_null);
            if !had_null && !*negated {
                // SQL's answer already: a NULL `x` is in no list without NULL.
                return;
            }
            list.retain(|e| !is_null(e));
            let (x, empty, null_matches) = ((**x).clone(), list.is_empty(), had_null != *negated);
            let rest = Expr::Nested(Box::new(expr.clone()));
            *expr = match (empty, null_matches) {
                (true, true) => Expr::IsNull(Box::new(x)),
                (true, false) => Expr::IsNotNull(Box::new(x)),
                (false, true) => or(Expr::IsNull(Box::new(x)), rest),
                (false, false) => and(Expr::IsNotNull(Box::new(x)), rest),
            };
        }
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr: inner,
        } if !only_timestamps(inner, timestamps) => {
            *expr = match inverted(inner) {
                Some(comparison) => comparison,
                None => Expr::IsNotTrue(inner.clone()),
            };
        }
        Expr::Like {
            negated: true,
            expr: x,
            ..
        }
        | Expr::ILike {
            negated: true,
            expr: x,
            ..
        } => {
            let x = (**x).clone();
            let rest = Expr::Nested(Box::new(expr.clone()));
            *expr = or(Expr::IsNull(Box::new(x)), rest);
        }
        _ => {}
    }
}

/// Sorts NULLs below every value in the ORDER BY items that do not say where they go and
/// name a column for which `sorts_lowest` says so, directly, by position in `projection` or
/// by an alias in it.
pub(super) fn order_nulls_lowest(
    order_by: &mut OrderBy,
    projection: &[SelectItem],
    sorts_lowest: &dyn Fn(&str) -> bool,
) {
    let OrderByKind::Expressions(items) = &mut order_by.kind else {
        return;
    };
    let column = |e: &Expr| -> Option<String> {
        match e {
            Expr::Identifier(i) => Some(i.value.clone()),
            Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.clone()),
            _ => None,
        }
    };
    let selected = |e: &Expr| -> Option<&Expr> {
        if let Expr::Value(v) = e
            && let Value::Number(n, _) = &v.value
        {
            return match projection.get(n.parse::<usize>().ok()?.checked_sub(1)?)? {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
                _ => None,
            };
        }
        let Expr::Identifier(name) = e else {
            return None;
        };
        projection.iter().find_map(|item| match item {
            SelectItem::ExprWithAlias { expr, alias } if alias.value == name.value => Some(expr),
            _ => None,
        })
    };
    for item in items {
        if item.options.nulls_first.is_some() {
            continue;
        }
        let name = selected(&item.expr)
            .and_then(column)
            .or_else(|| column(&item.expr));
        if !name.is_some_and(|n| sorts_lowest(&n)) {
            continue;
        }
        item.options.nulls_first = Some(item.options.asc != Some(false));
    }
}

/// `NOT (a op b)` as the opposite comparison, as QuestDB reads it: `NOT (x > 1)` is `x <= 1`
/// (false for a NULL `x`), `NOT (x = 'a')` is `x IS DISTINCT FROM 'a'`.
fn inverted(e: &Expr) -> Option<Expr> {
    match e {
        Expr::Nested(inner) => inverted(inner),
        Expr::BinaryOp { left, op, right } => {
            let op = match op {
                BinaryOperator::Gt => BinaryOperator::LtEq,
                BinaryOperator::GtEq => BinaryOperator::Lt,
                BinaryOperator::Lt => BinaryOperator::GtEq,
                BinaryOperator::LtEq => BinaryOperator::Gt,
                BinaryOperator::Eq => {
                    return Some(Expr::IsDistinctFrom(left.clone(), right.clone()));
                }
                _ => return None,
            };
            Some(Expr::BinaryOp {
                left: left.clone(),
                op,
                right: right.clone(),
            })
        }
        Expr::IsDistinctFrom(a, b) => Some(Expr::IsNotDistinctFrom(a.clone(), b.clone())),
        _ => None,
    }
}

/// Whether every column `e` names is one of `timestamps` (and it names one).
fn only_timestamps(e: &Expr, timestamps: &HashSet<String>) -> bool {
    let mut any = false;
    let other = visit_expressions(e, |e| {
        let name = match e {
            Expr::Identifier(i) => Some(&i.value),
            Expr::CompoundIdentifier(parts) => parts.last().map(|i| &i.value),
            _ => None,
        };
        match name {
            Some(n) if timestamps.contains(&n.to_lowercase()) => {
                any = true;
                ControlFlow::Continue(())
            }
            Some(_) => ControlFlow::Break(()),
            None => ControlFlow::Continue(()),
        }
    });
    any && other.is_continue()
}

fn is_null(e: &Expr) -> bool {
    match e {
        Expr::Value(v) => matches!(v.value, Value::Null),
        Expr::Nested(inner) => is_null(inner),
        _ => false,
    }
}

fn or(a: Expr, b: Expr) -> Expr {
    Expr::Nested(Box::new(Expr::BinaryOp {
        left: Box::new(a),
        op: BinaryOperator::Or,
        right: Box::new(b),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::{Statement, VisitMut, VisitorMut};
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    struct R;
    impl VisitorMut for R {
        type Break = ();
        fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            rewrite_expr(e, &HashSet::from(["ts".to_string()]));
            ControlFlow::Continue(())
        }
    }

    fn where_of(sql: &str) -> String {
        let mut s: Statement = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        let _ = s.visit(&mut R);
        let text = s.to_string();
        text[text.find("WHERE ").unwrap() + 6..].to_string()
    }

    #[test]
    fn null_is_a_value() {
        for (sql, want) in [
            ("x = NULL", "x IS NULL"),
            ("NULL != x", "x IS NOT NULL"),
            ("x != 'a'", "x IS DISTINCT FROM 'a'"),
            ("x <> 1", "x IS DISTINCT FROM 1"),
            ("x = 1", "x = 1"),
            ("x IN (1, 2)", "x IN (1, 2)"),
            ("x || 'a' = 'b'", "concat(x, 'a') = 'b'"),
            ("x NOT IN (1, 2)", "(x IS NULL OR (x NOT IN (1, 2)))"),
            ("x IN (1, NULL)", "(x IS NULL OR (x IN (1)))"),
            ("x NOT IN (1, NULL)", "x IS NOT NULL AND (x NOT IN (1))"),
            ("x IN (NULL)", "x IS NULL"),
            ("x NOT LIKE 'a%'", "(x IS NULL OR (x NOT LIKE 'a%'))"),
            ("NOT (x > 1)", "x <= 1"),
            ("NOT (x = 'a')", "x IS DISTINCT FROM 'a'"),
            ("NOT (x != 'a')", "x IS NOT DISTINCT FROM 'a'"),
            ("NOT (x LIKE 'a')", "(x LIKE 'a') IS NOT TRUE"),
            ("NOT (ts > 1 AND ts < 2)", "NOT (ts > 1 AND ts < 2)"),
        ] {
            assert_eq!(
                where_of(&format!("SELECT * FROM t WHERE {sql}")),
                want,
                "{sql}"
            );
        }
    }

    #[test]
    fn nulls_sort_lowest_except_timestamps() {
        let sql = "SELECT * FROM t ORDER BY a, b DESC, c NULLS LAST, ts DESC";
        let mut s: Statement = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        let Statement::Query(q) = &mut s else {
            panic!()
        };
        let lowest = |c: &str| c != "ts";
        order_nulls_lowest(q.order_by.as_mut().unwrap(), &[], &lowest);
        assert_eq!(
            s.to_string(),
            "SELECT * FROM t ORDER BY a NULLS FIRST, b DESC NULLS LAST, c NULLS LAST, ts DESC"
        );
    }
}
