//! COPY input, decoded chunk by chunk into the canonical CSV that `sundial-csv` reads.
//!
//! ```text
//!  CopyData chunks (split anywhere, even inside an escape or a binary field)
//!      │   TextDecoder    tab-separated, backslash escapes, \N
//!      ├─▶ CsvDecoder     PostgreSQL CSV: any delimiter/quote/escape, NULL string, HEADER
//!      │   BinaryDecoder  PGCOPY signature, tuples of length-prefixed binary values
//!      ▼
//!  canonical CSV: `,`-separated, `"`-quoted where needed, NULL = empty field, `\n` per record
//! ```
//!
//! Invariants: every record written out has exactly the target's column count (a record with
//! more or fewer fields is an error naming its line, as PostgreSQL's 22P04); a decoder keeps
//! only the field being assembled (at most `field_bytes_max` bytes) between chunks, so memory
//! is bounded by one field plus one chunk; line numbers count records as PostgreSQL does
//! (the header is line 1), so a quoted value spanning lines is still one line.

use std::fmt;

use sundial_query::text::{Fraction, push_date, push_timestamp};

use crate::types::{date_from_pg_days, timestamp_from_pg_micros};

/// What is wrong with the COPY input, and where.
#[derive(Debug, Clone, PartialEq)]
pub enum InputError {
    /// The data's structure is wrong (field count, binary framing): SQLSTATE 22P04.
    Format { line: u64, message: String },
    /// A binary value that does not fit its column: SQLSTATE 22P02.
    Value {
        line: u64,
        column: String,
        message: String,
    },
    /// A binary timestamp or date outside the range a table holds: SQLSTATE 22008.
    Range {
        line: u64,
        column: String,
        message: String,
    },
    /// The client ended the COPY without CopyDone.
    Aborted,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Format { line, message } => write!(f, "line {line}: {message}"),
            InputError::Value {
                line,
                column,
                message,
            }
            | InputError::Range {
                line,
                column,
                message,
            } => write!(f, "line {line}, column {column}: {message}"),
            InputError::Aborted => f.write_str("COPY was aborted"),
        }
    }
}

impl std::error::Error for InputError {}

/// How a target column's values are spelled in the canonical CSV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    /// PostgreSQL's boolean spellings (`t`, `yes`, `on`, `1`, ...) become `true`/`false`.
    Boolean,
    Integer,
    Float,
    /// Timestamps and dates: binary values become ISO 8601.
    Timestamp,
    /// Text; a 16-byte binary value is a UUID.
    Uuid,
    /// Text, taken as is.
    Text,
    /// Binary values become `\x` hex, the text form of `bytea`.
    Bytes,
}

/// A column the COPY fills: its name (for messages) and spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub name: String,
    pub spelling: Spelling,
}

/// Writes canonical CSV records, checking each has one field per target column.
struct Emitter {
    targets: Vec<Target>,
    /// Fields written in the current record.
    field: usize,
    /// Whether the current record has produced any byte yet.
    wrote: bool,
}

impl Emitter {
    fn new(targets: Vec<Target>) -> Emitter {
        Emitter {
            targets,
            field: 0,
            wrote: false,
        }
    }

    /// Appends one field; `None` is NULL.
    fn field(
        &mut self,
        out: &mut Vec<u8>,
        value: Option<&[u8]>,
        line: u64,
    ) -> Result<(), InputError> {
        let Some(target) = self.targets.get(self.field) else {
            return Err(InputError::Format {
                line,
                message: "extra data after last expected column".into(),
            });
        };
        if self.field > 0 {
            out.push(b',');
            self.wrote = true;
        }
        if let Some(v) = value {
            let v = match target.spelling {
                Spelling::Boolean => normalize_bool(v),
                _ => v,
            };
            push_csv_value(out, v);
            self.wrote = true;
        }
        self.field += 1;
        Ok(())
    }

    /// Ends the record; fails when fields are missing.
    fn end(&mut self, out: &mut Vec<u8>, line: u64) -> Result<(), InputError> {
        if let Some(missing) = self.targets.get(self.field) {
            return Err(InputError::Format {
                line,
                message: format!("missing data for column \"{}\"", missing.name),
            });
        }
        if !self.wrote {
            // A blank line is skipped by the CSV parser: one NULL field must still be a row.
            out.extend_from_slice(b"\"\"");
        }
        out.push(b'\n');
        self.field = 0;
        self.wrote = false;
        Ok(())
    }
}

