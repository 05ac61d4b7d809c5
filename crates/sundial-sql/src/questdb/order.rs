//! Row order: `LIMIT -n` (the last rows, by a reversed query whose order an outer query
//! restores), and the designated timestamp's order that QuestDB gives rows of one table and
//! counts LIMIT in.

use sqlparser::ast::{
    Expr, Ident, JoinOperator, LimitClause, Offset, OffsetRows, OrderBy, OrderByExpr, OrderByKind,
    OrderByOptions, Query, Select, SelectItem, SetExpr, Statement, TableAlias, TableFactor, Value,
};

use crate::error::{Result, SqlError};
use crate::template::{SOURCE, Slots};

use super::clauses::{LIMIT_MARKER, Position};
use super::{ROWS_MAX, Rewriter, column_ident, marker_index, object_name_text, same_name};

impl Rewriter<'_> {
    /// Rewrites `LIMIT lo[, hi]` with a negative bound: the query runs in reverse order with
    /// a plain LIMIT/OFFSET, and an outer query restores the order.
    pub(super) fn negative_limit(&self, query: &mut Query) -> Result<()> {
        let Some(LimitClause::LimitOffset {
            limit: Some(limit), ..
        }) = &query.limit_clause
        else {
            return Ok(());
        };
        let Some(index) = marker_index(limit, LIMIT_MARKER) else {
            return Ok(());
        };
        let range = *self
            .clauses
            .limits
            .get(index)
            .ok_or_else(|| SqlError::Invalid("LIMIT marker out of range".into()))?;
        let at = range.position;
        // Rows counted from the end to skip (`skip_last`) and to keep, and from the start.
        let (skip_first, skip_last, keep) = match (range.lo, range.hi) {
            (lo, None) if lo < 0 => (0, 0, Some(-lo)),
            (lo, Some(hi)) if lo < 0 && hi < 0 => {
                let (m, n) = (-lo.min(hi), -lo.max(hi));
                (0, n, Some(m - n))
            }
            (lo, Some(hi)) if lo >= 0 && hi < 0 => (lo, -hi, None),
            _ => {
                return Err(SqlError::Invalid(format!(
                    "LIMIT at {at}: write LIMIT -n, LIMIT -m, -n or LIMIT m, -n"
                )));
            }
        };
        query.limit_clause = None;
        let order = match query.order_by.take() {
            Some(OrderBy {
                kind: OrderByKind::Expressions(exprs),
                ..
            }) if !exprs.is_empty() => exprs,
            _ => self.natural_order(query, at)?,
        };
        // Keys the outer query can name: output columns, positions; the rest ride along as
        // hidden columns.
        let mut hidden = Vec::new();
        let mut outer_keys = Vec::new();
        for (i, key) in order.iter().enumerate() {
            let outer = match &key.expr {
                Expr::Value(v) if matches!(v.value, Value::Number(..)) => key.expr.clone(),
                Expr::Identifier(_) if output_has(query, &key.expr) => key.expr.clone(),
                e => {
                    let SetExpr::Select(select) = &mut *query.body else {
                        return Err(SqlError::Invalid(format!(
                            "LIMIT at {at}: order by output columns to take rows from the end"
                        )));
                    };
                    if select.distinct.is_some() {
                        return Err(SqlError::Invalid(format!(
                            "LIMIT at {at}: with DISTINCT, order by output columns to take rows from the end"
                        )));
                    }
                    let name = Ident::new(format!("__sundial_k{i}"));
                    select.projection.push(SelectItem::ExprWithAlias {
                        expr: e.clone(),
                        alias: name.clone(),
                    });
                    hidden.push(name.clone());
                    Expr::Identifier(name)
                }
            };
            outer_keys.push(OrderByExpr {
                expr: outer,
                options: key.options,
                with_fill: None,
            });
        }
        let reversed: Vec<OrderByExpr> = order
            .iter()
            .map(|k| OrderByExpr {
                expr: k.expr.clone(),
                options: OrderByOptions {
                    asc: Some(!k.options.asc.unwrap_or(true)),
                    nulls_first: Some(
                        !k.options
                            .nulls_first
                            .unwrap_or(!k.options.asc.unwrap_or(true)),
                    ),
                },
                with_fill: None,
            })
            .collect();
        query.order_by = Some(OrderBy {
            kind: OrderByKind::Expressions(reversed),
            interpolate: None,
        });
        // A bound on the rows kept even when all are, as DataFusion 55 plans an OFFSET without
        // LIMIT under a later ORDER BY as if it came after that ORDER BY.
        let keep = keep.unwrap_or(ROWS_MAX);
        query.limit_clause = Some(LimitClause::LimitOffset {
            limit: Some(Expr::value(Value::Number(keep.to_string(), false))),
            offset: (skip_last > 0).then(|| Offset {
                value: Expr::value(Value::Number(skip_last.to_string(), false)),
                rows: OffsetRows::None,
            }),
            limit_by: Vec::new(),
        });
        // Only generated names (the hidden keys) and the hole: see `crate::template`.
        let exclude = if hidden.is_empty() {
            String::new()
        } else {
            let names: Vec<String> = hidden.iter().map(ToString::to_string).collect();
            format!(" EXCLUDE ({})", names.join(", "))
        };
        let mut inner = std::mem::replace(query, crate::template::parse("SELECT 1")?);
        let with = inner.with.take();
        let tail = TableFactor::Derived {
            lateral: false,
            subquery: Box::new(inner),
            alias: Some(TableAlias {
                explicit: true,
                name: Ident::new("__sundial_tail"),
                columns: Vec::new(),
                at: None,
            }),
            sample: None,
        };
        let template = format!("SELECT *{exclude} FROM {SOURCE}");
        let mut outer = crate::template::build(&template, Slots::default(), &tail)?;
        outer.order_by = Some(OrderBy {
            kind: OrderByKind::Expressions(outer_keys),
            interpolate: None,
        });
        if skip_first > 0 {
            outer.limit_clause = Some(LimitClause::LimitOffset {
                limit: None,
                offset: Some(Offset {
                    value: Expr::value(Value::Number(skip_first.to_string(), false)),
                    rows: OffsetRows::None,
                }),
                limit_by: Vec::new(),
            });
        }
        outer.with = with;
        *query = outer;
        Ok(())
    }

    /// The designated timestamp's order, for a plain SELECT over one table.
    /// QuestDB returns a table's rows in designated-timestamp order: a statement that selects
    /// rows of one such table (no aggregates, DISTINCT, joins or set operations) and says
    /// no order gets `ORDER BY ts`. The scan reads each partition in that order, so what it
    /// costs is a merge of the partitions' streams; pages of a result (the console's) are
    /// stable. Only the outermost query: a subquery's order is lost to what uses it.
    pub(super) fn table_order(&self, statement: &mut Statement) {
        let query = match statement {
            Statement::Query(query) => query,
            Statement::Explain { statement, .. } => {
                if let Statement::Query(query) = statement.as_mut() {
                    query
                } else {
                    return;
                }
            }
            _ => return,
        };
        if query.order_by.is_some() || query.limit_clause.is_some() || query.with.is_some() {
            return;
        }
        let at = Position { line: 0, column: 0 };
        if let Ok(order) = self.natural_order(query, at) {
            query.order_by = Some(OrderBy {
                kind: OrderByKind::Expressions(order),
                interpolate: None,
            });
        }
    }

    /// The designated timestamp of the left table of a SELECT's one join chain, qualified;
    /// `None` when a join keeps rows of its right side (a SPLICE JOIN's rows come in the order
    /// of both sides).
    pub(super) fn left_timestamp(&self, select: &Select) -> Option<Expr> {
        let [from] = select.from.as_slice() else {
            return None;
        };
        if from.joins.is_empty()
            || from.joins.iter().any(|j| {
                matches!(
                    j.join_operator,
                    JoinOperator::FullOuter(_)
                        | JoinOperator::RightOuter(_)
                        | JoinOperator::Right(_)
                )
            })
        {
            return None;
        }
        let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = &from.relation
        else {
            return None;
        };
        let table = object_name_text(name)?;
        let column = self.catalog.designated_timestamp(&table)??;
        let qualifier = alias.as_ref().map_or_else(
            || name.0.last().and_then(|p| p.as_ident().cloned()),
            |a| Some(a.name.clone()),
        )?;
        Some(Expr::CompoundIdentifier(vec![
            qualifier,
            column_ident(&column),
        ]))
    }

    pub(super) fn natural_order(&self, query: &Query, at: Position) -> Result<Vec<OrderByExpr>> {
        let missing = || {
            SqlError::Invalid(format!(
                "LIMIT at {at} takes rows from the end, which needs an order: add ORDER BY, \
                 or select from a table with a designated timestamp"
            ))
        };
        let SetExpr::Select(select) = &*query.body else {
            return Err(missing());
        };
        if self.aggregates_rows(select) {
            return Err(missing());
        }
        let timestamp = match self.source(select, "LIMIT", at) {
            Ok(source) => source.timestamp,
            // A join's rows come in its left table's order (QuestDB's time joins keep it).
            Err(_) => self.left_timestamp(select).ok_or_else(missing)?,
        };
        Ok(vec![OrderByExpr {
            expr: timestamp,
            options: OrderByOptions {
                asc: None,
                nulls_first: None,
            },
            with_fill: None,
        }])
    }
}

/// Whether a query's output has a column `e` names (an identifier naming an alias, a column,
/// or anything under `*`).
fn output_has(query: &Query, e: &Expr) -> bool {
    let Expr::Identifier(ident) = e else {
        return false;
    };
    let SetExpr::Select(select) = &*query.body else {
        return true;
    };
    select.projection.iter().any(|item| match item {
        SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => true,
        SelectItem::ExprWithAlias { alias, .. } => same_name(alias, &ident.value),
        SelectItem::UnnamedExpr(Expr::Identifier(i)) => i.value.eq_ignore_ascii_case(&ident.value),
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => parts
            .last()
            .is_some_and(|i| i.value.eq_ignore_ascii_case(&ident.value)),
        _ => false,
    })
}
