//! Sets of field paths, as `managedFields` records them (the FieldsV1 trie), and how the core
//! types' lists are identified in them: the building block of field ownership.
//!
//! A path element is `f:<field>` (a field of an object), `k:<key fields as JSON>` (an item of
//! a keyed list), `v:<value as JSON>` (an item of a set) or `i:<index>`. A member node is
//! written `{}` when it has no members under it and carries `".": {}` otherwise.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use crate::model::json::{self, is_plain};
use crate::model::lists;

/// A set of field paths of one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// This node itself is a member.
    itself: bool,
    children: BTreeMap<String, FieldSet>,
}

/// Whether the object or list in `field` of the object at `parent` is one Go's JSON of an
/// empty object of its kind always has (a struct field that is no pointer, a list field
/// without `omitempty`): what an update's old object holds even where the stored one leaves
/// it out. An update adds (and its writer owns, `"."`) every other object or list it is the
/// first to set, as structured-merge-diff's comparison, whose old object on a create is that
/// empty one: a pod's `metadata`, `spec`, `status` and `spec.containers` are never added.
fn always_present(parent: &str, field: &str) -> bool {
    match parent {
        "" => matches!(
            field,
            "metadata"
                | "spec"
                | "status"
                // A PodTemplate's; an event's (core/v1 and events.k8s.io/v1); a binding's.
                | "template"
                | "source"
                | "regarding"
                | "deprecatedSource"
                | "roleRef"
        ),
        // A pod's; a claim's.
        ".spec" => matches!(field, "containers" | "resources"),
        ".template.spec" => field == "containers",
        ".template" => matches!(field, "metadata" | "spec"),
        // A service's; a node's.
        ".status" => matches!(field, "loadBalancer" | "daemonEndpoints" | "nodeInfo"),
        ".status.daemonEndpoints" => field == "kubeletEndpoint",
        _ => false,
    }
}

/// Whether the object in `field` of the object at `parent` is one value (a map or struct
/// Kubernetes declares `x-kubernetes-map-type: atomic`): a member itself with nothing under
/// it, replaced whole by an apply. Those outside lists that are one value themselves: a
/// service's and a replication controller's `selector` maps, a pod's `nodeSelector`, the
/// `LabelSelector`s (a disruption budget's `selector`, `labelSelector` and
/// `namespaceSelector` in a pod's scheduling terms), the `ObjectReference`s (an event's
/// `involvedObject` and `related`, a volume's `claimRef`) and the required `NodeSelector`s
/// of a pod's and a volume's node affinity; the `structType=atomic` references: where a
/// variable or a downward API file takes its value from (`secretKeyRef`, `configMapKeyRef`,
/// `fieldRef`, `resourceFieldRef`), an endpoint's `targetRef`, a claim's `dataSource`, a
/// volume's secret references.
fn is_atomic_object(parent: &str, field: &str) -> bool {
    match field {
        "secretKeyRef" | "configMapKeyRef" => parent.ends_with(".valueFrom"),
        "fieldRef" | "resourceFieldRef" => {
            parent.ends_with(".valueFrom") || parent.ends_with(".items")
        }
        "targetRef" => {
            parent.ends_with(".addresses")
                || parent.ends_with(".notReadyAddresses")
                || parent == ".endpoints"
        }
        "dataSource" => parent.ends_with(".spec"),
        // (An `envFrom` source's `secretRef` is in an atomic list, never walked.)
        "secretRef"
        | "nodePublishSecretRef"
        | "controllerPublishSecretRef"
        | "nodeStageSecretRef"
        | "controllerExpandSecretRef"
        | "nodeExpandSecretRef" => true,
        "selector" | "claimRef" => parent == ".spec",
        "nodeSelector" => parent.ends_with(".spec"),
        "labelSelector" | "namespaceSelector" => true,
        "involvedObject" | "related" => parent.is_empty(),
        "requiredDuringSchedulingIgnoredDuringExecution" => parent.ends_with(".nodeAffinity"),
        "required" => parent == ".spec.nodeAffinity",
        _ => false,
    }
}

/// Whether a field set's path (`["f:spec", "f:selector"]`) names an atomic object (see
/// [`is_atomic_object`]); list items' elements do not count in the parent's path, as the
/// walks have it.
pub fn is_atomic_path(path: &[String]) -> bool {
    let Some((last, parents)) = path.split_last() else { return false };
    let Some(field) = last.strip_prefix("f:") else { return false };
    let parent: String = parents
        .iter()
        .filter_map(|e| e.strip_prefix("f:"))
        .map(|name| format!(".{name}"))
        .collect();
    is_atomic_object(&parent, field)
}

/// How a list is identified item by item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListKind {
    /// Items are objects identified by these fields (`k:`).
    Keyed(&'static [&'static str]),
    /// Items are unique values (`v:`).
    Set,
    /// The list is one value.
    Atomic,
}

/// The list type of `field` in the object at `parent`, as the core types declare it
/// (`x-kubernetes-list-type` and `x-kubernetes-list-map-keys`).
fn list_kind(parent: &str, field: &str, items: &[Value]) -> ListKind {
    match list_items(parent, field, items) {
        ListItems::Keyed(keys, _) => ListKind::Keyed(keys),
        ListItems::Set(_) => ListKind::Set,
        ListItems::Atomic => ListKind::Atomic,
    }
}

/// A list's items as a field set names them, sorted by element.
enum ListItems<'a> {
    /// Objects identified by these fields: each item's `k:` element, with the item; `None`
    /// for a key several items repeat (a PUT may store them): such a key is one member, with
    /// nothing under it, as structured-merge-diff reads a live object's duplicates.
    Keyed(&'static [&'static str], Vec<(String, Option<&'a Value>)>),
    /// Plain values: their `v:` elements, each once.
    Set(Vec<String>),
    Atomic,
}

/// The items of the list `field` of the object at `parent`, by its declared type. A list that
/// does not follow its type (an item without its key, an object in a set) is treated as one
/// value rather than guessed at.
fn list_items<'a>(parent: &str, field: &str, items: &'a [Value]) -> ListItems<'a> {
    let listed = match lists::declared(parent, field) {
        None => None,
        Some(declared) if declared.keys.is_empty() => items
            .iter()
            .map(|item| (!item.is_object()).then(|| value_element(item)))
            .collect::<Option<Vec<String>>>()
            .map(|mut elements| {
                elements.sort_unstable();
                elements.dedup();
                ListItems::Set(elements)
            }),
        Some(declared) => items
            .iter()
            .map(|item| Some((item_key(item, declared.keys)?, Some(item))))
            .collect::<Option<Vec<_>>>()
            .map(|elements| ListItems::Keyed(declared.keys, sorted_by_key(elements))),
    };
    listed.unwrap_or(ListItems::Atomic)
}

