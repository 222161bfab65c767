//! Event expiry, as kube-apiserver's `--event-ttl` (one hour by default) has its storage
//! expire Events: an Event is deleted that long after it was last written (created, or
//! updated with a new count), so that a cluster churning pods for weeks does not keep every
//! event it ever recorded. An Event found at start is judged by the latest of its times
//! (`lastTimestamp`, `eventTime`, `series.lastObservedTime`, its creation); the deletion is
//! pinned to the version judged, so an Event written again meanwhile stays for its new time.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde_json::Value;

use crate::client::cache::{key_of, Key};
use crate::client::informer::{self, Feed, Scope};
use crate::client::ApiClient;
use crate::core::{ApiError, DeleteOptions};
use crate::model::{json, resources};
use crate::watch::EventType;

/// How often due Events are looked for (more often for a short TTL).
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// The event expiry actor.
pub struct EventTtl {
    client: Arc<dyn ApiClient>,
    ttl: Duration,
    /// Each Event's version as last seen, and when it expires.
    expiries: HashMap<Key, (String, Instant)>,
    /// The same, in the order they are due.
    due: BTreeSet<(Instant, Key)>,
}

/// A feed of Events.
#[derive(Message)]
#[rtype(result = "()")]
struct Events(Feed);

/// Stops the actor (its list-watch ends with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopEventTtl;

impl EventTtl {
    /// Expires Events `ttl` after their last write.
    pub fn new(client: Arc<dyn ApiClient>, ttl: Duration) -> Self {
        Self { client, ttl, expiries: HashMap::new(), due: BTreeSet::new() }
    }

    /// Notes that `event` expires at `at`.
    fn expire_at(&mut self, event: &Value, at: Instant) {
        let key = key_of(event);
        let version = json::at(event, "/metadata/resourceVersion").and_then(Value::as_str);
        self.forget(&key);
        self.due.insert((at, key.clone()));
        self.expiries.insert(key, (version.unwrap_or("").to_string(), at));
    }

    fn forget(&mut self, key: &Key) {
        if let Some((_, at)) = self.expiries.remove(key) {
            self.due.remove(&(at, key.clone()));
        }
    }

    /// Deletes the Events that are due.
    fn sweep(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        while let Some((at, key)) = self.due.first().cloned() {
            if at > now {
                break;
            }
            self.due.pop_first();
            let Some((version, _)) = self.expiries.remove(&key) else { continue };
            let client = self.client.clone();
            ctx.spawn(
                async move {
                    let options = DeleteOptions {
                        precondition_resource_version: Some(version),
                        ..DeleteOptions::default()
                    };
                    let (namespace, name) = key;
                    match client
                        .delete(resources::core("events"), &namespace, &name, &options)
                        .await
                    {
                        // Gone already, or written again since (its new version is due later).
                        Ok(_) | Err(ApiError::NotFound { .. } | ApiError::Conflict { .. }) => {}
                        Err(error) => {
                            tracing::debug!(%namespace, %name, %error, "expiring an event")
                        }
                    }
                }
                .into_actor(self),
            );
        }
    }
}

/// How long ago `event` was last written, by the latest of its times (zero when it has none).
fn written_ago(event: &Value) -> Duration {
    let times =
        ["/lastTimestamp", "/eventTime", "/series/lastObservedTime", "/metadata/creationTimestamp"];
    let ago = times
        .iter()
        .filter_map(|at| json::at(event, at).and_then(Value::as_str))
        .filter_map(crate::model::seconds_since)
        .min()
        .unwrap_or(0);
    Duration::from_secs(ago.max(0) as u64)
}

impl Actor for EventTtl {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(ctx, client, resources::core("events"), Scope::default(), Events);
        let every = SWEEP_EVERY.min(self.ttl / 4).max(Duration::from_millis(100));
        ctx.run_interval(every, |actor, ctx| actor.sweep(ctx));
    }
}

impl Handler<Events> for EventTtl {
    type Result = ();

    fn handle(&mut self, Events(feed): Events, ctx: &mut Context<Self>) {
        let now = Instant::now();
        match feed {
            Feed::Listed(events) => {
                self.expiries.clear();
                self.due.clear();
                for event in &events {
                    let left = self.ttl.saturating_sub(written_ago(event));
                    self.expire_at(event, now + left);
                }
            }
            Feed::Changed(EventType::Deleted, event) => self.forget(&key_of(&event)),
            Feed::Changed(_, event) => self.expire_at(&event, now + self.ttl),
            Feed::Unavailable(_) => return,
        }
        self.sweep(ctx);
    }
}

impl Handler<StopEventTtl> for EventTtl {
    type Result = ();

    fn handle(&mut self, _: StopEventTtl, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{core, eventually};
    use serde_json::json;

    fn event(name: &str, last: &str) -> Value {
        json!({"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "Tested", "message": "m", "type": "Normal", "lastTimestamp": last})
    }

    #[test]
    fn an_event_was_written_at_the_latest_of_its_times() {
        let ago =
            |minutes: i64| (chrono::Utc::now() - chrono::Duration::minutes(minutes)).to_rfc3339();
        let mut listed = event("e", &ago(50));
        listed["metadata"]["creationTimestamp"] = json!(ago(90));
        let minutes = |d: Duration| d.as_secs() / 60;
        assert_eq!(minutes(written_ago(&listed)), 50);
        listed["series"] = json!({"lastObservedTime": ago(10)});
        assert_eq!(minutes(written_ago(&listed)), 10);
        assert_eq!(written_ago(&json!({})), Duration::ZERO);
    }

    #[actix::test]
    async fn events_go_a_ttl_after_their_last_write() {
        let core = core().await;
        let events = resources::core("events");
        let ttl = Duration::from_secs(4);
        let _ttl = EventTtl::new(Arc::new(core.clone()), ttl).start();
        let start = Instant::now();
        for name in ["once", "twice"] {
            let made =
                ApiClient::create(&core, events, "default", event(name, &crate::model::now()));
            made.await.unwrap();
        }
        let exists = |name: &'static str| {
            let core = core.clone();
            async move { ApiClient::get(&core, events, "default", name).await.is_ok() }
        };
        // Written again halfway: it lives a TTL from then.
        tokio::time::sleep(ttl / 2).await;
        let mut again = ApiClient::get(&core, events, "default", "twice").await.unwrap();
        again["count"] = json!(2);
        ApiClient::update(&core, events, "default", again).await.unwrap();
        eventually("the event written once expired", || async {
            (!exists("once").await).then_some(())
        })
        .await;
        assert!(start.elapsed() >= ttl);
        assert!(exists("twice").await, "written again, it lives longer");
        eventually("the other expired too", || async { (!exists("twice").await).then_some(()) })
            .await;
    }
}
