//! Cold partitions in an object store: an S3-compatible bucket (`s3://bucket/prefix`), or a
//! directory (`file:///path`, for a NAS or tests), through the `object_store` crate.
//!
//! ```text
//!   convert to Parquet ─▶ <part dir>/data.parquet (local, fsynced)
//!       ─upload─▶ <prefix>/<table name>-<id>/<partition>.<version>/data.parquet
//!   commit: the part is Parquet, remote
//!   read ─▶ local copy present? ─no─▶ download ─▶ <part dir>/data.parquet ─▶ mmap
//!   local copies: at most `cache_bytes`, least recently opened deleted first
//! ```
//!
//! * An object's key mirrors its local path under the data directory: the table (its name at
//!   creation, other characters than letters, digits and `_` as `_`, and its id, never reused),
//!   partition and version, `data.parquet`. Objects are written once and never changed: a new
//!   version is a new key.
//! * The part's local directory stays (its zone files are small and always local); only the
//!   Parquet file comes and goes. A local copy is whole: downloads land in a temporary name and
//!   are renamed, and a copy whose length differs from the committed one is fetched again.
//! * Local copies of remote parts are bounded in bytes. Evicting one deletes the file and closes
//!   its mapping once the reads using it finish; the next read downloads it again.
//! * Calls run on the store's own small runtime and the caller waits for them, so they may be
//!   made from any thread, including a query runtime's. Each call is bounded in time (connect
//!   timeout, request timeout, a few retries): an unreachable store fails the reads of remote
//!   parts and the conversions with an error naming the store, and nothing else.
//! * Objects no transaction names (a crash between an upload and its commit, a replaced version
//!   whose delete failed, a dropped table) are deleted by [`ColdStore::remove_orphans`], which
//!   the database runs in the background when it opens.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::io::AsyncWriteExt;

use crate::error::{IoContext, Result, StorageError};
use crate::parquet_read::OpenedParquet;

/// Where cold partitions go, and how much of them is kept locally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColdStoreOptions {
    /// `s3://bucket[/prefix]` or `file:///absolute/path`.
    pub url: String,
    /// Settings of the S3 client, by `object_store`'s names (`aws_endpoint`,
    /// `aws_access_key_id`, `aws_region`, `aws_allow_http`, ...); the `AWS_*` environment
    /// variables are read too.
    pub settings: Vec<(String, String)>,
    /// Local copies of remote Parquet files kept at most, in bytes.
    pub cache_bytes: u64,
}

/// Bytes read from or written to the store at a time.
const TRANSFER_CHUNK_BYTES: usize = 8 << 20;

/// An open cold store (see the module docs).
pub(crate) struct ColdStore {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    url: String,
    /// Taken only by `drop`.
    runtime: Option<tokio::runtime::Runtime>,
    copies: Mutex<LocalCopies>,
    cache_bytes: u64,
}

impl std::fmt::Debug for ColdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColdStore").field("url", &self.url).finish()
    }
}

/// The local copies of remote files, least recently opened first out.
#[derive(Default)]
struct LocalCopies {
    /// Path to (bytes, last use, the mapping opened from it).
    entries: HashMap<PathBuf, (u64, u64, Weak<OpenedParquet>)>,
    bytes: u64,
    tick: u64,
}

