//! # sundial-http
//!
//! Sundial's SQL over HTTP, shaped like QuestDB's REST API so that QuestDB's web console habits,
//! scripts and loaders work unchanged: `/exec` answers in QuestDB's JSON, `/exp` exports CSV and
//! `/imp` imports CSV uploads. `sundial serve` merges [`sql_router`] with its ILP endpoints
//! (`/write`, `/ping`); the CSV-to-table code of `/imp` is [`load`], which `sundial import` uses
//! too.
//!
//! ```text
//!  query runtime: axum serves each connection on one task, and its statements run there
//!
//!  GET /exec ─┐
//!  GET /exp  ─┴▶ handler ── Running: Engine::prepare / run_prepared ─▶ record batches
//!               ▲  waits for the first       ─▶ encoder (JSON / CSV) ─▶ ~256 KiB chunks
//!               │  chunk (Statement-Timeout)    (one chunk ahead; dropping it stops the query)
//!  streamed body ◀── chunks, each produced when the body asks for more
//!
//!  POST /imp ─▶ multipart `data` part ─chunks─▶ blocking task: CsvReader ─▶ load ─▶ TableWriter
//!               (bounded channel, never the whole file in memory)          (commit at the end)
//! ```
//!
//! Errors are one type, [`Error`], mapped once to an HTTP status ([`Error::status`]); `/exec`
//! and `/exp` report them as QuestDB does (`{"query","error","position"}`), `/imp` as
//! `{"status":..}` (or plain text). Large responses are gzip-compressed for clients on other
//! hosts that accept it ([`Gzip`]). Requests of web pages from other origins are refused, and
//! answers carry CORS headers, only for the origins the operator allows ([`origin`]).

pub mod auth;
mod console;
mod csv_out;
mod error;
mod exec;
mod exp;
mod imp;
pub mod json;
pub mod load;
pub mod origin;
mod query;
#[cfg(test)]
mod roles_tests;

use std::sync::Arc;

use axum::Router;
use axum::body::HttpBody;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, header};
use axum::routing::{get, post};
use sundial_query::Engine;
use tower_http::CompressionLevel;
use tower_http::compression::{CompressionLayer, Predicate};
use tower_http::cors::{AllowOrigin, Any, CorsLayer};

pub use error::Error;
pub use origin::AllowedOrigins;

/// Settings of the SQL endpoints.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Default statement timeout of `/exec` and `/exp` in milliseconds (0: none); a request's
    /// `Statement-Timeout` header overrides it.
    pub statement_timeout_ms: u64,
    /// Largest `/imp` request body, in bytes; larger ones get 413.
    pub import_bytes_max: u64,
    /// When answers of at least [`GZIP_BYTES_MIN`] go out gzip-compressed to clients that
    /// accept it.
    pub gzip: Gzip,
    /// Origins whose web pages may send requests and read answers (see [`origin`]).
    pub allowed_origins: AllowedOrigins,
}

/// When answers are gzip-compressed (always only for clients that accept it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gzip {
    Never,
    /// For clients on other hosts. Over loopback, compressing costs more time than sending the
    /// bytes uncompressed does (requests without a known peer address count as remote).
    Remote,
    Always,
}

/// Smallest answer worth compressing: below it, compressing costs more time than sending the
/// bytes over a LAN saves (and every streamed answer, being one chunk or more, is above it).
pub const GZIP_BYTES_MIN: u64 = query::CHUNK_BYTES as u64;

/// Compresses answers of at least [`GZIP_BYTES_MIN`] bytes, and streamed ones.
#[derive(Debug, Clone, Copy)]
struct LargeAnswers;

impl Predicate for LargeAnswers {
    fn should_compress<B: HttpBody>(&self, response: &axum::http::Response<B>) -> bool {
        response
            .body()
            .size_hint()
            .exact()
            .is_none_or(|bytes| bytes >= GZIP_BYTES_MIN)
    }
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            statement_timeout_ms: 0,
            import_bytes_max: 1 << 30,
            gzip: Gzip::Remote,
            allowed_origins: AllowedOrigins::default(),
        }
    }
}

/// What the SQL endpoints need: the engine and their settings. The router is meant to be
/// served on the query runtime: statements run on the connection's task, and `/imp` loads on
/// that runtime's blocking pool.
#[derive(Clone)]
pub struct HttpSql {
    pub engine: Arc<Engine>,
    pub options: HttpOptions,
}

/// The router of `/exec`, `/exp`, `/imp` and the web console (`/` and its assets), with gzip
/// compression of large answers, and CORS for the allowed origins.
pub fn sql_router(state: HttpSql) -> Router {
    let import_limit = usize::try_from(state.options.import_bytes_max).unwrap_or(usize::MAX);
    let cors = cors_layer(&state.options.allowed_origins);
    let allowed = state.options.allowed_origins.clone();
    let gzip = state.options.gzip;
    let router = Router::new()
        .route("/exec", get(exec::exec))
        .route("/exp", get(exp::exp))
        .route(
            "/imp",
            post(imp::imp).layer(DefaultBodyLimit::max(import_limit)),
        )
        .with_state(Arc::new(state));
    let router = match gzip {
        Gzip::Never => router,
        Gzip::Remote | Gzip::Always => router.layer(
            CompressionLayer::new()
                .gzip(true)
                .quality(CompressionLevel::Fastest)
                .compress_when(LargeAnswers),
        ),
    };
    // Outside the compression layer, so that it sees the request without the header.
    let router = match gzip {
        Gzip::Remote => router.layer(axum::middleware::from_fn(uncompressed_for_local_clients)),
        Gzip::Never | Gzip::Always => router,
    };
    let router = match cors {
        Some(cors) => router.layer(cors),
        None => router,
    };
    let router = router.layer(axum::middleware::from_fn_with_state(
        allowed,
        origin::refuse_foreign_pages,
    ));
    let router = router.layer(axum::middleware::from_fn(trusted_without_authentication));
    // The console's files change nothing and cannot be framed, and a link to the console on
    // another site's page must open it: they are served outside the origin check.
    console::routes(router)
}

/// CORS headers for the allowed origins' pages; none when no origin is allowed.
fn cors_layer(allowed: &AllowedOrigins) -> Option<CorsLayer> {
    if allowed.is_empty() {
        return None;
    }
    let origins = if allowed.any() {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            allowed
                .origins()
                .iter()
                .filter_map(|o| axum::http::HeaderValue::from_str(o).ok()),
        )
    };
    Some(
        CorsLayer::new()
            .allow_origin(origins)
            .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
            .allow_headers(Any)
            .expose_headers([header::CONTENT_DISPOSITION]),
    )
}

/// A request that arrives without a [`sundial_query::Caller`] runs as the trusted caller: this
/// router served alone (tests, tools on a data directory of their own) has no users. `sundial
/// serve` puts [`auth::authenticate`] in front of it, which gives every request that gets this
/// far its caller.
async fn trusted_without_authentication(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if request
        .extensions()
        .get::<sundial_query::Caller>()
        .is_none()
    {
        request
            .extensions_mut()
            .insert(sundial_query::Caller::trusted());
    }
    next.run(request).await
}

/// Drops `Accept-Encoding` from requests of clients on this host (see [`Gzip::Remote`]).
async fn uncompressed_for_local_clients(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let local = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .is_some_and(|peer| peer.0.ip().is_loopback());
    if local {
        request.headers_mut().remove(header::ACCEPT_ENCODING);
    }
    next.run(request).await
}
