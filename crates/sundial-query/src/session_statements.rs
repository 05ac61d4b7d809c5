//! SQL-level prepared statements, per session as in PostgreSQL: `PREPARE name [(types)] AS
//! statement`, `EXECUTE name [(values)]`, `DEALLOCATE [PREPARE] name | ALL`.
//!
//! ```text
//!  PREPARE  ─▶ planned (parameters typed by the list) ─▶ SessionStatements of the session
//!  EXECUTE  ─▶ the session's statement, values cast to its types ─▶ run, role checked now
//!  DEALLOCATE ─▶ removed (26000 if the session has no such name)
//! ```
//!
//! Invariants:
//! - names live in the `SessionStatements` of the session that made them: a PostgreSQL
//!   connection has one until it ends; an HTTP request (and [`crate::Engine::run_as`]) gets a
//!   fresh one that is dropped with it, so nothing persists past it. DataFusion's own store of
//!   prepared plans (one per engine, shared by every caller) is never used;
//! - a session holds at most [`SESSION_STATEMENTS_MAX`] names (54000 past it);
//! - a prepared statement carries what running it needs (`access`), checked against the
//!   caller's role at each EXECUTE, never at PREPARE only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::Expr;
use datafusion::optimizer::simplify_expressions::{ExprSimplifier, SimplifyContext};
use datafusion::scalar::ScalarValue;

use crate::error::{QueryError, Result, StatementFault};

/// SQL-level prepared statements one session holds at most.
pub const SESSION_STATEMENTS_MAX: usize = 1000;

/// One session's SQL-level prepared statements (`T`: the engine's prepared statement), by
/// name. Clones share the statements.
pub struct Named<T>(Arc<Mutex<HashMap<String, Arc<T>>>>);

impl<T> Clone for Named<T> {
    fn clone(&self) -> Self {
        Named(self.0.clone())
    }
}

impl<T> Default for Named<T> {
    fn default() -> Self {
        Named(Arc::default())
    }
}

impl<T> std::fmt::Debug for Named<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SessionStatements({})", self.len())
    }
}

impl<T> Named<T> {
    /// An empty set, for one session.
    pub fn new() -> Named<T> {
        Named::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<T>>> {
        // A panic while holding the lock leaves a consistent map: keep using it.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Statements held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, name: &str) -> bool {
        self.lock().contains_key(name)
    }

    pub(crate) fn get(&self, name: &str) -> Result<Arc<T>> {
        self.lock()
            .get(name)
            .cloned()
            .ok_or_else(|| unknown_statement(name))
    }

    pub(crate) fn insert(&self, name: &str, prepared: Arc<T>) -> Result<()> {
        let mut statements = self.lock();
        if statements.contains_key(name) {
            return Err(QueryError::Statement {
                fault: StatementFault::Duplicate,
                message: format!("prepared statement \"{name}\" already exists"),
            });
        }
        if statements.len() >= SESSION_STATEMENTS_MAX {
            return Err(QueryError::Statement {
                fault: StatementFault::TooMany,
                message: format!(
                    "this session already holds {SESSION_STATEMENTS_MAX} prepared statements, \
                     the most one may; DEALLOCATE those it no longer needs"
                ),
            });
        }
        statements.insert(name.to_string(), prepared);
        Ok(())
    }

    /// Removes a statement; whether it was there.
    pub fn remove(&self, name: &str) -> bool {
        self.lock().remove(name).is_some()
    }

    /// Removes every statement.
    pub fn clear(&self) {
        self.lock().clear();
    }
}

/// The error for a name the session does not hold (SQLSTATE 26000).
pub fn unknown_statement(name: &str) -> QueryError {
    QueryError::Statement {
        fault: StatementFault::Unknown,
        message: format!("prepared statement \"{name}\" does not exist"),
    }
}

/// What `DEALLOCATE` removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deallocate {
    Name(String),
    All,
}

