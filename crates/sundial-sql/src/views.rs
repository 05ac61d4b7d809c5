//! Views and materialized views: `CREATE [OR REPLACE] VIEW`, QuestDB's `CREATE MATERIALIZED
//! VIEW` and `REFRESH MATERIALIZED VIEW`, parsed from sqlparser's tokens (`statement` makes
//! them commands, with `DROP [MATERIALIZED] VIEW` and `SHOW CREATE [MATERIALIZED] VIEW`).
//!
//! A view keeps its defining statement as its definition: the engine parses it again with
//! [`parse`](crate::parse) whenever it needs the query or the refresh settings, so there is
//! one source of truth, which `SHOW CREATE` shows.

use sqlparser::tokenizer::Token;
use sundial_storage::{PartitionBy, Ttl};

use crate::error::{Result, SqlError};
use crate::questdb::stride::Stride;
use crate::tokens::Parser;

/// `CREATE [OR REPLACE] VIEW [IF NOT EXISTS] name AS query`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateView {
    pub name: String,
    pub if_not_exists: bool,
    pub or_replace: bool,
    /// The query, without its surrounding parentheses.
    pub query: String,
}

/// QuestDB's `CREATE MATERIALIZED VIEW`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateMaterializedView {
    pub name: String,
    pub if_not_exists: bool,
    /// `WITH BASE t`: the table whose commits the view follows (else the query's only table).
    pub base: Option<String>,
    pub refresh: Refresh,
    /// The query, without its surrounding parentheses.
    pub query: String,
    /// `TIMESTAMP(c)`: the view's designated timestamp (else the query's bucket column).
    pub timestamp: Option<String>,
    pub partition_by: Option<PartitionBy>,
    pub ttl: Option<Ttl>,
}

/// When a materialized view refreshes.
#[derive(Debug, Clone, PartialEq)]
pub enum Refresh {
    /// Soon after each commit of the base table (the default).
    Immediate,
    /// Only on `REFRESH MATERIALIZED VIEW`.
    Manual,
    /// On a timer: every `every`, from `start` (SQL text of a timestamp) if given.
    Every {
        every: Stride,
        start: Option<String>,
        time_zone: Option<String>,
    },
    /// Once each period of `length` (plus `delay`) has passed, up to its end.
    Period {
        length: Stride,
        delay: Option<Stride>,
        time_zone: Option<String>,
    },
}

/// What `ALTER MATERIALIZED VIEW` changes.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterView {
    /// `SET TTL n UNIT` (`None`: `TTL 0 ...`, no TTL).
    Ttl(Option<Ttl>),
    /// `SET REFRESH IMMEDIATE | MANUAL | EVERY ...`.
    Refresh(Refresh),
}

/// What `REFRESH MATERIALIZED VIEW` recomputes.
#[derive(Debug, Clone, PartialEq)]
pub enum RefreshHow {
    /// Everything, from the whole base table; clears the invalid state.
    Full,
    /// What the base table's commits since the last refresh touched.
    Incremental,
    /// The buckets from `from` to `to` (SQL text of timestamps).
    Range { from: String, to: String },
}

