//! The shard writer: a synchronous actor that owns the blocking commit of one shard's batches,
//! and the queue through which its shard hands it accepted writes.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Instant;

use actix::{Actor, Addr, Context, Handler, Message, Recipient};
use prometheus::Histogram;

use super::engine::{BatchEntry, Engine};
use super::shard::Committed;
use super::{codec, keys, StoreError};
use crate::model::StoredObject;

/// An accepted write on its way to disk: the object, and whether it was deleted.
type QueuedWrite = (Arc<StoredObject>, bool);

/// Runs alone on its own arbiter thread, so a WAL sync never stalls the shard's mailbox: the
/// shard keeps serving reads and queueing writes while a batch is on disk. Not a `SyncArbiter`:
/// that relays each message through a forwarding actor on the thread that started it (here the
/// system's, busy with the watch hub and the garbage collector), which under load added ~300 µs
/// to every commit. Sent to directly, the writer's mailbox wakes its own thread.
///
/// Group commit: each time a commit ends, the writer takes everything its shard has queued
/// meanwhile as the next batch, at once. The shard wakes it only when it had found the queue
/// empty. (When the shard handed over each batch itself, in reply to the writer's report of
/// the one before, the writer sat idle between commits about as long as a commit took, under
/// load: the report and the next batch each waited for a busy core to wake a thread.)
pub(crate) struct ShardWriter {
    /// The shard's index, which names the writer's thread.
    index: usize,
    engine: Arc<dyn Engine>,
    queue: Arc<CommitQueue>,
    /// The writes being committed; its allocation goes back and forth with the queue's.
    batch: Vec<QueuedWrite>,
    /// Writes per commit: what group commit shares one sync among.
    batch_size: Histogram,
    /// How long a commit takes, the WAL's sync included.
    duration: Histogram,
    /// Where a batch's keys and values are encoded, kept from one batch to the next: encoding
    /// here rather than in the shard allocates nothing per write, and no buffer is allocated
    /// on one thread and freed on another (which, under load, kept the allocator faulting in
    /// fresh pages).
    encoded: Vec<u8>,
    /// Declared after `engine`, so dropped after it (fields drop in order): once its count is
    /// zero the engine, if this was its last holder, has been closed, not just begun to close.
    _released: Arc<()>,
}

impl ShardWriter {
    /// Starts a writer over `engine` on a thread of its own, and returns its shard's handle.
    pub(crate) fn start(
        index: usize,
        engine: Arc<dyn Engine>,
        batch_size: Histogram,
        duration: Histogram,
    ) -> WriterHandle {
        let queue = Arc::new(CommitQueue::default());
        let released = Arc::new(());
        let writer = ShardWriter {
            index,
            engine,
            queue: queue.clone(),
            batch: Vec::new(),
            batch_size,
            duration,
            encoded: Vec::new(),
            _released: released.clone(),
        };
        let addr = ShardWriter::start_in_arbiter(&actix::Arbiter::new().handle(), move |_| writer);
        WriterHandle { addr, queue, released: Arc::downgrade(&released) }
    }

    /// Commits `self.batch` atomically and durably.
    fn commit(&mut self) -> Result<(), StoreError> {
        let started = Instant::now();
        let entries = encode(&mut self.encoded, &self.batch);
        let result = self.engine.commit(&entries);
        if self.encoded.capacity() > MAX_KEPT_BUFFER {
            self.encoded = Vec::new();
        }
        self.duration.observe(started.elapsed().as_secs_f64());
        self.batch_size.observe(self.batch.len() as f64);
        result
    }
}

impl Actor for ShardWriter {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Context<Self>) {
        crate::threads::name_current(&format!("kplane-writer-{}", self.index));
    }

    /// The thread is the writer's alone and ends with it. The writer stops once the shard, the
    /// one holder of its address, has stopped; the engine is dropped with it.
    fn stopped(&mut self, _: &mut Context<Self>) {
        actix::Arbiter::current().stop();
    }
}

/// The most buffer a writer keeps between batches; a larger batch's is freed after it.
const MAX_KEPT_BUFFER: usize = 8 << 20;

/// The writes a shard has accepted and its writer not yet taken, in the order accepted.
#[derive(Default)]
struct CommitQueue(Mutex<Queued>);

struct Queued {
    writes: Vec<QueuedWrite>,
    /// The writer found nothing to take (or was halted) and waits to be woken.
    idle: bool,
    /// A commit failed: nothing more is taken until the shard has failed every write accepted
    /// after it (they were checked against a state that never reached disk).
    halted: bool,
}

impl Default for Queued {
    fn default() -> Self {
        Self { writes: Vec::new(), idle: true, halted: false }
    }
}

impl CommitQueue {
    fn lock(&self) -> MutexGuard<'_, Queued> {
        // Nothing panics while holding the lock; a poisoned one still holds a whole queue.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves every queued write into `batch` (empty), unless there is none or the queue is
    /// halted: then the writer counts as idle, and `false` is returned.
    fn take(&self, batch: &mut Vec<QueuedWrite>) -> bool {
        let mut queued = self.lock();
        if queued.halted || queued.writes.is_empty() {
            queued.idle = true;
            return false;
        }
        std::mem::swap(&mut queued.writes, batch);
        true
    }

    /// Appends a write; true for the first one since the writer went idle, which must wake it.
    fn push(&self, write: QueuedWrite) -> bool {
        let mut queued = self.lock();
        queued.writes.push(write);
        std::mem::take(&mut queued.idle)
    }

    fn halt(&self) {
        let mut queued = self.lock();
        queued.halted = true;
        queued.idle = true;
    }

    fn discard(&self) {
        let mut queued = self.lock();
        queued.writes.clear();
        queued.halted = false;
        queued.idle = true;
    }
}

