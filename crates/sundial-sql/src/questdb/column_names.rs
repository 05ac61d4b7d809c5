//! Result column names as QuestDB 9.3.4 gives them to unaliased select items, given before
//! any rewrite changes the items, so the name is that of the text as written.
//!
//! QuestDB names an item by printing its expression tree: a column is its name (`t.v` is
//! `v`), a call is `name(arg, arg)` with the name as written (`max(v)`, `MAX(V)`), `count(*)`
//! is `count()` and `count(DISTINCT x)` is `count_distinct(x)`, operators are infix with one
//! space (`v + 1`, `s like 'a%'`, and `a || b` is `concat(a, b)`), unary operators are calls
//! (`-(v)`, `not(x)`), `x IS NULL` is `x = NULL`, `<>` is `!=`, a cast is `x::type`,
//! `extract(hour FROM ts)` is `extract(hour, ts)`, parentheses as written, literals as written
//! (`1e3`, `'it''s'`, `true`, `null`). A name is cut at 64 characters; one holding a `.` is
//! cut at 61 and wrapped in double quotes (`"max(t.v)"`, `"0.5"`); a cut name loses its
//! trailing spaces. A name equal (ignoring case) to an
//! earlier item's gets the first free suffix `_2`, `_3`, ... (`v`, `v_2`).
//!
//! Every SELECT of a statement that reads a Sundial table gets these names as aliases, so
//! an outer query can refer to an inner one's `"max(v)"` as on QuestDB. Statements that read
//! only PostgreSQL's catalogs, or no table, keep the names PostgreSQL tools expect (see
//! `sundial_query::result_names`). Columns that `*` brings in are named after planning,
//! where their names are known.
//!
//! Two deliberate differences, as the parsed tree does not keep the case of keywords: a cast's
//! type is printed in lower case (`CAST(v AS INT)` is `v::int`) and `IS NULL`'s NULL in upper
//! case, where QuestDB keeps the case they were written in.

use std::collections::HashSet;
use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, CastKind, DuplicateTreatment, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, Ident, Query, SelectItem, SetExpr, Statement, UnaryOperator, Value,
    VisitMut, VisitorMut, visit_relations,
};

use super::{Catalog, object_name_text};

/// Longest name given, in characters: a longer rendering is cut there and loses its trailing
/// spaces, as QuestDB 9.3.4 cuts it.
const NAME_CHARS_MAX: usize = 64;
/// The same for a name that is quoted (it holds a `.`, anywhere in the whole rendering),
/// counting the text between the quotes.
const QUOTED_NAME_CHARS_MAX: usize = 61;

/// Aliases every unaliased item of every SELECT of `statement` with QuestDB's name for it,
/// when the statement reads a table of `catalog` (see the module docs).
pub(crate) fn name_items(statement: &mut Statement, catalog: &dyn Catalog) {
    if !reads_a_table(statement, catalog) {
        return;
    }
    let _ = statement.visit(&mut Namer);
}

/// Whether `statement` reads a table `catalog` knows.
pub(super) fn reads_a_table(statement: &Statement, catalog: &dyn Catalog) -> bool {
    visit_relations(statement, |name| match object_name_text(name) {
        Some(table) if catalog.designated_timestamp(&table).is_some() => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

struct Namer;

impl VisitorMut for Namer {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        name_body(&mut query.body);
        ControlFlow::Continue(())
    }
}

fn name_body(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => name_projection(&mut select.projection),
        SetExpr::SetOperation { left, right, .. } => {
            name_body(left);
            name_body(right);
        }
        _ => {}
    }
}

/// Aliases the unaliased items of one select list; plain columns keep their names unless an
/// earlier item took them.
fn name_projection(projection: &mut [SelectItem]) {
    if projection.iter().any(|item| {
        matches!(
            item,
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
        )
    }) {
        // The names `*` brings in are known after planning, where duplicates are named.
        return;
    }
    let mut taken: HashSet<String> = projection
        .iter()
        .filter_map(|item| match item {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_lowercase()),
            _ => None,
        })
        .collect();
    for item in projection.iter_mut() {
        let SelectItem::UnnamedExpr(expr) = item else {
            continue;
        };
        let (base, plain_column) = match &*expr {
            Expr::Identifier(i) => (i.value.clone(), true),
            Expr::CompoundIdentifier(parts) => match parts.last() {
                Some(last) => (last.value.clone(), true),
                None => continue,
            },
            other => (item_name(other), false),
        };
        let mut name = base.clone();
        let mut k = 1;
        while !taken.insert(name.to_lowercase()) {
            k += 1;
            name = format!("{base}_{k}");
        }
        if plain_column && name == base {
            continue;
        }
        *item = SelectItem::ExprWithAlias {
            expr: expr.clone(),
            alias: Ident::with_quote('"', name),
        };
    }
}

