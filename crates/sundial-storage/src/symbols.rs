//! SYMBOL dictionaries: one per SYMBOL column per table, append-only, in `_sym/N.d` + `_sym/N.o`.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::StringArray;

use crate::column::SymbolResolver;
use crate::dir_sync::UnsyncedDirs;
use crate::error::{IoContext, Result, StorageError};
use crate::files::{data_file, ensure_dir, offsets_file};
use crate::symbol_index::PublishedSymbols;

/// Directory inside a table directory that holds the dictionaries.
pub(crate) const SYMBOL_DIR: &str = "_sym";

/// The writer's view of one dictionary: committed symbols plus those added by pending rows.
pub(crate) struct SymbolDict {
    column_id: u32,
    dir: PathBuf,
    values: Vec<String>,
    /// Symbol to key. Seeded per process, fast for the short strings symbols are.
    keys: HashMap<String, i32, foldhash::fast::RandomState>,
    committed: usize,
    data_len: u64,
    /// The committed symbols as queries see them; replaced (never changed) when a commit adds some.
    published: Arc<PublishedSymbols>,
}

impl SymbolDict {
    pub fn load(table_dir: &Path, column_id: u32, count: u32) -> Result<SymbolDict> {
        let dir = table_dir.join(SYMBOL_DIR);
        let values = crate::read::read_symbols(&dir, column_id, count)?;
        let mut keys = HashMap::with_capacity_and_hasher(values.len(), Default::default());
        keys.extend(
            values
                .iter()
                .enumerate()
                .map(|(i, v)| (v.clone(), i as i32)),
        );
        let data_len = values.iter().map(|v| v.len() as u64).sum();
        let array = Arc::new(StringArray::from_iter_values(values.iter()));
        let published = Arc::new(PublishedSymbols::new(array, None));
        Ok(SymbolDict {
            column_id,
            dir,
            committed: values.len(),
            values,
            keys,
            data_len,
            published,
        })
    }

    pub fn len(&self) -> u32 {
        self.values.len() as u32
    }

    pub fn has_pending(&self) -> bool {
        self.values.len() > self.committed
    }

    /// The committed dictionary as queries see it.
    pub fn published(&self) -> Arc<PublishedSymbols> {
        self.published.clone()
    }

    /// Forgets symbols added since the last commit.
    pub fn rollback(&mut self) {
        for v in self.values.drain(self.committed..) {
            self.keys.remove(&v);
        }
    }

    /// Appends pending symbols to the dictionary files (not yet committed): bytes to `N.d`, then
    /// end offsets to `N.o`, each past the committed ones; with `sync`, fsyncs both. Records in
    /// `unsynced` the directories whose entries the commit's slot will be the first to name:
    /// `_sym/` for a column with no committed symbol (its files may be new), the table directory
    /// when `_sym/` is created here. The caller writes the transaction after this returns.
    pub fn write_pending(&mut self, sync: bool, unsynced: &mut UnsyncedDirs) -> Result<()> {
        if !self.has_pending() {
            return Ok(());
        }
        if ensure_dir(&self.dir)?
            && let Some(table_dir) = self.dir.parent()
        {
            unsynced.add(table_dir);
        }
        if self.committed == 0 {
            unsynced.add(&self.dir);
        }
        let data_path = self.dir.join(data_file(self.column_id));
        let offsets_path = self.dir.join(offsets_file(self.column_id));
        let open = |p: &Path| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(p)
                .at(p)
        };
        let data = open(&data_path)?;
        let offsets = open(&offsets_path)?;
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity((self.values.len() - self.committed + 1) * 8);
        if self.committed == 0 {
            ends.extend_from_slice(&0u64.to_le_bytes());
        }
        let mut end = self.data_len;
        for v in &self.values[self.committed..] {
            bytes.extend_from_slice(v.as_bytes());
            end += v.len() as u64;
            ends.extend_from_slice(&end.to_le_bytes());
        }
        data.write_all_at(&bytes, self.data_len).at(&data_path)?;
        let at = if self.committed == 0 {
            0
        } else {
            (self.committed as u64 + 1) * 8
        };
        offsets.write_all_at(&ends, at).at(&offsets_path)?;
        if sync {
            data.sync_data().at(&data_path)?;
            offsets.sync_data().at(&offsets_path)?;
        }
        Ok(())
    }

    /// Makes the pending symbols committed, after the transaction naming them was written.
    pub fn mark_committed(&mut self) {
        if !self.has_pending() {
            return;
        }
        self.data_len += self.values[self.committed..]
            .iter()
            .map(|v| v.len() as u64)
            .sum::<u64>();
        self.committed = self.values.len();
        debug_assert_eq!(self.keys.len(), self.values.len(), "symbols are distinct");
        let array = Arc::new(StringArray::from_iter_values(self.values.iter()));
        self.published = Arc::new(PublishedSymbols::new(array, Some(&self.published)));
    }
}

impl SymbolResolver for SymbolDict {
    fn resolve(&mut self, value: &str) -> Result<i32> {
        if let Some(k) = self.keys.get(value) {
            return Ok(*k);
        }
        if self.values.len() >= i32::MAX as usize {
            return Err(StorageError::ResourceExhausted(format!(
                "SYMBOL column {} has reached {} distinct values",
                self.column_id,
                i32::MAX
            )));
        }
        let key = self.values.len() as i32;
        self.values.push(value.to_owned());
        self.keys.insert(value.to_owned(), key);
        Ok(key)
    }
}
