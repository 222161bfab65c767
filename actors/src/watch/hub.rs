//! The watch hub actor: keeps the event window and the subscriber list, and delivers every
//! committed event to the watchers whose filter it matches.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::Stream;
use tokio::sync::mpsc;

use super::window::EventWindow;
use super::{EventType, WatchError, WatchEvent, WatchItem};
use crate::model::{FastMap, ObjectFilter, ResourceType};

/// The hub's settings (the `[watch]` config section).
#[derive(Debug, Clone)]
pub struct HubOptions {
    /// Events kept for resuming watches...
    pub window_events: usize,
    /// ...and the most bytes of their objects kept.
    pub window_bytes: usize,
    /// Events a watcher may fall behind before it is closed.
    pub buffer: usize,
    /// How often watchers that asked for bookmarks get one.
    pub bookmark_interval: Duration,
}

struct Subscriber {
    id: u64,
    filter: ObjectFilter,
    bookmarks: bool,
    /// Events at or below this revision were already covered by the watcher's starting point.
    after: u64,
    /// Each committed batch reaches a watcher as one message: one channel operation per batch,
    /// not per event.
    sink: mpsc::UnboundedSender<Delivery>,
    /// Events sent and not yet taken by the watcher; more than `buffer` cuts it off.
    pending: Arc<AtomicUsize>,
    buffer: usize,
    overflowed: Arc<AtomicBool>,
}

impl Subscriber {
    /// Translates a committed event into what this watcher should see, if anything.
    fn view(&self, event: &WatchEvent) -> Option<WatchItem> {
        if event.object.resource_version <= self.after {
            return None;
        }
        let now = self.filter.matches(&event.object);
        let before = event.previous.as_ref().is_some_and(|p| self.filter.matches(p));
        let kind = match (event.kind, before, now) {
            (EventType::Added, _, true) => EventType::Added,
            (EventType::Modified, true, true) => EventType::Modified,
            (EventType::Modified, false, true) => EventType::Added,
            (EventType::Modified, true, false) => {
                // As Kubernetes' watchers: the state the watcher last matched, at the change's
                // revision.
                let previous = event.previous.as_ref().expect("matched before");
                let left = previous.at_revision(event.object.resource_version);
                return Some(WatchItem::Event(EventType::Deleted, Arc::new(left)));
            }
            (EventType::Deleted, _, true) => EventType::Deleted,
            _ => return None,
        };
        Some(WatchItem::Event(kind, event.object.clone()))
    }

    /// Hands `items` over (in order) without ever waiting; false when the watcher is gone or
    /// has fallen too far behind (then it is dropped, which ends its stream with an error after
    /// what it was sent).
    fn offer(&self, items: Delivery) -> bool {
        let count = items.len();
        if count == 0 {
            return !self.sink.is_closed();
        }
        let behind = self.pending.fetch_add(count, Ordering::AcqRel) + count;
        if behind > self.buffer {
            self.overflowed.store(true, Ordering::Release);
            return false;
        }
        self.sink.send(items).is_ok()
    }

    /// Offers a bookmark at `revision` (the newest its resource has reached), or at the
    /// watcher's starting point if that is newer; none while the store (at `newest`) has not
    /// reached that starting point, as Kubernetes' watchers pass on nothing older than where
    /// they start; false as for [`Self::offer`].
    fn offer_bookmark(&self, revision: u64, newest: u64) -> bool {
        if self.after > newest {
            return !self.sink.is_closed();
        }
        self.offer(Delivery::One(WatchItem::Bookmark(revision.max(self.after))))
    }

    /// What this watcher should see of a run of events.
    fn views(&self, events: &[&WatchEvent]) -> Delivery {
        match events {
            [one] => self.view(one).map_or(Delivery::Many(Vec::new()), Delivery::One),
            _ => Delivery::Many(events.iter().filter_map(|e| self.view(e)).collect()),
        }
    }
}

/// What one watcher is sent of one committed batch: most batches under light load hold one
/// event, which then travels without a vector.
enum Delivery {
    One(WatchItem),
    Many(Vec<WatchItem>),
}

impl Delivery {
    fn len(&self) -> usize {
        match self {
            Delivery::One(_) => 1,
            Delivery::Many(items) => items.len(),
        }
    }
}

/// How often the hub sends the last bookmarks that are due.
const LAST_BOOKMARK_TICK: Duration = Duration::from_millis(250);

/// The field watchers are indexed by: each node agent watches `spec.nodeName=<itself>`, so
/// with an index an event is matched against the watchers of its node, not against all.
const INDEXED_FIELD: &str = "spec.nodeName";

