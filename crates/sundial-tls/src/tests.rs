//! Handshakes against a real tokio-rustls client, over loopback, with certificates rcgen makes:
//! a CA, and server certificates it signs for `localhost`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::ClientConfig;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;

use crate::{ALPN_POSTGRESQL, MaybeTls, Tls, TlsError, TlsRequire, accept};

/// Long enough never to fire on a loaded machine, except in the tests waiting for it.
const PATIENT: Duration = Duration::from_secs(30);

/// A CA that signs server certificates.
struct Ca {
    cert: CertificateDer<'static>,
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new() -> Ca {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).expect("CA certificate");
        Ca {
            cert: cert.der().clone(),
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A server certificate for localhost and 127.0.0.1: (certificate PEM, key PEM, DER).
    fn server_cert(&self) -> (String, String, CertificateDer<'static>) {
        let key = KeyPair::generate().expect("server key");
        let params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("server params");
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        (cert.pem(), key.serialize_pem(), cert.der().clone())
    }

    /// Writes a server certificate and its key into `dir`; returns their paths and the DER.
    fn write_server_cert(&self, dir: &Path) -> (PathBuf, PathBuf, CertificateDer<'static>) {
        let (cert, key, der) = self.server_cert();
        let cert_path = dir.join("server.crt");
        let key_path = dir.join("server.key");
        std::fs::write(&cert_path, cert).expect("write certificate");
        std::fs::write(&key_path, key).expect("write key");
        (cert_path, key_path, der)
    }

    fn client(
        &self,
        alpn: &[&[u8]],
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert.clone()).expect("trust the CA");
        let mut config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(versions)
                .expect("versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsConnector::from(Arc::new(config))
    }
}

fn localhost() -> ServerName<'static> {
    ServerName::try_from("localhost").expect("server name")
}

/// A listener whose first connection goes through [`accept`]; the task returns what it gave.
async fn serve_one(
    tls: Option<Arc<Tls>>,
    timeout: Duration,
) -> (
    SocketAddr,
    tokio::task::JoinHandle<Result<MaybeTls, TlsError>>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        accept(stream, tls.as_deref(), timeout).await
    });
    (addr, task)
}

/// Echoes one line back over the accepted stream.
async fn echo_line(stream: &mut MaybeTls) {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stream.read_exact(&mut byte).await.is_ok() {
        line.push(byte[0]);
        if byte[0] == b'\n' {
            break;
        }
    }
    stream.write_all(&line).await.expect("echo");
    stream.flush().await.expect("flush");
}

/// Connects with `connector`, sends a line, and returns what came back with the server's
/// certificate and the agreed ALPN protocol.
async fn tls_round_trip(
    addr: SocketAddr,
    connector: &TlsConnector,
) -> (Vec<u8>, CertificateDer<'static>, Option<Vec<u8>>) {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let mut tls = connector
        .connect(localhost(), tcp)
        .await
        .expect("handshake");
    let (_, conn) = tls.get_ref();
    let cert = conn.peer_certificates().expect("a certificate")[0].clone();
    let alpn = conn.alpn_protocol().map(<[u8]>::to_vec);
    tls.write_all(b"ping\n").await.expect("send");
    tls.flush().await.expect("flush");
    let mut back = vec![0u8; 5];
    tls.read_exact(&mut back).await.expect("echo");
    (back, cert, alpn)
}

#[tokio::test]
async fn a_tls_client_completes_the_handshake_and_talks() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = Ca::new();
    let (cert, key, der) = ca.write_server_cert(dir.path());
    let tls = Tls::load(&cert, &key).expect("load");
    for (alpn, versions, expect_alpn) in [
        (vec![], vec![&rustls::version::TLS13], None),
        (vec![], vec![&rustls::version::TLS12], None),
        (
            vec![ALPN_POSTGRESQL],
            vec![&rustls::version::TLS13],
            Some(ALPN_POSTGRESQL.to_vec()),
        ),
        (
            vec![b"h2".as_slice(), b"http/1.1".as_slice()],
            vec![&rustls::version::TLS13],
            Some(b"http/1.1".to_vec()),
        ),
    ] {
        let (addr, server) = serve_one(Some(tls.clone()), PATIENT).await;
        let connector = ca.client(&alpn, &versions);
        let client = tokio::spawn(async move { tls_round_trip(addr, &connector).await });
        let mut stream = server.await.expect("task").expect("accepted");
        assert!(stream.is_tls());
        assert!(stream.as_plain().is_none());
        assert_eq!(stream.alpn_protocol().map(<[u8]>::to_vec), expect_alpn);
        assert!(stream.peer_addr().expect("peer").ip().is_loopback());
        echo_line(&mut stream).await;
        let (back, seen, alpn_seen) = client.await.expect("client");
        assert_eq!(back, b"ping\n");
        assert_eq!(seen, der);
        assert_eq!(alpn_seen, expect_alpn);
    }
}

