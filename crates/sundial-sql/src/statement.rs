//! Sundial's own statements — QuestDB-style DDL, SHOW and DESCRIBE — parsed from sqlparser's
//! tokens. Everything else is left to DataFusion's SQL planner.

use sqlparser::tokenizer::{Location, Token};
use sundial_storage::{ColumnType, ConvertTo, PartitionBy, Ttl, TtlUnit};

use crate::error::{Result, SqlError};
use crate::last_value_cache::CreateLastValueCache;
use crate::tokens::{Parser, offset, tokenize};
use crate::users::UserCommand;
use crate::views::{AlterView, CreateMaterializedView, CreateView, RefreshHow};

/// Words that start a column constraint, which no column takes: they end a column's type.
const COLUMN_CONSTRAINTS: &[&str] = &[
    "PRIMARY",
    "UNIQUE",
    "REFERENCES",
    "CHECK",
    "DEFAULT",
    "CONSTRAINT",
    "GENERATED",
    "COLLATE",
];
/// PostgreSQL's auto-incrementing types, which need sequences.
const SERIAL_TYPES: &[&str] = &[
    "SERIAL",
    "BIGSERIAL",
    "SMALLSERIAL",
    "SERIAL2",
    "SERIAL4",
    "SERIAL8",
];

/// A statement Sundial runs itself, or SQL for DataFusion.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    CreateTable(CreateTable),
    AddColumns {
        table: String,
        columns: Vec<(String, ColumnType)>,
        /// Added SYMBOL columns declared with `INDEX`.
        indexed: Vec<String>,
        if_not_exists: bool,
    },
    /// `ALTER TABLE t DEDUP ENABLE UPSERT KEYS(ts, k, ...)`, or `DEDUP DISABLE` (`keys` empty).
    SetDedup {
        table: String,
        keys: Vec<String>,
    },
    /// `ALTER TABLE t SET TTL n HOURS|DAYS|WEEKS|MONTHS|YEARS` (`None`: `TTL 0`, no TTL).
    SetTtl {
        table: String,
        ttl: Option<Ttl>,
    },
    /// `ALTER TABLE t SET COLD AFTER n HOURS|DAYS|...` (`None`: `COLD AFTER 0 ...`, never).
    SetColdAfter {
        table: String,
        cold_after: Option<Ttl>,
    },
    /// `ALTER TABLE t ALTER COLUMN c ADD INDEX` (or `DROP INDEX`: `indexed` false).
    SetIndexed {
        table: String,
        column: String,
        indexed: bool,
    },
    DropColumns {
        table: String,
        columns: Vec<String>,
    },
    RenameColumn {
        table: String,
        from: String,
        to: String,
    },
    RenameTable {
        from: String,
        to: String,
    },
    /// `DROP PARTITION LIST 'a', 'b'` (names) or `DROP PARTITION WHERE <predicate>`.
    DropPartitions {
        table: String,
        names: Vec<String>,
        predicate: Option<String>,
    },
    /// `CONVERT PARTITION TO PARQUET|NATIVE LIST 'a', 'b'` or `... WHERE <predicate>`.
    ConvertPartitions {
        table: String,
        to: ConvertTo,
        names: Vec<String>,
        predicate: Option<String>,
    },
    DropTables {
        names: Vec<String>,
        if_exists: bool,
    },
    Truncate {
        tables: Vec<String>,
    },
    ShowTables,
    ShowColumns {
        table: String,
    },
    ShowPartitions {
        table: String,
    },
    /// `SHOW CREATE TABLE t`: the statement that makes the table as it is.
    ShowCreateTable {
        table: String,
    },
    /// `BACKUP DATABASE TO '/absolute/dir'`: a consistent copy of every table, taken while
    /// ingestion goes on (`sundial_storage::Database::backup`). The path is checked there.
    Backup {
        to: String,
    },
    /// User management: `CREATE/ALTER/DROP USER`, `GRANT`, `REVOKE`, `SHOW USERS` (see
    /// [`crate::users`]).
    User(UserCommand),
    /// `CREATE [OR REPLACE] VIEW` (see [`crate::views`]).
    CreateView(CreateView),
    /// `CREATE MATERIALIZED VIEW`.
    CreateMaterializedView(CreateMaterializedView),
    /// `REFRESH MATERIALIZED VIEW v [FULL | INCREMENTAL | RANGE FROM a TO b]`.
    RefreshMaterializedView {
        name: String,
        how: RefreshHow,
    },
    /// `ALTER MATERIALIZED VIEW v SET TTL n UNIT | SET REFRESH ...`.
    AlterMaterializedView {
        name: String,
        change: AlterView,
    },
    /// `DROP VIEW` or `DROP MATERIALIZED VIEW`.
    DropViews {
        names: Vec<String>,
        if_exists: bool,
        materialized: bool,
    },
    /// `SHOW CREATE VIEW v` or `SHOW CREATE MATERIALIZED VIEW v`.
    ShowCreateView {
        name: String,
        materialized: bool,
    },
    /// `CREATE LAST VALUE CACHE` (see [`crate::last_value_cache`]).
    CreateLastValueCache(CreateLastValueCache),
    /// `DROP LAST VALUE CACHE [IF EXISTS] name ON table`.
    DropLastValueCache {
        name: String,
        table: String,
        if_exists: bool,
    },
    /// Any other statement, for DataFusion.
    Sql,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateTable {
    pub name: String,
    pub if_not_exists: bool,
    pub columns: Vec<(String, ColumnType)>,
    /// SYMBOL columns declared with `INDEX`, in the column or as `, INDEX(c)` after the list.
    pub indexed: Vec<String>,
    /// `CREATE TABLE ... AS (query)`: the query text.
    pub as_query: Option<String>,
    pub timestamp: Option<String>,
    pub partition_by: Option<PartitionBy>,
    /// `DEDUP UPSERT KEYS(ts, k, ...)`: the designated timestamp and key columns (empty: none).
    pub dedup_keys: Vec<String>,
    /// `TTL n UNIT`: partitions older than this (from the newest row) are dropped.
    pub ttl: Option<Ttl>,
    /// `COLD AFTER n UNIT`: partitions older than this (from the newest row) become Parquet.
    pub cold_after: Option<Ttl>,
}

