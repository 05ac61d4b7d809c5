//! Select lists that repeat a column beside a wildcard: `SELECT n.oid, n.* FROM pg_namespace n`,
//! as DBeaver sends for every catalog it reads. PostgreSQL returns `oid` twice; DataFusion
//! refuses two output columns of the same qualified name ("projections require unique
//! expression names").
//!
//! ```text
//!  SELECT n.oid, n.*  ─▶  SELECT n.oid AS "__sundial_repeat__oid", n.*     (here, before planning)
//!                     ─▶  ... the engine's final projection names it `oid` again, under a
//!                         qualifier of its own (sundial_query's `repeats`)
//! ```
//!
//! Only plain column items (`oid`, `n.oid`) of a SELECT that also has a wildcard are aliased:
//! only they can meet a column the wildcard brings in. The alias keeps the column's name after
//! [`REPEAT_PREFIX`], so the engine restores exactly the name PostgreSQL gives.

use sqlparser::ast::{Expr, Ident, SelectItem};

use crate::names::REPEAT_PREFIX;

/// Aliases the plain column items of `projection` when it also has a wildcard (see the module
/// docs). Items already aliased, and lists without a wildcard, are left as they are.
pub(crate) fn alias_beside_wildcards(projection: &mut [SelectItem]) {
    let wildcard = projection.iter().any(|item| {
        matches!(
            item,
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
        )
    });
    if !wildcard {
        return;
    }
    for item in projection.iter_mut() {
        let SelectItem::UnnamedExpr(expr) = item else {
            continue;
        };
        let ident = match expr {
            Expr::Identifier(ident) => ident,
            Expr::CompoundIdentifier(parts) => match parts.last() {
                Some(last) => last,
                None => continue,
            },
            _ => continue,
        };
        // DataFusion folds unquoted names to lower case; the restored name must be the one
        // the column has.
        let name = match ident.quote_style {
            None => ident.value.to_lowercase(),
            Some(_) => ident.value.clone(),
        };
        *item = SelectItem::ExprWithAlias {
            expr: expr.clone(),
            alias: Ident::with_quote('"', format!("{REPEAT_PREFIX}{name}")),
        };
    }
}

#[cfg(test)]
mod tests {
    use sqlparser::ast::{SetExpr, Statement};
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    use super::*;

    fn aliased(sql: &str) -> String {
        let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parses");
        let Statement::Query(query) = &mut statements[0] else {
            panic!("a query");
        };
        let SetExpr::Select(select) = query.body.as_mut() else {
            panic!("a select");
        };
        alias_beside_wildcards(&mut select.projection);
        statements[0].to_string()
    }

    #[test]
    fn columns_beside_a_wildcard_are_aliased_with_their_name() {
        assert_eq!(
            aliased("SELECT n.OID, n.*, d.description AS d FROM t n"),
            format!("SELECT n.OID AS \"{REPEAT_PREFIX}oid\", n.*, d.description AS d FROM t n")
        );
        assert_eq!(
            aliased("SELECT \"Oid\", * FROM t"),
            format!("SELECT \"Oid\" AS \"{REPEAT_PREFIX}Oid\", * FROM t")
        );
    }

    #[test]
    fn lists_without_a_wildcard_are_unchanged() {
        assert_eq!(
            aliased("SELECT n.oid, oid FROM t n"),
            "SELECT n.oid, oid FROM t n"
        );
    }
}
