//! When the change an Endpoints object or EndpointSlice is written for happened: Kubernetes'
//! trigger time tracker, whose answer its endpoints controllers write in the
//! `endpoints.kubernetes.io/last-change-trigger-time` annotation (kube-proxy measures how long
//! a change took to reach it from there). A pod's trigger is its `Ready` condition's last
//! transition, a service's its creation; a sync's trigger time is the earliest of those that
//! changed since the service's last sync (its creation at its first), none when none did.

use std::collections::HashMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

use crate::client::cache::Key;
use crate::client::object_name;
use crate::model::json;

/// The annotation the trigger time is written in.
pub(super) const ANNOTATION: &str = "endpoints.kubernetes.io/last-change-trigger-time";

/// What each service's last sync saw.
#[derive(Debug, Default)]
pub(super) struct TriggerTimes {
    services: HashMap<Key, Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    service: Option<DateTime<Utc>>,
    pods: HashMap<String, DateTime<Utc>>,
}

impl TriggerTimes {
    /// The trigger time of a sync of `service`, whose selector selects `pods`, as the
    /// annotation writes it; remembers what this sync saw for the next.
    pub fn sync(&mut self, key: &Key, service: &Value, pods: &[&Value]) -> Option<String> {
        let created = time_at(service, "/metadata/creationTimestamp");
        let pods: HashMap<String, DateTime<Utc>> = pods
            .iter()
            .filter_map(|pod| Some((object_name(pod).to_string(), ready_since(pod)?)))
            .collect();
        let trigger = match self.services.get(key) {
            // A service not synced before: its creation.
            None => created,
            Some(seen) => {
                let later = |at: &DateTime<Utc>, before: Option<&DateTime<Utc>>| {
                    before.is_none_or(|before| at > before)
                };
                let pods_changed = pods.iter().filter(|(name, at)| later(at, seen.pods.get(*name)));
                let service_changed = created.filter(|at| later(at, seen.service.as_ref()));
                pods_changed.map(|(_, at)| *at).chain(service_changed).min()
            }
        };
        self.services.insert(key.clone(), Seen { service: created, pods });
        trigger.map(format)
    }

    /// Forgets a service that is gone.
    pub fn forget(&mut self, key: &Key) {
        self.services.remove(key);
    }
}

/// The last transition of a pod's `Ready` condition, if it has one.
fn ready_since(pod: &Value) -> Option<DateTime<Utc>> {
    let conditions = json::at(pod, "/status/conditions").and_then(Value::as_array)?;
    let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
    time_at(ready, "/lastTransitionTime")
}

fn time_at(object: &Value, pointer: &str) -> Option<DateTime<Utc>> {
    let text = json::at(object, pointer).and_then(Value::as_str)?;
    DateTime::parse_from_rfc3339(text).ok().map(|t| t.with_timezone(&Utc))
}

/// Writes `time` in `object`'s annotation, or takes the annotation away when there is none
/// (an emptied annotations map goes too).
pub(super) fn annotate(object: &mut Value, time: Option<&str>) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    match time {
        Some(time) => {
            let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
            if let Some(annotations) = annotations.as_object_mut() {
                annotations.insert(ANNOTATION.into(), json!(time));
            }
        }
        None => {
            let annotations = metadata.get_mut("annotations").and_then(Value::as_object_mut);
            if let Some(annotations) = annotations {
                annotations.remove(ANNOTATION);
                if annotations.is_empty() {
                    metadata.remove("annotations");
                }
            }
        }
    }
}

/// The trigger time an object carries, if any.
pub(super) fn annotation(object: &Value) -> Option<&str> {
    json::at(object, "/metadata/annotations")?.get(ANNOTATION)?.as_str()
}

fn format(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(created: &str) -> Value {
        json!({"metadata": {"name": "web", "creationTimestamp": created}})
    }

    fn pod(name: &str, ready_since: &str) -> Value {
        json!({"metadata": {"name": name}, "status": {"conditions": [
            {"type": "PodScheduled", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": ready_since}]}})
    }

    const T: [&str; 6] = [
        "2026-12-01T10:00:00Z",
        "2026-12-01T10:00:01Z",
        "2026-12-01T10:00:02Z",
        "2026-12-01T10:00:03Z",
        "2026-12-01T10:00:04Z",
        "2026-12-01T10:00:05Z",
    ];

    #[test]
    fn a_sync_is_triggered_by_the_earliest_change_since_the_last() {
        let key: Key = ("default".into(), "web".into());
        let mut times = TriggerTimes::default();
        // New: the service's creation, even with pods ready before it.
        let (p1, p2) = (pod("p1", T[0]), pod("p2", T[1]));
        assert_eq!(times.sync(&key, &service(T[3]), &[&p1, &p2]).as_deref(), Some(T[3]));
        // Nothing changed: none.
        assert_eq!(times.sync(&key, &service(T[3]), &[&p1, &p2]), None);
        // Pods added and changed: the earliest of their changes.
        let (p2, p3, p4) = (pod("p2", T[5]), pod("p3", T[4]), pod("p4", T[5]));
        let synced = times.sync(&key, &service(T[3]), &[&p1, &p2, &p3, &p4]);
        assert_eq!(synced.as_deref(), Some(T[4]));
        // A pod gone is no change; a pod without a Ready condition has no trigger.
        let unready = json!({"metadata": {"name": "p5"}, "status": {}});
        assert_eq!(times.sync(&key, &service(T[3]), &[&p1, &unready]), None);
        // A service created again: its creation; forgotten: new again.
        assert_eq!(times.sync(&key, &service(T[5]), &[&p1]).as_deref(), Some(T[5]));
        times.forget(&key);
        assert_eq!(times.sync(&key, &service(T[5]), &[&p1]).as_deref(), Some(T[5]));
    }

    #[test]
    fn the_annotation_is_written_and_taken_away_with_its_map_when_emptied() {
        let mut object = json!({"metadata": {"name": "web"}});
        annotate(&mut object, Some(T[0]));
        assert_eq!(annotation(&object), Some(T[0]));
        annotate(&mut object, None);
        assert_eq!(object, json!({"metadata": {"name": "web"}}));
        let mut other = json!({"metadata": {"annotations": {"a": "b", ANNOTATION: T[1]}}});
        annotate(&mut other, None);
        assert_eq!(other, json!({"metadata": {"annotations": {"a": "b"}}}));
    }
}
