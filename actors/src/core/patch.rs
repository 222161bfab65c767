//! Patches: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch
//! (merge patch plus lists merged by key, as the core types declare them).

use std::collections::{HashMap, HashSet};

use json_patch::PatchOperation;
use serde_json::{Map, Value};

use super::ApiError;
use crate::model::json;
use crate::model::lists::{self, ListField};

/// The patch formats the API accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    StrategicMerge,
}

/// The most operations a JSON patch may have, as in Kubernetes (413 beyond).
const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;
/// The most JSON a patch's `copy` operations may copy in all, as Kubernetes bounds it: each
/// copy may double a document, so a small patch could otherwise fill the memory.
const MAX_COPIED_BYTES: usize = 3 << 20;

/// About how many bytes `value` takes as JSON, counted no further than `limit`.
fn json_size(value: &Value, limit: usize) -> usize {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => {
            let mut size = 2;
            for item in items {
                size += json_size(item, limit.saturating_sub(size)) + 1;
                if size > limit {
                    break;
                }
            }
            size
        }
        Value::Object(fields) => {
            let mut size = 2;
            for (key, item) in fields {
                size += key.len() + 4 + json_size(item, limit.saturating_sub(size));
                if size > limit {
                    break;
                }
            }
            size
        }
    }
}

/// Applies `patch` to `current`.
pub(crate) fn apply(
    current: &Value,
    patch_type: PatchType,
    patch: &Value,
) -> Result<Value, ApiError> {
    let mut target = current.clone();
    match patch_type {
        PatchType::Json => {
            let invalid =
                |e: serde_json::Error| ApiError::BadRequest(format!("invalid JSON patch: {e}"));
            let listed: Vec<Map<String, Value>> =
                serde_json::from_value(patch.clone()).map_err(invalid)?;
            if listed.len() > MAX_JSON_PATCH_OPERATIONS {
                return Err(ApiError::RequestTooLarge(format!(
                    "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                    listed.len()
                )));
            }
            // Kubernetes decodes the operations' members as strings (400 otherwise), and fails
            // one it cannot apply (an unknown kind, a member missing, a path that is no
            // pointer) when it comes to it: those before it apply (or fail) first, 422.
            for op in &listed {
                check_member_types(op)?;
            }
            let not_applicable = |why: String| {
                ApiError::PatchNotApplicable(format!("the JSON patch could not be applied: {why}"))
            };
            // One operation after the other, on a clone (a failed patch is simply dropped),
            // each as it finds the document: its negative indices counted from the ends of
            // the arrays then, its copy measured against what was copied before.
            let mut copied = 0;
            for (at, op) in listed.into_iter().enumerate() {
                let Some(kind) = operation_kind(&op) else {
                    let kind = op.get("op").and_then(Value::as_str).unwrap_or("unknown");
                    return Err(ApiError::PatchNotApplicable(format!("Unexpected kind: {kind}")));
                };
                let op = from_the_ends(&target, op, kind);
                if kind == "test" && tests_for_absence(&target, &op) {
                    continue;
                }
                let decoded: PatchOperation = serde_json::from_value(Value::Object(op))
                    .map_err(|e| not_applicable(format!("{kind} operation: {e}")))?;
                if let PatchOperation::Copy(copy) = &decoded {
                    let source = target.pointer(copy.from.as_str());
                    copied +=
                        source.map_or(0, |value| json_size(value, MAX_COPIED_BYTES - copied + 1));
                    if copied > MAX_COPIED_BYTES {
                        let why = "accumulated copy size limit exceeded";
                        return Err(not_applicable(why.into()));
                    }
                }
                // (`json_patch::patch` would undo the applied operations, and its undo panics
                // for some inputs, e.g. a move into itself.)
                json_patch::patch_unsafe(&mut target, std::slice::from_ref(&decoded)).map_err(
                    |e| {
                        not_applicable(format!(
                            "operation '/{at}' failed at path '{}': {}",
                            e.path, e.kind
                        ))
                    },
                )?;
            }
        }
        PatchType::Merge => {
            if !patch.is_object() {
                return Err(ApiError::BadRequest("a merge patch must be a JSON object".into()));
            }
            json_patch::merge(&mut target, patch);
        }
        PatchType::StrategicMerge => {
            let Value::Object(patch) = patch else {
                return Err(ApiError::BadRequest(
                    "a strategic merge patch must be a JSON object".into(),
                ));
            };
            strategic_merge_object(&mut target, patch, "")?;
        }
    }
    Ok(target)
}

