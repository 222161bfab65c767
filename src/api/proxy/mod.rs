//! The `proxy` subresources of nodes, pods and services: `nodes/{name}/proxy/{path}` reaches
//! the node's agent (its kubelet port, at the Node's InternalIP), `pods/{name}[:port]/proxy/{path}`
//! the pod's IP (the port named, else the first port a container declares, else 80), and
//! `services/{name}[:port]/proxy/{path}` one ready endpoint of the service (the service port
//! named by its name or number; round robin over the addresses). The request goes through as
//! kube-apiserver's proxy passes it: its method, query, headers (`headers`) and body, streamed
//! (no size limit); the answer comes back streamed too, but for what `rewrite` points back
//! into the proxy: a redirect's `Location`, an HTML page's links. Only those addresses are
//! reached, checked as kube-apiserver checks them: a pod must be running on a node and have an
//! IP of that node's pod CIDR (or the node's own, for host-network pods); an endpoint must name
//! a pod of the service's namespace that has its IP; a node's address must be one a node can
//! have (not unspecified, multicast, link-local or broadcast). Redirects are handed back to
//! the client, never followed. An upgrade (a WebSocket to a pod's web application) is passed
//! on with its `Upgrade` header; once the backend switches protocols the two connections are
//! joined byte for byte, as kube-apiserver's upgrade-aware proxy joins them.

mod headers;
mod rewrite;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse, HttpResponseBuilder};
use futures::{StreamExt, TryStreamExt};
use kplane_actors::agent::probes::dial_error;
use kplane_actors::core::ApiError;
use kplane_actors::model::cidr::{contains as cidr_contains, parse as parse_cidr};
use kplane_actors::model::resources;
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::AppState;
use crate::error::HttpError;

