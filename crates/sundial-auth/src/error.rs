//! The one error type of user management and authorization, with its SQLSTATE.

use crate::role::Role;

pub type Result<T, E = AuthError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The caller's role is below what the action needs.
    #[error("permission denied: {}", denied(user, *has, *needed))]
    Denied {
        user: String,
        has: Option<Role>,
        needed: Role,
    },
    /// A logged-in user that no longer exists (dropped while connected).
    #[error("user '{0}' no longer exists")]
    Gone(String),
    /// A session whose user's password or role changed since it logged in.
    #[error(
        "the credentials of user '{0}' changed since this session logged in (a new password \
         or role): log in again"
    )]
    Expired(String),
    #[error("user '{0}' does not exist")]
    NoSuchUser(String),
    #[error("user '{0}' already exists")]
    UserExists(String),
    /// SQL may not change the built-in admin, which the server's flags define.
    #[error(
        "'{0}' is the built-in admin, set by the server's --admin-user and --admin-password \
         flags; SQL cannot change or drop it"
    )]
    Builtin(String),
    /// Too many logins from one address are waiting for their turn (see `throttle`).
    #[error(
        "too many logins in progress from {0}; try again once the ones under way have \
         been answered"
    )]
    TooManyAttempts(String),
    /// A bad name, password or argument.
    #[error("{0}")]
    Invalid(String),
    /// The user file could not be read or written.
    #[error("user store {0}")]
    Io(String),
    /// The user file exists but is not what Sundial writes.
    #[error("user store {0}")]
    Corrupt(String),
}

fn denied(user: &str, has: Option<Role>, needed: Role) -> String {
    let held = match has {
        Some(role) => format!("has the {} role", role.name()),
        None => "has no role".to_string(),
    };
    format!(
        "user '{user}' {held}; this needs {} (an admin can GRANT {} TO {user})",
        needed.name(),
        needed.name().to_ascii_uppercase()
    )
}

impl AuthError {
    /// The SQLSTATE a PostgreSQL client gets.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            AuthError::Denied { .. } => "42501",
            AuthError::Gone(_) | AuthError::Expired(_) => "28000",
            AuthError::NoSuchUser(_) => "42704",
            AuthError::UserExists(_) => "42710",
            AuthError::Builtin(_) => "55000",
            AuthError::TooManyAttempts(_) => "53300",
            AuthError::Invalid(_) => "22023",
            AuthError::Io(_) => "58030",
            AuthError::Corrupt(_) => "XX001",
        }
    }

    /// The HTTP status an HTTP client gets.
    pub fn http_status(&self) -> u16 {
        match self {
            AuthError::Denied { .. } => 403,
            AuthError::Gone(_) | AuthError::Expired(_) => 401,
            AuthError::NoSuchUser(_) => 404,
            AuthError::UserExists(_) | AuthError::Builtin(_) => 409,
            AuthError::Invalid(_) => 400,
            AuthError::TooManyAttempts(_) => 429,
            AuthError::Io(_) | AuthError::Corrupt(_) => 500,
        }
    }
}
