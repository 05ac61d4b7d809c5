//! TLS for `sundial serve`: the certificate from `--tls-cert` / `--tls-key`, the policy from
//! `--tls-require`, shared by the three TCP listeners, and its reload on SIGHUP.
//!
//! ```text
//!  --tls-cert, --tls-key ─▶ Tls::load ─▶ Arc<Tls> ─┬─▶ PostgreSQL (SSLRequest 'S', direct TLS)
//!  --tls-require        ─▶ TlsRequire ─────────────┼─▶ HTTP     (peek: HTTPS or HTTP, one port)
//!  --tls-handshake-timeout-ms ─────────────────────┴─▶ ILP/TCP  (peek: tcps:: or tcp::)
//!  SIGHUP ─▶ Tls::reload: the next handshakes use the new files; on error, the old ones
//! ```
//!
//! Invariants: the certificate and key are given together or not at all, and a policy that
//! requires TLS has a certificate (both checked before any listener starts); one `Tls` serves
//! every listener, so a reload reaches them all at once.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sundial_tls::{Tls, TlsRequire};
use tokio::sync::watch;

/// What a listener needs to serve TLS: the certificate (none: plain TCP only), the policy for
/// plain connections, and how long a handshake may take.
#[derive(Debug, Clone)]
pub(crate) struct ListenerTls {
    pub tls: Option<Arc<Tls>>,
    pub require: TlsRequire,
    pub handshake_timeout: Duration,
}

impl ListenerTls {
    /// From the `--tls-*` flags (`--tls-cert`, `--tls-key`, `--tls-require`,
    /// `--tls-handshake-timeout-ms`): loads the certificate, or says which flag is missing or
    /// what is wrong with which file.
    pub fn new(
        cert: Option<&Path>,
        key: Option<&Path>,
        require: TlsRequire,
        handshake_timeout_ms: u64,
    ) -> Result<ListenerTls, String> {
        if handshake_timeout_ms == 0 {
            return Err("--tls-handshake-timeout-ms must be at least 1".into());
        }
        let tls = match (cert, key) {
            (Some(cert), Some(key)) => Some(Tls::load(cert, key).map_err(|e| e.to_string())?),
            (None, None) => None,
            (Some(_), None) => {
                return Err(
                    "--tls-cert needs --tls-key (SUNDIAL_TLS_KEY): the certificate's private key"
                        .into(),
                );
            }
            (None, Some(_)) => {
                return Err(
                    "--tls-key needs --tls-cert (SUNDIAL_TLS_CERT): the certificate it belongs to"
                        .into(),
                );
            }
        };
        if tls.is_none() && require != TlsRequire::Off {
            return Err(format!(
                "--tls-require {require} needs a certificate: give --tls-cert and --tls-key"
            ));
        }
        Ok(ListenerTls {
            tls,
            require,
            handshake_timeout: Duration::from_millis(handshake_timeout_ms),
        })
    }

    /// Whether a connection from `peer` that is plain TCP may be served.
    pub fn allows_plain(&self, peer: &SocketAddr) -> bool {
        self.require.allows_plain(peer)
    }

    /// What the startup line adds after the listeners.
    pub fn describe(&self) -> &'static str {
        match (&self.tls, self.require) {
            (None, _) => "",
            (Some(_), TlsRequire::Off) => " (TLS)",
            (Some(_), TlsRequire::Remote) => " (TLS, required of remote clients)",
            (Some(_), TlsRequire::All) => " (TLS, required)",
        }
    }
}

/// A WARN line when HTTP clients beyond this machine would send their credentials (Basic
/// passwords, tokens, console session cookies) in clear: credentials required, no
/// certificate, and an HTTP address that is not loopback.
pub(crate) fn warn_cleartext_http(http_addr: SocketAddr, auth_required: bool, tls: &ListenerTls) {
    if auth_required && tls.tls.is_none() && !http_addr.ip().to_canonical().is_loopback() {
        tracing::warn!(
            "HTTP on {http_addr} is plain HTTP beyond loopback: passwords (Basic), tokens and \
             console sessions travel in clear; give --tls-cert and --tls-key (and \
             --tls-require remote)"
        );
    }
}

