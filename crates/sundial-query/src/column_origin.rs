//! Where each result column comes from, as PostgreSQL's RowDescription tells it: the table's
//! OID and the column's number (`pg_attribute.attnum`), for a result column that is a column
//! of a Sundial table, named as it is or renamed (`SELECT v AS x`), through filters, sorts,
//! limits, subquery aliases, joins and GROUP BY (a grouping column); 0 and 0 for anything
//! computed. pgjdbc's
//! `ResultSetMetaData.getTableName` and DBeaver's editable results read them.
//!
//! They are found on the logical plan a statement is prepared with and written on the
//! prepared statement's result schema only (field metadata [`TABLE_OID_KEY`],
//! [`ATTNUM_KEY`]), never on the plan: DataFusion checks that fields keep their metadata
//! between the logical and the physical plan. Values are those of `sundial_pgcatalog`'s
//! `pg_class` and `pg_attribute` (`table_oid`, columns numbered from 1 in table order).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::common::JoinType;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Expr, LogicalPlan};

use crate::provider::SundialTable;

/// Field metadata: the OID of the table a result column comes from.
pub const TABLE_OID_KEY: &str = "sundial.pg.table_oid";
/// Field metadata: that column's number in its table, from 1.
pub const ATTNUM_KEY: &str = "sundial.pg.attnum";

/// Plan nodes followed down from a result column: plans are bounded by the statement's
/// bounds, this bounds the walk whatever they are.
const DEPTH_MAX: usize = 256;

/// `schema` (the result schema of `plan`) with each column's origin written on it, where it
/// has one.
pub(crate) fn annotated(plan: &LogicalPlan, schema: Schema) -> Arc<Schema> {
    let origins: Vec<Option<(i32, i16)>> = (0..schema.fields().len())
        .map(|i| origin(plan, i, 0))
        .collect();
    if origins.iter().all(Option::is_none) {
        return Arc::new(schema);
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .zip(origins)
        .map(|(field, origin)| match origin {
            None => field.as_ref().clone(),
            Some((oid, attnum)) => {
                let mut metadata: HashMap<String, String> = field.metadata().clone();
                metadata.insert(TABLE_OID_KEY.into(), oid.to_string());
                metadata.insert(ATTNUM_KEY.into(), attnum.to_string());
                field.as_ref().clone().with_metadata(metadata)
            }
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The (table OID, attnum) output column `index` of `plan` reads unchanged, if any.
fn origin(plan: &LogicalPlan, index: usize, depth: usize) -> Option<(i32, i16)> {
    if depth > DEPTH_MAX {
        return None;
    }
    let below = |input: &LogicalPlan, i: usize| origin(input, i, depth + 1);
    match plan {
        LogicalPlan::Projection(p) => {
            let column = match p.expr.get(index)? {
                Expr::Column(c) => c,
                Expr::Alias(a) => match a.expr.as_ref() {
                    Expr::Column(c) => c,
                    _ => return None,
                },
                _ => return None,
            };
            let at = p.input.schema().index_of_column(column).ok()?;
            below(&p.input, at)
        }
        // A grouping column is its input's column (aggregates, after it, have no origin).
        LogicalPlan::Aggregate(a) if a.group_expr.len() == a.group_expr_len().unwrap_or(0) => {
            let Expr::Column(column) = a.group_expr.get(index)? else {
                return None;
            };
            let at = a.input.schema().index_of_column(column).ok()?;
            below(&a.input, at)
        }
        LogicalPlan::Filter(f) => below(&f.input, index),
        LogicalPlan::Sort(s) => below(&s.input, index),
        LogicalPlan::Limit(l) => below(&l.input, index),
        LogicalPlan::SubqueryAlias(s) => below(&s.input, index),
        LogicalPlan::Join(j) if is_concatenating(j.join_type) => {
            let left = j.left.schema().fields().len();
            if index < left {
                below(&j.left, index)
            } else {
                below(&j.right, index - left)
            }
        }
        LogicalPlan::TableScan(scan) => {
            let provider = source_as_provider(&scan.source).ok()?;
            let table = provider.downcast_ref::<SundialTable>()?;
            let column = match &scan.projection {
                Some(projection) => *projection.get(index)?,
                None => index,
            };
            let meta = table.planned_meta();
            if column >= meta.columns.len() {
                return None;
            }
            let attnum = i16::try_from(column + 1).ok()?;
            Some((sundial_pgcatalog::table_oid(&meta.name), attnum))
        }
        _ => None,
    }
}

/// Whether a join's output is its left side's columns, then its right side's.
fn is_concatenating(join_type: JoinType) -> bool {
    matches!(
        join_type,
        JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full
    )
}

/// The origin written on `field` by [`annotated`]: (table OID, attnum), or (0, 0).
pub fn of_field(field: &Field) -> (i32, i16) {
    let metadata = field.metadata();
    let oid = metadata.get(TABLE_OID_KEY).and_then(|v| v.parse().ok());
    let attnum = metadata.get(ATTNUM_KEY).and_then(|v| v.parse().ok());
    match (oid, attnum) {
        (Some(oid), Some(attnum)) => (oid, attnum),
        _ => (0, 0),
    }
}
