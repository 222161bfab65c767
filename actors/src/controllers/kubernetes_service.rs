//! The `kubernetes` Service, as kube-apiserver keeps it: a Service named `kubernetes` in
//! `default`, at the first address of the service range, port 443 (`https`) to the API
//! server's secure port, with no selector, and the Endpoints and EndpointSlice of the same name
//! listing the API server's address. Pods find the API server through it
//! (`KUBERNETES_SERVICE_HOST`). What is missing is made at start and then every `interval`
//! (kube-apiserver: 10 s); the endpoints' addresses and ports (and the Endpoints'
//! `skip-mirror` label) are put back each time, the Service's type and ports at start only,
//! as kube-apiserver's controller reconciles them on its first run only.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::{json, Value};

use crate::client::ApiClient;
use crate::core::ApiError;
use crate::model::{json, resources, ResourceType};

const NAMESPACE: &str = "default";
const NAME: &str = "kubernetes";
const PORT_NAME: &str = "https";
const SERVICE_PORT: u16 = 443;

/// Where the API server is, and where its Service goes.
#[derive(Debug, Clone)]
pub struct KubernetesServiceConfig {
    /// The address and secure port the API server is reached at.
    pub address: Ipv4Addr,
    pub port: u16,
    /// The Service's cluster IP: the first address of the service range.
    pub cluster_ip: Ipv4Addr,
    pub interval: Duration,
}

/// The actor keeping the `kubernetes` Service and its endpoints.
pub struct KubernetesServiceController {
    client: Arc<dyn ApiClient>,
    config: KubernetesServiceConfig,
    /// A reconcile is running: the next tick leaves it be.
    busy: bool,
    /// The first reconcile has been done (the Service's type and ports are put back then).
    started: bool,
}

/// Stops the controller.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopKubernetesServiceController;

impl KubernetesServiceController {
    pub fn new(client: Arc<dyn ApiClient>, config: KubernetesServiceConfig) -> Self {
        Self { client, config, busy: false, started: false }
    }

    fn reconcile(&mut self, ctx: &mut Context<Self>) {
        if std::mem::replace(&mut self.busy, true) {
            return;
        }
        let (client, config, first) = (self.client.clone(), self.config.clone(), !self.started);
        let reconciling = async move {
            let reconciled = reconcile(client.as_ref(), &config, first).await;
            if let Err(error) = &reconciled {
                tracing::warn!(%error, "keeping the kubernetes service");
            }
            reconciled.is_ok()
        };
        ctx.spawn(reconciling.into_actor(self).map(|done, me, _| {
            me.busy = false;
            me.started |= done;
        }));
    }
}

impl Actor for KubernetesServiceController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.reconcile(ctx);
        ctx.run_interval(self.config.interval, |me, ctx| me.reconcile(ctx));
    }
}

impl Handler<StopKubernetesServiceController> for KubernetesServiceController {
    type Result = ();

    fn handle(&mut self, _: StopKubernetesServiceController, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

fn service_ports(config: &KubernetesServiceConfig) -> Value {
    json!([{"name": PORT_NAME, "port": SERVICE_PORT, "protocol": "TCP",
        "targetPort": config.port}])
}

fn endpoint_ports(config: &KubernetesServiceConfig) -> Value {
    json!([{"name": PORT_NAME, "port": config.port, "protocol": "TCP"}])
}

/// The Service, the Endpoints and the EndpointSlice, each created when missing and updated
/// when what it says of the API server differs (the Service's type and ports on the `first`
/// run only).
async fn reconcile(
    client: &dyn ApiClient,
    config: &KubernetesServiceConfig,
    first: bool,
) -> Result<(), ApiError> {
    let services = resources::core("services");
    let mut service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": NAME, "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": config.cluster_ip.to_string(),
            "sessionAffinity": "None", "ports": service_ports(config)}});
    let fields: &[&str] = if first { &["/spec/type", "/spec/ports"] } else { &[] };
    match keep(client, services, service.clone(), fields).await {
        // The first address went to another service (before this controller ran here): any
        // will do.
        Err(ApiError::Invalid { .. }) => {
            service["spec"].as_object_mut().map(|spec| spec.remove("clusterIP"));
            keep(client, services, service, fields).await?;
        }
        kept => kept?,
    }
    let address = config.address.to_string();
    let endpoints = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": NAME, "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": address}], "ports": endpoint_ports(config)}]});
    let fields = ["/subsets", "/metadata/labels/endpointslice.kubernetes.io~1skip-mirror"];
    keep(client, resources::core("endpoints"), endpoints, &fields).await?;
    let slices = resources::find("discovery.k8s.io", "v1", "endpointslices").expect("served");
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": NAME, "labels": {"kubernetes.io/service-name": NAME}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": true}}],
        "ports": endpoint_ports(config)});
    keep(client, slices, slice, &["/endpoints", "/ports"]).await
}

