//! IP addresses and CIDRs as Kubernetes' validation reads them: Go's parser before 1.17, which
//! takes IPv4 parts with leading zeros (`010.1.1.1`), and its messages.

use std::net::{IpAddr, Ipv4Addr};

use super::FieldError;

const IP_MESSAGE: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
const CIDR_MESSAGE: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// `text` as an address, as Kubernetes' `ParseIPSloppy` reads it.
pub(super) fn parse_ip(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    let mut octets = [0u8; 4];
    let mut parts = text.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *octet = part.parse::<u64>().ok().filter(|n| *n <= 255)? as u8;
    }
    parts.next().is_none().then_some(IpAddr::V4(Ipv4Addr::from(octets)))
}

/// An IP address (Kubernetes' `IsValidIP`).
pub(super) fn validate_ip(ip: &str, field: impl FnOnce() -> String, errors: &mut Vec<FieldError>) {
    if parse_ip(ip).is_none() {
        errors.push(FieldError::invalid(field(), ip, IP_MESSAGE));
    }
}

/// A CIDR (Kubernetes' `IsValidCIDR`: any address of the network, `10.0.0.1/24` too).
pub(super) fn validate_cidr(
    cidr: &str,
    field: impl FnOnce() -> String,
    errors: &mut Vec<FieldError>,
) {
    let valid = cidr.split_once('/').is_some_and(|(ip, bits)| {
        let most = match parse_ip(ip) {
            Some(IpAddr::V4(_)) => 32,
            Some(IpAddr::V6(_)) => 128,
            None => return false,
        };
        !bits.is_empty()
            && bits.bytes().all(|b| b.is_ascii_digit())
            && bits.parse::<u32>().is_ok_and(|n| n <= most)
    });
    if !valid {
        errors.push(FieldError::invalid(field(), cidr, CIDR_MESSAGE));
    }
}

/// An address that is not one of the special ranges (Kubernetes' `ValidateNonSpecialIP`),
/// but for loopback: kplane's pods, services and load balancers live on loopback addresses.
pub(super) fn validate_non_special_ip(
    ip: IpAddr,
    text: &str,
    field: impl Fn() -> String,
    errors: &mut Vec<FieldError>,
) {
    if ip.is_unspecified() {
        errors.push(FieldError::invalid(field(), text, format!("may not be unspecified ({text})")));
    }
    let (link_local, link_local_multicast) = match ip {
        IpAddr::V4(v4) => (v4.is_link_local(), v4.octets()[..3] == [224, 0, 0]),
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            (first & 0xffc0 == 0xfe80, first & 0xff0f == 0xff02)
        }
    };
    if link_local {
        let message = "may not be in the link-local range (169.254.0.0/16, fe80::/10)";
        errors.push(FieldError::invalid(field(), text, message));
    }
    if link_local_multicast {
        let message = "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)";
        errors.push(FieldError::invalid(field(), text, message));
    }
}

/// Why Go's strict parser (`netip.ParseAddr`, which Kubernetes' warnings use) refuses `text`,
/// in its words; `None` when it takes it. It refuses leading zeros, which `parse_ip` takes.
pub(super) fn strict_ip_error(text: &str) -> Option<String> {
    let refused = |msg: &str, at: Option<&str>| {
        let at = at.map(|at| format!(" (at {})", go_quote(at))).unwrap_or_default();
        Some(format!("ParseAddr({}): {msg}{at}", go_quote(text)))
    };
    match text.bytes().find(|b| matches!(b, b'.' | b':' | b'%')) {
        Some(b'.') => ipv4_fields_error(text).and_then(|(msg, at)| refused(msg, at)),
        Some(b':') => ipv6_error(text).and_then(|(msg, at)| refused(msg, at)),
        Some(_) => refused("missing IPv6 address", None),
        None => refused("unable to parse IP", None),
    }
}

/// Kubernetes' warning for an address a field took that Go's strict parser would not, or an
/// IPv6 one not written as RFC 5952 would write it (`getWarningsForIP`).
pub(super) fn ip_warning(field: &str, text: &str) -> Option<String> {
    if let Some(error) = strict_ip_error(text) {
        return Some(format!(
            "{field}: IP address was accepted, but will be invalid in a future Kubernetes \
             release: {error}"
        ));
    }
    let canonical = text.parse::<std::net::Ipv6Addr>().ok()?.to_string();
    not_canonical(field, "address", text, &canonical)
}

