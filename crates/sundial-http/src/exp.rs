//! `GET /exp`: a query's result as a CSV download, streamed.
//!
//! ```text
//!  GET /exp?query=..&limit=..&nm=..&delimiter=..&filename=..   [Statement-Timeout: ms]
//!  200 text/csv, Content-Disposition: attachment; filename="questdb-query-<ms>.csv"
//!  "name","ts"\r\n"a","2016-01-01T00:00:00.000000Z"\r\n...       (csv_out has the rules)
//!  errors: 400 {"query":..,"error":..,"position":n}; statements without rows are refused
//! ```
//!
//! `limit=m,n` skips `m` rows and stops after row `n` (QuestDB's `/exp` counts `m` from 0,
//! unlike `/exec`). An error or a timeout once rows are on their way cuts the connection, so a
//! truncated file never looks complete.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sundial_query::Caller;
use tokio::time::Instant;

use crate::HttpSql;
use crate::csv_out::{EOL, bare_strings, write_header, write_value};
use crate::error::Error;
use crate::exec::flag;
use crate::query::{Client, Encoder, Request, Started, Tail, start};

pub(crate) async fn exp(
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
        select_only: true,
        client,
        ..Request::from_params(
            query,
            params,
            headers,
            default_timeout_ms,
            false,
            started,
            caller,
        )?
    };
    match params.get("fmt").map(|f| f.trim().to_ascii_lowercase()) {
        None => {}
        Some(f) if f.is_empty() || f == "csv" => {}
        Some(f) => {
            return Err(Error::BadRequest(format!(
                "unrecognised format [format={f}]; Sundial exports csv"
            )));
        }
    }
    let delimiter = match params.get("delimiter").map(String::as_bytes) {
        None | Some(b"") => b',',
        Some([d]) if d.is_ascii() && *d != b'"' && *d != b'\r' && *d != b'\n' => *d,
        Some(_) => {
            return Err(Error::BadRequest(
                "the delimiter must be one ASCII character".into(),
            ));
        }
    };
    let encoder = CsvAnswer {
        delimiter,
        header: !flag(params, "nm"),
        bare: Vec::new(),
    };
    let running = start(http.engine.clone(), request, encoder);
    let body = match running.first().await? {
        Started::Rows(body) => body,
        Started::Done(_) => return Err(Error::NotSelect),
    };
    let file_name = match params.get("filename").map(|f| f.trim()) {
        Some(name) if !name.is_empty() => format!("{}.csv", sanitize(name)),
        _ => {
            let millis = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            format!("questdb-query-{millis}.csv")
        }
    };
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file_name}\""),
            ),
        ],
        body,
    )
        .into_response())
}

/// A file name safe inside a quoted header value.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_control() || matches!(c, '"' | '\\' | '/') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

struct CsvAnswer {
    delimiter: u8,
    header: bool,
    /// Per column, whether strings go unquoted (UUIDs).
    bare: Vec<bool>,
}

impl Encoder for CsvAnswer {
    fn head(&mut self, schema: &SchemaRef, _timestamp: Option<&str>, out: &mut Vec<u8>) {
        self.bare = bare_strings(schema);
        if self.header {
            write_header(out, schema, self.delimiter);
        }
    }

    fn rows(&mut self, batch: &RecordBatch, rows: std::ops::Range<usize>, out: &mut Vec<u8>) {
        for row in rows {
            for (i, column) in batch.columns().iter().enumerate() {
                if i > 0 {
                    out.push(self.delimiter);
                }
                let bare = self.bare.get(i).copied().unwrap_or(false);
                write_value(out, column.as_ref(), row, bare);
            }
            out.extend_from_slice(EOL);
        }
    }

    fn tail(&mut self, _tail: &Tail, failure: Option<&str>, _out: &mut Vec<u8>) -> bool {
        if let Some(message) = failure {
            tracing::warn!("/exp stopped mid-answer: {message}");
        }
        failure.is_none()
    }
}
