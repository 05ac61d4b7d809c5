//! What SQL may do outside the database: server files and session settings.
//!
//! * **Server files.** DataFusion's `COPY (query) TO 'path'` writes any file the server can.
//!   It is refused unless the operator names a directory for it (`--sql-file-dir`), and then
//!   the path must stay inside that directory: relative to it (or absolute under it), no
//!   `..`, no URL scheme, and no symbolic link on the way (an existing file or directory
//!   named by the path must not be a link either). Every other statement that names files
//!   (`CREATE EXTERNAL TABLE`, ...) is DDL DataFusion's planner is told to refuse.
//!   `COPY ... TO STDOUT` / `FROM STDIN` never reach here: the wire protocol runs them.
//! * **Settings.** `SET datafusion.*` changes the engine's own session, which every request
//!   of a server shares, so a server's engine refuses it ([`Settings::Fixed`]); where the
//!   engine is one user's session (`sundial shell`, tests) it applies, within [`bounds`].
//!
//! The checks walk the whole logical plan, subqueries and `EXPLAIN ANALYZE` inputs included.

use std::path::{Component, Path, PathBuf};

use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::{LogicalPlan, Statement};

use crate::error::{QueryError, Result};

/// Whether `SET` may change the engine's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settings {
    /// The engine is one user's session: SET applies to it, within bounds.
    Session,
    /// The engine serves many sessions (a server): SET is refused.
    Fixed,
}

/// Refuses what `plan` may not do: write server files outside `file_dir` (anywhere, when it
/// is `None`), or change settings the engine does not let change. Paths of `COPY ... TO` come
/// back resolved inside `file_dir`, so that the server's working directory never matters.
pub fn check(
    plan: LogicalPlan,
    file_dir: Option<&Path>,
    settings: Settings,
) -> Result<LogicalPlan> {
    let checked = plan.transform_up_with_subqueries(|node| {
        let verdict = match &node {
            LogicalPlan::Copy(copy) => {
                let path = check_path(&copy.output_url, file_dir)?;
                let mut copy = copy.clone();
                copy.output_url = path.to_string_lossy().into_owned();
                return Ok(Transformed::yes(LogicalPlan::Copy(copy)));
            }
            LogicalPlan::Statement(Statement::SetVariable(set)) => {
                check_setting(&set.variable, Some(&set.value), settings)
            }
            LogicalPlan::Statement(Statement::ResetVariable(reset)) => {
                check_setting(&reset.variable, None, settings)
            }
            _ => Ok(()),
        };
        verdict?;
        Ok(Transformed::no(node))
    })?;
    Ok(checked.data)
}

/// The file `url` names inside `file_dir`, or why it may not be written.
pub fn check_path(url: &str, file_dir: Option<&Path>) -> Result<PathBuf> {
    let Some(dir) = file_dir else {
        return Err(QueryError::PermissionDenied(format!(
            "COPY ... TO '{url}' would write a file on the server, which this server does not \
             allow; start it with --sql-file-dir DIR to allow files in DIR (COPY ... TO STDOUT \
             sends rows to the client instead)"
        )));
    };
    let refuse = |why: &str| {
        Err(QueryError::PermissionDenied(format!(
            "COPY ... TO '{url}': {why}; files may only be written inside {} (--sql-file-dir)",
            dir.display()
        )))
    };
    if url.contains("://") || url.starts_with("file:") {
        return refuse("a URL is not a file path");
    }
    let path = Path::new(url);
    if path
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
    {
        return refuse("the path must not contain '..'");
    }
    let relative = if path.is_absolute() {
        match path.strip_prefix(dir) {
            Ok(rest) => rest.to_path_buf(),
            Err(_) => return refuse("the path is outside the directory"),
        }
    } else {
        path.to_path_buf()
    };
    if relative.as_os_str().is_empty() {
        return refuse("the path names the directory itself");
    }
    let mut at = dir.to_path_buf();
    for part in relative.components() {
        let Component::Normal(part) = part else {
            continue;
        };
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return refuse("the path goes through a symbolic link");
            }
            Ok(_) => {}
            // Not there yet: nothing below it is either.
            Err(_) => break,
        }
    }
    Ok(dir.join(relative))
}

