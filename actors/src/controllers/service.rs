//! The service controller with a built-in load balancer (the seeds' Service Controller, which
//! in Kubernetes drives a cloud's load balancers; here, like k3s's ServiceLB or MetalLB, the
//! load balancer is this process): every Service of type LoadBalancer that names no
//! `loadBalancerClass` gets an address of its own from `controllers.load_balancer_ip_range`
//! (in 127.0.0.0/8, so no address needs configuring), a listener there on each of its TCP
//! ports that has endpoints, forwarding to the service's ready endpoints, round robin, for the
//! clients in its `loadBalancerSourceRanges` (any, without), and that address in
//! `status.loadBalancer.ingress`. While it holds one, the service carries the
//! `service.kubernetes.io/load-balancer-cleanup` finalizer, so that deleting the service, or
//! changing its type, first closes the listeners and frees the address. A service that asks for an address (`spec.loadBalancerIP`)
//! gets it when it is in the range and free. Addresses are found again after a restart in the
//! services' status. It emits the events Kubernetes' controller does (`EnsuringLoadBalancer`,
//! `EnsuredLoadBalancer`, `DeletingLoadBalancer`, `DeletedLoadBalancer`,
//! `SyncLoadBalancerFailed`). The listeners run on the controller's own thread.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::{json, Value};

use crate::client::cache::Key;
use crate::client::events::{self, EventKind, ObjectRef};
use crate::client::informer::Feed;
use crate::client::ApiClient;
use crate::core::{ApiError, PatchType};
use crate::forwarding::service_table::{self, EndpointSlicesFeed, ServicesFeed};
use crate::forwarding::{Listeners, ServiceTable, Targets};
use crate::model::service_traffic::{client_ip_affinity, load_balancer_source_ranges};
use crate::model::{json, resources};

/// The finalizer a service keeps while it has a load balancer.
pub const CLEANUP_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
/// How often listeners that could not be bound, and services that found no free address, are
/// tried again.
const RETRY_PERIOD: Duration = Duration::from_secs(5);
const COMPONENT: &str = "service-controller";
/// The first wait before a failed load balancer's failure is reported again, and the longest.
const REPORT_BACK_OFF: Duration = Duration::from_secs(5);
const LONGEST_REPORT_BACK_OFF: Duration = Duration::from_secs(300);
const ENSURING: &str = "Ensuring load balancer";

/// A load balancer that could not be set up.
struct Failing {
    error: String,
    /// Times in a row it was reported.
    failures: u32,
    next_report: std::time::Instant,
}

/// The load balancer's settings.
#[derive(Debug, Clone)]
pub struct LoadBalancerConfig {
    /// Network and prefix length of the range ingress addresses are handed out from.
    pub ip_range: (Ipv4Addr, u8),
}

impl Default for LoadBalancerConfig {
    fn default() -> Self {
        Self { ip_range: (Ipv4Addr::new(127, 128, 0, 0), 16) }
    }
}

/// The ingress addresses, and which service holds each.
#[derive(Debug)]
struct IpPool {
    first: u32,
    last: u32,
    held: BTreeMap<u32, Key>,
    by_service: HashMap<Key, Ipv4Addr>,
}

impl IpPool {
    fn new(range: (Ipv4Addr, u8)) -> Self {
        // The network's first and last addresses are left out, as for cluster IPs.
        let (first, last) = crate::model::cidr::usable_range(range);
        IpPool { first, last, held: BTreeMap::new(), by_service: HashMap::new() }
    }

    fn contains(&self, ip: Ipv4Addr) -> bool {
        (self.first..=self.last).contains(&u32::from(ip))
    }

    fn held_by(&self, key: &Key) -> Option<Ipv4Addr> {
        self.by_service.get(key).copied()
    }

