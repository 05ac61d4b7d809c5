//! The query layer's error type, by fault; protocol layers map it once to SQLSTATE/HTTP status.

use datafusion::error::DataFusionError;
use sundial_ingest::IngestError;
use sundial_sql::SqlError;
use sundial_storage::StorageError;

pub type Result<T, E = QueryError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The SQL text does not parse. `line`/`column` are 1-based; `column` counts characters.
    #[error("{message} at line {line}, column {column}")]
    Syntax {
        message: String,
        line: u64,
        column: u64,
    },
    /// The statement parses but cannot be run as written (unknown table, wrong types, ...).
    #[error("{0}")]
    Invalid(String),
    /// The statement is over a bound on its shape (see `limits`): SQLSTATE 54001.
    #[error("{0}")]
    TooComplex(String),
    /// A result would have more columns than allowed: SQLSTATE 54011.
    #[error("{0}")]
    TooManyColumns(String),
    /// The statement would do what the server's settings forbid (such as writing a server
    /// file): SQLSTATE 42501.
    #[error("{0}")]
    PermissionDenied(String),
    /// The caller's role does not allow the statement (see `access`): SQLSTATE 42501, HTTP
    /// 403.
    #[error("{0}")]
    Unauthorized(String),
    /// Valid SQL that Sundial does not implement yet.
    #[error("not supported: {0}")]
    NotSupported(String),
    /// An SQL-level prepared statement by name (see `session_statements`).
    #[error("{message}")]
    Statement {
        fault: StatementFault,
        message: String,
    },
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The user store refused a user management statement (unknown or duplicate user, the
    /// built-in admin, a bad password ...), or the caller no longer exists.
    #[error(transparent)]
    Auth(#[from] sundial_auth::AuthError),
    /// A value that cannot become its column's type (`column 'temp': cannot store 'abc' in a
    /// DOUBLE column`), with the value's position in the SQL when known: SQLSTATE 22007 for
    /// dates and times, 22P02 otherwise.
    #[error("{message}{}", at(.position))]
    BadValue {
        message: String,
        position: Option<(u64, u64)>,
        datetime: bool,
    },
    /// DataFusion's error, with the position its diagnostic points at, if any. Shown in
    /// Sundial's words (see `messages`).
    #[error("{}{}", crate::messages::describe(.error), at(.position))]
    DataFusion {
        error: DataFusionError,
        position: Option<(u64, u64)>,
    },
}

/// What is wrong with a prepared statement's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementFault {
    /// The session holds no statement of that name: SQLSTATE 26000.
    Unknown,
    /// The session already holds one: SQLSTATE 42P05.
    Duplicate,
    /// The session holds as many as it may: SQLSTATE 54000.
    TooMany,
}

/// ` at line l, column c` for a known position.
fn at(position: &Option<(u64, u64)>) -> String {
    position
        .map(|(l, c)| format!(" at line {l}, column {c}"))
        .unwrap_or_default()
}

impl From<DataFusionError> for QueryError {
    fn from(e: DataFusionError) -> Self {
        // Storage and query-layer errors travel through DataFusion as external errors: unwrap
        // them again.
        match e {
            DataFusionError::External(inner) => match inner.downcast::<StorageError>() {
                Ok(s) => QueryError::Storage(*s),
                Err(other) => match other.downcast::<QueryError>() {
                    Ok(q) => *q,
                    Err(other) => QueryError::datafusion(DataFusionError::External(other)),
                },
            },
            // Sundial's own plan rules word their errors for users: no rule name before them.
            DataFusionError::Context(ctx, inner) if ctx.starts_with("sundial_") => {
                QueryError::from(*inner)
            }
            DataFusionError::Context(ctx, inner) => match QueryError::from(*inner) {
                QueryError::DataFusion { error, position } => QueryError::DataFusion {
                    error: DataFusionError::Context(ctx, Box::new(error)),
                    position,
                },
                other => other,
            },
            other => QueryError::datafusion(other),
        }
    }
}

impl From<SqlError> for QueryError {
    fn from(e: SqlError) -> Self {
        match e {
            SqlError::Syntax {
                message,
                line,
                column,
            } => QueryError::Syntax {
                message,
                line,
                column,
            },
            SqlError::Invalid(m) => QueryError::Invalid(m),
            SqlError::TooComplex(m) => QueryError::TooComplex(m),
            SqlError::TooManyColumns(m) => QueryError::TooManyColumns(m),
            SqlError::NotSupported(m) => QueryError::NotSupported(m),
        }
    }
}

impl From<datafusion::arrow::error::ArrowError> for QueryError {
    fn from(e: datafusion::arrow::error::ArrowError) -> Self {
        QueryError::datafusion(DataFusionError::ArrowError(Box::new(e), None))
    }
}

