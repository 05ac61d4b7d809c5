//! QuestDB's meta table functions (`tables()`, `table_columns('t')`, `wal_tables()`,
//! `table_partitions('t')`) name their columns in camelCase (`partitionBy`,
//! `designatedTimestamp`), and QuestDB matches names without regard to case, so tools write
//! them unquoted: `select table_name, partitionBy from tables()`. SQL folds unquoted names to
//! lower case, which would miss them; so in a statement that selects from one of these
//! functions, an unquoted name equal to one of their columns but for case becomes that
//! column, quoted. Statements over tables only are left alone: their columns are stored as
//! written and matched as SQL matches them.

use std::ops::ControlFlow;

use sqlparser::ast::{Expr, Ident, Statement, TableFactor, Visit, Visitor, visit_expressions_mut};

/// The table functions whose columns are matched without regard to case.
const META_FUNCTIONS: [&str; 4] = ["tables", "table_columns", "wal_tables", "table_partitions"];

/// Their columns with an upper-case letter, as they are named.
const META_COLUMNS: [&str; 26] = [
    // tables()
    "designatedTimestamp",
    "partitionBy",
    "walEnabled",
    "ttlValue",
    "ttlUnit",
    "matView",
    "directoryName",
    "maxUncommittedRows",
    "o3MaxLag",
    // table_columns()
    "indexBlockCapacity",
    "symbolCached",
    "symbolCapacity",
    "symbolTableSize",
    "upsertKey",
    // wal_tables()
    "writerTxn",
    "bufferedTxnSize",
    "sequencerTxn",
    "errorTag",
    "errorMessage",
    "memoryPressure",
    // table_partitions()
    "minTimestamp",
    "maxTimestamp",
    "numRows",
    "diskSize",
    "isParquet",
    "parquetFileSize",
];

/// Quotes the meta functions' camelCase columns where `statement` selects from one of them
/// (see the module's docs).
pub(crate) fn quote_meta_columns(statement: &mut Statement) {
    if !selects_from_meta_function(statement) {
        return;
    }
    let _ = visit_expressions_mut(statement, |expr| {
        match expr {
            Expr::Identifier(ident) => canonical(ident),
            Expr::CompoundIdentifier(parts) => {
                if let Some(last) = parts.last_mut() {
                    canonical(last);
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
}

fn canonical(ident: &mut Ident) {
    if ident.quote_style.is_some() {
        return;
    }
    if let Some(name) = META_COLUMNS
        .iter()
        .find(|c| c.eq_ignore_ascii_case(&ident.value))
    {
        ident.value = (*name).to_string();
        ident.quote_style = Some('"');
    }
}

fn selects_from_meta_function(statement: &Statement) -> bool {
    struct Finder(bool);
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table {
                name,
                args: Some(_),
                ..
            } = factor
                && let Some(last) = name.0.last().and_then(|p| p.as_ident())
                && META_FUNCTIONS
                    .iter()
                    .any(|f| f.eq_ignore_ascii_case(&last.value))
            {
                self.0 = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut finder = Finder(false);
    let _ = statement.visit(&mut finder);
    finder.0
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
        quote_meta_columns(&mut statement);
        statement.to_string()
    }

    #[test]
    fn camel_case_columns_of_meta_functions_are_quoted() {
        assert_eq!(
            rewritten(
                "select table_name, partitionBy, designatedtimestamp from tables() t where t.walenabled"
            ),
            "SELECT table_name, \"partitionBy\", \"designatedTimestamp\" FROM tables() t WHERE t.\"walEnabled\""
        );
        assert_eq!(
            rewritten("SELECT \"column\", upsertkey FROM table_columns('cpu')"),
            "SELECT \"column\", \"upsertKey\" FROM table_columns('cpu')"
        );
    }

    #[test]
    fn tables_and_quoted_names_are_left_alone() {
        let sql = "SELECT partitionBy FROM tables";
        assert_eq!(rewritten(sql), sql);
        let sql = "SELECT \"partitionby\" FROM tables()";
        assert_eq!(rewritten(sql), sql);
    }
}
