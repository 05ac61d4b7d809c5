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
//! With `--peer-addr`, two servers run side by side: they take turns query by query (which
//! goes first alternating), each running its runs back to back and then pausing while the
//! other runs; answers go to `DIR/<label>/`, and a `pair:` line gives the ratio of the
//! medians. On a noisy machine this is the comparison to trust: one server's whole battery
//! after the other's sees another machine. Turns run by run would not be fair either: a
//! server whose threads spin after a query (QuestDB's do for some 20 ms) slows the other's
//! next run, and a pause between runs measures threads woken from idle instead.
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
    /// A second server run side by side: the two take turns query by query, so drift in the
    /// machine's speed slows both alike; a `pair:` line gives the ratio of this server's
    /// median to the peer's, and the peer's answer is the reference.
    #[arg(long)]
    peer_addr: Option<std::net::SocketAddr>,
    /// The peer's label (with `--peer-addr`).
    #[arg(long)]
    peer_label: Option<String>,
    /// With a peer, the pause after each server's runs of a query (ms), so that neither
    /// server's lingering work slows the other's: QuestDB's workers keep both cores busy for
    /// some 20 ms after each query before they park.
    #[arg(long, default_value_t = 100)]
    pause_ms: u64,
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

/// One server the battery runs against: its connection, the row counts of the tables its
/// queries scan, and where its answers go.
struct Server {
    label: String,
    client: tokio_postgres::Client,
    rows_of: HashMap<String, u64>,
    answers: PathBuf,
}

impl Server {
    async fn connect(
        addr: std::net::SocketAddr,
        args: &AnalyticsArgs,
        label: &str,
        answers: PathBuf,
    ) -> Result<Server, String> {
        let config = pg_config(addr, &args.user, &args.password);
        let (client, connection) = tokio_postgres::connect(&config, NoTls)
            .await
            .map_err(describe)?;
        tokio::spawn(connection);
        std::fs::create_dir_all(&answers).map_err(|e| e.to_string())?;
        Ok(Server {
            label: label.to_string(),
            client,
            rows_of: HashMap::new(),
            answers,
        })
    }

    /// Bytes a full scan of `q`'s columns reads on this server.
    async fn scanned_bytes(&mut self, q: &Query) -> Result<u64, String> {
        let mut bytes = 0;
        for (table, per_row) in &q.scanned {
            if !self.rows_of.contains_key(table) {
                let m = self
                    .client
                    .simple_query(&format!("SELECT count(*) FROM {table}"))
                    .await
                    .map_err(describe)?;
                let n = answer(&m, true, false)
                    .first()
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(0);
                self.rows_of.insert(table.clone(), n);
            }
            bytes += self.rows_of[table] * per_row;
        }
        Ok(bytes)
    }
}

/// One query's runs on one server: burn-in, then timed runs until `runs` or the budget.
struct Runs {
    times: Vec<Duration>,
    last: Vec<SimpleQueryMessage>,
    failed: Option<String>,
    burn_in: usize,
    burnt: Duration,
    timed: Duration,
    done: bool,
}

impl Runs {
    fn new(burn_in: usize, runs: usize) -> Runs {
        Runs {
            times: Vec::with_capacity(runs),
            last: Vec::new(),
            failed: None,
            burn_in,
            burnt: Duration::ZERO,
            timed: Duration::ZERO,
            done: runs == 0,
        }
    }

    /// Runs `sql` once on `client` and records it.
    async fn step(
        &mut self,
        client: &tokio_postgres::Client,
        sql: &str,
        runs: usize,
        budget: Option<Duration>,
    ) {
        let started = Instant::now();
        match client.simple_query(sql).await {
            Ok(m) => self.last = m,
            Err(e) => {
                self.failed = Some(describe(e));
                self.done = true;
                return;
            }
        }
        let took = started.elapsed();
        if self.burn_in > 0 {
            self.burn_in -= 1;
            self.burnt += took;
            if budget.is_some_and(|b| self.burnt * 2 >= b) {
                self.burn_in = 0;
            }
            return;
        }
        self.times.push(took);
        self.timed += took;
        self.done = self.times.len() >= runs
            || (budget.is_some_and(|b| self.timed >= b) && self.times.len() >= 3);
    }

    fn median(&mut self) -> Duration {
        self.times.sort();
        self.times[self.times.len() / 2]
    }
}