/// Serves `{resource}/{id}/proxy/{path}` for nodes, pods and services.
pub async fn serve(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    plural: &str,
    namespace: &str,
    id: &str,
) -> Result<HttpResponse, HttpError> {
    // An upgrade, as Go's `IsUpgradeRequest` tells one: `Connection` names it. One with a
    // body (an h2c POST) goes through as a plain request, its body whole.
    let connection_upgrades = req.headers().get_all(header::CONNECTION).any(|value| {
        let value = value.to_str().unwrap_or("");
        value.split(',').any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
    });
    let upgrade = (connection_upgrades && !has_body(req))
        .then(|| req.headers().get(header::UPGRADE).cloned())
        .flatten();
    let target = ProxyId::parse(id, plural)?;
    // A node's or pod's port is a number (a service's may be a port's name).
    let port = || match target.port {
        Some(port) => port
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .map(Some)
            .ok_or_else(|| HttpError::BadRequest(format!("invalid port {port:?} in {id:?}"))),
        None => Ok(None),
    };
    let mut url = match plural {
        // Its agent's port unless another is named (then that port at its address, as
        // Kubernetes proxies to a node's other ports).
        "nodes" => {
            let mut url = agent_url(state, target.name).await?;
            if let Some(port) = port()? {
                url.set_port(Some(port)).map_err(|()| {
                    HttpError::BadRequest(format!("invalid port {port} in {id:?}"))
                })?;
            }
            url
        }
        "services" => service_url(state, namespace, id, &target).await?,
        _ => pod_url(state, namespace, target.name, port()?).await?,
    };
    // The path as sent, not as parsed: its trailing slash and its escapes mean something. It
    // follows `/api/v1/namespaces/{ns}/{plural}/{id}/proxy` (or `/api/v1/nodes/{id}/proxy`),
    // or the older `/api/v1/proxy/namespaces/{ns}/{plural}/{id}`: as many segments either way.
    let path = after_segments(req.uri().path(), if namespace.is_empty() { 5 } else { 7 });
    // A read of the root without its slash is sent to it (kube-apiserver's redirect, so that
    // a proxied page's relative links resolve under `proxy/`).
    if path.is_empty() && matches!(req.method().as_str(), "GET" | "HEAD") {
        let query = req.uri().query().map(|q| format!("?{q}")).unwrap_or_default();
        let location = format!("{}/{query}", req.uri().path());
        return Ok(HttpResponse::MovedPermanently()
            .insert_header((header::LOCATION, location))
            .finish());
    }
    url.set_path(&format!("/{}", path.trim_start_matches('/')));
    url.set_query(req.uri().query());
    let method = reqwest::Method::from_bytes(req.method().as_str().as_bytes())
        .map_err(|_| HttpError::MethodNotAllowed)?;
    let client = req.peer_addr().map(|address| address.ip());
    let mut outgoing = headers::request(req.headers(), req.uri().path(), client);
    if !outgoing.contains_key("host") {
        // HTTP/2 names the host in the request's target.
        if let Some(host) = req.uri().authority().and_then(|a| a.as_str().parse().ok()) {
            outgoing.insert("host", host);
        }
    }
    if let Some(protocol) =
        upgrade.as_ref().and_then(|u| reqwest::header::HeaderValue::from_bytes(u.as_bytes()).ok())
    {
        outgoing.insert("connection", reqwest::header::HeaderValue::from_static("Upgrade"));
        outgoing.insert("upgrade", protocol);
    }
    let request_host = outgoing.get("host").and_then(|h| h.to_str().ok()).unwrap_or("").to_owned();
    let backend_host = url.authority().to_owned();
    let mut request = state.http.request(method, url).headers(outgoing);
    // (An upgrade's body is the upgraded connection, joined once the backend switches.)
    let mut payload = Some(payload);
    if has_body(req) {
        request = request.body(streamed(payload.take().expect("not taken yet")));
    }
    let name = target.name;
    let response = request.send().await.map_err(|e| {
        // Kubernetes' words, whatever was proxied to (Go's for a refused dial).
        let io = std::iter::successors(std::error::Error::source(&e), |e| e.source())
            .find_map(|e| e.downcast_ref::<std::io::Error>());
        let why = match (io, e.url()) {
            (Some(io), Some(url)) if e.is_connect() => dial_error(
                url.host_str().unwrap_or(""),
                url.port_or_known_default().unwrap_or(80),
                io,
            ),
            _ => e.to_string(),
        };
        unavailable(format!("error trying to reach service: {why}"))
    })?;
    // What points back at the backend is pointed into the proxy: the request's path up to
    // the proxied one is the prefix.
    let prefix = &req.uri().path()[..req.uri().path().len() - path.len()];
    let rewriter = rewrite::UrlRewriter {
        prefix: prefix.trim_end_matches('/'),
        backend_host: &backend_host,
        request_host: &request_host,
    };
    if let (Some(protocol), Some(payload)) = (&upgrade, payload) {
        if response.status().as_u16() == 101 {
            let mut answer = HttpResponse::build(actix_web::http::StatusCode::SWITCHING_PROTOCOLS);
            answer.upgrade(protocol.to_str().unwrap_or("websocket"));
            for (name, value) in headers::response(response.headers()) {
                if let Ok(value) = header::HeaderValue::from_bytes(value) {
                    answer.append_header((name, value));
                }
            }
            return super::streams::join(answer, response, payload)
                .await
                .map_err(|e| unavailable(format!("error upgrading the connection: {e}")));
        }
    }
    let head = req.method() == actix_web::http::Method::HEAD;
    let mut answer = relay(req, response, &rewriter, head)
        .await
        .map_err(|why| unavailable(format!("{plural} {name} {why}")))?;
    if connection_upgrades {
        // The server does not keep a connection that asked for an upgrade: the client is told
        // so, rather than finding it closed under its next request.
        answer.head_mut().set_connection_type(actix_web::http::ConnectionType::Close);
    }
    Ok(answer)
}

