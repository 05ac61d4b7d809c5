//! Finds QuestDB's clauses in the token stream and replaces each with a marker standard SQL
//! can carry to the parser.
//!
//! | QuestDB                          | marker text                                      |
//! |----------------------------------|--------------------------------------------------|
//! | `SAMPLE BY 1h FILL(..) ALIGN ..` | `GROUP BY __sundial_sample_by(i)`                |
//! | `... SAMPLE BY 1h GROUP BY a`    | `GROUP BY __sundial_sample_by(i), a`             |
//! | `WHERE w LATEST ON ts PARTITION BY k` | `WHERE (w) AND __sundial_latest(i)`         |
//! | `LATEST BY k [WHERE w]`          | `WHERE __sundial_latest(i) [AND (w)]`            |
//! | `LIMIT m, n` (both ≥ 0)          | `LIMIT n-m OFFSET m`                             |
//! | `LIMIT -n`, `LIMIT -m, -n`, ...  | `LIMIT __sundial_limit(i)`                       |
//! | `ts IN '2016-01-01;2h'`          | `ts IN (__sundial_interval('2016-01-01;2h'))`    |
//! | `a ASOF JOIN b [ON ..] [TOLERANCE 1s]` | `a ASOF JOIN b MATCH_CONDITION (__sundial_time_join(i)) [ON ..]` |
//! | `a LT JOIN b [ON ..]`            | the same, with `ASOF` for `LT`                   |
//! | `FROM (q) timestamp(ts) [a]`     | `FROM (SELECT * FROM (q) __sundial_ts ORDER BY ts) [a]` |
//!
//! The clause's details go to [`Clauses`], indexed by the marker's `i`; the AST rewrite in
//! the parent module finds each marker in the SELECT it belongs to. Text outside the clauses
//! is kept byte for byte, so positions in DataFusion's errors still point into the user's SQL
//! wherever no clause came before them on the line.

use std::borrow::Cow;

use sqlparser::tokenizer::{Location, Token, TokenWithSpan};

use crate::error::{Result, SqlError};
use crate::names::TimeJoinKind;
use crate::tokens::{offset, tokenize};

pub(crate) const SAMPLE_MARKER: &str = "__sundial_sample_by";
pub(crate) const LATEST_MARKER: &str = "__sundial_latest";
pub(crate) const LIMIT_MARKER: &str = "__sundial_limit";
pub(crate) const INTERVAL_MARKER: &str = "__sundial_interval";
pub(crate) const TIME_JOIN_MARKER: &str = "__sundial_time_join";

/// The QuestDB clauses of one statement, indexed by their markers.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Clauses {
    pub(crate) samples: Vec<SampleBy>,
    pub(crate) latest: Vec<Latest>,
    pub(crate) limits: Vec<RangeLimit>,
    pub(crate) time_joins: Vec<TimeJoin>,
}

/// Where a clause starts, for error messages (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    pub line: u64,
    pub column: u64,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

impl From<Location> for Position {
    fn from(l: Location) -> Self {
        Position {
            line: l.line,
            column: l.column,
        }
    }
}

/// `SAMPLE BY <stride> [FROM lo TO hi] [FILL(...)] [ALIGN TO ...]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SampleBy {
    /// The stride as written: `1h`, `15m`, `1M`.
    pub stride: String,
    /// SQL text of the `FROM` and `TO` bounds.
    pub from: Option<String>,
    pub to: Option<String>,
    pub fill: Vec<Fill>,
    pub align: Align,
    pub position: Position,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fill {
    None,
    Null,
    Prev,
    Linear,
    /// A constant, as SQL text.
    Value(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Align {
    /// Buckets start at calendar boundaries of the stride's unit, in `time_zone` (UTC if
    /// `None`), shifted by `offset` (`'hh:mm'`, possibly negative).
    Calendar {
        time_zone: Option<String>,
        offset: Option<String>,
    },
    /// The first bucket starts at the first row's timestamp.
    FirstObservation,
}

/// `LATEST ON ts PARTITION BY keys` (`timestamp: Some`) or `LATEST BY keys`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Latest {
    /// SQL text of the timestamp and of each key, as written.
    pub timestamp: Option<String>,
    pub keys: Vec<String>,
    pub position: Position,
}

/// A QuestDB `LIMIT` with a negative bound: `LIMIT lo` or `LIMIT lo, hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RangeLimit {
    pub lo: i64,
    pub hi: Option<i64>,
    pub position: Position,
}

/// `ASOF JOIN`, `LT JOIN` or `SPLICE JOIN`, with an optional `TOLERANCE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeJoin {
    pub kind: TimeJoinKind,
    /// How far back a right row may lie and still match, in nanoseconds.
    pub tolerance_ns: Option<i64>,
    pub position: Position,
}

