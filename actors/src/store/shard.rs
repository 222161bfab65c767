//! The store shard actor: owns a partition of the objects (whole resource types), serves reads
//! from its in-memory cache and group-commits writes to its engine.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use imbl::OrdMap;
use tokio::sync::oneshot;

use super::engine::Entries;
use super::history::{self, History, Undo};
use super::tables::AdmissionTables;
use super::writer::WriterHandle;
use super::{codec, keys, Preconditions, Revision, StoreError};
use crate::model::{
    text, FastMap, ObjectFilter, ObjectKey, PreparedObject, ResourceType, StoredObject,
};
use crate::watch::{EventType, Publish, WatchEvent};

/// The objects of one resource type, by (namespace, name). Cloning is O(1), which is what makes
/// paginated lists consistent snapshots.
type Collection = OrdMap<CollectionKey, Arc<StoredObject>>;

/// The (namespace, name) of a collection's entry, in one allocation: the namespace, a NUL and
/// the name. Ordered as the pair of strings is, since a namespace (a DNS label) holds no NUL:
/// two keys compare with one `memcmp`, and a search of a large collection reads one allocation
/// per key it passes, not two.
#[derive(Debug, Clone)]
struct CollectionKey {
    text: Box<str>,
    namespace_len: usize,
}

impl CollectionKey {
    fn new(namespace: &str, name: &str) -> Self {
        let mut text = String::with_capacity(namespace.len() + 1 + name.len());
        text.push_str(namespace);
        text.push('\0');
        text.push_str(name);
        Self { text: text.into_boxed_str(), namespace_len: namespace.len() }
    }

    fn of(key: &ObjectKey) -> Self {
        Self::new(&key.namespace, &key.name)
    }

    fn namespace(&self) -> &str {
        &self.text[..self.namespace_len]
    }
}

/// A (namespace, name) a collection can be searched by without building its owned key: reads
/// allocate nothing.
trait NamespacedName {
    fn parts(&self) -> (&str, &str);
}

impl NamespacedName for CollectionKey {
    fn parts(&self) -> (&str, &str) {
        (self.namespace(), &self.text[self.namespace_len + 1..])
    }
}

impl NamespacedName for (&str, &str) {
    fn parts(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

impl<'a> std::borrow::Borrow<dyn NamespacedName + 'a> for CollectionKey {
    fn borrow(&self) -> &(dyn NamespacedName + 'a) {
        self
    }
}

impl PartialEq for dyn NamespacedName + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for dyn NamespacedName + '_ {}

impl PartialOrd for dyn NamespacedName + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Compared through `text::order`: cluster-scoped objects have an empty namespace, which
/// `memcmp` is slow to compare.
impl Ord for dyn NamespacedName + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let ((namespace, name), (other_namespace, other_name)) = (self.parts(), other.parts());
        text::order(namespace, other_namespace).then_with(|| text::order(name, other_name))
    }
}

impl PartialEq for CollectionKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for CollectionKey {}

impl PartialOrd for CollectionKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CollectionKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Never empty: both hold their NUL.
        self.text.cmp(&other.text)
    }
}

/// Resource types by identity: they are the statics of one table, so their address names them
/// (hashing a pointer is cheaper than hashing group and plural on every read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ResourceId(usize);

impl From<&'static ResourceType> for ResourceId {
    fn from(resource: &'static ResourceType) -> Self {
        ResourceId(std::ptr::from_ref(resource) as usize)
    }
}

/// How many past list snapshots a shard keeps for `continue` tokens. A snapshot shares its
/// collection's structure with the live state (a persistent map), so it costs only what has
/// changed since it was taken; the count bounds that, and the TTL below how long it is held.
const MAX_SNAPSHOTS: usize = 256;
/// How long a continue token stays valid when its resource has changed since.
const SNAPSHOT_TTL: Duration = Duration::from_secs(300);

pub(crate) struct StoreShard {
    index: usize,
    revision: Arc<Revision>,
    collections: FastMap<ResourceId, Collection>,
    /// The revision of the last committed change, per resource type.
    modified_at: FastMap<ResourceId, u64>,
    /// Accepted but not yet committed state of keys, newest first: what writes validate against.
    latest: FastMap<ObjectKey, Option<Arc<StoredObject>>>,
    /// Accepted writes not yet committed, oldest first: the order the writer commits them in.
    uncommitted: VecDeque<Accepted>,
    writer: WriterHandle,
    publish: Recipient<Publish>,
    /// Highest revision this shard has committed.
    applied: u64,
    /// The revision the shard was loaded at: a resource with no change committed since has
    /// been as it is since then.
    loaded_at: u64,
    snapshots: Snapshots<Collection>,
    /// What recent commits replaced, for lists at an exact past revision.
    history: History,
    /// Kept up to date as the objects they follow are loaded and committed.
    tables: Arc<AdmissionTables>,
    /// Who waits for the writes accepted before they asked to be committed (`Settle`), with
    /// the revision of the last of those, oldest first.
    settling: VecDeque<(u64, oneshot::Sender<Result<(), StoreError>>)>,
    /// Set once a commit has failed: the disk may have dropped what it was given (a failed
    /// sync is not safely retried), so the shard takes no more writes until the server is
    /// restarted and recovers from what is on disk. Reads go on from the committed state.
    failed: Option<StoreError>,
}

