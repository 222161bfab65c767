//! The Services and EndpointSlices a forwarding actor follows, and what each service port
//! forwards to, as kube-proxy chooses it: the ready endpoints of the service's IPv4 slices, at
//! the slice port of the same name (an unnamed port when the service has only one), TCP only;
//! when none is ready, those still serving while they terminate (a pod in its grace period
//! keeps its connections coming until a replacement is ready).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};

use serde_json::Value;

use crate::client::cache::{apply_feed, key_of, Key};
use crate::client::informer::{self, Feed, Scope};
use crate::client::ApiClient;
use crate::model::service_traffic::health_check_node_port;
use crate::model::{json, resources, validation};
use crate::watch::EventType;

/// One TCP port of a service and where its connections go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    pub port: u16,
    /// Its node port (NodePort and LoadBalancer services).
    pub node_port: Option<u16>,
    pub backends: Vec<SocketAddr>,
}

/// An EndpointSlice's key: its service's, then its own name.
type SliceKey = (Key, String);

/// Services and their EndpointSlices, as their list-watches report them.
#[derive(Debug, Default)]
pub struct ServiceTable {
    services: BTreeMap<Key, Value>,
    slices: BTreeMap<SliceKey, Value>,
    /// The service each slice (by namespace and name) is filed under: a slice relabelled to
    /// another service leaves the one it was under.
    filed: BTreeMap<Key, String>,
}

/// A report of the Services' list-watch, to an actor that [`follow`]s them.
#[derive(actix::Message)]
#[rtype(result = "()")]
pub struct ServicesFeed(pub Feed);

/// A report of the EndpointSlices' list-watch, likewise.
#[derive(actix::Message)]
#[rtype(result = "()")]
pub struct EndpointSlicesFeed(pub Feed);

/// The label naming a slice's service.
const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// Runs the list-watches of every Service and every EndpointSlice for the actor of `ctx`.
pub fn follow<A>(ctx: &actix::Context<A>, client: std::sync::Arc<dyn ApiClient>)
where
    A: actix::Actor<Context = actix::Context<A>>
        + actix::Handler<ServicesFeed>
        + actix::Handler<EndpointSlicesFeed>,
{
    let all = Scope::default();
    let services = resources::core("services");
    informer::feed_actor(ctx, client.clone(), services, all.clone(), ServicesFeed);
    let slices = resources::find("discovery.k8s.io", "v1", "endpointslices")
        .expect("EndpointSlices are served");
    informer::feed_actor(ctx, client, slices, all, EndpointSlicesFeed);
}

/// A slice's key, by the service its label names.
fn slice_key(slice: &Value) -> SliceKey {
    let (namespace, name) = key_of(slice);
    let labels = json::at(slice, "/metadata/labels");
    let service = labels.and_then(|l| l.get(SERVICE_NAME)).and_then(Value::as_str);
    ((namespace, service.unwrap_or("").to_string()), name)
}

impl ServiceTable {
    /// Applies a report of the services' list-watch; returns the services it may have changed.
    pub fn apply_services(&mut self, feed: Feed) -> BTreeSet<Key> {
        apply_feed(&mut self.services, feed, key_of, |service| service)
    }

    /// Applies a report of the slices' list-watch; returns the services whose backends it may
    /// have changed (a slice is its service's by its `kubernetes.io/service-name` label).
    pub fn apply_slices(&mut self, feed: Feed) -> BTreeSet<Key> {
        let mut left = None;
        if let Feed::Changed(kind, slice) = &feed {
            let ((namespace, service), name) = slice_key(slice);
            let slice = (namespace, name);
            let was = match kind {
                EventType::Deleted => self.filed.remove(&slice),
                _ => self.filed.insert(slice.clone(), service.clone()),
            };
            if let Some(was) = was.filter(|was| *was != service) {
                let filed = ((slice.0.clone(), was), slice.1);
                self.slices.remove(&filed);
                left = Some(filed);
            }
        }
        let listed = matches!(feed, Feed::Listed(_));
        let changed = apply_feed(&mut self.slices, feed, slice_key, |slice| slice);
        if listed {
            let filed = self.slices.keys().map(|((namespace, service), name)| {
                ((namespace.clone(), name.clone()), service.clone())
            });
            self.filed = filed.collect();
        }
        let services = changed.into_iter().chain(left).map(|(service, _)| service);
        services.filter(|(_, name)| !name.is_empty()).collect()
    }

