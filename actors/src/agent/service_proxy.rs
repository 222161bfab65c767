//! The service proxy (kube-proxy's job, as its userspace mode did it): every TCP port of every
//! Service with a cluster IP is served at that IP and at each of its `externalIPs` (those this
//! machine has: every 127.x.y.z address), and, for NodePort and LoadBalancer services, at this
//! node's address and the port's node port; each connection goes to one of the port's ready
//! endpoints (or, with none, those serving while they terminate), round robin (a port without
//! either is not listened on, so a client is refused). A service that keeps outside traffic
//! local (`externalTrafficPolicy: Local`) sends its node port's and external IPs' connections
//! from other machines only to the endpoints on this node (those from this machine are the
//! node's own traffic, which kube-proxy sends to any), and has its health check node port
//! answered here; one that keeps inside traffic local (`internalTrafficPolicy: Local`) sends
//! its cluster IP's connections only to this node's endpoints. The addresses another load
//! balancer (a service with a `loadBalancerClass`) writes into a service's status are served
//! as external IPs are, for the clients in its source ranges (kplane's own load balancer
//! listens at its addresses itself). A service labelled `service.kubernetes.io/service-proxy-name`
//! is another proxy's, and left alone. It follows Services and EndpointSlices; the listeners
//! run on its own thread, so service traffic never waits behind the agent's other work.
//!
//! Every cluster IP is in 127.0.0.0/8, which Linux routes to this machine whole: no address
//! has to be configured. One proxy per machine serves each address: a second agent on the same
//! machine finds them taken, logs it once, and keeps trying (in case the first stops).

use std::collections::{BTreeSet, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::Value;

use crate::client::cache::Key;
use crate::client::ApiClient;
use crate::forwarding::service_table::{self, EndpointSlicesFeed, ServicesFeed};
use crate::forwarding::{BindFailure, HealthChecks, Listeners, ServiceTable, Targets};
use crate::model::json;
use crate::model::service_traffic::{
    client_ip_affinity, keeps_external_traffic_local, keeps_internal_traffic_local,
    load_balancer_source_ranges,
};

/// The label that gives a service to another proxy (kube-proxy follows only services without
/// it).
const SERVICE_PROXY_NAME: &str = "service.kubernetes.io/service-proxy-name";

/// How often listeners that could not be bound are tried again.
const RETRY_PERIOD: Duration = Duration::from_secs(5);

/// The service proxy actor.
pub struct ServiceProxy {
    client: Arc<dyn ApiClient>,
    /// This node's name: whose endpoints are local.
    node_name: String,
    /// This node's address, where node ports are served.
    node_address: Ipv4Addr,
    table: ServiceTable,
    listeners: Listeners,
    health_checks: HealthChecks,
    /// The ports found taken, already told of: a port is warned of once until it is served
    /// (each change of its service tries it again, and would say so again).
    told_unbound: HashSet<(Key, SocketAddr)>,
}

/// Closes every listener and stops the proxy.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopServiceProxy;

impl ServiceProxy {
    /// Starts a proxy on a thread of its own.
    pub fn start_in_own_thread(
        client: Arc<dyn ApiClient>,
        node_name: String,
        node_address: Ipv4Addr,
    ) -> Addr<Self> {
        let arbiter = Arbiter::new();
        Self::start_in_arbiter(&arbiter.handle(), move |_| {
            crate::threads::name_current("kplane-proxy");
            Self {
                client,
                node_name,
                node_address,
                table: ServiceTable::default(),
                listeners: Listeners::default(),
                health_checks: HealthChecks::default(),
                told_unbound: HashSet::new(),
            }
        })
    }

    /// Where `key`'s ports are served, each with its backends.
    fn desired(&self, key: &Key) -> Vec<(SocketAddr, Targets)> {
        let Some(service) = self.table.service(key).filter(|s| !another_proxys(s)) else {
            return Vec::new();
        };
        let Some(cluster_ip) = service_table::cluster_ip(service) else { return Vec::new() };
        let ports = self.table.ports(key);
        let local = self.table.ports_on(key, Some(&self.node_name));
        let inside = if keeps_internal_traffic_local(service) { &local } else { &ports };
        let external_local = keeps_external_traffic_local(service);
        let external_ips = service_table::external_ips(service);
        // Another load balancer's addresses (kplane's own listens at its own).
        let has_class = json::at(service, "/spec/loadBalancerClass").is_some_and(|c| !c.is_null());
        let mut vips =
            if has_class { service_table::load_balancer_vips(service) } else { Vec::new() };
        vips.retain(|ip| !external_ips.contains(ip));
        let sources = load_balancer_source_ranges(service);
        let affinity = client_ip_affinity(service);
        let mut desired = Vec::new();
        // A port with no endpoint to send to (only this node's, when the cluster IP keeps its
        // traffic local) is not listened on: a client is refused, as kube-proxy rejects
        // connections to a service without endpoints.
        for ((port, local), inside) in ports.iter().zip(&local).zip(inside) {
            // What arrives from outside the cluster: at a node port or an external IP.
            let outside = || Targets {
                all: port.backends.clone(),
                from_outside: external_local.then(|| local.backends.clone()),
                affinity,
                sources: None,
            };
            if let Some(node_port) = port.node_port.filter(|_| !port.backends.is_empty()) {
                desired.push((SocketAddr::new(self.node_address.into(), node_port), outside()));
            }
            if !port.backends.is_empty() {
                for ip in &external_ips {
                    desired.push((SocketAddr::new((*ip).into(), port.port), outside()));
                }
                for ip in &vips {
                    let targets = outside().with_sources(sources.clone());
                    desired.push((SocketAddr::new((*ip).into(), port.port), targets));
                }
            }
            if !inside.backends.is_empty() {
                let at_cluster_ip = SocketAddr::new(cluster_ip.into(), inside.port);
                let targets = Targets::from(inside.backends.clone()).with_affinity(affinity);
                desired.push((at_cluster_ip, targets));
            }
        }
        desired
    }

    fn sync(&mut self, keys: BTreeSet<Key>) {
        for key in keys {
            let desired = self.desired(&key);
            let ours = self.table.service(&key).is_some_and(|s| !another_proxys(s));
            let health_check = ours
                .then(|| self.table.health_check(&key, &self.node_name))
                .flatten()
                .map(|(port, n)| (SocketAddr::new(self.node_address.into(), port), n));
            // An address the service no longer wants is no longer told of.
            let wanted: HashSet<SocketAddr> =
                desired.iter().map(|(addr, _)| *addr).chain(health_check.map(|c| c.0)).collect();
            self.told_unbound.retain(|(service, addr)| *service != key || wanted.contains(addr));
            let failures = self.listeners.set(&key, desired);
            let failed_check = self.health_checks.set(&key, health_check);
            for failure in failures.into_iter().chain(failed_check) {
                if self.told_unbound.insert((failure.service.clone(), failure.addr)) {
                    warn_unbound(&failure);
                }
            }
        }
    }
}

/// Whether a service is left to another proxy.
fn another_proxys(service: &Value) -> bool {
    json::at(service, "/metadata/labels").and_then(|l| l.get(SERVICE_PROXY_NAME)).is_some()
}

fn warn_unbound(failure: &BindFailure) {
    tracing::warn!(
        service = %format!("{}/{}", failure.service.0, failure.service.1),
        addr = %failure.addr, error = %failure.error,
        "cannot serve a service port here; retrying every {}s", RETRY_PERIOD.as_secs()
    );
}

impl Actor for ServiceProxy {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        service_table::follow(ctx, self.client.clone());
        ctx.run_interval(RETRY_PERIOD, |proxy, _| {
            for key in proxy.listeners.retry().into_iter().chain(proxy.health_checks.retry()) {
                proxy.told_unbound.retain(|(service, _)| *service != key);
                tracing::info!(service = %format!("{}/{}", key.0, key.1), "serving the service's ports");
            }
        });
    }
}

