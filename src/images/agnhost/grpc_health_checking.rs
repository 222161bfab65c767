//! `agnhost grpc-health-checking`: a gRPC server of the standard health service
//! (`grpc.health.v1.Health/Check`), to watch gRPC probes work. It answers `SERVING` for
//! `--service` (any other name is `NOT_FOUND`, "unknown service"), `NOT_SERVING` once
//! `--delay-unhealthy-sec` have passed (never when negative), and its HTTP port's
//! `/make-not-serving` and `/make-serving` switch the answer by hand. `Watch` is unimplemented,
//! as in agnhost.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kplane_actors::agent::probes::grpc::{
    code, framed, unframed, HealthCheckRequest, HealthCheckResponse, ServingStatus, CHECK_PATH,
};
use kplane_actors::model::text::go_duration;
use prost::Message;
use tokio::net::TcpListener;

use super::serve::{text, HttpListener, Lifecycle};
use crate::images::pod::PodEnv;
use crate::images::ImageError;

/// Flags of `agnhost grpc-health-checking`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Port of the gRPC health service.
    #[arg(long, default_value_t = 5000)]
    port: u16,
    /// Port of `/make-serving` and `/make-not-serving`.
    #[arg(long, default_value_t = 8080)]
    http_port: u16,
    /// Seconds after start before the service answers NOT_SERVING; negative: never.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    delay_unhealthy_sec: i64,
    /// The service name the health check answers for.
    #[arg(long, default_value = "")]
    service: String,
}

/// Serves until SIGTERM/SIGINT (exit 0).
pub(crate) async fn run(args: Args, pod: PodEnv) -> Result<u8, ImageError> {
    let mut life = Lifecycle::new()?;
    let health = Arc::new(Health {
        started: Instant::now(),
        unhealthy_after: u64::try_from(args.delay_unhealthy_sec).ok().map(Duration::from_secs),
        service: args.service,
        forced: AtomicU8::new(NOT_FORCED),
    });
    let http =
        HttpListener::start(SocketAddr::new(pod.ip, args.http_port), routes(health.clone()))?;
    let addr = SocketAddr::new(pod.ip, args.port);
    let grpc =
        TcpListener::bind(addr).await.map_err(|source| ImageError::Listen { addr, source })?;
    eprintln!("grpc-health-checking: gRPC on {addr}, HTTP on {}", http.addr());
    let serving = actix_web::rt::spawn(serve_grpc(grpc, health));
    let stop = life.stopped().await;
    serving.abort();
    http.stop().await;
    Ok(stop.exit_code())
}

/// No `/make-...` call yet: the delay decides.
const NOT_FORCED: u8 = 0;
const FORCED_SERVING: u8 = 1;
const FORCED_NOT_SERVING: u8 = 2;

/// What the health service answers, and how it decides.
struct Health {
    started: Instant,
    unhealthy_after: Option<Duration>,
    service: String,
    forced: AtomicU8,
}

impl Health {
    /// The status of `service` now, or `None` when it is not the one served.
    fn status(&self, service: &str) -> Option<ServingStatus> {
        if service != self.service {
            return None;
        }
        let late = self.unhealthy_after.is_some_and(|after| self.started.elapsed() >= after);
        let not_serving = match self.forced.load(Ordering::Relaxed) {
            FORCED_NOT_SERVING => true,
            FORCED_SERVING => false,
            _ => late,
        };
        Some(if not_serving { ServingStatus::NotServing } else { ServingStatus::Serving })
    }

    /// How long the server has been up, as Go prints a duration.
    fn uptime(&self) -> String {
        go_duration(self.started.elapsed().as_nanos() as i64)
    }
}

fn routes(health: Arc<Health>) -> impl Fn(&mut web::ServiceConfig) + Send + Clone + 'static {
    move |cfg| {
        cfg.app_data(web::Data::from(health.clone()))
            .route("/make-serving", web::route().to(make_serving))
            .route("/make-not-serving", web::route().to(make_not_serving));
    }
}

async fn make_serving(health: web::Data<Health>) -> HttpResponse {
    eprintln!("Mark as healthy");
    health.forced.store(FORCED_SERVING, Ordering::Relaxed);
    text(StatusCode::OK, health.uptime())
}

async fn make_not_serving(health: web::Data<Health>) -> HttpResponse {
    eprintln!("Mark as unhealthy");
    health.forced.store(FORCED_NOT_SERVING, Ordering::Relaxed);
    text(StatusCode::OK, health.uptime())
}

/// Accepts connections and serves each as HTTP/2 (gRPC needs no more than that).
async fn serve_grpc(listener: TcpListener, health: Arc<Health>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let health = health.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let health = health.clone();
                async move { Ok::<_, Infallible>(answer(&health, request).await) }
            });
            let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service);
            if let Err(error) = connection.await {
                tracing::debug!(%error, "gRPC connection ended");
            }
        });
    }
}

type GrpcBody =
    StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

/// One gRPC call's answer.
async fn answer(health: &Health, request: hyper::Request<Incoming>) -> hyper::Response<GrpcBody> {
    let path = request.uri().path().to_string();
    let method = path.strip_prefix("/grpc.health.v1.Health/");
    match method {
        Some("Check") => {}
        Some("Watch") => return status_only(code::UNIMPLEMENTED, "unimplemented"),
        Some(other) => {
            return status_only(
                code::UNIMPLEMENTED,
                &format!("unknown method {other} for service grpc.health.v1.Health"),
            )
        }
        None => {
            let service = path.trim_start_matches('/').split('/').next().unwrap_or("");
            return status_only(code::UNIMPLEMENTED, &format!("unknown service {service}"));
        }
    }
    debug_assert_eq!(path, CHECK_PATH);
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return status_only(code::CANCELED, "context canceled"),
    };
    let Some(asked) = unframed(&body).and_then(|m| HealthCheckRequest::decode(m).ok()) else {
        return status_only(code::INTERNAL, "grpc: error unmarshalling request");
    };
    eprintln!("Serving the Check request for health check, started {} ago", health.uptime());
    let Some(status) = health.status(&asked.service) else {
        return status_only(code::NOT_FOUND, "unknown service");
    };
    let message = framed(&HealthCheckResponse { status: status as i32 });
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let frames = vec![Ok(Frame::data(message)), Ok(Frame::trailers(trailers))];
    grpc_response(frames)
}

