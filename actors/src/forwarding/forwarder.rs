//! One forwarding listener: accepts TCP connections on its address and joins each to one of
//! its backends, trying them round robin (the next connection starts one further along) until
//! one answers; with client IP affinity, a client goes back to the backend it last reached
//! while that is recent. A connection no backend takes is closed, as is one from outside the
//! source ranges a load balancer admits. A client at a loopback address other than 127.0.0.1
//! reaches a loopback backend from its own address, so the backend sees who it is, as
//! kube-proxy keeps a pod's address on its way to a service's endpoints. Dropping the
//! forwarder closes its listener; connections already joined run on to their end.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpSocket, TcpStream};

use crate::model::cidr::{self, Ipv4Cidr};

/// How long connecting to one backend may take before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The pause after a failed accept (out of file descriptors), so the loop does not spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// How many clients' affinities are kept before the expired ones are dropped.
const AFFINITIES_KEPT: usize = 4096;

/// Where a listener's connections go: to `all`, except that a client on another machine goes
/// to `from_outside` when there is such a list (a service that keeps outside traffic on the
/// node it reaches, as kube-proxy sends only traffic that does not start on the node itself
/// to the node's own endpoints); with an `affinity`, a client's connections go to the backend
/// its last one reached while that was no longer ago than the affinity (a service's
/// `sessionAffinity: ClientIP`); with `sources`, only clients in those ranges are taken (a load
/// balancer's `loadBalancerSourceRanges`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    pub all: Vec<SocketAddr>,
    pub from_outside: Option<Vec<SocketAddr>>,
    pub affinity: Option<Duration>,
    pub sources: Option<Vec<Ipv4Cidr>>,
}

impl From<Vec<SocketAddr>> for Targets {
    fn from(all: Vec<SocketAddr>) -> Self {
        Self { all, ..Self::default() }
    }
}

impl Targets {
    /// These targets with client IP affinity for `affinity`, if any.
    pub fn with_affinity(self, affinity: Option<Duration>) -> Self {
        Self { affinity, ..self }
    }

    /// These targets for clients in `sources` alone, if given.
    pub fn with_sources(self, sources: Option<Vec<Ipv4Cidr>>) -> Self {
        Self { sources, ..self }
    }
}

/// The addresses a listener forwards to, shared with the actor that keeps them current.
#[derive(Debug, Clone, Default)]
pub struct Backends(Arc<Shared>);

/// A list of backends, shared with the connections reading it.
type Addrs = Arc<[SocketAddr]>;

#[derive(Debug, Default)]
struct Shared {
    /// `Targets`, as they are read for each connection.
    addrs: RwLock<Current>,
    next: AtomicUsize,
    affinity: Mutex<Affinity>,
}

/// The backends for clients on this machine, those for clients on others (when different),
/// and the ranges clients must come from (when limited).
#[derive(Debug, Default)]
struct Current {
    all: Addrs,
    from_outside: Option<Addrs>,
    sources: Option<Arc<[Ipv4Cidr]>>,
}

/// Which backend each client last reached, and when, while affinity is asked for.
#[derive(Debug, Default)]
struct Affinity {
    timeout: Option<Duration>,
    reached: HashMap<IpAddr, (SocketAddr, Instant)>,
}

impl Backends {
    pub fn new(targets: impl Into<Targets>) -> Self {
        let backends = Backends::default();
        backends.set(targets);
        backends
    }

    /// Replaces the addresses (connections under way keep theirs).
    pub fn set(&self, targets: impl Into<Targets>) {
        let Targets { all, from_outside, affinity, sources } = targets.into();
        let mut current = self.0.addrs.write().expect("backends lock");
        if *current.all != *all {
            current.all = all.into();
        }
        if current.from_outside.as_deref() != from_outside.as_deref() {
            current.from_outside = from_outside.map(Into::into);
        }
        if current.sources.as_deref() != sources.as_deref() {
            current.sources = sources.map(Into::into);
        }
        let mut sticky = self.0.affinity.lock().expect("affinity lock");
        if sticky.timeout != affinity {
            *sticky = Affinity { timeout: affinity, reached: HashMap::new() };
        }
    }

    /// The addresses for a client at `client` on this machine (`outside`: on another one):
    /// none when it is outside the source ranges.
    fn current(&self, outside: bool, client: IpAddr) -> Addrs {
        let current = self.0.addrs.read().expect("backends lock");
        let admitted = current.sources.as_deref().is_none_or(|ranges| match client {
            IpAddr::V4(ip) => ranges.iter().any(|range| cidr::contains(*range, ip)),
            IpAddr::V6(_) => false,
        });
        match &current.from_outside {
            _ if !admitted => Addrs::from([]),
            Some(from_outside) if outside => from_outside.clone(),
            _ => current.all.clone(),
        }
    }

