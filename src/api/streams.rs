//! `pods/{name}/exec`, `pods/{name}/attach` and `pods/{name}/portforward`: the client's
//! WebSocket upgrade is relayed to the agent of the pod's node (its `/exec`, `/attach` and
//! `/portForward` endpoints, at the Node's InternalIP and kubelet port), and once the agent has
//! switched protocols the two connections are joined byte for byte, as kube-apiserver's
//! upgrade-aware proxy joins the client and the kubelet. The agent chooses the protocol (for
//! exec and attach `v5.channel.k8s.io`, which kubectl 1.32 offers, or `v4.channel.k8s.io`; for
//! port-forward kubectl's `SPDY/3.1+portforward.k8s.io` or the Python client's
//! `v4.channel.k8s.io`) and its answer goes back as it is. Only WebSocket upgrades are served:
//! a request without one is 400 ("Upgrade request required"), and so is SPDY, which kubectl
//! falls back to only when a WebSocket upgrade is refused (with why it was refused, for a
//! port-forward asking the agent again). An exec or attach whose agent
//! cannot be reached or refuses it (a container not running) is answered as kube-apiserver's
//! stream translator answers a `v5.channel.k8s.io` client: the upgrade is accepted and the
//! error is the final status on the error channel; older clients get the HTTP error.

use std::time::Duration;

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use futures::StreamExt;
use kplane_actors::model::resources;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::params::Query;
use super::AppState;
use crate::error::HttpError;

/// How long the agent may take to answer the upgrade.
const AGENT_TIMEOUT: Duration = Duration::from_secs(30);
/// The most of an agent's refusal read.
const MOST_ERROR_BYTES: usize = 64 * 1024;
/// The handshake headers passed on to the agent, and those passed back.
const HANDSHAKE: &[&str] =
    &["sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol"];
const HANDSHAKE_ANSWER: &[&str] = &["sec-websocket-accept", "sec-websocket-protocol"];

fn is_websocket_upgrade(req: &HttpRequest) -> bool {
    req.headers()
        .get(header::UPGRADE)
        .and_then(|u| u.to_str().ok())
        .is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
}

/// Relays an `exec`, `attach` or `portforward` (`subresource`) of pod `namespace`/`name`.
pub async fn serve(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    namespace: &str,
    name: &str,
    subresource: &str,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    // The request is checked first, so that kubectl's SPDY retry after a refused WebSocket
    // hears the same reason.
    let pod = state.core.get(resources::core("pods"), namespace, name).await?.to_value();
    let container = match subresource {
        "portforward" => None,
        _ => Some(super::logs::container_of(&pod, name, query.get("container"))?),
    };
    let agent_path = match &container {
        None => format!("/portForward/{namespace}/{name}"),
        Some(container) => format!("/{subresource}/{namespace}/{name}/{container}"),
    };
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    if node.is_empty() {
        return Err(HttpError::BadRequest(format!("pod {name} does not have a host assigned")));
    }
    // A node that is gone is the answer whatever the request (kubectl's SPDY retry too).
    let mut url = super::proxy::agent_url(state, node).await?;
    if !is_websocket_upgrade(req) {
        // What the agent would refuse a WebSocket for, as its status tells it: kubectl
        // retries a refused WebSocket with SPDY, and shows only the second answer.
        if let Some(container) = container.filter(|c| !runs(&pod, c)) {
            let attach_to = (subresource == "attach").then_some((namespace, name));
            let not_found = kplane_actors::agent::container_not_found(&container, attach_to);
            return Err(HttpError::BadRequest(not_found));
        }
        let spdy = req.headers().contains_key(header::UPGRADE);
        if spdy && subresource == "portforward" {
            // The agent's refusal of the WebSocket kubectl tried first, if it refused it (its
            // status alone cannot tell): asked again, as kube-apiserver dials the kubelet for
            // the retry too.
            url.set_path(&agent_path);
            let probe = websocket_upgrade(state, url)
                .header("sec-websocket-key", "a3BsYW5lLXByb2JlLWtleQ==")
                .header("sec-websocket-version", "13")
                .header("sec-websocket-protocol", crate::agent::PORT_FORWARD_SPDY_PROTOCOL);
            match tokio::time::timeout(AGENT_TIMEOUT, probe.send()).await {
                Ok(Ok(answered)) if answered.status().as_u16() == 101 => {}
                Ok(Ok(answered)) => {
                    let (status, text) = refusal_text(answered).await;
                    return Err(refusal(status, text, node));
                }
                Ok(Err(e)) => return Err(unreachable(node, e.to_string())),
                Err(_) => return Err(unreachable(node, "no answer to the upgrade".into())),
            }
        }
        let detail = if spdy {
            "only WebSocket upgrades are served (not SPDY)"
        } else {
            "Upgrade request required"
        };
        return Err(HttpError::BadRequest(detail.into()));
    }
    url.set_path(&agent_path);
    url.set_query(Some(req.query_string()).filter(|q| !q.is_empty()));
    // With the client's handshake.
    let mut upgrade = websocket_upgrade(state, url);
    for name in HANDSHAKE {
        for value in req.headers().get_all(*name) {
            upgrade = upgrade.header(*name, value.as_bytes());
        }
    }
    let unreachable = |e: String| unreachable(node, e);
    let translated =
        container.is_some() && crate::agent::debugging::offers(req, STREAM_CLOSE_PROTOCOL);
    let answered = match tokio::time::timeout(AGENT_TIMEOUT, upgrade.send()).await {
        Ok(Ok(answered)) => answered,
        Ok(Err(e)) if translated => {
            return translated_error(req, payload, format!("error dialing backend: {e}"));
        }
        Ok(Err(e)) => return Err(unreachable(e.to_string())),
        Err(_) if translated => {
            return translated_error(req, payload, "error dialing backend: timeout".into());
        }
        Err(_) => return Err(unreachable("no answer to the upgrade".into())),
    };
    if answered.status().as_u16() != 101 {
        let (status, text) = refusal_text(answered).await;
        if translated {
            return translated_error(req, payload, format!("unable to upgrade connection: {text}"));
        }
        return Err(refusal(status, text, node));
    }
    let mut answer = HttpResponse::build(StatusCode::SWITCHING_PROTOCOLS);
    answer.upgrade("websocket");
    for name in HANDSHAKE_ANSWER {
        if let Some(value) = answered.headers().get(*name) {
            answer.insert_header((*name, value.as_bytes()));
        }
    }
    join(answer, answered, payload).await.map_err(|e| unreachable(e.to_string()))
}