    /// Gives `key` the address `wanted` (or the lowest free one): its own again if it holds
    /// it; otherwise the address it held is freed.
    fn take(&mut self, key: &Key, wanted: Option<Ipv4Addr>) -> Result<Ipv4Addr, String> {
        if let Some(ip) = self.held_by(key).filter(|ip| wanted.is_none_or(|w| w == *ip)) {
            return Ok(ip);
        }
        let ip = match wanted {
            Some(ip) if !self.contains(ip) => {
                return Err(format!(
                    "the requested address {ip} is not in the load balancer range {}-{}",
                    Ipv4Addr::from(self.first),
                    Ipv4Addr::from(self.last)
                ))
            }
            Some(ip) => match self.held.get(&u32::from(ip)) {
                Some(other) => {
                    return Err(format!(
                        "the requested address {ip} is held by service {}/{}",
                        other.0, other.1
                    ))
                }
                None => ip,
            },
            None => {
                let free = (self.first..=self.last).find(|n| !self.held.contains_key(n));
                Ipv4Addr::from(free.ok_or("no free address left in the load balancer range")?)
            }
        };
        self.release(key);
        self.held.insert(u32::from(ip), key.clone());
        self.by_service.insert(key.clone(), ip);
        Ok(ip)
    }

    fn release(&mut self, key: &Key) {
        if let Some(ip) = self.by_service.remove(key) {
            self.held.remove(&u32::from(ip));
        }
    }
}

/// The service controller actor.
pub struct ServiceController {
    client: Arc<dyn ApiClient>,
    table: ServiceTable,
    listeners: Listeners,
    pool: IpPool,
    /// Services whose write is under way, and those changed meanwhile.
    in_flight: HashSet<Key>,
    pending: HashSet<Key>,
    retries: HashMap<Key, u32>,
    /// Services that found no address, or could not bind: the error last reported, and when
    /// the failure is reported again.
    failing: BTreeMap<Key, Failing>,
    /// What each service's load balancer followed when last synced.
    seen: HashMap<Key, Followed>,
    /// Load balancers changed since they were last ensured (their ensuring events are due).
    changed: HashSet<Key>,
}

/// What of a service its load balancer follows: a change of it, once synced, has the load
/// balancer ensured again, with the ensuring events (Kubernetes 1.32's `needsUpdate`, which
/// logs what changed and records no event of its own).
#[derive(Debug, Clone, PartialEq)]
struct Followed {
    load_balancer: bool,
    fields: [Value; 10],
}

impl Followed {
    fn of(service: &Value) -> Self {
        let at = |pointer: &str| json::at(service, pointer).cloned().unwrap_or(Value::Null);
        let families = json::at(service, "/spec/ipFamilies").and_then(Value::as_array);
        Followed {
            load_balancer: is_load_balancer(service),
            fields: [
                at("/spec/loadBalancerSourceRanges"),
                at("/spec/ports"),
                at("/spec/sessionAffinity"),
                at("/spec/sessionAffinityConfig"),
                at("/spec/loadBalancerIP"),
                at("/spec/externalIPs"),
                at("/metadata/annotations"),
                at("/metadata/uid"),
                json!([at("/spec/externalTrafficPolicy"), at("/spec/healthCheckNodePort")]),
                json!(families.map_or(0, Vec::len)),
            ],
        }
    }

    /// Whether a change from `self` to `now` has a load balancer it still is ensured again.
    fn ensures_again(&self, now: &Followed) -> bool {
        now.load_balancer && self != now
    }
}

/// Stops the controller, closing its listeners (the services keep their status and finalizer
/// for the next start).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopServiceController;

/// What a service's API object still needs.
enum Write {
    /// The finalizer (if missing) and the ingress address (if not in the status yet); with
    /// `announce`, the ensuring events though the address stays (the service changed).
    Ensure { add_finalizer: bool, ingress: Option<Ipv4Addr>, announce: bool },
    /// The finalizer removed (the API server clears the status of a service whose type is no
    /// longer LoadBalancer).
    Cleanup,
}

fn is_load_balancer(service: &Value) -> bool {
    json::at(service, "/spec/type").and_then(Value::as_str) == Some("LoadBalancer")
        && json::at(service, "/spec/loadBalancerClass").is_none_or(Value::is_null)
}

/// Whether this controller should serve the service now.
fn wants_load_balancer(service: &Value) -> bool {
    is_load_balancer(service) && json::at(service, "/metadata/deletionTimestamp").is_none()
}

