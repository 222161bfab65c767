//! The Services and Endpoints a forwarding actor follows, by namespace and name, and what each
//! service port forwards to: the ready addresses of the service's Endpoints, at the port of
//! the same name (an unnamed port when the service has only one), TCP only.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};

use serde_json::Value;

use crate::client::cache::{apply_feed, key_of, Key};
use crate::client::informer::{self, Feed, Scope};
use crate::client::ApiClient;
use crate::model::{json, resources};

/// One TCP port of a service and where its connections go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    pub port: u16,
    /// Its node port (NodePort and LoadBalancer services).
    pub node_port: Option<u16>,
    pub backends: Vec<SocketAddr>,
}

/// Services and their Endpoints, as their list-watches report them.
#[derive(Debug, Default)]
pub struct ServiceTable {
    services: BTreeMap<Key, Value>,
    endpoints: BTreeMap<Key, Value>,
}

/// A report of the Services' list-watch, to an actor that [`follow`]s them.
#[derive(actix::Message)]
#[rtype(result = "()")]
pub struct ServicesFeed(pub Feed);

/// A report of the Endpoints' list-watch, likewise.
#[derive(actix::Message)]
#[rtype(result = "()")]
pub struct EndpointsFeed(pub Feed);

/// Runs the list-watches of every Service and every Endpoints for the actor of `ctx`.
pub fn follow<A>(ctx: &actix::Context<A>, client: std::sync::Arc<dyn ApiClient>)
where
    A: actix::Actor<Context = actix::Context<A>>
        + actix::Handler<ServicesFeed>
        + actix::Handler<EndpointsFeed>,
{
    let all = Scope::default();
    let services = resources::core("services");
    informer::feed_actor(ctx, client.clone(), services, all.clone(), ServicesFeed);
    informer::feed_actor(ctx, client, resources::core("endpoints"), all, EndpointsFeed);
}

impl ServiceTable {
    /// Applies a report of the services' list-watch; returns the services it may have changed.
    pub fn apply_services(&mut self, feed: Feed) -> BTreeSet<Key> {
        apply_feed(&mut self.services, feed, key_of, |service| service)
    }

    /// Applies a report of the endpoints' list-watch; returns the services whose backends it
    /// may have changed (an Endpoints object is its service's by name).
    pub fn apply_endpoints(&mut self, feed: Feed) -> BTreeSet<Key> {
        apply_feed(&mut self.endpoints, feed, key_of, |endpoints| endpoints)
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
        let endpoints = self.endpoints.get(key);
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
                    backends: endpoints.map(|e| ready_backends(e, name, node)).unwrap_or_default(),
                })
            })
            .collect()
    }

    /// A `LoadBalancer` service's health check node port, while it keeps traffic on the node
    /// it reaches (`externalTrafficPolicy: Local`), with how many of its ready endpoints run on
    /// node `node` (addresses counted once, whatever their ports).
    pub fn health_check(&self, key: &Key, node: &str) -> Option<(u16, usize)> {
        let service = self.services.get(key)?;
        if !is_load_balancer(service) || !keeps_external_traffic_local(service) {
            return None;
        }
        let port = json::at(service, "/spec/healthCheckNodePort")?.as_u64()?;
        let port = u16::try_from(port).ok().filter(|p| *p != 0)?;
        let local: BTreeSet<&str> = self
            .endpoints
            .get(key)
            .map(|e| ready_addresses(e).filter(|a| on_node(a, Some(node))))
            .into_iter()
            .flatten()
            .filter_map(|a| a.get("ip").and_then(Value::as_str))
            .collect();
        Some((port, local.len()))
    }
}

fn is_load_balancer(service: &Value) -> bool {
    json::at(service, "/spec/type").and_then(Value::as_str) == Some("LoadBalancer")
}

/// Whether traffic from outside the cluster (node ports, load balancers) goes only to the
/// endpoints on the node it reaches.
pub fn keeps_external_traffic_local(service: &Value) -> bool {
    json::at(service, "/spec/externalTrafficPolicy").and_then(Value::as_str) == Some("Local")
}

/// Whether traffic from inside the cluster (the cluster IP) goes only to the endpoints on the
/// node it starts from.
pub fn keeps_internal_traffic_local(service: &Value) -> bool {
    json::at(service, "/spec/internalTrafficPolicy").and_then(Value::as_str) == Some("Local")
}

fn ready_addresses(endpoints: &Value) -> impl Iterator<Item = &Value> {
    let subsets = endpoints.get("subsets").and_then(Value::as_array).into_iter().flatten();
    subsets.flat_map(|s| s.get("addresses").and_then(Value::as_array).into_iter().flatten())
}

/// Whether an endpoint address runs on `node` (any address, without one).
fn on_node(address: &Value, node: Option<&str>) -> bool {
    node.is_none_or(|node| address.get("nodeName").and_then(Value::as_str) == Some(node))
}

fn is_tcp(port: &Value) -> bool {
    port.get("protocol").and_then(Value::as_str).unwrap_or("TCP") == "TCP"
}

/// The service's cluster IP, when it has one (not headless, not an ExternalName).
pub fn cluster_ip(service: &Value) -> Option<Ipv4Addr> {
    json::at(service, "/spec/clusterIP").and_then(Value::as_str)?.parse().ok()
}

