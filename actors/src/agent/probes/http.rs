//! The kubelet's HTTP GET, shared by httpGet probes and lifecycle hooks: plain HTTP or HTTPS
//! (the server's certificate is not checked, as the kubelet's client does not check it), one
//! connection a request (`Connection: close`), and what went wrong in Go's words
//! (`Get "http://...": dial tcp ...`).

use std::sync::{Arc, OnceLock};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::dial_error;
use crate::model::text::{go_quote, join_host_port};

/// The most of a response body the kubelet reads (`maxRespBodyLength`, 10 KiB).
const MAX_BODY: usize = 10 * 1024;

/// How many redirects a probe follows before it fails (Go's client: "stopped after 10
/// redirects").
const MAX_REDIRECTS: usize = 10;

/// What Go escapes when it writes a path and query: controls, space, non-ASCII and the
/// characters no URL may hold.
const NOT_IN_URLS: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'<')
    .add(b'>')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// Why a GET got no whole response, in Go's words, and of which kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GetError {
    pub text: String,
    pub kind: ErrorKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// No response (refused, reset, a bad answer).
    Request,
    /// An HTTPS request answered in plain HTTP.
    PlainHttpAnswer,
    /// The response's body was cut short.
    Body,
}

/// Where a GET goes: `scheme://host:port/path` (the path may carry a query).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub https: bool,
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl Target {
    /// The target of an `HTTPGetAction`, against `default_host` (the pod's IP) when it names
    /// none.
    pub fn of(
        action: &k8s_openapi::api::core::v1::HTTPGetAction,
        port: u16,
        default_host: &str,
    ) -> Self {
        let https = action.scheme.as_deref().is_some_and(|s| s.eq_ignore_ascii_case("HTTPS"));
        let host = action.host.as_deref().filter(|h| !h.is_empty()).unwrap_or(default_host);
        let path = action.path.as_deref().unwrap_or("/");
        // The fragment is the client's; what a URL cannot carry is escaped, as Go's URL writes it.
        let path = path.split('#').next().unwrap_or("");
        let path = percent_encoding::utf8_percent_encode(path, NOT_IN_URLS).to_string();
        let path = if path.starts_with('/') { path } else { format!("/{path}") };
        Target { https, host: host.to_string(), port, path }
    }

    /// The headers an `HTTPGetAction` adds to its request.
    pub fn headers_of(action: &k8s_openapi::api::core::v1::HTTPGetAction) -> Vec<(String, String)> {
        action.http_headers.iter().flatten().map(|h| (h.name.clone(), h.value.clone())).collect()
    }

    /// `host:port`, brackets around an IPv6 host (Go's `net.JoinHostPort`).
    pub fn authority(&self) -> String {
        join_host_port(&self.host, self.port)
    }

    /// The URL as the kubelet writes it: the port always shown.
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority(), self.path)
    }

    /// Where a `Location` header sent back from this target points, or why it cannot be
    /// followed, in Go's words.
    fn redirected(&self, location: &str) -> Result<Target, String> {
        let unreadable = |e: String| {
            let quoted = go_quote(location);
            format!(
                "Get {}: failed to parse Location header {quoted}: parse {quoted}: {e}",
                go_quote(&self.url())
            )
        };
        let base = url::Url::parse(&self.url()).map_err(|e| unreadable(e.to_string()))?;
        let next = base.join(location).map_err(|e| unreadable(e.to_string()))?;
        let https = match next.scheme() {
            "http" => false,
            "https" => true,
            other => {
                let scheme = go_quote(other);
                return Err(format!(
                    "Get {}: unsupported protocol scheme {scheme}",
                    go_quote(location)
                ));
            }
        };
        let host = match next.host() {
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(other) => other.to_string(),
            None => {
                return Err(format!("Get {}: http: no Host in request URL", go_quote(location)))
            }
        };
        let port = next.port_or_known_default().unwrap_or(if https { 443 } else { 80 });
        let mut path = next.path().to_string();
        if let Some(query) = next.query() {
            path.push('?');
            path.push_str(query);
        }
        Ok(Target { https, host, port, path })
    }
}

/// A response: its status code and the first 10 KiB of its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Response {
    pub status: u16,
    pub body: String,
    location: Option<String>,
}

impl Response {
    /// A redirect Go's client follows (301, 302, 303, 307, 308) with where it points.
    fn redirect(&self) -> Option<&str> {
        matches!(self.status, 301 | 302 | 303 | 307 | 308).then_some(self.location.as_deref())?
    }
}