    /// The slices of the service `key`.
    fn slices_of<'a>(&'a self, key: &Key) -> impl Iterator<Item = &'a Value> + 'a {
        let key = key.clone();
        let from = (key.clone(), String::new());
        let own = self.slices.range(from..).take_while(move |((service, _), _)| *service == key);
        own.map(|(_, slice)| slice)
    }

    pub fn service(&self, key: &Key) -> Option<&Value> {
        self.services.get(key)
    }

    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.services.keys()
    }

    /// The TCP ports of the service, each with its backends.
    pub fn ports(&self, key: &Key) -> Vec<ServicePort> {
        self.ports_on(key, None)
    }

    /// The TCP ports of the service, each with its backends on node `node` (or on any node).
    pub fn ports_on(&self, key: &Key, node: Option<&str>) -> Vec<ServicePort> {
        let Some(service) = self.services.get(key) else { return Vec::new() };
        json::at(service, "/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|port| is_tcp(port))
            .filter_map(|port| {
                let number = u16::try_from(port.get("port")?.as_u64()?).ok()?;
                let name = port.get("name").and_then(Value::as_str).unwrap_or("");
                Some(ServicePort {
                    port: number,
                    node_port: port
                        .get("nodePort")
                        .and_then(Value::as_u64)
                        .and_then(|p| u16::try_from(p).ok())
                        .filter(|p| *p != 0),
                    backends: backends(self.slices_of(key), name, node),
                })
            })
            .collect()
    }

    /// A `LoadBalancer` service's health check node port, while it keeps traffic on the node
    /// it reaches (`externalTrafficPolicy: Local`), with how many of its ready endpoints run on
    /// node `node` (addresses counted once, whatever their ports).
    pub fn health_check(&self, key: &Key, node: &str) -> Option<(u16, usize)> {
        let port = health_check_node_port(self.services.get(key)?)?;
        let local: BTreeSet<&str> = self
            .slices_of(key)
            .flat_map(endpoints)
            .filter(|e| on_node(e, Some(node)) && Condition::of(e) == Condition::Ready)
            .filter_map(address)
            .collect();
        Some((port, local.len()))
    }
}

/// An IPv4 slice's endpoints (kplane serves IPv4 alone).
fn endpoints(slice: &Value) -> impl Iterator<Item = &Value> {
    let ipv4 = slice.get("addressType").and_then(Value::as_str) == Some("IPv4");
    let listed = slice.get("endpoints").and_then(Value::as_array).filter(|_| ipv4);
    listed.into_iter().flatten()
}

/// An endpoint's address (its first; the others are the same endpoint's).
fn address(endpoint: &Value) -> Option<&str> {
    endpoint.pointer("/addresses/0").and_then(Value::as_str)
}

/// What an endpoint is good for, from its conditions: `ready` and `serving` unset count as
/// true (as kube-proxy reads them), `terminating` unset as false.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Condition {
    Ready,
    /// Not ready, since it is terminating, but still serving.
    ServingTerminating,
    Unready,
}

impl Condition {
    fn of(endpoint: &Value) -> Self {
        let flag = |name: &str| endpoint.pointer(&format!("/conditions/{name}"))?.as_bool();
        let ready = flag("ready").unwrap_or(true);
        match (ready, flag("serving").unwrap_or(true), flag("terminating").unwrap_or(false)) {
            (true, _, _) => Self::Ready,
            (false, true, true) => Self::ServingTerminating,
            _ => Self::Unready,
        }
    }
}

/// Whether an endpoint runs on `node` (any endpoint, without one).
fn on_node(endpoint: &Value, node: Option<&str>) -> bool {
    node.is_none_or(|node| endpoint.get("nodeName").and_then(Value::as_str) == Some(node))
}

fn is_tcp(port: &Value) -> bool {
    port.get("protocol").and_then(Value::as_str).unwrap_or("TCP") == "TCP"
}

/// The service's cluster IP, when it has one (not headless, not an ExternalName).
pub fn cluster_ip(service: &Value) -> Option<Ipv4Addr> {
    json::at(service, "/spec/clusterIP").and_then(Value::as_str).and_then(validation::parse_ipv4)
}

