//! The node agent actor: registers the Node (with a pod CIDR), posts its status and renews its
//! Lease on timers, list-watches the pods bound to it, admits each new one (or rejects it) and
//! keeps one pod worker per admitted pod.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde_json::{json, Value};

use k8s_openapi::api::core::v1::{Node, Pod};

use super::admission::{self, Rejection};
use super::node_lease::{self, renew_lease, HeldByAnother, NodeLost};
use super::node_status::{self, Machine, Pressure};
use super::pod_ips::PodIps;
use super::pod_worker::{
    ExecTarget, FindContainer, PodGone, PodUpdated, PodWorker, Shutdown, Snapshot, WorkerContext,
    COMPONENT,
};
use super::runtime::{process_alive, Runtime, StopSignal};
use super::AgentConfig;
use crate::client::cache::key_of;
use crate::client::events::{self, EventKind, ObjectRef};
use crate::client::informer::{self, Feed};
use crate::client::{object_uid, ApiClient};
use crate::core::{ApiError, PatchType};
use crate::model::{json, now, resources};
use crate::scheduler::node_info::{NodeInfo, PodInfo};
use crate::watch::EventType;

/// How often a node's status is posted when it says nothing new (the kubelet's
/// `nodeStatusReportFrequency`): its Lease is its heartbeat.
const STATUS_REPORT_PERIOD: Duration = Duration::from_secs(5 * 60);
/// Longest wait between attempts to reach the API server.
const MAX_RETRY: Duration = Duration::from_secs(10);

/// The pods this agent runs, as it last reported them (`GET /pods` of the agent's port).
#[derive(Message)]
#[rtype(result = "Vec<Value>")]
pub struct AgentPods;

/// One pod this agent runs, by namespace and name (for logs).
#[derive(Message)]
#[rtype(result = "Option<Value>")]
pub struct PodLookup {
    pub namespace: String,
    pub name: String,
}

/// A running container of a pod this agent runs, for exec, attach and run.
#[derive(Message)]
#[rtype(result = "Option<ExecTarget>")]
pub struct ContainerLookup {
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

impl Handler<ContainerLookup> for NodeAgent {
    type Result = ResponseFuture<Option<ExecTarget>>;

    fn handle(&mut self, msg: ContainerLookup, _: &mut Context<Self>) -> Self::Result {
        let worker = self.worker_of(&msg.namespace, &msg.pod);
        Box::pin(async move { worker?.send(FindContainer(msg.container)).await.ok().flatten() })
    }
}

/// Stops the agent; its containers are stopped too when the config says so.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopAgent;

/// The agent registered its node (of this uid): the pod workers can start.
#[derive(Message)]
#[rtype(result = "()")]
struct Registered(Arc<WorkerContext>, String);

/// The full set of pods bound to this node, after a (re-)list.
#[derive(Message)]
#[rtype(result = "()")]
struct Relisted(Vec<Value>);

#[derive(Message)]
#[rtype(result = "()")]
struct PodEvent(EventType, Value);

/// A new pod's admission: the node as the server has it now (`None` when it could not be
/// read: the pod is admitted).
#[derive(Message)]
#[rtype(result = "()")]
struct Admit {
    uid: String,
    node: Option<Node>,
}

/// Counts an admitted pod in the node's `usage` while it is not `finished`, and no longer
/// once it is.
fn count_in(usage: &mut NodeInfo, pod: &PodInfo, finished: bool) {
    if finished {
        usage.remove_pod(&pod.uid);
    } else {
        usage.add_pod(pod.clone());
    }
}

/// A pod the agent admitted: its worker, and what the admission of the next pods counts.
struct Admitted {
    namespace: String,
    name: String,
    worker: Addr<PodWorker>,
    /// Its requests, ports, ...: what it takes of the node.
    info: PodInfo,
    /// It has succeeded or failed: it takes nothing any more.
    finished: bool,
}

/// The node agent actor.
pub struct NodeAgent {
    config: Arc<AgentConfig>,
    client: Arc<dyn ApiClient>,
    runtime: Arc<dyn Runtime>,
    machine: Machine,
    /// Set once the node is registered (and unset if it is lost).
    workers_ctx: Option<Arc<WorkerContext>>,
    /// The uid of the node the agent registered.
    node_uid: Option<String>,
    workers: HashMap<String, Admitted>,
    /// The node and what the admitted pods not finished take of it, kept as they come and go
    /// (the node as the last admission read it).
    usage: NodeInfo,
    /// New pods waiting for their admission (the newest version of each), by uid.
    admitting: HashMap<String, Value>,
    conditions: Arc<Mutex<Vec<Value>>>,
    /// The status the agent last posted, and when.
    last_report: Arc<Mutex<Option<(Value, Instant)>>>,
    /// The node's `spec.unschedulable` as the agent last saw it (for its events).
    unschedulable: Arc<AtomicBool>,
    swept: bool,
    /// Shutting down: no new pod workers.
    stopping: bool,
    /// Set once the node is given up and its containers have stopped ([`NodeGivenUp`]).
    given_up: tokio::sync::watch::Sender<bool>,
}

impl NodeAgent {
    pub fn new(config: AgentConfig, client: Arc<dyn ApiClient>, runtime: Arc<dyn Runtime>) -> Self {
        let machine = if runtime.runs_processes() {
            Machine::read(&config.data_dir)
        } else {
            Machine::simulated()
        };
        Self {
            config: Arc::new(config),
            client,
            runtime,
            machine,
            workers_ctx: None,
            node_uid: None,
            workers: HashMap::new(),
            usage: NodeInfo::new(&Node::default()),
            admitting: HashMap::new(),
            conditions: Arc::new(Mutex::new(Vec::new())),
            last_report: Arc::new(Mutex::new(None)),
            unschedulable: Arc::new(AtomicBool::new(false)),
            swept: false,
            stopping: false,
            given_up: tokio::sync::watch::Sender::new(false),
        }
    }

