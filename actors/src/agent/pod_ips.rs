//! Pod IPs: the node's pod CIDR (a /24 inside the cluster CIDR, all within 127.0.0.0/8 so
//! every pod can bind its own ports on one machine) and the addresses handed to pods in it.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::net::Ipv4Addr;

/// Picks a free /24 for `node` inside `cluster`, starting from a point derived from the node
/// name (so a node given one again, as after its deletion, mostly gets the same one) and
/// skipping those `taken`.
pub fn choose_node_cidr(
    cluster: (Ipv4Addr, u8),
    node: &str,
    taken: &HashSet<Ipv4Addr>,
) -> Option<(Ipv4Addr, u8)> {
    let (base, bits) = cluster;
    if bits > 24 {
        return None;
    }
    let count = 1u32 << (24 - bits);
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    node.hash(&mut hasher);
    let start = (hasher.finish() % u64::from(count)) as u32;
    (0..count)
        .map(|i| Ipv4Addr::from(u32::from(base) + (((start + i) % count) << 8)))
        .find(|net| !taken.contains(net))
        .map(|net| (net, 24))
}

/// The pod addresses of one node's /24: .2 to .254, each pod keeping its address until
/// released; freed addresses are reused last.
#[derive(Debug)]
pub struct PodIps {
    network: Ipv4Addr,
    by_pod: HashMap<String, Ipv4Addr>,
    used: HashSet<u8>,
    next: u8,
}

impl PodIps {
    pub fn new(network: Ipv4Addr) -> Self {
        Self { network, by_pod: HashMap::new(), used: HashSet::new(), next: 2 }
    }

    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The address of pod `uid`, allocating one if it has none. `None` when the range is full.
    pub fn allocate(&mut self, uid: &str) -> Option<Ipv4Addr> {
        if let Some(ip) = self.by_pod.get(uid) {
            return Some(*ip);
        }
        for _ in 2..=254u16 {
            let host = self.next;
            self.next = if self.next >= 254 { 2 } else { self.next + 1 };
            if self.used.insert(host) {
                let [a, b, c, _] = self.network.octets();
                let ip = Ipv4Addr::new(a, b, c, host);
                self.by_pod.insert(uid.to_string(), ip);
                return Some(ip);
            }
        }
        None
    }

    /// Records an address a pod already has (after an agent restart). False when it is not in
    /// this node's range or is held by another pod.
    pub fn reserve(&mut self, uid: &str, ip: Ipv4Addr) -> bool {
        let [a, b, c, host] = ip.octets();
        let [na, nb, nc, _] = self.network.octets();
        if (a, b, c) != (na, nb, nc) || !(2..=254).contains(&host) {
            return false;
        }
        if self.by_pod.get(uid) == Some(&ip) {
            return true;
        }
        if !self.used.insert(host) {
            return false;
        }
        self.by_pod.insert(uid.to_string(), ip);
        true
    }

    pub fn release(&mut self, uid: &str) {
        if let Some(ip) = self.by_pod.remove(uid) {
            self.used.remove(&ip.octets()[3]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cidr::parse as parse_cidr;

    #[test]
    fn cidrs_parse_and_nodes_get_distinct_ranges() {
        assert_eq!(parse_cidr("127.64.0.0/10"), Some((Ipv4Addr::new(127, 64, 0, 0), 10)));
        assert_eq!(parse_cidr("127.64.3.9/24"), Some((Ipv4Addr::new(127, 64, 3, 0), 24)));
        assert_eq!(parse_cidr("nope"), None);
        assert_eq!(parse_cidr("1.2.3.4/33"), None);
        let cluster = parse_cidr("127.64.0.0/10").unwrap();
        let mut taken = HashSet::new();
        for i in 0..100 {
            let (net, bits) = choose_node_cidr(cluster, &format!("n{i}"), &taken).unwrap();
            assert_eq!(bits, 24);
            assert_eq!(net.octets()[0], 127);
            assert!(taken.insert(net), "{net} handed out twice");
        }
        let tiny = parse_cidr("127.1.0.0/23").unwrap();
        let mut taken = HashSet::new();
        taken.insert(choose_node_cidr(tiny, "a", &taken).unwrap().0);
        taken.insert(choose_node_cidr(tiny, "b", &taken).unwrap().0);
        assert_eq!(choose_node_cidr(tiny, "c", &taken), None);
    }

    #[test]
    fn pod_ips_are_unique_stable_and_reusable() {
        let mut ips = PodIps::new(Ipv4Addr::new(127, 64, 5, 0));
        let a = ips.allocate("a").unwrap();
        assert_eq!(ips.allocate("a"), Some(a));
        let b = ips.allocate("b").unwrap();
        assert_ne!(a, b);
        assert!(!ips.reserve("c", b), "b's address is taken");
        assert!(ips.reserve("c", Ipv4Addr::new(127, 64, 5, 200)));
        assert!(!ips.reserve("d", Ipv4Addr::new(127, 64, 6, 7)), "outside the range");
        ips.release("a");
        let all: HashSet<_> = (0..251).filter_map(|i| ips.allocate(&format!("p{i}"))).collect();
        assert_eq!(all.len(), 251, "253 addresses minus those of b and c");
        assert_eq!(ips.allocate("one-too-many"), None);
    }
}
