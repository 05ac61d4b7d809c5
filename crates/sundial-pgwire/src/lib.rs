//! # sundial-pgwire
//!
//! PostgreSQL's frontend/backend protocol (v3) in front of Sundial's SQL [`Engine`], so psql,
//! JDBC, psycopg, pgx, node-postgres and Grafana talk to Sundial as to PostgreSQL.
//!
//! ```text
//!            I/O runtime (few threads)                 query runtime (bounded)
//!  client ─▶ PgServer::serve ─▶ Session ── Parse ─▶ Engine::prepare (plan kept per statement)
//!                                  │      Execute ─▶ spawn ─▶ Engine::run_prepared ─▶ batches
//!                                  ◀──────────── bounded channel ◀─────────────────────┘
//!                                  └─▶ DataRow encoding (text/binary) ─▶ one write per round trip
//! ```
//!
//! COPY FROM STDIN / TO STDOUT (text, CSV and binary) streams rows between the client and a
//! table in bounded memory, atomically on the way in; SQL cursors (`DECLARE` / `FETCH`) are
//! named portals.
//!
//! Sessions never run a query on the I/O runtime: a slow query holds a query-runtime thread,
//! not the connection threads, so other clients stay responsive. A CancelRequest, the
//! statement timeout or the client hanging up aborts the query task, and with it DataFusion's
//! partition tasks.
//!
//! [`Engine`]: sundial_query::Engine

mod auth;
mod codec;
mod copy_decode;
mod copy_in;
mod copy_out;
mod error;
mod local;
mod server;
mod session;
mod types;

pub use auth::{AuthMethod, Users};
pub use error::PgError;
pub use server::{PgOptions, PgServer};