/// Creates `wanted` when missing; when the stored one differs at any of `fields` (JSON
/// pointers), writes those over it.
async fn keep(
    client: &dyn ApiClient,
    resource: &'static ResourceType,
    wanted: Value,
    fields: &[&str],
) -> Result<(), ApiError> {
    match client.get(resource, NAMESPACE, NAME).await {
        Ok(mut stored) => {
            let differs = fields.iter().any(|f| json::at(&stored, f) != json::at(&wanted, f));
            if differs {
                for field in fields {
                    let (parent, key) = field.rsplit_once('/').expect("a JSON pointer");
                    let key = json::unescape_token(key);
                    let value = json::at(&wanted, field).cloned().unwrap_or(Value::Null);
                    if json::at(&stored, parent).is_none_or(Value::is_null) {
                        // A label put back where no labels are left.
                        let (grand, name) = parent.rsplit_once('/').expect("a JSON pointer");
                        let grand = json::at_mut(&mut stored, grand).and_then(Value::as_object_mut);
                        grand.map(|grand| grand.insert(name.to_string(), json!({})));
                    }
                    let parent = json::at_mut(&mut stored, parent).and_then(Value::as_object_mut);
                    parent.map(|parent| parent.insert(key, value));
                }
                client.update(resource, NAMESPACE, stored).await?;
            }
            Ok(())
        }
        Err(ApiError::NotFound { .. }) => match client.create(resource, NAMESPACE, wanted).await {
            Ok(_) | Err(ApiError::AlreadyExists { .. }) => Ok(()),
            Err(error) => Err(error),
        },
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{core, eventually};

    fn config(port: u16) -> KubernetesServiceConfig {
        KubernetesServiceConfig {
            address: Ipv4Addr::LOCALHOST,
            port,
            cluster_ip: Ipv4Addr::new(127, 192, 0, 1),
            interval: Duration::from_secs(10),
        }
    }

    #[actix::test]
    async fn the_service_and_its_endpoints_are_made_and_put_back() {
        let core = core().await;
        reconcile(&core, &config(6443), true).await.unwrap();
        let services = resources::core("services");
        let service = ApiClient::get(&core, services, NAMESPACE, NAME).await.unwrap();
        assert_eq!(service["spec"]["clusterIP"], "127.192.0.1");
        assert_eq!(service["spec"]["ports"][0]["targetPort"], 6443);
        assert_eq!(service["metadata"]["labels"]["provider"], "kubernetes");
        let endpoints = resources::core("endpoints");
        let listed = ApiClient::get(&core, endpoints, NAMESPACE, NAME).await.unwrap();
        assert_eq!(listed["subsets"][0]["addresses"][0]["ip"], "127.0.0.1");
        assert_eq!(listed["subsets"][0]["ports"][0]["port"], 6443);

        // The API server moved to another port; the service was deleted meanwhile.
        ApiClient::delete(&core, services, NAMESPACE, NAME, &Default::default()).await.unwrap();
        reconcile(&core, &config(7443), false).await.unwrap();
        let service = ApiClient::get(&core, services, NAMESPACE, NAME).await.unwrap();
        assert_eq!(service["spec"]["ports"][0]["targetPort"], 7443);
        let listed = ApiClient::get(&core, endpoints, NAMESPACE, NAME).await.unwrap();
        assert_eq!(listed["subsets"][0]["ports"][0]["port"], 7443);
        let slices = resources::find("discovery.k8s.io", "v1", "endpointslices").unwrap();
        let slice = ApiClient::get(&core, slices, NAMESPACE, NAME).await.unwrap();
        assert_eq!(slice["ports"][0]["port"], 7443);
        assert_eq!(slice["endpoints"][0]["addresses"][0], "127.0.0.1");
        let version = slice["metadata"]["resourceVersion"].clone();
        reconcile(&core, &config(7443), false).await.unwrap();
        let again = ApiClient::get(&core, slices, NAMESPACE, NAME).await.unwrap();
        assert_eq!(again["metadata"]["resourceVersion"], version, "nothing to write");

        // Made a node port: left be while running, as kube-apiserver leaves it; put back as a
        // cluster IP, its node port freed, at the next start; then left be.
        let mut exposed = ApiClient::get(&core, services, NAMESPACE, NAME).await.unwrap();
        exposed["spec"]["type"] = json!("NodePort");
        let exposed = ApiClient::update(&core, services, NAMESPACE, exposed).await.unwrap();
        assert!(exposed["spec"]["ports"][0]["nodePort"].is_u64(), "{exposed}");
        reconcile(&core, &config(7443), false).await.unwrap();
        let kept = ApiClient::get(&core, services, NAMESPACE, NAME).await.unwrap();
        assert_eq!(kept["metadata"]["resourceVersion"], exposed["metadata"]["resourceVersion"]);
        reconcile(&core, &config(7443), true).await.unwrap();
        let back = ApiClient::get(&core, services, NAMESPACE, NAME).await.unwrap();
        assert_eq!(back["spec"]["type"], "ClusterIP");
        assert!(back["spec"]["ports"][0].get("nodePort").is_none(), "{back}");
        reconcile(&core, &config(7443), false).await.unwrap();
        let again = ApiClient::get(&core, services, NAMESPACE, NAME).await.unwrap();
        assert_eq!(again["metadata"]["resourceVersion"], back["metadata"]["resourceVersion"]);

        // The Endpoints' skip-mirror label taken off: put back (else a mirrored slice would
        // stand beside the API server's own), also where no labels are left.
        let mut unlabelled = ApiClient::get(&core, endpoints, NAMESPACE, NAME).await.unwrap();
        unlabelled["metadata"].as_object_mut().unwrap().remove("labels");
        ApiClient::update(&core, endpoints, NAMESPACE, unlabelled).await.unwrap();
        reconcile(&core, &config(7443), false).await.unwrap();
        let relabelled = ApiClient::get(&core, endpoints, NAMESPACE, NAME).await.unwrap();
        let label = &relabelled["metadata"]["labels"]["endpointslice.kubernetes.io/skip-mirror"];
        assert_eq!(label, "true", "{relabelled}");
    }

    /// Running, the controller leaves a user's change of the Service's type be: each tick
    /// after the first puts back what is missing, and the endpoints, only.
    #[actix::test]
    async fn a_running_controller_leaves_the_services_type_be() {
        let core = core().await;
        let config =
            KubernetesServiceConfig { interval: Duration::from_millis(50), ..config(6443) };
        let _controller = KubernetesServiceController::new(Arc::new(core.clone()), config).start();
        let (services, endpoints) = (resources::core("services"), resources::core("endpoints"));
        let get = |resource| {
            let core = core.clone();
            async move { ApiClient::get(&core, resource, NAMESPACE, NAME).await.ok() }
        };
        eventually("the endpoints", || get(endpoints)).await;
        let mut exposed = get(services).await.unwrap();
        exposed["spec"]["type"] = json!("NodePort");
        ApiClient::update(&core, services, NAMESPACE, exposed).await.unwrap();
        // A tick after the change: the endpoints deleted are put back.
        ApiClient::delete(&core, endpoints, NAMESPACE, NAME, &Default::default()).await.unwrap();
        eventually("the endpoints back", || get(endpoints)).await;
        assert_eq!(get(services).await.unwrap()["spec"]["type"], "NodePort");
    }

    #[actix::test]
    async fn a_taken_first_address_gives_way() {
        let core = core().await;
        let other = json!({"metadata": {"name": "first"},
            "spec": {"clusterIP": "127.192.0.1", "ports": [{"port": 80}]}});
        ApiClient::create(&core, resources::core("services"), NAMESPACE, other).await.unwrap();
        reconcile(&core, &config(6443), true).await.unwrap();
        let service =
            ApiClient::get(&core, resources::core("services"), NAMESPACE, NAME).await.unwrap();
        assert_ne!(service["spec"]["clusterIP"], "127.192.0.1");
    }
}
