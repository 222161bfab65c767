//! `agnhost netexec`: an HTTP server with agnhost's test endpoints, and optionally a UDP server
//! answering `hostname`, `echo <msg>` and `clientip`.
//!
//! Differences from agnhost, on purpose: `/shell` and `/upload` answer 403 (a kplane pod is a
//! host process: running commands or writing files for any caller is not a test convenience
//! there); the UDP server is off unless `--udp-port` is given (agnhost defaults to 8081, which
//! pods sharing an address would fight over); `/healthz` answers 200 when there is no UDP server
//! (agnhost would answer 412 forever); `/exit` answers before exiting and ignores `wait` and
//! `timeout`; `/dial` speaks http and udp, not sctp. TLS and `--http-override` are not offered.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use kplane_actors::model::text::join_host_port;
use tokio::net::UdpSocket;

use super::serve::{closing, query_param, text, ExitRequests, HttpListener, Lifecycle, Stop};
use crate::images::pod::PodEnv;
use crate::images::ImageError;

/// How long one `/dial` try may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// Flags of `agnhost netexec`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// HTTP listen port.
    #[arg(long, default_value_t = 8080)]
    http_port: u16,
    /// UDP listen port; -1 (the default here) serves no UDP.
    #[arg(
        long,
        default_value_t = -1,
        allow_negative_numbers = true,
        value_parser = clap::value_parser!(i32).range(-1..=65535)
    )]
    udp_port: i32,
    /// Seconds to keep serving after SIGTERM, with /readyz answering 503.
    #[arg(long, default_value_t = 0)]
    delay_shutdown: u64,
}

impl Args {
    fn udp_port(&self) -> Option<u16> {
        u16::try_from(self.udp_port).ok()
    }
}

/// Runs until SIGTERM/SIGINT (exit 0) or `/exit?code=N` (exit N).
pub(crate) async fn run(args: Args, pod: PodEnv) -> Result<u8, ImageError> {
    let mut life = Lifecycle::new()?;
    let udp = match args.udp_port() {
        Some(port) => {
            let addr = SocketAddr::new(pod.ip, port);
            let socket = UdpSocket::bind(addr)
                .await
                .map_err(|source| ImageError::Listen { addr, source })?;
            eprintln!("netexec: serving UDP on {addr}");
            Some(socket)
        }
        None => None,
    };
    let state = web::Data::new(State::new(&pod, life.exit_requests())?);
    if let Some(socket) = udp {
        actix_web::rt::spawn(serve_udp(socket, state.clone()));
    }
    let http = HttpListener::start(SocketAddr::new(pod.ip, args.http_port), routes(state.clone()))?;
    eprintln!("netexec: serving HTTP on {}", http.addr());
    let mut stop = life.stopped().await;
    if matches!(stop, Stop::Signal(_)) {
        // Endpoints controllers see /readyz fail and take the pod out while it still serves.
        state.terminating.store(true, Ordering::Relaxed);
        let delay = Duration::from_secs(args.delay_shutdown);
        if let Ok(next) = tokio::time::timeout(delay, life.stopped()).await {
            stop = next;
        }
    }
    http.stop().await;
    Ok(stop.exit_code())
}

/// What the handlers share.
struct State {
    pod_name: String,
    /// False once the UDP server has died; true from the start when there is none.
    udp_up: AtomicBool,
    /// Set by SIGTERM: /readyz answers 503 from then on.
    terminating: AtomicBool,
    exits: ExitRequests,
    dialer: Dialer,
}

impl State {
    fn new(pod: &PodEnv, exits: ExitRequests) -> Result<Self, ImageError> {
        Ok(State {
            pod_name: pod.name.clone(),
            udp_up: AtomicBool::new(true),
            terminating: AtomicBool::new(false),
            exits,
            dialer: Dialer::new(pod.ip)?,
        })
    }
}

/// Every endpoint; anything unknown gets the root answer, as Go's "/" pattern does.
fn routes(state: web::Data<State>) -> impl Fn(&mut web::ServiceConfig) + Send + Clone + 'static {
    move |cfg| {
        cfg.app_data(state.clone())
            .route("/clientip", web::route().to(client_ip))
            .route("/dial", web::route().to(dial))
            .route("/echo", web::route().to(echo))
            .route("/exit", web::route().to(exit))
            .route("/header", web::route().to(headers))
            .route("/healthz", web::route().to(healthz))
            .route("/readyz", web::route().to(readyz))
            .route("/hostname", web::route().to(hostname))
            .route("/hostName", web::route().to(hostname))
            .route("/redirect", web::route().to(redirect))
            .route("/shell", web::route().to(disabled))
            .route("/upload", web::route().to(disabled))
            .route("/shutdown", web::route().to(shutdown))
            .default_service(web::to(root));
    }
}