/// The watchers of one resource: those whose field selector pins [`INDEXED_FIELD`] to a value,
/// by that value, and the others.
#[derive(Default)]
struct Subscribers {
    unindexed: Vec<Subscriber>,
    by_value: FastMap<String, Vec<Subscriber>>,
}

impl Subscribers {
    fn add(&mut self, subscriber: Subscriber) {
        match subscriber.filter.fields.required_value(INDEXED_FIELD) {
            Some(value) => self.by_value.entry(value.to_string()).or_default().push(subscriber),
            None => self.unindexed.push(subscriber),
        }
    }

    /// Offers a run of events (of this resource type, in revision order) to the watchers they
    /// may concern, one message per watcher; drops watchers that are gone or too slow.
    fn publish(&mut self, events: &[WatchEvent]) {
        fn deliver(list: &mut Vec<Subscriber>, events: &[&WatchEvent]) {
            list.retain(|s| s.offer(s.views(events)));
        }
        let all: Vec<&WatchEvent> = events.iter().collect();
        deliver(&mut self.unindexed, &all);
        if self.by_value.is_empty() {
            return;
        }
        // Each indexed value gets the events whose object had or has it, in order.
        let mut by_value: FastMap<&str, Vec<&WatchEvent>> = FastMap::default();
        for event in events {
            let now = event.object.fields.get(INDEXED_FIELD).unwrap_or("");
            let before = event.previous.as_ref().map(|p| p.fields.get(INDEXED_FIELD).unwrap_or(""));
            for value in std::iter::once(now).chain(before.filter(|b| *b != now)) {
                if self.by_value.contains_key(value) {
                    by_value.entry(value).or_default().push(event);
                }
            }
        }
        for (value, events) in by_value {
            if let Some(list) = self.by_value.get_mut(value) {
                deliver(list, &events);
                if list.is_empty() {
                    self.by_value.remove(value);
                }
            }
        }
    }

    /// Keeps the watchers for which `keep` holds.
    fn retain(&mut self, mut keep: impl FnMut(&Subscriber) -> bool) {
        self.unindexed.retain(&mut keep);
        self.by_value.retain(|_, list| {
            list.retain(&mut keep);
            !list.is_empty()
        });
    }

    fn len(&self) -> usize {
        self.unindexed.len() + self.by_value.values().map(Vec::len).sum::<usize>()
    }
}

/// The watch hub actor. Start it with [`WatchHub::start`]; talk to it through [`WatchHub`]'s
/// handle methods.
pub struct WatchHub {
    options: HubOptions,
    window: EventWindow,
    subscribers: FastMap<&'static ResourceType, Subscribers>,
    last_revision: FastMap<&'static ResourceType, u64>,
    next_id: u64,
    /// When each watch that will end gets its last bookmark: (when, watcher id) -> resource.
    /// A watcher gone by then is passed over.
    last_bookmarks: BTreeMap<(Instant, u64), &'static ResourceType>,
    /// The same, by watcher id: a watcher that leaves takes its entry along.
    last_bookmark_due: FastMap<u64, Instant>,
}

/// The handle to a running hub.
#[derive(Clone)]
pub struct HubHandle {
    addr: Addr<WatchHub>,
}

impl WatchHub {
    /// Starts the hub on its own arbiter thread.
    pub fn start(options: HubOptions) -> HubHandle {
        let arbiter = Arbiter::new();
        let hub = WatchHub {
            window: EventWindow::new(options.window_events, options.window_bytes),
            options,
            subscribers: FastMap::default(),
            last_revision: FastMap::default(),
            next_id: 0,
            last_bookmarks: BTreeMap::new(),
            last_bookmark_due: FastMap::default(),
        };
        HubHandle { addr: WatchHub::start_in_arbiter(&arbiter.handle(), move |_| hub) }
    }

    fn publish(&mut self, events: Vec<WatchEvent>) {
        // A shard's batch may mix resource types: deliver each run of one type at once.
        for run in events.chunk_by(|a, b| a.object.key.resource == b.object.key.resource) {
            let resource = run[0].object.key.resource;
            let last = run[run.len() - 1].object.resource_version;
            self.last_revision.insert(resource, last);
            if let Some(subscribers) = self.subscribers.get_mut(resource) {
                subscribers.publish(run);
            }
        }
        for event in events {
            self.window.push(event);
        }
    }