/// The backend's answer as the client gets it: its status and headers (as `headers` passes
/// them), its `Location` or HTML page pointed into the proxy, its body streamed otherwise
/// with the length the backend gave. `Err` says what was wrong with the answer.
async fn relay(
    req: &HttpRequest,
    response: reqwest::Response,
    rewriter: &rewrite::UrlRewriter<'_>,
    head: bool,
) -> Result<HttpResponse, String> {
    let status = actix_web::http::StatusCode::from_u16(response.status().as_u16())
        .map_err(|_| "answered an invalid status".to_string())?;
    let mut answer = HttpResponseBuilder::new(status);
    for (name, value) in headers::response(response.headers()) {
        if let Ok(value) = header::HeaderValue::from_bytes(value) {
            answer.append_header((name, value));
        }
    }
    let backend = response.headers();
    if let Some(location) = backend.get("location").and_then(|l| l.to_str().ok()) {
        let location = rewriter.url(location);
        if let Ok(location) = header::HeaderValue::from_str(&location) {
            answer.insert_header((header::LOCATION, location));
        }
    } else if is_html(backend) && !head {
        let encoding = backend.get("content-encoding").map(|e| e.to_str().unwrap_or("?"));
        let encoding = encoding.unwrap_or("").to_owned();
        let length = content_length(backend);
        let mut body = response.bytes_stream();
        let mut page = Vec::new();
        while let Some(chunk) = body.next().await {
            page.extend_from_slice(&chunk.map_err(|e| format!("answered in part: {e}"))?);
            if page.len() > rewrite::LARGEST_PAGE {
                // Held whole, a page without end would take the server's memory: a larger
                // one goes on as it comes, its links as they are.
                if let Some(length) = length {
                    answer.no_chunking(length);
                }
                let read = futures::stream::once(async { Ok(bytes::Bytes::from(page)) });
                let body = read.chain(body).map_err(actix_web::error::ErrorBadGateway);
                return Ok(answer.streaming(crate::peer::until_gone(req, body)));
            }
        }
        return Ok(match rewriter.encoded_html(&page, &encoding) {
            Some(rewritten) => answer.body(rewritten),
            None => answer.body(page),
        });
    }
    // The backend's length, as it said it (a HEAD's too, whose body is not sent).
    if let Some(length) = content_length(backend) {
        answer.no_chunking(length);
    }
    let body = response.bytes_stream().map_err(actix_web::error::ErrorBadGateway);
    Ok(answer.streaming(crate::peer::until_gone(req, body)))
}

/// The length the backend gave its answer.
fn content_length(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    headers.get("content-length").and_then(|l| l.to_str().ok()?.parse().ok())
}

/// Whether a request has a body to pass on (a length, or chunks).
fn has_body(req: &HttpRequest) -> bool {
    let headers = req.headers();
    headers.contains_key(header::CONTENT_LENGTH) || headers.contains_key(header::TRANSFER_ENCODING)
}

/// The request's body as reqwest sends it, chunk by chunk as it arrives, however long:
/// actix-web's payload stays on this worker (it is not `Send`), and hands its chunks over.
fn streamed(mut payload: web::Payload) -> reqwest::Body {
    use futures::{SinkExt, StreamExt};
    let (mut chunks, received) = futures::channel::mpsc::channel::<Result<_, std::io::Error>>(2);
    actix_web::rt::spawn(async move {
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|e| std::io::Error::other(e.to_string()));
            let failed = chunk.is_err();
            // The backend's request ended (it answered, or failed): the rest is not wanted.
            if chunks.send(chunk).await.is_err() || failed {
                break;
            }
        }
    });
    reqwest::Body::wrap_stream(received)
}

/// Whether an answer is an HTML page (its media type exactly `text/html`, as Kubernetes'
/// proxy checks it).
fn is_html(headers: &reqwest::header::HeaderMap) -> bool {
    let content_type = headers.get("content-type").and_then(|t| t.to_str().ok()).unwrap_or("");
    content_type.split(';').next().unwrap_or("").trim() == "text/html"
}

/// `path` after its first `n` segments, as it is (a trailing slash kept).
fn after_segments(path: &str, n: usize) -> &str {
    let mut rest = path;
    for _ in 0..n {
        rest = rest.trim_start_matches('/');
        rest = &rest[rest.find('/').unwrap_or(rest.len())..];
    }
    rest
}

