//! The server's certificate: read from PEM files, checked, and swapped in place by a reload.
//!
//! ```text
//!  Tls::load / Tls::reload ─▶ read both files (bounded) ─▶ parse PEM ─▶ load the key (ring)
//!        ─▶ the key matches the certificate ─▶ CurrentCert: RwLock<Arc<CertifiedKey>> ◀─ resolve
//! ```
//!
//! Invariants: the lock holds a checked certificate at all times; it is held only to clone or
//! replace an `Arc`, never across I/O or a handshake. A reload also starts the cache of
//! resumable sessions anew: a resumed session skips the certificate, so without that a client
//! could go on meeting the old one.

use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{
    ClientHello, ResolvesServerCert, ServerSessionMemoryCache, StoresServerSessions,
};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::error::{Peer, PemFile, TlsError};

/// The ALPN name of HTTP/1.1.
pub const ALPN_HTTP: &[u8] = b"http/1.1";
/// The ALPN name PostgreSQL 17's direct TLS (`sslnegotiation=direct`) asks for.
pub const ALPN_POSTGRESQL: &[u8] = b"postgresql";

/// The largest certificate or key file read: a chain of a few certificates is a few KiB.
const PEM_FILE_BYTES_MAX: u64 = 1 << 20;

/// TLS sessions remembered for resumption (rustls' default).
const RESUMABLE_SESSIONS_MAX: usize = 256;

/// The server's TLS setup: its certificate files, the certificate in effect, and the rustls
/// configuration every listener's handshakes use.
pub struct Tls {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: Arc<CurrentCert>,
    sessions: Arc<Sessions>,
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// Reads the certificate chain (the server's certificate first) and its private key from
    /// PEM files, checks that they belong together, and builds the server configuration.
    pub fn load(
        cert_path: impl AsRef<Path>,
        key_path: impl AsRef<Path>,
    ) -> Result<Arc<Tls>, TlsError> {
        let cert_path = cert_path.as_ref().to_path_buf();
        let key_path = key_path.as_ref().to_path_buf();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certified = load_certified_key(&cert_path, &key_path, &provider)?;
        let current = Arc::new(CurrentCert(RwLock::new(Arc::new(certified))));
        let sessions = Arc::new(Sessions(RwLock::new(ServerSessionMemoryCache::new(
            RESUMABLE_SESSIONS_MAX,
        ))));
        let mut config = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        config.alpn_protocols = vec![ALPN_HTTP.to_vec(), ALPN_POSTGRESQL.to_vec()];
        config.session_storage = sessions.clone();
        Ok(Arc::new(Tls {
            cert_path,
            key_path,
            provider,
            current,
            sessions,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        }))
    }

    /// Reads the files again and, if they hold a valid certificate and matching key, serves
    /// those from the next handshake on; sessions resumable under the old certificate are
    /// forgotten, so every client meets the new one. On error the certificate in effect stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let certified = load_certified_key(&self.cert_path, &self.key_path, &self.provider)?;
        self.current.set(Arc::new(certified));
        self.sessions.forget_all();
        Ok(())
    }

    /// The certificate file given to [`Tls::load`].
    pub fn cert_path(&self) -> &Path {
        &self.cert_path
    }

    /// The private key file given to [`Tls::load`].
    pub fn key_path(&self) -> &Path {
        &self.key_path
    }

    /// The certificate chain and key in effect.
    pub fn certificate(&self) -> Arc<CertifiedKey> {
        self.current.get()
    }

    /// The rustls configuration handshakes use.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.acceptor.config().clone()
    }

    /// Runs the server side of a handshake on `stream` now, with no peeking: for PostgreSQL,
    /// whose TLS starts after the SSLRequest the server answered 'S' (or, in direct TLS, with
    /// the first byte). No timeout of its own: the caller bounds it.
    /// `stream` is TCP, or a wrapper of it (PostgreSQL's sessions read theirs eagerly);
    /// `peer` names it in errors.
    pub async fn accept_now<IO>(
        &self,
        stream: IO,
        peer: Option<SocketAddr>,
    ) -> Result<TlsStream<IO>, TlsError>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let peer = Peer(peer);
        self.acceptor
            .accept(stream)
            .await
            .map_err(|source| TlsError::Handshake { peer, source })
    }
}

/// The resolver rustls asks for the certificate of each handshake: whatever was loaded last.
#[derive(Debug)]
struct CurrentCert(RwLock<Arc<CertifiedKey>>);

impl CurrentCert {
    fn get(&self) -> Arc<CertifiedKey> {
        // A poisoned lock still holds a whole Arc: writers only assign.
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, certified: Arc<CertifiedKey>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = certified;
    }
}

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.get())
    }
}

/// The sessions clients may resume (TLS 1.3 PSK, TLS 1.2 session IDs), started anew by each
/// reload: a resumed session skips the certificate, and would keep a client on the old one.
#[derive(Debug)]
struct Sessions(RwLock<Arc<ServerSessionMemoryCache>>);

impl Sessions {
    fn cache(&self) -> Arc<ServerSessionMemoryCache> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn forget_all(&self) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) =
            ServerSessionMemoryCache::new(RESUMABLE_SESSIONS_MAX);
    }
}

impl StoresServerSessions for Sessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.cache().put(key, value)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.cache().get(key)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.cache().take(key)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

/// Reads and checks a certificate chain and its key.
fn load_certified_key(
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let cert_pem = read_bounded(cert_path, PemFile::Certificate)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(e, cert_path, PemFile::Certificate))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert_path.to_path_buf(),
        });
    }
    let key_pem = read_bounded(key_path, PemFile::PrivateKey)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| pem_error(e, key_path, PemFile::PrivateKey))?;
    let signing_key =
        provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| TlsError::UnusableKey {
                path: key_path.to_path_buf(),
                reason: e.to_string(),
            })?;
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        // ring's keys always know their public half; "unknown" would mean a custom signer.
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
            Ok(certified)
        }
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
            Err(TlsError::KeyMismatch {
                cert: cert_path.to_path_buf(),
                key: key_path.to_path_buf(),
            })
        }
        Err(e) => Err(TlsError::BadCertificate {
            path: cert_path.to_path_buf(),
            reason: e.to_string(),
        }),
    }
}

/// The whole file, if it is at most [`PEM_FILE_BYTES_MAX`] bytes.
fn read_bounded(path: &Path, kind: PemFile) -> Result<Vec<u8>, TlsError> {
    let read_error = |source| TlsError::Read {
        kind,
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(PEM_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > PEM_FILE_BYTES_MAX {
        return Err(TlsError::TooLarge {
            kind,
            path: path.to_path_buf(),
            limit: PEM_FILE_BYTES_MAX,
        });
    }
    Ok(bytes)
}

fn pem_error(e: pem::Error, path: &Path, kind: PemFile) -> TlsError {
    let path = path.to_path_buf();
    let reason = match e {
        pem::Error::NoItemsFound => {
            return match kind {
                PemFile::Certificate => TlsError::NoCertificate { path },
                PemFile::PrivateKey => TlsError::NoPrivateKey { path },
            };
        }
        pem::Error::MissingSectionEnd { end_marker } => format!(
            "a section has no end line '-----END {}-----'",
            String::from_utf8_lossy(&end_marker)
        ),
        pem::Error::IllegalSectionStart { line } => format!(
            "malformed section start line '{}'",
            String::from_utf8_lossy(&line)
        ),
        pem::Error::Base64Decode(e) => format!("a section's base64 text does not decode: {e}"),
        other => other.to_string(),
    };
    TlsError::Pem { kind, path, reason }
}
