//! One forwarding listener: accepts TCP connections on its address and joins each to one of
//! its backends, trying them round robin (the next connection starts one further along) until
//! one answers. A connection no backend takes is closed. Dropping the forwarder closes its
//! listener; connections already joined run on to their end.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// How long connecting to one backend may take before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The pause after a failed accept (out of file descriptors), so the loop does not spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The addresses a listener forwards to, shared with the actor that keeps them current.
#[derive(Debug, Clone, Default)]
pub struct Backends(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    addrs: RwLock<Arc<[SocketAddr]>>,
    next: AtomicUsize,
}

impl Backends {
    pub fn new(addrs: Vec<SocketAddr>) -> Self {
        let backends = Backends::default();
        backends.set(addrs);
        backends
    }

    /// Replaces the addresses (connections under way keep theirs).
    pub fn set(&self, addrs: Vec<SocketAddr>) {
        let mut current = self.0.addrs.write().expect("backends lock");
        if **current != *addrs {
            *current = addrs.into();
        }
    }

    pub fn current(&self) -> Arc<[SocketAddr]> {
        self.0.addrs.read().expect("backends lock").clone()
    }

    /// The order one connection tries the backends in: each connection starts one further
    /// along than the one before.
    fn turn(&self) -> Vec<SocketAddr> {
        let addrs = self.current();
        if addrs.is_empty() {
            return Vec::new();
        }
        let start = self.0.next.fetch_add(1, Ordering::Relaxed) % addrs.len();
        addrs[start..].iter().chain(&addrs[..start]).copied().collect()
    }
}

/// A bound listener forwarding to its backends until dropped.
#[derive(Debug)]
pub struct Forwarder {
    local: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    /// Binds `addr` and forwards what it accepts to `backends`, on the calling thread's tokio
    /// runtime (an actor's arbiter).
    pub fn bind(addr: SocketAddr, backends: Backends) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let local = listener.local_addr()?;
        let accepting =
            tokio::spawn(accept_each(listener, move |client| forward(client, backends.turn())));
        Ok(Forwarder { local, accepting })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Accepts connections on `listener` until dropped, each handled by `handle` in a task of its
/// own.
pub(super) async fn accept_each<F, Handled>(listener: TcpListener, handle: F)
where
    F: Fn(TcpStream) -> Handled,
    Handled: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                tokio::spawn(handle(client));
            }
            Err(error) => {
                tracing::warn!(addr = ?listener.local_addr().ok(), %error, "accepting a connection");
                tokio::time::sleep(ACCEPT_PAUSE).await;
            }
        }
    }
}

/// Joins `client` to the first of `order` that answers, until either side is done.
async fn forward(mut client: TcpStream, order: Vec<SocketAddr>) {
    for backend in order {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(backend)).await {
            Ok(Ok(mut upstream)) => {
                let _ = client.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                return;
            }
            Ok(Err(error)) => tracing::debug!(%backend, %error, "backend refused; trying the next"),
            Err(_) => tracing::debug!(%backend, "backend did not answer; trying the next"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A backend that answers every connection with `name` and closes it.
    async fn named_backend(name: &'static str) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(name.as_bytes()).await;
            }
        });
        addr
    }

    async fn read_all(addr: SocketAddr) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    }

    /// A port on which nothing listens.
    fn closed_port() -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    }

    #[tokio::test]
    async fn connections_take_turns_and_skip_backends_that_refuse() {
        let a = named_backend("a").await;
        let b = named_backend("b").await;
        let backends = Backends::new(vec![a, closed_port(), b]);
        let forwarder = Forwarder::bind("127.0.0.1:0".parse().unwrap(), backends.clone()).unwrap();
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(read_all(forwarder.local_addr()).await);
        }
        // The second connection starts at the closed port and goes on to b.
        assert_eq!(seen, ["a", "b", "b"]);

        backends.set(vec![a]);
        assert_eq!(read_all(forwarder.local_addr()).await, "a");
    }

    #[tokio::test]
    async fn without_backends_a_connection_is_closed_and_a_dropped_forwarder_stops_listening() {
        let forwarder =
            Forwarder::bind("127.0.0.1:0".parse().unwrap(), Backends::default()).unwrap();
        let addr = forwarder.local_addr();
        assert_eq!(read_all(addr).await, "");
        drop(forwarder);
        let refused = async {
            loop {
                if TcpStream::connect(addr).await.is_err() {
                    return;
                }
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), refused).await.expect("listener closed");
    }

    #[tokio::test]
    async fn bytes_flow_both_ways() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let echo = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let (mut read, mut write) = stream.split();
            tokio::io::copy(&mut read, &mut write).await.unwrap();
        });
        let forwarder =
            Forwarder::bind("127.0.0.1:0".parse().unwrap(), Backends::new(vec![echo])).unwrap();
        let mut stream = TcpStream::connect(forwarder.local_addr()).await.unwrap();
        stream.write_all(b"ping").await.unwrap();
        stream.shutdown().await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"ping");
    }
}
