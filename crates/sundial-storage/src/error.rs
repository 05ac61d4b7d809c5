//! The storage crate's error type: one enum, variants grouped by who is at fault.

use std::path::PathBuf;

/// The path I/O errors of `write_partition`'s output name (it is given a writer, not a
/// file): callers that know the file name it instead ([`StorageError::on_output`]).
pub(crate) const PARQUET_OUTPUT: &str = "the Parquet output";

/// Result alias used throughout the storage crate.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Every error the storage engine reports, grouped by fault so that protocol layers can map each
/// variant once to a SQLSTATE / HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The caller asked for something invalid: bad names, wrong types, NULL designated timestamps.
    #[error("{0}")]
    InvalidInput(String),
    /// A table or column named by the caller does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A table or column the caller wants to create exists already.
    #[error("{0}")]
    AlreadyExists(String),
    /// A configured bound was reached (uncommitted bytes, rows per partition, waiting for a writer).
    #[error("{0}")]
    ResourceExhausted(String),
    /// Another process holds the data directory.
    #[error(
        "data directory {path} is locked by another process ({holder}); only one process may open it"
    )]
    Locked { path: PathBuf, holder: String },
    /// The file system is full (ENOSPC) or the user's disk quota is spent (EDQUOT): a write
    /// failed, and nothing of it was committed.
    #[error("disk full writing {path}: {source}")]
    DiskFull {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The operating system refused an I/O operation.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The object store holding cold partitions failed or could not be reached.
    #[error("cold store {url}: {message}")]
    ColdStore { url: String, message: String },
    /// Data read back from disk violates the on-disk format.
    #[error("corrupt data in {path}: {message}")]
    Corrupt { path: PathBuf, message: String },
    /// An invariant of the engine itself was broken: a bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl StorageError {
    /// An I/O error on `path`: [`StorageError::DiskFull`] when the disk is full, by the
    /// error's kind.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        match source.kind() {
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                StorageError::DiskFull { path, source }
            }
            _ => StorageError::Io { path, source },
        }
    }

    /// This error with an I/O error of [`PARQUET_OUTPUT`] naming `path` instead (the file
    /// the caller had `write_partition` write).
    pub(crate) fn on_output(self, path: &std::path::Path) -> Self {
        match self {
            StorageError::Io { path: p, source } | StorageError::DiskFull { path: p, source }
                if p.as_os_str() == PARQUET_OUTPUT =>
            {
                StorageError::io(path, source)
            }
            other => other,
        }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        StorageError::Corrupt {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Attaches a path to `std::io::Result`s.
pub(crate) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| StorageError::io(path, e))
    }
}

/// Returns `StorageError::Internal` when an engine invariant does not hold.
macro_rules! ensure_invariant {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err($crate::error::StorageError::Internal(format!($($arg)+)));
        }
    };
}
pub(crate) use ensure_invariant;
