//! `information_schema` as PostgreSQL 15 has it, for the views tools read: `tables`,
//! `columns`, `schemata`, `views`, `table_constraints`, `key_column_usage`. Each is a relation
//! like `pg_catalog`'s (a `Rel`: PostgreSQL's columns, rows computed at scan time), so its
//! columns carry PostgreSQL's types: information_schema's domains as PostgreSQL sends them
//! (`sql_identifier` as `name`, `character_data` and `yes_or_no` as `varchar`,
//! `cardinal_number` as `int4`). Other names (`df_settings`, `routines`, ...) are DataFusion's.
//!
//! ```text
//!  schema information_schema ─ tables, columns, ... ─▶ CatalogTable over RELATIONS here
//!                            └ others ──────────────▶ DataFusion's InformationSchemaProvider
//! ```
//!
//! Relations listed: Sundial's tables (schema `public`), `pg_catalog`'s relations and these
//! views themselves. `data_type` names PostgreSQL's types (`timestamp without time zone`,
//! `double precision`, `uuid`, `ARRAY`) and `udt_name` their `typname`: Grafana's query builder
//! picks time columns by `data_type`; DBeaver and others read `udt_name`.
//!
//! The engine turns DataFusion's own `information_schema` off and registers this one in its
//! catalog instead, so both resolve the same name the same way.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::information_schema::InformationSchemaProvider;
use datafusion::catalog::{CatalogProviderList, SchemaProvider, TableProvider};
use datafusion::common::Result as DfResult;

use crate::{
    Catalog, CatalogTable, D, DATABASE, NAMESPACES, PUBLIC_OID, RELATIONS, ROLE, Rel, Row, Ty, V,
    empty, format_type, pg_type, pg_type_of, schema_of, view,
};
use sundial_sql::names::SCHEMA;

/// `information_schema`'s namespace OID, as in `NAMESPACES`.
const INFORMATION_SCHEMA: &str = "information_schema";
/// Who owns `public` in PostgreSQL 15.
const PUBLIC_OWNER: &str = "pg_database_owner";
/// `character_octet_length` of an unbounded `text` or `varchar` (1 GB).
const UNBOUNDED_OCTETS: i64 = 1_073_741_824;

#[rustfmt::skip]
static VIEWS: &[Rel] = &[
    view("tables", 13100, cols![
        table_catalog: Name, table_schema: Name, table_name: Name, table_type: Varchar,
        self_referencing_column_name: Name, reference_generation: Varchar,
        user_defined_type_catalog: Name, user_defined_type_schema: Name,
        user_defined_type_name: Name, is_insertable_into: Varchar = D::S("YES"),
        is_typed: Varchar = D::S("NO"), commit_action: Varchar,
    ], tables),
    view("columns", 13101, cols![
        table_catalog: Name, table_schema: Name, table_name: Name, column_name: Name,
        ordinal_position: I4, column_default: Varchar, is_nullable: Varchar = D::S("YES"),
        data_type: Varchar, character_maximum_length: I4, character_octet_length: I4,
        numeric_precision: I4, numeric_precision_radix: I4, numeric_scale: I4,
        datetime_precision: I4, interval_type: Varchar, interval_precision: I4,
        character_set_catalog: Name, character_set_schema: Name, character_set_name: Name,
        collation_catalog: Name, collation_schema: Name, collation_name: Name,
        domain_catalog: Name, domain_schema: Name, domain_name: Name,
        udt_catalog: Name, udt_schema: Name = D::S("pg_catalog"), udt_name: Name,
        scope_catalog: Name, scope_schema: Name, scope_name: Name, maximum_cardinality: I4,
        dtd_identifier: Name, is_self_referencing: Varchar = D::S("NO"),
        is_identity: Varchar = D::S("NO"), identity_generation: Varchar,
        identity_start: Varchar, identity_increment: Varchar, identity_maximum: Varchar,
        identity_minimum: Varchar, identity_cycle: Varchar = D::S("NO"),
        is_generated: Varchar = D::S("NEVER"), generation_expression: Varchar,
        is_updatable: Varchar = D::S("YES"),
    ], columns),
    view("schemata", 13102, cols![
        catalog_name: Name, schema_name: Name, schema_owner: Name,
        default_character_set_catalog: Name, default_character_set_schema: Name,
        default_character_set_name: Name, sql_path: Varchar,
    ], schemata),
    view("views", 13103, cols![
        table_catalog: Name, table_schema: Name, table_name: Name, view_definition: Varchar,
        check_option: Varchar = D::S("NONE"), is_updatable: Varchar = D::S("NO"),
        is_insertable_into: Varchar = D::S("NO"), is_trigger_updatable: Varchar = D::S("NO"),
        is_trigger_deletable: Varchar = D::S("NO"),
        is_trigger_insertable_into: Varchar = D::S("NO"),
    ], views),
    // Sundial has no constraints: no primary, unique or foreign keys, no NOT NULL checks.
    empty("table_constraints", 13104, true, cols![
        constraint_catalog: Name, constraint_schema: Name, constraint_name: Name,
        table_catalog: Name, table_schema: Name, table_name: Name, constraint_type: Varchar,
        is_deferrable: Varchar, initially_deferred: Varchar, enforced: Varchar,
        nulls_distinct: Varchar,
    ]),
    empty("key_column_usage", 13105, true, cols![
        constraint_catalog: Name, constraint_schema: Name, constraint_name: Name,
        table_catalog: Name, table_schema: Name, table_name: Name, column_name: Name,
        ordinal_position: I4, position_in_unique_constraint: I4,
    ]),
    empty("referential_constraints", 13106, true, cols![
        constraint_catalog: Name, constraint_schema: Name, constraint_name: Name,
        unique_constraint_catalog: Name, unique_constraint_schema: Name,
        unique_constraint_name: Name, match_option: Varchar, update_rule: Varchar,
        delete_rule: Varchar,
    ]),
    empty("check_constraints", 13107, true, cols![
        constraint_catalog: Name, constraint_schema: Name, constraint_name: Name,
        check_clause: Varchar,
    ]),
];