/// GETs `target` as a probe does: redirects on the same host (any port or scheme) are
/// followed, ten at most; the answer is the last response, a redirect to another host
/// included.
pub(crate) async fn get_following(
    target: &Target,
    headers: &[(String, String)],
    user_agent: &str,
) -> Result<Response, GetError> {
    let mut current = target.clone();
    for redirects in 1.. {
        let response = get(&current, headers, user_agent).await?;
        let Some(location) = response.redirect() else { return Ok(response) };
        let next = current.redirected(location).map_err(GetError::request)?;
        if next.host != target.host {
            return Ok(response);
        }
        if redirects == MAX_REDIRECTS {
            let text =
                format!("Get {}: stopped after {MAX_REDIRECTS} redirects", go_quote(location));
            return Err(GetError::request(text));
        }
        current = next;
    }
    unreachable!("the loop returns by its tenth redirect")
}

impl GetError {
    fn request(text: String) -> Self {
        GetError { text, kind: ErrorKind::Request }
    }
}

/// One GET of `target`, without following redirects.
pub(crate) async fn get(
    target: &Target,
    headers: &[(String, String)],
    user_agent: &str,
) -> Result<Response, GetError> {
    let failed = |kind, error: String| GetError {
        text: format!("Get {}: {error}", go_quote(&target.url())),
        kind,
    };
    let tcp = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| failed(ErrorKind::Request, dial_error(&target.host, target.port, &e)))?;
    let request =
        request(target, headers, user_agent).map_err(|e| failed(ErrorKind::Request, e))?;
    let response = if target.https {
        let name = server_name(&target.host).map_err(|e| failed(ErrorKind::Request, e))?;
        let tls = TlsConnector::from(insecure_tls()).connect(name, tcp).await.map_err(|e| {
            match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
                // The first bytes back were no TLS record: an HTTP server's answer.
                Some(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)) => {
                    failed(
                        ErrorKind::PlainHttpAnswer,
                        "http: server gave HTTP response to HTTPS client".into(),
                    )
                }
                _ => failed(ErrorKind::Request, e.to_string()),
            }
        })?;
        send(tls, request).await
    } else {
        send(tcp, request).await
    };
    response.map_err(|(kind, e)| match kind {
        // Go's body reader says only what went wrong, not which request.
        ErrorKind::Body => GetError { text: e, kind },
        _ => failed(kind, e),
    })
}

/// The GET the kubelet writes: its `User-Agent` and `Accept: */*` unless the action gives its
/// own (an empty one: none sent), the action's `Host` instead of the target's.
fn request(
    target: &Target,
    headers: &[(String, String)],
    user_agent: &str,
) -> Result<hyper::Request<Empty<Bytes>>, String> {
    let given = |name: &str| {
        headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    };
    let host =
        given("Host").filter(|h| !h.is_empty()).map_or_else(|| target.authority(), str::to_string);
    let mut request = hyper::Request::get(&target.path)
        .header(hyper::header::HOST, host)
        .header(hyper::header::CONNECTION, "close");
    if given("User-Agent").is_none() {
        request = request.header(hyper::header::USER_AGENT, user_agent);
    }
    if given("Accept").is_none() {
        request = request.header(hyper::header::ACCEPT, "*/*");
    }
    for (name, value) in headers {
        let empty_default = value.is_empty()
            && (name.eq_ignore_ascii_case("Accept") || name.eq_ignore_ascii_case("User-Agent"));
        if !name.eq_ignore_ascii_case("Host") && !empty_default {
            request = request.header(name.as_str(), value.as_str());
        }
    }
    request.body(Empty::<Bytes>::new()).map_err(|e| e.to_string())
}