    fn heartbeat(&self, ctx: &mut Context<Self>) {
        if self.workers_ctx.is_none() {
            return;
        }
        let (config, client, machine) =
            (self.config.clone(), self.client.clone(), self.machine.clone());
        let runtime = self.runtime.name();
        let previous = self.conditions.clone();
        let last_report = self.last_report.clone();
        let last_unschedulable = self.unschedulable.clone();
        // A real node measures its pressure and records its events; simulated ones (a thousand
        // in one process) do neither, as their pods record none.
        let measure = self.runtime.runs_processes();
        ctx.spawn(
            async move {
                let pressure =
                    if measure { Pressure::measure(&config.data_dir) } else { Pressure::default() };
                let ours = previous.lock().expect("conditions lock").clone();
                // A node starts from the server's copy, as the kubelet does: conditions the
                // node controller set to Unknown while it was out of touch change back (a new
                // transition time, their events again), at once, not at the next periodic post.
                let theirs = client.get(resources::core("nodes"), "", &config.node_name).await.ok();
                let reported = last_report.lock().expect("report lock").clone();
                // What the status is compared with: the server's copy, else what was posted.
                let compared = match &theirs {
                    Some(node) => Some(node["status"].clone()),
                    None => reported.as_ref().map(|(status, _)| status.clone()),
                };
                let unschedulable_now = theirs.as_ref().map(|n| n["spec"]["unschedulable"] == true);
                if let Some(node) = &theirs {
                    // Its operating system and architecture labels, set again when changed.
                    if let Some(patch) = node_status::metadata_patch(&config, node, false) {
                        let (nodes, merge) = (resources::core("nodes"), PatchType::Merge);
                        let patched =
                            client.patch(nodes, "", &config.node_name, merge, &patch, false);
                        if let Err(error) = patched.await {
                            tracing::warn!(node = %config.node_name, %error, "labelling the node");
                        }
                    }
                    // Booted since it last posted: the kubelet's warning.
                    let booted = node.pointer("/status/nodeInfo/bootID").and_then(Value::as_str);
                    let rebooted = booted.is_some_and(|id| !id.is_empty() && id != machine.boot_id);
                    if measure && rebooted {
                        let message = format!(
                            "Node {} has been rebooted, boot id: {}",
                            config.node_name, machine.boot_id
                        );
                        node_event(
                            client.as_ref(),
                            &config,
                            EventKind::Warning,
                            "NodeRebooted",
                            &message,
                        )
                        .await;
                    }
                }
                let mut stored = theirs.map_or_else(|| json!({}), |mut n| n["status"].take());
                if !stored["conditions"].is_array() {
                    stored["conditions"] = json!(ours);
                }
                let old = stored["conditions"].as_array().cloned().unwrap_or_default();
                let status =
                    node_status::status(&config, &machine, runtime, pressure, &stored, &now());
                // Posted when it says something new, else every few minutes.
                let due = reported.is_none_or(|(_, at)| at.elapsed() >= STATUS_REPORT_PERIOD);
                let news =
                    compared.is_none_or(|compared| node_status::says_news(&compared, &status));
                let schedulable_event = |unschedulable: bool| {
                    let was = last_unschedulable.swap(unschedulable, Ordering::Relaxed);
                    (was != unschedulable).then_some(if unschedulable {
                        "NodeNotSchedulable"
                    } else {
                        "NodeSchedulable"
                    })
                };
                if !news && !due {
                    if let (true, Some(unschedulable)) = (measure, unschedulable_now) {
                        let reasons: Vec<&str> =
                            schedulable_event(unschedulable).into_iter().collect();
                        if !reasons.is_empty() {
                            node_events(client.as_ref(), &config, false, &reasons).await;
                        }
                    }
                    return;
                }
                let patch = node_status::status_patch(&status);
                let nodes = resources::core("nodes");
                let strategic = PatchType::StrategicMerge;
                let name = &config.node_name;
                match client.patch(nodes, "", name, strategic, &patch, true).await {
                    Ok(node) => {
                        let conditions =
                            status["conditions"].as_array().cloned().unwrap_or_default();
                        *previous.lock().expect("conditions lock") = conditions.clone();
                        *last_report.lock().expect("report lock") =
                            Some((status.clone(), Instant::now()));
                        if measure {
                            let unschedulable = node["spec"]["unschedulable"] == true;
                            // At its start, every pressure condition, as the kubelet's at
                            // registration, and readiness only when it changed.
                            let mut reasons = node_status::status_events(&old, &conditions);
                            if ours.is_empty() {
                                let pressure = node_status::status_events(&[], &conditions);
                                let pressure =
                                    pressure.into_iter().filter(|r| !r.contains("Ready"));
                                reasons.retain(|r| r.contains("Ready"));
                                reasons.splice(0..0, pressure);
                            }
                            reasons.extend(schedulable_event(unschedulable));
                            node_events(client.as_ref(), &config, ours.is_empty(), &reasons).await;
                        }
                    }
                    Err(ApiError::NotFound { .. }) => {
                        // Someone deleted our Node: it stays deleted (an agent registers when
                        // it starts, as the kubelet), and its pods go with it.
                        tracing::warn!(node = %config.node_name, "the node was deleted");
                    }
                    Err(error) => {
                        tracing::warn!(node = %config.node_name, %error, "posting node status")
                    }
                }
            }
            .into_actor(self),
        );
    }