/// Writes `v` as a CSV value, quoted when it holds a comma, quote or line break, or is empty
/// (an empty quoted value reads as NULL too, but keeps a one-column row from being blank).
fn push_csv_value(out: &mut Vec<u8>, v: &[u8]) {
    let needs_quotes = v.is_empty() || v.iter().any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n'));
    if !needs_quotes {
        out.extend_from_slice(v);
        return;
    }
    out.push(b'"');
    for &b in v {
        if b == b'"' {
            out.push(b'"');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// PostgreSQL's boolean input: `t`, `true`, `y`, `yes`, `on`, `1` and unique prefixes, any
/// case, surrounding spaces ignored. Anything else is passed on for the reader to reject.
fn normalize_bool(v: &[u8]) -> &[u8] {
    let t = v.trim_ascii().to_ascii_lowercase();
    let prefix_of = |word: &[u8]| !t.is_empty() && word.starts_with(&t);
    if prefix_of(b"true") || prefix_of(b"yes") || t == b"on" || t == b"1" {
        b"true"
    } else if prefix_of(b"false") || prefix_of(b"no") || t == b"off" || t == b"of" || t == b"0" {
        b"false"
    } else {
        v
    }
}

/// Tracks whether the raw bytes of a field (before unescaping) spell a given marker.
#[derive(Clone, Copy)]
struct Match {
    len: usize,
    equal: bool,
}

impl Match {
    const START: Match = Match {
        len: 0,
        equal: true,
    };

    fn push(&mut self, marker: &[u8], b: u8) {
        self.equal = self.equal && marker.get(self.len) == Some(&b);
        self.len += 1;
    }

    fn is(&self, marker: &[u8]) -> bool {
        self.equal && self.len == marker.len()
    }
}

/// The end-of-data marker, alone on a line.
const END_MARKER: &[u8] = b"\\.";

/// A COPY input format decoder.
pub enum Decoder {
    Text(TextDecoder),
    Csv(CsvDecoder),
    Binary(BinaryDecoder),
}

/// A text or CSV decoder: a state machine fed one byte at a time until the end marker.
trait ByteDecoder {
    /// Whether the end-of-data marker was read (bytes after it are ignored).
    fn is_done(&self) -> bool;
    fn byte(&mut self, b: u8, out: &mut Vec<u8>) -> Result<(), InputError>;

    fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), InputError> {
        for &b in data {
            if self.is_done() {
                break;
            }
            self.byte(b, out)?;
        }
        Ok(())
    }
}

impl Decoder {
    /// Decodes `data`, appending canonical CSV to `out`.
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), InputError> {
        match self {
            Decoder::Text(d) => d.feed(data, out),
            Decoder::Csv(d) => d.feed(data, out),
            Decoder::Binary(d) => d.feed(data, out),
        }
    }

    /// Ends the input: completes a last record without a line break.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), InputError> {
        match self {
            Decoder::Text(d) => d.finish(out),
            Decoder::Csv(d) => d.finish(out),
            Decoder::Binary(d) => d.finish(),
        }
    }

    /// Lines (records) before the first data record that the decoder dropped: the header.
    pub fn header_lines(&self) -> u64 {
        match self {
            Decoder::Text(d) => u64::from(d.header),
            Decoder::Csv(d) => u64::from(d.header),
            Decoder::Binary(_) => 0,
        }
    }
}

// ---- text ------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum TextState {
    Data,
    /// After a backslash.
    Backslash,
    /// `\` and up to three octal digits.
    Octal(u32, u8),
    /// `\x` and up to two hex digits.
    Hex(u32, u8),
    /// After a carriage return, which ends a line; a `\n` right after it belongs to it.
    AfterCr,
}

/// PostgreSQL's text format: fields separated by the delimiter, lines by `\n` (or `\r\n`),
/// `\` escapes (`\t`, `\n`, `\\`, octal, `\x` hex), and NULL spelled as the raw field `\N`.
pub struct TextDecoder {
    delimiter: u8,
    null: Vec<u8>,
    header: bool,
    /// The header line is still being skipped.
    in_header: bool,
    state: TextState,
    value: Vec<u8>,
    null_match: Match,
    end_match: Match,
    /// Whether the current line has any byte yet (so EOF knows whether a record is open).
    open: bool,
    line: u64,
    done: bool,
    field_bytes_max: usize,
    emit: Emitter,
}

impl TextDecoder {
    pub fn new(
        targets: Vec<Target>,
        delimiter: u8,
        null: &str,
        header: bool,
        field_bytes_max: usize,
    ) -> TextDecoder {
        TextDecoder {
            delimiter,
            null: null.as_bytes().to_vec(),
            header,
            in_header: header,
            state: TextState::Data,
            value: Vec::new(),
            null_match: Match::START,
            end_match: Match::START,
            open: false,
            line: 1,
            done: false,
            field_bytes_max,
            emit: Emitter::new(targets),
        }
    }