/// What a proxy request names: `[scheme:]name[:port]`, as Kubernetes splits it. kplane's
/// proxy speaks plain HTTP to its backends, so the scheme may be `http` or left out.
#[derive(Debug, PartialEq, Eq)]
struct ProxyId<'a> {
    name: &'a str,
    port: Option<&'a str>,
}

impl<'a> ProxyId<'a> {
    /// `id` as `plural`'s proxy names it; an id that splits no way is worded as Kubernetes'
    /// (`invalid pod request "a:b:c:d"`).
    fn parse(id: &'a str, plural: &str) -> Result<Self, HttpError> {
        let kind = plural.strip_suffix('s').unwrap_or(plural);
        let invalid = || HttpError::BadRequest(format!("invalid {kind} request {id:?}"));
        let parts: Vec<&str> = id.split(':').collect();
        let (scheme, name, port) = match parts.as_slice() {
            [name] => ("", *name, None),
            [name, port] => ("", *name, Some(*port)),
            [scheme, name, port] => (*scheme, *name, Some(*port)),
            _ => return Err(invalid()),
        };
        match scheme {
            "" | "http" if !name.is_empty() => {
                Ok(ProxyId { name, port: port.filter(|p| !p.is_empty()) })
            }
            "https" => Err(HttpError::BadRequest(format!(
                "{id:?}: kplane proxies plain HTTP only, not https"
            ))),
            _ => Err(invalid()),
        }
    }
}

/// The base URL of node `node`'s agent: the InternalIP and the kubelet port it publishes (503
/// when it publishes either not, or an address no node can have).
pub async fn agent_url(state: &AppState, node: &str) -> Result<reqwest::Url, HttpError> {
    let nodes = resources::core("nodes");
    agent_url_of(&state.core.get(nodes, "", node).await?.to_value())
}