    fn renew_lease(&self, ctx: &mut Context<Self>) {
        // (Not while stopping: a clean stop lets go of the lease.)
        if self.workers_ctx.is_none() || self.stopping {
            return;
        }
        let (config, client, uid) =
            (self.config.clone(), self.client.clone(), self.node_uid.clone());
        let renewed = async move { renew_lease(&config, client.as_ref(), uid.as_deref()).await };
        ctx.spawn(renewed.into_actor(self).map(|renewed, agent, ctx| match renewed {
            Ok(None) => {}
            Ok(Some(other)) => agent.lose_node(&other, ctx),
            // Another renewal came first (the next one reads the lease again).
            Err(ApiError::Conflict { .. }) => {}
            Err(error) => {
                let node = &agent.config.node_name;
                tracing::warn!(%node, %error, "renewing the node lease");
            }
        }));
    }

    /// Gives the node up, once it is no longer this agent's (deleted under it, and registered
    /// anew by another agent or made again): the containers are stopped, quietly (their pods
    /// are the node's new agent's), and the agent posts nothing more about the node, runs none
    /// of its pods and keeps none of its lease; it takes the node again when it is restarted.
    fn lose_node(&mut self, lost: &NodeLost, ctx: &mut Context<Self>) {
        if self.workers_ctx.take().is_none() {
            return;
        }
        self.stopping = true;
        tracing::error!(node = %self.config.node_name, "{lost}; this agent stops the node's \
            containers and leaves the node (restart it to register the node again)");
        let stops: Vec<_> = (self.workers.drain())
            .map(|(_, admitted)| {
                admitted.worker.send(Shutdown { stop_containers: true, quietly: true })
            })
            .collect();
        self.admitting.clear();
        let given_up = self.given_up.clone();
        ctx.spawn(
            async move {
                futures::future::join_all(stops).await;
                given_up.send_replace(true);
            }
            .into_actor(self),
        );
    }