struct Accepted {
    event: WatchEvent,
    reply: oneshot::Sender<Result<Arc<StoredObject>, StoreError>>,
}

struct Snapshot<T> {
    resource: &'static ResourceType,
    revision: u64,
    taken: Instant,
    items: T,
    /// The bytes of the objects changed or deleted since it was taken, which it holds alive.
    pinned: usize,
}

/// The list snapshots kept for `continue` tokens, oldest first: at most [`MAX_SNAPSHOTS`], none
/// older than [`SNAPSHOT_TTL`] (dropped as others are kept, and every minute), and the oldest
/// dropped while what they hold alive passes `budget` bytes (the store history's: counted per
/// snapshot, an object held by several counts for each).
struct Snapshots<T> {
    kept: VecDeque<Snapshot<T>>,
    pinned: usize,
    budget: usize,
}

impl<T: Clone> Snapshots<T> {
    fn new(budget: usize) -> Self {
        Snapshots { kept: VecDeque::new(), pinned: 0, budget }
    }

    /// The snapshot of `resource` at `revision`, if it is kept and not expired.
    fn find(&self, resource: &'static ResourceType, revision: u64) -> Option<T> {
        let kept = self.kept.iter().find(|s| s.resource == resource && s.revision == revision);
        kept.filter(|s| s.taken.elapsed() < SNAPSHOT_TTL).map(|s| s.items.clone())
    }

    fn keep(&mut self, resource: &'static ResourceType, revision: u64, items: T, now: Instant) {
        self.drop_expired(now);
        if self.kept.iter().any(|s| s.resource == resource && s.revision == revision) {
            return;
        }
        if self.kept.len() == MAX_SNAPSHOTS {
            self.drop_oldest();
        }
        self.kept.push_back(Snapshot { resource, revision, taken: now, items, pinned: 0 });
    }

    /// An object of `resource` of `bytes` was changed or deleted: the snapshots of it taken
    /// before hold its old version alive.
    fn charge(&mut self, resource: &'static ResourceType, bytes: usize) {
        for snapshot in self.kept.iter_mut().filter(|s| s.resource == resource) {
            snapshot.pinned += bytes;
            self.pinned += bytes;
        }
        while self.pinned > self.budget && !self.kept.is_empty() {
            self.drop_oldest();
        }
    }

    fn drop_expired(&mut self, now: Instant) {
        while self.kept.front().is_some_and(|s| now.duration_since(s.taken) >= SNAPSHOT_TTL) {
            self.drop_oldest();
        }
    }

    fn drop_oldest(&mut self) {
        if let Some(dropped) = self.kept.pop_front() {
            self.pinned -= dropped.pinned;
        }
    }
}

impl StoreShard {
    /// Builds a shard from the values its engine holds.
    pub(crate) fn load(
        index: usize,
        stored: Entries,
        revision: Arc<Revision>,
        writer: WriterHandle,
        publish: Recipient<Publish>,
        tables: Arc<AdmissionTables>,
    ) -> Result<Self, StoreError> {
        let mut collections: FastMap<ResourceId, Collection> = FastMap::default();
        let mut applied = 0;
        for (key, value) in stored {
            if key == keys::REVISION_KEY {
                applied = applied.max(codec::decode_revision(&value)?);
                continue;
            }
            let object_key = keys::decode(&key)?;
            let (rv, json) = codec::decode_object(&value)?;
            let object = StoredObject::from_raw(object_key.clone(), rv, json.to_vec().into())
                .map_err(|e| StoreError::Corrupt(format!("object {object_key:?}: {e}")))?;
            applied = applied.max(rv);
            let object = Arc::new(object);
            tables.record(&object, false);
            collections
                .entry(object_key.resource.into())
                .or_default()
                .insert(CollectionKey::of(&object_key), object);
        }
        Ok(Self {
            index,
            revision,
            collections,
            modified_at: FastMap::default(),
            latest: FastMap::default(),
            uncommitted: VecDeque::new(),
            writer,
            publish,
            applied,
            loaded_at: applied,
            snapshots: Snapshots::new(history::DEFAULT_BYTES),
            history: History::new(applied, history::DEFAULT_CHANGES, history::DEFAULT_BYTES),
            tables,
            settling: VecDeque::new(),
            failed: None,
        })
    }

