//! Resources served in a second group version from another's storage, converted on the way in
//! and out: events.k8s.io/v1 events are stored as core/v1 events (as in Kubernetes), so
//! `kubectl get events` shows what a component recorded through either API.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{typed_object, ApiError};
use crate::model::{resources, FieldError, ObjectKey, ResourceType, StoredObject};

/// Field renames between core/v1 `Event` and events.k8s.io/v1 `Event`, as
/// `(core, events.k8s.io)`. Every other field of the events.k8s.io form is named alike.
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// The events.k8s.io/v1 fields kept under the same name.
const EVENT_SAME: &[&str] =
    &["eventTime", "series", "reportingInstance", "action", "reason", "related", "type"];

/// One resource served from another's storage.
#[derive(Clone, Copy)]
pub(crate) struct View {
    pub view: &'static ResourceType,
    pub storage: &'static ResourceType,
}

impl View {
    /// The view `resource` is, if it is not stored as itself.
    pub fn of(resource: &'static ResourceType) -> Option<View> {
        let storage = resources::storage_of(resource);
        (!std::ptr::eq(storage, resource)).then_some(View { view: resource, storage })
    }

    /// Checks an object written through the view (a new one when `creating`) and converts it
    /// to the stored form.
    pub fn stored_form(&self, object: Value, creating: bool) -> Result<Value, ApiError> {
        let object = typed_object(self.view, object)?;
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        let errors = match creating {
            true => validate_event(&object),
            // As Kubernetes' `ValidateEventUpdate`: what a new event must have is not asked of
            // one written before (an event core/v1 wrote has no action); its series is still
            // checked.
            false => validate_series(&object),
        };
        if !errors.is_empty() {
            return Err(ApiError::invalid(self.view, name, errors));
        }
        let Value::Object(fields) = object else { unreachable!("typed_object checked it") };
        Ok(convert(fields, self.storage, |(core, events)| (events, core)))
    }

    /// The view's form of a stored object.
    pub fn view_form(&self, object: Value) -> Value {
        let Value::Object(fields) = object else { return object };
        let mut view = convert(fields, self.view, |pair| pair);
        // Written in core/v1 even when empty; left out when empty here (`omitempty`).
        if let Some(view) = view.as_object_mut() {
            for field in ["reportingController", "reportingInstance"] {
                if view.get(field).and_then(Value::as_str) == Some("") {
                    view.remove(field);
                }
            }
        }
        view
    }

    /// An error of the storage's resource in the view's words (`events.events.k8s.io "e" not
    /// found`, with the view's group), as Kubernetes names the resource a request asked for.
    pub fn own_error(&self, error: ApiError) -> ApiError {
        let (storage, view) = (self.storage, self.view);
        let ours =
            |resource: &str, group: &str| resource == storage.plural && group == storage.group;
        match error {
            ApiError::NotFound { resource, group, name } if ours(resource, group) => {
                ApiError::NotFound { resource: view.plural, group: view.group, name }
            }
            ApiError::AlreadyExists { resource, group, name, being_deleted }
                if ours(resource, group) =>
            {
                ApiError::AlreadyExists {
                    resource: view.plural,
                    group: view.group,
                    name,
                    being_deleted,
                }
            }
            ApiError::Conflict { resource, group, name, message } if ours(resource, group) => {
                ApiError::Conflict { resource: view.plural, group: view.group, name, message }
            }
            other => other,
        }
    }

    /// The view's form of a stored object, as a stored object of the view's resource.
    pub fn object(&self, stored: Arc<StoredObject>) -> Arc<StoredObject> {
        let key = ObjectKey::new(self.view, &stored.key.namespace, &stored.key.name);
        let value = self.view_form(stored.to_value());
        Arc::new(StoredObject::from_value(key, value, stored.resource_version))
    }
}

/// An event's fields renamed for `target` (kind and apiVersion set, metadata kept);
/// `direction` turns each `(core, events.k8s.io)` pair into `(from, to)`.
fn convert(
    mut fields: Map<String, Value>,
    target: &ResourceType,
    direction: impl Fn((&'static str, &'static str)) -> (&'static str, &'static str),
) -> Value {
    let mut converted = Map::new();
    converted.insert("kind".into(), json!(target.kind));
    converted.insert("apiVersion".into(), json!(target.api_version()));
    if let Some(meta) = fields.remove("metadata") {
        converted.insert("metadata".into(), meta);
    }
    let same = EVENT_SAME.iter().map(|f| (*f, *f));
    for (from, to) in same.chain(EVENT_RENAMES.iter().map(|pair| direction(*pair))) {
        if let Some(v) = fields.remove(from) {
            converted.insert(to.into(), v);
        }
    }
    Value::Object(converted)
}

