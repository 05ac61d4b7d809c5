//! User management statements, as PostgreSQL and QuestDB Enterprise write them:
//!
//! ```text
//! CREATE USER [IF NOT EXISTS] name [[WITH] PASSWORD 'pw' | [WITH] NO PASSWORD | [WITH] PASSWORD NULL]
//! ALTER USER name [WITH] PASSWORD 'pw' | [WITH] NO PASSWORD | [WITH] PASSWORD NULL
//! ALTER USER name CREATE TOKEN TYPE REST | JWK
//! ALTER USER name DROP TOKEN TYPE REST | JWK
//! GRANT READ | WRITE | ADMIN TO name
//! REVOKE READ | WRITE | ADMIN FROM name
//! DROP USER [IF EXISTS] name
//! SHOW USERS
//! ```
//!
//! Names are identifiers: unquoted ones fold to lower case, `"quoted"` ones keep their case.
//! Whether a name or password is acceptable (length, characters) is the user store's to say;
//! here only the shape of the statement is checked.
//!
//! Invariants: a password never appears in a parse error's message (a statement's error is
//! logged), nor in the `Debug` form of a [`UserCommand`] ([`Password`]'s `Debug` hides it).
//! The role is this crate's own [`UserRole`]: the dialect knows no user store.

use sqlparser::tokenizer::Token;

use crate::error::{Result, SqlError};
use crate::tokens::Parser;

/// A role a user may be granted, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UserRole {
    /// Queries, SHOW, EXPLAIN, `COPY ... TO STDOUT`, cursors, SET.
    Read,
    /// Read, plus INSERT and ingestion.
    Write,
    /// Write, plus DDL, backups, server files and user management.
    Admin,
}

impl UserRole {
    /// The role's name as statements write it, in lower case.
    pub fn name(self) -> &'static str {
        match self {
            UserRole::Read => "read",
            UserRole::Write => "write",
            UserRole::Admin => "admin",
        }
    }
}

/// A password as a statement gives it. Its `Debug` form does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn new(password: impl Into<String>) -> Password {
        Password(password.into())
    }

    /// The password itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(***)")
    }
}

/// The kind of credential `ALTER USER ... CREATE|DROP TOKEN TYPE` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenType {
    /// A bearer token for the HTTP API.
    Rest,
    /// An ILP/TCP key pair (a JSON Web Key, as QuestDB's clients take it).
    Jwk,
}

impl TokenType {
    pub fn name(self) -> &'static str {
        match self {
            TokenType::Rest => "REST",
            TokenType::Jwk => "JWK",
        }
    }
}

/// A user management statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserCommand {
    /// `CREATE USER`; `password` `None`: the user has none (cannot log in with one).
    Create {
        name: String,
        password: Option<Password>,
        if_not_exists: bool,
    },
    /// `ALTER USER name WITH PASSWORD 'pw'` (or `WITH NO PASSWORD`: `None`).
    SetPassword {
        name: String,
        password: Option<Password>,
    },
    /// `ALTER USER name CREATE TOKEN TYPE REST|JWK`: returns the new credential once.
    CreateToken { name: String, token: TokenType },
    /// `ALTER USER name DROP TOKEN TYPE REST|JWK`: every such credential of the user.
    DropToken { name: String, token: TokenType },
    /// `GRANT role TO name`.
    Grant { name: String, role: UserRole },
    /// `REVOKE role FROM name`.
    Revoke { name: String, role: UserRole },
    /// `DROP USER`.
    Drop { name: String, if_exists: bool },
    /// `SHOW USERS`.
    Show,
}

impl UserCommand {
    /// The statement's command tag, as PostgreSQL's clients expect it.
    pub fn tag(&self) -> &'static str {
        match self {
            UserCommand::Create { .. } => "CREATE ROLE",
            UserCommand::SetPassword { .. }
            | UserCommand::CreateToken { .. }
            | UserCommand::DropToken { .. } => "ALTER ROLE",
            UserCommand::Grant { .. } => "GRANT ROLE",
            UserCommand::Revoke { .. } => "REVOKE ROLE",
            UserCommand::Drop { .. } => "DROP ROLE",
            UserCommand::Show => "SHOW",
        }
    }
}

