//! PostgreSQL's `COPY ... FROM STDIN` / `COPY ... TO STDOUT`, parsed into a [`CopyStatement`] the wire
//! protocol layer runs (it owns the data stream; the engine never sees these statements).
//!
//! ```text
//!  COPY t [(a, b)] FROM STDIN  [WITH] ( FORMAT csv, HEADER true, DELIMITER ',', NULL '' ... )
//!  COPY t | (query) TO STDOUT  [WITH] CSV HEADER DELIMITER ','     (pre-9.0 spelling, psql)
//! ```
//!
//! Both option spellings resolve to one [`CopyOptions`] with PostgreSQL's defaults per format
//! filled in, and are validated as PostgreSQL validates them. A COPY naming a server file or a
//! program is not recognised here ([`parse_copy`] answers `None`), so it reaches the planner and
//! is reported there.

use sqlparser::ast::{
    CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget, Ident, ObjectName,
    Statement as SqlStatement,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::error::{Result, SqlError};

/// A `COPY` between a table (or query) and the client.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyStatement {
    pub source: CopySourceSpec,
    pub direction: CopyDirection,
    pub options: CopyOptions,
}

/// What is copied.
#[derive(Debug, Clone, PartialEq)]
pub enum CopySourceSpec {
    /// A table, with the columns named (empty: all, in table order). Unquoted names are
    /// folded to lower case.
    Table { name: String, columns: Vec<String> },
    /// `COPY (query) TO STDOUT`: the query's text.
    Query(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyDirection {
    /// `FROM STDIN`: the client sends rows.
    FromStdin,
    /// `TO STDOUT`: the server sends rows.
    ToStdout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyFormat {
    Text,
    Csv,
    Binary,
}

/// The data format, with every option resolved to its value for that format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyOptions {
    pub format: CopyFormat,
    /// Field separator: tab for text, `,` for CSV.
    pub delimiter: u8,
    /// The spelling of NULL: `\N` for text, the empty (unquoted) string for CSV.
    pub null: String,
    /// Whether the first line holds column names (skipped on input, written on output).
    pub header: bool,
    /// CSV quote character, `"` by default.
    pub quote: u8,
    /// CSV escape character (before a quote inside a quoted value); the quote by default.
    pub escape: u8,
}

impl CopyOptions {
    /// `format` with PostgreSQL's defaults for it (no header).
    pub fn defaults(format: CopyFormat) -> CopyOptions {
        let csv = format == CopyFormat::Csv;
        CopyOptions {
            format,
            delimiter: if csv { b',' } else { b'\t' },
            null: if csv { String::new() } else { "\\N".into() },
            header: false,
            quote: b'"',
            escape: b'"',
        }
    }
}

/// Options as written, before per-format defaults.
#[derive(Default)]
struct Written {
    format: Option<CopyFormat>,
    delimiter: Option<char>,
    null: Option<String>,
    header: Option<bool>,
    quote: Option<char>,
    escape: Option<char>,
}

/// Parses `sql` if it is a `COPY` to or from the client: `Ok(None)` for any other statement
/// (including COPY with a file or program, left to the planner).
pub fn parse_copy(sql: &str) -> Result<Option<CopyStatement>> {
    if !first_word_is_copy(sql) {
        return Ok(None);
    }
    let statement = match Parser::parse_sql(&PostgreSqlDialect {}, sql) {
        Ok(mut statements) if statements.len() == 1 => statements.remove(0),
        Ok(_) => return Err(SqlError::Invalid("expected one COPY statement".into())),
        // Not PostgreSQL's COPY syntax: DataFusion's `COPY ... TO 'file' STORED AS ...`, or an
        // error the planner reports as well as we could.
        Err(_) if !mentions_client_stream(sql) => return Ok(None),
        Err(e) => return Err(SqlError::from_parser(&e)),
    };
    let SqlStatement::Copy {
        source,
        to,
        target,
        options,
        legacy_options,
        values,
    } = statement
    else {
        return Ok(None);
    };
    let direction = match (&target, to) {
        (CopyTarget::Stdin, false) => CopyDirection::FromStdin,
        (CopyTarget::Stdout, true) => CopyDirection::ToStdout,
        (CopyTarget::Stdin | CopyTarget::Stdout, _) => {
            return Err(SqlError::Invalid(
                "COPY FROM goes with STDIN and COPY TO with STDOUT".into(),
            ));
        }
        _ => return Ok(None),
    };
    if !values.is_empty() {
        return Err(SqlError::NotSupported(
            "data inline after COPY ... FROM STDIN; send it with the COPY protocol".into(),
        ));
    }
    let source = match source {
        CopySource::Table {
            table_name,
            columns,
        } => CopySourceSpec::Table {
            name: table_name_of(&table_name)?,
            columns: columns.iter().map(ident_name).collect(),
        },
        CopySource::Query(query) => CopySourceSpec::Query(query.to_string()),
    };
    let mut written = Written::default();
    for option in options {
        written.apply(option)?;
    }
    for option in legacy_options {
        written.apply_legacy(option)?;
    }
    Ok(Some(CopyStatement {
        source,
        direction,
        options: written.resolve()?,
    }))
}

fn first_word_is_copy(sql: &str) -> bool {
    let sql = after_comments(sql);
    sql.get(..4).is_some_and(|w| w.eq_ignore_ascii_case("copy"))
        && sql[4..].starts_with(|c: char| c.is_whitespace() || c == '(' || c == '"')
}

/// `sql` after its leading whitespace and comments (`-- ...` to the line's end, `/* ... */`,
/// nested as PostgreSQL nests them): drivers prefix statements with comments.
fn after_comments(mut sql: &str) -> &str {
    loop {
        sql = sql.trim_start();
        if let Some(rest) = sql.strip_prefix("--") {
            sql = rest.split_once('\n').map_or("", |(_, after)| after);
        } else if sql.starts_with("/*") {
            let mut depth = 0usize;
            let mut end = sql.len();
            let bytes = sql.as_bytes();
            let mut i = 0;
            while i + 1 < bytes.len() {
                match &bytes[i..i + 2] {
                    b"/*" => {
                        depth += 1;
                        i += 2;
                    }
                    b"*/" => {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            end = i;
                            break;
                        }
                    }
                    _ => i += 1,
                }
            }
            sql = &sql[end..];
        } else {
            return sql;
        }
    }
}

/// Whether a statement that did not parse still means the client stream (so its syntax error
/// is ours to report).
fn mentions_client_stream(sql: &str) -> bool {
    sql.split(|c: char| !c.is_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case("stdin") || w.eq_ignore_ascii_case("stdout"))
}

/// PostgreSQL folds unquoted identifiers to lower case.
fn ident_name(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

/// The table of `[schema.]table`; Sundial's tables all live in `public`.
fn table_name_of(name: &ObjectName) -> Result<String> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| {
            p.as_ident()
                .map(ident_name)
                .ok_or_else(|| SqlError::Invalid(format!("invalid table name {name}")))
        })
        .collect::<Result<_>>()?;
    match parts.as_slice() {
        [table] => Ok(table.clone()),
        [schema, table] if schema == "public" => Ok(table.clone()),
        _ => Err(SqlError::Invalid(format!(
            "relation \"{name}\" does not exist: Sundial's tables are in schema public"
        ))),
    }
}

