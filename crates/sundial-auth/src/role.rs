//! Roles, and who runs a statement.

use std::sync::Arc;

/// What a user may do; each role includes those below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Queries: SELECT, SHOW, EXPLAIN, COPY TO STDOUT, `/exec` reads, `/exp`.
    Read,
    /// Plus ingestion: INSERT, COPY FROM STDIN, `/imp`, ILP (which may create tables and
    /// columns on the fly).
    Write,
    /// Plus DDL, BACKUP, files on the server and user management.
    Admin,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }

    /// `read`, `write` or `admin`, in any case.
    pub fn parse(text: &str) -> Option<Role> {
        match text.to_ascii_lowercase().as_str() {
            "read" => Some(Role::Read),
            "write" => Some(Role::Write),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }

    /// The role one below this one (`None` below read).
    pub fn below(self) -> Option<Role> {
        match self {
            Role::Read => None,
            Role::Write => Some(Role::Read),
            Role::Admin => Some(Role::Write),
        }
    }
}

/// Who runs a statement or a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// `None`: the trusted caller.
    name: Option<Arc<str>>,
    /// For a session: the user's credential version at login (see `Users::credential`).
    credential: Option<u64>,
}

impl Caller {
    /// A logged-in user, whose current role is looked up at each check (a request that
    /// presented its credentials itself).
    pub fn user(name: impl Into<Arc<str>>) -> Caller {
        Caller {
            name: Some(name.into()),
            credential: None,
        }
    }

    /// A user logged in for a session (a PostgreSQL connection) with the credentials of
    /// version `credential`: each check also refuses it once they changed.
    pub fn session(name: impl Into<Arc<str>>, credential: u64) -> Caller {
        Caller {
            name: Some(name.into()),
            credential: Some(credential),
        }
    }

    /// Allowed everything: the command line on a data directory it holds, tests, and a server
    /// running with `--auth off` for requests without credentials.
    pub fn trusted() -> Caller {
        Caller {
            name: None,
            credential: None,
        }
    }

    /// The credential version a session logged in with.
    pub fn credential(&self) -> Option<u64> {
        self.credential
    }

    /// The user's name; `None` for the trusted caller.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}
