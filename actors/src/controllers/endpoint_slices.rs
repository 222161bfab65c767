//! The EndpointSlices of a Service (discovery.k8s.io/v1), as Kubernetes' EndpointSlice
//! controller writes them, worked out and written by the endpoints controller beside the
//! service's Endpoints: one slice per set of ports of at most 100 endpoints, each pod an
//! endpoint with its address, `ready`/`serving`/`terminating` conditions, node and target;
//! terminating pods stay, marked so. Slices carry the service's labels,
//! `kubernetes.io/service-name` and `endpointslice.kubernetes.io/managed-by`, and the service
//! as their controlling owner; a service selecting nothing has one slice without endpoints.
//! `kubectl describe service` reads them.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Map, Value};

use super::endpoints::{listed, resolved_ports, service_labels};
use super::trigger_time;
use crate::client::cache::key_of;
use crate::client::{object_name, object_uid, ApiClient};
use crate::core::{ApiError, DeleteOptions, ListOptions};
use crate::model::{json, resources, ResourceType};

const SERVICE_NAME: &str = "kubernetes.io/service-name";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// Kubernetes' `--max-endpoints-per-slice` default.
const MAX_ENDPOINTS: usize = 100;
/// How many addresses of an Endpoints subset are mirrored (Kubernetes' mirroring limit).
const MAX_MIRRORED: usize = 1000;

/// Who keeps a set of slices: the slices of a service with a selector are worked out from
/// its pods and owned by the service; those of a service without one mirror the Endpoints
/// its user writes and are owned by them, as Kubernetes' EndpointSliceMirroring controller
/// keeps them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Keeper {
    FromPods,
    Mirroring,
}

impl Keeper {
    /// The `endpointslice.kubernetes.io/managed-by` of its slices.
    fn label(self) -> &'static str {
        match self {
            Keeper::FromPods => "endpointslice-controller.k8s.io",
            Keeper::Mirroring => "endpointslicemirroring-controller.k8s.io",
        }
    }
}

pub(super) fn slices() -> &'static ResourceType {
    resources::find("discovery.k8s.io", "v1", "endpointslices").expect("served")
}

/// What the slices read of the nodes: which exist, once they have been listed, and each
/// one's `topology.kubernetes.io/zone`.
#[derive(Default)]
pub(super) struct Nodes {
    listed: bool,
    zones: HashMap<String, Option<String>>,
}

impl Nodes {
    const ZONE: &'static str = "topology.kubernetes.io/zone";

    fn zone_of(node: &Value) -> Option<String> {
        let labels = json::at(node, "/metadata/labels").and_then(Value::as_object);
        let zone = labels.and_then(|l| l.get(Self::ZONE)).and_then(Value::as_str);
        // An empty label names no zone (Kubernetes' `podToEndpoint`).
        zone.filter(|zone| !zone.is_empty()).map(String::from)
    }

    /// Takes a full list of the nodes.
    pub(super) fn listed(&mut self, nodes: &[Value]) {
        self.listed = true;
        self.zones = nodes.iter().map(|n| (object_name(n).to_string(), Self::zone_of(n))).collect();
    }

    /// Takes an added or changed node; whether it is new.
    pub(super) fn changed(&mut self, node: &Value) -> bool {
        self.zones.insert(object_name(node).to_string(), Self::zone_of(node)).is_none()
    }

    /// Takes a deleted node.
    pub(super) fn deleted(&mut self, name: &str) {
        self.zones.remove(name);
    }

    fn missing(&self, node: &str) -> bool {
        self.listed && !self.zones.contains_key(node)
    }

    fn zone(&self, node: &str) -> Option<&str> {
        self.zones.get(node).and_then(Option::as_deref)
    }

    #[cfg(test)]
    pub(super) fn of(nodes: &[Value]) -> Self {
        let mut known = Self::default();
        known.listed(nodes);
        known
    }
}

