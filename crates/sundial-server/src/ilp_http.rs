//! ILP over HTTP: `POST /write` and `/api/v2/write` (InfluxDB's API), and `/ping`.
//!
//! ```text
//!  request ─▶ blocking task: gunzip? ─▶ own Ingestor ─▶ table sinks ─▶ flush ─▶ 204 / 400 / 500
//! ```
//!
//! A request's ingestor commits only at its end (`commit_rows` unbounded), and the answer
//! comes after that commit: 204 means every line is committed; 400 means the good lines are
//! committed and names the first bad one.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sundial_http::json::write_json_string;
use sundial_ilp::{LineSpan, LineSplitter, Precision};
use sundial_ingest::{IngestOptions, IngestStats, Ingestor};

use crate::ilp::{Shared, Transport, now_ns};

/// `GET`/`HEAD /ping`: InfluxDB clients check the server is up.
pub(crate) async fn ping() -> StatusCode {
    StatusCode::NO_CONTENT
}

fn error_response(status: StatusCode, code: &str, message: &str, line: Option<usize>) -> Response {
    let mut body = Vec::with_capacity(message.len() + 48);
    body.extend_from_slice(b"{\"code\":");
    write_json_string(&mut body, code);
    body.extend_from_slice(b",\"message\":");
    write_json_string(&mut body, message);
    if let Some(line) = line {
        body.extend_from_slice(format!(",\"line\":{line}").as_bytes());
    }
    body.push(b'}');
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `POST /write` and `/api/v2/write`. Policy for bad lines (InfluxDB's): the good lines of the
/// request are committed, and the answer is 400 naming the first bad line and how many were bad.
pub(crate) async fn write(
    State(shared): State<Arc<Shared>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let precision = match params.get("precision").map(String::as_str) {
        None => Precision::Nanos,
        Some(p) => match Precision::parse(p) {
            Some(p) => p,
            None => {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    "invalid",
                    &format!("unknown precision '{p}'; use n, u, ms or s"),
                    None,
                );
            }
        },
    };
    let gzip = headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
    let limit = shared.http_body_bytes_max;
    let result = tokio::task::spawn_blocking(move || {
        if !gzip {
            return write_lines(&shared, &body, precision);
        }
        match gunzip(&body, limit) {
            Ok(body) => write_lines(&shared, &body, precision),
            Err(response) => *response,
        }
    })
    .await;
    result.unwrap_or_else(|e| {
        error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            &e.to_string(),
            None,
        )
    })
}

/// Decodes a gzip body of at most `limit` decoded bytes.
fn gunzip(body: &[u8], limit: usize) -> Result<Vec<u8>, Box<Response>> {
    let mut out = Vec::new();
    let mut decoder = std::io::Read::take(flate2::read::GzDecoder::new(body), limit as u64 + 1);
    if let Err(e) = std::io::Read::read_to_end(&mut decoder, &mut out) {
        return Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            "invalid",
            &format!("bad gzip body: {e}"),
            None,
        )));
    }
    if out.len() > limit {
        return Err(Box::new(error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            &format!("body over {limit} bytes"),
            None,
        )));
    }
    Ok(out)
}

fn write_lines(shared: &Shared, body: &[u8], precision: Precision) -> Response {
    let options = IngestOptions {
        commit_rows: usize::MAX,
        ..shared.ingest.clone()
    };
    let mut ingestor = Ingestor::with_sinks(shared.sinks.clone(), options);
    let mut first_error: Option<(usize, String)> = None;
    let mut rejected = 0usize;
    let now = now_ns();
    let mut splitter = LineSplitter::new(shared.ingest.line_bytes_max);
    splitter.split_final(body, |span| {
        let (range, error) = match span {
            LineSpan::Line(range) => {
                let error = ingestor
                    .ingest_line(&body[range.clone()], precision, now)
                    .err()
                    .map(|e| e.to_string());
                (range, error)
            }
            LineSpan::TooLong(range) => (
                range,
                Some(format!(
                    "line longer than {} bytes",
                    shared.ingest.line_bytes_max
                )),
            ),
        };
        if let Some(message) = error {
            rejected += 1;
            if first_error.is_none() {
                let line = 1 + body[..range.start].iter().filter(|b| **b == b'\n').count();
                first_error = Some((line, message));
            }
        }
    });
    let before = IngestStats::default();
    shared.count(Transport::Http, &ingestor, before);
    let flushed = ingestor.flush();
    shared.count_tables(Transport::Http, &mut ingestor);
    if let Err(e) = flushed {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            &format!("commit failed: {e}"),
            None,
        );
    }
    match first_error {
        None => StatusCode::NO_CONTENT.into_response(),
        Some((line, message)) => {
            let message = format!("{rejected} line(s) rejected; first at line {line}: {message}");
            error_response(StatusCode::BAD_REQUEST, "invalid", &message, Some(line))
        }
    }
}
