//! Container probes: exec (exit code 0), httpGet (a status from 200 to 399, over HTTP or
//! HTTPS), tcpSocket (a connection) and grpc (the health service answers `SERVING`), each
//! bounded by the probe's timeout.
//!
//! # Layout
//! - `http.rs`: the kubelet's HTTP(S) GET, shared with lifecycle hooks.
//! - `grpc.rs`: the `grpc.health.v1.Health/Check` call.

pub mod grpc;
pub(crate) mod http;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::net::TcpStream;

use crate::model::text::go_quote;

/// The outcome of one probe run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// A success the kubelet warns about (a redirect to another host, not followed).
    Warning(String),
    Failure(String),
    /// The probe could not be run to a result (a port that names none, a body cut short): the
    /// kubelet says it "errored" and counts it neither as a success nor as a failure.
    Error(String),
}

/// How many times a probe that errored is run in one go (the kubelet's `maxProbeRetries`).
const TRIES_WHEN_ERRORED: usize = 3;

/// How much of an exec probe's output is kept (the kubelet's `maxReadLength`, 10 KiB).
const MAX_EXEC_OUTPUT: usize = 10 * 1024;

/// Runs `probe` against a container of the pod at `pod_ip`: once, or, while it errors, up to
/// three times, as the kubelet's prober does.
pub async fn run(
    probe: &Probe,
    container: &Container,
    pod_ip: &str,
    env: &[(String, String)],
    launchers: &[String],
) -> Outcome {
    let mut outcome = run_once(probe, container, pod_ip, env, launchers).await;
    for _ in 1..TRIES_WHEN_ERRORED {
        if !matches!(outcome, Outcome::Error(_)) {
            break;
        }
        outcome = run_once(probe, container, pod_ip, env, launchers).await;
    }
    outcome
}

async fn run_once(
    probe: &Probe,
    container: &Container,
    pod_ip: &str,
    env: &[(String, String)],
    launchers: &[String],
) -> Outcome {
    let timeout = Duration::from_secs(probe.timeout_seconds.unwrap_or(1).max(1) as u64);
    if let Some(exec) = &probe.exec {
        // `$(VAR)` references to the container's own variables with values are expanded, as
        // the kubelet expands them (those from a source are empty here, as there).
        let statics: Vec<(String, String)> = (container.env.iter().flatten())
            .map(|var| (var.name.clone(), var.value.clone().unwrap_or_default()))
            .collect();
        let command: Vec<String> = (exec.command.iter().flatten())
            .map(|arg| super::launch::expand(arg, &statics))
            .collect();
        let run = [launchers, &command[..]].concat();
        // The kubelet's words for each handler's timeout.
        let timed_out = format!("command {} timed out", go_quote(&command.join(" ")));
        let dir = super::runtime::working_dir(container);
        return within(timeout, exec_probe(&run, env, &dir), timed_out).await;
    }
    if let Some(action) = &probe.http_get {
        let port = match resolve_port(&action.port, container) {
            Ok(port) => port,
            Err(error) => return Outcome::Error(error),
        };
        let target = http::Target::of(action, port, pod_ip);
        let headers = http::Target::headers_of(action);
        let timed_out = format!(
            "Get {}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            go_quote(&target.url())
        );
        return within(timeout, http_probe(&target, &headers), timed_out).await;
    }
    if let Some(tcp) = &probe.tcp_socket {
        let port = match resolve_port(&tcp.port, container) {
            Ok(port) => port,
            Err(error) => return Outcome::Error(error),
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
    if let Some(action) = &probe.grpc {
        let port = match resolve_port(&IntOrString::Int(action.port), container) {
            Ok(port) => port,
            Err(error) => return Outcome::Error(error),
        };
        let service = action.service.as_deref().unwrap_or("");
        return grpc::probe(pod_ip, port, service, timeout).await;
    }
    Outcome::Failure("the probe has no handler (exec, httpGet, tcpSocket or grpc)".into())
}

/// `attempt`'s outcome, or a failure saying `timed_out` once `timeout` has passed.
async fn within(
    timeout: Duration,
    attempt: impl std::future::Future<Output = Outcome>,
    timed_out: String,
) -> Outcome {
    tokio::time::timeout(timeout, attempt).await.unwrap_or(Outcome::Failure(timed_out))
}

/// A numeric port, or a named one looked up in the container's ports (else read as a
/// number); why not, in the kubelet's words (`ResolveContainerPort`).
pub(super) fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    let number = match port {
        IntOrString::Int(p) => i64::from(*p),
        IntOrString::String(name) => {
            let named = container.ports.iter().flatten().find(|p| p.name.as_deref() == Some(name));
            match named {
                Some(p) => i64::from(p.container_port),
                None => name.parse::<i64>().map_err(|_| {
                    format!("strconv.Atoi: parsing {}: invalid syntax", go_quote(name))
                })?,
            }
        }
    };
    u16::try_from(number)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("invalid port number: {number}"))
}

