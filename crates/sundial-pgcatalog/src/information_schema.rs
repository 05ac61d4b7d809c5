//! `information_schema` as PostgreSQL's tools read it: DataFusion's tables, except `columns`,
//! whose `data_type` names PostgreSQL's types (`timestamp without time zone`, `double
//! precision`, `character varying`, `ARRAY`) where DataFusion writes Arrow's (`Timestamp(ns)`,
//! `Float64`), and which adds PostgreSQL's `udt_name` (`timestamp`, `float8`, `_text`).
//! Grafana's query builder picks time columns by `data_type`; DBeaver and others read
//! `udt_name`.
//!
//! ```text
//!  schema information_schema ─ columns ─▶ Columns: every catalog, schema, table, field
//!                            └ others ──▶ DataFusion's InformationSchemaProvider
//! ```
//!
//! The engine turns DataFusion's own `information_schema` off and registers this one in its
//! catalog instead, so both resolve the same name the same way.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{RecordBatch, StringBuilder, UInt64Builder};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::information_schema::InformationSchemaProvider;
use datafusion::catalog::memory::MemorySourceConfig;
use datafusion::catalog::{CatalogProviderList, SchemaProvider, Session, TableProvider};
use datafusion::common::Result as DfResult;
use datafusion::datasource::TableType;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

/// The schema `information_schema` over `catalogs` (see the module's docs).
pub(crate) struct InformationSchema {
    inner: InformationSchemaProvider,
    catalogs: Arc<dyn CatalogProviderList>,
}

impl std::fmt::Debug for InformationSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InformationSchema")
    }
}

impl InformationSchema {
    pub(crate) fn new(catalogs: Arc<dyn CatalogProviderList>) -> InformationSchema {
        InformationSchema {
            inner: InformationSchemaProvider::new(catalogs.clone()),
            catalogs,
        }
    }
}

const COLUMNS: &str = "columns";

#[async_trait]
impl SchemaProvider for InformationSchema {
    fn table_names(&self) -> Vec<String> {
        self.inner.table_names()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        if name.eq_ignore_ascii_case(COLUMNS) {
            return Ok(Some(Arc::new(Columns {
                catalogs: self.catalogs.clone(),
                schema: columns_schema(),
            })));
        }
        self.inner.table(name).await
    }

    fn table_exist(&self, name: &str) -> bool {
        self.inner.table_exist(name)
    }
}

fn columns_schema() -> SchemaRef {
    let text = |name: &str, nullable: bool| Field::new(name, DataType::Utf8, nullable);
    let count = |name: &str| Field::new(name, DataType::UInt64, true);
    Arc::new(Schema::new(vec![
        text("table_catalog", false),
        text("table_schema", false),
        text("table_name", false),
        text("column_name", false),
        Field::new("ordinal_position", DataType::UInt64, false),
        text("column_default", true),
        text("is_nullable", false),
        text("data_type", false),
        count("character_maximum_length"),
        count("character_octet_length"),
        count("numeric_precision"),
        count("numeric_precision_radix"),
        count("numeric_scale"),
        count("datetime_precision"),
        text("interval_type", true),
        text("udt_name", false),
    ]))
}

/// `information_schema.columns`, computed when scanned.
#[derive(Debug)]
struct Columns {
    catalogs: Arc<dyn CatalogProviderList>,
    schema: SchemaRef,
}

/// PostgreSQL's `data_type` and `udt_name` for a column of Arrow type `data_type`.
fn pg_names(data_type: &DataType) -> (String, &'static str) {
    let (oid, udt_name, _) = crate::pg_type_for_arrow(data_type);
    let is_array = matches!(
        data_type,
        DataType::List(_)
            | DataType::LargeList(_)
            | DataType::ListView(_)
            | DataType::LargeListView(_)
            | DataType::FixedSizeList(..)
    );
    let name = if is_array {
        "ARRAY".to_string()
    } else {
        crate::format_type(oid, None)
    };
    (name, udt_name)
}

/// PostgreSQL's numeric precision, radix and scale of a column.
fn numeric(data_type: &DataType) -> (Option<u64>, Option<u64>, Option<u64>) {
    match data_type {
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => (Some(16), Some(2), Some(0)),
        DataType::Int32 | DataType::UInt16 => (Some(32), Some(2), Some(0)),
        DataType::Int64 | DataType::UInt32 => (Some(64), Some(2), Some(0)),
        DataType::Float16 | DataType::Float32 => (Some(24), Some(2), None),
        DataType::Float64 => (Some(53), Some(2), None),
        DataType::Decimal128(p, s) => (Some(u64::from(*p)), Some(10), u64::try_from(*s).ok()),
        _ => (None, None, None),
    }
}

#[async_trait]
impl TableProvider for Columns {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let mut text: Vec<StringBuilder> = (0..9).map(|_| StringBuilder::new()).collect();
        let mut counts: Vec<UInt64Builder> = (0..7).map(|_| UInt64Builder::new()).collect();
        for catalog_name in self.catalogs.catalog_names() {
            let Some(catalog) = self.catalogs.catalog(&catalog_name) else {
                continue;
            };
            for schema_name in catalog.schema_names() {
                let Some(schema) = catalog.schema(&schema_name) else {
                    continue;
                };
                for table_name in schema.table_names() {
                    let Some(table) = schema.table(&table_name).await? else {
                        continue;
                    };
                    for (i, field) in table.schema().fields().iter().enumerate() {
                        let data_type = field.data_type();
                        let (pg_name, udt_name) = pg_names(data_type);
                        let (precision, radix, scale) = numeric(data_type);
                        text[0].append_value(&catalog_name);
                        text[1].append_value(&schema_name);
                        text[2].append_value(&table_name);
                        text[3].append_value(field.name());
                        counts[0].append_value(i as u64 + 1);
                        text[4].append_null();
                        text[5].append_value(if field.is_nullable() { "YES" } else { "NO" });
                        text[6].append_value(pg_name);
                        counts[1].append_null();
                        counts[2].append_null();
                        counts[3].append_option(precision);
                        counts[4].append_option(radix);
                        counts[5].append_option(scale);
                        let datetime = matches!(data_type, DataType::Timestamp(..));
                        counts[6].append_option(datetime.then_some(6));
                        text[7].append_null();
                        text[8].append_value(udt_name);
                    }
                }
            }
        }
        let mut text = text.into_iter().map(|mut b| Arc::new(b.finish()) as _);
        let mut counts = counts.into_iter().map(|mut b| Arc::new(b.finish()) as _);
        let mut next_text = || text.next().expect("nine text columns");
        let mut next_count = || counts.next().expect("seven count columns");
        let columns = vec![
            next_text(),  // table_catalog
            next_text(),  // table_schema
            next_text(),  // table_name
            next_text(),  // column_name
            next_count(), // ordinal_position
            next_text(),  // column_default
            next_text(),  // is_nullable
            next_text(),  // data_type
            next_count(), // character_maximum_length
            next_count(), // character_octet_length
            next_count(), // numeric_precision
            next_count(), // numeric_precision_radix
            next_count(), // numeric_scale
            next_count(), // datetime_precision
            next_text(),  // interval_type
            next_text(),  // udt_name
        ];
        let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            self.schema.clone(),
            projection.cloned(),
        )?)
    }
}
