//! The `proxy` subresources of nodes and pods: `nodes/{name}/proxy/{path}` reaches the node's
//! agent (its kubelet port, at the Node's InternalIP), `pods/{name}[:port]/proxy/{path}` the
//! pod's IP (port 80 unless named). The request's method, query, body and content headers go
//! through; the answer comes back as it is. Only those addresses are reached, checked as
//! kube-apiserver checks them: a pod must be running on a node and have an IP of that node's
//! pod CIDR (or the node's own, for host-network pods); a node's address must be one a node can
//! have (not unspecified, multicast, link-local or broadcast). Redirects are handed back to
//! the client, never followed; upgrades (exec, attach, port-forward streams) are refused.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse, HttpResponseBuilder};
use futures::TryStreamExt;
use kplane_actors::agent::pod_ips::{cidr_contains, parse_cidr};
use kplane_actors::core::ApiError;
use kplane_actors::model::resources;
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};

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
    // The path as sent, not as parsed: its trailing slash and its escapes mean something.
    let raw_path = req.uri().path();
    let marker = format!("/{name}/proxy");
    let path = match raw_path.find(&marker) {
        Some(at) => &raw_path[at + marker.len()..],
        None => path,
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

/// The base URL of node `node`'s agent: the InternalIP and the kubelet port it publishes (503
/// when it publishes either not, or an address no node can have).
pub async fn agent_url(state: &AppState, node: &str) -> Result<reqwest::Url, HttpError> {
    let nodes = resources::find("", "v1", "nodes").expect("nodes are served");
    let node_object = state.core.get(nodes, "", node).await?.to_value();
    let address = internal_ip(&node_object)
        .ok_or_else(|| unavailable(format!("node {node} publishes no InternalIP")))?;
    let port = node_object
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or_else(|| unavailable(format!("node {node} publishes no agent port")))?;
    let ip = reachable(&address)
        .ok_or_else(|| unavailable(format!("node {node} has no address to reach")))?;
    http_url(ip, port)
}

fn internal_ip(node: &Value) -> Option<String> {
    node.pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
        .and_then(|a| a["address"].as_str())
        .map(String::from)
}

/// `address` as an IP a node or pod can have: not unspecified, multicast, link-local (cloud
/// metadata lives there) or broadcast.
fn reachable(address: &str) -> Option<IpAddr> {
    let ip: IpAddr = address.parse().ok()?;
    let refused = ip.is_unspecified()
        || ip.is_multicast()
        || match ip {
            IpAddr::V4(v4) => v4.is_link_local() || v4.is_broadcast(),
            IpAddr::V6(v6) => v6.is_unicast_link_local(),
        };
    (!refused).then_some(ip)
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
    let refuse = |why: &str| Err(HttpError::BadRequest(format!("pod {name} {why}")));
    if pod.pointer("/status/phase").and_then(Value::as_str) != Some("Running") {
        return refuse("is not running");
    }
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    let Some(ip) = pod.pointer("/status/podIP").and_then(Value::as_str).and_then(reachable) else {
        return refuse("has no address to reach");
    };
    let nodes = resources::find("", "v1", "nodes").expect("nodes are served");
    let node_object = match state.core.get(nodes, "", node).await {
        Ok(node) => node.to_value(),
        Err(_) => return refuse("is on no known node"),
    };
    let pod_cidr =
        node_object.pointer("/spec/podCIDR").and_then(Value::as_str).and_then(parse_cidr);
    let in_cidr = match (ip, pod_cidr) {
        (IpAddr::V4(v4), Some(cidr)) => cidr_contains(cidr, v4),
        _ => false,
    };
    let host_network = pod.pointer("/spec/hostNetwork").and_then(Value::as_bool) == Some(true);
    let on_host = host_network && internal_ip(&node_object) == Some(ip.to_string());
    if !in_cidr && !on_host {
        return refuse("has an IP outside its node's pod CIDR");
    }
    http_url(ip, port)
}

fn http_url(ip: IpAddr, port: u16) -> Result<reqwest::Url, HttpError> {
    reqwest::Url::parse(&format!("http://{}/", SocketAddr::new(ip, port)))
        .map_err(|e| unavailable(format!("address {ip}: {e}")))
}

pub(super) fn unavailable(message: String) -> HttpError {
    HttpError::Api(ApiError::Unavailable(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_addresses_a_node_or_pod_can_have_are_reached() {
        assert_eq!(reachable("127.64.0.2"), Some("127.64.0.2".parse().unwrap()));
        for refused in [
            "example.com",
            "127.0.0.1/../x",
            "0.0.0.0",
            "169.254.169.254",
            "224.0.0.1",
            "fe80::1",
            "255.255.255.255",
        ] {
            assert_eq!(reachable(refused), None, "{refused}");
        }
        assert_eq!(http_url("::1".parse().unwrap(), 80).unwrap().as_str(), "http://[::1]/");
    }
}