    fn upsert(&mut self, pod: Value, ctx: &mut Context<Self>) {
        let Some(workers_ctx) = self.workers_ctx.clone().filter(|_| !self.stopping) else {
            return;
        };
        let uid = object_uid(&pod).to_string();
        if let Some(admitted) = self.workers.get_mut(&uid).filter(|a| a.worker.connected()) {
            let now_finished = finished(&pod);
            if now_finished != admitted.finished {
                admitted.finished = now_finished;
                count_in(&mut self.usage, &admitted.info, now_finished);
            }
            admitted.worker.do_send(PodUpdated(pod));
            return;
        }
        if let Some(waiting) = self.admitting.get_mut(&uid) {
            *waiting = pod;
            return;
        }
        let status = &pod["status"];
        let never_ran = ["containerStatuses", "initContainerStatuses"]
            .iter()
            .all(|list| status[list].as_array().is_none_or(Vec::is_empty));
        if never_ran && finished(&pod) {
            // Rejected at its admission (or failed before it ran): nothing to run.
            return;
        }
        if never_ran && !crate::model::is_being_deleted(&pod) {
            // A new pod: admitted against the node as the server has it now (its labels and
            // taints may have changed since the last heartbeat), one at a time.
            self.admitting.insert(uid.clone(), pod);
            let (client, node) = (self.client.clone(), self.config.node_name.clone());
            let fetch = async move {
                let node = client.get(resources::core("nodes"), "", &node).await.ok()?;
                serde_json::from_value::<Node>(node).ok()
            };
            ctx.spawn(fetch.into_actor(self).map(move |node, _, ctx| {
                ctx.notify(Admit { uid, node });
            }));
            return;
        }
        match pod_info(&pod) {
            Some(info) => self.start_worker(workers_ctx, pod, info),
            None => tracing::warn!(uid = %uid, "ignoring a pod the agent cannot read"),
        }
    }

    /// Runs the admitted `pod` (what it takes of the node: `info`) in a new worker.
    fn start_worker(&mut self, workers_ctx: Arc<WorkerContext>, pod: Value, info: PodInfo) {
        let uid = object_uid(&pod).to_string();
        let (namespace, name) = key_of(&pod);
        let finished = finished(&pod);
        match PodWorker::new(workers_ctx, pod) {
            Some(worker) => {
                let worker = worker.start();
                // (In the place of a worker of that uid that had stopped, if any.)
                count_in(&mut self.usage, &info, finished);
                self.workers.insert(uid, Admitted { namespace, name, worker, info, finished });
            }
            None => tracing::warn!(pod = %name, "ignoring a pod the agent cannot read"),
        }
    }

    /// The worker of the pod `namespace/name`, if the agent runs it.
    fn worker_of(&self, namespace: &str, name: &str) -> Option<Addr<PodWorker>> {
        let admitted = self.workers.values().find(|a| a.namespace == namespace && a.name == name);
        admitted.map(|a| a.worker.clone())
    }

    /// Refuses a pod as the kubelet does: Failed, with the reason and "Pod was rejected: ..."
    /// in its status, and a `Warning` event.
    fn reject(&self, pod: &Value, rejection: Rejection, ctx: &mut Context<Self>) {
        let pods = resources::core("pods");
        let about = ObjectRef::of(pods, pod);
        tracing::info!(pod = %about.name, reason = %rejection.reason, "pod rejected at admission");
        let (client, config) = (self.client.clone(), self.config.clone());
        let record = self.runtime.runs_processes();
        let Rejection { reason, message } = rejection;
        // With its start time, as the kubelet's status manager gives every pod it writes.
        let started = json::at(pod, "/status/startTime").cloned();
        let status = json!({"status": {"phase": "Failed", "reason": reason,
            "message": format!("Pod was rejected: {message}"),
            "startTime": started.unwrap_or_else(|| json!(now()))}});
        let write = async move {
            let (namespace, name) = (&about.namespace, &about.name);
            let patch = PatchType::StrategicMerge;
            if let Err(error) = client.patch(pods, namespace, name, patch, &status, true).await {
                tracing::warn!(pod = %name, %error, "writing a rejected pod's status");
            }
            if record {
                let (client, node) = (client.as_ref(), &config.node_name);
                let warning = EventKind::Warning;
                events::record_on_node(client, &about, warning, &reason, &message, COMPONENT, node)
                    .await;
            }
        };
        ctx.spawn(write.into_actor(self));
    }