#[tokio::test]
async fn plain_bytes_pass_through_the_peek_untouched() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = Ca::new();
    let (cert, key, _) = ca.write_server_cert(dir.path());
    let tls = Tls::load(&cert, &key).expect("load");
    let sent = b"cpu,host=a usage=1 1\nGET / HTTP/1.1\r\n\r\n".to_vec();
    for configured in [Some(tls), None] {
        let (addr, server) = serve_one(configured, PATIENT).await;
        let mut client = TcpStream::connect(addr).await.expect("connect");
        client.write_all(&sent).await.expect("send");
        client.shutdown().await.expect("close");
        let mut stream = server.await.expect("task").expect("accepted");
        assert!(!stream.is_tls());
        assert!(stream.as_plain().is_some());
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.expect("read");
        assert_eq!(got, sent, "every byte, the first one included");
    }
}

#[tokio::test]
async fn a_peer_closing_at_once_or_staying_silent_is_plain() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = Ca::new();
    let (cert, key, _) = ca.write_server_cert(dir.path());
    let tls = Tls::load(&cert, &key).expect("load");

    let (addr, server) = serve_one(Some(tls.clone()), PATIENT).await;
    drop(TcpStream::connect(addr).await.expect("connect"));
    let mut stream = server.await.expect("task").expect("accepted");
    assert!(!stream.is_tls());
    let mut got = Vec::new();
    stream.read_to_end(&mut got).await.expect("read");
    assert!(got.is_empty(), "the caller sees the end of the stream");

    // Nothing within the timeout: not a TLS client (they speak first); its bytes, when they
    // come, are read as plain.
    let (addr, server) = serve_one(Some(tls), Duration::from_millis(50)).await;
    let mut client = TcpStream::connect(addr).await.expect("connect");
    let mut stream = server.await.expect("task").expect("accepted");
    assert!(!stream.is_tls());
    client.write_all(b"late\n").await.expect("send");
    client.shutdown().await.expect("close");
    let mut got = Vec::new();
    stream.read_to_end(&mut got).await.expect("read");
    assert_eq!(got, b"late\n");
}

#[tokio::test]
async fn a_client_stalling_mid_handshake_hits_the_timeout() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = Ca::new();
    let (cert, key, _) = ca.write_server_cert(dir.path());
    let tls = Tls::load(&cert, &key).expect("load");
    let (addr, server) = serve_one(Some(tls), Duration::from_millis(100)).await;
    let mut client = TcpStream::connect(addr).await.expect("connect");
    // The start of a ClientHello record, then nothing.
    client
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await
        .expect("send");
    let err = server.await.expect("task").expect_err("timed out");
    assert!(matches!(err, TlsError::HandshakeTimeout { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("did not finish within 100 ms"), "{text}");
    assert!(text.contains("127.0.0.1:"), "names the peer: {text}");
    drop(client);
}

#[tokio::test]
async fn garbage_after_a_handshake_byte_fails_the_handshake_with_a_message() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = Ca::new();
    let (cert, key, _) = ca.write_server_cert(dir.path());
    let tls = Tls::load(&cert, &key).expect("load");
    let (addr, server) = serve_one(Some(tls), PATIENT).await;
    let mut client = TcpStream::connect(addr).await.expect("connect");
    client
        .write_all(&[0x16, 0xff, 0xff, 0x00, 0x05, 1, 2, 3, 4, 5])
        .await
        .expect("send");
    let err = server.await.expect("task").expect_err("refused");
    assert!(matches!(err, TlsError::Handshake { .. }), "{err}");
    assert!(err.to_string().starts_with("TLS handshake with 127.0.0.1:"));
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_certificate_fails_cleanly() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = Ca::new();
    let other_ca = Ca::new();
    let (cert, key, _) = ca.write_server_cert(dir.path());
    let tls = Tls::load(&cert, &key).expect("load");
    let (addr, server) = serve_one(Some(tls), PATIENT).await;
    let connector = other_ca.client(&[], &[&rustls::version::TLS13]);
    let tcp = TcpStream::connect(addr).await.expect("connect");
    assert!(connector.connect(localhost(), tcp).await.is_err());
    let err = server.await.expect("task").expect_err("refused");
    assert!(matches!(err, TlsError::Handshake { .. }), "{err}");
}

