//! Last-value caches: `CREATE LAST VALUE CACHE` and `DROP LAST VALUE CACHE`, parsed from
//! sqlparser's tokens (`statement` makes them commands).
//!
//! ```text
//! CREATE LAST VALUE CACHE [IF NOT EXISTS] name ON table (key, ...) [IGNORE NULLS]
//! DROP LAST VALUE CACHE [IF EXISTS] name ON table
//! ```
//!
//! A cache keeps the newest row per key of a table in memory (the engine's `last_values`);
//! `IGNORE NULLS` keeps, per key, each column's newest non-NULL value instead (InfluxDB 3's
//! last-value cache).

use sqlparser::tokenizer::Token;

use crate::error::Result;
use crate::tokens::Parser;

/// `CREATE LAST VALUE CACHE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateLastValueCache {
    pub name: String,
    pub table: String,
    pub if_not_exists: bool,
    /// The key columns, as written.
    pub keys: Vec<String>,
    /// Each column's newest non-NULL value per key, rather than the newest row.
    pub ignore_nulls: bool,
}

impl Parser<'_> {
    /// After `CREATE LAST VALUE CACHE`.
    pub(crate) fn create_last_value_cache(&mut self) -> Result<CreateLastValueCache> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.name("cache name")?;
        self.expect_kw("ON")?;
        let table = self.name("table name")?;
        self.expect(&Token::LParen)?;
        let keys = self.name_list("key column name")?;
        self.expect(&Token::RParen)?;
        let ignore_nulls = self.eat_kw("IGNORE");
        if ignore_nulls {
            self.expect_kw("NULLS")?;
        }
        Ok(CreateLastValueCache {
            name,
            table,
            if_not_exists,
            keys,
            ignore_nulls,
        })
    }

    /// After `DROP LAST VALUE CACHE`: `(name, table, if_exists)`.
    pub(crate) fn drop_last_value_cache(&mut self) -> Result<(String, String, bool)> {
        let if_exists = self.if_exists()?;
        let name = self.name("cache name")?;
        self.expect_kw("ON")?;
        let table = self.name("table name")?;
        Ok((name, table, if_exists))
    }

    /// Whether the next words are `LAST VALUE CACHE` (eaten if they are).
    pub(crate) fn eat_last_value_cache(&mut self) -> Result<bool> {
        if !self.eat_kw("LAST") {
            return Ok(false);
        }
        self.expect_kw("VALUE")?;
        self.expect_kw("CACHE")?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use crate::statement::{Command, parse};

    use super::CreateLastValueCache;

    #[test]
    fn create_and_drop() {
        let c = parse("CREATE LAST VALUE CACHE IF NOT EXISTS by_host ON public.cpu (hostname, Region) IGNORE NULLS").unwrap();
        assert_eq!(
            c,
            Command::CreateLastValueCache(CreateLastValueCache {
                name: "by_host".into(),
                table: "cpu".into(),
                if_not_exists: true,
                keys: vec!["hostname".into(), "region".into()],
                ignore_nulls: true,
            })
        );
        let d = parse("drop last value cache if exists by_host on cpu").unwrap();
        assert_eq!(
            d,
            Command::DropLastValueCache {
                name: "by_host".into(),
                table: "cpu".into(),
                if_exists: true,
            }
        );
    }

    #[test]
    fn errors_name_what_is_wrong() {
        for (sql, wanted) in [
            ("CREATE LAST VALUE CACHE c ON t", "expected '('"),
            ("CREATE LAST VALUE CACHE c ON t ()", "key column name"),
            ("CREATE LAST VALUE CACHE c t (k)", "ON"),
            ("CREATE LAST VALUE CACHE c ON t (k) IGNORE", "NULLS"),
            ("CREATE LAST VALUE c ON t (k)", "CACHE"),
            ("DROP LAST VALUE CACHE c", "ON"),
            ("CREATE LAST VALUE CACHE c ON t (k) extra", "extra"),
        ] {
            let e = parse(sql).unwrap_err().to_string();
            assert!(e.contains(wanted), "{sql}: {e}");
        }
    }
}
