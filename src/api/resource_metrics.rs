//! metrics.k8s.io/v1beta1, as metrics-server serves it to `kubectl top`: `nodes` and
//! `pods` (get and list, with label selectors and `metadata.name`/`metadata.namespace` field
//! selectors, unpaged), answered from the metrics scraper's readings of running pods and of
//! nodes; and the scraper's way to the node agents' `/stats/summary` over HTTP.

use std::time::Duration;

use actix::Addr;
use actix_web::http::{Method, StatusCode};
use actix_web::{HttpRequest, HttpResponse};
use async_trait::async_trait;
use kplane_actors::core::{ApiError, ListOptions};
use kplane_actors::metrics::{MetricsScraper, NodeMetricsOf, PodMetricsOf, SummarySource};
use kplane_actors::model::{resources, ResourceType};
use serde_json::{json, Value};

use super::media::{self, Conversion};
use super::params::Query;
use super::proxy::agent_url_of;
use super::request_info::Target;
use super::AppState;
use crate::error::HttpError;

/// GET of a metrics.k8s.io resource: one object (404 when the object or its metrics are
/// missing) or a list of those that have metrics. Other verbs are 405; without the scraper
/// (`[metrics_server] enabled = false`), 503.
pub async fn serve(
    req: &HttpRequest,
    state: &AppState,
    target: &Target,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    if req.method() != Method::GET || target.subresource.is_some() {
        return Err(HttpError::MethodNotAllowed);
    }
    let metrics = target.resource;
    if query.flag("watch") {
        let message = format!(
            "watch is not supported on resources of kind \"{}.{}\"",
            metrics.plural, metrics.group
        );
        return Err(HttpError::Api(ApiError::MethodNotAllowed(message)));
    }
    let scraper = state.resource_metrics.as_ref().ok_or_else(|| {
        HttpError::Api(ApiError::Unavailable("the metrics server is not enabled".into()))
    })?;
    let objects = target_objects(metrics).ok_or(HttpError::NoSuchPath)?;
    let namespace = target.namespace.as_deref();
    let (objects, list) = match target.name.as_deref() {
        Some(name) => {
            // A missing object is the object's own 404 (`pods "x" not found`), as
            // metrics-server answers from its lister.
            // metrics-server knows running pods only.
            let object = state.core.get(objects, namespace.unwrap_or(""), name).await?;
            let object = object.to_value();
            if metrics.namespaced && !is_running(&object) {
                return Err(HttpError::Api(ApiError::not_found(objects, name)));
            }
            (vec![object], false)
        }
        None => {
            // Unpaged, as metrics-server lists; by the selectors metrics.k8s.io knows.
            let options =
                ListOptions { limit: None, continue_token: None, ..query.list_options()? };
            kplane_actors::core::list_filter(metrics, namespace, &options)?;
            let listed = state.core.list(objects, namespace, &options).await?;
            let objects = listed.items.iter().map(|o| o.to_value());
            (objects.filter(|o| !metrics.namespaced || is_running(o)).collect(), true)
        }
    };
    let mut items = read(scraper, metrics, objects).await?;
    if !list && items.is_empty() {
        let name = target.name.as_deref().unwrap_or("");
        let named = match namespace {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.to_string(),
        };
        return Err(not_found(metrics, &named));
    }
    // kubectl get asks for a Table: metrics-server's columns (usage, window).
    if let Conversion::Table(version) = media::conversion(req, false) {
        let include = super::objects::include_object(query)?;
        let table = super::table::table_of_computed(metrics.kind, items, include);
        return Ok(super::objects::table_response(StatusCode::OK, table, version));
    }
    let body = if list { list_of(metrics, items) } else { items.swap_remove(0) };
    Ok(super::objects::json_bytes(StatusCode::OK, body.to_string().into()))
}

/// Asks the scraper for the metrics of `objects` (nodes or pods).
async fn read(
    scraper: &Addr<MetricsScraper>,
    metrics: &ResourceType,
    objects: Vec<Value>,
) -> Result<Vec<Value>, HttpError> {
    let asked = if metrics.namespaced {
        scraper.send(PodMetricsOf(objects)).await
    } else {
        scraper.send(NodeMetricsOf(objects)).await
    };
    asked.map_err(|_| HttpError::Api(ApiError::Unavailable("the metrics server stopped".into())))
}

/// The core/v1 resource a metrics resource reports on: nodes or pods.
fn target_objects(metrics: &ResourceType) -> Option<&'static ResourceType> {
    resources::find("", "v1", metrics.plural)
}

fn is_running(pod: &Value) -> bool {
    pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
}

/// A list of metrics, whose items name no kind, as metrics-server's lists.
fn list_of(metrics: &ResourceType, mut items: Vec<Value>) -> Value {
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        item.remove("kind");
        item.remove("apiVersion");
    }
    json!({"kind": metrics.list_kind, "apiVersion": metrics.api_version(),
        "metadata": {}, "items": items})
}

/// `podmetrics.metrics.k8s.io "default/x" not found` (a pod's metrics by namespace and name,
/// a node's by name), as metrics-server words it.
fn not_found(metrics: &ResourceType, name: &str) -> HttpError {
    let resource = match metrics.namespaced {
        true => "podmetrics",
        false => "nodemetrics",
    };
    HttpError::Api(ApiError::NotFound {
        resource,
        group: resources::METRICS_GROUP,
        name: name.to_string(),
    })
}

/// The node agents' summaries, read over HTTP at each node's InternalIP and agent port.
pub struct AgentSummaries {
    http: reqwest::Client,
}

impl AgentSummaries {
    pub fn new(timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .expect("an HTTP client without TLS builds");
        Self { http }
    }
}

#[async_trait]
impl SummarySource for AgentSummaries {
    async fn summary(&self, node: &Value) -> Result<Value, String> {
        let url = agent_url_of(node).map_err(|e| e.to_string())?;
        let url = url.join("stats/summary").map_err(|e| e.to_string())?;
        let response = self.http.get(url).send().await.map_err(|e| e.to_string())?;
        let response = response.error_for_status().map_err(|e| e.to_string())?;
        response.json().await.map_err(|e| e.to_string())
    }
}