/// The slices `service` should have, given the pods its selector matches: their content
/// (`endpoints`, `ports`, labels), without names.
pub(super) fn desired(service: &Value, pods: &[&Value], nodes: &Nodes) -> Vec<Value> {
    let (namespace, name) = key_of(service);
    let publish_not_ready =
        json::at(service, "/spec/publishNotReadyAddresses") == Some(&json!(true));
    let service_ports =
        json::at(service, "/spec/ports").and_then(Value::as_array).cloned().unwrap_or_default();
    // Ready endpoints are hinted to their own zone when the service prefers close ones.
    let prefer_close = json::at(service, "/spec/trafficDistribution").and_then(Value::as_str)
        == Some("PreferClose");
    let mut by_ports: BTreeMap<String, (Vec<Value>, Vec<Value>)> = BTreeMap::new();
    for pod in pods.iter().filter(|pod| listed(pod, true)) {
        // A pod on a node that does not exist is left out (unless the service publishes
        // every address), as Kubernetes' reconciler does, so that a missing node's pods do
        // not stay in the slices until they are collected.
        let node = json::at(pod, "/spec/nodeName").and_then(Value::as_str);
        if !publish_not_ready && node.is_some_and(|node| nodes.missing(node)) {
            continue;
        }
        // In the service's order; a pod none of them resolves on is in a slice without ports,
        // as Kubernetes' reconciler groups it (the Endpoints leave it out).
        let ports = resolved_ports(pod, &service_ports);
        let terminating =
            json::at(pod, "/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        let serving = crate::model::is_ready(pod);
        let mut endpoint = json!({"addresses": [pod["status"]["podIP"]],
            "conditions": {"ready": publish_not_ready || (serving && !terminating),
                "serving": serving, "terminating": terminating},
            "targetRef": {"kind": "Pod", "namespace": namespace, "name": object_name(pod),
                "uid": object_uid(pod)}});
        if let Some(node) = node {
            endpoint["nodeName"] = json!(node);
            // Its node's zone, as Kubernetes' controller copies it.
            if let Some(zone) = nodes.zone(node) {
                endpoint["zone"] = json!(zone);
                if prefer_close && endpoint["conditions"]["ready"] == true {
                    endpoint["hints"] = json!({"forZones": [{"name": zone}]});
                }
            }
        }
        let hostname = json::at(pod, "/spec/hostname").and_then(Value::as_str).unwrap_or("");
        if !hostname.is_empty()
            && json::at(pod, "/spec/subdomain").and_then(Value::as_str) == Some(name.as_str())
        {
            endpoint["hostname"] = json!(hostname);
        }
        // A slice's ports always have a name, empty when the service port has none.
        let ports: Vec<Value> = ports
            .into_iter()
            .map(|mut p| {
                if p.get("name").is_none() {
                    p["name"] = json!("");
                }
                p
            })
            .collect();
        let key = Value::Array(ports.clone()).to_string();
        by_ports.entry(key).or_insert_with(|| (ports, Vec::new())).1.push(endpoint);
    }
    let mut labels = service_labels(service);
    labels[SERVICE_NAME] = json!(name);
    labels[MANAGED_BY] = json!(Keeper::FromPods.label());
    let slice = |ports: Option<&Vec<Value>>, endpoints: &[Value]| {
        let mut slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"labels": labels}, "addressType": "IPv4"});
        // Empty lists are left out, as the server stores them.
        if !endpoints.is_empty() {
            slice["endpoints"] = json!(endpoints);
        }
        if let Some(ports) = ports.filter(|p| !p.is_empty()) {
            slice["ports"] = json!(ports);
        }
        slice
    };
    if by_ports.is_empty() {
        return vec![slice(None, &[])];
    }
    let mut slices = Vec::new();
    for (ports, mut endpoints) in by_ports.into_values() {
        endpoints.sort_by(|a, b| a["addresses"][0].as_str().cmp(&b["addresses"][0].as_str()));
        slices.extend(endpoints.chunks(MAX_ENDPOINTS).map(|chunk| slice(Some(&ports), chunk)));
    }
    slices
}

