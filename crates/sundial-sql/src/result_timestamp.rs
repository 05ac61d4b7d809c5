//! Which column of a result is its table's designated timestamp, as QuestDB's answers say
//! (`"timestamp"` in `/exec`).
//!
//! The rule, cheap and conservative: the statement is one `SELECT` (no CTE, set operation,
//! join, GROUP BY, DISTINCT or QuestDB clause) from one table that has a designated timestamp;
//! the select list names that column plainly (or `*`); and it is not ordered by anything but
//! that column ascending. QuestDB knows more cases (SAMPLE BY, some joins).

use sqlparser::ast::{
    Expr, GroupByExpr, ObjectNamePart, OrderByKind, SelectItem, SetExpr, Statement, TableFactor,
};

use crate::questdb::Catalog;

/// The designated timestamp column's name when `statement` is a plain select from one table
/// that keeps it.
pub fn designated_timestamp(catalog: &dyn Catalog, statement: &Statement) -> Option<String> {
    let Statement::Query(query) = statement else {
        return None;
    };
    if query.with.is_some() {
        return None;
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    if select.from.len() != 1
        || !select.from[0].joins.is_empty()
        || select.distinct.is_some()
        || select.having.is_some()
        || !matches!(&select.group_by, GroupByExpr::Expressions(e, _) if e.is_empty())
    {
        return None;
    }
    let TableFactor::Table {
        name, args: None, ..
    } = &select.from[0].relation
    else {
        return None;
    };
    let table_name = match name.0.last()? {
        ObjectNamePart::Identifier(ident) => ident.value.clone(),
        ObjectNamePart::Function(_) => return None,
    };
    let ts = catalog.designated_timestamp(&table_name)??;
    let names_ts = |e: &Expr| match e {
        Expr::Identifier(ident) => ident.value.eq_ignore_ascii_case(&ts),
        Expr::CompoundIdentifier(parts) => parts
            .last()
            .is_some_and(|ident| ident.value.eq_ignore_ascii_case(&ts)),
        _ => false,
    };
    let kept = select.projection.iter().any(|item| match item {
        SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => true,
        SelectItem::UnnamedExpr(e) => names_ts(e),
        SelectItem::ExprWithAlias { expr, alias } => {
            names_ts(expr) && alias.value.eq_ignore_ascii_case(&ts)
        }
        SelectItem::ExprWithAliases { .. } => false,
    });
    if !kept {
        return None;
    }
    if let Some(order_by) = &query.order_by {
        let OrderByKind::Expressions(keys) = &order_by.kind else {
            return None;
        };
        if let Some(key) = keys.first()
            && (!names_ts(&key.expr) || key.options.asc == Some(false))
        {
            return None;
        }
    }
    Some(ts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::GenericDialect;
    use sqlparser::parser::Parser;

    /// One table, `trades (sym SYMBOL, ts TIMESTAMP) TIMESTAMP(ts)`.
    struct Trades;

    impl Catalog for Trades {
        fn designated_timestamp(&self, table: &str) -> Option<Option<String>> {
            table
                .eq_ignore_ascii_case("trades")
                .then(|| Some("ts".to_string()))
        }

        fn is_aggregate(&self, function: &str) -> bool {
            function == "max"
        }

        fn is_symbol(&self, _table: &str, column: &str) -> bool {
            column == "sym"
        }
    }

    #[test]
    fn plain_selects_keep_the_designated_timestamp() {
        let ts = |sql: &str| {
            let statement = Parser::parse_sql(&GenericDialect {}, sql)
                .expect("parses")
                .remove(0);
            designated_timestamp(&Trades, &statement)
        };
        for sql in [
            "SELECT * FROM trades",
            "select sym, ts from Trades where sym = 'a' limit 3",
            "SELECT sym, ts FROM trades ORDER BY ts",
        ] {
            assert_eq!(ts(sql).as_deref(), Some("ts"), "{sql}");
        }
        for sql in [
            "SELECT sym, ts FROM trades ORDER BY ts DESC",
            "SELECT sym, ts FROM trades ORDER BY sym",
            "SELECT sym, max(ts) AS ts FROM trades GROUP BY sym",
            "SELECT sym, now() AS ts FROM trades",
            "SELECT a.sym, a.ts FROM trades a JOIN trades b ON a.ts = b.ts",
            "SELECT sym, ts FROM nope",
        ] {
            assert_eq!(ts(sql), None, "{sql}");
        }
    }
}