    fn step(&mut self, b: u8, out: &mut Vec<u8>) -> Result<(), InputError> {
        if self.in_header {
            match b {
                b'\n' => self.header_done(),
                b'\r' => {
                    self.header_done();
                    self.state = TextState::AfterCr;
                }
                _ => {}
            }
            return Ok(());
        }
        match self.state {
            TextState::AfterCr => {
                self.state = TextState::Data;
                if b != b'\n' {
                    self.byte(b, out)?;
                }
            }
            TextState::Data => self.data(b, out)?,
            TextState::Backslash => {
                self.raw(b);
                self.state = TextState::Data;
                match b {
                    b'b' => self.push(8)?,
                    b'f' => self.push(12)?,
                    b'n' => self.push(b'\n')?,
                    b'r' => self.push(b'\r')?,
                    b't' => self.push(b'\t')?,
                    b'v' => self.push(11)?,
                    b'0'..=b'7' => self.state = TextState::Octal(u32::from(b - b'0'), 1),
                    b'x' => self.state = TextState::Hex(0, 0),
                    other => self.push(other)?,
                }
            }
            TextState::Octal(value, digits) => {
                if (b'0'..=b'7').contains(&b) {
                    self.raw(b);
                    let value = value * 8 + u32::from(b - b'0');
                    if digits == 2 {
                        self.state = TextState::Data;
                        self.push(value as u8)?;
                    } else {
                        self.state = TextState::Octal(value, digits + 1);
                    }
                } else {
                    self.state = TextState::Data;
                    self.push(value as u8)?;
                    self.data(b, out)?;
                }
            }
            TextState::Hex(value, digits) => match (b as char).to_digit(16) {
                Some(d) => {
                    self.raw(b);
                    if digits == 1 {
                        self.state = TextState::Data;
                        self.push((value * 16 + d) as u8)?;
                    } else {
                        self.state = TextState::Hex(d, 1);
                    }
                }
                None => {
                    self.state = TextState::Data;
                    // `\x` without digits is a plain `x`.
                    self.push(if digits == 0 { b'x' } else { value as u8 })?;
                    self.data(b, out)?;
                }
            },
        }
        Ok(())
    }

    fn header_done(&mut self) {
        self.in_header = false;
        self.line += 1;
    }

    /// A byte outside any escape.
    fn data(&mut self, b: u8, out: &mut Vec<u8>) -> Result<(), InputError> {
        match b {
            b'\\' => {
                self.raw(b);
                self.state = TextState::Backslash;
            }
            b'\n' => self.end_field(out, true)?,
            b'\r' => {
                self.end_field(out, true)?;
                self.state = TextState::AfterCr;
            }
            _ if b == self.delimiter => self.end_field(out, false)?,
            _ => {
                self.raw(b);
                self.push(b)?;
            }
        }
        Ok(())
    }

    fn raw(&mut self, b: u8) {
        self.open = true;
        self.null_match.push(&self.null, b);
        self.end_match.push(END_MARKER, b);
    }

    fn push(&mut self, b: u8) -> Result<(), InputError> {
        if self.value.len() >= self.field_bytes_max {
            return Err(InputError::Format {
                line: self.line,
                message: format!("a field is longer than {} bytes", self.field_bytes_max),
            });
        }
        self.value.push(b);
        Ok(())
    }

    fn end_field(&mut self, out: &mut Vec<u8>, end_of_line: bool) -> Result<(), InputError> {
        if end_of_line && self.emit.field == 0 && self.end_match.is(END_MARKER) {
            self.done = true;
            return Ok(());
        }
        let value = (!self.null_match.is(&self.null)).then_some(self.value.as_slice());
        self.emit.field(out, value, self.line)?;
        self.value.clear();
        self.null_match = Match::START;
        self.end_match = Match::START;
        self.open = true;
        if end_of_line {
            self.emit.end(out, self.line)?;
            self.line += 1;
            self.open = false;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), InputError> {
        if self.done || self.in_header {
            return Ok(());
        }
        match self.state {
            TextState::Octal(value, _) | TextState::Hex(value, 1..) => self.push(value as u8)?,
            TextState::Hex(_, 0) => self.push(b'x')?,
            _ => {}
        }
        self.state = TextState::Data;
        if self.open {
            self.end_field(out, true)?;
        }
        Ok(())
    }
}

impl ByteDecoder for TextDecoder {
    fn is_done(&self) -> bool {
        self.done
    }

    #[inline]
    fn byte(&mut self, b: u8, out: &mut Vec<u8>) -> Result<(), InputError> {
        self.step(b, out)
    }
}

// ---- CSV -------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum CsvState {
    /// At the start of a field.
    Start,
    Unquoted,
    Quoted,
    /// A quote inside a quoted value: the closing one, or the first of a doubled pair.
    QuoteInQuoted,
    /// The escape character (when it differs from the quote) inside a quoted value.
    EscapeInQuoted,
    AfterCr,
}

