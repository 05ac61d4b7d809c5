//! Shared plans found from a statement's text alone, before (and instead of) parsing it.
//!
//! ```text
//!  SQL ─lex─▶ TextShape: the text with each string and number literal replaced by a marker,
//!             and the literals          │ key
//!         TextShapes ◀──────────────────┤
//!   hit, fixed literals equal: the shared   miss: parse, rewrite, Shape::of (plan_cache) as
//!   plan's key, and which literal is each   ever; once the shape's plan is reused, learn how
//!   of its parameters ─▶ bind               the text's literals fill it, checked by a probe
//! ```
//!
//! Parsing and rewriting a statement costs more than running a small one over an index, and
//! TSBS or a dashboard sends the same text over and over with other literals. Lexing finds
//! those literals without parsing; what the parse would do with them is learned once per text
//! shape from the parse itself:
//!
//! - each parameter of the shared plan (a literal `Shape::of` took out) must come from exactly
//!   one of the text's literals, with the same value;
//! - every other literal of the text stays in the plan (or was dropped by a rewrite), so a
//!   later text fits only if those are equal, character for character;
//! - a probe checks the mapping: the text with each mapped literal replaced by a distinct
//!   made-up value must parse to the same shape key, with exactly those values as its
//!   parameters. A literal the rewrite copies or reads is then never taken for one it only
//!   happens to equal.
//!
//! The lexer declines (no fast path) what it does not read exactly as the parser does:
//! backslashes in strings, prefixed strings (`E'..'`), `$` (parameters, dollar quotes) and
//! unterminated quotes or comments.

use datafusion::scalar::ScalarValue;

/// Marks a string literal's place in a key.
const STRING_MARK: char = '\u{1}';
/// Marks a number literal's place in a key.
const NUMBER_MARK: char = '\u{2}';
/// Longest statement the lexer reads.
const TEXT_BYTES_MAX: usize = 16 << 10;

/// A literal of the text: a string's value (quotes removed, `''` undoubled) or a number's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Literal {
    String(String),
    Number(String),
}

impl Literal {
    /// The value `Shape::of` would take out for this literal; `None` for numbers it leaves in
    /// the plan.
    fn value(&self) -> Option<ScalarValue> {
        match self {
            Literal::String(s) => Some(ScalarValue::Utf8(Some(s.clone()))),
            Literal::Number(n) => crate::plans::plan_cache::number(n),
        }
    }

    /// Writes the literal back as SQL.
    fn write(&self, out: &mut String) {
        match self {
            Literal::String(s) => {
                out.push('\'');
                out.push_str(&s.replace('\'', "''"));
                out.push('\'');
            }
            Literal::Number(n) => out.push_str(n),
        }
    }
}

/// A statement's text without its literals, and the literals.
#[derive(Debug)]
pub(crate) struct TextShape {
    pub key: String,
    pub literals: Vec<Literal>,
    /// Where each literal's marker is in `key`.
    marks: Vec<usize>,
}

impl TextShape {
    /// The shape of `sql`; `None` if the lexer declines it.
    pub fn of(sql: &str) -> Option<TextShape> {
        if sql.len() > TEXT_BYTES_MAX || sql.contains([STRING_MARK, NUMBER_MARK, '$']) {
            return None;
        }
        let bytes = sql.as_bytes();
        let mut shape = TextShape {
            key: String::with_capacity(sql.len()),
            literals: Vec::new(),
            marks: Vec::new(),
        };
        let mut copied = 0;
        let mut at = 0;
        while at < bytes.len() {
            let b = bytes[at];
            let next = match b {
                b'\'' => {
                    if at > 0 && is_word_byte(bytes[at - 1]) {
                        return None;
                    }
                    let (value, end) = string_literal(sql, at)?;
                    shape.push_literal(&sql[copied..at], STRING_MARK, Literal::String(value));
                    copied = end;
                    end
                }
                b'"' => quoted_identifier_end(bytes, at)?,
                b'-' if bytes.get(at + 1) == Some(&b'-') => line_comment_end(bytes, at),
                b'/' if bytes.get(at + 1) == Some(&b'*') => block_comment_end(bytes, at)?,
                b'0'..=b'9' | b'.' if number_can_start(bytes, at) => {
                    let end = number_end(bytes, at);
                    if end == at || bytes.get(end).is_some_and(|&b| is_word_byte(b)) {
                        // A word such as `1m` (a stride) or `1e` stays part of the text.
                        word_end(bytes, at)
                    } else {
                        let text = sql[at..end].to_string();
                        shape.push_literal(&sql[copied..at], NUMBER_MARK, Literal::Number(text));
                        copied = end;
                        end
                    }
                }
                _ if is_word_byte(b) => word_end(bytes, at),
                _ => at + 1,
            };
            at = next;
        }
        shape.key.push_str(&sql[copied..]);
        Some(shape)
    }

    fn push_literal(&mut self, before: &str, mark: char, literal: Literal) {
        self.key.push_str(before);
        self.marks.push(self.key.len());
        self.key.push(mark);
        self.literals.push(literal);
    }

