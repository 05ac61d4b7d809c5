//! `SAMPLE BY ... FILL(...)`: the sampled query, completed with a row for every bucket (and
//! key) that had no rows, as plain SQL over it.
//!
//! ```text
//! __s  the sampled query, its items renamed __f0, __f1, ... (plus the bucket if unselected)
//! __g  sample_grid(stride, lo, hi) ✕ the keys seen in __s: every (bucket, key) to output
//! __j  __g LEFT JOIN __s                          __present: the bucket had rows
//! __w  __before / __after: present rows up to this one, from the start / from the end
//! __v  per key and __before group, the last present value (PREV, LINEAR's left end);
//!      per key and __after group, the next one (LINEAR's right end)
//! out  each value by its FILL: NULL, PREV, LINEAR, a constant; in bucket, key order
//! ```
//!
//! The grid runs from FROM (or the first bucket with rows) to TO (or past the last one).
//! Fills apply to the value items in order; the last one written applies to the rest.

use sqlparser::ast::{Expr, Query};

use super::clauses::Fill;
use super::{column_ident, parse_query};
use crate::error::{Result, SqlError};

/// What SAMPLE BY's rewrite leaves for FILL to do.
#[derive(Debug, Clone)]
pub(crate) struct FillPlan {
    pub fills: Vec<Fill>,
    /// The bucket expression, and its `timestamp_floor` arguments.
    pub bucket: Expr,
    pub stride: String,
    pub origin: Expr,
    pub zone: Expr,
    /// FROM and TO as timestamp expressions.
    pub from: Option<Expr>,
    pub to: Option<Expr>,
    /// Where the select list has the bucket and the keys.
    pub bucket_item: Option<usize>,
    pub key_items: Vec<usize>,
    /// The name of each select item in the output.
    pub names: Vec<String>,
    /// The query had no ORDER BY of its own: order by bucket, then keys.
    pub default_order: bool,
}

impl FillPlan {
    fn fill_of(&self, value: usize) -> &Fill {
        self.fills
            .get(value)
            .or(self.fills.last())
            .unwrap_or(&Fill::Null)
    }
}

