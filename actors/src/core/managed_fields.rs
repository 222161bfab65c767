//! Field ownership (`metadata.managedFields`): which manager set which fields, by update or by
//! server-side apply, and the conflicts an apply meets.

use chrono::DateTime;
use serde_json::{json, Map, Value};

use super::field_set::{self, display_path, FieldSet, FieldTree, Form};
use super::ApiError;
use crate::model::{json, now, JsonField};

/// `Apply` (server-side apply) or `Update` (every other write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who writes: a field manager, by which operation, through which subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub operation: Operation,
    /// `""` for the object itself, `"status"` for its status.
    pub subresource: &'a str,
    pub api_version: String,
}

/// One manager's fields.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: String,
    fields: FieldSet,
}

impl Entry {
    /// When the entry was last written, in seconds (0: never said).
    fn seconds(&self) -> i64 {
        let time = self.time.as_deref().and_then(|t| DateTime::parse_from_rfc3339(t).ok());
        time.map_or(0, |t| t.timestamp())
    }

    fn is(&self, writer: &Writer) -> bool {
        self.manager == writer.manager
            && self.operation == writer.operation.as_str()
            && self.subresource == writer.subresource
    }

    fn into_json(self) -> Value {
        let fields = self.fields.into_json();
        entry_json(
            &self.manager,
            &self.operation,
            &self.api_version,
            self.time,
            &self.subresource,
            fields,
        )
    }

    /// An entry a client sent, checked as Kubernetes decodes it: besides what `from_json`
    /// checks, an apiVersion and a fieldsType are required.
    fn sent(value: &Value) -> Result<Entry, String> {
        let text = |field: &str| value.get(field).and_then(Value::as_str).unwrap_or("");
        if text("apiVersion").is_empty() {
            return Err("apiVersion must not be empty".into());
        }
        if text("fieldsType").is_empty() {
            return Err("missing fieldsType".into());
        }
        Entry::from_json(value)
    }

    fn from_json(value: &Value) -> Result<Entry, String> {
        let text = |field: &str| value.get(field).and_then(Value::as_str).unwrap_or("").to_string();
        if !value.is_object() {
            return Err("each managedFields entry must be an object".into());
        }
        let operation = text("operation");
        if operation != "Apply" && operation != "Update" {
            return Err(format!("operation must be Apply or Update, got {operation:?}"));
        }
        match value.get("fieldsType").and_then(Value::as_str) {
            None | Some("FieldsV1") => {}
            Some(other) => return Err(format!("fieldsType must be FieldsV1, got {other:?}")),
        }
        let fields = match value.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::default(),
            Some(v) => field_set::fields_from_json(v)?,
        };
        Ok(Entry {
            manager: text("manager"),
            operation,
            api_version: text("apiVersion"),
            time: value.get("time").and_then(Value::as_str).map(str::to_string),
            subresource: text("subresource"),
            fields,
        })
    }
}

/// A create's `managedFields` list as JSON text: the writer's one entry, with its keys in the
/// order `entry_json`'s map writes them.
fn entry_text(writer: &Writer, time: &str, fields_v1: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields_v1.len() + 160);
    let string = |out: &mut Vec<u8>, key: &str, value: &str| {
        out.extend_from_slice(key.as_bytes());
        crate::model::json::write_string(out, value);
    };
    string(&mut out, "[{\"apiVersion\":", &writer.api_version);
    out.extend_from_slice(b",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":");
    out.extend_from_slice(fields_v1);
    string(&mut out, ",\"manager\":", writer.manager);
    string(&mut out, ",\"operation\":", writer.operation.as_str());
    if !writer.subresource.is_empty() {
        string(&mut out, ",\"subresource\":", writer.subresource);
    }
    string(&mut out, ",\"time\":", time);
    out.extend_from_slice(b"}]");
    out
}

/// One `managedFields` entry as JSON.
fn entry_json(
    manager: &str,
    operation: &str,
    api_version: &str,
    time: Option<String>,
    subresource: &str,
    fields_v1: Value,
) -> Value {
    let mut entry = Map::with_capacity(7);
    entry.insert("manager".into(), json!(manager));
    entry.insert("operation".into(), json!(operation));
    entry.insert("apiVersion".into(), json!(api_version));
    if let Some(time) = time {
        entry.insert("time".into(), Value::String(time));
    }
    entry.insert("fieldsType".into(), json!("FieldsV1"));
    entry.insert("fieldsV1".into(), fields_v1);
    if !subresource.is_empty() {
        entry.insert("subresource".into(), json!(subresource));
    }
    Value::Object(entry)
}

/// Metadata the server sets: no manager owns it, and an applied configuration's values for it
/// are not merged.
pub(super) const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Identity fields of the root and of the metadata: no manager owns them.
const ROOT_IDENTITY: &[&str] = &["apiVersion", "kind"];
const METADATA_IDENTITY: &[&str] = &["name", "namespace"];

