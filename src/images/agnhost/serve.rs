//! What every agnhost server shares: how it ends (SIGTERM, SIGINT, or an exit code asked for by
//! a handler such as `/exit`), how its HTTP listener is started and stopped, and query
//! parameters read the way Go's `FormValue` reads them.

use std::net::SocketAddr;

use actix_web::dev::ServerHandle;
use actix_web::http::header::ContentType;
use actix_web::http::{ConnectionType, StatusCode};
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::mpsc;

use crate::images::ImageError;

/// Seconds in-flight requests get to finish once a server is told to stop.
const SHUTDOWN_GRACE_SECS: u64 = 2;

/// Why a server stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// SIGTERM or SIGINT (its number): exit 0.
    Signal(u8),
    /// A handler asked to exit with this code.
    Exit(u8),
}

impl Stop {
    /// The process exit code this stop calls for.
    pub fn exit_code(self) -> u8 {
        match self {
            Stop::Signal(_) => 0,
            Stop::Exit(code) => code,
        }
    }

    /// The exit code of a process that handles no signal: one the signal ended (128 + its
    /// number, as a shell and the kubelet report it).
    pub fn unhandled_exit_code(self) -> u8 {
        match self {
            Stop::Signal(signal) => 128 + signal,
            Stop::Exit(code) => code,
        }
    }
}

/// Lets handlers end the process with an exit code once their answer is sent.
#[derive(Debug, Clone)]
pub(crate) struct ExitRequests(mpsc::UnboundedSender<u8>);

impl ExitRequests {
    /// A sender and the receiving end that learns the requested codes.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<u8>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ExitRequests(tx), rx)
    }

    /// Asks the process to stop and exit with `code`; the first request wins.
    pub fn request(&self, code: u8) {
        // Only fails once the process is already stopping.
        let _ = self.0.send(code);
    }
}

/// Waits for the first reason to stop. Created before anything is served: from then on SIGTERM
/// and SIGINT no longer kill the process but end up here.
pub(crate) struct Lifecycle {
    term: Signal,
    int: Signal,
    exits: ExitRequests,
    requests: mpsc::UnboundedReceiver<u8>,
}

impl Lifecycle {
    /// Installs the signal handlers; must run inside the runtime.
    pub fn new() -> Result<Self, ImageError> {
        let term = signal(SignalKind::terminate()).map_err(ImageError::Signals)?;
        let int = signal(SignalKind::interrupt()).map_err(ImageError::Signals)?;
        let (exits, requests) = ExitRequests::channel();
        Ok(Lifecycle { term, int, exits, requests })
    }

    /// A handle for handlers that end the process.
    pub fn exit_requests(&self) -> ExitRequests {
        self.exits.clone()
    }

    /// Resolves at the first signal or exit request.
    pub async fn stopped(&mut self) -> Stop {
        tokio::select! {
            _ = self.term.recv() => Stop::Signal(15),
            _ = self.int.recv() => Stop::Signal(2),
            Some(code) = self.requests.recv() => Stop::Exit(code),
        }
    }
}

/// An HTTP server running on the current actix system.
pub(crate) struct HttpListener {
    addr: SocketAddr,
    handle: ServerHandle,
    task: actix_web::rt::task::JoinHandle<std::io::Result<()>>,
}

impl HttpListener {
    /// Binds `addr` and serves the routes `configure` adds, on one worker thread (a test pod
    /// needs no more, and a machine runs many of them).
    pub fn start<C>(addr: SocketAddr, configure: C) -> Result<Self, ImageError>
    where
        C: Fn(&mut web::ServiceConfig) + Send + Clone + 'static,
    {
        let server = HttpServer::new(move || App::new().configure(configure.clone()))
            .workers(1)
            .disable_signals()
            .shutdown_timeout(SHUTDOWN_GRACE_SECS)
            .bind(addr)
            .map_err(|source| ImageError::Listen { addr, source })?;
        // Port 0 becomes the port the kernel picked.
        let addr = server.addrs().first().copied().unwrap_or(addr);
        let server = server.run();
        let handle = server.handle();
        let task = actix_web::rt::spawn(server);
        Ok(HttpListener { addr, handle, task })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets in-flight requests finish (bounded by the grace period), returns
    /// once the listener is closed.
    pub async fn stop(self) {
        self.handle.stop(true).await;
        // The server's own error is of no use any more: the process is ending.
        let _ = self.task.await;
    }
}

/// A plain-text answer, as Go's `fmt.Fprint` into a `ResponseWriter` gives.
pub(crate) fn text(status: StatusCode, body: impl Into<String>) -> HttpResponse {
    HttpResponse::build(status).insert_header(ContentType::plaintext()).body(body.into())
}

/// `response` with `Connection: close`: the client's connection ends after it.
pub(crate) fn closing(mut response: HttpResponse) -> HttpResponse {
    response.head_mut().set_connection_type(ConnectionType::Close);
    response
}

/// The first value of query parameter `key`; empty counts as absent, as in Go's `FormValue`.
pub(crate) fn query_param(req: &HttpRequest, key: &str) -> Option<String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(req.query_string())
        .ok()?
        .into_iter()
        .find(|(k, v)| k == key && !v.is_empty())
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    #[test]
    fn query_param_takes_the_first_non_empty_value() {
        let req = TestRequest::with_uri("/echo?msg=a%20b&msg=c&code=").to_http_request();
        assert_eq!(query_param(&req, "msg").as_deref(), Some("a b"));
        assert_eq!(query_param(&req, "code"), None);
        assert_eq!(query_param(&req, "missing"), None);
    }

    #[test]
    fn exit_requests_carry_their_code() {
        let (exits, mut requests) = ExitRequests::channel();
        exits.request(7);
        assert_eq!(requests.try_recv().ok(), Some(7));
        assert_eq!(Stop::Exit(7).exit_code(), 7);
        assert_eq!(Stop::Signal(15).exit_code(), 0);
        assert_eq!(Stop::Signal(15).unhandled_exit_code(), 143);
        assert_eq!(Stop::Exit(7).unhandled_exit_code(), 7);
    }
}
