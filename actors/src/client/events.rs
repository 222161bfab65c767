//! Recording Events about objects, as components report what they did: node agents and
//! controllers write core/v1 events (client-go's `record` package), the scheduler
//! events.k8s.io/v1 events (its `events` package); `kubectl get events` and `kubectl describe`
//! show both.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::ApiClient;
use crate::core::{ApiError, PatchType};
use crate::model::{resources, ResourceType};

/// The object an event is about.
#[derive(Debug, Clone)]
pub struct ObjectRef {
    pub kind: &'static str,
    /// `v1`, or `group/version`.
    pub api_version: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The part of the object the event is about (`spec.containers{web}`), if not all of it.
    pub field_path: Option<String>,
}

impl ObjectRef {
    pub fn pod(namespace: String, name: String, uid: String) -> Self {
        ObjectRef { kind: "Pod", api_version: "v1".into(), namespace, name, uid, field_path: None }
    }

    /// `object`, of `resource`.
    pub fn of(resource: &'static ResourceType, object: &serde_json::Value) -> Self {
        let (namespace, name) = super::cache::key_of(object);
        let uid = super::object_uid(object).to_string();
        let api_version = resource.api_version();
        ObjectRef { kind: resource.kind, api_version, namespace, name, uid, field_path: None }
    }
}

/// `Normal` or `Warning`, as Kubernetes types events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    Normal,
    Warning,
}

/// How long events alike but for their message are combined over (client-go's aggregator's
/// ten minutes). Repeats of the same event count into the first for as long as the process
/// remembers it, as client-go's event logger does.
const AGGREGATION_WINDOW: Duration = Duration::from_secs(600);
/// How many recent events a process remembers for that (client-go's cache: 4,096 too).
const REMEMBERED: usize = 4096;

/// The same event again: same object (and part of it), type, reason, message and reporter.
type Similar = (String, String, Option<String>, EventKind, String, String, String);

/// An event this process recorded lately (written, or held back by the spam filter).
struct Recorded {
    name: String,
    count: u64,
    seen: Instant,
    /// When it was first seen (its `firstTimestamp`).
    first_time: String,
}

impl Recorded {
    /// A new event `name`, seen once, now.
    fn first(name: &str) -> Self {
        let first_time = crate::model::now();
        Recorded { name: name.to_string(), count: 1, seen: Instant::now(), first_time }
    }
}

/// The event an occurrence counts into: the name it was first recorded under, how many times
/// it has been seen and when first.
struct Repeat {
    name: String,
    count: u64,
    first_time: String,
}

static RECENT: LazyLock<Mutex<HashMap<Similar, Recorded>>> = LazyLock::new(Default::default);

/// Events alike but for their message: same object, type, reason and reporter (and host), as
/// client-go's aggregator keys them.
type Alike = (String, String, EventKind, String, String, String);

/// How many different messages of events alike are written as they are within the window;
/// from the tenth on they are combined into one event (client-go's `maxEvents`).
const AGGREGATED_MESSAGES: usize = 10;
/// The message of events combined, before the latest one's own.
const COMBINED: &str = "(combined from similar events): ";

/// The different messages of events alike seen lately, and when the last was.
type Messages = (HashSet<String>, Instant);

/// The messages of each kind of events alike.
static ALIKE: LazyLock<Mutex<HashMap<Alike, Messages>>> = LazyLock::new(Default::default);

/// Whether an event alike `key` with `message` is one too many to write as it is: the tenth
/// different message within ten minutes of the last, as client-go's `EventAggregate` counts
/// them; the set stays below ten (client-go forgets any one message, this the latest: the
/// first nine go on being written as they are, each counting its own repeats).
fn combined(key: Alike, message: &str) -> bool {
    let mut alike = ALIKE.lock().expect("event aggregation lock");
    if alike.len() >= REMEMBERED {
        alike.retain(|_, (_, last)| last.elapsed() < AGGREGATION_WINDOW);
        if alike.len() >= REMEMBERED {
            alike.clear();
        }
    }
    let (messages, last) = alike.entry(key).or_insert_with(|| (HashSet::new(), Instant::now()));
    if last.elapsed() > AGGREGATION_WINDOW {
        messages.clear();
    }
    *last = Instant::now();
    messages.insert(message.to_string());
    if messages.len() < AGGREGATED_MESSAGES {
        return false;
    }
    messages.remove(message);
    true
}

