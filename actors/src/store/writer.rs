//! The shard writer: a synchronous actor that owns the blocking commit of one shard's batches.

use std::sync::Arc;

use actix::{Actor, Handler, Message, Recipient, SyncContext};

use super::engine::{BatchEntry, Engine};
use super::shard::Committed;

/// Runs on its own thread (a `SyncArbiter` of one) so a WAL sync never stalls the shard's
/// mailbox: the shard keeps serving reads and queueing writes while a batch is on disk.
pub(crate) struct ShardWriter {
    engine: Arc<dyn Engine>,
}

impl ShardWriter {
    pub(crate) fn new(engine: Arc<dyn Engine>) -> Self {
        Self { engine }
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
        msg.done.do_send(Committed(self.engine.commit(msg.batch)));
    }
}
