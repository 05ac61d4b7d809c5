//! What all of a server's queries may use together: memory (`--memory-bytes-max`) and spill
//! space (`--spill-dir`, `--spill-bytes-max`).
//!
//! ```text
//!  --memory-bytes-max  ─▶ one ServerMemory every query's pool also reserves from
//!     default: half of min(MemTotal of /proc/meminfo, the cgroup's memory.max)
//!  --spill-dir         ─▶ one disk manager: DataFusion's datafusion-* directories, under
//!     default: <data-dir>/.spill       at most --spill-bytes-max bytes at once
//! ```
//!
//! The default leaves the other half to what queries do not reserve (the mapped files' page
//! cache, ingestion buffers, connections, allocator slack). A database in a container sees the
//! host's memory in /proc/meminfo; its cgroup's limit (v2 `memory.max`, v1
//! `memory.limit_in_bytes`, the lowest on the path from its cgroup to the root) is what it may
//! really use.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sundial_query::{Engine, ServerMemory, spill_disk_manager};

/// The spill directory inside the data directory, unless `--spill-dir` says.
pub const SPILL_DIR: &str = ".spill";

/// Bounds `engine`'s queries together: `memory_bytes_max` (None: the default, 0: no bound),
/// spilling into `spill_dir` (None: `<data_dir>/.spill`) at most `spill_bytes_max` bytes.
pub fn bound_queries(
    engine: &mut Engine,
    memory_bytes_max: Option<usize>,
    spill_dir: Option<&Path>,
    spill_bytes_max: u64,
    data_dir: &Path,
) -> Result<(), String> {
    let memory_bytes_max = memory_bytes_max.unwrap_or_else(default_memory_bytes_max);
    engine.set_server_memory(Arc::new(ServerMemory::new(memory_bytes_max)));
    sundial_metrics::metrics()
        .memory_bytes_max
        .set(i64::try_from(memory_bytes_max).unwrap_or(i64::MAX));
    let spill_dir = spill_dir.map_or_else(|| data_dir.join(SPILL_DIR), Path::to_path_buf);
    let disk = spill_disk_manager(&spill_dir, spill_bytes_max)
        .map_err(|e| format!("spill directory {} (--spill-dir): {e}", spill_dir.display()))?;
    engine.set_spill(disk);
    tracing::info!(
        "queries may hold {} of memory together (--memory-bytes-max) and spill up to {} \
         bytes into {}",
        match memory_bytes_max {
            0 => "any amount".to_string(),
            bytes => format!("{bytes} bytes"),
        },
        spill_bytes_max,
        spill_dir.display()
    );
    Ok(())
}

/// Half of what the process may use: physical memory, or its cgroup's limit when lower; 0 (no
/// bound) when neither can be read.
fn default_memory_bytes_max() -> usize {
    let physical = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total_bytes(&text));
    let usable = match (physical, cgroup_limit_bytes()) {
        (Some(p), Some(c)) => p.min(c),
        (p, c) => p.or(c).unwrap_or(0),
    };
    usize::try_from(usable / 2).unwrap_or(usize::MAX)
}

/// `MemTotal` of /proc/meminfo, in bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The lowest memory limit on the path from this process's cgroup to the root.
fn cgroup_limit_bytes() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    limit_on_paths(&cgroups, Path::new("/sys/fs/cgroup"), |file| {
        std::fs::read_to_string(file).ok()
    })
}

/// The lowest limit over the cgroups `/proc/self/cgroup` lists (`0::/path` for v2,
/// `N:...memory...:/path` for v1's memory controller) and their ancestors, reading each
/// limit file through `read`.
fn limit_on_paths(
    cgroups: &str,
    mount: &Path,
    read: impl Fn(&Path) -> Option<String>,
) -> Option<u64> {
    let mut lowest: Option<u64> = None;
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (root, file): (PathBuf, &str) = if controllers.is_empty() {
            (mount.to_path_buf(), "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            (mount.join("memory"), "memory.limit_in_bytes")
        } else {
            continue;
        };
        let mut dir = root.join(path.trim_start_matches('/'));
        loop {
            if let Some(limit) = read(&dir.join(file)).as_deref().and_then(parse_limit) {
                lowest = Some(lowest.map_or(limit, |l| l.min(limit)));
            }
            if dir == root || !dir.pop() {
                break;
            }
        }
    }
    lowest
}

/// A limit file's value: `max` (v2) and v1's "no limit" (a page-rounded `i64::MAX`) are none.
fn parse_limit(text: &str) -> Option<u64> {
    let bytes: u64 = text.trim().parse().ok()?;
    (bytes < 1 << 62).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn physical_memory_is_read_from_meminfo() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total_bytes(meminfo), Some(24_576_000 * 1024));
        assert_eq!(mem_total_bytes("MemFree: 1 kB\n"), None);
    }

    /// The lowest limit from the process's cgroup up wins; `max` and v1's unlimited are none.
    #[test]
    fn the_lowest_cgroup_limit_on_the_path_counts() {
        let files = |file: &Path| -> Option<String> {
            match file.to_str()? {
                "/cg/a/b/memory.max" => Some("max\n".into()),
                "/cg/a/memory.max" => Some("1073741824\n".into()),
                "/cg/memory/x/memory.limit_in_bytes" => Some("9223372036854771712\n".into()),
                "/cg/memory/memory.limit_in_bytes" => Some("2147483648\n".into()),
                _ => None,
            }
        };
        let v2 = "0::/a/b\n";
        assert_eq!(limit_on_paths(v2, Path::new("/cg"), files), Some(1 << 30));
        let v1 = "12:cpu,cpuacct:/x\n4:memory:/x\n";
        assert_eq!(limit_on_paths(v1, Path::new("/cg"), files), Some(2 << 30));
        assert_eq!(limit_on_paths("0::/\n", Path::new("/cg"), files), None);
    }
}
