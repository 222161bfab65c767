//! Whether the client of a long answer is still there. actix-web learns that a client has
//! gone only when it next writes to it, so a watch of a quiet resource, or a followed log of a
//! silent container, would hold its connection (and what feeds it) until something happens.
//! Go's HTTP server, which Kubernetes' clients expect, ends such a request as soon as its
//! client closes: so do the streams wrapped here, which look at their connection every few
//! seconds and end once its client has closed it (or shut down its side of it). How long an
//! idle connection is kept is here too.

use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;

/// How long an idle keep-alive connection is kept open: 90 s, as kube-apiserver keeps them
/// (Go's `http.DefaultTransport` keeps its idle ones as long; actix's default, 5 s, had
/// clients reusing a connection after a pause find it closed).
pub const IDLE_KEEP_ALIVE: Duration = Duration::from_secs(90);

/// How long a new connection has to send its first request's head: kube-apiserver's
/// `ReadHeaderTimeout`, 32 s.
pub const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(32);

/// TLS handshakes a worker has under way at most (each failing after 3 s): more than the
/// process's open files allow, so that the cap never stops the accepting.
pub const MAX_HANDSHAKES: usize = 65_536;

/// How often a stream looks at its connection.
const LOOK_EVERY: Duration = Duration::from_secs(5);

/// The socket of a request's connection (a duplicate of its descriptor, so that it stays open
/// as long as a stream looks at it), noted when it is accepted (`on_connect`).
#[derive(Clone, Debug)]
pub struct ConnectionSocket(Arc<OwnedFd>);

/// Notes the socket of an accepted connection (plain or TLS) in its data, for [`until_gone`].
pub fn note_socket(connection: &dyn std::any::Any, data: &mut actix_web::dev::Extensions) {
    type Tcp = actix_web::rt::net::TcpStream;
    type Tls = actix_tls::accept::rustls_0_23::TlsStream<Tcp>;
    let fd = match (connection.downcast_ref::<Tcp>(), connection.downcast_ref::<Tls>()) {
        (Some(tcp), _) => tcp.as_fd().try_clone_to_owned(),
        (None, Some(tls)) => tls.get_ref().0.as_fd().try_clone_to_owned(),
        (None, None) => return,
    };
    // Out of descriptors: its streams end only when written to, as before.
    if let Ok(fd) = fd {
        data.insert(ConnectionSocket(Arc::new(fd)));
    }
}

/// Whether the client has closed the connection (or its side of it), or it failed.
fn gone(socket: &ConnectionSocket) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(&*socket.0, PollFlags::RDHUP)];
    let zero = rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 };
    match poll(&mut fds, Some(&zero)) {
        Ok(0) => false,
        Ok(_) => fds[0].revents().intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR),
        Err(_) => false,
    }
}

/// `stream`, ended once the client of `request`'s connection has gone.
pub fn until_gone<S>(request: &actix_web::HttpRequest, stream: S) -> UntilGone<S> {
    let socket = request.conn_data::<ConnectionSocket>().cloned();
    let start = tokio::time::Instant::now() + LOOK_EVERY;
    let look = socket.as_ref().map(|_| tokio::time::interval_at(start, LOOK_EVERY));
    UntilGone { stream: Box::pin(stream), socket, look }
}

/// A stream that ends when its client goes (see [`until_gone`]).
pub struct UntilGone<S> {
    stream: Pin<Box<S>>,
    socket: Option<ConnectionSocket>,
    look: Option<tokio::time::Interval>,
}

impl<S: Stream> Stream for UntilGone<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = &mut *self;
        if let (Some(look), Some(socket)) = (this.look.as_mut(), this.socket.as_ref()) {
            while look.poll_tick(cx).is_ready() {
                if gone(socket) {
                    return Poll::Ready(None);
                }
            }
        }
        self.stream.as_mut().poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_closed_or_half_closed_connection_is_gone() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let socket = ConnectionSocket(Arc::new(server.as_fd().try_clone_to_owned().unwrap()));
        assert!(!gone(&socket));
        // Bytes waiting to be read are no sign of leaving.
        client.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        assert!(!gone(&socket));
        client.shutdown(std::net::Shutdown::Write).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !gone(&socket) {
            assert!(std::time::Instant::now() < deadline, "the half-close is seen");
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(client);
        assert!(gone(&socket));
    }
}