    /// Bounds the shard's history (by default as the watch hub's window is).
    pub(crate) fn with_history(mut self, changes: usize, bytes: usize) -> Self {
        self.history = History::new(self.applied, changes, bytes);
        self.snapshots.budget = bytes;
        self
    }

    /// Replaces the revision counter (start-up builds the real one after loading every shard).
    pub(crate) fn with_revision(mut self, revision: Arc<Revision>) -> Self {
        self.revision = revision;
        self
    }

    /// The highest revision found on disk when the shard was loaded (or committed since).
    pub(crate) fn applied_revision(&self) -> u64 {
        self.applied
    }

    fn committed(&self, key: &ObjectKey) -> Option<&Arc<StoredObject>> {
        let wanted: &dyn NamespacedName = &(key.namespace.as_str(), key.name.as_str());
        self.collections.get(&key.resource.into()).and_then(|c| c.get(wanted))
    }

    /// The newest accepted state of a key, committed or not.
    fn newest(&self, key: &ObjectKey) -> Option<Arc<StoredObject>> {
        match self.latest.get(key) {
            Some(state) => state.clone(),
            None => self.committed(key).cloned(),
        }
    }

    fn accept(&mut self, op: WriteOp) -> Result<WatchEvent, StoreError> {
        match op {
            WriteOp::Create(object) => {
                if self.newest(&object.key).is_some() {
                    return Err(StoreError::AlreadyExists(object.key));
                }
                let object = Arc::new(object.at_revision(self.revision.next()));
                Ok(WatchEvent { kind: EventType::Added, object, previous: None })
            }
            WriteOp::Update { object, preconditions } => {
                let key = &object.key;
                let current = self.newest(key).ok_or_else(|| StoreError::NotFound(key.clone()))?;
                preconditions.check(&current)?;
                let object = Arc::new(object.at_revision(self.revision.next()));
                Ok(WatchEvent { kind: EventType::Modified, object, previous: Some(current) })
            }
            WriteOp::Delete { key, preconditions } => {
                let current = self.newest(&key).ok_or_else(|| StoreError::NotFound(key.clone()))?;
                preconditions.check(&current)?;
                let rv = self.revision.next();
                let object = Arc::new(current.at_revision(rv));
                Ok(WatchEvent { kind: EventType::Deleted, object, previous: Some(current) })
            }
        }
    }

    /// Accepts one write (or refuses it at once) and queues it for the writer.
    fn write(&mut self, msg: Write, ctx: &mut Context<Self>) {
        if let Some(failed) = &self.failed {
            let _ = msg.reply.send(Err(failed.clone()));
            return;
        }
        match self.accept(msg.op) {
            Ok(event) => {
                let deleted = event.kind == EventType::Deleted;
                let state = (!deleted).then(|| event.object.clone());
                self.latest.insert(event.object.key.clone(), state);
                if self.writer.queue(event.object.clone(), deleted) {
                    // Once the mailbox has been read: a write that finds the writer idle
                    // waits for the writes queued behind it, to share their sync.
                    ctx.notify(WakeWriter);
                }
                self.uncommitted.push_back(Accepted { event, reply: msg.reply });
            }
            Err(error) => {
                let _ = msg.reply.send(Err(error));
            }
        }
    }

    /// Applies the oldest `writes` uncommitted writes, which the writer has committed (or
    /// failed to): on success their objects become the committed state, their writers get
    /// their replies and the watch hub their events.
    fn on_committed(&mut self, writes: usize, result: Result<(), StoreError>) {
        if let Err(error) = result {
            let failed = StoreError::Failed(error.to_string());
            self.fail_uncommitted(&failed);
            self.failed = Some(failed);
            return;
        }
        let mut events = Vec::with_capacity(writes);
        let writes = writes.min(self.uncommitted.len());
        // Before any reply: a client that has seen one of these revisions lists every other
        // shard's kinds at one at least as new.
        let highest = self.uncommitted.iter().take(writes).map(|a| a.event.object.resource_version);
        self.revision.made_durable(highest.max().unwrap_or(0));
        let committed: Vec<Accepted> = self.uncommitted.drain(..writes).collect();
        for Accepted { event, reply } in committed {
            let key = &event.object.key;
            let collection = self.collections.entry(key.resource.into()).or_default();
            let map_key = CollectionKey::of(key);
            let deleted = event.kind == EventType::Deleted;
            if deleted {
                collection.remove(&map_key);
            } else {
                collection.insert(map_key, event.object.clone());
            }
            self.tables.record(&event.object, deleted);
            let rv = event.object.resource_version;
            self.modified_at.insert(key.resource.into(), rv);
            self.applied = self.applied.max(rv);
            let superseded = match self.latest.get(key) {
                Some(Some(newest)) => newest.resource_version != rv,
                Some(None) => event.kind != EventType::Deleted,
                None => true,
            };
            if !superseded {
                self.latest.remove(key);
            }
            self.history.record(&event.object, event.previous.as_ref());
            let replaced = match event.kind {
                EventType::Deleted => Some(&event.object),
                _ => event.previous.as_ref(),
            };
            if let Some(replaced) = replaced {
                self.snapshots.charge(key.resource, replaced.raw.len());
            }
            let _ = reply.send(Ok(event.object.clone()));
            events.push(event);
        }
        self.publish.do_send(Publish { events });
        while self.settling.front().is_some_and(|(rv, _)| *rv <= self.applied) {
            let (_, settled) = self.settling.pop_front().expect("just seen");
            let _ = settled.send(Ok(()));
        }
    }

