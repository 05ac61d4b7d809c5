//! `GET /exec`: SQL with QuestDB's JSON answer.
//!
//! ```text
//!  GET /exec?query=..&limit=..&count=..&nm=..&timings=..&explain=..   [Statement-Timeout: ms]
//!  {"query":..,"columns":[{"name":..,"type":..}],"timestamp":i,"dataset":[[..],..],"count":n
//!   [,"timings":{"authentication":0,"compiler":ns,"execute":ns,"count":ns}]
//!   [,"explain":{"jitCompiled":false}]}
//!  nm=true: {"dataset":[..],"count":n}      DDL: {"ddl":"OK"}   INSERT: {"dml":"OK"}
//!  errors: 400 (500 for a server fault) {"query":..,"error":..,"position":n}
//! ```
//!
//! `count` is QuestDB's: the position of the last row sent (so `limit=11,20` gives 20), or
//! with `count=true` the number of rows of the whole result, read to its end for that.
//!
//! `timestamp` is the index of the designated timestamp in the result, or -1. The rule, cheap
//! and conservative: the statement is one `SELECT` (no CTE, set operation, join, GROUP BY or
//! DISTINCT) from one table that has a designated timestamp; the select list names that column
//! plainly (or `*`); it is not ordered by anything but that column ascending; and the result
//! has a TIMESTAMP column of that name. QuestDB knows more cases (SAMPLE BY, some joins).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use datafusion::sql::sqlparser::ast::{
    Expr, GroupByExpr, ObjectNamePart, OrderByKind, SelectItem, SetExpr, Statement, TableFactor,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;
use sundial_storage::Database;
use tokio::time::Instant;

use crate::HttpSql;
use crate::error::Error;
use crate::json::{CONTENT_TYPE, write_columns, write_json_string, write_json_value};
use crate::query::{Encoder, Request, Started, Tail, start};

