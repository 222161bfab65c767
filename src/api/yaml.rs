//! YAML out (`Accept: application/yaml`), written as Kubernetes writes it (JSON turned into
//! YAML by go-yaml v2): block mappings indented by two, sequences not indented under their
//! key, `{}` and `[]` for empty ones, multi-line strings as literal blocks, and every string a
//! YAML 1.1 reader would take for something else (`on`, `yes`, `n`, `012`, `1_000`, `12:30`,
//! `2002-12-14`, `~`, ...) double-quoted, so that what is read back is what was written.

use serde_json::Value;

/// `value` as a YAML document.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => mapping(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => sequence(&mut out, items, 0),
        // A document that is one string of several lines: quoted, not a block at column 0.
        Value::String(text) if text.contains('\n') => {
            out.push_str(&double_quoted(text));
            out.push('\n');
        }
        scalar => {
            out.push_str(&inline(scalar, 0));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

fn mapping(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize) {
    let mut first = true;
    for (key, value) in map {
        // The first key of a mapping that is a sequence's item follows its `- `.
        if !first {
            pad(out, indent);
        }
        first = false;
        // (A key is never a block: one of several lines is double-quoted.)
        let key = if key.contains('\n') { double_quoted(key) } else { string(key, indent) };
        out.push_str(&key);
        out.push(':');
        value_after(out, value, After::Key, indent);
    }
}

fn sequence(out: &mut String, items: &[Value], indent: usize) {
    let mut first = true;
    for item in items {
        if !first {
            pad(out, indent);
        }
        first = false;
        out.push('-');
        value_after(out, item, After::Item, indent);
    }
}

/// What a value is written after.
#[derive(Clone, Copy)]
enum After {
    /// A mapping's `key:`.
    Key,
    /// A sequence's `-`.
    Item,
}

/// A mapping's value or a sequence's item, after its `key:` or `-` at `indent`.
fn value_after(out: &mut String, value: &Value, after: After, indent: usize) {
    let nested = indent + 2;
    match (value, after) {
        (Value::Object(map), _) if !map.is_empty() => {
            match after {
                // A mapping in a sequence begins on the item's line.
                After::Item => out.push(' '),
                After::Key => {
                    out.push('\n');
                    pad(out, nested);
                }
            }
            mapping(out, map, nested);
        }
        (Value::Array(items), After::Item) if !items.is_empty() => {
            out.push(' ');
            sequence(out, items, nested);
        }
        (Value::Array(items), After::Key) if !items.is_empty() => {
            // Under a key, a sequence is not indented (go-yaml's way).
            out.push('\n');
            pad(out, indent);
            sequence(out, items, indent);
        }
        (scalar, _) => {
            out.push(' ');
            out.push_str(&inline(scalar, nested));
            out.push('\n');
        }
    }
}

/// A scalar (or an empty collection) on one line; a multi-line string as a literal block
/// whose lines are indented by `indent`.
fn inline(value: &Value, indent: usize) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s, indent),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

/// A string as go-yaml writes it: plain when that reads back as the same string, a literal
/// block for several lines, single-quoted when only its characters keep it from being plain,
/// double-quoted when it would read as another type or has characters only escapes can say.
fn string(s: &str, indent: usize) -> String {
    if s.contains('\n') && literal_allowed(s) {
        return literal(s, indent);
    }
    if !printable(s) || s.contains('\n') || !reads_as_string(s) {
        return double_quoted(s);
    }
    if plain_allowed(s) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

/// Every character is one YAML may write as it is: not a tab or another control, not a
/// byte order mark or a non-character, not one of the line breaks YAML 1.1 adds (NEL, LS, PS).
fn printable(s: &str) -> bool {
    s.chars().all(|c| {
        matches!(c, '\n' | ' '..='~')
            || (c >= '\u{a0}'
                && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'))
    })
}

/// A literal block can hold it: printable, no line starting with a space, no space before a
/// line break.
fn literal_allowed(s: &str) -> bool {
    // (A first line that is empty or indented would need an indentation indicator.)
    printable(s)
        && !s.starts_with(' ')
        && !s.starts_with('\n')
        && !s.contains(" \n")
        && !s.ends_with(' ')
        && !s.trim_end_matches('\n').is_empty()
}

fn literal(s: &str, indent: usize) -> String {
    let chomp = match s.len() - s.trim_end_matches('\n').len() {
        0 => "-",
        1 => "",
        _ => "+",
    };
    let mut out = format!("|{chomp}");
    let body = s.strip_suffix('\n').unwrap_or(s);
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            out.push_str(&" ".repeat(indent));
            out.push_str(line);
        }
    }
    out
}

fn double_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            '\u{85}' => out.push_str("\\N"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if (c as u32) < 0x20 || ('\u{7f}'..='\u{9f}').contains(&c) => {
                out.push_str(&format!("\\x{:02X}", c as u32))
            }
            '\u{feff}' | '\u{fffe}' | '\u{ffff}' => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether a YAML reader takes `s`, written plain, as a string, not a null, a boolean, a
/// number or a time (YAML 1.1's resolution, as go-yaml v2 and PyYAML read it).
fn reads_as_string(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
        "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF",
        ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
        ".NaN", ".NAN", "<<", "=",
    ];
    !(WORDS.contains(&s) || number_like(s) || timestamp_like(s))
}