/// PostgreSQL's CSV format: a field is NULL when it is unquoted and equals the NULL string
/// (empty by default); quoted values may hold delimiters and line breaks.
pub struct CsvDecoder {
    delimiter: u8,
    quote: u8,
    escape: u8,
    null: Vec<u8>,
    header: bool,
    in_header: bool,
    state: CsvState,
    value: Vec<u8>,
    quoted: bool,
    open: bool,
    line: u64,
    done: bool,
    field_bytes_max: usize,
    emit: Emitter,
}

impl CsvDecoder {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        targets: Vec<Target>,
        delimiter: u8,
        quote: u8,
        escape: u8,
        null: &str,
        header: bool,
        field_bytes_max: usize,
    ) -> CsvDecoder {
        CsvDecoder {
            delimiter,
            quote,
            escape,
            null: null.as_bytes().to_vec(),
            header,
            in_header: header,
            state: CsvState::Start,
            value: Vec::new(),
            quoted: false,
            open: false,
            line: 1,
            done: false,
            field_bytes_max,
            emit: Emitter::new(targets),
        }
    }

    fn step(&mut self, b: u8, out: &mut Vec<u8>) -> Result<(), InputError> {
        match self.state {
            CsvState::AfterCr => {
                self.state = CsvState::Start;
                if b != b'\n' {
                    self.byte(b, out)?;
                }
            }
            CsvState::Start | CsvState::Unquoted => {
                self.open = true;
                match b {
                    b'\n' => self.end_field(out, true)?,
                    b'\r' => {
                        self.end_field(out, true)?;
                        self.state = CsvState::AfterCr;
                    }
                    _ if b == self.delimiter => self.end_field(out, false)?,
                    _ if b == self.quote => {
                        self.quoted = true;
                        self.state = CsvState::Quoted;
                    }
                    _ => {
                        self.state = CsvState::Unquoted;
                        self.push(b)?;
                    }
                }
            }
            CsvState::Quoted => {
                if b == self.escape && self.escape != self.quote {
                    self.state = CsvState::EscapeInQuoted;
                } else if b == self.quote {
                    self.state = CsvState::QuoteInQuoted;
                } else {
                    self.push(b)?;
                }
            }
            CsvState::QuoteInQuoted => {
                if b == self.quote && self.escape == self.quote {
                    self.push(b)?;
                    self.state = CsvState::Quoted;
                } else {
                    self.state = CsvState::Unquoted;
                    self.byte(b, out)?;
                }
            }
            CsvState::EscapeInQuoted => {
                self.state = CsvState::Quoted;
                if b == self.quote || b == self.escape {
                    self.push(b)?;
                } else {
                    self.push(self.escape)?;
                    self.byte(b, out)?;
                }
            }
        }
        Ok(())
    }

    fn push(&mut self, b: u8) -> Result<(), InputError> {
        if self.value.len() >= self.field_bytes_max {
            return Err(InputError::Format {
                line: self.line,
                message: format!("a field is longer than {} bytes", self.field_bytes_max),
            });
        }
        self.value.push(b);
        Ok(())
    }

    fn end_field(&mut self, out: &mut Vec<u8>, end_of_line: bool) -> Result<(), InputError> {
        let unquoted = !self.quoted;
        if self.in_header {
            self.reset_field();
            if end_of_line {
                self.in_header = false;
                self.line += 1;
                self.open = false;
            }
            return Ok(());
        }
        if end_of_line && self.emit.field == 0 && unquoted && self.value == END_MARKER {
            self.done = true;
            return Ok(());
        }
        let value = (!(unquoted && self.value == self.null)).then_some(self.value.as_slice());
        self.emit.field(out, value, self.line)?;
        self.reset_field();
        if end_of_line {
            self.emit.end(out, self.line)?;
            self.line += 1;
            self.open = false;
        }
        Ok(())
    }

    fn reset_field(&mut self) {
        self.value.clear();
        self.quoted = false;
        self.state = CsvState::Start;
    }

    fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), InputError> {
        if self.done {
            return Ok(());
        }
        match self.state {
            CsvState::Quoted | CsvState::EscapeInQuoted => {
                return Err(InputError::Format {
                    line: self.line,
                    message: "unterminated CSV quoted field".into(),
                });
            }
            _ => {}
        }
        if self.open {
            self.end_field(out, true)?;
        }
        Ok(())
    }
}

impl ByteDecoder for CsvDecoder {
    fn is_done(&self) -> bool {
        self.done
    }

    #[inline]
    fn byte(&mut self, b: u8, out: &mut Vec<u8>) -> Result<(), InputError> {
        self.step(b, out)
    }
}