/// Removes the fields no manager owns from `set`: identity and server-set metadata, and the
/// part of the object the other kind of write (object or status) may not change.
fn unowned(set: &mut FieldSet, status_separate: bool, subresource: &str) {
    for field in ROOT_IDENTITY {
        set.remove_subtree(&[&field_set::field_element(field)]);
    }
    for field in METADATA_IDENTITY.iter().chain(SERVER_METADATA) {
        set.remove_subtree(&["f:metadata", &field_set::field_element(field)]);
    }
    if status_separate && subresource.is_empty() {
        set.remove_subtree(&["f:status"]);
    }
}

/// The fields of `object` a writer can own: all but those `unowned` removes, left out while
/// walking the object instead of built and removed.
fn owned_fields<T: FieldTree>(
    object: &Value,
    status_separate: bool,
    subresource: &str,
    form: Form,
) -> Option<T> {
    field_set::of_object_except(object, &unowned_skip(status_separate, subresource), form)
}

/// `owned_fields` as FieldsV1 JSON text.
fn owned_fields_json(object: &Value, status_separate: bool, subresource: &str) -> Option<Vec<u8>> {
    field_set::json_of_object_except(object, &unowned_skip(status_separate, subresource))
}

/// What `unowned` removes, as a walk leaves it out (`skip(parent path, field)`).
fn unowned_skip(status_separate: bool, subresource: &str) -> impl Fn(&str, &str) -> bool {
    let skip_status = status_separate && subresource.is_empty();
    move |parent: &str, field: &str| match parent {
        "" => ROOT_IDENTITY.contains(&field) || (skip_status && field == "status"),
        ".metadata" => METADATA_IDENTITY.contains(&field) || SERVER_METADATA.contains(&field),
        _ => false,
    }
}

fn bad_entries(problem: String) -> ApiError {
    ApiError::BadRequest(format!("metadata.managedFields: {problem}"))
}

/// The `managedFields` of one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ManagedFields {
    entries: Vec<Entry>,
}

/// A field an apply would change that another manager owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    pub manager: String,
    pub api_version: String,
    /// The other manager's operation (`Apply`, `Update`) and subresource.
    pub operation: String,
    pub subresource: String,
    /// The field as Kubernetes prints it: `.spec.containers[name="c"].image`.
    pub path: String,
    /// The field as path elements.
    pub(crate) elements: Vec<String>,
}

impl ManagedFields {
    /// The managed fields an object carries.
    pub fn of(object: &Value) -> Result<ManagedFields, ApiError> {
        let Some(list) = json::at(object, "/metadata/managedFields") else {
            return Ok(ManagedFields::default());
        };
        let entries = match list {
            Value::Null => Vec::new(),
            Value::Array(items) => {
                items.iter().map(Entry::from_json).collect::<Result<_, _>>().map_err(bad_entries)?
            }
            _ => return Err(bad_entries("must be a list".into())),
        };
        Ok(ManagedFields { entries })
    }

    /// The fields a writer's request asks for: those it sent, unless they are unchanged from
    /// the stored ones, or do not decode (then the stored ones, as Kubernetes keeps them: a
    /// client that does not know the field must not lose it). An empty list, or one empty
    /// entry (`[{}]`), is how a client clears the list.
    pub fn requested(current: &Value, sent: &Value) -> Result<ManagedFields, ApiError> {
        let stored = ManagedFields::of(current)?;
        match json::at(sent, "/metadata/managedFields") {
            None | Some(Value::Null) => Ok(stored),
            Some(list) if Some(list) == json::at(current, "/metadata/managedFields") => Ok(stored),
            Some(Value::Array(items))
                if items.is_empty()
                    || (items.len() == 1 && items[0].as_object().is_some_and(|e| e.is_empty())) =>
            {
                Ok(ManagedFields::default())
            }
            Some(Value::Array(items)) => {
                match items.iter().map(Entry::sent).collect::<Result<Vec<_>, _>>() {
                    Ok(mut entries) => {
                        entries.retain(|e| !e.fields.is_empty());
                        Ok(ManagedFields { entries })
                    }
                    Err(_) => Ok(stored),
                }
            }
            Some(_) => Err(bad_entries("must be a list".into())),
        }
    }

