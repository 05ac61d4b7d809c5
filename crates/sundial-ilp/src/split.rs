//! Splitting a byte stream into lines, honouring quoted strings that contain newlines.

use std::ops::Range;

use memchr::{memchr, memchr2};

/// One line found by the splitter, as a byte range of the buffer that was split.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LineSpan {
    /// A complete line, without its `\n` and without a `\r` before it. Never blank or a comment.
    Line(Range<usize>),
    /// A line longer than `max_line_bytes`, to be reported and dropped: the range covers the
    /// part of it that is in this buffer. If the line is not complete yet, the
    /// [`LineSplitter`] discards the rest of it from the following buffers.
    TooLong(Range<usize>),
}

/// Where the splitter is within a line. The splitter only needs to know enough of the syntax to
/// tell whether a `\n` is inside a quoted field value; it mirrors the parser's rules, so the two
/// always agree on where quoted strings are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scan {
    /// Leading spaces and tabs.
    LineStart,
    /// After a `#` at the start: everything up to the `\n`.
    Comment,
    /// Measurement and tags.
    Series,
    /// Right after a `\` in the measurement and tags.
    SeriesEscape,
    /// Spaces between the tags and the fields.
    Gap,
    /// A field key.
    Key,
    /// Right after a `\` in a field key.
    KeyEscape,
    /// Right after a field's `=`.
    ValueStart,
    /// A field value that is not a quoted string (or what follows the closing quote).
    Value,
    /// Inside a quoted string.
    Quoted,
    /// Right after a `\` in a quoted string.
    QuotedEscape,
    /// After the fields: the timestamp and anything else up to the `\n`.
    Rest,
}

/// Runs the state machine over `buf[from..]`: `Ok` with the index of the `\n` that ends the line,
/// or `Err` with the state at the end of the buffer.
fn scan(mut state: Scan, buf: &[u8], from: usize) -> Result<usize, Scan> {
    let mut i = from;
    while let Some(&byte) = buf.get(i) {
        match state {
            Scan::Quoted => {
                let rest = buf.get(i..).unwrap_or_default();
                let Some(found) = memchr2(b'"', b'\\', rest) else {
                    return Err(state);
                };
                i += found;
                state = if buf.get(i) == Some(&b'"') {
                    Scan::Value
                } else {
                    Scan::QuotedEscape
                };
                i += 1;
                continue;
            }
            // The escaped byte may be anything, a newline included.
            Scan::QuotedEscape => {
                state = Scan::Quoted;
                i += 1;
                continue;
            }
            Scan::SeriesEscape => {
                state = Scan::Series;
                i += 1;
                continue;
            }
            Scan::KeyEscape => {
                state = Scan::Key;
                i += 1;
                continue;
            }
            Scan::Comment | Scan::Rest => {
                let rest = buf.get(i..).unwrap_or_default();
                return match memchr(b'\n', rest) {
                    Some(found) => Ok(i + found),
                    None => Err(state),
                };
            }
            _ => {}
        }
        if byte == b'\n' {
            return Ok(i);
        }
        state = match (state, byte) {
            (Scan::LineStart, b' ' | b'\t') => Scan::LineStart,
            (Scan::LineStart, b'#') => Scan::Comment,
            (Scan::LineStart | Scan::Series, b'\\') => Scan::SeriesEscape,
            (Scan::Series, b' ') => Scan::Gap,
            (Scan::LineStart | Scan::Series, _) => Scan::Series,
            (Scan::Gap, b' ') => Scan::Gap,
            (Scan::Gap | Scan::Key, b'\\') => Scan::KeyEscape,
            (Scan::Gap | Scan::Key, b'=') => Scan::ValueStart,
            (Scan::Key, b' ') => Scan::Rest,
            (Scan::Gap | Scan::Key, _) => Scan::Key,
            (Scan::ValueStart, b'"') => Scan::Quoted,
            (Scan::ValueStart | Scan::Value, b',') => Scan::Key,
            (Scan::ValueStart | Scan::Value, b' ') => Scan::Rest,
            (Scan::ValueStart | Scan::Value, _) => Scan::Value,
            // Handled above.
            (
                Scan::Quoted
                | Scan::QuotedEscape
                | Scan::SeriesEscape
                | Scan::KeyEscape
                | Scan::Comment
                | Scan::Rest,
                _,
            ) => state,
        };
        i += 1;
    }
    Err(state)
}

