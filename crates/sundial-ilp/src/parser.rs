//! [`LineParser`]: one line of ILP to a [`Line`] view over the input.

use std::fmt;
use std::iter::FusedIterator;
use std::slice;

use memchr::{memchr, memchr2};

use crate::error::{ErrorKind, ParseError};
use crate::text::{Text, TextKind};

/// A field value. Strings stay borrowed from the input (see [`Text`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FieldValue<'a> {
    /// `1`, `-1.5`, `1e-3`, `NaN`, `Infinity`, `-Infinity`: a number without suffix is a float.
    Float(f64),
    /// `123i`
    Integer(i64),
    /// `123u`
    UInteger(u64),
    /// `1451606400000000t`: a timestamp in microseconds since the epoch (QuestDB's extension).
    TimestampMicros(i64),
    /// `1451606400000000000n`: a timestamp in nanoseconds since the epoch.
    TimestampNanos(i64),
    /// `"..."`, without the quotes.
    Str(Text<'a>),
    /// `t`, `T`, `true`, `True`, `TRUE`, `f`, `F`, `false`, `False`, `FALSE`
    Bool(bool),
}

/// A byte range of the line plus whether it contains escapes.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    end: usize,
    escaped: bool,
}

impl Span {
    #[inline]
    fn text<'a>(self, line: &'a str, kind: TextKind) -> Text<'a> {
        // Spans start and end next to ASCII delimiters or at the ends of the line, so they are
        // always char boundaries of the (validated) line; `get` only avoids a panic path.
        Text::new(
            line.get(self.start..self.end).unwrap_or_default(),
            self.escaped,
            kind,
        )
    }
}

#[derive(Clone, Copy, Debug)]
struct TagSpan {
    key: Span,
    value: Span,
}

#[derive(Clone, Copy, Debug)]
enum RawValue {
    Float(f64),
    Integer(i64),
    UInteger(u64),
    TimestampMicros(i64),
    TimestampNanos(i64),
    Str(Span),
    Bool(bool),
}

#[derive(Clone, Copy, Debug)]
struct FieldSpan {
    key: Span,
    value: RawValue,
}

/// Parses lines into [`Line`] views. Keeps the tag and field tables of the last line, so after
/// the first few lines parsing allocates nothing.
#[derive(Debug, Clone)]
pub struct LineParser {
    max_line_bytes: usize,
    tags: Vec<TagSpan>,
    fields: Vec<FieldSpan>,
}

impl LineParser {
    /// A parser that rejects lines longer than `max_line_bytes` (counting a trailing `\r`).
    pub fn new(max_line_bytes: usize) -> Self {
        LineParser {
            max_line_bytes,
            tags: Vec::new(),
            fields: Vec::new(),
        }
    }

    pub fn max_line_bytes(&self) -> usize {
        self.max_line_bytes
    }

