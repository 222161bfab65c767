//! List-watch (an informer's feed): lists a resource, then watches from the list's revision.
//! When a watch ends (its time is up, or the watcher fell behind and was cut off), it watches
//! again from the last revision it saw, as client-go's reflector does; it lists again only when
//! that revision can no longer be resumed from. It backs off while the server is unreachable.
//! Components turn what it reports into messages to their actor.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use super::{ApiClient, ClientEvent};
use crate::core::{ApiError, ListOptions, ObjectView, WatchOptions};
use crate::model::{json, ResourceType};
use crate::watch::EventType;

/// Longest wait between attempts to reach the API server.
const MAX_RETRY: Duration = Duration::from_secs(10);

/// What a list-watch reports.
#[derive(Debug)]
pub enum Feed {
    /// The complete current set (after the first list and every re-list).
    Listed(Vec<Value>),
    /// One change since.
    Changed(EventType, Value),
    /// The server could not be reached; the list-watch retries after a back-off.
    Unavailable(ApiError),
}

/// Which objects a list-watch follows, and how much of them.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub field_selector: Option<String>,
    /// How much of each object is needed (less is cheaper in-process).
    pub view: ObjectView,
}

impl Scope {
    pub fn fields(selector: impl Into<String>) -> Self {
        Scope { field_selector: Some(selector.into()), view: ObjectView::Whole }
    }
}

/// Runs a list-watch of `resource` for the actor of `ctx`: each report goes to it wrapped by
/// `message`, until the actor stops.
pub fn feed_actor<A, M>(
    ctx: &actix::Context<A>,
    client: Arc<dyn ApiClient>,
    resource: &'static ResourceType,
    scope: Scope,
    message: impl Fn(Feed) -> M + 'static,
) where
    A: actix::Actor<Context = actix::Context<A>> + actix::Handler<M>,
    M: actix::Message<Result = ()> + Send + 'static,
{
    use actix::AsyncContext;
    let addr = ctx.address();
    actix::spawn(list_watch(client, resource, scope, move |feed| {
        addr.do_send(message(feed));
        addr.connected()
    }));
}

/// The shortest an informer's watch lasts before it is made again from the last revision
/// seen: client-go's reflector asks for five to ten minutes, at random, so that its watches
/// end (with a last bookmark) spread out rather than all at once.
const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(300);

fn watch_timeout() -> Duration {
    MIN_WATCH_TIMEOUT.mul_f64(1.0 + rand::random::<f64>())
}

