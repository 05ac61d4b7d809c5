//! Logging: what is logged (`--log-level`, or `SUNDIAL_LOG`: a `tracing` filter directive) and
//! how (`--log-format text|json`), always to standard error.
//!
//! ```text
//!  --log-level / SUNDIAL_LOG  ─▶ EnvFilter ("info", "warn,sundial::query=info", ...)
//!  --log-format text | json   ─▶ one line per event: text for people, JSON for log shippers
//! ```
//!
//! `SUNDIAL_LOG` is the variable behind `--log-level` (the flag wins), so both take a level or a
//! full directive. Commands other than `serve` read `SUNDIAL_LOG` alone and log text. A
//! directive that does not parse is refused when the command line is read, naming the flag.

use tracing_subscriber::EnvFilter;

/// The logging flags of `sundial serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct LogArgs {
    /// What to log: a level (error, warn, info, debug, trace) or a tracing filter directive,
    /// e.g. `info,sundial_pgwire=debug` or `info,sundial::query=warn` (no failed-statement
    /// lines).
    #[arg(
        long,
        env = "SUNDIAL_LOG",
        default_value = "info",
        value_parser = parse_filter
    )]
    pub log_level: String,
    /// Log line format: `text`, or `json` (one JSON object per line).
    #[arg(long, env = "SUNDIAL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Checks a `--log-level` directive; keeps its text.
fn parse_filter(text: &str) -> Result<String, String> {
    EnvFilter::try_new(text)
        .map(|_| text.to_string())
        .map_err(|e| format!("not a log level or filter directive: {e}"))
}

/// Installs the process's logger: `args`' for `serve`, else `SUNDIAL_LOG` (default `info`) as
/// text.
pub fn init(args: Option<&LogArgs>) {
    let (filter, format) = match args {
        Some(args) => (
            EnvFilter::try_new(&args.log_level).unwrap_or_else(|_| EnvFilter::new("info")),
            args.log_format,
        ),
        None => (
            EnvFilter::try_from_env("SUNDIAL_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
            LogFormat::Text,
        ),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        log: LogArgs,
    }

    fn parse(args: &[&str]) -> Result<LogArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("sundial").chain(args.iter().copied())).map(|c| c.log)
    }

    #[test]
    fn levels_and_directives_are_taken_and_garbage_refused() {
        let args = parse(&[
            "--log-level",
            "info,sundial_pgwire=debug",
            "--log-format",
            "json",
        ])
        .expect("directive");
        assert_eq!(args.log_level, "info,sundial_pgwire=debug");
        assert_eq!(args.log_format, LogFormat::Json);
        assert_eq!(
            parse(&["--log-level", "warn"]).expect("level").log_level,
            "warn"
        );
        for bad in ["info,=[", "sundial=loud", "[{"] {
            let e = parse(&["--log-level", bad]).expect_err(bad).to_string();
            assert!(e.contains("--log-level"), "{e}");
        }
        assert!(parse(&["--log-format", "xml"]).is_err());
        let long = "x".repeat(100_000);
        let _ = parse(&["--log-level", &long]);
    }
}
