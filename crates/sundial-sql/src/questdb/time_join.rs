//! `ASOF JOIN`, `LT JOIN` and `SPLICE JOIN` in the AST: each marked join becomes a `LEFT
//! JOIN` (a `FULL JOIN` for SPLICE, which keeps the rows of both sides) whose `ON` starts with
//! a call to [`crate::names::ASOF_JOIN_MARKER`] carrying the join's kind and tolerance,
//! followed by its key equalities:
//!
//! ```text
//!  a ASOF JOIN b MATCH_CONDITION (__sundial_time_join(0)) ON (sym) -- clauses::extract
//!  a LEFT JOIN b ON __sundial_asof_join('asof', NULL) AND a.sym = b.sym
//! ```
//!
//! The plan's `asof` rule then turns that join into a merge over both sides' timestamps.

use sqlparser::ast::{
    BinaryOperator, Expr, Ident, JoinConstraint, JoinOperator, ObjectNamePart, SetExpr,
    TableFactor, TableWithJoins, Value,
};

use super::clauses::{TIME_JOIN_MARKER, TimeJoin};
use super::{and, marker_index, object_name_text};
use crate::ast::{call, null};
use crate::error::{Result, SqlError};
use crate::names::TimeJoinKind;

/// Rewrites the marked time joins of every SELECT in `body`.
pub(super) fn rewrite(body: &mut SetExpr, joins: &[TimeJoin]) -> Result<()> {
    match body {
        SetExpr::Select(select) => {
            for from in &mut select.from {
                rewrite_from(from, joins)?;
            }
            Ok(())
        }
        SetExpr::SetOperation { left, right, .. } => {
            rewrite(left, joins)?;
            rewrite(right, joins)
        }
        _ => Ok(()),
    }
}

fn rewrite_from(from: &mut TableWithJoins, joins: &[TimeJoin]) -> Result<()> {
    let left = qualifier(&from.relation);
    for join in &mut from.joins {
        let JoinOperator::AsOf {
            match_condition,
            constraint,
        } = &join.join_operator
        else {
            continue;
        };
        let Some(spec) = marker_index(match_condition, TIME_JOIN_MARKER).and_then(|i| joins.get(i))
        else {
            continue;
        };
        let clause = spec.kind.clause();
        if spec.kind == TimeJoinKind::Splice && spec.tolerance_ns.is_some() {
            return Err(SqlError::Invalid(format!(
                "{clause} at {}: TOLERANCE applies to ASOF and LT JOIN only",
                spec.position
            )));
        }
        let right = qualifier(&join.relation);
        let keys = match key_columns(constraint) {
            Some(columns) => {
                equalities(&columns, left.as_ref(), right.as_ref()).map_err(|side| {
                    SqlError::Invalid(format!(
                        "{clause} at {}: ON ({}) needs a name for the {side} side: give the \
                         subquery an alias",
                        spec.position,
                        columns
                            .iter()
                            .map(|c| c.value.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?
            }
            None => match constraint {
                JoinConstraint::On(e) => Some(e.clone()),
                JoinConstraint::None => None,
                _ => {
                    return Err(SqlError::Invalid(format!(
                        "{clause} at {}: join on columns with ON (a, b) or ON x.a = y.a",
                        spec.position
                    )));
                }
            },
        };
        let tolerance = spec
            .tolerance_ns
            .map_or_else(null, |ns| Expr::value(Value::Number(ns.to_string(), false)));
        let marker = call(
            crate::names::ASOF_JOIN_MARKER,
            vec![
                Expr::value(Value::SingleQuotedString(spec.kind.as_str().into())),
                tolerance,
            ],
        );
        let condition = match keys {
            Some(keys) => and(marker, keys),
            None => marker,
        };
        let on = JoinConstraint::On(condition);
        join.join_operator = match spec.kind {
            TimeJoinKind::Splice => JoinOperator::FullOuter(on),
            TimeJoinKind::Asof | TimeJoinKind::Lt => JoinOperator::LeftOuter(on),
        };
    }
    Ok(())
}

/// The columns of QuestDB's `ON (a, b)` (or of `USING (a, b)`), which name a column of both
/// sides each.
fn key_columns(constraint: &JoinConstraint) -> Option<Vec<Ident>> {
    match constraint {
        JoinConstraint::On(Expr::Nested(inner)) => match inner.as_ref() {
            Expr::Identifier(c) => Some(vec![c.clone()]),
            _ => None,
        },
        JoinConstraint::On(Expr::Tuple(items)) => items
            .iter()
            .map(|e| match e {
                Expr::Identifier(c) => Some(c.clone()),
                _ => None,
            })
            .collect(),
        JoinConstraint::Using(names) => names
            .iter()
            .map(|n| match n.0.as_slice() {
                [ObjectNamePart::Identifier(c)] => Some(c.clone()),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// `left.c = right.c AND ...`; `Err` names the side that has no name to qualify by.
fn equalities(
    columns: &[Ident],
    left: Option<&Ident>,
    right: Option<&Ident>,
) -> std::result::Result<Option<Expr>, &'static str> {
    let left = left.ok_or("left")?;
    let right = right.ok_or("right")?;
    let qualified = |q: &Ident, c: &Ident| Expr::CompoundIdentifier(vec![q.clone(), c.clone()]);
    Ok(columns
        .iter()
        .map(|c| super::compare(qualified(left, c), BinaryOperator::Eq, qualified(right, c)))
        .reduce(and))
}

/// The name a relation's columns are qualified by: its alias, else its table name.
fn qualifier(relation: &TableFactor) -> Option<Ident> {
    match relation {
        TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } => {
            Some(a.name.clone())
        }
        TableFactor::Table { name, .. } => {
            let last = name.0.last()?.as_ident()?.clone();
            object_name_text(name).map(|_| last)
        }
        _ => None,
    }
}