/// The slices that mirror `endpoints` (a service's without a selector): one per subset and
/// address family (its first 1,000 addresses, not-ready ones not ready; an address that is
/// no IP is left out), with the Endpoints' labels and annotations, as Kubernetes' mirroring
/// writes them; none for Endpoints labelled `endpointslice.kubernetes.io/skip-mirror: "true"`
/// or holding a leader election's record.
pub(super) fn mirrored(endpoints: &Value) -> Vec<Value> {
    let (_, name) = key_of(endpoints);
    let mut labels = json::at(endpoints, "/metadata/labels").cloned().unwrap_or(json!({}));
    // Not those marked to be skipped, nor the leader election's record of a component that
    // still elects through Endpoints (Kubernetes' `shouldMirror`).
    let leader = json::at(endpoints, "/metadata/annotations")
        .is_some_and(|a| a.get("control-plane.alpha.kubernetes.io/leader").is_some());
    if labels.get("endpointslice.kubernetes.io/skip-mirror") == Some(&json!("true")) || leader {
        return Vec::new();
    }
    labels[SERVICE_NAME] = json!(name);
    labels[MANAGED_BY] = json!(Keeper::Mirroring.label());
    let annotations = mirrored_annotations(endpoints);
    let subsets = json::at(endpoints, "/subsets").and_then(Value::as_array);
    let mut slices = Vec::new();
    for subset in subsets.into_iter().flatten() {
        let mut families: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
        let mut mirrored = 0;
        for (field, ready) in [("addresses", true), ("notReadyAddresses", false)] {
            for address in subset.get(field).and_then(Value::as_array).into_iter().flatten() {
                let ip = address.get("ip").and_then(Value::as_str).unwrap_or("");
                let family = match ip.parse::<std::net::IpAddr>() {
                    Ok(std::net::IpAddr::V4(_)) => "IPv4",
                    Ok(std::net::IpAddr::V6(_)) => "IPv6",
                    Err(_) => continue,
                };
                if mirrored == MAX_MIRRORED {
                    break;
                }
                mirrored += 1;
                let mut endpoint = json!({"addresses": [ip], "conditions": {"ready": ready}});
                for field in ["targetRef", "nodeName"] {
                    if let Some(value) = address.get(field).filter(|v| !v.is_null()) {
                        endpoint[field] = value.clone();
                    }
                }
                let hostname = address.get("hostname").and_then(Value::as_str);
                if let Some(hostname) = hostname.filter(|h| !h.is_empty()) {
                    endpoint["hostname"] = json!(hostname);
                }
                families.entry(family).or_default().push(endpoint);
            }
        }
        let ports: Vec<Value> = (subset.get("ports").and_then(Value::as_array).into_iter())
            .flatten()
            .map(|port| {
                let mut mirrored = json!({"name": port.get("name").cloned().unwrap_or(json!("")),
                    "port": port["port"], "protocol": port.get("protocol").cloned()
                        .unwrap_or(json!("TCP"))});
                if let Some(app) = port.get("appProtocol").filter(|a| !a.is_null()) {
                    mirrored["appProtocol"] = app.clone();
                }
                mirrored
            })
            .collect();
        if families.is_empty() {
            families.insert("IPv4", Vec::new());
        }
        for (family, endpoints) in families {
            let mut slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"labels": labels}, "addressType": family});
            if !annotations.is_empty() {
                slice["metadata"]["annotations"] = Value::Object(annotations.clone());
            }
            if !endpoints.is_empty() {
                slice["endpoints"] = json!(endpoints);
            }
            if !ports.is_empty() {
                slice["ports"] = json!(ports);
            }
            slices.push(slice);
        }
    }
    slices
}

