//! The analytics battery: ad-hoc filters, aggregates, groupings and DISTINCT over TSBS data,
//! run over PostgreSQL's protocol against one server, each query's median reported with the
//! GB/s of the columns it scans; answers are written out, and checked against another
//! server's (QuestDB's) when given.
//!
//! ```text
//!  queries file: name | columns scanned (table:col:bytes,..) or - | SQL
//!  per query: burn-in runs, then timed runs ──▶ median, GB/s = rows × bytes / median
//!             answer (text, rows sorted unless ORDER BY) ──▶ DIR/name.txt ──▶ compared
//! ```
//!
//! Also `membw`: the memory read rate of this machine, summing a large in-memory array on one
//! thread and on all, the ceiling a scan can reach.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio_postgres::{NoTls, SimpleQueryMessage};

use crate::query::{describe, pg_config};

#[derive(clap::Args)]
pub struct AnalyticsArgs {
    /// The server's PostgreSQL address.
    #[arg(long)]
    pg_addr: std::net::SocketAddr,
    #[arg(long, default_value = "admin")]
    user: String,
    #[arg(long, default_value = "quest")]
    password: String,
    /// Which server this is, for the result lines.
    #[arg(long)]
    label: String,
    /// The battery: `name | table:column:bytes,... or - | SQL`, one query per line.
    #[arg(long)]
    queries: PathBuf,
    /// Timed runs per query (the median is reported), after `burn_in` untimed ones.
    #[arg(long, default_value_t = 15)]
    runs: usize,
    #[arg(long, default_value_t = 3)]
    burn_in: usize,
    /// Time a query may take over all its runs (ms, 0 for no bound): burn-in stops once it
    /// has used half of it, the timed runs once they have used it (never under 3 runs), so
    /// batteries of slow statements finish.
    #[arg(long, default_value_t = 0)]
    budget_ms: u64,
    /// Directory the answers are written to, one file per query.
    #[arg(long)]
    answers: PathBuf,
    /// Another server's answers to check these against.
    #[arg(long)]
    reference: Option<PathBuf>,
}

struct Query {
    name: String,
    /// (table, bytes per row) of the columns a full scan reads.
    scanned: Vec<(String, u64)>,
    sql: String,
}

fn parse(text: &str) -> Result<Vec<Query>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.splitn(3, '|').map(str::trim);
        let (Some(name), Some(columns), Some(sql)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("line {}: want `name | columns | SQL`", i + 1));
        };
        let mut scanned = Vec::new();
        if columns != "-" {
            for c in columns.split(',') {
                let f: Vec<&str> = c.trim().split(':').collect();
                let [table, _column, bytes] = f.as_slice() else {
                    return Err(format!(
                        "line {}: column `{c}` is not table:column:bytes",
                        i + 1
                    ));
                };
                let bytes = bytes
                    .parse()
                    .map_err(|_| format!("line {}: bytes of `{c}`", i + 1))?;
                scanned.push((table.to_string(), bytes));
            }
        }
        out.push(Query {
            name: name.to_string(),
            scanned,
            sql: sql.to_string(),
        });
    }
    Ok(out)
}

/// An answer as text lines, one per row, columns joined by `|`; numbers with a fraction keep
/// 9 significant digits (servers add floating-point numbers in different orders). Rows are
/// sorted unless the query orders them; `SELECT *` rows have their values sorted too (servers
/// order a table's columns differently).
fn answer(messages: &[SimpleQueryMessage], ordered: bool, star: bool) -> Vec<String> {
    let mut rows: Vec<String> = messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => {
                let mut values: Vec<String> = (0..row.len())
                    .map(|i| normalize(row.get(i).unwrap_or("NULL")))
                    .collect();
                if star {
                    values.sort();
                }
                Some(values.join("|"))
            }
            _ => None,
        })
        .collect();
    if !ordered {
        rows.sort();
    }
    rows
}

fn normalize(value: &str) -> String {
    match value.parse::<f64>() {
        Ok(v) if value.contains('.') || value.contains('e') => {
            if v.is_nan() {
                "NaN".into()
            } else if v == v.trunc() && v.abs() < 1e15 {
                format!("{}", v as i64)
            } else {
                format!("{v:.8e}")
            }
        }
        // Timestamps: QuestDB writes `2016-01-01 00:00:00.000000`, PostgreSQL-style servers
        // `2016-01-01 00:00:00`: compare them without trailing zero fractions.
        _ if value.len() >= 19 && value.as_bytes()[4] == b'-' && value.as_bytes()[10] == b' ' => {
            let v = value.trim_end_matches("+00");
            match v.split_once('.') {
                Some((whole, fraction)) if fraction.bytes().all(|b| b == b'0') => whole.into(),
                Some((whole, fraction)) => format!("{whole}.{}", fraction.trim_end_matches('0')),
                None => v.into(),
            }
        }
        _ => value.to_string(),
    }
}

