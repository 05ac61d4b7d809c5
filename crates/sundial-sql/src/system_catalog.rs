//! What the PostgreSQL rewrites (`compat`, `empty`) need to know of the system catalog the
//! engine serves: the one seam between the dialect and `sundial-pgcatalog`.

/// What the rewrites need to know of the PostgreSQL system catalog the engine serves.
pub trait SystemCatalog {
    /// Whether `name` (unqualified) is a relation of `pg_catalog`.
    fn is_catalog_relation(&self, name: &str) -> bool;
    /// Whether `name` is a `pg_catalog` relation that never has rows.
    fn is_always_empty(&self, name: &str) -> bool;
    /// The PostgreSQL type (`pg_type.typname`) of column `column` (case-folded) of `pg_catalog`
    /// relation `relation`.
    fn column_type(&self, relation: &str, column: &str) -> Option<&'static str>;
    /// The PostgreSQL type (`typname`) function `name` (lower case) returns, when that does not
    /// depend on its arguments.
    fn function_type(&self, name: &str) -> Option<&'static str>;
    /// The `typname` of the PostgreSQL type SQL type `sql` spells (`INTEGER` is `int4`,
    /// `pg_catalog.regclass` is `regclass`, `TEXT[]` is `_text`). Only types the engine plans
    /// when written as [`crate::names::PG_TYPE_QUALIFIER`]`.<typname>` are given.
    fn type_name(&self, sql: &str) -> Option<&'static str>;
    /// The canonical spelling of setting `name`, if the catalog has it.
    fn setting_name(&self, name: &str) -> Option<&'static str>;
}