/// The shard's side of its writer.
pub(crate) struct WriterHandle {
    addr: Addr<ShardWriter>,
    queue: Arc<CommitQueue>,
    released: Weak<()>,
}

impl WriterHandle {
    /// Queues an accepted write. True when the writer is idle and must be woken (`wake`): the
    /// first write queued after it found the queue empty.
    pub(crate) fn queue(&self, object: Arc<StoredObject>, deleted: bool) -> bool {
        self.queue.push((object, deleted))
    }

    /// Dead once the writer has stopped and dropped its engine.
    pub(crate) fn released(&self) -> Weak<()> {
        self.released.clone()
    }

    /// Wakes the idle writer, which reports each commit it makes to `done`.
    pub(crate) fn wake(&self, done: Recipient<Committed>) -> Result<(), StoreError> {
        self.addr
            .try_send(Wake { done })
            .map_err(|error| StoreError::Engine(format!("the shard's writer is gone: {error}")))
    }

    /// After a failed commit, once the shard has failed what it had accepted since: drops the
    /// queued writes, and lets the writer take new ones.
    pub(crate) fn discard_queued(&self) {
        self.queue.discard();
    }
}

/// Commit what the queue holds, in batches, until it is empty; report each commit to `done`.
struct Wake {
    done: Recipient<Committed>,
}

impl Message for Wake {
    type Result = ();
}

impl Handler<Wake> for ShardWriter {
    type Result = ();

    fn handle(&mut self, Wake { done }: Wake, _: &mut Context<Self>) {
        while self.queue.take(&mut self.batch) {
            let result = self.commit();
            let writes = self.batch.len();
            self.batch.clear();
            let failed = result.is_err();
            if failed {
                // Before the report: the shard lets commits resume once it has read it.
                self.queue.halt();
            }
            done.do_send(Committed { writes, result });
            if failed {
                return;
            }
        }
    }
}

/// The batch's entries, encoded into `buffer`: each object's key and (unless deleted) its
/// value, then the revision record (the batch's highest).
fn encode<'a>(buffer: &'a mut Vec<u8>, writes: &[QueuedWrite]) -> Vec<BatchEntry<'a>> {
    buffer.clear();
    let mut ends = Vec::with_capacity(writes.len());
    for (object, deleted) in writes {
        keys::encode(buffer, &object.key);
        let key_end = buffer.len();
        if !deleted {
            codec::encode_object(buffer, object.resource_version, &object.raw);
        }
        ends.push((key_end, (!deleted).then_some(buffer.len())));
    }
    let revision_at = buffer.len();
    let highest = writes.iter().map(|(object, _)| object.resource_version).max();
    codec::encode_revision(buffer, highest.unwrap_or(0));
    let buffer: &'a [u8] = buffer;
    let mut entries = Vec::with_capacity(ends.len() + 1);
    let mut start = 0;
    for (key_end, value_end) in ends {
        let value = value_end.map(|end| &buffer[key_end..end]);
        entries.push((&buffer[start..key_end], value));
        start = value_end.unwrap_or(key_end);
    }
    entries.push((keys::REVISION_KEY, Some(&buffer[revision_at..])));
    entries
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::resources::find;
    use crate::model::{ObjectKey, PreparedObject};

    #[test]
    fn a_batch_is_encoded_into_one_buffer_key_value_key_value() {
        let pods = find("", "v1", "pods").unwrap();
        let object = |name: &str, rv| {
            let key = ObjectKey::new(pods, "ns", name);
            Arc::new(PreparedObject::new(key, json!({"metadata": {"name": name}})).at_revision(rv))
        };
        let (created, deleted) = (object("a", 7), object("b", 9));
        let writes = vec![(created.clone(), false), (deleted, true)];
        let mut buffer = b"left from the batch before".to_vec();
        let entries = encode(&mut buffer, &writes);
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].0, b"o//pods/ns/a");
        let (rv, json) = codec::decode_object(entries[0].1.unwrap()).unwrap();
        assert_eq!((rv, json), (7, &created.raw[..]));
        assert_eq!(entries[1], (&b"o//pods/ns/b"[..], None));
        assert_eq!(entries[2].0, keys::REVISION_KEY);
        assert_eq!(codec::decode_revision(entries[2].1.unwrap()).unwrap(), 9);
    }

    #[test]
    fn the_queue_asks_for_one_wake_per_idle_spell_and_holds_back_while_halted() {
        let pods = find("", "v1", "pods").unwrap();
        let write = |name: &str| {
            let key = ObjectKey::new(pods, "ns", name);
            let object = PreparedObject::new(key, json!({"metadata": {"name": name}}));
            (Arc::new(object.at_revision(1)), false)
        };
        let queue = CommitQueue::default();
        assert!(queue.push(write("a")), "a new writer is idle: the first write wakes it");
        assert!(!queue.push(write("b")), "one wake until the writer finds the queue empty");
        let mut batch = Vec::new();
        assert!(queue.take(&mut batch));
        assert_eq!(batch.len(), 2);
        batch.clear();
        assert!(!queue.take(&mut batch), "nothing left: the writer goes idle");
        assert!(queue.push(write("c")));
        queue.halt();
        assert!(queue.push(write("d")), "a halted writer waits, and is woken");
        assert!(!queue.take(&mut batch), "but takes nothing while halted");
        assert!(queue.push(write("e")), "finding it halted, the writer went idle again");
        queue.discard();
        assert!(queue.push(write("f")), "after the discard the writer is idle");
        assert!(queue.take(&mut batch));
        let names: Vec<&str> = batch.iter().map(|(o, _)| o.key.name.as_str()).collect();
        assert_eq!(names, ["f"], "what was queued before the discard is gone");
    }
}
