//! Bounds on a statement's shape, checked on its text before anything parses it.
//!
//! The parser reads a chain such as `1 + 1 + ...` or `a OR b OR ...` in a loop, but the tree
//! it builds is as deep as the chain is long, and everything after it (the dialect rewrites,
//! DataFusion's planner and optimizer, even dropping the tree) walks that tree recursively.
//! So the depth of the tree must be bounded before it is built. Parentheses are bounded by
//! the parser's own recursion limit; what remains is counted here in one pass over the text:
//!
//! * operators (`+`, `||`, `>=`, `AND`, `OR`, `NOT`, ...): each can add one level of nesting,
//!   so their number bounds the depth of any expression, at most [`OPERATORS_MAX`];
//! * set operations (`UNION`, `INTERSECT`, `EXCEPT`), each one level of the query tree, at
//!   most [`SET_OPERATIONS_MAX`];
//! * named subqueries (`name AS (`: common table expressions, and `CREATE TABLE .. AS (`),
//!   which a chain of references turns into a plan as deep as the chain, at most
//!   [`SUBQUERIES_MAX`].
//!
//! Invariant: the scan is linear in the text and allocates nothing, and a statement within
//! these bounds plans on a thread with [`PLANNING_STACK_BYTES`] of stack (the query runtime's
//! threads have that much). Quoted strings, quoted identifiers and comments are skipped, so
//! literals never count.

use crate::error::{Result, SqlError};

/// Most operators in one statement.
pub const OPERATORS_MAX: usize = 4_000;

/// Most `UNION` / `INTERSECT` / `EXCEPT` in one statement.
pub const SET_OPERATIONS_MAX: usize = 500;

/// Most named subqueries (`name AS (...)`) in one statement.
pub const SUBQUERIES_MAX: usize = 500;

/// Most items in one select list: PostgreSQL's bound on a result's columns (planning a
/// projection costs more than linear time in its width).
pub const SELECT_ITEMS_MAX: usize = 1_664;

/// Statements at least this long are planned with their thread handed over to the blocking
/// pool first (`block_in_place`): planning them takes long enough to starve the other
/// tasks of the thread's queue.
pub const LARGE_STATEMENT_BYTES: usize = 16 << 10;

/// Stack the threads that parse and plan statements need for statements within the bounds
/// above (reserved address space: the kernel backs only the pages used).
pub const PLANNING_STACK_BYTES: usize = 256 << 20;

/// What [`check`] counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub operators: usize,
    pub set_operations: usize,
    pub subqueries: usize,
}

/// Fails with SQLSTATE 54001 (statement too complex) when `sql` is over a bound.
pub fn check(sql: &str) -> Result<Shape> {
    let shape = measure(sql);
    let over = |what: &str, n: usize, max: usize| {
        Err(SqlError::TooComplex(format!(
            "statement too complex: {n} {what}, more than the {max} one statement may have"
        )))
    };
    if shape.operators > OPERATORS_MAX {
        return over("operators", shape.operators, OPERATORS_MAX);
    }
    if shape.set_operations > SET_OPERATIONS_MAX {
        return over(
            "UNION/INTERSECT/EXCEPT",
            shape.set_operations,
            SET_OPERATIONS_MAX,
        );
    }
    if shape.subqueries > SUBQUERIES_MAX {
        return over(
            "named subqueries (WITH ... AS)",
            shape.subqueries,
            SUBQUERIES_MAX,
        );
    }
    Ok(shape)
}