/// An operation's `op`, `path` and `from` are strings, or it is refused as Kubernetes'
/// decoding of a `jsonPatchOp` refuses it (400).
fn check_member_types(op: &Map<String, Value>) -> Result<(), ApiError> {
    for member in ["op", "path", "from"] {
        let kind = match op.get(member) {
            None | Some(Value::String(_) | Value::Null) => continue,
            Some(Value::Number(_)) => "number",
            Some(Value::Bool(_)) => "bool",
            Some(Value::Array(_)) => "array",
            Some(Value::Object(_)) => "object",
        };
        return Err(ApiError::BadRequest(format!(
            "error decoding patch: json: cannot unmarshal {kind} into Go struct field \
             jsonPatchOp.{member} of type string"
        )));
    }
    Ok(())
}

/// `op` with the negative array indices of its `path` and `from` counted from the ends of the
/// arrays `doc` has there (`-1` is the last item; for an `add`'s path, the place after it), as
/// Kubernetes' JSON patch library takes them; a `move`'s path as the document is once its
/// value has been taken away, as the library moves.
fn from_the_ends(doc: &Value, mut op: Map<String, Value>, kind: &str) -> Map<String, Value> {
    // (`from` first: a move's path is resolved after it.)
    for member in ["from", "path"] {
        let Some(Value::String(pointer)) =
            op.get(member).filter(|p| p.as_str().is_some_and(|p| p.contains("/-")))
        else {
            continue;
        };
        let adding = member == "path" && matches!(kind, "add" | "copy" | "move");
        let resolved = match (kind, member, op.get("from").and_then(Value::as_str)) {
            ("move", "path", Some(from)) => {
                let mut moved = doc.clone();
                if json_patch::patch_unsafe(&mut moved, &without(from)).is_err() {
                    continue; // the move fails at its `from`
                }
                resolve_negative_indices(&moved, pointer, adding)
            }
            _ => resolve_negative_indices(doc, pointer, adding),
        };
        if let Some(resolved) = resolved {
            op.insert(member.into(), Value::String(resolved));
        }
    }
    op
}

/// A patch that removes what `pointer` points at.
fn without(pointer: &str) -> json_patch::Patch {
    let remove = serde_json::json!([{"op": "remove", "path": pointer}]);
    serde_json::from_value(remove).unwrap_or(json_patch::Patch(Vec::new()))
}

/// `pointer` with its negative array indices resolved against `doc`, if it has any.
fn resolve_negative_indices(doc: &Value, pointer: &str, adding: bool) -> Option<String> {
    let tokens: Vec<&str> = pointer.strip_prefix('/')?.split('/').collect();
    let mut resolved: Vec<String> = Vec::with_capacity(tokens.len());
    let mut changed = false;
    let mut at = Some(doc);
    for (i, token) in tokens.iter().enumerate() {
        let mut token = token.to_string();
        if let (Some(Value::Array(items)), Ok(back @ ..0)) = (at, token.parse::<i64>()) {
            let length = items.len() as i64 + i64::from(adding && i == tokens.len() - 1);
            if length + back >= 0 {
                token = (length + back).to_string();
                changed = true;
            }
        }
        at = match at {
            Some(Value::Array(items)) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
            Some(Value::Object(fields)) => fields.get(&json::unescape_token(&token)),
            _ => None,
        };
        resolved.push(token);
    }
    changed.then(|| format!("/{}", resolved.join("/")))
}

/// A `test` of `null` (or of no value) passes where an object has no such member, as in
/// Kubernetes' JSON patch library, which reads a missing member as null: clients test so that
/// a field is not set.
fn tests_for_absence(doc: &Value, op: &Map<String, Value>) -> bool {
    if !op.get("value").is_none_or(Value::is_null) {
        return false;
    }
    let Some(pointer) = op.get("path").and_then(Value::as_str) else { return false };
    let Some((parent, member)) = pointer.rsplit_once('/') else { return false };
    let member = json::unescape_token(member);
    match doc.pointer(parent) {
        Some(Value::Object(fields)) => fields.get(&member).is_none_or(Value::is_null),
        _ => false,
    }
}

/// An operation's `op` when it is one of RFC 6902's.
fn operation_kind(op: &Map<String, Value>) -> Option<&'static str> {
    const KNOWN: [&str; 6] = ["add", "remove", "replace", "move", "copy", "test"];
    let kind = op.get("op").and_then(Value::as_str)?;
    KNOWN.into_iter().find(|known| *known == kind)
}

/// A `$patch` directive Kubernetes does not know in a map (`unknown patch type`).
fn unknown_directive(directive: &Value, map: &Map<String, Value>) -> ApiError {
    let directive = directive.as_str().map_or_else(|| directive.to_string(), str::to_string);
    let map = Value::Object(map.clone());
    ApiError::BadRequest(format!("unknown patch type: {directive} in map: {map}"))
}