/// What an update through the events.k8s.io/v1 view may not change (one through core/v1 may),
/// as the stored (core/v1) fields and the names Kubernetes' errors give them.
const EVENT_IMMUTABLE: &[(&str, &str)] = &[
    ("involvedObject", "involvedObject"),
    ("reason", "reason"),
    ("message", "message"),
    ("source", "source"),
    ("firstTimestamp", "firstTimestamp"),
    ("lastTimestamp", "lastTimestamp"),
    ("count", "count"),
    ("type", "type"),
    ("eventTime", "eventTime"),
    ("action", "action"),
    ("related", "related"),
    ("reportingComponent", "reportingController"),
    ("reportingInstance", "reportingInstance"),
];

impl View {
    /// Refuses an update through the view that changes what the event reports (`old` and
    /// `new` in the stored form), as events.k8s.io/v1 does: only its series and metadata may
    /// change.
    pub fn check_update(&self, old: &Value, new: &Value) -> Result<(), ApiError> {
        let errors = immutable_event_changes(old, new);
        if errors.is_empty() {
            return Ok(());
        }
        let name = new.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        Err(ApiError::invalid(self.view, name, errors))
    }
}

/// The fields of [`EVENT_IMMUTABLE`] that differ between `old` and `new` (absent, null and a
/// zero value alike, as Go's fields compare; times to the microsecond).
fn immutable_event_changes(old: &Value, new: &Value) -> Vec<FieldError> {
    let normal = |object: &Value, field: &str| -> Value {
        match object.get(field) {
            None | Some(Value::Null) => Value::Null,
            Some(Value::String(text)) if text.is_empty() => Value::Null,
            Some(Value::Number(n)) if n.as_i64() == Some(0) => Value::Null,
            Some(Value::Object(map)) if map.is_empty() => Value::Null,
            Some(Value::String(text)) => match chrono::DateTime::parse_from_rfc3339(text) {
                Ok(time) => json!(time.timestamp_micros()),
                Err(_) => Value::String(text.clone()),
            },
            Some(other) => other.clone(),
        }
    };
    let mut errors = Vec::new();
    for &(field, path) in EVENT_IMMUTABLE {
        if normal(old, field) != normal(new, field) {
            let value = match new.get(field) {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            errors.push(FieldError::invalid(path, &value, "field is immutable"));
        }
    }
    errors
}

/// Checks a new events.k8s.io/v1 event as Kubernetes' `ValidateEventCreate` does for this
/// API, in its order and words: with an `eventTime`, the reporting controller (a qualified
/// name), instance, action and reason, the note's length (as `message`, its internal name);
/// then the name (a DNS subdomain), the series, the time, the type, and the core/v1 fields
/// this API keeps only to read old events.
fn validate_event(event: &Value) -> Vec<FieldError> {
    const MAX_NOTE: usize = 1024;
    const MAX_FIELD: usize = 128;
    let mut errors = Vec::new();
    let text = |field: &str| event.get(field).and_then(Value::as_str).unwrap_or("");
    let at_most = |field: &str, limit: usize| {
        FieldError::invalid(field, "", format!("can have at most {limit} characters"))
    };
    let timed = event.get("eventTime").is_some_and(|t| !t.is_null());
    if timed {
        let controller = text("reportingController");
        if controller.is_empty() {
            errors.push(FieldError::required("reportingController"));
        }
        for problem in crate::model::validation::label_key_errors(controller) {
            errors.push(FieldError::invalid("reportingController", controller, problem));
        }
        for field in ["reportingInstance", "action", "reason"] {
            let value = text(field);
            if value.is_empty() {
                errors.push(FieldError::required(field));
            } else if value.len() > MAX_FIELD {
                errors.push(at_most(field, MAX_FIELD));
            }
        }
        if text("note").len() > MAX_NOTE {
            errors.push(at_most("message", MAX_NOTE));
        }
    }
    let name = event.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    if !name.is_empty() {
        for problem in crate::model::validation::dns1123_subdomain_errors(name) {
            errors.push(FieldError::invalid("metadata.name", name, problem));
        }
    }
    errors.extend(validate_series(event));
    if !timed {
        errors.push(FieldError::required("eventTime"));
    }
    let kind = text("type");
    if kind != "Normal" && kind != "Warning" {
        errors.push(FieldError::invalid("type", "", format!("has invalid value: {kind}")));
    }
    // The core/v1 fields this API keeps only to read old events are not for new ones.
    let set = |field: &str| event.get(field).is_some_and(|v| !v.is_null());
    let deprecated = [
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
        ("deprecatedSource", "source"),
    ];
    for (field, path) in deprecated {
        let empty_source = field == "deprecatedSource"
            && event[field].as_object().is_some_and(|source| {
                source.values().all(|v| v.as_str().is_none_or(str::is_empty))
            });
        let zero = event[field].as_i64() == Some(0);
        if set(field) && !empty_source && !zero {
            errors.push(FieldError::invalid(path, "", "needs to be unset"));
        }
    }
    if text("note").len() > MAX_NOTE {
        errors.push(at_most("message", MAX_NOTE));
    }
    errors
}

/// Checks an events.k8s.io/v1 event's `series`, when it has one.
fn validate_series(event: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(series) = event.get("series").filter(|s| !s.is_null()) {
        if series.get("count").and_then(Value::as_i64).is_none_or(|c| c < 2) {
            errors.push(FieldError::invalid("series.count", "", "should be at least 2"));
        }
        if series.get("lastObservedTime").is_none_or(Value::is_null) {
            errors.push(FieldError::required("series.lastObservedTime"));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> View {
        View::of(resources::find("events.k8s.io", "v1", "events").unwrap()).unwrap()
    }

    #[test]
    fn events_convert_both_ways() {
        let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2026-11-30T08:00:00.000000Z", "reportingController": "example.com/c",
            "reportingInstance": "c-1", "action": "Scheduling", "reason": "Scheduled",
            "regarding": {"kind": "Pod", "name": "p"}, "note": "placed", "type": "Normal"});
        let stored = view().stored_form(event.clone(), true).unwrap();
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(stored["message"], "placed");
        assert_eq!(stored["reportingComponent"], "example.com/c");
        assert_eq!(view().view_form(stored), event);
        assert!(View::of(resources::find("", "v1", "events").unwrap()).is_none());
        // A core event's empty reporters (core/v1 writes them empty) are left out here.
        let core = json!({"metadata": {"name": "k"}, "reportingComponent": "",
            "reportingInstance": "", "eventTime": null, "reason": "R"});
        let viewed = view().view_form(core);
        assert!(viewed.get("reportingController").is_none(), "{viewed}");
        assert!(viewed.get("reportingInstance").is_none(), "{viewed}");
        assert_eq!(viewed.get("eventTime"), Some(&Value::Null));
    }

    #[test]
    fn events_k8s_io_rules_apply() {
        let invalid = json!({"metadata": {"name": "e"}, "type": "Odd",
            "series": {"count": 1}, "deprecatedCount": 3, "deprecatedSource": {"component": "x"}});
        let Err(ApiError::Invalid { causes, .. }) = view().stored_form(invalid.clone(), true)
        else {
            panic!("expected Invalid");
        };
        // Without an eventTime, the reporting fields are not looked at, as in Kubernetes.
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            ["series.count", "series.lastObservedTime", "eventTime", "type", "count", "source"]
        );
        assert_eq!(causes[3].message, "Invalid value: \"\": has invalid value: Odd");
        let mut timed = invalid.clone();
        timed["eventTime"] = json!("2026-01-01T00:00:00.000000Z");
        timed["metadata"]["name"] = json!("UPPER.1");
        timed["note"] = json!("n".repeat(1025));
        let Err(ApiError::Invalid { causes, .. }) = view().stored_form(timed, true) else {
            panic!("expected Invalid");
        };
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            &fields[..6],
            [
                "reportingController",
                "reportingController",
                "reportingController",
                "reportingInstance",
                "action",
                "reason"
            ]
        );
        assert!(fields.contains(&"metadata.name") && fields.contains(&"message"), "{fields:?}");
        // An update is held only to its series (an event core/v1 wrote has no action).
        let Err(ApiError::Invalid { causes, .. }) = view().stored_form(invalid, false) else {
            panic!("expected Invalid");
        };
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["series.count", "series.lastObservedTime"]);
        let annotated = json!({"metadata": {"name": "e", "annotations": {"seen": "yes"}},
            "reason": "Started", "note": "Started container c", "deprecatedCount": 2});
        assert!(view().stored_form(annotated, false).is_ok());
        let wrong_kind = json!({"apiVersion": "v1", "kind": "Event"});
        assert!(matches!(view().stored_form(wrong_kind, true), Err(ApiError::BadRequest(_))));
    }
}
