//! A connection that is TLS or plain TCP, and [`accept`], which tells them apart by the
//! first byte without consuming it.
//!
//! Invariant: [`accept`] reads nothing from a plain connection (it peeks), and waits at most
//! its timeout in all: for the first byte, then for the handshake.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;

use crate::certs::Tls;
use crate::error::{Peer, TlsError};

/// The first byte of a TLS connection: the content type of a handshake record.
pub const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// An accepted connection: plain TCP, or TLS over TCP after a finished handshake.
#[derive(Debug)]
pub enum MaybeTls {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl MaybeTls {
    pub fn is_tls(&self) -> bool {
        matches!(self, MaybeTls::Tls(_))
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.tcp().peer_addr()
    }

    /// The TCP socket under the connection (for socket options; reading it directly would
    /// bypass TLS).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            MaybeTls::Plain(stream) => stream,
            MaybeTls::Tls(stream) => stream.get_ref().0,
        }
    }

    /// The socket when the connection is plain TCP: what it reads is what the client sent.
    pub fn as_plain(&self) -> Option<&TcpStream> {
        match self {
            MaybeTls::Plain(stream) => Some(stream),
            MaybeTls::Tls(_) => None,
        }
    }

    /// The application protocol the client and server agreed on by ALPN, if any.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        match self {
            MaybeTls::Plain(_) => None,
            MaybeTls::Tls(stream) => stream.get_ref().1.alpn_protocol(),
        }
    }
}

impl From<TlsStream<TcpStream>> for MaybeTls {
    fn from(stream: TlsStream<TcpStream>) -> Self {
        MaybeTls::Tls(Box::new(stream))
    }
}

impl From<TcpStream> for MaybeTls {
    fn from(stream: TcpStream) -> Self {
        MaybeTls::Plain(stream)
    }
}

impl AsyncRead for MaybeTls {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            MaybeTls::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for MaybeTls {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            MaybeTls::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(stream) => Pin::new(stream).poll_flush(cx),
            MaybeTls::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            MaybeTls::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            MaybeTls::Tls(stream) => Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            MaybeTls::Plain(stream) => stream.is_write_vectored(),
            MaybeTls::Tls(stream) => stream.is_write_vectored(),
        }
    }
}

/// Accepts a connection on a port where TLS starts at the first byte (HTTP, ILP over TCP):
/// peeks that byte and, when it opens a TLS handshake record and `tls` is configured, runs the
/// handshake. Anything else is plain TCP, every byte still unread: another first byte, a peer
/// that closed without sending one (its reader then sees the end of the stream), or one that
/// sent nothing within `handshake_timeout` (TLS clients speak first, at once). The timeout
/// covers the wait for the first byte and the handshake together.
pub async fn accept(
    stream: TcpStream,
    tls: Option<&Tls>,
    handshake_timeout: Duration,
) -> Result<MaybeTls, TlsError> {
    let Some(tls) = tls else {
        return Ok(MaybeTls::Plain(stream));
    };
    let deadline = Instant::now() + handshake_timeout;
    let mut first = [0u8; 1];
    match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
        Err(_elapsed) => return Ok(MaybeTls::Plain(stream)),
        Ok(Ok(0)) => return Ok(MaybeTls::Plain(stream)),
        Ok(Ok(_)) if first[0] != TLS_HANDSHAKE_RECORD => return Ok(MaybeTls::Plain(stream)),
        Ok(Ok(_)) => {}
        Ok(Err(source)) => {
            return Err(TlsError::Io {
                peer: Peer(stream.peer_addr().ok()),
                source,
            });
        }
    }
    let address = stream.peer_addr().ok();
    let peer = Peer(address);
    match tokio::time::timeout_at(deadline, tls.accept_now(stream, address)).await {
        Ok(Ok(stream)) => Ok(MaybeTls::Tls(Box::new(stream))),
        Ok(Err(e)) => Err(e),
        Err(_elapsed) => Err(TlsError::HandshakeTimeout {
            peer,
            ms: handshake_timeout.as_millis(),
        }),
    }
}
