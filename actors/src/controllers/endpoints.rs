//! The endpoints controller: every Service with a selector has an Endpoints object of its
//! name listing the pods it selects, as Kubernetes' controller keeps it: each pod with an IP
//! that is neither finished nor being deleted, under `addresses` when it is ready (or the
//! service publishes not-ready addresses) and `notReadyAddresses` otherwise, with the
//! service's ports resolved against the pod (a named `targetPort` through its containers'
//! ports), packed into one subset per set of ports. The service's labels are the endpoints'.
//! Deleting the service deletes them; a service without a selector keeps the endpoints its
//! user writes, and so does an ExternalName service. Beside them it keeps the service's
//! EndpointSlices (`endpoint_slices`): from its pods while it has a selector (those stay when
//! it loses it, as in Kubernetes), and, without one, slices mirroring the Endpoints its user
//! writes (Kubernetes' EndpointSliceMirroring controller). The two are written apart, as
//! Kubernetes' separate controllers write them: Endpoints refused (with a Warning event) do
//! not keep the slices, which the node proxies route by, from being written.
//!
//! Both carry the time of the change they were written for (`trigger_time`).
//!
//! It follows pods only while some service with a selector exists.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use actix::prelude::*;
use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::endpoint_slices::{self, Keeper, Written};
use super::selects;
use super::trigger_time::{self, TriggerTimes};
use crate::client::cache::{key_of, relist, Applied, Key, OnDemandCache};
use crate::client::events::{self, EventKind};
use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, object_uid, ApiClient};
use crate::core::{ApiError, DeleteOptions};
use crate::model::{endpoints, json, resources};
use crate::watch::EventType;

/// Who the controller's events say reported them (Kubernetes' endpoints controller).
const COMPONENT: &str = "endpoint-controller";

/// The endpoints controller actor.
pub struct EndpointsController {
    client: Arc<dyn ApiClient>,
    services: BTreeMap<Key, Value>,
    /// Every Endpoints object: those of services without a selector are mirrored.
    endpoints: BTreeMap<Key, Value>,
    /// The Endpoints have been listed (until then, nothing is mirrored or unmirrored).
    endpoints_listed: bool,
    /// The nodes (which exist, and their zones), for the slices' endpoints.
    nodes: endpoint_slices::Nodes,
    /// Every pod, while any service has a selector.
    pods: OnDemandCache,
    dirty: BTreeSet<Key>,
    sync_queued: bool,
    /// How many writes in a row failed, per service.
    retries: HashMap<Key, u32>,
    /// The services whose write is under way.
    in_flight: HashSet<Key>,
    /// What each service's last sync saw, for the time of the change the next one writes.
    trigger_times: TriggerTimes,
    /// The generation of each slice as the controller last wrote (or found) it: a slice
    /// changed by someone else, or deleted, has its service synced again, which puts it back.
    slice_generations: HashMap<Key, i64>,
    /// The service each slice of the controllers' was last seen for: a slice relabelled to
    /// another service, or to another keeper, has its old service synced too (which makes it
    /// a slice again), as Kubernetes' controller queues both.
    slice_services: HashMap<Key, Key>,
    /// Slices changed while their service's write was under way (likely by it), with their
    /// generation (none: deleted): judged once the write is done and its generations known.
    unconfirmed: HashMap<Key, Vec<(Key, Option<i64>)>>,
}

/// A feed of services.
#[derive(Message)]
#[rtype(result = "()")]
struct Services(Feed);

/// A feed of Endpoints objects.
#[derive(Message)]
#[rtype(result = "()")]
struct EndpointsFeed(Feed);

/// A feed of EndpointSlices (to put back those of the controller's that others change).
#[derive(Message)]
#[rtype(result = "()")]
struct SlicesFeed(Feed);

/// A feed of nodes (for their zones).
#[derive(Message)]
#[rtype(result = "()")]
struct Nodes(Feed);

/// A feed of pods, from the pod list-watch of this generation.
#[derive(Message)]
#[rtype(result = "()")]
struct Pods(u64, Feed);

/// Works through the services marked for a sync.
#[derive(Message)]
#[rtype(result = "()")]
struct SyncDirty;

/// Stops the controller (its list-watches end with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopEndpointsController;

impl EndpointsController {
    pub fn new(client: Arc<dyn ApiClient>) -> Self {
        Self {
            client,
            services: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            endpoints_listed: false,
            nodes: endpoint_slices::Nodes::default(),
            pods: OnDemandCache::default(),
            dirty: BTreeSet::new(),
            sync_queued: false,
            retries: HashMap::new(),
            in_flight: HashSet::new(),
            trigger_times: TriggerTimes::default(),
            slice_generations: HashMap::new(),
            slice_services: HashMap::new(),
            unconfirmed: HashMap::new(),
        }
    }

    fn mark(&mut self, key: Key, ctx: &mut Context<Self>) {
        self.dirty.insert(key);
        if !self.sync_queued {
            self.sync_queued = true;
            ctx.notify(SyncDirty);
        }
    }

    fn follow_pods(&mut self, ctx: &mut Context<Self>) {
        if self.services.values().any(|s| selector(s).is_some()) {
            self.pods.follow(ctx, self.client.clone(), resources::core("pods"), Pods);
        } else {
            self.pods.let_go();
        }
    }

    /// Whether a slice at `generation` is past what the controller last wrote or found (or
    /// unknown to it), as Kubernetes' `endpointSliceTracker.ShouldSync` judges it.
    fn changed_by_others(&self, slice: &Key, generation: i64) -> bool {
        self.slice_generations.get(slice).is_none_or(|known| generation > *known)
    }