    /// A commit failed: every write not yet committed fails with it, since each was checked
    /// against a state that never reached disk. Commits resume with the next write.
    fn fail_uncommitted(&mut self, error: &StoreError) {
        tracing::error!(shard = self.index, %error, "commit failed; failing queued writes");
        self.latest.clear();
        self.writer.discard_queued();
        for accepted in self.uncommitted.drain(..) {
            let _ = accepted.reply.send(Err(error.clone()));
        }
        for (_, settled) in self.settling.drain(..) {
            let _ = settled.send(Err(error.clone()));
        }
    }

    fn list(&mut self, msg: List) -> Result<ListPage, StoreError> {
        let latest =
            msg.continue_from.as_ref().is_some_and(|p| p.revision == ContinuePoint::LATEST);
        let (revision, items) = match (&msg.continue_from, msg.exact) {
            (Some(point), _) if !latest => {
                (point.revision, self.snapshot(msg.resource, point.revision)?)
            }
            (None, Some(exact)) => (exact, self.snapshot(msg.resource, exact)?),
            _ => {
                let items = self.collections.get(&msg.resource.into()).cloned().unwrap_or_default();
                (self.current_state_revision(msg.resource), items)
            }
        };
        let start = match (&msg.continue_from, &msg.filter.namespace) {
            (Some(point), _) => Bound::Excluded(CollectionKey::new(&point.after.0, &point.after.1)),
            (None, Some(ns)) => Bound::Included(CollectionKey::new(ns, "")),
            (None, None) => Bound::Unbounded,
        };
        let limit = msg.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let in_namespace = |key: &CollectionKey| {
            msg.filter.namespace.as_ref().is_none_or(|ns| ns == key.namespace())
        };
        let mut page = Vec::new();
        let mut next = None;
        let mut candidates = items.range((start, Bound::Unbounded));
        while let Some((map_key, object)) = candidates.next() {
            if !in_namespace(map_key) {
                break;
            }
            // A full page goes on while keys remain in scope, matching or not (as Kubernetes'
            // storage tells "more"): the next page may come back empty.
            if page.len() == limit {
                let last: &Arc<StoredObject> = page.last().expect("limit is at least 1");
                let after = (last.key.namespace.clone(), last.key.name.clone());
                // Counted only without selectors, as in Kubernetes: with them, what remains
                // is unknown without filtering it. Counted once, on the first page; each
                // token carries what remains after its page.
                let selected = !msg.filter.labels.is_empty() || !msg.filter.fields.is_empty();
                let remaining = match (&msg.continue_from, &msg.filter.namespace) {
                    _ if selected => None,
                    // Gone on in the latest state: counted there.
                    (Some(_), _) if latest => {
                        Some(1 + candidates.take_while(|(k, _)| in_namespace(k)).count())
                    }
                    (Some(point), _) => point.remaining.map(|r| r.saturating_sub(page.len())),
                    (None, None) => Some(items.len() - limit),
                    (None, Some(_)) => {
                        Some(1 + candidates.take_while(|(k, _)| in_namespace(k)).count())
                    }
                };
                next = Some(ContinuePoint { revision, after, remaining });
                break;
            }
            if !msg.filter.matches(object) {
                continue;
            }
            page.push(object.clone());
        }
        // The pages after one read in the latest state are a snapshot of it.
        if next.is_some() && (msg.continue_from.is_none() || latest) {
            self.keep_snapshot(msg.resource, revision, items);
        }
        Ok(ListPage { resource_version: revision, items: page, next })
    }

    /// Whether no write to `resource` has been accepted and not yet committed.
    fn settled(&self, resource: &'static ResourceType) -> bool {
        !self.latest.keys().any(|key| key.resource == resource)
    }

    /// The revision the committed state of `resource` is the state at: the highest any
    /// shard has on disk, or just below the first write to `resource` still on its way there
    /// if that is lower (revisions for this shard are handed out on its own thread, so none
    /// below that can still come). Never above what is on disk: a revision handed out to a
    /// write still on its way there is handed out again after a crash, and a watch resumed
    /// from it would miss that write; a lower one never is (start-up resumes above the
    /// highest on disk).
    fn current_state_revision(&self, resource: &'static ResourceType) -> u64 {
        let durable = self.revision.durable();
        let pending = self.uncommitted.iter().map(|accepted| &accepted.event.object);
        let first = pending.filter(|o| o.key.resource == resource).map(|o| o.resource_version);
        match first.min() {
            Some(first) => durable.min(first - 1).max(self.applied),
            None => durable.max(self.applied),
        }
    }