    /// Writes these entries into `object`'s metadata (none: the field goes), in Kubernetes'
    /// order: appliers first, then by time (to the second), manager, apiVersion, subresource.
    pub fn write_to(mut self, object: &mut Value) {
        let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        if self.entries.is_empty() {
            meta.remove("managedFields");
        } else {
            let seconds = Entry::seconds;
            self.entries.sort_by(|p, q| {
                (p.operation.cmp(&q.operation))
                    .then_with(|| seconds(p).cmp(&seconds(q)))
                    .then_with(|| p.manager.cmp(&q.manager))
                    .then_with(|| p.api_version.cmp(&q.api_version))
                    .then_with(|| p.subresource.cmp(&q.subresource))
            });
            let list = self.entries.into_iter().map(Entry::into_json).collect();
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }

    /// Records an update from `old` (none: a create) to `new`: the writer gains the fields it
    /// added or changed, other managers lose them, and fields that are gone leave every set.
    /// An object whose list was cleared is not tracked again until its next apply (Kubernetes'
    /// skip-non-applied manager).
    pub fn record_update(
        &mut self,
        old: Option<&Value>,
        new: &Value,
        writer: &Writer,
        status_separate: bool,
    ) {
        if old.is_some() && self.entries.is_empty() {
            return;
        }
        let changed = match old {
            Some(old) => {
                let mut changed = FieldSet::changed(old, new);
                unowned(&mut changed, status_separate, writer.subresource);
                changed
            }
            None => owned_fields(new, status_separate, writer.subresource, Form::Update)
                .unwrap_or_default(),
        };
        for entry in &mut self.entries {
            entry.fields.subtract(&changed);
            entry.fields.retain_existing(new);
        }
        if !changed.is_empty() {
            let entry = self.entry(writer);
            entry.fields.union(changed);
            entry.time = Some(now());
        }
        self.entries.retain(|e| !e.fields.is_empty());
        self.cap_updaters();
    }

    /// Kubernetes' cap on update entries: past ten, the oldest are merged, API version by API
    /// version, into one `ancient-changes` entry (with the time of the newest merged in).
    fn cap_updaters(&mut self) {
        const MOST: usize = 10;
        let mut updaters: Vec<usize> =
            (0..self.entries.len()).filter(|&i| self.entries[i].operation == "Update").collect();
        if updaters.len() <= MOST {
            return;
        }
        updaters.sort_by_key(|&i| self.entries[i].seconds());
        let mut first_of_version: Vec<(String, usize)> = Vec::new();
        let (mut left, mut merged) = (updaters.len(), Vec::new());
        for i in updaters {
            if left <= MOST {
                break;
            }
            let version = self.entries[i].api_version.clone();
            let Some(&(_, first)) = first_of_version.iter().find(|(v, _)| *v == version) else {
                first_of_version.push((version, i));
                continue;
            };
            // The version's bucket: the one made before, or else its oldest entry, renamed.
            let is_bucket = |e: &Entry| {
                e.manager == BUCKET && e.operation == "Update" && e.api_version == version
            };
            let bucket = match self.entries.iter().position(is_bucket) {
                // (Never merged into itself: what it holds would be lost, as Kubernetes'
                // loop loses it.)
                Some(bucket) if bucket == i => continue,
                Some(bucket) => bucket,
                None => {
                    let renamed = &mut self.entries[first];
                    renamed.manager = BUCKET.to_string();
                    renamed.subresource = String::new();
                    first
                }
            };
            let fields = std::mem::take(&mut self.entries[i].fields);
            let time = self.entries[i].time.clone();
            self.entries[bucket].fields.union(fields);
            self.entries[bucket].time = time;
            merged.push(i);
            left -= 1;
        }
        let mut index = 0;
        self.entries.retain(|_| {
            index += 1;
            !merged.contains(&(index - 1))
        });
    }

    /// Records the create of `object` by `writer`. Entries sent along are merged and written
    /// into `object`. Without them the writer owns every field it set, and its entry is
    /// written as JSON text straight from the object, never built as a value: it is returned
    /// for the store to write in place of the `null` that `object` holds for it meanwhile.
    pub fn record_create(
        mut self,
        object: &mut Value,
        writer: &Writer,
        status_separate: bool,
    ) -> Option<JsonField> {
        if !self.entries.is_empty() {
            self.record_update(None, object, writer, status_separate);
            self.write_to(object);
            return None;
        }
        let fields = owned_fields_json(object, status_separate, writer.subresource);
        let meta = object.get_mut("metadata").and_then(Value::as_object_mut)?;
        let Some(fields) = fields else {
            meta.remove("managedFields");
            return None;
        };
        meta.insert("managedFields".into(), Value::Null);
        let json = entry_text(writer, &now(), &fields);
        Some(JsonField { name: "managedFields", json })
    }

    fn entry(&mut self, writer: &Writer) -> &mut Entry {
        let index = match self.entries.iter().position(|e| e.is(writer)) {
            Some(i) => i,
            None => {
                self.entries.push(Entry {
                    manager: writer.manager.to_string(),
                    operation: writer.operation.as_str().to_string(),
                    api_version: writer.api_version.clone(),
                    time: None,
                    subresource: writer.subresource.to_string(),
                    fields: FieldSet::default(),
                });
                self.entries.len() - 1
            }
        };
        &mut self.entries[index]
    }

    /// Server-side apply of `config` onto `live` (none: the object is created) by `writer`.
    /// Returns the merged object; fails with the conflicts unless `force`, which takes the
    /// fields from their owners. The fields of an object nobody is recorded to own are first
    /// given to `before-first-apply`, so that an apply changing them is a conflict.
    pub fn apply(
        &mut self,
        live: Option<&Value>,
        config: &Value,
        writer: &Writer,
        status_separate: bool,
        force: bool,
    ) -> Result<Value, Vec<FieldConflict>> {
        let applied: FieldSet =
            owned_fields(config, status_separate, writer.subresource, Form::Apply)
                .unwrap_or_default();
        let Some(live) = live else {
            self.entries.clear();
            let entry = self.entry(writer);
            entry.fields = applied;
            entry.time = Some(now());
            return Ok(config.clone());
        };
        if self.entries.is_empty() {
            let before = Writer {
                manager: BEFORE_FIRST_APPLY,
                operation: Operation::Update,
                subresource: writer.subresource,
                api_version: writer.api_version.clone(),
            };
            self.record_update(None, live, &before, status_separate);
        }
        let mut merged = live.clone();
        field_set::merge_applied(&mut merged, config);

        // Fields this apply changes that others own are conflicts.
        let mut conflicts = Vec::new();
        let leaves: Vec<Vec<String>> =
            applied.members().into_iter().filter(|p| applied.is_leaf(p)).collect();
        for entry in self.entries.iter_mut().filter(|e| !e.is(writer)) {
            let mut taken = FieldSet::default();
            let mut items_seen: Vec<&[String]> = Vec::new();
            for path in &leaves {
                // An item another manager owns whole (a key the live list repeats, which is
                // one member): a change under it is a change of it.
                let owned = match entry.fields.is_leaf(path) {
                    true => path.as_slice(),
                    false => match (1..path.len()).rev().map(|n| &path[..n]).find(|item| {
                        item.last().is_some_and(|e| e.starts_with("k:"))
                            && entry.fields.is_leaf(item)
                    }) {
                        Some(item) if !items_seen.contains(&item) => {
                            items_seen.push(item);
                            item
                        }
                        _ => continue,
                    },
                };
                let path = &owned.to_vec();
                let before = field_set::resolve_all(live, path);
                let after = field_set::resolve_all(&merged, path);
                if before != after {
                    conflicts.push(FieldConflict {
                        manager: entry.manager.clone(),
                        api_version: entry.api_version.clone(),
                        operation: entry.operation.clone(),
                        subresource: entry.subresource.clone(),
                        path: display_path(path),
                        elements: path.clone(),
                    });
                    taken.union(FieldSet::single(path));
                }
            }
            if force {
                entry.fields.subtract(&taken);
            }
        }
        if !conflicts.is_empty() && !force {
            return Err(conflicts);
        }

        // Fields this manager applied before and no longer does go, unless someone else
        // holds them (or something under them). A list item goes whole unless another
        // manager holds the item itself: fields others set inside it go with it (as
        // structured-merge-diff prunes), so no half item is left behind.
        let previous = self.entries.iter().find(|e| e.is(writer)).map(|e| e.fields.clone());
        if let Some(mut dropped) = previous {
            dropped.subtract(&applied);
            let others: Vec<&FieldSet> =
                self.entries.iter().filter(|e| !e.is(writer)).map(|e| &e.fields).collect();
            for path in dropped.members() {
                // Nothing inside an atomic field the manager still applies: a map whose keys
                // an older build recorded one by one.
                let inside_atomic = (1..path.len())
                    .any(|n| applied.is_leaf(&path[..n]) && field_set::is_atomic_path(&path[..n]));
                // Nor a map or list the manager still applies something in (an entry an
                // older build recorded with the map itself as a member).
                let still_applied = applied.touches(&path);
                let item =
                    path.last().is_some_and(|e| matches!(e.get(..2), Some("k:" | "v:" | "i:")));
                let held = match item {
                    true => others.iter().any(|set| set.has(&path)),
                    false => others.iter().any(|set| set.touches(&path)),
                };
                if !inside_atomic && !still_applied && !held {
                    field_set::remove_path(&mut merged, &path);
                }
            }
        }
        // An apply that changes nothing keeps its manager's time, as Kubernetes' does, so that
        // re-applying the same configuration writes nothing (and no watcher hears of it).
        let changed = merged != *live;
        let entry = self.entry(writer);
        entry.fields = applied;
        entry.api_version = writer.api_version.clone();
        if changed || entry.time.is_none() {
            entry.time = Some(now());
        }
        for entry in &mut self.entries {
            entry.fields.retain_existing(&merged);
        }
        self.entries.retain(|e| !e.fields.is_empty());
        self.cap_updaters();
        Ok(merged)
    }
}

/// The fields of a client-side apply's last applied configuration (the annotation kubectl
/// keeps) that `kubectl apply --server-side` may take over without conflicts: those whose
/// value in `object` is still the one last applied. A field another writer changed since stays
/// a conflict, as in Kubernetes' last-applied manager.
pub fn last_applied_fields(object: &Value) -> Option<FieldSet> {
    let annotation = json::at(object, LAST_APPLIED_POINTER)?.as_str()?;
    let config: Value = serde_json::from_str(annotation).ok()?;
    let unchanged = field_set::still_applied(&config, object);
    Some(owned_fields(&unchanged, false, "", Form::Apply).unwrap_or_default())
}

/// The manager the oldest update entries are merged into past the cap.
const BUCKET: &str = "ancient-changes";

/// The manager of what an object held before its first apply, when nobody was recorded.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";

pub const LAST_APPLIED_POINTER: &str =
    "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration";

/// The 409 of an apply that meets conflicts, worded as Kubernetes words it.
pub fn conflict_message(conflicts: &[FieldConflict]) -> String {
    if let [conflict] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            conflict.manager_text(),
            conflict.path
        );
    }
    // Grouped by manager, managers sorted, as Kubernetes lists them.
    let mut managers: Vec<String> = conflicts.iter().map(FieldConflict::manager_text).collect();
    managers.sort();
    managers.dedup();
    let mut lines = Vec::new();
    for manager in &managers {
        lines.push(format!("conflicts with {manager}:"));
        let paths = conflicts.iter().filter(|c| c.manager_text() == *manager);
        lines.extend(paths.map(|c| format!("- {}", c.path)));
    }
    format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
}

