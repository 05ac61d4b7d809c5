//! `SAMPLE BY ... FILL(...)`: the sampled query, completed with a row for every bucket (and
//! key) that had no rows, as plain SQL over it.
//!
//! ```text
//! __s  the sampled query, its items renamed __f0, __f1, ... (plus the bucket if unselected)
//! __g  sample_grid(stride, lo, hi) ✕ the keys seen in __s: every (bucket, key) to output
//! __j  __g LEFT JOIN __s                          __present: the bucket had rows
//! __w  __before: present rows up to this one
//! __v  per key and __before group, the last present value (PREV)
//! out  each value by its FILL: NULL, PREV, a constant, or LINEAR (the engine's window
//!      function over the key's buckets, `names::FILL_LINEAR_FUNCTION`); in bucket, key order
//! ```
//!
//! The grid runs from FROM (or the first bucket with rows) to TO (or past the last one).
//! Fills apply to the value items in order; the last one written applies to the rest.
//! The gap-fill functions (`crate::gapfill`) build the same plan, with LINEAR kept between
//! buckets with rows (`FillPlan::extrapolate`): `__v` then also counts, in `__after`, the
//! buckets with rows from this one on.
//!
//! The statement is parsed from a template whose text depends only on the plan's shape (how
//! many items, which of them are the bucket and the keys, each value's fill kind, whether
//! FROM and TO are given) and holds only names made here (`__s`, `__f0`, `__o0`, ...) and
//! slots (see `crate::template`). Nothing the user wrote is ever printed into it: each slot is then
//! replaced by its expression node (stride, bounds, origin, zone, fill constants), and the
//! sampled query, the output names, ORDER BY and LIMIT are set as nodes.

use sqlparser::ast::{Expr, Query, SelectItem, SetExpr};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use super::clauses::Fill;
use super::{column_ident, parse_query};
use crate::ast::string;
use crate::error::{Result, SqlError};
use crate::names::FILL_LINEAR_FUNCTION;
use crate::template::Slots;

/// The CTE the sampled query is put in.
const SAMPLED: &str = "__s";

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
    /// LINEAR continues the line before a key's first and after its last bucket with rows
    /// (QuestDB's FILL(LINEAR)); otherwise those buckets stay NULL and only buckets between
    /// two with rows are interpolated (TimescaleDB's and InfluxDB's `interpolate`).
    pub extrapolate: bool,
}

impl FillPlan {
    fn fill_of(&self, value: usize) -> &Fill {
        self.fills
            .get(value)
            .or(self.fills.last())
            .unwrap_or(&Fill::Null)
    }

    fn is_value(&self, item: usize) -> bool {
        Some(item) != self.bucket_item && !self.key_items.contains(&item)
    }
}

/// `query` (sampled, with items named `__f<i>` by `name_items`) completed by `plan`.
pub(crate) fn fill_query(query: &Query, plan: &FillPlan) -> Result<Query> {
    let shape = Shape::of(plan);
    let mut slots = Slots::default();
    let text = template(plan, &shape, &mut slots)?;
    let mut filled = parse_query(&text)?;
    slots.put_into(&mut filled)?;
    let mut sampled = query.clone();
    sampled.order_by = None;
    sampled.limit_clause = None;
    set_sampled(&mut filled, sampled)?;
    name_outputs(&mut filled, &plan.names)?;
    if !plan.default_order {
        filled.order_by = query.order_by.clone();
    }
    filled.limit_clause = query.limit_clause.clone();
    Ok(filled)
}

/// The names the template gives the bucket and the keys, and which items are values.
struct Shape {
    bucket: String,
    keys: Vec<String>,
    values: Vec<usize>,
}

impl Shape {
    fn of(plan: &FillPlan) -> Shape {
        Shape {
            bucket: plan
                .bucket_item
                .map_or_else(|| "__fb".to_string(), |i| format!("__f{i}")),
            keys: plan.key_items.iter().map(|k| format!("__f{k}")).collect(),
            values: (0..plan.names.len())
                .filter(|i| plan.is_value(*i))
                .collect(),
        }
    }

