//! Which column of a result is its table's designated timestamp, as QuestDB's answers say
//! (`"timestamp"` in `/exec`).
//!
//! The rule, cheap and conservative: the statement is one `SELECT` (no CTE, set operation,
//! join, GROUP BY, DISTINCT or QuestDB clause) from one table that has a designated timestamp;
//! the select list names that column plainly (or `*`); and it is not ordered by anything but
//! that column ascending. QuestDB knows more cases (SAMPLE BY, some joins).

use datafusion::sql::sqlparser::ast::{
    Expr, GroupByExpr, ObjectNamePart, OrderByKind, SelectItem, SetExpr, Statement, TableFactor,
};
use sundial_storage::Database;

/// The designated timestamp column's name when `statement` is a plain select from one table
/// that keeps it.
pub(crate) fn designated_timestamp(db: &Database, statement: &Statement) -> Option<String> {
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
    let meta = db.table(&table_name)?.meta();
    let ts = meta.timestamp_column()?.name.clone();
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
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    use sundial_storage::{ColumnType, PartitionBy, StorageOptions, TableDef};

    #[test]
    fn plain_selects_keep_the_designated_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), StorageOptions::default()).unwrap();
        db.create_table(
            TableDef {
                name: "trades".into(),
                columns: vec![
                    ("sym".into(), ColumnType::Symbol),
                    ("ts".into(), ColumnType::Timestamp),
                ],
                timestamp: Some("ts".into()),
                partition_by: PartitionBy::Day,
                indexed: Vec::new(),
            },
            false,
        )
        .unwrap();
        let ts = |sql: &str| {
            let statement = Parser::parse_sql(&GenericDialect {}, sql)
                .unwrap()
                .remove(0);
            designated_timestamp(&db, &statement)
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
