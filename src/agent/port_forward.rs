//! `/portForward/{ns}/{pod}`: TCP connections to a pod's ports over a websocket, in the two
//! protocols clients speak.
//! - `SPDY/3.1+portforward.k8s.io` (kubectl 1.30 and later): the websocket's binary messages
//!   carry a SPDY/3.1 byte stream. Each local connection kubectl accepts opens two streams, an
//!   error stream and a data stream, both naming the `port` and the same `requestid`; the
//!   agent answers each with a SYN_REPLY, dials the pod's port and copies bytes both ways on
//!   the data stream. A failed dial is reported as text on the error stream.
//! - `v4.channel.k8s.io` (the Python client): the ports are named in the query; port i's data
//!   travels on channel 2i and its errors on channel 2i+1, each channel first carrying its
//!   port (two bytes, little endian).
//!
//! A SPDY upgrade of the raw connection (kubectl's fallback when the websocket is refused)
//! is not served: actix-http passes on the bytes after an upgrade only for websockets.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use futures::StreamExt;
use kplane_actors::agent::PodLookup;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::debugging::{framed, pairs, upgrade};
use super::http::{AgentHttp, AgentHttpError};
use super::spdy::{self, Frame, FrameReader, FrameWriter};

const SPDY_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// Subprotocols spoken, best first.
const PROTOCOLS: &[&str] = &[SPDY_PROTOCOL, "v4.channel.k8s.io", "channel.k8s.io"];
/// The most bytes read from a pod's connection into one frame or message.
const CHUNK: usize = 32 * 1024;
/// Frames waiting for the websocket, and chunks waiting for a pod's connection.
const QUEUE: usize = 64;

pub async fn serve(
    state: web::Data<AgentHttp>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, AgentHttpError> {
    let (namespace, pod) = path.into_inner();
    let lookup = PodLookup { namespace: namespace.clone(), name: pod.clone() };
    let found = state.agent().send(lookup).await.map_err(|_| AgentHttpError::Unavailable)?;
    let ip = found
        .as_ref()
        .and_then(|p| p.pointer("/status/podIP").and_then(Value::as_str).map(String::from))
        .ok_or_else(|| {
            AgentHttpError::NotFound(format!("pod {namespace}/{pod} has no IP on this node"))
        })?;
    let ports = query_ports(&req)?;
    let (response, session, messages) = upgrade(&req, payload, PROTOCOLS)?;
    let spoken = response
        .headers()
        .get(actix_web::http::header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|p| p.to_str().ok());
    if spoken == Some(SPDY_PROTOCOL) {
        actix_web::rt::spawn(spdy_session(ip, session, messages));
    } else if ports.is_empty() {
        return Err(AgentHttpError::BadRequest(
            "the ports to forward are required (ports=8080)".into(),
        ));
    } else {
        actix_web::rt::spawn(channel_session(ip, ports, session, messages));
    }
    Ok(response)
}

/// The query's `ports` (and `port`), each a comma-separated list; at most 64.
fn query_ports(req: &HttpRequest) -> Result<Vec<u16>, AgentHttpError> {
    let ports: Vec<u16> = pairs(req)?
        .iter()
        .filter(|(k, _)| k == "ports" || k == "port")
        .flat_map(|(_, v)| v.split(',').map(|p| p.trim().to_string()).collect::<Vec<_>>())
        .map(|p| parse_port(&p).ok_or(p))
        .collect::<Result<_, _>>()
        .map_err(|p| AgentHttpError::BadRequest(format!("invalid port {p:?}")))?;
    if ports.len() > 64 {
        return Err(AgentHttpError::BadRequest("give at most 64 ports".into()));
    }
    Ok(ports)
}

fn parse_port(text: &str) -> Option<u16> {
    text.parse::<u16>().ok().filter(|p| *p > 0)
}

/// The websocket's frames go out in the order they are queued, from one task.
fn sender(mut session: actix_ws::Session) -> mpsc::Sender<Bytes> {
    let (frames, mut queued) = mpsc::channel::<Bytes>(QUEUE);
    actix_web::rt::spawn(async move {
        while let Some(frame) = queued.recv().await {
            if session.binary(frame).await.is_err() {
                return;
            }
        }
        let _ = session.close(Some(actix_ws::CloseCode::Normal.into())).await;
    });
    frames
}

/// One forwarded connection of a SPDY session: the task that copies its bytes, and where
/// the client's bytes for the pod are queued (none once the client has half-closed).
struct Forward {
    task: JoinHandle<()>,
    to_pod: Option<mpsc::Sender<Bytes>>,
}

async fn spdy_session(
    ip: String,
    session: actix_ws::Session,
    mut messages: actix_ws::MessageStream,
) {
    let mut pongs = session.clone();
    let out = sender(session);
    let mut reader = FrameReader::default();
    let mut writer = FrameWriter::default();
    // By data stream; and each request's error stream, for a failed dial to be told on.
    let mut forwards: HashMap<u32, Forward> = HashMap::new();
    let mut error_streams: HashMap<String, u32> = HashMap::new();
    'session: while let Some(Ok(message)) = messages.next().await {
        match message {
            actix_ws::Message::Binary(bytes) => reader.push(&bytes),
            actix_ws::Message::Ping(ping) => {
                let _ = pongs.pong(&ping).await;
                continue;
            }
            actix_ws::Message::Close(_) => break,
            _ => continue,
        }
        loop {
            let frame = match reader.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "port-forward session ends");
                    break 'session;
                }
            };
            match frame {
                Frame::SynStream { stream, headers, .. } => {
                    let header = |name: &str| {
                        headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
                    };
                    let request = header("requestid").unwrap_or("").to_string();
                    let port = header("port").and_then(parse_port);
                    let reply = writer.syn_reply(stream, &[]);
                    match (header("streamtype"), port) {
                        (Some("error"), Some(_)) => {
                            if out.send(reply).await.is_err() {
                                break 'session;
                            }
                            error_streams.insert(request, stream);
                        }
                        (Some("data"), Some(port)) => {
                            if out.send(reply).await.is_err() {
                                break 'session;
                            }
                            let (to_pod, from_client) = mpsc::channel(QUEUE);
                            let errors = error_streams.remove(&request);
                            let task = actix_web::rt::spawn(forward(
                                (ip.clone(), port),
                                (stream, errors),
                                from_client,
                                out.clone(),
                            ));
                            forwards.insert(stream, Forward { task, to_pod: Some(to_pod) });
                        }
                        _ => {
                            let refused = spdy::rst_stream(stream, spdy::REFUSED_STREAM);
                            if out.send(refused).await.is_err() {
                                break 'session;
                            }
                        }
                    }
                }
                Frame::Data { stream, fin, data } => {
                    let Some(forward) = forwards.get_mut(&stream) else { continue };
                    if let Some(to_pod) = &forward.to_pod {
                        if !data.is_empty() && to_pod.send(data).await.is_err() {
                            forward.to_pod = None;
                        }
                    }
                    if fin {
                        // The client has half-closed: so is the pod's connection, for writing.
                        forward.to_pod = None;
                    }
                }
                Frame::RstStream { stream, .. } => {
                    if let Some(forward) = forwards.remove(&stream) {
                        forward.task.abort();
                    }
                }
                Frame::Ping(id) => {
                    if out.send(spdy::ping(id)).await.is_err() {
                        break 'session;
                    }
                }
                Frame::GoAway => break 'session,
                Frame::Ignored => {}
            }
        }
        forwards.retain(|_, f| !f.task.is_finished());
    }
    for forward in forwards.into_values() {
        forward.task.abort();
    }
}