pub fn run(args: AnalyticsArgs) -> Result<(), String> {
    let queries = parse(&std::fs::read_to_string(&args.queries).map_err(|e| e.to_string())?)?;
    if args.peer_addr.is_some() != args.peer_label.is_some() {
        return Err("--peer-addr and --peer-label go together".into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        // Alone, answers go straight into `answers`; with a peer, into one directory per label.
        let mut servers = Vec::with_capacity(2);
        match (args.peer_addr, &args.peer_label) {
            (Some(peer), Some(peer_label)) => {
                let own = args.answers.join(&args.label);
                servers.push(Server::connect(args.pg_addr, &args, &args.label, own).await?);
                let theirs = args.answers.join(peer_label);
                servers.push(Server::connect(peer, &args, peer_label, theirs).await?);
            }
            _ => {
                let own = args.answers.clone();
                servers.push(Server::connect(args.pg_addr, &args, &args.label, own).await?);
            }
        }
        let budget = (args.budget_ms > 0).then(|| Duration::from_millis(args.budget_ms));
        let (mut matched, mut differed) = (0, 0);
        for (index, q) in queries.iter().enumerate() {
            let mut runs: Vec<Runs> = servers
                .iter()
                .map(|_| Runs::new(args.burn_in, args.runs))
                .collect();
            // The servers take turns query by query, the first alternating, each running its
            // runs back to back (as a client repeating a query would), then pausing.
            let first = index % servers.len();
            for k in 0..servers.len() {
                let i = (k + first) % servers.len();
                while !runs[i].done {
                    runs[i]
                        .step(&servers[i].client, &q.sql, args.runs, budget)
                        .await;
                }
                if servers.len() > 1 {
                    tokio::time::sleep(Duration::from_millis(args.pause_ms)).await;
                }
            }
            let upper = q.sql.to_ascii_uppercase();
            let mut texts = Vec::with_capacity(servers.len());
            let mut medians = Vec::with_capacity(servers.len());
            for (server, r) in servers.iter_mut().zip(&mut runs) {
                if let Some(e) = &r.failed {
                    println!(
                        "result: label={} query={} failed: {e}",
                        server.label, q.name
                    );
                    texts.push(None);
                    medians.push(None);
                    continue;
                }
                let median = r.median();
                let rows = answer(
                    &r.last,
                    upper.contains("ORDER BY"),
                    upper.starts_with("SELECT *"),
                );
                let bytes = server.scanned_bytes(q).await?;
                let rate = if bytes > 0 {
                    format!(" gb_per_s={:.1}", bytes as f64 / median.as_secs_f64() / 1e9)
                } else {
                    String::new()
                };
                let text = rows.join("\n");
                std::fs::write(server.answers.join(format!("{}.txt", q.name)), &text)
                    .map_err(|e| e.to_string())?;
                // The first server's answer is checked against the reference directory, or
                // else against the peer's answer of this run.
                let reference = match (&args.reference, texts.is_empty()) {
                    (Some(dir), true) => {
                        Some(std::fs::read_to_string(dir.join(format!("{}.txt", q.name))).ok())
                    }
                    _ => None,
                };
                let check = match reference {
                    None => String::new(),
                    Some(Some(reference)) if same_answer(&reference, &text) => {
                        matched += 1;
                        " answer=same".into()
                    }
                    Some(Some(_)) => {
                        differed += 1;
                        " answer=DIFFERENT".into()
                    }
                    Some(None) => " answer=unchecked".into(),
                };
                println!(
                    "result: label={} query={} median_ms={:.3} rows={}{rate}{check}",
                    server.label,
                    q.name,
                    median.as_secs_f64() * 1e3,
                    rows.len()
                );
                texts.push(Some(text));
                medians.push(Some(median));
            }
            if let ([Some(own), Some(theirs)], [Some(a), Some(b)]) =
                (texts.as_slice(), medians.as_slice())
            {
                let agree = if same_answer(theirs, own) {
                    if args.reference.is_none() {
                        matched += 1;
                    }
                    "same"
                } else {
                    if args.reference.is_none() {
                        differed += 1;
                    }
                    "DIFFERENT"
                };
                println!(
                    "pair: query={} {}_ms={:.3} {}_ms={:.3} ratio={:.3} answer={agree}",
                    q.name,
                    servers[0].label,
                    a.as_secs_f64() * 1e3,
                    servers[1].label,
                    b.as_secs_f64() * 1e3,
                    a.as_secs_f64() / b.as_secs_f64()
                );
            }
        }
        if args.reference.is_some() || servers.len() > 1 {
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
