//! Stored objects: an object's JSON bytes plus the metadata the store indexes on.

use std::sync::LazyLock;

use bytes::Bytes;
use memchr::memmem;
use serde_json::Value;

use super::{json, text, FieldValues, Labels, ResourceType};

/// Identifies one object: its resource type, namespace (empty when cluster-scoped) and name.
#[derive(Debug, Clone)]
pub struct ObjectKey {
    pub resource: &'static ResourceType,
    pub namespace: String,
    pub name: String,
}

impl PartialEq for ObjectKey {
    fn eq(&self, other: &Self) -> bool {
        text::same(&self.name, &other.name)
            && text::same(&self.namespace, &other.namespace)
            && self.resource == other.resource
    }
}

impl Eq for ObjectKey {}

impl std::hash::Hash for ObjectKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.resource.hash(state);
        self.namespace.hash(state);
        self.name.hash(state);
    }
}

impl ObjectKey {
    pub fn new(resource: &'static ResourceType, namespace: &str, name: &str) -> Self {
        let namespace = if resource.namespaced { namespace.to_string() } else { String::new() };
        Self { resource, namespace, name: name.to_string() }
    }
}

/// An object as committed: immutable, shared by the store cache, watch events and responses.
#[derive(Debug, Clone)]
pub struct StoredObject {
    pub key: ObjectKey,
    pub resource_version: u64,
    pub uid: String,
    /// The full Kubernetes JSON, `kind`, `apiVersion` and `metadata.resourceVersion` included.
    pub raw: Bytes,
    pub labels: Labels,
    pub fields: FieldValues,
    /// `metadata.deletionTimestamp` is set: the object is being deleted.
    pub deleting: bool,
    /// Where `metadata.resourceVersion`'s digits start in `raw`, when known (objects written
    /// by this process): lets a delete stamp its revision without re-encoding the object.
    revision_at: Option<usize>,
    /// Where a metadata-only view's parts lie in `raw`, when known (objects written by this
    /// process).
    layout: Option<Layout>,
}

/// Equal when everything but the (derived) offsets into `raw` is.
impl PartialEq for StoredObject {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
            && self.resource_version == other.resource_version
            && self.uid == other.uid
            && self.raw == other.raw
            && self.labels == other.labels
            && self.fields == other.fields
            && self.deleting == other.deleting
    }
}

impl StoredObject {
    /// Builds a stored object from its JSON form; sets `metadata.resourceVersion` to `rv`.
    pub fn from_value(key: ObjectKey, value: Value, rv: u64) -> Self {
        PreparedObject::new(key, value).at_revision(rv)
    }

    /// Rebuilds the indexes of an object read back from disk.
    pub fn from_raw(key: ObjectKey, rv: u64, raw: Bytes) -> Result<Self, serde_json::Error> {
        let value: Value = serde_json::from_slice(&raw)?;
        let Indexes { uid, labels, fields, deleting } = Indexes::of(&key, &value);
        let (revision_at, layout) = (None, None);
        Ok(Self {
            key,
            resource_version: rv,
            uid,
            raw,
            labels,
            fields,
            deleting,
            revision_at,
            layout,
        })
    }

    /// The same object stamped with revision `rv` (a delete's last state).
    pub fn at_revision(&self, rv: u64) -> StoredObject {
        let Some(at) = self.revision_at else {
            return StoredObject::from_value(self.key.clone(), self.to_value(), rv);
        };
        let old_digits = decimal_digits(self.resource_version);
        let raw = splice_revision(&self.raw[..at], &self.raw[at + old_digits..], rv);
        let layout = self.layout.map(|l| l.respliced(at, old_digits, decimal_digits(rv)));
        StoredObject { resource_version: rv, raw: Bytes::from(raw), layout, ..self.clone() }
    }

    /// Parses the JSON back into a value (for read-modify-write paths).
    pub fn to_value(&self) -> Value {
        serde_json::from_slice(&self.raw).expect("stored objects are valid JSON")
    }