fn strategic_merge_object(
    target: &mut Value,
    patch: &Map<String, Value>,
    path: &str,
) -> Result<(), ApiError> {
    // A map's directive: `replace` puts the patch in its place, `delete` empties it.
    match patch.get("$patch") {
        None => {}
        Some(Value::String(directive)) if directive == "replace" => {
            let mut replacement = patch.clone();
            replacement.remove("$patch");
            *target = Value::Object(replacement);
            return Ok(());
        }
        Some(Value::String(directive)) if directive == "delete" => {
            *target = Value::Object(Map::new());
            return Ok(());
        }
        Some(directive) => return Err(unknown_directive(directive, patch)),
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let map = target.as_object_mut().expect("just made an object");
    // The fields to keep: a list, naming every field the patch sets (Kubernetes'
    // `applyRetainKeysDirective`); the others go.
    if let Some(keep) = patch.get("$retainKeys") {
        let bad = || ApiError::BadRequest("invalid patch format of retainKeys".into());
        let keep: Vec<&str> =
            keep.as_array().ok_or_else(bad)?.iter().filter_map(Value::as_str).collect();
        let set = patch.iter().filter(|(k, v)| {
            !v.is_null()
                && !matches!(k.as_str(), "$retainKeys" | "$patch")
                && !k.starts_with("$deleteFromPrimitiveList/")
                && !k.starts_with("$setElementOrder/")
        });
        if set.into_iter().any(|(k, _)| !keep.contains(&k.as_str())) {
            return Err(bad());
        }
        map.retain(|k, _| keep.contains(&k.as_str()));
    }
    if patch.iter().any(|(k, v)| k.starts_with("$setElementOrder/") && !v.is_array()) {
        let message = "invalid patch format of setElementOrder list";
        return Err(ApiError::BadRequest(message.into()));
    }
    // The declared lists the patch orders, with where their items stood before it.
    let ordered: Vec<(&str, &ListField, &Vec<Value>, Places)> = patch
        .iter()
        .filter_map(|(key, order)| {
            let field = key.strip_prefix("$setElementOrder/")?;
            let declared = lists::declared(path, field)?;
            let before = map.get(field).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
            Some((field, declared, order.as_array()?, places(before, declared.merge_key())))
        })
        .collect();
    for (key, value) in patch {
        if key.starts_with('$') {
            if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
                if let (Some(Value::Array(list)), Value::Array(remove)) =
                    (map.get_mut(field), value)
                {
                    let remove: HashSet<String> = remove.iter().map(Value::to_string).collect();
                    list.retain(|v| !remove.contains(&v.to_string()));
                }
            }
            continue;
        }
        let child_path = format!("{path}.{key}");
        match value {
            Value::Null => {
                map.remove(key);
            }
            Value::Object(child) => strategic_merge_object(
                map.entry(key.clone()).or_insert(Value::Null),
                child,
                &child_path,
            )?,
            Value::Array(items) => match lists::declared(path, key) {
                Some(declared) => {
                    let list = map.entry(key.clone()).or_insert_with(|| Value::Array(Vec::new()));
                    match declared.merge_key() {
                        Some(merge_key) => merge_list(list, items, merge_key, &child_path)?,
                        None => merge_set(list, items),
                    }
                }
                None => {
                    map.insert(key.clone(), value.clone());
                }
            },
            _ => {
                map.insert(key.clone(), value.clone());
            }
        }
    }
    for (field, declared, order, before) in ordered {
        if let Some(Value::Array(list)) = map.get_mut(field) {
            set_element_order(list, order, &before, declared.merge_key());
        }
    }
    Ok(())
}

/// An item of a merged list as the merge tells it apart: its `key`'s JSON text, or (in a set)
/// its own. Texts are looked up in maps: a patch of a list of thousands stays linear.
fn item_id(item: &Value, key: Option<&str>) -> Option<String> {
    match key {
        Some(key) => item.get(key).map(Value::to_string),
        None => Some(item.to_string()),
    }
}

/// Where each item of a list stood (the first place of each id), before a patch.
type Places = HashMap<String, usize>;

fn places(before: &[Value], key: Option<&str>) -> Places {
    let mut places = Places::new();
    for (at, item) in before.iter().enumerate() {
        if let Some(item_id) = item_id(item, key) {
            places.entry(item_id).or_insert(at);
        }
    }
    places
}

