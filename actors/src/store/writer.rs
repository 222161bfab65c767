//! The shard writer: a synchronous actor that owns the blocking commit of one shard's batches.

use std::sync::Arc;
use std::time::Instant;

use actix::{Actor, Context, Handler, Message, Recipient};
use prometheus::Histogram;

use super::engine::{BatchEntry, Engine};
use super::shard::Committed;
use super::{codec, keys};
use crate::model::StoredObject;

/// Runs alone on its own arbiter thread, so a WAL sync never stalls the shard's mailbox: the
/// shard keeps serving reads and queueing writes while a batch is on disk. Not a `SyncArbiter`:
/// that relays each message through a forwarding actor on the thread that started it (here the
/// system's, busy with the watch hub and the garbage collector), which under load added ~300 µs
/// to every commit. Sent to directly, the writer's mailbox wakes its own thread.
pub(crate) struct ShardWriter {
    engine: Arc<dyn Engine>,
    /// Writes per commit: what group commit shares one sync among.
    batch_size: Histogram,
    /// How long a commit takes, the WAL's sync included.
    duration: Histogram,
    /// Where a batch's keys and values are encoded, kept from one batch to the next: encoding
    /// here rather than in the shard allocates nothing per write, and no buffer is allocated
    /// on one thread and freed on another (which, under load, kept the allocator faulting in
    /// fresh pages).
    encoded: Vec<u8>,
}

impl ShardWriter {
    pub(crate) fn new(engine: Arc<dyn Engine>, batch_size: Histogram, duration: Histogram) -> Self {
        Self { engine, batch_size, duration, encoded: Vec::new() }
    }
}

impl Actor for ShardWriter {
    type Context = Context<Self>;

    /// The thread is the writer's alone and ends with it. The writer stops once the shard, the
    /// one holder of its address, has stopped; the engine is dropped with it.
    fn stopped(&mut self, _: &mut Context<Self>) {
        actix::Arbiter::current().stop();
    }
}

/// The most buffer a writer keeps between batches; a larger batch's is freed after it.
const MAX_KEPT_BUFFER: usize = 8 << 20;

/// Commit one group of writes atomically and durably, then tell `done` how it went. Never
/// dropped: the shard waits for it.
pub(crate) struct Commit {
    /// The objects written, in order, each with whether it was deleted.
    pub(crate) writes: Vec<(Arc<StoredObject>, bool)>,
    /// The outcome goes to the shard's mailbox, in line with its other messages: a spawned
    /// reply would wait until the mailbox is empty, which under load it seldom is.
    pub(crate) done: Recipient<Committed>,
}

impl Message for Commit {
    type Result = ();
}

impl Handler<Commit> for ShardWriter {
    type Result = ();

    fn handle(&mut self, msg: Commit, _: &mut Context<Self>) {
        let started = Instant::now();
        let entries = encode(&mut self.encoded, &msg);
        let result = self.engine.commit(&entries);
        if self.encoded.capacity() > MAX_KEPT_BUFFER {
            self.encoded = Vec::new();
        }
        self.duration.observe(started.elapsed().as_secs_f64());
        self.batch_size.observe(msg.writes.len() as f64);
        msg.done.do_send(Committed(result));
    }
}

/// The batch's entries, encoded into `buffer`: each object's key and (unless deleted) its
/// value, then the revision record (the batch's highest).
fn encode<'a>(buffer: &'a mut Vec<u8>, msg: &Commit) -> Vec<BatchEntry<'a>> {
    buffer.clear();
    let mut ends = Vec::with_capacity(msg.writes.len());
    for (object, deleted) in &msg.writes {
        keys::encode(buffer, &object.key);
        let key_end = buffer.len();
        if !deleted {
            codec::encode_object(buffer, object.resource_version, &object.raw);
        }
        ends.push((key_end, (!deleted).then_some(buffer.len())));
    }
    let revision_at = buffer.len();
    let highest = msg.writes.iter().map(|(object, _)| object.resource_version).max();
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

    #[actix::test]
    async fn a_batch_is_encoded_into_one_buffer_key_value_key_value() {
        let pods = find("", "v1", "pods").unwrap();
        let object = |name: &str, rv| {
            let key = ObjectKey::new(pods, "ns", name);
            Arc::new(PreparedObject::new(key, json!({"metadata": {"name": name}})).at_revision(rv))
        };
        let (created, deleted) = (object("a", 7), object("b", 9));
        let done = Ignored.start().recipient();
        let writes = vec![(created.clone(), false), (deleted, true)];
        let msg = Commit { writes, done };
        let mut buffer = b"left from the batch before".to_vec();
        let entries = encode(&mut buffer, &msg);
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].0, b"o//pods/ns/a");
        let (rv, json) = codec::decode_object(entries[0].1.unwrap()).unwrap();
        assert_eq!((rv, json), (7, &created.raw[..]));
        assert_eq!(entries[1], (&b"o//pods/ns/b"[..], None));
        assert_eq!(entries[2].0, keys::REVISION_KEY);
        assert_eq!(codec::decode_revision(entries[2].1.unwrap()).unwrap(), 9);
    }

    /// A recipient for `Committed` that nothing is sent to.
    struct Ignored;

    impl Actor for Ignored {
        type Context = Context<Self>;
    }

    impl Handler<Committed> for Ignored {
        type Result = ();

        fn handle(&mut self, _: Committed, _: &mut Context<Self>) {}
    }
}