fn finalizers(service: &Value) -> Vec<&str> {
    json::at(service, "/metadata/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

fn has_finalizer(service: &Value) -> bool {
    finalizers(service).contains(&CLEANUP_FINALIZER)
}

/// The merge patch that sets the service's finalizers: the others it has, and ours when `ours`
/// (written against the version read, so that one written meanwhile is not lost).
fn finalizers_patch(service: &Value, ours: bool) -> Value {
    let mut list: Vec<&str> =
        finalizers(service).into_iter().filter(|f| *f != CLEANUP_FINALIZER).collect();
    if ours {
        list.push(CLEANUP_FINALIZER);
    }
    let version = json::at(service, "/metadata/resourceVersion").cloned().unwrap_or(Value::Null);
    json!({"metadata": {"finalizers": list, "resourceVersion": version}})
}

/// The addresses in the service's `status.loadBalancer.ingress`.
fn ingress_ips(service: &Value) -> Vec<&str> {
    json::at(service, "/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| i.get("ip").and_then(Value::as_str))
        .collect()
}

fn requested_ip(service: &Value) -> Result<Option<Ipv4Addr>, String> {
    match json::at(service, "/spec/loadBalancerIP").and_then(Value::as_str) {
        None | Some("") => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| format!("the requested address {text:?} is not an IPv4 address")),
    }
}

/// Records a Normal event of the service controller.
async fn normal_event(client: &dyn ApiClient, object: &ObjectRef, reason: &str, message: &str) {
    events::record(client, object, EventKind::Normal, reason, message, COMPONENT).await
}

fn object_ref(service: &Value) -> ObjectRef {
    ObjectRef::of(resources::core("services"), service)
}

impl ServiceController {
    /// Starts the controller on a thread of its own (its listeners carry service traffic).
    pub fn start_in_own_thread(
        client: Arc<dyn ApiClient>,
        config: LoadBalancerConfig,
    ) -> Addr<Self> {
        let arbiter = Arbiter::new();
        Self::start_in_arbiter(&arbiter.handle(), move |_| {
            crate::threads::name_current("kplane-svc-lb");
            Self::new(client, config)
        })
    }

    pub fn new(client: Arc<dyn ApiClient>, config: LoadBalancerConfig) -> Self {
        Self {
            client,
            table: ServiceTable::default(),
            listeners: Listeners::default(),
            pool: IpPool::new(config.ip_range),
            in_flight: HashSet::new(),
            pending: HashSet::new(),
            retries: HashMap::new(),
            failing: BTreeMap::new(),
            seen: HashMap::new(),
            changed: HashSet::new(),
        }
    }

    /// After a (re-)list: the addresses the services' status records are theirs again, before
    /// any service is handed a new one.
    fn claim_recorded(&mut self) {
        let recorded: Vec<(Key, Ipv4Addr)> = self
            .table
            .keys()
            .filter_map(|key| {
                let service = self.table.service(key)?;
                if !wants_load_balancer(service) || self.pool.held_by(key).is_some() {
                    return None;
                }
                let ip: Ipv4Addr = ingress_ips(service).first()?.parse().ok()?;
                Some((key.clone(), ip))
            })
            .collect();
        for (key, ip) in recorded {
            if self.pool.contains(ip) {
                let _ = self.pool.take(&key, Some(ip));
            }
        }
    }

    fn sync(&mut self, key: &Key, ctx: &mut Context<Self>) {
        let Some(service) = self.table.service(key) else {
            self.listeners.set(key, Vec::new());
            self.pool.release(key);
            self.failing.remove(key);
            self.seen.remove(key);
            self.changed.remove(key);
            self.retries.remove(key);
            return;
        };
        let followed = Followed::of(service);
        let before = self.seen.insert(key.clone(), followed.clone());
        if before.is_some_and(|before| before.ensures_again(&followed)) {
            self.changed.insert(key.clone());
        }
        if !wants_load_balancer(service) {
            self.changed.remove(key);
            self.listeners.set(key, Vec::new());
            self.pool.release(key);
            self.failing.remove(key);
            if has_finalizer(service) {
                self.write(key, Write::Cleanup, ctx);
            }
            return;
        }
        let wanted = match requested_ip(service) {
            Ok(wanted) => wanted.or_else(|| {
                // The address its status records, when it is free (a restart, or a re-list).
                let recorded: Ipv4Addr = ingress_ips(service).first()?.parse().ok()?;
                (self.pool.contains(recorded)).then_some(recorded)
            }),
            Err(error) => return self.fail(key, error, ctx),
        };
        let ip = match self.pool.take(key, wanted).or_else(|error| match requested_ip(service) {
            // A recorded address held by another: any free one will do.
            Ok(None) => self.pool.take(key, None),
            _ => Err(error),
        }) {
            Ok(ip) => ip,
            Err(error) => {
                self.listeners.set(key, Vec::new());
                return self.fail(key, error, ctx);
            }
        };
        let affinity = client_ip_affinity(service);
        let sources = load_balancer_source_ranges(service);
        // A port without endpoints is not listened on: a client is refused, as kube-proxy
        // rejects what reaches a load balancer's address for a service without endpoints.
        let desired = self
            .table
            .ports(key)
            .into_iter()
            .filter(|port| !port.backends.is_empty())
            .map(|port| {
                let targets = Targets::from(port.backends)
                    .with_affinity(affinity)
                    .with_sources(sources.clone());
                (SocketAddr::new(ip.into(), port.port), targets)
            })
            .collect();
        if let Some(failure) = self.listeners.set(key, desired).into_iter().next() {
            return self.fail(
                key,
                format!("listening on {}: {}", failure.addr, failure.error),
                ctx,
            );
        }
        if !self.listeners.all_bound(key) {
            return; // Reported when it first failed; the retry tick syncs it once bound.
        }
        self.failing.remove(key);
        let Some(service) = self.table.service(key) else { return };
        let ingress = (ingress_ips(service) != [ip.to_string()]).then_some(ip);
        let add_finalizer = !has_finalizer(service);
        let announce = self.changed.remove(key);
        if ingress.is_some() || add_finalizer || announce {
            self.write(key, Write::Ensure { add_finalizer, ingress, announce }, ctx);
        }
    }

    /// Reports why `key` has no load balancer and keeps it for a retry. As Kubernetes'
    /// controller, whose failed syncs are retried from 5 s, doubling to 5 min: each retry of
    /// the same failure is reported once it is due (`EnsuringLoadBalancer`, then
    /// `SyncLoadBalancerFailed`, counted up by the event recorder); another failure at once.
    fn fail(&mut self, key: &Key, error: String, ctx: &mut Context<Self>) {
        let now = std::time::Instant::now();
        let failures = match self.failing.get(key) {
            Some(failing) if failing.error == error && now < failing.next_report => return,
            Some(failing) if failing.error == error => failing.failures + 1,
            _ => 1,
        };
        let next_report = now
            + REPORT_BACK_OFF
                .saturating_mul(1 << (failures - 1).min(6))
                .min(LONGEST_REPORT_BACK_OFF);
        self.failing.insert(key.clone(), Failing { error: error.clone(), failures, next_report });
        let Some(service) = self.table.service(key) else { return };
        let (client, object) = (self.client.clone(), object_ref(service));
        // The finalizer goes on before the load balancer is ensured, as Kubernetes' controller
        // adds it: a service whose load balancer keeps failing is still cleaned up when it goes.
        let finalizer = (!has_finalizer(service)).then(|| finalizers_patch(service, true));
        let (namespace, name) = key.clone();
        let message =
            format!("Error syncing load balancer: failed to ensure load balancer: {error}");
        tracing::warn!(service = %format!("{}/{}", key.0, key.1), %error, "load balancer");
        ctx.spawn(
            async move {
                normal_event(client.as_ref(), &object, "EnsuringLoadBalancer", ENSURING).await;
                if let Some(patch) = finalizer {
                    let services = resources::core("services");
                    let added =
                        client.patch(services, &namespace, &name, PatchType::Merge, &patch, false);
                    if let Err(error) = added.await {
                        // (A service changed meanwhile is synced again, and fails again.)
                        tracing::debug!(service = %name, %error, "adding the cleanup finalizer");
                    }
                }
                events::record(
                    client.as_ref(),
                    &object,
                    EventKind::Warning,
                    "SyncLoadBalancerFailed",
                    &message,
                    COMPONENT,
                )
                .await;
            }
            .into_actor(self),
        );
    }

    /// Brings the service's API object to what its load balancer is; one write per service at
    /// a time, and a service changed meanwhile is synced again when it ends.
    fn write(&mut self, key: &Key, write: Write, ctx: &mut Context<Self>) {
        if self.in_flight.contains(key) {
            // (Its ensuring events, if due, come with the write the next sync makes.)
            if let Write::Ensure { announce: true, .. } = write {
                self.changed.insert(key.clone());
            }
            self.pending.insert(key.clone());
            return;
        }
        let Some(service) = self.table.service(key) else { return };
        let (client, object) = (self.client.clone(), object_ref(service));
        let (key_ns, key_name) = key.clone();
        let written = match write {
            Write::Ensure { add_finalizer, ingress, announce } => {
                let finalizer = add_finalizer.then(|| finalizers_patch(service, true));
                Box::pin(async move {
                    let services = resources::core("services");
                    let record = |reason, message| normal_event(&*client, &object, reason, message);
                    let ensuring = ingress.is_some() || announce;
                    if ensuring {
                        record("EnsuringLoadBalancer", ENSURING).await;
                    }
                    if let Some(patch) = finalizer {
                        client
                            .patch(services, &key_ns, &key_name, PatchType::Merge, &patch, false)
                            .await?;
                    }
                    if let Some(ip) = ingress {
                        let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip.to_string(), "ipMode": "VIP"}]}}});
                        client
                            .patch(services, &key_ns, &key_name, PatchType::Merge, &status, true)
                            .await?;
                    }
                    if ensuring {
                        record("EnsuredLoadBalancer", "Ensured load balancer").await;
                    }
                    Ok(())
                }) as futures::future::BoxFuture<'static, Result<(), ApiError>>
            }
            Write::Cleanup => {
                let patch = finalizers_patch(service, false);
                Box::pin(async move {
                    let services = resources::core("services");
                    let record = |reason, message| normal_event(&*client, &object, reason, message);
                    record("DeletingLoadBalancer", "Deleting load balancer").await;
                    match client
                        .patch(services, &key_ns, &key_name, PatchType::Merge, &patch, false)
                        .await
                    {
                        Ok(_) | Err(ApiError::NotFound { .. }) => {}
                        Err(error) => return Err(error),
                    }
                    record("DeletedLoadBalancer", "Deleted load balancer").await;
                    Ok(())
                })
            }
        };
        self.in_flight.insert(key.clone());
        let key = key.clone();
        ctx.spawn(written.into_actor(self).map(move |written, controller, ctx| {
            controller.in_flight.remove(&key);
            match written {
                Ok(()) => {
                    controller.retries.remove(&key);
                    if controller.pending.remove(&key) {
                        controller.sync(&key, ctx);
                    }
                }
                // A conflict (the service changed since it was read: the watch brings the new
                // version) or an unreachable store: tried again after a back-off.
                Err(error) => {
                    controller.pending.remove(&key);
                    tracing::debug!(service = %key.1, %error, "writing a load balancer's service");
                    let delay = super::back_off(&mut controller.retries, &key);
                    ctx.run_later(delay, move |controller, ctx| controller.sync(&key, ctx));
                }
            }
        }));
    }

    fn sync_all(&mut self, keys: BTreeSet<Key>, ctx: &mut Context<Self>) {
        for key in keys {
            self.sync(&key, ctx);
        }
    }
}