// ---- binary ----------------------------------------------------------------------------------

/// The binary format's signature: `PGCOPY\n\377\r\n\0`.
pub const BINARY_SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

#[derive(Clone, Copy, PartialEq, Eq)]
enum BinaryState {
    Header,
    TupleStart,
    /// Inside a tuple: the next field's index.
    Field(usize),
    /// After the trailer: anything more is ignored.
    Done,
}

/// PostgreSQL's binary format: a signature, then tuples of length-prefixed values in each
/// column type's binary form, then a `-1` trailer.
pub struct BinaryDecoder {
    /// Bytes received but not yet decoded: at most one value plus one chunk.
    pending: Vec<u8>,
    state: BinaryState,
    line: u64,
    field_bytes_max: usize,
    text: Vec<u8>,
    emit: Emitter,
}

impl BinaryDecoder {
    pub fn new(targets: Vec<Target>, field_bytes_max: usize) -> BinaryDecoder {
        BinaryDecoder {
            pending: Vec::new(),
            state: BinaryState::Header,
            line: 1,
            field_bytes_max,
            text: Vec::new(),
            emit: Emitter::new(targets),
        }
    }

    fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), InputError> {
        if self.state == BinaryState::Done {
            return Ok(());
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.extend_from_slice(data);
        let mut at = 0;
        let result = loop {
            match self.step(&pending[at..], out) {
                Ok(Some(used)) => at += used,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        pending.drain(..at);
        self.pending = pending;
        result
    }

    /// Decodes one item from the front of `input`: how many bytes it took, or `None` when more
    /// bytes are needed.
    fn step(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<Option<usize>, InputError> {
        match self.state {
            BinaryState::Done => Ok(None),
            BinaryState::Header => self.header(input),
            BinaryState::TupleStart => {
                let Some(count) = be_i16(input) else {
                    return Ok(None);
                };
                if count == -1 {
                    self.state = BinaryState::Done;
                    return Ok(Some(2));
                }
                if usize::try_from(count).ok() != Some(self.emit.targets.len()) {
                    return Err(self.format_error(format!(
                        "row field count is {count}, expected {}",
                        self.emit.targets.len()
                    )));
                }
                self.state = BinaryState::Field(0);
                self.end_tuple_if_complete(out)?;
                Ok(Some(2))
            }
            BinaryState::Field(index) => {
                let Some(len) = be_i32(input) else {
                    return Ok(None);
                };
                if len == -1 {
                    self.emit.field(out, None, self.line)?;
                    self.state = BinaryState::Field(index + 1);
                    self.end_tuple_if_complete(out)?;
                    return Ok(Some(4));
                }
                let len = usize::try_from(len)
                    .ok()
                    .filter(|l| *l <= self.field_bytes_max)
                    .ok_or_else(|| self.format_error(format!("invalid field size {len}")))?;
                let Some(value) = input.get(4..4 + len) else {
                    return Ok(None);
                };
                self.value(index, value, out)?;
                self.state = BinaryState::Field(index + 1);
                self.end_tuple_if_complete(out)?;
                Ok(Some(4 + len))
            }
        }
    }

    fn header(&mut self, input: &[u8]) -> Result<Option<usize>, InputError> {
        let fixed = BINARY_SIGNATURE.len() + 8;
        if input.len() < fixed {
            return Ok(None);
        }
        if &input[..BINARY_SIGNATURE.len()] != BINARY_SIGNATURE {
            return Err(self.format_error("COPY file signature not recognized".into()));
        }
        let flags = be_i32(&input[11..]).unwrap_or(0);
        if flags & (1 << 16) != 0 {
            return Err(self.format_error("COPY data with OIDs is not supported".into()));
        }
        let extension = be_i32(&input[15..]).unwrap_or(-1);
        let extension = usize::try_from(extension)
            .ok()
            .filter(|l| *l <= self.field_bytes_max)
            .ok_or_else(|| self.format_error("invalid COPY file header".into()))?;
        if input.len() < fixed + extension {
            return Ok(None);
        }
        self.state = BinaryState::TupleStart;
        Ok(Some(fixed + extension))
    }

    fn end_tuple_if_complete(&mut self, out: &mut Vec<u8>) -> Result<(), InputError> {
        if self.state == BinaryState::Field(self.emit.targets.len()) {
            self.emit.end(out, self.line)?;
            self.line += 1;
            self.state = BinaryState::TupleStart;
        }
        Ok(())
    }

    /// Converts one binary value to its canonical text by its column's spelling.
    fn value(&mut self, index: usize, v: &[u8], out: &mut Vec<u8>) -> Result<(), InputError> {
        let spelling = self
            .emit
            .targets
            .get(index)
            .map_or(Spelling::Text, |t| t.spelling);
        self.text.clear();
        if let Err(wrong) = binary_to_text(spelling, v, &mut self.text) {
            let line = self.line;
            let column = self
                .emit
                .targets
                .get(index)
                .map_or_else(String::new, |t| t.name.clone());
            return Err(match wrong {
                Wrong::Size => InputError::Value {
                    line,
                    column,
                    message: format!("binary value of {} bytes does not fit the column", v.len()),
                },
                Wrong::Range(message) => InputError::Range {
                    line,
                    column,
                    message,
                },
            });
        }
        let text = std::mem::take(&mut self.text);
        let result = self.emit.field(out, Some(&text), self.line);
        self.text = text;
        result
    }

    fn format_error(&self, message: String) -> InputError {
        InputError::Format {
            line: self.line,
            message,
        }
    }

    fn finish(&mut self) -> Result<(), InputError> {
        match self.state {
            BinaryState::Done => Ok(()),
            BinaryState::TupleStart if self.pending.is_empty() => Ok(()),
            _ => Err(self.format_error("unexpected EOF in COPY data".into())),
        }
    }
}

fn be_i16(b: &[u8]) -> Option<i16> {
    Some(i16::from_be_bytes(b.get(..2)?.try_into().ok()?))
}

fn be_i32(b: &[u8]) -> Option<i32> {
    Some(i32::from_be_bytes(b.get(..4)?.try_into().ok()?))
}

fn be_i64(b: &[u8]) -> Option<i64> {
    Some(i64::from_be_bytes(b.get(..8)?.try_into().ok()?))
}

/// Why a binary value has no text form for its column.
enum Wrong {
    /// Its size fits no type of the column.
    Size,
    /// A timestamp or date outside the range a table holds; the message names it.
    Range(String),
}

/// Writes the text form of a binary value. Integer and float widths are taken from the
/// value's length, so a client may send any of `int2`/`int4`/`int8` (or `float4`/`float8`)
/// for a column.
fn binary_to_text(spelling: Spelling, v: &[u8], out: &mut Vec<u8>) -> Result<(), Wrong> {
    let mut ints = itoa::Buffer::new();
    let mut floats = ryu::Buffer::new();
    match (spelling, v.len()) {
        (Spelling::Boolean, 1) => out.extend_from_slice(if v[0] != 0 { b"true" } else { b"false" }),
        (Spelling::Integer, 2) => {
            out.extend_from_slice(ints.format(be_i16(v).unwrap_or(0)).as_bytes())
        }
        (Spelling::Integer, 4) => {
            out.extend_from_slice(ints.format(be_i32(v).unwrap_or(0)).as_bytes())
        }
        (Spelling::Integer, 8) => {
            out.extend_from_slice(ints.format(be_i64(v).unwrap_or(0)).as_bytes())
        }
        (Spelling::Float, 4) => {
            let f = f32::from_bits(be_i32(v).unwrap_or(0) as u32);
            out.extend_from_slice(floats.format(f).as_bytes());
        }
        (Spelling::Float, 8) => {
            let f = f64::from_bits(be_i64(v).unwrap_or(0) as u64);
            out.extend_from_slice(floats.format(f).as_bytes());
        }
        (Spelling::Timestamp, 8) => {
            let nanos = timestamp_from_pg_micros(be_i64(v).unwrap_or(0))
                .map_err(|e| Wrong::Range(e.to_string()))?;
            push_timestamp(out, nanos, b'T', Fraction::Fixed(6));
            out.push(b'Z');
        }
        (Spelling::Timestamp, 4) => {
            let days = date_from_pg_days(be_i32(v).unwrap_or(0))
                .map_err(|e| Wrong::Range(e.to_string()))?;
            push_date(out, i64::from(days));
        }
        (Spelling::Uuid, 16) => push_uuid(out, v),
        (Spelling::Uuid | Spelling::Text, _) => out.extend_from_slice(v),
        (Spelling::Bytes, _) => {
            out.extend_from_slice(b"\\x");
            for b in v {
                out.extend_from_slice(format!("{b:02x}").as_bytes());
            }
        }
        _ => return Err(Wrong::Size),
    }
    Ok(())
}

fn push_uuid(out: &mut Vec<u8>, v: &[u8]) {
    for (i, b) in v.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push(b'-');
        }
        out.extend_from_slice(format!("{b:02x}").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Microseconds between 1970-01-01 and PostgreSQL's epoch, 2000-01-01.
    const PG_EPOCH_OFFSET_US: i64 = 946_684_800_000_000;

    fn targets(spellings: &[Spelling]) -> Vec<Target> {
        spellings
            .iter()
            .enumerate()
            .map(|(i, s)| Target {
                name: format!("c{i}"),
                spelling: *s,
            })
            .collect()
    }

    /// Decodes `input` fed in chunks of every size from 1 up, checking each gives `expected`.
    fn decode_all(make: impl Fn() -> Decoder, input: &[u8]) -> Result<String, InputError> {
        let mut whole = None;
        for chunk in 1..=input.len().max(1) {
            let mut decoder = make();
            let mut out = Vec::new();
            let mut result = Ok(());
            for part in input.chunks(chunk) {
                result = decoder.feed(part, &mut out);
                if result.is_err() {
                    break;
                }
            }
            let result = result
                .and_then(|()| decoder.finish(&mut out))
                .map(|()| String::from_utf8(out).unwrap());
            match &whole {
                None => whole = Some(result),
                Some(w) => assert_eq!(w, &result, "chunk size {chunk}"),
            }
        }
        whole.unwrap()
    }

    fn text(spellings: &[Spelling], input: &str) -> Result<String, InputError> {
        let t = targets(spellings);
        decode_all(
            || Decoder::Text(TextDecoder::new(t.clone(), b'\t', "\\N", false, 1 << 20)),
            input.as_bytes(),
        )
    }

    #[test]
    fn text_escapes_nulls_and_quoting() {
        use Spelling::*;
        let out = text(
            &[Text, Integer, Boolean],
            "a\\tb\t1\tt\nx,\"y\"\t\\N\tf\r\n\\\\N\t-2\tYES\nq\\x41\\101\\x\t3\toff",
        )
        .unwrap();
        assert_eq!(
            out,
            "a\tb,1,true\n\"x,\"\"y\"\"\",,false\n\\N,-2,true\nqAAx,3,false\n"
        );
        // An empty line is one empty field; a lone NULL still makes a (non-blank) row.
        assert_eq!(text(&[Text], "\n\\N\n").unwrap(), "\"\"\n\"\"\n");
        // The end marker stops the data.
        assert_eq!(text(&[Text], "a\n\\.\nb\n").unwrap(), "a\n");
        // An escaped newline is data, not a line break.
        assert_eq!(text(&[Text], "a\\\nb\n").unwrap(), "\"a\nb\"\n");
    }

    #[test]
    fn text_field_count_errors_name_the_line() {
        use Spelling::*;
        assert_eq!(
            text(&[Text, Text], "a\tb\nc\n"),
            Err(InputError::Format {
                line: 2,
                message: "missing data for column \"c1\"".into()
            })
        );
        assert_eq!(
            text(&[Text], "a\nb\tc\n"),
            Err(InputError::Format {
                line: 2,
                message: "extra data after last expected column".into()
            })
        );
    }

    #[test]
    fn text_header_is_skipped() {
        let t = targets(&[Spelling::Text]);
        let out = decode_all(
            || Decoder::Text(TextDecoder::new(t.clone(), b'|', "", true, 1 << 20)),
            b"name\nx\n\n",
        );
        assert_eq!(out.unwrap(), "x\n\"\"\n");
    }

    fn csv(
        spellings: &[Spelling],
        input: &str,
        null: &str,
        header: bool,
    ) -> Result<String, InputError> {
        let t = targets(spellings);
        decode_all(
            || {
                Decoder::Csv(CsvDecoder::new(
                    t.clone(),
                    b',',
                    b'"',
                    b'"',
                    null,
                    header,
                    1 << 20,
                ))
            },
            input.as_bytes(),
        )
    }

    #[test]
    fn csv_quotes_nulls_header_and_multiline_values() {
        use Spelling::*;
        let out = csv(
            &[Text, Integer, Text],
            "name,n,note\n\"a,b\",1,\"say \"\"hi\"\"\"\n,2,\"two\nlines\"\r\nNA,,\"\"\n",
            "",
            true,
        )
        .unwrap();
        assert_eq!(
            out,
            "\"a,b\",1,\"say \"\"hi\"\"\"\n,2,\"two\nlines\"\nNA,,\"\"\n"
        );
        let out = csv(&[Text, Text], "NA,\"NA\"\n", "NA", false).unwrap();
        assert_eq!(out, ",NA\n");
        // Line numbers count records: the multi-line value is line 2, the bad record line 3.
        assert_eq!(
            csv(&[Text, Text], "a,b\n\"x\ny\",z\nonly\n", "", false),
            Err(InputError::Format {
                line: 3,
                message: "missing data for column \"c1\"".into()
            })
        );
        assert!(matches!(
            csv(&[Text], "\"open\n", "", false),
            Err(InputError::Format { .. })
        ));
    }

    #[test]
    fn csv_with_a_distinct_escape() {
        let t = targets(&[Spelling::Text]);
        let out = decode_all(
            || {
                Decoder::Csv(CsvDecoder::new(
                    t.clone(),
                    b',',
                    b'"',
                    b'\\',
                    "",
                    false,
                    1 << 20,
                ))
            },
            b"\"a\\\"b\\\\c\\d\"\n",
        );
        assert_eq!(out.unwrap(), "\"a\"\"b\\c\\d\"\n");
    }

    fn binary_input(rows: &[Vec<Option<Vec<u8>>>]) -> Vec<u8> {
        let mut b = BINARY_SIGNATURE.to_vec();
        b.extend_from_slice(&0i32.to_be_bytes());
        b.extend_from_slice(&0i32.to_be_bytes());
        for row in rows {
            b.extend_from_slice(&(row.len() as i16).to_be_bytes());
            for v in row {
                match v {
                    None => b.extend_from_slice(&(-1i32).to_be_bytes()),
                    Some(v) => {
                        b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                        b.extend_from_slice(v);
                    }
                }
            }
        }
        b.extend_from_slice(&(-1i16).to_be_bytes());
        b
    }

    #[test]
    fn binary_values_by_column() {
        use Spelling::*;
        let t = targets(&[Timestamp, Integer, Float, Text, Boolean, Uuid, Bytes]);
        let ts = (1_704_067_200_000_000i64 - PG_EPOCH_OFFSET_US)
            .to_be_bytes()
            .to_vec();
        let input = binary_input(&[
            vec![
                Some(ts),
                Some(7i32.to_be_bytes().to_vec()),
                Some(0.5f64.to_be_bytes().to_vec()),
                Some(b"a,b".to_vec()),
                Some(vec![1]),
                Some((0u8..16).collect()),
                Some(vec![0, 255]),
            ],
            vec![
                None,
                Some((-3i16).to_be_bytes().to_vec()),
                None,
                None,
                None,
                None,
                None,
            ],
        ]);
        let out = decode_all(
            || Decoder::Binary(BinaryDecoder::new(t.clone(), 1 << 20)),
            &input,
        );
        assert_eq!(
            out.unwrap(),
            "2024-01-01T00:00:00.000000Z,7,0.5,\"a,b\",true,00010203-0405-0607-0809-0a0b0c0d0e0f,\\x00ff\n,-3,,,,,\n"
        );
        let bad = binary_input(&[vec![Some(vec![1, 2, 3])]]);
        let t1 = targets(&[Integer]);
        assert!(matches!(
            decode_all(
                || Decoder::Binary(BinaryDecoder::new(t1.clone(), 1 << 20)),
                &bad
            ),
            Err(InputError::Value { line: 1, .. })
        ));
        let short = &input[..input.len() - 5];
        assert!(matches!(
            decode_all(
                || Decoder::Binary(BinaryDecoder::new(t.clone(), 1 << 20)),
                short
            ),
            Err(InputError::Format { .. })
        ));
    }

    #[test]
    fn binary_times_outside_the_table_range_are_named_not_wrapped() {
        let t = targets(&[Spelling::Timestamp]);
        let decode = |value: Vec<u8>| {
            decode_all(
                || Decoder::Binary(BinaryDecoder::new(t.clone(), 1 << 20)),
                &binary_input(&[vec![Some(value)]]),
            )
        };
        let range_message = |result: Result<String, InputError>| match result {
            Err(InputError::Range {
                line: 1, message, ..
            }) => message,
            other => panic!("expected a range error, got {other:?}"),
        };
        let max = range_message(decode(i64::MAX.to_be_bytes().to_vec()));
        assert!(max.contains("294277-01-09 04:00:54.775807"), "{max}");
        // 2300-01-01 fits an i64 of microseconds but no table.
        let micros_2300 = (10_413_792_000i64 - 946_684_800) * 1_000_000;
        let late = range_message(decode(micros_2300.to_be_bytes().to_vec()));
        assert!(late.contains("2300-01-01 00:00:00.000000"), "{late}");
        // 1600-01-01 as a date (days since 2000-01-01).
        let early = range_message(decode((-146_097i32).to_be_bytes().to_vec()));
        assert!(early.contains("\"1600-01-01\""), "{early}");
        // The first and last microseconds a table holds pass.
        let first = (sundial_storage::TIMESTAMP_MIN_NS / 1000 - PG_EPOCH_OFFSET_US).to_be_bytes();
        assert_eq!(
            decode(first.to_vec()).unwrap(),
            "1678-01-01T00:00:00.000000Z\n"
        );
        let last =
            (sundial_storage::TIMESTAMP_END_NS / 1000 - 1 - PG_EPOCH_OFFSET_US).to_be_bytes();
        assert_eq!(
            decode(last.to_vec()).unwrap(),
            "2261-12-31T23:59:59.999999Z\n"
        );
    }
}