// === handlers ===

async fn root() -> HttpResponse {
    text(StatusCode::OK, format!("NOW: {}", chrono::Local::now()))
}

/// `/echo?msg=X[&code=N]`: X, with status N.
async fn echo(req: HttpRequest) -> HttpResponse {
    let msg = query_param(&req, "msg").unwrap_or_default();
    match query_param(&req, "code") {
        None => text(StatusCode::OK, msg),
        Some(code) => match status_code(&code) {
            Some(status) => text(status, msg),
            None => bad_request(format!("argument 'code' must be an HTTP status, got {code:?}")),
        },
    }
}

async fn client_ip(req: HttpRequest) -> HttpResponse {
    text(StatusCode::OK, req.peer_addr().map(|a| a.to_string()).unwrap_or_default())
}

/// `/header?key=K`: the value of request header K; without `key`, all headers as JSON.
async fn headers(req: HttpRequest) -> HttpResponse {
    if let Some(key) = query_param(&req, "key") {
        let value = req.headers().get(key.as_str()).map(|v| String::from_utf8_lossy(v.as_bytes()));
        return text(StatusCode::OK, value.unwrap_or_default());
    }
    let mut all: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in req.headers().iter() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        all.entry(canonical_header_name(name.as_str())).or_default().push(value);
    }
    HttpResponse::Ok().json(all)
}

/// `/exit?code=N`: answers, then the process exits with N (default 0).
async fn exit(req: HttpRequest, state: web::Data<State>) -> HttpResponse {
    let code = match query_param(&req, "code").map(|c| c.parse::<u8>().map_err(|_| c)) {
        None => 0,
        Some(Ok(code)) => code,
        Some(Err(c)) => {
            return bad_request(format!("argument 'code' must be an integer [0-255], got {c:?}"))
        }
    };
    state.exits.request(code);
    // Closing the connection lets the graceful stop finish without waiting for keep-alive.
    closing(text(StatusCode::OK, format!("exiting with code {code}")))
}

async fn shutdown(state: web::Data<State>) -> HttpResponse {
    state.exits.request(0);
    closing(text(StatusCode::OK, "shutting down"))
}

/// 200 while the UDP server (if any) is up, else 412.
async fn healthz(state: web::Data<State>) -> HttpResponse {
    if state.udp_up.load(Ordering::Relaxed) {
        HttpResponse::Ok().finish()
    } else {
        HttpResponse::PreconditionFailed().finish()
    }
}

/// 503 once SIGTERM arrived, else like /healthz.
async fn readyz(state: web::Data<State>) -> HttpResponse {
    if state.terminating.load(Ordering::Relaxed) {
        text(StatusCode::SERVICE_UNAVAILABLE, "shutting down")
    } else if state.udp_up.load(Ordering::Relaxed) {
        text(StatusCode::OK, "ok")
    } else {
        HttpResponse::PreconditionFailed().finish()
    }
}

async fn hostname(state: web::Data<State>) -> HttpResponse {
    text(StatusCode::OK, state.pod_name.clone())
}

/// `/redirect?location=L[&code=N]`: redirects to L with status N (default 302).
async fn redirect(req: HttpRequest) -> HttpResponse {
    let location = query_param(&req, "location").unwrap_or_else(|| "/".to_owned());
    let status = match query_param(&req, "code") {
        None => StatusCode::FOUND,
        Some(code) => match status_code(&code) {
            Some(status) => status,
            None => {
                return bad_request(format!("argument 'code' must be an HTTP status, got {code:?}"))
            }
        },
    };
    HttpResponse::build(status).insert_header((header::LOCATION, location)).finish()
}

async fn disabled(req: HttpRequest) -> HttpResponse {
    text(StatusCode::FORBIDDEN, format!("{} is disabled in kplane", req.path()))
}