    /// The newest revision the store has published.
    fn newest(&self) -> u64 {
        self.last_revision.values().copied().fold(self.window.floor(), u64::max)
    }

    fn send_bookmarks(&mut self) {
        let (floor, newest) = (self.window.floor(), self.newest());
        for (resource, subscribers) in &mut self.subscribers {
            let revision = self.last_revision.get(resource).copied().unwrap_or(floor);
            subscribers.retain(|s| !s.bookmarks || s.offer_bookmark(revision, newest));
        }
    }

    /// Sends the last bookmarks that are due to the watchers still there.
    fn send_last_bookmarks(&mut self) {
        let now = Instant::now();
        while let Some(entry) = self.last_bookmarks.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((_, id), resource) = entry.remove_entry();
            self.last_bookmark_due.remove(&id);
            let (floor, newest) = (self.window.floor(), self.newest());
            let revision = self.last_revision.get(resource).copied().unwrap_or(floor);
            if let Some(subscribers) = self.subscribers.get_mut(resource) {
                subscribers.retain(|s| s.id != id || s.offer_bookmark(revision, newest));
            }
        }
    }

    fn subscribe(
        &mut self,
        msg: Subscribe,
        hub: Recipient<Unsubscribe>,
    ) -> Result<Subscription, WatchError> {
        let resource = msg.resource;
        let mut replay = VecDeque::new();
        let from = msg.from_revision;
        let (sink, receiver) = mpsc::unbounded_channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let id = self.next_id;
        self.next_id += 1;
        let subscriber = Subscriber {
            id,
            filter: msg.filter,
            bookmarks: msg.bookmarks != Bookmarks::None,
            after: from,
            sink,
            pending: pending.clone(),
            buffer: self.options.buffer.max(1),
            overflowed: Arc::new(AtomicBool::new(false)),
        };
        let events = self
            .window
            .since(resource, from)
            .map_err(|oldest| WatchError::Expired { requested: from, oldest })?;
        replay.extend(events.filter_map(|e| subscriber.view(e)));
        let subscription = Subscription {
            id,
            replay,
            current: Vec::new().into_iter(),
            receiver,
            pending,
            overflowed: subscriber.overflowed.clone(),
            buffer: self.options.buffer,
            resource,
            hub: Some(hub),
            finished: false,
        };
        self.subscribers.entry(resource).or_default().add(subscriber);
        Ok(subscription)
    }
}

impl Actor for WatchHub {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        crate::threads::name_current("kplane-hub");
        ctx.set_mailbox_capacity(65_536);
        ctx.run_interval(self.options.bookmark_interval, |hub, _| hub.send_bookmarks());
        // One timer for every watch's last bookmark, rather than one per watch.
        ctx.run_interval(LAST_BOOKMARK_TICK, |hub, _| hub.send_last_bookmarks());
    }
}

// === messages ===

/// Committed events from one shard batch, in revision order. Never dropped.
pub struct Publish {
    pub events: Vec<WatchEvent>,
}

impl Message for Publish {
    type Result = ();
}

impl Handler<Publish> for WatchHub {
    type Result = ();

    fn handle(&mut self, msg: Publish, _: &mut Context<Self>) {
        self.publish(msg.events);
    }
}

/// Sets the revision the store recovered at start-up: older watches cannot be resumed.
struct SetFloor(u64);

impl Message for SetFloor {
    type Result = ();
}

impl Handler<SetFloor> for WatchHub {
    type Result = ();

    fn handle(&mut self, msg: SetFloor, _: &mut Context<Self>) {
        self.window.set_floor(msg.0);
    }
}

/// Which bookmarks a watcher gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bookmarks {
    None,
    /// One every `bookmark_interval`.
    Periodic,
    /// Those, and one `after` this long (shortly before the watch ends).
    PeriodicAndLast {
        after: Duration,
    },
}

/// Start watching one resource type after a revision.
struct Subscribe {
    resource: &'static ResourceType,
    filter: ObjectFilter,
    from_revision: u64,
    bookmarks: Bookmarks,
}

impl Message for Subscribe {
    type Result = Result<Subscription, WatchError>;
}

impl Handler<Subscribe> for WatchHub {
    type Result = Result<Subscription, WatchError>;

    fn handle(&mut self, msg: Subscribe, ctx: &mut Context<Self>) -> Self::Result {
        let (resource, bookmarks) = (msg.resource, msg.bookmarks);
        let subscription = self.subscribe(msg, ctx.address().recipient())?;
        if let Bookmarks::PeriodicAndLast { after } = bookmarks {
            let due = Instant::now() + after;
            self.last_bookmarks.insert((due, subscription.id), resource);
            self.last_bookmark_due.insert(subscription.id, due);
        }
        Ok(subscription)
    }
}