impl Written {
    fn apply(&mut self, option: CopyOption) -> Result<()> {
        match option {
            CopyOption::Format(name) => self.set_format(&name.value)?,
            CopyOption::Delimiter(c) => self.delimiter = Some(c),
            CopyOption::Null(s) => self.null = Some(s),
            CopyOption::Header(h) => self.header = Some(h),
            CopyOption::Quote(c) => self.quote = Some(c),
            CopyOption::Escape(c) => self.escape = Some(c),
            CopyOption::Freeze(_) => {}
            CopyOption::Encoding(e) => check_encoding(&e)?,
            other => return Err(unsupported_option(&other.to_string())),
        }
        Ok(())
    }

    fn apply_legacy(&mut self, option: CopyLegacyOption) -> Result<()> {
        match option {
            CopyLegacyOption::Binary => self.set_format("binary")?,
            CopyLegacyOption::Delimiter(c) => self.delimiter = Some(c),
            CopyLegacyOption::Null(s) => self.null = Some(s),
            CopyLegacyOption::Header => self.header = Some(true),
            CopyLegacyOption::Csv(options) => {
                self.set_format("csv")?;
                for o in options {
                    match o {
                        CopyLegacyCsvOption::Header => self.header = Some(true),
                        CopyLegacyCsvOption::Quote(c) => self.quote = Some(c),
                        CopyLegacyCsvOption::Escape(c) => self.escape = Some(c),
                        other => return Err(unsupported_option(&other.to_string())),
                    }
                }
            }
            other => return Err(unsupported_option(&other.to_string())),
        }
        Ok(())
    }

