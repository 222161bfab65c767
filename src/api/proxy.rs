//! The `proxy` subresources of nodes and pods: `nodes/{name}/proxy/{path}` reaches the node's
//! agent (its kubelet port, at the Node's InternalIP), `pods/{name}[:port]/proxy/{path}` the
//! pod's IP (port 80 unless named). The request's method, query, body and content headers go
//! through; the answer comes back as it is. The proxy is not a way around anything: only those
//! addresses, taken from the objects' status, are reached; redirects are handed back to the
//! client, never followed; upgrades (exec, attach, port-forward streams) are refused.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse, HttpResponseBuilder};
use futures::TryStreamExt;
use kplane_actors::core::ApiError;
use kplane_actors::model::resources;
use serde_json::Value;

use super::AppState;
use crate::error::HttpError;

/// The request headers passed on to the backend, and the response headers passed back
/// (actix-web and reqwest have each their own `http` types: headers go by name and bytes).
const REQUEST_HEADERS: &[&str] = &["accept", "content-type", "user-agent"];
const RESPONSE_HEADERS: &[&str] = &["content-type", "location", "cache-control"];

/// Serves `{resource}/{name}/proxy/{path}` for nodes and pods.
pub async fn serve(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    plural: &str,
    namespace: &str,
    name: &str,
    path: &str,
) -> Result<HttpResponse, HttpError> {
    if req.headers().contains_key(header::UPGRADE) {
        return Err(HttpError::BadRequest(
            "upgrade requests are not proxied: use the pod's exec, attach or portforward".into(),
        ));
    }
    let (name, port) = match name.rsplit_once(':') {
        Some((name, port)) => {
            let port = port.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                HttpError::BadRequest(format!("invalid port {port:?} in {name:?}"))
            })?;
            (name, Some(port))
        }
        None => (name, None),
    };
    let mut url = match plural {
        "nodes" => {
            if port.is_some() {
                return Err(HttpError::BadRequest(
                    "a node is proxied to its agent's port only".into(),
                ));
            }
            agent_url(state, name).await?
        }
        _ => pod_url(state, namespace, name, port.unwrap_or(80)).await?,
    };
    url.set_path(&format!("/{}", path.trim_start_matches('/')));
    url.set_query(req.uri().query());
    let body = super::body::read(payload, state.max_body_bytes).await?;
    let method = reqwest::Method::from_bytes(req.method().as_str().as_bytes())
        .map_err(|_| HttpError::MethodNotAllowed)?;
    let mut request = state.http.request(method, url).body(body);
    for name in REQUEST_HEADERS {
        if let Some(value) = req.headers().get(*name) {
            request = request.header(*name, value.as_bytes());
        }
    }
    let response = request
        .send()
        .await
        .map_err(|e| unavailable(format!("error trying to reach {plural} {name}: {e}")))?;
    let status = actix_web::http::StatusCode::from_u16(response.status().as_u16())
        .map_err(|_| unavailable(format!("{plural} {name} answered an invalid status")))?;
    let mut answer = HttpResponseBuilder::new(status);
    for name in RESPONSE_HEADERS {
        let value = response.headers().get(*name).map(|v| v.as_bytes());
        if let Some(value) = value.and_then(|v| header::HeaderValue::from_bytes(v).ok()) {
            answer.insert_header((*name, value));
        }
    }
    let body = response.bytes_stream().map_err(actix_web::error::ErrorBadGateway);
    Ok(answer.streaming(body))
}

/// The base URL of node `node`'s agent: its InternalIP (loopback when it publishes none) and
/// the kubelet port it publishes.
pub async fn agent_url(state: &AppState, node: &str) -> Result<reqwest::Url, HttpError> {
    let nodes = resources::find("", "v1", "nodes").expect("nodes are served");
    let node_object = state.core.get(nodes, "", node).await?.to_value();
    let address = node_object
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
        .and_then(|a| a["address"].as_str())
        .unwrap_or("127.0.0.1")
        .to_string();
    let port = node_object
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or_else(|| unavailable(format!("node {node} publishes no agent port")))?;
    http_url(&address, port, &format!("node {node}"))
}

/// `http://{podIP}:{port}/` of a running pod.
async fn pod_url(
    state: &AppState,
    namespace: &str,
    name: &str,
    port: u16,
) -> Result<reqwest::Url, HttpError> {
    let pods = resources::find("", "v1", "pods").expect("pods are served");
    let pod = state.core.get(pods, namespace, name).await?.to_value();
    let ip = pod.pointer("/status/podIP").and_then(Value::as_str).unwrap_or("");
    if ip.is_empty() {
        return Err(HttpError::BadRequest(format!("pod {name} has no IP yet")));
    }
    http_url(ip, port, &format!("pod {name}"))
}

/// An address from an object's status, as a URL: an IP address and nothing else.
fn http_url(address: &str, port: u16, of: &str) -> Result<reqwest::Url, HttpError> {
    let ip: std::net::IpAddr =
        address.parse().map_err(|_| unavailable(format!("{of} has no valid address")))?;
    reqwest::Url::parse(&format!("http://{}/", std::net::SocketAddr::new(ip, port)))
        .map_err(|e| unavailable(format!("{of} address: {e}")))
}

fn unavailable(message: String) -> HttpError {
    HttpError::Api(ApiError::Unavailable(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ip_addresses_are_reached() {
        assert_eq!(
            http_url("127.64.0.2", 8080, "pod p").unwrap().as_str(),
            "http://127.64.0.2:8080/"
        );
        assert!(http_url("example.com", 80, "pod p").is_err());
        assert!(http_url("127.0.0.1/../x", 80, "pod p").is_err());
        assert_eq!(http_url("::1", 80, "node n").unwrap().as_str(), "http://[::1]/");
    }
}