/// Orders a merged list as Kubernetes' `normalizeElementOrder` does: the items `order` names
/// come in its order; the others, which only the live object had, keep their places relative
/// to those as they stood `before` the patch, and an item new to the list comes before the
/// live object's items still to place. `order` is the patch's `$setElementOrder/<field>`
/// (kubectl sends it with every merged list it patches: the order of the list in the applied
/// file), else the patch's own items (a merge always orders so, with or without it).
fn set_element_order<'a>(
    list: &mut Vec<Value>,
    order: impl IntoIterator<Item = &'a Value>,
    before: &Places,
    key: Option<&str>,
) {
    let id = |item: &Value| item_id(item, key);
    let mut items: Vec<Option<Value>> = std::mem::take(list).into_iter().map(Some).collect();
    let mut by_id: HashMap<String, Vec<usize>> = HashMap::new();
    for (at, item) in items.iter().enumerate().rev() {
        if let Some(item_id) = item.as_ref().and_then(id) {
            by_id.entry(item_id).or_default().push(at);
        }
    }
    let named: Vec<Value> = order
        .into_iter()
        .filter_map(id)
        .filter_map(|wanted| by_id.get_mut(&wanted)?.pop().and_then(|at| items[at].take()))
        .collect();
    let server_only: Vec<Value> = items.into_iter().flatten().collect();
    let place = |item: &Value| id(item).and_then(|item_id| before.get(&item_id).copied());
    let (mut named, mut server_only) =
        (named.into_iter().peekable(), server_only.into_iter().peekable());
    while let (Some(mine), Some(theirs)) = (server_only.peek(), named.peek()) {
        let server_first = matches!((place(mine), place(theirs)), (Some(a), Some(b)) if a < b);
        let next = if server_first { server_only.next() } else { named.next() };
        list.extend(next);
    }
    list.extend(server_only);
    list.extend(named);
}

/// A set of plain values (`finalizers`): the patch's values are added to those there (those
/// to remove come as `$deleteFromPrimitiveList/<field>`, applied before this), each value
/// once, in the patch's order (see [`set_element_order`]).
fn merge_set(target: &mut Value, items: &[Value]) {
    if !target.is_array() {
        *target = Value::Array(Vec::new());
    }
    let list = target.as_array_mut().expect("just made an array");
    let before = places(list, None);
    let mut present = HashSet::new();
    let both = std::mem::take(list).into_iter().chain(items.iter().cloned());
    list.extend(both.filter(|item| present.insert(item.to_string())));
    set_element_order(list, items, &before, None);
}