impl Actor for ServiceController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        service_table::follow(ctx, self.client.clone());
        ctx.run_interval(RETRY_PERIOD, |controller, ctx| {
            let mut again = controller.listeners.retry();
            again.extend(controller.failing.keys().cloned());
            controller.sync_all(again, ctx);
        });
    }
}

impl Handler<ServicesFeed> for ServiceController {
    type Result = ();

    fn handle(&mut self, msg: ServicesFeed, ctx: &mut Context<Self>) {
        let relisted = matches!(msg.0, Feed::Listed(_));
        let changed = self.table.apply_services(msg.0);
        if relisted {
            self.claim_recorded();
        }
        self.sync_all(changed, ctx);
    }
}

impl Handler<EndpointSlicesFeed> for ServiceController {
    type Result = ();

    fn handle(&mut self, msg: EndpointSlicesFeed, ctx: &mut Context<Self>) {
        let changed = self.table.apply_slices(msg.0);
        // Only the backends of services with a load balancer change.
        let served: BTreeSet<Key> =
            changed.into_iter().filter(|key| self.pool.held_by(key).is_some()).collect();
        self.sync_all(served, ctx);
    }
}

impl Handler<StopServiceController> for ServiceController {
    type Result = ();

    fn handle(&mut self, _: StopServiceController, ctx: &mut Context<Self>) {
        self.listeners.clear();
        ctx.stop();
        // The controller's own thread goes with it.
        Arbiter::current().stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        ("default".into(), name.into())
    }

