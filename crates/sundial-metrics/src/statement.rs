//! The statement log: one line per failed or cancelled statement, and one per slow statement,
//! shared by the PostgreSQL and HTTP front ends so that both log alike.
//!
//! ```text
//!  front end: statement ends ─▶ query_finished(protocol, client, sql, elapsed, outcome)
//!        ├─▶ metrics: sundial_queries_total, sundial_query_duration_seconds
//!        ├─▶ failed / cancelled: INFO  "statement failed"   protocol client error statement
//!        └─▶ over --slow-query-ms: WARN "slow statement"    duration_ms protocol client statement
//! ```
//!
//! Invariants: a logged statement is at most [`LOGGED_STATEMENT_BYTES_MAX`] bytes of the text
//! (cut at a character boundary, its full length noted), and the text of every `PASSWORD '...'`
//! literal is replaced by `***` (in the statement and in the error, which may quote it). Both
//! are logged as quoted strings, so a multi-line statement stays on one log line. Lines go to
//! the target `sundial::query`.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::{Outcome, Protocol, metrics};

/// Bytes of a statement's text that a log line shows at most.
pub const LOGGED_STATEMENT_BYTES_MAX: usize = 1024;

/// The default of `--slow-query-ms`.
pub const SLOW_QUERY_MS_DEFAULT: u64 = 1_000;

/// Statements that take longer than this many milliseconds are logged (0: none).
static SLOW_QUERY_MS: AtomicU64 = AtomicU64::new(SLOW_QUERY_MS_DEFAULT);

/// Sets the slow-statement threshold, in milliseconds (0: no slow-statement log).
pub fn set_slow_query_ms(ms: u64) {
    SLOW_QUERY_MS.store(ms, Ordering::Relaxed);
}

pub fn slow_query_ms() -> u64 {
    SLOW_QUERY_MS.load(Ordering::Relaxed)
}

/// How a statement ended, with the error's message when it failed.
#[derive(Debug, Clone, Copy)]
pub enum QueryOutcome<'a> {
    Ok,
    Error(&'a str),
    Cancelled(&'a str),
}

/// Counts a finished statement and logs it if it failed, was cancelled, or was slow.
pub fn query_finished(
    protocol: Protocol,
    client: Option<SocketAddr>,
    sql: &str,
    elapsed: Duration,
    outcome: QueryOutcome<'_>,
) {
    let kind = match outcome {
        QueryOutcome::Ok => Outcome::Ok,
        QueryOutcome::Error(_) => Outcome::Error,
        QueryOutcome::Cancelled(_) => Outcome::Cancelled,
    };
    metrics().query(protocol, kind, elapsed);
    let client = Client(client);
    // Texts go as `&str` values: quoted and escaped on one line by the text format, plain
    // strings in JSON.
    match outcome {
        QueryOutcome::Ok => {}
        QueryOutcome::Error(error) => {
            let (error, statement) = (redact(error), statement_for_log(sql));
            tracing::info!(
                target: "sundial::query",
                protocol = protocol.label(),
                client = %client,
                error = error.as_ref(),
                statement = statement.as_ref(),
                "statement failed"
            );
        }
        QueryOutcome::Cancelled(reason) => {
            let (reason, statement) = (redact(reason), statement_for_log(sql));
            tracing::info!(
                target: "sundial::query",
                protocol = protocol.label(),
                client = %client,
                reason = reason.as_ref(),
                statement = statement.as_ref(),
                "statement cancelled"
            );
        }
    }
    let slow_ms = slow_query_ms();
    if slow_ms > 0 && elapsed > Duration::from_millis(slow_ms) {
        let statement = statement_for_log(sql);
        tracing::warn!(
            target: "sundial::query",
            duration_ms = elapsed.as_millis() as u64,
            protocol = protocol.label(),
            client = %client,
            outcome = kind.label(),
            statement = statement.as_ref(),
            "slow statement"
        );
    }
}

/// A client address, or `-` when unknown.
struct Client(Option<SocketAddr>);

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(addr) => write!(f, "{addr}"),
            None => f.write_str("-"),
        }
    }
}

/// A statement as logs show it: at most [`LOGGED_STATEMENT_BYTES_MAX`] bytes (cut at a
/// character boundary, then `...` and the full length), with password literals replaced.
pub fn statement_for_log(sql: &str) -> Cow<'_, str> {
    let sql = sql.trim();
    if sql.len() <= LOGGED_STATEMENT_BYTES_MAX {
        return redact(sql);
    }
    let mut end = LOGGED_STATEMENT_BYTES_MAX;
    while !sql.is_char_boundary(end) {
        end -= 1;
    }
    let cut = redact(&sql[..end]);
    Cow::Owned(format!("{cut}... ({} bytes)", sql.len()))
}