    /// Stops what a previous run of the agent left behind for pods no longer bound here.
    fn sweep_orphans(&self, live: &HashSet<String>) {
        let Ok(entries) = std::fs::read_dir(self.config.data_dir.join("pods")) else { return };
        for entry in entries.flatten() {
            let dir_name = entry.file_name().to_string_lossy().to_string();
            let uid = dir_name.rsplit('_').next().unwrap_or("");
            if live.contains(uid) {
                continue;
            }
            for container in std::fs::read_dir(entry.path()).into_iter().flatten().flatten() {
                let state = std::fs::read(container.path().join("state.json"))
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
                let pid = state.as_ref().and_then(|s| s["pid"].as_u64()).map(|p| p as u32);
                let ticks = state.as_ref().and_then(|s| s["start_ticks"].as_u64());
                if let (Some(pid), Some(ticks)) = (pid, ticks) {
                    if process_alive(pid, ticks) {
                        tracing::info!(pid, dir = %dir_name, "stopping an orphaned container");
                        self.runtime.signal(pid, StopSignal::Kill);
                    }
                }
            }
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Actor for NodeAgent {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let (config, client, runtime) =
            (self.config.clone(), self.client.clone(), self.runtime.clone());
        let machine = self.machine.clone();
        let addr = ctx.address();
        ctx.spawn(
            async move {
                let mut wait = Duration::from_millis(200);
                let (cidr, uid) = loop {
                    let error = match register(&config, client.as_ref(), &machine, runtime.name())
                        .await
                    {
                        // Its lease names it, unless another agent registered the node at
                        // the same time and named itself first: then the node is that
                        // agent's.
                        Ok((cidr, uid)) => {
                            match renew_lease(&config, client.as_ref(), Some(&uid)).await {
                                Ok(None) => break (cidr, uid),
                                Ok(Some(lost)) => RegisterError::Lost(lost),
                                Err(error) => {
                                    let node = &config.node_name;
                                    tracing::warn!(%node, %error, "creating the node lease");
                                    break (cidr, uid);
                                }
                            }
                        }
                        Err(error) => error,
                    };
                    tracing::warn!(node = %config.node_name, %error, "registering the node; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(MAX_RETRY);
                };
                tracing::info!(node = %config.node_name, pod_cidr = %format!("{}/24", cidr), "node registered");
                let workers = WorkerContext {
                    client: client.clone(),
                    runtime,
                    config: config.clone(),
                    ips: Mutex::new(PodIps::new(cidr)),
                    memory_capacity: machine.memory_bytes,
                };
                addr.do_send(Registered(Arc::new(workers), uid));
                list_watch(config.node_name.clone(), client, addr).await;
            }
            .into_actor(self),
        );
        ctx.run_interval(self.config.node_status_update_period, |act, ctx| act.heartbeat(ctx));
        ctx.run_interval(self.config.lease_duration / 4, |act, ctx| act.renew_lease(ctx));
    }
}

impl Handler<Registered> for NodeAgent {
    type Result = ();

    fn handle(&mut self, msg: Registered, ctx: &mut Context<Self>) {
        self.workers_ctx = Some(msg.0);
        self.node_uid = Some(msg.1);
        self.heartbeat(ctx);
    }
}

impl Handler<Relisted> for NodeAgent {
    type Result = ();

    fn handle(&mut self, msg: Relisted, ctx: &mut Context<Self>) {
        let live: HashSet<String> = msg
            .0
            .iter()
            .filter_map(|p| p.pointer("/metadata/uid").and_then(Value::as_str).map(String::from))
            .collect();
        if !self.swept && self.runtime.runs_processes() {
            self.sweep_orphans(&live);
        }
        self.swept = true;
        self.workers.retain(|uid, admitted| {
            if !admitted.worker.connected() {
                self.usage.remove_pod(uid);
                return false;
            }
            if !live.contains(uid) {
                admitted.worker.do_send(PodGone);
            }
            true
        });
        self.admitting.retain(|uid, _| live.contains(uid));
        for pod in msg.0 {
            self.upsert(pod, ctx);
        }
    }
}

impl Handler<PodEvent> for NodeAgent {
    type Result = ();

    fn handle(&mut self, msg: PodEvent, ctx: &mut Context<Self>) {
        match msg.0 {
            EventType::Added | EventType::Modified => self.upsert(msg.1, ctx),
            EventType::Deleted => {
                let uid = msg.1.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
                self.admitting.remove(uid);
                if let Some(admitted) = self.workers.remove(uid) {
                    self.usage.remove_pod(uid);
                    admitted.worker.do_send(PodGone);
                }
            }
        }
    }
}

impl Handler<Admit> for NodeAgent {
    type Result = ();

    /// Admits the pod against the node and the pods admitted before it (those not finished),
    /// or rejects it; one that was deleted meanwhile is forgotten.
    fn handle(&mut self, msg: Admit, ctx: &mut Context<Self>) {
        let Some(pod) = self.admitting.remove(&msg.uid) else { return };
        let Some(workers_ctx) = self.workers_ctx.clone().filter(|_| !self.stopping) else {
            return;
        };
        let Some(info) = pod_info(&pod) else {
            tracing::warn!(uid = %msg.uid, "ignoring a pod the agent cannot read");
            return;
        };
        // The sysctls first, as the kubelet's admit handlers run.
        let verdict = self.config.sysctls.admit(&pod).and_then(|()| match &msg.node {
            Some(node) => {
                self.usage.set_node(node);
                admission::admit(&info, &self.usage)
            }
            None => Ok(()),
        });
        match verdict {
            Ok(()) => self.start_worker(workers_ctx, pod, info),
            Err(rejection) => self.reject(&pod, rejection, ctx),
        }
    }
}

/// Answers once the agent has given its node up (another agent registered it anew, or it was
/// made again) and stopped its containers: `true`; `false` if the agent stops otherwise.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct NodeGivenUp;

impl Handler<NodeGivenUp> for NodeAgent {
    type Result = ResponseFuture<bool>;

    fn handle(&mut self, _: NodeGivenUp, _: &mut Context<Self>) -> Self::Result {
        let mut given_up = self.given_up.subscribe();
        Box::pin(async move { given_up.wait_for(|given_up| *given_up).await.is_ok() })
    }
}

impl Handler<AgentPods> for NodeAgent {
    type Result = ResponseFuture<Vec<Value>>;

    fn handle(&mut self, _: AgentPods, _: &mut Context<Self>) -> Self::Result {
        let workers: Vec<Addr<PodWorker>> =
            self.workers.values().map(|a| a.worker.clone()).collect();
        Box::pin(async move {
            let mut pods = Vec::with_capacity(workers.len());
            for worker in workers {
                if let Ok(pod) = worker.send(Snapshot).await {
                    if !pod.is_null() {
                        pods.push(pod);
                    }
                }
            }
            pods
        })
    }
}

impl Handler<PodLookup> for NodeAgent {
    type Result = ResponseFuture<Option<Value>>;

    fn handle(&mut self, msg: PodLookup, _: &mut Context<Self>) -> Self::Result {
        let worker = self.worker_of(&msg.namespace, &msg.name);
        Box::pin(async move {
            let pod = worker?.send(Snapshot).await.ok()?;
            (!pod.is_null()).then_some(pod)
        })
    }
}

impl Handler<StopAgent> for NodeAgent {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, _: StopAgent, _: &mut Context<Self>) -> Self::Result {
        self.stopping = true;
        let stop_containers = self.config.stop_containers_on_shutdown;
        let workers: Vec<Addr<PodWorker>> = self.workers.drain().map(|(_, a)| a.worker).collect();
        let registered = self.workers_ctx.is_some();
        let (config, client) = (self.config.clone(), self.client.clone());
        Box::pin(
            async move {
                // All at once: each answers when its containers have stopped.
                let stops =
                    workers.iter().map(|w| w.send(Shutdown { stop_containers, quietly: false }));
                futures::future::join_all(stops).await;
                // Then the node is free for another agent (one waiting for this one to stop),
                // unless its containers are left running for this agent to adopt again.
                if registered && stop_containers {
                    if let Err(error) = node_lease::let_go(&config, client.as_ref()).await {
                        tracing::debug!(node = %config.node_name, %error, "letting go of the node");
                    }
                }
            }
            .into_actor(self)
            .map(|_, _, ctx| ctx.stop()),
        )
    }
}

/// Creates the Node, or brings an existing one up to date; returns the node's pod network
/// once it has one: the server's node IPAM controller hands each node a /24 of the cluster's,
/// as kube-controller-manager's does for the kubelet.
pub(super) async fn register(
    config: &AgentConfig,
    client: &dyn ApiClient,
    machine: &Machine,
    runtime: &str,
) -> Result<(std::net::Ipv4Addr, String), RegisterError> {
    if let Some(other) = node_lease::held_by_another(config, client).await? {
        return Err(other.into());
    }
    let nodes = resources::core("nodes");
    let mut wait = Duration::from_millis(10);
    let started = Instant::now();
    let mut told = false;
    let mut reconciled = false;
    loop {
        match client.get(nodes, "", &config.node_name).await {
            Ok(node) => {
                // A node that was there: its default labels set again, as the kubelet's.
                if !std::mem::replace(&mut reconciled, true) {
                    if let Some(patch) = node_status::metadata_patch(config, &node, true) {
                        let name = &config.node_name;
                        client.patch(nodes, "", name, PatchType::Merge, &patch, false).await?;
                    }
                }
                let cidr = node.pointer("/spec/podCIDR").and_then(Value::as_str);
                if let Some((network, _)) = cidr.and_then(crate::model::cidr::parse) {
                    return Ok((network, object_uid(&node).to_string()));
                }
                if !told && started.elapsed() >= NETWORK_PATIENCE {
                    told = true;
                    tracing::warn!(node = %config.node_name, "the node has no pod CIDR yet; \
                        waiting for the server's node IPAM controller to give it one");
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(1));
            }
            Err(ApiError::NotFound { .. }) => {
                let node = node_status::new_node(config, machine, runtime, &now());
                match client.create(nodes, "", node).await {
                    Ok(_) | Err(ApiError::AlreadyExists { .. }) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Why the agent could not register its node (yet).
#[derive(Debug, thiserror::Error)]
pub(super) enum RegisterError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Held(#[from] HeldByAnother),
    #[error(transparent)]
    Lost(NodeLost),
}

/// How long a registered node waits for its pod CIDR before the agent says it is waiting.
const NETWORK_PATIENCE: Duration = Duration::from_secs(5);

/// Records the kubelet's events about its node: `Starting` first when `starting`, then each
/// of `reasons` ("Node a status is now: NodeReady"). The kubelet names its node by name, uid
/// included.
async fn node_events(
    client: &dyn ApiClient,
    config: &AgentConfig,
    starting: bool,
    reasons: &[&str],
) {
    let name = &config.node_name;
    let starting = starting.then(|| ("Starting", "Starting kubelet.".to_string()));
    let changes = reasons.iter().map(|r| (*r, format!("Node {name} status is now: {r}")));
    for (reason, message) in starting.into_iter().chain(changes) {
        node_event(client, config, EventKind::Normal, reason, &message).await;
    }
}

/// Records one of the kubelet's events about its node (named by name, uid included).
async fn node_event(
    client: &dyn ApiClient,
    config: &AgentConfig,
    kind: EventKind,
    reason: &str,
    message: &str,
) {
    let name = config.node_name.clone();
    // No apiVersion, as the kubelet names its node (`kubectl events --for node/N` asks for
    // `v1` ones: the node controller's).
    let about = ObjectRef {
        kind: "Node",
        api_version: String::new(),
        namespace: String::new(),
        name: name.clone(),
        uid: name.clone(),
        field_path: None,
    };
    events::record_on_node(client, &about, kind, reason, message, COMPONENT, &name).await;
}

/// Feeds the agent the pods bound to `node` until the agent stops.
async fn list_watch(node: String, client: Arc<dyn ApiClient>, agent: Addr<NodeAgent>) {
    let scope = informer::Scope::fields(format!("spec.nodeName={node}"));
    informer::list_watch(client, resources::core("pods"), scope, move |feed| {
        match feed {
            Feed::Listed(pods) => agent.do_send(Relisted(pods)),
            Feed::Changed(kind, pod) => agent.do_send(PodEvent(kind, pod)),
            Feed::Unavailable(_) => {}
        }
        agent.connected()
    })
    .await;
}

/// What a pod takes of its node (requests, host ports, tolerations, ...); `None` when it does
/// not read as a pod.
fn pod_info(pod: &Value) -> Option<PodInfo> {
    serde_json::from_value::<Pod>(pod.clone()).ok().map(|typed| PodInfo::new(&typed))
}

/// Whether a pod has succeeded or failed (`status.phase`).
fn finished(pod: &Value) -> bool {
    matches!(pod.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"))
}