/// QuestDB's name for an unaliased item that is not a plain column.
fn item_name(expr: &Expr) -> String {
    let mut text = String::new();
    render(expr, &mut text);
    let quoted = text.contains('.');
    let max = if quoted {
        QUOTED_NAME_CHARS_MAX
    } else {
        NAME_CHARS_MAX
    };
    if let Some((end, _)) = text.char_indices().nth(max) {
        text.truncate(end);
        text.truncate(text.trim_end().len());
    }
    if quoted { format!("\"{text}\"") } else { text }
}

/// Appends QuestDB's printing of `expr` to `out`. Bounded by the statement's depth, which
/// `limits` bounds before parsing.
fn render(expr: &Expr, out: &mut String) {
    match expr {
        Expr::Identifier(i) => out.push_str(&i.value),
        Expr::CompoundIdentifier(parts) => {
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                out.push_str(&part.value);
            }
        }
        Expr::Value(v) => render_value(&v.value, out),
        Expr::Nested(inner) => {
            out.push('(');
            render(inner, out);
            out.push(')');
        }
        Expr::BinaryOp {
            left,
            op: BinaryOperator::StringConcat,
            right,
        } => call_of("concat", &[left, right], out),
        Expr::BinaryOp { left, op, right } => {
            render(left, out);
            out.push(' ');
            match op {
                BinaryOperator::NotEq => out.push_str("!="),
                other => out.push_str(&other.to_string().to_lowercase()),
            }
            out.push(' ');
            render(right, out);
        }
        Expr::UnaryOp {
            op: UnaryOperator::Plus,
            expr,
        } => render(expr, out),
        Expr::UnaryOp { op, expr } => {
            let name = match op {
                UnaryOperator::Minus => "-",
                UnaryOperator::Not => "not",
                other => {
                    return render_fallback(
                        &Expr::UnaryOp {
                            op: *other,
                            expr: expr.clone(),
                        },
                        out,
                    );
                }
            };
            // Written parentheses are the call's own: `-(v + 1)` stays `-(v + 1)`.
            let operand = match &**expr {
                Expr::Nested(inner) => inner,
                other => other,
            };
            call_of(name, &[operand], out);
        }
        Expr::IsNull(e) => {
            render(e, out);
            out.push_str(" = NULL");
        }
        Expr::IsNotNull(e) => {
            render(e, out);
            out.push_str(" != NULL");
        }
        Expr::InList {
            expr,
            list,
            negated,
        } => negated_if(*negated, out, |out| {
            render(expr, out);
            out.push_str(" in ");
            if let [one] = list.as_slice() {
                render(one, out);
            } else {
                out.push('(');
                list_of(list.iter(), out);
                out.push(')');
            }
        }),
        Expr::Like {
            negated,
            expr,
            pattern,
            ..
        } => negated_if(*negated, out, |out| {
            render(expr, out);
            out.push_str(" like ");
            render(pattern, out);
        }),
        Expr::ILike {
            negated,
            expr,
            pattern,
            ..
        } => negated_if(*negated, out, |out| {
            render(expr, out);
            out.push_str(" ilike ");
            render(pattern, out);
        }),
        Expr::Between {
            expr,
            negated,
            low,
            high,
        } => negated_if(*negated, out, |out| {
            render(expr, out);
            out.push_str(" between ");
            render(low, out);
            out.push_str(" and ");
            render(high, out);
        }),
        Expr::Cast {
            kind: CastKind::Cast | CastKind::DoubleColon,
            expr,
            data_type,
            format: None,
            ..
        } => {
            // An operator's operands are wrapped: `CAST(v * 3 AS INT)` is `(v * 3)::int`.
            let infix = matches!(
                **expr,
                Expr::BinaryOp { .. }
                    | Expr::IsNull(_)
                    | Expr::IsNotNull(_)
                    | Expr::InList { .. }
                    | Expr::Like { .. }
                    | Expr::ILike { .. }
                    | Expr::Between { .. }
            );
            if infix {
                out.push('(');
            }
            render(expr, out);
            if infix {
                out.push(')');
            }
            out.push_str("::");
            out.push_str(&data_type.to_string().to_lowercase());
        }
        Expr::Case {
            operand: None,
            conditions,
            else_result,
            ..
        } => {
            out.push_str("case");
            for when in conditions {
                out.push_str(" when ");
                render(&when.condition, out);
                out.push_str(" then ");
                render(&when.result, out);
            }
            if let Some(e) = else_result {
                out.push_str(" else ");
                render(e, out);
            }
            out.push_str(" end");
        }
        Expr::Case {
            operand: Some(operand),
            conditions,
            else_result,
            ..
        } => {
            out.push_str("switch(");
            render(operand, out);
            for when in conditions {
                out.push_str(", ");
                render(&when.condition, out);
                out.push_str(", ");
                render(&when.result, out);
            }
            if let Some(e) = else_result {
                out.push_str(", ");
                render(e, out);
            }
            out.push(')');
        }
        Expr::Function(f) => render_function(f, out),
        Expr::Extract { field, expr, .. } => {
            out.push_str("extract(");
            out.push_str(&field.to_string().to_lowercase());
            out.push_str(", ");
            render(expr, out);
            out.push(')');
        }
        other => render_fallback(other, out),
    }
}

