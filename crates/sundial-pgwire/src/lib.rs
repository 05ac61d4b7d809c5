//! # sundial-pgwire
//!
//! PostgreSQL's frontend/backend protocol (v3) in front of Sundial's SQL [`Engine`], so psql,
//! JDBC, psycopg, pgx, node-postgres and Grafana talk to Sundial as to PostgreSQL.
//!
//! ```text
//!  client ─▶ PgServer::serve ─▶ Session ── Parse ───▶ Engine::prepare (plan kept per statement)
//!                                  │      Execute ─▶ Engine::run_prepared ─▶ batch stream
//!                                  ◀───────────── polled one batch at a time ◀──┘
//!                                  └─▶ DataRow encoding (text/binary) ─▶ one write per round trip
//! ```
//!
//! A point lookup (`Engine::run_lookup_now`) is answered in place: its rows are located, and
//! each DataRow is encoded from the table's mapped files (`cells`), with no batch in between.
//!
//! COPY FROM STDIN / TO STDOUT (text, CSV and binary) streams rows between the client and a
//! table in bounded memory, atomically on the way in; SQL cursors (`DECLARE` / `FETCH`) are
//! named portals.
//!
//! With a certificate ([`PgOptions::tls`]) an SSLRequest is answered 'S' and the session goes
//! on over TLS (`transport`); so is a connection that opens with a TLS handshake (PostgreSQL
//! 17's `sslnegotiation=direct`). [`PgOptions::tls_require`] refuses plain logins (SQLSTATE
//! 28000) from the peers it names.
//!
//! A session runs its statements in its own task, on the runtime serving it (the server
//! serves PostgreSQL on its query runtime): a round trip takes no hand-off between threads.
//! While it waits for a statement's next batch, the session also watches for a
//! CancelRequest, the statement timeout and the client hanging up; any of them drops the
//! statement's stream, and with it DataFusion's partition tasks.
//!
//! Modules depend one way (no module imports one to its left):
//!
//! ```text
//!  server ─▶ session ─▶ shared ─▶ admission, cancel, auth
//!              └─▶ cells ─▶ codec, types, local, copy_in, copy_out, copy_decode, transport, error
//! ```
//!
//! [`Engine`]: sundial_query::Engine

mod admission;
mod array_input;
mod auth;
mod cancel;
mod cells;
mod codec;
mod copy_decode;
mod copy_in;
mod copy_out;
mod error;
mod fair;
#[doc(hidden)]
pub mod fuzz;
mod local;
mod server;
mod session;
mod shared;
mod transport;
mod types;

pub use auth::{AuthMethod, Users};
pub use error::PgError;
pub use server::PgServer;
pub use shared::{ParkedWorkers, PgOptions};

#[cfg(test)]
mod tests;
