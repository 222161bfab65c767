//! String comparisons for hot lookups that may meet empty strings (the core group `""`, the
//! namespace of a cluster-scoped object), Go's spelling of a true boolean and of a duration,
//! and cutting text to a number of bytes.
//!
//! Rust compares strings with `memcmp`, even when they are empty. An empty `String` or `""`
//! points at a dangling address, and glibc's AVX-512 `memcmp` reads it with a masked vector load
//! whose fault suppression costs a microcode assist: about 170 ns for a comparison of two empty
//! strings on this machine, against 3 ns for valid ones. Per request, the resource table lookups
//! alone cost 14% of the API server's CPU before they went through these functions.

use std::cmp::Ordering;

/// The longest start of `text` of at most `most` bytes that ends on a character boundary.
pub fn prefix_within(text: &str, most: usize) -> &str {
    let mut end = text.len().min(most);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Whether Go's `strconv.ParseBool` reads `text` as true (how Kubernetes reads boolean
/// annotations and query parameters).
pub fn go_true(text: &str) -> bool {
    matches!(text, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// Nanoseconds in Go's `time.Duration` text (`1h2m3s`, `1.5s`, `0s`), which is how
/// `metav1.Duration` is written in JSON.
pub fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let total = nanos.unsigned_abs();
    if total < 1_000_000_000 {
        let (unit, scale) = match total {
            t if t < 1_000 => ("ns", 1),
            t if t < 1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{sign}{}{unit}", fraction(total, scale));
    }
    let hours = total / 3_600_000_000_000;
    let minutes = total / 60_000_000_000 % 60;
    let seconds = fraction(total % 60_000_000_000, 1_000_000_000);
    match (hours, minutes) {
        (0, 0) => format!("{sign}{seconds}s"),
        (0, m) => format!("{sign}{m}m{seconds}s"),
        (h, m) => format!("{sign}{h}h{m}m{seconds}s"),
    }
}

/// `value / scale` with its decimals, trailing zeros left out (`1500, 1000` is `1.5`).
fn fraction(value: u64, scale: u64) -> String {
    let (whole, rest) = (value / scale, value % scale);
    if rest == 0 {
        return whole.to_string();
    }
    let digits = scale.ilog10() as usize;
    let decimals = format!("{rest:0digits$}");
    format!("{whole}.{}", decimals.trim_end_matches('0'))
}

/// `host:port`, brackets around an IPv6 host, as Go's `net.JoinHostPort` writes it.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `text` quoted as Go's `%q` (`strconv.Quote`) writes it: `"a\x01b"`, where Rust's `{:?}`
/// writes `"a\u{1}b"`.
pub fn go_quote(text: &str) -> String {
    use std::fmt::Write as _;
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\u{7}' => quoted.push_str("\\a"),
            '\u{8}' => quoted.push_str("\\b"),
            '\u{c}' => quoted.push_str("\\f"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            '\u{b}' => quoted.push_str("\\v"),
            // Go's printable runes: graphic ones and the ASCII space (not other spaces).
            ' ' => quoted.push(' '),
            c if !c.is_control() && !c.is_whitespace() && !format_or_private(c) => quoted.push(c),
            c if (c as u32) < 0x80 => write!(quoted, "\\x{:02x}", c as u32).unwrap(),
            c if (c as u32) < 0x10000 => write!(quoted, "\\u{:04x}", c as u32).unwrap(),
            c => write!(quoted, "\\U{:08x}", c as u32).unwrap(),
        }
    }
    quoted.push('"');
    quoted
}

/// Whether `c` is a format character (Unicode's `Cf`: soft hyphen, zero-width and direction
/// marks, the byte order mark...) or a private-use one (`Co`): not graphic, so Go escapes it.
fn format_or_private(c: char) -> bool {
    matches!(c as u32,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x890..=0x891 | 0x8E2 | 0x180E
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF
        | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F
        | 0xE000..=0xF8FF | 0xF0000..=0xFFFFD | 0x100000..=0x10FFFD)
}

/// A decoded JSON value as Go's `%v` prints it (what a `map[string]interface{}` holds): maps
/// as `map[k:v ...]` by sorted key, lists as `[a b]`, strings bare, null as `<nil>`, whole
/// numbers as integers and others as `%g` does (`1.5`, `1e+06`).
pub fn go_print(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_go_value(&mut out, value);
    out
}

fn write_go_value(out: &mut String, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::String(s) => out.push_str(s),
        Value::Number(n) if n.is_f64() => out.push_str(&go_float(n.as_f64().unwrap_or(0.0))),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_go_value(out, item);
            }
            out.push(']');
        }
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            out.push_str("map[");
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(key);
                out.push(':');
                write_go_value(out, &fields[key]);
            }
            out.push(']');
        }
    }
}