/// Keyed items sorted by their elements, a key several items repeat kept once, without its
/// item. Sorted without a hashed set, whose SipHash of each element showed in profiles of the
/// write path.
fn sorted_by_key<T>(mut elements: Vec<(String, Option<T>)>) -> Vec<(String, Option<T>)> {
    elements.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if elements.windows(2).all(|pair| pair[0].0 != pair[1].0) {
        return elements;
    }
    let mut kept: Vec<(String, Option<T>)> = Vec::with_capacity(elements.len());
    for (element, item) in elements {
        match kept.last_mut() {
            Some(last) if last.0 == element => last.1 = None,
            _ => kept.push((element, item)),
        }
    }
    kept
}

/// The items of `items` whose key (of `keys`) is `element`.
fn items_keyed<'a>(items: &'a [Value], keys: &[&str], element: &str) -> Vec<&'a Value> {
    items.iter().filter(|i| item_key(i, keys).as_deref() == Some(element)).collect()
}

/// Every declared list of `object` (an applied configuration) that repeats an item's key or
/// value, as structured-merge-diff refuses one: `.spec.containers[name="a"].env: duplicate
/// entries for key [name="E"]`. (An item without its key is validation's to refuse.)
pub(super) fn repeated_items(object: &Value) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(map) = object.as_object() {
        repeated_in_fields(map, "", &mut Vec::new(), &mut found);
    }
    found
}

fn repeated_in_fields(
    map: &Map<String, Value>,
    path: &str,
    shown: &mut Vec<String>,
    found: &mut Vec<String>,
) {
    for (field, value) in map {
        shown.push(field_element(field));
        repeated_in_value(value, path, field, shown, found);
        shown.pop();
    }
}

fn repeated_in_value(
    value: &Value,
    parent: &str,
    field: &str,
    shown: &mut Vec<String>,
    found: &mut Vec<String>,
) {
    match value {
        Value::Object(map) if !is_atomic_object(parent, field) => {
            repeated_in_fields(map, &child_path(parent, field), shown, found)
        }
        Value::Array(items) => {
            let Some(declared) = lists::declared(parent, field) else { return };
            let path = child_path(parent, field);
            let mut seen = std::collections::HashSet::new();
            for item in items {
                let element = match declared.keys {
                    [] => (!item.is_object()).then(|| value_element(item)),
                    keys => item_key(item, keys),
                };
                let Some(element) = element else { continue };
                if !seen.insert(element.clone()) {
                    let key = display_path(std::slice::from_ref(&element));
                    found.push(format!("{}: duplicate entries for key {key}", display_path(shown)));
                    continue;
                }
                if let Some(map) = item.as_object() {
                    shown.push(element);
                    repeated_in_fields(map, &path, shown, found);
                    shown.pop();
                }
            }
        }
        _ => {}
    }
}

/// The part of the object `applied` that `live` still holds as applied, field by field: lists
/// item by item as their types identify items (keyed lists by their keys, sets by value),
/// anything else whole.
pub(super) fn still_applied(applied: &Value, live: &Value) -> Value {
    match (applied, live) {
        (Value::Object(applied), Value::Object(live)) => {
            Value::Object(fields_still_applied(applied, live, ""))
        }
        _ => Value::Null,
    }
}

fn fields_still_applied(
    applied: &Map<String, Value>,
    live: &Map<String, Value>,
    path: &str,
) -> Map<String, Value> {
    applied
        .iter()
        .filter_map(|(field, value)| {
            let kept = value_still_applied(value, live.get(field)?, path, field)?;
            Some((field.clone(), kept))
        })
        .collect()
}