fn view_named(name: &str) -> Option<&'static Rel> {
    VIEWS.iter().find(|r| r.name.eq_ignore_ascii_case(name))
}

/// One relation as information_schema lists it: `(schema, name, is a view, columns as
/// (name, PostgreSQL type OID))`.
type Listed = (&'static str, String, bool, Vec<(String, i32)>);

/// Every relation information_schema describes, Sundial's tables first.
fn relations(c: &Catalog) -> Vec<Listed> {
    let mut out: Vec<Listed> =
        c.db.tables()
            .iter()
            .map(|t| {
                let meta = t.meta();
                let cols = meta
                    .columns
                    .iter()
                    .map(|col| (col.name.clone(), pg_type_of(col.column_type).0))
                    .collect();
                let is_view = meta.kind == sundial_storage::TableKind::View;
                (SCHEMA, meta.name.clone(), is_view, cols)
            })
            .collect();
    let ours = |schema: &'static str, rels: &'static [Rel]| {
        rels.iter().map(move |r| {
            let cols = r
                .cols
                .iter()
                .map(|(name, ty, _)| ((*name).to_string(), ty.pg_oid()))
                .collect();
            (schema, r.name.to_string(), r.view, cols)
        })
    };
    out.extend(ours("pg_catalog", RELATIONS));
    out.extend(ours(INFORMATION_SCHEMA, VIEWS));
    out
}

fn tables(c: &Catalog) -> Vec<Row> {
    relations(c)
        .into_iter()
        .map(|(schema, name, is_view, _)| {
            let mut r = row!(
                table_catalog: DATABASE,
                table_schema: schema,
                table_name: name,
                table_type: if is_view { "VIEW" } else { "BASE TABLE" },
            );
            if is_view || schema != SCHEMA {
                r.push(("is_insertable_into", V::from("NO")));
            }
            r
        })
        .collect()
}

/// `(precision, radix, scale)` of a numeric PostgreSQL type.
fn numeric(type_oid: i32) -> Option<(i32, i32, Option<i32>)> {
    match type_oid {
        21 => Some((16, 2, Some(0))),
        23 => Some((32, 2, Some(0))),
        20 => Some((64, 2, Some(0))),
        700 => Some((24, 2, None)),
        701 => Some((53, 2, None)),
        _ => None,
    }
}

fn columns(c: &Catalog) -> Vec<Row> {
    let mut rows = Vec::new();
    for (schema, table, _, cols) in relations(c) {
        for (i, (name, type_oid)) in cols.into_iter().enumerate() {
            let t = pg_type(type_oid);
            let is_array = t.is_some_and(|t| t.category == 'A');
            let mut r = row!(
                table_catalog: DATABASE,
                table_schema: schema,
                table_name: table.clone(),
                column_name: name,
                ordinal_position: i as i32 + 1,
                data_type: if is_array { "ARRAY".to_string() } else { format_type(type_oid, None) },
                udt_catalog: DATABASE,
                udt_name: t.map_or("text", |t| t.name),
                dtd_identifier: (i + 1).to_string(),
            );
            if schema != SCHEMA {
                r.push(("is_updatable", V::from("NO")));
            }
            if matches!(type_oid, 25 | 1042 | 1043) {
                r.push(("character_octet_length", V::I(UNBOUNDED_OCTETS)));
            }
            if let Some((precision, radix, scale)) = numeric(type_oid) {
                r.push(("numeric_precision", V::from(precision)));
                r.push(("numeric_precision_radix", V::from(radix)));
                if let Some(scale) = scale {
                    r.push(("numeric_scale", V::from(scale)));
                }
            }
            match type_oid {
                1082 => r.push(("datetime_precision", V::from(0))),
                1083 | 1114 | 1184 | 1266 | 1186 => r.push(("datetime_precision", V::from(6))),
                _ => {}
            }
            rows.push(r);
        }
    }
    rows
}

fn schemata(_: &Catalog) -> Vec<Row> {
    NAMESPACES
        .iter()
        .map(|(oid, name)| {
            row!(
                catalog_name: DATABASE,
                schema_name: *name,
                schema_owner: if *oid == PUBLIC_OID { PUBLIC_OWNER } else { ROLE },
            )
        })
        .collect()
}

/// Sundial's views, with the query that defines each, then the catalog's own views.
/// (Materialized views store rows: PostgreSQL lists them in neither `tables` nor `views`;
/// Sundial lists them as base tables, which they are.)
fn views(c: &Catalog) -> Vec<Row> {
    let listed = |schema: &'static str, rels: &'static [Rel]| {
        rels.iter()
            .filter(|r| r.view)
            .map(move |r| row!(table_catalog: DATABASE, table_schema: schema, table_name: r.name))
    };
    let sundial = c.db.tables().into_iter().filter_map(|t| {
        let meta = t.meta();
        if meta.kind != sundial_storage::TableKind::View {
            return None;
        }
        let definition = match sundial_sql::parse(meta.definition.as_deref().unwrap_or_default()) {
            Ok(sundial_sql::Command::CreateView(v)) => v.query,
            _ => String::new(),
        };
        Some(row!(
            table_catalog: DATABASE,
            table_schema: SCHEMA,
            table_name: meta.name.clone(),
            view_definition: definition,
        ))
    });
    sundial
        .chain(listed("pg_catalog", RELATIONS))
        .chain(listed(INFORMATION_SCHEMA, VIEWS))
        .collect()
}

/// The schema `information_schema` (see the module's docs).
pub(crate) struct InformationSchema {
    inner: InformationSchemaProvider,
    catalog: Arc<Catalog>,
}

impl std::fmt::Debug for InformationSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InformationSchema")
    }
}