/// The annotations of `object` a mirroring slice carries: all but the time of the last change
/// and kubectl's last applied configuration.
fn mirrored_annotations(object: &Value) -> Map<String, Value> {
    let annotations = json::at(object, "/metadata/annotations").and_then(Value::as_object);
    let skipped = [trigger_time::ANNOTATION, "kubectl.kubernetes.io/last-applied-configuration"];
    annotations
        .into_iter()
        .flatten()
        .filter(|(key, _)| !skipped.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// The service a slice is kept for, when it is one of the controller's (either keeper's).
pub(super) fn service_of(slice: &Value) -> Option<&str> {
    let labels = json::at(slice, "/metadata/labels")?;
    let managed = labels.get(MANAGED_BY).and_then(Value::as_str)?;
    if ![Keeper::FromPods, Keeper::Mirroring].iter().any(|k| k.label() == managed) {
        return None;
    }
    labels.get(SERVICE_NAME).and_then(Value::as_str)
}

/// The slices `keeper` keeps for service `name`.
async fn current(
    client: &dyn ApiClient,
    keeper: Keeper,
    namespace: &str,
    name: &str,
) -> Result<Vec<Value>, ApiError> {
    let options = ListOptions {
        label_selector: Some(format!("{SERVICE_NAME}={name},{MANAGED_BY}={}", keeper.label())),
        ..ListOptions::default()
    };
    let mut items = client.list(slices(), Some(namespace), &options).await?.items;
    items.sort_by(|a, b| object_name(a).cmp(object_name(b)));
    Ok(items)
}

/// What a write left a service's slices as: each one's name and `metadata.generation`, for
/// the controller to tell its own writes from others' (Kubernetes' `endpointSliceTracker`).
pub(super) type Written = Vec<(String, i64)>;

/// The name and generation of a slice as it is stored.
fn written(slice: &Value) -> (String, i64) {
    let generation = json::at(slice, "/metadata/generation").and_then(Value::as_i64);
    (object_name(slice).to_string(), generation.unwrap_or(0))
}

/// Makes the slices `keeper` keeps for `owner` (the service, or the Endpoints mirrored)
/// `desired`, as Kubernetes' reconciler does: a slice with the same ports is updated in place
/// when its endpoints or labels differ; a slice left over takes the content of one that
/// would be created (its name kept: a delete and a create become an update); the rest are
/// created (named after the service, owned by `owner`) or deleted.
pub(super) async fn write(
    client: &dyn ApiClient,
    keeper: Keeper,
    owner: &Value,
    desired: Vec<Value>,
) -> Result<Written, ApiError> {
    let (namespace, name) = key_of(owner);
    let listed = current(client, keeper, &namespace, &name).await?;
    // Slices being deleted are left to go; those `owner` does not own (an earlier service's
    // of its name, someone else's with the labels) are replaced, as Kubernetes' reconciler
    // keeps only the slices its service owns.
    let owned = |slice: &Value| {
        let owners = json::at(slice, "/metadata/ownerReferences").and_then(Value::as_array);
        owners.into_iter().flatten().any(|o| o["uid"] == object_uid(owner))
    };
    let (mut existing, foreign): (Vec<Value>, Vec<Value>) = listed
        .into_iter()
        .filter(|slice| !crate::model::is_being_deleted(slice))
        .partition(|slice| owned(slice));
    // Not while the owner is being deleted: an orphaning delete's collector takes the owner
    // reference off the slices before the owner goes, and they are to stay.
    let leaving = crate::model::is_being_deleted(owner);
    for slice in foreign.iter().filter(|_| !leaving) {
        delete(client, &namespace, slice).await?;
    }
    let mut unmatched = Vec::new();
    let mut kept = Written::new();
    for want in desired {
        let alike = |s: &Value| {
            s.get("ports") == want.get("ports") && s["addressType"] == want["addressType"]
        };
        match existing.iter().position(alike) {
            Some(at) => {
                kept.push(update(client, keeper, &namespace, existing.remove(at), want).await?)
            }
            None => unmatched.push(want),
        }
    }
    for mut want in unmatched {
        // (A slice's address type cannot change.)
        if let Some(at) = existing.iter().position(|s| s["addressType"] == want["addressType"]) {
            kept.push(update(client, keeper, &namespace, existing.remove(at), want).await?);
            continue;
        }
        // None made for an owner being deleted, which the garbage collector would race
        // (Kubernetes' reconciler makes none either).
        if leaving {
            continue;
        }
        want["metadata"]["generateName"] = json!(format!("{name}-"));
        let kind = match keeper {
            Keeper::FromPods => "Service",
            Keeper::Mirroring => "Endpoints",
        };
        want["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1",
            "kind": kind, "name": name, "uid": object_uid(owner),
            "controller": true, "blockOwnerDeletion": true}]);
        kept.push(written(&client.create(slices(), &namespace, want).await?));
    }
    for extra in existing {
        delete(client, &namespace, &extra).await?;
    }
    Ok(kept)
}