    /// The services of a pod's namespace whose selector matches it.
    fn selecting(&self, pod: &Value) -> Vec<Key> {
        let (namespace, _) = key_of(pod);
        let labels = json::at(pod, "/metadata/labels").and_then(Value::as_object);
        self.services
            .range((namespace.clone(), String::new())..)
            .take_while(|((ns, _), _)| *ns == namespace)
            .filter(|(_, service)| selector(service).is_some_and(|s| selects(s, labels)))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Writes (or deletes) one service's endpoints. One write per service at a time, as
    /// Kubernetes' work queue has it: a service marked meanwhile is synced when it ends, so a
    /// late write never undoes a later one (endpoints created again after their service's).
    fn sync(&mut self, key: &Key, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        let namespace = key.0.clone();
        let service = self.services.get(key);
        let written = match service.map(|service| (service, selector(service))) {
            // The service is gone: so are its Endpoints and the slices mirroring them; the
            // slices from its pods are the garbage collector's to delete through their owner
            // reference, as Kubernetes leaves them (and keeps them for an orphaning delete).
            None => {
                self.retries.remove(key);
                self.trigger_times.forget(key);
                let name = key.1.clone();
                Box::pin(
                    async move {
                        let options = DeleteOptions::default();
                        let endpoints = resources::core("endpoints");
                        match client.delete(endpoints, &namespace, &name, &options).await {
                            Ok(_) | Err(ApiError::NotFound { .. }) => {}
                            Err(error) => return Err(error),
                        }
                        let keeper = Keeper::Mirroring;
                        endpoint_slices::delete_all(client.as_ref(), keeper, &namespace, &name)
                            .await?;
                        Ok(Written::new())
                    }
                    .map(Synced::from),
                ) as futures::future::BoxFuture<'static, Synced>
            }
            // Without a selector, the Endpoints its user writes are mirrored (an ExternalName
            // service's too, as Kubernetes' mirroring controller asks only whether the service
            // has a selector, not its type); the slices it had from its pods stay, as in
            // Kubernetes.
            Some((service, None)) => {
                let name = key.1.clone();
                let selects = given_selector(service).is_some();
                let endpoints = self.endpoints.get(key).filter(|_| !selects).cloned();
                Box::pin(
                    async move {
                        match endpoints {
                            Some(endpoints) => {
                                let mirrored = endpoint_slices::mirrored(&endpoints);
                                let keeper = Keeper::Mirroring;
                                endpoint_slices::write(
                                    client.as_ref(),
                                    keeper,
                                    &endpoints,
                                    mirrored,
                                )
                                .await
                            }
                            None => {
                                let keeper = Keeper::Mirroring;
                                endpoint_slices::delete_all(
                                    client.as_ref(),
                                    keeper,
                                    &namespace,
                                    &name,
                                )
                                .await
                                .map(|()| Written::new())
                            }
                        }
                    }
                    .map(Synced::from),
                )
            }
            Some((service, Some(selector))) => {
                let selected: Vec<&Value> = self
                    .pods
                    .objects()
                    .in_namespace(&namespace)
                    .filter(|pod| selects(selector, pod_labels(pod)))
                    .collect();
                let mut desired = desired_endpoints(service, &selected);
                let mut slices = endpoint_slices::desired(service, &selected, &self.nodes);
                let trigger = self.trigger_times.sync(key, service, &selected);
                for object in std::iter::once(&mut desired).chain(&mut slices) {
                    trigger_time::annotate(object, trigger.as_deref());
                }
                let service = service.clone();
                Box::pin(async move {
                    // The Endpoints and the slices are written apart, as Kubernetes' two
                    // controllers write them: Endpoints refused (a quota on them) do not keep
                    // the slices, which the node proxies route by, from the service.
                    let endpoints = write(client.as_ref(), &namespace, desired).await;
                    let keeper = Keeper::FromPods;
                    let written =
                        match endpoint_slices::write(client.as_ref(), keeper, &service, slices)
                            .await
                        {
                            Ok(written) => written,
                            Err(error) => return Synced::from(Err(error)),
                        };
                    // What was mirrored while it had no selector goes, as in Kubernetes.
                    let name = object_name(&service);
                    let keeper = Keeper::Mirroring;
                    let unmirrored =
                        endpoint_slices::delete_all(client.as_ref(), keeper, &namespace, name)
                            .await;
                    // The slices written count whatever else failed (their own changes coming
                    // back are not someone else's).
                    Synced { written, result: endpoints.and(unmirrored) }
                })
            }
        };
        self.in_flight.insert(key.clone());
        let key = key.clone();
        ctx.spawn(written.into_actor(self).map(move |synced, controller, ctx| {
            controller.in_flight.remove(&key);
            let namespace = &key.0;
            for (slice, generation) in synced.written {
                controller.slice_generations.insert((namespace.clone(), slice), generation);
            }
            for (slice, generation) in controller.unconfirmed.remove(&key).unwrap_or_default() {
                match generation {
                    Some(generation) if controller.changed_by_others(&slice, generation) => {
                        controller.dirty.insert(key.clone());
                    }
                    Some(_) => {}
                    // Deleted after the write made it: not the controller's to know any more.
                    None => _ = controller.slice_generations.remove(&slice),
                }
            }
            match synced.result {
                Ok(()) => {
                    controller.retries.remove(&key);
                    if controller.dirty.contains(&key) {
                        controller.mark(key, ctx);
                    }
                }
                // A conflict with another writer, or a race with a delete: tried again after a
                // back-off.
                Err(error) => {
                    tracing::debug!(name = %key.1, %error, "writing endpoints");
                    let delay = super::back_off(&mut controller.retries, &key);
                    ctx.run_later(delay, move |controller, ctx| controller.mark(key, ctx));
                }
            }
        }));
    }
}

/// What one sync wrote of the service's slices (with their generations), and whether all of
/// it went through.
struct Synced {
    written: Written,
    result: Result<(), ApiError>,
}

impl From<Result<Written, ApiError>> for Synced {
    fn from(result: Result<Written, ApiError>) -> Self {
        match result {
            Ok(written) => Synced { written, result: Ok(()) },
            Err(error) => Synced { written: Written::new(), result: Err(error) },
        }
    }
}

/// Creates or updates the endpoints to `desired`, unless they hold it already.
async fn write(
    client: &dyn ApiClient,
    namespace: &str,
    mut desired: Value,
) -> Result<(), ApiError> {
    let name = object_name(&desired).to_string();
    match client.get(resources::core("endpoints"), namespace, &name).await {
        Ok(mut current) => {
            let labels = |object: &Value| json::at(object, "/metadata/labels").cloned();
            let over_capacity = |object: &Value| {
                let annotations = json::at(object, "/metadata/annotations");
                annotations.and_then(|a| a.get(endpoints::OVER_CAPACITY)).cloned()
            };
            let truncated = over_capacity(&desired).is_some();
            if current.get("subsets") == desired.get("subsets")
                && labels(&current) == labels(&desired)
                && over_capacity(&current) == over_capacity(&desired)
            {
                return Ok(());
            }
            endpoints::mark_capacity(&mut current, truncated);
            // Only the subsets, the labels and the trigger time are the controller's: the
            // rest of the object (other annotations, owners, finalizers) stays as it is.
            match desired.as_object_mut().and_then(|d| d.remove("subsets")) {
                Some(subsets) => current["subsets"] = subsets,
                None => {
                    current.as_object_mut().map(|c| c.remove("subsets"));
                }
            }
            trigger_time::annotate(&mut current, trigger_time::annotation(&desired));
            let metadata = &mut current["metadata"];
            match labels(&desired) {
                Some(labels) => metadata["labels"] = labels,
                None => {
                    metadata.as_object_mut().map(|m| m.remove("labels"));
                }
            }
            let object = events::ObjectRef::of(resources::core("endpoints"), &current);
            let updated = client.update(resources::core("endpoints"), namespace, current).await;
            let failed = format!("Failed to update endpoint {namespace}/{name}");
            warn_unwritten(client, object, updated, "FailedToUpdateEndpoint", failed).await
        }
        Err(ApiError::NotFound { .. }) => {
            let object = events::ObjectRef::of(resources::core("endpoints"), &desired);
            let created = client.create(resources::core("endpoints"), namespace, desired).await;
            let failed = format!("Failed to create endpoint for service {namespace}/{name}");
            warn_unwritten(client, object, created, "FailedToCreateEndpoint", failed).await
        }
        Err(error) => Err(error),
    }
}

/// `written`, with a Warning event about the Endpoints (`object`) when they could not be
/// written, in Kubernetes' words (none in a namespace being deleted, where creates go on
/// failing).
async fn warn_unwritten(
    client: &dyn ApiClient,
    object: events::ObjectRef,
    written: Result<Value, ApiError>,
    reason: &str,
    failed: String,
) -> Result<(), ApiError> {
    let error = match written {
        Ok(_) => return Ok(()),
        Err(error) => error,
    };
    if !error.has_cause("NamespaceTerminating") {
        let message = format!("{failed}: {error}");
        events::record(client, &object, EventKind::Warning, reason, &message, COMPONENT).await;
    }
    Err(error)
}

/// The labels a service's endpoints carry: its own, with the headless mark when (and only
/// when) it has no cluster IP.
pub(super) fn service_labels(service: &Value) -> Value {
    const HEADLESS: &str = "service.kubernetes.io/headless";
    let mut labels = json::at(service, "/metadata/labels").cloned().unwrap_or(json!({}));
    if json::at(service, "/spec/clusterIP") == Some(&json!("None")) {
        labels[HEADLESS] = json!("");
    } else if let Some(labels) = labels.as_object_mut() {
        labels.remove(HEADLESS);
    }
    labels
}

/// The selector the controller follows: none for an ExternalName service, which is a DNS name
/// and gets no endpoints whatever its selector says (as in Kubernetes since 1.23).
fn selector(service: &Value) -> Option<&Map<String, Value>> {
    if json::at(service, "/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        return None;
    }
    given_selector(service)
}

/// The selector a service gives, whatever its type.
fn given_selector(service: &Value) -> Option<&Map<String, Value>> {
    json::at(service, "/spec/selector").and_then(Value::as_object).filter(|s| !s.is_empty())
}

fn pod_labels(pod: &Value) -> Option<&Map<String, Value>> {
    json::at(pod, "/metadata/labels").and_then(Value::as_object)
}

/// Whether a pod is listed at all: it has an IP, is not finished, and is not being deleted
/// (unless the service publishes not-ready addresses, which keeps terminating pods).
pub(super) fn listed(pod: &Value, publish_not_ready: bool) -> bool {
    let ip = json::at(pod, "/status/podIP").and_then(Value::as_str).unwrap_or("");
    let phase = json::at(pod, "/status/phase").and_then(Value::as_str);
    let deleting = json::at(pod, "/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
    !ip.is_empty()
        && !matches!(phase, Some("Succeeded" | "Failed"))
        && (publish_not_ready || !deleting)
}

/// The port of `pod` a service port sends to: its `targetPort` as a number, or the container
/// port of that name and protocol (`None` when the pod has none).
fn target_port(pod: &Value, service_port: &Value, protocol: &str) -> Option<i64> {
    match service_port.get("targetPort").or_else(|| service_port.get("port")) {
        Some(Value::Number(number)) => number.as_i64(),
        Some(Value::String(name)) => {
            // Its containers', then its sidecars' (init containers that keep running).
            let containers = json::at(pod, "/spec/containers").and_then(Value::as_array);
            let init = json::at(pod, "/spec/initContainers").and_then(Value::as_array);
            let sidecars = init.into_iter().flatten().filter(|c| c["restartPolicy"] == "Always");
            let ports = (containers.into_iter().flatten().chain(sidecars))
                .filter_map(|c| c["ports"].as_array())
                .flatten();
            ports
                .filter(|p| p["name"] == name.as_str())
                .find(|p| p["protocol"].as_str().unwrap_or("TCP") == protocol)
                .and_then(|p| p["containerPort"].as_i64())
        }
        _ => None,
    }
}

/// The ports of `pod` the service's ports send to, in the service's order (`name` and
/// `appProtocol` when the service port has them); those that do not resolve on the pod (a
/// named target port it does not declare) are left out.
pub(super) fn resolved_ports(pod: &Value, service_ports: &[Value]) -> Vec<Value> {
    let mut ports = Vec::new();
    for service_port in service_ports {
        let protocol = service_port["protocol"].as_str().unwrap_or("TCP");
        let Some(port) = target_port(pod, service_port, protocol) else { continue };
        let mut endpoint_port = json!({"port": port, "protocol": protocol});
        for field in ["name", "appProtocol"] {
            if let Some(value) =
                service_port.get(field).filter(|v| v.as_str().is_some_and(|v| !v.is_empty()))
            {
                endpoint_port[field] = value.clone();
            }
        }
        ports.push(endpoint_port);
    }
    ports
}

/// The Endpoints the service should have, given the pods its selector matches: each pod's
/// address with the ports it offers, repacked as Kubernetes lays subsets out, and cut to
/// [`endpoints::MAX_ADDRESSES`] addresses (marked so) as its controller does.
fn desired_endpoints(service: &Value, pods: &[&Value]) -> Value {
    let (namespace, name) = key_of(service);
    let publish_not_ready =
        json::at(service, "/spec/publishNotReadyAddresses") == Some(&json!(true));
    let service_ports =
        json::at(service, "/spec/ports").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut per_pod = Vec::new();
    for pod in pods.iter().filter(|pod| listed(pod, publish_not_ready)) {
        let mut address = json!({"ip": pod["status"]["podIP"],
            "targetRef": {"kind": "Pod", "namespace": namespace, "name": object_name(pod),
                "uid": object_uid(pod)}});
        if let Some(node) =
            json::at(pod, "/spec/nodeName").filter(|n| n.as_str().is_some_and(|n| !n.is_empty()))
        {
            address["nodeName"] = node.clone();
        }
        let hostname = json::at(pod, "/spec/hostname").and_then(Value::as_str).unwrap_or("");
        if !hostname.is_empty()
            && json::at(pod, "/spec/subdomain").and_then(Value::as_str) == Some(name.as_str())
        {
            address["hostname"] = json!(hostname);
        }
        // A pod none of the service's ports resolves on is left out (a service with no
        // ports at all lists its pods without ports).
        let ports = resolved_ports(pod, &service_ports);
        if ports.is_empty() && !service_ports.is_empty() {
            continue;
        }
        let field = if publish_not_ready || crate::model::is_ready(pod) {
            "addresses"
        } else {
            "notReadyAddresses"
        };
        let mut subset = json!({field: [address]});
        if !ports.is_empty() {
            subset["ports"] = Value::Array(ports);
        }
        per_pod.push(subset);
    }
    let mut subsets = endpoints::repack(&per_pod);
    let truncated = endpoints::truncate(&mut subsets);
    let labels = service_labels(service);
    let mut metadata = json!({"name": name, "namespace": namespace});
    if labels.as_object().is_some_and(|l| !l.is_empty()) {
        metadata["labels"] = labels;
    }
    let mut object = json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": metadata});
    endpoints::mark_capacity(&mut object, truncated);
    if !subsets.is_empty() {
        object["subsets"] = Value::Array(subsets);
    }
    object
}

impl Actor for EndpointsController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(ctx, client, resources::core("services"), Scope::default(), Services);
        let client = self.client.clone();
        let endpoints = resources::core("endpoints");
        informer::feed_actor(ctx, client, endpoints, Scope::default(), EndpointsFeed);
        let client = self.client.clone();
        informer::feed_actor(ctx, client, resources::core("nodes"), Scope::default(), Nodes);
        let client = self.client.clone();
        let slices = endpoint_slices::slices();
        informer::feed_actor(ctx, client, slices, Scope::default(), SlicesFeed);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.pods.let_go();
    }
}

