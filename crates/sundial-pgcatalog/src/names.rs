//! What the dialect's PostgreSQL rewrites ask of the catalog ([`Names`], Sundial's
//! `sundial_sql::SystemCatalog`): which relations `pg_catalog` has and which never have rows,
//! the PostgreSQL types of their columns and of functions, and the canonical spelling of
//! settings and types.
//!
//! The rewrites ask before anything is planned, with no session at hand, so everything here is
//! a fixed fact: the relations and types are constants, and the functions' result types are
//! declared once, by the first [`crate::register`] (every registration declares the same).

use std::sync::OnceLock;

use crate::types::{pg_type, plannable, type_oid_by_name};
use crate::{relation, setting_name};

/// `(name, PostgreSQL result type)` of the catalog's functions (see the module docs).
static FUNCTIONS: OnceLock<Vec<(&'static str, i32)>> = OnceLock::new();

/// Declares the result types of the catalog's functions, unless declared already.
pub(crate) fn declare_functions(functions: impl FnOnce() -> Vec<(&'static str, i32)>) {
    let _ = FUNCTIONS.get_or_init(functions);
}

/// PostgreSQL's result types of the engine's own (DataFusion's) functions that PostgreSQL
/// tools call in catalog statements, where those do not depend on the arguments.
#[rustfmt::skip]
const BUILTINS: &[(&str, &str)] = &[
    ("array_to_string", "text"), ("string_agg", "text"), ("concat", "text"),
    ("concat_ws", "text"), ("lower", "text"), ("upper", "text"), ("btrim", "text"),
    ("ltrim", "text"), ("rtrim", "text"), ("replace", "text"), ("substr", "text"),
    ("left", "text"), ("right", "text"), ("lpad", "text"), ("rpad", "text"),
    ("repeat", "text"), ("translate", "text"), ("regexp_replace", "text"),
    ("split_part", "text"), ("initcap", "text"), ("md5", "text"), ("to_char", "text"),
    ("count", "int8"), ("length", "int4"), ("char_length", "int4"),
    ("character_length", "int4"), ("octet_length", "int4"), ("strpos", "int4"),
    ("array_length", "int4"), ("bool_and", "bool"), ("bool_or", "bool"),
    ("starts_with", "bool"), ("now", "timestamptz"),
];

/// The `typname` of type `oid`, if the engine plans it (see [`crate::PgTypePlanner`]).
fn plannable_name(oid: i32) -> Option<&'static str> {
    pg_type(oid).filter(|t| plannable(t.oid)).map(|t| t.name)
}

/// The catalog's names, as the PostgreSQL rewrites of the dialect ask for them.
#[derive(Debug, Clone, Copy)]
pub struct Names;

impl sundial_sql::compat::SystemCatalog for Names {
    /// Whether `name` is a `pg_catalog` relation, so an unqualified reference means it
    /// (PostgreSQL searches `pg_catalog` before any other schema).
    fn is_catalog_relation(&self, name: &str) -> bool {
        relation(name).is_some()
    }

    fn is_always_empty(&self, name: &str) -> bool {
        relation(name).is_some_and(|r| r.rows.is_none())
    }

    fn column_type(&self, relation_name: &str, column: &str) -> Option<&'static str> {
        let (_, ty, _) = relation(relation_name)?
            .cols
            .iter()
            .find(|(name, _, _)| *name == column)?;
        plannable_name(ty.pg_oid())
    }

    fn function_type(&self, name: &str) -> Option<&'static str> {
        let declared = FUNCTIONS
            .get()
            .and_then(|fns| fns.iter().find(|(n, _)| *n == name))
            .map(|(_, oid)| *oid);
        match declared {
            Some(oid) => plannable_name(oid),
            None => BUILTINS
                .iter()
                .find(|(n, _)| *n == name)
                .and_then(|(_, t)| self.type_name(t)),
        }
    }

    fn type_name(&self, sql: &str) -> Option<&'static str> {
        plannable_name(type_oid_by_name(sql)?)
    }

    fn setting_name(&self, name: &str) -> Option<&'static str> {
        setting_name(name)
    }
}

#[cfg(test)]
mod tests {
    use sundial_sql::compat::SystemCatalog;

    use super::*;

    #[test]
    fn columns_functions_and_types_have_postgres_types() {
        assert_eq!(Names.column_type("pg_policy", "polname"), Some("name"));
        assert_eq!(Names.column_type("pg_index", "indkey"), Some("int2vector"));
        assert_eq!(Names.column_type("pg_policy", "nope"), None);
        assert_eq!(Names.function_type("array_to_string"), Some("text"));
        assert_eq!(Names.type_name("INTEGER"), Some("int4"));
        assert_eq!(Names.type_name("pg_catalog.regclass"), Some("regclass"));
        assert_eq!(Names.type_name("TEXT[]"), Some("_text"));
        assert_eq!(Names.type_name("_name"), Some("_name"));
        assert_eq!(Names.type_name("\"char\""), Some("char"));
        assert_eq!(Names.type_name("_name[]"), None);
    }
}