    /// Only `apiVersion`, `kind` and `metadata` without its `managedFields` (what a metadata
    /// informer needs). Objects written by this process are read from just those parts;
    /// for objects loaded from disk the rest of the JSON is skipped, not built.
    pub fn metadata_value(&self) -> Value {
        if let Some(layout) = &self.layout {
            let view = layout.metadata_view(&self.raw);
            return serde_json::from_slice(&view).expect("a stored object's parts are valid JSON");
        }
        #[derive(serde::Deserialize)]
        struct Partial {
            #[serde(rename = "apiVersion", default)]
            api_version: Value,
            #[serde(default)]
            kind: Value,
            #[serde(default)]
            metadata: MetadataWithoutManagedFields,
        }
        let partial: Partial =
            serde_json::from_slice(&self.raw).expect("stored objects are valid JSON");
        let mut object = serde_json::Map::with_capacity(3);
        object.insert("apiVersion".into(), partial.api_version);
        object.insert("kind".into(), partial.kind);
        object.insert("metadata".into(), Value::Object(partial.metadata.0));
        Value::Object(object)
    }

    /// `metadata`'s `uid`, `namespace`, `name` and `resourceVersion`, with `ownerReferences`,
    /// `finalizers` and `deletionTimestamp` when set: what a graph of owners needs. Built
    /// from the indexes when the object's metadata names neither list and it is not being
    /// deleted (the JSON is not read); otherwise it is the metadata view (a superset).
    pub fn ownership_value(&self) -> Value {
        if self.deleting || self.may_name_owners_or_finalizers() {
            return self.metadata_value();
        }
        let mut metadata = serde_json::Map::with_capacity(4);
        metadata.insert("name".into(), Value::String(self.key.name.clone()));
        if !self.key.namespace.is_empty() {
            metadata.insert("namespace".into(), Value::String(self.key.namespace.clone()));
        }
        metadata.insert("uid".into(), Value::String(self.uid.clone()));
        // Informers resume a cut-off watch from the last revision they saw.
        let revision = itoa::Buffer::new().format(self.resource_version).to_string();
        metadata.insert("resourceVersion".into(), Value::String(revision));
        let mut object = serde_json::Map::with_capacity(1);
        object.insert("metadata".into(), Value::Object(metadata));
        Value::Object(object)
    }

    /// Whether `ownerReferences` or `finalizers` may be in the metadata: searched for as keys,
    /// as the serializer writes them, around the managedFields (whose field paths name both).
    /// A false match (a label named so) only costs the full read; without a layout (an object
    /// loaded from disk), assumed.
    fn may_name_owners_or_finalizers(&self) -> bool {
        let Some(layout) = &self.layout else { return true };
        let (start, end) = layout.metadata;
        let (skip_start, skip_end) = layout.managed_fields.unwrap_or((end, end));
        let parts = [&self.raw[start..skip_start], &self.raw[skip_end..end]];
        // Built once: a finder's set-up cost more than its search of a few hundred bytes.
        static KEYS: LazyLock<[memmem::Finder<'static>; 2]> = LazyLock::new(|| {
            [memmem::Finder::new(b"\"ownerReferences\""), memmem::Finder::new(b"\"finalizers\"")]
        });
        parts.iter().any(|part| KEYS.iter().any(|key| key.find(part).is_some()))
    }
}

/// What the store indexes of an object, read from its JSON form.
#[derive(Debug)]
struct Indexes {
    uid: String,
    labels: Labels,
    fields: FieldValues,
    deleting: bool,
}

