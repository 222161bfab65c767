//! Reading JSON values by path, and writing them, on the write path's hot spots.
//!
//! `serde_json::Value::pointer` and `pointer_mut` copy every token of the path twice to
//! unescape it (`~1`, `~0`); `at` and `at_mut` find the same values without allocating.
//! `write` writes a value byte for byte as `serde_json::to_writer` does, without the
//! serializer's machinery, and checks each string for characters to escape eight bytes at a
//! time rather than byte by byte.

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

/// A JSON pointer's token as the key it names (`~1` is `/`, `~0` is `~`).
pub fn unescape_token(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
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

/// Appends `value`'s compact JSON to `out`, as `serde_json::to_writer` writes it.
pub fn write(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => out.extend_from_slice(number.to_string().as_bytes()),
        Value::String(text) => write_string(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, key);
                out.push(b':');
                write(out, item);
            }
            out.push(b'}');
        }
    }
}

/// Appends `text` as a JSON string, as `serde_json::to_writer` writes it.
pub fn write_string(out: &mut Vec<u8>, text: &str) {
    if is_plain(text) {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, text).expect("writing to a Vec cannot fail");
    }
}

/// Whether `text` is written in JSON as it is, between quotes: none of its bytes is escaped
/// (a quote, a backslash, a control character). Checked eight bytes at a time.
pub fn is_plain(text: &str) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // Whether some byte of `word` is below `n` (at most 0x80): with `n` = 1, whether one is 0.
    let any_below = |word: u64, n: u64| word.wrapping_sub(ONES * n) & !word & HIGHS != 0;
    let escaped = |word: u64| {
        any_below(word, 0x20)
            || any_below(word ^ (ONES * 0x22), 1)
            || any_below(word ^ (ONES * 0x5c), 1)
    };
    let mut words = text.as_bytes().chunks_exact(8);
    for word in &mut words {
        if escaped(u64::from_ne_bytes(word.try_into().expect("eight bytes"))) {
            return false;
        }
    }
    !words.remainder().iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
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
    fn writes_what_serde_json_writes() {
        let long = "a".repeat(40);
        let value = json!({"s": "plain", "q": "say \"hi\"", "b": "back\\slash", "c": "\u{1}\n\t",
            "u": "ünïcødé \u{2028} </>&", "n": [0, -1, 1.5, 1e300, u64::MAX, i64::MIN], "t": true,
            "f": false, "z": null, "e": {}, "a": [], "nested": [{"k": [long.clone()]}],
            format!("{long}\"{long}"): format!("{long}\u{7f}{long}\n")});
        let mut out = b"kept".to_vec();
        write(&mut out, &value);
        assert_eq!(out, [&b"kept"[..], &serde_json::to_vec(&value).unwrap()].concat());
        for text in ["", "\"", "0123456789abcdef\u{1f}", "0123456789abcdef0123456789abcde\\"] {
            assert!(!is_plain(text) || text.is_empty());
            let mut out = Vec::new();
            write_string(&mut out, text);
            assert_eq!(out, serde_json::to_vec(text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn plain_text_is_told_from_text_to_escape_at_every_position() {
        for len in 0..20 {
            let plain: String = (0..len).map(|i| ['a', ' ', '~', '\u{7f}', 'é'][i % 5]).collect();
            assert!(is_plain(&plain), "{plain:?}");
            for at in 0..len {
                for escaped in ['"', '\\', '\0', '\n', '\u{1f}'] {
                    let mut text: Vec<char> = plain.chars().collect();
                    text[at] = escaped;
                    let text: String = text.into_iter().collect();
                    assert!(!is_plain(&text), "{text:?}");
                }
            }
        }
        // Every byte value alone, and after seven plain ones (a word's last byte).
        for byte in 0..=0x7fu8 {
            let escaped = byte < 0x20 || byte == b'"' || byte == b'\\';
            let alone = (byte as char).to_string();
            assert_eq!(is_plain(&alone), !escaped, "{byte:#x}");
            assert_eq!(is_plain(&format!("abcdefg{alone}")), !escaped, "{byte:#x}");
        }
    }

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
