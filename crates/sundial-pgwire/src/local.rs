//! Statements the session answers itself: transaction control, session settings, cursors and
//! DEALLOCATE.
//!
//! Drivers send these on every connection (`SET extra_float_digits = 3`, `BEGIN`,
//! `SHOW transaction isolation level`, ...). Sundial commits each statement on its own, so
//! transaction control only tracks the status PostgreSQL would report. Cursors (`DECLARE`,
//! `FETCH`, `MOVE`, `CLOSE`) are parsed here and run on the session's portals.

use std::collections::BTreeMap;

use sundial_query::QueryError;

use crate::error::PgError;

/// A statement handled without the SQL engine.
#[derive(Debug, Clone, PartialEq)]
pub enum LocalCommand {
    Begin,
    Commit,
    Rollback,
    /// `SET name = value`; `value` is `None` for `SET name TO DEFAULT` / `RESET name`.
    Set {
        name: String,
        value: Option<String>,
    },
    ResetAll,
    Show(String),
    /// `DEALLOCATE [PREPARE] name | ALL`: of the session's SQL-level and protocol-level
    /// prepared statements.
    Deallocate(sundial_query::Deallocate),
    /// Accepted and ignored, answering with this command tag.
    Ignored(&'static str),
}

/// Recognises a local command, or `None` for SQL the engine runs.
pub fn classify(sql: &str) -> Option<LocalCommand> {
    let words = words(sql, 6);
    let word = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    Some(match word(0) {
        "begin" | "start" if word(0) == "begin" || word(1) == "transaction" => LocalCommand::Begin,
        "commit" | "end" => LocalCommand::Commit,
        "rollback" | "abort" if !(word(1) == "to" || word(2) == "to") => LocalCommand::Rollback,
        "rollback" => LocalCommand::Ignored("ROLLBACK"),
        "savepoint" => LocalCommand::Ignored("SAVEPOINT"),
        "release" => LocalCommand::Ignored("RELEASE"),
        "discard" => LocalCommand::Ignored("DISCARD ALL"),
        // A malformed one is the engine's to report.
        "deallocate" => LocalCommand::Deallocate(sundial_query::parse_deallocate(sql)?.ok()?),
        "listen" => LocalCommand::Ignored("LISTEN"),
        "unlisten" => LocalCommand::Ignored("UNLISTEN"),
        "set" => return parse_set(sql),
        "reset" if word(1) == "all" => LocalCommand::ResetAll,
        "reset" => LocalCommand::Set {
            name: canonical_name(word(1)),
            value: None,
        },
        // Sundial's own SHOW statements are the engine's.
        "show"
            if !matches!(
                word(1),
                "tables" | "columns" | "partitions" | "create" | "users" | ""
            ) =>
        {
            let name = match (word(1), word(2)) {
                ("transaction", "isolation") => "transaction_isolation".to_string(),
                ("time", "zone") => "timezone".to_string(),
                (name, _) => canonical_name(name),
            };
            LocalCommand::Show(name)
        }
        _ => return None,
    })
}

/// The first `n` words, lower-cased, skipping comments.
fn words(sql: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = sql;
    while out.len() < n {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("--") {
            rest = r.split_once('\n').map_or("", |(_, after)| after);
            continue;
        }
        if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |(_, after)| after);
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        out.push(rest[..end].to_ascii_lowercase());
        rest = &rest[end..];
    }
    out
}

fn canonical_name(name: &str) -> String {
    name.trim_matches('"').to_ascii_lowercase()
}

fn parse_set(sql: &str) -> Option<LocalCommand> {
    let body = sql.trim().trim_end_matches(';').trim();
    let body = body.get(3..)?.trim_start();
    let lower = body.to_ascii_lowercase();
    let body = if lower.starts_with("session ") && !lower.starts_with("session characteristics") {
        &body[8..]
    } else if lower.starts_with("local ") {
        &body[6..]
    } else {
        body
    };
    let lower = body.to_ascii_lowercase();
    if lower.starts_with("session characteristics") || lower.starts_with("transaction") {
        return Some(LocalCommand::Ignored("SET"));
    }
    if let Some(zone) = lower.strip_prefix("time zone") {
        let value = body[body.len() - zone.len()..].trim();
        return Some(LocalCommand::Set {
            name: "timezone".into(),
            value: Some(unquote(value)),
        });
    }
    let split = body
        .find(|c: char| c == '=' || c.is_whitespace())
        .unwrap_or(body.len());
    let name = canonical_name(&body[..split]);
    let rest = body[split..].trim_start();
    let rest = rest
        .strip_prefix('=')
        .or_else(|| {
            rest.get(..3)
                .filter(|w| w.eq_ignore_ascii_case("to "))
                .map(|_| &rest[3..])
        })?
        .trim();
    if name.is_empty() || rest.is_empty() {
        return None;
    }
    let value = if rest.eq_ignore_ascii_case("default") {
        None
    } else {
        Some(
            rest.split(',')
                .map(|v| unquote(v.trim()))
                .collect::<Vec<_>>()
                .join(", "),
        )
    };
    Some(LocalCommand::Set { name, value })
}