impl Handler<Services> for EndpointsController {
    type Result = ();

    fn handle(&mut self, Services(feed): Services, ctx: &mut Context<Self>) {
        match feed {
            Feed::Listed(items) => {
                // Those deleted while the watch was down lose their endpoints too.
                let keys = relist(&mut self.services, items);
                keys.into_iter().for_each(|key| self.mark(key, ctx));
            }
            Feed::Changed(EventType::Deleted, service) => {
                let key = key_of(&service);
                self.services.remove(&key);
                self.retries.remove(&key);
                self.mark(key, ctx);
            }
            Feed::Changed(_, service) => {
                let key = key_of(&service);
                self.services.insert(key.clone(), service);
                self.mark(key, ctx);
            }
            Feed::Unavailable(_) => return,
        }
        self.follow_pods(ctx);
    }
}

impl Handler<EndpointsFeed> for EndpointsController {
    type Result = ();

    /// A change to the Endpoints of a service without a selector is mirrored; those of a
    /// service with one are this controller's own.
    fn handle(&mut self, EndpointsFeed(feed): EndpointsFeed, ctx: &mut Context<Self>) {
        let changed = match feed {
            Feed::Listed(items) => {
                self.endpoints_listed = true;
                relist(&mut self.endpoints, items)
            }
            Feed::Changed(EventType::Deleted, endpoints) => {
                let key = key_of(&endpoints);
                self.endpoints.remove(&key);
                BTreeSet::from([key])
            }
            Feed::Changed(_, endpoints) => {
                let key = key_of(&endpoints);
                self.endpoints.insert(key.clone(), endpoints);
                BTreeSet::from([key])
            }
            Feed::Unavailable(_) => return,
        };
        for key in changed {
            // A service with a selector gets back Endpoints someone deleted (Kubernetes'
            // `onEndpointsDelete`); the sync finds nothing to do for its own writes.
            let mirrored =
                self.services.get(&key).is_some_and(|service| selector(service).is_none());
            if mirrored || (!self.endpoints.contains_key(&key) && self.services.contains_key(&key))
            {
                self.mark(key, ctx);
            }
        }
    }
}

