//! Functions in FROM as PostgreSQL reads them. Grafana's PostgreSQL data source lists tables
//! with `FROM generate_series(array_lower(a, 1), array_upper(a, 1)) AS i,
//! string_to_array(current_setting('search_path'), ',') s` and then reads `s[i]`:
//!
//! - a set-returning function of one column (`generate_series`, `unnest`, `string_to_table`)
//!   with an alias but no column list names its column after the alias, as in PostgreSQL
//!   (`AS i` means `AS i(i)`; DataFusion would call it `value`);
//! - a function returning one value (`string_to_array`, `current_schemas`) is a relation of
//!   one row and one column named after the alias (or the function):
//!   `(SELECT string_to_array(...) AS s) AS s`;
//! - `string_to_table(text, delimiter)` is `unnest(string_to_array(text, delimiter))`, and
//!   `regexp_split_to_table(text, pattern)` is `unnest(regexp_split_to_array(text, pattern))`.

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, FunctionArg, Ident, ObjectName, SelectItem, Statement, TableAlias, TableAliasColumnDef,
    TableFactor, VisitMut, VisitorMut,
};

use crate::ast::{call, select_with};

/// Set-returning functions of one column whose alias names that column.
const ONE_COLUMN_SETS: [&str; 4] = [
    "generate_series",
    "string_to_table",
    "regexp_split_to_table",
    "range",
];

/// Functions of one value that PostgreSQL lets stand in FROM as a one-row relation.
const VALUES_IN_FROM: [&str; 2] = ["string_to_array", "current_schemas"];

/// Rewrites the functions in `statement`'s FROM clauses (see the module's docs).
pub(crate) fn rewrite(statement: &mut Statement) {
    let _ = statement.visit(&mut FromFunctions);
}

struct FromFunctions;

impl VisitorMut for FromFunctions {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        rewrite_factor(factor);
        ControlFlow::Continue(())
    }
}

fn function_name(name: &ObjectName) -> Option<String> {
    let ident = name.0.last()?.as_ident()?;
    (ident.quote_style.is_none()).then(|| ident.value.to_lowercase())
}

/// `alias` naming its only column after itself, unless it lists columns.
fn name_column(alias: &mut Option<TableAlias>) {
    if let Some(alias) = alias
        && alias.columns.is_empty()
    {
        alias.columns = vec![TableAliasColumnDef::from_name(alias.name.value.clone())];
    }
}

fn rewrite_factor(factor: &mut TableFactor) {
    match factor {
        TableFactor::UNNEST {
            alias,
            array_exprs,
            with_offset: false,
            ..
        } if array_exprs.len() == 1 => name_column(alias),
        TableFactor::Table {
            name,
            args: Some(args),
            alias,
            ..
        } => {
            let Some(function) = function_name(name) else {
                return;
            };
            let array_function = match function.as_str() {
                "string_to_table" => Some("string_to_array"),
                "regexp_split_to_table" => Some("regexp_split_to_array"),
                _ => None,
            };
            if let Some(array_function) = array_function
                && args.args.len() == 2
            {
                let values: Vec<Expr> = args
                    .args
                    .iter()
                    .filter_map(|a| match a {
                        FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)) => {
                            Some(e.clone())
                        }
                        _ => None,
                    })
                    .collect();
                if values.len() != 2 {
                    return;
                }
                let mut alias = alias.take();
                name_column(&mut alias);
                *factor = TableFactor::UNNEST {
                    alias,
                    array_exprs: vec![call(array_function, values)],
                    with_offset: false,
                    with_offset_alias: None,
                    with_ordinality: false,
                };
            } else if ONE_COLUMN_SETS.contains(&function.as_str()) {
                name_column(alias);
            } else if VALUES_IN_FROM.contains(&function.as_str()) {
                let column = alias
                    .as_ref()
                    .and_then(|a| a.columns.first().map(|c| c.name.clone()))
                    .or_else(|| alias.as_ref().map(|a| a.name.clone()))
                    .unwrap_or_else(|| Ident::new(function.clone()));
                let value = Expr::Function(sqlparser::ast::Function {
                    name: name.clone(),
                    uses_odbc_syntax: false,
                    parameters: sqlparser::ast::FunctionArguments::None,
                    args: sqlparser::ast::FunctionArguments::List(
                        sqlparser::ast::FunctionArgumentList {
                            duplicate_treatment: None,
                            args: args.args.clone(),
                            clauses: Vec::new(),
                        },
                    ),
                    filter: None,
                    null_treatment: None,
                    over: None,
                    within_group: Vec::new(),
                });
                let relation = alias.take().map_or_else(
                    || TableAlias {
                        explicit: true,
                        name: Ident::new(function.clone()),
                        columns: Vec::new(),
                        at: None,
                    },
                    |a| TableAlias {
                        columns: Vec::new(),
                        ..a
                    },
                );
                *factor = TableFactor::Derived {
                    lateral: false,
                    subquery: Box::new(select_with(vec![SelectItem::ExprWithAlias {
                        expr: value,
                        alias: column,
                    }])),
                    alias: Some(relation),
                    sample: None,
                };
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> String {
        let mut statement = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        rewrite(&mut statement);
        statement.to_string()
    }

    #[test]
    fn grafanas_search_path_query() {
        assert_eq!(
            rewritten(
                "SELECT s[i] FROM generate_series(1, 2) AS i, \
                 string_to_array(current_setting('search_path'), ',') s"
            ),
            "SELECT s[i] FROM generate_series(1, 2) AS i (i), \
             (SELECT string_to_array(current_setting('search_path'), ',') AS s) s"
        );
    }

    #[test]
    fn sets_of_one_column_are_named_by_their_alias() {
        assert_eq!(
            rewritten("SELECT x FROM unnest(make_array(1, 2)) AS x"),
            "SELECT x FROM UNNEST(make_array(1, 2)) AS x (x)"
        );
        assert_eq!(
            rewritten("SELECT w FROM string_to_table('a,b', ',') w"),
            "SELECT w FROM UNNEST(string_to_array('a,b', ',')) w (w)"
        );
        let listed = "SELECT n FROM generate_series(1, 2) AS g (n)";
        assert_eq!(rewritten(listed), listed);
        let plain = "SELECT * FROM generate_series(1, 2)";
        assert_eq!(rewritten(plain), plain);
    }
}