    fn snapshot(
        &self,
        resource: &'static ResourceType,
        revision: u64,
    ) -> Result<Collection, StoreError> {
        // Unchanged since `revision`, and no write to it accepted but not yet committed (which
        // may hold a revision up to `revision`): the current state is the state at `revision`.
        // (The caller checked that `revision` has been handed out.)
        let modified_at = self.modified_at.get(&resource.into()).copied();
        let unchanged = modified_at.unwrap_or(self.loaded_at) <= revision && self.settled(resource);
        if unchanged {
            return Ok(self.collections.get(&resource.into()).cloned().unwrap_or_default());
        }
        if let Some(kept) = self.snapshots.find(resource, revision) {
            return Ok(kept);
        }
        // The current state with every later change undone, unless a write at or below
        // `revision` is still on its way to disk (the state at `revision` holds it).
        let pending = self.uncommitted.iter().any(|accepted| {
            let object = &accepted.event.object;
            object.key.resource == resource && object.resource_version <= revision
        });
        let undo = self.history.undo_after(resource, revision).filter(|_| !pending);
        let undo = undo.ok_or(StoreError::Expired(revision))?;
        let mut items = self.collections.get(&resource.into()).cloned().unwrap_or_default();
        for step in undo {
            match step {
                Undo::Restore(object) => {
                    items.insert(CollectionKey::of(&object.key), object.clone());
                }
                Undo::Remove(object) => {
                    items.remove(&CollectionKey::of(&object.key));
                }
            }
        }
        Ok(items)
    }

    fn keep_snapshot(&mut self, resource: &'static ResourceType, revision: u64, items: Collection) {
        self.snapshots.keep(resource, revision, items, Instant::now());
    }
}

impl Actor for StoreShard {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        crate::threads::name_current(&format!("kplane-shard-{}", self.index));
        // Writers queue far more than the default 16 messages under load.
        ctx.set_mailbox_capacity(4096);
        // What expired snapshots hold goes even when no list comes.
        ctx.run_interval(Duration::from_secs(60), |shard, _| {
            shard.snapshots.drop_expired(Instant::now());
        });
    }
}

// === messages ===

/// A change to one object. Never dropped: the reply is sent once the change is durable or has
/// been refused.
pub(crate) enum WriteOp {
    Create(PreparedObject),
    Update { object: PreparedObject, preconditions: Preconditions },
    Delete { key: ObjectKey, preconditions: Preconditions },
}

impl WriteOp {
    pub(crate) fn key(&self) -> &ObjectKey {
        match self {
            WriteOp::Create(object) | WriteOp::Update { object, .. } => &object.key,
            WriteOp::Delete { key, .. } => key,
        }
    }
}

pub(crate) struct Write {
    pub(crate) op: WriteOp,
    pub(crate) reply: oneshot::Sender<Result<Arc<StoredObject>, StoreError>>,
}

/// Changes, applied in order (see `outbox`).
pub(crate) struct Writes(pub(crate) Vec<Write>);

impl Message for Writes {
    type Result = ();
}

impl Handler<Writes> for StoreShard {
    type Result = ();

    fn handle(&mut self, Writes(writes): Writes, ctx: &mut Context<Self>) {
        for write in writes {
            self.write(write, ctx);
        }
    }
}

/// Internal: wake the idle writer to commit what has been queued.
struct WakeWriter;

impl Message for WakeWriter {
    type Result = ();
}

impl Handler<WakeWriter> for StoreShard {
    type Result = ();

    fn handle(&mut self, _: WakeWriter, ctx: &mut Context<Self>) {
        if let Err(error) = self.writer.wake(ctx.address().recipient()) {
            self.fail_uncommitted(&error);
        }
    }
}

/// The writer's report of one commit: of the oldest `writes` writes not yet committed.
pub(crate) struct Committed {
    pub(crate) writes: usize,
    pub(crate) result: Result<(), StoreError>,
}

impl Message for Committed {
    type Result = ();
}

impl Handler<Committed> for StoreShard {
    type Result = ();

    fn handle(&mut self, Committed { writes, result }: Committed, _: &mut Context<Self>) {
        self.on_committed(writes, result);
    }
}

/// Answers once every write the shard has accepted so far is committed or has failed (an
/// error if one failed, or once the shard takes no writes). A read-modify-write whose write
/// met a newer accepted state waits for it before reading again, as reads see only committed
/// state. Never dropped.
pub(crate) struct Settle(pub(crate) oneshot::Sender<Result<(), StoreError>>);

impl Message for Settle {
    type Result = ();
}

