//! The node IPAM controller: gives each node without a pod network a /24 of the cluster's
//! (the server's `agent.cluster_cidr`), as kube-controller-manager's range allocator does
//! (`--allocate-node-cidrs`, `--cluster-cidr`, `--node-cidr-mask-size=24`), so every node
//! agent, wherever it runs and however it is configured, takes its pods' addresses from the
//! one range the server knows to be clear of its services. A /24 is free again once its node
//! is gone; a node that already has one (set by hand, or by an earlier server) keeps it.
//! When the range is used up, the node gets a `CIDRNotAvailable` event and waits.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

use actix::prelude::*;
use serde_json::{json, Value};

use crate::agent::pod_ips;
use crate::client::cache::apply_feed;
use crate::client::events::{self, EventKind, ObjectRef};
use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, ApiClient};
use crate::core::{ApiError, PatchType};
use crate::model::{json, resources};

/// The component its events name, as kube-controller-manager's range allocator's do.
const COMPONENT: &str = "cidrAllocator";

/// The controller actor.
pub struct NodeIpamController {
    client: Arc<dyn ApiClient>,
    /// The cluster's pod network, which the nodes' /24s are taken from.
    cluster: (Ipv4Addr, u8),
    /// Every node, by name, with its /24 when it has one, as the informer last saw it.
    nodes: BTreeMap<String, Node>,
    /// The /24s handed out and not yet seen on their nodes, by node.
    pending: HashMap<String, Ipv4Addr>,
    /// Failed hand-outs in a row, by node, for their back-off.
    retries: HashMap<String, u32>,
}

/// What the controller keeps of a node.
struct Node {
    reference: ObjectRef,
    network: Option<Ipv4Addr>,
}

impl Node {
    fn read(node: Value) -> Node {
        let cidr = json::at(&node, "/spec/podCIDR").and_then(Value::as_str);
        let network = cidr.and_then(crate::model::cidr::parse).map(|(network, _)| network);
        Node { reference: ObjectRef::of(resources::core("nodes"), &node), network }
    }
}

/// A feed of nodes.
#[derive(Message)]
#[rtype(result = "()")]
struct Nodes(Feed);

/// Stops the controller (its list-watch ends with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopNodeIpamController;

/// Try again to give `0` a network, after a failed hand-out.
#[derive(Message)]
#[rtype(result = "()")]
struct Retry(String);

impl NodeIpamController {
    pub fn new(client: Arc<dyn ApiClient>, cluster: (Ipv4Addr, u8)) -> Self {
        Self {
            client,
            cluster,
            nodes: BTreeMap::new(),
            pending: HashMap::new(),
            retries: HashMap::new(),
        }
    }

    /// Hands `name` a free /24 if it has none and none is on its way to it.
    fn allocate(&mut self, name: &str, ctx: &mut Context<Self>) {
        let Some(node) = self.nodes.get(name) else { return };
        if node.network.is_some() || self.pending.contains_key(name) {
            return;
        }
        let taken: HashSet<Ipv4Addr> = (self.nodes.values().filter_map(|n| n.network))
            .chain(self.pending.values().copied())
            .collect();
        let client = self.client.clone();
        let reference = node.reference.clone();
        let Some((network, bits)) = pod_ips::choose_node_cidr(self.cluster, name, &taken) else {
            tracing::warn!(node = %name, "no free /24 left in the cluster CIDR for the node");
            let message = format!("Node {name} status is now: CIDRNotAvailable");
            ctx.spawn(
                async move {
                    let (kind, reason) = (EventKind::Normal, "CIDRNotAvailable");
                    events::record(client.as_ref(), &reference, kind, reason, &message, COMPONENT)
                        .await;
                }
                .into_actor(self),
            );
            return;
        };
        self.pending.insert(name.to_string(), network);
        let cidr = format!("{network}/{bits}");
        let patch = json!({"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}});
        let node = name.to_string();
        let nodes = resources::core("nodes");
        ctx.spawn(
            async move { client.patch(nodes, "", &node, PatchType::Merge, &patch, false).await }
                .into_actor(self)
                .map(move |result, act, ctx| {
                    let name = reference.name.clone();
                    match result {
                        // The node shows its network in the feed; then it is no longer pending.
                        Ok(_) => {
                            act.retries.remove(&name);
                        }
                        // Gone, or given a network by someone else meanwhile: the feed says.
                        Err(ApiError::NotFound { .. } | ApiError::Invalid { .. }) => {
                            act.pending.remove(&name);
                        }
                        Err(error) => {
                            act.pending.remove(&name);
                            tracing::warn!(node = %name, %error, "giving the node its pod CIDR");
                            let delay = super::back_off(&mut act.retries, &name);
                            ctx.notify_later(Retry(name), delay);
                        }
                    }
                }),
        );
    }
}

impl Actor for NodeIpamController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(ctx, client, resources::core("nodes"), Scope::default(), Nodes);
    }
}