    /// Parses one complete line, without its terminating `\n` (a trailing `\r` is ignored, as
    /// are leading spaces and tabs). Blank lines and `#` comments are errors here
    /// ([`ErrorKind::EmptyMeasurement`], [`ErrorKind::Comment`]); [`split_lines`] skips them.
    ///
    /// Error offsets are byte offsets into `line`.
    ///
    /// [`split_lines`]: crate::split_lines
    pub fn parse_line<'a>(&'a mut self, line: &'a [u8]) -> Result<Line<'a>, ParseError> {
        self.tags.clear();
        self.fields.clear();
        if line.len() > self.max_line_bytes {
            return Err(ParseError::new(ErrorKind::LineTooLong, self.max_line_bytes));
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // One validation of the whole line covers every name and string in it: they are cut at
        // ASCII delimiters, so each is valid UTF-8 too.
        let text = std::str::from_utf8(line)
            .map_err(|e| ParseError::new(ErrorKind::InvalidUtf8, e.valid_up_to()))?;
        // No part of a line may hold a NUL: names and strings end up in SYMBOL and VARCHAR
        // columns, and a NUL anywhere else (numbers, the timestamp) is malformed anyway. One
        // memchr pass over the whole line covers every part of it.
        if let Some(at) = memchr(0, line) {
            return err(ErrorKind::NulByte, at);
        }
        let (measurement, series_end) = parse_series(text, &mut self.tags)?;
        let timestamp = parse_fields_into(text, series_end, &mut self.fields)?;
        Ok(Line {
            text,
            measurement,
            tags: &self.tags,
            fields: &self.fields,
            timestamp,
            series_len: (measurement.start == 0).then_some(series_end),
        })
    }

    /// Parses only the fields and timestamp of `line`, whose series (measurement and tags) is
    /// `line[..series_len]` as [`series_len`] found it, for a caller that already knows that
    /// series from an earlier line with the same bytes there. The series part is not looked
    /// at again (not even checked for UTF-8); the result has an empty measurement and no tags.
    /// Error offsets are byte offsets into `line`, as with [`parse_line`](Self::parse_line).
    pub fn parse_fields<'a>(
        &'a mut self,
        line: &'a [u8],
        series_len: usize,
    ) -> Result<Line<'a>, ParseError> {
        self.tags.clear();
        self.fields.clear();
        if line.len() > self.max_line_bytes {
            return Err(ParseError::new(ErrorKind::LineTooLong, self.max_line_bytes));
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(rest) = line.get(series_len..) else {
            return err(ErrorKind::MissingFields, line.len());
        };
        let text = std::str::from_utf8(rest)
            .map_err(|e| ParseError::new(ErrorKind::InvalidUtf8, series_len + e.valid_up_to()))?;
        if let Some(at) = memchr(0, rest) {
            return err(ErrorKind::NulByte, series_len + at);
        }
        let timestamp = parse_fields_into(text, 0, &mut self.fields)
            .map_err(|e| ParseError::new(e.kind, series_len + e.offset))?;
        Ok(Line {
            text,
            measurement: Span {
                start: 0,
                end: 0,
                escaped: false,
            },
            tags: &[],
            fields: &self.fields,
            timestamp,
            series_len: None,
        })
    }
}

/// The length of `line`'s series (its measurement and tags, up to the space before the
/// fields) when the line's bytes alone say where it ends: the line starts with the measurement
/// (no leading space or tab, not a comment) and no backslash comes before its first space.
/// Then two lines with equal `line[..len]` have the same measurement and tags, so a receiver
/// can recognise a series it has seen by those bytes and parse only the rest
/// ([`LineParser::parse_fields`]). `None` for other lines, which [`LineParser::parse_line`]
/// parses whole; for a line it parses without error, [`Line::series_len`] is this length.
pub fn series_len(line: &[u8]) -> Option<usize> {
    if matches!(line.first(), None | Some(b' ' | b'\t' | b'#')) {
        return None;
    }
    let end = memchr(b' ', line)?;
    match memchr(b'\\', line.get(..end)?) {
        Some(_) => None,
        None => Some(end),
    }
}

/// A parsed line: a view over the input and the parser's tables. Names and strings are borrowed
/// from the input; numbers and booleans are already converted.
#[derive(Clone, Copy)]
pub struct Line<'a> {
    text: &'a str,
    measurement: Span,
    tags: &'a [TagSpan],
    fields: &'a [FieldSpan],
    timestamp: Option<i64>,
    /// Bytes of the line before the space that ends its tags, when the line starts with the
    /// measurement; `None` from [`LineParser::parse_fields`].
    series_len: Option<usize>,
}

