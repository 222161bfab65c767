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
use crate::model::text::go_quote;

/// The most of a response body the kubelet reads (`maxRespBodyLength`, 10 KiB).
const MAX_BODY: usize = 10 * 1024;

/// How many redirects a probe follows before it fails (Go's client: "stopped after 10
/// redirects").
const MAX_REDIRECTS: usize = 10;

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
        let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
        Target { https, host: host.to_string(), port, path }
    }

    /// The headers an `HTTPGetAction` adds to its request.
    pub fn headers_of(action: &k8s_openapi::api::core::v1::HTTPGetAction) -> Vec<(String, String)> {
        action.http_headers.iter().flatten().map(|h| (h.name.clone(), h.value.clone())).collect()
    }

    /// `host:port`, brackets around an IPv6 host (Go's `net.JoinHostPort`).
    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The URL as the kubelet writes it: the port always shown.
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority(), self.path)
    }

    /// Where a `Location` header sent back from this target points, if it can be read.
    fn redirected(&self, location: &str) -> Option<Target> {
        let next = url::Url::parse(&self.url()).ok()?.join(location).ok()?;
        let https = match next.scheme() {
            "http" => false,
            "https" => true,
            _ => return None,
        };
        let host = match next.host()? {
            url::Host::Ipv6(ip) => ip.to_string(),
            other => other.to_string(),
        };
        let port = next.port_or_known_default()?;
        let mut path = next.path().to_string();
        if let Some(query) = next.query() {
            path.push('?');
            path.push_str(query);
        }
        Some(Target { https, host, port, path })
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
) -> Result<Response, String> {
    let mut current = target.clone();
    for _ in 0..MAX_REDIRECTS {
        let response = get(&current, headers, user_agent).await?;
        let next = response.redirect().and_then(|l| current.redirected(l));
        match next {
            Some(next) if next.host == target.host => current = next,
            _ => return Ok(response),
        }
    }
    Err(format!("Get {}: stopped after {MAX_REDIRECTS} redirects", go_quote(&current.url())))
}

/// One GET of `target`, without following redirects.
pub(crate) async fn get(
    target: &Target,
    headers: &[(String, String)],
    user_agent: &str,
) -> Result<Response, String> {
    let failed = |error: String| format!("Get {}: {error}", go_quote(&target.url()));
    let tcp = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| failed(dial_error(&target.host, target.port, &e)))?;
    let mut request = hyper::Request::get(&target.path)
        .header(hyper::header::HOST, target.authority())
        .header(hyper::header::USER_AGENT, user_agent)
        .header(hyper::header::ACCEPT, "*/*")
        .header(hyper::header::CONNECTION, "close");
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = request.body(Empty::<Bytes>::new()).map_err(|e| failed(e.to_string()))?;
    let response = if target.https {
        let name = server_name(&target.host).map_err(&failed)?;
        let tls = TlsConnector::from(insecure_tls())
            .connect(name, tcp)
            .await
            .map_err(|e| failed(e.to_string()))?;
        send(tls, request).await
    } else {
        send(tcp, request).await
    };
    response.map_err(failed)
}

/// Sends `request` on a fresh HTTP/1.1 connection over `io` and reads the answer.
async fn send<IO>(io: IO, request: hyper::Request<Empty<Bytes>>) -> Result<Response, String>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    // Header names as Go writes them: `User-Agent`, `X-Custom`.
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(connection);
    let response = match sender.send_request(request).await {
        Ok(response) => response,
        // Go's words for a connection closed before an answer.
        Err(e) if e.is_incomplete_message() => {
            driver.abort();
            return Err("EOF".into());
        }
        Err(e) => {
            driver.abort();
            return Err(e.to_string());
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
            _ => break,
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
/// `InsecureSkipVerify`. Signatures are still checked, so the handshake is real TLS.
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

/// Accepts every server certificate, checking only that the handshake is signed by it.
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
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
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
            let (status, location, body) = match path_of(head) {
                "/local" => ("302 Found", "/healthz?from=local".to_string(), ""),
                "/absolute" => ("301 Moved", format!("http://127.0.0.1:{port}/healthz"), ""),
                "/elsewhere" => ("302 Found", "http://192.0.2.1/healthz".to_string(), "gone"),
                "/loop" => ("307 Temporary Redirect", "/loop".to_string(), ""),
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
        assert_eq!(
            looped,
            format!("Get \"http://127.0.0.1:{port}/loop\": stopped after 10 redirects")
        );
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
        assert!(target.redirected("ftp://x/").is_none());
    }
}
