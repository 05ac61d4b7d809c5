//! The dialect's error type, by fault. The engine maps each variant to its own error of the
//! same fault, and from there once to SQLSTATE and HTTP status.

pub type Result<T, E = SqlError> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SqlError {
    /// The SQL text does not parse. `line`/`column` are 1-based; `column` counts characters.
    #[error("{message} at line {line}, column {column}")]
    Syntax {
        message: String,
        line: u64,
        column: u64,
    },
    /// The statement parses but cannot be run as written.
    #[error("{0}")]
    Invalid(String),
    /// The statement is over a bound on its shape (see `limits`).
    #[error("{0}")]
    TooComplex(String),
    /// A result would have more columns than allowed.
    #[error("{0}")]
    TooManyColumns(String),
    /// Valid SQL that Sundial does not implement yet.
    #[error("not supported: {0}")]
    NotSupported(String),
}

impl SqlError {
    /// The 1-based line and column a syntax error points at.
    pub fn position(&self) -> Option<(u64, u64)> {
        match self {
            SqlError::Syntax { line, column, .. } => Some((*line, *column)),
            _ => None,
        }
    }

    /// A parser's error, with the position its message ends with (`... at Line: 1, Column:
    /// 8`) as the error's own position and the rest as its message.
    pub fn from_parser(error: &sqlparser::parser::ParserError) -> SqlError {
        let text = match error {
            sqlparser::parser::ParserError::TokenizerError(m)
            | sqlparser::parser::ParserError::ParserError(m) => m.clone(),
            sqlparser::parser::ParserError::RecursionLimitExceeded => {
                return SqlError::TooComplex("the statement nests too deeply".into());
            }
        };
        match split_position(&text) {
            Some((message, line, column)) => SqlError::Syntax {
                message: parser_message(message),
                line,
                column,
            },
            None => SqlError::Syntax {
                message: parser_message(&text),
                line: 1,
                column: 1,
            },
        }
    }
}

/// sqlparser's message (`sql parser error: Expected: X, found: Y at Line: 1, Column: 8`) in
/// Sundial's words, without the position: `expected X, found 'Y'`.
pub fn parser_message(text: &str) -> String {
    let text = text
        .trim_start_matches("sql parser error: ")
        .trim_start_matches("sql tokenizer error: ");
    let text = match text.rfind(" at Line: ") {
        Some(at) => &text[..at],
        None => text,
    };
    let end = |s: &str| match s {
        "EOF" => "the end of the statement".to_string(),
        s => s.to_string(),
    };
    if let Some(rest) = text.strip_prefix("Expected: ")
        && let Some((expected, found)) = rest.rsplit_once(", found: ")
    {
        let found = match found {
            "EOF" => end(found),
            f => format!("'{f}'"),
        };
        return format!("expected {}, found {found}", end(expected));
    }
    lower_first(text)
}

/// `text` with its first letter in lower case, for a message that goes inside a sentence; an
/// all-caps first word (a keyword, a type) stays as it is.
pub fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(c) if c.is_uppercase() && !chars.next().is_some_and(char::is_uppercase) => c
            .to_lowercase()
            .chain(text[c.len_utf8()..].chars())
            .collect(),
        _ => text.to_string(),
    }
}

/// `("Expected: x, found: y", 1, 8)` from `"Expected: x, found: y at Line: 1, Column: 8"`.
fn split_position(text: &str) -> Option<(&str, u64, u64)> {
    let (message, at) = text.rsplit_once(" at Line: ")?;
    let (line, column) = at.split_once(", Column: ")?;
    let column: String = column.chars().take_while(char::is_ascii_digit).collect();
    Some((message, line.parse().ok()?, column.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_positions_become_the_errors_own() {
        let error = sqlparser::parser::ParserError::ParserError(
            "Expected: an expression, found: EOF at Line: 2, Column: 7".into(),
        );
        assert_eq!(
            SqlError::from_parser(&error),
            SqlError::Syntax {
                message: "expected an expression, found the end of the statement".into(),
                line: 2,
                column: 7
            }
        );
    }
}