impl Handler<ServicesFeed> for ServiceProxy {
    type Result = ();

    fn handle(&mut self, msg: ServicesFeed, _: &mut Context<Self>) {
        let changed = self.table.apply_services(msg.0);
        self.sync(changed);
    }
}

impl Handler<EndpointSlicesFeed> for ServiceProxy {
    type Result = ();

    fn handle(&mut self, msg: EndpointSlicesFeed, _: &mut Context<Self>) {
        let changed = self.table.apply_slices(msg.0);
        self.sync(changed);
    }
}

impl Handler<StopServiceProxy> for ServiceProxy {
    type Result = ();

    fn handle(&mut self, _: StopServiceProxy, ctx: &mut Context<Self>) {
        self.listeners.clear();
        self.health_checks.clear();
        ctx.stop();
        // The proxy's own thread goes with it.
        Arbiter::current().stop();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::client::informer::Feed;
    use crate::watch::EventType;

    #[actix::test]
    async fn a_port_that_cannot_be_bound_is_told_of_again_once_its_service_is_made_again() {
        let mut proxy = ServiceProxy {
            client: Arc::new(crate::testing::core().await),
            node_name: "n1".into(),
            node_address: Ipv4Addr::new(127, 0, 0, 1),
            table: ServiceTable::default(),
            listeners: Listeners::default(),
            health_checks: HealthChecks::default(),
            told_unbound: HashSet::new(),
        };
        // 192.0.2.10 (documentation's) is no address of this machine's: it cannot be bound.
        let service = json!({"metadata": {"namespace": "a", "name": "web"},
            "spec": {"clusterIP": "127.243.17.5", "externalIPs": ["192.0.2.10"],
                "ports": [{"port": 41873, "targetPort": 8080}]}});
        let slice = json!({"metadata": {"namespace": "a", "name": "web-x",
                "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "ports": [{"port": 8080}],
            "endpoints": [{"addresses": ["127.64.0.2"]}]});
        let unbound = ("a".to_string(), "web".to_string());
        let unbound = (unbound, "192.0.2.10:41873".parse::<SocketAddr>().unwrap());
        for round in 0..2 {
            let changed = proxy.table.apply_slices(Feed::Changed(EventType::Added, slice.clone()));
            proxy.sync(changed);
            let changed =
                proxy.table.apply_services(Feed::Changed(EventType::Added, service.clone()));
            proxy.sync(changed);
            assert!(proxy.told_unbound.contains(&unbound), "round {round}: told of");
            let changed =
                proxy.table.apply_services(Feed::Changed(EventType::Deleted, service.clone()));
            proxy.sync(changed);
            assert!(proxy.told_unbound.is_empty(), "round {round}: forgotten with its service");
        }
    }
}