/// QuestDB's boolean parameters: `true` (any case) is true.
pub(crate) fn flag(params: &HashMap<String, String>, name: &str) -> bool {
    params
        .get(name)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

pub(crate) async fn exec(
    State(http): State<Arc<HttpSql>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let started = Instant::now();
    let query = params.get("query").cloned().unwrap_or_default();
    answer(&http, &params, &headers, &query, started)
        .await
        .unwrap_or_else(|e| e.query_response(&query))
}

async fn answer(
    http: &HttpSql,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
    query: &str,
    started: Instant,
) -> Result<Response, Error> {
    let default_timeout_ms = http.options.statement_timeout_ms;
    let request = Request {
        count_all: flag(params, "count"),
        ..Request::from_params(query, params, headers, default_timeout_ms, true, started)?
    };
    let encoder = JsonAnswer {
        query: query.to_string(),
        db: http.engine.db().clone(),
        with_meta: !flag(params, "nm"),
        timings: flag(params, "timings"),
        explain: flag(params, "explain"),
        rows_written: 0,
    };
    let running = start(http.engine.clone(), &http.queries, request, encoder);
    match running.first().await? {
        Started::Done(tag) => {
            let kind = if tag.starts_with("INSERT") {
                "dml"
            } else {
                "ddl"
            };
            Ok((
                StatusCode::OK,
                [(header::CONTENT_TYPE, CONTENT_TYPE)],
                format!("{{\"{kind}\":\"OK\"}}"),
            )
                .into_response())
        }
        Started::Rows(body) => Ok(streamed(body)),
    }
}

fn streamed(body: Body) -> Response {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

/// QuestDB's JSON answer, written as the rows come.
struct JsonAnswer {
    query: String,
    db: Arc<Database>,
    with_meta: bool,
    timings: bool,
    explain: bool,
    rows_written: u64,
}

impl Encoder for JsonAnswer {
    fn head(&mut self, schema: &SchemaRef, out: &mut Vec<u8>) {
        if !self.with_meta {
            out.extend_from_slice(b"{\"dataset\":[");
            return;
        }
        out.extend_from_slice(b"{\"query\":");
        write_json_string(out, &self.query);
        out.extend_from_slice(b",\"columns\":[");
        write_columns(out, schema);
        let index = designated_timestamp_index(&self.db, &self.query, schema);
        out.extend_from_slice(format!("],\"timestamp\":{index},\"dataset\":[").as_bytes());
    }

    fn rows(&mut self, batch: &RecordBatch, rows: std::ops::Range<usize>, out: &mut Vec<u8>) {
        for row in rows {
            if self.rows_written > 0 {
                out.push(b',');
            }
            out.push(b'[');
            for (i, column) in batch.columns().iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json_value(out, column.as_ref(), row);
            }
            out.push(b']');
            self.rows_written += 1;
        }
    }

    fn tail(&mut self, tail: &Tail, failure: Option<&str>, out: &mut Vec<u8>) -> bool {
        out.extend_from_slice(format!("],\"count\":{}", tail.count).as_bytes());
        if let Some(message) = failure {
            out.extend_from_slice(b",\"error\":");
            write_json_string(out, message);
            out.extend_from_slice(b",\"errorPos\":0");
        }
        if self.timings {
            out.extend_from_slice(
                format!(
                    ",\"timings\":{{\"authentication\":0,\"compiler\":{},\"execute\":{},\"count\":{}}}",
                    tail.compiler_ns, tail.execute_ns, tail.count_ns
                )
                .as_bytes(),
            );
        }
        if self.explain {
            out.extend_from_slice(b",\"explain\":{\"jitCompiled\":false}");
        }
        out.push(b'}');
        true
    }
}

/// The index of the designated timestamp column in the result, or -1 (the rule is in the
/// module's documentation).
pub(crate) fn designated_timestamp_index(db: &Database, sql: &str, schema: &SchemaRef) -> i64 {
    let Some(ts) = plain_select_timestamp(db, sql) else {
        return -1;
    };
    schema
        .fields()
        .iter()
        .position(|f| {
            f.name().eq_ignore_ascii_case(&ts) && matches!(f.data_type(), DataType::Timestamp(..))
        })
        .map_or(-1, |i| i as i64)
}

/// The designated timestamp column's name when `sql` is a plain select from one table that
/// keeps it.
fn plain_select_timestamp(db: &Database, sql: &str) -> Option<String> {
    let mut statements = Parser::parse_sql(&GenericDialect {}, sql).ok()?;
    if statements.len() != 1 {
        return None;
    }
    let Statement::Query(query) = statements.pop()? else {
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
    use arrow::datatypes::{Field, Schema, TimeUnit};
    use sundial_storage::{ColumnType, PartitionBy, StorageOptions, TableDef};

    #[test]
    fn timestamp_index_rule() {
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
        let ts = DataType::Timestamp(TimeUnit::Nanosecond, None);
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("sym", DataType::Utf8, true),
            Field::new("ts", ts, true),
        ]));
        let index = |sql: &str| designated_timestamp_index(&db, sql, &schema);
        assert_eq!(index("SELECT * FROM trades"), 1);
        assert_eq!(
            index("select sym, ts from Trades where sym = 'a' limit 3"),
            1
        );
        assert_eq!(index("SELECT sym, ts FROM trades ORDER BY ts"), 1);
        assert_eq!(index("SELECT sym, ts FROM trades ORDER BY ts DESC"), -1);
        assert_eq!(index("SELECT sym, ts FROM trades ORDER BY sym"), -1);
        assert_eq!(
            index("SELECT sym, max(ts) AS ts FROM trades GROUP BY sym"),
            -1
        );
        assert_eq!(index("SELECT sym, now() AS ts FROM trades"), -1);
        assert_eq!(
            index("SELECT a.sym, a.ts FROM trades a JOIN trades b ON a.ts = b.ts"),
            -1
        );
        assert_eq!(index("SELECT sym, ts FROM nope"), -1);
        assert_eq!(index("SELEC"), -1);
    }
}