/// Sends `request` on a fresh HTTP/1.1 connection over `io` and reads the answer.
async fn send<IO>(
    io: IO,
    request: hyper::Request<Empty<Bytes>>,
) -> Result<Response, (ErrorKind, String)>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    // Header names as Go writes them: `User-Agent`, `X-Custom`.
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| (ErrorKind::Request, e.to_string()))?;
    let driver = tokio::spawn(connection);
    let response = match sender.send_request(request).await {
        Ok(response) => response,
        // Go's words for a connection closed before an answer.
        Err(e) if e.is_incomplete_message() => {
            driver.abort();
            return Err((ErrorKind::Request, "EOF".into()));
        }
        Err(e) => {
            driver.abort();
            return Err((ErrorKind::Request, e.to_string()));
        }
    };
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get(hyper::header::LOCATION)
        .and_then(|l| l.to_str().ok())
        .map(str::to_string);
    // As the kubelet's `ReadAtMost`: a longer body is cut at the limit, not an error.
    let mut body = response.into_body();
    let mut read = Vec::new();
    while read.len() < MAX_BODY {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    read.extend_from_slice(data);
                }
            }
            // Go's words for a body that ends before its length.
            Some(Err(_)) => {
                driver.abort();
                return Err((ErrorKind::Body, "unexpected EOF".into()));
            }
            None => break,
        }
    }
    driver.abort();
    read.truncate(MAX_BODY);
    Ok(Response { status, body: String::from_utf8_lossy(&read).into_owned(), location })
}

/// The name TLS is spoken to: an IP address (no SNI is sent, as Go sends none for one) or a
/// DNS name.
fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("invalid host {host:?}: {e}"))
}

/// A TLS client configuration that takes any certificate: the kubelet's probes and hooks set
/// `InsecureSkipVerify`.
fn insecure_tls() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .expect("ring supports the default TLS versions")
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth();
            Arc::new(config)
        })
        .clone()
}

