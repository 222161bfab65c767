//! The RocksDB engine: the only file that imports rocksdb.

use std::path::Path;

use rocksdb::{
    DBCompressionType, DBRecoveryMode, LogLevel, MemtableFactory, Options, WriteBatch,
    WriteOptions, DB,
};

use super::engine::{BatchEntry, Engine, Entries};
use super::StoreError;

/// One RocksDB database (one shard's directory). Every commit syncs the WAL.
pub(crate) struct RocksEngine {
    db: DB,
}

impl RocksEngine {
    /// Opens the database at `path`; makes a new one there only when `create` (a shard never
    /// written): a database whose `CURRENT` is lost must be refused every time, not replaced
    /// by an empty one whose first compaction deletes the old tables as obsolete.
    pub(crate) fn open(path: &Path, create: bool) -> Result<Self, StoreError> {
        let mut options = Options::default();
        options.create_if_missing(create);
        options.set_max_background_jobs(2);
        options.set_keep_log_file_num(4);
        // The shard keeps every object in memory and reads the database only when it opens:
        // a memtable that appends (sorted once, when flushed or iterated) costs a write far
        // less than a skip list's ordered insert. It takes one writer at a time, as here.
        options.set_memtable_factory(MemtableFactory::Vector);
        options.set_allow_concurrent_memtable_write(false);
        // No compression, as etcd stores its values: compressing every memtable flush (snappy
        // by default) was the flush thread's largest cost under a create load, objects are
        // small, and `None` is the one compression every RocksDB build has (a build without
        // LZ4 refuses to open a database configured for it).
        options.set_compression_type(DBCompressionType::None);
        // A log that does not read back whole refuses to open, as etcd refuses a WAL with a
        // bad record: only a last record cut short (a write the crash interrupted, never
        // acknowledged) is dropped. RocksDB's default recovers to the first bad record and
        // silently drops every acknowledged write after it.
        options.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
        // RocksDB's own log (`LOG`, beside the data) only for what it cannot go on after: on
        // a full disk, Debian's build aborts the process on the second line it fails to write
        // there (an assertion left in), and a failed commit writes several. The store reports
        // its commits' failures itself.
        options.set_log_level(LogLevel::Fatal);
        let db = DB::open(&options, path)
            .map_err(|e| StoreError::Engine(format!("{}: {e}", path.display())))?;
        Ok(Self { db })
    }
}

impl Engine for RocksEngine {
    fn load_all(&self) -> Result<Entries, StoreError> {
        self.db
            .iterator(rocksdb::IteratorMode::Start)
            .map(|item| {
                item.map(|(k, v)| (k.to_vec(), v.to_vec()))
                    .map_err(|e| StoreError::Engine(e.to_string()))
            })
            .collect()
    }

    fn commit(&self, batch: &[BatchEntry<'_>]) -> Result<(), StoreError> {
        let mut write = WriteBatch::default();
        for &(key, value) in batch {
            match value {
                Some(v) => write.put(key, v),
                None => write.delete(key),
            }
        }
        let mut options = WriteOptions::default();
        options.set_sync(true);
        self.db.write_opt(write, &options).map_err(|e| StoreError::Engine(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put<'a>(key: &'a str, value: &'a str) -> BatchEntry<'a> {
        (key.as_bytes(), Some(value.as_bytes()))
    }

    #[test]
    fn commits_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let engine = RocksEngine::open(dir.path(), true).unwrap();
            engine.commit(&[put("a", "1"), put("b", "2")]).unwrap();
            engine.commit(&[("a".as_bytes(), None)]).unwrap();
            // Newer writes of a key win, within a batch and across batches (the memtable
            // appends, so this is ordering by sequence number, not by position).
            engine.commit(&[put("b", "3")]).unwrap();
            engine.commit(&[put("c", "1"), put("c", "2")]).unwrap();
            let expected = vec![(b"b".to_vec(), b"3".to_vec()), (b"c".to_vec(), b"2".to_vec())];
            assert_eq!(engine.load_all().unwrap(), expected);
        }
        let engine = RocksEngine::open(dir.path(), false).unwrap();
        let expected = vec![(b"b".to_vec(), b"3".to_vec()), (b"c".to_vec(), b"2".to_vec())];
        assert_eq!(engine.load_all().unwrap(), expected);
    }

    /// The shard's write-ahead log (nothing is flushed to a table by a few small commits).
    fn log_of(dir: &Path) -> std::path::PathBuf {
        let logs = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path());
        let mut logs: Vec<_> = logs.filter(|p| p.extension().is_some_and(|e| e == "log")).collect();
        logs.sort_by_key(|p| std::fs::metadata(p).unwrap().len());
        logs.pop().expect("a log")
    }

    #[test]
    fn a_damaged_log_refuses_to_open_and_a_cut_last_record_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let value = "v".repeat(200);
        {
            let engine = RocksEngine::open(dir.path(), true).unwrap();
            for i in 0..100 {
                engine.commit(&[put(&format!("k{i:03}"), &value)]).unwrap();
            }
        }
        let log = log_of(dir.path());
        let whole = std::fs::read(&log).unwrap();
        // The last record cut short, as a crash in the middle of its write leaves it.
        std::fs::write(&log, &whole[..whole.len() - 50]).unwrap();
        let engine = RocksEngine::open(dir.path(), false).unwrap();
        assert_eq!(engine.load_all().unwrap().len(), 99);
        drop(engine);
        // A record in the middle damaged: acknowledged writes after it would be lost.
        let dir = tempfile::tempdir().unwrap();
        {
            let engine = RocksEngine::open(dir.path(), true).unwrap();
            for i in 0..100 {
                engine.commit(&[put(&format!("k{i:03}"), &value)]).unwrap();
            }
        }
        let log = log_of(dir.path());
        let mut damaged = std::fs::read(&log).unwrap();
        let middle = damaged.len() / 3;
        damaged[middle..middle + 8].iter_mut().for_each(|b| *b ^= 0xff);
        std::fs::write(&log, damaged).unwrap();
        let refused = RocksEngine::open(dir.path(), false).err().expect("refused");
        let refused = refused.to_string();
        assert!(refused.contains("Corruption"), "{refused}");
        assert!(refused.contains(dir.path().to_str().unwrap()), "names the shard: {refused}");
    }
}