/// Stop delivering to a watcher. May be dropped (the hub also drops closed watchers itself).
struct Unsubscribe {
    resource: &'static ResourceType,
    id: u64,
}

impl Message for Unsubscribe {
    type Result = ();
}

impl Handler<Unsubscribe> for WatchHub {
    type Result = ();

    fn handle(&mut self, msg: Unsubscribe, _: &mut Context<Self>) {
        if let Some(due) = self.last_bookmark_due.remove(&msg.id) {
            self.last_bookmarks.remove(&(due, msg.id));
        }
        if let Some(subscribers) = self.subscribers.get_mut(msg.resource) {
            subscribers.retain(|s| s.id != msg.id);
        }
    }
}

/// Counts current watchers (for metrics and tests).
struct CountWatchers;

impl Message for CountWatchers {
    type Result = usize;
}

impl Handler<CountWatchers> for WatchHub {
    type Result = usize;

    fn handle(&mut self, _: CountWatchers, _: &mut Context<Self>) -> usize {
        self.subscribers.values().map(Subscribers::len).sum()
    }
}

// === impl HubHandle ===

impl HubHandle {
    /// The recipient the store shards publish to.
    pub fn publisher(&self) -> Recipient<Publish> {
        self.addr.clone().recipient()
    }

    /// Tells the hub the revision the store started at: watches cannot resume from before it.
    pub(crate) fn set_floor(&self, revision: u64) {
        self.addr.do_send(SetFloor(revision));
    }

    /// Watches `resource` for changes after `from_revision` that match `filter`.
    pub async fn subscribe(
        &self,
        resource: &'static ResourceType,
        filter: ObjectFilter,
        from_revision: u64,
        bookmarks: Bookmarks,
    ) -> Result<Subscription, WatchError> {
        let msg = Subscribe { resource, filter, from_revision, bookmarks };
        self.addr.send(msg).await.map_err(|_| WatchError::Unavailable)?
    }

    pub async fn watcher_count(&self) -> usize {
        self.addr.send(CountWatchers).await.unwrap_or(0)
    }
}

/// A live watch: replayed events first, then live ones. Dropping it unsubscribes.
pub struct Subscription {
    id: u64,
    resource: &'static ResourceType,
    replay: VecDeque<WatchItem>,
    /// The batch being handed out.
    current: std::vec::IntoIter<WatchItem>,
    receiver: mpsc::UnboundedReceiver<Delivery>,
    pending: Arc<AtomicUsize>,
    overflowed: Arc<AtomicBool>,
    buffer: usize,
    hub: Option<Recipient<Unsubscribe>>,
    finished: bool,
}

