//! SQL cursors on the session's portals: `DECLARE` makes a named portal (PostgreSQL's cursors
//! and protocol portals share one namespace, so Describe Portal works on a cursor), `FETCH`
//! resumes it for n rows, `MOVE` skips them, `CLOSE` drops it.
//!
//! Invariants: a cursor's query starts at its first FETCH and keeps its place between FETCHes
//! (its statement's stream is simply not polled meanwhile); a cursor without HOLD lives until
//! its transaction ends (COMMIT, ROLLBACK, or the end of a multi-statement simple query), one
//! WITH HOLD until CLOSE or the end of the session. Cursors scan forward only.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use sundial_query::Prepared;

use super::{
    Completion, Portal, PortalState, Rows, Session, Statement, StatementKind, Transaction,
};
use crate::error::PgError;
use crate::local::CursorCommand;
use crate::types::Format;

/// What makes a portal a cursor.
pub(crate) struct CursorInfo {
    /// Survives the end of the transaction that declared it.
    hold: bool,
}

impl Session {
    /// Turns a cursor statement into a statement kind; DECLARE plans its query now.
    pub(super) async fn prepare_cursor(
        &mut self,
        command: CursorCommand,
    ) -> Result<StatementKind, PgError> {
        Ok(match command {
            CursorCommand::Declare {
                name,
                binary,
                hold,
                query,
            } => {
                let query = self.shared.engine.prepare_as(&query, &self.caller).await?;
                if query.schema.is_none() {
                    return Err(PgError::Query(sundial_query::QueryError::Invalid(
                        "DECLARE CURSOR needs a query that returns rows".into(),
                    )));
                }
                StatementKind::Declare {
                    name,
                    binary,
                    hold,
                    query,
                }
            }
            CursorCommand::Fetch {
                name,
                count,
                move_only,
            } => StatementKind::Fetch {
                name,
                count,
                move_only,
            },
            CursorCommand::Close(name) => StatementKind::CloseCursor(name),
        })
    }

    /// The rows a statement returns and their formats, as RowDescription describes them: for
    /// FETCH, the cursor's columns, in the FETCH's formats or else the cursor's.
    pub(super) fn described(
        &self,
        statement: &Statement,
        formats: &[Format],
    ) -> Result<Option<(SchemaRef, Vec<Format>)>, PgError> {
        match &statement.kind {
            StatementKind::Fetch {
                name,
                move_only: false,
                ..
            } => {
                let cursor = self.cursor(name)?;
                let formats = if formats.is_empty() {
                    cursor.formats.clone()
                } else {
                    formats.to_vec()
                };
                Ok(cursor.statement.schema().map(|s| (s, formats)))
            }
            _ => Ok(statement.schema().map(|s| (s, formats.to_vec()))),
        }
    }

    fn cursor(&self, name: &str) -> Result<&Portal, PgError> {
        self.portals
            .get(name)
            .filter(|p| p.cursor.is_some())
            .ok_or_else(|| PgError::UndefinedCursor(name.to_string()))
    }

    /// DECLARE: a new named portal over the query, with the DECLARE's parameters.
    pub(super) fn declare(
        &mut self,
        portal: &mut Portal,
        name: &str,
        binary: bool,
        hold: bool,
        query: &Prepared,
    ) -> Result<Completion, PgError> {
        if !hold && self.transaction == Transaction::Idle && !self.implicit_block {
            return Err(PgError::NoActiveTransaction(
                "DECLARE CURSOR can only be used in transaction blocks".into(),
            ));
        }
        if name.is_empty() {
            return Err(PgError::UndefinedCursor(String::new()));
        }
        if self.portals.contains_key(name) {
            return Err(PgError::DuplicateCursor(name.to_string()));
        }
        let statement = Arc::new(Statement::new(
            StatementKind::Engine(query.clone()),
            portal.statement.param_oids.clone(),
            portal.statement.param_types.clone(),
        ));
        let formats = if binary {
            vec![Format::Binary]
        } else {
            Vec::new()
        };
        let mut cursor = Portal::new(statement, std::mem::take(&mut portal.params), formats);
        cursor.cursor = Some(CursorInfo { hold });
        self.portals.insert(name.to_string(), cursor);
        Ok(Completion::Complete("DECLARE CURSOR".into()))
    }

    /// FETCH (or MOVE) `count` rows forward (`None`: the rest). `formats` are the FETCH
    /// portal's result formats; none means the cursor's.
    pub(super) async fn fetch(
        &mut self,
        name: &str,
        count: Option<u64>,
        move_only: bool,
        formats: &[Format],
    ) -> Result<Completion, PgError> {
        self.cursor(name)?;
        let verb = if move_only { "MOVE" } else { "FETCH" };
        if count == Some(0) {
            return Ok(Completion::Complete(format!("{verb} 0")));
        }
        let Some(mut cursor) = self.portals.remove(name) else {
            return Err(PgError::UndefinedCursor(name.to_string()));
        };
        let own_formats = if formats.is_empty() {
            None
        } else {
            Some(std::mem::replace(&mut cursor.formats, formats.to_vec()))
        };
        if let PortalState::Running(running) = &mut cursor.state {
            // The statement timeout counts from this FETCH, not from the DECLARE.
            running.deadline = self.deadline();
        }
        let before = cursor.rows_sent;
        let rows = if move_only { Rows::Discard } else { Rows::Send };
        // Boxed: a cursor's portal runs a query, never another FETCH, but the compiler cannot
        // know that the recursion ends.
        let result = Box::pin(self.run_portal(&mut cursor, count.unwrap_or(0), rows)).await;
        if let Some(f) = own_formats {
            cursor.formats = f;
        }
        let moved = cursor.rows_sent - before;
        self.portals.insert(name.to_string(), cursor);
        result.map(|_| Completion::Complete(format!("{verb} {moved}")))
    }

    /// CLOSE one cursor, or all of them.
    pub(super) fn close_cursor(&mut self, name: Option<&str>) -> Result<Completion, PgError> {
        match name {
            Some(name) => {
                self.cursor(name)?;
                self.portals.remove(name);
                Ok(Completion::Complete("CLOSE CURSOR".into()))
            }
            None => {
                self.portals.retain(|_, p| p.cursor.is_none());
                Ok(Completion::Complete("CLOSE CURSOR ALL".into()))
            }
        }
    }

    /// The end of a transaction: its portals go, all but the cursors declared WITH HOLD.
    pub(super) fn close_portals_at_commit(&mut self) {
        self.portals
            .retain(|_, p| p.cursor.as_ref().is_some_and(|c| c.hold));
    }
}
