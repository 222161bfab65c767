//! The shard writer: a synchronous actor that owns the blocking commit of one shard's batches.

use std::sync::Arc;
use std::time::Instant;

use actix::{Actor, Handler, Message, Recipient, SyncContext};
use prometheus::Histogram;

use super::engine::{BatchEntry, Engine};
use super::shard::Committed;

/// Runs on its own thread (a `SyncArbiter` of one) so a WAL sync never stalls the shard's
/// mailbox: the shard keeps serving reads and queueing writes while a batch is on disk.
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
    type Context = SyncContext<Self>;
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

    fn handle(&mut self, msg: Commit, _: &mut SyncContext<Self>) {
        // Every batch also carries the revision record.
        let writes = msg.batch.len().saturating_sub(1);
        let started = Instant::now();
        let result = self.engine.commit(msg.batch);
        self.duration.observe(started.elapsed().as_secs_f64());
        self.batch_size.observe(writes as f64);
        msg.done.do_send(Committed(result));
    }
}