impl<'a> Line<'a> {
    /// The whole line as parsed (without a trailing `\r`).
    pub fn as_str(&self) -> &'a str {
        self.text
    }

    pub fn measurement(&self) -> Text<'a> {
        self.measurement.text(self.text, TextKind::Measurement)
    }

    /// `(key, value)` pairs in line order; duplicates are kept.
    pub fn tags(&self) -> Tags<'a> {
        Tags {
            text: self.text,
            inner: self.tags.iter(),
        }
    }

    /// `(key, value)` pairs in line order; duplicates are kept.
    pub fn fields(&self) -> Fields<'a> {
        Fields {
            text: self.text,
            inner: self.fields.iter(),
        }
    }

    /// The raw timestamp in the unit the sender chose (see [`Precision`](crate::Precision)), or
    /// `None` when the line has none (the receiver then uses its clock).
    pub fn timestamp(&self) -> Option<i64> {
        self.timestamp
    }

    /// How many bytes the measurement and tags take, from the start of the line up to the
    /// space before the fields, when the line starts with its measurement (no leading spaces);
    /// `None` otherwise, and for lines from [`LineParser::parse_fields`].
    pub fn series_len(&self) -> Option<usize> {
        self.series_len
    }

    pub fn tag_count(&self) -> usize {
        self.tags.len()
    }

    pub fn field_count(&self) -> usize {
        self.fields.len()
    }
}

impl fmt::Debug for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Line")
            .field("measurement", &self.measurement())
            .field("tags", &DebugIter(self.tags()))
            .field("fields", &DebugIter(self.fields()))
            .field("timestamp", &self.timestamp)
            .finish()
    }
}

struct DebugIter<I>(I);

impl<I: Iterator<Item: fmt::Debug> + Clone> fmt::Debug for DebugIter<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.clone()).finish()
    }
}

/// Iterator over a [`Line`]'s tags.
#[derive(Clone, Debug)]
pub struct Tags<'a> {
    text: &'a str,
    inner: slice::Iter<'a, TagSpan>,
}

impl<'a> Tags<'a> {
    #[inline]
    fn make(&self, tag: &TagSpan) -> (Text<'a>, Text<'a>) {
        (
            tag.key.text(self.text, TextKind::Name),
            tag.value.text(self.text, TextKind::Name),
        )
    }
}

impl<'a> Iterator for Tags<'a> {
    type Item = (Text<'a>, Text<'a>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let tag = self.inner.next()?;
        Some(self.make(tag))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl DoubleEndedIterator for Tags<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let tag = self.inner.next_back()?;
        Some(self.make(tag))
    }
}

impl ExactSizeIterator for Tags<'_> {}
impl FusedIterator for Tags<'_> {}

/// Iterator over a [`Line`]'s fields.
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    text: &'a str,
    inner: slice::Iter<'a, FieldSpan>,
}

impl<'a> Fields<'a> {
    #[inline]
    fn make(&self, field: &FieldSpan) -> (Text<'a>, FieldValue<'a>) {
        let value = match field.value {
            RawValue::Float(v) => FieldValue::Float(v),
            RawValue::Integer(v) => FieldValue::Integer(v),
            RawValue::UInteger(v) => FieldValue::UInteger(v),
            RawValue::TimestampMicros(v) => FieldValue::TimestampMicros(v),
            RawValue::TimestampNanos(v) => FieldValue::TimestampNanos(v),
            RawValue::Bool(v) => FieldValue::Bool(v),
            RawValue::Str(span) => FieldValue::Str(span.text(self.text, TextKind::Quoted)),
        };
        (field.key.text(self.text, TextKind::Name), value)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = (Text<'a>, FieldValue<'a>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let field = self.inner.next()?;
        Some(self.make(field))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl DoubleEndedIterator for Fields<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let field = self.inner.next_back()?;
        Some(self.make(field))
    }
}

impl ExactSizeIterator for Fields<'_> {}
impl FusedIterator for Fields<'_> {}

// ---------------------------------------------------------------------------------------------
// The parser proper.

/// Byte classes for scanning names.
const SEP: u8 = 1; // ',' or ' '
const EQ: u8 = 2; // '='
const BACKSLASH: u8 = 4;

static CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    table[b',' as usize] = SEP;
    table[b' ' as usize] = SEP;
    table[b'=' as usize] = EQ;
    table[b'\\' as usize] = BACKSLASH;
    table
};