/// The same events.k8s.io/v1 event again, as client-go's events recorder tells it (`getKey`):
/// same action, reason, reporter, object (and part of it) and related object; the note may
/// differ.
type Isomorphic = (String, String, String, String, Option<String>, Option<String>);

/// How long a series of events.k8s.io/v1 events goes on without a repeat (client-go's events
/// `finishTime`).
const SERIES_WINDOW: Duration = Duration::from_secs(360);

static SERIES: LazyLock<Mutex<HashMap<Isomorphic, Recorded>>> = LazyLock::new(Default::default);

/// Counts one more of the event `key` in `cache` and returns what it counts into; or, when
/// none was recorded (within `window`, if any), takes `name` for it and returns `None`. A new
/// event's entry is taken before it is written, so that a repeat recorded meanwhile counts
/// into it rather than writing a second one. Past [`REMEMBERED`] events, the half seen
/// longest ago are forgotten, as client-go's caches forget their least recently used.
fn count_repeat<K: Hash + Eq>(
    cache: &Mutex<HashMap<K, Recorded>>,
    key: K,
    name: &str,
    window: Option<Duration>,
) -> Option<Repeat> {
    let mut recent = cache.lock().expect("event cache lock");
    if let Some(window) = window {
        recent.retain(|_, r| r.seen.elapsed() < window);
    }
    if recent.len() >= REMEMBERED {
        let mut seen: Vec<Instant> = recent.values().map(|r| r.seen).collect();
        seen.sort_unstable();
        let cutoff = seen[seen.len() / 2];
        recent.retain(|_, r| r.seen > cutoff);
    }
    match recent.get_mut(&key) {
        Some(r) => {
            r.count += 1;
            r.seen = Instant::now();
            Some(Repeat { name: r.name.clone(), count: r.count, first_time: r.first_time.clone() })
        }
        None => {
            recent.insert(key, Recorded::first(name));
            None
        }
    }
}

/// The event first written as `key` could not be counted into: `name` is written for it
/// instead, and repeats count into that.
fn record_anew<K: Hash + Eq>(cache: &Mutex<HashMap<K, Recorded>>, key: K, name: &str) {
    cache.lock().expect("event cache lock").insert(key, Recorded::first(name));
}

/// The event `name` of `key` was not written: a repeat is recorded anew.
fn forget_unwritten<K: Hash + Eq>(cache: &Mutex<HashMap<K, Recorded>>, key: &K, name: &str) {
    let mut recent = cache.lock().expect("event cache lock");
    if recent.get(key).is_some_and(|r| r.name == name) {
        recent.remove(key);
    }
}

/// The namespace an event about `object` goes in: its own, or `default` for a cluster-scoped
/// object, as client-go's recorders put them.
fn event_namespace(object: &ObjectRef) -> &str {
    if object.namespace.is_empty() {
        "default"
    } else {
        &object.namespace
    }
}

/// `object` as an event's `involvedObject` or `regarding`.
fn reference(object: &ObjectRef) -> Value {
    let mut reference = json!({"kind": object.kind, "name": object.name, "uid": object.uid});
    if !object.api_version.is_empty() {
        reference["apiVersion"] = json!(object.api_version);
    }
    if !object.namespace.is_empty() {
        reference["namespace"] = json!(object.namespace);
    }
    if let Some(path) = &object.field_path {
        reference["fieldPath"] = json!(path);
    }
    reference
}

/// `Normal` or `Warning`, as events write it.
fn type_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Normal => "Normal",
        EventKind::Warning => "Warning",
    }
}

/// How many events (or repeats) a reporter may write about one object at once, and how often
/// one more after that: client-go's spam filter (a bucket of 25, refilled one every 5 minutes),
/// so that a probe failing every second does not write every second for ever.
const SPAM_BURST: f64 = 25.0;
const SPAM_REFILL: Duration = Duration::from_secs(300);

/// A reporter's bucket for one object: tokens left, and when they were counted.
type Bucket = (f64, Instant);

/// The spam filter's buckets, by reporter and object uid.
static BUCKETS: LazyLock<Mutex<HashMap<(String, String), Bucket>>> =
    LazyLock::new(Default::default);