impl FieldConflict {
    /// The other manager as Kubernetes names it in a conflict: `"kubectl"` for an applier,
    /// `"editor" using v1` for an updater, with `with subresource "scale"` for one through a
    /// subresource.
    pub fn manager_text(&self) -> String {
        let mut text = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            text.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            text.push_str(&format!(" using {}", self.api_version));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer<'a>(manager: &'a str, operation: Operation) -> Writer<'a> {
        Writer { manager, operation, subresource: "", api_version: "v1".into() }
    }

    fn owners(fields: &ManagedFields) -> Vec<(String, Value)> {
        fields.entries.iter().map(|e| (e.manager.clone(), e.fields.clone().into_json())).collect()
    }

    #[test]
    fn updates_move_ownership_to_the_writer() {
        let created = json!({"kind": "ConfigMap", "metadata": {"name": "c", "uid": "u"},
            "data": {"a": "1", "b": "1"}});
        let mut fields = ManagedFields::default();
        fields.record_update(None, &created, &writer("create", Operation::Update), false);
        let mut edited = created.clone();
        edited["data"]["b"] = json!("2");
        edited["data"].as_object_mut().unwrap().remove("a");
        fields.record_update(Some(&created), &edited, &writer("edit", Operation::Update), false);
        assert_eq!(
            owners(&fields),
            vec![
                ("create".into(), json!({"f:data": {}})),
                ("edit".into(), json!({"f:data": {"f:b": {}}})),
            ]
        );
        let before = fields.clone();
        fields.record_update(Some(&edited), &edited, &writer("edit", Operation::Update), false);
        assert_eq!(fields, before, "a write that changes nothing changes no ownership");
    }

    #[test]
    fn a_reapply_keeps_an_atomic_map_whose_keys_an_older_build_recorded() {
        let live = json!({"metadata": {"name": "s", "managedFields": [{"manager": "kubectl",
                "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:selector": {".": {}, "f:app": {}}}}}]},
            "spec": {"selector": {"app": "web"}}});
        let mut fields = ManagedFields::of(&live).unwrap();
        let config = json!({"metadata": {"name": "s"}, "spec": {"selector": {"app": "web"}}});
        let apply = writer("kubectl", Operation::Apply);
        let merged = fields.apply(Some(&live), &config, &apply, false, false).unwrap();
        assert_eq!(merged["spec"]["selector"], json!({"app": "web"}), "{merged}");
        assert_eq!(
            owners(&fields),
            vec![("kubectl".into(), json!({"f:spec": {"f:selector": {}}}))]
        );
    }

    #[test]
    fn apply_conflicts_force_and_removal() {
        let live = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "1"}});
        let mut fields = ManagedFields::default();
        fields.record_update(None, &live, &writer("kubectl-create", Operation::Update), false);
        let apply = writer("kubectl", Operation::Apply);

        // Same values: shared ownership, no conflict.
        let same = json!({"metadata": {"name": "c"}, "data": {"a": "1"}});
        let merged = fields.apply(Some(&live), &same, &apply, false, false).unwrap();
        assert_eq!(merged, live);

        // Another value for a field someone else owns: a conflict, then forced.
        let other = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
        let conflicts = fields.apply(Some(&live), &other, &apply, false, false).unwrap_err();
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].path, ".data.b");
        assert!(conflict_message(&conflicts).contains("conflict with \"kubectl-create\""));
        // Worded as Kubernetes words them: appliers by name, updaters with their version,
        // several grouped by manager, managers sorted.
        let conflict = |manager: &str, operation: &str, path: &str| FieldConflict {
            manager: manager.into(),
            api_version: "v1".into(),
            operation: operation.into(),
            subresource: String::new(),
            path: path.into(),
            elements: Vec::new(),
        };
        assert_eq!(
            conflict_message(&[conflict("kubectl", "Apply", ".data.k1")]),
            "Apply failed with 1 conflict: conflict with \"kubectl\": .data.k1"
        );
        let several = [
            conflict("zed", "Update", ".data.b"),
            conflict("kubectl", "Apply", ".data.k1"),
            conflict("kubectl", "Apply", ".metadata.labels.a"),
        ];
        assert_eq!(
            conflict_message(&several),
            "Apply failed with 3 conflicts: conflicts with \"kubectl\":\n- .data.k1\n- .metadata.labels.a\nconflicts with \"zed\" using v1:\n- .data.b"
        );
        let scaler = FieldConflict {
            subresource: "scale".into(),
            ..conflict("scaler", "Update", ".spec.replicas")
        };
        assert_eq!(scaler.manager_text(), "\"scaler\" with subresource \"scale\" using v1");
        let forced = fields.apply(Some(&live), &other, &apply, false, true).unwrap();
        assert_eq!(forced["data"]["b"], "2");
        assert_eq!(
            owners(&fields),
            vec![
                ("kubectl-create".into(), json!({"f:data": {".": {}, "f:a": {}}})),
                // An apply owns what its configuration names: the map's keys, not the map.
                ("kubectl".into(), json!({"f:data": {"f:a": {}, "f:b": {}}})),
            ]
        );

        // Dropping b from the config removes it (nobody else owns it); a stays (shared).
        let smaller = json!({"metadata": {"name": "c"}, "data": {}});
        let merged = fields.apply(Some(&forced), &smaller, &apply, false, false).unwrap();
        assert_eq!(merged["data"], json!({"a": "1"}));
    }

    /// A live list that repeats a key (a PUT stored it) is read as structured-merge-diff
    /// reads it: the key one member, owned whole; an apply that leaves it alone keeps every
    /// item, one that sets it conflicts with its owner and, forced, leaves one item.
    #[test]
    fn a_key_the_live_list_repeats_is_one_member() {
        let rc = |env: Value| {
            json!({"metadata": {"name": "r"}, "spec": {"template": {"spec": {"containers": [
                {"name": "a", "image": "i", "env": env}]}}}})
        };
        let created = rc(json!([{"name": "A", "value": "a"}]));
        let mut fields = ManagedFields::default();
        let apply = writer("m1", Operation::Apply);
        fields.apply(None, &created, &apply, false, false).unwrap();
        let repeated = json!([{"name": "A", "value": "a"}, {"name": "E", "value": "1"},
            {"name": "E", "value": "2"}]);
        let edited = rc(repeated.clone());
        fields.record_update(Some(&created), &edited, &writer("editor", Operation::Update), false);
        let editor = &owners(&fields)[1];
        let env = &editor.1["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"a\"}"]
            ["f:env"];
        assert_eq!(env, &json!({"k:{\"name\":\"E\"}": {}}), "{editor:?}");

        // Another item: no conflict, the repeated ones stay.
        let more = rc(json!([{"name": "A", "value": "a"}, {"name": "F", "value": "f"}]));
        let merged = fields.apply(Some(&edited), &more, &apply, false, false).unwrap();
        let env = &merged["spec"]["template"]["spec"]["containers"][0]["env"];
        let names: Vec<&str> =
            env.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["A", "E", "E", "F"], "{merged}");

        // The repeated key itself, even as its first item has it: the editor's.
        let same = rc(json!([{"name": "A", "value": "a"}, {"name": "E", "value": "1"},
            {"name": "F", "value": "f"}]));
        let conflicts = fields.apply(Some(&merged), &same, &apply, false, false).unwrap_err();
        assert_eq!(conflicts.len(), 1, "{conflicts:?}");
        assert_eq!(conflicts[0].path, ".spec.template.spec.containers[name=\"a\"].env[name=\"E\"]");
        assert_eq!(conflicts[0].manager, "editor");
        let forced = fields.apply(Some(&merged), &same, &apply, false, true).unwrap();
        let env = &forced["spec"]["template"]["spec"]["containers"][0]["env"];
        assert_eq!(
            env,
            &json!([{"name": "A", "value": "a"}, {"name": "E", "value": "1"},
            {"name": "F", "value": "f"}])
        );
        // Dropped from the configuration, the key goes with every item it had.
        let mut twice = forced.clone();
        twice["spec"]["template"]["spec"]["containers"][0]["env"] = repeated;
        assert!(field_set::remove_path(
            &mut twice,
            &[
                "f:spec",
                "f:template",
                "f:spec",
                "f:containers",
                "k:{\"name\":\"a\"}",
                "f:env",
                "k:{\"name\":\"E\"}",
            ]
            .map(String::from)
        ));
        assert_eq!(
            twice["spec"]["template"]["spec"]["containers"][0]["env"],
            json!([{"name": "A", "value": "a"}])
        );
    }

    #[test]
    fn past_ten_updaters_the_oldest_are_merged_into_ancient_changes() {
        let mut object = json!({"metadata": {"name": "c"}, "data": {}});
        let mut fields = ManagedFields::default();
        fields.record_update(None, &object, &writer("creator", Operation::Update), false);
        // Times to the second: make them distinct and ordered by hand.
        for i in 1..=12 {
            let before = object.clone();
            object["data"][format!("k{i}")] = json!("v");
            let manager = format!("m{i}");
            fields.record_update(
                Some(&before),
                &object,
                &writer(&manager, Operation::Update),
                false,
            );
            for (n, entry) in fields.entries.iter_mut().enumerate() {
                if entry.manager != BUCKET {
                    entry.time = Some(format!("2026-01-01T00:00:{:02}Z", n));
                }
            }
        }
        let managers: Vec<String> = fields.entries.iter().map(|e| e.manager.clone()).collect();
        assert_eq!(managers.len(), 10, "{managers:?}");
        assert!(managers.contains(&"ancient-changes".to_string()), "{managers:?}");
        assert!(managers.contains(&"m12".to_string()));
        assert!(!managers.contains(&"creator".to_string()));
        // Whatever was merged is still owned, by the bucket.
        let bucket = fields.entries.iter().find(|e| e.manager == "ancient-changes").unwrap();
        assert!(bucket.fields.touches(&["f:data".to_string(), "f:k1".to_string()]));
    }

    #[test]
    fn an_item_an_applier_drops_goes_whole_whatever_others_set_in_it() {
        let config = |container: &str| {
            json!({"kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": container, "image": "i"}]}})
        };
        let apply = writer("applier", Operation::Apply);
        let mut fields = ManagedFields::default();
        let live = fields.apply(None, &config("nginx"), &apply, false, false).unwrap();
        let mut updated = live.clone();
        updated["spec"]["containers"][0]["workingDir"] = json!("/home");
        fields.record_update(Some(&live), &updated, &writer("updater", Operation::Update), false);
        let merged = fields.apply(Some(&updated), &config("other"), &apply, false, false).unwrap();
        assert_eq!(merged["spec"]["containers"], json!([{"name": "other", "image": "i"}]));
        assert_eq!(owners(&fields).len(), 1, "{:?}", owners(&fields));

        // An item another manager holds itself stays, with what it holds in it.
        let mut fields = ManagedFields::default();
        let live = fields.apply(None, &config("nginx"), &apply, false, false).unwrap();
        let sharer = writer("sharer", Operation::Apply);
        let shared = json!({"kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "nginx", "workingDir": "/home"}]}});
        let live = fields.apply(Some(&live), &shared, &sharer, false, false).unwrap();
        let merged = fields.apply(Some(&live), &config("other"), &apply, false, false).unwrap();
        let names: Vec<&str> = merged["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["nginx", "other"], "{merged}");
        assert_eq!(merged["spec"]["containers"][0]["workingDir"], "/home");
    }

    #[test]
    fn an_applier_that_loses_its_last_field_to_a_forced_apply_has_no_entry_left() {
        let config = |value: &str| json!({"metadata": {"name": "c"}, "data": {"x": value}});
        let (kubectl, other) =
            (writer("kubectl", Operation::Apply), writer("other", Operation::Apply));
        let mut fields = ManagedFields::default();
        let live = fields.apply(None, &config("1"), &kubectl, false, false).unwrap();
        let live = fields.apply(Some(&live), &config("1"), &other, false, false).unwrap();
        let both = json!({"f:data": {"f:x": {}}});
        assert_eq!(
            owners(&fields),
            vec![("kubectl".into(), both.clone()), ("other".into(), both.clone())]
        );
        assert!(fields.apply(Some(&live), &config("2"), &other, false, false).is_err());
        let forced = fields.apply(Some(&live), &config("2"), &other, false, true).unwrap();
        assert_eq!(forced["data"]["x"], "2");
        assert_eq!(owners(&fields), vec![("other".into(), both)]);
    }

    #[test]
    fn a_reapply_keeps_a_map_an_older_build_recorded_as_a_member() {
        let live = json!({"metadata": {"name": "c", "managedFields": [{"manager": "kubectl",
                "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:x": {}}}}]},
            "data": {"x": "1"}});
        let mut fields = ManagedFields::of(&live).unwrap();
        let config = json!({"metadata": {"name": "c"}, "data": {"x": "2"}});
        let merged =
            fields.apply(Some(&live), &config, &writer("kubectl", Operation::Apply), false, false);
        assert_eq!(merged.unwrap()["data"], json!({"x": "2"}));
        assert_eq!(owners(&fields), vec![("kubectl".into(), json!({"f:data": {"f:x": {}}}))]);
    }

    #[test]
    fn a_created_entry_as_text_is_what_its_value_serializes_to() {
        for subresource in ["", "status"] {
            let writer = Writer {
                manager: "kube\"ctl",
                operation: Operation::Update,
                subresource,
                api_version: "v1".into(),
            };
            let fields = json!({"f:data": {".": {}, "f:a\"b": {}}});
            let text =
                entry_text(&writer, "2026-11-30T00:00:00Z", &serde_json::to_vec(&fields).unwrap());
            let value = entry_json(
                writer.manager,
                writer.operation.as_str(),
                &writer.api_version,
                Some("2026-11-30T00:00:00Z".into()),
                subresource,
                fields,
            );
            assert_eq!(String::from_utf8(text).unwrap(), json!([value]).to_string());
        }
    }

    #[test]
    fn sent_managed_fields_replace_or_reset_the_stored_ones() {
        let current = json!({"metadata": {"managedFields": [{"manager": "m",
            "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]}});
        let unchanged = ManagedFields::requested(&current, &current).unwrap();
        assert_eq!(unchanged.entries.len(), 1);
        for reset in [json!([{}]), json!([])] {
            let sent = json!({"metadata": {"managedFields": reset}});
            assert!(ManagedFields::requested(&current, &sent).unwrap().entries.is_empty());
        }
        // Once cleared, updates are not tracked; the next apply finds the fields it changes
        // owned by `before-first-apply`.
        let old = json!({"metadata": {"name": "c"}, "data": {"a": "1"}});
        let new = json!({"metadata": {"name": "c"}, "data": {"a": "2"}});
        let mut cleared = ManagedFields::default();
        cleared.record_update(Some(&old), &new, &writer("edit", Operation::Update), false);
        assert!(cleared.entries.is_empty());
        let config = json!({"metadata": {"name": "c"}, "data": {"a": "3"}});
        let apply = writer("applier", Operation::Apply);
        let conflicts = cleared.apply(Some(&new), &config, &apply, false, false).unwrap_err();
        assert_eq!(
            conflict_message(&conflicts),
            "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.a"
        );
        // Entries that do not decode leave the stored ones as they are, as in Kubernetes.
        for bad in [
            json!({"manager": "x", "operation": "Steal", "apiVersion": "v1", "fieldsType": "FieldsV1"}),
            json!({"manager": "x", "operation": "Update", "apiVersion": "v1"}),
            json!({"manager": "x", "operation": "Update", "fieldsType": "FieldsV1"}),
        ] {
            let sent = json!({"metadata": {"managedFields": [bad]}});
            let kept = ManagedFields::requested(&current, &sent).unwrap();
            assert_eq!(kept, ManagedFields::of(&current).unwrap(), "{sent}");
        }
        assert!(
            ManagedFields::requested(&current, &json!({"metadata": {"managedFields": 1}})).is_err()
        );
    }

    #[test]
    fn entries_are_written_appliers_first_then_by_time_and_manager() {
        let entry = |manager: &str, operation: &str, time: &str| {
            json!({"manager": manager, "operation": operation, "apiVersion": "v1",
                "time": time, "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}})
        };
        let mut object = json!({"metadata": {"managedFields": [
            entry("b", "Update", "2026-01-01T00:00:02Z"),
            entry("z", "Apply", "2026-01-01T00:00:09Z"),
            entry("c", "Update", "2026-01-01T00:00:01Z"),
            entry("a", "Update", "2026-01-01T00:00:02Z")]}});
        ManagedFields::of(&object).unwrap().write_to(&mut object);
        let order: Vec<&str> = object["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["z", "c", "a", "b"]);
    }

    #[test]
    fn a_create_walks_the_object_once_to_the_same_fields() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "generation": 1,
                "labels": {"a": "b"}, "finalizers": ["x", "y"], "managedFields": []},
            "spec": {"containers": [{"name": "c", "image": "i", "args": ["a"],
                "ports": [{"containerPort": 80}, {"containerPort": 80, "protocol": "UDP"}],
                "resources": {"requests": {"cpu": "1"}}}], "nodeSelector": {}},
            "status": {"phase": "Pending"}});
        let objects = [
            pod,
            json!({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}),
            // Repeated keys (the last wins), an unsorted set, keys needing escapes.
            json!({"kind": "Pod", "metadata": {"name": "p", "finalizers": ["z", "a\"b", "a"],
                "labels": {"we\"ird\\key": "1", "a": "2"}},
                "spec": {"containers": [{"name": "c", "image": "a"},
                    {"name": "c", "image": "b", "args": ["z"]}, {"name": "b", "image": "c"}]}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "only", "uid": "u"}}),
            // Keyed items out of order, an item without its key, a set holding an object.
            json!({"kind": "Pod", "metadata": {"name": "p", "finalizers": [{"a": 1}]},
                "spec": {"containers": [{"name": "z", "ports": [{"containerPort": 9376},
                    {"containerPort": 80}], "env": [{"value": "no name"}], "securityContext": {}},
                    {"name": "a", "image": "i"}], "tolerations": [{"key": "k"}]}}),
            json!({"metadata": {}}),
            json!({}),
        ];
        let creator = writer("creator", Operation::Update);
        let untimed = |mut object: Value| {
            for entry in object["metadata"]["managedFields"].as_array_mut().into_iter().flatten() {
                entry.as_object_mut().unwrap().remove("time");
            }
            object
        };
        for object in &objects {
            for status_separate in [false, true] {
                let mut expected = FieldSet::of_object(object);
                unowned(&mut expected, status_separate, "");
                let walked: Option<FieldSet> =
                    owned_fields(object, status_separate, "", Form::Update);
                assert_eq!(walked.unwrap_or_default(), expected, "{object}");
                let json: Option<Value> = owned_fields(object, status_separate, "", Form::Update);
                let expected_json = (!expected.is_empty()).then(|| expected.into_json());
                assert_eq!(json, expected_json, "{object}");
                let text = owned_fields_json(object, status_separate, "");
                let expected_text = expected_json.map(|j| serde_json::to_vec(&j).unwrap());
                assert_eq!(text, expected_text, "{object}");

                let mut created = object.clone();
                let creator_entry =
                    ManagedFields::default().record_create(&mut created, &creator, status_separate);
                if let Some(JsonField { name, json }) = creator_entry {
                    assert!(created["metadata"][name].is_null(), "a placeholder: {created}");
                    created["metadata"][name] = serde_json::from_slice(&json).unwrap();
                }
                let mut updated = object.clone();
                let mut fields = ManagedFields::default();
                fields.record_update(None, &updated, &creator, status_separate);
                fields.write_to(&mut updated);
                assert_eq!(untimed(created), untimed(updated), "{object}");
            }
        }
    }
}