impl Indexes {
    fn of(key: &ObjectKey, value: &Value) -> Self {
        let labels = Labels::of(value);
        let uid = json::at(value, "/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let fields = FieldValues::extract(key.resource, value);
        let deleting = json::at(value, "/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        Self { uid, labels, fields, deleting }
    }
}

/// An object ready to be stored but for its resourceVersion: serialized and indexed where the
/// write comes from, so that the store shard, which handles every write of its resource types
/// one at a time, only writes the revision in.
#[derive(Debug)]
pub struct PreparedObject {
    pub key: ObjectKey,
    /// The JSON, with `metadata.resourceVersion` empty.
    json: Vec<u8>,
    /// Where the revision's digits go: between the quotes of that empty string.
    revision_at: Option<usize>,
    /// Where a metadata-only view's parts lie in `json`.
    layout: Option<Layout>,
    indexes: Indexes,
}

/// A metadata field given as JSON text: written in place of the value the object holds for it
/// (a placeholder), so that the value need not be built.
#[derive(Debug)]
pub struct JsonField {
    pub name: &'static str,
    pub json: Vec<u8>,
}

impl PreparedObject {
    pub fn new(key: ObjectKey, value: Value) -> Self {
        Self::with_json_field(key, value, None)
    }

    /// Like `new`, with `metadata.<field.name>` written as `field.json` when one is given.
    pub fn with_json_field(key: ObjectKey, mut value: Value, field: Option<JsonField>) -> Self {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(String::new()));
        }
        let Serialized { json, revision_at, layout } = serialize(&value, field.as_ref());
        let indexes = Indexes::of(&key, &value);
        Self { key, json, revision_at, layout, indexes }
    }

    /// The stored object at revision `rv`.
    pub fn at_revision(self, rv: u64) -> StoredObject {
        let (raw, layout) = match self.revision_at {
            Some(at) => (
                splice_revision(&self.json[..at], &self.json[at..], rv),
                self.layout.map(|l| l.respliced(at, 0, decimal_digits(rv))),
            ),
            None => (self.json, self.layout),
        };
        let Indexes { uid, labels, fields, deleting } = self.indexes;
        StoredObject {
            key: self.key,
            resource_version: rv,
            uid,
            raw: Bytes::from(raw),
            labels,
            fields,
            deleting,
            revision_at: self.revision_at,
            layout,
        }
    }
}

/// `before`, the digits of `rv`, `after`.
fn splice_revision(before: &[u8], after: &[u8], rv: u64) -> Vec<u8> {
    let digits = rv.to_string();
    let mut raw = Vec::with_capacity(before.len() + digits.len() + after.len());
    raw.extend_from_slice(before);
    raw.extend_from_slice(digits.as_bytes());
    raw.extend_from_slice(after);
    raw
}

/// How many decimal digits `n` is written with.
fn decimal_digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Where the parts of a metadata-only view (`apiVersion`, `kind`, `metadata` without its
/// `managedFields`) lie in an object's JSON, as byte ranges: the view is then read from a few
/// hundred bytes instead of the whole object.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Layout {
    api_version: Option<Range>,
    kind: Option<Range>,
    /// The metadata object, braces included.
    metadata: Range,
    /// The `managedFields` entry (key and value) with the comma before it, if any.
    managed_fields: Option<Range>,
}

type Range = (usize, usize);

impl Layout {
    /// The layout after the `old` bytes at `at` were replaced by `new` bytes (a revision
    /// written in). No range starts or ends inside the replaced bytes.
    fn respliced(self, at: usize, old: usize, new: usize) -> Layout {
        let shift = |(start, end): Range| {
            let moved = |offset: usize| if offset >= at { offset - old + new } else { offset };
            (moved(start), moved(end))
        };
        Layout {
            api_version: self.api_version.map(shift),
            kind: self.kind.map(shift),
            metadata: shift(self.metadata),
            managed_fields: self.managed_fields.map(shift),
        }
    }

