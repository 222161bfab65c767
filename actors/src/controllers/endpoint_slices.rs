//! The EndpointSlices of a Service (discovery.k8s.io/v1), as Kubernetes' EndpointSlice
//! controller writes them, worked out and written by the endpoints controller beside the
//! service's Endpoints: one slice per set of ports of at most 100 endpoints, each pod an
//! endpoint with its address, `ready`/`serving`/`terminating` conditions, node and target;
//! terminating pods stay, marked so. Slices carry the service's labels,
//! `kubernetes.io/service-name` and `endpointslice.kubernetes.io/managed-by`, and the service
//! as their controlling owner; a service selecting nothing has one slice without endpoints.
//! `kubectl describe service` reads them.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

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

/// The slices `service` should have, given the pods its selector matches: their content
/// (`endpoints`, `ports`, labels), without names.
pub(super) fn desired(
    service: &Value,
    pods: &[&Value],
    zones: &HashMap<String, String>,
) -> Vec<Value> {
    let (namespace, name) = key_of(service);
    let publish_not_ready =
        json::at(service, "/spec/publishNotReadyAddresses") == Some(&json!(true));
    let service_ports =
        json::at(service, "/spec/ports").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut by_ports: BTreeMap<String, (Vec<Value>, Vec<Value>)> = BTreeMap::new();
    for pod in pods.iter().filter(|pod| listed(pod, true)) {
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
        if let Some(node) = json::at(pod, "/spec/nodeName").and_then(Value::as_str) {
            endpoint["nodeName"] = json!(node);
            // Its node's zone, as Kubernetes' controller copies it.
            if let Some(zone) = zones.get(node) {
                endpoint["zone"] = json!(zone);
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

/// The slices that mirror `endpoints` (a service's without a selector): one per subset (its
/// first 1,000 addresses, not-ready ones not ready), with the Endpoints' labels, as
/// Kubernetes' mirroring writes them; none for Endpoints labelled
/// `endpointslice.kubernetes.io/skip-mirror: "true"`.
pub(super) fn mirrored(endpoints: &Value) -> Vec<Value> {
    let (_, name) = key_of(endpoints);
    let mut labels = json::at(endpoints, "/metadata/labels").cloned().unwrap_or(json!({}));
    if labels.get("endpointslice.kubernetes.io/skip-mirror") == Some(&json!("true")) {
        return Vec::new();
    }
    labels[SERVICE_NAME] = json!(name);
    labels[MANAGED_BY] = json!(Keeper::Mirroring.label());
    let subsets = json::at(endpoints, "/subsets").and_then(Value::as_array);
    let mut slices = Vec::new();
    for subset in subsets.into_iter().flatten() {
        let addresses = |field: &str, ready: bool| {
            let listed = subset.get(field).and_then(Value::as_array).into_iter().flatten();
            listed.map(move |address| {
                let mut endpoint = json!({"addresses": [address["ip"]],
                    "conditions": {"ready": ready}});
                for field in ["targetRef", "nodeName"] {
                    if let Some(value) = address.get(field).filter(|v| !v.is_null()) {
                        endpoint[field] = value.clone();
                    }
                }
                let hostname = address.get("hostname").and_then(Value::as_str);
                if let Some(hostname) = hostname.filter(|h| !h.is_empty()) {
                    endpoint["hostname"] = json!(hostname);
                }
                endpoint
            })
        };
        let endpoints: Vec<Value> =
            addresses("addresses", true).chain(addresses("notReadyAddresses", false)).collect();
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
        let mut slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"labels": labels}, "addressType": "IPv4"});
        if !endpoints.is_empty() {
            slice["endpoints"] = json!(endpoints[..endpoints.len().min(MAX_MIRRORED)]);
        }
        if !ports.is_empty() {
            slice["ports"] = json!(ports);
        }
        slices.push(slice);
    }
    slices
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
    let mut existing = current(client, keeper, &namespace, &name).await?;
    let mut unmatched = Vec::new();
    let mut kept = Written::new();
    for want in desired {
        match existing.iter().position(|s| s.get("ports") == want.get("ports")) {
            Some(at) => kept.push(update(client, &namespace, existing.remove(at), want).await?),
            None => unmatched.push(want),
        }
    }
    for mut want in unmatched {
        if !existing.is_empty() {
            kept.push(update(client, &namespace, existing.remove(0), want).await?);
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

/// Gives slice `have` the endpoints, ports and labels of `want`, unless it has them.
async fn update(
    client: &dyn ApiClient,
    namespace: &str,
    mut have: Value,
    mut want: Value,
) -> Result<(String, i64), ApiError> {
    let labels = |s: &Value| json::at(s, "/metadata/labels").cloned();
    let same = |field: &str| have.get(field) == want.get(field);
    if same("endpoints") && same("ports") && labels(&have) == labels(&want) {
        return Ok(written(&have));
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
        let (zoned, plain) = (pod("a", "n-zoned"), pod("b", "n"));
        let zones = HashMap::from([("n-zoned".to_string(), "za".to_string())]);
        let slices = desired(&service, &[&zoned, &plain], &zones);
        let endpoints = slices[0]["endpoints"].as_array().unwrap();
        let zone_of = |name: &str| {
            let endpoint = endpoints.iter().find(|e| e["targetRef"]["name"] == name).unwrap();
            endpoint.get("zone").cloned()
        };
        assert_eq!(zone_of("a"), Some(json!("za")));
        assert_eq!(zone_of("b"), None);
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
        let slices = desired(&service, &[&named, &unnamed], &HashMap::new());
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
        let slices = desired(&only_named, &[&unnamed], &HashMap::new());
        assert_eq!(slices.len(), 1);
        assert!(slices[0].get("ports").is_none(), "{}", slices[0]);
        assert_eq!(slices[0]["endpoints"][0]["targetRef"]["name"], "unnamed");
    }
}