/// Accepts every server certificate and handshake signature: with any certificate taken, a
/// signature proves nothing, and checking it would refuse certificates Go reads but rustls does
/// not (version 1, as `openssl x509 -req` makes them).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// Serves every connection on `listener` with `reply(request head)` over `wrap`ped streams.
    async fn serve<F>(listener: TcpListener, tls: Option<tokio_rustls::TlsAcceptor>, reply: F)
    where
        F: Fn(&str) -> String + Send + Sync + 'static,
    {
        let reply = Arc::new(reply);
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (tls, reply) = (tls.clone(), reply.clone());
            tokio::spawn(async move {
                let mut stream: Box<dyn Stream> = match tls {
                    Some(acceptor) => match acceptor.accept(tcp).await {
                        Ok(stream) => Box::new(stream),
                        Err(_) => return,
                    },
                    None => Box::new(tcp),
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = reply(&String::from_utf8_lossy(&head));
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    }

    trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
    impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for T {}

    /// The path a request head asks for.
    fn path_of(head: &str) -> &str {
        head.split_whitespace().nth(1).unwrap_or("")
    }

    fn target(https: bool, port: u16, path: &str) -> Target {
        Target { https, host: "127.0.0.1".into(), port, path: path.into() }
    }

    async fn listener() -> (TcpListener, u16) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        (listener, port)
    }

    #[tokio::test]
    async fn redirects_are_followed_on_the_same_host_only() {
        let (listener, port) = listener().await;
        tokio::spawn(serve(listener, None, move |head| {
            if path_of(head) == "/short" {
                return "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nten bytes.".into();
            }
            let (status, location, body) = match path_of(head) {
                "/local" => ("302 Found", "/healthz?from=local".to_string(), ""),
                "/absolute" => ("301 Moved", format!("http://127.0.0.1:{port}/healthz"), ""),
                "/elsewhere" => ("302 Found", "http://192.0.2.1/healthz".to_string(), "gone"),
                "/loop" => ("307 Temporary Redirect", "/loop".to_string(), ""),
                "/ftp" => ("302 Found", "ftp://127.0.0.1/x".to_string(), ""),
                "/healthz?from=local" | "/healthz" => {
                    ("500 Internal Server Error", String::new(), "bad")
                }
                _ => ("404 Not Found", String::new(), ""),
            };
            let location = if location.is_empty() {
                String::new()
            } else {
                format!("Location: {location}\r\n")
            };
            format!("HTTP/1.1 {status}\r\n{location}Content-Length: {}\r\n\r\n{body}", body.len())
        }));
        let get = |path: &'static str| async move {
            get_following(&target(false, port, path), &[], "kube-probe/1.32").await
        };
        // Followed to where the answer is: a failure the first response alone would hide.
        let followed = get("/local").await.unwrap();
        assert_eq!((followed.status, followed.body.as_str()), (500, "bad"));
        assert_eq!(get("/absolute").await.unwrap().status, 500);
        // Another host: the redirect itself is the answer, body and all.
        let left = get("/elsewhere").await.unwrap();
        assert_eq!((left.status, left.body.as_str()), (302, "gone"));
        let looped = get("/loop").await.unwrap_err();
        assert_eq!(looped.text, "Get \"/loop\": stopped after 10 redirects");
        // A body cut short: Go's reader's words, alone, and a kind a probe says "errored" of.
        let short = get("/short").await.unwrap_err();
        assert_eq!((short.kind, short.text.as_str()), (ErrorKind::Body, "unexpected EOF"));
        let odd = get("/ftp").await.unwrap_err();
        assert_eq!(odd.text, "Get \"ftp://127.0.0.1/x\": unsupported protocol scheme \"ftp\"");
    }

    #[tokio::test]
    async fn https_takes_any_certificate_and_sends_the_headers() {
        let generated =
            rcgen::generate_simple_self_signed(vec!["somewhere.invalid".into()]).unwrap();
        let cert = generated.cert.der().clone();
        let key =
            rustls::pki_types::PrivateKeyDer::try_from(generated.key_pair.serialize_der()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
        let (listener, port) = listener().await;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        tokio::spawn(serve(listener, Some(acceptor), |head| {
            let asked =
                head.contains("X-Probe: yes") && head.contains("User-Agent: kube-probe/1.32");
            let status = if asked { "200 OK" } else { "400 Bad Request" };
            format!("HTTP/1.1 {status}\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
        }));
        let headers = [("X-Probe".to_string(), "yes".to_string())];
        let answer = get(&target(true, port, "/"), &headers, "kube-probe/1.32").await.unwrap();
        assert_eq!((answer.status, answer.body.as_str()), (200, "ok"));
        // Plain HTTP to a TLS port gets no answer: the connection ends.
        let plain = get(&target(false, port, "/"), &headers, "kube-probe/1.32").await;
        assert!(plain.is_err(), "{plain:?}");
        // TLS to a plain HTTP server: Go's words, and a kind a hook falls back on.
        // (An HTTP server answers a TLS hello, which it cannot read, with a 400.)
        let (plain_server, http_port) = self::listener().await;
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = plain_server.accept().await {
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            }
        });
        let answered = get(&target(true, http_port, "/"), &headers, "kube-probe/1.32").await;
        let error = answered.unwrap_err();
        assert_eq!(error.kind, ErrorKind::PlainHttpAnswer);
        assert!(
            error.text.ends_with(": http: server gave HTTP response to HTTPS client"),
            "{error:?}"
        );
    }

    #[test]
    fn a_given_host_user_agent_or_accept_replaces_the_kubelets() {
        let t = target(false, 80, "/");
        let sent = |given: &[(&str, &str)]| {
            let given: Vec<(String, String)> =
                given.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
            let request = request(&t, &given, "kube-probe/1.32").unwrap();
            let mut headers: Vec<String> = request
                .headers()
                .iter()
                .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap()))
                .collect();
            headers.sort();
            headers
        };
        assert_eq!(
            sent(&[]),
            [
                "accept: */*",
                "connection: close",
                "host: 127.0.0.1:80",
                "user-agent: kube-probe/1.32"
            ]
        );
        let given = [("host", "example.com"), ("User-Agent", "mine"), ("Accept", ""), ("X-A", "b")];
        assert_eq!(
            sent(&given),
            ["connection: close", "host: example.com", "user-agent: mine", "x-a: b"]
        );
    }

    #[test]
    fn targets_read_as_the_kubelet_writes_them() {
        let action = serde_json::from_value(serde_json::json!({
            "scheme": "HTTPS", "path": "healthz?x=1", "port": 1,
            "httpHeaders": [{"name": "A", "value": "b"}]}))
        .unwrap();
        let target = Target::of(&action, 8443, "::1");
        assert_eq!(target.url(), "https://[::1]:8443/healthz?x=1");
        assert_eq!(Target::headers_of(&action), vec![("A".to_string(), "b".to_string())]);
        let next = target.redirected("//[::1]:9000/other").unwrap();
        assert_eq!((next.host.as_str(), next.port, next.path.as_str()), ("::1", 9000, "/other"));
        assert!(target.redirected("ftp://x/").is_err());
        let spaced =
            serde_json::from_value(serde_json::json!({"path": "/a dir/ä?q=1#frag", "port": 1}))
                .unwrap();
        assert_eq!(Target::of(&spaced, 80, "127.0.0.1").path, "/a%20dir/%C3%A4?q=1");
    }
}
