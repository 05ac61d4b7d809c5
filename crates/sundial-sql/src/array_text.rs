//! PostgreSQL's array input in text form (`{1,2,NULL,"a \\"b\\""}`, as `array_in` reads
//! it), split into its elements' own text: for array parameters sent as text and for
//! `x = ANY('{...}')` literals. One-dimensional arrays only, the kind `= ANY` takes.

use std::borrow::Cow;
use std::fmt;

/// The most elements an array may have.
pub const ARRAY_ELEMENTS_MAX: usize = 1 << 20;

/// Why a text is not a one-dimensional array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArrayTextError {
    Malformed(&'static str),
    Multidimensional,
    TooMany,
}

impl fmt::Display for ArrayTextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArrayTextError::Malformed(what) => write!(f, "malformed array: {what}"),
            ArrayTextError::Multidimensional => {
                write!(f, "multidimensional arrays are not supported here")
            }
            ArrayTextError::TooMany => {
                write!(f, "array of more than {ARRAY_ELEMENTS_MAX} elements")
            }
        }
    }
}

impl std::error::Error for ArrayTextError {}

/// The elements of `text`, an array in PostgreSQL's text form; `None` for an unquoted `NULL`.
pub fn split(text: &str) -> Result<Vec<Option<Cow<'_, str>>>, ArrayTextError> {
    let mut rest = text.trim_start();
    // Optional explicit bounds, `[1:3]={...}`: one dimension only.
    if rest.starts_with('[') {
        let eq = rest
            .find('=')
            .ok_or(ArrayTextError::Malformed("bounds without '='"))?;
        if rest[..eq].matches('[').count() > 1 {
            return Err(ArrayTextError::Multidimensional);
        }
        rest = rest[eq + 1..].trim_start();
    }
    let body = rest
        .trim_end()
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .ok_or(ArrayTextError::Malformed("an array is written {a,b,...}"))?;
    let mut elements = Vec::new();
    if body.trim().is_empty() {
        return Ok(elements);
    }
    let bytes = body.as_bytes();
    let mut at = 0;
    loop {
        if elements.len() == ARRAY_ELEMENTS_MAX {
            return Err(ArrayTextError::TooMany);
        }
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        let (element, next) = element(body, at)?;
        elements.push(element);
        at = next;
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        match bytes.get(at) {
            None => return Ok(elements),
            Some(b',') => at += 1,
            Some(_) => return Err(ArrayTextError::Malformed("junk after an element")),
        }
    }
}

/// The element starting at `at` of an array's body, and where it ends.
fn element(body: &str, at: usize) -> Result<(Option<Cow<'_, str>>, usize), ArrayTextError> {
    let bytes = body.as_bytes();
    match bytes.get(at) {
        Some(b'{') => Err(ArrayTextError::Multidimensional),
        Some(b'"') => {
            let mut out = String::new();
            let mut i = at + 1;
            let mut run = i;
            loop {
                match bytes.get(i) {
                    None => return Err(ArrayTextError::Malformed("unterminated quoted element")),
                    Some(b'"') => {
                        let text = finish(body, out, at + 1, run, i);
                        return Ok((Some(text), i + 1));
                    }
                    Some(b'\\') => {
                        out.push_str(&body[run..i]);
                        i = escape(body, i, &mut out, "unterminated quoted element")?;
                        run = i;
                    }
                    Some(_) => i += 1,
                }
            }
        }
        Some(b',') | None => Err(ArrayTextError::Malformed("empty element")),
        Some(_) => {
            let mut out = String::new();
            let (mut i, mut run, mut escaped) = (at, at, false);
            // Unescaped whitespace at the end is not part of the element.
            let mut kept = 0;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b',' | b'}' => break,
                    b'{' | b'"' => {
                        return Err(ArrayTextError::Malformed(
                            "unexpected character in an element",
                        ));
                    }
                    b'\\' => {
                        out.push_str(&body[run..i]);
                        i = escape(body, i, &mut out, "unterminated escape")?;
                        run = i;
                        kept = out.len();
                        escaped = true;
                    }
                    _ => {
                        i += 1;
                        if !b.is_ascii_whitespace() {
                            kept = out.len() + (i - run);
                        }
                    }
                }
            }
            if bytes.get(i) == Some(&b'}') {
                return Err(ArrayTextError::Malformed("unbalanced '}'"));
            }
            if !escaped {
                let text = &body[at..at + kept];
                if text.eq_ignore_ascii_case("NULL") {
                    return Ok((None, i));
                }
                return Ok((Some(Cow::Borrowed(text)), i));
            }
            out.push_str(&body[run..i]);
            out.truncate(kept);
            Ok((Some(Cow::Owned(out)), i))
        }
    }
}