    /// The order a connection from `client` tries the backends in: each connection starts
    /// one further along than the one before, but for the backend the client keeps to, which
    /// comes first. None for a client outside the source ranges.
    fn turn(&self, outside: bool, client: IpAddr) -> Vec<SocketAddr> {
        let addrs = self.current(outside, client);
        if addrs.is_empty() {
            return Vec::new();
        }
        let start = self.0.next.fetch_add(1, Ordering::Relaxed) % addrs.len();
        let mut order: Vec<SocketAddr> =
            addrs[start..].iter().chain(&addrs[..start]).copied().collect();
        if let Some(kept) = self.kept(client).and_then(|k| order.iter().position(|a| *a == k)) {
            order[..=kept].rotate_right(1);
        }
        order
    }

    /// The backend `client` keeps to, while affinity is asked for and its last connection is
    /// recent enough.
    fn kept(&self, client: IpAddr) -> Option<SocketAddr> {
        let sticky = self.0.affinity.lock().expect("affinity lock");
        let timeout = sticky.timeout?;
        let (backend, at) = sticky.reached.get(&client)?;
        (at.elapsed() <= timeout).then_some(*backend)
    }

    /// Notes that `client` reached `backend` now, while affinity is asked for.
    fn reached(&self, client: IpAddr, backend: SocketAddr) {
        let mut sticky = self.0.affinity.lock().expect("affinity lock");
        let Some(timeout) = sticky.timeout else { return };
        if sticky.reached.len() >= AFFINITIES_KEPT {
            sticky.reached.retain(|_, (_, at)| at.elapsed() <= timeout);
        }
        sticky.reached.insert(client, (backend, Instant::now()));
    }
}

/// Whether a connection's client is on another machine.
fn from_outside(client: &TcpStream) -> bool {
    match (client.peer_addr(), client.local_addr()) {
        (Ok(peer), Ok(local)) => is_outside(peer.ip(), local.ip()),
        _ => false,
    }
}

/// Whether a client at `peer` that reached `local` is on another machine: not at a loopback
/// address, nor at the address it reached (a machine reaching one of its own addresses comes
/// from it).
fn is_outside(peer: IpAddr, local: IpAddr) -> bool {
    !peer.is_loopback() && peer != local
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
        let (local, accepting) = serve(addr, move |client| {
            let peer = client.peer_addr().map(|p| p.ip()).unwrap_or(IpAddr::from([0, 0, 0, 0]));
            let order = backends.turn(from_outside(&client), peer);
            let backends = backends.clone();
            forward(client, order, move |backend| backends.reached(peer, backend))
        })?;
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

/// Binds `addr` and accepts its connections, on the calling thread's tokio runtime (an
/// actor's arbiter), each handled by `handle` in a task of its own until the returned task is
/// aborted. Returns the address bound.
pub(super) fn serve<F, Handled>(
    addr: SocketAddr,
    handle: F,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)>
where
    F: Fn(TcpStream) -> Handled + Send + 'static,
    Handled: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let local = listener.local_addr()?;
    Ok((local, tokio::spawn(accept_each(listener, handle))))
}

async fn accept_each<F, Handled>(listener: TcpListener, handle: F)
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

