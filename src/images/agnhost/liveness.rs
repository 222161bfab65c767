//! `agnhost liveness`: a server that is healthy for a while after it starts, then reports
//! unhealthy for the rest of its life, to watch a liveness probe restart a container.
//!
//! agnhost hard-codes port 8080 and 10 seconds; `--port` and `--healthy-seconds` are kplane
//! additions with those defaults. agnhost's slow-response endpoints are not offered.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};

use super::serve::{query_param, text, HttpListener, Lifecycle};
use crate::images::pod::PodEnv;
use crate::images::ImageError;

/// Flags of `agnhost liveness`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Port to listen on.
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Seconds after start during which /healthz answers 200; 500 afterwards.
    #[arg(long, default_value_t = 10)]
    healthy_seconds: u64,
}

/// Serves until SIGTERM/SIGINT, which end it as they end the real agnhost's liveness server
/// (which handles neither): 143 or 130, an `Error` to the kubelet.
pub(crate) async fn run(args: Args, pod: PodEnv) -> Result<u8, ImageError> {
    let mut life = Lifecycle::new()?;
    let state = web::Data::new(State {
        started: Instant::now(),
        healthy_for: Duration::from_secs(args.healthy_seconds),
    });
    let http = HttpListener::start(SocketAddr::new(pod.ip, args.port), routes(state))?;
    eprintln!("liveness: serving HTTP on {}", http.addr());
    let stop = life.stopped().await;
    http.stop().await;
    Ok(stop.unhandled_exit_code())
}

struct State {
    started: Instant,
    healthy_for: Duration,
}

fn routes(state: web::Data<State>) -> impl Fn(&mut web::ServiceConfig) + Send + Clone + 'static {
    move |cfg| {
        cfg.app_data(state.clone())
            .route("/", web::route().to(root))
            .route("/healthz", web::route().to(healthz))
            .route("/started", web::route().to(started))
            .route("/redirect", web::route().to(redirect));
    }
}

async fn root(state: web::Data<State>) -> HttpResponse {
    let seconds = state.healthy_for.as_secs();
    text(StatusCode::OK, format!("liveness: /healthz answers 200 for {seconds}s, then 500"))
}

async fn healthz(state: web::Data<State>) -> HttpResponse {
    let (status, body) = health(state.started.elapsed(), state.healthy_for);
    text(status, body)
}

/// How long the server has been up.
async fn started(state: web::Data<State>) -> HttpResponse {
    text(StatusCode::OK, format!("{:?}", state.started.elapsed()))
}

/// `/redirect?loc=L`: 302 to L.
async fn redirect(req: HttpRequest) -> HttpResponse {
    let location = query_param(&req, "loc").unwrap_or_default();
    HttpResponse::Found().insert_header((header::LOCATION, location)).finish()
}

/// 200 "ok" while `elapsed` is within `healthy_for`, then 500 with the elapsed seconds.
fn health(elapsed: Duration, healthy_for: Duration) -> (StatusCode, String) {
    if elapsed < healthy_for {
        (StatusCode::OK, "ok".to_owned())
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, format!("error: {}", elapsed.as_secs_f64()))
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::{self, TestRequest};
    use actix_web::App;

    use super::super::tests::parse;
    use super::super::Agnhost;
    use super::*;

    fn liveness(argv: &[&str]) -> Result<Args, clap::Error> {
        let argv: Vec<&str> = std::iter::once("liveness").chain(argv.iter().copied()).collect();
        parse(&argv).map(|args| match args.command {
            Agnhost::Liveness(args) => args,
            other => panic!("parsed as {other:?}"),
        })
    }

    #[test]
    fn flags_default_to_agnhost_behaviour() {
        let args = liveness(&[]).unwrap();
        assert_eq!((args.port, args.healthy_seconds), (8080, 10));
        let args = liveness(&["--port=9000", "--healthy-seconds=1"]).unwrap();
        assert_eq!((args.port, args.healthy_seconds), (9000, 1));
        assert!(liveness(&["--healthy-seconds=-1"]).is_err());
    }

    #[test]
    fn healthy_then_failing() {
        let ten = Duration::from_secs(10);
        assert_eq!(health(Duration::from_secs(3), ten), (StatusCode::OK, "ok".to_owned()));
        let (status, body) = health(Duration::from_millis(10_500), ten);
        assert_eq!((status, body.as_str()), (StatusCode::INTERNAL_SERVER_ERROR, "error: 10.5"));
    }

    #[actix_web::test]
    async fn endpoints() {
        for (healthy_for, expected) in
            [(3600, StatusCode::OK), (0, StatusCode::INTERNAL_SERVER_ERROR)]
        {
            let state = web::Data::new(State {
                started: Instant::now(),
                healthy_for: Duration::from_secs(healthy_for),
            });
            let app = test::init_service(App::new().configure(routes(state))).await;
            for (uri, status) in
                [("/healthz", expected), ("/", StatusCode::OK), ("/started", StatusCode::OK)]
            {
                let response =
                    test::call_service(&app, TestRequest::get().uri(uri).to_request()).await;
                assert_eq!(response.status(), status, "{uri} with {healthy_for}s");
            }
            let response =
                test::call_service(&app, TestRequest::get().uri("/redirect?loc=/x").to_request())
                    .await;
            assert_eq!(response.status(), StatusCode::FOUND);
            assert_eq!(response.headers().get(header::LOCATION).unwrap(), "/x");
        }
    }
}