/// Refuses settings a server shares, and values out of [`bounds`].
fn check_setting(variable: &str, value: Option<&str>, settings: Settings) -> Result<()> {
    if settings == Settings::Fixed {
        return Err(QueryError::PermissionDenied(format!(
            "SET {variable}: this server's settings come from its flags and configuration \
             file (sundial serve --help); over HTTP each request is a session of its own, so \
             a SET would end with it"
        )));
    }
    let Some(value) = value else {
        return Ok(());
    };
    for (name, min, max) in bounds() {
        if variable.eq_ignore_ascii_case(name) {
            let n: u64 = value.trim().parse().map_err(|_| {
                QueryError::Invalid(format!("SET {variable}: '{value}' is not a whole number"))
            })?;
            if !(min..=max).contains(&n) {
                return Err(QueryError::Invalid(format!(
                    "SET {variable}: {n} is out of range ({min} to {max})"
                )));
            }
        }
    }
    Ok(())
}

/// Settings with bounds: name, least, most.
pub fn bounds() -> [(&'static str, u64, u64); 3] {
    [
        ("datafusion.execution.batch_size", 128, 1 << 20),
        ("datafusion.execution.target_partitions", 1, 256),
        ("datafusion.execution.planning_concurrency", 1, 256),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        assert!(check_path("out.csv", None).is_err());
        assert_eq!(
            check_path("a/out.csv", Some(root)).expect("relative"),
            root.join("a/out.csv")
        );
        let inside = root.join("b.csv");
        assert_eq!(
            check_path(inside.to_str().expect("utf-8"), Some(root)).expect("absolute inside"),
            inside
        );
        for bad in [
            "../x.csv",
            "a/../../x.csv",
            "/etc/passwd",
            "s3://bucket/x",
            "file:///tmp/x",
            "",
        ] {
            let err = check_path(bad, Some(root)).expect_err(bad);
            assert_eq!(err.sqlstate(), "42501", "{bad}");
        }
        #[cfg(unix)]
        {
            let outside = tempfile::tempdir().expect("tempdir");
            std::os::unix::fs::symlink(outside.path(), root.join("link")).expect("symlink");
            assert!(check_path("link/x.csv", Some(root)).is_err());
            std::os::unix::fs::symlink("/etc/hostname", root.join("f.csv")).expect("symlink");
            assert!(check_path("f.csv", Some(root)).is_err());
        }
    }

    #[tokio::test]
    async fn the_engine_refuses_copy_to_a_file_with_42501() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sundial_storage::Database::open(dir.path(), Default::default()).expect("db");
        let engine = crate::Engine::new(db).expect("engine");
        let err = engine
            .execute("COPY (SELECT 1 AS one) TO 'one.csv' STORED AS CSV")
            .await
            .expect_err("no --sql-file-dir");
        assert_eq!(err.sqlstate(), "42501", "{err}");
        assert!(err.to_string().contains("--sql-file-dir"), "{err}");
    }

    #[test]
    fn settings_are_refused_by_a_server_and_bounded_in_a_session() {
        assert!(
            check_setting(
                "datafusion.execution.batch_size",
                Some("8192"),
                Settings::Fixed
            )
            .is_err()
        );
        for (value, ok) in [
            ("1", false),
            ("8192", true),
            ("100000000", false),
            ("x", false),
        ] {
            let checked = check_setting(
                "datafusion.execution.batch_size",
                Some(value),
                Settings::Session,
            );
            assert_eq!(checked.is_ok(), ok, "{value}");
        }
        assert!(
            check_setting(
                "datafusion.execution.target_partitions",
                Some("100000"),
                Settings::Session
            )
            .is_err()
        );
    }
}