/// Runs until `sink` returns false (its receiver is gone).
pub async fn list_watch(
    client: Arc<dyn ApiClient>,
    resource: &'static ResourceType,
    scope: Scope,
    mut sink: impl FnMut(Feed) -> bool,
) {
    let mut wait = Duration::from_millis(200);
    let Scope { field_selector, view } = scope;
    // The revision the next watch starts after; `None` until listed, and again when a watch
    // could not be resumed from it.
    let mut resume: Option<String> = None;
    loop {
        let from = match resume.take() {
            Some(revision) => revision,
            None => {
                let options = ListOptions {
                    field_selector: field_selector.clone(),
                    view,
                    ..ListOptions::default()
                };
                let list = match client.list(resource, None, &options).await {
                    Ok(list) => list,
                    Err(error) => {
                        let message = error.to_string();
                        if !sink(Feed::Unavailable(error)) {
                            return;
                        }
                        tracing::warn!(resource = resource.plural, error = %message, "listing; retrying");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(MAX_RETRY);
                        continue;
                    }
                };
                wait = Duration::from_millis(200);
                if !sink(Feed::Listed(list.items)) {
                    return;
                }
                list.resource_version
            }
        };
        let options = WatchOptions {
            field_selector: field_selector.clone(),
            resource_version: Some(from.clone()),
            allow_bookmarks: true,
            view,
            timeout: Some(watch_timeout()),
            ..WatchOptions::default()
        };
        let mut events = match client.watch(resource, None, &options).await {
            Ok(events) => events,
            Err(error) => {
                tracing::warn!(resource = resource.plural, %error, "watching; re-listing");
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        let mut seen = from;
        let mut delivered = false;
        let mut resumable = true;
        while let Some(event) = events.next().await {
            match event {
                ClientEvent::Object(kind, object) => {
                    let revision = json::at(&object, "/metadata/resourceVersion");
                    if let Some(revision) = revision.and_then(Value::as_str) {
                        seen = revision.to_string();
                    }
                    delivered = true;
                    if !sink(Feed::Changed(kind, object)) {
                        return;
                    }
                }
                ClientEvent::Bookmark { resource_version } => {
                    seen = resource_version;
                    delivered = true;
                }
                ClientEvent::Error(error) => {
                    // An error before anything else refuses the starting revision itself (out
                    // of the server's window): only a new list can go on from there.
                    resumable = delivered;
                    tracing::debug!(resource = resource.plural, %error, resumable, "watch ended");
                    break;
                }
            }
        }
        if resumable {
            resume = Some(seen);
        }
    }
}

/// A list-watch run only while its component needs it (the pods of the replication manager
/// and the endpoints controller, only while there are controllers or services to follow them
/// for): started and stopped at will. Each run has a generation, so that what a stopped run
/// had already sent is told from the current run's feed.
#[derive(Debug, Default)]
pub(crate) struct OnDemand {
    running: Option<Arc<AtomicBool>>,
    generation: u64,
}

impl OnDemand {
    /// Starts a list-watch feeding `sink` with its generation, unless one is running.
    pub fn start(
        &mut self,
        client: Arc<dyn ApiClient>,
        resource: &'static ResourceType,
        scope: Scope,
        mut sink: impl FnMut(u64, Feed) -> bool + 'static,
    ) {
        if self.running.is_some() {
            return;
        }
        let wanted = Arc::new(AtomicBool::new(true));
        self.running = Some(wanted.clone());
        self.generation += 1;
        let generation = self.generation;
        actix::spawn(list_watch(client, resource, scope, move |feed| {
            wanted.load(Ordering::Acquire) && sink(generation, feed)
        }));
    }

    /// Lets the running list-watch go: it ends at its next report.
    pub fn stop(&mut self) {
        if let Some(wanted) = self.running.take() {
            wanted.store(false, Ordering::Release);
        }
    }

    /// Whether a report of `generation` is from the running list-watch.
    pub fn is_current(&self, generation: u64) -> bool {
        self.running.is_some() && generation == self.generation
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Condvar, Mutex};

    use serde_json::json;

    use super::*;
    use crate::model::resources::find;
    use crate::testing::{core_with, eventually};
    use crate::watch::HubOptions;

    /// What the list-watch reported, by object name.
    #[derive(Debug, Clone, PartialEq)]
    enum Seen {
        Listed(Vec<String>),
        Changed(String),
    }

    fn name(object: &Value) -> String {
        object["metadata"]["name"].as_str().unwrap_or_default().to_string()
    }

    fn names(upto: usize) -> Vec<String> {
        (0..=upto).map(|i| format!("p{i}")).collect()
    }

    /// Starts a list-watch of config maps whose consumer stalls on the first change it gets,
    /// creates 21 config maps (`p0`, then `p1`..`p20` while it is stalled, far more than its
    /// watch buffer of 5, so the hub cuts its watch off), then lets it go on and waits until it
    /// has seen `p20`. Returns what it reported.
    async fn stalled_consumer(window_events: usize, view: ObjectView) -> Vec<Seen> {
        let options = HubOptions {
            window_events,
            window_bytes: usize::MAX,
            buffer: 5,
            bookmark_interval: Duration::from_secs(60),
        };
        let core = core_with(options).await;
        let configmaps = find("", "v1", "configmaps").unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let (record, wait) = (seen.clone(), gate.clone());
        let sink = move |feed: Feed| {
            let entry = match feed {
                Feed::Listed(items) => Seen::Listed(items.iter().map(name).collect()),
                Feed::Changed(_, object) => Seen::Changed(name(&object)),
                Feed::Unavailable(error) => panic!("the core is in-process: {error}"),
            };
            let change = matches!(entry, Seen::Changed(_));
            record.lock().unwrap().push(entry);
            let (open, opened) = &*wait;
            let mut open = open.lock().unwrap();
            while change && !*open {
                open = opened.wait(open).unwrap();
            }
            true
        };
        // Its own thread, which the stalled consumer blocks.
        let client: Arc<dyn ApiClient> = Arc::new(core.clone());
        let scope = Scope { view, ..Scope::default() };
        actix::Arbiter::new().spawn(list_watch(client, configmaps, scope, sink));
        let reported = |count: usize| {
            let seen = seen.clone();
            move || {
                let seen = seen.clone();
                async move { (seen.lock().unwrap().len() >= count).then_some(()) }
            }
        };
        eventually("the first list", reported(1)).await;
        let create = |i: usize| {
            let body = json!({"metadata": {"name": format!("p{i}")}});
            let core = core.clone();
            async move { core.create(configmaps, "default", body, &Default::default()).await }
        };
        create(0).await.unwrap();
        eventually("the stalled first change", reported(2)).await;
        let mut before_last = 0;
        for i in 1..=20 {
            let created = create(i).await.unwrap();
            if i == 19 {
                before_last = created.resource_version;
            }
        }
        // Once another watch sees p20, the hub has offered all of p1..p20 to the stalled one.
        // It starts after p19, which even the smallest window still holds.
        let from = WatchOptions {
            resource_version: Some(before_last.to_string()),
            ..WatchOptions::default()
        };
        let mut watch = ApiClient::watch(&core, configmaps, None, &from).await.unwrap();
        match watch.next().await {
            Some(ClientEvent::Object(_, object)) => assert_eq!(name(&object), "p20"),
            other => panic!("expected p20, got {other:?}"),
        }
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        eventually("p20 reported", || async {
            let seen = seen.lock().unwrap();
            seen.iter()
                .any(|s| {
                    *s == Seen::Changed("p20".into())
                        || matches!(s, Seen::Listed(l) if l.len() == 21)
                })
                .then_some(())
        })
        .await;
        let seen = seen.lock().unwrap().clone();
        seen
    }

    #[actix::test]
    async fn a_watch_cut_off_for_falling_behind_resumes_where_it_was_without_a_new_list() {
        // Every view carries the revision the informer resumes from (the garbage collector's
        // ownership view too).
        for view in [ObjectView::Whole, ObjectView::Metadata, ObjectView::Ownership] {
            let seen = stalled_consumer(1_000, view).await;
            let mut expected = vec![Seen::Listed(Vec::new())];
            expected.extend(names(20).into_iter().map(Seen::Changed));
            assert_eq!(seen, expected, "{view:?}: every change once, in order, one list only");
        }
    }

    #[actix::test]
    async fn a_watch_that_cannot_be_resumed_lists_again() {
        // A window of 8 events: once cut off, the revision it stopped at is gone from it.
        let seen = stalled_consumer(8, ObjectView::Whole).await;
        assert_eq!(seen.first(), Some(&Seen::Listed(Vec::new())));
        let mut all = names(20);
        all.sort();
        assert_eq!(seen.last(), Some(&Seen::Listed(all)), "{seen:?}");
        let lists = seen.iter().filter(|s| matches!(s, Seen::Listed(_))).count();
        assert_eq!(lists, 2, "{seen:?}");
    }
}