/// The ready addresses of `endpoints` (those on `node`, when given) at their port named
/// `name`, in the order listed.
fn ready_backends(endpoints: &Value, name: &str, node: Option<&str>) -> Vec<SocketAddr> {
    let mut backends = Vec::new();
    for subset in endpoints.get("subsets").and_then(Value::as_array).into_iter().flatten() {
        let port = subset
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|p| is_tcp(p))
            .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == name)
            .and_then(|p| p.get("port")?.as_u64())
            .and_then(|p| u16::try_from(p).ok());
        let Some(port) = port else { continue };
        let addresses = subset.get("addresses").and_then(Value::as_array).into_iter().flatten();
        for address in addresses.filter(|a| on_node(a, node)) {
            if let Some(ip) =
                address.get("ip").and_then(Value::as_str).and_then(|ip| ip.parse::<Ipv4Addr>().ok())
            {
                backends.push(SocketAddr::new(ip.into(), port));
            }
        }
    }
    backends
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::EventType;
    use serde_json::json;

    fn key(name: &str) -> Key {
        ("default".into(), name.into())
    }

    #[test]
    fn ports_forward_to_the_ready_addresses_of_their_named_endpoint_port() {
        let mut table = ServiceTable::default();
        let service = json!({"metadata": {"namespace": "default", "name": "web"},
            "spec": {"clusterIP": "127.192.0.7", "type": "NodePort", "ports": [
                {"name": "http", "port": 80, "nodePort": 30080},
                {"name": "dns", "port": 53, "protocol": "UDP"},
                {"name": "admin", "port": 8081, "nodePort": 30081}]}});
        let endpoints = json!({"metadata": {"namespace": "default", "name": "web"},
            "subsets": [
                {"addresses": [{"ip": "127.64.0.2"}, {"ip": "127.64.0.3"}],
                 "notReadyAddresses": [{"ip": "127.64.0.4"}],
                 "ports": [{"name": "http", "port": 8080}, {"name": "admin", "port": 9000}]},
                {"addresses": [{"ip": "127.64.1.2"}], "ports": [{"name": "http", "port": 8443}]}]});
        assert_eq!(
            table.apply_services(Feed::Listed(vec![service.clone()])),
            BTreeSet::from([key("web")])
        );
        assert_eq!(table.ports(&key("web"))[0].backends, Vec::<SocketAddr>::new());
        table.apply_endpoints(Feed::Changed(EventType::Added, endpoints.clone()));
        let ports = table.ports(&key("web"));
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(
            ports,
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

        table.apply_endpoints(Feed::Changed(EventType::Deleted, endpoints));
        assert!(table.ports(&key("web")).iter().all(|p| p.backends.is_empty()));
        assert_eq!(table.apply_services(Feed::Listed(vec![])), BTreeSet::from([key("web")]));
        assert!(table.ports(&key("web")).is_empty());
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
        table.apply_endpoints(Feed::Listed(vec![json!({
            "metadata": {"namespace": "default", "name": "lb"},
            "subsets": [
                {"addresses": [{"ip": "127.64.0.2", "nodeName": "a"},
                               {"ip": "127.64.0.3", "nodeName": "b"}],
                 "notReadyAddresses": [{"ip": "127.64.0.4", "nodeName": "a"}],
                 "ports": [{"port": 8080}]},
                {"addresses": [{"ip": "127.64.0.2", "nodeName": "a"}], "ports": [{"port": 8443}]}]})]));
        // One address on `a`, whatever its ports; not-ready ones do not count.
        assert_eq!(table.health_check(&key("lb"), "a"), Some((30500, 1)));
        assert_eq!(table.health_check(&key("lb"), "c"), Some((30500, 0)));
        let on_a = table.ports_on(&key("lb"), Some("a"));
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(on_a[0].backends, vec![addr("127.64.0.2:8080"), addr("127.64.0.2:8443")]);
        assert_eq!(table.ports(&key("lb"))[0].backends.len(), 3);

        // Without the Local policy there is no health check.
        let mut cluster = service;
        cluster["spec"]["externalTrafficPolicy"] = json!("Cluster");
        table.apply_services(Feed::Listed(vec![cluster]));
        assert_eq!(table.health_check(&key("lb"), "a"), None);
    }

    #[test]
    fn an_unnamed_port_matches_the_unnamed_endpoint_port() {
        let mut table = ServiceTable::default();
        table.apply_services(Feed::Listed(vec![
            json!({"metadata": {"namespace": "default", "name": "one"},
            "spec": {"clusterIP": "127.192.0.8", "ports": [{"port": 80, "protocol": "TCP"}]}}),
        ]));
        table.apply_endpoints(Feed::Listed(vec![json!({"metadata": {"namespace": "default", "name": "one"},
            "subsets": [{"addresses": [{"ip": "127.64.0.9"}], "ports": [{"port": 9376, "protocol": "TCP"}]}]})]));
        assert_eq!(
            table.ports(&key("one"))[0].backends,
            vec!["127.64.0.9:9376".parse::<SocketAddr>().unwrap()]
        );
    }
}