/// Runs an exec probe's command: a success when it exits 0, else a failure whose message is
/// what it wrote (its output and errors as written, the first 10 KiB), as the kubelet's; a
/// command that could not be started at all errored (the kubelet counts that for nothing).
async fn exec_probe(command: &[String], env: &[(String, String)], dir: &Path) -> Outcome {
    let Some(mut process) = super::runtime::command(command, env, Some(dir)) else {
        return Outcome::Failure("the exec probe has no command".into());
    };
    match exec_output(&mut process).await {
        Ok((0, _)) => Outcome::Success,
        Ok((code, written)) => {
            let written = String::from_utf8_lossy(&written).into_owned();
            let unstarted =
                matches!(code, 126 | 127) && written.starts_with(super::runtime::CANNOT_RUN);
            if unstarted {
                Outcome::Error(written.trim_end().to_string())
            } else {
                Outcome::Failure(written)
            }
        }
        Err(e) => Outcome::Error(format!("command {}: {e}", go_quote(&command.join(" ")))),
    }
}

/// Runs `process` with its output and errors into one pipe, as written; its exit code (128 and
/// the signal's number when a signal ended it) and the first [`MAX_EXEC_OUTPUT`] bytes.
async fn exec_output(process: &mut tokio::process::Command) -> std::io::Result<(i32, Vec<u8>)> {
    let (sender, mut receiver) = tokio::net::unix::pipe::pipe()?;
    let writer = sender.into_blocking_fd()?;
    process.stdin(Stdio::null()).stderr(writer.try_clone()?).stdout(writer).kill_on_drop(true);
    let mut child = super::runtime::huge_pages::spawn(process)?;
    // The pipe's writing ends are the child's alone now: its end is the pipe's.
    process.stdout(Stdio::null()).stderr(Stdio::null());
    let mut written = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = receiver.read(&mut buffer).await?;
        if read == 0 {
            break;
        }
        let room = MAX_EXEC_OUTPUT.saturating_sub(written.len());
        written.extend_from_slice(&buffer[..read.min(room)]);
    }
    let status = child.wait().await?;
    let code = status.code().unwrap_or_else(|| {
        128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)
    });
    Ok((code, written))
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

/// A GET judged as the kubelet judges it: 200-299 succeeds; 300-399, a redirect not followed
/// (to another host), succeeds with a warning; any other status fails.
async fn http_probe(target: &http::Target, headers: &[(String, String)]) -> Outcome {
    match http::get_following(target, headers, "kube-probe/1.32").await {
        Ok(response) if (200..300).contains(&response.status) => Outcome::Success,
        Ok(response) if (300..400).contains(&response.status) => Outcome::Warning(format!(
            "Probe terminated redirects, Response body: {}",
            response.body
        )),
        Ok(response) => {
            Outcome::Failure(format!("HTTP probe failed with statuscode: {}", response.status))
        }
        Err(error) if error.kind == http::ErrorKind::Body => Outcome::Error(error.text),
        Err(error) => Outcome::Failure(error.text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
        assert_eq!(outcome, Outcome::Failure("not ok\n".into()));
        // Output and errors as written, the first 10 KiB of them.
        let both = probe(json!({"exec": {"command": ["sh", "-c",
            "echo one; echo two >&2; echo three; head -c 20000 /dev/zero | tr '\\0' a; exit 2"]}}));
        let Outcome::Failure(written) = run(&both, &container(), "127.0.0.1", &env, &[]).await
        else {
            panic!("a failure")
        };
        assert!(written.starts_with("one\ntwo\nthree\naaa"), "{written:?}");
        assert_eq!(written.len(), MAX_EXEC_OUTPUT);
        // `$(VAR)` is the container's own variable's value; the environment is the run's.
        let mut with_env = container();
        with_env.env =
            Some(vec![serde_json::from_value(json!({"name": "WANT", "value": "yes"})).unwrap()]);
        let expanded = probe(json!({"exec": {"command": ["test", "$(WANT)", "=", "yes"]}}));
        assert_eq!(run(&expanded, &with_env, "127.0.0.1", &[], &[]).await, Outcome::Success);
        // A command that cannot be started errored: it counts for nothing.
        let missing = probe(json!({"exec": {"command": ["/no/such/binary"]}}));
        assert!(matches!(
            run(&missing, &container(), "127.0.0.1", &env, &[]).await,
            Outcome::Error(_)
        ));
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
        let errored = Outcome::Error("strconv.Atoi: parsing \"nope\": invalid syntax".into());
        assert_eq!(run(&unknown, &container(), "127.0.0.1", &[], &[]).await, errored);
        let huge = probe(json!({"tcpSocket": {"port": "70000"}}));
        let errored = Outcome::Error("invalid port number: 70000".into());
        assert_eq!(run(&huge, &container(), "127.0.0.1", &[], &[]).await, errored);
    }

    #[tokio::test]
    async fn a_probe_that_errors_is_run_again_up_to_three_times() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // Bodies cut short (errors) twice, then a whole answer; then three cut short.
        tokio::spawn(async move {
            for whole in [false, false, true, false, false, false] {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 1024];
                let _ = socket.read(&mut buf).await;
                let reply: &[u8] = if whole {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                } else {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok"
                };
                let _ = socket.write_all(reply).await;
            }
        });
        let http = probe(json!({"httpGet": {"path": "/", "port": port}}));
        assert_eq!(run(&http, &container(), "127.0.0.1", &[], &[]).await, Outcome::Success);
        let errored = Outcome::Error("unexpected EOF".into());
        assert_eq!(run(&http, &container(), "127.0.0.1", &[], &[]).await, errored);
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