impl Parser<'_> {
    /// After `CREATE [OR REPLACE] VIEW`.
    pub(crate) fn create_view(&mut self, or_replace: bool) -> Result<CreateView> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.name("view name")?;
        self.expect_kw("AS")?;
        let query = self.view_query(&[])?;
        Ok(CreateView {
            name,
            if_not_exists,
            or_replace,
            query,
        })
    }

    /// After `CREATE MATERIALIZED VIEW`.
    pub(crate) fn create_materialized_view(&mut self) -> Result<CreateMaterializedView> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.name("materialized view name")?;
        let mut view = CreateMaterializedView {
            name,
            if_not_exists,
            base: None,
            refresh: Refresh::Immediate,
            query: String::new(),
            timestamp: None,
            partition_by: None,
            ttl: None,
        };
        loop {
            if self.eat_kw("WITH") {
                self.expect_kw("BASE")?;
                view.base = Some(self.name("base table name")?);
            } else if self.eat_kw("REFRESH") {
                view.refresh = self.refresh()?;
            } else {
                break;
            }
        }
        self.expect_kw("AS")?;
        view.query = self.view_query(&["TIMESTAMP", "PARTITION", "TTL"])?;
        loop {
            if self.eat_kw("TIMESTAMP") {
                self.expect(&Token::LParen)?;
                view.timestamp = Some(self.name("designated timestamp column")?);
                self.expect(&Token::RParen)?;
            } else if self.eat_kw("PARTITION") {
                self.expect_kw("BY")?;
                let unit = self.name("partition unit")?;
                view.partition_by = Some(PartitionBy::parse(&unit).ok_or_else(|| {
                    SqlError::Invalid(format!(
                        "unknown partition unit '{unit}'; expected HOUR, DAY, WEEK, MONTH or YEAR"
                    ))
                })?);
            } else if self.eat_kw("TTL") {
                view.ttl = self.duration("TTL", "TTL 30 DAYS")?;
            } else {
                break;
            }
        }
        Ok(view)
    }

    /// `IMMEDIATE | MANUAL | EVERY n [START 'ts'] [TIME ZONE 'tz'] | PERIOD (LENGTH n [TIME
    /// ZONE 'tz'] [DELAY n])`, after `REFRESH`.
    fn refresh(&mut self) -> Result<Refresh> {
        if self.eat_kw("IMMEDIATE") {
            return Ok(Refresh::Immediate);
        }
        if self.eat_kw("MANUAL") {
            return Ok(Refresh::Manual);
        }
        if self.eat_kw("EVERY") {
            let every = self.interval("REFRESH EVERY")?;
            let mut start = None;
            let mut time_zone = None;
            loop {
                if self.eat_kw("START") {
                    start = Some(self.string("the START timestamp, e.g. '2025-01-01T00:00:00Z'")?);
                } else if self.eat_kw("TIME") {
                    self.expect_kw("ZONE")?;
                    time_zone = Some(self.string("the time zone, e.g. 'Europe/London'")?);
                } else {
                    break;
                }
            }
            return Ok(Refresh::Every {
                every,
                start: start.map(|s| format!("'{}'", s.replace('\'', "''"))),
                time_zone,
            });
        }
        if self.eat_kw("PERIOD") {
            self.expect(&Token::LParen)?;
            self.expect_kw("LENGTH")?;
            let length = self.interval("PERIOD LENGTH")?;
            let (mut delay, mut time_zone) = (None, None);
            loop {
                if self.eat_kw("DELAY") {
                    delay = Some(self.interval("PERIOD DELAY")?);
                } else if self.eat_kw("TIME") {
                    self.expect_kw("ZONE")?;
                    time_zone = Some(self.string("the time zone, e.g. 'Europe/London'")?);
                } else {
                    break;
                }
            }
            self.expect(&Token::RParen)?;
            return Ok(Refresh::Period {
                length,
                delay,
                time_zone,
            });
        }
        self.error("expected IMMEDIATE, MANUAL, EVERY <interval> or PERIOD (LENGTH <interval>)")
    }

    /// An interval such as `1h`, `10m`, `'5m'` or `2 DAYS` (QuestDB's units: `m` minutes, `M`
    /// months).
    fn interval(&mut self, what: &str) -> Result<Stride> {
        let example = "as in 1h, 10m or 2d";
        let text = match self.peek().map(|t| t.token.clone()) {
            Some(Token::SingleQuotedString(s)) => {
                self.pos += 1;
                s
            }
            Some(Token::Number(n, _)) => {
                self.pos += 1;
                let unit = match self.peek().map(|t| &t.token) {
                    Some(Token::Word(w)) => {
                        let letter = unit_letter(&w.value);
                        self.pos += usize::from(letter.is_some());
                        letter.unwrap_or_default()
                    }
                    _ => "",
                };
                if n.chars().all(|c| c.is_ascii_digit()) {
                    format!("{n}{unit}")
                } else {
                    // The tokenizer keeps a letter after the digits with them (`1h`).
                    n
                }
            }
            _ => return self.error(format!("expected an interval after {what}, {example}")),
        };
        Stride::parse(&text).map_err(|m| SqlError::Invalid(format!("{what}: {m}")))
    }

    /// A view's query: parenthesised, or the rest of the statement up to one of `stop` at the
    /// top level.
    fn view_query(&mut self, stop: &[&str]) -> Result<String> {
        let Some(first) = self.peek() else {
            return self.error("expected a query");
        };
        let start = crate::tokens::offset(self.sql, first.span.start);
        let mut depth = 0usize;
        let mut end = self.sql.len();
        while let Some(t) = self.peek() {
            match &t.token {
                Token::LParen => depth += 1,
                Token::RParen => depth = depth.saturating_sub(1),
                Token::Word(w)
                    if depth == 0 && stop.iter().any(|s| w.value.eq_ignore_ascii_case(s)) =>
                {
                    end = crate::tokens::offset(self.sql, t.span.start);
                    break;
                }
                Token::SemiColon if depth == 0 => {
                    end = crate::tokens::offset(self.sql, t.span.start);
                    break;
                }
                _ => {}
            }
            self.pos += 1;
        }
        let text = self.sql[start..end].trim();
        let text = strip_parens(text).trim();
        if text.is_empty() {
            return self.error("expected a query");
        }
        Ok(text.to_string())
    }

    /// After `ALTER MATERIALIZED VIEW`: the view's name and the change.
    pub(crate) fn alter_materialized_view(&mut self) -> Result<(String, AlterView)> {
        let name = self.name("materialized view name")?;
        self.expect_kw("SET")?;
        let change = if self.eat_kw("TTL") {
            AlterView::Ttl(self.duration("TTL", "TTL 30 DAYS")?)
        } else if self.eat_kw("REFRESH") {
            AlterView::Refresh(self.refresh()?)
        } else {
            return self.error("expected SET TTL <n> <unit> or SET REFRESH <mode>");
        };
        Ok((name, change))
    }

    /// After `REFRESH MATERIALIZED VIEW`: the view's name and what to refresh.
    pub(crate) fn refresh_materialized_view(&mut self) -> Result<(String, RefreshHow)> {
        let name = self.name("materialized view name")?;
        let how = if self.eat_kw("FULL") {
            RefreshHow::Full
        } else if self.eat_kw("RANGE") {
            self.expect_kw("FROM")?;
            let from = self.string("the range's start, e.g. '2025-01-01'")?;
            self.expect_kw("TO")?;
            let to = self.string("the range's end, e.g. '2025-02-01'")?;
            RefreshHow::Range {
                from: format!("'{}'", from.replace('\'', "''")),
                to: format!("'{}'", to.replace('\'', "''")),
            }
        } else {
            self.eat_kw("INCREMENTAL");
            RefreshHow::Incremental
        };
        Ok((name, how))
    }
}