impl Handler<Nodes> for NodeIpamController {
    type Result = ();

    fn handle(&mut self, Nodes(feed): Nodes, ctx: &mut Context<Self>) {
        let name_of = |node: &Value| object_name(node).to_string();
        let changed = apply_feed(&mut self.nodes, feed, name_of, Node::read);
        for name in &changed {
            // A network seen on its node, or a node gone, is no longer on its way.
            let settled = self.nodes.get(name).is_none_or(|node| node.network.is_some());
            if settled {
                self.pending.remove(name);
                self.retries.remove(name);
            }
        }
        let mut names = changed;
        // A node gone frees its network for every node still without one.
        if names.iter().any(|name| !self.nodes.contains_key(name)) {
            let waiting = self.nodes.iter().filter(|(_, node)| node.network.is_none());
            names.extend(waiting.map(|(name, _)| name.clone()));
        }
        for name in names {
            self.allocate(&name, ctx);
        }
    }
}

impl Handler<Retry> for NodeIpamController {
    type Result = ();

    fn handle(&mut self, Retry(name): Retry, ctx: &mut Context<Self>) {
        self.allocate(&name, ctx);
    }
}

impl Handler<StopNodeIpamController> for NodeIpamController {
    type Result = ();

    fn handle(&mut self, _: StopNodeIpamController, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{ApiCore, DeleteOptions, ListOptions};
    use crate::testing::{core, eventually};

    async fn network_of(core: &ApiCore, name: &str) -> Option<String> {
        let node = ApiClient::get(core, resources::core("nodes"), "", name).await.ok()?;
        Some(json::at(&node, "/spec/podCIDR")?.as_str()?.to_string())
    }

    async fn add_node(core: &ApiCore, name: &str, spec: Value) {
        let node = json!({"metadata": {"name": name}, "spec": spec});
        ApiClient::create(core, resources::core("nodes"), "", node).await.unwrap();
    }

    #[actix::test]
    async fn nodes_get_distinct_networks_of_the_cluster_and_keep_their_own() {
        let core = core().await;
        add_node(&core, "own", json!({"podCIDR": "10.1.2.0/24"})).await;
        add_node(&core, "early", json!({})).await;
        let cluster = (Ipv4Addr::new(127, 90, 0, 0), 22);
        NodeIpamController::new(Arc::new(core.clone()), cluster).start();
        for name in ["a", "b", "c"] {
            add_node(&core, name, json!({})).await;
        }
        let mut networks = Vec::new();
        for name in ["early", "a", "b", "c"] {
            let network = eventually(name, || network_of(&core, name)).await;
            let node = ApiClient::get(&core, resources::core("nodes"), "", name).await.unwrap();
            assert_eq!(node["spec"]["podCIDRs"], json!([network]));
            networks.push(network);
        }
        networks.sort();
        let all = ["127.90.0.0/24", "127.90.1.0/24", "127.90.2.0/24", "127.90.3.0/24"];
        assert_eq!(networks, all, "the whole /22, once each");
        assert_eq!(network_of(&core, "own").await.as_deref(), Some("10.1.2.0/24"));
        // The range is used up: a new node waits, with an event saying why...
        add_node(&core, "late", json!({})).await;
        let events = resources::core("events");
        let options = ListOptions {
            field_selector: Some("involvedObject.name=late,reason=CIDRNotAvailable".into()),
            ..ListOptions::default()
        };
        let event = eventually("the CIDRNotAvailable event", || async {
            let list = ApiClient::list(&core, events, Some("default"), &options).await.ok()?;
            list.items.into_iter().next()
        })
        .await;
        assert_eq!(event["message"], "Node late status is now: CIDRNotAvailable");
        assert_eq!(network_of(&core, "late").await, None);
        // ...until a node goes and frees its network.
        let gone = network_of(&core, "b").await.unwrap();
        let nodes = resources::core("nodes");
        ApiClient::delete(&core, nodes, "", "b", &DeleteOptions::default()).await.unwrap();
        let late = eventually("late's network", || network_of(&core, "late")).await;
        assert_eq!(late, gone);
    }
}