pub fn run(args: AnalyticsArgs) -> Result<(), String> {
    let queries = parse(&std::fs::read_to_string(&args.queries).map_err(|e| e.to_string())?)?;
    std::fs::create_dir_all(&args.answers).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let config = pg_config(args.pg_addr, &args.user, &args.password);
        let (client, connection) = tokio_postgres::connect(&config, NoTls)
            .await
            .map_err(describe)?;
        tokio::spawn(connection);
        let mut rows_of: HashMap<String, u64> = HashMap::new();
        let (mut matched, mut differed) = (0, 0);
        for q in &queries {
            for (table, _) in &q.scanned {
                if !rows_of.contains_key(table) {
                    let m = client
                        .simple_query(&format!("SELECT count(*) FROM {table}"))
                        .await
                        .map_err(describe)?;
                    let n = answer(&m, true, false)
                        .first()
                        .and_then(|r| r.parse().ok())
                        .unwrap_or(0);
                    rows_of.insert(table.clone(), n);
                }
            }
            let mut times = Vec::with_capacity(args.runs);
            let mut last = Vec::new();
            let mut failed = None;
            let budget = (args.budget_ms > 0).then(|| Duration::from_millis(args.budget_ms));
            let (mut burnt, mut timed) = (Duration::ZERO, Duration::ZERO);
            let mut burn_in = args.burn_in;
            while times.len() < args.runs {
                let started = Instant::now();
                match client.simple_query(&q.sql).await {
                    Ok(m) => last = m,
                    Err(e) => {
                        failed = Some(describe(e));
                        break;
                    }
                }
                let took = started.elapsed();
                if burn_in > 0 {
                    burn_in -= 1;
                    burnt += took;
                    if budget.is_some_and(|b| burnt * 2 >= b) {
                        burn_in = 0;
                    }
                    continue;
                }
                times.push(took);
                timed += took;
                if budget.is_some_and(|b| timed >= b) && times.len() >= 3 {
                    break;
                }
            }
            if let Some(e) = failed {
                println!("result: label={} query={} failed: {e}", args.label, q.name);
                continue;
            }
            times.sort();
            let median = times[times.len() / 2];
            let upper = q.sql.to_ascii_uppercase();
            let rows = answer(
                &last,
                upper.contains("ORDER BY"),
                upper.starts_with("SELECT *"),
            );
            let bytes: u64 = q
                .scanned
                .iter()
                .map(|(t, b)| rows_of.get(t).copied().unwrap_or(0) * b)
                .sum();
            let rate = if bytes > 0 {
                format!(" gb_per_s={:.1}", bytes as f64 / median.as_secs_f64() / 1e9)
            } else {
                String::new()
            };
            let text = rows.join("\n");
            std::fs::write(args.answers.join(format!("{}.txt", q.name)), &text)
                .map_err(|e| e.to_string())?;
            let check = match &args.reference {
                None => String::new(),
                Some(dir) => match std::fs::read_to_string(dir.join(format!("{}.txt", q.name))) {
                    Ok(reference) if same_answer(&reference, &text) => {
                        matched += 1;
                        " answer=same".into()
                    }
                    Ok(_) => {
                        differed += 1;
                        " answer=DIFFERENT".into()
                    }
                    Err(_) => " answer=unchecked".into(),
                },
            };
            println!(
                "result: label={} query={} median_ms={:.3} rows={}{rate}{check}",
                args.label,
                q.name,
                median.as_secs_f64() * 1e3,
                rows.len()
            );
        }
        if args.reference.is_some() {
            println!("answers: {matched} same, {differed} different");
        }
        Ok::<_, String>(())
    })
}

/// Whether two answers agree: the same rows and values, numbers within a relative 1e-7 of
/// each other (servers add floating-point numbers in different orders, and a value on a
/// rounding boundary prints differently in its last kept digit).
fn same_answer(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            let (x, y): (Vec<&str>, Vec<&str>) = (x.split('|').collect(), y.split('|').collect());
            x.len() == y.len()
                && x.iter().zip(&y).all(|(u, v)| {
                    u == v
                        || matches!((u.parse::<f64>(), v.parse::<f64>()), (Ok(u), Ok(v))
                            if (u - v).abs() <= 1e-7 * u.abs().max(v.abs()))
                })
        })
}

/// This machine's memory read rate: a sum over `bytes` of f64 values, on one thread and on
/// `threads`, the best of several passes.
pub fn membw(bytes: usize, threads: usize) {
    let values: Vec<f64> = (0..bytes / 8).map(|i| (i % 1000) as f64).collect();
    for t in [1, threads] {
        let mut best = Duration::MAX;
        for _ in 0..5 {
            let started = Instant::now();
            let chunk = values.len().div_ceil(t);
            let total: f64 = std::thread::scope(|s| {
                let handles: Vec<_> = values
                    .chunks(chunk)
                    .map(|part| s.spawn(move || sum_lanes(part)))
                    .collect();
                handles.into_iter().map(|h| h.join().expect("sum")).sum()
            });
            std::hint::black_box(total);
            best = best.min(started.elapsed());
        }
        println!(
            "result: membw threads={t} gb_per_s={:.1}",
            bytes as f64 / best.as_secs_f64() / 1e9
        );
    }
}

/// A sum in eight independent lanes, so that it is limited by memory, not by adds.
fn sum_lanes(values: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut chunks = values.chunks_exact(8);
    for c in &mut chunks {
        for l in 0..8 {
            lanes[l] += c[l];
        }
    }
    lanes.iter().sum::<f64>() + chunks.remainder().iter().sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::same_answer;

    #[test]
    fn answers_agree_within_rounding_only() {
        assert!(same_answer("a|1.25\nb|2", "a|1.25\nb|2"));
        assert!(same_answer("t|3.14539062e1", "t|3.14539063e1"));
        assert!(!same_answer("t|3.1453e1", "t|3.1454e1"));
        assert!(!same_answer("a|1", "a|1\nb|2"));
        assert!(!same_answer("a|1", "b|1"));
        assert!(!same_answer("a|NULL", "a|0"));
    }
}
