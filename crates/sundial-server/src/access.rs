//! Who may use the listeners: the user store, the login throttle and `--auth`, shared by HTTP,
//! PostgreSQL and ILP over TCP.
//!
//! ```text
//!  --admin-user/--admin-password ─▶ built-in admin ─┐
//!  <data-dir>/.users.json ──────────▶ stored users ──┴▶ Users ─▶ HTTP auth, PG login,
//!                                                     Throttle ─▶ ILP/TCP challenge,
//!                                                                 every statement
//! ```
//!
//! A server that listens beyond loopback refuses to start while the built-in admin has the
//! well-known default password, or with `--auth off`: either would let anyone who reaches
//! the port in.

use std::net::SocketAddr;
use std::sync::Arc;

use sundial_auth::{Throttle, Users};
use sundial_storage::Database;

/// The built-in admin's password when none is given (QuestDB's).
pub(crate) const DEFAULT_ADMIN_PASSWORD: &str = "quest";

/// `--auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuthArg {
    Required,
    Off,
}

/// What [`Access::open`] reads of the server's flags.
pub(crate) struct AccessFlags<'a> {
    pub admin_user: &'a str,
    pub admin_password: &'a str,
    pub auth: AuthArg,
    /// The HTTP, PostgreSQL and ILP/TCP listen addresses.
    pub listen: [SocketAddr; 3],
    pub ilp_udp_addr: Option<SocketAddr>,
}

/// Addresses the login throttle remembers at most.
const THROTTLE_ADDRESSES_MAX: usize = 10_000;

/// The users, the throttle of failed logins, and whether credentials are required.
pub(crate) struct Access {
    pub users: Arc<Users>,
    pub throttle: Arc<Throttle>,
    pub required: bool,
}

impl Access {
    /// Opens the data directory's user store with the built-in admin of the flags.
    pub fn open(args: &AccessFlags<'_>, db: &Database) -> Result<Arc<Access>, String> {
        check_exposure(args)?;
        let builtin = (!args.admin_password.is_empty())
            .then(|| (args.admin_user.to_string(), args.admin_password.to_string()));
        let users = Users::open(db.root(), builtin).map_err(|e| e.to_string())?;
        let required = args.auth == AuthArg::Required;
        if required && !users.has_admin() {
            return Err(
                "no admin can log in: --admin-password is empty and no stored user is an admin \
                 with a password; give the built-in admin a password"
                    .into(),
            );
        }
        if !required {
            tracing::warn!(
                "--auth off: HTTP and ILP clients without credentials act as an admin; use it on \
                 a machine of your own only"
            );
        }
        if args.ilp_udp_addr.is_some() {
            tracing::warn!(
                "ILP over UDP cannot authenticate: anyone who can send to {} can write",
                args.ilp_udp_addr.map(|a| a.to_string()).unwrap_or_default()
            );
        }
        Ok(Arc::new(Access {
            users,
            throttle: Arc::new(Throttle::new(THROTTLE_ADDRESSES_MAX)),
            required,
        }))
    }
}

/// Refuses settings that expose the server to anyone who reaches a non-loopback port.
fn check_exposure(args: &AccessFlags<'_>) -> Result<(), String> {
    let exposed: Vec<SocketAddr> = args
        .listen
        .into_iter()
        .filter(|a| !a.ip().is_loopback())
        .collect();
    let Some(first) = exposed.first() else {
        return Ok(());
    };
    if args.auth == AuthArg::Off {
        return Err(format!(
            "--auth off lets anyone who reaches {first} in as an admin: listen on loopback \
             only (127.0.0.1), or use --auth required"
        ));
    }
    if args.admin_password == DEFAULT_ADMIN_PASSWORD {
        return Err(format!(
            "the built-in admin '{}' still has the default password and the server listens on \
             {first}: set --admin-password (or SUNDIAL_ADMIN_PASSWORD), or listen on loopback \
             only",
            args.admin_user
        ));
    }
    Ok(())
}