/// The service's `externalIPs` that are IPv4 addresses, each once, in their order.
pub fn external_ips(service: &Value) -> Vec<Ipv4Addr> {
    let listed = json::at(service, "/spec/externalIPs").and_then(Value::as_array);
    let mut ips: Vec<Ipv4Addr> = Vec::new();
    for ip in
        listed.into_iter().flatten().filter_map(Value::as_str).filter_map(validation::parse_ipv4)
    {
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    ips
}

/// The load balancer addresses in the service's status that traffic is to be caught at
/// (`ipMode` `VIP` or unset, as kube-proxy takes them; not `Proxy`), IPv4 only, each once.
pub fn load_balancer_vips(service: &Value) -> Vec<Ipv4Addr> {
    if json::at(service, "/spec/type").and_then(Value::as_str) != Some("LoadBalancer") {
        return Vec::new();
    }
    let ingress = json::at(service, "/status/loadBalancer/ingress").and_then(Value::as_array);
    let mut ips: Vec<Ipv4Addr> = Vec::new();
    for entry in ingress.into_iter().flatten() {
        let vip = entry.get("ipMode").and_then(Value::as_str).is_none_or(|mode| mode == "VIP");
        let ip = entry.get("ip").and_then(Value::as_str).and_then(validation::parse_ipv4);
        if let Some(ip) = ip.filter(|ip| vip && !ips.contains(ip)) {
            ips.push(ip);
        }
    }
    ips
}

/// Where a service port named `name` forwards to, from the service's `slices`: the ready
/// endpoints (those on `node`, when given) at their slice's port of that name, in the slices'
/// order, each address once (a later slice listing it again is passed over); when none is
/// ready, those serving while they terminate.
fn backends<'a>(
    slices: impl Iterator<Item = &'a Value>,
    name: &str,
    node: Option<&str>,
) -> Vec<SocketAddr> {
    let (mut ready, mut terminating) = (Vec::new(), Vec::new());
    let mut seen = BTreeSet::new();
    for slice in slices {
        let port = slice
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|p| is_tcp(p))
            .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == name)
            .and_then(|p| p.get("port")?.as_u64())
            .and_then(|p| u16::try_from(p).ok());
        let Some(port) = port else { continue };
        for endpoint in endpoints(slice).filter(|e| on_node(e, node)) {
            let Some(ip) = address(endpoint).and_then(validation::parse_ipv4) else {
                continue;
            };
            let addr = SocketAddr::new(ip.into(), port);
            if !seen.insert(addr) {
                continue;
            }
            match Condition::of(endpoint) {
                Condition::Ready => ready.push(addr),
                Condition::ServingTerminating => terminating.push(addr),
                Condition::Unready => {}
            }
        }
    }
    if ready.is_empty() {
        terminating
    } else {
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::EventType;
    use serde_json::json;

    fn key(name: &str) -> Key {
        ("default".into(), name.into())
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    /// The slice `name` of `service`, with `ports` and `endpoints`.
    fn slice(service: &str, name: &str, ports: Value, endpoints: Value) -> Value {
        json!({"metadata": {"namespace": "default", "name": name,
                "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "ports": ports, "endpoints": endpoints})
    }

    fn at(ip: &str) -> Value {
        json!({"addresses": [ip]})
    }

    #[test]
    fn ports_forward_to_the_ready_endpoints_of_their_named_slice_port() {
        let mut table = ServiceTable::default();
        let service = json!({"metadata": {"namespace": "default", "name": "web"},
            "spec": {"clusterIP": "127.192.0.7", "type": "NodePort", "ports": [
                {"name": "http", "port": 80, "nodePort": 30080},
                {"name": "dns", "port": 53, "protocol": "UDP"},
                {"name": "admin", "port": 8081, "nodePort": 30081}]}});
        let first = slice(
            "web",
            "web-a",
            json!([{"name": "http", "port": 8080}, {"name": "admin", "port": 9000}]),
            json!([at("127.64.0.2"), {"addresses": ["127.64.0.3"], "conditions": {"ready": true}},
                {"addresses": ["127.64.0.4"], "conditions": {"ready": false}}]),
        );
        let second = slice(
            "web",
            "web-b",
            json!([{"name": "http", "port": 8443}]),
            json!([at("127.64.1.2")]),
        );
        let unrelated = slice(
            "other",
            "other-a",
            json!([{"name": "http", "port": 1}]),
            json!([at("127.9.9.9")]),
        );
        assert_eq!(
            table.apply_services(Feed::Listed(vec![service.clone()])),
            BTreeSet::from([key("web")])
        );
        assert_eq!(table.ports(&key("web"))[0].backends, Vec::<SocketAddr>::new());
        let listed = Feed::Listed(vec![first.clone(), second.clone(), unrelated]);
        assert_eq!(table.apply_slices(listed), BTreeSet::from([key("web"), key("other")]));
        assert_eq!(
            table.ports(&key("web")),
            vec![
                ServicePort {
                    port: 80,
                    node_port: Some(30080),
                    backends: vec![
                        addr("127.64.0.2:8080"),
                        addr("127.64.0.3:8080"),
                        addr("127.64.1.2:8443")
                    ],
                },
                ServicePort {
                    port: 8081,
                    node_port: Some(30081),
                    backends: vec![addr("127.64.0.2:9000"), addr("127.64.0.3:9000")]
                },
            ]
        );
        assert_eq!(cluster_ip(&service), Some(Ipv4Addr::new(127, 192, 0, 7)));
        assert_eq!(cluster_ip(&json!({"spec": {"clusterIP": "None"}})), None);

        let gone = table.apply_slices(Feed::Changed(EventType::Deleted, second));
        assert_eq!(gone, BTreeSet::from([key("web")]));
        assert_eq!(table.ports(&key("web"))[0].backends.len(), 2);
        table.apply_slices(Feed::Changed(EventType::Deleted, first));
        assert!(table.ports(&key("web")).iter().all(|p| p.backends.is_empty()));
        assert_eq!(table.apply_services(Feed::Listed(vec![])), BTreeSet::from([key("web")]));
        assert!(table.ports(&key("web")).is_empty());
    }

    #[test]
    fn without_a_ready_endpoint_those_serving_while_they_terminate_are_used() {
        let mut table = ServiceTable::default();
        table.apply_services(Feed::Listed(vec![json!({
            "metadata": {"namespace": "default", "name": "web"},
            "spec": {"clusterIP": "127.192.0.8", "ports": [{"port": 80}]}})]));
        let leaving = json!({"addresses": ["127.64.0.2"],
            "conditions": {"ready": false, "serving": true, "terminating": true}});
        let stopped = json!({"addresses": ["127.64.0.3"],
            "conditions": {"ready": false, "serving": false, "terminating": true}});
        // `serving` unset counts as serving, as kube-proxy reads it.
        let unsaid = json!({"addresses": ["127.64.0.5"],
            "conditions": {"ready": false, "terminating": true}});
        let ports = json!([{"port": 9376}]);
        let only_leaving = slice("web", "web-a", ports.clone(), json!([leaving, stopped, unsaid]));
        table.apply_slices(Feed::Listed(vec![only_leaving]));
        assert_eq!(
            table.ports(&key("web"))[0].backends,
            vec![addr("127.64.0.2:9376"), addr("127.64.0.5:9376")]
        );
        // A ready one takes over.
        let replaced = slice("web", "web-a", ports, json!([leaving, at("127.64.0.4")]));
        table.apply_slices(Feed::Changed(EventType::Modified, replaced));
        assert_eq!(table.ports(&key("web"))[0].backends, vec![addr("127.64.0.4:9376")]);
    }

    /// A slice relabelled to another service leaves the one it was under (its endpoints no
    /// longer that service's backends), whether it came listed or as a change.
    #[test]
    fn a_slice_relabelled_to_another_service_leaves_its_old_one() {
        let mut table = ServiceTable::default();
        let service = |name: &str, ip: &str| {
            json!({"metadata": {"namespace": "default", "name": name},
                "spec": {"clusterIP": ip, "ports": [{"port": 80}]}})
        };
        let services = vec![service("web", "127.192.0.8"), service("other", "127.192.0.9")];
        table.apply_services(Feed::Listed(services));
        let ports = json!([{"port": 8080}]);
        let web_a = slice("web", "web-a", ports.clone(), json!([at("127.64.0.2")]));
        table.apply_slices(Feed::Listed(vec![web_a]));
        assert_eq!(table.ports(&key("web"))[0].backends, vec![addr("127.64.0.2:8080")]);
        let moved = slice("other", "web-a", ports.clone(), json!([at("127.64.0.2")]));
        let changed = table.apply_slices(Feed::Changed(EventType::Modified, moved));
        assert_eq!(changed, BTreeSet::from([key("web"), key("other")]));
        assert!(table.ports(&key("web"))[0].backends.is_empty());
        assert_eq!(table.ports(&key("other"))[0].backends, vec![addr("127.64.0.2:8080")]);
        let back = slice("web", "web-a", ports, json!([at("127.64.0.3")]));
        table.apply_slices(Feed::Changed(EventType::Modified, back.clone()));
        assert!(table.ports(&key("other"))[0].backends.is_empty());
        table.apply_slices(Feed::Changed(EventType::Deleted, back));
        assert!(table.ports(&key("web"))[0].backends.is_empty());
    }

    #[test]
    fn an_endpoint_in_two_slices_is_one_backend() {
        let mut table = ServiceTable::default();
        table.apply_services(Feed::Listed(vec![json!({
            "metadata": {"namespace": "default", "name": "web"},
            "spec": {"clusterIP": "127.192.0.8", "ports": [{"port": 80}]}})]));
        let ports = json!([{"port": 8080}]);
        let first =
            slice("web", "web-a", ports.clone(), json!([at("127.64.0.2"), at("127.64.0.3")]));
        let second = slice("web", "web-b", ports, json!([at("127.64.0.2")]));
        table.apply_slices(Feed::Listed(vec![first, second]));
        assert_eq!(
            table.ports(&key("web"))[0].backends,
            vec![addr("127.64.0.2:8080"), addr("127.64.0.3:8080")]
        );
    }

    #[test]
    fn load_balancer_vips_are_the_ingress_ips_not_proxied() {
        let service = json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {
            "ingress": [{"ip": "127.23.5.5"}, {"ip": "127.23.5.6", "ipMode": "Proxy"},
                {"ip": "127.23.5.7", "ipMode": "VIP"}, {"hostname": "lb.example.com"},
                {"ip": "127.23.5.5"}, {"ip": "fd00::1"}]}}});
        let vips = load_balancer_vips(&service);
        assert_eq!(
            vips,
            ["127.23.5.5".parse::<Ipv4Addr>().unwrap(), "127.23.5.7".parse().unwrap()]
        );
        let mut other_type = service;
        other_type["spec"]["type"] = json!("NodePort");
        assert!(load_balancer_vips(&other_type).is_empty());
    }

    #[test]
    fn a_local_load_balancer_counts_and_reaches_the_endpoints_on_one_node() {
        let mut table = ServiceTable::default();
        let service = json!({"metadata": {"namespace": "default", "name": "lb"},
            "spec": {"clusterIP": "127.192.0.9", "type": "LoadBalancer",
                "externalTrafficPolicy": "Local", "healthCheckNodePort": 30500,
                "ports": [{"port": 80, "nodePort": 30080}]}});
        table.apply_services(Feed::Listed(vec![service.clone()]));
        assert_eq!(table.health_check(&key("lb"), "a"), Some((30500, 0)));
        let on = |ip: &str, node: &str| json!({"addresses": [ip], "nodeName": node});
        let mut unready = on("127.64.0.4", "a");
        unready["conditions"] = json!({"ready": false});
        table.apply_slices(Feed::Listed(vec![
            slice(
                "lb",
                "lb-a",
                json!([{"port": 8080}]),
                json!([on("127.64.0.2", "a"), on("127.64.0.3", "b"), unready]),
            ),
            slice("lb", "lb-b", json!([{"port": 8443}]), json!([on("127.64.0.2", "a")])),
        ]));
        // One address on `a`, whatever its ports; not-ready ones do not count.
        assert_eq!(table.health_check(&key("lb"), "a"), Some((30500, 1)));
        assert_eq!(table.health_check(&key("lb"), "c"), Some((30500, 0)));
        let on_a = table.ports_on(&key("lb"), Some("a"));
        assert_eq!(on_a[0].backends, vec![addr("127.64.0.2:8080"), addr("127.64.0.2:8443")]);
        assert_eq!(table.ports(&key("lb"))[0].backends.len(), 3);

        // Without the Local policy there is no health check.
        let mut cluster = service;
        cluster["spec"]["externalTrafficPolicy"] = json!("Cluster");
        table.apply_services(Feed::Listed(vec![cluster]));
        assert_eq!(table.health_check(&key("lb"), "a"), None);
    }

    #[test]
    fn an_unnamed_port_matches_the_unnamed_slice_port_and_other_families_are_left_out() {
        let mut table = ServiceTable::default();
        table.apply_services(Feed::Listed(vec![
            json!({"metadata": {"namespace": "default", "name": "one"},
            "spec": {"clusterIP": "127.192.0.8", "ports": [{"port": 80, "protocol": "TCP"}]}}),
        ]));
        let ports = json!([{"port": 9376, "protocol": "TCP"}]);
        let mut v6 = slice("one", "one-v6", ports.clone(), json!([at("fd00::1")]));
        v6["addressType"] = json!("IPv6");
        table.apply_slices(Feed::Listed(vec![
            slice("one", "one-a", ports, json!([at("127.64.0.9")])),
            v6,
        ]));
        assert_eq!(table.ports(&key("one"))[0].backends, vec![addr("127.64.0.9:9376")]);
    }
}
