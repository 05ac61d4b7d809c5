//! `sundial-bench load`: sends an ILP file to a server over TCP or HTTP with N workers, in the
//! manner of TSBS's `tsbs_load_questdb`, then waits until every row is queryable. Works against
//! any server speaking ILP and QuestDB's `/exec` (Sundial, QuestDB).
//!
//! ```text
//!  file (.ilp | .zst) ─▶ memory ─▶ batches of --batch-lines ─▶ worker 1..N ─▶ TCP / POST /write
//!                                                   (timed: rows/s, metrics/s)
//!  then: GET /exec?query=select count(*) from T, until every table has its rows (timed)
//!  then: the server's CPU seconds and peak RSS (/proc/PID), bytes under its data directory
//! ```

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sundial_ilp::{LineParser, LineSpan, split_complete};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Tcp,
    Http,
}

#[derive(clap::Args, Debug)]
pub struct LoadArgs {
    /// ILP file: plain, or zstd-compressed (by its magic number).
    #[arg(long)]
    file: PathBuf,
    #[arg(long, value_enum, default_value_t = Protocol::Tcp)]
    protocol: Protocol,
    /// The server's ILP/TCP listener.
    #[arg(long, default_value = "127.0.0.1:9009")]
    ilp_addr: SocketAddr,
    /// The server's HTTP listener (`/write` and `/exec`).
    #[arg(long, default_value = "127.0.0.1:9000")]
    http_addr: SocketAddr,
    /// Concurrent senders, each with its own connection.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Lines per batch (one write on TCP, one request on HTTP).
    #[arg(long, default_value_t = 10_000)]
    batch_lines: usize,
    /// The server's process id, for its CPU time and peak memory.
    #[arg(long)]
    server_pid: Option<u32>,
    /// The server's data directory, for its size on disk.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Give up waiting for the rows to become queryable after this long.
    #[arg(long, default_value_t = 300)]
    queryable_timeout_s: u64,
    /// A name for the `result:` line (e.g. the server's).
    #[arg(long, default_value = "server")]
    label: String,
}

/// The file, cut into batches, with what it holds.
struct Workload {
    data: Vec<u8>,
    /// Byte ranges of the batches, each ending after a newline.
    batches: Vec<std::ops::Range<usize>>,
    rows_by_table: BTreeMap<String, u64>,
    rows: u64,
    metrics: u64,
}

pub fn load(args: LoadArgs) -> Result<(), String> {
    let started = Instant::now();
    let workload = read_workload(&args.file, args.batch_lines)?;
    eprintln!(
        "read {}: {} rows, {} metrics, {} tables, {} batches in {:.1} s",
        args.file.display(),
        workload.rows,
        workload.metrics,
        workload.rows_by_table.len(),
        workload.batches.len(),
        started.elapsed().as_secs_f64()
    );
    let per_table: Vec<String> = workload
        .rows_by_table
        .iter()
        .map(|(t, n)| format!("{t}={n}"))
        .collect();
    eprintln!("rows per table: {}", per_table.join(" "));
    let http = HttpClient::new(args.http_addr);
    let mut expected = BTreeMap::new();
    for (table, rows) in &workload.rows_by_table {
        expected.insert(table.clone(), http.count(table).unwrap_or(0) + rows);
    }
    let cpu_before = args.server_pid.map(process_cpu_s).transpose()?;

    let send_started = Instant::now();
    send_all(&args, &workload)?;
    let send_s = send_started.elapsed().as_secs_f64();
    let rows_per_s = workload.rows as f64 / send_s;
    eprintln!(
        "sent in {send_s:.2} s: {:.0} rows/s, {:.0} metrics/s",
        rows_per_s,
        workload.metrics as f64 / send_s
    );

    let queryable_s = wait_queryable(&http, &expected, args.queryable_timeout_s)?;
    let total_s = send_started.elapsed().as_secs_f64();
    eprintln!(
        "all rows queryable {queryable_s:.2} s after the last was sent ({:.0} rows/s end to end)",
        workload.rows as f64 / total_s
    );

    let mut result = format!(
        "result: label={} file={} protocol={:?} workers={} batch_lines={} rows={} send_s={send_s:.3} \
         rows_per_s={rows_per_s:.0} queryable_s={queryable_s:.3} end_to_end_rows_per_s={:.0}",
        args.label,
        args.file.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned()),
        args.protocol,
        args.workers,
        args.batch_lines,
        workload.rows,
        workload.rows as f64 / total_s
    )
    .to_lowercase();
    if let (Some(pid), Some(before)) = (args.server_pid, cpu_before) {
        let cpu_s = process_cpu_s(pid)? - before;
        let rss_kib = peak_rss_kib(pid)?;
        result.push_str(&format!(
            " server_cpu_s={cpu_s:.2} cpu_us_per_row={:.3} server_peak_rss_mib={:.0}",
            cpu_s * 1e6 / workload.rows as f64,
            rss_kib as f64 / 1024.0
        ));
    }
    if let Some(dir) = &args.data_dir {
        result.push_str(&format!(
            " disk_mib={:.1}",
            dir_bytes(dir) as f64 / (1 << 20) as f64
        ));
    }
    println!("{result}");
    Ok(())
}

