//! Wires the server together: watch hub, store shards, API core and the HTTP listener.

use std::net::SocketAddr;
use std::sync::Arc;

use actix::{Actor, Addr};
use actix_web::{web, HttpServer};
use kplane_actors::client::ApiClient;
use kplane_actors::controllers::{
    ClusterRoleAggregator, DisruptionController, EndpointsController, EventTtl, EveryNamespace,
    GarbageCollector, Kept, KubernetesServiceConfig, KubernetesServiceController,
    NamespaceController, NodeIpamController, NodeLifecycleController, PersistentVolumeController,
    PodGarbageCollector, ReplicationManager, ResourceQuotaController, ServiceController,
    StopClusterRoleAggregator, StopCollector, StopDisruptionController, StopEndpointsController,
    StopEventTtl, StopEveryNamespace, StopKubernetesServiceController, StopNamespaceController,
    StopNodeIpamController, StopNodeLifecycleController, StopPersistentVolumeController,
    StopPodGarbageCollector, StopQuotaController, StopReplicationManager, StopServiceController,
    StopStorageProtector, StopSystemNamespaces, StopTaintEvictionController, StopTokensController,
    StorageProtector, SystemNamespaces, TaintEvictionController, TokensController,
};
use kplane_actors::core::{ApiCore, ApiError};
use kplane_actors::metrics::{MetricsScraper, StopMetricsScraper};
use kplane_actors::scheduler::{Scheduler, SchedulerConfig, StopScheduler};
use kplane_actors::store::{Store, StoreError, StoreOptions};
use kplane_actors::watch::{HubOptions, WatchHub};

