//! # sundial-tls
//!
//! TLS for Sundial's TCP listeners (PostgreSQL, HTTP, ILP over TCP), on rustls with the ring
//! provider. One [`Tls`] holds the server's certificate and serves every listener; TLS and
//! plain TCP share each port.
//!
//! ```text
//!  HTTP, ILP/TCP:  TcpStream ─▶ accept(): peek the first byte
//!                                 ├─ 0x16 (TLS handshake record), TLS configured
//!                                 │      ─▶ handshake, within the timeout ─▶ MaybeTls::Tls
//!                                 └─ anything else, EOF, nothing within the timeout
//!                                        ─▶ MaybeTls::Plain (not a byte consumed)
//!  PostgreSQL:     SSLRequest ─▶ 'S' ─▶ Tls::accept_now ─▶ TlsStream
//!                  0x16 first (PostgreSQL 17's direct TLS) ─▶ Tls::accept_now
//!
//!  Tls ─▶ rustls ServerConfig ─▶ CurrentCert (resolver) ─▶ RwLock<Arc<CertifiedKey>>
//!                                                              ▲
//!                           Tls::reload() (SIGHUP) ── re-read PEM files, checked, swapped
//! ```
//!
//! Invariants:
//! - [`accept`] only peeks: a plain connection's bytes all reach its protocol's reader (an ILP
//!   line or an HTTP request never starts with 0x16);
//! - a handshake takes the certificate current when the client's hello arrives; a reload
//!   never touches connections already open;
//! - a reload that fails (a missing, malformed or mismatched file) changes nothing: the old
//!   certificate goes on serving, and the error names the file and what is wrong with it;
//! - ALPN offers `http/1.1` and `postgresql` (PostgreSQL 17's direct TLS asks for the
//!   latter); a client that asks for no protocol connects all the same. TLS 1.2 and 1.3.
//!
//! [`TlsRequire`] is the policy a listener applies to the plain connections it gets: all
//! allowed, loopback peers only, or none.

mod certs;
mod error;
mod require;
mod stream;

pub use certs::{ALPN_HTTP, ALPN_POSTGRESQL, Tls};
pub use error::{Peer, PemFile, TlsError};
pub use require::TlsRequire;
pub use stream::{MaybeTls, TLS_HANDSHAKE_RECORD, accept};

/// The rustls types a caller may need (the certificate in effect, a client configuration).
pub use rustls;
/// The PEM and DER types certificates and keys are read as.
pub use rustls_pki_types;
pub use tokio_rustls;

#[cfg(test)]
mod tests;
