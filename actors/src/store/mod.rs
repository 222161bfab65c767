//! The sharded store: shard actors over a blocking engine, and the `Store` handle that routes
//! each request to the shard owning its resource type.
//!
//! Objects are partitioned by resource type, so every watch stream (which is per type) comes
//! from one shard and is ordered by construction.

mod codec;
mod engine;
mod history;
mod keys;
mod namespaces;
mod outbox;
mod revision;
mod rocks;
mod service_accounts;
mod shard;
mod tables;
mod writer;

use std::path::Path;
use std::sync::Arc;

use actix::{Actor, Addr, Arbiter};
use prometheus::{HistogramOpts, HistogramVec};
use tokio::sync::oneshot;

pub use namespaces::NamespaceState;
pub use revision::Revision;
pub use service_accounts::AccountRefs;
pub use shard::{ContinuePoint, ListPage};

use crate::model::{ObjectFilter, ObjectKey, PreparedObject, ResourceType, StoredObject};
use crate::watch::HubHandle;
use engine::{Engine, Entries};
use shard::{Get, List, Settle, Stop, StoreShard, Write, WriteOp};
use tables::AdmissionTables;
use writer::{ShardWriter, WriterHandle};

/// Errors of the store layer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("{} {:?} not found", .0.resource.plural, .0.name)]
    NotFound(ObjectKey),
    #[error("{} {:?} already exists", .0.resource.plural, .0.name)]
    AlreadyExists(ObjectKey),
    #[error("{message}")]
    Conflict { key: ObjectKey, message: String },
    /// A continue token or resourceVersion that is no longer held.
    #[error("too old resource version: {0}")]
    Expired(u64),
    #[error("storage engine error: {0}")]
    Engine(String),
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    #[error("store is shutting down")]
    Unavailable,
    #[error("{0}")]
    Layout(String),
    /// A commit failed: the shard takes no more writes until the server restarts.
    #[error("the store can no longer write to disk ({0}); restart the server")]
    Failed(String),
}

/// Conditions a write checks against the object's newest state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    pub resource_version: Option<u64>,
    pub uid: Option<String>,
}

impl Preconditions {
    /// Checks `current` against the preconditions, the uid first, as Kubernetes' storage
    /// checks it before the resourceVersion: a mismatch is a Conflict.
    pub fn check(&self, current: &StoredObject) -> Result<(), StoreError> {
        let key = &current.key;
        let conflict = |message: String| StoreError::Conflict {
            key: key.clone(),
            message: format!(
                "Operation cannot be fulfilled on {} {:?}: {message}",
                key.resource.qualified_plural(),
                key.name
            ),
        };
        if let Some(uid) = self.uid.as_ref().filter(|uid| **uid != current.uid) {
            // In the words of etcd3 storage's error, which names the object's etcd key.
            return Err(conflict(format!(
                "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, \
                 AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in \
                 object meta: {}",
                etcd_key(key),
                current.uid
            )));
        }
        if self.resource_version.is_some_and(|rv| rv != current.resource_version) {
            return Err(conflict(
                "the object has been modified; please apply your changes to the latest version \
                 and try again"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// Where kube-apiserver keeps an object in etcd (`/registry/configmaps/default/c`), as its
/// storage errors name it: under the resource's name, or the older one some keep.
fn etcd_key(key: &ObjectKey) -> String {
    let prefix = match key.resource.plural {
        "services" => "services/specs",
        "endpoints" => "services/endpoints",
        "replicationcontrollers" => "controllers",
        "nodes" => "minions",
        plural => plural,
    };
    match key.namespace.as_str() {
        "" => format!("/registry/{prefix}/{}", key.name),
        namespace => format!("/registry/{prefix}/{namespace}/{}", key.name),
    }
}

/// How the shards' commits go, as Prometheus metrics (labelled by shard).
#[derive(Clone)]
struct CommitMetrics {
    batch_size: HistogramVec,
    duration: HistogramVec,
}

impl CommitMetrics {
    fn new() -> Self {
        let per_shard = |name: &str, help: &str, buckets: &[f64]| {
            let options = HistogramOpts::new(name, help).buckets(buckets.to_vec());
            HistogramVec::new(options, &["shard"]).expect("a valid metric")
        };
        Self {
            batch_size: per_shard(
                "kplane_store_commit_batch_size",
                "Writes committed together with one WAL sync (group commit), by shard.",
                &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0],
            ),
            duration: per_shard(
                "kplane_store_commit_duration_seconds",
                "Time to write and sync one commit, by shard.",
                &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0],
            ),
        }
    }

    /// Starts shard `index`'s writer, on its own thread, recording its commits.
    fn start_writer(&self, index: usize, engine: Arc<dyn Engine>) -> WriterHandle {
        let label = index.to_string();
        let batch_size = self.batch_size.with_label_values(&[label.as_str()]);
        let duration = self.duration.with_label_values(&[label.as_str()]);
        ShardWriter::start(index, engine, batch_size, duration)
    }
}

/// The handle to the store: cheap to clone, hides the shard actors.
#[derive(Clone)]
pub struct Store {
    shards: Arc<Vec<Addr<StoreShard>>>,
    revision: Arc<Revision>,
    metrics: CommitMetrics,
    tables: Arc<AdmissionTables>,
    /// Lets `close` wait until every writer has dropped its engine (and so its RocksDB handle).
    released: Arc<Vec<std::sync::Weak<()>>>,
}

/// Where the store keeps its data and how it is partitioned.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub shards: usize,
    /// `None` keeps everything in memory (tests and benchmarks); `Some(dir)` uses RocksDB.
    pub data_dir: Option<std::path::PathBuf>,
    /// How many recent changes each shard keeps, and how many bytes of objects, to list at an
    /// exact past revision (the watch hub's window has the same bounds).
    pub history_changes: usize,
    pub history_bytes: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            shards: 2,
            data_dir: None,
            history_changes: history::DEFAULT_CHANGES,
            history_bytes: history::DEFAULT_BYTES,
        }
    }
}