#[tokio::test]
async fn reload_serves_the_new_certificate_and_keeps_the_old_on_error() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = Ca::new();
    let (cert, key, first) = ca.write_server_cert(dir.path());
    let tls = Tls::load(&cert, &key).expect("load");
    assert_eq!(tls.cert_path(), cert);
    assert_eq!(tls.key_path(), key);
    let connector = ca.client(&[], &[&rustls::version::TLS13]);

    let seen = |tls: Arc<Tls>, connector: TlsConnector| async move {
        let (addr, server) = serve_one(Some(tls), PATIENT).await;
        let client = tokio::spawn(async move { tls_round_trip(addr, &connector).await });
        let mut stream = server.await.expect("task").expect("accepted");
        echo_line(&mut stream).await;
        client.await.expect("client").1
    };
    assert_eq!(seen(tls.clone(), connector.clone()).await, first);

    let (_, _, second) = ca.write_server_cert(dir.path());
    assert_ne!(first, second);
    tls.reload().expect("reload");
    assert_eq!(tls.certificate().end_entity_cert().expect("cert"), &second);
    assert_eq!(seen(tls.clone(), connector.clone()).await, second);

    // A broken key file: the reload fails, naming it, and the second certificate stays.
    std::fs::write(&key, "not a key").expect("write");
    let err = tls.reload().expect_err("bad key");
    assert!(matches!(err, TlsError::NoPrivateKey { .. }), "{err}");
    assert!(err.to_string().contains(key.to_str().expect("utf-8")));
    assert_eq!(seen(tls.clone(), connector.clone()).await, second);

    // A certificate whose key is another's: refused too.
    let (_, other_key, _) = ca.server_cert();
    std::fs::write(&key, other_key).expect("write");
    let err = tls.reload().expect_err("mismatch");
    assert!(matches!(err, TlsError::KeyMismatch { .. }), "{err}");
    assert_eq!(seen(tls.clone(), connector).await, second);
}

/// Writes `cert` and `key` as files and loads them.
fn load_texts(dir: &Path, cert: &[u8], key: &[u8]) -> Result<Arc<Tls>, TlsError> {
    let cert_path = dir.join("c.pem");
    let key_path = dir.join("k.pem");
    std::fs::write(&cert_path, cert).expect("write");
    std::fs::write(&key_path, key).expect("write");
    Tls::load(&cert_path, &key_path)
}