/// Replaces QuestDB's clauses in `sql` by markers. SQL without any is returned unchanged,
/// without being tokenized when no clause keyword occurs in it at all.
pub fn extract(sql: &str) -> Result<(Cow<'_, str>, Clauses)> {
    if !mentions_a_clause(sql) {
        return Ok((Cow::Borrowed(sql), Clauses::default()));
    }
    let tokens: Vec<TokenWithSpan> = tokenize(sql)?
        .into_iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    let mut scan = Scanner {
        sql,
        tokens,
        pos: 0,
        edits: Vec::new(),
        clauses: Clauses::default(),
    };
    scan.run()?;
    if scan.edits.is_empty() {
        return Ok((Cow::Borrowed(sql), scan.clauses));
    }
    Ok((Cow::Owned(scan.apply()?), scan.clauses))
}

fn mentions_a_clause(sql: &str) -> bool {
    let mentions = |word: &str| {
        sql.as_bytes()
            .windows(word.len())
            .any(|w| w.eq_ignore_ascii_case(word.as_bytes()))
    };
    mentions("sample")
        || mentions("latest")
        || mentions("limit")
        || (sql.contains('\'') && mentions("in"))
        || (mentions("join")
            && (mentions_word(sql, "asof")
                || mentions_word(sql, "lt")
                || mentions_word(sql, "splice")))
        || declares_a_timestamp(sql)
}

/// Whether `)` is followed by `timestamp (` somewhere in `sql`: a subquery that declares its
/// designated timestamp.
fn declares_a_timestamp(sql: &str) -> bool {
    let bytes = sql.as_bytes();
    let skip_space = |mut i: usize| {
        while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    bytes.iter().enumerate().any(|(i, b)| {
        if *b != b')' {
            return false;
        }
        let at = skip_space(i + 1);
        let Some(word) = bytes.get(at..at + 9) else {
            return false;
        };
        word.eq_ignore_ascii_case(b"timestamp") && bytes.get(skip_space(at + 9)) == Some(&b'(')
    })
}

/// Whether `word` occurs in `sql` on its own, not inside a longer name (`lt` in `result`).
fn mentions_word(sql: &str, word: &str) -> bool {
    let bytes = sql.as_bytes();
    let is_name = |i: usize| {
        bytes
            .get(i)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    };
    bytes.windows(word.len()).enumerate().any(|(i, w)| {
        w.eq_ignore_ascii_case(word.as_bytes())
            && (i == 0 || !is_name(i - 1))
            && !is_name(i + word.len())
    })
}

/// One textual replacement: bytes `start..end` become `text`.
struct Edit {
    start: usize,
    end: usize,
    text: String,
}

struct Scanner<'a> {
    sql: &'a str,
    tokens: Vec<TokenWithSpan>,
    pos: usize,
    edits: Vec<Edit>,
    clauses: Clauses,
}

/// Keywords that end a clause's expression at its own nesting depth.
const CLAUSE_ENDS: &[&str] = &[
    "SAMPLE",
    "LATEST",
    "GROUP",
    "ORDER",
    "LIMIT",
    "HAVING",
    "WINDOW",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "FILL",
    "ALIGN",
    "WHERE",
    "QUALIFY",
];

/// Keywords besides [`CLAUSE_ENDS`] that may follow a joined relation, so are never its alias.
const AFTER_RELATION: &[&str] = &[
    "ON",
    "USING",
    "TOLERANCE",
    "JOIN",
    "ASOF",
    "LT",
    "SPLICE",
    "LEFT",
    "RIGHT",
    "FULL",
    "INNER",
    "CROSS",
    "OUTER",
    "NATURAL",
];

