//! SAMPLE BY: a SELECT marked with it becomes a GROUP BY of its timestamp's bucket
//! (`timestamp_floor` with the stride, origin and time zone of its ALIGN) and its keys;
//! FILL is left to `fill`, ALIGN TO FIRST OBSERVATION finds its origin with a subquery.

use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident,
    OrderBy, Query, Select, SelectItem, Value,
};

use crate::ast::{call, null};
use crate::error::{Result, SqlError};
use crate::template::{SOURCE, Slots};

use super::clauses::{Align, SAMPLE_MARKER, SampleBy};
use super::{
    Rewriter, Source, add_filter, clauses, column_ident, compare, fill, function_name, is_constant,
    marker_index, order_by, parse_expr, stride, string, timestamp_literal, to_timestamp,
    unnamed_args,
};

impl Rewriter<'_> {
    /// Rewrites a SELECT marked with SAMPLE BY; returns the ORDER BY it implies, and what
    /// its FILL leaves to do (the select items are then named `__f<i>` for it).
    pub(super) fn sample_by(
        &self,
        select: &mut Select,
    ) -> Result<Option<(OrderBy, Option<fill::FillPlan>)>> {
        let GroupByExpr::Expressions(groups, _) = &mut select.group_by else {
            return Ok(None);
        };
        let Some(at) = groups
            .iter()
            .position(|g| marker_index(g, SAMPLE_MARKER).is_some())
        else {
            return Ok(None);
        };
        let index = marker_index(&groups.remove(at), SAMPLE_MARKER).unwrap_or(usize::MAX);
        let sample = self
            .clauses
            .samples
            .get(index)
            .ok_or_else(|| SqlError::Invalid("SAMPLE BY marker out of range".into()))?;
        let explicit_keys = std::mem::take(groups);
        let source = self.source(select, "SAMPLE BY", sample.position)?;
        let fills = sample
            .fill
            .iter()
            .any(|f| !matches!(f, clauses::Fill::None));
        let bucket = self.bucket(select, sample, &source)?;
        let bound = |text: &Option<String>, clause: &str| {
            text.as_deref()
                .map(|t| parse_expr(t, clause, sample.position).map(to_timestamp))
                .transpose()
        };
        let from = bound(&sample.from, "SAMPLE BY FROM")?;
        let to = bound(&sample.to, "SAMPLE BY TO")?;
        if let Some(lo) = &from {
            add_filter(
                select,
                compare(source.timestamp.clone(), BinaryOperator::GtEq, lo.clone()),
            );
        }
        if let Some(hi) = &to {
            add_filter(
                select,
                compare(source.timestamp.clone(), BinaryOperator::Lt, hi.clone()),
            );
        }

        let mut bucket_item = None;
        let mut keys: Vec<Expr> = Vec::new();
        let mut key_items: Vec<usize> = Vec::new();
        for (i, item) in select.projection.iter_mut().enumerate() {
            match item {
                SelectItem::UnnamedExpr(e) if source.is_timestamp(e) => {
                    *item = SelectItem::ExprWithAlias {
                        expr: bucket.clone(),
                        alias: column_ident(&source.column),
                    };
                    bucket_item.get_or_insert(i);
                }
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    let was_timestamp = source.is_timestamp(e);
                    replace_outside_aggregates(self, e, &source, &bucket);
                    if was_timestamp {
                        bucket_item.get_or_insert(i);
                    } else if !self.has_aggregate(e) && !is_constant(e) && *e != bucket {
                        keys.push(e.clone());
                        key_items.push(i);
                    }
                }
                _ => {
                    return Err(SqlError::Invalid(format!(
                        "SAMPLE BY at {}: list the columns to select; '*' cannot be sampled",
                        sample.position
                    )));
                }
            }
        }
        for mut key in explicit_keys {
            if source.is_timestamp(&key) {
                continue;
            }
            replace_outside_aggregates(self, &mut key, &source, &bucket);
            if !keys.contains(&key) && key != bucket {
                if fills {
                    return Err(SqlError::NotSupported(format!(
                        "SAMPLE BY at {}: FILL with a GROUP BY key that is not selected ({key})",
                        sample.position
                    )));
                }
                keys.push(key);
            }
        }
        let mut group_by = vec![bucket.clone()];
        group_by.extend(keys.iter().cloned());
        select.group_by = GroupByExpr::Expressions(group_by, Vec::new());

        let fill_plan = if fills {
            let Some([_, _, origin, zone]) = bucket_args(&bucket) else {
                return Err(SqlError::Invalid("SAMPLE BY bucket malformed".into()));
            };
            let plan = fill::FillPlan {
                fills: sample.fill.clone(),
                bucket: bucket.clone(),
                stride: sample.stride.clone(),
                origin,
                zone,
                from,
                to,
                bucket_item,
                key_items: key_items.clone(),
                names: output_names(select),
                default_order: true,
                extrapolate: true,
            };
            name_items(select, &plan);
            Some(plan)
        } else {
            None
        };

        // Order by bucket, then keys: by position where the select list has them.
        let position = |i: usize| Expr::value(Value::Number((i + 1).to_string(), false));
        let mut order = vec![bucket_item.map_or(bucket, position)];
        order.extend(key_items.into_iter().map(position));
        Ok(Some((order_by(order), fill_plan)))
    }

    /// `timestamp_floor(stride, ts, origin, time_zone)` for `sample`.
    pub(super) fn bucket(
        &self,
        select: &Select,
        sample: &SampleBy,
        source: &Source,
    ) -> Result<Expr> {
        let at = sample.position;
        let stride = stride::Stride::parse(&sample.stride).map_err(SqlError::Invalid)?;
        let (origin, zone) = match &sample.align {
            Align::FirstObservation => {
                let origin = match &sample.from {
                    Some(from) => to_timestamp(parse_expr(from, "SAMPLE BY FROM", at)?),
                    None => Expr::Subquery(Box::new(first_observation(select, source)?)),
                };
                (origin, null())
            }
            Align::Calendar { time_zone, offset } => {
                let zone = match time_zone {
                    Some(z) => parse_expr(z, "ALIGN TO CALENDAR TIME ZONE", at)?,
                    None => null(),
                };
                if let Expr::Value(v) = &zone
                    && let Value::SingleQuotedString(name) = &v.value
                {
                    stride::parse_zone(name).map_err(|m| {
                        SqlError::Invalid(format!("ALIGN TO CALENDAR at {at}: {m}"))
                    })?;
                }
                let origin = match (&sample.from, offset) {
                    (Some(from), _) => to_timestamp(parse_expr(from, "SAMPLE BY FROM", at)?),
                    (None, Some(offset)) => {
                        let text = match parse_expr(offset, "WITH OFFSET", at)? {
                            Expr::Value(v) => match v.value {
                                Value::SingleQuotedString(s) => s,
                                _ => String::new(),
                            },
                            _ => String::new(),
                        };
                        let shift = offset_ns(&text).ok_or_else(|| {
                            SqlError::Invalid(format!(
                                "WITH OFFSET at {at}: '{text}' is not an offset such as '00:15' or '-01:30'"
                            ))
                        })?;
                        timestamp_literal(stride.calendar_origin() + shift)
                    }
                    (None, None) => null(),
                };
                (origin, zone)
            }
        };
        Ok(call(
            "timestamp_floor",
            vec![
                string(&sample.stride),
                source.timestamp.clone(),
                origin,
                zone,
            ],
        ))
    }
}

