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
    #[error("{0}")]
    DataFusion(DataFusionError),
}

impl From<DataFusionError> for QueryError {
    fn from(e: DataFusionError) -> Self {
        // Storage errors travel through DataFusion as external errors: unwrap them again.
        match e {
            DataFusionError::External(inner) => match inner.downcast::<StorageError>() {
                Ok(s) => QueryError::Storage(*s),
                Err(other) => QueryError::DataFusion(DataFusionError::External(other)),
            },
            DataFusionError::Context(ctx, inner) => match QueryError::from(*inner) {
                QueryError::DataFusion(d) => {
                    QueryError::DataFusion(DataFusionError::Context(ctx, Box::new(d)))
                }
                other => other,
            },
            other => QueryError::DataFusion(other),
        }
    }
}

impl From<datafusion::arrow::error::ArrowError> for QueryError {
    fn from(e: datafusion::arrow::error::ArrowError) -> Self {
        QueryError::DataFusion(DataFusionError::ArrowError(Box::new(e), None))
    }
}

impl QueryError {
    /// The position in the SQL text the error refers to, if known.
    pub fn position(&self) -> Option<(u64, u64)> {
        match self {
            QueryError::Syntax { line, column, .. } => Some((*line, *column)),
            _ => None,
        }
    }
}

/// Wraps a storage error for transport through DataFusion.
pub(crate) fn external(e: StorageError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
