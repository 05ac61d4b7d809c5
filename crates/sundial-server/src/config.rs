//! `--config FILE`: a subcommand's settings in a TOML file.
//!
//! ```text
//!  command line  >  SUNDIAL_* environment  >  config file  >  built-in default
//! ```
//!
//! Every setting of the subcommand can appear, under its flag's name with `_` or `-`
//! (`http_addr`), or in a table named after its first word (`[http]` then `addr`). A key that
//! names no setting is an error, so a typo never goes unnoticed:
//!
//! ```toml
//! data_dir = "/var/lib/sundial"
//! [http]
//! addr = "0.0.0.0:9000"
//! [ilp]
//! tcp_addr = "0.0.0.0:9009"
//! commit_rows = 200000
//! ```

use std::ffi::OsString;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};

/// Parses the command line, filling in from the subcommand's `--config` file the settings that
/// neither a flag nor an environment variable gave.
pub fn parse<P: CommandFactory + FromArgMatches>(args: Vec<OsString>) -> Result<P, clap::Error> {
    let command = P::command();
    let matches = command.clone().try_get_matches_from(&args)?;
    let Some((name, sub)) = matches.subcommand() else {
        return P::from_arg_matches(&matches);
    };
    let Some(path) = sub.try_get_one::<PathBuf>("config").ok().flatten() else {
        return P::from_arg_matches(&matches);
    };
    let Some(subcommand) = command.find_subcommand(name) else {
        return P::from_arg_matches(&matches);
    };
    let extra = settings_from_file(path, subcommand, sub)
        .map_err(|message| P::command().error(clap::error::ErrorKind::InvalidValue, message))?;
    let mut args = args;
    args.extend(extra);
    let matches = P::command().try_get_matches_from(&args)?;
    P::from_arg_matches(&matches)
}

/// The flags (`--name value`) the file adds: one per setting not given otherwise.
fn settings_from_file(
    path: &PathBuf,
    subcommand: &clap::Command,
    given: &ArgMatches,
) -> Result<Vec<OsString>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("config file {}: {e}", path.display()))?;
    let mut settings = Vec::new();
    flatten("", &table, &mut settings);
    let mut extra = Vec::new();
    for (key, value) in settings {
        let id = key.replace('-', "_");
        // A flag's old names (its aliases) still name it.
        let named = |a: &clap::Arg| {
            a.get_id().as_str() == id
                || a.get_all_aliases()
                    .is_some_and(|aliases| aliases.iter().any(|al| al.replace('-', "_") == id))
        };
        let arg = subcommand
            .get_arguments()
            .find(|a| named(a) && id != "config" && a.get_long().is_some())
            .ok_or_else(|| format!("config file {}: unknown setting '{key}'", path.display()))?;
        let explicit = matches!(
            given.value_source(arg.get_id().as_str()),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        if explicit {
            continue;
        }
        let long = arg.get_long().unwrap_or_default();
        let text = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => {
                return Err(format!(
                    "config file {}: setting '{key}' must be a string, number or boolean, not {}",
                    path.display(),
                    other.type_str()
                ));
            }
        };
        extra.push(OsString::from(format!("--{long}={text}")));
    }
    Ok(extra)
}

/// `[ilp] tcp_addr = ..` becomes `ilp_tcp_addr`.
fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<(String, toml::Value)>) {
    for (key, value) in table {
        let name = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}_{key}")
        };
        match value {
            toml::Value::Table(inner) => flatten(&name, inner, out),
            other => out.push((name, other.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        command: Sub,
    }

    #[derive(clap::Subcommand, Debug)]
    enum Sub {
        Serve {
            #[arg(long)]
            config: Option<PathBuf>,
            #[arg(long, default_value = "127.0.0.1:9000")]
            http_addr: String,
            #[arg(long, default_value_t = 10)]
            ilp_commit_rows: u64,
            #[arg(long, env = "SUNDIAL_CONFIG_TEST_NAME", default_value = "x")]
            name: String,
            #[arg(long, alias = "old-user", default_value = "admin")]
            new_user: String,
        },
    }

    fn run(file: &str, flags: &[&str]) -> Result<(String, u64, String), String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sundial.toml");
        std::fs::write(&path, file).unwrap();
        let mut args: Vec<OsString> = vec!["sundial".into(), "serve".into()];
        args.push(format!("--config={}", path.display()).into());
        args.extend(flags.iter().map(OsString::from));
        match parse::<Cli>(args).map_err(|e| e.to_string())?.command {
            Sub::Serve {
                http_addr,
                ilp_commit_rows,
                name,
                ..
            } => Ok((http_addr, ilp_commit_rows, name)),
        }
    }

    #[test]
    fn file_fills_in_what_flags_leave_out() {
        let file = "name = \"from-file\"\n[http]\naddr = \"0.0.0.0:1\"\n[ilp]\ncommit-rows = 5\n";
        assert_eq!(
            run(file, &[]).unwrap(),
            ("0.0.0.0:1".into(), 5, "from-file".into())
        );
        assert_eq!(
            run(file, &["--ilp-commit-rows", "7"]).unwrap(),
            ("0.0.0.0:1".into(), 7, "from-file".into())
        );
    }

    /// A flag's old name (an alias) still names it in a config file.
    #[test]
    fn old_names_still_work() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sundial.toml");
        std::fs::write(&path, "old_user = \"ops\"\n").unwrap();
        let args: Vec<OsString> = vec![
            "sundial".into(),
            "serve".into(),
            format!("--config={}", path.display()).into(),
        ];
        match parse::<Cli>(args).unwrap().command {
            Sub::Serve { new_user, .. } => assert_eq!(new_user, "ops"),
        }
    }

    #[test]
    fn mistakes_are_errors() {
        let e = run("htp_addr = \"x\"\n", &[]).unwrap_err();
        assert!(e.contains("unknown setting 'htp_addr'"), "{e}");
        let e = run("ilp_commit_rows = \"many\"\n", &[]).unwrap_err();
        assert!(e.contains("many"), "{e}");
        let e = run("http_addr = [1]\n", &[]).unwrap_err();
        assert!(e.contains("must be a string"), "{e}");
        let e = run("http_addr = \n", &[]).unwrap_err();
        assert!(e.contains("config file"), "{e}");
    }
}