/// The `CREATE TABLE` statement that makes a table like `meta` (columns, symbol indexes,
/// designated timestamp, partitioning, TTL, COLD AFTER and deduplication keys), in the syntax
/// [`parse`]
/// takes: `SHOW CREATE TABLE`.
pub fn create_table_sql(meta: &sundial_storage::TableMeta) -> String {
    let quote = |name: &str| format!("\"{}\"", name.replace('"', "\"\""));
    let columns: Vec<String> = meta
        .columns
        .iter()
        .map(|c| {
            let index = if c.indexed { " INDEX" } else { "" };
            format!("    {} {}{index}", quote(&c.name), c.column_type.name())
        })
        .collect();
    let mut sql = format!(
        "CREATE TABLE {} (\n{}\n)",
        quote(&meta.name),
        columns.join(",\n")
    );
    if let Some(ts) = meta.timestamp_column() {
        sql.push_str(&format!(" TIMESTAMP({})", quote(&ts.name)));
    }
    sql.push_str(&format!(" PARTITION BY {}", meta.partition_by.name()));
    if let Some(ttl) = meta.ttl {
        sql.push_str(&format!(" TTL {ttl}"));
    }
    if let Some(cold_after) = meta.cold_after {
        sql.push_str(&format!(" COLD AFTER {cold_after}"));
    }
    let keys = meta.dedup_keys();
    if !keys.is_empty() {
        let keys: Vec<String> = keys.iter().map(|k| quote(&meta.columns[*k].name)).collect();
        sql.push_str(&format!(" DEDUP UPSERT KEYS({})", keys.join(", ")));
    }
    sql
}

/// One statement of a script, with the line and column it starts at (1-based; the column
/// counts characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    pub text: String,
    pub line: u64,
    pub column: u64,
}

/// Splits a script at top-level semicolons.
pub fn split_statements(sql: &str) -> Result<Vec<Statement>> {
    let tokens = tokenize(sql)?;
    let mut out = Vec::new();
    let mut start: Option<Location> = None;
    let push = |out: &mut Vec<Statement>, from: Location, to: usize| {
        let begin = offset(sql, from);
        let text = sql[begin..to].trim();
        if !text.is_empty() {
            out.push(Statement {
                text: text.to_string(),
                line: from.line,
                column: from.column,
            });
        }
    };
    for t in &tokens {
        match &t.token {
            Token::SemiColon => {
                if let Some(s) = start.take() {
                    push(&mut out, s, offset(sql, t.span.start));
                }
            }
            Token::Whitespace(_) | Token::EOF => {}
            _ => {
                if start.is_none() {
                    start = Some(t.span.start);
                }
            }
        }
    }
    if let Some(s) = start {
        push(&mut out, s, sql.len());
    }
    Ok(out)
}

/// Whether `sql` plainly starts with SELECT or WITH, as none of Sundial's own statements
/// does: queries need no tokenizing here.
fn is_query(sql: &str) -> bool {
    let start = sql.trim_start();
    let word_end = start
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(start.len());
    let word = &start[..word_end];
    word.eq_ignore_ascii_case("SELECT") || word.eq_ignore_ascii_case("WITH")
}

