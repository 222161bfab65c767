//! The canonical layout of an Endpoints object's subsets, as Kubernetes keeps it: what the API
//! server stores for any writer (its strategy's `Canonicalize`) and what the endpoints
//! controller writes, and the controller's cap on how many addresses one object lists.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

/// The annotation that tells an Endpoints object lists only part of its addresses.
pub const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// How many addresses the endpoints controller lists in one object (Kubernetes' `maxCapacity`).
pub const MAX_ADDRESSES: usize = 1000;

/// An address's identity: its IP and the UID of what it targets.
type AddressKey = (String, String);

fn address_key(address: &Value) -> AddressKey {
    let ip = address.get("ip").and_then(Value::as_str).unwrap_or("");
    let uid = address.pointer("/targetRef/uid").and_then(Value::as_str).unwrap_or("");
    (ip.to_string(), uid.to_string())
}

/// `subsets` repacked as Kubernetes' `RepackSubsets` does: every port is offered by exactly one
/// subset, which holds every address offering it (an address appears once per set of ports it
/// offers), ports offered by the same addresses share a subset, an address is not ready for a
/// port when any subset listing it with that port says so, and a subset without ports keeps
/// its addresses. Addresses are sorted by IP, then target UID (one without a target first);
/// ports and subsets in an order of their own (Kubernetes orders them by hash), stable for the
/// same content.
pub fn repack(subsets: &[Value]) -> Vec<Value> {
    // The first of each address seen is the one listed.
    let mut addresses: BTreeMap<AddressKey, Value> = BTreeMap::new();
    // Each port (its JSON, `None` for a subset without ports) and the addresses offering it,
    // with their readiness.
    let mut offering: BTreeMap<Option<String>, BTreeMap<AddressKey, bool>> = BTreeMap::new();
    for subset in subsets {
        let ports: Vec<Option<String>> = match subset.get("ports").and_then(Value::as_array) {
            Some(ports) if !ports.is_empty() => {
                ports.iter().map(|port| Some(port.to_string())).collect()
            }
            _ => vec![None],
        };
        for (field, ready) in [("addresses", true), ("notReadyAddresses", false)] {
            for address in subset.get(field).and_then(Value::as_array).into_iter().flatten() {
                let key = address_key(address);
                addresses.entry(key.clone()).or_insert_with(|| address.clone());
                for port in &ports {
                    let readiness = offering.entry(port.clone()).or_default();
                    let was = readiness.entry(key.clone()).or_insert(ready);
                    *was &= ready;
                }
            }
        }
    }
    // Ports offered by the same addresses, alike ready, share a subset; a subset without
    // ports only when no port is offered by its addresses.
    let mut grouped: BTreeMap<Vec<(AddressKey, bool)>, Vec<Option<String>>> = BTreeMap::new();
    for (port, readiness) in offering {
        grouped.entry(readiness.into_iter().collect()).or_default().push(port);
    }
    grouped
        .into_iter()
        .map(|(members, ports)| {
            let mut subset = Map::new();
            let listed = |ready: bool| -> Vec<Value> {
                members
                    .iter()
                    .filter(|(_, r)| *r == ready)
                    .map(|(key, _)| addresses[key].clone())
                    .collect()
            };
            let (ready, not_ready) = (listed(true), listed(false));
            if !ready.is_empty() {
                subset.insert("addresses".into(), Value::Array(ready));
            }
            if !not_ready.is_empty() {
                subset.insert("notReadyAddresses".into(), Value::Array(not_ready));
            }
            let ports: Vec<Value> = ports
                .into_iter()
                .flatten()
                .map(|port| serde_json::from_str(&port).expect("written from a value"))
                .collect();
            if !ports.is_empty() {
                subset.insert("ports".into(), Value::Array(ports));
            }
            Value::Object(subset)
        })
        .collect()
}

/// Cuts `subsets` to [`MAX_ADDRESSES`] addresses, as Kubernetes' endpoints controller does:
/// ready addresses first, each subset keeping its share (rounded up, the last ones then
/// getting what is left). Whether anything was cut.
pub fn truncate(subsets: &mut [Value]) -> bool {
    let count = |subset: &Value, field: &str| {
        subset.get(field).and_then(Value::as_array).map_or(0, Vec::len)
    };
    let ready: usize = subsets.iter().map(|s| count(s, "addresses")).sum();
    let total: usize = ready + subsets.iter().map(|s| count(s, "notReadyAddresses")).sum::<usize>();
    if total <= MAX_ADDRESSES {
        return false;
    }
    let can_ready = ready.min(MAX_ADDRESSES);
    let can_not_ready = MAX_ADDRESSES - can_ready;
    let mut left = [can_ready, can_not_ready];
    let of_all = [ready, total - ready];
    for subset in subsets.iter_mut() {
        for (i, field) in ["addresses", "notReadyAddresses"].into_iter().enumerate() {
            let here = count(subset, field);
            let share = if of_all[i] == 0 {
                0
            } else {
                (here * [can_ready, can_not_ready][i]).div_ceil(of_all[i])
            };
            let keep = share.min(left[i]);
            left[i] -= keep;
            if let Some(list) = subset.get_mut(field).and_then(Value::as_array_mut) {
                list.truncate(keep);
            }
            if keep == 0 {
                subset.as_object_mut().map(|s| s.remove(field));
            }
        }
    }
    true
}

