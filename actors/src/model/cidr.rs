//! IPv4 ranges written `a.b.c.d/n`, as a network address and a prefix length: the cluster's
//! pod, service and load balancer ranges, a node's pod CIDR, a load balancer's source ranges.

use std::net::Ipv4Addr;

/// An IPv4 range: its network address (host bits cleared) and prefix length.
pub type Ipv4Cidr = (Ipv4Addr, u8);

/// Parses `a.b.c.d/n`, clearing the address's host bits.
pub fn parse(cidr: &str) -> Option<Ipv4Cidr> {
    let (ip, bits) = cidr.split_once('/')?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let bits: u8 = bits.parse().ok().filter(|b| *b <= 32)?;
    Some((Ipv4Addr::from(u32::from(ip) & mask(bits)), bits))
}

/// Whether `ip` is in the range `cidr` (as [`parse`] gives it).
pub fn contains((base, bits): Ipv4Cidr, ip: Ipv4Addr) -> bool {
    u32::from(ip) & mask(bits) == u32::from(base)
}

/// The first and last address of `cidr` (as [`parse`] gives it) that can be handed out:
/// without the network's own and its broadcast address, when it has more than two.
pub fn usable_range((base, bits): Ipv4Cidr) -> (u32, u32) {
    let first = u32::from(base);
    let last = first | !mask(bits);
    if last - first > 1 {
        (first + 1, last - 1)
    } else {
        (first, last)
    }
}

fn mask(bits: u8) -> u32 {
    if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_with_host_bits_cleared_and_contain_their_addresses() {
        let range = parse("10.1.2.3/8").unwrap();
        assert_eq!(range, (Ipv4Addr::new(10, 0, 0, 0), 8));
        assert!(contains(range, Ipv4Addr::new(10, 255, 0, 1)));
        assert!(!contains(range, Ipv4Addr::new(11, 0, 0, 1)));
        let everything = parse("0.0.0.0/0").unwrap();
        assert!(contains(everything, Ipv4Addr::new(127, 0, 0, 1)));
        assert_eq!(usable_range(parse("127.1.0.0/30").unwrap()), (0x7f01_0001, 0x7f01_0002));
        assert_eq!(parse("1.2.3.4/33"), None);
        assert_eq!(parse("::1/128"), None);
    }
}