/// A list of objects merged by `key` (containers by `name`): the items the patch deletes
/// (`$patch: delete`) go first, every one with that key; then the others merge into the first
/// with their key or are added; the list is then in the patch's order (see
/// [`set_element_order`]).
fn merge_list(target: &mut Value, items: &[Value], key: &str, path: &str) -> Result<(), ApiError> {
    if !target.is_array() {
        *target = Value::Array(Vec::new());
    }
    let list = target.as_array_mut().expect("just made an array");
    // An item's directive: `replace` (the list is the patch's items), `delete` (below).
    for item in items.iter().filter_map(Value::as_object) {
        match item.get("$patch") {
            None => {}
            Some(Value::String(directive)) if directive == "replace" || directive == "delete" => {}
            Some(Value::String(directive)) if directive == "merge" => {
                let why = "merging lists cannot yet be specified in the patch";
                return Err(ApiError::BadRequest(why.into()));
            }
            Some(directive) => return Err(unknown_directive(directive, item)),
        }
    }
    if items.iter().any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace")) {
        *list = items.iter().filter(|i| i.get("$patch").is_none()).cloned().collect();
        return Ok(());
    }
    // Kubernetes' `ErrNoMergeKey`, the item as Go prints it (its 500; a 400 here).
    let id_of = |obj: &Map<String, Value>| {
        obj.get(key).map(Value::to_string).ok_or_else(|| {
            let printed = crate::model::text::go_print(&Value::Object(obj.clone()));
            ApiError::BadRequest(format!(
                "map: {printed} does not contain declared merge key: {key}"
            ))
        })
    };
    let deleting = |item: &Value| item.get("$patch").and_then(Value::as_str) == Some("delete");
    let mut deleted = HashSet::new();
    for obj in items.iter().filter(|item| deleting(item)).filter_map(Value::as_object) {
        deleted.insert(id_of(obj)?);
    }
    list.retain(|item| item.get(key).is_none_or(|id| !deleted.contains(&id.to_string())));
    // (Where the items stood once those deleted are gone: an item deleted and added again in
    // one patch is a new one, as Kubernetes orders it.)
    let before = places(list, Some(key));
    // Where the first item of each key is: a patch of thousands of items stays linear.
    let mut index: HashMap<String, usize> = HashMap::new();
    for (at, item) in list.iter().enumerate().rev() {
        if let Some(id) = item.get(key) {
            index.insert(id.to_string(), at);
        }
    }
    let merged: Vec<&Value> = items.iter().filter(|item| !deleting(item)).collect();
    for &item in &merged {
        let Some(obj) = item.as_object() else {
            list.push(item.clone());
            continue;
        };
        match index.get(&id_of(obj)?) {
            Some(&at) => strategic_merge_object(&mut list[at], obj, path)?,
            None => {
                let mut fresh = Value::Object(Map::new());
                strategic_merge_object(&mut fresh, obj, path)?;
                if let Some(id) = fresh.get(key) {
                    index.insert(id.to_string(), list.len());
                }
                list.push(fresh);
            }
        }
    }
    set_element_order(list, merged, &before, Some(key));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `$retainKeys` keeps the fields it names and no others, and must name every field the
    /// patch sets; it and `$setElementOrder/...` are lists (400 otherwise, in Kubernetes' words).
    #[test]
    fn retained_keys_and_element_orders_are_well_formed_lists() {
        let volume = json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}],
            "dnsPolicy": "ClusterFirst", "hostname": "h"}});
        let patched = |patch: Value| apply(&volume, PatchType::StrategicMerge, &patch);
        let kept = patched(json!({"spec": {"$retainKeys": ["volumes", "hostname"],
            "hostname": "h2"}}))
        .unwrap();
        assert_eq!(
            kept["spec"],
            json!({"volumes": [{"name": "v", "emptyDir": {}}], "hostname": "h2"})
        );
        let bad = |patch: Value| match patched(patch) {
            Err(ApiError::BadRequest(message)) => message,
            other => panic!("{other:?}"),
        };
        let retain = "invalid patch format of retainKeys";
        assert_eq!(
            bad(json!({"spec": {"$retainKeys": ["hostname"], "dnsPolicy": "None"}})),
            retain
        );
        assert_eq!(bad(json!({"spec": {"$retainKeys": "hostname"}})), retain);
        let order = json!({"spec": {"$setElementOrder/volumes": {"name": "v"}}});
        assert_eq!(bad(order), "invalid patch format of setElementOrder list");
        // A field the patch removes need not be named.
        let removed = patched(json!({"spec": {"$retainKeys": ["volumes"], "hostname": null}}));
        assert_eq!(removed.unwrap()["spec"], json!({"volumes": [{"name": "v", "emptyDir": {}}]}));
    }

    #[test]
    fn a_maps_directive_replaces_or_empties_it_and_an_unknown_one_is_refused() {
        let cm = json!({"data": {"k": "v", "k2": "v2"}, "metadata": {"labels": {"a": "1"}}});
        let patched = |patch: Value| apply(&cm, PatchType::StrategicMerge, &patch);
        let emptied = patched(json!({"data": {"$patch": "delete"}})).unwrap();
        assert_eq!(emptied["data"], json!({}));
        assert_eq!(emptied["metadata"]["labels"], json!({"a": "1"}));
        let replaced = patched(json!({"data": {"$patch": "replace", "q": "1"}})).unwrap();
        assert_eq!(replaced["data"], json!({"q": "1"}));
        let refused = patched(json!({"data": {"$patch": "bogus"}})).unwrap_err();
        assert!(
            matches!(&refused, ApiError::BadRequest(m) if m.starts_with("unknown patch type: bogus in map:")),
            "{refused:?}"
        );
        let pod = json!({"spec": {"containers": [{"name": "a", "image": "x"}]}});
        let merge = json!({"spec": {"containers": [{"name": "a", "$patch": "merge"}]}});
        let refused = apply(&pod, PatchType::StrategicMerge, &merge).unwrap_err();
        assert!(
            matches!(&refused, ApiError::BadRequest(m) if m.contains("merging lists")),
            "{refused:?}"
        );
    }

    #[test]
    fn strategic_merges_containers_by_name() {
        let pod =
            json!({"spec":{"containers":[{"name":"a","image":"x"},{"name":"b","image":"y"}]}});
        let patch =
            json!({"spec":{"containers":[{"name":"b","image":"z"},{"name":"c","image":"w"}]}});
        let out = apply(&pod, PatchType::StrategicMerge, &patch).unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name":"a","image":"x"},{"name":"b","image":"z"},{"name":"c","image":"w"}])
        );
        let delete = json!({"spec":{"containers":[{"name":"a","$patch":"delete"}],"$setElementOrder/containers":[{"name":"b"}]}});
        let out = apply(&out, PatchType::StrategicMerge, &delete).unwrap();
        assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 2);
        assert!(out["spec"].get("$setElementOrder/containers").is_none());
    }

    #[test]
    fn an_item_without_its_merge_key_is_refused_not_added() {
        let pod = json!({"spec":{"containers":[{"name":"a","image":"x"}]}});
        for (item, printed) in [
            (
                json!({"image": "z", "ports": [{"containerPort": 80}]}),
                "map[image:z ports:[map[containerPort:80]]]",
            ),
            (json!({"$patch": "delete"}), "map[$patch:delete]"),
            (json!({}), "map[]"),
        ] {
            let patch = json!({"spec": {"containers": [item]}});
            match apply(&pod, PatchType::StrategicMerge, &patch) {
                Err(ApiError::BadRequest(why)) => assert_eq!(
                    why,
                    format!("map: {printed} does not contain declared merge key: name")
                ),
                other => panic!("{other:?}"),
            }
        }
        // A list replaced whole needs no keys.
        let replace = json!({"spec":{"containers":[{"$patch":"replace"},{"name":"b"}]}});
        let out = apply(&pod, PatchType::StrategicMerge, &replace).unwrap();
        assert_eq!(out["spec"]["containers"], json!([{"name": "b"}]));
    }

    #[test]
    fn strategic_merges_sets_by_value_and_lists_by_where_they_sit() {
        let ns = json!({"metadata":{"finalizers":["a","b"]},"spec":{"finalizers":["kubernetes"]}});
        let patch = json!({"metadata":{"finalizers":["c","a"],
            "$deleteFromPrimitiveList/finalizers":["b"]},"spec":{"finalizers":["x"]}});
        let out = apply(&ns, PatchType::StrategicMerge, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["c", "a"]));
        // A namespace's spec.finalizers are atomic: replaced.
        assert_eq!(out["spec"]["finalizers"], json!(["x"]));
        let service = json!({"spec":{"ports":[{"port":80,"targetPort":8080}]}});
        let patch = json!({"spec":{"ports":[{"port":80,"targetPort":9090},{"port":443}]}});
        let out = apply(&service, PatchType::StrategicMerge, &patch).unwrap();
        assert_eq!(out["spec"]["ports"], json!([{"port":80,"targetPort":9090},{"port":443}]));
        let endpoints = json!({"subsets":[{"ports":[{"port":80}],"addresses":[{"ip":"1"}]}]});
        let patch = json!({"subsets":[{"ports":[{"port":81}],"addresses":[{"ip":"2"}]}]});
        let out = apply(&endpoints, PatchType::StrategicMerge, &patch).unwrap();
        assert_eq!(out["subsets"], patch["subsets"], "an Endpoints' subsets are atomic");
    }

    #[test]
    fn set_element_order_orders_what_the_patch_names_and_keeps_the_servers_items_in_place() {
        // `c` only the server has (another writer added it); the file adds `z` in front.
        let pod = json!({"spec":{"containers":[{"name":"a"},{"name":"b"},{"name":"c"}]}});
        let patch = json!({"spec":{
            "$setElementOrder/containers":[{"name":"z"},{"name":"a"},{"name":"b"}],
            "containers":[{"name":"z","image":"i"}]}});
        let out = apply(&pod, PatchType::StrategicMerge, &patch).unwrap();
        let names: Vec<&str> = out["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["z", "a", "b", "c"]);
        // A server-only item between named ones stays between them.
        let env = json!({"spec":{"containers":[{"name":"a","env":[
            {"name":"X"},{"name":"S"},{"name":"Y"}]}]}});
        let patch = json!({"spec":{"containers":[{"name":"a",
            "$setElementOrder/env":[{"name":"X"},{"name":"Y"}],"env":[{"name":"Y","value":"1"}]}]}});
        let out = apply(&env, PatchType::StrategicMerge, &patch).unwrap();
        let env = &out["spec"]["containers"][0]["env"];
        assert_eq!(env, &json!([{"name":"X"},{"name":"S"},{"name":"Y","value":"1"}]));
        // Sets order by value.
        let meta = json!({"metadata":{"finalizers":["a","b"]}});
        let patch = json!({"metadata":{"$setElementOrder/finalizers":["b","c","a"],
            "finalizers":["c"]}});
        let out = apply(&meta, PatchType::StrategicMerge, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "c", "a"]));
    }

    /// Without `$setElementOrder` too, a merged list takes the patch's order (Kubernetes'
    /// `normalizeElementOrder`, the cases of its own tests among these).
    #[test]
    fn a_merged_list_takes_the_order_of_the_patch() {
        let names = |list: &Value, key: &str| -> Vec<String> {
            let items = list.as_array().unwrap().iter();
            items.map(|item| item[key].as_str().unwrap().to_string()).collect()
        };
        let meta = json!({"metadata": {"finalizers": ["f/1", "f/2", "f/3"]}});
        let patch = json!({"metadata": {"finalizers": ["f/3", "f/1"]}});
        let out = apply(&meta, PatchType::StrategicMerge, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["f/2", "f/3", "f/1"]));
        // A new value comes before the live object's values still to place.
        let patch = json!({"metadata": {"finalizers": ["f/new"]}});
        let out = apply(&meta, PatchType::StrategicMerge, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["f/new", "f/1", "f/2", "f/3"]));
        let pod = json!({"spec": {"containers": [{"name": "c", "env": [
            {"name": "E1", "value": "1"}, {"name": "E2"}, {"name": "E3"}]}]}});
        let patch = json!({"spec": {"containers": [{"name": "c", "env": [
            {"name": "E3"}, {"name": "E1"}, {"name": "E2", "value": "2"}]}]}});
        let out = apply(&pod, PatchType::StrategicMerge, &patch).unwrap();
        let env = &out["spec"]["containers"][0]["env"];
        assert_eq!(names(env, "name"), ["E3", "E1", "E2"]);
        assert_eq!(
            env,
            &json!([{"name": "E3"}, {"name": "E1", "value": "1"},
            {"name": "E2", "value": "2"}])
        );
        let patch = json!({"spec": {"containers": [{"name": "sidecar", "image": "s"}]}});
        let out = apply(&pod, PatchType::StrategicMerge, &patch).unwrap();
        assert_eq!(names(&out["spec"]["containers"], "name"), ["sidecar", "c"]);
        // Server-only items keep their places around the patch's.
        let list = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"},
            {"name": "d"}]}});
        let patch = json!({"spec": {"containers": [{"name": "c"}, {"name": "x"}, {"name": "a"}]}});
        let out = apply(&list, PatchType::StrategicMerge, &patch).unwrap();
        assert_eq!(names(&out["spec"]["containers"], "name"), ["b", "c", "x", "a", "d"]);
    }

    /// A `$patch: delete` removes every item with its key, before the patch's other items
    /// merge, wherever it stands in the patch.
    #[test]
    fn deletes_take_every_item_of_their_key_before_the_merge() {
        let current = json!({"spec": {"containers": [{"name": "c", "env": [
            {"name": "A", "value": "1"}, {"name": "B"}, {"name": "A", "value": "2"}]}]}});
        let patch = json!({"spec": {"containers": [{"name": "c", "env": [
            {"name": "A", "value": "3"}, {"name": "A", "$patch": "delete"}]}]}});
        let out = apply(&current, PatchType::StrategicMerge, &patch).unwrap();
        let env = &out["spec"]["containers"][0]["env"];
        assert_eq!(env, &json!([{"name": "A", "value": "3"}, {"name": "B"}]));
        let patch = json!({"spec": {"containers": [{"name": "c", "env": [
            {"name": "A", "$patch": "delete"}]}]}});
        let out = apply(&current, PatchType::StrategicMerge, &patch).unwrap();
        assert_eq!(out["spec"]["containers"][0]["env"], json!([{"name": "B"}]));
        // Deleted and added again (a `valueFrom` turned into a `value`): a new item, first.
        let current = json!({"spec": {"containers": [{"name": "c", "env": [
            {"name": "B"}, {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]}]}});
        let patch = json!({"spec": {"containers": [{"name": "c", "env": [
            {"name": "A", "$patch": "delete"}, {"name": "A", "value": "x"}]}]}});
        let out = apply(&current, PatchType::StrategicMerge, &patch).unwrap();
        let env = &out["spec"]["containers"][0]["env"];
        assert_eq!(env, &json!([{"name": "A", "value": "x"}, {"name": "B"}]));
    }

    #[test]
    fn merge_and_json_patches() {
        let cm = json!({"metadata":{"labels":{"a":"1","b":"2"}},"data":{"k":"v"}});
        let out = apply(&cm, PatchType::Merge, &json!({"metadata":{"labels":{"a":null,"c":"3"}}}))
            .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b":"2","c":"3"}));
        let out =
            apply(&cm, PatchType::Json, &json!([{"op":"replace","path":"/data/k","value":"w"}]))
                .unwrap();
        assert_eq!(out["data"]["k"], "w");
        assert!(apply(&cm, PatchType::Json, &json!([{"op":"remove","path":"/nope"}])).is_err());
        assert!(apply(&cm, PatchType::Json, &json!({"op":"x"})).is_err());
        assert!(apply(&cm, PatchType::Merge, &json!([1])).is_err());
        // An operation RFC 6902 does not know is decoded and fails to apply (422), not a
        // malformed body (400).
        let unknown = |patch| match apply(&cm, PatchType::Json, &patch) {
            Err(ApiError::PatchNotApplicable(why)) => why,
            other => panic!("{other:?}"),
        };
        assert_eq!(unknown(json!([{"op": "frob", "path": "/x"}])), "Unexpected kind: frob");
        assert_eq!(unknown(json!([{"path": "/x"}])), "Unexpected kind: unknown");
        assert!(matches!(apply(&cm, PatchType::Json, &json!([1])), Err(ApiError::BadRequest(_))));
        // Those before it fail first.
        let first = json!([{"op": "remove", "path": "/nope"}, {"op": "frob"}]);
        assert!(unknown(first).starts_with("the JSON patch could not be applied"));
        // So does one missing a member, or whose path is no pointer: 422, as Kubernetes
        // fails them when it applies them.
        for malformed in [
            json!([{"op": "add"}]),
            json!([{"op": "replace", "path": "/data/k"}]),
            json!([{"op": "move", "path": "/data/z"}]),
            json!([{"op": "add", "path": "data/x", "value": "1"}]),
        ] {
            let why = unknown(malformed.clone());
            assert!(why.starts_with("the JSON patch could not be applied"), "{malformed}: {why}");
        }
        // A member of another type than a string is a body that cannot be decoded: 400.
        let typed = apply(&cm, PatchType::Json, &json!([{"op": 1, "path": "/x"}]));
        let Err(ApiError::BadRequest(why)) = typed else { panic!("{typed:?}") };
        assert_eq!(
            why,
            "error decoding patch: json: cannot unmarshal number into Go struct field \
             jsonPatchOp.op of type string"
        );
    }
}