/// Gives slice `have` the endpoints, ports and labels of `want` (and, for a mirroring slice,
/// its annotations), unless it has them.
async fn update(
    client: &dyn ApiClient,
    keeper: Keeper,
    namespace: &str,
    mut have: Value,
    mut want: Value,
) -> Result<(String, i64), ApiError> {
    let labels = |s: &Value| json::at(s, "/metadata/labels").cloned();
    let same = |field: &str| have.get(field) == want.get(field);
    let mirroring = keeper == Keeper::Mirroring;
    let same_annotations = !mirroring || mirrored_annotations(&have) == mirrored_annotations(&want);
    if same("endpoints") && same("ports") && labels(&have) == labels(&want) && same_annotations {
        return Ok(written(&have));
    }
    if mirroring {
        let annotations = mirrored_annotations(&want);
        match annotations.is_empty() {
            true => _ = have["metadata"].as_object_mut().map(|m| m.remove("annotations")),
            false => have["metadata"]["annotations"] = Value::Object(annotations),
        }
    }
    for field in ["endpoints", "ports"] {
        match want.as_object_mut().and_then(|w| w.remove(field)) {
            Some(value) => have[field] = value,
            None => _ = have.as_object_mut().map(|h| h.remove(field)),
        }
    }
    have["metadata"]["labels"] = want["metadata"]["labels"].take();
    trigger_time::annotate(&mut have, trigger_time::annotation(&want));
    client.update(slices(), namespace, have).await.map(|slice| written(&slice))
}

/// Deletes the slices of service `name` (gone).
pub(super) async fn delete_all(
    client: &dyn ApiClient,
    keeper: Keeper,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    for slice in current(client, keeper, namespace, name).await? {
        delete(client, namespace, &slice).await?;
    }
    Ok(())
}