impl QueryError {
    /// Wraps a DataFusion error, keeping the SQL position its diagnostic carries.
    pub fn datafusion(error: DataFusionError) -> QueryError {
        let position = error
            .diagnostic()
            .and_then(|d| d.span)
            .filter(|s| s.start.line > 0)
            .map(|s| (s.start.line, s.start.column))
            .or_else(|| parser_position(&error));
        QueryError::DataFusion { error, position }
    }

    /// A parse error without a position that ran into the end of `sql` points just past its
    /// last character (sqlparser gives no location for the end of input).
    pub(crate) fn at_end_if_unplaced(self, sql: &str) -> QueryError {
        match self {
            QueryError::DataFusion {
                error,
                position: None,
            } if matches!(&error, DataFusionError::SQL(e, _) if e.to_string().contains("found: EOF")) =>
            {
                let text = sql.trim_end();
                let line = text.matches('\n').count() as u64 + 1;
                let last = text.rsplit('\n').next().unwrap_or("");
                let column = last.chars().count() as u64 + 1;
                QueryError::DataFusion {
                    error,
                    position: Some((line, column)),
                }
            }
            other => other,
        }
    }

    /// Makes the position relative to a script whose statement starts at `line`, `column`
    /// (1-based): the statement's first line starts at that column.
    pub fn in_statement_at(self, line: u64, column: u64) -> QueryError {
        let shift = |(l, c): (u64, u64)| {
            if l == 1 {
                (line, c + column.saturating_sub(1))
            } else {
                (l + line.saturating_sub(1), c)
            }
        };
        match self {
            QueryError::Syntax {
                message,
                line: l,
                column: c,
            } => {
                let (line, column) = shift((l, c));
                QueryError::Syntax {
                    message,
                    line,
                    column,
                }
            }
            QueryError::DataFusion {
                error,
                position: Some(p),
            } => QueryError::DataFusion {
                error,
                position: Some(shift(p)),
            },
            QueryError::BadValue {
                message,
                position: Some(p),
                datetime,
            } => QueryError::BadValue {
                message,
                position: Some(shift(p)),
                datetime,
            },
            other => other,
        }
    }

    /// The PostgreSQL SQLSTATE for this error: the one place faults map to error codes.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            QueryError::Syntax { .. } => "42601",
            QueryError::Invalid(_) => "42000",
            QueryError::NotSupported(_) => "0A000",
            QueryError::TooComplex(_) => "54001",
            QueryError::TooManyColumns(_) => "54011",
            QueryError::PermissionDenied(_) | QueryError::Unauthorized(_) => "42501",
            QueryError::Auth(e) => e.sqlstate(),
            QueryError::Statement { fault, .. } => match fault {
                StatementFault::Unknown => "26000",
                StatementFault::Duplicate => "42P05",
                StatementFault::TooMany => "54000",
            },
            QueryError::BadValue { datetime: true, .. } => "22007",
            QueryError::BadValue { .. } => "22P02",
            QueryError::Storage(e) => match e {
                // A timestamp outside what tables hold: every such message names the range.
                StorageError::InvalidInput(m)
                    if m.contains(sundial_storage::TIMESTAMP_RANGE_TEXT) =>
                {
                    "22008"
                }
                StorageError::InvalidInput(_) => "22023",
                StorageError::NotFound(m) if m.contains("column") => "42703",
                StorageError::NotFound(_) => "42P01",
                StorageError::AlreadyExists(_) => "42P07",
                StorageError::ResourceExhausted(_) => "53000",
                StorageError::Locked { .. } => "55006",
                StorageError::DiskFull { .. } => "53100",
                StorageError::Io { .. } | StorageError::ColdStore { .. } => "58030",
                StorageError::Corrupt { .. } => "XX001",
                StorageError::Internal(_) => "XX000",
            },
            QueryError::DataFusion { error, .. } => datafusion_sqlstate(error),
        }
    }

    /// Whether the fault lies with the request (a 4xx answer) rather than the server.
    pub fn is_user_error(&self) -> bool {
        if let QueryError::Auth(e) = self {
            // The store's classes say this better than the SQLSTATE class: the built-in
            // admin's 55000 is the request's fault.
            return e.http_status() < 500;
        }
        let class = &self.sqlstate()[..2];
        !matches!(class, "53" | "55" | "58" | "XX")
    }

    /// The 0-based character offset in `query` the error points at, if known.
    pub fn char_offset(&self, query: &str) -> Option<usize> {
        let (line, column) = self.position()?;
        let mut offset = 0;
        for (i, text) in query.split('\n').enumerate() {
            if i as u64 + 1 == line {
                return Some(
                    offset + (column.saturating_sub(1) as usize).min(text.chars().count()),
                );
            }
            offset += text.chars().count() + 1;
        }
        None
    }

    /// The position in the SQL text the error refers to, if known.
    pub fn position(&self) -> Option<(u64, u64)> {
        match self {
            QueryError::Syntax { line, column, .. } => Some((*line, *column)),
            QueryError::DataFusion { position, .. } | QueryError::BadValue { position, .. } => {
                *position
            }
            _ => None,
        }
    }
}

