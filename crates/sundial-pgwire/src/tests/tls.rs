//! TLS: an SSLRequest answered 'S' and the session served over TLS (tokio-postgres over
//! tokio-rustls), PostgreSQL 17's direct TLS, 'N' without a certificate, the TLS policy
//! refusing plain logins with SQLSTATE 28000, and hostile negotiations.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use sundial_tls::rustls::{self, ClientConfig};
use sundial_tls::rustls_pki_types::{CertificateDer, ServerName};
use sundial_tls::tokio_rustls::{TlsConnector, client};
use sundial_tls::{Tls, TlsRequire};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

use super::{
    PASSWORD, TestServer, USER, error_code, read_until_closed, request_packet, startup_packet,
};
use crate::PgOptions;
use crate::codec::{GSSENC_REQUEST, SSL_REQUEST};

/// Long enough never to fire on a loaded machine.
const PATIENT: Duration = Duration::from_secs(30);

/// A CA, a server certificate it signed for localhost and 127.0.0.1 (loaded), and the
/// directory holding the files.
struct Certs {
    ca: CertificateDer<'static>,
    tls: Arc<Tls>,
    _dir: tempfile::TempDir,
}

impl Certs {
    fn new() -> Certs {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().expect("key");
        let params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("params");
        let cert = params.signed_by(&key, &issuer).expect("sign");
        let dir = tempfile::tempdir().expect("dir");
        let (cert_path, key_path) = (dir.path().join("server.crt"), dir.path().join("server.key"));
        std::fs::write(&cert_path, cert.pem()).expect("write certificate");
        std::fs::write(&key_path, key.serialize_pem()).expect("write key");
        Certs {
            ca: ca.der().clone(),
            tls: Tls::load(&cert_path, &key_path).expect("load"),
            _dir: dir,
        }
    }

    fn options(&self, require: TlsRequire) -> PgOptions {
        PgOptions {
            tls: Some(self.tls.clone()),
            tls_require: require,
            ..PgOptions::default()
        }
    }

    /// A client configuration trusting the CA, asking for `alpn`.
    fn connector(&self, alpn: &[&[u8]]) -> TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.clone()).expect("trust the CA");
        let mut config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsConnector::from(Arc::new(config))
    }
}

/// tokio-postgres over tokio-rustls (no channel binding: the server offers SCRAM without it).
#[derive(Clone)]
struct Rustls(TlsConnector);

