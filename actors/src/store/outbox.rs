//! Writes on their way to the shards, gathered per thread: what a thread's tasks write in one
//! turn of its event loop reaches each shard as one message. A shard then wakes once per
//! turn of each writing thread rather than once per write.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use actix::Addr;

use super::shard::{StoreShard, Write, Writes};

/// The writes queued on one thread and not yet sent, by shard.
#[derive(Default)]
struct Outbox {
    batches: Vec<(Addr<StoreShard>, Vec<Write>)>,
    /// A `Flush` has been spawned for what is queued.
    flush_spawned: bool,
}

type SharedOutbox = Arc<Mutex<Outbox>>;

thread_local! {
    static OUTBOX: SharedOutbox = SharedOutbox::default();
}

/// Sends `write` to `shard` once the tasks that are ready on this thread's runtime have run:
/// with them, if they write too. Without a runtime (nothing would run the flush), at once.
pub(crate) fn send(shard: &Addr<StoreShard>, write: Write) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        shard.do_send(Writes(vec![write]));
        return;
    };
    let spawn = OUTBOX.with(|outbox| {
        let mut queued = outbox.lock().unwrap_or_else(PoisonError::into_inner);
        match queued.batches.iter_mut().find(|(to, _)| to == shard) {
            Some((_, writes)) => writes.push(write),
            None => queued.batches.push((shard.clone(), vec![write])),
        }
        (!std::mem::replace(&mut queued.flush_spawned, true)).then(|| Flush(outbox.clone()))
    });
    if let Some(flush) = spawn {
        // Queued behind the tasks already ready to run.
        runtime.spawn(flush);
    }
}

/// Sends one thread's queued writes when it is dropped: once it has been polled, or unpolled
/// if its runtime shuts down first, so that no write is ever left behind. It holds the
/// thread's outbox itself, so whichever thread runs it sends the right writes.
struct Flush(SharedOutbox);

impl Future for Flush {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        Poll::Ready(())
    }
}

impl Drop for Flush {
    fn drop(&mut self) {
        let batches = {
            let mut queued = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            queued.flush_spawned = false;
            std::mem::take(&mut queued.batches)
        };
        for (shard, writes) in batches {
            // Queued even past the mailbox capacity: the shard drains its whole queue into
            // each batch, so a deep queue is what group commit feeds on. A stopped shard
            // drops the writes' replies.
            shard.do_send(Writes(writes));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use serde_json::json;

    use super::*;
    use crate::model::resources::find;
    use crate::model::ObjectKey;
    use crate::store::tests::hub;
    use crate::store::{Store, StoreOptions};

    #[actix::test]
    async fn writes_of_one_turn_go_to_their_shard_together_at_its_end() {
        let store =
            Store::open(&StoreOptions { shards: 2, data_dir: None, ..Default::default() }, &hub())
                .unwrap();
        let pods = find("", "v1", "pods").unwrap();
        let create = |name: &str| {
            let key = ObjectKey::new(pods, "default", name);
            store.create(key, json!({"metadata": {"name": name}}))
        };
        let mut all = pin!(futures::future::join_all([create("a"), create("b"), create("c")]));
        // One poll sends all three (each then waits for its reply): they wait here, together.
        assert!(futures::poll!(all.as_mut()).is_pending());
        assert_eq!(queued(), [3]);
        // The turn ends: they are sent, as one message, and committed (a write left behind
        // would never be answered: the timeout makes that a failure, not a hang).
        let created = within_a_while(all).await;
        assert!(created.iter().all(Result::is_ok), "{created:?}");
        assert!(queued().is_empty());
    }

    /// The sizes of the batches queued on this thread.
    fn queued() -> Vec<usize> {
        OUTBOX.with(|outbox| {
            let queued = outbox.lock().unwrap();
            queued.batches.iter().map(|(_, writes)| writes.len()).collect()
        })
    }

    /// A write made by a task spawned onto the runtime, outside the arbiter's local task set
    /// (as `tokio::spawn` does on an actix thread), is sent as well, and so are the next.
    #[actix::test]
    async fn writes_from_a_task_outside_the_local_set_are_sent() {
        let store =
            Store::open(&StoreOptions { shards: 2, data_dir: None, ..Default::default() }, &hub())
                .unwrap();
        let pods = find("", "v1", "pods").unwrap();
        let spawned = store.clone();
        let created = tokio::spawn(async move {
            let key = ObjectKey::new(pods, "default", "outside");
            spawned.create(key, json!({"metadata": {"name": "outside"}})).await.is_ok()
        });
        assert!(within_a_while(created).await.unwrap());
        let key = ObjectKey::new(pods, "default", "after");
        within_a_while(store.create(key, json!({"metadata": {"name": "after"}}))).await.unwrap();
    }

    /// `future`'s output; a panic if it takes longer than any commit in a test can.
    async fn within_a_while<F: std::future::Future>(future: F) -> F::Output {
        let limit = std::time::Duration::from_secs(30);
        tokio::time::timeout(limit, future).await.expect("a write was never sent to its shard")
    }
}