impl Scanner<'_> {
    fn run(&mut self) -> Result<()> {
        // Byte offset just past the WHERE keyword of the SELECT open at each depth.
        let mut wheres: Vec<Option<usize>> = vec![None];
        // Token index of each open parenthesis.
        let mut opens: Vec<usize> = Vec::new();
        while self.pos < self.tokens.len() {
            match &self.tokens[self.pos].token {
                Token::LParen => {
                    wheres.push(None);
                    opens.push(self.pos);
                }
                Token::RParen => {
                    wheres.pop();
                    if wheres.is_empty() {
                        wheres.push(None);
                    }
                    if let Some(open) = opens.pop()
                        && self.declared_timestamp(open)
                    {
                        continue;
                    }
                }
                _ => {}
            }
            let depth_where = wheres.last_mut().expect("never empty");
            if self.at_kw("SELECT") {
                *depth_where = None;
            } else if self.at_kw("WHERE") {
                *depth_where = Some(self.start_byte(self.pos + 1));
            } else if self.at_kw("SAMPLE") && self.kw_at(self.pos + 1, "BY") {
                self.sample_by()?;
                continue;
            } else if self.at_kw("LATEST")
                && (self.kw_at(self.pos + 1, "BY") || self.kw_at(self.pos + 1, "ON"))
            {
                let where_start = depth_where.take();
                self.latest(where_start)?;
                continue;
            } else if self.at_kw("LIMIT") {
                self.limit()?;
                continue;
            } else if (self.at_kw("ASOF") || self.at_kw("LT") || self.at_kw("SPLICE"))
                && self.kw_at(self.pos + 1, "JOIN")
            {
                self.time_join()?;
                continue;
            } else if self.at_kw("TOLERANCE") && self.tolerance_may_follow() {
                self.tolerance()?;
                continue;
            } else if self.at_kw("IN")
                && let Some(Token::SingleQuotedString(_)) = self.token_at(self.pos + 1)
            {
                let literal = &self.tokens[self.pos + 1];
                let (start, end) = (self.start_byte(self.pos + 1), self.end_of(literal));
                let text = format!("({INTERVAL_MARKER}({}))", &self.sql[start..end]);
                self.edits.push(Edit { start, end, text });
                self.pos += 2;
                continue;
            }
            self.pos += 1;
        }
        Ok(())
    }

    /// The text with every edit made; edits that overlap (clauses inside one another, as
    /// `LATEST BY` within `PARTITION BY`) make the statement an error.
    fn apply(&mut self) -> Result<String> {
        self.edits.sort_by_key(|e| e.start);
        let mut out = String::with_capacity(self.sql.len() + 64);
        let mut at = 0;
        for e in &self.edits {
            if e.start < at || e.end < e.start {
                return Err(SqlError::Syntax {
                    message: "clauses of the QuestDB dialect overlap".into(),
                    line: 1 + self.sql[..e.start.min(self.sql.len())]
                        .matches('\n')
                        .count() as u64,
                    column: 1 + self.sql[..e.start.min(self.sql.len())]
                        .rsplit('\n')
                        .next()
                        .map_or(0, |l| l.chars().count()) as u64,
                });
            }
            out.push_str(&self.sql[at..e.start]);
            out.push_str(&e.text);
            at = e.end;
        }
        out.push_str(&self.sql[at..]);
        Ok(out)
    }

    // --- token helpers ---

    fn token_at(&self, i: usize) -> Option<&Token> {
        self.tokens.get(i).map(|t| &t.token)
    }

    fn kw_at(&self, i: usize, kw: &str) -> bool {
        matches!(self.token_at(i), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(kw))
    }

    fn at_kw(&self, kw: &str) -> bool {
        self.kw_at(self.pos, kw)
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        let hit = self.at_kw(kw);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn eat(&mut self, token: &Token) -> bool {
        let hit = self.token_at(self.pos) == Some(token);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn start_byte(&self, i: usize) -> usize {
        match self.tokens.get(i) {
            Some(t) => offset(self.sql, t.span.start),
            None => self.sql.len(),
        }
    }

    fn end_of(&self, t: &TokenWithSpan) -> usize {
        offset(self.sql, t.span.end)
    }

    fn end_byte(&self, i: usize) -> usize {
        self.tokens
            .get(i)
            .map_or(self.sql.len(), |t| self.end_of(t))
    }

    fn position(&self, i: usize) -> Position {
        self.tokens
            .get(i)
            .map(|t| t.span.start)
            .or_else(|| self.tokens.last().map(|t| t.span.end))
            .unwrap_or(Location { line: 1, column: 1 })
            .into()
    }

    fn error<T>(&self, clause: &str, message: impl std::fmt::Display) -> Result<T> {
        let p = self.position(self.pos);
        let found = self
            .token_at(self.pos)
            .map_or_else(|| "end of statement".to_string(), |t| format!("'{t}'"));
        Err(SqlError::Syntax {
            message: format!("{clause}: {message}, found {found}"),
            line: p.line,
            column: p.column,
        })
    }

    /// Whether the token at `i` ends an expression that started at the current depth.
    fn ends_expression(&self, i: usize, extra: &[&str]) -> bool {
        match self.token_at(i) {
            None | Some(Token::SemiColon | Token::RParen | Token::EOF) => true,
            Some(Token::Word(w)) if w.quote_style.is_none() => CLAUSE_ENDS
                .iter()
                .chain(extra)
                .any(|k| w.value.eq_ignore_ascii_case(k)),
            _ => false,
        }
    }

    /// Skips one expression at the current depth and returns its source text.
    fn expression(&mut self, clause: &str, extra: &[&str]) -> Result<String> {
        let first = self.pos;
        let mut depth = 0usize;
        while self.pos < self.tokens.len() {
            match self.token_at(self.pos) {
                Some(Token::LParen) => depth += 1,
                Some(Token::RParen) if depth > 0 => depth -= 1,
                Some(Token::Comma) if depth == 0 => break,
                _ if depth == 0 && self.ends_expression(self.pos, extra) => break,
                _ => {}
            }
            self.pos += 1;
        }
        if self.pos == first {
            return self.error(clause, "expected an expression");
        }
        let (start, end) = (self.start_byte(first), self.end_byte(self.pos - 1));
        Ok(self.sql[start..end].to_string())
    }

    // --- (query) timestamp(ts) ---

    /// At the `)` closing a subquery in FROM or JOIN opened at token `open`, followed by
    /// `timestamp(ts)`: QuestDB's declaration that the subquery's rows are ordered by `ts`, its
    /// designated timestamp. The subquery becomes one sorted by `ts`, which the time joins,
    /// SAMPLE BY and LATEST ON take as its designated timestamp (a sort of rows already in
    /// order costs one comparison per row). Moves past the declaration when it rewrote it.
    fn declared_timestamp(&mut self, open: usize) -> bool {
        let close = self.pos;
        let is_query = self.kw_at(open + 1, "SELECT")
            || self.kw_at(open + 1, "WITH")
            || self.token_at(open + 1) == Some(&Token::LParen);
        let in_from = open > 0
            && (self.kw_at(open - 1, "FROM")
                || self.kw_at(open - 1, "JOIN")
                || matches!(self.token_at(open - 1), Some(Token::Comma | Token::LParen)));
        let declared = self.kw_at(close + 1, "TIMESTAMP")
            && self.token_at(close + 2) == Some(&Token::LParen)
            && matches!(self.token_at(close + 3), Some(Token::Word(_)))
            && self.token_at(close + 4) == Some(&Token::RParen);
        if !(is_query && in_from && declared) {
            return false;
        }
        let column = &self.tokens[close + 3];
        let column = self.sql[self.start_byte(close + 3)..self.end_of(column)].to_string();
        let at = self.start_byte(open);
        self.edits.push(Edit {
            start: at,
            end: at,
            text: "(SELECT * FROM ".into(),
        });
        self.edits.push(Edit {
            start: self.start_byte(close + 1),
            end: self.end_byte(close + 4),
            text: format!("__sundial_ts ORDER BY {column})"),
        });
        self.pos = close + 5;
        true
    }

    // --- SAMPLE BY ---

    fn sample_by(&mut self) -> Result<()> {
        const CLAUSE: &str = "SAMPLE BY";
        let first = self.pos;
        let position = self.position(first);
        self.pos += 2;
        let stride = self.stride("SAMPLE BY")?;
        let mut sample = SampleBy {
            stride,
            from: None,
            to: None,
            fill: Vec::new(),
            align: Align::Calendar {
                time_zone: None,
                offset: None,
            },
            position,
        };
        loop {
            if self.eat_kw("FROM") {
                sample.from = Some(self.expression(CLAUSE, &["TO"])?);
            } else if self.eat_kw("TO") {
                sample.to = Some(self.expression(CLAUSE, &[])?);
            } else if self.eat_kw("FILL") {
                sample.fill = self.fill()?;
            } else if self.eat_kw("ALIGN") {
                sample.align = self.align()?;
            } else {
                break;
            }
        }
        let end = self.start_byte(self.pos);
        let index = self.clauses.samples.len();
        self.clauses.samples.push(sample);
        let mut text = format!("GROUP BY {SAMPLE_MARKER}({index})");
        let mut end = end;
        if self.at_kw("GROUP") && self.kw_at(self.pos + 1, "BY") {
            // `SAMPLE BY 1h GROUP BY ts, k`: the keys join the sampling's GROUP BY.
            text.push(',');
            end = self.end_byte(self.pos + 1);
            self.pos += 2;
        } else {
            text.push(' ');
        }
        let start = self.start_byte(first);
        self.edits.push(Edit { start, end, text });
        Ok(())
    }

    /// `1h`, `15m`, `1M`: a count and a unit, written together.
    fn stride(&mut self, clause: &str) -> Result<String> {
        let first = self.pos;
        let stride = match self.token_at(self.pos) {
            Some(Token::Number(n, _)) => {
                let n = n.clone();
                let adjacent = self.tokens.get(self.pos + 1).is_some_and(|next| {
                    next.span.start == self.tokens[self.pos].span.end
                        && matches!(&next.token, Token::Word(w) if w.quote_style.is_none())
                });
                if !adjacent {
                    return self.error(clause, "expected a stride such as 1h or 15m");
                }
                let Some(Token::Word(unit)) = self.token_at(self.pos + 1) else {
                    return self.error(clause, "expected a stride such as 1h or 15m");
                };
                let stride = format!("{n}{}", unit.value);
                self.pos += 2;
                stride
            }
            // A bare unit (`SAMPLE BY h`) or a number and unit tokenized as one word.
            Some(Token::Word(w)) if w.quote_style.is_none() => {
                let s = w.value.clone();
                self.pos += 1;
                s
            }
            Some(Token::SingleQuotedString(s)) => {
                let s = s.clone();
                self.pos += 1;
                s
            }
            _ => return self.error(clause, "expected a stride such as 1h or 15m"),
        };
        if let Err(message) = super::stride::Stride::parse(&stride) {
            self.pos = first;
            return self.error(clause, message);
        }
        Ok(stride)
    }

    fn fill(&mut self) -> Result<Vec<Fill>> {
        const CLAUSE: &str = "FILL";
        if !self.eat(&Token::LParen) {
            return self.error(CLAUSE, "expected '('");
        }
        let mut fills = Vec::new();
        loop {
            let fill = if self.eat_kw("NONE") {
                Fill::None
            } else if self.eat_kw("NULL") {
                Fill::Null
            } else if self.eat_kw("PREV") {
                Fill::Prev
            } else if self.eat_kw("LINEAR") {
                Fill::Linear
            } else {
                Fill::Value(self.expression(CLAUSE, &[])?)
            };
            fills.push(fill);
            if self.eat(&Token::Comma) {
                continue;
            }
            if self.eat(&Token::RParen) {
                return Ok(fills);
            }
            return self.error(CLAUSE, "expected ',' or ')'");
        }
    }

    fn align(&mut self) -> Result<Align> {
        const CLAUSE: &str = "ALIGN TO";
        if !self.eat_kw("TO") {
            return self.error(CLAUSE, "expected TO");
        }
        if self.eat_kw("FIRST") {
            if !self.eat_kw("OBSERVATION") {
                return self.error(CLAUSE, "expected OBSERVATION");
            }
            return Ok(Align::FirstObservation);
        }
        if !self.eat_kw("CALENDAR") {
            return self.error(CLAUSE, "expected CALENDAR or FIRST OBSERVATION");
        }
        let mut time_zone = None;
        let mut offset = None;
        loop {
            if self.eat_kw("TIME") {
                if !self.eat_kw("ZONE") {
                    return self.error(CLAUSE, "expected ZONE");
                }
                time_zone = Some(self.expression(CLAUSE, &["WITH", "FROM", "TO"])?);
            } else if self.eat_kw("WITH") {
                if !self.eat_kw("OFFSET") {
                    return self.error(CLAUSE, "expected OFFSET");
                }
                offset = Some(self.expression(CLAUSE, &["TIME", "FROM", "TO"])?);
            } else {
                return Ok(Align::Calendar { time_zone, offset });
            }
        }
    }

    // --- LATEST ON / LATEST BY ---

    fn latest(&mut self, where_start: Option<usize>) -> Result<()> {
        let first = self.pos;
        let position = self.position(first);
        let (clause, timestamp) = if self.kw_at(first + 1, "ON") {
            self.pos += 2;
            let ts = self.expression("LATEST ON", &["PARTITION"])?;
            if !(self.eat_kw("PARTITION") && self.eat_kw("BY")) {
                return self.error("LATEST ON", "expected PARTITION BY");
            }
            ("LATEST ON", Some(ts))
        } else {
            self.pos += 2;
            ("LATEST BY", None)
        };
        let mut keys = vec![self.expression(clause, &[])?];
        while self.eat(&Token::Comma) {
            keys.push(self.expression(clause, &[])?);
        }
        let index = self.clauses.latest.len();
        self.clauses.latest.push(Latest {
            timestamp,
            keys,
            position,
        });
        let marker = format!("{LATEST_MARKER}({index})");
        let (start, end) = (self.start_byte(first), self.start_byte(self.pos));
        if let Some(where_start) = where_start {
            // `WHERE w LATEST ...`: the filter applies first.
            self.edits.push(Edit {
                start: where_start,
                end: where_start,
                text: "(".into(),
            });
            self.edits.push(Edit {
                start: self.end_byte(first - 1),
                end,
                text: format!(") AND {marker} "),
            });
        } else if self.at_kw("WHERE") {
            // `LATEST BY k WHERE w`: QuestDB's older order; the filter still applies first.
            let where_end = self.end_byte(self.pos);
            self.pos += 1;
            self.expression("WHERE", &[])?;
            let expression_end = self.end_byte(self.pos - 1);
            self.edits.push(Edit {
                start,
                end: where_end,
                text: format!("WHERE {marker} AND ("),
            });
            self.edits.push(Edit {
                start: expression_end,
                end: expression_end,
                text: ")".into(),
            });
        } else {
            self.edits.push(Edit {
                start,
                end,
                text: format!("WHERE {marker} "),
            });
        }
        Ok(())
    }

    // --- ASOF JOIN, LT JOIN, SPLICE JOIN ---

    /// Marks `ASOF JOIN rel` / `LT JOIN rel` / `SPLICE JOIN rel` with a `MATCH_CONDITION`
    /// naming the join's entry in [`Clauses::time_joins`], which sqlparser parses into an
    /// ASOF join.
    fn time_join(&mut self) -> Result<()> {
        let kind = if self.at_kw("LT") {
            TimeJoinKind::Lt
        } else if self.at_kw("SPLICE") {
            TimeJoinKind::Splice
        } else {
            TimeJoinKind::Asof
        };
        let clause = kind.clause();
        let position = self.position(self.pos);
        if kind != TimeJoinKind::Asof {
            let (start, end) = (self.start_byte(self.pos), self.end_byte(self.pos));
            let text = "ASOF".to_string();
            self.edits.push(Edit { start, end, text });
        }
        self.pos += 2;
        let end = self.relation_end(clause)?;
        let index = self.clauses.time_joins.len();
        self.clauses.time_joins.push(TimeJoin {
            kind,
            tolerance_ns: None,
            position,
        });
        let at = self.end_byte(end - 1);
        self.edits.push(Edit {
            start: at,
            end: at,
            text: format!(" MATCH_CONDITION ({TIME_JOIN_MARKER}({index}))"),
        });
        // A subquery's own clauses are found by scanning on inside it.
        if !matches!(self.token_at(self.pos), Some(Token::LParen)) {
            self.pos = end;
        }
        Ok(())
    }

    /// The index of the token after the joined relation starting here (a table name or a
    /// parenthesised subquery) and its alias.
    fn relation_end(&self, clause: &str) -> Result<usize> {
        let mut i = self.pos;
        let fail = |i: usize, message: &str| {
            let p = self.position(i);
            Err(SqlError::Syntax {
                message: format!("{clause}: {message}"),
                line: p.line,
                column: p.column,
            })
        };
        if matches!(self.token_at(i), Some(Token::LParen)) {
            let mut depth = 0usize;
            loop {
                match self.token_at(i) {
                    Some(Token::LParen) => depth += 1,
                    Some(Token::RParen) => depth -= 1,
                    None | Some(Token::EOF) => {
                        return fail(i, "expected ')' closing the subquery");
                    }
                    _ => {}
                }
                i += 1;
                if depth == 0 {
                    break;
                }
            }
        } else {
            loop {
                if !matches!(self.token_at(i), Some(Token::Word(_))) {
                    return fail(i, "expected a table or a subquery");
                }
                i += 1;
                if self.token_at(i) != Some(&Token::Period) {
                    break;
                }
                i += 1;
            }
        }
        let is_alias = |t: Option<&Token>| match t {
            Some(Token::Word(w)) => {
                w.quote_style.is_some()
                    || !AFTER_RELATION
                        .iter()
                        .chain(CLAUSE_ENDS)
                        .any(|k| w.value.eq_ignore_ascii_case(k))
            }
            _ => false,
        };
        if self.kw_at(i, "AS") {
            if !matches!(self.token_at(i + 1), Some(Token::Word(_))) {
                return fail(i + 1, "expected an alias after AS");
            }
            i += 2;
        } else if is_alias(self.token_at(i)) {
            i += 1;
        }
        Ok(i)
    }

    /// Whether `TOLERANCE` here is the clause rather than a column: a time join without one
    /// came before, and a stride follows.
    fn tolerance_may_follow(&self) -> bool {
        self.clauses
            .time_joins
            .last()
            .is_some_and(|j| j.tolerance_ns.is_none())
            && matches!(
                self.token_at(self.pos + 1),
                Some(Token::Number(..) | Token::SingleQuotedString(_))
            )
    }

    /// `TOLERANCE 10s` after an ASOF or LT JOIN's condition: removed, and kept with the join.
    fn tolerance(&mut self) -> Result<()> {
        const CLAUSE: &str = "TOLERANCE";
        let first = self.pos;
        self.pos += 1;
        let at = self.pos;
        let text = self.stride(CLAUSE)?;
        let nanos = super::stride::Stride::parse(&text)
            .ok()
            .and_then(|s| match s.step() {
                Some(super::stride::Step::Nanos(ns)) => Some(ns),
                _ => None,
            });
        let Some(nanos) = nanos else {
            self.pos = at;
            return self.error(
                CLAUSE,
                "months and years vary in length: write the tolerance in U, T, s, m, h, d or w",
            );
        };
        if let Some(join) = self.clauses.time_joins.last_mut() {
            join.tolerance_ns = Some(nanos);
        }
        let (start, end) = (self.start_byte(first), self.start_byte(self.pos));
        self.edits.push(Edit {
            start,
            end,
            text: String::new(),
        });
        Ok(())
    }

    // --- LIMIT ---

    /// `LIMIT n` stays; QuestDB's `LIMIT lo, hi` forms become standard SQL or a marker.
    fn limit(&mut self) -> Result<()> {
        let first = self.pos;
        let position = self.position(first);
        self.pos += 1;
        let lo = self.signed_integer();
        let hi = if self.eat(&Token::Comma) {
            Some(self.signed_integer())
        } else {
            None
        };
        let (lo, hi) = match (lo, hi) {
            (Some(lo), None) if lo >= 0 => return Ok(()),
            (Some(lo), None) => (lo, None),
            (Some(lo), Some(Some(hi))) => (lo, Some(hi)),
            (Some(lo), Some(None)) if self.ends_expression(self.pos, &[]) => (lo, None),
            (None, Some(Some(hi))) => (0, Some(hi)),
            // Not literals (`LIMIT $1`, `LIMIT 10 OFFSET 5`): standard SQL.
            _ => {
                self.pos = first + 1;
                return Ok(());
            }
        };
        let text = match (lo, hi) {
            (lo, Some(0)) | (lo, None) if lo >= 0 => format!("LIMIT {lo} "),
            (lo, Some(hi)) if lo >= 0 && hi >= 0 => {
                let (lo, hi) = (lo.min(hi), lo.max(hi));
                format!("LIMIT {} OFFSET {lo} ", hi - lo)
            }
            (lo, hi) => {
                let hi = hi.filter(|h| *h != 0);
                let index = self.clauses.limits.len();
                self.clauses.limits.push(RangeLimit { lo, hi, position });
                format!("LIMIT {LIMIT_MARKER}({index}) ")
            }
        };
        let (start, end) = (self.start_byte(first), self.start_byte(self.pos));
        self.edits.push(Edit { start, end, text });
        Ok(())
    }

    /// An optionally negative integer literal, consumed if present.
    fn signed_integer(&mut self) -> Option<i64> {
        let negative = matches!(self.token_at(self.pos), Some(Token::Minus));
        let at = self.pos + usize::from(negative);
        let Some(Token::Number(n, _)) = self.token_at(at) else {
            return None;
        };
        let value: i64 = n.parse().ok()?;
        self.pos = at + 1;
        Some(if negative { -value } else { value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> (String, Clauses) {
        let (text, clauses) = extract(sql).unwrap();
        (text.into_owned(), clauses)
    }

    #[test]
    fn sample_by_becomes_a_group_by_marker() {
        let (sql, c) = rewritten(
            "SELECT ts, avg(x) FROM t WHERE x > 0 SAMPLE BY 1h FILL(PREV, 0) ALIGN TO CALENDAR TIME ZONE 'Europe/Berlin' WITH OFFSET '00:15' ORDER BY ts",
        );
        assert_eq!(
            sql,
            "SELECT ts, avg(x) FROM t WHERE x > 0 GROUP BY __sundial_sample_by(0) ORDER BY ts"
        );
        let s = &c.samples[0];
        assert_eq!(s.stride, "1h");
        assert_eq!(s.fill, vec![Fill::Prev, Fill::Value("0".into())]);
        assert_eq!(
            s.align,
            Align::Calendar {
                time_zone: Some("'Europe/Berlin'".into()),
                offset: Some("'00:15'".into())
            }
        );
    }

    #[test]
    fn sample_by_merges_with_a_following_group_by() {
        let (sql, c) = rewritten(
            "SELECT timestamp, hostname, avg(u) FROM cpu WHERE timestamp >= '2016-01-01T07:47:52Z' SAMPLE BY 1h GROUP BY timestamp, hostname;",
        );
        assert_eq!(
            sql,
            "SELECT timestamp, hostname, avg(u) FROM cpu WHERE timestamp >= '2016-01-01T07:47:52Z' GROUP BY __sundial_sample_by(0), timestamp, hostname;"
        );
        assert_eq!(c.samples[0].stride, "1h");
        let (_, c) = rewritten(
            "select x from t sample by 1M from '2020-01-01' to '2021-01-01' align to first observation",
        );
        assert_eq!(c.samples[0].from.as_deref(), Some("'2020-01-01'"));
        assert_eq!(c.samples[0].to.as_deref(), Some("'2021-01-01'"));
        assert_eq!(c.samples[0].align, Align::FirstObservation);
    }

    #[test]
    fn latest_wraps_the_filter_before_it() {
        let (sql, c) = rewritten("SELECT * FROM t WHERE a OR b LATEST ON ts PARTITION BY k1, k2");
        assert_eq!(
            sql,
            "SELECT * FROM t WHERE (a OR b) AND __sundial_latest(0) "
        );
        assert_eq!(c.latest[0].timestamp.as_deref(), Some("ts"));
        assert_eq!(c.latest[0].keys, vec!["k1", "k2"]);
        let (sql, _) = rewritten("SELECT * FROM cpu latest by hostname;");
        assert_eq!(sql, "SELECT * FROM cpu WHERE __sundial_latest(0) ;");
        let (sql, _) = rewritten("SELECT * FROM cpu latest by hostname where a or b order by x");
        assert_eq!(
            sql,
            "SELECT * FROM cpu WHERE __sundial_latest(0) AND ( a or b) order by x"
        );
        let (sql, _) = rewritten("SELECT * FROM (SELECT * FROM t WHERE a LATEST BY k) WHERE b");
        assert_eq!(
            sql,
            "SELECT * FROM (SELECT * FROM t WHERE (a) AND __sundial_latest(0) ) WHERE b"
        );
    }

    #[test]
    fn limits_follow_questdb() {
        assert_eq!(rewritten("SELECT 1 LIMIT 5").0, "SELECT 1 LIMIT 5");
        assert_eq!(
            rewritten("SELECT 1 LIMIT 2, 5").0,
            "SELECT 1 LIMIT 3 OFFSET 2 "
        );
        assert_eq!(
            rewritten("SELECT 1 LIMIT 5, 2").0,
            "SELECT 1 LIMIT 3 OFFSET 2 "
        );
        assert_eq!(rewritten("SELECT 1 LIMIT 5, 0").0, "SELECT 1 LIMIT 5 ");
        assert_eq!(rewritten("SELECT 1 LIMIT $1").0, "SELECT 1 LIMIT $1");
        let (sql, c) = rewritten("SELECT 1 LIMIT -7, -2");
        assert_eq!(sql, "SELECT 1 LIMIT __sundial_limit(0) ");
        assert_eq!((c.limits[0].lo, c.limits[0].hi), (-7, Some(-2)));
        let (_, c) = rewritten("SELECT 1 LIMIT -3");
        assert_eq!((c.limits[0].lo, c.limits[0].hi), (-3, None));
    }

    #[test]
    fn interval_literals_get_a_marker() {
        let (sql, _) = rewritten("SELECT * FROM t WHERE ts IN '2016-01-01T10;2h' AND s IN ('a')");
        assert_eq!(
            sql,
            "SELECT * FROM t WHERE ts IN (__sundial_interval('2016-01-01T10;2h')) AND s IN ('a')"
        );
    }

    #[test]
    fn errors_name_the_clause_and_position() {
        let e = extract("SELECT x FROM t SAMPLE BY 1q")
            .unwrap_err()
            .to_string();
        assert!(e.contains("SAMPLE BY") && e.contains("column 27"), "{e}");
        let e = extract("SELECT x FROM t SAMPLE BY 1h FILL PREV")
            .unwrap_err()
            .to_string();
        assert!(e.contains("FILL: expected '('"), "{e}");
    }

    #[test]
    fn overlapping_clauses_are_an_error_not_a_panic() {
        // Found by tests/fuzz_sql.rs: LATEST BY's edit lies inside PARTITION BY's.
        let sql = "SELECT timestamp_floor('1h', ts) 1h WHERE LATEST BY 0.5 FILL(LINEAR) \
                   PARTITION BY NOT 9223372036854775807 (";
        let _ = extract(sql);
    }

    #[test]
    fn time_joins_get_a_match_condition_marker() {
        let (text, clauses) = rewritten(
            "SELECT * FROM a LT JOIN (SELECT * FROM b SAMPLE BY 1h) AS x ON (s) TOLERANCE 10s \
             ASOF JOIN c WHERE tolerance > 1",
        );
        assert_eq!(
            text,
            "SELECT * FROM a ASOF JOIN (SELECT * FROM b GROUP BY __sundial_sample_by(0) ) AS x \
             MATCH_CONDITION (__sundial_time_join(0)) ON (s) ASOF JOIN c MATCH_CONDITION \
             (__sundial_time_join(1)) WHERE tolerance > 1"
        );
        assert_eq!(clauses.time_joins.len(), 2);
        assert_eq!(clauses.time_joins[0].kind, TimeJoinKind::Lt);
        assert_eq!(clauses.time_joins[0].tolerance_ns, Some(10_000_000_000));
        assert_eq!(clauses.time_joins[1].tolerance_ns, None);
    }

    #[test]
    fn a_subquery_declaring_its_timestamp_is_sorted_by_it() {
        let (sql, _) = rewritten(
            "SELECT * FROM (SELECT ts, v FROM t WHERE v > 0) timestamp(ts) a \
             ASOF JOIN ((SELECT * FROM u) TIMESTAMP (\"t s\")) b",
        );
        assert_eq!(
            sql,
            "SELECT * FROM (SELECT * FROM (SELECT ts, v FROM t WHERE v > 0) __sundial_ts ORDER BY \
             ts) a ASOF JOIN ((SELECT * FROM (SELECT * FROM u) __sundial_ts ORDER BY \"t s\")) b \
             MATCH_CONDITION (__sundial_time_join(0))"
        );
        // CREATE TABLE AS keeps its own TIMESTAMP(ts); a function's argument is no subquery.
        for kept in [
            "CREATE TABLE t2 AS (SELECT * FROM t) TIMESTAMP(ts)",
            "SELECT f((SELECT 1)) timestamp(x) FROM t LIMIT 1",
        ] {
            assert_eq!(rewritten(kept).0, kept);
        }
    }

    #[test]
    fn plain_sql_is_not_touched() {
        let sql = "SELECT a FROM t WHERE b = 'in' ORDER BY a";
        assert!(matches!(extract(sql).unwrap().0, Cow::Borrowed(_)));
    }
}