    #[test]
    fn the_pool_hands_out_free_addresses_and_honours_requests_in_range() {
        let mut pool = IpPool::new((Ipv4Addr::new(127, 128, 0, 0), 30));
        let a = pool.take(&key("a"), None).unwrap();
        assert_eq!(a, Ipv4Addr::new(127, 128, 0, 1));
        assert_eq!(pool.take(&key("a"), None).unwrap(), a, "a service keeps its address");
        let taken = pool.take(&key("b"), Some(a)).unwrap_err();
        assert!(taken.contains("held by service default/a"), "{taken}");
        let outside = pool.take(&key("b"), Some(Ipv4Addr::new(127, 128, 0, 3))).unwrap_err();
        assert!(
            outside.contains("not in the load balancer range 127.128.0.1-127.128.0.2"),
            "{outside}"
        );
        assert_eq!(pool.take(&key("b"), None).unwrap(), Ipv4Addr::new(127, 128, 0, 2));
        assert!(pool.take(&key("c"), None).is_err(), "the range is used up");
        // Asking for another address moves the service there and frees the old one.
        pool.release(&key("a"));
        assert_eq!(pool.take(&key("b"), Some(a)).unwrap(), a);
        assert_eq!(pool.take(&key("c"), None).unwrap(), Ipv4Addr::new(127, 128, 0, 2));
    }