fn value_still_applied(applied: &Value, live: &Value, parent: &str, field: &str) -> Option<Value> {
    match (applied, live) {
        (Value::Object(a), Value::Object(l))
            if !a.is_empty() && !is_atomic_object(parent, field) =>
        {
            let kept = fields_still_applied(a, l, &child_path(parent, field));
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        (Value::Array(a), Value::Array(l)) if !a.is_empty() => {
            let path = child_path(parent, field);
            let kept: Vec<Value> =
                match (list_items(parent, field, a), list_items(parent, field, l)) {
                    (ListItems::Keyed(_, mine), ListItems::Keyed(_, theirs)) => mine
                        .into_iter()
                        .filter_map(|(element, item)| {
                            let at = theirs.binary_search_by(|(e, _)| e.cmp(&element)).ok()?;
                            match (item?, theirs[at].1?) {
                                (Value::Object(item), Value::Object(counterpart)) => Some(
                                    Value::Object(fields_still_applied(item, counterpart, &path)),
                                ),
                                _ => None,
                            }
                        })
                        .collect(),
                    (ListItems::Set(_), ListItems::Set(_)) => {
                        let present: std::collections::HashSet<String> =
                            l.iter().map(Value::to_string).collect();
                        a.iter().filter(|v| present.contains(&v.to_string())).cloned().collect()
                    }
                    _ => return (a == l).then(|| applied.clone()),
                };
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        _ => (applied == live).then(|| applied.clone()),
    }
}

/// The `k:` element of a keyed list's item; a missing `protocol` is TCP, its default.
/// (`keys` are listed in alphabetical order, which is how the element names them.)
fn item_key(item: &Value, keys: &[&str]) -> Option<String> {
    let object = item.as_object()?;
    let mut key = String::with_capacity(32);
    key.push_str("k:{");
    for (i, name) in keys.iter().enumerate() {
        if i > 0 {
            key.push(',');
        }
        key.push('"');
        key.push_str(name);
        key.push_str("\":");
        match object.get(*name) {
            Some(value) if !value.is_null() => push_json(&mut key, value),
            _ if *name == "protocol" => key.push_str("\"TCP\""),
            _ => return None,
        }
    }
    key.push('}');
    Some(key)
}

/// `value` as JSON, appended to `out`. Plain strings and numbers, what keys and set items
/// almost always are, are written directly rather than through the formatting machinery.
fn push_json(out: &mut String, value: &Value) {
    match value {
        Value::String(s) if is_plain(s) => {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.push_str(itoa::Buffer::new().format(i)),
            None => out.push_str(&n.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
}

/// The `f:` element of a field (built without the formatting machinery: this runs for every
/// field of every object written).
pub(super) fn field_element(name: &str) -> String {
    let mut element = String::with_capacity(name.len() + 2);
    element.push_str("f:");
    element.push_str(name);
    element
}

/// The `v:` element of a set's item.
fn value_element(value: &Value) -> String {
    let mut element = String::with_capacity(16);
    element.push_str("v:");
    push_json(&mut element, value);
    element
}

fn leaf<T: FieldTree>() -> T {
    T::new().finish(true).expect("a member node")
}

fn child_path(parent: &str, field: &str) -> String {
    let mut path = String::with_capacity(parent.len() + 1 + field.len());
    path.push_str(parent);
    path.push('.');
    path.push_str(field);
    path
}

/// What a walk over an object's fields builds, a node at a time: a `FieldSet`, or the
/// FieldsV1 JSON as a value. (A create's entry, which has nothing to merge with, is written
/// as text by `json_of_object_except` instead.)
pub trait FieldTree: Sized {
    /// A node with nothing under it yet.
    fn new() -> Self;
    /// Puts `child` under this node as `element`.
    fn insert(&mut self, element: String, child: Self);
    /// The node, a member itself when `itself`; `None` when it is no member and has none
    /// under it.
    fn finish(self, itself: bool) -> Option<Self>;
}

impl FieldTree for FieldSet {
    fn new() -> Self {
        FieldSet::default()
    }

    fn insert(&mut self, element: String, child: Self) {
        self.children.insert(element, child);
    }

    fn finish(mut self, itself: bool) -> Option<Self> {
        self.itself = itself;
        (!self.is_empty()).then_some(self)
    }
}

/// The FieldsV1 JSON form, as `FieldSet::into_json` writes it.
impl FieldTree for Value {
    fn new() -> Self {
        Value::Object(Map::new())
    }

    fn insert(&mut self, element: String, child: Self) {
        if let Value::Object(map) = self {
            map.insert(element, child);
        }
    }

    fn finish(mut self, itself: bool) -> Option<Self> {
        let Value::Object(map) = &mut self else { return None };
        if map.is_empty() {
            return itself.then_some(self);
        }
        if itself {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        Some(self)
    }
}

/// The FieldsV1 JSON of every field of `object` (a whole object, from the root) but those
/// `skip` names, byte for byte what the `Value` form serializes to, written into one buffer
/// as the walk goes (a create's entry needs nothing else); `None` when nothing is left.
pub fn json_of_object_except(object: &Value, skip: Skip) -> Option<Vec<u8>> {
    let map = object.as_object()?;
    let mut text = FieldsText { out: Vec::with_capacity(1024), path: String::new(), skip };
    text.fields(map, false).then_some(text.out)
}

/// The walk of `json_of_object_except`: members are written in their sorted order as they
/// are met, and a node that turns out empty is cut off again.
struct FieldsText<'a> {
    out: Vec<u8>,
    /// The path of the object being walked (`""` for the root, `".spec"`...).
    path: String,
    skip: Skip<'a>,
}

impl FieldsText<'_> {
    /// The node of the object at `self.path`, a member itself when `itself`; false, with
    /// nothing written, when it is no member and has none under it.
    fn fields(&mut self, map: &Map<String, Value>, itself: bool) -> bool {
        let start = self.open(itself);
        // `f:` elements sort as their field names do, in which order the map holds them
        // (unless serde_json keeps insertion order, when they are sorted here).
        let members = if map.keys().is_sorted() {
            map.iter().filter(|(field, value)| self.member(start, itself, field, value)).count()
        } else {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            entries
                .into_iter()
                .filter(|(field, value)| self.member(start, itself, field, value))
                .count()
        };
        self.close(start, members, itself)
    }

    /// The member `field` of the node begun at `start`, unless it is skipped or empty (false).
    fn member(&mut self, start: usize, itself: bool, field: &str, value: &Value) -> bool {
        if (self.skip)(&self.path, field) {
            return false;
        }
        let mark = self.out.len();
        self.separate(start, itself);
        if is_plain(field) {
            self.out.extend_from_slice(b"\"f:");
            self.out.extend_from_slice(field.as_bytes());
            self.out.push(b'"');
        } else {
            json::write_string(&mut self.out, &field_element(field));
        }
        self.out.push(b':');
        let written = self.value(field, value);
        if !written {
            self.out.truncate(mark);
        }
        written
    }

    /// `value`, the field `field` of the object at `self.path`.
    fn value(&mut self, field: &str, value: &Value) -> bool {
        match value {
            Value::Object(map) if !map.is_empty() && !is_atomic_object(&self.path, field) => {
                let added = !always_present(&self.path, field);
                let parent = self.enter(field);
                let written = self.fields(map, added);
                self.path.truncate(parent);
                written
            }
            Value::Array(items) if !items.is_empty() => {
                match list_items(&self.path, field, items) {
                    ListItems::Keyed(_, elements) => {
                        let added = !always_present(&self.path, field);
                        let parent = self.enter(field);
                        let start = self.open(added);
                        for (element, item) in &elements {
                            self.separate(start, added);
                            json::write_string(&mut self.out, element);
                            self.out.push(b':');
                            match item.and_then(Value::as_object) {
                                Some(map) => _ = self.fields(map, true),
                                None => self.out.extend_from_slice(b"{}"),
                            }
                        }
                        self.path.truncate(parent);
                        self.close(start, elements.len(), added)
                    }
                    ListItems::Set(elements) => {
                        let start = self.open(true);
                        for element in &elements {
                            self.separate(start, true);
                            json::write_string(&mut self.out, element);
                            self.out.extend_from_slice(b":{}");
                        }
                        self.close(start, elements.len(), true)
                    }
                    ListItems::Atomic => {
                        self.out.extend_from_slice(b"{}");
                        true
                    }
                }
            }
            _ => {
                self.out.extend_from_slice(b"{}");
                true
            }
        }
    }

    /// Starts a node (with its `"."` member when `itself`); returns where it starts.
    fn open(&mut self, itself: bool) -> usize {
        let start = self.out.len();
        self.out.push(b'{');
        if itself {
            self.out.extend_from_slice(b"\".\":{}");
        }
        start
    }

    /// The comma before a member, unless it is the node's first.
    fn separate(&mut self, start: usize, itself: bool) {
        if itself || self.out.len() > start + 1 {
            self.out.push(b',');
        }
    }

    /// Ends the node begun at `start`: `{}` for a member with nothing under it, nothing at all
    /// (false) for a node that is no member.
    fn close(&mut self, start: usize, members: usize, itself: bool) -> bool {
        if members == 0 {
            self.out.truncate(start);
            if itself {
                self.out.extend_from_slice(b"{}");
            }
            return itself;
        }
        self.out.push(b'}');
        true
    }

    /// Descends into `field`; returns the length of the path to cut back to.
    fn enter(&mut self, field: &str) -> usize {
        let parent = self.path.len();
        self.path.push('.');
        self.path.push_str(field);
        parent
    }
}

/// The shape of a field set built from an object. An update's (what Kubernetes compares out
/// of the old and new objects, here of a part the old one lacks) has every object and list it
/// adds as members themselves (`.` in FieldsV1; see [`always_present`]); an apply's
/// (Kubernetes' `ToFieldSet` of the configuration) has only what the configuration names in
/// them: a map's keys, a list's items. An emptied map is a member itself either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Update,
    Apply,
}

/// Which fields a walk leaves out: `skip(parent, field)` for the field `field` of the object
/// at path `parent` (`""` for the root, `".metadata"` for its metadata).
pub type Skip<'a> = &'a dyn Fn(&str, &str) -> bool;

/// Every field of `object` (a whole object, from the root) but those `skip` names; `None`
/// when nothing is left.
pub fn of_object_except<T: FieldTree>(object: &Value, skip: Skip, form: Form) -> Option<T> {
    object.as_object().and_then(|map| walk_fields(map, "", false, skip, form))
}

/// Every field of the object at `path` but those `skip` names; `itself` when the object is a
/// member too.
fn walk_fields<T: FieldTree>(
    map: &Map<String, Value>,
    path: &str,
    itself: bool,
    skip: Skip,
    form: Form,
) -> Option<T> {
    let mut node = T::new();
    for (k, v) in map {
        if skip(path, k) {
            continue;
        }
        if let Some(child) = walk_value(v, path, k, skip, form) {
            node.insert(field_element(k), child);
        }
    }
    node.finish(itself)
}

/// Everything in `value`, the field `field` of the object at `parent`.
fn walk_value<T: FieldTree>(
    value: &Value,
    parent: &str,
    field: &str,
    skip: Skip,
    form: Form,
) -> Option<T> {
    match value {
        Value::Object(map) if !map.is_empty() && !is_atomic_object(parent, field) => {
            let path = child_path(parent, field);
            let itself = form == Form::Update && !always_present(parent, field);
            walk_fields(map, &path, itself, skip, form)
        }
        Value::Array(items) if !items.is_empty() => {
            let path = child_path(parent, field);
            match list_items(parent, field, items) {
                ListItems::Keyed(_, elements) => {
                    let itself = form == Form::Update && !always_present(parent, field);
                    let mut node = T::new();
                    for (element, item) in elements {
                        let child = match item {
                            Some(item) => walk_item(item, &path, skip, form),
                            None => Some(leaf()),
                        };
                        if let Some(child) = child {
                            node.insert(element, child);
                        }
                    }
                    node.finish(itself)
                }
                ListItems::Set(elements) => {
                    let mut node = T::new();
                    for element in elements {
                        node.insert(element, leaf());
                    }
                    node.finish(form == Form::Update)
                }
                ListItems::Atomic => Some(leaf()),
            }
        }
        _ => Some(leaf()),
    }
}

/// A keyed list's item: the item itself and each of its fields.
fn walk_item<T: FieldTree>(item: &Value, list_path: &str, skip: Skip, form: Form) -> Option<T> {
    match item.as_object() {
        Some(map) => walk_fields(map, list_path, true, skip, form),
        None => Some(leaf()),
    }
}

/// A walk that leaves nothing out.
fn skip_none(_: &str, _: &str) -> bool {
    false
}

impl FieldSet {
    pub fn is_empty(&self) -> bool {
        !self.itself && self.children.is_empty()
    }

    /// Every field of `object` (a whole object, from the root).
    #[cfg(test)]
    pub fn of_object(object: &Value) -> FieldSet {
        of_object_except(object, &skip_none, Form::Update).unwrap_or_default()
    }

    /// Everything in `value`, the field `field` of the object at `parent`, which an update
    /// adds: the node itself too unless the old object `had` it (with another value), when
    /// only what is under it is added.
    fn of_value(value: &Value, parent: &str, field: &str, had: bool) -> FieldSet {
        let mut set: FieldSet =
            walk_value(value, parent, field, &skip_none, Form::Update).unwrap_or_default();
        if had && !set.children.is_empty() {
            set.itself = false;
        }
        set
    }

    /// A keyed list's item: the item itself and each of its fields.
    fn of_item(item: &Value, list_path: &str) -> FieldSet {
        walk_item(item, list_path, &skip_none, Form::Update).unwrap_or_default()
    }

    /// The fields of `new` that `old` lacks or holds with another value (both whole objects).
    pub fn changed(old: &Value, new: &Value) -> FieldSet {
        match (old, new) {
            (Value::Object(a), Value::Object(b)) => Self::changed_fields(a, b, ""),
            _ => FieldSet::default(),
        }
    }

    /// The fields of `b` that `a` lacks or holds with another value (the objects at `path`).
    fn changed_fields(a: &Map<String, Value>, b: &Map<String, Value>, path: &str) -> FieldSet {
        let mut set = FieldSet::default();
        for (k, v) in b {
            let changed = match a.get(k) {
                Some(before) => Self::changed_value(before, v, path, k),
                None => Self::of_value(v, path, k, false),
            };
            set.insert_child(field_element(k), changed);
        }
        set
    }

    fn changed_value(old: &Value, new: &Value, parent: &str, field: &str) -> FieldSet {
        match (old, new) {
            (Value::Object(a), Value::Object(b))
                if !a.is_empty() && !b.is_empty() && !is_atomic_object(parent, field) =>
            {
                Self::changed_fields(a, b, &child_path(parent, field))
            }
            (Value::Array(a), Value::Array(b)) if !a.is_empty() && !b.is_empty() => {
                let path = child_path(parent, field);
                match (list_items(parent, field, a), list_items(parent, field, b)) {
                    (ListItems::Keyed(keys, before), ListItems::Keyed(_, after)) => {
                        let mut set = FieldSet::default();
                        for (key, item) in after {
                            let old = before
                                .binary_search_by(|(element, _)| element.cmp(&key))
                                .map(|at| before[at].1);
                            let changed = match (old, item) {
                                (Ok(Some(Value::Object(old))), Some(Value::Object(new))) => {
                                    Self::changed_fields(old, new, &path)
                                }
                                (Ok(Some(_)), Some(_)) => FieldSet::default(),
                                // A repeated key is one member: changed unless its items are.
                                (Ok(_), None) => {
                                    match items_keyed(a, keys, &key) == items_keyed(b, keys, &key) {
                                        true => FieldSet::default(),
                                        false => leaf(),
                                    }
                                }
                                (_, Some(item)) => Self::of_item(item, &path),
                                (Err(_), None) => leaf(),
                            };
                            set.insert_child(key, changed);
                        }
                        set
                    }
                    (ListItems::Set(before), ListItems::Set(after)) => {
                        let mut set = FieldSet::default();
                        for element in after {
                            if before.binary_search(&element).is_err() {
                                set.children.insert(element, leaf());
                            }
                        }
                        set
                    }
                    _ if a == b => FieldSet::default(),
                    _ => Self::of_value(new, parent, field, true),
                }
            }
            _ if old == new => FieldSet::default(),
            _ => Self::of_value(new, parent, field, true),
        }
    }

    fn insert_child(&mut self, element: String, child: FieldSet) {
        if !child.is_empty() {
            self.children.insert(element, child);
        }
    }

    /// Adds the members of `other`.
    pub fn union(&mut self, other: FieldSet) {
        if self.is_empty() {
            *self = other;
            return;
        }
        self.itself |= other.itself;
        for (element, child) in other.children {
            self.children.entry(element).or_default().union(child);
        }
    }

    /// Removes the members of `other` (members under a removed node stay unless named).
    pub fn subtract(&mut self, other: &FieldSet) {
        if other.itself {
            self.itself = false;
        }
        for (element, theirs) in &other.children {
            if let Some(mine) = self.children.get_mut(element) {
                mine.subtract(theirs);
                if mine.is_empty() {
                    self.children.remove(element);
                }
            }
        }
    }

    /// Removes a whole subtree, named by its path.
    pub fn remove_subtree(&mut self, path: &[&str]) {
        match path {
            [] => *self = FieldSet::default(),
            [last] => {
                self.children.remove(*last);
            }
            [first, rest @ ..] => {
                if let Some(child) = self.children.get_mut(*first) {
                    child.remove_subtree(rest);
                    if child.is_empty() {
                        self.children.remove(*first);
                    }
                }
            }
        }
    }

    /// Keeps only the members that still exist in `value`.
    pub fn retain_existing(&mut self, value: &Value) {
        // A list's items are looked up by element in an index built once: a scan of the list
        // per element is quadratic, and lists (an Endpoints' addresses) can be long.
        let index = match value {
            Value::Array(items) => Some(ItemIndex::of(items, self.children.keys())),
            _ => None,
        };
        self.children.retain(|element, child| {
            let inner = match &index {
                Some(index) if index.covers(element) => index.get(element),
                _ => resolve(value, element),
            };
            match inner {
                Some(inner) => {
                    child.retain_existing(inner);
                    !child.is_empty()
                }
                None => false,
            }
        });
    }

    /// The member paths, each a list of elements; a node comes before the members under it.
    pub fn members(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect_members(&mut Vec::new(), &mut out);
        out
    }

    fn collect_members(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.itself && !prefix.is_empty() {
            out.push(prefix.clone());
        }
        for (element, child) in &self.children {
            prefix.push(element.clone());
            child.collect_members(prefix, out);
            prefix.pop();
        }
    }

    /// Is the node at `path` or anything under it a member?
    pub fn touches(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => !self.is_empty(),
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.touches(rest)),
        }
    }

    /// Is the node at `path` itself a member (whatever is under it)?
    pub fn has(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.itself,
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Does `path` name a member with no members under it (a value, not a container)?
    pub fn is_leaf(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.itself && self.children.is_empty(),
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.is_leaf(rest)),
        }
    }

    /// The set holding exactly `path` (one member).
    pub fn single(path: &[String]) -> FieldSet {
        let mut set = leaf();
        for element in path.iter().rev() {
            let mut parent = FieldSet::default();
            parent.children.insert(element.clone(), set);
            set = parent;
        }
        set
    }

    /// The FieldsV1 JSON form.
    pub fn into_json(self) -> Value {
        let mut map = Map::with_capacity(self.children.len() + 1);
        if self.itself && !self.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (element, child) in self.children {
            map.insert(element, child.into_json());
        }
        Value::Object(map)
    }

    /// Reads the FieldsV1 JSON form.
    pub fn from_json(value: &Value) -> Result<FieldSet, String> {
        let map = value.as_object().ok_or("fieldsV1 must be an object")?;
        let mut set = FieldSet { itself: map.is_empty(), children: BTreeMap::new() };
        for (element, child) in map {
            if element == "." {
                set.itself = true;
            } else if ["f:", "k:", "v:", "i:"].iter().any(|p| element.starts_with(p)) {
                set.children.insert(element.clone(), FieldSet::from_json(child)?);
            } else {
                return Err(format!("unknown path element {element:?} in fieldsV1"));
            }
        }
        Ok(set)
    }
}