impl Handler<SlicesFeed> for EndpointsController {
    type Result = ();

    /// A slice of the controller's that someone else changed (its generation is past the one
    /// the controller wrote) or deleted has its service synced again, which puts it back, as
    /// Kubernetes' EndpointSlice controllers do.
    fn handle(&mut self, SlicesFeed(feed): SlicesFeed, ctx: &mut Context<Self>) {
        let service_key = |slice: &Value| {
            let service = endpoint_slices::service_of(slice)?;
            Some((key_of(slice).0, service.to_string()))
        };
        match feed {
            // Whatever changed while the watch was down: every service is looked at again.
            Feed::Listed(slices) => {
                self.slice_generations.clear();
                self.slice_services = slices
                    .iter()
                    .filter_map(|slice| Some((key_of(slice), service_key(slice)?)))
                    .collect();
                let keys: Vec<Key> = self.services.keys().cloned().collect();
                keys.into_iter().for_each(|key| self.mark(key, ctx));
            }
            Feed::Changed(EventType::Deleted, slice) => {
                let slice_key = key_of(&slice);
                self.slice_generations.remove(&slice_key);
                let was = self.slice_services.remove(&slice_key);
                let services: BTreeSet<Key> = was.into_iter().chain(service_key(&slice)).collect();
                for key in services {
                    if self.in_flight.contains(&key) {
                        // The write under way may have made it: its generation comes after.
                        let unconfirmed = self.unconfirmed.entry(key.clone()).or_default();
                        unconfirmed.push((slice_key.clone(), None));
                    }
                    self.mark(key, ctx);
                }
            }
            Feed::Changed(_, slice) => {
                let now = service_key(&slice);
                let was = match &now {
                    Some(key) => self.slice_services.insert(key_of(&slice), key.clone()),
                    None => self.slice_services.remove(&key_of(&slice)),
                };
                if let Some(was) = was.filter(|was| now.as_ref() != Some(was)) {
                    self.mark(was, ctx);
                }
                let Some(key) = now else { return };
                let generation = json::at(&slice, "/metadata/generation").and_then(Value::as_i64);
                let (slice, generation) = (key_of(&slice), generation.unwrap_or(0));
                if self.in_flight.contains(&key) {
                    self.unconfirmed.entry(key).or_default().push((slice, Some(generation)));
                } else if self.changed_by_others(&slice, generation) {
                    self.mark(key, ctx);
                }
            }
            Feed::Unavailable(_) => {}
        }
    }
}

impl Handler<Nodes> for EndpointsController {
    type Result = ();

    /// A node's zone is read when its pods' slices are next written, as Kubernetes reads it;
    /// a node that comes or goes has the services of its pods synced (their slices leave out
    /// the pods of nodes that do not exist).
    fn handle(&mut self, Nodes(feed): Nodes, ctx: &mut Context<Self>) {
        let came_or_went = match feed {
            Feed::Listed(nodes) => {
                self.nodes.listed(&nodes);
                let keys: Vec<Key> = self.services.keys().cloned().collect();
                keys.into_iter().for_each(|key| self.mark(key, ctx));
                return;
            }
            Feed::Changed(EventType::Deleted, node) => {
                self.nodes.deleted(object_name(&node));
                node
            }
            Feed::Changed(_, node) if self.nodes.changed(&node) => node,
            Feed::Changed(..) | Feed::Unavailable(_) => return,
        };
        let name = object_name(&came_or_went);
        let on_node: Vec<Key> = self
            .pods
            .objects()
            .all()
            .filter(|pod| json::at(pod, "/spec/nodeName").and_then(Value::as_str) == Some(name))
            .flat_map(|pod| self.selecting(pod))
            .collect();
        on_node.into_iter().for_each(|key| self.mark(key, ctx));
    }
}

impl Handler<Pods> for EndpointsController {
    type Result = ();

    fn handle(&mut self, Pods(run, feed): Pods, ctx: &mut Context<Self>) {
        match self.pods.apply(run, feed) {
            Applied::Listed => {
                let keys: Vec<Key> = self.services.keys().cloned().collect();
                keys.into_iter().for_each(|key| self.mark(key, ctx));
            }
            Applied::Changed { object, previous } => {
                let mut concerned = self.selecting(&object);
                concerned.extend(previous.iter().flat_map(|previous| self.selecting(previous)));
                concerned.into_iter().for_each(|key| self.mark(key, ctx));
            }
            Applied::Nothing => {}
        }
    }
}