    fn set_format(&mut self, name: &str) -> Result<()> {
        let format = match name.to_ascii_lowercase().as_str() {
            "text" => CopyFormat::Text,
            "csv" => CopyFormat::Csv,
            "binary" => CopyFormat::Binary,
            other => {
                return Err(SqlError::Invalid(format!(
                    "COPY format \"{other}\" not recognized"
                )));
            }
        };
        if self.format.is_some_and(|f| f != format) {
            return Err(SqlError::Invalid("conflicting or redundant options".into()));
        }
        self.format = Some(format);
        Ok(())
    }

    /// Fills in the format's defaults and applies PostgreSQL's checks.
    fn resolve(self) -> Result<CopyOptions> {
        let format = self.format.unwrap_or(CopyFormat::Text);
        let invalid = |m: &str| Err(SqlError::Invalid(m.to_string()));
        if format == CopyFormat::Binary
            && (self.delimiter.is_some() || self.null.is_some() || self.header == Some(true))
        {
            return invalid("cannot specify DELIMITER, NULL or HEADER in BINARY mode");
        }
        if format != CopyFormat::Csv && (self.quote.is_some() || self.escape.is_some()) {
            return invalid("COPY QUOTE and ESCAPE are available only in CSV mode");
        }
        let defaults = CopyOptions::defaults(format);
        let delimiter = match self.delimiter {
            Some(c) => single_byte(c, "delimiter")?,
            None => defaults.delimiter,
        };
        let quote = single_byte(self.quote.unwrap_or('"'), "quote")?;
        let escape = single_byte(self.escape.map_or(quote as char, |c| c), "escape")?;
        if matches!(delimiter, b'\r' | b'\n') || (format == CopyFormat::Text && delimiter == b'\\')
        {
            return invalid("COPY delimiter cannot be newline, carriage return or backslash");
        }
        if format == CopyFormat::Csv && delimiter == quote {
            return invalid("COPY delimiter and quote must be different");
        }
        let null = self.null.unwrap_or(defaults.null);
        if null.contains(['\r', '\n']) {
            return invalid("COPY null representation cannot use newline or carriage return");
        }
        Ok(CopyOptions {
            format,
            delimiter,
            null,
            header: self.header.unwrap_or(false),
            quote,
            escape,
        })
    }
}

fn single_byte(c: char, what: &str) -> Result<u8> {
    u8::try_from(c).ok().filter(u8::is_ascii).ok_or_else(|| {
        SqlError::Invalid(format!("COPY {what} must be a single one-byte character"))
    })
}

fn check_encoding(name: &str) -> Result<()> {
    let n = name.to_ascii_lowercase().replace(['-', '_'], "");
    if n == "utf8" {
        Ok(())
    } else {
        Err(SqlError::NotSupported(format!(
            "COPY encoding \"{name}\": Sundial reads and writes UTF8 only"
        )))
    }
}

