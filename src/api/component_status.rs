//! core/v1 `componentstatuses` (`kubectl get cs`), deprecated in Kubernetes since 1.19 and
//! still served: the health of the scheduler, the controller manager and each store shard
//! (`etcd-<n>`, as Kubernetes names its storage servers), probed on every read.

use std::sync::OnceLock;
use std::time::Duration;

use actix::Recipient;
use actix_web::http::{Method, StatusCode};
use actix_web::{HttpRequest, HttpResponse};
use kplane_actors::core::{self, ApiError};
use kplane_actors::health::{self, Ping};
use kplane_actors::model::ResourceType;
use serde_json::{json, Value};

use super::media::{self, Conversion};
use super::params::Query;
use super::request_info::Target;
use super::table;
use super::AppState;
use crate::error::HttpError;

/// How long a component has to answer its probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The warning every answer carries, as kube-apiserver's for this deprecated resource.
const DEPRECATED: &str = "v1 ComponentStatus is deprecated in v1.19+";

/// The components probed besides the store, known once the daemon has started them.
pub struct Components {
    /// The scheduler, when this server runs one.
    pub scheduler: Option<Recipient<Ping>>,
    /// The controller manager's controllers, each by its name.
    pub controllers: Vec<(&'static str, Recipient<Ping>)>,
}

/// Where the daemon leaves the [`Components`] it started.
pub type ComponentSlot = OnceLock<Components>;

/// GET of `componentstatuses`: the list, or one by name (404 for another name). Other verbs
/// and watches are 405, as in Kubernetes.
pub async fn serve(
    req: &HttpRequest,
    method: &Method,
    state: &AppState,
    target: &Target,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    if method != Method::GET
        || target.subresource.is_some()
        || target.legacy_watch
        || query.flag("watch")
    {
        return Err(HttpError::MethodNotAllowed);
    }
    let resource = target.resource;
    let mut statuses = probe_all(state).await;
    let mut response = match target.name.as_deref() {
        Some(name) => {
            let at = statuses
                .iter()
                .position(|s| s["metadata"]["name"] == name)
                .ok_or_else(|| ApiError::not_found(resource, name))?;
            one(req, resource, statuses.swap_remove(at), query)?
        }
        None => {
            let selected = core::list_filter(resource, None, &query.list_options()?)?;
            statuses.retain(|status| selected.matches_value(resource, status));
            list(req, resource, statuses, query)?
        }
    };
    super::objects::add_warnings(&mut response, &[DEPRECATED.to_string()]);
    Ok(response)
}

/// Every component's status, in a fixed order: scheduler, controller manager, store shards.
async fn probe_all(state: &AppState) -> Vec<Value> {
    let components = state.components.get();
    let scheduler = async {
        match components.and_then(|c| c.scheduler.as_ref()) {
            Some(scheduler) => health::ping(scheduler, PROBE_TIMEOUT).await,
            None => Err("the scheduler does not run in this server".to_string()),
        }
    };
    let controllers = async {
        let Some(components) = components else {
            return Err("the controller manager has not started".to_string());
        };
        let pings = components.controllers.iter().map(|(name, controller)| async move {
            health::ping(controller, PROBE_TIMEOUT).await.map_err(|why| format!("{name}: {why}"))
        });
        let failed: Vec<String> =
            futures::future::join_all(pings).await.into_iter().filter_map(Result::err).collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(format!("controllers not answering: {}", failed.join("; ")))
        }
    };
    let (scheduler, controllers, shards) =
        tokio::join!(scheduler, controllers, state.core.check_store_shards(PROBE_TIMEOUT));
    let mut statuses =
        vec![status("scheduler", scheduler), status("controller-manager", controllers)];
    for (index, shard) in shards.into_iter().enumerate() {
        statuses.push(status(&format!("etcd-{index}"), shard));
    }
    statuses
}

/// A ComponentStatus (without its type, as a list's item) from its probe's outcome.
fn status(name: &str, probed: Result<(), String>) -> Value {
    let condition = match probed {
        Ok(()) => json!({"type": "Healthy", "status": "True", "message": "ok"}),
        Err(why) => json!({"type": "Healthy", "status": "False", "error": why}),
    };
    json!({"metadata": {"name": name, "creationTimestamp": null}, "conditions": [condition]})
}

/// One status in the form `Accept` asks for.
fn one(
    req: &HttpRequest,
    resource: &ResourceType,
    status: Value,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    Ok(match media::conversion(req, false) {
        Conversion::Table(version) => {
            let include = super::objects::include_object(query)?;
            table_response(table::table_of_computed(resource.kind, vec![status], include), version)
        }
        Conversion::Metadata(version) => json_response(
            json!({"kind": "PartialObjectMetadata", "apiVersion": format!("meta.k8s.io/{version}"),
                   "metadata": status["metadata"]}),
        ),
        Conversion::MetadataList(_) => {
            return Err(super::partial::object_refused(resource.group, resource.kind))
        }
        Conversion::None | Conversion::Discovery(_) => {
            let mut typed = serde_json::Map::new();
            typed.insert("kind".into(), json!(resource.kind));
            typed.insert("apiVersion".into(), json!(resource.api_version()));
            if let Value::Object(fields) = status {
                typed.extend(fields);
            }
            json_response(Value::Object(typed))
        }
    })
}

/// The statuses as a list, in the form `Accept` asks for.
fn list(
    req: &HttpRequest,
    resource: &ResourceType,
    statuses: Vec<Value>,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    Ok(match media::conversion(req, false) {
        Conversion::Table(version) => {
            let include = super::objects::include_object(query)?;
            table_response(table::table_of_computed(resource.kind, statuses, include), version)
        }
        Conversion::MetadataList(version) => {
            let api_version = format!("meta.k8s.io/{version}");
            let items: Vec<Value> = statuses
                .iter()
                .map(|s| {
                    json!({"kind": "PartialObjectMetadata", "apiVersion": api_version,
                           "metadata": s["metadata"]})
                })
                .collect();
            json_response(json!({"kind": "PartialObjectMetadataList", "apiVersion": api_version,
                       "metadata": {}, "items": items}))
        }
        Conversion::Metadata(_) => return Err(super::partial::list_refused(resource)),
        Conversion::None | Conversion::Discovery(_) => json_response(json!({
            "kind": resource.list_kind,
            "apiVersion": resource.api_version(),
            "metadata": {},
            "items": statuses,
        })),
    })
}

fn json_response(body: Value) -> HttpResponse {
    super::objects::json_bytes(StatusCode::OK, body.to_string().into())
}

fn table_response(table: Value, version: &str) -> HttpResponse {
    super::objects::table_response(StatusCode::OK, table, version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_says_why_its_component_is_unhealthy() {
        let healthy = status("etcd-0", Ok(()));
        assert_eq!(
            healthy,
            json!({"metadata": {"name": "etcd-0", "creationTimestamp": null},
                   "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]})
        );
        let unhealthy = status("scheduler", Err("the scheduler does not run".into()));
        assert_eq!(
            unhealthy["conditions"],
            json!([{"type": "Healthy", "status": "False", "error": "the scheduler does not run"}])
        );
    }
}