use crate::api::{self, AppState};
use crate::config::Settings;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr} (--insecure-port/--insecure-bind-address): {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("cannot listen on {addr} (--secure-port/--bind-address): {source}")]
    BindSecure { addr: SocketAddr, source: std::io::Error },
    #[error("data_dir (--data-dir) {}: {source}", .path.display())]
    DataDir { path: std::path::PathBuf, source: std::io::Error },
    #[error("secure port TLS (server.tls_cert_file/tls_private_key_file/client_ca_file): {0}")]
    Tls(#[from] crate::auth::AuthConfigError),
    #[error("service account signing key: {0}")]
    ServiceAccountKey(crate::auth::AuthConfigError),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("bootstrap: {0}")]
    Bootstrap(#[from] ApiError),
    #[error("agent: {0}")]
    Agent(#[from] crate::agent::AgentStartError),
}

/// A started server: its bound address and the future that runs it until shutdown.
pub struct Running {
    pub insecure_addr: SocketAddr,
    pub server: actix_web::dev::Server,
    /// The embedded node agent, when enabled.
    pub agent: Option<crate::agent::RunningAgent>,
    scheduler: Option<Addr<Scheduler>>,
    collector: Addr<GarbageCollector>,
    namespaces: Addr<NamespaceController>,
    system_namespaces: Addr<SystemNamespaces>,
    quotas: Addr<ResourceQuotaController>,
    accounts: Addr<EveryNamespace>,
    root_ca: Option<Addr<EveryNamespace>>,
    tokens: Option<Addr<TokensController>>,
    replication: Addr<ReplicationManager>,
    endpoints: Addr<EndpointsController>,
    node_ipam: Addr<NodeIpamController>,
    node_lifecycle: Addr<NodeLifecycleController>,
    taint_eviction: Addr<TaintEvictionController>,
    pod_gc: Addr<PodGarbageCollector>,
    event_ttl: Option<Addr<EventTtl>>,
    services: Addr<ServiceController>,
    disruption: Addr<DisruptionController>,
    volumes: Addr<PersistentVolumeController>,
    kubernetes_service: Option<Addr<KubernetesServiceController>>,
    role_aggregator: Addr<ClusterRoleAggregator>,
    storage_protector: Addr<StorageProtector>,
    metrics_scraper: Option<Addr<MetricsScraper>>,
    store: Store,
}

impl Running {
    /// Serves until a shutdown signal, then closes the store so nothing is left half-written.
    pub async fn serve(self) -> std::io::Result<()> {
        let handle = self.server.handle();
        let server = self.server;
        // Our own signal handling: actix-server's would stop the whole actix system shortly
        // after the HTTP server, under the feet of the agent and the store still closing.
        let result = tokio::select! {
            result = server => result,
            () = shutdown_signal() => {
                tracing::info!("shutting down");
                handle.stop(true).await;
                Ok(())
            }
        };
        if let Some(agent) = self.agent {
            agent.stop().await;
        }
        // Components stop before the store closes, so none of them sees it go.
        if let Some(scheduler) = &self.scheduler {
            let _ = scheduler.send(StopScheduler).await;
        }
        let _ = self.collector.send(StopCollector).await;
        let _ = self.namespaces.send(StopNamespaceController).await;
        let _ = self.system_namespaces.send(StopSystemNamespaces).await;
        let _ = self.quotas.send(StopQuotaController).await;
        let _ = self.accounts.send(StopEveryNamespace).await;
        if let Some(root_ca) = &self.root_ca {
            let _ = root_ca.send(StopEveryNamespace).await;
        }
        if let Some(tokens) = &self.tokens {
            let _ = tokens.send(StopTokensController).await;
        }
        let _ = self.replication.send(StopReplicationManager).await;
        let _ = self.endpoints.send(StopEndpointsController).await;
        let _ = self.node_ipam.send(StopNodeIpamController).await;
        let _ = self.node_lifecycle.send(StopNodeLifecycleController).await;
        let _ = self.taint_eviction.send(StopTaintEvictionController).await;
        let _ = self.pod_gc.send(StopPodGarbageCollector).await;
        if let Some(event_ttl) = &self.event_ttl {
            let _ = event_ttl.send(StopEventTtl).await;
        }
        let _ = self.services.send(StopServiceController).await;
        let _ = self.disruption.send(StopDisruptionController).await;
        let _ = self.volumes.send(StopPersistentVolumeController).await;
        let _ = self.role_aggregator.send(StopClusterRoleAggregator).await;
        let _ = self.storage_protector.send(StopStorageProtector).await;
        if let Some(controller) = &self.kubernetes_service {
            let _ = controller.send(StopKubernetesServiceController).await;
        }
        if let Some(scraper) = &self.metrics_scraper {
            let _ = scraper.send(StopMetricsScraper).await;
        }
        self.store.close(std::time::Duration::from_secs(10)).await;
        result
    }
}

/// Creates the bootstrap roles and bindings that are missing (Kubernetes' RBAC bootstrap
/// policy) and, as kube-apiserver reconciles them at each start, gives those still annotated
/// `rbac.authorization.kubernetes.io/autoupdate: "true"` back what they lack: a role its
/// rules (or, for one that aggregates, its `aggregationRule`: its rules are the aggregation
/// controller's), a binding its subjects; what a user added stays.
async fn create_bootstrap_policy(client: &dyn ApiClient) -> Result<(), ApiError> {
    use kplane_actors::model::resources;
    const AUTOUPDATE: &str = "/metadata/annotations/rbac.authorization.kubernetes.io~1autoupdate";
    for (plural, object) in crate::auth::rbac::bootstrap_policy() {
        let resource = resources::find(resources::RBAC_GROUP, "v1", plural)
            .expect("RBAC resources are served");
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        match client.create(resource, &namespace, object.clone()).await {
            Ok(_) => {}
            Err(ApiError::AlreadyExists { .. }) => {
                let mut stored = client.get(resource, &namespace, &name).await?;
                let updatable = stored.pointer(AUTOUPDATE).and_then(|v| v.as_str()) == Some("true");
                if updatable && reconcile_bootstrap(&mut stored, &object) {
                    client.update(resource, &namespace, stored).await?;
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Gives a stored bootstrap role or binding what `expected` has and it lacks; whether it
/// changed.
fn reconcile_bootstrap(stored: &mut serde_json::Value, expected: &serde_json::Value) -> bool {
    let mut changed = false;
    if let Some(aggregation) = expected.get("aggregationRule") {
        if stored.get("aggregationRule").is_none() {
            stored["aggregationRule"] = aggregation.clone();
            changed = true;
        }
        return changed;
    }
    for list in ["rules", "subjects"] {
        let Some(wanted) = expected.get(list).and_then(|l| l.as_array()) else { continue };
        if !stored.get(list).is_some_and(|l| l.is_array()) {
            stored[list] = serde_json::json!([]);
        }
        let have = stored[list].as_array_mut().expect("made an array above");
        for item in wanted {
            if !have.contains(item) {
                have.push(item.clone());
                changed = true;
            }
        }
    }
    changed
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Turns transparent huge pages off for this process: all its threads, not the containers its
/// node agent starts (`huge_pages`). Every write of a store shard's resources passes through
/// the shard's one thread, and with huge pages the allocator's first touch of fresh memory
/// there faults in 2 MiB at once, zeroed whole (1-3 ms on a VM) while the shard's mailbox and
/// the writer behind it wait. With 4 KiB pages the same zeroing comes in small steps. At 64
/// clients this took the writer's idle time between commits from ~360 to ~240 µs and raised
/// durable creates/s by 15-20% (benches/README.md, the fourth sitting).
/// Makes the data dir and checks that it takes a file, before the certificates, keys and store
/// written there: a data dir that cannot be written is named as such, once.
fn prepare_data_dir(dir: &std::path::Path) -> Result<(), StartError> {
    let fail = |source| StartError::DataDir { path: dir.to_path_buf(), source };
    std::fs::create_dir_all(dir).map_err(fail)?;
    let probe = dir.join(".write-check");
    std::fs::write(&probe, b"kplane").map_err(fail)?;
    std::fs::remove_file(&probe).map_err(fail)
}

fn disable_transparent_huge_pages() {
    match kplane_actors::agent::runtime::huge_pages::turn_off_for_this_process() {
        Ok(()) => tracing::debug!("transparent huge pages are off for this process"),
        Err(error) => tracing::warn!(%error, "cannot turn transparent huge pages off"),
    }
}

/// Starts every component inside the current actix system and binds the listener.
pub async fn start(settings: &Settings) -> Result<Running, StartError> {
    if settings.disable_transparent_huge_pages {
        disable_transparent_huge_pages();
    }
    // Bind first: a busy port must stop start-up before any store is opened.
    let addr = settings.insecure_addr;
    let listener =
        std::net::TcpListener::bind(addr).map_err(|source| StartError::Bind { addr, source })?;
    let agent_port = match settings.agent.enabled {
        true => Some(crate::agent::AgentPort::bind(&settings.agent.agent)?),
        false => None,
    };
    prepare_data_dir(&settings.data_dir)?;
    let client_certificates = match &settings.tls.client_ca {
        Some(ca) => Some(crate::auth::tls::ClientCertificates::load(ca)?),
        None => None,
    };
    let secure = match settings.secure_addr {
        addr if addr.port() == 0 => None,
        addr => {
            let listener = std::net::TcpListener::bind(addr)
                .map_err(|source| StartError::BindSecure { addr, source })?;
            // In-cluster clients reach it at the `kubernetes` Service's address, and at the
            // address advertised to them.
            let mut addresses = vec![kubernetes_service_ip(settings).into()];
            addresses.extend(settings.advertise_address.map(std::net::IpAddr::from));
            let tls = crate::auth::tls::server_config(
                &settings.tls,
                &settings.data_dir,
                &addresses,
                client_certificates.as_ref(),
            )?;
            Some((listener, tls.0, tls.1))
        }
    };
    let hub = WatchHub::start(HubOptions {
        window_events: settings.watch_window_events,
        window_bytes: settings.watch_window_bytes,
        buffer: settings.watch_buffer,
        bookmark_interval: settings.bookmark_interval,
    });
    let store_options = StoreOptions {
        shards: settings.shards,
        data_dir: Some(settings.data_dir.join("store")),
        history_changes: settings.watch_window_events,
        history_bytes: settings.watch_window_bytes,
    };
    let store = Store::open(&store_options, &hub)?;
    tracing::info!(revision = store.current_revision(), shards = settings.shards, "store opened");
    let issuer = match crate::auth::tokens::TokenIssuer::load_or_create(&settings.data_dir) {
        Ok(issuer) => Arc::new(issuer.with_jwks_uri(jwks_uri(settings))),
        Err(e) => {
            store.close(std::time::Duration::from_secs(10)).await;
            return Err(StartError::ServiceAccountKey(e));
        }
    };
    let mut core = ApiCore::new(store.clone(), hub)
        .with_service_ranges(settings.service_ranges.clone())
        .with_schema_check(Arc::new(api::openapi::check_patched))
        .with_token_signer(issuer.clone());
    // Pods get a token for their account where it is good: on the secure port, whose
    // certificate `kube-root-ca.crt` publishes.
    if secure.is_some() {
        core = core.with_api_access_volumes();
    }
    if let Err(e) = core.bootstrap().await {
        store.close(std::time::Duration::from_secs(10)).await;
        return Err(e.into());
    }
    let limits = api::InflightLimits::new(
        settings.max_requests_inflight,
        settings.max_mutating_requests_inflight,
    );
    let mut app_state =
        AppState::new(core, settings.max_request_body_bytes, settings.watch_max_timeout)
            .with_inflight_limits(limits);
    app_state.security = Some(settings.security.clone());
    app_state.tokens = Some(issuer);
    // The metrics server: reads the agents' usage for metrics.k8s.io (`kubectl top`).
    let metrics_scraper = settings.metrics_server.map(|config| {
        let client: Arc<dyn ApiClient> = Arc::new(app_state.core.clone());
        let source = Arc::new(api::resource_metrics::AgentSummaries::new(config.scrape_timeout));
        MetricsScraper::new(client, source, config).start()
    });
    app_state.resource_metrics = metrics_scraper.clone();
    let state = web::Data::new(app_state);
    let app_state = state.clone();
    let mut server = HttpServer::new(move || {
        // Called on each worker's thread as it starts (once per listener).
        kplane_actors::threads::name_current("kplane-http");
        crate::panics::mark_request_thread();
        api::app(app_state.clone())
    })
    .disable_signals()
    // Idle connections are kept as long as kube-apiserver keeps them (and Go's and Python's
    // clients expect): a client reusing one after a pause must not find it closed.
    .keep_alive(crate::peer::IDLE_KEEP_ALIVE)
    .client_request_timeout(crate::peer::REQUEST_HEAD_TIMEOUT)
    // TLS handshakes under way are not capped below what the process may hold open: at
    // actix's cap (256 a worker) every listener stopped accepting, so idle connections to
    // the secure port held the plain one up too (Go's server has no such cap).
    .max_connection_rate(crate::peer::MAX_HANDSHAKES)
    // Open watches are cut after 2 s; clients re-list and re-watch, as with kube-apiserver.
    .shutdown_timeout(2)
    // A client certificate the client CA vouches for names the user of its connection's
    // requests; one it does not leaves them unauthenticated (401), as kube-apiserver's
    // x509 authenticator judges them.
    .on_connect(move |connection, extensions| {
        crate::peer::note_socket(connection, extensions);
        type Tls = actix_tls::accept::rustls_0_23::TlsStream<actix_web::rt::net::TcpStream>;
        let Some(tls) = connection.downcast_ref::<Tls>() else { return };
        let (Some(chain), Some(clients)) =
            (tls.get_ref().1.peer_certificates(), client_certificates.as_ref())
        else {
            return;
        };
        if !clients.vouches_for(chain) {
            extensions.insert(crate::auth::authn::CertificateRejected);
            return;
        }
        // One that names no user (no CN) is no credential, as Kubernetes takes it.
        if let Some(user) = chain.first().and_then(|c| crate::auth::authn::certificate_user(c)) {
            extensions.insert(crate::auth::authn::CertificateUser(user));
        }
    })
    .listen(listener)
    .map_err(|source| StartError::Bind { addr, source })?;
    let insecure_addr = server.addrs().first().copied().unwrap_or(addr);
    tracing::info!(%insecure_addr, "serving the insecure port (no authentication)");
    let mut root_ca = None;
    if let Some((listener, tls, ca)) = secure {
        root_ca = Some(ca);
        let addr = settings.secure_addr;
        server = server
            .listen_rustls_0_23(listener, tls)
            .map_err(|source| StartError::BindSecure { addr, source })?;
        tracing::info!(secure = %addr, "serving the secure port (TLS, authentication, authorization)");
    }
    // The bootstrap roles and bindings; and, under RBAC, the authorizer's view of every role
    // and binding, kept by their list-watches.
    let apiserver: Arc<dyn ApiClient> =
        Arc::new(state.core.clone().with_field_manager("kube-apiserver"));
    if let Err(e) = create_bootstrap_policy(apiserver.as_ref()).await {
        store.close(std::time::Duration::from_secs(10)).await;
        return Err(e.into());
    }
    if let Some(rbac) = settings.security.authorizer.rbac() {
        for plural in crate::auth::rbac::RESOURCES {
            let resource = kplane_actors::model::resources::find(
                kplane_actors::model::resources::RBAC_GROUP,
                "v1",
                plural,
            )
            .expect("RBAC resources are served");
            let rbac = rbac.clone();
            let scope = kplane_actors::client::informer::Scope::default();
            actix::spawn(kplane_actors::client::informer::list_watch(
                apiserver.clone(),
                resource,
                scope,
                move |feed| {
                    rbac.apply(plural, feed);
                    true
                },
            ));
        }
        // Served only once the roles and bindings are known, as kube-apiserver waits for RBAC.
        let wait = std::time::Duration::from_secs(30);
        if tokio::time::timeout(wait, rbac.until_ready()).await.is_err() {
            tracing::warn!("RBAC's roles and bindings are not listed yet; serving anyway");
        }
    }
    // The garbage collector always runs: Orphan and Foreground deletions wait for it.
    let collector = GarbageCollector::new(Arc::new(
        state.core.clone().with_field_manager("kube-controller-manager"),
    ))
    .start();
    // So does the namespace controller: a deleted namespace goes once it has emptied it.
    let namespaces = NamespaceController::new(Arc::new(
        state.core.clone().with_field_manager("kube-controller-manager"),
    ))
    .start();
    // The API server's own: a deleted kube-node-lease namespace is created again.
    let system_namespaces =
        SystemNamespaces::new(Arc::new(state.core.clone().with_field_manager("kube-apiserver")))
            .start();
    // And the quota controller: a quota counts once it has worked out its usage.
    let quotas = ResourceQuotaController::new(
        Arc::new(state.core.clone().with_field_manager("kube-controller-manager")),
        state.core.quota_locks(),
    )
    .start();
    // And the service account controller: every namespace has its `default` account.
    let accounts = EveryNamespace::new(
        Arc::new(state.core.clone().with_field_manager("kube-controller-manager")),
        Kept::default_service_account(),
    )
    .start();
    // And the tokens controller: service account token Secrets get their account's token.
    let tokens = state.tokens.clone().map(|issuer| {
        let client = Arc::new(state.core.clone().with_field_manager("kube-controller-manager"));
        TokensController::new(client, issuer, root_ca.as_deref()).start()
    });
    // And, while the secure port is served, its certificate in every namespace's
    // `kube-root-ca.crt` (the root CA certificate publisher).
    let root_ca = root_ca.map(|ca| {
        let client = Arc::new(state.core.clone().with_field_manager("kube-controller-manager"));
        EveryNamespace::new(client, Kept::root_ca(&ca)).start()
    });
    // And the replication manager: a ReplicationController keeps its replicas.
    let replication = ReplicationManager::new(Arc::new(
        state.core.clone().with_field_manager("kube-controller-manager"),
    ))
    .start();
    // And the endpoints controller: a Service's Endpoints list the pods it selects.
    let endpoints = EndpointsController::new(Arc::new(
        state.core.clone().with_field_manager("kube-controller-manager"),
    ))
    .start();
    // And the node IPAM controller: each node gets a /24 of the cluster's pod network.
    let node_ipam = NodeIpamController::new(
        Arc::new(state.core.clone().with_field_manager("kube-controller-manager")),
        settings.agent.agent.cluster_cidr,
    )
    .start();
    // And the node lifecycle controller: a node whose agent went silent is not Ready, and
    // tainted so that its pods leave it.
    let node_lifecycle = NodeLifecycleController::new(
        Arc::new(state.core.clone().with_field_manager("kube-controller-manager")),
        settings.node_lifecycle.clone(),
    )
    .start();
    // And the taint eviction controller: pods leave nodes with NoExecute taints.
    let taint_eviction = TaintEvictionController::new(Arc::new(
        state.core.clone().with_field_manager("kube-controller-manager"),
    ))
    .start();
    // And the pod garbage collector: pods of nodes gone, and old finished pods, go.
    let pod_gc = PodGarbageCollector::new(
        Arc::new(state.core.clone().with_field_manager("kube-controller-manager")),
        kplane_actors::controllers::pod_gc::PodGcConfig {
            terminated_threshold: settings.terminated_pod_gc_threshold,
            ..Default::default()
        },
    )
    .start();
    // And event expiry: Events go an hour (`--event-ttl`) after their last write.
    let event_ttl = settings.event_ttl.map(|ttl| {
        EventTtl::new(Arc::new(state.core.clone().with_field_manager("kube-apiserver")), ttl)
            .start()
    });
    // And the service controller: LoadBalancer services get an address and a listener there.
    let services = ServiceController::start_in_own_thread(
        Arc::new(state.core.clone().with_field_manager("kube-controller-manager")),
        settings.load_balancer.clone(),
    );
    // And the disruption controller: evictions go by what each budget allows.
    let disruption = DisruptionController::new(Arc::new(
        state.core.clone().with_field_manager("kube-controller-manager"),
    ))
    .start();
    // And the persistent volume controller: claims are bound to volumes.
    let volumes = PersistentVolumeController::new(Arc::new(
        state.core.clone().with_field_manager("kube-controller-manager"),
    ))
    .start();
    // And the ClusterRole aggregation controller: `view`, `edit` and `admin` take in the rules
    // of the roles labelled for them (written as its own manager, as Kubernetes' is).
    let role_aggregator = ClusterRoleAggregator::new(Arc::new(
        state.core.clone().with_field_manager("clusterrole-aggregation-controller"),
    ))
    .start();
    // And the storage protection controllers: claims in use and bound volumes stay.
    let storage_protector = StorageProtector::new(Arc::new(
        state.core.clone().with_field_manager("kube-controller-manager"),
    ))
    .start();
    // And, while the secure port is served, the `kubernetes` Service that leads pods to it.
    let kubernetes_service = kubernetes_service_config(settings).map(|config| {
        let client = Arc::new(state.core.clone().with_field_manager("kube-apiserver"));
        KubernetesServiceController::new(client, config).start()
    });
    let scheduler = settings.scheduler_enabled.then(|| {
        let client: Arc<dyn ApiClient> =
            Arc::new(state.core.clone().with_field_manager("kube-scheduler"));
        tracing::info!("starting the scheduler");
        Scheduler::start_in_own_thread(client, SchedulerConfig::default())
    });
    // What `componentstatuses` probes: the scheduler and the controller manager's controllers,
    // by the names kube-controller-manager gives them.
    let mut controllers = vec![
        ("garbage-collector-controller", collector.clone().recipient()),
        ("namespace-controller", namespaces.clone().recipient()),
        ("resourcequota-controller", quotas.clone().recipient()),
        ("serviceaccount-controller", accounts.clone().recipient()),
        ("replicationcontroller-controller", replication.clone().recipient()),
        ("endpoints-controller", endpoints.clone().recipient()),
        ("node-ipam-controller", node_ipam.clone().recipient()),
        ("node-lifecycle-controller", node_lifecycle.clone().recipient()),
        ("taint-eviction-controller", taint_eviction.clone().recipient()),
        ("pod-garbage-collector-controller", pod_gc.clone().recipient()),
        ("service-lb-controller", services.clone().recipient()),
        ("disruption-controller", disruption.clone().recipient()),
        ("persistentvolume-binder-controller", volumes.clone().recipient()),
        ("clusterrole-aggregation-controller", role_aggregator.clone().recipient()),
        ("persistentvolume-protection-controller", storage_protector.clone().recipient()),
    ];
    if let Some(tokens) = &tokens {
        controllers.push(("serviceaccount-token-controller", tokens.clone().recipient()));
    }
    if let Some(root_ca) = &root_ca {
        controllers.push(("root-ca-certificate-publisher-controller", root_ca.clone().recipient()));
    }
    let components = api::component_status::Components {
        scheduler: scheduler.as_ref().map(|s| s.clone().recipient()),
        controllers,
    };
    if state.components.set(components).is_err() {
        tracing::warn!("the components were already known");
    }
    let agent = if settings.agent.enabled {
        let client: Arc<dyn ApiClient> = Arc::new(state.core.clone().with_field_manager("kubelet"));
        let config = settings.agent.agent.clone();
        match crate::agent::start(&settings.agent, config, client, agent_port).await {
            Ok(agent) => Some(agent),
            Err(e) => {
                store.close(std::time::Duration::from_secs(10)).await;
                return Err(e.into());
            }
        }
    } else {
        None
    };
    let server = server.run();
    Ok(Running {
        insecure_addr,
        server,
        agent,
        scheduler,
        collector,
        namespaces,
        system_namespaces,
        quotas,
        accounts,
        root_ca,
        tokens,
        replication,
        endpoints,
        node_ipam,
        node_lifecycle,
        taint_eviction,
        pod_gc,
        event_ttl,
        services,
        disruption,
        volumes,
        kubernetes_service,
        role_aggregator,
        storage_protector,
        metrics_scraper,
        store,
    })
}

/// Where the service account issuer's keys are served, as kube-apiserver says by default: on
/// the secure port at the address pods reach it by (the insecure port's when it is off).
fn jwks_uri(settings: &Settings) -> String {
    let path = crate::api::ISSUER_KEYS_PATH;
    match (kubernetes_service_config(settings), settings.secure_addr) {
        (Some(config), _) => format!("https://{}:{}{path}", config.address, config.port),
        // An IPv6 secure address (the `kubernetes` Service is IPv4 only).
        (None, secure) if secure.port() != 0 => format!("https://{secure}{path}"),
        (None, _) => format!("http://{}{path}", settings.insecure_addr),
    }
}

/// The `kubernetes` Service's cluster IP: the first address of the service range.
fn kubernetes_service_ip(settings: &Settings) -> std::net::Ipv4Addr {
    let (first, _) = kplane_actors::model::cidr::usable_range(settings.service_ranges.cluster_ips);
    first.into()
}

/// Where the `kubernetes` Service leads: the secure port, at the advertised address, or else
/// its own (127.0.0.1 when it listens on every address). None when the secure port is off, or
/// on IPv6 without an advertised address.
fn kubernetes_service_config(settings: &Settings) -> Option<KubernetesServiceConfig> {
    let secure = settings.secure_addr;
    if secure.port() == 0 {
        return None;
    }
    let address = match (settings.advertise_address, secure.ip()) {
        (Some(advertised), _) => advertised,
        (None, std::net::IpAddr::V4(ip)) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST,
        (None, std::net::IpAddr::V4(ip)) => ip,
        (None, std::net::IpAddr::V6(_)) => return None,
    };
    Some(KubernetesServiceConfig {
        address,
        port: secure.port(),
        cluster_ip: kubernetes_service_ip(settings),
        interval: std::time::Duration::from_secs(10),
    })
}