/// Copies one connection's bytes: the client's (`from_client`, ending when it half-closes)
/// to the pod's port, and the pod's back as DATA frames on `data_stream`, ending with FIN.
/// When both directions are done, or the dial failed (told as text), the error stream is
/// closed.
async fn forward(
    (ip, port): (String, u16),
    (data_stream, error_stream): (u32, Option<u32>),
    mut from_client: mpsc::Receiver<Bytes>,
    out: mpsc::Sender<Bytes>,
) {
    let close_errors = |text: &[u8]| {
        let mut frames = Vec::new();
        if let Some(errors) = error_stream {
            if !text.is_empty() {
                frames.push(spdy::data(errors, false, text));
            }
            frames.push(spdy::data(errors, true, b""));
        }
        frames
    };
    let connection = match tokio::net::TcpStream::connect((ip.as_str(), port)).await {
        Ok(connection) => connection,
        Err(e) => {
            let text = format!("error forwarding port {port} to pod at {ip}: dial: {e}");
            for frame in close_errors(text.as_bytes()) {
                let _ = out.send(frame).await;
            }
            let _ = out.send(spdy::data(data_stream, true, b"")).await;
            return;
        }
    };
    let (mut from_pod, mut to_pod) = connection.into_split();
    let upstream = async {
        while let Some(chunk) = from_client.recv().await {
            if to_pod.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to_pod.shutdown().await;
    };
    let downstream = async {
        let mut buffer = vec![0u8; CHUNK];
        loop {
            match from_pod.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if out.send(spdy::data(data_stream, false, &buffer[..n])).await.is_err() {
                        return;
                    }
                }
            }
        }
        let _ = out.send(spdy::data(data_stream, true, b"")).await;
    };
    futures::future::join(upstream, downstream).await;
    for frame in close_errors(b"") {
        let _ = out.send(frame).await;
    }
}

/// The channel protocol: one connection per port in the query, opened at once.
async fn channel_session(
    ip: String,
    ports: Vec<u16>,
    session: actix_ws::Session,
    mut messages: actix_ws::MessageStream,
) {
    let mut pongs = session.clone();
    let out = sender(session);
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let data = (2 * i) as u8;
        for channel in [data, data + 1] {
            let _ = out.send(framed(channel, &port.to_le_bytes()).into()).await;
        }
        match tokio::net::TcpStream::connect((ip.as_str(), *port)).await {
            Ok(stream) => {
                let (read, write) = stream.into_split();
                writers.push((data, write));
                readers.push((data, read));
            }
            Err(e) => {
                let message = format!("error forwarding port {port} to pod at {ip}: dial: {e}");
                let _ = out.send(framed(data + 1, message.as_bytes()).into()).await;
            }
        }
    }
    let mut pumps = Vec::new();
    for (channel, mut read) in readers {
        let out = out.clone();
        pumps.push(actix_web::rt::spawn(async move {
            let mut buffer = vec![0u8; CHUNK];
            while let Ok(n) = read.read(&mut buffer).await {
                if n == 0 || out.send(framed(channel, &buffer[..n]).into()).await.is_err() {
                    break;
                }
            }
        }));
    }
    // When every connection has been closed by the pod, the websocket closes, as the kubelet's
    // does: that is how the client hears of the end.
    drop(out);
    while let Some(Ok(message)) = messages.next().await {
        match message {
            actix_ws::Message::Binary(data) if !data.is_empty() => {
                if let Some((_, write)) = writers.iter_mut().find(|(c, _)| *c == data[0]) {
                    let _ = write.write_all(&data[1..]).await;
                }
            }
            actix_ws::Message::Ping(ping) => {
                let _ = pongs.pong(&ping).await;
            }
            actix_ws::Message::Close(_) => break,
            _ => {}
        }
    }
    for pump in pumps {
        pump.abort();
    }
}