/// Reads a whole object's FieldsV1 (the root itself is never a member).
pub fn fields_from_json(value: &Value) -> Result<FieldSet, String> {
    let mut set = FieldSet::from_json(value)?;
    set.itself = false;
    Ok(set)
}

/// The value one path element names inside `value`.
pub fn resolve<'a>(value: &'a Value, element: &str) -> Option<&'a Value> {
    let (kind, rest) = element.split_at_checked(2)?;
    match kind {
        "f:" => value.as_object()?.get(rest),
        "i:" => value.as_array()?.get(rest.parse::<usize>().ok()?),
        "k:" | "v:" => {
            let items = value.as_array()?;
            items.get(position(items, element)?)
        }
        _ => None,
    }
}

/// The value a whole path names.
pub fn resolve_path<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, element| resolve(v, element))
}

/// Every value a whole path names: the items of a key or value the list repeats, else the
/// one value (none when there is none).
pub fn resolve_all<'a>(value: &'a Value, path: &[String]) -> Vec<&'a Value> {
    let Some((last, parents)) = path.split_last() else { return vec![value] };
    match resolve_path(value, parents) {
        Some(Value::Array(items)) if matches!(last.get(..2), Some("k:" | "v:")) => {
            positions(items, last).into_iter().map(|i| &items[i]).collect()
        }
        Some(parent) => resolve(parent, last).into_iter().collect(),
        None => Vec::new(),
    }
}