fn read_workload(path: &Path, batch_lines: usize) -> Result<Workload, String> {
    let raw = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let data = if raw.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        zstd::stream::decode_all(&raw[..]).map_err(|e| format!("bad zstd data: {e}"))?
    } else {
        raw
    };
    let mut parser = LineParser::new(usize::MAX);
    let mut rows_by_table: BTreeMap<String, u64> = BTreeMap::new();
    let mut batches = Vec::new();
    let (mut rows, mut metrics, mut in_batch, mut batch_start) = (0u64, 0u64, 0usize, 0usize);
    let mut bad = 0u64;
    split_complete(&data, usize::MAX, |span| {
        let LineSpan::Line(range) = span else {
            bad += 1;
            return;
        };
        let mut end = range.end;
        match parser.parse_line(&data[range]) {
            Ok(line) => {
                rows += 1;
                metrics += line.field_count() as u64;
                let table = line.measurement().to_cow();
                match rows_by_table.get_mut(table.as_ref()) {
                    Some(n) => *n += 1,
                    None => {
                        rows_by_table.insert(table.into_owned(), 1);
                    }
                }
            }
            Err(_) => bad += 1,
        }
        in_batch += 1;
        if in_batch == batch_lines {
            while end < data.len() && data[end] != b'\n' {
                end += 1;
            }
            let cut = (end + 1).min(data.len());
            batches.push(batch_start..cut);
            batch_start = cut;
            in_batch = 0;
        }
    });
    if batch_start < data.len() {
        batches.push(batch_start..data.len());
    }
    if bad > 0 {
        return Err(format!("{bad} malformed line(s) in {}", path.display()));
    }
    Ok(Workload {
        data,
        batches,
        rows_by_table,
        rows,
        metrics,
    })
}

/// Sends every batch, workers taking the next one in file order.
fn send_all(args: &LoadArgs, workload: &Workload) -> Result<(), String> {
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..args.workers.max(1))
            .map(|_| scope.spawn(|| send_batches(args, workload, &next)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err("a worker panicked".into())))
            .collect::<Result<Vec<()>, String>>()
    })?;
    Ok(())
}

fn send_batches(args: &LoadArgs, workload: &Workload, next: &AtomicUsize) -> Result<(), String> {
    let mut tcp = match args.protocol {
        Protocol::Tcp => Some(
            TcpStream::connect(args.ilp_addr)
                .map_err(|e| format!("cannot connect to {}: {e}", args.ilp_addr))?,
        ),
        Protocol::Http => None,
    };
    let http = HttpClient::new(args.http_addr);
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(range) = workload.batches.get(i) else {
            break;
        };
        let batch = &workload.data[range.clone()];
        match tcp.as_mut() {
            Some(stream) => stream
                .write_all(batch)
                .map_err(|e| format!("ILP/TCP send failed: {e}"))?,
            None => http.write(batch)?,
        }
    }
    if let Some(stream) = tcp {
        // Wait for the server to close its side: everything sent has then been read.
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let _ = (&stream).read(&mut [0u8; 1]);
    }
    Ok(())
}

