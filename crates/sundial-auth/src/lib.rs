//! Who may do what: users, their roles and credentials, and the slowing of password guessing.
//!
//! ```text
//!   listeners                     sundial-auth                          data directory
//!   PG login (SCRAM) ─────▶ Users::scram_secret ──┐
//!   HTTP Basic/Bearer ────▶ Users::verify_* ──────┤   Users (RwLock) ──save──▶ .users.json
//!   ILP/TCP challenge ────▶ Users::verify_ilp ────┘        ▲                 (temp, fsync,
//!   every statement ──────▶ Users::authorize(Caller, Role) │                  rename, fsync)
//!   SQL CREATE/ALTER/GRANT ───────────────────────────────┘
//!   failed logins ────────▶ Throttle (per address and user, bounded; turns per address)
//! ```
//!
//! * A [`Role`] is read < write < admin; a user holds at most one (or none: it may log in and
//!   change its own password, nothing else).
//! * A [`Caller`] is a logged-in user or the trusted caller (the CLI, `--auth off`). Its role
//!   is looked up at each [`Users::authorize`], so a user dropped or revoked while connected
//!   loses access at its next statement.
//! * Nothing secret is kept in clear: passwords as SCRAM-SHA-256 verifiers (salt, StoredKey,
//!   ServerKey; PostgreSQL's format), bearer tokens as their SHA-256, ILP keys as public keys.
//!   The built-in admin (from the server's flags) lives in memory only and SQL cannot change
//!   it.
//! * Every change is on disk before it is acknowledged (see [`store`]).

mod error;
mod ilp_key;
mod role;
mod secret;
pub mod store;
mod throttle;

pub use error::{AuthError, Result};
pub use ilp_key::{IlpKey, ilp_challenge};
pub use role::{Caller, Role};
pub use secret::{SCRAM_ITERATIONS, ScramSecret, equal, hmac, new_session_id};
pub use store::{USERS_FILE, UserInfo, Users};
pub use throttle::{ATTEMPTS_IN_PROGRESS_MAX, Attempt, FAILURE_DELAY, Throttle};
