//! gRPC probes: one `grpc.health.v1.Health/Check` call over plaintext HTTP/2, judged and worded
//! as the kubelet's prober judges and words it (a `SERVING` answer succeeds; anything else fails
//! with the kubelet's message).

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::Outcome;
use crate::model::text::{go_duration, go_quote, join_host_port};

/// The health service's Check method, as a gRPC path.
pub const CHECK_PATH: &str = "/grpc.health.v1.Health/Check";

/// How long grpc-go waits before dialing again after a failed connection (its first backoff).
const REDIAL_AFTER: Duration = Duration::from_secs(1);

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    pub service: String,
}

/// `grpc.health.v1.HealthCheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckResponse {
    #[prost(enumeration = "ServingStatus", tag = "1")]
    pub status: i32,
}

/// `grpc.health.v1.HealthCheckResponse.ServingStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ServingStatus {
    Unknown = 0,
    Serving = 1,
    NotServing = 2,
    ServiceUnknown = 3,
}

impl ServingStatus {
    /// The name protobuf gives the value (`NOT_SERVING`).
    pub fn name(self) -> &'static str {
        match self {
            ServingStatus::Unknown => "UNKNOWN",
            ServingStatus::Serving => "SERVING",
            ServingStatus::NotServing => "NOT_SERVING",
            ServingStatus::ServiceUnknown => "SERVICE_UNKNOWN",
        }
    }
}

/// The gRPC status codes kplane's client and server give or read by name.
pub mod code {
    pub const CANCELED: u32 = 1;
    pub const UNKNOWN: u32 = 2;
    pub const DEADLINE_EXCEEDED: u32 = 4;
    pub const NOT_FOUND: u32 = 5;
    pub const PERMISSION_DENIED: u32 = 7;
    pub const UNIMPLEMENTED: u32 = 12;
    pub const INTERNAL: u32 = 13;
    pub const UNAVAILABLE: u32 = 14;
    pub const UNAUTHENTICATED: u32 = 16;
}

/// A gRPC status code's name, as grpc-go prints it (`NotFound`).
pub fn code_name(code: u32) -> String {
    const NAMES: [&str; 17] = [
        "OK",
        "Canceled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
    ];
    NAMES.get(code as usize).map_or_else(|| format!("Code({code})"), |n| n.to_string())
}

/// A message in gRPC's length-prefixed framing: no compression, then its length.
pub fn framed(message: &impl Message) -> Bytes {
    let encoded = message.encode_to_vec();
    let mut framed = Vec::with_capacity(5 + encoded.len());
    framed.push(0);
    framed.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
    framed.extend_from_slice(&encoded);
    Bytes::from(framed)
}

/// The first message of a length-prefixed gRPC body, if it holds a whole uncompressed one.
pub fn unframed(body: &[u8]) -> Option<&[u8]> {
    let (&compressed, rest) = body.split_first()?;
    let length = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    (compressed == 0).then(|| rest.get(4..4 + length)).flatten()
}

/// Asks `host:port` whether `service` is serving, within `timeout`.
pub(super) async fn probe(host: &str, port: u16, service: &str, timeout: Duration) -> Outcome {
    let addr = join_host_port(host, port);
    let deadline = Instant::now() + timeout;
    let within = go_duration(timeout.as_nanos() as i64);
    let not_connected = || {
        Outcome::Failure(format!(
            "timeout: failed to connect service {} within {within}: context deadline exceeded",
            go_quote(&addr)
        ))
    };
    // As grpc-go's blocking dial: a connection refused, or one that speaks no HTTP/2, is dialed
    // again until the deadline.
    let answer = loop {
        let called = match tokio::time::timeout_at(deadline, connect(host, port)).await {
            Err(_) => return not_connected(),
            Ok(None) => None,
            Ok(Some(sender)) => {
                match tokio::time::timeout_at(deadline, check(sender, &addr, service)).await {
                    // Connected, but the call did not end in time.
                    Err(_) => break Err((code::DEADLINE_EXCEEDED, String::new())),
                    Ok(called) => called,
                }
            }
        };
        match called {
            Some(answer) => break answer,
            None if Instant::now() + REDIAL_AFTER < deadline => {
                tokio::time::sleep(REDIAL_AFTER).await;
            }
            None => {
                tokio::time::sleep_until(deadline).await;
                return not_connected();
            }
        }
    };
    match answer {
        Ok(ServingStatus::Serving) => Outcome::Success,
        Ok(status) => Outcome::Failure(format!(
            "service unhealthy (responded with {})",
            go_quote(status.name())
        )),
        Err((code::DEADLINE_EXCEEDED, _)) => {
            Outcome::Failure(format!("timeout: health rpc did not complete within {within}"))
        }
        Err((code::UNIMPLEMENTED, message)) => Outcome::Failure(format!(
            "error: this server does not implement the grpc health protocol \
             (grpc.health.v1.Health): {message}"
        )),
        Err((code, message)) => Outcome::Failure(format!(
            "error: health rpc probe failed: rpc error: code = {} desc = {message}",
            code_name(code)
        )),
    }
}

type Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// An HTTP/2 connection to `host:port`, or `None` when none can be made (one that speaks no
/// HTTP/2 shows it when the call is made: [`check`] then answers `None`).
async fn connect(host: &str, port: u16) -> Option<Sender> {
    let tcp = TcpStream::connect((host, port)).await.ok()?;
    let (mut sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake(TokioIo::new(tcp))
        .await
        .ok()?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "gRPC probe connection ended");
        }
    });
    sender.ready().await.ok()?;
    Some(sender)
}

/// A failed call's gRPC status code and message.
type RpcError = (u32, String);

/// One Check call on `sender`: the status it answered, or how the call failed; `None` when the
/// connection failed before any answer (it spoke no HTTP/2).
async fn check(
    mut sender: Sender,
    addr: &str,
    service: &str,
) -> Option<Result<ServingStatus, RpcError>> {
    let response = sender.send_request(request(addr, service)?).await.ok()?;
    Some(answer(response).await)
}

/// A Check request for `service`.
fn request(addr: &str, service: &str) -> Option<hyper::Request<Full<Bytes>>> {
    hyper::Request::post(format!("http://{addr}{CHECK_PATH}"))
        .header(hyper::header::CONTENT_TYPE, "application/grpc")
        .header(hyper::header::TE, "trailers")
        .header(hyper::header::USER_AGENT, "kube-probe/1.32")
        .body(Full::new(framed(&HealthCheckRequest { service: service.to_string() })))
        .ok()
}

/// What a Check call's response says: the status answered, or how the call failed.
async fn answer(
    response: hyper::Response<hyper::body::Incoming>,
) -> Result<ServingStatus, RpcError> {
    if response.status() != hyper::StatusCode::OK {
        // grpc-go turns an HTTP status into a gRPC code and says which it was.
        let status = response.status();
        let code = match status.as_u16() {
            400 => code::INTERNAL,
            401 => code::UNAUTHENTICATED,
            403 => code::PERMISSION_DENIED,
            404 => code::UNIMPLEMENTED,
            429 | 502..=504 => code::UNAVAILABLE,
            _ => code::UNKNOWN,
        };
        let reason = status.canonical_reason().unwrap_or("");
        let text = format!(
            "unexpected HTTP status code received from server: {} ({reason})",
            status.as_u16()
        );
        return Err((code, text));
    }
    // A trailers-only answer carries its status among the headers.
    let head_status = grpc_status(response.headers());
    let collected =
        response.into_body().collect().await.map_err(|e| (code::UNAVAILABLE, e.to_string()))?;
    let trailers = collected.trailers().cloned();
    let body = collected.to_bytes();
    let (code, message) = head_status
        .or_else(|| trailers.as_ref().and_then(grpc_status))
        .unwrap_or((code::UNKNOWN, "server closed the stream without sending trailers".into()));
    if code != 0 {
        return Err((code, message));
    }
    let answer = unframed(&body).and_then(|m| HealthCheckResponse::decode(m).ok());
    let answer =
        answer.ok_or((code::INTERNAL, "grpc: failed to unmarshal the received message".into()))?;
    // An unknown value is not SERVING: the kubelet fails it as it fails UNKNOWN.
    Ok(ServingStatus::try_from(answer.status).unwrap_or(ServingStatus::Unknown))
}

/// The `grpc-status` and (percent-decoded) `grpc-message` of a header map, if it has a status.
fn grpc_status(headers: &hyper::HeaderMap) -> Option<(u32, String)> {
    let code = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
    let message = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .map(|m| percent_encoding::percent_decode_str(m).decode_utf8_lossy().into_owned())
        .unwrap_or_default();
    Some((code, message))
}
