//! A session's two halves of its connection: plain TCP, or TLS once the client asked for it
//! (an SSLRequest answered 'S', or PostgreSQL 17's direct TLS).
//!
//! ```text
//!  accept ─▶ ReadSide::Plain + WriteSide::Plain ──(SSLRequest 'S' / first byte 0x16)──▶
//!            reunite ─▶ Tls::accept_now ─▶ split ─▶ ReadSide::Tls + WriteSide::Tls
//! ```
//!
//! Invariants: only a plain read half exposes its socket ([`ReadSide::plain_socket`]), so
//! reads around the stream (the session's polling fast path) never bypass TLS; a connection
//! is upgraded at most once, before the startup packet.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use sundial_tls::{MaybeTls, Tls};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use crate::error::PgError;

/// The half a session reads from.
pub(crate) enum ReadSide {
    Plain(OwnedReadHalf),
    Tls(ReadHalf<MaybeTls>),
    /// Between the halves being taken for a handshake and its end; reads see end of stream.
    Detached,
}

/// The half a session writes to.
pub(crate) enum WriteSide {
    Plain(OwnedWriteHalf),
    Tls(WriteHalf<MaybeTls>),
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
    let stream = tls
        .accept_now(stream)
        .await
        .map_err(|e| PgError::Tls(e.to_string()))?;
    let (reader, writer) = tokio::io::split(MaybeTls::from(stream));
    Ok((ReadSide::Tls(reader), WriteSide::Tls(writer)))
}

impl ReadSide {
    /// The socket, when the connection is plain TCP: reading it directly reads the client's
    /// bytes. `None` under TLS.
    pub(crate) fn plain_socket(&self) -> Option<&TcpStream> {
        match self {
            ReadSide::Plain(reader) => Some(reader.as_ref()),
            ReadSide::Tls(_) | ReadSide::Detached => None,
        }
    }

    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, ReadSide::Tls(_))
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
            ReadSide::Tls(reader) => Pin::new(reader).poll_read(cx, buf),
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
