//! Which role a statement needs, and the check that the caller holds it.
//!
//! * Sundial's own statements need a role by kind: SHOW and DESCRIBE need read; DDL
//!   (CREATE/ALTER/DROP/TRUNCATE/RENAME TABLE, partitions, views and materialized views and
//!   their refresh), `BACKUP DATABASE` and user management need admin — but `ALTER USER <self> WITH PASSWORD` needs no role at all.
//! * DataFusion's statements need the highest role any node of their logical plan needs,
//!   subqueries included: an INSERT (or another write) needs write; `COPY (query) TO 'file'`,
//!   DDL and `CREATE TABLE AS` need admin; queries, SET, transactions need read. `EXPLAIN`
//!   (without ANALYZE) runs nothing and needs read whatever it explains; `EXPLAIN ANALYZE`
//!   runs its statement and needs what that needs. `PREPARE` and `DEALLOCATE` need read;
//!   `EXECUTE` of an SQL-level prepared statement needs what the prepared statement's plan
//!   needs (see `session_statements`), checked at every EXECUTE.
//!
//! Invariant: the check ([`check`]) runs at every run of a statement, prepared or not, and
//! asks the user store for the caller's role *now*; a [`crate::Prepared`] carries what it
//! needs ([`Needed`]), never a verdict. The trusted caller passes every check; a logged-in
//! user on an engine without a user store passes none.

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::logical_expr::{DmlStatement, LogicalPlan, WriteOp};
use sundial_auth::{AuthError, Caller, Role, Users};
use sundial_sql::{Command, UserCommand, UserRole};

use crate::error::{QueryError, Result};

/// What running a statement needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Needed {
    pub role: Role,
    /// What the statement does, for the refusal's message: `INSERT`, `CREATE TABLE`, ...
    pub what: &'static str,
    /// `ALTER USER <name> WITH PASSWORD`: the user `name` may run it without any role.
    pub own_password: Option<String>,
}

/// What every statement but user management needs at least, checked before planning.
pub(crate) const READ: Needed = Needed {
    role: Role::Read,
    what: "every statement but changing one's own password",
    own_password: None,
};

impl Needed {
    fn new(role: Role, what: &'static str) -> Needed {
        Needed {
            role,
            what,
            own_password: None,
        }
    }
}

/// The store's role for the dialect's.
pub(crate) fn role(role: UserRole) -> Role {
    match role {
        UserRole::Read => Role::Read,
        UserRole::Write => Role::Write,
        UserRole::Admin => Role::Admin,
    }
}

/// What one of Sundial's own statements needs ([`Command::Sql`]: see [`of_plan`]).
pub(crate) fn of_command(command: &Command) -> Needed {
    let admin = |what| Needed::new(Role::Admin, what);
    match command {
        Command::Sql => Needed::new(Role::Read, "a query"),
        Command::ShowTables
        | Command::ShowColumns { .. }
        | Command::ShowPartitions { .. }
        | Command::ShowCreateTable { .. } => Needed::new(Role::Read, "SHOW"),
        Command::CreateTable(_) => admin("CREATE TABLE"),
        Command::AddColumns { .. }
        | Command::SetDedup { .. }
        | Command::SetTtl { .. }
        | Command::SetColdAfter { .. }
        | Command::SetIndexed { .. }
        | Command::DropColumns { .. }
        | Command::RenameColumn { .. } => admin("ALTER TABLE"),
        Command::DropPartitions { .. } => admin("ALTER TABLE ... DROP PARTITION"),
        Command::ConvertPartitions { .. } => admin("ALTER TABLE ... CONVERT PARTITION"),
        Command::RenameTable { .. } => admin("RENAME TABLE"),
        Command::DropTables { .. } => admin("DROP TABLE"),
        Command::Truncate { .. } => admin("TRUNCATE TABLE"),
        Command::Backup { .. } => admin("BACKUP DATABASE"),
        Command::CreateView(_) => admin("CREATE VIEW"),
        Command::CreateMaterializedView(_) => admin("CREATE MATERIALIZED VIEW"),
        Command::DropViews { .. } => admin("DROP VIEW"),
        Command::RefreshMaterializedView { .. } => admin("REFRESH MATERIALIZED VIEW"),
        Command::AlterMaterializedView { .. } => admin("ALTER MATERIALIZED VIEW"),
        Command::ShowCreateView { .. } => Needed::new(Role::Read, "SHOW"),
        Command::CreateLastValueCache(_) => admin("CREATE LAST VALUE CACHE"),
        Command::DropLastValueCache { .. } => admin("DROP LAST VALUE CACHE"),
        Command::User(user) => match user {
            UserCommand::SetPassword { name, .. } => Needed {
                own_password: Some(name.clone()),
                ..admin("ALTER USER ... WITH PASSWORD for another user")
            },
            UserCommand::Create { .. } => admin("CREATE USER"),
            UserCommand::CreateToken { .. } | UserCommand::DropToken { .. } => {
                admin("ALTER USER ... TOKEN")
            }
            UserCommand::Grant { .. } => admin("GRANT"),
            UserCommand::Revoke { .. } => admin("REVOKE"),
            UserCommand::Drop { .. } => admin("DROP USER"),
            UserCommand::Show => admin("SHOW USERS"),
        },
    }
}