/// Fails with SQLSTATE 54011 (too many columns) when a select list of the parsed statement
/// has more than [`SELECT_ITEMS_MAX`] items.
pub fn check_select_lists(statement: &sqlparser::ast::Statement) -> Result<()> {
    use sqlparser::ast::{Query, SetExpr, Visit, Visitor};
    use std::ops::ControlFlow;

    struct Widest(usize);
    impl Visitor for Widest {
        type Break = ();
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            let mut bodies = vec![query.body.as_ref()];
            while let Some(body) = bodies.pop() {
                match body {
                    SetExpr::Select(select) => self.0 = self.0.max(select.projection.len()),
                    SetExpr::SetOperation { left, right, .. } => {
                        bodies.push(left);
                        bodies.push(right);
                    }
                    _ => {}
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut widest = Widest(0);
    let _ = statement.visit(&mut widest);
    if widest.0 > SELECT_ITEMS_MAX {
        return Err(SqlError::TooManyColumns(format!(
            "a select list of {} items is more than the {SELECT_ITEMS_MAX} a result may have",
            widest.0
        )));
    }
    Ok(())
}

/// Counts the operators, set operations and named subqueries of `sql`.
pub fn measure(sql: &str) -> Shape {
    let bytes = sql.as_bytes();
    let mut shape = Shape::default();
    // Whether the last word was `AS`, with only blanks since: `AS (` opens a named subquery.
    let mut after_as = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\'' | b'"' | b'`' => {
                i = skip_quoted(bytes, i);
                after_as = false;
                continue;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i = bytes[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(bytes.len(), |p| i + p);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = bytes[i + 2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map_or(bytes.len(), |p| i + 2 + p + 2);
                continue;
            }
            b'(' => {
                if after_as {
                    shape.subqueries += 1;
                }
                after_as = false;
            }
            _ if is_operator_byte(b) => {
                // A run such as `>=`, `||` or `<>` is one operator.
                while i < bytes.len() && is_operator_byte(bytes[i]) {
                    i += 1;
                }
                shape.operators += 1;
                after_as = false;
                continue;
            }
            _ if is_word_byte(b) => {
                let start = i;
                while i < bytes.len() && is_word_byte(bytes[i]) {
                    i += 1;
                }
                let word = &bytes[start..i];
                after_as = word.eq_ignore_ascii_case(b"as");
                if [&b"and"[..], b"or", b"not", b"is", b"like", b"between"]
                    .iter()
                    .any(|k| word.eq_ignore_ascii_case(k))
                {
                    shape.operators += 1;
                } else if [&b"union"[..], b"intersect", b"except"]
                    .iter()
                    .any(|k| word.eq_ignore_ascii_case(k))
                {
                    shape.set_operations += 1;
                }
                continue;
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => after_as = false,
        }
        i += 1;
    }
    shape
}

fn is_operator_byte(b: u8) -> bool {
    matches!(
        b,
        b'+' | b'-' | b'*' | b'/' | b'%' | b'|' | b'&' | b'^' | b'<' | b'>' | b'=' | b'!' | b'~'
    )
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// The index just past the quoted text starting at `start` (a doubled quote stays inside).
fn skip_quoted(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        if bytes[i] == quote {
            if bytes.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        // Backslash escapes (`E'..'`, MySQL-style strings) never end the quote early.
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_operators_outside_literals_and_comments() {
        let shape = measure(
            "SELECT a + b, 'x + y -- z' || \"p+q\" FROM t -- a + b\n \
             WHERE a >= 1 AND b <> 2 OR NOT c /* + + */",
        );
        assert_eq!(shape.operators, 7, "{shape:?}");
        assert_eq!(shape.set_operations, 0);
    }

    #[test]
    fn counts_set_operations_and_named_subqueries() {
        let shape = measure(
            "WITH a AS (SELECT 1), b AS(SELECT * FROM a) \
             SELECT * FROM a UNION ALL SELECT * FROM b EXCEPT SELECT CAST(x AS INT) FROM b",
        );
        assert_eq!(shape.subqueries, 2, "{shape:?}");
        assert_eq!(shape.set_operations, 2);
    }

    #[test]
    fn long_chains_are_refused_with_54001() {
        let sum = format!("SELECT 1{}", "+1".repeat(OPERATORS_MAX + 1));
        let err = check(&sum).expect_err("too many operators");
        assert!(matches!(err, SqlError::TooComplex(_)), "{err}");
        assert!(err.to_string().contains("operators"), "{err}");
        let within = format!("SELECT 1{}", "+1".repeat(OPERATORS_MAX));
        assert!(check(&within).is_ok());
        let unions = "SELECT 1 UNION ALL ".repeat(SET_OPERATIONS_MAX + 1) + "SELECT 1";
        assert!(matches!(check(&unions), Err(SqlError::TooComplex(_))));
        let ctes = (0..=SUBQUERIES_MAX)
            .map(|i| format!("c{i} AS (SELECT 1)"))
            .collect::<Vec<_>>()
            .join(", ");
        let ctes = format!("WITH {ctes} SELECT 1");
        assert!(matches!(check(&ctes), Err(SqlError::TooComplex(_))));
    }

    #[test]
    fn unterminated_quotes_and_comments_end_the_scan() {
        for sql in [
            "SELECT 'abc",
            "SELECT \"abc",
            "SELECT 1 /* +",
            "SELECT 'it''s' + 1",
        ] {
            measure(sql);
        }
        assert_eq!(measure("SELECT 'it''s' + 1").operators, 1);
    }
}