impl Handler<Settle> for StoreShard {
    type Result = ();

    fn handle(&mut self, Settle(settled): Settle, _: &mut Context<Self>) {
        match self.uncommitted.back() {
            Some(newest) => {
                self.settling.push_back((newest.event.object.resource_version, settled))
            }
            None => {
                let _ = settled.send(self.failed.clone().map_or(Ok(()), Err));
            }
        }
    }
}

/// Read one committed object. May not be dropped.
pub(crate) struct Get(pub(crate) ObjectKey);

impl Message for Get {
    type Result = Option<Arc<StoredObject>>;
}

impl Handler<Get> for StoreShard {
    type Result = Option<Arc<StoredObject>>;

    fn handle(&mut self, msg: Get, _: &mut Context<Self>) -> Self::Result {
        self.committed(&msg.0).cloned()
    }
}

/// Where a paginated list goes on: the snapshot revision and the last key returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinuePoint {
    /// The snapshot's revision; [`ContinuePoint::LATEST`] goes on in the latest state.
    pub revision: u64,
    pub after: (String, String),
    /// How many objects the list has left after `after`, when it has no selector.
    pub remaining: Option<usize>,
}

impl ContinuePoint {
    /// The revision of a continue point that goes on in the latest state rather than a
    /// snapshot (Kubernetes' token with revision -1, given once the snapshot is gone).
    pub const LATEST: u64 = 0;
}

/// One page of a list: a consistent snapshot at `resource_version`.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub resource_version: u64,
    pub items: Vec<Arc<StoredObject>>,
    pub next: Option<ContinuePoint>,
}

/// List committed objects of one resource type. May not be dropped.
pub(crate) struct List {
    pub(crate) resource: &'static ResourceType,
    pub(crate) filter: ObjectFilter,
    pub(crate) limit: Option<usize>,
    pub(crate) continue_from: Option<ContinuePoint>,
    /// List the state at exactly this revision (resourceVersionMatch=Exact).
    pub(crate) exact: Option<u64>,
}

impl Message for List {
    type Result = Result<ListPage, StoreError>;
}

impl Handler<List> for StoreShard {
    type Result = Result<ListPage, StoreError>;

    fn handle(&mut self, msg: List, _: &mut Context<Self>) -> Self::Result {
        self.list(msg)
    }
}

/// Stop the shard once everything accepted is durable. Never dropped.
pub(crate) struct Stop;

impl Message for Stop {
    type Result = ();
}

impl Handler<Stop> for StoreShard {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        if !self.uncommitted.is_empty() {
            ctx.notify_later(Stop, Duration::from_millis(5));
        } else {
            ctx.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Condvar, Mutex};

    use serde_json::json;

    use super::*;
    use crate::model::resources::find;
    use crate::store::engine::{BatchEntry, Engine};
    use crate::testing::eventually;

    /// An engine whose commits wait until the test opens its gate, and fail while `failing`.
    #[derive(Default)]
    struct GatedEngine {
        open: Mutex<bool>,
        opened: Condvar,
        failing: Mutex<bool>,
        /// The keys of each commit that succeeded, the revision record left out.
        committed: Mutex<Vec<Vec<Vec<u8>>>>,
        /// How many commits have started.
        started: Mutex<usize>,
    }

    impl GatedEngine {
        fn set_open(&self, open: bool) {
            *self.open.lock().unwrap() = open;
            self.opened.notify_all();
        }
    }

    impl Engine for GatedEngine {
        fn load_all(&self) -> Result<Entries, StoreError> {
            Ok(Vec::new())
        }

        fn commit(&self, batch: &[BatchEntry<'_>]) -> Result<(), StoreError> {
            *self.started.lock().unwrap() += 1;
            let open = self.open.lock().unwrap();
            drop(self.opened.wait_while(open, |open| !*open).unwrap());
            if *self.failing.lock().unwrap() {
                return Err(StoreError::Engine("disk full".into()));
            }
            let keys = batch.iter().map(|(k, _)| k.to_vec()).filter(|k| k != keys::REVISION_KEY);
            self.committed.lock().unwrap().push(keys.collect());
            Ok(())
        }
    }

    /// Collects what the shard publishes.
    struct Published(Arc<Mutex<Vec<u64>>>);

    impl Actor for Published {
        type Context = Context<Self>;
    }

    impl Handler<Publish> for Published {
        type Result = ();

        fn handle(&mut self, msg: Publish, _: &mut Context<Self>) {
            let revisions = msg.events.iter().map(|e| e.object.resource_version);
            self.0.lock().unwrap().extend(revisions);
        }
    }

    fn start(engine: Arc<GatedEngine>) -> (Addr<StoreShard>, Arc<Mutex<Vec<u64>>>) {
        start_counting(engine, Arc::default())
    }