/// `/dial?host=H&port=P&request=R[&protocol=http|udp][&tries=N]`: asks H:P for R, N times, and
/// answers `{"responses": [...], "errors": [...]}` (each key only when non-empty).
async fn dial(req: HttpRequest, state: web::Data<State>) -> HttpResponse {
    let Some(request) = query_param(&req, "request") else {
        return bad_request("request parameter not specified");
    };
    let tries = match query_param(&req, "tries").map(|t| t.parse::<u32>()) {
        None => 1,
        Some(Ok(tries)) => tries,
        Some(Err(e)) => return bad_request(format!("tries parameter is invalid. {e}")),
    };
    let host = query_param(&req, "host").unwrap_or_default();
    let Some(port) = query_param(&req, "port").and_then(|p| p.parse::<u16>().ok()) else {
        return bad_request("host and/or port param are invalid");
    };
    let protocol = query_param(&req, "protocol").unwrap_or_default().to_ascii_lowercase();
    let udp = match protocol.as_str() {
        "" | "http" => false,
        "udp" => true,
        other => return bad_request(format!("unsupported protocol. {other}")),
    };
    let mut results: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for _ in 0..tries {
        let result = if udp {
            state.dialer.udp(&host, port, &request).await
        } else {
            state.dialer.http(&host, port, &request).await
        };
        match result {
            Ok(response) => results.entry("responses").or_default().push(response),
            Err(error) => results.entry("errors").or_default().push(error),
        }
    }
    HttpResponse::Ok().json(results)
}

fn bad_request(message: impl Into<String>) -> HttpResponse {
    text(StatusCode::BAD_REQUEST, message)
}

fn status_code(code: &str) -> Option<StatusCode> {
    code.parse::<u16>().ok().and_then(|c| StatusCode::from_u16(c).ok())
}

/// Go's canonical form, which agnhost's JSON shows: `x-forwarded-for` -> `X-Forwarded-For`.
fn canonical_header_name(name: &str) -> String {
    let mut upper = true;
    name.chars()
        .map(|c| {
            let c = if upper { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() };
            upper = c == '-';
            c
        })
        .collect()
}

// === dialing ===

/// Makes `/dial`'s requests. Requests to loopback addresses leave from the pod's own IP, so the
/// callee (and kplane's service proxy) sees which pod called.
struct Dialer {
    /// Bound to the pod IP; None when the pod has no specific IP.
    from_pod: Option<(IpAddr, reqwest::Client)>,
    any: reqwest::Client,
}

impl Dialer {
    fn new(pod_ip: IpAddr) -> Result<Self, reqwest::Error> {
        let client = || reqwest::Client::builder().timeout(DIAL_TIMEOUT).no_proxy();
        let from_pod = if pod_ip.is_unspecified() {
            None
        } else {
            Some((pod_ip, client().local_address(pod_ip).build()?))
        };
        Ok(Dialer { from_pod, any: client().build()? })
    }

    /// The local address and HTTP client for a destination host.
    fn route(&self, host: &str) -> (Option<IpAddr>, &reqwest::Client) {
        let loopback = host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
        match &self.from_pod {
            Some((ip, client)) if loopback && ip.is_loopback() => (Some(*ip), client),
            _ => (None, &self.any),
        }
    }

    async fn http(&self, host: &str, port: u16, request: &str) -> Result<String, String> {
        let url =
            format!("http://{}/{}", join_host_port(host, port), request.trim_start_matches('/'));
        let response = self.route(host).1.get(url).send().await.map_err(|e| e.to_string())?;
        response.text().await.map_err(|e| e.to_string())
    }

    async fn udp(&self, host: &str, port: u16, request: &str) -> Result<String, String> {
        let local = self.route(host).0.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let exchange = async {
            let socket = UdpSocket::bind((local, 0)).await?;
            socket.connect(join_host_port(host, port)).await?;
            socket.send(request.as_bytes()).await?;
            let mut buffer = vec![0; 2048];
            let n = socket.recv(&mut buffer).await?;
            buffer.truncate(n);
            Ok::<_, std::io::Error>(buffer)
        };
        match tokio::time::timeout(DIAL_TIMEOUT, exchange).await {
            Err(_) => Err("reading from udp connection failed: timed out".to_owned()),
            Ok(Err(e)) => Err(format!("udp exchange failed: {e}")),
            Ok(Ok(reply)) if reply.is_empty() => Err("empty udp response".to_owned()),
            Ok(Ok(reply)) => Ok(String::from_utf8_lossy(&reply).into_owned()),
        }
    }
}

// === UDP server ===

/// Answers UDP commands until the socket fails; then /healthz turns 412.
async fn serve_udp(socket: UdpSocket, state: web::Data<State>) {
    let mut buffer = [0u8; 2048];
    loop {
        let (n, peer) = match socket.recv_from(&mut buffer).await {
            Ok(received) => received,
            Err(e) => {
                eprintln!("netexec: UDP server stopped: {e}");
                break;
            }
        };
        let command = String::from_utf8_lossy(&buffer[..n]);
        if let Some(reply) = udp_reply(&command, &state.pod_name, peer) {
            if let Err(e) = socket.send_to(reply.as_bytes(), peer).await {
                eprintln!("netexec: cannot answer {peer} over UDP: {e}");
            }
        }
    }
    state.udp_up.store(false, Ordering::Relaxed);
}