async fn delete(client: &dyn ApiClient, namespace: &str, slice: &Value) -> Result<(), ApiError> {
    let options = DeleteOptions::default();
    match client.delete(slices(), namespace, object_name(slice), &options).await {
        Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_carries_its_nodes_zone() {
        let service = json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}});
        let pod = |name: &str, node: &str| {
            json!({"metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {"nodeName": node, "containers": [{"name": "c"}]},
                "status": {"phase": "Running", "podIP": format!("127.0.0.{}", node.len()),
                    "conditions": [{"type": "Ready", "status": "True"}]}})
        };
        let (zoned, plain, blank) = (pod("a", "n-zoned"), pod("b", "n"), pod("c", "n-blank"));
        let nodes = Nodes::of(&[
            json!({"metadata": {"name": "n-zoned", "labels": {"topology.kubernetes.io/zone": "za"}}}),
            json!({"metadata": {"name": "n"}}),
            json!({"metadata": {"name": "n-blank", "labels": {"topology.kubernetes.io/zone": ""}}}),
        ]);
        let slices = desired(&service, &[&zoned, &plain, &blank], &nodes);
        let endpoints = slices[0]["endpoints"].as_array().unwrap();
        let zone_of = |name: &str| {
            let endpoint = endpoints.iter().find(|e| e["targetRef"]["name"] == name).unwrap();
            endpoint.get("zone").cloned()
        };
        assert_eq!(zone_of("a"), Some(json!("za")));
        assert_eq!(zone_of("b"), None);
        assert_eq!(zone_of("c"), None, "an empty label names no zone");
    }

    #[test]
    fn a_pod_without_the_named_port_is_in_a_slice_without_ports() {
        let service = json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [
                {"name": "web", "port": 80, "targetPort": "http"},
                {"name": "alt", "port": 81, "targetPort": 8081}]}});
        let pod = |name: &str, ports: Value| {
            json!({"metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {"containers": [{"name": "c", "ports": ports}]},
                "status": {"phase": "Running", "podIP": "127.0.0.9",
                    "conditions": [{"type": "Ready", "status": "True"}]}})
        };
        let named = pod("named", json!([{"name": "http", "containerPort": 9000}]));
        let unnamed = pod("unnamed", json!([]));
        let slices = desired(&service, &[&named, &unnamed], &Nodes::default());
        let ports_of = |pod: &str| {
            let slice = slices.iter().find(|s| s["endpoints"][0]["targetRef"]["name"] == pod);
            slice.expect("a slice of its own")["ports"].clone()
        };
        // In the service's order, not sorted; the named one resolved on the pod declaring it.
        let web = json!({"name": "web", "port": 9000, "protocol": "TCP"});
        let alt = json!({"name": "alt", "port": 8081, "protocol": "TCP"});
        assert_eq!(ports_of("named"), json!([web, alt]));
        assert_eq!(ports_of("unnamed"), json!([alt]));
        // None resolves: a slice without ports.
        let only_named = json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "web", "port": 80, "targetPort": "http"}]}});
        let slices = desired(&only_named, &[&unnamed], &Nodes::default());
        assert_eq!(slices.len(), 1);
        assert!(slices[0].get("ports").is_none(), "{}", slices[0]);
        assert_eq!(slices[0]["endpoints"][0]["targetRef"]["name"], "unnamed");
    }

    #[test]
    fn pods_of_missing_nodes_are_left_out_and_close_ones_hinted() {
        let service = |extra: Value| {
            let mut service = json!({"metadata": {"name": "web", "namespace": "default"},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}});
            service["spec"].as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            service
        };
        let pod = |name: &str, node: &str, ready: &str| {
            json!({"metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {"nodeName": node, "containers": [{"name": "c"}]},
                "status": {"phase": "Running", "podIP": format!("127.0.0.{}", name.len()),
                    "conditions": [{"type": "Ready", "status": ready}]}})
        };
        let nodes = Nodes::of(&[json!({"metadata": {"name": "n",
            "labels": {"topology.kubernetes.io/zone": "za"}}})]);
        let (here, gone, slow) =
            (pod("a", "n", "True"), pod("bb", "gone", "True"), pod("ccc", "n", "False"));
        let names = |slices: &[Value]| -> Vec<String> {
            let endpoints = slices[0]["endpoints"].as_array().unwrap();
            endpoints.iter().map(|e| e["targetRef"]["name"].as_str().unwrap().to_string()).collect()
        };
        let plain = desired(&service(json!({})), &[&here, &gone, &slow], &nodes);
        assert_eq!(names(&plain), ["a", "ccc"]);
        assert!(plain[0]["endpoints"][0].get("hints").is_none());
        // Until the nodes are listed, none is missing.
        let unlisted = desired(&service(json!({})), &[&here, &gone], &Nodes::default());
        assert_eq!(names(&unlisted), ["a", "bb"]);
        let published = json!({"publishNotReadyAddresses": true});
        assert_eq!(names(&desired(&service(published), &[&here, &gone], &nodes)), ["a", "bb"]);
        let close = desired(
            &service(json!({"trafficDistribution": "PreferClose"})),
            &[&here, &slow],
            &nodes,
        );
        assert_eq!(close[0]["endpoints"][0]["hints"], json!({"forZones": [{"name": "za"}]}));
        assert!(close[0]["endpoints"][1].get("hints").is_none(), "not ready: no hint");
    }

    #[test]
    fn mirrored_slices_split_by_family_and_carry_the_annotations() {
        let endpoints = json!({"metadata": {"name": "ext", "namespace": "default",
                "labels": {"team": "blue"},
                "annotations": {"note": "x", "endpoints.kubernetes.io/last-change-trigger-time": "t",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "subsets": [{"addresses": [{"ip": "fd00::5"}, {"ip": "127.0.0.7"}, {"ip": "not-an-ip"}],
                "notReadyAddresses": [{"ip": "127.0.0.8"}],
                "ports": [{"port": 80, "protocol": "TCP"}]}]});
        let slices = mirrored(&endpoints);
        assert_eq!(slices.len(), 2, "{slices:?}");
        let of = |family: &str| slices.iter().find(|s| s["addressType"] == family).unwrap();
        assert_eq!(
            of("IPv6")["endpoints"],
            json!([{"addresses": ["fd00::5"], "conditions": {"ready": true}}])
        );
        let v4: Vec<&Value> = of("IPv4")["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| &e["addresses"][0])
            .collect();
        assert_eq!(v4, [&json!("127.0.0.7"), &json!("127.0.0.8")]);
        for slice in &slices {
            assert_eq!(slice["metadata"]["annotations"], json!({"note": "x"}));
            assert_eq!(slice["metadata"]["labels"]["team"], "blue");
        }
        // A leader election's record is not mirrored, nor Endpoints marked to be skipped.
        let mut leader = endpoints.clone();
        leader["metadata"]["annotations"]["control-plane.alpha.kubernetes.io/leader"] = json!("{}");
        assert!(mirrored(&leader).is_empty());
        let mut skipped = endpoints;
        skipped["metadata"]["labels"]["endpointslice.kubernetes.io/skip-mirror"] = json!("true");
        assert!(mirrored(&skipped).is_empty());
    }
}
