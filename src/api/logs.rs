//! `pods/{name}/log`: container logs, fetched from the node agent that runs the pod (its
//! `containerLogs` endpoint at the Node's InternalIP and kubelet port) and streamed back.

use actix_web::{HttpResponse, HttpResponseBuilder};
use futures::TryStreamExt;
use kplane_actors::core::ApiError;
use kplane_actors::model::resources;
use kplane_actors::model::validation::validate_pod_log_options;
use serde_json::Value;

use super::params::Query;
use super::AppState;
use crate::error::HttpError;

/// The log query parameters passed through to the agent.
const PASSED_THROUGH: &[&str] = &["tailLines", "limitBytes", "sinceSeconds", "sinceTime"];
/// The log flags, passed on as `true` or `false` (the API reads `1`, `True` or a bare
/// `?follow` as true too).
const FLAGS: &[&str] = &["follow", "previous", "timestamps"];

/// GET `pods/{name}/log`.
pub async fn serve(
    req: &actix_web::HttpRequest,
    state: &AppState,
    namespace: &str,
    name: &str,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    validate_options(query, name)?;
    let pods = resources::core("pods");
    let pod = state.core.get(pods, namespace, name).await?.to_value();
    let container = container_of(&pod, name, query.get("container"))?;
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    if node.is_empty() {
        // No node, no logs yet: Kubernetes answers an empty 204 (its log location is none).
        return Ok(HttpResponse::NoContent().finish());
    }
    let mut url = super::proxy::agent_url(state, node).await?;
    url.path_segments_mut()
        .map_err(|_| super::proxy::unavailable("bad node address".into()))?
        .extend(["containerLogs", namespace, name, &container]);
    for key in PASSED_THROUGH {
        if let Some(value) = query.get(key) {
            url.query_pairs_mut().append_pair(key, value);
        }
    }
    for key in FLAGS {
        url.query_pairs_mut().append_pair(key, if query.flag(key) { "true" } else { "false" });
    }
    let response = state.http.get(url).send().await.map_err(|e| {
        super::proxy::unavailable(format!("reaching the agent of node {node}: {e}"))
    })?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        return Err(match status.as_u16() {
            400 => HttpError::BadRequest(text.trim().to_string()),
            404 => HttpError::Api(ApiError::NotFound {
                resource: "pods/log",
                group: "",
                name: name.to_string(),
            }),
            _ => super::proxy::unavailable(format!(
                "the agent of node {node} answered {status}: {}",
                text.trim()
            )),
        });
    }
    // Followed, it ends when its client goes, and with it the agent's follower.
    let body = response.bytes_stream().map_err(actix_web::error::ErrorBadGateway);
    let body = crate::peer::until_gone(req, body);
    Ok(HttpResponseBuilder::new(actix_web::http::StatusCode::OK)
        .content_type("text/plain")
        .streaming(body))
}

/// Checks the log options as Kubernetes' `ValidatePodLogOptions` does, before the agent is
/// asked: a number that does not parse is 400, a value out of range 422 on `PodLogOptions`.
fn validate_options(query: &Query, name: &str) -> Result<(), HttpError> {
    let since_time = query.get("sinceTime").filter(|t| !t.is_empty());
    if let Some(time) = since_time {
        chrono::DateTime::parse_from_rfc3339(time)
            .map_err(|e| HttpError::BadRequest(format!("sinceTime: {time:?}: {e}")))?;
    }
    let causes = validate_pod_log_options(
        query.number("tailLines")?,
        query.number("limitBytes")?,
        query.number("sinceSeconds")?,
        since_time.is_some(),
    );
    if causes.is_empty() {
        return Ok(());
    }
    Err(HttpError::Api(ApiError::Invalid {
        kind: "PodLogOptions",
        group: "",
        name: name.to_string(),
        causes,
    }))
}

/// The container to read: the one named (of any kind, ephemeral ones included), or the only
/// one (an empty name is none, as Kubernetes' `validateContainer` takes it).
pub(super) fn container_of(
    pod: &Value,
    name: &str,
    wanted: Option<&str>,
) -> Result<String, HttpError> {
    let lists = ["/spec/initContainers", "/spec/containers", "/spec/ephemeralContainers"];
    let names: Vec<&str> = lists
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    let app: Vec<&str> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    match wanted.filter(|c| !c.is_empty()) {
        Some(c) if names.contains(&c) => Ok(c.to_string()),
        Some(c) => Err(HttpError::BadRequest(format!("container {c} is not valid for pod {name}"))),
        None if app.len() == 1 => Ok(app[0].to_string()),
        // (Every container is offered: init, app and ephemeral, as Kubernetes lists them.)
        None => Err(HttpError::BadRequest(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            names.join(" ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn options(query: &str) -> Result<(), HttpError> {
        validate_options(&Query::of(query).unwrap(), "p")
    }

    fn causes(query: &str) -> Vec<(String, String)> {
        match options(query) {
            Err(HttpError::Api(ApiError::Invalid { kind: "PodLogOptions", causes, .. })) => {
                causes.into_iter().map(|c| (c.field, c.message)).collect()
            }
            other => panic!("{query}: {other:?}"),
        }
    }

    #[test]
    fn log_options_are_checked_as_kubernetes_checks_them() {
        assert!(options("").is_ok());
        assert!(options("tailLines=0&limitBytes=1&sinceSeconds=1&follow=true").is_ok());
        assert!(options("sinceTime=2026-01-01T00:00:00Z&timestamps=true").is_ok());
        // Any flag value is a boolean, as Kubernetes reads them.
        assert!(options("follow=maybe&previous&timestamps=0").is_ok());
        for malformed in ["tailLines=x", "limitBytes=1.5", "sinceTime=yesterday"] {
            assert!(matches!(options(malformed), Err(HttpError::BadRequest(_))), "{malformed}");
        }
        assert_eq!(
            causes("tailLines=-1&limitBytes=0"),
            [
                (
                    "tailLines".into(),
                    "Invalid value: -1: must be greater than or equal to 0".into()
                ),
                ("limitBytes".into(), "Invalid value: 0: must be greater than 0".into()),
            ]
        );
        assert_eq!(causes("sinceSeconds=0")[0].0, "sinceSeconds");
        let both = causes("sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z");
        assert!(both[0].1.contains("at most one of `sinceTime` or `sinceSeconds`"), "{both:?}");
    }

    #[test]
    fn the_container_is_named_or_the_only_one() {
        let one = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(container_of(&one, "p", None).unwrap(), "a");
        assert_eq!(container_of(&one, "p", Some("")).unwrap(), "a", "empty is none");
        assert!(container_of(&one, "p", Some("b")).is_err());
        let two = json!({"spec": {"initContainers": [{"name": "i"}],
            "containers": [{"name": "a"}, {"name": "b"}]}});
        let e = container_of(&two, "p", None).unwrap_err().to_string();
        assert!(e.contains("choose one of: [i a b]"), "{e}");
        assert_eq!(container_of(&two, "p", Some("i")).unwrap(), "i");
    }
}