/// Any other expression: its SQL text in lower case.
fn render_fallback(expr: &Expr, out: &mut String) {
    out.push_str(&expr.to_string().to_lowercase());
}

fn render_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        other => out.push_str(&other.to_string()),
    }
}

fn render_function(f: &Function, out: &mut String) {
    let name = f.name.to_string();
    let FunctionArguments::List(list) = &f.args else {
        match f.args {
            FunctionArguments::None => out.push_str(&name),
            _ => render_fallback(&Expr::Function(f.clone()), out),
        }
        return;
    };
    let distinct = matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct));
    out.push_str(&name);
    if distinct {
        out.push_str("_distinct");
    }
    out.push('(');
    let mut first = true;
    for arg in &list.args {
        let arg = match arg {
            FunctionArg::Unnamed(a) | FunctionArg::Named { arg: a, .. } => a,
            FunctionArg::ExprNamed { arg, .. } => arg,
        };
        let expr = match arg {
            FunctionArgExpr::Expr(e) => e,
            // `count(*)` is `count()`.
            FunctionArgExpr::Wildcard
            | FunctionArgExpr::QualifiedWildcard(_)
            | FunctionArgExpr::WildcardWithOptions(_) => continue,
        };
        if !first {
            out.push_str(", ");
        }
        first = false;
        render(expr, out);
    }
    out.push(')');
}

fn call_of(name: &str, args: &[&Expr], out: &mut String) {
    out.push_str(name);
    out.push('(');
    list_of(args.iter().copied(), out);
    out.push(')');
}

fn list_of<'e>(exprs: impl Iterator<Item = &'e Expr>, out: &mut String) {
    for (i, e) in exprs.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        render(e, out);
    }
}