/// The index of the (first) list item a `k:` or `v:` element names.
fn position(items: &[Value], element: &str) -> Option<usize> {
    let names = item_matcher(element)?;
    items.iter().position(names)
}

/// The indexes of the list items a `k:` or `v:` element names.
fn positions(items: &[Value], element: &str) -> Vec<usize> {
    let Some(names) = item_matcher(element) else { return Vec::new() };
    (0..items.len()).filter(|i| names(&items[*i])).collect()
}

/// Whether a list item is the one a `k:` or `v:` element names.
fn item_matcher(element: &str) -> Option<impl Fn(&Value) -> bool + '_> {
    let (kind, rest) = element.split_at_checked(2)?;
    let wanted: Value = serde_json::from_str(rest).ok()?;
    let keys: Option<Vec<String>> = match kind {
        "v:" => None,
        "k:" => Some(wanted.as_object()?.keys().cloned().collect()),
        _ => return None,
    };
    Some(move |item: &Value| match &keys {
        None => *item == wanted,
        Some(keys) => {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            item_key(item, &keys).as_deref() == Some(element)
        }
    })
}

/// A list's items by their `k:` and `v:` elements (the first item of each, as `position`
/// finds), for the key sets the given elements name.
struct ItemIndex<'a> {
    items: HashMap<String, &'a Value>,
}