struct RustlsConnect(TlsConnector, ServerName<'static>);

struct RustlsStream(client::TlsStream<tokio_postgres::Socket>);

impl MakeTlsConnect<tokio_postgres::Socket> for Rustls {
    type Stream = RustlsStream;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<RustlsConnect> {
        let name = ServerName::try_from(domain.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(RustlsConnect(self.0.clone(), name))
    }
}

impl TlsConnect<tokio_postgres::Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type Error = io::Error;
    type Future = BoxFuture<'static, io::Result<RustlsStream>>;

    fn connect(self, stream: tokio_postgres::Socket) -> Self::Future {
        Box::pin(async move { self.0.connect(self.1, stream).await.map(RustlsStream) })
    }
}

impl tokio_postgres::tls::TlsStream for RustlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl AsyncRead for RustlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Logs in to `server` with tokio-postgres; `extra` adds connection parameters (sslmode, ...).
async fn connect(
    server: &TestServer,
    certs: &Certs,
    alpn: &[&[u8]],
    extra: &str,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let config = format!(
        "host=localhost hostaddr=127.0.0.1 port={} user={USER} password={PASSWORD} dbname=qdb \
         connect_timeout=30 {extra}",
        server.addr.port()
    );
    let (client, connection) =
        tokio_postgres::connect(&config, Rustls(certs.connector(alpn))).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// Runs statements whose answers take many TLS records, and checks them.
async fn exercise(client: &tokio_postgres::Client) {
    let row = client.query_one("SELECT 1", &[]).await.expect("SELECT 1");
    assert_eq!(row.get::<_, i64>(0), 1);
    // Rows enough to pass the output's flush threshold (64 KiB) several times.
    let rows = client
        .query(
            "SELECT value, repeat('a', 100) AS pad FROM generate_series(1, 5000)",
            &[],
        )
        .await
        .expect("many rows");
    assert_eq!(rows.len(), 5000);
    assert_eq!(rows[4999].get::<_, i64>(0), 5000);
    let param = client
        .query_one("SELECT $1::text || 'b'", &[&"a".repeat(100_000)])
        .await
        .expect("a large parameter");
    assert_eq!(param.get::<_, String>(0).len(), 100_001);
}

#[tokio::test]
async fn ssl_request_is_answered_s_and_the_session_runs_over_tls() {
    let certs = Certs::new();
    let server = TestServer::start(certs.options(TlsRequire::Off)).await;
    let client = tokio::time::timeout(PATIENT, connect(&server, &certs, &[], "sslmode=require"))
        .await
        .expect("in time")
        .expect("log in over TLS");
    exercise(&client).await;
}

#[tokio::test]
async fn direct_tls_as_postgresql_17_sends_it() {
    let certs = Certs::new();
    let server = TestServer::start(certs.options(TlsRequire::All)).await;
    let client = connect(
        &server,
        &certs,
        &[sundial_tls::ALPN_POSTGRESQL],
        "sslmode=require sslnegotiation=direct",
    )
    .await
    .expect("log in with direct TLS");
    exercise(&client).await;
}

#[tokio::test]
async fn without_a_certificate_ssl_request_is_answered_n() {
    let certs = Certs::new();
    let server = TestServer::start(PgOptions::default()).await;
    let mut raw = TcpStream::connect(server.addr).await.expect("connect");
    raw.write_all(&request_packet(SSL_REQUEST))
        .await
        .expect("send");
    let mut answer = [0u8; 1];
    raw.read_exact(&mut answer).await.expect("answer");
    assert_eq!(&answer, b"N");
    // sslmode=prefer goes on in plain; require gives up.
    let plain = connect(&server, &certs, &[], "sslmode=prefer")
        .await
        .expect("plain after N");
    plain.query_one("SELECT 1", &[]).await.expect("SELECT 1");
    assert!(
        connect(&server, &certs, &[], "sslmode=require")
            .await
            .is_err()
    );
}

/// The raw handshake: `first` packets, then the TLS handshake, then a startup packet over
/// TLS; returns the TLS stream after checking the server asks for authentication.
async fn raw_tls_login(server: &TestServer, certs: &Certs, first: &[Vec<u8>], expect: &[u8]) {
    let mut raw = TcpStream::connect(server.addr).await.expect("connect");
    for (packet, answer) in first.iter().zip(expect) {
        raw.write_all(packet).await.expect("send");
        let mut got = [0u8; 1];
        raw.read_exact(&mut got).await.expect("answer");
        assert_eq!(got[0], *answer);
    }
    let name = ServerName::try_from("localhost").expect("name");
    let mut tls = certs
        .connector(&[])
        .connect(name, raw)
        .await
        .expect("handshake");
    tls.write_all(&startup_packet(USER)).await.expect("startup");
    tls.flush().await.expect("flush");
    let mut tag = [0u8; 1];
    tls.read_exact(&mut tag)
        .await
        .expect("authentication request");
    assert_eq!(&tag, b"R");
}

#[tokio::test]
async fn gssenc_request_is_answered_n_then_ssl_request_s() {
    let certs = Certs::new();
    let server = TestServer::start(certs.options(TlsRequire::All)).await;
    raw_tls_login(
        &server,
        &certs,
        &[request_packet(GSSENC_REQUEST), request_packet(SSL_REQUEST)],
        b"NS",
    )
    .await;
    // Direct TLS with no ALPN at all is served too.
    raw_tls_login(&server, &certs, &[], b"").await;
}

#[tokio::test]
async fn tls_require_refuses_plain_logins_with_28000() {
    let certs = Certs::new();
    let server = TestServer::start(certs.options(TlsRequire::All)).await;
    let err = connect(&server, &certs, &[], "sslmode=disable")
        .await
        .expect_err("plain refused");
    let db = err.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "28000");
    assert_eq!(db.severity(), "FATAL");
    assert!(
        db.message()
            .starts_with("TLS is required for connections from 127.0.0.1:"),
        "{}",
        db.message()
    );
    assert!(db.message().ends_with("connect with sslmode=require"));
    // TLS works, and the listener goes on serving.
    let client = connect(&server, &certs, &[], "sslmode=require")
        .await
        .expect("TLS login");
    client.query_one("SELECT 1", &[]).await.expect("SELECT 1");

    // `remote`: loopback peers may use plain TCP.
    let local = TestServer::start(certs.options(TlsRequire::Remote)).await;
    let plain = connect(&local, &certs, &[], "sslmode=disable")
        .await
        .expect("plain from loopback");
    plain.query_one("SELECT 1", &[]).await.expect("SELECT 1");
}

#[tokio::test]
async fn data_sent_after_ssl_request_before_the_handshake_is_refused() {
    let certs = Certs::new();
    let server = TestServer::start(certs.options(TlsRequire::Off)).await;
    let mut raw = TcpStream::connect(server.addr).await.expect("connect");
    let mut both = request_packet(SSL_REQUEST);
    both.extend_from_slice(&startup_packet(USER));
    raw.write_all(&both).await.expect("send");
    let (got, closed) = read_until_closed(&mut raw, PATIENT).await;
    assert!(closed);
    assert_eq!(error_code(&got).as_deref(), Some("08P01"), "{got:?}");
}

#[tokio::test]
async fn hostile_handshakes_end_only_their_own_connection() {
    let certs = Certs::new();
    let server = TestServer::start(certs.options(TlsRequire::Off)).await;
    let hostile: [&[u8]; 4] = [
        // 'S', then bytes that are no TLS record.
        b"garbage that is not a ClientHello",
        // A record header claiming a huge length, then the end.
        &[0x16, 0x03, 0x01, 0xff, 0xff],
        // A ClientHello record cut short.
        &[0x16, 0x03, 0x01, 0x00, 0x30, 0x01, 0x00, 0x00],
        // An alert record.
        &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28],
    ];
    for bytes in hostile {
        let mut raw = TcpStream::connect(server.addr).await.expect("connect");
        raw.write_all(&request_packet(SSL_REQUEST))
            .await
            .expect("send");
        let mut answer = [0u8; 1];
        raw.read_exact(&mut answer).await.expect("answer");
        assert_eq!(&answer, b"S");
        raw.write_all(bytes).await.expect("send");
        raw.shutdown().await.expect("half close");
        let (_, closed) = read_until_closed(&mut raw, PATIENT).await;
        assert!(
            closed,
            "the server closes a connection whose handshake failed"
        );
    }
    // Direct TLS that stops after the first byte: closed at the authentication timeout.
    let quick = TestServer::start(PgOptions {
        auth_timeout_ms: 200,
        ..certs.options(TlsRequire::Off)
    })
    .await;
    let mut raw = TcpStream::connect(quick.addr).await.expect("connect");
    raw.write_all(&[0x16]).await.expect("send");
    let (_, closed) = read_until_closed(&mut raw, PATIENT).await;
    assert!(closed);
    server.select_one_within(PATIENT).await;
    let client = connect(&server, &certs, &[], "sslmode=require")
        .await
        .expect("TLS login after the hostile ones");
    client.query_one("SELECT 1", &[]).await.expect("SELECT 1");
}

#[tokio::test]
async fn a_second_encryption_request_inside_tls_is_refused() {
    let certs = Certs::new();
    let server = TestServer::start(certs.options(TlsRequire::Off)).await;
    let mut raw = TcpStream::connect(server.addr).await.expect("connect");
    raw.write_all(&request_packet(SSL_REQUEST))
        .await
        .expect("send");
    let mut answer = [0u8; 1];
    raw.read_exact(&mut answer).await.expect("answer");
    assert_eq!(&answer, b"S");
    let name = ServerName::try_from("localhost").expect("name");
    let mut tls = certs
        .connector(&[])
        .connect(name, raw)
        .await
        .expect("handshake");
    tls.write_all(&request_packet(SSL_REQUEST))
        .await
        .expect("send");
    tls.flush().await.expect("flush");
    let mut got = Vec::new();
    let _ = tokio::time::timeout(PATIENT, tls.read_to_end(&mut got)).await;
    assert_eq!(error_code(&got).as_deref(), Some("08P01"), "{got:?}");
}