/// Takes a token from the bucket of `component`'s events about `uid`; false when it is empty.
fn within_spam_limit(component: &str, uid: &str) -> bool {
    let mut buckets = BUCKETS.lock().expect("event spam filter lock");
    if buckets.len() >= REMEMBERED {
        // Full: the buckets used longest ago go (half of them), as client-go's LRU forgets
        // its least recently used.
        let mut used: Vec<Instant> = buckets.values().map(|(_, at)| *at).collect();
        used.sort_unstable();
        let cutoff = used[used.len() / 2];
        buckets.retain(|_, (_, at)| *at > cutoff);
    }
    let now = Instant::now();
    let key = (component.to_string(), uid.to_string());
    let (tokens, at) = buckets.entry(key).or_insert((SPAM_BURST, now));
    let refilled = now.duration_since(*at).as_secs_f64() / SPAM_REFILL.as_secs_f64();
    *tokens = (*tokens + refilled).min(SPAM_BURST);
    *at = now;
    if *tokens < 1.0 {
        return false;
    }
    *tokens -= 1.0;
    true
}

/// The time in nanoseconds since the epoch, made unique within the process: an event's name
/// ends with it in hex, as client-go names events, so that a list (by name) holds an object's
/// events in the order they were recorded, which `kubectl describe` keeps for events of the
/// same second.
fn unique_nanos() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// Writes one event, or counts it into the same event recorded in the last ten minutes
/// (`count` and `lastTimestamp`, as client-go's event recorder does, so `kubectl describe`
/// shows "x3 over 2m" rather than three lines), within the spam filter's limit per reporter
/// and object. A failure is logged, never returned (events are best effort).
pub async fn record(
    client: &dyn ApiClient,
    object: &ObjectRef,
    kind: EventKind,
    reason: &str,
    message: &str,
    component: &str,
) {
    record_on_node(client, object, kind, reason, message, component, "").await;
}

/// As [`record`], reported by `component` on the node `host` (the kubelet's events: their
/// `source.host` and `reportingInstance` name its node).
pub async fn record_on_node(
    client: &dyn ApiClient,
    object: &ObjectRef,
    kind: EventKind,
    reason: &str,
    message: &str,
    component: &str,
    host: &str,
) {
    let time = crate::model::now();
    let events = resources::core("events");
    let alike = (
        object.namespace.clone(),
        object.uid.clone(),
        kind,
        reason.to_string(),
        component.to_string(),
        host.to_string(),
    );
    // Past nine different messages, one event counts the rest (whatever part of the object
    // they are about), its message the latest.
    let combine = combined(alike, message);
    let similar = (
        object.namespace.clone(),
        object.uid.clone(),
        if combine { None } else { object.field_path.clone() },
        kind,
        reason.to_string(),
        if combine { COMBINED.to_string() } else { message.to_string() },
        component.to_string(),
    );
    let message = if combine { format!("{COMBINED}{message}") } else { message.to_string() };
    let name = format!("{}.{:x}", object.name, unique_nanos());
    let namespace = event_namespace(object);
    // Counted before the spam filter, as client-go's correlator counts: the next write it
    // lets through carries every repeat it held back.
    let repeat = count_repeat(&RECENT, similar.clone(), &name, None);
    if !within_spam_limit(component, &object.uid) {
        return;
    }
    // A combined event names no reporting controller, as client-go's aggregate copy.
    let event_named = |name: &str| {
        let mut event = core_event(object, kind, reason, &message, component, host, name, &time);
        if combine {
            let fields = event.as_object_mut().expect("an event is an object");
            fields.remove("reportingComponent");
            fields.remove("reportingInstance");
        }
        event
    };
    let Some(repeat) = repeat else {
        let event = event_named(&name);
        if let Err(error) = client.create(events, namespace, event).await {
            tracing::debug!(object = %object.name, %error, "recording an event");
            forget_unwritten(&RECENT, &similar, &name);
        }
        return;
    };
    let patch = json!({"count": repeat.count, "lastTimestamp": time, "message": message});
    let patch = || client.patch(events, namespace, &repeat.name, PatchType::Merge, &patch, false);
    match patch().await {
        Ok(_) => {}
        // Gone (deleted, expired) or never written (held back): written again under its
        // name, with its count and first time, as client-go's recorder creates it again.
        Err(ApiError::NotFound { .. }) => {
            let mut event = event_named(&repeat.name);
            event["count"] = json!(repeat.count);
            event["firstTimestamp"] = json!(repeat.first_time);
            match client.create(events, namespace, event).await {
                // Written meanwhile by the first occurrence's own create.
                Err(ApiError::AlreadyExists { .. }) => {
                    if let Err(error) = patch().await {
                        tracing::debug!(event = %repeat.name, %error, "counting a repeated event");
                    }
                }
                Err(error) => tracing::debug!(event = %repeat.name, %error, "recording an event"),
                Ok(_) => {}
            }
        }
        Err(error) => tracing::debug!(event = %repeat.name, %error, "counting a repeated event"),
    }
}