    /// The text with literal `i` replaced by `replacement[i]` where given.
    fn with_literals(&self, replacement: &[Option<Literal>]) -> String {
        let mut out = String::with_capacity(self.key.len() + 16 * self.literals.len());
        let mut copied = 0;
        for (i, &mark) in self.marks.iter().enumerate() {
            out.push_str(&self.key[copied..mark]);
            replacement[i]
                .as_ref()
                .unwrap_or(&self.literals[i])
                .write(&mut out);
            copied = mark + 1;
        }
        out.push_str(&self.key[copied..]);
        out
    }
}

/// What a text shape's parse taught: which of its literals fill the shared plan's parameters.
#[derive(Debug)]
pub(crate) struct Learned {
    /// The shared plan's key (`plan_cache::Shape::key`).
    pub shape_key: String,
    /// For each parameter of the shared plan, the text literal that fills it.
    parameters: Vec<usize>,
    /// The text's other literals, which a text must repeat exactly to fit.
    fixed: Vec<(usize, Literal)>,
    /// The result's designated timestamp column (`Prepared::designated_timestamp`).
    pub designated_timestamp: Option<String>,
}

impl Learned {
    /// The mapping of `text`'s literals to the parameters of a shape that has `parameters`
    /// (their values) and key `shape_key`, if each parameter equals exactly one literal; and
    /// the probe text that checks it ([`Learned::check`]).
    pub fn guess(
        text: &TextShape,
        shape_key: &str,
        parameters: &[ScalarValue],
        designated_timestamp: Option<String>,
    ) -> Option<(Learned, String, Vec<ScalarValue>)> {
        let values: Vec<Option<ScalarValue>> = text.literals.iter().map(Literal::value).collect();
        let mut mapped = Vec::with_capacity(parameters.len());
        for parameter in parameters {
            let mut matching = values
                .iter()
                .enumerate()
                .filter(|(_, v)| v.as_ref() == Some(parameter))
                .map(|(i, _)| i);
            let (Some(i), None) = (matching.next(), matching.next()) else {
                return None;
            };
            if mapped.contains(&i) {
                return None;
            }
            mapped.push(i);
        }
        let mut replacement: Vec<Option<Literal>> = vec![None; text.literals.len()];
        for (n, &i) in mapped.iter().enumerate() {
            replacement[i] = Some(probe(&text.literals[i], n));
        }
        let expected = mapped
            .iter()
            .map(|&i| replacement[i].as_ref().and_then(Literal::value))
            .collect::<Option<Vec<_>>>()?;
        let probe_text = text.with_literals(&replacement);
        let fixed = text
            .literals
            .iter()
            .enumerate()
            .filter(|(i, _)| !mapped.contains(i))
            .map(|(i, l)| (i, l.clone()))
            .collect();
        let learned = Learned {
            shape_key: shape_key.to_string(),
            parameters: mapped,
            fixed,
            designated_timestamp,
        };
        Some((learned, probe_text, expected))
    }

    /// Whether the probe's parse (its shape key and parameter values) confirms the mapping.
    pub fn check(
        &self,
        probe_key: &str,
        probe_parameters: &[ScalarValue],
        expected: &[ScalarValue],
    ) -> bool {
        probe_key == self.shape_key && probe_parameters == expected
    }

    /// The shared plan's parameter values for `text`, a text of this shape; `None` if its
    /// fixed literals differ (then it is parsed).
    pub fn parameters(&self, text: &TextShape) -> Option<Vec<ScalarValue>> {
        if self
            .fixed
            .iter()
            .any(|(i, l)| text.literals.get(*i) != Some(l))
        {
            return None;
        }
        self.parameters
            .iter()
            .map(|&i| text.literals.get(i)?.value())
            .collect()
    }
}

/// A made-up value of the same kind as `literal`, distinct for each `n`.
fn probe(literal: &Literal, n: usize) -> Literal {
    const BASE: u64 = 900_000_000_000;
    match literal {
        Literal::String(s) => Literal::String(format!("{s}~probe{n}")),
        Literal::Number(text) if text.parse::<i64>().is_ok() => {
            Literal::Number((BASE + n as u64).to_string())
        }
        Literal::Number(_) => Literal::Number(format!("{}.25", BASE + n as u64)),
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

fn word_end(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && is_word_byte(bytes[at]) {
        at += 1;
    }
    at
}

/// A number starts here unless a word or a qualified name (`t.1`) comes right before.
fn number_can_start(bytes: &[u8], at: usize) -> bool {
    let digit_follows = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
    let starts = bytes[at].is_ascii_digit() || digit_follows(at + 1);
    starts && (at == 0 || !(is_word_byte(bytes[at - 1]) || bytes[at - 1] == b'.'))
}

/// The end of `digits[.digits][e[+-]digits]` from `at`.
fn number_end(bytes: &[u8], at: usize) -> usize {
    let digits = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let mut end = digits(at);
    if bytes.get(end) == Some(&b'.') {
        end = digits(end + 1);
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(end + 1), Some(b'+' | b'-')));
        let exponent = digits(end + 1 + sign);
        if exponent > end + 1 + sign {
            end = exponent;
        }
    }
    end
}

