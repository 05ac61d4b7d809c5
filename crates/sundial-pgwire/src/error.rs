//! The wire layer's error type. Each variant is mapped once to a SQLSTATE in [`PgError::sqlstate`].

use sundial_query::QueryError;

#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// The client broke the protocol: the connection cannot continue.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// A well-framed message whose content does not fit its statement (a Bind with the wrong
    /// number of parameters): SQLSTATE 08P01 as [`PgError::Protocol`], but the session goes on,
    /// skipping to the next Sync, as PostgreSQL's does.
    #[error("{0}")]
    BadMessage(String),
    /// A message longer than the configured bound.
    #[error("message of {bytes} bytes exceeds the limit of {limit} bytes")]
    TooLarge { bytes: usize, limit: usize },
    /// Wrong user or password.
    #[error("password authentication failed for user \"{0}\"")]
    Auth(String),
    /// The statement failed; the session continues.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A parameter value that does not decode as its declared type.
    #[error("{0}")]
    BadValue(String),
    /// A prepared statement name that does not exist.
    #[error("{0}")]
    Undefined(String),
    /// A portal name that does not exist.
    #[error("portal \"{0}\" does not exist")]
    UndefinedPortal(String),
    /// Parse of a prepared statement name already in use.
    #[error("prepared statement \"{0}\" already exists")]
    DuplicateStatement(String),
    /// Parse of a named statement when the session holds as many as it may.
    #[error(
        "this session already holds {0} named prepared statements, the most one may; close \
         those it no longer needs"
    )]
    TooManyStatements(usize),
    /// A setting name that does not exist.
    #[error("unrecognized configuration parameter \"{0}\"")]
    UnknownSetting(String),
    /// Valid input the server does not implement.
    #[error("not supported: {0}")]
    NotSupported(String),
    /// No connection slot is free: the sessions are all taken, or this connection was the
    /// longest waiting to authenticate when the unauthenticated ones were all taken.
    #[error("{0}")]
    TooManyConnections(String),
    /// A plain (unencrypted) connection from a peer the TLS policy requires TLS of; the
    /// message names the peer and what to do.
    #[error("{0}")]
    TlsRequired(String),
    /// The TLS handshake failed, or TLS was asked for in a way the server cannot serve.
    #[error("{0}")]
    Tls(String),
    /// The client did not finish logging in within the authentication timeout.
    #[error("authentication timed out: the login did not finish within {ms} ms")]
    AuthTimeout { ms: u64 },
    /// A timestamp or date outside the range a table can hold; the message names the value.
    #[error("{0}")]
    DatetimeOverflow(String),
    /// The statement was cancelled by a CancelRequest.
    #[error("canceling statement due to user request")]
    Canceled,
    /// The statement ran past its `statement_timeout`.
    #[error("canceling statement due to statement timeout")]
    Timeout,
    /// Statements are refused until the failed transaction block ends.
    #[error("current transaction is aborted, commands ignored until end of transaction block")]
    InFailedTransaction,
    /// COPY data with the wrong structure (field count, binary framing); `context` says where
    /// (`COPY t, line 3`).
    #[error("{message}")]
    CopyFormat { message: String, context: String },
    /// A COPY value that does not parse as its column's type.
    #[error("{message}")]
    CopyValue { message: String, context: String },
    /// A COPY timestamp or date outside the range a table can hold.
    #[error("{message}")]
    CopyRange { message: String, context: String },
    /// The client abandoned a COPY with CopyFail; the message is the client's reason.
    #[error("COPY from stdin failed: {0}")]
    CopyFailed(String),
    /// A value outside its column type's range.
    #[error("{0}")]
    OutOfRange(String),
    /// A table that does not exist.
    #[error("relation \"{0}\" does not exist")]
    UndefinedTable(String),
    /// A column that does not exist.
    #[error("{0}")]
    UndefinedColumn(String),
    /// A column named twice.
    #[error("column \"{0}\" specified more than once")]
    DuplicateColumn(String),
    /// A cursor name that does not exist.
    #[error("cursor \"{0}\" does not exist")]
    UndefinedCursor(String),
    /// DECLARE of a cursor name, or Bind of a portal name, already in use (one namespace).
    #[error("cursor \"{0}\" already exists")]
    DuplicateCursor(String),
    /// A statement that needs a transaction block outside one.
    #[error("{0}")]
    NoActiveTransaction(String),
    /// An operation the object's state does not allow (a backward FETCH on a forward cursor).
    #[error("{0}")]
    NotInState(String),
    /// The socket failed or the peer went away.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A bug in Sundial.
    #[error("internal error: {0}")]
    Internal(String),
}

impl PgError {
    pub fn sqlstate(&self) -> &'static str {
        match self {
            PgError::Protocol(_) | PgError::BadMessage(_) => "08P01",
            PgError::TooLarge { .. } => "54000",
            PgError::Auth(_) => "28P01",
            PgError::Query(e) => e.sqlstate(),
            PgError::BadValue(_) => "22P02",
            PgError::Undefined(_) => "26000",
            PgError::UndefinedPortal(_) => "34000",
            PgError::DuplicateStatement(_) => "42P05",
            PgError::TooManyStatements(_) => "54000",
            PgError::UnknownSetting(_) => "42704",
            PgError::NotSupported(_) => "0A000",
            PgError::TooManyConnections(_) => "53300",
            PgError::TlsRequired(_) => "28000",
            PgError::Tls(_) => "08P01",
            PgError::AuthTimeout { .. } => "08006",
            PgError::DatetimeOverflow(_) => "22008",
            PgError::Canceled | PgError::Timeout => "57014",
            PgError::InFailedTransaction => "25P02",
            PgError::CopyFormat { .. } => "22P04",
            PgError::CopyValue { .. } => "22P02",
            PgError::CopyRange { .. } => "22008",
            PgError::CopyFailed(_) => "57014",
            PgError::OutOfRange(_) => "22003",
            PgError::UndefinedTable(_) => "42P01",
            PgError::UndefinedColumn(_) => "42703",
            PgError::DuplicateColumn(_) => "42701",
            PgError::UndefinedCursor(_) => "34000",
            PgError::DuplicateCursor(_) => "42P03",
            PgError::NoActiveTransaction(_) => "25P01",
            PgError::NotInState(_) => "55000",
            PgError::Io(_) => "08006",
            PgError::Internal(_) => "XX000",
        }
    }

    /// Where the error happened, for the ErrorResponse's context field (`COPY t, line 3`).
    pub fn context(&self) -> Option<&str> {
        match self {
            PgError::CopyFormat { context, .. }
            | PgError::CopyValue { context, .. }
            | PgError::CopyRange { context, .. } => Some(context),
            _ => None,
        }
    }

    /// Whether the session must end after reporting this error: the protocol is broken, or the
    /// logged-in user was dropped or its credentials changed (28000).
    pub fn is_fatal(&self) -> bool {
        use sundial_auth::AuthError;
        matches!(
            self,
            PgError::Query(QueryError::Auth(AuthError::Gone(_) | AuthError::Expired(_)))
                | PgError::Protocol(_)
                | PgError::TooLarge { .. }
                | PgError::Auth(_)
                | PgError::Io(_)
                | PgError::TooManyConnections(_)
                | PgError::AuthTimeout { .. }
                | PgError::TlsRequired(_)
                | PgError::Tls(_)
        )
    }
}
