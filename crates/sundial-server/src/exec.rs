//! `GET /exec`: SQL over HTTP with QuestDB's JSON answer, so QuestDB's tools and loaders that
//! poll it work unchanged.
//!
//! ```text
//!  GET /exec?query=..&limit=..&count=..&nm=.. ─▶ Engine::run ─▶ record batches ─▶ JSON chunks
//!  {"query":..,"columns":[{"name":..,"type":..}],"timestamp":-1,"dataset":[[..],..],"count":n}
//!  DDL and INSERT: {"ddl":"OK"} / {"dml":"OK"};  errors: 400 {"query":..,"error":..,"position":n}
//! ```
//!
//! The answer is streamed: `dataset` rows are written batch by batch, never gathered first.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{
    DataType, Date64Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    Schema, TimeUnit, TimestampNanosecondType,
};
use arrow::record_batch::RecordBatch;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use sundial_query::SendableRecordBatchStream;
use sundial_query::text::{Fraction, push_timestamp};
use sundial_query::{Engine, Output, QueryError};
use sundial_storage::{ColumnType, SUNDIAL_TYPE_KEY};

/// Rows `[first, end)` of the result to send, from QuestDB's `limit=n` (first n rows) or
/// `limit=m,n` (rows m through n, 1-based, inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RowRange {
    first: u64,
    end: u64,
}

impl RowRange {
    fn parse(limit: Option<&str>) -> Result<RowRange, String> {
        let Some(text) = limit else {
            return Ok(RowRange {
                first: 0,
                end: u64::MAX,
            });
        };
        let number = |s: &str| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| format!("bad limit '{text}': use n or m,n"))
        };
        match text.split_once(',') {
            None => Ok(RowRange {
                first: 0,
                end: number(text)?,
            }),
            Some((m, n)) => {
                let (m, n) = (number(m)?, number(n)?);
                Ok(RowRange {
                    first: m.saturating_sub(1),
                    end: n.max(m.saturating_sub(1)),
                })
            }
        }
    }
}

pub async fn exec(
    State(engine): State<Arc<Engine>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let Some(query) = params.get("query").cloned() else {
        return error(StatusCode::BAD_REQUEST, "", "missing 'query' parameter", 0);
    };
    let range = match RowRange::parse(params.get("limit").map(String::as_str)) {
        Ok(range) => range,
        Err(message) => return error(StatusCode::BAD_REQUEST, &query, &message, 0),
    };
    let with_count = params.get("count").is_none_or(|v| v != "false");
    let with_columns = params.get("nm").is_none_or(|v| v != "true");
    match engine.run(&query).await {
        Err(e) => query_error(&query, &e),
        Ok(Output::Done { tag, .. }) => {
            let kind = if tag.starts_with("INSERT") {
                "dml"
            } else {
                "ddl"
            };
            json(StatusCode::OK, format!(r#"{{"{kind}":"OK"}}"#))
        }
        Ok(Output::Rows(stream)) => {
            let schema = stream.schema();
            let mut head = Vec::with_capacity(256);
            head.extend_from_slice(b"{\"query\":");
            write_json_string(&mut head, &query);
            if with_columns {
                head.extend_from_slice(b",\"columns\":[");
                write_columns(&mut head, &schema);
                head.push(b']');
            }
            head.extend_from_slice(b",\"timestamp\":-1,\"dataset\":[");
            let body = dataset_chunks(stream, range, with_count, head);
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from_stream(body))
                .unwrap_or_else(|e| {
                    error(StatusCode::INTERNAL_SERVER_ERROR, &query, &e.to_string(), 0)
                })
        }
    }
}

/// Where the streamed answer stands.
struct Progress {
    stream: Option<SendableRecordBatchStream>,
    head: Option<Vec<u8>>,
    /// Rows of the result seen so far, sent or skipped.
    row: u64,
    /// Rows written to `dataset`.
    sent: u64,
    range: RowRange,
    with_count: bool,
}

/// Bytes gathered before a chunk is handed to the socket.
const CHUNK_BYTES: usize = 64 << 10;

/// The answer after its head: chunks of about [`CHUNK_BYTES`], then the closing `count`. An
/// error in the middle of the stream ends the dataset and is reported in an `error` member.
fn dataset_chunks(
    stream: SendableRecordBatchStream,
    range: RowRange,
    with_count: bool,
    head: Vec<u8>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    let progress = Progress {
        stream: Some(stream),
        head: Some(head),
        row: 0,
        sent: 0,
        range,
        with_count,
    };
    futures::stream::unfold(progress, next_chunk)
}

async fn next_chunk(mut p: Progress) -> Option<(Result<Bytes, std::io::Error>, Progress)> {
    let mut stream = p.stream.take()?;
    let mut out = p.head.take().unwrap_or_default();
    let mut failure = None;
    while p.row < p.range.end {
        match stream.next().await {
            None => break,
            Some(Err(e)) => {
                failure = Some(QueryError::from(e).to_string());
                break;
            }
            Some(Ok(batch)) => {
                write_rows(&mut out, &batch, &mut p);
                if out.len() >= CHUNK_BYTES {
                    p.stream = Some(stream);
                    return Some((Ok(Bytes::from(out)), p));
                }
            }
        }
    }
    // The dataset is complete (or failed): close the object. `p.stream` stays empty, which ends
    // the body after this chunk.
    out.push(b']');
    if p.with_count {
        out.extend_from_slice(format!(",\"count\":{}", p.sent).as_bytes());
    }
    if let Some(message) = failure {
        out.extend_from_slice(b",\"error\":");
        write_json_string(&mut out, &message);
    }
    out.push(b'}');
    Some((Ok(Bytes::from(out)), p))
}

fn write_rows(out: &mut Vec<u8>, batch: &RecordBatch, p: &mut Progress) {
    let rows = batch.num_rows() as u64;
    let start = p.range.first.saturating_sub(p.row).min(rows);
    let end = p.range.end.saturating_sub(p.row).min(rows);
    for row in start..end {
        if p.sent > 0 {
            out.push(b',');
        }
        out.push(b'[');
        for (i, column) in batch.columns().iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_json_value(out, column.as_ref(), row as usize);
        }
        out.push(b']');
        p.sent += 1;
    }
    p.row += rows;
}

