//! Container probes: exec (exit code 0), httpGet (a status from 200 to 399) and tcpSocket (a
//! connection), each bounded by the probe's timeout.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::model::text::go_quote;

/// The outcome of one probe run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure(String),
}

/// Runs `probe` once against a container of the pod at `pod_ip`.
pub async fn run(
    probe: &Probe,
    container: &Container,
    pod_ip: &str,
    env: &[(String, String)],
    run_as: &[String],
) -> Outcome {
    let timeout = Duration::from_secs(probe.timeout_seconds.unwrap_or(1).max(1) as u64);
    if let Some(exec) = &probe.exec {
        let command = exec.command.as_deref().unwrap_or(&[]);
        let run = [run_as, command].concat();
        // The kubelet's words for each handler's timeout.
        let timed_out = format!("command {} timed out", go_quote(&command.join(" ")));
        let dir = super::runtime::working_dir(container);
        return within(timeout, exec_probe(&run, env, &dir), timed_out).await;
    }
    if let Some(http) = &probe.http_get {
        let Some(port) = resolve_port(&http.port, container) else {
            return Outcome::Failure(format!("unknown port {:?}", http.port));
        };
        if http.scheme.as_deref().is_some_and(|s| s.eq_ignore_ascii_case("HTTPS")) {
            return Outcome::Failure("HTTPS probes are not supported".into());
        }
        let host = http.host.as_deref().filter(|h| !h.is_empty()).unwrap_or(pod_ip);
        let headers: Vec<(String, String)> =
            http.http_headers.iter().flatten().map(|h| (h.name.clone(), h.value.clone())).collect();
        let path = http.path.as_deref().unwrap_or("/");
        let timed_out = format!(
            "Get {}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            go_quote(&url(host, port, path))
        );
        return within(timeout, http_probe(host, port, path, &headers), timed_out).await;
    }
    if let Some(tcp) = &probe.tcp_socket {
        let Some(port) = resolve_port(&tcp.port, container) else {
            return Outcome::Failure(format!("unknown port {:?}", tcp.port));
        };
        let host = tcp.host.as_deref().filter(|h| !h.is_empty()).unwrap_or(pod_ip);
        let connect = async {
            match TcpStream::connect((host, port)).await {
                Ok(_) => Outcome::Success,
                Err(e) => Outcome::Failure(dial_error(host, port, &e)),
            }
        };
        return within(timeout, connect, format!("dial tcp {host}:{port}: i/o timeout")).await;
    }
    Outcome::Failure("the probe has no handler (exec, httpGet or tcpSocket)".into())
}

/// `attempt`'s outcome, or a failure saying `timed_out` once `timeout` has passed.
async fn within(
    timeout: Duration,
    attempt: impl std::future::Future<Output = Outcome>,
    timed_out: String,
) -> Outcome {
    tokio::time::timeout(timeout, attempt).await.unwrap_or(Outcome::Failure(timed_out))
}

/// The URL a GET of `path` at `host:port` asks for.
fn url(host: &str, port: u16, path: &str) -> String {
    let slash = if path.starts_with('/') { "" } else { "/" };
    format!("http://{host}:{port}{slash}{path}")
}

/// A numeric port, or a named one looked up in the container's ports.
pub(super) fn resolve_port(port: &IntOrString, container: &Container) -> Option<u16> {
    match port {
        IntOrString::Int(p) => u16::try_from(*p).ok().filter(|p| *p > 0),
        IntOrString::String(name) => name.parse().ok().or_else(|| {
            container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
        }),
    }
}

async fn exec_probe(command: &[String], env: &[(String, String)], dir: &Path) -> Outcome {
    let Some(mut process) = super::runtime::command(command, env, Some(dir)) else {
        return Outcome::Failure("the exec probe has no command".into());
    };
    process.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let output = match super::runtime::huge_pages::spawn(&mut process) {
        Ok(child) => child.wait_with_output().await,
        Err(e) => Err(e),
    };
    match output {
        Ok(out) if out.status.success() => Outcome::Success,
        // As the kubelet's: what the command wrote is the failure's message.
        Ok(out) => {
            let mut written = String::from_utf8_lossy(&out.stdout).into_owned();
            written.push_str(&String::from_utf8_lossy(&out.stderr));
            Outcome::Failure(written.trim_end().to_string())
        }
        Err(e) => Outcome::Failure(format!("command {command:?}: {e}")),
    }
}

/// A failed connection in Go's words, as the kubelet's probes report it: `dial tcp
/// 10.0.0.1:80: connect: connection refused`.
pub fn dial_error(host: &str, port: u16, error: &std::io::Error) -> String {
    let text = error.to_string();
    // Rust adds the errno (`Connection refused (os error 111)`); Go writes it lowercase.
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    let lowered: String =
        chars.next().map(|c| c.to_lowercase().chain(chars).collect()).unwrap_or_default();
    format!("dial tcp {host}:{port}: connect: {lowered}")
}

async fn http_probe(host: &str, port: u16, path: &str, headers: &[(String, String)]) -> Outcome {
    match http_get(host, port, path, headers, "kube-probe/1.32").await {
        Ok(code) if (200..400).contains(&code) => Outcome::Success,
        Ok(code) => Outcome::Failure(format!("HTTP probe failed with statuscode: {code}")),
        Err(error) => Outcome::Failure(error),
    }
}