/// A float as Go's `%v` writes it: the shortest digits, in exponent form when the exponent
/// is below -4 or 6 and above (`1e+06`, `1.5e-05`).
fn go_float(f: f64) -> String {
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        return f.to_string();
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

/// `a == b`, without calling `memcmp` when both are empty.
#[inline]
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

/// `a.cmp(b)`, without calling `memcmp` when either is empty.
#[inline]
pub fn order(a: &str, b: &str) -> Ordering {
    if a.is_empty() || b.is_empty() {
        a.len().cmp(&b.len())
    } else {
        a.cmp(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_on_a_character_boundary() {
        assert_eq!(prefix_within("abc", 2), "ab");
        assert_eq!(prefix_within("abc", 9), "abc");
        assert_eq!(prefix_within("aé", 2), "a");
    }

    #[test]
    fn host_and_port_are_joined_as_go_joins_them() {
        assert_eq!(join_host_port("127.0.0.1", 80), "127.0.0.1:80");
        assert_eq!(join_host_port("::1", 8443), "[::1]:8443");
    }

    #[test]
    fn quotes_are_go_s() {
        assert_eq!(go_quote("sleep 5"), r#""sleep 5""#);
        assert_eq!(go_quote("a\u{1}b"), r#""a\x01b""#);
        assert_eq!(go_quote("say \"hi\"\\\n\t"), r#""say \"hi\"\\\n\t""#);
        assert_eq!(go_quote("\u{a0}é\u{85}"), r#""\u00a0é\u0085""#);
        assert_eq!(go_quote("\u{7f}"), r#""\x7f""#);
        assert_eq!(go_quote("a\u{200b}\u{ad}\u{feff}\u{e000}"), r#""a\u200b\u00ad\ufeff\ue000""#);
    }

    #[test]
    fn values_are_printed_as_go_prints_decoded_json() {
        let patch = serde_json::json!({"spec": {"replicas": 2, "template": {"b": [1, "x", null],
            "a": true}}, "bogus": 1.5, "big": 1e6, "small": 0.00001, "mid": 123456.5});
        assert_eq!(
            go_print(&patch),
            "map[big:1e+06 bogus:1.5 mid:123456.5 small:1e-05 \
             spec:map[replicas:2 template:map[a:true b:[1 x <nil>]]]]"
        );
    }

    #[test]
    fn durations_are_written_as_go_writes_them() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(90 * 60 * 1_000_000_000), "1h30m0s");
        assert_eq!(go_duration(80 * 1_000_000_000), "1m20s");
        assert_eq!(go_duration(300 * 1_000_000_000), "5m0s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(2_000_000), "2ms");
        assert_eq!(go_duration(-1_000_000_000), "-1s");
    }

    #[test]
    fn agree_with_the_standard_comparisons() {
        let words = ["", "a", "ab", "b", "default", "kube-system", "ab\u{0}"];
        for a in words {
            for b in words {
                assert_eq!(same(a, b), a == b, "{a:?} == {b:?}");
                assert_eq!(order(a, b), a.cmp(b), "{a:?} cmp {b:?}");
                let (a, b) = (a.to_string(), b.to_string());
                assert_eq!(same(&a, &b), a == b);
                assert_eq!(order(&a, &b), a.cmp(&b));
            }
        }
    }
}
