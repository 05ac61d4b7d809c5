//! `sundial-bench udp`: the UDP overload test after QuestDB's published one. A sender blasts
//! TSBS-cpu-shaped lines over loopback UDP at rising rates; after each rate the rows that
//! arrived are counted over `/exec`, giving the share captured. Works against Sundial and
//! QuestDB (`line.udp.enabled=true`).
//!
//! ```text
//!  pre-built datagrams (untimed) ─▶ send_to, paced per millisecond at --rates lines/s
//!  ─▶ table udp_<rate> ─▶ GET /exec select count(*) until it stops growing ─▶ captured share
//! ```

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct UdpArgs {
    /// The server's ILP/UDP address.
    #[arg(long, default_value = "127.0.0.1:9009")]
    udp_addr: SocketAddr,
    /// The server's HTTP address, for counting rows over `/exec`.
    #[arg(long, default_value = "127.0.0.1:9000")]
    http_addr: SocketAddr,
    /// Lines sent at each rate.
    #[arg(long, default_value_t = 2_000_000)]
    lines: usize,
    /// Target rates in lines per second, comma separated; 0 means as fast as possible.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "100000,250000,500000,1000000,0"
    )]
    rates: Vec<u64>,
    /// Largest datagram payload; lines are packed up to this size.
    #[arg(long, default_value_t = 1400)]
    datagram_bytes: usize,
    /// A name for the `result:` lines.
    #[arg(long, default_value = "server")]
    label: String,
    /// Stop counting once the count has not grown for this long.
    #[arg(long, default_value_t = 3000)]
    settle_ms: u64,
}

pub fn udp(args: UdpArgs) -> Result<(), String> {
    let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("cannot bind: {e}"))?;
    let http = crate::load::HttpClient::new(args.http_addr);
    for (run, &rate) in args.rates.iter().enumerate() {
        let table = format!(
            "udp_{run}_{}",
            if rate == 0 {
                "max".into()
            } else {
                rate.to_string()
            }
        );
        let datagrams = build_datagrams(&table, args.lines, args.datagram_bytes);
        let started = Instant::now();
        send_paced(&socket, args.udp_addr, &datagrams, rate)?;
        let send_s = started.elapsed().as_secs_f64();
        let arrived = settle_count(&http, &table, args.lines as u64, args.settle_ms);
        let share = arrived as f64 / args.lines as f64;
        println!(
            "result: label={} target_lines_per_s={rate} sent_lines_per_s={:.0} lines={} arrived={arrived} captured_pct={:.2}",
            args.label,
            args.lines as f64 / send_s,
            args.lines,
            share * 100.0
        );
    }
    Ok(())
}

/// Lines like TSBS's cpu rows (10 tags, 10 integer fields, 10 s apart per host), packed into
/// datagrams of at most `datagram_bytes`.
fn build_datagrams(table: &str, lines: usize, datagram_bytes: usize) -> Vec<Vec<u8>> {
    let mut datagrams = Vec::new();
    let mut current = Vec::with_capacity(datagram_bytes);
    let mut line = String::with_capacity(512);
    let start_ns: i64 = 1_451_606_400_000_000_000;
    for i in 0..lines {
        line.clear();
        let host = i % 100;
        let ts = start_ns + (i / 100) as i64 * 10_000_000_000;
        use std::fmt::Write;
        let _ = writeln!(
            line,
            "{table},hostname=host_{host},region=eu-west-1,datacenter=eu-west-1a,rack={r},os=Ubuntu16.04LTS,\
             arch=x64,team=SF,service={s},service_version=0,service_environment=production \
             usage_user={a}i,usage_system={b}i,usage_idle={c}i,usage_nice={d}i,usage_iowait={e}i,\
             usage_irq={f}i,usage_softirq={g}i,usage_steal={h}i,usage_guest={j}i,usage_guest_nice={k}i {ts}",
            r = host % 97,
            s = host % 19,
            a = i % 100,
            b = (i * 7) % 100,
            c = (i * 13) % 100,
            d = (i * 17) % 100,
            e = (i * 19) % 100,
            f = (i * 23) % 100,
            g = (i * 29) % 100,
            h = (i * 31) % 100,
            j = (i * 37) % 100,
            k = (i * 41) % 100,
        );
        if !current.is_empty() && current.len() + line.len() > datagram_bytes {
            datagrams.push(std::mem::replace(
                &mut current,
                Vec::with_capacity(datagram_bytes),
            ));
        }
        current.extend_from_slice(line.as_bytes());
    }
    if !current.is_empty() {
        datagrams.push(current);
    }
    datagrams
}

/// Sends every datagram, keeping to `rate` lines per second (0: no pacing) in 1 ms steps.
fn send_paced(
    socket: &UdpSocket,
    to: SocketAddr,
    datagrams: &[Vec<u8>],
    rate: u64,
) -> Result<(), String> {
    let lines_per_datagram = |d: &Vec<u8>| d.iter().filter(|b| **b == b'\n').count() as u64;
    let started = Instant::now();
    let mut lines_sent = 0u64;
    for datagram in datagrams {
        if rate > 0 {
            // Ahead of schedule: wait until the clock catches up.
            let due = Duration::from_secs_f64(lines_sent as f64 / rate as f64);
            let elapsed = started.elapsed();
            if due > elapsed + Duration::from_millis(1) {
                std::thread::sleep(due - elapsed);
            }
        }
        // A full socket buffer on the sending side is not loss: retry.
        loop {
            match socket.send_to(datagram, to) {
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) if e.raw_os_error() == Some(105) => continue, // ENOBUFS
                Err(e) => return Err(format!("send to {to} failed: {e}")),
            }
        }
        lines_sent += lines_per_datagram(datagram);
    }
    Ok(())
}

/// Polls the row count until it reaches `expected` or stops growing for `settle_ms`.
fn settle_count(http: &crate::load::HttpClient, table: &str, expected: u64, settle_ms: u64) -> u64 {
    let mut last = 0;
    let mut last_change = Instant::now();
    loop {
        let now = http.count(table).unwrap_or(0);
        if now >= expected {
            return now;
        }
        if now != last {
            last = now;
            last_change = Instant::now();
        } else if last_change.elapsed() > Duration::from_millis(settle_ms) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