pub(crate) fn internal(message: String) -> QueryError {
    QueryError::from(datafusion::error::DataFusionError::Internal(message))
}

/// The storage fault behind an ingestion error: the sinks' refusals are invalid input.
pub(crate) fn storage_error(e: IngestError) -> StorageError {
    match e {
        IngestError::Storage(e) => e,
        IngestError::Rejected(message) => StorageError::InvalidInput(message),
        IngestError::Syntax(e) => StorageError::InvalidInput(e.to_string()),
    }
}

impl From<IngestError> for QueryError {
    fn from(e: IngestError) -> Self {
        QueryError::Storage(storage_error(e))
    }
}

/// Wraps a storage error for transport through DataFusion.
pub(crate) fn external(e: StorageError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

impl From<QueryError> for DataFusionError {
    /// For query-layer work running inside DataFusion; `From<DataFusionError>` undoes it.
    fn from(e: QueryError) -> Self {
        match e {
            QueryError::Storage(e) => external(e),
            QueryError::DataFusion { error, .. } => error,
            other => DataFusionError::External(Box::new(other)),
        }
    }
}

/// sqlparser reports where parsing failed only in its message: `... at Line: 1, Column: 8`.
fn parser_position(error: &DataFusionError) -> Option<(u64, u64)> {
    let DataFusionError::SQL(e, _) = error else {
        return None;
    };
    let message = e.to_string();
    let (_, at) = message.rsplit_once("Line: ")?;
    let (line, rest) = at.split_once(", Column: ")?;
    let column: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((line.parse().ok()?, column.parse().ok()?))
}

fn datafusion_sqlstate(error: &DataFusionError) -> &'static str {
    use datafusion::common::SchemaError;
    // Parallel operators pass a memory failure on wrapped (shared between partitions, inside
    // an Arrow error ...): it is still the query's memory limit.
    if matches!(error.find_root(), DataFusionError::ResourcesExhausted(_)) {
        return "53200";
    }
    // PostgreSQL's temp_file_limit: configuration_limit_exceeded.
    if crate::messages::is_spill_limit(error) {
        return "53400";
    }
    match error {
        DataFusionError::SQL(..) => "42601",
        DataFusionError::SchemaError(e, _) => match e.as_ref() {
            SchemaError::FieldNotFound { .. } => "42703",
            SchemaError::AmbiguousReference { .. } => "42702",
            SchemaError::DuplicateQualifiedField { .. }
            | SchemaError::DuplicateUnqualifiedField { .. } => "42701",
        },
        DataFusionError::Plan(m) if m.contains("table") && m.contains("not found") => "42P01",
        DataFusionError::Plan(m) if m.contains("Invalid function") => "42883",
        DataFusionError::Plan(_) => "42000",
        DataFusionError::NotImplemented(_) => "0A000",
        DataFusionError::ResourcesExhausted(_) => "53200",
        DataFusionError::ArrowError(e, _) => match e.as_ref() {
            datafusion::arrow::error::ArrowError::DivideByZero => "22012",
            // A date or timestamp beyond what nanoseconds since 1970 hold.
            datafusion::arrow::error::ArrowError::CastError(m)
                if m.contains("Overflow converting") =>
            {
                "22008"
            }
            datafusion::arrow::error::ArrowError::CastError(_)
            | datafusion::arrow::error::ArrowError::ParseError(_) => "22P02",
            _ => "22000",
        },
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            datafusion_sqlstate(inner)
        }
        DataFusionError::Shared(inner) => datafusion_sqlstate(inner),
        DataFusionError::Execution(_) => "22000",
        _ => "XX000",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk is the server's fault, with PostgreSQL's code for it.
    #[test]
    fn a_full_disk_is_53100() {
        let e = QueryError::Storage(StorageError::DiskFull {
            path: "t~1/2016-01-01.2/data.parquet".into(),
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        });
        assert_eq!(e.sqlstate(), "53100");
        assert!(!e.is_user_error());
        // Through DataFusion and back, as errors of a running plan travel.
        let e = QueryError::from(external(StorageError::DiskFull {
            path: "x".into(),
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        }));
        assert_eq!(e.sqlstate(), "53100");
    }
}
