//! COPY in the session: statement preparation, copy-in mode and COPY TO's row stream.
//!
//! ```text
//!  COPY t FROM STDIN ─▶ resolve table/columns (42P01/42703 before anything is sent)
//!                    ─▶ loader on a blocking thread ─▶ CopyInResponse, copy-in mode
//!  copy-in mode:  CopyData ─▶ chunk channel (waits when the loader is behind)
//!                 CopyDone ─▶ Done; loader commits the rest ─▶ CommandComplete "COPY n"
//!                 CopyFail ─▶ channel dropped; loader drops its uncommitted chunk
//!                             ─▶ ErrorResponse
//!                 Flush/Sync: ignored (Flush flushes); anything else: protocol violation
//!  COPY ... TO STDOUT ─▶ statement stream ─▶ CopyOutResponse, one CopyData per row, CopyDone
//! ```
//!
//! Invariant: while `copy_in` is set, every message goes to [`Session::copy_message`]; it is
//! cleared exactly when the loader's outcome has been reported. A simple query that started the
//! COPY resumes its remaining statements afterwards, as PostgreSQL does.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sundial_query::copy::{CopyDirection, CopyOptions, CopySourceSpec, CopyStatement};
use sundial_query::{Prepared, QueryError};
use tokio::sync::futures::OwnedNotified;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Completion, Item, Session, SimpleStatement, StatementKind};
use crate::codec::{Message, Reader};
use crate::copy_in::{self, CancelFlag, Chunk, CopyPlan};
use crate::copy_out::RowWriter;
use crate::error::PgError;
use crate::types;

/// Rows encoded between checks of the output buffer's size.
const ROWS_PER_ENCODE: usize = 1024;

/// A COPY FROM STDIN receiving data.
pub(crate) struct CopyIn {
    chunks: mpsc::Sender<Chunk>,
    loader: JoinHandle<Result<u64, PgError>>,
    canceled: CancelFlag,
    /// Completes on a CancelRequest sent any time since the COPY started.
    cancel_signal: Pin<Box<OwnedNotified>>,
    /// For a COPY started by a simple query: the statements after it.
    pub(super) rest: Option<VecDeque<SimpleStatement>>,
}

impl Session {
    /// Turns a parsed COPY into a statement: COPY TO plans its query now; COPY FROM resolves
    /// its table when it runs.
    pub(super) async fn prepare_copy(
        &mut self,
        copy: CopyStatement,
    ) -> Result<StatementKind, PgError> {
        let CopyStatement {
            source,
            direction,
            options,
        } = copy;
        match (direction, source) {
            (CopyDirection::FromStdin, CopySourceSpec::Table { name, columns }) => {
                Ok(StatementKind::CopyIn {
                    table: name,
                    columns,
                    options,
                })
            }
            (CopyDirection::FromStdin, CopySourceSpec::Query(_)) => Err(PgError::Query(
                QueryError::Invalid("COPY FROM needs a table, not a query".into()),
            )),
            (CopyDirection::ToStdout, source) => {
                let sql = match source {
                    CopySourceSpec::Table { name, columns } => select_all(&name, &columns),
                    CopySourceSpec::Query(sql) => sql,
                };
                let query = self.shared.engine.prepare_as(&sql, &self.caller).await?;
                if query.schema.is_none() {
                    return Err(PgError::Query(QueryError::Invalid(
                        "COPY (query) TO needs a query that returns rows".into(),
                    )));
                }
                Ok(StatementKind::CopyOut { query, options })
            }
        }
    }

    /// Resolves the target, starts the loader and enters copy-in mode.
    pub(super) async fn start_copy_in(
        &mut self,
        table: &str,
        columns: &[String],
        options: &CopyOptions,
    ) -> Result<Completion, PgError> {
        // Before the target is resolved: a caller that may not write learns nothing of it.
        self.shared.engine.check_role(
            &self.caller,
            sundial_query::Role::Write,
            "COPY ... FROM STDIN",
        )?;
        let plan = CopyPlan::resolve(self.shared.engine.db(), table, columns, options.clone())?;
        let (tx, rx) = mpsc::channel(copy_in::CHANNEL_CHUNKS);
        let canceled: CancelFlag = Arc::new(AtomicBool::new(false));
        let flag = canceled.clone();
        let field_bytes_max = self.shared.options.message_bytes_max;
        let count = plan.columns.len();
        let inserts = self.shared.engine.inserts().clone();
        let loader = tokio::task::spawn_blocking(move || {
            copy_in::load(&plan, &inserts, rx, field_bytes_max, &flag)
        });
        self.copy_response(b'G', options, count);
        self.copy_in = Some(CopyIn {
            chunks: tx,
            loader,
            canceled,
            cancel_signal: Box::pin(self.cancel.requested_owned()),
            rest: None,
        });
        self.flush().await?;
        Ok(Completion::CopyStarted)
    }

    /// CopyInResponse (`G`) or CopyOutResponse (`H`).
    fn copy_response(&mut self, tag: u8, options: &CopyOptions, columns: usize) {
        let code = RowWriter::format_code(options.format);
        let at = self.out.begin(tag);
        self.out.buf.push(code as u8);
        self.out.i16(columns as i16);
        for _ in 0..columns {
            self.out.i16(i16::from(code));
        }
        self.out.end(at);
    }

