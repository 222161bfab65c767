//! The shard writer: a synchronous actor that owns the blocking commit of one shard's batches.

use std::sync::Arc;
use std::time::Instant;

use actix::{Actor, Context, Handler, Message, Recipient};
use prometheus::Histogram;

use super::engine::{BatchEntry, Engine};
use super::shard::Committed;

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
}

impl ShardWriter {
    pub(crate) fn new(engine: Arc<dyn Engine>, batch_size: Histogram, duration: Histogram) -> Self {
        Self { engine, batch_size, duration }
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

/// Commit one group of writes atomically and durably, then tell `done` how it went. Never
/// dropped: the shard waits for it.
pub(crate) struct Commit {
    pub(crate) batch: Vec<BatchEntry>,
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
        // Every batch also carries the revision record.
        let writes = msg.batch.len().saturating_sub(1);
        let started = Instant::now();
        let result = self.engine.commit(msg.batch);
        self.duration.observe(started.elapsed().as_secs_f64());
        self.batch_size.observe(writes as f64);
        msg.done.do_send(Committed(result));
    }
}
