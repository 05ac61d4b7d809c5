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
//! `timestamp` is the index of the designated timestamp in the result, or -1: the engine names
//! the column when a plain SELECT keeps its table's designated timestamp (the rule is in
//! `Prepared::designated_timestamp`), and the result must have a TIMESTAMP column of that name.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use axum::body::Body;
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sundial_query::Caller;
use tokio::time::Instant;

use crate::HttpSql;
use crate::error::Error;
use crate::json::{CONTENT_TYPE, JsonColumns, write_columns, write_json_string};
use crate::query::{Client, Encoder, Request, Started, Tail, start};

/// QuestDB's boolean parameters: `true` (any case) is true.
pub(crate) fn flag(params: &HashMap<String, String>, name: &str) -> bool {
    params
        .get(name)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

pub(crate) async fn exec(
    State(http): State<Arc<HttpSql>>,
    Client(client): Client,
    Extension(caller): Extension<Caller>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let started = Instant::now();
    let query = params.get("query").cloned().unwrap_or_default();
    answer(&http, &params, &headers, &query, (started, client, caller))
        .await
        .unwrap_or_else(|e| e.query_response(&query))
}

async fn answer(
    http: &HttpSql,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
    query: &str,
    (started, client, caller): (Instant, Option<std::net::SocketAddr>, Caller),
) -> Result<Response, Error> {
    let default_timeout_ms = http.options.statement_timeout_ms;
    let request = Request {
        count_all: flag(params, "count"),
        client,
        ..Request::from_params(
            query,
            params,
            headers,
            default_timeout_ms,
            true,
            started,
            caller,
        )?
    };
    let encoder = JsonAnswer {
        query: query.to_string(),
        with_meta: !flag(params, "nm"),
        timings: flag(params, "timings"),
        explain: flag(params, "explain"),
        rows_written: 0,
    };
    let running = start(http.engine.clone(), request, encoder);
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
    with_meta: bool,
    timings: bool,
    explain: bool,
    rows_written: u64,
}

impl Encoder for JsonAnswer {
    fn head(&mut self, schema: &SchemaRef, timestamp: Option<&str>, out: &mut Vec<u8>) {
        if !self.with_meta {
            out.extend_from_slice(b"{\"dataset\":[");
            return;
        }
        out.extend_from_slice(b"{\"query\":");
        write_json_string(out, &self.query);
        out.extend_from_slice(b",\"columns\":[");
        write_columns(out, schema);
        let index = designated_timestamp_index(timestamp, schema);
        out.extend_from_slice(format!("],\"timestamp\":{index},\"dataset\":[").as_bytes());
    }

    fn rows(&mut self, batch: &RecordBatch, rows: std::ops::Range<usize>, out: &mut Vec<u8>) {
        let mut columns = JsonColumns::new(batch);
        for row in rows {
            if self.rows_written > 0 {
                out.push(b',');
            }
            columns.write_row(out, row);
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

/// The index of the designated timestamp column `ts` in the result, or -1 (the rule is in
/// the module's documentation).
pub(crate) fn designated_timestamp_index(ts: Option<&str>, schema: &SchemaRef) -> i64 {
    let Some(ts) = ts else {
        return -1;
    };
    schema
        .fields()
        .iter()
        .position(|f| {
            f.name().eq_ignore_ascii_case(ts) && matches!(f.data_type(), DataType::Timestamp(..))
        })
        .map_or(-1, |i| i as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema, TimeUnit};

    #[test]
    fn timestamp_index_is_the_named_timestamp_column() {
        let ts = DataType::Timestamp(TimeUnit::Nanosecond, None);
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("sym", DataType::Utf8, true),
            Field::new("TS", ts, true),
            Field::new("n", DataType::Int64, true),
        ]));
        assert_eq!(designated_timestamp_index(Some("ts"), &schema), 1);
        assert_eq!(designated_timestamp_index(Some("n"), &schema), -1);
        assert_eq!(designated_timestamp_index(Some("x"), &schema), -1);
        assert_eq!(designated_timestamp_index(None, &schema), -1);
    }
}
