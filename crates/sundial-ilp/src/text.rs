//! [`Text`]: a name or string value borrowed from the input, unescaped on demand.

use std::borrow::Cow;
use std::fmt;

use memchr::memchr;

/// Where a [`Text`] came from, which decides which backslash sequences are escapes.
///
/// In every kind a backslash pairs with the byte after it (so the pair never acts as a
/// delimiter); when that byte is not one of the kind's escapable characters, both are kept
/// literally.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TextKind {
    /// The measurement name: `\,` and `\ ` are escapes.
    Measurement,
    /// A tag key, tag value or field key: `\,`, `\=` and `\ ` are escapes.
    Name,
    /// The contents of a double-quoted field value: `\"` and `\\` are escapes.
    Quoted,
}

impl TextKind {
    /// Whether `\` followed by `byte` stands for `byte` alone.
    #[inline]
    pub(crate) fn escapes(self, byte: u8) -> bool {
        match self {
            TextKind::Measurement | TextKind::Name => {
                matches!(byte, b',' | b'=' | b' ' | b'\\' | b'\n' | b'\r')
            }
            TextKind::Quoted => matches!(byte, b'"' | b'\\' | b'\n' | b'\r'),
        }
    }
}

/// A name or string value: a slice of the input line (already checked to be UTF-8), plus whether
/// it contains escape sequences that [`unescape`](Text::unescape) would remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Text<'a> {
    raw: &'a str,
    escaped: bool,
    kind: TextKind,
}

impl<'a> Text<'a> {
    pub(crate) fn new(raw: &'a str, escaped: bool, kind: TextKind) -> Self {
        Text { raw, escaped, kind }
    }

    /// The bytes as they appear in the line, escapes included (without the quotes of a string).
    #[inline]
    pub fn raw(&self) -> &'a [u8] {
        self.raw.as_bytes()
    }

    /// [`raw`](Text::raw) as a `&str`, escapes included.
    #[inline]
    pub fn raw_str(&self) -> &'a str {
        self.raw
    }

    /// Whether the raw text contains escape sequences, i.e. differs from its unescaped value.
    #[inline]
    pub fn is_escaped(&self) -> bool {
        self.escaped
    }

    #[inline]
    pub fn kind(&self) -> TextKind {
        self.kind
    }

    /// The value, when it needs no unescaping (the common case): a zero-copy slice of the input.
    #[inline]
    pub fn as_str(&self) -> Option<&'a str> {
        if self.escaped { None } else { Some(self.raw) }
    }

    /// The unescaped value: the input slice itself when there are no escapes, otherwise the value
    /// unescaped into `scratch` (cleared first). Reusing one scratch buffer keeps the steady
    /// state allocation-free.
    #[inline]
    pub fn unescape<'s>(&self, scratch: &'s mut String) -> &'s str
    where
        'a: 's,
    {
        if !self.escaped {
            return self.raw;
        }
        scratch.clear();
        self.unescape_into(scratch);
        scratch.as_str()
    }

    /// Appends the unescaped value to `out`.
    pub fn unescape_into(&self, out: &mut String) {
        self.for_each_segment(|segment| out.push_str(segment));
    }

    /// The unescaped value, borrowed when possible (allocates only for escaped text).
    pub fn to_cow(&self) -> Cow<'a, str> {
        match self.as_str() {
            Some(s) => Cow::Borrowed(s),
            None => {
                let mut out = String::with_capacity(self.raw.len());
                self.unescape_into(&mut out);
                Cow::Owned(out)
            }
        }
    }

    /// Calls `f` with consecutive pieces of the unescaped value.
    fn for_each_segment(&self, mut f: impl FnMut(&str)) {
        if !self.escaped {
            f(self.raw);
            return;
        }
        let raw = self.raw;
        let bytes = raw.as_bytes();
        let mut segment_start = 0;
        let mut i = 0;
        while let Some(found) = bytes.get(i..).and_then(|rest| memchr(b'\\', rest)) {
            let at = i + found;
            match bytes.get(at + 1) {
                Some(&next) if self.kind.escapes(next) => {
                    // `at` and `at + 2` follow or precede ASCII bytes: always char boundaries.
                    f(raw.get(segment_start..at).unwrap_or_default());
                    segment_start = at + 1;
                    i = at + 2;
                }
                _ => i = at + 1,
            }
        }
        f(raw.get(segment_start..).unwrap_or_default());
    }
}

impl fmt::Display for Text<'_> {
    /// Writes the unescaped value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut result = Ok(());
        self.for_each_segment(|segment| {
            if result.is_ok() {
                result = f.write_str(segment);
            }
        });
        result
    }
}

impl PartialEq<str> for Text<'_> {
    /// Compares the unescaped value, without allocating.
    fn eq(&self, other: &str) -> bool {
        let mut rest = other.as_bytes();
        let mut equal = true;
        self.for_each_segment(|segment| {
            if equal {
                match rest.strip_prefix(segment.as_bytes()) {
                    Some(tail) => rest = tail,
                    None => equal = false,
                }
            }
        });
        equal && rest.is_empty()
    }
}

impl PartialEq<&str> for Text<'_> {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(raw: &str, kind: TextKind) -> Text<'_> {
        let escaped = raw
            .as_bytes()
            .windows(2)
            .any(|w| w[0] == b'\\' && kind.escapes(w[1]));
        Text::new(raw, escaped, kind)
    }

    #[test]
    fn unescapes_per_kind() {
        let mut scratch = String::new();
        let cases = [
            (r"a\,b\ c", TextKind::Measurement, "a,b c"),
            (r"a\=b", TextKind::Measurement, "a=b"),
            (r"a\=b\,c\ d", TextKind::Name, "a=b,c d"),
            (r"a\xb", TextKind::Name, r"a\xb"),
            (r"a\\b", TextKind::Name, r"a\b"),
            (r"a\\\,b", TextKind::Name, r"a\,b"),
            ("dc\\\nrack", TextKind::Name, "dc\nrack"),
            ("one\\\ntwo", TextKind::Quoted, "one\ntwo"),
            (r#"say \"hi\" \\ \n"#, TextKind::Quoted, r#"say "hi" \ \n"#),
            (r"trailing\", TextKind::Name, r"trailing\"),
            (r"\,", TextKind::Name, ","),
            (r"é\,ü", TextKind::Name, "é,ü"),
        ];
        for (raw, kind, want) in cases {
            let t = text(raw, kind);
            assert_eq!(t.unescape(&mut scratch), want, "{raw:?} as {kind:?}");
            assert_eq!(t.to_cow(), want);
            assert_eq!(t.to_string(), want);
            assert!(t == want);
            assert_eq!(t.as_str().is_some(), raw == want);
            assert_eq!(t.raw(), raw.as_bytes());
        }
    }

    #[test]
    fn borrows_when_not_escaped() {
        let t = text("plain", TextKind::Name);
        let mut scratch = String::from("left over");
        let s = t.unescape(&mut scratch);
        assert_eq!(s, "plain");
        assert_eq!(s.as_ptr(), t.raw().as_ptr());
        assert!(matches!(t.to_cow(), Cow::Borrowed("plain")));
    }

    #[test]
    fn comparison_with_str() {
        let t = text(r"a\ b", TextKind::Name);
        assert!(t == "a b");
        assert!(t != "a b c");
        assert!(t != "a ");
        assert!(t != r"a\ b");
    }
}