/// Whether an engine in `released` is still open (its writer has not dropped it).
fn any_open(released: &[std::sync::Weak<()>]) -> bool {
    released.iter().any(|r| r.strong_count() > 0)
}

/// Waits on this thread, up to `timeout`, until every engine in `released` has been closed.
fn wait_released(released: &[std::sync::Weak<()>], timeout: std::time::Duration) {
    let deadline = std::time::Instant::now() + timeout;
    while any_open(released) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

impl Store {
    /// Opens every shard's engine, recovers the revision counter and starts one actor per
    /// shard, each on its own arbiter thread, publishing committed events to `hub` (which
    /// learns the recovered revision: older watches cannot be resumed).
    pub fn open(options: &StoreOptions, hub: &HubHandle) -> Result<Self, StoreError> {
        let publish = hub.publisher();
        let shards = options.shards.max(1);
        let engines: Vec<Arc<dyn Engine>> = match &options.data_dir {
            Some(dir) => {
                let recorded = check_layout(dir, shards)?;
                let paths: Vec<_> = (0..shards).map(|i| dir.join(format!("shard-{i}"))).collect();
                if !recorded {
                    // Every shard's directory first: a first start that fails half-way (a
                    // full disk) leaves them all, and the next start counts them all.
                    for path in &paths {
                        std::fs::create_dir_all(path).map_err(io_error(path))?;
                    }
                }
                let engines = paths
                    .iter()
                    .map(|path| {
                        let new = never_written(path)?;
                        if new && recorded {
                            return Err(lost_shard(dir, path, shards));
                        }
                        let engine = rocks::RocksEngine::open(path, new)?;
                        Ok(Arc::new(engine) as Arc<dyn Engine>)
                    })
                    .collect::<Result<_, StoreError>>()?;
                // Recorded once every shard is there: a first start that fails half-way
                // (a full disk) is taken again as a first start.
                if !recorded {
                    let wanted = format!("shards={shards}\n");
                    write_durably(dir, "LAYOUT", wanted.as_bytes()).map_err(io_error(dir))?;
                }
                engines
            }
            None => (0..shards)
                .map(|_| Arc::new(engine::MemoryEngine::default()) as Arc<dyn Engine>)
                .collect(),
        };
        let revision = Arc::new(Revision::default());
        let metrics = CommitMetrics::new();
        let tables = Arc::new(AdmissionTables::default());
        // Every engine read before any writer starts: a writer's thread holds its engine
        // open, and RocksDB aborts a process that exits (refusing to start) with one open.
        let stored: Vec<Entries> =
            engines.iter().map(|e| e.load_all()).collect::<Result<_, _>>()?;
        let mut loaded = Vec::with_capacity(shards);
        let mut released = Vec::with_capacity(shards);
        for (index, (engine, stored)) in engines.into_iter().zip(stored).enumerate() {
            let writer = metrics.start_writer(index, engine);
            released.push(writer.released());
            let shard = StoreShard::load(
                index,
                stored,
                revision.clone(),
                writer,
                publish.clone(),
                tables.clone(),
            );
            match shard {
                Ok(shard) => {
                    loaded.push(shard.with_history(options.history_changes, options.history_bytes))
                }
                Err(error) => {
                    // The writers stop with their shards' handles; wait until they have
                    // closed their engines.
                    drop(loaded);
                    wait_released(&released, std::time::Duration::from_secs(10));
                    return Err(error);
                }
            }
        }
        let highest = loaded.iter().map(StoreShard::applied_revision).max().unwrap_or(0);
        let revision = Arc::new(Revision::starting_after(highest));
        hub.set_floor(highest);
        let addrs = loaded
            .into_iter()
            .map(|shard| {
                let shard = shard.with_revision(revision.clone());
                let arbiter = Arbiter::new();
                StoreShard::start_in_arbiter(&arbiter.handle(), move |_| shard)
            })
            .collect();
        Ok(Self {
            shards: Arc::new(addrs),
            revision,
            metrics,
            tables,
            released: Arc::new(released),
        })
    }

    /// The store's metrics, for the server to register and serve.
    pub fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![Box::new(self.metrics.batch_size.clone()), Box::new(self.metrics.duration.clone())]
    }

    /// Stops every shard once its accepted writes are durable, and waits (up to `timeout`)
    /// until the engines are closed. RocksDB must be closed before the process exits.
    pub async fn close(&self, timeout: std::time::Duration) {
        for shard in self.shards.iter() {
            let _ = shard.send(Stop).await;
        }
        let deadline = std::time::Instant::now() + timeout;
        while any_open(&self.released) && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    fn shard(&self, resource: &ResourceType) -> &Addr<StoreShard> {
        // FNV-1a over the resource's identity: stable across builds and restarts.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in resource.group.bytes().chain([b'/']).chain(resource.plural.bytes()) {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        &self.shards[(hash % self.shards.len() as u64) as usize]
    }

    /// Asks each shard, in order, to answer once the writes it has accepted are committed: a
    /// round trip through the shard actor and its writer. `Err` says why one did not answer,
    /// or that it takes no more writes (a commit failed).
    pub async fn check_shards(&self, timeout: std::time::Duration) -> Vec<Result<(), String>> {
        let checks = self.shards.iter().map(|shard| async move {
            let settled = async {
                let (settled, wait) = oneshot::channel();
                shard.send(Settle(settled)).await.map_err(|_| StoreError::Unavailable)?;
                wait.await.map_err(|_| StoreError::Unavailable)?
            };
            match tokio::time::timeout(timeout, settled).await {
                Ok(answer) => answer.map_err(|e| e.to_string()),
                Err(_) => Err(format!("the store shard did not answer within {timeout:?}")),
            }
        });
        futures::future::join_all(checks).await
    }

    /// The last revision handed out to any write.
    pub fn current_revision(&self) -> u64 {
        self.revision.current()
    }

    /// A committed namespace's state, read without asking its shard: every namespace write
    /// acknowledged so far is in it.
    pub fn namespace(&self, name: &str) -> Option<NamespaceState> {
        self.tables.namespace(name)
    }

    /// A committed namespace's `pod-security.kubernetes.io/` labels (`None`: it has none),
    /// read without asking its shard.
    pub fn pod_security_labels(&self, namespace: &str) -> Option<Arc<namespaces::Labels>> {
        self.tables.pod_security_labels(namespace)
    }

    /// What admission reads of a committed ServiceAccount, without asking its shard.
    pub fn service_account(&self, namespace: &str, name: &str) -> Option<Arc<AccountRefs>> {
        self.tables.service_account(namespace, name)
    }

    /// A namespace's committed LimitRanges, by name, read without asking their shard.
    pub fn limit_ranges(&self, namespace: &str) -> Vec<Arc<StoredObject>> {
        self.tables.limit_ranges(namespace)
    }

    /// A namespace's committed ResourceQuotas, by name, read without asking their shard.
    pub fn quotas(&self, namespace: &str) -> Vec<Arc<StoredObject>> {
        self.tables.quotas(namespace)
    }

    /// The committed PriorityClasses, by name, read without asking their shard.
    pub fn priority_classes(&self) -> Vec<Arc<StoredObject>> {
        self.tables.priority_classes()
    }

    pub async fn get(&self, key: &ObjectKey) -> Result<Option<Arc<StoredObject>>, StoreError> {
        self.shard(key.resource).send(Get(key.clone())).await.map_err(|_| StoreError::Unavailable)
    }

    /// Waits until every write to `resource`'s shard accepted so far is committed (or has
    /// failed), so that a read after it sees them: what a read-modify-write retries after when
    /// its write met a state newer than the one it read.
    pub async fn settle(&self, resource: &'static ResourceType) -> Result<(), StoreError> {
        let (settled, wait) = oneshot::channel();
        self.shard(resource).send(Settle(settled)).await.map_err(|_| StoreError::Unavailable)?;
        wait.await.map_err(|_| StoreError::Unavailable)?
    }

    /// Lists `resource`. The latest state (no `exact` revision, no continue token) is listed
    /// at a revision no older than any write acknowledged before the call, whichever shard
    /// it went to, as a read from etcd is: when a write to `resource` accepted earlier, with
    /// a lower revision, is still on its way to disk, the list waits for its commit.
    pub async fn list(
        &self,
        resource: &'static ResourceType,
        filter: ObjectFilter,
        limit: Option<usize>,
        continue_from: Option<ContinuePoint>,
        exact: Option<u64>,
    ) -> Result<ListPage, StoreError> {
        let acknowledged = self.revision.durable();
        let again = (exact.is_none() && continue_from.is_none()).then(|| filter.clone());
        let shard = self.shard(resource);
        let list = List { resource, filter, limit, continue_from, exact };
        let page = shard.send(list).await.map_err(|_| StoreError::Unavailable)??;
        match again {
            Some(filter) if page.resource_version < acknowledged => {
                self.settle(resource).await?;
                let list = List { resource, filter, limit, continue_from: None, exact: None };
                shard.send(list).await.map_err(|_| StoreError::Unavailable)?
            }
            _ => Ok(page),
        }
    }

    /// Creates an object. It is serialized and indexed here, on the caller's thread: the shard
    /// only writes the revision in.
    pub async fn create(
        &self,
        key: ObjectKey,
        object: serde_json::Value,
    ) -> Result<Arc<StoredObject>, StoreError> {
        self.create_prepared(PreparedObject::new(key, object)).await
    }

    /// Creates an object its caller has prepared (serialized and indexed).
    pub async fn create_prepared(
        &self,
        object: PreparedObject,
    ) -> Result<Arc<StoredObject>, StoreError> {
        self.write(WriteOp::Create(object)).await
    }

    /// Replaces an object, prepared as `create` prepares it.
    pub async fn update(
        &self,
        key: ObjectKey,
        object: serde_json::Value,
        preconditions: Preconditions,
    ) -> Result<Arc<StoredObject>, StoreError> {
        let object = PreparedObject::new(key, object);
        self.write(WriteOp::Update { object, preconditions }).await
    }

    /// Deletes and returns the object's last state, stamped with the deletion's revision.
    pub async fn delete(
        &self,
        key: ObjectKey,
        preconditions: Preconditions,
    ) -> Result<Arc<StoredObject>, StoreError> {
        self.write(WriteOp::Delete { key, preconditions }).await
    }

    async fn write(&self, op: WriteOp) -> Result<Arc<StoredObject>, StoreError> {
        let resource = op.key().resource;
        let (reply, receive) = oneshot::channel();
        outbox::send(self.shard(resource), Write { op, reply });
        receive.await.map_err(|_| StoreError::Unavailable)?
    }
}

/// Checks that the data in `dir` was written with `shards` shards (its `LAYOUT` file says how
/// many); whether `LAYOUT` records them (else the caller records it, once the shards are
/// there). A data dir whose `LAYOUT` is missing or empty while it holds shards is taken as it
/// is only when it holds that many: read with another count, objects would be looked for in
/// shards that never held them.
fn check_layout(dir: &Path, shards: usize) -> Result<bool, StoreError> {
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let layout = dir.join("LAYOUT");
    let wanted = format!("shards={shards}");
    let found = match std::fs::read_to_string(&layout) {
        Ok(found) => found,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io_error(dir)(e)),
    };
    if found.trim() == wanted {
        return Ok(true);
    }
    if !found.trim().is_empty() {
        return Err(StoreError::Layout(format!(
            "store.shards: the data in {} was written with {}, not shards={shards}",
            dir.display(),
            found.trim()
        )));
    }
    let held = shard_dirs(dir).map_err(io_error(dir))?;
    if held != 0 && held != shards {
        return Err(StoreError::Layout(format!(
            "store.shards: the data in {} holds {held} shards and no LAYOUT file naming them, \
             not shards={shards}",
            dir.display()
        )));
    }
    Ok(false)
}

