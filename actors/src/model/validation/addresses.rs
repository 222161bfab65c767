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
}
