//! The crate's one error type: each message names the file or peer and says what is wrong.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Which of the two PEM files a message is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PemFile {
    Certificate,
    PrivateKey,
}

impl std::fmt::Display for PemFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PemFile::Certificate => "certificate",
            PemFile::PrivateKey => "private key",
        })
    }
}

/// What went wrong loading a certificate or serving a connection.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file could not be read (missing, unreadable, a directory).
    #[error("cannot read the TLS {kind} file {}: {source}", path.display())]
    Read {
        kind: PemFile,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is larger than any certificate chain or key.
    #[error(
        "the TLS {kind} file {} is larger than {limit} bytes: not a PEM {kind}",
        path.display()
    )]
    TooLarge {
        kind: PemFile,
        path: PathBuf,
        limit: u64,
    },
    /// The file's PEM text is malformed.
    #[error("the TLS {kind} file {} is not valid PEM: {reason}", path.display())]
    Pem {
        kind: PemFile,
        path: PathBuf,
        reason: String,
    },
    /// The certificate file holds no `CERTIFICATE` section.
    #[error(
        "the TLS certificate file {} holds no certificate: expected a PEM \
         '-----BEGIN CERTIFICATE-----' section (the server's certificate first, then any \
         intermediates)",
        path.display()
    )]
    NoCertificate { path: PathBuf },
    /// The key file holds no private key section.
    #[error(
        "the TLS private key file {} holds no private key: expected a PEM 'PRIVATE KEY' \
         (PKCS#8), 'RSA PRIVATE KEY' (PKCS#1) or 'EC PRIVATE KEY' (SEC1) section",
        path.display()
    )]
    NoPrivateKey { path: PathBuf },
    /// The key is of a kind or size rustls cannot sign with.
    #[error("the TLS private key in {} cannot be used: {reason}", path.display())]
    UnusableKey { path: PathBuf, reason: String },
    /// The certificate does not parse as X.509.
    #[error("the TLS certificate in {} cannot be used: {reason}", path.display())]
    BadCertificate { path: PathBuf, reason: String },
    /// The private key is not the one the certificate was issued for.
    #[error(
        "the TLS private key in {} does not belong to the certificate in {}: the key's public \
         half differs from the certificate's",
        key.display(),
        cert.display()
    )]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    /// rustls refused the configuration (a bug: the versions and provider are fixed).
    #[error("cannot configure TLS: {0}")]
    Config(String),
    /// The client's handshake failed (no common protocol version or cipher, a client that
    /// does not trust the certificate, a connection closed midway).
    #[error("TLS handshake with {peer} failed: {source}")]
    Handshake { peer: Peer, source: std::io::Error },
    /// The client did not finish its handshake in time.
    #[error("TLS handshake with {peer} did not finish within {ms} ms")]
    HandshakeTimeout { peer: Peer, ms: u128 },
    /// The socket failed before the handshake began.
    #[error("connection from {peer} failed: {source}")]
    Io { peer: Peer, source: std::io::Error },
}

/// A peer's address in messages, or "an unknown peer" when the socket no longer has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub Option<SocketAddr>);

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(addr) => write!(f, "{addr}"),
            None => f.write_str("an unknown peer"),
        }
    }
}
