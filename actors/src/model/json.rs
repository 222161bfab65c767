//! Reading JSON values by path on the write path's hot spots.
//!
//! `serde_json::Value::pointer` copies every token of the path twice to unescape it (`~1`,
//! `~0`); these read the same values without allocating.

use serde_json::Value;

/// The value at a JSON pointer (`/metadata/labels`, `/spec/containers/0`), as
/// `Value::pointer` finds it.
pub fn at<'a>(value: &'a Value, pointer: &str) -> Option<&'a Value> {
    if memchr::memchr(b'~', pointer.as_bytes()).is_some() {
        return value.pointer(pointer);
    }
    if pointer.is_empty() {
        return Some(value);
    }
    walk(value, pointer.strip_prefix('/')?, b'/')
}

/// `at`, for changing the value found: as `Value::pointer_mut` finds it.
pub fn at_mut<'a>(value: &'a mut Value, pointer: &str) -> Option<&'a mut Value> {
    if memchr::memchr(b'~', pointer.as_bytes()).is_some() {
        return value.pointer_mut(pointer);
    }
    if pointer.is_empty() {
        return Some(value);
    }
    let mut value = value;
    for token in pointer.strip_prefix('/')?.split('/') {
        value = match value {
            Value::Object(map) => map.get_mut(token)?,
            Value::Array(items) => items.get_mut(array_index(token)?)?,
            _ => return None,
        };
    }
    Some(value)
}

/// The strings of the array in field `key` of `value` (none when it is missing or not an
/// array; its items that are not strings are left out).
pub fn strings(value: &Value, key: &str) -> Vec<String> {
    let items = value.get(key).and_then(Value::as_array).into_iter().flatten();
    items.filter_map(Value::as_str).map(String::from).collect()
}

/// The value at a dotted field path (`spec.nodeName`), as field selectors name fields.
pub fn at_field<'a>(value: &'a Value, field: &str) -> Option<&'a Value> {
    walk(value, field, b'.')
}

/// Steps down the tokens of `path`, split at `separator`. (Found with memchr: `str::split`'s
/// character search showed in the instruction counts of a create, which reads a dozen paths.)
fn walk<'a>(mut value: &'a Value, mut path: &str, separator: u8) -> Option<&'a Value> {
    while let Some(end) = memchr::memchr(separator, path.as_bytes()) {
        value = step(value, &path[..end])?;
        path = &path[end + 1..];
    }
    step(value, path)
}

fn step<'a>(value: &'a Value, token: &str) -> Option<&'a Value> {
    match value {
        Value::Object(map) => map.get(token),
        Value::Array(items) => items.get(array_index(token)?),
        _ => None,
    }
}

/// An array index as RFC 6901 reads one: digits, no leading zero, no sign.
fn array_index(token: &str) -> Option<usize> {
    let index_like = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    token.parse::<usize>().ok().filter(|_| index_like)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_what_value_pointer_finds() {
        let value = json!({"metadata": {"labels": {"a/b": "x", "c~d": "y", "": "e"}, "name": "n"},
            "spec": {"containers": [{"name": "c0"}, {"name": "c1"}]}});
        for pointer in [
            "",
            "/",
            "/metadata",
            "/metadata/name",
            "/metadata/labels/a~1b",
            "/metadata/labels/c~0d",
            "/metadata/labels/",
            "/metadata/missing",
            "/spec/containers/1/name",
            "/spec/containers/01",
            "/spec/containers/+1",
            "/spec/containers/2",
            "/spec/containers/x",
            "/metadata/name/deeper",
            "metadata",
        ] {
            assert_eq!(at(&value, pointer), value.pointer(pointer), "{pointer:?}");
            let mut changed = value.clone();
            assert_eq!(at_mut(&mut changed, pointer).cloned(), value.pointer(pointer).cloned());
        }
        let mut changed = value.clone();
        *at_mut(&mut changed, "/spec/containers/1/name").unwrap() = json!("renamed");
        assert_eq!(changed["spec"]["containers"][1]["name"], "renamed");
        assert_eq!(at_field(&value, "metadata.name"), Some(&json!("n")));
        assert_eq!(at_field(&value, "spec.nodeName"), None);
        assert_eq!(at_field(&value, "spec.containers.1.name"), Some(&json!("c1")));
        assert_eq!(at_field(&value, "metadata.labels."), Some(&json!("e")));
        assert_eq!(at_field(&value, "metadata..name"), None);
        assert_eq!(at_field(&value, ""), None);
    }
}