fn unsupported_option(option: &str) -> SqlError {
    SqlError::NotSupported(format!("COPY option {option}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> CopyStatement {
        parse_copy(sql).unwrap().unwrap()
    }

    #[test]
    fn text_defaults_and_column_list() {
        let c = parse("COPY \"Trades\" (ts, \"Px\") FROM STDIN");
        assert_eq!(
            c.source,
            CopySourceSpec::Table {
                name: "Trades".into(),
                columns: vec!["ts".into(), "Px".into()]
            }
        );
        assert_eq!(c.direction, CopyDirection::FromStdin);
        assert_eq!(c.options.format, CopyFormat::Text);
        assert_eq!(c.options.delimiter, b'\t');
        assert_eq!(c.options.null, "\\N");
        assert!(!c.options.header);
    }

    #[test]
    fn modern_and_legacy_csv_options() {
        let modern = parse(
            "copy public.t from stdin with (format csv, header true, delimiter ';', null 'NA')",
        );
        assert_eq!(modern.options.format, CopyFormat::Csv);
        assert_eq!(modern.options.delimiter, b';');
        assert_eq!(modern.options.null, "NA");
        assert!(modern.options.header);
        let legacy = parse("COPY t FROM STDIN with csv header");
        assert_eq!(legacy.options.format, CopyFormat::Csv);
        assert!(legacy.options.header);
        assert_eq!(legacy.options.delimiter, b',');
        assert_eq!(legacy.options.null, "");
        let legacy = parse("COPY t FROM STDIN DELIMITER ',' CSV QUOTE '''' ");
        assert_eq!(legacy.options.quote, b'\'');
        assert_eq!(legacy.options.escape, b'\'');
        // asyncpg quotes the format name.
        let binary = parse("COPY \"t\"(\"a\") FROM STDIN (FORMAT 'binary')");
        assert_eq!(binary.options.format, CopyFormat::Binary);
    }

    #[test]
    fn query_to_stdout() {
        let c = parse("COPY (SELECT a, b FROM t WHERE a > 1) TO STDOUT WITH CSV HEADER");
        assert_eq!(c.direction, CopyDirection::ToStdout);
        assert_eq!(
            c.source,
            CopySourceSpec::Query("SELECT a, b FROM t WHERE a > 1".into())
        );
    }

    #[test]
    fn comments_before_copy() {
        let c = parse("-- tag\n  /* a /* nested */ comment */ COPY t FROM STDIN");
        assert_eq!(c.direction, CopyDirection::FromStdin);
        assert_eq!(parse_copy("-- COPY t FROM STDIN\nSELECT 1").unwrap(), None);
        assert_eq!(
            parse_copy("/* unterminated COPY t FROM STDIN").unwrap(),
            None
        );
    }

    #[test]
    fn not_ours_and_invalid() {
        assert_eq!(parse_copy("SELECT 1").unwrap(), None);
        assert_eq!(parse_copy("COPY t TO '/tmp/x.csv'").unwrap(), None);
        assert_eq!(parse_copy("COPY t TO 'x' STORED AS CSV").unwrap(), None);
        assert!(parse_copy("COPY t FROM STDIN (FORMAT xml)").is_err());
        assert!(parse_copy("COPY t FROM STDOUT").is_err());
        assert!(parse_copy("COPY t FROM STDIN (FORMAT binary, HEADER)").is_err());
        assert!(parse_copy("COPY t FROM STDIN (DELIMITER 'ab')").is_err());
        assert!(parse_copy("COPY t FROM STDIN (QUOTE '\"')").is_err());
        assert!(parse_copy("COPY t FROM STDIN (FORMAT csv, DELIMITER '\"')").is_err());
        assert!(parse_copy("COPY t FROM STDIN WITH (BOGUS 1)").is_err());
    }
}