    #[test]
    fn changes_a_load_balancer_follows_have_it_ensured_again() {
        let service = |kind: &str, ip: &str, port: u64| {
            json!({"metadata": {"uid": "u1"}, "spec": {"type": kind, "loadBalancerIP": ip,
                "ports": [{"port": port}], "ipFamilies": ["IPv4"]}})
        };
        let followed = |service: &Value| Followed::of(service);
        let lb = service("LoadBalancer", "", 80);
        assert!(!followed(&lb).ensures_again(&followed(&lb)));
        // Becoming a load balancer is ensured by its first sync; leaving, cleaned up.
        assert!(!followed(&lb).ensures_again(&followed(&service("ClusterIP", "", 80))));
        assert!(followed(&service("ClusterIP", "", 80)).ensures_again(&followed(&lb)));
        let changed = |change: &dyn Fn(&mut Value)| {
            let mut now = lb.clone();
            change(&mut now);
            followed(&lb).ensures_again(&followed(&now))
        };
        assert!(changed(&|s| s["spec"]["loadBalancerIP"] = json!("127.128.0.9")));
        assert!(changed(&|s| s["spec"]["ports"][0]["port"] = json!(81)));
        assert!(changed(&|s| s["spec"]["loadBalancerSourceRanges"] = json!(["10.0.0.0/8"])));
        assert!(changed(&|s| s["spec"]["externalIPs"] = json!(["127.9.0.1"])));
        assert!(changed(&|s| s["metadata"]["annotations"] = json!({"a": "b"})));
        assert!(changed(&|s| s["spec"]["externalTrafficPolicy"] = json!("Local")));
        assert!(changed(&|s| s["spec"]["ipFamilies"] = json!(["IPv4", "IPv6"])));
        // Its labels and status are not followed.
        assert!(!changed(&|s| s["metadata"]["labels"] = json!({"a": "b"})));
        assert!(!changed(&|s| s["spec"]["ipFamilies"] = json!(["IPv6"])));
        // Not a load balancer either way: nothing.
        let plain = followed(&service("ClusterIP", "", 80));
        assert!(!plain.ensures_again(&followed(&service("NodePort", "", 81))));
    }

    #[test]
    fn only_load_balancers_without_a_class_are_served() {
        let lb = json!({"spec": {"type": "LoadBalancer"}});
        assert!(wants_load_balancer(&lb));
        assert!(!wants_load_balancer(&json!({"spec": {"type": "NodePort"}})));
        assert!(!wants_load_balancer(
            &json!({"spec": {"type": "LoadBalancer", "loadBalancerClass": "example.com/lb"}})
        ));
        let deleting = json!({"metadata": {"deletionTimestamp": "2026-12-02T00:00:00Z"}, "spec": {"type": "LoadBalancer"}});
        assert!(is_load_balancer(&deleting) && !wants_load_balancer(&deleting));
        assert_eq!(
            requested_ip(&json!({"spec": {"loadBalancerIP": "x"}})).unwrap_err(),
            "the requested address \"x\" is not an IPv4 address"
        );
    }
}