    /// As `start`, drawing revisions from `revision`, which other shards may share.
    fn start_counting(
        engine: Arc<GatedEngine>,
        revision: Arc<Revision>,
    ) -> (Addr<StoreShard>, Arc<Mutex<Vec<u64>>>) {
        let writer = crate::store::CommitMetrics::new().start_writer(0, engine);
        let published = Arc::new(Mutex::new(Vec::new()));
        let publish = Published(published.clone()).start().recipient();
        let tables = Arc::default();
        let shard = StoreShard::load(0, Vec::new(), revision, writer, publish, tables).unwrap();
        (shard.start(), published)
    }

    fn create(shard: &Addr<StoreShard>, name: &str) -> oneshot::Receiver<WriteResult> {
        let pods = find("", "v1", "pods").unwrap();
        let key = ObjectKey::new(pods, "ns", name);
        let object = PreparedObject::new(key, json!({"metadata": {"name": name}}));
        let (reply, outcome) = oneshot::channel();
        shard.do_send(Writes(vec![Write { op: WriteOp::Create(object), reply }]));
        outcome
    }

    type WriteResult = Result<Arc<StoredObject>, StoreError>;

    fn names(committed: &[Vec<Vec<u8>>]) -> Vec<Vec<String>> {
        let name = |key: &Vec<u8>| keys::decode(key).unwrap().name;
        committed.iter().map(|batch| batch.iter().map(name).collect()).collect()
    }

    /// Creates "a", and then `later` while the commit of "a" is held at the engine's gate.
    async fn during_a_held_commit(
        shard: &Addr<StoreShard>,
        engine: &GatedEngine,
        later: &[&str],
    ) -> (oneshot::Receiver<WriteResult>, Vec<oneshot::Receiver<WriteResult>>) {
        let first = create(shard, "a");
        eventually("the first commit starts", || async {
            (*engine.started.lock().unwrap() == 1).then_some(())
        })
        .await;
        let later = later.iter().map(|n| create(shard, n)).collect();
        // A read round trip: the shard has accepted the later writes.
        let pods = find("", "v1", "pods").unwrap();
        shard.send(Get(ObjectKey::new(pods, "ns", "a"))).await.unwrap();
        (first, later)
    }

    #[test]
    fn collection_keys_order_as_their_namespace_and_name_pairs() {
        let pairs = [
            ("", ""),
            ("", "a"),
            ("", "node-1"),
            ("a", ""),
            ("a", "x"),
            ("a", "x\0y"),
            ("ab", ""),
            ("default", "c0-1-64-12"),
            ("default", "c0-1-64-2"),
            ("kube-system", "a"),
        ];
        for a in pairs {
            for b in pairs {
                let (key_a, key_b) = (CollectionKey::new(a.0, a.1), CollectionKey::new(b.0, b.1));
                let by_pair = (&a as &dyn NamespacedName).cmp(&b as &dyn NamespacedName);
                assert_eq!(key_a.cmp(&key_b), by_pair, "{a:?} against {b:?}");
                assert_eq!((&key_a as &dyn NamespacedName).cmp(&b), by_pair);
                assert_eq!(by_pair, a.cmp(&b));
            }
            assert_eq!(CollectionKey::new(a.0, a.1).parts(), a);
        }
    }

    #[actix::test]
    async fn writes_accepted_during_a_commit_are_the_next_batch_in_order() {
        let engine = Arc::new(GatedEngine::default());
        let (shard, published) = start(engine.clone());
        let (first, later) = during_a_held_commit(&shard, &engine, &["b", "c", "d"]).await;
        engine.set_open(true);
        let mut revisions = vec![first.await.unwrap().unwrap().resource_version];
        for outcome in later {
            revisions.push(outcome.await.unwrap().unwrap().resource_version);
        }
        assert!(revisions.windows(2).all(|w| w[0] < w[1]), "{revisions:?}");
        let committed = engine.committed.lock().unwrap().clone();
        assert_eq!(names(&committed), [vec!["a"], vec!["b", "c", "d"]]);
        eventually("all four are published", || async {
            (published.lock().unwrap().len() == 4).then_some(())
        })
        .await;
        assert_eq!(*published.lock().unwrap(), revisions);
    }

    #[actix::test]
    async fn a_list_names_no_revision_a_write_still_on_its_way_to_disk_holds() {
        let engine = Arc::new(GatedEngine::default());
        let revision = Arc::new(Revision::default());
        let (shard, _) = start_counting(engine.clone(), revision.clone());
        let (first, _) = during_a_held_commit(&shard, &engine, &[]).await;
        let at = |resource| {
            let shard = shard.clone();
            let filter = ObjectFilter::default();
            let list = List { resource, filter, limit: None, continue_from: None, exact: None };
            async move { shard.send(list).await.unwrap().unwrap().resource_version }
        };
        let (pods, configmaps) =
            (find("", "v1", "pods").unwrap(), find("", "v1", "configmaps").unwrap());
        // Revision 1 is handed out to pod "a", whose commit a crash could still lose (and a
        // restart then hand out again): neither kind is listed at it.
        assert_eq!(at(configmaps).await, 0);
        assert_eq!(at(pods).await, 0);
        // Another shard commits revision 2: configmaps are at it; pods still below "a".
        assert_eq!(revision.next(), 2);
        revision.made_durable(2);
        assert_eq!(at(configmaps).await, 2);
        assert_eq!(at(pods).await, 0);
        engine.set_open(true);
        assert_eq!(first.await.unwrap().unwrap().resource_version, 1);
        assert_eq!(at(pods).await, 2, "on disk now");
    }

