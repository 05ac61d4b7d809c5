//! The query layer's error type, by fault; protocol layers map it once to SQLSTATE/HTTP status.

use datafusion::error::DataFusionError;
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
    /// Valid SQL that Sundial does not implement yet.
    #[error("not supported: {0}")]
    NotSupported(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// DataFusion's error, with the position its diagnostic points at, if any.
    #[error("{error}{}", .position.map(|(l, c)| format!(" at line {l}, column {c}")).unwrap_or_default())]
    DataFusion {
        error: DataFusionError,
        position: Option<(u64, u64)>,
    },
}

impl From<DataFusionError> for QueryError {
    fn from(e: DataFusionError) -> Self {
        // Storage errors travel through DataFusion as external errors: unwrap them again.
        match e {
            DataFusionError::External(inner) => match inner.downcast::<StorageError>() {
                Ok(s) => QueryError::Storage(*s),
                Err(other) => QueryError::datafusion(DataFusionError::External(other)),
            },
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
            .map(|s| (s.start.line, s.start.column));
        QueryError::DataFusion { error, position }
    }

    /// Makes a syntax error's line relative to a script whose statement starts at `first_line`.
    pub fn in_statement_at_line(self, first_line: u64) -> QueryError {
        match self {
            QueryError::Syntax {
                message,
                line,
                column,
            } => QueryError::Syntax {
                message,
                line: line + first_line.saturating_sub(1),
                column,
            },
            QueryError::DataFusion {
                error,
                position: Some((line, column)),
            } => QueryError::DataFusion {
                error,
                position: Some((line + first_line.saturating_sub(1), column)),
            },
            other => other,
        }
    }

    /// The position in the SQL text the error refers to, if known.
    pub fn position(&self) -> Option<(u64, u64)> {
        match self {
            QueryError::Syntax { line, column, .. } => Some((*line, *column)),
            QueryError::DataFusion { position, .. } => *position,
            _ => None,
        }
    }
}

/// Wraps a storage error for transport through DataFusion.
pub(crate) fn external(e: StorageError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
