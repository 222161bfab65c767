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
use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use actix_ws::AggregatedMessage;
use bytes::Bytes;
use futures::StreamExt;
use kplane_actors::agent::PodLookup;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use super::debugging::{framed, pairs, upgrade, Upgraded};
use super::http::{AgentHttp, AgentHttpError};
use super::spdy::{self, Frame, FrameReader, FrameWriter};

pub(crate) const SPDY_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// Subprotocols spoken, best first.
const PROTOCOLS: &[&str] = &[SPDY_PROTOCOL, "v4.channel.k8s.io", "channel.k8s.io"];
/// The most bytes read from a pod's connection into one frame or message.
const CHUNK: usize = 32 * 1024;
/// Frames waiting for the websocket, and chunks waiting for a pod's connection.
const QUEUE: usize = 64;
/// How many of the client's bytes may wait for one pod's connection: a pod reading slowly (or
/// not for a while) holds up none of the session's other connections until then; past it the
/// session waits for it, as the kubelet's stream queues do.
const STREAM_BUFFER: usize = 16 * 1024 * 1024;
/// How long the session waits for a pod that reads nothing before that stream is reset (the
/// session's other connections wait meanwhile).
const STALL: Duration = Duration::from_secs(600);
/// Error streams waiting for their data stream, at most.
const MOST_PENDING: usize = 1024;

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
    let Upgraded { response, session, messages, protocol } = upgrade(&req, payload, PROTOCOLS)?;
    if protocol == Some(SPDY_PROTOCOL) {
        actix_web::rt::spawn(spdy_session(ip, session, messages));
    } else if ports.is_empty() {
        return Err(AgentHttpError::BadRequest(
            // (The kubelet's words: the API server passes `ports` on as `port`.)
            "query parameter \"port\" is required".into(),
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

/// One forwarded connection of a SPDY session: where the client's bytes for the pod are
/// queued (none once the client has half-closed), and the cancellation of its task (dropped:
/// the client reset the stream, or the session ended).
struct Forward {
    to_pod: Option<mpsc::UnboundedSender<Queued>>,
    /// Room left in the connection's queue, in bytes (see [`STREAM_BUFFER`]).
    room: Arc<Semaphore>,
    cancel: oneshot::Sender<()>,
}

/// A chunk of the client's for the pod, holding its room in the queue until it is written.
type Queued = (Bytes, OwnedSemaphorePermit);

/// What one SPDY session keeps.
struct SpdySession {
    ip: String,
    out: mpsc::Sender<Bytes>,
    writer: FrameWriter,
    /// By data stream.
    forwards: HashMap<u32, Forward>,
    /// Each request's error stream, until its data stream comes.
    error_streams: HashMap<String, u32>,
    /// After the client's GOAWAY: no new streams.
    going_away: bool,
}

async fn spdy_session(
    ip: String,
    session: actix_ws::Session,
    mut messages: actix_ws::AggregatedMessageStream,
) {
    let mut pongs = session.clone();
    let mut spdy = SpdySession {
        ip,
        out: sender(session),
        writer: FrameWriter::default(),
        forwards: HashMap::new(),
        error_streams: HashMap::new(),
        going_away: false,
    };
    let mut reader = FrameReader::default();
    'session: while let Some(Ok(message)) = messages.next().await {
        match message {
            AggregatedMessage::Binary(bytes) => reader.push(&bytes),
            AggregatedMessage::Ping(ping) => {
                let _ = pongs.pong(&ping).await;
                continue;
            }
            AggregatedMessage::Close(_) => break,
            _ => continue,
        }
        loop {
            match reader.next_frame() {
                Ok(Some(frame)) => {
                    if spdy.handle(frame).await.is_err() {
                        break 'session;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "port-forward session ends");
                    break 'session;
                }
            }
        }
        spdy.forwards.retain(|_, f| !f.cancel.is_closed());
    }
    // Dropping the forwards cancels their tasks.
}

/// The websocket is gone.
struct Gone;

impl SpdySession {
    async fn send(&self, frame: Bytes) -> Result<(), Gone> {
        self.out.send(frame).await.map_err(|_| Gone)
    }

    async fn handle(&mut self, frame: Frame) -> Result<(), Gone> {
        match frame {
            Frame::SynStream { stream, headers, .. } => self.open(stream, &headers).await?,
            Frame::Data { stream, fin, data } => {
                let Some(forward) = self.forwards.get_mut(&stream) else { return Ok(()) };
                if let (Some(to_pod), false) = (&forward.to_pod, data.is_empty()) {
                    let bytes = u32::try_from(data.len().min(STREAM_BUFFER)).unwrap_or(u32::MAX);
                    let room = forward.room.clone().acquire_many_owned(bytes);
                    match tokio::time::timeout(STALL, room).await {
                        Ok(Ok(room)) => {
                            if to_pod.send((data, room)).is_err() {
                                // The connection to the pod has ended.
                                forward.to_pod = None;
                            }
                        }
                        Ok(Err(_)) => forward.to_pod = None,
                        Err(_) => {
                            // The pod has read nothing for a long while: the stream goes,
                            // not the session with its other streams.
                            self.forwards.remove(&stream);
                            return self.send(spdy::rst_stream(stream, spdy::CANCEL)).await;
                        }
                    }
                }
                if fin {
                    // The client has half-closed: so is the pod's connection, for writing.
                    forward.to_pod = None;
                }
            }
            Frame::RstStream { stream, .. } => {
                self.forwards.remove(&stream);
            }
            Frame::Ping(id) => self.send(spdy::ping(id)).await?,
            // No new streams; those open go on.
            Frame::GoAway => self.going_away = true,
            Frame::Ignored => {}
        }
        Ok(())
    }

    /// A stream the client opens: answered, and for a data stream its connection dialled.
    async fn open(&mut self, stream: u32, headers: &[(String, String)]) -> Result<(), Gone> {
        let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        let request = header("requestid").unwrap_or("").to_string();
        let port = header("port").and_then(parse_port);
        let refused = match (header("streamtype"), port) {
            _ if self.going_away => Some(spdy::REFUSED_STREAM),
            _ if self.forwards.contains_key(&stream) => Some(spdy::PROTOCOL_ERROR),
            (Some("error"), Some(_)) if self.error_streams.len() >= MOST_PENDING => {
                Some(spdy::REFUSED_STREAM)
            }
            (Some("error" | "data"), Some(_)) => None,
            _ => Some(spdy::REFUSED_STREAM),
        };
        if let Some(status) = refused {
            return self.send(spdy::rst_stream(stream, status)).await;
        }
        let reply = self.writer.syn_reply(stream, &[]);
        self.send(reply).await?;
        let Some(port) = port else { return Ok(()) };
        if header("streamtype") == Some("error") {
            self.error_streams.insert(request, stream);
            return Ok(());
        }
        let (to_pod, from_client) = mpsc::unbounded_channel();
        let room = Arc::new(Semaphore::new(STREAM_BUFFER));
        let (cancel, cancelled) = oneshot::channel();
        let errors = self.error_streams.remove(&request);
        let streams = ForwardStreams { data: stream, errors };
        let out = self.out.clone();
        let connection = forward((self.ip.clone(), port), streams, from_client, out.clone());
        actix_web::rt::spawn(async move {
            tokio::select! {
                () = connection => {}
                _ = cancelled => {}
            }
            // However it ended (the pod's end, a failed dial, the client's reset), its error
            // stream is closed: kubectl closes the local connection only then.
            if let Some(errors) = errors {
                let _ = out.send(spdy::data(errors, true, b"")).await;
            }
        });
        self.forwards.insert(stream, Forward { to_pod: Some(to_pod), room, cancel });
        Ok(())
    }
}

/// The SPDY streams of one forwarded connection.
#[derive(Clone, Copy)]
struct ForwardStreams {
    data: u32,
    errors: Option<u32>,
}

/// Copies one connection's bytes, as the kubelet does: the client's (`from_client`, ending
/// when it half-closes) to the pod's port, and the pod's back as DATA frames on the data
/// stream, ending with FIN; the connection is over when the pod's side ends. A failed dial is
/// told as text on the error stream (which `SpdySession::open` closes, however this ends).
async fn forward(
    (ip, port): (String, u16),
    streams: ForwardStreams,
    mut from_client: mpsc::UnboundedReceiver<Queued>,
    out: mpsc::Sender<Bytes>,
) {
    let connection = match tokio::net::TcpStream::connect((ip.as_str(), port)).await {
        Ok(connection) => connection,
        Err(e) => {
            if let Some(errors) = streams.errors {
                let text = format!("error forwarding port {port} to pod at {ip}: dial: {e}");
                let _ = out.send(spdy::data(errors, false, text.as_bytes())).await;
            }
            let _ = out.send(spdy::data(streams.data, true, b"")).await;
            return;
        }
    };
    let (mut from_pod, mut to_pod) = connection.into_split();
    let upstream = async {
        // Each chunk's room in the queue is given back once it is written.
        while let Some((chunk, _room)) = from_client.recv().await {
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
                    if out.send(spdy::data(streams.data, false, &buffer[..n])).await.is_err() {
                        return;
                    }
                }
            }
        }
        let _ = out.send(spdy::data(streams.data, true, b"")).await;
    };
    tokio::pin!(upstream, downstream);
    // The client's half-close leaves the pod's answer to come; the pod's end ends it.
    if let futures::future::Either::Right(((), downstream)) =
        futures::future::select(downstream, upstream).await
    {
        downstream.await;
    }
}

/// The channel protocol: one connection per port in the query, opened at once.
async fn channel_session(
    ip: String,
    ports: Vec<u16>,
    session: actix_ws::Session,
    mut messages: actix_ws::AggregatedMessageStream,
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
            AggregatedMessage::Binary(data) if !data.is_empty() => {
                if let Some((_, write)) = writers.iter_mut().find(|(c, _)| *c == data[0]) {
                    let _ = write.write_all(&data[1..]).await;
                }
            }
            AggregatedMessage::Ping(ping) => {
                let _ = pongs.pong(&ping).await;
            }
            AggregatedMessage::Close(_) => break,
            _ => {}
        }
    }
    for pump in pumps {
        pump.abort();
    }
}
