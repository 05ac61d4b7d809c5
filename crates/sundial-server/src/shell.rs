//! The interactive shell: line editing, history, multi-line statements ending in `;`, and
//! dot-commands.

use std::path::Path;

use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use sundial_query::Engine;

use crate::output::{Format, run_script};

const HELP: &str = "\
Statements end with ';' and may span lines. Commands:
  .help              this text
  .tables            list tables
  .schema TABLE      show a table's columns
  .mode table|csv|json   output format
  .timer on|off      show elapsed time
  .quit / .exit      leave (or Ctrl-D)";

struct Settings {
    format: Format,
    timer: bool,
}

pub async fn run(engine: Engine, data_dir: &Path) -> Result<(), String> {
    let mut editor = DefaultEditor::new().map_err(|e| e.to_string())?;
    let history = data_dir.join(".shell_history");
    let _ = editor.load_history(&history);
    println!(
        "Sundial {} — data in {}. Type .help for help.",
        env!("CARGO_PKG_VERSION"),
        data_dir.display()
    );
    let mut settings = Settings {
        format: Format::Table,
        timer: true,
    };
    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() {
            "sundial> "
        } else {
            "     ...> "
        };
        match editor.readline(prompt) {
            Ok(line) => {
                if buffer.is_empty() && line.trim_start().starts_with('.') {
                    let _ = editor.add_history_entry(line.as_str());
                    if !dot_command(&engine, line.trim(), &mut settings).await {
                        break;
                    }
                    continue;
                }
                if !buffer.is_empty() {
                    buffer.push('\n');
                }
                buffer.push_str(&line);
                if statement_complete(&buffer) {
                    let _ = editor.add_history_entry(buffer.as_str());
                    if let Err(e) =
                        run_script(&engine, &buffer, settings.format, settings.timer).await
                    {
                        eprintln!("error: {e}");
                    }
                    buffer.clear();
                }
            }
            Err(ReadlineError::Interrupted) => buffer.clear(),
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    let _ = editor.save_history(&history);
    Ok(())
}

/// A statement is complete when its last token is `;` (not inside a string or comment).
fn statement_complete(buffer: &str) -> bool {
    let trimmed = buffer.trim_end();
    trimmed.ends_with(';')
        && Engine::split(&format!("{trimmed} select 1")).is_ok_and(|s| s.len() > 1)
}

/// Runs a dot-command; returns false to leave the shell.
async fn dot_command(engine: &Engine, line: &str, settings: &mut Settings) -> bool {
    let mut parts = line.split_whitespace();
    let command = parts.next().unwrap_or("");
    let arg = parts.next();
    match (command, arg) {
        (".quit" | ".exit", _) => return false,
        (".help", _) => println!("{HELP}"),
        (".tables", _) => report(run_script(engine, "SHOW TABLES", settings.format, false).await),
        (".schema", Some(table)) => {
            let sql = format!("SHOW COLUMNS FROM \"{}\"", table.replace('"', "\"\""));
            report(run_script(engine, &sql, settings.format, false).await)
        }
        (".mode", Some(mode)) => match Format::parse(mode) {
            Some(f) => settings.format = f,
            None => eprintln!("error: .mode takes table, csv or json"),
        },
        (".timer", Some("on")) => settings.timer = true,
        (".timer", Some("off")) => settings.timer = false,
        _ => eprintln!("error: unknown command '{line}'; try .help"),
    }
    true
}

fn report(result: Result<(), String>) {
    if let Err(e) = result {
        eprintln!("error: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::statement_complete;

    #[test]
    fn completes_on_a_real_semicolon() {
        assert!(statement_complete("select 1;"));
        assert!(statement_complete("select\n 1 ;  "));
        assert!(!statement_complete("select ';"));
        assert!(!statement_complete("select 1"));
        assert!(!statement_complete("select 1 -- ;"));
    }
}