/// Recursively replaces timestamp references in `e`, not descending into aggregate calls.
fn replace_outside_aggregates(r: &Rewriter<'_>, e: &mut Expr, source: &Source, bucket: &Expr) {
    if source.is_timestamp(e) {
        *e = bucket.clone();
        return;
    }
    if r.is_aggregate_call(e) {
        return;
    }
    match e {
        Expr::BinaryOp { left, right, .. } => {
            replace_outside_aggregates(r, left, source, bucket);
            replace_outside_aggregates(r, right, source, bucket);
        }
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::Cast { expr, .. }
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr) => replace_outside_aggregates(r, expr, source, bucket),
        Expr::Function(f) => {
            if let FunctionArguments::List(list) = &mut f.args {
                for arg in &mut list.args {
                    if let FunctionArg::Unnamed(FunctionArgExpr::Expr(a))
                    | FunctionArg::Named {
                        arg: FunctionArgExpr::Expr(a),
                        ..
                    } = arg
                    {
                        replace_outside_aggregates(r, a, source, bucket);
                    }
                }
            }
        }
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            if let Some(o) = operand {
                replace_outside_aggregates(r, o, source, bucket);
            }
            for c in conditions {
                replace_outside_aggregates(r, &mut c.condition, source, bucket);
                replace_outside_aggregates(r, &mut c.result, source, bucket);
            }
            if let Some(e) = else_result {
                replace_outside_aggregates(r, e, source, bucket);
            }
        }
        _ => {}
    }
}