impl Stream for Subscription {
    type Item = WatchItem;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<WatchItem>> {
        if let Some(item) = self.replay.pop_front() {
            return Poll::Ready(Some(item));
        }
        if let Some(item) = self.current.next() {
            return Poll::Ready(Some(item));
        }
        if self.finished {
            return Poll::Ready(None);
        }
        match self.receiver.poll_recv(cx) {
            Poll::Ready(Some(delivery)) => {
                self.pending.fetch_sub(delivery.len(), Ordering::AcqRel);
                let batch = match delivery {
                    Delivery::One(item) => return Poll::Ready(Some(item)),
                    Delivery::Many(items) => items,
                };
                self.current = batch.into_iter();
                match self.current.next() {
                    Some(item) => Poll::Ready(Some(item)),
                    // Batches are never empty; should one be, ask again.
                    None => {
                        cx.waker().wake_by_ref();
                        Poll::Pending
                    }
                }
            }
            Poll::Ready(None) => {
                self.finished = true;
                if self.overflowed.load(Ordering::Acquire) {
                    Poll::Ready(Some(WatchItem::Error(WatchError::TooSlow(self.buffer))))
                } else {
                    Poll::Ready(None)
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.take() {
            hub.do_send(Unsubscribe { resource: self.resource, id: self.id });
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use serde_json::json;

    use super::*;
    use crate::model::{resources, FieldSelector, ObjectKey, StoredObject};

    fn pod(node: &str, rv: u64) -> Arc<StoredObject> {
        let pods = resources::find("", "v1", "pods").unwrap();
        let value = json!({"metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": node}});
        Arc::new(StoredObject::from_value(ObjectKey::new(pods, "default", "p"), value, rv))
    }

    async fn watch_node(hub: &HubHandle, node: &str) -> Subscription {
        let pods = resources::find("", "v1", "pods").unwrap();
        let fields = FieldSelector::parse(&format!("spec.nodeName={node}"), pods).unwrap();
        let filter = ObjectFilter { fields, ..ObjectFilter::default() };
        hub.subscribe(pods, filter, 0, Bookmarks::None).await.unwrap()
    }

    #[actix::test]
    async fn node_indexed_watchers_see_their_node_and_transitions_only() {
        let hub = WatchHub::start(HubOptions {
            window_events: 100,
            window_bytes: usize::MAX,
            buffer: 100,
            bookmark_interval: Duration::from_secs(3600),
        });
        let mut n1 = watch_node(&hub, "n1").await;
        let mut n2 = watch_node(&hub, "n2").await;
        let mut unbound = watch_node(&hub, "").await;
        let events = vec![
            WatchEvent { kind: EventType::Added, object: pod("", 1), previous: None },
            WatchEvent {
                kind: EventType::Modified,
                object: pod("n1", 2),
                previous: Some(pod("", 1)),
            },
            WatchEvent {
                kind: EventType::Deleted,
                object: pod("n1", 3),
                previous: Some(pod("n1", 2)),
            },
        ];
        hub.publisher().do_send(Publish { events });
        let kinds = |item: Option<WatchItem>| match item {
            Some(WatchItem::Event(kind, object)) => (kind, object.resource_version),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(kinds(unbound.next().await), (EventType::Added, 1));
        // Bound away: the state it last matched, at the binding's revision.
        let Some(WatchItem::Event(EventType::Deleted, left)) = unbound.next().await else {
            panic!("a DELETED event");
        };
        assert_eq!(left.resource_version, 2);
        assert_eq!(left.to_value()["metadata"]["resourceVersion"], "2");
        assert_eq!(left.to_value()["spec"], pod("", 1).to_value()["spec"]);
        assert_eq!(kinds(n1.next().await), (EventType::Added, 2), "bound here");
        assert_eq!(kinds(n1.next().await), (EventType::Deleted, 3));
        assert_eq!(hub.watcher_count().await, 3);
        let nothing = tokio::time::timeout(Duration::from_millis(50), n2.next()).await;
        assert!(nothing.is_err(), "n2 sees nothing");
    }

    #[actix::test]
    async fn a_watch_that_will_end_gets_a_last_bookmark_before_it_ends() {
        let hub = WatchHub::start(HubOptions {
            window_events: 100,
            window_bytes: usize::MAX,
            buffer: 100,
            bookmark_interval: Duration::from_secs(3600),
        });
        let pods = resources::find("", "v1", "pods").unwrap();
        let n1 = FieldSelector::parse("spec.nodeName=n1", pods).unwrap();
        let filter = ObjectFilter { fields: n1, ..ObjectFilter::default() };
        let last = Bookmarks::PeriodicAndLast { after: Duration::from_millis(300) };
        let mut ending = hub.subscribe(pods, filter.clone(), 0, last).await.unwrap();
        let mut periodic = hub.subscribe(pods, filter, 0, Bookmarks::Periodic).await.unwrap();
        // Events its filter passes over still move the bookmark's revision.
        let events = vec![
            WatchEvent { kind: EventType::Added, object: pod("n2", 7), previous: None },
            WatchEvent { kind: EventType::Added, object: pod("n2", 8), previous: None },
        ];
        hub.publisher().do_send(Publish { events });
        let bookmark = tokio::time::timeout(Duration::from_secs(10), ending.next()).await;
        assert!(matches!(bookmark, Ok(Some(WatchItem::Bookmark(8)))), "{bookmark:?}");
        let nothing = tokio::time::timeout(Duration::from_millis(100), periodic.next()).await;
        assert!(nothing.is_err(), "only the watch that ends gets it");
        let nothing = tokio::time::timeout(Duration::from_millis(100), ending.next()).await;
        assert!(nothing.is_err(), "one last bookmark");
        // A watch from a revision not reached yet gets no bookmark from before it.
        let last = Bookmarks::PeriodicAndLast { after: Duration::from_millis(100) };
        let mut ahead = hub.subscribe(pods, ObjectFilter::default(), 100, last).await.unwrap();
        let nothing = tokio::time::timeout(Duration::from_millis(400), ahead.next()).await;
        assert!(nothing.is_err(), "no bookmark at 8 for a watch from 100: {nothing:?}");
    }
}