impl Handler<SyncDirty> for EndpointsController {
    type Result = ();

    fn handle(&mut self, _: SyncDirty, ctx: &mut Context<Self>) {
        self.sync_queued = false;
        let dirty = std::mem::take(&mut self.dirty);
        for key in dirty {
            // A service with a selector waits for the pods to be listed, one without for the
            // Endpoints (a gone one does not), and any waits for its write in flight.
            let unlisted = match self.services.get(&key).map(selector) {
                Some(Some(_)) => !self.pods.objects().is_listed(),
                Some(None) => !self.endpoints_listed,
                None => false,
            };
            if unlisted || self.in_flight.contains(&key) {
                self.dirty.insert(key);
            } else {
                self.sync(&key, ctx);
            }
        }
    }
}

impl Handler<StopEndpointsController> for EndpointsController {
    type Result = ();

    fn handle(&mut self, _: StopEndpointsController, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::controllers::GarbageCollector;
    use crate::core::{ApiCore, ListOptions, PatchType, WatchOptions};
    use crate::testing::{core, eventually};

    fn pod(name: &str, ip: &str, ready: bool, ports: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": ports}]},
            "status": {"phase": "Running", "podIP": ip,
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    /// The EndpointSlices in `default` labelled as `service`'s.
    async fn slices_of(core: &ApiCore, service: &str) -> Vec<Value> {
        let options = ListOptions {
            label_selector: Some(format!("kubernetes.io/service-name={service}")),
            ..ListOptions::default()
        };
        let slices = endpoint_slices::slices();
        ApiClient::list(core, slices, Some("default"), &options).await.unwrap().items
    }

    /// How many slice generations the controller keeps, and how many slice changes wait for
    /// a write under way (a test's message).
    #[derive(Message)]
    #[rtype(result = "(usize, usize)")]
    struct Tracked;

    impl Handler<Tracked> for EndpointsController {
        type Result = MessageResult<Tracked>;
        fn handle(&mut self, _: Tracked, _: &mut Context<Self>) -> Self::Result {
            let waiting = self.unconfirmed.values().map(Vec::len).sum();
            MessageResult((self.slice_generations.len(), waiting))
        }
    }

    #[actix::test]
    async fn a_slice_deleted_while_its_services_write_is_under_way_is_forgotten() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::OnceLock;

        use futures::FutureExt;

        use crate::testing::{Call, Hooked};

        let core = core().await;
        let controller: Arc<OnceLock<Addr<EndpointsController>>> = Arc::default();
        let slice_made = Arc::new(AtomicBool::new(false));
        let struck: Arc<OnceLock<()>> = Arc::default();
        // After the service's slice is made, before the write is done: the service and its
        // slice are deleted, and the controller sees the slice go.
        let hook = {
            let (controller, slice_made, struck) =
                (controller.clone(), slice_made.clone(), struck.clone());
            move |core: ApiCore, call: Call| {
                let (controller, slice_made, struck) =
                    (controller.clone(), slice_made.clone(), struck.clone());
                async move {
                    let slices = endpoint_slices::slices();
                    match call {
                        Call::Create { resource, .. } if resource == slices => {
                            slice_made.store(true, Ordering::SeqCst);
                        }
                        Call::List { resource } if resource == slices => {
                            if !slice_made.swap(false, Ordering::SeqCst) || struck.get().is_some() {
                                return;
                            }
                            let gone = DeleteOptions::default();
                            let services = resources::core("services");
                            ApiClient::delete(&core, services, "default", "web", &gone)
                                .await
                                .unwrap();
                            for slice in slices_of(&core, "web").await {
                                let name = object_name(&slice);
                                ApiClient::delete(&core, slices, "default", name, &gone)
                                    .await
                                    .unwrap();
                            }
                            let controller = controller.get().unwrap();
                            let deadline = std::time::Instant::now() + Duration::from_secs(30);
                            while controller.send(Tracked).await.unwrap().1 == 0 {
                                assert!(std::time::Instant::now() < deadline, "never seen");
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            struck.set(()).unwrap();
                        }
                        _ => {}
                    }
                }
                .boxed()
            }
        };
        let client = Arc::new(Hooked::new(&core, hook));
        controller.set(EndpointsController::new(client).start()).unwrap();
        let service = json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"},
            "ports": [{"port": 80, "targetPort": 8080}]}});
        ApiClient::create(&core, resources::core("services"), "default", service).await.unwrap();
        let controller = controller.get().unwrap();
        eventually("nothing kept of the deleted slice", async || {
            let tracked = controller.send(Tracked).await.unwrap();
            (struck.get().is_some() && tracked == (0, 0)).then_some(())
        })
        .await;
        assert!(slices_of(&core, "web").await.is_empty());
    }

    #[test]
    fn an_external_name_service_is_followed_by_no_selector() {
        let service = |kind: &str| json!({"spec": {"type": kind, "selector": {"app": "web"}}});
        assert!(selector(&service("ClusterIP")).is_some());
        assert!(selector(&service("ExternalName")).is_none());
        assert!(selector(&json!({"spec": {"selector": {}}})).is_none());
    }

