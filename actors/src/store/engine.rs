//! The blocking storage engine behind the store shards, as a trait so that nothing above the
//! store depends on RocksDB.

use super::StoreError;

/// One key's new state in a batch: `Some(value)` to put, `None` to delete.
pub(crate) type BatchEntry<'a> = (&'a [u8], Option<&'a [u8]>);

/// Every stored key with its value.
pub(crate) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A durable, ordered key-value engine. Implementations block; callers run them on their own
/// threads.
pub(crate) trait Engine: Send + Sync + 'static {
    /// Every stored key and value, in key order.
    fn load_all(&self) -> Result<Entries, StoreError>;

    /// Applies the whole batch atomically and returns only once it is durable on disk.
    fn commit(&self, batch: &[BatchEntry<'_>]) -> Result<(), StoreError>;
}

/// An engine that keeps everything in memory: for tests and mailbox benchmarks.
#[derive(Default)]
pub(crate) struct MemoryEngine {
    data: std::sync::Mutex<std::collections::BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Engine for MemoryEngine {
    fn load_all(&self) -> Result<Entries, StoreError> {
        let data = self.data.lock().expect("memory engine lock");
        Ok(data.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }

    fn commit(&self, batch: &[BatchEntry<'_>]) -> Result<(), StoreError> {
        let mut data = self.data.lock().expect("memory engine lock");
        for &(key, value) in batch {
            match value {
                Some(v) => data.insert(key.to_vec(), v.to_vec()),
                None => data.remove(key),
            };
        }
        Ok(())
    }
}