fn unquote(v: &str) -> String {
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        v[1..v.len() - 1].replace("''", "'")
    } else {
        v.trim_matches('"').to_string()
    }
}

/// The settings PostgreSQL reports in ParameterStatus, spelled as it reports them.
const REPORTED: [&str; 10] = [
    "server_version",
    "server_encoding",
    "client_encoding",
    "DateStyle",
    "IntervalStyle",
    "TimeZone",
    "integer_datetimes",
    "standard_conforming_strings",
    "is_superuser",
    "application_name",
];

/// A cursor statement.
#[derive(Debug, Clone, PartialEq)]
pub enum CursorCommand {
    /// `DECLARE name [BINARY] [NO SCROLL] CURSOR [WITH[OUT] HOLD] FOR query`.
    Declare {
        name: String,
        binary: bool,
        hold: bool,
        query: String,
    },
    /// `FETCH` (or `MOVE` when `move_only`) of `count` rows forward; `None` is ALL.
    Fetch {
        name: String,
        count: Option<u64>,
        move_only: bool,
    },
    /// `CLOSE name`, or `CLOSE ALL` (`None`).
    Close(Option<String>),
}

/// Recognises a cursor statement: `None` for other SQL.
pub fn classify_cursor(sql: &str) -> Option<Result<CursorCommand, PgError>> {
    let mut lexer = Lexer::new(sql);
    let first = lexer.next()?;
    if first.quoted {
        return None;
    }
    Some(match first.text.as_str() {
        "declare" => parse_declare(lexer),
        "fetch" => parse_fetch(lexer, false),
        "move" => parse_fetch(lexer, true),
        "close" => parse_close(lexer),
        _ => return None,
    })
}

fn syntax(message: &str) -> PgError {
    PgError::Query(QueryError::Syntax {
        message: message.to_string(),
        line: 1,
        column: 1,
    })
}

fn parse_declare(mut lexer: Lexer<'_>) -> Result<CursorCommand, PgError> {
    let name = lexer
        .next()
        .ok_or_else(|| syntax("DECLARE needs a cursor name"))?
        .text;
    let (mut binary, mut hold, mut no) = (false, false, false);
    loop {
        let word = lexer
            .next()
            .ok_or_else(|| syntax("DECLARE ... CURSOR FOR needs a query"))?;
        let after_no = std::mem::replace(&mut no, word.text == "no");
        match word.text.as_str() {
            "binary" => binary = true,
            "insensitive" | "asensitive" | "no" | "cursor" | "without" => {}
            "scroll" if after_no => {}
            "scroll" => {
                return Err(PgError::NotSupported(
                    "scrollable cursors; declare the cursor NO SCROLL".into(),
                ));
            }
            "with" => hold = true,
            "hold" => {}
            "for" => break,
            other => return Err(syntax(&format!("unexpected \"{other}\" in DECLARE"))),
        }
    }
    let query = lexer.rest().trim().trim_end_matches(';').trim();
    if query.is_empty() {
        return Err(syntax("DECLARE ... CURSOR FOR needs a query"));
    }
    Ok(CursorCommand::Declare {
        name,
        binary,
        hold,
        query: query.to_string(),
    })
}

