//! Which peers may use plain TCP when the server has TLS.

use std::net::{IpAddr, SocketAddr};

/// A listener's policy for plain (unencrypted) connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsRequire {
    /// Plain TCP from anyone.
    #[default]
    Off,
    /// Plain TCP from loopback addresses only (the same host); others must use TLS.
    Remote,
    /// TLS from everyone.
    All,
}

impl TlsRequire {
    /// The names flags and configuration files use.
    pub const NAMES: [&'static str; 3] = ["off", "remote", "all"];

    /// `off`, `remote` or `all` (any case).
    pub fn parse(text: &str) -> Option<TlsRequire> {
        match text.trim().to_ascii_lowercase().as_str() {
            "off" => Some(TlsRequire::Off),
            "remote" => Some(TlsRequire::Remote),
            "all" => Some(TlsRequire::All),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TlsRequire::Off => "off",
            TlsRequire::Remote => "remote",
            TlsRequire::All => "all",
        }
    }

    /// Whether a plain connection from `peer` may be served.
    pub fn allows_plain(&self, peer: &SocketAddr) -> bool {
        match self {
            TlsRequire::Off => true,
            TlsRequire::Remote => is_loopback(peer.ip()),
            TlsRequire::All => false,
        }
    }
}

impl std::fmt::Display for TlsRequire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TlsRequire {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        TlsRequire::parse(text)
            .ok_or_else(|| format!("unknown TLS requirement '{text}': use off, remote or all"))
    }
}

/// 127.0.0.0/8, ::1, and IPv4 loopback mapped into IPv6 (`::ffff:127.0.0.1`, how a dual-stack
/// socket sees an IPv4 client).
fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}