/// A WebSocket upgrade request to an agent, by the agents' client (no redirects followed, no
/// proxy); the handshake's headers are the caller's to add.
fn websocket_upgrade(state: &AppState, url: reqwest::Url) -> reqwest::RequestBuilder {
    state.http.get(url).header("connection", "Upgrade").header("upgrade", "websocket")
}

/// The answer when the agent of `node` cannot be reached.
fn unreachable(node: &str, error: String) -> HttpError {
    super::proxy::unavailable(format!("error dialing the agent of node {node}: {error}"))
}

/// The client's upgraded connection joined byte for byte with the backend's, once the backend
/// has switched protocols (`answered`): `answer` is the client's 101.
pub(super) async fn join(
    mut answer: actix_web::HttpResponseBuilder,
    answered: reqwest::Response,
    payload: web::Payload,
) -> Result<HttpResponse, reqwest::Error> {
    let backend = answered.upgrade().await?;
    let (from_backend, mut to_backend) = tokio::io::split(backend);
    // The client's bytes, as they come, to the backend; its end ends the backend's side too.
    actix_web::rt::spawn(async move {
        let mut payload = payload;
        while let Some(Ok(chunk)) = payload.next().await {
            if to_backend.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to_backend.shutdown().await;
    });
    // What the backend sends, as it comes.
    let from_backend = futures::stream::unfold(from_backend, |mut from_backend| async move {
        let mut buffer = vec![0u8; 16 * 1024];
        match from_backend.read(&mut buffer).await {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                buffer.truncate(n);
                Some((Ok::<_, std::io::Error>(Bytes::from(buffer)), from_backend))
            }
        }
    });
    Ok(answer.streaming(from_backend))
}

/// Whether the pod's status has `container` running (an app, init or ephemeral container).
fn runs(pod: &Value, container: &str) -> bool {
    ["containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"]
        .iter()
        .filter_map(|list| pod["status"][list].as_array())
        .flatten()
        .find(|status| status["name"] == container)
        .is_some_and(|status| status["state"]["running"].is_object())
}

/// The subprotocol with which kube-apiserver itself takes an exec or attach's WebSocket (its
/// stream translator) and speaks to the kubelet on the client's behalf.
const STREAM_CLOSE_PROTOCOL: &str = "v5.channel.k8s.io";

/// Accepts the client's WebSocket and ends it with `error` as an internal error (500) on the
/// error channel, in Kubernetes' words and shape: how kube-apiserver's stream translator
/// reports that the kubelet could not be reached or refused the stream.
fn translated_error(
    req: &HttpRequest,
    payload: web::Payload,
    error: String,
) -> Result<HttpResponse, HttpError> {
    let upgraded = crate::agent::debugging::upgrade(req, payload, &[STREAM_CLOSE_PROTOCOL])
        .map_err(|e| HttpError::BadRequest(e.to_string()))?;
    let status = serde_json::json!({"metadata": {}, "status": "Failure",
        "message": format!("Internal error occurred: {error}"), "reason": "InternalError",
        "details": {"causes": [{"message": error}]}, "code": 500});
    actix_web::rt::spawn(crate::agent::debugging::finish(upgraded.session, status));
    Ok(upgraded.response)
}

/// The agent's refusal: its status and its text, read up to [`MOST_ERROR_BYTES`].
async fn refusal_text(mut answered: reqwest::Response) -> (u16, String) {
    let status = answered.status().as_u16();
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = answered.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= MOST_ERROR_BYTES {
            body.truncate(MOST_ERROR_BYTES);
            break;
        }
    }
    (status, String::from_utf8_lossy(&body).trim().to_string())
}

/// The agent's refusal as the client's error: what it says of the request (a container not
/// running) is the client's 400; anything else is 503.
fn refusal(status: u16, text: String, node: &str) -> HttpError {
    match status {
        400 | 404 => HttpError::BadRequest(text),
        _ => {
            super::proxy::unavailable(format!("the agent of node {node} answered {status}: {text}"))
        }
    }
}