fn parse_fetch(mut lexer: Lexer<'_>, move_only: bool) -> Result<CursorCommand, PgError> {
    let mut words = Vec::new();
    while let Some(w) = lexer.next() {
        if w.text == ";" {
            break;
        }
        words.push(w);
    }
    let name = words
        .pop()
        .ok_or_else(|| syntax("FETCH needs a cursor name"))?
        .text;
    if words
        .last()
        .is_some_and(|w| !w.quoted && matches!(w.text.as_str(), "from" | "in"))
    {
        words.pop();
    }
    let direction: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
    let count = match direction.as_slice() {
        [] | ["next"] | ["forward"] => Some(1),
        ["all"] | ["forward", "all"] => None,
        [n] | ["forward", n] if n.parse::<i64>().is_ok() => {
            let n: i64 = n.parse().unwrap_or(0);
            Some(u64::try_from(n).map_err(|_| backward())?)
        }
        [
            "prior" | "first" | "last" | "backward" | "absolute" | "relative",
            ..,
        ] => {
            return Err(backward());
        }
        _ => return Err(syntax("unrecognised FETCH direction")),
    };
    Ok(CursorCommand::Fetch {
        name,
        count,
        move_only,
    })
}

fn backward() -> PgError {
    PgError::NotInState(
        "cursor can only scan forward: Sundial's cursors are NO SCROLL; FETCH [FORWARD] n | ALL | NEXT"
            .into(),
    )
}

fn parse_close(mut lexer: Lexer<'_>) -> Result<CursorCommand, PgError> {
    let word = lexer
        .next()
        .ok_or_else(|| syntax("CLOSE needs a cursor name or ALL"))?;
    Ok(CursorCommand::Close(
        if !word.quoted && word.text == "all" {
            None
        } else {
            Some(word.text)
        },
    ))
}

/// A word of a cursor statement: an identifier (folded to lower case unless quoted), a number,
/// or one punctuation character.
struct Word {
    text: String,
    quoted: bool,
}

/// Splits the start of a statement into [`Word`]s, skipping spaces and comments.
struct Lexer<'a> {
    sql: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn new(sql: &'a str) -> Lexer<'a> {
        Lexer { sql, pos: 0 }
    }

    fn skip_space(&mut self) {
        loop {
            let rest = &self.sql[self.pos..];
            let trimmed = rest.trim_start();
            self.pos += rest.len() - trimmed.len();
            if trimmed.starts_with("--") {
                self.pos += trimmed.find('\n').unwrap_or(trimmed.len());
            } else if trimmed.starts_with("/*") {
                self.pos += trimmed.find("*/").map_or(trimmed.len(), |i| i + 2);
            } else {
                return;
            }
        }
    }

    /// The text after the words read so far.
    fn rest(&mut self) -> &'a str {
        self.skip_space();
        &self.sql[self.pos..]
    }

    fn next(&mut self) -> Option<Word> {
        let rest = self.rest();
        let first = rest.chars().next()?;
        if first == '"' {
            return Some(self.quoted(rest));
        }
        let signed = matches!(first, '+' | '-');
        let len = rest
            .char_indices()
            .find(|&(i, c)| !(c.is_alphanumeric() || c == '_' || c == '$' || (i == 0 && signed)))
            .map_or(rest.len(), |(i, _)| i)
            .max(first.len_utf8());
        self.pos += len;
        Some(Word {
            text: rest[..len].to_lowercase(),
            quoted: false,
        })
    }

    /// A `"quoted identifier"` with `""` for a quote; an unterminated one takes the rest.
    fn quoted(&mut self, rest: &str) -> Word {
        let mut text = String::new();
        let mut chars = rest.char_indices().skip(1).peekable();
        let mut end = rest.len();
        while let Some((i, c)) = chars.next() {
            if c == '"' {
                if chars.peek().is_some_and(|&(_, n)| n == '"') {
                    chars.next();
                    text.push('"');
                    continue;
                }
                end = i + 1;
                break;
            }
            text.push(c);
        }
        self.pos += end;
        Word { text, quoted: true }
    }
}

/// The reported settings a session starts with, keyed by lower-case name, with their
/// server-wide defaults (the catalog's `pg_settings`). Each is `(value, reportable)`.
pub fn default_settings() -> BTreeMap<String, (String, bool)> {
    REPORTED
        .iter()
        .map(|name| {
            let value = sundial_query::pg_setting(name).unwrap_or_default();
            (name.to_ascii_lowercase(), (value.to_string(), true))
        })
        .collect()
}

