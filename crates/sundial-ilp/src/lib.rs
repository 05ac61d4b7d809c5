//! # sundial-ilp
//!
//! A zero-copy parser for the InfluxDB line protocol (ILP) as InfluxDB and QuestDB accept it,
//! used by every ILP ingestion path of Sundial (TCP, UDP and HTTP `/write`):
//!
//! ```text
//!   cpu,host=a,region=eu usage=58i,idle=1.5,note="x y" 1451606400000000000\n
//!   └─┬─┘ └──── tags ──┘ └──────────── fields ───────┘ └──── timestamp ───┘
//!
//!  socket / body bytes
//!        │
//!        ▼
//!  LineSplitter::split ─── finds line ends (not inside "quoted\nstrings"), skips blank lines
//!        │                 and # comments, reports over-long lines, leaves an incomplete tail
//!        │ LineSpan::Line(range)
//!        ▼
//!  LineParser::parse_line ─ one pass over the line; tables of (offset, len) reused per line
//!        │
//!        ▼
//!  Line<'a> view ───────── measurement(), tags(), fields(), timestamp(): slices of the input,
//!        │                 numbers already converted, unescaping only on demand
//!        ▼
//!  ingestion (table writer: symbol lookup, column append, Precision::to_nanos)
//! ```
//!
//! Nothing is copied or allocated per line in steady state: names and string values are
//! [`Text`] views into the input (UTF-8 checked once per line), and only values that contain
//! escapes need a caller-provided scratch buffer to unescape. No input makes it panic.
//!
//! ## Syntax
//!
//! `measurement[,tag=value...] field=value[,field=value...] [timestamp]`, ended by `\n` or
//! `\r\n`.
//!
//! * Escapes, as QuestDB's and InfluxDB's clients write them: `\,`, `\=`, `\ `, `\\` and a
//!   backslash before a newline or carriage return in the measurement, tag keys, tag values and
//!   field keys; `\"`, `\\` and a backslash before a newline or carriage return in quoted strings.
//!   Elsewhere a backslash and the byte after it are kept as they are (but never split a name),
//!   so `dc\rack` stays as written.
//! * Field values: floats (`1`, `-1.5e10`, `1E-3`, `NaN`, `Infinity`, `-Infinity`), integers
//!   (`-12i`, `i64`), unsigned integers (`12u`, `u64`), timestamps (QuestDB's `1451606400000000t`
//!   in microseconds and `1451606400000000000n` in nanoseconds), quoted strings (which may hold spaces,
//!   commas, `=` and newlines) and booleans (`t`, `T`, `true`, `True`, `TRUE` and the same for
//!   false).
//! * The timestamp is an optional, possibly negative `i64` in the unit given by [`Precision`].
//! * Leading spaces and tabs are ignored; sections may be separated by several spaces.
//! * No line may contain a NUL (0x00) byte, escaped or not, in any part: such a line is
//!   rejected ([`ErrorKind::NulByte`]).
//!
//! ## Example
//!
//! ```
//! use sundial_ilp::{FieldValue, LineParser, LineSpan, LineSplitter};
//!
//! let mut splitter = LineSplitter::new(64 * 1024);
//! let mut parser = LineParser::new(64 * 1024);
//! let mut scratch = String::new();
//! let buf = b"cpu,host=a usage=58i,note=\"two\nlines\" 1451606400000000000\ncpu,host=b usa";
//! let consumed = splitter.split(buf, |span| match span {
//!     LineSpan::Line(range) => match parser.parse_line(&buf[range]) {
//!         Ok(line) => {
//!             assert_eq!(line.measurement().as_str(), Some("cpu"));
//!             for (key, value) in line.fields() {
//!                 if let FieldValue::Str(s) = value {
//!                     assert_eq!(s.unescape(&mut scratch), "two\nlines");
//!                 }
//!                 let _ = key;
//!             }
//!             assert_eq!(line.timestamp(), Some(1451606400000000000));
//!         }
//!         Err(e) => eprintln!("rejected: {e}"),
//!     },
//!     LineSpan::TooLong(_) => eprintln!("line too long"),
//! });
//! // The incomplete last line stays for the next read.
//! assert_eq!(&buf[consumed..], b"cpu,host=b usa");
//! ```

mod error;
mod parser;
mod precision;
mod split;
mod text;

pub use error::{ErrorKind, ParseError};
pub use parser::{FieldValue, Fields, Line, LineParser, Tags, series_len};
pub use precision::Precision;
pub use split::{LineSpan, LineSplitter, is_blank_or_comment, split_complete, split_lines};
pub use text::{Text, TextKind};
