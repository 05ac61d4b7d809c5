//! CSV text of `/exp`, as QuestDB writes it: the header names quoted, strings (and symbols)
//! always in double quotes with inner quotes doubled, timestamps and dates quoted ISO 8601,
//! numbers and booleans bare, NULL (and non-finite floats) empty, UUIDs bare, lines ending in
//! CRLF.

use arrow::array::Array;
use arrow::datatypes::Schema;

use crate::json::{type_name, write_present_value};

/// QuestDB ends CSV lines with CRLF.
pub(crate) const EOL: &[u8] = b"\r\n";

/// Appends `s` in double quotes, doubling the quotes inside.
pub(crate) fn push_quoted(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for part in s.split('"').enumerate() {
        if part.0 > 0 {
            out.extend_from_slice(b"\"\"");
        }
        out.extend_from_slice(part.1.as_bytes());
    }
    out.push(b'"');
}

/// The header row.
pub(crate) fn write_header(out: &mut Vec<u8>, schema: &Schema, delimiter: u8) {
    for (i, field) in schema.fields().iter().enumerate() {
        if i > 0 {
            out.push(delimiter);
        }
        push_quoted(out, field.name());
    }
    out.extend_from_slice(EOL);
}

/// Per column, whether its strings are written bare (UUIDs, which are never quoted).
pub(crate) fn bare_strings(schema: &Schema) -> Vec<bool> {
    schema
        .fields()
        .iter()
        .map(|f| type_name(f) == "UUID")
        .collect()
}

/// One value: NULL, NaN and infinities are empty fields; `bare` strings (UUIDs) are not quoted.
pub(crate) fn write_value(out: &mut Vec<u8>, array: &dyn Array, row: usize, bare: bool) {
    if array.is_null(row) {
        return;
    }
    write_present_value(out, array, row, b"", |out, text| {
        if bare {
            out.extend_from_slice(text.as_bytes());
        } else {
            push_quoted(out, text);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_doubles_quotes() {
        let mut out = Vec::new();
        push_quoted(&mut out, r#"say "hi", ok"#);
        assert_eq!(String::from_utf8(out).unwrap(), r#""say ""hi"", ok""#);
    }
}