    /// `PARTITION BY keys[, extra] ` or nothing.
    fn partition(&self, extra: Option<&str>) -> String {
        let parts: Vec<&str> = self.keys.iter().map(String::as_str).chain(extra).collect();
        if parts.is_empty() {
            String::new()
        } else {
            format!("PARTITION BY {} ", parts.join(", "))
        }
    }

    /// The window of PREV's group: the rows since the last present one.
    fn window(&self, group: &str) -> String {
        format!(
            "OVER ({}ORDER BY {})",
            self.partition(Some(group)),
            self.bucket
        )
    }
}

/// The whole statement's template; `__s` is a placeholder and outputs are named `__o<i>`.
fn template(plan: &FillPlan, shape: &Shape, slots: &mut Slots) -> Result<String> {
    let grid = grid(plan, shape, slots);
    let joined = joined(shape);
    let counted = counted(shape);
    let (ends, outputs) = outputs(plan, shape, slots)?;
    let order = if plan.default_order {
        let order: Vec<&str> = std::iter::once(shape.bucket.as_str())
            .chain(shape.keys.iter().map(String::as_str))
            .collect();
        format!(" ORDER BY {}", order.join(", "))
    } else {
        String::new()
    };
    Ok(format!(
        "WITH {SAMPLED} AS (SELECT NULL), __g AS ({grid}), __j AS ({joined}), __w AS ({counted}), \
         __v AS (SELECT *{} FROM __w) SELECT {} FROM __v{order}",
        ends.iter().map(|e| format!(", {e}")).collect::<String>(),
        outputs.join(", "),
    ))
}

/// `__g`: every bucket from lo to hi, times every key seen.
fn grid(plan: &FillPlan, shape: &Shape, slots: &mut Slots) -> String {
    let bucket = &shape.bucket;
    let stride = slots.slot(string(&plan.stride));
    let lo = match &plan.from {
        Some(from) => slots.slot(from.clone()),
        None => "__r.__lo".to_string(),
    };
    let hi = match &plan.to {
        Some(to) => slots.slot(to.clone()),
        None => "to_timestamp_nanos(CAST(__r.__hi AS BIGINT) + 1)".to_string(),
    };
    let origin = slots.slot(plan.origin.clone());
    let zone = slots.slot(plan.zone.clone());
    let range = if plan.from.is_none() || plan.to.is_none() {
        format!(" FROM (SELECT min({bucket}) AS __lo, max({bucket}) AS __hi FROM {SAMPLED}) AS __r")
    } else {
        String::new()
    };
    let key_columns: String = shape.keys.iter().map(|k| format!(", __k.{k}")).collect();
    let key_cross = if shape.keys.is_empty() {
        String::new()
    } else {
        format!(
            " CROSS JOIN (SELECT DISTINCT {} FROM {SAMPLED}) AS __k",
            shape.keys.join(", ")
        )
    };
    format!(
        "SELECT __b AS {bucket}{key_columns} FROM (SELECT unnest(sample_grid({stride}, {lo}, {hi}, \
         {origin}, {zone})) AS __b{range}) AS __grid{key_cross}"
    )
}

/// `__j`: the grid joined with the sampled rows, and whether the bucket had any.
fn joined(shape: &Shape) -> String {
    let bucket = &shape.bucket;
    let keys: String = shape.keys.iter().map(|k| format!(", __g.{k}")).collect();
    let values: String = shape
        .values
        .iter()
        .map(|v| format!(", {SAMPLED}.__f{v}"))
        .collect();
    let key_join: String = shape
        .keys
        .iter()
        // Parenthesized: `a IS NOT DISTINCT FROM b AND c` would read as `b AND c`.
        .map(|k| format!(" AND (__g.{k} IS NOT DISTINCT FROM {SAMPLED}.{k})"))
        .collect();
    format!(
        "SELECT __g.{bucket}{keys}{values}, {SAMPLED}.{bucket} IS NOT NULL AS __present \
         FROM __g LEFT JOIN {SAMPLED} ON __g.{bucket} = {SAMPLED}.{bucket}{key_join}"
    )
}