    /// Handles a message in copy-in mode. Returns false when the client said goodbye.
    pub(super) async fn copy_message(&mut self, message: Message<'_>) -> Result<bool, PgError> {
        match message.tag {
            b'd' => self.copy_data(message.body).await?,
            b'c' => self.finish_copy_in(Some(Chunk::Done), None).await?,
            b'f' => {
                let reason = Reader::new(message.body).cstr()?.to_string();
                self.finish_copy_in(None, Some(PgError::CopyFailed(reason)))
                    .await?;
            }
            b'H' => self.flush().await?,
            // Drivers send Sync right after the Execute that started the COPY.
            b'S' => {}
            b'X' => return Ok(false),
            tag => {
                return Err(PgError::Protocol(format!(
                    "unexpected message type '{}' during COPY from stdin",
                    tag as char
                )));
            }
        }
        Ok(true)
    }

    /// Hands one CopyData to the loader, waiting while its queue is full. A loader that has
    /// stopped (a bad row) is reported at once; later copy messages are then ignored.
    async fn copy_data(&mut self, body: &[u8]) -> Result<(), PgError> {
        let Some(copy) = &mut self.copy_in else {
            return Ok(());
        };
        let sent = tokio::select! {
            biased;
            _ = &mut copy.cancel_signal => None,
            sent = copy.chunks.send(Chunk::Data(body.to_vec())) => Some(sent.is_ok()),
        };
        match sent {
            Some(true) => Ok(()),
            Some(false) => self.finish_copy_in(None, None).await,
            None => self.finish_copy_in(None, Some(PgError::Canceled)).await,
        }
    }

    /// Leaves copy-in mode: sends `last` to the loader (CopyDone) or drops its input (CopyFail,
    /// a failure found here), waits for its outcome and reports it; `failure` wins over it.
    async fn finish_copy_in(
        &mut self,
        last: Option<Chunk>,
        failure: Option<PgError>,
    ) -> Result<(), PgError> {
        let Some(mut copy) = self.copy_in.take() else {
            return Ok(());
        };
        if let Some(chunk) = last {
            // An error means the loader already stopped; its outcome says why.
            let _ = copy.chunks.send(chunk).await;
        }
        drop(copy.chunks);
        let canceled = matches!(failure, Some(PgError::Canceled));
        if canceled {
            // The loader may be busy with a batch rather than waiting for input.
            copy.canceled.store(true, Ordering::Relaxed);
        }
        let joined = tokio::select! {
            joined = &mut copy.loader => joined,
            _ = &mut copy.cancel_signal, if !canceled => {
                copy.canceled.store(true, Ordering::Relaxed);
                (&mut copy.loader).await
            }
        };
        let loaded = joined
            .map_err(|e| PgError::Internal(format!("COPY loader: {e}")))
            .and_then(|r| r);
        let outcome = match failure {
            Some(e) => Err(e),
            None => loaded,
        };
        let ok = match outcome {
            Ok(rows) => {
                self.out.command_complete(&format!("COPY {rows}"));
                true
            }
            Err(e) if e.is_fatal() => return Err(e),
            Err(e) => {
                self.report(&e, None);
                false
            }
        };
        match copy.rest {
            // The simple query goes on (after a failure, it ends).
            Some(rest) => {
                if !ok || !self.run_simple(rest).await? {
                    self.end_simple_query();
                }
            }
            // Extended protocol: after an error, skip to the client's Sync.
            None => self.skipping = !ok,
        }
        Ok(())
    }

    /// Runs a COPY TO: the query's rows as CopyData, streamed batch by batch.
    pub(super) async fn copy_out(
        &mut self,
        query: &Prepared,
        options: &CopyOptions,
    ) -> Result<Completion, PgError> {
        let schema = query
            .schema
            .clone()
            .ok_or_else(|| PgError::Internal("COPY TO without a result".into()))?;
        let mut running = self.start(query.clone(), Vec::new());
        self.copy_response(b'H', options, schema.fields().len());
        let mut writer = RowWriter::new(options.clone(), &schema);
        writer.header(&mut self.out, &schema);
        let mut rows = 0u64;
        while let Some(item) = self.next_item(&mut running).await? {
            let batch = match item {
                Item::Batch(b) => b,
                Item::Failed(e) => return Err(e.into()),
                Item::Done { .. } => break,
            };
            let columns = batch
                .columns()
                .iter()
                .map(types::normalize)
                .collect::<Result<Vec<_>, _>>()?;
            let mut row = 0;
            while row < batch.num_rows() {
                let end = batch.num_rows().min(row + ROWS_PER_ENCODE);
                writer.rows(&mut self.out, &columns, row..end)?;
                row = end;
                if self.out.buf.len() >= self.shared.options.flush_bytes {
                    self.flush().await?;
                }
            }
            rows += batch.num_rows() as u64;
        }
        writer.finish(&mut self.out);
        self.out.empty(b'c');
        Ok(Completion::Complete(format!("COPY {rows}")))
    }
}

/// `SELECT "a", "b" FROM "t"` (every column when none are named).
fn select_all(table: &str, columns: &[String]) -> String {
    let quote = |name: &str| format!("\"{}\"", name.replace('"', "\"\""));
    let list = if columns.is_empty() {
        "*".to_string()
    } else {
        columns
            .iter()
            .map(|c| quote(c))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("SELECT {list} FROM {}", quote(table))
}