/// The arguments of a `timestamp_floor` call.
fn bucket_args(bucket: &Expr) -> Option<[Expr; 4]> {
    let Expr::Function(f) = bucket else {
        return None;
    };
    let args: Vec<Expr> = unnamed_args(f)?.into_iter().cloned().collect();
    args.try_into().ok()
}

/// The name a select item's column gets, as QuestDB names it (and as the query layer names
/// unaliased items of other queries): the alias, the column, the function (`avg`), `cast`,
/// a literal's text, or `column` for any other expression.
fn item_name(item: &SelectItem) -> String {
    match item {
        SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
        SelectItem::UnnamedExpr(expr) => match expr {
            Expr::Identifier(i) => i.value.clone(),
            Expr::CompoundIdentifier(parts) => {
                parts.last().map_or(String::new(), |i| i.value.clone())
            }
            Expr::Function(f) => function_name(f).unwrap_or_else(|| "column".into()),
            Expr::Cast { .. } => "cast".into(),
            Expr::Value(v) => v.value.to_string(),
            Expr::Nested(inner) => item_name(&SelectItem::UnnamedExpr(inner.as_ref().clone())),
            _ => "column".into(),
        },
        other => other.to_string(),
    }
}

/// The output name of each item of `select` (see [`item_name`]), made unique.
pub(crate) fn output_names(select: &Select) -> Vec<String> {
    unique_names(select.projection.iter().map(item_name).collect())
}

/// `names` with each name already taken by an earlier one given the first free suffix
/// (`max`, `max1`, ...), as QuestDB does.
fn unique_names(names: Vec<String>) -> Vec<String> {
    let mut taken = std::collections::HashSet::new();
    names
        .into_iter()
        .map(|base| {
            let mut name = base.clone();
            let mut k = 0;
            while taken.contains(&name) {
                k += 1;
                name = format!("{base}{k}");
            }
            taken.insert(name.clone());
            name
        })
        .collect()
}

/// Names the items `__f<i>` (and adds the bucket as `__fb` when unselected), as
/// [`fill::fill_query`] refers to them.
pub(crate) fn name_items(select: &mut Select, plan: &fill::FillPlan) {
    for (i, item) in select.projection.iter_mut().enumerate() {
        let expr = match std::mem::replace(item, SelectItem::Wildcard(Default::default())) {
            SelectItem::ExprWithAlias { expr, .. } | SelectItem::UnnamedExpr(expr) => expr,
            other => {
                *item = other;
                continue;
            }
        };
        *item = SelectItem::ExprWithAlias {
            expr,
            alias: Ident::new(format!("__f{i}")),
        };
    }
    if plan.bucket_item.is_none() {
        select.projection.push(SelectItem::ExprWithAlias {
            expr: plan.bucket.clone(),
            alias: Ident::new("__fb"),
        });
    }
}

/// `SELECT min(ts) FROM <the SELECT's FROM> WHERE <its WHERE>`: the first bucket's origin
/// for ALIGN TO FIRST OBSERVATION.
fn first_observation(select: &Select, source: &Source) -> Result<Query> {
    let filter = select
        .selection
        .clone()
        .unwrap_or_else(|| Expr::value(Value::Boolean(true)));
    let mut slots = Slots::default();
    let template = format!(
        "SELECT min({}) FROM {SOURCE} WHERE {}",
        slots.slot(source.timestamp.clone()),
        slots.slot(filter)
    );
    crate::template::build(&template, slots, &select.from[0].relation)
}

/// `'hh:mm'` or `'-hh:mm'` in nanoseconds.
pub(crate) fn offset_ns(text: &str) -> Option<i64> {
    let (sign, rest) = match text.trim().strip_prefix('-') {
        Some(r) => (-1, r),
        None => (1, text.trim().strip_prefix('+').unwrap_or(text.trim())),
    };
    let (h, m) = rest.split_once(':')?;
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    if !(0..24).contains(&h) || !(0..60).contains(&m) {
        return None;
    }
    Some(sign * (h * 3_600 + m * 60) * 1_000_000_000)
}
