//! Message framing for protocol v3: reading frontend messages out of a byte buffer and writing
//! backend messages into one.
//!
//! ```text
//!  startup:  [len: i32][code: i32][payload]         (no type byte; len counts itself)
//!  regular:  [type: u8][len: i32][payload]          (len counts itself, not the type byte)
//! ```
//!
//! Reading never allocates per message: a [`Message`] borrows its payload from the connection's
//! input buffer. Writing appends to one output buffer that the session flushes once per round
//! trip; each message's length is patched in after its body is written.

use crate::error::PgError;

/// Protocol 3.0, the only version spoken.
pub const PROTOCOL_V3: i32 = 196_608;
pub const SSL_REQUEST: i32 = 80_877_103;
pub const GSSENC_REQUEST: i32 = 80_877_104;
pub const CANCEL_REQUEST: i32 = 80_877_102;

/// A frontend message: its type byte and payload, borrowed from the input buffer.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    pub tag: u8,
    pub body: &'a [u8],
}

/// Splits the first complete regular message off `input`, returning it and its total size, or
/// `None` when more bytes are needed. Rejects lengths outside `4..=message_bytes_max`.
pub fn next_message(
    input: &[u8],
    message_bytes_max: usize,
) -> Result<Option<(Message<'_>, usize)>, PgError> {
    if input.len() < 5 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([input[1], input[2], input[3], input[4]]);
    let len = checked_len(len, message_bytes_max)?;
    if input.len() < 1 + len {
        return Ok(None);
    }
    Ok(Some((
        Message {
            tag: input[0],
            body: &input[5..1 + len],
        },
        1 + len,
    )))
}

/// Splits the startup packet (length-prefixed, no type byte) off `input`.
pub fn next_startup(
    input: &[u8],
    message_bytes_max: usize,
) -> Result<Option<(&[u8], usize)>, PgError> {
    if input.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([input[0], input[1], input[2], input[3]]);
    let len = checked_len(len, message_bytes_max)?;
    if len < 8 {
        return Err(PgError::Protocol(format!(
            "startup packet of {len} bytes is too short"
        )));
    }
    if input.len() < len {
        return Ok(None);
    }
    Ok(Some((&input[4..len], len)))
}

fn checked_len(len: i32, message_bytes_max: usize) -> Result<usize, PgError> {
    if len < 4 {
        return Err(PgError::Protocol(format!("invalid message length {len}")));
    }
    let len = len as usize;
    if len > message_bytes_max {
        return Err(PgError::TooLarge {
            bytes: len,
            limit: message_bytes_max,
        });
    }
    Ok(len)
}

/// A cursor over a message body, with protocol errors instead of panics on short input.
pub struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], PgError> {
        if self.data.len() < n {
            return Err(PgError::Protocol("message ends early".into()));
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }

    pub fn u8(&mut self) -> Result<u8, PgError> {
        Ok(self.take(1)?[0])
    }

    pub fn i16(&mut self) -> Result<i16, PgError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub fn i32(&mut self) -> Result<i32, PgError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A count field (i16) that must not be negative.
    pub fn count(&mut self) -> Result<usize, PgError> {
        let n = self.i16()?;
        usize::try_from(n).map_err(|_| PgError::Protocol(format!("negative count {n}")))
    }

    /// A NUL-terminated UTF-8 string.
    pub fn cstr(&mut self) -> Result<&'a str, PgError> {
        let end = self
            .data
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| PgError::Protocol("string without terminator".into()))?;
        let s = std::str::from_utf8(&self.data[..end])
            .map_err(|_| PgError::Protocol("string is not valid UTF-8".into()))?;
        self.data = &self.data[end + 1..];
        Ok(s)
    }

    /// A length-prefixed value (`-1` is NULL).
    pub fn value(&mut self) -> Result<Option<&'a [u8]>, PgError> {
        let len = self.i32()?;
        if len == -1 {
            return Ok(None);
        }
        let len =
            usize::try_from(len).map_err(|_| PgError::Protocol(format!("value length {len}")))?;
        Ok(Some(self.take(len)?))
    }
}

/// The output buffer: backend messages appended back to back.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    /// Starts a message with `tag`; returns the offset to pass to [`Writer::end`].
    #[inline]
    pub fn begin(&mut self, tag: u8) -> usize {
        self.buf.push(tag);
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        at
    }

    /// Patches the length of the message started at `at`.
    #[inline]
    pub fn end(&mut self, at: usize) {
        let len = (self.buf.len() - at) as i32;
        self.buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
    }

    #[inline]
    pub fn i16(&mut self, v: i16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub fn cstr(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }

    /// A message with an empty body.
    pub fn empty(&mut self, tag: u8) {
        let at = self.begin(tag);
        self.end(at);
    }

    pub fn authentication(&mut self, code: i32, data: &[u8]) {
        let at = self.begin(b'R');
        self.i32(code);
        self.buf.extend_from_slice(data);
        self.end(at);
    }

    pub fn parameter_status(&mut self, name: &str, value: &str) {
        let at = self.begin(b'S');
        self.cstr(name);
        self.cstr(value);
        self.end(at);
    }

    pub fn backend_key_data(&mut self, pid: i32, secret: i32) {
        let at = self.begin(b'K');
        self.i32(pid);
        self.i32(secret);
        self.end(at);
    }

    pub fn ready_for_query(&mut self, status: u8) {
        let at = self.begin(b'Z');
        self.buf.push(status);
        self.end(at);
    }

    pub fn command_complete(&mut self, tag: &str) {
        let at = self.begin(b'C');
        self.cstr(tag);
        self.end(at);
    }

    /// ErrorResponse (`E`) or NoticeResponse (`N`). `position` is 1-based, in characters;
    /// `context` is where it happened (`COPY t, line 3`).
    pub fn error(
        &mut self,
        tag: u8,
        severity: &str,
        code: &str,
        message: &str,
        position: Option<usize>,
        context: Option<&str>,
    ) {
        let at = self.begin(tag);
        for (field, value) in [
            (b'S', severity),
            (b'V', severity),
            (b'C', code),
            (b'M', message),
        ] {
            self.buf.push(field);
            self.cstr(value);
        }
        if let Some(p) = position {
            self.buf.push(b'P');
            self.cstr(itoa::Buffer::new().format(p));
        }
        if let Some(c) = context {
            self.buf.push(b'W');
            self.cstr(c);
        }
        self.buf.push(0);
        self.end(at);
    }
}
