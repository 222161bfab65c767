//! A list's items as kube-apiserver writes them: each object's stored JSON without its own
//! `apiVersion` and `kind` (the list says them once), found by a scan of the object's top-level
//! members, not a parse: the rest of the bytes are copied as they are.

use bytes::{BufMut, BytesMut};

/// Writes `object` (one JSON object) to `out` without its top-level `apiVersion` and `kind`;
/// as it is when it cannot be read as a JSON object.
pub fn put_item(object: &[u8], out: &mut BytesMut) {
    let start = out.len();
    if put_without_type_meta(object, out).is_none() {
        out.truncate(start);
        out.put_slice(object);
    }
}

fn put_without_type_meta(object: &[u8], out: &mut BytesMut) -> Option<()> {
    let mut at = skip_space(object, 0);
    if object.get(at) != Some(&b'{') {
        return None;
    }
    out.put_u8(b'{');
    at += 1;
    let (mut left_out, mut written) = (0, false);
    loop {
        at = skip_space(object, at);
        if object.get(at) == Some(&b'}') {
            out.put_u8(b'}');
            return Some(());
        }
        if left_out == 2 {
            // Both found: the remaining members go as they are.
            if written {
                out.put_u8(b',');
            }
            out.put_slice(&object[at..]);
            return Some(());
        }
        let member = at;
        let key_end = string_end(object, at)?;
        let key = &object[member + 1..key_end - 1];
        at = skip_space(object, key_end);
        if object.get(at) != Some(&b':') {
            return None;
        }
        at = value_end(object, skip_space(object, at + 1))?;
        if key == b"apiVersion" || key == b"kind" {
            left_out += 1;
        } else {
            if written {
                out.put_u8(b',');
            }
            out.put_slice(&object[member..at]);
            written = true;
        }
        at = skip_space(object, at);
        match object.get(at)? {
            b',' => at += 1,
            b'}' => {
                out.put_u8(b'}');
                return Some(());
            }
            _ => return None,
        }
    }
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// Where the string starting at `at` (its opening quote) ends: just past its closing quote.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
        if bytes[i] == b'\\' {
            i += 2;
        } else {
            return Some(i + 1);
        }
    }
}

/// Where the value starting at `at` ends: just past it.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match bytes.get(i)? {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        // A number, true, false or null.
        _ => {
            let rest = &bytes[at..];
            let len = rest
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())
                .unwrap_or(rest.len());
            (len > 0).then_some(at + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn item(object: &str) -> String {
        let mut out = BytesMut::new();
        put_item(object.as_bytes(), &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn the_type_is_left_out_wherever_it_stands() {
        assert_eq!(
            item(r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}}"#),
            r#"{"metadata":{"name":"p"},"spec":{}}"#
        );
        // Behind members holding quotes, escapes, braces and the same keys nested.
        let object = json!({"aggregationRule": {"kind": "x"}, "apiVersion": "v1",
            "data": {"a\"}": "{[\\", "b": [1, {"kind": null}], "c": -1.5e3, "d": true},
            "immutable": false, "kind": "ConfigMap", "metadata": {"name": "c"}});
        let out: Value = serde_json::from_str(&item(&object.to_string())).unwrap();
        let mut expected = object.clone();
        expected.as_object_mut().unwrap().retain(|k, _| k != "apiVersion" && k != "kind");
        assert_eq!(out, expected);
        // Last, alone, spaced out, or not there.
        assert_eq!(item(r#"{"a":1,"kind":"K"}"#), r#"{"a":1}"#);
        assert_eq!(item(r#"{"kind":"K"}"#), "{}");
        assert_eq!(item(r#" { "kind" : "K" , "a" : [ 1 ] } "#), r#"{"a" : [ 1 ]}"#);
        assert_eq!(item(r#"{"a":1}"#), r#"{"a":1}"#);
    }

    #[test]
    fn what_is_not_an_object_is_written_as_it_is() {
        for odd in [r#"[1]"#, r#"{"a":"#, r#"{"a" 1}"#, r#"{"a":"x}"#, ""] {
            assert_eq!(item(odd), odd);
        }
    }
}