    #[actix::test]
    async fn a_failed_commit_fails_the_writes_accepted_after_it_and_the_shard_takes_no_more() {
        let engine = Arc::new(GatedEngine::default());
        *engine.failing.lock().unwrap() = true;
        let (shard, published) = start(engine.clone());
        let (first, later) = during_a_held_commit(&shard, &engine, &["b", "c"]).await;
        engine.set_open(true);
        assert!(matches!(first.await.unwrap(), Err(StoreError::Failed(_))));
        for outcome in later {
            // Checked against a state that never reached disk: never committed.
            assert!(matches!(outcome.await.unwrap(), Err(StoreError::Failed(_))));
        }
        assert_eq!(*engine.started.lock().unwrap(), 1, "nothing after a failure is committed");
        // A failed sync is not safely retried (the disk may have dropped what it was given):
        // no more writes reach the engine, even once it would take them, and the shard says
        // so to whoever checks it. Reads go on.
        *engine.failing.lock().unwrap() = false;
        let refused = create(&shard, "b").await.unwrap();
        assert!(matches!(refused, Err(StoreError::Failed(_))), "{refused:?}");
        assert_eq!(*engine.started.lock().unwrap(), 1);
        let (settled, check) = oneshot::channel();
        shard.send(Settle(settled)).await.unwrap();
        assert!(matches!(check.await.unwrap(), Err(StoreError::Failed(_))));
        let pods = find("", "v1", "pods").unwrap();
        assert!(shard.send(Get(ObjectKey::new(pods, "ns", "a"))).await.unwrap().is_none());
        assert!(published.lock().unwrap().is_empty());
    }

    #[test]
    fn list_snapshots_go_when_expired_or_when_too_many_are_kept() {
        let (pods, cms) =
            (crate::model::resources::core("pods"), crate::model::resources::core("configmaps"));
        let start = Instant::now();
        let mut snapshots = Snapshots::new(usize::MAX);
        snapshots.keep(pods, 1, "one", start);
        snapshots.keep(pods, 1, "again", start);
        snapshots.keep(cms, 1, "cms", start + Duration::from_secs(200));
        assert_eq!(snapshots.find(pods, 1), Some("one"), "kept once");
        assert_eq!(snapshots.find(pods, 2), None);

        snapshots.drop_expired(start + SNAPSHOT_TTL);
        assert_eq!(snapshots.kept.len(), 1, "the expired one went, the later one stays");
        assert_eq!(snapshots.find(cms, 1), Some("cms"));
        snapshots.keep(pods, 3, "three", start + SNAPSHOT_TTL + Duration::from_secs(200));
        assert_eq!(snapshots.find(cms, 1), None, "expired as another was kept");

        for revision in 0..2 * MAX_SNAPSHOTS as u64 {
            snapshots.keep(pods, 10 + revision, "many", start + SNAPSHOT_TTL);
        }
        assert_eq!(snapshots.kept.len(), MAX_SNAPSHOTS);
    }

    #[test]
    fn list_snapshots_go_oldest_first_while_what_they_hold_passes_the_budget() {
        let (pods, cms) =
            (crate::model::resources::core("pods"), crate::model::resources::core("configmaps"));
        let now = Instant::now();
        let mut snapshots = Snapshots::new(1_000);
        snapshots.keep(pods, 1, "old", now);
        snapshots.keep(cms, 2, "cms", now);
        snapshots.keep(pods, 3, "new", now);
        snapshots.charge(pods, 400);
        assert_eq!(snapshots.pinned, 800, "each pod snapshot holds the old version");
        assert_eq!(snapshots.kept.len(), 3);
        snapshots.charge(pods, 300);
        assert_eq!(snapshots.find(pods, 1), None, "the oldest went past the budget");
        assert_eq!(snapshots.find(pods, 3), Some("new"));
        assert_eq!(snapshots.find(cms, 2), Some("cms"), "it holds nothing");
        assert_eq!(snapshots.pinned, 700);
        snapshots.charge(cms, 400);
        assert_eq!(snapshots.find(cms, 2), None, "the oldest went, at 1,100");
        assert_eq!((snapshots.pinned, snapshots.find(pods, 3)), (700, Some("new")));
    }
}