    #[test]
    fn ready_pods_are_addresses_the_others_not_ready_ones_packed_by_ports() {
        let service = json!({"metadata": {"name": "web", "namespace": "default", "labels": {"tier": "front"}},
            "spec": {"selector": {"app": "web"}, "ports": [
                {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]}});
        let http = json!([{"name": "http", "containerPort": 8080, "protocol": "TCP"}]);
        let other = json!([{"name": "http", "containerPort": 9090, "protocol": "TCP"}]);
        let mut gone = pod("gone", "127.0.0.9", true, http.clone());
        gone["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let pods = [
            pod("b", "127.0.0.3", true, http.clone()),
            pod("a", "127.0.0.2", true, http.clone()),
            pod("slow", "127.0.0.4", false, http.clone()),
            pod("odd", "127.0.0.5", true, other),
            pod("unnamed", "127.0.0.6", true, json!([])),
            pod("no-ip", "", true, http),
            gone,
        ];
        let refs: Vec<&Value> = pods.iter().collect();
        let endpoints = desired_endpoints(&service, &refs);
        assert_eq!(endpoints["metadata"]["labels"], json!({"tier": "front"}));
        let subsets = endpoints["subsets"].as_array().unwrap();
        assert_eq!(subsets.len(), 2, "{subsets:?}");
        let by_port = |port: i64| subsets.iter().find(|s| s["ports"][0]["port"] == port).unwrap();
        let ips = |subset: &Value, field: &str| -> Vec<String> {
            let list = subset[field].as_array().cloned().unwrap_or_default();
            list.iter().map(|a| a["ip"].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(ips(by_port(8080), "addresses"), ["127.0.0.2", "127.0.0.3"]);
        assert_eq!(ips(by_port(8080), "notReadyAddresses"), ["127.0.0.4"]);
        assert_eq!(
            by_port(8080)["ports"][0],
            json!({"name": "http", "port": 8080, "protocol": "TCP"})
        );
        assert_eq!(ips(by_port(9090), "addresses"), ["127.0.0.5"]);
        let address = &by_port(8080)["addresses"][0];
        assert_eq!(address["nodeName"], "n1");
        assert_eq!(
            address["targetRef"],
            json!({"kind": "Pod", "namespace": "default", "name": "a", "uid": "uid-a"})
        );
    }

    #[test]
    fn each_port_lists_every_pod_offering_it_sidecars_included() {
        let service = json!({"metadata": {"name": "web", "namespace": "default",
                "labels": {"service.kubernetes.io/headless": ""}},
            "spec": {"selector": {"app": "web"}, "clusterIP": "10.0.0.1", "ports": [
                {"name": "a", "port": 80, "targetPort": "a"},
                {"name": "b", "port": 90, "targetPort": "b"}]}});
        let both =
            json!([{"name": "a", "containerPort": 8080}, {"name": "b", "containerPort": 9090}]);
        let mut sidecar =
            pod("sidecar", "127.0.0.4", true, json!([{"name": "a", "containerPort": 8080}]));
        sidecar["spec"]["initContainers"] = json!([{"name": "s", "restartPolicy": "Always",
            "ports": [{"name": "b", "containerPort": 9090}]}]);
        let pods = [
            pod("pa", "127.0.0.1", true, both),
            pod("pb", "127.0.0.2", true, json!([{"name": "a", "containerPort": 8080}])),
            sidecar,
        ];
        let refs: Vec<&Value> = pods.iter().collect();
        let endpoints = desired_endpoints(&service, &refs);
        // A service with a cluster IP is not headless, whatever its labels say.
        assert!(endpoints["metadata"].get("labels").is_none(), "{endpoints}");
        let subsets = endpoints["subsets"].as_array().unwrap();
        let with = |name: &str| -> Vec<&str> {
            let subset = subsets
                .iter()
                .find(|s| s["ports"].as_array().unwrap().iter().any(|p| p["name"] == name));
            let addresses = subset.unwrap()["addresses"].as_array().unwrap();
            addresses.iter().map(|a| a["targetRef"]["name"].as_str().unwrap()).collect()
        };
        assert_eq!(with("a"), ["pa", "pb", "sidecar"]);
        assert_eq!(with("b"), ["pa", "sidecar"]);
        assert_eq!(subsets.len(), 2, "one subset per set of addresses: {subsets:?}");
    }

    #[actix::test]
    async fn a_services_endpoints_follow_its_pods_and_go_with_it() {
        let core = core().await;
        let _controller = EndpointsController::new(Arc::new(core.clone())).start();
        let service = json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"},
            "ports": [{"port": 80, "targetPort": 8080}]}});
        let service = ApiClient::create(&core, resources::core("services"), "default", service)
            .await
            .unwrap();
        let created = json!({"metadata": {"name": "p", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let created =
            ApiClient::create(&core, resources::core("pods"), "default", created).await.unwrap();
        let get = || async {
            ApiClient::get(&core, resources::core("endpoints"), "default", "web").await.ok()
        };
        let trigger = |endpoints: &Value| {
            endpoints["metadata"]["annotations"][trigger_time::ANNOTATION].clone()
        };
        let empty = eventually("endpoints", || async { get().await }).await;
        assert!(empty.get("subsets").is_none(), "no pod has an IP yet: {empty}");
        // Written for a new service: changed at its creation.
        assert_eq!(trigger(&empty), service["metadata"]["creationTimestamp"], "{empty}");
        // The pod gets an IP and becomes ready, as its node agent reports it: changed then.
        let mut running = created.clone();
        running["status"] = json!({"phase": "Running", "podIP": "127.0.0.7",
            "conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-12-01T10:00:00Z"}]});
        ApiClient::update_status(&core, resources::core("pods"), "default", running).await.unwrap();
        let listed = eventually("the pod listed", || async {
            get().await.filter(|e| e["subsets"][0]["addresses"][0]["ip"] == "127.0.0.7")
        })
        .await;
        assert_eq!(listed["subsets"][0]["ports"], json!([{"port": 8080, "protocol": "TCP"}]));
        assert_eq!(trigger(&listed), "2026-12-01T10:00:00Z", "{listed}");
        // A change of the pod that changes nothing listed writes nothing; one that does, does:
        // the endpoints change once between the two.
        let from = listed["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        let options = WatchOptions { resource_version: Some(from), ..WatchOptions::default() };
        let mut changes =
            ApiClient::watch(&core, resources::core("endpoints"), Some("default"), &options)
                .await
                .unwrap();
        let patch = json!({"metadata": {"labels": {"unrelated": "x"}}});
        ApiClient::patch(
            &core,
            resources::core("pods"),
            "default",
            "p",
            PatchType::Merge,
            &patch,
            false,
        )
        .await
        .unwrap();
        let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False",
            "lastTransitionTime": "2026-12-01T10:05:00Z"}]}});
        ApiClient::patch(
            &core,
            resources::core("pods"),
            "default",
            "p",
            PatchType::Merge,
            &not_ready,
            true,
        )
        .await
        .unwrap();
        use futures::StreamExt;
        let first = tokio::time::timeout(Duration::from_secs(30), changes.next()).await.unwrap();
        let Some(crate::client::ClientEvent::Object(EventType::Modified, changed)) = first else {
            panic!("a change of the endpoints: {first:?}")
        };
        assert_eq!(changed["subsets"][0]["notReadyAddresses"][0]["ip"], "127.0.0.7", "{changed}");
        assert_eq!(trigger(&changed), "2026-12-01T10:05:00Z", "{changed}");
        ApiClient::delete(
            &core,
            resources::core("services"),
            "default",
            "web",
            &DeleteOptions::default(),
        )
        .await
        .unwrap();
        eventually("the endpoints gone", || async { get().await.is_none().then_some(()) }).await;
    }

    /// Endpoints refused (here by a quota allowing none) keep neither the slices from the
    /// service nor quiet: the slices are written, and a Warning event says why the Endpoints
    /// are not.
    #[actix::test]
    async fn endpoints_refused_leave_the_slices_written_and_say_why() {
        let core = core().await;
        let quotas = resources::core("resourcequotas");
        let quota = json!({"metadata": {"name": "no-endpoints"},
            "spec": {"hard": {"count/endpoints": "0"}}});
        let mut quota = ApiClient::create(&core, quotas, "default", quota).await.unwrap();
        quota["status"] =
            json!({"hard": {"count/endpoints": "0"}, "used": {"count/endpoints": "0"}});
        ApiClient::update_status(&core, quotas, "default", quota).await.unwrap();
        let _controller = EndpointsController::new(Arc::new(core.clone())).start();
        let service = json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"},
            "ports": [{"port": 80, "targetPort": 8080}]}});
        ApiClient::create(&core, resources::core("services"), "default", service).await.unwrap();
        eventually("the service's slice", || async { slices_of(&core, "web").await.pop() }).await;
        let events = resources::core("events");
        let options = ListOptions {
            field_selector: Some("involvedObject.name=web,reason=FailedToCreateEndpoint".into()),
            ..ListOptions::default()
        };
        let warning = eventually("a FailedToCreateEndpoint event", || async {
            ApiClient::list(&core, events, Some("default"), &options).await.ok()?.items.pop()
        })
        .await;
        assert_eq!(warning["type"], "Warning");
        assert_eq!(warning["involvedObject"]["kind"], "Endpoints");
        let message = warning["message"].as_str().unwrap();
        assert!(
            message.starts_with("Failed to create endpoint for service default/web: ")
                && message.contains("exceeded quota: no-endpoints"),
            "{message}"
        );
        let endpoints = ApiClient::get(&core, resources::core("endpoints"), "default", "web").await;
        assert!(matches!(endpoints, Err(ApiError::NotFound { .. })), "{endpoints:?}");
    }

    #[actix::test]
    async fn a_services_endpoint_slices_follow_its_pods_and_go_with_it() {
        let core = core().await;
        let node = json!({"metadata": {"name": "n"}});
        ApiClient::create(&core, resources::core("nodes"), "", node).await.unwrap();
        let _controller = EndpointsController::new(Arc::new(core.clone())).start();
        let service = json!({"metadata": {"name": "web", "labels": {"tier": "front"}},
            "spec": {"selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}});
        let service = ApiClient::create(&core, resources::core("services"), "default", service)
            .await
            .unwrap();
        let list = || slices_of(&core, "web");
        // Selecting nothing yet: one slice without endpoints.
        let placeholder = eventually("a slice", || async { list().await.pop() }).await;
        assert!(placeholder.get("endpoints").is_none(), "{placeholder}");
        assert_eq!(placeholder["metadata"]["labels"]["tier"], "front");
        assert_eq!(
            placeholder["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
            "endpointslice-controller.k8s.io"
        );
        let owner = &placeholder["metadata"]["ownerReferences"][0];
        assert_eq!((&owner["name"], &owner["uid"]), (&json!("web"), &service["metadata"]["uid"]));
        assert!(object_name(&placeholder).starts_with("web-"), "{placeholder}");
        let trigger =
            |slice: &Value| slice["metadata"]["annotations"][trigger_time::ANNOTATION].clone();
        assert_eq!(trigger(&placeholder), service["metadata"]["creationTimestamp"]);
        let pod = json!({"metadata": {"name": "p", "labels": {"app": "web"}},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i",
                "ports": [{"name": "http", "containerPort": 8080}]}]}});
        let pod = ApiClient::create(&core, resources::core("pods"), "default", pod).await.unwrap();
        let mut running = pod.clone();
        running["status"] = json!({"phase": "Running", "podIP": "127.0.0.9",
            "conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-12-01T11:00:00Z"}]});
        ApiClient::update_status(&core, resources::core("pods"), "default", running).await.unwrap();
        let filled = eventually("the pod in the slice", || async {
            let mut all = list().await;
            (all.len() == 1 && all[0].get("endpoints").is_some()).then(|| all.remove(0))
        })
        .await;
        assert_eq!(object_name(&filled), object_name(&placeholder), "updated in place");
        assert_eq!(trigger(&filled), "2026-12-01T11:00:00Z", "{filled}");
        assert_eq!(filled["addressType"], "IPv4");
        assert_eq!(filled["ports"], json!([{"name": "http", "port": 8080, "protocol": "TCP"}]));
        let endpoint = &filled["endpoints"][0];
        assert_eq!(endpoint["addresses"], json!(["127.0.0.9"]));
        assert_eq!(
            endpoint["conditions"],
            json!({"ready": true, "serving": true, "terminating": false})
        );
        assert_eq!(
            (&endpoint["nodeName"], &endpoint["targetRef"]["name"]),
            (&json!("n"), &json!("p"))
        );
        // A second service of the pod loses its selector: the slices it had from its pods
        // stay, as in Kubernetes, and its Endpoints, now its user's, are mirrored; the first
        // is deleted: its slices go with it.
        let other = json!({"metadata": {"name": "other"}, "spec": {"selector": {"app": "web"},
            "ports": [{"port": 80}]}});
        let services = resources::core("services");
        ApiClient::create(&core, services, "default", other).await.unwrap();
        let others = || slices_of(&core, "other");
        eventually("the other's slice", || async { others().await.pop() }).await;
        let unselecting = json!({"spec": {"selector": null}});
        ApiClient::patch(
            &core,
            services,
            "default",
            "other",
            PatchType::Merge,
            &unselecting,
            false,
        )
        .await
        .unwrap();
        let keepers = |slices: Vec<Value>| -> Vec<String> {
            let mut keepers: Vec<String> = slices
                .iter()
                .map(|s| {
                    s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"].to_string()
                })
                .collect();
            keepers.sort();
            keepers
        };
        let mirrored = eventually("the other's Endpoints mirrored", || async {
            let slices = others().await;
            (slices.len() == 2).then_some(slices)
        })
        .await;
        assert_eq!(
            keepers(mirrored.clone()),
            [
                r#""endpointslice-controller.k8s.io""#,
                r#""endpointslicemirroring-controller.k8s.io""#
            ]
        );
        let copy =
            mirrored.iter().find(|s| s["metadata"]["ownerReferences"][0]["kind"] == "Endpoints");
        let copy = copy.expect("owned by the Endpoints");
        assert_eq!(copy["endpoints"][0]["addresses"], json!(["127.0.0.9"]));
        assert_eq!(copy["endpoints"][0]["conditions"], json!({"ready": true}));
        assert_eq!(copy["ports"], json!([{"name": "", "port": 80, "protocol": "TCP"}]));
        // The slices from its pods go through the garbage collector (their owner reference);
        // orphaned, they stay, as in Kubernetes.
        let _collector = GarbageCollector::new(Arc::new(core.clone())).start();
        let options = DeleteOptions::default();
        ApiClient::delete(&core, services, "default", "web", &options).await.unwrap();
        eventually("the slices gone", || async { list().await.is_empty().then_some(()) }).await;
        ApiClient::delete(&core, services, "default", "other", &options).await.unwrap();
        eventually("the other's slices gone", || async { others().await.is_empty().then_some(()) })
            .await;
    }

    /// A service's slices from its pods are the garbage collector's to delete: an orphaning
    /// delete leaves them, and none is made for a service being deleted (which would race the
    /// collector), as Kubernetes' controller leaves them.
    #[actix::test]
    async fn a_deleted_services_slices_are_left_to_the_garbage_collector() {
        let core = core().await;
        let _controller = EndpointsController::new(Arc::new(core.clone())).start();
        let _collector = GarbageCollector::new(Arc::new(core.clone())).start();
        let services = resources::core("services");
        let service = json!({"metadata": {"name": "kept"}, "spec": {"selector": {"app": "x"},
            "ports": [{"port": 80}]}});
        let service = ApiClient::create(&core, services, "default", service).await.unwrap();
        let list = || slices_of(&core, "kept");
        eventually("its slice", || async { list().await.pop() }).await;
        let orphaning =
            DeleteOptions { propagation_policy: Some("Orphan".into()), ..Default::default() };
        ApiClient::delete(&core, services, "default", "kept", &orphaning).await.unwrap();
        let orphan = eventually("its slice orphaned", || async {
            let slice = list().await.pop()?;
            json::at(&slice, "/metadata/ownerReferences").is_none().then_some(slice)
        })
        .await;
        assert_eq!(orphan["metadata"]["labels"]["kubernetes.io/service-name"], "kept");
        // Once the service is gone and the controller has gone on to later work (another
        // service's slice), the orphan is still there.
        eventually("the service gone", || async {
            let gone = ApiClient::get(&core, services, "default", "kept").await;
            matches!(gone, Err(ApiError::NotFound { .. })).then_some(())
        })
        .await;
        let later = json!({"metadata": {"name": "later"}, "spec": {"selector": {"app": "y"},
            "ports": [{"port": 80}]}});
        ApiClient::create(&core, services, "default", later).await.unwrap();
        eventually("the later service's slice", || async { slices_of(&core, "later").await.pop() })
            .await;
        assert_eq!(list().await.len(), 1, "the orphaned slice stays");

        let mut leaving = service;
        leaving["metadata"]["name"] = json!("leaving");
        leaving["metadata"]["deletionTimestamp"] = json!("2026-12-07T00:00:00Z");
        let desired = endpoint_slices::desired(&leaving, &[], &endpoint_slices::Nodes::of(&[]));
        assert_eq!(desired.len(), 1);
        let written = endpoint_slices::write(&core, Keeper::FromPods, &leaving, desired).await;
        assert!(written.unwrap().is_empty(), "no slice made for a service being deleted");
    }

    /// Endpoints and slices of the controller's that someone deletes or edits are put back,
    /// as Kubernetes' controllers put them back; its own writes leave it alone.
    #[actix::test]
    async fn what_others_delete_or_change_is_put_back() {
        let core = core().await;
        let node = json!({"metadata": {"name": "n"}});
        ApiClient::create(&core, resources::core("nodes"), "", node).await.unwrap();
        let _controller = EndpointsController::new(Arc::new(core.clone())).start();
        let (services, pods) = (resources::core("services"), resources::core("pods"));
        let endpoints = resources::core("endpoints");
        let slices = endpoint_slices::slices();
        let service = json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"},
            "ports": [{"port": 80, "targetPort": 8080}]}});
        ApiClient::create(&core, services, "default", service).await.unwrap();
        let created = json!({"metadata": {"name": "p", "labels": {"app": "web"}},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i"}]}});
        let mut running = ApiClient::create(&core, pods, "default", created).await.unwrap();
        running["status"] = json!({"phase": "Running", "podIP": "127.0.0.7",
            "conditions": [{"type": "Ready", "status": "True"}]});
        ApiClient::update_status(&core, pods, "default", running).await.unwrap();
        let slices_of = |service: &'static str| slices_of(&core, service);
        let filled_slice = || async {
            let mut all = slices_of("web").await;
            (all.len() == 1 && all[0].get("endpoints").is_some()).then(|| all.remove(0))
        };
        let filled_endpoints = || async {
            let got = ApiClient::get(&core, endpoints, "default", "web").await.ok();
            got.filter(|e| e.get("subsets").is_some())
        };
        eventually("the endpoints", filled_endpoints).await;
        let slice = eventually("the slice", filled_slice).await;
        let options = DeleteOptions::default();
        ApiClient::delete(&core, endpoints, "default", "web", &options).await.unwrap();
        eventually("the endpoints back", filled_endpoints).await;
        ApiClient::delete(&core, slices, "default", object_name(&slice), &options).await.unwrap();
        let slice = eventually("a slice back", filled_slice).await;
        let emptied = json!([{"op": "remove", "path": "/endpoints"}]);
        let name = object_name(&slice).to_string();
        ApiClient::patch(&core, slices, "default", &name, PatchType::Json, &emptied, false)
            .await
            .unwrap();
        let restored = eventually("the slice's endpoints back", filled_slice).await;
        assert_eq!(object_name(&restored), name, "put back in place");
        assert_eq!(restored["metadata"]["generation"], 3, "{restored}");
        // A mirrored slice likewise.
        let manual = json!({"metadata": {"name": "manual"}, "spec": {"ports": [{"port": 80}]}});
        ApiClient::create(&core, services, "default", manual).await.unwrap();
        let written = json!({"metadata": {"name": "manual"},
            "subsets": [{"addresses": [{"ip": "127.0.0.8"}], "ports": [{"port": 80}]}]});
        ApiClient::create(&core, endpoints, "default", written).await.unwrap();
        let mirrored = || async { slices_of("manual").await.pop() };
        let copy = eventually("the mirrored slice", mirrored).await;
        ApiClient::delete(&core, slices, "default", object_name(&copy), &options).await.unwrap();
        let again = eventually("the mirrored slice back", || async {
            mirrored().await.filter(|s| object_name(s) != object_name(&copy))
        })
        .await;
        assert_eq!(again["endpoints"][0]["addresses"], json!(["127.0.0.8"]));
        // Its own writes did not start a loop: the slice put back is as it was left.
        let settled = slices_of("web").await.pop().unwrap();
        assert_eq!(settled["metadata"]["generation"], 3, "{settled}");
        // A slice with the service's labels that the service does not own is replaced.
        let mut foreign = settled.clone();
        let metadata = foreign["metadata"].as_object_mut().unwrap();
        metadata.retain(|k, _| k == "labels");
        metadata.insert("name".into(), json!("web-foreign"));
        ApiClient::create(&core, slices, "default", foreign).await.unwrap();
        eventually("the foreign slice gone", || async {
            let names: Vec<String> =
                slices_of("web").await.iter().map(|s| object_name(s).to_string()).collect();
            (names == [object_name(&settled)]).then_some(())
        })
        .await;
        // Its slice relabelled to another keeper: the service is given a slice again.
        let relabel = json!({"metadata": {"labels": {
            "endpointslice.kubernetes.io/managed-by": "someone-else"}}});
        let name = object_name(&settled).to_string();
        ApiClient::patch(&core, slices, "default", &name, PatchType::Merge, &relabel, false)
            .await
            .unwrap();
        let replacement = eventually("a slice of the controller's again", || async {
            let managed = |s: &Value| {
                s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"]
                    == "endpointslice-controller.k8s.io"
            };
            slices_of("web").await.into_iter().find(managed)
        })
        .await;
        assert_ne!(object_name(&replacement), name);
    }
}
