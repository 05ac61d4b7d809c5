//! Which value of an `INSERT ... VALUES` could not become its column's type. DataFusion folds
//! the conversions of literals while planning and reports only `Cannot cast string 'abc' to
//! value of Float64 type`; [`locate`] finds the first literal with that text in the VALUES
//! rows, and names its column, its type and its position (`column 'temp': cannot store 'abc'
//! in a DOUBLE column at line 1, column 31`). Runs only on a failed statement: it parses the
//! text again.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use datafusion::sql::sqlparser::ast::{Expr, SetExpr, Spanned, Statement, TableObject, Value};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;
use sundial_storage::{ColumnType, Database};

use crate::error::QueryError;
use crate::messages::failed_value;

/// `error` with the failing VALUES literal located, when it is a conversion failure of one
/// (see the module docs); otherwise `error` unchanged.
pub(crate) fn locate(error: QueryError, sql: &str, db: &Database) -> QueryError {
    let QueryError::DataFusion { error: df, .. } = &error else {
        return error;
    };
    let Some(value) = conversion_failure(df) else {
        return error;
    };
    match find(sql, &value, db) {
        Some(bad) => bad,
        None => error,
    }
}

/// The text of the value a cast or a parse of a literal failed on.
fn conversion_failure(error: &DataFusionError) -> Option<String> {
    match error {
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            conversion_failure(inner)
        }
        DataFusionError::Shared(inner) => conversion_failure(inner),
        DataFusionError::ArrowError(e, _) => match e.as_ref() {
            ArrowError::CastError(m) | ArrowError::ParseError(m) => {
                failed_value(m).map(|(value, _)| value)
            }
            _ => None,
        },
        _ => None,
    }
}

fn find(sql: &str, value: &str, db: &Database) -> Option<QueryError> {
    let statements = Parser::parse_sql(&GenericDialect {}, sql).ok()?;
    let [Statement::Insert(insert)] = statements.as_slice() else {
        return None;
    };
    let TableObject::TableName(name) = &insert.table else {
        return None;
    };
    let table = db.table(&name.0.last()?.as_ident()?.value)?;
    let meta = table.meta();
    let columns: Vec<String> = if insert.columns.is_empty() {
        meta.columns.iter().map(|c| c.name.clone()).collect()
    } else {
        insert
            .columns
            .iter()
            .map(|c| {
                c.0.last()
                    .and_then(|p| p.as_ident())
                    .map(|i| i.value.clone())
            })
            .collect::<Option<_>>()?
    };
    let SetExpr::Values(values) = insert.source.as_ref()?.body.as_ref() else {
        return None;
    };
    for row in &values.rows {
        for (i, cell) in row.iter().enumerate() {
            let Expr::Value(v) = cell else { continue };
            let (Value::SingleQuotedString(s) | Value::DoubleQuotedString(s)) = &v.value else {
                continue;
            };
            if s != value {
                continue;
            }
            let column = columns.get(i)?;
            let column_type = meta.columns[meta.column_index(column)?].column_type;
            let start = cell.span().start;
            return Some(QueryError::BadValue {
                message: format!(
                    "column '{column}': cannot store '{value}' in a {} column",
                    column_type.name()
                ),
                position: (start.line > 0).then_some((start.line, start.column)),
                datetime: matches!(column_type, ColumnType::Timestamp | ColumnType::Date),
            });
        }
    }
    None
}