/// The same for a network (`getWarningsForCIDR`, Go's `netip.ParsePrefix`).
pub(super) fn cidr_warning(field: &str, text: &str) -> Option<String> {
    let refused = |msg: String| {
        Some(format!(
            "{field}: IP prefix was accepted, but will be invalid in a future Kubernetes \
             release: netip.ParsePrefix({}): {msg}",
            go_quote(text)
        ))
    };
    let Some((address, bits)) = text.rsplit_once('/') else { return refused("no '/'".into()) };
    if let Some(error) = strict_ip_error(address) {
        return refused(error);
    }
    let v6 = address.contains(':');
    if v6 && address.contains('%') {
        return refused("IPv6 zones cannot be present in a prefix".into());
    }
    let signed_or_padded = bits.len() > 1 && !(b'1'..=b'9').contains(&bits.as_bytes()[0]);
    let Some(length) = bits.parse::<u32>().ok().filter(|_| !signed_or_padded) else {
        return refused(format!("bad bits after slash: {}", go_quote(bits)));
    };
    if length > if v6 { 128 } else { 32 } {
        return refused("prefix length out of range".into());
    }
    let canonical = format!("{}/{length}", address.parse::<std::net::Ipv6Addr>().ok()?);
    not_canonical(field, "prefix", text, &canonical)
}

/// The warning for IPv6 `text` (an `address` or a `prefix`) not written as `canonical`.
fn not_canonical(field: &str, what: &str, text: &str, canonical: &str) -> Option<String> {
    (canonical != text).then(|| {
        format!(
            "{field}: IPv6 {what} {} is not in RFC 5952 canonical format ({}), which may cause \
             controller apply-loops",
            go_quote(text),
            go_quote(canonical)
        )
    })
}

/// Go's `strconv.Quote` of text that is plain ASCII, as an address's is (others escaped).
fn go_quote(text: &str) -> String {
    format!("{text:?}")
}

/// A dotted IPv4 address's fault, with where it is: Go's `parseIPv4Fields`.
fn ipv4_fields_error(s: &str) -> Option<(&'static str, Option<&str>)> {
    let bytes = s.as_bytes();
    let (mut value, mut digits, mut fields) = (0u32, 0, 0);
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'0'..=b'9' => {
                if digits == 1 && value == 0 {
                    return Some(("IPv4 field has octet with leading zero", None));
                }
                value = value * 10 + u32::from(b - b'0');
                digits += 1;
                if value > 255 {
                    return Some(("IPv4 field has value >255", None));
                }
            }
            b'.' => {
                if i == 0 || i == bytes.len() - 1 || bytes[i - 1] == b'.' {
                    return Some(("IPv4 field must have at least one digit", Some(&s[i..])));
                }
                if fields == 3 {
                    return Some(("IPv4 address too long", None));
                }
                fields += 1;
                (value, digits) = (0, 0);
            }
            _ => return Some(("unexpected character", Some(&s[i..]))),
        }
    }
    (fields < 3).then_some(("IPv4 address too short", None))
}

