//! `sundial backup --to DIR`: asks the running server (HTTP `/exec`) to run
//! `BACKUP DATABASE TO '<DIR made absolute>'`, and prints what it copied; when no server
//! answers and `--data-dir` is given, opens that directory itself (taking its lock, so only
//! when no server holds it) and backs it up offline.
//!
//! The server writes the backup, so `DIR` is a path on the server's machine; a relative `DIR`
//! is made absolute against this command's working directory first (`..` resolved as text).
//! The request carries `Statement-Timeout: 0`: a backup takes as long as the data takes to copy.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// How long connecting to the server may take before it counts as not answering.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The answer of `/exec` is one row; anything longer is not a backup's answer.
const ANSWER_BYTES_MAX: usize = 1 << 20;

/// What `sundial backup` was asked.
pub struct BackupRequest {
    pub to: PathBuf,
    pub url: String,
    /// The admin the server is asked as (HTTP Basic).
    pub user: String,
    pub password: String,
    /// When set and no server answers at `url`: back up this directory offline.
    pub offline: Option<crate::DataOptions>,
}

/// Takes the backup and prints one line about it.
pub async fn run(request: BackupRequest) -> Result<(), String> {
    let to = absolute(&request.to)?;
    let to_text = to
        .to_str()
        .ok_or_else(|| format!("backup directory {} is not valid UTF-8", to.display()))?
        .to_string();
    match ask_server(&request, &to_text).await {
        Ok(report) => {
            print_report(&report, true);
            Ok(())
        }
        Err(AskError::Unreachable(why)) => {
            let Some(data) = request.offline else {
                return Err(format!(
                    "no Sundial server answers at {} ({why}); start it, point --url at it, or \
                     pass --data-dir to back up the data directory of a stopped server",
                    request.url
                ));
            };
            let (db, _engine) = crate::open(&data)?;
            let report = tokio::task::spawn_blocking(move || db.backup(&to))
                .await
                .map_err(|e| format!("the backup stopped: {e}"))?
                .map_err(|e| e.to_string())?;
            print_report(
                &Answer {
                    path: report.path.display().to_string(),
                    tables: report.tables as i64,
                    rows: report.rows as i64,
                    bytes: report.bytes as i64,
                    duration_ms: report.duration.as_millis() as i64,
                },
                false,
            );
            Ok(())
        }
        Err(AskError::Refused(message)) => Err(message),
    }
}

/// `path` made absolute against the working directory, `.` and `..` resolved as text.
fn absolute(path: &Path) -> Result<PathBuf, String> {
    if path.as_os_str().is_empty() {
        return Err("--to needs a directory".into());
    }
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?
            .join(path)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// The backup's row, as the statement answers it.
struct Answer {
    path: String,
    tables: i64,
    rows: i64,
    bytes: i64,
    duration_ms: i64,
}

enum AskError {
    /// Nothing answered (refused, timed out, not HTTP): an offline backup may be tried.
    Unreachable(String),
    /// The server answered with an error, or with something that is not the backup's row.
    Refused(String),
}

async fn ask_server(request: &BackupRequest, to: &str) -> Result<Answer, AskError> {
    let url = request.url.as_str();
    let client = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(|e| AskError::Refused(format!("cannot make an HTTP client: {e}")))?;
    let sql = format!("BACKUP DATABASE TO '{}'", to.replace('\'', "''"));
    let endpoint = format!("{}/exec", url.trim_end_matches('/'));
    let response = client
        .get(&endpoint)
        .query(&[("query", sql.as_str())])
        .header("Statement-Timeout", "0")
        .basic_auth(&request.user, Some(&request.password))
        .send()
        .await
        .map_err(|e| {
            if e.is_connect() || e.is_timeout() {
                AskError::Unreachable(root_cause(&e))
            } else if e.is_builder() {
                AskError::Refused(format!("bad --url '{url}': {}", root_cause(&e)))
            } else {
                AskError::Refused(format!("asking {endpoint} failed: {}", root_cause(&e)))
            }
        })?;
    let status = response.status();
    let mut body = Vec::new();
    let mut response = response;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| AskError::Refused(format!("reading the answer failed: {}", root_cause(&e))))?
    {
        if body.len() + chunk.len() > ANSWER_BYTES_MAX {
            return Err(AskError::Refused(format!(
                "{endpoint} answered more than {ANSWER_BYTES_MAX} bytes: not a Sundial server?"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    let json: serde_json::Value = serde_json::from_slice(&body).map_err(|_| {
        AskError::Refused(format!(
            "{endpoint} answered {status} with something that is not Sundial's JSON: is --url a \
             Sundial server's HTTP address?"
        ))
    })?;
    if let Some(error) = json.get("error").and_then(|e| e.as_str()) {
        return Err(AskError::Refused(format!(
            "the server refused the backup: {error}"
        )));
    }
    let row = json
        .get("dataset")
        .and_then(|d| d.get(0))
        .and_then(|r| r.as_array())
        .filter(|r| r.len() == 5)
        .ok_or_else(|| {
            AskError::Refused(format!(
                "{endpoint} answered {status} without the backup's row: is it a Sundial server \
                 of this version?"
            ))
        })?;
    let number = |i: usize| row[i].as_i64().unwrap_or(-1);
    Ok(Answer {
        path: row[0].as_str().unwrap_or_default().to_string(),
        tables: number(1),
        rows: number(2),
        bytes: number(3),
        duration_ms: number(4),
    })
}

/// The innermost error's message (reqwest's outer ones only say "error sending request").
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}

fn print_report(a: &Answer, by_server: bool) {
    let url_note = if by_server {
        " (by the server)"
    } else {
        " (offline)"
    };
    println!(
        "backed up {} table{}, {} rows, {} bytes to {}{url_note} in {} ms",
        a.tables,
        if a.tables == 1 { "" } else { "s" },
        a.rows,
        a.bytes,
        a.path,
        a.duration_ms
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_targets_become_absolute_without_dots() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(absolute(Path::new("b")).unwrap(), cwd.join("b"));
        assert_eq!(absolute(Path::new("./x/../b/.")).unwrap(), cwd.join("b"));
        assert_eq!(
            absolute(Path::new("/a/../../c")).unwrap(),
            PathBuf::from("/c")
        );
        assert!(absolute(Path::new("")).is_err());
    }
}