/// Scans a name from `start` to the first unescaped byte of class `stop` (or the end). A
/// backslash always pairs with the next byte; a backslash at the very end is literal. Names are
/// short, so a table-driven loop beats memchr's set-up cost here.
#[inline]
fn scan_name(b: &[u8], start: usize, stop: u8, kind: TextKind) -> Span {
    let mut escaped = false;
    let mut i = start;
    while let Some(&byte) = b.get(i) {
        let class = CLASS[byte as usize];
        if class & stop != 0 {
            break;
        }
        if class & BACKSLASH != 0 {
            match b.get(i + 1) {
                Some(&next) => {
                    escaped |= kind.escapes(next);
                    i += 2;
                    continue;
                }
                None => {
                    i += 1;
                    break;
                }
            }
        }
        i += 1;
    }
    Span {
        start,
        end: i,
        escaped,
    }
}

#[inline]
fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    i
}

#[inline]
fn err<T>(kind: ErrorKind, offset: usize) -> Result<T, ParseError> {
    Err(ParseError::new(kind, offset))
}

/// Parses a line's measurement and tags (the line already UTF-8 checked, `\r` stripped),
/// filling `tags`; returns the measurement and the offset just past the last tag.
fn parse_series(text: &str, tags: &mut Vec<TagSpan>) -> Result<(Span, usize), ParseError> {
    let b = text.as_bytes();
    let mut i = 0;
    while matches!(b.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    match b.get(i) {
        None => return err(ErrorKind::EmptyMeasurement, i),
        Some(b'#') => return err(ErrorKind::Comment, i),
        Some(_) => {}
    }

    let measurement = scan_name(b, i, SEP, TextKind::Measurement);
    if measurement.end == measurement.start {
        return err(ErrorKind::EmptyMeasurement, i);
    }
    i = measurement.end;

    // Tags: `,key=value` until a space or the end.
    while b.get(i) == Some(&b',') {
        i += 1;
        let key = scan_name(b, i, SEP | EQ, TextKind::Name);
        if key.end == key.start {
            return err(ErrorKind::EmptyKey, i);
        }
        if b.get(key.end) != Some(&b'=') {
            return err(ErrorKind::MissingTagValue, key.end);
        }
        let value = scan_name(b, key.end + 1, SEP, TextKind::Name);
        if value.end == value.start {
            return err(ErrorKind::MissingTagValue, value.start);
        }
        tags.push(TagSpan { key, value });
        i = value.end;
    }
    Ok((measurement, i))
}

/// Parses the fields and timestamp that follow the series ending at `series_end` (a space or
/// the end of `text`), filling `fields`; returns the timestamp.
fn parse_fields_into(
    text: &str,
    series_end: usize,
    fields: &mut Vec<FieldSpan>,
) -> Result<Option<i64>, ParseError> {
    let b = text.as_bytes();
    // Fields: one or more spaces, then `key=value[,key=value...]`.
    let mut i = skip_spaces(b, series_end);
    if i >= b.len() {
        return err(ErrorKind::MissingFields, i);
    }
    loop {
        let key = scan_name(b, i, SEP | EQ, TextKind::Name);
        if key.end == key.start {
            return err(ErrorKind::EmptyKey, i);
        }
        if b.get(key.end) != Some(&b'=') {
            return err(ErrorKind::MissingFieldValue, key.end);
        }
        let (value, end) = parse_value(text, key.end + 1)?;
        fields.push(FieldSpan { key, value });
        i = end;
        match b.get(i) {
            Some(b',') => i += 1,
            Some(b' ') => break,
            None => return Ok(None),
            Some(_) => return err(ErrorKind::MissingSeparator, i),
        }
    }

    // Optional timestamp, then optional trailing spaces.
    i = skip_spaces(b, i);
    let Some(rest) = b.get(i..).filter(|rest| !rest.is_empty()) else {
        return Ok(None);
    };
    let len = rest
        .iter()
        .position(|&byte| byte == b' ')
        .unwrap_or(rest.len());
    let timestamp = rest
        .get(..len)
        .and_then(|digits| parse_i64(digits).ok())
        .ok_or(ParseError::new(ErrorKind::InvalidTimestamp, i))?;
    let after = skip_spaces(b, i + len);
    if after < b.len() {
        return err(ErrorKind::TrailingCharacters, after);
    }
    Ok(Some(timestamp))
}

/// Parses the field value starting at `start`; returns it and the offset just past it.
#[inline]
fn parse_value(text: &str, start: usize) -> Result<(RawValue, usize), ParseError> {
    let b = text.as_bytes();
    let rest = match b.get(start..) {
        Some(rest) if !matches!(rest.first(), None | Some(b',' | b' ')) => rest,
        _ => return err(ErrorKind::MissingFieldValue, start),
    };
    if rest.first() == Some(&b'"') {
        return parse_string(b, start);
    }
    // Values are short: a table lookup per byte beats memchr's set-up cost.
    let len = rest
        .iter()
        .position(|&byte| CLASS[byte as usize] & SEP != 0)
        .unwrap_or(rest.len());
    let value = text
        .get(start..start + len)
        .ok_or(ParseError::new(ErrorKind::InvalidFieldValue, start))?;
    match parse_scalar(value) {
        Ok(value) => Ok((value, start + len)),
        Err(kind) => err(kind, start),
    }
}

/// Parses a quoted string whose opening quote is at `quote`.
fn parse_string(b: &[u8], quote: usize) -> Result<(RawValue, usize), ParseError> {
    let mut escaped = false;
    let mut i = quote + 1;
    loop {
        let Some(found) = b.get(i..).and_then(|rest| memchr2(b'"', b'\\', rest)) else {
            return err(ErrorKind::UnterminatedString, quote);
        };
        let at = i + found;
        if b.get(at) == Some(&b'"') {
            let span = Span {
                start: quote + 1,
                end: at,
                escaped,
            };
            return Ok((RawValue::Str(span), at + 1));
        }
        // A backslash: it pairs with the next byte whatever that is.
        match b.get(at + 1) {
            Some(&next) => escaped |= TextKind::Quoted.escapes(next),
            None => return err(ErrorKind::UnterminatedString, quote),
        }
        i = at + 2;
    }
}

/// Parses a non-string field value.
fn parse_scalar(value: &str) -> Result<RawValue, ErrorKind> {
    let v = value.as_bytes();
    let (&first, &last) = match (v.first(), v.last()) {
        (Some(first), Some(last)) => (first, last),
        _ => return Err(ErrorKind::InvalidFieldValue),
    };
    let body = v.get(..v.len() - 1).unwrap_or_default();
    match last {
        b'i' => {
            return parse_i64(body)
                .map(RawValue::Integer)
                .map_err(IntError::kind);
        }
        b'u' => {
            return match body.strip_prefix(b"-") {
                // A negative unsigned: out of range if it is otherwise a number.
                Some(digits) => match parse_u64(digits) {
                    Err(IntError::Syntax) => Err(ErrorKind::InvalidFieldValue),
                    _ => Err(ErrorKind::IntegerOutOfRange),
                },
                None => parse_u64(body)
                    .map(RawValue::UInteger)
                    .map_err(IntError::kind),
            };
        }
        // `t` and `n` alone are booleans or invalid; with digits before them, timestamps.
        b't' | b'n'
            if body
                .first()
                .is_some_and(|b| b.is_ascii_digit() || *b == b'-') =>
        {
            let value = parse_i64(body).map_err(IntError::kind)?;
            return Ok(if last == b't' {
                RawValue::TimestampMicros(value)
            } else {
                RawValue::TimestampNanos(value)
            });
        }
        _ => {}
    }
    if first.is_ascii_digit() || first == b'-' || first == b'.' {
        if v == b"-Infinity" {
            return Ok(RawValue::Float(f64::NEG_INFINITY));
        }
        return parse_float(value).map(RawValue::Float);
    }
    match v {
        b"t" | b"T" | b"true" | b"True" | b"TRUE" => Ok(RawValue::Bool(true)),
        b"f" | b"F" | b"false" | b"False" | b"FALSE" => Ok(RawValue::Bool(false)),
        b"NaN" => Ok(RawValue::Float(f64::NAN)),
        b"Infinity" => Ok(RawValue::Float(f64::INFINITY)),
        _ => Err(ErrorKind::InvalidFieldValue),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IntError {
    Syntax,
    Range,
}

impl IntError {
    fn kind(self) -> ErrorKind {
        match self {
            IntError::Syntax => ErrorKind::InvalidFieldValue,
            IntError::Range => ErrorKind::IntegerOutOfRange,
        }
    }
}

/// Decimal digits only (no sign), at least one.
#[inline]
fn parse_u64(digits: &[u8]) -> Result<u64, IntError> {
    if digits.is_empty() {
        return Err(IntError::Syntax);
    }
    let mut value: u64 = 0;
    let mut overflow = false;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return Err(IntError::Syntax);
        }
        match value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(digit)))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
    }
    if overflow {
        Err(IntError::Range)
    } else {
        Ok(value)
    }
}