/// `__w`: present rows so far, from the start (`__before`).
fn counted(shape: &Shape) -> String {
    let p = shape.partition(None);
    let bucket = &shape.bucket;
    format!(
        "SELECT *, count(CASE WHEN __present THEN 1 END) OVER ({p}ORDER BY {bucket} ROWS \
         UNBOUNDED PRECEDING) AS __before FROM __j"
    )
}

/// `__v`'s window columns, and the output items (named `__o<i>`).
fn outputs(
    plan: &FillPlan,
    shape: &Shape,
    slots: &mut Slots,
) -> Result<(Vec<String>, Vec<String>)> {
    let mut ends = Vec::new();
    let mut outputs = Vec::with_capacity(plan.names.len());
    for i in 0..plan.names.len() {
        let filled = match shape.values.iter().position(|v| *v == i) {
            Some(position) => value(
                i,
                plan.fill_of(position),
                plan.extrapolate,
                shape,
                slots,
                &mut ends,
            )?,
            None => format!("__f{i}"),
        };
        outputs.push(format!("{filled} AS __o{i}"));
    }
    Ok((ends, outputs))
}

/// Value item `i` filled by `fill`; adds the window columns it needs to `ends`.
fn value(
    i: usize,
    fill: &Fill,
    extrapolate: bool,
    shape: &Shape,
    slots: &mut Slots,
    ends: &mut Vec<String>,
) -> Result<String> {
    let value = format!("__f{i}");
    let bucket = &shape.bucket;
    let prev = || {
        format!(
            "first_value({value}) {} AS __prev{i}",
            shape.window("__before")
        )
    };
    Ok(match fill {
        Fill::None | Fill::Null => value,
        Fill::Value(text) => {
            let constant = slots.slot(constant(text)?);
            format!("CASE WHEN __present THEN {value} ELSE {constant} END")
        }
        Fill::Prev => {
            ends.push(prev());
            format!("CASE WHEN __present THEN {value} ELSE __prev{i} END")
        }
        Fill::Linear => {
            let line = format!(
                "{FILL_LINEAR_FUNCTION}({value}, __present, CAST({bucket} AS BIGINT)) OVER ({}ORDER \
                 BY {bucket})",
                shape.partition(None)
            );
            if extrapolate {
                line
            } else {
                let after = format!(
                    "count(CASE WHEN __present THEN 1 END) OVER ({}ORDER BY {bucket} ROWS \
                     BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS __after",
                    shape.partition(None)
                );
                if !ends.contains(&after) {
                    ends.push(after);
                }
                ends.push(format!("{line} AS __line{i}"));
                format!("CASE WHEN __present OR (__before > 0 AND __after > 0) THEN __line{i} END")
            }
        }
    })
}

/// A FILL constant, as written, parsed on its own: one whole expression.
fn constant(text: &str) -> Result<Expr> {
    let invalid = |e: sqlparser::parser::ParserError| {
        let message = crate::error::parser_message(&e.to_string());
        SqlError::Invalid(format!("FILL({text}): {message}"))
    };
    let mut parser = Parser::new(&GenericDialect {})
        .try_with_sql(text)
        .map_err(invalid)?;
    let expr = parser.parse_expr().map_err(invalid)?;
    parser.expect_token(&Token::EOF).map_err(invalid)?;
    Ok(expr)
}

/// Puts `sampled` in the template's `__s`.
fn set_sampled(filled: &mut Query, sampled: Query) -> Result<()> {
    let cte = filled
        .with
        .as_mut()
        .and_then(|w| {
            w.cte_tables
                .iter_mut()
                .find(|c| c.alias.name.value == SAMPLED)
        })
        .ok_or_else(|| SqlError::Invalid("FILL: internal rewrite lost __s".into()))?;
    *cte.query = sampled;
    Ok(())
}