/// `query` (sampled, with items named `__f<i>` by [`name_items`]) completed by `plan`.
pub(crate) fn fill_query(query: &Query, plan: &FillPlan) -> Result<Query> {
    let mut inner = query.clone();
    inner.order_by = None;
    inner.limit_clause = None;
    let items = plan.names.len();
    let bucket = match plan.bucket_item {
        Some(i) => format!("__f{i}"),
        None => "__fb".to_string(),
    };
    let keys: Vec<String> = plan.key_items.iter().map(|k| format!("__f{k}")).collect();
    let values: Vec<usize> = (0..items)
        .filter(|i| Some(*i) != plan.bucket_item && !plan.key_items.contains(i))
        .collect();

    let needs_range = plan.from.is_none() || plan.to.is_none();
    let lo = plan
        .from
        .as_ref()
        .map_or("__r.__lo".to_string(), Expr::to_string);
    let hi = plan.to.as_ref().map_or(
        "to_timestamp_nanos(CAST(__r.__hi AS BIGINT) + 1)".to_string(),
        Expr::to_string,
    );
    let range = if needs_range {
        format!(" FROM (SELECT min({bucket}) AS __lo, max({bucket}) AS __hi FROM __s) AS __r")
    } else {
        String::new()
    };
    let (key_columns, key_join, key_cross) = if keys.is_empty() {
        (String::new(), String::new(), String::new())
    } else {
        (
            keys.iter()
                .map(|k| format!(", __k.{k}"))
                .collect::<String>(),
            keys.iter()
                .map(|k| format!(" AND __g.{k} IS NOT DISTINCT FROM __s.{k}"))
                .collect::<String>(),
            format!(
                " CROSS JOIN (SELECT DISTINCT {} FROM __s) AS __k",
                keys.join(", ")
            ),
        )
    };
    let grid = format!(
        "SELECT __b AS {bucket}{key_columns} FROM (SELECT unnest(sample_grid('{}', {lo}, {hi}, {}, {})) AS __b{range}) AS __grid{key_cross}",
        plan.stride.replace('\'', "''"),
        plan.origin,
        plan.zone,
    );
    let joined = format!(
        "SELECT __g.{bucket}{}{}, __s.{bucket} IS NOT NULL AS __present FROM __g LEFT JOIN __s ON __g.{bucket} = __s.{bucket}{key_join}",
        keys.iter()
            .map(|k| format!(", __g.{k}"))
            .collect::<String>(),
        values
            .iter()
            .map(|v| format!(", __s.__f{v}"))
            .collect::<String>(),
    );
    let by_key = |extra: &str| {
        let mut parts: Vec<&str> = keys.iter().map(String::as_str).collect();
        if !extra.is_empty() {
            parts.push(extra);
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("PARTITION BY {} ", parts.join(", "))
        }
    };
    let counted = format!(
        "SELECT *, count(CASE WHEN __present THEN 1 END) OVER ({p}ORDER BY {bucket} ROWS UNBOUNDED PRECEDING) AS __before, \
         count(CASE WHEN __present THEN 1 END) OVER ({p}ORDER BY {bucket} DESC ROWS UNBOUNDED PRECEDING) AS __after FROM __j",
        p = by_key(""),
    );
    let before = format!("OVER ({}ORDER BY {bucket})", by_key("__before"));
    let after = format!("OVER ({}ORDER BY {bucket} DESC)", by_key("__after"));
    let mut ends = vec![
        format!(
            "first_value(CASE WHEN __present THEN CAST({bucket} AS BIGINT) END) {before} AS __prev_t"
        ),
        format!(
            "first_value(CASE WHEN __present THEN CAST({bucket} AS BIGINT) END) {after} AS __next_t"
        ),
    ];
    let mut outputs = Vec::with_capacity(items);
    for i in 0..items {
        let name = column_ident(&plan.names[i]);
        if Some(i) == plan.bucket_item || plan.key_items.contains(&i) {
            outputs.push(format!("__f{i} AS {name}"));
            continue;
        }
        let position = values.iter().position(|v| *v == i).unwrap_or(0);
        let value = format!("__f{i}");
        let filled = match plan.fill_of(position) {
            Fill::None | Fill::Null => value,
            Fill::Value(constant) => {
                format!("CASE WHEN __present THEN {value} ELSE {constant} END")
            }
            Fill::Prev => {
                ends.push(format!("first_value({value}) {before} AS __prev{i}"));
                format!("CASE WHEN __present THEN {value} ELSE __prev{i} END")
            }
            Fill::Linear => {
                ends.push(format!("first_value({value}) {before} AS __prev{i}"));
                ends.push(format!("first_value({value}) {after} AS __next{i}"));
                format!(
                    "CASE WHEN __present THEN {value} ELSE CAST(__prev{i} AS DOUBLE) + \
                     (CAST(__next{i} AS DOUBLE) - CAST(__prev{i} AS DOUBLE)) * \
                     CAST(CAST({bucket} AS BIGINT) - __prev_t AS DOUBLE) / \
                     CAST(__next_t - __prev_t AS DOUBLE) END"
                )
            }
        };
        outputs.push(format!("{filled} AS {name}"));
    }
    let order = if plan.default_order {
        let mut order = vec![bucket.clone()];
        order.extend(keys.iter().cloned());
        format!(" ORDER BY {}", order.join(", "))
    } else {
        query
            .order_by
            .as_ref()
            .map_or(String::new(), |o| format!(" {o}"))
    };
    let limit = query
        .limit_clause
        .as_ref()
        .map_or(String::new(), |l| format!("{l}"));
    let sql = format!(
        "WITH __s AS ({inner}), __g AS ({grid}), __j AS ({joined}), __w AS ({counted}), \
         __v AS (SELECT *, {} FROM __w) SELECT {} FROM __v{order}{limit}",
        ends.join(", "),
        outputs.join(", "),
    );
    parse_query(&sql).map_err(|e| SqlError::Invalid(format!("FILL: {e}")))
}