impl<'a> ItemIndex<'a> {
    fn of<'e>(items: &'a [Value], elements: impl Iterator<Item = &'e String>) -> Self {
        let mut key_sets: Vec<Vec<String>> = Vec::new();
        let mut values = false;
        for element in elements {
            if element.starts_with("v:") {
                values = true;
            } else if let Some(rest) = element.strip_prefix("k:") {
                let keys = serde_json::from_str::<Map<String, Value>>(rest)
                    .map(|wanted| wanted.keys().cloned().collect::<Vec<_>>());
                if let Ok(keys) = keys {
                    if !key_sets.contains(&keys) {
                        key_sets.push(keys);
                    }
                }
            }
        }
        let mut index = HashMap::new();
        for keys in &key_sets {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            for item in items {
                if let Some(element) = item_key(item, &keys) {
                    index.entry(element).or_insert(item);
                }
            }
        }
        if values {
            for item in items {
                index.entry(value_element(item)).or_insert(item);
            }
        }
        Self { items: index }
    }

    /// Whether `get` answers for `element` (else it must be resolved another way).
    fn covers(&self, element: &str) -> bool {
        element.starts_with("k:") || element.starts_with("v:")
    }

    fn get(&self, element: &str) -> Option<&'a Value> {
        self.items.get(element).copied()
    }
}

/// The mutable value a path names, creating nothing.
fn resolve_mut<'a>(value: &'a mut Value, element: &str) -> Option<&'a mut Value> {
    let (kind, rest) = element.split_at_checked(2)?;
    match kind {
        "f:" => value.as_object_mut()?.get_mut(rest),
        "i:" => value.as_array_mut()?.get_mut(rest.parse::<usize>().ok()?),
        _ => {
            let index = position(value.as_array()?, element)?;
            value.as_array_mut()?.get_mut(index)
        }
    }
}

/// Removes the value a path names from `value`; returns whether there was one.
pub fn remove_path(value: &mut Value, path: &[String]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let Some(parent) = parents.iter().try_fold(value, |v, e| resolve_mut(v, e)) else {
        return false;
    };
    let Some((kind, rest)) = last.split_at_checked(2) else {
        return false;
    };
    match (kind, parent) {
        ("f:", Value::Object(map)) => map.remove(rest).is_some(),
        ("i:", Value::Array(items)) => match rest.parse::<usize>() {
            Ok(i) if i < items.len() => {
                items.remove(i);
                true
            }
            _ => false,
        },
        // Every item of a key or value the list repeats.
        (_, Value::Array(items)) => {
            let gone = positions(items, last);
            for i in gone.iter().rev() {
                items.remove(*i);
            }
            !gone.is_empty()
        }
        _ => false,
    }
}

/// A path as Kubernetes prints it in conflicts: `.spec.containers[name="c"].image`.
pub fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for element in path {
        let (kind, rest) = element.split_at_checked(2).unwrap_or(("", element));
        match kind {
            "f:" => {
                out.push('.');
                out.push_str(rest);
            }
            "k:" => {
                let parts: Vec<String> = serde_json::from_str::<Map<String, Value>>(rest)
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default();
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            "v:" => out.push_str(&format!("[={rest}]")),
            _ => out.push_str(&format!("[{rest}]")),
        }
    }
    out
}

/// Merges the values of applied configuration into a live object: fields set in `applied`
/// replace the live ones, keyed lists merge item by item, sets add their values, and
/// everything else in `live` stays.
pub fn merge_applied(live: &mut Value, applied: &Value) {
    merge_value(live, applied, "", "");
}

fn merge_value(live: &mut Value, applied: &Value, parent: &str, field: &str) {
    match (live, applied) {
        (Value::Object(target), Value::Object(source)) if !is_atomic_object(parent, field) => {
            let path = if field.is_empty() && parent.is_empty() {
                String::new()
            } else {
                child_path(parent, field)
            };
            merge_fields(target, source, &path);
        }
        (target @ Value::Array(_), Value::Array(source)) => {
            let current = target.as_array().expect("matched an array");
            match (list_kind(parent, field, current), list_kind(parent, field, source)) {
                (ListKind::Keyed(keys), ListKind::Keyed(_)) => {
                    let path = child_path(parent, field);
                    let items = target.as_array_mut().expect("matched an array");
                    for item in source {
                        let key = item_key(item, keys);
                        let matching: Vec<usize> = (0..items.len())
                            .filter(|i| item_key(&items[*i], keys) == key)
                            .collect();
                        match (matching.as_slice(), item) {
                            ([], _) => items.push(item.clone()),
                            ([at], Value::Object(s)) => match &mut items[*at] {
                                Value::Object(t) => merge_fields(t, s, &path),
                                other => *other = item.clone(),
                            },
                            // A key the live list repeats: the applied item takes the place of
                            // the first, the others go (as structured-merge-diff merges them).
                            ([first, rest @ ..], _) => {
                                for i in rest.iter().rev() {
                                    items.remove(*i);
                                }
                                items[*first] = item.clone();
                            }
                        }
                    }
                }
                (ListKind::Set, ListKind::Set) => {
                    let items = target.as_array_mut().expect("matched an array");
                    for value in source {
                        if !items.contains(value) {
                            items.push(value.clone());
                        }
                    }
                }
                _ => *target = applied.clone(),
            }
        }
        (target, _) => *target = applied.clone(),
    }
}