/// Parses one statement into a [`Command`].
pub fn parse(sql: &str) -> Result<Command> {
    if is_query(sql) {
        return Ok(Command::Sql);
    }
    let mut p = Parser::new(sql)?;
    let command = if p.eat_kw("CREATE") && p.eat_kw("TABLE") {
        Command::CreateTable(p.create_table()?)
    } else if p.reset() && p.eat_kw("ALTER") && p.eat_kw("MATERIALIZED") {
        p.expect_kw("VIEW")?;
        let (name, change) = p.alter_materialized_view()?;
        Command::AlterMaterializedView { name, change }
    } else if p.reset() && p.eat_kw("ALTER") && p.eat_kw("TABLE") {
        p.alter_table()?
    } else if p.reset() && p.eat_kw("DROP") && p.eat_kw("TABLE") {
        let if_exists = p.if_exists()?;
        Command::DropTables {
            names: p.name_list("table name")?,
            if_exists,
        }
    } else if p.reset() && p.eat_kw("TRUNCATE") {
        p.eat_kw("TABLE");
        Command::Truncate {
            tables: p.name_list("table name")?,
        }
    } else if p.reset() && p.eat_kw("RENAME") && p.eat_kw("TABLE") {
        let from = p.name("table name")?;
        p.expect_kw("TO")?;
        Command::RenameTable {
            from,
            to: p.name("new table name")?,
        }
    } else if p.reset() && p.eat_kw("SHOW") && p.eat_kw("TABLES") {
        Command::ShowTables
    } else if p.reset() && p.eat_kw("SHOW") && p.eat_kw("COLUMNS") {
        p.expect_from()?;
        Command::ShowColumns {
            table: p.name("table name")?,
        }
    } else if p.reset() && p.eat_kw("CREATE") && p.eat_last_value_cache()? {
        Command::CreateLastValueCache(p.create_last_value_cache()?)
    } else if p.reset() && p.eat_kw("DROP") && p.eat_last_value_cache()? {
        let (name, table, if_exists) = p.drop_last_value_cache()?;
        Command::DropLastValueCache {
            name,
            table,
            if_exists,
        }
    } else if p.reset() && p.eat_kw("CREATE") && p.eat_kw("VIEW") {
        Command::CreateView(p.create_view(false)?)
    } else if p.reset() && p.eat_kw("CREATE") && p.eat_kw("OR") {
        p.expect_kw("REPLACE")?;
        p.expect_kw("VIEW")?;
        Command::CreateView(p.create_view(true)?)
    } else if p.reset() && p.eat_kw("CREATE") && p.eat_kw("MATERIALIZED") {
        p.expect_kw("VIEW")?;
        Command::CreateMaterializedView(p.create_materialized_view()?)
    } else if p.reset() && p.eat_kw("REFRESH") {
        p.expect_kw("MATERIALIZED")?;
        p.expect_kw("VIEW")?;
        let (name, how) = p.refresh_materialized_view()?;
        Command::RefreshMaterializedView { name, how }
    } else if p.reset() && p.eat_kw("DROP") && (p.peek_kw("VIEW") || p.peek_kw("MATERIALIZED")) {
        let materialized = p.eat_kw("MATERIALIZED");
        p.expect_kw("VIEW")?;
        let if_exists = p.if_exists()?;
        Command::DropViews {
            names: p.name_list("view name")?,
            if_exists,
            materialized,
        }
    } else if p.reset() && p.eat_kw("SHOW") && p.eat_kw("CREATE") {
        if p.eat_kw("TABLE") {
            Command::ShowCreateTable {
                table: p.name("table name")?,
            }
        } else {
            let materialized = p.eat_kw("MATERIALIZED");
            p.expect_kw("VIEW")?;
            Command::ShowCreateView {
                name: p.name("view name")?,
                materialized,
            }
        }
    } else if p.reset() && p.eat_kw("SHOW") && p.eat_kw("PARTITIONS") {
        p.expect_from()?;
        Command::ShowPartitions {
            table: p.name("table name")?,
        }
    } else if p.reset() && p.eat_kw("BACKUP") {
        p.expect_kw("DATABASE")?;
        p.expect_kw("TO")?;
        Command::Backup {
            to: p.string("the backup directory as a quoted string, e.g. '/backups/today'")?,
        }
    } else if p.reset() && p.eat_kw("CREATE") && p.eat_kw("USER") {
        Command::User(p.create_user()?)
    } else if p.reset() && p.eat_kw("ALTER") && p.eat_kw("USER") {
        Command::User(p.alter_user()?)
    } else if p.reset() && p.eat_kw("DROP") && p.eat_kw("USER") {
        Command::User(p.drop_user()?)
    } else if p.reset() && p.eat_kw("GRANT") {
        Command::User(p.grant_or_revoke(true)?)
    } else if p.reset() && p.eat_kw("REVOKE") {
        Command::User(p.grant_or_revoke(false)?)
    } else if p.reset() && p.eat_kw("SHOW") && p.eat_kw("USERS") {
        Command::User(UserCommand::Show)
    } else if p.reset() && (p.eat_kw("DESCRIBE") || p.eat_kw("DESC")) && p.peek_is_name() {
        Command::ShowColumns {
            table: p.name("table name")?,
        }
    } else {
        return Ok(Command::Sql);
    };
    p.end()?;
    Ok(command)
}