/// The answer to one UDP command; agnhost lowercases the whole datagram, echoed text included.
fn udp_reply(datagram: &str, pod_name: &str, peer: SocketAddr) -> Option<String> {
    let command = datagram.trim().to_lowercase();
    match command.as_str() {
        "hostname" => Some(pod_name.to_owned()),
        "clientip" => Some(peer.to_string()),
        _ => command.strip_prefix("echo ").map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::{self, TestRequest};
    use actix_web::App;

    use super::super::tests::parse;
    use super::super::Agnhost;
    use super::*;

    fn netexec(argv: &[&str]) -> Result<Args, clap::Error> {
        let argv: Vec<&str> = std::iter::once("netexec").chain(argv.iter().copied()).collect();
        parse(&argv).map(|args| match args.command {
            Agnhost::Netexec(args) => args,
            other => panic!("parsed as {other:?}"),
        })
    }

    fn state() -> (web::Data<State>, tokio::sync::mpsc::UnboundedReceiver<u8>) {
        let (exits, requests) = ExitRequests::channel();
        let pod = PodEnv { name: "mypod".to_owned(), ip: IpAddr::from([127, 0, 0, 1]) };
        (web::Data::new(State::new(&pod, exits).unwrap()), requests)
    }

    /// Sends one GET and returns status and body.
    async fn get(state: &web::Data<State>, uri: &str) -> (StatusCode, String) {
        let app = test::init_service(App::new().configure(routes(state.clone()))).await;
        let req = TestRequest::get()
            .uri(uri)
            .peer_addr("127.0.0.9:4321".parse().unwrap())
            .insert_header(("x-test", "yes"))
            .to_request();
        let response = test::call_service(&app, req).await;
        let status = response.status();
        let body = test::read_body(response).await;
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[test]
    fn flags_use_agnhost_names_and_defaults() {
        let args = netexec(&[]).unwrap();
        assert_eq!((args.http_port, args.udp_port(), args.delay_shutdown), (8080, None, 0));
        let args = netexec(&["--http-port=9000", "--udp-port=8081"]).unwrap();
        assert_eq!((args.http_port, args.udp_port()), (9000, Some(8081)));
        let args = netexec(&["--http-port", "9001", "--udp-port", "-1"]).unwrap();
        assert_eq!((args.http_port, args.udp_port()), (9001, None));
        assert!(netexec(&["--http-port=70000"]).is_err());
        assert!(netexec(&["--udp-port=-2"]).is_err());
    }

    #[actix_web::test]
    async fn echo_returns_the_message_with_the_asked_status() {
        let (state, _) = state();
        assert_eq!(get(&state, "/echo?msg=hi").await, (StatusCode::OK, "hi".to_owned()));
        let (status, body) = get(&state, "/echo?msg=gone&code=410").await;
        assert_eq!((status, body.as_str()), (StatusCode::GONE, "gone"));
        assert_eq!(get(&state, "/echo?msg=x&code=abc").await.0, StatusCode::BAD_REQUEST);
    }

    #[actix_web::test]
    async fn hostname_clientip_and_headers() {
        let (state, _) = state();
        assert_eq!(get(&state, "/hostname").await.1, "mypod");
        assert_eq!(get(&state, "/hostName").await.1, "mypod");
        assert_eq!(get(&state, "/clientip").await.1, "127.0.0.9:4321");
        assert_eq!(get(&state, "/header?key=X-Test").await.1, "yes");
        assert_eq!(get(&state, "/header?key=X-Missing").await, (StatusCode::OK, String::new()));
        let all: serde_json::Value = serde_json::from_str(&get(&state, "/header").await.1).unwrap();
        assert_eq!(all["X-Test"], serde_json::json!(["yes"]));
    }

    #[actix_web::test]
    async fn root_answers_any_unknown_path() {
        let (state, _) = state();
        for uri in ["/", "/some/where"] {
            let (status, body) = get(&state, uri).await;
            assert_eq!(status, StatusCode::OK);
            assert!(body.starts_with("NOW: "), "{uri}: {body}");
        }
    }

    #[actix_web::test]
    async fn exit_answers_then_asks_for_the_code() {
        let (state, mut requests) = state();
        assert_eq!(
            get(&state, "/exit?code=3").await,
            (StatusCode::OK, "exiting with code 3".into())
        );
        assert_eq!(requests.try_recv().ok(), Some(3));
        assert_eq!(get(&state, "/exit?code=300").await.0, StatusCode::BAD_REQUEST);
        assert!(requests.try_recv().is_err(), "a bad code must not stop the server");
        get(&state, "/shutdown").await;
        assert_eq!(requests.try_recv().ok(), Some(0));
    }

    #[actix_web::test]
    async fn shell_and_upload_are_disabled() {
        let (state, _) = state();
        for uri in ["/shell?cmd=id", "/upload"] {
            let (status, body) = get(&state, uri).await;
            assert_eq!(status, StatusCode::FORBIDDEN);
            assert!(body.contains("disabled in kplane"), "{body}");
        }
    }

    #[actix_web::test]
    async fn health_follows_the_udp_server_and_readiness_sigterm() {
        let (state, _) = state();
        assert_eq!(get(&state, "/healthz").await.0, StatusCode::OK);
        assert_eq!(get(&state, "/readyz").await.0, StatusCode::OK);
        state.terminating.store(true, Ordering::Relaxed);
        assert_eq!(get(&state, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(get(&state, "/healthz").await.0, StatusCode::OK, "still alive");
        state.udp_up.store(false, Ordering::Relaxed);
        assert_eq!(get(&state, "/healthz").await.0, StatusCode::PRECONDITION_FAILED);
    }

    #[actix_web::test]
    async fn redirect_sends_the_location() {
        let (state, _) = state();
        let app = test::init_service(App::new().configure(routes(state.clone()))).await;
        let req = TestRequest::get().uri("/redirect?location=/echo%3Fmsg%3Dx&code=307");
        let response = test::call_service(&app, req.to_request()).await;
        assert_eq!(response.status(), StatusCode::TEMPORARY_REDIRECT);
        assert_eq!(response.headers().get(header::LOCATION).unwrap(), "/echo?msg=x");
    }

    #[actix_web::test]
    async fn dial_checks_its_parameters() {
        let (state, _) = state();
        for uri in [
            "/dial?host=127.0.0.1&port=1",
            "/dial?host=127.0.0.1&port=x&request=hostname",
            "/dial?host=127.0.0.1&port=1&request=hostname&tries=many",
            "/dial?host=127.0.0.1&port=1&request=hostname&protocol=sctp",
        ] {
            assert_eq!(get(&state, uri).await.0, StatusCode::BAD_REQUEST, "{uri}");
        }
    }

    #[actix_web::test]
    async fn dial_reaches_netexec_over_http_and_udp() {
        let (state, _) = state();
        let http =
            HttpListener::start("127.0.0.1:0".parse().unwrap(), routes(state.clone())).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let udp_port = udp.local_addr().unwrap().port();
        actix_web::rt::spawn(serve_udp(udp, state.clone()));

        let uri =
            format!("/dial?host=127.0.0.1&port={}&request=hostname&tries=2", http.addr().port());
        let (status, body) = get(&state, &uri).await;
        assert_eq!(status, StatusCode::OK);
        let reply: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(reply, serde_json::json!({"responses": ["mypod", "mypod"]}));

        let uri = format!("/dial?host=127.0.0.1&port={udp_port}&request=echo%20Hi&protocol=udp");
        let reply: serde_json::Value = serde_json::from_str(&get(&state, &uri).await.1).unwrap();
        assert_eq!(reply, serde_json::json!({"responses": ["hi"]}));

        // Nothing listens on a just-freed port: an error, still a 200 answer.
        let uri = format!("/dial?host=127.0.0.1&port={}&request=x", free_tcp_port());
        let reply: serde_json::Value = serde_json::from_str(&get(&state, &uri).await.1).unwrap();
        assert_eq!(reply["errors"].as_array().map(Vec::len), Some(1), "{reply}");
        http.stop().await;
    }

    fn free_tcp_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
    }

    #[test]
    fn udp_commands() {
        let peer: SocketAddr = "127.0.0.2:5000".parse().unwrap();
        assert_eq!(udp_reply("hostname\n", "p", peer).as_deref(), Some("p"));
        assert_eq!(udp_reply("HOSTNAME", "p", peer).as_deref(), Some("p"));
        assert_eq!(udp_reply("clientip", "p", peer).as_deref(), Some("127.0.0.2:5000"));
        assert_eq!(udp_reply("echo Hello World", "p", peer).as_deref(), Some("hello world"));
        assert_eq!(udp_reply("nonsense", "p", peer), None);
    }

    #[test]
    fn header_names_are_canonical() {
        assert_eq!(canonical_header_name("x-forwarded-for"), "X-Forwarded-For");
        assert_eq!(canonical_header_name("HOST"), "Host");
    }
}
