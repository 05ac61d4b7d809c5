//! A session's two halves of its connection: plain TCP, or TLS once the client asked for it
//! (an SSLRequest answered 'S', or PostgreSQL 17's direct TLS).
//!
//! ```text
//!  accept ─▶ ReadSide::Plain + WriteSide::Plain ──(SSLRequest 'S' / first byte 0x16)──▶
//!            reunite ─▶ Tls::accept_now(EagerTcp) ─▶ split ─▶ ReadSide::Tls + WriteSide::Tls
//! ```
//!
//! Invariants: only a plain read half exposes its socket for reading ([`Watch::Plain`]), so
//! reads around the stream (the session's polling fast path) never bypass TLS; a TLS half
//! exposes its socket for peeking only ([`Watch::Tls`]); a connection is upgraded at most
//! once, before the startup packet.

use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use sundial_tls::Tls;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio_rustls::server::TlsStream;

use crate::error::PgError;

/// TCP under a session's TLS. Reads try the socket itself before tokio's readiness, which
/// only the runtime's event loop refreshes: bytes the session saw arrive by peeking
/// ([`Watch::Tls`]) reach rustls at once, without the task sleeping until the event loop
/// reports them. When the socket has nothing, the read falls back to tokio's, which
/// registers for the wake-up.
pub(crate) struct EagerTcp(TcpStream);

impl AsyncRead for EagerTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() > 0 {
            let socket = socket2::SockRef::from(&this.0);
            match io::Read::read(&mut &*socket, buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Pin::new(&mut this.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for EagerTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

/// The socket a session may watch for the client's next bytes without awaiting.
pub(crate) enum Watch<'a> {
    /// Plain TCP: what it reads is what the client sent.
    Plain(&'a TcpStream),
    /// The socket under TLS (a second descriptor of it): peeked only, its bytes are records
    /// for rustls.
    Tls(&'a socket2::Socket),
}

/// The half a session reads from.
pub(crate) enum ReadSide {
    Plain(OwnedReadHalf),
    Tls {
        reader: ReadHalf<TlsStream<EagerTcp>>,
        socket: socket2::Socket,
    },
    /// Between the halves being taken for a handshake and its end; reads see end of stream.
    Detached,
}

/// The half a session writes to.
pub(crate) enum WriteSide {
    Plain(OwnedWriteHalf),
    Tls(WriteHalf<TlsStream<EagerTcp>>),
    /// As [`ReadSide::Detached`]; writes fail.
    Detached,
}

/// Splits a freshly accepted connection.
pub(crate) fn plain(stream: TcpStream) -> (ReadSide, WriteSide) {
    let (reader, writer) = stream.into_split();
    (ReadSide::Plain(reader), WriteSide::Plain(writer))
}

/// Runs the TLS handshake on a plain connection and returns its TLS halves. Fails on a
/// connection that is TLS already.
pub(crate) async fn upgrade(
    reader: ReadSide,
    writer: WriteSide,
    tls: &Tls,
) -> Result<(ReadSide, WriteSide), PgError> {
    let (ReadSide::Plain(reader), WriteSide::Plain(writer)) = (reader, writer) else {
        return Err(PgError::Protocol(
            "a second TLS negotiation on one connection".into(),
        ));
    };
    let stream = reader
        .reunite(writer)
        .map_err(|e| PgError::Internal(format!("the connection's halves do not match: {e}")))?;
    let socket = socket2::Socket::from(stream.as_fd().try_clone_to_owned()?);
    let peer = stream.peer_addr().ok();
    let stream = tls
        .accept_now(EagerTcp(stream), peer)
        .await
        .map_err(|e| PgError::Tls(e.to_string()))?;
    let (reader, writer) = tokio::io::split(stream);
    Ok((ReadSide::Tls { reader, socket }, WriteSide::Tls(writer)))
}

impl ReadSide {
    /// The socket to watch for the client's next bytes; `None` while detached.
    pub(crate) fn watch(&self) -> Option<Watch<'_>> {
        match self {
            ReadSide::Plain(reader) => Some(Watch::Plain(reader.as_ref())),
            ReadSide::Tls { socket, .. } => Some(Watch::Tls(socket)),
            ReadSide::Detached => None,
        }
    }

    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, ReadSide::Tls { .. })
    }

    /// The first byte the client sent, without consuming it (`None` at end of stream).
    /// Under TLS or detached: `None`.
    pub(crate) async fn peek_first(&mut self) -> Result<Option<u8>, PgError> {
        let ReadSide::Plain(reader) = self else {
            return Ok(None);
        };
        let mut first = [0u8; 1];
        Ok(match reader.peek(&mut first).await? {
            0 => None,
            _ => Some(first[0]),
        })
    }
}

impl AsyncRead for ReadSide {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadSide::Plain(reader) => Pin::new(reader).poll_read(cx, buf),
            ReadSide::Tls { reader, .. } => Pin::new(reader).poll_read(cx, buf),
            ReadSide::Detached => Poll::Ready(Ok(())),
        }
    }
}

fn detached() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "the connection is in the middle of a TLS handshake",
    )
}

impl AsyncWrite for WriteSide {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteSide::Plain(writer) => Pin::new(writer).poll_write(cx, buf),
            WriteSide::Tls(writer) => Pin::new(writer).poll_write(cx, buf),
            WriteSide::Detached => Poll::Ready(Err(detached())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteSide::Plain(writer) => Pin::new(writer).poll_flush(cx),
            WriteSide::Tls(writer) => Pin::new(writer).poll_flush(cx),
            WriteSide::Detached => Poll::Ready(Err(detached())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteSide::Plain(writer) => Pin::new(writer).poll_shutdown(cx),
            WriteSide::Tls(writer) => Pin::new(writer).poll_shutdown(cx),
            WriteSide::Detached => Poll::Ready(Ok(())),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteSide::Plain(writer) => Pin::new(writer).poll_write_vectored(cx, bufs),
            WriteSide::Tls(writer) => Pin::new(writer).poll_write_vectored(cx, bufs),
            WriteSide::Detached => Poll::Ready(Err(detached())),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            WriteSide::Plain(writer) => writer.is_write_vectored(),
            WriteSide::Tls(writer) => writer.is_write_vectored(),
            WriteSide::Detached => false,
        }
    }
}