#[test]
fn bad_missing_and_mismatched_files_give_clear_errors() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = Ca::new();
    let (cert, key, _) = ca.server_cert();
    let (_, other_key, _) = ca.server_cert();
    let d = dir.path();

    let err = Tls::load(d.join("missing.crt"), d.join("missing.key")).expect_err("missing");
    assert!(matches!(err, TlsError::Read { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("cannot read the TLS certificate file ") && text.contains("missing.crt"),
        "{text}"
    );

    std::fs::write(d.join("only.crt"), &cert).expect("write");
    let err = Tls::load(d.join("only.crt"), d.join("missing.key")).expect_err("no key file");
    assert!(err.to_string().contains("TLS private key file"), "{err}");

    let err = Tls::load(d, d.join("missing.key")).expect_err("a directory");
    assert!(matches!(err, TlsError::Read { .. }), "{err}");

    // The files swapped: the certificate file holds a key, the key file a certificate.
    let err = load_texts(d, key.as_bytes(), cert.as_bytes()).expect_err("swapped");
    assert!(matches!(err, TlsError::NoCertificate { .. }), "{err}");
    assert!(err.to_string().contains("BEGIN CERTIFICATE"), "{err}");
    let err = load_texts(d, cert.as_bytes(), cert.as_bytes()).expect_err("no key");
    assert!(matches!(err, TlsError::NoPrivateKey { .. }), "{err}");

    let err = load_texts(d, b"", key.as_bytes()).expect_err("empty");
    assert!(matches!(err, TlsError::NoCertificate { .. }), "{err}");

    let err = load_texts(d, cert.as_bytes(), other_key.as_bytes()).expect_err("mismatch");
    assert!(matches!(err, TlsError::KeyMismatch { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("k.pem") && text.contains("c.pem"), "{text}");

    // An unterminated section.
    let cut = &cert[..cert.len() / 2];
    let err = load_texts(d, cut.as_bytes(), key.as_bytes()).expect_err("cut");
    assert!(matches!(err, TlsError::Pem { .. }), "{err}");
    assert!(err.to_string().contains("END CERTIFICATE"), "{err}");

    // Base64 that does not decode.
    let bad = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
    let err = load_texts(d, bad.as_bytes(), key.as_bytes()).expect_err("base64");
    assert!(matches!(err, TlsError::Pem { .. }), "{err}");

    // Well-formed PEM around bytes that are no certificate.
    let junk = "-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n";
    let err = load_texts(d, junk.as_bytes(), key.as_bytes()).expect_err("junk");
    assert!(matches!(err, TlsError::BadCertificate { .. }), "{err}");

    // Well-formed PEM around bytes that are no key.
    let junk_key = "-----BEGIN PRIVATE KEY-----\nAAECAwQF\n-----END PRIVATE KEY-----\n";
    let err = load_texts(d, cert.as_bytes(), junk_key.as_bytes()).expect_err("junk key");
    assert!(matches!(err, TlsError::UnusableKey { .. }), "{err}");

    // A huge file is not read whole.
    let huge = vec![b'A'; (1 << 20) + 10];
    let err = load_texts(d, &huge, key.as_bytes()).expect_err("huge");
    assert!(matches!(err, TlsError::TooLarge { .. }), "{err}");

    // The right pair still loads, with a chain (the CA after the server's certificate).
    let chain = format!("{cert}{}", ca.cert_pem);
    let tls = load_texts(d, chain.as_bytes(), key.as_bytes()).expect("chain");
    assert_eq!(tls.certificate().cert.len(), 2);
    assert!(format!("{tls:?}").contains("c.pem"));
}

#[test]
fn tls_require_names_and_who_may_use_plain_tcp() {
    assert_eq!(TlsRequire::parse("off"), Some(TlsRequire::Off));
    assert_eq!(TlsRequire::parse(" Remote "), Some(TlsRequire::Remote));
    assert_eq!(TlsRequire::parse("ALL"), Some(TlsRequire::All));
    assert_eq!(TlsRequire::parse("yes"), None);
    assert_eq!(TlsRequire::parse(""), None);
    assert!(
        "maybe"
            .parse::<TlsRequire>()
            .unwrap_err()
            .contains("off, remote or all")
    );
    for name in TlsRequire::NAMES {
        assert_eq!(TlsRequire::parse(name).expect("name").as_str(), name);
    }
    assert_eq!(TlsRequire::default(), TlsRequire::Off);

    let addr = |s: &str| s.parse::<SocketAddr>().expect("address");
    let local = [
        addr("127.0.0.1:5000"),
        addr("127.8.9.10:5000"),
        addr("[::1]:5000"),
        addr("[::ffff:127.0.0.1]:5000"),
    ];
    let remote = [
        addr("10.0.0.5:5555"),
        addr("192.168.1.2:1"),
        addr("[2001:db8::1]:5000"),
        addr("[::ffff:10.0.0.5]:5000"),
        addr("0.0.0.0:1"),
    ];
    for peer in local.iter().chain(&remote) {
        assert!(TlsRequire::Off.allows_plain(peer));
        assert!(!TlsRequire::All.allows_plain(peer));
    }
    for peer in &local {
        assert!(TlsRequire::Remote.allows_plain(peer), "{peer}");
    }
    for peer in &remote {
        assert!(!TlsRequire::Remote.allows_plain(peer), "{peer}");
    }
}
