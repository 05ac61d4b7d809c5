//! LATEST ON / LATEST BY: the newest row per key. Over a table's SYMBOL keys the engine's
//! backward search answers (a marker in WHERE); otherwise, and over a subquery, a window
//! numbering each key's rows newest first.

use std::ops::ControlFlow;

use sqlparser::ast::{Expr, Ident, Select, TableAlias, TableFactor, Value, visit_expressions};

use crate::ast::call;
use crate::error::{Result, SqlError};
use crate::names::LATEST_BY_MARKER;
use crate::template::{SOURCE, Slots};

use super::clauses::LATEST_MARKER;
use super::{Rewriter, Source, and, column_ident, object_name_text, parse_expr, split_marker};

impl Rewriter<'_> {
    /// Rewrites a SELECT whose WHERE carries a LATEST marker: its FROM becomes the newest row
    /// per key among the rows the WHERE keeps. Returns the timestamp to order the rows by.
    pub(super) fn latest(&self, select: &mut Select) -> Result<Option<Expr>> {
        let Some(selection) = select.selection.take() else {
            return Ok(None);
        };
        let (index, rest) = match split_marker(selection, LATEST_MARKER) {
            (Some(index), rest) => (index, rest),
            (None, rest) => {
                select.selection = rest;
                return Ok(None);
            }
        };
        let latest = self
            .clauses
            .latest
            .get(index)
            .ok_or_else(|| SqlError::Invalid("LATEST marker out of range".into()))?;
        let at = latest.position;
        let clause = if latest.timestamp.is_some() {
            "LATEST ON"
        } else {
            "LATEST BY"
        };
        let keys = latest
            .keys
            .iter()
            .map(|k| parse_expr(k, clause, at))
            .collect::<Result<Vec<_>>>()?;
        let source = match self.source(select, clause, at) {
            Ok(source) => source,
            Err(e) => {
                let timestamp = match &latest.timestamp {
                    Some(ts) => parse_expr(ts, clause, at)?,
                    None => return Err(e),
                };
                return latest_over_subquery(select, timestamp, keys, rest).ok_or(e);
            }
        };
        let timestamp = match &latest.timestamp {
            Some(ts) => parse_expr(ts, clause, at)?,
            None => source.timestamp.clone(),
        };
        let TableFactor::Table { alias, .. } = &select.from[0].relation else {
            return Ok(None);
        };
        let name = alias
            .as_ref()
            .map(|a| a.name.clone())
            .unwrap_or_else(|| column_ident(&source.qualifier));
        if self.by_symbols(&source, &timestamp, &keys, rest.as_ref()) {
            // The engine's backward search: it keeps the rows of the filter, then the latest.
            let marker = call(LATEST_BY_MARKER, keys);
            select.selection = Some(match rest {
                Some(filter @ Expr::Nested(_)) => and(marker, filter),
                Some(filter) => and(marker, Expr::Nested(Box::new(filter))),
                None => marker,
            });
        } else {
            select.from[0].relation = latest_by_window(select, &timestamp, keys, rest, &name)?;
        }
        Ok(Some(Expr::CompoundIdentifier(vec![
            name,
            column_ident(&source.column),
        ])))
    }

    /// Whether the engine's backward search can answer: the keys are SYMBOL columns of the
    /// table, the order is its designated timestamp's and the filter needs nothing from
    /// outside the table.
    pub(super) fn by_symbols(
        &self,
        source: &Source,
        timestamp: &Expr,
        keys: &[Expr],
        filter: Option<&Expr>,
    ) -> bool {
        let Some(table) = object_name_text(&source.table) else {
            return false;
        };
        source.is_timestamp(timestamp)
            && filter.is_none_or(is_self_contained)
            && keys.iter().all(|key| {
                let column = match key {
                    Expr::Identifier(i) => i,
                    Expr::CompoundIdentifier(parts) if parts.len() == 2 => &parts[1],
                    _ => return false,
                };
                let name = if column.quote_style.is_some() {
                    column.value.clone()
                } else {
                    column.value.to_lowercase()
                };
                self.catalog.is_symbol(&table, &name)
            })
    }
}

/// `SELECT ... FROM (subquery) [alias] LATEST ON ts PARTITION BY keys`: the window over the
/// subquery's rows (which carry no designated timestamp to search by). The relation gets the
/// alias [`LATEST_ALIAS`] when it has none. The ORDER BY column the rows come in, when `ts` is
/// a column; `None` when the FROM is not one subquery.
fn latest_over_subquery(
    select: &mut Select,
    timestamp: Expr,
    keys: Vec<Expr>,
    filter: Option<Expr>,
) -> Option<Option<Expr>> {
    let [from] = select.from.as_mut_slice() else {
        return None;
    };
    if !from.joins.is_empty() {
        return None;
    }
    let TableFactor::Derived { alias, .. } = &mut from.relation else {
        return None;
    };
    let name = alias
        .get_or_insert_with(|| TableAlias {
            explicit: true,
            name: Ident::new(LATEST_ALIAS),
            columns: Vec::new(),
            at: None,
        })
        .name
        .clone();
    let column = match &timestamp {
        Expr::Identifier(c) => Some(c.clone()),
        Expr::CompoundIdentifier(parts) => parts.last().cloned(),
        _ => None,
    };
    select.from[0].relation = latest_by_window(select, &timestamp, keys, filter, &name).ok()?;
    Some(column.map(|c| Expr::CompoundIdentifier(vec![name, c])))
}

/// The alias a subquery gets when LATEST ON applies to it and it has none.
const LATEST_ALIAS: &str = "__sundial_latest";

/// LATEST ON/BY by a window over every row: the newest row per key among the rows `filter`
/// keeps, as a derived table named `name` in place of the SELECT's FROM.
fn latest_by_window(
    select: &Select,
    timestamp: &Expr,
    keys: Vec<Expr>,
    filter: Option<Expr>,
    name: &Ident,
) -> Result<TableFactor> {
    let mut slots = Slots::default();
    let keys: Vec<String> = keys.into_iter().map(|k| slots.slot(k)).collect();
    let order = slots.slot(timestamp.clone());
    let filter = slots.slot(filter.unwrap_or_else(|| Expr::value(Value::Boolean(true))));
    // Only generated names and holes: see `crate::template`.
    let template = format!(
        "SELECT * EXCLUDE (__sundial_rn) FROM (SELECT *, row_number() OVER (PARTITION BY {} \
         ORDER BY {order} DESC) AS __sundial_rn FROM {SOURCE} WHERE {filter}) \
         WHERE __sundial_rn = 1",
        keys.join(", "),
    );
    let query = crate::template::build(&template, slots, &select.from[0].relation)?;
    Ok(TableFactor::Derived {
        lateral: false,
        subquery: Box::new(query),
        alias: Some(TableAlias {
            explicit: true,
            name: name.clone(),
            columns: Vec::new(),
            at: None,
        }),
        sample: None,
    })
}

/// Whether `e` can be evaluated on a table's rows alone: no parameters, no subqueries.
fn is_self_contained(e: &Expr) -> bool {
    let mut contained = true;
    let _ = visit_expressions(e, |e| {
        let outside = match e {
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => true,
            Expr::Value(v) => matches!(v.value, Value::Placeholder(_)),
            _ => false,
        };
        if outside {
            contained = false;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    contained
}