/// `body`'s printing, wrapped in `not(...)` when `negated`.
fn negated_if(negated: bool, out: &mut String, body: impl FnOnce(&mut String)) {
    if negated {
        out.push_str("not(");
        body(out);
        out.push(')');
    } else {
        body(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    struct Tables;

    impl Catalog for Tables {
        fn designated_timestamp(&self, table: &str) -> Option<Option<String>> {
            (table == "t").then(|| Some("ts".to_string()))
        }
        fn is_aggregate(&self, _: &str) -> bool {
            false
        }
        fn is_symbol(&self, _: &str, _: &str) -> bool {
            false
        }
    }

    fn names(sql: &str) -> Vec<String> {
        let mut statement = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        name_items(&mut statement, &Tables);
        let Statement::Query(q) = statement else {
            panic!()
        };
        let SetExpr::Select(s) = *q.body else {
            panic!()
        };
        s.projection
            .iter()
            .map(|item| match item {
                SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                other => format!("unnamed {other}"),
            })
            .collect()
    }

    #[test]
    fn as_questdb_names_them() {
        // Each expected name is what QuestDB 9.3.4 answered for the same item.
        let cases = [
            ("max(v)", "max(v)"),
            ("max( v )", "max(v)"),
            ("count(*)", "count()"),
            ("count()", "count()"),
            ("count(DISTINCT s)", "count_distinct(s)"),
            ("v+1", "v + 1"),
            ("(v+1)*2", "(v + 1) * 2"),
            ("v - -1", "v - -(1)"),
            ("-v", "-(v)"),
            ("not true", "not(true)"),
            ("s || 'x'", "concat(s, 'x')"),
            ("concat(s, 'x')", "concat(s, 'x')"),
            ("v is null", "v = NULL"),
            ("v is not null", "v != NULL"),
            ("v <> 1", "v != 1"),
            ("extract(hour from ts)", "extract(hour, ts)"),
            ("v in (1,2)", "v in (1, 2)"),
            ("v not in (1)", "not(v in 1)"),
            ("s not like 'b'", "not(s like 'b')"),
            ("s ilike 'a'", "s ilike 'a'"),
            ("cast(v as int)", "v::int"),
            ("v::timestamp", "v::timestamp"),
            ("cast(v*3 as int)", "(v * 3)::int"),
            ("(v*3)::int", "(v * 3)::int"),
            ("sum(v)/2", "sum(v) / 2"),
            ("-(v+1)", "-(v + 1)"),
            ("1", "1"),
            ("'it''s'", "'it''s'"),
            ("null", "null"),
            ("true", "true"),
            ("0.5", "\"0.5\""),
            ("1e3", "1e3"),
            ("max(t.v)", "\"max(t.v)\""),
            ("t.v + 1", "\"t.v + 1\""),
            ("timestamp_floor('h', ts)", "timestamp_floor('h', ts)"),
            ("dateadd('d', 1, ts)", "dateadd('d', 1, ts)"),
            ("round(v, 1)", "round(v, 1)"),
            ("now()", "now()"),
            ("coalesce(v, 0)", "coalesce(v, 0)"),
            ("v % 2", "v % 2"),
            (
                "case when v > 1 then 1 else 0 end",
                "case when v > 1 then 1 else 0 end",
            ),
            ("case v when 1.5 then 'a' end", "\"switch(v, 1.5, 'a')\""),
            // Long renderings: cut at 64 characters, or 61 inside quotes, without the
            // trailing space.
            (
                "v + v + v + v + v + v + v + v + v + v + v + v + v + v + v + v + v",
                "v + v + v + v + v + v + v + v + v + v + v + v + v + v + v + v +",
            ),
            (
                "vv + vv + vv + vv + vv + vv + vv + vv + vv + vv + vv + vv + vv",
                "vv + vv + vv + vv + vv + vv + vv + vv + vv + vv + vv + vv + vv",
            ),
            (
                "vvvvvvv + vvvvvvv + vvvvvvv + vvvvvvv + vvvvvvv + vvvvvvv + vvvvvvv",
                "vvvvvvv + vvvvvvv + vvvvvvv + vvvvvvv + vvvvvvv + vvvvvvv + vvvv",
            ),
            (
                "concat(s, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', '.')",
                "\"concat(s, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
            ),
        ];
        for (item, want) in cases {
            assert_eq!(
                names(&format!("SELECT {item} FROM t")),
                [want],
                "SELECT {item}"
            );
        }
    }

    #[test]
    fn duplicates_take_a_suffix_ignoring_case() {
        assert_eq!(names("SELECT v, v, v FROM t"), ["unnamed v", "v_2", "v_3"]);
        assert_eq!(
            names("SELECT max(v), MAX(V) FROM t"),
            ["max(v)", "MAX(V)_2"]
        );
        assert_eq!(
            names("SELECT t1.v, t2.v FROM t t1, t t2"),
            ["unnamed t1.v", "v_2"]
        );
        assert_eq!(
            names("SELECT v::int, cast(v AS INT) FROM t"),
            ["v::int", "v::int_2"]
        );
        assert_eq!(names("SELECT v AS x, v FROM t"), ["x", "unnamed v"]);
    }

    #[test]
    fn statements_without_tables_are_left_alone() {
        assert_eq!(names("SELECT max(v) FROM other"), ["unnamed max(v)"]);
        assert_eq!(names("SELECT 1"), ["unnamed 1"]);
    }
}