/// Joins `client` to the first of `order` that answers (told to `joined`), until either side
/// is done.
async fn forward(mut client: TcpStream, order: Vec<SocketAddr>, joined: impl FnOnce(SocketAddr)) {
    let from = client.peer_addr().ok().map(|peer| peer.ip());
    for backend in order {
        match tokio::time::timeout(CONNECT_TIMEOUT, connect(backend, from)).await {
            Ok(Ok(mut upstream)) => {
                joined(backend);
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

/// Connects to `backend`, from `client`'s address when both are loopback addresses and the
/// client's is not 127.0.0.1, the one a loopback connection comes from unless bound (so that
/// the backend sees the client's address; binding to it first costs a port of its own, which
/// the usual case does without).
async fn connect(backend: SocketAddr, client: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let own_address = match client {
        Some(IpAddr::V4(ip)) if ip.is_loopback() && ip != Ipv4Addr::LOCALHOST => Some(ip),
        _ => None,
    };
    if let Some(ip) = own_address.filter(|_| backend.ip().is_loopback() && backend.is_ipv4()) {
        let socket = TcpSocket::new_v4()?;
        if socket.bind(SocketAddr::new(ip.into(), 0)).is_ok() {
            return socket.connect(backend).await;
        }
    }
    TcpStream::connect(backend).await
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

    #[test]
    fn a_client_is_outside_unless_at_loopback_or_the_address_it_reached() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        assert!(is_outside(ip("10.1.2.3"), ip("10.1.2.4")));
        assert!(!is_outside(ip("127.0.0.1"), ip("127.0.0.53")));
        assert!(!is_outside(ip("10.1.2.4"), ip("10.1.2.4")));
        assert!(!is_outside(ip("::1"), ip("10.1.2.4")));
    }

    #[test]
    fn clients_from_outside_take_turns_over_their_own_list_when_there_is_one() {
        let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let backends = Backends::new(Targets {
            all: vec![addr(1), addr(2)],
            from_outside: Some(vec![addr(2)]),
            ..Targets::default()
        });
        assert_eq!(backends.turn(true, client()), vec![addr(2)]);
        let inside = [backends.turn(false, client()), backends.turn(false, client())];
        assert!(inside.iter().all(|order| order.len() == 2), "{inside:?}");
        // None to send an outside client to: it is closed, not sent elsewhere.
        backends.set(Targets {
            all: vec![addr(1)],
            from_outside: Some(Vec::new()),
            ..Targets::default()
        });
        assert_eq!(backends.turn(true, client()), Vec::new());
        backends.set(vec![addr(1)]);
        assert_eq!(backends.turn(true, client()), vec![addr(1)]);
    }

    fn client() -> IpAddr {
        IpAddr::from([127, 0, 0, 9])
    }

    #[test]
    fn clients_outside_the_source_ranges_get_no_backend() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        let ranges = |texts: &[&str]| Some(texts.iter().filter_map(|t| cidr::parse(t)).collect());
        let backends =
            Backends::new(Targets::from(vec![addr]).with_sources(ranges(&["10.0.0.0/8"])));
        assert_eq!(backends.turn(false, client()), Vec::new());
        assert_eq!(backends.turn(true, IpAddr::from([10, 1, 2, 3])), vec![addr]);
        assert_eq!(backends.turn(true, "fd00::1".parse().unwrap()), Vec::new());
        backends.set(Targets::from(vec![addr]).with_sources(ranges(&["127.0.0.0/24"])));
        assert_eq!(backends.turn(false, client()), vec![addr]);
        backends.set(vec![addr]);
        assert_eq!(backends.turn(true, "fd00::1".parse().unwrap()), vec![addr]);
    }

    #[tokio::test]
    async fn a_loopback_client_reaches_the_backend_from_its_own_address() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let backend = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, peer)) = listener.accept().await {
                let _ = stream.write_all(peer.ip().to_string().as_bytes()).await;
            }
        });
        let forwarder =
            Forwarder::bind("127.0.0.1:0".parse().unwrap(), Backends::new(vec![backend])).unwrap();
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.77:0".parse().unwrap()).unwrap();
        let mut stream = socket.connect(forwarder.local_addr()).await.unwrap();
        let mut seen = String::new();
        stream.read_to_string(&mut seen).await.unwrap();
        assert_eq!(seen, "127.0.0.77");
        assert_eq!(read_all(forwarder.local_addr()).await, "127.0.0.1");
    }

    #[tokio::test]
    async fn with_affinity_a_client_keeps_to_the_backend_it_reached() {
        let a = named_backend("a").await;
        let b = named_backend("b").await;
        let hour = Some(Duration::from_secs(3600));
        let backends = Backends::new(Targets::from(vec![a, b]).with_affinity(hour));
        let forwarder = Forwarder::bind("127.0.0.1:0".parse().unwrap(), backends.clone()).unwrap();
        let first = read_all(forwarder.local_addr()).await;
        for _ in 0..4 {
            assert_eq!(read_all(forwarder.local_addr()).await, first);
        }
        // Another client still takes turns; a backend that went away is not kept to.
        let other = IpAddr::from([127, 0, 0, 10]);
        let turns = [backends.turn(false, other), backends.turn(false, other)];
        assert_ne!(turns[0][0], turns[1][0], "{turns:?}");
        let kept = if first == "a" { a } else { b };
        let left = if first == "a" { b } else { a };
        backends.set(Targets::from(vec![left]).with_affinity(hour));
        assert_eq!(backends.turn(false, IpAddr::from([127, 0, 0, 1])), vec![left]);
        // An expired affinity, or none asked for any more, leaves the turns alone.
        backends.set(Targets::from(vec![kept, left]).with_affinity(Some(Duration::ZERO)));
        backends.reached(client(), left);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(backends.kept(client()), None);
        backends.set(vec![kept, left]);
        backends.reached(client(), left);
        assert_eq!(backends.kept(client()), None);
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