#[cfg(test)]
mod json_patch_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn copies_that_would_fill_the_memory_are_refused() {
        let doubling: Vec<Value> =
            std::iter::once(json!({"op": "add", "path": "/x", "value": [1]}))
                .chain((0..40).map(|_| json!({"op": "copy", "from": "/x", "path": "/x/-"})))
                .collect();
        let refused = apply(&json!({}), PatchType::Json, &Value::Array(doubling));
        let Err(ApiError::PatchNotApplicable(message)) = refused else { panic!("{refused:?}") };
        assert!(message.contains("copy size"), "{message}");
        let few = json!([{"op": "add", "path": "/x", "value": [1]},
            {"op": "copy", "from": "/x", "path": "/y"}]);
        assert_eq!(apply(&json!({}), PatchType::Json, &few).unwrap(), json!({"x": [1], "y": [1]}));
        let many = Value::Array(vec![json!({"op": "test", "path": "", "value": {}}); 10_001]);
        let refused = apply(&json!({}), PatchType::Json, &many);
        assert!(matches!(refused, Err(ApiError::RequestTooLarge(_))), "{refused:?}");
    }

    /// Negative indices count from the ends of the arrays (Kubernetes' JSON patch library's
    /// default), and a test of null passes for a missing member.
    #[test]
    fn negative_indices_count_from_the_end_and_null_tests_absence() {
        let current = json!({"metadata": {"finalizers": ["a", "b", "c"]}, "spec": {}});
        let patch = json!([{"op": "remove", "path": "/metadata/finalizers/-1"},
            {"op": "replace", "path": "/metadata/finalizers/-2", "value": "A"},
            {"op": "add", "path": "/metadata/finalizers/-1", "value": "z"},
            {"op": "test", "path": "/metadata/finalizers/-1", "value": "z"},
            {"op": "copy", "from": "/metadata/finalizers/-1", "path": "/spec/last"}]);
        let out = apply(&current, PatchType::Json, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["A", "b", "z"]));
        assert_eq!(out["spec"]["last"], "z");
        // A move's path counts in the array its value has left.
        let moves = json!([{"op": "move", "from": "/metadata/finalizers/0",
            "path": "/metadata/finalizers/-1"}]);
        let out = apply(&current, PatchType::Json, &moves).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "c", "a"]));
        let moves = json!([{"op": "move", "from": "/metadata/finalizers/2",
            "path": "/metadata/finalizers/-2"}]);
        let out = apply(&current, PatchType::Json, &moves).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "c", "b"]));
        let too_far = json!([{"op": "remove", "path": "/metadata/finalizers/-4"}]);
        let failed = apply(&current, PatchType::Json, &too_far);
        assert!(matches!(failed, Err(ApiError::PatchNotApplicable(_))), "{failed:?}");
        // A guard that a field is not set: passes while it is not, fails once it is.
        let guarded = json!([{"op": "test", "path": "/spec/x", "value": null},
            {"op": "add", "path": "/spec/x", "value": 1}]);
        let out = apply(&current, PatchType::Json, &guarded).unwrap();
        assert_eq!(out["spec"]["x"], 1);
        let failed = apply(&out, PatchType::Json, &guarded);
        let Err(ApiError::PatchNotApplicable(message)) = failed else { panic!("{failed:?}") };
        assert!(message.contains("operation '/0' failed at path '/spec/x'"), "{message}");
        // The failing operation is named by its place in the patch.
        let second = json!([{"op": "add", "path": "/spec/y", "value": 1},
            {"op": "remove", "path": "/spec/nothing"}]);
        let failed = apply(&current, PatchType::Json, &second);
        let Err(ApiError::PatchNotApplicable(message)) = failed else { panic!("{failed:?}") };
        assert!(message.contains("operation '/1' failed at path '/spec/nothing'"), "{message}");
    }

    #[test]
    fn a_failing_json_patch_is_an_error_not_a_panic() {
        let current = json!({"metadata": {"name": "p"}});
        let patch = json!([{"op": "add", "path": "/x", "value": 1},
            {"op": "move", "from": "/metadata", "path": "/metadata/inner"}]);
        let failed = apply(&current, PatchType::Json, &patch);
        assert!(matches!(failed, Err(ApiError::PatchNotApplicable(_))), "{failed:?}");
        let malformed = apply(&current, PatchType::Json, &json!({"op": "add"}));
        assert!(matches!(malformed, Err(ApiError::BadRequest(_))), "{malformed:?}");
    }
}
