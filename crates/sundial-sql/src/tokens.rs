//! The token cursor under Sundial's own statements ([`crate::statement`], [`crate::users`]):
//! sqlparser's tokens without whitespace, a position, and the small steps every statement is
//! parsed with (keywords, names, strings, errors that point at the token).

use sqlparser::dialect::GenericDialect;
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};

use crate::error::{Result, SqlError};

pub(crate) fn tokenize(sql: &str) -> Result<Vec<TokenWithSpan>> {
    Tokenizer::new(&GenericDialect {}, sql)
        .tokenize_with_location()
        .map_err(|e| SqlError::Syntax {
            message: e.message,
            line: e.location.line,
            column: e.location.column,
        })
}

/// Byte offset of a token location in `sql`.
pub(crate) fn offset(sql: &str, loc: Location) -> usize {
    let mut line = 1;
    let mut line_start = 0;
    if loc.line > 1 {
        for (i, c) in sql.char_indices() {
            if c == '\n' {
                line += 1;
                if line == loc.line {
                    line_start = i + 1;
                    break;
                }
            }
        }
    }
    sql[line_start..]
        .char_indices()
        .nth(loc.column.saturating_sub(1) as usize)
        .map_or(sql.len(), |(i, _)| line_start + i)
}

/// A statement's tokens (whitespace left out) and the position of the next one.
pub(crate) struct Parser<'a> {
    pub(crate) sql: &'a str,
    pub(crate) tokens: Vec<TokenWithSpan>,
    pub(crate) pos: usize,
}

impl<'a> Parser<'a> {
    /// The tokens of `sql`, at the first.
    pub(crate) fn new(sql: &'a str) -> Result<Parser<'a>> {
        let tokens = tokenize(sql)?
            .into_iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
            .collect();
        Ok(Parser {
            sql,
            tokens,
            pos: 0,
        })
    }
}

impl Parser<'_> {
    pub(crate) fn reset(&mut self) -> bool {
        self.pos = 0;
        true
    }

    pub(crate) fn peek(&self) -> Option<&TokenWithSpan> {
        self.tokens.get(self.pos)
    }

    pub(crate) fn location(&self) -> Location {
        self.peek()
            .map(|t| t.span.start)
            .or_else(|| self.tokens.last().map(|t| t.span.end))
            .unwrap_or(Location { line: 1, column: 1 })
    }

    pub(crate) fn error<T>(&self, message: impl Into<String>) -> Result<T> {
        let loc = self.location();
        let found = self.peek().map_or_else(
            || "end of statement".to_string(),
            |t| format!("'{}'", t.token),
        );
        Err(SqlError::Syntax {
            message: format!("{}, found {found}", message.into()),
            line: loc.line,
            column: loc.column,
        })
    }

    pub(crate) fn peek_kw(&self, kw: &str) -> bool {
        matches!(self.peek().map(|t| &t.token), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(kw))
    }

    pub(crate) fn eat_kw(&mut self, kw: &str) -> bool {
        let hit = self.peek_kw(kw);
        if hit {
            self.pos += 1;
        }
        hit
    }

    pub(crate) fn expect_kw(&mut self, kw: &str) -> Result<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            self.error(format!("expected {kw}"))
        }
    }

    pub(crate) fn expect_from(&mut self) -> Result<()> {
        if self.eat_kw("FROM") || self.eat_kw("IN") {
            Ok(())
        } else {
            self.error("expected FROM")
        }
    }

    pub(crate) fn eat(&mut self, token: &Token) -> bool {
        let hit = self.peek().is_some_and(|t| &t.token == token);
        if hit {
            self.pos += 1;
        }
        hit
    }

    pub(crate) fn expect(&mut self, token: &Token) -> Result<()> {
        if self.eat(token) {
            Ok(())
        } else {
            self.error(format!("expected '{token}'"))
        }
    }

    pub(crate) fn end(&self) -> Result<()> {
        if self.pos < self.tokens.len() {
            self.error("expected end of statement")
        } else {
            Ok(())
        }
    }

    pub(crate) fn peek_is_name(&self) -> bool {
        matches!(
            self.peek().map(|t| &t.token),
            Some(Token::Word(_) | Token::SingleQuotedString(_))
        )
    }

    /// An identifier: quoted names keep their case, unquoted ones are folded to lower case
    /// (as DataFusion folds identifiers in queries). QuestDB's `'quoted'` table names work too.
    pub(crate) fn name(&mut self, what: &str) -> Result<String> {
        let name = match self.peek().map(|t| &t.token) {
            Some(Token::Word(w)) if w.quote_style.is_some() => w.value.clone(),
            Some(Token::Word(w)) => w.value.to_lowercase(),
            Some(Token::SingleQuotedString(s)) => s.clone(),
            _ => return self.error(format!("expected {what}")),
        };
        self.pos += 1;
        // schema-qualified names: public.t
        if matches!(name.as_str(), "public" | "sundial") && self.eat(&Token::Period) {
            return self.name(what);
        }
        Ok(name)
    }

    pub(crate) fn name_list(&mut self, what: &str) -> Result<Vec<String>> {
        let mut names = vec![self.name(what)?];
        while self.eat(&Token::Comma) {
            names.push(self.name(what)?);
        }
        Ok(names)
    }

    pub(crate) fn string(&mut self, what: &str) -> Result<String> {
        match self.peek().map(|t| &t.token) {
            Some(Token::SingleQuotedString(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => self.error(format!("expected {what}")),
        }
    }

    /// Source text from the current token to the end of the statement.
    pub(crate) fn rest(&mut self) -> String {
        let text = match self.peek() {
            Some(t) => self.sql[offset(self.sql, t.span.start)..]
                .trim()
                .to_string(),
            None => String::new(),
        };
        self.pos = self.tokens.len();
        text
    }

    /// An optional `IF EXISTS`.
    pub(crate) fn if_exists(&mut self) -> Result<bool> {
        if !self.eat_kw("IF") {
            return Ok(false);
        }
        self.expect_kw("EXISTS")?;
        Ok(true)
    }

    /// An optional `IF NOT EXISTS`.
    pub(crate) fn if_not_exists(&mut self) -> Result<bool> {
        if !self.eat_kw("IF") {
            return Ok(false);
        }
        self.expect_kw("NOT")?;
        self.expect_kw("EXISTS")?;
        Ok(true)
    }
}