impl InformationSchema {
    pub(crate) fn new(
        catalogs: Arc<dyn CatalogProviderList>,
        catalog: Arc<Catalog>,
    ) -> InformationSchema {
        InformationSchema {
            inner: InformationSchemaProvider::new(catalogs),
            catalog,
        }
    }
}

#[async_trait]
impl SchemaProvider for InformationSchema {
    fn table_names(&self) -> Vec<String> {
        let mut names: Vec<String> = VIEWS.iter().map(|r| r.name.to_string()).collect();
        names.extend(
            self.inner
                .table_names()
                .into_iter()
                .filter(|n| view_named(n).is_none()),
        );
        names
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        if let Some(rel) = view_named(name) {
            return Ok(Some(Arc::new(CatalogTable {
                rel,
                schema: schema_of(rel.cols),
                catalog: self.catalog.clone(),
            })));
        }
        self.inner.table(name).await
    }

    fn table_exist(&self, name: &str) -> bool {
        view_named(name).is_some() || self.inner.table_exist(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_have_postgres_column_counts() {
        let count = |name: &str| view_named(name).map(|r| r.cols.len());
        assert_eq!(count("tables"), Some(12));
        assert_eq!(count("columns"), Some(44));
        assert_eq!(count("schemata"), Some(7));
        assert_eq!(count("table_constraints"), Some(11));
        assert_eq!(count("key_column_usage"), Some(9));
    }

    #[test]
    fn precision_is_postgres_bits() {
        assert_eq!(numeric(23), Some((32, 2, Some(0))));
        assert_eq!(numeric(701), Some((53, 2, None)));
        assert_eq!(numeric(1043), None);
    }
}
