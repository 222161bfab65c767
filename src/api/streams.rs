//! `pods/{name}/exec` and `pods/{name}/attach`: the client's WebSocket upgrade is relayed to the
//! agent of the pod's node (its `/exec` and `/attach` endpoints, at the Node's InternalIP and
//! kubelet port), and once the agent has switched protocols the two connections are joined
//! byte for byte, as kube-apiserver's upgrade-aware proxy joins the client and the kubelet.
//! The agent chooses the channel protocol (`v5.channel.k8s.io`, which kubectl 1.32 offers, or
//! `v4.channel.k8s.io`) and its answer goes back as it is. Only WebSocket upgrades are served:
//! a request without one is 400 ("Upgrade request required"), and so is SPDY, which kubectl
//! falls back to only when a WebSocket upgrade is refused.

use std::net::SocketAddr;
use std::time::Duration;

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use futures::StreamExt;
use kplane_actors::model::resources;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::params::Query;
use super::AppState;
use crate::error::HttpError;

/// How long the agent may take to connect, and then to answer the upgrade.
const AGENT_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer head (or error body) read from the agent.
const MOST_ANSWER_BYTES: usize = 64 * 1024;
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

/// Relays an `exec` or `attach` (`subresource`) of pod `namespace`/`name`.
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
    let container = super::logs::container_of(&pod, name, query.get("container"))?;
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    if node.is_empty() {
        return Err(HttpError::BadRequest(format!("pod {name} does not have a host assigned")));
    }
    if !is_websocket_upgrade(req) {
        let detail = if req.headers().contains_key(header::UPGRADE) {
            "only WebSocket upgrades are served (not SPDY)"
        } else {
            "Upgrade request required"
        };
        return Err(HttpError::BadRequest(detail.into()));
    }
    let agent = super::proxy::agent_addr(state, node).await?;
    let unreachable = |e: String| {
        super::proxy::unavailable(format!("error dialing the agent of node {node}: {e}"))
    };
    let mut stream = tokio::time::timeout(AGENT_TIMEOUT, TcpStream::connect(agent))
        .await
        .map_err(|_| unreachable("timed out".into()))?
        .map_err(|e| unreachable(e.to_string()))?;
    let _ = stream.set_nodelay(true);
    let path = format!("/{subresource}/{namespace}/{name}/{container}");
    stream
        .write_all(&upgrade_request(req, &path, agent))
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let (status, switched, received) =
        tokio::time::timeout(AGENT_TIMEOUT, read_answer_head(&mut stream))
            .await
            .map_err(|_| unreachable("no answer to the upgrade".into()))??;
    if status != 101 {
        return Err(refusal(status, &received, node));
    }
    let mut answer = HttpResponse::build(StatusCode::SWITCHING_PROTOCOLS);
    answer.upgrade("websocket");
    for (name, value) in switched {
        answer.insert_header((name, value));
    }
    let (from_agent, mut to_agent) = stream.into_split();
    // The client's frames, as they come, to the agent; its end ends the agent's side too.
    actix_web::rt::spawn(async move {
        let mut payload = payload;
        while let Some(Ok(chunk)) = payload.next().await {
            if to_agent.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to_agent.shutdown().await;
    });
    // What the agent sent after its answer's head, then the rest of what it sends.
    let first = futures::stream::iter((!received.is_empty()).then(|| Ok(Bytes::from(received))));
    let rest = futures::stream::unfold(from_agent, |mut from_agent| async move {
        let mut buffer = vec![0u8; 16 * 1024];
        match from_agent.read(&mut buffer).await {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                buffer.truncate(n);
                Some((Ok::<_, std::io::Error>(Bytes::from(buffer)), from_agent))
            }
        }
    });
    Ok(answer.streaming(first.chain(rest)))
}

/// The upgrade request to the agent: the handshake headers the client sent, and no others.
fn upgrade_request(req: &HttpRequest, path: &str, agent: SocketAddr) -> Vec<u8> {
    let mut head = format!("GET {path}");
    if !req.query_string().is_empty() {
        head.push('?');
        head.push_str(req.query_string());
    }
    head.push_str(&format!(
        " HTTP/1.1\r\nHost: {agent}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
    ));
    for name in HANDSHAKE {
        for value in req.headers().get_all(*name).filter_map(|v| v.to_str().ok()) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str("\r\n");
    head.into_bytes()
}

type Answer = (u16, Vec<(&'static str, String)>, Vec<u8>);

/// Reads the agent's answer head: its status, the handshake headers to pass back, and the
/// bytes after the head (the start of the stream after a 101, else of the error's text).
async fn read_answer_head(stream: &mut TcpStream) -> Result<Answer, HttpError> {
    let broken = |detail: &str| super::proxy::unavailable(format!("the agent's answer: {detail}"));
    let mut received = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await.map_err(|e| broken(&e.to_string()))?;
        if n == 0 {
            return Err(broken("the connection closed"));
        }
        received.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut answer = httparse::Response::new(&mut headers);
        match answer.parse(&received).map_err(|e| broken(&e.to_string()))? {
            httparse::Status::Partial if received.len() < MOST_ANSWER_BYTES => continue,
            httparse::Status::Partial => return Err(broken("its head is too long")),
            httparse::Status::Complete(head_len) => {
                let status = answer.code.unwrap_or(0);
                let mut passed = Vec::new();
                let mut body_len = 0;
                for h in answer.headers.iter() {
                    let value = String::from_utf8_lossy(h.value).to_string();
                    if h.name.eq_ignore_ascii_case("content-length") {
                        body_len =
                            value.trim().parse::<usize>().unwrap_or(0).min(MOST_ANSWER_BYTES);
                    }
                    if let Some(name) =
                        HANDSHAKE_ANSWER.iter().find(|n| h.name.eq_ignore_ascii_case(n))
                    {
                        passed.push((*name, value));
                    }
                }
                let mut rest = received.split_off(head_len);
                // An error's text: what its length says (the agent sends small ones whole).
                while status != 101 && rest.len() < body_len {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => rest.extend_from_slice(&chunk[..n]),
                    }
                }
                return Ok((status, passed, rest));
            }
        }
    }
}

/// The agent's refusal as the client's error: what it says of the request (a container not
/// running, a tty asked for) is the client's 400; anything else is 503.
fn refusal(status: u16, body: &[u8], node: &str) -> HttpError {
    let text = String::from_utf8_lossy(body).trim().to_string();
    match status {
        400 | 404 => HttpError::BadRequest(text),
        _ => {
            super::proxy::unavailable(format!("the agent of node {node} answered {status}: {text}"))
        }
    }
}