/// Whether a line (without its `\n`) carries no data: empty, only spaces and tabs (and a
/// trailing `\r`), or a comment (`#` after optional spaces and tabs).
pub fn is_blank_or_comment(line: &[u8]) -> bool {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match line.iter().find(|&&b| b != b' ' && b != b'\t') {
        None => true,
        Some(&first) => first == b'#',
    }
}

/// Splits a stream (TCP) into lines, carrying what it needs from one buffer to the next.
///
/// The caller reads into a buffer, calls [`split`](LineSplitter::split), handles the lines,
/// removes the consumed prefix and keeps the rest (an incomplete last line, never longer than
/// `max_line_bytes`) in front of the next read. A line that grows past `max_line_bytes` is
/// reported as [`LineSpan::TooLong`] at once and its remainder is skipped as it arrives, so the
/// buffer never needs to hold more than `max_line_bytes` plus one read.
#[derive(Clone, Debug)]
pub struct LineSplitter {
    max_line_bytes: usize,
    /// Set while skipping the rest of a too-long line: the scan state at the end of the last
    /// buffer.
    discarding: Option<Scan>,
}

impl LineSplitter {
    pub fn new(max_line_bytes: usize) -> Self {
        LineSplitter {
            max_line_bytes,
            discarding: None,
        }
    }

    pub fn max_line_bytes(&self) -> usize {
        self.max_line_bytes
    }

    /// Whether the splitter is skipping the rest of a too-long line.
    pub fn is_discarding(&self) -> bool {
        self.discarding.is_some()
    }

    /// Calls `f` for every complete line in `buf` (skipping blank lines and comments) and returns
    /// how many bytes were consumed; `buf[consumed..]` is an incomplete line to keep.
    pub fn split(&mut self, buf: &[u8], mut f: impl FnMut(LineSpan)) -> usize {
        let mut pos = 0;
        if let Some(state) = self.discarding.take() {
            match scan(state, buf, 0) {
                Ok(newline) => pos = newline + 1,
                Err(state) => {
                    self.discarding = Some(state);
                    return buf.len();
                }
            }
        }
        while let Some(rest) = buf.get(pos..).filter(|rest| !rest.is_empty()) {
            // Fast path: a newline before any quote ends the line, since only a quote can start
            // a string that would hide it.
            let end = match memchr2(b'\n', b'"', rest) {
                Some(found) if rest.get(found) == Some(&b'\n') => Ok(pos + found),
                Some(_) => scan(Scan::LineStart, buf, pos),
                None => Err(Scan::LineStart),
            };
            match end {
                Ok(newline) => {
                    self.emit(buf, pos, newline, &mut f);
                    pos = newline + 1;
                }
                Err(_) if rest.len() <= self.max_line_bytes => return pos,
                Err(_) => {
                    f(LineSpan::TooLong(pos..buf.len()));
                    // Where in the line the buffer ended decides what ends it later.
                    self.discarding =
                        Some(scan(Scan::LineStart, buf, pos).err().unwrap_or(Scan::Rest));
                    return buf.len();
                }
            }
        }
        pos
    }

    /// Like [`split`](LineSplitter::split), but `buf` ends the stream (an HTTP body, a UDP
    /// datagram, EOF): its unterminated tail is the last line. Resets the splitter.
    pub fn split_final(&mut self, buf: &[u8], mut f: impl FnMut(LineSpan)) {
        let consumed = self.split(buf, &mut f);
        self.discarding = None;
        if consumed < buf.len() {
            self.emit(buf, consumed, buf.len(), &mut f);
        }
    }