/// What gRPC percent-encodes in `grpc-message`: bytes outside printable ASCII, and `%`.
const GRPC_MESSAGE_ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b'%');

/// A failed call: no message, its status in the trailers.
fn status_only(code: u32, message: &str) -> hyper::Response<GrpcBody> {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from(code));
    let encoded = percent_encoding::utf8_percent_encode(message, GRPC_MESSAGE_ESCAPED).to_string();
    if let Ok(value) = HeaderValue::from_str(&encoded) {
        trailers.insert("grpc-message", value);
    }
    grpc_response(vec![Ok(Frame::trailers(trailers))])
}

fn grpc_response(frames: Vec<Result<Frame<Bytes>, Infallible>>) -> hyper::Response<GrpcBody> {
    let mut response = hyper::Response::new(StreamBody::new(futures::stream::iter(frames)));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    response
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, Probe};
    use kplane_actors::agent::probes::{self, Outcome};

    use super::super::tests::parse;
    use super::super::Agnhost;
    use super::*;

    fn args(argv: &[&str]) -> Result<Args, clap::Error> {
        let argv: Vec<&str> =
            std::iter::once("grpc-health-checking").chain(argv.iter().copied()).collect();
        parse(&argv).map(|args| match args.command {
            Agnhost::GrpcHealthChecking(args) => args,
            other => panic!("parsed as {other:?}"),
        })
    }

    #[test]
    fn flags_default_to_agnhost_behaviour() {
        let a = args(&[]).unwrap();
        assert_eq!(
            (a.port, a.http_port, a.delay_unhealthy_sec, a.service.as_str()),
            (5000, 8080, -1, "")
        );
        let a =
            args(&["--port=9000", "--http-port=9001", "--delay-unhealthy-sec=5", "--service=db"])
                .unwrap();
        assert_eq!(
            (a.port, a.http_port, a.delay_unhealthy_sec, a.service.as_str()),
            (9000, 9001, 5, "db")
        );
        assert!(args(&["--port=x"]).is_err());
    }

    #[test]
    fn serving_until_the_delay_or_a_switch() {
        let health = |after: Option<u64>| Health {
            started: Instant::now(),
            unhealthy_after: after.map(Duration::from_secs),
            service: "db".into(),
            forced: AtomicU8::new(NOT_FORCED),
        };
        let never = health(None);
        assert_eq!(never.status("db"), Some(ServingStatus::Serving));
        assert_eq!(never.status(""), None);
        assert_eq!(never.status("other"), None);
        let at_once = health(Some(0));
        assert_eq!(at_once.status("db"), Some(ServingStatus::NotServing));
        at_once.forced.store(FORCED_SERVING, Ordering::Relaxed);
        assert_eq!(at_once.status("db"), Some(ServingStatus::Serving));
        never.forced.store(FORCED_NOT_SERVING, Ordering::Relaxed);
        assert_eq!(never.status("db"), Some(ServingStatus::NotServing));
    }

    /// The outcome of a gRPC probe of `service` at `port` (one second at most).
    async fn probed(port: u16, service: &str) -> Outcome {
        let probe: Probe = serde_json::from_value(serde_json::json!({
            "grpc": {"port": port, "service": service}, "timeoutSeconds": 1}))
        .unwrap();
        let container: Container =
            serde_json::from_value(serde_json::json!({"name": "c"})).unwrap();
        probes::run(&probe, &container, "127.0.0.1", &[], &[]).await
    }

    #[tokio::test]
    async fn the_kubelets_grpc_probe_reads_the_answers() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let health = Arc::new(Health {
            started: Instant::now(),
            unhealthy_after: None,
            service: "db".into(),
            forced: AtomicU8::new(NOT_FORCED),
        });
        tokio::spawn(serve_grpc(listener, health.clone()));
        assert_eq!(probed(port, "db").await, Outcome::Success);
        health.forced.store(FORCED_NOT_SERVING, Ordering::Relaxed);
        let unhealthy =
            Outcome::Failure("service unhealthy (responded with \"NOT_SERVING\")".into());
        assert_eq!(probed(port, "db").await, unhealthy);
        let unknown =
            "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service";
        assert_eq!(probed(port, "other").await, Outcome::Failure(unknown.into()));
        // Nothing listening: dialed again until the timeout, then the kubelet's words.
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = free.local_addr().unwrap().port();
        drop(free);
        let refused = format!(
            "timeout: failed to connect service \"127.0.0.1:{closed}\" within 1s: context deadline exceeded"
        );
        assert_eq!(probed(closed, "").await, Outcome::Failure(refused));
        // A port that speaks HTTP/1.1: never a gRPC connection, so the same.
        let http1 = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let http1_port = http1.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = http1.accept().await {
                use tokio::io::AsyncWriteExt;
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            }
        });
        let never = format!(
            "timeout: failed to connect service \"127.0.0.1:{http1_port}\" within 1s: context deadline exceeded"
        );
        assert_eq!(probed(http1_port, "").await, Outcome::Failure(never));
    }
}