/// `text` with the contents of every string literal after the word `PASSWORD` (any case)
/// replaced by `***`; a literal cut short by truncation is replaced to the end.
fn redact(text: &str) -> Cow<'_, str> {
    const WORD: &[u8] = b"password";
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i + WORD.len() <= bytes.len() {
        // The word alone: not inside a longer name or a quoted text ('password').
        let alone = i == 0
            || !matches!(bytes[i - 1], b'\'' | b'"' | b'_' | b'$')
                && !bytes[i - 1].is_ascii_alphanumeric();
        if !alone || !bytes[i..i + WORD.len()].eq_ignore_ascii_case(WORD) {
            i += 1;
            continue;
        }
        let mut j = i + WORD.len();
        while j < bytes.len() && bytes[j].is_ascii_whitespace() {
            j += 1;
        }
        // PASSWORD = '...' as well as PASSWORD '...'.
        if j < bytes.len() && bytes[j] == b'=' {
            j += 1;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
        }
        // E'...' (backslash escapes) as well as '...'.
        let escaped = matches!(bytes.get(j), Some(b'E' | b'e')) && bytes.get(j + 1) == Some(&b'\'');
        if escaped {
            j += 1;
        }
        if j >= bytes.len() || bytes[j] != b'\'' {
            i += WORD.len();
            continue;
        }
        // The literal's end: the next quote not doubled ('' is a quote inside) nor escaped.
        let mut k = j + 1;
        loop {
            match bytes.get(k) {
                None => break,
                Some(b'\\') if escaped => k += 2,
                Some(b'\'') if bytes.get(k + 1) == Some(&b'\'') => k += 2,
                Some(b'\'') => break,
                Some(_) => k += 1,
            }
        }
        let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
        // Quotes are ASCII: j + 1 and k are character boundaries.
        o.push_str(&text[copied..=j]);
        o.push_str("***");
        copied = k.min(bytes.len());
        i = k + 1;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut o) => {
            o.push_str(&text[copied..]);
            if copied >= bytes.len() {
                o.push('\'');
            }
            Cow::Owned(o)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("ALTER USER bob WITH PASSWORD 'hunter2'"),
            "ALTER USER bob WITH PASSWORD '***'"
        );
        assert_eq!(
            redact("create user x password = 'a''b' ; select 'password'"),
            "create user x password = '***' ; select 'password'"
        );
        assert_eq!(redact("x PassWord 'cut sho"), "x PassWord '***'");
        assert_eq!(redact("password"), "password");
        assert_eq!(redact("passwordpassword '"), "passwordpassword '");
        assert_eq!(redact("my_password 'x'"), "my_password 'x'");
        assert_eq!(redact("SELECT 1"), "SELECT 1");
        assert!(matches!(redact("SELECT 1"), Cow::Borrowed(_)));
        assert_eq!(
            redact("PASSWORD 'a' PASSWORD 'b' tail"),
            "PASSWORD '***' PASSWORD '***' tail"
        );
        assert_eq!(redact("é password 'ü'é"), "é password '***'é");
    }

    /// Every form of the user statements that carries a password (see `sundial_sql::users`).
    #[test]
    fn user_statement_passwords_are_redacted() {
        for (sql, logged) in [
            (
                "CREATE USER bob WITH PASSWORD 'hunter2'",
                "CREATE USER bob WITH PASSWORD '***'",
            ),
            (
                "create user if not exists bob password 'it''s; hunter2'",
                "create user if not exists bob password '***'",
            ),
            (
                "ALTER USER \"Bob\" PASSWORD 'hunter2'",
                "ALTER USER \"Bob\" PASSWORD '***'",
            ),
            (
                "ALTER USER bob WITH\n  PASSWORD\n'hunter2'",
                "ALTER USER bob WITH\n  PASSWORD\n'***'",
            ),
            (
                "ALTER USER bob WITH PASSWORD E'hun\\'ter2' ; SELECT 1",
                "ALTER USER bob WITH PASSWORD E'***' ; SELECT 1",
            ),
            (
                "ALTER USER bob WITH PASSWORD 'pässwörd 🔑'",
                "ALTER USER bob WITH PASSWORD '***'",
            ),
            // Not a password: left as written.
            (
                "ALTER USER bob WITH NO PASSWORD",
                "ALTER USER bob WITH NO PASSWORD",
            ),
            (
                "CREATE USER bob WITH PASSWORD NULL",
                "CREATE USER bob WITH PASSWORD NULL",
            ),
        ] {
            assert_eq!(statement_for_log(sql), logged, "{sql}");
        }
        assert_eq!(redact("password e'x\\"), "password e'***'");
    }

    #[test]
    fn long_statements_are_cut_at_a_character_boundary() {
        let sql = "é".repeat(2000);
        let logged = statement_for_log(&sql);
        assert!(
            logged.len() < LOGGED_STATEMENT_BYTES_MAX + 32,
            "{}",
            logged.len()
        );
        assert!(logged.ends_with("... (4000 bytes)"), "{logged}");
        let short = statement_for_log("  SELECT 1 \n");
        assert_eq!(short, "SELECT 1");
        let secret = format!("{} PASSWORD 'abc{}'", "x".repeat(1000), "y".repeat(100));
        let logged = statement_for_log(&secret);
        assert!(!logged.contains("abc"), "{logged}");
    }

    #[test]
    fn hostile_texts_do_not_panic() {
        for text in [
            "'",
            "password'",
            "password '",
            "PASSWORD ''",
            "\u{0}password\u{0}'",
        ] {
            let _ = redact(text);
            let _ = statement_for_log(text);
        }
        assert_eq!(redact("password ''"), "password '***'");
    }
}