/// `[{"name":..,"type":..},..]` with Sundial's type names (QuestDB's, upper case).
fn write_columns(out: &mut Vec<u8>, schema: &Schema) {
    for (i, field) in schema.fields().iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"name\":");
        write_json_string(out, field.name());
        out.extend_from_slice(b",\"type\":");
        let declared = field
            .metadata()
            .get(SUNDIAL_TYPE_KEY)
            .and_then(|t| ColumnType::parse(t));
        let name = declared
            .or_else(|| ColumnType::from_arrow(field.data_type()))
            .map_or_else(
                || field.data_type().to_string().to_uppercase(),
                |t| t.name().to_string(),
            );
        write_json_string(out, &name);
        out.push(b'}');
    }
}

/// One value as JSON: numbers and booleans bare, NULL and non-finite floats as `null`,
/// timestamps as ISO-8601 UTC text, everything else as a string.
fn write_json_value(out: &mut Vec<u8>, array: &dyn Array, row: usize) {
    use std::io::Write;
    if array.is_null(row) {
        out.extend_from_slice(b"null");
        return;
    }
    let float = |out: &mut Vec<u8>, v: f64| {
        if v.is_finite() {
            let _ = write!(out, "{v}");
        } else {
            out.extend_from_slice(b"null");
        }
    };
    match array.data_type() {
        DataType::Boolean => {
            let v = array.as_boolean().value(row);
            out.extend_from_slice(if v { b"true" } else { b"false" });
        }
        DataType::Int8 => write_int(out, array.as_primitive::<Int8Type>().value(row).into()),
        DataType::Int16 => write_int(out, array.as_primitive::<Int16Type>().value(row).into()),
        DataType::Int32 => write_int(out, array.as_primitive::<Int32Type>().value(row).into()),
        DataType::Int64 => write_int(out, array.as_primitive::<Int64Type>().value(row)),
        DataType::Float32 => float(out, array.as_primitive::<Float32Type>().value(row).into()),
        DataType::Float64 => float(out, array.as_primitive::<Float64Type>().value(row)),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            let ns = array.as_primitive::<TimestampNanosecondType>().value(row);
            out.push(b'"');
            push_timestamp(out, ns, b'T', Fraction::Fixed(6));
            out.push(b'Z');
            out.push(b'"');
        }
        DataType::Date64 => {
            let ms = array.as_primitive::<Date64Type>().value(row);
            out.push(b'"');
            push_timestamp(out, ms.saturating_mul(1_000_000), b'T', Fraction::Fixed(3));
            out.push(b'Z');
            out.push(b'"');
        }
        DataType::Utf8 => write_json_string(out, array.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => write_json_string(out, array.as_string::<i64>().value(row)),
        DataType::Utf8View => write_json_string(out, array.as_string_view().value(row)),
        DataType::Dictionary(key, value)
            if **key == DataType::Int32 && **value == DataType::Utf8 =>
        {
            let dict = array.as_dictionary::<Int32Type>();
            let key = dict.keys().value(row) as usize;
            write_json_string(out, dict.values().as_string::<i32>().value(key));
        }
        _ => {
            let text = arrow::util::display::array_value_to_string(array, row).unwrap_or_default();
            write_json_string(out, &text);
        }
    }
}

fn write_int(out: &mut Vec<u8>, v: i64) {
    use std::io::Write;
    let _ = write!(out, "{v}");
}

pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    use std::io::Write;
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

fn json(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn error(status: StatusCode, query: &str, message: &str, position: usize) -> Response {
    let mut body = Vec::with_capacity(message.len() + query.len() + 48);
    body.extend_from_slice(b"{\"query\":");
    write_json_string(&mut body, query);
    body.extend_from_slice(b",\"error\":");
    write_json_string(&mut body, message);
    body.extend_from_slice(format!(",\"position\":{position}}}").as_bytes());
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A failed statement: 400 (500 for a server fault) with the character offset its error
/// points at (0 when unknown).
fn query_error(query: &str, e: &QueryError) -> Response {
    let status = if e.is_user_error() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    error(
        status,
        query,
        &e.to_string(),
        e.char_offset(query).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_follow_questdb() {
        assert_eq!(
            RowRange::parse(Some("5")),
            Ok(RowRange { first: 0, end: 5 })
        );
        assert_eq!(
            RowRange::parse(Some("3,4")),
            Ok(RowRange { first: 2, end: 4 })
        );
        assert!(RowRange::parse(Some("x")).is_err());
    }

    #[test]
    fn error_offsets_count_characters() {
        let at = |line, column| QueryError::Syntax {
            message: String::new(),
            line,
            column,
        };
        assert_eq!(at(2, 3).char_offset("select\n  x"), Some(9));
        assert_eq!(at(1, 8).char_offset("sélect y"), Some(7));
    }
}