/// Recognises `DEALLOCATE [PREPARE] name | ALL` (after any leading comments): `None` for any
/// other statement. An unquoted name is folded to lower case, as PostgreSQL does.
pub fn parse_deallocate(sql: &str) -> Option<Result<Deallocate>> {
    let mut words = Words(sql);
    if !words.next()?.eq_ignore_ascii_case("deallocate") {
        return None;
    }
    let syntax = || {
        Some(Err(QueryError::Invalid(
            "DEALLOCATE takes one prepared statement's name, or ALL: DEALLOCATE [PREPARE] name"
                .into(),
        )))
    };
    let mut word = match words.next() {
        Some(w) => w,
        None => return syntax(),
    };
    if word.eq_ignore_ascii_case("prepare") {
        word = match words.next() {
            Some(w) => w,
            None => return syntax(),
        };
    }
    if words.next().is_some() {
        return syntax();
    }
    Some(Ok(if word.eq_ignore_ascii_case("all") {
        Deallocate::All
    } else if let Some(quoted) = word.strip_prefix('"').and_then(|w| w.strip_suffix('"')) {
        Deallocate::Name(quoted.replace("\"\"", "\""))
    } else {
        Deallocate::Name(word.to_lowercase())
    }))
}

/// The words of a short statement: identifiers, quoted identifiers; comments, whitespace and a
/// final `;` skipped.
struct Words<'a>(&'a str);

impl<'a> Iterator for Words<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        loop {
            let rest = self.0.trim_start();
            if let Some(r) = rest.strip_prefix("--") {
                self.0 = r.split_once('\n').map_or("", |(_, after)| after);
            } else if let Some(r) = rest.strip_prefix("/*") {
                self.0 = r.split_once("*/").map_or("", |(_, after)| after);
            } else if let Some(r) = rest.strip_prefix(';') {
                self.0 = r;
            } else {
                self.0 = rest;
                break;
            }
        }
        let rest = self.0;
        let end = if rest.starts_with('"') {
            // Up to the closing quote; a doubled quote is part of the name.
            let mut i = 1;
            let bytes = rest.as_bytes();
            loop {
                match bytes.get(i) {
                    None => break rest.len(),
                    Some(b'"') if bytes.get(i + 1) == Some(&b'"') => i += 2,
                    Some(b'"') => break i + 1,
                    Some(_) => i += 1,
                }
            }
        } else {
            rest.find(|c: char| c.is_whitespace() || c == ';' || c == '"')
                .unwrap_or(rest.len())
        };
        if end == 0 {
            return None;
        }
        self.0 = &rest[end..];
        Some(&rest[..end])
    }
}

/// The values of EXECUTE's arguments, folded to constants and cast to the types of the
/// statement's parameters (`param_types`, where it has one for a parameter).
pub(crate) fn argument_values(
    name: &str,
    arguments: Vec<Expr>,
    param_types: &[Option<DataType>],
) -> Result<Vec<ScalarValue>> {
    let expected = param_types.len();
    if arguments.len() != expected {
        return Err(QueryError::Invalid(format!(
            "prepared statement \"{name}\" takes {expected} parameters but EXECUTE gives {}",
            arguments.len()
        )));
    }
    let simplifier = ExprSimplifier::new(SimplifyContext::default());
    arguments
        .into_iter()
        .zip(param_types)
        .enumerate()
        .map(|(i, (argument, data_type))| {
            let value = match simplifier.simplify(argument)? {
                Expr::Literal(value, _) => value,
                other => {
                    return Err(QueryError::NotSupported(format!(
                        "EXECUTE argument {} is not a constant ({other}); give values such as \
                         1, 'text' or '2024-01-01'::TIMESTAMP",
                        i + 1
                    )));
                }
            };
            match data_type {
                Some(t) if value.data_type() != *t => value.cast_to(t).map_err(|e| {
                    QueryError::Invalid(format!(
                        "EXECUTE argument {} cannot become {t}: {e}",
                        i + 1
                    ))
                }),
                _ => Ok(value),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deallocate_is_recognised() {
        let parsed = |sql: &str| parse_deallocate(sql).map(|r| r.map_err(|e| e.to_string()));
        let is = |sql: &str, d: Deallocate| assert_eq!(parsed(sql), Some(Ok(d)), "{sql}");
        is("DEALLOCATE a", Deallocate::Name("a".into()));
        is(
            "deallocate prepare Stmt1;",
            Deallocate::Name("stmt1".into()),
        );
        is(
            "-- tag\nDEALLOCATE \"My \"\"S\"\"\"",
            Deallocate::Name("My \"S\"".into()),
        );
        is("DEALLOCATE ALL", Deallocate::All);
        is("/* x */ DEALLOCATE PREPARE all", Deallocate::All);
        assert!(matches!(parsed("DEALLOCATE"), Some(Err(_))));
        assert!(matches!(parsed("DEALLOCATE a b"), Some(Err(_))));
        assert!(parse_deallocate("SELECT 1").is_none());
        assert!(parse_deallocate("").is_none());
    }
}