impl Parser<'_> {
    fn create_table(&mut self) -> Result<CreateTable> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.name("table name")?;
        let mut create = CreateTable {
            name,
            if_not_exists,
            columns: Vec::new(),
            indexed: Vec::new(),
            as_query: None,
            timestamp: None,
            partition_by: None,
            dedup_keys: Vec::new(),
            ttl: None,
            cold_after: None,
        };
        if self.eat_kw("AS") {
            create.as_query = Some(self.query_text()?);
        } else {
            self.expect(&Token::LParen)?;
            loop {
                let column = self.name("column name")?;
                let (column_type, indexed) = self.column_type()?;
                if indexed {
                    create.indexed.push(column.clone());
                }
                create.columns.push((column, column_type));
                if !self.eat(&Token::Comma) {
                    break;
                }
            }
            self.expect(&Token::RParen)?;
        }
        self.table_suffix(&mut create)?;
        Ok(create)
    }

    /// The query of `CREATE TABLE ... AS`: a parenthesised query, or the rest up to the suffix.
    fn query_text(&mut self) -> Result<String> {
        let start = match self.peek() {
            Some(t) => t.span.start,
            None => return self.error("expected a query"),
        };
        if self.eat(&Token::LParen) {
            let mut depth = 1;
            let inner_start = self.location();
            while depth > 0 {
                match self.peek().map(|t| &t.token) {
                    None => return self.error("unbalanced parenthesis"),
                    Some(Token::LParen) => depth += 1,
                    Some(Token::RParen) => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    let end = offset(self.sql, self.location());
                    self.pos += 1;
                    return Ok(self.sql[offset(self.sql, inner_start)..end]
                        .trim()
                        .to_string());
                }
                self.pos += 1;
            }
        }
        while self.peek().is_some()
            && !self.peek_kw("TIMESTAMP")
            && !self.peek_kw("PARTITION")
            && !self.peek_kw("DEDUP")
        {
            self.pos += 1;
        }
        let end = self
            .peek()
            .map_or(self.sql.len(), |t| offset(self.sql, t.span.start));
        Ok(self.sql[offset(self.sql, start)..end].trim().to_string())
    }

    /// A column's type and whether it is declared `INDEX`; a SERIAL type or a column
    /// constraint is refused as not supported, naming it.
    fn column_type(&mut self) -> Result<(ColumnType, bool)> {
        let loc = self.location();
        let mut words = Vec::new();
        while let Some(Token::Word(w)) = self.peek().map(|t| &t.token) {
            if ["CAPACITY", "CACHE", "NOCACHE", "INDEX", "NULL", "NOT"]
                .iter()
                .chain(COLUMN_CONSTRAINTS)
                .any(|k| w.value.eq_ignore_ascii_case(k))
            {
                break;
            }
            words.push(w.value.to_ascii_uppercase());
            self.pos += 1;
        }
        // Sizes such as VARCHAR(20) or TIMESTAMP(6) are accepted and ignored.
        if self.eat(&Token::LParen) {
            while !self.eat(&Token::RParen) {
                if self.peek().is_none() {
                    return self.error("unbalanced parenthesis");
                }
                self.pos += 1;
            }
        }
        let joined = words.join(" ");
        let parsed = if joined.starts_with("TIMESTAMP") {
            Some(ColumnType::Timestamp)
        } else {
            ColumnType::parse(&joined)
        };
        let column_type = match parsed {
            Some(t) => t,
            None if SERIAL_TYPES.contains(&joined.as_str()) => {
                return Err(SqlError::NotSupported(format!(
                    "column type {joined} (Sundial has no sequences): use LONG and send the \
                     values, and key rows by a designated timestamp, TIMESTAMP(ts), with DEDUP \
                     UPSERT KEYS(ts, ...) to replace rows with equal keys"
                )));
            }
            None => {
                let names: Vec<_> = ColumnType::ALL.iter().map(|t| t.name()).collect();
                return Err(SqlError::Syntax {
                    message: format!(
                        "unknown column type '{joined}'; expected one of {}",
                        names.join(", ")
                    ),
                    line: loc.line,
                    column: loc.column,
                });
            }
        };
        let indexed = self.symbol_options()?;
        if let Some(Token::Word(w)) = self.peek().map(|t| &t.token)
            && COLUMN_CONSTRAINTS
                .iter()
                .any(|k| w.value.eq_ignore_ascii_case(k))
        {
            return Err(SqlError::NotSupported(format!(
                "column constraint {}: a table has no PRIMARY KEY, UNIQUE, REFERENCES, CHECK or \
                 DEFAULT; key rows by a designated timestamp, TIMESTAMP(ts), with DEDUP UPSERT \
                 KEYS(ts, ...) to replace rows with equal keys",
                w.value.to_ascii_uppercase()
            )));
        }
        Ok((column_type, indexed))
    }

    /// QuestDB's SYMBOL options; says whether they include `INDEX`. `CAPACITY n` (of the
    /// dictionary or of the index) and `CACHE` / `NOCACHE` are accepted with no effect here.
    fn symbol_options(&mut self) -> Result<bool> {
        let mut indexed = false;
        loop {
            if self.eat_kw("CAPACITY") {
                self.capacity()?;
            } else if self.eat_kw("CACHE") || self.eat_kw("NOCACHE") {
            } else if self.eat_kw("INDEX") {
                indexed = true;
            } else {
                return Ok(indexed);
            }
        }
    }

    /// The number after `CAPACITY`.
    fn capacity(&mut self) -> Result<()> {
        match self.peek().map(|t| &t.token) {
            Some(Token::Number(_, _)) => {
                self.pos += 1;
                Ok(())
            }
            _ => self.error("expected a number after CAPACITY"),
        }
    }

    fn table_suffix(&mut self, create: &mut CreateTable) -> Result<()> {
        loop {
            if self.eat_kw("TIMESTAMP") {
                self.expect(&Token::LParen)?;
                create.timestamp = Some(self.name("designated timestamp column")?);
                self.expect(&Token::RParen)?;
            } else if self.eat_kw("PARTITION") {
                self.expect_kw("BY")?;
                let loc = self.location();
                let unit = self.name("partition unit")?;
                create.partition_by = Some(PartitionBy::parse(&unit).ok_or(SqlError::Syntax {
                    message: format!("unknown partition unit '{unit}'; expected NONE, HOUR, DAY, WEEK, MONTH or YEAR"),
                    line: loc.line,
                    column: loc.column,
                })?);
            } else if self.eat_kw("DEDUP") {
                create.dedup_keys = self.upsert_keys()?;
            } else if self.eat_kw("TTL") {
                create.ttl = self.ttl()?;
            } else if self.eat_kw("COLD") {
                create.cold_after = self.cold_after()?;
            } else if self.eat_kw("WAL") || (self.eat_kw("BYPASS") && self.expect_kw("WAL").is_ok())
            {
                // QuestDB's WAL choice has no meaning here: every commit is crash-safe.
            } else if self.eat(&Token::Comma) {
                // `, INDEX(column [CAPACITY n])`, QuestDB's table-level index declaration.
                self.expect_kw("INDEX")?;
                self.expect(&Token::LParen)?;
                create.indexed.push(self.name("indexed column")?);
                if self.eat_kw("CAPACITY") {
                    self.capacity()?;
                }
                self.expect(&Token::RParen)?;
            } else {
                return Ok(());
            }
        }
    }

    /// `n UNIT` after TTL, QuestDB's way: `2 DAYS`, `1 WEEK`, `12H` (`H`, `D`, `W`, `M`, `Y`);
    /// a count of 0 means no TTL.
    fn ttl(&mut self) -> Result<Option<Ttl>> {
        self.duration("TTL", "TTL 30 DAYS")
    }

    /// A TTL-like duration after `what` (`example` shows one in an error): `n UNIT`, 0 for none.
    pub(crate) fn duration(&mut self, what: &str, example: &str) -> Result<Option<Ttl>> {
        let count = match self.peek().map(|t| &t.token) {
            Some(Token::Number(n, _)) => match n.parse::<u32>() {
                Ok(count) => count,
                Err(_) => {
                    return self.error(format!(
                        "{what} {n} is not a whole number of units from 0 to {}",
                        u32::MAX
                    ));
                }
            },
            _ => return self.error(format!("expected a number after {what}, as in {example}")),
        };
        self.pos += 1;
        let unit = match self.peek().map(|t| &t.token) {
            Some(Token::Word(w)) => TtlUnit::parse(&w.value),
            _ => None,
        };
        let Some(unit) = unit else {
            return self.error(format!(
                "expected HOURS, DAYS, WEEKS, MONTHS or YEARS after the {what}'s number"
            ));
        };
        self.pos += 1;
        Ok((count > 0).then_some(Ttl { count, unit }))
    }

    /// `COLD AFTER n UNIT`, past `COLD`.
    fn cold_after(&mut self) -> Result<Option<Ttl>> {
        self.expect_kw("AFTER")?;
        self.duration("COLD AFTER", "COLD AFTER 7 DAYS")
    }

    /// `UPSERT KEYS(a, b, ...)` after DEDUP [ENABLE].
    fn upsert_keys(&mut self) -> Result<Vec<String>> {
        self.expect_kw("UPSERT")?;
        self.expect_kw("KEYS")?;
        self.expect(&Token::LParen)?;
        let keys = self.name_list("key column")?;
        self.expect(&Token::RParen)?;
        Ok(keys)
    }

    /// The partitions of `DROP PARTITION` and `CONVERT PARTITION`: `LIST 'a', 'b'` (their
    /// names) or `WHERE <predicate>` (its text).
    fn partitions(&mut self) -> Result<(Vec<String>, Option<String>)> {
        if self.eat_kw("LIST") {
            let mut names = vec![self.string("partition name")?];
            while self.eat(&Token::Comma) {
                names.push(self.string("partition name")?);
            }
            return Ok((names, None));
        }
        if !self.eat_kw("WHERE") {
            return self.error("expected LIST or WHERE");
        }
        let predicate = self.rest();
        if predicate.is_empty() {
            return self.error("expected a condition after WHERE");
        }
        Ok((Vec::new(), Some(predicate)))
    }

    fn alter_table(&mut self) -> Result<Command> {
        let table = self.name("table name")?;
        if self.eat_kw("SET") {
            if self.eat_kw("COLD") {
                let cold_after = self.cold_after()?;
                return Ok(Command::SetColdAfter { table, cold_after });
            }
            if !self.eat_kw("TTL") {
                return self.error("expected TTL or COLD AFTER after SET");
            }
            let ttl = self.ttl()?;
            return Ok(Command::SetTtl { table, ttl });
        }
        if self.eat_kw("DEDUP") {
            if self.eat_kw("DISABLE") {
                return Ok(Command::SetDedup {
                    table,
                    keys: Vec::new(),
                });
            }
            if !self.eat_kw("ENABLE") {
                return self.error("expected ENABLE or DISABLE after DEDUP");
            }
            let keys = self.upsert_keys()?;
            return Ok(Command::SetDedup { table, keys });
        }
        if self.eat_kw("ADD") {
            self.eat_kw("COLUMN");
            let if_not_exists = self.if_not_exists()?;
            let mut columns = Vec::new();
            let mut indexed = Vec::new();
            loop {
                let name = self.name("column name")?;
                let (column_type, index) = self.column_type()?;
                if index {
                    indexed.push(name.clone());
                }
                columns.push((name, column_type));
                if !self.eat(&Token::Comma) {
                    break;
                }
                self.eat_kw("COLUMN");
            }
            return Ok(Command::AddColumns {
                table,
                columns,
                indexed,
                if_not_exists,
            });
        }
        if self.eat_kw("CONVERT") {
            self.expect_kw("PARTITION")?;
            self.expect_kw("TO")?;
            let to = if self.eat_kw("PARQUET") {
                ConvertTo::Parquet
            } else if self.eat_kw("NATIVE") {
                ConvertTo::Native
            } else {
                return self.error("expected PARQUET or NATIVE after CONVERT PARTITION TO");
            };
            let (names, predicate) = self.partitions()?;
            return Ok(Command::ConvertPartitions {
                table,
                to,
                names,
                predicate,
            });
        }
        if self.eat_kw("DROP") {
            if self.eat_kw("PARTITION") {
                let (names, predicate) = self.partitions()?;
                return Ok(Command::DropPartitions {
                    table,
                    names,
                    predicate,
                });
            }
            self.eat_kw("COLUMN");
            let mut columns = vec![self.name("column name")?];
            while self.eat(&Token::Comma) {
                self.eat_kw("COLUMN");
                columns.push(self.name("column name")?);
            }
            return Ok(Command::DropColumns { table, columns });
        }
        if self.eat_kw("RENAME") {
            if self.eat_kw("TO") {
                return Ok(Command::RenameTable {
                    from: table,
                    to: self.name("new table name")?,
                });
            }
            self.eat_kw("COLUMN");
            let from = self.name("column name")?;
            self.expect_kw("TO")?;
            return Ok(Command::RenameColumn {
                table,
                from,
                to: self.name("new column name")?,
            });
        }
        if self.eat_kw("ALTER") {
            self.expect_kw("COLUMN")?;
            let column = self.name("column name")?;
            let indexed = if self.eat_kw("ADD") {
                true
            } else if self.eat_kw("DROP") {
                false
            } else {
                return self.error("expected ADD INDEX or DROP INDEX");
            };
            self.expect_kw("INDEX")?;
            if indexed && self.eat_kw("CAPACITY") {
                self.capacity()?;
            }
            self.end()?;
            return Ok(Command::SetIndexed {
                table,
                column,
                indexed,
            });
        }
        self.error(
            "expected ADD COLUMN, DROP COLUMN, DROP PARTITION, CONVERT PARTITION, RENAME COLUMN, RENAME TO, ALTER COLUMN, DEDUP, SET TTL or SET COLD AFTER",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_scripts_respecting_strings() {
        let s = split_statements("select 1;\n insert into t values ('a;b');;\nselect 2").unwrap();
        let texts: Vec<_> = s.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(
            texts,
            ["select 1", "insert into t values ('a;b')", "select 2"]
        );
        assert_eq!(s[2].line, 3);
    }

    #[test]
    fn queries_are_recognised_without_tokenizing() {
        for sql in [
            "select 1",
            "\n  WITH a AS (SELECT 1) SELECT * FROM a",
            "Select(1)",
        ] {
            assert!(is_query(sql), "{sql}");
            assert_eq!(parse(sql).unwrap(), Command::Sql);
        }
        for sql in ["SELECTED", "-- c\nSELECT 1", "SHOW TABLES", "selec t"] {
            assert!(!is_query(sql), "{sql}");
        }
    }

    #[test]
    fn parses_questdb_create_table() {
        let c = parse("CREATE TABLE IF NOT EXISTS Cpu (ts TIMESTAMP, host SYMBOL CAPACITY 256 NOCACHE, v DOUBLE PRECISION, s VARCHAR(20)) TIMESTAMP(ts) PARTITION BY DAY WAL").unwrap();
        let Command::CreateTable(c) = c else { panic!() };
        assert_eq!(c.name, "cpu");
        assert!(c.if_not_exists);
        assert_eq!(c.columns[1], ("host".into(), ColumnType::Symbol));
        assert!(c.indexed.is_empty());
        assert_eq!(c.columns[2].1, ColumnType::Double);
        assert_eq!(c.columns[3].1, ColumnType::Varchar);
        assert_eq!(c.timestamp.as_deref(), Some("ts"));
        assert_eq!(c.partition_by, Some(PartitionBy::Day));
    }

    #[test]
    fn parses_dedup_upsert_keys() {
        let c = parse(
            "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY WAL \
             DEDUP UPSERT KEYS(ts, K)",
        )
        .unwrap();
        let Command::CreateTable(c) = c else { panic!() };
        assert_eq!(c.dedup_keys, vec!["ts".to_string(), "k".to_string()]);
        let Command::CreateTable(c) =
            parse("CREATE TABLE t2 AS (SELECT * FROM t) TIMESTAMP(ts) DEDUP UPSERT KEYS(ts)")
                .unwrap()
        else {
            panic!()
        };
        assert_eq!(c.as_query.as_deref(), Some("SELECT * FROM t"));
        assert_eq!(c.dedup_keys, vec!["ts".to_string()]);
        assert_eq!(
            parse("alter table t dedup enable upsert keys(ts, k)").unwrap(),
            Command::SetDedup {
                table: "t".into(),
                keys: vec!["ts".into(), "k".into()]
            }
        );
        assert_eq!(
            parse("ALTER TABLE t DEDUP DISABLE").unwrap(),
            Command::SetDedup {
                table: "t".into(),
                keys: Vec::new()
            }
        );
        for bad in [
            "ALTER TABLE t DEDUP",
            "ALTER TABLE t DEDUP ENABLE KEYS(ts)",
            "ALTER TABLE t DEDUP ENABLE UPSERT KEYS()",
            "CREATE TABLE t (ts TIMESTAMP) TIMESTAMP(ts) DEDUP UPSERT KEYS(ts",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// `SHOW CREATE TABLE`'s statement parses back to the table it shows.
    #[test]
    fn create_table_sql_parses_back_to_the_table() {
        use sundial_storage::{ColumnMeta, TableMeta};
        let column = |id, name: &str, column_type, indexed, dedup_key| ColumnMeta {
            id,
            name: name.into(),
            column_type,
            indexed,
            dedup_key,
        };
        let meta = TableMeta {
            name: "odd \"T\"".into(),
            columns: vec![
                column(0, "ts", ColumnType::Timestamp, false, true),
                column(1, "host name", ColumnType::Symbol, true, true),
                column(2, "v", ColumnType::Double, false, false),
                column(3, "select", ColumnType::Varchar, false, false),
            ],
            timestamp_index: Some(0),
            partition_by: PartitionBy::Hour,
            next_column_id: 4,
            ttl: Some(Ttl {
                count: 3,
                unit: TtlUnit::Week,
            }),
            cold_after: Some(Ttl {
                count: 2,
                unit: TtlUnit::Day,
            }),
            kind: Default::default(),
            definition: None,
            last_value_caches: Vec::new(),
        };
        let sql = create_table_sql(&meta);
        let Command::CreateTable(c) = parse(&sql).unwrap() else {
            panic!("{sql}")
        };
        assert_eq!(c.name, meta.name);
        let columns: Vec<(String, ColumnType)> = meta
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.column_type))
            .collect();
        assert_eq!(c.columns, columns);
        assert_eq!(c.indexed, vec!["host name".to_string()]);
        assert_eq!(c.timestamp.as_deref(), Some("ts"));
        assert_eq!(c.partition_by, Some(PartitionBy::Hour));
        assert_eq!(c.ttl, meta.ttl);
        assert_eq!(c.cold_after, meta.cold_after);
        assert_eq!(
            c.dedup_keys,
            vec!["ts".to_string(), "host name".to_string()]
        );
        let plain = TableMeta {
            name: "p".into(),
            columns: vec![column(0, "a", ColumnType::Long, false, false)],
            timestamp_index: None,
            partition_by: PartitionBy::None,
            next_column_id: 1,
            ttl: None,
            cold_after: None,
            kind: Default::default(),
            definition: None,
            last_value_caches: Vec::new(),
        };
        assert_eq!(
            create_table_sql(&plain),
            "CREATE TABLE \"p\" (\n    \"a\" LONG\n) PARTITION BY NONE"
        );
    }

    #[test]
    fn parses_ttl_as_questdb_writes_it() {
        let ttl = |count, unit| Some(Ttl { count, unit });
        for (sql, expected) in [
            ("TTL 30 DAYS", ttl(30, TtlUnit::Day)),
            ("TTL 1 week", ttl(1, TtlUnit::Week)),
            ("TTL 12H", ttl(12, TtlUnit::Hour)),
            ("TTL 2 MONTHS", ttl(2, TtlUnit::Month)),
            ("TTL 1 Y", ttl(1, TtlUnit::Year)),
        ] {
            let create = format!(
                "CREATE TABLE t (ts TIMESTAMP, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY {sql} WAL"
            );
            let Command::CreateTable(c) = parse(&create).unwrap() else {
                panic!()
            };
            assert_eq!(c.ttl, expected, "{sql}");
            assert_eq!(c.partition_by, Some(PartitionBy::Day));
            assert_eq!(
                parse(&format!("ALTER TABLE t SET {sql}")).unwrap(),
                Command::SetTtl {
                    table: "t".into(),
                    ttl: expected
                }
            );
        }
        assert_eq!(
            parse("ALTER TABLE t SET TTL 0 HOURS").unwrap(),
            Command::SetTtl {
                table: "t".into(),
                ttl: None
            }
        );
        for (bad, message) in [
            ("ALTER TABLE t SET TTL", "expected a number after TTL"),
            ("ALTER TABLE t SET TTL 3", "expected HOURS, DAYS"),
            ("ALTER TABLE t SET TTL 3 FORTNIGHTS", "expected HOURS, DAYS"),
            (
                "ALTER TABLE t SET TTL -3 DAYS",
                "expected a number after TTL",
            ),
            ("ALTER TABLE t SET TTL 1.5 DAYS", "not a whole number"),
            (
                "ALTER TABLE t SET TTL 99999999999 DAYS",
                "not a whole number",
            ),
            (
                "ALTER TABLE t SET PARAM x = 1",
                "expected TTL or COLD AFTER",
            ),
            ("ALTER TABLE t SET COLD 2 DAYS", "expected AFTER"),
            (
                "ALTER TABLE t SET COLD AFTER 2",
                "after the COLD AFTER's number",
            ),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.to_string().contains(message), "{bad}: {e}");
        }
    }

    #[test]
    fn parses_create_as_and_alter() {
        let Command::CreateTable(c) =
            parse("create table t2 as (select * from (select 1) x) timestamp(ts)").unwrap()
        else {
            panic!()
        };
        assert_eq!(c.as_query.as_deref(), Some("select * from (select 1) x"));
        assert_eq!(
            parse("ALTER TABLE t DROP PARTITION LIST '2016-01-01', '2016-01-02'").unwrap(),
            Command::DropPartitions {
                table: "t".into(),
                names: vec!["2016-01-01".into(), "2016-01-02".into()],
                predicate: None
            }
        );
        assert_eq!(
            parse("ALTER TABLE t CONVERT PARTITION TO PARQUET LIST '2016-01-01'").unwrap(),
            Command::ConvertPartitions {
                table: "t".into(),
                to: ConvertTo::Parquet,
                names: vec!["2016-01-01".into()],
                predicate: None
            }
        );
        assert_eq!(
            parse("alter table t convert partition to native where ts < '2016-01-02'").unwrap(),
            Command::ConvertPartitions {
                table: "t".into(),
                to: ConvertTo::Native,
                names: Vec::new(),
                predicate: Some("ts < '2016-01-02'".into())
            }
        );
        for (bad, message) in [
            (
                "ALTER TABLE t CONVERT PARTITION TO CSV LIST 'x'",
                "expected PARQUET or NATIVE",
            ),
            (
                "ALTER TABLE t CONVERT PARTITION TO PARQUET",
                "expected LIST or WHERE",
            ),
            (
                "ALTER TABLE t CONVERT PARTITION TO PARQUET WHERE",
                "expected a condition",
            ),
            (
                "ALTER TABLE t DROP PARTITION ts > 0",
                "expected LIST or WHERE",
            ),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.to_string().contains(message), "{bad}: {e}");
        }
        assert_eq!(
            parse("alter table t rename column a to \"B\"").unwrap(),
            Command::RenameColumn {
                table: "t".into(),
                from: "a".into(),
                to: "B".into()
            }
        );
        assert_eq!(parse("select * from t").unwrap(), Command::Sql);
        assert_eq!(
            parse("describe t").unwrap(),
            Command::ShowColumns { table: "t".into() }
        );
    }

    #[test]
    fn parses_symbol_indexes() {
        let c = parse("CREATE TABLE t (a SYMBOL CAPACITY 64 NOCACHE INDEX CAPACITY 256, b SYMBOL, c SYMBOL, ts TIMESTAMP), INDEX(b CAPACITY 128), INDEX (c) TIMESTAMP(ts)").unwrap();
        let Command::CreateTable(c) = c else { panic!() };
        assert_eq!(c.indexed, ["a", "b", "c"]);
        assert_eq!(c.timestamp.as_deref(), Some("ts"));
        assert_eq!(
            parse("ALTER TABLE t ALTER COLUMN a ADD INDEX CAPACITY 1024").unwrap(),
            Command::SetIndexed {
                table: "t".into(),
                column: "a".into(),
                indexed: true
            }
        );
        assert_eq!(
            parse("alter table t alter column a drop index").unwrap(),
            Command::SetIndexed {
                table: "t".into(),
                column: "a".into(),
                indexed: false
            }
        );
        let Command::AddColumns { indexed, .. } =
            parse("ALTER TABLE t ADD COLUMN s SYMBOL INDEX, n INT").unwrap()
        else {
            panic!()
        };
        assert_eq!(indexed, ["s"]);
        let e = parse("ALTER TABLE t ALTER COLUMN a REBUILD INDEX").unwrap_err();
        assert_eq!(e.position(), Some((1, 30)), "{e}");
    }

    #[test]
    fn backup_database_takes_one_quoted_path() {
        assert_eq!(
            parse("backup database to '/var/backups/sundial'").unwrap(),
            Command::Backup {
                to: "/var/backups/sundial".into()
            }
        );
        assert_eq!(
            parse("BACKUP DATABASE TO 'it''s here'").unwrap(),
            Command::Backup {
                to: "it's here".into()
            }
        );
        // Relative paths parse; the storage layer refuses them with its own message.
        assert_eq!(
            parse("BACKUP DATABASE TO 'rel'").unwrap(),
            Command::Backup { to: "rel".into() }
        );
        let long = format!("BACKUP DATABASE TO '/{}'", "x".repeat(100_000));
        assert!(matches!(parse(&long).unwrap(), Command::Backup { .. }));
        for (sql, at) in [
            ("BACKUP DATABASE TO /tmp/x", 20),
            ("BACKUP DATABASE TO", 19),
            ("BACKUP TABLE t TO '/x'", 8),
            ("BACKUP DATABASE INTO '/x'", 17),
            ("BACKUP DATABASE TO '/x' '/y'", 25),
            ("BACKUP DATABASE TO \"/x\"", 20),
            ("BACKUP DATABASE TO 5", 20),
        ] {
            let e = parse(sql).unwrap_err();
            assert_eq!(e.position(), Some((1, at)), "{sql}: {e}");
        }
    }

    #[test]
    fn errors_point_at_the_token() {
        let e = parse("CREATE TABLE t (a FANCY)").unwrap_err();
        assert_eq!(e.position(), Some((1, 19)), "{e}");
        let e = parse("CREATE TABLE t (a INT) PARTITION BY FORTNIGHT").unwrap_err();
        assert_eq!(e.position(), Some((1, 37)), "{e}");
    }

    /// SERIAL and column constraints are refused by name, never glued into a type name.
    #[test]
    fn serial_and_constraints_say_they_are_not_supported() {
        let e = parse("CREATE TABLE t (id serial PRIMARY KEY, ts TIMESTAMP)").unwrap_err();
        assert!(matches!(e, SqlError::NotSupported(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("column type SERIAL ("), "{e}");
        assert!(e.contains("DEDUP UPSERT KEYS"), "{e}");
        let e = parse("CREATE TABLE t (id LONG PRIMARY KEY)")
            .unwrap_err()
            .to_string();
        assert!(e.contains("column constraint PRIMARY:"), "{e}");
        let e = parse("CREATE TABLE t (id INT UNIQUE, v DOUBLE)")
            .unwrap_err()
            .to_string();
        assert!(e.contains("column constraint UNIQUE:"), "{e}");
        let e = parse("CREATE TABLE t (id INT DEFAULT 0)")
            .unwrap_err()
            .to_string();
        assert!(e.contains("column constraint DEFAULT:"), "{e}");
        let e = parse("CREATE TABLE t (a FANCY PRIMARY KEY)")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown column type 'FANCY';"), "{e}");
        // Multi-word types still parse.
        parse("CREATE TABLE t (a DOUBLE PRECISION, ts TIMESTAMP)").unwrap();
    }
}