    /// The metadata-only view of `raw` as JSON.
    fn metadata_view(&self, raw: &[u8]) -> Vec<u8> {
        let part = |(start, end): Range| &raw[start..end];
        let mut view = Vec::with_capacity(256);
        view.push(b'{');
        if let Some(api_version) = self.api_version {
            view.extend_from_slice(b"\"apiVersion\":");
            view.extend_from_slice(part(api_version));
            view.push(b',');
        }
        if let Some(kind) = self.kind {
            view.extend_from_slice(b"\"kind\":");
            view.extend_from_slice(part(kind));
            view.push(b',');
        }
        view.extend_from_slice(b"\"metadata\":");
        let (start, end) = self.metadata;
        match self.managed_fields {
            Some((skip_start, skip_end)) => {
                view.extend_from_slice(&raw[start..skip_start]);
                let rest = &raw[skip_end..end];
                // managedFields was the first entry: the comma after it goes too.
                let rest = match (view.last(), rest.first()) {
                    (Some(b'{'), Some(b',')) => &rest[1..],
                    _ => rest,
                };
                view.extend_from_slice(rest);
            }
            None => view.extend_from_slice(&raw[start..end]),
        }
        view.push(b'}');
        view
    }
}

/// An object's JSON and what was noted while writing it.
struct Serialized {
    json: Vec<u8>,
    /// The offset just inside the quotes of an empty `metadata.resourceVersion`, if any.
    revision_at: Option<usize>,
    /// Set when `metadata` is an object.
    layout: Option<Layout>,
}

/// `value` as `serde_json::to_vec` writes it (with the `given` metadata field's text in place
/// of its placeholder), noting where the revision goes and where the parts of a metadata-only
/// view lie. (Maps are sorted by key, so writing the entries one by one gives the same bytes.)
fn serialize(value: &Value, given: Option<&JsonField>) -> Serialized {
    let Value::Object(top) = value else {
        let json = serde_json::to_vec(value).expect("a JSON value always serializes");
        return Serialized { json, revision_at: None, layout: None };
    };
    let mut out = Vec::with_capacity(2048);
    let (mut revision_at, mut managed_fields) = (None, None);
    let (mut api_version, mut kind, mut metadata) = (None, None, None);
    write_map(&mut out, top, |out, key, field| {
        let start = out.len();
        match field {
            Value::Object(meta) if key == "metadata" => {
                write_map(out, meta, |out, name, entry| {
                    let value_start = out.len();
                    if name == "resourceVersion" && entry.as_str() == Some("") {
                        out.extend_from_slice(b"\"\"");
                        revision_at = Some(out.len() - 1);
                    } else if let Some(given) = given.filter(|g| g.name == name) {
                        out.extend_from_slice(&given.json);
                    } else {
                        json::write(out, entry);
                    }
                    if name == "managedFields" {
                        // The key, its colon, and the comma before them when there is one.
                        let key_start = value_start - b"\"managedFields\":".len();
                        let entry_start = key_start - usize::from(out[key_start - 1] == b',');
                        managed_fields = Some((entry_start, out.len()));
                    }
                });
                metadata = Some((start, out.len()));
            }
            _ => {
                json::write(out, field);
                match key {
                    "apiVersion" => api_version = Some((start, out.len())),
                    "kind" => kind = Some((start, out.len())),
                    _ => {}
                }
            }
        }
    });
    let layout = metadata.map(|metadata| Layout { api_version, kind, metadata, managed_fields });
    Serialized { json: out, revision_at, layout }
}

/// Appends `map` as serde_json writes it, `entry` writing each value.
fn write_map(
    out: &mut Vec<u8>,
    map: &serde_json::Map<String, Value>,
    mut entry: impl FnMut(&mut Vec<u8>, &str, &Value),
) {
    out.push(b'{');
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json::write_string(out, key);
        out.push(b':');
        entry(out, key, value);
    }
    out.push(b'}');
}

/// An object's metadata as read for a metadata-only view: `managedFields` (most of it, and of
/// no use there) is skipped while parsing.
#[derive(Default)]
struct MetadataWithoutManagedFields(serde_json::Map<String, Value>);