fn merge_fields(target: &mut Map<String, Value>, source: &Map<String, Value>, path: &str) {
    for (k, v) in source {
        match target.get_mut(k) {
            Some(existing) => merge_value(existing, v, path, k),
            None => {
                target.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn path(elements: &[&str]) -> Vec<String> {
        elements.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn repeated_keys_and_values_are_found_where_structured_merge_diff_finds_them() {
        let rc = json!({"metadata": {"finalizers": ["a/b", "a/c", "a/b"]}, "spec": {"template":
            {"spec": {"containers": [
                {"name": "a", "env": [{"name": "E"}, {"name": "F"}, {"name": "E", "value": "2"}],
                    "ports": [{"containerPort": 80}, {"containerPort": 80, "protocol": "TCP"},
                        {"containerPort": 80, "protocol": "UDP"}]},
                {"name": "b", "args": ["x", "x"]},
                {"name": "a"}]}}}});
        assert_eq!(
            repeated_items(&rc),
            [
                ".metadata.finalizers: duplicate entries for key [=\"a/b\"]",
                ".spec.template.spec.containers[name=\"a\"].env: duplicate entries for key \
                 [name=\"E\"]",
                ".spec.template.spec.containers[name=\"a\"].ports: duplicate entries for key \
                 [containerPort=80,protocol=\"TCP\"]",
                ".spec.template.spec.containers: duplicate entries for key [name=\"a\"]",
            ]
        );
        // Atomic lists (args) may repeat values; items without their key are validation's.
        let fine = json!({"spec": {"containers": [{"name": "a", "args": ["x", "x"]}, {"image": "i"},
            {"image": "i"}]}});
        assert!(repeated_items(&fine).is_empty());
    }

    #[test]
    fn elements_write_values_as_serde_json_does() {
        let values = json!(["app", "a \"quoted\" \\ name", "tab\there", "ünïcode", 9376, -3,
            18446744073709551615u64, 1.5, true, null, {"a": 1}, [1, "x"]]);
        for value in values.as_array().unwrap() {
            let mut written = String::new();
            push_json(&mut written, value);
            assert_eq!(written, value.to_string(), "{value}");
            assert_eq!(value_element(value), format!("v:{value}"));
        }
    }

    #[test]
    fn fields_of_a_pod_use_keys_and_free_form_map_markers() {
        let pod = json!({"metadata": {"labels": {"app": "x"}, "finalizers": ["a/b"]},
            "spec": {"containers": [{"name": "c", "image": "i", "args": ["1"],
                "ports": [{"containerPort": 80}]}]}});
        let json = FieldSet::of_object(&pod).into_json();
        assert_eq!(
            json,
            json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}},
                    "f:finalizers": {".": {}, "v:\"a/b\"": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:args": {},
                    "f:image": {}, "f:name": {},
                    "f:ports": {".": {},
                        "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {},
                        "f:containerPort": {}}}}}}})
        );
        assert_eq!(fields_from_json(&json).unwrap(), FieldSet::of_object(&pod));
        assert!(fields_from_json(&json!({"x": {}})).is_err());
    }

    /// Every object and list an update adds is a member itself, as kube-apiserver's entries
    /// have it (this one as it records a pod's create), but those an empty object of the kind
    /// always has (a pod's spec and containers); one the old object had is not.
    #[test]
    fn an_update_owns_the_objects_and_lists_it_adds() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app",
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
                {"name": "LEVEL", "value": "1"}],
            "livenessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 5},
            "resources": {"limits": {"cpu": "1"}},
            "lifecycle": {"preStop": {"exec": {"command": ["x"]}}},
            "securityContext": {}}]}, "status": {"phase": "Pending"}});
        let expected = json!({"f:metadata": {"f:name": {}}, "f:spec": {"f:containers": {
            "k:{\"name\":\"app\"}": {".": {}, "f:name": {},
                "f:env": {".": {},
                    "k:{\"name\":\"POD_NAME\"}": {".": {}, "f:name": {},
                        "f:valueFrom": {".": {}, "f:fieldRef": {}}},
                    "k:{\"name\":\"LEVEL\"}": {".": {}, "f:name": {}, "f:value": {}}},
                "f:livenessProbe": {".": {}, "f:httpGet": {".": {}, "f:path": {}, "f:port": {}},
                    "f:periodSeconds": {}},
                "f:resources": {".": {}, "f:limits": {".": {}, "f:cpu": {}}},
                "f:lifecycle": {".": {}, "f:preStop": {".": {},
                    "f:exec": {".": {}, "f:command": {}}}},
                "f:securityContext": {}}}},
            "f:status": {"f:phase": {}}});
        assert_eq!(FieldSet::of_object(&pod).into_json(), expected);
        let written = json_of_object_except(&pod, &skip_none).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&written).unwrap(), expected);

        // An update: what the old object lacked is added, node and all; what it had with
        // another value is changed under it.
        let old = json!({"spec": {"containers": [{"name": "app", "resources": {}}]}});
        let new = json!({"spec": {"containers": [{"name": "app",
            "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 80}]}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(
            FieldSet::changed(&old, &new).into_json(),
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {
                    "f:resources": {"f:requests": {".": {}, "f:cpu": {}}},
                    "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}":
                        {".": {}, "f:containerPort": {}}}}}},
                "f:status": {"f:conditions": {".": {},
                    "k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}}})
        );
    }

    #[test]
    fn atomic_maps_and_structs_are_one_member() {
        let service = json!({"metadata": {"labels": {"app": "x"}},
            "spec": {"selector": {"app": "x", "tier": "web"}, "type": "ClusterIP"}});
        let expected = json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:selector": {}, "f:type": {}}});
        assert_eq!(FieldSet::of_object(&service).into_json(), expected);
        let written = json_of_object_except(&service, &skip_none).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&written).unwrap(), expected);
        let pod = json!({"spec": {"nodeSelector": {"disk": "ssd"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms":
                    [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}}},
            "topologySpreadConstraints": [{"topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "maxSkew": 1, "labelSelector": {"matchLabels": {"app": "x"}}}]}});
        let fields = FieldSet::of_object(&pod).into_json();
        assert_eq!(fields["f:spec"]["f:nodeSelector"], json!({}));
        let affinity = &fields["f:spec"]["f:affinity"]["f:nodeAffinity"];
        assert_eq!(affinity["f:requiredDuringSchedulingIgnoredDuringExecution"], json!({}));
        let constraint = &fields["f:spec"]["f:topologySpreadConstraints"];
        let item =
            &constraint["k:{\"topologyKey\":\"zone\",\"whenUnsatisfiable\":\"DoNotSchedule\"}"];
        assert_eq!(item["f:labelSelector"], json!({}), "{fields}");
        // A change inside one is a change of the whole; an apply replaces it whole.
        let mut changed = service.clone();
        changed["spec"]["selector"]["tier"] = json!("api");
        assert_eq!(
            FieldSet::changed(&service, &changed).into_json(),
            json!({"f:spec": {"f:selector": {}}})
        );
        let mut live = service.clone();
        merge_applied(&mut live, &json!({"spec": {"selector": {"app": "y"}}}));
        assert_eq!(live["spec"]["selector"], json!({"app": "y"}));
        let applied = json!({"spec": {"selector": {"app": "x"}}});
        assert_eq!(still_applied(&applied, &service), json!({}));
        let same = json!({"spec": {"selector": {"app": "x", "tier": "web"}}});
        assert_eq!(still_applied(&same, &service), same);
        assert!(is_atomic_path(&path(&["f:spec", "f:selector"])));
        assert!(is_atomic_path(&path(&["f:spec", "f:constraints", "k:{}", "f:labelSelector"])));
        assert!(!is_atomic_path(&path(&["f:spec", "f:template", "f:spec", "f:selector"])));
        assert!(!is_atomic_path(&path(&["f:data"])));
        // References are one value: where a variable's value comes from, not their fields.
        let env = json!({"spec": {"containers": [{"name": "c", "env": [{"name": "X",
            "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            "envFrom": [{"secretRef": {"name": "s"}}]}]}});
        let fields = FieldSet::of_object(&env).into_json();
        let container = &fields["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"];
        let variable = &container["f:env"]["k:{\"name\":\"X\"}"];
        assert_eq!(variable["f:valueFrom"], json!({".": {}, "f:secretKeyRef": {}}), "{fields}");
        assert_eq!(container["f:envFrom"], json!({}), "{fields}");
        let volume = json!({"spec": {"volumes": [{"name": "v",
            "cephfs": {"monitors": ["m"], "secretRef": {"name": "s"}}}]}});
        let fields = FieldSet::of_object(&volume).into_json();
        let cephfs = &fields["f:spec"]["f:volumes"]["k:{\"name\":\"v\"}"]["f:cephfs"];
        assert_eq!(cephfs["f:secretRef"], json!({}), "{fields}");
        // Another kind's `selector` deeper down is a map like any other.
        let nested = json!({"spec": {"template": {"spec": {"selector": {"a": "1"}}}}});
        let nested = FieldSet::of_object(&nested).into_json();
        assert_eq!(nested["f:spec"]["f:template"]["f:spec"]["f:selector"]["f:a"], json!({}));
    }

    #[test]
    fn changed_fields_are_only_the_new_or_different_ones() {
        let old = json!({"spec": {"replicas": 1, "containers": [{"name": "a", "image": "1"},
            {"name": "b", "image": "1"}]}, "metadata": {"labels": {"x": "1"}}});
        let new = json!({"spec": {"replicas": 1, "containers": [{"name": "a", "image": "2"},
            {"name": "b", "image": "1"}, {"name": "c", "image": "1"}]},
            "metadata": {"labels": {"x": "1", "y": "2"}}});
        let changed = FieldSet::changed(&old, &new);
        assert_eq!(
            changed.clone().into_json(),
            json!({"f:metadata": {"f:labels": {"f:y": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {"f:image": {}},
                    "k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
        );
        assert!(FieldSet::changed(&new, &new).is_empty());
    }

    #[test]
    fn set_algebra_and_paths() {
        let a = FieldSet::of_object(&json!({"data": {"a": "1", "b": "2"}}));
        let mut b = a.clone();
        b.subtract(&FieldSet::single(&path(&["f:data", "f:a"])));
        assert!(b.is_leaf(&path(&["f:data", "f:b"])));
        assert!(!b.touches(&path(&["f:data", "f:a"])));
        assert!(b.touches(&path(&["f:data"])));
        let mut c = b.clone();
        c.union(a.clone());
        assert_eq!(c, a);
        c.retain_existing(&json!({"data": {"b": "2"}}));
        assert_eq!(c, b);
        assert_eq!(b.members(), vec![path(&["f:data"]), path(&["f:data", "f:b"])]);
    }

    #[test]
    fn paths_resolve_remove_and_print() {
        let mut pod = json!({"spec": {"containers": [{"name": "a", "image": "1",
            "ports": [{"containerPort": 80, "protocol": "TCP"}]}]},
            "metadata": {"finalizers": ["x", "y"]}});
        let image = path(&["f:spec", "f:containers", "k:{\"name\":\"a\"}", "f:image"]);
        assert_eq!(resolve_path(&pod, &image), Some(&json!("1")));
        assert_eq!(display_path(&image), ".spec.containers[name=\"a\"].image");
        let port = path(&[
            "f:spec",
            "f:containers",
            "k:{\"name\":\"a\"}",
            "f:ports",
            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}",
        ]);
        assert!(resolve_path(&pod, &port).is_some());
        assert!(remove_path(&mut pod, &path(&["f:metadata", "f:finalizers", "v:\"x\""])));
        assert_eq!(pod["metadata"]["finalizers"], json!(["y"]));
        assert!(remove_path(&mut pod, &image));
        assert!(!remove_path(&mut pod, &image));
        assert!(resolve_path(&pod, &path(&["k:garbage"])).is_none());
        assert!(!remove_path(&mut pod, &path(&["f:spec", "f:containers", "k:{bad"])));
    }

    #[test]
    fn applied_values_merge_by_key() {
        let mut live = json!({"spec": {"containers": [{"name": "a", "image": "1", "tty": true}],
            "tolerations": [{"key": "k"}]}, "metadata": {"finalizers": ["x"]}});
        merge_applied(
            &mut live,
            &json!({"spec": {"containers": [{"name": "a", "image": "2"}, {"name": "b"}],
                "tolerations": []}, "metadata": {"finalizers": ["y"]}}),
        );
        assert_eq!(
            live,
            json!({"spec": {"containers": [{"name": "a", "image": "2", "tty": true},
                {"name": "b"}], "tolerations": []}, "metadata": {"finalizers": ["x", "y"]}})
        );
    }

    #[test]
    fn lists_that_break_their_type_are_one_value_and_a_repeat_one_member() {
        let fields = |object: Value| FieldSet::of_object(&object).into_json();
        let keyed = fields(json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}));
        assert!(keyed["f:spec"]["f:containers"].get("k:{\"name\":\"b\"}").is_some());
        // As structured-merge-diff reads a live object's repeats: a repeated key is one member
        // with nothing under it, a repeated value one value.
        let repeated = json!({"spec": {"containers": [{"name": "a", "image": "1"},
            {"name": "b"}, {"name": "a", "image": "2"}]}});
        let set = fields(repeated.clone());
        let a = &set["f:spec"]["f:containers"]["k:{\"name\":\"a\"}"];
        assert_eq!(a, &json!({}), "{set}");
        let written = json_of_object_except(&repeated, &skip_none).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&written).unwrap(),
            set,
            "as a create writes it"
        );
        let set = fields(json!({"metadata": {"finalizers": ["x", "x"]}}));
        assert_eq!(set["f:metadata"]["f:finalizers"], json!({".": {}, "v:\"x\"": {}}));
        for (parent, broken) in [
            ("spec", json!({"containers": [{"name": "a"}, {"image": "no-name"}]})),
            ("metadata", json!({"finalizers": ["x", {"an": "object"}]})),
        ] {
            let list = broken.as_object().unwrap().keys().next().unwrap().clone();
            let set = fields(json!({parent: broken}));
            assert_eq!(set[format!("f:{parent}")][format!("f:{list}")], json!({}), "{set}");
        }
        let set = fields(json!({"metadata": {"finalizers": ["x", "y"]}}));
        let finalizers = json!({".": {}, "v:\"x\"": {}, "v:\"y\"": {}});
        assert_eq!(set["f:metadata"]["f:finalizers"], finalizers);
        // A namespace's spec.finalizers are atomic, as Kubernetes declares them.
        let set = fields(json!({"spec": {"finalizers": ["x", "y"]}}));
        assert_eq!(set["f:spec"]["f:finalizers"], json!({}));
    }

    #[test]
    fn retain_existing_keeps_what_is_left_of_long_lists() {
        let containers = |n: usize, skip: usize| -> Vec<Value> {
            (0..n)
                .filter(|i| i % 3 != skip)
                .map(|i| json!({"name": format!("c{i}"), "image": "i"}))
                .collect()
        };
        let finalizers = |n: usize, skip: usize| -> Vec<Value> {
            (0..n).filter(|i| i % 3 != skip).map(|i| json!(format!("f{i}"))).collect()
        };
        let object = |skip: usize| {
            json!({"metadata": {"finalizers": finalizers(600, skip)},
                "spec": {"containers": containers(600, skip)}})
        };
        // skip 3 keeps everything; skip 1 drops every third item of both lists.
        let (old, new) = (object(3), object(1));
        let mut set = FieldSet::of_object(&old);
        set.retain_existing(&new);
        assert_eq!(set, FieldSet::of_object(&new));
    }
}
