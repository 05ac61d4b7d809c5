//! The one error type of the SQL endpoints, and the one place it becomes an HTTP status.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use sundial_csv::CsvError;
use sundial_query::QueryError;
use sundial_storage::StorageError;

use crate::json::write_json_string;

/// Everything that can fail in `/exec`, `/exp`, `/imp` and [`crate::load`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A missing or malformed request parameter, header or multipart part.
    #[error("{0}")]
    BadRequest(String),
    /// The statement failed (storage errors arrive as `QueryError::Storage`).
    #[error(transparent)]
    Query(#[from] QueryError),
    /// The statement ran longer than its timeout and was stopped.
    #[error("timeout, query aborted: it ran longer than the statement timeout of {0} ms")]
    Timeout(u64),
    /// `/exp` was given a statement that returns no rows.
    #[error("/exp endpoint only accepts SELECT")]
    NotSelect,
    /// The uploaded CSV is unusable (or, under `atomicity=abort`, has a bad row).
    #[error("{0}")]
    Csv(#[from] CsvError),
    /// A request body over the configured limit.
    #[error("request body over {0} bytes (--http-import-bytes-max)")]
    TooLarge(u64),
    /// A fault of the server itself.
    #[error("{0}")]
    Internal(String),
}

impl From<StorageError> for Error {
    fn from(e: StorageError) -> Self {
        Error::Query(QueryError::Storage(e))
    }
}

impl Error {
    /// The HTTP status for this error: the request's fault is 4xx, the server's 5xx.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::BadRequest(_) | Error::Timeout(_) | Error::NotSelect | Error::Csv(_) => {
                StatusCode::BAD_REQUEST
            }
            Error::Query(e) if e.sqlstate() == "42501" => StatusCode::FORBIDDEN,
            Error::Query(e) if e.is_user_error() => StatusCode::BAD_REQUEST,
            Error::Query(_) | Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Error::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        }
    }

    /// QuestDB's error answer of `/exec` and `/exp`: `{"query","error","position"}`, the
    /// position being the character offset in `query` the error points at (0 when unknown).
    pub(crate) fn query_response(&self, query: &str) -> Response {
        let position = match self {
            Error::Query(e) => e.char_offset(query).unwrap_or(0),
            _ => 0,
        };
        let message = self.to_string();
        let mut body = Vec::with_capacity(message.len() + query.len() + 48);
        body.extend_from_slice(b"{\"query\":");
        write_json_string(&mut body, query);
        body.extend_from_slice(b",\"error\":");
        write_json_string(&mut body, &message);
        body.extend_from_slice(format!(",\"position\":{position}}}").as_bytes());
        (
            self.status(),
            [(header::CONTENT_TYPE, crate::json::CONTENT_TYPE)],
            body,
        )
            .into_response()
    }

    /// QuestDB's error answer of `/imp`: `{"status":message}` with `fmt=json`, else the message.
    pub(crate) fn import_response(&self, json: bool) -> Response {
        let message = self.to_string();
        if json {
            let mut body = Vec::with_capacity(message.len() + 16);
            body.extend_from_slice(b"{\"status\":");
            write_json_string(&mut body, &message);
            body.push(b'}');
            (
                self.status(),
                [(header::CONTENT_TYPE, crate::json::CONTENT_TYPE)],
                body,
            )
                .into_response()
        } else {
            (
                self.status(),
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                message,
            )
                .into_response()
        }
    }
}