impl ColdStore {
    pub fn open(options: &ColdStoreOptions) -> Result<Arc<ColdStore>> {
        let url = options.url.trim_end_matches('/').to_string();
        let bad = |m: String| StorageError::InvalidInput(format!("cold store '{url}': {m}"));
        let (store, prefix): (Arc<dyn ObjectStore>, ObjectPath) =
            if let Some(rest) = url.strip_prefix("s3://") {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(bad("no bucket: expected s3://bucket/prefix".into()));
                }
                let mut builder = object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_retry(object_store::RetryConfig {
                        max_retries: 2,
                        retry_timeout: Duration::from_secs(15),
                        ..Default::default()
                    })
                    .with_client_options(
                        object_store::ClientOptions::new()
                            .with_connect_timeout(Duration::from_secs(5))
                            .with_timeout(Duration::from_secs(120)),
                    );
                for (key, value) in &options.settings {
                    let key = key
                        .parse::<object_store::aws::AmazonS3ConfigKey>()
                        .map_err(|e| bad(format!("setting '{key}': {e}")))?;
                    builder = builder.with_config(key, value);
                }
                let store = builder.build().map_err(|e| bad(e.to_string()))?;
                (Arc::new(store), ObjectPath::from(prefix))
            } else if let Some(dir) = url.strip_prefix("file://") {
                if !dir.starts_with('/') {
                    return Err(bad("expected an absolute path: file:///path".into()));
                }
                std::fs::create_dir_all(dir).at(Path::new(dir))?;
                let store = object_store::local::LocalFileSystem::new_with_prefix(dir)
                    .map_err(|e| bad(e.to_string()))?;
                (Arc::new(store), ObjectPath::default())
            } else {
                return Err(bad(
                    "unsupported scheme: expected s3://bucket/prefix or file:///path".into(),
                ));
            };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sundial-cold-io")
            .enable_all()
            .build()
            .map_err(|e| StorageError::io("cold store runtime", e))?;
        Ok(Arc::new(ColdStore {
            store,
            prefix,
            url,
            runtime: Some(runtime),
            copies: Mutex::new(LocalCopies::default()),
            cache_bytes: options.cache_bytes,
        }))
    }

    /// Runs `work` on the store's runtime.
    fn spawn(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        if let Some(runtime) = &self.runtime {
            runtime.spawn(work);
        }
    }

    fn error(&self, what: &str, key: &ObjectPath, e: impl std::fmt::Display) -> StorageError {
        StorageError::ColdStore {
            url: self.url.clone(),
            message: format!("{what} {key}: {e}"),
        }
    }

    /// The key of a part's file: `<prefix>/<table>/<part dir>/data.parquet`.
    pub fn key(&self, table_dir: &str, part_dir: &str) -> ObjectPath {
        let mut key = self.prefix.clone();
        for part in [table_dir, part_dir, crate::parquet_read::PARQUET_FILE] {
            key = key.join(part);
        }
        key
    }

    /// Where the store keeps `key`, for people: `s3://bucket/prefix/...`.
    pub fn location(&self, key: &ObjectPath) -> String {
        let base = self.url.split('/').take(3).collect::<Vec<_>>().join("/");
        format!("{base}/{key}")
    }

    /// Uploads the local file `local` as `key`, in parts for a large one.
    pub fn upload(&self, local: &Path, key: &ObjectPath) -> Result<()> {
        let mut file = std::fs::File::open(local).at(local)?;
        let store = self.store.clone();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(2);
        let target = key.clone();
        let (done_tx, done_rx) = std::sync::mpsc::sync_channel(1);
        self.spawn(async move {
            let mut out = object_store::buffered::BufWriter::with_capacity(
                store,
                target,
                TRANSFER_CHUNK_BYTES,
            );
            let mut result = Ok(());
            while let Some(chunk) = rx.recv().await {
                if let Err(e) = out.write_all(&chunk).await {
                    result = Err(e);
                    break;
                }
            }
            let result = match result {
                Ok(()) => out.shutdown().await,
                Err(e) => {
                    let _ = out.abort().await;
                    Err(e)
                }
            };
            let _ = done_tx.send(result);
        });
        let mut buffer = vec![0u8; TRANSFER_CHUNK_BYTES];
        loop {
            let n = file.read(&mut buffer).at(local)?;
            if n == 0 || tx.blocking_send(buffer[..n].to_vec()).is_err() {
                break;
            }
        }
        drop(tx);
        done_rx
            .recv()
            .map_err(|_| StorageError::Internal("a cold store upload was dropped".into()))?
            .map_err(|e| self.error("uploading", key, e))
    }

    /// Downloads `key` into `local` (through a temporary name), which must then hold
    /// `file_bytes` bytes.
    pub fn download(&self, key: &ObjectPath, local: &Path, file_bytes: u64) -> Result<()> {
        let store = self.store.clone();
        let source = key.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel::<object_store::Result<bytes::Bytes>>(2);
        self.spawn(async move {
            match store.get(&source).await {
                Ok(got) => {
                    let mut stream = got.into_stream();
                    while let Some(chunk) = stream.next().await {
                        let failed = chunk.is_err();
                        if tx.send(chunk).is_err() || failed {
                            return;
                        }
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        });
        let partial = local.with_extension("parquet.download");
        let mut out = std::fs::File::create(&partial).at(&partial)?;
        let mut written = 0u64;
        for chunk in rx {
            let chunk = chunk.map_err(|e| {
                let _ = std::fs::remove_file(&partial);
                self.error("downloading", key, e)
            })?;
            out.write_all(&chunk).at(&partial)?;
            written += chunk.len() as u64;
        }
        drop(out);
        if written != file_bytes {
            let _ = std::fs::remove_file(&partial);
            return Err(self.error(
                "downloading",
                key,
                format!("got {written} bytes, the commit recorded {file_bytes}"),
            ));
        }
        std::fs::rename(&partial, local).at(local)
    }

    /// Deletes `key` in the background; a failure is logged (the object is then an orphan).
    pub fn delete_later(self: &Arc<Self>, key: ObjectPath) {
        let store = self.store.clone();
        let url = self.url.clone();
        self.spawn(async move {
            if let Err(e) = store.delete(&key).await
                && !matches!(e, object_store::Error::NotFound { .. })
            {
                tracing::warn!("cold store {url}: could not delete {key}: {e}");
            }
        });
    }

    /// Deletes, in the background, every object of a dropped table (its directory's name).
    pub fn delete_under_later(self: &Arc<Self>, table_dir: &str) {
        let store = self.store.clone();
        let url = self.url.clone();
        let under = self.prefix.clone().join(table_dir);
        self.spawn(async move {
            let mut listing = store.list(Some(&under));
            while let Some(meta) = listing.next().await {
                let result = match meta {
                    Ok(meta) => store.delete(&meta.location).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = result {
                    tracing::warn!("cold store {url}: deleting {under} failed: {e}");
                    return;
                }
            }
        });
    }

    /// Deletes, in the background, every object under the prefix for which `orphan(table dir,
    /// part dir)` says no part names it nor ever will (the database decides: see
    /// `Database::remove_cold_orphans`).
    pub fn remove_orphans(self: &Arc<Self>, orphan: impl Fn(&str, &str) -> bool + Send + 'static) {
        let store = self.store.clone();
        let prefix = self.prefix.clone();
        let url = self.url.clone();
        self.spawn(async move {
            let mut listing = store.list(Some(&prefix));
            let mut removed = 0usize;
            while let Some(meta) = listing.next().await {
                let meta = match meta {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::warn!("cold store {url}: listing for orphans failed: {e}");
                        return;
                    }
                };
                let parts: Vec<String> = meta
                    .location
                    .prefix_match(&prefix)
                    .map(|p| p.map(|p| p.as_ref().to_string()).collect())
                    .unwrap_or_default();
                let [table, part, ..] = parts.as_slice() else {
                    continue;
                };
                if !orphan(table, part) {
                    continue;
                }
                match store.delete(&meta.location).await {
                    Ok(()) => removed += 1,
                    Err(e) => tracing::warn!(
                        "cold store {url}: could not delete orphan {}: {e}",
                        meta.location
                    ),
                }
            }
            if removed > 0 {
                tracing::info!("cold store {url}: deleted {removed} object(s) no table names");
            }
        });
    }

    /// Records that the local copy `path` (of `bytes`) was opened into `slot`, then deletes the
    /// least recently opened copies (closing their mappings) while the copies exceed the bound.
    /// The copy just opened stays even if it alone exceeds it.
    pub fn opened(&self, path: &Path, bytes: u64, slot: Weak<OpenedParquet>) {
        let Ok(mut copies) = self.copies.lock() else {
            return;
        };
        copies.tick += 1;
        let tick = copies.tick;
        if let Some(old) = copies
            .entries
            .insert(path.to_path_buf(), (bytes, tick, slot))
        {
            copies.bytes -= old.0;
        }
        copies.bytes += bytes;
        while copies.bytes > self.cache_bytes && copies.entries.len() > 1 {
            let Some(oldest) = copies
                .entries
                .iter()
                .min_by_key(|(_, (_, used, _))| *used)
                .map(|(p, _)| p.clone())
            else {
                break;
            };
            if let Some((bytes, _, slot)) = copies.entries.remove(&oldest) {
                copies.bytes -= bytes;
                if let Some(slot) = slot.upgrade()
                    && let Ok(mut opened) = slot.lock()
                {
                    *opened = None;
                }
                if let Err(e) = std::fs::remove_file(&oldest)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    tracing::warn!("could not delete the cached copy {}: {e}", oldest.display());
                }
            }
        }
    }

    /// Forgets a local copy deleted with its directory.
    pub fn forget(&self, path: &Path) {
        if let Ok(mut copies) = self.copies.lock()
            && let Some((bytes, _, _)) = copies.entries.remove(path)
        {
            copies.bytes -= bytes;
        }
    }

    /// Bytes of local copies kept now.
    pub fn cached_bytes(&self) -> u64 {
        self.copies.lock().map_or(0, |c| c.bytes)
    }
}

impl Drop for ColdStore {
    fn drop(&mut self) {
        // Deletes still queued get a few seconds to finish (an object left behind is an orphan
        // the next open deletes). On a thread of its own: a runtime may not be shut down from
        // within another, as the server's is when it drops the database.
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        let stopping = std::thread::Builder::new()
            .name("sundial-cold-stop".into())
            .spawn(move || runtime.shutdown_timeout(Duration::from_secs(10)));
        if let Ok(thread) = stopping {
            let _ = thread.join();
        }
    }
}