/// Reloads the certificate at every SIGHUP until `stop`: INFO when the new files serve, ERROR
/// with the reason when they cannot (the old certificate goes on serving). Without a
/// certificate, SIGHUP keeps its default action.
pub(crate) async fn reload_on_sighup(tls: Option<Arc<Tls>>, mut stop: watch::Receiver<bool>) {
    let Some(tls) = tls else {
        return;
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(hangups) => hangups,
            Err(e) => {
                tracing::warn!("cannot watch for SIGHUP, so TLS certificates will not reload: {e}");
                return;
            }
        };
        loop {
            tokio::select! {
                got = hangups.recv() => {
                    if got.is_none() {
                        return;
                    }
                    reload(&tls).await;
                }
                _ = async { let _ = stop.wait_for(|s| *s).await; } => return,
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (tls, stop.wait_for(|s| *s).await);
    }
}

/// Reads the files again (off the runtime: file I/O).
async fn reload(tls: &Arc<Tls>) {
    let reloading = tls.clone();
    match tokio::task::spawn_blocking(move || reloading.reload()).await {
        Ok(Ok(())) => tracing::info!(
            "TLS certificate reloaded from {} and {}",
            tls.cert_path().display(),
            tls.key_path().display()
        ),
        Ok(Err(e)) => {
            tracing::error!("TLS certificate not reloaded, the old one goes on serving: {e}")
        }
        Err(e) => tracing::error!("TLS certificate reload failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::serve::ServeArgs;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    impl ListenerTls {
        fn from_args(args: &ServeArgs) -> Result<ListenerTls, String> {
            ListenerTls::new(
                args.tls_cert.as_deref(),
                args.tls_key.as_deref(),
                args.tls_require,
                args.tls_handshake_timeout_ms,
            )
        }
    }

    fn parse(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("sundial").chain(args.iter().copied())).map(|c| c.serve)
    }

    #[test]
    fn the_tls_flags_go_together_and_name_what_is_missing() {
        let plain = parse(&[]).expect("no flags");
        let setup = ListenerTls::from_args(&plain).expect("plain TCP");
        assert!(setup.tls.is_none());
        assert_eq!(setup.require, TlsRequire::Off);
        assert_eq!(setup.handshake_timeout, Duration::from_secs(10));
        assert_eq!(setup.describe(), "");

        let only_cert = parse(&["--tls-cert", "/nonexistent/c.pem"]).expect("parse");
        let err = ListenerTls::from_args(&only_cert).expect_err("no key");
        assert!(err.contains("--tls-cert needs --tls-key"), "{err}");
        let only_key = parse(&["--tls-key", "/nonexistent/k.pem"]).expect("parse");
        let err = ListenerTls::from_args(&only_key).expect_err("no cert");
        assert!(err.contains("--tls-key needs --tls-cert"), "{err}");

        let require = parse(&["--tls-require", "remote"]).expect("parse");
        let err = ListenerTls::from_args(&require).expect_err("no certificate");
        assert!(
            err.contains("--tls-require remote needs a certificate"),
            "{err}"
        );

        let missing = parse(&[
            "--tls-cert",
            "/nonexistent/c.pem",
            "--tls-key",
            "/nonexistent/k.pem",
        ])
        .expect("parse");
        let err = ListenerTls::from_args(&missing).expect_err("missing files");
        assert!(err.contains("/nonexistent/c.pem"), "{err}");

        let zero = parse(&["--tls-handshake-timeout-ms", "0"]).expect("parse");
        assert!(ListenerTls::from_args(&zero).is_err());

        assert!(parse(&["--tls-require", "sometimes"]).is_err());
        for (name, want) in [
            ("off", TlsRequire::Off),
            ("remote", TlsRequire::Remote),
            ("all", TlsRequire::All),
        ] {
            assert_eq!(
                parse(&["--tls-require", name]).expect(name).tls_require,
                want
            );
        }
    }
}