/// An optional `-` then decimal digits.
#[inline]
fn parse_i64(v: &[u8]) -> Result<i64, IntError> {
    match v.strip_prefix(b"-") {
        Some(digits) => {
            let magnitude = parse_u64(digits)?;
            0i64.checked_sub_unsigned(magnitude).ok_or(IntError::Range)
        }
        None => i64::try_from(parse_u64(v)?).map_err(|_| IntError::Range),
    }
}

/// `-?(digits[.digits*] | .digits)([eE][+-]?digits)?`: stricter than `f64::from_str`, which also
/// takes `+1`, `inf` and `nan`.
fn is_float_syntax(v: &[u8]) -> bool {
    let mut i = usize::from(v.first() == Some(&b'-'));
    let digits_from = |mut i: usize| {
        while v.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let int_end = digits_from(i);
    let mut mantissa_digits = int_end - i;
    i = int_end;
    if v.get(i) == Some(&b'.') {
        let frac_end = digits_from(i + 1);
        mantissa_digits += frac_end - (i + 1);
        i = frac_end;
    }
    if mantissa_digits == 0 {
        return false;
    }
    if matches!(v.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(v.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_end = digits_from(i);
        if exp_end == i {
            return false;
        }
        i = exp_end;
    }
    i == v.len()
}

/// `digits[.digits]` with 1 to 15 digits in all, as the nearest f64; `None` for anything else.
#[inline]
fn short_decimal(v: &[u8]) -> Option<f64> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    if v.len() > 16 {
        return None;
    }
    let mut mantissa = 0u64;
    let mut digits = 0usize;
    let mut point = None;
    for (i, &byte) in v.iter().enumerate() {
        match byte {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(byte - b'0');
                digits += 1;
            }
            b'.' if point.is_none() => point = Some(i),
            _ => return None,
        }
    }
    // `1.` and `.5` are floats too, but leave them (and `.` alone) to the full parse.
    let fraction = match point {
        None => 0,
        Some(at) if at > 0 && at + 1 < v.len() => v.len() - at - 1,
        Some(_) => return None,
    };
    if digits == 0 || digits > 15 {
        return None;
    }
    // mantissa < 10^15 < 2^53 and 10^fraction <= 10^15: both exact.
    Some(mantissa as f64 / POW10.get(fraction)?)
}