impl Parser<'_> {
    /// After `CREATE USER`.
    pub(crate) fn create_user(&mut self) -> Result<UserCommand> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.user_name()?;
        let password = if self.peek().is_none() {
            None
        } else {
            self.password_clause()?
        };
        self.end_after_user()?;
        Ok(UserCommand::Create {
            name,
            password,
            if_not_exists,
        })
    }

    /// After `ALTER USER`.
    pub(crate) fn alter_user(&mut self) -> Result<UserCommand> {
        let name = self.user_name()?;
        let create = if self.eat_kw("CREATE") {
            true
        } else if self.eat_kw("DROP") {
            false
        } else if self.peek_kw("WITH") || self.peek_kw("PASSWORD") || self.peek_kw("NO") {
            let password = self.password_clause()?;
            self.end_after_user()?;
            return Ok(UserCommand::SetPassword { name, password });
        } else {
            return self.error(
                "expected WITH PASSWORD 'password', WITH NO PASSWORD, CREATE TOKEN TYPE REST|JWK \
                 or DROP TOKEN TYPE REST|JWK",
            );
        };
        self.expect_kw("TOKEN")?;
        self.expect_kw("TYPE")?;
        let token = if self.eat_kw("REST") {
            TokenType::Rest
        } else if self.eat_kw("JWK") {
            TokenType::Jwk
        } else {
            return self.error("expected REST (an HTTP bearer token) or JWK (an ILP key)");
        };
        self.end_after_user()?;
        Ok(if create {
            UserCommand::CreateToken { name, token }
        } else {
            UserCommand::DropToken { name, token }
        })
    }

    /// After `GRANT` (`grant` true) or `REVOKE`.
    pub(crate) fn grant_or_revoke(&mut self, grant: bool) -> Result<UserCommand> {
        let role = self.user_role()?;
        self.expect_kw(if grant { "TO" } else { "FROM" })?;
        let name = self.user_name()?;
        self.end_after_user()?;
        Ok(if grant {
            UserCommand::Grant { name, role }
        } else {
            UserCommand::Revoke { name, role }
        })
    }

    /// After `DROP USER`.
    pub(crate) fn drop_user(&mut self) -> Result<UserCommand> {
        let if_exists = self.if_exists()?;
        let name = self.user_name()?;
        self.end_after_user()?;
        Ok(UserCommand::Drop { name, if_exists })
    }

    fn user_role(&mut self) -> Result<UserRole> {
        for (word, role) in [
            ("READ", UserRole::Read),
            ("WRITE", UserRole::Write),
            ("ADMIN", UserRole::Admin),
        ] {
            if self.eat_kw(word) {
                return Ok(role);
            }
        }
        self.error(
            "expected READ, WRITE or ADMIN (Sundial grants roles, not privileges on objects)",
        )
    }

    /// A user name: an identifier (`"Quoted"` keeps its case) or a quoted string.
    fn user_name(&mut self) -> Result<String> {
        let name = match self.peek().map(|t| &t.token) {
            Some(Token::Word(w)) if w.quote_style.is_some() => w.value.clone(),
            Some(Token::Word(w)) => w.value.to_lowercase(),
            Some(Token::SingleQuotedString(s)) => s.clone(),
            _ => return self.error("expected a user name"),
        };
        self.pos += 1;
        Ok(name)
    }

    /// `[WITH] PASSWORD 'pw'`, `[WITH] PASSWORD NULL` or `[WITH] NO PASSWORD`; `None` for no
    /// password. An error here never shows the token it found: it may be a password written
    /// without quotes.
    fn password_clause(&mut self) -> Result<Option<Password>> {
        self.eat_kw("WITH");
        if self.eat_kw("NO") {
            if !self.eat_kw("PASSWORD") {
                return self.error("expected PASSWORD after NO");
            }
            return Ok(None);
        }
        if !self.eat_kw("PASSWORD") {
            return self.error("expected PASSWORD 'password' or NO PASSWORD");
        }
        if self.eat_kw("NULL") {
            return Ok(None);
        }
        // PostgreSQL's ENCRYPTED PASSWORD means a hash; Sundial takes the password itself.
        match self.peek().map(|t| &t.token) {
            Some(Token::SingleQuotedString(s)) => {
                let password = Password::new(s.clone());
                self.pos += 1;
                Ok(Some(password))
            }
            _ => self.hidden_error(
                "expected the password as a quoted string after PASSWORD, e.g. PASSWORD \
                 'secret' (a ' inside is written '')",
            ),
        }
    }

    /// The end of a user statement; what follows is not shown (it may be part of a
    /// password).
    fn end_after_user(&self) -> Result<()> {
        if self.peek().is_some() {
            return self.hidden_error("expected end of statement");
        }
        Ok(())
    }

    /// A syntax error at the current token that does not show the token.
    fn hidden_error<T>(&self, message: &str) -> Result<T> {
        let loc = self.location();
        Err(SqlError::Syntax {
            message: message.to_string(),
            line: loc.line,
            column: loc.column,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::statement::{Command, parse};

    use super::*;

    fn user(sql: &str) -> UserCommand {
        match parse(sql) {
            Ok(Command::User(u)) => u,
            other => panic!("{sql}: {other:?}"),
        }
    }

    fn pw(s: &str) -> Option<Password> {
        Some(Password::new(s))
    }

    #[test]
    fn create_user_in_every_form() {
        for (sql, name, password, if_not_exists) in [
            ("CREATE USER bob", "bob", None, false),
            ("create user Bob with password 'pw'", "bob", pw("pw"), false),
            ("CREATE USER bob PASSWORD 'pw'", "bob", pw("pw"), false),
            ("CREATE USER \"Bob\" WITH NO PASSWORD", "Bob", None, false),
            ("CREATE USER bob NO PASSWORD", "bob", None, false),
            ("CREATE USER bob WITH PASSWORD NULL", "bob", None, false),
            (
                "CREATE USER IF NOT EXISTS bob WITH PASSWORD 'it''s'",
                "bob",
                pw("it's"),
                true,
            ),
            ("CREATE USER 'quoted' PASSWORD ''", "quoted", pw(""), false),
            (
                "CREATE USER \"jürgen 🙂\" WITH PASSWORD 'pässwörd 🔑'",
                "jürgen 🙂",
                pw("pässwörd 🔑"),
                false,
            ),
            (
                "CREATE USER \"a\"\"b\" PASSWORD 'x;y'",
                "a\"b",
                pw("x;y"),
                false,
            ),
        ] {
            assert_eq!(
                user(sql),
                UserCommand::Create {
                    name: name.into(),
                    password,
                    if_not_exists
                },
                "{sql}"
            );
        }
    }

    #[test]
    fn alter_grant_revoke_drop_show() {
        assert_eq!(
            user("ALTER USER bob WITH PASSWORD 'new'"),
            UserCommand::SetPassword {
                name: "bob".into(),
                password: pw("new")
            }
        );
        assert_eq!(
            user("alter user bob password 'new'"),
            UserCommand::SetPassword {
                name: "bob".into(),
                password: pw("new")
            }
        );
        assert_eq!(
            user("ALTER USER bob WITH NO PASSWORD"),
            UserCommand::SetPassword {
                name: "bob".into(),
                password: None
            }
        );
        for (sql, create, token) in [
            (
                "ALTER USER bob CREATE TOKEN TYPE REST",
                true,
                TokenType::Rest,
            ),
            ("alter user bob create token type jwk", true, TokenType::Jwk),
            (
                "ALTER USER bob DROP TOKEN TYPE REST",
                false,
                TokenType::Rest,
            ),
            ("ALTER USER bob DROP TOKEN TYPE JWK", false, TokenType::Jwk),
        ] {
            let name = "bob".to_string();
            let expected = if create {
                UserCommand::CreateToken { name, token }
            } else {
                UserCommand::DropToken { name, token }
            };
            assert_eq!(user(sql), expected, "{sql}");
        }
        for (sql, role) in [
            ("GRANT READ TO bob", UserRole::Read),
            ("grant write to bob", UserRole::Write),
            ("Grant Admin To BOB", UserRole::Admin),
        ] {
            assert_eq!(
                user(sql),
                UserCommand::Grant {
                    name: "bob".into(),
                    role
                }
            );
        }
        assert_eq!(
            user("REVOKE WRITE FROM \"Bob\""),
            UserCommand::Revoke {
                name: "Bob".into(),
                role: UserRole::Write
            }
        );
        assert_eq!(
            user("DROP USER IF EXISTS bob"),
            UserCommand::Drop {
                name: "bob".into(),
                if_exists: true
            }
        );
        assert_eq!(
            user("drop user bob"),
            UserCommand::Drop {
                name: "bob".into(),
                if_exists: false
            }
        );
        assert_eq!(user("SHOW USERS"), UserCommand::Show);
        assert!(UserRole::Read < UserRole::Write && UserRole::Write < UserRole::Admin);
    }

    /// Malformed statements name what is wrong and where, and never show a password.
    #[test]
    fn malformed_statements_point_at_the_fault() {
        for (sql, message, column) in [
            ("CREATE USER", "expected a user name", 12),
            ("CREATE USER 5", "expected a user name", 13),
            ("CREATE USER bob WITH", "expected PASSWORD", 21),
            ("CREATE USER bob WITH PASSWORD", "as a quoted string", 30),
            (
                "CREATE USER bob WITH PASSWORD hunter2",
                "as a quoted string",
                31,
            ),
            (
                "CREATE USER bob WITH PASSWORD \"hunter2\"",
                "quoted string",
                31,
            ),
            (
                "CREATE USER bob PASSWORD 'a' 'hunter2'",
                "end of statement",
                30,
            ),
            ("CREATE USER bob WITH SUPERUSER", "expected PASSWORD", 22),
            ("CREATE USER bob NO", "expected PASSWORD after NO", 19),
            ("CREATE USER IF EXISTS bob", "expected NOT", 16),
            ("ALTER USER bob", "expected WITH PASSWORD", 15),
            ("ALTER USER bob RENAME TO al", "expected WITH PASSWORD", 16),
            ("ALTER USER bob CREATE TOKEN", "expected TYPE", 28),
            (
                "ALTER USER bob CREATE TOKEN TYPE OAUTH",
                "expected REST",
                34,
            ),
            (
                "ALTER USER bob DROP TOKEN TYPE REST 'tok'",
                "end of statement",
                37,
            ),
            (
                "GRANT SELECT ON t TO bob",
                "expected READ, WRITE or ADMIN",
                7,
            ),
            ("GRANT READ bob", "expected TO", 12),
            ("GRANT READ TO", "expected a user name", 14),
            ("GRANT READ TO bob, al", "end of statement", 18),
            ("REVOKE ADMIN TO bob", "expected FROM", 14),
            ("DROP USER", "expected a user name", 10),
            ("DROP USER IF bob", "expected EXISTS", 14),
            ("DROP USER a b", "end of statement", 13),
            ("SHOW USERS x", "end of statement", 12),
        ] {
            let e = parse(sql).unwrap_err();
            assert!(e.to_string().contains(message), "{sql}: {e}");
            assert_eq!(e.position(), Some((1, column)), "{sql}: {e}");
            assert!(!e.to_string().contains("hunter2"), "{sql}: {e}");
        }
        // The tokenizer's own error for a password left open shows no password either.
        let e = parse("ALTER USER bob WITH PASSWORD 'hunter2").unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn hostile_names_and_passwords_parse_or_fail_cleanly() {
        let long = "n".repeat(1_000_000);
        assert_eq!(
            user(&format!("CREATE USER \"{long}\" PASSWORD '{long}'")),
            UserCommand::Create {
                name: long.clone(),
                password: pw(&long),
                if_not_exists: false
            }
        );
        // Odd characters stay as written: the store decides what a name may hold.
        for name in ["", " ", "a\u{0}b", "../../etc", "\u{202e}evil"] {
            let quoted = name.replace('"', "\"\"");
            assert_eq!(
                user(&format!("DROP USER \"{quoted}\"")),
                UserCommand::Drop {
                    name: name.into(),
                    if_exists: false
                }
            );
        }
        for sql in [
            "CREATE USER \"unterminated",
            "CREATE USER bob PASSWORD 'x",
            "ALTER USER bob WITH PASSWORD E'a\\'b'",
            "ALTER USER bob WITH PASSWORD $$pw$$",
            "GRANT",
            "REVOKE",
            "ALTER USER",
            "CREATE USER bob PASSWORD 'a' PASSWORD 'b'",
        ] {
            assert!(parse(sql).is_err(), "{sql}");
        }
        // Debug output (logs, panics) never holds a password.
        let shown = format!("{:?}", user("CREATE USER bob PASSWORD 'hunter2'"));
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn other_statements_are_left_alone() {
        for sql in [
            "SHOW TABLES",
            "CREATE TABLE users (a INT)",
            "SELECT * FROM users",
            "DROP TABLE users",
        ] {
            assert!(!matches!(parse(sql), Ok(Command::User(_))), "{sql}");
        }
    }
}