/// Appends the character the backslash at `at` escapes to `out`; returns where the text
/// goes on.
fn escape(
    body: &str,
    at: usize,
    out: &mut String,
    unterminated: &'static str,
) -> Result<usize, ArrayTextError> {
    let c = body[at + 1..]
        .chars()
        .next()
        .ok_or(ArrayTextError::Malformed(unterminated))?;
    out.push(c);
    Ok(at + 1 + c.len_utf8())
}

/// A quoted element, `body[start..end]` with its escapes resolved (`out` holds the text
/// before `run`): borrowed when it had none.
fn finish(body: &str, mut out: String, start: usize, run: usize, end: usize) -> Cow<'_, str> {
    if run == start {
        return Cow::Borrowed(&body[start..end]);
    }
    out.push_str(&body[run..end]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(input: &str) -> Result<Vec<Option<String>>, String> {
        split(input)
            .map(|v| v.into_iter().map(|e| e.map(Cow::into_owned)).collect())
            .map_err(|e| e.to_string())
    }

    fn some(values: &[&str]) -> Vec<Option<String>> {
        values.iter().map(|v| Some(v.to_string())).collect()
    }

    #[test]
    fn text_arrays_split_as_postgres_reads_them() {
        assert_eq!(text("{}").unwrap(), Vec::<Option<String>>::new());
        assert_eq!(text(" { } ").unwrap(), Vec::<Option<String>>::new());
        assert_eq!(text("{1,2,3}").unwrap(), some(&["1", "2", "3"]));
        assert_eq!(text("{ 1 , 2 }").unwrap(), some(&["1", "2"]));
        assert_eq!(
            text("{NULL,null,\"NULL\"}").unwrap(),
            vec![None, None, Some("NULL".into())]
        );
        assert_eq!(
            text(r#"{"a,b","c \"d\"",e\,f, g h }"#).unwrap(),
            some(&["a,b", "c \"d\"", "e,f", "g h"])
        );
        assert_eq!(text(r"{a\ }").unwrap(), some(&["a "]));
        assert_eq!(text(r"{\NULL}").unwrap(), some(&["NULL"]));
        assert_eq!(text("{é,\"ü\"}").unwrap(), some(&["é", "ü"]));
        assert_eq!(text("[1:2]={7,8}").unwrap(), some(&["7", "8"]));
        // Elements without escapes are borrowed from the input.
        let split = split(r#"{ab,"c d",e\f}"#).unwrap();
        assert!(matches!(split[0], Some(Cow::Borrowed("ab"))));
        assert!(matches!(split[1], Some(Cow::Borrowed("c d"))));
        assert!(matches!(split[2], Some(Cow::Owned(_))));
    }

    #[test]
    fn arrays_past_the_element_bound_are_refused() {
        let at_bound = format!("{{{}}}", vec!["1"; ARRAY_ELEMENTS_MAX].join(","));
        assert_eq!(split(&at_bound).unwrap().len(), ARRAY_ELEMENTS_MAX);
        let past = format!("{{{}}}", vec!["1"; ARRAY_ELEMENTS_MAX + 1].join(","));
        assert_eq!(split(&past).unwrap_err(), ArrayTextError::TooMany);
    }

    #[test]
    fn malformed_text_arrays_are_refused() {
        for bad in [
            "",
            "1,2",
            "{1,2",
            "1,2}",
            "{1,,2}",
            "{,}",
            "{1,}",
            "{\"a}",
            "{a\"b}",
            "{a}b}",
            "{1} x",
            "{\\",
            "[1:2]{1,2}",
        ] {
            assert!(text(bad).is_err(), "{bad:?} was accepted");
        }
        for nested in ["{{1,2},{3,4}}", "[1:2][1:2]={{1,2},{3,4}}"] {
            assert!(
                text(nested).unwrap_err().contains("multidimensional"),
                "{nested}"
            );
        }
    }
}