/// A minimal HTTP/1.1 GET of `path` at `host:port`, as the kubelet's probes and lifecycle
/// hooks send it (`user_agent` says which): the response's status code, or why there was
/// none in Go's words (`Get "http://...": dial tcp ...`).
pub(super) async fn http_get(
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
    user_agent: &str,
) -> Result<u16, String> {
    let url = go_quote(&url(host, port, path));
    let mut stream = match TcpStream::connect((host, port)).await {
        Ok(s) => s,
        Err(e) => return Err(format!("Get {url}: {}", dial_error(host, port, &e))),
    };
    let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: {user_agent}\r\nAccept: */*\r\nConnection: close\r\n"
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    if let Err(e) = stream.write_all(request.as_bytes()).await {
        return Err(format!("Get {url}: {e}"));
    }
    let mut head = Vec::with_capacity(64);
    let mut buf = [0u8; 256];
    while !head.contains(&b'\n') && head.len() < 4096 {
        match stream.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("Get {url}: {e}")),
        }
    }
    let line = String::from_utf8_lossy(&head);
    let code: Option<u16> = line.split_whitespace().nth(1).and_then(|c| c.parse().ok());
    code.ok_or_else(|| format!("Get {url}: malformed HTTP response"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn probe(value: serde_json::Value) -> Probe {
        serde_json::from_value(value).unwrap()
    }

    fn container() -> Container {
        serde_json::from_value(
            json!({"name": "c", "ports": [{"name": "http", "containerPort": 1}]}),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn exec_probes_use_the_exit_code_and_the_environment() {
        let env = vec![("WANT".to_string(), "yes".to_string())];
        let ok = probe(json!({"exec": {"command": ["sh", "-c", "test \"$WANT\" = yes"]}}));
        assert_eq!(run(&ok, &container(), "127.0.0.1", &env, &[]).await, Outcome::Success);
        // What the failed command wrote is the failure, as the kubelet reports it.
        let said = probe(json!({"exec": {"command": ["sh", "-c", "echo not ok; exit 1"]}}));
        let outcome = run(&said, &container(), "127.0.0.1", &env, &[]).await;
        assert_eq!(outcome, Outcome::Failure("not ok".into()));
        let bad = probe(json!({"exec": {"command": ["false"]}}));
        assert!(matches!(
            run(&bad, &container(), "127.0.0.1", &env, &[]).await,
            Outcome::Failure(_)
        ));
        // In the container's working directory: `/` unless it names one.
        let at_root = probe(json!({"exec": {"command": ["sh", "-c", "test \"$(pwd)\" = /"]}}));
        assert_eq!(run(&at_root, &container(), "127.0.0.1", &env, &[]).await, Outcome::Success);
        let mut in_tmp = container();
        in_tmp.working_dir = Some("/tmp".into());
        let at_tmp = probe(json!({"exec": {"command": ["sh", "-c", "test \"$(pwd)\" = /tmp"]}}));
        assert_eq!(run(&at_tmp, &in_tmp, "127.0.0.1", &env, &[]).await, Outcome::Success);
        let slow = probe(json!({"exec": {"command": ["sleep", "5"]}, "timeoutSeconds": 1}));
        let outcome = run(&slow, &container(), "127.0.0.1", &env, &[]).await;
        assert_eq!(outcome, Outcome::Failure("command \"sleep 5\" timed out".into()));
    }

    #[tokio::test]
    async fn http_and_tcp_probes_reach_the_pod() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            for status in ["200 OK", "500 Internal Server Error", "200 OK"] {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 1024];
                let _ = socket.read(&mut buf).await;
                let reply = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
                let _ = socket.write_all(reply.as_bytes()).await;
            }
        });
        let http = probe(json!({"httpGet": {"path": "/healthz", "port": port}}));
        assert_eq!(run(&http, &container(), "127.0.0.1", &[], &[]).await, Outcome::Success);
        assert!(
            matches!(run(&http, &container(), "127.0.0.1", &[], &[]).await, Outcome::Failure(m) if m.contains("500"))
        );
        let tcp = probe(json!({"tcpSocket": {"port": port}}));
        assert_eq!(run(&tcp, &container(), "127.0.0.1", &[], &[]).await, Outcome::Success);
        let named = probe(json!({"tcpSocket": {"port": "http"}}));
        assert!(matches!(
            run(&named, &container(), "127.0.0.1", &[], &[]).await,
            Outcome::Failure(_)
        ));
        let unknown = probe(json!({"tcpSocket": {"port": "nope"}}));
        assert!(
            matches!(run(&unknown, &container(), "127.0.0.1", &[], &[]).await, Outcome::Failure(m) if m.contains("unknown port"))
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_reported_in_gos_words() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let tcp = probe(json!({"tcpSocket": {"port": port}}));
        let refused = format!("dial tcp 127.0.0.1:{port}: connect: connection refused");
        let outcome = run(&tcp, &container(), "127.0.0.1", &[], &[]).await;
        assert_eq!(outcome, Outcome::Failure(refused.clone()));
        let http = probe(json!({"httpGet": {"port": port, "path": "/healthz"}}));
        let outcome = run(&http, &container(), "127.0.0.1", &[], &[]).await;
        let url = format!("http://127.0.0.1:{port}/healthz");
        assert_eq!(outcome, Outcome::Failure(format!("Get \"{url}\": {refused}")));
        // A server that never answers: the Go client's timeout, in its words.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = silent.local_addr().unwrap().port();
        let http = probe(json!({"httpGet": {"port": port, "path": "/slow"}, "timeoutSeconds": 1}));
        let outcome = run(&http, &container(), "127.0.0.1", &[], &[]).await;
        let said = format!(
            "Get \"http://127.0.0.1:{port}/slow\": context deadline exceeded \
             (Client.Timeout exceeded while awaiting headers)"
        );
        assert_eq!(outcome, Outcome::Failure(said));
        drop(silent);
    }
}