    /// Reports the line `buf[start..end]` (`end` is its `\n` or the end of the buffer).
    #[inline]
    fn emit(&self, buf: &[u8], start: usize, end: usize, f: &mut impl FnMut(LineSpan)) {
        if end - start > self.max_line_bytes {
            f(LineSpan::TooLong(start..end));
            return;
        }
        let line = buf.get(start..end).unwrap_or_default();
        if is_blank_or_comment(line) {
            return;
        }
        let end = if line.last() == Some(&b'\r') {
            end - 1
        } else {
            end
        };
        f(LineSpan::Line(start..end));
    }
}

/// Splits `buf` into complete lines, calling `f` for each (blank lines and comments are skipped),
/// and returns the length of the consumed prefix: the rest is an incomplete last line for the
/// caller to keep and complete with its next read.
///
/// Lines longer than `max_line_bytes` are reported as [`LineSpan::TooLong`], even when
/// incomplete; an incomplete one is consumed to the end of `buf`. This function keeps no state
/// between buffers, so it cannot skip the rest of such a line in the next buffer: streams should
/// use a [`LineSplitter`].
pub fn split_lines(buf: &[u8], max_line_bytes: usize, f: impl FnMut(LineSpan)) -> usize {
    LineSplitter::new(max_line_bytes).split(buf, f)
}

/// Splits a complete input (an HTTP body, a UDP datagram): like [`split_lines`], but the last
/// line needs no terminating newline.
pub fn split_complete(buf: &[u8], max_line_bytes: usize, f: impl FnMut(LineSpan)) {
    LineSplitter::new(max_line_bytes).split_final(buf, f);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end_of_line(s: &str) -> Result<usize, Scan> {
        scan(Scan::LineStart, s.as_bytes(), 0)
    }

    #[test]
    fn scan_finds_the_real_end_of_line() {
        assert_eq!(end_of_line("m f=1\nx"), Ok(5));
        assert_eq!(end_of_line("m f=\"a\nb\"\nx"), Ok(9));
        assert_eq!(end_of_line("m f=\"a\\\"\nb\"\nx"), Ok(11));
        assert_eq!(end_of_line("m f=\"a\\\\\"\nb\"\nx"), Ok(9));
        assert_eq!(end_of_line("m f=\"a\\\n\"\nx"), Ok(9));
        assert_eq!(end_of_line("m  f=1,g=\"\n\" 1\nx"), Ok(14));
        // Quotes that start no string.
        assert_eq!(end_of_line("m\"x f=1\nx"), Ok(7));
        assert_eq!(end_of_line("m,t=\"x f=1\nx"), Ok(10));
        assert_eq!(end_of_line("m f=1 \"x\nx"), Ok(8));
        assert_eq!(end_of_line("m f\"=1\nx"), Ok(6));
        assert_eq!(end_of_line("m f=x\"\ny"), Ok(6));
        assert_eq!(end_of_line("# \"\nx"), Ok(3));
        assert_eq!(end_of_line("  \t# \"\nx"), Ok(6));
        // An escaped space keeps the measurement going; an escaped newline belongs to a name.
        assert_eq!(end_of_line("m\\ f=\"\nx"), Ok(6));
        assert_eq!(end_of_line("m f\\=\"\nx"), Ok(6));
        assert_eq!(end_of_line("m\\\nf"), Err(Scan::Series));
        assert_eq!(end_of_line("m,t=a\\\nb f\\\ng=1\nx"), Ok(15));
        // Incomplete.
        assert_eq!(end_of_line("m f=\"a\nb"), Err(Scan::Quoted));
        assert_eq!(end_of_line("m f=\"a\\"), Err(Scan::QuotedEscape));
        assert_eq!(end_of_line("m,t=1"), Err(Scan::Series));
        assert_eq!(end_of_line("m f=1 12"), Err(Scan::Rest));
    }

    #[test]
    fn blank_and_comment_lines() {
        for line in ["", "\r", "  ", "\t \r", "#", "# x", "  #x\r"] {
            assert!(is_blank_or_comment(line.as_bytes()), "{line:?}");
        }
        for line in ["m f=1", " m", "x#", "\rm"] {
            assert!(!is_blank_or_comment(line.as_bytes()), "{line:?}");
        }
    }
}