/// Marks `endpoints` as over capacity or not.
pub fn mark_capacity(endpoints: &mut Value, truncated: bool) {
    let Some(metadata) = endpoints.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if truncated {
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations[OVER_CAPACITY] = json!("truncated");
    } else if let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut)
    {
        annotations.remove(OVER_CAPACITY);
        if annotations.is_empty() {
            metadata.remove("annotations");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(ip: &str, uid: &str) -> Value {
        json!({"ip": ip, "targetRef": {"kind": "Pod", "name": uid, "uid": uid}})
    }

    fn port(name: &str, number: i64) -> Value {
        json!({"name": name, "port": number, "protocol": "TCP"})
    }

    #[test]
    fn each_port_is_in_one_subset_with_every_address_offering_it() {
        // pa offers a and b; pb and pc offer a only.
        let subsets = [
            json!({"addresses": [address("10.0.0.1", "pa")], "ports": [port("a", 80), port("b", 90)]}),
            json!({"addresses": [address("10.0.0.3", "pc"), address("10.0.0.2", "pb")],
                "ports": [port("a", 80)]}),
        ];
        let repacked = repack(&subsets);
        assert_eq!(repacked.len(), 2, "{repacked:?}");
        let with_port = |name: &str| {
            repacked
                .iter()
                .find(|s| s["ports"].as_array().unwrap().iter().any(|p| p["name"] == name))
                .unwrap()
        };
        let ips = |subset: &Value| -> Vec<String> {
            subset["addresses"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["ip"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(ips(with_port("a")), ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
        assert_eq!(ips(with_port("b")), ["10.0.0.1"]);
        assert_eq!(with_port("a")["ports"].as_array().unwrap().len(), 1);
        // Repacking is idempotent.
        assert_eq!(repack(&repacked), repacked);
    }

    #[test]
    fn same_ports_merge_not_ready_wins_and_portless_subsets_stay() {
        let subsets = [
            json!({"addresses": [address("10.0.0.2", "b")], "ports": [port("a", 80)]}),
            json!({"notReadyAddresses": [address("10.0.0.2", "b")], "addresses": [address("10.0.0.1", "a")],
                "ports": [port("a", 80)]}),
        ];
        let repacked = repack(&subsets);
        assert_eq!(repacked.len(), 1);
        assert_eq!(repacked[0]["addresses"], json!([address("10.0.0.1", "a")]));
        assert_eq!(repacked[0]["notReadyAddresses"], json!([address("10.0.0.2", "b")]));
        let portless = [json!({"addresses": [json!({"ip": "10.0.0.9"})]})];
        assert_eq!(repack(&portless), portless.to_vec());
        assert!(repack(&[json!({})]).is_empty());
    }

    #[test]
    fn truncation_keeps_ready_addresses_first_and_each_subsets_share() {
        let many = |prefix: &str, n: usize| -> Vec<Value> {
            (0..n).map(|i| address(&format!("{prefix}.{i}"), &format!("{prefix}{i}"))).collect()
        };
        let mut subsets = vec![
            json!({"addresses": many("10.1", 900), "notReadyAddresses": many("10.2", 100), "ports": [port("a", 80)]}),
            json!({"addresses": many("10.3", 300), "ports": [port("b", 90)]}),
        ];
        assert!(truncate(&mut subsets));
        let len = |s: &Value, f: &str| s.get(f).and_then(Value::as_array).map_or(0, Vec::len);
        // 1,000 of the 1,200 ready ones, in the subsets' proportions (750 + 250); no not-ready.
        assert_eq!(len(&subsets[0], "addresses"), 750);
        assert_eq!(len(&subsets[1], "addresses"), 250);
        assert_eq!(len(&subsets[0], "notReadyAddresses"), 0);
        let mut few = vec![json!({"addresses": many("10.1", 10), "ports": [port("a", 80)]})];
        assert!(!truncate(&mut few));
        let mut endpoints = json!({"metadata": {"name": "web"}});
        mark_capacity(&mut endpoints, true);
        assert_eq!(endpoints["metadata"]["annotations"][OVER_CAPACITY], "truncated");
        mark_capacity(&mut endpoints, false);
        assert!(endpoints["metadata"].get("annotations").is_none());
    }
}