/// Names the outputs (`__o<i>` in the template) as the sampled query named its items.
fn name_outputs(filled: &mut Query, names: &[String]) -> Result<()> {
    let SetExpr::Select(select) = filled.body.as_mut() else {
        return Err(SqlError::Invalid(
            "FILL: internal rewrite is not a SELECT".into(),
        ));
    };
    if select.projection.len() != names.len() {
        return Err(SqlError::Invalid(
            "FILL: internal rewrite lost an item".into(),
        ));
    }
    for (item, name) in select.projection.iter_mut().zip(names) {
        if let SelectItem::ExprWithAlias { alias, .. } = item {
            *alias = column_ident(name);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sqlparser::ast::{Expr, Query, SelectItem, SetExpr, Statement, UnaryOperator, Value};
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    use super::*;
    use crate::ast::{column, null, number};
    use crate::questdb::{Catalog, extract, rewrite};

    struct Tables;

    impl Catalog for Tables {
        fn designated_timestamp(&self, table: &str) -> Option<Option<String>> {
            (table == "cpu").then(|| Some("ts".into()))
        }

        fn is_aggregate(&self, function: &str) -> bool {
            matches!(function, "avg" | "sum" | "max" | "min" | "count")
        }

        fn is_symbol(&self, _table: &str, column: &str) -> bool {
            column == "host"
        }
    }

    fn parse(sql: &str) -> Statement {
        let mut statements = Parser::parse_sql(&GenericDialect {}, sql).expect(sql);
        statements.remove(0)
    }

    /// The rewritten statement, checked to read back as itself from its text.
    fn rewritten(sql: &str) -> Result<Query> {
        let (text, clauses) = extract(sql)?;
        let mut statement = parse(&text);
        rewrite(&mut statement, &clauses, &Tables)?;
        let printed = statement.to_string();
        assert_eq!(parse(&printed).to_string(), printed, "{sql}");
        match statement {
            Statement::Query(query) => Ok(*query),
            other => panic!("not a query: {other}"),
        }
    }

    fn outputs(query: &Query) -> Vec<(String, Expr)> {
        let SetExpr::Select(select) = query.body.as_ref() else {
            panic!("not a SELECT: {query}");
        };
        select
            .projection
            .iter()
            .map(|item| match item {
                SelectItem::ExprWithAlias { expr, alias } => (alias.value.clone(), expr.clone()),
                other => panic!("unnamed output {other}"),
            })
            .collect()
    }

    /// What a constant fill puts in place of a missing value.
    fn else_of(e: &Expr) -> &Expr {
        match e {
            Expr::Case {
                else_result: Some(e),
                ..
            } => e,
            other => panic!("not a filled value: {other}"),
        }
    }

    #[test]
    fn odd_names_come_out_as_written() {
        let query = rewritten(
            r#"SELECT ts, "Odd Host", sum(v) AS "my ""odd"" col", max(v) AS "Total Qty", min(v) "end"
               FROM cpu SAMPLE BY 1h FILL(PREV, LINEAR, 0)"#,
        )
        .unwrap();
        let names: Vec<String> = outputs(&query).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            ["ts", "Odd Host", "my \"odd\" col", "Total Qty", "end"]
        );
    }

    #[test]
    fn constants_are_the_nodes_written() {
        let query = rewritten(
            "SELECT ts, sum(v), max(v), min(v), avg(v) FROM cpu SAMPLE BY 1h \
             FILL(-1, 'it''s', 2.5e1, __sundial_slot(0))",
        )
        .unwrap();
        let outputs = outputs(&query);
        let minus_one = Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: Box::new(number(1)),
        };
        assert_eq!(else_of(&outputs[1].1), &minus_one);
        assert_eq!(
            else_of(&outputs[2].1),
            &Expr::value(Value::SingleQuotedString("it's".into()))
        );
        assert_eq!(
            else_of(&outputs[3].1),
            &Expr::value(Value::Number("2.5e1".into(), false))
        );
        assert_eq!(else_of(&outputs[4].1).to_string(), "__sundial_slot(0)");
    }

    #[test]
    fn a_constant_is_one_expression() {
        // Spliced into the text, `END` closed the CASE early and the rest of it was dropped:
        // the second made a query of a different shape that ran.
        for fill in ["0 END", "1 END AS n FROM __v", "0 AS x"] {
            let sql = format!("SELECT ts, sum(v) FROM cpu SAMPLE BY 1h FILL({fill})");
            assert!(rewritten(&sql).is_err(), "{sql}");
        }
    }

    #[test]
    fn order_by_and_limit_are_kept() {
        let query = rewritten(
            r#"SELECT ts, sum(v) AS "my ""odd"" col" FROM cpu SAMPLE BY 1h FILL(99)
               ORDER BY "my ""odd"" col" DESC, ts LIMIT 3"#,
        )
        .unwrap();
        let text = query.to_string();
        assert!(
            text.ends_with(r#" FROM __v ORDER BY "my ""odd"" col" DESC, ts LIMIT 3"#),
            "{text}"
        );
        let default = rewritten("SELECT ts, host, sum(v) FROM cpu SAMPLE BY 1h FILL(NULL) LIMIT 2")
            .unwrap()
            .to_string();
        assert!(
            default.contains(" FROM __v ORDER BY __f0, __f1"),
            "{default}"
        );
    }

    #[test]
    fn the_sampled_query_and_the_grid_are_as_built() {
        let text = rewritten(
            "SELECT ts, host, sum(v), max(v) m FROM cpu SAMPLE BY 1h TO '2024-01-02' FILL(PREV, 0)",
        )
        .unwrap()
        .to_string();
        let expected = "WITH __s AS (SELECT timestamp_floor('1h', ts, NULL, NULL) AS __f0, \
            host AS __f1, sum(v) AS __f2, max(v) AS __f3 FROM cpu \
            WHERE ts < CAST('2024-01-02' AS TIMESTAMP) \
            GROUP BY timestamp_floor('1h', ts, NULL, NULL), host), \
            __g AS (SELECT __b AS __f0, __k.__f1 FROM (SELECT unnest(sample_grid('1h', __r.__lo, \
            CAST('2024-01-02' AS TIMESTAMP), NULL, NULL)) AS __b FROM (SELECT min(__f0) AS __lo, \
            max(__f0) AS __hi FROM __s) AS __r) AS __grid CROSS JOIN (SELECT DISTINCT __f1 FROM \
            __s) AS __k), \
            __j AS (SELECT __g.__f0, __g.__f1, __s.__f2, __s.__f3, __s.__f0 IS NOT NULL AS \
            __present FROM __g LEFT JOIN __s ON __g.__f0 = __s.__f0 AND (__g.__f1 IS NOT DISTINCT \
            FROM __s.__f1)), \
            __w AS (SELECT *, count(CASE WHEN __present THEN 1 END) OVER (PARTITION BY __f1 ORDER \
            BY __f0 ROWS UNBOUNDED PRECEDING) AS __before FROM __j), \
            __v AS (SELECT *, first_value(__f2) OVER (PARTITION BY __f1, __before ORDER BY \
            __f0) AS __prev2 FROM __w) \
            SELECT __f0 AS ts, __f1 AS host, CASE WHEN __present THEN __f2 ELSE __prev2 END AS \
            sum, CASE WHEN __present THEN __f3 ELSE 0 END AS m FROM __v ORDER BY __f0, __f1";
        assert_eq!(text, expected);
    }

    #[test]
    fn the_template_holds_no_user_text() {
        let odd = "zz'\"odd";
        // QuestDB's LINEAR, and the gap-fill functions' (kept between present buckets).
        for extrapolate in [true, false] {
            let plan = FillPlan {
                fills: vec![
                    Fill::Value(format!("'{}'", odd.replace('\'', "''"))),
                    Fill::Linear,
                    Fill::Prev,
                ],
                bucket: null(),
                stride: odd.into(),
                origin: column(odd),
                zone: column(odd),
                from: Some(column(odd)),
                to: None,
                bucket_item: Some(0),
                key_items: vec![1],
                names: vec![odd.into(); 5],
                default_order: false,
                extrapolate,
            };
            let mut slots = Slots::default();
            let text = template(&plan, &Shape::of(&plan), &mut slots).unwrap();
            assert!(!text.contains("zz"), "{text}");
            assert_eq!(text.contains("__after"), !extrapolate, "{text}");
            // stride, from, origin, zone and the constant
            assert_eq!(slots.len(), 5);
            let query = fill_query(&parse_query("SELECT 1").unwrap(), &plan).unwrap();
            assert_eq!(
                parse_query(&query.to_string()).unwrap().to_string(),
                query.to_string()
            );
            assert!(outputs(&query).iter().all(|(name, _)| name == odd));
        }
    }
}