/// The name PostgreSQL reports a setting under in ParameterStatus (`DateStyle`, `TimeZone`).
pub fn reported_name(name: &str) -> &str {
    REPORTED
        .iter()
        .find(|r| r.eq_ignore_ascii_case(name))
        .copied()
        .unwrap_or(name)
}

/// Parses a `statement_timeout` value: milliseconds, or a number with `ms`, `s`, `min`, `h`.
pub fn parse_duration_ms(value: &str) -> Option<u64> {
    let v = value.trim().to_ascii_lowercase();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let number: u64 = v[..split].parse().ok()?;
    let factor = match v[split..].trim() {
        "" | "ms" => 1,
        "s" => 1000,
        "min" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    number.checked_mul(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, value: &str) -> Option<LocalCommand> {
        Some(LocalCommand::Set {
            name: name.into(),
            value: Some(value.into()),
        })
    }

    #[test]
    fn recognises_driver_statements() {
        assert_eq!(classify("BEGIN"), Some(LocalCommand::Begin));
        assert_eq!(
            classify("start transaction read only"),
            Some(LocalCommand::Begin)
        );
        assert_eq!(classify(" commit;"), Some(LocalCommand::Commit));
        assert_eq!(classify("ROLLBACK"), Some(LocalCommand::Rollback));
        assert_eq!(
            classify("SET extra_float_digits = 3"),
            set("extra_float_digits", "3")
        );
        assert_eq!(
            classify("SET application_name TO 'psql'"),
            set("application_name", "psql")
        );
        assert_eq!(classify("set time zone 'UTC'"), set("timezone", "UTC"));
        assert_eq!(
            classify("SET SESSION statement_timeout = '5s'"),
            set("statement_timeout", "5s")
        );
        assert_eq!(
            classify("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED"),
            Some(LocalCommand::Ignored("SET"))
        );
        assert_eq!(
            classify("SHOW TRANSACTION ISOLATION LEVEL"),
            Some(LocalCommand::Show("transaction_isolation".into()))
        );
        assert_eq!(classify("SHOW TABLES"), None);
        assert_eq!(classify("select 1"), None);
        assert_eq!(classify("-- hi\nBEGIN"), Some(LocalCommand::Begin));
    }

    #[test]
    fn cursor_statements() {
        let declare = classify_cursor(
            "DECLARE \"My \"\"c\"\"\" BINARY NO SCROLL CURSOR WITH HOLD FOR select 1; ",
        );
        assert_eq!(
            declare.unwrap().unwrap(),
            CursorCommand::Declare {
                name: "My \"c\"".into(),
                binary: true,
                hold: true,
                query: "select 1".into()
            }
        );
        let fetch = |sql: &str| classify_cursor(sql).unwrap();
        assert_eq!(
            fetch("FETCH FORWARD 2 FROM \"c\"").unwrap(),
            CursorCommand::Fetch {
                name: "c".into(),
                count: Some(2),
                move_only: false
            }
        );
        assert_eq!(
            fetch("fetch all in C").unwrap(),
            CursorCommand::Fetch {
                name: "c".into(),
                count: None,
                move_only: false
            }
        );
        assert_eq!(
            fetch("FETCH c").unwrap(),
            CursorCommand::Fetch {
                name: "c".into(),
                count: Some(1),
                move_only: false
            }
        );
        assert_eq!(
            fetch("MOVE 5 FROM c").unwrap(),
            CursorCommand::Fetch {
                name: "c".into(),
                count: Some(5),
                move_only: true
            }
        );
        assert_eq!(fetch("FETCH -1 FROM c").unwrap_err().sqlstate(), "55000");
        assert_eq!(fetch("FETCH PRIOR FROM c").unwrap_err().sqlstate(), "55000");
        assert_eq!(fetch("CLOSE ALL").unwrap(), CursorCommand::Close(None));
        assert_eq!(
            fetch("close \"all\"").unwrap(),
            CursorCommand::Close(Some("all".into()))
        );
        assert_eq!(
            fetch("DECLARE c SCROLL CURSOR FOR SELECT 1")
                .unwrap_err()
                .sqlstate(),
            "0A000"
        );
        assert!(classify_cursor("SELECT 1").is_none());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("1500"), Some(1500));
        assert_eq!(parse_duration_ms("5s"), Some(5000));
        assert_eq!(parse_duration_ms("2 min"), Some(120_000));
        assert_eq!(parse_duration_ms("x"), None);
    }
}