/// The base URL of the agent of the Node object `node_object` (as [`agent_url`]).
pub fn agent_url_of(node_object: &Value) -> Result<reqwest::Url, HttpError> {
    let node = node_object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let address = internal_ip(node_object)
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

/// `http://{podIP}:{port}/` of a running pod; without a port, the first one a container
/// declares, else 80 (as Kubernetes picks it).
async fn pod_url(
    state: &AppState,
    namespace: &str,
    name: &str,
    port: Option<u16>,
) -> Result<reqwest::Url, HttpError> {
    let pods = resources::core("pods");
    let pod = state.core.get(pods, namespace, name).await?.to_value();
    let refuse = |why: &str| Err(HttpError::BadRequest(format!("pod {name} {why}")));
    let port = port.or_else(|| first_container_port(&pod)).unwrap_or(80);
    if pod.pointer("/status/phase").and_then(Value::as_str) != Some("Running") {
        return refuse("is not running");
    }
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    let Some(ip) = pod.pointer("/status/podIP").and_then(Value::as_str).and_then(reachable) else {
        return refuse("has no address to reach");
    };
    let nodes = resources::core("nodes");
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

fn first_container_port(pod: &Value) -> Option<u16> {
    let containers = pod.pointer("/spec/containers")?.as_array()?;
    let declared = containers.iter().find_map(|c| c["ports"].as_array().and_then(|p| p.first()))?;
    declared["containerPort"].as_u64().and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0)
}

/// Spreads a service's proxied requests over its addresses.
static NEXT_ENDPOINT: AtomicUsize = AtomicUsize::new(0);

/// `http://{address}:{port}/` of one ready endpoint of service `target.name`, for the service
/// port `target.port` names (its name, or its number), as kube-apiserver picks it: the
/// service's Endpoints, a subset with that port, an address whose pod is in the service's
/// namespace and has that IP (and passes the pod proxy's checks); 503 when there is none
/// (naming the service, or, when it has endpoints but none for that port, the `id` asked for).
async fn service_url(
    state: &AppState,
    namespace: &str,
    id: &str,
    target: &ProxyId<'_>,
) -> Result<reqwest::Url, HttpError> {
    let service = target.name;
    let mut port_name = target.port.unwrap_or("").to_owned();
    if let Ok(number) = port_name.parse::<u64>() {
        let services = resources::core("services");
        let object = state.core.get(services, namespace, service).await?.to_value();
        let ports = object.pointer("/spec/ports").and_then(Value::as_array);
        let declared = ports.into_iter().flatten().find(|p| p["port"].as_u64() == Some(number));
        let Some(declared) = declared else {
            let message = format!("no service port {number} found for service {service:?}");
            return Err(unavailable(message));
        };
        port_name = declared["name"].as_str().unwrap_or("").to_owned();
    }
    let endpoints = resources::core("endpoints");
    let object = state.core.get(endpoints, namespace, service).await?.to_value();
    let subsets = object["subsets"].as_array().map(Vec::as_slice).unwrap_or_default();
    let start = NEXT_ENDPOINT.fetch_add(1, Ordering::Relaxed);
    for i in 0..subsets.len() {
        let subset = &subsets[(start + i) % subsets.len()];
        let addresses = subset["addresses"].as_array().map(Vec::as_slice).unwrap_or_default();
        let ports = subset["ports"].as_array().map(Vec::as_slice).unwrap_or_default();
        let port = ports.iter().find(|p| p["name"].as_str().unwrap_or("") == port_name);
        let Some(port) = port.and_then(|p| p["port"].as_u64()).and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        for j in 0..addresses.len() {
            let address = &addresses[(start + j) % addresses.len()];
            if let Some(url) = endpoint_url(state, namespace, address, port).await {
                return Ok(url);
            }
        }
    }
    let named = if subsets.is_empty() { target.name } else { id };
    Err(unavailable(format!("no endpoints available for service {named:?}")))
}

/// The URL of one endpoint address, when it names a pod of `namespace` that has its IP and
/// may be proxied to.
async fn endpoint_url(
    state: &AppState,
    namespace: &str,
    address: &Value,
    port: u16,
) -> Option<reqwest::Url> {
    let target = &address["targetRef"];
    let names_a_pod = target["kind"] == "Pod" && target["namespace"] == namespace;
    let pod = target["name"].as_str().filter(|_| names_a_pod)?;
    let url = pod_url(state, namespace, pod, Some(port)).await.ok()?;
    let ip: IpAddr = address["ip"].as_str()?.parse().ok()?;
    (url.host_str()?.trim_matches(['[', ']']).parse::<IpAddr>().ok()? == ip).then_some(url)
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
    fn proxy_ids_split_as_kubernetes_splits_them() {
        let id = |name, port| ProxyId { name, port };
        let parse = |id| ProxyId::parse(id, "pods");
        assert_eq!(parse("web").unwrap(), id("web", None));
        assert_eq!(parse("web:8080").unwrap(), id("web", Some("8080")));
        assert_eq!(parse("web:http").unwrap(), id("web", Some("http")));
        assert_eq!(parse("http:web:80").unwrap(), id("web", Some("80")));
        assert_eq!(parse("web:").unwrap(), id("web", None));
        for refused in ["https:web:443", "ftp:web:21", ":80", "a:b:c:d", "http::80"] {
            assert!(parse(refused).is_err(), "{refused}");
        }
        let refused = ProxyId::parse("a:b:c:d", "services").unwrap_err().to_string();
        assert!(refused.contains("invalid service request \"a:b:c:d\""), "{refused}");
    }

    #[test]
    fn the_proxied_path_is_the_rest_as_sent() {
        let rest = |path| after_segments(path, 7);
        assert_eq!(rest("/api/v1/namespaces/ns/pods/web/proxy/a%2Fb/"), "/a%2Fb/");
        assert_eq!(rest("/api/v1/proxy/namespaces/ns/services/web:80/x"), "/x");
        assert_eq!(rest("/api/v1/namespaces/ns/pods/web/proxy"), "");
        assert_eq!(after_segments("/api/v1/nodes/n1/proxy/", 5), "/");
    }

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
