//! Health check node ports, as kube-proxy serves them: a `LoadBalancer` service with
//! `externalTrafficPolicy: Local` has a `healthCheckNodePort`, where every node answers an HTTP
//! request with how many of the service's ready endpoints run on it: 200 when some do, 503 when
//! none does, so that a load balancer sends traffic only to nodes that keep it. The answer is
//! JSON (`service`, `localEndpoints`, `serviceProxyHealthy`), with the count also in the
//! `X-Load-Balancing-Endpoint-Weight` header.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::forwarder::serve;
use super::BindFailure;
use crate::client::cache::Key;

/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a request read before answering (a health check's request is a line or two).
const MOST_READ: usize = 8 * 1024;

/// What one health check port answers about its service.
#[derive(Debug)]
struct Health {
    service: Key,
    local_endpoints: AtomicUsize,
}

/// One service's bound health check port, answering until dropped.
#[derive(Debug)]
pub struct HealthCheckServer {
    health: Arc<Health>,
    local: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl HealthCheckServer {
    /// Binds `addr` and answers for `service` there, on the calling thread's tokio runtime.
    pub fn bind(addr: SocketAddr, service: Key, local_endpoints: usize) -> std::io::Result<Self> {
        let health =
            Arc::new(Health { service, local_endpoints: AtomicUsize::new(local_endpoints) });
        let answering = health.clone();
        let (local, accepting) = serve(addr, move |client| answer(client, answering.clone()))?;
        Ok(Self { health, local, accepting })
    }

    pub fn set_local_endpoints(&self, count: usize) {
        self.health.local_endpoints.store(count, Ordering::Relaxed);
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for HealthCheckServer {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Reads the request's head (whatever it asks: every path is the health check) and answers.
async fn answer(mut client: TcpStream, health: Arc<Health>) {
    let mut request = Vec::new();
    let head_read = async {
        let mut chunk = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MOST_READ {
            match client.read(&mut chunk).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => request.extend_from_slice(&chunk[..n]),
            }
        }
        true
    };
    if tokio::time::timeout(READ_TIMEOUT, head_read).await != Ok(true) {
        return;
    }
    let count = health.local_endpoints.load(Ordering::Relaxed);
    let _ = client.write_all(&response(&health.service, count)).await;
    let _ = client.shutdown().await;
}

/// The HTTP response for a service with `count` local endpoints: its body laid out as
/// kube-proxy writes it (indented by tabs, the service first).
fn response((namespace, name): &Key, count: usize) -> Vec<u8> {
    let quoted = |text: &str| json!(text).to_string();
    let body = format!(
        "{{\n\t\"service\": {{\n\t\t\"namespace\": {},\n\t\t\"name\": {}\n\t}},\n\t\
         \"localEndpoints\": {count},\n\t\"serviceProxyHealthy\": true\n}}",
        quoted(namespace),
        quoted(name)
    );
    let status = if count > 0 { "200 OK" } else { "503 Service Unavailable" };
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nX-Content-Type-Options: \
         nosniff\r\nX-Load-Balancing-Endpoint-Weight: {count}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

struct Wanted {
    addr: SocketAddr,
    local_endpoints: usize,
    /// The error binding gave, while the address could not be bound.
    server: Result<HealthCheckServer, String>,
}

/// The health check ports an actor wants, by service, bound or not.
#[derive(Default)]
pub struct HealthChecks {
    wanted: BTreeMap<Key, Wanted>,
}

impl HealthChecks {
    /// Makes `service`'s health check port `desired` (its address and local endpoint count),
    /// or closes it. Returns the failure when a new address cannot be bound.
    pub fn set(
        &mut self,
        service: &Key,
        desired: Option<(SocketAddr, usize)>,
    ) -> Option<BindFailure> {
        let Some((addr, local_endpoints)) = desired else {
            self.wanted.remove(service);
            return None;
        };
        if let Some(wanted) = self.wanted.get_mut(service).filter(|w| w.addr == addr) {
            wanted.local_endpoints = local_endpoints;
            if let Ok(server) = &wanted.server {
                server.set_local_endpoints(local_endpoints);
            }
            return None;
        }
        // Closed before the new one is bound: a service may move to a port it held.
        self.wanted.remove(service);
        let server = HealthCheckServer::bind(addr, service.clone(), local_endpoints)
            .map_err(|e| e.to_string());
        let failure = server.as_ref().err().map(|error| BindFailure {
            service: service.clone(),
            addr,
            error: error.clone(),
        });
        self.wanted.insert(service.clone(), Wanted { addr, local_endpoints, server });
        failure
    }

    /// Tries again to bind the ports that could not be; returns the services now served.
    pub fn retry(&mut self) -> Vec<Key> {
        let mut bound = Vec::new();
        for (service, wanted) in self.wanted.iter_mut().filter(|(_, w)| w.server.is_err()) {
            if let Ok(server) =
                HealthCheckServer::bind(wanted.addr, service.clone(), wanted.local_endpoints)
            {
                wanted.server = Ok(server);
                bound.push(service.clone());
            }
        }
        bound
    }

    pub fn clear(&mut self) {
        self.wanted.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: SocketAddr) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: lb\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    }

    fn body(answer: &str) -> serde_json::Value {
        serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap()
    }

    #[tokio::test]
    async fn a_node_is_healthy_for_a_service_while_it_has_local_endpoints() {
        let key = ("shop".to_string(), "web".to_string());
        let mut checks = HealthChecks::default();
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server = HealthCheckServer::bind(addr, key.clone(), 2).unwrap();
        let answer = get(server.local_addr()).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(
            answer.ends_with(
                "\r\n\r\n{\n\t\"service\": {\n\t\t\"namespace\": \"shop\",\n\t\t\"name\": \
                 \"web\"\n\t},\n\t\"localEndpoints\": 2,\n\t\"serviceProxyHealthy\": true\n}"
            ),
            "{answer}"
        );
        assert!(answer.contains("X-Load-Balancing-Endpoint-Weight: 2\r\n"), "{answer}");
        assert_eq!(
            body(&answer),
            json!({"service": {"namespace": "shop", "name": "web"}, "localEndpoints": 2,
                "serviceProxyHealthy": true})
        );
        server.set_local_endpoints(0);
        let answer = get(server.local_addr()).await;
        assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{answer}");
        assert_eq!(body(&answer)["localEndpoints"], 0);

        // Kept by service: a new count keeps the socket; no port closes it.
        let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        assert!(checks.set(&key, Some((addr, 1))).is_none());
        assert!(get(addr).await.starts_with("HTTP/1.1 200 OK"));
        assert!(checks.set(&key, Some((addr, 0))).is_none());
        assert!(get(addr).await.starts_with("HTTP/1.1 503"));
        assert!(checks.set(&key, None).is_none());
        let closed = async {
            while TcpStream::connect(addr).await.is_ok() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), closed).await.expect("port closed");
    }

    #[tokio::test]
    async fn a_port_taken_elsewhere_is_reported_and_bound_once_free() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let key = ("default".to_string(), "lb".to_string());
        let mut checks = HealthChecks::default();
        let failure = checks.set(&key, Some((addr, 1))).expect("the port is taken");
        assert_eq!((failure.service, failure.addr), (key.clone(), addr));
        assert!(checks.retry().is_empty());
        drop(taken);
        assert_eq!(checks.retry(), vec![key]);
        assert!(get(addr).await.starts_with("HTTP/1.1 200 OK"));
    }
}