fn parse_float(value: &str) -> Result<f64, ErrorKind> {
    let v = value.as_bytes();
    // Fast path for small integers (the bulk of real data): exact in f64 below 2^53.
    let (negative, digits) = match v.strip_prefix(b"-") {
        Some(digits) => (true, digits),
        None => (false, v),
    };
    // Fast path for `digits[.digits]` with at most 15 digits in all (the bulk of real data):
    // the digits as an integer and the power of ten are both exact in f64 (below 2^53), and
    // one IEEE division rounds their exact quotient correctly, as a full parse would.
    if let Some(magnitude) = short_decimal(digits) {
        return Ok(if negative { -magnitude } else { magnitude });
    }
    if !is_float_syntax(v) {
        return Err(ErrorKind::InvalidFieldValue);
    }
    let parsed: f64 = value.parse().map_err(|_| ErrorKind::InvalidFieldValue)?;
    if parsed.is_infinite() {
        return Err(ErrorKind::FloatOutOfRange);
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(v: &str) -> Result<RawValue, ErrorKind> {
        parse_scalar(v)
    }

    fn float(v: &str) -> f64 {
        match scalar(v) {
            Ok(RawValue::Float(f)) => f,
            other => panic!("{v:?} -> {other:?}"),
        }
    }

    #[test]
    fn short_decimals_round_as_the_full_parse_does() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let digits = 1 + (state % 15) as usize;
            let mantissa = (state >> 8) % 10u64.pow(digits as u32);
            let text = format!("{mantissa:0digits$}");
            let point = (state >> 60) as usize % (digits + 1);
            let text = match point {
                0 => text,
                p if p < digits => format!("{}.{}", &text[..p], &text[p..]),
                _ => text,
            };
            let expected: f64 = text.parse().unwrap();
            assert_eq!(
                short_decimal(text.as_bytes()).map(f64::to_bits),
                Some(expected.to_bits()),
                "{text}"
            );
            assert_eq!(
                float(&format!("-{text}")).to_bits(),
                (-expected).to_bits(),
                "{text}"
            );
        }
        for other in [
            "1.",
            ".5",
            ".",
            "",
            "1.2.3",
            "1234567890123456",
            "12345678.901234567",
        ] {
            assert_eq!(short_decimal(other.as_bytes()), None, "{other:?}");
        }
    }

    #[test]
    fn floats() {
        assert_eq!(float("0"), 0.0);
        assert_eq!(float("-0").to_bits(), (-0.0f64).to_bits());
        assert_eq!(float("58"), 58.0);
        assert_eq!(float("-1.5"), -1.5);
        assert_eq!(float("1."), 1.0);
        assert_eq!(float(".5"), 0.5);
        assert_eq!(float("-.5"), -0.5);
        assert_eq!(float("-1.5e10"), -1.5e10);
        assert_eq!(float("1E-3"), 1e-3);
        assert_eq!(float("1e+3"), 1e3);
        assert_eq!(
            float("123456789012345678901234"),
            123456789012345678901234.0
        );
        assert_eq!(float("999999999999999"), 999999999999999.0);
        assert_eq!(float("1e-400"), 0.0);
        assert!(float("NaN").is_nan());
        assert_eq!(float("Infinity"), f64::INFINITY);
        assert_eq!(float("-Infinity"), f64::NEG_INFINITY);
        for bad in [
            "-", ".", "-.", "1e", "1e+", "+1", "1.2.3", "0x10", "inf", "nan", "-NaN", "1,", "e5",
            "1.5x", "--1", "Inf", "infinity", "1 ",
        ] {
            assert_eq!(
                scalar(bad).err(),
                Some(ErrorKind::InvalidFieldValue),
                "{bad:?}"
            );
        }
        assert_eq!(scalar("1e400").err(), Some(ErrorKind::FloatOutOfRange));
        assert_eq!(scalar("-1e400").err(), Some(ErrorKind::FloatOutOfRange));
    }

    #[test]
    fn integers() {
        let int = |v: &str| match scalar(v) {
            Ok(RawValue::Integer(i)) => Ok(i),
            Ok(other) => panic!("{v:?} -> {other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(int("0i"), Ok(0));
        assert_eq!(int("-0i"), Ok(0));
        assert_eq!(int("007i"), Ok(7));
        assert_eq!(int("9223372036854775807i"), Ok(i64::MAX));
        assert_eq!(int("-9223372036854775808i"), Ok(i64::MIN));
        assert_eq!(
            int("9223372036854775808i"),
            Err(ErrorKind::IntegerOutOfRange)
        );
        assert_eq!(
            int("-9223372036854775809i"),
            Err(ErrorKind::IntegerOutOfRange)
        );
        assert_eq!(
            int("99999999999999999999999i"),
            Err(ErrorKind::IntegerOutOfRange)
        );
        for bad in [
            "i",
            "-i",
            "1.5i",
            "+1i",
            "1 i",
            "1e3i",
            "--1i",
            "99999999999999999999x9i",
        ] {
            assert_eq!(int(bad), Err(ErrorKind::InvalidFieldValue), "{bad:?}");
        }
    }

    #[test]
    fn unsigned() {
        let uint = |v: &str| match scalar(v) {
            Ok(RawValue::UInteger(i)) => Ok(i),
            Ok(other) => panic!("{v:?} -> {other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(uint("0u"), Ok(0));
        assert_eq!(uint("18446744073709551615u"), Ok(u64::MAX));
        assert_eq!(
            uint("18446744073709551616u"),
            Err(ErrorKind::IntegerOutOfRange)
        );
        assert_eq!(uint("-1u"), Err(ErrorKind::IntegerOutOfRange));
        assert_eq!(uint("-u"), Err(ErrorKind::InvalidFieldValue));
        assert_eq!(uint("u"), Err(ErrorKind::InvalidFieldValue));
        assert_eq!(uint("1.0u"), Err(ErrorKind::InvalidFieldValue));
    }

    #[test]
    fn booleans() {
        for t in ["t", "T", "true", "True", "TRUE"] {
            assert!(matches!(scalar(t), Ok(RawValue::Bool(true))), "{t}");
        }
        for f in ["f", "F", "false", "False", "FALSE"] {
            assert!(matches!(scalar(f), Ok(RawValue::Bool(false))), "{f}");
        }
        for bad in ["tRUE", "yes", "truee", "fals", "0b", "tr"] {
            assert_eq!(
                scalar(bad).err(),
                Some(ErrorKind::InvalidFieldValue),
                "{bad}"
            );
        }
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_i64(b"1451606400000000000"), Ok(1451606400000000000));
        assert_eq!(parse_i64(b"-1"), Ok(-1));
        assert_eq!(parse_i64(b""), Err(IntError::Syntax));
        assert_eq!(parse_i64(b"-"), Err(IntError::Syntax));
        assert_eq!(parse_i64(b"12a"), Err(IntError::Syntax));
        assert_eq!(parse_i64(b"9223372036854775808"), Err(IntError::Range));
    }

    #[test]
    fn name_scanning() {
        let s = scan_name(br"a\,b\ c,d", 0, SEP, TextKind::Measurement);
        assert_eq!((s.end, s.escaped), (7, true));
        let s = scan_name(br"a\=b=c", 0, SEP | EQ, TextKind::Measurement);
        assert_eq!((s.end, s.escaped), (4, true));
        let s = scan_name(br"a\=b=c", 0, SEP | EQ, TextKind::Name);
        assert_eq!((s.end, s.escaped), (4, true));
        let s = scan_name(br"ab\", 0, SEP, TextKind::Name);
        assert_eq!((s.end, s.escaped), (3, false));
        let s = scan_name(br"a\\,b", 0, SEP, TextKind::Name);
        assert_eq!((s.end, s.escaped), (3, true));
    }

    #[test]
    fn float_syntax() {
        for ok in ["1", "-1", "1.", ".1", "1.1", "1e1", "1E+1", "-1.5e-10"] {
            assert!(is_float_syntax(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "", "-", ".", "e1", "1e", "1e-", "1.e", "+1", "1..1", "1e1.5",
        ] {
            assert!(!is_float_syntax(bad.as_bytes()), "{bad}");
        }
    }
}