/// A core/v1 event `name` about `object`, seen once at `time`.
#[allow(clippy::too_many_arguments)]
fn core_event(
    object: &ObjectRef,
    kind: EventKind,
    reason: &str,
    message: &str,
    component: &str,
    host: &str,
    name: &str,
    time: &str,
) -> Value {
    let mut event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": event_namespace(object)},
        "involvedObject": reference(object),
        "reason": reason,
        "message": message,
        "type": type_name(kind),
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": time,
        "lastTimestamp": time,
        "count": 1,
    });
    // As client-go's recorder: the instance is the host, when the reporter has one.
    if !host.is_empty() {
        event["source"]["host"] = json!(host);
        event["reportingInstance"] = json!(host);
    }
    event
}

/// What an events.k8s.io/v1 event says: its type, reason, the action taken and a note.
#[derive(Debug, Clone, Copy)]
pub struct Action<'a> {
    pub kind: EventKind,
    pub reason: &'a str,
    /// What was done or failed (`Binding`, `Scheduling`, `Preempting`).
    pub action: &'a str,
    pub note: &'a str,
}

/// Records an events.k8s.io/v1 event about `object` (and the `related` object, if any), as
/// `controller` reports it through client-go's events recorder, as kube-scheduler does:
/// `eventTime`, `action`, `reportingController` and `reportingInstance`
/// (`<controller>-<host>`), no first and last timestamps or count. A repeat within six
/// minutes (same action, reason, objects and reporter) makes the first a `series` and counts
/// into it. Not spam-filtered (client-go's events recorder has no such filter: a pod retried
/// for long still gets its `Scheduled` event); a failure is logged, never returned.
pub async fn record_action(
    client: &dyn ApiClient,
    object: &ObjectRef,
    related: Option<&ObjectRef>,
    what: Action<'_>,
    controller: &str,
) {
    let events = resources::find("events.k8s.io", "v1", "events").expect("served");
    let observed = crate::model::now_micro();
    let isomorphic = (
        what.action.to_string(),
        what.reason.to_string(),
        controller.to_string(),
        object.uid.clone(),
        object.field_path.clone(),
        related.map(|r| r.uid.clone()),
    );
    let name = format!("{}.{:x}", object.name, unique_nanos());
    let namespace = event_namespace(object);
    if let Some(repeat) = count_repeat(&SERIES, isomorphic.clone(), &name, Some(SERIES_WINDOW)) {
        let (first, count) = (repeat.name, repeat.count);
        let patch = json!({"series": {"count": count, "lastObservedTime": observed}});
        match client.patch(events, namespace, &first, PatchType::Merge, &patch, false).await {
            Ok(_) => return,
            // Gone meanwhile, or not written yet: recorded anew.
            Err(error) => {
                tracing::debug!(event = %first, %error, "counting an event into its series");
                record_anew(&SERIES, isomorphic.clone(), &name);
            }
        }
    }
    let mut event = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "eventTime": observed,
        "reportingController": controller,
        "reportingInstance": format!("{controller}-{}", crate::machine::host_name()),
        "action": what.action,
        "reason": what.reason,
        "regarding": reference(object),
        "note": what.note,
        "type": type_name(what.kind),
    });
    if let Some(related) = related {
        event["related"] = reference(related);
    }
    if let Err(error) = client.create(events, namespace, event).await {
        tracing::debug!(object = %object.name, %error, "recording an event");
        forget_unwritten(&SERIES, &isomorphic, &name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ListOptions;

    #[actix::test]
    async fn a_repeated_event_is_counted_into_the_first() {
        let core = crate::testing::core().await;
        let pod = ObjectRef::pod("default".into(), "p".into(), "uid-repeat".into());
        for _ in 0..3 {
            record(&core, &pod, EventKind::Warning, "BackOff", "Back-off restarting", "kubelet")
                .await;
        }
        record(&core, &pod, EventKind::Normal, "Started", "Started container c", "kubelet").await;
        let events = resources::find("", "v1", "events").unwrap();
        let list =
            ApiClient::list(&core, events, Some("default"), &ListOptions::default()).await.unwrap();
        let mut seen: Vec<(String, i64)> = list
            .items
            .iter()
            .map(|e| (e["reason"].as_str().unwrap().to_string(), e["count"].as_i64().unwrap()))
            .collect();
        seen.sort();
        assert_eq!(seen, [("BackOff".to_string(), 3), ("Started".to_string(), 1)]);
    }

    /// A cluster-scoped object's events go in `default`, naming no namespace for the object.
    #[actix::test]
    async fn events_of_cluster_scoped_objects_go_in_default() {
        let core = crate::testing::core().await;
        let node = ObjectRef {
            kind: "Node",
            api_version: "v1".into(),
            namespace: String::new(),
            name: "n1".into(),
            uid: "uid-node".into(),
            field_path: None,
        };
        record(
            &core,
            &node,
            EventKind::Normal,
            "NodeReady",
            "Node n1 status is now: NodeReady",
            "kubelet",
        )
        .await;
        let events = resources::find("", "v1", "events").unwrap();
        let list =
            ApiClient::list(&core, events, Some("default"), &ListOptions::default()).await.unwrap();
        let event = list.items.iter().find(|e| e["reason"] == "NodeReady").expect("recorded");
        assert_eq!(
            event["involvedObject"],
            json!({"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-node"})
        );
    }

    #[actix::test]
    async fn an_action_is_recorded_in_the_new_api_and_its_repeats_make_a_series() {
        let core = crate::testing::core().await;
        let pod = ObjectRef::pod("default".into(), "pending".into(), "uid-series".into());
        let preemptor = ObjectRef::pod("default".into(), "important".into(), "uid-high".into());
        let (kind, reason, action) = (EventKind::Warning, "FailedScheduling", "Scheduling");
        for note in
            ["0/1 nodes are available", "0/2 nodes are available", "0/2 nodes are available"]
        {
            let what = Action { kind, reason, action, note };
            record_action(&core, &pod, None, what, "default-scheduler").await;
        }
        let what = Action {
            kind: EventKind::Normal,
            reason: "Preempted",
            action: "Preempting",
            note: "Preempted by pod uid-high on node n1",
        };
        record_action(&core, &pod, Some(&preemptor), what, "default-scheduler").await;

        let events = resources::find("events.k8s.io", "v1", "events").unwrap();
        let list =
            ApiClient::list(&core, events, Some("default"), &ListOptions::default()).await.unwrap();
        let by_reason = |reason: &str| {
            list.items.iter().find(|e| e["reason"] == reason).expect("recorded").clone()
        };
        // One event for the three (the note is not what makes one the same as another), with
        // the first note, counted in its series.
        assert_eq!(list.items.len(), 2);
        let failed = by_reason("FailedScheduling");
        assert_eq!(failed["note"], "0/1 nodes are available");
        assert_eq!(failed["series"]["count"], 3);
        assert!(failed["series"]["lastObservedTime"].as_str().unwrap().ends_with('Z'));
        let event_time = failed["eventTime"].as_str().unwrap();
        assert_eq!(event_time.split('.').nth(1).map(str::len), Some(7), "{event_time}");
        assert_eq!((&failed["action"], &failed["type"]), (&json!("Scheduling"), &json!("Warning")));
        assert_eq!(failed["reportingController"], "default-scheduler");
        let instance = failed["reportingInstance"].as_str().unwrap();
        assert!(instance.starts_with("default-scheduler-"), "{instance}");
        assert_eq!(failed["regarding"]["uid"], "uid-series");
        for old in ["deprecatedCount", "deprecatedFirstTimestamp", "deprecatedLastTimestamp"] {
            assert!(failed.get(old).is_none_or(Value::is_null), "{old}: {failed}");
        }
        let preempted = by_reason("Preempted");
        assert_eq!(preempted["related"]["name"], "important");
        assert!(preempted.get("series").is_none_or(Value::is_null), "{preempted}");
    }

    /// Past nine different messages of events alike (a controller's failed creates, each
    /// naming its pod), one event counts the rest, as client-go's aggregator combines them.
    #[actix::test]
    async fn events_alike_but_for_their_message_are_combined_from_the_tenth() {
        let core = crate::testing::core().await;
        let rc = ObjectRef {
            kind: "ReplicationController",
            ..ObjectRef::pod("default".into(), "web".into(), "uid-combined".into())
        };
        for i in 0..14 {
            let message = format!("Error creating: pods \"web-{i}\" is forbidden");
            record(&core, &rc, EventKind::Warning, "FailedCreate", &message, "rc-manager").await;
        }
        // The same message again counts into its own event.
        let again = "Error creating: pods \"web-0\" is forbidden";
        record(&core, &rc, EventKind::Warning, "FailedCreate", again, "rc-manager").await;
        let events = resources::find("", "v1", "events").unwrap();
        let list =
            ApiClient::list(&core, events, Some("default"), &ListOptions::default()).await.unwrap();
        let mine: Vec<&Value> =
            list.items.iter().filter(|e| e["involvedObject"]["uid"] == "uid-combined").collect();
        let combined: Vec<&&Value> =
            mine.iter().filter(|e| e["message"].as_str().unwrap().starts_with(COMBINED)).collect();
        assert_eq!((mine.len(), combined.len()), (10, 1), "{mine:?}");
        assert_eq!(combined[0]["count"], 5, "{}", combined[0]);
        assert_eq!(
            combined[0]["message"],
            "(combined from similar events): Error creating: pods \"web-13\" is forbidden"
        );
        assert_eq!(combined[0]["reportingComponent"], "", "{}", combined[0]);
        let first = mine.iter().find(|e| e["message"] == again).unwrap();
        assert_eq!(first["count"], 2);
    }

    #[actix::test]
    async fn a_reporter_writes_at_most_a_burst_of_events_about_one_object() {
        let core = crate::testing::core().await;
        let pod = ObjectRef::pod("default".into(), "spammed".into(), "uid-spam".into());
        for _ in 0..40 {
            record(&core, &pod, EventKind::Warning, "Unhealthy", "probe failed", "kubelet").await;
        }
        // Another reporter, or another object, has a bucket of its own.
        record(&core, &pod, EventKind::Normal, "Scheduled", "assigned", "default-scheduler").await;
        let events = resources::find("", "v1", "events").unwrap();
        let list =
            ApiClient::list(&core, events, Some("default"), &ListOptions::default()).await.unwrap();
        let count = |reason: &str| {
            let event = list.items.iter().find(|e| e["reason"] == reason).expect("an event");
            event["count"].as_i64().unwrap()
        };
        assert_eq!((count("Unhealthy"), count("Scheduled")), (25, 1));
        // The repeats held back are counted all the same: the event written again (here after
        // its deletion, which the filter does not stop from being noticed) carries them all
        // once the filter lets a write through.
        let before = list.items.iter().find(|e| e["reason"] == "Unhealthy").unwrap().clone();
        let bucket = ("kubelet".to_string(), "uid-spam".to_string());
        BUCKETS.lock().unwrap().insert(bucket, (1.0, Instant::now()));
        let name = before["metadata"]["name"].as_str().unwrap();
        let options = crate::core::DeleteOptions::default();
        ApiClient::delete(&core, events, "default", name, &options).await.unwrap();
        record(&core, &pod, EventKind::Warning, "Unhealthy", "probe failed", "kubelet").await;
        let again = ApiClient::get(&core, events, "default", name).await.unwrap();
        assert_eq!(again["count"], 41, "{again}");
        assert_eq!(again["firstTimestamp"], before["firstTimestamp"]);
    }

    #[actix::test]
    async fn actions_are_not_spam_filtered() {
        let core = crate::testing::core().await;
        let pod = ObjectRef::pod("default".into(), "retried".into(), "uid-retried".into());
        let failed = Action {
            kind: EventKind::Warning,
            reason: "FailedScheduling",
            action: "Scheduling",
            note: "0/1 nodes are available",
        };
        for _ in 0..30 {
            record_action(&core, &pod, None, failed, "default-scheduler").await;
        }
        let scheduled = Action {
            kind: EventKind::Normal,
            reason: "Scheduled",
            action: "Binding",
            note: "Successfully assigned default/retried to n1",
        };
        record_action(&core, &pod, None, scheduled, "default-scheduler").await;
        let events = resources::find("events.k8s.io", "v1", "events").unwrap();
        let list =
            ApiClient::list(&core, events, Some("default"), &ListOptions::default()).await.unwrap();
        let of = |reason: &str| list.items.iter().find(|e| e["reason"] == reason).cloned();
        assert_eq!(of("FailedScheduling").unwrap()["series"]["count"], 30);
        assert!(of("Scheduled").is_some(), "the pod's Scheduled event is written");
    }
}