/// QuestDB's unit letter for a unit written as a letter or a word.
fn unit_letter(word: &str) -> Option<&'static str> {
    let w = word.to_ascii_uppercase();
    let w = w.strip_suffix('S').filter(|w| w.len() > 1).unwrap_or(&w);
    Some(match (word, w) {
        ("m", _) => "m",
        ("M", _) => "M",
        (_, "SECOND" | "SEC") => "s",
        (_, "MINUTE" | "MIN") => "m",
        (_, "HOUR" | "H") => "h",
        (_, "DAY" | "D") => "d",
        (_, "WEEK" | "W") => "w",
        (_, "MONTH") => "M",
        (_, "YEAR" | "Y") => "y",
        _ => return None,
    })
}

/// `text` without one pair of parentheses around all of it.
fn strip_parens(text: &str) -> &str {
    let Some(inner) = text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) else {
        return text;
    };
    // `(a) UNION (b)` is not one parenthesised query: the first ')' must close the first '('.
    let mut depth = 0i32;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 && i != text.len() - 1 {
                    return text;
                }
            }
            _ => {}
        }
    }
    inner
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::questdb::stride::Unit;
    use crate::{Command, parse};

    fn mat(sql: &str) -> CreateMaterializedView {
        match parse(sql).unwrap() {
            Command::CreateMaterializedView(v) => v,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_questdb_materialized_views() {
        let v = mat(
            "CREATE MATERIALIZED VIEW IF NOT EXISTS 'trades_1h' WITH BASE trades \
             REFRESH EVERY 10m START '2025-01-01' AS ( SELECT ts, sym, avg(p) FROM trades \
             SAMPLE BY 1h ) TIMESTAMP(ts) PARTITION BY WEEK TTL 4 WEEKS",
        );
        assert_eq!(v.name, "trades_1h");
        assert!(v.if_not_exists);
        assert_eq!(v.base.as_deref(), Some("trades"));
        assert_eq!(
            v.refresh,
            Refresh::Every {
                every: Stride {
                    count: 10,
                    unit: Unit::Minute
                },
                start: Some("'2025-01-01'".into()),
                time_zone: None
            }
        );
        assert_eq!(
            v.query,
            "SELECT ts, sym, avg(p) FROM trades \n             SAMPLE BY 1h"
                .replace("\n             ", "")
        );
        assert_eq!(v.timestamp.as_deref(), Some("ts"));
        assert_eq!(v.partition_by, Some(PartitionBy::Week));
        assert!(v.ttl.is_some());
        let v = mat(
            "CREATE MATERIALIZED VIEW v AS SELECT ts, max(x) FROM t SAMPLE BY 1d \
             PARTITION BY MONTH",
        );
        assert_eq!(v.refresh, Refresh::Immediate);
        assert_eq!(v.query, "SELECT ts, max(x) FROM t SAMPLE BY 1d");
        assert_eq!(v.partition_by, Some(PartitionBy::Month));
        let v = mat(
            "CREATE MATERIALIZED VIEW v REFRESH PERIOD (LENGTH 1d DELAY 2 HOURS) AS \
             (SELECT ts, max(x) FROM t SAMPLE BY 1h)",
        );
        assert!(matches!(v.refresh, Refresh::Period { delay: Some(_), .. }));
        let v = mat("CREATE MATERIALIZED VIEW v REFRESH MANUAL AS (SELECT 1)");
        assert_eq!(v.refresh, Refresh::Manual);
    }

    #[test]
    fn parses_views_refreshes_and_drops() {
        let Command::CreateView(v) =
            parse("CREATE OR REPLACE VIEW v AS (SELECT a FROM (SELECT 1 a))").unwrap()
        else {
            panic!()
        };
        assert!(v.or_replace);
        assert_eq!(v.query, "SELECT a FROM (SELECT 1 a)");
        let Command::CreateView(v) = parse("CREATE VIEW v AS (SELECT 1) UNION (SELECT 2)").unwrap()
        else {
            panic!()
        };
        assert_eq!(v.query, "(SELECT 1) UNION (SELECT 2)");
        assert_eq!(
            parse("REFRESH MATERIALIZED VIEW v RANGE FROM '2025-01-01' TO '2025-02-01'").unwrap(),
            Command::RefreshMaterializedView {
                name: "v".into(),
                how: RefreshHow::Range {
                    from: "'2025-01-01'".into(),
                    to: "'2025-02-01'".into()
                }
            }
        );
        assert_eq!(
            parse("REFRESH MATERIALIZED VIEW v").unwrap(),
            Command::RefreshMaterializedView {
                name: "v".into(),
                how: RefreshHow::Incremental
            }
        );
        assert_eq!(
            parse("DROP MATERIALIZED VIEW IF EXISTS v").unwrap(),
            Command::DropViews {
                names: vec!["v".into()],
                if_exists: true,
                materialized: true
            }
        );
        assert_eq!(
            parse("SHOW CREATE MATERIALIZED VIEW v").unwrap(),
            Command::ShowCreateView {
                name: "v".into(),
                materialized: true
            }
        );
    }

    #[test]
    fn refuses_malformed_statements_clearly() {
        for (sql, says) in [
            (
                "CREATE MATERIALIZED VIEW v REFRESH SOMETIMES AS (SELECT 1)",
                "expected IMMEDIATE",
            ),
            (
                "CREATE MATERIALIZED VIEW v REFRESH EVERY 0m AS (SELECT 1)",
                "at least 1",
            ),
            (
                "CREATE MATERIALIZED VIEW v REFRESH EVERY 5x AS (SELECT 1)",
                "not a stride",
            ),
            ("CREATE VIEW v AS", "expected a query"),
            ("CREATE VIEW v AS ()", "expected a query"),
            (
                "CREATE MATERIALIZED VIEW v AS (SELECT 1) PARTITION BY FORTNIGHT",
                "partition unit",
            ),
        ] {
            let e = parse(sql).unwrap_err().to_string();
            assert!(e.contains(says), "{sql}: {e}");
        }
    }
}