/// An integer or float as YAML 1.1 writes them: signs, `_` separators, `0x`/`0o`/`0b`
/// prefixes, octal zeros, exponents, base-60 (`1:20`).
fn number_like(s: &str) -> bool {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    if unsigned.is_empty() {
        return false;
    }
    let digits =
        |t: &str, ok: fn(char) -> bool| !t.is_empty() && t.chars().all(|c| ok(c) || c == '_');
    for (prefix, ok) in [
        ("0x", (|c: char| c.is_ascii_hexdigit()) as fn(char) -> bool),
        ("0o", |c: char| ('0'..='7').contains(&c)),
        ("0b", |c: char| c == '0' || c == '1'),
    ] {
        // (Go's `ParseInt`, which go-yaml reads numbers with, takes either case.)
        if unsigned.get(..2).is_some_and(|p| p.eq_ignore_ascii_case(prefix)) {
            return digits(&unsigned[2..], ok);
        }
    }
    // Base 60: digits, then `:` and one or two digits, any number of times.
    if unsigned.contains(':') {
        let mut parts = unsigned.split(':');
        let head = parts.next().unwrap_or("");
        let sexagesimal = digits(head, |c| c.is_ascii_digit())
            && parts.all(|p| {
                let (whole, fraction) = p.split_once('.').unwrap_or((p, "0"));
                let sixty = match whole.as_bytes() {
                    [d] => d.is_ascii_digit(),
                    [tens, d] => (b'0'..=b'5').contains(tens) && d.is_ascii_digit(),
                    _ => false,
                };
                sixty && fraction.chars().all(|c| c.is_ascii_digit() || c == '_')
            });
        return sexagesimal;
    }
    // Decimal: digits with at most one `.`, an optional exponent; at least one digit.
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let mantissa_ok = mantissa.chars().any(|c| c.is_ascii_digit())
        && mantissa.chars().all(|c| c.is_ascii_digit() || c == '_' || c == '.')
        && mantissa.matches('.').count() <= 1;
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

/// A date (`2002-12-14`) or a date and time, as YAML 1.1's timestamps begin.
fn timestamp_like(s: &str) -> bool {
    let b = s.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    b.len() >= 8
        && (0..4).all(digit)
        && b[4] == b'-'
        && digit(5)
        && (b[6] == b'-' || (digit(6) && b.get(7) == Some(&b'-')))
}

/// Whether `s` may be written plain (it is already known to read back as a string): no
/// leading or trailing space, no indicator first, no `: ` or ` #` inside, no `:` last.
fn plain_allowed(s: &str) -> bool {
    let first = s.chars().next().unwrap_or(' ');
    let second = s.chars().nth(1);
    let leading_indicator = match first {
        '-' | '?' | ':' => second.is_none_or(|c| c == ' '),
        ',' | '[' | ']' | '{' | '}' | '#' | '&' | '*' | '!' | '|' | '>' | '\'' | '"' | '%'
        | '@' | '`' | ' ' => true,
        _ => false,
    };
    !(leading_indicator
        || s.ends_with(' ')
        || s.ends_with(':')
        || s.contains(": ")
        || s.contains(" #")
        || s == "-"
        || s.starts_with("---")
        || s.starts_with("..."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_another_type_would_be_read_from_are_double_quoted() {
        for ambiguous in [
            "on",
            "Off",
            "yes",
            "y",
            "N",
            "~",
            "null",
            "",
            "012",
            "1_000",
            "0x1F",
            "12:30",
            "1.5",
            "1e3",
            "-7",
            ".inf",
            "2002-12-14",
            "2026-12-07T00:08:31Z",
        ] {
            assert_eq!(string(ambiguous, 0), format!("{ambiguous:?}"), "{ambiguous}");
        }
        for plain in
            ["web", "kplane/agnhost", "1.2.3", "v1", "a-b", "e3", "10Gi", "x y", "1:234", "1:70"]
        {
            assert_eq!(string(plain, 0), plain, "{plain}");
        }
        assert_eq!(string("a: b", 0), "'a: b'");
        assert_eq!(string("- x", 0), "'- x'");
        assert_eq!(string("it's #1 ", 0), "'it''s #1 '");
        assert_eq!(string("tab\there", 0), "\"tab\\there\"");
        assert_eq!(string("0X1F", 0), "\"0X1F\"");
        assert_eq!(string("a\u{2028}b\u{85}c\u{80}", 0), "\"a\\Lb\\Nc\\x80\"");
        assert_eq!(string("\n  indented", 2), "\"\\n  indented\"");
        assert_eq!(to_string(&json!("two\nlines")), "\"two\\nlines\"\n");
    }

    #[test]
    fn documents_are_laid_out_as_go_yaml_lays_them_out() {
        let pod = json!({
            "apiVersion": "v1",
            "data": {"on": "on", "script": "echo hi\necho there\n", "n": 3, "empty": {}},
            "items": [{"a": 1, "b": [true, null]}, "x", [], ["y"]],
            "none": [],
        });
        let expected = "\
apiVersion: v1
data:
  empty: {}
  \"n\": 3
  \"on\": \"on\"
  script: |
    echo hi
    echo there
items:
- a: 1
  b:
  - true
  - null
- x
- []
- - \"y\"
none: []
";
        assert_eq!(to_string(&pod), expected);
        // What is written reads back as it was.
        let read: Value = serde_yaml::from_str(&to_string(&pod)).unwrap();
        assert_eq!(read, pod);
        assert_eq!(string("no newline\nat the end", 2), "|-\n  no newline\n  at the end");
        assert_eq!(string("two\n\n", 2), "|+\n  two\n");
        for text in ["two\n\n", "\n", "a\n\nb", " lead\n", "tail \nx", "x\n  y\n"] {
            let doc = json!({"k": text, "l": [text]});
            let read: Value = serde_yaml::from_str(&to_string(&doc)).unwrap();
            assert_eq!(read, doc, "{}", to_string(&doc));
        }
    }
}
