//! Why ingesting a line or committing rows failed, by fault.

use sundial_ilp::ParseError;
use sundial_storage::StorageError;

/// Why a line or a commit failed, by fault.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{0}")]
    Syntax(#[from] ParseError),
    /// The line is well-formed but does not fit the table (type conflict, out of range).
    #[error("{0}")]
    Rejected(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl IngestError {
    /// The error in storage's terms, which the protocol layers map to their status codes: a
    /// refused line or batch is invalid input.
    pub fn into_storage(self) -> StorageError {
        match self {
            IngestError::Storage(e) => e,
            IngestError::Rejected(message) => StorageError::InvalidInput(message),
            IngestError::Syntax(e) => StorageError::InvalidInput(e.to_string()),
        }
    }
}