/// An IPv6 address's fault, with where it is: Go's `parseIPv6`.
fn ipv6_error(text: &str) -> Option<(&'static str, Option<&str>)> {
    let mut s = text;
    if let Some(i) = text.find('%') {
        if text[i + 1..].is_empty() {
            return Some(("zone must be a non-empty string", None));
        }
        s = &text[..i];
    }
    let mut ellipsis = None;
    if s.starts_with("::") {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return None;
        }
    }
    let mut filled = 0;
    while filled < 16 {
        let hex = s.bytes().take_while(u8::is_ascii_hexdigit).count();
        if hex > 4 {
            // Go notices at the fifth digit, before the value's size.
            return Some(("each group must have 4 or less digits", Some(s)));
        }
        if hex == 0 {
            return Some(("each colon-separated field must have at least one digit", Some(s)));
        }
        if s.as_bytes().get(hex) == Some(&b'.') {
            if ellipsis.is_none() && filled != 12 {
                let msg = "embedded IPv4 address must replace the final 2 fields of the address";
                return Some((msg, Some(s)));
            }
            if filled + 4 > 16 {
                let msg = "too many hex fields to fit an embedded IPv4 at the end of the address";
                return Some((msg, Some(s)));
            }
            if let Some(fault) = ipv4_fields_error(s) {
                return Some(fault);
            }
            s = "";
            filled += 4;
            break;
        }
        filled += 2;
        s = &s[hex..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return Some(("unexpected character, want colon", Some(s)));
        }
        if s.len() == 1 {
            return Some(("colon must be followed by more characters", Some(s)));
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return Some(("multiple :: in address", Some(s)));
            }
            ellipsis = Some(filled);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Some(("trailing garbage after address", Some(s)));
    }
    match (filled < 16, ellipsis.is_some()) {
        (true, false) => Some(("address string too short", None)),
        (false, true) => Some(("the :: must expand to at least one field of zeros", None)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(check: impl FnOnce(&mut Vec<FieldError>)) -> Vec<String> {
        let mut errors = Vec::new();
        check(&mut errors);
        errors.into_iter().map(|e| e.message).collect()
    }

    #[test]
    fn addresses_and_networks_are_read_as_kubernetes_reads_them() {
        assert_eq!(parse_ip("010.1.2.3"), Some("10.1.2.3".parse().unwrap()));
        assert_eq!(parse_ip("::1"), Some("::1".parse().unwrap()));
        for bad in ["", "1.2.3", "1.2.3.4.5", "1.2.3.256", "bogus", "1.2.3.-4"] {
            assert_eq!(parse_ip(bad), None, "{bad}");
        }
        for good in ["10.0.0.0/8", "10.0.0.1/24", "2001:db8::/64", "0.0.0.0/0"] {
            assert!(problems(|e| validate_cidr(good, || "f".into(), e)).is_empty(), "{good}");
        }
        for bad in ["bogus", "10.0.0.0", "10.0.0.0/33", "10.0.0.0/", "::/129", "10.0.0.0/+8"] {
            let found = problems(|e| validate_cidr(bad, || "f".into(), e));
            assert!(found.len() == 1 && found[0].ends_with(CIDR_MESSAGE), "{bad}: {found:?}");
        }
        let special = |text: &str| {
            problems(|e| validate_non_special_ip(parse_ip(text).unwrap(), text, || "f".into(), e))
        };
        assert_eq!(
            special("0.0.0.0"),
            ["Invalid value: \"0.0.0.0\": may not be unspecified (0.0.0.0)"]
        );
        assert_eq!(special("169.254.1.1").len(), 1);
        assert_eq!(special("224.0.0.251").len(), 1);
        assert_eq!(special("fe80::1").len(), 1);
        assert!(special("127.0.0.1").is_empty() && special("10.1.2.3").is_empty());
    }

    #[test]
    fn addresses_go_s_strict_parser_refuses_are_named_in_its_words() {
        let cases = [
            ("192.012.2.2", Some("ParseAddr(\"192.012.2.2\"): IPv4 field has octet with leading zero")),
            ("abc", Some("ParseAddr(\"abc\"): unable to parse IP")),
            ("1.2.3", Some("ParseAddr(\"1.2.3\"): IPv4 address too short")),
            ("1.2..3", Some("ParseAddr(\"1.2..3\"): IPv4 field must have at least one digit (at \".3\")")),
            ("1.2.3.4:80", Some("ParseAddr(\"1.2.3.4:80\"): unexpected character (at \":80\")")),
            ("1:2", Some("ParseAddr(\"1:2\"): address string too short")),
            ("1::2::3", Some("ParseAddr(\"1::2::3\"): multiple :: in address (at \":3\")")),
            ("12345::", Some("ParseAddr(\"12345::\"): each group must have 4 or less digits (at \"12345::\")")),
            ("%eth0", Some("ParseAddr(\"%eth0\"): missing IPv6 address")),
            ("10.1.2.3", None),
            ("::ffff:1.2.3.4", None),
            ("2001:db8::1", None),
        ];
        for (text, expected) in cases {
            assert_eq!(strict_ip_error(text).as_deref(), expected, "{text}");
        }
        assert_eq!(
            ip_warning("spec.loadBalancerIP", "2001:db8:0:0::2").as_deref(),
            Some(
                "spec.loadBalancerIP: IPv6 address \"2001:db8:0:0::2\" is not in RFC 5952 \
                 canonical format (\"2001:db8::2\"), which may cause controller apply-loops"
            )
        );
        assert_eq!(ip_warning("f", "10.0.0.1"), None);
        assert_eq!(
            cidr_warning("r[0]", "010.0.0.0/8").as_deref(),
            Some(
                "r[0]: IP prefix was accepted, but will be invalid in a future Kubernetes release: \
                 netip.ParsePrefix(\"010.0.0.0/8\"): ParseAddr(\"010.0.0.0\"): IPv4 field has \
                 octet with leading zero"
            )
        );
        assert!(cidr_warning("r", "2001:db8:0::/64").unwrap().contains("(\"2001:db8::/64\")"));
        assert_eq!(cidr_warning("r", "10.0.0.0/8"), None);
        assert_eq!(cidr_warning("r", "2001:db8::/64"), None);
    }
}
