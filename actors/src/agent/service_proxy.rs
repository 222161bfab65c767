//! The service proxy (kube-proxy's job, as its userspace mode did it): every TCP port of every
//! Service with a cluster IP is served at that IP, and, for NodePort and LoadBalancer
//! services, at this node's address and the port's node port; each connection goes to one of
//! the port's ready endpoints, round robin (a port without one is not listened on, so a client
//! is refused). It follows Services and Endpoints; the listeners
//! run on its own thread, so service traffic never waits behind the agent's other work.
//!
//! Every cluster IP is in 127.0.0.0/8, which Linux routes to this machine whole: no address
//! has to be configured. One proxy per machine serves each address: a second agent on the same
//! machine finds them taken, logs it once, and keeps trying (in case the first stops).

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use crate::client::cache::Key;
use crate::client::ApiClient;
use crate::forwarding::service_table::{self, EndpointsFeed, ServicesFeed};
use crate::forwarding::{Listeners, ServiceTable};

/// How often listeners that could not be bound are tried again.
const RETRY_PERIOD: Duration = Duration::from_secs(5);

/// The service proxy actor.
pub struct ServiceProxy {
    client: Arc<dyn ApiClient>,
    /// This node's address, where node ports are served.
    node_address: Ipv4Addr,
    table: ServiceTable,
    listeners: Listeners,
}

/// Closes every listener and stops the proxy.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopServiceProxy;

impl ServiceProxy {
    /// Starts a proxy on a thread of its own.
    pub fn start_in_own_thread(client: Arc<dyn ApiClient>, node_address: Ipv4Addr) -> Addr<Self> {
        let arbiter = Arbiter::new();
        Self::start_in_arbiter(&arbiter.handle(), move |_| Self {
            client,
            node_address,
            table: ServiceTable::default(),
            listeners: Listeners::default(),
        })
    }

    /// Where `key`'s ports are served, each with its backends.
    fn desired(&self, key: &Key) -> Vec<(SocketAddr, Vec<SocketAddr>)> {
        let Some(cluster_ip) = self.table.service(key).and_then(service_table::cluster_ip) else {
            return Vec::new();
        };
        let mut desired = Vec::new();
        // A port with no ready endpoint is not listened on: a client is refused, as kube-proxy
        // rejects connections to a service without endpoints.
        for port in self.table.ports(key).into_iter().filter(|p| !p.backends.is_empty()) {
            if let Some(node_port) = port.node_port {
                let at_node = SocketAddr::new(self.node_address.into(), node_port);
                desired.push((at_node, port.backends.clone()));
            }
            desired.push((SocketAddr::new(cluster_ip.into(), port.port), port.backends));
        }
        desired
    }

    fn sync(&mut self, keys: BTreeSet<Key>) {
        for key in keys {
            let desired = self.desired(&key);
            for failure in self.listeners.set(&key, desired) {
                tracing::warn!(
                    service = %format!("{}/{}", failure.service.0, failure.service.1),
                    addr = %failure.addr, error = %failure.error,
                    "cannot serve a service port here; retrying every {}s", RETRY_PERIOD.as_secs()
                );
            }
        }
    }
}

impl Actor for ServiceProxy {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        service_table::follow(ctx, self.client.clone());
        ctx.run_interval(RETRY_PERIOD, |proxy, _| {
            for key in proxy.listeners.retry() {
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

impl Handler<EndpointsFeed> for ServiceProxy {
    type Result = ();

    fn handle(&mut self, msg: EndpointsFeed, _: &mut Context<Self>) {
        let changed = self.table.apply_endpoints(msg.0);
        self.sync(changed);
    }
}

impl Handler<StopServiceProxy> for ServiceProxy {
    type Result = ();

    fn handle(&mut self, _: StopServiceProxy, ctx: &mut Context<Self>) {
        self.listeners.clear();
        ctx.stop();
        // The proxy's own thread goes with it.
        Arbiter::current().stop();
    }
}