/// Polls row counts until every table has exactly its expected rows; returns the wait.
fn wait_queryable(
    http: &HttpClient,
    expected: &BTreeMap<String, u64>,
    timeout_s: u64,
) -> Result<f64, String> {
    let started = Instant::now();
    loop {
        let mut behind = Vec::new();
        for (table, rows) in expected {
            let have = http.count(table).unwrap_or(0);
            if have > *rows {
                return Err(format!(
                    "{table} has {have} rows, more than the {rows} expected"
                ));
            }
            if have < *rows {
                behind.push(format!("{table}: {have} of {rows}"));
            }
        }
        if behind.is_empty() {
            return Ok(started.elapsed().as_secs_f64());
        }
        if started.elapsed() > Duration::from_secs(timeout_s) {
            return Err(format!(
                "rows not queryable after {timeout_s} s: {}",
                behind.join(", ")
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) struct HttpClient {
    agent: ureq::Agent,
    base: String,
}

impl HttpClient {
    pub(crate) fn new(addr: SocketAddr) -> HttpClient {
        // Timeouts per phase, never a global one: with any timeout covering name resolution,
        // ureq resolves on a new thread for every request, which would add a thread's start
        // to every measured query.
        let timeout = Some(Duration::from_secs(600));
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(timeout)
            .timeout_send_request(timeout)
            .timeout_send_body(timeout)
            .timeout_recv_response(timeout)
            .timeout_recv_body(timeout)
            .build();
        HttpClient {
            agent: config.into(),
            base: format!("http://{addr}"),
        }
    }

    fn write(&self, batch: &[u8]) -> Result<(), String> {
        let mut response = self
            .agent
            .post(format!("{}/write?precision=n", self.base))
            .header("Content-Type", "text/plain; charset=utf-8")
            .send(batch)
            .map_err(|e| format!("POST /write failed: {e}"))?;
        if response.status().as_u16() != 204 {
            let body = response.body_mut().read_to_string().unwrap_or_default();
            return Err(format!(
                "POST /write answered {}: {body}",
                response.status()
            ));
        }
        Ok(())
    }

    /// Runs a query with `/exec`, reading (and discarding) the whole answer.
    pub(crate) fn exec(&self, sql: &str) -> Result<(), String> {
        self.exec_with(sql, &[])
    }

    /// [`HttpClient::exec`] with more URL parameters (`count=false` ...).
    pub(crate) fn exec_with(&self, sql: &str, params: &[(&str, &str)]) -> Result<(), String> {
        let mut response = self
            .agent
            .get(format!("{}/exec", self.base))
            .query("query", sql)
            .query_pairs(params.iter().copied())
            .call()
            .map_err(|e| format!("GET /exec failed: {e}"))?;
        let body = response
            .body_mut()
            .read_to_vec()
            .map_err(|e| format!("reading /exec's answer: {e}"))?;
        if response.status().as_u16() != 200 {
            return Err(format!(
                "/exec answered {}: {}",
                response.status(),
                String::from_utf8_lossy(&body)
            ));
        }
        Ok(())
    }

    /// `select count(*)` of a table, or `None` when the query fails (no such table yet).
    pub(crate) fn count(&self, table: &str) -> Option<u64> {
        let query = format!("select count(*) from \"{table}\"");
        let mut response = self
            .agent
            .get(format!("{}/exec", self.base))
            .query("query", &query)
            .call()
            .ok()?;
        if response.status().as_u16() != 200 {
            return None;
        }
        let body: serde_json::Value = response.body_mut().read_json().ok()?;
        body.get("dataset")?.get(0)?.get(0)?.as_u64()
    }
}

/// User plus system CPU time of a process, in seconds.
pub fn process_cpu_s(pid: u32) -> Result<f64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("cannot read /proc/{pid}/stat: {e}"))?;
    // Fields after the command name, which is parenthesised and may hold spaces.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the whole line, 12th and 13th after the name,
    // in clock ticks of 1/100 s (USER_HZ on Linux).
    let clock_ticks = 100.0;
    Ok((ticks(11) + ticks(12)) as f64 / clock_ticks)
}

/// Peak resident memory of a process (VmHWM), in KiB.
pub fn peak_rss_kib(pid: u32) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("cannot read /proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("no VmHWM in /proc/{pid}/status"))
}

/// Bytes allocated on disk to the files under a directory (sparse regions not counted).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.blocks() * 512),
            _ => 0,
        })
        .sum()
}