impl<'de> serde::Deserialize<'de> for MetadataWithoutManagedFields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = MetadataWithoutManagedFields;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("object metadata")
            }

            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<Self::Value, M::Error> {
                let mut fields = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "managedFields" {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    } else {
                        fields.insert(key, map.next_value()?);
                    }
                }
                Ok(MetadataWithoutManagedFields(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::resources::find;
    use serde_json::json;

    #[test]
    fn indexes_labels_fields_and_rv() {
        let pods = find("", "v1", "pods").unwrap();
        let key = ObjectKey::new(pods, "ns", "p");
        let value = json!({"kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1",
            "labels":{"a":"b"},"managedFields":[{"manager":"m"}]},"spec":{"nodeName":"n"}});
        let obj = StoredObject::from_value(key.clone(), value, 42);
        assert_eq!(obj.labels.get("a"), Some("b"));
        assert_eq!(obj.fields.get("spec.nodeName"), Some("n"));
        assert_eq!(obj.uid, "u1");
        assert!(!obj.deleting);
        assert_eq!(obj.to_value()["metadata"]["resourceVersion"], "42");
        let partial = obj.metadata_value();
        assert_eq!(partial["metadata"]["labels"]["a"], "b");
        assert!(partial.get("spec").is_none());
        assert!(partial["metadata"].get("managedFields").is_none());
        assert_eq!(StoredObject::from_raw(key.clone(), 42, obj.raw.clone()).unwrap(), obj);
        let marked = json!({"metadata":{"name":"p","deletionTimestamp":"2026-01-01T00:00:00Z"}});
        assert!(StoredObject::from_value(key, marked, 43).deleting);
    }

    #[test]
    fn the_revision_is_written_into_the_bytes_serde_json_would_write() {
        let pods = find("", "v1", "pods").unwrap();
        let values = [
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
                "annotations": {"resourceVersion": "", "q\"uote": "ü\n\u{1}"},
                "labels": {"resourceVersion": ""}}, "spec": {"x": [1, 2.5, null, true, {}]}}),
            json!({"metadata": {"name": "p", "resourceVersion": "17", "z": 1}}),
            json!({"metadata": {}}),
            json!({"kind": "NoMetadata"}),
            json!({"metadata": "not an object"}),
        ];
        for value in values {
            let stored =
                StoredObject::from_value(ObjectKey::new(pods, "ns", "p"), value.clone(), 1234);
            let mut expected = value.clone();
            if let Some(meta) = expected.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("resourceVersion".into(), json!("1234"));
            }
            assert_eq!(stored.raw, serde_json::to_vec(&expected).unwrap(), "{value}");
        }
    }

    #[test]
    fn a_field_given_as_text_is_written_where_its_value_would_be() {
        let pods = find("", "v1", "pods").unwrap();
        let key = || ObjectKey::new(pods, "ns", "p");
        let managed = json!([{"manager": "m", "fieldsV1": {"f:spec": {}}}]);
        let metadatas = [
            json!({"name": "p", "labels": {"a": "b"}, "managedFields": managed, "uid": "u"}),
            json!({"managedFields": managed}),
            json!({"annotations": {"x": "y"}, "managedFields": managed}),
        ];
        for metadata in metadatas {
            let value = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                "spec": {"x": 1}});
            let mut placeheld = value.clone();
            placeheld["metadata"]["managedFields"] = Value::Null;
            let json = serde_json::to_vec(&managed).unwrap();
            let given = JsonField { name: "managedFields", json };
            let expected = PreparedObject::new(key(), value.clone()).at_revision(42);
            let written =
                PreparedObject::with_json_field(key(), placeheld, Some(given)).at_revision(42);
            assert_eq!(written.raw, expected.raw, "{value}");
            assert_eq!(written.layout, expected.layout, "{value}");
            assert_eq!(written.metadata_value(), expected.metadata_value(), "{value}");
        }
    }

    #[test]
    fn the_metadata_view_read_from_its_parts_is_the_parsed_one() {
        let pods = find("", "v1", "pods").unwrap();
        let key = ObjectKey::new(pods, "ns", "p");
        let managed = json!([{"manager": "m", "fieldsV1": {"f:spec": {}}}]);
        let values = [
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns",
                "labels": {"a": "b"}, "managedFields": managed, "uid": "u"}, "spec": {"x": 1}}),
            // managedFields first, alone, or missing; data sorting before metadata.
            json!({"apiVersion": "v1", "data": {"managedFields": "x"}, "kind": "ConfigMap",
                "metadata": {"annotations": {"k": "v"}, "managedFields": managed}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"managedFields": managed}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"aa": 1, "managedFields": []}}),
        ];
        for value in values {
            for rv in [9, 10, 12_345] {
                let written = StoredObject::from_value(key.clone(), value.clone(), rv);
                assert!(written.layout.is_some(), "{value}");
                let loaded = StoredObject::from_raw(key.clone(), rv, written.raw.clone()).unwrap();
                assert_eq!(written.metadata_value(), loaded.metadata_value(), "{value} at {rv}");
                // A delete's stamp moves the parts after the revision, by as many digits as
                // it adds (or takes away).
                for stamp in [1_000_001, 7] {
                    let deleted = written.at_revision(stamp);
                    let reloaded = StoredObject::from_raw(key.clone(), stamp, deleted.raw.clone());
                    assert_eq!(deleted.metadata_value(), reloaded.unwrap().metadata_value());
                }
            }
        }
    }

    #[test]
    fn the_ownership_view_holds_what_a_graph_of_owners_reads() {
        let pods = find("", "v1", "pods").unwrap();
        let key = ObjectKey::new(pods, "ns", "p");
        let owners = json!([{"apiVersion": "v1", "kind": "ReplicationController", "name": "rc",
            "uid": "o1"}]);
        let managed = json!([{"manager": "m", "fieldsV1": {"f:metadata": {"f:finalizers": {},
            "f:ownerReferences": {}}}}]);
        let view = |metadata: Value| {
            let value = json!({"kind": "Pod", "metadata": metadata, "spec": {"x": 1}});
            StoredObject::from_value(key.clone(), value, 5).ownership_value()
        };
        // Plain: built from the indexes, the managed fields' paths not mistaken for the lists.
        let plain = view(json!({"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "b"},
            "managedFields": managed}));
        let expected = json!({"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5"});
        assert_eq!(plain, json!({ "metadata": expected }));
        // With owners, finalizers or a deletion, or a label that looks like one: the metadata.
        let meta = |extra: Value| {
            let mut metadata = json!({"name": "p", "namespace": "ns", "uid": "u"});
            metadata.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            metadata
        };
        for extra in [
            json!({"ownerReferences": owners}),
            json!({"finalizers": ["f"]}),
            json!({"deletionTimestamp": "2026-12-01T00:00:00Z", "deletionGracePeriodSeconds": 0}),
            json!({"labels": {"finalizers": "yes"}}),
        ] {
            let expected = meta(extra.clone());
            let seen = view(expected.clone());
            for (key, value) in expected.as_object().unwrap() {
                assert_eq!(&seen["metadata"][key], value, "{extra}");
            }
        }
        // Loaded from disk (no layout): the metadata.
        let written =
            StoredObject::from_value(key.clone(), json!({"metadata": meta(json!({}))}), 5);
        let loaded = StoredObject::from_raw(key.clone(), 5, written.raw.clone()).unwrap();
        assert_eq!(loaded.ownership_value()["metadata"]["uid"], "u");
    }

    #[test]
    fn a_stored_object_is_stamped_with_another_revision() {
        let pods = find("", "v1", "pods").unwrap();
        let key = ObjectKey::new(pods, "ns", "p");
        let value = json!({"metadata": {"name": "p", "annotations": {"resourceVersion": "7"}},
            "spec": {"nodeName": "n"}});
        let expected = StoredObject::from_value(key.clone(), value.clone(), 123_456);
        for rv in [7, 9, 10, 99_999] {
            let written = StoredObject::from_value(key.clone(), value.clone(), rv);
            assert_eq!(written.at_revision(123_456), expected, "from revision {rv}");
            let loaded = StoredObject::from_raw(key.clone(), rv, written.raw.clone()).unwrap();
            assert_eq!(loaded.at_revision(123_456), expected, "loaded at revision {rv}");
        }
        assert_eq!((decimal_digits(0), decimal_digits(9), decimal_digits(10)), (1, 1, 2));
    }
}