/// What a statement DataFusion planned needs: the most any node of `plan` needs.
pub(crate) fn of_plan(plan: &LogicalPlan) -> Needed {
    if matches!(plan, LogicalPlan::Explain(_)) {
        return Needed::new(Role::Read, "EXPLAIN");
    }
    let mut needed = Needed::new(Role::Read, "a query");
    let walked = plan.apply_with_subqueries(|node| {
        let this = match node {
            LogicalPlan::Dml(DmlStatement { op, .. }) => match op {
                WriteOp::Insert(_) => Needed::new(Role::Write, "INSERT"),
                WriteOp::Ctas => Needed::new(Role::Admin, "CREATE TABLE AS"),
                WriteOp::Truncate => Needed::new(Role::Admin, "TRUNCATE"),
                _ => Needed::new(Role::Write, "a write"),
            },
            LogicalPlan::Copy(_) => Needed::new(Role::Admin, "COPY ... TO a server file"),
            LogicalPlan::Ddl(_) => Needed::new(Role::Admin, "DDL"),
            _ => return Ok(TreeNodeRecursion::Continue),
        };
        if this.role > needed.role {
            needed = this;
        }
        Ok(TreeNodeRecursion::Continue)
    });
    if walked.is_err() {
        // A plan that cannot be walked is refused to all but admins.
        return Needed::new(Role::Admin, "this statement");
    }
    needed
}

/// Refuses the statement unless `caller` may run it now. `users` is the engine's store.
pub(crate) fn check(users: Option<&Users>, caller: &Caller, needed: &Needed) -> Result<()> {
    let Some(name) = caller.name() else {
        return Ok(());
    };
    let Some(users) = users else {
        return Err(QueryError::Unauthorized(format!(
            "permission denied: user '{name}' cannot be checked, as this engine has no user \
             store"
        )));
    };
    if needed.own_password.as_deref() == Some(name) {
        // A user may change its own password whatever its role, if it still exists.
        return if users.exists(name) {
            Ok(())
        } else {
            Err(QueryError::Auth(AuthError::Gone(name.to_string())))
        };
    }
    match users.authorize(caller, needed.role) {
        Ok(()) => Ok(()),
        Err(AuthError::Denied {
            user,
            has,
            needed: role,
        }) => {
            let held = match has {
                Some(has) => format!("has the {} role", has.name()),
                None => "has no role".to_string(),
            };
            Err(QueryError::Unauthorized(format!(
                "permission denied: user '{user}' {held}; {} needs {} (an admin can GRANT {} TO \
                 {})",
                needed.what,
                role.name(),
                role.name().to_ascii_uppercase(),
                quoted(&user)
            )))
        }
        Err(e) => Err(QueryError::Auth(e)),
    }
}

/// `name` as an identifier in a statement: as it is if it reads the same unquoted.
pub(crate) fn quoted(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_when_they_must_be() {
        assert_eq!(quoted("bob"), "bob");
        assert_eq!(quoted("bob_2"), "bob_2");
        assert_eq!(quoted("Bob"), "\"Bob\"");
        assert_eq!(quoted("a\"b"), "\"a\"\"b\"");
        assert_eq!(quoted("2x"), "\"2x\"");
        assert_eq!(quoted(""), "\"\"");
    }

    #[test]
    fn commands_need_their_role() {
        let needs = |sql: &str| of_command(&sundial_sql::parse(sql).expect(sql)).role;
        assert_eq!(needs("SHOW TABLES"), Role::Read);
        assert_eq!(needs("DESCRIBE t"), Role::Read);
        assert_eq!(needs("CREATE TABLE t (a INT)"), Role::Admin);
        assert_eq!(needs("BACKUP DATABASE TO '/x'"), Role::Admin);
        assert_eq!(needs("SHOW USERS"), Role::Admin);
        let own = of_command(&sundial_sql::parse("ALTER USER bob WITH PASSWORD 'x'").unwrap());
        assert_eq!(own.own_password.as_deref(), Some("bob"));
        assert_eq!(own.role, Role::Admin);
    }
}
