//! `agnhost serve-hostname`: answers every HTTP request (or raw TCP connection, or UDP datagram)
//! with the pod name. Service tests count the distinct names to see load spreading.
//!
//! Unlike agnhost, it exits at once on SIGTERM instead of sleeping 60 seconds first.

use std::net::SocketAddr;

use actix_web::http::StatusCode;
use actix_web::web;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, UdpSocket};

use super::serve::{closing, text, HttpListener, Lifecycle};
use crate::images::pod::PodEnv;
use crate::images::ImageError;

/// Flags of `agnhost serve-hostname`; booleans take `--flag`, `--flag=true` or `--flag=false`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Port to listen on (HTTP, TCP and UDP alike).
    #[arg(long, default_value_t = 9376)]
    port: u16,
    /// Serve HTTP; cannot be combined with --tcp or --udp.
    #[arg(
        long,
        default_value_t = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    http: bool,
    /// Serve raw TCP: write the name, close the connection.
    #[arg(
        long,
        default_value_t = false,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    tcp: bool,
    /// Serve UDP: answer every datagram with the name.
    #[arg(
        long,
        default_value_t = false,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    udp: bool,
    /// Close the HTTP connection after each answer.
    #[arg(
        long,
        visible_alias = "close-connection",
        default_value_t = false,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    close: bool,
}

/// Serves until SIGTERM/SIGINT, then exits 0.
pub(crate) async fn run(args: Args, pod: PodEnv) -> Result<u8, ImageError> {
    if args.http && (args.tcp || args.udp) {
        return Err(ImageError::Usage(
            "serve-hostname cannot serve HTTP and TCP/UDP at once: add --http=false",
        ));
    }
    let mut life = Lifecycle::new()?;
    let addr = SocketAddr::new(pod.ip, args.port);
    let listen_error = |source| ImageError::Listen { addr, source };
    if args.tcp {
        let listener = TcpListener::bind(addr).await.map_err(listen_error)?;
        actix_web::rt::spawn(serve_tcp(listener, pod.name.clone()));
        eprintln!("serve-hostname: serving TCP on {addr}");
    }
    if args.udp {
        let socket = UdpSocket::bind(addr).await.map_err(listen_error)?;
        actix_web::rt::spawn(serve_udp(socket, pod.name.clone()));
        eprintln!("serve-hostname: serving UDP on {addr}");
    }
    let http = if args.http {
        let listener = HttpListener::start(addr, routes(pod.name, args.close))?;
        eprintln!("serve-hostname: serving HTTP on {}", listener.addr());
        Some(listener)
    } else {
        None
    };
    let stop = life.stopped().await;
    if let Some(http) = http {
        http.stop().await;
    }
    Ok(stop.exit_code())
}

/// Every path and method answers the name.
fn routes(name: String, close: bool) -> impl Fn(&mut web::ServiceConfig) + Send + Clone + 'static {
    move |cfg| {
        let name = name.clone();
        cfg.default_service(web::to(move || {
            let response = text(StatusCode::OK, name.clone());
            async move {
                if close {
                    closing(response)
                } else {
                    response
                }
            }
        }));
    }
}

async fn serve_tcp(listener: TcpListener, name: String) {
    loop {
        match listener.accept().await {
            Ok((mut stream, _)) => {
                // One slow client must not hold up the others.
                let name = name.clone();
                actix_web::rt::spawn(async move {
                    let _ = stream.write_all(name.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
            Err(e) => eprintln!("serve-hostname: TCP accept failed: {e}"),
        }
    }
}

async fn serve_udp(socket: UdpSocket, name: String) {
    let mut buffer = [0u8; 64];
    loop {
        match socket.recv_from(&mut buffer).await {
            Ok((_, peer)) => {
                if let Err(e) = socket.send_to(name.as_bytes(), peer).await {
                    eprintln!("serve-hostname: cannot answer {peer} over UDP: {e}");
                }
            }
            Err(e) => eprintln!("serve-hostname: UDP receive failed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::{self, TestRequest};
    use actix_web::App;

    use super::super::tests::parse;
    use super::super::Agnhost;
    use super::*;

    fn serve_hostname(argv: &[&str]) -> Result<Args, clap::Error> {
        let argv: Vec<&str> =
            std::iter::once("serve-hostname").chain(argv.iter().copied()).collect();
        parse(&argv).map(|args| match args.command {
            Agnhost::ServeHostname(args) => args,
            other => panic!("parsed as {other:?}"),
        })
    }

    #[test]
    fn flags_use_agnhost_names_and_defaults() {
        let args = serve_hostname(&[]).unwrap();
        assert_eq!(
            (args.port, args.http, args.tcp, args.udp, args.close),
            (9376, true, false, false, false)
        );
        let args = serve_hostname(&["--port=80", "--http=false", "--udp", "--tcp=true"]).unwrap();
        assert_eq!((args.port, args.http, args.tcp, args.udp), (80, false, true, true));
        assert!(serve_hostname(&["--close-connection"]).unwrap().close);
        assert!(serve_hostname(&["--close=false"]).map(|a| !a.close).unwrap());
        assert!(serve_hostname(&["--http=maybe"]).is_err());
        assert!(serve_hostname(&["--port=-1"]).is_err());
    }

    #[actix_web::test]
    async fn http_and_tcp_together_is_a_usage_error() {
        let args = serve_hostname(&["--tcp", "--port=1"]).unwrap();
        let pod = PodEnv { name: "p".into(), ip: [127, 0, 0, 1].into() };
        assert!(matches!(run(args, pod).await, Err(ImageError::Usage(_))));
    }

    #[actix_web::test]
    async fn every_request_gets_the_name() {
        for close in [false, true] {
            let app = test::init_service(App::new().configure(routes("mypod".into(), close))).await;
            for req in [TestRequest::get().uri("/"), TestRequest::post().uri("/any/path")] {
                let response = test::call_service(&app, req.to_request()).await;
                assert_eq!(response.status(), StatusCode::OK);
                assert_eq!(response.response().head().keep_alive(), !close);
                assert_eq!(test::read_body(response).await, "mypod");
            }
        }
    }

    #[actix_web::test]
    async fn raw_tcp_and_udp_answer_the_name() {
        use tokio::io::AsyncReadExt;

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp_addr = listener.local_addr().unwrap();
        actix_web::rt::spawn(serve_tcp(listener, "mypod".into()));
        let mut stream = tokio::net::TcpStream::connect(tcp_addr).await.unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.unwrap();
        assert_eq!(reply, "mypod");

        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let udp_addr = socket.local_addr().unwrap();
        actix_web::rt::spawn(serve_udp(socket, "mypod".into()));
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.send_to(b"hi", udp_addr).await.unwrap();
        let mut buffer = [0u8; 64];
        let n = client.recv(&mut buffer).await.unwrap();
        assert_eq!(&buffer[..n], b"mypod");
    }
}