/// A string literal's value and the position after its closing quote.
fn string_literal(sql: &str, at: usize) -> Option<(String, usize)> {
    let bytes = sql.as_bytes();
    let mut value = String::new();
    let mut from = at + 1;
    loop {
        let quote = from + bytes[from..].iter().position(|&b| b == b'\'')?;
        let part = &sql[from..quote];
        if part.contains('\\') {
            return None;
        }
        value.push_str(part);
        if bytes.get(quote + 1) == Some(&b'\'') {
            value.push('\'');
            from = quote + 2;
        } else {
            return Some((value, quote + 1));
        }
    }
}

fn quoted_identifier_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut from = at + 1;
    loop {
        let quote = from + bytes[from..].iter().position(|&b| b == b'"')?;
        if bytes.get(quote + 1) == Some(&b'"') {
            from = quote + 2;
        } else {
            return Some(quote + 1);
        }
    }
}

fn line_comment_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |n| at + n + 1)
}

fn block_comment_end(bytes: &[u8], at: usize) -> Option<usize> {
    // Nested comments are read as the parser reads them only when there are none.
    let body = &bytes[at + 2..];
    let close = body.windows(2).position(|w| w == b"*/")?;
    if body[..close].windows(2).any(|w| w == b"/*") {
        return None;
    }
    Some(at + 2 + close + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literals(sql: &str) -> Vec<Literal> {
        TextShape::of(sql).expect(sql).literals
    }

    #[test]
    fn literals_are_found_as_the_parser_reads_them() {
        use Literal::{Number as N, String as S};
        assert_eq!(
            literals(
                "SELECT ts, max(v) FROM cpu WHERE h IN ('host_1', 'it''s') AND ts >= '2016-01-01T09:11:43Z' \
                 AND v > 90.5 AND t1.x < 1e-3 AND y = .5 SAMPLE BY 1m LIMIT 10"
            ),
            vec![
                S("host_1".into()),
                S("it's".into()),
                S("2016-01-01T09:11:43Z".into()),
                N("90.5".into()),
                N("1e-3".into()),
                N(".5".into()),
                N("10".into()),
            ]
        );
        // Identifiers, words and comments keep what looks like literals.
        assert_eq!(
            literals("SELECT \"a'b\", host_1, t.1x, 1h -- '5'\nFROM t /* 'x' 7 */ WHERE c = 2"),
            vec![N("2".into())]
        );
    }

    #[test]
    fn texts_differing_in_literals_share_a_key() {
        let a = TextShape::of("SELECT * FROM t WHERE h = 'a' AND v > 1.5").unwrap();
        let b = TextShape::of("SELECT * FROM t WHERE h = 'bb' AND v > 20").unwrap();
        assert_eq!(a.key, b.key);
        let c = TextShape::of("SELECT * FROM t WHERE h = 5 AND v > 20").unwrap();
        assert_ne!(a.key, c.key, "a number where a string was is another shape");
    }

    #[test]
    fn the_lexer_declines_what_it_cannot_read_exactly() {
        for sql in [
            "SELECT 'a\\'b'",
            "SELECT E'x'",
            "SELECT * FROM t WHERE x = $1",
            "SELECT $$x$$",
            "SELECT 'open",
            "SELECT /* open",
            "SELECT /* a /* b */ c */ 1",
            "SELECT \"open",
        ] {
            assert!(TextShape::of(sql).is_none(), "{sql}");
        }
    }

    #[test]
    fn a_guess_maps_each_parameter_to_one_literal() {
        let text = TextShape::of("SELECT 'x' AS l FROM t WHERE h = 'a' AND v > 2 LIMIT 5").unwrap();
        let parameters = [
            ScalarValue::Utf8(Some("a".into())),
            ScalarValue::Int64(Some(2)),
        ];
        let (learned, probe, expected) = Learned::guess(&text, "key", &parameters, None).unwrap();
        assert_eq!(
            probe,
            "SELECT 'x' AS l FROM t WHERE h = 'a~probe0' AND v > 900000000001 LIMIT 5"
        );
        assert_eq!(expected[1], ScalarValue::Int64(Some(900_000_000_001)));
        let other =
            TextShape::of("SELECT 'x' AS l FROM t WHERE h = 'b' AND v > 3 LIMIT 5").unwrap();
        assert_eq!(
            learned.parameters(&other),
            Some(vec![
                ScalarValue::Utf8(Some("b".into())),
                ScalarValue::Int64(Some(3))
            ])
        );
        let fixed_differs =
            TextShape::of("SELECT 'y' AS l FROM t WHERE h = 'b' AND v > 3 LIMIT 5").unwrap();
        assert_eq!(learned.parameters(&fixed_differs), None);
        // A parameter equal to two literals is ambiguous.
        let twice = TextShape::of("SELECT 'a' AS l FROM t WHERE h = 'a'").unwrap();
        assert!(Learned::guess(&twice, "key", &parameters[..1], None).is_none());
    }
}