/// An I/O error on the data in `dir`, as a store error naming it.
fn io_error(dir: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |e| StoreError::Engine(format!("{}: {e}", dir.display()))
}

/// Whether the shard at `path` was never written: no directory, or one without RocksDB's
/// `CURRENT`, tables (`*.sst`) and logs (`*.log`), as a first start that failed before its
/// database was made leaves it. One with data but no `CURRENT` is damaged, not new.
fn never_written(path: &Path) -> Result<bool, StoreError> {
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(io_error(path)(e)),
    };
    for entry in entries {
        let name = entry.map_err(io_error(path))?.file_name();
        let name = name.to_string_lossy();
        if name == "CURRENT" || name.ends_with(".sst") || name.ends_with(".log") {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A shard `LAYOUT` records gone from the data dir: started without it, its objects would be
/// gone and the revisions it held handed out again.
fn lost_shard(dir: &Path, path: &Path, shards: usize) -> StoreError {
    StoreError::Layout(format!(
        "{} holds no database, though {} records shards={shards}: refusing to start without \
         its objects (restore it, or start from an empty data dir)",
        path.display(),
        dir.join("LAYOUT").display()
    ))
}

/// How many shard directories (`shard-0` to `shard-N`) `dir` holds: one past the highest.
fn shard_dirs(dir: &Path) -> std::io::Result<usize> {
    let mut count = 0;
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let index = name.to_str().and_then(|n| n.strip_prefix("shard-")?.parse::<usize>().ok());
        if let Some(index) = index {
            count = count.max(index + 1);
        }
    }
    Ok(count)
}

/// Writes `dir/name` whole or not at all, and durably: a new file synced, then renamed over
/// the old one, then the directory synced.
fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let temporary = dir.join(format!("{name}.new"));
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::model::resources::find;
    use crate::watch::{HubOptions, WatchHub};

    pub(super) fn hub() -> HubHandle {
        WatchHub::start(HubOptions {
            window_events: 100,
            window_bytes: usize::MAX,
            buffer: 100,
            bookmark_interval: Duration::from_secs(60),
        })
    }

    /// Opens (`Ok`) and closes the store of `shards` shards in `data`, or says why it refused.
    async fn open_and_close(data: &Path, shards: usize) -> Result<(), String> {
        let options =
            StoreOptions { shards, data_dir: Some(data.to_path_buf()), ..Default::default() };
        let store = Store::open(&options, &hub()).map_err(|e| e.to_string())?;
        store.close(Duration::from_secs(10)).await;
        Ok(())
    }

    #[actix::test]
    async fn a_data_dir_is_read_with_the_shard_count_it_was_written_with() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        open_and_close(data, 2).await.unwrap();
        assert_eq!(std::fs::read_to_string(data.join("LAYOUT")).unwrap(), "shards=2\n");
        let refused = open_and_close(data, 3).await.unwrap_err();
        assert!(refused.contains("was written with shards=2, not shards=3"), "{refused}");
        // Its LAYOUT lost (or left empty) with two shards' data there: only two will do.
        for lost in [None, Some("")] {
            match lost {
                None => std::fs::remove_file(data.join("LAYOUT")).unwrap(),
                Some(text) => std::fs::write(data.join("LAYOUT"), text).unwrap(),
            }
            let refused = open_and_close(data, 3).await.unwrap_err();
            assert!(refused.contains("holds 2 shards and no LAYOUT file"), "{refused}");
            open_and_close(data, 2).await.unwrap();
            assert_eq!(std::fs::read_to_string(data.join("LAYOUT")).unwrap(), "shards=2\n");
        }
    }

    /// A first start that stopped before its databases were made (a full disk) leaves
    /// directories and no `LAYOUT`: the next start makes them.
    #[actix::test]
    async fn a_first_start_stopped_half_way_is_taken_again() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        std::fs::create_dir_all(data.join("shard-0")).unwrap();
        std::fs::create_dir_all(data.join("shard-1")).unwrap();
        std::fs::write(data.join("shard-1/LOCK"), "").unwrap();
        open_and_close(data, 2).await.unwrap();
        assert_eq!(std::fs::read_to_string(data.join("LAYOUT")).unwrap(), "shards=2\n");
        assert!(data.join("shard-1/CURRENT").is_file());
    }

    /// A shard's database lost (its directory, or its `CURRENT`) is refused at every start,
    /// never replaced by an empty one: RocksDB would take the old tables for obsolete files and
    /// delete them, and the revisions they held would be handed out again.
    #[actix::test]
    async fn a_shard_whose_database_is_lost_is_refused_at_every_start() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let options =
            StoreOptions { shards: 2, data_dir: Some(data.to_path_buf()), ..Default::default() };
        let store = Store::open(&options, &hub()).unwrap();
        let kinds = ["pods", "services", "configmaps", "secrets", "nodes", "events"];
        let mut created = Vec::new();
        for plural in kinds {
            let key = ObjectKey::new(find("", "v1", plural).unwrap(), "default", "kept");
            let object = store.create(key.clone(), json!({"metadata": {"name": "kept"}})).await;
            created.push((key, object.unwrap().resource_version));
        }
        let mut shards = Vec::new();
        for (key, _) in &created {
            let shard = store.shard(key.resource);
            if !shards.contains(&shard) {
                shards.push(shard);
            }
        }
        assert_eq!(shards.len(), 2, "both shards hold objects");
        store.close(Duration::from_secs(10)).await;
        drop(store);

        let current = data.join("shard-1/CURRENT");
        let kept = std::fs::read(&current).unwrap();
        std::fs::remove_file(&current).unwrap();
        for _ in 0..2 {
            let refused = open_and_close(data, 2).await.unwrap_err();
            assert!(refused.contains("shard-1"), "{refused}");
            assert!(!current.exists(), "nothing written in its place");
        }
        std::fs::write(&current, kept).unwrap();

        let aside = data.join("shard-1.aside");
        std::fs::rename(data.join("shard-1"), &aside).unwrap();
        for _ in 0..2 {
            let refused = open_and_close(data, 2).await.unwrap_err();
            assert!(refused.contains("holds no database"), "{refused}");
        }
        std::fs::rename(&aside, data.join("shard-1")).unwrap();

        let store = Store::open(&options, &hub()).unwrap();
        for (key, revision) in created {
            let object = store.get(&key).await.unwrap().expect("still there");
            assert_eq!(object.resource_version, revision);
        }
        store.close(Duration::from_secs(10)).await;
    }

    /// A stale resourceVersion is a conflict named as Kubernetes names it: the resource
    /// qualified by its group outside the core group.
    #[test]
    fn a_stale_write_conflicts_naming_the_qualified_resource() {
        let stale = Preconditions { resource_version: Some(1), uid: None };
        let message = |group: &str, version: &str, plural: &str| {
            let key = ObjectKey::new(find(group, version, plural).unwrap(), "ns", "x");
            let current = PreparedObject::new(key, json!({"metadata": {"name": "x"}}));
            match stale.check(&current.at_revision(2)) {
                Err(StoreError::Conflict { message, .. }) => message,
                other => panic!("{other:?}"),
            }
        };
        let leases = message("coordination.k8s.io", "v1", "leases");
        assert!(leases.starts_with("Operation cannot be fulfilled on leases.coordination.k8s.io \"x\": the object has been modified"), "{leases}");
        let maps = message("", "v1", "configmaps");
        assert!(maps.starts_with("Operation cannot be fulfilled on configmaps \"x\""), "{maps}");
    }

    /// Closing ends every shard and writer, so their RocksDB handles are released: the same
    /// process can open the directory again (RocksDB refuses a directory it still holds).
    #[actix::test]
    async fn a_closed_store_releases_its_databases() {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            shards: 2,
            data_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let pods = find("", "v1", "pods").unwrap();
        let key = ObjectKey::new(pods, "default", "kept");
        let store = Store::open(&options, &hub()).unwrap();
        let created = store.create(key.clone(), json!({"metadata": {"name": "kept"}})).await;
        let revision = created.unwrap().resource_version;
        store.close(Duration::from_secs(10)).await;
        drop(store);
        let reopened = Store::open(&options, &hub()).expect("the databases were released");
        let kept = reopened.get(&key).await.unwrap().expect("the object is still there");
        assert_eq!(kept.resource_version, revision);
        reopened.close(Duration::from_secs(10)).await;
    }
}
